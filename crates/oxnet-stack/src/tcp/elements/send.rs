//! The outgoing path (ClickNF §3.2, Figure 3): TCPOutput -> TCPNagle ->
//! TCPRateControl -> TCPSegmentation, then the neighbour resolver.
//!
//! The unit that moves is a *send request*: a small packet whose TCB
//! annotation names a connection with something to send, which
//! TCPSegmentation turns into the segments. The data itself stays in the
//! connection's send buffer until the peer acknowledges it, so that a
//! retransmission is cut from the same bytes (ClickNF keeps clones in an
//! RTX queue instead; the driver's buffers have no reference counts yet:
//! docs/stack.md).
//!
//! | element | ports | what |
//! |---|---|---|
//! | TCPOutput | 0/1 | task: a send request for each connection the socket calls, ACKs or timers asked about |
//! | TCPNagle | 1/1 | holds back a small segment while data is unacknowledged (RFC 1122 §4.2.3.4), unless NODELAY |
//! | TCPRateControl | 1/1 | what min(cwnd, the peer's window) lets out now, into the allowance annotation (RFC 5681 §3.1; for a connection under TCPSackRecovery, cwnd less RFC 6675's pipe) |
//! | TCPSegmentation | 1/1 | the segments: at most one MSS each (RFC 9293 §3.7.1), none the window cuts silly-short (§3.8.6.2.1), ACK set, PSH on the last, the FIN after the data; arms the RTO (RFC 6298 §5.1); with TCPSettings' TSO, new IPv4 data as one large segment for the device to cut, with CHECKSUM_OFFLOAD the checksums left to the device ([`crate::tcp::offload`]) |
//! | TCPTimers | 0/1 | task: the retransmission timeout (RFC 6298 §5.4-5.7) and the end of TIME-WAIT |

use super::{info, ts_now, Info};
use crate::anno;
use crate::tcp::ecn::Codepoint;
use crate::tcp::info::TimerKind;
use crate::tcp::offload::{self, write_offloaded_with};
use crate::tcp::output::{write_segment, write_segment_payload};
use crate::tcp::payload::Payload;
use crate::tcp::tcb::{Tcb, TcpState};
use crate::wire::{TcpFlags, TcpOptions, TcpRepr, TcpSeqNumber};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_1, PUSH};
use oxnet_graph::timer::TimerId;
use oxnet_graph::Ctx;

/// Retransmission timeouts before a connection is given up with
/// ETIMEDOUT (RFC 1122 §4.2.3.5's R2; Linux's tcp_retries2 is 15).
pub const MAX_RETRANSMITS: u32 = 15;

/// States in which data or a FIN may go out.
fn may_send(state: TcpState) -> bool {
    matches!(
        state,
        TcpState::SynSent
            | TcpState::Established
            | TcpState::CloseWait
            | TcpState::FinWait1
            | TcpState::FinWait2
            | TcpState::Closing
            | TcpState::LastAck
    )
}

#[derive(Default)]
pub struct Output {
    info: Option<Info>,
    requests: u64,
    no_buffers: u64,
}

impl Element for Output {
    fn class_name(&self) -> &'static str {
        "TCPOutput"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router only (sockets written by the
    /// executor's tasks, the router's timers): an idle router may sleep.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(info) = self.info.clone() else { return false };
        let mut batch = PacketBatch::with_capacity(32);
        {
            let mut info = info.borrow_mut();
            info.clock_us = ctx.now_us();
            if info.output.is_empty() {
                return false;
            }
            let wanted = std::mem::take(&mut info.output);
            for r in wanted {
                let Some(tcb) = info.tcbs.get_mut(r) else { continue };
                tcb.output_queued = false;
                if !may_send(tcb.state) {
                    continue;
                }
                let Ok(mut p) = ctx.pool().alloc() else {
                    self.no_buffers += 1;
                    // Asked again next round.
                    tcb.output_queued = true;
                    info.output.push(r);
                    continue;
                };
                anno::set_tcb(&mut p, Some(r));
                self.requests += 1;
                batch.push(p);
            }
        }
        let worked = !batch.is_empty();
        ctx.push(0, batch);
        worked
    }
    counter_handlers!(requests, no_buffers);
}

#[derive(Default)]
pub struct Nagle {
    info: Option<Info>,
    held: u64,
}

