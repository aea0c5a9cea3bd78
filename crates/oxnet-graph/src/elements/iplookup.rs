//! IPv4 routing tables: longest-prefix match on the destination address
//! annotation (RFC 1812 §5.2.4.3, "the route with the longest prefix
//! wins"), after Click's IPRouteTable family (`elements/ip/iproutetable.hh`
//! and the classes of the same names).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | LinearIPLookup(ROUTE, ...) | 1/- | push | routes kept in a list, searched whole for each packet |
//! | StaticIPLookup(ROUTE, ...) | 1/- | push | LinearIPLookup whose table cannot change at run time |
//! | RadixIPLookup(ROUTE, ...) | 1/- | push | routes in a binary trie: at most 32 steps per lookup, whatever the table size |
//! | DirectIPLookup(ROUTE, ...) | 1/- | push | DIR-24-8-BASIC (Gupta, Lin, McKeown, Infocom 1998): one or two table reads per lookup |
//!
//! A ROUTE is `ADDR/MASK [GW] OUT`: packets whose destination annotation
//! matches ADDR/MASK leave on output OUT, their destination annotation
//! set to GW if one is given (`-` or nothing: none). ADDR/MASK may be any
//! IP prefix form (`10.0.0.0/8`, `10/8`, `10.0.0.0/255.0.0.0`), a bare
//! address (/32), or an AddressInfo name (`NAME` is its address /32,
//! `NAME:ipnet` its network, `NAME:bcast` its broadcast address).
//!
//! Handlers (every table): `table` (the routes, one a line: prefix, gateway
//! or `-`, output), `lookup ADDR` (read with a parameter: `OUT` or `OUT GW`,
//! -1 if no route), `drops` (packets without a route). All but
//! StaticIPLookup also have the write handlers `add ROUTE` (fails if a
//! route for the prefix exists), `set ROUTE` (replaces it), `remove
//! ADDR/MASK [[GW] OUT]` and `ctrl`: lines of `add ROUTE`, `set ROUTE`,
//! `remove ROUTE`, applied all or none (Click's atomic ctrl). DirectIPLookup
//! also has `flush` (write): removes every route.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::PacketBatch;

/// One route: destination prefix, gateway (0: none) and output port (-1
/// in a removal that matches any gateway and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub addr: u32,
    pub mask: u32,
    pub gw: u32,
    pub port: i32,
}

impl Route {
    /// Whether `addr` lies in this route's prefix.
    pub fn contains(&self, addr: u32) -> bool {
        addr & self.mask == self.addr
    }

    /// Whether `other` names this route (Click's `IPRoute::match`): same
    /// prefix, and same gateway and port unless `other.port` is negative.
    pub fn matches(&self, other: &Route) -> bool {
        self.addr == other.addr
            && self.mask == other.mask
            && (other.port < 0 || (self.gw == other.gw && self.port == other.port))
    }

    fn prefix_len(&self) -> u32 {
        self.mask.count_ones()
    }
}

fn dotted(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

impl std::fmt::Display for Route {
    /// `ADDR/LEN GW OUT`, as Click's `IPRoute::unparse` (a mask that is
    /// not contiguous is written as an address).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefix = match args::mask_len(self.mask.to_be_bytes()) {
            Some(len) => format!("{}/{len}", dotted(self.addr)),
            None => format!("{}/{}", dotted(self.addr), dotted(self.mask)),
        };
        let gw = if self.gw == 0 { "-".to_string() } else { dotted(self.gw) };
        write!(f, "{prefix}\t{gw}\t{}", self.port)
    }
}

/// The destination of a route: a prefix, a bare address (/32) or an
/// AddressInfo name (`NAME`, `NAME:ipnet`, `NAME:bcast`).
fn route_prefix(word: &str) -> Result<(u32, u32), String> {
    for (suffix, broadcast) in [(":ipnet", false), (":net", false), (":bcast", true)] {
        if let Some(name) = word.strip_suffix(suffix) {
            let (addr, mask) = args::ip_prefix(name)?;
            let (a, m) = (u32::from_be_bytes(addr), u32::from_be_bytes(mask));
            return Ok(if broadcast { (a | !m, u32::MAX) } else { (a & m, m) });
        }
    }
    if let Ok(addr) = args::ip_address(word) {
        return Ok((u32::from_be_bytes(addr), u32::MAX));
    }
    let (addr, mask) = args::ip_prefix(word)?;
    Ok((u32::from_be_bytes(addr), u32::from_be_bytes(mask)))
}

