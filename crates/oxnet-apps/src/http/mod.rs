//! HTTPCache: an HTTP/1.1 cache server as one element between
//! TCPEpollServer and itself (issue 12 item 4; ClickNF §4, Figure 10's
//! server), with misses filled from an origin through TCPEpollClient.
//! [`element`] documents the element; [`cache`] is its state machine;
//! requests are parsed by httparse ([`request`]), objects live in
//! DMA-able shared buffers ([`store`], [`object`]) and leave as attached
//! segments ([`response`]).

pub mod cache;
pub mod conn;
pub mod date;
pub mod dir;
pub mod element;
mod fetch;
pub mod fuzzing;
pub mod object;
pub mod origin;
pub mod request;
pub mod response;
pub mod store;

#[cfg(test)]
mod tests;

use oxnet_graph::elements::Module;
use oxnet_stack::wire::IpEndpoint;
use std::collections::BTreeMap;

pub const MODULE: Module = Module {
    classes: &["HTTPCache"],
    create: |class| {
        (class == "HTTPCache")
            .then(|| Box::new(element::HttpCache::default()) as Box<dyn oxnet_graph::element::Element>)
    },
};

/// Bounds on what a client may send.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A request head's bytes (request line and fields): beyond, 431.
    pub max_header_bytes: usize,
    /// Header fields per request: beyond, 431.
    pub max_headers: usize,
    /// A request body's bytes (discarded; GET and HEAD have none): beyond, 413.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_header_bytes: 8192,
            max_headers: 64,
            max_body: 64 * 1024,
        }
    }
}

/// The cache's settings (the element's arguments).
#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    /// Where misses are fetched from (None: a miss is 404).
    pub origin: Option<IpEndpoint>,
    /// A request head must be complete this long after its first byte
    /// (slowloris); lingering closes and origin fetches end after it too.
    pub timeout_us: u64,
    /// A connection with nothing to do is closed after this long.
    pub idle_us: u64,
    /// Largest object fetched from the origin (bigger ones: 502).
    pub max_object: usize,
    /// Responses owed per connection (pipelined requests waiting for the
    /// origin); more requests wait unparsed.
    pub max_pipeline: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            limits: Limits::default(),
            origin: None,
            timeout_us: 10_000_000,
            idle_us: 60_000_000,
            max_object: 1 << 20,
            max_pipeline: 32,
        }
    }
}

/// What the cache counts (the element's handlers).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Requests parsed (answered or refused).
    pub requests: u64,
    /// Served from memory, fresh.
    pub hits: u64,
    /// Not in memory (404 without an origin, a fetch with one).
    pub misses: u64,
    /// Stored but stale: asked the origin again (conditionally).
    pub revalidations: u64,
    /// Connections opened to the origin.
    pub fetches: u64,
    /// Origins that failed, answered badly or too late.
    pub origin_errors: u64,
    /// Responses by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Connections closed by the timeouts (slowloris 408s and idle ones).
    pub timeouts: u64,
    /// Connections ended because their unparsed requests outgrew the bound.
    pub overflows: u64,
    /// Bodies copied because no attached-segment header was free.
    pub copies: u64,
    /// Packets that could not be made (the pool was empty).
    pub alloc_failures: u64,
}

impl Stats {
    /// Responses with status 400 or above.
    pub fn errors(&self) -> u64 {
        self.statuses.range(400..).map(|(_, n)| n).sum()
    }
}
