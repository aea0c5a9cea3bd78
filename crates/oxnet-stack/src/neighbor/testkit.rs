//! Test-only elements and a harness: `Feed` pushes given frames at given
//! (simulated) times out of the output named, `Collect` keeps what
//! reaches it with the time it arrived, and [`Harness::run_until`] runs
//! the router up to a time.

use crate::anno;
use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::elements::Standard;
use oxnet_graph::router::{Ctx, Registry, Router};
use oxnet_graph::timer::TimerId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::rc::Rc;

/// Something the feed does at a time.
enum Event {
    /// Push `bytes` out of `port`, with the next-hop annotation if given.
    Frame {
        port: usize,
        bytes: Vec<u8>,
        next_hop: Option<IpAddr>,
    },
    /// Ask the test's `run` to return.
    Stop,
}

/// The state the test shares with its `Feed` and `Collect` elements.
#[derive(Default)]
pub struct Harness {
    /// By time, in the order given for equal times.
    events: RefCell<VecDeque<(u64, Event)>>,
    /// What `Collect` received: (time, bytes).
    pub received: RefCell<Vec<(u64, Vec<u8>)>>,
    stop: Cell<bool>,
}

impl Harness {
    /// A router from `config`, with `Feed` and `Collect` elements of this
    /// harness beside the library's (the stack's included).
    pub fn router(self: &Rc<Self>, config: &str) -> Router {
        crate::elements::register();
        let flat = oxnet_graph::lang::compile("t.click", config, &[], &|c: &str| {
            c == "Feed" || c == "Collect" || Standard.is_class(c)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
        let mut router = Router::build(&flat, &TestRegistry(self.clone())).unwrap_or_else(|e| panic!("{e}"));
        router.use_simulated_time();
        router
    }

    fn add(&self, at: u64, event: Event) {
        let mut events = self.events.borrow_mut();
        let i = events.iter().position(|(t, _)| *t > at).unwrap_or(events.len());
        events.insert(i, (at, event));
    }

    /// The feed pushes `bytes` out of `port` at time `at` (µs).
    pub fn inject(&self, at: u64, port: usize, bytes: &[u8], next_hop: Option<IpAddr>) {
        self.add(
            at,
            Event::Frame {
                port,
                bytes: bytes.to_vec(),
                next_hop,
            },
        );
    }

    /// Runs the router until time `at` (µs): everything due at `at`
    /// included.
    pub fn run_until(&self, router: &mut Router, at: u64) {
        self.add(at, Event::Stop);
        router.run(&|| self.stop.get());
        self.stop.set(false);
    }

    /// What `Collect` received since the last call.
    pub fn take(&self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut *self.received.borrow_mut())
    }
}

struct TestRegistry(Rc<Harness>);

impl Registry for TestRegistry {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "Feed" => Some(Box::new(Feed {
                harness: self.0.clone(),
                armed: None,
            })),
            "Collect" => Some(Box::new(Collect(self.0.clone()))),
            _ => Standard.create(class),
        }
    }
}

/// Pushes the harness's frames at their times (a task, so that frames
/// added between runs are seen; a timer wakes it at the next one).
struct Feed {
    harness: Rc<Harness>,
    armed: Option<u64>,
}

impl Element for Feed {
    fn class_name(&self) -> &'static str {
        "Feed"
    }
    fn port_count(&self) -> &'static str {
        "0/1-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let now = ctx.now_us();
        let mut did = false;
        loop {
            let event = {
                let mut events = self.harness.events.borrow_mut();
                match events.front() {
                    Some((t, _)) if *t <= now => events.pop_front().map(|(_, e)| e),
                    _ => None,
                }
            };
            let Some(event) = event else {
                break;
            };
            did = true;
            match event {
                Event::Stop => self.harness.stop.set(true),
                Event::Frame { port, bytes, next_hop } => {
                    let mut p = ctx.pool().alloc().expect("pool");
                    p.set_len(bytes.len()).expect("length");
                    p.copy_from_slice(&bytes);
                    match next_hop {
                        Some(IpAddr::V4(a)) => anno::set_next_hop_v4(&mut p, a),
                        Some(IpAddr::V6(a)) => anno::set_next_hop_v6(&mut p, a),
                        None => {}
                    }
                    let mut batch = PacketBatch::with_capacity(1);
                    batch.push(p);
                    ctx.push(port, batch);
                }
            }
        }
        let next = self.harness.events.borrow().front().map(|(t, _)| *t);
        if let Some(at) = next {
            if self.armed != Some(at) {
                ctx.schedule_after_us(at.saturating_sub(now));
                self.armed = Some(at);
            }
        }
        did
    }
    fn run_timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {
        self.armed = None;
    }
}

/// Keeps every frame it gets, with the time.
struct Collect(Rc<Harness>);

impl Element for Collect {
    fn class_name(&self) -> &'static str {
        "Collect"
    }
    fn port_count(&self) -> &'static str {
        "1/0"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let now = ctx.now_us();
        let mut received = self.0.received.borrow_mut();
        for p in batch.iter() {
            received.push((now, p.to_vec()));
        }
        batch.clear();
    }
}

/// Bytes from hexadecimal text (spaces, newlines and `|` ignored).
pub fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}
