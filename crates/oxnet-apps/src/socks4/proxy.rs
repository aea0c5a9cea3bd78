//! The proxy's state machine, apart from the element so that tests can
//! drive it with stream packets: one session per client connection
//! (keyed by the connection's id), from the request to the relay.
//!
//! ```text
//! Request ──CONNECT──▶ Connecting ──Open from the client element──▶ Relay
//!    │                     └──Close(errno)──▶ 91, closed
//!    └──BIND──▶ Listening ──inbound from DSTIP──▶ BoundRelay
//!                  └──inbound from elsewhere──▶ 91, both closed
//! ```
//!
//! Flow signals ([`stream::Flow`]) are passed across in the relay, so
//! that with FLOW_CONTROL on both epoll elements a client that reads
//! slowly stops its destination being read, and the reverse, instead of
//! its data piling up (in the device's receive buffers, which a TAP has
//! 2048 of: enough of them held and no ACK can come in).
//!
//! The destination side of CONNECT is TCPEpollClient, on output and
//! input 1, under the client connection's id. The destination side of
//! BIND is a connection this proxy accepts itself: a [`TcpListener`] of
//! the stack per BIND request, its accepted connection in a table of its
//! own ([`Conns`], the one TCPEpollServer uses), polled in the
//! element's task.

use super::hosts::Hosts;
use super::policy::Policy;
use super::request::{self, Command, Destination, Parse, REJECTED};
use crate::epoll::conns::{Conns, OWNER_BIT};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch};
use oxnet_stack::tcp::epoll::{EpollOp, EPOLLIN};
use oxnet_stack::tcp::socket::{Stack, TcpListener};
use oxnet_stack::wire::{IpAddress, IpEndpoint};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

/// The proxy's settings (the element's arguments).
#[derive(Debug, Clone)]
pub struct Config {
    pub policy: Policy,
    /// SOCKS4a's resolver (None: host names are refused).
    pub hosts: Option<Hosts>,
    /// The address BIND listens on and reports (None: every address,
    /// reported as 0.0.0.0, which SOCKS4.protocol §2 tells the client to
    /// read as the proxy's own address).
    pub bind_addr: Option<Ipv4Addr>,
    /// The ports BIND listens on, first to last.
    pub bind_ports: (u16, u16),
    pub max_user: usize,
    pub max_host: usize,
    /// Bytes of a client's data held before its destination is
    /// connected.
    pub max_pending: usize,
    /// A client that has not sent a whole request after this long is
    /// closed (0: never).
    pub request_timeout_us: u64,
    /// A BIND nobody has connected to after this long is answered 91
    /// (0: never).
    pub bind_timeout_us: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::default(),
            hosts: None,
            bind_addr: None,
            // Above Linux's and the stack's ephemeral range (32768-60999),
            // so BIND never takes a port a connection may want.
            bind_ports: (61000, 61999),
            max_user: 255,
            max_host: 255,
            max_pending: 64 * 1024,
            request_timeout_us: 30_000_000,
            bind_timeout_us: 120_000_000,
        }
    }
}

/// What the proxy counts (the element's handlers).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Whole requests read.
    pub requests: u64,
    pub connects: u64,
    pub binds: u64,
    /// Replies 90 to CONNECT, and second replies 90 to BIND.
    pub granted: u64,
    /// Replies 91 (any reason, below).
    pub rejected: u64,
    /// Refused by ALLOW / DENY.
    pub denied: u64,
    /// Refused by USERS.
    pub users_refused: u64,
    /// SOCKS4a names not resolved (or no HOSTS).
    pub unresolved: u64,
    /// CONNECTs whose connection failed.
    pub failed: u64,
    /// BINDs whose first reply went out (listening).
    pub bound: u64,
    /// BIND inbound connections from another address than DSTIP.
    pub bind_mismatches: u64,
    /// Bytes relayed client → destination, destination → client.
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Malformed requests, held data past its limit, packets that could
    /// not be made.
    pub errors: u64,
    /// Clients gone before their request was answered.
    pub aborted: u64,
    /// Packets for no session, dropped.
    pub unknown: u64,
    /// Requests not complete in time, BINDs not connected in time.
    pub timeouts: u64,
}

