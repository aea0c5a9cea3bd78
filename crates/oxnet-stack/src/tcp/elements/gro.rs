//! TCPGRO: generic receive offload in software, for devices without RSC
//! (82599 §7.11 does the same in hardware): within one batch, consecutive
//! in-order data segments of one TCP/IPv4 flow become one segment (a
//! chain: the first segment's headers and buffer, then the payload
//! buffers of the others, without a copy), so the TCP elements after it
//! see one segment where the sender sent several.
//!
//! TCPGRO([MAX_BYTES 65535], [MAX_SEGMENTS 44], [FLOWS 8])
//!
//! Input: IP packets with the network and transport marks set
//! (IPv4Input's output 0); output: the same packets, some merged. It
//! sits between IPv4Input and TCPStack (`ip4[0] -> TCPGRO -> tcp`):
//! oxnet puts it there in the configurations for devices without RSC
//! (conf/echo.click for its TAP; scripts/bench/bulk.sh's `gro` variant),
//! not in the TCPStack compound, whose input also takes IPv6 and RSC's
//! chains, and which a configuration with RSC would pay it for nothing.
//!
//! What may merge follows Linux's GRO (net/ipv4/tcp_offload.c,
//! `tcp_gro_receive`; net/ipv4/af_inet.c, `inet_gro_receive`): a
//! segment joins the open merge of its flow (same addresses and ports)
//! only if
//! * it carries data and no flag but ACK and PSH (`not_mergeable_flags`;
//!   a SYN, FIN, RST, URG or CWR, or a pure ACK, is passed on and ends
//!   the flow's merge, keeping the flow's order);
//! * it starts where the merge ends (`not_mergeable_out_of_order`);
//! * its acknowledgment number, window, header length and option bytes
//!   are the merge's (`not_mergeable_header`; Linux compares every
//!   option byte, timestamps included: segments a sender sends in one
//!   burst carry the same TSval);
//! * its IPv4 header has no options, the same TTL, TOS (ECN codepoint
//!   included) and DF, and an identification one above the last one's or
//!   the same one with DF (`not_mergeable_header`);
//! * it is no larger than the merge's first segment (Linux's
//!   `gso_size`; `not_mergeable_size`);
//! * its checksum is good (`bad_checksums`: the device's verdict when it
//!   checked, else computed here; a bad one is passed on for TCPFlowLookup
//!   to drop and count);
//! * the merge stays within MAX_BYTES of IP total length (at most 65535,
//!   RFC 791 §3.1) and MAX_SEGMENTS segments (44: what 64 KiB holds of
//!   1460-byte segments); otherwise the merge is sent and the segment
//!   starts the next one (`full`).
//!
//! A segment shorter than the first, or with PSH, joins and then ends the
//! merge (Linux's "force a flush"). At most FLOWS merges are open at once
//! (Linux keeps 8 per NAPI context); a ninth flow closes the oldest. The
//! end of a batch ends every merge: nothing is held between batches, so
//! GRO adds no latency.
//!
//! A merged segment leaves with its IPv4 total length and header
//! checksum rewritten, PSH if its last part had it, and the checksum
//! verdict flags set (`FLAG_CSUM_CHECKED`, IP and L4 good: every part was
//! verified; its TCP checksum field is no longer the segment's), which
//! TCPFlowLookup takes as the device's. Every segment verified here gets
//! the same flags, so TCPFlowLookup does not sum it again.
//!
//! Handlers (read): `count` (packets in), `merged` (segments merged into
//! another), `flushed` (merged segments sent, two parts or more), `full`,
//! `bad_checksums`, `not_mergeable_flags`, `not_mergeable_out_of_order`,
//! `not_mergeable_header`, `not_mergeable_size`, `not_mergeable_other`
//! (not TCP over IPv4, already a chain, or headers not whole).

use crate::wire::{IpAddress, TcpPacket};
use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;
use std::net::Ipv4Addr;

/// TCP flag bits (RFC 9293 §3.1).
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// The verdict a merged or verified segment carries.
const VERIFIED: u32 = FLAG_CSUM_CHECKED | FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD;

