//! The exported C functions (`include/oxnet.h` declares them, with the
//! same names and types). Each one catches panics (`entry`): none
//! crosses into C; a panic is -1 with errno EIO. Errors are -1 with
//! errno set through libc's errno location, as C expects.
//!
//! Only null pointers can be detected: EFAULT for those; a length out of
//! range is EINVAL. A handle is used by one thread at a time.

use crate::net::MAX_PACKET;
use crate::sockaddr;
use crate::stack::{CallResult, FfiStack};
use std::ffi::{c_int, c_long, c_void};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The opaque stack handle C holds (`oxnet_stack *`).
pub type OxnetStack = FfiStack;

/// Sets errno.
pub fn set_errno(e: i32) {
    // SAFETY: libc's errno location is this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e }
}

/// Runs `f` with panics caught: its value, or -1 with errno set (EIO for
/// a panic).
pub fn entry(f: impl FnOnce() -> CallResult) -> i64 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            -1
        }
        Err(_) => {
            set_errno(libc::EIO);
            -1
        }
    }
}

/// `entry` for a function returning int.
fn entry_int(f: impl FnOnce() -> CallResult) -> c_int {
    entry(f) as c_int
}

/// The stack behind a handle, EFAULT if null.
///
/// # Safety
/// `h` is null or a live handle from `oxnet_stack_new`, not in use by
/// another thread.
unsafe fn stack<'a>(h: *mut OxnetStack) -> Result<&'a mut FfiStack, i32> {
    h.as_mut().ok_or(libc::EFAULT)
}

/// A C buffer as a slice: EFAULT if null with a length, EINVAL if the
/// length is beyond `isize::MAX` (what a slice can hold).
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], i32> {
    if len > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(std::slice::from_raw_parts(p, len))
}

/// As `bytes`, writable.
unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Result<&'a mut [u8], i32> {
    if len > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(std::slice::from_raw_parts_mut(p, len))
}

/// Makes a stack. `local_ipv4` (4 bytes) and `local_ipv6` (16 bytes),
/// each may be NULL, are its addresses (the source of connections
/// opened from unbound sockets). NULL with errno on failure.
///
/// # Safety
/// Each address pointer is null or points to its 4 or 16 bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_new(local_ipv4: *const u8, local_ipv6: *const u8) -> *mut OxnetStack {
    let mut made = None;
    let r = entry(|| {
        let v4 = (!local_ipv4.is_null()).then(|| {
            let mut a = [0u8; 4];
            std::ptr::copy_nonoverlapping(local_ipv4, a.as_mut_ptr(), 4);
            Ipv4Addr::from(a)
        });
        let v6 = (!local_ipv6.is_null()).then(|| {
            let mut a = [0u8; 16];
            std::ptr::copy_nonoverlapping(local_ipv6, a.as_mut_ptr(), 16);
            Ipv6Addr::from(a)
        });
        made = Some(FfiStack::new(v4, v6).map_err(|_| libc::ENOMEM)?);
        Ok(0)
    });
    match made {
        Some(s) if r == 0 => Box::into_raw(Box::new(s)),
        _ => std::ptr::null_mut(),
    }
}

/// Frees a stack and everything in it (NULL: nothing).
///
/// # Safety
/// `h` is null or a live handle, not used again.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_free(h: *mut OxnetStack) {
    if !h.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(h))));
    }
}

/// Gives the stack an IP packet (IPv4 or IPv6 header first). 0, or -1:
/// EINVAL for an empty packet, one over 65535 bytes or not IPv4/IPv6;
/// ENOBUFS if the stack had no buffer for it (one over a 2 KiB buffer
/// takes one of the few large ones, `oxnet_stack::plug`).
///
/// # Safety
/// `h` a live handle; `packet` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_input(h: *mut OxnetStack, packet: *const u8, len: usize) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let p = bytes(packet, len)?;
        if p.is_empty() || p.len() > MAX_PACKET || !matches!(p[0] >> 4, 4 | 6) {
            return Err(libc::EINVAL);
        }
        s.net.input(p.to_vec())?;
        Ok(0)
    })
}

