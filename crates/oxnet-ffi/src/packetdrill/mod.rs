//! A shim for packetdrill's shared-object mode (google/packetdrill,
//! `gtests/net/packetdrill/packetdrill.h` and `so_testing.c`):
//! `packetdrill --so_filename=liboxnet_ffi.so [--so_flags=...] script.pkt`
//! dlopens this library, calls [`packetdrill_interface_init`] with the
//! `--so_flags` string and a `struct packetdrill_interface` to fill, then
//! makes the script's system calls, injects its packets and sniffs ours
//! through the function pointers; at the end it calls `free(userdata)`.
//!
//! | packetdrill's entry | what the shim does |
//! |---|---|
//! | `usleep(us)` | moves the simulated clock `us` forward (timers fire on the way, each at its time) |
//! | `gettimeofday(tv, tz)` | the simulated clock, from [`EPOCH_US`]; then moves it on [`GETTIMEOFDAY_TICK_US`] (packetdrill spins on it) |
//! | `netdev_send(buf, n)` | the IP packet packetdrill injects, into the stack (`oxnet_stack_input`) |
//! | `netdev_receive(buf, &n, &t)` | the next IP packet the stack sent and its time; if none, the clock moves from TCP timer to TCP timer until one is sent, [`MAX_SNIFF_WAIT_US`] at most (then 0 with a count of 0: "received nothing", which fails the script) |
//! | `socket`, `bind`, `listen`, `accept`, `connect`, `close`, `shutdown`, `fcntl`, `getsockopt`, `setsockopt`, `epoll_*`, `poll` | the C ABI's calls (`crate::stack`) |
//! | `read`, `recv`, `recvfrom`, `readv`, `recvmsg` | `read` into the buffer(s) (no address, no control data) |
//! | `write`, `send`, `sendto`, `writev`, `sendmsg` | `write` of the buffer(s) (the address is not used) |
//! | `ioctl`, `pipe`, `splice` | -1 EOPNOTSUPP |
//!
//! # Blocking calls
//! packetdrill makes a blocking call on a thread of its own and goes on
//! with the script on its main thread (its usleep and netdev_send move
//! the clock and bring what the call waits for). So a blocking call here
//! tries again on every change (a packet in, the clock moved, another
//! call) and every millisecond of real time, the stack's lock released in
//! between; an entry that moves the clock first lets every waiting call
//! try (`waiters.rs`), so a call ends at the simulated time of what woke
//! it. If the simulated clock has not moved for [`IDLE_REAL_MS`]
//! (nobody else drives time) the waiting call moves it itself, to the
//! next TCP timer or its own timeout. It gives up after
//! [`MAX_BLOCK_REAL_MS`] of real time with EAGAIN, so a script that
//! waits for nothing fails instead of hanging. poll and epoll_wait wait
//! at most their timeout, in simulated time.
//!
//! # Threads
//! The stack is not thread-safe (one router, `Rc` state): every entry
//! takes the shim's mutex, so calls from packetdrill's two threads run
//! one at a time.
//!
//! # so_flags, and packetdrill's own flags
//! `--so_flags` is a comma-separated list: `local4=A.B.C.D` and
//! `local6=IPV6` set the stack's own addresses (by default 192.168.0.1
//! and fd3d:fa7b:d17d::1, the ones oxnet's script runner uses); other
//! words are ignored. packetdrill picks a random local address in
//! 192.168.0.0/16 (or fd3d:fa7b:d17d::/48) unless told (its `config.c`),
//! and binds and connects from it, so give it the stack's:
//! `packetdrill --so_filename=target/debug/liboxnet_ffi.so
//! --ip_version=ipv4 --local_ip=192.168.0.1 script.pkt` (the remote end
//! stays packetdrill's default, 192.0.2.1; with `--ip_version=ipv6`,
//! `--local_ip=fd3d:fa7b:d17d::1`, remote 2001:db8::1).
//! `--ip_version=ipv4-mapped-ipv6` is not supported (AF_INET6 sockets
//! with IPv4 on the wire).
//!
//! | file | what |
//! |---|---|
//! | `interface.rs` | `struct packetdrill_interface`, field for field |
//! | `calls.rs` | the socket, epoll, clock and packet entries |
//! | `io.rs` | read, write and their vector and message forms |

mod calls;
mod interface;
mod io;
mod waiters;

pub use interface::PacketdrillInterface;

use crate::stack::{CallResult, FfiStack};
use calls::*;
use interface::Ud;
use io::*;
use std::ffi::{c_char, c_int, CStr};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use waiters::Waiters;

/// What gettimeofday gives for simulated time 0: 2020-09-13T12:26:40Z,
/// an arbitrary fixed date (packetdrill only uses differences).
pub const EPOCH_US: u64 = 1_600_000_000_000_000;

/// How long netdev_receive lets simulated time run for a packet (the
/// same bound as oxnet's script runner gives a `*`-timed packet).
pub const MAX_SNIFF_WAIT_US: u64 = 120_000_000;

