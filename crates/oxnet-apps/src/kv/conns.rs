//! The server's connections: stream packets in ([`crate::stream`]),
//! requests parsed per connection in the protocol its first byte names
//! (0x80: binary; anything else: text and meta, as memcached's
//! auto-negotiation), replies out as stream packets in request order.
//!
//! A reply's bytes are copied into packets of the router's pool; a stored
//! value goes out as attached segments of its own buffers
//! ([`oxnet_driver::SharedBuffer::attach_all`]), chained behind them, so
//! a GET sends the value without a copy and the value outlives a
//! replacement until the peer has acknowledged it (TCPEpollServer gives
//! such a segment to the stack as another handle to the buffer).
//!
//! Bounds: a connection buffers at most `buf_limit` bytes of incomplete
//! requests (a request line plus the largest item); more ends it
//! (`overflows`). Connections beyond `max_connections` are closed at once
//! (`rejected`).

use super::binary;
use super::info::{Env, ServerInfo};
use super::reply::{Piece, Reply};
use super::store::{Store, StoreConfig};
use super::text::{self, Step, TextState};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{AttachPool, Mempool, Packet, PacketBatch};
use oxnet_stack::FlowMap;

/// Segments per Data chain out (a long value is several chains).
const CHAIN_MAX: usize = 256;
/// Attached-segment headers: values being handed to connections at once.
const ATTACH_HEADERS: usize = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// No byte seen yet.
    Unknown,
    Text,
    Binary,
}

struct Conn {
    protocol: Protocol,
    buf: Vec<u8>,
    text: TextState,
    /// A Close was sent: what comes after is dropped.
    closing: bool,
}

/// Drops and oddities, each counted (handlers of MemcachedServer).
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Packets for a connection not in the table.
    pub unknown: u64,
    /// Connections ended for buffering more than the limit.
    pub overflows: u64,
    /// Values copied because no attached-segment header was free.
    pub value_copies: u64,
    /// Replies lost because the router's pool was empty (the connection
    /// is ended).
    pub alloc_failures: u64,
    /// Requests processed.
    pub requests: u64,
}

/// The key-value server's state: the store, the connections.
pub struct KvServer {
    pub store: Store,
    pub info: ServerInfo,
    pub counters: Counters,
    conns: FlowMap<u32, Conn>,
    attach: AttachPool,
    buf_limit: usize,
    /// Reused for every Data packet: the replies, the segments out.
    reply: Reply,
    segments: Vec<Packet>,
}

