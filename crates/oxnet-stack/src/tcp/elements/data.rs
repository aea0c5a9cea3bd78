//! TCPProcessData, TCPProcessFin and TCPAckRequired: RFC 9293
//! §3.10.7.4's seventh and eighth steps, and the acknowledgment they ask
//! for.
//!
//! TCPProcessData: in ESTABLISHED, FIN-WAIT-1 and FIN-WAIT-2, data that
//! starts at RCV.NXT goes to the connection's receive queue: the received
//! packet itself, its headers stripped (no copy). Since that packet is
//! the application's now, a small packet from the router's pool carries
//! the TCB annotation and the flags on (it becomes the ACK). Data out of
//! order is not kept (a reordering queue comes with TCPReordering): it is
//! counted and acknowledged at once, a duplicate ACK that lets the peer
//! retransmit quickly. It marks a FIN that comes in sequence for
//! TCPProcessFin. Handlers: `delivered_bytes`, `out_of_order`,
//! `no_buffers` (no packet for the ACK: it goes with the next segment),
//! `drops`.
//!
//! TCPProcessFin: the FIN flag of the annotation: RCV.NXT passes the FIN,
//! the reader will see the end, and the state moves (ESTABLISHED to
//! CLOSE-WAIT, FIN-WAIT-1 to CLOSING or TIME-WAIT, FIN-WAIT-2 to
//! TIME-WAIT). Handlers: `fins`.
//!
//! TCPAckRequired: a packet whose annotation asks for an ACK becomes that
//! ACK (output 0, an IP packet for the resolver); the others are freed.
//! An ACK for in-order data alone is delayed (RFC 1122 §4.2.3.2): until a
//! second segment arrives, data of ours carries it, or the delay
//! (TCPInfo's `delayed_ack_us`, 40 ms) ends and TCPTimers sends it.
//! Handlers: `acks`, `delayed`.

use super::{info, turn_into_ack, Info, Seg};
use crate::anno::{self, TcpFlags as Anno};
use crate::tcp::tcb::TcpState;
use crate::wire::TcpFlags;
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

/// Segments of at most this many bytes are copied onto the previous one.
pub const COALESCE_MAX: usize = 512;

#[derive(Default)]
pub struct ProcessData {
    info: Option<Info>,
    coalesced: u64,
    delivered_bytes: u64,
    out_of_order: u64,
    no_buffers: u64,
    drops: u64,
}

