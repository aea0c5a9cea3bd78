//! The parts of the IPRewriter family that do not touch packets: flow
//! identifiers, patterns (Click's `IPRewriterPattern`), and the flow set
//! with its two expiry heaps (Click's `IPRewriterHeap`), which several
//! rewriters can share (`MAPPING_CAPACITY OTHER`).
//!
//! Semantics, from Click's IPRewriter documentation and its base class:
//! - a flow has two entries, the original flow ID (direction 0) and the
//!   reply flow ID (direction 1, the reverse of the rewritten flow);
//! - a flow is *guaranteed* for GUARANTEE seconds after each packet, then
//!   *best effort* until its protocol's timeout after its last packet;
//! - when a new flow would exceed the capacity, the best-effort flow that
//!   expires first is removed; if every flow is guaranteed, the new flow is
//!   refused (admission control).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// A flow identifier: addresses, ports and protocol. For ICMP echo flows
/// both ports hold the identifier and `reply` tells an echo reply from a
/// request, so that the reverse of a request's ID is its reply's ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    pub proto: u8,
    pub saddr: [u8; 4],
    pub sport: u16,
    pub daddr: [u8; 4],
    pub dport: u16,
    pub reply: bool,
}

impl FlowId {
    pub fn new(proto: u8, saddr: [u8; 4], sport: u16, daddr: [u8; 4], dport: u16) -> FlowId {
        FlowId {
            proto,
            saddr,
            sport,
            daddr,
            dport,
            reply: false,
        }
    }

    /// The flow in the other direction.
    pub fn reverse(&self) -> FlowId {
        FlowId {
            proto: self.proto,
            saddr: self.daddr,
            sport: self.dport,
            daddr: self.saddr,
            dport: self.sport,
            reply: if self.proto == PROTO_ICMP {
                !self.reply
            } else {
                self.reply
            },
        }
    }

    /// Click's IPFlowID unparsing: `(SA, SP, DA, DP)`.
    pub fn unparse(&self) -> String {
        format!(
            "({}, {}, {}, {})",
            ip(self.saddr),
            self.sport,
            ip(self.daddr),
            self.dport
        )
    }
}

pub fn ip(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// A pattern `SADDR SPORT DADDR DPORT` (IPRewriter documentation, input
/// spec 'pattern'): `-` keeps a field; SADDR may be a range `L-H` or a
/// prefix `A/LEN`, SPORT a range `L-H`; a range ending in `#` is
/// allocated sequentially, one ending in `?` randomly without first trying
/// the packet's own port. Two words are `SADDR DADDR` (Basic NAT), three
/// `SADDR DADDR SPORT` (ICMPPingRewriter's identifier).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    saddr: Option<[u8; 4]>,
    sport: Option<u16>,
    daddr: Option<[u8; 4]>,
    dport: Option<u16>,
    /// Ports given (three or four words): the range is over source ports.
    napt: bool,
    /// Size of the range minus one (0: no range).
    variation: u32,
    sequential: bool,
    /// Try the packet's own source port first.
    same_first: bool,
    next: u32,
    rng: u64,
}

/// Why a pattern did not parse (Click's messages).
pub const BAD_SADDR: &str = "bad source address";
pub const BAD_SPORT: &str = "bad source port";
pub const BAD_DADDR: &str = "bad destination address";
pub const BAD_DPORT: &str = "bad destination port";

fn u32_of(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
}

/// Strips a trailing `#` (sequential) or `?` (random first).
fn range_suffix(word: &str) -> (&str, bool, bool) {
    if let Some(w) = word.strip_suffix('#') {
        (w, true, false)
    } else if let Some(w) = word.strip_suffix('?') {
        (w, false, false)
    } else {
        (word, false, true)
    }
}

