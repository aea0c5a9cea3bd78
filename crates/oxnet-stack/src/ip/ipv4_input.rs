//! IPv4Input(ADDR [ADDR...], [BROADCAST true], [MAX_DATAGRAMS 64],
//! [MAX_BYTES 65535], [MAX_TOTAL_BYTES 4194304], [TIMEOUT 30s]): the
//! receive side of IPv4 for a host (RFC 791 §3.1, §3.2; RFC 1122
//! §3.2.1).
//!
//! Input: Ethernet frames. Checks, in order, each failure counted:
//! 1. the frame holds an Ethernet header (`bad_header`); a VLAN tag is
//!    not expected (`vlan`), nor another EtherType (`not_ipv4`). A
//!    chained frame (a TCP segment coalesced by the NIC's RSC, 82599
//!    §7.11) is taken when it carries TCP, is no fragment, has its
//!    headers in the first buffer and an IP total length equal to the
//!    chain's (the NIC updates it; a chain is never padded), and
//!    counted in `coalesced`; other chains are counted in `chained` and
//!    dropped;
//! 2. version 4, IHL of 5 or more, total length covering the header and
//!    within the frame (`bad_header`, RFC 791 §3.1; RFC 1122 §3.2.1.1,
//!    §3.2.1.8 (options are skipped: the transport mark follows them));
//!    the frame is trimmed to the total length (Ethernet padding);
//! 3. the header checksum (`bad_checksum`): taken as good when the
//!    driver's receive offload checked it (`FLAG_CSUM_CHECKED` with
//!    `FLAG_IP_CSUM_GOOD`), as bad when it says bad, computed otherwise;
//! 4. the source is not a multicast or broadcast address, nor a directed
//!    broadcast of one of our prefixes (`bad_source`, RFC 1122 §3.2.1.3);
//! 5. the destination is one of ours (`not_for_us`), or, with
//!    `BROADCAST true`, 255.255.255.255, a directed broadcast of one of
//!    our prefixes (an ADDR written `a.b.c.d/len`), or any multicast
//!    group (there is no group membership yet: RFC 1112's IGMP is not
//!    done). The TTL is not checked (RFC 1122 §3.2.1.7: a host must not
//!    drop a datagram for a low TTL).
//!
//! Fragments are reassembled ([`super::reassembly`]; the table's rules,
//! RFC 5722's on overlaps, are there). Settings: MAX_DATAGRAMS datagrams
//! in progress at once, MAX_BYTES bytes of data in one, MAX_TOTAL_BYTES
//! bytes of data held in all (Linux's 4 MiB), TIMEOUT from a datagram's
//! first fragment (30 s as Linux; RFC 791 §3.2 suggests at least 15 s,
//! RFC 1122 §3.3.2 60 to 120 s: both are a setting away). Counters:
//! `bad_fragment` counts malformed
//! fragments, `fragments_dropped` those dropped by a limit or because
//! their datagram was discarded, `fragments_duplicate` exact copies,
//! `fragments_overlapping` the datagrams discarded for an overlap,
//! `fragments_timed_out` the datagrams given up after TIMEOUT (the
//! router's timer), `reassembled` the datagrams made whole, which go on
//! as new packets (chained when they do not fit one buffer: module doc),
//! or are counted in `no_buffers` when the pool is empty.
//!
//! Output, the headers marked (module doc): 0 TCP, 1 UDP, 2 ICMP, 3 any
//! other protocol (with three outputs connected, counted in
//! `other_protocol` and dropped).
//!
//! Handlers (read): every counter above, `count` (packets out), `drops`
//! (the sum of the counters of dropped packets: not
//! `fragments_overlapping`, `fragments_timed_out` and `reassembled`,
//! which count datagrams; the fragment that overlapped is in
//! `fragments_dropped`), `in_progress` (datagrams being reassembled,
//! discarded ones waiting for their timeout included).

use super::reassembly::{Fragment, FragmentKey, Limits, Outcome, Reassembly, MAX_DATAGRAM};
use super::{address_words, bool_arg, counter, ipv4_with_prefix, unsigned_arg, Outputs, ETHER_LEN};
use super::{PACKET_BROADCAST, PACKET_HOST, PACKET_MULTICAST};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::IpProtocol;
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::{Checksum, WireError};
use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use oxnet_graph::timer::TimerId;
use std::net::Ipv4Addr;

