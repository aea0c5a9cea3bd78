//! The Transmission Control Block (RFC 9293 §3.3.1) and the per-core
//! table that holds them.
//!
//! A TCB is reached from a packet through its [`TcbRef`] annotation: a
//! slot index plus one and the slot's generation, so that a packet that
//! outlives its connection (held in a queue while the connection closed
//! and the slot was reused) finds "no TCB" instead of someone else's.

use super::cc::CongestionControl;
use super::ecn::Ecn;
use super::rtt::{RtoBounds, RttEstimator};
use crate::anno::TcbRef;
use crate::exec::Event;
use crate::wire::{FlowKey, IpEndpoint, TcpSeqNumber};
use oxnet_driver::Packet;
use std::collections::VecDeque;

/// RFC 9293 §3.3.2's states (CLOSED is the absence of a TCB, but a TCB
/// is kept CLOSED until its owner lets go of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpState {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl TcpState {
    /// The RFC's name, as `ss` and packetdrill print them.
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Closed => "CLOSED",
            TcpState::Listen => "LISTEN",
            TcpState::SynSent => "SYN-SENT",
            TcpState::SynReceived => "SYN-RECEIVED",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait1 => "FIN-WAIT-1",
            TcpState::FinWait2 => "FIN-WAIT-2",
            TcpState::CloseWait => "CLOSE-WAIT",
            TcpState::Closing => "CLOSING",
            TcpState::LastAck => "LAST-ACK",
            TcpState::TimeWait => "TIME-WAIT",
        }
    }

    /// States in which the connection is synchronized (RFC 9293 §3.5.2:
    /// after the handshake).
    pub fn synchronized(self) -> bool {
        !matches!(
            self,
            TcpState::Closed | TcpState::Listen | TcpState::SynSent | TcpState::SynReceived
        )
    }
}

/// One connection's state. Field names are the RFC's (§3.3.1).
pub struct Tcb {
    pub state: TcpState,
    /// Local and remote endpoints.
    pub key: FlowKey,

    // Send sequence variables.
    /// Initial send sequence number.
    pub iss: TcpSeqNumber,
    /// Oldest unacknowledged sequence number.
    pub snd_una: TcpSeqNumber,
    /// Next sequence number to send.
    pub snd_nxt: TcpSeqNumber,
    /// The highest SND.NXT has been (SND.NXT goes back to SND.UNA after
    /// a retransmission timeout; ACKs up to here are for data sent).
    pub snd_high: TcpSeqNumber,
    /// The peer's window, bytes (already scaled).
    pub snd_wnd: u32,
    /// The largest window the peer has offered (RFC 5961 §5.2's
    /// MAX.SND.WND).
    pub max_snd_wnd: u32,
    /// Segment sequence and acknowledgment numbers of the last window
    /// update (§3.10.7.4, "fifth, check the ACK field").
    pub snd_wl1: TcpSeqNumber,
    pub snd_wl2: TcpSeqNumber,
    /// Shift applied to the peer's window field (RFC 7323 §2.3): theirs.
    pub snd_wscale: u8,
    /// Maximum segment size for sending (RFC 9293 §3.7.1: the peer's MSS
    /// option, or 536 for IPv4 and 1220 for IPv6 without one).
    pub snd_mss: u16,

    // Receive sequence variables.
    /// Initial receive sequence number.
    pub irs: TcpSeqNumber,
    /// Next sequence number expected.
    pub rcv_nxt: TcpSeqNumber,
    /// Receive window, bytes (what our buffer can take).
    pub rcv_wnd: u32,
    /// Shift we apply to our window field (ours, announced in our SYN).
    pub rcv_wscale: u8,

    // Options in force (negotiated in the handshake).
    /// RFC 7323 §3: both sides sent the timestamps option.
    pub timestamps: bool,
    /// The peer's latest in-sequence TSval (TS.Recent, RFC 7323 §4.3).
    pub ts_recent: u32,
    /// RFC 2018 §2: both sides sent SACK-permitted.
    pub sack_permitted: bool,
    /// The sender's SACK scoreboard and RFC 6675 recovery state.
    pub sack: super::sack::SackState,

