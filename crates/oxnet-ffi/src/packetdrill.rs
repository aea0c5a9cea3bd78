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
//! retries every millisecond of real time, the stack's lock released in
//! between; if the simulated clock has not moved for [`IDLE_REAL_MS`]
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

use crate::abi::set_errno;
use crate::sockaddr;
use crate::stack::{CallResult, FfiStack};
use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
/// moves it itself.
pub const IDLE_REAL_MS: u64 = 50;

/// Real milliseconds a blocking call waits at most.
pub const MAX_BLOCK_REAL_MS: u64 = 10_000;

/// packetdrill's default local addresses (its `config.c`, and oxnet's
/// script runner: `script/run.rs`).
const DEFAULT_LOCAL_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
const DEFAULT_LOCAL_V6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1);

type Ud = *mut c_void;

/// `struct packetdrill_interface` (packetdrill.h), field for field in its
/// order. `fcntl` and `ioctl` are variadic in C; the shim takes their one
/// optional argument as a `long`, which the System V x86-64 and AAPCS64
/// (Linux) calling conventions pass where a variadic caller puts it.
#[repr(C)]
#[allow(clippy::type_complexity)]
pub struct PacketdrillInterface {
    pub userdata: Ud,
    pub free: Option<unsafe extern "C" fn(Ud)>,
    pub socket: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(Ud, c_int, *const libc::sockaddr, libc::socklen_t) -> c_int>,
    pub listen: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    pub accept: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> c_int>,
    pub connect: Option<unsafe extern "C" fn(Ud, c_int, *const libc::sockaddr, libc::socklen_t) -> c_int>,
    pub read: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, usize) -> isize>,
    pub readv: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> isize>,
    pub recv: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, usize, c_int) -> isize>,
    pub recvfrom: Option<
        unsafe extern "C" fn(Ud, c_int, *mut c_void, usize, c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> isize,
    >,
    pub recvmsg: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::msghdr, c_int) -> isize>,
    pub write: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, usize) -> isize>,
    pub writev: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> isize>,
    pub send: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, usize, c_int) -> isize>,
    pub sendto: Option<
        unsafe extern "C" fn(Ud, c_int, *const c_void, usize, c_int, *const libc::sockaddr, libc::socklen_t) -> isize,
    >,
    pub sendmsg: Option<unsafe extern "C" fn(Ud, c_int, *const libc::msghdr, c_int) -> isize>,
    pub fcntl: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_long) -> c_int>,
    pub ioctl: Option<unsafe extern "C" fn(Ud, c_int, c_ulong, c_long) -> c_int>,
    pub close: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    pub shutdown: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    pub getsockopt: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut c_void, *mut libc::socklen_t) -> c_int>,
    pub setsockopt: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *const c_void, libc::socklen_t) -> c_int>,
    pub poll: Option<unsafe extern "C" fn(Ud, *mut libc::pollfd, libc::nfds_t, c_int) -> c_int>,
    pub netdev_send: Option<unsafe extern "C" fn(Ud, *const c_void, usize) -> c_int>,
    pub netdev_receive: Option<unsafe extern "C" fn(Ud, *mut c_void, *mut usize, *mut i64) -> c_int>,
    pub usleep: Option<unsafe extern "C" fn(Ud, c_uint) -> c_int>,
    pub gettimeofday: Option<unsafe extern "C" fn(Ud, *mut libc::timeval, *mut c_void) -> c_int>,
    pub epoll_create: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    pub epoll_ctl: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut libc::epoll_event) -> c_int>,
    pub epoll_wait: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::epoll_event, c_int, c_int) -> c_int>,
    pub pipe: Option<unsafe extern "C" fn(Ud, *mut c_int) -> c_int>,
    pub splice: Option<unsafe extern "C" fn(Ud, c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> c_int>,
}

/// The stack, movable between packetdrill's threads.
struct Locked(FfiStack);

// SAFETY: the stack is only touched with the shim's mutex held (one
// thread at a time); its `Rc`s never leave it.
unsafe impl Send for Locked {}

/// What `userdata` points to.
pub struct Shim {
    stack: Mutex<Locked>,
}

