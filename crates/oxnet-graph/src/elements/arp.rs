//! ARP (RFC 826) over Ethernet, after Click's documentation of the
//! classes of the same names (elements/ethernet/arp*.hh in Click).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | ARPResponder(IP/MASK... ETH, ...) | 1/1-2 | agnostic, output 1 push | answers ARP requests for the addresses it knows; other packets to output 1 |
//! | ARPQuerier(IP, ETH, ...) | 2/1-2 | push | puts IP packets (input 0) in Ethernet frames for their next hop, asking for unknown hops with ARP requests (on the last output) and learning from replies (input 1); a table with timeouts and a bounded queue of waiting packets |
//! | ARPPrint(TAG, ...) | 1/1 | agnostic | prints ARP packets as tcpdump does |
//!
//! An ARP packet for IPv4 over Ethernet (RFC 826, "Packet format"), 28
//! bytes after the 14-byte Ethernet header: hardware type (1, Ethernet),
//! protocol type (0x0800), hardware address length (6), protocol address
//! length (4), opcode (1 request, 2 reply), sender hardware and protocol
//! addresses, target hardware and protocol addresses.

use super::ether::{
    ether_text, ip_text, parse_or, prefix_text, timestamp_text, BROADCAST, ETHERTYPE_ARP, ETHERTYPE_IP, ETHER_LEN,
};
use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Length of the ARP packet for IPv4 over Ethernet.
pub const ARP_LEN: usize = 28;
/// ARP hardware type of Ethernet (RFC 826: `ares_hrd$Ethernet`).
const HRD_ETHER: u16 = 1;
/// ARP opcodes (RFC 826 `ares_op$REQUEST`, `ares_op$REPLY`; RFC 903
/// for the reverse ones, RFC 2390 for the inverse ones).
const OP_REQUEST: u16 = 1;
const OP_REPLY: u16 = 2;
const OP_REVREQUEST: u16 = 3;
const OP_REVREPLY: u16 = 4;
const OP_INVREQUEST: u16 = 8;
const OP_INVREPLY: u16 = 9;

