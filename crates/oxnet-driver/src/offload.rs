//! Checksums and TCP segmentation in software: what a NIC's offloads do,
//! for when a switch is off (or the device has none), so that an
//! application sees the same bytes and the same verdicts either way.
//!
//! * transmit: [`fill_checksums`] inserts the IPv4 / TCP / UDP checksums a
//!   [`TxOffload`] asks for; [`segment`] cuts a TSO packet into MSS-sized
//!   frames exactly as the 82599 does (§7.2.4.7: IP length, identification
//!   and checksum, TCP sequence number, flags and checksum per segment;
//!   for IPv6 the payload length only, there being no identification or
//!   header checksum);
//!   [`linearize`] copies a chained packet into one buffer;
//! * receive: [`rx_checksum`] returns the checksum verdict flags, from the
//!   NIC when it checked ([`FLAG_CSUM_CHECKED`]), computed here otherwise;
//! * the 82599 and 82576 drivers seed the TCP checksum field for TSO with
//!   [`pseudo_header_sum`] (without the length, §7.2.4.7).
//!
//! IPv4 (RFC 791) and IPv6 (RFC 8200) with TCP (RFC 793) or UDP (RFC 768)
//! are handled. Which IP version a request is for is read from the
//! version nibble of the header at `l2_len` (the [`TxOffload`] has no
//! flag for it); `TX_IP_CSUM` on an IPv6 packet is refused (IPv6 has no
//! header checksum, RFC 8200 §3). An IPv6 packet whose next header is not
//! TCP or UDP — one with extension headers (RFC 8200 §4), fragments
//! included — is not parsed: an offload request on it gets an error and
//! its receive verdict is "not checked" (0), as for any frame this
//! module cannot parse.

use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::packet::{
    Packet, TxOffload, FLAG_CSUM_BAD, FLAG_CSUM_CHECKED, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_BAD,
    FLAG_L4_CSUM_GOOD, TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM,
};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// The fixed IPv6 header (RFC 8200 §3).
pub const IPV6_HEADER_LEN: usize = 40;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// IP protocol numbers.
pub const IPPROTO_TCP: u8 = 6;
/// See [`IPPROTO_TCP`].
pub const IPPROTO_UDP: u8 = 17;

/// Largest TSO payload the 82599 takes: PAYLEN is 18 bits (§7.2.3.2.4),
/// so 256 KiB - 1.
pub const MAX_TSO_PAYLOAD: usize = 256 * 1024 - 1;
/// Largest number of data descriptors one packet may use (§7.2.3.3: "the
/// maximum number of data descriptors per packet is 40"; DPDK's
/// IXGBE_TX_MAX_SEG).
pub const MAX_DATA_DESCRIPTORS: usize = 40;

/// TCP flags kept in the first, middle and last segment of a TSO packet:
/// the reset values of the 82599's DTXTCPFLGL/DTXTCPFLGH (§8.2.3.9.3/4):
/// FIN and PSH only in the last segment. The driver programs the same
/// values, so hardware and software segmentation agree.
pub const TSO_FLAGS_FIRST: u16 = 0xFF6;
/// See [`TSO_FLAGS_FIRST`].
pub const TSO_FLAGS_MIDDLE: u16 = 0xFF6;
/// See [`TSO_FLAGS_FIRST`].
pub const TSO_FLAGS_LAST: u16 = 0xFFF;

/// Header lengths and L4 protocol of an Ethernet/IPv4-or-IPv6/TCP-or-UDP
/// frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers {
    pub l2_len: usize,
    pub l3_len: usize,
    /// TCP header with options, or 8 for UDP.
    pub l4_len: usize,
    /// `IPPROTO_TCP` or `IPPROTO_UDP`.
    pub protocol: u8,
    /// The IP packet is a fragment (no L4 checksum can be checked).
    pub fragment: bool,
    /// IPv6 (`l3_len` 40, no extension headers), not IPv4.
    pub ipv6: bool,
}

