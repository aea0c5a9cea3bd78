//! The world the models live in: named ports, the wires between them, and
//! the tools tests use to watch them (faults, register traces, frame capture).
//!
//! All state sits behind one `Mutex`: a register access locks it, does
//! everything the access sets off (a transmit delivers into the partner's
//! receive ring at once — the wire has no buffer of its own) and unlocks.
//! One lock means no lock order to get wrong; the model is not built for speed.

use crate::crc;
use crate::ixgbe::{self, Ixgbe};
use oxnet_driver::RegisterAccess;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The register value a read of an unmodelled register returns.
pub const FAULT_VALUE: u32 = 0xDEAD_BEEF;
/// Faults kept at most (a runaway driver must not eat all memory).
const MAX_FAULTS: usize = 10_000;

/// One register access, as recorded by [`World::trace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read { offset: u32, value: u32 },
    Write { offset: u32, value: u32 },
}

/// A port: one 82599 MAC and what plugs into it.
pub(crate) struct Port {
    pub name: String,
    /// The port at the other end of the wire; `None`: a loopback plug.
    pub partner: Option<usize>,
    pub nic: Ixgbe,
    tracing: bool,
    trace: Vec<Access>,
    capture: bool,
    captured: Vec<Vec<u8>>,
}

/// Everything behind the world's lock.
pub(crate) struct WorldState {
    pub ports: Vec<Port>,
    by_name: HashMap<String, usize>,
    faults: Vec<String>,
    /// Frame buffers to reuse, so the packet buffer does not allocate per frame.
    pub spare: Vec<Vec<u8>>,
}

impl WorldState {
    /// Records a fault of `port`.
    pub fn fault(&mut self, port: usize, message: impl std::fmt::Display) {
        let message = format!("port '{}': {message}", self.ports[port].name);
        if self.faults.len() < MAX_FAULTS && self.faults.last() != Some(&message) {
            self.faults.push(message);
        }
    }

    /// The port at the other end of the wire (the port itself on a loopback plug).
    pub fn wire_partner(&self, port: usize) -> usize {
        self.ports[port].partner.unwrap_or(port)
    }

    /// Where a frame sent by `port` arrives: its own receiver in MAC
    /// loopback (HLREG0.LPBK, §8.2.3.22.8), else the wire partner.
    pub fn destination(&self, port: usize) -> usize {
        if self.ports[port].nic.hlreg0 & ixgbe::regs::HLREG0_LPBK != 0 {
            port
        } else {
            self.wire_partner(port)
        }
    }

    /// The ports whose frames arrive at `receiver` (at most two: the wire
    /// partner and `receiver` itself).
    pub fn senders_to(&self, receiver: usize) -> [Option<usize>; 2] {
        let partner = self.wire_partner(receiver);
        let own = (self.destination(receiver) == receiver).then_some(receiver);
        let other = (partner != receiver && self.destination(partner) == receiver).then_some(partner);
        [own, other]
    }

    fn port_index(&mut self, name: &str) -> usize {
        if let Some(&index) = self.by_name.get(name) {
            return index;
        }
        let index = self.ports.len();
        self.ports.push(Port {
            name: name.to_string(),
            partner: None,
            nic: Ixgbe::power_on(mac_from_name(name)),
            tracing: false,
            trace: Vec::new(),
            capture: false,
            captured: Vec::new(),
        });
        self.by_name.insert(name.to_string(), index);
        index
    }
}

/// Puts a frame sent by `from` on the wire (or into its own receiver).
pub(crate) fn put_on_wire(state: &mut WorldState, from: usize, frame: &[u8]) {
    if state.ports[from].capture {
        state.ports[from].captured.push(frame.to_vec());
    }
    let to = state.destination(from);
    ixgbe::rx::receive(state, to, frame);
}

/// A deterministic, locally administered unicast MAC (first byte 0x02)
/// from the port name (FNV-1a), as if it were burnt into the EEPROM.
fn mac_from_name(name: &str) -> [u8; 6] {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let h = hash.to_le_bytes();
    [0x02, h[0], h[1], h[2], h[3], h[4]]
}

fn lock(state: &Mutex<WorldState>) -> MutexGuard<'_, WorldState> {
    // A panic inside the model must not make every later access panic too.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A set of named ports and the wires between them.
pub struct World {
    state: Arc<Mutex<WorldState>>,
}

