//! read, write, and their vector (readv, writev), socket (recv, send,
//! recvfrom, sendto) and message (recvmsg, sendmsg) forms.

use super::interface::Ud;
use super::{guard, shim};
use crate::stack::CallResult;
use std::ffi::{c_int, c_void};

/// Reads into each of `bufs` in turn (one wait at most, for the first).
pub(super) unsafe fn read_iov(ud: Ud, fd: c_int, iov: &[libc::iovec], dontwait: bool) -> CallResult {
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

pub(super) unsafe extern "C" fn pd_read(ud: Ud, fd: c_int, buf: *mut c_void, n: usize) -> isize {
    guard(|| read_iov(ud, fd, &one(buf, n), false)) as isize
}

pub(super) unsafe extern "C" fn pd_readv(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    guard(|| read_iov(ud, fd, iovecs(iov, n)?, false)) as isize
}

pub(super) unsafe extern "C" fn pd_recv(ud: Ud, fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        read_iov(ud, fd, &one(buf, n), dontwait)
    }) as isize
}

pub(super) unsafe extern "C" fn pd_recvfrom(
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

pub(super) unsafe extern "C" fn pd_recvmsg(ud: Ud, fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
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

pub(super) unsafe extern "C" fn pd_write(ud: Ud, fd: c_int, buf: *const c_void, n: usize) -> isize {
    guard(|| write_iov(ud, fd, &one(buf, n), false)) as isize
}

pub(super) unsafe extern "C" fn pd_writev(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    guard(|| write_iov(ud, fd, iovecs(iov, n)?, false)) as isize
}

pub(super) unsafe extern "C" fn pd_send(ud: Ud, fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        write_iov(ud, fd, &one(buf, n), dontwait)
    }) as isize
}

pub(super) unsafe extern "C" fn pd_sendto(
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

pub(super) unsafe extern "C" fn pd_sendmsg(ud: Ud, fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    guard(|| {
        let dontwait = check_flags(flags)?;
        let m = msg.as_ref().ok_or(libc::EFAULT)?;
        let n = c_int::try_from(m.msg_iovlen).map_err(|_| libc::EINVAL)?;
        write_iov(ud, fd, iovecs(m.msg_iov, n)?, dontwait)
    }) as isize
}
