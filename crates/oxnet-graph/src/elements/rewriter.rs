//! Network address (and port) translation: Click's IPRewriter family
//! (Click's `elements/tcpudp/iprewriter.hh`, `tcprewriter.hh`,
//! `udprewriter.hh`, `elements/icmp/icmppingrewriter.hh`,
//! `elements/ip/ipaddrrewriter.hh`, `ipaddrpairrewriter.hh`,
//! `rripmapper.hh`, `iprwpatterns.hh` are the specification).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | IPRewriter(INPUTSPEC...) | 1-/1- | push | NAPT for TCP and UDP: per flow (addresses, ports, protocol) a mapping and its reply mapping |
//! | TCPRewriter(INPUTSPEC...) | 1-/1- | push | the same for TCP only, with TCP's timeouts by connection state |
//! | UDPRewriter(INPUTSPEC...) | 1-/1- | push | the same for UDP (and TCP, DCCP) with UDP's timeouts |
//! | ICMPPingRewriter(INPUTSPEC...) | 1-/1- | push | rewrites echo requests' addresses and identifier, and their replies back |
//! | IPAddrRewriter(INPUTSPEC...) | 1-/1- | push | Basic NAT: one mapping per source address, for any protocol |
//! | IPAddrPairRewriter(INPUTSPEC...) | 1-/1- | push | one mapping per (source, destination) address pair |
//! | RoundRobinIPMapper(PATTERN...) | 0/0 | - | an input spec of the rewriters: tries its patterns in turn |
//! | IPRewriterPatterns(NAME PATTERN, ...) | 0/0 | - | names patterns that input specs use as `pattern NAME FOUTPUT ROUTPUT` |
//!
//! ## Input specs (one per input port)
//! - `drop`, `discard`: packets without a mapping are dropped;
//! - `pass N` (`nochange`, `passthrough`): sent unchanged to output N, no mapping;
//! - `keep FOUTPUT ROUTPUT`: a mapping that keeps the flow ID;
//! - `pattern SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT`: the flow is
//!   rewritten by the pattern (`-` keeps a field; SPORT `L-H` picks a free
//!   port, the packet's own first, `#` sequentially, `?` randomly; SADDR
//!   may be a range `A-B` or prefix `A/LEN`); IPAddrRewriter takes
//!   `pattern SADDR - F R`, IPAddrPairRewriter `pattern SADDR DADDR F R`,
//!   ICMPPingRewriter `pattern SADDR DADDR IDENT-RANGE F R`;
//! - `pattern NAME FOUTPUT ROUTPUT`: a pattern named by IPRewriterPatterns;
//! - `ELEMENTNAME`: a RoundRobinIPMapper.
//!
//! A packet whose flow has a mapping is rewritten by it whatever its input;
//! a mapping (SA, SP, DA, DP) => (SA', SP', DA', DP') [*FOUTPUT] comes with
//! its reply (DA', DP', SA', SP') => (DA, DP, SA, SP) [*ROUTPUT]. IP and
//! transport checksums are updated incrementally (RFC 1624).
//!
//! ## Keywords
//! MAPPING_CAPACITY (a number, or another rewriter's name to share its
//! flows' capacity), REAP_INTERVAL (default 15 min), DST_ANNO (default
//! true: the destination address annotation follows the rewritten
//! destination), REPLY_ANNO ANNO (the annotation byte of the packet that
//! made a mapping is copied onto its replies: PAINT or an offset). TCP:
//! TCP_TIMEOUT or TIMEOUT (payload both ways, 24 h), TCP_NODATA_TIMEOUT
//! (5 min), TCP_DONE_TIMEOUT (FIN or RST, 4 min), TCP_GUARANTEE or
//! GUARANTEE (5 s). UDP: UDP_TIMEOUT (5 min; UDPRewriter: also TIMEOUT),
//! UDP_STREAMING_TIMEOUT (at least 3 packets, one a reply), UDP_GUARANTEE
//! (5 s; UDPRewriter: also GUARANTEE). The others: TIMEOUT, GUARANTEE.
//!
//! ## Handlers
//! `table` (IPRewriter: `tcp_table`, `udp_table`; `mappings` too), `lookup`
//! (IPRewriter: `tcp_lookup`; read with `SADDR SPORT DADDR DPORT`),
//! `table_size`, `nmappings`, `mapping_failures`, `patterns`, `patternN`
//! (read/write: a new spec for input N removes that input's mappings),
//! `size`, `capacity` (read/write), `clear` (write).
//!
//! Element and pattern names in arguments (MAPPING_CAPACITY OTHER,
//! ELEMENTNAME, pattern NAME) are found when the router starts, through
//! per-thread registries, and a wrong one stops the router there: Click
//! refuses such a configuration at initialization.
//!
//! Packets need the IP header annotation (else the IP header is taken at
//! offset 0); a packet too short for its headers is handled by its input's
//! spec as Click does with non-TCP/UDP packets (`pass` passes, the others
//! drop), and counted in `drops`.

#[path = "rewriter_flows.rs"]
pub mod flows;

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use flows::*;
use oxnet_driver::{Packet, PacketBatch};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ip,
    Tcp,
    Udp,
    IcmpPing,
    IpAddr,
    IpAddrPair,
}

/// What an input does with a packet that has no mapping.
#[derive(Debug, Clone)]
enum Spec {
    Drop,
    Pass(usize),
    Keep(usize, usize),
    Pattern(Rc<RefCell<Pattern>>, usize, usize),
    /// A pattern of an IPRewriterPatterns, found when first used.
    Named(String, usize, usize),
    /// A RoundRobinIPMapper, by element name, found when first used.
    Mapper(String),
}

thread_local! {
    /// The flow sets of this thread's rewriters by element name, for
    /// MAPPING_CAPACITY OTHER (registered when the router starts).
    static FLOW_SETS: RefCell<HashMap<String, Weak<RefCell<FlowSet>>>> = RefCell::new(HashMap::new());
    /// IPRewriterPatterns' names (registered as they are configured).
    static PATTERNS: RefCell<HashMap<String, Rc<RefCell<Pattern>>>> = RefCell::new(HashMap::new());
    /// RoundRobinIPMappers by element name (registered at start).
    static MAPPERS: RefCell<HashMap<String, Rc<RefCell<RoundRobin>>>> = RefCell::new(HashMap::new());
}

static NEXT_OWNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn us(seconds: f64) -> u64 {
    (seconds * 1e6).round() as u64
}

fn ports_of(words: &[&str]) -> Result<(usize, usize), String> {
    let f = words
        .first()
        .and_then(|w| args::unsigned(w).ok())
        .ok_or("bad forward port")?;
    let r = words
        .get(1)
        .and_then(|w| args::unsigned(w).ok())
        .ok_or("bad reply port")?;
    Ok((f as usize, r as usize))
}