    pub rtt: RttEstimator,
    /// Congestion control (its variant says which algorithm).
    pub cc: CongestionControl,
    /// ECN (RFC 3168): negotiated or not, the echo, the pending CWR.
    pub ecn: Ecn,

    /// Data received in sequence, waiting for the application (payload
    /// only: the packets' data starts at the payload).
    pub recv_queue: VecDeque<Packet>,
    /// Bytes in `recv_queue`.
    pub recv_queued: usize,
    /// Segments received ahead of RCV.NXT, by sequence number
    /// (TCPReordering), and a counter that orders their arrivals.
    pub ooo: VecDeque<Held>,
    pub ooo_arrivals: u64,
    /// Bytes the application wrote and packets it gave, not yet
    /// acknowledged by the peer, from SND.UNA on (so retransmissions are
    /// cut from it; given packets stay there uncopied).
    pub send_buffer: super::send_buffer::SendBuffer,
    /// Whether the application closed its side: a FIN follows the data.
    pub fin_queued: bool,
    /// Our FIN has been sent: it is at SND.NXT - 1.
    pub fin_sent: bool,
    /// The FIN from the peer has been received (the reader sees the end).
    pub fin_received: bool,
    /// Why the connection ended, for the application (an errno).
    pub error: Option<i32>,
    /// The last ICMP error about it (RFC 1122 §4.2.3.9's soft errors):
    /// reported instead of ETIMEDOUT if it times out.
    pub soft_error: Option<i32>,
    /// The listener a passively opened connection joins once established.
    pub listener: Option<IpEndpoint>,

    // The socket side.
    /// A socket holds this TCB: when the connection ends, it stays (CLOSED,
    /// with `error`) until the socket lets go.
    pub has_socket: bool,
    /// Notified when there is data, the end of it, or an error to read.
    pub readable: Event,
    /// Notified when the send buffer has room again, or on an error.
    pub writable: Event,
    /// Bytes the send buffer may hold (SO_SNDBUF).
    pub send_buffer_limit: usize,
    /// TCP_MAXSEG, set before the connection opens: the MSS it announces
    /// and the largest segment it sends are at most this.
    pub user_mss: Option<u16>,
    /// TCP_NODELAY: no Nagle (RFC 1122 §4.2.3.4 lets an application turn
    /// it off).
    pub nodelay: bool,

    // What the outgoing path and the timers are asked to do.
    /// In TCPInfo's output list already.
    pub output_queued: bool,
    /// Send an ACK even with nothing else to send (a window update).
    pub send_ack: bool,
    /// Send a RST and end the connection (closed with unread data).
    pub send_rst: bool,
    /// The right edge of the window we last advertised (RCV.NXT plus the
    /// window then), for deciding when a window update is worth sending.
    pub advertised_edge: TcpSeqNumber,
    /// Resend the first unacknowledged segment (fast retransmit, a
    /// partial ACK) before anything new.
    pub retransmit_first: bool,
    /// When the retransmission timer expires, if armed.
    pub rto_deadline: Option<u64>,
    /// The time of this connection's live Retransmit entry in
    /// `TcpInfo::timers`, and of its DelayedAck entry: a deadline moved
    /// later is not inserted again, the entry moves on when it comes due
    /// (`TcpInfo::timer_due`; a request/response connection re-arms both
    /// timers at every exchange).
    pub rto_queued: Option<u64>,
    pub delayed_ack_queued: Option<u64>,
    /// When TIME-WAIT ends, in that state.
    pub time_wait_deadline: Option<u64>,
    /// When a delayed ACK must go, if one waits; and the data segments
    /// received since our last ACK.
    pub delayed_ack_deadline: Option<u64>,
    pub unacked_segments: u32,
    /// The persist timer (a zero window and data to send, or data held
    /// back by the sender's silly window avoidance), and the probes sent
    /// since the window was last open; the next segment is a one-octet
    /// window probe.
    pub persist_deadline: Option<u64>,
    pub persist_probes: u32,
    pub window_probe: bool,
    /// The override timeout of the sender's silly window avoidance (RFC
    /// 9293 §3.8.6.2.1, the persist timer) fired: the next send may be a
    /// segment the usable window cuts short.
    pub sws_override: bool,
    /// SO_KEEPALIVE and its TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT.
    pub keepalive: Option<Keepalive>,
    pub keepalive_deadline: Option<u64>,
    pub keepalive_probes: u32,
    /// When the peer was last heard from (an acceptable segment).
    pub last_heard_us: u64,
    /// TCP_USER_TIMEOUT (RFC 5482): how long data may stay unacknowledged
    /// before the connection is given up; and since when it has been.
    pub user_timeout_us: Option<u64>,
    pub unacked_since: Option<u64>,
    /// TCP_SYNCNT: SYN retransmissions before an active open gives up
    /// with ETIMEDOUT (None: the stack's limit for every segment).
    pub syn_retries: Option<u32>,
}

