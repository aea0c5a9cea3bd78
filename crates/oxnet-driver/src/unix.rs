//! Unix-socket helpers shared by the control channels of vhost-user and
//! memif: a message with file descriptors passed in SCM_RIGHTS (unix(7),
//! cmsg(3)).

use std::os::fd::RawFd;

/// Descriptors one message may carry (vhost-user's SET_MEM_TABLE carries up
/// to 8 regions; memif one).
pub(crate) const MAX_FDS: usize = 8;

/// sendmsg of `bytes` with `fds` as SCM_RIGHTS, never raising SIGPIPE.
pub(crate) fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // Room for one cmsg with up to MAX_FDS descriptors, u64-aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain old data; fields are set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        if fds.len() > MAX_FDS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} descriptors in one message; at most {MAX_FDS}", fds.len()),
            ));
        }
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        message.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        message.msg_controllen = space;
        // SAFETY: msg_control points at `space` <= 64 writable bytes, so
        // the first header and its data fit.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&message);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), fd_bytes);
        }
    }
    loop {
        // SAFETY: `message` points at live buffers for the whole call.
        let n = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            // A stream socket takes a message this small whole or not at all
            // in practice; a short write would desynchronise the protocol.
            if n as usize != bytes.len() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("short write: {n} of {} bytes", bytes.len()),
                ));
            }
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}