/// Parses one input spec (IPRewriter's documentation, "INPUTSPEC").
fn parse_spec(text: &str) -> Result<Spec, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((&first, rest)) = words.split_first() else {
        return Err("empty argument".into());
    };
    match first {
        "drop" | "discard" if rest.is_empty() => Ok(Spec::Drop),
        "drop" | "discard" => Err(format!("syntax error, expected '{first}'")),
        "pass" | "passthrough" | "nochange" => match rest {
            [] => Ok(Spec::Pass(0)),
            [n] => args::unsigned(n)
                .map(|n| Spec::Pass(n as usize))
                .map_err(|_| "syntax error, expected 'nochange [OUTPUT]'".into()),
            _ => Err("syntax error, expected 'nochange [OUTPUT]'".into()),
        },
        "keep" if rest.len() == 2 => ports_of(rest).map(|(f, r)| Spec::Keep(f, r)),
        "keep" => Err("bad forward port".into()),
        "pattern" | "xpattern" => {
            if rest.len() <= 2 {
                return Err("syntax error".into());
            }
            let (pat, ports) = rest.split_at(rest.len() - 2);
            if pat.len() == 1 {
                let (f, r) = ports_of(ports)?;
                return Ok(Spec::Named(pat[0].to_string(), f, r));
            }
            let p = Pattern::parse(pat)?;
            let (f, r) = ports_of(ports)?;
            Ok(Spec::Pattern(Rc::new(RefCell::new(p)), f, r))
        }
        name if rest.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_/@".contains(c)) => {
            Ok(Spec::Mapper(name.to_string()))
        }
        _ if !rest.is_empty() && !first.contains('.') => Err("syntax error, expected element name".into()),
        _ => Err("unknown specification".into()),
    }
}

impl Spec {
    fn outputs(&self) -> Vec<usize> {
        match self {
            Spec::Drop | Spec::Mapper(_) => vec![],
            Spec::Pass(n) => vec![*n],
            Spec::Keep(f, r) | Spec::Pattern(_, f, r) | Spec::Named(_, f, r) => vec![*f, *r],
        }
    }

    fn unparse(&self) -> String {
        match self {
            Spec::Drop => "<drop>".into(),
            Spec::Pass(_) => "<nochange>".into(),
            Spec::Keep(..) => "<keep>".into(),
            Spec::Pattern(p, ..) => p.borrow().unparse(),
            Spec::Named(name, ..) => PATTERNS
                .with(|m| m.borrow().get(name).map(|p| p.borrow().unparse()))
                .unwrap_or_else(|| name.clone()),
            Spec::Mapper(_) => "<mapper>".into(),
        }
    }
}

/// Where a packet's IP and transport headers are.
struct Headers {
    net: usize,
    proto: u8,
    first_fragment: bool,
    transport: usize,
}

fn headers(p: &Packet) -> Option<Headers> {
    let net = match p.network_offset() {
        Some(n) if n >= 0 => n as usize,
        Some(_) => return None,
        None => 0,
    };
    let ip = p.get(net..net + 20)?;
    let ihl = usize::from(ip[0] & 0x0F) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || net + ihl > p.len() {
        return None;
    }
    let transport = match p.transport_offset() {
        Some(t) if t >= net as isize => t as usize,
        _ => net + ihl,
    };
    Some(Headers {
        net,
        proto: ip[9],
        first_fragment: u16::from_be_bytes([ip[6], ip[7]]) & 0x1FFF == 0,
        transport,
    })
}

