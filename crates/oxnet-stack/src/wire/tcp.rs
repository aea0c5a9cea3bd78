//! The TCP header (RFC 9293 §3.1), its flags, its options
//! ([`options`]) and sequence-number arithmetic ([`seq_number`]), and the
//! checksum over the IPv4 or IPv6 pseudo-header.

pub mod options;
pub mod seq_number;

pub use options::{SackBlock, TcpOptions, MAX_OPTIONS_LEN, MAX_SACK_BLOCKS, MAX_WINDOW_SHIFT};
pub use seq_number::TcpSeqNumber;

use super::ip::{pseudo_header_sum, IpAddress, IpProtocol};
use super::{checksum_of, get_u16, get_u32, put_u16, put_u32, sum_verifies, Checksum, Result, WireError};
use oxnet_driver::offload::ones_sum;
use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// Byte offsets of the TCP header's fields (RFC 9293 §3.1).
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ_NUM: usize = 4;
    pub const ACK_NUM: usize = 8;
    /// Data offset in the high 4 bits; the low 4 are reserved (the last of
    /// them once the ECN nonce, NS, RFC 3540, now historic: ignored).
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;

/// The control bits of a header (RFC 9293 §3.1, RFC 3168 §6.1 for ECE and
/// CWR): a hand-written set of flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u8);

impl TcpFlags {
    /// No more data from the sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// The acknowledgment number is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// The urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// No flag.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// The flags of a header's flag byte.
    pub const fn from_bits(bits: u8) -> TcpFlags {
        TcpFlags(bits)
    }

    /// The flag byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// These flags without those of `other`.
    pub const fn without(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !other.0)
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;

    fn bitor(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | other.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }
}

impl fmt::Debug for TcpFlags {
    /// The names of the flags set, as `SYN|ACK`, or `-` for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        if self.is_empty() {
            return write!(f, "-");
        }
        let mut first = true;
        for (bit, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                write!(f, "{}{name}", if first { "" } else { "|" })?;
                first = false;
            }
        }
        Ok(())
    }
}

/// A view of a TCP segment in a byte buffer: the header and everything
/// after it is the payload (give it exactly the IP payload).
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// A view of a buffer holding the fixed header and a data offset of at
    /// least 5 words that lies within the buffer (RFC 9293 §3.1).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let buf = buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let packet = TcpPacket { buffer };
        let header_len = packet.header_len();
        if header_len < HEADER_LEN {
            return Err(WireError::Malformed("TCP data offset under 5 words"));
        }
        if header_len > packet.buffer.as_ref().len() {
            return Err(WireError::Truncated);
        }
        Ok(packet)
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(get_u32(self.buffer.as_ref(), field::SEQ_NUM))
    }

    /// Acknowledgment number (meaningful only with ACK).
    pub fn ack_number(&self) -> TcpSeqNumber {
        TcpSeqNumber(get_u32(self.buffer.as_ref(), field::ACK_NUM))
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::DATA_OFFSET] >> 4) as usize * 4
    }

    /// The control bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window (unscaled).
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer (meaningful only with URG).
    pub fn urgent_at(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// The options area, between the fixed header and the data.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The data.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// The length the segment takes in sequence space: the data, plus one
    /// for SYN and one for FIN (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        let flags = self.flags();
        self.payload().len() + flags.contains(TcpFlags::SYN) as usize + flags.contains(TcpFlags::FIN) as usize
    }

    /// Whether the checksum over the pseudo-header and the whole buffer
    /// verifies (RFC 9293 §3.1).
    pub fn verify_checksum(&self, src: &IpAddress, dst: &IpAddress) -> bool {
        let buf = self.buffer.as_ref();
        let sum = pseudo_header_sum(src, dst, IpProtocol::Tcp, buf.len() as u32);
        sum_verifies(ones_sum(buf, sum))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, value: TcpSeqNumber) {
        put_u32(self.buffer.as_mut(), field::SEQ_NUM, value.0);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, value: TcpSeqNumber) {
        put_u32(self.buffer.as_mut(), field::ACK_NUM, value.0);
    }

    /// Sets the header length (a multiple of 4, 20 to 60); the reserved
    /// bits are written as 0.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8) << 4;
    }

    /// Sets the control bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.bits();
    }

    /// Sets the window.
    pub fn set_window_len(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::WINDOW, value);
    }

    /// Sets the checksum field as given.
    pub fn set_checksum(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::URGENT, value);
    }

    /// The options area, to write into (the header length set first).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The data, to write into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes and stores the checksum over the pseudo-header and the
    /// whole buffer.
    pub fn fill_checksum(&mut self, src: &IpAddress, dst: &IpAddress) {
        self.set_checksum(0);
        let buf = self.buffer.as_ref();
        let sum = pseudo_header_sum(src, dst, IpProtocol::Tcp, buf.len() as u32);
        let checksum = checksum_of(ones_sum(buf, sum));
        self.set_checksum(checksum);
    }
}

