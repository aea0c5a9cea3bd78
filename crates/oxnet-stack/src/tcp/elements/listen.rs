//! TCPListen: segments for which there is no TCB (RFC 9293 §3.10.7.1
//! "If the state is CLOSED" and §3.10.7.2 "If the state is LISTEN").
//!
//! - To a listening endpoint: a SYN (and no ACK, no RST) makes a TCB in
//!   SYN-RECEIVED, with the options both sides offered, and is turned into
//!   the SYN-ACK; an ACK gets a RST; anything else is dropped.
//! - To no listener: a RST is dropped, anything else gets a RST.
//!
//! - When the listener has `syn_backlog` connections half-open (or its
//!   listen backlog, if smaller: 0 means every SYN), a SYN is
//!   answered with a SYN cookie instead (RFC 4987 §3.6, `tcp::cookie`):
//!   no TCB until the ACK returns a good cookie, which makes the
//!   connection ESTABLISHED at once (without window scaling, SACK or
//!   timestamps: the cookie does not keep them).
//!
//! Input: segments from TCPFlowLookup's output 1. Output 0: the answers
//! (SYN-ACK or RST, IP packets for the neighbour resolver); output 1: the
//! ACK that completed a cookie's handshake, TCB annotated, for the rest
//! of the incoming path (it may carry data).
//! Handlers: `syns` (TCBs made), `resets` (RSTs sent), `overflows` (SYNs
//! dropped because the listener's queues are full), `drops`, `existing`
//! (segments whose TCB an earlier segment of the same batch made: sent
//! on to it through output 1).

use super::{info, reset_for, ts_now, Info, Seg};
use crate::anno;
use crate::tcp::cc::CongestionControl;
use crate::tcp::cookie;
use crate::tcp::isn::initial_sequence_number;
use crate::tcp::output::write_segment;
use crate::tcp::tcb::{Tcb, TcpState};
use crate::wire::{TcpFlags, TcpOptions, TcpRepr};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct Listen {
    info: Option<Info>,
    cookies_sent: u64,
    cookies_accepted: u64,
    syns: u64,
    resets: u64,
    overflows: u64,
    drops: u64,
    existing: u64,
}

