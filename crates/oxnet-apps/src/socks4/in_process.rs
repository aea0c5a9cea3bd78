//! ClickNF Figure 11 on one stack, in process: three hosts (10.8.0.1 the
//! SOCKS clients, 10.8.0.2 the proxy, 10.8.0.3 an echo server and the
//! BIND's application server) on one TCPStack whose segments go back
//! into it through a queue. A test element speaks SOCKS4 through
//! TCPEpollClient: eight CONNECTs to the echo server (the bytes back
//! exact), a BIND whose inbound connection comes from DSTIP (second
//! reply 90, data both ways), and one whose inbound connection comes
//! from elsewhere (91, both closed). The stack is told it is thread 1 of
//! 2 (RSS): every connection TCPEpollClient opens for the proxy must use
//! a local port whose replies RSS maps to queue 1 (ClickNF §5.2).

use crate::stream::{self, StreamEvent};
use crate::testkit::handler;
use oxnet_driver::{Mempool, Packet, PacketBatch};
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use oxnet_stack::tcp::info::RssPlace;
use oxnet_stack::wire::{IpAddress, IpEndpoint};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

const CONNECTS: u32 = 8;
const BYTES: usize = 20_000;
/// The BIND whose peer is DSTIP, and the one whose peer is not; their
/// application-server connections are the ids + [`PEER`].
const BIND_OK: u32 = 20;
const BIND_BAD: u32 = 21;
const PEER: u32 = 100;
const FROM_SERVER: &[u8] = b"from the application server";
const FROM_CLIENT: &[u8] = b"from the client";

#[derive(Default, Debug)]
struct Seen {
    order: String,
    data: Vec<u8>,
    closes: Vec<i32>,
    started: bool,
}

#[derive(Default)]
struct Record {
    /// Client-side connections (ids < PEER) and the peers' (>= PEER).
    seen: BTreeMap<u32, Seen>,
    /// The proxy's outgoing connections seen: (local port, RSS says
    /// replies land on queue 1).
    rss: BTreeMap<u16, bool>,
    info: Option<oxnet_stack::tcp::elements::Info>,
}

thread_local! {
    static RECORD: RefCell<Record> = RefCell::new(Record::default());
}

fn payload(id: u32) -> Vec<u8> {
    (0..BYTES).map(|i| (i as u32 * 7 + id * 13) as u8).collect()
}

fn data(pool: &Mempool, id: u32, bytes: &[u8], out: &mut PacketBatch) {
    for chunk in bytes.chunks(1400) {
        let mut p = pool.alloc().unwrap();
        p.set_len(chunk.len()).unwrap();
        p.copy_from_slice(chunk);
        out.push(stream::data(p, id));
    }
}

fn request(command: u8, port: u16, ip: [u8; 4]) -> Vec<u8> {
    let mut b = vec![4, command];
    b.extend_from_slice(&port.to_be_bytes());
    b.extend_from_slice(&ip);
    b.extend_from_slice(b"test\0");
    b
}

const PROXY: IpEndpoint = IpEndpoint {
    addr: IpAddress::V4(Ipv4Addr::new(10, 8, 0, 2)),
    port: 1080,
};

/// Output/input 0: the SOCKS clients (TCPEpollClient from 10.8.0.1);
/// 1: the application server's side (TCPEpollClient from 10.8.0.3).
struct App;

impl Element for App {
    fn class_name(&self) -> &'static str {
        "TestSocksApp"
    }
    fn port_count(&self) -> &'static str {
        "2/2"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, _a: &mut oxnet_graph::args::Args) -> Result<(), String> {
        let info = oxnet_stack::tcp::elements::info();
        info.borrow_mut().rss = Some(RssPlace::for_thread(1, 2));
        RECORD.with(|r| r.borrow_mut().info = Some(info));
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        for id in 1..=CONNECTS {
            out.push(stream::open_request(&pool, id, PROXY).unwrap());
            let mut bytes = request(1, 7, [10, 8, 0, 3]);
            bytes.extend(payload(id));
            data(&pool, id, &bytes, &mut out);
            out.push(stream::control(&pool, id, StreamEvent::Eof).unwrap());
        }
        for (id, dst) in [(BIND_OK, [10, 8, 0, 3]), (BIND_BAD, [10, 8, 0, 9])] {
            out.push(stream::open_request(&pool, id, PROXY).unwrap());
            data(&pool, id, &request(2, 7, dst), &mut out);
        }
        ctx.push(0, out);
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let (mut to_clients, mut to_peers) = (PacketBatch::default(), PacketBatch::default());
        RECORD.with(|r| {
            let mut r = r.borrow_mut();
            for p in batch.iter() {
                record(&mut r, p);
            }
            let ids: Vec<u32> = batch.iter().map(stream::socket).collect();
            for id in ids {
                react(&mut r, port, id, &pool, &mut to_clients, &mut to_peers);
            }
        });
        batch.clear();
        if !to_clients.is_empty() {
            ctx.push(0, to_clients);
        }
        if !to_peers.is_empty() {
            ctx.push(1, to_peers);
        }
    }
}

