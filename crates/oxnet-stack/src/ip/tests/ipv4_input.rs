//! IPv4Input: checks, drop reasons, demultiplexing, reassembly.

use super::*;
use crate::wire::ipv4::Ipv4Packet;
use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD};

const US: [u8; 4] = [10, 0, 0, 1];
const PEER: [u8; 4] = [10, 0, 0, 2];

const CONFIG: &str = "Inject -> in :: IPv4Input(10.0.0.1/24, BROADCAST true, MAX_DATAGRAMS 2, TIMEOUT 5s); \
     in[0] -> Sink(tcp); in[1] -> Sink(udp); in[2] -> Sink(icmp); in[3] -> Sink(other);";

/// Rewrites the IPv4 header of `frame` with `edit`, checksum recomputed.
fn edited(mut frame: Vec<u8>, edit: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    edit(&mut ip);
    ip.fill_checksum();
    frame
}

#[test]
fn packets_go_out_by_protocol_trimmed_and_marked() {
    let mut b = Bench::new(CONFIG);
    let udp = ipv4_frame(PEER, US, 17, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let mut padded = udp.clone();
    padded.resize(60, 0); // Ethernet's minimum frame: 18 bytes of padding
    let tcp = ipv4_frame(PEER, US, 6, &[9; 20]);
    let icmp = ipv4_frame(PEER, US, 1, &[8, 0, 0, 0, 0, 0, 0, 0]);
    let gre = ipv4_frame(PEER, US, 47, &[0; 4]);
    // IHL 6: one word of options (four NOPs) before the payload.
    let mut with_options = ipv4_frame(PEER, US, 17, &[1, 1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5]);
    with_options = edited(with_options, |ip| ip.set_version_and_header_len(24));
    b.frames(vec![
        padded,
        tcp.clone(),
        icmp.clone(),
        gre.clone(),
        with_options.clone(),
    ]);
    let udp_out = b.take("udp");
    assert_eq!(udp_out.len(), 2);
    assert_eq!(udp_out[0].bytes, udp, "padding cut off");
    assert_eq!((udp_out[0].network, udp_out[0].transport), (Some(14), Some(34)));
    assert_eq!(udp_out[0].packet_type, 0);
    assert_eq!(udp_out[1].bytes, with_options);
    assert_eq!(udp_out[1].transport, Some(38), "after the options");
    assert_eq!(b.take("tcp")[0].bytes, tcp);
    assert_eq!(b.take("icmp")[0].bytes, icmp);
    assert_eq!(b.take("other")[0].bytes, gre);
    b.expect_counts("in", &[("count", 5)]);
}

#[test]
fn every_drop_reason_is_counted() {
    let mut b = Bench::new(CONFIG);
    let good = ipv4_frame(PEER, US, 17, &[0; 8]);
    let mut vlan = ether(0x8100);
    vlan.extend_from_slice(&[0, 1, 8, 0]);
    vlan.extend_from_slice(&good[14..]);
    let mut arp = ether(0x0806);
    arp.extend_from_slice(&[0; 28]);
    let mut bad_sum = good.clone();
    bad_sum[14 + 11] ^= 1;
    let long = edited(good.clone(), |ip| ip.set_total_len(29));
    let version = edited(good.clone(), |ip| ip.set_version_and_header_len(20));
    let mut version = version;
    version[14] = 0x65;
    let items = vec![
        Item::frame(vlan),
        Item::frame(arp),
        Item::frame(good[..10].to_vec()),
        Item::frame(good[..33].to_vec()),
        Item::frame(long),
        Item::frame(version),
        Item::frame(bad_sum.clone()),
        // The NIC said bad: not computed again.
        Item {
            flags: FLAG_CSUM_CHECKED | FLAG_IP_CSUM_BAD,
            ..Item::frame(good.clone())
        },
        // The NIC said good: taken, though the bytes say otherwise.
        Item {
            flags: FLAG_CSUM_CHECKED | FLAG_IP_CSUM_GOOD,
            ..Item::frame(bad_sum)
        },
        // Checked by the NIC without a verdict: computed here.
        Item {
            flags: FLAG_CSUM_CHECKED,
            ..Item::frame(good.clone())
        },
        Item::frame(ipv4_frame([224, 0, 0, 5], US, 17, &[0; 8])),
        Item::frame(ipv4_frame([255, 255, 255, 255], US, 17, &[0; 8])),
        Item::frame(ipv4_frame([10, 0, 0, 255], US, 17, &[0; 8])),
        Item::frame(ipv4_frame(PEER, [10, 0, 0, 9], 17, &[0; 8])),
        Item::frame(ipv4_frame(PEER, [10, 0, 1, 1], 17, &[0; 8])),
        Item::frame(ipv4_fragment(PEER, US, 17, &[0; 7], 1, true, 0)),
        Item {
            chained: Some(vec![0; 4]),
            ..Item::frame(good.clone())
        },
    ];
    b.push(items);
    b.expect_counts(
        "in",
        &[
            ("vlan", 1),
            ("not_ipv4", 1),
            ("bad_header", 4),
            ("bad_checksum", 2),
            ("bad_source", 3),
            ("not_for_us", 2),
            ("bad_fragment", 1),
            ("chained", 1),
            ("count", 2),
            ("drops", 15),
        ],
    );
    assert_eq!(b.take("udp").len(), 2);
}

#[test]
fn broadcast_and_multicast_only_when_allowed() {
    let mut b = Bench::new(
        "Inject -> in :: IPv4Input(10.0.0.1/24, BROADCAST true) -> Sink(tcp); in[1] -> Sink(udp); in[2] -> Sink(icmp);",
    );
    let to = |dst| ipv4_frame(PEER, dst, 17, &[0; 8]);
    b.frames(vec![
        to([255, 255, 255, 255]),
        to([10, 0, 0, 255]),
        to([224, 0, 0, 1]),
        to(US),
    ]);
    let types: Vec<u8> = b.take("udp").iter().map(|s| s.packet_type).collect();
    assert_eq!(types, [1, 1, 2, 0]);

    let mut b = Bench::new(
        "Inject -> in :: IPv4Input(10.0.0.1 10.0.0.7) -> Sink(tcp); in[1] -> Sink(udp); in[2] -> Sink(icmp);",
    );
    b.frames(vec![
        to([255, 255, 255, 255]),
        to([224, 0, 0, 1]),
        to([10, 0, 0, 7]),
        to(US),
        ipv4_frame(PEER, US, 47, &[]),
    ]);
    assert_eq!(b.take("udp").len(), 2);
    b.expect_counts("in", &[("not_for_us", 2), ("other_protocol", 1), ("count", 2)]);
}

/// A UDP datagram of 8 + 16 bytes and its three fragments of 8 bytes.
fn datagram() -> (Vec<u8>, Vec<Vec<u8>>) {
    let payload: Vec<u8> = (1..=24).collect();
    let whole = ipv4_fragment(PEER, US, 17, &payload, 7, false, 0);
    let pieces = (0..3)
        .map(|i| ipv4_fragment(PEER, US, 17, &payload[i * 8..i * 8 + 8], 7, i < 2, i as u16 * 8))
        .collect();
    (whole, pieces)
}

#[test]
fn fragments_are_reassembled_in_any_order() {
    let (whole, pieces) = datagram();
    for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0]] {
        let mut b = Bench::new(CONFIG);
        for &i in &order[..2] {
            b.frames(vec![pieces[i].clone()]);
            assert!(b.take("udp").is_empty());
        }
        assert_eq!(b.read("in", "in_progress"), 1);
        b.frames(vec![pieces[order[2]].clone()]);
        let out = b.take("udp");
        assert_eq!(out.len(), 1, "{order:?}");
        assert_eq!(out[0].bytes, whole, "{order:?}");
        assert_eq!(
            (out[0].network, out[0].transport, out[0].segments),
            (Some(14), Some(34), 1)
        );
        assert!(Ipv4Packet::new_checked(&out[0].bytes[14..]).unwrap().verify_checksum());
        b.expect_counts("in", &[("reassembled", 1), ("count", 1)]);
    }
    // All three in one batch, last first.
    let mut b = Bench::new(CONFIG);
    b.frames(pieces.iter().rev().cloned().collect());
    assert_eq!(b.take("udp")[0].bytes, whole);
}

