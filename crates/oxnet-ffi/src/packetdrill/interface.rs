//! `struct packetdrill_interface`, as packetdrill.h declares it.

use std::ffi::{c_int, c_long, c_uint, c_ulong, c_void};

/// packetdrill's `userdata`: the shim.
pub type Ud = *mut c_void;

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