impl KvServer {
    pub fn new(config: StoreConfig, info: ServerInfo) -> Result<KvServer, String> {
        // A request line (a get with many keys included) plus the largest
        // data block.
        let buf_limit = config.item_size_max + 64 * 1024;
        let store = Store::new(config)?;
        let attach = AttachPool::new("kv-attach", ATTACH_HEADERS).map_err(|e| e.to_string())?;
        Ok(KvServer {
            store,
            info,
            counters: Counters::default(),
            conns: FlowMap::default(),
            attach,
            buf_limit,
            reply: Reply::default(),
            segments: Vec::new(),
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Panics if a bound does not hold (fuzzing, tests): every
    /// connection's buffer within the limit, the store's bytes within
    /// the memory limit, every value buffer either free, held by an item
    /// or by `in_flight` replies' handles.
    pub fn check_bounds(&self, in_flight: usize) {
        for (id, c) in &self.conns {
            assert!(
                c.buf.len() <= self.buf_limit,
                "connection {id} buffers {} bytes",
                c.buf.len()
            );
        }
        self.store.check_bounds(in_flight);
    }

    /// Takes one stream packet from TCPEpollServer; what to send back goes
    /// to `out`. `now` is unix seconds.
    pub fn input(&mut self, p: Packet, now: u64, pool: &Mempool, out: &mut PacketBatch) {
        let id = stream::socket(&p);
        match stream::event(&p) {
            StreamEvent::Open => {
                if self.conns.len() as u64 >= self.info.max_connections {
                    self.info.rejected_connections += 1;
                    if let Some(c) = stream::close(pool, id, 0) {
                        out.push(c);
                    }
                    return;
                }
                self.info.curr_connections += 1;
                self.info.total_connections += 1;
                if self.info.verbosity > 1 {
                    eprintln!("<{id} new auto-negotiating client connection");
                }
                self.conns.insert(
                    id,
                    Conn {
                        protocol: Protocol::Unknown,
                        buf: Vec::new(),
                        text: TextState::default(),
                        closing: false,
                    },
                );
            }
            StreamEvent::Data => self.data(id, p, now, pool, out),
            StreamEvent::Eof => {
                // The peer sends nothing more: what it sent is answered;
                // end the connection after those replies.
                if let Some(c) = self.conns.get_mut(&id) {
                    if !c.closing {
                        c.closing = true;
                        if let Some(p) = stream::close(pool, id, 0) {
                            out.push(p);
                        }
                    }
                }
            }
            StreamEvent::Close => {
                if self.conns.remove(&id).is_some() {
                    self.info.curr_connections -= 1;
                    if self.info.verbosity > 1 {
                        eprintln!("<{id} connection closed.");
                    }
                }
            }
        }
    }

    fn data(&mut self, id: u32, p: Packet, now: u64, pool: &Mempool, out: &mut PacketBatch) {
        let Some(c) = self.conns.get_mut(&id) else {
            self.counters.unknown += 1;
            return;
        };
        if c.closing {
            return;
        }
        self.info.bytes_read += p.total_len() as u64;
        let reply = &mut self.reply;
        reply.clear();
        let mut env = Env {
            store: &mut self.store,
            info: &mut self.info,
            now,
        };
        let close;
        if c.buf.is_empty() && !p.is_chained() {
            // The common case: whole requests in one packet, parsed where
            // they are; only a rest is copied.
            let (used, cl) = process(id, c, &p, &mut env, reply, self.buf_limit, &mut self.counters);
            c.buf.extend_from_slice(&p[used..]);
            close = cl;
        } else {
            p.copy_chain_to(&mut c.buf);
            let buf = std::mem::take(&mut c.buf);
            let (used, cl) = process(id, c, &buf, &mut env, reply, self.buf_limit, &mut self.counters);
            c.buf = buf;
            c.buf.drain(..used);
            close = cl;
        }
        drop(p);
        // A large value's room is not kept by an idle connection.
        if c.buf.is_empty() && c.buf.capacity() > 64 * 1024 {
            c.buf = Vec::new();
        }
        let mut close = close;
        if c.buf.len() > self.buf_limit {
            self.counters.overflows += 1;
            if self.info.verbosity > 0 {
                eprintln!("<{id} buffers more than {} bytes: closed", self.buf_limit);
            }
            close = true;
        }
        if !reply.is_empty() {
            self.info.bytes_written += reply.len() as u64;
            if !emit(
                reply,
                &mut self.segments,
                id,
                pool,
                &self.attach,
                out,
                &mut self.counters,
            ) {
                close = true;
            }
            // The packets hold the values now.
            reply.clear();
        }
        if close {
            c.closing = true;
            c.buf = Vec::new();
            if let Some(p) = stream::close(pool, id, 0) {
                out.push(p);
            }
        }
    }
}

/// Runs requests from the front of `buf`: the bytes used and whether the
/// connection is to end.
fn process(
    id: u32,
    c: &mut Conn,
    buf: &[u8],
    env: &mut Env<'_>,
    reply: &mut Reply,
    limit: usize,
    counters: &mut Counters,
) -> (usize, bool) {
    let mut pos = 0;
    while pos < buf.len() || c.text.swallow > 0 {
        if c.protocol == Protocol::Unknown {
            c.protocol = if buf[pos] == binary::REQUEST_MAGIC {
                Protocol::Binary
            } else {
                Protocol::Text
            };
        }
        let step = match c.protocol {
            Protocol::Binary => binary::step(&buf[pos..], &mut c.text.swallow, env, reply),
            _ => text::step(&buf[pos..], &mut c.text, env, reply, limit),
        };
        match step {
            Step::NeedMore => break,
            Step::Done { consumed, close } => {
                counters.requests += 1;
                if env.info.verbosity > 1 {
                    log_request(id, c.protocol, &buf[pos..pos + consumed]);
                }
                pos += consumed;
                if close {
                    return (pos, true);
                }
            }
        }
    }
    (pos, false)
}

/// memcached -vv: each request on standard error ("<" and its line; a
/// binary request's opcode and key length).
fn log_request(id: u32, protocol: Protocol, request: &[u8]) {
    match protocol {
        Protocol::Binary if request.len() >= 24 && request[0] == binary::REQUEST_MAGIC => {
            let keylen = u16::from_be_bytes([request[2], request[3]]);
            eprintln!("<{id} binary opcode 0x{:02x} key length {keylen}", request[1]);
        }
        Protocol::Binary => {}
        _ => {
            let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            eprintln!("<{id} {}", String::from_utf8_lossy(&line[..line.len().min(256)]));
        }
    }
}

/// Sends `reply` on connection `id` as Data chains: bytes copied into
/// packets of `pool`, values as attached segments (copied, counted, if no
/// header is free). False if the pool ran dry (the reply is incomplete).
fn emit(
    reply: &Reply,
    segments: &mut Vec<Packet>,
    id: u32,
    pool: &Mempool,
    attach: &AttachPool,
    out: &mut PacketBatch,
    counters: &mut Counters,
) -> bool {
    segments.clear();
    let ok = reply.for_each(|piece| match piece {
        Piece::Bytes(b) => copy_into(b, pool, segments),
        Piece::Value(v) => v.buffers.iter().all(|buffer| match buffer.attach_all(attach) {
            Ok(seg) => {
                segments.push(seg);
                true
            }
            Err(_) => {
                counters.value_copies += 1;
                copy_into(buffer, pool, segments)
            }
        }),
    });
    if !ok {
        segments.clear();
        counters.alloc_failures += 1;
        return false;
    }
    // Chains of at most CHAIN_MAX segments, each built from the back so
    // that every append walks one segment; the last chain first.
    let first = out.len();
    let mut chain: Option<Packet> = None;
    let mut in_chain = 0;
    while let Some(mut seg) = segments.pop() {
        if in_chain == CHAIN_MAX {
            out.push(stream::data(chain.take().expect("a chain"), id));
            in_chain = 0;
        }
        if let Some(tail) = chain.take() {
            seg.append(tail);
        }
        chain = Some(seg);
        in_chain += 1;
    }
    if let Some(head) = chain {
        out.push(stream::data(head, id));
    }
    // Pushed last chain first: put them in order.
    reverse_tail(out, first);
    true
}

/// Reverses the packets of `out` from index `first` on.
fn reverse_tail(out: &mut PacketBatch, first: usize) {
    let n = out.len() - first;
    if n > 1 {
        let mut tail: Vec<Packet> = out.drain_front(out.len()).collect();
        tail[first..].reverse();
        for p in tail {
            out.push(p);
        }
    }
}

/// Copies `bytes` into packets of `pool` (as many as it takes).
fn copy_into(mut bytes: &[u8], pool: &Mempool, segments: &mut Vec<Packet>) -> bool {
    while !bytes.is_empty() {
        let Ok(mut p) = pool.alloc() else { return false };
        let n = bytes.len().min(p.capacity());
        if p.set_len(n).is_err() {
            return false;
        }
        p.copy_from_slice(&bytes[..n]);
        segments.push(p);
        bytes = &bytes[n..];
    }
    true
}

#[cfg(test)]
#[path = "conns_tests.rs"]
mod tests;