/// Why a segment did not join its flow's merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotMergeable {
    Flags,
    OutOfOrder,
    Header,
    Size,
    Other,
}

/// A segment's fields, read from its headers.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Source and destination address, source and destination port.
    flow: [u8; 12],
    seq: u32,
    ack: u32,
    window: u16,
    flags: u8,
    ident: u16,
    ttl: u8,
    tos: u8,
    dont_frag: bool,
    /// Offsets in the packet's data and lengths.
    ip_at: usize,
    tcp_at: usize,
    header_len: usize,
    payload: usize,
}

impl Segment {
    /// Reads a TCP/IPv4 segment without IP options in one buffer; the
    /// reason otherwise.
    fn read(p: &Packet) -> Result<Segment, NotMergeable> {
        if p.is_chained() {
            return Err(NotMergeable::Other);
        }
        let ip_at = p.network_offset().and_then(|o| usize::try_from(o).ok());
        let tcp_at = p.transport_offset().and_then(|o| usize::try_from(o).ok());
        let (Some(ip_at), Some(tcp_at)) = (ip_at, tcp_at) else {
            return Err(NotMergeable::Other);
        };
        let ip = p.get(ip_at..).ok_or(NotMergeable::Other)?;
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
            return Err(NotMergeable::Other);
        }
        if ip[0] & 0x0F != 5 || tcp_at != ip_at + 20 {
            return Err(NotMergeable::Header);
        }
        let tcp =
            TcpPacket::new_checked(p.get(tcp_at..).ok_or(NotMergeable::Other)?).map_err(|_| NotMergeable::Other)?;
        let t = p.get(tcp_at..).ok_or(NotMergeable::Other)?;
        let mut flow = [0; 12];
        flow[..8].copy_from_slice(&ip[12..20]);
        flow[8..].copy_from_slice(&t[..4]);
        Ok(Segment {
            flow,
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
            window: u16::from_be_bytes([t[14], t[15]]),
            flags: t[13],
            ident: u16::from_be_bytes([ip[4], ip[5]]),
            ttl: ip[8],
            tos: ip[1],
            dont_frag: ip[6] & 0x40 != 0,
            ip_at,
            tcp_at,
            header_len: tcp.header_len(),
            payload: tcp.payload().len(),
        })
    }

    /// Whether it may start or join a merge at all: data, and no flag
    /// but ACK and PSH (Linux flushes on URG, RST, SYN, FIN and CWR).
    fn is_plain_data(&self) -> bool {
        self.payload > 0 && self.flags & !PSH == ACK
    }

    fn addresses(&self) -> (IpAddress, IpAddress) {
        let a = |b: &[u8]| IpAddress::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
        (a(&self.flow[..4]), a(&self.flow[4..8]))
    }
}

/// An open merge: where its head is in the output, and what the next
/// segment must match.
struct Open {
    slot: usize,
    first: Segment,
    /// The first segment's TCP option bytes (at most 40, RFC 9293 §3.1).
    options: [u8; 40],
    next_seq: u32,
    last_ident: u16,
    /// IP total length so far, and segments in it.
    ip_len: usize,
    segments: usize,
    push: bool,
}

/// TCPGRO.
pub struct Gro {
    max_bytes: usize,
    max_segments: usize,
    flows: usize,
    count: u64,
    merged: u64,
    flushed: u64,
    full: u64,
    bad_checksums: u64,
    not_mergeable_flags: u64,
    not_mergeable_out_of_order: u64,
    not_mergeable_header: u64,
    not_mergeable_size: u64,
    not_mergeable_other: u64,
}

impl Default for Gro {
    fn default() -> Gro {
        Gro {
            max_bytes: u16::MAX as usize,
            max_segments: 44,
            flows: 8,
            count: 0,
            merged: 0,
            flushed: 0,
            full: 0,
            bad_checksums: 0,
            not_mergeable_flags: 0,
            not_mergeable_out_of_order: 0,
            not_mergeable_header: 0,
            not_mergeable_size: 0,
            not_mergeable_other: 0,
        }
    }
}

