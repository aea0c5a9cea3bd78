//! Tests of the IP family: routers built from configurations with two
//! test-only elements, `Inject` (pushes the frames a test queued, with
//! the metadata it asked for) and `Sink(NAME)` (keeps what it gets, with
//! the marks and annotations), so that each test checks exact bytes out;
//! `Keep` holds packets to empty the router's pool.

mod fuzz;
mod icmp;
mod ipv4_input;
mod ipv6_input;
mod output;

use crate::anno;
use oxnet_driver::{Packet, PacketBatch, TxOffload};
use oxnet_graph::element::Element;
use oxnet_graph::router::{Ctx, Registry, Router};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::rc::Rc;

/// A frame to inject, and the metadata it comes with.
#[derive(Debug, Clone, Default)]
pub struct Item {
    pub bytes: Vec<u8>,
    /// `Metadata::flags` (the driver's checksum verdict).
    pub flags: u32,
    pub next_hop_v4: Option<Ipv4Addr>,
    pub next_hop_v6: Option<Ipv6Addr>,
    /// Network mark (offset, length to the transport mark).
    pub marks: Option<(usize, usize)>,
    pub packet_type: u8,
    /// Bytes of head room to use up (the frame starts that much earlier).
    pub use_headroom: usize,
    /// A second segment to chain after the frame.
    pub chained: Option<Vec<u8>>,
    /// The offload request it comes with.
    pub tx_offload: TxOffload,
}

impl Item {
    pub fn frame(bytes: Vec<u8>) -> Item {
        Item {
            bytes,
            ..Item::default()
        }
    }
}

/// What a sink saw of one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Every segment's bytes, in order.
    pub bytes: Vec<u8>,
    pub segments: usize,
    pub network: Option<isize>,
    pub transport: Option<isize>,
    pub next_hop_v4: Ipv4Addr,
    pub next_hop_v6: Ipv6Addr,
    pub packet_type: u8,
    pub tx_offload: TxOffload,
    /// The router's (simulated) time when it came, in microseconds.
    pub at_us: u64,
}

type Queue = Rc<RefCell<VecDeque<Item>>>;
type Kept = Rc<RefCell<HashMap<String, Vec<Seen>>>>;

struct Inject(Queue);

impl Element for Inject {
    fn class_name(&self) -> &'static str {
        "Inject"
    }
    fn port_count(&self) -> &'static str {
        "0/1"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let items: Vec<Item> = self.0.borrow_mut().drain(..).collect();
        if items.is_empty() {
            return false;
        }
        let mut batch = PacketBatch::with_capacity(items.len());
        for item in items {
            let mut p = ctx.pool().alloc().expect("test pool");
            if item.use_headroom > 0 {
                // The data starts earlier: less head room in front of it.
                p.prepend(item.use_headroom).expect("head room");
            }
            p.set_len(item.bytes.len()).expect("a frame that fits a buffer");
            p.copy_from_slice(&item.bytes);
            p.meta_mut().flags = item.flags;
            if let Some(a) = item.next_hop_v4 {
                anno::set_next_hop_v4(&mut p, a);
            }
            if let Some(a) = item.next_hop_v6 {
                anno::set_next_hop_v6(&mut p, a);
            }
            if let Some((offset, len)) = item.marks {
                let _ = p.set_network_header(offset, len);
            }
            p.anno_mut().packet_type = item.packet_type;
            p.set_tx_offload(item.tx_offload);
            if let Some(bytes) = item.chained {
                let mut next = ctx.pool().alloc().expect("test pool");
                next.set_len(bytes.len()).expect("a segment that fits a buffer");
                next.copy_from_slice(&bytes);
                p.append(next);
            }
            batch.push(p);
        }
        ctx.push(0, batch);
        true
    }
}

struct Sink {
    name: String,
    kept: Kept,
}

impl Element for Sink {
    fn class_name(&self) -> &'static str {
        "Sink"
    }
    fn port_count(&self) -> &'static str {
        "1/0"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, args: &mut oxnet_graph::args::Args) -> Result<(), String> {
        self.name = args.required("NAME")?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut kept = self.kept.borrow_mut();
        let list = kept.entry(self.name.clone()).or_default();
        for p in batch.iter() {
            list.push(seen(p, ctx.now_us()));
        }
        batch.clear();
    }
}

fn seen(p: &Packet, at_us: u64) -> Seen {
    let mut bytes = Vec::new();
    p.copy_chain_to(&mut bytes);
    Seen {
        bytes,
        segments: p.segment_count(),
        network: p.network_offset(),
        transport: p.transport_offset(),
        next_hop_v4: anno::next_hop_v4(p),
        next_hop_v6: anno::next_hop_v6(p),
        packet_type: p.anno().packet_type,
        tx_offload: p.tx_offload(),
        at_us,
    }
}

/// Keeps the packets themselves (their buffers stay taken from the pool),
/// and the pool's free buffers after each batch.
struct Keep {
    held: Rc<RefCell<Vec<Packet>>>,
    free: Rc<std::cell::Cell<usize>>,
}

impl Element for Keep {
    fn class_name(&self) -> &'static str {
        "Keep"
    }
    fn port_count(&self) -> &'static str {
        "1/0"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let len = batch.len();
        batch.consume_front(len, |p| self.held.borrow_mut().push(p));
        self.free.set(ctx.pool().free_count());
    }
}

struct TestRegistry {
    queue: Queue,
    kept: Kept,
    held: Rc<RefCell<Vec<Packet>>>,
    free: Rc<std::cell::Cell<usize>>,
}