fn address_range(word: &str) -> Option<([u8; 4], u32, bool, bool)> {
    let (w, sequential, same_first) = range_suffix(word);
    if let Some((lo, hi)) = w.split_once('-') {
        let lo = crate::args::ip_address(lo).ok()?;
        let hi = crate::args::ip_address(hi).ok()?;
        let (l, h) = (u32_of(lo), u32_of(hi));
        return (h >= l).then(|| (lo, h - l, sequential, same_first));
    }
    let (addr, mask) = crate::args::ip_prefix(w).ok()?;
    let m = u32_of(mask);
    if u32_of(addr) == 0 || m == 0 || crate::args::mask_len(mask).is_none() {
        return None;
    }
    Some(match m {
        0xFFFF_FFFF => (addr, 0, sequential, same_first),
        0xFFFF_FFFE => ((u32_of(addr) & m).to_be_bytes(), 1, sequential, same_first),
        // A longer range leaves out the network's .0 and broadcast.
        _ => (((u32_of(addr) & m) | 1).to_be_bytes(), !m - 2, sequential, same_first),
    })
}

fn port(word: &str) -> Option<u16> {
    let v: i64 = crate::args::integer(word).ok()?;
    (1..65536).contains(&v).then_some(v as u16)
}

fn port_range(word: &str) -> Option<(u16, u32, bool, bool)> {
    let (w, sequential, same_first) = range_suffix(word);
    let (lo, hi) = w.split_once('-').unwrap_or((w, ""));
    let lo = crate::args::integer(lo).ok()?;
    let hi = crate::args::integer(hi).ok()?;
    (lo >= 0 && hi >= lo && hi < 65536).then(|| (lo as u16, (hi - lo) as u32, sequential, same_first))
}

impl Pattern {
    /// Parses the pattern words (without the output ports).
    pub fn parse(words: &[&str]) -> Result<Pattern, &'static str> {
        if words.is_empty() || words.len() > 4 || words.len() == 1 {
            return Err("syntax error");
        }
        let mut p = Pattern {
            saddr: None,
            sport: None,
            daddr: None,
            dport: None,
            napt: words.len() >= 3,
            variation: 0,
            sequential: false,
            same_first: true,
            next: 0,
            rng: seed(),
        };
        let sa = words[0];
        if sa != "-" {
            if let Ok(a) = crate::args::ip_address(sa) {
                p.saddr = Some(a);
            } else {
                let (a, v, s, f) = address_range(sa).ok_or(BAD_SADDR)?;
                (p.saddr, p.variation, p.sequential, p.same_first) = (Some(a), v, s, f);
            }
        }
        let (sport_at, daddr_at) = match words.len() {
            2 => (None, 1),
            3 => (Some(2), 1),
            _ => (Some(1), 2),
        };
        if let Some(i) = sport_at {
            let w = words[i];
            if w != "-" {
                if let Some(n) = port(w) {
                    p.sport = Some(n);
                } else {
                    let (n, v, s, f) = port_range(w).ok_or(BAD_SPORT)?;
                    (p.sport, p.variation, p.sequential, p.same_first) = (Some(n), v, s, f);
                }
            }
        }
        let da = words[daddr_at];
        if da != "-" {
            p.daddr = Some(crate::args::ip_address(da).map_err(|_| BAD_DADDR)?);
        }
        if words.len() == 4 && words[3] != "-" {
            p.dport = Some(port(words[3]).ok_or(BAD_DPORT)?);
        }
        Ok(p)
    }

    /// Click's unparsing (the `patterns` handler).
    pub fn unparse(&self) -> String {
        let mut s = match self.saddr {
            Some(a) if !self.napt && self.variation > 0 => {
                format!("{}-{}", ip(a), ip((u32_of(a) + self.variation).to_be_bytes()))
            }
            Some(a) => ip(a),
            None => "-".into(),
        };
        if self.napt {
            match self.sport {
                None => s += " -",
                Some(p) if self.variation > 0 => s += &format!(" {p}-{}", u32::from(p) + self.variation),
                Some(p) => s += &format!(" {p}"),
            }
        }
        s += &match self.daddr {
            Some(a) => format!(" {}", ip(a)),
            None => " -".into(),
        };
        if self.napt {
            s += &match self.dport {
                Some(p) => format!(" {p}"),
                None => " -".into(),
            };
        }
        s
    }

    fn random(&mut self, top: u32) -> u32 {
        // xorshift64: a port choice, nothing secret.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % (u64::from(top) + 1)) as u32
    }

    /// The rewritten flow for `flow`, with a range value whose reply flow
    /// is not `taken`; None when the range is exhausted.
    pub fn rewrite(&mut self, flow: &FlowId, taken: &dyn Fn(&FlowId) -> bool) -> Option<FlowId> {
        let mut r = *flow;
        if let Some(a) = self.saddr {
            r.saddr = a;
        }
        if let Some(p) = self.sport {
            r.sport = p;
        }
        if let Some(a) = self.daddr {
            r.daddr = a;
        }
        if let Some(p) = self.dport {
            r.dport = p;
        }
        let icmp = flow.proto == PROTO_ICMP;
        if icmp {
            r.dport = r.sport;
        }
        let top = self.variation;
        if top == 0 {
            return Some(r);
        }
        let base = if self.napt {
            u32::from(self.sport.unwrap_or(0))
        } else {
            u32_of(self.saddr.unwrap_or_default())
        };
        let napt = self.napt;
        let candidate = |v: u32| {
            let mut c = r;
            if napt {
                c.sport = (base + v) as u16;
                if icmp {
                    c.dport = c.sport;
                }
            } else {
                c.saddr = (base + v).to_be_bytes();
            }
            c
        };
        // The documentation: the packet's own source port is preferred.
        if self.napt && self.same_first {
            let v = u32::from(flow.sport).wrapping_sub(base);
            if v <= top && !taken(&candidate(v).reverse()) {
                self.next = v.wrapping_add(1);
                return Some(candidate(v));
            }
        }
        let mut v = if self.sequential {
            if self.next > top {
                0
            } else {
                self.next
            }
        } else {
            self.random(top)
        };
        for _ in 0..=top {
            let c = candidate(v);
            if !taken(&c.reverse()) {
                self.next = v + 1;
                return Some(c);
            }
            v = if v == top { 0 } else { v + 1 };
        }
        None
    }
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t | 1
}

