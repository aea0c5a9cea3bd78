//! [`Net`] on oxnet's own TCP/IP stack, in the client's thread: a router
//! with a `TCPStack` (built by [`super::on_stack`]) and the stack's
//! socket API (`TcpStream::connect`, `try_read`/`try_write`, `abort`,
//! its epoll). The router runs inside [`Net::wait`]: rounds until a
//! socket is ready, the timer is due or the wait's time is up, so the
//! client and the stack share one core with no lock and no hand-off.
//!
//! Time is the router's clock. Real: an idle router spins for 50 µs (a
//! poll-mode driver's latency), then sleeps at most 50 µs at a time, as
//! `Router::run` does; the time from the first idle round to the next
//! busy one is counted ([`StackNet::idle`]), so that a run says how busy
//! the client's core really was (its CPU time counts the spinning).
//! Simulated (`--simtime`): an idle round moves the clock to the next
//! thing due (a router timer, the client's timer or the end of the
//! wait), so a run with a simulated device is exact and takes no real
//! time waiting.

use super::net::{Net, TIMER_KEY};
use oxnet_graph::Router;
use oxnet_stack::tcp::epoll::{Epoll, EpollOp, Pollable};
use oxnet_stack::tcp::socket::{Stack, TcpStream};
use oxnet_stack::tcp::tcb::TcpState;
use oxnet_stack::wire::IpEndpoint;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long an idle wait spins before it sleeps (real time).
const SPIN: Duration = Duration::from_micros(50);
/// The longest sleep on the device's poll descriptors (a stop or a
/// schedule change is seen within it).
const MAX_IDLE_SLEEP_US: u64 = 5_000;
/// The longest nap of an idle wait on a device without poll descriptors
/// (real time), as `Router::run`'s.
const MAX_SLEEP_US: u64 = 50;

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// oxnet's stack for one client thread: its router, the router's TCP
/// state, an epoll, our addresses.
pub struct StackNet {
    router: Router,
    stack: Stack,
    epoll: Epoll,
    /// Our IPv4 and IPv6 addresses (the sources of connections).
    local_v4: Option<IpAddr>,
    local_v6: Option<IpAddr>,
    /// The Instant that stands for the router's time 0.
    base: Instant,
    simulated: bool,
    /// The armed timer, router microseconds.
    timer_us: Option<u64>,
    /// Real time spent idle in waits, and since when the current idle
    /// stretch has lasted.
    idle: Duration,
    idle_since: Option<Instant>,
}

impl StackNet {
    /// Drives `router`, whose TCP state is `stack`, with connections from
    /// `local_v4` / `local_v6`.
    pub fn new(
        router: Router,
        stack: Stack,
        local_v4: Option<IpAddr>,
        local_v6: Option<IpAddr>,
        simulated: bool,
    ) -> StackNet {
        let mut router = router;
        if simulated {
            router.use_simulated_time();
        }
        let now = Instant::now();
        let base = now.checked_sub(Duration::from_micros(router.now_us())).unwrap_or(now);
        StackNet {
            router,
            stack,
            epoll: Epoll::new(),
            local_v4,
            local_v6,
            base,
            simulated,
            timer_us: None,
            idle: Duration::ZERO,
            idle_since: None,
        }
    }

    /// The router (for its handlers after a run).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Real time the waits spent with nothing to do (spinning or
    /// asleep): the rest of a run is the client's and the stack's work.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Opens one connection to `target` and waits (at most `timeout`)
    /// for its handshake to end either way, then resets it: the device's
    /// link is up and the next hop's address known before a measured run
    /// starts (else the first requests wait for an ARP or ND
    /// retransmission, a second). Returns how it ended.
    pub fn prime(&mut self, target: &SocketAddr, timeout: Duration) -> io::Result<()> {
        let s = self.connect(target)?;
        self.watch(&s, libc::EPOLLOUT as u32, 0, false)?;
        let end = self.now() + timeout;
        let mut events = Vec::with_capacity(1);
        let mut result = Err(errno(libc::ETIMEDOUT));
        loop {
            let now = self.now();
            if now >= end {
                break;
            }
            self.wait(&mut events, end - now)?;
            if events.iter().any(|&(_, key)| key == 0) {
                result = self.take_error(&s);
                break;
            }
        }
        self.abort(s);
        self.timer_us = None;
        result
    }

    /// Ends the current idle stretch, if any.
    fn end_idle(&mut self) {
        if let Some(t) = self.idle_since.take() {
            self.idle += t.elapsed();
        }
    }

