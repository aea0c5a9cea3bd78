//! The stack's IP layer as elements: input checks and demultiplexing
//! (IPv4 with reassembly, IPv6), output (the IP header in front of a
//! transport segment, the next hop chosen), and the ICMP responders.
//!
//! | class | ports | processing | what |
//! |---|---|---|---|
//! | IPv4Input(ADDR [ADDR...], [BROADCAST true], ...) | 1/3-4 | push | checks Ethernet/IPv4 frames (RFC 791 §3.1, RFC 1122 §3.2.1), reassembles fragments (RFC 791 §3.2, RFC 5722's overlap rule), marks the headers; out by protocol: 0 TCP, 1 UDP, 2 ICMP, 3 other |
//! | IPv6Input(ADDR [ADDR...]) | 1/3-4 | push | checks Ethernet/IPv6 frames (RFC 8200 §3), accepts our addresses, their solicited-node groups and ff02::1 (RFC 4291 §2.7.1), walks the extension headers (RFC 8200 §4); out: 0 TCP, 1 UDP, 2 ICMPv6, 3 other |
//! | IPv4Output(SRC, PROTOCOL p, [TTL 64], [GATEWAY ip, NETWORK prefix], ...) | 1/1 | push | prepends the IPv4 header to a transport segment, fills (or offloads) its checksum and the transport checksum, sets the next hop |
//! | IPv6Output(SRC, PROTOCOL p, [HOP_LIMIT 64], [GATEWAY ip, NETWORK prefix], ...) | 1/1 | push | the same for IPv6 (RFC 8200 §3, §8.1) |
//! | ICMPv4Responder([TTL 64], [GATEWAY ip, NETWORK prefix]) | 1/2 | push | echo requests answered (RFC 792); errors (unreachable, time exceeded, parameter problem) out of 1 with the quoted header marked |
//! | ICMPv6Responder([SRC addr], [HOP_LIMIT 64], [GATEWAY ip, NETWORK prefix]) | 1/3 | push | echo requests answered (RFC 4443 §4.2); errors out of 1; Neighbor Discovery (133-137) out of 2 untouched; MLD counted and dropped |
//!
//! Every element takes a batch and splits it per output, packets in order
//! within each; every packet it does not pass on is counted in a handler
//! named after the reason (and in `drops`, their sum).
//!
//! ## Contracts with the elements around these
//!
//! * **Input side** (IPv4Input, IPv6Input out; the responders and the
//!   transport elements in): the packet is the Ethernet frame as
//!   received, nothing stripped, trimmed to the IP packet's length (the
//!   Ethernet padding cut off); the network header mark is on the IP
//!   header (offset 14) and the transport header mark on the upper-layer
//!   header (after the IPv4 options, or after the IPv6 extension
//!   headers). The annotation `packet_type` says how it was addressed
//!   (Click's values: 0 host, 1 broadcast, 2 multicast). The driver's
//!   receive checksum verdict stays in the metadata for the transport
//!   checks (for IPv4, `oxnet_driver::offload::rx_checksum` computes it
//!   when the NIC did not, as for a reassembled datagram, which has
//!   none; for IPv6 the verdicts are the TCP/UDP checksum's alone). A
//!   reassembled IPv4 datagram looks the same (the first fragment's Ethernet and IP
//!   header, total length and fragment fields rewritten, checksum
//!   recomputed) but for being a new packet from the router's pool: when
//!   it does not fit one buffer it is a **chained** packet, the headers
//!   and as much data as fits in the first segment, the rest in the next
//!   ones (`Packet::segments`, `total_len`; every segment but the last
//!   holds an even number of bytes, so one's-complement sums can run
//!   segment by segment).
//! * **Output side** (transport elements to IPv4Output / IPv6Output): the
//!   packet's data starts with the transport header (TCP, UDP, ICMP: the
//!   element prepends nothing); the **destination address** is in the
//!   next-hop annotation (`anno::next_hop_v4` / `next_hop_v6`, Click's
//!   DST_IP convention: the destination on the way in, the next hop on
//!   the way out, as Click's route lookups rewrite it); the **protocol**
//!   and the source address are the element's arguments (one output
//!   element per protocol and source). Out of IPv4Output / IPv6Output and
//!   the responders' output 0: an IP packet without Ethernet header, the
//!   network mark on it, the next hop in the annotation, for the
//!   neighbour resolver, which prepends the Ethernet header.
//! * **ICMP errors** (responders' output 1): the frame as received; the
//!   network mark moved to the *quoted* IP header and the transport mark
//!   to the quoted transport header (at least its first 8 bytes are
//!   there: ports, and TCP's sequence number; for IPv6 the mark is right
//!   after the quoted fixed header: quoted extension headers, which a cut
//!   quote may not hold whole, are not walked); the ICMP header itself is
//!   the 8 bytes before the network mark (type, code, and the MTU of
//!   "fragmentation needed" / "packet too big").
//!
//! How they sit in a host's configuration (the resolvers are the
//! neighbour family's; `...` the transport elements):
//!
//! ```text
//! dev :: FromDevice(...) -> eth :: Classifier(12/0800, 12/86dd, 12/0806);
//! eth[0] -> ip4 :: IPv4Input(10.0.0.1/24);
//! ip4[0] -> ... TCP ...; ip4[1] -> ... UDP ...;
//! ip4[2] -> icmp4 :: ICMPv4Responder(GATEWAY 10.0.0.254, NETWORK 10.0.0.0/24);
//! icmp4[0] -> arp :: ARPResolver(10.0.0.1/24, MAC) -> ToDevice(...);
//! icmp4[1] -> ... errors for TCP and UDP ...;
//! ... TCP ... -> IPv4Output(10.0.0.1, PROTOCOL tcp, L4_CHECKSUM true,
//!                GATEWAY 10.0.0.254, NETWORK 10.0.0.0/24) -> arp;
//! eth[2] -> [1]arp;
//! ```
//!
//! | file | what |
//! |---|---|
//! | [`ipv4_input`] | IPv4Input |
//! | [`reassembly`] | the IPv4 reassembly table (RFC 791 §3.2, RFC 815, RFC 5722) |
//! | [`ipv6_input`] | IPv6Input |
//! | [`output`] | IPv4Output and IPv6Output |
//! | [`route`] | the on-link / gateway choice of the next hop |
//! | [`icmp`] | ICMPv4Responder and ICMPv6Responder |
//! | [`encap`] | a whole IP packet written for a transport that builds its own (TCP, UDP) |

