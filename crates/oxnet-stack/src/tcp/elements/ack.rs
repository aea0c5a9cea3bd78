//! TCPProcessAck (RFC 9293 §3.10.7.4 "fifth, check the ACK field"),
//! TCPEstimateRTT (RFC 6298) and TCPNewRenoAck (RFC 5681, RFC 6582) or
//! TCPCubicAck (RFC 9438) in its place: what
//! an acknowledgment changes, split as ClickNF splits it so that the RTT
//! estimator or the congestion control can be replaced alone.
//!
//! TCPProcessAck: input segments that passed the RST and SYN checks.
//! Output 0: segments to go on, annotated with the bytes they newly
//! acknowledge, an RTT sample (from the timestamps option, RFC 7323 §4.1)
//! and the duplicate-ACK flag (RFC 5681 §2); output 1: the ACK answering
//! an ACK of something not yet sent, or the RST answering a bad ACK in
//! SYN-RECEIVED. Handlers: `established` (handshakes completed),
//! `acked_bytes`, `dup_acks`, `drops`.

use super::{info, reset_for, ts_now, turn_into_ack, Info, Seg};
use crate::anno::{self, TcpFlags as Anno};
use crate::tcp::newreno::AckAction;
use crate::tcp::output::write_segment;
use crate::tcp::tcb::{Tcb, TcpState};
use crate::wire::{TcpFlags, TcpOptions};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct ProcessAck {
    info: Option<Info>,
    bad_acks: u64,
    established: u64,
    acked_bytes: u64,
    dup_acks: u64,
    drops: u64,
}

