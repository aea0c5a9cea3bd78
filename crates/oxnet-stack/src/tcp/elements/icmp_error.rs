//! TCPIcmpError: ICMP and ICMPv6 errors about our segments (RFC 1122
//! §4.2.3.9, RFC 5927, RFC 8201 / RFC 1191 for the packet-too-big case).
//!
//! Input: the errors the ICMP responders give on their output 1 (the
//! frame as received, the network mark on the *quoted* IP header, the
//! transport mark on the quoted TCP header, the ICMP header the 8 bytes
//! before the network mark). The quoted segment is one we sent: its
//! source is our endpoint. It is believed only if its sequence number
//! lies in SND.UNA..SND.NXT (RFC 5927 §4.1: a blind attacker does not
//! know it). Then:
//!
//! - "fragmentation needed" (ICMP type 3 code 4) and "packet too big"
//!   (ICMPv6 type 2): the MSS drops to the MTU given less the headers
//!   (never below 536 / 1220), and the first unacknowledged segment goes
//!   again at that size (path MTU discovery, RFC 1191 §6.1, RFC 8201);
//! - protocol or port unreachable (type 3 codes 2-3; ICMPv6 type 1 code
//!   4), and ICMPv6 "administratively prohibited": a hard error, which
//!   ends a connection still in SYN-SENT or SYN-RECEIVED with
//!   ECONNREFUSED (Linux's choice; RFC 1122 says SHOULD abort, RFC 5461
//!   argues for it only during the handshake);
//! - the others (net or host unreachable, time exceeded...): soft errors,
//!   remembered, and given as the error if the connection times out.
//!
//! Output: none; the element drops what it reads. Handlers: `errors`,
//! `mtu_updates`, `aborted`, `ignored` (no connection or not in window).

use super::{info, Info, Seg};
use crate::wire::{IpAddress, IpEndpoint, TcpPacket};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct IcmpError {
    info: Option<Info>,
    errors: u64,
    mtu_updates: u64,
    aborted: u64,
    ignored: u64,
}

/// What an error means for TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The path takes packets of at most this many bytes.
    TooBig(u32),
    Hard,
    Soft(i32),
}

/// The ICMP header before the quoted packet: type, code and the MTU
/// field; the family says ICMP or ICMPv6.
fn classify(icmp: &[u8], v6: bool) -> Option<Kind> {
    let (kind, code) = (*icmp.first()?, *icmp.get(1)?);
    let rest = u32::from_be_bytes(icmp.get(4..8)?.try_into().ok()?);
    Some(match (v6, kind, code) {
        // RFC 1191 §4: the next-hop MTU in the low 16 bits.
        (false, 3, 4) => Kind::TooBig(rest & 0xffff),
        (false, 3, 2 | 3) => Kind::Hard,
        (false, 3, _) => Kind::Soft(libc::EHOSTUNREACH),
        (false, 11, _) => Kind::Soft(libc::EHOSTUNREACH),
        (false, 12, _) => Kind::Soft(libc::EPROTO),
        // RFC 4443 §3.2: the MTU in the whole field.
        (true, 2, _) => Kind::TooBig(rest),
        (true, 1, 1 | 4) => Kind::Hard,
        (true, 1, _) => Kind::Soft(libc::EHOSTUNREACH),
        (true, 3, _) => Kind::Soft(libc::EHOSTUNREACH),
        (true, 4, _) => Kind::Soft(libc::EPROTO),
        _ => return None,
    })
}

impl IcmpError {
    fn handle(&mut self, p: &Packet, info: &mut crate::tcp::info::TcpInfo) -> Option<()> {
        let net = usize::try_from(p.network_offset()?).ok()?;
        let icmp = p.get(net.checked_sub(8)?..net)?;
        let quoted = Seg::read(p).or_else(|| quoted_ports_only(p))?;
        let v6 = quoted.key.local.addr.is_ipv6();
        let kind = classify(icmp, v6)?;
        // The quoted segment went from us: its source is our endpoint,
        // which Seg::read reads as the remote one (it reads received
        // segments).
        let key = quoted.key.reversed();
        let r = info.lookup(&key)?;
        let tcb = info.tcbs.get_mut(r)?;
        // RFC 5927 §4.1: only for data in flight.
        if !(tcb.snd_una <= quoted.seq && quoted.seq < tcb.snd_nxt) {
            return None;
        }
        self.errors += 1;
        match kind {
            Kind::TooBig(mtu) => {
                let headers = if v6 { 60 } else { 40 };
                let floor = if v6 { 1220 } else { 536 };
                let mss = mtu.saturating_sub(headers).max(floor).min(u16::MAX as u32) as u16;
                if mss < tcb.snd_mss {
                    tcb.snd_mss = mss;
                    tcb.retransmit_first = true;
                    self.mtu_updates += 1;
                    info.want_output(r);
                }
            }
            Kind::Hard if !tcb.state.synchronized() => {
                self.aborted += 1;
                super::rst_syn::abort(info, r, Some(libc::ECONNREFUSED));
            }
            Kind::Hard => tcb.soft_error = Some(libc::ECONNREFUSED),
            Kind::Soft(e) => tcb.soft_error = Some(e),
        }
        Some(())
    }
}

/// The quoted segment when only its first 8 bytes are there (all RFC 792
/// promises): ports and sequence number.
fn quoted_ports_only(p: &Packet) -> Option<Seg> {
    let net = usize::try_from(p.network_offset()?).ok()?;
    let tcp_at = usize::try_from(p.transport_offset()?).ok()?;
    let ip = p.get(net..)?;
    let (src, dst) = match ip.first()? >> 4 {
        4 if ip.len() >= 20 => (
            IpAddress::V4(std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
            IpAddress::V4(std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
        ),
        6 if ip.len() >= 40 => {
            let s: [u8; 16] = ip[8..24].try_into().ok()?;
            let d: [u8; 16] = ip[24..40].try_into().ok()?;
            (IpAddress::V6(s.into()), IpAddress::V6(d.into()))
        }
        _ => return None,
    };
    let t = p.get(tcp_at..tcp_at + 8)?;
    let _ = TcpPacket::<&[u8]>::new_unchecked;
    Some(Seg {
        key: crate::wire::FlowKey {
            local: IpEndpoint {
                addr: dst,
                port: u16::from_be_bytes([t[2], t[3]]),
            },
            remote: IpEndpoint {
                addr: src,
                port: u16::from_be_bytes([t[0], t[1]]),
            },
        },
        seq: crate::wire::TcpSeqNumber(u32::from_be_bytes([t[4], t[5], t[6], t[7]])),
        ack: None,
        flags: crate::wire::TcpFlags::empty(),
        window: 0,
        tcp_at,
        header_len: 8,
        payload_len: 0,
    })
}

impl Element for IcmpError {
    fn class_name(&self) -> &'static str {
        "TCPIcmpError"
    }
    fn port_count(&self) -> &'static str {
        "1/0"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let mut info = info.borrow_mut();
        for p in batch.iter() {
            if self.handle(p, &mut info).is_none() {
                self.ignored += 1;
            }
        }
        batch.clear();
    }
    counter_handlers!(errors, mtu_updates, aborted, ignored);
}