/// RFC 1122 §4.2.3.4 (Nagle): send now if a full segment is ready, if
/// nothing is unacknowledged, if the application asked for no delay, or
/// if the connection is closing (what remains goes with the FIN).
pub fn nagle_allows(tcb: &Tcb) -> bool {
    let unsent = tcb.unsent();
    syn_due(tcb)
        || tcb.retransmit_first
        || tcb.send_ack
        || unsent >= tcb.segment_size() as usize
        || tcb.flight_size() == 0
        || tcb.nodelay
        || tcb.fin_queued
        || tcb.send_rst
}

/// RFC 9293 §3.8.6.2.1 (RFC 1122 §4.2.3.4), the sender's silly window
/// avoidance: with `unsent` bytes queued and full segments of `mss`, what
/// the peer's usable window U = SND.UNA + SND.WND - SND.NXT lets go now,
/// min(D, U), may go if it is a full segment, if it is all that is
/// queued (whether that may go with data in flight is Nagle's test,
/// TCPNagle), if it is at least half the largest window the peer ever
/// offered (Fs = 1/2), or if the override timeout (the persist timer)
/// fired. Otherwise it waits for the window to open. (cwnd is not U: a
/// segment the congestion window cuts short still goes, RFC 5681.)
pub fn sws_allows(tcb: &Tcb, unsent: usize, mss: usize) -> bool {
    let usable = (tcb.snd_wnd as usize).saturating_sub(tcb.flight_size() as usize);
    let sendable = unsent.min(usable);
    sendable >= mss || sendable == unsent || 2 * sendable as u64 >= tcb.max_snd_wnd as u64 || tcb.sws_override
}

