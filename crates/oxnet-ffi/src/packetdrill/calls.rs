//! The shim's entries but the data calls (`io.rs`): sockets, epoll,
//! poll, the clock and the packets.

use super::interface::Ud;
use super::{guard, shim, Shim, EPOCH_US, GETTIMEOFDAY_TICK_US, MAX_SNIFF_WAIT_US};
use crate::abi::set_errno;
use crate::sockaddr;
use std::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(super) unsafe extern "C" fn pd_free(ud: Ud) {
    if !ud.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(ud.cast::<Shim>()))));
    }
}

pub(super) unsafe extern "C" fn pd_socket(ud: Ud, domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.socket(domain, ty, protocol)) as c_int
}

pub(super) unsafe extern "C" fn pd_bind(ud: Ud, fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    guard(|| {
        let ep = sockaddr::read(addr, len)?;
        shim(ud)?.lock().0.bind(fd, ep)
    }) as c_int
}

pub(super) unsafe extern "C" fn pd_listen(ud: Ud, fd: c_int, backlog: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.listen(fd, backlog)) as c_int
}

pub(super) unsafe extern "C" fn pd_accept(
    ud: Ud,
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
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

pub(super) unsafe extern "C" fn pd_connect(
    ud: Ud,
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
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

// c_long is i64 on LP64 only: the conversion is for 32-bit targets.
#[allow(clippy::useless_conversion)]
pub(super) unsafe extern "C" fn pd_fcntl(ud: Ud, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    guard(|| shim(ud)?.lock().0.fcntl(fd, cmd, i64::from(arg))) as c_int
}

pub(super) unsafe extern "C" fn pd_ioctl(_ud: Ud, _fd: c_int, _request: c_ulong, _arg: c_long) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

pub(super) unsafe extern "C" fn pd_close(ud: Ud, fd: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.close(fd)) as c_int
}

pub(super) unsafe extern "C" fn pd_shutdown(ud: Ud, fd: c_int, how: c_int) -> c_int {
    guard(|| shim(ud)?.lock().0.shutdown(fd, how)) as c_int
}

pub(super) unsafe extern "C" fn pd_getsockopt(
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

pub(super) unsafe extern "C" fn pd_setsockopt(
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

pub(super) unsafe extern "C" fn pd_poll(ud: Ud, fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
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

pub(super) unsafe extern "C" fn pd_netdev_send(ud: Ud, buf: *const c_void, n: usize) -> c_int {
    let sh = match shim(ud) {
        Ok(s) => s,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let mut g = sh.lock();
    let r = crate::abi::oxnet_stack_input(&mut g.0, buf.cast(), n);
    sh.changed(&mut g);
    if r != 0 {
        // packetdrill reports a failed injection without a reason.
        let e = std::io::Error::last_os_error();
        let limit = g.0.net.max_input();
        eprintln!("oxnet packetdrill shim: the stack refused a packet of {n} bytes ({e}; it takes {limit} at most)");
        set_errno(e.raw_os_error().unwrap_or(libc::EIO));
    }
    r
}

pub(super) unsafe extern "C" fn pd_netdev_receive(
    ud: Ud,
    buf: *mut c_void,
    count: *mut usize,
    time_us: *mut i64,
) -> c_int {
    guard(|| {
        let sh = shim(ud)?;
        let (count, time_us) = (
            count.as_mut().ok_or(libc::EFAULT)?,
            time_us.as_mut().ok_or(libc::EFAULT)?,
        );
        let mut g = sh.lock_for_clock();
        let until = g.0.net.now().saturating_add(MAX_SNIFF_WAIT_US);
        // Time runs from timer to timer until the stack sends something,
        // the blocking calls catching up at each step.
        while g.0.net.peek_sent().is_none() {
            let now = g.0.net.now();
            if now >= until {
                // "Set @count to 0 if received nothing" (packetdrill.h):
                // packetdrill then fails the script ("IP header overflows
                // packet") instead of asking again for ever.
                eprintln!("oxnet packetdrill shim: nothing sent in {MAX_SNIFF_WAIT_US} µs of simulated time");
                *count = 0;
                *time_us = i64::try_from(EPOCH_US + now).unwrap_or(i64::MAX);
                return Ok(0);
            }
            let to = g.0.net.next_deadline().map_or(until, |d| d.min(until));
            g.0.net.advance_to(to)?;
            sh.changed(&mut g);
            g = sh.catch_up(g);
        }
        let s = &mut g.0;
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

pub(super) unsafe extern "C" fn pd_usleep(ud: Ud, us: c_uint) -> c_int {
    guard(|| {
        let sh = shim(ud)?;
        let mut g = sh.lock_for_clock();
        let to = g.0.net.now().saturating_add(u64::from(us));
        g.0.net.advance_to(to)?;
        sh.changed(&mut g);
        Ok(0)
    }) as c_int
}

pub(super) unsafe extern "C" fn pd_gettimeofday(ud: Ud, tv: *mut libc::timeval, _tz: *mut c_void) -> c_int {
    guard(|| {
        let tv = tv.as_mut().ok_or(libc::EFAULT)?;
        let sh = shim(ud)?;
        let mut g = sh.lock_for_clock();
        let s = &mut g.0;
        let sim = s.net.now();
        let now = EPOCH_US + sim;
        tv.tv_sec = (now / 1_000_000) as libc::time_t;
        tv.tv_usec = (now % 1_000_000) as libc::suseconds_t;
        // Each reading moves the clock on a tick: packetdrill spins on
        // gettimeofday until an event's time (run.c, wait_for_event).
        s.net.advance_to(sim + GETTIMEOFDAY_TICK_US)?;
        sh.changed(&mut g);
        Ok(0)
    }) as c_int
}

pub(super) unsafe extern "C" fn pd_epoll_create(ud: Ud, size: c_int) -> c_int {
    guard(|| {
        if size <= 0 {
            return Err(libc::EINVAL);
        }
        shim(ud)?.lock().0.epoll_create()
    }) as c_int
}

pub(super) unsafe extern "C" fn pd_epoll_ctl(
    ud: Ud,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
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

pub(super) unsafe extern "C" fn pd_epoll_wait(
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

pub(super) unsafe extern "C" fn pd_pipe(_ud: Ud, _fds: *mut c_int) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

pub(super) unsafe extern "C" fn pd_splice(
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
