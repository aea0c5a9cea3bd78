//! Frames of every kind built with the emitters, written to a pcap file and
//! read by tcpdump, a decoder nobody here wrote: it must find every
//! checksum correct and decode the fields as we meant them.
//! (tcpdump is a test dependency of the project: scripts/install-deps.sh.)

use super::*;
use oxnet_graph::elements::dump::pcap_file_header;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

const SRC_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const DST_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
const SRC_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// An Ethernet frame of `ethertype` whose payload `fill` writes.
fn ethernet(dst: EthernetAddress, ethertype: EtherType, payload_len: usize, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let repr = EthernetRepr {
        src: SRC_MAC,
        dst,
        ethertype,
    };
    let mut buf = vec![0u8; repr.buffer_len(payload_len)];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    repr.emit(&mut frame);
    fill(frame.payload_mut());
    buf
}

/// An IPv4 frame from SRC_V4 to DST_V4 whose upper layer `fill` writes.
fn ipv4(protocol: IpProtocol, l4_len: usize, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let ip = Ipv4Repr {
        src: SRC_V4,
        dst: DST_V4,
        protocol,
        payload_len: l4_len,
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    ethernet(DST_MAC, EtherType::Ipv4, ip.buffer_len(), |l3| {
        let mut packet = Ipv4Packet::new_unchecked(l3);
        ip.emit(&mut packet);
        fill(packet.payload_mut());
    })
}

/// An IPv6 frame whose upper layer `fill` writes.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: IpProtocol, l4_len: usize, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let ip = Ipv6Repr {
        src,
        dst,
        next_header: next,
        payload_len: l4_len,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    };
    ethernet(DST_MAC, EtherType::Ipv6, ip.buffer_len(), |l3| {
        let mut packet = Ipv6Packet::new_unchecked(l3);
        ip.emit(&mut packet);
        fill(packet.payload_mut());
    })
}

fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, repr: Icmpv6Repr) -> Vec<u8> {
    ipv6(src, dst, IpProtocol::Icmpv6, repr.buffer_len(), |l4| {
        repr.emit(&mut Icmpv6Packet::new_unchecked(l4), &src, &dst)
    })
}

fn tcp(src: IpAddress, dst: IpAddress, repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let fill = |l4: &mut [u8]| {
        l4[repr.header_len()..].copy_from_slice(payload);
        repr.emit(&mut TcpPacket::new_unchecked(l4), &src, &dst);
    };
    match (src, dst) {
        (IpAddress::V6(s), IpAddress::V6(d)) => ipv6(s, d, IpProtocol::Tcp, repr.buffer_len(), fill),
        _ => ipv4(IpProtocol::Tcp, repr.buffer_len(), fill),
    }
}

fn udp(src: IpAddress, dst: IpAddress, repr: &UdpRepr, payload: &[u8]) -> Vec<u8> {
    let fill = |l4: &mut [u8]| {
        l4[udp::HEADER_LEN..].copy_from_slice(payload);
        repr.emit(&mut UdpPacket::new_unchecked(l4), &src, &dst);
    };
    match (src, dst) {
        (IpAddress::V6(s), IpAddress::V6(d)) => ipv6(s, d, IpProtocol::Udp, repr.buffer_len(), fill),
        _ => ipv4(IpProtocol::Udp, repr.buffer_len(), fill),
    }
}