impl Registry for TestRegistry {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "Inject" => Some(Box::new(Inject(self.queue.clone()))),
            "Keep" => Some(Box::new(Keep {
                held: self.held.clone(),
                free: self.free.clone(),
            })),
            "Sink" => Some(Box::new(Sink {
                name: String::new(),
                kept: self.kept.clone(),
            })),
            _ => oxnet_graph::elements::Standard.create(class),
        }
    }
}

/// A router built from `config` (with `Inject` and `Sink`), in simulated
/// time.
pub struct Bench {
    pub router: Router,
    queue: Queue,
    kept: Kept,
    /// What `Keep` holds.
    pub held: Rc<RefCell<Vec<Packet>>>,
    /// The pool's free buffers when `Keep` last got a batch.
    pub free: Rc<std::cell::Cell<usize>>,
}

impl Bench {
    pub fn new(config: &str) -> Bench {
        crate::elements::register();
        let queue: Queue = Rc::default();
        let kept: Kept = Rc::default();
        let held: Rc<RefCell<Vec<Packet>>> = Rc::default();
        let free: Rc<std::cell::Cell<usize>> = Rc::default();
        let registry = TestRegistry {
            queue: queue.clone(),
            kept: kept.clone(),
            held: held.clone(),
            free: free.clone(),
        };
        let flat = oxnet_graph::lang::compile("t.click", config, &[], &|c: &str| {
            matches!(c, "Inject" | "Sink" | "Keep") || oxnet_graph::elements::Standard.is_class(c)
        })
        .expect("configuration compiles");
        let mut router = Router::build(&flat, &registry).expect("router builds");
        router.use_simulated_time();
        Bench {
            router,
            queue,
            kept,
            held,
            free,
        }
    }

    /// Pushes `items` through in one batch, without moving the clock.
    pub fn push(&mut self, items: Vec<Item>) {
        self.queue.borrow_mut().extend(items);
        self.router.run_once();
    }

    /// Pushes frames through in one batch.
    pub fn frames(&mut self, frames: Vec<Vec<u8>>) {
        self.push(frames.into_iter().map(Item::frame).collect());
    }

    /// Jumps the simulated clock to the next timer and fires it (and
    /// whatever is due then), and stops there: the router goes on after.
    pub fn next_timer(&mut self) {
        let idle_rounds = std::cell::Cell::new(0);
        self.router.run(&|| {
            idle_rounds.set(idle_rounds.get() + 1);
            idle_rounds.get() > 1
        });
    }

    /// What sink `name` kept (and forgets it).
    pub fn take(&self, name: &str) -> Vec<Seen> {
        self.kept.borrow_mut().remove(name).unwrap_or_default()
    }

    /// Handler `handler` of element `element`, as a number.
    pub fn read(&self, element: &str, handler: &str) -> u64 {
        let index = self.router.find(element).expect("element");
        let text = self.router.read_handler(index, handler).expect("handler");
        text.parse()
            .unwrap_or_else(|_| panic!("{element}.{handler} = {text:?}"))
    }

    /// Every handler of `element` given, with its value, and the others 0.
    pub fn expect_counts(&self, element: &str, expected: &[(&str, u64)]) {
        let index = self.router.find(element).expect("element");
        let names: Vec<String> = {
            let e = self.router.read_handler(index, "handlers").unwrap_or_default();
            e.lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        };
        for name in names {
            let Ok(text) = self.router.read_handler(index, &name) else {
                continue;
            };
            let Ok(value) = text.parse::<u64>() else {
                continue;
            };
            let listed = expected.iter().find(|(n, _)| *n == name);
            if listed.is_none() && name == "drops" {
                continue;
            }
            let want = listed.map_or(0, |(_, v)| *v);
            assert_eq!(value, want, "{element}.{name}");
        }
        for (name, want) in expected {
            assert_eq!(self.read(element, name), *want, "{element}.{name}");
        }
    }
}

/// An Ethernet header from 02:00:00:00:00:02 to 02:00:00:00:00:01 with
/// `ethertype`.
pub fn ether(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An Ethernet/IPv4 frame: a 20-byte header written by the wire module,
/// then `payload`.
pub fn ipv4_frame(src: [u8; 4], dst: [u8; 4], protocol: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_fragment(src, dst, protocol, payload, 0x1234, false, 0)
}

/// A fragment: `payload` at `offset` of datagram `ident`.
pub fn ipv4_fragment(
    src: [u8; 4],
    dst: [u8; 4],
    protocol: u8,
    payload: &[u8],
    ident: u16,
    more: bool,
    offset: u16,
) -> Vec<u8> {
    use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
    let repr = Ipv4Repr {
        src: src.into(),
        dst: dst.into(),
        protocol: protocol.into(),
        payload_len: payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag: false,
        more_frags: more,
        frag_offset: offset,
    };
    let mut f = ether(0x0800);
    let mut ip = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut ip[..]));
    ip[20..].copy_from_slice(payload);
    f.extend_from_slice(&ip);
    f
}

/// An Ethernet/IPv6 frame: the fixed header written by the wire module
/// (hop limit 64), then `payload` (extension headers included).
pub fn ipv6_frame(src: &str, dst: &str, next_header: u8, payload: &[u8]) -> Vec<u8> {
    use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
    let repr = Ipv6Repr {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        next_header: next_header.into(),
        payload_len: payload.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut f = ether(0x86DD);
    let mut ip = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut ip[..]));
    ip[40..].copy_from_slice(payload);
    f.extend_from_slice(&ip);
    f
}
