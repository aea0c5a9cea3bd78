//! cTCP's elements (ClickNF §3.1, Figure 2): the incoming path, one step
//! of RFC 9293 §3.10.7 ("SEGMENT ARRIVES") each, in the RFC's order.
//!
//! | element | ports | what |
//! |---|---|---|
//! | TCPGRO | 1/1 | software GRO before TCPFlowLookup: consecutive in-order data segments of a flow in one batch merged into one (Linux's rules; [`gro`]) |
//! | TCPFlowLookup | 1/2 | checksum, then the flow's TCB into the annotation: output 0 a known flow, 1 none |
//! | TCPStateDemux | 1/2 | output 0 segments of connections in SYN-SENT, 1 the others |
//! | TCPSynSent | 1/1 | §3.10.7.3: the answer to our SYN (ESTABLISHED, or SYN-RECEIVED for a simultaneous open, or refused by a RST) |
//! | TCPListen | 1/1 | no TCB (§3.10.7.1-2): a SYN to a listener makes a TCB in SYN-RECEIVED and is answered with a SYN-ACK; anything else to no listener gets a RST |
//! | TCPCheckSeqNo | 1/2 | "first, check sequence number" and PAWS (RFC 7323 §5); trims the segment to the window; 0 acceptable, 1 the ACK that answers an unacceptable one |
//! | TCPProcessRst | 1/2 | "second, check the RST bit", RFC 5961 §3: 0 no RST, 1 a challenge ACK |
//! | TCPProcessSyn | 1/2 | "fourth, check the SYN bit", RFC 5961 §4: 0 no SYN, 1 a challenge ACK |
//! | TCPProcessAck | 1/2 | "fifth, check the ACK field": SYN-RECEIVED to ESTABLISHED, SND.UNA, the window, FIN acknowledged; 0 on, 1 an ACK or RST to send |
//! | TCPEstimateRTT | 1/1 | an RTT sample into the RTO estimator (RFC 6298) |
//! | TCPProcessECN | 1/1-2 | ECN (RFC 3168 §6.1): CE into the echo our ACKs carry, ECE into a once-per-window reduction; a DCTCP connection's precise echo and alpha (RFC 8257 §3); output 1 DCTCP's immediate ACKs |
//! | DCTCPProcessECN | 1/1-2 | TCPProcessECN that makes each ECN connection DCTCP (ClickNF §3.5's swap) |
//! | TCPNewRenoAck | 1/1 | acked bytes and duplicate ACKs into the congestion control: NewReno's loss recovery (RFC 5681, 6582) with the connection's window rule |
//! | TCPCubicAck | 1/1 | TCPNewRenoAck that makes each connection CUBIC (RFC 9438) |
//! | TCPSackRecovery | 1/1 | before the congestion control: SACK blocks into the scoreboard, RFC 6675's duplicate ACKs, entering and leaving recovery (the congestion control then leaves loss recovery to it) |
//! | TCPReordering | 1/1 | data ahead of RCV.NXT kept (bounded) and released in order; a duplicate ACK with SACK blocks at once |
//! | TCPProcessData | 1/1 | "seventh, process the segment text": in-sequence data to the receive queue |
//! | TCPProcessFin | 1/1 | "eighth, check the FIN bit" |
//! | TCPAckRequired | 1/1 | the ACK the segment asked for, or nothing |
//! | TCPIcmpError | 1/0 | ICMP/ICMPv6 errors about our segments: path MTU, hard errors in the handshake, soft errors (RFC 1122 §4.2.3.9, RFC 5927) |
//!
//! The outgoing path and the timers are in [`send`], TCPSackRetransmit
//! (RFC 6675's retransmissions, at the head of the outgoing path) in
//! [`sack`] beside TCPSackRecovery; TCPSettings (the
//! router's TCP settings from the configuration) in [`settings`].
//!
//! Every element's output carries packets with the TCB annotation set.
//! Outputs that answer (ACK, RST, SYN-ACK) carry IP packets ready for the
//! neighbour resolver: the received packet turned around
//! ([`super::output::write_segment`]).
//!
//! Each element finds the router's TCPInfo through
//! [`crate::elements::shared`] when configured.

