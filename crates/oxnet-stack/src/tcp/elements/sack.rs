//! TCPSackRecovery and TCPSackRetransmit: the sender's SACK-based loss
//! recovery (RFC 6675 with RFC 2018's option; the state and the RFC's
//! steps are in [`crate::tcp::sack`] and [`crate::tcp::scoreboard`],
//! whose module doc says why the work is split this way).
//!
//! TCPSackRecovery: on the incoming path between TCPEstimateRTT and the
//! congestion control element. Input: segments TCPProcessAck passed on
//! (acked bytes and the duplicate-ACK flag annotated); output 0: the same
//! segments. For each connection with SACK permitted, from the first
//! SACK block its peer sends (before that, and for a peer that never
//! sends one, NewReno's recovery stays): its SACK blocks into the
//! scoreboard, RFC 6675's duplicate ACKs, entering recovery (the window
//! reduced by the connection's rule) and leaving it, and a request to the
//! outgoing path when something may go. Handlers: `connections` (taken
//! over from NewReno), `recoveries`, `dup_acks`, `new_sacked` (octets SACKed for the first
//! time), `dsacks`, `bad_blocks`, `stale_blocks`, `overflows` (ranges
//! dropped to keep the scoreboard bounded), `reneged`.
//!
//! TCPSackRetransmit: at the head of the outgoing path (TCPOutput ->
//! TCPSackRetransmit -> TCPNagle). Input: send requests; output 0 the
//! same requests, output 1 the retransmitted segments (IP packets, for
//! the neighbour resolver). For a connection in SACK recovery: step 4.3's
//! fast retransmit, then NextSeg's segments while cwnd - pipe >= 1 SMSS
//! (§5 step C; new data is left to TCPSegmentation, which TCPRateControl
//! lets out by pipe). After a timeout (§5.1): the data from SND.NXT up to
//! the last SACKed range, skipping SACKed data. Handlers: `retransmits`,
//! `rescues` (rule 4), `skipped_bytes` (SACKed data not sent again after
//! a timeout), `no_buffers`.

use super::{info, Info, Seg};
use crate::anno::{self, TcpFlags as Anno};
use crate::tcp::ecn::Codepoint;
use crate::tcp::info::TcpInfo;
use crate::tcp::output::write_segment_payload;
use crate::tcp::sack::{self, segment_size};
use crate::tcp::scoreboard::{segment_len, NextSeg, NextSegInput};
use crate::wire::{SackBlock, TcpFlags, TcpSeqNumber, MAX_SACK_BLOCKS};
use oxnet_driver::{Mempool, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

/// TCPSackRecovery: RFC 6675 §5 for each ACK of a connection with SACK
/// permitted (no arguments; ports 1/1; handlers in the module doc).
#[derive(Default)]
pub struct SackRecovery {
    info: Option<Info>,
    connections: u64,
    recoveries: u64,
    dup_acks: u64,
    new_sacked: u64,
    dsacks: u64,
    bad_blocks: u64,
    stale_blocks: u64,
    overflows: u64,
    reneged: u64,
}

impl Element for SackRecovery {
    fn class_name(&self) -> &'static str {
        "TCPSackRecovery"
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
            let now = ctx.now_us();
            let mut info = info.borrow_mut();
            for p in batch.iter() {
                let Some(r) = anno::tcb(p) else { continue };
                let Some(tcb) = info.tcbs.get_mut(r) else { continue };
                if !tcb.sack_permitted || !tcb.state.synchronized() {
                    continue;
                }
                let Some(seg) = Seg::read(p) else { continue };
                let Some(ack) = seg.ack else { continue };
                let options = seg.options(p);
                let mut blocks: [SackBlock; MAX_SACK_BLOCKS] = Default::default();
                let mut n = 0;
                for block in options.sack_blocks.iter().flatten() {
                    blocks[n] = *block;
                    n += 1;
                }
                if !tcb.sack.active {
                    // RFC 6675 works from SACK information: until the peer
                    // sends a block, NewReno's recovery (which needs none)
                    // stays in charge; the switch waits for a moment
                    // outside recovery.
                    if n == 0 || tcb.cc.in_recovery() {
                        continue;
                    }
                    tcb.sack.active = true;
                    self.connections += 1;
                }
                let dup = anno::tcp_flags(p).has(Anno::DUP_ACK);
                let srtt = tcb.rtt.srtt_us().unwrap_or(0);
                let o = sack::on_ack(tcb, ack, anno::acked_bytes(p), &blocks[..n], dup, now, srtt);
                self.recoveries += o.entered as u64;
                self.dup_acks += o.dup as u64;
                self.new_sacked += o.update.new_bytes as u64;
                self.dsacks += o.update.dsack as u64;
                self.bad_blocks += o.update.bad as u64;
                self.stale_blocks += o.update.stale as u64;
                self.overflows += o.update.dropped as u64;
                self.reneged += o.reneged as u64;
                if o.want_output {
                    info.want_output(r);
                }
            }
        }
        ctx.forward(0, batch);
    }
    counter_handlers!(
        connections,
        recoveries,
        dup_acks,
        new_sacked,
        dsacks,
        bad_blocks,
        stale_blocks,
        overflows,
        reneged
    );
}