/// Parses Ethernet (with at most one VLAN tag), IPv4 or IPv6 (without
/// extension headers), TCP or UDP. `None`: not such a frame, or
/// truncated. Never panics.
pub fn parse(frame: &[u8]) -> Option<Headers> {
    let mut l2_len = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == ETHERTYPE_VLAN {
        l2_len = 18;
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
    }
    let ip = frame.get(l2_len..)?;
    let (l3_len, protocol, fragment, ipv6) = match ethertype {
        ETHERTYPE_IPV4 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return None;
            }
            let l3_len = (ip[0] & 0xF) as usize * 4;
            if l3_len < 20 || ip.len() < l3_len {
                return None;
            }
            let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3FFF != 0;
            (l3_len, ip[9], fragment, false)
        }
        // RFC 8200 §3: version 6, next header at byte 6; TCP or UDP must
        // follow the fixed header directly (no extension headers, §4).
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_HEADER_LEN || ip[0] >> 4 != 6 {
                return None;
            }
            (IPV6_HEADER_LEN, ip[6], false, true)
        }
        _ => return None,
    };
    let l4 = &ip[l3_len..];
    let l4_len = match protocol {
        IPPROTO_TCP if l4.len() >= 20 => (l4[12] >> 4) as usize * 4,
        IPPROTO_UDP if l4.len() >= 8 => 8,
        _ => return None,
    };
    // A TCP data offset below 5 words is malformed (RFC 793 §3.1; found
    // by the frame_offload fuzz target: offset 2 gave an 8-byte "TCP
    // header" that cannot hold the checksum field).
    if l4_len < 8 || (protocol == IPPROTO_TCP && l4_len < 20) || l4.len() < l4_len {
        return None;
    }
    Some(Headers {
        l2_len,
        l3_len,
        l4_len,
        protocol,
        fragment,
        ipv6,
    })
}

/// Whether the IP header at `l2_len` in `frame` is IPv6 (version nibble 6,
/// RFC 8200 §3): how the transmit paths tell an IPv6 request from an
/// IPv4 one.
pub fn is_ipv6(frame: &[u8], l2_len: usize) -> bool {
    frame.get(l2_len).is_some_and(|b| b >> 4 == 6)
}

/// The [`TxOffload`] lengths of `frame` with the given request flags.
pub fn offload_for(frame: &[u8], flags: u32, mss: u16) -> Result<TxOffload> {
    let h = parse(frame).ok_or_else(|| not_parsed(frame.len()))?;
    // A TCP request (checksum or TSO) on a UDP packet, or a UDP checksum on
    // a TCP one, would write the checksum at the other protocol's offset
    // (found by the frame_offload fuzz target).
    let wants_tcp = flags & (TX_TCP_CSUM | TX_TSO) != 0;
    let wants_udp = flags & TX_UDP_CSUM != 0;
    if (wants_tcp && h.protocol != IPPROTO_TCP) || (wants_udp && h.protocol != IPPROTO_UDP) || (wants_tcp && wants_udp)
    {
        return Err(Error::Config(format!(
            "offload request {flags:#x} does not match the packet's protocol {} (6 = TCP, 17 = UDP)",
            h.protocol
        )));
    }
    if h.ipv6 && flags & TX_IP_CSUM != 0 {
        return Err(Error::Config(
            "IP header checksum requested for an IPv6 packet, which has none (RFC 8200 §3)".into(),
        ));
    }
    Ok(TxOffload {
        flags,
        l2_len: h.l2_len as u8,
        l3_len: h.l3_len as u16,
        l4_len: h.l4_len as u8,
        mss,
    })
}

fn not_parsed(len: usize) -> Error {
    Error::Config(format!(
        "offload request on a {len}-byte packet that is not Ethernet/IPv4-or-IPv6/TCP-or-UDP \
         (IPv6 extension headers before TCP/UDP are not handled)"
    ))
}

/// RFC 1071 one's-complement sum of `data` added to `sum` (not folded).
pub fn ones_sum(data: &[u8], mut sum: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    sum
}

