//! `stack_ip_input`: frames into the IP layer and the neighbour
//! resolvers, wired as a host wires them (ip/mod.rs): IPv4Input (small
//! reassembly limits) with ICMPv4Responder and ARPResolver behind it,
//! IPv6Input with ICMPv6Responder and NDResolver; ARP frames into
//! ARPResolver's input 1, ND frames straight into NDResolver's.
//!
//! The bytes are records: a kind byte, a 16-bit length, that many bytes
//! of frame; kind 4 moves time instead (its one byte says how far). The
//! kind's top bit asks for the IPv4 header checksum and the ICMP or
//! ICMPv6 checksum to be filled in, so that the fuzzer gets past them.
//!
//! After every record: no panic; the reassembly table and both neighbour
//! caches (entries and packets waiting) within their limits; every frame
//! out at least an Ethernet header; the router's packet pool never empty.

use super::rig::Rig;
use super::Reader;
use crate::wire::{EthernetFrame, Icmpv4Packet, Icmpv6Packet, Ipv4Packet};
use std::net::Ipv6Addr;

/// Records read at most.
const MAX_RECORDS: usize = 256;
/// Largest frame (one buffer of the router's pool).
const MAX_FRAME: usize = 1600;
/// The limits the configuration sets.
const MAX_DATAGRAMS: u64 = 4;
const ENTRIES: u64 = 8;
const QUEUE: u64 = 2;

const CONFIG: &str = "
v4 :: IPv4Input(10.0.0.2/24, BROADCAST true, MAX_DATAGRAMS 4, MAX_TOTAL_BYTES 8000, TIMEOUT 2s);
FuzzSource0 -> v4;
v4[0] -> FuzzSink; v4[1] -> FuzzSink; v4[2] -> icmp4 :: ICMPv4Responder; v4[3] -> FuzzSink;
icmp4[0] -> arp :: ARPResolver(10.0.0.2/24, 02:00:00:00:00:02, ENTRIES 8, QUEUE 2);
icmp4[1] -> FuzzSink;
FuzzSource2 -> [1]arp;
arp -> FuzzSink;
v6 :: IPv6Input(fe80::2);
FuzzSource1 -> v6;
v6[0] -> FuzzSink; v6[1] -> FuzzSink; v6[2] -> icmp6 :: ICMPv6Responder(SRC fe80::2); v6[3] -> FuzzSink;
icmp6[0] -> nd :: NDResolver(fe80::2, 02:00:00:00:00:02, ENTRIES 8, QUEUE 2);
icmp6[1] -> FuzzSink; icmp6[2] -> [1]nd;
FuzzSource3 -> [1]nd;
nd -> FuzzSink;
";

/// The target's body.
pub fn ip_input(data: &[u8]) {
    let mut rig = Rig::new(CONFIG);
    check(&mut rig);
    let mut r = Reader::new(data);
    let mut records = 0;
    while !r.is_empty() && records < MAX_RECORDS {
        records += 1;
        let kind = r.u8();
        if kind % 5 == 4 {
            let b = r.u8();
            // 1 ms to ~34 s.
            let us = (((b & 0x1f) as u64 + 1) * 1000) << ((b >> 5) * 3 / 2);
            let out = rig.advance(us);
            check_out(&out);
            check(&mut rig);
            continue;
        }
        let len = r.u16() as usize % MAX_FRAME;
        let mut frame = r.bytes(len).to_vec();
        let source = (kind % 5) as usize;
        if kind & 0x80 != 0 {
            match source {
                0 => fix_v4(&mut frame),
                1 | 3 => fix_v6(&mut frame),
                _ => {}
            }
        }
        rig.queue(source, frame, None);
        let out = rig.settle();
        check_out(&out);
        check(&mut rig);
    }
    // Every timer out: fragments time out, entries age, queues drain.
    for _ in 0..4 {
        let out = rig.advance(40_000_000);
        check_out(&out);
        check(&mut rig);
    }
}

fn check_out(out: &[Vec<u8>]) {
    for frame in out {
        // What leaves the resolvers is a frame; what leaves the IP
        // elements' other outputs is the frame as received, at least an
        // Ethernet header (they drop shorter ones).
        assert!(EthernetFrame::new_checked(&frame[..]).is_ok(), "out: {frame:02x?}");
    }
}

fn check(rig: &mut Rig) {
    // At most MAX_RECORDS frames go in, far fewer than the router's pool
    // holds: a buffer the source could not get was kept and lost.
    assert_eq!(*rig.alloc_failures.borrow(), 0, "the router's pool ran dry");
    let in_progress = rig.number("v4", "in_progress");
    assert!(in_progress <= MAX_DATAGRAMS, "{in_progress} datagrams in reassembly");
    for resolver in ["arp", "nd"] {
        let count = rig.number(resolver, "count");
        assert!(count <= ENTRIES, "{resolver}: {count} entries");
        let waiting = rig.number(resolver, "waiting");
        assert!(waiting <= ENTRIES * QUEUE, "{resolver}: {waiting} packets waiting");
    }
}

/// The IPv4 header checksum and, on an unfragmented ICMP packet, the ICMP
/// checksum.
fn fix_v4(frame: &mut [u8]) {
    if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] {
        return;
    }
    let ip = &mut frame[14..];
    let header_len = (ip[0] & 0x0f) as usize * 4;
    if header_len < 20 || ip.len() < header_len {
        return;
    }
    Ipv4Packet::new_unchecked(&mut ip[..header_len]).fill_checksum();
    let total = (u16::from_be_bytes([ip[2], ip[3]]) as usize).min(ip.len());
    let unfragmented = ip[6] & 0x3f == 0 && ip[7] == 0;
    if ip[9] == 1 && unfragmented && total >= header_len + 8 {
        Icmpv4Packet::new_unchecked(&mut ip[header_len..total]).fill_checksum();
    }
}

/// The ICMPv6 checksum of a packet whose first next header is ICMPv6.
fn fix_v6(frame: &mut [u8]) {
    if frame.len() < 14 + 48 || frame[12..14] != [0x86, 0xdd] || frame[14 + 6] != 58 {
        return;
    }
    let ip = &mut frame[14..];
    let end = (40 + u16::from_be_bytes([ip[4], ip[5]]) as usize).min(ip.len());
    if end < 48 {
        return;
    }
    let address = |b: &[u8]| Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16]));
    let (src, dst) = (address(&ip[8..24]), address(&ip[24..40]));
    Icmpv6Packet::new_unchecked(&mut ip[40..end]).fill_checksum(&src, &dst);
}