/// Parses `ADDR/MASK [GW] OUT` (Click's `cp_ip_route`); in a removal the
/// output may be left out (any route for the prefix). The address is
/// masked.
pub fn parse_route(text: &str, removal: bool) -> Result<Route, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let expected = || {
        if removal {
            format!("expected 'ADDR/MASK [GATEWAY OUTPUT]', not '{}'", text.trim())
        } else {
            format!("expected 'ADDR/MASK [GATEWAY] OUTPUT', not '{}'", text.trim())
        }
    };
    let Some((first, rest)) = words.split_first() else {
        return Err(expected());
    };
    let (addr, mask) = route_prefix(first).map_err(|_| expected())?;
    let mut route = Route {
        addr: addr & mask,
        mask,
        gw: 0,
        port: -1,
    };
    let port_word = match rest {
        [] if removal => return Ok(route),
        [port] => port,
        [gw, port] => {
            if *gw != "-" {
                route.gw = u32::from_be_bytes(args::ip_address(gw).map_err(|_| expected())?);
            }
            port
        }
        _ => return Err(expected()),
    };
    route.port = args::integer(port_word)
        .ok()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(expected)?;
    Ok(route)
}

/// A routing table: what the four elements implement differently.
pub trait RouteTable: Default + 'static {
    /// Adds `route`. If a route for the same prefix exists it is replaced
    /// when `replace`, else Err(existing). Ok(replaced route, if any).
    fn add(&mut self, route: Route, replace: bool) -> Result<Option<Route>, Route>;
    /// Removes the route that `route` names ([`Route::matches`]).
    fn remove(&mut self, route: &Route) -> Option<Route>;
    /// The longest-prefix match for `addr`: (gateway, port).
    fn lookup(&self, addr: u32) -> Option<(u32, i32)>;
    /// Every route, in the order the `table` handler lists them.
    fn routes(&self) -> Vec<Route>;
}

/// Route slots with free places reused, so that the `table` handler lists
/// routes where they were added (as Click's tables keep them).
#[derive(Default)]
struct Slots {
    routes: Vec<Option<Route>>,
    free: Vec<u32>,
}

impl Slots {
    fn insert(&mut self, route: Route) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.routes[i as usize] = Some(route);
                i
            }
            None => {
                self.routes.push(Some(route));
                (self.routes.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, i: u32) -> Option<Route> {
        let r = self.routes[i as usize].take();
        if r.is_some() {
            self.free.push(i);
        }
        r
    }

    fn get(&self, i: u32) -> &Route {
        self.routes[i as usize].as_ref().expect("a live slot")
    }

    fn list(&self) -> Vec<Route> {
        self.routes.iter().flatten().copied().collect()
    }
}

/// LinearIPLookup's and StaticIPLookup's table: a list searched whole.
#[derive(Default)]
pub struct LinearTable {
    slots: Slots,
}

impl RouteTable for LinearTable {
    fn add(&mut self, route: Route, replace: bool) -> Result<Option<Route>, Route> {
        let existing = self
            .slots
            .routes
            .iter_mut()
            .flatten()
            .find(|r| r.addr == route.addr && r.mask == route.mask);
        match existing {
            Some(r) if !replace => Err(*r),
            Some(r) => Ok(Some(std::mem::replace(r, route))),
            None => {
                // Click's LinearIPLookup fills the first free place.
                match self.slots.routes.iter().position(Option::is_none) {
                    Some(i) => self.slots.routes[i] = Some(route),
                    None => self.slots.routes.push(Some(route)),
                }
                Ok(None)
            }
        }
    }

    fn remove(&mut self, route: &Route) -> Option<Route> {
        let i = self
            .slots
            .routes
            .iter()
            .position(|r| r.is_some_and(|r| r.matches(route)))?;
        self.slots.routes[i].take()
    }

    fn lookup(&self, addr: u32) -> Option<(u32, i32)> {
        // The most specific mask wins; the first of equals.
        let mut best: Option<&Route> = None;
        for r in self.slots.routes.iter().flatten() {
            if r.contains(addr) && best.is_none_or(|b| r.prefix_len() > b.prefix_len()) {
                best = Some(r);
            }
        }
        best.map(|r| (r.gw, r.port))
    }

    fn routes(&self) -> Vec<Route> {
        self.slots.list()
    }
}

/// No child / no route in a [`RadixTable`] node.
const NONE: u32 = u32::MAX;

