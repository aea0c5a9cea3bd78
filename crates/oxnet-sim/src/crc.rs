//! The Ethernet frame check sequence: CRC-32 of IEEE 802.3 §3.2.9.
//!
//! Polynomial 0x04C11DB7, processed least significant bit first (so the
//! table uses the reflected constant 0xEDB88320), initial value all ones,
//! result inverted. On the wire the FCS follows the data least significant
//! byte first, so `crc32(data).to_le_bytes()` is what gets appended.

/// One table entry per byte value: the CRC of that byte alone (before the
/// final inversion). Built at compile time.
const TABLE: [u32; 256] = build_table();

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
}

/// CRC-32 (IEEE 802.3) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc = (crc >> 8) ^ TABLE[((crc ^ byte as u32) & 0xFF) as usize];
    }
    !crc
}

/// Appends the 4-byte FCS of `frame` to it.
pub fn append_fcs(frame: &mut Vec<u8>) {
    let fcs = crc32(frame);
    frame.extend_from_slice(&fcs.to_le_bytes());
}

/// True if the last 4 bytes of `frame` are the FCS of the bytes before them.
pub fn fcs_is_good(frame: &[u8]) -> bool {
    if frame.len() < 4 {
        return false;
    }
    let (data, fcs) = frame.split_at(frame.len() - 4);
    crc32(data).to_le_bytes() == fcs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_value() {
        // The "check" value of CRC-32/ISO-HDLC (the Ethernet CRC).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn appended_fcs_verifies_and_a_flipped_bit_does_not() {
        let mut frame = b"a frame of some bytes".to_vec();
        append_fcs(&mut frame);
        assert!(fcs_is_good(&frame));
        frame[3] ^= 0x10;
        assert!(!fcs_is_good(&frame));
        assert!(!fcs_is_good(&[1, 2, 3]));
    }
}
