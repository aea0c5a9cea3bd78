//! `oxnet loadgen --proto memcached-text|memcached-binary` (issue 12,
//! Benchmark "Key-value"): short runs against Debian's memcached 1.6,
//! on kernel sockets over loopback and on oxnet's own stack over a TAP
//! device in a namespace made here. Every answer is checked by the
//! loadgen (a GET returns the value and flags its key was stored with);
//! the counts must agree exactly with memcached's own `stats`.

mod common;

use common::netns::{self, Netns};
use common::{field, json_line, text};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// memcached on loopback at a free port, `-t 1`, ended by pid on drop.
struct Memcached {
    child: Child,
    addr: SocketAddr,
}

impl Memcached {
    fn start() -> Memcached {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut c = Command::new("timeout");
        c.args(["30", "memcached", "-U", "0", "-t", "1", "-l", "127.0.0.1", "-p"])
            .arg(port.to_string());
        // memcached refuses to run as root without a user to switch to.
        if unsafe { libc::geteuid() } == 0 {
            c.args(["-u", "nobody"]);
        }
        let mut child = c
            .stdout(Stdio::null())
            .spawn()
            .expect("memcached (scripts/install-deps.sh installs it)");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let start = Instant::now();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(child.try_wait().unwrap().is_none(), "memcached ended at start");
            assert!(start.elapsed() < Duration::from_secs(10), "memcached not listening");
            std::thread::sleep(Duration::from_millis(20));
        }
        Memcached { child, addr }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child (`timeout`, which passes it on).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// memcached's `stats` value `name` at `addr`.
fn stat(addr: SocketAddr, name: &str) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"stats\r\n").unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while !all.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "memcached closed during stats");
        all.extend_from_slice(&buf[..n]);
    }
    let all = String::from_utf8_lossy(&all);
    let prefix = format!("STAT {name} ");
    all.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {all}"))
        .trim()
        .parse()
        .unwrap()
}

fn loadgen(args: &[&str]) -> (Output, String) {
    let out = Command::new("timeout")
        .args(["60", OXNET, "loadgen", "--json"])
        .args(args)
        .output()
        .unwrap();
    let json = json_line(&out);
    (out, json)
}

/// Every request answered and checked, none lost or extra: the
/// loadgen's counts are memcached's counts.
fn assert_exact(json: &str, out: &Output, requests: u64, server: SocketAddr, before: (u64, u64)) {
    let ctx = || format!("{json}\n{}", text(&out.stderr));
    assert!(out.status.success(), "{}", ctx());
    assert_eq!(field(json, "requests"), requests, "{}", ctx());
    assert_eq!(field(json, "total"), 0, "errors: {}", ctx());
    assert_eq!(field(json, "unsent"), 0, "{}", ctx());
    let (gets, sets) = (field(json, "gets"), field(json, "sets"));
    assert_eq!(gets + sets, requests, "{}", ctx());
    assert_eq!(
        stat(server, "cmd_get") - before.0,
        gets,
        "memcached saw other GETs: {}",
        ctx()
    );
    assert_eq!(
        stat(server, "cmd_set") - before.1,
        sets,
        "memcached saw other SETs: {}",
        ctx()
    );
}

#[test]
fn text_and_binary_loads_against_memcached_answer_every_request_with_the_stored_value() {
    let mc = Memcached::start();
    let target = mc.addr.to_string();

    // Text, one connection: the fill (the first 200 requests, SETs of
    // key:0..key:199) ends before any GET, so no GET may miss.
    let (out, json) = loadgen(&[
        "-s",
        &target,
        "--proto",
        "memcached-text",
        "--keys",
        "200",
        "--value-size",
        "3000",
        "-c",
        "1",
        "--requests",
        "3000",
    ]);
    assert_exact(&json, &out, 3000, mc.addr, (0, 0));
    assert!(json.contains("\"proto\":\"memcached-text\""), "{json}");
    assert_eq!(field(&json, "misses"), 0, "{json}");
    assert_eq!(stat(mc.addr, "get_misses"), 0);
    assert!(field(&json, "sets") >= 200, "the fill: {json}");
    let before = (stat(mc.addr, "cmd_get"), stat(mc.addr, "cmd_set"));

    // Binary, two threads, eight connections, an open loop, over the
    // keys the text run stored (the same --value-size: a value is a
    // function of its key and that size); values of 3000 bytes, several
    // segments each.
    let (out, json) = loadgen(&[
        "-s",
        &target,
        "--proto",
        "memcached-binary",
        "--keys",
        "200",
        "--value-size",
        "3000",
        "-c",
        "8",
        "-T",
        "2",
        "-q",
        "20000",
        "--requests",
        "4000",
        "--get-ratio",
        "0.8",
    ]);
    assert_exact(&json, &out, 4000, mc.addr, before);
    assert_eq!(
        field(&json, "misses"),
        0,
        "the keys were stored by the first run: {json}"
    );
    let sets = field(&json, "sets");
    assert!(
        (600..1100).contains(&sets),
        "get ratio 0.8 over 3800 random requests: {json}"
    );
}

