//! Receive side scaling: the Toeplitz hash (82599 datasheet §7.1.2.8.1,
//! 82576 §7.1.2.10.1) and the redirection table that maps a hash to a
//! queue. Shared by the ixgbe and igb drivers; the software 82599 has its
//! own implementation (written separately, as the hardware is).
//!
//! The hash input for TCP/IPv4 is source address, destination address,
//! source port, destination port, in network byte order (§7.1.2.8.1); for
//! other IPv4 packets the two addresses only.

/// The 40-byte key of Microsoft's RSS verification suite ("Verifying the
/// RSS Hash Calculation"), which the 82599 datasheet repeats in §7.1.2.8.3.
/// We use it as the default key, so that hashes can be checked by hand.
pub const DEFAULT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Entries of the 82599's redirection table (§7.1.2.8.2): the low 7 bits of
/// the hash index it.
pub const RETA_ENTRIES: usize = 128;

/// The Toeplitz hash of `input` under `key` (the key must be at least
/// `input.len() + 4` bytes long): for every set bit of the input, from the
/// most significant bit of the first byte on, XOR in the 32 key bits that
/// start at that bit position.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    assert!(key.len() >= input.len() + 4, "RSS key too short for the input");
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut hash = 0;
    for (i, &byte) in input.iter().enumerate() {
        let next_key_byte = key[i + 4];
        for bit in (0..8).rev() {
            if byte >> bit & 1 == 1 {
                hash ^= window;
            }
            window = (window << 1) | u32::from(next_key_byte >> bit & 1);
        }
    }
    hash
}

/// Hash of an IPv4 pair (addresses in network order).
pub fn hash_ipv4(key: &[u8], source: [u8; 4], destination: [u8; 4]) -> u32 {
    let mut input = [0u8; 8];
    input[..4].copy_from_slice(&source);
    input[4..].copy_from_slice(&destination);
    toeplitz(key, &input)
}

/// Hash of a TCP/IPv4 4-tuple.
pub fn hash_ipv4_tcp(
    key: &[u8],
    source: [u8; 4],
    destination: [u8; 4],
    source_port: u16,
    destination_port: u16,
) -> u32 {
    let mut input = [0u8; 12];
    input[..4].copy_from_slice(&source);
    input[4..8].copy_from_slice(&destination);
    input[8..10].copy_from_slice(&source_port.to_be_bytes());
    input[10..].copy_from_slice(&destination_port.to_be_bytes());
    toeplitz(key, &input)
}

/// The redirection table the drivers program: entry i goes to queue
/// `i % queues` (as Linux and DPDK fill it by default).
pub fn default_reta(queues: u16) -> [u8; RETA_ENTRIES] {
    let mut reta = [0u8; RETA_ENTRIES];
    for (i, entry) in reta.iter_mut().enumerate() {
        *entry = (i % queues.max(1) as usize) as u8;
    }
    reta
}

/// The queue a hash selects in `reta` (§7.1.2.8.2: the 7 least significant
/// bits of the hash index the table).
pub fn queue_of(reta: &[u8; RETA_ENTRIES], hash: u32) -> u8 {
    reta[(hash & 0x7F) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (destination, destination port, source, source port, IPv4 hash,
    /// TCP/IPv4 hash).
    type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);

    /// Microsoft's verification suite, IPv4 part.
    const VECTORS: [Vector; 5] = [
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    #[test]
    fn toeplitz_matches_the_published_verification_vectors() {
        for (dst, dport, src, sport, ip, tcp) in VECTORS {
            assert_eq!(hash_ipv4(&DEFAULT_KEY, src, dst), ip, "{src:?} -> {dst:?}");
            assert_eq!(
                hash_ipv4_tcp(&DEFAULT_KEY, src, dst, sport, dport),
                tcp,
                "{src:?}:{sport}"
            );
        }
    }

    #[test]
    fn reta_spreads_over_the_queues() {
        let reta = default_reta(4);
        assert_eq!(&reta[..6], &[0, 1, 2, 3, 0, 1]);
        assert_eq!(queue_of(&reta, 0xFFFF_FF81), 1);
    }
}