/// One node of the binary trie: the node for prefix bits b0..bk.
#[derive(Clone, Copy)]
struct Node {
    child: [u32; 2],
    /// Slot of the route for exactly this prefix.
    route: u32,
}

const EMPTY_NODE: Node = Node {
    child: [NONE; 2],
    route: NONE,
};

/// RadixIPLookup's table: a binary trie over the address bits, most
/// significant first; node k levels deep stands for a /k prefix. A lookup
/// walks the address's path and keeps the last route seen: the longest
/// matching prefix. Masks must be contiguous (a prefix length).
pub struct RadixTable {
    nodes: Vec<Node>,
    slots: Slots,
}

impl Default for RadixTable {
    fn default() -> RadixTable {
        RadixTable {
            nodes: vec![EMPTY_NODE],
            slots: Slots::default(),
        }
    }
}

impl RadixTable {
    /// The node of `route`'s prefix, made if `create`.
    fn node(&mut self, route: &Route, create: bool) -> Option<usize> {
        let mut n = 0usize;
        for level in 0..route.prefix_len() {
            let bit = ((route.addr >> (31 - level)) & 1) as usize;
            let next = self.nodes[n].child[bit];
            n = if next != NONE {
                next as usize
            } else if create {
                self.nodes.push(EMPTY_NODE);
                let k = self.nodes.len() - 1;
                self.nodes[n].child[bit] = k as u32;
                k
            } else {
                return None;
            };
        }
        Some(n)
    }
}

impl RouteTable for RadixTable {
    fn add(&mut self, route: Route, replace: bool) -> Result<Option<Route>, Route> {
        let n = self.node(&route, true).expect("created");
        let old = self.nodes[n].route;
        let replaced = if old == NONE {
            None
        } else if !replace {
            return Err(*self.slots.get(old));
        } else {
            self.slots.take(old)
        };
        self.nodes[n].route = self.slots.insert(route);
        Ok(replaced)
    }

    fn remove(&mut self, route: &Route) -> Option<Route> {
        let n = self.node(route, false)?;
        let slot = self.nodes[n].route;
        if slot == NONE || !self.slots.get(slot).matches(route) {
            return None;
        }
        self.nodes[n].route = NONE;
        self.slots.take(slot)
    }

    fn lookup(&self, addr: u32) -> Option<(u32, i32)> {
        let mut n = 0usize;
        let mut best = self.nodes[0].route;
        for level in 0..32 {
            let next = self.nodes[n].child[((addr >> (31 - level)) & 1) as usize];
            if next == NONE {
                break;
            }
            n = next as usize;
            if self.nodes[n].route != NONE {
                best = self.nodes[n].route;
            }
        }
        (best != NONE).then(|| {
            let r = self.slots.get(best);
            (r.gw, r.port)
        })
    }

    fn routes(&self) -> Vec<Route> {
        self.slots.list()
    }
}

/// A [`DirectTable`] entry that names a second-level segment (the rest of
/// the bits: its index).
const SEGMENT: u16 = 0x8000;
/// Entries of the first-level table: one per /24.
const TBL24: usize = 1 << 24;

/// DirectIPLookup's table, DIR-24-8-BASIC (Gupta, Lin and McKeown,
/// "Routing Lookups in Hardware at Memory Access Speeds", Infocom 1998):
/// a first-level table indexed by the top 24 address bits, whose entry
/// is a route or, for a /24 that holds longer prefixes, a 256-entry
/// segment indexed by the last 8 bits. Every entry is expanded to the
/// longest prefix covering it, so a lookup is one or two reads. Entries
/// hold a route's slot plus one (0: the default route, kept aside so that
/// 0/0 costs no expansion). At most 32767 routes and 32768 segments.
#[derive(Default)]
pub struct DirectTable {
    /// 2^24 entries, allocated with the first route longer than /0.
    tbl24: Vec<u16>,
    /// Segments of 256 entries each.
    tbl_long: Vec<u16>,
    slots: Slots,
    default: Option<Route>,
}

impl DirectTable {
    /// The prefix length of the route an entry names (0 for none).
    fn entry_len(&self, entry: u16) -> u32 {
        if entry == 0 {
            0
        } else {
            self.slots.get(u32::from(entry) - 1).prefix_len()
        }
    }