/// Where a session is.
#[derive(Debug)]
enum Phase {
    /// Reading the request (its bytes so far).
    Request(Vec<u8>),
    /// CONNECT asked of the client element.
    Connecting(Ipv4Addr, u16),
    /// BIND listening (the listener's token, the address expected).
    Listening(u64, Ipv4Addr),
    /// Relaying with the client element's connection.
    Relay,
    /// Relaying with the accepted BIND connection.
    BoundRelay,
}

struct Session {
    phase: Phase,
    /// The client's data before its destination is there, and its bytes.
    held: VecDeque<Packet>,
    held_bytes: usize,
    /// The client's Eof came before its destination was there.
    eof: bool,
    /// When the phase began (the request's or the BIND's deadline).
    since_us: u64,
}

/// What one step sends: to the client side (output 0, TCPEpollServer)
/// and to the destination side (output 1, TCPEpollClient).
#[derive(Default)]
pub struct Out {
    pub client: PacketBatch,
    pub remote: PacketBatch,
}

/// The proxy.
pub struct Proxy {
    pub config: Config,
    sessions: HashMap<u32, Session>,
    /// BIND listeners by epoll token, with their session's id.
    listeners: HashMap<u64, (TcpListener, u32)>,
    next_token: u64,
    next_bind_port: u16,
    /// BIND's accepted connections (the epoll also watches the listeners).
    bound: Conns,
    stack: Option<Stack>,
    /// The time now (the element sets it from the router's clock).
    pub now_us: u64,
    pub stats: Stats,
}

impl Proxy {
    /// A proxy on `stack` (None: BIND is refused).
    pub fn new(config: Config, stack: Option<Stack>) -> Proxy {
        let next_bind_port = config.bind_ports.0;
        Proxy {
            config,
            sessions: HashMap::new(),
            listeners: HashMap::new(),
            next_token: 0,
            next_bind_port,
            // TCPEpollServer's default limit: the accepted connection is
            // one of its kind.
            bound: {
                let mut c = Conns::new(1 << 20);
                c.flow_signals = true;
                c
            },
            stack,
            now_us: 0,
            stats: Stats::default(),
        }
    }

    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// BIND listeners open now.
    pub fn listeners(&self) -> usize {
        self.listeners.len()
    }

    /// Whether the task has nothing to watch (no BIND).
    pub fn idle(&self) -> bool {
        self.listeners.is_empty() && self.bound.is_empty()
    }

    fn push_control(&mut self, batch: &mut PacketBatch, pool: &Mempool, id: u32, e: StreamEvent) {
        match stream::control(pool, id, e) {
            Some(p) => batch.push(p),
            None => self.stats.errors += 1,
        }
    }

    fn push_reply(&mut self, out: &mut Out, pool: &Mempool, id: u32, code: u8, port: u16, ip: Ipv4Addr) {
        match bytes_packet(pool, &request::reply(code, port, ip)) {
            Some(p) => out.client.push(stream::data(p, id)),
            None => self.stats.errors += 1,
        }
    }

    /// Answers 91 and closes the client's connection (SOCKS4.protocol
    /// §1: "closes its connection immediately after notifying the
    /// client of a failed or rejected request").
    fn refuse(&mut self, out: &mut Out, pool: &Mempool, id: u32, port: u16, ip: Ipv4Addr) {
        self.stats.rejected += 1;
        self.push_reply(out, pool, id, REJECTED, port, ip);
        self.push_control(&mut out.client, pool, id, StreamEvent::Close);
        self.end(id);
    }

