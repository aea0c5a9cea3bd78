//! The Linux echo server the benchmark compares oxnet's with: the best
//! plain one we can write on kernel sockets. One thread per core, each
//! with its own SO_REUSEPORT listener (the kernel spreads connections
//! over them, no shared accept queue) and its own epoll; reads echoed
//! with one send; what the socket does not take at once is kept and
//! sent when it is writable again (bounded per connection).

use super::sys::{self, Epoll};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The epoll key of a thread's listener (connections use their fd).
const LISTENER: u64 = u64::MAX;
/// Bytes a connection may have waiting to be echoed; past it the server
/// stops reading that connection until the client reads.
const MAX_BACKLOG: usize = 256 * 1024;

/// What `--serve-echo` runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The TCP port.
    pub port: u16,
    /// The address to bind (None: [::] for both families, or 0.0.0.0).
    pub bind: Option<IpAddr>,
    /// Server threads (one listener each).
    pub threads: usize,
    /// Stop after this long (None: until SIGINT/SIGTERM).
    pub duration: Option<Duration>,
}

/// What the server did.
#[derive(Clone, Debug, Default)]
pub struct ServeStats {
    /// Connections accepted.
    pub connections: u64,
    /// Bytes echoed.
    pub bytes: u64,
}

/// Serves echo until the time is up or a signal asks to stop. Binding
/// errors (port in use, address not here) are returned before any
/// thread starts; "listening on ADDR" goes to stderr once all listen.
pub fn run(o: &ServeOptions) -> Result<ServeStats, String> {
    let (listeners, bound) = listeners(o)?;
    eprintln!(
        "oxnet loadgen: echo server listening on {bound} ({} threads)",
        listeners.len()
    );
    let connections = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let end = o.duration.and_then(|d| Instant::now().checked_add(d));
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(t, l)| {
            let (c, b) = (Arc::clone(&connections), Arc::clone(&bytes));
            std::thread::Builder::new()
                .name(format!("echo{t}"))
                .spawn(move || serve_thread(l, end, &c, &b))
                .map_err(|e| format!("cannot start a server thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    for h in handles {
        h.join().map_err(|_| "a server thread panicked".to_string())??;
    }
    Ok(ServeStats {
        connections: connections.load(Ordering::Relaxed),
        bytes: bytes.load(Ordering::Relaxed),
    })
}

/// One SO_REUSEPORT listener per server thread on the options' address
/// (also the io_uring server's), and the address they are bound to.
pub(super) fn listeners(o: &ServeOptions) -> Result<(Vec<OwnedFd>, SocketAddr), String> {
    let addr = match o.bind {
        Some(ip) => SocketAddr::new(ip, o.port),
        None => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), o.port),
    };
    let mut listeners = Vec::new();
    let mut bound = addr;
    for _ in 0..o.threads.max(1) {
        let l = match sys::listen_reuseport(&bound) {
            Ok(l) => l,
            // IPv6 switched off here: both families means IPv4 only.
            Err(e) if o.bind.is_none() && listeners.is_empty() && e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
                bound = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), o.port);
                sys::listen_reuseport(&bound).map_err(|e| format!("listen on {bound}: {e}"))?
            }
            Err(e) => return Err(format!("listen on {bound}: {e}")),
        };
        listeners.push(l);
    }
    Ok((listeners, bound))
}

struct Conn {
    fd: OwnedFd,
    /// Bytes read and not yet sent back.
    backlog: Vec<u8>,
    /// The events registered with epoll (changed only when needed: one
    /// system call fewer per request).
    events: u32,
}

fn serve_thread(
    listener: OwnedFd,
    end: Option<Instant>,
    connections: &AtomicU64,
    bytes: &AtomicU64,
) -> Result<(), String> {
    let epoll = Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    epoll
        .add(listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)
        .map_err(|e| format!("epoll_ctl: {e}"))?;
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = vec![0u8; 64 * 1024];
    let (mut my_conns, mut my_bytes) = (0u64, 0u64);
    loop {
        if end.is_some_and(|e| Instant::now() >= e) || crate::signal::stop_requested() {
            break;
        }
        // 100 ms: how soon a stop request is noticed when idle.
        let n = epoll.wait(&mut events, 100).map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..n] {
            if ev.u64 == LISTENER {
                while let Ok(Some(fd)) = sys::accept_nonblocking(listener.as_raw_fd()) {
                    let key = fd.as_raw_fd() as u64;
                    let ev = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
                    if epoll.add(fd.as_raw_fd(), ev, key).is_ok() {
                        my_conns += 1;
                        conns.insert(
                            key,
                            Conn {
                                fd,
                                backlog: Vec::new(),
                                events: ev,
                            },
                        );
                    }
                }
                continue;
            }
            let key = ev.u64;
            let Some(c) = conns.get_mut(&key) else { continue };
            if echo(c, &mut buf, &epoll, key, &mut my_bytes).is_err() {
                // Closed or reset by the client: dropping the fd closes
                // it and removes it from epoll.
                conns.remove(&key);
            }
        }
    }
    connections.fetch_add(my_conns, Ordering::Relaxed);
    bytes.fetch_add(my_bytes, Ordering::Relaxed);
    Ok(())
}

/// Sends what waits, then reads and echoes what came, adding the bytes
/// echoed to `echoed` (also when the connection ends in the same call:
/// the client may close as soon as it has its last echo); an error when
/// the connection is over.
fn echo(c: &mut Conn, buf: &mut [u8], epoll: &Epoll, key: u64, echoed: &mut u64) -> io::Result<()> {
    let fd = c.fd.as_raw_fd();
    if !c.backlog.is_empty() {
        match sys::send(fd, &c.backlog) {
            Ok(w) => {
                c.backlog.drain(..w);
                *echoed += w as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    while c.backlog.len() < MAX_BACKLOG {
        let n = match sys::read(fd, buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        };
        if !c.backlog.is_empty() {
            c.backlog.extend_from_slice(&buf[..n]);
            continue;
        }
        let w = match sys::send(fd, &buf[..n]) {
            Ok(w) => w,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        *echoed += w as u64;
        c.backlog.extend_from_slice(&buf[w..n]);
    }
    // Wait for room to send only while something waits; stop reading
    // while the backlog is full (the client's window then closes).
    let want = match (c.backlog.is_empty(), c.backlog.len() >= MAX_BACKLOG) {
        (true, _) => libc::EPOLLIN | libc::EPOLLRDHUP,
        (false, false) => libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP,
        (false, true) => libc::EPOLLOUT,
    };
    if want as u32 != c.events {
        epoll.modify(fd, want as u32, key)?;
        c.events = want as u32;
    }
    Ok(())
}
