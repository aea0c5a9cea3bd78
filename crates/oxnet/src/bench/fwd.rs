//! `oxnet bench fwd-inner`: the forwarding path over the model, the
//! process `oxnet bench` runs under callgrind.
//!
//! Two ports of the model, `fwd0 [forwarder] fwd1 ==wire== capture`, flow
//! control on. The forwarder's two devices are the ixgbe driver on
//! [`BenchRegisters`], a wrapper around the model's `SimRegisters` that
//! keeps the model out of the count:
//!
//! * collection is on only inside [`measured_forward_step`] (one
//!   `Forwarder::step`) and is toggled off again inside
//!   [`uncounted_model_read32`] / [`uncounted_model_write32`], the only way
//!   the driver reaches the model while measured (`--toggle-collect` on
//!   both, see [`TOGGLE_SYMBOLS`]). Nothing is subtracted: the count holds
//!   the driver, the forwarder and the mempool, plus the call into the
//!   wrapper (a flag test and a call per register access, 2 per batch);
//! * what real polling meets comes from a seeded PRNG ([`Mix`]): before each
//!   poll the harness (not collected) delivers 0, a partial batch or a full
//!   batch of frames into fwd0, and some TDT writes of fwd1 reach the model
//!   only one or two polls later, so the driver finds transmit descriptors
//!   not yet done when it cleans.
//!
//! valgrind runs one thread at a time; everything here is on one thread and
//! driven by the fixed seed, so the count is the same on every run.

use crate::apps::{Capture, Forwarder};
use crate::frame;
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::{Config, Device, Error, MemoryKind, RegisterAccess, Result};
use oxnet_sim::{SimRegisters, World};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Name of the measured function; `oxnet bench` toggles collection on it.
pub const MEASURED_SYMBOL: &str = "measured_forward_step";
/// `--toggle-collect` patterns: collection on inside the measured step, off
/// again inside every `uncounted_model_*` function, through which alone the
/// measured driver reaches the model.
pub const TOGGLE_SYMBOLS: [&str; 2] = ["*::measured_forward_step", "*::uncounted_model_*"];

/// Frame size: minimum-sized frames, as the ixy numbers.
const FRAME_SIZE: usize = 60;
/// Packets forwarded (unmeasured) before measuring starts.
const WARMUP_PACKETS: u64 = 4096;
/// The PRNG's fixed seed.
const SEED: u64 = 0x0f0e_7b3a_5eed_8259;

/// The mix of what a poll meets, in percent (docs/bench.md states it).
pub struct Mix;
impl Mix {
    /// Polls before which no frame arrives (an empty poll unless the
    /// forwarder still holds packets the transmit ring had no room for).
    pub const NONE_PERCENT: u64 = 10;
    /// Polls before which a partial batch arrives: 1..batch-1 frames,
    /// uniform (batch 1 has no partial batch: these polls get 1 frame).
    pub const PARTIAL_PERCENT: u64 = 30;
    /// The rest (60 %): a full batch arrives.
    /// TDT writes held back from the model.
    pub const HELD_TAIL_PERCENT: u64 = 25;
    /// A held TDT write reaches the model after 1 or 2 further polls (uniform).
    pub const HELD_POLLS_MAX: u64 = 2;

    pub fn describe() -> String {
        format!(
            "before each poll {}% no frame arrives, {}% a partial batch (1..batch-1, uniform), {}% a \
             full batch; {}% of TDT writes reach the model 1..{} polls late (seeded PRNG)",
            Self::NONE_PERCENT,
            Self::PARTIAL_PERCENT,
            100 - Self::NONE_PERCENT - Self::PARTIAL_PERCENT,
            Self::HELD_TAIL_PERCENT,
            Self::HELD_POLLS_MAX
        )
    }
}

/// splitmix64: a small, seeded, portable PRNG (the sequence is fixed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// True while [`measured_forward_step`] runs: the wrapper then reaches the
/// model through the uncounted functions. Outside, it calls the model
/// directly (entering a toggle function there would switch collection ON).
static MEASURING: AtomicBool = AtomicBool::new(false);

