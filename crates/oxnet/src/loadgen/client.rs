//! One client thread: its connections, driven by a [`Net`]'s readiness
//! (epoll), in short or persistent mode, closed or open loop (module
//! documentation of [`super`]).
//!
//! Every request is accounted once: answered (its latency recorded),
//! failed (counted by kind), still in flight when the run's time ends
//! (neither), or, in the open loop, never sent (`unsent`). With
//! `--requests N`, each request and each failed connect of a persistent
//! connection takes one of the N, so a run against a refused port ends.

use super::kernel::KernelNet;
use super::kv::{Op, Outcome, Parsed, Workload};
use super::net::{Net, TIMER_KEY};
use super::options::{Mode, ThreadPlan};
use super::schedule::Schedule;
use super::summary::Summary;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Most events one wait returns.
const MAX_EVENTS: usize = 256;
/// How often timeouts and reconnects are looked at.
const SCAN_EVERY: Duration = Duration::from_millis(5);
/// A persistent connection that failed is opened again after this.
const RECONNECT_AFTER: Duration = Duration::from_millis(10);
/// The most scheduled requests waiting for a connection (open loop);
/// more are counted as unsent at once, so memory stays bounded.
const MAX_PENDING: usize = 1 << 20;
/// Bytes moved per read or send call.
const CHUNK: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No socket (short mode: a free slot; persistent: to reconnect).
    Closed,
    /// The handshake is under way.
    Connecting,
    /// Persistent: connected, no request.
    Idle,
    /// The request is being written.
    Sending,
    /// Waiting for the echo.
    Receiving,
}

struct Conn<S> {
    fd: Option<S>,
    state: State,
    /// The events registered with epoll (0: not registered).
    events: u32,
    /// When the request in flight counts from, if there is one.
    origin: Option<Instant>,
    /// When the request in flight started on this connection (its
    /// connect in short mode, its first byte in persistent mode): the
    /// origin of the service time, mutilate's view.
    started: Instant,
    /// When the connect or request in flight times out.
    deadline: Instant,
    /// Persistent: when to reconnect after a failure.
    retry_at: Option<Instant>,
    /// The request's number (its payload pattern).
    seq: u64,
    sent: usize,
    got: usize,
    /// memcached: the request in flight, its bytes, and its answer so far.
    op: Option<Op>,
    request: Vec<u8>,
    response: Vec<u8>,
}

/// The byte at offset `i` of request `seq`: a different pattern per
/// request, so stale or misplaced echoes are caught.
fn pattern(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(7).wrapping_add(i as u64) as u8) ^ 0x5a
}

struct Client<'a, N: Net> {
    plan: &'a ThreadPlan,
    issued: &'a AtomicU64,
    net: &'a mut N,
    conns: Vec<Conn<N::Socket>>,
    /// Connections free for a request (persistent idle, short free slots).
    free: Vec<usize>,
    /// Open loop: scheduled times waiting for a free connection.
    pending: VecDeque<Instant>,
    /// No request may start any more (limit reached or time up).
    exhausted: bool,
    next_seq: u64,
    buf: Vec<u8>,
    out: Summary,
    /// memcached's requests (None: echo).
    kv: Option<Workload>,
}

/// Runs thread `plan`'s share of the load on kernel sockets until the
/// run's end; `issued` counts requests over all threads (for
/// `--requests`).
pub fn run_thread(plan: &ThreadPlan, issued: &AtomicU64, start: Instant) -> Result<Summary, String> {
    run_on(&mut KernelNet::new()?, plan, issued, start)
}

