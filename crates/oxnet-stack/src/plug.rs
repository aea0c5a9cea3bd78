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
//!
//! A packet larger than a buffer of the router's pool (2 KiB), such as a
//! segment coalesced past one MTU (packetdrill injects those to mimic
//! GRO), goes in one buffer of a pool of PlugSource's own, of large
//! buffers ([`MAX_INPUT`] bytes; made at the first such packet). One
//! contiguous buffer, not a chain of 2 KiB ones: the stack's elements
//! read a segment's header and payload as one slice, and a large pool
//! only for the few packets that need it keeps the router's pool as it
//! is. What PlugSource cannot take is dropped and counted
//! ([`InputDrops`]; handlers `too_large`, `no_large_buffers`,
//! `bad_header`), and the script runner fails the injection that did it.

use crate::tcp::info::TcpInfo;
use crate::tcp::socket::Stack;
use oxnet_driver::mempool::{Mempool, DEFAULT_HEADROOM};
use oxnet_driver::{MemoryKind, Packet, PacketBatch};
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

/// The largest packet PlugSource takes: an IPv6 packet whose payload
/// length is the largest, 65535, after its 40-byte header (an IPv4
/// packet's total length stops at 65535), rounded up to the pools' 64-byte
/// layout.
pub const MAX_INPUT: usize = 65_600;

/// Large buffers in PlugSource's own pool: packets over a 2 KiB buffer are
/// rare (tests and the C ABI inject them), and one held by the stack (out
/// of order data) keeps its buffer until it is read.
const LARGE_BUFFERS: usize = 32;

/// The packets PlugSource dropped, by reason (its handlers, and what the
/// script runner checks after each injection).
#[derive(Debug, Default)]
pub struct InputDrops {
    /// Over [`MAX_INPUT`] bytes.
    pub too_large: Cell<u64>,
    /// Over a buffer of the router's pool, and the large pool was empty
    /// (or could not be made).
    pub no_large_buffers: Cell<u64>,
    /// An IP header longer than the packet.
    pub bad_header: Cell<u64>,
}

impl InputDrops {
    /// All drops, whatever the reason.
    pub fn total(&self) -> u64 {
        self.too_large.get() + self.no_large_buffers.get() + self.bad_header.get()
    }
}

struct PlugSource {
    input: Frames,
    flags: Flags,
    drops: Rc<InputDrops>,
    /// Made at the first packet that needs it.
    large: Option<Mempool>,
}

impl PlugSource {
    /// A buffer for a packet of `len` bytes over the router pool's data
    /// room: one of the large pool's, or None (counted).
    fn large_buffer(&mut self, len: usize) -> Option<Packet> {
        let drops = &self.drops;
        if len > MAX_INPUT {
            drops.too_large.set(drops.too_large.get() + 1);
            return None;
        }
        if self.large.is_none() {
            self.large = Mempool::with_layout(
                "plug-large",
                LARGE_BUFFERS,
                DEFAULT_HEADROOM,
                MAX_INPUT,
                MemoryKind::Plain,
            )
            .ok();
        }
        let p = self.large.as_ref().and_then(|pool| pool.alloc().ok());
        if p.is_none() {
            drops.no_large_buffers.set(drops.no_large_buffers.get() + 1);
        }
        p
    }
}

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
            let Some(bytes) = self.input.borrow_mut().pop_front() else {
                break;
            };
            let mut p = if bytes.len() <= ctx.pool().data_room() {
                let Ok(p) = ctx.pool().alloc() else {
                    // The pool is empty: the rest waits for the next round.
                    self.input.borrow_mut().push_front(bytes);
                    break;
                };
                p
            } else {
                let Some(p) = self.large_buffer(bytes.len()) else {
                    continue;
                };
                p
            };
            if p.set_len(bytes.len()).is_err() {
                // Not expected: the buffer was chosen for this length.
                self.drops.too_large.set(self.drops.too_large.get() + 1);
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
                    self.drops.bad_header.set(self.drops.bad_header.get() + 1);
                    continue;
                }
            }
            p.meta_mut().flags |= self.flags.get();
            batch.push(p);
        }
        let worked = !batch.is_empty();
        ctx.push(0, batch);
        worked
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("too_large", true, false),
            ("no_large_buffers", true, false),
            ("bad_header", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let d = &self.drops;
        match name {
            "too_large" => Some(d.too_large.get().to_string()),
            "no_large_buffers" => Some(d.no_large_buffers.get().to_string()),
            "bad_header" => Some(d.bad_header.get().to_string()),
            _ => None,
        }
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
            // The whole chain (a TSO segment, a coalesced one, TCP's
            // zero-copy segments: a header packet and attached data).
            let mut bytes = Vec::with_capacity(p.total_len());
            p.copy_chain_to(&mut bytes);
            self.0.borrow_mut().push_back(bytes);
        }
        batch.clear();
    }
}

