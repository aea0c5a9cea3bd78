//! TCPProcessECN (RFC 3168 §6.1) and DCTCPProcessECN (RFC 8257 §3),
//! right after TCPProcessAck (ClickNF §3.5: "changing TCP New Reno to
//! match DCTCP is as simple as adding a new DCTCP-ProcessECN element
//! right after TCPProcessAck"). Connections that did not negotiate ECN
//! pass untouched.
//!
//! - Receiver: a segment's IP ECN field (CE or not) into the echo that
//!   our ACKs carry as ECE: RFC 3168's (from a CE until the peer's CWR),
//!   or for a DCTCP connection RFC 8257 §3.2's precise one (ECE exactly
//!   while CE arrives; when CE changes while an ACK is held back, that
//!   ACK goes at once with the old ECE, output 1).
//! - Sender: an ACK with ECE reduces the window once per window of data
//!   (RFC 3168 §6.1.2; not during loss recovery, which reduced it
//!   already), by the connection's rule (halve, CUBIC's 0.7, DCTCP's
//!   alpha), and the next new data carries CWR. A DCTCP connection
//!   updates alpha with every ACK (RFC 8257 §3.3).
//!
//! TCPProcessECN works by the connection's variant (TcpSettings'
//! `congestion`); DCTCPProcessECN first makes every ECN connection it
//! sees DCTCP. Ports 1/1-2: output 0 the segments on, output 1 the
//! immediate ACKs of DCTCP's state machine. Handlers: `ce_received`,
//! `reductions`, `immediate_acks`.
//!
//! Known limits: the elements work batch by batch, so within one batch
//! the ACKs TCPAckRequired builds carry the echo as it stands after the
//! batch's last segment (RFC 3168's echo may end one ACK early, DCTCP's
//! immediate ACK is not sent when the change is inside the batch).

use super::{ack_segment, info, Info, Seg};
use crate::anno;
use crate::tcp::cc::Algorithm;
use crate::tcp::ecn::{codepoint, Codepoint};
use crate::tcp::output::write_segment;
use crate::wire::TcpFlags;
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::Ctx;

/// TCPProcessECN, or DCTCPProcessECN with `dctcp` set.
#[derive(Default)]
pub struct ProcessEcn {
    info: Option<Info>,
    dctcp: bool,
    ce_received: u64,
    reductions: u64,
    immediate_acks: u64,
}

impl ProcessEcn {
    /// DCTCPProcessECN.
    pub fn dctcp() -> ProcessEcn {
        ProcessEcn {
            dctcp: true,
            ..ProcessEcn::default()
        }
    }
}

/// Whether the packet's IP header (at its network mark) says CE.
fn ce_marked(p: &Packet) -> bool {
    let ip = p
        .network_offset()
        .and_then(|at| usize::try_from(at).ok())
        .and_then(|at| p.get(at..));
    ip.and_then(codepoint) == Some(Codepoint::Ce)
}

impl Element for ProcessEcn {
    fn class_name(&self) -> &'static str {
        if self.dctcp {
            "DCTCPProcessECN"
        } else {
            "TCPProcessECN"
        }
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
        let pool = ctx.pool();
        let mut immediate = Vec::new();
        let n = ctx.noutputs();
        let mut outs = {
            let mut info = info.borrow_mut();
            super::split_packets(batch, n, |p| {
                let Some(tcb) = anno::tcb(&p).and_then(|r| info.tcbs.get_mut(r)) else {
                    return Some((0, p));
                };
                let Some(seg) = Seg::read(&p) else { return Some((0, p)) };
                if !tcb.ecn.enabled {
                    return Some((0, p));
                }
                if self.dctcp {
                    tcb.cc.make_dctcp(tcb.snd_nxt.0);
                }
                let dctcp = tcb.cc.algorithm() == Algorithm::Dctcp;
                let ce = ce_marked(&p);
                self.ce_received += ce as u64;
                // The receiver's echo.
                if !dctcp {
                    tcb.ecn.on_segment_classic(ce, seg.has(TcpFlags::CWR));
                } else if seg.payload_len > 0 {
                    let pending = tcb.unacked_segments > 0 || tcb.delayed_ack_deadline.is_some();
                    if let Some(old) = tcb.ecn.on_data_precise(ce, pending) {
                        // RFC 8257 §3.2: acknowledge what came before this
                        // segment now, with the ECE it had.
                        let new = tcb.ecn.ece;
                        tcb.ecn.ece = old;
                        let ack = ack_segment(tcb, now);
                        tcb.ecn.ece = new;
                        tcb.ack_sent();
                        if let Ok(mut a) = pool.alloc() {
                            if write_segment(&mut a, &tcb.key, &ack, &[]) {
                                self.immediate_acks += 1;
                                immediate.push(a);
                            }
                        }
                    }
                }
                // The sender's reaction.
                if seg.ack.is_none() || seg.has(TcpFlags::SYN) {
                    return Some((0, p));
                }
                let ece = seg.has(TcpFlags::ECE);
                let (una, nxt) = (tcb.snd_una.0, tcb.snd_nxt.0);
                if let Some(d) = tcb.cc.dctcp_mut() {
                    d.on_ack(una, nxt, anno::acked_bytes(&p), ece);
                }
                if ece && tcb.ecn.may_react(una) && !tcb.cc.in_recovery() {
                    let flight = tcb.flight_size();
                    tcb.cc.on_ecn_echo(flight);
                    tcb.ecn.reacted(nxt);
                    self.reductions += 1;
                }
                Some((0, p))
            })
        };
        // Output 1, if connected (a packet for a missing output is freed).
        for a in immediate {
            outs.push_to(1, a);
        }
        super::push_all(ctx, outs);
    }
    counter_handlers!(ce_received, reductions, immediate_acks);
}
