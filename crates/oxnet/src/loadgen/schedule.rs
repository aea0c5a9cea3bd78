//! The open loop's request times, drawn before the requests are sent: a
//! request's latency counts from the time it was scheduled for, so a
//! client that falls behind shows the delay instead of hiding it.

use super::etc::{Generator, Uniform01};
use std::time::{Duration, Instant};

/// The distribution of the gaps between scheduled requests.
#[derive(Clone, Debug, PartialEq)]
pub enum InterArrival {
    /// Exponential gaps (a Poisson process) with mean 1/rate.
    Poisson,
    /// Every gap exactly 1/rate.
    Fixed,
    /// Gaps from a mutilate generator (`-i fb_ia`, `-i pareto:...`),
    /// its mean set to 1/rate ([`Generator::set_rate`]).
    Dist(Generator),
}

impl InterArrival {
    /// Parses `--arrival` / `-i`: poisson, fixed, or a generator in
    /// mutilate's syntax ([`super::etc`]; `exponential` is poisson).
    pub fn parse(text: &str) -> Result<InterArrival, String> {
        match text.trim() {
            "poisson" | "exponential" => Ok(InterArrival::Poisson),
            "fixed" => Ok(InterArrival::Fixed),
            spec => {
                let g = Generator::parse(spec)?;
                if matches!(g, Generator::Fixed(_)) {
                    // A number is a fixed gap: 1/rate, as `fixed`.
                    return Ok(InterArrival::Fixed);
                }
                Ok(InterArrival::Dist(g))
            }
        }
    }
}

/// A sequence of scheduled request times at a given rate.
#[derive(Debug)]
pub struct Schedule {
    next: Instant,
    mean_gap_s: f64,
    arrival: InterArrival,
    rng: u64,
    /// `InterArrival::Dist`'s uniform draws.
    draws: Uniform01,
}

impl Schedule {
    /// A schedule starting at `start` (the first request one gap after
    /// it) at `rate` requests per second (more than 0).
    pub fn new(start: Instant, rate: f64, mut arrival: InterArrival, seed: u64) -> Schedule {
        if let InterArrival::Dist(g) = &mut arrival {
            g.set_rate(rate);
        }
        let mut s = Schedule {
            next: start,
            mean_gap_s: 1.0 / rate,
            arrival,
            rng: seed | 1,
            draws: Uniform01::new(seed),
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
            InterArrival::Dist(ref g) => g.generate(&mut self.draws),
        };
        // NaN (a generator without a mean to set) counts as no gap.
        Duration::from_secs_f64(if s.is_finite() { s.clamp(0.0, 3600.0) } else { 0.0 })
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
    fn fb_ia_gaps_average_one_over_the_rate() {
        let start = Instant::now();
        let arrival = InterArrival::parse("fb_ia").unwrap();
        assert!(matches!(arrival, InterArrival::Dist(_)));
        let mut s = Schedule::new(start, 20_000.0, arrival, 3);
        let n = 200_000;
        let mut last = start;
        for _ in 0..n {
            last = s.take();
        }
        let mean = (last - start).as_secs_f64() / n as f64;
        assert!((mean - 5e-5).abs() < 5e-5 * 0.02, "mean gap {mean}");
        assert_eq!(InterArrival::parse("exponential"), Ok(InterArrival::Poisson));
        assert_eq!(InterArrival::parse("7"), Ok(InterArrival::Fixed));
        assert!(InterArrival::parse("nonsense").is_err());
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
