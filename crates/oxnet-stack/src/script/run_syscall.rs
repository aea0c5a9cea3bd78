//! The system calls a script makes, on oxnet's sockets: a table of file
//! descriptors (from 3, as a fresh process's) holding a socket not yet
//! listening, a listener, or a connection.
//!
//! | call | what it does |
//! |---|---|
//! | `socket(..., SOCK_STREAM, IPPROTO_TCP)` | the next descriptor |
//! | `setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, ...)` | accepted, no effect (oxnet has no port reuse rule to relax) |
//! | `setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, [v], ...)` | `set_nodelay` |
//! | `setsockopt(fd, SOL_SOCKET, SO_RCVBUF, [bytes], ...)` | before `listen` or `connect`: the receive buffer (the window offered) of the connections made from then on, in bytes as given (Linux doubles the value and offers a part of it) |
//! | `setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, [mss], ...)` | before `connect`, or on a listener (before or after `listen`): the MSS announced and the largest sent are at most `mss` (`set_max_segment`; 0 or 88 to 32767, as Linux); getsockopt on a connection gives the full segment's payload in use |
//! | `setsockopt(fd, SOL_SOCKET, SO_SNDBUF, [bytes], ...)` | `set_send_buffer`: the bytes written and not yet acknowledged that a socket may hold, in bytes as given (Linux doubles the value and counts its overhead in it); 1 to 2^31 - 1; a listener's passes to the connections it accepts |
//! | `setsockopt(fd, SOL_SOCKET, SO_LINGER, {onoff=1, linger=0}, ...)` | close aborts with a RST (`TcpStream::abort`); `onoff=0` undoes it; another time is refused |
//! | `setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, [v], ...)` | `set_keepalive`: on with the three below, or off |
//! | `setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT, [v], ...)` | seconds idle, seconds between probes, probes (Linux's ranges, else `EINVAL`; defaults 7200, 75, 9) |
//! | `setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, [ms], ...)` | `set_user_timeout` (0: off) |
//! | `setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, [n], ...)` | `set_syn_retries` (1 to 255) |
//! | `getsockopt(fd, level, option, [v], ...)` | TCP_NODELAY, SO_KEEPALIVE, the TCP_KEEP* three, TCP_USER_TIMEOUT, TCP_SYNCNT (unset: the stack's limit, 15; Linux's default is 6), SO_SNDBUF (unset: the stack's default, 262144): the value, compared with `v` |
//! | `bind(fd, ..., ...)` | port 8080, packetdrill's default |
//! | `listen(fd, backlog)` | `TcpListener::bind` on the wildcard address of the script's family (backlog 0: every SYN gets a cookie, as Linux's) |
//! | `accept(fd, ..., ...)` | `try_accept` |
//! | `read`, `recv` | `try_read` of up to that many bytes |
//! | `write`, `send` | `try_write` of that many zero bytes |
//! | `shutdown(fd, SHUT_WR or SHUT_RDWR)` | `shutdown_write` |
//! | `close(fd)` | drops the socket (a connection closes, or aborts with SO_LINGER 0; a listener stops) |
//! | `fcntl(fd, F_SETFL, flags)`, `fcntl(fd, F_GETFL)` | `O_NONBLOCK` on or off, or read back |
//! | `getsockopt(fd, SOL_SOCKET, SO_ERROR, [v], ...)` | the connection's pending error (`v` a number or an errno's name) |
//! | `connect(fd, ..., ...)` on a non-blocking socket | `TcpStream::connect` from port 8080 to the script's port; `-1 EINPROGRESS` |
//! | `poll([{fd, events, revents}], n, timeout)` | readiness from the connection's state; each given `revents` compared |
//!
//! Options set on a socket before it connects, or on a listener, apply
//! to its connection (an accepted one inherits the listener's, as on
//! Linux). Anything else (a blocking `connect`, other options) is refused
//! by name. Constants have Linux's values, as the scripts are Linux's.