/// TCPSackRetransmit: RFC 6675's retransmissions on the outgoing path
/// (no arguments; input send requests, output 0 the same requests, output
/// 1 the segments; handlers in the module doc).
#[derive(Default)]
pub struct SackRetransmit {
    info: Option<Info>,
    retransmits: u64,
    rescues: u64,
    skipped_bytes: u64,
    no_buffers: u64,
}

impl Element for SackRetransmit {
    fn class_name(&self) -> &'static str {
        "TCPSackRetransmit"
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
        let mut out = PacketBatch::with_capacity(batch.len());
        if let Some(info) = self.info.clone() {
            let now = ctx.now_us();
            let mut info = info.borrow_mut();
            for p in batch.iter() {
                if let Some(r) = anno::tcb(p) {
                    self.serve(&mut info, r, now, ctx.pool(), &mut out);
                }
            }
        }
        // Retransmissions first: they go before the new data the
        // requests bring out of TCPSegmentation.
        if !out.is_empty() {
            ctx.push(1, out);
        }
        ctx.forward(0, batch);
    }
    counter_handlers!(retransmits, rescues, skipped_bytes, no_buffers);
}

/// What [`SackRetransmit::send`] was asked for and how it went.
enum Sent {
    Yes,
    Nothing,
    NoBuffer,
}