/// Each frame and what tcpdump -vvv must print for it.
fn frames() -> Vec<(Vec<u8>, &'static [&'static str])> {
    let (a, b) = (v6("fe80::1"), v6("fe80::2"));
    let syn = TcpRepr {
        src_port: 40000,
        dst_port: 8080,
        seq: TcpSeqNumber(1000),
        ack: None,
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((100, 0)),
            ..Default::default()
        },
        payload_len: 0,
    };
    let data = TcpRepr {
        seq: TcpSeqNumber(1001),
        ack: Some(TcpSeqNumber(5001)),
        flags: TcpFlags::PSH,
        options: TcpOptions {
            mss: Some(1440),
            ..Default::default()
        },
        payload_len: 3,
        ..syn
    };
    let dns = UdpRepr {
        src_port: 5353,
        dst_port: 5300,
        payload_len: 3,
    };
    let invoking = udp(SRC_V4.into(), DST_V4.into(), &dns, b"abc");
    let (quoted, quoted_len) = Ipv4Repr::parse_quoted(&invoking[ethernet::HEADER_LEN..]).unwrap();
    let quoted_data = &invoking[ethernet::HEADER_LEN + quoted_len..][..8];
    let unreachable = Icmpv4Repr::DstUnreachable {
        reason: Icmpv4DstUnreachable::PortUnreachable,
        next_hop_mtu: 0,
        header: quoted,
        data: quoted_data,
    };
    let arp = ArpRepr {
        op: ArpOperation::Request,
        sender_hw: SRC_MAC,
        sender_ip: SRC_V4,
        target_hw: EthernetAddress([0; 6]),
        target_ip: DST_V4,
    };
    let prefix = NdiscPrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 2_592_000,
        preferred_lifetime: 604_800,
        prefix: v6("2001:db8:1::"),
    };
    vec![
        (
            ethernet(EthernetAddress::BROADCAST, EtherType::Arp, arp.buffer_len(), |p| {
                arp.emit(&mut ArpPacket::new_unchecked(p))
            }),
            &["Request who-has 10.0.0.2 tell 10.0.0.1"],
        ),
        (
            tcp(SRC_V4.into(), DST_V4.into(), &syn, b""),
            &[
                "(correct)",
                "Flags [S]",
                "mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7",
            ],
        ),
        (
            tcp(a.into(), b.into(), &data, b"xyz"),
            &["(correct)", "Flags [P.]", "mss 1440", "length 3"],
        ),
        (udp(SRC_V4.into(), DST_V4.into(), &dns, b"abc"), &["[udp sum ok]"]),
        (udp(a.into(), b.into(), &dns, b"abc"), &["[udp sum ok]"]),
        (
            ipv4(IpProtocol::Icmp, unreachable.buffer_len(), |l4| {
                unreachable.emit(&mut Icmpv4Packet::new_unchecked(l4))
            }),
            &["udp port 5300 unreachable"],
        ),
        (
            icmpv6(
                a,
                b,
                Icmpv6Repr::EchoRequest {
                    ident: 1,
                    seq_no: 2,
                    data_len: 0,
                },
            ),
            &["[icmp6 sum ok]", "echo request, id 1, seq 2"],
        ),
        (
            icmpv6(
                a,
                v6("ff02::1:ff00:2"),
                Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                    target: b,
                    options: NdiscOptions {
                        source_lladdr: Some(SRC_MAC),
                        ..Default::default()
                    },
                }),
            ),
            &[
                "[icmp6 sum ok]",
                "neighbor solicitation",
                "who has fe80::2",
                "02:00:00:00:00:01",
            ],
        ),
        (
            icmpv6(
                b,
                a,
                Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
                    router: true,
                    solicited: true,
                    override_cache: true,
                    target: b,
                    options: NdiscOptions {
                        target_lladdr: Some(DST_MAC),
                        ..Default::default()
                    },
                }),
            ),
            &[
                "[icmp6 sum ok]",
                "tgt is fe80::2",
                "Flags [router, solicited, override]",
                "02:00:00:00:00:02",
            ],
        ),
        (
            icmpv6(
                b,
                a,
                Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
                    hop_limit: 64,
                    managed: false,
                    other_config: true,
                    router_lifetime: 1800,
                    reachable_time: 30_000,
                    retrans_timer: 1000,
                    options: NdiscOptions {
                        source_lladdr: Some(DST_MAC),
                        mtu: Some(1500),
                        prefixes: [Some(prefix), None, None, None],
                        ..Default::default()
                    },
                }),
            ),
            &[
                "[icmp6 sum ok]",
                "router advertisement",
                "hop limit 64",
                "router lifetime 1800s, reachable time 30000ms, retrans timer 1000ms",
                "1500",
                "2001:db8:1::/64, Flags [onlink, auto], valid time 2592000s, pref. time 604800s",
            ],
        ),
        (
            icmpv6(
                b,
                a,
                Icmpv6Repr::PacketTooBig {
                    mtu: 1280,
                    header: Ipv6Repr {
                        src: a,
                        dst: b,
                        next_header: IpProtocol::Udp,
                        payload_len: 1400,
                        hop_limit: 64,
                        traffic_class: 0,
                        flow_label: 0,
                    },
                    data: &[0x13, 0x88, 0x14, 0xb4, 0x05, 0x78, 0, 0],
                },
            ),
            &["[icmp6 sum ok]", "packet too big, mtu 1280"],
        ),
    ]
}

#[test]
fn tcpdump_decodes_every_frame_with_correct_checksums() {
    let frames = frames();
    let mut pcap = pcap_file_header(false, 65535, 1).to_vec();
    for (frame, _) in &frames {
        // Record header: seconds, microseconds, captured and original length.
        for word in [0, 0, frame.len() as u32, frame.len() as u32] {
            pcap.extend_from_slice(&word.to_ne_bytes());
        }
        pcap.extend_from_slice(frame);
    }
    let file = std::env::temp_dir().join(format!("oxnet-stack-{}-wire.pcap", std::process::id()));
    std::fs::write(&file, &pcap).unwrap();
    let out = Command::new("tcpdump")
        .args(["-nn", "-vvv", "-r", file.to_str().unwrap()])
        .output()
        .expect("tcpdump must be installed: scripts/install-deps.sh installs it");
    std::fs::remove_file(&file).ok();
    assert!(
        out.status.success(),
        "tcpdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // One record per frame: each starts at a line with a timestamp.
    let records: Vec<String> = text.split("\n00:00:00").map(str::to_string).collect();
    assert_eq!(records.len(), frames.len(), "{text}");
    for ((_, expected), record) in frames.iter().zip(&records) {
        for needle in *expected {
            assert!(record.contains(needle), "tcpdump printed\n{record}\nwithout {needle:?}");
        }
        assert!(!record.contains("incorrect") && !record.contains("bad"), "{record}");
    }
}
