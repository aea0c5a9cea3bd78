//! The retransmission timeout (RFC 6298): a smoothed round-trip time and
//! its variation from the samples TCPEstimateRTT takes, and the timeout
//! derived from them, doubled on every expiry (exponential back-off).
//!
//! Times are microseconds, as the graph's clock gives them. The RFC's
//! constants (§2): alpha = 1/8, beta = 1/4, K = 4; the clock granularity
//! G is the graph's, 1 µs, so `max(G, K * RTTVAR)` is `K * RTTVAR` but for
//! a variation of zero.

/// RFC 6298 §2.1: the timeout before any sample, 1 s.
pub const INITIAL_RTO_US: u64 = 1_000_000;

/// The estimator's settings: the bounds of the timeout. RFC 6298 §2.4
/// says the timeout SHOULD be at least 1 s; Linux uses 200 ms, and so do
/// we by default (a data centre path has RTTs of microseconds), but the
/// RFC's value is one setting away. §2.5: a maximum, at least 60 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoBounds {
    pub min_us: u64,
    pub max_us: u64,
}

impl Default for RtoBounds {
    fn default() -> RtoBounds {
        RtoBounds {
            min_us: 200_000,
            max_us: 120_000_000,
        }
    }
}

/// RFC 6298's state: SRTT, RTTVAR, RTO, and the back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    /// Smoothed round-trip time; None until the first sample.
    srtt_us: Option<u64>,
    rttvar_us: u64,
    /// The timeout before back-off.
    rto_us: u64,
    /// Expiries since the last new sample: the timeout is doubled this
    /// many times (RFC 6298 §5.5).
    backoffs: u32,
    bounds: RtoBounds,
}

impl RttEstimator {
    pub fn new(bounds: RtoBounds) -> RttEstimator {
        RttEstimator {
            srtt_us: None,
            rttvar_us: 0,
            rto_us: INITIAL_RTO_US.clamp(bounds.min_us, bounds.max_us),
            backoffs: 0,
            bounds,
        }
    }

    /// A round-trip sample. The caller applies Karn's algorithm (RFC 6298
    /// §3): no sample from a segment that was retransmitted, unless the
    /// timestamp option says which transmission the ACK is for (RFC 7323
    /// §4). A new sample ends the back-off (§5.7 lets the timeout stay
    /// backed off until then).
    pub fn sample(&mut self, rtt_us: u64) {
        match self.srtt_us {
            // §2.2: the first measurement R: SRTT = R, RTTVAR = R/2.
            None => {
                self.srtt_us = Some(rtt_us);
                self.rttvar_us = rtt_us / 2;
            }
            // §2.3: RTTVAR first, from the old SRTT:
            // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R'|, SRTT = 7/8 SRTT + 1/8 R'.
            Some(srtt) => {
                let error = srtt.abs_diff(rtt_us);
                self.rttvar_us = (3 * self.rttvar_us + error) / 4;
                self.srtt_us = Some((7 * srtt + rtt_us) / 8);
            }
        }
        // §2.2/2.3: RTO = SRTT + max(G, K * RTTVAR), G = 1 µs, K = 4,
        // then §2.4/2.5's bounds.
        let srtt = self.srtt_us.unwrap_or(rtt_us);
        self.rto_us = (srtt + (4 * self.rttvar_us).max(1)).clamp(self.bounds.min_us, self.bounds.max_us);
        self.backoffs = 0;
    }

    /// The handshake completed after our SYN or SYN-ACK timed out, with no
    /// sample taken (RFC 6298 §5.7): data starts with an RTO of at least
    /// 3 s, the back-off forgotten.
    pub fn after_syn_timeout(&mut self) {
        if self.backoffs > 0 && self.srtt_us.is_none() {
            self.rto_us = self.rto_us.max(3_000_000).clamp(self.bounds.min_us, self.bounds.max_us);
            self.backoffs = 0;
        }
    }

    /// The retransmission timer expired: back off (RFC 6298 §5.5, "RTO
    /// <- RTO * 2", up to the maximum).
    pub fn back_off(&mut self) {
        self.backoffs = self.backoffs.saturating_add(1);
    }

    /// The timeout to arm now, back-off included.
    pub fn rto_us(&self) -> u64 {
        let shift = self.backoffs.min(32);
        self.rto_us.saturating_mul(1u64 << shift).min(self.bounds.max_us)
    }

