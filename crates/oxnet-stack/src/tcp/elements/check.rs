//! TCPCheckSeqNo and ClickNF's TCPTrimPacket in one element: RFC 9293
//! §3.10.7.4 "first, check sequence number", with RFC 7323 §5's PAWS
//! before it and the trimming the RFC asks right after it ("segments with
//! higher beginning sequence numbers ... trimmed ... to the window").
//!
//! Input: segments with the TCB annotation (TCPFlowLookup's output 0).
//! Output 0: acceptable segments, trimmed to the window (SEG.SEQ =
//! RCV.NXT or later, nothing beyond RCV.NXT + RCV.WND); output 1: the ACK
//! answering an unacceptable segment (unless it had a RST, which is
//! dropped), or the SYN-ACK again for a retransmitted SYN in
//! SYN-RECEIVED. After trimming, the segment's checksum and IP length no
//! longer match its bytes: later elements do not read them.
//! Handlers: `unacceptable`, `paws_rejected`, `trimmed`, `drops`.

use super::{info, ts_now, turn_into_ack, Info, Seg};
use crate::anno;
use crate::tcp::output::write_segment;
use crate::tcp::tcb::{Tcb, TcpState};
use crate::wire::{TcpFlags, TcpOptions, TcpPacket, TcpRepr, TcpSeqNumber};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct CheckSeqNo {
    info: Option<Info>,
    unacceptable: u64,
    paws_rejected: u64,
    trimmed: u64,
    drops: u64,
}

/// The acceptability test of RFC 9293 §3.10.7.4 (its table of four
/// cases).
pub fn acceptable(tcb: &Tcb, seq: TcpSeqNumber, seg_len: usize) -> bool {
    let wnd = tcb.rcv_window() as usize;
    let nxt = tcb.rcv_nxt;
    let in_window = |s: TcpSeqNumber| nxt <= s && s < nxt + wnd;
    match (seg_len, wnd) {
        (0, 0) => seq == nxt,
        (0, _) => in_window(seq),
        (_, 0) => false,
        (len, _) => in_window(seq) || in_window(seq + (len - 1)),
    }
}

/// The SYN-ACK of a connection in SYN-RECEIVED, again.
pub(crate) fn syn_ack(tcb: &Tcb, now_us: u64, our_mss: u16) -> TcpRepr {
    let mut options = TcpOptions {
        mss: Some(our_mss),
        sack_permitted: tcb.sack_permitted,
        ..TcpOptions::default()
    };
    if tcb.snd_wscale != 0 || tcb.rcv_wscale != 0 {
        options.window_scale = Some(tcb.rcv_wscale);
    }
    if tcb.timestamps {
        options.timestamps = Some((ts_now(now_us), tcb.ts_recent));
    }
    TcpRepr {
        src_port: tcb.key.local.port,
        dst_port: tcb.key.remote.port,
        seq: tcb.iss,
        ack: Some(tcb.rcv_nxt),
        // RFC 3168 §6.1.1: ECE again if we agreed to ECN.
        flags: if tcb.ecn.enabled {
            TcpFlags::SYN | TcpFlags::ECE
        } else {
            TcpFlags::SYN
        },
        window: tcb.rcv_wnd.min(u16::MAX as u32) as u16,
        urgent: 0,
        options,
        payload_len: 0,
    }
}

/// Cuts `front` sequence numbers off the start of the segment (a SYN
/// first, then data) and `tail` bytes of data off its end (a FIN beyond
/// the window goes with them), rewriting its header: the headers move
/// forward over the cut data.
pub(crate) fn trim(p: &mut Packet, seg: &Seg, mut front: usize, tail: usize) -> Option<()> {
    let mut flags = seg.flags;
    let mut seq = seg.seq;
    if front > 0 && flags.contains(TcpFlags::SYN) {
        flags.remove(TcpFlags::SYN);
        seq += 1;
        front -= 1;
    }
    let cut = front.min(seg.payload_len);
    let keep = seg.payload_len - cut;
    if tail >= keep {
        flags.remove(TcpFlags::FIN);
    }
    let tail = tail.min(keep);
    if tail > 0 {
        flags.remove(TcpFlags::FIN);
    }
    let net = usize::try_from(p.network_offset()?).ok()?;
    if p.is_chained() {
        // A coalesced segment (RSC, TCPGRO): its payload runs over the
        // chain; the headers stay in the first buffer.
        crate::tcp::chain::trim_payload(p, seg.tcp_at + seg.header_len, cut, tail)?;
        p.set_network_header(net, seg.tcp_at - net).ok()?;
        seq += cut;
    } else {
        if tail > 0 {
            p.set_len(p.len() - tail).ok()?;
        }
        if cut > 0 {
            // Everything before the payload moves `cut` bytes on.
            let payload_at = seg.tcp_at + seg.header_len;
            p.copy_within(0..payload_at, cut);
            p.strip_front(cut).ok()?;
            p.set_network_header(net, seg.tcp_at - net).ok()?;
            seq += cut;
        }
    }
    let mut tcp = TcpPacket::new_unchecked(p.get_mut(seg.tcp_at..)?);
    tcp.set_seq_number(seq);
    let mut all = flags;
    if seg.ack.is_some() {
        all.insert(TcpFlags::ACK);
    }
    tcp.set_flags(all);
    Some(())
}

