//! CUBIC's window rule (RFC 9438), for NewReno's loss recovery
//! ([`super::newreno`]): CUBIC changes only how far the window falls on
//! a congestion event and how it grows in congestion avoidance; slow
//! start, fast retransmit and recovery stay RFC 5681's and RFC 6582's.
//!
//! Windows inside are in segments (f64), as the RFC writes them; the
//! rule's interface is bytes. Time is passed in (the router's clock, in
//! microseconds), with the smoothed RTT.
//!
//! | RFC 9438 | here |
//! |---|---|
//! | §4.1: C = 0.4, β_cubic = 0.7, α_cubic = 3(1-β)/(1+β) | [`C`], [`BETA`], [`ALPHA_AIMD`] |
//! | §4.2: W_cubic(t) = C(t-K)^3 + W_max, K = ∛((W_max - cwnd_epoch)/C), target W_cubic(t+RTT) clamped to [cwnd, 1.5 cwnd], cwnd += (target - cwnd)/cwnd per ACK | [`Cubic::w_cubic`], [`Cubic::avoid_at`] |
//! | §4.3: the Reno-friendly region, W_est += α·acked/cwnd, α = 1 once W_est ≥ cwnd_prior | [`Cubic::avoid_at`] |
//! | §4.4, §4.5: concave and convex regions | the same formula (§4.2) |
//! | §4.6: multiplicative decrease, ssthresh = flight_size · β_cubic, cwnd_prior | [`Cubic::on_congestion`] |
//! | §4.7: fast convergence, W_max = cwnd·(1+β)/2 when the window did not reach the last W_max | [`Cubic::on_congestion`] |
//! | §4.8: timeout: ssthresh as §4.6, then the first avoidance stage with K = 0 and W_max = cwnd at its start | [`Cubic::on_timeout`] |
//!
//! Left out: §4.9 (undoing a spurious reduction: no spurious-loss
//! detection here), §4.10's HyStart++ (slow start is RFC 5681's), and
//! §5's per-flow tuning of C and β.

use super::newreno::WindowRule;

/// RFC 9438 §4.1: the cubic's scaling constant (segments per second³).
pub const C: f64 = 0.4;
/// RFC 9438 §4.1: the multiplicative decrease factor.
pub const BETA: f64 = 0.7;
/// RFC 9438 §4.3: α_cubic, so that the Reno-friendly estimate grows as
/// fast on average as Reno with β = 0.5.
pub const ALPHA_AIMD: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// One congestion avoidance stage (an "epoch"): when it began, its K,
/// and the Reno-friendly estimate W_est (segments).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Epoch {
    start_us: u64,
    k: f64,
    w_est: f64,
}

/// CUBIC's state beside NewReno's.
#[derive(Debug, Clone, PartialEq)]
pub struct Cubic {
    /// W_max: the window (segments) before the last reduction, lowered
    /// by fast convergence.
    w_max: f64,
    /// cwnd_prior: the window (segments) at the last reduction (§4.3).
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    /// The next avoidance stage follows a timeout (§4.8).
    after_timeout: bool,
    /// §4.7's fast convergence (on by default, as the RFC recommends).
    pub fast_convergence: bool,
    /// The time and smoothed RTT of the call in progress (set by
    /// [`Cubic::at`]).
    now_us: u64,
    srtt_us: u64,
}

impl Default for Cubic {
    fn default() -> Cubic {
        Cubic::new()
    }
}

impl Cubic {
    /// A connection's start: no reduction yet (the first avoidance stage
    /// starts as after a timeout: K = 0, W_max the window then).
    pub fn new() -> Cubic {
        Cubic {
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch: None,
            after_timeout: true,
            fast_convergence: true,
            now_us: 0,
            srtt_us: 0,
        }
    }

    /// The rule for one call, at `now_us` with the smoothed RTT
    /// `srtt_us` (0 before any sample: the target is then W_cubic(t)).
    pub fn at(&mut self, now_us: u64, srtt_us: u64) -> &mut Cubic {
        self.now_us = now_us;
        self.srtt_us = srtt_us;
        self
    }

