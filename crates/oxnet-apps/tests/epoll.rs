//! TCPEpollServer and TCPEpollClient on one stack, in process: the
//! stack's segments go back into it through a queue (two hosts,
//! 10.8.0.1 and 10.8.0.2, on one TCPStack, no device), an echo server
//! `srv :: TCPEpollServer(7) -> srv`, and a test element that asks
//! TCPEpollClient for connections, writes random bytes and an Eof on
//! each, and records every stream packet that comes back. The stream
//! rules are checked exactly: per connection one Open, the bytes in
//! order, one Eof, one Close with errno 0 (the last bytes a chain with
//! a value shared by every connection, as a cache answers); a port nobody listens on and
//! a request without a destination end in one Close with the errno.

mod common;

use common::handler;
use oxnet_apps::stream::{self, StreamEvent};
use oxnet_driver::PacketBatch;
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use oxnet_stack::wire::IpEndpoint;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

const CONNECTIONS: u32 = 20;
const BYTES: usize = 100_000;
/// A connection to a port nobody listens on; one without a destination.
const REFUSED_ID: u32 = 1000;
const INVALID_ID: u32 = 1001;

static SEEN: Mutex<BTreeMap<u32, common::Seen>> = Mutex::new(BTreeMap::new());

fn payload(id: u32) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ id as u64;
    (0..BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

struct Requester {
    value: oxnet_driver::SharedBuffer,
    heads: oxnet_driver::AttachPool,
}

fn value_bytes() -> Vec<u8> {
    (0..1800u32).map(|i| (i * 31 % 251) as u8).collect()
}

fn packet(pool: &oxnet_driver::Mempool, bytes: &[u8]) -> oxnet_driver::Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.copy_from_slice(bytes);
    p
}

/// What connection `id` sends and must get back.
fn expected(id: u32) -> Vec<u8> {
    let mut all = payload(id);
    all.extend_from_slice(b"VALUE\r\n");
    all.extend(value_bytes());
    all.extend_from_slice(b"\r\nEND\r\n");
    all
}

impl Element for Requester {
    fn class_name(&self) -> &'static str {
        "TestRequester"
    }
    fn port_count(&self) -> &'static str {
        "1/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        let server = IpEndpoint::new(Ipv4Addr::new(10, 8, 0, 2), 7);
        for id in 1..=CONNECTIONS {
            out.push(stream::open_request(&pool, id, server).unwrap());
            // Data before the connection is up: it waits in the client.
            for p in common::data_packets(&pool, id, &payload(id)) {
                out.push(p);
            }
            // Then a response as a cache sends it: a header, the stored
            // value (one shared buffer, attached on every connection, not
            // copied), a trailer, in one chain.
            let mut head = packet(&pool, b"VALUE\r\n");
            head.append(self.value.attach_all(&self.heads).unwrap());
            head.append(packet(&pool, b"\r\nEND\r\n"));
            out.push(stream::data(head, id));
            out.push(stream::control(&pool, id, StreamEvent::Eof).unwrap());
        }
        let nobody = IpEndpoint::new(Ipv4Addr::new(10, 8, 0, 2), 9);
        out.push(stream::open_request(&pool, REFUSED_ID, nobody).unwrap());
        out.push(stream::control(&pool, INVALID_ID, StreamEvent::Open).unwrap());
        ctx.push(0, out);
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        common::record(&mut SEEN.lock().unwrap(), batch);
        batch.clear();
    }
}

const TEST_MODULE: Module = Module {
    classes: &["TestRequester"],
    create: |class| {
        (class == "TestRequester").then(|| {
            let pool = oxnet_driver::Mempool::new("test-values", 4, oxnet_driver::MemoryKind::Plain).unwrap();
            let value = oxnet_driver::SharedBuffer::new(packet(&pool, &value_bytes()))
                .ok()
                .unwrap();
            let heads = oxnet_driver::AttachPool::new("test-heads", 64).unwrap();
            Box::new(Requester { value, heads }) as Box<dyn Element>
        })
    },
};