/// The option bytes of the TCP header at `seg.tcp_at`.
fn options_of<'a>(p: &'a Packet, seg: &Segment) -> &'a [u8] {
    &p[seg.tcp_at + 20..seg.tcp_at + seg.header_len]
}

/// Whether the segment's checksum is good: the device's verdict when it
/// checked, else computed (RFC 9293 §3.1, over the pseudo-header).
fn checksum_good(p: &Packet, seg: &Segment) -> bool {
    let flags = p.meta().flags;
    if flags & FLAG_CSUM_CHECKED != 0 && flags & (FLAG_L4_CSUM_GOOD | FLAG_L4_CSUM_BAD) != 0 {
        return flags & FLAG_L4_CSUM_GOOD != 0;
    }
    let (src, dst) = seg.addresses();
    TcpPacket::new_checked(&p[seg.tcp_at..]).is_ok_and(|t| t.verify_checksum(&src, &dst))
}

impl Gro {
    fn count_not_mergeable(&mut self, why: NotMergeable) {
        match why {
            NotMergeable::Flags => self.not_mergeable_flags += 1,
            NotMergeable::OutOfOrder => self.not_mergeable_out_of_order += 1,
            NotMergeable::Header => self.not_mergeable_header += 1,
            NotMergeable::Size => self.not_mergeable_size += 1,
            NotMergeable::Other => self.not_mergeable_other += 1,
        }
    }

    /// Whether `seg` (in `p`) may join `open` (Linux's rules, module doc).
    fn mergeable(open: &Open, seg: &Segment, p: &Packet) -> Result<(), NotMergeable> {
        let first = &open.first;
        if !seg.is_plain_data() {
            return Err(NotMergeable::Flags);
        }
        if seg.seq != open.next_seq {
            return Err(NotMergeable::OutOfOrder);
        }
        let ident_ok = seg.ident == open.last_ident.wrapping_add(1) || (seg.ident == open.last_ident && seg.dont_frag);
        if seg.ack != first.ack
            || seg.window != first.window
            || seg.header_len != first.header_len
            || options_of(p, seg) != &open.options[..first.header_len - 20]
            || (seg.ttl, seg.tos, seg.dont_frag) != (first.ttl, first.tos, first.dont_frag)
            || !ident_ok
        {
            return Err(NotMergeable::Header);
        }
        if seg.payload > first.payload {
            return Err(NotMergeable::Size);
        }
        Ok(())
    }

    /// Ends a merge: the head's IPv4 total length and checksum, PSH, and
    /// the verdict flags.
    fn finish(&mut self, open: Open, slots: &mut [Option<Packet>]) {
        if open.segments < 2 {
            return;
        }
        self.flushed += 1;
        let Some(head) = slots.get_mut(open.slot).and_then(|s| s.as_mut()) else {
            return;
        };
        let at = open.first.ip_at;
        let ip = &mut head[at..at + 20];
        ip[2..4].copy_from_slice(&(open.ip_len as u16).to_be_bytes());
        oxnet_driver::offload::set_ipv4_checksum(ip);
        if open.push {
            head[open.first.tcp_at + 13] |= PSH;
        }
        head.meta_mut().flags |= VERIFIED;
    }