impl Tcb {
    /// A new TCB for `key` in `state`, our initial sequence number `iss`.
    pub fn new(key: FlowKey, state: TcpState, iss: TcpSeqNumber, settings: &TcbSettings) -> Tcb {
        let default_mss = if key.local.addr.is_ipv4() { 536 } else { 1220 };
        Tcb {
            state,
            key,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_high: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: TcpSeqNumber(0),
            snd_wl2: TcpSeqNumber(0),
            snd_wscale: 0,
            snd_mss: default_mss,
            irs: TcpSeqNumber(0),
            rcv_nxt: TcpSeqNumber(0),
            rcv_wnd: settings.recv_buffer,
            rcv_wscale: 0,
            timestamps: false,
            ts_recent: 0,
            sack_permitted: false,
            sack: Default::default(),
            rtt: RttEstimator::new(settings.rto),
            cc: CongestionControl::new(
                super::cc::Algorithm::NewReno,
                default_mss as u32,
                iss.0,
                settings.initial_window,
            ),
            ecn: Ecn::default(),
            recv_queue: VecDeque::new(),
            recv_queued: 0,
            ooo: VecDeque::new(),
            ooo_arrivals: 0,
            send_buffer: Default::default(),
            fin_queued: false,
            fin_sent: false,
            fin_received: false,
            error: None,
            soft_error: None,
            listener: None,
            has_socket: false,
            readable: Event::new(),
            writable: Event::new(),
            send_buffer_limit: settings.send_buffer as usize,
            user_mss: None,
            nodelay: false,
            output_queued: false,
            send_ack: false,
            send_rst: false,
            advertised_edge: TcpSeqNumber(0),
            retransmit_first: false,
            rto_deadline: None,
            rto_queued: None,
            delayed_ack_queued: None,
            time_wait_deadline: None,
            delayed_ack_deadline: None,
            unacked_segments: 0,
            persist_deadline: None,
            persist_probes: 0,
            window_probe: false,
            sws_override: false,
            keepalive: None,
            keepalive_deadline: None,
            keepalive_probes: 0,
            last_heard_us: 0,
            user_timeout_us: None,
            unacked_since: None,
            syn_retries: None,
        }
    }

    /// The window to announce, in the header's units (RFC 7323 §2.3: our
    /// shift applies, except in a SYN segment, which the caller handles).
    pub fn window_field(&self) -> u16 {
        (self.rcv_window() >> self.rcv_wscale).min(u16::MAX as u32) as u16
    }

    /// An ACK went out (alone or on data): no delayed ACK waits any more.
    pub fn ack_sent(&mut self) {
        self.delayed_ack_deadline = None;
        self.unacked_segments = 0;
        self.send_ack = false;
        self.advertised_edge = self.rcv_nxt + self.rcv_window() as usize;
    }

    /// Whether the application's reading opened the window enough to tell
    /// the peer now (as Linux decides it: what the peer may still send is
    /// at most half the buffer, and the window would at least double).
    pub fn window_update_due(&self) -> bool {
        let remaining = (self.advertised_edge - self.rcv_nxt).max(0) as u32;
        // RFC 9293 §3.8.6.2.2: the right edge moves only by at least
        // min(RCV.BUFF / 2, the MSS) (receiver-side silly window avoidance).
        let least = (self.rcv_wnd / 2).min(self.snd_mss as u32);
        2 * remaining <= self.rcv_wnd
            && self.rcv_window() >= 2 * remaining.max(1)
            && self.rcv_window() - remaining >= least
    }