use super::ast::{Expr, IpVersion};
use crate::tcp::socket::{Stack, TcpListener, TcpStream};
use crate::tcp::tcb::{Keepalive, TcpState};
use crate::wire::{IpAddress, IpEndpoint};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The most bytes one `read` or `write` of a script moves: a bound on
/// what a script can make the runner allocate.
pub const MAX_IO: i64 = 1 << 20;

/// Linux's values of the names scripts use.
const CONSTANTS: &[(&str, i64)] = &[
    ("AF_INET", 2),
    ("AF_INET6", 10),
    ("SOCK_STREAM", 1),
    ("IPPROTO_IP", 0),
    ("IPPROTO_TCP", 6),
    ("SOL_SOCKET", 1),
    ("SO_REUSEADDR", 2),
    ("SO_ERROR", 4),
    ("SO_RCVBUF", SO_RCVBUF),
    ("SO_SNDBUF", SO_SNDBUF),
    ("SO_LINGER", SO_LINGER),
    ("SO_KEEPALIVE", SO_KEEPALIVE),
    ("TCP_NODELAY", TCP_NODELAY),
    ("TCP_MAXSEG", TCP_MAXSEG),
    ("TCP_KEEPIDLE", TCP_KEEPIDLE),
    ("TCP_KEEPINTVL", TCP_KEEPINTVL),
    ("TCP_KEEPCNT", TCP_KEEPCNT),
    ("TCP_SYNCNT", TCP_SYNCNT),
    ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT),
    ("F_GETFL", 3),
    ("F_SETFL", 4),
    ("O_RDONLY", 0),
    ("O_WRONLY", 1),
    ("O_RDWR", 2),
    ("O_NONBLOCK", 0x800),
    ("SHUT_RD", 0),
    ("SHUT_WR", 1),
    ("SHUT_RDWR", 2),
    ("POLLIN", POLLIN),
    ("POLLPRI", 2),
    ("POLLOUT", POLLOUT),
    ("POLLERR", POLLERR),
    ("POLLHUP", POLLHUP),
];

/// Option names (Linux's `socket.h` and `tcp.h`), at levels SOL_SOCKET (1)
/// and IPPROTO_TCP (6).
const SO_RCVBUF: i64 = 8;
const SO_SNDBUF: i64 = 7;
const SO_LINGER: i64 = 13;
const SO_KEEPALIVE: i64 = 9;
const TCP_NODELAY: i64 = 1;
const TCP_MAXSEG: i64 = 2;
const TCP_KEEPIDLE: i64 = 4;
const TCP_KEEPINTVL: i64 = 5;
const TCP_KEEPCNT: i64 = 6;
const TCP_SYNCNT: i64 = 7;
const TCP_USER_TIMEOUT: i64 = 18;

/// poll's event bits (Linux's `poll.h`).
const POLLIN: i64 = 0x1;
const POLLOUT: i64 = 0x4;
const POLLERR: i64 = 0x8;
const POLLHUP: i64 = 0x10;