    /// W_max, segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// K of the current avoidance stage, seconds (None before it starts).
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }

    /// W_est of the current avoidance stage, segments.
    pub fn w_est(&self) -> Option<f64> {
        self.epoch.map(|e| e.w_est)
    }

    /// RFC 9438 §4.2 equation 1: W_cubic(t) = C(t-K)^3 + W_max, with
    /// `t` seconds into the stage.
    pub fn w_cubic(&self, t: f64) -> f64 {
        let k = self.epoch.map_or(0.0, |e| e.k);
        C * (t - k).powi(3) + self.w_max
    }

    /// RFC 9438 §4.6 (and §4.7): a congestion event with the window
    /// `cwnd` and `flight_size` bytes outstanding; returns ssthresh.
    pub fn on_congestion(&mut self, cwnd: u32, flight_size: u32, smss: u32) -> u32 {
        let cwnd_seg = cwnd as f64 / smss.max(1) as f64;
        // §4.7: a window that did not reach the last W_max means a new
        // flow takes bandwidth: give some up by lowering W_max further.
        self.w_max = if self.fast_convergence && cwnd_seg < self.w_max {
            cwnd_seg * (1.0 + BETA) / 2.0
        } else {
            cwnd_seg
        };
        self.cwnd_prior = cwnd_seg;
        self.epoch = None;
        self.after_timeout = false;
        (flight_size as f64 * BETA) as u32
    }

    /// RFC 9438 §4.8: after a timeout (and its §4.6 reduction), the next
    /// avoidance stage starts with K = 0 and W_max = its first window.
    pub fn on_timeout(&mut self) {
        self.after_timeout = true;
        self.epoch = None;
    }

    /// RFC 9438 §4.2-4.5: the window in bytes after an ACK of `acked`
    /// bytes in congestion avoidance.
    pub fn avoid_at(&mut self, cwnd: u32, acked: u32, smss: u32) -> u32 {
        let smss_f = smss.max(1) as f64;
        let cwnd_seg = cwnd as f64 / smss_f;
        let now = self.now_us;
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                // The stage begins: cwnd_epoch is the window now.
                let k = if self.after_timeout {
                    self.w_max = cwnd_seg;
                    0.0
                } else {
                    ((self.w_max - cwnd_seg).max(0.0) / C).cbrt()
                };
                self.after_timeout = false;
                Epoch {
                    start_us: now,
                    k,
                    w_est: cwnd_seg,
                }
            }
        };
        let mut epoch = epoch;
        // §4.3: W_est grows by α·(segments acknowledged)/cwnd, α = 1 once
        // it has reached the window of the last reduction.
        let alpha = if epoch.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA_AIMD
        };
        epoch.w_est += alpha * (acked as f64 / smss_f) / cwnd_seg;
        self.epoch = Some(epoch);
        let t = now.saturating_sub(epoch.start_us) as f64 / 1e6;
        let next = if self.w_cubic(t) < epoch.w_est {
            // §4.3: the Reno-friendly region.
            epoch.w_est
        } else {
            // §4.2: aim at W_cubic one RTT ahead, within [cwnd, 1.5 cwnd].
            let rtt = self.srtt_us as f64 / 1e6;
            let target = self.w_cubic(t + rtt).clamp(cwnd_seg, 1.5 * cwnd_seg);
            cwnd_seg + (target - cwnd_seg) / cwnd_seg
        };
        // Avoidance never shrinks the window.
        ((next * smss_f) as u32).max(cwnd)
    }
}

