//! SACK-based loss recovery of the sender (RFC 6675 §5, with RFC 2018's
//! SACK option): the per-connection state beside the
//! [`Scoreboard`](super::scoreboard::Scoreboard), what an incoming ACK
//! does to it ([`on_ack`]), how much may be sent ([`in_flight`],
//! [`usable_window`]) and what a timeout changes ([`on_timeout`], §5.1).
//!
//! Two elements run it, one on each path, so that a configuration can
//! see it and take it out (ClickNF's cTCP swaps an element to change an
//! algorithm):
//! - TCPSackRecovery, on the incoming path just before the congestion
//!   control element (TCPNewRenoAck or TCPCubicAck): it updates the
//!   scoreboard, counts duplicate ACKs, and enters and leaves recovery.
//!   It sits before the window rule so that the rule already knows, on
//!   the same ACK, whether recovery runs; it marks the connection
//!   (`SackState::active`, from the first SACK block the peer sends, and
//!   not in the middle of a NewReno recovery) and the congestion control
//!   element then leaves loss recovery to it and only grows the window.
//!   Without it in the path, or with a peer that sends no SACK blocks, a
//!   SACK connection keeps NewReno's recovery.
//! - TCPSackRetransmit, at the head of the outgoing path (before
//!   TCPNagle): the fast retransmit, NextSeg's retransmissions while
//!   cwnd - pipe allows (§5 step C), and after a timeout the resending
//!   from SND.UNA that skips SACKed data (§5.1). New data stays
//!   TCPSegmentation's: TCPRateControl lets it out by
//!   [`usable_window`], which counts pipe instead of FlightSize.
//!
//! Where the RFC says SMSS, the stack uses the data one segment carries
//! (the MSS less the timestamps option): a segment here is one
//! TCPSegmentation would send.

use super::scoreboard::{Scoreboard, Update, DUP_THRESH};
use super::tcb::Tcb;
use crate::wire::{SackBlock, TcpSeqNumber};

/// A connection's RFC 6675 state besides the congestion window (which is
/// the congestion control's, with the recovery flag and RecoveryPoint).
#[derive(Debug, Clone, Default)]
pub struct SackState {
    /// The SACKed ranges above SND.UNA.
    pub board: Scoreboard,
    /// TCPSackRecovery is in this connection's path and its peer sends
    /// SACK blocks: loss recovery is RFC 6675's, not NewReno's.
    pub active: bool,
    /// RFC 6675's DupAcks.
    pub dup_acks: u32,
    /// One past HighRxt (the highest octet retransmitted in this
    /// recovery); set when recovery begins.
    pub high_rxt: TcpSeqNumber,
    /// One past RescueRxt; None while undefined.
    pub rescue_rxt: Option<TcpSeqNumber>,
    /// Step 4.3's retransmission of the first segment waits for the
    /// outgoing path.
    pub fast_retransmit: bool,
    /// SND.NXT at the first duplicate ACK of the current run: what was
    /// sent after it is Limited Transmit's, left out of FlightSize when
    /// recovery begins (RFC 5681 §3.2 step 2, RFC 6675 step 4.2).
    pub limited_from: Option<TcpSeqNumber>,
}

/// What an ACK did, for the element's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckOutcome {
    pub update: Update,
    /// The peer discarded data it had SACKed: the scoreboard was cleared.
    pub reneged: bool,
    /// A duplicate ACK in RFC 6675 §2's sense (or RFC 5681's, from a peer
    /// that sends no SACK blocks).
    pub dup: bool,
    /// Recovery began (§5 step 4) or ended (step A) on this ACK.
    pub entered: bool,
    pub left: bool,
    /// Something may go out now.
    pub want_output: bool,
}

/// The data one segment carries: RFC 1122 §4.2.2.6, the MSS less the
/// options on every segment (the timestamps, 12 bytes with padding), as
/// TCPSegmentation cuts them.
pub fn segment_size(tcb: &Tcb) -> u32 {
    tcb.segment_size()
}

