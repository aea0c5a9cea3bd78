//! What IPv4 and IPv6 share: addresses of either family, endpoints, the
//! flow key of a connection, protocol numbers, and the pseudo-header that
//! TCP, UDP and ICMPv6 checksums cover (RFC 9293 §3.1, RFC 8200 §8.1).

use oxnet_driver::offload::ones_sum;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An IPv4 or IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpAddress {
    /// IPv4.
    V4(Ipv4Addr),
    /// IPv6.
    V6(Ipv6Addr),
}

impl IpAddress {
    /// Whether this is 0.0.0.0 or ::.
    pub fn is_unspecified(&self) -> bool {
        match self {
            IpAddress::V4(a) => a.is_unspecified(),
            IpAddress::V6(a) => a.is_unspecified(),
        }
    }

    /// Whether this is a multicast address (224.0.0.0/4, ff00::/8).
    pub fn is_multicast(&self) -> bool {
        match self {
            IpAddress::V4(a) => a.is_multicast(),
            IpAddress::V6(a) => a.is_multicast(),
        }
    }

    /// Whether this is an IPv4 address.
    pub fn is_ipv4(&self) -> bool {
        matches!(self, IpAddress::V4(_))
    }

    /// Whether this is an IPv6 address.
    pub fn is_ipv6(&self) -> bool {
        matches!(self, IpAddress::V6(_))
    }
}

impl From<Ipv4Addr> for IpAddress {
    fn from(a: Ipv4Addr) -> Self {
        IpAddress::V4(a)
    }
}

impl From<Ipv6Addr> for IpAddress {
    fn from(a: Ipv6Addr) -> Self {
        IpAddress::V6(a)
    }
}

impl From<IpAddress> for std::net::IpAddr {
    fn from(a: IpAddress) -> Self {
        match a {
            IpAddress::V4(a) => a.into(),
            IpAddress::V6(a) => a.into(),
        }
    }
}

impl From<std::net::IpAddr> for IpAddress {
    fn from(a: std::net::IpAddr) -> Self {
        match a {
            std::net::IpAddr::V4(a) => IpAddress::V4(a),
            std::net::IpAddr::V6(a) => IpAddress::V6(a),
        }
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddress::V4(a) => a.fmt(f),
            IpAddress::V6(a) => a.fmt(f),
        }
    }
}

/// An address and a port: one end of a TCP connection or UDP flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpEndpoint {
    /// The address.
    pub addr: IpAddress,
    /// The port.
    pub port: u16,
}

impl IpEndpoint {
    /// The endpoint `addr`:`port`.
    pub fn new(addr: impl Into<IpAddress>, port: u16) -> Self {
        IpEndpoint {
            addr: addr.into(),
            port,
        }
    }
}

impl fmt::Display for IpEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            IpAddress::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddress::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// The two ends of a connection as this host sees it: what a table of
/// connections is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// This host's end.
    pub local: IpEndpoint,
    /// The peer's end.
    pub remote: IpEndpoint,
}

impl FlowKey {
    /// The same flow seen from the other end.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            local: self.remote,
            remote: self.local,
        }
    }
}

/// The IPv4 Protocol / IPv6 Next Header field (IANA "Assigned Internet
/// Protocol Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// 0: IPv6 Hop-by-Hop Options (RFC 8200 §4.3).
    HopByHop,
    /// 1: ICMP (RFC 792).
    Icmp,
    /// 6: TCP (RFC 9293).
    Tcp,
    /// 17: UDP (RFC 768).
    Udp,
    /// 43: IPv6 Routing header (RFC 8200 §4.4).
    Ipv6Route,
    /// 44: IPv6 Fragment header (RFC 8200 §4.5).
    Ipv6Frag,
    /// 58: ICMPv6 (RFC 4443).
    Icmpv6,
    /// 59: no next header (RFC 8200 §4.7).
    Ipv6NoNxt,
    /// 60: IPv6 Destination Options (RFC 8200 §4.6).
    Ipv6Opts,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        match value {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        match value {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

/// The one's-complement sum (not folded, not complemented) of the
/// pseudo-header that a TCP, UDP or ICMPv6 checksum covers besides the
/// upper-layer packet:
/// * IPv4 (RFC 9293 §3.1, RFC 768): source, destination, a zero byte, the
///   protocol, and the 16-bit TCP/UDP length;
/// * IPv6 (RFC 8200 §8.1): source, destination, the 32-bit upper-layer
///   length, three zero bytes, and the next header.
///
/// Both forms add up to the same words but for the addresses, so one sum
/// serves both: the length is added as two 16-bit words (its high word is 0
/// for IPv4, where the length fits 16 bits). `src` and `dst` are of the same
/// family; mixing them is a caller's bug and gives a meaningless sum.
pub fn pseudo_header_sum(src: &IpAddress, dst: &IpAddress, protocol: IpProtocol, length: u32) -> u64 {
    let mut sum = 0;
    for addr in [src, dst] {
        sum = match addr {
            IpAddress::V4(a) => ones_sum(&a.octets(), sum),
            IpAddress::V6(a) => ones_sum(&a.octets(), sum),
        };
    }
    sum + u8::from(protocol) as u64 + (length >> 16) as u64 + (length & 0xFFFF) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::offload::fold;

    #[test]
    fn ipv4_pseudo_header_sum_by_hand() {
        // 192.168.0.1 -> 192.168.0.199, TCP, length 20:
        // c0a8 + 0001 + c0a8 + 00c7 + 0006 + 0014 = 0x18232 -> folded 0x8233.
        let src = IpAddress::V4(Ipv4Addr::new(192, 168, 0, 1));
        let dst = IpAddress::V4(Ipv4Addr::new(192, 168, 0, 199));
        let sum = pseudo_header_sum(&src, &dst, IpProtocol::Tcp, 20);
        assert_eq!(sum, 0x18232);
        assert_eq!(fold(sum), 0x8233);
    }

    #[test]
    fn ipv6_pseudo_header_sum_by_hand() {
        // fe80::1 -> fe80::2, ICMPv6, length 0x1_0008 (a jumbogram's length
        // still adds as two words): fe80 + 1 + fe80 + 2 + 3a + 1 + 8.
        let src = IpAddress::V6("fe80::1".parse().unwrap());
        let dst = IpAddress::V6("fe80::2".parse().unwrap());
        let sum = pseudo_header_sum(&src, &dst, IpProtocol::Icmpv6, 0x1_0008);
        assert_eq!(sum, 0xfe80 + 1 + 0xfe80 + 2 + 58 + 1 + 8);
    }

    #[test]
    fn protocol_numbers() {
        for n in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(n)), n);
        }
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(58), IpProtocol::Icmpv6);
        assert_eq!(IpProtocol::from(200), IpProtocol::Unknown(200));
    }

    #[test]
    fn endpoint_display_and_flow_key() {
        let a = IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), 80);
        let b = IpEndpoint::new("2001:db8::1".parse::<Ipv6Addr>().unwrap(), 443);
        assert_eq!(a.to_string(), "10.0.0.1:80");
        assert_eq!(b.to_string(), "[2001:db8::1]:443");
        let key = FlowKey { local: a, remote: b };
        assert_eq!(key.reversed().local, b);
        assert_eq!(key.reversed().reversed(), key);
    }
}
