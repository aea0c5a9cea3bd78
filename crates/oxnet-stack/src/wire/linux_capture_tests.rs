//! Packets that Linux wrote, parsed here: `testdata/linux-loopback.pcap`
//! was captured with `tcpdump -i lo -w` (Linux 6.18, tcpdump 4.99.3) during a
//! `ping 127.0.0.1`, a `ping -6 ::1`, a TCP connection over each family
//! sending "hello" and "hi6" to port 47123, and a UDP datagram of each
//! family to the closed port 47124 (which Linux answered with port
//! unreachable). The expected values are what `tcpdump -nn -vv` printed.
//!
//! On loopback Linux leaves TCP and UDP checksums partial (the checksum
//! offload that nothing completes): tcpdump calls them incorrect, and so
//! must `parse` when it verifies them.

use super::*;

const CAPTURE: &[u8] = include_bytes!("testdata/linux-loopback.pcap");

/// The frames of a little-endian microsecond pcap file.
fn frames(pcap: &[u8]) -> Vec<&[u8]> {
    assert_eq!(pcap[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
    let mut frames = Vec::new();
    let mut at = 24;
    while at < pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        frames.push(&pcap[at + 16..at + 16 + caplen]);
        at += 16 + caplen;
    }
    frames
}

/// The upper layer of an IPv4 or IPv6 frame: source, destination,
/// protocol, bytes. The IPv4 header checksum is verified.
fn upper_layer(frame: &[u8]) -> (IpAddress, IpAddress, IpProtocol, &[u8]) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let l3 = &frame[ethernet::HEADER_LEN..];
    match EthernetRepr::parse(&eth).unwrap().ethertype {
        EtherType::Ipv4 => {
            let packet = Ipv4Packet::new_checked(l3).unwrap();
            let repr = Ipv4Repr::parse(&packet, Checksum::Verify).unwrap();
            let start = packet.header_len();
            (
                repr.src.into(),
                repr.dst.into(),
                repr.protocol,
                &l3[start..start + repr.payload_len],
            )
        }
        EtherType::Ipv6 => {
            let packet = Ipv6Packet::new_checked(l3).unwrap();
            let repr = Ipv6Repr::parse(&packet).unwrap();
            let (protocol, offset) = packet.upper_layer().unwrap();
            (
                repr.src.into(),
                repr.dst.into(),
                protocol,
                &l3[offset..ipv6::HEADER_LEN + repr.payload_len],
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn icmpv4(frame: &[u8]) -> Icmpv4Repr<'_> {
    let (_, _, protocol, l4) = upper_layer(frame);
    assert_eq!(protocol, IpProtocol::Icmp);
    Icmpv4Repr::parse(&Icmpv4Packet::new_checked(l4).unwrap(), Checksum::Verify).unwrap()
}

fn icmpv6(frame: &[u8]) -> Icmpv6Repr<'_> {
    let (src, dst, protocol, l4) = upper_layer(frame);
    assert_eq!(protocol, IpProtocol::Icmpv6);
    let (IpAddress::V6(src), IpAddress::V6(dst)) = (src, dst) else {
        panic!("ICMPv6 over IPv4")
    };
    Icmpv6Repr::parse(&Icmpv6Packet::new_checked(l4).unwrap(), &src, &dst, Checksum::Verify).unwrap()
}

/// The TCP header of a frame (its partial checksum refused, then ignored)
/// and its data.
fn tcp(frame: &[u8]) -> (TcpRepr, &[u8]) {
    let (src, dst, protocol, l4) = upper_layer(frame);
    assert_eq!(protocol, IpProtocol::Tcp);
    let packet = TcpPacket::new_checked(l4).unwrap();
    assert_eq!(
        TcpRepr::parse(&packet, &src, &dst, Checksum::Verify),
        Err(WireError::BadChecksum)
    );
    (
        TcpRepr::parse(&packet, &src, &dst, Checksum::Ignore).unwrap(),
        &l4[packet.header_len()..],
    )
}

/// The UDP header of a frame (its partial checksum refused, then ignored)
/// and its data.
fn udp(frame: &[u8]) -> (UdpRepr, &[u8]) {
    let (src, dst, protocol, l4) = upper_layer(frame);
    assert_eq!(protocol, IpProtocol::Udp);
    let packet = UdpPacket::new_checked(l4).unwrap();
    assert_eq!(
        UdpRepr::parse(&packet, &src, &dst, Checksum::Verify),
        Err(WireError::BadChecksum)
    );
    (
        UdpRepr::parse(&packet, &src, &dst, Checksum::Ignore).unwrap(),
        &l4[udp::HEADER_LEN..],
    )
}

#[test]
fn capture_has_the_frames_tcpdump_listed() {
    assert_eq!(frames(CAPTURE).len(), 24);
}

#[test]
fn linux_pings_parse() {
    let f = frames(CAPTURE);
    assert_eq!(
        icmpv4(f[0]),
        Icmpv4Repr::EchoRequest {
            ident: 13375,
            seq_no: 1,
            data_len: 56
        }
    );
    assert_eq!(
        icmpv4(f[1]),
        Icmpv4Repr::EchoReply {
            ident: 13375,
            seq_no: 1,
            data_len: 56
        }
    );
    assert_eq!(
        icmpv6(f[2]),
        Icmpv6Repr::EchoRequest {
            ident: 13376,
            seq_no: 1,
            data_len: 56
        }
    );
    assert_eq!(
        icmpv6(f[3]),
        Icmpv6Repr::EchoReply {
            ident: 13376,
            seq_no: 1,
            data_len: 56
        }
    );
    let ipv6 = Ipv6Packet::new_checked(&f[2][ethernet::HEADER_LEN..]).unwrap();
    assert_eq!((ipv6.flow_label(), ipv6.hop_limit()), (0x1b56a, 64));
}

#[test]
fn linux_tcp_handshake_and_data_parse() {
    let f = frames(CAPTURE);
    let (syn, _) = tcp(f[4]);
    assert_eq!(
        syn,
        TcpRepr {
            src_port: 60972,
            dst_port: 47123,
            seq: TcpSeqNumber(2628590739),
            ack: None,
            flags: TcpFlags::SYN,
            window: 65495,
            urgent: 0,
            options: TcpOptions {
                mss: Some(65495),
                window_scale: Some(10),
                sack_permitted: true,
                timestamps: Some((184793506, 0)),
                ..Default::default()
            },
            payload_len: 0,
        }
    );
    let (syn_ack, _) = tcp(f[5]);
    assert_eq!(syn_ack.ack, Some(syn.seq + 1));
    assert_eq!((syn_ack.seq, syn_ack.window), (TcpSeqNumber(777641979), 65483));
    assert_eq!(syn_ack.options.timestamps, Some((296925392, 184793506)));
    let (data, payload) = tcp(f[7]);
    assert_eq!(payload, b"hello");
    assert_eq!(data.flags, TcpFlags::PSH);
    assert_eq!(data.seq, syn.seq + 1);
    assert_eq!(
        data.options,
        TcpOptions {
            timestamps: Some((184793506, 296925392)),
            ..Default::default()
        }
    );
    let (fin, _) = tcp(f[9]);
    assert_eq!(fin.flags, TcpFlags::FIN);
    assert_eq!(fin.seq, syn.seq + 6);

    let (syn6, _) = tcp(f[12]);
    assert_eq!(
        (syn6.src_port, syn6.seq, syn6.window),
        (56112, TcpSeqNumber(4144344651), 65476)
    );
    assert_eq!(syn6.options.mss, Some(65476));
    let (_, payload6) = tcp(f[15]);
    assert_eq!(payload6, b"hi6");
}

#[test]
fn linux_udp_and_port_unreachable_parse() {
    let f = frames(CAPTURE);
    let (datagram, payload) = udp(f[20]);
    assert_eq!(
        datagram,
        UdpRepr {
            src_port: 45924,
            dst_port: 47124,
            payload_len: 4
        }
    );
    assert_eq!(payload, b"udp4");
    // Linux quotes the whole datagram (RFC 1812 §4.3.2.3 allows up to 576
    // bytes), so the quote holds 12 bytes after the header.
    let Icmpv4Repr::DstUnreachable {
        reason, header, data, ..
    } = icmpv4(f[21])
    else {
        panic!("not unreachable")
    };
    assert_eq!(reason, Icmpv4DstUnreachable::PortUnreachable);
    assert_eq!(
        (header.protocol, header.payload_len, header.ident),
        (IpProtocol::Udp, 12, 51582)
    );
    assert_eq!(data[..4], [0xb3, 0x64, 0xb8, 0x14]); // ports 45924 and 47124
    assert_eq!(&data[8..], b"udp4");

    let (datagram6, payload6) = udp(f[22]);
    assert_eq!((datagram6.src_port, datagram6.dst_port), (35765, 47124));
    assert_eq!(payload6, b"udp6");
    let Icmpv6Repr::DstUnreachable { reason, header, data } = icmpv6(f[23]) else {
        panic!("not unreachable")
    };
    assert_eq!(reason, Icmpv6DstUnreachable::PortUnreachable);
    assert_eq!(
        (header.next_header, header.payload_len, header.flow_label),
        (IpProtocol::Udp, 12, 0xe74d0)
    );
    assert_eq!(&data[8..], b"udp6");
}