impl Element for CheckSeqNo {
    fn class_name(&self) -> &'static str {
        "TCPCheckSeqNo"
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
                let our_mss = info.our_mss(&seg.key);
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    self.drops += 1;
                    return None;
                };
                // A retransmitted SYN while we wait for the handshake's ACK: our
                // SYN-ACK was lost; send it again (as Linux does) instead of the
                // bare ACK the table below would give.
                if tcb.state == TcpState::SynReceived
                    && seg.has(TcpFlags::SYN)
                    && seg.ack.is_none()
                    && seg.seq == tcb.irs
                {
                    return write_segment(&mut p, &tcb.key, &syn_ack(tcb, now, our_mss), &[]).then_some((1, p));
                }
                // A simultaneous open (RFC 9293 §3.5, Figure 7 line 6): in
                // SYN-RECEIVED after our own SYN, the peer's SYN-ACK, at IRS and
                // acknowledging our SYN, completes the handshake. The table below
                // would find its SYN before RCV.NXT; without the SYN it is the
                // handshake's ACK (Linux accepts it the same way).
                if tcb.state == TcpState::SynReceived
                    && tcb.listener.is_none()
                    && seg.has(TcpFlags::SYN)
                    && seg.ack == Some(tcb.snd_nxt)
                    && seg.seq == tcb.irs
                {
                    self.trimmed += 1;
                    if trim(&mut p, &seg, 1, 0).is_none() {
                        self.drops += 1;
                        return None;
                    }
                    tcb.last_heard_us = now;
                    return Some((0, p));
                }
                let reject = |mut p: Packet, tcb: &Tcb| -> Option<(usize, Packet)> {
                    // "If an incoming segment is not acceptable, an
                    // acknowledgment should be sent in reply (unless the RST
                    // bit is set ...)".
                    if seg.has(TcpFlags::RST) {
                        return None;
                    }
                    turn_into_ack(&mut p, tcb, now).then_some((1, p))
                };
                // RFC 7323 §5.3 R1: PAWS, for a segment carrying timestamps on
                // a connection that uses them.
                let options = if tcb.timestamps { Some(seg.options(&p)) } else { None };
                if let Some((tsval, _)) = options.and_then(|o| o.timestamps) {
                    if !seg.has(TcpFlags::RST) && (tsval.wrapping_sub(tcb.ts_recent) as i32) < 0 {
                        self.paws_rejected += 1;
                        return reject(p, tcb);
                    }
                }
                let len = seg.len();
                if !acceptable(tcb, seg.seq, len) {
                    self.unacceptable += 1;
                    return reject(p, tcb);
                }
                // Heard from the peer: keepalive starts counting again.
                tcb.last_heard_us = now;
                tcb.keepalive_probes = 0;
                // TS.Recent is recorded later, once the ACK check took the
                // segment (TCPProcessAck, RFC 7323 §5.3 R3).
                // Trim to the window: what precedes RCV.NXT, what lies past
                // RCV.NXT + RCV.WND.
                let front = (tcb.rcv_nxt - seg.seq).max(0) as usize;
                let window_end = tcb.rcv_nxt + tcb.rcv_window() as usize;
                let data_end = seg.seq + (seg.has(TcpFlags::SYN) as usize + seg.payload_len);
                let tail = (data_end - window_end).max(0) as usize;
                if front > 0 || tail > 0 {
                    self.trimmed += 1;
                    if trim(&mut p, &seg, front, tail).is_none() {
                        self.drops += 1;
                        return None;
                    }
                }
                Some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(unacceptable, paws_rejected, trimmed, drops);
}
