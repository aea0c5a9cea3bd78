//! What the model's MAC and DMA engines know about packet contents:
//! Ethernet/IPv4/TCP/UDP headers (and, for the checksum verdict, IPv6's),
//! the Internet checksum (RFC 1071), and the
//! RSS Toeplitz hash (§7.1.2.8.1). Written for the model, independently of
//! the driver's `offload.rs` and `rss.rs`.

/// Offsets of an untagged Ethernet + IPv4 (+ TCP/UDP) frame.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parsed {
    pub ip: usize,
    pub ip_len: usize,
    /// Start of the TCP/UDP header, if it is one and not a fragment.
    pub l4: Option<usize>,
    pub protocol: u8,
}

pub(crate) const TCP: u8 = 6;
pub(crate) const UDP: u8 = 17;

/// Parses an untagged IPv4 frame (the model does not strip VLAN tags).
pub(crate) fn parse(frame: &[u8]) -> Option<Parsed> {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
        return None;
    }
    let ip_len = (frame[14] & 0xF) as usize * 4;
    if ip_len < 20 || frame.len() < 14 + ip_len {
        return None;
    }
    let protocol = frame[14 + 9];
    let fragment = u16::from_be_bytes([frame[20], frame[21]]) & 0x3FFF != 0;
    let l4 = 14 + ip_len;
    let l4_ok =
        !fragment && ((protocol == TCP && frame.len() >= l4 + 20) || (protocol == UDP && frame.len() >= l4 + 8));
    Some(Parsed {
        ip: 14,
        ip_len,
        l4: l4_ok.then_some(l4),
        protocol,
    })
}

/// One's-complement sum of 16-bit big-endian words, not folded.
pub(crate) fn sum(data: &[u8]) -> u64 {
    let mut total = 0u64;
    for pair in data.chunks(2) {
        total += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    total
}

pub(crate) fn fold(mut s: u64) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// Pseudo-header sum of the TCP/UDP packet of `frame` (RFC 793 §3.1).
pub(crate) fn pseudo(frame: &[u8], p: &Parsed, l4_length: usize) -> u64 {
    sum(&frame[p.ip + 12..p.ip + 20]) + u64::from(p.protocol) + l4_length as u64
}

/// An untagged Ethernet/IPv6 frame whose next header is TCP or UDP
/// (RFC 8200 §3; extension headers are not followed): the start of the
/// L4 header and its length by the payload length field, and the
/// protocol. Only the checksum verdict uses it: RSS and RSC in the model
/// stay IPv4 only.
fn parse_ipv6(frame: &[u8]) -> Option<(usize, usize, u8)> {
    if frame.len() < 54 || frame[12..14] != [0x86, 0xDD] || frame[14] >> 4 != 6 {
        return None;
    }
    let protocol = frame[20];
    let l4 = 54;
    let length = (u16::from_be_bytes([frame[18], frame[19]]) as usize).min(frame.len() - l4);
    let fits = (protocol == TCP && length >= 20) || (protocol == UDP && length >= 8);
    fits.then_some((l4, length, protocol))
}

/// The IPv6 pseudo-header sum (RFC 8200 §8.1): both addresses, the
/// upper-layer length and the next header.
fn pseudo_ipv6(frame: &[u8], protocol: u8, l4_length: usize) -> u64 {
    sum(&frame[22..54]) + u64::from(protocol) + l4_length as u64
}

/// The receive checksum verdict of §7.1.6.2: (IPCS, IPE, L4CS, TCPE, UDP).
/// IPv6 has no header checksum: IPCS stays clear, the TCP/UDP checksum
/// is checked over the IPv6 pseudo-header.
pub(crate) fn verdict(frame: &[u8]) -> (bool, bool, bool, bool, bool) {
    if let Some((l4, length, protocol)) = parse_ipv6(frame) {
        let end = l4 + length;
        let l4_bad = fold(pseudo_ipv6(frame, protocol, length) + sum(&frame[l4..end])) != 0xFFFF;
        return (false, false, true, l4_bad, protocol == UDP);
    }
    let Some(p) = parse(frame) else {
        return (false, false, false, false, false);
    };
    let ip_bad = fold(sum(&frame[p.ip..p.ip + p.ip_len])) != 0xFFFF;
    let Some(l4) = p.l4 else {
        return (true, ip_bad, false, false, false);
    };
    let total = u16::from_be_bytes([frame[p.ip + 2], frame[p.ip + 3]]) as usize;
    let end = (p.ip + total).min(frame.len());
    if end <= l4 || (p.protocol == UDP && frame[l4 + 6] == 0 && frame[l4 + 7] == 0) {
        return (true, ip_bad, false, false, p.protocol == UDP);
    }
    let l4_bad = fold(pseudo(frame, &p, end - l4) + sum(&frame[l4..end])) != 0xFFFF;
    (true, ip_bad, true, l4_bad, p.protocol == UDP)
}

/// Toeplitz hash (§7.1.2.8.1) of `input` under the 40-byte `key`.
pub(crate) fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut result = 0u32;
    for (byte_index, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                // The 32 key bits starting at bit position byte_index*8 + bit.
                let start = byte_index * 8 + bit;
                let mut window = 0u32;
                for k in 0..32 {
                    let position = start + k;
                    let key_bit = (key[position / 8] >> (7 - position % 8)) & 1;
                    window = (window << 1) | u32::from(key_bit);
                }
                result ^= window;
            }
        }
    }
    result
}
