//! Building a segment: ClickNF's TCPAckOptionsEncap, TCPAckEncap and
//! TCPIPEncap in one function the TCP elements share. The result is an IP
//! packet (IPv4 or IPv6 by the connection's family) with the next-hop
//! annotation set to the peer (on-link; routing through a gateway is the
//! IP layer's), ready for the neighbour resolver, which prepends the
//! Ethernet header: the packet keeps head room for it.

use super::ecn::Codepoint;
use crate::wire::{FlowKey, IpProtocol, TcpPacket, TcpRepr};
use oxnet_driver::{Mempool, Packet};

use crate::ip::encap::write_ip_packet;
pub use crate::ip::encap::HOP_LIMIT;

/// Builds the IP packet carrying `seg` with `payload` for the connection
/// `key` (our endpoint is the source). None when the pool is empty or
/// the segment does not fit a buffer (the caller counts it).
pub fn build_segment(pool: &Mempool, key: &FlowKey, seg: &TcpRepr, payload: &[u8]) -> Option<Packet> {
    let mut packet = pool.alloc().ok()?;
    write_segment(&mut packet, key, seg, payload).then_some(packet)
}

/// Writes the segment into `packet`, whatever it held (a received
/// segment becomes the ACK or RST that answers it, as ClickNF's elements
/// turn packets around). False if it does not fit or the key mixes
/// families; the packet is then empty.
pub fn write_segment(packet: &mut Packet, key: &FlowKey, seg: &TcpRepr, payload: &[u8]) -> bool {
    write_segment_ecn(packet, key, seg, payload, Codepoint::NotEct)
}

/// [`write_segment`] with `ecn` in the IP header's ECN field (RFC 3168
/// §5: the low two bits of IPv4's TOS byte and of IPv6's traffic class;
/// ECT(0) on the new data of an ECN connection, §6.1.2).
pub fn write_segment_ecn(packet: &mut Packet, key: &FlowKey, seg: &TcpRepr, payload: &[u8], ecn: Codepoint) -> bool {
    debug_assert_eq!(seg.payload_len, payload.len());
    let (src, dst) = (key.local.addr, key.remote.addr);
    write_ip_packet(packet, src, dst, IpProtocol::Tcp, seg.buffer_len(), ecn.bits(), |tcp| {
        tcp[seg.header_len()..].copy_from_slice(payload);
        seg.emit(&mut TcpPacket::new_unchecked(tcp), &src, &dst);
    })
}

/// [`write_segment_ecn`] with the data cut from a send buffer: written
/// bytes copied, given packets attached without a copy
/// ([`super::payload`]).
pub fn write_segment_payload(
    packet: &mut Packet,
    key: &FlowKey,
    seg: &TcpRepr,
    payload: super::payload::Payload<'_>,
    ecn: Codepoint,
) -> bool {
    super::payload::write_payload(packet, key.local.addr, key.remote.addr, seg, payload, ecn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anno;
    use crate::wire::{
        Checksum, IpAddress, IpEndpoint, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpFlags, TcpOptions, TcpSeqNumber,
    };
    use oxnet_driver::MemoryKind;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn syn_ack() -> TcpRepr {
        TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: TcpSeqNumber(1000),
            ack: Some(TcpSeqNumber(5001)),
            flags: TcpFlags::SYN,
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                ..TcpOptions::default()
            },
            payload_len: 3,
        }
    }

    #[test]
    fn a_segment_parses_back_through_ip_and_tcp_with_its_checksums_right() {
        let pool = Mempool::new("seg", 16, MemoryKind::Plain).unwrap();
        for (local, remote) in [
            (
                IpAddress::V4(Ipv4Addr::new(10, 0, 0, 2)),
                IpAddress::V4(Ipv4Addr::new(10, 0, 0, 1)),
            ),
            (
                IpAddress::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
                IpAddress::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            ),
        ] {
            let key = FlowKey {
                local: IpEndpoint { addr: local, port: 80 },
                remote: IpEndpoint {
                    addr: remote,
                    port: 40000,
                },
            };
            let p = build_segment(&pool, &key, &syn_ack(), b"abc").unwrap();
            let (tcp_bytes, src, dst) = match local {
                IpAddress::V4(_) => {
                    let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
                    let repr = Ipv4Repr::parse(&ip, Checksum::Verify).unwrap();
                    assert_eq!(repr.protocol, IpProtocol::Tcp);
                    assert!(repr.dont_frag);
                    assert_eq!(anno::next_hop_v4(&p), repr.dst);
                    (p[20..].to_vec(), IpAddress::V4(repr.src), IpAddress::V4(repr.dst))
                }
                IpAddress::V6(_) => {
                    let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
                    let repr = Ipv6Repr::parse(&ip).unwrap();
                    assert_eq!(repr.hop_limit, HOP_LIMIT);
                    assert_eq!(anno::next_hop_v6(&p), repr.dst);
                    (p[40..].to_vec(), IpAddress::V6(repr.src), IpAddress::V6(repr.dst))
                }
            };
            assert_eq!((src, dst), (local, remote));
            let tcp = TcpPacket::new_checked(&tcp_bytes[..]).unwrap();
            let parsed = TcpRepr::parse(&tcp, &src, &dst, Checksum::Verify).unwrap();
            assert_eq!(parsed, syn_ack());
            assert_eq!(tcp.payload(), b"abc");
            assert_eq!(p.network_offset(), Some(0));
        }
    }

    #[test]
    fn the_ecn_codepoint_goes_into_the_tos_byte_or_the_traffic_class() {
        let pool = Mempool::new("ecn", 4, MemoryKind::Plain).unwrap();
        let v4 = FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), 40000),
        };
        let v6 = FlowKey {
            local: IpEndpoint::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 40000),
        };
        let mut seg = syn_ack();
        seg.payload_len = 0;
        let mut p = pool.alloc().unwrap();
        assert!(write_segment_ecn(&mut p, &v4, &seg, &[], Codepoint::Ect0));
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.dscp_ecn(), 0b10);
        assert!(
            Ipv4Repr::parse(&ip, Checksum::Verify).is_ok(),
            "the header checksum covers it"
        );
        assert!(write_segment_ecn(&mut p, &v6, &seg, &[], Codepoint::Ce));
        assert_eq!(Ipv6Packet::new_checked(&p[..]).unwrap().traffic_class(), 0b11);
        assert!(write_segment(&mut p, &v6, &seg, &[]));
        assert_eq!(
            Ipv6Packet::new_checked(&p[..]).unwrap().traffic_class(),
            0,
            "Not-ECT by default"
        );
    }
}
