//! ICMPv4Responder and ICMPv6Responder: exact echo replies, errors with
//! the quoted header marked, Neighbor Discovery passed on, drops.

use super::*;
use crate::wire::icmpv4::Icmpv4Packet;
use crate::wire::icmpv6::Icmpv6Packet;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::Checksum;

const US: [u8; 4] = [10, 0, 0, 1];
const PEER: [u8; 4] = [10, 0, 0, 2];

/// Echo request, identifier 0x1234, sequence 1, data "abcd"; checksum by
/// hand: 0800 + 1234 + 0001 + 6162 + 6364 = 0xdefb, complement 0x2104.
const ECHO: [u8; 12] = [8, 0, 0x21, 0x04, 0x12, 0x34, 0, 1, b'a', b'b', b'c', b'd'];

/// An ICMP message of `head` (type, code, 4 more bytes) and `rest`, its
/// checksum filled by the wire module.
fn icmpv4(head: [u8; 8], rest: &[u8]) -> Vec<u8> {
    let mut m = head.to_vec();
    m.extend_from_slice(rest);
    Icmpv4Packet::new_unchecked(&mut m[..]).fill_checksum();
    m
}

fn v4_bench() -> Bench {
    Bench::new(
        "Inject -> in :: IPv4Input(10.0.0.1/24, BROADCAST true) -> Sink(tcp); in[1] -> Sink(udp); \
         in[2] -> icmp :: ICMPv4Responder(GATEWAY 10.0.0.254, NETWORK 10.0.0.0/24); \
         icmp[0] -> Sink(reply); icmp[1] -> Sink(error);",
    )
}

#[test]
fn echo_request_gets_its_reply_v4() {
    let mut b = v4_bench();
    b.frames(vec![
        ipv4_frame(PEER, US, 1, &ECHO),
        ipv4_frame([8, 8, 8, 8], US, 1, &ECHO),
    ]);
    let replies = b.take("reply");
    assert_eq!(replies.len(), 2);
    // IPv4 header: ident 0 (the counter's first), TTL 64, ICMP, from us
    // to the peer. Checksum by hand: 4500 + 0020 + 4001 + 0a00 + 0001 +
    // 0a00 + 0002 = 0x9924, complement 0x66db. ICMP: type 0, so the
    // request's sum less 0x0800: 0xd6fb, complement 0x2904.
    let expected = [
        0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x40, 0x01, 0x66, 0xdb, 10, 0, 0, 1, 10, 0, 0, 2, //
        0x00, 0x00, 0x29, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];
    assert_eq!(replies[0].bytes, expected);
    assert_eq!((replies[0].network, replies[0].transport), (Some(0), Some(20)));
    assert_eq!(replies[0].next_hop_v4, Ipv4Addr::new(10, 0, 0, 2));
    let ip = Ipv4Packet::new_checked(&replies[0].bytes[..]).unwrap();
    assert!(ip.verify_checksum());
    assert!(Icmpv4Packet::new_checked(ip.payload()).unwrap().verify_checksum());
    // Off the link: through the gateway; ident 1.
    let second = &replies[1];
    assert_eq!(second.next_hop_v4, Ipv4Addr::new(10, 0, 0, 254));
    let ip = Ipv4Packet::new_checked(&second.bytes[..]).unwrap();
    assert_eq!(
        (ip.ident(), ip.dst_addr(), ip.src_addr()),
        (1, Ipv4Addr::new(8, 8, 8, 8), Ipv4Addr::from(US))
    );
    assert!(ip.verify_checksum());
    b.expect_counts("icmp", &[("count", 2)]);
}

#[test]
fn a_large_reassembled_echo_request_gets_a_chained_reply() {
    let data: Vec<u8> = (0..3992u32).map(|i| (i % 249) as u8).collect();
    let request = icmpv4([8, 0, 0, 0, 0x77, 0x77, 0, 3], &data);
    let mut b = v4_bench();
    b.frames(vec![
        ipv4_fragment(PEER, US, 1, &request[..1480], 5, true, 0),
        ipv4_fragment(PEER, US, 1, &request[1480..2960], 5, true, 1480),
        ipv4_fragment(PEER, US, 1, &request[2960..], 5, false, 2960),
    ]);
    let replies = b.take("reply");
    assert_eq!(replies.len(), 1);
    assert!(replies[0].segments >= 2);
    let ip = Ipv4Packet::new_checked(&replies[0].bytes[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.total_len(), ip.src_addr(), ip.dst_addr()),
        (20 + 4000, Ipv4Addr::from(US), Ipv4Addr::from(PEER))
    );
    let reply = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(reply.verify_checksum());
    assert_eq!(
        (reply.msg_type(), reply.echo_ident(), reply.echo_seq_no()),
        (0, 0x7777, 3)
    );
    assert_eq!(reply.data(), &data[..]);
}