impl Element for ProcessAck {
    fn class_name(&self) -> &'static str {
        "TCPProcessAck"
    }
    fn port_count(&self) -> &'static str {
        "1/2"
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
        let n = ctx.noutputs();
        let outs = {
            let mut info = info.borrow_mut();
            let info = &mut *info;
            super::split_packets(batch, n, |mut p| {
                let (Some(r), Some(seg)) = (anno::tcb(&p), Seg::read(&p)) else {
                    self.drops += 1;
                    return None;
                };
                // "if the ACK bit is off, drop the segment and return".
                let Some(ack) = seg.ack else {
                    self.drops += 1;
                    return None;
                };
                let options = seg.options(&p);
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    self.drops += 1;
                    return None;
                };
                let mut flags = anno::tcp_flags(&p);
                if tcb.state == TcpState::SynReceived {
                    // "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED
                    // state ... Otherwise, form a reset segment".
                    if !(tcb.snd_una < ack && ack <= tcb.snd_nxt) {
                        return write_segment(&mut p, &seg.key, &reset_for(&seg), &[]).then_some((1, p));
                    }
                    record_ts_recent(tcb, &seg, &options);
                    tcb.state = TcpState::Established;
                    tcb.snd_una = ack;
                    // The SYN-ACK is acknowledged: its timer stops.
                    tcb.rto_deadline = None;
                    tcb.rtt.after_syn_timeout();
                    tcb.snd_wnd = (seg.window as u32) << tcb.snd_wscale;
                    tcb.max_snd_wnd = tcb.max_snd_wnd.max(tcb.snd_wnd);
                    tcb.snd_wl1 = seg.seq;
                    tcb.snd_wl2 = ack;
                    self.established += 1;
                    info.counters.passive_opens += 1;
                    if let Some(l) = tcb.listener.and_then(|at| info.listeners.get_mut(&at)) {
                        l.half_open = l.half_open.saturating_sub(1);
                        l.accept_queue.push_back(r);
                        l.accept_event.notify_all();
                    }
                    anno::set_tcp_flags(&mut p, flags);
                    return Some((0, p));
                }
                // "If the ACK acks something not yet sent (SEG.ACK > SND.NXT)
                // then send an ACK, drop the segment, and return." Sent
                // means up to SND.MAX: after a timeout SND.NXT went back to
                // SND.UNA, and an ACK for data sent before it is good (it
                // moves SND.NXT on).
                // RFC 5961 §5.2: an ACK too far below SND.UNA (more than
                // the largest window the peer offered) is not from the peer
                // either: the same answer.
                if ack > tcb.snd_max() || ack < tcb.snd_una - tcb.max_snd_wnd.max(tcb.snd_wnd).max(1) as usize {
                    self.bad_acks += 1;
                    return turn_into_ack(&mut p, tcb, now).then_some((1, p));
                }
                record_ts_recent(tcb, &seg, &options);
                if ack > tcb.snd_nxt {
                    tcb.snd_nxt = ack;
                }
                let una = tcb.snd_una;
                let mut acked = 0usize;
                let (mut restart_rto, mut want_output) = (false, false);
                if una < ack {
                    acked = (ack - una) as usize;
                    // Our FIN takes the last sequence number, not a byte: an
                    // ACK past the data acknowledges it (also when SND.NXT
                    // went back before it after a timeout).
                    let bytes = acked.min(tcb.send_buffer.len());
                    if acked > tcb.send_buffer.len() && tcb.fin_queued {
                        tcb.fin_sent = true;
                    }
                    tcb.send_buffer.consume(bytes);
                    tcb.snd_una = ack;
                    self.acked_bytes += acked as u64;
                    // RFC 7323 §4.1: the echoed timestamp gives the RTT of
                    // whichever transmission is acknowledged (Karn's problem
                    // does not arise).
                    if let (true, Some((_, tsecr))) = (tcb.timestamps, options.timestamps) {
                        if tsecr != 0 {
                            let ms = ts_now(now).wrapping_sub(tsecr);
                            if (ms as i32) >= 0 {
                                anno::set_rtt_sample_us(&mut p, Some(ms.saturating_mul(1000)));
                            }
                        }
                    }
                } else if ack == una
                    && seg.payload_len == 0
                    && !seg.has(TcpFlags::SYN)
                    && !seg.has(TcpFlags::FIN)
                    && (seg.window as u32) << tcb.snd_wscale == tcb.snd_wnd
                    && tcb.flight_size() > 0
                {
                    // RFC 5681 §2: a duplicate acknowledgment.
                    self.dup_acks += 1;
                    flags.0 |= Anno::DUP_ACK;
                }
                anno::set_acked_bytes(&mut p, acked as u32);
                if acked > 0 {
                    tcb.writable.notify_all();
                    // RFC 6298 §5.2: all acknowledged, the timer stops; §5.3:
                    // new data acknowledged, it restarts.
                    if tcb.flight_size() == 0 {
                        tcb.rto_deadline = None;
                    } else {
                        restart_rto = true;
                    }
                    want_output = tcb.unsent() > 0 || (tcb.fin_queued && !tcb.fin_sent);
                }
                // "If SND.UNA =< SEG.ACK =< SND.NXT, the send window should be
                // updated ... if (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and
                // SND.WL2 =< SEG.ACK))".
                if una <= ack && (tcb.snd_wl1 < seg.seq || (tcb.snd_wl1 == seg.seq && tcb.snd_wl2 <= ack)) {
                    // The window's right edge before the update (SND.UNA
                    // has moved to SEG.ACK already).
                    let old_edge = una + tcb.snd_wnd as usize;
                    let was_closed = tcb.snd_wnd == 0;
                    tcb.snd_wnd = (seg.window as u32) << tcb.snd_wscale;
                    tcb.max_snd_wnd = tcb.max_snd_wnd.max(tcb.snd_wnd);
                    tcb.snd_wl1 = seg.seq;
                    tcb.snd_wl2 = ack;
                    // The window opened: no more probes; send what waits.
                    // A window update that acknowledges nothing new moves
                    // the right edge too (RFC 9293 §3.8.6.2.1: the usable
                    // window grew): the data it lets go goes now, not when
                    // the RTO fires.
                    // (A persist timer armed for data that silly window
                    // avoidance holds back runs on: if the window stays
                    // small, its override timeout sends.)
                    if tcb.snd_wnd > 0 {
                        if was_closed {
                            tcb.persist_deadline = None;
                            tcb.persist_probes = 0;
                        }
                        want_output |= ack + tcb.snd_wnd as usize > old_edge && tcb.unsent() > 0;
                    }
                }
                if acked > 0 {
                    tcb.unacked_since = (tcb.flight_size() > 0).then_some(now);
                }
                match tcb.state {
                    TcpState::FinWait1 if tcb.fin_acked() => tcb.state = TcpState::FinWait2,
                    TcpState::Closing => {
                        if !tcb.fin_acked() {
                            self.drops += 1;
                            return None;
                        }
                        tcb.state = TcpState::TimeWait;
                        info.arm_time_wait(r, now);
                    }
                    TcpState::LastAck if tcb.fin_acked() => {
                        // "delete the TCB, enter the CLOSED state, and return".
                        super::rst_syn::abort(info, r, None);
                        return None;
                    }
                    _ => {}
                }
                if restart_rto {
                    info.arm_rto(r, now);
                }
                if want_output {
                    info.want_output(r);
                }
                anno::set_tcp_flags(&mut p, flags);
                Some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(established, bad_acks, acked_bytes, dup_acks, drops);
}

/// RFC 7323 §4.3 (2): TS.Recent follows the peer's TSval when the segment
/// starts at or before what we last acknowledged (SEG.SEQ =< Last.ACK.sent:
/// RCV.NXT, which the segment's data has not moved yet) and its TSval is
/// not older. Called only for a segment the ACK check took: §5.3 R3
/// records TS.Recent for an accepted segment, and one dropped because its
/// ACK is of something not sent (RFC 9293 §3.10.7.4 "fifth") or too old
/// (RFC 5961 §5.2) must not move it, or one forged segment would make
/// PAWS drop every genuine one after it.
fn record_ts_recent(tcb: &mut Tcb, seg: &Seg, options: &TcpOptions) {
    if let (true, Some((tsval, _))) = (tcb.timestamps, options.timestamps) {
        if seg.seq <= tcb.rcv_nxt && (tsval.wrapping_sub(tcb.ts_recent) as i32) >= 0 {
            tcb.ts_recent = tsval;
        }
    }
}

/// TCPEstimateRTT: feeds the RTT sample annotation into the connection's
/// RTO estimator (RFC 6298 §2). Handlers: `samples`.
#[derive(Default)]
pub struct EstimateRtt {
    info: Option<Info>,
    samples: u64,
}

impl Element for EstimateRtt {
    fn class_name(&self) -> &'static str {
        "TCPEstimateRTT"
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
        if let Some(info) = &self.info {
            let mut info = info.borrow_mut();
            for p in batch.iter() {
                if let (Some(r), Some(us)) = (anno::tcb(p), anno::rtt_sample_us(p)) {
                    if let Some(tcb) = info.tcbs.get_mut(r) {
                        tcb.rtt.sample(us as u64);
                        self.samples += 1;
                    }
                }
            }
        }
        ctx.forward(0, batch);
    }
    counter_handlers!(samples);
}

