//! IPv4Output and IPv6Output: exact headers, transport checksums (checked
//! by the wire module), offload requests, next hops, drops.

use super::*;
use crate::wire::ip::IpAddress;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::tcp::TcpPacket;
use crate::wire::udp::UdpPacket;
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO};

/// UDP 12345 -> 53, length 12, checksum left 0, data "abcd".
const UDP: [u8; 12] = [0x30, 0x39, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd'];

/// A TCP header without options (SYN, sequence 1, window 0xffff) and 2
/// data bytes.
const TCP: [u8; 22] = [
    0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0, 0xde, 0xad,
];

fn to_v4(segment: &[u8], dst: [u8; 4]) -> Item {
    Item {
        next_hop_v4: Some(dst.into()),
        ..Item::frame(segment.to_vec())
    }
}

#[test]
fn udp_over_ipv4_exact_bytes_and_next_hops() {
    let mut b = Bench::new(
        "Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL udp, L4_CHECKSUM true, \
         GATEWAY 10.0.0.254, NETWORK 10.0.0.0/24) -> Sink(out);",
    );
    b.push(vec![to_v4(&UDP, [10, 0, 0, 2]), to_v4(&UDP, [8, 8, 8, 8])]);
    let out = b.take("out");
    // IPv4 checksum by hand: 4500 + 0020 + 4011 + 0a00 + 0001 + 0a00 +
    // 0002 = 0x9934, complement 0x66cb. UDP: pseudo-header 0a00 + 0001 +
    // 0a00 + 0002 + 0011 + 000c = 0x1420, header and data 3039 + 0035 +
    // 000c + 6162 + 6364 = 0xf540: 0x10960, folded 0x0961, complement
    // 0xf69e.
    let expected = [
        0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x66, 0xcb, 10, 0, 0, 1, 10, 0, 0, 2, //
        0x30, 0x39, 0x00, 0x35, 0x00, 0x0c, 0xf6, 0x9e, b'a', b'b', b'c', b'd',
    ];
    assert_eq!(out[0].bytes, expected);
    assert_eq!((out[0].network, out[0].transport), (Some(0), Some(20)));
    assert_eq!(out[0].next_hop_v4, Ipv4Addr::new(10, 0, 0, 2));
    let udp = UdpPacket::new_checked(&out[0].bytes[20..]).unwrap();
    assert!(udp.verify_checksum(
        &IpAddress::V4([10, 0, 0, 1].into()),
        &IpAddress::V4([10, 0, 0, 2].into())
    ));
    assert_eq!(out[1].next_hop_v4, Ipv4Addr::new(10, 0, 0, 254), "off the link");
    let ip = Ipv4Packet::new_checked(&out[1].bytes[..]).unwrap();
    assert_eq!(
        (ip.ident(), ip.dont_frag(), ip.dst_addr()),
        (1, false, Ipv4Addr::new(8, 8, 8, 8))
    );
    assert!(ip.verify_checksum());
    b.expect_counts("out", &[("count", 2)]);
}

#[test]
fn tcp_has_dont_fragment_and_its_checksum() {
    let mut b =
        Bench::new("Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL tcp, TTL 7, L4_CHECKSUM true) -> Sink(out);");
    b.push(vec![to_v4(&TCP, [192, 0, 2, 1])]);
    let out = &b.take("out")[0];
    let ip = Ipv4Packet::new_checked(&out.bytes[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.dont_frag(), ip.ttl(), ip.total_len()), (true, 7, 42));
    assert_eq!(out.next_hop_v4, Ipv4Addr::new(192, 0, 2, 1), "no gateway: on the link");
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(tcp.verify_checksum(
        &IpAddress::V4([10, 0, 0, 1].into()),
        &IpAddress::V4([192, 0, 2, 1].into())
    ));
}

#[test]
fn offload_asks_the_device_and_the_software_fallback_agrees() {
    let mut b = Bench::new(
        "Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL tcp, L4_CHECKSUM true, CHECKSUM_OFFLOAD true) -> Sink(out);",
    );
    b.push(vec![to_v4(&TCP, [10, 0, 0, 2])]);
    let out = &b.take("out")[0];
    assert_eq!(out.bytes[10..12], [0, 0], "IPv4 checksum left to the device");
    assert_eq!(out.bytes[20 + 16..20 + 18], [0, 0], "TCP checksum left to the device");
    assert_eq!(
        out.tx_offload,
        TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0
        }
    );
    // What the device (or the driver's fallback) does with the request.
    let mut frame = ether(0x0800);
    frame.extend_from_slice(&out.bytes);
    oxnet_driver::offload::fill_checksums(&mut frame, &out.tx_offload).unwrap();
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert!(ip.verify_checksum());
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(tcp.verify_checksum(
        &IpAddress::V4([10, 0, 0, 1].into()),
        &IpAddress::V4([10, 0, 0, 2].into())
    ));
}

#[test]
fn a_tso_segment_passes_the_mtu_and_keeps_its_request() {
    let mut b = Bench::new("Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL tcp, L4_CHECKSUM true) -> Sink(out);");
    let tso = TxOffload {
        flags: TX_TSO,
        mss: 1460,
        ..TxOffload::default()
    };
    let big = Item {
        chained: Some(vec![7; 2000]),
        tx_offload: tso,
        ..to_v4(&TCP, [10, 0, 0, 2])
    };
    b.push(vec![big]);
    let out = &b.take("out")[0];
    assert_eq!(out.bytes.len(), 20 + 22 + 2000);
    assert_eq!(
        out.tx_offload,
        TxOffload {
            flags: TX_TSO,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 1460
        }
    );
    assert!(Ipv4Packet::new_checked(&out.bytes[..]).unwrap().verify_checksum());
    // Not TCP, or no TSO asked: the MTU holds.
    let mut b = Bench::new("Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL udp) -> Sink(out);");
    b.push(vec![Item {
        chained: Some(vec![7; 2000]),
        tx_offload: tso,
        ..to_v4(&UDP, [10, 0, 0, 2])
    }]);
    b.expect_counts("out", &[("too_big", 1)]);
}