/// Field offsets inside the ARP packet.
mod field {
    pub const HRD: usize = 0;
    pub const PRO: usize = 2;
    pub const HLN: usize = 4;
    pub const PLN: usize = 5;
    pub const OP: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn ip4(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

fn eth6(b: &[u8]) -> [u8; 6] {
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// An IPv4-over-Ethernet ARP frame of `op`: Ethernet header (destination
/// `eth_dst`, source `sha`, type ARP) then the ARP packet. The network
/// header is marked on the ARP packet, as Click's `set_ether_header`
/// does, so ARPPrint and the others find it.
fn make_arp(
    ctx: &Ctx<'_>,
    op: u16,
    eth_dst: [u8; 6],
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
) -> Option<Packet> {
    let mut p = ctx.pool().alloc().ok()?;
    p.set_len(ETHER_LEN + ARP_LEN).ok()?;
    p[0..6].copy_from_slice(&eth_dst);
    p[6..12].copy_from_slice(&sha);
    p[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    let a = &mut p[ETHER_LEN..];
    a[field::HRD..field::HRD + 2].copy_from_slice(&HRD_ETHER.to_be_bytes());
    a[field::PRO..field::PRO + 2].copy_from_slice(&ETHERTYPE_IP.to_be_bytes());
    a[field::HLN] = 6;
    a[field::PLN] = 4;
    a[field::OP..field::OP + 2].copy_from_slice(&op.to_be_bytes());
    a[field::SHA..field::SHA + 6].copy_from_slice(&sha);
    a[field::SPA..field::SPA + 4].copy_from_slice(&spa);
    a[field::THA..field::THA + 6].copy_from_slice(&tha);
    a[field::TPA..field::TPA + 4].copy_from_slice(&tpa);
    p.set_network_header(ETHER_LEN, ARP_LEN).ok()?;
    Some(p)
}

/// A frame that is an Ethernet/IPv4 ARP packet of `op`: its ARP part.
fn arp_of(frame: &[u8], op: u16) -> Option<&[u8]> {
    let a = frame.get(ETHER_LEN..ETHER_LEN + ARP_LEN)?;
    (be16(frame, 12) == ETHERTYPE_ARP
        && be16(a, field::HRD) == HRD_ETHER
        && be16(a, field::PRO) == ETHERTYPE_IP
        && be16(a, field::OP) == op)
        .then_some(a)
}

// ---- ARPResponder

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Network address (host bits cleared) and mask.
    dst: u32,
    mask: u32,
    ether: [u8; 6],
}

/// ARPResponder(IP/MASK [IP/MASK...] ETH, IP2/MASK2 ETH2, ...): answers
/// ARP requests (RFC 826, "Packet Reception": a request for a protocol
/// address we answer for gets a reply with the sender and target fields
/// swapped, our hardware address as sender and opcode REPLY, sent to the
/// requester's hardware address). A request whose target address falls
/// in one of the prefixes (the most specific one wins) is answered with
/// its Ethernet address on output 0; any other packet goes to output 1 if
/// connected, else is dropped. Bare addresses are /32; AddressInfo names
/// give their address (or, `NAME:ipnet`, their prefix) and Ethernet
/// address. Handlers: `table` (one `PREFIX ETH` line per entry), `lookup`
/// (read with an IP address: its Ethernet address, empty if none), `add`
/// and `remove` (write `IP/MASK... ETH` / `IP/MASK`), `config`
/// (read/write: a new table from a whole configuration), `drops`.
#[derive(Default)]
pub struct ARPResponder {
    entries: Vec<Entry>,
    config: String,
    drops: u64,
}

impl ARPResponder {
    /// Reads one argument (`IP/MASK... ETH`) into `v`.
    fn add(v: &mut Vec<Entry>, arg: &str) -> Result<(), String> {
        let words = crate::lang::vars::split_words(arg);
        let mut prefixes = Vec::new();
        let mut ether = None;
        for w in &words {
            // A name's address is preferred over its prefix (Click's
            // ARPResponder notes; NAME:ipnet asks for the prefix).
            if let Ok((addr, mask)) = args::ip_address(w)
                .map(|a| (a, [255; 4]))
                .or_else(|_| args::ip_prefix(w))
            {
                let (a, m) = (u32::from_be_bytes(addr), u32::from_be_bytes(mask));
                prefixes.push((a & m, m));
            } else if let Ok(e) = args::ether_address(w) {
                if ether.is_some() {
                    return Err("more than one ETH".into());
                }
                ether = Some(e);
            } else {
                return Err(format!("'{w}': expected IP/MASK ETH"));
            }
        }
        // A name that is both an IP address and an Ethernet address (an
        // AddressInfo name) gives both.
        if ether.is_none() {
            ether = words.iter().find_map(|w| args::ether_address(w).ok());
        }
        if prefixes.is_empty() {
            return Err("missing IP/MASK".into());
        }
        let ether = ether.ok_or("missing ETH")?;
        v.extend(prefixes.into_iter().map(|(dst, mask)| Entry { dst, mask, ether }));
        Ok(())
    }

    /// Sorts the more specific prefixes first and keeps one entry per
    /// prefix (the later one); returns the prefixes given more than once.
    fn normalize(v: &mut Vec<Entry>) -> Vec<Entry> {
        // Longest mask first is a valid "more specific first" order;
        // stable, so equal prefixes keep their order, then the later one
        // of each run is kept.
        let mut indexed: Vec<(usize, Entry)> = v.iter().copied().enumerate().collect();
        indexed.sort_by(|(i, a), (j, b)| b.mask.count_ones().cmp(&a.mask.count_ones()).then(i.cmp(j)));
        let mut out: Vec<Entry> = Vec::with_capacity(v.len());
        let mut duplicates = Vec::new();
        for (_, e) in indexed {
            match out.iter_mut().find(|o| o.dst == e.dst && o.mask == e.mask) {
                Some(o) => {
                    duplicates.push(e);
                    *o = e;
                }
                None => out.push(e),
            }
        }
        *v = out;
        duplicates
    }

    fn lookup(&self, ip: [u8; 4]) -> Option<[u8; 6]> {
        let a = u32::from_be_bytes(ip);
        self.entries.iter().find(|e| a & e.mask == e.dst).map(|e| e.ether)
    }

    fn set_config(&mut self, config: &str, warn: bool) -> Result<(), String> {
        let mut v = Vec::new();
        for (i, arg) in Args::all_raw(config).iter().enumerate() {
            Self::add(&mut v, arg).map_err(|e| format!("argument {i}: {e}"))?;
        }
        for d in Self::normalize(&mut v) {
            if warn {
                eprintln!(
                    "  warning: multiple entries for {}",
                    prefix_text(d.dst.to_be_bytes(), d.mask.to_be_bytes())
                );
            }
        }
        self.entries = v;
        self.config = config.to_string();
        Ok(())
    }

    fn table(&self) -> String {
        self.entries
            .iter()
            .map(|e| {
                format!(
                    "{} {}\n",
                    prefix_text(e.dst.to_be_bytes(), e.mask.to_be_bytes()),
                    ether_text(&e.ether)
                )
            })
            .collect()
    }
}

impl Element for ARPResponder {
    fn class_name(&self) -> &'static str {
        "ARPResponder"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let all: Vec<String> = a.rest_positional();
        self.set_config(&all.join(", "), true)
    }
    fn simple_action(&mut self, mut batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let n = batch.len();
        let mut replies = PacketBatch::with_capacity(n);
        let mut others = PacketBatch::with_capacity(0);
        batch.consume_front(n, |p| {
            let reply = arp_of(&p, OP_REQUEST).and_then(|a| {
                let tpa = ip4(&a[field::TPA..]);
                let mine = self.lookup(tpa)?;
                let (sha, spa) = (eth6(&a[field::SHA..]), ip4(&a[field::SPA..]));
                Some(make_arp(ctx, OP_REPLY, sha, mine, tpa, sha, spa))
            });
            match reply {
                Some(Some(r)) => replies.push(r),
                // An answer we could not build (no buffer): dropped.
                Some(None) => self.drops += 1,
                None => others.push(p),
            }
        });
        if ctx.noutputs() > 1 {
            ctx.push(1, others);
        } else {
            self.drops += others.len() as u64;
        }
        Some(replies)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("table", true, false),
            ("lookup", true, false),
            ("add", false, true),
            ("remove", false, true),
            ("config", true, true),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "table" => self.table(),
            "config" => self.config.clone(),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
    }
    fn read_handler_with(&mut self, name: &str, params: &str, _ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        if name == "lookup" {
            return Some(
                args::ip_address(params)
                    .map(|ip| self.lookup(ip).map(|e| ether_text(&e)).unwrap_or_default())
                    .map_err(|_| "expected IP address".to_string()),
            );
        }
        self.read_handler(name).map(Ok)
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        let value = args::string(value).unwrap_or_else(|_| value.to_string());
        Some(match name {
            "config" => self.set_config(&value, true),
            "add" => {
                let mut v = self.entries.clone();
                Self::add(&mut v, &value).map(|()| {
                    Self::normalize(&mut v);
                    self.entries = v;
                })
            }
            "remove" => match args::ip_address(&value)
                .map(|a| (a, [255; 4]))
                .or_else(|_| args::ip_prefix(&value))
            {
                Ok((addr, mask)) => {
                    let (m, a) = (u32::from_be_bytes(mask), u32::from_be_bytes(addr));
                    match self.entries.iter().position(|e| e.dst == a & m && e.mask == m) {
                        Some(i) => {
                            self.entries.remove(i);
                            Ok(())
                        }
                        None => Err(format!("{} not found", prefix_text((a & m).to_be_bytes(), mask))),
                    }
                }
                Err(_) => Err("expected IP/MASK".into()),
            },
            _ => return None,
        })
    }
}

// ---- ARPQuerier and its table

/// One ARP table entry (Click's ARPTable::ARPEntry).
struct ArpEntry {
    ether: [u8; 6],
    /// A reply was received (else `ether` is the broadcast address).
    known: bool,
    /// Last update, µs; with `seq`, the entry's key in the age order.
    live_at: u64,
    seq: u64,
    polled_at: i64,
    polls_since_reply: u8,
    /// IP packets (with their Ethernet header in front) waiting for the
    /// reply, oldest first.
    waiting: VecDeque<Packet>,
}

impl ArpEntry {
    fn expired(&self, now: u64, timeout: u64) -> bool {
        timeout != 0 && self.live_at + timeout < now
    }

    fn known(&self, now: u64, timeout: u64) -> bool {
        self.known && !self.expired(now, timeout)
    }

    /// Click's rate limit on queries for one address (arpquerier.hh: "at
    /// most 10 queries a second"): 100 ms between polls, 2 s once 10
    /// polls went unanswered.
    fn allow_poll(&self, now: u64) -> bool {
        let gap: i64 = if self.polls_since_reply >= 10 {
            2_000_000
        } else {
            100_000
        };
        now as i64 >= self.polled_at + gap
    }

    fn mark_poll(&mut self, now: u64) {
        self.polled_at = now as i64;
        self.polls_since_reply = self.polls_since_reply.saturating_add(1);
    }
}

/// The ARP table of one ARPQuerier (Click's ARPTable): entries by IP
/// address and in age order (oldest first), packets waiting for
/// resolution, bounded in total (CAPACITY), per entry
/// (ENTRY_PACKET_CAPACITY) and in entries (ENTRY_CAPACITY).
struct ArpTable {
    entries: HashMap<[u8; 4], ArpEntry>,
    age: BTreeMap<(u64, u64), [u8; 4]>,
    next_seq: u64,
    packets: usize,
    capacity: usize,
    entry_capacity: usize,
    entry_packet_capacity: usize,
    slim_factor: usize,
    /// µs; 0: entries never expire.
    timeout: u64,
    drops: u64,
}

/// What [`ArpTable::append`] did with a packet.
enum Appended {
    /// The address is known after all: send the packet.
    Known(Packet),
    /// Waiting; true: a query should go out now.
    Queued(bool),
    /// Dropped (a capacity limit).
    Dropped,
}

impl ArpTable {
    fn new() -> ArpTable {
        ArpTable {
            entries: HashMap::new(),
            age: BTreeMap::new(),
            next_seq: 0,
            packets: 0,
            capacity: 2048,
            entry_capacity: 0,
            entry_packet_capacity: 0,
            slim_factor: 2,
            timeout: 300_000_000,
            drops: 0,
        }
    }

    /// Gives `ip` a new place at the end of the age order, live at `at`.
    fn touch(&mut self, ip: [u8; 4], at: u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(e) = self.entries.get_mut(&ip) {
            self.age.remove(&(e.live_at, e.seq));
            e.live_at = at;
            e.seq = seq;
            self.age.insert((at, seq), ip);
        }
    }

    /// Removes expired entries and, past ENTRY_CAPACITY, the oldest; then,
    /// past CAPACITY, the oldest waiting packets (down to CAPACITY less
    /// 1/CAPACITY_SLIM_FACTOR of it), as Click's ARPTable::slim does.
    fn slim(&mut self, now: u64) {
        self.expire(now);
        while self.entry_capacity != 0 && self.entries.len() > self.entry_capacity {
            self.remove_oldest();
        }
        if self.capacity != 0 && self.packets > self.capacity {
            let keep = (self.capacity - self.capacity / self.slim_factor).max(1);
            let order: Vec<[u8; 4]> = self.age.values().copied().collect();
            for ip in order {
                if self.packets <= keep {
                    break;
                }
                let e = self.entries.get_mut(&ip).expect("in the age order");
                while self.packets > keep && e.waiting.pop_front().is_some() {
                    self.packets -= 1;
                    self.drops += 1;
                }
            }
        }
    }

    /// Removes the oldest entry, its waiting packets counted as drops.
    fn remove_oldest(&mut self) {
        if let Some((_, ip)) = self.age.pop_first() {
            if let Some(e) = self.entries.remove(&ip) {
                self.packets -= e.waiting.len();
                self.drops += e.waiting.len() as u64;
            }
        }
    }

    /// Removes the expired entries at the old end of the age order.
    fn expire(&mut self, now: u64) {
        while let Some(ip) = self.age.values().next() {
            if !self.entries[ip].expired(now, self.timeout) {
                break;
            }
            self.remove_oldest();
        }
    }

    /// The entry for `ip`, made (unknown, live now) if there is none.
    fn ensure(&mut self, ip: [u8; 4], now: u64) {
        if self.entries.contains_key(&ip) {
            return;
        }
        // Expired entries go first (Click's ARPTable drops them from a
        // timer every TIMEOUT; here a new entry does it, so the table
        // never grows by entries that are dead). Then room: the new entry
        // counts against ENTRY_CAPACITY.
        self.expire(now);
        while self.entry_capacity != 0 && !self.entries.is_empty() && self.entries.len() + 1 > self.entry_capacity {
            self.remove_oldest();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(
            ip,
            ArpEntry {
                ether: BROADCAST,
                known: false,
                live_at: now,
                seq,
                polled_at: now as i64 - 1_000_000,
                polls_since_reply: 0,
                waiting: VecDeque::new(),
            },
        );
        self.age.insert((now, seq), ip);
    }

    /// The Ethernet address of `ip` if known; the flag says a renewal
    /// poll is due (POLL_TIMEOUT passed since the last update, and the
    /// rate limit allows one).
    fn lookup(&mut self, ip: [u8; 4], now: u64, poll_timeout: u64) -> Option<([u8; 6], bool)> {
        let timeout = self.timeout;
        let e = self.entries.get_mut(&ip)?;
        if !e.known(now, timeout) {
            return None;
        }
        let poll = poll_timeout != 0 && now >= e.live_at + poll_timeout && e.allow_poll(now);
        if poll {
            e.mark_poll(now);
        }
        Some((e.ether, poll))
    }

    /// Records `ip` at `ether` (a reply, or the `insert` handler; the
    /// broadcast address makes the entry unknown) and returns the packets
    /// that were waiting for it.
    fn insert(&mut self, ip: [u8; 4], ether: [u8; 6], now: u64) -> VecDeque<Packet> {
        self.ensure(ip, now);
        self.touch(ip, now);
        let e = self.entries.get_mut(&ip).expect("just ensured");
        e.ether = ether;
        e.known = ether != BROADCAST;
        e.polls_since_reply = 0;
        e.polled_at = now as i64 - 1_000_000;
        let waiting = std::mem::take(&mut e.waiting);
        self.packets -= waiting.len();
        waiting
    }

    /// Queues `p` for `ip` (Click's ARPTable::append_query).
    fn append(&mut self, ip: [u8; 4], p: Packet, now: u64) -> Appended {
        self.ensure(ip, now);
        let timeout = self.timeout;
        let e = &self.entries[&ip];
        if e.known(now, timeout) {
            return Appended::Known(p);
        }
        // Still trying to reach it: keep the entry just short of expiring,
        // so that the slim below cannot take it (Click's ARPTable notes
        // the bug this avoids).
        if timeout != 0 && now >= timeout && e.live_at < now - timeout {
            self.touch(ip, now - timeout);
        }
        let e = &self.entries[&ip];
        if self.entry_packet_capacity != 0 && e.waiting.len() >= self.entry_packet_capacity {
            self.drops += 1;
            return Appended::Dropped;
        }
        self.packets += 1;
        if self.capacity != 0 && self.packets > self.capacity {
            self.slim(now);
        }
        let e = self.entries.get_mut(&ip).expect("kept by the touch above");
        e.waiting.push_back(p);
        let poll = e.allow_poll(now);
        if poll {
            e.mark_poll(now);
        }
        Appended::Queued(poll)
    }

    fn clear(&mut self) {
        for e in self.entries.values() {
            self.drops += e.waiting.len() as u64;
        }
        self.entries.clear();
        self.age.clear();
        self.packets = 0;
    }

    /// Click's ARPTable `table` handler: per entry, oldest first, `IP OK
    /// ETH AGE` (OK 1 when the address is known and fresh; AGE the time
    /// since the last update).
    fn text(&self, now: u64) -> String {
        let mut out = String::new();
        for ip in self.age.values() {
            let e = &self.entries[ip];
            out += &format!(
                "{} {} {} {}\n",
                ip_text(ip),
                u8::from(e.known(now, self.timeout)),
                ether_text(&e.ether),
                timestamp_text(now.saturating_sub(e.live_at) as i64 * 1000)
            );
        }
        out
    }
}

/// ARPQuerier(IP, ETH, keywords) or ARPQuerier(NAME, keywords): resolves
/// next hops with ARP (RFC 826) and puts IP packets in Ethernet frames.
/// IP packets arrive on input 0 with their destination IP annotation set
/// (the next hop); if its Ethernet address is known, the packet leaves on
/// output 0 with an Ethernet header (type 0x0800, source ETH). Else the
/// packet waits in the table and an ARP request (broadcast, "who has the
/// annotation's address, tell IP") goes out of the last output (output 1
/// if there are two). ARP replies arrive on input 1 (with their Ethernet
/// header): the sender's address is recorded and the packets waiting for
/// it leave, in order. Special destinations, as Click's: 0.0.0.0 is
/// dropped; 255.255.255.255 and the BROADCAST address go to
/// FF-FF-FF-FF-FF-FF; multicast 224/4 to 01-00-5E and the address's low
/// 23 bits (RFC 1112 §6.4).
///
/// Queries for one address are limited to 10 a second (after 10
/// unanswered, one every 2 s). Once POLL_TIMEOUT passed since a known
/// entry's last update, the next packet for it also sends a renewal query
/// (unicast to the known address; broadcast with BROADCAST_POLL true).
///
/// Keywords: CAPACITY (packets waiting in all, default 2048, 0 no limit),
/// ENTRY_CAPACITY (entries, default 0: no limit), ENTRY_PACKET_CAPACITY
/// (packets waiting per entry, default 0: no limit), CAPACITY_SLIM_FACTOR
/// (default 2: past CAPACITY, the oldest waiting packets are dropped down
/// to CAPACITY less CAPACITY/2), TIMEOUT (entry lifetime, default 5 min,
/// 0 forever), POLL_TIMEOUT (default 1 min, 0 never), BROADCAST (default
/// IP's prefix's broadcast address, if IP was given with a prefix),
/// BROADCAST_POLL (default false). Click's TABLE (a shared ARPTable) is
/// not supported.
///
/// Handlers: `table`, `stats`, `count` (entries), `length` (packets
/// waiting), `queries`, `responses`, `drops` (read); `ipaddr`,
/// `broadcast` (read/write); `insert` (`IP ETH`), `delete` (`IP`),
/// `clear` (write).
pub struct ARPQuerier {
    ip: [u8; 4],
    ether: [u8; 6],
    bcast: [u8; 4],
    poll_timeout: u64,
    broadcast_poll: bool,
    table: ArpTable,
    /// With `-j`: the table the ARPQuerier of this name shares with its
    /// copies on the other graph threads (a reply arrives on one queue,
    /// so one thread learns for all). Swapped into `table` while in use.
    shared: Option<std::sync::Arc<std::sync::Mutex<ArpTable>>>,
    queries: u64,
    responses: u64,
    drops: u64,
    zero_warned: bool,
}

impl Default for ARPQuerier {
    fn default() -> ARPQuerier {
        ARPQuerier {
            ip: [0; 4],
            ether: [0; 6],
            bcast: [255; 4],
            poll_timeout: 60_000_000,
            broadcast_poll: false,
            table: ArpTable::new(),
            shared: None,
            queries: 0,
            responses: 0,
            drops: 0,
            zero_warned: false,
        }
    }
}

fn micros(text: &str) -> Result<u64, String> {
    args::seconds(text).map(|s| (s * 1e6).round() as u64)
}

/// Where a packet goes when ARPQuerier is done with it.
type Out = Vec<(usize, Packet)>;

/// ARP tables shared by the copies of one ARPQuerier on the graph threads
/// of `-j`, by element name.
static SHARED_TABLES: std::sync::Mutex<Option<HashMap<String, std::sync::Arc<std::sync::Mutex<ArpTable>>>>> =
    std::sync::Mutex::new(None);

/// Forgets the shared tables (a new configuration is built).
pub fn reset_shared_tables() {
    *SHARED_TABLES.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

impl ARPQuerier {
    /// Runs `f` with the table in `self.table`: the shared one (locked
    /// for the call) with `-j`, else the element's own.
    fn with_table<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let Some(shared) = self.shared.clone() else {
            return f(self);
        };
        let mut guard = shared.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut self.table, &mut guard);
        let r = f(self);
        std::mem::swap(&mut self.table, &mut guard);
        r
    }

    /// Reads the table (the shared one, locked, with `-j`).
    fn view<R>(&self, f: impl FnOnce(&ArpTable) -> R) -> R {
        match &self.shared {
            Some(shared) => f(&shared.lock().unwrap_or_else(|e| e.into_inner())),
            None => f(&self.table),
        }
    }

    /// An ARP request for `ip` (RFC 826: target hardware address zero),
    /// to `to` (broadcast, or the known address for a unicast renewal
    /// poll).
    fn query(&mut self, ip: [u8; 4], stamp: i64, to: [u8; 6], ctx: &Ctx<'_>, out: &mut Out) {
        let Some(mut q) = make_arp(ctx, OP_REQUEST, to, self.ether, self.ip, [0; 6], ip) else {
            return;
        };
        // The query carries the timestamp of the packet that caused it.
        q.anno_mut().timestamp_ns = stamp;
        self.queries += 1;
        out.push((ctx.noutputs().max(1) - 1, q));
    }

    /// Handles one IP packet; `framed`: it already has its Ethernet header
    /// (a packet that was waiting).
    fn handle_ip(&mut self, mut p: Packet, framed: bool, ctx: &Ctx<'_>, out: &mut Out) {
        if self.ip == [0; 4] {
            self.drops += 1;
            return;
        }
        if !framed {
            match p.prepend(ETHER_LEN) {
                Ok(h) => h[12..14].copy_from_slice(&ETHERTYPE_IP.to_be_bytes()),
                Err(_) => {
                    self.drops += 1;
                    return;
                }
            }
        }
        let now = ctx.now_us();
        let dst = p.anno().dst_ip();
        loop {
            let mac = if let Some((mac, poll)) = self.table.lookup(dst, now, self.poll_timeout) {
                p[0..6].copy_from_slice(&mac);
                if poll {
                    let to = if self.broadcast_poll { BROADCAST } else { mac };
                    self.query(dst, p.anno().timestamp_ns, to, ctx, out);
                }
                mac
            } else if dst == [255; 4] || dst == self.bcast {
                BROADCAST
            } else if dst[0] & 0xf0 == 0xe0 {
                // RFC 1112 §6.4: 01-00-5E-00-00-00 plus the low 23 bits.
                [0x01, 0x00, 0x5e, dst[1] & 0x7f, dst[2], dst[3]]
            } else if dst == [0; 4] {
                if !self.zero_warned {
                    eprintln!(
                        "{}: would query for 0.0.0.0; missing dest IP addr annotation?",
                        ctx.name()
                    );
                    self.zero_warned = true;
                }
                self.drops += 1;
                return;
            } else {
                let stamp = p.anno().timestamp_ns;
                match self.table.append(dst, p, now) {
                    Appended::Known(back) => {
                        // Became known meanwhile: look it up again.
                        p = back;
                        continue;
                    }
                    Appended::Queued(true) => self.query(dst, stamp, BROADCAST, ctx, out),
                    Appended::Queued(false) | Appended::Dropped => {}
                }
                return;
            };
            p[0..6].copy_from_slice(&mac);
            // Our source address is written as the packet leaves, so a
            // change of ETH reaches packets that were waiting.
            p[6..12].copy_from_slice(&self.ether);
            out.push((0, p));
            return;
        }
    }

    /// An ARP packet on input 1: a reply from a unicast sender updates the
    /// table and releases the packets waiting for it, in arrival order.
    fn handle_response(&mut self, p: &Packet, ctx: &Ctx<'_>, out: &mut Out) {
        if p.len() < ETHER_LEN + ARP_LEN {
            return;
        }
        self.responses += 1;
        let Some(a) = arp_of(p, OP_REPLY) else {
            return;
        };
        let (sha, spa) = (eth6(&a[field::SHA..]), ip4(&a[field::SPA..]));
        if sha[0] & 1 != 0 {
            return;
        }
        let waiting = self.table.insert(spa, sha, ctx.now_us());
        for w in waiting {
            self.handle_ip(w, true, ctx, out);
        }
    }

    fn send(out: Out, ctx: &mut Ctx<'_>) {
        let mut batch = PacketBatch::with_capacity(0);
        let mut port = 0;
        for (k, p) in out {
            if k != port && !batch.is_empty() {
                ctx.push(port, std::mem::replace(&mut batch, PacketBatch::with_capacity(0)));
            }
            port = k;
            batch.push(p);
        }
        ctx.push(port, batch);
    }

    fn parse_insert(value: &str) -> Result<([u8; 4], [u8; 6]), String> {
        let words = crate::lang::vars::split_words(value);
        match words.as_slice() {
            [ip, eth] => Ok((args::ip_address(ip)?, args::ether_address(eth)?)),
            _ => Err("expected IP ETH".into()),
        }
    }
}

impl Element for ARPQuerier {
    fn class_name(&self) -> &'static str {
        "ARPQuerier"
    }
    fn port_count(&self) -> &'static str {
        "2/1-2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let t = &mut self.table;
        if let Some(v) = parse_or(a.keyword("CAPACITY"), "CAPACITY", args::unsigned)? {
            t.capacity = v as usize;
        }
        if let Some(v) = parse_or(a.keyword("ENTRY_CAPACITY"), "ENTRY_CAPACITY", args::unsigned)? {
            t.entry_capacity = v as usize;
        }
        if let Some(v) = parse_or(
            a.keyword("ENTRY_PACKET_CAPACITY"),
            "ENTRY_PACKET_CAPACITY",
            args::unsigned,
        )? {
            t.entry_packet_capacity = v as usize;
        }
        if let Some(v) = parse_or(
            a.keyword("CAPACITY_SLIM_FACTOR"),
            "CAPACITY_SLIM_FACTOR",
            args::unsigned,
        )? {
            if v == 0 {
                return Err("CAPACITY_SLIM_FACTOR cannot be zero".into());
            }
            t.slim_factor = v as usize;
        }
        if let Some(v) = parse_or(a.keyword("TIMEOUT"), "TIMEOUT", micros)? {
            t.timeout = v;
        }
        if let Some(v) = parse_or(a.keyword("POLL_TIMEOUT"), "POLL_TIMEOUT", micros)? {
            self.poll_timeout = v;
        }
        let bcast = parse_or(a.keyword("BROADCAST"), "BROADCAST", args::ip_address)?;
        if let Some(v) = parse_or(a.keyword("BROADCAST_POLL"), "BROADCAST_POLL", args::boolean)? {
            self.broadcast_poll = v;
        }
        if a.keyword("TABLE").is_some() {
            return Err("TABLE (a shared ARPTable) is not supported".into());
        }
        let ip = a.required("IP")?;
        // One argument: a name for both the address and the Ethernet
        // address (Click's ARPQuerier(NAME)).
        let eth = a.positional_or("ETH").unwrap_or_else(|| ip.clone());
        // An address, or an address with its prefix (the prefix gives the
        // default BROADCAST); a name's address is preferred, as Click's
        // IPPrefixArg(true) does.
        let (addr, mask) = args::ip_address(&ip)
            .map(|a| (a, [255; 4]))
            .or_else(|_| args::ip_prefix(&ip))
            .map_err(|e| format!("IP: {e}"))?;
        self.ip = addr;
        self.ether = args::ether_address(&eth).map_err(|e| format!("ETH: {e}"))?;
        self.bcast = match bcast {
            Some(b) => b,
            None => {
                let b = (u32::from_be_bytes(addr) | !u32::from_be_bytes(mask)).to_be_bytes();
                if b == addr {
                    [255; 4]
                } else {
                    b
                }
            }
        };
        // With -j, every graph thread's copy of this element uses one
        // table: ARP replies arrive on one receive queue (RSS does not hash
        // ARP), and what one thread learns the others need.
        if super::device::thread_place().count > 1 {
            let mut tables = SHARED_TABLES.lock().unwrap_or_else(|e| e.into_inner());
            let table = tables
                .get_or_insert_with(HashMap::new)
                .entry(args::current_element())
                .or_insert_with(|| {
                    std::sync::Arc::new(std::sync::Mutex::new(std::mem::replace(
                        &mut self.table,
                        ArpTable::new(),
                    )))
                })
                .clone();
            self.shared = Some(table);
        }
        Ok(())
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let mut out = Out::with_capacity(batch.len());
        let n = batch.len();
        self.with_table(|me| {
            batch.consume_front(n, |p| {
                if port == 0 {
                    me.handle_ip(p, false, ctx, &mut out);
                } else {
                    me.handle_response(&p, ctx, &mut out);
                }
            })
        });
        Self::send(out, ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("table", true, false),
            ("stats", true, false),
            ("count", true, false),
            ("length", true, false),
            ("queries", true, false),
            ("responses", true, false),
            ("drops", true, false),
            ("ipaddr", true, true),
            ("broadcast", true, true),
            ("insert", false, true),
            ("delete", false, true),
            ("clear", false, true),
        ]
    }
    fn read_handler_with(&mut self, name: &str, _params: &str, ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        let now = ctx.now_us();
        Some(Ok(match name {
            "table" => self.view(|t| t.text(now)),
            _ => return self.read_handler(name).map(Ok),
        }))
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "stats" => format!(
                "{} packets killed\n{} ARP queries sent\n",
                self.drops + self.view(|t| t.drops),
                self.queries
            ),
            "count" => self.view(|t| t.entries.len()).to_string(),
            "length" => self.view(|t| t.packets).to_string(),
            "queries" => self.queries.to_string(),
            "responses" => self.responses.to_string(),
            "drops" => self.drops.to_string(),
            "ipaddr" => ip_text(&self.ip),
            "broadcast" => ip_text(&self.bcast),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        self.with_table(|me| me.write_table_handler(name, value, ctx))
    }
}