/// TCPNewRenoAck: the acked-bytes annotation and duplicate ACKs into the
/// connection's congestion control (RFC 5681 §3, RFC 6582 §3.2), by the
/// rule of its variant (NewReno's unless the settings or another element
/// chose CUBIC or DCTCP). A retransmission the loss recovery asks for
/// (fast retransmit, a partial ACK) is made by the outgoing path: the
/// first unacknowledged segment again. For a connection whose loss
/// recovery TCPSackRecovery runs (RFC 6675, `Tcb::sack.active`), only
/// the window grows here. Handlers: `retransmits`, `recoveries`
/// (NewReno's).
#[derive(Default)]
pub struct NewRenoAck {
    info: Option<Info>,
    counts: AckCounts,
}

/// TCPCubicAck: TCPNewRenoAck's place in the path, for CUBIC (RFC 9438):
/// a connection still on NewReno is switched to CUBIC (window and
/// recovery kept), then the ACK goes through the same loss recovery with
/// CUBIC's window rule. Handlers: `retransmits`, `recoveries`.
#[derive(Default)]
pub struct CubicAck {
    info: Option<Info>,
    counts: AckCounts,
}

/// What the congestion-control ACK elements count.
#[derive(Default)]
struct AckCounts {
    retransmits: u64,
    recoveries: u64,
}