/// TDT of transmit queue 0 (82599 datasheet §8.2.3.9.9: TDT[n] at 0x06018 +
/// 0x40*n): the register whose writes the wrapper may hold back.
const TDT0: u32 = 0x06018;

/// State shared by a port's wrapper and the harness.
#[derive(Default)]
struct Shaper {
    /// Hold back some TDT writes (fwd1 only).
    hold_tails: bool,
    rng: Option<Rng>,
    /// A held TDT value and the polls left before it reaches the model.
    held: Option<(u32, u64)>,
    held_count: u64,
}

/// Register access of a measured port: the model's `SimRegisters`, reached
/// through the uncounted functions while measuring.
pub struct BenchRegisters {
    inner: SimRegisters,
    shaper: Arc<Mutex<Shaper>>,
    reads: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
}

// Every method of RegisterAccess that reaches the model must be forwarded
// here, through an `uncounted_model_*` function while measuring (the
// pattern in TOGGLE_SYMBOLS matches any such name). A method left to the
// trait's default would bypass a check the model makes (e.g. barrier hooks
// the model overrides), so forward those too.
impl RegisterAccess for BenchRegisters {
    #[inline]
    fn read32(&self, offset: u32) -> u32 {
        if MEASURING.load(Ordering::Relaxed) {
            uncounted_model_read32(self, offset)
        } else {
            self.model().read32(offset)
        }
    }

    #[inline]
    fn write32(&self, offset: u32, value: u32) {
        if MEASURING.load(Ordering::Relaxed) {
            uncounted_model_write32(self, offset, value)
        } else {
            self.model().write32(offset, value)
        }
    }

    #[inline]
    fn release_before_tail(&self) {
        if MEASURING.load(Ordering::Relaxed) {
            uncounted_model_release_before_tail(self)
        } else {
            self.model().release_before_tail()
        }
    }

    /// On x86-64 hardware this is a compiler barrier and no instruction
    /// (`oxnet_driver::barrier`); so it is here. The model's read-side
    /// check is told at its next access (a tail write comes after every
    /// read barrier that matters). The bench measures cost; the barriers
    /// themselves are checked by the end-to-end tests (docs/model.md).
    #[inline(always)]
    fn acquire_after_status(&self) {
        std::sync::atomic::compiler_fence(Ordering::Acquire);
    }
}

impl BenchRegisters {
    /// The model, told first of the read barriers since its last access
    /// (see `acquire_after_status`).
    #[inline]
    fn model(&self) -> &SimRegisters {
        self.inner.acquire_after_status();
        &self.inner
    }
}

/// The model's barrier check (it snapshots descriptors; on hardware this
/// is a compiler barrier, no instruction); collection is off inside.
#[inline(never)]
pub fn uncounted_model_release_before_tail(regs: &BenchRegisters) {
    regs.model().release_before_tail();
    // Not a tail call (see uncounted_model_read32).
    std::hint::black_box(());
}

/// The model's side of a measured register read; collection is off inside.
#[inline(never)]
pub fn uncounted_model_read32(regs: &BenchRegisters, offset: u32) -> u32 {
    // Counted after the call: the call must not be the last instruction (a
    // tail jump into the model looks to callgrind like leaving this
    // function, which would switch collection on inside the model).
    let value = regs.model().read32(offset);
    regs.reads.fetch_add(1, Ordering::Relaxed);
    value
}

