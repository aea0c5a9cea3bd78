//! `HTTPCache([DIR PATH], [ORIGIN ADDR:PORT], [MEMORY BYTES],
//! [MAX_OBJECT BYTES], [TIMEOUT SECS], [IDLE SECS], [MAX_HEADER BYTES],
//! [MAX_HEADERS N], [MAX_BODY BYTES], [PIPELINE N], [ATTACH N])`: an
//! HTTP/1.1 cache server on stream packets ([`crate::stream`]).
//!
//! Ports: input 0 takes the clients' connections from a TCPEpollServer
//! (or a TLSServer's plaintext side) and output 0 gives the responses
//! back to it: `srv :: TCPEpollServer(80) -> cache :: HTTPCache(DIR
//! /srv/www) -> srv`. With ORIGIN, output 1 asks a TCPEpollClient for
//! connections to the origin and input 1 takes its answers:
//! `cache[1] -> cli :: TCPEpollClient(SRC 10.0.0.2) -> [1]cache`. At
//! least one of DIR and ORIGIN is needed (`DIR ""` is none).
//!
//! What it serves: GET and HEAD (other methods of RFC 9110: 405 with
//! Allow; unknown ones: 501) of the objects in memory: DIR's files,
//! loaded at start and never evicted, and what misses brought from
//! ORIGIN (RFC 9111: stored unless no-store, private or Vary; fresh for
//! s-maxage, max-age, Expires - Date or a tenth of the time since
//! Last-Modified; revalidated with If-None-Match / If-Modified-Since
//! once stale, with no-cache, or when the client asks with no-cache or
//! max-age; evicted least recently used within MEMORY). Without ORIGIN
//! a miss is 404. Conditional requests get 304 (If-None-Match, else
//! If-Modified-Since: RFC 9110 §13.2.2). Keep-alive and pipelining
//! (responses in request order); HTTP/1.0 closes unless it asks for
//! keep-alive (RFC 9112 §9.3). Every response has Date (RFC 9110
//! §5.6.7's IMF-fixdate, from the router's clock), Content-Length (but
//! 304) and Connection. Refused: a malformed head (400, closed), a head
//! over MAX_HEADER bytes (8192) or MAX_HEADERS fields (64) (431,
//! closed), a body over MAX_BODY (65536) or chunked (413 / 501,
//! closed); a head not complete TIMEOUT (10 s) after its first byte
//! (slowloris) gets 408 and is closed; a connection idle for IDLE (60 s)
//! is closed. Up to PIPELINE (32) responses wait per connection.
//!
//! Bodies live in the element's own pool of DMA-able buffers (MEMORY
//! bytes, 64 MiB, plain memory: the router's domain) as
//! `oxnet_driver::SharedBuffer`s; a body over 1 KiB leaves as attached
//! segments of them (ATTACH headers, 16384), so no byte is copied here.
//!
//! Handlers: `requests`, `hits`, `misses`, `revalidations`, `fetches`,
//! `origin_errors`, `errors` (responses >= 400), `statuses` (one line
//! per status: `404 3`), `timeouts`, `overflows`, `evictions`,
//! `objects`, `memory_used`, `memory_limit` (bytes), `connections`,
//! `copies`, `alloc_failures`.

use super::cache::{Cache, Now, Out};
use super::store::Store;
use super::Config;
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, Ports};
use oxnet_graph::Ctx;
use oxnet_stack::wire::IpEndpoint;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Default)]
pub struct HttpCache {
    cache: Option<Cache>,
    /// The wall clock at the router's time 0 (µs since the epoch).
    epoch_us: u64,
    tick_us: u64,
}

/// A byte count with an optional K, M or G (binary) suffix.
fn bytes(key: &str, v: &str) -> Result<usize, String> {
    let v = v.trim();
    let (num, mult) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&v[..v.len() - 1], 1 << 10),
        Some('M') => (&v[..v.len() - 1], 1 << 20),
        Some('G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    let n = args::unsigned(num).map_err(|e| format!("{key}: {e}"))?;
    Ok((n as usize).saturating_mul(mult))
}

fn seconds_us(key: &str, v: &str) -> Result<u64, String> {
    let s = args::seconds(v).map_err(|e| format!("{key}: {e}"))?;
    Ok((s * 1e6) as u64)
}

impl HttpCache {
    fn now(&self, ctx: &Ctx<'_>) -> Now {
        let us = ctx.now_us();
        Now {
            us,
            secs: (self.epoch_us + us) / 1_000_000,
        }
    }

    fn send(out: Out, ctx: &mut Ctx<'_>) {
        if !out.client.is_empty() {
            ctx.push(0, out.client);
        }
        if !out.origin.is_empty() {
            ctx.push(1, out.origin);
        }
    }
}

