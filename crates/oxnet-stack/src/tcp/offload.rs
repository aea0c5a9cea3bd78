//! Segments the device finishes: TCP segmentation offload (TSO) and
//! checksum offload for the data TCPSegmentation sends, when TCPSettings
//! says `TSO true` or `CHECKSUM_OFFLOAD true`.
//!
//! * **Checksum offload**: the segment is written as usual, but its TCP
//!   checksum is left to the device: the packet's `TxOffload` asks for
//!   the IPv4 header and TCP checksums (82599 datasheet §7.2.5, IXSM and
//!   TXSM), or for IPv6 the TCP checksum alone (IPv6 has no header
//!   checksum, RFC 8200 §3), so the payload is not summed here.
//! * **TSO**: new data beyond one MSS goes as *one* IP packet of up to
//!   [`tso_limit`] bytes of payload (a chain of pool buffers) with
//!   `TX_TSO` and the MSS; the device cuts it into MSS-sized segments
//!   (§7.2.4.7): each gets the header with its own sequence number, IP
//!   length, identification and checksums (IPv6: payload length and TCP
//!   checksum), PSH and FIN only on the last.
//!   The limit is a whole number of MSS, so the segments on the wire are
//!   exactly those the software loop would cut (same sequence numbers,
//!   same payloads, PSH on the same segment). Retransmissions and window
//!   probes stay single segments (TCPSegmentation only uses TSO for data
//!   past SND.MAX, i.e. never sent), and so does the segment that
//!   carries an ECN CWR (the device would copy CWR into every segment;
//!   RFC 3168 §6.1.2 wants it once). The retransmission "queue" is the
//!   send buffer itself (`tcp::elements::send`): a partial ACK of a TSO
//!   packet moves SND.UNA into it, and a retransmission cuts one MSS from
//!   SND.UNA, whatever packet first carried those bytes.
//!
//! Both work for IPv4 and IPv6 alike: the driver's offloads (and the
//! software fallback that does them for a device without the feature,
//! `oxnet_driver::offload`) take Ethernet/IPv4/TCP and Ethernet/IPv6/TCP
//! (the IPv6 header written here has no extension headers, which the
//! driver would refuse), telling them apart by the IP version nibble.

use super::ecn::Codepoint;
use crate::ip::encap::write_ip_packet;
use crate::wire::{FlowKey, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, TcpRepr};
use oxnet_driver::offload::MAX_DATA_DESCRIPTORS;
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO};
use oxnet_driver::{Mempool, Packet, TxOffload};

/// The Ethernet header the neighbour resolver puts in front (the
/// `TxOffload`'s L2 length).
const ETHER_LEN: u8 = 14;
/// The IPv4 header `write_ip_packet` writes (no options).
const IPV4_LEN: usize = 20;
/// The IPv6 header `write_ip_packet` writes (no extension headers, RFC
/// 8200 §3).
const IPV6_LEN: usize = 40;

/// The IP header `write_ip_packet` writes for an IPv4 (`true`) or IPv6
/// flow: what [`tso_limit`] takes as `ip_header_len`.
pub fn ip_header_len(ipv4: bool) -> usize {
    if ipv4 {
        IPV4_LEN
    } else {
        IPV6_LEN
    }
}

/// The largest payload of one TSO packet whose TCP header is
/// `tcp_header_len` bytes behind an IP header of `ip_header_len` (20 or
/// 40, [`ip_header_len`]): a whole number of `mss`, the whole frame
/// within 64 KiB less 64 bytes (the IPv4 total length is 16 bits, RFC
/// 791 §3.1, so is IPv6's payload length, RFC 8200 §3, and so is a
/// descriptor's DTALEN, 82599 §7.2.3.2.4: the driver's
/// single-descriptor TSO copies the frame into one buffer of that
/// size), and a chain of at most [`MAX_DATA_DESCRIPTORS`] buffers of
/// `pool` (§7.2.3.3).
pub fn tso_limit(pool: &Mempool, mss: usize, tcp_header_len: usize, ip_header_len: usize) -> usize {
    let by_length = u16::MAX as usize - 64 - ETHER_LEN as usize - ip_header_len - tcp_header_len;
    let room = pool.data_room();
    let first = room.saturating_sub(ip_header_len + tcp_header_len);
    let by_chain = first + (MAX_DATA_DESCRIPTORS - 1) * room;
    let bytes = by_length.min(by_chain);
    bytes - bytes % mss.max(1)
}

