//! ARPResolver in a router, in simulated time: exact frames out for
//! frames and packets in.

use super::testkit::{hex, Harness};
use oxnet_graph::Router;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;

const S: u64 = 1_000_000;
const MS: u64 = 1_000;

/// Us: 10.0.0.1/24 at 02:00:00:00:00:01.
fn config(settings: &str) -> String {
    format!(
        "feed :: Feed; arp :: ARPResolver(10.0.0.1/24, 02:00:00:00:00:01{settings}); \
         feed[0] -> [0]arp; feed[1] -> [1]arp; arp -> Collect;"
    )
}

fn setup(settings: &str) -> (Rc<Harness>, Router) {
    let h = Rc::new(Harness::default());
    let r = h.router(&config(settings));
    (h, r)
}

fn read(r: &Router, handler: &str) -> String {
    r.read_handler(r.find("arp").unwrap(), handler).unwrap()
}

fn hop(d: u8) -> Option<IpAddr> {
    Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, d)))
}

/// A 20-byte stand-in for an IPv4 packet, told apart by `mark`.
fn ip_packet(mark: u8) -> Vec<u8> {
    let mut p = hex("45000014 00000000 40110000 0a000001 0a000002");
    p[5] = mark;
    p
}

/// `ip_packet(mark)` in an Ethernet frame to `dst` from us.
fn framed(dst: &str, mark: u8) -> Vec<u8> {
    let mut f = hex(&format!("{dst} 020000000001 0800"));
    f.extend(ip_packet(mark));
    f
}

/// "Who has 10.0.0.{d}? Tell 10.0.0.1", from us, to `eth_dst`.
fn request_from_us(eth_dst: &str, d: u8) -> Vec<u8> {
    hex(&format!(
        "{eth_dst} 020000000001 0806 | 0001 0800 06 04 0001 | 020000000001 0a000001 | 000000000000 0a0000{d:02x}"
    ))
}

/// An ARP packet from 10.0.0.{d} at 02:00:00:00:00:{d}.
fn arp_from(d: u8, eth_dst: &str, op: u16, tha: &str, tpa: &str) -> Vec<u8> {
    hex(&format!(
        "{eth_dst} 0200000000{d:02x} 0806 | 0001 0800 06 04 {op:04x} | 0200000000{d:02x} 0a0000{d:02x} | {tha} {tpa}"
    ))
}

fn reply_from(d: u8) -> Vec<u8> {
    arp_from(d, "020000000001", 2, "020000000001", "0a000001")
}

fn request_for_us_from(d: u8) -> Vec<u8> {
    arp_from(d, "ffffffffffff", 1, "000000000000", "0a000001")
}

#[test]
fn an_unknown_next_hop_is_asked_for_and_the_reply_releases_the_packets_in_order() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    for mark in 1..=3 {
        h.inject(0, 0, &ip_packet(mark), hop(2));
    }
    h.run_until(&mut r, 0);
    assert_eq!(h.take(), [(0, request_from_us("ffffffffffff", 2))]);
    assert_eq!(read(&r, "table"), "10.0.0.2 - INCOMPLETE\n");
    assert_eq!(read(&r, "waiting"), "3");
    h.inject(300 * MS, 1, &reply_from(2), None);
    h.run_until(&mut r, 300 * MS);
    let expected: Vec<_> = (1..=3).map(|m| (300 * MS, framed("020000000002", m))).collect();
    assert_eq!(h.take(), expected);
    assert_eq!(read(&r, "table"), "10.0.0.2 02:00:00:00:00:02 REACHABLE\n");
    // Resolved: no more requests, and the next packet goes straight out.
    h.inject(2 * S, 0, &ip_packet(4), hop(2));
    h.run_until(&mut r, 5 * S);
    assert_eq!(h.take(), [(2 * S, framed("020000000002", 4))]);
    assert_eq!((read(&r, "requests"), read(&r, "drops")), ("1".into(), "0".into()));
}