/// Linux's errno names, for the values the sockets return.
const ERRNO_NAMES: &[(i32, &str)] = &[
    (libc::EAGAIN, "EAGAIN"),
    (libc::EBADF, "EBADF"),
    (libc::EINVAL, "EINVAL"),
    (libc::EPIPE, "EPIPE"),
    (libc::ENOTCONN, "ENOTCONN"),
    (libc::ECONNRESET, "ECONNRESET"),
    (libc::ECONNREFUSED, "ECONNREFUSED"),
    (libc::ETIMEDOUT, "ETIMEDOUT"),
    (libc::EADDRINUSE, "EADDRINUSE"),
    (libc::EINPROGRESS, "EINPROGRESS"),
    (libc::EISCONN, "EISCONN"),
    (libc::EAFNOSUPPORT, "EAFNOSUPPORT"),
    (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
    (libc::EOPNOTSUPP, "EOPNOTSUPP"),
    (libc::ENOTSOCK, "ENOTSOCK"),
];

/// An errno's name (`EAGAIN`), or its number.
pub fn errno_name(errno: i32) -> String {
    ERRNO_NAMES
        .iter()
        .find(|(n, _)| *n == errno)
        .map_or_else(|| errno.to_string(), |(_, name)| name.to_string())
}

/// Whether the script's errno name means `errno` (`EWOULDBLOCK` is
/// Linux's other name for `EAGAIN`).
pub fn errno_matches(name: &str, errno: i32) -> bool {
    errno_name(errno) == name || (name == "EWOULDBLOCK" && errno == libc::EAGAIN)
}

/// An expression's integer value: a number, a constant's or an errno's
/// name, an `a|b`, or a one-element list (an `int` passed by pointer,
/// `[1]`).
pub fn int_value(e: &Expr) -> Result<i64, String> {
    match e {
        Expr::Int(n) => Ok(*n),
        Expr::Symbol(s) => CONSTANTS
            .iter()
            .find(|(n, _)| n == s)
            .map(|(_, v)| *v)
            .or_else(|| ERRNO_NAMES.iter().find(|(_, n)| n == s).map(|(v, _)| i64::from(*v)))
            .ok_or_else(|| format!("unknown name `{s}`")),
        Expr::BitOr(parts) => parts.iter().try_fold(0, |acc, p| Ok(acc | int_value(p)?)),
        Expr::List(items) if items.len() == 1 => int_value(&items[0]),
        other => Err(format!("`{other}` is not an integer")),
    }
}

/// What a call did: returned (a value, or -1 and an errno), or would
/// have blocked (a blocking descriptor with nothing to give yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The call returned: a value, or an errno (returned as -1).
    Done(Result<i64, i32>),
    /// A blocking call that would wait.
    WouldBlock,
}

/// What a descriptor holds.
enum Socket {
    /// Made by `socket`, perhaps bound, not listening yet.
    Fresh {
        bound: bool,
    },
    Listener(TcpListener),
    Stream(TcpStream),
}

/// The socket options a descriptor was given (Linux's defaults until
/// set), kept so that a socket not connected yet passes them on and an
/// option set alone (TCP_KEEPIDLE) joins the others.
#[derive(Debug, Clone, Copy)]
struct Options {
    nodelay: bool,
    keepalive: bool,
    /// TCP_KEEPIDLE, TCP_KEEPINTVL in seconds; TCP_KEEPCNT.
    keep_idle_s: i64,
    keep_intvl_s: i64,
    keep_cnt: i64,
    /// TCP_USER_TIMEOUT in milliseconds (0: off).
    user_timeout_ms: i64,
    /// TCP_SYNCNT (None: not set).
    syn_retries: Option<i64>,
    /// SO_LINGER on with a time of 0: close aborts with a RST.
    linger_abort: bool,
    /// SO_SNDBUF in bytes (None: not set, the stack's default).
    send_buffer: Option<i64>,
    /// TCP_MAXSEG (None: not set, or set to 0).
    max_segment: Option<i64>,
}

impl Default for Options {
    fn default() -> Options {
        let ka = Keepalive::default();
        Options {
            nodelay: false,
            keepalive: false,
            keep_idle_s: (ka.idle_us / 1_000_000) as i64,
            keep_intvl_s: (ka.interval_us / 1_000_000) as i64,
            keep_cnt: i64::from(ka.count),
            user_timeout_ms: 0,
            syn_retries: None,
            linger_abort: false,
            send_buffer: None,
            max_segment: None,
        }
    }
}