/// The model's side of a measured register write; collection is off inside.
/// A TDT write of fwd1 may be held back (see [`Mix`]).
#[inline(never)]
pub fn uncounted_model_write32(regs: &BenchRegisters, offset: u32, value: u32) {
    if offset == TDT0 {
        let mut s = regs.shaper.lock().unwrap_or_else(|e| e.into_inner());
        if s.hold_tails {
            if let Some((_, polls)) = s.held {
                // A newer tail replaces the held one (tails only advance);
                // it reaches the model when the held one would have.
                s.held = Some((value, polls));
                regs.writes.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let rng = s.rng.as_mut().expect("a holding shaper has a PRNG");
            if rng.below(100) < Mix::HELD_TAIL_PERCENT {
                let polls = 1 + rng.below(Mix::HELD_POLLS_MAX);
                s.held = Some((value, polls));
                s.held_count += 1;
                regs.writes.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
    regs.model().write32(offset, value);
    // After the call, so that it is not a tail jump (see above).
    regs.writes.fetch_add(1, Ordering::Relaxed);
}

/// Hands a held TDT value to the model once its polls are over (`force`:
/// now). Called by the harness between polls, not collected.
fn release_held(regs: &SimRegisters, shaper: &Mutex<Shaper>, force: bool) {
    let mut s = shaper.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((value, polls)) = s.held {
        if force || polls == 0 {
            s.held = None;
            drop(s);
            regs.write32(TDT0, value);
        } else {
            s.held = Some((value, polls - 1));
        }
    }
}

/// What one run measured, printed as one `oxnet-bench-fwd key=value ...`
/// line for the outer command.
#[derive(Debug, Clone, Default)]
pub struct FwdRun {
    pub batch: usize,
    /// Packets forwarded inside the measured function.
    pub forwarded: u64,
    /// Polls (calls of `Forwarder::step`) measured.
    pub steps: u64,
    /// Measured polls that sent nothing.
    pub empty_steps: u64,
    /// Measured polls that sent 1..batch-1 packets.
    pub partial_steps: u64,
    /// Arrivals drawn before measured polls: none / partial / full batch.
    pub arrive_none: u64,
    pub arrive_partial: u64,
    pub arrive_full: u64,
    /// TDT writes held back from the model while measured.
    pub held_tails: u64,
    /// Register writes / reads of the driver on fwd0 and fwd1 while measured.
    pub reg_writes: u64,
    pub reg_reads: u64,
    /// Wall-clock seconds inside the measured function (model included).
    pub seconds: f64,
    /// End-to-end check: frames delivered into fwd0 and received by the
    /// capture port, duplicates, reordered, model faults, TX ring full
    /// events on fwd1.
    pub injected: u64,
    pub captured: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub faults: u64,
    pub ring_full: u64,
}

impl FwdRun {
    /// Every frame arrived once and in order, and the model saw no fault.
    pub fn clean(&self) -> bool {
        self.faults == 0
            && self.duplicated == 0
            && self.reordered == 0
            && self.captured == self.injected
            && self.forwarded > 0
    }

    /// The line the inner command prints.
    pub fn to_line(&self) -> String {
        format!(
            "oxnet-bench-fwd batch={} forwarded={} steps={} empty_steps={} partial_steps={} \
             arrive_none={} arrive_partial={} arrive_full={} held_tails={} \
             reg_writes={} reg_reads={} seconds={} injected={} captured={} duplicated={} \
             reordered={} faults={} ring_full={}",
            self.batch,
            self.forwarded,
            self.steps,
            self.empty_steps,
            self.partial_steps,
            self.arrive_none,
            self.arrive_partial,
            self.arrive_full,
            self.held_tails,
            self.reg_writes,
            self.reg_reads,
            self.seconds,
            self.injected,
            self.captured,
            self.duplicated,
            self.reordered,
            self.faults,
            self.ring_full
        )
    }

    /// Parses the line printed by [`FwdRun::to_line`] out of `output`.
    pub fn parse(output: &str) -> Option<FwdRun> {
        let line = output.lines().find(|l| l.starts_with("oxnet-bench-fwd "))?;
        let mut r = FwdRun::default();
        for field in line.split_whitespace().skip(1) {
            let (key, value) = field.split_once('=')?;
            let int = || value.parse::<u64>().ok();
            match key {
                "batch" => r.batch = int()? as usize,
                "forwarded" => r.forwarded = int()?,
                "steps" => r.steps = int()?,
                "empty_steps" => r.empty_steps = int()?,
                "partial_steps" => r.partial_steps = int()?,
                "arrive_none" => r.arrive_none = int()?,
                "arrive_partial" => r.arrive_partial = int()?,
                "arrive_full" => r.arrive_full = int()?,
                "held_tails" => r.held_tails = int()?,
                "reg_writes" => r.reg_writes = int()?,
                "reg_reads" => r.reg_reads = int()?,
                "seconds" => r.seconds = value.parse().ok()?,
                "injected" => r.injected = int()?,
                "captured" => r.captured = int()?,
                "duplicated" => r.duplicated = int()?,
                "reordered" => r.reordered = int()?,
                "faults" => r.faults = int()?,
                "ring_full" => r.ring_full = int()?,
                _ => {}
            }
        }
        Some(r)
    }
}

/// The measured function: one forwarder poll (receive up to a batch, touch
/// one byte per packet, send). Collection is on only inside it.
#[inline(never)]
fn measured_forward_step(fwd: &mut Forwarder, rx: &mut dyn Device, tx: &mut dyn Device) -> usize {
    Forwarder::step(fwd, rx, tx)
}

/// The same, for warm-up and the final drain (not collected). Not a
/// second `#[inline(never)]` copy: the linker folds identical functions
/// into one symbol, and the warm-up would then switch collection on.
fn unmeasured_forward_step(fwd: &mut Forwarder, rx: &mut dyn Device, tx: &mut dyn Device) -> usize {
    fwd.step(rx, tx)
}

/// The measured function of the graph variant: one round of the router
/// running `FromDevice(fwd0) -> ToDevice(fwd1)` (its timers, then every
/// task once). Collection is on only inside it.
#[inline(never)]
fn measured_graph_step(router: &mut oxnet_graph::Router) -> bool {
    router.run_once()
}

/// The forwarding path measured: the `oxnet fwd` loop or a graph.
enum FwdPath {
    Forwarder {
        forward: Forwarder,
        fwd0: Box<dyn Device>,
        fwd1: Box<dyn Device>,
    },
    Graph {
        router: oxnet_graph::Router,
        /// The ToDevice, whose `count` handler says what was sent.
        tx: usize,
        sent: u64,
    },
}

impl FwdPath {
    /// One poll; returns the packets sent by it.
    fn step(&mut self, measured: bool) -> usize {
        match self {
            FwdPath::Forwarder { forward, fwd0, fwd1 } => {
                if measured {
                    measured_forward_step(forward, &mut **fwd0, &mut **fwd1)
                } else {
                    unmeasured_forward_step(forward, &mut **fwd0, &mut **fwd1)
                }
            }
            FwdPath::Graph { router, tx, sent } => {
                if measured {
                    measured_graph_step(router);
                } else {
                    router.run_once();
                }
                let now: u64 = router
                    .read_handler(*tx, "count")
                    .ok()
                    .and_then(|c| c.trim().parse().ok())
                    .unwrap_or(*sent);
                let delta = now - *sent;
                *sent = now;
                delta as usize
            }
        }
    }

    fn forwarded(&self) -> u64 {
        match self {
            FwdPath::Forwarder { forward, .. } => forward.forwarded,
            FwdPath::Graph { sent, .. } => *sent,
        }
    }
}

thread_local! {
    /// The two bench ports, opened before the graph is built; the graph's
    /// `benchport:NAME` specs take them from here.
    static BENCH_PORTS: std::cell::RefCell<Vec<(String, Box<dyn Device>)>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn open_bench_port(name: &str, _config: &Config) -> Result<Box<dyn Device>> {
    BENCH_PORTS.with(|p| {
        let mut ports = p.borrow_mut();
        let at = ports
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| Error::BadSpec(format!("benchport:{name}: no such bench port")))?;
        Ok(ports.remove(at).1)
    })
}

/// Frames waiting in fwd0 at most: arrivals beyond it are not delivered
/// (they stay below the ring of 512, so the NIC never drops).
const MAX_WAITING: u64 = 384;

/// Runs the forwarding benchmark in this process: `packets` packets
/// forwarded inside [`measured_forward_step`] at batch size `batch`, with
/// the arrival and tail mix of [`Mix`].
pub fn run(batch: usize, packets: u64) -> Result<FwdRun> {
    run_path(batch, packets, None)
}

/// [`run`] with the forwarder replaced by the graph of conf/fwd.click, one
/// direction: `FromDevice(fwd0) -> ToDevice(fwd1, TIMEOUT 0)`, measured
/// inside [`measured_graph_step`] (one `Router::run_once`). The same
/// devices, arrivals and checks: the difference is the graph's cost.
pub fn run_graph(batch: usize, packets: u64, nulls: usize) -> Result<FwdRun> {
    run_path(batch, packets, Some(nulls))
}

/// `graph`: None for the fwd loop, Some(N) for the graph with N Null
/// elements between FromDevice and ToDevice.
fn run_path(batch: usize, packets: u64, graph: Option<usize>) -> Result<FwdRun> {
    if batch == 0 || batch > 256 {
        return Err(Error::Config(format!("batch {batch} is outside 1..=256")));
    }
    let world = World::global();
    let names = ["bench-src", "bench-fwd0", "bench-fwd1", "bench-capture"];
    world.connect(names[0], names[1]);
    world.connect(names[2], names[3]);
    let config = Config {
        batch_size: batch,
        rx_ring_size: 512,
        tx_ring_size: 512,
        flow_control: true,
        promiscuous: true,
        ..Config::default()
    };
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let shaper0 = Arc::new(Mutex::new(Shaper::default()));
    let shaper1 = Arc::new(Mutex::new(Shaper {
        hold_tails: true,
        rng: Some(Rng(SEED ^ 0x7d7)),
        ..Shaper::default()
    }));
    let wrap = |name: &str, shaper: &Arc<Mutex<Shaper>>| BenchRegisters {
        inner: world.port(name),
        shaper: Arc::clone(shaper),
        reads: Arc::clone(&reads),
        writes: Arc::clone(&writes),
    };
    let fwd0: Box<dyn Device> = Box::new(IxgbeDevice::init(
        wrap(names[1], &shaper0),
        "sim:bench-fwd0",
        &config,
        MemoryKind::Plain,
    )?);
    let fwd1: Box<dyn Device> = Box::new(IxgbeDevice::init(
        wrap(names[2], &shaper1),
        "sim:bench-fwd1",
        &config,
        MemoryKind::Plain,
    )?);
    let fwd1_model = world.port(names[2]);
    let mut cap_dev = crate::commands::open(&format!("sim:{}", names[3]), &config)?;

    let mut path = if let Some(nulls) = graph {
        BENCH_PORTS.with(|p| {
            let mut p = p.borrow_mut();
            p.push(("fwd0".to_string(), fwd0));
            p.push(("fwd1".to_string(), fwd1));
        });
        oxnet_driver::register_spec_opener("benchport", open_bench_port);
        let text = format!(
            "FromDevice(benchport:fwd0, BURST {batch}, PROMISC true){} -> tx :: ToDevice(benchport:fwd1, BURST {batch}, TIMEOUT 0);",
            " -> Null".repeat(nulls)
        );
        let router = oxnet_graph::build("<bench>", &text, &[]).map_err(Error::Config)?;
        let tx = router
            .find("tx")
            .ok_or_else(|| Error::Config("the bench graph has no tx".into()))?;
        FwdPath::Graph { router, tx, sent: 0 }
    } else {
        FwdPath::Forwarder {
            forward: Forwarder::new(batch),
            fwd0,
            fwd1,
        }
    };
    let mut capture = Capture::new(64, None);
    let mut rng = Rng(SEED);
    let template = frame::template(FRAME_SIZE);
    let mut burst: Vec<Vec<u8>> = Vec::with_capacity(batch);
    let mut r = FwdRun {
        batch,
        ..FwdRun::default()
    };
    let mut elapsed = Duration::ZERO;
    let mut idle = 0u32;
    while r.forwarded < packets {
        let measuring = path.forwarded() >= WARMUP_PACKETS;
        // Arrivals before this poll (not collected).
        let draw = rng.below(100);
        let mut arrive = if draw < Mix::NONE_PERCENT {
            0
        } else if draw < Mix::NONE_PERCENT + Mix::PARTIAL_PERCENT {
            if batch > 1 {
                1 + rng.below(batch as u64 - 1)
            } else {
                1
            }
        } else {
            batch as u64
        };
        if measuring {
            match arrive {
                0 => r.arrive_none += 1,
                a if a < batch as u64 => r.arrive_partial += 1,
                _ => r.arrive_full += 1,
            }
        }
        let waiting = r.injected - path.forwarded();
        arrive = arrive.min(MAX_WAITING.saturating_sub(waiting));
        if arrive > 0 {
            burst.clear();
            for i in 0..arrive {
                let mut f = template.clone();
                frame::set_sequence(&mut f, r.injected + i);
                burst.push(f);
            }
            world.inject_burst(names[1], &burst);
            r.injected += arrive;
        }
        // The poll.
        let sent = if measuring {
            MEASURING.store(true, Ordering::Relaxed);
            let start = Instant::now();
            let sent = path.step(true);
            elapsed += start.elapsed();
            MEASURING.store(false, Ordering::Relaxed);
            r.steps += 1;
            r.forwarded += sent as u64;
            if sent == 0 {
                r.empty_steps += 1;
            } else if sent < batch {
                r.partial_steps += 1;
            }
            sent
        } else {
            path.step(false)
        };
        idle = if sent == 0 { idle + 1 } else { 0 };
        if idle > 10_000 {
            return Err(Error::Device(format!(
                "the forwarder moved nothing in 10000 polls ({} of {} frames forwarded)",
                path.forwarded(),
                r.injected
            )));
        }
        // Between polls (not collected): held tails come due, the capture
        // port takes what fwd1 sent.
        release_held(&fwd1_model, &shaper1, false);
        if path.forwarded() - capture.checker.received >= 256 {
            while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
        }
    }
    // The rest, unmeasured: forward what still waits, release any held tail,
    // let the capture port take everything; then check end to end.
    release_held(&fwd1_model, &shaper1, true);
    for _ in 0..10_000 {
        if path.forwarded() == r.injected {
            break;
        }
        path.step(false);
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    for _ in 0..16 {
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    r.seconds = elapsed.as_secs_f64();
    r.reg_reads = reads.load(Ordering::Relaxed);
    r.reg_writes = writes.load(Ordering::Relaxed);
    r.held_tails = shaper1.lock().unwrap_or_else(|e| e.into_inner()).held_count;
    r.captured = capture.checker.received;
    r.duplicated = capture.checker.duplicated;
    r.reordered = capture.checker.reordered;
    r.ring_full = match &mut path {
        FwdPath::Forwarder { fwd1, .. } => fwd1.stats().tx_ring_full,
        // The graph's ToDevice keeps what the ring refused and retries.
        FwdPath::Graph { .. } => 0,
    };
    r.faults = world
        .faults()
        .into_iter()
        .filter(|f| names.iter().any(|n| f.contains(n)))
        .count() as u64;
    Ok(r)
}

/// Opens port `name` of the model with the ixgbe driver on a
/// [`BenchRegisters`] that holds nothing back: while [`set_measuring`] is
/// on, the model runs with collection off (`oxnet bench features`).
pub fn open_uncounted(name: &str, config: &Config) -> Result<Box<dyn Device>> {
    let regs = BenchRegisters {
        inner: World::global().port(name),
        shaper: Arc::new(Mutex::new(Shaper::default())),
        reads: Arc::new(AtomicU64::new(0)),
        writes: Arc::new(AtomicU64::new(0)),
    };
    Ok(Box::new(IxgbeDevice::init(
        regs,
        &format!("sim:{name}"),
        config,
        MemoryKind::Plain,
    )?))
}

/// Switches the wrappers to the uncounted path; on only around calls of a
/// measured function (outside one, entering a toggle function would switch
/// collection on).
pub fn set_measuring(on: bool) {
    MEASURING.store(on, Ordering::Relaxed);
}

/// `--toggle-collect` patterns for a measured function matched by
/// `measured` and the wrapper's two uncounted functions.
pub fn toggle_patterns(measured: &str) -> Vec<String> {
    let mut v = vec![measured.to_string()];
    v.extend(TOGGLE_SYMBOLS[1..].iter().map(|s| s.to_string()));
    v
}
