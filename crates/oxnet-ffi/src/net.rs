//! The router behind a stack handle: `PlugSource -> TCPStack -> PlugSink`
//! in simulated time (`oxnet_stack::plug`). C feeds the source with IP
//! packets and drains the sink.

use oxnet_stack::plug::Plug;
use oxnet_stack::tcp::socket::Stack;
use std::collections::VecDeque;

/// Rounds one settle may take before the stack is called stuck (a loop
/// in the stack would otherwise hang the C caller).
const MAX_ROUNDS: usize = 10_000;

/// The largest IP packet taken in (IPv4's total length field's limit).
pub const MAX_PACKET: usize = 65_535;

/// The router, its queues and its TCP state.
pub struct Net {
    plug: Plug,
    /// Packets sent, oldest first, with the simulated time they came out.
    sent: VecDeque<(u64, Vec<u8>)>,
    /// The router's TCPInfo, for the sockets.
    pub stack: Stack,
}

impl Net {
    /// Builds the router with a simulated clock at 0.
    pub fn new() -> Result<Net, String> {
        let plug = Plug::build(
            "oxnet-ffi.click",
            "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink;\n",
        )?;
        let stack = plug.stack.clone();
        Ok(Net {
            plug,
            sent: VecDeque::new(),
            stack,
        })
    }

    /// The simulated clock, microseconds since the stack was made.
    pub fn now(&self) -> u64 {
        self.plug.now()
    }

    /// The earliest TCP timer deadline after now, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.plug.next_deadline()
    }

    /// The largest packet the stack takes: PlugSource puts one over a
    /// buffer of the router's pool (2 KiB; a segment coalesced past one
    /// MTU, as packetdrill's scripts inject to mimic GRO) in a large
    /// buffer of its own ([`oxnet_stack::plug::MAX_INPUT`]).
    pub fn max_input(&self) -> usize {
        oxnet_stack::plug::MAX_INPUT
    }

    /// Queues an IP packet and lets the stack take it. EMSGSIZE for one
    /// over [`Net::max_input`]; ENOBUFS if PlugSource dropped it (its
    /// large buffers all held by the stack).
    pub fn input(&mut self, bytes: Vec<u8>) -> Result<(), i32> {
        if bytes.len() > self.max_input() {
            return Err(libc::EMSGSIZE);
        }
        let dropped = self.plug.drops.total();
        self.plug.input.borrow_mut().push_back(bytes);
        self.settle()?;
        if self.plug.drops.total() != dropped {
            return Err(libc::ENOBUFS);
        }
        Ok(())
    }

    /// Runs rounds at the current time until nothing happens; what came
    /// out joins the sent queue. EIO if the stack stays busy.
    pub fn settle(&mut self) -> Result<(), i32> {
        let (idle, out) = self.plug.settle(MAX_ROUNDS);
        let now = self.now();
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
            self.plug.router.advance_simulated_time(step);
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