impl Options {
    /// Sets `option` at `level` to `v`: Ok(false) for a value Linux
    /// refuses (EINVAL), Err for an option the runner does not know.
    fn set(&mut self, level: i64, option: i64, v: i64) -> Result<bool, String> {
        let in_range = |lo: i64, hi: i64| (lo..=hi).contains(&v);
        // Linux's bounds (tcp.h: MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL,
        // MAX_TCP_KEEPCNT, MAX_TCP_SYNCNT).
        let ok = match (level, option) {
            (1, SO_KEEPALIVE) => {
                self.keepalive = v != 0;
                true
            }
            (6, TCP_NODELAY) => {
                self.nodelay = v != 0;
                true
            }
            (6, TCP_KEEPIDLE) => {
                in_range(1, 32767) && {
                    self.keep_idle_s = v;
                    true
                }
            }
            (6, TCP_KEEPINTVL) => {
                in_range(1, 32767) && {
                    self.keep_intvl_s = v;
                    true
                }
            }
            (6, TCP_KEEPCNT) => {
                in_range(1, 127) && {
                    self.keep_cnt = v;
                    true
                }
            }
            (6, TCP_USER_TIMEOUT) => {
                in_range(0, i64::from(i32::MAX)) && {
                    self.user_timeout_ms = v;
                    true
                }
            }
            (6, TCP_SYNCNT) => {
                in_range(1, 255) && {
                    self.syn_retries = Some(v);
                    true
                }
            }
            // Linux: 0 (the interface's MSS again) or 88 (TCP_MIN_MSS)
            // to 32767 (MAX_TCP_WINDOW).
            (6, TCP_MAXSEG) => {
                (v == 0 || in_range(88, 32767)) && {
                    self.max_segment = (v != 0).then_some(v);
                    true
                }
            }
            (1, SO_SNDBUF) => {
                in_range(1, i64::from(i32::MAX)) && {
                    self.send_buffer = Some(v);
                    true
                }
            }
            _ => return Err(format!("setsockopt level {level} option {option}: unsupported")),
        };
        Ok(ok)
    }

    /// The value of `option` at `level`, as getsockopt gives it.
    fn get(&self, level: i64, option: i64) -> Option<i64> {
        Some(match (level, option) {
            (1, SO_KEEPALIVE) => i64::from(self.keepalive),
            (6, TCP_NODELAY) => i64::from(self.nodelay),
            (6, TCP_KEEPIDLE) => self.keep_idle_s,
            (6, TCP_KEEPINTVL) => self.keep_intvl_s,
            (6, TCP_KEEPCNT) => self.keep_cnt,
            (6, TCP_USER_TIMEOUT) => self.user_timeout_ms,
            // Unset: the stack's limit for every segment.
            (6, TCP_SYNCNT) => self
                .syn_retries
                .unwrap_or(i64::from(crate::tcp::elements::send::MAX_RETRANSMITS)),
            // Before a connection: what was set, else Linux's default
            // (TCP_MSS_DEFAULT, 536); a connection's is read from it.
            (6, TCP_MAXSEG) => self.max_segment.unwrap_or(536),
            (1, SO_SNDBUF) => self
                .send_buffer
                .unwrap_or(i64::from(crate::tcp::tcb::TcbSettings::default().send_buffer)),
            _ => return None,
        })
    }

    /// Gives a connection these options.
    fn apply(&self, s: &TcpStream) {
        for (level, option) in [
            (6, TCP_NODELAY),
            (1, SO_KEEPALIVE),
            (6, TCP_USER_TIMEOUT),
            (6, TCP_SYNCNT),
            (1, SO_SNDBUF),
            (6, TCP_MAXSEG),
        ] {
            self.apply_one(level, option, s);
        }
    }

    /// Gives a connection the option just set (the keepalive settings
    /// all at once, as the socket takes them).
    fn apply_one(&self, level: i64, option: i64, s: &TcpStream) {
        match (level, option) {
            (6, TCP_NODELAY) => s.set_nodelay(self.nodelay),
            (1, SO_KEEPALIVE) | (6, TCP_KEEPIDLE | TCP_KEEPINTVL | TCP_KEEPCNT) => {
                s.set_keepalive(self.keepalive.then_some(Keepalive {
                    idle_us: self.keep_idle_s as u64 * 1_000_000,
                    interval_us: self.keep_intvl_s as u64 * 1_000_000,
                    count: self.keep_cnt as u32,
                }))
            }
            (6, TCP_USER_TIMEOUT) => {
                s.set_user_timeout((self.user_timeout_ms > 0).then_some(self.user_timeout_ms as u64 * 1000))
            }
            (6, TCP_SYNCNT) => s.set_syn_retries(self.syn_retries.map(|n| n as u32)),
            (1, SO_SNDBUF) => {
                if let Some(bytes) = self.send_buffer {
                    s.set_send_buffer(bytes as usize);
                }
            }
            (6, TCP_MAXSEG) => s.set_max_segment(self.max_segment.map(|m| m as u16)),
            _ => {}
        }
    }
}

