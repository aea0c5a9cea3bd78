//! IPv4Output and IPv6Output: the IP header in front of a transport
//! segment (the module doc's output contract: the segment starts at the
//! packet's data, the destination is in the next-hop annotation, the
//! protocol and source are arguments).
//!
//! IPv4Output(SRC, PROTOCOL p, [TTL 64], [GATEWAY ip, NETWORK prefix],
//! [L4_CHECKSUM false], [CHECKSUM_OFFLOAD false], [MTU 1500]):
//! * writes a 20-byte header (RFC 791 §3.1): no options, TTL (RFC 1700's
//!   64 by default), the identification from a counter that starts at 0
//!   (RFC 6864 §4.1 asks only that it not repeat too soon for one source,
//!   destination and protocol; a counter is predictable, which RFC 7739
//!   warns about for fragments: randomising it is to come), Don't
//!   Fragment for TCP (as hosts doing RFC 1191's path MTU discovery do;
//!   that discovery is not done here: "fragmentation needed" errors go
//!   out of ICMPv4Responder's output 1 for TCP to act on), and the header
//!   checksum;
//! * `L4_CHECKSUM true`: also the TCP or UDP checksum over the
//!   pseudo-header (RFC 9293 §3.1, RFC 768; UDP's 0 sent as 0xFFFF) or
//!   the ICMP checksum (RFC 792), since the transport elements leave the
//!   field to the IP layer;
//! * `CHECKSUM_OFFLOAD true` (the device has it): the IPv4 header
//!   checksum, and the TCP/UDP one with `L4_CHECKSUM`, are asked of the
//!   device through the packet's `TxOffload` (Ethernet header of 14
//!   bytes, which the resolver prepends) and left 0 here; ICMP's is
//!   always computed here;
//! * the next-hop annotation becomes the destination if it is on the link
//!   per NETWORK (or there is no GATEWAY), else GATEWAY ([`super::route`]).
//!
//! A TCP segment whose `TxOffload` already asks for segmentation
//! (`TX_TSO` with its MSS, from the TCP segmentation element) may pass
//! MTU: the request is kept, the header lengths filled in, the transport
//! checksum left to the device (which writes one per segment, as the
//! driver's software fallback does), and the total length must still fit
//! 16 bits.
//!
//! No fragmentation (RFC 791 §3.2 is not done on output): a packet whose
//! IP length would pass MTU is dropped and counted in `too_big`, as one
//! with no destination (`no_destination`), too little head room
//! (`no_headroom`), or a transport header shorter than its protocol's in
//! the first buffer (`bad_segment`). A chained segment (a large one for
//! TSO) is taken: the header goes in front of its first buffer, the
//! checksum runs over the whole chain.
//!
//! IPv6Output(SRC, PROTOCOL p, [HOP_LIMIT 64], [GATEWAY ip, NETWORK
//! prefix], [L4_CHECKSUM false], [MTU 1500]): the same with the 40-byte
//! IPv6 header (RFC 8200 §3: traffic class and flow label 0, no extension
//! headers), the checksums over the IPv6 pseudo-header (RFC 8200 §8.1;
//! ICMPv6's too, RFC 4443 §2.3), always computed here (IPv6Output has no
//! CHECKSUM_OFFLOAD; TCP's data segments over IPv6 ask the device,
//! `tcp::offload`); link-local and multicast destinations are
//! always on the link.
//!
//! Ports: 1 in, 1 out (push). Handlers (read): `count`, `drops`, and one
//! per drop reason above.

use super::route::{RouteV4, RouteV6};
use super::{bool_arg, chain_sum, counter, ipv4_with_prefix, ipv6_address, unsigned_arg, ETHER_LEN};
use crate::anno;
use crate::wire::ip::{pseudo_header_sum, IpAddress, IpProtocol};
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::wire::{icmpv4, tcp, udp};
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM};
use oxnet_driver::{Packet, PacketBatch, TxOffload};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The family's own settings.
enum Family {
    V4 {
        src: Ipv4Addr,
        route: RouteV4,
        offload: bool,
    },
    V6 {
        src: Ipv6Addr,
        route: RouteV6,
    },
}

#[derive(Debug, Default)]
struct Drops {
    no_destination: u64,
    no_headroom: u64,
    too_big: u64,
    bad_segment: u64,
}

/// IPv4Output or IPv6Output.
pub struct IpOutput {
    family: Family,
    protocol: IpProtocol,
    /// TTL or hop limit.
    ttl: u8,
    l4_checksum: bool,
    mtu: usize,
    ident: u16,
    drops: Drops,
    count: u64,
}

impl IpOutput {
    pub fn v4() -> IpOutput {
        IpOutput::new(Family::V4 {
            src: Ipv4Addr::UNSPECIFIED,
            route: RouteV4::default(),
            offload: false,
        })
    }