impl Element for HttpCache {
    fn class_name(&self) -> &'static str {
        "HTTPCache"
    }
    fn port_count(&self) -> &'static str {
        "1-2/1-2"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let mut config = Config::default();
        // DIR "" is no directory (a configuration's default).
        let dir = args::opt(a.keyword("DIR"), args::string, "DIR")?.filter(|d| !d.is_empty());
        if let Some(v) = a.keyword("ORIGIN") {
            let addr: std::net::SocketAddr = v
                .parse()
                .map_err(|_| format!("ORIGIN: '{v}' is not ADDR:PORT ([ADDR]:PORT for IPv6)"))?;
            config.origin = Some(IpEndpoint::new(addr.ip(), addr.port()));
        }
        let memory = match a.keyword("MEMORY") {
            Some(v) => bytes("MEMORY", &v)?,
            None => 64 << 20,
        };
        if let Some(v) = a.keyword("MAX_OBJECT") {
            config.max_object = bytes("MAX_OBJECT", &v)?;
        }
        if let Some(v) = a.keyword("TIMEOUT") {
            config.timeout_us = seconds_us("TIMEOUT", &v)?.max(1000);
        }
        if let Some(v) = a.keyword("IDLE") {
            config.idle_us = seconds_us("IDLE", &v)?.max(1000);
        }
        if let Some(v) = a.keyword("MAX_HEADER") {
            config.limits.max_header_bytes = bytes("MAX_HEADER", &v)?.max(64);
        }
        if let Some(v) = a.keyword("MAX_HEADERS") {
            config.limits.max_headers =
                (args::unsigned(&v).map_err(|e| format!("MAX_HEADERS: {e}"))? as usize).clamp(1, 1024);
        }
        if let Some(v) = a.keyword("MAX_BODY") {
            config.limits.max_body = bytes("MAX_BODY", &v)?;
        }
        if let Some(v) = a.keyword("PIPELINE") {
            config.max_pipeline = (args::unsigned(&v).map_err(|e| format!("PIPELINE: {e}"))? as usize).max(1);
        }
        let attach = match a.keyword("ATTACH") {
            Some(v) => (args::unsigned(&v).map_err(|e| format!("ATTACH: {e}"))? as usize).max(1),
            None => 16384,
        };
        if dir.is_none() && config.origin.is_none() {
            return Err("DIR or ORIGIN is required (where objects come from)".into());
        }
        let name = format!("http-cache-{}", args::current_element());
        let store = Store::new(&name, memory, attach)?;
        let mut cache = Cache::new(config, store);
        if let Some(dir) = dir {
            super::dir::load(&mut cache, std::path::Path::new(&dir))?;
        }
        // Timeouts are looked at four times per shortest timeout, at
        // most once a second.
        self.tick_us = (cache.config.timeout_us.min(cache.config.idle_us) / 4).clamp(1000, 1_000_000);
        self.cache = Some(cache);
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        let origin = self.cache.as_ref().is_some_and(|c| c.config.origin.is_some());
        if origin && (ports.outputs() < 2 || ports.inputs() < 2) {
            return Err("ORIGIN needs output 1 and input 1 wired to a TCPEpollClient".into());
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.epoch_us = wall.saturating_sub(ctx.now_us());
        ctx.schedule_after_us(self.tick_us);
    }
    fn run_timer(&mut self, _timer: oxnet_graph::timer::TimerId, ctx: &mut Ctx<'_>) {
        let now = self.now(ctx);
        let pool = ctx.pool().clone();
        let mut out = Out::default();
        if let Some(cache) = &mut self.cache {
            cache.tick(now, &pool, &mut out);
        }
        Self::send(out, ctx);
        ctx.schedule_after_us(self.tick_us);
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let now = self.now(ctx);
        let pool = ctx.pool().clone();
        let mut out = Out::default();
        let Some(cache) = &mut self.cache else { return };
        let n = batch.len();
        for p in batch.drain_front(n) {
            if port == 0 {
                cache.client_input(p, now, &pool, &mut out);
            } else {
                cache.origin_input(p, now, &pool, &mut out);
            }
        }
        Self::send(out, ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("requests", true, false),
            ("hits", true, false),
            ("misses", true, false),
            ("revalidations", true, false),
            ("fetches", true, false),
            ("origin_errors", true, false),
            ("errors", true, false),
            ("statuses", true, false),
            ("timeouts", true, false),
            ("overflows", true, false),
            ("evictions", true, false),
            ("objects", true, false),
            ("memory_used", true, false),
            ("memory_limit", true, false),
            ("connections", true, false),
            ("copies", true, false),
            ("alloc_failures", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let c = self.cache.as_ref()?;
        let s = &c.stats;
        let n = match name {
            "requests" => s.requests,
            "hits" => s.hits,
            "misses" => s.misses,
            "revalidations" => s.revalidations,
            "fetches" => s.fetches,
            "origin_errors" => s.origin_errors,
            "errors" => s.errors(),
            "statuses" => {
                return Some(s.statuses.iter().map(|(k, v)| format!("{k} {v}\n")).collect());
            }
            "timeouts" => s.timeouts,
            "overflows" => s.overflows,
            "evictions" => c.store.evictions,
            "objects" => c.store.len() as u64,
            "memory_used" => c.store.memory_used() as u64,
            "memory_limit" => c.store.memory_limit() as u64,
            "connections" => c.connections() as u64,
            "copies" => s.copies,
            "alloc_failures" => s.alloc_failures,
            _ => return None,
        };
        Some(n.to_string())
    }
}