impl SackRetransmit {
    /// Sends what RFC 6675 asks of one connection now.
    fn serve(&mut self, info: &mut TcpInfo, r: anno::TcbRef, now: u64, pool: &Mempool, out: &mut PacketBatch) {
        let Some(tcb) = info.tcbs.get_mut(r) else { return };
        if !tcb.sack.active || !tcb.state.synchronized() || tcb.send_rst {
            return;
        }
        let smss = segment_size(tcb);
        let una = tcb.snd_una;
        let mut sent_any = false;
        if std::mem::take(&mut tcb.sack.fast_retransmit) {
            // Step 4.3: the segment at HighACK + 1, whatever the window;
            // HighRxt and RescueRxt to its end.
            let hole_end = tcb.sack.board.next_range_after(una).map_or(tcb.snd_nxt, |(l, _)| l);
            let len = segment_len(una, hole_end, tcb.snd_nxt, tcb.fin_sent, smss);
            match self.send(pool, out, tcb, una, len, now) {
                Sent::Yes => {
                    self.retransmits += 1;
                    sent_any = true;
                    tcb.sack.high_rxt = una + len as usize;
                    tcb.sack.rescue_rxt = Some(una + len as usize);
                }
                Sent::NoBuffer => tcb.sack.fast_retransmit = true,
                Sent::Nothing => {}
            }
        }
        if tcb.cc.in_recovery() {
            // Step C: while cwnd - pipe >= 1 SMSS, NextSeg.
            let cwnd = tcb.cc.cwnd();
            let mut pipe = sack::in_flight(tcb);
            let mut new_data = sack::new_data_room(tcb);
            while cwnd.saturating_sub(pipe) >= smss {
                let at = NextSegInput {
                    una: tcb.snd_una,
                    snd_max: tcb.snd_nxt,
                    high_rxt: tcb.sack.high_rxt.max(tcb.snd_una),
                    rescue_rxt: tcb.sack.rescue_rxt,
                    new_data: new_data > 0,
                    smss,
                    fin: tcb.fin_sent,
                };
                let (seq, len, rescue) = match tcb.sack.board.next_seg(&at) {
                    None => break,
                    // Rule 2: TCPSegmentation sends it; count it here so
                    // that rules 3 and 4 only use what it leaves.
                    Some(NextSeg::NewData) => {
                        let take = new_data.min(smss);
                        new_data -= take;
                        pipe = pipe.saturating_add(take);
                        continue;
                    }
                    Some(NextSeg::Lost { seq, len }) | Some(NextSeg::Unsacked { seq, len }) => (seq, len, false),
                    Some(NextSeg::Rescue { seq, len }) => (seq, len, true),
                };
                match self.send(pool, out, tcb, seq, len, now) {
                    Sent::Yes => sent_any = true,
                    Sent::Nothing | Sent::NoBuffer => break,
                }
                pipe = pipe.saturating_add(len);
                if rescue {
                    // Rule 4: RescueRxt = RecoveryPoint; HighRxt stays.
                    self.rescues += 1;
                    tcb.sack.rescue_rxt = Some(TcpSeqNumber(tcb.cc.recover()) + 1);
                } else {
                    // Step C.2.
                    self.retransmits += 1;
                    tcb.sack.high_rxt = seq + len as usize;
                }
            }
        } else if tcb.snd_nxt < tcb.snd_high {
            // §5.1: after a timeout SND.NXT went back to SND.UNA; what
            // was sent is sent again, but not the SACKed data. Up to the
            // last SACKed range only: from there TCPSegmentation goes on.
            let data_end = una + tcb.send_buffer.len();
            let mut budget = tcb.cc.cwnd().saturating_sub(sack::in_flight(tcb));
            while tcb.snd_nxt < data_end {
                let nxt = tcb.snd_nxt;
                if let Some((_, right)) = tcb.sack.board.range_at(nxt) {
                    let to = right.min(data_end);
                    self.skipped_bytes += (to - nxt) as u64;
                    tcb.snd_nxt = to;
                    continue;
                }
                let Some((left, _)) = tcb.sack.board.next_range_after(nxt) else {
                    break;
                };
                let len = smss.min((left - nxt) as u32).min(budget);
                if len == 0 {
                    break;
                }
                match self.send(pool, out, tcb, nxt, len, now) {
                    Sent::Yes => sent_any = true,
                    Sent::Nothing | Sent::NoBuffer => break,
                }
                self.retransmits += 1;
                tcb.snd_nxt = nxt + len as usize;
                budget -= len;
            }
        }
        if sent_any {
            tcb.ack_sent();
            // RFC 6298 §5.1: data left and the timer is not running.
            if tcb.rto_deadline.is_none() {
                info.arm_rto(r, now);
            }
        }
    }

    /// Sends `len` octets of sequence space from `seq` again: the data in
    /// the send buffer, and our FIN if the range reaches it.
    fn send(
        &mut self,
        pool: &Mempool,
        out: &mut PacketBatch,
        tcb: &mut crate::tcp::tcb::Tcb,
        seq: TcpSeqNumber,
        len: u32,
        now: u64,
    ) -> Sent {
        let offset = (seq - tcb.snd_una).max(0) as usize;
        if offset > tcb.send_buffer.len() {
            return Sent::Nothing;
        }
        let data = (len as usize).min(tcb.send_buffer.len().saturating_sub(offset));
        let fin = tcb.fin_sent && offset + (len as usize) > tcb.send_buffer.len();
        if data == 0 && !fin {
            return Sent::Nothing;
        }
        let Ok(mut p) = pool.alloc() else {
            self.no_buffers += 1;
            return Sent::NoBuffer;
        };
        let flags = if fin { TcpFlags::FIN } else { TcpFlags::empty() };
        let key = tcb.key;
        let (seg, bytes) = super::send::data_segment(tcb, seq, offset, data, flags, now);
        if !write_segment_payload(&mut p, &key, &seg, bytes, Codepoint::NotEct) {
            return Sent::Nothing;
        }
        out.push(p);
        Sent::Yes
    }
}