impl World {
    fn empty() -> World {
        let state = WorldState {
            ports: Vec::new(),
            by_name: HashMap::new(),
            faults: Vec::new(),
            spare: Vec::new(),
        };
        World {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// A new, isolated world (for tests).
    pub fn new() -> Arc<World> {
        Arc::new(World::empty())
    }

    /// The process-wide world that `sim:NAME` device specs use.
    pub fn global() -> &'static World {
        static GLOBAL: OnceLock<World> = OnceLock::new();
        GLOBAL.get_or_init(World::empty)
    }

    fn with<T>(&self, port: &str, f: impl FnOnce(&mut WorldState, usize) -> T) -> T {
        let mut state = lock(&self.state);
        let index = state.port_index(port);
        f(&mut state, index)
    }

    /// The registers of port `name`, created in its power-on state on first use.
    pub fn port(&self, name: &str) -> SimRegisters {
        let port = self.with(name, |_, index| index);
        SimRegisters {
            state: Arc::clone(&self.state),
            port,
        }
    }

    /// Wires `a` and `b` together (both directions). A port that was wired
    /// elsewhere before is unplugged from there; its old partner gets a
    /// loopback plug. `connect(a, a)` puts a loopback plug on `a`.
    pub fn connect(&self, a: &str, b: &str) {
        let mut state = lock(&self.state);
        let (a, b) = (state.port_index(a), state.port_index(b));
        for port in [a, b] {
            if let Some(old) = state.ports[port].partner.take() {
                state.ports[old].partner = None;
            }
        }
        if a != b {
            state.ports[a].partner = Some(b);
            state.ports[b].partner = Some(a);
        }
    }

    /// Every fault so far: unmodelled register accesses, DMA to addresses
    /// outside DMA memory, configurations the model cannot follow.
    pub fn faults(&self) -> Vec<String> {
        lock(&self.state).faults.clone()
    }

    /// Forgets the faults recorded so far.
    pub fn clear_faults(&self) {
        lock(&self.state).faults.clear();
    }

    /// Starts (with an empty trace) or stops recording register accesses.
    pub fn set_tracing(&self, port: &str, on: bool) {
        self.with(port, |state, index| {
            let port = &mut state.ports[index];
            if on && !port.tracing {
                port.trace.clear();
            }
            port.tracing = on;
        })
    }

    /// The register accesses recorded since tracing was turned on.
    pub fn trace(&self, port: &str) -> Vec<Access> {
        self.with(port, |state, index| state.ports[index].trace.clone())
    }

    /// Starts or stops capturing the frames `port` transmits.
    pub fn set_capture(&self, port: &str, on: bool) {
        self.with(port, |state, index| state.ports[index].capture = on)
    }

    /// Takes the frames (CRC included) `port` transmitted since the last
    /// call, while capture was on.
    pub fn frames_on_wire(&self, port: &str) -> Vec<Vec<u8>> {
        self.with(port, |state, index| std::mem::take(&mut state.ports[index].captured))
    }

    /// Delivers `frame` (no FCS: the world appends a correct one) to the
    /// receive side of `port`, as if it came from the wire.
    pub fn inject(&self, port: &str, frame: &[u8]) {
        let mut with_fcs = frame.to_vec();
        crc::append_fcs(&mut with_fcs);
        self.inject_with_fcs(port, &with_fcs);
    }

    /// Delivers `frame` exactly as given, its last 4 bytes taken as the FCS
    /// (to test frames with a bad CRC).
    pub fn inject_with_fcs(&self, port: &str, frame: &[u8]) {
        self.with(port, |state, index| {
            ixgbe::rx::receive(state, index, frame);
            ixgbe::rx::end_burst(state, index);
        })
    }

    /// Delivers `frames` (no FCS) back to back, as one burst: RSC contexts
    /// stay open until the last one (see the model's rsc.rs).
    pub fn inject_burst(&self, port: &str, frames: &[Vec<u8>]) {
        self.with(port, |state, index| {
            for frame in frames {
                let mut with_fcs = frame.clone();
                crc::append_fcs(&mut with_fcs);
                ixgbe::rx::receive(state, index, &with_fcs);
            }
            ixgbe::rx::end_burst(state, index);
        })
    }

    /// The MAC address port `name` has after reset (RAL/RAH(0)).
    pub fn mac(&self, port: &str) -> [u8; 6] {
        self.with(port, |state, index| state.ports[index].nic.mac())
    }
}

/// Register access to one port of a [`World`]; what a driver gets.
#[derive(Clone)]
pub struct SimRegisters {
    state: Arc<Mutex<WorldState>>,
    port: usize,
}

impl SimRegisters {
    /// The port's name.
    pub fn port_name(&self) -> String {
        lock(&self.state).ports[self.port].name.clone()
    }
}

impl std::fmt::Debug for SimRegisters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimRegisters({})", self.port_name())
    }
}

impl RegisterAccess for SimRegisters {
    // Never inlined: a benchmark subtracts the model's cost by the inclusive
    // instruction count of these two functions.
    #[inline(never)]
    fn read32(&self, offset: u32) -> u32 {
        let mut state = lock(&self.state);
        let value = match ixgbe::read(&mut state, self.port, offset) {
            Ok(value) => value,
            Err(message) => {
                state.fault(self.port, format!("read of {offset:#07x}: {message}"));
                FAULT_VALUE
            }
        };
        let port = &mut state.ports[self.port];
        if port.tracing {
            port.trace.push(Access::Read { offset, value });
        }
        value
    }

    #[inline(never)]
    fn write32(&self, offset: u32, value: u32) {
        let mut state = lock(&self.state);
        let port = &mut state.ports[self.port];
        if port.tracing {
            port.trace.push(Access::Write { offset, value });
        }
        if let Err(message) = ixgbe::write(&mut state, self.port, offset, value) {
            state.fault(self.port, format!("write of {value:#010x} to {offset:#07x}: {message}"));
        }
    }
}