impl WindowRule for Cubic {
    fn on_congestion(&mut self, cwnd: u32, flight_size: u32, smss: u32) -> u32 {
        Cubic::on_congestion(self, cwnd, flight_size, smss)
    }
    fn avoid(&mut self, cwnd: u32, acked: u32, smss: u32) -> u32 {
        self.avoid_at(cwnd, acked, smss)
    }
    fn on_timeout(&mut self) {
        Cubic::on_timeout(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::newreno::NewReno;

    const MSS: u32 = 1000;

    /// A CUBIC that lost at 36 segments with 36 in flight: W_max = 36,
    /// ssthresh = 25.2 segments; K = ∛((36 - 25.2)/0.4) = ∛27 = 3 s.
    fn after_loss_at_36() -> Cubic {
        let mut c = Cubic::new();
        assert_eq!(c.on_congestion(36_000, 36_000, MSS), 25_200);
        c
    }

    #[test]
    fn the_constants_are_the_rfcs() {
        assert_eq!(C, 0.4);
        assert_eq!(BETA, 0.7);
        assert!((ALPHA_AIMD - 0.9 / 1.7).abs() < 1e-12);
    }

    #[test]
    fn a_loss_keeps_seven_tenths_of_the_flight_and_remembers_w_max() {
        let c = after_loss_at_36();
        assert_eq!(c.w_max(), 36.0);
        assert_eq!(c.cwnd_prior, 36.0);
        assert_eq!(c.k(), None, "the stage starts at the first avoidance ACK");
    }

    #[test]
    fn k_and_w_cubic_follow_equations_1_and_2() {
        let mut c = after_loss_at_36();
        // First avoidance ACK at t = 10 s, window 25.2 segments, no RTT.
        c.at(10_000_000, 0).avoid_at(25_200, MSS, MSS);
        assert!((c.k().unwrap() - 3.0).abs() < 1e-12);
        // W(0) = 0.4·(-27) + 36 = 25.2; W(3) = 36; W(4) = 36.4; W(5) = 39.2.
        assert!((c.w_cubic(0.0) - 25.2).abs() < 1e-12);
        assert_eq!(c.w_cubic(3.0), 36.0);
        assert!((c.w_cubic(4.0) - 36.4).abs() < 1e-12);
        assert!((c.w_cubic(5.0) - 39.2).abs() < 1e-12);
    }

    #[test]
    fn the_window_moves_towards_the_target_one_rtt_ahead_by_its_distance_over_cwnd() {
        let mut c = after_loss_at_36();
        c.at(0, 0).avoid_at(25_200, MSS, MSS);
        // At t = 4 s with an RTT of 1 s: target W(5) = 39.2 but at most
        // 1.5·30 = 45 and at least 30: 39.2. cwnd 30 → 30 + 9.2/30.
        // W_est (25.2 + α/25.2 ≈ 25.24, then + α/30) stays below W(4).
        let cwnd = c.at(4_000_000, 1_000_000).avoid_at(30_000, MSS, MSS);
        let expect = (30.0 + (39.2 - 30.0) / 30.0) * 1000.0;
        assert_eq!(cwnd, expect as u32);
        assert_eq!(cwnd, 30_306);
    }

    #[test]
    fn the_target_is_clamped_to_one_and_a_half_windows() {
        let mut c = after_loss_at_36();
        c.at(0, 0).avoid_at(25_200, MSS, MSS);
        // t = 20 s: W(20) = 0.4·17³ + 36 = 1965.2, far beyond 1.5·40 = 60:
        // cwnd 40 → 40 + 20/40 = 40.5 segments.
        assert_eq!(c.at(20_000_000, 0).avoid_at(40_000, MSS, MSS), 40_500);
    }

    #[test]
    fn in_the_reno_friendly_region_the_window_is_w_est() {
        let mut c = after_loss_at_36();
        // First ACK at t = 0: W_est = 25.2 + α·1/25.2; W(0) = 25.2 is below
        // it, so cwnd = W_est.
        let cwnd = c.at(0, 0).avoid_at(25_200, MSS, MSS);
        let w_est = 25.2 + ALPHA_AIMD / 25.2;
        assert_eq!(c.w_est(), Some(w_est));
        assert_eq!(cwnd, (w_est * 1000.0) as u32);
        assert_eq!(cwnd, 25_221);
    }

    #[test]
    fn alpha_becomes_one_once_w_est_reaches_cwnd_prior() {
        let mut c = Cubic::new();
        c.on_congestion(10_000, 10_000, MSS);
        c.at(0, 0).avoid_at(10_000, MSS, MSS);
        // W_est started at 10 = cwnd_prior: α = 1, + 1/10.
        assert!((c.w_est().unwrap() - 10.1).abs() < 1e-12);
    }

    #[test]
    fn fast_convergence_lowers_w_max_when_the_window_fell_short_of_it() {
        let mut c = after_loss_at_36();
        // Lost again at 30 segments < W_max 36: W_max = 30·1.7/2 = 25.5.
        assert_eq!(c.on_congestion(30_000, 30_000, MSS), 21_000);
        assert!((c.w_max() - 25.5).abs() < 1e-12);
        let mut off = after_loss_at_36();
        off.fast_convergence = false;
        off.on_congestion(30_000, 30_000, MSS);
        assert_eq!(off.w_max(), 30.0);
    }

    #[test]
    fn after_a_timeout_k_is_zero_and_w_max_is_the_window_at_the_stage_start() {
        let mut c = after_loss_at_36();
        c.on_timeout();
        c.at(1_000_000, 0).avoid_at(8_000, MSS, MSS);
        assert_eq!(c.k(), Some(0.0));
        assert_eq!(c.w_max(), 8.0);
    }

    #[test]
    fn with_newreno_recovery_the_window_after_a_loss_is_seven_tenths_of_w_max() {
        // A window of 36 segments, all in flight; three duplicates, then
        // the full ACK.
        let iss = 0;
        let mut r = NewReno::new(MSS, iss, Some(36));
        let mut c = Cubic::new();
        assert_eq!(r.cwnd(), 36_000);
        let high = 36_000;
        for _ in 0..3 {
            r.on_dup_ack_with(c.at(0, 0), 1001, 36_000, high);
        }
        assert!(r.in_recovery());
        assert_eq!(r.ssthresh(), 25_200, "0.7 · 36 000");
        assert_eq!(c.w_max(), 36.0, "W_max: the window at the loss");
        r.on_new_ack_with(c.at(0, 0), high + 1, 36_000, 30_000);
        assert!(!r.in_recovery());
        assert_eq!(r.cwnd(), 25_200, "0.7 W_max: min(ssthresh, FlightSize + SMSS)");
    }
}
