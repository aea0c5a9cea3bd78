//! memif (issue 9 item 4): two oxnet processes over memif, oxnet against
//! DPDK's `net_memif` in testpmd (both roles, io forwarding), a peer that
//! restarts, and peers that are not memif, want another id, or refuse the
//! region.
//!
//! Expected values come from the protocol (DPDK drivers/net/memif/memif.h,
//! rte_eth_memif.c): every packet crosses exactly once, in ring order.
//! testpmd runs on CPU 1 with `--no-huge`, the test's polling side on
//! CPU 0 (as in vhost_user.rs).

mod common;
use common::pin_to_cpu0;
use common::{field, json_line, text};
use oxnet::apps::{Capture, PacketGenerator};
use oxnet_driver::memif::{socket, Msg, VERSION};
use oxnet_driver::{Config, Device, PacketBatch};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tests that busy-poll (testpmd on CPU 1, us on CPU 0) run one at
/// a time: cargo runs a file's tests on parallel threads.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn unique(name: &str) -> String {
    format!("oxnet-memif-{}-{name}", std::process::id())
}

fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{}.sock", unique(name)))
}

/// dpdk-testpmd with one net_memif port, stopped by pid when dropped.
struct Testpmd {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
    prefix: String,
}

impl Testpmd {
    fn start(name: &str, socket: &Path, role: &str, mode: &str) -> Testpmd {
        let prefix = unique(name);
        let log = std::env::temp_dir().join(format!("{prefix}.log"));
        let child = Command::new("timeout")
            .args([
                "-s",
                "TERM",
                "60",
                "dpdk-testpmd",
                "--lcores",
                "0@1,1@1",
                "--no-pci",
                "--no-huge",
                "-m",
                "512",
            ])
            .arg("--vdev")
            .arg(format!(
                "net_memif0,role={role},socket={},socket-abstract=no,id=0",
                socket.display()
            ))
            .arg(format!("--file-prefix={prefix}"))
            .args([
                "--",
                "-a",
                "--no-mlockall",
                "--total-num-mbufs=16384",
                "--stats-period=1",
            ])
            .arg(format!("--forward-mode={mode}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::from(
                std::fs::File::create(log.with_extension("err")).expect("log"),
            ))
            .spawn()
            .expect("start dpdk-testpmd (scripts/install-deps.sh installs it)");
        let mut t = Testpmd {
            child: Some(child),
            socket: socket.to_path_buf(),
            log,
            prefix,
        };
        if role == "server" {
            // Its server answers 'ID not found' until the port is started:
            // wait for the socket and for forwarding to start.
            let start = Instant::now();
            while !t.socket.exists() || !t.output().contains("start packet forwarding") {
                if let Some(status) = t.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    panic!("testpmd exited ({status}):\n{}", t.output());
                }
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "testpmd made no socket:\n{}",
                    t.output()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        t
    }

    fn output(&self) -> String {
        let out = std::fs::read_to_string(&self.log).unwrap_or_default();
        let err = std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default();
        format!("{out}{err}")
    }

    /// SIGTERM: testpmd prints its forward statistics and exits.
    fn stop(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            common::terminate(&mut child);
        }
        self.output()
    }

    /// RX-packets of testpmd's final forward statistics.
    fn received(output: &str) -> Option<u64> {
        let line = output
            .lines()
            .rev()
            .find(|l| l.contains("RX-packets:") && l.contains("RX-total:"))?;
        let at = line.find("RX-packets:")? + "RX-packets:".len();
        line[at..].split_whitespace().next()?.parse().ok()
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        self.stop();
        for root in ["/var/run/dpdk", "/tmp/dpdk"] {
            let _ = std::fs::remove_dir_all(Path::new(root).join(&self.prefix));
        }
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(self.log.with_extension("err"));
    }
}

