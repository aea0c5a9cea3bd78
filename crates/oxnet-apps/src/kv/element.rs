//! `MemcachedServer([MEMORY], [ITEM_SIZE_MAX], [MAX_CONNECTIONS],
//! [VERBOSE], [PORT], [UDP_PORT])`: a key-value server speaking
//! memcached's text, meta and binary protocols, between a TCPEpollServer's
//! output and its input:
//!
//! ```text
//! srv :: TCPEpollServer(11211);
//! srv -> kv :: MemcachedServer(MEMORY 64) -> srv;
//! ```
//!
//! Input 0 takes stream packets (Open, Data, Eof, Close of each
//! connection); output 0 gives the replies (Data, in request order) and a
//! Close for a connection that quits, sends a line too long, overflows its
//! buffer, or sends Eof (after its replies).
//!
//! Arguments (memcached's flags): MEMORY (-m, MiB of item memory, 64),
//! ITEM_SIZE_MAX (-I, bytes, 1048576), MAX_CONNECTIONS (-c, 1024), VERBOSE
//! (-v, 0; 2 prints every connection and request on standard error, as
//! memcached -vv; the `verbosity` command sets it too), PORT (reported by
//! `stats settings`) and UDP_PORT: not 0, the element also answers
//! memcached's UDP protocol on that port itself, every IPv4 and IPv6
//! address, through the router's UDP sockets (UDPInput, UDPOutput; see
//! `super::udp`).
//!
//! Handlers: `connections`, `curr_items`, `bytes`, `evictions`, `get_hits`,
//! `get_misses`, `cmd_get`, `cmd_set`, `requests`, `protocol_errors`,
//! `rejected`, `overflows`, `unknown`, `value_copies`, `alloc_failures`,
//! `free_buffers` (value buffers free), `stats` (memcached's `stats` as
//! "name value" lines), `udp_requests`, `udp_datagrams_out`,
//! `udp_dropped` (datagrams that were no request: too short, a
//! multi-datagram request, reserved bytes set), `udp_send_errors`.

