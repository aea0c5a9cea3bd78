//! `oxnet loadgen` on oxnet's own stack (issue 11, item 8: "runs on
//! oxnet's stack (any device)") against conf/echo.click on oxnet's stack,
//! the two joined by the software 82599 model's wire (`sim:` ports, as in
//! stack_cores.rs): the server's router runs on a thread of its own, the
//! client's router and state machine on the client's thread. Exact
//! request counts and bytes, short and persistent connections, IPv4 and
//! IPv6; a closed port counted as refused, a dead address as timeouts;
//! and an open loop in simulated time, where the schedule runs on the
//! router's clock.

use oxnet::loadgen::on_stack::{self, StackOptions};
use oxnet::loadgen::schedule::InterArrival;
use oxnet::loadgen::{Mode, Options, Summary};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The client's port, wired to the server's.
const CLIENT_DEV: &str = "sim:lgsA,wire=lgsB";
const SERVER_IP: &str = "10.9.1.2";
const SERVER_IP6: &str = "fd00:9::2";

/// Routers are built one at a time (device queues are handed out through
/// one process-wide table) and the client's sim port is one: the tests
/// take turns.
fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// conf/echo.click on sim:lgsB, on a thread of its own for the whole
/// test binary (started by the first test, under its turn).
fn echo_server() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        oxnet_sim::install();
        oxnet_stack::elements::register();
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../conf/echo.click")).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let vars: Vec<(String, String)> = [
                ("DEV", "sim:lgsB"),
                ("IP", SERVER_IP),
                ("IP6", SERVER_IP6),
                ("MAC", "02:00:00:00:0b:02"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let mut router = oxnet_graph::build("conf/echo.click", &text, &vars).unwrap();
            tx.send(()).unwrap();
            static NEVER: AtomicBool = AtomicBool::new(false);
            router.run(&|| NEVER.load(Ordering::Relaxed));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the echo server's router was built");
    });
}

fn options(target: &str, mode: Mode, requests: u64) -> Options {
    Options {
        target: target.parse().unwrap(),
        mode,
        rate: 0.0,
        arrival: InterArrival::Fixed,
        connections: 4,
        threads: 1,
        duration: Some(Duration::from_secs(20)),
        requests: Some(requests),
        size: 100,
        kv: None,
        timeout: Duration::from_secs(5),
        seed: 1,
    }
}

fn stack() -> StackOptions {
    StackOptions {
        device: Some(CLIENT_DEV.into()),
        ip: Some(("10.9.1.1".parse().unwrap(), 24)),
        ip6: Some("fd00:9::1".parse().unwrap()),
        mac: "02:00:00:00:0a:01".into(),
        ..StackOptions::default()
    }
}

/// Runs one load against the echo server.
fn run(o: &Options, s: &StackOptions) -> Summary {
    let _turn = turn();
    echo_server();
    on_stack::run(o, s).unwrap()
}

fn assert_exact(s: &Summary, requests: u64, size: u64) {
    assert_eq!(s.errors.total(), 0, "{}", s.line());
    assert_eq!(s.completed, requests, "{}", s.line());
    assert_eq!(s.bytes_sent, requests * size, "{}", s.line());
    assert_eq!(s.bytes_received, requests * size, "{}", s.line());
    assert_eq!(s.latency.len(), requests);
}

#[test]
fn persistent_connections_get_exactly_n_answers_over_ipv4_and_ipv6() {
    for target in [format!("{SERVER_IP}:7"), format!("[{SERVER_IP6}]:7")] {
        // A host of the target's family only (the built-in configuration
        // without the other family's part), with a warm-up connection
        // first, outside the counts.
        let mut st = stack();
        if target.starts_with('[') {
            st.ip = None;
        } else {
            st.ip6 = None;
        }
        st.warm_up = true;
        let s = run(&options(&target, Mode::Persistent, 400), &st);
        assert_exact(&s, 400, 100);
        assert_eq!(s.connections, 4, "{target}: opened once each: {}", s.line());
        // Real time: the share of the run the thread was not idle.
        let busy = s.busy_seconds.expect("measured on oxnet's stack");
        assert!(busy > 0.0 && busy <= s.seconds, "{busy} of {}", s.seconds);
    }
}

#[test]
fn short_connections_one_request_each_over_ipv4_and_ipv6() {
    for target in [format!("{SERVER_IP}:7"), format!("[{SERVER_IP6}]:7")] {
        let s = run(&options(&target, Mode::Short, 150), &stack());
        assert_exact(&s, 150, 100);
        assert_eq!(s.connections, 150, "{target}: one connection per request: {}", s.line());
    }
}

#[test]
fn a_fixed_next_hop_mac_carries_both_families() {
    // Every frame to the server's Ethernet address (the built-in
    // configuration's EtherEncap in place of ARP and ND); the server
    // still resolves us, and our ARP and ND answer it.
    let mut s = stack();
    s.next_hop_mac = Some("02:00:00:00:0b:02".into());
    for target in [format!("{SERVER_IP}:7"), format!("[{SERVER_IP6}]:7")] {
        let mut o = options(&target, Mode::Short, 30);
        o.connections = 1;
        let summary = run(&o, &s);
        assert_exact(&summary, 30, 100);
        assert_eq!(summary.connections, 30, "{target}: {}", summary.line());
    }
}