struct Fd {
    socket: Socket,
    nonblocking: bool,
    options: Options,
}

/// A struct's field by name, or by position when unnamed (`{fd=3,
/// events=POLLIN}` or `{3, POLLIN}`).
fn field<'a>(fields: &'a [super::ast::Field], name: &str, at: usize) -> Option<&'a Expr> {
    fields
        .iter()
        .find(|f| f.name.as_deref() == Some(name))
        .or_else(|| fields.get(at).filter(|f| f.name.is_none()))
        .map(|f| &f.value)
}

/// The script's file descriptors.
pub struct Sockets {
    fds: BTreeMap<i64, Fd>,
    stack: Stack,
    ip: IpVersion,
}

impl Sockets {
    /// No descriptor yet, on the router's TCP state `stack`.
    pub fn new(stack: Stack, ip: IpVersion) -> Sockets {
        Sockets {
            fds: BTreeMap::new(),
            stack,
            ip,
        }
    }

    /// The lowest free descriptor from 3, as Linux gives them.
    fn next_fd(&self) -> i64 {
        (3..).find(|fd| !self.fds.contains_key(fd)).unwrap_or(3)
    }

    fn add(&mut self, socket: Socket, options: Options) -> i64 {
        let fd = self.next_fd();
        self.fds.insert(
            fd,
            Fd {
                socket,
                nonblocking: false,
                options,
            },
        );
        fd
    }