#[test]
fn a_datagram_larger_than_a_buffer_comes_out_chained() {
    let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7 % 251) as u8).collect();
    let whole = ipv4_fragment(PEER, US, 17, &payload, 9, false, 0);
    let mut b = Bench::new(CONFIG);
    b.frames(vec![
        ipv4_fragment(PEER, US, 17, &payload[2960..], 9, false, 2960),
        ipv4_fragment(PEER, US, 17, &payload[..1480], 9, true, 0),
        ipv4_fragment(PEER, US, 17, &payload[1480..2960], 9, true, 1480),
    ]);
    let out = b.take("udp");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, whole);
    assert!(out[0].segments >= 2, "{} segments", out[0].segments);
    b.expect_counts("in", &[("reassembled", 1), ("count", 1)]);
}

#[test]
fn overlapping_fragments_discard_the_datagram_and_duplicates_are_dropped() {
    let (whole, pieces) = datagram();
    let payload: Vec<u8> = (1..=24).collect();
    let overlapping = ipv4_fragment(PEER, US, 17, &payload[4..12], 7, true, 4);
    let mut b = Bench::new(CONFIG);
    b.frames(vec![
        pieces[0].clone(),
        pieces[0].clone(),
        overlapping,
        pieces[1].clone(),
        pieces[2].clone(),
    ]);
    assert!(b.take("udp").is_empty());
    b.expect_counts(
        "in",
        &[
            ("fragments_duplicate", 1),
            ("fragments_overlapping", 1),
            ("fragments_dropped", 3),
            ("in_progress", 1),
        ],
    );
    // The discarded entry goes at its timeout, not counted as timed out.
    b.next_timer();
    b.expect_counts(
        "in",
        &[
            ("fragments_duplicate", 1),
            ("fragments_overlapping", 1),
            ("fragments_dropped", 3),
        ],
    );
    // A copy of a whole fragment, then the rest: the datagram is whole.
    let mut b = Bench::new(CONFIG);
    b.frames(vec![
        pieces[1].clone(),
        pieces[1].clone(),
        pieces[0].clone(),
        pieces[2].clone(),
    ]);
    assert_eq!(b.take("udp")[0].bytes, whole);
    b.expect_counts("in", &[("fragments_duplicate", 1), ("reassembled", 1), ("count", 1)]);
}

