//! The test frame that `pktgen` sends and `demo`/`pcap` check: Ethernet,
//! IPv4, UDP, and a 64-bit sequence number at the start of the UDP payload.
//!
//! ```text
//! | dst MAC | src MAC | 0x0800 | IPv4 (20) | UDP (8) | seq (8, big endian) | pattern |
//! ```

/// Smallest frame we build: 60 bytes, the Ethernet minimum without CRC.
pub const MIN_FRAME: usize = 60;
/// Largest frame: 1514 bytes, the Ethernet maximum without CRC.
pub const MAX_FRAME: usize = 1514;
const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// Byte offset of the sequence number.
pub const SEQ_OFFSET: usize = ETH_LEN + IP_LEN + UDP_LEN;
/// UDP destination port that marks our test frames.
pub const UDP_PORT: u16 = 4789 + 1000;

/// Builds the frame template of `size` bytes (sequence number 0).
pub fn template(size: usize) -> Vec<u8> {
    assert!(
        (MIN_FRAME..=MAX_FRAME).contains(&size),
        "frame size checked by the caller"
    );
    let mut f = vec![0u8; size];
    // Ethernet (IEEE 802.3 §3.1): locally administered addresses, as ixy's
    // generator uses fixed made-up ones.
    f[0..6].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    // IPv4 (RFC 791 §3.1): version 4, IHL 5, total length, TTL 64, UDP,
    // 10.0.0.1 -> 10.0.0.2, header checksum (RFC 1071).
    let ip = &mut f[ETH_LEN..ETH_LEN + IP_LEN];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((size - ETH_LEN) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let checksum = internet_checksum(ip);
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    // UDP (RFC 768): ports, length; checksum 0 = "not computed", allowed
    // for IPv4, so the sequence number can change without recomputing it.
    let udp = &mut f[ETH_LEN + IP_LEN..SEQ_OFFSET];
    udp[0..2].copy_from_slice(&UDP_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&((size - ETH_LEN - IP_LEN) as u16).to_be_bytes());
    for (i, b) in f[SEQ_OFFSET + 8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

/// RFC 1071 one's-complement checksum.
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            (chunk[0] as u16) << 8
        };
        sum += word as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the sequence number into a frame built from [`template`].
#[inline]
pub fn set_sequence(frame: &mut [u8], seq: u64) {
    frame[SEQ_OFFSET..SEQ_OFFSET + 8].copy_from_slice(&seq.to_be_bytes());
}

/// The sequence number of one of our test frames, or `None` for any other
/// frame (too short, not IPv4/UDP, wrong port). Never panics on any input.
pub fn sequence(frame: &[u8]) -> Option<u64> {
    if frame.len() < SEQ_OFFSET + 8 {
        return None;
    }
    let is_ours = frame[12..14] == [0x08, 0x00]
        && frame[ETH_LEN] == 0x45
        && frame[ETH_LEN + 9] == 17
        && frame[ETH_LEN + IP_LEN + 2..ETH_LEN + IP_LEN + 4] == UDP_PORT.to_be_bytes();
    if !is_ours {
        return None;
    }
    Some(u64::from_be_bytes(frame[SEQ_OFFSET..SEQ_OFFSET + 8].try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_has_a_valid_ip_checksum_and_round_trips_the_sequence() {
        let mut f = template(60);
        assert_eq!(internet_checksum(&f[14..34]), 0, "checksum over a valid header is 0");
        set_sequence(&mut f, 0x0102_0304_0506_0708);
        assert_eq!(sequence(&f), Some(0x0102_0304_0506_0708));
    }

    #[test]
    fn foreign_or_truncated_frames_have_no_sequence() {
        let f = template(60);
        assert_eq!(sequence(&f[..49]), None);
        let mut other = f.clone();
        other[37] ^= 1; // another UDP port
        assert_eq!(sequence(&other), None);
        assert_eq!(sequence(&[]), None);
    }
}
