//! The IPv4 header (RFC 791 §3.1). Options are skipped by the header length
//! (IHL); emit writes a 20-byte header without options.

use super::ip::IpProtocol;
use super::{checksum_of, get_u16, put_u16, sum_verifies, Checksum, Result, WireError};
use oxnet_driver::offload::ones_sum;
use std::net::Ipv4Addr;

/// Byte offsets of the IPv4 header's fields (RFC 791 §3.1).
mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// Don't Fragment, in the flags-and-offset word.
const FLAG_DF: u16 = 0x4000;
/// More Fragments, in the flags-and-offset word.
const FLAG_MF: u16 = 0x2000;
/// The fragment offset, in 8-byte units.
const OFFSET_MASK: u16 = 0x1FFF;

/// A view of an IPv4 packet in a byte buffer.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Checks what the header alone says about itself: version 4, IHL >= 5, and
/// a buffer that holds IHL * 4 bytes. Returns the header length.
fn check_header(buf: &[u8]) -> Result<usize> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::Truncated);
    }
    if buf[field::VER_IHL] >> 4 != 4 {
        return Err(WireError::Malformed("IPv4 version is not 4"));
    }
    let header_len = (buf[field::VER_IHL] & 0x0F) as usize * 4;
    if header_len < HEADER_LEN {
        return Err(WireError::Malformed("IPv4 header length under 5 words"));
    }
    if buf.len() < header_len {
        return Err(WireError::Truncated);
    }
    Ok(header_len)
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// A view of a buffer that holds a whole IPv4 packet (RFC 791 §3.1):
    /// version 4, IHL of at least 5 words, the header in the buffer, and a
    /// total length of at least the header and at most the buffer (a longer
    /// buffer holds link-layer padding, which [`Ipv4Packet::payload`] leaves
    /// out).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let buf = buffer.as_ref();
        let header_len = check_header(buf)?;
        let total_len = get_u16(buf, field::LENGTH) as usize;
        if total_len < header_len {
            return Err(WireError::Malformed("IPv4 total length shorter than its header"));
        }
        if total_len > buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet { buffer })
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 in a checked packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0F) as usize * 4
    }

    /// The DSCP and ECN byte (once the Type of Service).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Total length: header and payload.
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) * 8
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        self.buffer.as_ref()[field::PROTOCOL].into()
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The options, between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header checksum verifies (RFC 791 §3.1: the sum over the
    /// header, options included, with the checksum field in it).
    pub fn verify_checksum(&self) -> bool {
        sum_verifies(ones_sum(&self.buffer.as_ref()[..self.header_len()], 0))
    }

    /// The payload: exactly total length - header length bytes.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length (a multiple of 4, 20 to 60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (header_len / 4) as u8;
    }

    /// Sets the DSCP and ECN byte.
    pub fn set_dscp_ecn(&mut self, value: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = value;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::IDENT, value);
    }

    /// Sets the flags and the fragment offset (in bytes, a multiple of 8;
    /// the reserved flag is written as 0).
    pub fn set_flags_and_frag_offset(&mut self, dont_frag: bool, more_frags: bool, frag_offset: u16) {
        let mut word = (frag_offset / 8) & OFFSET_MASK;
        if dont_frag {
            word |= FLAG_DF;
        }
        if more_frags {
            word |= FLAG_MF;
        }
        put_u16(self.buffer.as_mut(), field::FLG_OFF, word);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Sets the header checksum field as given.
    pub fn set_checksum(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }

    /// Computes and stores the header checksum (RFC 791 §3.1).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = self.header_len();
        let sum = ones_sum(&self.buffer.as_ref()[..header_len], 0);
        self.set_checksum(checksum_of(sum));
    }

    /// The payload, to write into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..self.total_len() as usize;
        &mut self.buffer.as_mut()[range]
    }
}

