//! The cache's state machine, apart from the element (so that tests
//! drive it with stream packets and a clock of their own): client
//! connections in, responses out; misses and revalidations as
//! connections to the origin through a client element.

use super::conn::Conn;
use super::fetch::Fetch;
use super::object::{Freshness, Object};
use super::request::{self, Parsed, Request};
use super::response::{self, Common};
use super::store::Store;
use super::{Config, Stats};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch};
use std::collections::HashMap;

/// The time, both clocks: the router's (µs since it started; timeouts)
/// and the wall clock (seconds since the epoch; Date, freshness).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub us: u64,
    pub secs: u64,
}

/// What a step pushes out: to the clients' owner (output 0), to the
/// origin's client element (output 1).
#[derive(Default)]
pub struct Out {
    pub client: PacketBatch,
    pub origin: PacketBatch,
}

/// The cache.
pub struct Cache {
    pub config: Config,
    pub store: Store,
    pub stats: Stats,
    pub(super) conns: HashMap<u32, Conn>,
    pub(super) fetches: HashMap<u32, Fetch>,
    /// The fetch filling each target.
    pub(super) filling: HashMap<String, u32>,
    pub(super) last_fetch: u32,
    pub(super) date: super::date::DateCache,
    /// Closes that found the pool empty, pushed by the next tick.
    owed_closes: Vec<u32>,
}

impl Cache {
    pub fn new(config: Config, store: Store) -> Cache {
        Cache {
            config,
            store,
            stats: Stats::default(),
            conns: HashMap::new(),
            fetches: HashMap::new(),
            filling: HashMap::new(),
            last_fetch: 0,
            date: Default::default(),
            owed_closes: Vec::new(),
        }
    }

    /// Client connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Origin fetches under way.
    pub fn fetching(&self) -> usize {
        self.fetches.len()
    }

    /// A stream packet from the clients' owner (input 0).
    pub fn client_input(&mut self, p: Packet, now: Now, pool: &Mempool, out: &mut Out) {
        let id = stream::socket(&p);
        match stream::event(&p) {
            StreamEvent::Open => {
                self.conns.insert(id, Conn::new(now.us));
            }
            StreamEvent::Data => {
                let limit = self.config.limits.max_header_bytes * 2;
                let Some(c) = self.conns.get_mut(&id) else { return };
                c.last_us = now.us;
                if c.done {
                    // Nothing more is read: a lingering close discards.
                    return;
                }
                for seg in p.segments() {
                    c.inbuf.extend_from_slice(seg);
                }
                c.discard_body();
                if c.started_us.is_none() && !c.inbuf.is_empty() {
                    c.started_us = Some(now.us);
                }
                self.pump(id, now, pool, out);
                // Requests behind a full queue wait in `inbuf`; beyond a
                // bound the connection ends (counted).
                if self.conns.get(&id).is_some_and(|c| c.inbuf.len() > limit) {
                    self.stats.overflows += 1;
                    self.close(id, pool, out);
                }
            }
            StreamEvent::Eof => {
                let Some(c) = self.conns.get_mut(&id) else { return };
                // A head cut short is dropped; what is queued is answered.
                c.done = true;
                c.clear_input();
                self.flush(id, now, pool, out);
            }
            StreamEvent::Close => {
                self.conns.remove(&id);
            }
        }
    }

    /// Parses and answers what `id` has received, in order, until the
    /// queue is full or the bytes run out.
    pub(super) fn pump(&mut self, id: u32, now: Now, pool: &Mempool, out: &mut Out) {
        loop {
            let Some(c) = self.conns.get_mut(&id) else { return };
            if c.done || c.queue.len() >= self.config.max_pipeline || c.skip > 0 {
                break;
            }
            if c.inbuf.is_empty() {
                c.started_us = None;
                break;
            }
            // A head ends with an empty line: with no '\n' since the last
            // try it is still partial, so a head trickled byte by byte
            // costs a parse per line (at most MAX_HEADERS), not per byte.
            // Control bytes are parsed at once: they make it invalid (a
            // TLS ClientHello on the plain port gets its 400 now).
            let fresh = &c.inbuf[c.scanned.min(c.inbuf.len())..];
            let control = |b: &u8| (*b < 0x20 && *b != b'\t' && *b != b'\r') || *b == 0x7f;
            if c.inbuf.len() <= self.config.limits.max_header_bytes && !fresh.iter().any(|b| *b == b'\n' || control(b))
            {
                break;
            }
            match request::parse(&c.inbuf, &self.config.limits) {
                Parsed::Partial => {
                    c.scanned = c.inbuf.len();
                    break;
                }
                Parsed::Fatal(status) => {
                    c.clear_input();
                    self.refuse(id, status, false, false, now, pool);
                }
                Parsed::Refuse {
                    status,
                    keep_alive,
                    len,
                    body,
                } => {
                    c.consume(len, body);
                    self.stats.requests += 1;
                    self.refuse(id, status, keep_alive, false, now, pool);
                }
                Parsed::Request(r, len) => {
                    c.consume(len, r.body);
                    c.started_us = (!c.inbuf.is_empty()).then_some(now.us);
                    self.stats.requests += 1;
                    self.serve(id, r, now, pool, out);
                }
            }
            // The next request's clock starts with its first byte.
            if let Some(c) = self.conns.get_mut(&id) {
                c.started_us = (!c.inbuf.is_empty()).then_some(now.us);
            }
        }
        self.flush(id, now, pool, out);
    }

