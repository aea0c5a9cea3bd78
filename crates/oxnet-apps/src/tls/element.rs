//! The TLSServer and TLSClient elements: a [`Relay`] on two push ports.

use super::config;
use super::relay::{Out, Relay, Role};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{take_batch, Element, PUSH};
use oxnet_graph::Ctx;

/// Connections an element holds unless LIMIT says otherwise.
pub const DEFAULT_LIMIT: usize = 65_536;

/// TLSServer and TLSClient (ClickNF §4.2, Figure 6): TLS on stream
/// packets, per connection.
///
/// Ports (both push): input 0 takes stream packets from the network side
/// (TCPEpollServer / TCPEpollClient: TLS records), output 0 gives the
/// application plaintext stream packets; input 1 takes the application's
/// plaintext, output 1 gives records to the network side. Open, Eof and
/// Close pass through in order (a peer's close_notify becomes Eof; an
/// Eof from the application sends close_notify first); a TLS error sends
/// the alert and a Close to the network, and a Close with EPROTO to the
/// application.
///
/// Keyword arguments, both: VERSIONS (`1.2 1.3`, the default), ALPN
/// (protocol names, space-separated, preferred first), LIMIT
/// (connections held; past it a new one is closed and counted; default
/// 65536). TLSServer: CERT and KEY (PEM files: RSA of 2048 bits or
/// more, ECDSA P-256 or P-384, Ed25519; without them a self-signed
/// certificate for NAME, default `localhost`, is made), SESSION_CACHE
/// (sessions kept for resumption, default 4096; 0: none), TICKETS
/// (session tickets, default true). TLSClient: SERVER_NAME (SNI and the
/// name checked, default `localhost`), CA (trusted roots, PEM) or
/// INSECURE true (tests), RESUMPTION (default true); a connect request
/// (Open with a destination) on input 1 goes on to the client element.
///
/// Handlers (read): connections, opened, handshakes, resumed, errors,
/// truncated (Eof without close_notify), refused, drops, no_buffers,
/// plain_in and plain_out (plaintext bytes to and from the application),
/// last_error.
pub struct TlsElement {
    class: &'static str,
    relay: Option<Relay>,
    /// A retry is scheduled for connections that found the pool empty.
    retry_pending: bool,
}

/// How soon connections that found the packet pool empty try again when
/// no packet comes to give them a turn (buffers come back as the
/// stack sends and frees them).
const RETRY_US: u64 = 200;

impl TlsElement {
    pub fn server() -> TlsElement {
        TlsElement {
            class: "TLSServer",
            relay: None,
            retry_pending: false,
        }
    }

    pub fn client() -> TlsElement {
        TlsElement {
            class: "TLSClient",
            relay: None,
            retry_pending: false,
        }
    }
}

const HANDLERS: &[(&str, bool, bool)] = &[
    ("connections", true, false),
    ("opened", true, false),
    ("handshakes", true, false),
    ("resumed", true, false),
    ("errors", true, false),
    ("truncated", true, false),
    ("refused", true, false),
    ("drops", true, false),
    ("no_buffers", true, false),
    ("plain_in", true, false),
    ("plain_out", true, false),
    ("last_error", true, false),
];

impl TlsElement {
    /// Pushes what a turn made, and schedules a retry while connections
    /// wait for buffers.
    fn send(&mut self, out: Out, starving: bool, ctx: &mut Ctx<'_>) {
        if starving && !self.retry_pending {
            self.retry_pending = true;
            ctx.schedule_after_us(RETRY_US);
        }
        // Records first: with the echo wiring (output 0 into input 1) the
        // application's answer is pushed into this element while it runs,
        // so it is delivered after this step, behind these.
        ctx.push(1, out.records);
        ctx.push(0, out.plain);
    }
}

impl Element for TlsElement {
    fn class_name(&self) -> &'static str {
        self.class
    }

    fn port_count(&self) -> &'static str {
        "2/2"
    }

    fn processing(&self) -> &'static str {
        PUSH
    }

    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let limit = args::opt(a.keyword("LIMIT"), args::unsigned, "LIMIT")?.unwrap_or(DEFAULT_LIMIT as u64) as usize;
        let role = if self.class == "TLSServer" {
            Role::Server(config::server(a)?)
        } else {
            let (config, name) = config::client(a)?;
            Role::Client { config, name }
        };
        self.relay = Some(Relay::new(role, limit));
        Ok(())
    }

    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(relay) = self.relay.as_mut() else {
            batch.clear();
            return;
        };
        let mut out = Out {
            plain: take_batch(batch.len()),
            records: take_batch(batch.len()),
        };
        let pool = ctx.pool();
        for p in batch.drain_front(batch.len()) {
            if port == 0 {
                relay.from_network(p, pool, &mut out);
            } else {
                relay.from_application(p, pool, &mut out);
            }
        }
        let starving = relay.starving();
        self.send(out, starving, ctx);
    }

    fn run_timer(&mut self, _timer: oxnet_graph::timer::TimerId, ctx: &mut Ctx<'_>) {
        self.retry_pending = false;
        let Some(relay) = self.relay.as_mut() else {
            return;
        };
        let mut out = Out {
            plain: take_batch(8),
            records: take_batch(8),
        };
        relay.retry_starved(ctx.pool(), &mut out);
        let starving = relay.starving();
        self.send(out, starving, ctx);
    }

    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        HANDLERS
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let relay = self.relay.as_ref()?;
        let c = &relay.counters;
        let value = match name {
            "connections" => relay.connections() as u64,
            "opened" => c.opened,
            "handshakes" => c.handshakes,
            "resumed" => c.resumed,
            "errors" => c.errors,
            "truncated" => c.truncated,
            "refused" => c.refused,
            "drops" => c.drops,
            "no_buffers" => c.no_buffers,
            "plain_in" => c.plain_in,
            "plain_out" => c.plain_out,
            "last_error" => return Some(relay.last_error.clone()),
            _ => return None,
        };
        Some(value.to_string())
    }
}