impl ARPQuerier {
    fn write_table_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        let now = ctx.now_us();
        Some(match name {
            "ipaddr" => args::ip_address(value).map(|ip| self.ip = ip),
            "broadcast" => args::ip_address(value).map(|ip| self.bcast = ip),
            "insert" => Self::parse_insert(value).map(|(ip, eth)| {
                // Packets waiting for it leave now (Click keeps them until
                // the next reply; sending them is what an insert means).
                let waiting = self.table.insert(ip, eth, now);
                let mut out = Out::new();
                for w in waiting {
                    self.handle_ip(w, true, ctx, &mut out);
                }
                Self::send(out, ctx);
            }),
            "delete" => args::ip_address(value.trim()).map(|ip| {
                // As Click: the entry becomes unknown (broadcast address).
                let waiting = self.table.insert(ip, BROADCAST, now);
                self.table.drops += waiting.len() as u64;
            }),
            "clear" => {
                self.queries = 0;
                self.drops = 0;
                self.responses = 0;
                self.table.clear();
                Ok(())
            }
            _ => return None,
        })
    }
}

// ---- ARPPrint

/// ARPPrint([TAG], TIMESTAMP, ETHER, OUTFILE, ACTIVE): prints each ARP
/// packet as tcpdump does (`TAG: TIME: arp who-has B tell A`, `arp reply
/// A is-at ETH`, rarp and inverse ARP too) on standard error, or written
/// to OUTFILE. TIMESTAMP (default true) prints the packet's timestamp;
/// ETHER (default false) its Ethernet addresses (`SRC > DST: `). The ARP
/// packet starts at the network header mark; an unmarked packet is read
/// as an Ethernet frame (Click prints nothing for those). Handler:
/// `active` (read/write).
pub struct ARPPrint {
    label: String,
    timestamp: bool,
    ether: bool,
    active: bool,
    outfile: Option<std::fs::File>,
}