    /// Queues an error response.
    pub(super) fn refuse(&mut self, id: u32, status: u16, keep_alive: bool, head: bool, now: Now, pool: &Mempool) {
        let date = self.date.get(now.secs).to_string();
        let c = Common {
            date: &date,
            keep_alive,
            head,
        };
        let packets = response::error(status, &c, pool);
        self.count(status, packets.is_some());
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.push_slot(Some(packets.unwrap_or_default()), keep_alive);
        }
    }

    pub(super) fn count(&mut self, status: u16, made: bool) {
        *self.stats.statuses.entry(status).or_default() += 1;
        if !made {
            self.stats.alloc_failures += 1;
        }
    }

    /// A GET or HEAD: from memory, or from the origin.
    fn serve(&mut self, id: u32, r: Request, now: Now, pool: &Mempool, out: &mut Out) {
        let key = self.key(&r.target);
        let has_origin = self.config.origin.is_some();
        let fresh = match key.as_deref().and_then(|k| self.store.get(k)) {
            None => None,
            Some(o) => Some(!has_origin || (o.freshness.fresh(now.secs, r.max_age) && !r.no_cache)),
        };
        match (fresh, has_origin) {
            (Some(true), _) => {
                self.stats.hits += 1;
                let key = key.unwrap_or_default();
                let packets = self.answer(&key, None, &r, now, pool);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.push_slot(Some(packets), r.keep_alive);
                }
            }
            (None, false) => {
                self.stats.misses += 1;
                self.refuse(id, 404, r.keep_alive, r.head, now, pool);
            }
            (stale, true) => {
                if stale.is_some() {
                    self.stats.revalidations += 1;
                } else {
                    self.stats.misses += 1;
                }
                let key = key.unwrap_or_else(|| r.target.clone());
                self.fetch(id, key, stale.is_some(), r, now, pool, out);
            }
            (Some(false), false) => unreachable!("without an origin everything stored is fresh"),
        }
    }

    /// The stored key for a target: itself, or a directory's index.
    fn key(&mut self, target: &str) -> Option<String> {
        if self.store.get(target).is_some() {
            return Some(target.to_string());
        }
        let path = target.split('?').next().unwrap_or(target);
        let index = format!("{path}index.html");
        (path.ends_with('/') && self.store.get(&index).is_some()).then_some(index)
    }

    /// The response to `r` from the object stored under `key` (or
    /// `object`, not stored): 304 if a condition says so (RFC 9110
    /// §13.2.2: If-None-Match first, If-Modified-Since only without it).
    pub(super) fn answer(
        &mut self,
        key: &str,
        object: Option<&Object>,
        r: &Request,
        now: Now,
        pool: &Mempool,
    ) -> Vec<Packet> {
        let date = self.date.get(now.secs).to_string();
        let c = Common {
            date: &date,
            keep_alive: r.keep_alive,
            head: r.head,
        };
        if object.is_none() {
            self.store.get(key);
        }
        let stored = if object.is_none() { self.store.peek(key) } else { None };
        let Some(o) = object.or(stored) else {
            let status = 502;
            let packets = response::error(status, &c, pool);
            *self.stats.statuses.entry(status).or_default() += 1;
            return packets.unwrap_or_default();
        };
        let not_modified = o.status == 200
            && match (&r.if_none_match, r.if_modified_since) {
                (Some(list), _) => o.none_match(list),
                (None, Some(since)) => o.not_modified_since(since),
                (None, None) => false,
            };
        let status = if not_modified { 304 } else { o.status };
        let mut copies = 0;
        let packets = response::object(o, status, now.secs, &c, pool, self.store.attach_pool(), &mut copies);
        self.stats.copies += copies;
        *self.stats.statuses.entry(status).or_default() += 1;
        if packets.is_none() {
            self.stats.alloc_failures += 1;
        }
        packets.unwrap_or_default()
    }

    /// Pushes the responses that are ready, in order; after the last one
    /// of a connection that ends, our Eof.
    pub(super) fn flush(&mut self, id: u32, now: Now, pool: &Mempool, out: &mut Out) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        while c.queue.front().is_some_and(|s| s.packets.is_some()) {
            let Some(slot) = c.queue.pop_front() else { break };
            let packets = slot.packets.unwrap_or_default();
            if packets.is_empty() {
                // Its packets could not be made (the pool was empty,
                // counted): ending the connection beats leaving the
                // client waiting for an answer that never comes.
                return self.close(id, pool, out);
            }
            for p in packets {
                out.client.push(stream::data(p, id));
            }
            c.last_us = now.us;
            if !slot.keep_alive {
                c.done = true;
                c.queue.clear();
                c.clear_input();
            }
        }
        if c.done && c.queue.is_empty() && c.shut_us.is_none() {
            c.shut_us = Some(now.us);
            match stream::control(pool, id, StreamEvent::Eof) {
                Some(p) => out.client.push(p),
                None => self.stats.alloc_failures += 1,
            }
        }
    }

    /// Ends connection `id` now.
    fn close(&mut self, id: u32, pool: &Mempool, out: &mut Out) {
        self.conns.remove(&id);
        match stream::close(pool, id, 0) {
            Some(p) => out.client.push(p),
            None => {
                self.stats.alloc_failures += 1;
                self.owed_closes.push(id);
            }
        }
    }

    /// The timeouts, looked at periodically: a request head not complete
    /// TIMEOUT after its first byte (slowloris) gets 408 and the end; a
    /// connection idle for IDLE, or lingering after our end for TIMEOUT,
    /// is closed; an origin silent for TIMEOUT gives its waiters 504.
    pub fn tick(&mut self, now: Now, pool: &Mempool, out: &mut Out) {
        while let Some(&id) = self.owed_closes.last() {
            let Some(p) = stream::close(pool, id, 0) else { break };
            out.client.push(p);
            self.owed_closes.pop();
        }
        let (timeout, idle) = (self.config.timeout_us, self.config.idle_us);
        let mut slow = Vec::new();
        let mut ended = Vec::new();
        for (&id, c) in &self.conns {
            let since = |t: u64| now.us.saturating_sub(t);
            if let Some(t) = c.shut_us {
                if since(t) > timeout {
                    ended.push(id);
                }
            } else if c.started_us.is_some_and(|t| since(t) > timeout)
                && !c.done
                && c.queue.len() < self.config.max_pipeline
            {
                // A head still arriving (not requests waiting behind a
                // full queue: that is the origin's slowness).
                slow.push(id);
            } else if c.queue.is_empty() && c.inbuf.is_empty() && since(c.last_us) > idle {
                self.stats.timeouts += 1;
                ended.push(id);
            }
        }
        for id in ended {
            self.close(id, pool, out);
        }
        for id in slow {
            self.stats.timeouts += 1;
            if let Some(c) = self.conns.get_mut(&id) {
                c.clear_input();
                c.started_us = None;
            }
            self.refuse(id, 408, false, false, now, pool);
            self.flush(id, now, pool, out);
        }
        let late: Vec<u32> = self
            .fetches
            .iter()
            .filter(|(_, f)| now.us.saturating_sub(f.started_us) > timeout)
            .map(|(&fid, _)| fid)
            .collect();
        for fid in late {
            self.stats.origin_errors += 1;
            self.fail(fid, 504, true, now, pool, out);
        }
    }

    /// Asserts the bounds that keep memory finite whatever clients and
    /// origins send (the fuzz target's properties): unparsed bytes per
    /// connection, responses owed, fetches, the store's memory.
    pub fn check_bounds(&self) {
        let limits = &self.config.limits;
        for (id, c) in &self.conns {
            assert!(
                c.inbuf.len() <= 2 * limits.max_header_bytes,
                "connection {id}: {} bytes unparsed",
                c.inbuf.len()
            );
            assert!(
                c.queue.len() <= self.config.max_pipeline,
                "connection {id}: {} responses owed",
                c.queue.len()
            );
        }
        assert!(self.filling.len() == self.fetches.len(), "one fetch per target filling");
        for f in self.fetches.values() {
            assert!(f.received <= self.config.max_object && f.head_buf.len() <= super::origin::MAX_HEAD + 65536);
        }
        assert!(self.store.memory_used() <= self.store.memory_limit());
    }

    /// Stores `object` under `key` for good (DIR's files).
    pub fn pin(&mut self, key: &str, object: Object) {
        self.store.insert(key, object, true);
    }

    /// An object of `bytes` in the store's memory (DIR's files).
    pub fn make_object(&mut self, bytes: &[u8], headers: &super::object::Headers) -> Option<Object> {
        let mut chunks = Vec::new();
        self.store.write(&mut chunks, bytes)?;
        Some(Object::new(200, chunks, headers, Freshness::FOREVER, false))
    }
}