fn record(r: &mut Record, p: &Packet) {
    let s = r.seen.entry(stream::socket(p)).or_default();
    let letter = match stream::event(p) {
        StreamEvent::Open => 'O',
        StreamEvent::Data => {
            s.data.extend(p.segments().flat_map(|seg| seg.iter().copied()));
            'D'
        }
        StreamEvent::Eof => 'E',
        StreamEvent::Close => {
            s.closes.push(stream::errno(p));
            'C'
        }
    };
    if !(letter == 'D' && s.order.ends_with('D')) {
        s.order.push(letter);
    }
}

/// What the clients and the application server do next.
fn react(r: &mut Record, port: usize, id: u32, pool: &Mempool, clients: &mut PacketBatch, peers: &mut PacketBatch) {
    if port != 0 {
        return;
    }
    let Some(s) = r.seen.get_mut(&id) else { return };
    if (1..=CONNECTS).contains(&id) && s.data.len() >= 8 && !s.started {
        // Granted: the proxy's connection to the echo server is up; its
        // local port is the one RSS must like.
        s.started = true;
        let info = r.info.as_ref().unwrap().borrow();
        let rss = info.rss.unwrap();
        for key in info.flows.keys() {
            if key.remote.port == 7 && key.local.addr == IpAddress::V4(Ipv4Addr::new(10, 8, 0, 2)) {
                r.rss.insert(key.local.port, rss.replies_come_here(key));
            }
        }
        return;
    }
    if (id == BIND_OK || id == BIND_BAD) && s.data.len() >= 8 && !s.started {
        // The first reply: the port to connect to, from 10.8.0.3.
        s.started = true;
        let listening = u16::from_be_bytes([s.data[2], s.data[3]]);
        let to = IpEndpoint::new(Ipv4Addr::new(10, 8, 0, 2), listening);
        peers.push(stream::open_request(pool, id + PEER, to).unwrap());
        if id == BIND_OK {
            data(pool, id + PEER, FROM_SERVER, peers);
            peers.push(stream::control(pool, id + PEER, StreamEvent::Eof).unwrap());
        }
        return;
    }
    if id == BIND_BAD && s.order.ends_with('E') {
        // Refused and closed by the proxy: the client closes too.
        s.order.push('x');
        clients.push(stream::control(pool, id, StreamEvent::Close).unwrap());
        return;
    }
    if id == BIND_OK && s.data.len() >= 16 && s.order.len() < 100 && !s.order.contains('x') {
        // The second reply: the client talks to the application server.
        s.order.push('x');
        data(pool, id, FROM_CLIENT, clients);
        clients.push(stream::control(pool, id, StreamEvent::Eof).unwrap());
    }
}

const TEST_MODULE: Module = Module {
    classes: &["TestSocksApp"],
    create: |class| (class == "TestSocksApp").then(|| Box::new(App) as Box<dyn Element>),
};

const APPS: &str = r#"srv :: TCPEpollServer(1080, ADDR 10.8.0.2, FLOW_CONTROL true) -> proxy :: Socks4Proxy(BIND_ADDR 10.8.0.2) -> srv;
proxy[1] -> cli :: TCPEpollClient(SRC 10.8.0.2, FLOW_CONTROL true) -> [1]proxy;
echo :: TCPEpollServer(7, ADDR 10.8.0.3) -> echo;
app :: TestSocksApp;
app[0] -> clients :: TCPEpollClient(SRC 10.8.0.1) -> [0]app;
app[1] -> peers :: TCPEpollClient(SRC 10.8.0.3) -> [1]app;
"#;