/// Inside `impl Element for X`: read-only handlers, one per named `u64`
/// field, in that order (the counters every TCP element keeps).
macro_rules! counter_handlers {
    ($($name:ident),+ $(,)?) => {
        fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
            &[$((stringify!($name), true, false)),+]
        }
        fn read_handler(&self, name: &str) -> Option<String> {
            match name {
                $(stringify!($name) => Some(self.$name.to_string()),)+
                _ => None,
            }
        }
    };
}

pub mod ack;
pub mod check;
pub mod data;
pub mod ecn;
pub mod gro;
pub mod icmp_error;
pub mod listen;
pub mod lookup;
pub mod reorder;
pub mod rst_syn;
pub mod sack;
pub mod send;
pub mod settings;
pub mod syn_sent;

use super::info::TcpInfo;
use super::output::write_segment;
use super::tcb::Tcb;
use crate::wire::{FlowKey, IpAddress, IpEndpoint, TcpFlags, TcpOptions, TcpPacket, TcpRepr, TcpSeqNumber};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::element::{recycle_batch, take_batch};
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use std::cell::RefCell;
use std::rc::Rc;

/// cTCP as one compound element class (ClickNF Figures 2-4 wired
/// together): input 0 takes IP packets carrying TCP with their header
/// marks set (the IP layer's input elements set them); output 0 gives the
/// IP packets to send (for the neighbour resolver). It is in the
/// language's prelude once the stack is registered, so a configuration
/// uses `TCPStack` like any class; every element inside can be read
/// (`tcp/cs.unacceptable`, ...), and a configuration that needs another
/// wiring copies this text under another name.
pub const TCP_STACK: &str = "
elementclass TCPStack {
  input -> fl :: TCPFlowLookup;
  fl[0] -> sd :: TCPStateDemux;
  sd[0] -> ss :: TCPSynSent -> output;
  sd[1] -> cs :: TCPCheckSeqNo -> rst :: TCPProcessRst -> syn :: TCPProcessSyn -> ack :: TCPProcessAck
    -> ecn :: TCPProcessECN -> rtt :: TCPEstimateRTT -> sack :: TCPSackRecovery -> cc :: TCPNewRenoAck -> ro :: TCPReordering -> data :: TCPProcessData -> fin :: TCPProcessFin
    -> ar :: TCPAckRequired -> output;
  fl[1] -> listen :: TCPListen -> output;
  listen[1] -> cs;
  cs[1] -> output; rst[1] -> output; syn[1] -> output; ack[1] -> output; ecn[1] -> output;
  TCPOutput -> sackrtx :: TCPSackRetransmit -> nagle :: TCPNagle -> rate :: TCPRateControl -> seg :: TCPSegmentation -> output;
  sackrtx[1] -> output;
  timers :: TCPTimers -> output;
}
";

