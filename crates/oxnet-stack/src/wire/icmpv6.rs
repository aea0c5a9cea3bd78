//! ICMPv6 (RFC 4443): echo request and reply, the four error messages, and
//! Neighbor Discovery ([`super::ndisc`]), with the checksum over the IPv6
//! pseudo-header (RFC 4443 §2.3, RFC 8200 §8.1). Other types (MLD, RFC
//! 2710 and RFC 3810, among them) parse as [`Icmpv6Repr::Other`] so that a
//! caller can ignore them.

use super::ip::{pseudo_header_sum, IpAddress, IpProtocol};
use super::ipv6::{Ipv6Packet, Ipv6Repr};
use super::ndisc::NdiscRepr;
use super::{checksum_of, get_u16, get_u32, put_u16, put_u32, sum_verifies, Checksum, Result, WireError};
use oxnet_driver::offload::ones_sum;
use std::net::Ipv6Addr;

/// Byte offsets of the ICMPv6 header's fields (RFC 4443 §2.1, §3, §4).
mod field {
    use std::ops::RangeFrom;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// Echo: identifier (RFC 4443 §4.1).
    pub const ECHO_IDENT: usize = 4;
    /// Echo: sequence number.
    pub const ECHO_SEQNO: usize = 6;
    /// Packet too big: MTU; parameter problem: pointer (RFC 4443 §3.2, §3.4).
    pub const MTU_OR_POINTER: usize = 4;
    /// Echo data, or an error's quote of the invoking packet.
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = 8;

/// Message types (RFC 4443 §2.1, RFC 4861 §4).
pub mod msg_type {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PKT_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router Solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router Advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor Solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor Advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
}

/// The code of a destination unreachable message (RFC 4443 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6DstUnreachable {
    /// 0: no route to destination.
    NoRoute,
    /// 1: communication administratively prohibited.
    AdminProhibited,
    /// 2: beyond scope of source address.
    BeyondScope,
    /// 3: address unreachable.
    AddrUnreachable,
    /// 4: port unreachable.
    PortUnreachable,
    /// 5: source address failed ingress/egress policy.
    FailedPolicy,
    /// 6: reject route to destination.
    RejectRoute,
    /// Any other code.
    Other(u8),
}

impl From<u8> for Icmpv6DstUnreachable {
    fn from(code: u8) -> Self {
        match code {
            0 => Self::NoRoute,
            1 => Self::AdminProhibited,
            2 => Self::BeyondScope,
            3 => Self::AddrUnreachable,
            4 => Self::PortUnreachable,
            5 => Self::FailedPolicy,
            6 => Self::RejectRoute,
            other => Self::Other(other),
        }
    }
}

impl From<Icmpv6DstUnreachable> for u8 {
    fn from(code: Icmpv6DstUnreachable) -> Self {
        match code {
            Icmpv6DstUnreachable::NoRoute => 0,
            Icmpv6DstUnreachable::AdminProhibited => 1,
            Icmpv6DstUnreachable::BeyondScope => 2,
            Icmpv6DstUnreachable::AddrUnreachable => 3,
            Icmpv6DstUnreachable::PortUnreachable => 4,
            Icmpv6DstUnreachable::FailedPolicy => 5,
            Icmpv6DstUnreachable::RejectRoute => 6,
            Icmpv6DstUnreachable::Other(other) => other,
        }
    }
}

/// The code of a time exceeded message (RFC 4443 §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6TimeExceeded {
    /// 0: hop limit exceeded in transit.
    HopLimitExceeded,
    /// 1: fragment reassembly time exceeded.
    FragReassembly,
}

/// The code of a parameter problem message (RFC 4443 §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6ParamProblem {
    /// 0: erroneous header field.
    ErroneousHeaderField,
    /// 1: unrecognized Next Header type.
    UnrecognizedNextHeader,
    /// 2: unrecognized IPv6 option.
    UnrecognizedOption,
    /// Any other code (RFC 7112 and later).
    Other(u8),
}

