//! TCPReordering (ClickNF §3.1): data that arrives ahead of RCV.NXT is
//! kept, not dropped, and released in order once the gap is filled, so
//! TCPProcessData only ever sees data at RCV.NXT.
//!
//! It sits after TCPProcessAck (the ACK field of every acceptable segment
//! counts at once, as RFC 9293 §3.10.7.4 processes it before the text)
//! and before TCPProcessData. A segment kept here is answered at once
//! with a duplicate ACK (RFC 5681 §4.2: "an immediate ACK SHOULD be
//! generated when an out-of-order segment arrives"; RFC 9293 §3.8.6.3),
//! which carries SACK blocks for what is kept when SACK is in use
//! (RFC 2018 §4). The queue is bounded: at most MAX_SEGMENTS segments
//! (default 256) per connection, and never data beyond the receive
//! window (TCPCheckSeqNo trimmed it); past the bound a segment is dropped
//! and counted (the peer retransmits it).
//!
//! Input: segments from TCPProcessAck (through the RTT and congestion
//! elements). Output 0: segments in order, the held ones following the
//! one that filled the gap; control packets asking for the duplicate ACK.
//! Handlers: `held`, `released`, `dropped`.

use super::{info, Info, Seg};
use crate::anno::{self, TcpFlags as Anno};
use crate::tcp::tcb::Held;
use crate::wire::TcpFlags;
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct Reordering {
    info: Option<Info>,
    max_segments: usize,
    held: u64,
    released: u64,
    dropped: u64,
}

impl Element for Reordering {
    fn class_name(&self) -> &'static str {
        "TCPReordering"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.max_segments = match a.keyword("MAX_SEGMENTS") {
            Some(v) => args::unsigned(&v).map_err(|e| format!("MAX_SEGMENTS: {e}"))? as usize,
            None => 256,
        };
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let mut out = PacketBatch::with_capacity(batch.len());
        {
            let mut info = info.borrow_mut();
            let pool = ctx.pool();
            let mut input = std::mem::take(batch);
            let count = input.len();
            let mut expected_in_batch: Vec<(anno::TcbRef, crate::wire::TcpSeqNumber)> = Vec::new();
            for p in input.drain_front(count) {
                let (Some(r), Some(seg)) = (anno::tcb(&p), Seg::read(&p)) else {
                    out.push(p);
                    continue;
                };
                let Some(tcb) = info.tcbs.get_mut(r) else {
                    out.push(p);
                    continue;
                };
                let len = seg.payload_len + seg.has(TcpFlags::FIN) as usize;
                // What TCPProcessData will expect by the time it sees this
                // segment: RCV.NXT moved past the earlier segments of this
                // batch (it runs after this element, on the whole batch).
                let expected = match expected_in_batch.iter().find(|(t, _)| *t == r) {
                    Some(&(_, e)) => e.max(tcb.rcv_nxt),
                    None => tcb.rcv_nxt,
                };
                if len == 0 || seg.seq <= expected {
                    // In order (or nothing to order): on, and whatever it
                    // makes contiguous after it.
                    let end = seg.seq + len;
                    let mut reach = end.max(expected);
                    let mut p = p;
                    if len > 0 && !tcb.ooo.is_empty() {
                        // It fills (part of) a gap: acknowledge at once.
                        let flags = anno::tcp_flags(&p);
                        anno::set_tcp_flags(&mut p, Anno(flags.0 | Anno::ACK_NOW));
                    }
                    out.push(p);
                    if len > 0 && !tcb.ooo.is_empty() {
                        while let Some(first) = tcb.ooo.front() {
                            if first.seq > reach {
                                break;
                            }
                            let held = tcb.ooo.pop_front().expect("front exists");
                            if held.end <= reach {
                                // Wholly covered already: a duplicate.
                                continue;
                            }
                            reach = held.end;
                            self.released += 1;
                            out.push(held.packet);
                        }
                    }
                    match expected_in_batch.iter_mut().find(|(t, _)| *t == r) {
                        Some(e) => e.1 = reach,
                        None => expected_in_batch.push((r, reach)),
                    }
                    continue;
                }
                // Ahead of RCV.NXT: keep it, in order, once.
                if tcb.ooo.len() >= self.max_segments {
                    self.dropped += 1;
                } else {
                    let end = seg.seq + len;
                    let at = tcb.ooo.iter().position(|h| h.seq >= seg.seq).unwrap_or(tcb.ooo.len());
                    let duplicate = tcb.ooo.get(at).is_some_and(|h| h.seq == seg.seq && h.end >= end);
                    if duplicate {
                        self.dropped += 1;
                    } else {
                        tcb.ooo_arrivals += 1;
                        let arrival = tcb.ooo_arrivals;
                        tcb.ooo.insert(
                            at,
                            Held {
                                seq: seg.seq,
                                end,
                                arrival,
                                packet: p,
                            },
                        );
                        self.held += 1;
                    }
                }
                // The duplicate ACK, at once.
                if let Ok(mut control) = pool.alloc() {
                    anno::set_tcb(&mut control, Some(r));
                    anno::set_tcp_flags(&mut control, Anno(Anno::ACK_NEEDED | Anno::OUT_OF_ORDER));
                    out.push(control);
                }
            }
        }
        ctx.push(0, out);
    }
    counter_handlers!(held, released, dropped);
}
