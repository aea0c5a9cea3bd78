//! The neighbour cache of RFC 4861 §7.3.2, for IPv6 (Neighbor Discovery)
//! and, by our choice, for IPv4 (ARP) too.
//!
//! RFC 826 has no states: an entry is there or not. Using RFC 4861's
//! reachability states for ARP is what Linux does (one `neighbour` table
//! code for both families): an entry goes stale after ReachableTime and
//! is checked with unicast probes (RFC 1122 §2.3.2.1 asks for a way to
//! revalidate ARP entries and names unicast polls as one), instead of an
//! ARP table with a fixed timeout.
//!
//! Time is passed in as microseconds (the router's clock); nothing here
//! reads a clock. The cache says what to send ([`Solicit`]) and hands
//! back packets to send; it never sends anything itself.
//!
//! Bounds, whatever arrives: at most [`Settings::max_entries`] entries
//! (full: the least recently updated STALE entry is evicted, else the
//! new entry is refused and counted), and at most
//! [`Settings::queue_len`] packets waiting per entry (full: the oldest is
//! dropped and counted; RFC 1122 §2.3.2.2 asks to keep at least the
//! latest). Linux bounds its queue by bytes (`unres_qlen_bytes`); ours
//! counts packets, as its older `unres_qlen` did: a packet is one buffer
//! of the pool whatever its length, so packets are what a queue holds.

use crate::wire::EthernetAddress;
use oxnet_driver::Packet;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// MAX_MULTICAST_SOLICIT (RFC 4861 §10): solicitations sent while
/// resolving before giving up.
pub const MAX_MULTICAST_SOLICIT: u32 = 3;
/// MAX_UNICAST_SOLICIT (RFC 4861 §10): probes of a PROBE entry.
pub const MAX_UNICAST_SOLICIT: u32 = 3;
/// REACHABLE_TIME (RFC 4861 §10): BaseReachableTime, 30 s.
pub const REACHABLE_TIME_US: u64 = 30_000_000;
/// RETRANS_TIMER (RFC 4861 §10): 1 s between solicitations.
pub const RETRANS_TIMER_US: u64 = 1_000_000;
/// DELAY_FIRST_PROBE_TIME (RFC 4861 §10): 5 s in DELAY before probing.
pub const DELAY_FIRST_PROBE_TIME_US: u64 = 5_000_000;
/// How often ReachableTime is drawn again: RFC 4861 §6.3.4 asks for a
/// new random value "at least every few hours"; two hours.
pub const REACHABLE_TIME_REDRAW_US: u64 = 2 * 3600 * 1_000_000;
/// Entries at most, by default (Linux's `gc_thresh3` is 1024 too).
pub const DEFAULT_MAX_ENTRIES: usize = 1024;
/// Packets waiting per entry, by default (Linux's `unres_qlen` was 3).
pub const DEFAULT_QUEUE_LEN: usize = 3;

/// An entry's reachability state (RFC 4861 §7.3.2), and PERMANENT for
/// entries written by hand (Linux's NUD_PERMANENT: no timer, never
/// evicted, not changed by what arrives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Resolution in progress: solicitations sent, no address yet.
    Incomplete,
    /// Confirmed reachable within ReachableTime.
    Reachable,
    /// Not known to be reachable; nothing is done until a packet is sent.
    Stale,
    /// A packet was sent to a STALE entry: waiting DELAY_FIRST_PROBE_TIME
    /// for a confirmation before probing.
    Delay,
    /// Unicast solicitations sent every RetransTimer.
    Probe,
    /// Written by hand.
    Permanent,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Incomplete => "INCOMPLETE",
            State::Reachable => "REACHABLE",
            State::Stale => "STALE",
            State::Delay => "DELAY",
            State::Probe => "PROBE",
            State::Permanent => "PERMANENT",
        })
    }
}