/// Timeouts of one kind of flow, in microseconds (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeouts {
    /// Guaranteed lifetime after each packet.
    pub guarantee: u64,
    /// Best-effort lifetime after the last packet (TCP: no payload in one
    /// direction yet).
    pub base: u64,
    /// TCP with payload seen both ways.
    pub tcp_data: u64,
    /// TCP closed (FIN both ways, or RST).
    pub tcp_done: u64,
    /// UDP with at least 3 packets, one of them a reply.
    pub udp_streaming: u64,
}

/// TCP state bits (TCPRewriter's documentation: payload both ways, FIN
/// and RST mark a connection complete).
pub const FORWARD_DONE: u8 = 1;
pub const REPLY_DONE: u8 = 2;
pub const FORWARD_DATA: u8 = 4;
pub const REPLY_DATA: u8 = 8;

/// One mapping: both directions of a flow.
#[derive(Debug, Clone)]
pub struct Flow {
    /// The rewriter that made it, and its input.
    pub owner: u64,
    pub input: usize,
    /// Direction 0: the original flow ID; direction 1: the reply flow ID
    /// (the reverse of the rewritten flow).
    pub keys: [FlowId; 2],
    pub outputs: [usize; 2],
    pub expiry: u64,
    pub guaranteed: bool,
    pub timeouts: Timeouts,
    /// TCP: FORWARD_DONE... bits; UDP: packets seen (up to 3).
    pub state: u8,
    pub udp_reply_seen: bool,
    pub reply_anno: u8,
}

impl Flow {
    /// The flow ID a packet of direction `dir` is rewritten to.
    pub fn rewritten(&self, dir: usize) -> FlowId {
        self.keys[1 - dir].reverse()
    }

    /// How long the flow lives after its last packet once its guarantee
    /// is over (TCPRewriter's and UDPRewriter's timeouts by state).
    pub fn best_effort_timeout(&self) -> u64 {
        let t = &self.timeouts;
        match self.keys[0].proto {
            PROTO_TCP if self.state & (FORWARD_DONE | REPLY_DONE) == FORWARD_DONE | REPLY_DONE => t.tcp_done,
            PROTO_TCP if self.state & (FORWARD_DATA | REPLY_DATA) == FORWARD_DATA | REPLY_DATA => t.tcp_data,
            PROTO_UDP if self.state >= 3 && self.udp_reply_seen => t.udp_streaming,
            _ => t.base,
        }
    }