use super::conns::KvServer;
use super::info::ServerInfo;
use super::store::StoreConfig;
use oxnet_driver::{MemoryKind, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct MemcachedServer {
    config: StoreConfig,
    info: ServerInfo,
    server: Option<KvServer>,
    /// The value memory follows the router's pool's kind (DMA-able for a
    /// device): the first push makes the store again if it differs.
    kind_checked: bool,
    /// memcached's UDP protocol on UDP_PORT (not 0), [`super::udp`].
    udp: Option<super::udp::UdpFront>,
}

/// Unix seconds now.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Element for MemcachedServer {
    fn class_name(&self) -> &'static str {
        "MemcachedServer"
    }
    fn port_count(&self) -> &'static str {
        "1/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let num = |a: &mut Args, key: &str| -> Result<Option<u64>, String> {
            a.keyword(key)
                .map(|v| args::unsigned(&v).map_err(|e| format!("{key}: {e}")))
                .transpose()
        };
        if let Some(m) = num(a, "MEMORY")? {
            if m == 0 || m > 1 << 20 {
                return Err(format!("MEMORY: {m} MiB is not a usable size"));
            }
            self.config.memory_limit = (m as usize) << 20;
        }
        if let Some(i) = num(a, "ITEM_SIZE_MAX")? {
            // memcached -I: at least 1 KiB, at most 1 GiB.
            if !(1024..=1 << 30).contains(&i) {
                return Err(format!("ITEM_SIZE_MAX: {i} must be between 1024 and 1073741824"));
            }
            self.config.item_size_max = i as usize;
        }
        if self.config.item_size_max > self.config.memory_limit / 2 {
            return Err(format!(
                "ITEM_SIZE_MAX {} is more than half of MEMORY ({} bytes)",
                self.config.item_size_max, self.config.memory_limit
            ));
        }
        if let Some(c) = num(a, "MAX_CONNECTIONS")? {
            self.info.max_connections = c.max(1);
        }
        if let Some(v) = num(a, "VERBOSE")? {
            self.info.verbosity = v as u32;
        }
        if let Some(p) = num(a, "PORT")? {
            self.info.port = p as u16;
        }
        if let Some(p) = num(a, "UDP_PORT")? {
            self.info.udp_port = p as u16;
        }
        self.info.started = unix_now();
        self.config.memory_kind = MemoryKind::Plain;
        self.server = Some(KvServer::new(self.config.clone(), self.info.clone())?);
        Ok(())
    }
    fn initialize(&mut self, _ports: &oxnet_graph::element::Ports) -> Result<(), String> {
        if self.info.udp_port != 0 {
            self.udp = Some(super::udp::UdpFront::bind(self.info.udp_port)?);
        }
        Ok(())
    }
    fn has_task(&self) -> bool {
        self.info.udp_port != 0
    }
    /// Its work comes from this router's UDP sockets only.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let pool = ctx.pool().clone();
        self.check_kind(&pool);
        let (Some(udp), Some(server)) = (self.udp.as_mut(), self.server.as_mut()) else {
            return false;
        };
        udp.poll(server, unix_now(), &pool)
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        self.check_kind(&pool);
        let Some(server) = self.server.as_mut() else {
            batch.clear();
            return;
        };
        let now = unix_now();
        // From the graph's bin of empty batches: every request has a
        // reply, and a fresh batch was an allocation and a free each.
        let mut out = oxnet_graph::element::take_batch(batch.len());
        let n = batch.len();
        for p in batch.drain_front(n) {
            server.input(p, now, &pool, &mut out);
        }
        if !out.is_empty() {
            ctx.push(0, out);
        } else {
            oxnet_graph::element::recycle_batch(out);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("connections", true, false),
            ("curr_items", true, false),
            ("bytes", true, false),
            ("evictions", true, false),
            ("get_hits", true, false),
            ("get_misses", true, false),
            ("cmd_get", true, false),
            ("cmd_set", true, false),
            ("requests", true, false),
            ("protocol_errors", true, false),
            ("rejected", true, false),
            ("overflows", true, false),
            ("unknown", true, false),
            ("value_copies", true, false),
            ("alloc_failures", true, false),
            ("free_buffers", true, false),
            ("stats", true, false),
            ("udp_requests", true, false),
            ("udp_datagrams_out", true, false),
            ("udp_dropped", true, false),
            ("udp_send_errors", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        if let Some(rest) = name.strip_prefix("udp_") {
            let u = self.udp.as_ref();
            let v = |f: fn(&super::udp::UdpFront) -> u64| u.map_or(0, f);
            return Some(
                match rest {
                    "requests" => v(|u| u.requests),
                    "datagrams_out" => v(|u| u.datagrams_out),
                    "dropped" => v(|u| u.dropped),
                    "send_errors" => v(|u| u.send_errors),
                    _ => return None,
                }
                .to_string(),
            );
        }
        self.read_store_handler(name)
    }
}

impl MemcachedServer {
    /// The first time the router's pool is seen: the value memory takes
    /// its kind (DMA-able for a device).
    fn check_kind(&mut self, pool: &oxnet_driver::Mempool) {
        if !self.kind_checked {
            self.kind_checked = true;
            let kind = pool.memory_kind();
            if kind != self.config.memory_kind && kind != MemoryKind::CpuOnly {
                self.config.memory_kind = kind;
                match KvServer::new(self.config.clone(), self.info.clone()) {
                    Ok(s) => self.server = Some(s),
                    Err(e) => {
                        eprintln!("MemcachedServer: value memory of the router's kind: {e}; keeping plain memory")
                    }
                }
            }
        }
    }

    fn read_store_handler(&self, name: &str) -> Option<String> {
        let s = self.server.as_ref()?;
        let st = &s.store.stats;
        Some(match name {
            "connections" => s.connections().to_string(),
            "curr_items" => st.curr_items.to_string(),
            "bytes" => st.bytes.to_string(),
            "evictions" => st.evictions.to_string(),
            "get_hits" => st.get_hits.to_string(),
            "get_misses" => st.get_misses.to_string(),
            "cmd_get" => st.cmd_get.to_string(),
            "cmd_set" => st.cmd_set.to_string(),
            "requests" => s.counters.requests.to_string(),
            "protocol_errors" => s.info.protocol_errors.to_string(),
            "rejected" => s.info.rejected_connections.to_string(),
            "overflows" => s.counters.overflows.to_string(),
            "unknown" => s.counters.unknown.to_string(),
            "value_copies" => s.counters.value_copies.to_string(),
            "alloc_failures" => s.counters.alloc_failures.to_string(),
            "free_buffers" => s.store.free_buffers().to_string(),
            "stats" => super::info::general(&s.store, &s.info, unix_now())
                .into_iter()
                .map(|(k, v)| format!("{k} {v}\n"))
                .collect(),
            _ => return None,
        })
    }
}