struct WithPlug {
    input: Frames,
    output: Frames,
    flags: Flags,
    drops: Rc<InputDrops>,
}

impl Registry for WithPlug {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "PlugSource" => Some(Box::new(PlugSource {
                input: self.input.clone(),
                flags: self.flags.clone(),
                drops: self.drops.clone(),
                large: None,
            })),
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
    /// What PlugSource dropped.
    pub drops: Rc<InputDrops>,
    /// The router's TCPInfo.
    pub stack: Stack,
}

impl Plug {
    /// Builds `config` (`file` names it in errors) with the stack's
    /// elements registered and a simulated clock at 0.
    pub fn build(file: &str, config: &str) -> Result<Plug, String> {
        crate::elements::register();
        let (input, output, flags) = (Frames::default(), Frames::default(), Flags::default());
        let drops = Rc::new(InputDrops::default());
        let registry = WithPlug {
            input: input.clone(),
            output: output.clone(),
            flags: flags.clone(),
            drops: drops.clone(),
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
            drops,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 packet of `len` bytes (a 20-byte header, the rest zeros).
    fn ipv4(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[0] = 0x45;
        b[2..4].copy_from_slice(&(len.min(65535) as u16).to_be_bytes());
        b[4] = 0xab;
        b
    }

    #[test]
    fn a_packet_over_a_buffer_goes_whole_and_one_too_large_is_counted() {
        let mut plug = Plug::build("t.click", "src :: PlugSource -> PlugSink;\n").unwrap();
        let big = ipv4(3000);
        plug.input.borrow_mut().push_back(ipv4(100));
        plug.input.borrow_mut().push_back(big.clone());
        plug.input.borrow_mut().push_back(vec![0x45; MAX_INPUT + 1]);
        // An IPv4 header longer than the packet (IHL 15: 60 bytes).
        plug.input.borrow_mut().push_back(vec![0x4f; 30]);
        let (idle, out) = plug.settle(100);
        assert!(idle);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].len(), &out[1]),
            (100, &big),
            "the 3000-byte packet whole, in order"
        );
        assert_eq!(
            (
                plug.drops.too_large.get(),
                plug.drops.no_large_buffers.get(),
                plug.drops.bad_header.get()
            ),
            (1, 0, 1)
        );
        assert_eq!(plug.drops.total(), 2);
        assert_eq!(
            plug.router.read_handler(plug.router.find("src").unwrap(), "too_large"),
            Ok("1".to_string())
        );
        assert_eq!(
            plug.router.read_handler(plug.router.find("src").unwrap(), "bad_header"),
            Ok("1".to_string())
        );
        assert_eq!(
            plug.router
                .read_handler(plug.router.find("src").unwrap(), "no_large_buffers"),
            Ok("0".to_string())
        );
    }

    #[test]
    fn large_packets_held_past_the_large_pool_are_dropped_and_counted() {
        // A Queue nobody pulls holds every packet: the large pool runs out.
        let mut plug = Plug::build("t.click", "src :: PlugSource -> q :: Queue(100); Idle -> PlugSink;\n").unwrap();
        for _ in 0..LARGE_BUFFERS + 3 {
            plug.input.borrow_mut().push_back(ipv4(MAX_INPUT));
        }
        plug.settle(100);
        assert_eq!(plug.drops.no_large_buffers.get(), 3);
        assert_eq!(plug.drops.total(), 3);
        assert_eq!(
            plug.router.read_handler(plug.router.find("q").unwrap(), "length"),
            Ok(LARGE_BUFFERS.to_string())
        );
    }
}