/// Copies the next IP packet the stack sent into `buf` and returns its
/// length; 0 if none. -1 EMSGSIZE if `cap` is too small (the packet
/// stays queued: `oxnet_stack_pending` says how much room it needs).
///
/// # Safety
/// `h` a live handle; `buf` points to `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_output(h: *mut OxnetStack, buf: *mut u8, cap: usize) -> isize {
    entry(|| {
        let s = stack(h)?;
        let out = bytes_mut(buf, cap)?;
        let Some((_, p)) = s.net.peek_sent() else { return Ok(0) };
        if p.len() > out.len() {
            return Err(libc::EMSGSIZE);
        }
        let (_, p) = s.net.pop_sent().ok_or(libc::EIO)?;
        out[..p.len()].copy_from_slice(&p);
        Ok(p.len() as i64)
    }) as isize
}

/// The length of the next packet `oxnet_stack_output` would give (0 if
/// none), and in `*time_us` (if not NULL) the simulated time it was sent.
///
/// # Safety
/// `h` a live handle; `time_us` null or writable.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_pending(h: *mut OxnetStack, time_us: *mut u64) -> isize {
    entry(|| {
        let s = stack(h)?;
        let Some((t, p)) = s.net.peek_sent() else { return Ok(0) };
        if let Some(out) = time_us.as_mut() {
            *out = *t;
        }
        Ok(p.len() as i64)
    }) as isize
}

/// Moves the simulated clock forward to `now_us` (microseconds since the
/// stack was made; an earlier time changes nothing), firing the timers
/// due on the way, each at its own time. 0, or -1.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_advance(h: *mut OxnetStack, now_us: u64) -> c_int {
    entry_int(|| {
        stack(h)?.net.advance_to(now_us)?;
        Ok(0)
    })
}

/// The simulated clock, microseconds since the stack was made (0 for a
/// NULL handle).
///
/// # Safety
/// `h` null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_now(h: *mut OxnetStack) -> u64 {
    let r = entry(|| Ok(stack(h)?.net.now() as i64));
    r.max(0) as u64
}

/// The earliest TCP timer deadline after now (microseconds), or -1 if no
/// timer is armed.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_stack_next_timer(h: *mut OxnetStack) -> i64 {
    entry(|| stack(h)?.net.next_deadline().map(|d| d as i64).ok_or(libc::ENOENT))
}

/// socket(2): AF_INET / AF_INET6, SOCK_STREAM (| SOCK_NONBLOCK |
/// SOCK_CLOEXEC), 0 or IPPROTO_TCP.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_socket(h: *mut OxnetStack, domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    entry_int(|| stack(h)?.socket(domain, ty, protocol))
}

/// bind(2).
///
/// # Safety
/// `h` a live handle; `addr` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_bind(
    h: *mut OxnetStack,
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let ep = sockaddr::read(addr, len)?;
        s.bind(fd, ep)
    })
}

/// listen(2).
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_listen(h: *mut OxnetStack, fd: c_int, backlog: c_int) -> c_int {
    entry_int(|| stack(h)?.listen(fd, backlog))
}

/// accept(2): the new descriptor, the peer written to `addr` if not
/// NULL; EAGAIN if no connection is ready.
///
/// # Safety
/// `h` a live handle; `addr` and `len` both null, or `len` points to the
/// size of the writable buffer at `addr`.
#[no_mangle]
pub unsafe extern "C" fn oxnet_accept(
    h: *mut OxnetStack,
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        if addr.is_null() != len.is_null() {
            return Err(libc::EFAULT);
        }
        let (newfd, peer) = s.accept(fd)?;
        sockaddr::write(peer, addr, len)?;
        Ok(newfd)
    })
}

