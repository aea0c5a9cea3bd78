//! IPv6Input(ADDR [ADDR...]): the receive side of IPv6 for a host (RFC
//! 8200).
//!
//! Input: Ethernet frames. Checks, in order, each failure counted:
//! 1. the frame holds an Ethernet header and is not chained (`bad_header`,
//!    `chained`); a VLAN tag is not expected (`vlan`), nor another
//!    EtherType (`not_ipv6`);
//! 2. version 6 and the payload length within the frame (`bad_header`,
//!    RFC 8200 §3); the frame is trimmed to it (Ethernet padding);
//! 3. the source is not a multicast address (`bad_source`, RFC 4291
//!    §2.7: "must not be used as source addresses");
//! 4. the destination is one of ours, the solicited-node group of one of
//!    ours (ff02::1:ffXX:XXXX, the low 24 bits of the address, RFC 4291
//!    §2.7.1), or all-nodes ff02::1 (`not_for_us`). The hop limit is not
//!    checked: RFC 8200 §3 has forwarding nodes discard on it, not
//!    destinations (Neighbor Discovery's 255 is the resolver's check,
//!    RFC 4861 §7.1);
//! 5. the extension headers walk to the upper layer (the wire module's
//!    `upper_layer`, RFC 8200 §4): a chain running past the payload or
//!    out of order is `bad_header`. The options of the Hop-by-Hop and
//!    Destination Options headers are read (RFC 8200 §4.2): Pad1, PadN and
//!    Router Alert (RFC 2711) are understood, an unknown option whose
//!    type's two high bits say "skip" (00) is skipped, any other drops the
//!    packet (`unknown_option`; the ICMP Parameter Problem that 10 and 11
//!    ask for is not sent: no ICMP error sender yet; a Jumbo Payload, RFC
//!    2675, is one of these). A Routing header with segments left asks us
//!    to forward (RFC 8200 §4.4): a host does not (`routing_header`). A
//!    Fragment header is dropped and counted in `fragments` (no IPv6
//!    reassembly yet: RFC 8200 §4.5 is to come).
//!
//! Output, the headers marked (the transport mark after the extension
//! headers; module doc): 0 TCP, 1 UDP, 2 ICMPv6, 3 anything else, No Next
//! Header included (with three outputs connected, counted in
//! `other_protocol` and dropped).
//!
//! Handlers (read): every counter above, `count` (packets out), `drops`
//! (their sum).

use super::{address_words, counter, ipv6_address, Outputs, ETHER_LEN};
use super::{PACKET_HOST, PACKET_MULTICAST};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::IpProtocol;
use crate::wire::ipv6::{Ipv6Packet, HEADER_LEN};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use std::net::Ipv6Addr;

/// All-nodes, link-local scope (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1):
/// ff02::1:ff00:0/104 and the low 24 bits of the address.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let low = u128::from(addr) & 0xff_ffff;
    Ipv6Addr::from(u128::from(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0)) | low)
}

/// Why the extension headers refuse a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    UnknownOption,
    RoutingHeader,
    Malformed,
}

/// Reads the extension headers of `ip` (an IPv6 packet whose chain the
/// wire module walked to `upper`, so every header lies inside it):
/// options (RFC 8200 §4.2) and Routing headers (§4.4).
fn check_extension_headers(ip: &[u8], upper: usize) -> Result<(), Refused> {
    let mut next = IpProtocol::from(*ip.get(6).ok_or(Refused::Malformed)?);
    let mut offset = HEADER_LEN;
    while offset < upper {
        let header = ip.get(offset..).ok_or(Refused::Malformed)?;
        let len = (*header.get(1).ok_or(Refused::Malformed)? as usize + 1) * 8;
        let header = header.get(..len).ok_or(Refused::Malformed)?;
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts => check_options(&header[2..])?,
            // Segments Left, the fourth byte (RFC 8200 §4.4).
            IpProtocol::Ipv6Route if header[3] != 0 => return Err(Refused::RoutingHeader),
            _ => {}
        }
        next = header[0].into();
        offset += len;
    }
    Ok(())
}

