//! `Socks4Proxy`: a SOCKS4 and SOCKS4a proxy as one element between
//! TCPEpollServer and TCPEpollClient (ClickNF Figure 11):
//!
//! ```text
//! srv :: TCPEpollServer(1080) -> proxy :: Socks4Proxy -> srv;
//! proxy[1] -> cli :: TCPEpollClient(SRC $IP) -> [1]proxy;
//! ```
//!
//! Input and output 0 are the clients' connections (stream packets,
//! [`crate::stream`]); input and output 1 the destinations'. A client's
//! request (SOCKS4.protocol, SOCKS4A.protocol; [`request`]) is checked
//! (USERS, the destination against ALLOW and DENY, a SOCKS4a name
//! resolved through HOSTS) and then:
//! - CONNECT (§1): an Open request for the destination goes out of
//!   output 1 under the client connection's id; TCPEpollClient's Open
//!   makes the reply 90 (DSTPORT and DSTIP: the destination), its
//!   Close(errno) the reply 91 and the client's Close. TCPEpollClient
//!   takes a local port that RSS maps back to this core
//!   (`TcpStream::connect`, ClickNF §5.2), so both connections of a
//!   session stay on one core.
//! - BIND (§2): the element listens itself (the stack's `TcpListener`,
//!   a port of BIND_PORTS on BIND_ADDR), replies 90 with that port and
//!   address at once, and when the one inbound connection arrives
//!   checks that it comes from DSTIP: a second reply 90 (with the
//!   inbound connection's port and address) and the relay, or 91 and
//!   both closed.
//!
//! Every refusal is one reply 91 and the client's connection closed.
//! Then the bytes are relayed both ways in order, Eof passed through
//! (half-close), and the Close of either side closes the other.
//!
//! Arguments (keywords, all optional; an empty value is "not set"):
//! - USERS: user ids accepted, space-separated (default: any).
//! - ALLOW, DENY: destinations, space-separated `PREFIX[:PORT]`
//!   (`10.0.0.0/24 10.0.0.3:80`); DENY wins; with ALLOW, only those.
//! - HOSTS: a file in /etc/hosts format, SOCKS4a's resolver (without
//!   it, every SOCKS4a name is refused with 91).
//! - BIND_ADDR: the address BIND listens on and reports (default: every
//!   address, reported as 0.0.0.0); BIND_PORTS: `FIRST-LAST`
//!   (61000-61999).
//! - MAX_USERID, MAX_HOSTNAME: bytes before the NUL (255 each; past
//!   them, 91); MAX_PENDING: bytes of a client's data held before its
//!   destination is there (64 KiB; past it, the session ends, counted
//!   in `errors`); BUDGET: BIND packets read per round (256).
//! - REQUEST_TIMEOUT: seconds a client has to send its whole request
//!   (30; then closed); BIND_TIMEOUT: seconds a BIND waits for its
//!   inbound connection (120; then 91). 0: no limit. Checked every
//!   second.
//!
//! Handlers: `sessions`, `requests`, `connects`, `binds`, `granted`,
//! `rejected`, `denied`, `users_refused`, `unresolved`, `failed`,
//! `bound`, `bind_mismatches`, `bytes_up` (client to destination),
//! `bytes_down`, `errors`, `aborted` (clients gone mid-handshake),
//! `unknown`, `timeouts`.

pub mod hosts;
#[cfg(test)]
mod in_process;
pub mod policy;
pub mod proxy;
pub mod request;
#[cfg(test)]
mod tests;

use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use proxy::{Config, Out, Proxy};

pub const MODULE: Module = Module {
    classes: &["Socks4Proxy"],
    create: |class| (class == "Socks4Proxy").then(|| Box::new(Socks4Proxy::default()) as Box<dyn Element>),
};

/// The element.
pub struct Socks4Proxy {
    proxy: Proxy,
    budget: usize,
}

/// How often the deadlines are checked.
const SWEEP_US: u64 = 1_000_000;

impl Default for Socks4Proxy {
    fn default() -> Socks4Proxy {
        Socks4Proxy {
            proxy: Proxy::new(Config::default(), None),
            budget: 256,
        }
    }
}

fn size(a: &mut Args, key: &str, into: &mut usize) -> Result<(), String> {
    if let Some(v) = a.keyword(key) {
        *into = args::unsigned(&v).map_err(|e| format!("{key}: {e}"))? as usize;
    }
    Ok(())
}

/// A keyword's value, unquoted; None if absent or empty (so that a
/// configuration can pass an empty variable for "not set").
fn text(a: &mut Args, key: &str) -> Result<Option<String>, String> {
    let Some(v) = a.keyword(key) else { return Ok(None) };
    let v = args::string(&v).map_err(|e| format!("{key}: {e}"))?;
    Ok((!v.trim().is_empty()).then_some(v))
}