pub mod encap;
pub mod icmp;
pub mod ipv4_input;
pub mod ipv6_input;
pub mod output;
pub mod reassembly;
pub mod route;

#[cfg(test)]
mod tests;

use oxnet_driver::Packet;
use oxnet_graph::element::Element;
use oxnet_graph::router::Ctx;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The classes of this family (see [`crate::elements::MODULES`]).
pub const MODULE: oxnet_graph::elements::Module = oxnet_graph::elements::Module {
    classes: &[
        "ICMPv4Responder",
        "ICMPv6Responder",
        "IPv4Input",
        "IPv4Output",
        "IPv6Input",
        "IPv6Output",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "ICMPv4Responder" => Box::<icmp::ICMPv4Responder>::default(),
        "ICMPv6Responder" => Box::<icmp::ICMPv6Responder>::default(),
        "IPv4Input" => Box::<ipv4_input::IPv4Input>::default(),
        "IPv4Output" => Box::new(output::IpOutput::v4()),
        "IPv6Input" => Box::<ipv6_input::IPv6Input>::default(),
        "IPv6Output" => Box::new(output::IpOutput::v6()),
        _ => return None,
    })
}

/// Click's packet type annotation: addressed to us.
pub const PACKET_HOST: u8 = 0;
/// Click's packet type annotation: to a broadcast address.
pub const PACKET_BROADCAST: u8 = 1;
/// Click's packet type annotation: to a multicast group.
pub const PACKET_MULTICAST: u8 = 2;

/// Length of the Ethernet header in front of the IP header on input.
pub const ETHER_LEN: usize = crate::wire::ethernet::HEADER_LEN;

/// One batch per output, filled in order, pushed at the end (the TCP
/// elements' [`SplitOuts`](crate::tcp::elements::SplitOuts): no
/// allocation per batch).
pub(crate) struct Outputs {
    outs: crate::tcp::elements::SplitOuts,
    capacity: usize,
}

impl Outputs {
    pub(crate) fn new(n: usize, capacity: usize) -> Outputs {
        Outputs {
            outs: crate::tcp::elements::SplitOuts::new(n),
            capacity,
        }
    }