fn addr(d: &[u8], at: usize) -> [u8; 4] {
    [d[at], d[at + 1], d[at + 2], d[at + 3]]
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

/// Rewrites the 16-bit-aligned field at `at` to `new`, and the checksums
/// at `sums` (each updated by RFC 1624; `udp` fields: 0 stays "no
/// checksum", a result of 0 is sent as 0xFFFF, RFC 768).
fn rewrite_field(d: &mut [u8], at: usize, new: &[u8], sums: &[(usize, bool)]) {
    // Fields are at most an address long: no allocation per packet.
    let mut buf = [0u8; 4];
    let old = &mut buf[..new.len()];
    old.copy_from_slice(&d[at..at + new.len()]);
    if old == new {
        return;
    }
    let old = &*old;
    for &(s, udp) in sums {
        let sum = be16(d, s);
        if udp && sum == 0 {
            continue;
        }
        let mut v = checksum_update(sum, old, new);
        if udp && v == 0 {
            v = 0xFFFF;
        }
        d[s..s + 2].copy_from_slice(&v.to_be_bytes());
    }
    d[at..at + new.len()].copy_from_slice(new);
}

/// A rewriter of any of the six classes: its input specs, its flows (a
/// set it may share), its timeouts per protocol and its annotations.
/// Arguments and handlers: see the module documentation.
pub struct Rewriter {
    kind: Kind,
    owner: u64,
    specs: Vec<Spec>,
    failures: Vec<u64>,
    flows: SharedFlows,
    capacity_from: Option<String>,
    tcp: Timeouts,
    udp: Timeouts,
    other: Timeouts,
    reap_us: u64,
    dst_anno: bool,
    reply_anno: Option<usize>,
    drops: u64,
    timer: Option<TimerId>,
}

impl Rewriter {
    fn new(kind: Kind) -> Rewriter {
        let five_min = us(300.0);
        let guarantee = us(5.0);
        Rewriter {
            kind,
            owner: NEXT_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            specs: Vec::new(),
            failures: Vec::new(),
            flows: Rc::new(RefCell::new(FlowSet::default())),
            capacity_from: None,
            tcp: Timeouts {
                guarantee,
                base: five_min,
                tcp_data: us(86400.0),
                tcp_done: us(240.0),
                udp_streaming: five_min,
            },
            udp: Timeouts {
                guarantee,
                base: five_min,
                tcp_data: five_min,
                tcp_done: five_min,
                udp_streaming: five_min,
            },
            other: Timeouts {
                guarantee,
                base: five_min,
                tcp_data: five_min,
                tcp_done: five_min,
                udp_streaming: five_min,
            },
            reap_us: us(900.0),
            dst_anno: true,
            reply_anno: None,
            drops: 0,
            timer: None,
        }
    }

    /// The flow set shared by MAPPING_CAPACITY OTHER, found once OTHER
    /// has registered (the router has started).
    fn resolve(&mut self) {
        let Some(other) = self.capacity_from.as_ref() else {
            return;
        };
        if let Some(set) = FLOW_SETS.with(|m| m.borrow().get(other).and_then(Weak::upgrade)) {
            // Called before any packet: this element has no flows yet.
            self.flows = set;
            self.capacity_from = None;
        }
    }

    fn timeouts_for(&self, proto: u8) -> Timeouts {
        match (self.kind, proto) {
            (Kind::Ip | Kind::Tcp, PROTO_TCP) => self.tcp,
            (Kind::Ip | Kind::Udp, _) => self.udp,
            (Kind::Tcp, _) => self.tcp,
            _ => self.other,
        }
    }

    /// The flow ID of a packet this class handles (None: not handled).
    fn flow_id(&self, d: &[u8], h: &Headers) -> Option<FlowId> {
        let src = addr(d, h.net + 12);
        let dst = addr(d, h.net + 16);
        let tlen = d.len().saturating_sub(h.transport);
        let ports = || FlowId::new(h.proto, src, be16(d, h.transport), dst, be16(d, h.transport + 2));
        match self.kind {
            Kind::IpAddr => Some(FlowId::new(0, src, 0, [0; 4], 0)),
            Kind::IpAddrPair => Some(FlowId::new(0, src, 0, dst, 0)),
            _ if !h.first_fragment || tlen < 8 => None,
            Kind::Ip if matches!(h.proto, PROTO_TCP | PROTO_UDP) => Some(ports()),
            Kind::Tcp if h.proto == PROTO_TCP => Some(ports()),
            // UDPRewriter takes TCP and DCCP too (its documentation).
            Kind::Udp if matches!(h.proto, PROTO_TCP | PROTO_UDP | 33) => Some(ports()),
            Kind::IcmpPing if h.proto == PROTO_ICMP && matches!(d[h.transport], 0 | 8) => {
                let ident = be16(d, h.transport + 4);
                let mut id = FlowId::new(PROTO_ICMP, src, ident, dst, ident);
                id.reply = d[h.transport] == 0;
                Some(id)
            }
            _ => None,
        }
    }

    /// Finds or makes the mapping of a packet; Err(output) for packets
    /// sent on without one (None: dropped).
    fn mapping(
        &mut self,
        port: usize,
        key: FlowId,
        reply_key: Option<FlowId>,
        p: &Packet,
        now: u64,
    ) -> Result<(u64, usize), Option<usize>> {
        let found = {
            let set = self.flows.borrow();
            set.lookup(self.owner, &key)
                .or_else(|| reply_key.and_then(|k| set.lookup(self.owner, &k)))
        };
        if let Some(m) = found {
            return Ok(m);
        }
        if self.kind == Kind::IcmpPing && key.reply {
            // An unexpected echo reply: only 'pass' sends it on.
            return Err(match self.specs.get(port) {
                Some(Spec::Pass(n)) => Some(*n),
                _ => None,
            });
        }
        let owner = self.owner;
        let spec = self.specs.get(port).cloned().unwrap_or(Spec::Drop);
        let rewritten = {
            let set = self.flows.borrow();
            let taken = |k: &FlowId| set.contains(owner, k);
            match &spec {
                Spec::Drop => return Err(None),
                Spec::Pass(n) => return Err(Some(*n)),
                Spec::Keep(f, r) => Some((key, *f, *r)),
                Spec::Pattern(pat, f, r) => pat.borrow_mut().rewrite(&key, &taken).map(|k| (k, *f, *r)),
                Spec::Named(name, f, r) => PATTERNS
                    .with(|m| m.borrow().get(name).cloned())
                    .and_then(|pat| pat.borrow_mut().rewrite(&key, &taken))
                    .map(|k| (k, *f, *r)),
                Spec::Mapper(name) => MAPPERS
                    .with(|m| m.borrow().get(name).cloned())
                    .and_then(|m| m.borrow_mut().rewrite(&key, &taken)),
            }
        };
        let Some((rewritten, f, r)) = rewritten else {
            self.failures[port] += 1;
            return Err(None);
        };
        let timeouts = self.timeouts_for(key.proto);
        let g = timeouts.guarantee;
        let flow = flows::Flow {
            owner,
            input: port,
            keys: [key, rewritten.reverse()],
            outputs: [f, r],
            expiry: now + if g > 0 { g } else { timeouts.base },
            guaranteed: g > 0,
            timeouts,
            state: 0,
            udp_reply_seen: false,
            reply_anno: self.reply_anno.map_or(0, |o| p.anno().area[o]),
        };
        match self.flows.borrow_mut().insert(flow, now) {
            Some(id) => Ok((id, 0)),
            None => {
                self.failures[port] += 1;
                Err(None)
            }
        }
    }

    /// Rewrites a packet of direction `dir` of flow `id` and updates the
    /// flow's state; returns the output.
    fn apply(&mut self, p: &mut Packet, h: &Headers, id: u64, dir: usize) -> usize {
        let mut set = self.flows.borrow_mut();
        let Some(flow) = set.get_mut(id) else {
            return 0;
        };
        let new = flow.rewritten(dir);
        let (net, t) = (h.net, h.transport);
        let d: &mut [u8] = p;
        let tlen = d.len().saturating_sub(t);
        let l4 = h.first_fragment;
        // The transport checksum covers the addresses through the
        // pseudo-header (RFC 793 §3.1, RFC 768); ICMP's does not.
        let mut all_sums = [(net + 10, false); 2];
        let n = match h.proto {
            PROTO_TCP if l4 && tlen >= 18 => {
                all_sums[1] = (t + 16, false);
                2
            }
            PROTO_UDP if l4 && tlen >= 8 => {
                all_sums[1] = (t + 6, true);
                2
            }
            _ => 1,
        };
        let sums = &all_sums[..n];
        let (src, dst) = match (self.kind, dir) {
            (Kind::IpAddr, 0) => (new.saddr, addr(d, net + 16)),
            (Kind::IpAddr, _) => (addr(d, net + 12), new.daddr),
            _ => (new.saddr, new.daddr),
        };
        rewrite_field(d, net + 12, &src, sums);
        rewrite_field(d, net + 16, &dst, sums);
        let ports = !matches!(self.kind, Kind::IpAddr | Kind::IpAddrPair) && l4;
        if ports && h.proto == PROTO_ICMP {
            // The identifier, and the ICMP checksum over the message.
            rewrite_field(d, t + 4, &new.sport.to_be_bytes(), &[(t + 2, false)]);
            if be16(d, t + 2) == 0 {
                // RFC 1624 eqn. 3 gives 0x0000 for a message that now sums
                // to zero (an echo reply with identifier and sequence 0),
                // whose only valid checksum is 0xFFFF: recompute.
                let sum = !oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&d[t..], 0));
                d[t + 2..t + 4].copy_from_slice(&sum.to_be_bytes());
            }
        } else if ports {
            rewrite_field(d, t, &new.sport.to_be_bytes(), &sums[1..]);
            rewrite_field(d, t + 2, &new.dport.to_be_bytes(), &sums[1..]);
        }
        // Connection state (TCPRewriter's and UDPRewriter's timeouts).
        if h.proto == PROTO_TCP && l4 && tlen >= 14 && self.kind != Kind::IpAddr && self.kind != Kind::IpAddrPair {
            let flags = d[t + 13];
            let ip_len = usize::from(be16(d, net + 2));
            let payload = (t - net) + usize::from(d[t + 12] >> 4) * 4 < ip_len;
            let done = FORWARD_DONE << dir;
            if flags & 0x04 != 0 {
                flow.state |= FORWARD_DONE | REPLY_DONE;
            } else if flags & 0x01 != 0 {
                flow.state |= done;
            } else if flags & 0x02 != 0 || payload {
                flow.state &= !done;
            }
            if payload {
                flow.state |= FORWARD_DATA << dir;
            }
        } else if h.proto != PROTO_TCP {
            flow.state = (flow.state + 1).min(3);
            flow.udp_reply_seen |= dir == 1;
        }
        let changes_dst = !(self.kind == Kind::IpAddr && dir == 0);
        if self.dst_anno && changes_dst {
            p.anno_mut().set_dst_ip(dst);
        }
        if let (Some(o), 1) = (self.reply_anno, dir) {
            p.anno_mut().area[o] = flow.reply_anno;
        }
        flow.outputs[dir]
    }

    /// One packet: Some(output) or None (dropped).
    fn process(&mut self, port: usize, p: &mut Packet, now: u64) -> Option<usize> {
        let pass = match self.specs.get(port) {
            Some(Spec::Pass(n)) => Some(*n),
            _ => None,
        };
        let Some(h) = headers(p) else {
            self.drops += 1;
            return pass;
        };
        let Some(key) = self.flow_id(p, &h) else {
            if pass.is_none() {
                self.drops += 1;
            }
            return pass;
        };
        // IPAddrRewriter finds replies by their destination address.
        let reply_key = (self.kind == Kind::IpAddr).then(|| FlowId::new(0, [0; 4], 0, addr(p, h.net + 16), 0));
        let (id, dir) = match self.mapping(port, key, reply_key, p, now) {
            Ok(m) => m,
            Err(out) => return out,
        };
        let out = self.apply(p, &h, id, dir);
        self.flows.borrow_mut().refresh(id, now);
        Some(out)
    }

    fn table(&self, now: u64, proto: Option<u8>) -> String {
        let set = self.flows.borrow();
        let mut out = String::new();
        for (key, flow, dir) in set.entries(self.owner) {
            if proto.is_some_and(|p| key.proto != p) {
                continue;
            }
            let new = flow.rewritten(dir);
            let (a, b) = if self.kind == Kind::IcmpPing {
                let u = |k: FlowId| format!("({}, {}, {})", ip(k.saddr), ip(k.daddr), k.sport);
                (u(key), u(new))
            } else {
                (key.unparse(), new.unparse())
            };
            let star = |d: usize| if d == dir { "*" } else { "" };
            let exp = (flow.best_effort_expiry() + 500_000).saturating_sub(now) / 1_000_000;
            out += &format!(
                "{a} => {b} [{}{} {}{}] i{} exp{exp}\n",
                star(0),
                flow.outputs[0],
                star(1),
                flow.outputs[1],
                flow.input
            );
        }
        out
    }

    fn lookup(&self, params: &str) -> Result<String, String> {
        let w: Vec<&str> = params.split_whitespace().collect();
        let [sa, sp, da, dp] = w[..] else {
            return Err("expected SADDR SPORT DADDR DPORT".into());
        };
        let port = |t: &str| args::unsigned(t).ok().filter(|&n| n < 65536).map(|n| n as u16);
        let key = FlowId::new(
            if self.kind == Kind::Udp { PROTO_UDP } else { PROTO_TCP },
            args::ip_address(sa)?,
            port(sp).ok_or("bad SPORT")?,
            args::ip_address(da)?,
            port(dp).ok_or("bad DPORT")?,
        );
        let set = self.flows.borrow();
        Ok(
            match set
                .lookup(self.owner, &key)
                .and_then(|(id, dir)| Some((set.get(id)?, dir)))
            {
                Some((flow, dir)) => {
                    let r = flow.rewritten(dir);
                    format!("{} {} {} {}", ip(r.saddr), r.sport, ip(r.daddr), r.dport)
                }
                None => String::new(),
            },
        )
    }

    fn table_handler(&self, name: &str) -> Option<Option<u8>> {
        match (self.kind, name) {
            (Kind::Ip, "tcp_table" | "tcp_mappings") => Some(Some(PROTO_TCP)),
            (Kind::Ip, "udp_table" | "udp_mappings") => Some(Some(PROTO_UDP)),
            (Kind::Ip, _) => None,
            (_, "table" | "mappings") => Some(None),
            _ => None,
        }
    }
}