/// The options of a Hop-by-Hop or Destination Options header: type,
/// length, data (RFC 8200 §4.2).
fn check_options(mut options: &[u8]) -> Result<(), Refused> {
    const PAD1: u8 = 0;
    const PADN: u8 = 1;
    const ROUTER_ALERT: u8 = 5;
    while let Some((&kind, rest)) = options.split_first() {
        if kind == PAD1 {
            options = rest;
            continue;
        }
        let (&len, rest) = rest.split_first().ok_or(Refused::Malformed)?;
        options = rest.get(len as usize..).ok_or(Refused::Malformed)?;
        // The two high bits of an unknown type: 00 skip it, else discard.
        if !matches!(kind, PADN | ROUTER_ALERT) && kind >> 6 != 0 {
            return Err(Refused::UnknownOption);
        }
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Drops {
    vlan: u64,
    not_ipv6: u64,
    chained: u64,
    bad_header: u64,
    bad_source: u64,
    not_for_us: u64,
    fragments: u64,
    unknown_option: u64,
    routing_header: u64,
    other_protocol: u64,
}

#[derive(Default)]
pub struct IPv6Input {
    addrs: Vec<Ipv6Addr>,
    drops: Drops,
    count: u64,
}

impl IPv6Input {
    fn addressed(&self, dst: Ipv6Addr) -> Option<u8> {
        if self.addrs.contains(&dst) {
            Some(PACKET_HOST)
        } else if dst == ALL_NODES || self.addrs.iter().any(|&a| solicited_node(a) == dst) {
            Some(PACKET_MULTICAST)
        } else {
            None
        }
    }

    fn classify(&mut self, mut p: Packet, noutputs: usize) -> Option<(usize, Packet)> {
        if p.is_chained() {
            self.drops.chained += 1;
            return None;
        }
        let Ok(frame) = EthernetFrame::new_checked(&p[..]) else {
            self.drops.bad_header += 1;
            return None;
        };
        match frame.ethertype() {
            EtherType::Ipv6 => {}
            EtherType::Vlan => {
                self.drops.vlan += 1;
                return None;
            }
            _ => {
                self.drops.not_ipv6 += 1;
                return None;
            }
        }
        let Ok(ip) = Ipv6Packet::new_checked(frame.payload()) else {
            self.drops.bad_header += 1;
            return None;
        };
        if ip.src_addr().is_multicast() {
            self.drops.bad_source += 1;
            return None;
        }
        let Some(packet_type) = self.addressed(ip.dst_addr()) else {
            self.drops.not_for_us += 1;
            return None;
        };
        let (protocol, upper) = match ip.upper_layer() {
            Ok(found) => found,
            Err(_) => {
                self.drops.bad_header += 1;
                return None;
            }
        };
        match check_extension_headers(frame.payload(), upper) {
            Ok(()) => {}
            Err(Refused::UnknownOption) => {
                self.drops.unknown_option += 1;
                return None;
            }
            Err(Refused::RoutingHeader) => {
                self.drops.routing_header += 1;
                return None;
            }
            Err(Refused::Malformed) => {
                self.drops.bad_header += 1;
                return None;
            }
        }
        let total = ETHER_LEN + HEADER_LEN + ip.payload_len() as usize;
        let port = match protocol {
            IpProtocol::Ipv6Frag => {
                self.drops.fragments += 1;
                return None;
            }
            IpProtocol::Tcp => 0,
            IpProtocol::Udp => 1,
            IpProtocol::Icmpv6 => 2,
            _ => 3,
        };
        if port >= noutputs {
            self.drops.other_protocol += 1;
            return None;
        }
        if p.set_len(total).is_err() || p.set_network_header(ETHER_LEN, upper).is_err() {
            self.drops.bad_header += 1;
            return None;
        }
        p.anno_mut().packet_type = packet_type;
        Some((port, p))
    }
}

impl Element for IPv6Input {
    fn class_name(&self) -> &'static str {
        "IPv6Input"
    }
    fn port_count(&self) -> &'static str {
        "1/3-4"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, args: &mut Args) -> Result<(), String> {
        for word in address_words(args) {
            self.addrs.push(ipv6_address(&word).map_err(|e| format!("ADDR: {e}"))?);
        }
        if self.addrs.is_empty() {
            return Err("missing mandatory ADDR argument (our IPv6 addresses)".into());
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let noutputs = ctx.noutputs();
        let mut outs = Outputs::new(noutputs.max(4), batch.len());
        let len = batch.len();
        batch.consume_front(len, |p| {
            if let Some((port, p)) = self.classify(p, noutputs) {
                self.count += 1;
                outs.put(port, p);
            }
        });
        outs.push_all(ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("drops", true, false),
            ("vlan", true, false),
            ("not_ipv6", true, false),
            ("chained", true, false),
            ("bad_header", true, false),
            ("bad_source", true, false),
            ("not_for_us", true, false),
            ("fragments", true, false),
            ("unknown_option", true, false),
            ("routing_header", true, false),
            ("other_protocol", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let d = &self.drops;
        counter(
            &[
                ("vlan", d.vlan),
                ("not_ipv6", d.not_ipv6),
                ("chained", d.chained),
                ("bad_header", d.bad_header),
                ("bad_source", d.bad_source),
                ("not_for_us", d.not_for_us),
                ("fragments", d.fragments),
                ("unknown_option", d.unknown_option),
                ("routing_header", d.routing_header),
                ("other_protocol", d.other_protocol),
            ],
            &[("count", self.count)],
            name,
        )
    }
}