/// a > b, modulo 2^32 (RFC 9293 §3.4).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// RFC 6675 §5 for one ACK: `seg_ack` its acknowledgment number, `acked`
/// the bytes it newly acknowledged (SND.UNA already moved), `blocks` its
/// SACK blocks, `rfc5681_dup` whether it is a duplicate by RFC 5681 §2
/// (TCPProcessAck's flag). `now_us` and `srtt_us` are for the window
/// rule (CUBIC's).
pub fn on_ack(
    tcb: &mut Tcb,
    seg_ack: TcpSeqNumber,
    acked: u32,
    blocks: &[SackBlock],
    rfc5681_dup: bool,
    now_us: u64,
    srtt_us: u64,
) -> AckOutcome {
    let mut out = AckOutcome::default();
    let (una, snd_max) = (tcb.snd_una, tcb.snd_max());
    // Update(): SND.UNA first, then the blocks.
    out.reneged = tcb.sack.board.prune(una);
    out.update = tcb.sack.board.update(blocks, seg_ack, una, snd_max);
    // "If the incoming ACK is a cumulative acknowledgment, the TCP MUST
    // reset DupAcks to zero."
    if acked > 0 {
        tcb.sack.dup_acks = 0;
        tcb.sack.limited_from = None;
    }
    // §2: an ACK that SACKs new octets is a duplicate. An ACK without
    // blocks (from a peer that sent some before) still counts as RFC
    // 5681 counts it.
    out.dup = out.update.new_bytes > 0 || (rfc5681_dup && blocks.is_empty());
    if tcb.cc.in_recovery() {
        if tcb.sack.high_rxt < una {
            tcb.sack.high_rxt = una;
        }
        // Step A: a cumulative ACK beyond RecoveryPoint ends recovery;
        // the scoreboard above it is kept.
        if acked > 0 && after(seg_ack.0, tcb.cc.recover()) {
            tcb.cc.leave_sack_recovery();
            tcb.sack.rescue_rxt = None;
            out.left = true;
        }
        // Steps B and C: pipe is recomputed when the outgoing path asks.
        out.want_output = true;
        return out;
    }
    if !out.dup {
        return out;
    }
    tcb.sack.dup_acks += 1;
    if tcb.sack.limited_from.is_none() {
        tcb.sack.limited_from = Some(tcb.snd_nxt);
    }
    // Step c: Limited Transmit, governed by cwnd - pipe
    // (TCPRateControl through `usable_window`).
    out.want_output = true;
    // §5.1: after a timeout, no new recovery until HighACK reaches the
    // RecoveryPoint it set.
    let high_ack = (una - 1usize).0;
    if after(tcb.cc.recover(), high_ack) {
        return out;
    }
    // Steps a and b.
    let smss = segment_size(tcb);
    if tcb.sack.dup_acks >= DUP_THRESH || tcb.sack.board.is_lost(una, smss) {
        // Step 4.1: RecoveryPoint = HighData; 4.2: the rule's reduction,
        // of FlightSize without the Limited Transmit segments.
        let sent_before = tcb.sack.limited_from.take().unwrap_or(tcb.snd_nxt);
        let flight = (sent_before - una).max(0) as u32;
        tcb.cc
            .enter_sack_recovery(flight, (snd_max - 1usize).0, now_us, srtt_us);
        // 4.3 (the segment goes on the outgoing path, which sets HighRxt
        // and RescueRxt to its end).
        tcb.sack.high_rxt = una;
        tcb.sack.rescue_rxt = None;
        tcb.sack.fast_retransmit = true;
        out.entered = true;
    }
    out
}

/// The octets in the network: FlightSize for a connection without
/// RFC 6675; in recovery its pipe (SetPipe); otherwise what was sent
/// from SND.UNA to SND.NXT and not SACKed (§5 step c's pipe; after a
/// timeout, the data sent again, the rest being taken for lost).
pub fn in_flight(tcb: &Tcb) -> u32 {
    if !tcb.sack.active {
        return tcb.flight_size();
    }
    if tcb.cc.in_recovery() {
        let high_rxt = tcb.sack.high_rxt.max(tcb.snd_una);
        return tcb
            .sack
            .board
            .pipe(tcb.snd_una, tcb.snd_nxt, high_rxt, segment_size(tcb));
    }
    tcb.flight_size()
        .saturating_sub(tcb.sack.board.sacked_below(tcb.snd_nxt))
}

