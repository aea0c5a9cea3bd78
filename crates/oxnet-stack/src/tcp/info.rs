//! TCPInfo (ClickNF §3.1): the per-core state every TCP element of a
//! router shares: the TCB table, the flow table that maps a segment's
//! endpoints to its TCB, the listening sockets, and the settings.
//!
//! Elements reach it with `crate::elements::shared::<TcpInfo>()` when they
//! are configured (one per router), and borrow it once per batch.

use super::isn::Secret;
use super::tcb::{Tcb, TcbSettings, TcbTable, TcpState};
use crate::anno::TcbRef;
use crate::exec::Event;
use crate::wire::{FlowKey, IpAddress, IpEndpoint};
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The stack's TCP settings (every timeout one, so that tests can use
/// seconds where Linux uses hours).
#[derive(Debug, Clone, Copy)]
pub struct TcpSettings {
    pub tcb: TcbSettings,
    /// The MSS we announce (RFC 9293 §3.7.1: the interface MTU minus the
    /// IP and TCP headers; 1460 for Ethernet and IPv4).
    pub mss_v4: u16,
    pub mss_v6: u16,
    /// The window shift we offer (RFC 7323 §2.2); None: no option.
    pub window_scale: Option<u8>,
    /// Offer timestamps (RFC 7323) and SACK (RFC 2018).
    pub timestamps: bool,
    pub sack: bool,
    /// Maximum segment lifetime; TIME-WAIT lasts two (RFC 9293 §3.4.2).
    pub msl_us: u64,
    /// Connections half-open (SYN-RECEIVED) or waiting for accept, per
    /// listener, beyond its backlog: refused, or answered with SYN
    /// cookies (`syn_cookies`) once this many, or the listener's own
    /// backlog if smaller, are half-open.
    pub syn_backlog: usize,
    /// How long an ACK for data may wait for a second segment or data to
    /// ride on (RFC 1122 §4.2.3.2: under 0.5 s; Linux's least is 40 ms);
    /// None: every segment is acknowledged at once.
    pub delayed_ack_us: Option<u64>,
    /// Answer SYNs with SYN cookies once `syn_backlog` connections are
    /// half-open (RFC 4987 §3.6), as Linux does by default.
    pub syn_cookies: bool,
    /// Ask for ECN in our SYNs and accept it in SYNs we answer (RFC
    /// 3168 §6.1.1); off by default.
    pub ecn: bool,
    /// The congestion control new connections start with (NewReno by
    /// default; TCPCubicAck and DCTCPProcessECN also switch the
    /// connections they see).
    pub congestion: super::cc::Algorithm,
    /// Hand the device one large IPv4 segment to cut (TCP segmentation
    /// offload) instead of MSS-sized ones: [`super::offload`].
    pub tso: bool,
    /// Ask the device for the TCP checksum (and over IPv4 the header
    /// checksum) of the data segments TCPSegmentation sends
    /// ([`super::offload`]).
    pub checksum_offload: bool,
}

impl Default for TcpSettings {
    fn default() -> TcpSettings {
        TcpSettings {
            tcb: TcbSettings::default(),
            mss_v4: 1460,
            mss_v6: 1440,
            window_scale: Some(7),
            timestamps: true,
            sack: true,
            msl_us: 30_000_000,
            syn_backlog: 128,
            delayed_ack_us: Some(40_000),
            syn_cookies: true,
            ecn: false,
            congestion: super::cc::Algorithm::NewReno,
            tso: false,
            checksum_offload: false,
        }
    }
}

/// A listening socket.
pub struct Listener {
    /// Established connections beyond this wait no more: new SYNs are
    /// dropped and counted (the peer retransmits).
    pub backlog: usize,
    /// The backlog as `listen` was given it (0 kept): with SYN cookies on,
    /// a SYN finding this many connections half-open (or the stack's
    /// `syn_backlog`, if smaller) gets a cookie, as Linux compares its
    /// SYN queue with the listen backlog (a backlog of 0: every SYN).
    pub listen_backlog: usize,
    /// Connections in SYN-RECEIVED.
    pub half_open: usize,
    /// Established connections not yet accepted.
    pub accept_queue: VecDeque<TcbRef>,
    /// Notified when a connection joins `accept_queue`.
    pub accept_event: Event,
    /// TCP_MAXSEG: the MSS its connections announce and send at most.
    pub user_mss: Option<u16>,
}