impl From<u8> for Icmpv6ParamProblem {
    fn from(code: u8) -> Self {
        match code {
            0 => Self::ErroneousHeaderField,
            1 => Self::UnrecognizedNextHeader,
            2 => Self::UnrecognizedOption,
            other => Self::Other(other),
        }
    }
}

impl From<Icmpv6ParamProblem> for u8 {
    fn from(code: Icmpv6ParamProblem) -> Self {
        match code {
            Icmpv6ParamProblem::ErroneousHeaderField => 0,
            Icmpv6ParamProblem::UnrecognizedNextHeader => 1,
            Icmpv6ParamProblem::UnrecognizedOption => 2,
            Icmpv6ParamProblem::Other(other) => other,
        }
    }
}

/// A view of an ICMPv6 message in a byte buffer (the whole upper-layer
/// payload of the IPv6 packet).
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// The checksum's sum over the IPv6 pseudo-header and `message`.
fn message_sum(src: &Ipv6Addr, dst: &Ipv6Addr, message: &[u8]) -> u64 {
    let sum = pseudo_header_sum(
        &IpAddress::V6(*src),
        &IpAddress::V6(*dst),
        IpProtocol::Icmpv6,
        message.len() as u32,
    );
    ones_sum(message, sum)
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// A view without any check; for emitting.
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// A view of a buffer holding at least the 8-byte header (Neighbor
    /// Discovery messages check their own, longer, lengths).
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole message.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
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

    /// MTU of packet too big, or pointer of parameter problem.
    pub fn mtu_or_pointer(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::MTU_OR_POINTER)
    }

    /// Everything after the header: echo data, or an error's quote.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// Whether the checksum over the pseudo-header and the whole message
    /// verifies (RFC 4443 §2.3).
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        sum_verifies(message_sum(src, dst, self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// The whole message, to write into.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

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

    /// Sets the MTU, the pointer, or the unused word (0) of an error.
    pub fn set_mtu_or_pointer(&mut self, value: u32) {
        put_u32(self.buffer.as_mut(), field::MTU_OR_POINTER, value);
    }

    /// Everything after the header, to write into.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and stores the checksum over the pseudo-header and the
    /// whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let checksum = checksum_of(message_sum(src, dst, self.buffer.as_ref()));
        self.set_checksum(checksum);
    }
}

