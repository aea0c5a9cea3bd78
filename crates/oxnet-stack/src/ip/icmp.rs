//! ICMPv4Responder and ICMPv6Responder: echo requests answered, errors
//! handed on with the quoted header marked (module doc's contract).
//!
//! ICMPv4Responder([TTL 64], [GATEWAY ip, NETWORK prefix]), input: an
//! ICMP packet as IPv4Input's output 2 gives it (chained if a large
//! reassembled datagram: the reply is chained too). The ICMP checksum is
//! verified over the whole message (`bad_checksum`, RFC 792), then:
//! * an echo request to one of our addresses gets its reply (RFC 792:
//!   type 0, the identifier, sequence number and data of the request,
//!   the checksum recomputed) in a new 20-byte IPv4 header, from the
//!   address asked to the requester, TTL as given, identification from a
//!   counter, no options (RFC 1122 §3.2.2.6 asks to return Record Route
//!   and Timestamp options: not done). The reply goes out of output 0
//!   complete, not through IPv4Output, so that it leaves from the address
//!   that was asked (IPv4Output's source is fixed): the Ethernet header
//!   stripped, the network mark on the IP header, the next hop annotated
//!   (the requester, or GATEWAY if it is off the link per NETWORK). An
//!   echo request to a broadcast or multicast address is dropped
//!   (`broadcast_echo`; RFC 1122 §3.2.2.6 allows it);
//! * destination unreachable, time exceeded and parameter problem (RFC
//!   792; RFC 1122 §3.2.2.5 passes the last to the transport layer too)
//!   whose quote holds an IPv4 header and 8 bytes go out of output 1, the network
//!   mark on the quoted header and the transport mark after it; a
//!   shorter or broken quote is counted in `bad_error`;
//! * any other message (echo reply, source quench, which RFC 6633 says
//!   to ignore, redirect, timestamp ...) is counted in `ignored`.
//!
//! ICMPv6Responder([SRC addr], [HOP_LIMIT 64], [GATEWAY ip, NETWORK
//! prefix]), input: as IPv6Input's output 2 gives it (linear: there is no
//! IPv6 reassembly; a chained one is counted in `chained`). The checksum over
//! the pseudo-header is verified (`bad_checksum`, RFC 4443 §2.3), then:
//! * an echo request gets its reply (RFC 4443 §4.2) the same way, in a
//!   40-byte IPv6 header with HOP_LIMIT; to a request sent to a multicast
//!   group the reply comes from SRC (RFC 4443 §4.2: a unicast address of
//!   ours), and without SRC it is dropped (`multicast_echo`); a request
//!   from the unspecified address cannot be answered (`bad_source`);
//! * destination unreachable, packet too big, time exceeded, parameter
//!   problem (RFC 4443 §3), and errors of an unknown type (below 128:
//!   RFC 4443 §2.4 (b) has them passed up) go out of output 1, the network mark on the
//!   quoted fixed header, the transport mark right after it (quoted
//!   extension headers are not walked: the quote may be cut);
//! * Neighbor Discovery (types 133 to 137, RFC 4861) goes out of output 2
//!   untouched, for the neighbour resolver;
//! * MLD (130, 131, 132, RFC 2710; 143, RFC 3810) is counted in `mld` and
//!   dropped (no multicast listener here); anything else in `ignored`.
//!
//! Handlers (read): `count` (packets out), `drops` (the sum of the drop
//! counters), and each counter named above; `bad_message` counts what the
//! wire module could not parse, `bad_header` packets without the marks
//! or an ICMP header, `no_headroom` replies without room for their
//! header. Both classes have the same handlers (`chained` and
//! `multicast_echo` stay 0 in ICMPv4Responder).

use super::route::{RouteV4, RouteV6};
use super::{chain_sum, counter, ipv6_address, unsigned_arg, Outputs, PACKET_HOST};
use crate::anno;
use crate::wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use crate::wire::icmpv6::{msg_type, Icmpv6Packet, Icmpv6Repr};
use crate::wire::ip::IpProtocol;
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr, HEADER_LEN as IPV6_HEADER_LEN};
use crate::wire::Checksum;
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use std::net::Ipv6Addr;