    /// The highest sequence number sent, plus one.
    pub fn snd_max(&self) -> TcpSeqNumber {
        self.snd_high.max(self.snd_nxt)
    }

    /// Whether our FIN has been sent and acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_sent && self.snd_una == self.snd_nxt
    }

    /// The receive window now: what the buffer can still take.
    pub fn rcv_window(&self) -> u32 {
        self.rcv_wnd.saturating_sub(self.recv_queued as u32)
    }

    /// The data one full segment carries, RFC 5681's SMSS: the MSS less
    /// the options every segment carries (RFC 1122 §4.2.2.6; the
    /// timestamps, 12 bytes with padding). Congestion windows, Nagle and
    /// segmentation count in it, so that a window of whole segments is
    /// sent as whole segments (not 1448 + 12).
    pub fn segment_size(&self) -> u32 {
        (self.snd_mss as u32)
            .saturating_sub(if self.timestamps { 12 } else { 0 })
            .max(1)
    }

    /// Bytes of the send buffer not sent yet.
    pub fn unsent(&self) -> usize {
        let sent = ((self.snd_nxt - self.snd_una).max(0) as usize).saturating_sub(self.fin_sent as usize);
        // SYN-SENT and SYN-RECEIVED: the SYN is in flight, not a byte.
        let sent = sent.saturating_sub(!self.state.synchronized() as usize);
        self.send_buffer.len().saturating_sub(sent)
    }

    /// Bytes sent and not acknowledged (RFC 5681's FlightSize).
    pub fn flight_size(&self) -> u32 {
        (self.snd_nxt - self.snd_una).max(0) as u32
    }
}

/// Keepalive settings (RFC 1122 §4.2.3.6: off unless asked; at least
/// two hours idle by default there, Linux's 7200 s / 75 s / 9 probes;
/// here they are per socket, so tests use seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle_us: u64,
    /// Time between probes.
    pub interval_us: u64,
    /// Unanswered probes before the connection is given up (ETIMEDOUT).
    pub count: u32,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive {
            idle_us: 7_200_000_000,
            interval_us: 75_000_000,
            count: 9,
        }
    }
}

/// A segment held ahead of RCV.NXT: where its data starts and ends (a
/// FIN counted), when it came (to report the newest SACK block first).
pub struct Held {
    pub seq: TcpSeqNumber,
    pub end: TcpSeqNumber,
    pub arrival: u64,
    pub packet: Packet,
}

impl Tcb {
    /// The SACK blocks to report (RFC 2018 §4): the held data as ranges,
    /// the one with the most recent arrival first, then the others in
    /// sequence order; at most `max`.
    pub fn sack_blocks(&self, max: usize) -> Vec<(TcpSeqNumber, TcpSeqNumber, u64)> {
        let mut ranges: Vec<(TcpSeqNumber, TcpSeqNumber, u64)> = Vec::new();
        for h in &self.ooo {
            match ranges.last_mut() {
                Some(last) if h.seq <= last.1 => {
                    last.1 = last.1.max(h.end);
                    last.2 = last.2.max(h.arrival);
                }
                _ => ranges.push((h.seq, h.end, h.arrival)),
            }
        }
        if let Some(newest) = (0..ranges.len()).max_by_key(|&i| ranges[i].2) {
            let first = ranges.remove(newest);
            ranges.insert(0, first);
        }
        ranges.truncate(max);
        ranges
    }
}

/// What a new TCB takes from the stack's settings.
#[derive(Debug, Clone, Copy)]
pub struct TcbSettings {
    /// Receive buffer, bytes (the window we offer).
    pub recv_buffer: u32,
    /// Send buffer, bytes.
    pub send_buffer: u32,
    pub rto: RtoBounds,
    /// Initial congestion window in segments (None: RFC 5681's rule).
    pub initial_window: Option<u32>,
}