/// Counters, readable as handlers of the TCP elements.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TcpCounters {
    /// Segments for no connection and no listener, answered with a RST.
    pub resets_sent: u64,
    /// SYNs refused because the listener's queues were full.
    pub listen_overflows: u64,
    /// Synchronized connections ended by the peer's RST.
    pub resets_received: u64,
    /// Connections established, passively and actively.
    pub passive_opens: u64,
    pub active_opens: u64,
}

/// The per-core TCP state.
#[derive(Default)]
pub struct TcpInfo {
    pub tcbs: TcbTable,
    pub flows: crate::FlowMap<FlowKey, TcbRef>,
    /// Listeners by local endpoint; an unspecified address listens on
    /// every address of its family.
    pub listeners: crate::FlowMap<IpEndpoint, Listener>,
    pub settings: TcpSettings,
    pub secret: Secret,
    pub counters: TcpCounters,
    /// Connections with something to send (data, a FIN, a
    /// retransmission), for TCPOutput; each once (`Tcb::output_queued`).
    pub output: Vec<TcbRef>,
    /// Timer deadlines, for TCPTimers: (when, which connection, which
    /// timer). An entry whose TCB no longer has that deadline is stale
    /// and skipped.
    pub timers: std::collections::BTreeSet<(u64, TcbRef, TimerKind)>,
    /// Ephemeral port search state (RFC 6056 algorithm 3's counter).
    pub next_port: u16,
    /// The router's time as the TCP elements last saw it (socket calls,
    /// which run outside the elements, read it: ISNs, timestamps).
    pub clock_us: u64,
    /// With several graph threads (`oxnet run -j`): which receive queue
    /// this stack's thread owns and how the NIC spreads flows, so that a
    /// connection we open picks a source port whose replies come back to
    /// this core (ClickNF §5.2). None: one thread.
    pub rss: Option<RssPlace>,
    /// Headers for the attached segments that carry given packets'
    /// bytes (`super::payload`), made with the first packet given.
    pub attach: Option<oxnet_driver::AttachPool>,
}

/// Attached segments in flight at once, over every connection of a
/// stack (each a 192-byte header): past it, segments are copied
/// (counted in the connection's `ZeroCopyStats::attach_failures`).
pub const ATTACH_HEADERS: usize = 4096;

/// The NIC's receive-side scaling as the drivers program it (Toeplitz
/// with oxnet's key over the TCP/IPv4 4-tuple, the default redirection
/// table), and the queue of this thread.
#[derive(Debug, Clone, Copy)]
pub struct RssPlace {
    pub key: [u8; 40],
    pub reta: [u8; oxnet_driver::rss::RETA_ENTRIES],
    pub queue: u8,
}

impl RssPlace {
    /// Thread `index` of `count`, with the drivers' defaults.
    pub fn for_thread(index: u16, count: u16) -> RssPlace {
        RssPlace {
            key: oxnet_driver::rss::DEFAULT_KEY,
            reta: oxnet_driver::rss::default_reta(count),
            queue: index as u8,
        }
    }

    /// Whether the replies of `key`'s flow (from the remote end to us)
    /// land on this thread's queue. IPv6 flows are not constrained (the
    /// drivers' software hash covers TCP/IPv4).
    pub fn replies_come_here(&self, key: &FlowKey) -> bool {
        match (key.remote.addr, key.local.addr) {
            (IpAddress::V4(r), IpAddress::V4(l)) => {
                let hash = oxnet_driver::rss::hash_ipv4_tcp(
                    &self.key,
                    r.octets(),
                    l.octets(),
                    key.remote.port,
                    key.local.port,
                );
                oxnet_driver::rss::queue_of(&self.reta, hash) == self.queue
            }
            _ => true,
        }
    }
}