/// ICMP echo reply's type (RFC 792).
const ECHO_REPLY: u8 = 0;
/// ICMP parameter problem's type (RFC 792).
const PARAM_PROBLEM: u8 = 12;

/// Bytes of the invoking packet's data an error must quote after its IP
/// header (RFC 792; RFC 4443 §3 quotes more, this is what we need).
const QUOTED_DATA: usize = 8;

#[derive(Debug, Default)]
struct Drops {
    chained: u64,
    bad_header: u64,
    bad_checksum: u64,
    bad_message: u64,
    bad_error: u64,
    bad_source: u64,
    broadcast_echo: u64,
    no_headroom: u64,
    mld: u64,
    ignored: u64,
}

impl Drops {
    fn list(&self) -> [(&'static str, u64); 10] {
        [
            ("chained", self.chained),
            ("bad_header", self.bad_header),
            ("bad_checksum", self.bad_checksum),
            ("bad_message", self.bad_message),
            ("bad_error", self.bad_error),
            ("bad_source", self.bad_source),
            ("broadcast_echo", self.broadcast_echo),
            ("no_headroom", self.no_headroom),
            ("mld", self.mld),
            ("ignored", self.ignored),
        ]
    }
}

/// The header marks IPv4Input / IPv6Input set: (network, transport)
/// offsets from the data, if both are in the (linear) packet.
fn marks(p: &Packet) -> Option<(usize, usize)> {
    let n = usize::try_from(p.network_offset()?).ok()?;
    let t = usize::try_from(p.transport_offset()?).ok()?;
    (n < t && t <= p.len()).then_some((n, t))
}

const HANDLERS: &[(&str, bool, bool)] = &[
    ("count", true, false),
    ("drops", true, false),
    ("chained", true, false),
    ("bad_header", true, false),
    ("bad_checksum", true, false),
    ("bad_message", true, false),
    ("bad_error", true, false),
    ("bad_source", true, false),
    ("broadcast_echo", true, false),
    ("multicast_echo", true, false),
    ("no_headroom", true, false),
    ("mld", true, false),
    ("ignored", true, false),
];

pub struct ICMPv4Responder {
    ttl: u8,
    route: RouteV4,
    ident: u16,
    drops: Drops,
    count: u64,
}

impl Default for ICMPv4Responder {
    fn default() -> Self {
        ICMPv4Responder {
            ttl: 64,
            route: RouteV4::default(),
            ident: 0,
            drops: Drops::default(),
            count: 0,
        }
    }
}

impl ICMPv4Responder {
    fn classify(&mut self, p: Packet) -> Option<(usize, Packet)> {
        let Some((n, t)) = marks(&p) else {
            self.drops.bad_header += 1;
            return None;
        };
        let Ok((ip, _)) = Ipv4Repr::parse_quoted(&p[n..]) else {
            self.drops.bad_header += 1;
            return None;
        };
        let Ok(icmp) = Icmpv4Packet::new_checked(&p[t..]) else {
            self.drops.bad_header += 1;
            return None;
        };
        // Over the whole chain: a reassembled datagram may be one.
        if oxnet_driver::offload::fold(chain_sum(&p, t, 0)) != 0xFFFF {
            self.drops.bad_checksum += 1;
            return None;
        }
        let repr = match Icmpv4Repr::parse(&icmp, Checksum::Ignore) {
            Ok(r) => r,
            Err(_) => {
                self.drops.bad_message += 1;
                return None;
            }
        };
        match repr {
            Icmpv4Repr::EchoRequest { .. } => {
                if p.anno().packet_type != PACKET_HOST || ip.dst.is_broadcast() || ip.dst.is_multicast() {
                    self.drops.broadcast_echo += 1;
                    return None;
                }
                self.echo_reply(p, t, ip).map(|p| (0, p))
            }
            Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } => {
                let quote = (icmp.data().len() - data.len(), data.len());
                self.error(p, t, quote)
            }
            // RFC 1122 §3.2.2.5: a Parameter Problem goes to the transport
            // layer too (the wire module leaves it unparsed).
            Icmpv4Repr::Other {
                msg_type: PARAM_PROBLEM,
                ..
            } => match Ipv4Repr::parse_quoted(icmp.data()) {
                Ok((_, header_len)) => {
                    let quote = (header_len, icmp.data().len() - header_len);
                    self.error(p, t, quote)
                }
                Err(_) => {
                    self.drops.bad_error += 1;
                    None
                }
            },
            _ => {
                self.drops.ignored += 1;
                None
            }
        }
    }

