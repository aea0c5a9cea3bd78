//! ARP (RFC 826) for Ethernet hardware addresses and IPv4 protocol
//! addresses, the only pair the stack resolves. The view reads any hardware
//! and protocol address lengths; the representation rejects other types as
//! unsupported.

use super::ethernet::EthernetAddress;
use super::{get_u16, put_u16, Result, WireError};
use std::net::Ipv4Addr;

/// Byte offsets of the fixed part of the ARP header (RFC 826, "Packet
/// format"); the four addresses follow, their lengths given by HLEN and PLEN.
mod field {
    use std::ops::Range;
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const FIXED: usize = 8;

    /// Sender hardware address.
    pub fn sha(hlen: u8, _plen: u8) -> Range<usize> {
        FIXED..FIXED + hlen as usize
    }
    /// Sender protocol address.
    pub fn spa(hlen: u8, plen: u8) -> Range<usize> {
        let at = sha(hlen, plen).end;
        at..at + plen as usize
    }
    /// Target hardware address.
    pub fn tha(hlen: u8, plen: u8) -> Range<usize> {
        let at = spa(hlen, plen).end;
        at..at + hlen as usize
    }
    /// Target protocol address.
    pub fn tpa(hlen: u8, plen: u8) -> Range<usize> {
        let at = tha(hlen, plen).end;
        at..at + plen as usize
    }
}

/// Hardware type of Ethernet (RFC 826; IANA "Hardware Types").
const HTYPE_ETHERNET: u16 = 1;
/// Protocol type of IPv4 (its EtherType).
const PTYPE_IPV4: u16 = 0x0800;

/// Length of an ARP packet for Ethernet and IPv4.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// The ARP operation (opcode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1: who has the target protocol address?
    Request,
    /// 2: the sender has the sender protocol address.
    Reply,
    /// Any other opcode (RARP and others).
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(value: ArpOperation) -> Self {
        match value {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

/// A view of an ARP packet in a byte buffer.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// A view of a buffer holding the fixed part and all four addresses of
    /// the lengths that HLEN and PLEN give.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = ArpPacket { buffer };
        let len = packet.buffer.as_ref().len();
        if len < field::FIXED || len < field::tpa(packet.hlen(), packet.plen()).end {
            return Err(WireError::Truncated);
        }
        Ok(packet)
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 for Ethernet).
    pub fn htype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (0x0800 for IPv4).
    pub fn ptype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PTYPE)
    }

    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn plen(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        get_u16(self.buffer.as_ref(), field::OPER).into()
    }

    /// Sender hardware address bytes.
    pub fn sender_hw(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hlen(), self.plen())]
    }

    /// Sender protocol address bytes.
    pub fn sender_proto(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hlen(), self.plen())]
    }

    /// Target hardware address bytes.
    pub fn target_hw(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hlen(), self.plen())]
    }

    /// Target protocol address bytes.
    pub fn target_proto(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hlen(), self.plen())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_htype(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::HTYPE, value);
    }

    /// Sets the protocol type.
    pub fn set_ptype(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::PTYPE, value);
    }

    /// Sets the hardware address length.
    pub fn set_hlen(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length.
    pub fn set_plen(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOperation) {
        put_u16(self.buffer.as_mut(), field::OPER, op.into());
    }

    /// Sets the sender hardware address (HLEN bytes).
    pub fn set_sender_hw(&mut self, addr: &[u8]) {
        let range = field::sha(self.hlen(), self.plen());
        self.buffer.as_mut()[range].copy_from_slice(addr);
    }

    /// Sets the sender protocol address (PLEN bytes).
    pub fn set_sender_proto(&mut self, addr: &[u8]) {
        let range = field::spa(self.hlen(), self.plen());
        self.buffer.as_mut()[range].copy_from_slice(addr);
    }

    /// Sets the target hardware address (HLEN bytes).
    pub fn set_target_hw(&mut self, addr: &[u8]) {
        let range = field::tha(self.hlen(), self.plen());
        self.buffer.as_mut()[range].copy_from_slice(addr);
    }

    /// Sets the target protocol address (PLEN bytes).
    pub fn set_target_proto(&mut self, addr: &[u8]) {
        let range = field::tpa(self.hlen(), self.plen());
        self.buffer.as_mut()[range].copy_from_slice(addr);
    }
}