impl Default for ARPPrint {
    fn default() -> ARPPrint {
        ARPPrint {
            label: String::new(),
            timestamp: true,
            ether: false,
            active: true,
            outfile: None,
        }
    }
}

impl ARPPrint {
    fn line(&self, p: &Packet) -> String {
        let mut s = String::new();
        if !self.label.is_empty() {
            s += &self.label;
            s += ": ";
        }
        if self.timestamp {
            s += &timestamp_text(p.anno().timestamp_ns);
            s += ": ";
        }
        let nh = match p.network_offset() {
            Some(o) if o >= 0 => o as usize,
            Some(_) => 0,
            None => ETHER_LEN.min(p.len()),
        };
        if self.ether && nh >= ETHER_LEN && p.len() >= ETHER_LEN {
            s += &format!("{} > {}: ", ether_text(&p[6..12]), ether_text(&p[0..6]));
        }
        let a = &p[nh.min(p.len())..];
        if a.len() < 8 {
            s += &format!("truncated-arp ({})", a.len());
            return s;
        }
        let (hrd, pro, hln, pln, op) = (be16(a, 0), be16(a, 2), a[4], a[5], be16(a, 6));
        // Trailer encapsulation (RFC 893) protocol types, as tcpdump.
        let trailer = pro == 0x1000;
        if (pro != ETHERTYPE_IP && !trailer) || pln != 4 || hln == 0 {
            s += &format!("arp-#{op} for proto #{pro} ({pln}) hardware #{hrd} ({hln})");
            return s;
        }
        let hl = usize::from(hln);
        if a.len() < 8 + 2 * hl + 8 {
            s += &format!("truncated-arp ({})", a.len());
            return s;
        }
        let sha = &a[8..8 + hl];
        let spa = &a[8 + hl..12 + hl];
        let tha = &a[12 + hl..12 + 2 * hl];
        let tpa = &a[12 + 2 * hl..16 + 2 * hl];
        if trailer {
            s += "trailer-";
        }
        s += &match op {
            OP_REQUEST => {
                let mut t = format!("arp who-has {}", ip_text(tpa));
                if tha.iter().any(|&b| b != 0) {
                    t += &format!(" ({})", ether_text(tha));
                }
                t + &format!(" tell {}", ip_text(spa))
            }
            OP_REPLY => format!("arp reply {} is-at {}", ip_text(spa), ether_text(sha)),
            OP_REVREQUEST => format!("rarp who-is {} tell {}", ether_text(tha), ether_text(sha)),
            OP_REVREPLY => format!("rarp reply {} at {}", ether_text(tha), ip_text(tpa)),
            OP_INVREQUEST => format!("invarp who-is {} tell {}", ether_text(tha), ether_text(sha)),
            OP_INVREPLY => format!("invarp reply {} at {}", ether_text(tha), ip_text(tpa)),
            other => format!("arp-#{other}"),
        };
        if hrd != HRD_ETHER {
            s += &format!("hardware #{hrd}");
        }
        s
    }
}