    /// Expiries since the last sample (for a user timeout or a limit on
    /// retransmissions, RFC 1122 §4.2.3.5's R1/R2).
    pub fn backoffs(&self) -> u32 {
        self.backoffs
    }

    /// The smoothed round-trip time, once there is one.
    pub fn srtt_us(&self) -> Option<u64> {
        self.srtt_us
    }

    pub fn rttvar_us(&self) -> u64 {
        self.rttvar_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC: RtoBounds = RtoBounds {
        min_us: 1_000_000,
        max_us: 60_000_000,
    };

    #[test]
    fn before_any_sample_the_timeout_is_one_second() {
        assert_eq!(RttEstimator::new(RFC).rto_us(), 1_000_000);
        // Clamped to the bounds in force (Linux-like minimum 200 ms: the
        // initial 1 s is above it and stays).
        assert_eq!(RttEstimator::new(RtoBounds::default()).rto_us(), 1_000_000);
    }

    #[test]
    fn the_first_sample_sets_srtt_and_half_of_it_as_variation() {
        let mut e = RttEstimator::new(RtoBounds {
            min_us: 1,
            max_us: 60_000_000,
        });
        e.sample(100_000);
        assert_eq!(e.srtt_us(), Some(100_000));
        assert_eq!(e.rttvar_us(), 50_000);
        // 100 ms + 4 * 50 ms.
        assert_eq!(e.rto_us(), 300_000);
    }

    #[test]
    fn later_samples_update_the_variation_from_the_old_average_first() {
        let mut e = RttEstimator::new(RtoBounds {
            min_us: 1,
            max_us: 60_000_000,
        });
        e.sample(100_000);
        e.sample(200_000);
        // RTTVAR = 3/4 * 50 ms + 1/4 * |100 - 200| ms = 62.5 ms
        // SRTT = 7/8 * 100 ms + 1/8 * 200 ms = 112.5 ms
        assert_eq!(e.rttvar_us(), 62_500);
        assert_eq!(e.srtt_us(), Some(112_500));
        assert_eq!(e.rto_us(), 112_500 + 4 * 62_500);
    }

    #[test]
    fn the_timeout_stays_within_its_bounds() {
        let mut e = RttEstimator::new(RFC);
        e.sample(10_000);
        assert_eq!(e.rto_us(), 1_000_000, "RFC 6298 §2.4: at least 1 s");
        let mut e = RttEstimator::new(RFC);
        e.sample(50_000_000);
        assert_eq!(e.rto_us(), 60_000_000, "§2.5: at most the maximum");
    }

    #[test]
    fn each_expiry_doubles_the_timeout_until_a_new_sample() {
        let mut e = RttEstimator::new(RFC);
        e.sample(500_000);
        let base = e.rto_us();
        assert_eq!(base, 1_500_000);
        e.back_off();
        assert_eq!(e.rto_us(), 3_000_000);
        e.back_off();
        assert_eq!(e.rto_us(), 6_000_000);
        for _ in 0..100 {
            e.back_off();
        }
        assert_eq!(e.rto_us(), 60_000_000, "capped, no overflow");
        assert_eq!(e.backoffs(), 102);
        e.sample(500_000);
        assert_eq!(e.backoffs(), 0);
        assert!(e.rto_us() < 3_000_000);
    }

    #[test]
    fn a_handshake_that_timed_out_starts_data_at_three_seconds() {
        let mut e = RttEstimator::new(RFC);
        e.after_syn_timeout();
        assert_eq!(e.rto_us(), 1_000_000, "no timeout, no change");
        e.back_off();
        assert_eq!(e.rto_us(), 2_000_000);
        e.after_syn_timeout();
        assert_eq!((e.rto_us(), e.backoffs()), (3_000_000, 0));
    }

    #[test]
    fn a_zero_variation_still_adds_the_clock_granularity() {
        let mut e = RttEstimator::new(RtoBounds {
            min_us: 1,
            max_us: 60_000_000,
        });
        for _ in 0..200 {
            e.sample(1_000);
        }
        assert_eq!(e.rttvar_us(), 0);
        assert_eq!(e.rto_us(), 1_001);
    }
}
