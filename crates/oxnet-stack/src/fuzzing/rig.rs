//! A router for the fuzz bodies: built from a configuration that may use
//! `FuzzSource0` .. `FuzzSource3` (each pushes the packets queued on its
//! input queue) and `FuzzSink` (keeps the bytes of what reaches it), with
//! simulated time.

use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_0, PUSH};
use oxnet_graph::{Ctx, Registry, Router};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A packet to push, and where its network header mark goes (offset,
/// length), if anywhere.
pub struct Input {
    pub bytes: Vec<u8>,
    pub network_header: Option<(usize, usize)>,
}

/// The queues of the sources (one per `FuzzSourceN`).
pub type Inputs = Rc<RefCell<[VecDeque<Input>; SOURCES]>>;
/// What the sinks kept, every sink in one list.
pub type Outputs = Rc<RefCell<Vec<Vec<u8>>>>;

/// Sources a configuration may use.
pub const SOURCES: usize = 4;

struct FuzzSource {
    index: usize,
    inputs: Inputs,
    /// Packets not pushed: the router's pool was empty.
    alloc_failures: Rc<RefCell<u64>>,
}

impl Element for FuzzSource {
    fn class_name(&self) -> &'static str {
        "FuzzSource"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let queued: Vec<Input> = self.inputs.borrow_mut()[self.index].drain(..).collect();
        if queued.is_empty() {
            return false;
        }
        let mut batch = PacketBatch::with_capacity(queued.len());
        for input in queued {
            // An empty pool (packets held by the stack) or a packet too
            // big for a buffer: not the stack's input, dropped here.
            let Ok(mut p) = ctx.pool().alloc() else {
                *self.alloc_failures.borrow_mut() += 1;
                continue;
            };
            if p.set_len(input.bytes.len()).is_err() {
                continue;
            }
            p.copy_from_slice(&input.bytes);
            if let Some((offset, len)) = input.network_header {
                if p.set_network_header(offset, len).is_err() {
                    continue;
                }
            }
            batch.push(p);
        }
        ctx.push(0, batch);
        true
    }
}

struct FuzzSink(Outputs);

impl Element for FuzzSink {
    fn class_name(&self) -> &'static str {
        "FuzzSink"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        for p in batch.iter() {
            self.0.borrow_mut().push(p.to_vec());
        }
        batch.clear();
    }
}

struct WithFuzz {
    inputs: Inputs,
    outputs: Outputs,
    alloc_failures: Rc<RefCell<u64>>,
}

impl Registry for WithFuzz {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        if class == "FuzzSink" {
            return Some(Box::new(FuzzSink(self.outputs.clone())));
        }
        if let Some(index) = class.strip_prefix("FuzzSource") {
            let index: usize = index.parse().ok().filter(|&i| i < SOURCES)?;
            return Some(Box::new(FuzzSource {
                index,
                inputs: self.inputs.clone(),
                alloc_failures: self.alloc_failures.clone(),
            }));
        }
        oxnet_graph::elements::Standard.create(class)
    }
}

/// A router with simulated time and its sources' and sinks' queues.
pub struct Rig {
    pub router: Router,
    pub inputs: Inputs,
    pub outputs: Outputs,
    /// Inputs a source could not push (the pool was empty).
    pub alloc_failures: Rc<RefCell<u64>>,
}

/// Rounds [`Rig::settle`] runs at most: enough for a packet to cross the
/// configurations here and be answered, few enough to bound a run.
const SETTLE_ROUNDS: usize = 16;

impl Rig {
    /// Builds `config` (with the stack's elements registered). A
    /// configuration that does not build is the fuzz body's bug: panics.
    pub fn new(config: &str) -> Rig {
        crate::elements::register();
        let inputs = Inputs::default();
        let outputs = Outputs::default();
        let alloc_failures = Rc::new(RefCell::new(0));
        let registry = WithFuzz {
            inputs: inputs.clone(),
            outputs: outputs.clone(),
            alloc_failures: alloc_failures.clone(),
        };
        let flat = oxnet_graph::lang::compile("fuzz.click", config, &[], &|c: &str| registry.create(c).is_some())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut router = Router::build(&flat, &registry).unwrap_or_else(|e| panic!("{e}"));
        router.use_simulated_time();
        Rig {
            router,
            inputs,
            outputs,
            alloc_failures,
        }
    }

    /// Queues `bytes` on source `index`.
    pub fn queue(&self, index: usize, bytes: Vec<u8>, network_header: Option<(usize, usize)>) {
        self.inputs.borrow_mut()[index].push_back(Input { bytes, network_header });
    }

    /// Runs rounds until nothing happens (at most SETTLE_ROUNDS) and
    /// returns what the sinks got.
    pub fn settle(&mut self) -> Vec<Vec<u8>> {
        for _ in 0..SETTLE_ROUNDS {
            if !self.router.run_once() {
                break;
            }
        }
        std::mem::take(&mut *self.outputs.borrow_mut())
    }

    /// Moves simulated time forward by `us`, then settles (the timers due
    /// fire in those rounds).
    pub fn advance(&mut self, us: u64) -> Vec<Vec<u8>> {
        let now = self.router.now_us();
        self.router.advance_simulated_time(now.saturating_add(us));
        self.settle()
    }

    /// Reads `element.handler` (an element not found at the top is looked
    /// for inside a compound named `tcp`).
    pub fn handler(&self, element: &str, handler: &str) -> String {
        let index = self
            .router
            .find(element)
            .or_else(|| self.router.find(&format!("tcp/{element}")))
            .unwrap_or_else(|| panic!("no element {element}"));
        self.router
            .read_handler(index, handler)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A handler read as a number.
    pub fn number(&self, element: &str, handler: &str) -> u64 {
        let text = self.handler(element, handler);
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{element}.{handler}: {text}"))
    }
}