/// connect(2): -1 EINPROGRESS (the SYN is sent); called again, EALREADY
/// during the handshake, EISCONN once connected, or the handshake's error.
///
/// # Safety
/// `h` a live handle; `addr` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_connect(
    h: *mut OxnetStack,
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let ep = sockaddr::read(addr, len)?;
        s.connect(fd, ep)
    })
}

/// read(2): bytes read, 0 at the end of the stream, -1 EAGAIN if none yet.
///
/// # Safety
/// `h` a live handle; `buf` points to `count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_read(h: *mut OxnetStack, fd: c_int, buf: *mut c_void, count: usize) -> isize {
    entry(|| {
        let s = stack(h)?;
        let b = bytes_mut(buf.cast(), count)?;
        s.read(fd, b)
    }) as isize
}

/// write(2): bytes queued, -1 EAGAIN if the send buffer is full.
///
/// # Safety
/// `h` a live handle; `buf` points to `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_write(h: *mut OxnetStack, fd: c_int, buf: *const c_void, count: usize) -> isize {
    entry(|| {
        let s = stack(h)?;
        let b = bytes(buf.cast(), count)?;
        s.write(fd, b)
    }) as isize
}

/// close(2).
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_close(h: *mut OxnetStack, fd: c_int) -> c_int {
    entry_int(|| stack(h)?.close(fd))
}

/// shutdown(2): SHUT_WR / SHUT_RDWR send a FIN; after SHUT_RD / SHUT_RDWR
/// a read that would wait returns 0.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_shutdown(h: *mut OxnetStack, fd: c_int, how: c_int) -> c_int {
    entry_int(|| stack(h)?.shutdown(fd, how))
}

/// setsockopt(2): int-valued options (`len` at least sizeof(int)).
///
/// # Safety
/// `h` a live handle; `value` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn oxnet_setsockopt(
    h: *mut OxnetStack,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: libc::socklen_t,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        if value.is_null() {
            return Err(libc::EFAULT);
        }
        if (len as usize) < std::mem::size_of::<c_int>() {
            return Err(libc::EINVAL);
        }
        let v = std::ptr::read_unaligned(value.cast::<c_int>());
        s.setsockopt(fd, level, name, v)
    })
}

/// getsockopt(2): int-valued options and SO_ERROR; `*len` becomes
/// sizeof(int) (a smaller buffer gets the first `*len` bytes).
///
/// # Safety
/// `h` a live handle; `len` points to the size of the writable `value`.
#[no_mangle]
pub unsafe extern "C" fn oxnet_getsockopt(
    h: *mut OxnetStack,
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *mut c_void,
    len: *mut libc::socklen_t,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        if value.is_null() || len.is_null() {
            return Err(libc::EFAULT);
        }
        let v = s.getsockopt(fd, level, name)?;
        let room = (std::ptr::read_unaligned(len) as usize).min(std::mem::size_of::<c_int>());
        std::ptr::copy_nonoverlapping(v.to_ne_bytes().as_ptr(), value.cast::<u8>(), room);
        std::ptr::write_unaligned(len, room as libc::socklen_t);
        Ok(0)
    })
}

/// fcntl(2) with one integer argument (not variadic: pass 0 when the
/// command takes none): F_GETFL, F_SETFL (O_NONBLOCK), F_GETFD, F_SETFD.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
// c_long is i64 on LP64 only: the conversion is for 32-bit targets.
#[allow(clippy::useless_conversion)]
pub unsafe extern "C" fn oxnet_fcntl(h: *mut OxnetStack, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    entry_int(|| stack(h)?.fcntl(fd, cmd, i64::from(arg)))
}

/// epoll_create(2): `size` must be positive, as Linux wants.
///
/// # Safety
/// `h` a live handle.
#[no_mangle]
pub unsafe extern "C" fn oxnet_epoll_create(h: *mut OxnetStack, size: c_int) -> c_int {
    entry_int(|| {
        if size <= 0 {
            return Err(libc::EINVAL);
        }
        stack(h)?.epoll_create()
    })
}