    /// When a guaranteed flow's best-effort life ends.
    pub fn best_effort_expiry(&self) -> u64 {
        if self.guaranteed {
            (self.expiry + self.best_effort_timeout()).saturating_sub(self.timeouts.guarantee)
        } else {
            self.expiry
        }
    }
}

const GUARANTEED: usize = 1;
const BEST_EFFORT: usize = 0;

/// Flows of one or more rewriters and their capacity.
#[derive(Debug)]
pub struct FlowSet {
    pub capacity: u64,
    flows: HashMap<u64, Flow>,
    /// (rewriter, flow ID) → (flow, direction).
    index: HashMap<(u64, FlowId), (u64, usize)>,
    /// Per heap (best effort, guaranteed): (expiry, flow), first to expire
    /// first, the older flow first on a tie.
    heaps: [BTreeSet<(u64, u64)>; 2],
    next_id: u64,
}

pub type SharedFlows = Rc<RefCell<FlowSet>>;

impl Default for FlowSet {
    fn default() -> FlowSet {
        FlowSet {
            capacity: u64::from(u32::MAX >> 1),
            flows: HashMap::new(),
            index: HashMap::new(),
            heaps: [BTreeSet::new(), BTreeSet::new()],
            next_id: 0,
        }
    }
}

impl FlowSet {
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn lookup(&self, owner: u64, key: &FlowId) -> Option<(u64, usize)> {
        self.index.get(&(owner, *key)).copied()
    }

    pub fn contains(&self, owner: u64, key: &FlowId) -> bool {
        self.index.contains_key(&(owner, *key))
    }

    pub fn get(&self, id: u64) -> Option<&Flow> {
        self.flows.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Flow> {
        self.flows.get_mut(&id)
    }

    /// The entries of rewriter `owner`: (flow ID, flow, direction), sorted
    /// by flow ID so that tables read the same every time.
    pub fn entries(&self, owner: u64) -> Vec<(FlowId, &Flow, usize)> {
        let mut v: Vec<_> = self
            .index
            .iter()
            .filter(|((o, _), _)| *o == owner)
            .filter_map(|((_, k), (id, dir))| self.flows.get(id).map(|f| (*k, f, *dir)))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Flows made by `owner`'s input `input`.
    pub fn count(&self, owner: u64, input: Option<usize>) -> usize {
        self.flows
            .values()
            .filter(|f| f.owner == owner && input.is_none_or(|i| f.input == i))
            .count()
    }

    /// Adds `flow` (Click's `store_flow`). A reply ID already mapped to
    /// another flow takes over that entry and the older flow goes. Over
    /// capacity, the first best-effort flow to expire goes, or the new one
    /// if every flow is guaranteed: None then.
    pub fn insert(&mut self, flow: Flow, now: u64) -> Option<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let owner = flow.owner;
        let keys = flow.keys;
        self.heaps[usize::from(flow.guaranteed)].insert((flow.expiry, id));
        self.flows.insert(id, flow);
        self.index.insert((owner, keys[0]), (id, 0));
        if let Some((old, _)) = self.index.insert((owner, keys[1]), (id, 1)) {
            if old != id {
                self.destroy(old);
            }
        }
        if self.flows.len() as u64 > self.capacity {
            self.shift_best_effort(now);
            let dead = match self.heaps[BEST_EFFORT].first() {
                Some(&(_, dead)) => dead,
                None => id,
            };
            self.destroy(dead);
            if dead == id {
                return None;
            }
        }
        Some(id)
    }

    /// Removes a flow and its entries.
    pub fn destroy(&mut self, id: u64) {
        let Some(flow) = self.flows.remove(&id) else {
            return;
        };
        self.heaps[usize::from(flow.guaranteed)].remove(&(flow.expiry, id));
        for key in flow.keys {
            if self.index.get(&(flow.owner, key)).is_some_and(|(f, _)| *f == id) {
                self.index.remove(&(flow.owner, key));
            }
        }
    }

    /// Removes every flow `doomed` says.
    pub fn destroy_where(&mut self, doomed: impl Fn(&Flow) -> bool) {
        let ids: Vec<u64> = self
            .flows
            .iter()
            .filter(|(_, f)| doomed(f))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.destroy(id);
        }
    }