/// What TCPRateControl lets out as new data: min(cwnd, the peer's
/// window) less FlightSize (RFC 5681 §3.1); with RFC 6675, cwnd less
/// [`in_flight`] (the peer's window still counts from SND.UNA), and in
/// recovery whole segments only (§5 step C: while cwnd - pipe >= 1
/// SMSS).
pub fn usable_window(tcb: &Tcb) -> u32 {
    let flight = tcb.flight_size();
    if !tcb.sack.active {
        return tcb.cc.cwnd().min(tcb.snd_wnd).saturating_sub(flight);
    }
    let mut room = tcb.cc.cwnd().saturating_sub(in_flight(tcb));
    if tcb.cc.in_recovery() {
        room -= room % segment_size(tcb);
    }
    room.min(tcb.snd_wnd.saturating_sub(flight))
}

/// Unsent bytes the peer's window allows now (NextSeg's rule 2).
pub fn new_data_room(tcb: &Tcb) -> u32 {
    let window_left = tcb.snd_wnd.saturating_sub(tcb.flight_size());
    (tcb.unsent().min(u32::MAX as usize) as u32).min(window_left)
}

/// §5.1: the retransmission timer expired. Recovery ends (the congestion
/// control's timeout did that), RecoveryPoint becomes HighData, HighRxt
/// goes back to SND.UNA, and the SACKed ranges are kept: the resending
/// from SND.UNA skips them (TCPSackRetransmit).
pub fn on_timeout(tcb: &mut Tcb) {
    if !tcb.sack.active {
        return;
    }
    tcb.sack.dup_acks = 0;
    tcb.sack.high_rxt = tcb.snd_una;
    tcb.sack.rescue_rxt = None;
    tcb.sack.fast_retransmit = false;
    tcb.sack.limited_from = None;
    let high_data = tcb.snd_max() - 1usize;
    tcb.cc.set_recover(high_data.0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::tcb::{TcbSettings, TcpState};
    use crate::wire::{FlowKey, IpEndpoint};
    use std::net::Ipv4Addr;

    const ISS: u32 = 0xffff_fc00;

    fn s(offset: u32) -> TcpSeqNumber {
        TcpSeqNumber(ISS.wrapping_add(offset))
    }

    /// An established connection (MSS 1000, no timestamps, cwnd 10
    /// segments) that sent 10 segments: 1..10001.
    fn sender() -> Tcb {
        let key = FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), 4000),
        };
        let mut t = Tcb::new(key, TcpState::Established, s(0), &TcbSettings::default());
        t.snd_mss = 1000;
        t.cc = crate::tcp::cc::CongestionControl::new(crate::tcp::cc::Algorithm::NewReno, 1000, ISS, Some(10));
        t.sack_permitted = true;
        t.sack.active = true;
        t.snd_una = s(1);
        t.snd_nxt = s(10_001);
        t.snd_high = s(10_001);
        t.snd_wnd = 64_000;
        t.send_buffer.extend(std::iter::repeat_n(0u8, 10_000));
        t
    }

    fn ack(t: &mut Tcb, blocks: &[(u32, u32)]) -> AckOutcome {
        let blocks: Vec<SackBlock> = blocks.iter().map(|&(l, r)| (s(l), s(r))).collect();
        on_ack(t, s(1), 0, &blocks, true, 0, 0)
    }

    #[test]
    fn three_acks_sacking_new_data_enter_recovery_with_half_the_flight() {
        let mut t = sender();
        let o = ack(&mut t, &[(1001, 2001)]);
        assert!(o.dup && !o.entered && o.want_output);
        assert_eq!(in_flight(&t), 9000, "limited transmit counts pipe");
        assert_eq!(usable_window(&t), 1000);
        ack(&mut t, &[(1001, 3001)]);
        // The same block again is no duplicate (RFC 6675 §2).
        assert!(!ack(&mut t, &[(1001, 3001)]).dup);
        let o = ack(&mut t, &[(1001, 4001)]);
        assert!(o.entered);
        assert!(t.cc.in_recovery());
        assert_eq!((t.cc.cwnd(), t.cc.ssthresh()), (5000, 5000));
        assert_eq!(t.cc.recover(), ISS.wrapping_add(10_000), "RecoveryPoint = HighData");
        assert!(t.sack.fast_retransmit);
        // pipe: 1:1001 lost (3000 SACKed above), 4001:10001 not.
        assert_eq!(in_flight(&t), 6000);
        assert_eq!(usable_window(&t), 0);
    }

    #[test]
    fn limited_transmit_segments_are_left_out_of_flight_size_at_the_reduction() {
        let mut t = sender();
        t.send_buffer.extend(std::iter::repeat_n(0u8, 2000));
        ack(&mut t, &[(1001, 2001)]);
        // Limited Transmit: one new segment on each of the first two.
        t.snd_nxt = s(11_001);
        ack(&mut t, &[(1001, 3001)]);
        t.snd_nxt = s(12_001);
        assert!(ack(&mut t, &[(1001, 4001)]).entered);
        assert_eq!(t.cc.ssthresh(), 5000, "10000 / 2, not 12000 / 2");
        assert_eq!(
            t.cc.recover(),
            ISS.wrapping_add(12_000),
            "RecoveryPoint is HighData all the same"
        );
    }

    #[test]
    fn is_lost_at_snd_una_enters_recovery_before_three_duplicates() {
        let mut t = sender();
        let o = ack(&mut t, &[(2001, 3001), (4001, 5001), (6001, 7001)]);
        assert!(o.entered, "step b: three discontiguous ranges above SND.UNA");
        assert_eq!(t.sack.dup_acks, 1);
    }

    #[test]
    fn the_cumulative_ack_past_the_recovery_point_ends_recovery() {
        let mut t = sender();
        ack(&mut t, &[(2001, 5001)]);
        assert!(t.cc.in_recovery());
        // A partial ACK: still in recovery.
        t.snd_una = s(5001);
        t.send_buffer.consume(5000);
        let o = on_ack(&mut t, s(5001), 5000, &[], false, 0, 0);
        assert!(!o.left && t.cc.in_recovery());
        assert!(t.sack.board.is_empty(), "pruned");
        t.snd_una = s(10_001);
        t.send_buffer.clear();
        let o = on_ack(&mut t, s(10_001), 5000, &[], false, 0, 0);
        assert!(o.left && !t.cc.in_recovery());
        assert_eq!(t.cc.cwnd(), 5000);
    }

    #[test]
    fn after_a_timeout_no_recovery_begins_below_the_recovery_point() {
        let mut t = sender();
        ack(&mut t, &[(2001, 3001)]);
        t.cc.on_timeout(t.flight_size(), ISS.wrapping_add(10_000));
        on_timeout(&mut t);
        t.snd_nxt = t.snd_una;
        assert_eq!(t.sack.board.ranges(), &[(s(2001), s(3001))], "§5.1: kept");
        for right in [4001, 5001, 6001] {
            assert!(!ack(&mut t, &[(2001, right)]).entered);
        }
        assert_eq!(t.sack.dup_acks, 3);
        // The data sent again is what counts as in flight.
        assert_eq!(in_flight(&t), 0);
        t.snd_nxt = s(1001);
        assert_eq!(in_flight(&t), 1000);
        t.snd_nxt = s(4001);
        assert_eq!(in_flight(&t), 1000 + 1000, "1:1001 and 3001:4001 (2001:3001 is SACKed)");
    }

    #[test]
    fn a_connection_without_the_element_counts_flight_size() {
        let mut t = sender();
        t.sack.active = false;
        t.sack.board.update(&[(s(2001), s(5001))], s(1), s(1), s(10_001));
        assert_eq!(in_flight(&t), 10_000);
        assert_eq!(usable_window(&t), 0);
    }
}