impl Shim {
    fn lock(&self) -> MutexGuard<'_, Locked> {
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
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
        let (deadline, mut last_clock) = {
            let s = &mut self.lock().0;
            (timeout_us.map(|t| s.net.now().saturating_add(t)), s.net.now())
        };
        let mut idle_since = Instant::now();
        loop {
            {
                let s = &mut self.lock().0;
                if let Some(done) = attempt(s)? {
                    return Ok(Some(done));
                }
                let now = s.net.now();
                if !blocking || deadline.is_some_and(|d| now >= d) {
                    return Ok(None);
                }
                if now != last_clock {
                    last_clock = now;
                    idle_since = Instant::now();
                } else if idle_since.elapsed() >= Duration::from_millis(IDLE_REAL_MS) {
                    // Nobody drives time: move it to what could change
                    // the answer, a TCP timer or the timeout.
                    let next = match (s.net.next_deadline(), deadline) {
                        (Some(t), Some(d)) => Some(t.min(d)),
                        (t, d) => t.or(d),
                    };
                    if let Some(to) = next {
                        s.net.advance_to(to)?;
                    }
                    idle_since = Instant::now();
                }
            }
            if started.elapsed() >= Duration::from_millis(MAX_BLOCK_REAL_MS) {
                return Err(libc::EAGAIN);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
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
                    stack: Mutex::new(Locked(s)),
                };
                ifc.userdata = Box::into_raw(Box::new(shim)).cast();
            }
            Err(e) => eprintln!("oxnet packetdrill shim: building the stack: {e}"),
        }
    }));
}

unsafe extern "C" fn pd_free(ud: Ud) {
    if !ud.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(ud.cast::<Shim>()))));
    }
}

unsafe extern "C" fn pd_socket(ud: Ud, domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.socket(domain, ty, protocol)) as c_int
}

unsafe extern "C" fn pd_bind(ud: Ud, fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    guard(|| {
        let ep = sockaddr::read(addr, len)?;
        shim(ud)?.lock().0.bind(fd, ep)
    }) as c_int
}

unsafe extern "C" fn pd_listen(ud: Ud, fd: c_int, backlog: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.listen(fd, backlog)) as c_int
}

