//! TCPEpollClient's bound on data waiting for a connection: data pushed
//! for a connection still connecting waits; more than four times
//! MAX_PENDING ends it with ENOBUFS (`overflows`), the requester gets
//! exactly one Close and no Open, and nothing more is written.

mod common;

use oxnet_apps::stream::{self, StreamEvent};
use oxnet_driver::PacketBatch;
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use oxnet_stack::wire::IpEndpoint;
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// Events seen by the flooder: (id, event, errno).
static SEEN: Mutex<Vec<(u32, StreamEvent, i32)>> = Mutex::new(Vec::new());

struct Flooder;

impl Element for Flooder {
    fn class_name(&self) -> &'static str {
        "TestFlooder"
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
        out.push(stream::open_request(&pool, 1, server).unwrap());
        // 10 x 1000 bytes before the connection is up: past 4 x 1000.
        for _ in 0..10 {
            let mut p = pool.alloc().unwrap();
            p.set_len(1000).unwrap();
            out.push(stream::data(p, 1));
        }
        ctx.push(0, out);
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        let mut seen = SEEN.lock().unwrap();
        for p in batch.iter() {
            seen.push((stream::socket(p), stream::event(p), stream::errno(p)));
        }
        batch.clear();
    }
}

const TEST_MODULE: Module = Module {
    classes: &["TestFlooder"],
    create: |class| (class == "TestFlooder").then(|| Box::new(Flooder) as Box<dyn Element>),
};

const APPS: &str = r#"srv :: TCPEpollServer(7, ADDR 10.8.0.2) -> srv;
f :: TestFlooder -> cli :: TCPEpollClient(SRC 10.8.0.1, MAX_PENDING 1000) -> f;
"#;

#[test]
fn data_past_four_times_max_pending_ends_a_connecting_connection_with_enobufs() {
    oxnet_apps::register();
    oxnet_graph::elements::add_modules(&[TEST_MODULE]);
    let mut router = oxnet_graph::build(
        "epoll-limits",
        &(oxnet_apps::testkit::hosts(&["10.8.0.1", "10.8.0.2"]) + APPS),
        &[],
    )
    .unwrap();
    for _ in 0..2000 {
        router.run_once();
    }
    let seen = SEEN.lock().unwrap();
    assert_eq!(
        &seen[..],
        &[(1, StreamEvent::Close, libc::ENOBUFS)],
        "one Close, no Open"
    );
    let h = |spec: &str| common::handler(&router, spec);
    assert_eq!(h("cli.overflows"), 1);
    assert_eq!(h("cli.connections"), 0);
    assert_eq!(h("cli.opened"), 0);
    assert_eq!(h("cli.bytes_out"), 0, "nothing of it written");
    // 5 packets waited (5000 > 4000 bytes) when it ended; the rest came
    // for a connection no longer in the table.
    assert_eq!((h("cli.write_drops"), h("cli.unknown")), (5, 5));
}