    /// Makes the call `name(args)`; Err says why the runner cannot (a call
    /// or an argument it does not support, or a misused descriptor that
    /// the script cannot mean).
    pub fn call(&mut self, name: &str, args: &[Expr]) -> Result<Attempt, String> {
        let arg = |i: usize| -> Result<i64, String> {
            int_value(args.get(i).ok_or_else(|| format!("{name} needs argument {}", i + 1))?)
                .map_err(|e| format!("{name} argument {}: {e}", i + 1))
        };
        let done = |r: Result<i64, i32>| Ok(Attempt::Done(r));
        match name {
            "socket" => {
                let fd = self.add(Socket::Fresh { bound: false }, Options::default());
                done(Ok(fd))
            }
            "setsockopt" => {
                let (fd, level, option) = (arg(0)?, arg(1)?, arg(2)?);
                let Some(entry) = self.fds.get_mut(&fd) else {
                    return done(Err(libc::EBADF));
                };
                if (level, option) == (1, 2) {
                    return done(Ok(0));
                }
                if (level, option) == (1, SO_LINGER) {
                    let Some(Expr::Struct(fields)) = args.get(3) else {
                        return Err("SO_LINGER takes {onoff=N, linger=S}".to_string());
                    };
                    let on = int_value(field(fields, "onoff", 0).ok_or("SO_LINGER without onoff")?)? != 0;
                    let secs = int_value(field(fields, "linger", 1).ok_or("SO_LINGER without linger")?)?;
                    if on && secs != 0 {
                        // close would block until the data is acknowledged.
                        return Err("SO_LINGER with a time other than 0: unsupported".to_string());
                    }
                    entry.options.linger_abort = on;
                    return done(Ok(0));
                }
                if (level, option) == (1, SO_RCVBUF) {
                    let bytes = arg(3)?;
                    if matches!(entry.socket, Socket::Stream(_)) {
                        return Err("SO_RCVBUF on a connection: unsupported (set it before)".to_string());
                    }
                    let Ok(bytes) = u32::try_from(bytes) else {
                        return done(Err(libc::EINVAL));
                    };
                    // The runner's stack serves the script's connections
                    // only: its buffer is this socket's.
                    self.stack.borrow_mut().settings.tcb.recv_buffer = bytes.max(1);
                    return done(Ok(0));
                }
                if !entry.options.set(level, option, arg(3)?)? {
                    return done(Err(libc::EINVAL));
                }
                match &entry.socket {
                    Socket::Stream(s) => entry.options.apply_one(level, option, s),
                    Socket::Listener(l) if (level, option) == (6, TCP_MAXSEG) => {
                        l.set_max_segment(entry.options.max_segment.map(|m| m as u16))
                    }
                    _ => {}
                }
                done(Ok(0))
            }
            "getsockopt" => {
                let (fd, level, option) = (arg(0)?, arg(1)?, arg(2)?);
                let Some(entry) = self.fds.get(&fd) else {
                    return done(Err(libc::EBADF));
                };
                if (level, option) != (1, 4) {
                    let value = match &entry.socket {
                        Socket::Stream(s) if (level, option) == (6, TCP_MAXSEG) => s.max_segment().map(i64::from),
                        _ => entry.options.get(level, option),
                    };
                    let Some(value) = value else {
                        return Err(format!("getsockopt level {level} option {option}: unsupported"));
                    };
                    let want = arg(3)?;
                    if want != value {
                        return Err(format!(
                            "getsockopt level {level} option {option} gives {value} instead of {want}"
                        ));
                    }
                    return done(Ok(0));
                }
                let error = match &entry.socket {
                    Socket::Stream(s) => self.pending_error(s),
                    _ => 0,
                };
                let want = arg(3)?;
                if want != i64::from(error) {
                    return Err(format!(
                        "getsockopt SO_ERROR gives {} instead of {want}",
                        if error == 0 { "0".to_string() } else { errno_name(error) }
                    ));
                }
                done(Ok(0))
            }
            "bind" => {
                let fd = arg(0)?;
                match self.fds.get_mut(&fd).map(|e| &mut e.socket) {
                    Some(Socket::Fresh { bound, .. }) if !*bound => {
                        *bound = true;
                        done(Ok(0))
                    }
                    Some(_) => done(Err(libc::EINVAL)),
                    None => done(Err(libc::EBADF)),
                }
            }
            "listen" => {
                let (fd, backlog) = (arg(0)?, arg(1)?);
                let Some(entry) = self.fds.get_mut(&fd) else {
                    return done(Err(libc::EBADF));
                };
                let Socket::Fresh { .. } = entry.socket else {
                    return done(Err(libc::EINVAL));
                };
                let any: IpAddress = match self.ip {
                    IpVersion::V4 => Ipv4Addr::UNSPECIFIED.into(),
                    IpVersion::V6 => Ipv6Addr::UNSPECIFIED.into(),
                };
                let local = IpEndpoint::new(any, super::run_segment::LOCAL_PORT);
                match TcpListener::bind(&self.stack, local, usize::try_from(backlog).unwrap_or(0)) {
                    Ok(listener) => {
                        listener.set_max_segment(entry.options.max_segment.map(|m| m as u16));
                        entry.socket = Socket::Listener(listener);
                        done(Ok(0))
                    }
                    Err(e) => done(Err(e)),
                }
            }
            "accept" => {
                let fd = arg(0)?;
                let Some(entry) = self.fds.get(&fd) else {
                    return done(Err(libc::EBADF));
                };
                let Socket::Listener(listener) = &entry.socket else {
                    return done(Err(libc::EINVAL));
                };
                match listener.try_accept() {
                    Ok(stream) => {
                        let options = entry.options;
                        options.apply(&stream);
                        let fd = self.add(Socket::Stream(stream), options);
                        done(Ok(fd))
                    }
                    Err(libc::EAGAIN) if !entry.nonblocking => Ok(Attempt::WouldBlock),
                    Err(e) => done(Err(e)),
                }
            }
            "read" | "recv" => {
                let (fd, len) = (arg(0)?, arg(2)?);
                if !(0..=MAX_IO).contains(&len) {
                    return Err(format!("{name} of {len} bytes: the runner reads 0 to {MAX_IO} at once"));
                }
                let (stream, nonblocking) = match self.stream(fd) {
                    Ok(s) => s,
                    Err(e) => return done(Err(e)),
                };
                let mut buf = vec![0; len as usize];
                match stream.try_read(&mut buf) {
                    Ok(n) => done(Ok(n as i64)),
                    Err(libc::EAGAIN) if !nonblocking => Ok(Attempt::WouldBlock),
                    Err(e) => done(Err(e)),
                }
            }
            "write" | "send" => {
                let (fd, len) = (arg(0)?, arg(2)?);
                if !(0..=MAX_IO).contains(&len) {
                    return Err(format!(
                        "{name} of {len} bytes: the runner writes 0 to {MAX_IO} at once"
                    ));
                }
                let (stream, nonblocking) = match self.stream(fd) {
                    Ok(s) => s,
                    Err(e) => return done(Err(e)),
                };
                match stream.try_write(&vec![0; len as usize]) {
                    Ok(n) => done(Ok(n as i64)),
                    Err(libc::EAGAIN) if !nonblocking => Ok(Attempt::WouldBlock),
                    Err(e) => done(Err(e)),
                }
            }
            "shutdown" => {
                let (fd, how) = (arg(0)?, arg(1)?);
                if how == 0 {
                    return Err("shutdown(SHUT_RD): unsupported".to_string());
                }
                done(
                    self.stream(fd)
                        .and_then(|(stream, _)| stream.shutdown_write().map(|()| 0)),
                )
            }
            "close" => {
                let fd = arg(0)?;
                let Some(entry) = self.fds.remove(&fd) else {
                    return done(Err(libc::EBADF));
                };
                if let (Socket::Stream(s), true) = (&entry.socket, entry.options.linger_abort) {
                    s.abort();
                }
                done(Ok(0))
            }
            "fcntl" => {
                let (fd, command) = (arg(0)?, arg(1)?);
                let Some(entry) = self.fds.get_mut(&fd) else {
                    return done(Err(libc::EBADF));
                };
                match command {
                    3 => done(Ok(2 | if entry.nonblocking { 0x800 } else { 0 })),
                    4 => {
                        entry.nonblocking = arg(2)? & 0x800 != 0;
                        done(Ok(0))
                    }
                    _ => Err(format!("fcntl command {command}: unsupported")),
                }
            }
            "connect" => {
                let fd = arg(0)?;
                let Some(entry) = self.fds.get_mut(&fd) else {
                    return done(Err(libc::EBADF));
                };
                let Socket::Fresh { .. } = entry.socket else {
                    return done(Err(libc::EISCONN));
                };
                if !entry.nonblocking {
                    // The call would return only after the handshake, which
                    // later events of the script play: the runner plays
                    // one event at a time.
                    return Err("a blocking connect is not supported: make the socket non-blocking \
                         (fcntl O_NONBLOCK) and expect -1 EINPROGRESS"
                        .to_string());
                }
                let (local, remote) = super::run_segment::addresses(self.ip);
                // Port 8080 on our side: the script's segments carry the
                // same ports whichever end opened.
                let local = IpEndpoint::new(local, super::run_segment::LOCAL_PORT);
                let remote = IpEndpoint::new(remote, super::run_segment::REMOTE_PORT);
                match TcpStream::connect(&self.stack, local, remote) {
                    Ok(stream) => {
                        entry.options.apply(&stream);
                        entry.socket = Socket::Stream(stream);
                        done(Err(libc::EINPROGRESS))
                    }
                    Err(e) => done(Err(e)),
                }
            }
            "poll" => self.poll(args),
            other => Err(format!("{other}: unsupported system call")),
        }
    }