/// An ARP packet for Ethernet and IPv4, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    /// Request or reply (never `Unknown`: parse rejects it).
    pub op: ArpOperation,
    /// Sender MAC address.
    pub sender_hw: EthernetAddress,
    /// Sender IPv4 address.
    pub sender_ip: Ipv4Addr,
    /// Target MAC address (zero in a request, by convention).
    pub target_hw: EthernetAddress,
    /// Target IPv4 address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// The request or reply in a checked packet; other hardware or protocol
    /// types, or other opcodes, are unsupported.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        if packet.htype() != HTYPE_ETHERNET || packet.hlen() != 6 {
            return Err(WireError::Unsupported("ARP hardware type other than Ethernet"));
        }
        if packet.ptype() != PTYPE_IPV4 || packet.plen() != 4 {
            return Err(WireError::Unsupported("ARP protocol type other than IPv4"));
        }
        let op = packet.operation();
        if let ArpOperation::Unknown(_) = op {
            return Err(WireError::Unsupported("ARP operation other than request or reply"));
        }
        let ipv4 = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let mac = |b: &[u8]| EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]);
        Ok(ArpRepr {
            op,
            sender_hw: mac(packet.sender_hw()),
            sender_ip: ipv4(packet.sender_proto()),
            target_hw: mac(packet.target_hw()),
            target_ip: ipv4(packet.target_proto()),
        })
    }

    /// Length of the packet this emits.
    pub fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Same as [`ArpRepr::buffer_len`]: ARP has no payload.
    pub fn header_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet into `packet` (at least [`ETHERNET_IPV4_LEN`] bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_htype(HTYPE_ETHERNET);
        packet.set_ptype(PTYPE_IPV4);
        packet.set_hlen(6);
        packet.set_plen(4);
        packet.set_operation(self.op);
        packet.set_sender_hw(&self.sender_hw.0);
        packet.set_sender_proto(&self.sender_ip.octets());
        packet.set_target_hw(&self.target_hw.0);
        packet.set_target_proto(&self.target_ip.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// "Who has 192.168.1.2? Tell 192.168.1.1", from 52:54:00:12:34:56.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, // Ethernet
        0x08, 0x00, // IPv4
        6, 4, // lengths
        0x00, 0x01, // request
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // sender MAC
        192, 168, 1, 1, // sender IP
        0, 0, 0, 0, 0, 0, // target MAC
        192, 168, 1, 2, // target IP
    ];

    fn request() -> ArpRepr {
        ArpRepr {
            op: ArpOperation::Request,
            sender_hw: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            sender_ip: Ipv4Addr::new(192, 168, 1, 1),
            target_hw: EthernetAddress([0; 6]),
            target_ip: Ipv4Addr::new(192, 168, 1, 2),
        }
    }

    #[test]
    fn parses_known_request() {
        let packet = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet).unwrap(), request());
    }

    #[test]
    fn emits_known_request() {
        let mut buf = [0xEEu8; 28];
        request().emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn reply_round_trips() {
        let reply = ArpRepr {
            op: ArpOperation::Reply,
            sender_hw: EthernetAddress([2, 0, 0, 0, 0, 2]),
            sender_ip: Ipv4Addr::new(10, 0, 0, 2),
            target_hw: EthernetAddress([2, 0, 0, 0, 0, 1]),
            target_ip: Ipv4Addr::new(10, 0, 0, 1),
        };
        let mut buf = [0u8; 28];
        reply.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[6..8], &[0, 2]);
        assert_eq!(
            ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()).unwrap(),
            reply
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..REQUEST.len() {
            assert_eq!(
                ArpPacket::new_checked(&REQUEST[..len]).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
    }

    #[test]
    fn other_types_are_unsupported() {
        let mut other_hw = REQUEST;
        other_hw[1] = 6; // IEEE 802 networks
        let packet = ArpPacket::new_checked(&other_hw[..]).unwrap();
        assert!(matches!(ArpRepr::parse(&packet), Err(WireError::Unsupported(_))));

        let mut other_proto = REQUEST;
        other_proto[2..4].copy_from_slice(&[0x86, 0xDD]);
        let packet = ArpPacket::new_checked(&other_proto[..]).unwrap();
        assert!(matches!(ArpRepr::parse(&packet), Err(WireError::Unsupported(_))));

        let mut rarp = REQUEST;
        rarp[7] = 3; // RARP request (RFC 903)
        let packet = ArpPacket::new_checked(&rarp[..]).unwrap();
        assert!(matches!(ArpRepr::parse(&packet), Err(WireError::Unsupported(_))));
    }

    #[test]
    fn lengths_in_the_header_are_checked() {
        // HLEN 200 asks for 8 + 2 * (200 + 4) bytes.
        let mut long_hw = REQUEST;
        long_hw[4] = 200;
        assert_eq!(ArpPacket::new_checked(&long_hw[..]).unwrap_err(), WireError::Truncated);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(packet) = ArpPacket::new_checked(&bytes[..]) {
                let _ = packet.sender_hw();
                let _ = packet.target_proto();
                let _ = ArpRepr::parse(&packet);
            }
        }
    }
}