unsafe extern "C" fn pd_accept(ud: Ud, fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int {
    guard(|| {
        if addr.is_null() != len.is_null() {
            return Err(libc::EFAULT);
        }
        let sh = shim(ud)?;
        let mut peer = None;
        let newfd = sh.call(fd, false, |s| {
            let (fd, p) = s.accept(fd)?;
            peer = Some(p);
            Ok(fd)
        })?;
        if let Some(p) = peer {
            sockaddr::write(p, addr, len)?;
        }
        Ok(newfd)
    }) as c_int
}

unsafe extern "C" fn pd_connect(ud: Ud, fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    guard(|| {
        let ep = sockaddr::read(addr, len)?;
        let sh = shim(ud)?;
        let (first, blocking) = {
            let s = &mut sh.lock().0;
            (s.connect(fd, ep), !s.is_nonblocking(fd)?)
        };
        if first != Err(libc::EINPROGRESS) || !blocking {
            return first;
        }
        // A blocking connect waits for the handshake's end.
        let r = sh.wait(true, None, |s| match s.connect(fd, ep) {
            Err(libc::EALREADY) => Ok(None),
            Err(libc::EISCONN) => Ok(Some(0)),
            Err(e) => Err(e),
            Ok(v) => Ok(Some(v)),
        })?;
        r.ok_or(libc::EAGAIN)
    }) as c_int
}

/// Reads into each of `bufs` in turn (one wait at most, for the first).
unsafe fn read_iov(ud: Ud, fd: c_int, iov: &[libc::iovec], dontwait: bool) -> CallResult {
    let sh = shim(ud)?;
    let mut total = 0i64;
    for (i, v) in iov.iter().enumerate() {
        if v.iov_len == 0 {
            continue;
        }
        if v.iov_base.is_null() {
            return Err(libc::EFAULT);
        }
        let buf = std::slice::from_raw_parts_mut(v.iov_base.cast::<u8>(), v.iov_len);
        let r = if i == 0 || total == 0 {
            sh.call(fd, dontwait, |s| s.read(fd, buf))
        } else {
            sh.lock().0.read(fd, buf)
        };
        match r {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                if (n as usize) < v.iov_len {
                    break;
                }
            }
            Err(_) if total > 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// The most bytes of an iovec array gathered into one write: the bound
/// on what a writev makes the shim allocate.
const MAX_GATHER: usize = 1 << 20;

/// Writes the buffers of `iov` as one stream of bytes (gathered, so that
/// a writev is one write to the stack, as it is to Linux's: the first
/// buffer does not leave alone); a blocking descriptor waits until all is
/// queued, a non-blocking one stops at the first EAGAIN.
unsafe fn write_iov(ud: Ud, fd: c_int, iov: &[libc::iovec], dontwait: bool) -> CallResult {
    let sh = shim(ud)?;
    let blocking = !dontwait && !sh.lock().0.is_nonblocking(fd)?;
    let mut total = 0i64;
    let mut chunk: Vec<u8> = Vec::new();
    // Writes the gathered chunk; Ok(false) once a write took less.
    let flush = |chunk: &mut Vec<u8>, total: &mut i64| -> Result<bool, i32> {
        let mut data = &chunk[..];
        while !data.is_empty() {
            match sh.call(fd, dontwait, |s| s.write(fd, data)) {
                Ok(n) => {
                    *total += n;
                    data = &data[n as usize..];
                }
                Err(_) if *total > 0 => return Ok(false),
                Err(e) => return Err(e),
            }
            if !blocking && !data.is_empty() {
                return Ok(false);
            }
        }
        chunk.clear();
        Ok(true)
    };
    for v in iov {
        if v.iov_len == 0 {
            continue;
        }
        if v.iov_base.is_null() {
            return Err(libc::EFAULT);
        }
        let mut data = std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len);
        while !data.is_empty() {
            let take = (MAX_GATHER - chunk.len()).min(data.len());
            chunk.extend_from_slice(&data[..take]);
            data = &data[take..];
            if chunk.len() == MAX_GATHER && !flush(&mut chunk, &mut total)? {
                return Ok(total);
            }
        }
    }
    if !chunk.is_empty() {
        flush(&mut chunk, &mut total)?;
    }
    Ok(total)
}

/// One buffer as an iovec.
fn one(buf: *const c_void, len: usize) -> [libc::iovec; 1] {
    [libc::iovec {
        iov_base: buf.cast_mut(),
        iov_len: len,
    }]
}

/// A C iovec array as a slice (EFAULT if null with entries, EINVAL for
/// a negative count or more than Linux's IOV_MAX, 1024).
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> Result<&'a [libc::iovec], i32> {
    let n = usize::try_from(n).ok().filter(|n| *n <= 1024).ok_or(libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(std::slice::from_raw_parts(iov, n))
}

/// recv/send flags: MSG_DONTWAIT (this call does not wait: true) and
/// MSG_NOSIGNAL (oxnet raises no signal anyway); others EOPNOTSUPP.
fn check_flags(flags: c_int) -> Result<bool, i32> {
    if flags & !(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(flags & libc::MSG_DONTWAIT != 0)
}

unsafe extern "C" fn pd_read(ud: Ud, fd: c_int, buf: *mut c_void, n: usize) -> isize {
    guard(|| read_iov(ud, fd, &one(buf, n), false)) as isize
}

unsafe extern "C" fn pd_readv(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    guard(|| read_iov(ud, fd, iovecs(iov, n)?, false)) as isize
}

unsafe extern "C" fn pd_recv(ud: Ud, fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        read_iov(ud, fd, &one(buf, n), dontwait)
    }) as isize
}

unsafe extern "C" fn pd_recvfrom(
    ud: Ud,
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    _addr: *mut libc::sockaddr,
    _len: *mut libc::socklen_t,
) -> isize {
    pd_recv(ud, fd, buf, n, flags)
}

unsafe extern "C" fn pd_recvmsg(ud: Ud, fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        let m = msg.as_mut().ok_or(libc::EFAULT)?;
        let n = c_int::try_from(m.msg_iovlen).map_err(|_| libc::EINVAL)?;
        let r = read_iov(ud, fd, iovecs(m.msg_iov, n)?, dontwait)?;
        m.msg_namelen = 0;
        m.msg_controllen = 0;
        m.msg_flags = 0;
        Ok(r)
    }) as isize
}