    /// Queues `p` for output `port` (freed if there is no such output).
    pub(crate) fn put(&mut self, port: usize, p: Packet) {
        self.outs.put(port, p, self.capacity);
    }

    pub(crate) fn push_all(self, ctx: &mut Ctx<'_>) {
        crate::tcp::elements::push_all(ctx, self.outs);
    }
}

/// The one's-complement sum (RFC 1071) of a packet's bytes from `offset`
/// in its first segment to the end of its chain, a byte left over at the
/// end of a segment paired with the first of the next.
pub(crate) fn chain_sum(p: &Packet, offset: usize, mut sum: u64) -> u64 {
    let mut pending: Option<u8> = None;
    for (i, segment) in p.segments().enumerate() {
        let mut bytes: &[u8] = if i == 0 {
            segment.get(offset..).unwrap_or(&[])
        } else {
            segment
        };
        if let (Some(high), Some((&low, rest))) = (pending, bytes.split_first()) {
            sum += u16::from_be_bytes([high, low]) as u64;
            pending = None;
            bytes = rest;
        }
        let even = bytes.len() & !1;
        sum = oxnet_driver::offload::ones_sum(&bytes[..even], sum);
        if even < bytes.len() {
            pending = Some(bytes[even]);
        }
    }
    if let Some(high) = pending {
        sum += (high as u64) << 8;
    }
    sum
}

/// An IPv4 address argument with an optional prefix length
/// (`10.0.0.1` or `10.0.0.1/24`): the address and its mask.
pub(crate) fn ipv4_with_prefix(text: &str) -> Result<(Ipv4Addr, Ipv4Addr), String> {
    let (addr, mask) = match oxnet_graph::args::ip_address(text) {
        Ok(a) => (a, [255; 4]),
        Err(_) => oxnet_graph::args::ip_prefix(text)?,
    };
    Ok((Ipv4Addr::from(addr), Ipv4Addr::from(mask)))
}

/// An IPv6 address argument (RFC 4291 §2.2 text form).
pub(crate) fn ipv6_address(text: &str) -> Result<Ipv6Addr, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("'{}' is not an IPv6 address", text.trim()))
}

/// An IPv6 prefix argument, `ADDR/LEN`: the address and the length.
pub(crate) fn ipv6_prefix(text: &str) -> Result<(Ipv6Addr, u8), String> {
    let t = text.trim();
    let (addr, len) = t
        .split_once('/')
        .ok_or_else(|| format!("'{t}' is not an IPv6 prefix (ADDR/LEN)"))?;
    let len: u8 = len
        .trim()
        .parse()
        .ok()
        .filter(|l| *l <= 128)
        .ok_or_else(|| format!("'{t}': the prefix length must be 0 to 128"))?;
    Ok((ipv6_address(addr)?, len))
}

/// The remaining positional arguments, each possibly several addresses
/// separated by spaces (`IPv4Input(10.0.0.1 10.0.0.2)` or
/// `IPv4Input(10.0.0.1, 10.0.0.2)`).
pub(crate) fn address_words(args: &mut oxnet_graph::args::Args) -> Vec<String> {
    args.rest_positional()
        .iter()
        .flat_map(|a| a.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// An optional boolean keyword.
pub(crate) fn bool_arg(args: &mut oxnet_graph::args::Args, key: &str) -> Result<bool, String> {
    Ok(oxnet_graph::args::opt(args.keyword(key), oxnet_graph::args::boolean, key)?.unwrap_or(false))
}

/// An optional unsigned keyword with a default and an upper bound.
pub(crate) fn unsigned_arg(
    args: &mut oxnet_graph::args::Args,
    key: &str,
    default: u64,
    max: u64,
) -> Result<u64, String> {
    let v = oxnet_graph::args::opt(args.keyword(key), oxnet_graph::args::unsigned, key)?.unwrap_or(default);
    if v > max {
        return Err(format!("{key}: {v} is over the maximum of {max}"));
    }
    Ok(v)
}

/// A handler's value: `drops` is the sum of the drop counters, any
/// other name one of the drop or other counters.
pub(crate) fn counter(drops: &[(&str, u64)], others: &[(&str, u64)], name: &str) -> Option<String> {
    if name == "drops" {
        return Some(drops.iter().map(|(_, v)| v).sum::<u64>().to_string());
    }
    drops
        .iter()
        .chain(others)
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_string())
}