/// Runs thread `plan`'s share of the load on `net` from `start` (a time
/// of `net`'s clock) until the run's end.
pub fn run_on<N: Net>(net: &mut N, plan: &ThreadPlan, issued: &AtomicU64, start: Instant) -> Result<Summary, String> {
    let o = &plan.options;
    let open_loop = plan.rate > 0.0;
    let mut schedule = open_loop.then(|| Schedule::new(start, plan.rate, o.arrival.clone(), plan.seed));
    let end = o.duration.and_then(|d| start.checked_add(d));
    let mut c = Client {
        plan,
        issued,
        net,
        conns: (0..plan.connections)
            .map(|_| Conn {
                fd: None,
                state: State::Closed,
                events: 0,
                origin: None,
                started: start,
                deadline: start,
                retry_at: None,
                seq: 0,
                sent: 0,
                got: 0,
                op: None,
                request: Vec::new(),
                response: Vec::new(),
            })
            .collect(),
        free: Vec::new(),
        pending: VecDeque::new(),
        exhausted: false,
        next_seq: 0,
        buf: vec![
            0;
            if o.kv.is_some() {
                CHUNK
            } else {
                CHUNK.min(o.size.max(1))
            }
        ],
        out: Summary::new(),
        kv: o
            .kv
            .clone()
            .map(|kv| Workload::new(kv, plan.thread, o.threads, plan.seed)),
    };
    // Start: persistent connections open; short slots start requests
    // (closed loop) or wait for the schedule (open loop).
    let now = c.net.now();
    for i in 0..c.conns.len() {
        match (o.mode, open_loop) {
            (Mode::Persistent, _) => c.open(i, now),
            (Mode::Short, false) => c.next_closed_loop(i, now),
            (Mode::Short, true) => c.free.push(i),
        }
    }
    let mut events = Vec::with_capacity(MAX_EVENTS);
    let mut next_scan = now + SCAN_EVERY;
    let mut armed: Option<Instant> = None;
    loop {
        let now = c.net.now();
        if end.is_some_and(|e| now >= e) || crate::signal::stop_requested() {
            break;
        }
        match schedule.as_mut() {
            Some(s) => {
                c.schedule_due(s, now);
                c.dispatch(now);
            }
            None => c.restart_free(now),
        }
        if now >= next_scan {
            c.scan(now);
            next_scan = now + SCAN_EVERY;
        }
        if c.exhausted && c.in_flight() == 0 && c.pending.is_empty() {
            break;
        }
        if let Some(s) = schedule.as_ref() {
            if !c.exhausted && armed != Some(s.peek()) {
                c.net.arm_timer(s.peek()).map_err(|e| format!("timer: {e}"))?;
                armed = Some(s.peek());
            }
        }
        let mut wait = next_scan.saturating_duration_since(now);
        if !open_loop && !c.exhausted && !c.free.is_empty() {
            // A connect failed at once: try again without sleeping.
            wait = Duration::ZERO;
        }
        if let Some(e) = end {
            wait = wait.min(e.saturating_duration_since(now));
        }
        c.net.wait(&mut events, wait).map_err(|e| format!("epoll_wait: {e}"))?;
        let now = c.net.now();
        for &(flags, key) in &events {
            if key == TIMER_KEY {
                armed = None;
            } else if let Some(i) = usize::try_from(key).ok().filter(|&i| i < c.conns.len()) {
                c.on_event(i, flags, now);
            }
        }
    }
    c.out.unsent += c.pending.len() as u64;
    for conn in &mut c.conns {
        if let Some(s) = conn.fd.take() {
            c.net.close(s);
        }
    }
    Ok(c.out)
}