fn create_rewriter(kind: Kind) -> Box<dyn Element> {
    Box::new(Rewriter::new(kind))
}

impl Element for Rewriter {
    fn class_name(&self) -> &'static str {
        match self.kind {
            Kind::Ip => "IPRewriter",
            Kind::Tcp => "TCPRewriter",
            Kind::Udp => "UDPRewriter",
            Kind::IcmpPing => "ICMPPingRewriter",
            Kind::IpAddr => "IPAddrRewriter",
            Kind::IpAddrPair => "IPAddrPairRewriter",
        }
    }
    fn port_count(&self) -> &'static str {
        "1-/1-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }

    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let secs = |a: &mut Args, keys: &[&str]| -> Result<Option<u64>, String> {
            let mut found = None;
            for k in keys {
                if let Some(v) = a.keyword(k) {
                    found = Some(us(args::seconds(&v).map_err(|e| format!("{k}: {e}"))?));
                }
            }
            Ok(found)
        };
        let tcp_keys = matches!(self.kind, Kind::Ip | Kind::Tcp);
        if tcp_keys {
            let t = &mut self.tcp;
            t.base = secs(a, &["TCP_NODATA_TIMEOUT"])?.unwrap_or(t.base);
            t.guarantee = secs(a, &["GUARANTEE", "TCP_GUARANTEE"])?.unwrap_or(t.guarantee);
            t.tcp_data = secs(a, &["TIMEOUT", "TCP_TIMEOUT"])?.unwrap_or(t.tcp_data);
            t.tcp_done = secs(a, &["TCP_DONE_TIMEOUT"])?.unwrap_or(t.tcp_done);
        }
        if matches!(self.kind, Kind::Ip | Kind::Udp) {
            let udp_only = self.kind == Kind::Ip;
            let pick = |general: &'static str, specific: &'static str| -> Vec<&'static str> {
                if udp_only {
                    vec![specific]
                } else {
                    vec![general, specific]
                }
            };
            let u = &mut self.udp;
            u.base = secs(a, &pick("TIMEOUT", "UDP_TIMEOUT"))?.unwrap_or(u.base);
            u.udp_streaming = secs(a, &pick("STREAMING_TIMEOUT", "UDP_STREAMING_TIMEOUT"))?.unwrap_or(u.base);
            u.guarantee = secs(a, &pick("GUARANTEE", "UDP_GUARANTEE"))?.unwrap_or(u.guarantee);
        }
        if !tcp_keys && self.kind != Kind::Udp {
            let o = &mut self.other;
            o.base = secs(a, &["TIMEOUT"])?.unwrap_or(o.base);
            o.guarantee = secs(a, &["GUARANTEE"])?.unwrap_or(o.guarantee);
        }
        if let Some(r) = secs(a, &["REAP_TIME", "REAP_INTERVAL"])? {
            self.reap_us = r;
        }
        if let Some(v) = a.keyword("DST_ANNO") {
            self.dst_anno = args::boolean(&v).map_err(|e| format!("DST_ANNO: {e}"))?;
        }
        if let Some(v) = a.keyword("REPLY_ANNO") {
            self.reply_anno = Some(match v.trim() {
                "PAINT" => oxnet_driver::packet::PAINT_ANNO,
                t => match args::unsigned(t) {
                    Ok(n) if (n as usize) < oxnet_driver::packet::ANNO_AREA => n as usize,
                    _ => return Err(format!("REPLY_ANNO: '{t}' is not an annotation (PAINT or an offset)")),
                },
            });
        }
        let mut capacity = None;
        for k in ["CAPACITY", "MAPPING_CAPACITY"] {
            if let Some(v) = a.keyword(k) {
                capacity = Some(v);
            }
        }
        if let Some(v) = capacity {
            match args::unsigned(&v) {
                Ok(n) => self.flows.borrow_mut().capacity = n,
                Err(_) if !v.trim().is_empty() && !v.contains(char::is_whitespace) => {
                    self.capacity_from = Some(v.trim().to_string())
                }
                Err(_) => return Err("bad MAPPING_CAPACITY".into()),
            }
        }
        let mut errors = Vec::new();
        for (i, text) in a.rest_positional().iter().enumerate() {
            match parse_spec(text) {
                Ok(s) => self.specs.push(s),
                Err(e) => {
                    errors.push(format!("input spec {i}: {e}"));
                    self.specs.push(Spec::Drop);
                }
            }
        }
        self.failures = vec![0; self.specs.len()];
        if errors.is_empty() {
            Ok(())
        } else {
            // Click's layout: one indented line per spec.
            Err(format!("\n  {}", errors.join("\n  ")))
        }
    }

    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        if self.specs.len() != ports.inputs() {
            return Err(format!("need {} arguments, one per input port", ports.inputs()));
        }
        let mut errors = Vec::new();
        for (i, s) in self.specs.iter().enumerate() {
            if s.outputs().iter().any(|&o| o >= ports.outputs()) {
                errors.push(format!("input spec {i}: output port out of range"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("\n  {}", errors.join("\n  ")))
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let name = ctx.name().to_string();
        FLOW_SETS.with(|m| m.borrow_mut().insert(name.clone(), Rc::downgrade(&self.flows)));
        // Names of other elements are known only now that the graph is
        // built: check them, and stop the router on a wrong one (Click
        // refuses such a configuration).
        let errors = self.check_names(ctx);
        if !errors.is_empty() {
            for e in &errors {
                eprintln!("{name}: {e}");
            }
            ctx.stop_now();
            return;
        }
        if self.reap_us > 0 {
            self.timer = Some(ctx.schedule_after_us(self.reap_us));
        }
    }

    fn run_timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        self.resolve();
        self.flows.borrow_mut().shrink(ctx.now_us(), false);
        if self.reap_us > 0 {
            self.timer = Some(ctx.schedule_after_us(self.reap_us));
        }
    }

    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        self.resolve();
        let now = ctx.now_us();
        let n = ctx.noutputs();
        let mut outs: Vec<PacketBatch> = (0..n).map(|_| PacketBatch::with_capacity(batch.len())).collect();
        let mut batch = batch;
        let len = batch.len();
        batch.consume_front(len, |mut p| {
            if let Some(o) = self.process(port, &mut p, now) {
                if let Some(b) = outs.get_mut(o) {
                    b.push(p);
                }
            }
        });
        for (k, b) in outs.into_iter().enumerate() {
            if !b.is_empty() {
                ctx.push(k, b);
            }
        }
    }

    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        match self.kind {
            Kind::Ip => &[
                ("tcp_table", true, false),
                ("udp_table", true, false),
                ("tcp_mappings", true, false),
                ("udp_mappings", true, false),
                ("tcp_lookup", true, false),
                ("table_size", true, false),
                ("nmappings", true, false),
                ("mapping_failures", true, false),
                ("patterns", true, false),
                ("patternN", true, true),
                ("size", true, false),
                ("capacity", true, true),
                ("clear", false, true),
                ("drops", true, false),
            ],
            Kind::Tcp | Kind::Udp => &[
                ("table", true, false),
                ("mappings", true, false),
                ("lookup", true, false),
                ("table_size", true, false),
                ("nmappings", true, false),
                ("mapping_failures", true, false),
                ("patterns", true, false),
                ("patternN", true, true),
                ("size", true, false),
                ("capacity", true, true),
                ("clear", false, true),
                ("drops", true, false),
            ],
            _ => &[
                ("table", true, false),
                ("mappings", true, false),
                ("table_size", true, false),
                ("nmappings", true, false),
                ("mapping_failures", true, false),
                ("patterns", true, false),
                ("patternN", true, true),
                ("size", true, false),
                ("capacity", true, true),
                ("clear", false, true),
                ("drops", true, false),
            ],
        }
    }

    fn read_handler_with(&mut self, name: &str, params: &str, ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        self.resolve();
        let now = ctx.now_us();
        if let Some(proto) = self.table_handler(name) {
            return Some(Ok(self.table(now, proto)));
        }
        let set = || self.flows.borrow();
        Some(Ok(match name {
            "lookup" if matches!(self.kind, Kind::Tcp | Kind::Udp) => return Some(self.lookup(params)),
            "tcp_lookup" if self.kind == Kind::Ip => return Some(self.lookup(params)),
            "table_size" | "nmappings" => set().count(self.owner, None).to_string(),
            "mapping_failures" => self.failures.iter().sum::<u64>().to_string(),
            "size" => set().len().to_string(),
            "capacity" => set().capacity.to_string(),
            "drops" => self.drops.to_string(),
            "patterns" => (0..self.specs.len()).map(|i| self.pattern_line(i)).collect(),
            _ => {
                let i = name.strip_prefix("pattern")?.parse::<usize>().ok()?;
                if i >= self.specs.len() {
                    return None;
                }
                self.pattern_line(i)
            }
        }))
    }

    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        self.resolve();
        let now = ctx.now_us();
        Some(match name {
            "capacity" => match value.split_whitespace().next().map(args::unsigned) {
                Some(Ok(n)) => {
                    let mut set = self.flows.borrow_mut();
                    set.capacity = n;
                    set.shrink(now, false);
                    Ok(())
                }
                _ => Err(format!("capacity: '{}' is not a number", value.trim())),
            },
            "clear" => {
                self.flows.borrow_mut().shrink(now, true);
                Ok(())
            }
            _ => {
                let i = name.strip_prefix("pattern")?.parse::<usize>().ok()?;
                if i >= self.specs.len() {
                    return None;
                }
                match parse_spec(value) {
                    Ok(spec) => {
                        // The input's old mappings go with its old spec.
                        let owner = self.owner;
                        self.flows
                            .borrow_mut()
                            .destroy_where(|f| f.owner == owner && f.input == i);
                        self.specs[i] = spec;
                        Ok(())
                    }
                    Err(e) => Err(format!("input spec {i}: {e}")),
                }
            }
        })
    }
}