/// An IPv4 header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length (total length - header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// The DSCP and ECN byte (once the Type of Service).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// The header of a checked packet, with its checksum verified unless
    /// `checksum` says it was already.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, checksum: Checksum) -> Result<Ipv4Repr> {
        if checksum == Checksum::Verify && !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        Ok(Self::from_view(
            packet,
            packet.total_len() as usize - packet.header_len(),
        ))
    }

    /// The header quoted in an ICMP error (RFC 792, RFC 1812 §4.3.2.3): only
    /// the header and a few bytes of its payload are there, so the total
    /// length is not held to the buffer and the checksum is not verified.
    /// Returns the header and its length (options included).
    pub fn parse_quoted(bytes: &[u8]) -> Result<(Ipv4Repr, usize)> {
        let header_len = check_header(bytes)?;
        let packet = Ipv4Packet::new_unchecked(bytes);
        let payload_len = (packet.total_len() as usize).saturating_sub(header_len);
        Ok((Self::from_view(&packet, payload_len), header_len))
    }

    fn from_view<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len,
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        }
    }

    /// Length of the header this emits (no options).
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole packet.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header with its checksum into `packet`.
    /// `payload_len` must fit the 16-bit total length.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version_and_header_len(HEADER_LEN);
        packet.set_dscp_ecn(self.dscp_ecn);
        packet.set_total_len(self.buffer_len() as u16);
        packet.set_ident(self.ident);
        packet.set_flags_and_frag_offset(self.dont_frag, self.more_frags, self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 192.168.0.1 -> 192.168.0.199, UDP, DF, ident 0x1234, TTL 64, 8 bytes
    /// of payload. Checksum by hand: 4500 + 001c + 1234 + 4000 + 4011 +
    /// c0a8 + 0001 + c0a8 + 00c7 = 0x25979, folded 0x597b, complement 0xa684.
    const PACKET: [u8; 28] = [
        0x45, 0x00, 0x00, 0x1c, // version 4, IHL 5, total length 28
        0x12, 0x34, 0x40, 0x00, // ident, DF
        0x40, 0x11, 0xa6, 0x84, // TTL 64, UDP, checksum
        192, 168, 0, 1, //
        192, 168, 0, 199, //
        1, 2, 3, 4, 5, 6, 7, 8,
    ];

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IpProtocol::Udp,
            payload_len: 8,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn parses_known_packet() {
        let packet = Ipv4Packet::new_checked(&PACKET[..]).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&packet, Checksum::Verify).unwrap(), repr());
        assert_eq!(packet.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn emits_known_packet() {
        let mut buf = [0xEEu8; 28];
        let mut packet = Ipv4Packet::new_unchecked(&mut buf[..]);
        repr().emit(&mut packet);
        packet.payload_mut().copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn fragment_fields_round_trip() {
        let frag = Ipv4Repr {
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
            dscp_ecn: 0xB8,
            ..repr()
        };
        let mut buf = [0u8; 28];
        frag.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        // MF | 1480 / 8 = 0x2000 | 185 = 0x20b9.
        assert_eq!(&buf[6..8], &[0x20, 0xb9]);
        let packet = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, Checksum::Verify).unwrap(), frag);
    }

    #[test]
    fn bad_checksum_is_reported_unless_ignored() {
        let mut bad = PACKET;
        bad[11] ^= 1;
        let packet = Ipv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(
            Ipv4Repr::parse(&packet, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
        assert_eq!(Ipv4Repr::parse(&packet, Checksum::Ignore).unwrap(), repr());
    }

    #[test]
    fn options_are_skipped_and_padding_left_out() {
        // IHL 6 with one word of options (four NOPs), 4 bytes of payload,
        // then 2 bytes of Ethernet padding. Sum: 4600 + 001c + 4011 + c0a8
        // + 0001 + c0a8 + 00c7 + 0101 + 0101 = 0x20a47 -> 0x0a49, checksum
        // 0xf5b6.
        let bytes = [
            0x46, 0x00, 0x00, 0x1c, 0, 0, 0, 0, 0x40, 0x11, 0xf5, 0xb6, 192, 168, 0, 1, 192, 168, 0, 199, 1, 1, 1, 1,
            9, 9, 9, 9, 0, 0,
        ];
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.options(), &[1, 1, 1, 1]);
        assert_eq!(packet.payload(), &[9, 9, 9, 9]);
        let repr = Ipv4Repr::parse(&packet, Checksum::Verify).unwrap();
        assert_eq!(repr.payload_len, 4);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..PACKET.len() {
            assert_eq!(
                Ipv4Packet::new_checked(&PACKET[..len]).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
    }

    #[test]
    fn header_fields_are_checked() {
        let mut v6 = PACKET;
        v6[0] = 0x65;
        assert!(matches!(Ipv4Packet::new_checked(&v6[..]), Err(WireError::Malformed(_))));
        let mut short_ihl = PACKET;
        short_ihl[0] = 0x44;
        assert!(matches!(
            Ipv4Packet::new_checked(&short_ihl[..]),
            Err(WireError::Malformed(_))
        ));
        let mut short_total = PACKET;
        short_total[3] = 19;
        assert!(matches!(
            Ipv4Packet::new_checked(&short_total[..]),
            Err(WireError::Malformed(_))
        ));
        let mut long_ihl = PACKET;
        long_ihl[0] = 0x4F; // 60 bytes of header in a 28-byte buffer
        assert_eq!(
            Ipv4Packet::new_checked(&long_ihl[..]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn quoted_header_may_be_cut() {
        // An ICMP error quotes the header and 8 bytes of a 1000-byte packet.
        let mut quoted = PACKET;
        quoted[2..4].copy_from_slice(&1000u16.to_be_bytes());
        assert_eq!(Ipv4Packet::new_checked(&quoted[..]).unwrap_err(), WireError::Truncated);
        let (header, len) = Ipv4Repr::parse_quoted(&quoted).unwrap();
        assert_eq!(len, 20);
        assert_eq!(
            header,
            Ipv4Repr {
                payload_len: 980,
                ..repr()
            }
        );
        assert_eq!(Ipv4Repr::parse_quoted(&quoted[..19]).unwrap_err(), WireError::Truncated);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(packet) = Ipv4Packet::new_checked(&bytes[..]) {
                let _ = Ipv4Repr::parse(&packet, Checksum::Verify);
                prop_assert_eq!(packet.payload().len(), packet.total_len() as usize - packet.header_len());
                let _ = packet.options();
            }
            let _ = Ipv4Repr::parse_quoted(&bytes);
        }

        #[test]
        fn emit_then_parse(ttl: u8, dscp_ecn: u8, ident: u16, df: bool, mf: bool, units in 0u16..0x2000,
                           payload_len in 0usize..64, proto: u8) {
            let repr = Ipv4Repr { ttl, dscp_ecn, ident, dont_frag: df, more_frags: mf, frag_offset: units * 8,
                                  payload_len, protocol: proto.into(), ..repr() };
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let packet = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&packet, Checksum::Verify).unwrap(), repr);
        }
    }
}
