//! `oxnet loadgen --serve-echo PORT --io-uring` (the io_uring echo
//! server) on loopback, driven by the loadgen client: every request
//! answered once with its bytes (the client compares them), requests of
//! 200 KB (many buffers, several sends each), a reader too slow for the
//! server's sends (short sends) getting every byte in order, clients
//! that reset mid-request leaving the server serving, SIGINT ending it
//! with status 0, the summary's exact counts and nothing left in flight,
//! a connection that finds the buffer ring empty served once buffers
//! come back, and the same from the paths for kernels without multishot
//! accept or buffer rings (forced with OXNET_IO_URING_FALLBACK).
//!
//! Where the kernel refuses io_uring with EPERM (sysctl
//! kernel.io_uring_disabled, or a seccomp filter such as a container's)
//! or ENOSYS (a kernel built without it), the server cannot run by
//! design: these tests print the reason and skip. Any other failure to
//! start fails them.

use oxnet::loadgen::schedule::InterArrival;
use oxnet::loadgen::{self, Mode, Options, Summary};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// The io_uring echo server, a child process, and its stderr lines.
struct Server {
    child: Child,
    addr: SocketAddr,
    lines: mpsc::Receiver<String>,
    /// stderr up to "listening on".
    started: String,
}

/// A port nothing listens on now (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `oxnet loadgen --serve-echo PORT --io-uring --threads N` on
/// 127.0.0.1 and waits for its "listening on" line (no probe
/// connections: the summary's counts are exact). None, after saying
/// why, where the kernel refuses io_uring (EPERM, ENOSYS).
fn start(threads: usize) -> Option<Server> {
    start_with(threads, &[])
}

/// [`start`] with these environment variables set.
fn start_with(threads: usize, env: &[(&str, &str)]) -> Option<Server> {
    let port = free_port();
    let mut child = Command::new(OXNET)
        .args([
            "loadgen",
            "--serve-echo",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--io-uring",
        ])
        .args(["--threads", &threads.to_string()])
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut started = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                started.push_str(&line);
                started.push('\n');
                if line.contains("listening on") {
                    break;
                }
            }
            // stderr closed: the server ended.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                let refused = started.contains("io_uring_setup:")
                    && (started.contains("(os error 1)") || started.contains("(os error 38)"));
                if refused {
                    eprintln!("SKIPPED: the kernel refuses io_uring here (EPERM or ENOSYS): {started}");
                    return None;
                }
                panic!("the io_uring echo server did not start ({status}): {started}");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("the io_uring echo server did not say it listens within 10 s: {started}");
            }
        }
    }
    assert!(
        started.contains(&format!(
            "echo server (io_uring) listening on 127.0.0.1:{port} ({threads} threads)"
        )),
        "{started}"
    );
    Some(Server {
        child,
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        lines,
        started,
    })
}

impl Server {
    /// SIGINT; the exit status and everything it wrote to stderr.
    fn interrupt(mut self) -> (std::process::ExitStatus, String) {
        // SAFETY: a signal to our own child, which is still running.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) }, 0);
        let status = self.child.wait().unwrap();
        let mut stderr = std::mem::take(&mut self.started);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            stderr.push_str(&line);
            stderr.push('\n');
        }
        (status, stderr)
    }
}

impl Drop for Server {
    /// A test that fails half-way leaves no server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn options(target: SocketAddr, mode: Mode, requests: u64, connections: usize, size: usize) -> Options {
    Options {
        target,
        mode,
        rate: 0.0,
        arrival: InterArrival::Poisson,
        connections,
        threads: 1,
        duration: None,
        requests: Some(requests),
        size,
        kv: None,
        timeout: Duration::from_secs(10),
        seed: 1,
    }
}

/// Runs the client; asserts every request was answered once, in full.
fn run_exact(target: SocketAddr, mode: Mode, requests: u64, connections: usize, size: usize) -> Summary {
    let s = loadgen::run(&options(target, mode, requests, connections, size)).unwrap();
    assert_eq!(s.errors.total(), 0, "{}", s.line());
    assert_eq!(s.completed, requests, "{}", s.line());
    assert_eq!(s.bytes_sent, requests * size as u64, "{}", s.line());
    assert_eq!(s.bytes_received, requests * size as u64, "{}", s.line());
    assert_eq!(s.latency.len(), requests);
    s
}

