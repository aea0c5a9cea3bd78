//! TCPEchoClient: an echo client on oxnet's stack, the other end of
//! TCPEchoServer or of any RFC 862 echo server (Linux's, socat's): it
//! opens connections, sends random bytes on each, reads them back and
//! checks every byte.
//!
//! TCPEchoClient(DST ADDR, PORT port, SRC ADDR, CONNECTIONS n, BYTES b,
//! CONCURRENCY c, STOP bool, SEED s, WRITE w): n connections from SRC (an
//! ephemeral port each, chosen so that with several cores the replies
//! come back to this one) to DST:PORT, c at a time (default 1), b bytes
//! each (default 10000; written at most w bytes per call, default all
//! that fits: the payload size of a bulk benchmark), then our FIN, then
//! the echo read to its end.
//! With STOP true the router stops when all are done (with `oxnet run
//! -j`, when those of every thread are). KEEPALIVE, KEEPALIVE_INTERVAL,
//! KEEPALIVE_COUNT and USER_TIMEOUT are set on each connection once it
//! is established (`super::sockopts`). Handlers: `done` (connections
//! whose bytes all came back, in order), `failed` (the others),
//! `timeouts` (those of the failed that ended with ETIMEDOUT), `bytes`
//! (bytes echoed and checked), `errors` (the last error, as text),
//! `elapsed_us` (the router's time from the client's first run to the
//! end of its last connection).

use crate::exec::Executor;
use crate::tcp::info::TcpInfo;
use crate::tcp::socket::TcpStream;
use crate::wire::{IpAddress, IpEndpoint};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::Ctx;
use std::cell::RefCell;
use std::rc::Rc;

/// TCPEchoClients with STOP true still running, in every graph thread
/// of the process: with `oxnet run -j`, a thread whose own clients are
/// done keeps running (its stack serves the others' connections: RSS
/// puts a flow's two directions on any threads) until all are done.
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[derive(Default)]
struct Progress {
    done: u64,
    failed: u64,
    bytes: u64,
    timeouts: u64,
    last_error: String,
    started: u64,
}

/// Why a connection failed: its errno (if the stack gave one) and text.
struct Failure {
    errno: Option<i32>,
    text: String,
}

#[derive(Default)]
pub struct EchoClient {
    dst: Option<IpEndpoint>,
    src: Option<IpAddress>,
    connections: u64,
    bytes: usize,
    /// Largest write per call (0: no limit).
    write: usize,
    concurrency: u64,
    /// The router's time at the first run, and when all were done.
    started_us: Option<u64>,
    finished_us: Option<u64>,
    stop: bool,
    seed: u64,
    options: super::sockopts::SocketOptions,
    stack: Option<Rc<RefCell<TcpInfo>>>,
    exec: Option<Rc<RefCell<Executor>>>,
    progress: Rc<RefCell<Progress>>,
    /// Counted in RUNNING, and not yet taken out.
    running: bool,
    stopped: bool,
}

fn address(text: &str, what: &str) -> Result<IpAddress, String> {
    let ip: std::net::IpAddr = text
        .parse()
        .map_err(|_| format!("{what}: '{text}' is not an IP address"))?;
    Ok(IpAddress::from(ip))
}

/// The bytes connection `i` sends (xorshift from the seed).
fn payload(seed: u64, i: u64, n: usize) -> Vec<u8> {
    let mut x = (seed ^ (i.wrapping_mul(0x9e37_79b9_7f4a_7c15))) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// One connection: open, send, close our side, read the echo to its end,
/// compare.
async fn one(
    stack: Rc<RefCell<TcpInfo>>,
    src: IpAddress,
    dst: IpEndpoint,
    data: Vec<u8>,
    write: usize,
    options: super::sockopts::SocketOptions,
) -> Result<usize, Failure> {
    let errno = |e: i32| Failure {
        errno: Some(e),
        text: std::io::Error::from_raw_os_error(e).to_string(),
    };
    let stream = TcpStream::connect(&stack, IpEndpoint { addr: src, port: 0 }, dst).map_err(errno)?;
    stream.connected().await.map_err(errno)?;
    options.apply(&stream);
    let mut back = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 16 * 1024];
    let mut sent = 0;
    // Write and read in turn, so that a send buffer smaller than the data
    // does not stall against an echo nobody reads.
    while sent < data.len() {
        let end = if write == 0 {
            data.len()
        } else {
            (sent + write).min(data.len())
        };
        match stream.try_write(&data[sent..end]) {
            Ok(n) => sent += n,
            Err(libc::EAGAIN) => {}
            Err(e) => return Err(errno(e)),
        }
        match stream.try_read(&mut buf) {
            Ok(n) => back.extend_from_slice(&buf[..n]),
            Err(libc::EAGAIN) => {}
            Err(e) => return Err(errno(e)),
        }
        if sent < data.len() {
            crate::exec::yield_now().await;
        }
    }
    stream.shutdown_write().map_err(errno)?;
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => back.extend_from_slice(&buf[..n]),
            Err(e) => return Err(errno(e)),
        }
    }
    if back != data {
        return Err(Failure {
            errno: None,
            text: format!("{} bytes came back of {}, not the same", back.len(), data.len()),
        });
    }
    Ok(back.len())
}