impl AckCounts {
    const HANDLERS: &'static [(&'static str, bool, bool)] =
        &[("retransmits", true, false), ("recoveries", true, false)];

    fn read(&self, name: &str) -> Option<String> {
        super::counter_handler(
            name,
            &[("retransmits", self.retransmits), ("recoveries", self.recoveries)],
        )
    }
}

/// The loss recovery every congestion control shares: each packet's
/// acked bytes or duplicate-ACK flag into the connection's state, and
/// the retransmission it asks for (with the RTO restarted when it says
/// so). `prepare` runs first on each connection's state (TCPCubicAck
/// switches it to CUBIC there).
fn feed_acks(
    info: &Info,
    batch: &PacketBatch,
    now: u64,
    counts: &mut AckCounts,
    prepare: impl Fn(&mut crate::tcp::cc::CongestionControl),
) {
    let mut info = info.borrow_mut();
    for p in batch.iter() {
        let Some(r) = anno::tcb(p) else { continue };
        let Some(tcb) = info.tcbs.get_mut(r) else {
            continue;
        };
        prepare(&mut tcb.cc);
        let acked = anno::acked_bytes(p);
        let flight = tcb.flight_size();
        let srtt = tcb.rtt.srtt_us().unwrap_or(0);
        let mut inflated = false;
        let action = if tcb.sack.active {
            // TCPSackRecovery runs RFC 6675's loss recovery for this
            // connection: here the window only grows.
            if acked > 0 {
                tcb.cc.on_sack_ack(acked, now, srtt);
            }
            AckAction::None
        } else if acked > 0 {
            tcb.cc.on_new_ack(tcb.snd_una.0, acked, flight, now, srtt)
        } else if anno::tcp_flags(p).has(Anno::DUP_ACK) {
            let was = tcb.cc.in_recovery();
            let high = (tcb.snd_nxt - 1usize).0;
            let action = tcb.cc.on_dup_ack(tcb.snd_una.0, flight, high, now, srtt);
            counts.recoveries += (!was && tcb.cc.in_recovery()) as u64;
            // RFC 5681 §3.2 steps 4-5: a further duplicate inflated cwnd,
            // which may let new data go.
            inflated = was && tcb.unsent() > 0;
            action
        } else {
            AckAction::None
        };
        if let AckAction::Retransmit { restart_timer } = action {
            counts.retransmits += 1;
            tcb.retransmit_first = true;
            if restart_timer {
                info.arm_rto(r, now);
            }
            info.want_output(r);
        } else if inflated {
            info.want_output(r);
        }
    }
}

impl Element for NewRenoAck {
    fn class_name(&self) -> &'static str {
        "TCPNewRenoAck"
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
        if let Some(info) = &self.info {
            feed_acks(info, batch, ctx.now_us(), &mut self.counts, |_| {});
        }
        ctx.forward(0, batch);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        AckCounts::HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.counts.read(name)
    }
}

impl Element for CubicAck {
    fn class_name(&self) -> &'static str {
        "TCPCubicAck"
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
        if let Some(info) = &self.info {
            feed_acks(info, batch, ctx.now_us(), &mut self.counts, |cc| cc.make_cubic());
        }
        ctx.forward(0, batch);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        AckCounts::HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.counts.read(name)
    }
}