const APPS: &str = r#"srv :: TCPEpollServer(7, ADDR 10.8.0.2, MAX_PENDING 8192) -> srv;
req :: TestRequester -> cli :: TCPEpollClient(SRC 10.8.0.1) -> req;
"#;

#[test]
fn echo_through_the_epoll_server_and_client_keeps_every_stream_rule() {
    oxnet_apps::register();
    oxnet_graph::elements::add_modules(&[TEST_MODULE]);
    let mut router = oxnet_graph::build(
        "epoll-test",
        &(oxnet_apps::testkit::hosts(&["10.8.0.1", "10.8.0.2"]) + APPS),
        &[],
    )
    .unwrap();
    let start = std::time::Instant::now();
    let done = || {
        let seen = SEEN.lock().unwrap();
        (1..=CONNECTIONS)
            .chain([REFUSED_ID, INVALID_ID])
            .all(|id| seen.get(&id).is_some_and(|s| !s.closes.is_empty()))
    };
    while !done() {
        if start.elapsed().as_secs() >= 20 {
            let seen = SEEN.lock().unwrap();
            let state: Vec<String> = seen
                .iter()
                .map(|(id, s)| format!("{id}:{}:{}", s.order, s.data.len()))
                .collect();
            let names = [
                "srv.opened",
                "srv.closed",
                "srv.bytes_in",
                "srv.bytes_out",
                "srv.paused",
                "srv.connections",
                "cli.opened",
                "cli.bytes_in",
                "cli.bytes_out",
                "cli.connections",
            ];
            let counts: Vec<String> = names.iter().map(|n| format!("{n}={}", handler(&router, n))).collect();
            panic!("not done in 20 s: {state:?}\n{counts:?}");
        }
        router.run_once();
    }
    // A few more rounds: nothing more may come (one Close each).
    for _ in 0..1000 {
        router.run_once();
    }
    let seen = SEEN.lock().unwrap();
    for id in 1..=CONNECTIONS {
        let s = &seen[&id];
        assert_eq!(
            (s.opens, s.eofs, &s.closes[..]),
            (1, 1, &[0][..]),
            "connection {id}: {}",
            s.order
        );
        assert_eq!(s.order, "ODEC", "connection {id}: events in order");
        let want = expected(id);
        let first = s.data.iter().zip(&want).position(|(a, b)| a != b);
        assert!(
            s.data == want,
            "connection {id}: {} bytes back, not the ones sent (first difference at {first:?})",
            s.data.len()
        );
    }
    let refused = &seen[&REFUSED_ID];
    assert_eq!((refused.opens, &refused.closes[..]), (0, &[libc::ECONNREFUSED][..]));
    let invalid = &seen[&INVALID_ID];
    assert_eq!((invalid.opens, &invalid.closes[..]), (0, &[libc::EINVAL][..]));
    assert_eq!(seen.len(), CONNECTIONS as usize + 2, "no other ids");
    let n = CONNECTIONS as u64;
    let total = n * expected(1).len() as u64;
    assert_eq!(handler(&router, "srv.opened"), n);
    assert_eq!(handler(&router, "srv.closed"), n);
    assert_eq!(handler(&router, "srv.errors"), 0);
    assert_eq!(handler(&router, "srv.connections"), 0);
    assert_eq!(
        (handler(&router, "srv.bytes_in"), handler(&router, "srv.bytes_out")),
        (total, total)
    );
    assert_eq!(handler(&router, "cli.opened"), n);
    assert_eq!(handler(&router, "cli.refused"), 1);
    assert_eq!(
        (handler(&router, "cli.bytes_in"), handler(&router, "cli.bytes_out")),
        (total, total)
    );
    assert_eq!(
        handler(&router, "cli.write_drops") + handler(&router, "srv.write_drops"),
        0
    );
    assert_eq!(handler(&router, "srv.unknown") + handler(&router, "cli.unknown"), 0);
}