impl Element for Listen {
    fn class_name(&self) -> &'static str {
        "TCPListen"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
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
            super::split_packets(batch, n, |mut p| {
                let Some(seg) = Seg::read(&p) else {
                    self.drops += 1;
                    return None;
                };
                // TCPFlowLookup looked the whole batch up before any of it
                // came here, so a segment behind the one that made its TCB
                // (a cookie's ACK and the request right after it, a SYN
                // and its retransmission) arrives without one: it belongs
                // to that connection, not to a second one.
                if let Some(r) = info.lookup(&seg.key) {
                    self.existing += 1;
                    anno::set_tcb(&mut p, Some(r));
                    return Some((1, p));
                }
                // §3.10.7.1: "An incoming segment containing a RST is discarded."
                if seg.has(TcpFlags::RST) {
                    self.drops += 1;
                    return None;
                }
                let Some(listener_at) = info.listener_for(&seg.key.local) else {
                    // CLOSED: "any other incoming segment ... causes a RST".
                    self.resets += 1;
                    info.counters.resets_sent += 1;
                    return write_segment(&mut p, &seg.key, &reset_for(&seg), &[]).then_some((0, p));
                };
                // An ACK to a listener: the end of a handshake answered with
                // a SYN cookie (RFC 4987 §3.6), or else a RST (§3.10.7.2).
                if let (Some(ack), false, true) = (seg.ack, seg.has(TcpFlags::SYN), info.settings.syn_cookies) {
                    let cookie = (ack - 1usize).0;
                    if let Some(mss) = cookie::check(&info.secret, &seg.key, cookie, now) {
                        let l = info.listeners.get(&listener_at).expect("found above");
                        if l.accept_queue.len() >= l.backlog {
                            self.overflows += 1;
                            info.counters.listen_overflows += 1;
                            return None;
                        }
                        self.cookies_accepted += 1;
                        let settings = info.settings;
                        let iss = ack - 1usize;
                        let mut tcb = Tcb::new(seg.key, TcpState::Established, iss, &settings.tcb);
                        tcb.irs = seg.seq - 1usize;
                        tcb.rcv_nxt = seg.seq;
                        tcb.snd_una = ack;
                        tcb.snd_nxt = ack;
                        tcb.snd_wnd = seg.window as u32;
                        tcb.snd_wl1 = seg.seq;
                        tcb.snd_wl2 = ack;
                        tcb.snd_mss = mss.min(info.our_mss(&seg.key));
                        tcb.listener = Some(listener_at);
                        tcb.last_heard_us = now;
                        tcb.cc = CongestionControl::new(
                            settings.congestion,
                            tcb.segment_size(),
                            iss.0,
                            settings.tcb.initial_window,
                        );
                        let r = info.insert(tcb);
                        info.counters.passive_opens += 1;
                        let l = info.listeners.get_mut(&listener_at).expect("found above");
                        l.accept_queue.push_back(r);
                        l.accept_event.notify_all();
                        // The ACK may carry data: on through the path.
                        anno::set_tcb(&mut p, Some(r));
                        return Some((1, p));
                    }
                }
                if seg.ack.is_some() {
                    self.resets += 1;
                    info.counters.resets_sent += 1;
                    return write_segment(&mut p, &seg.key, &reset_for(&seg), &[]).then_some((0, p));
                }
                if !seg.has(TcpFlags::SYN) {
                    self.drops += 1;
                    return None;
                }
                let (backlog, cookies) = (info.settings.syn_backlog, info.settings.syn_cookies);
                let listener = info.listeners.get_mut(&listener_at).expect("found above");
                if listener.accept_queue.len() >= listener.backlog
                    || (!cookies && listener.half_open + listener.accept_queue.len() >= listener.backlog + backlog)
                {
                    self.overflows += 1;
                    info.counters.listen_overflows += 1;
                    return None;
                }
                let theirs = seg.options(&p);
                if cookies && listener.half_open >= backlog.min(listener.listen_backlog) {
                    // Too many half-open: answer statelessly (RFC 4987 §3.6).
                    self.cookies_sent += 1;
                    let our_mss = info.our_mss(&seg.key);
                    let mss = theirs.mss.unwrap_or(536).min(our_mss);
                    let iss = crate::wire::TcpSeqNumber(cookie::make(&info.secret, &seg.key, mss, now));
                    let syn_ack = TcpRepr {
                        src_port: seg.key.local.port,
                        dst_port: seg.key.remote.port,
                        seq: iss,
                        ack: Some(seg.seq + 1),
                        flags: TcpFlags::SYN,
                        window: info.settings.tcb.recv_buffer.min(u16::MAX as u32) as u16,
                        urgent: 0,
                        options: TcpOptions {
                            mss: Some(our_mss),
                            ..TcpOptions::default()
                        },
                        payload_len: 0,
                    };
                    return write_segment(&mut p, &seg.key, &syn_ack, &[]).then_some((0, p));
                }
                listener.half_open += 1;
                let settings = info.settings;
                let iss = crate::wire::TcpSeqNumber(initial_sequence_number(&info.secret, &seg.key, now));
                let mut tcb = Tcb::new(seg.key, TcpState::SynReceived, iss, &settings.tcb);
                // §3.10.7.2 third: RCV.NXT = SEG.SEQ + 1, IRS = SEG.SEQ,
                // SND.NXT = ISS + 1, SND.UNA = ISS.
                tcb.irs = seg.seq;
                tcb.rcv_nxt = seg.seq + 1;
                tcb.snd_nxt = iss + 1;
                tcb.snd_wnd = seg.window as u32;
                tcb.snd_wl1 = seg.seq;
                tcb.snd_wl2 = iss;
                tcb.listener = Some(listener_at);
                let our_mss = info.our_mss(&seg.key);
                // RFC 9293 §3.7.1: send no more than the peer's MSS, nor what
                // our own interface allows; 536 / 1220 without the option.
                if let Some(mss) = theirs.mss {
                    tcb.snd_mss = mss.min(our_mss).max(64);
                }
                // RFC 7323 §2.2: window scaling only if both sides offer it.
                let mut ours = TcpOptions {
                    mss: Some(our_mss),
                    ..TcpOptions::default()
                };
                if let (Some(shift), Some(our_shift)) = (theirs.window_scale, settings.window_scale) {
                    tcb.snd_wscale = shift;
                    tcb.rcv_wscale = our_shift;
                    ours.window_scale = Some(our_shift);
                }
                if theirs.sack_permitted && settings.sack {
                    tcb.sack_permitted = true;
                    ours.sack_permitted = true;
                }
                // RFC 7323 §3.2: timestamps only if the SYN had them.
                if let (Some((tsval, _)), true) = (theirs.timestamps, settings.timestamps) {
                    tcb.timestamps = true;
                    tcb.ts_recent = tsval;
                    ours.timestamps = Some((ts_now(now), tsval));
                }
                tcb.cc = CongestionControl::new(
                    settings.congestion,
                    tcb.segment_size(),
                    iss.0,
                    settings.tcb.initial_window,
                );
                // RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR; the
                // SYN-ACK agrees with ECE alone.
                tcb.ecn.enabled = settings.ecn && seg.has(TcpFlags::ECE) && seg.has(TcpFlags::CWR);
                let syn_ack = TcpRepr {
                    src_port: seg.key.local.port,
                    dst_port: seg.key.remote.port,
                    seq: iss,
                    ack: Some(tcb.rcv_nxt),
                    flags: if tcb.ecn.enabled {
                        TcpFlags::SYN | TcpFlags::ECE
                    } else {
                        TcpFlags::SYN
                    },
                    // RFC 7323 §2.2: the window of a SYN is never scaled.
                    window: tcb.rcv_wnd.min(u16::MAX as u32) as u16,
                    urgent: 0,
                    options: ours,
                    payload_len: 0,
                };
                let key = seg.key;
                let r = info.insert(tcb);
                // The SYN-ACK is retransmitted on the RTO (RFC 6298 §5.1).
                info.arm_rto(r, now);
                self.syns += 1;
                if !write_segment(&mut p, &key, &syn_ack, &[]) {
                    self.drops += 1;
                    return None;
                }
                anno::set_tcb(&mut p, Some(r));
                Some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(syns, cookies_sent, cookies_accepted, resets, overflows, drops, existing);
}
