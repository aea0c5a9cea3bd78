//! `TCPEpollServer(PORT, [ADDR], [BUDGET], [MAX_PENDING], [FLOW_CONTROL], [socket
//! options])`: ClickNF's epoll server element (§4.1). It listens on PORT
//! (on ADDR, or on every IPv4 and IPv6 address), accepts every
//! connection, and carries the connections' bytes as stream packets
//! ([`crate::stream`]): output 0 gives Open, Data, Eof and Close of each
//! connection; input 0 takes Data, Eof and Close to write (Open is
//! ignored). `srv :: TCPEpollServer(7) -> srv` is an echo server.
//!
//! Arguments: BUDGET (packets read per round, 256), MAX_PENDING (bytes
//! of a connection's data waiting for room before it is no longer read,
//! 1 MiB), FLOW_CONTROL (false: with true, Pause and Resume signals go
//! out when a connection's waiting data crosses MAX_PENDING and its
//! half, for a proxy to pass to the other side; `crate::stream`),
//! BACKLOG (1024), and TCPEchoServer's socket options
//! (KEEPALIVE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT, USER_TIMEOUT), set on
//! every accepted connection.
//!
//! Handlers: `connections` (open now), `opened`, `closed`, `errors`
//! (closed with an error), `bytes_in`, `bytes_out`, `unknown` (packets
//! for no connection, dropped), `write_drops` (data for a connection
//! that failed or was shut down, dropped), `paused`, `overflows`
//! (connections ended with ENOBUFS: more than 4 × MAX_PENDING waited for
//! them, fed by another connection), `alloc_failures`.

use super::conns::{Conns, OWNER_BIT};
use super::handlers;
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::Ctx;
use oxnet_stack::app::sockopts::SocketOptions;
use oxnet_stack::tcp::socket::TcpListener;
use oxnet_stack::wire::IpEndpoint;

pub struct EpollServer {
    locals: Vec<IpEndpoint>,
    options: SocketOptions,
    backlog: usize,
    budget: usize,
    stack: Option<oxnet_stack::tcp::elements::Info>,
    listeners: Vec<TcpListener>,
    conns: Conns,
    last_id: u32,
}

impl Default for EpollServer {
    fn default() -> EpollServer {
        EpollServer {
            locals: Vec::new(),
            options: SocketOptions::default(),
            backlog: 1024,
            budget: 256,
            stack: None,
            listeners: Vec::new(),
            conns: Conns::new(1 << 20),
            last_id: 0,
        }
    }
}

/// BUDGET, MAX_PENDING and FLOW_CONTROL, shared with TCPEpollClient.
pub(super) fn read_limits(a: &mut Args, budget: &mut usize, conns: &mut Conns) -> Result<(), String> {
    if let Some(v) = a.keyword("BUDGET") {
        *budget = args::unsigned(&v).map_err(|e| format!("BUDGET: {e}"))?.max(1) as usize;
    }
    if let Some(v) = a.keyword("MAX_PENDING") {
        let max = args::unsigned(&v).map_err(|e| format!("MAX_PENDING: {e}"))?.max(1) as usize;
        *conns = Conns::new(max);
    }
    if let Some(v) = a.keyword("FLOW_CONTROL") {
        conns.flow_signals = args::boolean(&v).map_err(|e| format!("FLOW_CONTROL: {e}"))?;
    }
    Ok(())
}

impl Element for EpollServer {
    fn class_name(&self) -> &'static str {
        "TCPEpollServer"
    }
    fn port_count(&self) -> &'static str {
        "1/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.locals = oxnet_stack::app::server_endpoints(a)?;
        self.options = SocketOptions::configure(a)?;
        read_limits(a, &mut self.budget, &mut self.conns)?;
        if let Some(v) = a.keyword("BACKLOG") {
            self.backlog = args::unsigned(&v).map_err(|e| format!("BACKLOG: {e}"))?.max(1) as usize;
        }
        self.stack = Some(oxnet_stack::tcp::elements::info());
        Ok(())
    }
    fn initialize(&mut self, _ports: &oxnet_graph::element::Ports) -> Result<(), String> {
        let Some(stack) = &self.stack else { return Ok(()) };
        for &local in &self.locals {
            let listener = TcpListener::bind(stack, local, self.backlog).map_err(|e| {
                format!(
                    "cannot listen on {}:{}: {}",
                    local.addr,
                    local.port,
                    std::io::Error::from_raw_os_error(e)
                )
            })?;
            let data = OWNER_BIT | self.listeners.len() as u64;
            self.conns
                .epoll()
                .ctl(
                    oxnet_stack::tcp::epoll::EpollOp::Add,
                    &listener,
                    oxnet_stack::tcp::epoll::EPOLLIN,
                    data,
                )
                .map_err(|e| format!("epoll: {}", std::io::Error::from_raw_os_error(e)))?;
            self.listeners.push(listener);
        }
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router's stack only.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let (listeners, options, last_id) = (&self.listeners, &self.options, &mut self.last_id);
        self.conns.run_task(self.budget, ctx, |conns, owner, out, pool| {
            let mut work = false;
            // Level-triggered listeners: accept until none is left.
            for (_, data) in owner {
                let Some(listener) = listeners.get((data & !OWNER_BIT) as usize) else {
                    continue;
                };
                while let Ok(stream) = listener.try_accept() {
                    work = true;
                    options.apply(&stream);
                    let id = conns.free_id(last_id);
                    conns.insert(id, stream, true, out, pool);
                }
            }
            work
        })
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        let n = batch.len();
        for p in batch.drain_front(n) {
            self.conns.input(p, &mut out, &pool);
        }
        if !out.is_empty() {
            ctx.push(0, out);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        handlers::NAMES
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        handlers::read(&self.conns, name)
    }
}
