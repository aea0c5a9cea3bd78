//! The router behind a stack handle: `FfiSource -> TCPStack -> FfiSink`
//! in simulated time. C feeds the source with IP packets and drains the
//! sink. (oxnet-stack's script runner builds the same shape, but its
//! `Net` is private to it, so this crate has its own two elements.)

use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_0, PUSH};
use oxnet_graph::{Ctx, Registry, Router};
use oxnet_stack::tcp::info::TcpInfo;
use oxnet_stack::tcp::socket::Stack;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// IP packets waiting to go in.
type Inbox = Rc<RefCell<VecDeque<Vec<u8>>>>;
/// IP packets that came out (bytes only; the time is added by `Net`).
type Outbox = Rc<RefCell<Vec<Vec<u8>>>>;

/// Rounds one settle may take before the stack is called stuck (a loop
/// in the stack would otherwise hang the C caller).
const MAX_ROUNDS: usize = 10_000;

/// The largest IP packet taken in (IPv4's total length field's limit).
pub const MAX_PACKET: usize = 65_535;

/// Pushes queued IP packets into the stack with their network header
/// marked, as an IP input element would (IPv4: the IHL; IPv6: the fixed
/// 40-byte header).
struct FfiSource(Inbox);

impl Element for FfiSource {
    fn class_name(&self) -> &'static str {
        "FfiSource"
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
            let Ok(mut p) = ctx.pool().alloc() else { break };
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
struct FfiSink(Outbox);

impl Element for FfiSink {
    fn class_name(&self) -> &'static str {
        "FfiSink"
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

/// The graph's library plus the two elements above.
struct WithFfiElements {
    input: Inbox,
    output: Outbox,
}

impl Registry for WithFfiElements {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "FfiSource" => Some(Box::new(FfiSource(self.input.clone()))),
            "FfiSink" => Some(Box::new(FfiSink(self.output.clone()))),
            _ => oxnet_graph::elements::Standard.create(class),
        }
    }
}

/// The router, its queues and its TCP state.
pub struct Net {
    router: Router,
    input: Inbox,
    output: Outbox,
    /// Packets sent, oldest first, with the simulated time they came out.
    sent: VecDeque<(u64, Vec<u8>)>,
    /// The router's TCPInfo, for the sockets.
    pub stack: Stack,
}

impl Net {
    /// Builds the router with a simulated clock at 0.
    pub fn new() -> Result<Net, String> {
        oxnet_stack::elements::register();
        let input = Inbox::default();
        let output = Outbox::default();
        let registry = WithFfiElements {
            input: input.clone(),
            output: output.clone(),
        };
        let config = "src :: FfiSource -> tcp :: TCPStack -> out :: FfiSink;\n";
        let flat = oxnet_graph::lang::compile("oxnet-ffi.click", config, &[], &|c: &str| registry.create(c).is_some())
            .map_err(|e| e.to_string())?;
        let mut router = Router::build(&flat, &registry).map_err(|e| e.0)?;
        router.use_simulated_time();
        // Right after the build, on this thread: this router's TCPInfo.
        let stack = oxnet_stack::elements::shared::<TcpInfo>();
        Ok(Net {
            router,
            input,
            output,
            sent: VecDeque::new(),
            stack,
        })
    }

    /// The simulated clock, microseconds since the stack was made.
    pub fn now(&self) -> u64 {
        self.router.now_us()
    }

    /// The earliest TCP timer deadline after now, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        let now = self.now();
        let info = self.stack.borrow();
        info.timers.iter().map(|&(at, _, _)| at).find(|&at| at > now)
    }

    /// Queues an IP packet and lets the stack take it.
    pub fn input(&mut self, bytes: Vec<u8>) -> Result<(), i32> {
        self.input.borrow_mut().push_back(bytes);
        self.settle()
    }

    /// Runs rounds at the current time until nothing happens; what came
    /// out joins the sent queue. EIO if the stack stays busy.
    pub fn settle(&mut self) -> Result<(), i32> {
        let mut idle = false;
        for _ in 0..MAX_ROUNDS {
            if !self.router.run_once() {
                idle = true;
                break;
            }
        }
        let now = self.now();
        let out: Vec<Vec<u8>> = std::mem::take(&mut *self.output.borrow_mut());
        self.sent.extend(out.into_iter().map(|b| (now, b)));
        if idle {
            Ok(())
        } else {
            Err(libc::EIO)
        }
    }

    /// Moves the clock to `until` (never back), stopping at every TCP
    /// timer deadline on the way so that what a timer sends carries its
    /// own time.
    pub fn advance_to(&mut self, until: u64) -> Result<(), i32> {
        loop {
            self.settle()?;
            let now = self.now();
            if now >= until {
                return Ok(());
            }
            let step = self.next_deadline().map_or(until, |d| d.min(until));
            self.router.advance_simulated_time(step);
        }
    }

    /// The oldest packet sent and not yet taken, with its time.
    pub fn peek_sent(&self) -> Option<&(u64, Vec<u8>)> {
        self.sent.front()
    }

    /// Takes the oldest packet sent.
    pub fn pop_sent(&mut self) -> Option<(u64, Vec<u8>)> {
        self.sent.pop_front()
    }
}
