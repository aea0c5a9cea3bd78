//! NewReno congestion control (RFC 5681 and RFC 6582): slow start,
//! congestion avoidance, fast retransmit on the third duplicate ACK, and
//! fast recovery that stays in recovery through partial ACKs until every
//! segment outstanding at the loss is acknowledged.
//!
//! The element TCPNewRenoAck calls this on each ACK, with the acked-bytes
//! annotation TCPProcessAck computed; the retransmission timer calls
//! [`NewReno::on_timeout`]. Sequence numbers are the raw 32-bit values,
//! compared modulo 2^32 (RFC 9293 §3.4).
//!
//! The loss recovery here (when to retransmit, recovery's window
//! inflation and deflation, `recover`) is shared by every congestion
//! control of the stack; what differs between them is the window rule
//! ([`WindowRule`]): how far the window falls on a congestion event and
//! how it grows in congestion avoidance. NewReno's own is [`Reno`];
//! CUBIC's is in [`super::cubic`]. The `_with` methods take the rule.
//!
//! For a connection with SACK permitted and TCPSackRecovery in its path,
//! RFC 6675 ([`super::sack`]) runs the loss recovery instead: it enters
//! and leaves recovery here ([`NewReno::enter_sack_recovery_with`],
//! [`NewReno::leave_sack_recovery`]) and the ACKs only grow the window
//! ([`NewReno::on_sack_ack_with`]); the window rule and the timeout stay
//! shared.

/// What the sender must do after an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckAction {
    /// Nothing beyond sending what the new window allows.
    None,
    /// Retransmit the first unacknowledged segment: fast retransmit
    /// (RFC 5681 §3.2 step 2), or a partial ACK in recovery (RFC 6582
    /// §3.2 step 5). `restart_timer` is set for fast retransmit and for
    /// the first partial ACK only (RFC 6582 §3.2 step 5, the "impatient"
    /// variant).
    Retransmit { restart_timer: bool },
}

/// The part of a congestion control that NewReno's loss recovery leaves
/// open: the threshold after a congestion event and the growth in
/// congestion avoidance. Windows are bytes.
pub trait WindowRule {
    /// The new ssthresh after a congestion event (a loss found by
    /// duplicate ACKs, a timeout, an ECN echo): `cwnd` the window before
    /// it, `flight_size` the bytes outstanding.
    fn on_congestion(&mut self, cwnd: u32, flight_size: u32, smss: u32) -> u32;
    /// The window after an ACK of `acked` new bytes in congestion
    /// avoidance (cwnd at or above ssthresh, not in recovery).
    fn avoid(&mut self, cwnd: u32, acked: u32, smss: u32) -> u32;
    /// The retransmission timer expired (after `on_congestion`).
    fn on_timeout(&mut self) {}
}

/// NewReno's window rule (RFC 5681 §3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reno;

impl WindowRule for Reno {
    /// Equation 4: half the data in flight, at least two segments.
    fn on_congestion(&mut self, _cwnd: u32, flight_size: u32, smss: u32) -> u32 {
        (flight_size / 2).max(2 * smss)
    }
    /// Equation 3: about one segment per RTT (SMSS*SMSS/cwnd per ACK, at
    /// least one byte).
    fn avoid(&mut self, cwnd: u32, _acked: u32, smss: u32) -> u32 {
        let step = ((smss as u64 * smss as u64) / cwnd.max(1) as u64).max(1);
        cwnd.saturating_add(step as u32)
    }
}

/// The congestion state of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReno {
    smss: u32,
    cwnd: u32,
    ssthresh: u32,
    dup_acks: u32,
    /// RFC 6582 §3.2: the highest sequence number sent when recovery
    /// began; starts at the initial send sequence number (step 1).
    recover: u32,
    in_recovery: bool,
    /// A partial ACK already restarted the timer in this recovery.
    partial_ack_seen: bool,
    /// A reduction without loss (ECN) just happened: the next new ACK
    /// does not grow the window (RFC 3168 §6.1.2).
    hold_growth: bool,
}

