//! `oxnet loadgen`: a TCP load generator on kernel sockets, and the Linux
//! echo server it is compared with (issue 11, item 8 and its benchmark).
//!
//! The client drives many non-blocking connections per thread with epoll,
//! on kernel sockets or, with `--device SPEC`, on oxnet's own stack in
//! the same thread ([`on_stack`]); one trait ([`net::Net`]) stands for
//! the stack, so the state machine is the same. A request is `--size`
//! bytes echoed back, or (`--proto memcached-text|memcached-binary`) a
//! memcached GET or SET whose answer is parsed and checked ([`kv`]):
//!
//! - `--mode short`: ClickNF's echo test: connect, send `--size` bytes,
//!   wait for them back, close with a RST (SO_LINGER 0), repeat.
//! - `--mode persistent`: `--connections` connections opened once, one
//!   request of `--size` bytes outstanding per connection at a time.
//!
//! `--rate 0` is a closed loop (each connection starts its next request
//! when the last one ends). `--rate R` is an open loop: request times are
//! drawn in advance (Poisson or fixed inter-arrival) and latency counts
//! from each request's *scheduled* time, so that a request that waits for
//! a free connection has its queueing in its latency (no coordinated
//! omission).
//!
//! Layout: [`options`] (the command line, checked), [`schedule`] (arrival
//! times), [`client`] (one thread's connections), [`net`] (what the
//! client needs from a stack), [`kernel`] and [`stack`] (that on kernel
//! sockets and on oxnet's stack), [`on_stack`] (the routers of a run on
//! oxnet's stack), [`summary`] (histogram,
//! summary line and JSON), [`serve`] (the epoll echo server),
//! [`serve_uring`] (the same server on io_uring, `--io-uring`; a
//! thread's loop in `uring_server.rs`, its buffers in
//! `uring_buffers.rs`), [`kv`] (memcached's requests and the checks of
//! their answers, issue 12), [`etc`] (mutilate's distributions) and
//! [`workload`] (the ETC workload and its in-process request stream,
//! issue 13). mutilate's flags (`-K`/`-V`/`-i`, `-u`, `-r`, `-d`, `-w`,
//! `--scan`, `--search`, `--noload`, `--loadonly`) are in [`options`];
//! the fill pass, the warm-up, `--scan` and `--search` around the
//! measured run in [`main`].

pub mod client;
pub mod etc;
pub mod kernel;
pub mod kv;
pub mod net;
pub mod on_stack;
pub mod options;
pub mod schedule;
pub mod serve;
pub mod serve_uring;
pub mod stack;
pub mod summary;
mod sys;
mod uring_buffers;
mod uring_server;
pub mod workload;

pub use options::{LoadgenArgs, Mode, Options};
pub use summary::Summary;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

/// Runs `oxnet loadgen` with its parsed arguments; returns whether the
/// run succeeded (some request answered, or the echo server ran).
pub fn main(args: &LoadgenArgs) -> Result<bool, String> {
    // Ctrl-C ends a run early with its summary still printed.
    crate::signal::install();
    if let Some(port) = args.serve_echo {
        let options = args.serve_options(port)?;
        let stats = if args.io_uring {
            serve_uring::run(&options)?
        } else {
            serve::run(&options)?
        };
        eprintln!(
            "oxnet loadgen: echo server: {} connections, {} bytes echoed",
            stats.connections, stats.bytes
        );
        return Ok(true);
    }
    let mut options = args.options()?;
    let steps = args.steps()?;
    let stack = args.stack_options()?;
    let exec = |o: &Options| match &stack {
        Some(s) => on_stack::run(o, s),
        None => run(o),
    };
    let print = |s: &Summary| {
        if args.json {
            println!("{}", s.json());
        } else {
            println!("{}", s.line());
        }
    };
    // mutilate's records are stored in a pass of their own, not measured
    // (mutilate's load phase), unless --noload or --loadonly.
    if let Some(kv) = options
        .kv
        .as_mut()
        .filter(|kv| kv.records.is_some() && kv.fill == kv::Fill::First)
    {
        kv.fill = kv::Fill::Skip;
        let keys = kv.keys;
        let fill = fill_pass(&options);
        let s = exec(&fill)?;
        eprintln!(
            "oxnet loadgen: stored {} records in {:.2} s, {} errors",
            s.sets,
            s.seconds,
            s.errors.total()
        );
        if s.errors.total() > 0 || s.sets < keys {
            return Err(format!(
                "the fill stored {} of {} records: {}",
                s.sets,
                keys,
                s.errors.first_message()
            ));
        }
    }
    if let Some(w) = steps.warmup {
        let mut warm = options.clone();
        warm.duration = Some(w);
        warm.requests = None;
        if let Some(kv) = warm.kv.as_mut() {
            kv.fill = kv::Fill::Skip;
        }
        exec(&warm)?;
    }
    let summary = if let Some((min, max, step)) = steps.scan {
        let mut last = None;
        let mut q = min;
        while q <= max * (1.0 + 1e-9) {
            options.rate = q;
            let s = exec(&options)?;
            print(&s);
            last = Some(s);
            q += step;
        }
        last.ok_or("--scan: no step")?
    } else if let Some((n, x)) = steps.search {
        let s = search(&options, n, x, &exec)?;
        print(&s);
        s
    } else {
        let s = exec(&options)?;
        print(&s);
        s
    };
    if summary.completed == 0 && summary.errors.total() > 0 {
        eprintln!(
            "oxnet loadgen: every request to {} failed: {}",
            options.target,
            summary.errors.first_message()
        );
        return Ok(false);
    }
    Ok(true)
}