    /// An error quoting (header length, bytes after it) of the invoking
    /// packet: out of output 1, the marks on the quote.
    fn error(&mut self, mut p: Packet, t: usize, (header_len, data_len): (usize, usize)) -> Option<(usize, Packet)> {
        if data_len < QUOTED_DATA {
            self.drops.bad_error += 1;
            return None;
        }
        let _ = p.set_network_header(t + 8, header_len);
        Some((1, p))
    }

    /// The echo reply to the request at `t` (RFC 792: type 0, the
    /// request's identifier, sequence number and data), in a new IPv4
    /// header from the address asked (`request.dst`) to the requester.
    fn echo_reply(&mut self, mut p: Packet, t: usize, request: Ipv4Repr) -> Option<Packet> {
        let message_len = p.total_len() - t;
        // The header goes in front of the first buffer; the rest of a
        // chain waits aside (strip_front() and prepend() move the first
        // buffer only; append() recounts the chain's length).
        let rest = p.take_next();
        if p.strip_front(t).is_err() || p.prepend(20).is_err() {
            self.drops.no_headroom += 1;
            return None;
        }
        let header = Ipv4Repr {
            src: request.dst,
            dst: request.src,
            protocol: IpProtocol::Icmp,
            payload_len: message_len,
            ttl: self.ttl,
            dscp_ecn: 0,
            ident: self.ident,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
        };
        self.ident = self.ident.wrapping_add(1);
        header.emit(&mut Ipv4Packet::new_unchecked(&mut p[..20]));
        if let Some(rest) = rest {
            p.append(rest);
        }
        let mut reply = Icmpv4Packet::new_unchecked(&mut p[20..]);
        reply.set_msg_type(ECHO_REPLY);
        reply.set_checksum(0);
        let checksum = !oxnet_driver::offload::fold(chain_sum(&p, 20, 0));
        Icmpv4Packet::new_unchecked(&mut p[20..]).set_checksum(checksum);
        let _ = p.set_network_header(0, 20);
        anno::set_next_hop_v4(&mut p, self.route.next_hop(request.src));
        Some(p)
    }
}

impl Element for ICMPv4Responder {
    fn class_name(&self) -> &'static str {
        "ICMPv4Responder"
    }
    fn port_count(&self) -> &'static str {
        "1/2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, args: &mut Args) -> Result<(), String> {
        self.ttl = unsigned_arg(args, "TTL", 64, 255)? as u8;
        self.route = RouteV4::configure(args)?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut outs = Outputs::new(2, batch.len());
        let len = batch.len();
        batch.consume_front(len, |p| {
            if let Some((port, p)) = self.classify(p) {
                self.count += 1;
                outs.put(port, p);
            }
        });
        outs.push_all(ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        if name == "multicast_echo" {
            return Some("0".into());
        }
        counter(&self.drops.list(), &[("count", self.count)], name)
    }
}

pub struct ICMPv6Responder {
    src: Option<Ipv6Addr>,
    hop_limit: u8,
    route: RouteV6,
    drops: Drops,
    multicast_echo: u64,
    count: u64,
}

impl Default for ICMPv6Responder {
    fn default() -> Self {
        ICMPv6Responder {
            src: None,
            hop_limit: 64,
            route: RouteV6::default(),
            drops: Drops::default(),
            multicast_echo: 0,
            count: 0,
        }
    }
}