impl Element for ARPPrint {
    fn class_name(&self) -> &'static str {
        "ARPPrint"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(l) = a.positional_or("TAG") {
            self.label = args::string(&l)?;
        }
        if let Some(v) = parse_or(a.keyword("TIMESTAMP"), "TIMESTAMP", args::boolean)? {
            self.timestamp = v;
        }
        if let Some(v) = parse_or(a.keyword("ETHER"), "ETHER", args::boolean)? {
            self.ether = v;
        }
        if let Some(v) = parse_or(a.keyword("ACTIVE"), "ACTIVE", args::boolean)? {
            self.active = v;
        }
        if let Some(f) = a.keyword("OUTFILE") {
            let path = args::string(&f)?;
            let file = std::fs::File::create(&path).map_err(|e| format!("OUTFILE {path}: {e}"))?;
            self.outfile = Some(file);
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if self.active {
            use std::io::Write;
            let mut text = String::new();
            for p in batch.iter() {
                text += &self.line(p);
                text.push('\n');
            }
            let _ = match &mut self.outfile {
                Some(f) => f.write_all(text.as_bytes()),
                None => std::io::stderr().lock().write_all(text.as_bytes()),
            };
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("active", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "active").then(|| self.active.to_string())
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "active").then(|| args::boolean(value).map(|v| self.active = v))
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["ARPPrint", "ARPQuerier", "ARPResponder"],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "ARPResponder" => Box::<ARPResponder>::default(),
        "ARPQuerier" => Box::<ARPQuerier>::default(),
        "ARPPrint" => Box::<ARPPrint>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::ether::testkit::{hex, of, read, run};
    use super::*;

    const ME: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];