fn open(spec: &str) -> Box<dyn Device> {
    oxnet_driver::open(spec, &Config::default()).unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

/// Polls `dev` until testpmd (a client) has connected and started
/// forwarding: its counters are differences from a snapshot taken at
/// the start, so what it received before would be missing from them.
fn wait_for_client(dev: &mut dyn Device, testpmd: &Testpmd) {
    poll_until_link(dev, true, Duration::from_secs(20));
    let start = Instant::now();
    while !testpmd.output().contains("Logical Core") || start.elapsed() < Duration::from_millis(300) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "testpmd did not start:\n{}",
            testpmd.output()
        );
        poll_until_link(dev, true, Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn poll_until_link(dev: &mut dyn Device, up: bool, within: Duration) {
    let start = Instant::now();
    let mut batch = PacketBatch::with_capacity(64);
    let mut nothing = PacketBatch::with_capacity(1);
    while dev.link().up != up {
        assert!(start.elapsed() < within, "link not {up} within {within:?}");
        dev.rx_batch(0, &mut batch, 64);
        batch.clear();
        dev.tx_batch(0, &mut nothing);
    }
}

/// `n` numbered packets out and back through testpmd's io forwarding, at
/// most 256 in flight.
fn round_trip(dev: &mut dyn Device, n: u64) -> (PacketGenerator, Capture) {
    let mut generator = PacketGenerator::new(dev, 60, Some(n), None, 32).unwrap();
    let mut capture = Capture::new(64, None);
    let start = Instant::now();
    let mut last_progress = Instant::now();
    while capture.received() < n && start.elapsed() < Duration::from_secs(30) {
        // testpmd may drop a burst (below): stop once everything is sent
        // and nothing more arrives.
        if generator.sent() < n && generator.sent() < capture.received() + 256 {
            generator.step(dev);
        }
        if capture.step(dev, usize::MAX) > 0 {
            last_progress = Instant::now();
        } else if generator.sent() == n && last_progress.elapsed() > Duration::from_millis(500) {
            break;
        }
    }
    (generator, capture)
}

/// (TX-packets, TX-dropped) of testpmd's final forward statistics.
fn transmitted(output: &str) -> (u64, u64) {
    let line = output
        .lines()
        .rev()
        .find(|l| l.contains("TX-packets:") && l.contains("TX-total:"))
        .unwrap_or("");
    let number = |key: &str| -> u64 {
        line.split(key)
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in:\n{output}"))
    };
    (number("TX-packets:"), number("TX-dropped:"))
}

/// Exact accounting through testpmd's io forwarding: testpmd received
/// all `n`; what it transmitted we received once each and in order;
/// what we miss is exactly what testpmd reports as TX-dropped. (testpmd's
/// io mode does not retry a burst its transmit queue refuses; in about
/// half the runs one burst of 32 is dropped there, mid-run, with our
/// receive ring far from full; cause not found yet, see docs/memif.md.)
fn assert_exact_through_testpmd(capture: &Capture, n: u64, out: &str) {
    let c = &capture.checker;
    let (sent_back, dropped) = transmitted(out);
    assert_eq!(Testpmd::received(out), Some(n), "testpmd's own count:\n{out}");
    assert_eq!(sent_back + dropped, n, "{out}");
    assert!(dropped <= 64, "testpmd dropped {dropped}:\n{out}");
    assert_eq!(
        (c.unique, c.received, c.duplicated, c.reordered, c.lost(n)),
        (sent_back, sent_back, 0, 0, dropped),
        "received {} unique {} lost {} duplicated {} reordered {}; testpmd:\n{out}",
        c.received,
        c.unique,
        c.lost(n),
        c.duplicated,
        c.reordered
    );
}

/// oxnet as client, testpmd as server in io forwarding: every packet
/// comes back once and in order, and testpmd's own count is exact. (Its
/// port counters are per connection: testpmd stops before we close.)
#[test]
fn numbered_packets_come_back_through_testpmd_server_once_and_in_order() {
    let _serial = one_at_a_time();
    pin_to_cpu0();
    let path = socket_path("tp-srv");
    let _ = std::fs::remove_file(&path);
    const N: u64 = 100_000;
    let mut testpmd = Testpmd::start("tp-srv", &path, "server", "io");
    let mut dev = open(&format!("memif:{},role=client", path.display()));
    let (generator, capture) = round_trip(&mut *dev, N);
    let out = testpmd.stop();
    assert_eq!(generator.sent(), N, "testpmd:\n{out}");
    assert_exact_through_testpmd(&capture, N, &out);
    let s = dev.stats();
    assert_eq!((s.tx_packets, s.rx_packets), (N, capture.received()), "{s:?}");
}

/// oxnet as server, testpmd as client. testpmd 22.11's io forwarding in
/// client mode receives but transmits nothing back (TX-packets 0, as with
/// its vhost client mode, vhost_user.rs), so each direction is tested on
/// its own: N packets from oxnet reach testpmd's rxonly exactly; what
/// testpmd's txonly sends arrives exactly (our count = its TX-packets).
#[test]
fn testpmd_client_receives_exactly_what_our_server_sends_and_back() {
    let _serial = one_at_a_time();
    pin_to_cpu0();
    let path = socket_path("tp-cli");
    let _ = std::fs::remove_file(&path);
    const N: u64 = 100_000;
    let mut dev = open(&format!("memif:{},role=server", path.display()));
    let mut testpmd = Testpmd::start("tp-cli", &path, "client", "rxonly");
    wait_for_client(&mut *dev, &testpmd);
    let mut generator = PacketGenerator::new(&*dev, 60, Some(N), None, 32).unwrap();
    let start = Instant::now();
    while !generator.is_done() && start.elapsed() < Duration::from_secs(20) {
        generator.step(&mut *dev);
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = testpmd.stop();
    assert_eq!(generator.sent(), N);
    assert_eq!(Testpmd::received(&out), Some(N), "testpmd's own count:\n{out}");
    poll_until_link(&mut *dev, false, Duration::from_secs(5));

    // The other direction: a new testpmd client, txonly, for a moment.
    let mut testpmd = Testpmd::start("tp-cli2", &path, "client", "txonly");
    wait_for_client(&mut *dev, &testpmd);
    let before = dev.stats().rx_packets;
    let mut batch = PacketBatch::with_capacity(64);
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        dev.rx_batch(0, &mut batch, 64);
        batch.clear();
    }
    let out = testpmd.stop();
    // Read what testpmd left in the ring before it closed.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        dev.rx_batch(0, &mut batch, 64);
        batch.clear();
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.contains("TX-packets:") && l.contains("TX-total:"))
        .unwrap_or("");
    let sent: u64 = line
        .split("TX-packets:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no TX-packets in:\n{out}"));
    assert!(sent > 0, "{out}");
    assert_eq!(dev.stats().rx_packets - before, sent, "testpmd's TX-packets:\n{out}");
}

