//! `oxnet loadgen` (issue 11, item 8) against the built-in Linux echo
//! server on loopback: exact counts and bytes in the closed loop, the
//! open loop's rate and its latency from scheduled times (against a
//! server made slow on purpose), refused connections counted as errors,
//! and bad arguments refused with the flag named.

use oxnet::loadgen::schedule::InterArrival;
use oxnet::loadgen::serve::{self, ServeOptions};
use oxnet::loadgen::{self, Mode, Options, Summary};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// A port nothing listens on now (bound, then released).
fn free_port(ip: &str) -> u16 {
    TcpListener::bind(format!("{ip}:0"))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the built-in echo server on 127.0.0.1 (or `ip`) for 30 s and
/// returns its address once it accepts connections.
fn echo_server(ip: &str) -> SocketAddr {
    let port = free_port(ip);
    let options = ServeOptions {
        port,
        bind: Some(ip.parse().unwrap()),
        threads: 2,
        duration: Some(Duration::from_secs(30)),
    };
    std::thread::spawn(move || serve::run(&options).unwrap());
    let addr = SocketAddr::new(ip.parse().unwrap(), port);
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the echo server did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    addr
}

/// An echo server that answers each 64-byte request 10 ms late, one
/// request at a time: it serves at most 100 requests per second.
fn slow_echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while s.read_exact(&mut buf).is_ok() {
                    std::thread::sleep(Duration::from_millis(10));
                    if s.write_all(&buf).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn options(target: SocketAddr, mode: Mode) -> Options {
    Options {
        target,
        mode,
        rate: 0.0,
        arrival: InterArrival::Poisson,
        connections: 1,
        threads: 1,
        duration: None,
        requests: None,
        size: 64,
        kv: None,
        timeout: Duration::from_secs(5),
        seed: 1,
    }
}

fn assert_exact(s: &Summary, requests: u64, size: u64) {
    assert_eq!(s.errors.total(), 0, "{}", s.line());
    assert_eq!(s.completed, requests, "{}", s.line());
    assert_eq!(s.bytes_sent, requests * size, "{}", s.line());
    assert_eq!(s.bytes_received, requests * size, "{}", s.line());
    assert_eq!(s.latency.len(), requests);
}

#[test]
fn closed_loop_persistent_n_requests_get_exactly_n_answers_over_ipv4() {
    let addr = echo_server("127.0.0.1");
    let mut o = options(addr, Mode::Persistent);
    o.requests = Some(3000);
    o.connections = 8;
    o.threads = 2;
    o.size = 100;
    let s = loadgen::run(&o).unwrap();
    assert_exact(&s, 3000, 100);
    assert_eq!(s.connections, 8, "persistent: each connection opened once");
}

#[test]
fn closed_loop_short_connections_one_request_each_and_ipv6() {
    let addr = echo_server("127.0.0.1");
    let mut o = options(addr, Mode::Short);
    o.requests = Some(500);
    o.connections = 4;
    let s = loadgen::run(&o).unwrap();
    assert_exact(&s, 500, 64);
    assert_eq!(s.connections, 500, "short: one connection per request");

    if TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipping IPv6: no ::1 here");
        return;
    }
    let addr6 = echo_server("::1");
    for mode in [Mode::Short, Mode::Persistent] {
        let mut o = options(addr6, mode);
        o.requests = Some(200);
        o.connections = 2;
        o.size = 3000;
        let s = loadgen::run(&o).unwrap();
        assert_exact(&s, 200, 3000);
    }
}

#[test]
fn requests_of_a_mebibyte_come_back_whole_in_both_modes() {
    // The largest request (--size's maximum). On loopback Linux's
    // buffers grow to hold it; where they do not (small windows), the
    // client reads the echo while it is still sending, so it cannot
    // stall (client.rs, Sending).
    let addr = echo_server("127.0.0.1");
    for mode in [Mode::Persistent, Mode::Short] {
        let mut o = options(addr, mode);
        o.requests = Some(6);
        o.connections = 2;
        o.size = 1 << 20;
        let s = loadgen::run(&o).unwrap();
        assert_exact(&s, 6, 1 << 20);
    }
}

#[test]
fn open_loop_sends_at_the_rate_for_one_second() {
    let addr = echo_server("127.0.0.1");
    for (mode, arrival) in [
        (Mode::Persistent, InterArrival::Fixed),
        (Mode::Short, InterArrival::Poisson),
    ] {
        let mut o = options(addr, mode);
        o.rate = 1000.0;
        o.arrival = arrival.clone();
        o.connections = 8;
        o.duration = Some(Duration::from_secs(1));
        let s = loadgen::run(&o).unwrap();
        assert_eq!(s.errors.total(), 0, "{}", s.line());
        assert_eq!(s.unsent, 0, "{}", s.line());
        // Fixed: 1000 scheduled in the second, the last few perhaps in
        // flight at the end (a loaded machine: up to 50); Poisson: the
        // seed fixes the schedule, 1000 +- 3.8 standard deviations covers
        // any seed.
        let (lo, hi) = match arrival {
            InterArrival::Fixed => (950, 1000),
            InterArrival::Poisson => (880, 1120),
            InterArrival::Dist(_) => unreachable!("not in this test"),
        };
        assert!(
            (lo..=hi).contains(&s.completed),
            "{:?} {:?}: {}",
            mode,
            arrival,
            s.line()
        );
        assert_eq!(s.bytes_received, s.completed * 64);
    }
}

#[test]
fn open_loop_latency_counts_from_the_scheduled_time_so_queueing_shows() {
    let addr = slow_echo_server();
    // Closed loop: each request takes the server's 10 ms.
    let mut o = options(addr, Mode::Persistent);
    o.duration = Some(Duration::from_millis(500));
    let closed = loadgen::run(&o).unwrap();
    assert!(closed.completed >= 20, "{}", closed.line());
    assert!(closed.quantile_us(0.99) < 40_000.0, "{}", closed.line());

    // Open loop at 200/s on one connection the server answers 100/s: the
    // queue grows by 5 ms a request, so after 1 s the last requests
    // answered waited about half a second since their scheduled time,
    // although each took 10 ms on the wire.
    o.rate = 200.0;
    o.arrival = InterArrival::Fixed;
    o.duration = Some(Duration::from_secs(1));
    let open = loadgen::run(&o).unwrap();
    assert!((50..=105).contains(&open.completed), "{}", open.line());
    assert!(
        open.unsent >= 90,
        "the requests left waiting are reported: {}",
        open.line()
    );
    let max_ms = open.latency.max() as f64 / 1e6;
    assert!(max_ms > 400.0, "queueing hidden: max {max_ms} ms; {}", open.line());
    assert!(open.quantile_us(0.5) > 100_000.0, "{}", open.line());
    // Measured from the actual send (mutilate's view), the queueing is
    // gone: each answer took the server's 10 ms.
    let service_p50_ms = open.service.value_at_quantile(0.5) as f64 / 1e6;
    assert!(
        (9.0..40.0).contains(&service_p50_ms),
        "service p50 {service_p50_ms} ms; {}",
        open.line()
    );
    assert!(open.line().contains("(from the actual send: p50 "), "{}", open.line());
}

#[test]
fn a_refused_connection_is_counted_as_an_error_not_a_panic() {
    let port = free_port("127.0.0.1");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for mode in [Mode::Short, Mode::Persistent] {
        let mut o = options(addr, mode);
        o.requests = Some(20);
        o.connections = 2;
        let s = loadgen::run(&o).unwrap();
        assert_eq!(s.completed, 0);
        assert_eq!(s.errors.refused, 20, "{mode:?}: {}", s.line());
        assert_eq!(s.errors.total(), 20, "{mode:?}: {}", s.line());
        assert!(s.errors.first_message().contains("refused"), "{}", s.line());
    }
    // The command: the JSON says it, stderr says why, the exit status fails.
    let out = Command::new(OXNET)
        .args([
            "loadgen",
            "--target",
            &addr.to_string(),
            "--requests",
            "3",
            "--mode",
            "short",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("\"refused\":3,"), "{stdout}");
    assert!(
        stderr.contains("Connection refused") && stderr.contains(&addr.to_string()),
        "{stderr}"
    );
}

#[test]
fn bad_arguments_are_refused_with_the_flag_named() {
    let cases: [(&[&str], &str); 8] = [
        (&["--target", "nohost"], "HOST:PORT"),
        (&["--target", "10.0.0.300:7"], "10.0.0.300:7"),
        (&["--target", "127.0.0.1:0"], "port 0"),
        (&["--target", "127.0.0.1:7", "--size", "0"], "--size 0"),
        (&["--target", "127.0.0.1:7", "--rate=-5"], "--rate"),
        (
            &["--target", "127.0.0.1:7", "--connections", "2", "--threads", "3"],
            "--threads 3",
        ),
        (&["--target", "127.0.0.1:7", "--mode", "sometimes"], "sometimes"),
        (&[], "--target"),
    ];
    for (args, says) in cases {
        let out = Command::new(OXNET).arg("loadgen").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            stderr.contains(says),
            "{args:?}: stderr does not say `{says}`: {stderr}"
        );
    }
}

#[test]
fn the_command_prints_a_summary_line_and_json() {
    let addr = echo_server("127.0.0.1");
    let out = Command::new(OXNET)
        .args(["loadgen", "-s", &addr.to_string(), "--requests", "100", "-c", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.starts_with("persistent closed loop: 100 requests in "),
        "{stdout}"
    );
    assert!(stdout.contains("6400 B sent, 6400 B received, 0 errors"), "{stdout}");
    let out = Command::new(OXNET)
        .args([
            "loadgen",
            "-s",
            &addr.to_string(),
            "--requests",
            "100",
            "--mode",
            "short",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for field in [
        "\"requests\":100,",
        "\"bytes_sent\":6400,",
        "\"bytes_received\":6400,",
        "\"p99.9\":",
        "\"service_us\":{",
        "\"total\":0,",
    ] {
        assert!(stdout.contains(field), "no {field} in {stdout}");
    }
}

#[test]
fn serve_echo_runs_for_its_seconds_and_reports_the_bytes_it_echoed() {
    let port = free_port("127.0.0.1");
    let server = Command::new(OXNET)
        .args([
            "loadgen",
            "--serve-echo",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--threads",
            "2",
            "-t",
            "2",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    // Wait for it to listen (these probe connections send nothing).
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(2), "the server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = Command::new(OXNET)
        .args([
            "loadgen",
            "-s",
            &addr.to_string(),
            "--requests",
            "50",
            "-c",
            "2",
            "--size",
            "1000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done = server.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("listening on 127.0.0.1:{port} (2 threads)")),
        "{stderr}"
    );
    assert!(stderr.contains(", 50000 bytes echoed"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(4), "it ran past its 2 s");

    let help = Command::new(OXNET).args(["loadgen", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--mode",
        "--rate",
        "--connections",
        "--requests",
        "--serve-echo",
        "--json",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}