unsafe extern "C" fn pd_write(ud: Ud, fd: c_int, buf: *const c_void, n: usize) -> isize {
    guard(|| write_iov(ud, fd, &one(buf, n), false)) as isize
}

unsafe extern "C" fn pd_writev(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    guard(|| write_iov(ud, fd, iovecs(iov, n)?, false)) as isize
}

unsafe extern "C" fn pd_send(ud: Ud, fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        write_iov(ud, fd, &one(buf, n), dontwait)
    }) as isize
}

unsafe extern "C" fn pd_sendto(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    _addr: *const libc::sockaddr,
    _len: libc::socklen_t,
) -> isize {
    pd_send(ud, fd, buf, n, flags)
}

unsafe extern "C" fn pd_sendmsg(ud: Ud, fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        let m = msg.as_ref().ok_or(libc::EFAULT)?;
        let n = c_int::try_from(m.msg_iovlen).map_err(|_| libc::EINVAL)?;
        write_iov(ud, fd, iovecs(m.msg_iov, n)?, dontwait)
    }) as isize
}

// c_long is i64 on LP64 only: the conversion is for 32-bit targets.
#[allow(clippy::useless_conversion)]
unsafe extern "C" fn pd_fcntl(ud: Ud, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    guard(|| shim(ud)?.lock().0.fcntl(fd, cmd, i64::from(arg))) as c_int
}

unsafe extern "C" fn pd_ioctl(_ud: Ud, _fd: c_int, _request: c_ulong, _arg: c_long) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

unsafe extern "C" fn pd_close(ud: Ud, fd: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.close(fd)) as c_int
}

unsafe extern "C" fn pd_shutdown(ud: Ud, fd: c_int, how: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.shutdown(fd, how)) as c_int
}

unsafe extern "C" fn pd_getsockopt(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut libc::socklen_t,
) -> c_int {
    let sh = match shim(ud) {
        Ok(s) => s,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let mut g = sh.lock();
    crate::abi::oxnet_getsockopt(&mut g.0, fd, level, name, value, len)
}

unsafe extern "C" fn pd_setsockopt(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: libc::socklen_t,
) -> c_int {
    let sh = match shim(ud) {
        Ok(s) => s,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let mut g = sh.lock();
    crate::abi::oxnet_setsockopt(&mut g.0, fd, level, name, value, len)
}

/// A timeout in milliseconds as simulated microseconds (negative: none).
fn timeout_us(ms: c_int) -> Option<u64> {
    u64::try_from(ms).ok().map(|ms| ms * 1000)
}

unsafe extern "C" fn pd_poll(ud: Ud, fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    guard(|| {
        let sh = shim(ud)?;
        let r = sh.wait(timeout != 0, timeout_us(timeout), |s| {
            match crate::abi::oxnet_poll(s, fds, n, 0) {
                -1 => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)),
                0 => Ok(None),
                k => Ok(Some(i64::from(k))),
            }
        })?;
        Ok(r.unwrap_or(0))
    }) as c_int
}