    pub fn v6() -> IpOutput {
        IpOutput::new(Family::V6 {
            src: Ipv6Addr::UNSPECIFIED,
            route: RouteV6::default(),
        })
    }

    fn new(family: Family) -> IpOutput {
        IpOutput {
            family,
            protocol: IpProtocol::Tcp,
            ttl: 64,
            l4_checksum: false,
            mtu: 1500,
            ident: 0,
            drops: Drops::default(),
            count: 0,
        }
    }

    /// The shortest transport header of the protocol, and where its
    /// checksum field is (None: not a protocol whose checksum we fill).
    fn transport(&self) -> Option<(usize, usize)> {
        match self.protocol {
            IpProtocol::Tcp => Some((tcp::HEADER_LEN, 16)),
            IpProtocol::Udp => Some((udp::HEADER_LEN, 6)),
            IpProtocol::Icmp | IpProtocol::Icmpv6 => Some((icmpv4::HEADER_LEN, 2)),
            _ => None,
        }
    }

    /// The transport header's length (TCP's data offset), if the segment
    /// holds a whole one in its first buffer.
    fn segment_header_len(&self, p: &Packet) -> Option<usize> {
        let (min, _) = self.transport().unwrap_or((0, 0));
        if p.len() < min {
            return None;
        }
        match self.protocol {
            IpProtocol::Tcp => tcp::TcpPacket::new_checked(&p[..]).ok().map(|t| t.header_len()),
            _ => Some(min),
        }
    }

    /// Fills the transport checksum of the segment after `ip_len` bytes of
    /// IP header, with the pseudo-header of `src` and `dst` (none for
    /// ICMP over IPv4).
    fn fill_l4_checksum(&self, p: &mut Packet, ip_len: usize, src: IpAddress, dst: IpAddress) {
        let length = (p.total_len() - ip_len) as u32;
        let Some((_, field)) = self.transport() else {
            return;
        };
        let at = ip_len + field;
        p[at..at + 2].copy_from_slice(&[0, 0]);
        let seed = match self.protocol {
            IpProtocol::Icmp => 0,
            _ => pseudo_header_sum(&src, &dst, self.protocol, length),
        };
        let mut checksum = !oxnet_driver::offload::fold(chain_sum(p, ip_len, seed));
        if self.protocol == IpProtocol::Udp && checksum == 0 {
            checksum = 0xFFFF; // RFC 768: 0 means "no checksum"
        }
        p[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
    }

    fn process(&mut self, mut p: Packet) -> Option<Packet> {
        let Some(l4_len) = self.segment_header_len(&p) else {
            self.drops.bad_segment += 1;
            return None;
        };
        let payload_len = p.total_len();
        // The header goes in front of the first segment; the rest of a
        // chain waits aside meanwhile (prepend() moves the first segment
        // only, and append() recounts the chain's length after).
        let rest = p.take_next();
        match self.family {
            Family::V4 { src, route, offload } => {
                let dst = anno::next_hop_v4(&p);
                if dst.is_unspecified() {
                    self.drops.no_destination += 1;
                    return None;
                }
                // A large TCP segment the device is asked to cut (TSO) may
                // pass the MTU, not the 16-bit total length.
                let requested = p.tx_offload();
                let tso = requested.flags & TX_TSO != 0 && self.protocol == IpProtocol::Tcp;
                if 20 + payload_len > 65535 || (!tso && 20 + payload_len > self.mtu) {
                    self.drops.too_big += 1;
                    return None;
                }
                if p.prepend(20).is_err() {
                    self.drops.no_headroom += 1;
                    return None;
                }
                let repr = Ipv4Repr {
                    src,
                    dst,
                    protocol: self.protocol,
                    payload_len,
                    ttl: self.ttl,
                    dscp_ecn: 0,
                    ident: self.ident,
                    dont_frag: self.protocol == IpProtocol::Tcp,
                    more_frags: false,
                    frag_offset: 0,
                };
                self.ident = self.ident.wrapping_add(1);
                repr.emit(&mut Ipv4Packet::new_unchecked(&mut p[..20]));
                if let Some(rest) = rest {
                    p.append(rest);
                }
                let l4_offload = offload && matches!(self.protocol, IpProtocol::Tcp | IpProtocol::Udp);
                if self.l4_checksum && !l4_offload && !tso {
                    self.fill_l4_checksum(&mut p, 20, src.into(), dst.into());
                }
                if offload || tso {
                    let mut flags = if tso { TX_TSO } else { 0 };
                    if offload {
                        Ipv4Packet::new_unchecked(&mut p[..20]).set_checksum(0);
                        flags |= TX_IP_CSUM;
                    }
                    if self.l4_checksum && l4_offload {
                        flags |= if self.protocol == IpProtocol::Tcp {
                            TX_TCP_CSUM
                        } else {
                            TX_UDP_CSUM
                        };
                    }
                    p.set_tx_offload(TxOffload {
                        flags,
                        l2_len: ETHER_LEN as u8,
                        l3_len: 20,
                        l4_len: l4_len as u8,
                        mss: if tso { requested.mss } else { 0 },
                    });
                }
                let _ = p.set_network_header(0, 20);
                anno::set_next_hop_v4(&mut p, route.next_hop(dst));
            }
            Family::V6 { src, route } => {
                let dst = anno::next_hop_v6(&p);
                if dst.is_unspecified() {
                    self.drops.no_destination += 1;
                    return None;
                }
                if 40 + payload_len > self.mtu || payload_len > 65535 {
                    self.drops.too_big += 1;
                    return None;
                }
                if p.prepend(40).is_err() {
                    self.drops.no_headroom += 1;
                    return None;
                }
                let repr = Ipv6Repr {
                    src,
                    dst,
                    next_header: self.protocol,
                    payload_len,
                    hop_limit: self.ttl,
                    traffic_class: 0,
                    flow_label: 0,
                };
                repr.emit(&mut Ipv6Packet::new_unchecked(&mut p[..40]));
                if let Some(rest) = rest {
                    p.append(rest);
                }
                if self.l4_checksum {
                    self.fill_l4_checksum(&mut p, 40, src.into(), dst.into());
                }
                let _ = p.set_network_header(0, 40);
                anno::set_next_hop_v6(&mut p, route.next_hop(dst));
            }
        }
        Some(p)
    }
}

/// A PROTOCOL argument: a name or a number.
fn protocol_arg(text: &str) -> Result<IpProtocol, String> {
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "tcp" => IpProtocol::Tcp,
        "udp" => IpProtocol::Udp,
        "icmp" => IpProtocol::Icmp,
        "icmpv6" | "icmp6" => IpProtocol::Icmpv6,
        other => {
            let n = oxnet_graph::args::unsigned(other).map_err(|e| format!("PROTOCOL: {e}"))?;
            u8::try_from(n)
                .map_err(|_| format!("PROTOCOL: {n} is over 255"))?
                .into()
        }
    })
}