/// How far each gettimeofday moves the clock, after reading it.
/// packetdrill waits for an event by usleep until shortly before it, then
/// spins on gettimeofday (its `wait_for_event`; before the first event
/// it only spins): a clock that a reading does not move would spin it
/// forever.
pub const GETTIMEOFDAY_TICK_US: u64 = 1;

/// Real milliseconds without the clock moving after which a waiting call
/// moves it itself: packetdrill's main thread waits at most 1 s of real
/// time for a blocking call to end (run_system_call.c,
/// `await_idle_thread`), and a call that a timer ends (a SYN retried, a
/// keepalive giving up) needs the clock to move meanwhile.
pub const IDLE_REAL_MS: u64 = 200;

/// Real milliseconds a blocking call waits at most.
pub const MAX_BLOCK_REAL_MS: u64 = 10_000;

/// The stack's addresses unless `--so_flags` says otherwise: those of
/// oxnet's script runner (`script/run.rs`). packetdrill's own local
/// address is random unless `--local_ip` gives it (its `config.c`).
const DEFAULT_LOCAL_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const DEFAULT_LOCAL_V6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1);

/// The stack, movable between packetdrill's threads, and the blocking
/// calls under way on it.
struct Locked(FfiStack, Waiters);

// SAFETY: the stack is only touched with the shim's mutex held (one
// thread at a time); its `Rc`s never leave it.
unsafe impl Send for Locked {}

/// What `userdata` points to.
pub struct Shim {
    stack: Mutex<Locked>,
    /// Signalled on every change and every try of a waiting call.
    changes: Condvar,
}

