//! TCPProcessRst and TCPProcessSyn: RFC 9293 §3.10.7.4's second and
//! fourth checks, with RFC 5961's defences against blind attacks: a RST
//! or SYN that is in the window but not exactly where the peer would put
//! it gets a "challenge ACK" instead of acting (§3.2, §4.2). A genuine
//! peer answers it with a RST at the right place; an attacker, who does
//! not see it, cannot.
//!
//! Input: acceptable segments (TCPCheckSeqNo's output 0). Output 0:
//! segments without that flag; output 1: challenge ACKs.
//! Handlers: `resets` (connections reset) / `returned_to_listen`,
//! `challenges`, `drops`.

use super::{info, turn_into_ack, Info, Seg};
use crate::anno::{self, TcbRef};
use crate::tcp::info::TcpInfo;
use crate::tcp::tcb::TcpState;
use crate::wire::TcpFlags;
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::Ctx;

/// Ends a connection (a RST, a SYN in SYN-RECEIVED, the last ACK, a
/// timeout), `errno` the error its application sees (None: a normal end).
/// A TCB that a socket holds stays, CLOSED, until the socket lets go;
/// the others are deleted with their flow entry and their place in a
/// listener's queues.
pub fn abort(info: &mut TcpInfo, r: TcbRef, errno: Option<i32>) {
    if let Some(tcb) = info.tcbs.get_mut(r) {
        if tcb.has_socket {
            tcb.state = TcpState::Closed;
            tcb.error = tcb.error.or(errno);
            tcb.rto_deadline = None;
            tcb.time_wait_deadline = None;
            tcb.readable.notify_all();
            tcb.writable.notify_all();
            let key = tcb.key;
            if info.flows.get(&key) == Some(&r) {
                info.flows.remove(&key);
            }
            return;
        }
    }
    let Some(tcb) = info.delete(r) else { return };
    if let Some(at) = tcb.listener {
        if let Some(l) = info.listeners.get_mut(&at) {
            if tcb.state == TcpState::SynReceived {
                l.half_open = l.half_open.saturating_sub(1);
            }
            l.accept_queue.retain(|q| *q != r);
        }
    }
}

#[derive(Default)]
pub struct ProcessRst {
    info: Option<Info>,
    resets: u64,
    challenges: u64,
    drops: u64,
}

impl Element for ProcessRst {
    fn class_name(&self) -> &'static str {
        "TCPProcessRst"
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
            super::split_packets(batch, n, |mut p| {
                let (Some(r), Some(seg)) = (anno::tcb(&p), Seg::read(&p)) else {
                    self.drops += 1;
                    return None;
                };
                if !seg.has(TcpFlags::RST) {
                    return Some((0, p));
                }
                let Some(tcb) = info.tcbs.get(r) else {
                    self.drops += 1;
                    return None;
                };
                if seg.seq != tcb.rcv_nxt {
                    // RFC 5961 §3.2: in the window, not exact: challenge.
                    self.challenges += 1;
                    return turn_into_ack(&mut p, tcb, now).then_some((1, p));
                }
                // RFC 9293 §3.10.7.4 second: SYN-RECEIVED from a passive open
                // returns to LISTEN (the listener stays, the TCB goes), from an
                // active one "the connection was refused"; ESTABLISHED,
                // FIN-WAIT-1, FIN-WAIT-2 and CLOSE-WAIT end with "connection
                // reset"; CLOSING, LAST-ACK and TIME-WAIT just close.
                let errno = match tcb.state {
                    TcpState::SynReceived if tcb.listener.is_none() => Some(libc::ECONNREFUSED),
                    TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2 | TcpState::CloseWait => {
                        Some(libc::ECONNRESET)
                    }
                    _ => None,
                };
                if tcb.state.synchronized() {
                    info.counters.resets_received += 1;
                }
                self.resets += 1;
                abort(&mut info, r, errno);
                None
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(resets, challenges, drops);
}

#[derive(Default)]
pub struct ProcessSyn {
    info: Option<Info>,
    returned_to_listen: u64,
    challenges: u64,
    drops: u64,
}

impl Element for ProcessSyn {
    fn class_name(&self) -> &'static str {
        "TCPProcessSyn"
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
            super::split_packets(batch, n, |mut p| {
                let (Some(r), Some(seg)) = (anno::tcb(&p), Seg::read(&p)) else {
                    self.drops += 1;
                    return None;
                };
                if !seg.has(TcpFlags::SYN) {
                    return Some((0, p));
                }
                let Some(tcb) = info.tcbs.get(r) else {
                    self.drops += 1;
                    return None;
                };
                // RFC 9293 §3.10.7.4 fourth: in SYN-RECEIVED from a passive
                // open, back to LISTEN; otherwise a challenge ACK (RFC 5961
                // §4.2), whatever the sequence number.
                if tcb.state == TcpState::SynReceived && tcb.listener.is_some() {
                    self.returned_to_listen += 1;
                    abort(&mut info, r, None);
                    return None;
                }
                self.challenges += 1;
                turn_into_ack(&mut p, tcb, now).then_some((1, p))
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(returned_to_listen, challenges, drops);
}