/// A TCP header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: TcpSeqNumber,
    /// Acknowledgment number: `Some` exactly when the ACK flag is set.
    pub ack: Option<TcpSeqNumber>,
    /// Control bits other than ACK (which `ack` carries).
    pub flags: TcpFlags,
    /// Window (unscaled).
    pub window: u16,
    /// Urgent pointer, as sent.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
    /// Length of the data.
    pub payload_len: usize,
}

impl TcpRepr {
    /// The header of a checked segment sent from `src` to `dst`: the
    /// checksum verified unless `checksum` says it was already, and the
    /// options parsed ([`TcpOptions::parse`]).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &TcpPacket<T>,
        src: &IpAddress,
        dst: &IpAddress,
        checksum: Checksum,
    ) -> Result<TcpRepr> {
        if checksum == Checksum::Verify && !packet.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        let flags = packet.flags();
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number(),
            ack: flags.contains(TcpFlags::ACK).then(|| packet.ack_number()),
            flags: flags.without(TcpFlags::ACK),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            options: TcpOptions::parse(packet.options())?,
            payload_len: packet.payload().len(),
        })
    }

    /// Length of the header this emits: 20 bytes and the options (which
    /// [`TcpOptions::emit`] keeps a multiple of 4).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Length of header and data.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// The length the segment takes in sequence space: the data, plus one
    /// for SYN and one for FIN (RFC 9293 §3.4).
    pub fn segment_len(&self) -> usize {
        self.payload_len + self.flags.contains(TcpFlags::SYN) as usize + self.flags.contains(TcpFlags::FIN) as usize
    }

    /// Writes the header and options into `packet` and the checksum over
    /// the pseudo-header, the header and the data, which must already be
    /// in place at `header_len()`. The view's buffer must be exactly
    /// `buffer_len()` bytes long: the checksum covers all of it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>, src: &IpAddress, dst: &IpAddress) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq);
        packet.set_ack_number(self.ack.unwrap_or_default());
        packet.set_header_len(self.header_len());
        let mut flags = self.flags.without(TcpFlags::ACK);
        if self.ack.is_some() {
            flags.insert(TcpFlags::ACK);
        }
        packet.set_flags(flags);
        packet.set_window_len(self.window);
        packet.set_urgent_at(self.urgent);
        self.options.emit(packet.options_mut());
        packet.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4() -> (IpAddress, IpAddress) {
        (Ipv4Addr::new(10, 0, 0, 1).into(), Ipv4Addr::new(10, 0, 0, 2).into())
    }

    fn v6() -> (IpAddress, IpAddress) {
        (
            "fe80::1".parse::<Ipv6Addr>().unwrap().into(),
            "fe80::2".parse::<Ipv6Addr>().unwrap().into(),
        )
    }

    /// A SYN from 10.0.0.1:12345 to 10.0.0.2:80, seq 0x01020304, window
    /// 65535, Linux's options (MSS 1460, SACK-permitted, Timestamps 100/0,
    /// NOP, Window Scale 7). Checksum by hand: pseudo-header 0a00 + 0001 +
    /// 0a00 + 0002 + 0006 + 0028 = 0x1431; header 3039 + 0050 + 0102 +
    /// 0304 + a002 + ffff = 0x1d490; options 0204 + 05b4 + 0402 + 080a +
    /// 0064 + 0103 + 0307 = 0x1832; total 0x200f3, folded 0x00f5,
    /// complement 0xff0a.
    const SYN: [u8; 40] = [
        0x30, 0x39, 0x00, 0x50, // ports
        0x01, 0x02, 0x03, 0x04, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xff, 0xff, // data offset 10, SYN, window
        0xff, 0x0a, 0x00, 0x00, // checksum, urgent
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 100, 0, 0, 0, 0, 1, 3, 3, 7,
    ];

    fn syn() -> TcpRepr {
        TcpRepr {
            src_port: 12345,
            dst_port: 80,
            seq: TcpSeqNumber(0x01020304),
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
        }
    }

    /// fe80::1:80 -> fe80::2:1024, seq 1, ack 2, PSH|ACK, window 0x1000,
    /// data "hi". Checksum by hand: pseudo-header fe80 + 1 + fe80 + 2 +
    /// 0016 + 0006 = 0x1fd1f; segment 0050 + 0400 + 0001 + 0002 + 5018 +
    /// 1000 + 6869 = 0xccd4; total 0x2c9f3, folded 0xc9f5, complement 0x360a.
    const DATA_V6: [u8; 22] = [
        0x00, 0x50, 0x04, 0x00, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x18, 0x10, 0x00, 0x36, 0x0a, 0, 0, b'h', b'i',
    ];

    fn data_v6() -> TcpRepr {
        TcpRepr {
            src_port: 80,
            dst_port: 1024,
            seq: TcpSeqNumber(1),
            ack: Some(TcpSeqNumber(2)),
            flags: TcpFlags::PSH,
            window: 0x1000,
            urgent: 0,
            options: TcpOptions::default(),
            payload_len: 2,
        }
    }

    #[test]
    fn parses_known_syn() {
        let (s, d) = v4();
        let packet = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(packet.header_len(), 40);
        assert_eq!(packet.segment_len(), 1);
        assert_eq!(TcpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), syn());
    }

    #[test]
    fn emits_known_syn() {
        let (s, d) = v4();
        assert_eq!(syn().header_len(), 40);
        let mut buf = [0xEEu8; 40];
        syn().emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &s, &d);
        assert_eq!(buf, SYN);
    }

    #[test]
    fn parses_and_emits_known_ipv6_data() {
        let (s, d) = v6();
        let packet = TcpPacket::new_checked(&DATA_V6[..]).unwrap();
        assert_eq!(packet.payload(), b"hi");
        assert_eq!(TcpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), data_v6());
        let mut buf = [0u8; 22];
        buf[20..].copy_from_slice(b"hi");
        data_v6().emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &s, &d);
        assert_eq!(buf, DATA_V6);
    }

    #[test]
    fn bad_checksum_is_reported_unless_ignored() {
        let (s, d) = v6();
        let mut bad = DATA_V6;
        bad[21] = b'o';
        let packet = TcpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(
            TcpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
        assert!(TcpRepr::parse(&packet, &s, &d, Checksum::Ignore).is_ok());
        // The IPv6 segment checked against IPv4 addresses.
        let (s4, d4) = v4();
        let packet = TcpPacket::new_checked(&DATA_V6[..]).unwrap();
        assert_eq!(
            TcpRepr::parse(&packet, &s4, &d4, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
    }

    #[test]
    fn ack_number_only_with_ack_flag() {
        // Without ACK the acknowledgment field is ignored, and emit writes 0.
        let mut no_ack = SYN;
        no_ack[8..12].copy_from_slice(&[9, 9, 9, 9]);
        let packet = TcpPacket::new_checked(&no_ack[..]).unwrap();
        let (s, d) = v4();
        assert_eq!(TcpRepr::parse(&packet, &s, &d, Checksum::Ignore).unwrap().ack, None);
        // ACK in `flags` is not what decides: `ack` is.
        let repr = TcpRepr {
            flags: TcpFlags::SYN | TcpFlags::ACK,
            ..syn()
        };
        let mut buf = [0u8; 40];
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &s, &d);
        assert_eq!(buf[13], 0x02);
    }

    #[test]
    fn ns_bit_is_ignored() {
        let mut ns = DATA_V6;
        ns[12] |= 0x01;
        let packet = TcpPacket::new_checked(&ns[..]).unwrap();
        assert_eq!(packet.header_len(), 20);
        let (s, d) = v6();
        // The checksum no longer verifies (the byte changed); the fields do.
        assert_eq!(TcpRepr::parse(&packet, &s, &d, Checksum::Ignore).unwrap(), data_v6());
    }

    #[test]
    fn every_truncation_is_an_error() {
        // Up to the end of the options: the header is cut.
        for len in 0..SYN.len() {
            assert_eq!(
                TcpPacket::new_checked(&SYN[..len]).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
        // Cut data still gives a view, but no longer the checksum.
        let (s, d) = v6();
        for len in 20..DATA_V6.len() {
            let packet = TcpPacket::new_checked(&DATA_V6[..len]).unwrap();
            assert_eq!(
                TcpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap_err(),
                WireError::BadChecksum
            );
        }
    }

    #[test]
    fn data_offset_is_checked() {
        let mut short = DATA_V6;
        short[12] = 0x40;
        assert!(matches!(
            TcpPacket::new_checked(&short[..]),
            Err(WireError::Malformed(_))
        ));
        let mut long = DATA_V6;
        long[12] = 0x60; // 24 bytes of header in 22
        assert_eq!(TcpPacket::new_checked(&long[..]).unwrap_err(), WireError::Truncated);
    }

    #[test]
    fn malformed_options_fail_the_parse() {
        // Options area of 4 bytes: an unknown kind whose length runs past it.
        let mut buf = [0u8; 24];
        buf[12] = 0x60;
        buf[20..].copy_from_slice(&[99, 8, 0, 0]);
        let packet = TcpPacket::new_checked(&buf[..]).unwrap();
        let (s, d) = v4();
        assert!(matches!(
            TcpRepr::parse(&packet, &s, &d, Checksum::Ignore),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn flags_debug_and_sets() {
        assert_eq!(format!("{:?}", TcpFlags::SYN | TcpFlags::ACK), "SYN|ACK");
        assert_eq!(format!("{:?}", TcpFlags::empty()), "-");
        let mut f = TcpFlags::FIN | TcpFlags::PSH;
        f.remove(TcpFlags::FIN);
        f |= TcpFlags::CWR;
        assert_eq!(f.bits(), 0x88);
        assert!(f.contains(TcpFlags::PSH) && !f.contains(TcpFlags::FIN));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let (s, d) = v4();
            if let Ok(packet) = TcpPacket::new_checked(&bytes[..]) {
                let _ = packet.payload();
                let _ = TcpRepr::parse(&packet, &s, &d, Checksum::Verify);
                if let Ok(repr) = TcpRepr::parse(&packet, &s, &d, Checksum::Ignore) {
                    prop_assert_eq!(repr.payload_len + packet.header_len(), bytes.len());
                }
            }
        }

        #[test]
        fn emit_then_parse(src_port: u16, dst_port: u16, seq: u32, ack in proptest::option::of(any::<u32>()),
                           flags: u8, window: u16, urgent: u16, mss in proptest::option::of(any::<u16>()),
                           ts in proptest::option::of((any::<u32>(), any::<u32>())),
                           payload in proptest::collection::vec(any::<u8>(), 0..30), ipv6: bool) {
            let (s, d) = if ipv6 { v6() } else { v4() };
            let repr = TcpRepr {
                src_port, dst_port, seq: TcpSeqNumber(seq), ack: ack.map(TcpSeqNumber),
                flags: TcpFlags::from_bits(flags).without(TcpFlags::ACK), window, urgent,
                options: TcpOptions { mss, timestamps: ts, ..Default::default() }, payload_len: payload.len(),
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            buf[repr.header_len()..].copy_from_slice(&payload);
            repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &s, &d);
            let packet = TcpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(packet.payload(), &payload[..]);
            prop_assert_eq!(TcpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), repr);
        }
    }
}
