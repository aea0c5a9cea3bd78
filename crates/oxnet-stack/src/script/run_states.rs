//! The TCP states a script's connections went through, as the runner
//! sees them: after every step of the router (a segment processed, a
//! timer, a system call) it compares each connection's state with the
//! one it saw last, so every state a connection rests in between two
//! steps is recorded, entered and left. A state passed through within
//! one step is not seen: a FIN that also acknowledges ours takes
//! FIN-WAIT-1 straight to TIME-WAIT here (RFC 9293 §3.10.7.4 passes
//! through FIN-WAIT-2 on the way).
//!
//! Where the stack keeps no TCB, RFC 9293's state diagram (§3.3.2,
//! Figure 5) still names a state, and the log follows the diagram:
//! - a listener (no TCB in oxnet) is LISTEN from `listen` to its close;
//! - a connection a listener made (its TCB names the listener) comes from
//!   LISTEN, where the diagram's listening TCB forks it;
//! - one that ends in SYN-RECEIVED while its listener still listens
//!   (a RST, a SYN, RFC 9293 §3.10.7.4) goes back to LISTEN;
//! - any other connection comes from CLOSED and, deleted, goes to CLOSED
//!   (also a TCB kept CLOSED for its socket).

use crate::anno::TcbRef;
use crate::tcp::info::TcpInfo;
use crate::tcp::tcb::TcpState;
use crate::wire::{FlowKey, IpEndpoint};
use std::collections::{BTreeSet, HashMap};
use std::fmt;

/// Every state of RFC 9293 §3.3.2, in the diagram's order.
pub const ALL_STATES: [TcpState; 11] = [
    TcpState::Closed,
    TcpState::Listen,
    TcpState::SynSent,
    TcpState::SynReceived,
    TcpState::Established,
    TcpState::FinWait1,
    TcpState::FinWait2,
    TcpState::CloseWait,
    TcpState::Closing,
    TcpState::LastAck,
    TcpState::TimeWait,
];

/// One change of state a connection (or a listener) made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// When the runner saw it, microseconds of simulated time.
    pub time_us: u64,
    /// The connection's remote port (the listener's own port for a
    /// listener), to tell connections apart.
    pub port: u16,
    /// The state it left.
    pub from: TcpState,
    /// The state it entered.
    pub to: TcpState,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.from.name(), self.to.name())
    }
}

/// What the runner saw last of each connection and listener, and every
/// transition so far.
#[derive(Default)]
pub(super) struct StateLog {
    /// Connections by TCB, with their state and endpoints when last seen.
    seen: HashMap<TcbRef, (TcpState, FlowKey, Option<IpEndpoint>)>,
    listeners: BTreeSet<(bool, [u8; 16], u16)>,
    pub(super) transitions: Vec<Transition>,
}

/// A listener's endpoint as an ordered key.
fn endpoint_key(e: &IpEndpoint) -> (bool, [u8; 16], u16) {
    let mut bytes = [0; 16];
    match e.addr {
        crate::wire::IpAddress::V4(a) => bytes[..4].copy_from_slice(&a.octets()),
        crate::wire::IpAddress::V6(a) => bytes = a.octets(),
    }
    (e.addr.is_ipv4(), bytes, e.port)
}

impl StateLog {
    fn push(&mut self, time_us: u64, port: u16, from: TcpState, to: TcpState) {
        self.transitions.push(Transition {
            time_us,
            port,
            from,
            to,
        });
    }

    /// Compares what `info` holds now with what was seen last.
    pub(super) fn observe(&mut self, info: &TcpInfo, now: u64) {
        // Listeners: LISTEN from listen() to their close.
        let listening: BTreeSet<_> = info.listeners.keys().map(endpoint_key).collect();
        let opened: Vec<u16> = listening.difference(&self.listeners).map(|l| l.2).collect();
        let closed: Vec<u16> = self.listeners.difference(&listening).map(|l| l.2).collect();
        for port in opened {
            self.push(now, port, TcpState::Closed, TcpState::Listen);
        }
        for port in closed {
            self.push(now, port, TcpState::Listen, TcpState::Closed);
        }
        self.listeners = listening;
        // Connections seen before: still there (perhaps in another
        // state), or gone.
        let mut gone = Vec::new();
        for (r, (state, key, listener)) in &self.seen {
            match info.tcbs.get(*r) {
                Some(tcb) if tcb.state != *state => gone.push((*r, *state, Some(tcb.state), *key, *listener)),
                Some(_) => {}
                None => gone.push((*r, *state, None, *key, *listener)),
            }
        }
        // In a fixed order, so that the log does not depend on the map's.
        gone.sort_by_key(|g| (g.0.id, g.0.generation));
        for (r, from, now_state, key, listener) in gone {
            let to = match now_state {
                Some(s) => s,
                // RFC 9293 §3.10.7.4: a passive open's SYN-RECEIVED "returns
                // to LISTEN" when reset.
                None if from == TcpState::SynReceived && listener.is_some_and(|l| info.listeners.contains_key(&l)) => {
                    TcpState::Listen
                }
                None => TcpState::Closed,
            };
            if to != from {
                self.push(now, key.remote.port, from, to);
            }
            match now_state {
                Some(s) => {
                    self.seen.insert(r, (s, key, listener));
                }
                None => {
                    self.seen.remove(&r);
                }
            }
        }
        // New connections (every TCB is in the flow table when made).
        let mut new: Vec<TcbRef> = info
            .flows
            .values()
            .filter(|r| !self.seen.contains_key(r))
            .copied()
            .collect();
        new.sort_by_key(|r| (r.id, r.generation));
        for r in new {
            let Some(tcb) = info.tcbs.get(r) else { continue };
            let from = if tcb.listener.is_some() {
                TcpState::Listen
            } else {
                TcpState::Closed
            };
            self.push(now, tcb.key.remote.port, from, tcb.state);
            self.seen.insert(r, (tcb.state, tcb.key, tcb.listener));
        }
    }
}
