//! Whole frames built with the emitters of every layer and read back
//! through every parser, and checked by an implementation that is not
//! this module's: the driver's software checksum verdict
//! (`oxnet_driver::offload::checksum_verdict`, what a NIC reports).

use super::*;
use oxnet_driver::offload::checksum_verdict;
use oxnet_driver::packet::{FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_GOOD};
use proptest::prelude::*;
use std::net::Ipv4Addr;

const SRC_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const DST_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
const SRC_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// An IPv4 header for `payload_len` bytes of `protocol`.
fn ipv4(protocol: IpProtocol, payload_len: usize) -> Ipv4Repr {
    Ipv4Repr {
        src: SRC_IP,
        dst: DST_IP,
        protocol,
        payload_len,
        ttl: 64,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    }
}

/// Ethernet and IPv4 headers around an upper layer that `fill` writes
/// into the IPv4 payload.
fn frame(protocol: IpProtocol, l4_len: usize, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let eth = EthernetRepr {
        src: SRC_MAC,
        dst: DST_MAC,
        ethertype: EtherType::Ipv4,
    };
    let ip = ipv4(protocol, l4_len);
    let mut buf = vec![0u8; eth.buffer_len(ip.buffer_len())];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut frame);
    let mut packet = Ipv4Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut packet);
    fill(packet.payload_mut());
    buf
}

/// The IPv4 payload of a frame, every layer's checks passed.
fn ipv4_payload(buf: &[u8]) -> (Ipv4Repr, &[u8]) {
    let frame = EthernetFrame::new_checked(buf).unwrap();
    assert_eq!(EthernetRepr::parse(&frame).unwrap().ethertype, EtherType::Ipv4);
    let packet = Ipv4Packet::new_checked(&buf[ethernet::HEADER_LEN..]).unwrap();
    let repr = Ipv4Repr::parse(&packet, Checksum::Verify).unwrap();
    let start = ethernet::HEADER_LEN + packet.header_len();
    (repr, &buf[start..start + repr.payload_len])
}

fn tcp_frame(repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let (src, dst) = (IpAddress::V4(SRC_IP), IpAddress::V4(DST_IP));
    frame(IpProtocol::Tcp, repr.buffer_len(), |l4| {
        l4[repr.header_len()..].copy_from_slice(payload);
        repr.emit(&mut TcpPacket::new_unchecked(l4), &src, &dst);
    })
}

fn udp_frame(repr: &UdpRepr, payload: &[u8]) -> Vec<u8> {
    let (src, dst) = (IpAddress::V4(SRC_IP), IpAddress::V4(DST_IP));
    frame(IpProtocol::Udp, repr.buffer_len(), |l4| {
        l4[udp::HEADER_LEN..].copy_from_slice(payload);
        repr.emit(&mut UdpPacket::new_unchecked(l4), &src, &dst);
    })
}

#[test]
fn tcp_frame_passes_the_driver_verdict_and_parses_back() {
    let repr = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: TcpSeqNumber(0xdead_beef),
        ack: Some(TcpSeqNumber(17)),
        flags: TcpFlags::PSH,
        window: 512,
        urgent: 0,
        options: TcpOptions {
            timestamps: Some((5, 6)),
            ..Default::default()
        },
        payload_len: 5,
    };
    let buf = tcp_frame(&repr, b"hello");
    assert_eq!(checksum_verdict(&buf), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
    let (ip, l4) = ipv4_payload(&buf);
    assert_eq!(ip, ipv4(IpProtocol::Tcp, repr.buffer_len()));
    let packet = TcpPacket::new_checked(l4).unwrap();
    let parsed = TcpRepr::parse(&packet, &SRC_IP.into(), &DST_IP.into(), Checksum::Verify).unwrap();
    assert_eq!(parsed, repr);
    assert_eq!(packet.payload(), b"hello");
}

#[test]
fn udp_frame_passes_the_driver_verdict_and_parses_back() {
    let repr = UdpRepr {
        src_port: 5353,
        dst_port: 53,
        payload_len: 3,
    };
    let buf = udp_frame(&repr, b"abc");
    assert_eq!(checksum_verdict(&buf), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
    let (_, l4) = ipv4_payload(&buf);
    let packet = UdpPacket::new_checked(l4).unwrap();
    let parsed = UdpRepr::parse(&packet, &SRC_IP.into(), &DST_IP.into(), Checksum::Verify).unwrap();
    assert_eq!(parsed, repr);
}

proptest! {
    #[test]
    fn emitted_tcp_and_udp_checksums_agree_with_the_driver(
        payload in proptest::collection::vec(any::<u8>(), 0..64), seq: u32, port: u16, mss in proptest::option::of(any::<u16>())
    ) {
        let tcp = TcpRepr {
            src_port: port,
            dst_port: 443,
            seq: TcpSeqNumber(seq),
            ack: None,
            flags: TcpFlags::SYN,
            window: 1024,
            urgent: 0,
            options: TcpOptions { mss, ..Default::default() },
            payload_len: payload.len(),
        };
        prop_assert_eq!(checksum_verdict(&tcp_frame(&tcp, &payload)), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
        let udp = UdpRepr { src_port: port, dst_port: 9, payload_len: payload.len() };
        prop_assert_eq!(checksum_verdict(&udp_frame(&udp, &payload)), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
    }
}
