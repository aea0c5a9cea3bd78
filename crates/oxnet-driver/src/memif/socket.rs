//! The control channel: 128-byte messages over a Unix stream socket, with
//! at most one file descriptor (a region's memfd or a ring's eventfd)
//! passed alongside in SCM_RIGHTS (unix(7), cmsg(3)).

use super::proto::{Msg, MSG_SIZE};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a receive found.
pub enum Received {
    /// A whole message, with the descriptor that came with it.
    Msg(Msg, Option<OwnedFd>),
    /// Nothing yet (non-blocking receive only).
    Nothing,
    /// The peer closed the connection.
    Closed,
}

/// Sends one message with an optional descriptor.
pub fn send(socket: &OwnedFd, msg: &Msg, fd: Option<RawFd>) -> std::io::Result<()> {
    let fds: &[RawFd] = match &fd {
        Some(fd) => std::slice::from_ref(fd),
        None => &[],
    };
    crate::unix::send_with_fds(socket.as_raw_fd(), &msg.encode(), fds)
}

/// Receives one message. With `wait`, blocks up to the socket's receive
/// timeout (see [`set_timeout`]); without, returns `Nothing` at once when
/// no byte is there.
pub fn receive(socket: &OwnedFd, wait: bool) -> std::io::Result<Received> {
    let mut buf = [0u8; MSG_SIZE];
    let mut got = 0usize;
    let mut passed: Option<OwnedFd> = None;
    while got < MSG_SIZE {
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf[got..].as_mut_ptr() as *mut libc::c_void,
            iov_len: MSG_SIZE - got,
        };
        // SAFETY: plain old data, set below.
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        message.msg_controllen = std::mem::size_of_val(&control);
        // Once part of a message is in, wait for the rest (a peer writes
        // a message in one call; the rest is at most a moment away).
        let flags = libc::MSG_CMSG_CLOEXEC | if wait || got > 0 { 0 } else { libc::MSG_DONTWAIT };
        // SAFETY: `message` points at live buffers for the whole call.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, flags) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) if !wait && got == 0 => return Ok(Received::Nothing),
                Some(libc::EAGAIN) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"));
                }
                _ => return Err(e),
            }
        }
        if n == 0 {
            return Ok(Received::Closed);
        }
        got += n as usize;
        // SAFETY: the kernel filled `message.msg_control` with well-formed
        // headers within msg_controllen; we walk them with the libc macros
        // and take ownership of each descriptor exactly once.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&message);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for k in 0..count {
                        let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(k)));
                        // The first is kept; extra ones are closed on drop.
                        if passed.is_none() {
                            passed = Some(fd);
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&message, cmsg);
            }
        }
    }
    match Msg::decode(&buf) {
        Ok(msg) => Ok(Received::Msg(msg, passed)),
        Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
    }
}

/// Sets the receive and send timeouts of a blocking socket.
pub fn set_timeout(socket: &OwnedFd, timeout: Duration) {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    for option in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: a valid timeval of the size given.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
    }
}

/// A `sockaddr_un` for `path`, or an error if it is too long.
fn address(path: &str) -> std::io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("socket path longer than {} bytes", addr.sun_path.len() - 1),
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

/// A new AF_UNIX SOCK_SEQPACKET socket: memif's control channel is a
/// sequenced-packet socket (DPDK memif_socket.c, libmemif), one message
/// per record.
fn seqpacket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects to the memif socket at `path`.
pub fn connect(path: &str) -> std::io::Result<OwnedFd> {
    let (addr, len) = address(path)?;
    let fd = seqpacket()?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
    let r = unsafe { libc::connect(fd.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Listens (non-blocking) at `path`, which must not exist.
pub fn listen(path: &str) -> std::io::Result<OwnedFd> {
    let (addr, len) = address(path)?;
    let fd = seqpacket()?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes; plain syscalls.
    unsafe {
        if libc::bind(fd.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) != 0
            || libc::listen(fd.as_raw_fd(), 8) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    set_nonblocking(&fd, true);
    Ok(fd)
}

/// Accepts one waiting connection (blocking socket), if any.
pub fn accept(listener: &OwnedFd) -> Option<OwnedFd> {
    // SAFETY: plain syscall on our listening socket.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Switches O_NONBLOCK on or off.
pub fn set_nonblocking(socket: &OwnedFd, on: bool) {
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let flags = libc::fcntl(socket.as_raw_fd(), libc::F_GETFL);
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        libc::fcntl(socket.as_raw_fd(), libc::F_SETFL, flags);
    }
}
