//! The runner's network: a router of its own (`crate::plug`) with
//! `TCPStack` between PlugSource (the segments a script injects, as IP
//! packets with their header marks set, as the IP layer sets them) and
//! PlugSink (the IP packets the stack sends), in simulated time.

use crate::plug::Plug;
use crate::tcp::info::TcpInfo;
use crate::tcp::socket::Stack;

/// How many rounds a step may take before the runner calls the stack
/// busy for good (a loop in the stack would otherwise hang the test).
const MAX_ROUNDS: usize = 10_000;

/// The router a script runs against, and its TCP state.
pub(super) struct Net {
    plug: Plug,
    /// The router's TCPInfo, for the sockets.
    pub(super) stack: Stack,
}

impl Net {
    /// Builds `PlugSource -> TCPStack -> PlugSink` with a simulated clock
    /// at 0.
    pub(super) fn new() -> Result<Net, String> {
        // TCPStack is in the prelude that the stack's registration adds.
        let plug = Plug::build(
            "script-runner.click",
            "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink;\n",
        )?;
        let stack = plug.stack.clone();
        Ok(Net { plug, stack })
    }

    /// The router's clock, microseconds from the script's start.
    pub(super) fn now(&self) -> u64 {
        self.plug.now()
    }

    /// Moves the clock forward to `us` (never back).
    pub(super) fn advance_to(&mut self, us: u64) {
        self.plug.router.advance_simulated_time(us);
    }

    /// The earliest TCP timer deadline after now (RTO, TIME-WAIT), so
    /// that the runner can stop the clock there and stamp what the timer
    /// sends with its time. A stale entry only costs an extra stop.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.plug.next_deadline()
    }

    /// Queues an IP packet for the stack; Err if PlugSource cannot take
    /// it (over [`crate::plug::MAX_INPUT`]).
    pub(super) fn inject(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        // The IP header's length field (IPv4's total length, IPv6's
        // payload length; no jumbograms) cannot say more than 65535.
        let counted = match bytes.first().map(|b| b >> 4) {
            Some(4) => bytes.len(),
            Some(6) => bytes.len().saturating_sub(40),
            _ => 0,
        };
        if counted > usize::from(u16::MAX) {
            return Err(format!(
                "the segment makes a {}-byte IP packet, more than its header's length field can say (65535)",
                bytes.len()
            ));
        }
        if bytes.len() > crate::plug::MAX_INPUT {
            return Err(format!(
                "the segment makes a {}-byte IP packet, over the {} bytes the runner's input takes",
                bytes.len(),
                crate::plug::MAX_INPUT
            ));
        }
        self.plug.input.borrow_mut().push_back(bytes);
        Ok(())
    }

    /// Packets PlugSource dropped so far (its counters, summed).
    pub(super) fn input_drops(&self) -> u64 {
        self.plug.drops.total()
    }

    /// Runs rounds at the current time until nothing happens, and returns
    /// what came out; `after_round` sees the TCP state after each round.
    /// Err if the stack is still busy after `MAX_ROUNDS`.
    pub(super) fn settle(&mut self, after_round: &mut dyn FnMut(&TcpInfo)) -> Result<Vec<Vec<u8>>, String> {
        for _ in 0..MAX_ROUNDS {
            let busy = self.plug.router.run_once();
            after_round(&self.stack.borrow());
            if !busy {
                return Ok(self.plug.output.borrow_mut().drain(..).collect());
            }
        }
        Err(format!("the stack was still busy after {MAX_ROUNDS} rounds"))
    }
}