/// testpmd (server) stops mid-run and a new one starts on the same
/// socket: our client sees the link go down, connects again, builds new
/// rings, and numbered packets go round again, every one once.
#[test]
fn traffic_resumes_when_the_testpmd_server_restarts() {
    let _serial = one_at_a_time();
    pin_to_cpu0();
    let path = socket_path("restart");
    let _ = std::fs::remove_file(&path);
    let mut testpmd = Testpmd::start("restart", &path, "server", "io");
    let mut dev = open(&format!("memif:{}", path.display()));
    const N: u64 = 20_000;
    let (_, capture) = round_trip(&mut *dev, N);
    let out = testpmd.stop();
    assert_exact_through_testpmd(&capture, N, &out);
    drop(testpmd);
    poll_until_link(&mut *dev, false, Duration::from_secs(5));
    let mut testpmd = Testpmd::start("restart2", &path, "server", "io");
    poll_until_link(&mut *dev, true, Duration::from_secs(15));
    let (_, capture) = round_trip(&mut *dev, N);
    let out = testpmd.stop();
    assert_exact_through_testpmd(&capture, N, &out);
}

/// Two oxnet processes per link: pktgen (server) → fwd (client on both
/// sockets) → pcap (server). Every sequence number once and in order.
#[test]
fn pktgen_fwd_pcap_between_oxnet_processes() {
    let _serial = one_at_a_time();
    let a = socket_path("pfp-a");
    let b = socket_path("pfp-b");
    let file = std::env::temp_dir().join(format!("{}.pcap", unique("pfp")));
    let oxnet = env!("CARGO_BIN_EXE_oxnet");
    const N: &str = "200000";
    let spawn = |cpu: &str, args: &[&str]| {
        Command::new("timeout")
            .args(["-s", "INT", "40", "taskset", "-c", cpu, oxnet])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start oxnet")
    };
    let spec = |p: &Path, role: &str| format!("memif:{},role={role}", p.display());
    let pcap = spawn(
        "1",
        &[
            "pcap",
            &spec(&b, "server"),
            file.to_str().unwrap(),
            "--count",
            N,
            "--json",
            "--quiet",
        ],
    );
    let pktgen = spawn("0", &["pktgen", &spec(&a, "server"), "--count", N, "--json", "--quiet"]);
    let start = Instant::now();
    while !(a.exists() && b.exists()) {
        assert!(start.elapsed() < Duration::from_secs(10), "the servers made no sockets");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut fwd = spawn(
        "1",
        &[
            "fwd",
            &spec(&a, "client"),
            &spec(&b, "client"),
            "--seconds",
            "30",
            "--json",
            "--quiet",
        ],
    );
    let pktgen = pktgen.wait_with_output().unwrap();
    let pcap = pcap.wait_with_output().unwrap();
    common::terminate(&mut fwd);
    let _ = std::fs::remove_file(&file);
    assert!(pktgen.status.success(), "pktgen: {}", text(&pktgen.stderr));
    assert!(pcap.status.success(), "pcap: {}", text(&pcap.stderr));
    let g = json_line(&pktgen);
    let p = json_line(&pcap);
    assert_eq!(field(&g, "sent"), 200_000, "{g}");
    assert_eq!(field(&p, "captured"), 200_000, "{p}");
    assert_eq!(
        (field(&p, "lost"), field(&p, "duplicated"), field(&p, "reordered")),
        (0, 0, 0),
        "{p}"
    );
}

/// A seqpacket server in this process, answering with `script` after
/// each message it receives (the first answer is sent at once).
fn fake_server(path: &Path, script: Vec<Option<[u8; 128]>>) -> std::thread::JoinHandle<()> {
    let _ = std::fs::remove_file(path);
    let listener = socket::listen(path.to_str().unwrap()).unwrap();
    std::thread::spawn(move || {
        let start = Instant::now();
        let conn = loop {
            if let Some(c) = socket::accept(&listener) {
                break c;
            }
            if start.elapsed() > Duration::from_secs(10) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        socket::set_timeout(&conn, Duration::from_secs(5));
        for (k, reply) in script.into_iter().enumerate() {
            if k > 0 && !matches!(socket::receive(&conn, true), Ok(socket::Received::Msg(..))) {
                return;
            }
            if let Some(bytes) = reply {
                // SAFETY: writes 128 bytes from a live array.
                unsafe {
                    libc::send(
                        std::os::fd::AsRawFd::as_raw_fd(&conn),
                        bytes.as_ptr() as *const _,
                        128,
                        0,
                    )
                };
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    })
}

fn hello() -> [u8; 128] {
    Msg::Hello {
        name: "fake".into(),
        min_version: VERSION,
        max_version: VERSION,
        max_region: 0,
        max_s2c_ring: 0,
        max_c2s_ring: 0,
        max_log2_ring_size: 14,
    }
    .encode()
}

fn open_err(spec: &str) -> String {
    let config = Config {
        link_timeout: Duration::from_secs(2),
        ..Config::default()
    };
    match oxnet_driver::open(spec, &config) {
        Ok(_) => panic!("{spec} opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_socket_that_speaks_no_memif_is_a_clear_error() {
    // A stream server (another protocol entirely).
    let path = socket_path("stream");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let e = open_err(&format!("memif:{}", path.display()));
    assert!(
        e.contains("is not a memif socket") && e.contains("SOCK_SEQPACKET"),
        "{e}"
    );
    drop(listener);
    // A seqpacket server that sends garbage.
    let t = fake_server(&path, vec![Some([0xab; 128])]);
    let e = open_err(&format!("memif:{}", path.display()));
    assert!(
        e.contains("is not a memif peer") && e.contains("unknown memif message type"),
        "{e}"
    );
    t.join().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_region_the_server_refuses_is_a_clear_error() {
    let path = socket_path("region");
    let refuse = Msg::Disconnect {
        code: 1,
        reason: "region too large".into(),
    }
    .encode();
    let t = fake_server(&path, vec![Some(hello()), Some(Msg::Ack.encode()), Some(refuse)]);
    let e = open_err(&format!("memif:{}", path.display()));
    assert!(
        e.contains("refused region 0") && e.contains("'region too large'"),
        "{e}"
    );
    t.join().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_wrong_id_is_refused_by_our_server_and_by_testpmd() {
    let _serial = one_at_a_time();
    // Our server (id 1), polled on a thread; a client asking for id 2.
    let path = socket_path("id");
    let _ = std::fs::remove_file(&path);
    let mut server = open(&format!("memif:{},role=server,id=1", path.display()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let poller = std::thread::spawn(move || {
        let mut batch = PacketBatch::with_capacity(32);
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            server.rx_batch(0, &mut batch, 32);
            batch.clear();
            std::thread::sleep(Duration::from_millis(1));
        }
        server.link().up
    });
    let e = open_err(&format!("memif:{},id=2", path.display()));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!poller.join().unwrap(), "the server's link stays down");
    assert!(
        e.contains("refused interface id 2") && e.contains("ID mismatch") && e.contains(",id=N"),
        "{e}"
    );

    // testpmd's server (id 0) asked for id 5.
    let path = socket_path("id-tp");
    let _testpmd = Testpmd::start("id-tp", &path, "server", "rxonly");
    let e = open_err(&format!("memif:{},id=5", path.display()));
    assert!(e.contains("refused interface id 5") && e.contains(",id=N"), "{e}");
}

/// Our server refuses a region it cannot use, and says why in its
/// DISCONNECT (memif.h: code, reason): one without a file descriptor,
/// one whose file is shorter than announced (mapping it would fault).
#[test]
fn our_server_refuses_a_bad_region_with_a_reason() {
    let path = socket_path("bad-region");
    let _ = std::fs::remove_file(&path);
    let mut server = open(&format!("memif:{},role=server", path.display()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let poller = std::thread::spawn(move || {
        let mut batch = PacketBatch::with_capacity(32);
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            server.rx_batch(0, &mut batch, 32);
            batch.clear();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // A memfd of one page, announced as 1 MiB.
    // SAFETY: plain syscalls; the descriptor is owned at once.
    let short = unsafe {
        let fd = libc::memfd_create(c"oxnet-test".as_ptr(), libc::MFD_CLOEXEC);
        assert!(fd >= 0);
        assert_eq!(libc::ftruncate(fd, 4096), 0);
        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
    };
    for (fd, reason) in [
        (None, "no file descriptor"),
        (
            Some(std::os::fd::AsRawFd::as_raw_fd(&short)),
            "shorter than the 1048576 bytes announced",
        ),
    ] {
        let conn = socket::connect(path.to_str().unwrap()).unwrap();
        socket::set_timeout(&conn, Duration::from_secs(5));
        let next = |what: &str| match socket::receive(&conn, true) {
            Ok(socket::Received::Msg(m, _)) => m,
            _ => panic!("no {what} from our server"),
        };
        assert!(matches!(next("HELLO"), Msg::Hello { .. }));
        let init = Msg::Init {
            version: VERSION,
            id: 0,
            mode: 0,
            secret: [0; 24],
            name: "test".into(),
        };
        socket::send(&conn, &init, None).unwrap();
        assert_eq!(next("ACK"), Msg::Ack);
        socket::send(
            &conn,
            &Msg::AddRegion {
                index: 0,
                size: 1 << 20,
            },
            fd,
        )
        .unwrap();
        match next("DISCONNECT") {
            Msg::Disconnect { reason: r, .. } => assert!(r.contains("region 0") && r.contains(reason), "{r}"),
            other => panic!("{other:?}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    poller.join().unwrap();
}