/// The family's classes.
pub const MODULE: Module = Module {
    classes: &[
        "DCTCPProcessECN",
        "TCPAckRequired",
        "TCPCheckSeqNo",
        "TCPCubicAck",
        "TCPEstimateRTT",
        "TCPFlowLookup",
        "TCPGRO",
        "TCPIcmpError",
        "TCPListen",
        "TCPNagle",
        "TCPNewRenoAck",
        "TCPOutput",
        "TCPProcessAck",
        "TCPProcessData",
        "TCPProcessECN",
        "TCPProcessFin",
        "TCPProcessRst",
        "TCPProcessSyn",
        "TCPRateControl",
        "TCPReordering",
        "TCPSackRecovery",
        "TCPSackRetransmit",
        "TCPSegmentation",
        "TCPSettings",
        "TCPStateDemux",
        "TCPSynSent",
        "TCPTimers",
    ],
    create: |class| {
        Some(match class {
            "TCPAckRequired" => Box::new(data::AckRequired::default()),
            "TCPCheckSeqNo" => Box::new(check::CheckSeqNo::default()),
            "TCPCubicAck" => Box::new(ack::CubicAck::default()),
            "DCTCPProcessECN" => Box::new(ecn::ProcessEcn::dctcp()),
            "TCPProcessECN" => Box::new(ecn::ProcessEcn::default()),
            "TCPEstimateRTT" => Box::new(ack::EstimateRtt::default()),
            "TCPFlowLookup" => Box::new(lookup::FlowLookup::default()),
            "TCPGRO" => Box::new(gro::Gro::default()),
            "TCPIcmpError" => Box::new(icmp_error::IcmpError::default()),
            "TCPListen" => Box::new(listen::Listen::default()),
            "TCPNewRenoAck" => Box::new(ack::NewRenoAck::default()),
            "TCPProcessAck" => Box::new(ack::ProcessAck::default()),
            "TCPProcessData" => Box::new(data::ProcessData::default()),
            "TCPProcessFin" => Box::new(data::ProcessFin::default()),
            "TCPProcessRst" => Box::new(rst_syn::ProcessRst::default()),
            "TCPProcessSyn" => Box::new(rst_syn::ProcessSyn::default()),
            "TCPNagle" => Box::new(send::Nagle::default()),
            "TCPOutput" => Box::new(send::Output::default()),
            "TCPRateControl" => Box::new(send::RateControl::default()),
            "TCPSegmentation" => Box::new(send::Segmentation::default()),
            "TCPSettings" => Box::new(settings::Settings::default()),
            "TCPTimers" => Box::new(send::Timers::default()),
            "TCPStateDemux" => Box::new(syn_sent::StateDemux::default()),
            "TCPReordering" => Box::new(reorder::Reordering::default()),
            "TCPSackRecovery" => Box::new(sack::SackRecovery::default()),
            "TCPSackRetransmit" => Box::new(sack::SackRetransmit::default()),
            "TCPSynSent" => Box::new(syn_sent::SynSent::default()),
            _ => return None,
        })
    },
};

/// The router's TCPInfo, shared by its TCP elements.
pub type Info = Rc<RefCell<TcpInfo>>;

pub fn info() -> Info {
    crate::elements::shared::<TcpInfo>()
}

/// A received segment as the elements read it: the flow (our endpoint
/// first), the header fields, and where the TCP header and the payload
/// are in the packet's data.
#[derive(Debug, Clone, Copy)]
pub struct Seg {
    pub key: FlowKey,
    pub seq: TcpSeqNumber,
    pub ack: Option<TcpSeqNumber>,
    /// Flags without ACK (that is `ack`).
    pub flags: TcpFlags,
    pub window: u16,
    /// Offset of the TCP header in the data, and its length.
    pub tcp_at: usize,
    pub header_len: usize,
    pub payload_len: usize,
}

