//! `oxnet loadgen`'s open-loop latency accounting and mutilate's
//! `--scan` (issue 13, item 1), against a server written here that
//! answers each request after a known delay D, one at a time. (The ETC
//! flags against real memcached are in kvload_memcached.rs; the
//! distributions in the unit tests of loadgen::etc, ::workload and
//! ::schedule.)

mod common;

use common::{field, json_line, number, text};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::time::Duration;

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");
/// The server's delay per request.
const D: Duration = Duration::from_millis(2);
const SIZE: usize = 64;

/// A loopback echo server that answers every `SIZE`-byte request after
/// sleeping `D`, serially, over the connections it accepts one after
/// the other; it ends when the listener is dropped with the test.
fn delayed_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let _ = s.set_nodelay(true);
            let mut buf = [0u8; SIZE];
            while s.read_exact(&mut buf).is_ok() {
                std::thread::sleep(D);
                if s.write_all(&buf).is_err() {
                    break;
                }
            }
        }
    });
    addr
}

fn loadgen(args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["30", OXNET, "loadgen", "--json", "--size", "64", "-c", "1"])
        .args(args)
        .output()
        .unwrap()
}

/// A quantile (`p50`, `p99`) of `which` (`latency_us`, `service_us`).
fn quantile(json: &str, which: &str, q: &str) -> f64 {
    let at = json
        .find(&format!("\"{which}\""))
        .unwrap_or_else(|| panic!("no {which}: {json}"));
    number(&json[at..], q)
}

#[test]
fn open_loop_latency_counts_the_queue_and_the_send_view_does_not() {
    let addr = delayed_server().to_string();
    let d_us = D.as_micros() as f64;

    // Below capacity (200/s against 1/D = 500/s, fixed gaps): nothing
    // queues; both views are about D.
    let out = loadgen(&["-s", &addr, "-q", "200", "-i", "fixed", "-t", "1"]);
    let json = json_line(&out);
    assert!(out.status.success(), "{json} {}", text(&out.stderr));
    assert_eq!(field(&json, "total"), 0, "errors: {json}");
    let (open, send) = (
        quantile(&json, "latency_us", "p50"),
        quantile(&json, "service_us", "p50"),
    );
    assert!(
        send >= d_us && send < 3.0 * d_us,
        "from the send, p50 {send} us: {json}"
    );
    assert!(
        open >= d_us && open < 3.0 * d_us,
        "from the schedule, p50 {open} us: {json}"
    );

    // At 1000/s, twice what the server can answer: the schedule runs
    // ahead and requests wait in the client. Latency from the scheduled
    // time grows with the queue (after t seconds about t/2 s); from the
    // actual send it stays D.
    let out = loadgen(&["-s", &addr, "-q", "1000", "-i", "fixed", "-t", "1"]);
    let json = json_line(&out);
    assert!(out.status.success(), "{json} {}", text(&out.stderr));
    let answered = field(&json, "requests");
    assert!((300..=520).contains(&answered), "about 1 s / D answered: {json}");
    let (open, send) = (
        quantile(&json, "latency_us", "p50"),
        quantile(&json, "service_us", "p99"),
    );
    assert!(
        send >= d_us && send < 3.0 * d_us,
        "from the send, p99 {send} us: {json}"
    );
    assert!(
        open > 50.0 * d_us,
        "queueing counted from the schedule, p50 {open} us: {json}"
    );
    assert!(field(&json, "unsent") >= 300, "the rest never got a connection: {json}");
}

#[test]
fn scan_runs_each_rate_once() {
    let addr = delayed_server().to_string();
    let out = loadgen(&["-s", &addr, "--scan", "50:150:50", "-t", "0.3", "-i", "fb_ia"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, rate) in lines.iter().zip([50, 100, 150]) {
        assert!(line.contains(&format!("\"rate\":{rate},")), "{line}");
        assert_eq!(field(line, "total"), 0, "{line}");
        assert!(field(line, "requests") > 0, "{line}");
    }
}

#[test]
fn bad_mutilate_flags_are_usage_errors() {
    for (args, says) in [
        (&["-d", "8"][..], "--depth 8"),
        (&["--scan", "3:1:1"], "--scan 3:1:1"),
        (&["--search", "99"], "--search 99"),
        (&["-i", "pareto:1,2"], "pareto takes 3"),
    ] {
        let out = loadgen(&[&["-s", "127.0.0.1:9"][..], args].concat());
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn search_bisects_below_the_closed_loop_peak_and_says_when_nothing_meets() {
    let addr = delayed_server().to_string();
    // A bound no request meets (p50 under 1 µs against a 2 ms server):
    // the peak, then every bisection step misses and halves the rate.
    let out = loadgen(&["-s", &addr, "--search", "50:1", "-t", "0.2", "-i", "fixed"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--search 50:1: no rate"), "{err}");
    let rates: Vec<f64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("oxnet loadgen: --search: "))
        .filter_map(|l| l.split_once("/s: p").map(|(r, _)| r.parse().unwrap()))
        .collect();
    assert_eq!(rates.len(), 8, "8 bisection runs: {err}");
    assert!(
        rates[0] > 100.0 && rates[0] < 600.0,
        "the closed-loop peak is about 1/D: {err}"
    );
    for w in rates.windows(2) {
        assert!((w[1] * 2.0 - w[0]).abs() <= 1.0, "each miss halves the rate: {err}");
    }
}
