//! IPv6Input: checks, drop reasons, extension headers, demultiplexing.

use super::*;
use crate::ip::ipv6_input::solicited_node;

const CONFIG: &str = "Inject -> in :: IPv6Input(fe80::1 2001:db8::1) -> Sink(tcp); \
     in[1] -> Sink(udp); in[2] -> Sink(icmp); in[3] -> Sink(other);";

#[test]
fn solicited_node_groups() {
    let a: Ipv6Addr = "2001:db8::aabb:ccdd".parse().unwrap();
    assert_eq!(solicited_node(a), "ff02::1:ffbb:ccdd".parse::<Ipv6Addr>().unwrap());
}

#[test]
fn packets_go_out_by_protocol_trimmed_and_marked() {
    let mut b = Bench::new(CONFIG);
    let udp = ipv6_frame("fe80::2", "fe80::1", 17, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let mut padded = udp.clone();
    padded.extend_from_slice(&[0; 6]);
    // Destination Options (next: TCP, 8 bytes with a PadN), then TCP.
    let mut payload = vec![6, 0, 1, 4, 0, 0, 0, 0];
    payload.extend_from_slice(&[7; 20]);
    let tcp = ipv6_frame("fe80::2", "2001:db8::1", 60, &payload);
    let all_nodes = ipv6_frame("fe80::2", "ff02::1", 58, &[128, 0, 0, 0, 0, 0, 0, 0]);
    let solicited = ipv6_frame("fe80::2", "ff02::1:ff00:1", 58, &[135, 0, 0, 0, 0, 0, 0, 0]);
    let nothing = ipv6_frame("fe80::2", "fe80::1", 59, &[]);
    b.frames(vec![
        padded,
        tcp.clone(),
        all_nodes.clone(),
        solicited.clone(),
        nothing.clone(),
    ]);
    let u = b.take("udp");
    assert_eq!(u[0].bytes, udp, "padding cut off");
    assert_eq!(
        (u[0].network, u[0].transport, u[0].packet_type),
        (Some(14), Some(54), 0)
    );
    let t = b.take("tcp");
    assert_eq!((t[0].bytes.clone(), t[0].transport), (tcp, Some(62)));
    let i = b.take("icmp");
    assert_eq!(i.len(), 2);
    assert_eq!((i[0].bytes.clone(), i[0].packet_type), (all_nodes, 2));
    assert_eq!((i[1].bytes.clone(), i[1].packet_type), (solicited, 2));
    assert_eq!(b.take("other")[0].bytes, nothing);
    b.expect_counts("in", &[("count", 5)]);
}

#[test]
fn every_drop_reason_is_counted() {
    let mut b = Bench::new(CONFIG);
    let good = ipv6_frame("fe80::2", "fe80::1", 17, &[0; 8]);
    let mut vlan = ether(0x8100);
    vlan.extend_from_slice(&[0, 1, 0x86, 0xdd]);
    vlan.extend_from_slice(&good[14..]);
    let mut v4 = good.clone();
    v4[12..14].copy_from_slice(&[8, 0]);
    let mut version = good.clone();
    version[14] = 0x40;
    let mut long = good.clone();
    long[14 + 5] = 9; // payload length 9 in 8 bytes
                      // Hop-by-Hop after Destination Options (RFC 8200 §4.1 says first).
    let misordered = ipv6_frame(
        "fe80::2",
        "fe80::1",
        60,
        &[0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0],
    );
    let fragment = ipv6_frame(
        "fe80::2",
        "fe80::1",
        44,
        &[17, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    let chained = Item {
        chained: Some(vec![0; 4]),
        ..Item::frame(good.clone())
    };
    b.push(vec![chained]);
    b.frames(vec![
        vlan,
        v4,
        good[..20].to_vec(),
        version,
        long,
        misordered,
        ipv6_frame("ff02::1", "fe80::1", 17, &[0; 8]),
        ipv6_frame("fe80::2", "fe80::9", 17, &[0; 8]),
        ipv6_frame("fe80::2", "ff02::1:ff00:2", 17, &[0; 8]),
        ipv6_frame("fe80::2", "ff02::2", 17, &[0; 8]),
        fragment,
        good,
    ]);
    b.expect_counts(
        "in",
        &[
            ("vlan", 1),
            ("not_ipv6", 1),
            ("bad_header", 4),
            ("bad_source", 1),
            ("not_for_us", 3),
            ("fragments", 1),
            ("chained", 1),
            ("count", 1),
            ("drops", 12),
        ],
    );
}

#[test]
fn other_protocols_are_counted_without_a_fourth_output() {
    let mut b = Bench::new("Inject -> in :: IPv6Input(fe80::1) -> Sink(tcp); in[1] -> Sink(udp); in[2] -> Sink(icmp);");
    b.frames(vec![ipv6_frame("fe80::2", "fe80::1", 59, &[])]);
    b.expect_counts("in", &[("other_protocol", 1)]);
}

#[test]
fn extension_header_options_and_routing_headers() {
    let mut b = Bench::new(CONFIG);
    let udp = [0u8; 8];
    let with = |next: u8, header: &[u8]| {
        let mut payload = header.to_vec();
        payload.extend_from_slice(&udp);
        ipv6_frame("fe80::2", "fe80::1", next, &payload)
    };
    // Hop-by-Hop: Router Alert (MLD), then PadN: understood.
    let alert = with(0, &[17, 0, 5, 2, 0, 0, 1, 0]);
    // Destination Options: Pad1 x2, an unknown option 0x1e (00: skip).
    let skip = with(60, &[17, 0, 0, 0, 0x1e, 2, 9, 9]);
    // An unknown option 0x63 (01: discard), and a Jumbo Payload (0xc2).
    let discard = with(60, &[17, 0, 0x63, 4, 0, 0, 0, 0]);
    let jumbo = with(0, &[17, 0, 0xc2, 4, 0, 1, 0, 0]);
    // An option running past its header.
    let overrun = with(60, &[17, 0, 1, 9, 0, 0, 0, 0]);
    // Routing headers: segments left 0 is ignored, 1 asks to forward.
    let done = with(43, &[17, 0, 4, 0, 0, 0, 0, 0]);
    let forward = with(43, &[17, 0, 4, 1, 0, 0, 0, 0]);
    b.frames(vec![
        alert.clone(),
        skip.clone(),
        discard,
        jumbo,
        overrun,
        done.clone(),
        forward,
    ]);
    let out = b.take("udp");
    assert_eq!(out.len(), 3);
    assert_eq!((out[0].bytes.clone(), out[0].transport), (alert, Some(62)));
    assert_eq!(out[1].bytes, skip);
    assert_eq!(out[2].bytes, done);
    b.expect_counts(
        "in",
        &[
            ("unknown_option", 2),
            ("bad_header", 1),
            ("routing_header", 1),
            ("count", 3),
        ],
    );
}