/// Counters by handler name.
type Counters<const N: usize> = [(&'static str, u64); N];

/// Drop counters, by reason.
#[derive(Debug, Default)]
struct Drops {
    vlan: u64,
    not_ipv4: u64,
    chained: u64,
    bad_header: u64,
    bad_checksum: u64,
    bad_source: u64,
    not_for_us: u64,
    bad_fragment: u64,
    fragments_dropped: u64,
    fragments_duplicate: u64,
    no_buffers: u64,
    other_protocol: u64,
}

#[derive(Default)]
pub struct IPv4Input {
    /// Our addresses and their masks (255.255.255.255 when none given).
    addrs: Vec<(Ipv4Addr, Ipv4Addr)>,
    broadcast: bool,
    reassembly: Reassembly,
    timer: Option<TimerId>,
    drops: Drops,
    count: u64,
    reassembled: u64,
    fragments_overlapping: u64,
    fragments_timed_out: u64,
    /// Chained (RSC) segments taken.
    coalesced: u64,
}

/// Where a packet goes.
enum Verdict {
    Out(usize, Packet),
    /// Counted already (or kept by the reassembly).
    Gone,
}

impl IPv4Input {
    /// A directed broadcast address of one of our prefixes (host part all
    /// ones, prefixes shorter than /31: RFC 3021 has none).
    fn is_directed_broadcast(&self, a: Ipv4Addr) -> bool {
        self.addrs
            .iter()
            .any(|&(ours, mask)| u32::from(mask).count_ones() < 31 && a == (ours | !mask))
    }

    /// The packet type of a datagram to `dst`, None if not for us.
    fn addressed(&self, dst: Ipv4Addr) -> Option<u8> {
        if self.addrs.iter().any(|&(ours, _)| ours == dst) {
            return Some(PACKET_HOST);
        }
        if !self.broadcast {
            return None;
        }
        if dst.is_broadcast() || self.is_directed_broadcast(dst) {
            Some(PACKET_BROADCAST)
        } else if dst.is_multicast() {
            Some(PACKET_MULTICAST)
        } else {
            None
        }
    }

    /// A chained frame (RSC): the checks of [`Self::classify`] on the
    /// headers in the first buffer, the lengths against the chain's.
    fn classify_chain(&mut self, mut p: Packet) -> Verdict {
        let ipv4 = EthernetFrame::new_checked(&p[..]).is_ok_and(|frame| frame.ethertype() == EtherType::Ipv4);
        if !ipv4 {
            self.drops.chained += 1;
            return Verdict::Gone;
        }
        let head = &p[ETHER_LEN..];
        let Ok((repr, header_len)) = Ipv4Repr::parse_quoted(head) else {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        };
        let total = ETHER_LEN + Ipv4Packet::new_unchecked(head).total_len() as usize;
        if repr.protocol != IpProtocol::Tcp || repr.more_frags || repr.frag_offset != 0 {
            self.drops.chained += 1;
            return Verdict::Gone;
        }
        if head.len() < header_len || total != p.total_len() {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        }
        let flags = p.meta().flags;
        let device_good = flags & FLAG_CSUM_CHECKED != 0 && flags & FLAG_IP_CSUM_GOOD != 0;
        let sum_ok = || oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&head[..header_len], 0)) == 0xFFFF;
        if (flags & FLAG_CSUM_CHECKED != 0 && flags & FLAG_IP_CSUM_BAD != 0) || !(device_good || sum_ok()) {
            self.drops.bad_checksum += 1;
            return Verdict::Gone;
        }
        if repr.src.is_multicast() || repr.src.is_broadcast() || self.is_directed_broadcast(repr.src) {
            self.drops.bad_source += 1;
            return Verdict::Gone;
        }
        let Some(packet_type) = self.addressed(repr.dst) else {
            self.drops.not_for_us += 1;
            return Verdict::Gone;
        };
        if p.set_network_header(ETHER_LEN, header_len).is_err() {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        }
        p.anno_mut().packet_type = packet_type;
        self.coalesced += 1;
        Verdict::Out(0, p)
    }

    fn classify(&mut self, mut p: Packet, ctx: &mut Ctx<'_>) -> Verdict {
        if p.is_chained() {
            return self.classify_chain(p);
        }
        let Ok(frame) = EthernetFrame::new_checked(&p[..]) else {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        };
        match frame.ethertype() {
            EtherType::Ipv4 => {}
            EtherType::Vlan => {
                self.drops.vlan += 1;
                return Verdict::Gone;
            }
            _ => {
                self.drops.not_ipv4 += 1;
                return Verdict::Gone;
            }
        }
        let Ok(ip) = Ipv4Packet::new_checked(frame.payload()) else {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        };
        let flags = p.meta().flags;
        let checked = flags & FLAG_CSUM_CHECKED != 0;
        if checked && flags & FLAG_IP_CSUM_BAD != 0 {
            self.drops.bad_checksum += 1;
            return Verdict::Gone;
        }
        let mode = if checked && flags & FLAG_IP_CSUM_GOOD != 0 {
            Checksum::Ignore
        } else {
            Checksum::Verify
        };
        let repr = match Ipv4Repr::parse(&ip, mode) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => {
                self.drops.bad_checksum += 1;
                return Verdict::Gone;
            }
            Err(_) => {
                self.drops.bad_header += 1;
                return Verdict::Gone;
            }
        };
        if repr.src.is_multicast() || repr.src.is_broadcast() || self.is_directed_broadcast(repr.src) {
            self.drops.bad_source += 1;
            return Verdict::Gone;
        }
        let Some(packet_type) = self.addressed(repr.dst) else {
            self.drops.not_for_us += 1;
            return Verdict::Gone;
        };
        let header_len = ip.header_len();
        let total = ETHER_LEN + ip.total_len() as usize;
        let fragment = repr.more_frags || repr.frag_offset != 0;
        if fragment {
            let key = FragmentKey {
                src: repr.src,
                dst: repr.dst,
                protocol: repr.protocol.into(),
                ident: repr.ident,
            };
            let piece = Fragment {
                offset: repr.frag_offset as usize,
                more: repr.more_frags,
                data: &p[ETHER_LEN + header_len..total],
                headers: &p[..ETHER_LEN + header_len],
            };
            let outcome = self.reassembly.insert(key, piece, ctx.now_us());
            drop(p);
            match outcome {
                Outcome::Stored => return Verdict::Gone,
                Outcome::Complete { headers, data } => {
                    if headers.len().saturating_sub(ETHER_LEN) + data.len() > MAX_DATAGRAM {
                        // Options in the first fragment made it too long.
                        self.drops.fragments_dropped += 1;
                        return Verdict::Gone;
                    }
                    self.reassembled += 1;
                    match build_datagram(&headers, &data, ctx) {
                        Some(whole) => p = whole,
                        None => {
                            self.drops.no_buffers += 1;
                            return Verdict::Gone;
                        }
                    }
                }
                Outcome::Duplicate => {
                    self.drops.fragments_duplicate += 1;
                    return Verdict::Gone;
                }
                Outcome::Overlap => {
                    self.fragments_overlapping += 1;
                    self.drops.fragments_dropped += 1;
                    return Verdict::Gone;
                }
                Outcome::Discarded | Outcome::TooManyDatagrams | Outcome::TooBig => {
                    self.drops.fragments_dropped += 1;
                    return Verdict::Gone;
                }
                Outcome::Malformed => {
                    self.drops.bad_fragment += 1;
                    return Verdict::Gone;
                }
            }
        } else if p.set_len(total).is_err() {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        }
        if p.set_network_header(ETHER_LEN, header_len).is_err() {
            self.drops.bad_header += 1;
            return Verdict::Gone;
        }
        p.anno_mut().packet_type = packet_type;
        let port = match repr.protocol {
            IpProtocol::Tcp => 0,
            IpProtocol::Udp => 1,
            IpProtocol::Icmp => 2,
            _ => 3,
        };
        if port >= ctx.noutputs() {
            self.drops.other_protocol += 1;
            return Verdict::Gone;
        }
        Verdict::Out(port, p)
    }

    /// Keeps one timer pending while datagrams are in progress, for the
    /// earliest deadline.
    fn arm_timer(&mut self, ctx: &mut Ctx<'_>) {
        if self.timer.is_some() {
            return;
        }
        if let Some(at) = self.reassembly.next_deadline() {
            self.timer = Some(ctx.schedule_after_us(at.saturating_sub(ctx.now_us())));
        }
    }

    /// The drop counters and the others, by handler name.
    fn counters(&self) -> (Counters<12>, Counters<6>) {
        let d = &self.drops;
        (
            [
                ("vlan", d.vlan),
                ("not_ipv4", d.not_ipv4),
                ("chained", d.chained),
                ("bad_header", d.bad_header),
                ("bad_checksum", d.bad_checksum),
                ("bad_source", d.bad_source),
                ("not_for_us", d.not_for_us),
                ("bad_fragment", d.bad_fragment),
                ("fragments_dropped", d.fragments_dropped),
                ("fragments_duplicate", d.fragments_duplicate),
                ("no_buffers", d.no_buffers),
                ("other_protocol", d.other_protocol),
            ],
            [
                ("count", self.count),
                ("reassembled", self.reassembled),
                ("fragments_overlapping", self.fragments_overlapping),
                ("fragments_timed_out", self.fragments_timed_out),
                ("in_progress", self.reassembly.len() as u64),
                ("coalesced", self.coalesced),
            ],
        )
    }
}