/// epoll_ctl(2): `event` may be NULL for EPOLL_CTL_DEL only.
///
/// # Safety
/// `h` a live handle; `event` null or readable.
#[no_mangle]
pub unsafe extern "C" fn oxnet_epoll_ctl(
    h: *mut OxnetStack,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut libc::epoll_event,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let (events, data) = if event.is_null() {
            if op != libc::EPOLL_CTL_DEL {
                return Err(libc::EFAULT);
            }
            (0, 0)
        } else {
            let e = std::ptr::read_unaligned(event);
            (e.events, e.u64)
        };
        s.epoll_ctl(epfd, op, fd, events, data)
    })
}

/// epoll_wait(2) without waiting (the caller drives time): the number of
/// events written, 0 if none is ready; `timeout` is not used.
///
/// # Safety
/// `h` a live handle; `events` points to `maxevents` writable entries.
#[no_mangle]
pub unsafe extern "C" fn oxnet_epoll_wait(
    h: *mut OxnetStack,
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    _timeout: c_int,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let max = usize::try_from(maxevents).ok().filter(|m| *m > 0).ok_or(libc::EINVAL)?;
        if events.is_null() {
            return Err(libc::EFAULT);
        }
        let ready = s.epoll_wait(epfd, max)?;
        for (i, (ev, data)) in ready.iter().enumerate() {
            std::ptr::write_unaligned(
                events.add(i),
                libc::epoll_event {
                    events: *ev,
                    u64: *data,
                },
            );
        }
        Ok(ready.len() as i64)
    })
}

/// poll(2) without waiting: fills each `revents`, returns how many are
/// not 0; `timeout` is not used.
///
/// # Safety
/// `h` a live handle; `fds` points to `nfds` entries.
#[no_mangle]
pub unsafe extern "C" fn oxnet_poll(
    h: *mut OxnetStack,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    _timeout: c_int,
) -> c_int {
    entry_int(|| {
        let s = stack(h)?;
        let n = usize::try_from(nfds).map_err(|_| libc::EINVAL)?;
        if n > 65_536 {
            return Err(libc::EINVAL);
        }
        if n > 0 && fds.is_null() {
            return Err(libc::EFAULT);
        }
        let mut ready = 0;
        for i in 0..n {
            let p = fds.add(i);
            let mut pfd = std::ptr::read_unaligned(p);
            pfd.revents = if pfd.fd < 0 { 0 } else { s.poll_one(pfd.fd, pfd.events) };
            if pfd.revents != 0 {
                ready += 1;
            }
            std::ptr::write_unaligned(p, pfd);
        }
        Ok(ready)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn a_panic_becomes_minus_one_with_eio_and_an_error_its_errno() {
        assert_eq!(entry(|| panic!("inside an entry")), -1);
        assert_eq!(errno(), libc::EIO);
        assert_eq!(entry(|| Err(libc::ENOTCONN)), -1);
        assert_eq!(errno(), libc::ENOTCONN);
        assert_eq!(entry(|| Ok(7)), 7);
    }

    #[test]
    fn a_null_handle_is_efault_everywhere() {
        unsafe {
            let mut b = [0u8; 4];
            assert_eq!(oxnet_stack_input(std::ptr::null_mut(), b.as_ptr(), 4), -1);
            assert_eq!(errno(), libc::EFAULT);
            assert_eq!(oxnet_stack_output(std::ptr::null_mut(), b.as_mut_ptr(), 4), -1);
            assert_eq!(errno(), libc::EFAULT);
            assert_eq!(oxnet_stack_advance(std::ptr::null_mut(), 5), -1);
            assert_eq!(errno(), libc::EFAULT);
            assert_eq!(oxnet_close(std::ptr::null_mut(), 3), -1);
            assert_eq!(errno(), libc::EFAULT);
            assert_eq!(oxnet_stack_now(std::ptr::null_mut()), 0);
            oxnet_stack_free(std::ptr::null_mut());
        }
    }
}
