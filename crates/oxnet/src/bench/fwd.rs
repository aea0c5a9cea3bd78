//! `oxnet bench fwd-inner`: the forwarding path over the model, the
//! process `oxnet bench` runs under callgrind.
//!
//! The set-up is the demo's (`pktgen ==wire== fwd0 [forwarder] fwd1 ==wire==
//! capture`, flow control on every port), but the three applications no
//! longer take turns: traffic is pre-loaded into fwd0 (generator steps), then
//! [`measured_forward_loop`] runs *only* forwarder steps for a chunk of
//! packets, then the capture port is drained. Only `measured_forward_loop`
//! is collected (`--toggle-collect`), so the generator and the capture cost
//! nothing in the count. What the model does on behalf of the forwarder
//! (delivering a frame on a TDT write, moving frames from the packet buffer
//! on an RDT write) happens inside `SimRegisters::read32`/`write32`, whose
//! inclusive cost the outer command subtracts.

use crate::apps::{Capture, Forwarder, PacketGenerator};
use crate::commands;
use oxnet_driver::{Config, Device, Error, Result};
use oxnet_sim::World;
use std::time::{Duration, Instant};

/// Name of the measured function; `oxnet bench` toggles collection on it.
pub const MEASURED_SYMBOL: &str = "measured_forward_loop";

/// Frame size: minimum-sized frames, as the ixy numbers.
const FRAME_SIZE: usize = 60;
/// Packets forwarded (unmeasured) before measuring starts.
const WARMUP_PACKETS: u64 = 4096;
/// Packets forwarded per measured call at most: fits in fwd0's ring and
/// packet buffer before, and the capture port's ring and fwd1's TX ring
/// after, so that every measured step moves a full batch.
const CHUNK: usize = 1024;

/// What one run measured, printed as one `oxnet-bench-fwd key=value ...`
/// line for the outer command.
#[derive(Debug, Clone, Default)]
pub struct FwdRun {
    pub batch: usize,
    /// Packets forwarded inside the measured function.
    pub forwarded: u64,
    /// Forwarder steps (calls of `Forwarder::step`) measured.
    pub steps: u64,
    /// Steps that moved nothing (should be 0).
    pub empty_steps: u64,
    /// Steps that moved fewer than `batch` packets.
    pub partial_steps: u64,
    /// Register writes / reads the forwarder did on fwd0 and fwd1 while
    /// measured (0 when not counted).
    pub reg_writes: u64,
    pub reg_reads: u64,
    /// Wall-clock seconds inside the measured function (model included).
    pub seconds: f64,
    /// End-to-end check: frames the capture port received, duplicates,
    /// reordered, model faults, TX ring full events on fwd1.
    pub captured: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub faults: u64,
    pub ring_full: u64,
}