    /// Writes `entry` (of prefix length `len`) over the entries in
    /// `range` of `table` that hold a shorter prefix (or `only`).
    fn fill(&mut self, long: bool, range: std::ops::Range<usize>, entry: u16, len: u32, only: Option<u16>) {
        for i in range {
            let current = if long { self.tbl_long[i] } else { self.tbl24[i] };
            if !long && current & SEGMENT != 0 {
                let base = usize::from(current & !SEGMENT) * 256;
                self.fill(true, base..base + 256, entry, len, only);
                continue;
            }
            let replace = match only {
                Some(old) => current == old,
                None => self.entry_len(current) <= len,
            };
            if replace {
                if long {
                    self.tbl_long[i] = entry;
                } else {
                    self.tbl24[i] = entry;
                }
            }
        }
    }

    /// The slice of the tables a route covers: (second level?, range).
    fn span(&mut self, route: &Route) -> Result<(bool, std::ops::Range<usize>), ()> {
        if self.tbl24.is_empty() {
            self.tbl24 = vec![0; TBL24];
        }
        let len = route.prefix_len();
        let top = (route.addr >> 8) as usize;
        if len <= 24 {
            return Ok((false, top..top + (1usize << (24 - len))));
        }
        let mut entry = self.tbl24[top];
        if entry & SEGMENT == 0 {
            let segment = self.tbl_long.len() / 256;
            if segment >= usize::from(SEGMENT) {
                return Err(());
            }
            self.tbl_long.extend_from_slice(&[entry; 256]);
            entry = SEGMENT | segment as u16;
            self.tbl24[top] = entry;
        }
        let base = usize::from(entry & !SEGMENT) * 256 + (route.addr & 0xff) as usize;
        Ok((true, base..base + (1usize << (32 - len))))
    }
}

impl RouteTable for DirectTable {
    fn add(&mut self, route: Route, replace: bool) -> Result<Option<Route>, Route> {
        if route.mask == 0 {
            return match self.default {
                Some(old) if !replace => Err(old),
                old => {
                    self.default = Some(route);
                    Ok(old)
                }
            };
        }
        let existing = self
            .slots
            .routes
            .iter_mut()
            .flatten()
            .find(|r| r.addr == route.addr && r.mask == route.mask);
        match existing {
            Some(r) if !replace => return Err(*r),
            // The same prefix: the entries stay, the slot changes.
            Some(r) => return Ok(Some(std::mem::replace(r, route))),
            None => {}
        }
        let slot = self.slots.insert(route);
        let Ok(entry) = u16::try_from(slot + 1)
            .map_err(|_| ())
            .and_then(|e| if e < SEGMENT { Ok(e) } else { Err(()) })
        else {
            // Full: refused (reported by the caller as a conflict with
            // itself would be wrong, so the route is simply not added).
            self.slots.take(slot);
            return Err(route);
        };
        match self.span(&route) {
            Ok((long, range)) => {
                self.fill(long, range, entry, route.prefix_len(), None);
                Ok(None)
            }
            Err(()) => {
                self.slots.take(slot);
                Err(route)
            }
        }
    }

    fn remove(&mut self, route: &Route) -> Option<Route> {
        if route.mask == 0 {
            return match self.default {
                Some(d) if d.matches(route) => self.default.take(),
                _ => None,
            };
        }
        let slot = self
            .slots
            .routes
            .iter()
            .position(|r| r.is_some_and(|r| r.matches(route)))? as u32;
        let removed = *self.slots.get(slot);
        // What covered the removed prefix before it came: the longest
        // shorter prefix that contains it (the default route: entry 0).
        let cover = self
            .slots
            .routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|r| (i, r)))
            .filter(|(_, r)| r.prefix_len() < removed.prefix_len() && r.contains(removed.addr))
            .max_by_key(|(_, r)| r.prefix_len())
            .map_or(0, |(i, _)| i as u16 + 1);
        let (long, range) = self.span(&removed).ok()?;
        self.fill(long, range, cover, 0, Some(slot as u16 + 1));
        self.slots.take(slot)
    }

    fn lookup(&self, addr: u32) -> Option<(u32, i32)> {
        let entry = match self.tbl24.get((addr >> 8) as usize) {
            Some(&e) if e & SEGMENT != 0 => self.tbl_long[usize::from(e & !SEGMENT) * 256 + (addr & 0xff) as usize],
            Some(&e) => e,
            None => 0,
        };
        let route = if entry == 0 {
            self.default.as_ref()?
        } else {
            self.slots.get(u32::from(entry) - 1)
        };
        Some((route.gw, route.port))
    }

    fn routes(&self) -> Vec<Route> {
        self.default.iter().copied().chain(self.slots.list()).collect()
    }
}

