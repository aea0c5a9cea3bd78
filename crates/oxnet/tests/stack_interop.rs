//! oxnet's TCP/IP stack against Linux, the rest of issue 11's interop
//! tests (stack_echo.rs has the first ones): thousands of Linux
//! connections (`oxnet loadgen` on kernel sockets) open at once to
//! conf/echo.click; peers that vanish (keepalive and TCP_USER_TIMEOUT set
//! to seconds give up with ETIMEDOUT, on the server and on the client);
//! bulk random data both ways under loss, duplication, reordering and a
//! rate limit in both directions, checked by SHA-256 (socat and Python's
//! sockets to the oxnet server) and byte by byte (the oxnet client to a
//! Python server). Every namespace is made and removed here. The kernel
//! has no sch_netem, so the impairments are graph elements in oxnet's
//! configuration (RandomSample, Tee, Queue, RatedUnqueue,
//! BandwidthRatedUnqueue), and a peer vanishes when RandomSample drops
//! every frame oxnet receives (set through the control socket).

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, repo, sha256, socat_echo, value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// An oxnet router run in a namespace on a TAP device it makes, with a
/// control socket; ended with SIGINT, its -h counters read at exit.
struct Router {
    /// Taken when it has ended; a Router dropped with it still running
    /// (a test that failed) stops it.
    child: Option<Child>,
    socket: PathBuf,
}

