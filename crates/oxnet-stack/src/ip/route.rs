//! The next hop of an outgoing packet: the destination itself when it is
//! on the link, else the gateway (RFC 1122 §3.3.1.1 for IPv4: "local/
//! remote decision" by the address mask; RFC 4861 §5.2 for IPv6, where
//! link-local and multicast destinations are always on the link). One
//! prefix and one gateway: the host's usual single default route.

use super::{ipv4_with_prefix, ipv6_address, ipv6_prefix};
use oxnet_graph::args::Args;
use std::net::{Ipv4Addr, Ipv6Addr};

/// `GATEWAY ip, NETWORK prefix` for IPv4: without a gateway every
/// destination is on the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteV4 {
    /// (network, mask, gateway).
    route: Option<(Ipv4Addr, Ipv4Addr, Ipv4Addr)>,
}

impl RouteV4 {
    /// Reads `GATEWAY` and `NETWORK` (both or neither).
    pub fn configure(args: &mut Args) -> Result<RouteV4, String> {
        match (args.keyword("GATEWAY"), args.keyword("NETWORK")) {
            (None, None) => Ok(RouteV4::default()),
            (Some(gw), Some(net)) => {
                let gateway = Ipv4Addr::from(oxnet_graph::args::ip_address(&gw).map_err(|e| format!("GATEWAY: {e}"))?);
                let (addr, mask) = ipv4_with_prefix(&net).map_err(|e| format!("NETWORK: {e}"))?;
                Ok(RouteV4 {
                    route: Some((addr & mask, mask, gateway)),
                })
            }
            _ => Err("GATEWAY and NETWORK go together (NETWORK says which destinations are on the link)".into()),
        }
    }

    /// The next hop towards `dst`.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        match self.route {
            Some((net, mask, gateway)) if dst & mask != net && !dst.is_multicast() && !dst.is_broadcast() => gateway,
            _ => dst,
        }
    }
}

/// `GATEWAY ip, NETWORK prefix` for IPv6.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteV6 {
    /// (network, prefix length, gateway).
    route: Option<(Ipv6Addr, u8, Ipv6Addr)>,
}

fn masked(addr: Ipv6Addr, len: u8) -> u128 {
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len as u32) };
    u128::from(addr) & mask
}

impl RouteV6 {
    /// Reads `GATEWAY` and `NETWORK` (both or neither).
    pub fn configure(args: &mut Args) -> Result<RouteV6, String> {
        match (args.keyword("GATEWAY"), args.keyword("NETWORK")) {
            (None, None) => Ok(RouteV6::default()),
            (Some(gw), Some(net)) => {
                let gateway = ipv6_address(&gw).map_err(|e| format!("GATEWAY: {e}"))?;
                let (addr, len) = ipv6_prefix(&net).map_err(|e| format!("NETWORK: {e}"))?;
                Ok(RouteV6 {
                    route: Some((addr, len, gateway)),
                })
            }
            _ => Err("GATEWAY and NETWORK go together (NETWORK says which destinations are on the link)".into()),
        }
    }

    /// The next hop towards `dst`.
    pub fn next_hop(&self, dst: Ipv6Addr) -> Ipv6Addr {
        let link_local = dst.segments()[0] & 0xffc0 == 0xfe80;
        match self.route {
            Some((net, len, gateway)) if masked(dst, len) != masked(net, len) && !link_local && !dst.is_multicast() => {
                gateway
            }
            _ => dst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_link_or_through_the_gateway() {
        let mut args = Args::new("GATEWAY 10.0.0.254, NETWORK 10.0.0.0/24");
        let r = RouteV4::configure(&mut args).unwrap();
        assert_eq!(r.next_hop(Ipv4Addr::new(10, 0, 0, 9)), Ipv4Addr::new(10, 0, 0, 9));
        assert_eq!(r.next_hop(Ipv4Addr::new(8, 8, 8, 8)), Ipv4Addr::new(10, 0, 0, 254));
        assert_eq!(r.next_hop(Ipv4Addr::new(224, 0, 0, 1)), Ipv4Addr::new(224, 0, 0, 1));
        assert_eq!(
            RouteV4::default().next_hop(Ipv4Addr::new(8, 8, 8, 8)),
            Ipv4Addr::new(8, 8, 8, 8)
        );
        assert!(RouteV4::configure(&mut Args::new("GATEWAY 10.0.0.254")).is_err());

        let mut args = Args::new("GATEWAY fe80::1, NETWORK 2001:db8::/64");
        let r = RouteV6::configure(&mut args).unwrap();
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(r.next_hop(v6("2001:db8::5")), v6("2001:db8::5"));
        assert_eq!(r.next_hop(v6("2001:db9::5")), v6("fe80::1"));
        assert_eq!(r.next_hop(v6("fe80::7")), v6("fe80::7"));
        assert_eq!(r.next_hop(v6("ff02::1")), v6("ff02::1"));
    }
}