impl Element for IpOutput {
    fn class_name(&self) -> &'static str {
        match self.family {
            Family::V4 { .. } => "IPv4Output",
            Family::V6 { .. } => "IPv6Output",
        }
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, args: &mut Args) -> Result<(), String> {
        let src = args.required("SRC")?;
        self.protocol = protocol_arg(&args.required("PROTOCOL")?)?;
        let wrong_icmp = match self.family {
            Family::V4 { .. } => IpProtocol::Icmpv6,
            Family::V6 { .. } => IpProtocol::Icmp,
        };
        if self.protocol == wrong_icmp {
            return Err(format!("PROTOCOL: {:?} is the other family's ICMP", self.protocol));
        }
        self.l4_checksum = bool_arg(args, "L4_CHECKSUM")?;
        self.mtu = unsigned_arg(args, "MTU", 1500, 65535)? as usize;
        match &mut self.family {
            Family::V4 {
                src: ours,
                route,
                offload,
            } => {
                *ours = ipv4_with_prefix(&src).map_err(|e| format!("SRC: {e}"))?.0;
                self.ttl = unsigned_arg(args, "TTL", 64, 255)? as u8;
                *route = RouteV4::configure(args)?;
                *offload = bool_arg(args, "CHECKSUM_OFFLOAD")?;
            }
            Family::V6 { src: ours, route } => {
                *ours = ipv6_address(&src).map_err(|e| format!("SRC: {e}"))?;
                self.ttl = unsigned_arg(args, "HOP_LIMIT", 64, 255)? as u8;
                *route = RouteV6::configure(args)?;
            }
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let len = batch.len();
        let mut out = oxnet_graph::element::take_batch(len);
        batch.consume_front(len, |p| {
            if let Some(p) = self.process(p) {
                self.count += 1;
                out.push(p);
            }
        });
        if out.is_empty() {
            oxnet_graph::element::recycle_batch(out);
        } else {
            ctx.push(0, out);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("drops", true, false),
            ("no_destination", true, false),
            ("no_headroom", true, false),
            ("too_big", true, false),
            ("bad_segment", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let d = &self.drops;
        counter(
            &[
                ("no_destination", d.no_destination),
                ("no_headroom", d.no_headroom),
                ("too_big", d.too_big),
                ("bad_segment", d.bad_segment),
            ],
            &[("count", self.count)],
            name,
        )
    }
}
