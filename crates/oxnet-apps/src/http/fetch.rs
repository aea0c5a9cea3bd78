//! The cache's origin side: a miss or a revalidation is a connection
//! through the client element (an `Open` request with the destination,
//! then the request), the origin's answer parsed ([`super::origin`]),
//! stored if RFC 9111 allows, and given to every request that waits for
//! it, in each connection's order.

use super::cache::{Cache, Now, Out};
use super::object::Object;
use super::origin;
use super::request::Request;
use super::response::{self, Common};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet};

/// A request that waits for the origin.
pub(super) struct Waiter {
    pub(super) conn: u32,
    pub(super) seq: u64,
    pub(super) req: Request,
}

/// One connection to the origin, filling one target.
pub(super) struct Fetch {
    pub(super) key: String,
    pub(super) waiters: Vec<Waiter>,
    /// It revalidates the stored object (a conditional request).
    pub(super) revalidate: bool,
    /// A waiter said no-store (RFC 9111 §5.2.1.5).
    pub(super) no_store: bool,
    pub(super) started_us: u64,
    pub(super) head_buf: Vec<u8>,
    pub(super) head: Option<origin::Head>,
    pub(super) body: Vec<Packet>,
    pub(super) received: usize,
}

impl Cache {
    /// Asks the origin for `key` (or joins the fetch under way).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fetch(
        &mut self,
        id: u32,
        key: String,
        revalidate: bool,
        r: Request,
        now: Now,
        pool: &Mempool,
        out: &mut Out,
    ) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let seq = c.push_slot(None, r.keep_alive);
        let no_store = r.no_store;
        if let Some(fetch) = self.filling.get(&key).and_then(|f| self.fetches.get_mut(f)) {
            fetch.no_store |= no_store;
            fetch.waiters.push(Waiter { conn: id, seq, req: r });
            return;
        }
        let Some(origin) = self.config.origin else { return };
        let fid = loop {
            self.last_fetch = self.last_fetch.wrapping_add(1);
            if self.last_fetch != 0 && !self.fetches.contains_key(&self.last_fetch) {
                break self.last_fetch;
            }
        };
        let host = if r.host.is_empty() {
            format!("{}:{}", origin.addr, origin.port)
        } else {
            r.host.clone()
        };
        let stored = if revalidate { self.store.peek(&key) } else { None };
        let bytes = origin::request(&r.target, &host, stored);
        let open = stream::open_request(pool, fid, origin);
        let data = pool.alloc().ok().and_then(|mut p| {
            p.set_len(bytes.len()).ok()?;
            p.copy_from_slice(&bytes);
            Some(stream::data(p, fid))
        });
        self.fetches.insert(
            fid,
            Fetch {
                key: key.clone(),
                waiters: vec![Waiter { conn: id, seq, req: r }],
                revalidate,
                no_store,
                started_us: now.us,
                head_buf: Vec::new(),
                head: None,
                body: Vec::new(),
                received: 0,
            },
        );
        self.filling.insert(key, fid);
        match (open, data) {
            (Some(open), Some(data)) => {
                self.stats.fetches += 1;
                out.origin.push(open);
                // The client element keeps data pushed before its Open
                // comes out and sends it once connected.
                out.origin.push(data);
            }
            _ => {
                self.stats.alloc_failures += 1;
                self.fail(fid, 502, false, now, pool, out);
            }
        }
    }

    /// A stream packet from the origin's client element (input 1).
    pub fn origin_input(&mut self, p: Packet, now: Now, pool: &Mempool, out: &mut Out) {
        let fid = stream::socket(&p);
        if !self.fetches.contains_key(&fid) {
            return;
        }
        match stream::event(&p) {
            StreamEvent::Open => {}
            StreamEvent::Data => {
                for seg in p.segments() {
                    if !self.fetches.contains_key(&fid) {
                        return;
                    }
                    self.origin_bytes(fid, seg, now, pool, out);
                }
            }
            StreamEvent::Eof => self.origin_end(fid, true, now, pool, out),
            StreamEvent::Close => {
                if stream::errno(&p) != 0 {
                    self.stats.origin_errors += 1;
                    return self.fail(fid, 502, false, now, pool, out);
                }
                self.origin_end(fid, false, now, pool, out)
            }
        }
    }

    fn origin_bytes(&mut self, fid: u32, mut bytes: &[u8], now: Now, pool: &Mempool, out: &mut Out) {
        let max_object = self.config.max_object;
        let Some(f) = self.fetches.get_mut(&fid) else { return };
        if f.head.is_none() {
            let before = f.head_buf.len();
            f.head_buf.extend_from_slice(bytes);
            match origin::parse(&f.head_buf, now.secs) {
                origin::Parsed::Partial => return,
                origin::Parsed::Invalid => {
                    self.stats.origin_errors += 1;
                    return self.fail(fid, 502, true, now, pool, out);
                }
                origin::Parsed::Head(h, len) => {
                    if h.length.is_some_and(|n| n > max_object) {
                        self.stats.origin_errors += 1;
                        return self.fail(fid, 502, true, now, pool, out);
                    }
                    bytes = &bytes[len - before..];
                    f.head = Some(h);
                    f.head_buf = Vec::new();
                }
            }
        }
        let Some(h) = &f.head else { return };
        let room = h.length.unwrap_or(max_object).saturating_sub(f.received);
        if bytes.len() > room && h.length.is_none() {
            self.stats.origin_errors += 1;
            return self.fail(fid, 502, true, now, pool, out);
        }
        let take = &bytes[..bytes.len().min(room)];
        f.received += take.len();
        let mut body = std::mem::take(&mut f.body);
        let written = self.store.write(&mut body, take);
        let Some(f) = self.fetches.get_mut(&fid) else { return };
        f.body = body;
        if written.is_none() {
            // No memory even after evicting everything evictable.
            self.stats.alloc_failures += 1;
            return self.fail(fid, 503, true, now, pool, out);
        }
        let complete = f
            .head
            .as_ref()
            .is_some_and(|h| h.status == 304 || h.length == Some(f.received));
        if complete {
            self.complete(fid, true, now, pool, out);
        }
    }

    /// The origin ended its side (`eof`) or the connection (a clean Close).
    fn origin_end(&mut self, fid: u32, eof: bool, now: Now, pool: &Mempool, out: &mut Out) {
        let Some(f) = self.fetches.get(&fid) else { return };
        let whole = f
            .head
            .as_ref()
            .is_some_and(|h| h.status == 304 || h.length.is_none_or(|n| n == f.received));
        if whole {
            self.complete(fid, eof, now, pool, out);
        } else {
            self.stats.origin_errors += 1;
            self.fail(fid, 502, eof, now, pool, out);
        }
    }

    /// Ends fetch `fid` (its connection too, if `open`).
    fn take_fetch(&mut self, fid: u32, open: bool, pool: &Mempool, out: &mut Out) -> Option<Fetch> {
        let f = self.fetches.remove(&fid)?;
        if self.filling.get(&f.key) == Some(&fid) {
            self.filling.remove(&f.key);
        }
        if open {
            match stream::close(pool, fid, 0) {
                Some(c) => out.origin.push(c),
                None => self.stats.alloc_failures += 1,
            }
        }
        Some(f)
    }

    /// The origin's answer is whole: stored if it may be, and given to
    /// every waiter.
    fn complete(&mut self, fid: u32, open: bool, now: Now, pool: &Mempool, out: &mut Out) {
        let Some(f) = self.take_fetch(fid, open, pool, out) else {
            return;
        };
        let Some(h) = f.head else { return };
        let object = if h.status == 304 && f.revalidate {
            // RFC 9111 §4.3.4: the stored response is fresh again.
            match self.store.get(&f.key) {
                Some(o) => {
                    let old = o.freshness.lifetime;
                    o.freshness = h.freshness(now.secs);
                    if !h.explicit {
                        o.freshness.lifetime = old;
                    }
                    None
                }
                None => {
                    self.stats.origin_errors += 1;
                    return self.answer_waiters(f.waiters, None, "", now, pool, out);
                }
            }
        } else {
            let o = Object::new(h.status, f.body, &h.headers, h.freshness(now.secs), true);
            let keep = h.storable && !f.no_store && (h.lifetime > 0 || o.etag.is_some() || o.last_modified.is_some());
            if keep {
                self.store.insert(&f.key, o, false);
                None
            } else {
                self.store.remove(&f.key);
                Some(o)
            }
        };
        self.answer_waiters(f.waiters, object.as_ref(), &f.key, now, pool, out);
    }

    fn answer_waiters(
        &mut self,
        waiters: Vec<Waiter>,
        object: Option<&Object>,
        key: &str,
        now: Now,
        pool: &Mempool,
        out: &mut Out,
    ) {
        for w in waiters {
            if !self.conns.contains_key(&w.conn) {
                continue;
            }
            let packets = self.answer(key, object, &w.req, now, pool);
            if let Some(c) = self.conns.get_mut(&w.conn) {
                c.fill(w.seq, packets);
            }
            self.flush(w.conn, now, pool, out);
            self.pump(w.conn, now, pool, out);
        }
    }

    /// The fetch failed: each waiter gets `status`.
    pub(super) fn fail(&mut self, fid: u32, status: u16, open: bool, now: Now, pool: &Mempool, out: &mut Out) {
        let Some(f) = self.take_fetch(fid, open, pool, out) else {
            return;
        };
        let date = self.date.get(now.secs).to_string();
        for w in f.waiters {
            let c = Common {
                date: &date,
                keep_alive: w.req.keep_alive,
                head: w.req.head,
            };
            let packets = response::error(status, &c, pool);
            self.count(status, packets.is_some());
            if let Some(conn) = self.conns.get_mut(&w.conn) {
                conn.fill(w.seq, packets.unwrap_or_default());
            }
            self.flush(w.conn, now, pool, out);
            self.pump(w.conn, now, pool, out);
        }
    }
}