/// The timers TCPTimers runs (ClickNF Figure 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    Retransmit,
    DelayedAck,
    Persist,
    Keepalive,
    TimeWait,
}

impl TcpInfo {
    /// Starts listening on `local` (RFC 9293 §3.10.1, passive OPEN).
    pub fn listen(&mut self, local: IpEndpoint, backlog: usize) -> Result<(), i32> {
        if self.listeners.contains_key(&local) {
            return Err(libc::EADDRINUSE);
        }
        self.listeners.insert(
            local,
            Listener {
                backlog: backlog.max(1),
                listen_backlog: backlog,
                half_open: 0,
                accept_queue: VecDeque::new(),
                accept_event: Event::new(),
                user_mss: None,
            },
        );
        Ok(())
    }

    /// The listener a segment to `local` belongs to: the exact endpoint,
    /// else the wildcard address of its family on that port.
    pub fn listener_for(&self, local: &IpEndpoint) -> Option<IpEndpoint> {
        if self.listeners.contains_key(local) {
            return Some(*local);
        }
        let any = IpEndpoint {
            addr: match local.addr {
                IpAddress::V4(_) => IpAddress::V4(Ipv4Addr::UNSPECIFIED),
                IpAddress::V6(_) => IpAddress::V6(Ipv6Addr::UNSPECIFIED),
            },
            port: local.port,
        };
        self.listeners.contains_key(&any).then_some(any)
    }

    /// Adds a TCB and its flow entry.
    pub fn insert(&mut self, tcb: Tcb) -> TcbRef {
        let key = tcb.key;
        let r = self.tcbs.insert(tcb);
        self.flows.insert(key, r);
        r
    }

    /// The TCB of the flow `key` (our endpoint first).
    pub fn lookup(&self, key: &FlowKey) -> Option<TcbRef> {
        self.flows.get(key).copied()
    }

    /// Deletes a TCB (RFC 9293's "delete the TCB") and its flow entry.
    pub fn delete(&mut self, r: TcbRef) -> Option<Tcb> {
        let tcb = self.tcbs.remove(r)?;
        if self.flows.get(&tcb.key) == Some(&r) {
            self.flows.remove(&tcb.key);
        }
        Some(tcb)
    }

    /// The stack's attach pool ([`TcpInfo::attach`]), made on first use;
    /// None if it cannot be made (then given packets are copied).
    pub fn attach_pool(&mut self) -> Option<oxnet_driver::AttachPool> {
        if self.attach.is_none() {
            self.attach = oxnet_driver::AttachPool::new("tcp attached segments", ATTACH_HEADERS).ok();
        }
        self.attach.clone()
    }

    /// Asks TCPOutput to look at `r` (new data, a FIN, room in the window,
    /// a retransmission).
    pub fn want_output(&mut self, r: TcbRef) {
        if let Some(tcb) = self.tcbs.get_mut(r) {
            if !tcb.output_queued {
                tcb.output_queued = true;
                self.output.push(r);
            }
        }
    }

    /// Arms (or moves) the retransmission timer of `r` to `now + RTO`.
    pub fn arm_rto(&mut self, r: TcbRef, now_us: u64) {
        if let Some(tcb) = self.tcbs.get_mut(r) {
            let at = now_us + tcb.rtt.rto_us();
            tcb.rto_deadline = Some(at);
            // An entry due no later stays: it moves on to `at` then.
            if tcb.rto_queued.is_none_or(|q| q > at) {
                tcb.rto_queued = Some(at);
                self.timers.insert((at, r, TimerKind::Retransmit));
            }
        }
    }

