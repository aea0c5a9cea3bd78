//! What a run measured: counts, bytes, errors by kind, the latency
//! histogram (HDR, nanoseconds), and their summary line and JSON.

use super::kv::Proto;
use super::options::{Mode, Options};
use crate::report::json_string;
use hdrhistogram::Histogram;
use std::fmt::Write;
use std::io;

/// The longest latency the histogram holds (100 s, in ns); longer ones are
/// clamped to it (a request times out long before).
const MAX_LATENCY_NS: u64 = 100_000_000_000;

/// Errors of a run, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    /// Connections refused (ECONNREFUSED: nothing listens).
    pub refused: u64,
    /// Connections reset by the server, or closed before the whole echo.
    pub reset: u64,
    /// Requests or connects not answered within --timeout.
    pub timeout: u64,
    /// Echoed bytes that differ from what was sent, or extra bytes.
    pub corrupt: u64,
    /// Everything else (unreachable network, no ports left, ...).
    pub other: u64,
    /// The first error's text, to tell the user what went wrong.
    pub first: Option<String>,
}

impl Errors {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.refused + self.reset + self.timeout + self.corrupt + self.other
    }

    /// The first error's message, or "none".
    pub fn first_message(&self) -> &str {
        self.first.as_deref().unwrap_or("none")
    }

    /// Counts an I/O error by its kind.
    pub fn count_io(&mut self, what: &str, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => self.refused += 1,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => self.reset += 1,
            Some(libc::ETIMEDOUT) => self.timeout += 1,
            _ => self.other += 1,
        }
        self.note(|| format!("{what}: {e}"));
    }

    /// Remembers the first error's text.
    pub fn note(&mut self, text: impl FnOnce() -> String) {
        if self.first.is_none() {
            self.first = Some(text());
        }
    }

    fn merge(&mut self, o: &Errors) {
        self.refused += o.refused;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.corrupt += o.corrupt;
        self.other += o.other;
        if self.first.is_none() {
            self.first.clone_from(&o.first);
        }
    }
}

/// The result of a run (one thread's, or all merged).
#[derive(Clone, Debug)]
pub struct Summary {
    /// Requests answered in full and correctly.
    pub completed: u64,
    /// Connections that completed their handshake.
    pub connections: u64,
    /// Bytes written to the server.
    pub bytes_sent: u64,
    /// Bytes read back from the server.
    pub bytes_received: u64,
    /// Errors by kind.
    pub errors: Errors,
    /// Open loop: requests whose scheduled time came and went before the
    /// run ended without a connection to send them on.
    pub unsent: u64,
    /// Latency of answered requests: from the scheduled time (open loop),
    /// or from the start of the request (closed loop; in short mode the
    /// connect), in nanoseconds.
    pub latency: Histogram<u64>,
    /// Service time of answered requests: from the request's start on its
    /// connection (short mode: the connect), in nanoseconds. Equal to
    /// `latency` in a closed loop but for the client's own delay; in an
    /// open loop it leaves out the wait for a connection (mutilate's
    /// latency).
    pub service: Histogram<u64>,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// CPU seconds (user + system) the client process used.
    pub cpu_seconds: f64,
    /// On oxnet's stack: seconds the client's threads were busy (their
    /// run less the time their waits found nothing to do; the CPU time
    /// counts a polling loop's spinning too). None on kernel sockets.
    pub busy_seconds: Option<f64>,
    /// The mode of the run.
    pub mode: Mode,
    /// The target rate (0: closed loop).
    pub rate: f64,
    /// Bytes per request (memcached: per value).
    pub size: usize,
    /// What a request was.
    pub proto: Proto,
    /// memcached: answered GETs (hits and misses).
    pub gets: u64,
    /// memcached: answered (stored) SETs.
    pub sets: u64,
    /// memcached: GETs that found no value (legitimate only for a key
    /// not yet stored by the fill; not an error).
    pub misses: u64,
}

impl Default for Summary {
    fn default() -> Self {
        Self::new()
    }
}

impl Summary {
    /// An empty summary.
    pub fn new() -> Summary {
        Summary {
            completed: 0,
            connections: 0,
            bytes_sent: 0,
            bytes_received: 0,
            errors: Errors::default(),
            unsent: 0,
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("fixed, valid histogram bounds"),
            service: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("fixed, valid histogram bounds"),
            seconds: 0.0,
            cpu_seconds: 0.0,
            busy_seconds: None,
            mode: Mode::Persistent,
            rate: 0.0,
            size: 0,
            proto: Proto::Echo,
            gets: 0,
            sets: 0,
            misses: 0,
        }
    }

    /// Records an answered request's latency (from its scheduled time)
    /// and service time (from its start on its connection).
    pub fn record(&mut self, latency_ns: u64, service_ns: u64) {
        self.completed += 1;
        self.latency.saturating_record(latency_ns.clamp(1, MAX_LATENCY_NS));
        self.service.saturating_record(service_ns.clamp(1, MAX_LATENCY_NS));
    }

