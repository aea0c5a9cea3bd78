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
//!    out of order is `bad_header`; the options inside Hop-by-Hop and
//!    Destination Options headers are skipped, not acted on (RFC 8200
//!    §4.2's actions for unknown options are not done yet). A Fragment
//!    header is dropped and counted in `fragments` (no IPv6 reassembly
//!    yet: RFC 8200 §4.5 is to come).
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

#[derive(Debug, Default)]
struct Drops {
    vlan: u64,
    not_ipv6: u64,
    chained: u64,
    bad_header: u64,
    bad_source: u64,
    not_for_us: u64,
    fragments: u64,
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
                ("other_protocol", d.other_protocol),
            ],
            &[("count", self.count)],
            name,
        )
    }
}