/// The element's arguments as a [`Config`].
pub fn configure(a: &mut Args) -> Result<Config, String> {
    let mut c = Config::default();
    if let Some(v) = text(a, "USERS")? {
        c.policy.users = Some(v.split_whitespace().map(|u| u.as_bytes().to_vec()).collect());
    }
    if let Some(v) = text(a, "ALLOW")? {
        c.policy.allow = policy::rules(&v).map_err(|e| format!("ALLOW: {e}"))?;
    }
    if let Some(v) = text(a, "DENY")? {
        c.policy.deny = policy::rules(&v).map_err(|e| format!("DENY: {e}"))?;
    }
    if let Some(v) = text(a, "HOSTS")? {
        c.hosts = Some(hosts::Hosts::load(v.trim())?);
    }
    if let Some(v) = text(a, "BIND_ADDR")? {
        c.bind_addr = Some(
            v.trim()
                .parse()
                .map_err(|_| format!("BIND_ADDR: '{v}' is not an IPv4 address"))?,
        );
    }
    if let Some(v) = text(a, "BIND_PORTS")? {
        let bad = || format!("BIND_PORTS: '{v}' is not FIRST-LAST (1-65535)");
        let (first, last) = v.split_once('-').ok_or_else(bad)?;
        let first: u16 = first.trim().parse().map_err(|_| bad())?;
        let last: u16 = last.trim().parse().map_err(|_| bad())?;
        if first == 0 || last < first {
            return Err(bad());
        }
        c.bind_ports = (first, last);
    }
    size(a, "MAX_USERID", &mut c.max_user)?;
    size(a, "MAX_HOSTNAME", &mut c.max_host)?;
    size(a, "MAX_PENDING", &mut c.max_pending)?;
    for (key, into) in [
        ("REQUEST_TIMEOUT", &mut c.request_timeout_us),
        ("BIND_TIMEOUT", &mut c.bind_timeout_us),
    ] {
        if let Some(v) = a.keyword(key) {
            *into = (args::seconds(&v).map_err(|e| format!("{key}: {e}"))? * 1e6) as u64;
        }
    }
    Ok(c)
}

impl Socks4Proxy {
    fn flush(out: Out, ctx: &mut Ctx<'_>) {
        if !out.client.is_empty() {
            ctx.push(0, out.client);
        }
        if !out.remote.is_empty() {
            ctx.push(1, out.remote);
        }
    }
}

impl Element for Socks4Proxy {
    fn class_name(&self) -> &'static str {
        "Socks4Proxy"
    }
    fn port_count(&self) -> &'static str {
        "2/2"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let config = configure(a)?;
        size(a, "BUDGET", &mut self.budget)?;
        self.budget = self.budget.max(1);
        self.proxy = Proxy::new(config, Some(oxnet_stack::tcp::elements::info()));
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work (BIND's connections) comes from this router's stack only.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.proxy.config.request_timeout_us != 0 || self.proxy.config.bind_timeout_us != 0 {
            ctx.schedule_after_us(SWEEP_US);
        }
    }
    fn run_timer(&mut self, _timer: oxnet_graph::timer::TimerId, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = Out::default();
        self.proxy.now_us = ctx.now_us();
        self.proxy.sweep(&mut out, &pool);
        Self::flush(out, ctx);
        ctx.schedule_after_us(SWEEP_US);
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.proxy.idle() {
            return false;
        }
        let pool = ctx.pool().clone();
        let mut out = Out::default();
        self.proxy.now_us = ctx.now_us();
        let work = self.proxy.poll(self.budget, &mut out, &pool);
        Self::flush(out, ctx);
        work
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = Out::default();
        self.proxy.now_us = ctx.now_us();
        for p in batch.drain_front(batch.len()) {
            if port == 0 {
                self.proxy.client_input(p, &mut out, &pool);
            } else {
                self.proxy.remote_input(p, &mut out, &pool);
            }
        }
        Self::flush(out, ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("sessions", true, false),
            ("requests", true, false),
            ("connects", true, false),
            ("binds", true, false),
            ("granted", true, false),
            ("rejected", true, false),
            ("denied", true, false),
            ("users_refused", true, false),
            ("unresolved", true, false),
            ("failed", true, false),
            ("bound", true, false),
            ("bind_mismatches", true, false),
            ("bytes_up", true, false),
            ("bytes_down", true, false),
            ("errors", true, false),
            ("aborted", true, false),
            ("unknown", true, false),
            ("timeouts", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.proxy.stats;
        Some(
            match name {
                "sessions" => self.proxy.sessions() as u64,
                "requests" => s.requests,
                "connects" => s.connects,
                "binds" => s.binds,
                "granted" => s.granted,
                "rejected" => s.rejected,
                "denied" => s.denied,
                "users_refused" => s.users_refused,
                "unresolved" => s.unresolved,
                "failed" => s.failed,
                "bound" => s.bound,
                "bind_mismatches" => s.bind_mismatches,
                "bytes_up" => s.bytes_up,
                "bytes_down" => s.bytes_down,
                "errors" => s.errors,
                "aborted" => s.aborted,
                "unknown" => s.unknown,
                "timeouts" => s.timeouts,
                _ => return None,
            }
            .to_string(),
        )
    }
}