/// A routing table element: the class's table, the configured routes and
/// the handlers every IPRouteTable has.
pub struct IPLookup<T: RouteTable> {
    class: &'static str,
    table: T,
    /// Whether the write handlers exist (not for StaticIPLookup).
    dynamic: bool,
    /// Whether masks must be contiguous (the tries).
    prefixes_only: bool,
    /// Routes from the configuration, checked against the outputs once
    /// they are known.
    configured: Vec<Route>,
    drops: u64,
}

impl<T: RouteTable> IPLookup<T> {
    pub fn new(class: &'static str, dynamic: bool, prefixes_only: bool) -> IPLookup<T> {
        IPLookup {
            class,
            table: T::default(),
            dynamic,
            prefixes_only,
            configured: Vec::new(),
            drops: 0,
        }
    }

    fn check_mask(&self, route: &Route) -> Result<(), String> {
        if self.prefixes_only && args::mask_len(route.mask.to_be_bytes()).is_none() {
            return Err(format!(
                "{}: mask {} is not a prefix length",
                self.class,
                dotted(route.mask)
            ));
        }
        Ok(())
    }

    /// One `add`, `set` or `remove` (Click's `run_command`); returns what
    /// undoes it.
    fn command(&mut self, command: &str, text: &str, noutputs: usize) -> Result<Undo, String> {
        let removal = command == "remove";
        let route = parse_route(text, removal)?;
        let lowest = if removal { -1 } else { 0 };
        if route.port < lowest || route.port >= noutputs as i32 {
            return Err(format!(
                "{command} '{}': output {} does not exist (outputs 0 to {})",
                text.trim(),
                route.port,
                noutputs as i64 - 1
            ));
        }
        self.check_mask(&route)?;
        match command {
            "add" | "set" => match self.table.add(route, command == "set") {
                Ok(Some(old)) => Ok(Undo::Restore(old)),
                Ok(None) => Ok(Undo::Remove(route)),
                Err(existing) => Err(format!("conflict with existing route '{existing}'")),
            },
            _ => match self.table.remove(&route) {
                Some(old) => Ok(Undo::Restore(old)),
                None => Err(format!("route '{}' not found", text.trim())),
            },
        }
    }

    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Remove(r) => {
                self.table.remove(&r);
            }
            Undo::Restore(r) => {
                let _ = self.table.add(r, true);
            }
        }
    }

    /// The `ctrl` handler: every line applied, or none.
    fn ctrl(&mut self, text: &str, noutputs: usize) -> Result<(), String> {
        let mut done = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            let (command, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let result = match command {
                "" => continue,
                "add" | "set" | "remove" => self.command(command, rest, noutputs),
                other => Err(format!("bad command '{other}'")),
            };
            match result {
                Ok(undo) => done.push(undo),
                Err(e) => {
                    while let Some(u) = done.pop() {
                        self.undo(u);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn table_text(&self) -> String {
        self.table.routes().iter().map(|r| format!("{r}\n")).collect()
    }
}

/// How to undo one table change.
#[derive(Debug)]
enum Undo {
    Remove(Route),
    Restore(Route),
}

impl<T: RouteTable> Element for IPLookup<T> {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        for (i, text) in a.rest_positional().iter().enumerate() {
            let route = parse_route(text, false).map_err(|_| {
                format!(
                    "argument {} should be 'ADDR/MASK [GATEWAY] OUTPUT', not '{}'",
                    i + 1,
                    text.trim()
                )
            })?;
            if route.port < 0 {
                return Err(format!("argument {}: output {} does not exist", i + 1, route.port));
            }
            self.check_mask(&route)?;
            // A second route for the same prefix is ignored, as in Click.
            let _ = self.table.add(route, false);
            self.configured.push(route);
        }
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        match self.configured.iter().find(|r| r.port as usize >= ports.outputs()) {
            Some(r) => Err(format!(
                "route '{r}' uses output {}, but only {} output{} are connected",
                r.port,
                ports.outputs(),
                if ports.outputs() == 1 { "" } else { "s" }
            )),
            None => Ok(()),
        }
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let n = ctx.noutputs();
        let len = batch.len();
        // Look every packet up once; a batch whose packets all take the
        // same output goes on whole (the common case of a flow).
        let mut routes: Vec<Option<(u32, usize)>> = Vec::with_capacity(len);
        for p in batch.iter() {
            let route = self
                .table
                .lookup(u32::from_be_bytes(p.anno().dst_ip()))
                .and_then(|(gw, port)| usize::try_from(port).ok().filter(|&k| k < n).map(|k| (gw, k)));
            routes.push(route);
        }
        for (p, route) in batch.iter_mut().zip(&routes) {
            if let Some((gw, _)) = route {
                if *gw != 0 {
                    p.anno_mut().set_dst_ip(gw.to_be_bytes());
                }
            }
        }
        let first = routes.first().copied().flatten();
        if let Some((_, port)) = first {
            if routes.iter().all(|r| r.map(|(_, k)| k) == Some(port)) {
                ctx.push(port, batch);
                return;
            }
        }
        let mut outs: Vec<PacketBatch> = (0..n).map(|_| PacketBatch::with_capacity(0)).collect();
        let mut i = 0;
        batch.consume_front(len, |p| {
            match routes[i] {
                Some((_, port)) => outs[port].push(p),
                None => {
                    if self.drops < 5 {
                        eprintln!(
                            "{}: no route for {}",
                            ctx.name(),
                            dotted(u32::from_be_bytes(p.anno().dst_ip()))
                        );
                    }
                    self.drops += 1;
                }
            }
            i += 1;
        });
        for (k, b) in outs.into_iter().enumerate() {
            ctx.push(k, b);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        match (self.dynamic, self.class) {
            (false, _) => &[("table", true, false), ("lookup", true, false), ("drops", true, false)],
            (true, "DirectIPLookup") => &[
                ("table", true, false),
                ("lookup", true, false),
                ("drops", true, false),
                ("add", false, true),
                ("set", false, true),
                ("remove", false, true),
                ("ctrl", false, true),
                ("flush", false, true),
            ],
            (true, _) => &[
                ("table", true, false),
                ("lookup", true, false),
                ("drops", true, false),
                ("add", false, true),
                ("set", false, true),
                ("remove", false, true),
                ("ctrl", false, true),
            ],
        }
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "table" => Some(self.table_text()),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn read_handler_with(&mut self, name: &str, params: &str, _ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        if name != "lookup" {
            return self.read_handler(name).map(Ok);
        }
        Some(match args::ip_address(params) {
            Ok(addr) => Ok(match self.table.lookup(u32::from_be_bytes(addr)) {
                Some((0, port)) => port.to_string(),
                Some((gw, port)) => format!("{port} {}", dotted(gw)),
                None => "-1".to_string(),
            }),
            Err(_) => Err(format!("expected IP address, not '{}'", params.trim())),
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        if !self.dynamic {
            return None;
        }
        let n = ctx.noutputs();
        match name {
            "add" | "set" | "remove" => Some(self.command(name, value, n).map(|_| ())),
            "ctrl" => Some(self.ctrl(value, n)),
            "flush" if self.class == "DirectIPLookup" => {
                for r in self.table.routes() {
                    self.table.remove(&r);
                }
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["DirectIPLookup", "LinearIPLookup", "RadixIPLookup", "StaticIPLookup"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "LinearIPLookup" => Box::new(IPLookup::<LinearTable>::new("LinearIPLookup", true, false)),
        "StaticIPLookup" => Box::new(IPLookup::<LinearTable>::new("StaticIPLookup", false, false)),
        "RadixIPLookup" => Box::new(IPLookup::<RadixTable>::new("RadixIPLookup", true, true)),
        "DirectIPLookup" => Box::new(IPLookup::<DirectTable>::new("DirectIPLookup", true, true)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(text: &str) -> Route {
        parse_route(text, false).unwrap()
    }

    #[test]
    fn routes_parse_in_clicks_forms() {
        assert_eq!(
            route("10.1.2.3/8 7"),
            Route {
                addr: 0x0a00_0000,
                mask: 0xff00_0000,
                gw: 0,
                port: 7
            }
        );
        assert_eq!(route("10/8 - 1").port, 1);
        assert_eq!(route("0/0 18.26.4.1 1").gw, 0x121a_0401);
        assert_eq!(route("18.26.4.24 0").mask, u32::MAX, "a bare address is /32");
        assert_eq!(parse_route("1.0.0.0/8", true).unwrap().port, -1);
        assert!(parse_route("1.0.0.0/8", false).is_err());
        assert!(parse_route("1.0.0.0/8 1 2 3", false).is_err());
        assert!(parse_route("x/8 1", false).is_err());
        assert_eq!(route("1.2.0.0/255.255.0.0 3").to_string(), "1.2.0.0/16\t-\t3");
        assert_eq!(route("1.0.0.0/255.0.255.0 3").to_string(), "1.0.0.0/255.0.255.0\t-\t3");
    }

    #[test]
    fn addressinfo_names_give_address_network_and_broadcast() {
        // Click's AddressInfo-bcast-01, without the AddressInfo element.
        args::clear_addresses();
        args::define_address(
            "foo",
            args::AddressEntry {
                ip: Some(([1, 2, 3, 4], 20)),
                ether: None,
            },
        );
        let mut t = IPLookup::<LinearTable>::new("LinearIPLookup", true, false);
        let mut a = Args::new("foo 0, foo:ipnet 1, foo:bcast 2");
        t.configure(&mut a).unwrap();
        args::clear_addresses();
        assert_eq!(
            t.table_text(),
            "1.2.3.4/32\t-\t0\n1.2.0.0/20\t-\t1\n1.2.15.255/32\t-\t2\n"
        );
    }

    /// A deterministic xorshift generator.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The reference: every route checked, the longest prefix wins.
    fn brute_force(routes: &[Route], addr: u32) -> Option<(u32, i32)> {
        routes
            .iter()
            .filter(|r| r.contains(addr))
            .max_by_key(|r| r.prefix_len())
            .map(|r| (r.gw, r.port))
    }

    /// Random prefixes from a few clusters, so that they nest and collide.
    fn random_route(rng: &mut Rng) -> Route {
        let bases = [0x0a00_0000u32, 0x0a01_0000, 0xc0a8_0100, 0x0800_0000, 0];
        let base = bases[rng.below(bases.len() as u64) as usize];
        let len = rng.below(33) as u32;
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let noise = (rng.next() as u32) & (rng.next() as u32) & 0x00ff_ffff;
        Route {
            addr: (base ^ noise) & mask,
            mask,
            gw: if rng.below(3) == 0 { rng.next() as u32 | 1 } else { 0 },
            port: rng.below(8) as i32,
        }
    }

    fn check_against_reference<T: RouteTable>(seed: u64, steps: usize) {
        let mut rng = Rng(seed);
        let mut table = T::default();
        let mut reference: Vec<Route> = Vec::new();
        for step in 0..steps {
            let r = random_route(&mut rng);
            match rng.below(4) {
                0 | 1 => {
                    let exists = reference.iter().position(|x| x.addr == r.addr && x.mask == r.mask);
                    let replace = rng.below(2) == 0;
                    match (table.add(r, replace), exists) {
                        (Err(old), Some(i)) => {
                            assert!(!replace);
                            assert_eq!(old, reference[i]);
                        }
                        (Ok(Some(old)), Some(i)) => {
                            assert!(replace);
                            assert_eq!(old, reference[i]);
                            reference[i] = r;
                        }
                        (Ok(None), None) => reference.push(r),
                        (got, want) => panic!("step {step}: add {r} gave {got:?}, reference had {want:?}"),
                    }
                }
                2 => {
                    // Remove a route that exists (by prefix only, or
                    // exactly), or one that may not.
                    let target = if !reference.is_empty() && rng.below(3) != 0 {
                        let mut t = reference[rng.below(reference.len() as u64) as usize];
                        if rng.below(2) == 0 {
                            t.port = -1;
                        }
                        t
                    } else {
                        r
                    };
                    let want = reference.iter().position(|x| x.matches(&target));
                    let got = table.remove(&target);
                    assert_eq!(got, want.map(|i| reference.remove(i)), "step {step}: remove {target}");
                }
                _ => {}
            }
            // Addresses inside, at the edges of and beside known prefixes,
            // and anywhere.
            for _ in 0..8 {
                let addr = match (rng.below(3), reference.is_empty()) {
                    (0, false) => {
                        let x = reference[rng.below(reference.len() as u64) as usize];
                        match rng.below(3) {
                            0 => x.addr,
                            1 => x.addr | !x.mask,
                            _ => (x.addr | !x.mask).wrapping_add(1),
                        }
                    }
                    _ => random_route(&mut rng).addr | (rng.next() as u32 & 0xff),
                };
                assert_eq!(
                    table.lookup(addr),
                    brute_force(&reference, addr),
                    "step {step}: lookup {}",
                    dotted(addr)
                );
            }
        }
        let mut listed = table.routes();
        let mut want = reference.clone();
        listed.sort_by_key(|r| (r.addr, r.mask));
        want.sort_by_key(|r| (r.addr, r.mask));
        assert_eq!(listed, want);
    }

    #[test]
    fn linear_table_is_a_longest_prefix_match() {
        for seed in 1..=4 {
            check_against_reference::<LinearTable>(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(seed), 3000);
        }
    }

    #[test]
    fn radix_table_is_a_longest_prefix_match() {
        for seed in 1..=4 {
            check_against_reference::<RadixTable>(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(seed), 3000);
        }
    }

    #[test]
    fn direct_table_is_a_longest_prefix_match() {
        // Fewer steps: a short prefix rewrites millions of entries.
        for seed in 1..=2 {
            check_against_reference::<DirectTable>(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(seed), 400);
        }
    }

    #[test]
    fn ctrl_applies_every_line_or_none() {
        let mut t = IPLookup::<RadixTable>::new("RadixIPLookup", true, true);
        t.configure(&mut Args::new("0/0 3, 10/8 1")).unwrap();
        let before = t.table_text();
        // The third line conflicts with 10/8: the first two are undone.
        let err = t.ctrl("add 1.0.0.0/8 2\nset 0/0 0\nadd 10.0.0.0/8 2\n", 4).unwrap_err();
        assert!(err.contains("conflict with existing route '10.0.0.0/8\t-\t1'"), "{err}");
        assert_eq!(t.table_text(), before);
        t.ctrl("add 1.0.0.0/8 2\n\nremove 10/8\nset 0/0 1.1.1.1 0", 4).unwrap();
        assert_eq!(t.table_text(), "0.0.0.0/0\t1.1.1.1\t0\n1.0.0.0/8\t-\t2\n");
        assert_eq!(t.table.lookup(0x0102_0304), Some((0, 2)));
        assert!(t.ctrl("frobnicate 1/8 1", 4).unwrap_err().contains("bad command"));
        assert!(t
            .command("add", "2.0.0.0/8 9", 4)
            .unwrap_err()
            .contains("does not exist"));
        assert!(t.command("remove", "2.0.0.0/8", 4).unwrap_err().contains("not found"));
        assert!(t.command("add", "2.0.0.0/255.0.255.0 1", 4).is_err(), "not a prefix");
    }

    #[test]
    fn packets_leave_by_their_route_with_the_gateway_annotation() {
        let mut r = crate::build(
            "test",
            "InfiniteSource(LIMIT 4, STOP true) -> SetIPAddress(10.1.2.3) -> rt :: RadixIPLookup(10/8 0, 10.1/16 9.9.9.9 1, 11/8 2);
             rt[0] -> a :: Counter -> Discard;
             rt[1] -> gw :: LinearIPLookup(9.9.9.9/32 0, 0/0 1);
             rt[2] -> Discard;
             gw[0] -> b :: Counter -> Discard;
             gw[1] -> Discard;",
            &[],
        )
        .unwrap();
        r.run(&|| false);
        let read = |e: &str, h: &str| r.read_handler(r.find(e).unwrap(), h).unwrap();
        assert_eq!((read("a", "count"), read("b", "count")), ("0".into(), "4".into()));
        assert!(crate::build("t", "Idle -> rt :: LinearIPLookup(10/8 3); rt[0] -> Idle;", &[]).is_err());
    }

    #[test]
    fn a_mixed_batch_is_split_per_output_in_order() {
        // The queue hands the lookup batches of 4 with both destinations
        // and one without a route.
        let mut r = crate::build(
            "test",
            "q :: Queue(100);
             InfiniteSource(LIMIT 6, BURST 1, STOP false) -> SetIPAddress(10.0.0.1) -> q;
             InfiniteSource(LIMIT 6, BURST 1, STOP false) -> SetIPAddress(11.0.0.1) -> q;
             InfiniteSource(LIMIT 2, BURST 1, STOP false) -> SetIPAddress(12.0.0.1) -> q;
             q -> Unqueue(BURST 4) -> rt :: DirectIPLookup(10/8 0, 11/8 1);
             rt[0] -> a :: Counter -> Discard;
             rt[1] -> b :: Counter -> Discard;
             DriverManager(wait 50ms, stop);",
            &[],
        )
        .unwrap();
        r.run(&|| false);
        let read = |e: &str, h: &str| r.read_handler(r.find(e).unwrap(), h).unwrap();
        assert_eq!((read("a", "count"), read("b", "count")), ("6".into(), "6".into()));
        assert_eq!(read("rt", "drops"), "2");
    }
}