impl Rewriter {
    /// Errors in the names an input spec or MAPPING_CAPACITY gives: an
    /// element of another class, or an unknown pattern name.
    fn check_names(&self, ctx: &mut Ctx<'_>) -> Vec<String> {
        let mut errors = Vec::new();
        let mut class_of = |element: &str| ctx.read_handler(&format!("{element}.class"), "").ok();
        if let Some(other) = &self.capacity_from {
            if !class_of(other).is_some_and(|c| c.ends_with("Rewriter")) {
                errors.push(format!(
                    "bad MAPPING_CAPACITY '{other}' (a number or a rewriter's name)"
                ));
            }
        }
        for (i, spec) in self.specs.iter().enumerate() {
            match spec {
                Spec::Mapper(m) if class_of(m).as_deref() != Some("RoundRobinIPMapper") => {
                    errors.push(format!("input spec {i}: '{m}' is not an IPMapper element"))
                }
                Spec::Named(n, ..) if !PATTERNS.with(|p| p.borrow().contains_key(n)) => {
                    errors.push(format!("input spec {i}: no such pattern '{n}'"))
                }
                _ => {}
            }
        }
        errors
    }

    /// A `patterns` line: the spec, and how many mappings it made if any.
    fn pattern_line(&self, i: usize) -> String {
        let n = self.flows.borrow().count(self.owner, Some(i));
        if n > 0 {
            format!("{} [{n}]\n", self.specs[i].unparse())
        } else {
            format!("{}\n", self.specs[i].unparse())
        }
    }
}

