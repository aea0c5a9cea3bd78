//! The virtio driver over vhost-user, against DPDK's vhost back-end
//! (`dpdk-testpmd --vdev net_vhost0,...`, Debian package dpdk-dev) on the
//! host — no VM, no root needed beyond what testpmd wants — and against
//! fake back-ends that misbehave (close at once, answer garbage, never
//! answer, refuse a feature).
//!
//! testpmd runs with `--no-huge` (its own memory need not be huge pages;
//! ours is the memfd arena) and `--no-mlockall`: with mlockall(MCL_FUTURE)
//! it would populate our whole 4 GiB arena mapping on SET_MEM_TABLE.
//! Back-end on CPU 1, the test's busy-polling side on CPU 0: two
//! busy-polling threads on one CPU make both crawl.

mod common;
use common::pin_to_cpu0;
use common::{field, oxnet, text};
use oxnet::apps::{Capture, PacketGenerator};
use oxnet_driver::{Config, Device, PacketBatch};
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TESTPMD: &str = "dpdk-testpmd";

fn testpmd_available() -> bool {
    Command::new(TESTPMD)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Fails (never skips) without testpmd: CI installs it first.
fn require_testpmd() {
    assert!(
        testpmd_available(),
        "{TESTPMD} not found: run scripts/install-deps.sh (it installs Debian's dpdk-dev)"
    );
}

/// A socket path and file prefix nobody else uses.
fn unique(name: &str) -> String {
    format!("oxnet-vu-{}-{name}", std::process::id())
}

/// A dpdk-testpmd vhost-user back-end, stopped (by its pid) when dropped.
struct Backend {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Backend {
    /// Starts testpmd in forwarding `mode` ("io", "rxonly", "txonly") and
    /// waits for its socket.
    fn start(name: &str, mode: &str) -> Backend {
        Backend::start_as(name, mode, false)
    }

    /// With `client`, testpmd's vhost PMD connects to a socket we listen
    /// on (`client=1`; it retries every second until one is there).
    fn start_as(name: &str, mode: &str, client: bool) -> Backend {
        require_testpmd();
        let id = unique(name);
        let socket = std::env::temp_dir().join(format!("{id}.sock"));
        let log = std::env::temp_dir().join(format!("{id}.log"));
        if !client {
            // testpmd creates it (as client, the socket is ours: keep it).
            let _ = std::fs::remove_file(&socket);
        }
        let child = Command::new(TESTPMD)
            .args(["--lcores", "0@1,1@1", "--no-pci", "--no-huge", "-m", "512"])
            .arg("--vdev")
            .arg(format!(
                "net_vhost0,iface={},queues=1,client={}",
                socket.display(),
                client as u8
            ))
            .arg(format!("--file-prefix={id}"))
            // --stats-period keeps testpmd running without a terminal
            // (otherwise it waits for Enter on stdin and exits at EOF).
            .args([
                "--",
                "-a",
                "--no-mlockall",
                "--total-num-mbufs=16384",
                "--stats-period=1",
            ])
            .arg(format!("--forward-mode={mode}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("testpmd log"))
            .stderr(Stdio::from(
                std::fs::File::create(log.with_extension("err")).expect("log"),
            ))
            .spawn()
            .expect("start dpdk-testpmd");
        let mut backend = Backend {
            child: Some(child),
            socket,
            log,
        };
        let start = Instant::now();
        // As client, testpmd connects (retrying every second) as soon as
        // our socket is there, maybe before its own port has started: a
        // connection made then leaves its transmit side off for good
        // (TX-packets 0 while RX works). Wait until it forwards.
        while client && !backend.output().contains("start packet forwarding") {
            if let Some(status) = backend.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("testpmd exited ({status}) before forwarding:\n{}", backend.output());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "testpmd did not start forwarding in 20 s:\n{}",
                backend.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        while !client && !backend.socket.exists() {
            if let Some(status) = backend.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "testpmd exited ({status}) before creating its socket:\n{}",
                    backend.output()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "testpmd made no socket in 20 s:\n{}",
                backend.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        backend
    }

    fn spec(&self) -> String {
        format!("vhost-user:{}", self.socket.display())
    }

    fn output(&self) -> String {
        let out = std::fs::read_to_string(&self.log).unwrap_or_default();
        let err = std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default();
        format!("{out}{err}")
    }

    /// Stops testpmd (SIGTERM: it prints its final statistics) and returns
    /// its output.
    fn stop(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            common::terminate(&mut child);
        }
        self.output()
    }

    /// Packets testpmd's port received, from its final statistics.
    fn received(output: &str) -> Option<u64> {
        let line = output
            .lines()
            .rev()
            .find(|l| l.contains("RX-packets:") && l.contains("RX-total:"))?;
        let at = line.find("RX-packets:")? + "RX-packets:".len();
        line[at..].split_whitespace().next()?.parse().ok()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
        // DPDK's runtime directory for this file prefix (as root under
        // /var/run/dpdk, else under XDG_RUNTIME_DIR or /tmp).
        if let Some(prefix) = self.socket.file_stem() {
            let mut roots = vec![PathBuf::from("/var/run/dpdk"), PathBuf::from("/tmp/dpdk")];
            if let Ok(runtime) = std::env::var("XDG_RUNTIME_DIR") {
                roots.push(Path::new(&runtime).join("dpdk"));
            }
            for root in roots {
                let _ = std::fs::remove_dir_all(root.join(prefix));
            }
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(self.log.with_extension("err"));
    }
}

/// Sends `n` numbered packets through testpmd's io forwarding and
/// receives them back (at most 256 in flight), within 30 s.
fn round_trip(dev: &mut dyn Device, n: u64) -> (PacketGenerator, Capture) {
    let mut generator = PacketGenerator::new(dev, 60, Some(n), None, 32).unwrap();
    let mut capture = Capture::new(64, None);
    let start = Instant::now();
    while capture.received() < n && start.elapsed() < Duration::from_secs(30) {
        if generator.sent() < capture.received() + 256 {
            generator.step(dev);
        }
        capture.step(dev, usize::MAX);
    }
    (generator, capture)
}

/// Polls `dev` (receive, and transmit of nothing) until its link is `up`.
fn poll_until_link(dev: &mut dyn Device, up: bool, within: Duration, backend: &Backend) -> Duration {
    let start = Instant::now();
    let mut batch = PacketBatch::with_capacity(64);
    let mut nothing = PacketBatch::with_capacity(1);
    while dev.link().up != up {
        assert!(
            start.elapsed() < within,
            "link not {up} within {within:?}; testpmd:\n{}",
            backend.output()
        );
        dev.rx_batch(0, &mut batch, 64);
        batch.clear();
        dev.tx_batch(0, &mut nothing);
    }
    start.elapsed()
}

/// testpmd stops (SIGTERM, it closes the connection) and a new testpmd
/// starts on the same socket: the device notices (link down), reconnects
/// (as client: connects again with backoff; as server: accepts testpmd's
/// new connection), sets its rings up again, and numbered packets go
/// round again, every one once. Nothing is lost uncounted: every packet
/// the device took is either used by a testpmd (tx_packets) or counted
/// as not sent, and the new testpmd's own count is exact at close.
fn reconnects_when_testpmd_restarts(name: &str, testpmd_is_client: bool) {
    pin_to_cpu0();
    let mut backend = Backend::start_as(name, "io", testpmd_is_client);
    let spec = if testpmd_is_client {
        format!("{},server", backend.spec())
    } else {
        backend.spec()
    };
    let mut dev = open(&spec);
    const N: u64 = 20_000;
    let (first, capture) = round_trip(&mut *dev, N);
    assert!(
        capture.checker.is_perfect(N),
        "before the restart: received {}; testpmd:\n{}",
        capture.checker.received,
        backend.output()
    );

    backend.stop();
    poll_until_link(&mut *dev, false, Duration::from_secs(5), &backend);
    let mut backend = Backend::start_as(name, "io", testpmd_is_client);
    let took = poll_until_link(&mut *dev, true, Duration::from_secs(15), &backend);
    let (second, capture) = round_trip(&mut *dev, N);
    let c = &capture.checker;
    assert!(
        c.is_perfect(N),
        "after the restart (back after {took:?}): received {} unique {} lost {} duplicated {}; testpmd:\n{}",
        c.received,
        c.unique,
        c.lost(N),
        c.duplicated,
        backend.output()
    );
    assert_eq!(dev.drain_tx(Duration::from_secs(1)), 0);
    let stats = dev.stats();
    assert_eq!(
        stats.tx_packets + stats.tx_not_sent,
        first.sent() + second.sent(),
        "every packet taken is used or counted not sent: {stats:?}"
    );
    drop(dev);
    let out = backend.stop();
    assert_eq!(Backend::received(&out), Some(N), "the new testpmd's own count:\n{out}");
}

#[test]
fn reconnects_as_client_when_testpmd_restarts() {
    reconnects_when_testpmd_restarts("re-client", false);
}

/// As server, with testpmd connecting (`net_vhost0,...,client=1`); Open
/// vSwitch's dpdkvhostuserclient ports test the same role in ovs.rs.
#[test]
fn reconnects_as_server_when_testpmd_restarts() {
    reconnects_when_testpmd_restarts("re-server", true);
}

fn open(spec: &str) -> Box<dyn Device> {
    oxnet_driver::open(spec, &Config::default()).unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

#[test]
fn numbered_packets_come_back_through_testpmd_once_and_in_order() {
    pin_to_cpu0();
    let mut backend = Backend::start("io", "io");
    let mut dev = open(&backend.spec());
    const N: u64 = 200_000;
    // testpmd's io forwarding sends every packet back to us: alternate one
    // transmit and one receive step, so our receive ring never overflows.
    let mut generator = PacketGenerator::new(&*dev, 60, Some(N), None, 32).unwrap();
    let mut capture = Capture::new(64, None);
    let start = Instant::now();
    while capture.received() < N && start.elapsed() < Duration::from_secs(60) {
        // At most 256 in flight: half our receive ring.
        if generator.sent() < capture.received() + 256 {
            generator.step(&mut *dev);
        }
        capture.step(&mut *dev, usize::MAX);
    }
    let stats = dev.stats();
    drop(dev);
    let out = backend.stop();
    let c = &capture.checker;
    assert_eq!(generator.sent(), N, "testpmd:\n{out}");
    assert!(
        c.is_perfect(N),
        "received {} unique {} lost {} duplicated {} reordered {} foreign {}; device {stats:?}; testpmd:\n{out}",
        c.received,
        c.unique,
        c.lost(N),
        c.duplicated,
        c.reordered,
        c.foreign
    );
    assert_eq!(Backend::received(&out), Some(N), "testpmd's own count:\n{out}");
}

/// Memory allocated after the device was opened (a mempool of 100 MB, more
/// than the region first shared) is shared with the back-end before its
/// packets are sent: every packet comes back intact.
#[test]
fn packets_from_memory_allocated_later_reach_the_back_end() {
    pin_to_cpu0();
    let mut backend = Backend::start("late", "io");
    let mut dev = open(&backend.spec());
    let late = oxnet_driver::Mempool::new("late", 45_000, oxnet_driver::MemoryKind::Plain).unwrap();
    // Use buffers from the end of the new pool: they lie past the region
    // the back-end mapped when the device was opened.
    let mut all = PacketBatch::with_capacity(45_000);
    late.alloc_batch(&mut all, 45_000);
    let mut batch = PacketBatch::with_capacity(32);
    for i in 0..32u8 {
        let mut p = all.pop().unwrap();
        p.set_len(60).unwrap();
        p.copy_from_slice(&oxnet::frame::template(60));
        p[59] = i;
        batch.push(p);
    }
    drop(all);
    let mut sent = 0;
    let mut received = PacketBatch::with_capacity(64);
    let start = Instant::now();
    while (sent < 32 || received.len() < 32) && start.elapsed() < Duration::from_secs(10) {
        sent += dev.tx_batch(0, &mut batch);
        dev.rx_batch(0, &mut received, 64);
    }
    let out = backend.stop();
    assert_eq!(sent, 32, "testpmd:\n{out}");
    assert_eq!(received.len(), 32, "testpmd:\n{out}");
    let mut tails: Vec<u8> = received.iter().map(|p| p[59]).collect();
    tails.sort();
    assert_eq!(tails, (0..32).collect::<Vec<u8>>());
}

#[test]
fn pktgen_sends_exactly_count_packets_and_testpmd_counts_them() {
    let mut backend = Backend::start("pktgen", "rxonly");
    let spec = backend.spec();
    let o = Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_oxnet"),
            "pktgen",
            &spec,
            "--count",
            "300000",
            "--json",
            "--quiet",
        ])
        .output()
        .expect("run oxnet under taskset");
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let json = text(&o.stdout).lines().last().unwrap_or("").to_string();
    // Exact, not by luck: before the device closes (GET_VRING_BASE stops
    // testpmd's ring, and what is still posted would be dropped), pktgen
    // waits until testpmd has used every descriptor; tx_packets counts
    // used descriptors, not posted ones.
    assert_eq!(field(&json, "queued"), 300_000);
    assert_eq!(field(&json, "sent"), 300_000);
    assert_eq!(field(&json, "not_sent"), 0);
    assert_eq!(field(&json, "tx_packets"), 300_000);
    let out = backend.stop();
    assert_eq!(Backend::received(&out), Some(300_000), "{out}");
}

#[test]
fn back_end_gone_mid_run_means_link_down_and_a_clean_stop() {
    pin_to_cpu0();
    let mut backend = Backend::start("gone", "rxonly");
    let mut dev = open(&backend.spec());
    assert!(dev.link().up, "link up while testpmd runs");
    let mut generator = PacketGenerator::new(&*dev, 60, None, None, 32).unwrap();
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        generator.step(&mut *dev);
    }
    assert!(generator.sent() > 0);
    backend.stop();
    // Defined behaviour: the link goes down (the socket is closed), the
    // transmit ring fills and tx_batch takes nothing more — no error, no
    // panic, no hang; dropping the device returns at once.
    let start = Instant::now();
    while dev.link().up {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "link still up 5 s after testpmd stopped"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..10_000 {
        generator.step(&mut *dev);
    }
    let sent = generator.sent();
    for _ in 0..10_000 {
        assert_eq!(generator.step(&mut *dev), 0, "nothing can be sent without a back-end");
    }
    assert_eq!(generator.sent(), sent);
    let start = Instant::now();
    drop(dev);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "drop took {:?}",
        start.elapsed()
    );
}

#[test]
fn pktgen_stops_at_its_deadline_when_the_back_end_dies() {
    let mut backend = Backend::start("gone-cli", "rxonly");
    let spec = backend.spec();
    let child = Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_oxnet"),
            "pktgen",
            &spec,
            "--seconds",
            "3",
            "--json",
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    backend.stop();
    let start = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "pktgen hung for {:?}",
        start.elapsed()
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
    assert!(field(text(&o.stdout).lines().last().unwrap_or(""), "sent") > 0);
}

// ---------------------------------------------------------------------
// Bad input: no testpmd needed.

fn assert_open_fails(spec: &str, message: &str, within: Duration) {
    let start = Instant::now();
    let err = oxnet_driver::open(spec, &Config::default())
        .err()
        .map(|e| e.to_string());
    let elapsed = start.elapsed();
    let err = err.unwrap_or_else(|| panic!("{spec}: open must fail"));
    assert!(err.contains(message), "{spec}: {err:?} lacks {message:?}");
    assert!(err.contains(spec), "{spec}: the error names the socket: {err}");
    assert!(elapsed < within, "{spec}: took {elapsed:?}");
}

#[test]
fn a_wrong_socket_path_is_a_clear_error() {
    let o = oxnet(&["pktgen", "vhost-user:/nonexistent/oxnet.sock", "--count", "1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("vhost-user:/nonexistent/oxnet.sock: cannot connect"),
        "{err}"
    );
    assert!(err.contains("back-end running"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A Unix socket server that runs `serve` on its first connection.
fn fake_backend(name: &str, serve: impl FnOnce(std::os::unix::net::UnixStream) + Send + 'static) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}.sock", unique(name)));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            serve(stream);
        }
    });
    path
}

fn spec_of(path: &Path) -> String {
    format!("vhost-user:{}", path.display())
}

#[test]
fn a_peer_that_closes_at_once_is_a_clear_error() {
    let path = fake_backend("closes", drop);
    assert_open_fails(&spec_of(&path), "closed the connection", Duration::from_secs(2));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_peer_that_answers_garbage_is_a_clear_error() {
    let path = fake_backend("garbage", |mut s| {
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        std::thread::sleep(Duration::from_secs(3));
    });
    assert_open_fails(&spec_of(&path), "not a vhost-user reply", Duration::from_secs(2));
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_peer_that_never_answers_times_out() {
    let path = fake_backend("silent", |s| {
        std::thread::sleep(Duration::from_secs(5));
        drop(s);
    });
    assert_open_fails(&spec_of(&path), "no answer within 2 s", Duration::from_secs(4));
    let _ = std::fs::remove_file(path);
}

/// Reads one vhost-user message: (request, flags, payload).
fn read_message(s: &mut std::os::unix::net::UnixStream) -> Option<(u32, u32, Vec<u8>)> {
    let mut header = [0u8; 12];
    s.read_exact(&mut header).ok()?;
    let word = |i: usize| u32::from_ne_bytes(header[i * 4..i * 4 + 4].try_into().unwrap());
    let mut payload = vec![0u8; word(2) as usize];
    s.read_exact(&mut payload).ok()?;
    Some((word(0), word(1), payload))
}

fn reply_u64(s: &mut std::os::unix::net::UnixStream, request: u32, value: u64) {
    let mut m = Vec::new();
    m.extend_from_slice(&request.to_ne_bytes());
    m.extend_from_slice(&(1u32 | 4).to_ne_bytes()); // version 1, reply
    m.extend_from_slice(&8u32.to_ne_bytes());
    m.extend_from_slice(&value.to_ne_bytes());
    let _ = s.write_all(&m);
}

#[test]
fn a_back_end_that_refuses_our_features_is_a_clear_error() {
    // Speaks just enough vhost-user: offers protocol features with
    // REPLY_ACK, then refuses SET_FEATURES (ack 1), as a back-end that
    // wants VIRTIO_F_VERSION_1 would.
    let path = fake_backend("refuses", |mut s| {
        while let Some((request, flags, _)) = read_message(&mut s) {
            match request {
                1 => reply_u64(&mut s, 1, 1 << 30 | 1 << 27),         // GET_FEATURES
                15 => reply_u64(&mut s, 15, 1 << 3),                  // GET_PROTOCOL_FEATURES: REPLY_ACK
                2 if flags & 8 != 0 => reply_u64(&mut s, 2, 1),       // SET_FEATURES: refused
                _ if flags & 8 != 0 => reply_u64(&mut s, request, 0), // anything else: ok
                _ => {}
            }
        }
    });
    assert_open_fails(&spec_of(&path), "SET_FEATURES refused", Duration::from_secs(2));
    let _ = std::fs::remove_file(path);
}

/// A back-end that negotiates everything (REPLY_ACK, acks every request,
/// answers GET_VRING_BASE) but never touches the rings: `serve` gets the
/// stream after the listener accepted it.
fn idle_backend(stream: &mut std::os::unix::net::UnixStream) {
    while let Some((request, flags, payload)) = read_message(stream) {
        match request {
            1 => reply_u64(stream, 1, 1 << 30 | 1 << 27), // GET_FEATURES: protocol features, ANY_LAYOUT
            15 => reply_u64(stream, 15, 1 << 3),          // GET_PROTOCOL_FEATURES: REPLY_ACK
            11 => {
                // GET_VRING_BASE: the ring's index and "next index" 0.
                let index = u32::from_ne_bytes(payload[..4].try_into().unwrap());
                reply_u64(stream, 11, index as u64);
            }
            _ if flags & 8 != 0 => reply_u64(stream, request, 0),
            _ => {}
        }
    }
}

/// The back-end accepts the rings and never uses a descriptor: pktgen
/// hands all 100 packets to the driver, closing waits the drain time
/// (1 s) for the back-end, and then reports all 100 as not sent —
/// `sent` and `tx_packets` count what the device consumed, here none.
#[test]
fn packets_the_back_end_never_used_are_reported_not_sent() {
    let path = fake_backend("idle", |mut s| idle_backend(&mut s));
    let start = Instant::now();
    let o = oxnet(&["pktgen", &spec_of(&path), "--count", "100", "--json", "--quiet"]);
    let took = start.elapsed();
    let _ = std::fs::remove_file(&path);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    let json = text(&o.stdout).lines().last().unwrap_or("").to_string();
    assert_eq!(field(&json, "queued"), 100, "{json}");
    assert_eq!(field(&json, "sent"), 0, "{json}");
    assert_eq!(field(&json, "not_sent"), 100, "{json}");
    assert_eq!(field(&json, "tx_packets"), 0, "{json}");
    assert!(
        text(&o.stderr).contains("100 of 100 packets not sent"),
        "{}",
        text(&o.stderr)
    );
    // Bounded: the default drain time, not forever.
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

/// `vhost-user:PATH,server`: we listen, the back-end connects. A stale
/// socket file is replaced, and no back-end within the link timeout is a
/// clear error; a file that is not a socket is refused.
#[test]
fn server_mode_listens_and_says_when_nobody_connects() {
    let path = std::env::temp_dir().join(format!("{}.sock", unique("server")));
    let _ = std::fs::remove_file(&path);
    // Stale: a socket file nobody listens on.
    drop(UnixListener::bind(&path).unwrap());
    let spec = format!("vhost-user:{},server", path.display());
    let connector = {
        let path = path.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            loop {
                if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&path) {
                    idle_backend(&mut s);
                    return;
                }
                assert!(start.elapsed() < Duration::from_secs(5), "no listener");
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let dev = oxnet_driver::open(&spec, &Config::default()).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert!(dev.link().up);
    drop(dev);
    connector.join().unwrap();
    assert!(!path.exists(), "the server removes its socket when closed");

    let config = Config {
        link_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let err = oxnet_driver::open(&spec, &config).err().unwrap().to_string();
    assert!(err.contains("no back-end connected within"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");

    std::fs::write(&path, b"not a socket").unwrap();
    let err = oxnet_driver::open(&spec, &config).err().unwrap().to_string();
    assert!(err.contains("exists and is not a socket"), "{err}");
    let _ = std::fs::remove_file(&path);
    let err = oxnet_driver::open("vhost-user:/tmp/x.sock,bogus", &config)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown option 'bogus'"), "{err}");
}

#[test]
fn huge_page_memory_cannot_be_shared_with_a_back_end() {
    let o = oxnet(&["pktgen", "vhost-user:/tmp/any.sock", "--memory", "huge", "--count", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--memory huge"), "{}", text(&o.stderr));
}

// ---------------------------------------------------------------------
// DMA domains (docs/dma-domains.md) between the software 82599 and a
// vhost-user back-end.

/// The software 82599 on `memory`, capturing what it sends.
fn sim_port(port: &str, memory: oxnet_driver::MemoryKind) -> oxnet_driver::ixgbe::IxgbeDevice<oxnet_sim::SimRegisters> {
    let config = Config {
        memory: Some(memory),
        ..Config::default()
    };
    common::capturing_sim_port(port, &config)
}

/// Frame `i` of a test: 60..=1514 bytes whose contents say which one it is.
fn numbered_frame(i: usize) -> Vec<u8> {
    let mut f = oxnet::frame::template(60 + (i * 37) % 1455);
    for (k, b) in f[14..].iter_mut().enumerate() {
        *b = (i * 13 + k * 5) as u8;
    }
    f[14..18].copy_from_slice(&(i as u32).to_be_bytes());
    f
}

/// Sends `frames` from the vhost-user device `from` through testpmd's io
/// forwarding (which sends them back) and transmits what comes back on
/// the sim port `to_port`; returns what that port put on the wire, FCS
/// removed. `inject` sends each frame into `to_port` first and forwards
/// what it receives to `from` instead of allocating from `from`'s pool.
fn through_testpmd(
    from: &mut dyn Device,
    to_port: &str,
    to: &mut dyn Device,
    frames: &[Vec<u8>],
    inject: bool,
) -> Vec<Vec<u8>> {
    let world = oxnet_sim::World::global();
    let mut wire = Vec::new();
    let mut next = 0;
    let mut in_flight = 0;
    // Packets not yet taken by `from` (its ring was full), in order.
    let mut pending = PacketBatch::with_capacity(32);
    let start = Instant::now();
    while wire.len() < frames.len() && start.elapsed() < Duration::from_secs(30) {
        // At most 64 frames in flight through testpmd.
        if pending.is_empty() && next < frames.len() && in_flight < 64 {
            let chunk = &frames[next..(next + 32).min(frames.len())];
            if inject {
                for f in chunk {
                    world.inject(to_port, f);
                }
                assert_eq!(to.rx_batch(0, &mut pending, 32), chunk.len(), "{to_port}");
            } else {
                let pool = from.mempool(0);
                for f in chunk {
                    let mut p = pool.alloc().unwrap();
                    p.set_len(f.len()).unwrap();
                    p.copy_from_slice(f);
                    pending.push(p);
                }
            }
            next += chunk.len();
        }
        in_flight += from.tx_batch(0, &mut pending);
        let mut back = PacketBatch::with_capacity(64);
        let n = from.rx_batch(0, &mut back, 64);
        in_flight -= n;
        if n > 0 {
            assert_eq!(to.tx_batch(0, &mut back), n, "{to_port}");
            for mut f in world.frames_on_wire(to_port) {
                f.truncate(f.len() - 4);
                wire.push(f);
            }
            // A sim port without a wire partner receives what it sends.
            let mut echo = PacketBatch::with_capacity(64);
            assert_eq!(to.rx_batch(0, &mut echo, 64), n, "{to_port}: its own frames back");
        }
    }
    wire
}

/// sim ↔ vhost-user on plain memory: both in the virtual domain, so
/// nothing is copied either way, and every byte arrives.
#[test]
fn sim_and_vhost_user_share_the_virtual_domain_without_copies() {
    pin_to_cpu0();
    let mut backend = Backend::start("dom-virtual", "io");
    let mut vhost = open(&backend.spec());
    let port = "vu-dom-virtual";
    let mut sim = sim_port(port, oxnet_driver::MemoryKind::Plain);
    assert_eq!(vhost.mempool(0).dma_domain(), oxnet_driver::DmaDomain::Virtual);
    let frames: Vec<Vec<u8>> = (0..2000).map(numbered_frame).collect();
    // sim -> vhost-user -> testpmd -> vhost-user -> sim.
    let wire = through_testpmd(&mut *vhost, port, &mut sim, &frames, true);
    let out = backend.stop();
    assert_eq!(wire.len(), frames.len(), "testpmd:\n{out}");
    assert!(wire == frames, "bytes or order changed");
    assert_eq!(sim.queue_stats()[0].tx_copied, 0, "same domain: no copy");
    assert_eq!(sim.stats().tx_copied, 0);
    assert_eq!(vhost.stats().tx_copied, 0);
}

/// vhost-user (virtual domain) → the software 82599 on huge pages
/// (physical domain): the sim port copies every packet it got from the
/// back-end, and none of its descriptors holds a virtual address.
#[test]
fn vhost_user_packets_are_copied_into_a_huge_page_sim_port() {
    if std::env::var_os("OXNET_EXPECT_HUGEPAGES").is_none() {
        println!(
            "vhost_user_packets_are_copied_into_a_huge_page_sim_port: skipped: OXNET_EXPECT_HUGEPAGES \
             is not set (scripts/test.sh sets it as root after reserving 2 MiB huge pages)"
        );
        return;
    }
    pin_to_cpu0();
    let mut backend = Backend::start("dom-huge", "io");
    let mut vhost = open(&backend.spec());
    let port = "vu-dom-huge";
    let mut sim = sim_port(port, oxnet_driver::MemoryKind::HugePages);
    assert_eq!(sim.mempool(0).dma_domain(), oxnet_driver::DmaDomain::Physical);
    let frames: Vec<Vec<u8>> = (0..2000).map(numbered_frame).collect();
    let wire = through_testpmd(&mut *vhost, port, &mut sim, &frames, false);
    let out = backend.stop();
    assert_eq!(wire.len(), frames.len(), "testpmd:\n{out}");
    assert!(wire == frames, "bytes or order changed");
    assert_eq!(
        sim.queue_stats()[0].tx_copied,
        2000,
        "every packet from the back-end copied"
    );
    assert_eq!(sim.stats().tx_copied, 2000);
    // TDBAL/TDBAH of queue 0 (82599 §8.2.3.9.5/6): every buffer address
    // in the ring lies in huge-page (physical-domain) memory.
    let regs = oxnet_sim::World::global().port(port);
    use oxnet_driver::RegisterAccess;
    let base = (u64::from(regs.read32(0x06004)) << 32) | u64::from(regs.read32(0x06000));
    let ring = oxnet_driver::memory::iova_to_virt(base, 512 * 16).expect("the ring is DMA memory");
    for i in 0..512 {
        // SAFETY: descriptor i of a 512-descriptor ring of live DMA memory.
        let d = unsafe { std::slice::from_raw_parts(ring.as_ptr().add(i * 16), 8) };
        let address = u64::from_le_bytes(d.try_into().unwrap());
        assert_eq!(
            oxnet_driver::memory::iova_domain(address),
            Some(oxnet_driver::DmaDomain::Physical),
            "descriptor {i}: {address:#x}"
        );
    }
}
