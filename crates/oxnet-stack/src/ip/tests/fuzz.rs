//! Random bytes into every element never panic, and every packet in is
//! either passed on or counted in exactly one drop reason.

use super::*;
use crate::wire::ipv4::Ipv4Packet;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CASES: u32 = 300;

/// Runs `strategy`'s values through a bench built from `config`, one
/// packet per run.
fn fuzz(config: &str, strategy: impl Strategy<Value = Item>, check: impl Fn(&Bench, u64)) {
    let bench = RefCell::new(Bench::new(config));
    let sent = std::cell::Cell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |item| {
            let mut b = bench.borrow_mut();
            b.push(vec![item]);
            sent.set(sent.get() + 1);
            for sink in ["a", "b", "c", "d", "e"] {
                b.take(sink);
            }
            check(&b, sent.get());
            Ok(())
        })
        .unwrap();
    assert_eq!(sent.get(), u64::from(CASES));
}

/// Random bytes, or an Ethernet/IP frame with random fields but for the
/// ones that get it past the first checks.
fn frames(ethertype: u16, fix: fn(&mut [u8])) -> impl Strategy<Value = Item> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..120),
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(move |tail| {
            let mut f = ether(ethertype);
            f.extend_from_slice(&tail);
            fix(&mut f[14..]);
            f
        }),
    ]
    .prop_map(Item::frame)
}

/// Random bits of the header (the DSCP byte's) choose what is kept
/// random: the header length, the total length, the fragment fields.
fn fix_v4(ip: &mut [u8]) {
    if ip.len() < 20 {
        return;
    }
    let choice = ip[1];
    ip[0] = if choice & 4 == 0 {
        0x45
    } else {
        0x40 | (ip[0] & 0x0f).max(5)
    };
    ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
    ip[9] = [1, 6, 17, ip[9]][ip[9] as usize % 4];
    if choice & 1 == 0 {
        let len = ip.len() as u16;
        ip[2..4].copy_from_slice(&len.to_be_bytes());
    }
    if choice & 2 == 0 {
        ip[6..8].copy_from_slice(&[0, 0]);
    }
    let header_len = (ip[0] & 0x0f) as usize * 4;
    if ip.len() >= header_len {
        Ipv4Packet::new_unchecked(&mut ip[..header_len]).fill_checksum();
        if ip[9] == 1 && ip.len() >= header_len + 8 {
            crate::wire::icmpv4::Icmpv4Packet::new_unchecked(&mut ip[header_len..]).fill_checksum();
        }
    }
}

fn fix_v6(ip: &mut [u8]) {
    if ip.len() >= 40 {
        ip[0] = 0x60;
        let len = ((ip.len() - 40) as u16).min(u16::from_be_bytes([ip[4], ip[5]]));
        ip[4..6].copy_from_slice(&len.to_be_bytes());
        ip[6] = [0, 6, 17, 43, 44, 58, 59, 60][ip[6] as usize % 8];
        ip[24..40].copy_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        if ip[6] == 58 && ip.len() >= 48 {
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            let end = 40 + len as usize;
            if end >= 48 {
                crate::wire::icmpv6::Icmpv6Packet::new_unchecked(&mut ip[40..end]).fill_checksum(&src, &dst);
            }
        }
    }
}

fn total(b: &Bench, element: &str) -> u64 {
    b.read(element, "count") + b.read(element, "drops")
}

#[test]
fn ipv4_input_and_icmp() {
    fuzz(
        "Inject -> in :: IPv4Input(10.0.0.1/24, BROADCAST true, MAX_DATAGRAMS 4, MAX_TOTAL_BYTES 2000) \
         -> Sink(a); in[1] -> Sink(b); in[2] -> icmp :: ICMPv4Responder -> Sink(c); icmp[1] -> Sink(d); in[3] -> Sink(e);",
        frames(0x0800, fix_v4),
        |b, sent| {
            // Fragments kept for reassembly are neither out nor dropped.
            assert!(total(b, "in") <= sent);
            assert!(total(b, "icmp") <= b.read("in", "count"));
        },
    );
}

#[test]
fn ipv6_input_and_icmp() {
    fuzz(
        "Inject -> in :: IPv6Input(fe80::1) -> Sink(a); in[1] -> Sink(b); \
         in[2] -> icmp :: ICMPv6Responder(SRC fe80::1) -> Sink(c); icmp[1] -> Sink(d); icmp[2] -> Sink(e); in[3] -> Discard;",
        frames(0x86DD, fix_v6),
        |b, sent| assert_eq!(total(b, "in"), sent),
    );
}

/// Random bytes with random header marks, straight into a responder.
fn marked() -> impl Strategy<Value = Item> {
    (proptest::collection::vec(any::<u8>(), 0..120), 0usize..60, 0usize..70).prop_map(|(bytes, n, len)| Item {
        marks: Some((n, len)),
        ..Item::frame(bytes)
    })
}

#[test]
fn responders_alone() {
    fuzz(
        "Inject -> icmp :: ICMPv4Responder -> Sink(a); icmp[1] -> Sink(b);",
        marked(),
        |b, sent| assert_eq!(total(b, "icmp"), sent),
    );
    fuzz(
        "Inject -> icmp :: ICMPv6Responder -> Sink(a); icmp[1] -> Sink(b); icmp[2] -> Sink(c);",
        marked(),
        |b, sent| assert_eq!(total(b, "icmp"), sent),
    );
}

#[test]
fn outputs() {
    let segments = (
        proptest::collection::vec(any::<u8>(), 0..100),
        any::<[u8; 16]>(),
        0usize..128,
    )
        .prop_map(|(bytes, dst, headroom)| Item {
            next_hop_v4: Some(Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3])),
            next_hop_v6: Some(Ipv6Addr::from(dst)),
            use_headroom: headroom,
            ..Item::frame(bytes)
        });
    for protocol in ["tcp", "udp", "icmp"] {
        fuzz(
            &format!(
                "Inject -> out :: IPv4Output(10.0.0.1, PROTOCOL {protocol}, L4_CHECKSUM true, MTU 80) -> Sink(a);"
            ),
            segments.clone(),
            |b, sent| assert_eq!(total(b, "out"), sent),
        );
    }
    fuzz(
        "Inject -> out :: IPv6Output(fe80::1, PROTOCOL tcp, L4_CHECKSUM true) -> Sink(a);",
        segments,
        |b, sent| assert_eq!(total(b, "out"), sent),
    );
}
