//! TLSClassifier (ClickNF §4.3: a classifier in front decides per flow
//! whether TLS applies): stream packets of connections that begin with
//! a TLS record to output 0, the others to output 1.

use crate::stream::{self, StreamEvent};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{take_batch, Element, PUSH};
use oxnet_graph::Ctx;
use std::collections::HashMap;

/// TLS's handshake content type, the first byte of every ClientHello
/// record (RFC 8446 §5.1, RFC 5246 §6.2.1: ContentType handshake(22)).
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// Connections whose first byte is awaited, unless LIMIT says otherwise.
const DEFAULT_LIMIT: usize = 65_536;

/// Where a connection goes.
enum Flow {
    /// No byte yet: its Open waits here.
    Waiting(Packet),
    /// Output 0 or 1.
    Decided(usize),
}

/// TLSClassifier([LIMIT N]): one input of stream packets (from
/// TCPEpollServer), two outputs. A connection's `Open` is held until
/// its first byte: 0x16 (a TLS handshake record) sends the `Open` and
/// everything after it to output 0 (toward TLSServer), anything else to
/// output 1 (the plain service). An `Eof` or `Close` before any byte
/// decides "plain". The decision is kept per connection id until its
/// `Close`.
///
/// The first byte is the client's: this suits protocols where the client
/// speaks first (HTTP, TLS itself). Classifying by port is a matter of
/// wiring instead: two TCPEpollServer elements, one per port, one of
/// them behind a TLSServer.
///
/// LIMIT: connections waiting for their first byte (default 65536); past
/// it a new one is decided "plain" at once (counted). Handlers (read):
/// `tls` and `plain` (connections decided each way), `over_limit`,
/// `drops` (packets of a connection without Open).
#[derive(Default)]
pub struct TlsClassifier {
    flows: HashMap<u32, Flow>,
    waiting: usize,
    limit: usize,
    tls: u64,
    plain: u64,
    over_limit: u64,
    drops: u64,
}

impl TlsClassifier {
    pub fn new() -> TlsClassifier {
        TlsClassifier {
            limit: DEFAULT_LIMIT,
            ..TlsClassifier::default()
        }
    }

    /// Connections known (waiting or decided).
    pub fn connections(&self) -> usize {
        self.flows.len()
    }

    fn decide(&mut self, first: Option<u8>) -> usize {
        if first == Some(HANDSHAKE_RECORD) {
            self.tls += 1;
            0
        } else {
            self.plain += 1;
            1
        }
    }

    /// Sorts one packet onto `outs[0]` or `outs[1]`.
    pub fn classify(&mut self, p: Packet, outs: &mut [PacketBatch; 2]) {
        let id = stream::socket(&p);
        let event = stream::event(&p);
        if event == StreamEvent::Open {
            if self.flows.contains_key(&id) {
                self.drops += 1;
            } else if self.waiting >= self.limit {
                self.over_limit += 1;
                let port = self.decide(None);
                self.flows.insert(id, Flow::Decided(port));
                outs[port].push(p);
            } else {
                self.waiting += 1;
                self.flows.insert(id, Flow::Waiting(p));
            }
            return;
        }
        let port = match self.flows.remove(&id) {
            None => {
                self.drops += 1;
                return;
            }
            Some(Flow::Decided(port)) => port,
            Some(Flow::Waiting(open)) => {
                self.waiting -= 1;
                let first = (event == StreamEvent::Data)
                    .then(|| p.segments().find_map(|s| s.first().copied()))
                    .flatten();
                let port = self.decide(first);
                outs[port].push(open);
                port
            }
        };
        if event != StreamEvent::Close {
            self.flows.insert(id, Flow::Decided(port));
        }
        outs[port].push(p);
    }
}

impl Element for TlsClassifier {
    fn class_name(&self) -> &'static str {
        "TLSClassifier"
    }

    fn port_count(&self) -> &'static str {
        "1/2"
    }

    fn processing(&self) -> &'static str {
        PUSH
    }

    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(limit) = args::opt(a.keyword("LIMIT"), args::unsigned, "LIMIT")? {
            self.limit = limit as usize;
        }
        Ok(())
    }

    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut outs = [take_batch(batch.len()), take_batch(batch.len())];
        for p in batch.drain_front(batch.len()) {
            self.classify(p, &mut outs);
        }
        let [tls, plain] = outs;
        ctx.push(0, tls);
        ctx.push(1, plain);
    }

    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("tls", true, false),
            ("plain", true, false),
            ("over_limit", true, false),
            ("drops", true, false),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let value = match name {
            "tls" => self.tls,
            "plain" => self.plain,
            "over_limit" => self.over_limit,
            "drops" => self.drops,
            _ => return None,
        };
        Some(value.to_string())
    }
}
