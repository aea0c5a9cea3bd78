//! The `oxnet` command line as a library: the applications (packet
//! generator, forwarder, capture), the demo, pcap output and reports, so
//! that tests and benchmarks run exactly what the commands run.

pub mod apps;
pub mod bench;
pub mod cert;
pub mod clicktest;
pub mod commands;
pub mod demo;
pub mod frame;
pub mod handler;
pub mod loadgen;
pub mod pcap;
pub mod report;
pub mod run;
pub mod setup;
pub mod signal;

/// The longest run a `--seconds` option accepts: 100 years, far below
/// where `Instant` arithmetic overflows.
pub const MAX_SECONDS: f64 = 100.0 * 365.0 * 24.0 * 3600.0;

/// Checks a `--seconds` value from the command line: a finite number of
/// seconds, 0 or more and at most [`MAX_SECONDS`]. The error names the value.
pub fn parse_seconds(value: &str) -> Result<f64, String> {
    let seconds: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a number of seconds"))?;
    if !seconds.is_finite() || !(0.0..=MAX_SECONDS).contains(&seconds) {
        return Err(format!(
            "`{value}`: seconds must be a finite number from 0 to {MAX_SECONDS}"
        ));
    }
    Ok(seconds)
}

/// `start` plus `seconds`, for any `seconds` a library caller may pass:
/// negative or NaN counts as 0, and more than [`MAX_SECONDS`] (infinity,
/// 1e18) means no deadline (`None`). Never panics.
pub fn deadline_after(start: std::time::Instant, seconds: f64) -> Option<std::time::Instant> {
    let seconds = if seconds.is_nan() { 0.0 } else { seconds.max(0.0) };
    if seconds > MAX_SECONDS {
        return None;
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| start.checked_add(d))
}

#[cfg(test)]
mod seconds_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn bad_seconds_are_refused_with_the_value_named() {
        for bad in ["-1", "nan", "NaN", "inf", "-inf", "1e18", "abc", ""] {
            let err = parse_seconds(bad).expect_err(bad);
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
        }
        assert_eq!(parse_seconds("0"), Ok(0.0));
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
    }

    #[test]
    fn deadline_after_never_panics() {
        let start = Instant::now();
        assert_eq!(deadline_after(start, -1.0), Some(start));
        assert_eq!(deadline_after(start, f64::NAN), Some(start));
        assert_eq!(deadline_after(start, f64::INFINITY), None);
        assert_eq!(deadline_after(start, 1e18), None);
        assert_eq!(deadline_after(start, 1.5), Some(start + Duration::from_millis(1500)));
    }
}