#[test]
fn requests_are_repeated_every_second_then_the_packets_are_dropped_and_counted() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    h.inject(0, 0, &ip_packet(1), hop(2));
    h.inject(500 * MS, 0, &ip_packet(2), hop(2));
    h.run_until(&mut r, 10 * S);
    let request = request_from_us("ffffffffffff", 2);
    assert_eq!(h.take(), [(0, request.clone()), (S, request.clone()), (2 * S, request)]);
    assert_eq!(read(&r, "count"), "0");
    assert_eq!(read(&r, "resolution_failures"), "1");
    assert_eq!(read(&r, "unresolved_drops"), "2");
    assert_eq!(read(&r, "drops"), "2");
    // The entry went at 3 s: a packet after that starts again.
    h.inject(11 * S, 0, &ip_packet(3), hop(2));
    h.run_until(&mut r, 11 * S);
    assert_eq!(h.take(), [(11 * S, request_from_us("ffffffffffff", 2))]);
}

#[test]
fn the_queue_keeps_the_latest_packets() {
    let (h, mut r) = setup(", ANNOUNCE 0, QUEUE 2");
    for mark in 1..=4 {
        h.inject(0, 0, &ip_packet(mark), hop(2));
    }
    h.inject(10 * MS, 1, &reply_from(2), None);
    h.run_until(&mut r, 10 * MS);
    let out: Vec<_> = h.take().into_iter().map(|(_, f)| f).collect();
    assert_eq!(
        out,
        [
            request_from_us("ffffffffffff", 2),
            framed("020000000002", 3),
            framed("020000000002", 4)
        ]
    );
    assert_eq!((read(&r, "queue_drops"), read(&r, "drops")), ("2".into(), "2".into()));
}

#[test]
fn a_request_for_us_is_answered_and_its_sender_learned_stale() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    // Padded to Ethernet's minimum of 60 bytes, as it arrives.
    let mut request = request_for_us_from(3);
    request.resize(60, 0);
    h.inject(S, 1, &request, None);
    h.run_until(&mut r, S);
    let reply =
        hex("020000000003 020000000001 0806 | 0001 0800 06 04 0002 | 020000000001 0a000001 | 020000000003 0a000003");
    assert_eq!(h.take(), [(S, reply)]);
    assert_eq!(read(&r, "table"), "10.0.0.3 02:00:00:00:00:03 STALE\n");
    assert_eq!(read(&r, "replies"), "1");
}

#[test]
fn a_request_for_another_host_teaches_nothing_new_but_updates_a_known_sender() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    // 10.0.0.4 asks for 10.0.0.9: not for us, and 10.0.0.4 is unknown.
    h.inject(0, 1, &arp_from(4, "ffffffffffff", 1, "000000000000", "0a000009"), None);
    h.run_until(&mut r, 0);
    assert_eq!(h.take(), []);
    assert_eq!(read(&r, "count"), "0");
    // Once known (REACHABLE), the merge updates it: another address is STALE.
    h.inject(S, 1, &request_for_us_from(4), None);
    h.inject(S, 1, &reply_from(4), None);
    h.run_until(&mut r, S);
    h.take();
    assert_eq!(read(&r, "table"), "10.0.0.4 02:00:00:00:00:04 REACHABLE\n");
    let mut moved = arp_from(4, "ffffffffffff", 1, "000000000000", "0a000009");
    moved[6..12].copy_from_slice(&hex("0200000000aa"));
    moved[22..28].copy_from_slice(&hex("0200000000aa"));
    h.inject(2 * S, 1, &moved, None);
    h.run_until(&mut r, 2 * S);
    assert_eq!(read(&r, "table"), "10.0.0.4 02:00:00:00:00:aa STALE\n");
    assert_eq!(h.take(), []);
}