    pub fn set_expiry(&mut self, id: u64, guaranteed: bool, expiry: u64) {
        let Some(flow) = self.flows.get_mut(&id) else {
            return;
        };
        self.heaps[usize::from(flow.guaranteed)].remove(&(flow.expiry, id));
        flow.guaranteed = guaranteed;
        flow.expiry = expiry;
        self.heaps[usize::from(guaranteed)].insert((expiry, id));
    }

    /// Refreshes a flow after a packet: guaranteed for its guarantee, or
    /// best effort for its timeout.
    pub fn refresh(&mut self, id: u64, now: u64) {
        let Some(flow) = self.flows.get(&id) else {
            return;
        };
        let g = flow.timeouts.guarantee;
        if g > 0 {
            self.set_expiry(id, true, now + g);
        } else {
            let t = flow.best_effort_timeout();
            self.set_expiry(id, false, now + t);
        }
    }

    /// Flows whose guarantee is over become best effort.
    fn shift_best_effort(&mut self, now: u64) {
        while let Some(&(expiry, id)) = self.heaps[GUARANTEED].first() {
            if expiry > now {
                break;
            }
            let e = self.flows[&id].best_effort_expiry();
            self.set_expiry(id, false, e);
        }
    }

    /// Removes expired flows, then the first to expire while over capacity
    /// (all of them if `clear_all`): Click's reaping.
    pub fn shrink(&mut self, now: u64, clear_all: bool) {
        self.shift_best_effort(now);
        while let Some(&(expiry, id)) = self.heaps[BEST_EFFORT].first() {
            if expiry > now {
                break;
            }
            self.destroy(id);
        }
        let capacity = if clear_all { 0 } else { self.capacity };
        while self.flows.len() as u64 > capacity {
            let heap = if self.heaps[BEST_EFFORT].is_empty() {
                GUARANTEED
            } else {
                BEST_EFFORT
            };
            let Some(&(_, id)) = self.heaps[heap].first() else {
                break;
            };
            self.destroy(id);
        }
    }
}