    /// `poll([{fd=F, events=E, revents=R}, ...], n, timeout)`: the ready
    /// descriptors' count; each `revents` the script gives is compared.
    /// Nothing ready and a timeout other than 0: it would block.
    fn poll(&self, args: &[Expr]) -> Result<Attempt, String> {
        let (Some(Expr::List(entries)), Some(timeout)) = (args.first(), args.get(2)) else {
            return Err("poll needs a list of {fd, events, revents}, a count and a timeout".to_string());
        };
        let mut ready = 0;
        let mut mismatches = Vec::new();
        for entry in entries {
            let Expr::Struct(fields) = entry else {
                return Err(format!("poll entry `{entry}` is not a struct"));
            };
            let fd = int_value(field(fields, "fd", 0).ok_or("poll entry without fd")?)?;
            let events = int_value(field(fields, "events", 1).ok_or("poll entry without events")?)?;
            let revents = self.readiness(fd) & (events | POLLERR | POLLHUP);
            ready += i64::from(revents != 0);
            if let Some(want) = field(fields, "revents", 2).filter(|e| **e != Expr::Ellipsis) {
                let want = int_value(want)?;
                if want != revents {
                    mismatches.push(format!("fd {fd} revents {revents:#x} instead of {want:#x}"));
                }
            }
        }
        if ready == 0 && int_value(timeout)? != 0 {
            return Ok(Attempt::WouldBlock);
        }
        if !mismatches.is_empty() {
            return Err(format!("poll: {}", mismatches.join(", ")));
        }
        Ok(Attempt::Done(Ok(ready)))
    }

