//! NDResolver in a router, in simulated time: exact frames out for frames
//! and packets in. The ICMPv6 checksums in these frames were worked out
//! apart from the code (RFC 4443 §2.3 over the pseudo-header of RFC 8200
//! §8.1).

use super::testkit::{hex, Harness};
use crate::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet,
    Ipv6Repr, NdiscOptions, NdiscRepr,
};
use oxnet_graph::Router;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv6Addr};
use std::rc::Rc;

const S: u64 = 1_000_000;
const MS: u64 = 1_000;

/// Us: fe80::1 and 2001:db8::1 at 02:00:00:00:00:01.
fn setup(settings: &str) -> (Rc<Harness>, Router) {
    let h = Rc::new(Harness::default());
    let r = h.router(&format!(
        "feed :: Feed; nd :: NDResolver(fe80::1 2001:db8::1, 02:00:00:00:00:01{settings}); \
         feed[0] -> [0]nd; feed[1] -> [1]nd; nd -> Collect;"
    ));
    (h, r)
}

/// Without DAD, and with the unsolicited advertisements of the start
/// taken away.
fn setup_started(settings: &str) -> (Rc<Harness>, Router) {
    let (h, mut r) = setup(&format!(", DAD_TRANSMITS 0{settings}"));
    h.run_until(&mut r, 0);
    assert_eq!(h.take().len(), 2, "one advertisement per address");
    (h, r)
}

fn read(r: &Router, handler: &str) -> String {
    r.read_handler(r.find("nd").unwrap(), handler).unwrap()
}

fn addr(text: &str) -> Ipv6Addr {
    text.parse().unwrap()
}

fn hop(text: &str) -> Option<IpAddr> {
    Some(IpAddr::V6(addr(text)))
}

fn hex_of(a: &str) -> String {
    addr(a).octets().iter().map(|b| format!("{b:02x}")).collect()
}

/// An Ethernet + IPv6 (next header ICMPv6) frame; `icmp` in hex.
fn frame(eth_dst: &str, eth_src: &str, src: &str, dst: &str, hop_limit: u8, icmp: &str) -> Vec<u8> {
    let icmp = hex(icmp);
    let mut f = hex(&format!("{eth_dst} {eth_src} 86dd 60000000"));
    f.extend((icmp.len() as u16).to_be_bytes());
    f.extend([58, hop_limit]);
    f.extend(hex(&hex_of(src)));
    f.extend(hex(&hex_of(dst)));
    f.extend(icmp);
    f
}

const ME: &str = "020000000001";

/// A 40-byte IPv6 header standing for a packet from `src`, told apart by
/// `mark` (its flow label).
fn ip_packet(src: &str, mark: u8) -> Vec<u8> {
    let mut p = hex(&format!("600000{mark:02x} 0000 3b 40"));
    p.extend(hex(&hex_of(src)));
    p.extend(hex(&hex_of("2001:db8::99")));
    p
}

fn framed(eth_dst: &str, src: &str, mark: u8) -> Vec<u8> {
    let mut f = hex(&format!("{eth_dst} {ME} 86dd"));
    f.extend(ip_packet(src, mark));
    f
}

/// Our solicitation for fe80::2 (to its solicited-node group).
fn ns_for_2() -> Vec<u8> {
    frame(
        "3333ff000002",
        ME,
        "fe80::1",
        "ff02::1:ff00:2",
        255,
        &format!("87 00 7a97 00000000 {} 0101 {ME}", hex_of("fe80::2")),
    )
}

/// fe80::2's solicited advertisement, with override, to us.
fn na_from_2() -> Vec<u8> {
    frame(
        ME,
        "020000000002",
        "fe80::2",
        "fe80::1",
        255,
        &format!("88 00 181a 60000000 {} 0201 020000000002", hex_of("fe80::2")),
    )
}

/// fe80::3 asks for fe80::1, with hop limit `hop_limit`.
fn ns_from_3(hop_limit: u8) -> Vec<u8> {
    frame(
        "3333ff000001",
        "020000000003",
        "fe80::3",
        "ff02::1:ff00:1",
        hop_limit,
        &format!("87 00 7a95 00000000 {} 0101 020000000003", hex_of("fe80::1")),
    )
}

