//! A router you plug bytes into: the graph's and the stack's elements
//! plus two of this module's, PlugSource (pushes the packets the caller
//! queued) and PlugSink (keeps what reaches it), in simulated time. The
//! stack's tests, the script runner and the C ABI (oxnet-ffi) drive the
//! stack through one of these.
//!
//! PlugSource gives an IP packet (version 4 or 6 in its first byte) its
//! header marks as the IP layer's input elements would (IPv4: its IHL;
//! IPv6: the fixed 40 bytes, no extension header walked); anything else
//! (an Ethernet frame) goes as it is, for the IP layer's own elements.

use crate::tcp::info::TcpInfo;
use crate::tcp::socket::Stack;
use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_0, PUSH};
use oxnet_graph::{Ctx, Registry, Router};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// Packets (their bytes) waiting to go in, or that came out.
pub type Frames = Rc<RefCell<VecDeque<Vec<u8>>>>;

/// Metadata flags PlugSource sets on every packet it makes (a device's
/// receive checksum verdict, for instance).
pub type Flags = Rc<Cell<u32>>;

struct PlugSource(Frames, Flags);

impl Element for PlugSource {
    fn class_name(&self) -> &'static str {
        "PlugSource"
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
        let mut batch = PacketBatch::with_capacity(32);
        loop {
            let Some(bytes) = self.0.borrow_mut().pop_front() else {
                break;
            };
            let Ok(mut p) = ctx.pool().alloc() else {
                // The pool is empty: the rest waits for the next round.
                self.0.borrow_mut().push_front(bytes);
                break;
            };
            if p.set_len(bytes.len()).is_err() {
                continue;
            }
            p.copy_from_slice(&bytes);
            let header_len = match bytes.first().map(|b| b >> 4) {
                Some(4) => Some(usize::from(bytes[0] & 0x0f) * 4),
                Some(6) => Some(40),
                _ => None,
            };
            if let Some(len) = header_len {
                if p.set_network_header(0, len).is_err() {
                    continue;
                }
            }
            p.meta_mut().flags |= self.1.get();
            batch.push(p);
        }
        let worked = !batch.is_empty();
        ctx.push(0, batch);
        worked
    }
}

struct PlugSink(Frames);

impl Element for PlugSink {
    fn class_name(&self) -> &'static str {
        "PlugSink"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        for p in batch.iter() {
            // Every segment of a chain (TCP's zero-copy segments are a
            // header packet and attached data).
            let mut frame = Vec::with_capacity(p.total_len());
            p.copy_chain_to(&mut frame);
            self.0.borrow_mut().push_back(frame);
        }
        batch.clear();
    }
}

struct WithPlug {
    input: Frames,
    output: Frames,
    flags: Flags,
}

impl Registry for WithPlug {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "PlugSource" => Some(Box::new(PlugSource(self.input.clone(), self.flags.clone()))),
            "PlugSink" => Some(Box::new(PlugSink(self.output.clone()))),
            _ => oxnet_graph::elements::Standard.create(class),
        }
    }
}

/// A router built from a configuration that may use PlugSource and
/// PlugSink, with its queues and its TCP state.
pub struct Plug {
    pub router: Router,
    /// What PlugSource pushes, oldest first.
    pub input: Frames,
    /// What reached PlugSink, oldest first.
    pub output: Frames,
    pub flags: Flags,
    /// The router's TCPInfo.
    pub stack: Stack,
}

impl Plug {
    /// Builds `config` (`file` names it in errors) with the stack's
    /// elements registered and a simulated clock at 0.
    pub fn build(file: &str, config: &str) -> Result<Plug, String> {
        crate::elements::register();
        let (input, output, flags) = (Frames::default(), Frames::default(), Flags::default());
        let registry = WithPlug {
            input: input.clone(),
            output: output.clone(),
            flags: flags.clone(),
        };
        let flat = oxnet_graph::lang::compile(file, config, &[], &|c: &str| registry.create(c).is_some())
            .map_err(|e| e.to_string())?;
        let mut router = Router::build(&flat, &registry).map_err(|e| e.0)?;
        router.use_simulated_time();
        // Right after the build, on this thread: this router's TCPInfo.
        let stack = crate::elements::shared::<TcpInfo>();
        Ok(Plug {
            router,
            input,
            output,
            flags,
            stack,
        })
    }

    /// The simulated clock, microseconds.
    pub fn now(&self) -> u64 {
        self.router.now_us()
    }

    /// The earliest TCP timer deadline after now (a stale one only costs
    /// an extra stop to whoever steps the clock to it).
    pub fn next_deadline(&self) -> Option<u64> {
        let now = self.now();
        let info = self.stack.borrow();
        info.timers.iter().map(|&(at, _, _)| at).find(|&at| at > now)
    }

    /// Runs rounds at the current time until nothing happens (at most
    /// `max_rounds`: false if it was still busy) and takes what came out.
    pub fn settle(&mut self, max_rounds: usize) -> (bool, Vec<Vec<u8>>) {
        let mut idle = false;
        for _ in 0..max_rounds {
            if !self.router.run_once() {
                idle = true;
                break;
            }
        }
        (idle, self.output.borrow_mut().drain(..).collect())
    }
}