impl Element for Nagle {
    fn class_name(&self) -> &'static str {
        "TCPNagle"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let n = ctx.noutputs();
        let outs = {
            let info = info.borrow();
            super::split_packets(batch, n, |p| {
                let tcb = anno::tcb(&p).and_then(|r| info.tcbs.get(r))?;
                if nagle_allows(tcb) {
                    Some((0, p))
                } else {
                    // The next ACK asks again (TCPProcessAck).
                    self.held += 1;
                    None
                }
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(held);
}

#[derive(Default)]
pub struct RateControl {
    info: Option<Info>,
    window_full: u64,
}

impl Element for RateControl {
    fn class_name(&self) -> &'static str {
        "TCPRateControl"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let n = ctx.noutputs();
        let now = ctx.now_us();
        let outs = {
            let mut info = info.borrow_mut();
            super::split_packets(batch, n, |mut p| {
                let r = anno::tcb(&p)?;
                let tcb = info.tcbs.get(r)?;
                // RFC 5681 §3.1: at most min(cwnd, rwnd) in flight (RFC
                // 6675's pipe in place of FlightSize for cwnd, when
                // TCPSackRecovery runs the connection's loss recovery).
                let usable = crate::tcp::sack::usable_window(tcb);
                let fin_only = tcb.unsent() == 0 && tcb.fin_queued && !tcb.fin_sent;
                if tcb.window_probe {
                    // RFC 9293 §3.8.6.1: one octet past a zero window.
                    anno::set_send_allowance(&mut p, 1);
                    return Some((0, p));
                }
                if usable == 0 && !tcb.retransmit_first && !fin_only && !tcb.send_ack && !tcb.send_rst && !syn_due(tcb)
                {
                    self.window_full += 1;
                    // A zero window with data waiting and nothing in flight
                    // (which the RTO would cover): the persist timer.
                    if tcb.snd_wnd == 0 && tcb.unsent() > 0 && tcb.flight_size() == 0 && tcb.persist_deadline.is_none()
                    {
                        info.arm_persist(r, now);
                    }
                    return None;
                }
                anno::set_send_allowance(&mut p, usable);
                Some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(window_full);
}

#[derive(Default)]
pub struct Segmentation {
    info: Option<Info>,
    resets: u64,
    segments: u64,
    bytes: u64,
    retransmits: u64,
    no_buffers: u64,
    /// Large segments handed to the device to cut (TSO).
    tso: u64,
    /// Requests that sent less because silly window avoidance held data.
    sws_held: u64,
}

/// Our SYN is to be sent (a connection just opened, or its SYN timed
/// out): SYN-SENT with SND.NXT still at ISS.
fn syn_due(tcb: &Tcb) -> bool {
    tcb.state == TcpState::SynSent && tcb.snd_nxt == tcb.iss
}

/// Our SYN (RFC 9293 §3.10.1 OPEN): the options we offer (MSS, window
/// scale, SACK-permitted, timestamps, as the settings say).
fn syn_segment(tcb: &Tcb, settings: &crate::tcp::info::TcpSettings, our_mss: u16, now: u64) -> TcpRepr {
    TcpRepr {
        src_port: tcb.key.local.port,
        dst_port: tcb.key.remote.port,
        seq: tcb.iss,
        ack: None,
        // RFC 3168 §6.1.1: an ECN-setup SYN carries ECE and CWR.
        flags: if settings.ecn {
            TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR
        } else {
            TcpFlags::SYN
        },
        // RFC 7323 §2.2: a SYN's window is never scaled.
        window: tcb.rcv_wnd.min(u16::MAX as u32) as u16,
        urgent: 0,
        options: TcpOptions {
            mss: Some(our_mss),
            window_scale: settings.window_scale,
            sack_permitted: settings.sack,
            timestamps: settings.timestamps.then(|| (ts_now(now), 0)),
            ..TcpOptions::default()
        },
        payload_len: 0,
    }
}

/// A segment of `tcb` at `seq` with `len` bytes of its send buffer from
/// `offset`, and `flags` besides ACK.
pub(super) fn data_segment(
    tcb: &mut Tcb,
    seq: TcpSeqNumber,
    offset: usize,
    len: usize,
    flags: TcpFlags,
    now: u64,
) -> (TcpRepr, Payload<'_>) {
    let mut options = TcpOptions::default();
    if tcb.timestamps {
        options.timestamps = Some((ts_now(now), tcb.ts_recent));
    }
    let repr = TcpRepr {
        src_port: tcb.key.local.port,
        dst_port: tcb.key.remote.port,
        seq,
        ack: Some(tcb.rcv_nxt),
        flags: flags | super::ece_flag(tcb),
        window: tcb.window_field(),
        urgent: 0,
        options,
        payload_len: len,
    };
    let payload = Payload {
        buffer: &tcb.send_buffer,
        offset,
        len,
    };
    (repr, payload)
}

impl Element for Segmentation {
    fn class_name(&self) -> &'static str {
        "TCPSegmentation"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let now = ctx.now_us();
        let mut out = PacketBatch::with_capacity(batch.len());
        {
            let mut info = info.borrow_mut();
            let mut requests = std::mem::take(batch);
            let count = requests.len();
            for request in requests.drain_front(count) {
                let Some(r) = anno::tcb(&request) else { continue };
                let allowance = anno::send_allowance(&request) as usize;
                let mut spare = Some(request);
                let pool = ctx.pool();
                let packet = |spare: &mut Option<Packet>, no_buffers: &mut u64| {
                    let p = spare.take().or_else(|| pool.alloc().ok());
                    *no_buffers += p.is_none() as u64;
                    p
                };
                let settings = info.settings;
                let Some(key) = info.tcbs.get(r).map(|t| t.key) else {
                    continue;
                };
                let our_mss = info.our_mss(&key);
                let Some(tcb) = info.tcbs.get_mut(r) else { continue };
                if tcb.send_rst {
                    // <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>, then the end.
                    let mut rst = super::ack_segment(tcb, now);
                    rst.flags = TcpFlags::RST;
                    rst.options = TcpOptions::default();
                    rst.window = 0;
                    if let Some(mut p) = packet(&mut spare, &mut self.no_buffers) {
                        if write_segment(&mut p, &key, &rst, &[]) {
                            out.push(p);
                        }
                    }
                    self.resets += 1;
                    super::rst_syn::abort(&mut info, r, None);
                    continue;
                }
                // RFC 1122 §4.2.2.6: the MSS counts the data and the
                // options; a segment's data is the MSS less the options it
                // carries (the timestamps, 12 bytes with padding).
                let mss = tcb.segment_size() as usize;
                // Offloads (TCPSettings TSO, CHECKSUM_OFFLOAD): IPv4 and IPv6.
                let ip_len = offload::ip_header_len(key.local.addr.is_ipv4());
                let offload = settings.tso || settings.checksum_offload;
                let tso_limit = if settings.tso {
                    offload::tso_limit(pool, mss, 20 + if tcb.timestamps { 12 } else { 0 }, ip_len)
                } else {
                    0
                };
                let mut sent_any = false;
                if syn_due(tcb) {
                    if let Some(mut p) = packet(&mut spare, &mut self.no_buffers) {
                        if write_segment(&mut p, &key, &syn_segment(tcb, &settings, our_mss, now), &[]) {
                            out.push(p);
                            tcb.snd_nxt = tcb.iss + 1;
                            self.segments += 1;
                            sent_any = true;
                        }
                    }
                }
                if std::mem::take(&mut tcb.retransmit_first) {
                    // RFC 5681 §3.2 / RFC 6582: the first unacknowledged
                    // segment again, SND.NXT unchanged.
                    let len = tcb.send_buffer.len().min(mss);
                    let fin = tcb.fin_sent && len == tcb.send_buffer.len();
                    let flags = if fin { TcpFlags::FIN } else { TcpFlags::empty() };
                    let (una, key) = (tcb.snd_una, tcb.key);
                    if len > 0 || fin {
                        if let Some(mut p) = packet(&mut spare, &mut self.no_buffers) {
                            let (seg, bytes) = data_segment(tcb, una, 0, len, flags, now);
                            if write_segment_payload(&mut p, &key, &seg, bytes, Codepoint::NotEct) {
                                out.push(p);
                                self.retransmits += 1;
                                sent_any = true;
                            }
                        }
                    }
                }
                let mut budget = allowance;
                if std::mem::take(&mut tcb.window_probe) && tcb.unsent() > 0 {
                    // RFC 9293 §3.8.6.1: one octet past the zero window, sent
                    // again by the persist timer, not the RTO: SND.NXT stays
                    // (the octet is not in flight: no RTO backing the probes
                    // off twice, no duplicate ACKs from the answers) and
                    // SND.MAX covers it, in case the peer takes it.
                    budget = 0;
                    let (nxt, key, unsent) = (tcb.snd_nxt, tcb.key, tcb.unsent());
                    let flags = if unsent == 1 { TcpFlags::PSH } else { TcpFlags::empty() };
                    let (seg, bytes) = data_segment(tcb, nxt, tcb.send_buffer.len() - unsent, 1, flags, now);
                    if let Some(mut p) = packet(&mut spare, &mut self.no_buffers) {
                        if write_segment_payload(&mut p, &key, &seg, bytes, Codepoint::NotEct) {
                            out.push(p);
                            tcb.snd_high = tcb.snd_high.max(nxt + 1);
                            tcb.ack_sent();
                            self.segments += 1;
                        }
                    }
                }
                if tcb.flight_size() == 0 && tcb.unacked_since.is_none() && (tcb.unsent() > 0 || syn_due(tcb)) {
                    tcb.unacked_since = Some(now);
                }
                let mut sws_held = false;
                loop {
                    let unsent = tcb.unsent();
                    // TSO: new data (past SND.MAX: never sent, so no
                    // retransmission) may go as one large segment that
                    // the device cuts (`crate::tcp::offload`).
                    // Not with a CWR to send: the device would copy it
                    // into every segment (82599 §7.2.4.7 keeps CWR in the
                    // first and middle masks), RFC 3168 §6.1.2 wants one.
                    let new_data = tcb.snd_nxt >= tcb.snd_max() && !(tcb.ecn.enabled && tcb.ecn.cwr_pending);
                    let limit = if tso_limit > 0 && new_data { tso_limit } else { mss };
                    let len = unsent.min(limit).min(budget);
                    let fin_now = tcb.fin_queued && !tcb.fin_sent && len == unsent;
                    if len == 0 && !fin_now {
                        break;
                    }
                    if !sws_allows(tcb, unsent, mss) {
                        sws_held = true;
                        self.sws_held += 1;
                        break;
                    }
                    tcb.sws_override = false;
                    let offset = tcb.send_buffer.len() - unsent;
                    let mut flags = TcpFlags::empty();
                    if len == unsent && len > 0 {
                        flags.insert(TcpFlags::PSH);
                    }
                    if fin_now {
                        flags.insert(TcpFlags::FIN);
                    }
                    let Some(mut p) = packet(&mut spare, &mut self.no_buffers) else {
                        break;
                    };
                    // RFC 3168 §6.1.2: CWR on the first new data after a
                    // reduction; §6.1.5: ECT(0) on new data, not on
                    // retransmissions (after a timeout this loop resends
                    // from SND.UNA).
                    let fresh = tcb.ecn.enabled && tcb.ecn.send_data(tcb.snd_nxt.0, len as u32);
                    let cwr = fresh && tcb.ecn.cwr_pending;
                    if cwr {
                        flags.insert(TcpFlags::CWR);
                    }
                    let ecn = if fresh { Codepoint::Ect0 } else { Codepoint::NotEct };
                    let (nxt, key) = (tcb.snd_nxt, tcb.key);
                    let (seg, bytes) = data_segment(tcb, nxt, offset, len, flags, now);
                    let written = if offload {
                        // TSO when this is more than one segment of new
                        // data. The payload is copied from the send
                        // buffer into the offloaded segment's buffers
                        // (given packets too: zero-copy and the offloads
                        // do not combine yet).
                        let tso_mss = (len > mss).then_some(mss as u16);
                        let copy = |at: usize, out: &mut [u8]| bytes.buffer.copy_to(bytes.offset + at, out);
                        write_offloaded_with(&mut p, pool, &key, &seg, bytes.len, copy, ecn, tso_mss)
                    } else {
                        write_segment_payload(&mut p, &key, &seg, bytes, ecn)
                    };
                    if !written {
                        break;
                    }
                    self.tso += (len > mss) as u64;
                    tcb.ecn.cwr_pending &= !cwr;
                    out.push(p);
                    tcb.snd_nxt += len + fin_now as usize;
                    tcb.fin_sent |= fin_now;
                    budget -= len;
                    self.segments += 1;
                    self.bytes += len as u64;
                    sent_any = true;
                    if fin_now {
                        break;
                    }
                }
                // Nothing else went: a window update, if one was asked for.
                if std::mem::take(&mut tcb.send_ack) && !sent_any {
                    if let Some(mut p) = packet(&mut spare, &mut self.no_buffers) {
                        if super::turn_into_ack(&mut p, tcb, now) {
                            out.push(p);
                            tcb.ack_sent();
                        }
                    }
                }
                if sent_any {
                    tcb.ack_sent();
                }
                // RFC 6298 §5.1: a segment with data (or a FIN) left and
                // the timer is not running: start it.
                let arm = sent_any && tcb.rto_deadline.is_none();
                // Data held back by silly window avoidance with nothing in
                // flight (no ACK will come to ask again): the override
                // timeout, on the persist timer (RFC 9293 §3.8.6.2.1).
                if sent_any && tcb.snd_wnd > 0 {
                    // In flight now: the RTO covers it, not the override.
                    tcb.persist_deadline = None;
                }
                let arm_persist = sws_held && tcb.flight_size() == 0 && tcb.persist_deadline.is_none();
                if arm {
                    info.arm_rto(r, now);
                }
                if arm_persist {
                    info.arm_persist(r, now);
                }
            }
        }
        ctx.push(0, out);
    }
    counter_handlers!(segments, bytes, retransmits, no_buffers, resets, tso, sws_held);
}

#[derive(Default)]
pub struct Timers {
    info: Option<Info>,
    /// The router timer set for the earliest deadline, and when.
    wakeup: Option<(TimerId, u64)>,
    timeouts: u64,
    gave_up: u64,
    time_waits: u64,
    delayed_acks: u64,
    window_probes: u64,
    sws_overrides: u64,
    keepalive_probes: u64,
    keepalive_timeouts: u64,
    user_timeouts: u64,
}

impl Element for Timers {
    fn class_name(&self) -> &'static str {
        "TCPTimers"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router only (sockets written by the
    /// executor's tasks, the router's timers): an idle router may sleep.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_timer(&mut self, id: TimerId, _ctx: &mut Ctx<'_>) {
        if self.wakeup.map(|(t, _)| t) == Some(id) {
            self.wakeup = None;
        }
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(info) = self.info.clone() else { return false };
        let now = ctx.now_us();
        let mut out = PacketBatch::default();
        let mut worked = false;
        let next = {
            let mut info = info.borrow_mut();
            while let Some(&(at, r, kind)) = info.timers.first() {
                if at > now {
                    break;
                }
                info.timers.pop_first();
                if info.timer_due(r, kind, at) {
                    continue;
                }
                let Some(tcb) = info.tcbs.get_mut(r) else { continue };
                match kind {
                    TimerKind::Retransmit if tcb.rto_deadline == Some(at) => {
                        worked = true;
                        tcb.rto_deadline = None;
                        self.timeouts += 1;
                        if let Some(p) = self.retransmission_timeout(&mut info, r, now, ctx) {
                            out.push(p);
                        }
                    }
                    TimerKind::DelayedAck if tcb.delayed_ack_deadline == Some(at) => {
                        worked = true;
                        self.delayed_acks += 1;
                        tcb.delayed_ack_deadline = None;
                        tcb.send_ack = true;
                        info.want_output(r);
                    }
                    TimerKind::Persist if tcb.persist_deadline == Some(at) => {
                        worked = true;
                        tcb.persist_deadline = None;
                        if tcb.snd_wnd == 0 && tcb.unsent() > 0 {
                            self.window_probes += 1;
                            tcb.persist_probes += 1;
                            tcb.window_probe = true;
                            info.want_output(r);
                            info.arm_persist(r, now);
                        } else if tcb.unsent() > 0 && tcb.flight_size() == 0 {
                            // The override timeout of silly window
                            // avoidance (RFC 9293 §3.8.6.2.1 (4)): what
                            // the small window allows goes.
                            self.sws_overrides += 1;
                            tcb.sws_override = true;
                            info.want_output(r);
                        }
                    }
                    TimerKind::Keepalive if tcb.keepalive_deadline == Some(at) => {
                        worked = true;
                        tcb.keepalive_deadline = None;
                        if let Some(p) = self.keepalive(&mut info, r, now, ctx) {
                            out.push(p);
                        }
                    }
                    TimerKind::TimeWait if tcb.time_wait_deadline == Some(at) => {
                        worked = true;
                        self.time_waits += 1;
                        super::rst_syn::abort(&mut info, r, None);
                    }
                    // Stale: the deadline moved or was cancelled.
                    _ => {}
                }
            }
            info.timers.first().map(|(at, _, _)| *at)
        };
        // One router timer at the earliest deadline, so that simulated
        // time jumps there when nothing else runs.
        if let Some(at) = next {
            if self.wakeup.is_none_or(|(_, set)| set > at) {
                let id = ctx.schedule_after_us(at.saturating_sub(now));
                self.wakeup = Some((id, at));
            }
        }
        if !out.is_empty() {
            ctx.push(0, out);
        }
        worked
    }
    counter_handlers!(
        timeouts,
        gave_up,
        time_waits,
        delayed_acks,
        window_probes,
        sws_overrides,
        keepalive_probes,
        keepalive_timeouts,
        user_timeouts
    );
}

impl Timers {
    /// RFC 1122 §4.2.3.6: after `idle` without hearing from the peer, a
    /// probe every `interval`, given up (ETIMEDOUT) after `count`
    /// unanswered ones. The probe is ClickNF's: an ACK whose sequence
    /// number is one before SND.NXT ("DecTCPSeqNo"), which the peer must
    /// answer. Returns the probe to send, if one is due.
    fn keepalive(
        &mut self,
        info: &mut crate::tcp::info::TcpInfo,
        r: anno::TcbRef,
        now: u64,
        ctx: &mut Ctx<'_>,
    ) -> Option<Packet> {
        let tcb = info.tcbs.get_mut(r)?;
        let ka = tcb.keepalive?;
        // FIN-WAIT-2 too, as Linux does for a socket still open: our FIN
        // is acknowledged and we wait for the peer's data or FIN, so only
        // a probe finds out that the peer is gone. (States with data or a
        // FIN in flight have the retransmission timer instead.)
        if !matches!(
            tcb.state,
            TcpState::Established | TcpState::CloseWait | TcpState::FinWait2
        ) {
            return None;
        }
        let quiet_since = tcb.last_heard_us;
        if now.saturating_sub(quiet_since) < ka.idle_us {
            info.arm_keepalive(r, quiet_since + ka.idle_us);
            return None;
        }
        // RFC 5482 §1: the user timeout bounds how long the peer may stay
        // silent; with a probe out and that long passed, give up now, as
        // Linux's keepalive timer does (TCP_KEEPCNT no longer counts).
        let user_timed_out = tcb
            .user_timeout_us
            .is_some_and(|limit| tcb.keepalive_probes > 0 && now.saturating_sub(quiet_since) >= limit);
        if user_timed_out || tcb.keepalive_probes >= ka.count {
            self.gave_up += 1;
            if user_timed_out {
                self.user_timeouts += 1;
            } else {
                self.keepalive_timeouts += 1;
            }
            // A RST tells a peer that is there after all (a path that came
            // back) that the connection is gone, as Linux's keepalive
            // timer does (tcp_send_active_reset before the error):
            // <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK> (RFC 9293 §3.10.4
            // ABORT).
            let mut seg = super::ack_segment(tcb, now);
            seg.flags = TcpFlags::RST;
            seg.options = Default::default();
            seg.window = 0;
            let key = tcb.key;
            super::rst_syn::abort(info, r, Some(libc::ETIMEDOUT));
            let mut p = ctx.pool().alloc().ok()?;
            return write_segment(&mut p, &key, &seg, &[]).then_some(p);
        }
        tcb.keepalive_probes += 1;
        self.keepalive_probes += 1;
        let mut seg = super::ack_segment(tcb, now);
        seg.seq = tcb.snd_nxt - 1usize;
        let key = tcb.key;
        info.arm_keepalive(r, now + ka.interval_us);
        let mut p = ctx.pool().alloc().ok()?;
        write_segment(&mut p, &key, &seg, &[]).then_some(p)
    }

    /// RFC 6298 §5.4-5.7: retransmit the earliest unacknowledged segment
    /// (everything from SND.UNA is sent again, within a window of one
    /// segment), back the timer off, and let congestion control restart
    /// (RFC 5681 §3.1). A SYN-ACK is sent again as it was. Returns a
    /// packet to send now, if any.
    fn retransmission_timeout(
        &mut self,
        info: &mut crate::tcp::info::TcpInfo,
        r: anno::TcbRef,
        now: u64,
        ctx: &mut Ctx<'_>,
    ) -> Option<Packet> {
        let our_mss = info.our_mss(&info.tcbs.get(r)?.key);
        let tcb = info.tcbs.get_mut(r)?;
        // RFC 5482 / RFC 9293 §3.8.3: data unacknowledged longer than the
        // user timeout ends the connection.
        if let (Some(limit), Some(since)) = (tcb.user_timeout_us, tcb.unacked_since) {
            if now.saturating_sub(since) >= limit {
                self.user_timeouts += 1;
                super::rst_syn::abort(info, r, Some(libc::ETIMEDOUT));
                return None;
            }
        }
        tcb.rtt.back_off();
        // RFC 1122 §4.2.3.5: R2 for a SYN may differ (TCP_SYNCNT).
        let limit = match tcb.state {
            TcpState::SynSent => tcb.syn_retries.unwrap_or(MAX_RETRANSMITS),
            _ => MAX_RETRANSMITS,
        };
        if tcb.rtt.backoffs() > limit {
            self.gave_up += 1;
            let errno = tcb.soft_error.unwrap_or(libc::ETIMEDOUT);
            super::rst_syn::abort(info, r, Some(errno));
            return None;
        }
        if tcb.state == TcpState::SynSent {
            // The SYN again (TCPSegmentation sends it: SND.NXT back at ISS).
            tcb.snd_nxt = tcb.iss;
            info.arm_rto(r, now);
            info.want_output(r);
            return None;
        }
        if tcb.state == TcpState::SynReceived {
            let seg = super::check::syn_ack(tcb, now, our_mss);
            let key = tcb.key;
            info.arm_rto(r, now);
            let mut p = ctx.pool().alloc().ok()?;
            return write_segment(&mut p, &key, &seg, &[]).then_some(p);
        }
        if tcb.flight_size() == 0 {
            return None;
        }
        let high = tcb.snd_nxt - 1usize;
        let flight = tcb.flight_size();
        tcb.cc.on_timeout(flight, high.0);
        crate::tcp::sack::on_timeout(tcb);
        tcb.snd_high = tcb.snd_max();
        tcb.snd_nxt = tcb.snd_una;
        tcb.fin_sent = false;
        info.arm_rto(r, now);
        info.want_output(r);
        None
    }
}
