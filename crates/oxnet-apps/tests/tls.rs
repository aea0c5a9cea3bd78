//! TLSClient, TLSServer and TLSClassifier in a whole graph, in process:
//! one TCPStack with two hosts (10.8.0.1 and 10.8.0.2) whose segments
//! loop back through a queue, a server on port 443 where TLSClassifier
//! sends TLS connections through TLSServer's echo and the others to a
//! plain echo (ClickNF §4.3), and two test requesters: one through
//! TLSClient and TCPEpollClient, one through a plain TCPEpollClient. Each
//! writes its bytes and its Eof right after the connect request, before
//! the connection is up. Checked exactly: per connection Open, the bytes
//! back in order, Eof, Close with errno 0; a refused port ends in one
//! Close with ECONNREFUSED; the counters of every element.

mod common;

use common::handler;
use oxnet_apps::stream::{self, StreamEvent};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use oxnet_stack::wire::IpEndpoint;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// TLS connections are ids 1..=10, plain ones 101..=110.
const TLS_IDS: std::ops::RangeInclusive<u32> = 1..=10;
const PLAIN_IDS: std::ops::RangeInclusive<u32> = 101..=110;
const BYTES: usize = 60_000;
/// A TLS connection to a port nobody listens on.
const REFUSED_ID: u32 = 1000;

static SEEN: Mutex<BTreeMap<u32, common::Seen>> = Mutex::new(BTreeMap::new());

/// Connection `id`'s bytes; a plain one starts with 'P', never with a
/// TLS record's 0x16.
fn payload(id: u32) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ id as u64;
    let mut bytes: Vec<u8> = (0..BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    bytes[0] = b'P';
    bytes
}

/// TlsTestRequester(FIRST, COUNT, [REFUSED true]): asks for COUNT
/// connections from id FIRST to 10.8.0.2:443, with their bytes and Eof
/// at once; records what comes back.
#[derive(Default)]
struct Requester {
    first: u32,
    count: u32,
    refused: bool,
}

impl Element for Requester {
    fn class_name(&self) -> &'static str {
        "TlsTestRequester"
    }
    fn port_count(&self) -> &'static str {
        "1/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.first = args::unsigned(&a.required("FIRST")?)? as u32;
        self.count = args::unsigned(&a.required("COUNT")?)? as u32;
        self.refused = args::opt(a.keyword("REFUSED"), args::boolean, "REFUSED")?.unwrap_or(false);
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        let server = IpEndpoint::new(Ipv4Addr::new(10, 8, 0, 2), 443);
        for id in self.first..self.first + self.count {
            out.push(stream::open_request(&pool, id, server).unwrap());
            for p in common::data_packets(&pool, id, &payload(id)) {
                out.push(p);
            }
            out.push(stream::control(&pool, id, StreamEvent::Eof).unwrap());
        }
        if self.refused {
            let nobody = IpEndpoint::new(Ipv4Addr::new(10, 8, 0, 2), 9);
            out.push(stream::open_request(&pool, REFUSED_ID, nobody).unwrap());
        }
        ctx.push(0, out);
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        common::record(&mut SEEN.lock().unwrap(), batch);
        batch.clear();
    }
}

const TEST_MODULE: Module = Module {
    classes: &["TlsTestRequester"],
    create: |class| (class == "TlsTestRequester").then(|| Box::new(Requester::default()) as Box<dyn Element>),
};

const APPS: &str = r#"
// The server: TLS connections echoed through TLSServer, the others
// echoed as they are.
srv :: TCPEpollServer(443, ADDR 10.8.0.2) -> cls :: TLSClassifier;
cls[0] -> stls :: TLSServer(ALPN "echo") -> [1]stls;
stls[1] -> srv;
cls[1] -> srv;

// The clients.
req :: TlsTestRequester(FIRST 1, COUNT 10, REFUSED true) -> [1]ctls :: TLSClient(INSECURE true, ALPN "echo");
ctls[1] -> cli :: TCPEpollClient(SRC 10.8.0.1) -> ctls -> req;
preq :: TlsTestRequester(FIRST 101, COUNT 10) -> pcli :: TCPEpollClient(SRC 10.8.0.1) -> preq;
"#;

#[test]
fn tls_and_plain_connections_share_a_port_and_echo_byte_exact() {
    oxnet_apps::register();
    oxnet_graph::elements::add_modules(&[TEST_MODULE]);
    let mut router = oxnet_graph::build(
        "tls-test",
        &(oxnet_apps::testkit::hosts(&["10.8.0.1", "10.8.0.2"]) + APPS),
        &[],
    )
    .unwrap();
    let ids: Vec<u32> = TLS_IDS.chain(PLAIN_IDS).chain([REFUSED_ID]).collect();
    let start = std::time::Instant::now();
    let done = || {
        let seen = SEEN.lock().unwrap();
        ids.iter().all(|id| seen.get(id).is_some_and(|s| !s.closes.is_empty()))
    };
    while !done() {
        if start.elapsed().as_secs() >= 30 {
            let seen = SEEN.lock().unwrap();
            let state: Vec<String> = seen
                .iter()
                .map(|(id, s)| format!("{id}:{}:{}", s.order, s.data.len()))
                .collect();
            let last_error = router.read_handler(router.find("stls").unwrap(), "last_error");
            panic!("not done in 30 s: {state:?}, server's last error {last_error:?}");
        }
        router.run_once();
    }
    for _ in 0..1000 {
        router.run_once();
    }
    let seen = SEEN.lock().unwrap();
    for id in TLS_IDS.chain(PLAIN_IDS) {
        let s = &seen[&id];
        assert_eq!(s.order, "ODEC", "connection {id}: events in order");
        assert_eq!((s.opens, s.eofs, &s.closes[..]), (1, 1, &[0][..]), "connection {id}");
        assert!(
            s.data == payload(id),
            "connection {id}: {} bytes back, not the ones sent",
            s.data.len()
        );
    }
    let refused = &seen[&REFUSED_ID];
    assert_eq!((refused.opens, &refused.closes[..]), (0, &[libc::ECONNREFUSED][..]));
    assert_eq!(seen.len(), ids.len(), "no other ids");

    let n = TLS_IDS.count() as u64;
    let bytes = n * BYTES as u64;
    for side in ["stls", "ctls"] {
        let h = |name: &str| handler(&router, &format!("{side}.{name}"));
        assert_eq!((h("handshakes"), h("errors"), h("drops")), (n, 0, 0), "{side}");
        assert_eq!((h("plain_in"), h("plain_out")), (bytes, bytes), "{side}");
        assert_eq!(h("truncated"), 0, "{side}: close_notify before every FIN");
        assert_eq!(h("connections"), 0, "{side}");
    }
    assert_eq!(handler(&router, "ctls.opened"), n + 1, "the refused one too");
    assert_eq!(
        (
            handler(&router, "cls.tls"),
            handler(&router, "cls.plain"),
            handler(&router, "cls.drops")
        ),
        (n, PLAIN_IDS.count() as u64, 0)
    );
}