    fn us_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// Runs the router for up to `us` of its time, or until it is idle:
    /// the closes and RSTs of the run's end leave.
    pub fn settle(&mut self, us: u64) {
        let end = self.router.now_us().saturating_add(us);
        while self.router.now_us() < end && !self.router.stopped() {
            if !self.router.run_once() {
                if self.simulated {
                    let next = self.router.next_timer_us().unwrap_or(end).min(end);
                    self.router.advance_simulated_time(next.max(self.router.now_us() + 1));
                } else {
                    std::thread::sleep(Duration::from_micros(MAX_SLEEP_US));
                }
            }
        }
    }

    /// Forgets `socket`'s epoll registration (it may have none).
    fn unwatch(&mut self, socket: &TcpStream) {
        let (_, source) = socket.epoll_source();
        let _ = self.epoll.forget(source);
    }
}

impl Net for StackNet {
    type Socket = TcpStream;

    fn now(&self) -> Instant {
        self.base + Duration::from_micros(self.router.now_us())
    }

    fn connect(&mut self, target: &SocketAddr) -> io::Result<TcpStream> {
        // No address of the target's family: no route (Linux's
        // ENETUNREACH for a destination it has no route to).
        let local = if target.is_ipv4() { self.local_v4 } else { self.local_v6 };
        let local = local.ok_or_else(|| errno(libc::ENETUNREACH))?;
        let s = TcpStream::connect(
            &self.stack,
            IpEndpoint::new(local, 0),
            IpEndpoint::new(target.ip(), target.port()),
        )
        .map_err(errno)?;
        s.set_nodelay(true);
        Ok(s)
    }

    fn take_error(&mut self, socket: &TcpStream) -> io::Result<()> {
        if let Some(e) = socket.error() {
            return Err(errno(e));
        }
        match socket.state() {
            // Ended without an error recorded: the peer refused.
            TcpState::Closed => Err(errno(libc::ECONNREFUSED)),
            // Not done yet (readiness said it was): as a connect that
            // is still under way.
            TcpState::SynSent | TcpState::SynReceived => Err(errno(libc::EALREADY)),
            _ => Ok(()),
        }
    }

    fn abort(&mut self, socket: TcpStream) {
        self.unwatch(&socket);
        socket.abort();
    }

    fn close(&mut self, socket: TcpStream) {
        self.unwatch(&socket);
        drop(socket);
    }

    fn watch(&mut self, socket: &TcpStream, events: u32, key: u64, added: bool) -> io::Result<()> {
        let op = if added { EpollOp::Mod } else { EpollOp::Add };
        self.epoll.ctl(op, socket, events, key).map_err(errno)
    }

    fn read(&mut self, socket: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        socket.try_read(buf).map_err(errno)
    }

    fn send(&mut self, socket: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        socket.try_write(buf).map_err(errno)
    }

    fn arm_timer(&mut self, at: Instant) -> io::Result<()> {
        self.timer_us = Some(self.us_of(at));
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<(u32, u64)>, timeout: Duration) -> io::Result<()> {
        events.clear();
        let cap = events.capacity().max(1);
        let timeout_us = u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX);
        let end = self.router.now_us().saturating_add(timeout_us);
        loop {
            let worked = self.router.run_once();
            events.extend(self.epoll.try_wait(cap - events.len()));
            let now = self.router.now_us();
            if self.timer_us.is_some_and(|t| now >= t) && events.len() < cap {
                self.timer_us = None;
                events.push((libc::EPOLLIN as u32, TIMER_KEY));
            }
            if !events.is_empty() || now >= end {
                self.end_idle();
                return Ok(());
            }
            if self.router.stopped() {
                return Err(io::Error::other("the router stopped"));
            }
            if worked {
                self.end_idle();
                continue;
            }
            let idle_since = *self.idle_since.get_or_insert_with(Instant::now);
            // Idle: nothing happens before the next timer (the router's
            // or ours) or the end of the wait.
            let next = [self.router.next_timer_us(), self.timer_us, Some(end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            if self.simulated {
                self.router.advance_simulated_time(next.max(now + 1));
            } else if next > now && idle_since.elapsed() > SPIN {
                // On a device with poll descriptors (TAP, AF_PACKET,
                // AF_XDP) until a frame comes; otherwise a short nap.
                let wait = (next - now).min(MAX_IDLE_SLEEP_US);
                if !self.router.sleep_on_descriptors(wait) {
                    std::thread::sleep(Duration::from_micros(wait.min(MAX_SLEEP_US)));
                }
            }
        }
    }
}