    /// What poll reports for `fd`, before masking with its events.
    fn readiness(&self, fd: i64) -> i64 {
        let info = self.stack.borrow();
        match self.fds.get(&fd).map(|e| &e.socket) {
            None => 0x20, // POLLNVAL
            Some(Socket::Fresh { .. }) => POLLOUT | POLLHUP,
            Some(Socket::Listener(listener)) => {
                let queued = info
                    .listeners
                    .get(&listener.local())
                    .is_some_and(|l| !l.accept_queue.is_empty());
                if queued {
                    POLLIN
                } else {
                    0
                }
            }
            Some(Socket::Stream(s)) => {
                // By its TCB, not by the flow table: a connection that
                // ended is kept, CLOSED, for its socket, without a flow.
                let Some(tcb) = info.tcbs.get(s.tcb_ref()) else {
                    return POLLIN | POLLHUP;
                };
                let mut bits = 0;
                if tcb.recv_queued > 0 || tcb.fin_received || tcb.error.is_some() {
                    bits |= POLLIN;
                }
                let open = matches!(tcb.state, TcpState::Established | TcpState::CloseWait);
                if (open && !tcb.fin_queued && tcb.send_buffer.len() < tcb.send_buffer_limit) || tcb.error.is_some() {
                    bits |= POLLOUT;
                }
                if tcb.error.is_some() {
                    bits |= POLLERR;
                }
                if tcb.state == TcpState::Closed {
                    bits |= POLLHUP;
                }
                bits
            }
        }
    }

    /// The connection on `fd`, and whether it is non-blocking; EBADF if
    /// `fd` is not open, ENOTCONN if it is not a connection (Linux's
    /// errors for a read or write there).
    fn stream(&self, fd: i64) -> Result<(&TcpStream, bool), i32> {
        match self.fds.get(&fd) {
            Some(Fd {
                socket: Socket::Stream(s),
                nonblocking,
                ..
            }) => Ok((s, *nonblocking)),
            Some(_) => Err(libc::ENOTCONN),
            None => Err(libc::EBADF),
        }
    }

    /// SO_ERROR: the error the connection ended with, 0 if none.
    fn pending_error(&self, s: &TcpStream) -> i32 {
        let info = self.stack.borrow();
        info.tcbs.get(s.tcb_ref()).and_then(|t| t.error).unwrap_or(0)
    }
}
