//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894): destination
//! and source MAC address, EtherType, payload. The FCS is the NIC's.

use super::{get_u16, put_u16, Result, WireError};
use std::fmt;

/// Byte offsets of the Ethernet header's fields.
mod field {
    use std::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet header (no VLAN tag).
pub const HEADER_LEN: usize = 14;

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xFF; 6]);

    /// The address in the first 6 bytes of `bytes`; `None` if shorter.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        let b: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(b))
    }

    /// The 6 bytes of the address.
    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit (the least significant bit of the first byte,
    /// IEEE 802-2014 §8.2) is set: multicast or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual (unicast) address.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType field: what the payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x0806.
    Arp,
    /// 0x86DD.
    Ipv6,
    /// 0x8100, an IEEE 802.1Q tag.
    Vlan,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86DD => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86DD,
            EtherType::Vlan => 0x8100,
            EtherType::Unknown(other) => other,
        }
    }
}

/// A view of an Ethernet frame in a byte buffer.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// A view without any check; for emitting into a buffer of at least
    /// [`HEADER_LEN`] bytes.
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// A view of a buffer holding at least a whole header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE).into()
    }

    /// Everything after the header (may include Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        put_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype.into());
    }

    /// Everything after the header, to write into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// An Ethernet header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src: EthernetAddress,
    /// Destination MAC address.
    pub dst: EthernetAddress,
    /// What the payload is.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// The header of a checked frame (every value is valid).
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        Ok(EthernetRepr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header this emits.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of a frame with `payload_len` bytes of payload (no padding).
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header into `frame`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst);
        frame.set_src_addr(self.src);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A broadcast ARP frame from 52:54:00:12:34:56, two payload bytes.
    const FRAME: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // source
        0x08, 0x06, // ARP
        0xaa, 0xbb,
    ];

    fn repr() -> EthernetRepr {
        EthernetRepr {
            src: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            dst: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        }
    }

    #[test]
    fn parses_known_frame() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame).unwrap(), repr());
        assert_eq!(frame.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn emits_known_frame() {
        let mut buf = [0u8; 16];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        repr().emit(&mut frame);
        frame.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(buf, FRAME);
        assert_eq!(repr().buffer_len(2), 16);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME[..len]).unwrap_err(),
                WireError::Truncated
            );
        }
        assert!(EthernetFrame::new_checked(&FRAME[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn address_display_and_kind() {
        let a = EthernetAddress([0x02, 0x00, 0x5e, 0x0a, 0xbc, 0xff]);
        assert_eq!(a.to_string(), "02:00:5e:0a:bc:ff");
        assert!(a.is_unicast());
        assert!(EthernetAddress([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3, 4, 5]), None);
    }

    #[test]
    fn ethertype_numbers() {
        for (t, n) in [
            (EtherType::Ipv4, 0x0800),
            (EtherType::Arp, 0x0806),
            (EtherType::Ipv6, 0x86DD),
            (EtherType::Vlan, 0x8100),
            (EtherType::Unknown(0x88CC), 0x88CC),
        ] {
            assert_eq!(u16::from(t), n);
            assert_eq!(EtherType::from(n), t);
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let repr = EthernetRepr::parse(&frame).unwrap();
                prop_assert_eq!(frame.payload().len(), bytes.len() - HEADER_LEN);
                prop_assert_eq!(u16::from(repr.ethertype), u16::from_be_bytes([bytes[12], bytes[13]]));
            }
        }
    }
}
