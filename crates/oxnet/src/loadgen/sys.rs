//! The few Linux calls std does not offer: epoll, a timerfd, a
//! non-blocking connect, SO_LINGER 0 and SO_REUSEPORT. Every `unsafe`
//! of the load generator is here, but for the io_uring server's
//! submissions and buffers (`uring_server.rs`, `uring_buffers.rs`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An epoll instance (level-triggered registrations keyed by a u64).
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// epoll_create1(EPOLL_CLOEXEC).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; the fd is owned from here on.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, key: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: key };
        // SAFETY: `ev` lives across the call.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    /// Registers `fd` for `events` under `key`.
    pub fn add(&self, fd: RawFd, events: u32, key: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, key)
    }

    /// Changes `fd`'s events.
    pub fn modify(&self, fd: RawFd, events: u32, key: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, key)
    }

    /// Waits up to `timeout_ms` (-1: forever) and fills `events`; returns
    /// how many are ready (0 on EINTR).
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let cap = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: the kernel writes at most `cap` entries into `events`.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), cap, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

/// A one-shot CLOCK_MONOTONIC timer (timerfd), for the open loop's next
/// scheduled request: finer than epoll_wait's milliseconds, and no busy
/// polling that would count as CPU time.
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// timerfd_create(CLOCK_MONOTONIC, non-blocking).
    pub fn new() -> io::Result<Timer> {
        // SAFETY: no pointers.
        let fd = check(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
        // SAFETY: a fresh descriptor.
        Ok(Timer {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The descriptor to register with epoll.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Fires once after `after` (at least 1 ns: zero would disarm it).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` lives across the call; no old value asked for.
        check(unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) }).map(|_| ())
    }

    /// Reads the expiry count so the level-triggered event clears.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `buf`; EAGAIN is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

/// `addr` as a sockaddr for the kernel.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn family(addr: &SocketAddr) -> libc::c_int {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` lives across the call, its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A non-blocking TCP socket connecting to `addr` (TCP_NODELAY set: the
/// requests are small and each waits for its answer). The connect is
/// under way (EINPROGRESS) or done; writability tells which, and
/// [`take_error`] whether it failed.
pub fn connect_nonblocking(addr: &SocketAddr) -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = check(unsafe {
        libc::socket(
            family(addr),
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    let (sa, len) = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr of `len` bytes.
    let r = unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(fd)
}

/// SO_ERROR: the error of a finished non-blocking connect, if any.
pub fn take_error(fd: RawFd) -> io::Result<()> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` live across the call.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    if value != 0 {
        return Err(io::Error::from_raw_os_error(value));
    }
    Ok(())
}

/// SO_LINGER on with a zero timeout: close(2) then sends a RST and frees
/// the connection at once (no TIME-WAIT), as ClickNF's echo client does.
pub fn linger_zero(fd: RawFd) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `l` lives across the call, its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A non-blocking listening socket on `addr` with SO_REUSEPORT (one per
/// server thread; the kernel spreads connections over them) and, for
/// `[::]`, both families (IPV6_V6ONLY off).
pub fn listen_reuseport(addr: &SocketAddr) -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = check(unsafe {
        libc::socket(
            family(addr),
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    if addr.is_ipv6() {
        set_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    }
    let (sa, len) = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr of `len` bytes.
    check(unsafe { libc::bind(raw, (&sa as *const libc::sockaddr_storage).cast(), len) })?;
    // SAFETY: no pointers.
    check(unsafe { libc::listen(raw, 4096) })?;
    Ok(fd)
}

/// Clears O_NONBLOCK: io_uring waits for a socket itself (it arms a poll
/// when the socket has nothing), the way it expects blocking sockets.
pub fn set_blocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: no pointers.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: no pointers.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) }).map(|_| ())
}

/// TCP_NODELAY on. Set on a listener, Linux copies it to every socket
/// accepted from it (the child socket is cloned from the listener).
pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// accept4 with the new socket non-blocking; `None` when none is waiting.
pub fn accept_nonblocking(listener: RawFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: null address pointers are allowed (peer address not wanted).
    let r = unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ECONNABORTED) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(r) };
    set_int(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    Ok(Some(fd))
}

/// read(2) into `buf`.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// send(2) of `buf` without SIGPIPE.
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// User plus system CPU seconds of this process (all threads).
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: all-zero is a valid rusage; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` lives across the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}