#[test]
fn a_stale_neighbour_is_used_then_probed_by_unicast_and_deleted_when_silent() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    h.inject(0, 1, &request_for_us_from(3), None);
    h.inject(S, 0, &ip_packet(1), hop(3));
    h.run_until(&mut r, 20 * S);
    let probe = request_from_us("020000000003", 3);
    let out = h.take();
    assert_eq!(out.len(), 5, "{out:?}");
    assert_eq!(out[1], (S, framed("020000000003", 1)), "STALE sends at once");
    // DELAY_FIRST_PROBE_TIME after the packet, three probes a second apart.
    assert_eq!(
        out[2..],
        [(6 * S, probe.clone()), (7 * S, probe.clone()), (8 * S, probe)]
    );
    assert_eq!(read(&r, "count"), "0", "deleted at 9 s");
    assert_eq!(read(&r, "probe_failures"), "1");
}

#[test]
fn a_reply_to_a_probe_makes_the_neighbour_reachable_again() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    h.inject(0, 1, &request_for_us_from(3), None);
    h.inject(S, 0, &ip_packet(1), hop(3));
    h.inject(6 * S + 10 * MS, 1, &reply_from(3), None);
    h.run_until(&mut r, 6 * S + 10 * MS);
    assert_eq!(read(&r, "table"), "10.0.0.3 02:00:00:00:00:03 REACHABLE\n");
    assert_eq!(read(&r, "requests"), "1");
}

#[test]
fn an_announcement_goes_at_start_and_two_seconds_later_and_on_the_handler() {
    let (h, mut r) = setup("");
    h.run_until(&mut r, 10 * S);
    let announcement =
        hex("ffffffffffff 020000000001 0806 | 0001 0800 06 04 0001 | 020000000001 0a000001 | 000000000000 0a000001");
    assert_eq!(h.take(), [(0, announcement.clone()), (2 * S, announcement.clone())]);
    r.write_handler(r.find("arp").unwrap(), "announce", "").unwrap();
    h.run_until(&mut r, 20 * S);
    assert_eq!(h.take(), [(10 * S, announcement.clone()), (12 * S, announcement)]);
    assert_eq!(read(&r, "announcements"), "4");
}

#[test]
fn an_entry_written_by_hand_is_permanent_and_can_be_deleted() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    h.inject(0, 0, &ip_packet(1), hop(5));
    h.run_until(&mut r, 0);
    h.take();
    let arp = r.find("arp").unwrap();
    r.write_handler(arp, "insert", "10.0.0.5 02:00:00:00:00:05").unwrap();
    assert_eq!(h.take(), [(0, framed("020000000005", 1))], "the waiting packet leaves");
    assert_eq!(read(&r, "table"), "10.0.0.5 02:00:00:00:00:05 PERMANENT\n");
    h.run_until(&mut r, 100 * S);
    assert_eq!(h.take(), [], "no request, no probe");
    assert!(r.write_handler(arp, "insert", "10.0.0.5").is_err());
    r.write_handler(arp, "delete", "10.0.0.5").unwrap();
    assert!(r.write_handler(arp, "delete", "10.0.0.5").is_err());
    assert_eq!(read(&r, "count"), "0");
}

#[test]
fn broadcast_and_multicast_next_hops_need_no_resolution_and_none_is_dropped() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    h.inject(0, 0, &ip_packet(1), hop(255));
    h.inject(0, 0, &ip_packet(2), Some(IpAddr::V4(Ipv4Addr::BROADCAST)));
    h.inject(0, 0, &ip_packet(3), Some(IpAddr::V4(Ipv4Addr::new(224, 0, 0, 251))));
    h.inject(0, 0, &ip_packet(4), None);
    h.run_until(&mut r, 0);
    let out: Vec<_> = h.take().into_iter().map(|(_, f)| f).collect();
    assert_eq!(
        out,
        [
            framed("ffffffffffff", 1),
            framed("ffffffffffff", 2),
            framed("01005e0000fb", 3)
        ]
    );
    assert_eq!((read(&r, "no_next_hop"), read(&r, "drops")), ("1".into(), "1".into()));
}

#[test]
fn a_probe_for_our_address_is_answered_and_teaches_nothing() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    let probe =
        hex("ffffffffffff 020000000007 0806 | 0001 0800 06 04 0001 | 020000000007 00000000 | 000000000000 0a000001");
    h.inject(0, 1, &probe, None);
    h.run_until(&mut r, 0);
    let reply =
        hex("020000000007 020000000001 0806 | 0001 0800 06 04 0002 | 020000000001 0a000001 | 020000000007 00000000");
    assert_eq!(h.take(), [(0, reply)]);
    assert_eq!(read(&r, "count"), "0");
}