/// The whole datagram as a new packet: `headers` (Ethernet and the first
/// fragment's IP header) rewritten for the whole (RFC 791 §3.2: total
/// length, no MF, offset 0, checksum), then `data`; chained when it does
/// not fit one buffer, every segment but the last of even length.
fn build_datagram(headers: &[u8], data: &[u8], ctx: &mut Ctx<'_>) -> Option<Packet> {
    let header_len = headers.len().checked_sub(ETHER_LEN)?;
    if header_len + data.len() > MAX_DATAGRAM {
        return None;
    }
    let mut first = ctx.pool().alloc().ok()?;
    let room = first.capacity() & !1;
    let in_first = data.len().min(room.checked_sub(headers.len())? & !1);
    first.set_len(headers.len() + in_first).ok()?;
    first[..headers.len()].copy_from_slice(headers);
    first[headers.len()..].copy_from_slice(&data[..in_first]);
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut first[ETHER_LEN..ETHER_LEN + header_len]);
        ip.set_total_len((header_len + data.len()) as u16);
        let dont_frag = ip.dont_frag();
        ip.set_flags_and_frag_offset(dont_frag, false, 0);
        ip.fill_checksum();
    }
    let mut at = in_first;
    while at < data.len() {
        let mut next = ctx.pool().alloc().ok()?;
        let n = (data.len() - at).min(next.capacity() & !1);
        next.set_len(n).ok()?;
        next.copy_from_slice(&data[at..at + n]);
        first.append(next);
        at += n;
    }
    Some(first)
}