/// RFC 1624 (eqn. 3) incremental update of an Internet checksum `sum`
/// when the 16-bit words `old` become `new`: HC' = ~(~HC + ~m + m').
pub fn checksum_update(sum: u16, old: &[u8], new: &[u8]) -> u16 {
    use oxnet_driver::offload::{fold, ones_sum};
    let not_old = !fold(ones_sum(old, 0));
    !fold(ones_sum(new, u64::from(!sum) + u64::from(not_old)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn patterns_unparse_as_click_does() {
        let cases = [
            ("1.0.0.1 1 - -", "1.0.0.1 1 - -"),
            ("1.0.0.1 1-65535 - -", "1.0.0.1 1-65535 - -"),
            ("1.0.0.1 - - -", "1.0.0.1 - - -"),
            ("1.0.0.1 1024-65535# - -", "1.0.0.1 1024-65535 - -"),
            ("1.0.0.1 -", "1.0.0.1 -"),
            ("1.0.0.1-1.0.255.255 -", "1.0.0.1-1.0.255.255 -"),
            ("1.0.0.1/24 -", "1.0.0.1-1.0.0.254 -"),
            ("1.0.0.1/8 -", "1.0.0.1-1.255.255.254 -"),
        ];
        for (text, want) in cases {
            assert_eq!(Pattern::parse(&words(text)).unwrap().unparse(), want, "{text}");
        }
    }

    #[test]
    fn bad_patterns_name_the_field() {
        assert_eq!(Pattern::parse(&words("1.0.0.x -")), Err(BAD_SADDR));
        assert_eq!(Pattern::parse(&words("1.255.0.0-1.0.255.255 -")), Err(BAD_SADDR));
        assert_eq!(Pattern::parse(&words("1.0.0.1 1x - -")), Err(BAD_SPORT));
        assert_eq!(Pattern::parse(&words("1.0.0.0 456-19 - -")), Err(BAD_SPORT));
        assert_eq!(Pattern::parse(&words("1.0.0.0 456-65536 - -")), Err(BAD_SPORT));
        assert_eq!(Pattern::parse(&words("1.0.0.0 0 - -")), Err(BAD_SPORT));
        assert!(Pattern::parse(&words("1.0.0.0 0-255 - -")).is_ok());
        assert_eq!(Pattern::parse(&words("- - 1.2.3 -")), Err(BAD_DADDR));
        assert_eq!(Pattern::parse(&words("- - - 70000")), Err(BAD_DPORT));
    }

    #[test]
    fn a_range_prefers_the_source_port_unless_sequential() {
        let f = |sport| FlowId::new(PROTO_TCP, [9, 0, 0, 1], sport, [10, 0, 0, 4], 40);
        let none = |_: &FlowId| false;
        let mut p = Pattern::parse(&words("1.0.0.1 1024-1026 - -")).unwrap();
        assert_eq!(p.rewrite(&f(1025), &none).unwrap().sport, 1025);
        // '#': sequential from the start of the range, wrapping around.
        let mut p = Pattern::parse(&words("1.0.0.1 1024-1026# - -")).unwrap();
        assert_eq!(p.rewrite(&f(1025), &none).unwrap().sport, 1024);
        assert_eq!(p.rewrite(&f(1), &none).unwrap().sport, 1025);
        assert_eq!(p.rewrite(&f(1), &none).unwrap().sport, 1026);
        assert_eq!(p.rewrite(&f(1), &none).unwrap().sport, 1024);
        let all = |_: &FlowId| true;
        assert_eq!(p.rewrite(&f(1), &all), None);
        // The reply ID of a candidate is what must be free.
        let taken = |k: &FlowId| k.dport == 1024 && k.daddr == [1, 0, 0, 1] && k.saddr == [10, 0, 0, 4];
        let r = p.rewrite(&f(1), &taken).unwrap();
        assert_eq!(
            (r.saddr, r.sport, r.daddr, r.dport),
            ([1, 0, 0, 1], 1025, [10, 0, 0, 4], 40)
        );
    }

    #[test]
    fn checksum_update_matches_a_full_recomputation() {
        use oxnet_driver::offload::{fold, ones_sum};
        let mut data = [0x45u8, 0, 0, 40, 1, 2, 0, 0, 64, 6, 0, 0, 18, 26, 4, 44, 10, 0, 0, 4];
        let sum = !fold(ones_sum(&data, 0));
        let old = data[12..16].to_vec();
        data[12..16].copy_from_slice(&[1, 0, 0, 1]);
        assert_eq!(checksum_update(sum, &old, &data[12..16]), !fold(ones_sum(&data, 0)));
    }

    fn flow(n: u8, guarantee: u64, now: u64) -> Flow {
        let key = FlowId::new(PROTO_UDP, [1, 0, 0, n], 1, [2, 0, 0, 2], 2);
        Flow {
            owner: 1,
            input: 0,
            keys: [key, key.reverse()],
            outputs: [0, 1],
            expiry: now + if guarantee > 0 { guarantee } else { 300 },
            guaranteed: guarantee > 0,
            timeouts: Timeouts {
                guarantee,
                base: 300,
                udp_streaming: 300,
                ..Timeouts::default()
            },
            state: 0,
            udp_reply_seen: false,
            reply_anno: 0,
        }
    }

    #[test]
    fn a_full_set_refuses_new_flows_while_all_are_guaranteed_then_evicts_the_first_to_expire() {
        let mut set = FlowSet {
            capacity: 2,
            ..FlowSet::default()
        };
        assert!(set.insert(flow(1, 5, 0), 0).is_some());
        assert!(set.insert(flow(2, 5, 1), 1).is_some());
        assert_eq!(set.insert(flow(3, 5, 2), 2), None);
        assert_eq!(set.len(), 2);
        // At 5 flow 1's guarantee is over: it goes for flow 4.
        assert!(set.insert(flow(4, 5, 5), 5).is_some());
        let k1 = FlowId::new(PROTO_UDP, [1, 0, 0, 1], 1, [2, 0, 0, 2], 2);
        assert!(!set.contains(1, &k1));
        assert_eq!(set.len(), 2);
        set.shrink(400, false);
        assert!(set.is_empty());
    }
}