impl Seg {
    /// Reads the segment through the packet's network and transport
    /// header marks (set by the IP layer). None if they are missing or
    /// the headers are not whole (the IP layer checked them, so this is
    /// a packet from somewhere else: the caller drops it).
    pub fn read(p: &Packet) -> Option<Seg> {
        let net = usize::try_from(p.network_offset()?).ok()?;
        let tcp_at = usize::try_from(p.transport_offset()?).ok()?;
        let ip = p.get(net..)?;
        let (src, dst) = match ip.first()? >> 4 {
            4 if ip.len() >= 20 => (
                IpAddress::V4(std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
                IpAddress::V4(std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
            ),
            6 if ip.len() >= 40 => {
                let mut s = [0; 16];
                let mut d = [0; 16];
                s.copy_from_slice(&ip[8..24]);
                d.copy_from_slice(&ip[24..40]);
                (IpAddress::V6(s.into()), IpAddress::V6(d.into()))
            }
            _ => return None,
        };
        let tcp = TcpPacket::new_checked(p.get(tcp_at..)?).ok()?;
        let flags = tcp.flags();
        Some(Seg {
            key: FlowKey {
                local: IpEndpoint {
                    addr: dst,
                    port: tcp.dst_port(),
                },
                remote: IpEndpoint {
                    addr: src,
                    port: tcp.src_port(),
                },
            },
            seq: tcp.seq_number(),
            ack: flags.contains(TcpFlags::ACK).then(|| tcp.ack_number()),
            flags: flags.without(TcpFlags::ACK),
            window: tcp.window_len(),
            tcp_at,
            header_len: tcp.header_len(),
            // A chained segment (the NIC's RSC, or TCPGRO) carries its
            // payload on in the buffers after the first.
            payload_len: if p.is_chained() {
                p.total_len().checked_sub(tcp_at + tcp.header_len())?
            } else {
                tcp.payload().len()
            },
        })
    }

    /// SEG.LEN (RFC 9293 §3.4): the data, and one each for SYN and FIN.
    pub fn len(&self) -> usize {
        self.payload_len + self.flags.contains(TcpFlags::SYN) as usize + self.flags.contains(TcpFlags::FIN) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn has(&self, flag: TcpFlags) -> bool {
        self.flags.contains(flag)
    }

    /// The segment's options (a malformed list reads as none: the segment
    /// itself is still processed, as Linux does).
    pub fn options(&self, p: &Packet) -> TcpOptions {
        p.get(self.tcp_at..)
            .and_then(|b| TcpPacket::new_checked(b).ok())
            .and_then(|t| TcpOptions::parse(t.options()).ok())
            .unwrap_or_default()
    }
}

/// Our timestamp clock (RFC 7323 §5.4: one tick per millisecond).
pub fn ts_now(now_us: u64) -> u32 {
    (now_us / 1000) as u32
}

/// A plain ACK from `tcb`: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>, with the
/// window and the timestamps option when in use.
pub fn ack_segment(tcb: &Tcb, now_us: u64) -> TcpRepr {
    let mut options = TcpOptions::default();
    if tcb.timestamps {
        options.timestamps = Some((ts_now(now_us), tcb.ts_recent));
    }
    if tcb.sack_permitted {
        // Three blocks fit beside the timestamps, four without (RFC 2018 §3).
        let room = if tcb.timestamps { 3 } else { 4 };
        for (slot, (left, right, _)) in options.sack_blocks.iter_mut().zip(tcb.sack_blocks(room)) {
            *slot = Some((left, right));
        }
    }
    TcpRepr {
        src_port: tcb.key.local.port,
        dst_port: tcb.key.remote.port,
        seq: tcb.snd_nxt,
        ack: Some(tcb.rcv_nxt),
        flags: ece_flag(tcb),
        window: tcb.window_field(),
        urgent: 0,
        options,
        payload_len: 0,
    }
}

/// ECE on what we send while the receiver's echo is on (RFC 3168
/// §6.1.3, RFC 8257 §3.2).
pub fn ece_flag(tcb: &Tcb) -> TcpFlags {
    if tcb.ecn.enabled && tcb.ecn.ece {
        TcpFlags::ECE
    } else {
        TcpFlags::empty()
    }
}

/// Turns `p` into the ACK `tcb` would send now; false if it could not
/// (the caller drops the packet).
pub fn turn_into_ack(p: &mut Packet, tcb: &Tcb, now_us: u64) -> bool {
    write_segment(p, &tcb.key, &ack_segment(tcb, now_us), &[])
}

/// A RST answering a segment for no connection (RFC 9293 §3.10.7.1):
/// <SEQ=SEG.ACK><CTL=RST> if it had an ACK, else
/// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
pub fn reset_for(seg: &Seg) -> TcpRepr {
    let (seq, ack) = match seg.ack {
        Some(ack) => (ack, None),
        None => (TcpSeqNumber(0), Some(seg.seq + seg.len())),
    };
    TcpRepr {
        src_port: seg.key.local.port,
        dst_port: seg.key.remote.port,
        seq,
        ack,
        flags: TcpFlags::RST,
        window: 0,
        urgent: 0,
        options: TcpOptions::default(),
        payload_len: 0,
    }
}

/// Runs `f` on each packet of `batch` and sorts what it returns into one
/// batch per output (order kept within each); `f` returns None for a
/// packet it consumed or dropped (and counted). The element then drops
/// its borrow of TCPInfo and hands the batches on with [`push_all`]:
/// no element holds TCPInfo while the next one runs.
pub fn split_packets(
    batch: &mut PacketBatch,
    outputs: usize,
    mut f: impl FnMut(Packet) -> Option<(usize, Packet)>,
) -> SplitOuts {
    let mut batch = std::mem::take(batch);
    let mut outs = SplitOuts::new(outputs.max(1));
    let len = batch.len();
    batch.consume_front(len, |p| {
        if let Some((port, p)) = f(p) {
            outs.put(port, p, len);
        }
    });
    recycle_batch(batch);
    outs
}

/// The batches [`split_packets`] sorted packets into: the first
/// [`INLINE_OUTPUTS`] in place, each taken from the graph's bin of empty
/// batches only when a packet goes to it, so that a split costs no
/// allocation (most batches on a connection's path are of one packet,
/// and go to one output).
pub struct SplitOuts {
    inline: [PacketBatch; INLINE_OUTPUTS],
    more: Vec<PacketBatch>,
    /// Bit i: output i holds a batch from the bin.
    taken: u64,
    outputs: usize,
}

/// Outputs kept in place by [`SplitOuts`] (the TCP elements have at most
/// three).
pub const INLINE_OUTPUTS: usize = 4;

impl SplitOuts {
    pub(crate) fn new(outputs: usize) -> SplitOuts {
        SplitOuts {
            inline: Default::default(),
            more: Vec::new(),
            taken: 0,
            outputs: outputs.min(64),
        }
    }

    /// Adds `p` to output `port`'s batch (freed if the element has no
    /// such output).
    pub fn push_to(&mut self, port: usize, p: Packet) {
        self.put(port, p, 1);
    }

    pub(crate) fn put(&mut self, port: usize, p: Packet, capacity: usize) {
        if port >= self.outputs {
            return;
        }
        let out = if port < INLINE_OUTPUTS {
            &mut self.inline[port]
        } else {
            if self.more.len() <= port - INLINE_OUTPUTS {
                self.more.resize_with(port - INLINE_OUTPUTS + 1, PacketBatch::default);
            }
            &mut self.more[port - INLINE_OUTPUTS]
        };
        if self.taken & (1 << port) == 0 {
            self.taken |= 1 << port;
            // The slot holds an empty, unallocated default batch: nothing
            // to drop (a drop call per slot and element showed up in the
            // kv profile).
            std::mem::forget(std::mem::replace(out, take_batch(capacity)));
        }
        out.push(p);
    }
}

/// Pushes each batch out of its output.
pub fn push_all(ctx: &mut Ctx<'_>, outs: SplitOuts) {
    let SplitOuts {
        inline, more, taken, ..
    } = outs;
    for (port, mut out) in inline.into_iter().chain(more).enumerate() {
        if taken & (1 << port) != 0 {
            ctx.forward(port, &mut out);
            recycle_batch(out);
        } else {
            // Never taken: still the empty default batch, no allocation.
            std::mem::forget(out);
        }
    }
}

/// `count` and drop counters as read handlers.
pub fn counter_handler(name: &str, counters: &[(&str, u64)]) -> Option<String> {
    counters.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod cc_tests;
#[cfg(test)]
mod gro_tests;
#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod sack_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tso_tests;