impl Element for IPv4Input {
    fn class_name(&self) -> &'static str {
        "IPv4Input"
    }
    fn port_count(&self) -> &'static str {
        "1/3-4"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, args: &mut Args) -> Result<(), String> {
        self.broadcast = bool_arg(args, "BROADCAST")?;
        let limits = Limits {
            max_datagrams: unsigned_arg(args, "MAX_DATAGRAMS", 64, 1 << 16)? as usize,
            max_bytes: unsigned_arg(args, "MAX_BYTES", MAX_DATAGRAM as u64, MAX_DATAGRAM as u64)? as usize,
            max_total_bytes: unsigned_arg(args, "MAX_TOTAL_BYTES", 4 << 20, 1 << 30)? as usize,
            timeout_us: match args.keyword("TIMEOUT") {
                Some(t) => (oxnet_graph::args::seconds(&t).map_err(|e| format!("TIMEOUT: {e}"))? * 1e6) as u64,
                None => 30_000_000,
            },
        };
        self.reassembly = Reassembly::new(limits);
        for word in address_words(args) {
            self.addrs
                .push(ipv4_with_prefix(&word).map_err(|e| format!("ADDR: {e}"))?);
        }
        if self.addrs.is_empty() {
            return Err("missing mandatory ADDR argument (our IPv4 addresses)".into());
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut outs = Outputs::new(ctx.noutputs().max(4), batch.len());
        let len = batch.len();
        batch.consume_front(len, |p| {
            if let Verdict::Out(port, p) = self.classify(p, ctx) {
                self.count += 1;
                outs.put(port, p);
            }
        });
        self.arm_timer(ctx);
        outs.push_all(ctx);
    }
    fn run_timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        self.timer = None;
        self.fragments_timed_out += self.reassembly.expire(ctx.now_us()) as u64;
        self.arm_timer(ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("drops", true, false),
            ("vlan", true, false),
            ("not_ipv4", true, false),
            ("chained", true, false),
            ("bad_header", true, false),
            ("bad_checksum", true, false),
            ("bad_source", true, false),
            ("not_for_us", true, false),
            ("bad_fragment", true, false),
            ("fragments_dropped", true, false),
            ("fragments_duplicate", true, false),
            ("fragments_overlapping", true, false),
            ("fragments_timed_out", true, false),
            ("reassembled", true, false),
            ("no_buffers", true, false),
            ("other_protocol", true, false),
            ("in_progress", true, false),
            ("coalesced", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let (drops, others) = self.counters();
        counter(&drops, &others, name)
    }
}