/// SO_LINGER 0, then close: the kernel sends a RST.
fn reset(s: TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `l` lives across the call, its size is passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    drop(s);
}

#[test]
fn every_request_is_answered_once_in_short_and_persistent_mode_and_sigint_reports_it() {
    let Some(server) = start(1) else { return };
    let a = server.addr;
    let s = run_exact(a, Mode::Persistent, 2000, 8, 100);
    assert_eq!(s.connections, 8, "{}", s.line());
    let s = run_exact(a, Mode::Short, 500, 4, 64);
    assert_eq!(s.connections, 500, "{}", s.line());
    // 200 KB: 13 buffers of 16 KiB a request, at most 4 held at once, so
    // the server reads and sends by parts; the client checks every byte.
    run_exact(a, Mode::Persistent, 20, 2, 200_000);
    run_exact(a, Mode::Short, 10, 2, 200_000);

    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    let bytes = 2000 * 100 + 500 * 64 + 20 * 200_000 + 10 * 200_000;
    assert!(
        stderr.contains(&format!(
            "oxnet loadgen: echo server: {} connections, {bytes} bytes echoed",
            8 + 500 + 2 + 10
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("still in flight"), "{stderr}");
}

#[test]
fn a_reader_slower_than_the_server_gets_every_byte_back_in_order() {
    let Some(server) = start(1) else { return };
    // 4 MB sent at once, read back slowly: the server's sends find the
    // socket's buffer full and end short, its buffers fill and it stops
    // reading; every byte must still come back, in order.
    const TOTAL: usize = 4 << 20;
    let pattern = |i: usize| (i % 251) as u8;
    let mut s = TcpStream::connect(server.addr).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let data: Vec<u8> = (0..TOTAL).map(pattern).collect();
        w.write_all(&data).unwrap();
    });
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0;
    let mut buf = vec![0u8; 7000];
    while got < TOTAL {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got} bytes");
        for (k, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, pattern(got + k), "byte {}", got + k);
        }
        got += n;
        if got < TOTAL / 2 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    writer.join().unwrap();
    drop(s);
    // Let the server see the FIN and close before it is stopped.
    std::thread::sleep(Duration::from_millis(100));
    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains(&format!("echo server: 1 connections, {TOTAL} bytes echoed")),
        "{stderr}"
    );
}

#[test]
fn clients_that_reset_mid_request_do_not_stop_the_server() {
    let Some(server) = start(1) else { return };
    // Half of a 200 KB request, then a RST.
    let mut half = TcpStream::connect(server.addr).unwrap();
    half.write_all(&vec![7u8; 100_000]).unwrap();
    // One that sends without reading until every buffer on the way is
    // full (the server's sends wait for room), then a RST.
    let mut stuck = TcpStream::connect(server.addr).unwrap();
    stuck.set_write_timeout(Some(Duration::from_millis(300))).unwrap();
    let chunk = vec![9u8; 64 * 1024];
    let mut written = 0;
    while written < 64 << 20 {
        match stuck.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    assert!(written < 64 << 20, "the server never stopped reading");
    reset(half);
    reset(stuck);
    // Still serving, every request answered.
    run_exact(server.addr, Mode::Persistent, 300, 2, 1000);
    run_exact(server.addr, Mode::Short, 100, 2, 64);

    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("oxnet loadgen: echo server: 104 connections, "),
        "{stderr}"
    );
    assert!(!stderr.contains("still in flight"), "{stderr}");
}

#[test]
fn two_threads_share_the_load() {
    let Some(server) = start(2) else { return };
    // Over several client threads the kernel spreads connections over
    // both listeners (SO_REUSEPORT); each ring serves its own.
    let mut o = options(server.addr, Mode::Short, 400, 8, 64);
    o.threads = 4;
    let s = loadgen::run(&o).unwrap();
    assert_eq!((s.completed, s.errors.total()), (400, 0), "{}", s.line());
    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("echo server: 400 connections, 25600 bytes echoed"),
        "{stderr}"
    );
}

