//! The runner's network: a router of its own with `TCPStack` between a
//! source element (the segments a script injects, as IP packets with
//! their header marks set, as the IP layer sets them) and a sink element
//! (the IP packets the stack sends), in simulated time.

use crate::tcp::info::TcpInfo;
use crate::tcp::socket::Stack;
use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_0, PUSH};
use oxnet_graph::{Ctx, Registry, Router};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// IP packets waiting to go in, or that came out.
type Frames = Rc<RefCell<VecDeque<Vec<u8>>>>;

/// How many rounds a step may take before the runner calls the stack
/// busy for good (a loop in the stack would otherwise hang the test).
const MAX_ROUNDS: usize = 10_000;

/// Pushes the queued IP packets into the stack, network and transport
/// header marks set (IPv4's header length from its IHL; IPv6's fixed 40
/// bytes: the runner's packets carry no extension header).
struct ScriptSource(Frames);

impl Element for ScriptSource {
    fn class_name(&self) -> &'static str {
        "ScriptSource"
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
        let mut batch = PacketBatch::with_capacity(8);
        while let Some(bytes) = self.0.borrow_mut().pop_front() {
            let Ok(mut p) = ctx.pool().alloc() else {
                break;
            };
            let header_len = match bytes.first().map(|b| b >> 4) {
                Some(4) => usize::from(bytes[0] & 0x0f) * 4,
                _ => 40,
            };
            if p.set_len(bytes.len()).is_err() {
                continue;
            }
            p.copy_from_slice(&bytes);
            if p.set_network_header(0, header_len).is_ok() {
                batch.push(p);
            }
        }
        let worked = !batch.is_empty();
        if worked {
            ctx.push(0, batch);
        }
        worked
    }
}

/// Keeps every packet that reaches it, as bytes.
struct ScriptSink(Frames);

impl Element for ScriptSink {
    fn class_name(&self) -> &'static str {
        "ScriptSink"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        for p in batch.iter() {
            self.0.borrow_mut().push_back(p.to_vec());
        }
        batch.clear();
    }
}

/// The graph's library plus the runner's two elements.
struct WithScriptElements {
    input: Frames,
    output: Frames,
}

impl Registry for WithScriptElements {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "ScriptSource" => Some(Box::new(ScriptSource(self.input.clone()))),
            "ScriptSink" => Some(Box::new(ScriptSink(self.output.clone()))),
            _ => oxnet_graph::elements::Standard.create(class),
        }
    }
}

/// The router a script runs against, and its TCP state.
pub(super) struct Net {
    router: Router,
    input: Frames,
    output: Frames,
    /// The router's TCPInfo, for the sockets.
    pub(super) stack: Stack,
}

impl Net {
    /// Builds `ScriptSource -> TCPStack -> ScriptSink` with a simulated
    /// clock at 0.
    pub(super) fn new() -> Result<Net, String> {
        crate::elements::register();
        let input = Frames::default();
        let output = Frames::default();
        let registry = WithScriptElements {
            input: input.clone(),
            output: output.clone(),
        };
        // TCPStack is in the prelude that `register` adds.
        let config = "src :: ScriptSource -> tcp :: TCPStack -> out :: ScriptSink;\n";
        let flat = oxnet_graph::lang::compile("script-runner.click", config, &[], &|c: &str| {
            registry.create(c).is_some()
        })
        .map_err(|e| e.to_string())?;
        let mut router = Router::build(&flat, &registry).map_err(|e| e.0)?;
        router.use_simulated_time();
        // Right after the build, on this thread: this router's TCPInfo.
        let stack = crate::elements::shared::<TcpInfo>();
        Ok(Net {
            router,
            input,
            output,
            stack,
        })
    }

    /// The router's clock, microseconds from the script's start.
    pub(super) fn now(&self) -> u64 {
        self.router.now_us()
    }

    /// Moves the clock forward to `us` (never back).
    pub(super) fn advance_to(&mut self, us: u64) {
        self.router.advance_simulated_time(us);
    }

    /// The earliest TCP timer deadline after now (RTO, TIME-WAIT), so
    /// that the runner can stop the clock there and stamp what the timer
    /// sends with its time. A stale entry only costs an extra stop.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        let now = self.now();
        let info = self.stack.borrow();
        info.timers.iter().map(|&(at, _, _)| at).find(|&at| at > now)
    }

    /// Queues an IP packet for the stack.
    pub(super) fn inject(&mut self, bytes: Vec<u8>) {
        self.input.borrow_mut().push_back(bytes);
    }

    /// Runs rounds at the current time until nothing happens, and returns
    /// what came out. Err if the stack is still busy after `MAX_ROUNDS`.
    pub(super) fn settle(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let mut idle = false;
        for _ in 0..MAX_ROUNDS {
            if !self.router.run_once() {
                idle = true;
                break;
            }
        }
        let out = self.output.borrow_mut().drain(..).collect();
        if idle {
            Ok(out)
        } else {
            Err(format!("the stack was still busy after {MAX_ROUNDS} rounds"))
        }
    }
}