impl Default for TcbSettings {
    fn default() -> TcbSettings {
        TcbSettings {
            recv_buffer: 256 * 1024,
            send_buffer: 256 * 1024,
            rto: RtoBounds::default(),
            initial_window: Some(10),
        }
    }
}

/// The per-core table of TCBs: slots reused through a free list, each
/// with a generation bumped when it is freed.
#[derive(Default)]
pub struct TcbTable {
    slots: Vec<(u32, Option<Tcb>)>,
    free: Vec<u32>,
    live: usize,
}

impl TcbTable {
    /// Stores `tcb`, returning its reference.
    pub fn insert(&mut self, tcb: Tcb) -> TcbRef {
        self.live += 1;
        if let Some(slot) = self.free.pop() {
            let entry = &mut self.slots[slot as usize];
            entry.1 = Some(tcb);
            return TcbRef {
                id: slot + 1,
                generation: entry.0,
            };
        }
        self.slots.push((0, Some(tcb)));
        TcbRef {
            id: self.slots.len() as u32,
            generation: 0,
        }
    }

    /// The TCB `r` refers to, if it still exists.
    pub fn get(&self, r: TcbRef) -> Option<&Tcb> {
        let (generation, tcb) = self.slots.get((r.id as usize).checked_sub(1)?)?;
        (*generation == r.generation).then_some(tcb.as_ref()?)
    }

    pub fn get_mut(&mut self, r: TcbRef) -> Option<&mut Tcb> {
        let (generation, tcb) = self.slots.get_mut((r.id as usize).checked_sub(1)?)?;
        if *generation != r.generation {
            return None;
        }
        tcb.as_mut()
    }

    /// Removes the TCB `r` refers to; references to it find nothing from
    /// now on.
    pub fn remove(&mut self, r: TcbRef) -> Option<Tcb> {
        let index = (r.id as usize).checked_sub(1)?;
        let (generation, slot) = self.slots.get_mut(index)?;
        if *generation != r.generation {
            return None;
        }
        let tcb = slot.take()?;
        *generation = generation.wrapping_add(1);
        self.free.push(index as u32);
        self.live -= 1;
        Some(tcb)
    }

    /// TCBs in the table.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), port),
        }
    }

    #[test]
    fn a_reference_to_a_removed_tcb_finds_nothing_even_when_its_slot_is_reused() {
        let mut t = TcbTable::default();
        let s = TcbSettings::default();
        let a = t.insert(Tcb::new(key(1000), TcpState::Listen, TcpSeqNumber(1), &s));
        let b = t.insert(Tcb::new(key(1001), TcpState::Listen, TcpSeqNumber(2), &s));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(a).unwrap().key, key(1000));
        assert!(t.remove(a).is_some());
        assert!(t.get(a).is_none());
        assert!(t.remove(a).is_none(), "removed once");
        let c = t.insert(Tcb::new(key(1002), TcpState::Listen, TcpSeqNumber(3), &s));
        assert_eq!(c.id, a.id, "the slot is reused");
        assert!(t.get(a).is_none(), "the old reference is stale");
        assert_eq!(t.get(c).unwrap().key, key(1002));
        assert_eq!(t.get(b).unwrap().key, key(1001));
        assert_eq!(t.len(), 2);
        assert!(t.get(TcbRef { id: 0, generation: 0 }).is_none());
        assert!(t.get(TcbRef { id: 99, generation: 0 }).is_none());
    }

    #[test]
    fn a_new_tcb_uses_the_default_mss_of_its_family() {
        let s = TcbSettings::default();
        let t = Tcb::new(key(1), TcpState::SynReceived, TcpSeqNumber(5), &s);
        assert_eq!(t.snd_mss, 536);
        assert_eq!((t.snd_una, t.snd_nxt), (TcpSeqNumber(5), TcpSeqNumber(5)));
        assert_eq!(t.window_field(), u16::MAX, "256 KiB unscaled is capped");
        assert!(!t.state.synchronized());
        assert!(TcpState::CloseWait.synchronized());
    }
}