/// Folds a sum to 16 bits (not complemented).
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The pseudo-header sum (source, destination, protocol, and the L4
/// length if given), folded, not complemented: what goes into the TCP/UDP
/// checksum field before the NIC completes it. For TSO the length is left
/// out (the NIC adds each segment's own, §7.2.4.7). IPv4 (RFC 793 §3.1)
/// or IPv6 (RFC 8200 §8.1: the 128-bit addresses, the 32-bit
/// upper-layer length and the next header, which sum the same as a
/// 16-bit length and protocol) by the version nibble at `l2_len`.
pub fn pseudo_header_sum(frame: &[u8], l2_len: usize, protocol: u8, l4_length: Option<usize>) -> u16 {
    let ip = &frame[l2_len..];
    let addresses = if is_ipv6(frame, l2_len) {
        &ip[8..40]
    } else {
        &ip[12..20]
    };
    let mut sum = ones_sum(addresses, protocol as u64);
    if let Some(len) = l4_length {
        sum += len as u64;
    }
    fold(sum)
}

/// Inserts the checksums `offload` asks for into `frame` (a whole frame in
/// one buffer), as the NIC would.
pub fn fill_checksums(frame: &mut [u8], offload: &TxOffload) -> Result<()> {
    let (l2, l3, l4) = (
        offload.l2_len as usize,
        offload.l3_len as usize,
        offload.l4_len as usize,
    );
    let protocol = if offload.flags & TX_UDP_CSUM != 0 {
        Some(IPPROTO_UDP)
    } else if offload.flags & (TX_TCP_CSUM | TX_TSO) != 0 {
        Some(IPPROTO_TCP)
    } else {
        None
    };
    // The L4 header must hold the checksum field written below: bytes
    // 16..18 of a TCP header (RFC 793 §3.1), 6..8 of a UDP header (RFC 768).
    let l4_minimum = match protocol {
        Some(IPPROTO_TCP) => 20,
        Some(_) => 8,
        None => 0,
    };
    let ipv6 = is_ipv6(frame, l2);
    let l3_minimum = if ipv6 { IPV6_HEADER_LEN } else { 20 };
    if l2 + l3 + l4 > frame.len() || l3 < l3_minimum || l4 < l4_minimum {
        return Err(Error::Config(format!(
            "offload lengths {l2}+{l3}+{l4} do not fit a {}-byte packet \
             (IPv4 header at least 20 bytes, IPv6 40, TCP 20, UDP 8)",
            frame.len()
        )));
    }
    if ipv6 && offload.flags & TX_IP_CSUM != 0 {
        return Err(Error::Config(
            "IP header checksum requested for an IPv6 packet, which has none (RFC 8200 §3)".into(),
        ));
    }
    if !ipv6 && offload.flags & (TX_IP_CSUM | TX_TSO) != 0 {
        set_ipv4_checksum(&mut frame[l2..l2 + l3]);
    }
    if let Some(protocol) = protocol {
        set_l4_checksum(frame, l2, l3, protocol);
    }
    Ok(())
}

/// Recomputes the checksum of an IPv4 header in place.
pub fn set_ipv4_checksum(ip: &mut [u8]) {
    ip[10] = 0;
    ip[11] = 0;
    let checksum = !fold(ones_sum(ip, 0));
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
}

/// Computes the TCP or UDP checksum (pseudo-header included, IPv4's or
/// IPv6's) of the L4 packet starting at `l2 + l3` and running to the end
/// of `frame`.
pub fn set_l4_checksum(frame: &mut [u8], l2: usize, l3: usize, protocol: u8) {
    let field = l2 + l3 + if protocol == IPPROTO_TCP { 16 } else { 6 };
    frame[field] = 0;
    frame[field + 1] = 0;
    let l4_length = frame.len() - l2 - l3;
    let sum = ones_sum(
        &frame[l2 + l3..],
        pseudo_header_sum(frame, l2, protocol, Some(l4_length)) as u64,
    );
    let mut checksum = !fold(sum);
    if protocol == IPPROTO_UDP && checksum == 0 {
        checksum = 0xFFFF; // RFC 768: 0 means "no checksum" (RFC 8200 §8.1 for IPv6)
    }
    frame[field..field + 2].copy_from_slice(&checksum.to_be_bytes());
}

/// The checksum verdict of a received frame, computed in software with the
/// same meaning as the NIC's (IPCS/L4CS and IPE/TCPE, §7.1.6.2): IP header
/// checked for IPv4, TCP/UDP checked unless a fragment or a UDP checksum 0
/// over IPv4. IPv6 has no header checksum (no IP flag); its UDP checksum
/// is mandatory (RFC 8200 §8.1), so a 0 there is checked, and fails.
pub fn checksum_verdict(frame: &[u8]) -> u32 {
    let Some(h) = parse(frame) else {
        // Not TCP/UDP over IPv4: still check an IPv4 header if there is one.
        return ip_only_verdict(frame);
    };
    let ip = &frame[h.l2_len..h.l2_len + h.l3_len];
    let (mut flags, total) = if h.ipv6 {
        // Payload length (RFC 8200 §3) counts what follows the header.
        (0, IPV6_HEADER_LEN + u16::from_be_bytes([ip[4], ip[5]]) as usize)
    } else if fold(ones_sum(ip, 0)) == 0xFFFF {
        (FLAG_IP_CSUM_GOOD, u16::from_be_bytes([ip[2], ip[3]]) as usize)
    } else {
        (
            FLAG_IP_CSUM_BAD | FLAG_CSUM_BAD,
            u16::from_be_bytes([ip[2], ip[3]]) as usize,
        )
    };
    let l4_end = (h.l2_len + total).min(frame.len());
    let l4_start = h.l2_len + h.l3_len;
    let udp_without_checksum =
        !h.ipv6 && h.protocol == IPPROTO_UDP && frame[l4_start + 6] == 0 && frame[l4_start + 7] == 0;
    if !h.fragment && !udp_without_checksum && l4_end > l4_start {
        let l4 = &frame[l4_start..l4_end];
        let sum = ones_sum(
            l4,
            pseudo_header_sum(frame, h.l2_len, h.protocol, Some(l4.len())) as u64,
        );
        flags |= if fold(sum) == 0xFFFF {
            FLAG_L4_CSUM_GOOD
        } else {
            FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD
        };
    }
    flags
}

fn ip_only_verdict(frame: &[u8]) -> u32 {
    if frame.len() >= 34 && frame[12..14] == ETHERTYPE_IPV4.to_be_bytes() && frame[14] >> 4 == 4 {
        let l3 = (frame[14] & 0xF) as usize * 4;
        if l3 >= 20 && frame.len() >= 14 + l3 {
            return if fold(ones_sum(&frame[14..14 + l3], 0)) == 0xFFFF {
                FLAG_IP_CSUM_GOOD
            } else {
                FLAG_IP_CSUM_BAD | FLAG_CSUM_BAD
            };
        }
    }
    0
}

/// Verdict bits of [`checksum_verdict`].
pub const VERDICT_MASK: u32 =
    FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD | FLAG_CSUM_BAD | FLAG_IP_CSUM_BAD | FLAG_L4_CSUM_BAD;

/// The checksum verdict of a received packet: the NIC's when receive
/// checksum offload was on, otherwise computed here. The same bits either
/// way. A chained packet (RSC) is checked over all its segments.
pub fn rx_checksum(packet: &Packet) -> u32 {
    if packet.meta().flags & FLAG_CSUM_CHECKED != 0 {
        return packet.meta().flags & VERDICT_MASK;
    }
    if packet.is_chained() {
        let mut frame = Vec::with_capacity(packet.total_len());
        packet.copy_chain_to(&mut frame);
        checksum_verdict(&frame)
    } else {
        checksum_verdict(packet)
    }
}

/// The limits of one NIC's TCP segmentation, and where they come from,
/// for [`check_tso_with`]'s messages.
#[derive(Debug, Clone, Copy)]
pub struct TsoLimits {
    /// The NIC's name in messages ("82599").
    pub device: &'static str,
    /// Largest payload (PAYLEN).
    pub max_payload: usize,
    /// Why: the datasheet section of PAYLEN.
    pub payload_source: &'static str,
    /// Most data descriptors (= chain segments) per packet.
    pub max_data_descriptors: usize,
    /// Why: where that limit comes from.
    pub descriptors_source: &'static str,
}

/// The 82599's limits (datasheet rev. 3.3).
pub const TSO_LIMITS_82599: TsoLimits = TsoLimits {
    device: "82599",
    max_payload: MAX_TSO_PAYLOAD,
    payload_source: "PAYLEN is 18 bits, §7.2.3.2.4",
    max_data_descriptors: MAX_DATA_DESCRIPTORS,
    descriptors_source: "§7.2.3.3",
};

/// Checks that a TSO request can be done by the 82599 (and so by the
/// software fallback, which gives the same result): a TCP/IPv4 or
/// TCP/IPv6 packet,
/// MSS > 0, payload at most [`MAX_TSO_PAYLOAD`], at most
/// [`MAX_DATA_DESCRIPTORS`] buffers.
pub fn check_tso(packet: &Packet) -> Result<()> {
    check_tso_with(packet, &TSO_LIMITS_82599)
}

/// [`check_tso`] with another NIC's limits (the 82576's, for igb).
pub fn check_tso_with(packet: &Packet, limits: &TsoLimits) -> Result<()> {
    let o = packet.tx_offload();
    let header = o.l2_len as usize + o.l3_len as usize + o.l4_len as usize;
    let total = packet.total_len();
    if o.mss == 0 {
        return Err(Error::Config("TSO packet with MSS 0".into()));
    }
    let l3_minimum = if is_ipv6(packet, o.l2_len as usize) {
        IPV6_HEADER_LEN
    } else {
        20
    };
    if o.l4_len < 20 || (o.l3_len as usize) < l3_minimum || header > packet.len() {
        return Err(Error::Config(format!(
            "TSO packet: the headers ({}+{}+{} bytes) must be TCP/IPv4 or TCP/IPv6 and lie in the first segment \
             ({} bytes)",
            o.l2_len,
            o.l3_len,
            o.l4_len,
            packet.len()
        )));
    }
    if total - header > limits.max_payload {
        return Err(Error::Config(format!(
            "TSO payload of {} bytes exceeds the {}'s limit of {} (256 KiB - 1, {})",
            total - header,
            limits.device,
            limits.max_payload,
            limits.payload_source
        )));
    }
    if packet.segment_count() > limits.max_data_descriptors {
        return Err(Error::Config(format!(
            "TSO packet of {} segments: the {} takes at most {} data descriptors per packet ({}); \
             use --tso single or fewer, larger segments",
            packet.segment_count(),
            limits.device,
            limits.max_data_descriptors,
            limits.descriptors_source
        )));
    }
    Ok(())
}

/// Copies a chained packet into one buffer of `pool`, keeping its offload
/// request and metadata. The result must fit one buffer.
pub fn linearize(packet: &Packet, pool: &Mempool) -> Result<Packet> {
    let total = packet.total_len();
    let mut out = pool.alloc()?;
    if total > out.capacity() {
        return Err(Error::Config(format!(
            "a chained packet of {total} bytes does not fit one {}-byte buffer",
            out.capacity()
        )));
    }
    out.set_len(total)?;
    let mut at = 0;
    for segment in packet.segments() {
        out[at..at + segment.len()].copy_from_slice(segment);
        at += segment.len();
    }
    out.copy_meta_from(packet);
    out.set_tx_offload(packet.tx_offload());
    Ok(out)
}

/// TCP segmentation in software, with exactly the bytes the 82599 puts on
/// the wire (§7.2.4.7): each segment gets the headers of the original with
/// IPv4 total length, identification (+1 per segment) and header checksum
/// (IPv6: the payload length alone, RFC 8200 §3),
/// TCP sequence number (+ the payload before it), flags masked as
/// [`TSO_FLAGS_FIRST`]/`MIDDLE`/`LAST` say, and the TCP checksum. The
/// frames are allocated from `pool` and appended to `out`, plain (no
/// offload request left).
pub fn segment(packet: &Packet, pool: &Mempool, out: &mut Vec<Packet>) -> Result<()> {
    check_tso(packet)?;
    let o = packet.tx_offload();
    let (l2, l3, l4) = (o.l2_len as usize, o.l3_len as usize, o.l4_len as usize);
    let header_len = l2 + l3 + l4;
    let mss = o.mss as usize;
    let mut data = Vec::with_capacity(packet.total_len());
    packet.copy_chain_to(&mut data);
    let (header, payload) = data.split_at(header_len);
    if header_len + mss > pool.data_room() {
        return Err(Error::Config(format!(
            "MSS {mss} plus {header_len} header bytes does not fit a {}-byte buffer",
            pool.data_room()
        )));
    }
    let chunks = payload.len().div_ceil(mss).max(1);
    let ipv6 = is_ipv6(header, l2);
    let ip_id = u16::from_be_bytes([header[l2 + 4], header[l2 + 5]]);
    let tcp = l2 + l3;
    let seq = u32::from_be_bytes([header[tcp + 4], header[tcp + 5], header[tcp + 6], header[tcp + 7]]);
    // Data offset (bits 15:12) stays; the 12 flag bits below are masked.
    let offset_flags = u16::from_be_bytes([header[tcp + 12], header[tcp + 13]]);
    for k in 0..chunks {
        let chunk = &payload[(k * mss).min(payload.len())..((k + 1) * mss).min(payload.len())];
        let mut frame = pool.alloc()?;
        frame.set_len(header_len + chunk.len())?;
        frame[..header_len].copy_from_slice(header);
        frame[header_len..].copy_from_slice(chunk);
        let mask = if k + 1 == chunks {
            TSO_FLAGS_LAST
        } else if k == 0 {
            TSO_FLAGS_FIRST
        } else {
            TSO_FLAGS_MIDDLE
        };
        if ipv6 {
            // The payload length counts what follows the fixed header
            // (RFC 8200 §3); l3 is 40 (check_tso).
            let payload_length = (l3 - IPV6_HEADER_LEN + l4 + chunk.len()) as u16;
            frame[l2 + 4..l2 + 6].copy_from_slice(&payload_length.to_be_bytes());
        } else {
            let ip_total = (l3 + l4 + chunk.len()) as u16;
            frame[l2 + 2..l2 + 4].copy_from_slice(&ip_total.to_be_bytes());
            frame[l2 + 4..l2 + 6].copy_from_slice(&ip_id.wrapping_add(k as u16).to_be_bytes());
        }
        frame[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add((k * mss) as u32).to_be_bytes());
        frame[tcp + 12..tcp + 14].copy_from_slice(&((offset_flags & 0xF000) | (offset_flags & mask)).to_be_bytes());
        if !ipv6 {
            set_ipv4_checksum(&mut frame[l2..l2 + l3]);
        }
        set_l4_checksum(&mut frame, l2, l3, IPPROTO_TCP);
        out.push(frame);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryKind;

    /// Ethernet + IPv4 + TCP with `payload` bytes, checksums valid.
    pub(crate) fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 54 + payload];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        f[18..20].copy_from_slice(&0x1234u16.to_be_bytes());
        f[22] = 64;
        f[23] = IPPROTO_TCP;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..42].copy_from_slice(&7u32.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = 0x18; // PSH ACK
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        set_ipv4_checksum(&mut f[14..34]);
        set_l4_checksum(&mut f, 14, 20, IPPROTO_TCP);
        f
    }

    /// A TCP checksum request whose L4 length is too short to hold the
    /// checksum field (bytes 16..18) on a frame that ends there: an error,
    /// not an index panic (issue 8 item 9).
    #[test]
    fn short_l4_header_is_an_error_not_a_panic() {
        let f = tcp_frame(0);
        for (flags, l4, len) in [
            (TX_TCP_CSUM, 8u8, 14 + 20 + 8),
            (TX_TCP_CSUM, 17, 14 + 20 + 17),
            (TX_UDP_CSUM, 7, 14 + 20 + 7),
        ] {
            let mut short = f[..len].to_vec();
            let request = TxOffload {
                flags,
                l2_len: 14,
                l3_len: 20,
                l4_len: l4,
                mss: 0,
            };
            let err = fill_checksums(&mut short, &request).expect_err("too short");
            assert!(err.to_string().contains("do not fit"), "{err}");
        }
    }

    #[test]
    fn verdicts_of_good_and_damaged_frames() {
        let f = tcp_frame(100);
        assert_eq!(checksum_verdict(&f), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
        let mut bad = f.clone();
        bad[60] ^= 1;
        assert_eq!(
            checksum_verdict(&bad),
            FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD
        );
        let mut bad_ip = f.clone();
        bad_ip[22] ^= 1;
        assert_eq!(checksum_verdict(&bad_ip) & FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_BAD);
        assert_eq!(checksum_verdict(&[0u8; 10]), 0);
    }

    /// The flag masks, and what they do to a FIN|PSH|ACK packet, checked
    /// against the datasheet's literals (DTXTCPFLGL reset value 0x0FF6_0FF6,
    /// DTXTCPFLGH 0x0000_0FFF, §8.2.3.9.3/4), not against the constants the
    /// hardware path also uses: FIN (0x01) and PSH (0x08) only in the last
    /// segment, every other flag (here ACK, 0x10) in all.
    /// Found by the frame_offload fuzz target: a TCP checksum request on a
    /// UDP packet got a request whose L4 header (8 bytes) cannot hold the
    /// TCP checksum field; now it is refused.
    #[test]
    fn offload_request_for_the_other_protocol_is_refused() {
        let mut udp = tcp_frame(40);
        udp[23] = IPPROTO_UDP;
        let err = offload_for(&udp, TX_TCP_CSUM, 0).expect_err("TCP request on UDP");
        assert!(err.to_string().contains("does not match"), "{err}");
        assert!(offload_for(&tcp_frame(40), TX_UDP_CSUM, 0).is_err());
        assert!(offload_for(&tcp_frame(40), TX_TCP_CSUM | TX_UDP_CSUM, 0).is_err());
        assert!(offload_for(&tcp_frame(40), TX_TCP_CSUM | TX_IP_CSUM, 0).is_ok());
    }

    /// Found by the frame_offload fuzz target
    /// (fuzz/regressions/frame_offload/tcp-data-offset-2): a TCP header
    /// with data offset 2 (8 bytes) was parsed as valid.
    #[test]
    fn tcp_data_offset_below_five_is_not_parsed() {
        let mut f = tcp_frame(40);
        for offset in [0u8, 2, 4] {
            f[46] = offset << 4;
            assert!(parse(&f).is_none(), "data offset {offset}");
            assert!(offload_for(&f, TX_TCP_CSUM, 0).is_err());
        }
        f[46] = 5 << 4;
        assert_eq!(parse(&f).map(|h| h.l4_len), Some(20));
    }

    #[test]
    fn tso_flag_masks_are_the_datasheet_reset_values() {
        let low = TSO_FLAGS_FIRST as u32 | (TSO_FLAGS_MIDDLE as u32) << 16;
        assert_eq!(low, 0x0FF6_0FF6, "DTXTCPFLGL");
        assert_eq!(TSO_FLAGS_LAST as u32, 0x0000_0FFF, "DTXTCPFLGH");
        let pool = Mempool::new("seg-flags", 64, MemoryKind::Plain).unwrap();
        let mut f = tcp_frame(1500);
        f[47] = 0x19; // FIN PSH ACK
        let mut p = pool.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.copy_from_slice(&f);
        p.set_tx_offload(offload_for(&f, TX_TSO, 500).unwrap());
        let mut out = Vec::new();
        segment(&p, &pool, &mut out).unwrap();
        let flags: Vec<u8> = out.iter().map(|s| s[47]).collect();
        assert_eq!(flags, [0x10, 0x10, 0x19]);
    }

    /// Ethernet + IPv6 (2001:db8::1 to 2001:db8::2, RFC 8200 §3) + TCP
    /// (ports 1000 to 80, sequence 7, PSH ACK) or UDP (ports 1000 to 53)
    /// with `payload` bytes 0, 1, 2, ..., checksum fields 0.
    fn ip6_frame(protocol: u8, payload: usize) -> Vec<u8> {
        let l4 = if protocol == IPPROTO_TCP { 20 } else { 8 };
        let mut f = vec![0u8; 54 + l4 + payload];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((l4 + payload) as u16).to_be_bytes());
        f[20] = protocol;
        f[21] = 64;
        f[22..26].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        f[37] = 1;
        f[38..42].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        f[53] = 2;
        f[54..56].copy_from_slice(&1000u16.to_be_bytes());
        if protocol == IPPROTO_TCP {
            f[56..58].copy_from_slice(&80u16.to_be_bytes());
            f[58..62].copy_from_slice(&7u32.to_be_bytes());
            f[66] = 5 << 4;
            f[67] = 0x18; // PSH ACK
        } else {
            f[56..58].copy_from_slice(&53u16.to_be_bytes());
            f[58..60].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        }
        for (i, b) in f[54 + l4..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    /// The RFC 8200 §8.1 check of an IPv6 frame's TCP/UDP checksum, summed
    /// here word by word (not with this module's helpers): the addresses,
    /// the 32-bit upper-layer length, three zero bytes and the next
    /// header, then the L4 packet; good if the sum folds to 0xFFFF.
    fn ip6_l4_sums_to_ones(f: &[u8]) -> bool {
        let l4 = &f[54..];
        let mut bytes = f[22..54].to_vec();
        bytes.extend_from_slice(&(l4.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, f[20]]);
        bytes.extend_from_slice(l4);
        if bytes.len() % 2 == 1 {
            bytes.push(0);
        }
        let mut sum: u32 = bytes.chunks(2).map(|w| (w[0] as u32) << 8 | w[1] as u32).sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        sum == 0xFFFF
    }

    /// IPv6 checksums filled in software equal values computed outside
    /// this code (a Python sum over the same bytes: TCP 0xb3e7, UDP with
    /// 100 bytes 0x03b7, with 101 (odd) 0x9fb4), and the IPv6 header is
    /// left as it was (it has no checksum).
    #[test]
    fn ipv6_checksums_are_the_independently_computed_values() {
        for (protocol, payload, flags, field, expected) in [
            (IPPROTO_TCP, 100, TX_TCP_CSUM, 70, 0xb3e7u16),
            (IPPROTO_UDP, 100, TX_UDP_CSUM, 60, 0x03b7),
            (IPPROTO_UDP, 101, TX_UDP_CSUM, 60, 0x9fb4),
        ] {
            let original = ip6_frame(protocol, payload);
            let request = offload_for(&original, flags, 0).unwrap();
            assert_eq!(
                (request.l2_len, request.l3_len, request.l4_len),
                (14, 40, if protocol == IPPROTO_TCP { 20 } else { 8 })
            );
            let mut f = original.clone();
            fill_checksums(&mut f, &request).unwrap();
            assert_eq!(
                u16::from_be_bytes([f[field], f[field + 1]]),
                expected,
                "protocol {protocol}"
            );
            assert_eq!(f[..field], original[..field], "nothing before the checksum changes");
            assert!(ip6_l4_sums_to_ones(&f));
            assert_eq!(checksum_verdict(&f), FLAG_L4_CSUM_GOOD, "no IP flag for IPv6");
            *f.last_mut().unwrap() ^= 1;
            assert_eq!(checksum_verdict(&f), FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD);
        }
    }

    /// A UDP checksum of 0 means "none" over IPv4 but is not allowed over
    /// IPv6 (RFC 8200 §8.1): the verdict is bad, not unchecked.
    #[test]
    fn ipv6_udp_without_checksum_is_bad() {
        let f = ip6_frame(IPPROTO_UDP, 20);
        assert_eq!(checksum_verdict(&f), FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD);
    }

    /// Requests this module does not do for IPv6: an IP header checksum
    /// (there is none), and any packet with an extension header between
    /// IPv6 and TCP (here hop-by-hop options, next header 0): refused with
    /// errors that say why; the hop-by-hop frame's verdict is "unchecked".
    #[test]
    fn ipv6_header_checksum_and_extension_headers_are_refused() {
        let f = ip6_frame(IPPROTO_TCP, 10);
        let err = offload_for(&f, TX_IP_CSUM | TX_TCP_CSUM, 0).expect_err("IP checksum on IPv6");
        assert!(err.to_string().contains("IPv6"), "{err}");
        let mut copy = f.clone();
        let request = TxOffload {
            flags: TX_IP_CSUM,
            l2_len: 14,
            l3_len: 40,
            l4_len: 20,
            mss: 0,
        };
        assert!(fill_checksums(&mut copy, &request).is_err());
        assert_eq!(copy, f, "nothing written");
        let mut hop_by_hop = f.clone();
        hop_by_hop[20] = 0;
        assert!(parse(&hop_by_hop).is_none());
        let err = offload_for(&hop_by_hop, TX_TCP_CSUM, 0).expect_err("extension header");
        assert!(err.to_string().contains("extension headers"), "{err}");
        assert_eq!(checksum_verdict(&hop_by_hop), 0);
        // An IPv6 request whose IP header length is shorter than 40 bytes.
        let short = TxOffload {
            flags: TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        };
        assert!(fill_checksums(&mut copy, &short).is_err());
    }

    /// TSO over IPv6 in software (§7.2.4.7 with TUCMD.IPV4 clear): 1500
    /// bytes at MSS 500 are three frames whose IPv6 header differs from
    /// the original only in the payload length (520 each; no
    /// identification or checksum to write), sequence numbers 7 + 500 k,
    /// FIN and PSH on the last only, checksums good by an independent sum.
    #[test]
    fn ipv6_software_segmentation_gives_valid_segments() {
        let pool = Mempool::new("seg6", 64, MemoryKind::Plain).unwrap();
        let mut f = ip6_frame(IPPROTO_TCP, 1500);
        f[67] = 0x19; // FIN PSH ACK
        let mut p = pool.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.copy_from_slice(&f);
        p.set_tx_offload(offload_for(&f, TX_TSO, 500).unwrap());
        let mut out = Vec::new();
        segment(&p, &pool, &mut out).unwrap();
        assert_eq!(out.len(), 3);
        for (k, s) in out.iter().enumerate() {
            assert_eq!(s.len(), 14 + 40 + 20 + 500);
            assert_eq!(s[..18], f[..18], "segment {k}");
            assert_eq!(u16::from_be_bytes([s[18], s[19]]), 520);
            assert_eq!(s[20..54], f[20..54], "segment {k}");
            assert_eq!(u32::from_be_bytes(s[58..62].try_into().unwrap()), 7 + 500 * k as u32);
            assert_eq!(s[67], if k == 2 { 0x19 } else { 0x10 });
            assert_eq!(&s[74..], &f[74 + 500 * k..74 + 500 * (k + 1)]);
            assert!(ip6_l4_sums_to_ones(s), "segment {k}");
            assert_eq!(checksum_verdict(s), FLAG_L4_CSUM_GOOD);
        }
    }

    #[test]
    fn software_segmentation_gives_valid_segments() {
        let pool = Mempool::new("seg", 64, MemoryKind::Plain).unwrap();
        let f = tcp_frame(1500);
        let mut p = pool.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.copy_from_slice(&f);
        p.set_tx_offload(offload_for(&f, TX_TSO, 500).unwrap());
        let mut out = Vec::new();
        segment(&p, &pool, &mut out).unwrap();
        assert_eq!(out.len(), 3);
        for (k, s) in out.iter().enumerate() {
            assert_eq!(
                checksum_verdict(s),
                FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD,
                "segment {k}"
            );
            assert_eq!(u32::from_be_bytes(s[38..42].try_into().unwrap()), 7 + 500 * k as u32);
            assert_eq!(u16::from_be_bytes([s[18], s[19]]), 0x1234 + k as u16);
            assert_eq!(s[47] & 0x08 != 0, k == 2, "PSH only in the last segment");
            assert_eq!(&s[54..], &f[54 + 500 * k..54 + 500 * (k + 1)]);
        }
    }
}