impl Router {
    fn start(ns: &Netns, tap: &str, config: &Path, vars: &[String], handlers: &[&str]) -> Router {
        let socket = std::env::temp_dir().join(format!("{}.sock", netns::unique("ctl")));
        let mut args = vec![
            "120".to_string(),
            OXNET.to_string(),
            "run".to_string(),
            config.to_str().unwrap().to_string(),
        ];
        args.extend(vars.iter().cloned());
        for h in handlers {
            args.push("-h".into());
            args.push(h.to_string());
        }
        args.push("-u".into());
        args.push(socket.to_str().unwrap().into());
        let mut child = ns
            .command("timeout")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !ns.links().iter().any(|l| l == tap) || !socket.exists() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "oxnet ended before its TAP came up"
            );
            assert!(start.elapsed() < Duration::from_secs(20), "no {tap} after 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Router {
            child: Some(child),
            socket,
        }
    }

    fn handler(&self, args: &[&str]) -> String {
        let out = Command::new(OXNET)
            .args(["handler", "--socket", self.socket.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "oxnet handler {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn set(&self, name: &str, v: &str) {
        self.handler(&[name, v]);
    }

    fn read(&self, name: &str) -> u64 {
        let v = self.handler(&[name]);
        v.parse().unwrap_or_else(|_| panic!("{name}: '{v}'"))
    }

    /// Polls counter `name` until it reaches `want`; the time it took.
    fn wait_for(&self, name: &str, want: u64, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if self.read(name) >= want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "{name} did not reach {want} in {limit:?} (it is {})",
                self.read(name)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (SIGINT) and returns what it printed.
    fn stop(self) -> String {
        let pid = self.child.as_ref().unwrap().id();
        // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
        self.finish()
    }

    /// Waits for it to end by itself (at most `limit`) and returns what it
    /// printed.
    fn wait(mut self, limit: Duration) -> String {
        let start = Instant::now();
        while self.child.as_mut().unwrap().try_wait().unwrap().is_none() {
            if start.elapsed() > limit {
                let out = self.stop();
                panic!("oxnet did not end in {limit:?}:\n{out}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.finish()
    }

    fn finish(mut self) -> String {
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        let _ = std::fs::remove_file(&self.socket);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: our own child (`timeout`, which passes SIGTERM on), by pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// conf/echo.click on TAP `tap` (kernel side 10.79.0.1 and fd00:79::1,
/// oxnet .2 and ::2), with `extra` variables.
fn echo_server(ns: &Netns, tap: &str, config: &Path, extra: &[&str], handlers: &[&str]) -> Router {
    let mut vars = vec![
        format!("DEV=tap:{tap},ip=10.79.0.1/24"),
        "IP=10.79.0.2".to_string(),
        "IP6=fd00:79::2".to_string(),
    ];
    vars.extend(extra.iter().map(|s| s.to_string()));
    let r = Router::start(ns, tap, config, &vars, handlers);
    ns.ip(&["-6", "addr", "add", "fd00:79::1/64", "dev", tap, "nodad"]);
    r
}

/// A Python program run in the namespace, its stdout read line by line.
struct Python {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl Python {
    fn start(ns: &Netns, program: &str, args: &[&str]) -> Python {
        let mut child = ns
            .command("timeout")
            .args(["60", "python3", "-c", program])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3");
        let lines = BufReader::new(child.stdout.take().unwrap());
        Python { child, lines }
    }

    /// The next line it prints (panics, with its stderr, if it ends).
    fn line(&mut self) -> String {
        let mut l = String::new();
        if self.lines.read_line(&mut l).unwrap() == 0 {
            let _ = self.child.wait();
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err);
            panic!("python ended early: {err}");
        }
        l.trim().to_string()
    }

    /// Closes its stdin (our programs end then) and waits.
    fn end(mut self) {
        drop(self.child.stdin.take());
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                // SAFETY: our own child (`timeout`), by pid.
                unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Python {
    /// A test that failed leaves no Python behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: our own child (`timeout`, which passes SIGTERM on), by pid.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

/// Runs `oxnet loadgen` (kernel sockets) in the namespace against
/// `target` with `connections` persistent connections and `requests`
/// requests over them, counting the established connections to `dst`
/// with `ss` meanwhile. Returns its JSON line and the most connections
/// seen established at once.
fn loadgen(ns: &Netns, target: &str, dst: &str, connections: usize, requests: usize) -> (String, usize) {
    let child = ns
        .command("timeout")
        .args(["60", OXNET, "loadgen", "-s", target, "--mode", "persistent"])
        .args(["-c", &connections.to_string(), "--requests", &requests.to_string()])
        .args(["--timeout", "20", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let mut most = 0;
    while !waiter.is_finished() {
        let out = ns.run("ss", &["-Htn", "state", "established", "dst", dst]);
        most = most.max(String::from_utf8_lossy(&out.stdout).lines().count());
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = waiter.join().unwrap();
    assert!(
        out.status.success(),
        "loadgen (pid {pid}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (common::json_line(&out), most)
}

#[test]
fn thousands_of_linux_connections_at_once_are_all_answered_by_the_oxnet_echo_server() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("ic");
    let tap = netns::unique("tic");
    let handlers = [
        "echo.connections",
        "echo.bytes",
        "echo.errors",
        "tcp/listen.syns",
        "tcp/listen.cookies_sent",
        "tcp/listen.cookies_accepted",
        "tcp/listen.overflows",
        "tcp/listen.drops",
    ];
    let server = echo_server(&ns, &tap, &repo().join("conf/echo.click"), &[], &handlers);
    // The kernel's queue of frames for oxnet to read: its default 1000
    // overflows with 2000 SYNs at once when the cores are busy (counted as
    // the TAP's TX drops), and a connection whose SYN is lost waits 1 s,
    // then 3 s, for Linux to send it again (RFC 6298 §5.7).
    ns.ip(&["link", "set", &tap, "txqueuelen", "10000"]);
    // Linux's neighbour entries for oxnet resolved first: while one is
    // unresolved, Linux keeps at most unres_qlen_bytes (212992, 256 SYNs)
    // of packets for it and drops the rest, whose SYNs then wait a second.
    for addr in ["10.79.0.2", "fd00:79::2"] {
        let ping = ns.run("ping", &["-c", "1", "-W", "5", addr]);
        assert!(
            ping.status.success(),
            "ping {addr}: {}",
            String::from_utf8_lossy(&ping.stdout)
        );
    }
    let mut total = (0, 0);
    // (connections, requests): 2000 over IPv4, 500 over IPv6, 64 bytes
    // each. Loadgen stops at the count: enough requests (a few seconds)
    // that every connection is open before the end.
    for (target, dst, c, r) in [
        ("10.79.0.2:7", "10.79.0.2", 2000, 12000),
        ("[fd00:79::2]:7", "[fd00:79::2]", 500, 4000),
    ] {
        let (json, most) = loadgen(&ns, target, dst, c, r);
        // What the stack and the TAP counted, for a failure's message.
        let counters = || {
            let mut s = String::new();
            for h in [
                "tcp/listen.syns",
                "tcp/listen.cookies_sent",
                "tcp/listen.resets",
                "nd.drops",
                "arp.drops",
            ] {
                s += &format!("{h} {} ", server.handler(&[h]));
            }
            s + &String::from_utf8_lossy(&ns.run("ip", &["-s", "link", "show", &tap]).stdout)
        };
        assert_eq!(common::field(&json, "requests"), r as u64, "{target}: {json}");
        assert_eq!(
            common::field(&json, "connections"),
            c as u64,
            "{target}: {json}\n{}",
            counters()
        );
        assert_eq!(common::field(&json, "total"), 0, "{target}: errors: {json}");
        assert_eq!(common::field(&json, "bytes_received"), 64 * r as u64, "{json}");
        // All of them open at the same time (ss counts the client's).
        assert!(
            most >= c * 9 / 10,
            "{target}: at most {most} of {c} connections established at once"
        );
        total = (total.0 + c, total.1 + r);
    }
    let out = server.stop();
    assert_eq!(value(&out, "echo.connections"), total.0 as u64, "{out}");
    assert_eq!(value(&out, "echo.bytes"), 64 * total.1 as u64, "{out}");
    assert_eq!(value(&out, "echo.errors"), 0, "{out}");
    // Every connection was made once: from a SYN-RECEIVED TCB, or from a
    // SYN cookie's ACK once the 128 half-open were taken (RFC 4987 §3.6).
    let (syns, cookies) = (
        value(&out, "tcp/listen.syns"),
        value(&out, "tcp/listen.cookies_accepted"),
    );
    assert!(syns + cookies >= total.0 as u64, "{out}");
    assert!(value(&out, "tcp/listen.cookies_sent") >= cookies, "{out}");
    assert_eq!(value(&out, "tcp/listen.overflows"), 0, "{out}");
    assert_eq!(value(&out, "tcp/listen.drops"), 0, "{out}");
    drop(ns);
}

/// A Python client: connects to argv[1]:argv[2], exchanges one message,
/// prints "echoed", then (argv[3] == "stream") keeps sending and reading
/// as fast as it can, or stays idle, until its stdin closes.
const PY_CLIENT: &str = r#"
import socket, sys, threading
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.sendall(b"x" * 1000)
got = b""
while len(got) < 1000:
    got += s.recv(4096)
assert got == b"x" * 1000
if sys.argv[3] == "stream":
    s.settimeout(None)
    def pump():
        try:
            while True:
                s.sendall(b"y" * 65536)
        except OSError:
            pass
    def drain():
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=drain, daemon=True).start()
print("echoed", flush=True)
sys.stdin.read()
"#;

#[test]
fn the_oxnet_server_gives_up_on_a_vanished_linux_client_by_keepalive_and_by_user_timeout() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("iv");
    let config = repo().join("conf/echo.click");
    let handlers = [
        "echo.errors",
        "echo.timeouts",
        "tcp/timers.keepalive_probes",
        "tcp/timers.keepalive_timeouts",
        "tcp/timers.user_timeouts",
    ];
    // Keepalive: idle 1 s, a probe every 1 s, 3 unanswered. The client
    // is idle after its echo; then every frame to oxnet is lost.
    let tap = netns::unique("tiv");
    let server = echo_server(
        &ns,
        &tap,
        &config,
        &["KEEPALIVE=1s", "KEEPALIVE_INTERVAL=1s", "KEEPALIVE_COUNT=3"],
        &handlers,
    );
    let mut client = Python::start(&ns, PY_CLIENT, &["10.79.0.2", "7", "idle"]);
    assert_eq!(client.line(), "echoed");
    // Idle: probes answered, no timeout.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(server.read("tcp/timers.keepalive_probes") >= 1, "no keepalive probe");
    assert_eq!(server.read("echo.timeouts"), 0, "gave up on a live peer");
    server.set("loss.drop_prob", "1");
    // RFC 1122 §4.2.3.6 (Linux's TCP_KEEPCNT): given up once `count`
    // probes went unanswered: idle (counted from the last segment heard,
    // within the last second) plus 3 intervals after the loss started,
    // so between 3 s and 4 s, plus timer and polling slack.
    let took = server.wait_for("echo.timeouts", 1, Duration::from_secs(15));
    assert!(
        took >= Duration::from_millis(2900) && took <= Duration::from_millis(5000),
        "keepalive gave up after {took:?}"
    );
    client.end();
    let out = server.stop();
    assert_eq!(value(&out, "tcp/timers.keepalive_timeouts"), 1, "{out}");
    assert_eq!(value(&out, "tcp/timers.user_timeouts"), 0, "{out}");
    assert_eq!(value(&out, "echo.errors"), 1, "ETIMEDOUT to the application: {out}");

    // TCP_USER_TIMEOUT 2 s, no keepalive: the client streams (oxnet's
    // echo always has data in flight), then every frame to oxnet is lost.
    let tap = netns::unique("tiu");
    let server = echo_server(&ns, &tap, &config, &["USER_TIMEOUT=2s"], &handlers);
    let mut client = Python::start(&ns, PY_CLIENT, &["fd00:79::2", "7", "stream"]);
    assert_eq!(client.line(), "echoed");
    std::thread::sleep(Duration::from_millis(500));
    server.set("loss.drop_prob", "1");
    // RFC 5482 §3 / RFC 9293 §3.8.3: given up at the first retransmission
    // timeout at or after 2 s of unacknowledged data. The RTO starts at
    // its 200 ms floor and doubles (0.2, 0.6, 1.4, 3.0 s...), so that is
    // by 3.2 s plus one RTO of variance; never before 2 s.
    let took = server.wait_for("echo.timeouts", 1, Duration::from_secs(15));
    assert!(
        took >= Duration::from_millis(1900) && took <= Duration::from_millis(5500),
        "user timeout gave up after {took:?}"
    );
    client.end();
    let out = server.stop();
    assert_eq!(value(&out, "tcp/timers.user_timeouts"), 1, "{out}");
    assert_eq!(value(&out, "tcp/timers.keepalive_timeouts"), 0, "{out}");
    assert_eq!(value(&out, "echo.errors"), 1, "{out}");
    drop(ns);
}

/// A Python server on port argv[1] (both families), for one connection:
/// with argv[2] == "echo" it echoes everything, prints "got" once
/// 100 kB have come and closes after the client's FIN; with "sink" it
/// reads to the client's FIN, prints "eof" and then holds the connection
/// open without a word. Until its stdin closes.
const PY_SERVER: &str = r#"
import socket, sys, threading
l = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
l.bind(("::", int(sys.argv[1])))
l.listen(8)
print("listening", flush=True)
held = []
def serve():
    c, _ = l.accept()
    held.append(c)
    n, told = 0, False
    try:
        while True:
            b = c.recv(65536)
            if not b:
                print("eof", flush=True)
                if sys.argv[2] == "echo":
                    c.close()
                break
            if sys.argv[2] == "echo":
                c.sendall(b)
            n += len(b)
            if n >= 100000 and not told:
                print("got", flush=True)
                told = True
    except OSError:
        pass
threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
"#;

#[test]
fn the_oxnet_client_gives_up_on_a_vanished_linux_server_by_user_timeout_and_by_keepalive() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("iw");
    let tap = netns::unique("tiw");
    let mut server = Python::start(&ns, PY_SERVER, &["7009", "echo"]);
    assert_eq!(server.line(), "listening");
    let vars = [
        format!("DEV=tap:{tap},ip=10.83.0.1/24"),
        "IP=10.83.0.2".to_string(),
        "SRC=10.83.0.2".to_string(),
        "DST=10.83.0.1".to_string(),
        "PORT=7009".to_string(),
        "CONNECTIONS=1".to_string(),
        "CONCURRENCY=1".to_string(),
        "BYTES=50000000".to_string(),
        "USER_TIMEOUT=2s".to_string(),
    ];
    let client = Router::start(
        &ns,
        &tap,
        &repo().join("conf/echo-client.click"),
        &vars,
        &["cli.done", "cli.failed", "cli.timeouts", "tcp/timers.user_timeouts"],
    );
    // The transfer runs; then the server vanishes: every frame to oxnet lost.
    assert_eq!(server.line(), "got");
    client.set("loss.drop_prob", "1");
    let start = Instant::now();
    // The client stops by itself once its one connection has ended.
    let out = client.wait(Duration::from_secs(20));
    let took = start.elapsed();
    // As on the server: the first RTO at or after 2 s, by about 5.5 s
    // (plus the router's exit).
    assert!(
        took >= Duration::from_millis(1900) && took <= Duration::from_millis(6500),
        "user timeout gave up after {took:?}: {out}"
    );
    assert_eq!(value(&out, "cli.failed"), 1, "{out}");
    assert_eq!(value(&out, "cli.timeouts"), 1, "ETIMEDOUT: {out}");
    assert_eq!(value(&out, "cli.done"), 0, "{out}");
    assert_eq!(value(&out, "tcp/timers.user_timeouts"), 1, "{out}");
    server.end();

    // Keepalive, over IPv6: the server takes the client's bytes and FIN
    // and then says nothing, the client waits for an echo in FIN-WAIT-2
    // (Linux probes there too), probes answered; then the server vanishes.
    let tap = netns::unique("tik");
    let mut server = Python::start(&ns, PY_SERVER, &["7010", "sink"]);
    assert_eq!(server.line(), "listening");
    let vars = [
        format!("DEV=tap:{tap},ip=10.84.0.1/24"),
        "IP=10.84.0.2".to_string(),
        "IP6=fd00:84::2".to_string(),
        "SRC=fd00:84::2".to_string(),
        "DST=fd00:84::1".to_string(),
        "PORT=7010".to_string(),
        "CONNECTIONS=1".to_string(),
        "BYTES=20000".to_string(),
        "KEEPALIVE=1s".to_string(),
        "KEEPALIVE_INTERVAL=1s".to_string(),
        "KEEPALIVE_COUNT=3".to_string(),
    ];
    let client = Router::start(
        &ns,
        &tap,
        &repo().join("conf/echo-client.click"),
        &vars,
        &[
            "cli.done",
            "cli.failed",
            "cli.timeouts",
            "tcp/timers.keepalive_timeouts",
            "tcp/timers.user_timeouts",
        ],
    );
    ns.ip(&["-6", "addr", "add", "fd00:84::1/64", "dev", &tap, "nodad"]);
    assert_eq!(server.line(), "eof");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(client.read("tcp/timers.keepalive_probes") >= 1, "no keepalive probe");
    assert_eq!(client.read("cli.failed"), 0, "gave up on a live server");
    client.set("loss.drop_prob", "1");
    let start = Instant::now();
    let out = client.wait(Duration::from_secs(20));
    let took = start.elapsed();
    // As on the server: 3 unanswered probes, between 3 s and 4 s after
    // the loss started, plus slack and the router's exit.
    assert!(
        took >= Duration::from_millis(2900) && took <= Duration::from_millis(5500),
        "keepalive gave up after {took:?}: {out}"
    );
    assert_eq!(value(&out, "cli.failed"), 1, "{out}");
    assert_eq!(value(&out, "cli.timeouts"), 1, "ETIMEDOUT: {out}");
    assert_eq!(value(&out, "tcp/timers.keepalive_timeouts"), 1, "{out}");
    assert_eq!(value(&out, "tcp/timers.user_timeouts"), 0, "{out}");
    server.end();
    drop(ns);
}

/// `conf` (conf/echo.click or conf/echo-client.click, which share the
/// device part) with impairments in both directions: frames oxnet
/// receives pass `loss` (LOSS of them dropped), `dup` (DUP of them go
/// twice, through a Tee) and `reo` (REORDER of them wait in a queue
/// drained 2000 a second, so the frames behind them overtake them);
/// frames oxnet sends pass `out`, `odup` and `oreo` the same way, then a
/// 40 Mbit/s bottleneck with a 100-frame queue (`rate`), whose overflow
/// is loss too.
fn impaired_config(conf: &str, loss: f64, dup: f64, reorder: f64) -> TempFile {
    let text = std::fs::read_to_string(repo().join(conf)).unwrap();
    let input = "dev -> loss :: RandomSample(DROP $LOSS) -> eth;";
    let output = "out :: ToDevice(\"$DEV\", TIMEOUT 0);";
    assert!(text.contains(input) && text.contains(output), "{conf} changed");
    let text = text
        .replace(
            input,
            &format!(
                "dev -> loss :: RandomSample(DROP {loss}) -> dup :: RandomSample(DROP {dup})
                     -> reo :: RandomSample(DROP {reorder}) -> eth;
                 dup[1] -> dupt :: Tee(2); dupt[0] -> eth; dupt[1] -> eth;
                 reo[1] -> Queue(100) -> RatedUnqueue(RATE 2000) -> eth;"
            ),
        )
        .replace(
            output,
            &format!(
                "todev :: ToDevice(\"$DEV\", TIMEOUT 0);
                 out :: RandomSample(DROP {loss}) -> odup :: RandomSample(DROP {dup})
                     -> oreo :: RandomSample(DROP {reorder}) -> rate :: Queue(100)
                     -> BandwidthRatedUnqueue(RATE 40Mbps) -> todev;
                 out[1] -> Discard; odup[1] -> odupt :: Tee(2); odupt[0] -> rate; odupt[1] -> rate;
                 oreo[1] -> Queue(100) -> RatedUnqueue(RATE 2000) -> rate;"
            ),
        );
    let path = std::env::temp_dir().join(format!("{}.click", netns::unique("cfg")));
    std::fs::write(&path, text).unwrap();
    TempFile(path)
}

/// A file removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A Python client: sends argv[3] random bytes (seed argv[4]) to
/// argv[1]:argv[2] while reading the echo, then prints the length and
/// SHA-256 of what it sent and of what came back.
const PY_BULK: &str = r#"
import hashlib, random, socket, sys, threading
data = random.Random(int(sys.argv[4])).randbytes(int(sys.argv[3]))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
back = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    back += b
t.join()
print(len(data), hashlib.sha256(data).hexdigest(), len(back), hashlib.sha256(back).hexdigest(), flush=True)
"#;

#[test]
fn bulk_random_data_comes_back_byte_exact_under_loss_duplication_reordering_and_a_rate_limit() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("ib");
    let tap = netns::unique("tib");
    // 2 % lost, 2 % duplicated, 3 % delayed past the frames behind them,
    // each way.
    let config = impaired_config("conf/echo.click", 0.02, 0.02, 0.03);
    let impairments = ["loss", "dup", "reo", "out", "odup", "oreo"];
    let mut handlers: Vec<String> = impairments.iter().map(|e| format!("{e}.drops")).collect();
    handlers.extend(
        [
            "echo.bytes",
            "echo.errors",
            "tcp/ro.held",
            "tcp/seg.retransmits",
            "tcp/sackrtx.retransmits",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let handlers: Vec<&str> = handlers.iter().map(String::as_str).collect();
    let server = echo_server(&ns, &tap, &config.0, &[], &handlers);
    const BYTES: usize = 2_000_000;
    // IPv4: socat, hashed here.
    let data = random_bytes(BYTES, 4242);
    let back = socat_echo(&ns.name, "TCP:10.79.0.2:7", &data, 30);
    assert_eq!(back.len(), data.len(), "IPv4: bytes back");
    assert_eq!(sha256(&back), sha256(&data), "IPv4: SHA-256 of the echo");
    // IPv6: Python's sockets, hashed there.
    let mut py = Python::start(&ns, PY_BULK, &["fd00:79::2", "7", &BYTES.to_string(), "6"]);
    let line = py.line();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{line}");
    assert_eq!(
        (f[0], f[2]),
        (BYTES.to_string().as_str(), BYTES.to_string().as_str()),
        "IPv6: {line}"
    );
    assert_eq!(f[1], f[3], "IPv6: SHA-256 of the echo differs: {line}");
    py.end();
    let out = server.stop();
    assert_eq!(value(&out, "echo.bytes"), 2 * BYTES as u64, "{out}");
    assert_eq!(value(&out, "echo.errors"), 0, "{out}");
    // Every impairment acted, and oxnet's side had to recover: segments
    // held out of order, segments sent again.
    for e in impairments {
        assert!(value(&out, &format!("{e}.drops")) > 0, "{e} did nothing: {out}");
    }
    assert!(value(&out, "tcp/ro.held") > 0, "{out}");
    assert!(
        value(&out, "tcp/seg.retransmits") + value(&out, "tcp/sackrtx.retransmits") > 0,
        "{out}"
    );

    // The other way round: the oxnet echo client, with the same
    // impairments, to a Linux (Python) echo server; it compares every
    // byte that comes back with what it sent.
    let mut linux = Python::start(&ns, PY_SERVER, &["7011", "echo"]);
    assert_eq!(linux.line(), "listening");
    let tap = netns::unique("tibc");
    let config = impaired_config("conf/echo-client.click", 0.02, 0.02, 0.03);
    let vars = [
        format!("DEV=tap:{tap},ip=10.85.0.1/24"),
        "IP=10.85.0.2".to_string(),
        "SRC=10.85.0.2".to_string(),
        "DST=10.85.0.1".to_string(),
        "PORT=7011".to_string(),
        "CONNECTIONS=1".to_string(),
        format!("BYTES={BYTES}"),
    ];
    let mut handlers: Vec<String> = impairments.iter().map(|e| format!("{e}.drops")).collect();
    handlers.extend(
        [
            "cli.done",
            "cli.failed",
            "cli.bytes",
            "tcp/seg.retransmits",
            "tcp/sackrtx.retransmits",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let handlers: Vec<&str> = handlers.iter().map(String::as_str).collect();
    let client = Router::start(&ns, &tap, &config.0, &vars, &handlers);
    let out = client.wait(Duration::from_secs(60));
    assert_eq!(value(&out, "cli.done"), 1, "{out}");
    assert_eq!(value(&out, "cli.failed"), 0, "{out}");
    assert_eq!(value(&out, "cli.bytes"), BYTES as u64, "{out}");
    for e in impairments {
        assert!(value(&out, &format!("{e}.drops")) > 0, "{e} did nothing: {out}");
    }
    assert!(
        value(&out, "tcp/seg.retransmits") + value(&out, "tcp/sackrtx.retransmits") > 0,
        "{out}"
    );
    linux.end();
    drop(ns);
}
