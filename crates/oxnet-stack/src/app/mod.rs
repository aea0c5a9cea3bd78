//! Applications on the stack (ClickNF §4): the element that runs the
//! router's executor, and the first application, an echo server.
//!
//! | element | ports | what |
//! |---|---|---|
//! | AppExecutor | 0/0 | task: the router's executor (`crate::exec`): sets its clock to the router's, polls the woken application tasks (at most BUDGET a round), keeps a router timer at its next sleep |
//! | TCPEchoClient(DST, PORT, SRC, CONNECTIONS, BYTES, CONCURRENCY, STOP) | 0/0 | an echo client: n connections, random bytes each, every byte checked when it comes back ([`client`]) |
//! | TCPEchoServer(PORT, [ADDR], [socket options]) | 0/0 | RFC 862's echo service on TCP: every byte read is written back; the peer's FIN is answered with ours. Without ADDR it listens on every IPv4 and IPv6 address. KEEPALIVE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT, USER_TIMEOUT are set on each accepted connection ([`sockopts`]). Handlers: `connections`, `bytes`, `errors` (connections that ended in an error), `timeouts` (those of them whose error was ETIMEDOUT: keepalive or user timeout gave up) |

pub mod client;
pub mod host;
pub mod sockopts;

use crate::exec::Executor;
use crate::tcp::info::TcpInfo;
use crate::tcp::socket::{TcpListener, TcpStream};
use crate::wire::{IpAddress, IpEndpoint};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::timer::TimerId;
use oxnet_graph::Ctx;
use std::cell::RefCell;
use std::rc::Rc;

pub const MODULE: Module = Module {
    classes: &["AppExecutor", "TCPEchoClient", "TCPEchoServer"],
    create: |class| {
        Some(match class {
            "AppExecutor" => Box::new(AppExecutor::default()),
            "TCPEchoClient" => Box::new(client::EchoClient::default()),
            "TCPEchoServer" => Box::new(EchoServer::default()),
            _ => return None,
        })
    },
};

/// The executor of the router being built (one per router).
pub fn executor() -> Rc<RefCell<Executor>> {
    crate::elements::shared::<Executor>()
}

#[derive(Default)]
pub struct AppExecutor {
    exec: Option<Rc<RefCell<Executor>>>,
    budget: usize,
    wakeup: Option<(TimerId, u64)>,
    polls: u64,
}

