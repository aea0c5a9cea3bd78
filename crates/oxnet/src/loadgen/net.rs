//! What the client ([`super::client`]) needs from a TCP/IP stack, as one
//! trait, so that the same state machine drives kernel sockets
//! ([`super::kernel::KernelNet`]) and oxnet's own stack
//! ([`super::stack::StackNet`]). Errors are errno values in
//! `io::Error`s (`EAGAIN` for a call that would wait, `ECONNREFUSED`,
//! `ETIMEDOUT`, `ENETUNREACH` for a connect that failed); readiness is
//! Linux's epoll(7) flags (`libc::EPOLLIN`, ...), which oxnet's epoll
//! uses too.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The key [`Net::wait`] reports when the timer of [`Net::arm_timer`]
/// fires (sockets use their own keys, below this one).
pub const TIMER_KEY: u64 = u64::MAX;

/// A stack's non-blocking TCP client calls, its readiness and its clock.
/// One per client thread; level-triggered, as epoll without EPOLLET.
pub trait Net {
    /// A connection.
    type Socket;

    /// The stack's clock. Kernel sockets: `Instant::now()`. oxnet's
    /// stack: the router's clock (real or simulated) as Instants from
    /// the backend's start, so that the schedule, the timeouts and the
    /// latencies are in the time the stack runs in.
    fn now(&self) -> Instant;

    /// Starts a connection to `target` with TCP_NODELAY set, without
    /// waiting: writability (or an error) tells when it completes, then
    /// [`Net::take_error`] whether it failed. An error here is a connect
    /// that failed at once.
    fn connect(&mut self, target: &SocketAddr) -> io::Result<Self::Socket>;

    /// SO_ERROR after a connect completed: Ok if established.
    fn take_error(&mut self, socket: &Self::Socket) -> io::Result<()>;

    /// Closes with a RST (SO_LINGER 0): no FIN, no TIME-WAIT, and the
    /// readiness registration goes with it.
    fn abort(&mut self, socket: Self::Socket);

    /// Closes normally (a FIN), at the end of a run.
    fn close(&mut self, socket: Self::Socket);

    /// Registers `socket` for `events` under `key` (`added`: it is
    /// registered already and `events` replace the old ones).
    fn watch(&mut self, socket: &Self::Socket, events: u32, key: u64, added: bool) -> io::Result<()>;

    /// Reads what has arrived: Ok(0) at the end of the stream,
    /// `WouldBlock` (EAGAIN) if nothing yet.
    fn read(&mut self, socket: &Self::Socket, buf: &mut [u8]) -> io::Result<usize>;

    /// Queues what there is room for: `WouldBlock` (EAGAIN) if none.
    fn send(&mut self, socket: &Self::Socket, buf: &[u8]) -> io::Result<usize>;

    /// Arms the one-shot timer for `at` (replacing an earlier time):
    /// [`Net::wait`] reports [`TIMER_KEY`] once it has passed. Finer
    /// than a millisecond: the open loop's schedule rides on it.
    fn arm_timer(&mut self, at: Instant) -> io::Result<()>;

    /// Waits at most `timeout` for readiness and fills `events` with
    /// (flags, key) pairs, at most `events`' capacity (cleared first).
    fn wait(&mut self, events: &mut Vec<(u32, u64)>, timeout: Duration) -> io::Result<()>;
}
