//! TCPStateDemux and TCPSynSent: the active open's side of the incoming
//! path. A connection in SYN-SENT has no receive sequence yet, so its
//! segments skip the sequence checks and are handled by RFC 9293
//! §3.10.7.3 ("If the state is SYN-SENT") alone.
//!
//! TCPStateDemux: output 0 segments of connections in SYN-SENT, output 1
//! the others (to TCPCheckSeqNo).
//!
//! TCPSynSent: output 0 the answer: the handshake's ACK (ESTABLISHED),
//! a SYN-ACK (simultaneous open, SYN-RECEIVED), or a RST for a bad ACK.
//! Handlers: `established`, `refused` (a RST ended the attempt),
//! `simultaneous`, `drops`.

use super::{info, ts_now, turn_into_ack, Info, Seg};
use crate::anno;
use crate::tcp::output::write_segment;
use crate::tcp::tcb::TcpState;
use crate::wire::{TcpFlags, TcpOptions, TcpRepr};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct StateDemux {
    info: Option<Info>,
}

impl Element for StateDemux {
    fn class_name(&self) -> &'static str {
        "TCPStateDemux"
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
        let n = ctx.noutputs();
        let outs = {
            let info = info.borrow();
            super::split_packets(batch, n, |p| {
                let syn_sent = anno::tcb(&p)
                    .and_then(|r| info.tcbs.get(r))
                    .is_some_and(|t| t.state == TcpState::SynSent);
                Some((if syn_sent { 0 } else { 1 }, p))
            })
        };
        super::push_all(ctx, outs);
    }
}

#[derive(Default)]
pub struct SynSent {
    info: Option<Info>,
    established: u64,
    refused: u64,
    simultaneous: u64,
    drops: u64,
}

impl Element for SynSent {
    fn class_name(&self) -> &'static str {
        "TCPSynSent"
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
        let n = ctx.noutputs();
        let outs = {
            let mut info = info.borrow_mut();
            let info = &mut *info;
            super::split_packets(batch, n, |mut p| {
                let (Some(r), Some(seg)) = (anno::tcb(&p), Seg::read(&p)) else {
                    self.drops += 1;
                    return None;
                };
                let theirs = seg.options(&p);
                let settings = info.settings;
                let our_mss = info.our_mss(&seg.key);
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    self.drops += 1;
                    return None;
                };
                // First, the ACK: it must cover our SYN and nothing more.
                let ack_ok = match seg.ack {
                    Some(ack) if ack <= tcb.iss || ack > tcb.snd_nxt => {
                        if seg.has(TcpFlags::RST) {
                            self.drops += 1;
                            return None;
                        }
                        return write_segment(&mut p, &seg.key, &super::reset_for(&seg), &[]).then_some((0, p));
                    }
                    Some(_) => true,
                    None => false,
                };
                // Second, the RST: with an acceptable ACK it refuses the
                // connection; without one it is dropped (RFC 5961 §3.2).
                if seg.has(TcpFlags::RST) {
                    if ack_ok {
                        self.refused += 1;
                        super::rst_syn::abort(info, r, Some(libc::ECONNREFUSED));
                    } else {
                        self.drops += 1;
                    }
                    return None;
                }
                // Fourth, the SYN.
                if !seg.has(TcpFlags::SYN) {
                    self.drops += 1;
                    return None;
                }
                tcb.irs = seg.seq;
                tcb.rcv_nxt = seg.seq + 1;
                tcb.snd_wnd = seg.window as u32;
                tcb.snd_wl1 = seg.seq;
                if let Some(mss) = theirs.mss {
                    tcb.snd_mss = mss.min(our_mss).max(64);
                }
                // RFC 7323 §2.2 / §3.2, RFC 2018 §2: what both offered.
                match (theirs.window_scale, settings.window_scale) {
                    (Some(shift), Some(ours)) => {
                        tcb.snd_wscale = shift;
                        tcb.rcv_wscale = ours;
                    }
                    _ => {
                        tcb.snd_wscale = 0;
                        tcb.rcv_wscale = 0;
                    }
                }
                tcb.sack_permitted = theirs.sack_permitted && settings.sack;
                tcb.timestamps = theirs.timestamps.is_some() && settings.timestamps;
                if let Some((tsval, _)) = theirs.timestamps {
                    tcb.ts_recent = tsval;
                }
                tcb.cc = crate::tcp::cc::CongestionControl::new(
                    settings.congestion,
                    tcb.segment_size(),
                    tcb.iss.0,
                    settings.tcb.initial_window,
                );
                // RFC 3168 §6.1.1: our SYN asked (ECE+CWR), an ECN-setup
                // SYN-ACK has ECE without CWR. (A simultaneous open keeps
                // ECN off.)
                tcb.ecn.enabled =
                    settings.ecn && seg.ack.is_some() && seg.has(TcpFlags::ECE) && !seg.has(TcpFlags::CWR);
                if let Some(ack) = seg.ack {
                    // "If SND.UNA > ISS (our SYN has been ACKed), change the
                    // connection state to ESTABLISHED, form an ACK segment".
                    tcb.snd_una = ack;
                    tcb.snd_wl2 = ack;
                    tcb.state = TcpState::Established;
                    tcb.rto_deadline = None;
                    tcb.rtt.after_syn_timeout();
                    tcb.writable.notify_all();
                    self.established += 1;
                    info.counters.active_opens += 1;
                    let tcb = info.tcbs.get(r).expect("just updated");
                    return turn_into_ack(&mut p, tcb, now).then_some((0, p));
                }
                // "Otherwise, enter SYN-RECEIVED, form a SYN,ACK segment"
                // (simultaneous open).
                tcb.state = TcpState::SynReceived;
                self.simultaneous += 1;
                let mut options = TcpOptions {
                    mss: Some(our_mss),
                    sack_permitted: tcb.sack_permitted,
                    ..TcpOptions::default()
                };
                if tcb.rcv_wscale != 0 || tcb.snd_wscale != 0 {
                    options.window_scale = Some(tcb.rcv_wscale);
                }
                if tcb.timestamps {
                    options.timestamps = Some((ts_now(now), tcb.ts_recent));
                }
                let syn_ack = TcpRepr {
                    src_port: tcb.key.local.port,
                    dst_port: tcb.key.remote.port,
                    seq: tcb.iss,
                    ack: Some(tcb.rcv_nxt),
                    flags: TcpFlags::SYN,
                    window: tcb.rcv_wnd.min(u16::MAX as u32) as u16,
                    urgent: 0,
                    options,
                    payload_len: 0,
                };
                let key = tcb.key;
                write_segment(&mut p, &key, &syn_ack, &[]).then_some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(established, refused, simultaneous, drops);
}