    fn process(&mut self, batch: &mut PacketBatch) -> PacketBatch {
        let n = batch.len();
        let mut slots: Vec<Option<Packet>> = Vec::with_capacity(n);
        let mut open: Vec<Open> = Vec::with_capacity(self.flows);
        batch.consume_front(n, |mut p| {
            self.count += 1;
            let seg = match Segment::read(&p) {
                Ok(seg) => seg,
                Err(why) => {
                    self.count_not_mergeable(why);
                    slots.push(Some(p));
                    return;
                }
            };
            let mine = open.iter().position(|o| o.flow_is(&seg));
            if seg.is_plain_data() && !checksum_good(&p, &seg) {
                self.bad_checksums += 1;
                if let Some(i) = mine {
                    let o = open.remove(i);
                    self.finish(o, &mut slots);
                }
                slots.push(Some(p));
                return;
            }
            if seg.is_plain_data() {
                p.meta_mut().flags |= VERIFIED;
            }
            if let Some(i) = mine {
                match Self::mergeable(&open[i], &seg, &p) {
                    Ok(())
                        if open[i].ip_len + seg.payload > self.max_bytes
                            || open[i].segments + 1 > self.max_segments =>
                    {
                        self.full += 1;
                        let o = open.remove(i);
                        self.finish(o, &mut slots);
                    }
                    Ok(()) => {
                        let o = &mut open[i];
                        let Some(head) = slots.get_mut(o.slot).and_then(|s| s.as_mut()) else {
                            return;
                        };
                        // Segment::read saw the headers whole: this cannot fail.
                        let _ = p.strip_front(seg.tcp_at + seg.header_len);
                        head.append(p);
                        self.merged += 1;
                        o.next_seq = seg.seq.wrapping_add(seg.payload as u32);
                        o.last_ident = seg.ident;
                        o.ip_len += seg.payload;
                        o.segments += 1;
                        o.push |= seg.flags & PSH != 0;
                        // Linux: a short segment or PSH ends the merge.
                        if seg.payload < o.first.payload || seg.flags & PSH != 0 {
                            let o = open.remove(i);
                            self.finish(o, &mut slots);
                        }
                        return;
                    }
                    Err(why) => {
                        self.count_not_mergeable(why);
                        let o = open.remove(i);
                        self.finish(o, &mut slots);
                    }
                }
            } else if !seg.is_plain_data() {
                self.not_mergeable_flags += 1;
            }
            let slot = slots.len();
            // A PSH segment alone is sent as it is (it would end the merge).
            if seg.is_plain_data() && seg.flags & PSH == 0 {
                let mut options = [0; 40];
                let own = options_of(&p, &seg);
                options[..own.len()].copy_from_slice(own);
                if open.len() == self.flows.max(1) {
                    let oldest = open.remove(0);
                    self.finish(oldest, &mut slots);
                }
                open.push(Open {
                    slot,
                    first: seg,
                    options,
                    next_seq: seg.seq.wrapping_add(seg.payload as u32),
                    last_ident: seg.ident,
                    ip_len: 20 + seg.header_len + seg.payload,
                    segments: 1,
                    push: false,
                });
            }
            slots.push(Some(p));
        });
        for o in std::mem::take(&mut open) {
            self.finish(o, &mut slots);
        }
        let mut out = oxnet_graph::element::take_batch(slots.len());
        for p in slots.into_iter().flatten() {
            out.push(p);
        }
        out
    }
}

impl Open {
    fn flow_is(&self, seg: &Segment) -> bool {
        self.first.flow == seg.flow
    }
}

impl Element for Gro {
    fn class_name(&self) -> &'static str {
        "TCPGRO"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = a.keyword("MAX_BYTES") {
            let n = args::unsigned(&v).map_err(|e| format!("MAX_BYTES: {e}"))?;
            if !(576..=65535).contains(&n) {
                return Err(format!("MAX_BYTES {n}: the IP total length is 576 to 65535"));
            }
            self.max_bytes = n as usize;
        }
        if let Some(v) = a.keyword("MAX_SEGMENTS") {
            let n = args::unsigned(&v).map_err(|e| format!("MAX_SEGMENTS: {e}"))?;
            if !(1..=1024).contains(&n) {
                return Err(format!("MAX_SEGMENTS {n}: 1 to 1024"));
            }
            self.max_segments = n as usize;
        }
        if let Some(v) = a.keyword("FLOWS") {
            let n = args::unsigned(&v).map_err(|e| format!("FLOWS: {e}"))?;
            if !(1..=64).contains(&n) {
                return Err(format!("FLOWS {n}: 1 to 64"));
            }
            self.flows = n as usize;
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut out = self.process(batch);
        ctx.forward(0, &mut out);
        oxnet_graph::element::recycle_batch(out);
    }
    counter_handlers!(
        count,
        merged,
        flushed,
        full,
        bad_checksums,
        not_mergeable_flags,
        not_mergeable_out_of_order,
        not_mergeable_header,
        not_mergeable_size,
        not_mergeable_other
    );
}