/// A frame built with the wire module (for random messages; the tests of
/// exact bytes use the frames written out above).
fn nd_frame(eth_src: EthernetAddress, src: Ipv6Addr, dst: Ipv6Addr, message: NdiscRepr) -> Vec<u8> {
    let icmp = Icmpv6Repr::Ndisc(message);
    let len = icmp.buffer_len();
    let mut f = vec![0; 14 + 40 + len];
    EthernetRepr {
        src: eth_src,
        dst: EthernetAddress([2, 0, 0, 0, 0, 1]),
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv6Repr {
        src,
        dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: len,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut f[14..]));
    icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut f[54..]), &src, &dst);
    f
}

#[test]
fn dad_solicits_each_address_from_the_unspecified_address_then_advertises_it() {
    let (h, mut r) = setup("");
    assert_eq!(read(&r, "addresses"), "fe80::1 TENTATIVE\n2001:db8::1 TENTATIVE\n");
    // A packet from a tentative address is not sent.
    h.inject(500 * MS, 0, &ip_packet("fe80::1", 1), hop("fe80::2"));
    h.run_until(&mut r, 5 * S);
    let dad_ll = frame(
        "3333ff000001",
        ME,
        "::",
        "ff02::1:ff00:1",
        255,
        &format!("87 00 7c25 00000000 {}", hex_of("fe80::1")),
    );
    let dad_global = frame(
        "3333ff000001",
        ME,
        "::",
        "ff02::1:ff00:1",
        255,
        &format!("87 00 4ced 00000000 {}", hex_of("2001:db8::1")),
    );
    let na_ll = frame(
        "333300000001",
        ME,
        "fe80::1",
        "ff02::1",
        255,
        &format!("88 00 579b 20000000 {} 0201 {ME}", hex_of("fe80::1")),
    );
    let out = h.take();
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(out[..3], [(0, dad_ll), (0, dad_global), (S, na_ll)]);
    assert_eq!(out[3].0, S);
    assert_eq!(read(&r, "addresses"), "fe80::1 PREFERRED\n2001:db8::1 PREFERRED\n");
    assert_eq!(read(&r, "duplicates"), "");
    assert_eq!(read(&r, "tentative_drops"), "1");
    assert_eq!(
        (read(&r, "dad_solicitations"), read(&r, "advertisements")),
        ("2".into(), "2".into())
    );
}

#[test]
fn an_advertisement_of_a_tentative_address_makes_it_a_duplicate_never_used() {
    let (h, mut r) = setup("");
    // Another node's unsolicited advertisement of 2001:db8::1 (its
    // checksum is not what the test pins: filled in).
    let mut claim = frame(
        "333300000001",
        "020000000009",
        "2001:db8::1",
        "ff02::1",
        255,
        &format!("88 00 0000 20000000 {} 0201 020000000009", hex_of("2001:db8::1")),
    );
    fix_checksum(&mut claim);
    h.inject(500 * MS, 1, &claim, None);
    h.inject(2 * S, 0, &ip_packet("2001:db8::1", 1), hop("2001:db8::2"));
    h.run_until(&mut r, 5 * S);
    let out = h.take();
    // DAD's two solicitations, then the advertisement of fe80::1 alone.
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(out[2].1[38..54], addr("ff02::1").octets());
    assert_eq!(out[2].1[62..78], addr("fe80::1").octets());
    assert_eq!(read(&r, "duplicates"), "2001:db8::1\n");
    assert_eq!(read(&r, "addresses"), "fe80::1 PREFERRED\n2001:db8::1 DUPLICATE\n");
    assert_eq!(read(&r, "duplicate_drops"), "1");
    assert_eq!(read(&r, "count"), "0", "nothing learned from it");
}

/// Writes the ICMPv6 checksum of a frame built by [`frame`] with the
/// checksum left 0: the one-time computation for a frame whose value the
/// test does not pin (only its effect).
fn fix_checksum(f: &mut [u8]) {
    let (src, dst) = {
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        (ip.src_addr(), ip.dst_addr())
    };
    Icmpv6Packet::new_unchecked(&mut f[54..]).fill_checksum(&src, &dst);
}

