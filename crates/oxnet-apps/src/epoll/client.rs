//! `TCPEpollClient(SRC ADDR, [SRC6 ADDR], [BUDGET], [MAX_PENDING],
//! [FLOW_CONTROL], [socket options])`: ClickNF's epoll client element (§4.1, the
//! outgoing half of Figure 11's proxy). An `Open` pushed into input 0
//! whose bytes name a destination ([`crate::stream::open_request`])
//! opens a connection from SRC (IPv4) or SRC6 (IPv6), with an ephemeral
//! port that RSS maps back to this core (`TcpStream::connect`, ClickNF
//! §5.2), under the requester's id; output 0 answers with Open once it
//! is established, or with Close(errno) if it fails (ECONNREFUSED,
//! ETIMEDOUT, EADDRNOTAVAIL without a source address of the family,
//! EINVAL for a request without a destination, EEXIST for an id in
//! use). Then, as TCPEpollServer: Data, Eof and Close both ways. Data
//! pushed before the Open comes out waits and goes once connected.
//!
//! Handlers: TCPEpollServer's, and `refused` (connect requests answered
//! at once with Close: no destination, id in use, no source address).

use super::conns::Conns;
use super::handlers;
use crate::stream::{self, StreamEvent};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::Args;
use oxnet_graph::element::Element;
use oxnet_graph::Ctx;
use oxnet_stack::app::sockopts::SocketOptions;
use oxnet_stack::tcp::socket::TcpStream;
use oxnet_stack::wire::{IpAddress, IpEndpoint};

pub struct EpollClient {
    src4: Option<IpAddress>,
    src6: Option<IpAddress>,
    options: SocketOptions,
    budget: usize,
    stack: Option<oxnet_stack::tcp::elements::Info>,
    conns: Conns,
    refused: u64,
}

impl Default for EpollClient {
    fn default() -> EpollClient {
        EpollClient {
            src4: None,
            src6: None,
            options: SocketOptions::default(),
            budget: 256,
            stack: None,
            conns: Conns::new(1 << 20),
            refused: 0,
        }
    }
}

fn address(a: &mut Args, key: &str, v4: bool) -> Result<Option<IpAddress>, String> {
    let Some(v) = a.keyword(key) else { return Ok(None) };
    let ip: std::net::IpAddr = v.parse().map_err(|_| format!("{key}: '{v}' is not an IP address"))?;
    if ip.is_ipv4() != v4 {
        return Err(format!("{key}: '{v}' is not an IPv{} address", if v4 { 4 } else { 6 }));
    }
    Ok(Some(IpAddress::from(ip)))
}

impl EpollClient {
    /// A connect request: the connection, or the errno of its refusal.
    fn open(&mut self, p: &oxnet_driver::Packet) -> Result<TcpStream, i32> {
        let id = stream::socket(p);
        if id == 0 || self.conns.contains(id) {
            return Err(libc::EEXIST);
        }
        let remote: IpEndpoint = stream::parse_open_request(p).ok_or(libc::EINVAL)?;
        let src = if remote.addr.is_ipv4() { self.src4 } else { self.src6 };
        let src = src.ok_or(libc::EADDRNOTAVAIL)?;
        let stack = self.stack.as_ref().ok_or(libc::ENETDOWN)?;
        let stream = TcpStream::connect(stack, IpEndpoint { addr: src, port: 0 }, remote)?;
        self.options.apply(&stream);
        Ok(stream)
    }
}

impl Element for EpollClient {
    fn class_name(&self) -> &'static str {
        "TCPEpollClient"
    }
    fn port_count(&self) -> &'static str {
        "1/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.src4 = address(a, "SRC", true)?;
        self.src6 = address(a, "SRC6", false)?;
        if self.src4.is_none() && self.src6.is_none() {
            return Err("SRC or SRC6 is required (the address connections come from)".into());
        }
        self.options = SocketOptions::configure(a)?;
        super::server::read_limits(a, &mut self.budget, &mut self.conns)?;
        self.stack = Some(oxnet_stack::tcp::elements::info());
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
        self.conns.run_task(self.budget, ctx, |_, _, _, _| false)
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        let n = batch.len();
        for p in batch.drain_front(n) {
            if stream::event(&p) != StreamEvent::Open {
                self.conns.input(p, &mut out, &pool);
                continue;
            }
            let id = stream::socket(&p);
            match self.open(&p) {
                Ok(s) => self.conns.insert(id, s, false, &mut out, &pool),
                Err(e) => {
                    self.refused += 1;
                    match stream::close(&pool, id, e) {
                        Some(c) => out.push(c),
                        None => self.conns.stats.alloc_failures += 1,
                    }
                }
            }
        }
        if !out.is_empty() {
            ctx.push(0, out);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        const NAMES: &[(&str, bool, bool)] = handlers::conn_handlers!("refused");
        NAMES
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        if name == "refused" {
            return Some(self.refused.to_string());
        }
        handlers::read(&self.conns, name)
    }
}
