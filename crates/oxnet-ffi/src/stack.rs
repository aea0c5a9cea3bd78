//! The stack behind a C handle: the router ([`Net`]) and a table of
//! descriptors holding sockets and epoll instances, with POSIX-shaped
//! calls in safe Rust (errors are errno values). Every call runs the
//! router at the current time afterwards, so what it asked of the stack
//! (a SYN, data, a window update) is in the sent queue when it returns.
//!
//! Nothing here waits: a call that would block returns EAGAIN, blocking
//! descriptor or not (`connect` returns EINPROGRESS, then EALREADY until
//! the handshake ends). The caller drives time (`advance`).

use crate::net::Net;
use oxnet_stack::tcp::epoll::{readiness, Epoll, EpollOp, Pollable};
use oxnet_stack::tcp::socket::{TcpListener, TcpStream};
use oxnet_stack::tcp::tcb::{Keepalive, TcpState};
use oxnet_stack::wire::{IpAddress, IpEndpoint};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The lowest descriptor given out (0-2 look like stdio to C code).
const FIRST_FD: i32 = 3;
/// The most descriptors one stack holds.
const MAX_FDS: usize = 65_536;

/// Linux's keepalive defaults (tcp(7)): 7200 s idle, 75 s apart, 9 probes.
const DEFAULT_KEEPALIVE: Keepalive = Keepalive {
    idle_us: 7_200_000_000,
    interval_us: 75_000_000,
    count: 9,
};

/// Socket options kept for a socket (applied to the connection once it
/// exists: a listener passes them to the connections it accepts).
#[derive(Debug, Clone, Copy)]
struct Options {
    reuseaddr: bool,
    nodelay: bool,
    keepalive_on: bool,
    keepalive: Keepalive,
    /// TCP_USER_TIMEOUT in milliseconds (0: off).
    user_timeout_ms: u32,
    /// SO_SNDBUF in bytes (None: the stack's default).
    send_buffer: Option<u32>,
    /// TCP_MAXSEG (None: not set, or set to 0).
    max_segment: Option<u16>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            reuseaddr: false,
            nodelay: false,
            keepalive_on: false,
            keepalive: DEFAULT_KEEPALIVE,
            user_timeout_ms: 0,
            send_buffer: None,
            max_segment: None,
        }
    }
}

impl Options {
    fn apply(&self, s: &TcpStream) {
        s.set_nodelay(self.nodelay);
        s.set_keepalive(self.keepalive_on.then_some(self.keepalive));
        s.set_user_timeout((self.user_timeout_ms > 0).then(|| u64::from(self.user_timeout_ms) * 1000));
        if let Some(bytes) = self.send_buffer {
            s.set_send_buffer(bytes as usize);
        }
        s.set_max_segment(self.max_segment);
    }
}

/// What a descriptor holds.
enum Object {
    /// Made by `socket`: its family (IPv6 or not) and where it is bound.
    Fresh {
        v6: bool,
        bound: Option<IpEndpoint>,
    },
    Listener(TcpListener),
    Stream(TcpStream),
    Epoll(Epoll),
}

struct Fd {
    object: Object,
    options: Options,
    nonblocking: bool,
    /// shutdown(SHUT_RD or SHUT_RDWR) was called: a read that would
    /// wait returns 0, end of file, instead.
    read_shut: bool,
}

/// A stack and its descriptors.
pub struct FfiStack {
    /// The router.
    pub net: Net,
    fds: BTreeMap<i32, Fd>,
    local_v4: Option<Ipv4Addr>,
    local_v6: Option<Ipv6Addr>,
}

/// A call's result: a value, or an errno.
pub type CallResult = Result<i64, i32>;

impl FfiStack {
    /// A stack whose own addresses (the source of a `connect` from an
    /// unbound socket) are `local_v4` and `local_v6`.
    pub fn new(local_v4: Option<Ipv4Addr>, local_v6: Option<Ipv6Addr>) -> Result<FfiStack, String> {
        Ok(FfiStack {
            net: Net::new()?,
            fds: BTreeMap::new(),
            local_v4,
            local_v6,
        })
    }