impl Element for EchoClient {
    fn class_name(&self) -> &'static str {
        "TCPEchoClient"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let dst = address(&a.positional_or("DST").ok_or("DST is required")?, "DST")?;
        let port = a.keyword("PORT").ok_or("PORT is required")?;
        let port = u16::try_from(args::unsigned(&port).map_err(|e| format!("PORT: {e}"))?)
            .map_err(|_| "PORT: not a port number".to_string())?;
        self.dst = Some(IpEndpoint { addr: dst, port });
        let src = address(&a.keyword("SRC").ok_or("SRC is required")?, "SRC")?;
        if src.is_ipv4() != dst.is_ipv4() {
            return Err("SRC and DST must be of one family".into());
        }
        self.src = Some(src);
        let number = |a: &mut Args, key: &str, default: u64| -> Result<u64, String> {
            match a.keyword(key) {
                Some(v) => args::unsigned(&v).map_err(|e| format!("{key}: {e}")),
                None => Ok(default),
            }
        };
        self.connections = number(a, "CONNECTIONS", 1)?;
        self.bytes = number(a, "BYTES", 10_000)? as usize;
        self.concurrency = number(a, "CONCURRENCY", 1)?.max(1);
        self.write = number(a, "WRITE", 0)? as usize;
        self.seed = number(a, "SEED", 1)?;
        self.stop = match a.keyword("STOP") {
            Some(v) => args::boolean(&v).map_err(|e| format!("STOP: {e}"))?,
            None => false,
        };
        self.options = super::sockopts::SocketOptions::configure(a)?;
        self.stack = Some(crate::tcp::elements::info());
        self.exec = Some(super::executor());
        Ok(())
    }
    fn initialize(&mut self, _ports: &oxnet_graph::element::Ports) -> Result<(), String> {
        let (Some(stack), Some(exec), Some(dst), Some(src)) = (&self.stack, &self.exec, self.dst, self.src) else {
            return Ok(());
        };
        if self.stop {
            RUNNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.running = true;
        }
        let workers = self.concurrency.min(self.connections);
        for _ in 0..workers {
            let (stack, progress) = (stack.clone(), self.progress.clone());
            let (total, bytes, seed, write, options) =
                (self.connections, self.bytes, self.seed, self.write, self.options);
            exec.borrow().spawn(async move {
                loop {
                    let i = {
                        let mut p = progress.borrow_mut();
                        if p.started >= total {
                            return;
                        }
                        p.started += 1;
                        p.started - 1
                    };
                    let result = one(stack.clone(), src, dst, payload(seed, i, bytes), write, options).await;
                    let mut p = progress.borrow_mut();
                    match result {
                        Ok(n) => {
                            p.done += 1;
                            p.bytes += n as u64;
                        }
                        Err(e) => {
                            p.failed += 1;
                            if e.errno == Some(libc::ETIMEDOUT) {
                                p.timeouts += 1;
                            }
                            p.last_error = e.text;
                        }
                    }
                }
            });
        }
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router only (sockets written by the
    /// executor's tasks, the router's timers): an idle router may sleep.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        use std::sync::atomic::Ordering;
        let finished = {
            let p = self.progress.borrow();
            p.done + p.failed >= self.connections
        };
        let now = ctx.now_us();
        self.started_us.get_or_insert(now);
        if finished && self.finished_us.is_none() {
            self.finished_us = Some(now);
        }
        if finished && self.running {
            self.running = false;
            RUNNING.fetch_sub(1, Ordering::SeqCst);
        }
        if self.stop && finished && !self.stopped && RUNNING.load(Ordering::SeqCst) == 0 {
            self.stopped = true;
            ctx.stop();
            return true;
        }
        false
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("done", true, false),
            ("failed", true, false),
            ("timeouts", true, false),
            ("bytes", true, false),
            ("errors", true, false),
            ("elapsed_us", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let p = self.progress.borrow();
        match name {
            "done" => Some(p.done.to_string()),
            "failed" => Some(p.failed.to_string()),
            "timeouts" => Some(p.timeouts.to_string()),
            "bytes" => Some(p.bytes.to_string()),
            "errors" => Some(p.last_error.clone()),
            "elapsed_us" => Some(
                self.finished_us
                    .zip(self.started_us)
                    .map_or(0, |(end, start)| end.saturating_sub(start))
                    .to_string(),
            ),
            _ => None,
        }
    }
}