impl FwdRun {
    /// The line the inner command prints.
    pub fn to_line(&self) -> String {
        format!(
            "oxnet-bench-fwd batch={} forwarded={} steps={} empty_steps={} partial_steps={} \
             reg_writes={} reg_reads={} seconds={} captured={} duplicated={} reordered={} \
             faults={} ring_full={}",
            self.batch,
            self.forwarded,
            self.steps,
            self.empty_steps,
            self.partial_steps,
            self.reg_writes,
            self.reg_reads,
            self.seconds,
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
                "reg_writes" => r.reg_writes = int()?,
                "reg_reads" => r.reg_reads = int()?,
                "seconds" => r.seconds = value.parse().ok()?,
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

/// Counters of the measured loop.
#[derive(Default)]
struct LoopCounts {
    steps: u64,
    empty: u64,
    partial: u64,
}

/// The measured function: forwarder steps only, until `fwd` has forwarded
/// `target` packets in total (or a step moves nothing).
#[inline(never)]
fn measured_forward_loop(
    fwd: &mut Forwarder,
    rx: &mut dyn Device,
    tx: &mut dyn Device,
    target: u64,
    batch: usize,
    counts: &mut LoopCounts,
) {
    while fwd.forwarded < target {
        let n = Forwarder::step(fwd, rx, tx);
        counts.steps += 1;
        if n == 0 {
            counts.empty += 1;
            break;
        }
        if n < batch {
            counts.partial += 1;
        }
    }
}

/// The same loop under another name, for the warm-up (not collected).
#[inline(never)]
fn warmup_forward_loop(
    fwd: &mut Forwarder,
    rx: &mut dyn Device,
    tx: &mut dyn Device,
    target: u64,
    batch: usize,
    counts: &mut LoopCounts,
) {
    while fwd.forwarded < target {
        let n = Forwarder::step(fwd, rx, tx);
        counts.steps += 1;
        if n == 0 {
            counts.empty += 1;
            break;
        }
        if n < batch {
            counts.partial += 1;
        }
    }
}

/// Runs the forwarding benchmark in this process: `packets` packets
/// forwarded inside [`measured_forward_loop`] at batch size `batch`.
/// `count_registers` traces fwd0/fwd1's register accesses (inside the
/// model, so it does not change the collected count, only the wall clock).
pub fn run(batch: usize, packets: u64, count_registers: bool) -> Result<FwdRun> {
    if batch == 0 || batch > 256 {
        return Err(Error::Config(format!("batch {batch} is outside 1..=256")));
    }
    let world = World::global();
    let names = ["bench-pktgen", "bench-fwd0", "bench-fwd1", "bench-capture"];
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
    let specs: Vec<String> = names.iter().map(|n| format!("sim:{n}")).collect();
    let mut gen_dev = commands::open(&specs[0], &config)?;
    let mut fwd0 = commands::open(&specs[1], &config)?;
    let mut fwd1 = commands::open(&specs[2], &config)?;
    let mut cap_dev = commands::open(&specs[3], &config)?;

    // The generator and the capture use 64-packet batches whatever the
    // forwarder's batch: they only feed and drain, unmeasured.
    let mut generator = PacketGenerator::new(&*gen_dev, FRAME_SIZE, None, None, 64)?;
    let mut forward = Forwarder::new(batch);
    let mut capture = Capture::new(64, None);

    // Chunks are whole batches, so every measured step can move a full one.
    let chunk = ((CHUNK / batch).max(1) * batch) as u64;
    let mut counts = LoopCounts::default();
    let mut warm = LoopCounts::default();
    let mut measured_packets = 0u64;
    let mut elapsed = Duration::ZERO;
    let mut reg_writes = 0u64;
    let mut reg_reads = 0u64;

    while measured_packets < packets {
        // Feed: until `chunk` packets wait for the forwarder (in fwd0's
        // ring and packet buffer, or in the generator's TX ring behind a
        // PAUSE), or the generator cannot place more.
        let mut stuck = 0;
        while generator.sent() - forward.forwarded < chunk && stuck < 4 {
            if generator.step(&mut *gen_dev) == 0 {
                stuck += 1;
            } else {
                stuck = 0;
            }
        }
        let available = (generator.sent() - forward.forwarded) / batch as u64 * batch as u64;
        if available == 0 {
            return Err(Error::Device(
                "the generator could not load the forwarder's port".into(),
            ));
        }
        let warming = forward.forwarded < WARMUP_PACKETS;
        let want = if warming {
            available.min(chunk)
        } else {
            available.min(chunk).min(packets - measured_packets)
        };
        let target = forward.forwarded + want;
        if warming {
            warmup_forward_loop(&mut forward, &mut *fwd0, &mut *fwd1, target, batch, &mut warm);
        } else {
            if count_registers {
                world.set_tracing(names[1], true);
                world.set_tracing(names[2], true);
            }
            let before = forward.forwarded;
            let start = Instant::now();
            measured_forward_loop(&mut forward, &mut *fwd0, &mut *fwd1, target, batch, &mut counts);
            elapsed += start.elapsed();
            measured_packets += forward.forwarded - before;
            if count_registers {
                for name in &names[1..3] {
                    for access in world.trace(name) {
                        match access {
                            oxnet_sim::Access::Write { .. } => reg_writes += 1,
                            oxnet_sim::Access::Read { .. } => reg_reads += 1,
                        }
                    }
                    world.set_tracing(name, false);
                }
            }
            if counts.empty > 0 {
                break;
            }
        }
        // Drain: the capture port takes everything fwd1 sent (its RDT
        // writes also end any PAUSE towards fwd1).
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    // Let the last frames arrive; then check the path end to end.
    for _ in 0..16 {
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    let fwd1_stats = fwd1.stats();
    let faults = world
        .faults()
        .into_iter()
        .filter(|f| names.iter().any(|n| f.contains(n)))
        .count() as u64;
    Ok(FwdRun {
        batch,
        forwarded: measured_packets,
        steps: counts.steps,
        empty_steps: counts.empty,
        partial_steps: counts.partial,
        reg_writes,
        reg_reads,
        seconds: elapsed.as_secs_f64(),
        captured: capture.checker.received,
        duplicated: capture.checker.duplicated,
        reordered: capture.checker.reordered,
        faults,
        ring_full: fwd1_stats.tx_ring_full,
    })
}