impl Element for AppExecutor {
    fn class_name(&self) -> &'static str {
        "AppExecutor"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.budget = match a.keyword("BUDGET") {
            Some(v) => args::unsigned(&v).map_err(|e| format!("BUDGET: {e}"))?.max(1) as usize,
            None => 64,
        };
        self.exec = Some(executor());
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router only (sockets written by the
    /// executor's tasks, the router's timers): an idle router may sleep.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_timer(&mut self, id: TimerId, _ctx: &mut Ctx<'_>) {
        if self.wakeup.map(|(t, _)| t) == Some(id) {
            self.wakeup = None;
        }
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(exec) = &self.exec else { return false };
        let exec = exec.borrow();
        let now = ctx.now_us();
        exec.set_now(now);
        let polled = exec.run_ready(self.budget);
        self.polls += polled as u64;
        if let Some(at) = exec.next_timer() {
            if self.wakeup.is_none_or(|(_, set)| set > at) {
                let id = ctx.schedule_after_us(at.saturating_sub(now));
                self.wakeup = Some((id, at));
            }
        }
        polled > 0
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("polls", true, false), ("tasks", true, false), ("panics", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let exec = self.exec.as_ref()?.borrow();
        match name {
            "polls" => Some(self.polls.to_string()),
            "tasks" => Some(exec.len().to_string()),
            "panics" => Some(exec.panic_count().to_string()),
            _ => None,
        }
    }
}

#[derive(Default)]
pub struct EchoServer {
    /// Where to listen: ADDR's endpoint, or both families' wildcards.
    locals: Vec<IpEndpoint>,
    stack: Option<Rc<RefCell<TcpInfo>>>,
    exec: Option<Rc<RefCell<Executor>>>,
    stats: Rc<RefCell<EchoStats>>,
    options: sockopts::SocketOptions,
}

#[derive(Default)]
struct EchoStats {
    connections: u64,
    bytes: u64,
    errors: u64,
    timeouts: u64,
}

impl EchoStats {
    /// A connection ended in `errno`.
    fn failed(&mut self, errno: i32) {
        self.errors += 1;
        if errno == libc::ETIMEDOUT {
            self.timeouts += 1;
        }
    }
}

/// Payloads up to this many bytes are echoed by copy, larger ones by
/// giving the packet back.
const COPY_BELOW: usize = 512;

/// One connection's echo: each received packet (its payload,
/// `TcpStream::recv_packet`) is given back as it is
/// (`TcpStream::send_packet`, no copy; the stack keeps it until the peer
/// has acknowledged its bytes), or its bytes copied when they are few. A
/// byte buffer per connection would cost a 16 KiB allocation, zeroed,
/// for every short connection: 10 k of the 232 k instructions of a short
/// exchange in `scripts/bench/echo-instructions.sh`.
async fn echo(stream: TcpStream, stats: Rc<RefCell<EchoStats>>) {
    loop {
        match stream.recv_packet().await {
            Ok(Some(packet)) => {
                let n = packet.total_len();
                // A small payload is cheaper copied into the send buffer
                // than attached to every segment that carries it (a
                // header from the attach pool, a chain for the driver).
                let sent = if n <= COPY_BELOW && !packet.is_chained() {
                    stream.write_all(&packet).await
                } else {
                    stream.send_packet(packet).await
                };
                if let Err(e) = sent {
                    stats.borrow_mut().failed(e);
                    return;
                }
                stats.borrow_mut().bytes += n as u64;
            }
            Ok(None) => break,
            Err(e) => {
                stats.borrow_mut().failed(e);
                return;
            }
        }
    }
    let _ = stream.shutdown_write();
}

/// A server's local endpoints from its arguments (TCPEchoServer,
/// UDPEchoServer): `PORT` (required) on `ADDR`, or on both families'
/// unspecified addresses without one.
pub fn server_endpoints(a: &mut Args) -> Result<Vec<IpEndpoint>, String> {
    let port = a.positional_or("PORT").ok_or("PORT is required")?;
    let port = u16::try_from(args::unsigned(&port).map_err(|e| format!("PORT: {e}"))?)
        .map_err(|_| "PORT: not a port number".to_string())?;
    Ok(match a.keyword("ADDR") {
        Some(v) => {
            let ip: std::net::IpAddr = v.parse().map_err(|_| format!("ADDR: '{v}' is not an IP address"))?;
            vec![IpEndpoint {
                addr: IpAddress::from(ip),
                port,
            }]
        }
        None => vec![
            IpEndpoint::new(std::net::Ipv4Addr::UNSPECIFIED, port),
            IpEndpoint::new(std::net::Ipv6Addr::UNSPECIFIED, port),
        ],
    })
}

impl Element for EchoServer {
    fn class_name(&self) -> &'static str {
        "TCPEchoServer"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.locals = crate::app::server_endpoints(a)?;
        self.options = sockopts::SocketOptions::configure(a)?;
        self.stack = Some(crate::tcp::elements::info());
        self.exec = Some(executor());
        Ok(())
    }
    fn initialize(&mut self, _ports: &oxnet_graph::element::Ports) -> Result<(), String> {
        let (Some(stack), Some(exec)) = (&self.stack, &self.exec) else {
            return Ok(());
        };
        for &local in &self.locals {
            let listener = TcpListener::bind(stack, local, 1024).map_err(|e| {
                format!(
                    "cannot listen on {}:{}: {}",
                    local.addr,
                    local.port,
                    std::io::Error::from_raw_os_error(e)
                )
            })?;
            let stats = self.stats.clone();
            let options = self.options;
            exec.borrow().spawn(async move {
                while let Ok(stream) = listener.accept().await {
                    stats.borrow_mut().connections += 1;
                    options.apply(&stream);
                    crate::exec::spawn(echo(stream, stats.clone()));
                }
            });
        }
        Ok(())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("connections", true, false),
            ("bytes", true, false),
            ("errors", true, false),
            ("timeouts", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.stats.borrow();
        match name {
            "connections" => Some(s.connections.to_string()),
            "bytes" => Some(s.bytes.to_string()),
            "errors" => Some(s.errors.to_string()),
            "timeouts" => Some(s.timeouts.to_string()),
            _ => None,
        }
    }
}