/// The cache's settings; the defaults are RFC 4861 §10's constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Entries at most (at least 1).
    pub max_entries: usize,
    /// Packets waiting per INCOMPLETE entry (0: none wait; each is dropped).
    pub queue_len: usize,
    /// MAX_MULTICAST_SOLICIT (at least 1).
    pub max_multicast_solicit: u32,
    /// MAX_UNICAST_SOLICIT (at least 1).
    pub max_unicast_solicit: u32,
    /// BaseReachableTime, microseconds (above 0).
    pub base_reachable_time_us: u64,
    /// RetransTimer, microseconds (above 0).
    pub retrans_timer_us: u64,
    /// DELAY_FIRST_PROBE_TIME, microseconds.
    pub delay_first_probe_time_us: u64,
    /// Seed of the generator that draws ReachableTime.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_entries: DEFAULT_MAX_ENTRIES,
            queue_len: DEFAULT_QUEUE_LEN,
            max_multicast_solicit: MAX_MULTICAST_SOLICIT,
            max_unicast_solicit: MAX_UNICAST_SOLICIT,
            base_reachable_time_us: REACHABLE_TIME_US,
            retrans_timer_us: RETRANS_TIMER_US,
            delay_first_probe_time_us: DELAY_FIRST_PROBE_TIME_US,
            seed: 0,
        }
    }
}

impl Settings {
    /// Checks the lower bounds of the fields.
    pub fn check(&self) -> Result<(), String> {
        if self.max_entries == 0 {
            return Err("ENTRIES must be at least 1".into());
        }
        if self.max_multicast_solicit == 0 || self.max_unicast_solicit == 0 {
            return Err("MCAST_SOLICIT and UCAST_SOLICIT must be at least 1".into());
        }
        if self.base_reachable_time_us == 0 || self.retrans_timer_us == 0 {
            return Err("REACHABLE_TIME and RETRANS_TIMER must be above 0".into());
        }
        Ok(())
    }
}

/// What the cache counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Waiting packets dropped because their entry's queue was full (the
    /// oldest goes).
    pub queue_drops: u64,
    /// Waiting packets dropped when resolution failed or their entry was
    /// deleted.
    pub unresolved_drops: u64,
    /// Entries whose resolution failed (MAX_MULTICAST_SOLICIT unanswered).
    pub resolution_failures: u64,
    /// Entries deleted after MAX_UNICAST_SOLICIT unanswered probes.
    pub probe_failures: u64,
    /// STALE entries evicted to make room.
    pub evictions: u64,
    /// Packets dropped because the cache was full of entries in use.
    pub full_drops: u64,
    /// Entries a received message would have made, refused (cache full).
    pub full_ignored: u64,
}

/// A solicitation the caller sends now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solicit<A> {
    /// The address asked about.
    pub addr: A,
    /// None: multicast (address resolution, an ARP broadcast or an NS to
    /// the solicited-node address); Some: a unicast probe to the cached
    /// link-layer address (PROBE, RFC 4861 §7.3.3).
    pub unicast: Option<EthernetAddress>,
}

/// Packets that waited for an address now resolved: send them, in order,
/// to `lladdr`.
#[derive(Debug)]
pub struct Released<P> {
    pub lladdr: EthernetAddress,
    pub packets: VecDeque<P>,
}

/// What became of a packet handed to [`NeighborCache::send`].
#[derive(Debug)]
pub enum Outcome<P> {
    /// The neighbour's link-layer address is known: send it there now.
    Send(EthernetAddress, P),
    /// The packet waits for resolution. `solicit`: a new entry was made,
    /// and the caller sends its first multicast solicitation now.
    Queued { solicit: bool },
    /// The cache is full of entries in use: the packet is given back to be
    /// dropped (counted in [`Stats::full_drops`]).
    Refused(P),
}

/// The cache is full of entries in use (none STALE to evict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheFull;

impl fmt::Display for CacheFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the neighbour cache is full of entries in use")
    }
}

struct Entry<P> {
    state: State,
    /// None only while INCOMPLETE.
    lladdr: Option<EthernetAddress>,
    queue: VecDeque<P>,
    /// Solicitations sent in this INCOMPLETE or PROBE state.
    solicits: u32,
    /// When the state's timer expires (INCOMPLETE, REACHABLE, DELAY, PROBE).
    deadline: u64,
    /// Last change of state or address (eviction takes the oldest STALE).
    updated: u64,
}