/// RoundRobinIPMapper's state: its patterns with their output ports.
struct RoundRobin {
    patterns: Vec<(Pattern, usize, usize)>,
    next: usize,
}

impl RoundRobin {
    /// Tries the patterns in turn from the one after the last used.
    fn rewrite(&mut self, key: &FlowId, taken: &dyn Fn(&FlowId) -> bool) -> Option<(FlowId, usize, usize)> {
        let n = self.patterns.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let (pat, f, r) = &mut self.patterns[i];
            if let Some(new) = pat.rewrite(key, taken) {
                self.next = i + 1;
                return Some((new, *f, *r));
            }
        }
        None
    }
}

/// RoundRobinIPMapper(PATTERN1, ..., PATTERNn): each PATTERN is `SADDR
/// SPORT DADDR DPORT FOUTPUT ROUTPUT`; a rewriter whose input spec names
/// this element makes each new mapping with the next pattern in turn that
/// succeeds (Click's RoundRobinIPMapper).
pub struct RoundRobinIPMapper {
    state: Rc<RefCell<RoundRobin>>,
}

impl Element for RoundRobinIPMapper {
    fn class_name(&self) -> &'static str {
        "RoundRobinIPMapper"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let mut state = self.state.borrow_mut();
        for (i, text) in a.rest_positional().iter().enumerate() {
            let words: Vec<&str> = text.split_whitespace().collect();
            if words.len() < 3 {
                return Err(format!("pattern {i}: syntax error"));
            }
            let (pat, ports) = words.split_at(words.len() - 2);
            let p = Pattern::parse(pat).map_err(|e| format!("pattern {i}: {e}"))?;
            let (f, r) = ports_of(ports).map_err(|e| format!("pattern {i}: {e}"))?;
            state.patterns.push((p, f, r));
        }
        if state.patterns.is_empty() {
            return Err("no patterns given".into());
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let name = ctx.name().to_string();
        MAPPERS.with(|m| m.borrow_mut().insert(name, self.state.clone()));
    }
}

/// IPRewriterPatterns(NAME PATTERN, ...): names patterns (`SADDR SPORT
/// DADDR DPORT`) for input specs `pattern NAME FOUTPUT ROUTPUT`; a named
/// pattern is one object, its sequential allocation shared by every user.
#[derive(Default)]
pub struct IPRewriterPatterns;

impl Element for IPRewriterPatterns {
    fn class_name(&self) -> &'static str {
        "IPRewriterPatterns"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        // An upper-case NAME reads as a keyword argument: take those too.
        let mut named: Vec<(String, String)> = a.rest_keywords();
        for text in a.rest_positional() {
            let (name, pat) = text.trim().split_once(char::is_whitespace).unwrap_or((text.trim(), ""));
            named.push((name.to_string(), pat.to_string()));
        }
        for (name, pat) in named {
            let words: Vec<&str> = pat.split_whitespace().collect();
            let p = Pattern::parse(&words).map_err(|e| format!("{name}: {e}"))?;
            PATTERNS.with(|m| m.borrow_mut().insert(name, Rc::new(RefCell::new(p))));
        }
        Ok(())
    }
}