/// An ICMPv6 message as a value. Errors borrow the quoted packet from the
/// message they were parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request (type 128): the data follows the header.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Length of the data.
        data_len: usize,
    },
    /// Echo reply (type 129): the data follows the header.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Length of the data.
        data_len: usize,
    },
    /// Destination unreachable (type 1).
    DstUnreachable {
        /// Why (the code).
        reason: Icmpv6DstUnreachable,
        /// The invoking packet's fixed IPv6 header.
        header: Ipv6Repr,
        /// What follows it in the quote (RFC 4443 §2.4 (c): as much as fits
        /// in the minimum MTU).
        data: &'a [u8],
    },
    /// Packet too big (type 2).
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// The invoking packet's fixed IPv6 header.
        header: Ipv6Repr,
        /// What follows it in the quote.
        data: &'a [u8],
    },
    /// Time exceeded (type 3).
    TimeExceeded {
        /// Why (the code).
        reason: Icmpv6TimeExceeded,
        /// The invoking packet's fixed IPv6 header.
        header: Ipv6Repr,
        /// What follows it in the quote.
        data: &'a [u8],
    },
    /// Parameter problem (type 4).
    ParamProblem {
        /// Why (the code).
        reason: Icmpv6ParamProblem,
        /// Offset of the problem in the invoking packet.
        pointer: u32,
        /// The invoking packet's fixed IPv6 header.
        header: Ipv6Repr,
        /// What follows it in the quote.
        data: &'a [u8],
    },
    /// A Neighbor Discovery message (types 133 to 137).
    Ndisc(NdiscRepr),
    /// Any other type (MLD's 130-132 and 143 among them): checksum checked,
    /// nothing else; emit writes the type and code and four zero bytes.
    Other {
        /// Message type.
        msg_type: u8,
        /// Message code.
        code: u8,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// The message in a checked packet sent from `src` to `dst`, checksum
    /// verified unless `checksum` says it was already. Neighbor Discovery
    /// checks are [`NdiscRepr::parse`]'s, but for the hop limit of 255
    /// (RFC 4861 §6.1, §7.1), which the caller checks in the IPv6 header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        checksum: Checksum,
    ) -> Result<Icmpv6Repr<'a>> {
        if checksum == Checksum::Verify && !packet.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        let data: &'a [u8] = &<T as AsRef<[u8]>>::as_ref(packet.buffer)[field::DATA];
        let code = packet.msg_code();
        // An error's quote starts with the invoking packet's IPv6 header.
        let quote = || -> Result<(Ipv6Repr, &'a [u8])> {
            let header = Ipv6Repr::parse_quoted(data)?;
            Ok((header, &data[header.header_len()..]))
        };
        match packet.msg_type() {
            t @ (msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY) => {
                if code != 0 {
                    return Err(WireError::Malformed("ICMPv6 echo with a nonzero code"));
                }
                let (ident, seq_no, data_len) = (packet.echo_ident(), packet.echo_seq_no(), data.len());
                Ok(if t == msg_type::ECHO_REQUEST {
                    Icmpv6Repr::EchoRequest {
                        ident,
                        seq_no,
                        data_len,
                    }
                } else {
                    Icmpv6Repr::EchoReply {
                        ident,
                        seq_no,
                        data_len,
                    }
                })
            }
            msg_type::DST_UNREACHABLE => {
                let (header, data) = quote()?;
                Ok(Icmpv6Repr::DstUnreachable {
                    reason: code.into(),
                    header,
                    data,
                })
            }
            msg_type::PKT_TOO_BIG => {
                let (header, data) = quote()?;
                Ok(Icmpv6Repr::PacketTooBig {
                    mtu: packet.mtu_or_pointer(),
                    header,
                    data,
                })
            }
            msg_type::TIME_EXCEEDED => {
                let reason = match code {
                    0 => Icmpv6TimeExceeded::HopLimitExceeded,
                    1 => Icmpv6TimeExceeded::FragReassembly,
                    _ => return Err(WireError::Malformed("ICMPv6 time exceeded code over 1")),
                };
                let (header, data) = quote()?;
                Ok(Icmpv6Repr::TimeExceeded { reason, header, data })
            }
            msg_type::PARAM_PROBLEM => {
                let (header, data) = quote()?;
                Ok(Icmpv6Repr::ParamProblem {
                    reason: code.into(),
                    pointer: packet.mtu_or_pointer(),
                    header,
                    data,
                })
            }
            msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT => Ok(Icmpv6Repr::Ndisc(NdiscRepr::parse(packet)?)),
            msg_type => Ok(Icmpv6Repr::Other { msg_type, code }),
        }
    }

    /// Length of the message this emits.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data_len, .. } | Icmpv6Repr::EchoReply { data_len, .. } => HEADER_LEN + data_len,
            Icmpv6Repr::DstUnreachable { header, data, .. }
            | Icmpv6Repr::PacketTooBig { header, data, .. }
            | Icmpv6Repr::TimeExceeded { header, data, .. }
            | Icmpv6Repr::ParamProblem { header, data, .. } => HEADER_LEN + header.header_len() + data.len(),
            Icmpv6Repr::Ndisc(ndisc) => ndisc.buffer_len(),
            Icmpv6Repr::Other { .. } => HEADER_LEN,
        }
    }

    /// Length of the ICMPv6 header.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the message into `packet`, whose buffer is exactly
    /// `buffer_len()` bytes, and its checksum over the pseudo-header and
    /// all of it. Echo data must already be in place after the header;
    /// everything else is written here.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let (msg_type, code) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, .. } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                (msg_type::ECHO_REQUEST, 0)
            }
            Icmpv6Repr::EchoReply { ident, seq_no, .. } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                (msg_type::ECHO_REPLY, 0)
            }
            Icmpv6Repr::DstUnreachable { reason, header, data } => {
                Self::emit_error(packet, 0, &header, data);
                (msg_type::DST_UNREACHABLE, reason.into())
            }
            Icmpv6Repr::PacketTooBig { mtu, header, data } => {
                Self::emit_error(packet, mtu, &header, data);
                (msg_type::PKT_TOO_BIG, 0)
            }
            Icmpv6Repr::TimeExceeded { reason, header, data } => {
                Self::emit_error(packet, 0, &header, data);
                (msg_type::TIME_EXCEEDED, reason as u8)
            }
            Icmpv6Repr::ParamProblem {
                reason,
                pointer,
                header,
                data,
            } => {
                Self::emit_error(packet, pointer, &header, data);
                (msg_type::PARAM_PROBLEM, reason.into())
            }
            Icmpv6Repr::Ndisc(ndisc) => {
                ndisc.emit(packet);
                (packet.msg_type(), 0)
            }
            Icmpv6Repr::Other { msg_type, code } => {
                packet.set_mtu_or_pointer(0);
                (msg_type, code)
            }
        };
        packet.set_msg_type(msg_type);
        packet.set_msg_code(code);
        packet.fill_checksum(src, dst);
    }

    /// Writes an error's second word and its quote of the invoking packet.
    fn emit_error<T: AsRef<[u8]> + AsMut<[u8]>>(
        packet: &mut Icmpv6Packet<T>,
        word: u32,
        header: &Ipv6Repr,
        data: &[u8],
    ) {
        packet.set_mtu_or_pointer(word);
        let quote = packet.data_mut();
        let header_len = header.header_len();
        header.emit(&mut Ipv6Packet::new_unchecked(&mut quote[..header_len]));
        quote[header_len..header_len + data.len()].copy_from_slice(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
    }

    /// Echo request fe80::1 -> fe80::2, ident 0x1234, seq 1, data "abcd".
    /// Checksum by hand: pseudo-header fe80 + 1 + fe80 + 2 + 000c + 003a =
    /// 0x1fd49; message 8000 + 1234 + 0001 + 6162 + 6364 = 0x156fb; total
    /// 0x35444, folded 0x5447, complement 0xabb8.
    const ECHO: [u8; 12] = [128, 0, 0xab, 0xb8, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd'];

    fn invoking() -> Ipv6Repr {
        Ipv6Repr {
            src: "fe80::2".parse().unwrap(),
            dst: "2001:db8::9".parse().unwrap(),
            next_header: IpProtocol::Udp,
            payload_len: 1400,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 7,
        }
    }

    #[test]
    fn parses_and_emits_known_echo() {
        let (src, dst) = addrs();
        let packet = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        let repr = Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap();
        assert_eq!(
            repr,
            Icmpv6Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data_len: 4
            }
        );
        let mut buf = [0u8; 12];
        buf[8..].copy_from_slice(b"abcd");
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn checksum_covers_the_pseudo_header() {
        let (src, dst) = addrs();
        let packet = Icmpv6Packet::new_checked(&ECHO[..]).unwrap();
        // Swapping source and destination leaves the sum alone...
        assert!(Icmpv6Repr::parse(&packet, &dst, &src, Checksum::Verify).is_ok());
        // ...but another address does not.
        let other: Ipv6Addr = "fe80::3".parse().unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&packet, &src, &other, Checksum::Verify).unwrap_err(),
            WireError::BadChecksum
        );
    }

    #[test]
    fn errors_round_trip_with_their_quote() {
        let (src, dst) = addrs();
        let udp = [0x04, 0x00, 0x00, 0x35, 0x05, 0x78, 0x12, 0x34];
        let reprs = [
            Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::PortUnreachable,
                header: invoking(),
                data: &udp,
            },
            Icmpv6Repr::PacketTooBig {
                mtu: 1280,
                header: invoking(),
                data: &udp,
            },
            Icmpv6Repr::TimeExceeded {
                reason: Icmpv6TimeExceeded::HopLimitExceeded,
                header: invoking(),
                data: &udp,
            },
            Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::UnrecognizedNextHeader,
                pointer: 6,
                header: invoking(),
                data: &udp[..3],
            },
        ];
        let expected_heads: [[u8; 8]; 4] = [
            [1, 4, 0, 0, 0, 0, 0, 0],
            [2, 0, 0, 0, 0, 0, 5, 0],
            [3, 0, 0, 0, 0, 0, 0, 0],
            [4, 1, 0, 0, 0, 0, 0, 6],
        ];
        for (repr, head) in reprs.iter().zip(expected_heads) {
            let mut buf = vec![0xEEu8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
            let mut without_checksum = buf[..8].to_vec();
            without_checksum[2..4].copy_from_slice(&[0, 0]);
            assert_eq!(without_checksum, head);
            assert_eq!(buf[8] >> 4, 6, "the quote starts with an IPv6 header");
            let packet = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap(), *repr);
        }
    }

    #[test]
    fn mld_and_unknown_types_are_other() {
        let (src, dst) = addrs();
        for t in [130, 131, 132, 143, 200] {
            let repr = Icmpv6Repr::Other { msg_type: t, code: 0 };
            // An MLDv1 query is 24 bytes: emit the header, then pad.
            let mut buf = [0u8; 24];
            buf[8..].copy_from_slice(&[0x11; 16]);
            let mut packet = Icmpv6Packet::new_unchecked(&mut buf[..]);
            repr.emit(&mut packet, &src, &dst);
            let packet = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap(), repr);
        }
    }

    #[test]
    fn truncations_and_bad_codes() {
        let (src, dst) = addrs();
        for len in 0..HEADER_LEN {
            assert_eq!(
                Icmpv6Packet::new_checked(&ECHO[..len]).unwrap_err(),
                WireError::Truncated
            );
        }
        // Echo data cut short: the length is the buffer's, so only the
        // checksum can tell.
        for len in HEADER_LEN..ECHO.len() {
            let packet = Icmpv6Packet::new_checked(&ECHO[..len]).unwrap();
            assert_eq!(
                Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap_err(),
                WireError::BadChecksum
            );
        }
        // An error whose quote is shorter than an IPv6 header.
        let repr = Icmpv6Repr::TimeExceeded {
            reason: Icmpv6TimeExceeded::FragReassembly,
            header: invoking(),
            data: &[],
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
        for len in HEADER_LEN..buf.len() {
            let packet = Icmpv6Packet::new_checked(&buf[..len]).unwrap();
            assert_eq!(
                Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Ignore).unwrap_err(),
                WireError::Truncated
            );
        }
        buf[1] = 2;
        let packet = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        assert!(matches!(
            Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Ignore),
            Err(WireError::Malformed(_))
        ));
        let mut coded = ECHO;
        coded[1] = 1;
        let packet = Icmpv6Packet::new_checked(&coded[..]).unwrap();
        assert!(matches!(
            Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Ignore),
            Err(WireError::Malformed(_))
        ));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120), t in 126u8..140) {
            let (src, dst) = addrs();
            if let Ok(packet) = Icmpv6Packet::new_checked(&bytes[..]) {
                let _ = Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify);
                let _ = Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Ignore);
            }
            // Again with a type near Neighbor Discovery's, to reach its parser.
            let mut bytes = bytes;
            if let Some(first) = bytes.first_mut() {
                *first = t;
            }
            if let Ok(packet) = Icmpv6Packet::new_checked(&bytes[..]) {
                if let Ok(repr) = Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Ignore) {
                    prop_assert!(repr.buffer_len() <= bytes.len() || matches!(repr, Icmpv6Repr::Ndisc(_)));
                }
            }
        }

        #[test]
        fn echo_round_trips(request: bool, ident: u16, seq_no: u16, data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let (src, dst) = addrs();
            let data_len = data.len();
            let repr = if request {
                Icmpv6Repr::EchoRequest { ident, seq_no, data_len }
            } else {
                Icmpv6Repr::EchoReply { ident, seq_no, data_len }
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            buf[HEADER_LEN..].copy_from_slice(&data);
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
            let packet = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap(), repr);
        }
    }
}