    /// Forgets session `id` and its listener, if any.
    fn end(&mut self, id: u32) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        if let Phase::Listening(token, _) = s.phase {
            self.drop_listener(token);
        }
        Some(s)
    }

    fn drop_listener(&mut self, token: u64) {
        if let Some((listener, _)) = self.listeners.remove(&token) {
            let _ = self.bound.epoll().ctl(EpollOp::Del, &listener, 0, 0);
        }
    }

    /// A stream packet from the client side (input 0).
    pub fn client_input(&mut self, p: Packet, out: &mut Out, pool: &Mempool) {
        let id = stream::socket(&p);
        let event = stream::event(&p);
        if event == StreamEvent::Open {
            if id != 0 && !self.sessions.contains_key(&id) {
                self.sessions.insert(
                    id,
                    Session {
                        phase: Phase::Request(Vec::new()),
                        held: VecDeque::new(),
                        held_bytes: 0,
                        eof: false,
                        since_us: self.now_us,
                    },
                );
            }
            return;
        }
        if stream::flow(&p).is_some() {
            // The client's side says it has too much waiting (or no
            // longer): the destination's side stops (or resumes) reading.
            match self.sessions.get(&id).map(|s| &s.phase) {
                Some(Phase::Relay) => out.remote.push(p),
                Some(Phase::BoundRelay) => self.bound_input(p, out, pool),
                _ => {}
            }
            return;
        }
        let Some(s) = self.sessions.get_mut(&id) else {
            // The Close of a connection this proxy closed asks for nothing.
            if event != StreamEvent::Close {
                self.stats.unknown += 1;
            }
            return;
        };
        match (event, &mut s.phase) {
            (StreamEvent::Data, Phase::Request(_)) => self.request_bytes(id, p, out, pool),
            (StreamEvent::Data, Phase::Connecting(..) | Phase::Listening(..)) => {
                // Not answered yet: held, bounded.
                s.held_bytes += p.total_len();
                s.held.push_back(p);
                if s.held_bytes > self.config.max_pending {
                    self.stats.errors += 1;
                    self.abort(id, out, pool);
                }
            }
            (StreamEvent::Data, Phase::Relay) => {
                self.stats.bytes_up += p.total_len() as u64;
                out.remote.push(p);
            }
            (StreamEvent::Data, Phase::BoundRelay) => {
                self.stats.bytes_up += p.total_len() as u64;
                self.bound_input(p, out, pool);
            }
            (StreamEvent::Eof, Phase::Request(_)) => {
                // The client will send no more: its request never ends.
                self.stats.aborted += 1;
                self.push_control(&mut out.client, pool, id, StreamEvent::Close);
                self.end(id);
            }
            (StreamEvent::Eof, Phase::Connecting(..) | Phase::Listening(..)) => s.eof = true,
            (StreamEvent::Eof, Phase::Relay) => out.remote.push(p),
            (StreamEvent::Eof, Phase::BoundRelay) => self.bound_input(p, out, pool),
            (StreamEvent::Close, Phase::Relay) => {
                self.end(id);
                out.remote.push(p);
            }
            (StreamEvent::Close, Phase::BoundRelay) => {
                self.end(id);
                self.bound_input(p, out, pool);
            }
            (StreamEvent::Close, _) => {
                // Gone mid-handshake: cancel what was started for it.
                self.stats.aborted += 1;
                if let Some(Session {
                    phase: Phase::Connecting(..),
                    ..
                }) = self.end(id)
                {
                    out.remote.push(p);
                }
            }
            (StreamEvent::Open, _) => {}
        }
    }

    /// Closes the client and whatever was started for it (held data past
    /// its limit).
    fn abort(&mut self, id: u32, out: &mut Out, pool: &Mempool) {
        if let Some(s) = self.end(id) {
            if matches!(s.phase, Phase::Connecting(..) | Phase::Relay) {
                self.push_control(&mut out.remote, pool, id, StreamEvent::Close);
            }
            if matches!(s.phase, Phase::BoundRelay) {
                if let Some(c) = stream::control(pool, id, StreamEvent::Close) {
                    self.bound_input(c, out, pool);
                }
            }
        }
        self.push_control(&mut out.client, pool, id, StreamEvent::Close);
    }

    /// Request bytes: collected (bounded) until a whole request is there.
    fn request_bytes(&mut self, id: u32, p: Packet, out: &mut Out, pool: &Mempool) {
        let limit = request::FIXED + self.config.max_user + 1 + self.config.max_host + 1;
        let Some(Session {
            phase: Phase::Request(buf),
            ..
        }) = self.sessions.get_mut(&id)
        else {
            return;
        };
        let bytes: Vec<u8> = p.segments().flat_map(|s| s.iter().copied()).collect();
        let take = bytes.len().min(limit.saturating_sub(buf.len()));
        buf.extend_from_slice(&bytes[..take]);
        match request::parse(buf, self.config.max_user, self.config.max_host) {
            Parse::Incomplete => {}
            Parse::Invalid(_) => {
                self.stats.errors += 1;
                self.refuse(out, pool, id, 0, Ipv4Addr::UNSPECIFIED);
            }
            Parse::Done(req, used) => {
                // What followed the request is the client's first data.
                let mut rest = buf[used..].to_vec();
                rest.extend_from_slice(&bytes[take..]);
                let mut rest = rest.as_slice();
                while !rest.is_empty() {
                    let Some(mut r) = pool.alloc().ok() else {
                        self.stats.errors += 1;
                        break;
                    };
                    let n = rest.len().min(r.capacity());
                    if r.set_len(n).is_err() {
                        self.stats.errors += 1;
                        break;
                    }
                    r.copy_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    let s = self.sessions.get_mut(&id).expect("the session read above");
                    s.held_bytes += n;
                    s.held.push_back(stream::data(r, id));
                }
                self.request(id, req, out, pool);
            }
        }
    }

    /// A whole request: the checks, then CONNECT or BIND.
    fn request(&mut self, id: u32, req: request::Request, out: &mut Out, pool: &Mempool) {
        self.stats.requests += 1;
        match req.command {
            Command::Connect => self.stats.connects += 1,
            Command::Bind => self.stats.binds += 1,
        }
        let port = req.port;
        if !self.config.policy.accepts_user(&req.user) {
            self.stats.users_refused += 1;
            return self.refuse(out, pool, id, port, Ipv4Addr::UNSPECIFIED);
        }
        let ip = match &req.destination {
            Destination::Address(ip) => *ip,
            // A name that is an address literal is that address (as
            // getaddrinfo would have it; curl --socks4a sends them).
            Destination::Host(name) if name.parse::<Ipv4Addr>().is_ok() => {
                name.parse().unwrap_or(Ipv4Addr::UNSPECIFIED)
            }
            // SOCKS4A.protocol: "If it cannot resolve the domain name,
            // it should return failure status 91."
            Destination::Host(name) => match self.config.hosts.as_ref().and_then(|h| h.resolve(name)) {
                Some(ip) => ip,
                None => {
                    self.stats.unresolved += 1;
                    return self.refuse(out, pool, id, port, Ipv4Addr::UNSPECIFIED);
                }
            },
        };
        if !self.config.policy.permits(ip, port) {
            self.stats.denied += 1;
            return self.refuse(out, pool, id, port, ip);
        }
        match req.command {
            Command::Connect => {
                // TCPEpollClient connects under this id; its port is one
                // that RSS maps to this core (TcpStream::connect).
                let Some(open) = stream::open_request(pool, id, IpEndpoint::new(ip, port)) else {
                    self.stats.errors += 1;
                    return self.abort(id, out, pool);
                };
                out.remote.push(open);
                self.set_phase(id, Phase::Connecting(ip, port));
            }
            Command::Bind => match self.listen() {
                Ok((listener, local_port)) => {
                    let token = OWNER_BIT | self.next_token;
                    self.next_token += 1;
                    if self.bound.epoll().ctl(EpollOp::Add, &listener, EPOLLIN, token).is_err() {
                        self.stats.errors += 1;
                        return self.refuse(out, pool, id, port, ip);
                    }
                    self.listeners.insert(token, (listener, id));
                    self.set_phase(id, Phase::Listening(token, ip));
                    if let Some(s) = self.sessions.get_mut(&id) {
                        s.since_us = self.now_us;
                    }
                    self.stats.bound += 1;
                    // SOCKS4.protocol §2: the first reply names the
                    // socket that waits (0.0.0.0: the proxy's address).
                    let addr = self.config.bind_addr.unwrap_or(Ipv4Addr::UNSPECIFIED);
                    self.push_reply(out, pool, id, request::GRANTED, local_port, addr);
                }
                Err(_) => {
                    self.stats.errors += 1;
                    self.refuse(out, pool, id, port, ip);
                }
            },
        }
    }

    fn set_phase(&mut self, id: u32, phase: Phase) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.phase = phase;
        }
    }

    /// A listener on the next free port of BIND's range.
    fn listen(&mut self) -> Result<(TcpListener, u16), i32> {
        let stack = self.stack.as_ref().ok_or(libc::ENETDOWN)?;
        let (first, last) = self.config.bind_ports;
        let addr = self.config.bind_addr.unwrap_or(Ipv4Addr::UNSPECIFIED);
        for _ in first..=last {
            let port = self.next_bind_port;
            self.next_bind_port = if port >= last { first } else { port + 1 };
            // One connection is expected: a backlog of one.
            match TcpListener::bind(stack, IpEndpoint::new(addr, port), 1) {
                Ok(l) => return Ok((l, port)),
                Err(libc::EADDRINUSE) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(libc::EADDRINUSE)
    }

    /// The client's held data and Eof go to the destination, now there.
    fn release_held(&mut self, id: u32, out: &mut Out, pool: &Mempool, bound: bool) {
        let Some(s) = self.sessions.get_mut(&id) else { return };
        let held: Vec<Packet> = s.held.drain(..).collect();
        let eof = std::mem::take(&mut s.eof);
        self.stats.bytes_up += s.held_bytes as u64;
        s.held_bytes = 0;
        let eof = if eof {
            stream::control(pool, id, StreamEvent::Eof)
        } else {
            None
        };
        for p in held.into_iter().chain(eof) {
            if bound {
                self.bound_input(p, out, pool);
            } else {
                out.remote.push(p);
            }
        }
    }

    /// A stream packet from the destination side (input 1,
    /// TCPEpollClient).
    pub fn remote_input(&mut self, p: Packet, out: &mut Out, pool: &Mempool) {
        let id = stream::socket(&p);
        let phase = self.sessions.get(&id).map(|s| &s.phase);
        if stream::flow(&p).is_some() {
            // The other way: the client's connection is read or not.
            if matches!(phase, Some(Phase::Relay)) {
                out.client.push(p);
            }
            return;
        }
        match (stream::event(&p), phase) {
            (StreamEvent::Open, Some(&Phase::Connecting(ip, port))) => {
                // SOCKS4.protocol §1: the reply once the connection is
                // established; its DSTPORT and DSTIP: the destination.
                self.stats.granted += 1;
                self.push_reply(out, pool, id, request::GRANTED, port, ip);
                self.set_phase(id, Phase::Relay);
                self.release_held(id, out, pool, false);
            }
            (StreamEvent::Open, _) => {
                // Its client has gone meanwhile.
                self.push_control(&mut out.remote, pool, id, StreamEvent::Close);
            }
            (StreamEvent::Close, Some(&Phase::Connecting(ip, port))) => {
                self.stats.failed += 1;
                self.refuse(out, pool, id, port, ip);
            }
            (StreamEvent::Data, Some(Phase::Relay)) => {
                self.stats.bytes_down += p.total_len() as u64;
                out.client.push(p);
            }
            (StreamEvent::Eof, Some(Phase::Relay)) => out.client.push(p),
            (StreamEvent::Close, Some(Phase::Relay)) => {
                self.end(id);
                out.client.push(p);
            }
            (StreamEvent::Close, _) => {}
            _ => self.stats.unknown += 1,
        }
    }

    /// A packet for BIND's accepted connection; what the table answers
    /// (its Close) is handled as from it.
    fn bound_input(&mut self, p: Packet, out: &mut Out, pool: &Mempool) {
        let mut back = PacketBatch::default();
        self.bound.input(p, &mut back, pool);
        for q in back.drain_front(back.len()) {
            self.bound_output(q, out, pool);
        }
    }

    /// A stream packet of BIND's accepted connection.
    fn bound_output(&mut self, p: Packet, out: &mut Out, pool: &Mempool) {
        let id = stream::socket(&p);
        if !matches!(self.sessions.get(&id).map(|s| &s.phase), Some(Phase::BoundRelay)) {
            return;
        }
        match stream::event(&p) {
            StreamEvent::Open => {}
            StreamEvent::Data => {
                self.stats.bytes_down += p.total_len() as u64;
                out.client.push(p);
            }
            StreamEvent::Eof => out.client.push(p),
            StreamEvent::Close => {
                self.end(id);
                self.push_control(&mut out.client, pool, id, StreamEvent::Close);
            }
        }
    }

    /// Ends what waited too long (the element calls it every second): a
    /// client without a whole request is closed, a BIND nobody connected
    /// to is answered 91 (SOCKS4.protocol leaves the time to the server).
    pub fn sweep(&mut self, out: &mut Out, pool: &Mempool) {
        let (now, request, bind) = (self.now_us, self.config.request_timeout_us, self.config.bind_timeout_us);
        let late = |since: u64, limit: u64| limit != 0 && now.saturating_sub(since) >= limit;
        let expired: Vec<(u32, Option<Ipv4Addr>)> = self
            .sessions
            .iter()
            .filter_map(|(&id, s)| match s.phase {
                Phase::Request(_) if late(s.since_us, request) => Some((id, None)),
                Phase::Listening(_, ip) if late(s.since_us, bind) => Some((id, Some(ip))),
                _ => None,
            })
            .collect();
        for (id, bind) in expired {
            self.stats.timeouts += 1;
            match bind {
                Some(ip) => self.refuse(out, pool, id, 0, ip),
                None => {
                    self.end(id);
                    self.push_control(&mut out.client, pool, id, StreamEvent::Close);
                }
            }
        }
    }

    /// The task's round: BIND's listeners (accepting the one connection
    /// each waits for) and its accepted connections (up to `budget`
    /// packets read). Returns whether anything was done.
    pub fn poll(&mut self, budget: usize, out: &mut Out, pool: &Mempool) -> bool {
        if self.idle() {
            return false;
        }
        let mut batch = PacketBatch::default();
        let (owner, work) = self.bound.poll(budget, &mut batch, pool);
        for (_, token) in owner {
            self.accept(token, &mut batch, out, pool);
        }
        for p in batch.drain_front(batch.len()) {
            self.bound_output(p, out, pool);
        }
        work
    }

    /// The inbound connection of a BIND: checked against DSTIP, answered
    /// with the second reply (SOCKS4.protocol §2).
    fn accept(&mut self, token: u64, batch: &mut PacketBatch, out: &mut Out, pool: &Mempool) {
        let Some((listener, id)) = self.listeners.get(&token) else {
            return;
        };
        let id = *id;
        let Ok(conn) = listener.try_accept() else { return };
        self.drop_listener(token);
        let Some(&Session {
            phase: Phase::Listening(_, expect),
            ..
        }) = self.sessions.get(&id)
        else {
            return;
        };
        let from = conn.key().map(|k| k.remote);
        let (ip, port) = match from {
            Some(IpEndpoint {
                addr: IpAddress::V4(ip),
                port,
            }) => (ip, port),
            _ => (Ipv4Addr::UNSPECIFIED, 0),
        };
        // "The SOCKS server checks the IP address of the originating
        // host against the value of DSTIP specified in the client's BIND
        // request. If a mismatch is found, the CD field in the second
        // reply is set to 91 and the SOCKS server closes both
        // connections."
        if ip != expect {
            self.stats.bind_mismatches += 1;
            conn.abort();
            drop(conn);
            return self.refuse(out, pool, id, port, ip);
        }
        self.stats.granted += 1;
        self.push_reply(out, pool, id, request::GRANTED, port, ip);
        self.set_phase(id, Phase::BoundRelay);
        self.bound.insert(id, conn, true, batch, pool);
        self.release_held(id, out, pool, true);
    }
}

/// A packet holding `bytes` (they fit: at most a request's bounded size
/// or a reply).
fn bytes_packet(pool: &Mempool, bytes: &[u8]) -> Option<Packet> {
    let mut p = pool.alloc().ok()?;
    p.set_len(bytes.len()).ok()?;
    p.copy_from_slice(bytes);
    Some(p)
}