impl Element for ProcessData {
    fn class_name(&self) -> &'static str {
        "TCPProcessData"
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
        let pool = ctx.pool();
        let outs = {
            let mut info = info.borrow_mut();
            super::split_packets(batch, n, |mut p| {
                let Some(r) = anno::tcb(&p) else {
                    self.drops += 1;
                    return None;
                };
                let Some(mut seg) = Seg::read(&p) else {
                    // A control packet (TCPReordering's duplicate ACK): on.
                    return Some((0, p));
                };
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    self.drops += 1;
                    return None;
                };
                // A segment TCPReordering released may overlap what the one
                // before it delivered: its new part only.
                if seg.seq < tcb.rcv_nxt {
                    let old = (tcb.rcv_nxt - seg.seq) as usize;
                    if old >= seg.payload_len + seg.has(TcpFlags::FIN) as usize {
                        return None;
                    }
                    if super::check::trim(&mut p, &seg, old, 0).is_none() {
                        self.drops += 1;
                        return None;
                    }
                    seg = Seg::read(&p)?;
                }
                let mut flags = anno::tcp_flags(&p);
                let in_sequence = seg.seq == tcb.rcv_nxt;
                let accepts_text = matches!(
                    tcb.state,
                    TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2
                );
                if seg.payload_len > 0 && !in_sequence {
                    self.out_of_order += 1;
                    flags.0 |= Anno::ACK_NEEDED | Anno::OUT_OF_ORDER;
                    anno::set_tcp_flags(&mut p, flags);
                    return Some((0, p));
                }
                if in_sequence && seg.has(TcpFlags::FIN) {
                    flags.0 |= Anno::FIN;
                }
                if seg.payload_len == 0 || !accepts_text {
                    // "This should not occur, since a FIN has been received
                    // from the remote side. Ignore the segment text."
                    anno::set_tcp_flags(&mut p, flags);
                    return Some((0, p));
                }
                tcb.rcv_nxt += seg.payload_len;
                flags.0 |= Anno::NEW_DATA | Anno::ACK_NEEDED;
                self.delivered_bytes += seg.payload_len as u64;
                let control = pool.alloc().ok();
                if p.strip_front(seg.tcp_at + seg.header_len).is_err() {
                    self.drops += 1;
                    return None;
                }
                // A coalesced segment (RSC, TCPGRO) goes to the queue as
                // its buffers, each a packet of its own, without a copy.
                let rest = if p.is_chained() {
                    crate::tcp::chain::unchain(&mut p)
                } else {
                    Vec::new()
                };
                for buffer in &rest {
                    tcb.recv_queued += buffer.len();
                }
                let n = p.len();
                tcb.recv_queued += n;
                // A small segment's bytes join the last one's buffer when
                // they fit (as Linux's tcp_try_coalesce): a flood of tiny
                // segments then holds buffers in proportion to its bytes,
                // not to its count (the window bounds bytes only); larger
                // segments are queued as they came, without a copy.
                let merged = match tcb.recv_queue.back_mut() {
                    Some(last)
                        if n <= COALESCE_MAX
                            && !last.is_chained()
                            && !last.is_attached()
                            && last.len() + n <= last.capacity() =>
                    {
                        let at = last.len();
                        last.set_len(at + n).is_ok() && {
                            last[at..].copy_from_slice(&p);
                            true
                        }
                    }
                    _ => false,
                };
                if merged {
                    self.coalesced += 1;
                } else if n > 0 {
                    tcb.recv_queue.push_back(p);
                }
                tcb.recv_queue.extend(rest.into_iter().filter(|b| !b.is_empty()));
                tcb.readable.notify_all();
                let Some(mut control) = control else {
                    self.no_buffers += 1;
                    return None;
                };
                anno::set_tcb(&mut control, Some(r));
                anno::set_tcp_flags(&mut control, flags);
                Some((0, control))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(delivered_bytes, coalesced, out_of_order, no_buffers, drops);
}

#[derive(Default)]
pub struct ProcessFin {
    info: Option<Info>,
    fins: u64,
}

impl Element for ProcessFin {
    fn class_name(&self) -> &'static str {
        "TCPProcessFin"
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
        let now = ctx.now_us();
        if let Some(info) = &self.info {
            let mut info = info.borrow_mut();
            for p in batch.iter_mut() {
                let mut flags = anno::tcp_flags(p);
                if !flags.has(Anno::FIN) {
                    continue;
                }
                let Some(r) = anno::tcb(p) else { continue };
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    continue;
                };
                // "advance RCV.NXT over the FIN ... and return an ACK".
                tcb.rcv_nxt += 1;
                tcb.fin_received = true;
                flags.0 |= Anno::ACK_NEEDED;
                anno::set_tcp_flags(p, flags);
                self.fins += 1;
                tcb.readable.notify_all();
                tcb.state = match tcb.state {
                    TcpState::SynReceived | TcpState::Established => TcpState::CloseWait,
                    TcpState::FinWait1 if tcb.fin_acked() => TcpState::TimeWait,
                    TcpState::FinWait1 => TcpState::Closing,
                    TcpState::FinWait2 | TcpState::TimeWait => TcpState::TimeWait,
                    other => other,
                };
                // "Start the time-wait timer" (restart it for a FIN again).
                if tcb.state == TcpState::TimeWait {
                    info.arm_time_wait(r, now);
                }
            }
        }
        ctx.forward(0, batch);
    }
    counter_handlers!(fins);
}

#[derive(Default)]
pub struct AckRequired {
    info: Option<Info>,
    acks: u64,
    delayed: u64,
}

impl Element for AckRequired {
    fn class_name(&self) -> &'static str {
        "TCPAckRequired"
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
            let delay = info.settings.delayed_ack_us;
            // One ACK per connection and batch: the segments before it in
            // the path were all processed, so it acknowledges them all.
            let mut acked: Vec<anno::TcbRef> = Vec::new();
            super::split_packets(batch, n, |mut p| {
                let flags = anno::tcp_flags(&p);
                if !flags.has(Anno::ACK_NEEDED) {
                    return None;
                }
                let r = anno::tcb(&p)?;
                if acked.contains(&r) && !flags.has(Anno::OUT_OF_ORDER) {
                    return None;
                }
                let tcb = info.tcbs.get_mut(r)?;
                // RFC 1122 §4.2.3.2 / RFC 9293 §3.8.6.3: new data in order
                // may wait for a second full segment (then at once) or the
                // delay; a FIN, a filled gap or anything else is answered
                // now (RFC 5681 §4.2).
                let only_data = flags.0 & !(Anno::NEW_DATA | Anno::ACK_NEEDED) == 0 && flags.has(Anno::NEW_DATA);
                if let (true, Some(delay)) = (only_data, delay) {
                    tcb.unacked_segments += 1;
                    if tcb.unacked_segments < 2 {
                        self.delayed += 1;
                        info.arm_delayed_ack(r, now, delay);
                        return None;
                    }
                }
                tcb.ack_sent();
                acked.push(r);
                self.acks += 1;
                let tcb = info.tcbs.get(r)?;
                turn_into_ack(&mut p, tcb, now).then_some((0, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(acks, delayed);
}