    /// Adds another thread's counts and histogram.
    pub fn merge(&mut self, o: &Summary) {
        self.completed += o.completed;
        self.connections += o.connections;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.unsent += o.unsent;
        self.gets += o.gets;
        self.sets += o.sets;
        self.misses += o.misses;
        if let Some(b) = o.busy_seconds {
            self.busy_seconds = Some(self.busy_seconds.unwrap_or(0.0) + b);
        }
        self.errors.merge(&o.errors);
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&o.latency);
        let _ = self.service.add(&o.service);
    }

    /// Notes the load that was run (mode, rate, size, protocol).
    pub fn set_load(&mut self, options: &Options) {
        self.mode = options.mode;
        self.rate = options.rate;
        self.size = options.kv.as_ref().map_or(options.size, |kv| kv.value_size);
        self.proto = options.kv.as_ref().map_or(Proto::Echo, |kv| kv.proto);
    }

    /// Answered requests per second.
    pub fn throughput(&self) -> f64 {
        if self.seconds > 0.0 {
            self.completed as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// A latency quantile in microseconds (0 when nothing was answered).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.latency.is_empty() {
            return 0.0;
        }
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    fn max_us(&self) -> f64 {
        if self.latency.is_empty() {
            0.0
        } else {
            self.latency.max() as f64 / 1000.0
        }
    }

    /// One line for people.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} {}: {} requests in {:.2} s = {:.0}/s, latency us p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}, {} B sent, {} B received, {} errors",
            self.mode.name(),
            if self.rate > 0.0 { format!("open loop at {}/s", self.rate) } else { "closed loop".into() },
            self.completed,
            self.seconds,
            self.throughput(),
            self.quantile_us(0.5),
            self.quantile_us(0.9),
            self.quantile_us(0.99),
            self.quantile_us(0.999),
            self.max_us(),
            self.bytes_sent,
            self.bytes_received,
            self.errors.total(),
        );
        if self.rate > 0.0 && !self.service.is_empty() {
            let _ = write!(
                s,
                " (from the actual send: p50 {:.1} p99 {:.1})",
                self.service.value_at_quantile(0.5) as f64 / 1000.0,
                self.service.value_at_quantile(0.99) as f64 / 1000.0
            );
        }
        if self.proto != Proto::Echo {
            let _ = write!(
                s,
                ", {}: {} gets ({} misses), {} sets",
                self.proto.name(),
                self.gets,
                self.misses,
                self.sets
            );
        }
        if let Some(first) = &self.errors.first {
            let _ = write!(s, " (first: {first})");
        }
        if self.unsent > 0 {
            let _ = write!(s, ", {} scheduled but never sent", self.unsent);
        }
        s
    }

    /// One JSON object (latencies in microseconds).
    pub fn json(&self) -> String {
        let e = &self.errors;
        format!(
            concat!(
                "{{\"mode\":\"{}\",\"proto\":\"{}\",\"rate\":{},\"size\":{},\"seconds\":{:.6},\"requests\":{},{}",
                "\"throughput\":{:.3},\"connections\":{},\"bytes_sent\":{},\"bytes_received\":{},",
                "\"unsent\":{},\"cpu_seconds\":{:.6},{}\"latency_us\":{},\"service_us\":{},",
                "\"errors\":{{\"total\":{},\"refused\":{},\"reset\":{},\"timeout\":{},\"corrupt\":{},\"other\":{},\"first\":{}}}}}"
            ),
            self.mode.name(),
            self.proto.name(),
            self.rate,
            self.size,
            self.seconds,
            self.completed,
            if self.proto == Proto::Echo {
                String::new()
            } else {
                format!("\"gets\":{},\"sets\":{},\"misses\":{},", self.gets, self.sets, self.misses)
            },
            self.throughput(),
            self.connections,
            self.bytes_sent,
            self.bytes_received,
            self.unsent,
            self.cpu_seconds,
            self.busy_seconds
                .map_or(String::new(), |b| format!("\"busy_seconds\":{b:.6},")),
            quantiles_json(&self.latency),
            quantiles_json(&self.service),
            e.total(),
            e.refused,
            e.reset,
            e.timeout,
            e.corrupt,
            e.other,
            e.first.as_deref().map_or("null".to_string(), json_string),
        )
    }
}

/// A histogram's p50, p90, p95, p99, p99.9, max and mean in
/// microseconds.
fn quantiles_json(h: &Histogram<u64>) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    if h.is_empty() {
        return "{\"p50\":0,\"p90\":0,\"p95\":0,\"p99\":0,\"p99.9\":0,\"max\":0,\"mean\":0}".into();
    }
    format!(
        "{{\"p50\":{:.3},\"p90\":{:.3},\"p95\":{:.3},\"p99\":{:.3},\"p99.9\":{:.3},\"max\":{:.3},\"mean\":{:.3}}}",
        us(h.value_at_quantile(0.5)),
        us(h.value_at_quantile(0.9)),
        us(h.value_at_quantile(0.95)),
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max()),
        h.mean() / 1000.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_recorded_latencies() {
        let mut s = Summary::new();
        for us in 1..=1000u64 {
            s.record(us * 1000, us * 500);
        }
        s.seconds = 2.0;
        assert_eq!(s.completed, 1000);
        assert_eq!(s.throughput(), 500.0);
        // Three significant digits: within 0.1 %.
        assert!((s.quantile_us(0.5) - 500.0).abs() <= 0.5, "{}", s.quantile_us(0.5));
        assert!((s.quantile_us(0.99) - 990.0).abs() <= 1.0);
        assert!(s.json().contains("\"requests\":1000,"));
    }

    #[test]
    fn merged_errors_keep_the_first_message() {
        let mut a = Summary::new();
        let mut b = Summary::new();
        b.errors
            .count_io("connect", &io::Error::from_raw_os_error(libc::ECONNREFUSED));
        a.merge(&b);
        assert_eq!(a.errors.refused, 1);
        assert!(a.errors.first_message().starts_with("connect: "));
        assert!(a.json().contains("\"refused\":1,"));
    }
}