#[test]
fn limits_and_the_timeout() {
    let mut b = Bench::new(CONFIG);
    let first = |ident| ipv4_fragment(PEER, US, 17, &[0; 8], ident, true, 0);
    b.frames(vec![first(1), first(2), first(3)]);
    b.expect_counts("in", &[("fragments_dropped", 1), ("in_progress", 2)]);
    b.next_timer();
    b.expect_counts("in", &[("fragments_dropped", 1), ("fragments_timed_out", 2)]);
    // The clock jumped to the timer, TIMEOUT after the first fragments.
    b.frames(vec![ipv4_frame(PEER, US, 17, &[0; 8])]);
    assert_eq!(b.take("udp")[0].at_us, 5_000_000);
    // The last fragment of a timed-out datagram starts a new one.
    b.frames(vec![ipv4_fragment(PEER, US, 17, &[0; 8], 1, false, 8)]);
    assert_eq!(b.read("in", "in_progress"), 1);

    // MAX_BYTES: a datagram that would pass it is discarded.
    let mut b = Bench::new(
        "Inject -> in :: IPv4Input(10.0.0.1, MAX_BYTES 16) -> Sink(tcp); in[1] -> Sink(udp); in[2] -> Sink(icmp);",
    );
    b.frames(vec![
        ipv4_fragment(PEER, US, 17, &[0; 8], 4, true, 0),
        ipv4_fragment(PEER, US, 17, &[0; 16], 4, false, 8),
        ipv4_fragment(PEER, US, 17, &[0; 8], 4, true, 8),
    ]);
    b.expect_counts("in", &[("fragments_dropped", 2), ("in_progress", 1)]);
}

/// The fragments of a datagram of `len` data bytes, 1480 per fragment,
/// the first with `options` words of options.
fn big_datagram(len: usize, options: usize) -> Vec<Vec<u8>> {
    let data: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
    (0..len)
        .step_by(1480)
        .map(|at| {
            let end = (at + 1480).min(len);
            let frame = ipv4_fragment(PEER, US, 17, &data[at..end], 3, end < len, at as u16);
            if at > 0 || options == 0 {
                return frame;
            }
            // Options (NOPs) after the fixed header of the first fragment.
            let mut with = frame[..34].to_vec();
            with.extend(std::iter::repeat_n(1u8, options * 4));
            with.extend_from_slice(&frame[34..]);
            edited(with, |ip| {
                ip.set_version_and_header_len(20 + options * 4);
                ip.set_total_len((20 + options * 4 + end - at) as u16);
            })
        })
        .collect()
}