/// The fill of a key-value load on its own: every key SET once, closed
/// loop, for at most [`fill_limit`] (a refused server must not keep it
/// going for ever).
pub fn fill_pass(options: &Options) -> Options {
    let mut fill = options.clone();
    let keys = fill.kv.as_ref().map_or(0, |kv| kv.keys);
    if let Some(kv) = fill.kv.as_mut() {
        kv.fill = kv::Fill::Only;
    }
    fill.rate = 0.0;
    fill.duration = Some(fill_limit(keys));
    fill.requests = None;
    fill
}

/// How long a fill of `keys` keys may take: 30 s, and 1 ms per
/// thousand keys more.
pub fn fill_limit(keys: u64) -> std::time::Duration {
    std::time::Duration::from_secs(30) + std::time::Duration::from_micros(keys)
}

/// Whether a run at `rate` met `--search N:X`: its N-th percentile
/// (from the scheduled times) at most `x` µs, no error, and at least
/// 95 % of the rate achieved.
pub fn meets(s: &Summary, rate: f64, n: f64, x: f64) -> bool {
    s.errors.total() == 0 && s.completed > 0 && s.quantile_us(n / 100.0) <= x && s.throughput() >= 0.95 * rate
}

/// `--search N:X`: a closed-loop run gives the peak; then a bisection
/// (8 runs) between 0 and the peak for the highest rate that
/// [`meets`] the bound. Each run lasts the load's duration; the steps go
/// to stderr and the run at the rate found is returned.
pub fn search(
    options: &Options,
    n: f64,
    x: f64,
    exec: &dyn Fn(&Options) -> Result<Summary, String>,
) -> Result<Summary, String> {
    let mut o = options.clone();
    o.rate = 0.0;
    let peak = exec(&o)?.throughput();
    eprintln!("oxnet loadgen: --search: closed-loop peak {peak:.0}/s");
    let (mut lo, mut hi) = (0.0, peak);
    let mut best: Option<Summary> = None;
    for step in 0..8 {
        // The peak itself first: a bound it meets needs no bisection.
        let q = if step == 0 { hi } else { (lo + hi) / 2.0 };
        if q < 1.0 {
            break;
        }
        o.rate = q;
        let s = exec(&o)?;
        let ok = meets(&s, q, n, x);
        eprintln!(
            "oxnet loadgen: --search: {q:.0}/s: p{n} {:.1} us, {:.0}/s achieved: {}",
            s.quantile_us(n / 100.0),
            s.throughput(),
            if ok { "meets" } else { "misses" }
        );
        if ok {
            lo = q;
            best = Some(s);
            if q == hi {
                break;
            }
        } else {
            hi = q;
        }
    }
    best.ok_or_else(|| format!("--search {n}:{x}: no rate down to {hi:.0}/s met the bound"))
}

/// Runs the load described by `options` and returns what it measured.
/// The run is bounded: it ends at `options.duration` or after
/// `options.requests` requests, whichever comes first, and a request
/// that is not answered within `options.timeout` counts as an error.
pub fn run(options: &Options) -> Result<Summary, String> {
    let issued = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let cpu_before = sys::process_cpu_seconds();
    let handles: Vec<_> = (0..options.threads)
        .map(|t| {
            let plan = options.thread_plan(t);
            let issued = Arc::clone(&issued);
            std::thread::Builder::new()
                .name(format!("loadgen{t}"))
                .spawn(move || client::run_thread(&plan, &issued, start))
                .map_err(|e| format!("cannot start a client thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut summary = Summary::new();
    for h in handles {
        let part = h.join().map_err(|_| "a client thread panicked".to_string())??;
        summary.merge(&part);
    }
    summary.seconds = start.elapsed().as_secs_f64();
    summary.cpu_seconds = sys::process_cpu_seconds() - cpu_before;
    summary.set_load(options);
    Ok(summary)
}
