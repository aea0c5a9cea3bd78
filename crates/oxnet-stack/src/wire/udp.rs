//! The UDP header (RFC 768) and its checksum over the IPv4 or IPv6
//! pseudo-header (RFC 768, RFC 8200 §8.1).

use super::ip::{pseudo_header_sum, IpAddress, IpProtocol};
use super::{checksum_of, get_u16, put_u16, sum_verifies, Checksum, Result, WireError};
use oxnet_driver::offload::ones_sum;

/// Byte offsets of the UDP header's fields (RFC 768, "Format").
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram in a byte buffer.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// A view of a buffer holding the header and a length field of at
    /// least the header and at most the buffer.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let buf = buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = get_u16(buf, field::LENGTH) as usize;
        if len < HEADER_LEN {
            return Err(WireError::Malformed("UDP length shorter than its header"));
        }
        if len > buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(UdpPacket { buffer })
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

    /// Length of header and payload.
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the datagram has no payload.
    pub fn is_empty(&self) -> bool {
        self.len() as usize == HEADER_LEN
    }

    /// Checksum as stored (0: none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload: length - 8 bytes.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }

    /// Whether the checksum over the pseudo-header and the datagram
    /// verifies. A zero checksum is not special here: see
    /// [`UdpRepr::parse`].
    pub fn verify_checksum(&self, src: &IpAddress, dst: &IpAddress) -> bool {
        let len = self.len() as usize;
        let sum = pseudo_header_sum(src, dst, IpProtocol::Udp, len as u32);
        sum_verifies(ones_sum(&self.buffer.as_ref()[..len], sum))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the length.
    pub fn set_len(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the checksum field as given.
    pub fn set_checksum(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes and stores the checksum over the pseudo-header and the
    /// first `len()` bytes; a computed 0 is sent as 0xFFFF, since 0 means
    /// "no checksum" (RFC 768).
    pub fn fill_checksum(&mut self, src: &IpAddress, dst: &IpAddress) {
        self.set_checksum(0);
        let len = self.len() as usize;
        let sum = pseudo_header_sum(src, dst, IpProtocol::Udp, len as u32);
        let checksum = match checksum_of(ones_sum(&self.buffer.as_ref()[..len], sum)) {
            0 => 0xFFFF,
            c => c,
        };
        self.set_checksum(checksum);
    }

    /// The payload, to write into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }
}

/// A UDP header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length.
    pub payload_len: usize,
}

impl UdpRepr {
    /// The header of a checked datagram sent from `src` to `dst`. The
    /// checksum is verified unless `checksum` says it was already; a zero
    /// checksum means "none" over IPv4 (RFC 768) and is an error over IPv6
    /// (RFC 8200 §8.1).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: &IpAddress,
        dst: &IpAddress,
        checksum: Checksum,
    ) -> Result<UdpRepr> {
        if checksum == Checksum::Verify {
            match (packet.checksum(), src) {
                (0, IpAddress::V4(_)) => {}
                (0, IpAddress::V6(_)) => return Err(WireError::Malformed("UDP checksum zero over IPv6")),
                _ if !packet.verify_checksum(src, dst) => return Err(WireError::BadChecksum),
                _ => {}
            }
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.len() as usize - HEADER_LEN,
        })
    }

    /// Length of the header.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of header and payload.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header into `packet` and the checksum over the
    /// pseudo-header, the header and the payload, which must already be in
    /// place. `buffer_len()` must fit 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>, src: &IpAddress, dst: &IpAddress) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.buffer_len() as u16);
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

    /// 1024 -> 53, payload "abcd", from 10.0.0.1 to 10.0.0.2. Checksum by
    /// hand: pseudo-header 0a00 + 0001 + 0a00 + 0002 + 0011 + 000c = 0x1420;
    /// datagram 0400 + 0035 + 000c + 6162 + 6364 = 0xc907; total 0xdd27,
    /// complement 0x22d8.
    const OVER_V4: [u8; 12] = [0x04, 0x00, 0x00, 0x35, 0x00, 0x0c, 0x22, 0xd8, b'a', b'b', b'c', b'd'];

    /// The same datagram from fe80::1 to fe80::2: pseudo-header fe80 + 1 +
    /// fe80 + 2 + 000c + 0011 = 0x1fd20; with 0xc907, 0x2c627, folded
    /// 0xc629, complement 0x39d6.
    const OVER_V6: [u8; 12] = [0x04, 0x00, 0x00, 0x35, 0x00, 0x0c, 0x39, 0xd6, b'a', b'b', b'c', b'd'];

    const REPR: UdpRepr = UdpRepr {
        src_port: 1024,
        dst_port: 53,
        payload_len: 4,
    };

    #[test]
    fn parses_known_datagrams() {
        let (s, d) = v4();
        let packet = UdpPacket::new_checked(&OVER_V4[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), REPR);
        assert_eq!(packet.payload(), b"abcd");
        let (s, d) = v6();
        let packet = UdpPacket::new_checked(&OVER_V6[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), REPR);
    }

    #[test]
    fn emits_known_datagrams() {
        for (addrs, expected) in [(v4(), OVER_V4), (v6(), OVER_V6)] {
            let mut buf = [0u8; 12];
            buf[8..].copy_from_slice(b"abcd");
            REPR.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &addrs.0, &addrs.1);
            assert_eq!(buf, expected);
        }
    }

    #[test]
    fn bad_checksum_is_reported_unless_ignored() {
        let (s, d) = v4();
        let mut bad = OVER_V4;
        bad[11] ^= 0x20;
        let packet = UdpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
        assert_eq!(UdpRepr::parse(&packet, &s, &d, Checksum::Ignore).unwrap(), REPR);
        // The right checksum from the wrong source.
        let packet = UdpPacket::new_checked(&OVER_V4[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&packet, &d, &d, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
    }

    #[test]
    fn zero_checksum_is_none_over_ipv4_only() {
        let mut none = OVER_V4;
        none[6..8].copy_from_slice(&[0, 0]);
        let packet = UdpPacket::new_checked(&none[..]).unwrap();
        let (s, d) = v4();
        assert_eq!(UdpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), REPR);
        let (s, d) = v6();
        assert!(matches!(
            UdpRepr::parse(&packet, &s, &d, Checksum::Verify),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Ports 0 and 0, from and to 0.0.0.0, 2 bytes of payload: the sum
        // is 0x0011 + 0x000a (pseudo-header) + 0x000a (length) = 0x0025
        // without the payload; a payload word of 0xffda brings it to
        // 0xffff, whose complement is 0.
        let zero = IpAddress::V4(Ipv4Addr::UNSPECIFIED);
        let mut buf = [0u8; 10];
        buf[8..].copy_from_slice(&[0xff, 0xda]);
        let repr = UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload_len: 2,
        };
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &zero, &zero);
        assert_eq!(&buf[6..8], &[0xff, 0xff]);
        let packet = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(packet.verify_checksum(&zero, &zero));
    }

    #[test]
    fn lengths_are_checked() {
        for len in 0..OVER_V4.len() {
            assert_eq!(
                UdpPacket::new_checked(&OVER_V4[..len]).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
        let mut short = OVER_V4;
        short[5] = 7;
        assert!(matches!(
            UdpPacket::new_checked(&short[..]),
            Err(WireError::Malformed(_))
        ));
        // Trailing bytes past the length (link padding) are not payload.
        let mut padded = OVER_V4.to_vec();
        padded.extend_from_slice(&[0, 0]);
        let packet = UdpPacket::new_checked(&padded[..]).unwrap();
        assert_eq!(packet.payload(), b"abcd");
        let (s, d) = v4();
        assert!(UdpRepr::parse(&packet, &s, &d, Checksum::Verify).is_ok());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let (s4, d4) = v4();
            let (s6, d6) = v6();
            if let Ok(packet) = UdpPacket::new_checked(&bytes[..]) {
                let _ = UdpRepr::parse(&packet, &s4, &d4, Checksum::Verify);
                let _ = UdpRepr::parse(&packet, &s6, &d6, Checksum::Verify);
                let _ = packet.payload();
            }
        }

        #[test]
        fn emit_then_parse(src_port: u16, dst_port: u16, payload in proptest::collection::vec(any::<u8>(), 0..40),
                           ipv6: bool) {
            let (s, d) = if ipv6 { v6() } else { v4() };
            let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() };
            let mut buf = vec![0u8; repr.buffer_len()];
            buf[HEADER_LEN..].copy_from_slice(&payload);
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), &s, &d);
            let packet = UdpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_ne!(packet.checksum(), 0);
            prop_assert_eq!(UdpRepr::parse(&packet, &s, &d, Checksum::Verify).unwrap(), repr);
        }
    }
}