#[test]
fn an_echo_server_is_not_memcached_and_every_answer_counts_as_corrupt() {
    // oxnet's own Linux echo server sends each command back: the
    // loadgen must refuse every such answer.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut echo = Command::new("timeout")
        .args([
            "20",
            OXNET,
            "loadgen",
            "--serve-echo",
            &port.to_string(),
            "--threads",
            "1",
        ])
        .args(["--bind", "127.0.0.1"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "echo server not listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    for proto in ["memcached-text", "memcached-binary"] {
        let (out, json) = loadgen(&["-s", &addr.to_string(), "--proto", proto, "--requests", "20"]);
        assert_eq!(field(&json, "requests"), 0, "{json}");
        assert_eq!(field(&json, "corrupt"), 20, "{json} {}", text(&out.stderr));
    }
    // SAFETY: kill(2) on our own child by pid.
    unsafe { libc::kill(echo.id() as libc::pid_t, libc::SIGINT) };
    let _ = echo.wait();
}

#[test]
fn the_memcached_load_runs_on_oxnets_stack_over_a_tap_device() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("kl");
    let tap = netns::unique("tl");
    // memcached on every address of the namespace: the TAP's kernel side
    // (10.88.0.1) appears when the loadgen opens it.
    let mut mc = ns
        .command("timeout")
        .args(["30", "memcached", "-U", "0", "-t", "1", "-p", "11211", "-u", "nobody"])
        .stdout(Stdio::null())
        .spawn()
        .expect("memcached");
    std::thread::sleep(Duration::from_millis(200));
    let out = ns
        .command("timeout")
        .args([
            "30",
            OXNET,
            "loadgen",
            "--json",
            "--device",
            &format!("tap:{tap},ip=10.88.0.1/24"),
            "--ip",
            "10.88.0.2/24",
            "-s",
            "10.88.0.1:11211",
            "--warm-up",
            "--proto",
            "memcached-binary",
            "--keys",
            "100",
            "-c",
            "1",
            "--requests",
            "1000",
        ])
        .output()
        .unwrap();
    let json = json_line(&out);
    // SAFETY: kill(2) on our own child by pid.
    unsafe { libc::kill(mc.id() as libc::pid_t, libc::SIGTERM) };
    let _ = mc.wait();
    drop(ns);
    assert!(out.status.success(), "{json}\n{}", text(&out.stderr));
    assert_eq!(field(&json, "requests"), 1000, "{json}\n{}", text(&out.stderr));
    assert_eq!(field(&json, "total"), 0, "{json}");
    assert_eq!(field(&json, "misses"), 0, "{json}");
    assert_eq!(field(&json, "gets") + field(&json, "sets"), 1000, "{json}");
}

/// The paper's load (issue 13, item 1): mutilate's `-K fb_key -V
/// fb_value -i fb_ia -u 0.25` over `-r` records, text and binary.
/// `--loadonly` stores exactly the records; `--noload` runs then only
/// hit them (every GET checked against the value its record has); the
/// SET share follows `-u`; the key set stays the `-r` records.
#[test]
fn the_etc_flags_store_exactly_the_records_and_every_get_is_verified() {
    let mc = Memcached::start();
    let target = mc.addr.to_string();
    let etc = ["-K", "fb_key", "-V", "fb_value", "-i", "fb_ia", "-r", "300"];

    let args = [
        &["-s", &target, "--proto", "memcached-text", "--loadonly", "-c", "4"][..],
        &etc,
    ]
    .concat();
    let (out, json) = loadgen(&args);
    assert_exact(&json, &out, 300, mc.addr, (0, 0));
    assert_eq!(field(&json, "sets"), 300, "--loadonly: one SET per record: {json}");
    assert_eq!(stat(mc.addr, "curr_items"), 300);

    let before = (stat(mc.addr, "cmd_get"), stat(mc.addr, "cmd_set"));
    let args = [
        &["-s", &target, "--proto", "memcached-binary", "--noload", "-u", "0.25"][..],
        &["-c", "16", "-q", "8000", "--requests", "4000"],
        &etc,
    ]
    .concat();
    let (out, json) = loadgen(&args);
    assert_exact(&json, &out, 4000, mc.addr, before);
    assert_eq!(field(&json, "misses"), 0, "every record was stored: {json}");
    let sets = field(&json, "sets");
    assert!((880..=1120).contains(&sets), "-u 0.25 of 4000: {json}");
    assert_eq!(stat(mc.addr, "curr_items"), 300, "-r bounds the keys");

    // The default: the fill as a pass of its own (not counted), a
    // warm-up, then the measured requests.
    let before = (stat(mc.addr, "cmd_get"), stat(mc.addr, "cmd_set"));
    let args = [
        &["-s", &target, "--proto", "memcached-text", "-u", "0.25", "-w", "0.2"][..],
        &["-c", "8", "--requests", "2000"],
        &etc,
    ]
    .concat();
    let (out, json) = loadgen(&args);
    assert!(out.status.success(), "{json} {}", text(&out.stderr));
    assert_eq!((field(&json, "requests"), field(&json, "total")), (2000, 0), "{json}");
    assert_eq!(field(&json, "misses"), 0, "{json}");
    assert!(
        stat(mc.addr, "cmd_set") - before.1 >= 300 + field(&json, "sets"),
        "the fill stored every record before the run"
    );
    assert_eq!(stat(mc.addr, "curr_items"), 300);
}
