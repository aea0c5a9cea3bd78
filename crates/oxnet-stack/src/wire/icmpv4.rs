//! ICMP for IPv4 (RFC 792): echo request and reply, and the two errors the
//! stack sends and reads, destination unreachable and time exceeded, which
//! quote the invoking IPv4 header and the first 8 bytes of its data.

use super::ipv4::{Ipv4Packet, Ipv4Repr};
use super::{checksum_of, get_u16, put_u16, sum_verifies, Checksum, Result, WireError};
use oxnet_driver::offload::ones_sum;

/// Byte offsets of the ICMP header's fields (RFC 792).
mod field {
    use std::ops::RangeFrom;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// Echo: identifier.
    pub const ECHO_IDENT: usize = 4;
    /// Echo: sequence number.
    pub const ECHO_SEQNO: usize = 6;
    /// Destination unreachable, fragmentation needed: the next hop's MTU
    /// (RFC 1191 §4); unused otherwise.
    pub const NEXT_HOP_MTU: usize = 6;
    /// Echo data, or the quoted packet of an error.
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMP header.
pub const HEADER_LEN: usize = 8;

/// Message types (RFC 792).
mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

/// The code of a destination unreachable message (RFC 792, RFC 1122
/// §3.2.2.1, RFC 1812 §5.2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4DstUnreachable {
    /// 0: net unreachable.
    NetUnreachable,
    /// 1: host unreachable.
    HostUnreachable,
    /// 2: protocol unreachable.
    ProtoUnreachable,
    /// 3: port unreachable.
    PortUnreachable,
    /// 4: fragmentation needed and DF set (the MTU in `next_hop_mtu`).
    FragRequired,
    /// 5: source route failed.
    SrcRouteFailed,
    /// 13: communication administratively prohibited (RFC 1812).
    AdminProhibited,
    /// Any other code.
    Other(u8),
}

impl From<u8> for Icmpv4DstUnreachable {
    fn from(code: u8) -> Self {
        match code {
            0 => Self::NetUnreachable,
            1 => Self::HostUnreachable,
            2 => Self::ProtoUnreachable,
            3 => Self::PortUnreachable,
            4 => Self::FragRequired,
            5 => Self::SrcRouteFailed,
            13 => Self::AdminProhibited,
            other => Self::Other(other),
        }
    }
}

impl From<Icmpv4DstUnreachable> for u8 {
    fn from(code: Icmpv4DstUnreachable) -> Self {
        match code {
            Icmpv4DstUnreachable::NetUnreachable => 0,
            Icmpv4DstUnreachable::HostUnreachable => 1,
            Icmpv4DstUnreachable::ProtoUnreachable => 2,
            Icmpv4DstUnreachable::PortUnreachable => 3,
            Icmpv4DstUnreachable::FragRequired => 4,
            Icmpv4DstUnreachable::SrcRouteFailed => 5,
            Icmpv4DstUnreachable::AdminProhibited => 13,
            Icmpv4DstUnreachable::Other(other) => other,
        }
    }
}

/// The code of a time exceeded message (RFC 792).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4TimeExceeded {
    /// 0: time to live exceeded in transit.
    TtlExpired,
    /// 1: fragment reassembly time exceeded.
    FragReassembly,
}

/// A view of an ICMP message in a byte buffer (the whole IPv4 payload).
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// A view of a buffer holding at least the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Next-hop MTU of a fragmentation-needed message (RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::NEXT_HOP_MTU)
    }

    /// Everything after the header: echo data, or an error's quote.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// Whether the checksum over the whole message verifies (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        sum_verifies(ones_sum(self.buffer.as_ref(), 0))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::TYPE] = value;
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field as given.
    pub fn set_checksum(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        put_u16(self.buffer.as_mut(), field::ECHO_SEQNO, value);
    }

    /// Sets the 4 bytes after the checksum: unused (0) in errors but for
    /// the next-hop MTU of fragmentation needed.
    pub fn set_rest_of_header(&mut self, value: u32) {
        super::put_u32(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Everything after the header, to write into.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let checksum = checksum_of(ones_sum(self.buffer.as_ref(), 0));
        self.set_checksum(checksum);
    }
}