#[test]
fn large_requests_come_back_whole() {
    let mut o = options(&format!("{SERVER_IP}:7"), Mode::Persistent, 8);
    o.size = 200_000;
    o.connections = 2;
    let s = run(&o, &stack());
    assert_exact(&s, 8, 200_000);
}

#[test]
fn a_closed_port_is_refused_and_a_dead_address_times_out() {
    // The server's stack answers a SYN to a closed port with a RST.
    let o = options(&format!("{SERVER_IP}:9"), Mode::Short, 5);
    let s = run(&o, &stack());
    assert_eq!((s.completed, s.errors.refused), (0, 5), "{}", s.line());
    assert_eq!(s.errors.total(), 5, "{}", s.line());
    // Nobody has 10.9.1.99: ARP goes unanswered, each connect times out.
    let mut o = options("10.9.1.99:7", Mode::Short, 3);
    o.connections = 3;
    o.timeout = Duration::from_millis(300);
    let s = run(&o, &stack());
    assert_eq!((s.completed, s.errors.timeout), (0, 3), "{}", s.line());
    assert_eq!(s.errors.total(), 3, "{}", s.line());
}

/// Both hosts in the client's router (stack_cores.rs's shape), so that
/// one clock, simulated, rules the whole exchange.
/// conf/echo-pair.click with this test's port names.
fn one_router() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../conf/echo-pair.click");
    std::fs::read_to_string(path)
        .unwrap()
        .replace("define($A pairA, $B pairB)", "define($A lgtA, $B lgtB)")
}

#[test]
fn the_open_loop_runs_on_the_routers_simulated_clock() {
    let mut o = options("10.9.2.2:7", Mode::Persistent, 1);
    o.requests = None;
    o.rate = 2000.0;
    o.duration = Some(Duration::from_secs(2));
    let s = StackOptions {
        device: None,
        ip: Some(("10.9.2.1".parse().unwrap(), 24)),
        config: Some(("one-router".into(), one_router())),
        simtime: true,
        ..StackOptions::default()
    };
    let summary = {
        let _turn = turn();
        on_stack::run(&o, &s).unwrap()
    };
    // Fixed gaps of 500 us for 2 simulated seconds: the first request at
    // 0.5 ms, the last at 1999.5 ms (the one due at 2 s is the end):
    // 3999, each answered (one connection, one request at a time: the
    // round trip in simulated time is far below 500 us), none waiting
    // for the connection (its handshake is done before 0.5 ms).
    assert_exact(&summary, 3999, 100);
    assert!(summary.quantile_us(1.0) < 500.0, "{}", summary.line());
    assert_eq!(summary.unsent, 0, "{}", summary.line());
    assert!(
        (summary.seconds - 2.0).abs() < 0.01,
        "simulated seconds: {}",
        summary.seconds
    );
}

#[test]
fn two_threads_each_with_its_own_queue_get_every_answer() {
    // A warm-up on one thread: the server learns our Ethernet address
    // from our ARP request (with two threads we send none: an ARP reply
    // would reach thread 0's queue only).
    let mut warm = options(&format!("{SERVER_IP}:7"), Mode::Short, 1);
    warm.connections = 1;
    assert_exact(&run(&warm, &stack()), 1, 100);
    let mut s = stack();
    s.next_hop_mac = Some("02:00:00:00:0b:02".into());
    for (mode, requests, connections) in [(Mode::Persistent, 400, 8), (Mode::Short, 200, 200)] {
        let mut o = options(&format!("{SERVER_IP}:7"), mode, requests);
        o.threads = 2;
        o.connections = 8;
        // A reply that RSS brought to the other thread's stack would be
        // answered with a RST there: a reset or a timeout here.
        let summary = run(&o, &s);
        assert_exact(&summary, requests, 100);
        assert_eq!(summary.connections, connections, "{}", summary.line());
    }
}

#[test]
fn the_command_runs_on_the_stack_and_refuses_stack_flags_without_a_device() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let config = dir.join("loadgen-one-router.click");
    std::fs::write(&config, one_router()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oxnet"))
        .args([
            "loadgen",
            "-s",
            "10.9.2.2:7",
            "--ip",
            "10.9.2.1/24",
            "--simtime",
            "--json",
        ])
        .args(["--rate", "1000", "--arrival", "fixed", "-t", "1", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // 1 ms gaps for one simulated second: 999 requests, 64 bytes each.
    assert!(stdout.contains("\"requests\":999,"), "{stdout}");
    assert!(stdout.contains("\"bytes_received\":63936,"), "{stdout}");
    for (args, says) in [
        (
            &["-s", "10.0.0.2:7", "--ip", "10.0.0.1"][..],
            "--ip is for oxnet's stack",
        ),
        (
            &["-s", "10.0.0.2:7", "--device", "sim:x", "--ip", "10.0.0.1/33"][..],
            "prefix length",
        ),
        (
            &["-s", "10.0.0.2:7", "--device", "sim:x", "--ip6", "fd00::1"][..],
            "--ip ADDR/PREFIX",
        ),
        (
            &[
                "-s",
                "[fd00::2]:7",
                "--device",
                "sim:x",
                "--ip6",
                "fd00::1",
                "--next-hop-mac",
                "02:00:00:00:00:02",
                "-T",
                "2",
                "-c",
                "2",
            ][..],
            "IPv6",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_oxnet"))
            .arg("loadgen")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
