//! Writing a whole IP packet from a transport's point of view: the
//! transport layers that build their own packets (TCP's segments, UDP's
//! datagrams: they know both addresses) call this for the IP header, the
//! network mark and the next-hop annotation (on-link: the destination),
//! leaving the resolver to prepend the Ethernet header.

use crate::anno;
use crate::wire::{IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr};
use oxnet_driver::Packet;

/// IPv4's time to live and IPv6's hop limit (RFC 1122 §3.2.1.7
/// recommends 64).
pub const HOP_LIMIT: u8 = 64;

/// Makes `packet` (whatever it held) an IP packet from `src` to `dst`
/// carrying `l4_len` bytes of `protocol`, which `fill` writes (it gets
/// exactly those bytes, after the IP header is written, so a checksum
/// over the pseudo-header can be computed there). `traffic_class` is the
/// IPv4 TOS byte or the IPv6 traffic class (DSCP and ECN). False if it
/// does not fit or the addresses mix families; the packet is then empty.
pub fn write_ip_packet(
    packet: &mut Packet,
    src: IpAddress,
    dst: IpAddress,
    protocol: IpProtocol,
    l4_len: usize,
    traffic_class: u8,
    fill: impl FnOnce(&mut [u8]),
) -> bool {
    packet.reset();
    let ip_len = match src {
        IpAddress::V4(_) => 20,
        IpAddress::V6(_) => 40,
    };
    if packet.set_len(ip_len + l4_len).is_err() {
        return false;
    }
    {
        let bytes: &mut [u8] = &mut *packet;
        let (ip, l4) = bytes.split_at_mut(ip_len);
        match (src, dst) {
            (IpAddress::V4(s), IpAddress::V4(d)) => Ipv4Repr {
                src: s,
                dst: d,
                protocol,
                payload_len: l4_len,
                ttl: HOP_LIMIT,
                dscp_ecn: traffic_class,
                ident: 0,
                // Sent with DF (RFC 1191): never fragmented on the way;
                // TCP's MSS and UDP's callers keep under the MTU.
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut *ip)),
            (IpAddress::V6(s), IpAddress::V6(d)) => Ipv6Repr {
                src: s,
                dst: d,
                next_header: protocol,
                payload_len: l4_len,
                hop_limit: HOP_LIMIT,
                traffic_class,
                flow_label: 0,
            }
            .emit(&mut Ipv6Packet::new_unchecked(&mut *ip)),
            _ => {
                let _ = packet.set_len(0);
                return false;
            }
        }
        fill(l4);
    }
    if packet.set_network_header(0, ip_len).is_err() {
        return false;
    }
    match dst {
        IpAddress::V4(d) => anno::set_next_hop_v4(packet, d),
        IpAddress::V6(d) => anno::set_next_hop_v6(packet, d),
    }
    true
}