impl Shim {
    fn lock(&self) -> MutexGuard<'_, Locked> {
        let mut g = self.stack.lock().unwrap_or_else(|e| e.into_inner());
        g.1.entered();
        g
    }

    /// Notes a change a waiting call may answer to, and wakes it.
    fn changed(&self, g: &mut Locked) {
        g.1.changed();
        self.changes.notify_all();
    }

    /// Waits (real time, [`waiters::CATCH_UP_BOUND`] at most) until
    /// every blocking call has tried since the last change: to be called
    /// before the clock moves (`waiters.rs` says why).
    fn catch_up<'a>(&'a self, mut g: MutexGuard<'a, Locked>) -> MutexGuard<'a, Locked> {
        let start = Instant::now();
        while !g.1.caught_up() {
            let Some(left) = waiters::CATCH_UP_BOUND.checked_sub(start.elapsed()) else {
                break;
            };
            let step = left.min(Duration::from_millis(1));
            g = self.changes.wait_timeout(g, step).unwrap_or_else(|e| e.into_inner()).0;
            g.1.entered();
        }
        g
    }

    /// The lock, once every blocking call has caught up: for the entries
    /// that move the clock.
    fn lock_for_clock(&self) -> MutexGuard<'_, Locked> {
        self.catch_up(self.lock())
    }

    /// Makes `attempt` until it is done (Ok(Some)), fails, or, for a
    /// non-blocking call, would block (Ok(None) at once). A blocking one
    /// waits as the module says; `timeout_us` (simulated) ends the wait
    /// with Ok(None).
    fn wait<T>(
        &self,
        blocking: bool,
        timeout_us: Option<u64>,
        mut attempt: impl FnMut(&mut FfiStack) -> Result<Option<T>, i32>,
    ) -> Result<Option<T>, i32> {
        let started = Instant::now();
        let mut g = self.lock();
        let deadline = timeout_us.map(|t| g.0.net.now().saturating_add(t));
        let first = attempt(&mut g.0);
        self.changed(&mut g);
        match first {
            Ok(None) if blocking && deadline.is_none_or(|d| g.0.net.now() < d) => {}
            other => return other,
        }
        g.1.start();
        let mut last_clock = g.0.net.now();
        let mut idle_since = Instant::now();
        let result = loop {
            // Woken by a change, or after a millisecond.
            g = self
                .changes
                .wait_timeout(g, Duration::from_millis(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            g.1.entered();
            let r = attempt(&mut g.0);
            g.1.tried();
            self.changes.notify_all();
            match r {
                Ok(None) => {}
                done => break done,
            }
            let now = g.0.net.now();
            if deadline.is_some_and(|d| now >= d) {
                break Ok(None);
            }
            if now != last_clock {
                last_clock = now;
                idle_since = Instant::now();
            } else if idle_since.elapsed() >= Duration::from_millis(IDLE_REAL_MS) {
                // Nobody drives time: move it to what could change the
                // answer, a TCP timer or the timeout.
                let next = match (g.0.net.next_deadline(), deadline) {
                    (Some(t), Some(d)) => Some(t.min(d)),
                    (t, d) => t.or(d),
                };
                if let Some(to) = next {
                    if let Err(e) = g.0.net.advance_to(to) {
                        break Err(e);
                    }
                    self.changed(&mut g);
                }
                idle_since = Instant::now();
            }
            if started.elapsed() >= Duration::from_millis(MAX_BLOCK_REAL_MS) {
                break Err(libc::EAGAIN);
            }
        };
        g.1.returned();
        self.changed(&mut g);
        result
    }

    /// A call on `fd` that returns EAGAIN when it would block, made as
    /// `fd`'s blocking flag says.
    /// `dontwait` (MSG_DONTWAIT) makes this one call non-blocking.
    fn call(&self, fd: c_int, dontwait: bool, mut f: impl FnMut(&mut FfiStack) -> CallResult) -> CallResult {
        let blocking = !dontwait && !self.lock().0.is_nonblocking(fd)?;
        let r = self.wait(blocking, None, |s| match f(s) {
            Err(libc::EAGAIN) => Ok(None),
            other => other.map(Some),
        })?;
        r.ok_or(libc::EAGAIN)
    }
}

/// The shim behind `userdata`, EFAULT if null.
unsafe fn shim<'a>(ud: Ud) -> Result<&'a Shim, i32> {
    ud.cast::<Shim>().as_ref().ok_or(libc::EFAULT)
}

/// Runs `f` with panics caught, -1 and errno on error.
fn guard(f: impl FnOnce() -> CallResult) -> i64 {
    crate::abi::entry(f)
}

/// Parses `--so_flags` (see the module doc).
fn parse_flags(flags: &str) -> (Ipv4Addr, Ipv6Addr) {
    let (mut v4, mut v6) = (DEFAULT_LOCAL_V4, DEFAULT_LOCAL_V6);
    for word in flags.split(',') {
        if let Some(a) = word.strip_prefix("local4=").and_then(|a| a.parse().ok()) {
            v4 = a;
        } else if let Some(a) = word.strip_prefix("local6=").and_then(|a| a.parse().ok()) {
            v6 = a;
        }
    }
    (v4, v6)
}

/// packetdrill's entry point: fills `ifc` (userdata: a new stack).
/// `flags` may be NULL. If the stack cannot be made, `userdata` stays
/// NULL and every call fails with EFAULT.
///
/// # Safety
/// `flags` null or a C string; `ifc` null or a writable interface.
#[no_mangle]
pub unsafe extern "C" fn packetdrill_interface_init(flags: *const c_char, ifc: *mut PacketdrillInterface) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(ifc) = ifc.as_mut() else { return };
        let text = if flags.is_null() {
            String::new()
        } else {
            CStr::from_ptr(flags).to_string_lossy().into_owned()
        };
        let (v4, v6) = parse_flags(&text);
        *ifc = PacketdrillInterface {
            userdata: std::ptr::null_mut(),
            free: Some(pd_free),
            socket: Some(pd_socket),
            bind: Some(pd_bind),
            listen: Some(pd_listen),
            accept: Some(pd_accept),
            connect: Some(pd_connect),
            read: Some(pd_read),
            readv: Some(pd_readv),
            recv: Some(pd_recv),
            recvfrom: Some(pd_recvfrom),
            recvmsg: Some(pd_recvmsg),
            write: Some(pd_write),
            writev: Some(pd_writev),
            send: Some(pd_send),
            sendto: Some(pd_sendto),
            sendmsg: Some(pd_sendmsg),
            fcntl: Some(pd_fcntl),
            ioctl: Some(pd_ioctl),
            close: Some(pd_close),
            shutdown: Some(pd_shutdown),
            getsockopt: Some(pd_getsockopt),
            setsockopt: Some(pd_setsockopt),
            poll: Some(pd_poll),
            netdev_send: Some(pd_netdev_send),
            netdev_receive: Some(pd_netdev_receive),
            usleep: Some(pd_usleep),
            gettimeofday: Some(pd_gettimeofday),
            epoll_create: Some(pd_epoll_create),
            epoll_ctl: Some(pd_epoll_ctl),
            epoll_wait: Some(pd_epoll_wait),
            pipe: Some(pd_pipe),
            splice: Some(pd_splice),
        };
        match FfiStack::new(Some(v4), Some(v6)) {
            Ok(s) => {
                let shim = Shim {
                    stack: Mutex::new(Locked(s, Waiters::default())),
                    changes: Condvar::new(),
                };
                ifc.userdata = Box::into_raw(Box::new(shim)).cast();
            }
            Err(e) => eprintln!("oxnet packetdrill shim: building the stack: {e}"),
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_set_the_local_addresses_and_default_to_the_script_runners() {
        assert_eq!(parse_flags(""), (DEFAULT_LOCAL_V4, DEFAULT_LOCAL_V6));
        let (v4, v6) = parse_flags("foo,local4=10.0.0.2,local6=2001:db8::5");
        assert_eq!(v4, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(v6, "2001:db8::5".parse::<Ipv6Addr>().unwrap());
    }
}
