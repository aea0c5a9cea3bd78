//! The world the models live in: named ports, the wires between them, and
//! the tools tests use to watch them (faults, register traces, frame capture).
//!
//! All state sits behind one `Mutex`: a register access locks it, does
//! everything the access sets off (a transmit delivers into the partner's
//! receive ring at once — the wire has no buffer of its own) and unlocks.
//! One lock means no lock order to get wrong; the model is not built for speed.
//!
//! That is the synchronous mode ([`DmaMode::Synchronous`], the default):
//! the device's DMA happens on the driver's thread, inside `write32`. In
//! [`DmaMode::Thread`] a DMA engine runs on its own thread beside the
//! driver, as hardware does (see `ixgbe/engine.rs`); [`DmaMode::Manual`]
//! is the same engine, stepped by a test ([`World::dma_step`]).

use crate::crc;
use crate::dma;
use crate::ixgbe::{self, Ixgbe};
use oxnet_driver::RegisterAccess;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where the models' DMA happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaMode {
    /// Inside the register write that sets it off, on the driver's thread.
    Synchronous,
    /// On a thread of the world's own, beside the driver: descriptors
    /// complete some time after the tail write, in partial runs.
    Thread,
    /// As `Thread`, but the engine moves only when a test calls
    /// [`World::dma_step`] (deterministic).
    Manual,
}

impl DmaMode {
    /// The mode named by the environment variable `OXNET_SIM_DMA`
    /// (`sync`, `thread`; unset: synchronous), for the process-wide world.
    pub fn from_env() -> Result<DmaMode, String> {
        match std::env::var("OXNET_SIM_DMA").as_deref() {
            Err(_) | Ok("") | Ok("sync") => Ok(DmaMode::Synchronous),
            Ok("thread") => Ok(DmaMode::Thread),
            Ok(other) => Err(format!("OXNET_SIM_DMA={other}: use 'sync' or 'thread'")),
        }
    }
}

/// The register value a read of an unmodelled register returns.
pub const FAULT_VALUE: u32 = 0xDEAD_BEEF;
/// Faults kept at most per port (a runaway driver must not eat all
/// memory, nor one port's faults hide another's).
const MAX_FAULTS_PER_PORT: usize = 100;

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
    /// Faults of this port in `WorldState::faults`.
    faults_kept: usize,
}

/// Everything behind the world's lock.
pub(crate) struct WorldState {
    pub ports: Vec<Port>,
    by_name: HashMap<String, usize>,
    faults: Vec<String>,
    /// Frame buffers to reuse, so the packet buffer does not allocate per frame.
    pub spare: Vec<Vec<u8>>,
    /// A DMA engine does the work (Thread or Manual mode), not register writes.
    pub threaded: bool,
    /// State of the engine's run-length generator (xorshift64).
    rng: u64,
    /// Engine steps so far, and how many of the last ones found nothing to do.
    steps: u64,
    idle_steps: u64,
}

impl WorldState {
    /// The next number of the engine's fixed-seed generator (xorshift64).
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Records a fault of `port`.
    pub fn fault(&mut self, port: usize, message: impl std::fmt::Display) {
        let message = format!("port '{}': {message}", self.ports[port].name);
        let kept = &mut self.ports[port].faults_kept;
        if *kept < MAX_FAULTS_PER_PORT && self.faults.last() != Some(&message) {
            *kept += 1;
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
            faults_kept: 0,
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

/// The engine thread of a world in [`DmaMode::Thread`].
struct DmaThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// A set of named ports and the wires between them.
pub struct World {
    state: Arc<Mutex<WorldState>>,
    mode: Mutex<(DmaMode, Option<DmaThread>)>,
}

impl World {
    fn empty() -> World {
        let state = WorldState {
            ports: Vec::new(),
            by_name: HashMap::new(),
            faults: Vec::new(),
            spare: Vec::new(),
            threaded: false,
            rng: 0x9E37_79B9_7F4A_7C15,
            steps: 0,
            idle_steps: 0,
        };
        World {
            state: Arc::new(Mutex::new(state)),
            mode: Mutex::new((DmaMode::Synchronous, None)),
        }
    }

    /// A new, isolated world (for tests), DMA synchronous.
    pub fn new() -> Arc<World> {
        Arc::new(World::empty())
    }

    /// A new, isolated world whose DMA engine runs on its own thread.
    pub fn new_threaded() -> Arc<World> {
        let world = World::new();
        world.set_dma_mode(DmaMode::Thread);
        world
    }

    /// The process-wide world that `sim:NAME` device specs use; its DMA
    /// mode comes from `OXNET_SIM_DMA` ([`DmaMode::from_env`]; a bad value
    /// is reported on stderr and the mode stays synchronous).
    pub fn global() -> &'static World {
        static GLOBAL: OnceLock<World> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let world = World::empty();
            match DmaMode::from_env() {
                Ok(mode) => world.set_dma_mode(mode),
                Err(message) => eprintln!("oxnet-sim: {message}"),
            }
            world
        })
    }