/// a > b, modulo 2^32 (RFC 9293 §3.4).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl NewReno {
    /// A connection's start: `smss` the sender's maximum segment size,
    /// `iss` its initial send sequence number. The initial window is
    /// RFC 5681 §3.1's (equation 1) unless `initial_segments` gives
    /// another (RFC 6928's 10, as Linux, is a setting).
    pub fn new(smss: u32, iss: u32, initial_segments: Option<u32>) -> NewReno {
        let smss = smss.max(1);
        let segments = initial_segments.unwrap_or(match smss {
            0..=1095 => 4,
            1096..=2190 => 3,
            _ => 2,
        });
        NewReno {
            smss,
            cwnd: smss.saturating_mul(segments.max(1)),
            // §3.1: "arbitrarily high".
            ssthresh: u32::MAX,
            dup_acks: 0,
            recover: iss,
            in_recovery: false,
            partial_ack_seen: false,
            hold_growth: false,
        }
    }

    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// Whether fast recovery is under way.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Duplicate ACKs counted since the last new one.
    pub fn dup_acks(&self) -> u32 {
        self.dup_acks
    }

    /// The sender's maximum segment size, bytes.
    pub fn smss(&self) -> u32 {
        self.smss
    }

    /// A congestion signal without a loss (an ECN echo, RFC 3168
    /// §6.1.2): ssthresh becomes `ssthresh` (at least two segments) and
    /// the window falls to it; nothing is retransmitted. The caller has
    /// checked it is the first signal of its window and no recovery runs.
    pub fn reduce(&mut self, ssthresh: u32) {
        self.ssthresh = ssthresh.max(2 * self.smss);
        self.cwnd = self.ssthresh;
        // RFC 3168 §6.1.2: "the TCP sender SHOULD NOT increase the
        // congestion window in response to" the ACK that carried the echo
        // (the elements reduce before the window grows on that ACK).
        self.hold_growth = true;
    }

    /// An ACK that acknowledges new data: `ack` its acknowledgment
    /// number, `acked` the bytes it newly acknowledges, `flight_size`
    /// the bytes still outstanding after it.
    pub fn on_new_ack(&mut self, ack: u32, acked: u32, flight_size: u32) -> AckAction {
        self.on_new_ack_with(&mut Reno, ack, acked, flight_size)
    }

    /// [`NewReno::on_new_ack`] with another window rule.
    pub fn on_new_ack_with(
        &mut self,
        rule: &mut (impl WindowRule + ?Sized),
        ack: u32,
        acked: u32,
        flight_size: u32,
    ) -> AckAction {
        self.dup_acks = 0;
        if self.in_recovery {
            // RFC 6582 §3.2 step 6: a full acknowledgment, of everything up
            // to and including `recover`: leave recovery with
            // min(ssthresh, max(FlightSize, SMSS) + SMSS) (option 1).
            if after(ack, self.recover) {
                self.in_recovery = false;
                self.cwnd = self.ssthresh.min(flight_size.max(self.smss) + self.smss);
                return AckAction::None;
            }
            // Step 5: a partial acknowledgment: retransmit the first
            // unacknowledged segment, deflate the window by what was
            // acknowledged, and add one segment back if that was at least
            // one segment, so about ssthresh stays in flight.
            self.cwnd = self.cwnd.saturating_sub(acked);
            if acked >= self.smss {
                self.cwnd += self.smss;
            }
            let first = !self.partial_ack_seen;
            self.partial_ack_seen = true;
            return AckAction::Retransmit { restart_timer: first };
        }
        self.grow_with(rule, acked);
        AckAction::None
    }

    /// The window's growth on an ACK of `acked` new bytes outside
    /// recovery.
    fn grow_with(&mut self, rule: &mut (impl WindowRule + ?Sized), acked: u32) {
        if std::mem::take(&mut self.hold_growth) {
            return;
        }
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1 equation 2: slow start, at most one segment
            // per ACK (appropriate byte counting with L = 1, RFC 3465).
            self.cwnd = self.cwnd.saturating_add(acked.min(self.smss));
        } else {
            // Congestion avoidance: the rule's (RFC 5681 equation 3 for
            // NewReno).
            self.cwnd = rule.avoid(self.cwnd, acked, self.smss);
        }
    }

    /// The recovery point: the highest sequence number sent when the last
    /// recovery or timeout began (RFC 6582's `recover`, RFC 6675's
    /// RecoveryPoint).
    pub fn recover(&self) -> u32 {
        self.recover
    }

    /// RFC 6675 §5.1: after a timeout RecoveryPoint is HighData, the
    /// highest sequence number sent (which SND.NXT may no longer say after
    /// an earlier timeout).
    pub fn set_recover(&mut self, high_data: u32) {
        self.recover = high_data;
    }

    /// SACK-based loss recovery begins (RFC 6675 §5 steps 4.1 and 4.2):
    /// RecoveryPoint is `high_data`, and cwnd = ssthresh = the rule's
    /// reduction (RFC 5681 equation 4 for NewReno: half of FlightSize).
    /// There is no window inflation: RFC 6675 counts the data in flight
    /// (pipe) instead.
    pub fn enter_sack_recovery_with(
        &mut self,
        rule: &mut (impl WindowRule + ?Sized),
        flight_size: u32,
        high_data: u32,
    ) {
        self.recover = high_data;
        self.ssthresh = rule.on_congestion(self.cwnd, flight_size, self.smss).max(2 * self.smss);
        self.cwnd = self.ssthresh;
        self.in_recovery = true;
        self.partial_ack_seen = false;
        self.dup_acks = 0;
        // The ACK that ends recovery does not grow the window (as
        // NewReno's full acknowledgment, RFC 6582 §3.2 step 6).
        self.hold_growth = true;
    }

    /// SACK-based recovery ends (RFC 6675 §5 step A: the cumulative ACK
    /// passed RecoveryPoint); the window stays at ssthresh.
    pub fn leave_sack_recovery(&mut self) {
        self.in_recovery = false;
    }

    /// An ACK of `acked` new bytes on a connection whose loss recovery is
    /// RFC 6675's: the window grows outside recovery and stays as it is
    /// during it (no partial-ACK deflation: pipe accounts for it).
    pub fn on_sack_ack_with(&mut self, rule: &mut (impl WindowRule + ?Sized), acked: u32) {
        self.dup_acks = 0;
        if !self.in_recovery {
            self.grow_with(rule, acked);
        }
    }

    /// A duplicate ACK (RFC 5681 §2's definition, which the caller
    /// checks: no data, no window change, outstanding data, the same
    /// acknowledgment number). `high_data` is the highest sequence number
    /// sent so far.
    pub fn on_dup_ack(&mut self, ack: u32, flight_size: u32, high_data: u32) -> AckAction {
        self.on_dup_ack_with(&mut Reno, ack, flight_size, high_data)
    }

    /// [`NewReno::on_dup_ack`] with another window rule.
    pub fn on_dup_ack_with(
        &mut self,
        rule: &mut (impl WindowRule + ?Sized),
        ack: u32,
        flight_size: u32,
        high_data: u32,
    ) -> AckAction {
        self.dup_acks = self.dup_acks.saturating_add(1);
        if self.in_recovery {
            // RFC 5681 §3.2 step 4: each further duplicate means a segment
            // has left the network: inflate the window by one.
            self.cwnd = self.cwnd.saturating_add(self.smss);
            return AckAction::None;
        }
        if self.dup_acks != 3 {
            return AckAction::None;
        }
        // RFC 6582 §3.2 step 1: only if the ACK covers more than
        // `recover`; otherwise these duplicates are from segments sent
        // before an earlier loss, and ssthresh stays as it is. "Covers
        // more than recover" is read as SEG.ACK > recover (as FreeBSD
        // does): with `recover` at the ISS, duplicates of ISS + 1 (the
        // connection's first data segment lost) do enter fast retransmit.
        // The test exists to avoid a false fast retransmit after a
        // timeout (§4), which a connection's start has not had.
        if !after(ack, self.recover) {
            return AckAction::None;
        }
        self.recover = high_data;
        // RFC 5681 §3.2 steps 2 and 3 (the threshold by the rule).
        self.ssthresh = rule.on_congestion(self.cwnd, flight_size, self.smss).max(2 * self.smss);
        self.cwnd = self.ssthresh.saturating_add(3 * self.smss);
        self.in_recovery = true;
        self.partial_ack_seen = false;
        self.hold_growth = false;
        AckAction::Retransmit { restart_timer: true }
    }

    /// The retransmission timer expired (RFC 5681 §3.1: ssthresh from
    /// equation 4, the loss window of one segment; RFC 6582 §4: recovery
    /// ends and `recover` becomes the highest sequence number sent).
    pub fn on_timeout(&mut self, flight_size: u32, high_data: u32) {
        self.on_timeout_with(&mut Reno, flight_size, high_data)
    }

    /// [`NewReno::on_timeout`] with another window rule.
    pub fn on_timeout_with(&mut self, rule: &mut (impl WindowRule + ?Sized), flight_size: u32, high_data: u32) {
        self.ssthresh = rule.on_congestion(self.cwnd, flight_size, self.smss).max(2 * self.smss);
        rule.on_timeout();
        self.cwnd = self.smss;
        self.recover = high_data;
        self.in_recovery = false;
        self.dup_acks = 0;
        self.hold_growth = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;
    const ISS: u32 = 0xffff_ff00;

    fn reno() -> NewReno {
        NewReno::new(MSS, ISS, None)
    }

    #[test]
    fn the_initial_window_follows_rfc_5681_equation_1() {
        assert_eq!(NewReno::new(1000, 0, None).cwnd(), 4000);
        assert_eq!(NewReno::new(1460, 0, None).cwnd(), 3 * 1460);
        assert_eq!(NewReno::new(8960, 0, None).cwnd(), 2 * 8960);
        assert_eq!(NewReno::new(1460, 0, Some(10)).cwnd(), 14600);
        assert_eq!(NewReno::new(1460, 0, None).ssthresh(), u32::MAX);
    }

    #[test]
    fn slow_start_grows_by_at_most_a_segment_per_ack_then_avoidance_by_a_segment_per_window() {
        let mut r = reno();
        assert_eq!(r.on_new_ack(ISS.wrapping_add(3001), 3000, 1000), AckAction::None);
        assert_eq!(r.cwnd(), 5000, "one segment for an ACK of three");
        r.on_new_ack(ISS.wrapping_add(3501), 500, 1000);
        assert_eq!(r.cwnd(), 5500);
        r.on_timeout(8000, ISS.wrapping_add(9000));
        assert_eq!((r.cwnd(), r.ssthresh()), (1000, 4000));
        // Slow start to ssthresh, then cwnd grows SMSS*SMSS/cwnd per ACK.
        for _ in 0..3 {
            r.on_new_ack(ISS.wrapping_add(9000), 1000, 0);
        }
        assert_eq!(r.cwnd(), 4000);
        r.on_new_ack(ISS.wrapping_add(10000), 1000, 0);
        assert_eq!(r.cwnd(), 4250);
    }

    #[test]
    fn the_third_duplicate_ack_starts_fast_retransmit_and_recovery() {
        let mut r = reno();
        let una = ISS.wrapping_add(1001);
        r.on_new_ack(una, 1000, 8000);
        let high = ISS.wrapping_add(9000);
        assert_eq!(r.on_dup_ack(una, 8000, high), AckAction::None);
        assert_eq!(r.on_dup_ack(una, 8000, high), AckAction::None);
        assert_eq!(
            r.on_dup_ack(una, 8000, high),
            AckAction::Retransmit { restart_timer: true }
        );
        assert!(r.in_recovery());
        assert_eq!(r.ssthresh(), 4000);
        assert_eq!(r.cwnd(), 4000 + 3 * MSS);
        // Each further duplicate inflates by one segment.
        assert_eq!(r.on_dup_ack(una, 8000, high), AckAction::None);
        assert_eq!(r.cwnd(), 8000);
    }

    #[test]
    fn partial_acks_keep_recovery_and_retransmit_and_a_full_ack_ends_it() {
        let mut r = reno();
        let una = ISS.wrapping_add(1001);
        r.on_new_ack(una, 1000, 8000);
        let high = ISS.wrapping_add(9001);
        for _ in 0..3 {
            r.on_dup_ack(una, 8000, high);
        }
        let cwnd = r.cwnd();
        // Partial: 2000 bytes acknowledged, below recover.
        let action = r.on_new_ack(una.wrapping_add(2000), 2000, 6000);
        assert_eq!(action, AckAction::Retransmit { restart_timer: true });
        assert_eq!(r.cwnd(), cwnd - 2000 + MSS);
        assert!(r.in_recovery());
        // A second partial ACK does not restart the timer again.
        let action = r.on_new_ack(una.wrapping_add(2500), 500, 5500);
        assert_eq!(action, AckAction::Retransmit { restart_timer: false });
        assert_eq!(r.cwnd(), cwnd - 2000 + MSS - 500);
        // Full: everything through recover (high) acknowledged.
        assert_eq!(r.on_new_ack(high.wrapping_add(1), 5500, 0), AckAction::None);
        assert!(!r.in_recovery());
        assert_eq!(r.cwnd(), 2 * MSS, "min(ssthresh, max(FlightSize, SMSS) + SMSS)");
    }

    #[test]
    fn duplicates_not_covering_recover_do_not_start_another_recovery() {
        let mut r = reno();
        let una = ISS.wrapping_add(1001);
        r.on_new_ack(una, 1000, 8000);
        r.on_timeout(8000, ISS.wrapping_add(9001));
        let ssthresh = r.ssthresh();
        // Duplicates for data sent before the timeout: the ACK does not
        // cover more than recover.
        for _ in 0..5 {
            assert_eq!(r.on_dup_ack(una, 8000, ISS.wrapping_add(9001)), AckAction::None);
        }
        assert!(!r.in_recovery());
        assert_eq!(r.ssthresh(), ssthresh);
    }

    #[test]
    fn the_first_data_segment_lost_enters_fast_retransmit() {
        // RFC 6582 §3.2 step 1 read as SEG.ACK > recover, recover = ISS:
        // three duplicates of ISS + 1 (only the SYN acknowledged) do
        // enter fast retransmit.
        let mut r = reno();
        let syn_acked = ISS.wrapping_add(1);
        for _ in 0..2 {
            assert_eq!(r.on_dup_ack(syn_acked, 4000, ISS.wrapping_add(4000)), AckAction::None);
        }
        assert_eq!(
            r.on_dup_ack(syn_acked, 4000, ISS.wrapping_add(4000)),
            AckAction::Retransmit { restart_timer: true }
        );
        assert!(r.in_recovery());
        assert_eq!(r.recover(), ISS.wrapping_add(4000));
    }

    #[test]
    fn duplicates_of_an_ack_at_recover_do_not_enter_recovery_again() {
        // After a timeout `recover` is the highest sequence number sent;
        // duplicate ACKs that do not pass it are from segments sent
        // before the timeout (RFC 6582 §4).
        let mut r = reno();
        r.on_timeout(4000, ISS.wrapping_add(4000));
        for _ in 0..3 {
            assert_eq!(
                r.on_dup_ack(ISS.wrapping_add(4000), 1000, ISS.wrapping_add(5000)),
                AckAction::None
            );
        }
        assert!(!r.in_recovery());
        assert_eq!(
            r.on_dup_ack(ISS.wrapping_add(4000), 1000, ISS.wrapping_add(5000)),
            AckAction::None
        );
        let mut r = reno();
        r.on_timeout(4000, ISS.wrapping_add(4000));
        for _ in 0..2 {
            r.on_dup_ack(ISS.wrapping_add(4001), 1000, ISS.wrapping_add(5000));
        }
        assert_eq!(
            r.on_dup_ack(ISS.wrapping_add(4001), 1000, ISS.wrapping_add(5000)),
            AckAction::Retransmit { restart_timer: true },
            "an ACK one past recover covers more than it"
        );
    }

    #[test]
    fn a_reduction_without_loss_drops_to_ssthresh_and_skips_the_next_growth() {
        let mut r = reno();
        r.reduce(3000);
        assert_eq!((r.cwnd(), r.ssthresh()), (3000, 3000));
        r.on_new_ack(ISS.wrapping_add(1001), 1000, 2000);
        assert_eq!(r.cwnd(), 3000, "the ACK that carried the echo");
        r.on_new_ack(ISS.wrapping_add(2001), 1000, 2000);
        assert_eq!(r.cwnd(), 3333, "then avoidance: 1000·1000/3000");
        r.reduce(100);
        assert_eq!(r.ssthresh(), 2 * MSS, "at least two segments");
    }

    #[test]
    fn sequence_numbers_compare_across_the_wrap() {
        assert!(after(5, 0xffff_fff0));
        assert!(!after(0xffff_fff0, 5));
        assert!(!after(7, 7));
    }
}