impl<N: Net> Client<'_, N> {
    /// Takes one request from the run's budget (`--requests`).
    fn claim(&mut self) -> bool {
        if self.exhausted {
            return false;
        }
        if self.kv.as_ref().is_some_and(|kv| kv.done()) {
            // --loadonly: every key of this thread was SET.
            self.exhausted = true;
            return false;
        }
        let ok = match self.plan.options.requests {
            Some(limit) => self.issued.fetch_add(1, Ordering::Relaxed) < limit,
            None => true,
        };
        if !ok {
            self.exhausted = true;
        }
        ok
    }

    fn in_flight(&self) -> usize {
        self.conns.iter().filter(|c| c.origin.is_some()).count()
    }

    /// Open loop: moves every scheduled time that has come into the
    /// pending queue.
    fn schedule_due(&mut self, s: &mut Schedule, now: Instant) {
        while !self.exhausted && s.peek() <= now {
            if !self.claim() {
                break;
            }
            let t = s.take();
            if self.pending.len() >= MAX_PENDING {
                self.out.unsent += 1;
            } else {
                self.pending.push_back(t);
            }
        }
    }

    /// Open loop: gives pending requests to free connections.
    fn dispatch(&mut self, now: Instant) {
        while !self.pending.is_empty() {
            let Some(i) = self.free.pop() else { break };
            let t = self.pending.pop_front().unwrap_or(now);
            match self.plan.options.mode {
                Mode::Short => self.connect_for_request(i, t, now),
                Mode::Persistent => self.begin_request(i, t, now),
            }
        }
    }

    /// Closed loop: connection `i` is free; start its next request if the
    /// budget allows.
    fn next_closed_loop(&mut self, i: usize, now: Instant) {
        if !self.claim() {
            return;
        }
        match self.plan.options.mode {
            Mode::Short => self.connect_for_request(i, now, now),
            Mode::Persistent => self.begin_request(i, now, now),
        }
    }

    /// Connection `i` is free for a request (after connect, answer or a
    /// short connection's error). The main loop hands it its next
    /// request: starting it here could recurse without bound when
    /// connects fail at once (an unreachable network).
    fn free_conn(&mut self, i: usize) {
        self.free.push(i);
    }

    /// Closed loop: starts the next request on every free connection.
    fn restart_free(&mut self, now: Instant) {
        for i in std::mem::take(&mut self.free) {
            if self.exhausted {
                self.free.push(i);
            } else {
                self.next_closed_loop(i, now);
            }
        }
    }

    fn register(&mut self, i: usize, events: u32) {
        let c = &mut self.conns[i];
        let Some(fd) = c.fd.as_ref() else { return };
        let r = if c.events != events {
            self.net.watch(fd, events, i as u64, c.events != 0)
        } else {
            Ok(())
        };
        match r {
            Ok(()) => c.events = events,
            Err(e) => {
                self.out.errors.count_io("epoll_ctl", &e);
            }
        }
    }

    /// Starts a connect on slot `i` (persistent: no request yet).
    fn open(&mut self, i: usize, now: Instant) {
        self.start_connect(i, None, now);
    }

    /// Short mode: a request that starts with its connect.
    fn connect_for_request(&mut self, i: usize, origin: Instant, now: Instant) {
        self.start_connect(i, Some(origin), now);
    }

    fn start_connect(&mut self, i: usize, origin: Option<Instant>, now: Instant) {
        let timeout = self.plan.options.timeout;
        let c = &mut self.conns[i];
        c.origin = origin;
        c.started = now;
        c.retry_at = None;
        c.deadline = now + timeout;
        match self.net.connect(&self.plan.options.target) {
            Ok(fd) => {
                c.fd = Some(fd);
                c.events = 0;
                c.state = State::Connecting;
                self.register(i, (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32);
            }
            Err(e) => {
                let what = format!("connect to {}", self.plan.options.target);
                self.fail(i, &what, &e, now);
            }
        }
    }

    /// Sends a request on connected connection `i`.
    fn begin_request(&mut self, i: usize, origin: Instant, now: Instant) {
        let c = &mut self.conns[i];
        c.origin = Some(origin);
        if self.plan.options.mode == Mode::Persistent {
            c.started = now;
        }
        c.deadline = now + self.plan.options.timeout;
        c.seq = self.next_seq;
        self.next_seq += 1;
        c.sent = 0;
        c.got = 0;
        c.response.clear();
        if let Some(kv) = self.kv.as_mut() {
            let op = kv.next_op();
            kv.encode(op, c.seq as u32, &mut c.request);
            c.op = Some(op);
        }
        c.state = State::Sending;
        self.send_more(i, now);
    }

    /// The bytes of a request: memcached's command, or `--size` bytes of
    /// the echo pattern.
    fn request_len(&self, i: usize) -> usize {
        match self.kv {
            Some(_) => self.conns[i].request.len(),
            None => self.plan.options.size,
        }
    }

    fn send_more(&mut self, i: usize, now: Instant) {
        let size = self.request_len(i);
        let kv = self.kv.is_some();
        loop {
            let c = &mut self.conns[i];
            let Some(fd) = c.fd.as_ref() else { return };
            if c.sent == size {
                c.state = State::Receiving;
                self.register(i, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
                return;
            }
            let n = (size - c.sent).min(self.buf.len());
            let bytes = if kv {
                &c.request[c.sent..c.sent + n]
            } else {
                for (k, b) in self.buf[..n].iter_mut().enumerate() {
                    *b = pattern(c.seq, c.sent + k);
                }
                &self.buf[..n]
            };
            match self.net.send(fd, bytes) {
                Ok(w) => {
                    c.sent += w;
                    self.out.bytes_sent += w as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Read the echo while waiting for room: a large
                    // request would otherwise fill both directions'
                    // buffers and stall (the server stops reading when
                    // its replies cannot go out).
                    self.register(i, (libc::EPOLLOUT | libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
                    return;
                }
                Err(e) => return self.fail(i, "send", &e, now),
            }
        }
    }

    fn receive(&mut self, i: usize, now: Instant) {
        if self.kv.is_some() {
            return self.receive_answer(i, now);
        }
        let size = self.plan.options.size;
        loop {
            let c = &mut self.conns[i];
            let Some(fd) = c.fd.as_ref() else { return };
            let want = (size - c.got).min(self.buf.len());
            if want == 0 {
                return;
            }
            match self.net.read(fd, &mut self.buf[..want]) {
                Ok(0) => {
                    let e = io::Error::from_raw_os_error(libc::ECONNRESET);
                    return self.fail(i, "the server closed before the whole echo", &e, now);
                }
                Ok(n) => {
                    self.out.bytes_received += n as u64;
                    let (seq, got) = (c.seq, c.got);
                    let same = self.buf[..n]
                        .iter()
                        .enumerate()
                        .all(|(k, &b)| b == pattern(seq, got + k));
                    if !same {
                        self.out.errors.corrupt += 1;
                        self.out.errors.note(|| "the echo differs from the request".into());
                        c.origin = None;
                        return self.close_after_error(i, now);
                    }
                    c.got += n;
                    if c.got == size {
                        return self.complete(i, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => return self.fail(i, "receive", &e, now),
            }
        }
    }

    /// memcached: reads what has come of the answer to connection `i`'s
    /// request and checks it ([`super::kv`]); an answer followed by
    /// more bytes (nothing was asked for them) is an error.
    fn receive_answer(&mut self, i: usize, now: Instant) {
        let Some(kv) = self.kv.as_ref() else { return };
        loop {
            let c = &mut self.conns[i];
            let Some(fd) = c.fd.as_ref() else { return };
            let Some(op) = c.op else { return };
            let limit = kv.max_response(op);
            match self.net.read(fd, &mut self.buf) {
                Ok(0) => {
                    let e = io::Error::from_raw_os_error(libc::ECONNRESET);
                    return self.fail(i, "the server closed before the whole answer", &e, now);
                }
                Ok(n) => {
                    self.out.bytes_received += n as u64;
                    c.response.extend_from_slice(&self.buf[..n]);
                    let verdict = match kv.parse(op, c.seq as u32, &c.response) {
                        Parsed::Done { len, .. } if len != c.response.len() => {
                            Err("bytes after the answer that no request asked for".to_string())
                        }
                        Parsed::Done { outcome, .. } => Ok(Some(outcome)),
                        Parsed::Incomplete if c.response.len() > limit => {
                            Err(format!("an answer longer than {limit} bytes"))
                        }
                        Parsed::Incomplete => Ok(None),
                        Parsed::Wrong(w) => Err(w.0),
                    };
                    match verdict {
                        Ok(None) => {}
                        Ok(Some(outcome)) => {
                            match outcome {
                                Outcome::Hit => self.out.gets += 1,
                                Outcome::Miss => {
                                    self.out.gets += 1;
                                    self.out.misses += 1;
                                }
                                Outcome::Stored => self.out.sets += 1,
                            }
                            c.op = None;
                            return self.complete(i, now);
                        }
                        Err(text) => {
                            self.out.errors.corrupt += 1;
                            self.out.errors.note(|| text);
                            c.origin = None;
                            c.op = None;
                            return self.close_after_error(i, now);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => return self.fail(i, "receive", &e, now),
            }
        }
    }

    fn complete(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        if let Some(origin) = c.origin.take() {
            let ns = |from: Instant| u64::try_from(now.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX);
            self.out.record(ns(origin), ns(c.started));
        }
        match self.plan.options.mode {
            Mode::Short => {
                if let Some(fd) = c.fd.take() {
                    // Close with a RST, as ClickNF's client.
                    self.net.abort(fd);
                }
                c.state = State::Closed;
                c.events = 0;
            }
            Mode::Persistent => c.state = State::Idle,
        }
        self.free_conn(i);
    }

    /// Counts error `e` of `what` on connection `i` and closes it.
    fn fail(&mut self, i: usize, what: &str, e: &io::Error, now: Instant) {
        // A persistent connect that fails takes a request from the budget,
        // so that a run against a dead server ends; past the budget it is
        // not counted.
        let counted = self.conns[i].origin.is_some() || self.plan.options.mode == Mode::Short || self.claim();
        if counted {
            self.out.errors.count_io(what, e);
        }
        self.conns[i].origin = None;
        self.close_after_error(i, now);
    }

    fn close_after_error(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        if let Some(fd) = c.fd.take() {
            self.net.abort(fd);
        }
        c.events = 0;
        c.state = State::Closed;
        match self.plan.options.mode {
            Mode::Short => self.free_conn(i),
            Mode::Persistent => c.retry_at = Some(now + RECONNECT_AFTER),
        }
    }

    fn on_event(&mut self, i: usize, flags: u32, now: Instant) {
        match self.conns[i].state {
            State::Connecting => {
                let Some(fd) = self.conns[i].fd.as_ref() else { return };
                if let Err(e) = self.net.take_error(fd) {
                    let what = format!("connect to {}", self.plan.options.target);
                    return self.fail(i, &what, &e, now);
                }
                self.out.connections += 1;
                match self.plan.options.mode {
                    Mode::Short => {
                        let origin = self.conns[i].origin.unwrap_or(now);
                        self.begin_request(i, origin, now);
                    }
                    Mode::Persistent => {
                        self.conns[i].state = State::Idle;
                        self.register(i, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
                        self.free_conn(i);
                    }
                }
            }
            State::Sending => {
                if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    self.receive(i, now);
                }
                if self.conns[i].state == State::Sending {
                    self.send_more(i, now);
                }
            }
            State::Receiving => self.receive(i, now),
            State::Idle => {
                // Nothing should arrive on an idle connection.
                let e = if flags & libc::EPOLLIN as u32 != 0 {
                    "the server sent bytes no request asked for, or closed"
                } else {
                    "the connection broke while idle"
                };
                self.out.errors.reset += 1;
                self.out.errors.note(|| e.to_string());
                self.free.retain(|&f| f != i);
                self.close_after_error(i, now);
            }
            State::Closed => {}
        }
    }

    /// Times out late connects and requests; reconnects persistent
    /// connections whose retry time came; in the open loop, counts
    /// scheduled requests that waited longer than the timeout as timed
    /// out.
    fn scan(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let busy = matches!(c.state, State::Connecting | State::Sending | State::Receiving);
            if busy && now >= c.deadline {
                let e = io::Error::from_raw_os_error(libc::ETIMEDOUT);
                self.fail(i, "no answer within --timeout", &e, now);
            } else if c.state == State::Closed && c.retry_at.is_some_and(|t| now >= t) {
                if self.exhausted {
                    self.conns[i].retry_at = None;
                } else {
                    self.open(i, now);
                }
            }
        }
        let timeout = self.plan.options.timeout;
        while self
            .pending
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) > timeout)
        {
            self.pending.pop_front();
            self.out.errors.timeout += 1;
            self.out
                .errors
                .note(|| "a scheduled request found no connection within --timeout".into());
        }
    }
}