    /// The current DMA mode.
    pub fn dma_mode(&self) -> DmaMode {
        self.mode.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// Switches the DMA mode. Leaving an engine mode first finishes
    /// everything the engine had in flight.
    pub fn set_dma_mode(&self, mode: DmaMode) {
        let mut current = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        if current.0 == mode {
            return;
        }
        if let Some(thread) = current.1.take() {
            thread.stop.store(true, Ordering::Relaxed);
            let _ = thread.handle.join();
        }
        if mode == DmaMode::Synchronous {
            while self.dma_step() {}
        }
        lock(&self.state).threaded = mode != DmaMode::Synchronous;
        if mode == DmaMode::Thread {
            let stop = Arc::new(AtomicBool::new(false));
            let (state, flag) = (Arc::clone(&self.state), Arc::clone(&stop));
            let handle = std::thread::Builder::new()
                .name("oxnet-sim dma".into())
                .spawn(move || run_engine(&state, &flag))
                .expect("cannot start the model's DMA thread");
            current.1 = Some(DmaThread { stop, handle });
        }
        current.0 = mode;
    }

    /// One step of every port's DMA engine ([`DmaMode::Manual`]; in the
    /// other modes it does the same, beside the thread or the driver).
    /// True if it found something to do.
    pub fn dma_step(&self) -> bool {
        dma::hold(|| engine_step(&self.state))
    }

    /// Waits (at most `timeout`) until the DMA engine has found nothing to
    /// do in its last two steps, both begun after this call: everything
    /// the drivers handed over is done, or waits for them. True if it got
    /// there. Immediate when synchronous.
    pub fn settle(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        let first = lock(&self.state).steps + 1;
        loop {
            match self.dma_mode() {
                DmaMode::Synchronous => return true,
                DmaMode::Manual => {
                    if !self.dma_step() && !self.dma_step() {
                        return true;
                    }
                }
                DmaMode::Thread => {
                    let state = lock(&self.state);
                    // Two idle steps, both begun after `first` was read
                    // (the one running then may have missed a tail write).
                    if state.idle_steps >= 2 && state.steps >= first + 2 {
                        return true;
                    }
                    drop(state);
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            if start.elapsed() > timeout {
                return false;
            }
        }
    }

    fn with<T>(&self, port: &str, f: impl FnOnce(&mut WorldState, usize) -> T) -> T {
        dma::hold(|| {
            let mut state = lock(&self.state);
            let index = state.port_index(port);
            f(&mut state, index)
        })
    }

    /// The registers of port `name`, created in its power-on state on first use.
    pub fn port(&self, name: &str) -> SimRegisters {
        let (port, reads) = self.with(name, |state, index| {
            (index, Arc::clone(&state.ports[index].nic.barriers.reads))
        });
        SimRegisters {
            state: Arc::clone(&self.state),
            port,
            reads,
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
        let mut state = lock(&self.state);
        state.faults.clear();
        for port in &mut state.ports {
            port.faults_kept = 0;
        }
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

impl Drop for World {
    fn drop(&mut self) {
        let mode = self.mode.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(thread) = mode.1.take() {
            thread.stop.store(true, Ordering::Relaxed);
            let _ = thread.handle.join();
        }
    }
}

/// One engine step over every port, the world's lock taken per port (so
/// that drivers' register accesses get in between); true if any port did
/// something.
fn engine_step(state: &Mutex<WorldState>) -> bool {
    let ports = lock(state).ports.len();
    let mut busy = false;
    for port in 0..ports {
        busy |= ixgbe::engine::step(&mut lock(state), port);
    }
    let mut state = lock(state);
    state.steps += 1;
    state.idle_steps = if busy { 0 } else { state.idle_steps + 1 };
    busy
}

/// The engine thread: steps while there is work, yields, and sleeps when
/// there has been none for a while (the machines are small and shared).
fn run_engine(state: &Mutex<WorldState>, stop: &AtomicBool) {
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let busy = dma::hold(|| engine_step(state));
        if busy {
            idle = 0;
            std::thread::yield_now();
        } else {
            idle = idle.saturating_add(1);
            if idle < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// Register access to one port of a [`World`]; what a driver gets.
#[derive(Clone)]
pub struct SimRegisters {
    state: Arc<Mutex<WorldState>>,
    port: usize,
    /// The port's read-barrier counters (lock-free, see ixgbe/ordering.rs).
    reads: Arc<ixgbe::ordering::ReadSide>,
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
        dma::hold(|| {
            let mut state = lock(&self.state);
            let port = &mut state.ports[self.port];
            if port.tracing {
                port.trace.push(Access::Write { offset, value });
            }
            if let Err(message) = ixgbe::write(&mut state, self.port, offset, value) {
                state.fault(self.port, format!("write of {value:#010x} to {offset:#07x}: {message}"));
            }
        })
    }

    /// The driver's write barrier: the model notes it and copies the rings,
    /// to check the next tail writes (ixgbe/ordering.rs). The fence itself
    /// is the real one.
    #[inline(never)]
    fn release_before_tail(&self) {
        oxnet_driver::barrier::release_before_tail();
        dma::hold(|| ixgbe::ordering::release(&mut lock(&self.state).ports[self.port].nic))
    }

    /// The driver's read barrier, noted (ixgbe/ordering.rs).
    #[inline(never)]
    fn acquire_after_status(&self) {
        oxnet_driver::barrier::acquire_after_status();
        self.reads.acquire();
    }
}