/// Writes `seg` with `payload` into `packet` (whatever it held) as an
/// IPv4 or IPv6 packet for the device to finish: its checksums, and with
/// `tso_mss` its segmentation into `tso_mss`-byte segments. The payload
/// beyond the first buffer goes into buffers of `pool` chained behind
/// it. False (and `packet` left empty) if a buffer is missing or the
/// segment does not fit.
pub fn write_offloaded(
    packet: &mut Packet,
    pool: &Mempool,
    key: &FlowKey,
    seg: &TcpRepr,
    payload: &[u8],
    ecn: Codepoint,
    tso_mss: Option<u16>,
) -> bool {
    let copy = |at: usize, out: &mut [u8]| out.copy_from_slice(&payload[at..at + out.len()]);
    write_offloaded_with(packet, pool, key, seg, payload.len(), copy, ecn, tso_mss)
}

/// [`write_offloaded`] with the payload's `len` bytes written by
/// `copy(offset, out)` (the bytes from `offset` into `out`, its whole
/// length): straight from a send buffer, with no flat copy in between.
#[allow(clippy::too_many_arguments)]
pub fn write_offloaded_with(
    packet: &mut Packet,
    pool: &Mempool,
    key: &FlowKey,
    seg: &TcpRepr,
    len: usize,
    copy: impl Fn(usize, &mut [u8]),
    ecn: Codepoint,
    tso_mss: Option<u16>,
) -> bool {
    debug_assert_eq!(seg.payload_len, len);
    let (src, dst) = (key.local.addr, key.remote.addr);
    let ipv4 = src.is_ipv4();
    let ip_len = ip_header_len(ipv4);
    packet.reset();
    let header_len = seg.header_len();
    let first = len.min(packet.capacity().saturating_sub(ip_len + header_len));
    let written = write_ip_packet(
        packet,
        src,
        dst,
        IpProtocol::Tcp,
        header_len + first,
        ecn.bits(),
        |tcp| {
            copy(0, &mut tcp[header_len..header_len + first]);
            // The header alone: the checksum field is the device's to fill
            // (the driver seeds it with the pseudo-header sum, §7.2.5.1).
            seg.emit(&mut TcpPacket::new_unchecked(&mut tcp[..header_len]), &src, &dst);
        },
    );
    if !written {
        return false;
    }
    if first < len {
        // IPv4's total length counts its header, IPv6's payload length
        // does not (RFC 791 §3.1, RFC 8200 §3); both are 16 bits.
        let length = if ipv4 { IPV4_LEN } else { 0 } + header_len + len;
        let Ok(length) = u16::try_from(length) else {
            packet.reset();
            return false;
        };
        if ipv4 {
            let mut ip = Ipv4Packet::new_unchecked(&mut packet[..IPV4_LEN]);
            ip.set_total_len(length);
            ip.fill_checksum();
        } else {
            Ipv6Packet::new_unchecked(&mut packet[..IPV6_LEN]).set_payload_len(length);
        }
        let room = pool.data_room().max(1);
        let mut at = first;
        while at < len {
            let n = room.min(len - at);
            let Some(buffer) = filled(pool, n, |out| copy(at, out)) else {
                packet.reset();
                return false;
            };
            packet.append(buffer);
            at += n;
        }
    }
    let tso = tso_mss.filter(|&mss| len > mss as usize);
    // No header checksum to ask for over IPv6 (the driver refuses it).
    let ip_checksum = if ipv4 { TX_IP_CSUM } else { 0 };
    packet.set_tx_offload(TxOffload {
        flags: ip_checksum | TX_TCP_CSUM | if tso.is_some() { TX_TSO } else { 0 },
        l2_len: ETHER_LEN,
        l3_len: ip_len as u16,
        l4_len: header_len as u8,
        mss: tso.unwrap_or(0),
    });
    true
}