#[test]
fn connect_and_bind_through_figure_11_on_one_stack() {
    crate::register();
    oxnet_graph::elements::add_modules(&[TEST_MODULE]);
    let mut router = oxnet_graph::build(
        "socks4-test",
        &(crate::testkit::hosts(&["10.8.0.1", "10.8.0.2", "10.8.0.3"]) + APPS),
        &[],
    )
    .unwrap();
    let done = || {
        RECORD.with(|r| {
            let r = r.borrow();
            (1..=CONNECTS)
                .chain([BIND_OK, BIND_BAD, BIND_OK + PEER, BIND_BAD + PEER])
                .all(|id| r.seen.get(&id).is_some_and(|s| !s.closes.is_empty()))
        })
    };
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed().as_secs() < 20,
            "not done in 20 s: {:?}",
            RECORD.with(|r| {
                r.borrow()
                    .seen
                    .iter()
                    .map(|(id, s)| format!("{id}:{}:{}", s.order, s.data.len()))
                    .collect::<Vec<_>>()
            })
        );
        router.run_once();
    }
    for _ in 0..1000 {
        router.run_once();
    }
    RECORD.with(|r| {
        let r = r.borrow();
        for id in 1..=CONNECTS {
            let s = &r.seen[&id];
            let mut want = vec![0, 90, 0, 7, 10, 8, 0, 3];
            want.extend(payload(id));
            assert_eq!((s.order.as_str(), &s.closes[..]), ("ODEC", &[0][..]), "connection {id}");
            assert!(
                s.data == want,
                "connection {id}: {} bytes, not the reply and the echo",
                s.data.len()
            );
        }
        // BIND from DSTIP: two replies 90, then the relay both ways.
        let s = &r.seen[&BIND_OK];
        assert_eq!(
            s.data[..8],
            [0, 90, 0xEE, 0x48, 10, 8, 0, 2],
            "first reply: port 61000 on BIND_ADDR"
        );
        assert_eq!((s.data[8], s.data[9]), (0, 90));
        assert_eq!(s.data[12..16], [10, 8, 0, 3], "second reply: the application server");
        assert_eq!(&s.data[16..], FROM_SERVER);
        assert_eq!(
            (s.order.replace('x', ""), &s.closes[..]),
            ("ODEC".to_string(), &[0][..])
        );
        let peer = &r.seen[&(BIND_OK + PEER)];
        assert_eq!(
            (peer.data.as_slice(), peer.order.as_str(), &peer.closes[..]),
            (FROM_CLIENT, "ODEC", &[0][..])
        );
        // BIND from elsewhere: 91 and closed.
        let s = &r.seen[&BIND_BAD];
        assert_eq!(s.data[..8], [0, 90, 0xEE, 0x49, 10, 8, 0, 2]);
        assert_eq!((s.data[8], s.data[9], &s.data[12..]), (0, 91, &[10u8, 8, 0, 3][..]));
        assert_eq!(
            (s.order.replace('x', ""), &s.closes[..]),
            ("ODEC".to_string(), &[0][..])
        );
        // RSS: every outgoing connection's replies land on queue 1.
        assert!(
            r.rss.len() >= CONNECTS as usize / 2,
            "the proxy's connections were seen: {:?}",
            r.rss
        );
        assert!(
            r.rss.values().all(|&here| here),
            "ports RSS maps elsewhere: {:?}",
            r.rss
        );
        for &port in r.rss.keys() {
            let hash = oxnet_driver::rss::hash_ipv4_tcp(
                &oxnet_driver::rss::DEFAULT_KEY,
                [10, 8, 0, 3],
                [10, 8, 0, 2],
                7,
                port,
            );
            assert_eq!(
                oxnet_driver::rss::queue_of(&oxnet_driver::rss::default_reta(2), hash),
                1
            );
        }
    });
    let n = CONNECTS as u64;
    assert_eq!(handler(&router, "proxy.requests"), n + 2);
    assert_eq!(
        (handler(&router, "proxy.connects"), handler(&router, "proxy.binds")),
        (n, 2)
    );
    assert_eq!(handler(&router, "proxy.granted"), n + 1);
    assert_eq!(handler(&router, "proxy.rejected"), 1);
    assert_eq!(handler(&router, "proxy.bind_mismatches"), 1);
    assert_eq!(handler(&router, "proxy.bound"), 2);
    assert_eq!(
        handler(&router, "proxy.bytes_up"),
        n * BYTES as u64 + FROM_CLIENT.len() as u64
    );
    assert_eq!(
        handler(&router, "proxy.bytes_down"),
        n * BYTES as u64 + FROM_SERVER.len() as u64
    );
    assert_eq!(handler(&router, "proxy.errors") + handler(&router, "proxy.unknown"), 0);
    assert_eq!(handler(&router, "proxy.sessions"), 0);
}