    fn add(&mut self, object: Object, options: Options, nonblocking: bool) -> CallResult {
        if self.fds.len() >= MAX_FDS {
            return Err(libc::EMFILE);
        }
        let fd = (FIRST_FD..).find(|fd| !self.fds.contains_key(fd)).ok_or(libc::EMFILE)?;
        self.fds.insert(
            fd,
            Fd {
                object,
                options,
                nonblocking,
                read_shut: false,
            },
        );
        Ok(i64::from(fd))
    }

    fn fd(&mut self, fd: i32) -> Result<&mut Fd, i32> {
        self.fds.get_mut(&fd).ok_or(libc::EBADF)
    }

    fn stream(&mut self, fd: i32) -> Result<&TcpStream, i32> {
        match &self.fd(fd)?.object {
            Object::Stream(s) => Ok(s),
            Object::Epoll(_) => Err(libc::EINVAL),
            _ => Err(libc::ENOTCONN),
        }
    }

    /// Runs the router after a call; a stuck stack turns the call's
    /// result into EIO.
    fn settled(&mut self, r: CallResult) -> CallResult {
        self.net.settle()?;
        r
    }

    /// Whether `fd` is non-blocking (EBADF if no such descriptor).
    pub fn is_nonblocking(&self, fd: i32) -> Result<bool, i32> {
        self.fds.get(&fd).map(|f| f.nonblocking).ok_or(libc::EBADF)
    }