#[test]
fn another_nodes_dad_solicitation_for_a_tentative_address_makes_it_a_duplicate() {
    let (h, mut r) = setup("");
    let theirs = frame(
        "3333ff000001",
        "020000000009",
        "::",
        "ff02::1:ff00:1",
        255,
        &format!("87 00 7c25 00000000 {}", hex_of("fe80::1")),
    );
    h.inject(500 * MS, 1, &theirs, None);
    h.run_until(&mut r, 5 * S);
    assert_eq!(read(&r, "duplicates"), "fe80::1\n");
    assert_eq!(read(&r, "addresses"), "fe80::1 DUPLICATE\n2001:db8::1 PREFERRED\n");
    h.take();
    // A solicitation for it later is not for us any more.
    h.inject(6 * S, 1, &ns_from_3(255), None);
    h.run_until(&mut r, 7 * S);
    assert_eq!(h.take(), []);
    assert_eq!(read(&r, "not_for_us"), "1");
}

#[test]
fn address_resolution_of_a_tentative_address_is_ignored() {
    let (h, mut r) = setup("");
    h.inject(500 * MS, 1, &ns_from_3(255), None);
    h.run_until(&mut r, 500 * MS);
    assert_eq!(h.take().len(), 2, "the DAD solicitations only");
    h.run_until(&mut r, 5 * S);
    assert_eq!(read(&r, "duplicates"), "");
    assert_eq!(read(&r, "count"), "0");
}

#[test]
fn a_solicitation_goes_to_the_solicited_node_group_and_the_advertisement_releases_the_packets() {
    let (h, mut r) = setup_started("");
    h.inject(S, 0, &ip_packet("fe80::1", 1), hop("fe80::2"));
    h.inject(S, 0, &ip_packet("fe80::1", 2), hop("fe80::2"));
    h.run_until(&mut r, S);
    assert_eq!(h.take(), [(S, ns_for_2())]);
    assert_eq!(read(&r, "table"), "fe80::2 - INCOMPLETE\n");
    h.inject(S + 200 * MS, 1, &na_from_2(), None);
    h.run_until(&mut r, S + 200 * MS);
    let t = S + 200 * MS;
    assert_eq!(
        h.take(),
        [
            (t, framed("020000000002", "fe80::1", 1)),
            (t, framed("020000000002", "fe80::1", 2))
        ]
    );
    assert_eq!(read(&r, "table"), "fe80::2 02:00:00:00:00:02 REACHABLE\n");
    assert_eq!(read(&r, "solicitations"), "1");
}

#[test]
fn solicitations_are_repeated_then_the_packets_dropped_and_counted() {
    let (h, mut r) = setup_started("");
    h.inject(0, 0, &ip_packet("fe80::1", 1), hop("fe80::2"));
    h.run_until(&mut r, 10 * S);
    assert_eq!(h.take(), [(0, ns_for_2()), (S, ns_for_2()), (2 * S, ns_for_2())]);
    assert_eq!(read(&r, "count"), "0");
    assert_eq!(
        (read(&r, "unresolved_drops"), read(&r, "drops")),
        ("1".into(), "1".into())
    );
}

#[test]
fn a_stale_neighbour_is_probed_by_unicast_solicitations() {
    let (h, mut r) = setup_started("");
    h.inject(0, 0, &ip_packet("fe80::1", 1), hop("fe80::2"));
    h.inject(100 * MS, 1, &na_from_2(), None);
    h.run_until(&mut r, S);
    assert_eq!(h.take().len(), 2, "the solicitation and the packet");
    assert_eq!(read(&r, "table"), "fe80::2 02:00:00:00:00:02 REACHABLE\n");
    // After ReachableTime (at most 45 s) STALE; a packet at 50 s: DELAY,
    // and 5 s later the first unicast probe.
    h.inject(50 * S, 0, &ip_packet("fe80::1", 2), hop("fe80::2"));
    h.run_until(&mut r, 55 * S);
    let probe = frame(
        "020000000002",
        ME,
        "fe80::1",
        "fe80::2",
        255,
        &format!("87 00 7a1b 00000000 {} 0101 {ME}", hex_of("fe80::2")),
    );
    assert_eq!(
        h.take(),
        [(50 * S, framed("020000000002", "fe80::1", 2)), (55 * S, probe)]
    );
    assert_eq!(read(&r, "table"), "fe80::2 02:00:00:00:00:02 PROBE\n");
}