/// A buffer of `pool` with `len` bytes written by `fill`.
fn filled(pool: &Mempool, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<Packet> {
    let mut buffer = pool.alloc().ok()?;
    buffer.set_len(len).ok()?;
    fill(&mut buffer[..]);
    Some(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{IpEndpoint, TcpFlags, TcpOptions, TcpSeqNumber};
    use oxnet_driver::offload::{checksum_verdict, segment};
    use oxnet_driver::packet::{FLAG_CSUM_BAD, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD};
    use oxnet_driver::MemoryKind;
    use std::net::Ipv4Addr;

    fn key() -> FlowKey {
        FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), 40000),
        }
    }

    fn data(seq: u32, len: usize) -> TcpRepr {
        TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: TcpSeqNumber(seq),
            ack: Some(TcpSeqNumber(77)),
            flags: TcpFlags::PSH,
            window: 1000,
            urgent: 0,
            options: TcpOptions {
                timestamps: Some((5, 6)),
                ..TcpOptions::default()
            },
            payload_len: len,
        }
    }

    /// The frame the resolver would send: 14 bytes of Ethernet in front.
    fn framed(p: &Packet, pool: &Mempool) -> Packet {
        let mut bytes = vec![0u8; 14];
        let ethertype: [u8; 2] = if p[0] >> 4 == 6 { [0x86, 0xDD] } else { [0x08, 0x00] };
        bytes[12..14].copy_from_slice(&ethertype);
        p.copy_chain_to(&mut bytes);
        let mut f = pool.alloc().unwrap();
        if bytes.len() <= f.capacity() {
            f.set_len(bytes.len()).unwrap();
            f.copy_from_slice(&bytes);
        } else {
            let first = f.capacity();
            f.set_len(first).unwrap();
            f.copy_from_slice(&bytes[..first]);
            for chunk in bytes[first..].chunks(pool.data_room()) {
                f.append(filled(pool, chunk.len(), |out| out.copy_from_slice(chunk)).unwrap());
            }
        }
        f.set_tx_offload(p.tx_offload());
        f
    }

    /// A 10 000-byte TSO packet, cut as the 82599 cuts it (the driver's
    /// software segmentation gives the same bytes), is seven segments of
    /// 1448 bytes and one of 1312, sequence numbers 1000 + 1448 k, the
    /// payload in order, checksums valid, PSH on the last only.
    #[test]
    fn a_tso_packet_becomes_mss_sized_segments_with_valid_checksums() {
        let pool = Mempool::new("tso", 64, MemoryKind::Plain).unwrap();
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut p = pool.alloc().unwrap();
        assert!(write_offloaded(
            &mut p,
            &pool,
            &key(),
            &data(1000, payload.len()),
            &payload,
            Codepoint::NotEct,
            Some(1448)
        ));
        assert!(p.is_chained());
        assert_eq!(p.total_len(), 20 + 32 + 10_000);
        let o = p.tx_offload();
        assert_eq!(
            (o.flags, o.l2_len, o.l3_len, o.l4_len, o.mss),
            (TX_IP_CSUM | TX_TCP_CSUM | TX_TSO, 14, 20, 32, 1448)
        );
        let mut out = Vec::new();
        segment(&framed(&p, &pool), &pool, &mut out).unwrap();
        let lens: Vec<usize> = out.iter().map(|s| s.len() - 66).collect();
        assert_eq!(lens, [1448, 1448, 1448, 1448, 1448, 1448, 1312]);
        let mut joined = Vec::new();
        for (k, s) in out.iter().enumerate() {
            assert_eq!(
                checksum_verdict(s),
                FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD,
                "segment {k}"
            );
            assert_eq!(
                u32::from_be_bytes(s[38..42].try_into().unwrap()),
                1000 + 1448 * k as u32
            );
            assert_eq!(s[47] & 0x08 != 0, k == 6, "PSH on the last only");
            joined.extend_from_slice(&s[66..]);
        }
        assert_eq!(joined, payload);
    }

    /// Checksum offload alone: one buffer, the request for the IPv4 and
    /// TCP checksums and no TSO; the device's (here the driver's
    /// software) checksum makes the segment valid.
    #[test]
    fn checksum_offload_asks_the_device_and_leaves_one_segment() {
        let pool = Mempool::new("csum", 8, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        assert!(write_offloaded(
            &mut p,
            &pool,
            &key(),
            &data(5, 100),
            &[9; 100],
            Codepoint::NotEct,
            None
        ));
        assert!(!p.is_chained());
        let o = p.tx_offload();
        assert_eq!((o.flags, o.mss), (TX_IP_CSUM | TX_TCP_CSUM, 0));
        let mut f = framed(&p, &pool);
        let request = f.tx_offload();
        oxnet_driver::offload::fill_checksums(&mut f, &request).unwrap();
        assert_eq!(checksum_verdict(&f), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
        // A TSO request for data of one MSS or less is no TSO request.
        assert!(write_offloaded(
            &mut p,
            &pool,
            &key(),
            &data(5, 100),
            &[9; 100],
            Codepoint::NotEct,
            Some(100)
        ));
        assert_eq!(p.tx_offload().flags, TX_IP_CSUM | TX_TCP_CSUM);
    }

    #[test]
    fn the_limit_is_whole_segments_within_the_ip_length_and_the_chain() {
        let pool = Mempool::new("limit", 4, MemoryKind::Plain).unwrap();
        let limit = tso_limit(&pool, 1448, 32, 20);
        assert_eq!(limit % 1448, 0);
        assert!(
            limit + 14 + 20 + 32 <= 65535 - 64 && limit + 14 + 20 + 32 + 1448 > 65535 - 64,
            "{limit}"
        );
        assert_eq!(
            tso_limit(&pool, 1, 20, 20),
            65535 - 64 - 14 - 20 - 20,
            "MSS 1: the length bounds it"
        );
        assert_eq!(tso_limit(&pool, 1, 20, ip_header_len(false)), 65535 - 64 - 14 - 40 - 20);
        assert_eq!(ip_header_len(true), 20);
    }

    fn key6() -> FlowKey {
        FlowKey {
            local: IpEndpoint::new("fd00::2".parse::<std::net::Ipv6Addr>().unwrap(), 80),
            remote: IpEndpoint::new("fd00::1".parse::<std::net::Ipv6Addr>().unwrap(), 40000),
        }
    }

    /// TSO over IPv6: a 10 000-byte packet is one chained IPv6 packet
    /// (payload length 32 + 10 000) asking for the TCP checksum and TSO
    /// but no IP checksum, L3 length 40; cut by the driver's software
    /// segmentation it is seven segments of 1448 bytes and one of 1312,
    /// each with the payload length of its own size, sequence numbers
    /// 1000 + 1448 k, the payload in order, a good TCP checksum over the
    /// IPv6 pseudo-header, PSH on the last only.
    #[test]
    fn an_ipv6_tso_packet_becomes_mss_sized_segments_with_valid_checksums() {
        let pool = Mempool::new("tso6", 64, MemoryKind::Plain).unwrap();
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut p = pool.alloc().unwrap();
        assert!(write_offloaded(
            &mut p,
            &pool,
            &key6(),
            &data(1000, payload.len()),
            &payload,
            Codepoint::NotEct,
            Some(1448)
        ));
        assert!(p.is_chained());
        assert_eq!(p.total_len(), 40 + 32 + 10_000);
        assert_eq!(p[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([p[4], p[5]]), 32 + 10_000, "payload length");
        let o = p.tx_offload();
        assert_eq!(
            (o.flags, o.l2_len, o.l3_len, o.l4_len, o.mss),
            (TX_TCP_CSUM | TX_TSO, 14, 40, 32, 1448)
        );
        let mut out = Vec::new();
        segment(&framed(&p, &pool), &pool, &mut out).unwrap();
        let lens: Vec<usize> = out.iter().map(|s| s.len() - 86).collect();
        assert_eq!(lens, [1448, 1448, 1448, 1448, 1448, 1448, 1312]);
        let mut joined = Vec::new();
        for (k, s) in out.iter().enumerate() {
            assert_eq!(checksum_verdict(s), FLAG_L4_CSUM_GOOD, "segment {k}");
            assert_eq!(u16::from_be_bytes([s[18], s[19]]) as usize, 32 + lens[k]);
            assert_eq!(
                u32::from_be_bytes(s[58..62].try_into().unwrap()),
                1000 + 1448 * k as u32
            );
            assert_eq!(s[67] & 0x08 != 0, k == 6, "PSH on the last only");
            joined.extend_from_slice(&s[86..]);
        }
        assert_eq!(joined, payload);
    }

    /// Checksum offload over IPv6: one buffer, the TCP checksum asked
    /// for (no IP checksum, which IPv6 lacks); the driver's software
    /// checksum makes it good.
    #[test]
    fn ipv6_checksum_offload_asks_for_the_tcp_checksum_alone() {
        let pool = Mempool::new("csum6", 8, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        assert!(write_offloaded(
            &mut p,
            &pool,
            &key6(),
            &data(5, 100),
            &[9; 100],
            Codepoint::NotEct,
            None
        ));
        assert!(!p.is_chained());
        let o = p.tx_offload();
        assert_eq!((o.flags, o.l3_len, o.mss), (TX_TCP_CSUM, 40, 0));
        let mut f = framed(&p, &pool);
        assert_eq!(
            checksum_verdict(&f),
            FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD,
            "not summed here"
        );
        let request = f.tx_offload();
        oxnet_driver::offload::fill_checksums(&mut f, &request).unwrap();
        assert_eq!(checksum_verdict(&f), FLAG_L4_CSUM_GOOD);
    }
}