    /// socket(2): AF_INET or AF_INET6, SOCK_STREAM (SOCK_NONBLOCK and
    /// SOCK_CLOEXEC accepted), protocol 0 or IPPROTO_TCP.
    pub fn socket(&mut self, domain: i32, ty: i32, protocol: i32) -> CallResult {
        let v6 = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return Err(libc::EAFNOSUPPORT),
        };
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        if ty & !flags != libc::SOCK_STREAM {
            return Err(libc::ESOCKTNOSUPPORT);
        }
        if protocol != 0 && protocol != libc::IPPROTO_TCP {
            return Err(libc::EPROTONOSUPPORT);
        }
        let nonblocking = ty & libc::SOCK_NONBLOCK != 0;
        self.add(Object::Fresh { v6, bound: None }, Options::default(), nonblocking)
    }

    /// bind(2): remembers the endpoint (the family must be the socket's).
    pub fn bind(&mut self, fd: i32, local: IpEndpoint) -> CallResult {
        match &mut self.fd(fd)?.object {
            Object::Fresh {
                v6,
                bound: bound @ None,
            } => {
                if local.addr.is_ipv4() == *v6 {
                    return Err(libc::EAFNOSUPPORT);
                }
                *bound = Some(local);
                Ok(0)
            }
            Object::Epoll(_) => Err(libc::ENOTSOCK),
            _ => Err(libc::EINVAL),
        }
    }

    /// listen(2): a listener on the bound endpoint (unbound: port 0 is
    /// refused with EINVAL, oxnet picks no port for a listener).
    pub fn listen(&mut self, fd: i32, backlog: i32) -> CallResult {
        let net_stack = self.net.stack.clone();
        let entry = self.fd(fd)?;
        let local = match &entry.object {
            Object::Fresh { bound: Some(l), .. } => *l,
            Object::Fresh { bound: None, .. } => return Err(libc::EINVAL),
            Object::Listener(_) => return Ok(0),
            Object::Epoll(_) => return Err(libc::ENOTSOCK),
            Object::Stream(_) => return Err(libc::EINVAL),
        };
        // Linux raises a backlog of 0 or less to 1 (and caps it).
        let backlog = usize::try_from(backlog).unwrap_or(0).clamp(1, 4096);
        let l = TcpListener::bind(&net_stack, local, backlog)?;
        l.set_max_segment(entry.options.max_segment);
        entry.object = Object::Listener(l);
        let r = Ok(0);
        self.settled(r)
    }

    /// accept(2): the next connection and its peer, or EAGAIN.
    pub fn accept(&mut self, fd: i32) -> Result<(i64, IpEndpoint), i32> {
        let entry = self.fd(fd)?;
        let options = entry.options;
        let Object::Listener(l) = &entry.object else {
            return Err(libc::EINVAL);
        };
        let s = l.try_accept()?;
        options.apply(&s);
        let peer = s.key().map(|k| k.remote).ok_or(libc::ECONNABORTED)?;
        let newfd = self.add(Object::Stream(s), options, false)?;
        self.settled(Ok(newfd)).map(|fd| (fd, peer))
    }

    /// connect(2): sends the SYN and returns EINPROGRESS; called again:
    /// EALREADY during the handshake, EISCONN once established, or the
    /// error the handshake ended with (ECONNREFUSED, ETIMEDOUT).
    pub fn connect(&mut self, fd: i32, remote: IpEndpoint) -> CallResult {
        let (local_v4, local_v6) = (self.local_v4, self.local_v6);
        let net_stack = self.net.stack.clone();
        let entry = self.fd(fd)?;
        match &entry.object {
            Object::Fresh { v6, bound } => {
                if remote.addr.is_ipv4() == *v6 {
                    return Err(libc::EAFNOSUPPORT);
                }
                let mut local = bound.unwrap_or_else(|| {
                    let any = if *v6 {
                        IpAddress::from(local_v6.unwrap_or(Ipv6Addr::UNSPECIFIED))
                    } else {
                        IpAddress::from(local_v4.unwrap_or(Ipv4Addr::UNSPECIFIED))
                    };
                    IpEndpoint::new(any, 0)
                });
                if local.addr.is_unspecified() {
                    local.addr = match (local.addr, local_v4, local_v6) {
                        (IpAddress::V4(_), Some(a), _) => a.into(),
                        (IpAddress::V6(_), _, Some(a)) => a.into(),
                        _ => return Err(libc::EADDRNOTAVAIL),
                    };
                }
                let s = TcpStream::connect(&net_stack, local, remote)?;
                entry.options.apply(&s);
                entry.object = Object::Stream(s);
                self.settled(Err(libc::EINPROGRESS))
            }
            Object::Stream(s) => {
                if let Some(e) = s.error() {
                    return Err(e);
                }
                match s.state() {
                    TcpState::SynSent | TcpState::SynReceived => Err(libc::EALREADY),
                    TcpState::Closed => Err(libc::ECONNREFUSED),
                    _ => Err(libc::EISCONN),
                }
            }
            Object::Listener(_) => Err(libc::EISCONN),
            Object::Epoll(_) => Err(libc::ENOTSOCK),
        }
    }

    /// read(2): what has arrived, 0 at the end, EAGAIN if nothing yet.
    /// After shutdown(SHUT_RD) what is queued is still read, then 0
    /// (POSIX shutdown(): "further receives shall be disallowed"; Linux
    /// returns 0 rather than EAGAIN).
    pub fn read(&mut self, fd: i32, buf: &mut [u8]) -> CallResult {
        let read_shut = self.fd(fd)?.read_shut;
        let r = match self.stream(fd)?.try_read(buf) {
            Err(libc::EAGAIN) if read_shut => Ok(0),
            r => r.map(|n| n as i64),
        };
        self.settled(r)
    }

    /// write(2): what the send buffer takes, EAGAIN if it is full.
    pub fn write(&mut self, fd: i32, data: &[u8]) -> CallResult {
        let r = self.stream(fd)?.try_write(data).map(|n| n as i64);
        self.settled(r)
    }

    /// shutdown(2): SHUT_WR and SHUT_RDWR send a FIN after the data
    /// queued; SHUT_RD and SHUT_RDWR make a read that would wait return
    /// 0 (the stack keeps taking what arrives; nothing goes on the wire).
    pub fn shutdown(&mut self, fd: i32, how: i32) -> CallResult {
        let s = self.stream(fd)?;
        let r = match how {
            libc::SHUT_RD => Ok(0),
            libc::SHUT_WR | libc::SHUT_RDWR => s.shutdown_write().map(|()| 0),
            _ => Err(libc::EINVAL),
        };
        if r.is_ok() && how != libc::SHUT_WR {
            self.fd(fd)?.read_shut = true;
        }
        self.settled(r)
    }

    /// close(2): drops what the descriptor holds (a connection closes, a
    /// listener stops) and takes it out of every epoll.
    pub fn close(&mut self, fd: i32) -> CallResult {
        let entry = self.fds.remove(&fd).ok_or(libc::EBADF)?;
        let source = match &entry.object {
            Object::Stream(s) => Some(s.epoll_source().1),
            Object::Listener(l) => Some(l.epoll_source().1),
            _ => None,
        };
        if let Some(source) = source {
            for f in self.fds.values_mut() {
                if let Object::Epoll(ep) = &mut f.object {
                    let _ = ep.forget(source);
                }
            }
        }
        drop(entry);
        self.settled(Ok(0))
    }

    /// fcntl(2): F_GETFL (O_RDWR, with O_NONBLOCK if set) and F_SETFL
    /// (O_NONBLOCK on or off; other flags ignored, as Linux ignores the
    /// ones it cannot change); F_GETFD / F_SETFD accepted (0).
    pub fn fcntl(&mut self, fd: i32, cmd: i32, arg: i64) -> CallResult {
        let entry = self.fd(fd)?;
        match cmd {
            libc::F_GETFL => Ok(i64::from(libc::O_RDWR)
                | if entry.nonblocking {
                    i64::from(libc::O_NONBLOCK)
                } else {
                    0
                }),
            libc::F_SETFL => {
                entry.nonblocking = arg & i64::from(libc::O_NONBLOCK) != 0;
                Ok(0)
            }
            libc::F_GETFD | libc::F_SETFD => Ok(0),
            _ => Err(libc::EINVAL),
        }
    }

    /// setsockopt(2) with an int value: SO_REUSEADDR (kept, no effect),
    /// SO_KEEPALIVE, TCP_NODELAY, TCP_KEEPIDLE / TCP_KEEPINTVL (seconds),
    /// TCP_KEEPCNT, TCP_USER_TIMEOUT (milliseconds), SO_SNDBUF (bytes as
    /// given; Linux doubles it), TCP_MAXSEG (before connect, or on a
    /// listener; 0 or 88 to 32767 as Linux). Others: ENOPROTOOPT.
    pub fn setsockopt(&mut self, fd: i32, level: i32, name: i32, value: i32) -> CallResult {
        let entry = self.fd(fd)?;
        if let Object::Epoll(_) = entry.object {
            return Err(libc::ENOTSOCK);
        }
        let o = &mut entry.options;
        let positive = || u32::try_from(value).ok().filter(|v| *v > 0).ok_or(libc::EINVAL);
        match (level, name) {
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = value != 0,
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive_on = value != 0,
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay = value != 0,
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.keepalive.idle_us = u64::from(positive()?) * 1_000_000,
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => o.keepalive.interval_us = u64::from(positive()?) * 1_000_000,
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => o.keepalive.count = positive()?,
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
                o.user_timeout_ms = u32::try_from(value).map_err(|_| libc::EINVAL)?
            }
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => o.send_buffer = Some(positive()?),
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match value {
                0 => o.max_segment = None,
                88..=32767 => o.max_segment = Some(value as u16),
                _ => return Err(libc::EINVAL),
            },
            _ => return Err(libc::ENOPROTOOPT),
        }
        let options = *o;
        match &entry.object {
            Object::Stream(s) => options.apply(s),
            Object::Listener(l) => l.set_max_segment(options.max_segment),
            _ => {}
        }
        self.settled(Ok(0))
    }

    /// getsockopt(2) of an int option: the ones setsockopt takes, and
    /// SO_ERROR (the connection's error, 0 if none).
    pub fn getsockopt(&mut self, fd: i32, level: i32, name: i32) -> Result<i32, i32> {
        let entry = self.fd(fd)?;
        let o = &entry.options;
        let secs = |us: u64| i32::try_from(us / 1_000_000).unwrap_or(i32::MAX);
        Ok(match (level, name) {
            (libc::SOL_SOCKET, libc::SO_ERROR) => match &entry.object {
                Object::Stream(s) => s.error().unwrap_or(0),
                Object::Epoll(_) => return Err(libc::ENOTSOCK),
                _ => 0,
            },
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => i32::from(o.reuseaddr),
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => i32::from(o.keepalive_on),
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => i32::from(o.nodelay),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => secs(o.keepalive.idle_us),
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => secs(o.keepalive.interval_us),
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => i32::try_from(o.keepalive.count).unwrap_or(i32::MAX),
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => i32::try_from(o.user_timeout_ms).unwrap_or(i32::MAX),
            // A connection's full segment in use; before, what was set or
            // Linux's default (536).
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match &entry.object {
                Object::Stream(s) => i32::from(s.max_segment().unwrap_or(536)),
                _ => i32::from(o.max_segment.unwrap_or(536)),
            },
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                let default = oxnet_stack::tcp::tcb::TcbSettings::default().send_buffer;
                let bytes = match &entry.object {
                    Object::Stream(s) => s.send_buffer().map_or(default, |b| b as u32),
                    _ => o.send_buffer.unwrap_or(default),
                };
                i32::try_from(bytes).unwrap_or(i32::MAX)
            }
            _ => return Err(libc::ENOPROTOOPT),
        })
    }

    /// The socket under `fd` as an epoll or poll source.
    fn pollable(&self, fd: i32) -> Result<&dyn Pollable, i32> {
        match &self.fds.get(&fd).ok_or(libc::EBADF)?.object {
            Object::Stream(s) => Ok(s),
            Object::Listener(l) => Ok(l),
            // A socket not yet listening or connected: nothing to watch
            // in the stack, so epoll refuses it (EINVAL; Linux would
            // report EPOLLOUT | EPOLLHUP). poll answers for it.
            Object::Fresh { .. } => Err(libc::EINVAL),
            Object::Epoll(_) => Err(libc::EINVAL),
        }
    }

    /// epoll_create(2).
    pub fn epoll_create(&mut self) -> CallResult {
        self.add(Object::Epoll(Epoll::new()), Options::default(), false)
    }

    /// epoll_ctl(2): EPOLL_CTL_ADD, _MOD, _DEL of a socket with its
    /// events and data.
    pub fn epoll_ctl(&mut self, epfd: i32, op: i32, fd: i32, events: u32, data: u64) -> CallResult {
        let op = match op {
            libc::EPOLL_CTL_ADD => EpollOp::Add,
            libc::EPOLL_CTL_MOD => EpollOp::Mod,
            libc::EPOLL_CTL_DEL => EpollOp::Del,
            _ => return Err(libc::EINVAL),
        };
        if epfd == fd {
            return Err(libc::EINVAL);
        }
        // Take the epoll out while it looks at the socket (both live in
        // the same table).
        let mut ep_entry = self.fds.remove(&epfd).ok_or(libc::EBADF)?;
        let r = match &mut ep_entry.object {
            Object::Epoll(ep) => self.pollable(fd).and_then(|s| ep.ctl(op, s, events, data)),
            _ => Err(libc::EINVAL),
        };
        self.fds.insert(epfd, ep_entry);
        r.map(|()| 0)
    }

    /// epoll_wait(2) without waiting: up to `max` ready sockets.
    pub fn epoll_wait(&mut self, epfd: i32, max: usize) -> Result<Vec<(u32, u64)>, i32> {
        if max == 0 {
            return Err(libc::EINVAL);
        }
        match &mut self.fd(epfd)?.object {
            Object::Epoll(ep) => Ok(ep.try_wait(max)),
            _ => Err(libc::EINVAL),
        }
    }

    /// poll(2)'s answer for one descriptor: the events of `events` that
    /// hold, plus POLLERR / POLLHUP (always reported); POLLNVAL for a
    /// descriptor that is not open.
    pub fn poll_one(&self, fd: i32, events: i16) -> i16 {
        let Some(entry) = self.fds.get(&fd) else {
            return libc::POLLNVAL;
        };
        let mask = match &entry.object {
            Object::Stream(s) => {
                let (stack, source) = s.epoll_source();
                let m = readiness(&stack.borrow(), source);
                m
            }
            Object::Listener(l) => {
                let (stack, source) = l.epoll_source();
                let m = readiness(&stack.borrow(), source);
                m
            }
            // Linux: a socket that is neither connected nor listening
            // polls as writable and hung up.
            Object::Fresh { .. } => (libc::EPOLLOUT | libc::EPOLLHUP) as u32,
            Object::Epoll(_) => 0,
        };
        // poll's bits have epoll's values for IN, PRI, OUT, ERR, HUP.
        let always = (libc::POLLERR | libc::POLLHUP) as u32;
        (mask & (events as u16 as u32 | always)) as i16
    }
}