/// The neighbour cache: protocol address `A` (Ipv4Addr or Ipv6Addr) to
/// Ethernet address, with RFC 4861's states, and the packets `P` waiting.
pub struct NeighborCache<A, P = Packet> {
    settings: Settings,
    entries: BTreeMap<A, Entry<P>>,
    /// ReachableTime (RFC 4861 §6.3.2): BaseReachableTime times a random
    /// factor between MIN_RANDOM_FACTOR (0.5) and MAX_RANDOM_FACTOR (1.5).
    reachable_time_us: u64,
    /// When ReachableTime was drawn.
    drawn_at: u64,
    rng: u64,
    /// No entry's timer expires before this (it may be earlier than the
    /// first real deadline: [`NeighborCache::poll`] then does nothing).
    earliest: Option<u64>,
    stats: Stats,
}

impl<A: Ord + Copy, P> NeighborCache<A, P> {
    /// An empty cache (the settings are assumed checked).
    pub fn new(settings: Settings) -> Self {
        let mut cache = NeighborCache {
            settings,
            entries: BTreeMap::new(),
            reachable_time_us: settings.base_reachable_time_us,
            drawn_at: 0,
            rng: settings.seed,
            earliest: None,
            stats: Stats::default(),
        };
        cache.draw_reachable_time(0);
        cache
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Entries in the cache.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Packets waiting for resolution, in all entries.
    pub fn waiting(&self) -> usize {
        self.entries.values().map(|e| e.queue.len()).sum()
    }

    /// The current ReachableTime, microseconds.
    pub fn reachable_time_us(&self) -> u64 {
        self.reachable_time_us
    }

    /// An entry's state.
    pub fn state(&self, addr: &A) -> Option<State> {
        self.entries.get(addr).map(|e| e.state)
    }

    /// An entry's link-layer address (None while INCOMPLETE).
    pub fn lladdr(&self, addr: &A) -> Option<EthernetAddress> {
        self.entries.get(addr).and_then(|e| e.lladdr)
    }

    /// Every entry, by address: address, state, link-layer address.
    pub fn iter(&self) -> impl Iterator<Item = (&A, State, Option<EthernetAddress>)> {
        self.entries.iter().map(|(a, e)| (a, e.state, e.lladdr))
    }

    /// When [`NeighborCache::poll`] must run next (None: no timer runs).
    pub fn next_deadline(&self) -> Option<u64> {
        self.earliest
    }

    /// A packet to `addr` (RFC 4861 §7.2.2, §7.3.3): sent if the address
    /// is known (a STALE entry goes to DELAY), else queued; a new entry is
    /// INCOMPLETE and its first solicitation is the caller's to send.
    pub fn send(&mut self, addr: A, packet: P, now: u64) -> Outcome<P> {
        if let Some(e) = self.entries.get_mut(&addr) {
            Self::expire_reachable(e, now);
            return match e.state {
                State::Incomplete => {
                    Self::enqueue(e, packet, self.settings.queue_len, &mut self.stats);
                    Outcome::Queued { solicit: false }
                }
                State::Stale => {
                    // §7.3.3: "The first time a node sends a packet to a
                    // neighbor whose entry is STALE, the sender changes the
                    // state to DELAY and sets a timer to expire in
                    // DELAY_FIRST_PROBE_TIME seconds."
                    let mac = e.lladdr.unwrap_or_default();
                    Self::enter_delay(e, now, self.settings.delay_first_probe_time_us, &mut self.earliest);
                    Outcome::Send(mac, packet)
                }
                // §7.3.3: DELAY and PROBE go on sending to the cached address.
                State::Reachable | State::Delay | State::Probe | State::Permanent => {
                    Outcome::Send(e.lladdr.unwrap_or_default(), packet)
                }
            };
        }
        if !self.make_room() {
            self.stats.full_drops += 1;
            return Outcome::Refused(packet);
        }
        // §7.2.2: create an INCOMPLETE entry, queue the packet, send the
        // first multicast solicitation and start the retransmit timer.
        let deadline = now.saturating_add(self.settings.retrans_timer_us);
        let mut e = Entry {
            state: State::Incomplete,
            lladdr: None,
            queue: VecDeque::new(),
            solicits: 1,
            deadline,
            updated: now,
        };
        Self::enqueue(&mut e, packet, self.settings.queue_len, &mut self.stats);
        self.entries.insert(addr, e);
        Self::note(&mut self.earliest, deadline);
        Outcome::Queued { solicit: true }
    }

    /// A Neighbor Advertisement for `addr` (RFC 4861 §7.2.5), with its
    /// Target Link-Layer Address option if it had one and its Solicited
    /// and Override flags (an ARP reply to us counts as solicited, with
    /// override). An advertisement makes no entry (§7.2.5: "silently
    /// discarded" when there is none). Returns the packets released when
    /// an INCOMPLETE entry is resolved.
    pub fn advertised(
        &mut self,
        addr: A,
        lladdr: Option<EthernetAddress>,
        solicited: bool,
        override_cache: bool,
        now: u64,
    ) -> Option<Released<P>> {
        let reachable_us = self.reachable_time(now);
        let settings = self.settings;
        let e = self.entries.get_mut(&addr)?;
        Self::expire_reachable(e, now);
        match e.state {
            State::Permanent => None,
            State::Incomplete => {
                // §7.2.5: without a Target Link-Layer Address option the
                // advertisement is discarded (the link has addresses).
                let mac = lladdr?;
                e.lladdr = Some(mac);
                e.updated = now;
                if solicited {
                    Self::enter_reachable(e, now, reachable_us, &mut self.earliest);
                } else {
                    e.state = State::Stale;
                }
                Self::release(e, now, settings.delay_first_probe_time_us, &mut self.earliest)
            }
            State::Reachable | State::Stale | State::Delay | State::Probe => {
                let differs = lladdr.is_some_and(|m| Some(m) != e.lladdr);
                if !override_cache && differs {
                    // §7.2.5 (a): REACHABLE becomes STALE, nothing else
                    // changes; (b) otherwise the advertisement is ignored.
                    if e.state == State::Reachable {
                        e.state = State::Stale;
                        e.updated = now;
                    }
                    return None;
                }
                if differs {
                    e.lladdr = lladdr;
                    e.updated = now;
                }
                if solicited {
                    Self::enter_reachable(e, now, reachable_us, &mut self.earliest);
                } else if differs {
                    e.state = State::Stale;
                }
                None
            }
        }
    }

    /// A link-layer address heard from `addr` in a solicitation (RFC 4861
    /// §7.2.3: an NS with a Source Link-Layer Address option) or an ARP
    /// packet (RFC 826, "Packet Reception": the merge, and `create` when
    /// we are the target). A new entry is STALE; a known one is updated
    /// and set STALE if the address differs (§7.3.3), left alone if not.
    /// Returns the packets released when an INCOMPLETE entry is resolved.
    pub fn learned(&mut self, addr: A, lladdr: EthernetAddress, create: bool, now: u64) -> Option<Released<P>> {
        let settings = self.settings;
        if let Some(e) = self.entries.get_mut(&addr) {
            Self::expire_reachable(e, now);
            return match e.state {
                State::Permanent => None,
                State::Incomplete => {
                    e.lladdr = Some(lladdr);
                    e.state = State::Stale;
                    e.updated = now;
                    Self::release(e, now, settings.delay_first_probe_time_us, &mut self.earliest)
                }
                _ => {
                    if e.lladdr != Some(lladdr) {
                        e.lladdr = Some(lladdr);
                        e.state = State::Stale;
                        e.updated = now;
                    }
                    None
                }
            };
        }
        if !create {
            return None;
        }
        if !self.make_room() {
            self.stats.full_ignored += 1;
            return None;
        }
        self.entries.insert(
            addr,
            Entry {
                state: State::Stale,
                lladdr: Some(lladdr),
                queue: VecDeque::new(),
                solicits: 0,
                deadline: 0,
                updated: now,
            },
        );
        None
    }

    /// A confirmation from an upper layer that `addr` is reachable (RFC
    /// 4861 §7.3.1, forward progress; Appendix C): any entry but
    /// INCOMPLETE and PERMANENT becomes REACHABLE.
    pub fn confirm(&mut self, addr: A, now: u64) {
        let reachable_us = self.reachable_time(now);
        if let Some(e) = self.entries.get_mut(&addr) {
            if !matches!(e.state, State::Incomplete | State::Permanent) {
                Self::enter_reachable(e, now, reachable_us, &mut self.earliest);
            }
        }
    }

    /// Writes a PERMANENT entry (replacing any other); packets waiting for
    /// it are released. Err if the cache is full of entries in use.
    pub fn insert_permanent(
        &mut self,
        addr: A,
        lladdr: EthernetAddress,
        now: u64,
    ) -> Result<Option<Released<P>>, CacheFull> {
        if !self.entries.contains_key(&addr) && !self.make_room() {
            return Err(CacheFull);
        }
        let e = self.entries.entry(addr).or_insert_with(|| Entry {
            state: State::Permanent,
            lladdr: None,
            queue: VecDeque::new(),
            solicits: 0,
            deadline: 0,
            updated: now,
        });
        e.state = State::Permanent;
        e.lladdr = Some(lladdr);
        e.updated = now;
        let packets = std::mem::take(&mut e.queue);
        Ok((!packets.is_empty()).then_some(Released { lladdr, packets }))
    }

    /// Deletes an entry; packets waiting in it are dropped and counted.
    /// Returns whether there was one.
    pub fn remove(&mut self, addr: &A) -> bool {
        match self.entries.remove(addr) {
            Some(e) => {
                self.stats.unresolved_drops += e.queue.len() as u64;
                true
            }
            None => false,
        }
    }

    /// Runs the timers that expired by `now` (RFC 4861 §7.3.3, §7.2.2) and
    /// adds to `out` the solicitations to send now:
    /// * INCOMPLETE: another multicast solicitation every RetransTimer; after
    ///   MAX_MULTICAST_SOLICIT of them, one more RetransTimer and the
    ///   entry is deleted, its packets dropped.
    /// * REACHABLE: ReachableTime after the last confirmation, STALE.
    /// * DELAY: after DELAY_FIRST_PROBE_TIME, PROBE and a unicast probe.
    /// * PROBE: another probe every RetransTimer; after MAX_UNICAST_SOLICIT
    ///   of them, one more RetransTimer and the entry is deleted.
    pub fn poll(&mut self, now: u64, out: &mut Vec<Solicit<A>>) {
        let s = self.settings;
        let retrans = now.saturating_add(s.retrans_timer_us);
        let mut earliest = None;
        let mut gone = Vec::new();
        for (addr, e) in self.entries.iter_mut() {
            let due = now >= e.deadline;
            match e.state {
                State::Incomplete if due => {
                    if e.solicits >= s.max_multicast_solicit {
                        self.stats.resolution_failures += 1;
                        self.stats.unresolved_drops += e.queue.len() as u64;
                        gone.push(*addr);
                        continue;
                    }
                    e.solicits += 1;
                    e.deadline = retrans;
                    out.push(Solicit {
                        addr: *addr,
                        unicast: None,
                    });
                }
                State::Reachable if due => {
                    e.state = State::Stale;
                    e.updated = now;
                }
                State::Delay if due => {
                    e.state = State::Probe;
                    e.updated = now;
                    e.solicits = 1;
                    e.deadline = retrans;
                    out.push(Solicit {
                        addr: *addr,
                        unicast: e.lladdr,
                    });
                }
                State::Probe if due => {
                    if e.solicits >= s.max_unicast_solicit {
                        self.stats.probe_failures += 1;
                        gone.push(*addr);
                        continue;
                    }
                    e.solicits += 1;
                    e.deadline = retrans;
                    out.push(Solicit {
                        addr: *addr,
                        unicast: e.lladdr,
                    });
                }
                _ => {}
            }
            if matches!(
                e.state,
                State::Incomplete | State::Reachable | State::Delay | State::Probe
            ) {
                Self::note(&mut earliest, e.deadline);
            }
        }
        for addr in gone {
            self.entries.remove(&addr);
        }
        self.earliest = earliest;
    }

    /// Makes room for one more entry: true if there is room, after
    /// evicting the least recently updated STALE entry if the cache was
    /// full (STALE entries hold no packets).
    fn make_room(&mut self) -> bool {
        if self.entries.len() < self.settings.max_entries {
            return true;
        }
        let oldest = self
            .entries
            .iter()
            .filter(|(_, e)| e.state == State::Stale)
            .min_by_key(|(_, e)| e.updated)
            .map(|(a, _)| *a);
        match oldest {
            Some(addr) => {
                self.entries.remove(&addr);
                self.stats.evictions += 1;
                true
            }
            None => false,
        }
    }

    fn enqueue(e: &mut Entry<P>, packet: P, limit: usize, stats: &mut Stats) {
        e.queue.push_back(packet);
        while e.queue.len() > limit {
            e.queue.pop_front();
            stats.queue_drops += 1;
        }
    }

    /// The waiting packets of an entry just resolved. They are sent now,
    /// so a STALE entry goes to DELAY (§7.3.3, as for any packet sent to a
    /// STALE entry).
    fn release(e: &mut Entry<P>, now: u64, delay_us: u64, earliest: &mut Option<u64>) -> Option<Released<P>> {
        let lladdr = e.lladdr?;
        if e.queue.is_empty() {
            return None;
        }
        if e.state == State::Stale {
            Self::enter_delay(e, now, delay_us, earliest);
        }
        Some(Released {
            lladdr,
            packets: std::mem::take(&mut e.queue),
        })
    }

    fn enter_delay(e: &mut Entry<P>, now: u64, delay_us: u64, earliest: &mut Option<u64>) {
        e.state = State::Delay;
        e.updated = now;
        e.deadline = now.saturating_add(delay_us);
        Self::note(earliest, e.deadline);
    }

    fn enter_reachable(e: &mut Entry<P>, now: u64, reachable_us: u64, earliest: &mut Option<u64>) {
        e.state = State::Reachable;
        e.updated = now;
        e.deadline = now.saturating_add(reachable_us);
        Self::note(earliest, e.deadline);
    }

    /// A REACHABLE entry past its ReachableTime is STALE, even if the
    /// timer has not run yet (a packet sent then moves it to DELAY).
    fn expire_reachable(e: &mut Entry<P>, now: u64) {
        if e.state == State::Reachable && now >= e.deadline {
            e.state = State::Stale;
            e.updated = e.deadline;
        }
    }

    fn note(earliest: &mut Option<u64>, at: u64) {
        *earliest = Some(earliest.map_or(at, |t| t.min(at)));
    }

    /// ReachableTime, drawn again if it is older than
    /// [`REACHABLE_TIME_REDRAW_US`] (RFC 4861 §6.3.4).
    fn reachable_time(&mut self, now: u64) -> u64 {
        if now.saturating_sub(self.drawn_at) >= REACHABLE_TIME_REDRAW_US {
            self.draw_reachable_time(now);
        }
        self.reachable_time_us
    }

    /// RFC 4861 §6.3.2: "a uniformly distributed random value between
    /// MIN_RANDOM_FACTOR and MAX_RANDOM_FACTOR times BaseReachableTime",
    /// 0.5 and 1.5, so that neighbours do not probe in step.
    fn draw_reachable_time(&mut self, now: u64) {
        let base = self.settings.base_reachable_time_us;
        self.reachable_time_us = base / 2 + next_random(&mut self.rng) % (base + 1);
        self.drawn_at = now;
    }
}

/// SplitMix64: a small generator for timer jitter (nothing secret).
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