impl ICMPv6Responder {
    fn classify(&mut self, mut p: Packet) -> Option<(usize, Packet)> {
        if p.is_chained() {
            self.drops.chained += 1;
            return None;
        }
        let Some((n, t)) = marks(&p) else {
            self.drops.bad_header += 1;
            return None;
        };
        let Ok(ip) = Ipv6Repr::parse_quoted(&p[n..]) else {
            self.drops.bad_header += 1;
            return None;
        };
        let Ok(icmp) = Icmpv6Packet::new_checked(&p[t..]) else {
            self.drops.bad_header += 1;
            return None;
        };
        if !icmp.verify_checksum(&ip.src, &ip.dst) {
            self.drops.bad_checksum += 1;
            return None;
        }
        match icmp.msg_type() {
            msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT => return Some((2, p)),
            130..=132 | 143 => {
                self.drops.mld += 1;
                return None;
            }
            _ => {}
        }
        let repr = match Icmpv6Repr::parse(&icmp, &ip.src, &ip.dst, Checksum::Ignore) {
            Ok(r) => r,
            Err(_) => {
                self.drops.bad_message += 1;
                return None;
            }
        };
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data_len,
            } => {
                let src = if ip.dst.is_multicast() {
                    match self.src {
                        Some(s) => s,
                        None => {
                            self.multicast_echo += 1;
                            return None;
                        }
                    }
                } else {
                    ip.dst
                };
                if ip.src.is_unspecified() {
                    self.drops.bad_source += 1;
                    return None;
                }
                let message_len = p.len() - t;
                if p.strip_front(t).is_err() || p.prepend(IPV6_HEADER_LEN).is_err() {
                    self.drops.no_headroom += 1;
                    return None;
                }
                let header = Ipv6Repr {
                    src,
                    dst: ip.src,
                    next_header: IpProtocol::Icmpv6,
                    payload_len: message_len,
                    hop_limit: self.hop_limit,
                    traffic_class: 0,
                    flow_label: 0,
                };
                header.emit(&mut Ipv6Packet::new_unchecked(&mut p[..IPV6_HEADER_LEN]));
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data_len,
                };
                reply.emit(
                    &mut Icmpv6Packet::new_unchecked(&mut p[IPV6_HEADER_LEN..]),
                    &src,
                    &ip.src,
                );
                let _ = p.set_network_header(0, IPV6_HEADER_LEN);
                anno::set_next_hop_v6(&mut p, self.route.next_hop(ip.src));
                Some((0, p))
            }
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => {
                let quoted = data.len();
                self.error(p, t, quoted)
            }
            // RFC 4443 §2.4 (b): an error of an unknown type (below 128)
            // still goes to the upper layer that sent the invoking packet.
            Icmpv6Repr::Other { msg_type, .. } if msg_type < 128 => {
                let quoted = Ipv6Repr::parse_quoted(icmp.data()).map(|_| icmp.data().len() - IPV6_HEADER_LEN);
                match quoted {
                    Ok(quoted) => self.error(p, t, quoted),
                    Err(_) => {
                        self.drops.bad_error += 1;
                        None
                    }
                }
            }
            _ => {
                self.drops.ignored += 1;
                None
            }
        }
    }

    /// An error whose quote holds the invoking packet's fixed header and
    /// `quoted` bytes after it: out of output 1, marks on the quote.
    fn error(&mut self, mut p: Packet, t: usize, quoted: usize) -> Option<(usize, Packet)> {
        if quoted < QUOTED_DATA {
            self.drops.bad_error += 1;
            return None;
        }
        let _ = p.set_network_header(t + 8, IPV6_HEADER_LEN);
        Some((1, p))
    }
}

impl Element for ICMPv6Responder {
    fn class_name(&self) -> &'static str {
        "ICMPv6Responder"
    }
    fn port_count(&self) -> &'static str {
        "1/3"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, args: &mut Args) -> Result<(), String> {
        self.src = oxnet_graph::args::opt(args.keyword("SRC"), ipv6_address, "SRC")?;
        self.hop_limit = unsigned_arg(args, "HOP_LIMIT", 64, 255)? as u8;
        self.route = RouteV6::configure(args)?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut outs = Outputs::new(3, batch.len());
        let len = batch.len();
        batch.consume_front(len, |p| {
            if let Some((port, p)) = self.classify(p) {
                self.count += 1;
                outs.put(port, p);
            }
        });
        outs.push_all(ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let mut drops = self.drops.list().to_vec();
        drops.push(("multicast_echo", self.multicast_echo));
        counter(&drops, &[("count", self.count)], name)
    }
}