#[test]
fn the_largest_datagram_is_reassembled_and_one_byte_more_is_not() {
    // 20 + 65512 = 65532 bytes: whole, in a chain of buffers.
    let mut b = Bench::new(CONFIG);
    b.frames(big_datagram(65512, 0));
    let out = b.take("udp");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes.len(), 14 + 20 + 65512);
    assert!(out[0].segments > 30);
    let ip = Ipv4Packet::new_checked(&out[0].bytes[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.total_len(), 65532);
    assert!(ip.payload().iter().enumerate().all(|(i, &x)| x == (i % 241) as u8));
    // With a word of options in the first fragment the whole would be
    // 65536 bytes, past the 16-bit total length (the "ping of death").
    let mut b = Bench::new(CONFIG);
    b.frames(big_datagram(65512, 1));
    assert!(b.take("udp").is_empty());
    b.expect_counts("in", &[("fragments_dropped", 1), ("in_progress", 0)]);
}

#[test]
fn an_empty_pool_is_counted_not_a_panic() {
    let payload = vec![5u8; 4000];
    let mut b = Bench::new("Inject -> in :: IPv4Input(10.0.0.1) -> Sink(tcp); in[1] -> Keep; in[2] -> Sink(icmp);");
    b.frames(vec![
        ipv4_fragment(PEER, US, 17, &payload[..1480], 6, true, 0),
        ipv4_fragment(PEER, US, 17, &payload[1480..2960], 6, true, 1480),
    ]);
    // Take every buffer but one: the last fragment will have it, and its
    // datagram needs more than one.
    b.frames(vec![ipv4_frame(PEER, US, 17, &[0; 8])]);
    while b.free.get() > 1 {
        let n = (b.free.get() - 1).min(1024);
        b.frames(vec![ipv4_frame(PEER, US, 17, &[0; 8]); n]);
    }
    let held = b.held.borrow().len() as u64;
    b.frames(vec![ipv4_fragment(PEER, US, 17, &payload[2960..], 6, false, 2960)]);
    b.expect_counts("in", &[("no_buffers", 1), ("reassembled", 1), ("count", held)]);
    b.held.borrow_mut().clear();
    // With buffers back, the next datagram is whole again.
    b.frames(vec![
        ipv4_fragment(PEER, US, 17, &payload[..1480], 7, true, 0),
        ipv4_fragment(PEER, US, 17, &payload[1480..2960], 7, true, 1480),
        ipv4_fragment(PEER, US, 17, &payload[2960..], 7, false, 2960),
    ]);
    assert_eq!(b.held.borrow().len(), 1);
    assert_eq!(b.held.borrow()[0].total_len(), 14 + 20 + 4000);
}

/// A TCP segment the NIC coalesced (RSC, 82599 §7.11) comes as a chain:
/// taken (`coalesced`) when the IP total length is the chain's, the
/// chain kept; a chain whose length disagrees is a bad header; a chained
/// UDP datagram or TCP fragment is not RSC's and is dropped (`chained`).
#[test]
fn a_coalesced_tcp_chain_is_taken_whole() {
    let mut b = Bench::new(CONFIG);
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let whole = ipv4_frame(PEER, US, 6, &payload);
    let split = |frame: &[u8]| Item {
        chained: Some(frame[1000..].to_vec()),
        ..Item::frame(frame[..1000].to_vec())
    };
    let short = edited(whole.clone(), |ip| ip.set_total_len(20 + 2999));
    let udp = ipv4_frame(PEER, US, 17, &payload);
    let fragment = edited(whole.clone(), |ip| ip.set_flags_and_frag_offset(false, false, 8));
    b.push(vec![split(&whole), split(&short), split(&udp), split(&fragment)]);
    let tcp = b.take("tcp");
    assert_eq!(tcp.len(), 1);
    assert_eq!((tcp[0].segments, &tcp[0].bytes), (2, &whole));
    assert_eq!((tcp[0].network, tcp[0].transport), (Some(14), Some(34)));
    b.expect_counts(
        "in",
        &[
            ("coalesced", 1),
            ("bad_header", 1),
            ("chained", 2),
            ("count", 1),
            ("drops", 3),
        ],
    );
}