    /// A Retransmit or DelayedAck entry of `r` at `at` has come due: if it
    /// is the connection's live entry and the deadline has moved later
    /// since, the entry moves there (returns true: nothing fires now).
    pub fn timer_due(&mut self, r: TcbRef, kind: TimerKind, at: u64) -> bool {
        let Some(tcb) = self.tcbs.get_mut(r) else { return false };
        let (queued, deadline) = match kind {
            TimerKind::Retransmit => (&mut tcb.rto_queued, tcb.rto_deadline),
            TimerKind::DelayedAck => (&mut tcb.delayed_ack_queued, tcb.delayed_ack_deadline),
            _ => return false,
        };
        if *queued != Some(at) {
            return false;
        }
        *queued = None;
        match deadline {
            Some(d) if d > at => {
                *queued = Some(d);
                self.timers.insert((d, r, kind));
                true
            }
            _ => false,
        }
    }

    /// Arms the delayed-ACK timer of `r` unless it runs.
    pub fn arm_delayed_ack(&mut self, r: TcbRef, now_us: u64, delay_us: u64) {
        if let Some(tcb) = self.tcbs.get_mut(r) {
            if tcb.delayed_ack_deadline.is_none() {
                let at = now_us + delay_us;
                tcb.delayed_ack_deadline = Some(at);
                // As arm_rto: an entry due no later moves on to `at`.
                if tcb.delayed_ack_queued.is_none_or(|q| q > at) {
                    tcb.delayed_ack_queued = Some(at);
                    self.timers.insert((at, r, TimerKind::DelayedAck));
                }
            }
        }
    }

    /// Arms the persist timer of `r` (RFC 9293 §3.8.6.1): the RTO, doubled
    /// for each probe already sent, up to the RTO's maximum.
    pub fn arm_persist(&mut self, r: TcbRef, now_us: u64) {
        let max = self.settings.tcb.rto.max_us;
        if let Some(tcb) = self.tcbs.get_mut(r) {
            let wait = tcb
                .rtt
                .rto_us()
                .saturating_mul(1 << tcb.persist_probes.min(16))
                .min(max);
            let at = now_us + wait;
            tcb.persist_deadline = Some(at);
            self.timers.insert((at, r, TimerKind::Persist));
        }
    }

    /// Arms the keepalive timer of `r` at `at`.
    pub fn arm_keepalive(&mut self, r: TcbRef, at: u64) {
        if let Some(tcb) = self.tcbs.get_mut(r) {
            tcb.keepalive_deadline = Some(at);
            self.timers.insert((at, r, TimerKind::Keepalive));
        }
    }

    /// Starts TIME-WAIT's 2 MSL for `r` (RFC 9293 §3.4.2).
    pub fn arm_time_wait(&mut self, r: TcbRef, now_us: u64) {
        let at = now_us + 2 * self.settings.msl_us;
        if let Some(tcb) = self.tcbs.get_mut(r) {
            tcb.time_wait_deadline = Some(at);
            self.timers.insert((at, r, TimerKind::TimeWait));
        }
    }

    /// The MSS we announce for a connection of `key`'s family.
    pub fn our_mss(&self, key: &FlowKey) -> u16 {
        let mss = if key.local.addr.is_ipv4() {
            self.settings.mss_v4
        } else {
            self.settings.mss_v6
        };
        // TCP_MAXSEG of the connection (set before it connected), else
        // of the listener its SYN came to.
        let user = self
            .flows
            .get(key)
            .and_then(|r| self.tcbs.get(*r))
            .and_then(|t| t.user_mss)
            .or_else(|| {
                let at = self.listener_for(&key.local)?;
                self.listeners.get(&at)?.user_mss
            });
        user.map_or(mss, |u| mss.min(u))
    }

    /// Connections in each state, for the `states` handler.
    pub fn state_counts(&self) -> Vec<(TcpState, usize)> {
        let mut counts: HashMap<TcpState, usize> = HashMap::new();
        for r in self.flows.values() {
            if let Some(t) = self.tcbs.get(*r) {
                *counts.entry(t.state).or_default() += 1;
            }
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by_key(|(s, _)| s.name());
        v
    }
}