pub const MODULE: super::Module = super::Module {
    classes: &[
        "ICMPPingRewriter",
        "IPAddrPairRewriter",
        "IPAddrRewriter",
        "IPRewriter",
        "IPRewriterPatterns",
        "RoundRobinIPMapper",
        "TCPRewriter",
        "UDPRewriter",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "IPRewriter" => create_rewriter(Kind::Ip),
        "TCPRewriter" => create_rewriter(Kind::Tcp),
        "UDPRewriter" => create_rewriter(Kind::Udp),
        "ICMPPingRewriter" => create_rewriter(Kind::IcmpPing),
        "IPAddrRewriter" => create_rewriter(Kind::IpAddr),
        "IPAddrPairRewriter" => create_rewriter(Kind::IpAddrPair),
        "RoundRobinIPMapper" => Box::new(RoundRobinIPMapper {
            state: Rc::new(RefCell::new(RoundRobin {
                patterns: Vec::new(),
                next: 0,
            })),
        }),
        "IPRewriterPatterns" => Box::<IPRewriterPatterns>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::offload::{set_ipv4_checksum, set_l4_checksum};
    use oxnet_driver::{MemoryKind, Mempool};

    fn pool() -> Mempool {
        Mempool::new("rw-test", 64, MemoryKind::Plain).unwrap()
    }

    /// An IPv4 packet with checksums set: TCP (20-byte header), UDP, or an
    /// ICMP echo (`icmp_type` 8) / reply (0) with identifier `sport`.
    fn ipv4(proto: u8, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: usize) -> Vec<u8> {
        let l4 = match proto {
            PROTO_TCP => 20,
            _ => 8,
        };
        let total = 20 + l4 + payload;
        let mut d = vec![0u8; total];
        d[0] = 0x45;
        d[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        d[8] = 64;
        d[9] = proto;
        d[12..16].copy_from_slice(&src);
        d[16..20].copy_from_slice(&dst);
        for (i, b) in d[20 + l4..].iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        set_ipv4_checksum(&mut d[..20]);
        match proto {
            PROTO_TCP => {
                d[20..22].copy_from_slice(&sport.to_be_bytes());
                d[22..24].copy_from_slice(&dport.to_be_bytes());
                d[32] = 5 << 4;
                d[33] = 0x10;
                set_l4_checksum(&mut d, 0, 20, PROTO_TCP);
            }
            PROTO_UDP => {
                d[20..22].copy_from_slice(&sport.to_be_bytes());
                d[22..24].copy_from_slice(&dport.to_be_bytes());
                d[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
                set_l4_checksum(&mut d, 0, 20, PROTO_UDP);
            }
            _ => {
                d[20] = if dport == 0 { 0 } else { 8 };
                d[24..26].copy_from_slice(&sport.to_be_bytes());
                let sum = !oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&d[20..], 0));
                d[22..24].copy_from_slice(&sum.to_be_bytes());
            }
        }
        d
    }

    fn packet(pool: &Mempool, data: &[u8]) -> Packet {
        let mut p = pool.alloc().unwrap();
        p.set_len(data.len()).unwrap();
        p.copy_from_slice(data);
        p
    }

    fn rewriter(class: &str, config: &str) -> Rewriter {
        let kind = match class {
            "IPRewriter" => Kind::Ip,
            "TCPRewriter" => Kind::Tcp,
            "UDPRewriter" => Kind::Udp,
            "ICMPPingRewriter" => Kind::IcmpPing,
            "IPAddrRewriter" => Kind::IpAddr,
            _ => Kind::IpAddrPair,
        };
        let mut rw = Rewriter::new(kind);
        let mut a = Args::new(config);
        rw.configure(&mut a).unwrap();
        a.complete().unwrap();
        rw
    }

    /// The checksums of a packet are right: IP header, and TCP/UDP/ICMP.
    fn checksums_ok(d: &[u8]) -> bool {
        use oxnet_driver::offload::{fold, ones_sum};
        let ip_ok = fold(ones_sum(&d[..20], 0)) == 0xFFFF;
        let l4_ok = match d[9] {
            PROTO_ICMP => fold(ones_sum(&d[20..], 0)) == 0xFFFF,
            PROTO_UDP if d[26..28] == [0, 0] => true,
            proto => {
                let mut copy = d.to_vec();
                set_l4_checksum(&mut copy, 0, 20, proto);
                copy == d
            }
        };
        ip_ok && l4_ok
    }

    fn fields(d: &[u8]) -> ([u8; 4], u16, [u8; 4], u16) {
        (addr(d, 12), be16(d, 20), addr(d, 16), be16(d, 22))
    }

    #[test]
    fn napt_rewrites_both_directions_with_correct_checksums() {
        let pool = pool();
        let mut rw = rewriter("IPRewriter", "pattern 1.0.0.1 1024-65535# - - 0 1, drop");
        // Sequential ports: 1024, 1025, 1026 (the pattern goes on after
        // its flows are cleared).
        for (port, proto, payload) in [(1024, PROTO_TCP, 0), (1025, PROTO_TCP, 7), (1026, PROTO_UDP, 5)] {
            let mut p = packet(&pool, &ipv4(proto, [18, 26, 4, 44], 30, [10, 0, 0, 4], 40, payload));
            assert_eq!(rw.process(0, &mut p, 1_000), Some(0));
            assert_eq!(fields(&p), ([1, 0, 0, 1], port, [10, 0, 0, 4], 40), "proto {proto}");
            assert!(checksums_ok(&p), "proto {proto}: {:02x?}", &p[..]);
            assert_eq!(p.anno().dst_ip(), [10, 0, 0, 4]);
            // The reply comes back to the original source, on output 1.
            let mut r = packet(&pool, &ipv4(proto, [10, 0, 0, 4], 40, [1, 0, 0, 1], port, payload));
            assert_eq!(rw.process(1, &mut r, 2_000), Some(1));
            assert_eq!(fields(&r), ([10, 0, 0, 4], 40, [18, 26, 4, 44], 30));
            assert!(checksums_ok(&r));
            assert_eq!(r.anno().dst_ip(), [18, 26, 4, 44]);
            rw.flows.borrow_mut().shrink(0, true);
        }
        // A reply with no mapping meets input 1's 'drop'.
        let mut r = packet(&pool, &ipv4(PROTO_TCP, [10, 0, 0, 4], 40, [1, 0, 0, 1], 1030, 0));
        assert_eq!(rw.process(1, &mut r, 3_000), None);
    }

    #[test]
    fn a_udp_packet_without_checksum_keeps_none() {
        let pool = pool();
        let mut rw = rewriter("UDPRewriter", "pattern 1.0.0.1 5000 - - 0 0");
        let mut d = ipv4(PROTO_UDP, [9, 9, 9, 9], 53, [8, 8, 8, 8], 53, 4);
        d[26] = 0;
        d[27] = 0;
        let mut p = packet(&pool, &d);
        assert_eq!(rw.process(0, &mut p, 0), Some(0));
        assert_eq!(fields(&p), ([1, 0, 0, 1], 5000, [8, 8, 8, 8], 53));
        assert_eq!(p[26..28], [0, 0]);
        assert!(checksums_ok(&p));
    }

    #[test]
    fn keep_pass_and_what_the_classes_do_not_handle() {
        let pool = pool();
        let mut rw = rewriter("TCPRewriter", "keep 1 0, pass 1, drop");
        let mut p = packet(&pool, &ipv4(PROTO_TCP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, 0));
        let before = p.to_vec();
        assert_eq!(rw.process(0, &mut p, 0), Some(1));
        assert_eq!(p.to_vec(), before);
        let mut r = packet(&pool, &ipv4(PROTO_TCP, [2, 2, 2, 2], 2, [1, 1, 1, 1], 1, 0));
        assert_eq!(
            rw.process(2, &mut r, 0),
            Some(0),
            "the reply mapping, whatever the input"
        );
        // UDP is not TCPRewriter's: 'pass' passes it, 'drop' drops it.
        let udp = ipv4(PROTO_UDP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, 0);
        assert_eq!(rw.process(1, &mut packet(&pool, &udp), 0), Some(1));
        assert_eq!(rw.process(2, &mut packet(&pool, &udp), 0), None);
        // A truncated packet is dropped and counted, not a panic.
        assert_eq!(rw.process(0, &mut packet(&pool, &udp[..12]), 0), None);
        assert_eq!(rw.process(0, &mut packet(&pool, &udp[..24]), 0), None);
        assert_eq!(rw.drops, 3);
        assert_eq!(rw.flows.borrow().len(), 1);
    }

    #[test]
    fn icmp_ping_rewriter_maps_identifiers_and_replies() {
        let pool = pool();
        let mut rw = rewriter("ICMPPingRewriter", "pattern 2.0.0.2 - 100-101# 0 1, drop");
        let echo = |src: [u8; 4], id: u16| ipv4(PROTO_ICMP, src, id, [5, 0, 0, 5], 8, 4);
        let reply = |id: u16| ipv4(PROTO_ICMP, [5, 0, 0, 5], id, [2, 0, 0, 2], 0, 4);
        let mut p = packet(&pool, &echo([1, 0, 0, 1], 10));
        assert_eq!(rw.process(0, &mut p, 0), Some(0));
        assert_eq!((addr(&p, 12), be16(&p, 24)), ([2, 0, 0, 2], 100));
        assert!(checksums_ok(&p));
        let mut p = packet(&pool, &echo([1, 0, 0, 2], 10));
        assert_eq!(rw.process(0, &mut p, 0), Some(0));
        assert_eq!(be16(&p, 24), 101);
        let mut r = packet(&pool, &reply(101));
        assert_eq!(rw.process(1, &mut r, 0), Some(1));
        assert_eq!((addr(&r, 16), be16(&r, 24), r[20]), ([1, 0, 0, 2], 10, 0));
        assert!(checksums_ok(&r));
        // Identifier 0, sequence 0 and no payload: the reply made all
        // zero again must carry checksum 0xFFFF, not 0x0000.
        let bare = |d: &mut Vec<u8>, ty: u8, id: u16| {
            d.truncate(28);
            d[2..4].copy_from_slice(&28u16.to_be_bytes());
            d[10] = 0;
            d[11] = 0;
            set_ipv4_checksum(&mut d[..20]);
            d[20] = ty;
            d[22..28].copy_from_slice(&[0, 0, 0, id as u8, 0, 0]);
            let sum = !oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&d[20..], 0));
            d[22..24].copy_from_slice(&sum.to_be_bytes());
        };
        let mut rw0 = rewriter("ICMPPingRewriter", "pattern 2.0.0.2 - 5-6# 0 1, drop");
        let mut e = echo([1, 0, 0, 9], 0);
        bare(&mut e, 8, 0);
        let mut p = packet(&pool, &e);
        assert_eq!(rw0.process(0, &mut p, 0), Some(0));
        assert_eq!(be16(&p, 24), 5);
        let mut back = reply(5);
        bare(&mut back, 0, 5);
        let mut r = packet(&pool, &back);
        assert_eq!(rw0.process(1, &mut r, 0), Some(1));
        assert_eq!(r[20..28], [0, 0, 0xFF, 0xFF, 0, 0, 0, 0]);
        assert!(checksums_ok(&r));
        // A reply nobody asked for is dropped; so is a third host: the
        // range has two identifiers.
        assert_eq!(rw.process(1, &mut packet(&pool, &reply(7)), 0), None);
        assert_eq!(rw.process(0, &mut packet(&pool, &echo([1, 0, 0, 3], 10)), 0), None);
        assert_eq!(rw.failures, vec![1, 0]);
    }

    #[test]
    fn basic_nat_maps_source_addresses_for_any_protocol() {
        let pool = pool();
        let mut rw = rewriter("IPAddrRewriter", "pattern 9.0.0.1-9.0.0.2# - 0 1, drop");
        let mut p = packet(&pool, &ipv4(PROTO_TCP, [10, 0, 0, 1], 1111, [7, 7, 7, 7], 80, 3));
        assert_eq!(rw.process(0, &mut p, 0), Some(0));
        assert_eq!(fields(&p), ([9, 0, 0, 1], 1111, [7, 7, 7, 7], 80));
        assert!(checksums_ok(&p));
        // The same host to another destination and protocol: same address.
        let mut q = packet(&pool, &ipv4(PROTO_UDP, [10, 0, 0, 1], 5, [6, 6, 6, 6], 6, 0));
        assert_eq!(rw.process(0, &mut q, 0), Some(0));
        assert_eq!(addr(&q, 12), [9, 0, 0, 1]);
        // Another host gets the next address; replies find theirs by
        // destination.
        let mut o = packet(&pool, &ipv4(PROTO_UDP, [10, 0, 0, 2], 5, [6, 6, 6, 6], 6, 0));
        assert_eq!(rw.process(0, &mut o, 0), Some(0));
        assert_eq!(addr(&o, 12), [9, 0, 0, 2]);
        let mut r = packet(&pool, &ipv4(PROTO_TCP, [7, 7, 7, 7], 80, [9, 0, 0, 1], 1111, 3));
        assert_eq!(rw.process(1, &mut r, 0), Some(1));
        assert_eq!(fields(&r), ([7, 7, 7, 7], 80, [10, 0, 0, 1], 1111));
        assert!(checksums_ok(&r));
        assert_eq!(r.anno().dst_ip(), [10, 0, 0, 1]);
        assert_eq!(rw.flows.borrow().count(rw.owner, None), 2);
    }

    #[test]
    fn address_pair_nat_maps_per_pair() {
        let pool = pool();
        let mut rw = rewriter("IPAddrPairRewriter", "pattern 9.0.0.1 3.3.3.3 0 1, drop");
        let mut p = packet(&pool, &ipv4(PROTO_UDP, [10, 0, 0, 1], 5, [7, 7, 7, 7], 6, 2));
        assert_eq!(rw.process(0, &mut p, 0), Some(0));
        assert_eq!(fields(&p), ([9, 0, 0, 1], 5, [3, 3, 3, 3], 6));
        assert!(checksums_ok(&p));
        let mut r = packet(&pool, &ipv4(PROTO_UDP, [3, 3, 3, 3], 6, [9, 0, 0, 1], 5, 2));
        assert_eq!(rw.process(1, &mut r, 0), Some(1));
        assert_eq!(fields(&r), ([7, 7, 7, 7], 6, [10, 0, 0, 1], 5));
        assert!(checksums_ok(&r));
    }

    #[test]
    fn tcp_state_chooses_the_timeout() {
        let pool = pool();
        let mut rw = rewriter(
            "TCPRewriter",
            "pattern 1.0.0.1 - - - 0 1, keep 0 1, GUARANTEE 0, TCP_NODATA_TIMEOUT 10, TCP_TIMEOUT 100, TCP_DONE_TIMEOUT 1",
        );
        let s = 1_000_000;
        let fwd = |payload| ipv4(PROTO_TCP, [10, 0, 0, 1], 1, [2, 2, 2, 2], 2, payload);
        let rev = |payload| ipv4(PROTO_TCP, [2, 2, 2, 2], 2, [1, 0, 0, 1], 1, payload);
        let expiry = |rw: &Rewriter| rw.flows.borrow().entries(rw.owner)[0].1.expiry;
        rw.process(0, &mut packet(&pool, &fwd(0)), 0);
        assert_eq!(expiry(&rw), 10 * s);
        rw.process(0, &mut packet(&pool, &fwd(5)), s);
        assert_eq!(expiry(&rw), 11 * s, "payload one way only: still no data");
        rw.process(1, &mut packet(&pool, &rev(5)), 2 * s);
        assert_eq!(expiry(&rw), 102 * s, "payload both ways");
        let mut rst = fwd(0);
        rst[33] = 0x04;
        set_l4_checksum(&mut rst, 0, 20, PROTO_TCP);
        rw.process(0, &mut packet(&pool, &rst), 3 * s);
        assert_eq!(expiry(&rw), 4 * s, "RST: done");
    }

    #[test]
    fn input_specs_parse_and_report_errors_per_spec() {
        let mut rw = Rewriter::new(Kind::Ip);
        let mut a = Args::new("drop, pass 2, keep 0 1, pattern 1.0.0.1 1-2 - - 0 1, pattern named 0 1, mapper");
        rw.configure(&mut a).unwrap();
        assert!(matches!(rw.specs[1], Spec::Pass(2)));
        assert!(matches!(rw.specs[4], Spec::Named(..)));
        assert!(matches!(rw.specs[5], Spec::Mapper(..)));
        let mut rw = Rewriter::new(Kind::Ip);
        let err = rw
            .configure(&mut Args::new(
                "pattern 1.0.0.x - - - 0 1, drop 3, keep 0, pattern 1.0.0.1 - - - 0",
            ))
            .unwrap_err();
        assert_eq!(
            err,
            "\n  input spec 0: bad source address\n  input spec 1: syntax error, expected 'drop'\n  input spec 2: bad forward port\n  input spec 3: bad forward port"
        );
        let ports = Ports {
            input_pull: vec![false; 3],
            output_pull: vec![false; 2],
        };
        let mut rw = rewriter("IPRewriter", "drop, keep 0 2, pass 1");
        assert_eq!(
            rw.initialize(&ports).unwrap_err(),
            "\n  input spec 1: output port out of range"
        );
        let mut rw = rewriter("IPRewriter", "drop");
        assert!(rw.initialize(&ports).unwrap_err().contains("need 3 arguments"));
    }
}