    /// An Ethernet/ARP frame as RFC 826 lays it out, padded to Ethernet's
    /// 60-byte minimum as Linux sends requests.
    fn arp(eth_dst: [u8; 6], op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4], pad: bool) -> Vec<u8> {
        let mut f = eth_dst.to_vec();
        f.extend(sha);
        f.extend([0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4]);
        f.extend(op.to_be_bytes());
        f.extend(sha);
        f.extend(spa);
        f.extend(tha);
        f.extend(tpa);
        if pad {
            f.resize(60, 0);
        }
        f
    }

    /// An IPv4 header (no checksum: ARPQuerier does not look) and 4 bytes.
    fn ip_packet(dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 24, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1];
        p.extend(dst);
        p.extend([1, 2, 3, 4]);
        p
    }

    #[test]
    fn responder_answers_as_rfc_826_says_and_passes_the_rest_on() {
        let request = arp(BROADCAST, OP_REQUEST, PEER, [10, 0, 0, 10], [0; 6], [10, 0, 0, 1], true);
        let other = arp(
            BROADCAST,
            OP_REQUEST,
            PEER,
            [10, 0, 0, 10],
            [0; 6],
            [10, 0, 0, 99],
            true,
        );
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1) -> a :: ARPResponder(10.0.0.1 2:0:0:0:0:1, 10.0.1.0/24 2:0:0:0:0:2) -> Capture(reply);
             InfiniteSource({}, LIMIT 1, STOP true) -> a;
             a[1] -> Capture(other)",
            hex(&request),
            hex(&other)
        ));
        // Swapped sender and target, our address as sender, REPLY, sent to
        // the requester's hardware address; 42 bytes.
        let reply = arp(PEER, OP_REPLY, ME, [10, 0, 0, 1], PEER, [10, 0, 0, 10], false);
        let mut expected = reply.clone();
        expected[6..12].copy_from_slice(&ME);
        assert_eq!(of(&seen, "reply"), vec![expected]);
        assert_eq!(of(&seen, "other"), vec![other]);
        assert_eq!(
            read(&r, "a", "table"),
            "10.0.0.1/32 02-00-00-00-00-01\n10.0.1.0/24 02-00-00-00-00-02\n"
        );
    }

    #[test]
    fn responder_table_is_most_specific_first_and_keeps_the_later_duplicate() {
        let mut v = Vec::new();
        ARPResponder::add(&mut v, "0/0 1:1:1:1:1:1").unwrap();
        ARPResponder::add(&mut v, "10.0.0.0/8 10.1.2.3 2:2:2:2:2:2").unwrap();
        ARPResponder::add(&mut v, "10.1.2.3/32 3:3:3:3:3:3").unwrap();
        let dups = ARPResponder::normalize(&mut v);
        assert_eq!(dups.len(), 1);
        let r = ARPResponder {
            entries: v,
            ..ARPResponder::default()
        };
        assert_eq!(
            r.table(),
            "10.1.2.3/32 03-03-03-03-03-03\n10.0.0.0/8 02-02-02-02-02-02\n0.0.0.0/0 01-01-01-01-01-01\n"
        );
        assert_eq!(r.lookup([10, 1, 2, 3]), Some([3; 6]));
        assert_eq!(r.lookup([10, 9, 9, 9]), Some([2; 6]));
        assert_eq!(r.lookup([11, 0, 0, 0]), Some([1; 6]));
        assert!(ARPResponder::add(&mut Vec::new(), "10.0.0.1")
            .unwrap_err()
            .contains("ETH"));
        assert!(ARPResponder::add(&mut Vec::new(), "1:1:1:1:1:1")
            .unwrap_err()
            .contains("IP/MASK"));
        assert!(ARPResponder::add(&mut Vec::new(), "10.0.0.1 1:1:1:1:1:1 2:2:2:2:2:2").is_err());
    }

    #[test]
    fn querier_queries_holds_then_sends_on_the_reply() {
        let reply = arp(ME, OP_REPLY, PEER, [10, 0, 0, 2], ME, [10, 0, 0, 1], true);
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 2, BURST 2) -> MarkIP(0) -> q :: ARPQuerier(10.0.0.1, 2:0:0:0:0:1) -> Capture(ip);
             InfiniteSource({}, LIMIT 1, STOP true) -> [1]q;
             q[1] -> Capture(arp)",
            hex(&ip_packet([10, 0, 0, 2])),
            hex(&reply)
        ));
        // One query (RFC 826: target hardware address zero), broadcast.
        let query = arp(BROADCAST, OP_REQUEST, ME, [10, 0, 0, 1], [0; 6], [10, 0, 0, 2], false);
        assert_eq!(of(&seen, "arp"), vec![query]);
        // Both packets left after the reply, in order, framed for PEER.
        let mut frame = PEER.to_vec();
        frame.extend(ME);
        frame.extend([0x08, 0x00]);
        frame.extend(ip_packet([10, 0, 0, 2]));
        assert_eq!(of(&seen, "ip"), vec![frame.clone(), frame]);
        assert_eq!(read(&r, "q", "queries"), "1");
        assert_eq!(read(&r, "q", "responses"), "1");
        assert_eq!(read(&r, "q", "count"), "1");
        assert_eq!(read(&r, "q", "length"), "0");
        assert_eq!(read(&r, "q", "table"), "10.0.0.2 1 02-00-00-00-00-0A 0.000000\n");
        assert_eq!(read(&r, "q", "stats"), "0 packets killed\n1 ARP queries sent\n");
    }

    #[test]
    fn querier_special_destinations_need_no_query() {
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1) -> MarkIP(0) -> q :: ARPQuerier(10.0.0.1/24, 2:0:0:0:0:1) -> Capture(ip);
             InfiniteSource({}, LIMIT 1) -> MarkIP(0) -> q;
             InfiniteSource({}, LIMIT 1) -> MarkIP(0) -> q;
             InfiniteSource({}, LIMIT 1, STOP true) -> MarkIP(0) -> q;
             q[1] -> Capture(arp)",
            hex(&ip_packet([255, 255, 255, 255])),
            hex(&ip_packet([10, 0, 0, 255])),
            hex(&ip_packet([239, 129, 2, 3])),
            hex(&ip_packet([0, 0, 0, 0])),
        ));
        let dsts: Vec<Vec<u8>> = of(&seen, "ip").iter().map(|f| f[..6].to_vec()).collect();
        assert_eq!(
            dsts,
            [
                BROADCAST.to_vec(),
                BROADCAST.to_vec(),
                // RFC 1112 §6.4: the low 23 bits of 239.129.2.3.
                vec![0x01, 0x00, 0x5e, 0x01, 0x02, 0x03],
            ]
        );
        assert!(of(&seen, "arp").is_empty());
        assert_eq!(read(&r, "q", "broadcast"), "10.0.0.255");
        assert_eq!(read(&r, "q", "drops"), "1", "0.0.0.0 is dropped");
    }

    #[test]
    fn querier_bounds_waiting_packets_and_limits_queries() {
        // 5 packets at once for one address: one query (10 a second at
        // most), 2 kept (ENTRY_PACKET_CAPACITY), 3 dropped.
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 5, BURST 5, STOP true) -> MarkIP(0)
               -> q :: ARPQuerier(10.0.0.1, 2:0:0:0:0:1, ENTRY_PACKET_CAPACITY 2) -> Capture(ip);
             q[1] -> Capture(arp)",
            hex(&ip_packet([10, 0, 0, 7]))
        ));
        assert_eq!(of(&seen, "arp").len(), 1);
        assert!(of(&seen, "ip").is_empty());
        assert_eq!(read(&r, "q", "length"), "2");
        assert_eq!(read(&r, "q", "stats"), "3 packets killed\n1 ARP queries sent\n");
        // CAPACITY 4 over 6 addresses: past 4 the oldest go, down to 2.
        let mut sources =
            String::from("q :: ARPQuerier(10.0.0.1, 2:0:0:0:0:1, CAPACITY 4) -> Discard; q[1] -> Discard;\n");
        for i in 0..6u8 {
            sources += &format!(
                "InfiniteSource({}, LIMIT 1{}) -> MarkIP(0) -> q;\n",
                hex(&ip_packet([10, 0, 0, 10 + i])),
                if i == 5 { ", STOP true" } else { "" }
            );
        }
        let (r, _) = run(&sources);
        // The 5th packet makes 5 > 4: the count is slimmed to 4 - 4/2 = 2,
        // the 5th included (3 of the 4 waiting dropped, as Click's
        // ARPTable counts); the 6th makes 3.
        assert_eq!(read(&r, "q", "length"), "3");
        assert_eq!(read(&r, "q", "stats"), "3 packets killed\n6 ARP queries sent\n");
        assert_eq!(read(&r, "q", "count"), "6");
        assert_eq!(read(&r, "q", "queries"), "6");
    }

    #[test]
    fn querier_table_expires_and_renews() {
        let mut t = ArpTable::new();
        t.timeout = 1_000_000;
        assert!(t.insert([10, 0, 0, 2], PEER, 0).is_empty());
        assert_eq!(t.lookup([10, 0, 0, 2], 500_000, 0), Some((PEER, false)));
        // POLL_TIMEOUT 0.4 s passed: a renewal poll is due, once per 100 ms.
        assert_eq!(t.lookup([10, 0, 0, 2], 500_000, 400_000), Some((PEER, true)));
        assert_eq!(t.lookup([10, 0, 0, 2], 550_000, 400_000), Some((PEER, false)));
        assert_eq!(t.lookup([10, 0, 0, 2], 600_000, 400_000), Some((PEER, true)));
        // Past TIMEOUT the entry is unknown again.
        assert_eq!(t.lookup([10, 0, 0, 2], 1_000_001, 0), None);
        assert_eq!(t.text(1_000_001), "10.0.0.2 0 02-00-00-00-00-0A 1.000001\n");
        // A new entry clears the expired ones out.
        t.ensure([10, 0, 0, 4], 1_000_001);
        assert_eq!(t.entries.len(), 1);
        assert!(t.entries.contains_key(&[10, 0, 0, 4]));
        // ENTRY_CAPACITY: a new entry pushes the oldest out.
        t.entry_capacity = 1;
        t.ensure([10, 0, 0, 3], 1_000_002);
        assert_eq!(t.entries.len(), 1);
        assert!(t.entries.contains_key(&[10, 0, 0, 3]));
    }

    #[test]
    fn querier_handlers_insert_delete_clear() {
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1, STOP true) -> MarkIP(0) -> q :: ARPQuerier(10.0.0.1, 2:0:0:0:0:1) -> Capture(ip);
             q[1] -> Capture(arp)",
            hex(&ip_packet([10, 0, 0, 2]))
        ));
        assert_eq!(of(&seen, "arp").len(), 1);
        let mut r = r;
        let q = r.find("q").unwrap();
        r.write_handler(q, "insert", "10.0.0.2 2:0:0:0:0:a").unwrap();
        // The waiting packet left on the insert.
        assert_eq!(super::super::ether::testkit::take().len(), 1);
        assert!(read(&r, "q", "table").starts_with("10.0.0.2 1 02-00-00-00-00-0A"));
        r.write_handler(q, "delete", "10.0.0.2").unwrap();
        assert!(read(&r, "q", "table").starts_with("10.0.0.2 0 FF-FF-FF-FF-FF-FF"));
        r.write_handler(q, "clear", "").unwrap();
        assert_eq!(read(&r, "q", "table"), "");
        assert_eq!(read(&r, "q", "queries"), "0");
        assert!(r.write_handler(q, "insert", "10.0.0.2").is_err());
    }

    #[test]
    fn arpprint_prints_as_tcpdump() {
        let print = ARPPrint {
            label: "x".into(),
            ether: true,
            ..ARPPrint::default()
        };
        let pool = oxnet_driver::Mempool::new("arpprint", 4, oxnet_driver::MemoryKind::Plain).unwrap();
        let frame = |bytes: &[u8]| {
            let mut p = pool.alloc().unwrap();
            p.set_len(bytes.len()).unwrap();
            p.copy_from_slice(bytes);
            p
        };
        let req = frame(&arp(
            BROADCAST,
            OP_REQUEST,
            PEER,
            [10, 0, 0, 10],
            [0; 6],
            [10, 0, 0, 1],
            false,
        ));
        assert_eq!(
            print.line(&req),
            "x: 0.000000: 02-00-00-00-00-0A > FF-FF-FF-FF-FF-FF: arp who-has 10.0.0.1 tell 10.0.0.10"
        );
        let rep = frame(&arp(PEER, OP_REPLY, ME, [10, 0, 0, 1], PEER, [10, 0, 0, 10], false));
        let quiet = ARPPrint {
            timestamp: false,
            ..ARPPrint::default()
        };
        assert_eq!(quiet.line(&rep), "arp reply 10.0.0.1 is-at 02-00-00-00-00-01");
        assert_eq!(quiet.line(&frame(&[0; 20])), "truncated-arp (6)");
    }
}