/// Port unreachable from a router about a UDP datagram of ours: the
/// quoted IPv4 header and 8 bytes of UDP.
fn port_unreachable(quoted_data: usize) -> Vec<u8> {
    let invoking = ipv4_frame(US, [192, 0, 2, 9], 17, &[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
    icmpv4([3, 3, 0, 0, 0, 0, 0, 0], &invoking[14..14 + 20 + quoted_data])
}

#[test]
fn errors_and_drops_v4() {
    let mut b = v4_bench();
    let error = ipv4_frame([10, 0, 0, 254], US, 1, &port_unreachable(8));
    let mut bad_sum = ECHO;
    bad_sum[3] ^= 1;
    let mut bad_code = ECHO;
    bad_code[1] = 1;
    b.frames(vec![
        error.clone(),
        ipv4_frame([10, 0, 0, 254], US, 1, &port_unreachable(4)),
        ipv4_frame(PEER, US, 1, &bad_sum),
        ipv4_frame(PEER, US, 1, &icmpv4(bad_code[..8].try_into().unwrap(), b"abcd")),
        ipv4_frame(PEER, US, 1, &icmpv4([0, 0, 0, 0, 0x12, 0x34, 0, 1], b"")),
        ipv4_frame(PEER, [255, 255, 255, 255], 1, &ECHO),
        ipv4_frame(PEER, US, 1, &ECHO[..6]),
    ]);
    let errors = b.take("error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].bytes, error, "untouched");
    assert_eq!((errors[0].network, errors[0].transport), (Some(42), Some(62)));
    assert!(b.take("reply").is_empty());
    b.expect_counts(
        "icmp",
        &[
            ("count", 1),
            ("bad_error", 1),
            ("bad_checksum", 1),
            ("bad_message", 1),
            ("ignored", 1),
            ("broadcast_echo", 1),
            ("bad_header", 1),
        ],
    );
}

fn v6(text: &str) -> Ipv6Addr {
    text.parse().unwrap()
}

/// An ICMPv6 message from `src` to `dst`, checksum filled by the wire
/// module.
fn icmpv6(src: &str, dst: &str, head: [u8; 8], rest: &[u8]) -> Vec<u8> {
    let mut m = head.to_vec();
    m.extend_from_slice(rest);
    Icmpv6Packet::new_unchecked(&mut m[..]).fill_checksum(&v6(src), &v6(dst));
    m
}

fn v6_bench(responder: &str) -> Bench {
    Bench::new(&format!(
        "Inject -> in :: IPv6Input(fe80::1) -> Sink(tcp); in[1] -> Sink(udp); \
         in[2] -> icmp :: {responder}; icmp[0] -> Sink(reply); icmp[1] -> Sink(error); icmp[2] -> Sink(nd);"
    ))
}

#[test]
fn echo_request_gets_its_reply_v6() {
    let mut b = v6_bench("ICMPv6Responder");
    let request = icmpv6("fe80::2", "fe80::1", [128, 0, 0, 0, 0x12, 0x34, 0, 1], b"abcd");
    b.frames(vec![ipv6_frame("fe80::2", "fe80::1", 58, &request)]);
    let replies = b.take("reply");
    assert_eq!(replies.len(), 1);
    // Checksum by hand: the pseudo-header fe80 + 1 + fe80 + 2 + 000c
    // (length) + 003a (next header), then 8100 + 1234 + 0001 + 6162 +
    // 6364: 0x35544, folded 0x5547, complement 0xaab8.
    let mut expected = vec![0x60, 0, 0, 0, 0x00, 0x0c, 58, 64];
    expected.extend_from_slice(&v6("fe80::1").octets());
    expected.extend_from_slice(&v6("fe80::2").octets());
    expected.extend_from_slice(&[0x81, 0x00, 0xaa, 0xb8, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd']);
    assert_eq!(replies[0].bytes, expected);
    assert_eq!((replies[0].network, replies[0].transport), (Some(0), Some(40)));
    assert_eq!(replies[0].next_hop_v6, v6("fe80::2"));
    let message = Icmpv6Packet::new_checked(&replies[0].bytes[40..]).unwrap();
    assert!(message.verify_checksum(&v6("fe80::1"), &v6("fe80::2")));
    let parsed = crate::wire::Icmpv6Repr::parse(&message, &v6("fe80::1"), &v6("fe80::2"), Checksum::Verify);
    assert!(matches!(
        parsed,
        Ok(crate::wire::Icmpv6Repr::EchoReply {
            ident: 0x1234,
            seq_no: 1,
            data_len: 4
        })
    ));
}

#[test]
fn multicast_echo_is_answered_from_src_only() {
    let request = icmpv6("fe80::2", "ff02::1", [128, 0, 0, 0, 0, 7, 0, 9], b"");
    let frame = ipv6_frame("fe80::2", "ff02::1", 58, &request);
    let mut b = v6_bench("ICMPv6Responder");
    b.frames(vec![frame.clone()]);
    assert!(b.take("reply").is_empty());
    b.expect_counts("icmp", &[("multicast_echo", 1)]);
    let mut b = v6_bench("ICMPv6Responder(SRC 2001:db8::1, HOP_LIMIT 255)");
    b.frames(vec![frame]);
    let reply = &b.take("reply")[0];
    assert_eq!(reply.bytes[7], 255);
    assert_eq!(reply.bytes[8..24], v6("2001:db8::1").octets());
    let message = Icmpv6Packet::new_checked(&reply.bytes[40..]).unwrap();
    assert!(message.verify_checksum(&v6("2001:db8::1"), &v6("fe80::2")));
    b.expect_counts("icmp", &[("count", 1)]);
}

#[test]
fn errors_neighbor_discovery_and_drops_v6() {
    let mut b = v6_bench("ICMPv6Responder");
    let invoking = ipv6_frame("fe80::1", "2001:db8::9", 17, &[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
    let too_big = icmpv6("fe80::9", "fe80::1", [2, 0, 0, 0, 0, 0, 0x05, 0x00], &invoking[14..]);
    let too_big = ipv6_frame("fe80::9", "fe80::1", 58, &too_big);
    let cut = icmpv6("fe80::9", "fe80::1", [1, 4, 0, 0, 0, 0, 0, 0], &invoking[14..14 + 44]);
    // A Neighbor Solicitation for fe80::1 (RFC 4861 §4.3).
    let mut ns_body = v6("fe80::1").octets().to_vec();
    ns_body.splice(0..0, [0, 0, 0, 0]);
    let ns = icmpv6("fe80::2", "ff02::1:ff00:1", [135, 0, 0, 0, 0, 0, 0, 0], &ns_body[4..]);
    let ns = ipv6_frame("fe80::2", "ff02::1:ff00:1", 58, &ns);
    let mld = icmpv6(
        "fe80::2",
        "ff02::1",
        [131, 0, 0, 0, 0, 0, 0, 0],
        &v6("ff02::1").octets(),
    );
    let mut bad = icmpv6("fe80::2", "fe80::1", [128, 0, 0, 0, 0, 1, 0, 1], b"");
    bad[2] ^= 0x80;
    let reply = icmpv6("fe80::2", "fe80::1", [129, 0, 0, 0, 0, 1, 0, 1], b"");
    b.frames(vec![
        too_big.clone(),
        ipv6_frame("fe80::9", "fe80::1", 58, &cut),
        ns.clone(),
        ipv6_frame("fe80::2", "ff02::1", 58, &mld),
        ipv6_frame("fe80::2", "fe80::1", 58, &bad),
        ipv6_frame("fe80::2", "fe80::1", 58, &reply),
        ipv6_frame("fe80::2", "fe80::1", 58, &[128, 0, 0]),
    ]);
    let errors = b.take("error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].bytes, too_big);
    assert_eq!(
        (errors[0].network, errors[0].transport),
        (Some(14 + 40 + 8), Some(14 + 48 + 40))
    );
    let nd = b.take("nd");
    assert_eq!(nd.len(), 1);
    assert_eq!(
        (nd[0].bytes.clone(), nd[0].network, nd[0].transport),
        (ns, Some(14), Some(54))
    );
    b.expect_counts(
        "icmp",
        &[
            ("count", 2),
            ("bad_error", 1),
            ("mld", 1),
            ("bad_checksum", 1),
            ("ignored", 1),
            ("bad_header", 1),
        ],
    );
}

#[test]
fn more_v6_drops() {
    let mut b = v6_bench("ICMPv6Responder");
    let from_nowhere = icmpv6("::", "fe80::1", [128, 0, 0, 0, 0, 1, 0, 1], b"");
    let bad_code = icmpv6("fe80::2", "fe80::1", [128, 1, 0, 0, 0, 1, 0, 1], b"");
    let time_exceeded = {
        let invoking = ipv6_frame("fe80::1", "2001:db8::9", 17, &[0; 8]);
        icmpv6("fe80::9", "fe80::1", [3, 0, 0, 0, 0, 0, 0, 0], &invoking[14..])
    };
    b.frames(vec![
        ipv6_frame("::", "fe80::1", 58, &from_nowhere),
        ipv6_frame("fe80::2", "fe80::1", 58, &bad_code),
        ipv6_frame("fe80::9", "fe80::1", 58, &time_exceeded),
    ]);
    assert_eq!(b.take("error").len(), 1);
    b.expect_counts("icmp", &[("bad_source", 1), ("bad_message", 1), ("count", 1)]);
    // Straight into the responder: a chained packet, and one without marks.
    let mut b = Bench::new("Inject -> icmp :: ICMPv6Responder -> Sink(a); icmp[1] -> Sink(b); icmp[2] -> Sink(c);");
    let frame = ipv6_frame(
        "fe80::2",
        "fe80::1",
        58,
        &icmpv6("fe80::2", "fe80::1", [128, 0, 0, 0, 0, 1, 0, 1], b""),
    );
    b.push(vec![
        Item {
            marks: Some((14, 40)),
            chained: Some(vec![0; 2]),
            ..Item::frame(frame.clone())
        },
        Item::frame(frame.clone()),
        Item {
            marks: Some((14, 40)),
            ..Item::frame(frame)
        },
    ]);
    assert_eq!(b.take("a").len(), 1);
    b.expect_counts("icmp", &[("chained", 1), ("bad_header", 1), ("count", 1)]);
}

#[test]
fn time_exceeded_v4_is_an_error_too() {
    let mut b = v4_bench();
    let invoking = ipv4_frame(US, [192, 0, 2, 9], 6, &[0x30, 0x39, 0, 80, 0, 0, 0, 1]);
    let message = icmpv4([11, 0, 0, 0, 0, 0, 0, 0], &invoking[14..]);
    let frame = ipv4_frame([10, 0, 0, 254], US, 1, &message);
    b.frames(vec![frame.clone()]);
    let errors = b.take("error");
    assert_eq!(
        (errors[0].bytes.clone(), errors[0].network, errors[0].transport),
        (frame, Some(42), Some(62))
    );
}

#[test]
fn an_unknown_v6_error_type_goes_up_and_an_unknown_informational_one_does_not() {
    let mut b = v6_bench("ICMPv6Responder");
    let invoking = ipv6_frame("fe80::1", "2001:db8::9", 6, &[0; 20]);
    let unknown_error = icmpv6("fe80::9", "fe80::1", [100, 0, 0, 0, 0, 0, 0, 0], &invoking[14..]);
    let unknown_error = ipv6_frame("fe80::9", "fe80::1", 58, &unknown_error);
    let no_quote = icmpv6("fe80::9", "fe80::1", [100, 0, 0, 0, 0, 0, 0, 0], &[0x60; 20]);
    let unknown_info = icmpv6("fe80::9", "fe80::1", [200, 0, 0, 0, 0, 0, 0, 0], b"");
    b.frames(vec![
        unknown_error.clone(),
        ipv6_frame("fe80::9", "fe80::1", 58, &no_quote),
        ipv6_frame("fe80::9", "fe80::1", 58, &unknown_info),
    ]);
    let errors = b.take("error");
    assert_eq!(errors.len(), 1);
    assert_eq!(
        (errors[0].bytes.clone(), errors[0].network, errors[0].transport),
        (unknown_error, Some(62), Some(102))
    );
    b.expect_counts("icmp", &[("count", 1), ("bad_error", 1), ("ignored", 1)]);
}

#[test]
fn parameter_problem_v4_goes_up_and_source_quench_does_not() {
    let mut b = v4_bench();
    // The invoking datagram had a word of options: the quoted header is 24 bytes.
    let mut invoking = ipv4_frame(US, [192, 0, 2, 9], 17, &[1, 1, 1, 1, 0x30, 0x39, 0, 53, 0, 12, 0, 0]);
    Ipv4Packet::new_unchecked(&mut invoking[14..]).set_version_and_header_len(24);
    let problem = icmpv4([12, 0, 0, 0, 20, 0, 0, 0], &invoking[14..]);
    let problem = ipv4_frame([10, 0, 0, 254], US, 1, &problem);
    let quench = icmpv4([4, 0, 0, 0, 0, 0, 0, 0], &invoking[14..]);
    let short = icmpv4([12, 0, 0, 0, 20, 0, 0, 0], &invoking[14..14 + 24 + 4]);
    b.frames(vec![
        problem.clone(),
        ipv4_frame([10, 0, 0, 254], US, 1, &quench),
        ipv4_frame([10, 0, 0, 254], US, 1, &short),
    ]);
    let errors = b.take("error");
    assert_eq!(errors.len(), 1);
    assert_eq!(
        (errors[0].bytes.clone(), errors[0].network, errors[0].transport),
        (problem, Some(42), Some(66))
    );
    b.expect_counts("icmp", &[("count", 1), ("ignored", 1), ("bad_error", 1)]);
}