/// An ICMP message as a value. Errors borrow the quoted data from the
/// packet they were parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (type 8): the data follows the header.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Length of the data.
        data_len: usize,
    },
    /// Echo reply (type 0): the data follows the header.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Length of the data.
        data_len: usize,
    },
    /// Destination unreachable (type 3).
    DstUnreachable {
        /// Why (the code).
        reason: Icmpv4DstUnreachable,
        /// The next hop's MTU for `FragRequired` (RFC 1191 §4), else 0.
        next_hop_mtu: u16,
        /// The invoking packet's IPv4 header (emit writes it without
        /// options, checksum recomputed).
        header: Ipv4Repr,
        /// What follows the quoted header: the first 8 bytes of the
        /// invoking packet's data (RFC 792), or more from some routers.
        data: &'a [u8],
    },
    /// Time exceeded (type 11).
    TimeExceeded {
        /// Why (the code).
        reason: Icmpv4TimeExceeded,
        /// The invoking packet's IPv4 header.
        header: Ipv4Repr,
        /// The first bytes of the invoking packet's data.
        data: &'a [u8],
    },
    /// Any other type (redirect, timestamp, ...): checksum checked, the
    /// rest left to whoever cares; emit writes the type and code and four
    /// zero bytes.
    Other {
        /// Message type.
        msg_type: u8,
        /// Message code.
        code: u8,
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// The message in a checked packet, checksum verified unless `checksum`
    /// says it was already.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv4Packet<&'a T>, checksum: Checksum) -> Result<Icmpv4Repr<'a>> {
        if checksum == Checksum::Verify && !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        let data: &'a [u8] = &<T as AsRef<[u8]>>::as_ref(packet.buffer)[field::DATA];
        let code = packet.msg_code();
        match packet.msg_type() {
            t @ (msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY) => {
                if code != 0 {
                    return Err(WireError::Malformed("ICMP echo with a nonzero code"));
                }
                let (ident, seq_no, data_len) = (packet.echo_ident(), packet.echo_seq_no(), data.len());
                Ok(if t == msg_type::ECHO_REQUEST {
                    Icmpv4Repr::EchoRequest {
                        ident,
                        seq_no,
                        data_len,
                    }
                } else {
                    Icmpv4Repr::EchoReply {
                        ident,
                        seq_no,
                        data_len,
                    }
                })
            }
            msg_type::DST_UNREACHABLE => {
                let (header, header_len) = Ipv4Repr::parse_quoted(data)?;
                let reason = Icmpv4DstUnreachable::from(code);
                let next_hop_mtu = if reason == Icmpv4DstUnreachable::FragRequired {
                    packet.next_hop_mtu()
                } else {
                    0
                };
                Ok(Icmpv4Repr::DstUnreachable {
                    reason,
                    next_hop_mtu,
                    header,
                    data: &data[header_len..],
                })
            }
            msg_type::TIME_EXCEEDED => {
                let reason = match code {
                    0 => Icmpv4TimeExceeded::TtlExpired,
                    1 => Icmpv4TimeExceeded::FragReassembly,
                    _ => return Err(WireError::Malformed("ICMP time exceeded code over 1")),
                };
                let (header, header_len) = Ipv4Repr::parse_quoted(data)?;
                Ok(Icmpv4Repr::TimeExceeded {
                    reason,
                    header,
                    data: &data[header_len..],
                })
            }
            msg_type => Ok(Icmpv4Repr::Other { msg_type, code }),
        }
    }

    /// Length of the message this emits: header, then the echo data or the
    /// quoted header and data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Icmpv4Repr::EchoRequest { data_len, .. } | Icmpv4Repr::EchoReply { data_len, .. } => *data_len,
                Icmpv4Repr::DstUnreachable { header, data, .. } | Icmpv4Repr::TimeExceeded { header, data, .. } => {
                    header.header_len() + data.len()
                }
                Icmpv4Repr::Other { .. } => 0,
            }
    }

    /// Length of the ICMP header.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the message into `packet`, whose buffer is exactly
    /// `buffer_len()` bytes, and its checksum over all of it. Echo data
    /// must already be in place after the header; an error's quote is
    /// written here.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (msg_type, code) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                (msg_type::ECHO_REQUEST, 0)
            }
            Icmpv4Repr::EchoReply { ident, seq_no, .. } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                (msg_type::ECHO_REPLY, 0)
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                header,
                data,
            } => {
                packet.set_rest_of_header(next_hop_mtu as u32);
                Self::emit_quote(packet, &header, data);
                (msg_type::DST_UNREACHABLE, reason.into())
            }
            Icmpv4Repr::TimeExceeded { reason, header, data } => {
                packet.set_rest_of_header(0);
                Self::emit_quote(packet, &header, data);
                (msg_type::TIME_EXCEEDED, reason as u8)
            }
            Icmpv4Repr::Other { msg_type, code } => {
                packet.set_rest_of_header(0);
                (msg_type, code)
            }
        };
        packet.set_msg_type(msg_type);
        packet.set_msg_code(code);
        packet.fill_checksum();
    }

    /// Writes the quoted header and data of an error after the header.
    fn emit_quote<T: AsRef<[u8]> + AsMut<[u8]>>(packet: &mut Icmpv4Packet<T>, header: &Ipv4Repr, data: &[u8]) {
        let quote = packet.data_mut();
        header.emit(&mut Ipv4Packet::new_unchecked(&mut quote[..header.header_len()]));
        quote[header.header_len()..header.header_len() + data.len()].copy_from_slice(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ip::IpProtocol;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// Echo request, ident 0x1234, seq 1, data "abcd". Checksum by hand:
    /// 0800 + 1234 + 0001 + 6162 + 6364 = 0xdefb, complement 0x2104.
    const ECHO: [u8; 12] = [8, 0, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd'];

    /// The IPv4 header and 8 bytes of UDP quoted below (ipv4.rs's test
    /// packet: 192.168.0.1 -> 192.168.0.199, UDP, DF, ident 0x1234).
    const INVOKING: [u8; 28] = [
        0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xa6, 0x84, 192, 168, 0, 1, 192, 168, 0, 199, 1, 2,
        3, 4, 5, 6, 7, 8,
    ];

    /// Port unreachable quoting INVOKING. Checksum by hand: 0303, plus the
    /// quoted header (which sums to 0xffff, its own checksum being right:
    /// adding it changes nothing), plus 0102 + 0304 + 0506 + 0708 = 0x1014:
    /// 0x1317, complement 0xece8.
    fn port_unreachable() -> Vec<u8> {
        let mut bytes = vec![3, 3, 0xec, 0xe8, 0, 0, 0, 0];
        bytes.extend_from_slice(&INVOKING);
        bytes
    }

    fn invoking_header() -> Ipv4Repr {
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
    fn parses_and_emits_known_echo() {
        let packet = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        let repr = Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data_len: 4
            }
        );
        assert_eq!(packet.data(), b"abcd");
        let mut buf = [0u8; 12];
        buf[8..].copy_from_slice(b"abcd");
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn parses_and_emits_known_port_unreachable() {
        let bytes = port_unreachable();
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        let repr = Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap();
        let expected = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            next_hop_mtu: 0,
            header: invoking_header(),
            data: &[1, 2, 3, 4, 5, 6, 7, 8],
        };
        assert_eq!(repr, expected);
        assert_eq!(repr.buffer_len(), 36);
        let mut buf = vec![0xEEu8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
    }

    #[test]
    fn frag_required_carries_the_mtu_and_time_exceeded_round_trips() {
        let frag = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::FragRequired,
            next_hop_mtu: 1400,
            header: invoking_header(),
            data: &[9; 8],
        };
        let ttl = Icmpv4Repr::TimeExceeded {
            reason: Icmpv4TimeExceeded::TtlExpired,
            header: invoking_header(),
            data: &[7; 3],
        };
        for repr in [frag, ttl] {
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
            let packet = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap(), repr);
        }
        let mut buf = vec![0u8; frag.buffer_len()];
        frag.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..2], &[3, 4]);
        assert_eq!(&buf[4..8], &[0, 0, 0x05, 0x78]);
    }

    #[test]
    fn bad_checksum_and_bad_codes() {
        let mut bad = ECHO;
        bad[8] = b'z';
        let packet = Icmpv4Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
        assert!(Icmpv4Repr::parse(&packet, Checksum::Ignore).is_ok());

        let mut coded = ECHO;
        coded[1] = 1;
        let packet = Icmpv4Packet::new_checked(&coded[..]).unwrap();
        assert!(matches!(
            Icmpv4Repr::parse(&packet, Checksum::Ignore),
            Err(WireError::Malformed(_))
        ));

        let mut time = port_unreachable();
        time[0] = 11;
        time[1] = 2;
        let packet = Icmpv4Packet::new_checked(&time[..]).unwrap();
        assert!(matches!(
            Icmpv4Repr::parse(&packet, Checksum::Ignore),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn other_types_are_reported_as_other() {
        // Redirect (type 5, code 1) to 10.0.0.9, quoting nothing: 0501 +
        // 0a00 + 0009 = 0x0f0a, checksum 0xf0f5.
        let redirect = [5, 1, 0xf0, 0xf5, 10, 0, 0, 9];
        let packet = Icmpv4Packet::new_checked(&redirect[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap(),
            Icmpv4Repr::Other { msg_type: 5, code: 1 }
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                Icmpv4Packet::new_checked(&ECHO[..len]).unwrap_err(),
                WireError::Truncated
            );
        }
        // Echo data cut short: the length is the buffer's, so only the
        // checksum can tell.
        for len in HEADER_LEN..ECHO.len() {
            let packet = Icmpv4Packet::new_checked(&ECHO[..len]).unwrap();
            assert_eq!(
                Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap_err(),
                WireError::BadChecksum
            );
        }
        // An error cut inside its quoted header.
        let bytes = port_unreachable();
        for len in HEADER_LEN..HEADER_LEN + 20 {
            let packet = Icmpv4Packet::new_checked(&bytes[..len]).unwrap();
            assert_eq!(
                Icmpv4Repr::parse(&packet, Checksum::Ignore).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
            assert_eq!(
                Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap_err(),
                WireError::BadChecksum
            );
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(packet) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = Icmpv4Repr::parse(&packet, Checksum::Verify);
                if let Ok(repr) = Icmpv4Repr::parse(&packet, Checksum::Ignore) {
                    prop_assert!(repr.buffer_len() <= bytes.len());
                }
            }
        }

        #[test]
        fn echo_round_trips(request: bool, ident: u16, seq_no: u16, data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let data_len = data.len();
            let repr = if request {
                Icmpv4Repr::EchoRequest { ident, seq_no, data_len }
            } else {
                Icmpv4Repr::EchoReply { ident, seq_no, data_len }
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            buf[HEADER_LEN..].copy_from_slice(&data);
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
            let packet = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Icmpv4Repr::parse(&packet, Checksum::Verify).unwrap(), repr);
        }
    }
}