#[test]
fn the_paths_for_older_kernels_single_accepts_and_own_buffers_echo_the_same() {
    // Forced here: this kernel has multishot accept and buffer rings.
    let Some(server) = start_with(1, &[("OXNET_IO_URING_FALLBACK", "accept,buffers")]) else {
        return;
    };
    let a = server.addr;
    run_exact(a, Mode::Persistent, 1000, 8, 100);
    run_exact(a, Mode::Short, 300, 4, 64);
    run_exact(a, Mode::Persistent, 10, 2, 200_000);
    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("no multishot accept here"), "{stderr}");
    assert!(
        stderr.contains(
            "no provided-buffer rings here (OXNET_IO_URING_FALLBACK says so); each recv gets a buffer of its own"
        ),
        "{stderr}"
    );
    let bytes = 1000 * 100 + 300 * 64 + 10 * 200_000;
    assert!(
        stderr.contains(&format!(
            "echo server: {} connections, {bytes} bytes echoed",
            8 + 300 + 2
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("still in flight"), "{stderr}");
}

#[test]
fn a_connection_that_finds_the_buffer_ring_empty_is_served_once_buffers_come_back() {
    // A ring of 4 buffers, all held by one connection whose client sends
    // without reading (the server's sends wait, and so do its 4 buffers):
    // a second connection's recv finds the ring empty (ENOBUFS) and
    // waits; once the first client reads, buffers come back and the
    // second is served, every request answered.
    let Some(server) = start_with(1, &[("OXNET_IO_URING_BUFFERS", "4")]) else {
        return;
    };
    const TOTAL: usize = 16 << 20;
    let pattern = |i: usize| (i % 253) as u8;
    let data: Vec<u8> = (0..TOTAL).map(pattern).collect();
    let mut hog = TcpStream::connect(server.addr).unwrap();
    let mut w = hog.try_clone().unwrap();
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = std::sync::Arc::clone(&written);
    let writer = std::thread::spawn(move || {
        for part in data.chunks(64 * 1024) {
            w.write_all(part).unwrap();
            progress.fetch_add(part.len(), std::sync::atomic::Ordering::Relaxed);
        }
    });
    // Until the writes stall: the server's send buffer and the client's
    // receive buffer are full, and so are the server's 4 buffers.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = usize::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = written.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            now < TOTAL,
            "the server took all {TOTAL} bytes without the client reading"
        );
        if now == last {
            break;
        }
        assert!(Instant::now() < deadline, "the writes never stalled");
        last = now;
    }
    let target = server.addr;
    let start = Instant::now();
    let client = std::thread::spawn(move || run_exact(target, Mode::Persistent, 20, 1, 64));
    std::thread::sleep(Duration::from_millis(400));
    assert!(!client.is_finished(), "served although the ring was empty");
    hog.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut got, mut buf) = (0, vec![0u8; 65536]);
    while got < TOTAL {
        let n = hog.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got} bytes");
        assert!(
            buf[..n].iter().enumerate().all(|(k, &b)| b == pattern(got + k)),
            "wrong bytes after {got}"
        );
        got += n;
    }
    writer.join().unwrap();
    let s = client.join().unwrap();
    assert!(
        s.latency.max() as f64 / 1e6 >= 300.0 && start.elapsed() >= Duration::from_millis(400),
        "the first request did not wait for a buffer: {}",
        s.line()
    );
    drop(hog);
    std::thread::sleep(Duration::from_millis(100));
    let (status, stderr) = server.interrupt();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains(&format!("echo server: 2 connections, {} bytes echoed", TOTAL + 20 * 64)),
        "{stderr}"
    );
    assert!(!stderr.contains("still in flight"), "{stderr}");
}

#[test]
fn io_uring_without_serve_echo_is_refused() {
    // No ring needed: runs (and must pass) where io_uring is off too.
    let out = Command::new(OXNET)
        .args(["loadgen", "-s", "127.0.0.1:7", "--io-uring"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--serve-echo"), "{stderr}");
}