#[test]
fn another_host_with_our_address_is_a_conflict_and_our_own_frames_are_ignored() {
    let (h, mut r) = setup(", ANNOUNCE 0");
    let claim =
        hex("ffffffffffff 020000000009 0806 | 0001 0800 06 04 0001 | 020000000009 0a000001 | 000000000000 0a000001");
    h.inject(0, 1, &claim, None);
    h.inject(0, 1, &request_from_us("ffffffffffff", 2), None);
    h.inject(0, 1, &hex("ffffffffffff 020000000009 0800 4500"), None);
    h.run_until(&mut r, 0);
    assert_eq!(h.take(), []);
    assert_eq!(read(&r, "conflicts"), "1");
    assert_eq!(read(&r, "count"), "0");
    assert_eq!((read(&r, "bad_frames"), read(&r, "drops")), ("1".into(), "1".into()));
}

#[test]
fn a_full_table_refuses_new_neighbours_and_counts_the_packets() {
    let (h, mut r) = setup(", ANNOUNCE 0, ENTRIES 2");
    for d in 2..=4 {
        h.inject(0, 0, &ip_packet(d), hop(d));
    }
    h.run_until(&mut r, 0);
    assert_eq!(h.take().len(), 2, "two requests");
    assert_eq!((read(&r, "full_drops"), read(&r, "count")), ("1".into(), "2".into()));
}

#[test]
fn bad_arguments_are_refused() {
    for bad in [
        "arp :: ARPResolver(10.0.0.1)",
        "arp :: ARPResolver(10.0.0.1, ff:ff:ff:ff:ff:ff)",
        "arp :: ARPResolver(224.0.0.1, 02:00:00:00:00:01)",
        "arp :: ARPResolver(10.0.0.1, 02:00:00:00:00:01, ENTRIES 0)",
        "arp :: ARPResolver(10.0.0.1, 02:00:00:00:00:01, COLOR 3)",
    ] {
        crate::elements::register();
        let config = format!("Idle -> {bad} -> Discard; Idle -> [1]arp");
        assert!(oxnet_graph::build("t.click", &config, &[]).is_err(), "{bad}");
    }
}

/// A random ARP packet from a host of 10.0.0.0/24 (one of 40), as a
/// request or reply, for us or not.
fn arp_strategy() -> impl Strategy<Value = Vec<u8>> {
    (0u8..40, any::<bool>(), any::<bool>(), any::<u8>()).prop_map(|(d, reply, for_us, mac)| {
        let mut f = arp_from(
            d + 2,
            "ffffffffffff",
            if reply { 2 } else { 1 },
            "000000000000",
            if for_us { "0a000001" } else { "0a000063" },
        );
        f[11] = mac | 2; // another address, and not ours (…:01)
        f[27] = mac | 2;
        f
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_frames_never_panic_and_never_grow_the_table_past_its_bound(
        frames in prop::collection::vec(
            prop_oneof![arp_strategy(), prop::collection::vec(any::<u8>(), 0..80)],
            1..60,
        ),
        packets in prop::collection::vec(2u8..60, 0..20),
    ) {
        let (h, mut r) = setup(", ANNOUNCE 0, ENTRIES 8, QUEUE 2");
        for (i, f) in frames.iter().enumerate() {
            h.inject(i as u64 * 100 * MS, 1, f, None);
        }
        for (i, d) in packets.iter().enumerate() {
            h.inject(i as u64 * 150 * MS, 0, &ip_packet(*d), hop(*d));
        }
        for t in 0..12 {
            h.run_until(&mut r, t * S);
            let count: usize = read(&r, "count").parse().unwrap();
            let waiting: usize = read(&r, "waiting").parse().unwrap();
            prop_assert!(count <= 8, "{count} entries");
            prop_assert!(waiting <= 16, "{waiting} waiting");
        }
    }
}
