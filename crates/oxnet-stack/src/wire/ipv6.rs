//! The IPv6 header (RFC 8200 §3) and the walk over its extension headers
//! to the upper-layer header (RFC 8200 §4). No reassembly: a Fragment header
//! ends the walk, reported as `Ipv6Frag` with its offset.
//! No jumbograms (RFC 2675): a payload length of 0 is an empty payload.

use super::ip::IpProtocol;
use super::{get_u16, get_u32, put_u16, put_u32, Result, WireError};
use std::net::Ipv6Addr;

/// Byte offsets of the IPv6 header's fields (RFC 8200 §3).
mod field {
    use std::ops::Range;
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers [`Ipv6Packet::upper_layer`] walks over before it
/// calls the chain malformed: RFC 8200 §4.1 recommends at most one of each
/// kind (two Destination Options), so eight is generous and bounds the work
/// a crafted packet can cause.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// A view of an IPv6 packet in a byte buffer.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// A view of a buffer holding version 6, the fixed header and the
    /// payload length it announces (a longer buffer holds link-layer
    /// padding, which [`Ipv6Packet::payload`] leaves out).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let buf = buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if buf[field::VER_TC_FLOW] >> 4 != 6 {
            return Err(WireError::Malformed("IPv6 version is not 6"));
        }
        if HEADER_LEN + get_u16(buf, field::LENGTH) as usize > buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (6 in a checked packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (get_u32(self.buffer.as_ref(), field::VER_TC_FLOW) >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0xF_FFFF
    }

    /// Payload length: everything after the fixed header, extension headers
    /// included.
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// What follows the fixed header.
    pub fn next_header(&self) -> IpProtocol {
        self.buffer.as_ref()[field::NXT_HDR].into()
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let b: [u8; 16] = self.buffer.as_ref()[field::SRC].try_into().unwrap_or([0; 16]);
        Ipv6Addr::from(b)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let b: [u8; 16] = self.buffer.as_ref()[field::DST].try_into().unwrap_or([0; 16]);
        Ipv6Addr::from(b)
    }

    /// The payload: exactly payload length bytes after the fixed header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }

    /// Walks the extension headers (RFC 8200 §4) to the first header that
    /// is not Hop-by-Hop Options, Routing or Destination Options, and
    /// returns its protocol and its offset from the start of the IPv6
    /// header. A Fragment header is returned as `Ipv6Frag` (no reassembly
    /// here). Errors: an extension header running past the payload
    /// (Truncated), Hop-by-Hop anywhere but first (RFC 8200 §4.1), or more
    /// than [`MAX_EXTENSION_HEADERS`] headers (Malformed).
    pub fn upper_layer(&self) -> Result<(IpProtocol, usize)> {
        let buf = self.buffer.as_ref();
        let end = HEADER_LEN + self.payload_len() as usize;
        let mut next = self.next_header();
        let mut offset = HEADER_LEN;
        for _ in 0..MAX_EXTENSION_HEADERS {
            match next {
                IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                    if next == IpProtocol::HopByHop && offset != HEADER_LEN {
                        return Err(WireError::Malformed("IPv6 Hop-by-Hop header not first"));
                    }
                    // Each starts with Next Header and Hdr Ext Len, its
                    // length in 8-octet units not counting the first
                    // (RFC 8200 §4.3, §4.4, §4.6).
                    if offset + 2 > end {
                        return Err(WireError::Truncated);
                    }
                    let len = (buf[offset + 1] as usize + 1) * 8;
                    if offset + len > end {
                        return Err(WireError::Truncated);
                    }
                    next = buf[offset].into();
                    offset += len;
                }
                _ => return Ok((next, offset)),
            }
        }
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                Err(WireError::Malformed("IPv6 extension header chain too long"))
            }
            _ => Ok((next, offset)),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, the traffic class and the flow label (20 bits).
    pub fn set_version_class_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let word = (6 << 28) | (traffic_class as u32) << 20 | (flow_label & 0xF_FFFF);
        put_u32(self.buffer.as_mut(), field::VER_TC_FLOW, word);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }

    /// The payload, to write into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// What follows the fixed header.
    pub next_header: IpProtocol,
    /// Payload length (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// The fixed header of a checked packet (there is no checksum).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        Ok(Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len() as usize,
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// The header quoted in an ICMPv6 error (RFC 4443 §3): the payload may
    /// be cut, so the payload length is not held to the buffer.
    pub fn parse_quoted(bytes: &[u8]) -> Result<Ipv6Repr> {
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if bytes[field::VER_TC_FLOW] >> 4 != 6 {
            return Err(WireError::Malformed("IPv6 version is not 6"));
        }
        Self::parse(&Ipv6Packet::new_unchecked(bytes))
    }

    /// Length of the header this emits.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole packet.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header into `packet`. `payload_len` must fit 16
    /// bits (no jumbograms).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_version_class_flow(self.traffic_class, self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// fe80::1 -> ff02::1, traffic class 0xb8, flow label 0x12345, hop
    /// limit 1, a Hop-by-Hop header (next: ICMPv6, length 0 = 8 bytes, one
    /// PadN option of 4 bytes) and 4 bytes of ICMPv6, then 2 bytes of
    /// Ethernet padding.
    const PACKET: [u8; 54] = [
        0x6b, 0x81, 0x23, 0x45, // version 6, class 0xb8, flow 0x12345
        0x00, 0x0c, 0x00, 0x01, // payload 12, Hop-by-Hop, hop limit 1
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        58, 0, 1, 4, 0, 0, 0, 0, // Hop-by-Hop: ICMPv6 next, PadN
        0x80, 0, 0xaa, 0xbb, // ICMPv6 bytes
        0, 0, // padding
    ];

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src: "fe80::1".parse().unwrap(),
            dst: "ff02::1".parse().unwrap(),
            next_header: IpProtocol::HopByHop,
            payload_len: 12,
            hop_limit: 1,
            traffic_class: 0xb8,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn parses_known_packet() {
        let packet = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&packet).unwrap(), repr());
        assert_eq!(packet.payload().len(), 12);
        assert_eq!(packet.upper_layer().unwrap(), (IpProtocol::Icmpv6, 48));
    }

    #[test]
    fn emits_known_header() {
        let mut buf = [0xEEu8; 54];
        let mut packet = Ipv6Packet::new_unchecked(&mut buf[..]);
        repr().emit(&mut packet);
        packet.payload_mut().copy_from_slice(&PACKET[40..52]);
        assert_eq!(buf[..52], PACKET[..52]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..52 {
            assert_eq!(
                Ipv6Packet::new_checked(&PACKET[..len]).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
    }

    #[test]
    fn version_is_checked() {
        let mut v4 = PACKET;
        v4[0] = 0x4b;
        assert!(matches!(Ipv6Packet::new_checked(&v4[..]), Err(WireError::Malformed(_))));
        assert!(matches!(Ipv6Repr::parse_quoted(&v4), Err(WireError::Malformed(_))));
    }

    /// An IPv6 packet whose payload is `payload`, starting with `next`.
    fn with_payload(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; HEADER_LEN + payload.len()];
        Ipv6Repr {
            next_header: next.into(),
            payload_len: payload.len(),
            ..repr()
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        buf[HEADER_LEN..].copy_from_slice(payload);
        buf
    }

    #[test]
    fn walks_to_tcp_through_destination_options_and_routing() {
        // Destination Options (next: Routing, 16 bytes), Routing (next:
        // TCP, 8 bytes), then TCP at 40 + 24.
        let mut payload = vec![43, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        payload.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
        payload.extend_from_slice(&[0; 20]);
        let buf = with_payload(60, &payload);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap(), (IpProtocol::Tcp, 64));
    }

    #[test]
    fn fragment_header_ends_the_walk() {
        let buf = with_payload(44, &[17, 0, 0, 1, 0, 0, 0, 7]);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap(), (IpProtocol::Ipv6Frag, 40));
    }

    #[test]
    fn no_next_header_and_empty_payload() {
        let buf = with_payload(59, &[]);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap(), (IpProtocol::Ipv6NoNxt, 40));
    }

    #[test]
    fn bad_chains_are_errors() {
        // Hop-by-Hop after Destination Options.
        let buf = with_payload(60, &[0, 0, 1, 4, 0, 0, 0, 0, 58, 0, 1, 4, 0, 0, 0, 0]);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert!(matches!(packet.upper_layer(), Err(WireError::Malformed(_))));

        // An extension header longer than the payload.
        let buf = with_payload(60, &[6, 1, 0, 0, 0, 0, 0, 0]);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap_err(), WireError::Truncated);

        // Only one byte of an extension header.
        let buf = with_payload(60, &[6]);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap_err(), WireError::Truncated);

        // Nine Destination Options headers.
        let mut payload = Vec::new();
        for _ in 0..9 {
            payload.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        let buf = with_payload(60, &payload);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert!(matches!(packet.upper_layer(), Err(WireError::Malformed(_))));

        // Eight of them then UDP is fine.
        let mut payload = Vec::new();
        for i in 0..8 {
            payload.extend_from_slice(&[if i == 7 { 17 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let buf = with_payload(60, &payload);
        let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.upper_layer().unwrap(), (IpProtocol::Udp, 40 + 64));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(packet) = Ipv6Packet::new_checked(&bytes[..]) {
                let _ = Ipv6Repr::parse(&packet);
                if let Ok((_, offset)) = packet.upper_layer() {
                    prop_assert!(offset <= HEADER_LEN + packet.payload_len() as usize);
                }
            }
            let _ = Ipv6Repr::parse_quoted(&bytes);
        }

        #[test]
        fn random_extension_chains_never_panic(next in 0u8..64, payload in proptest::collection::vec(0u8..64, 0..80)) {
            let buf = with_payload(next, &payload);
            let packet = Ipv6Packet::new_checked(&buf[..]).unwrap();
            if let Ok((_, offset)) = packet.upper_layer() {
                prop_assert!(offset <= buf.len());
            }
        }

        #[test]
        fn emit_then_parse(class: u8, flow in 0u32..0x10_0000, hop: u8, next: u8, payload_len in 0usize..32) {
            let repr = Ipv6Repr { traffic_class: class, flow_label: flow, hop_limit: hop, next_header: next.into(),
                                  payload_len, ..repr() };
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()).unwrap(), repr);
        }
    }
}
