//! The open loop's request times, drawn before the requests are sent: a
//! request's latency counts from the time it was scheduled for, so a
//! client that falls behind shows the delay instead of hiding it.

use clap::ValueEnum;
use std::time::{Duration, Instant};

/// The distribution of the gaps between scheduled requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InterArrival {
    /// Exponential gaps (a Poisson process) with mean 1/rate.
    Poisson,
    /// Every gap exactly 1/rate.
    Fixed,
}

/// A sequence of scheduled request times at a given rate.
#[derive(Debug)]
pub struct Schedule {
    next: Instant,
    mean_gap_s: f64,
    arrival: InterArrival,
    rng: u64,
}

impl Schedule {
    /// A schedule starting at `start` (the first request one gap after
    /// it) at `rate` requests per second (more than 0).
    pub fn new(start: Instant, rate: f64, arrival: InterArrival, seed: u64) -> Schedule {
        let mut s = Schedule {
            next: start,
            mean_gap_s: 1.0 / rate,
            arrival,
            rng: seed | 1,
        };
        let g = s.gap();
        s.next += g;
        s
    }

    /// The time of the next request.
    pub fn peek(&self) -> Instant {
        self.next
    }

    /// Takes the next request's time and draws the one after.
    pub fn take(&mut self) -> Instant {
        let t = self.next;
        let g = self.gap();
        self.next += g;
        t
    }

    fn gap(&mut self) -> Duration {
        let s = match self.arrival {
            InterArrival::Fixed => self.mean_gap_s,
            // Inverse transform: -ln(U) * mean with U uniform in (0, 1].
            InterArrival::Poisson => -self.uniform().ln() * self.mean_gap_s,
        };
        Duration::from_secs_f64(s.min(3600.0))
    }

    /// Uniform in (0, 1] from a xorshift64 generator (53 bits).
    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_gaps_are_exactly_one_over_the_rate() {
        let start = Instant::now();
        let mut s = Schedule::new(start, 1000.0, InterArrival::Fixed, 1);
        for i in 1..=5u64 {
            assert_eq!(s.take() - start, Duration::from_millis(i));
        }
    }

    #[test]
    fn poisson_gaps_average_one_over_the_rate() {
        let start = Instant::now();
        let mut s = Schedule::new(start, 10_000.0, InterArrival::Poisson, 7);
        let n = 100_000;
        let mut last = start;
        let mut below_mean = 0;
        for _ in 0..n {
            let t = s.take();
            if t - last < Duration::from_micros(100) {
                below_mean += 1;
            }
            last = t;
        }
        let mean = (last - start).as_secs_f64() / n as f64;
        assert!((mean - 1e-4).abs() < 2e-6, "mean gap {mean}");
        // P(gap < mean) = 1 - 1/e = 0.632 for an exponential distribution.
        let share = below_mean as f64 / n as f64;
        assert!((share - 0.632).abs() < 0.01, "share below the mean {share}");
    }
}