#[test]
fn a_solicitation_for_us_is_answered_solicited_with_override_and_its_sender_learned() {
    let (h, mut r) = setup_started("");
    h.inject(S, 1, &ns_from_3(255), None);
    h.run_until(&mut r, S);
    let na = frame(
        "020000000003",
        ME,
        "fe80::1",
        "fe80::3",
        255,
        &format!("88 00 181b 60000000 {} 0201 {ME}", hex_of("fe80::1")),
    );
    assert_eq!(h.take(), [(S, na)]);
    assert_eq!(read(&r, "table"), "fe80::3 02:00:00:00:00:03 STALE\n");
}

#[test]
fn a_dad_solicitation_for_a_preferred_address_is_answered_to_all_nodes() {
    let (h, mut r) = setup_started("");
    let theirs = frame(
        "3333ff000001",
        "020000000009",
        "::",
        "ff02::1:ff00:1",
        255,
        &format!("87 00 7c25 00000000 {}", hex_of("fe80::1")),
    );
    h.inject(S, 1, &theirs, None);
    h.run_until(&mut r, S);
    let na_ll = frame(
        "333300000001",
        ME,
        "fe80::1",
        "ff02::1",
        255,
        &format!("88 00 579b 20000000 {} 0201 {ME}", hex_of("fe80::1")),
    );
    assert_eq!(h.take(), [(S, na_ll)]);
    assert_eq!(read(&r, "count"), "0");
}

#[test]
fn a_message_with_a_hop_limit_other_than_255_is_ignored_and_counted() {
    let (h, mut r) = setup_started("");
    h.inject(S, 1, &ns_from_3(64), None);
    let mut na = na_from_2();
    na[21] = 254;
    h.inject(S, 1, &na, None);
    h.run_until(&mut r, S);
    assert_eq!(h.take(), []);
    assert_eq!(read(&r, "invalid"), "2");
    assert_eq!(read(&r, "count"), "0");
    assert_eq!(read(&r, "drops"), "2");
}

#[test]
fn router_messages_are_ignored_and_invalid_or_foreign_frames_counted() {
    let (h, mut r) = setup_started("");
    let rs = frame(
        "333300000002",
        "020000000003",
        "fe80::3",
        "ff02::2",
        255,
        "85 00 7d34 00000000",
    );
    h.inject(S, 1, &rs, None);
    let mut bad_checksum = ns_from_3(255);
    bad_checksum[57] ^= 1;
    h.inject(S, 1, &bad_checksum, None);
    h.inject(S, 1, &hex("0200000000010200000000030800 4500"), None);
    // A solicited advertisement to a multicast address (§7.1.2).
    let mut multicast_na = na_from_2();
    multicast_na[38..54].copy_from_slice(&addr("ff02::1").octets());
    fix_checksum(&mut multicast_na);
    h.inject(S, 1, &multicast_na, None);
    // Code 1 (§7.1.1: code 0).
    let mut code_1 = ns_from_3(255);
    code_1[55] = 1;
    fix_checksum(&mut code_1);
    h.inject(S, 1, &code_1, None);
    // An echo request is ICMPv6 but not Neighbor Discovery.
    let mut echo = frame(ME, "020000000003", "fe80::3", "fe80::1", 64, "80 00 0000 0001 0001");
    fix_checksum(&mut echo);
    h.inject(S, 1, &echo, None);
    // A multicast source.
    let mut multicast_source = ns_from_3(255);
    multicast_source[22..38].copy_from_slice(&addr("ff02::3").octets());
    fix_checksum(&mut multicast_source);
    h.inject(S, 1, &multicast_source, None);
    // Our own address as the source, from another node.
    let mut ours = ns_from_3(255);
    ours[22..38].copy_from_slice(&addr("2001:db8::1").octets());
    fix_checksum(&mut ours);
    h.inject(S, 1, &ours, None);
    h.run_until(&mut r, S);
    assert_eq!(h.take(), []);
    assert_eq!(read(&r, "router_messages"), "1");
    assert_eq!(read(&r, "bad_frames"), "2");
    assert_eq!(read(&r, "invalid"), "4");
    assert_eq!(read(&r, "conflicts"), "1");
    assert_eq!(read(&r, "drops"), "6");
    assert_eq!(read(&r, "count"), "0");
}