unsafe extern "C" fn pd_netdev_send(ud: Ud, buf: *const c_void, n: usize) -> c_int {
    let sh = match shim(ud) {
        Ok(s) => s,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let mut g = sh.lock();
    crate::abi::oxnet_stack_input(&mut g.0, buf.cast(), n)
}

unsafe extern "C" fn pd_netdev_receive(ud: Ud, buf: *mut c_void, count: *mut usize, time_us: *mut i64) -> c_int {
    guard(|| {
        let sh = shim(ud)?;
        let (count, time_us) = (
            count.as_mut().ok_or(libc::EFAULT)?,
            time_us.as_mut().ok_or(libc::EFAULT)?,
        );
        let s = &mut sh.lock().0;
        let until = s.net.now().saturating_add(MAX_SNIFF_WAIT_US);
        // Time runs from timer to timer until the stack sends something.
        while s.net.peek_sent().is_none() {
            let now = s.net.now();
            if now >= until {
                // "Set @count to 0 if received nothing" (packetdrill.h):
                // packetdrill then fails the script ("IP header overflows
                // packet") instead of asking again for ever.
                eprintln!("oxnet packetdrill shim: nothing sent in {MAX_SNIFF_WAIT_US} µs of simulated time");
                *count = 0;
                *time_us = i64::try_from(EPOCH_US + now).unwrap_or(i64::MAX);
                return Ok(0);
            }
            let to = s.net.next_deadline().map_or(until, |d| d.min(until));
            s.net.advance_to(to)?;
        }
        let (at, p) = s.net.peek_sent().ok_or(libc::EIO)?;
        if p.len() > *count {
            return Err(libc::EMSGSIZE);
        }
        if buf.is_null() {
            return Err(libc::EFAULT);
        }
        let at = *at;
        let (_, p) = s.net.pop_sent().ok_or(libc::EIO)?;
        std::ptr::copy_nonoverlapping(p.as_ptr(), buf.cast::<u8>(), p.len());
        *count = p.len();
        *time_us = i64::try_from(EPOCH_US + at).unwrap_or(i64::MAX);
        Ok(0)
    }) as c_int
}

unsafe extern "C" fn pd_usleep(ud: Ud, us: c_uint) -> c_int {
    guard(|| {
        let s = &mut shim(ud)?.lock().0;
        let to = s.net.now().saturating_add(u64::from(us));
        s.net.advance_to(to)?;
        Ok(0)
    }) as c_int
}

unsafe extern "C" fn pd_gettimeofday(ud: Ud, tv: *mut libc::timeval, _tz: *mut c_void) -> c_int {
    guard(|| {
        let tv = tv.as_mut().ok_or(libc::EFAULT)?;
        let s = &mut shim(ud)?.lock().0;
        let sim = s.net.now();
        let now = EPOCH_US + sim;
        tv.tv_sec = (now / 1_000_000) as libc::time_t;
        tv.tv_usec = (now % 1_000_000) as libc::suseconds_t;
        // Each reading moves the clock on a tick: packetdrill spins on
        // gettimeofday until an event's time (run.c, wait_for_event).
        s.net.advance_to(sim + GETTIMEOFDAY_TICK_US)?;
        Ok(0)
    }) as c_int
}

unsafe extern "C" fn pd_epoll_create(ud: Ud, size: c_int) -> c_int {
    guard(|| {
        if size <= 0 {
            return Err(libc::EINVAL);
        }
        shim(ud)?.lock().0.epoll_create()
    }) as c_int
}

unsafe extern "C" fn pd_epoll_ctl(ud: Ud, epfd: c_int, op: c_int, fd: c_int, event: *mut libc::epoll_event) -> c_int {
    let sh = match shim(ud) {
        Ok(s) => s,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let mut g = sh.lock();
    crate::abi::oxnet_epoll_ctl(&mut g.0, epfd, op, fd, event)
}

unsafe extern "C" fn pd_epoll_wait(
    ud: Ud,
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    guard(|| {
        let sh = shim(ud)?;
        let r = sh.wait(
            timeout != 0,
            timeout_us(timeout),
            |s| match crate::abi::oxnet_epoll_wait(s, epfd, events, max, 0) {
                -1 => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)),
                0 => Ok(None),
                k => Ok(Some(i64::from(k))),
            },
        )?;
        Ok(r.unwrap_or(0))
    }) as c_int
}

unsafe extern "C" fn pd_pipe(_ud: Ud, _fds: *mut c_int) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

unsafe extern "C" fn pd_splice(
    _ud: Ud,
    _a: c_int,
    _b: *mut i64,
    _c: c_int,
    _d: *mut i64,
    _n: usize,
    _f: c_uint,
) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
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
