//! Wire formats: one typed view per header (smoltcp's style, STYLE.md).
//!
//! Each header has two types:
//! * a view, `XxxPacket<T: AsRef<[u8]>>` (or `EthernetFrame`), over a byte
//!   buffer: `new_checked` checks every length its getters rely on, so a
//!   getter on a checked view never reads past the buffer; setters exist
//!   when `T: AsMut<[u8]>`. Field offsets are named once, in the file's
//!   `mod field`.
//! * a representation, `XxxRepr`, a plain value: `parse(&view, ..)` checks
//!   what the RFC requires and returns a [`WireError`] saying what is wrong;
//!   `emit(&self, &mut view, ..)` writes the header (a view made with
//!   `new_unchecked` over a buffer of at least `buffer_len()` bytes, else
//!   emit panics: that is the caller's bug, not the network's). TCP, ICMP
//!   and ICMPv6 have no length field of their own, so their checksum covers
//!   the whole buffer: give them exactly `buffer_len()` bytes.
//!
//! Checksums are verified by `parse` unless it is told [`Checksum::Ignore`]
//! (the NIC checked them), and written by `emit`, with the one's-complement
//! sum of `oxnet_driver::offload`.
//!
//! Nothing here allocates, and no checked view or `parse` panics, whatever
//! the bytes (each parser has a property test feeding it random bytes;
//! `frame_tests.rs` checks whole frames against the driver's checksums).
//!
//! | file | RFC | what |
//! |---|---|---|
//! | [`ethernet`] | IEEE 802.3, RFC 894 | Ethernet II frame, MAC address, EtherType |
//! | [`arp`] | RFC 826 | ARP for Ethernet and IPv4 |
//! | [`ip`] | RFC 9293 §3.1, RFC 8200 §8.1 | IP addresses, endpoints, flow keys, protocol numbers, the pseudo-header sum |
//! | [`ipv4`] | RFC 791 §3.1 | IPv4 header (options skipped), header checksum |
//! | [`ipv6`] | RFC 8200 §3, §4 | IPv6 header, walk of the extension headers to the upper layer |
//! | [`icmpv4`] | RFC 792 | ICMP echo, destination unreachable, time exceeded |
//! | [`icmpv6`] | RFC 4443 | ICMPv6 echo and error messages |
//! | [`ndisc`] | RFC 4861 §4 | Neighbor Discovery messages and their options |
//! | [`udp`] | RFC 768 | UDP header and checksum |
//! | [`tcp`] | RFC 9293 §3.1 | TCP header, flags, checksum |
//! | [`tcp::options`] | RFC 9293 §3.2, RFC 7323, RFC 2018 | MSS, Window Scale, SACK-permitted, SACK, Timestamps |
//! | [`tcp::seq_number`] | RFC 9293 §3.4 | sequence numbers: arithmetic and comparison modulo 2^32 |

pub mod arp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ndisc;
pub mod tcp;
pub mod udp;

#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod linux_capture_tests;
#[cfg(test)]
mod tcpdump_tests;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded};
pub use icmpv6::{Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr, Icmpv6TimeExceeded};
pub use ip::{pseudo_header_sum, FlowKey, IpAddress, IpEndpoint, IpProtocol};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ndisc::{NdiscOptions, NdiscPrefixInfo, NdiscRepr};
pub use tcp::{SackBlock, TcpFlags, TcpOptions, TcpPacket, TcpRepr, TcpSeqNumber, MAX_SACK_BLOCKS};
pub use udp::{UdpPacket, UdpRepr};

use std::fmt;

/// What is wrong with a packet that could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header, or than a length field says.
    Truncated,
    /// A field has a value the RFC forbids; the text names it.
    Malformed(&'static str),
    /// The checksum does not verify.
    BadChecksum,
    /// A valid packet of a kind this module does not handle; the text names it.
    Unsupported(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "packet truncated"),
            WireError::Malformed(what) => write!(f, "malformed packet: {what}"),
            WireError::BadChecksum => write!(f, "bad checksum"),
            WireError::Unsupported(what) => write!(f, "unsupported packet: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Result of parsing a packet.
pub type Result<T> = std::result::Result<T, WireError>;

/// Whether `parse` verifies a checksum: `Ignore` when it was already checked
/// (by the NIC, `oxnet_driver::offload::FLAG_CSUM_CHECKED`, or by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checksum {
    /// Compute the checksum and reject the packet if it does not verify.
    #[default]
    Verify,
    /// Trust the checksum without computing it.
    Ignore,
}

/// Big-endian u16 at `at` (the caller has checked the length).
fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Big-endian u32 at `at` (the caller has checked the length).
fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

/// Writes `value` big-endian at `at`.
fn put_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Writes `value` big-endian at `at`.
fn put_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

/// The Internet checksum to store for a one's-complement `sum` (RFC 1071:
/// the complement of the folded sum).
fn checksum_of(sum: u64) -> u16 {
    !oxnet_driver::offload::fold(sum)
}

/// Whether a one's-complement `sum` taken over data that includes its
/// checksum field verifies (RFC 1071 §1: the folded sum is all ones).
fn sum_verifies(sum: u64) -> bool {
    oxnet_driver::offload::fold(sum) == 0xFFFF
}
