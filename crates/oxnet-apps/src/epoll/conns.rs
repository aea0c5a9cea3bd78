//! The connection table of TCPEpollServer and TCPEpollClient: each
//! connection's socket, the data waiting for room in its send buffer,
//! and the stream rules of [`crate::stream`] (one Open, Data, at most one
//! Eof, exactly one Close), driven by one epoll instance
//! (`oxnet_stack::tcp::epoll`, edge-triggered).
//!
//! Reading: an edge (EPOLLIN, EPOLLRDHUP, EPOLLERR, EPOLLHUP) puts the
//! connection on a ready list; each round reads up to a budget of
//! packets from the ready connections (zero-copy: the stack's receive
//! packets themselves, `TcpStream::try_recv_packets`) and leaves a
//! connection with more on the list. A connection whose data waits for
//! room beyond a limit (`max_pending`) is not read until it drains:
//! what a slow peer cannot take is not read from a fast one without
//! bound (an echo of a bulk transfer, a proxy).
//!
//! Writing: Data is given to the stack without a copy
//! (`TcpStream::try_send_packet`); without room it waits, in order, and
//! goes on EPOLLOUT. Eof and Close take effect after the data before
//! them.

use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch, SharedBuffer};
use oxnet_stack::tcp::epoll::{Epoll, EpollOp, EPOLLERR, EPOLLET, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};
use oxnet_stack::tcp::socket::TcpStream;
use oxnet_stack::FlowMap;
use std::collections::VecDeque;

/// What the table counts (the elements' handlers).
#[derive(Debug, Default, Clone)]
pub struct ConnStats {
    /// Connections that came out with Open.
    pub opened: u64,
    /// Connections that came out with Close.
    pub closed: u64,
    /// Of those, closed with an error.
    pub errors: u64,
    /// Bytes read from connections / written to them.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Packets pushed in for a connection not in the table (dropped).
    pub unknown: u64,
    /// Data that could not be written (the connection failed or was shut
    /// down; its Close says why), dropped.
    pub write_drops: u64,
    /// Control packets that could not be made (the pool was empty); the
    /// event goes out when a buffer is free.
    pub alloc_failures: u64,
    /// Times a connection stopped being read because its data waited
    /// for room (`max_pending`).
    pub paused: u64,
    /// Connections ended (ENOBUFS) because more than four times
    /// `max_pending` waited for them.
    pub overflows: u64,
}

/// One connection.
struct Conn {
    stream: TcpStream,
    /// Data waiting for room, in order, and its bytes.
    pending: VecDeque<Packet>,
    pending_bytes: usize,
    /// Eof / Close pushed in, to act on once `pending` is empty.
    shut_after: bool,
    close_after: bool,
    /// Our direction is shut (FIN queued).
    write_shut: bool,
    /// The peer's end (Eof) has gone out.
    eof_out: bool,
    /// An Open must go out (a client's connection, once established).
    open_due: bool,
    /// On the ready list.
    queued: bool,
    /// Not read until `pending` drains (`max_pending`).
    paused: bool,
    /// Not read until the peer's Resume ([`stream::Flow`]).
    held: bool,
}

/// The table.
pub struct Conns {
    /// Looked up several times per request: foldhash, not SipHash.
    table: FlowMap<u32, Conn>,
    epoll: Epoll,
    /// The epoll's events of a round, kept for the next ([`Conns::poll`]).
    events: Vec<(u32, u64)>,
    /// Connections to read from (or to look at: a failed one's Close).
    ready: VecDeque<u32>,
    /// Events waiting for a free buffer (id, event, errno), in order.
    owed: VecDeque<(u32, StreamEvent, i32)>,
    max_pending: usize,
    /// Say Pause and Resume ([`stream::Flow`]) when a connection's
    /// pending data crosses the limit (FLOW_CONTROL).
    pub flow_signals: bool,
    pub stats: ConnStats,
}

/// Epoll data with this bit is the owner's (a listener), not a connection.
pub const OWNER_BIT: u64 = 1 << 63;

impl Conns {
    pub fn new(max_pending: usize) -> Conns {
        Conns {
            table: FlowMap::default(),
            epoll: Epoll::new(),
            events: Vec::new(),
            ready: VecDeque::new(),
            owed: VecDeque::new(),
            max_pending,
            flow_signals: false,
            stats: ConnStats::default(),
        }
    }

    /// The epoll, for the owner's own sockets (listeners: data with
    /// [`OWNER_BIT`]).
    pub fn epoll(&mut self) -> &mut Epoll {
        &mut self.epoll
    }