#[test]
fn every_drop_reason_is_counted() {
    let mut b = Bench::new("Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL tcp, MTU 60) -> Sink(out);");
    b.push(vec![
        Item::frame(TCP.to_vec()),
        to_v4(&TCP[..10], [10, 0, 0, 2]),
        to_v4(&[TCP.as_slice(), &[0; 20]].concat(), [10, 0, 0, 2]),
        Item {
            use_headroom: 120,
            ..to_v4(&TCP, [10, 0, 0, 2])
        },
        to_v4(&[TCP.as_slice(), &[0; 18]].concat(), [10, 0, 0, 2]),
    ]);
    assert_eq!(b.take("out")[0].bytes.len(), 60, "exactly the MTU");
    b.expect_counts(
        "out",
        &[
            ("no_destination", 1),
            ("bad_segment", 1),
            ("too_big", 1),
            ("no_headroom", 1),
            ("count", 1),
            ("drops", 4),
        ],
    );
}

#[test]
fn a_chained_segment_gets_its_header_in_front_and_its_checksum_over_the_chain() {
    let mut b = Bench::new("Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL udp, L4_CHECKSUM true) -> Sink(out);");
    // UDP length 13 + 1000: the first buffer ends on an odd byte, which
    // the sum pairs with the next buffer's first.
    let mut head = UDP.to_vec();
    head.push(b'e');
    head[4..6].copy_from_slice(&1013u16.to_be_bytes());
    let tail: Vec<u8> = (0..1000u32).map(|i| (i % 253) as u8).collect();
    b.push(vec![Item {
        chained: Some(tail.clone()),
        ..to_v4(&head, [10, 0, 0, 2])
    }]);
    let out = &b.take("out")[0];
    assert_eq!(out.segments, 2);
    assert_eq!(out.bytes.len(), 20 + 1013);
    let ip = Ipv4Packet::new_checked(&out.bytes[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.total_len(), 1033);
    assert_eq!(ip.payload()[8..13], *b"abcde");
    assert_eq!(ip.payload()[13..], tail[..]);
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(
        &IpAddress::V4([10, 0, 0, 1].into()),
        &IpAddress::V4([10, 0, 0, 2].into())
    ));
}

#[test]
fn udp_over_ipv6_exact_header_and_checksum() {
    let mut b = Bench::new(
        "Inject -> out :: IPv6Output(2001:db8::1, PROTOCOL udp, L4_CHECKSUM true, \
         GATEWAY fe80::ff, NETWORK 2001:db8::/64) -> Sink(out);",
    );
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let to = |dst: &str| Item {
        next_hop_v6: Some(v6(dst)),
        ..Item::frame(UDP.to_vec())
    };
    b.push(vec![to("2001:db8::2"), to("2001:db9::2"), to("fe80::5")]);
    let out = b.take("out");
    let mut header = vec![0x60, 0, 0, 0, 0x00, 0x0c, 17, 64];
    header.extend_from_slice(&v6("2001:db8::1").octets());
    header.extend_from_slice(&v6("2001:db8::2").octets());
    assert_eq!(out[0].bytes[..40], header[..]);
    assert_eq!(out[0].bytes[40..46], UDP[..6]);
    assert_eq!(out[0].bytes[48..], UDP[8..]);
    let udp = UdpPacket::new_checked(&out[0].bytes[40..]).unwrap();
    assert!(udp.verify_checksum(&IpAddress::V6(v6("2001:db8::1")), &IpAddress::V6(v6("2001:db8::2"))));
    assert_eq!((out[0].network, out[0].transport), (Some(0), Some(40)));
    let hops: Vec<Ipv6Addr> = out.iter().map(|s| s.next_hop_v6).collect();
    assert_eq!(hops, [v6("2001:db8::2"), v6("fe80::ff"), v6("fe80::5")]);
}

#[test]
fn configuration_errors() {
    crate::elements::register();
    assert!(oxnet_graph::build(
        "t.click",
        "Idle -> IPv6Output(fe80::1, PROTOCOL icmpv6) -> Discard",
        &[]
    )
    .is_ok());
    for config in [
        "Idle -> IPv4Output(10.0.0.1) -> Discard",
        "Idle -> IPv4Output(10.0.0.1, PROTOCOL tcp, GATEWAY 10.0.0.254) -> Discard",
        "Idle -> IPv6Output(10.0.0.1, PROTOCOL udp) -> Discard",
        "Idle -> IPv6Output(fe80::1, PROTOCOL icmp) -> Discard",
        "Idle -> IPv4Output(10.0.0.1, PROTOCOL icmpv6) -> Discard",
        "Idle -> IPv4Output(10.0.0.1, PROTOCOL 256) -> Discard",
        "Idle -> IPv4Input -> Discard",
        "Idle -> IPv6Input(fe80::1, BROADCAST true) -> Discard",
    ] {
        assert!(oxnet_graph::build("t.click", config, &[]).is_err(), "{config}");
    }
}