#[test]
fn multicast_next_hops_need_no_resolution_and_none_is_dropped() {
    let (h, mut r) = setup_started("");
    h.inject(S, 0, &ip_packet("fe80::1", 1), hop("ff02::1:ff00:7"));
    h.inject(S, 0, &ip_packet("fe80::1", 2), Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)));
    h.inject(S, 0, &hex("4500"), hop("fe80::2"));
    h.run_until(&mut r, S);
    assert_eq!(h.take(), [(S, framed("3333ff000007", "fe80::1", 1))]);
    assert_eq!(
        (read(&r, "no_next_hop"), read(&r, "bad_packets")),
        ("1".into(), "1".into())
    );
}

#[test]
fn an_entry_written_by_hand_is_used_at_once() {
    let (h, mut r) = setup_started("");
    let nd = r.find("nd").unwrap();
    r.write_handler(nd, "insert", "fe80::5 02:00:00:00:00:05").unwrap();
    h.inject(S, 0, &ip_packet("fe80::1", 1), hop("fe80::5"));
    h.run_until(&mut r, S);
    assert_eq!(h.take(), [(S, framed("020000000005", "fe80::1", 1))]);
    assert_eq!(read(&r, "table"), "fe80::5 02:00:00:00:00:05 PERMANENT\n");
    r.write_handler(nd, "delete", "fe80::5").unwrap();
    assert!(r.write_handler(nd, "insert", "fe80::5 nonsense").is_err());
}

#[test]
fn bad_arguments_are_refused() {
    for bad in [
        "nd :: NDResolver(fe80::1)",
        "nd :: NDResolver(02:00:00:00:00:01)",
        "nd :: NDResolver(ff02::1, 02:00:00:00:00:01)",
        "nd :: NDResolver(fe80::1 fe80::1, 02:00:00:00:00:01)",
        "nd :: NDResolver(fe80::1, 02:00:00:00:00:01, 02:00:00:00:00:02)",
        "nd :: NDResolver(fe80::1, 02:00:00:00:00:01, DAD_TRANSMITS x)",
    ] {
        crate::elements::register();
        let config = format!("Idle -> {bad} -> Discard; Idle -> [1]nd");
        assert!(oxnet_graph::build("t.click", &config, &[]).is_err(), "{bad}");
    }
}

/// A random solicitation or advertisement from one of 40 neighbours.
fn nd_strategy() -> impl Strategy<Value = Vec<u8>> {
    (1u16..40, any::<bool>(), any::<[bool; 3]>(), any::<u8>()).prop_map(|(n, advert, flags, mac)| {
        let neighbour = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n + 1);
        let lladdr = EthernetAddress([2, 0, 0, 0, 1, mac]);
        let message = if advert {
            NdiscRepr::NeighborAdvert {
                router: false,
                solicited: flags[0],
                override_cache: flags[1],
                target: neighbour,
                options: NdiscOptions {
                    target_lladdr: flags[2].then_some(lladdr),
                    ..NdiscOptions::default()
                },
            }
        } else {
            NdiscRepr::NeighborSolicit {
                target: "fe80::1".parse().unwrap(),
                options: NdiscOptions {
                    source_lladdr: Some(lladdr),
                    ..NdiscOptions::default()
                },
            }
        };
        nd_frame(lladdr, neighbour, "fe80::1".parse().unwrap(), message)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_frames_never_panic_and_never_grow_the_cache_past_its_bound(
        frames in prop::collection::vec(
            prop_oneof![nd_strategy(), prop::collection::vec(any::<u8>(), 0..120)],
            1..60,
        ),
        packets in prop::collection::vec(2u16..60, 0..20),
    ) {
        let (h, mut r) = setup_started(", ENTRIES 8, QUEUE 2");
        for (i, f) in frames.iter().enumerate() {
            h.inject(i as u64 * 100 * MS, 1, f, None);
        }
        for (i, n) in packets.iter().enumerate() {
            let next = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, *n);
            h.inject(i as u64 * 150 * MS, 0, &ip_packet("fe80::1", 1), Some(IpAddr::V6(next)));
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