    /// Connections in the table.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn contains(&self, id: u32) -> bool {
        self.table.contains_key(&id)
    }

    /// Adds `stream` as connection `id` (not in the table). `established`:
    /// its Open goes out now (accepted); otherwise when the handshake
    /// completes (a client's), or its Close if it fails.
    pub fn insert(&mut self, id: u32, stream: TcpStream, established: bool, out: &mut PacketBatch, pool: &Mempool) {
        debug_assert!(id != 0 && !self.table.contains_key(&id));
        // Edge-triggered: every event once; the ready list remembers what
        // is left to read.
        let events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        if let Err(e) = self.epoll.ctl(EpollOp::Add, &stream, events, id as u64) {
            // The connection is gone already (EBADF): it never opened.
            if !established {
                self.emit(id, StreamEvent::Close, e, out, pool);
            }
            return;
        }
        self.table.insert(
            id,
            Conn {
                stream,
                pending: VecDeque::new(),
                pending_bytes: 0,
                shut_after: false,
                close_after: false,
                write_shut: false,
                eof_out: false,
                open_due: !established,
                queued: false,
                paused: false,
                held: false,
            },
        );
        if established {
            self.stats.opened += 1;
            self.emit(id, StreamEvent::Open, 0, out, pool);
        }
        // ADD reports a socket that is ready already; data may be waiting.
        self.mark(id);
    }

    /// A free connection id (never 0, none in use), after `last`.
    pub fn free_id(&self, last: &mut u32) -> u32 {
        loop {
            *last = last.wrapping_add(1);
            if *last != 0 && !self.table.contains_key(last) {
                return *last;
            }
        }
    }

    fn mark(&mut self, id: u32) {
        if let Some(c) = self.table.get_mut(&id) {
            if !c.queued {
                c.queued = true;
                self.ready.push_back(id);
            }
        }
    }

    /// Pushes a control packet out (or owes it until a buffer is free).
    /// A flow signal is owed as `Data` with the [`stream::Flow`] as errno.
    fn emit(&mut self, id: u32, e: StreamEvent, errno: i32, out: &mut PacketBatch, pool: &Mempool) {
        if !self.owed.is_empty() {
            self.owed.push_back((id, e, errno));
            return;
        }
        match control_packet(pool, id, e, errno) {
            Some(p) => out.push(p),
            None => {
                self.stats.alloc_failures += 1;
                self.owed.push_back((id, e, errno));
            }
        }
    }

    /// One round: takes the epoll's events (the owner's own, with
    /// [`OWNER_BIT`], are returned), writes what waits for room, reads
    /// up to `budget` packets into `out`. Returns the owner's events and
    /// whether anything was done.
    pub fn poll(&mut self, budget: usize, out: &mut PacketBatch, pool: &Mempool) -> (Vec<(u32, u64)>, bool) {
        let mut work = false;
        while let Some(&(id, e, errno)) = self.owed.front() {
            let Some(p) = control_packet(pool, id, e, errno) else {
                break;
            };
            out.push(p);
            self.owed.pop_front();
            work = true;
        }
        let mut owner = Vec::new();
        // One vector for every round's events (this runs every round).
        let mut ready = std::mem::take(&mut self.events);
        self.epoll.try_wait_into(1024, &mut ready);
        for &(events, data) in &ready {
            work = true;
            if data & OWNER_BIT != 0 {
                owner.push((events, data));
                continue;
            }
            let id = data as u32;
            if events & EPOLLOUT != 0 {
                self.writable(id, out, pool);
            }
            if events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP) != 0 {
                self.mark(id);
            }
        }
        self.events = ready;
        let mut budget = budget;
        let mut rounds = self.ready.len();
        while budget > 0 && rounds > 0 {
            rounds -= 1;
            let Some(id) = self.ready.pop_front() else { break };
            let Some(c) = self.table.get_mut(&id) else { continue };
            c.queued = false;
            if c.paused || c.held {
                continue;
            }
            work = true;
            budget -= self.read(id, budget, out, pool);
        }
        (owner, work)
    }

    /// Reads up to `budget` packets of `id`; returns how many. Leaves it
    /// on the ready list if more may wait; the end, an error, a finished
    /// connection go out as events.
    fn read(&mut self, id: u32, budget: usize, out: &mut PacketBatch, pool: &Mempool) -> usize {
        let Some(c) = self.table.get_mut(&id) else { return 0 };
        if c.open_due {
            // A client's connection: established, failed, or not yet.
            match c.stream.state() {
                s if s.synchronized() => {
                    c.open_due = false;
                    self.stats.opened += 1;
                    self.emit(id, StreamEvent::Open, 0, out, pool);
                    // What was pushed in while connecting goes now.
                    self.writable(id, out, pool);
                }
                _ => {
                    if let Some(e) = c.stream.error() {
                        return self.remove(id, e, out, pool);
                    }
                    if c.stream.state() == oxnet_stack::tcp::tcb::TcpState::Closed {
                        return self.remove(id, libc::ECONNREFUSED, out, pool);
                    }
                    return 0;
                }
            }
        }
        let Some(c) = self.table.get_mut(&id) else { return 0 };
        if c.eof_out {
            return 0;
        }
        // Until EAGAIN, the end or the budget: edge-triggered, the edge
        // that brought the last data may have brought the FIN too.
        let mut read = 0;
        loop {
            let Some(c) = self.table.get_mut(&id) else { return read };
            let before = out.len();
            match c.stream.try_recv_packets(out, budget - read) {
                Ok(0) => {
                    // The end of the peer's stream.
                    c.eof_out = true;
                    self.emit(id, StreamEvent::Eof, 0, out, pool);
                    self.finish_if_done(id, out, pool);
                    return read;
                }
                Ok(n) => {
                    for p in out.iter_mut().skip(before) {
                        self.stats.bytes_in += p.total_len() as u64;
                        stream::set_socket(p, id);
                        stream::set_event(p, StreamEvent::Data);
                    }
                    read += n;
                    if read == budget {
                        self.mark(id);
                        return read;
                    }
                }
                Err(libc::EAGAIN) => return read,
                Err(e) => {
                    self.remove(id, e, out, pool);
                    return read;
                }
            }
        }
    }

    /// Room may have come: writes what waited, then the Eof / Close that
    /// waited behind it.
    fn writable(&mut self, id: u32, out: &mut PacketBatch, pool: &Mempool) {
        let Some(c) = self.table.get_mut(&id) else { return };
        if c.open_due {
            // The handshake finished (or failed): let `read` tell.
            self.mark(id);
            return;
        }
        let mut again = false;
        while let Some(p) = c.pending.pop_front() {
            let len = p.len();
            match give(&c.stream, p) {
                Ok(()) => {
                    c.pending_bytes -= len;
                    self.stats.bytes_out += len as u64;
                }
                Err((libc::EAGAIN, p)) => {
                    c.pending.push_front(p);
                    break;
                }
                Err(_) => {
                    // Failed: what waits cannot go; the read side ends it.
                    self.stats.write_drops += (c.pending.len() + 1) as u64;
                    c.pending.clear();
                    c.pending_bytes = 0;
                    again = true;
                    break;
                }
            }
        }
        let resumed = c.paused && c.pending_bytes <= self.max_pending / 2;
        if resumed {
            c.paused = false;
            again = true;
        }
        // Nothing waits behind the data (an ACK's room, the common case):
        // no more lookups.
        let settle = c.shut_after || c.close_after;
        if again {
            self.mark(id);
        }
        if resumed && self.flow_signals {
            self.emit(id, StreamEvent::Data, stream::Flow::Resume as i32, out, pool);
        }
        if settle {
            self.after_pending(id, out, pool);
        }
    }

    /// Acts on an Eof or Close that waited for the data before it.
    fn after_pending(&mut self, id: u32, out: &mut PacketBatch, pool: &Mempool) {
        let Some(c) = self.table.get_mut(&id) else { return };
        if !c.pending.is_empty() {
            return;
        }
        if c.close_after {
            self.remove(id, 0, out, pool);
            return;
        }
        if c.shut_after && !c.write_shut {
            c.write_shut = true;
            let _ = c.stream.shutdown_write();
        }
        self.finish_if_done(id, out, pool);
    }

    /// Both directions ended and nothing waits: the connection leaves the
    /// table (the stack finishes the close by itself).
    fn finish_if_done(&mut self, id: u32, out: &mut PacketBatch, pool: &Mempool) {
        if let Some(c) = self.table.get(&id) {
            if c.eof_out && c.write_shut && c.pending.is_empty() {
                self.remove(id, 0, out, pool);
            }
        }
    }

    /// Removes `id` and pushes its Close with `errno`; returns 0 (no
    /// packet read).
    fn remove(&mut self, id: u32, errno: i32, out: &mut PacketBatch, pool: &Mempool) -> usize {
        let Some(c) = self.table.remove(&id) else { return 0 };
        let _ = self.epoll.ctl(EpollOp::Del, &c.stream, 0, 0);
        self.stats.write_drops += c.pending.len() as u64;
        // A connection that never opened: its Close says why it failed.
        if !c.open_due {
            self.stats.closed += 1;
        }
        if errno != 0 {
            self.stats.errors += 1;
        }
        drop(c);
        self.emit(id, StreamEvent::Close, errno, out, pool);
        0
    }

    /// An owner's task: one [`Conns::poll`] with the router's pool, then
    /// `accept` (a server's listeners, with the owner's events and the
    /// batch for the Opens), and what came out pushed out of output 0.
    /// Returns whether anything was done.
    pub fn run_task(
        &mut self,
        budget: usize,
        ctx: &mut oxnet_graph::Ctx<'_>,
        accept: impl FnOnce(&mut Conns, Vec<(u32, u64)>, &mut PacketBatch, &Mempool) -> bool,
    ) -> bool {
        let mut out = PacketBatch::default();
        let pool = ctx.pool().clone();
        let (owner, work) = self.poll(budget, &mut out, &pool);
        let accepted = !owner.is_empty() && accept(self, owner, &mut out, &pool);
        if !out.is_empty() {
            ctx.push(0, out);
        }
        work || accepted
    }

    /// A stream packet pushed in (the owner has handled Open).
    pub fn input(&mut self, p: Packet, out: &mut PacketBatch, pool: &Mempool) {
        let id = stream::socket(&p);
        if let Some(f) = stream::flow(&p) {
            // A peer's Pause / Resume: whether to read this connection.
            if let Some(c) = self.table.get_mut(&id) {
                c.held = f == stream::Flow::Pause;
                if !c.held {
                    self.mark(id);
                }
            }
            return;
        }
        let Some(c) = self.table.get_mut(&id) else {
            // A Close for a connection gone already (an echo's wiring
            // sends every Close back) asks for nothing.
            if stream::event(&p) != StreamEvent::Close {
                self.stats.unknown += 1;
            }
            return;
        };
        match stream::event(&p) {
            StreamEvent::Data => {
                if c.shut_after || c.close_after || c.write_shut {
                    self.stats.write_drops += 1;
                    return;
                }
                if p.total_len() == 0 {
                    return;
                }
                // A chain's segments go one by one: a plain buffer as it
                // is, an attached one (a stored value) as a handle to its
                // buffer; none is copied ([`give`]).
                let mut segment = p;
                loop {
                    let rest = segment.take_next();
                    let len = segment.len();
                    if c.pending.is_empty() && !c.open_due {
                        match give(&c.stream, segment) {
                            Ok(()) => self.stats.bytes_out += len as u64,
                            Err((libc::EAGAIN, p)) => {
                                c.pending.push_back(p);
                                c.pending_bytes += len;
                            }
                            Err(_) => {
                                self.stats.write_drops += 1;
                                return;
                            }
                        }
                    } else {
                        c.pending.push_back(segment);
                        c.pending_bytes += len;
                    }
                    match rest {
                        Some(r) => segment = r,
                        None => break,
                    }
                }
                let pause = c.pending_bytes > self.max_pending && !c.paused;
                if pause {
                    c.paused = true;
                    self.stats.paused += 1;
                }
                // Pausing stops the connection's own data; what another
                // connection feeds it (a proxy's other side) is bounded
                // here: beyond four times the limit it ends, counted.
                // With FLOW_CONTROL the feeder is told to stop first.
                if c.pending_bytes > 4 * self.max_pending {
                    self.stats.overflows += 1;
                    self.remove(id, libc::ENOBUFS, out, pool);
                } else if pause && self.flow_signals {
                    self.emit(id, StreamEvent::Data, stream::Flow::Pause as i32, out, pool);
                }
            }
            StreamEvent::Eof => {
                c.shut_after = true;
                self.after_pending(id, out, pool);
            }
            StreamEvent::Close => {
                c.close_after = true;
                if c.open_due {
                    // Not connected yet: nothing to flush.
                    c.pending.clear();
                }
                self.after_pending(id, out, pool);
            }
            // A server ignores Open; a client handles it before this.
            StreamEvent::Open => {}
        }
    }
}

/// A control packet, or a flow signal (`Data` with the flow as `errno`).
fn control_packet(pool: &Mempool, id: u32, e: StreamEvent, errno: i32) -> Option<Packet> {
    if e == StreamEvent::Data {
        let f = if errno == stream::Flow::Pause as i32 {
            stream::Flow::Pause
        } else {
            stream::Flow::Resume
        };
        return stream::flow_signal(pool, id, f);
    }
    let mut p = stream::control(pool, id, e)?;
    stream::set_errno(&mut p, errno);
    Some(p)
}

/// Gives one segment to the stack without a copy: a plain buffer as it is
/// (`TcpStream::try_send_packet`); an attached segment that covers its
/// whole buffer as another handle to that buffer
/// (`TcpStream::try_send_shared`), so a value stored once is sent on
/// many connections at once. An attached range of a buffer is copied by
/// the stack (counted in its zero-copy statistics).
fn give(stream: &TcpStream, p: Packet) -> Result<(), (i32, Packet)> {
    if let Some((buffer, offset)) = SharedBuffer::of_attached(&p) {
        if offset == 0 && buffer.len() == p.len() {
            return stream.try_send_shared(buffer).map_err(|(e, _)| (e, p));
        }
    }
    stream.try_send_packet(p)
}
