//! `oxnet bench features`: what the 82599's transmit and receive features
//! change in the driver's work per packet, on the model — the shape of
//! Table 1 of "Performance Exploration of NIC Features in a Baremetal
//! Library OS" (TSO, RSC, TWB toggled), at the driver level since there is
//! no TCP stack yet.
//!
//! Workload (`oxnet bench features-inner`, run under callgrind): a TCP-like
//! bulk stream from port `bf-tx` to port `bf-rx` over a simulated wire. The
//! application sends *messages* of [`PAYLOAD`] bytes (45 segments of
//! [`MSS`] bytes, the largest multiple of the MSS that single-descriptor
//! TSO can carry in one 64 KiB buffer), each a chain of 2 KiB buffers with
//! one TSO request; [`BURST`] messages per transmit step. The sender has TSO
//! off (the driver segments in software, `offload::segment`), `single` (the
//! driver copies the chain into one buffer) or `multi` (one descriptor per
//! buffer), and head write-back (TWB) off or on; the receiver has RSC off or
//! on. Nothing else is switched on.
//!
//! Two `#[inline(never)]` functions are collected: [`measured_features_tx`]
//! (one `tx_batch` of a burst, including the cleaning of the previous one)
//! and [`measured_features_rx`] (freeing the previous step's packets, then
//! `rx_batch` until the ring is empty). Building the messages and checking
//! what arrived (every payload byte, in order, headers and checksums) run
//! outside them. The devices run on the bench's register wrapper
//! (`fwd::open_uncounted`): the model works inside its two uncounted
//! functions, where callgrind's collection is switched off, so nothing is
//! subtracted; the outer command fails if any oxnet_sim function has a cost.
//!
//! The second part measures the cost of the `Mutex` through which `oxnet
//! fwd --queues N` shares a device: the forwarding loop of `oxnet bench`
//! (batch 32, one direction, one queue) once with [`Forwarder::step`] and
//! once with `apps::multiqueue::step` on `Arc<Mutex<Box<dyn Device>>>`.

use super::callgrind;
use super::fwd::FwdRun;
use crate::apps::multiqueue::{self, Shared};
use crate::apps::{Capture, Forwarder, PacketGenerator};
use crate::commands;
use oxnet_driver::offload;
use oxnet_driver::packet::TX_TSO;
use oxnet_driver::{Config, Device, Error, Offloads, PacketBatch, QueueStats, Result, TsoMode};
use oxnet_sim::World;
use std::fmt::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Prefix of the two measured functions of the stream (the toggle pattern
/// `*measured_features_*` matches both).
pub const STREAM_SYMBOL: &str = "measured_features_";
/// Measured loops of the Mutex comparison.
pub const PLAIN_SYMBOL: &str = "measured_fwd_plain_loop";
pub const MUTEX_SYMBOL: &str = "measured_fwd_mutex_loop";

/// TCP maximum segment size (Ethernet MTU 1500 with 12 bytes of TCP
/// timestamps, as Linux sends).
pub const MSS: usize = 1448;
/// Segments per message.
pub const SEGMENTS_PER_MESSAGE: usize = 45;
/// Payload bytes per message: 45 x 1448 = 65160 (with 54 header bytes it
/// fits one 64 KiB - 64 buffer for single-descriptor TSO).
pub const PAYLOAD: usize = MSS * SEGMENTS_PER_MESSAGE;
/// Ethernet + IPv4 + TCP header bytes.
const HEADERS: usize = 54;
/// Messages per transmit step (180 segments: fit the 512-descriptor rings).
pub const BURST: usize = 4;
/// Receive batch size.
const RX_BATCH: usize = 32;
/// Messages sent (unmeasured) before measuring.
const WARMUP_MESSAGES: u64 = 32;

const TX_PORT: &str = "bf-tx";
const RX_PORT: &str = "bf-rx";

/// The payload byte at stream offset `o` (not periodic in the MSS or the
/// buffer size, so a misplaced segment shows).
#[inline]
fn pattern(o: usize) -> u8 {
    (o ^ (o >> 8) ^ (o >> 16)).wrapping_mul(31) as u8
}

/// One combination of the switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Combination {
    pub tso: TsoMode,
    pub rsc: bool,
    pub twb: bool,
}

impl Combination {
    /// All 12, in table order.
    pub fn all() -> Vec<Combination> {
        let mut v = Vec::new();
        for tso in [TsoMode::Off, TsoMode::Single, TsoMode::Multi] {
            for rsc in [false, true] {
                for twb in [false, true] {
                    v.push(Combination { tso, rsc, twb });
                }
            }
        }
        v
    }

    pub fn tso_name(&self) -> &'static str {
        match self.tso {
            TsoMode::Off => "off",
            TsoMode::Single => "single",
            TsoMode::Multi => "multi",
        }
    }

    /// `tso-off.rsc-on.twb-off`, for file names.
    pub fn label(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!("tso-{}.rsc-{}.twb-{}", self.tso_name(), on(self.rsc), on(self.twb))
    }
}

/// Parses `off|single|multi`.
pub fn parse_tso(s: &str) -> Result<TsoMode> {
    match s {
        "off" => Ok(TsoMode::Off),
        "single" => Ok(TsoMode::Single),
        "multi" => Ok(TsoMode::Multi),
        _ => Err(Error::Config(format!("TSO mode {s}: off, single or multi"))),
    }
}

/// What one stream run counted, printed as one `oxnet-bench-features
/// key=value ...` line.
#[derive(Debug, Clone, Default)]
pub struct StreamRun {
    pub tso: String,
    pub rsc: bool,
    pub twb: bool,
    /// Messages sent and received while measured.
    pub messages: u64,
    pub tx_steps: u64,
    pub rx_steps: u64,
    /// rx_batch calls inside the measured receive steps.
    pub rx_calls: u64,
    /// Deltas of the sender's queue 0 counters over the measured steps.
    pub tx_packets: u64,
    pub tx_descriptors: u64,
    pub tx_context_descriptors: u64,
    pub tx_software_fallback: u64,
    pub tx_hw_packets: u64,
    /// Descriptors per transmitted packet (driver's histogram), "n:count,...".
    pub tx_histogram: String,
    /// Deltas of the receiver's queue 0 counters.
    pub rx_packets: u64,
    pub rx_descriptors: u64,
    pub rx_hw_packets: u64,
    /// Register accesses (model trace) by the sender's / receiver's driver.
    pub tx_reg_writes: u64,
    pub tx_reg_reads: u64,
    pub rx_reg_writes: u64,
    pub rx_reg_reads: u64,
    /// Payload bytes handed to tx_batch / verified in order on receive.
    pub payload_sent: u64,
    pub payload_received: u64,
    /// Received packets whose headers, checksums or bytes were wrong.
    pub bad_packets: u64,
    pub faults: u64,
    pub rx_missed: u64,
    pub tx_ring_full: u64,
    pub tx_invalid: u64,
    /// Wall-clock seconds inside the measured functions (model included).
    pub tx_seconds: f64,
    pub rx_seconds: f64,
}

impl StreamRun {
    pub fn wire_packets(&self) -> u64 {
        self.messages * SEGMENTS_PER_MESSAGE as u64
    }

    /// Every byte arrived once, in order, intact; nothing lost or refused.
    pub fn clean(&self) -> bool {
        self.payload_sent == self.payload_received
            && self.payload_sent == self.messages * PAYLOAD as u64
            && self.bad_packets == 0
            && self.faults == 0
            && self.rx_missed == 0
            && self.tx_ring_full == 0
            && self.tx_invalid == 0
    }

    pub fn to_line(&self) -> String {
        format!(
            "oxnet-bench-features tso={} rsc={} twb={} messages={} tx_steps={} rx_steps={} rx_calls={} \
             tx_packets={} tx_descriptors={} tx_context_descriptors={} tx_software_fallback={} \
             tx_hw_packets={} tx_histogram={} rx_packets={} rx_descriptors={} rx_hw_packets={} \
             tx_reg_writes={} tx_reg_reads={} rx_reg_writes={} rx_reg_reads={} payload_sent={} \
             payload_received={} bad_packets={} faults={} rx_missed={} tx_ring_full={} tx_invalid={} \
             tx_seconds={} rx_seconds={}",
            self.tso,
            self.rsc,
            self.twb,
            self.messages,
            self.tx_steps,
            self.rx_steps,
            self.rx_calls,
            self.tx_packets,
            self.tx_descriptors,
            self.tx_context_descriptors,
            self.tx_software_fallback,
            self.tx_hw_packets,
            if self.tx_histogram.is_empty() {
                "-"
            } else {
                &self.tx_histogram
            },
            self.rx_packets,
            self.rx_descriptors,
            self.rx_hw_packets,
            self.tx_reg_writes,
            self.tx_reg_reads,
            self.rx_reg_writes,
            self.rx_reg_reads,
            self.payload_sent,
            self.payload_received,
            self.bad_packets,
            self.faults,
            self.rx_missed,
            self.tx_ring_full,
            self.tx_invalid,
            self.tx_seconds,
            self.rx_seconds
        )
    }

    pub fn parse(output: &str) -> Option<StreamRun> {
        let line = output.lines().find(|l| l.starts_with("oxnet-bench-features "))?;
        let mut r = StreamRun::default();
        for field in line.split_whitespace().skip(1) {
            let (key, value) = field.split_once('=')?;
            let int = || value.parse::<u64>().ok();
            let flag = || value.parse::<bool>().ok();
            match key {
                "tso" => r.tso = value.to_string(),
                "rsc" => r.rsc = flag()?,
                "twb" => r.twb = flag()?,
                "messages" => r.messages = int()?,
                "tx_steps" => r.tx_steps = int()?,
                "rx_steps" => r.rx_steps = int()?,
                "rx_calls" => r.rx_calls = int()?,
                "tx_packets" => r.tx_packets = int()?,
                "tx_descriptors" => r.tx_descriptors = int()?,
                "tx_context_descriptors" => r.tx_context_descriptors = int()?,
                "tx_software_fallback" => r.tx_software_fallback = int()?,
                "tx_hw_packets" => r.tx_hw_packets = int()?,
                "tx_histogram" => r.tx_histogram = if value == "-" { String::new() } else { value.to_string() },
                "rx_packets" => r.rx_packets = int()?,
                "rx_descriptors" => r.rx_descriptors = int()?,
                "rx_hw_packets" => r.rx_hw_packets = int()?,
                "tx_reg_writes" => r.tx_reg_writes = int()?,
                "tx_reg_reads" => r.tx_reg_reads = int()?,
                "rx_reg_writes" => r.rx_reg_writes = int()?,
                "rx_reg_reads" => r.rx_reg_reads = int()?,
                "payload_sent" => r.payload_sent = int()?,
                "payload_received" => r.payload_received = int()?,
                "bad_packets" => r.bad_packets = int()?,
                "faults" => r.faults = int()?,
                "rx_missed" => r.rx_missed = int()?,
                "tx_ring_full" => r.tx_ring_full = int()?,
                "tx_invalid" => r.tx_invalid = int()?,
                "tx_seconds" => r.tx_seconds = value.parse().ok()?,
                "rx_seconds" => r.rx_seconds = value.parse().ok()?,
                _ => {}
            }
        }
        Some(r)
    }
}

// --- The measured functions ------------------------------------------------

/// The transmit step: one `tx_batch` with a burst of messages. What the
/// driver does here: clean what the NIC finished (DD bits or the written-back
/// head), segment / linearise / describe the chains, one TDT write.
#[inline(never)]
fn measured_features_tx(dev: &mut dyn Device, batch: &mut PacketBatch) -> usize {
    dev.tx_batch(0, batch)
}

/// The receive step: free what the application got last time (after it
/// was checked, outside), then receive until the ring is empty.
#[inline(always)]
fn rx_body(dev: &mut dyn Device, received: &mut PacketBatch, done: &mut PacketBatch, calls: &mut u64) -> usize {
    done.clear();
    let mut total = 0;
    loop {
        let n = dev.rx_batch(0, received, RX_BATCH);
        *calls += 1;
        if n == 0 {
            break;
        }
        total += n;
    }
    total
}

#[inline(never)]
fn measured_features_rx(
    dev: &mut dyn Device,
    received: &mut PacketBatch,
    done: &mut PacketBatch,
    calls: &mut u64,
) -> usize {
    rx_body(dev, received, done, calls)
}

// --- The stream --------------------------------------------------------------

/// The first 54 bytes of message `k` (headers of a TCP/IPv4 segment with
/// PSH ACK; lengths and checksums are the driver's or the NIC's business,
/// as for a stack handing a TSO packet to a driver).
fn headers(k: u64, dst: [u8; 6], src: [u8; 6]) -> [u8; HEADERS] {
    let mut h = [0u8; HEADERS];
    h[0..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&offload::ETHERTYPE_IPV4.to_be_bytes());
    h[14] = 0x45;
    h[16..18].copy_from_slice(&((40 + PAYLOAD) as u16).to_be_bytes());
    // IP identification: +1 per segment, as TSO does.
    h[18..20].copy_from_slice(&((k * SEGMENTS_PER_MESSAGE as u64) as u16).to_be_bytes());
    h[20] = 0x40; // DF
    h[22] = 64;
    h[23] = offload::IPPROTO_TCP;
    h[26..30].copy_from_slice(&[10, 0, 0, 1]);
    h[30..34].copy_from_slice(&[10, 0, 0, 2]);
    h[34..36].copy_from_slice(&40000u16.to_be_bytes());
    h[36..38].copy_from_slice(&11211u16.to_be_bytes());
    let seq = 1u32.wrapping_add((k as usize * PAYLOAD) as u32);
    h[38..42].copy_from_slice(&seq.to_be_bytes());
    h[42..46].copy_from_slice(&1u32.to_be_bytes());
    h[46] = 5 << 4;
    h[47] = 0x18; // PSH ACK
    h[48..50].copy_from_slice(&0xFFFFu16.to_be_bytes());
    h
}

/// Builds message `k`: a chain of full 2 KiB buffers from `pool` (32 of
/// them), headers in the first, with a TSO request for MSS 1448.
fn build_message(pool: &oxnet_driver::Mempool, k: u64, dst: [u8; 6], src: [u8; 6]) -> Result<oxnet_driver::Packet> {
    let h = headers(k, dst, src);
    let base = k as usize * PAYLOAD;
    let room = pool.data_room();
    let mut head: Option<oxnet_driver::Packet> = None;
    let mut at = 0; // payload bytes placed
    while at < PAYLOAD {
        let mut p = pool.alloc()?;
        let header = if head.is_none() { HEADERS } else { 0 };
        let n = (room - header).min(PAYLOAD - at);
        p.set_len(header + n)?;
        p[..header].copy_from_slice(&h[..header]);
        for (i, b) in p[header..].iter_mut().enumerate() {
            *b = pattern(base + at + i);
        }
        at += n;
        match head.as_mut() {
            None => head = Some(p),
            Some(first) => first.append(p),
        }
    }
    let mut head = head.expect("a payload");
    let request = offload::offload_for(&h, TX_TSO, MSS as u16)?;
    head.set_tx_offload(request);
    Ok(head)
}

/// Checks received packets: IPv4/TCP of our flow, IP header checksum good
/// (and the TCP checksum for a packet of one segment: the model does not
/// update it for a coalesced one), the sequence number where the stream
/// stands, and every payload byte. Returns the payload bytes and counts
/// the bad packets.
fn verify(batch: &PacketBatch, next_offset: &mut u64, bad: &mut u64, scratch: &mut Vec<u8>) -> u64 {
    let mut bytes = 0;
    for packet in batch.iter() {
        scratch.clear();
        packet.copy_chain_to(scratch);
        let f = &scratch[..];
        let ok = (|| {
            let h = offload::parse(f)?;
            if h.l2_len + h.l3_len + h.l4_len != HEADERS || h.protocol != offload::IPPROTO_TCP {
                return None;
            }
            let ip_total = u16::from_be_bytes([f[16], f[17]]) as usize;
            if ip_total + 14 != f.len() || offload::fold(offload::ones_sum(&f[14..34], 0)) != 0xFFFF {
                return None;
            }
            let payload = &f[HEADERS..];
            if payload.len() <= MSS {
                let verdict = offload::checksum_verdict(f);
                if verdict & offload::VERDICT_MASK
                    != oxnet_driver::packet::FLAG_IP_CSUM_GOOD | oxnet_driver::packet::FLAG_L4_CSUM_GOOD
                {
                    return None;
                }
            }
            let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
            if seq != 1u32.wrapping_add(*next_offset as u32) {
                return None;
            }
            let base = *next_offset as usize;
            if payload.iter().enumerate().any(|(i, &b)| b != pattern(base + i)) {
                return None;
            }
            Some(payload.len() as u64)
        })();
        match ok {
            Some(n) => {
                *next_offset += n;
                bytes += n;
            }
            None => *bad += 1,
        }
    }
    bytes
}

fn histogram_delta(before: &QueueStats, after: &QueueStats) -> String {
    let mut parts = Vec::new();
    for (n, (a, b)) in after
        .tx_descriptors_per_packet
        .iter()
        .zip(before.tx_descriptors_per_packet.iter())
        .enumerate()
    {
        if a > b {
            parts.push(format!("{n}:{}", a - b));
        }
    }
    parts.join(",")
}

/// Runs the stream in this process: `messages` messages measured (after a
/// warm-up), [`BURST`] per step.
pub fn run_stream(combination: Combination, messages: u64) -> Result<StreamRun> {
    let world = World::global();
    world.connect(TX_PORT, RX_PORT);
    let base = Config {
        rx_ring_size: 512,
        tx_ring_size: 512,
        batch_size: RX_BATCH,
        ..Config::default()
    };
    let tx_config = Config {
        offloads: Offloads {
            tso: combination.tso,
            tx_head_writeback: combination.twb,
            ..Offloads::default()
        },
        ..base.clone()
    };
    let rx_config = Config {
        offloads: Offloads {
            rsc: combination.rsc,
            ..Offloads::default()
        },
        ..base
    };
    // The model is reached through the bench's wrapper, which keeps it out
    // of the count while measured (see fwd.rs).
    let mut tx = super::fwd::open_uncounted(TX_PORT, &tx_config)?;
    let mut rx = super::fwd::open_uncounted(RX_PORT, &rx_config)?;
    let pool = tx.mempool(0);
    let (src, dst) = (tx.mac(), rx.mac());

    let mut out = PacketBatch::with_capacity(BURST);
    let mut received = PacketBatch::with_capacity(1024);
    let mut done = PacketBatch::with_capacity(1024);
    let mut scratch = Vec::with_capacity(HEADERS + PAYLOAD);
    let mut next_message = 0u64;
    let mut next_offset = 0u64;
    let mut run = StreamRun {
        tso: combination.tso_name().to_string(),
        rsc: combination.rsc,
        twb: combination.twb,
        ..StreamRun::default()
    };
    let mut warm_calls = 0u64;
    let mut tx_time = Duration::ZERO;
    let mut rx_time = Duration::ZERO;

    // Warm-up: rings wrap around, pools and batches reach their sizes.
    let mut warm_bad = 0;
    while next_message < WARMUP_MESSAGES {
        for _ in 0..BURST {
            out.push(build_message(&pool, next_message, dst, src)?);
            next_message += 1;
        }
        tx.tx_batch(0, &mut out);
        if !out.is_empty() {
            return Err(Error::Device("warm-up: the transmit ring did not take a burst".into()));
        }
        rx_body(&mut *rx, &mut received, &mut done, &mut warm_calls);
        verify(&received, &mut next_offset, &mut warm_bad, &mut scratch);
        std::mem::swap(&mut received, &mut done);
    }
    if warm_bad != 0 || next_offset != WARMUP_MESSAGES * PAYLOAD as u64 {
        return Err(Error::Device(format!(
            "warm-up: {warm_bad} bad packets, {next_offset} of {} payload bytes arrived",
            WARMUP_MESSAGES * PAYLOAD as u64
        )));
    }

    let tx_before = tx.queue_stats()[0].clone();
    let rx_before = rx.queue_stats()[0].clone();
    let offset_before = next_offset;
    world.set_tracing(TX_PORT, true);
    world.set_tracing(RX_PORT, true);
    let mut measured = 0u64;
    while measured < messages {
        let n = BURST.min((messages - measured) as usize);
        for _ in 0..n {
            out.push(build_message(&pool, next_message, dst, src)?);
            next_message += 1;
        }
        let start = Instant::now();
        super::fwd::set_measuring(true);
        measured_features_tx(&mut *tx, &mut out);
        super::fwd::set_measuring(false);
        tx_time += start.elapsed();
        run.tx_steps += 1;
        if !out.is_empty() {
            run.tx_ring_full += out.len() as u64;
            out.clear();
        }
        measured += n as u64;
        run.payload_sent += (n * PAYLOAD) as u64;
        let start = Instant::now();
        super::fwd::set_measuring(true);
        measured_features_rx(&mut *rx, &mut received, &mut done, &mut run.rx_calls);
        super::fwd::set_measuring(false);
        rx_time += start.elapsed();
        run.rx_steps += 1;
        run.payload_received += verify(&received, &mut next_offset, &mut run.bad_packets, &mut scratch);
        std::mem::swap(&mut received, &mut done);
    }
    world.set_tracing(TX_PORT, false);
    world.set_tracing(RX_PORT, false);
    for (port, writes, reads) in [
        (TX_PORT, &mut run.tx_reg_writes, &mut run.tx_reg_reads),
        (RX_PORT, &mut run.rx_reg_writes, &mut run.rx_reg_reads),
    ] {
        for access in world.trace(port) {
            match access {
                oxnet_sim::Access::Write { .. } => *writes += 1,
                oxnet_sim::Access::Read { .. } => *reads += 1,
            }
        }
    }
    done.clear();
    let tx_after = tx.queue_stats()[0].clone();
    let rx_after = rx.queue_stats()[0].clone();
    run.messages = measured;
    run.tx_packets = tx_after.tx_packets - tx_before.tx_packets;
    run.tx_descriptors = tx_after.tx_descriptors - tx_before.tx_descriptors;
    run.tx_context_descriptors = tx_after.tx_context_descriptors - tx_before.tx_context_descriptors;
    run.tx_software_fallback = tx_after.tx_software_fallback - tx_before.tx_software_fallback;
    run.tx_hw_packets = tx_after.hw_tx_packets - tx_before.hw_tx_packets;
    run.tx_histogram = histogram_delta(&tx_before, &tx_after);
    run.rx_packets = rx_after.rx_packets - rx_before.rx_packets;
    run.rx_descriptors = rx_after.rx_descriptors - rx_before.rx_descriptors;
    run.rx_hw_packets = rx_after.hw_rx_packets - rx_before.hw_rx_packets;
    debug_assert_eq!(next_offset - offset_before, run.payload_received);
    let tx_stats = tx.stats();
    let rx_stats = rx.stats();
    run.rx_missed = rx_stats.rx_missed;
    run.tx_invalid = tx_stats.tx_invalid;
    run.tx_ring_full += tx_stats.tx_ring_full;
    run.faults = world
        .faults()
        .into_iter()
        .filter(|f| f.contains(TX_PORT) || f.contains(RX_PORT))
        .count() as u64;
    run.tx_seconds = tx_time.as_secs_f64();
    run.rx_seconds = rx_time.as_secs_f64();
    Ok(run)
}

// --- The Mutex of `oxnet fwd --queues N` -------------------------------------

/// Which forwarding step the loop calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FwdKind {
    /// `Forwarder::step` on `&mut dyn Device` (what `oxnet bench` measures).
    Plain,
    /// `apps::multiqueue::step` on the shared `Arc<Mutex<Box<dyn Device>>>`.
    Mutex,
}

const FWD_BATCH: usize = 32;
const FWD_CHUNK: usize = 1024;
const FWD_WARMUP: u64 = 4096;

#[inline(never)]
fn measured_fwd_plain_loop(fwd: &mut Forwarder, rx: &mut dyn Device, tx: &mut dyn Device, target: u64) -> u64 {
    plain_loop(fwd, rx, tx, target)
}

#[inline(never)]
fn measured_fwd_mutex_loop(rx: &Shared, tx: &Shared, batch: &mut PacketBatch, forwarded: &mut u64, target: u64) -> u64 {
    mutex_loop(rx, tx, batch, forwarded, target)
}

/// The loops; the warm-up calls them directly (inlined, not collected).
/// (No separate warm-up copies: identical functions are merged into one
/// symbol by LLVM, and the toggle would then never fire.)
#[inline(always)]
fn plain_loop(fwd: &mut Forwarder, rx: &mut dyn Device, tx: &mut dyn Device, target: u64) -> u64 {
    let mut empty = 0;
    while fwd.forwarded < target {
        if Forwarder::step(fwd, rx, tx) == 0 {
            empty += 1;
            break;
        }
    }
    empty
}

#[inline(always)]
fn mutex_loop(rx: &Shared, tx: &Shared, batch: &mut PacketBatch, forwarded: &mut u64, target: u64) -> u64 {
    let mut empty = 0;
    while *forwarded < target {
        let n = multiqueue::step(rx, tx, 0, batch, FWD_BATCH);
        if n == 0 {
            empty += 1;
            break;
        }
        *forwarded += n as u64;
    }
    empty
}

/// The forwarding loop of `oxnet bench` (same set-up: pktgen ==wire== fwd0
/// [step] fwd1 ==wire== capture, 60-byte frames, rings of 512, flow control
/// on, batch 32), with the plain or the Mutex step.
pub fn run_fwd(kind: FwdKind, packets: u64) -> Result<FwdRun> {
    let world = World::global();
    let names = ["bfm-pktgen", "bfm-fwd0", "bfm-fwd1", "bfm-capture"];
    world.connect(names[0], names[1]);
    world.connect(names[2], names[3]);
    let config = Config {
        batch_size: FWD_BATCH,
        rx_ring_size: 512,
        tx_ring_size: 512,
        flow_control: true,
        promiscuous: true,
        ..Config::default()
    };
    let mut gen_dev = commands::open(&format!("sim:{}", names[0]), &config)?;
    let fwd0 = super::fwd::open_uncounted(names[1], &config)?;
    let fwd1 = super::fwd::open_uncounted(names[2], &config)?;
    let mut cap_dev = commands::open(&format!("sim:{}", names[3]), &config)?;
    let mut generator = PacketGenerator::new(&*gen_dev, 60, None, None, 64)?;
    let mut capture = Capture::new(64, None);
    // Both kinds hold the devices the same way; the plain one locks once
    // around its whole loop, outside the measured function.
    let (a, b): (Shared, Shared) = (Arc::new(Mutex::new(fwd0)), Arc::new(Mutex::new(fwd1)));
    let mut forwarder = Forwarder::new(FWD_BATCH);
    let mut batch = PacketBatch::with_capacity(FWD_BATCH);
    let mut mutex_forwarded = 0u64;
    let chunk = ((FWD_CHUNK / FWD_BATCH) * FWD_BATCH) as u64;
    let mut measured = 0u64;
    let mut empty = 0u64;
    let mut elapsed = Duration::ZERO;
    let (mut reg_writes, mut reg_reads) = (0u64, 0u64);
    while measured < packets {
        let forwarded = |f: &Forwarder, m: u64| if kind == FwdKind::Plain { f.forwarded } else { m };
        let mut stuck = 0;
        while generator.sent() - forwarded(&forwarder, mutex_forwarded) < chunk && stuck < 4 {
            if generator.step(&mut *gen_dev) == 0 {
                stuck += 1;
            } else {
                stuck = 0;
            }
        }
        let done = forwarded(&forwarder, mutex_forwarded);
        let available = (generator.sent() - done) / FWD_BATCH as u64 * FWD_BATCH as u64;
        if available == 0 {
            return Err(Error::Device(
                "the generator could not load the forwarder's port".into(),
            ));
        }
        let warming = done < FWD_WARMUP;
        let want = if warming {
            available.min(chunk)
        } else {
            available.min(chunk).min(packets - measured)
        };
        let target = done + want;
        if !warming {
            world.set_tracing(names[1], true);
            world.set_tracing(names[2], true);
        }
        let start = Instant::now();
        match (kind, warming) {
            (FwdKind::Plain, w) => {
                let mut rx = a.lock().expect("device lock");
                let mut tx = b.lock().expect("device lock");
                let start = Instant::now();
                empty += if w {
                    plain_loop(&mut forwarder, &mut **rx, &mut **tx, target)
                } else {
                    super::fwd::set_measuring(true);
                    let e = measured_fwd_plain_loop(&mut forwarder, &mut **rx, &mut **tx, target);
                    super::fwd::set_measuring(false);
                    e
                };
                if !w {
                    elapsed += start.elapsed();
                }
            }
            (FwdKind::Mutex, true) => {
                empty += mutex_loop(&a, &b, &mut batch, &mut mutex_forwarded, target);
            }
            (FwdKind::Mutex, false) => {
                super::fwd::set_measuring(true);
                empty += measured_fwd_mutex_loop(&a, &b, &mut batch, &mut mutex_forwarded, target);
                super::fwd::set_measuring(false);
                elapsed += start.elapsed();
            }
        }
        if !warming {
            measured += forwarded(&forwarder, mutex_forwarded) - done;
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
        if empty > 0 {
            break;
        }
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    for _ in 0..16 {
        while capture.step(&mut *cap_dev, usize::MAX) > 0 {}
    }
    let ring_full = b.lock().expect("device lock").stats().tx_ring_full;
    let faults = world
        .faults()
        .into_iter()
        .filter(|f| names.iter().any(|n| f.contains(n)))
        .count() as u64;
    Ok(FwdRun {
        batch: FWD_BATCH,
        forwarded: measured,
        steps: 0,
        empty_steps: empty,
        partial_steps: 0,
        reg_writes,
        reg_reads,
        seconds: elapsed.as_secs_f64(),
        captured: capture.checker.received,
        duplicated: capture.checker.duplicated,
        reordered: capture.checker.reordered,
        faults,
        ring_full,
        ..FwdRun::default()
    })
}

// --- The outer command -------------------------------------------------------

/// Collected instructions of one side of one stream run.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Inclusive instructions of the measured function.
    pub collected_ir: u64,
    /// Of which inside SimRegisters::read32/write32 (calls from this side).
    pub model_ir: u64,
}

impl Side {
    pub fn driver_app(&self) -> u64 {
        self.collected_ir.saturating_sub(self.model_ir)
    }
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct StreamResult {
    pub combination: Combination,
    pub run: StreamRun,
    pub tx: Side,
    pub rx: Side,
    /// `callgrind_annotate`'s totals, for the cross-check.
    pub annotate_total: u64,
    pub annotate_model: u64,
}

impl StreamResult {
    fn per(&self, v: u64, n: u64) -> f64 {
        v as f64 / n.max(1) as f64
    }
    pub fn tx_per_wire(&self) -> f64 {
        self.per(self.tx.driver_app(), self.run.wire_packets())
    }
    pub fn tx_per_message(&self) -> f64 {
        self.per(self.tx.driver_app(), self.run.messages)
    }
    pub fn rx_per_wire(&self) -> f64 {
        self.per(self.rx.driver_app(), self.run.wire_packets())
    }
    pub fn rx_per_message(&self) -> f64 {
        self.per(self.rx.driver_app(), self.run.messages)
    }
    /// Receive instructions per packet the application got.
    pub fn rx_per_app_packet(&self) -> f64 {
        self.per(self.rx.driver_app(), self.run.rx_packets)
    }
}

/// One forwarding loop of the Mutex comparison.
#[derive(Debug, Clone)]
pub struct FwdResult {
    pub kind: FwdKind,
    pub run: FwdRun,
    pub collected_ir: u64,
    pub model_ir: u64,
}

impl FwdResult {
    pub fn per_packet(&self) -> f64 {
        self.collected_ir.saturating_sub(self.model_ir) as f64 / self.run.forwarded.max(1) as f64
    }
    pub fn clean(&self) -> bool {
        self.run.faults == 0
            && self.run.duplicated == 0
            && self.run.reordered == 0
            && self.run.empty_steps == 0
            && self.run.ring_full == 0
    }
}

/// Everything `oxnet bench features` measured.
#[derive(Debug, Clone)]
pub struct FeaturesReport {
    pub valgrind: String,
    pub rows: Vec<StreamResult>,
    pub fwd: Vec<FwdResult>,
}

/// Inclusive cost of `function` (its self cost and the cost of its calls)
/// and the part of it inside the model, from the call graph.
fn side_cost(graph: &callgrind::CallGraph, suffix: &str) -> Side {
    let Some(f) = graph.find(suffix) else {
        return Side::default();
    };
    let own = graph.self_cost.get(&f).copied().unwrap_or(0);
    let calls: u64 = graph
        .edges
        .iter()
        .filter(|((caller, _), _)| *caller == f)
        .map(|(_, (_, ir))| ir)
        .sum();
    let model = [callgrind::MODEL_READ, callgrind::MODEL_WRITE];
    let ours = graph.reachable(&[f.as_str()], &model);
    Side {
        collected_ir: own + calls,
        model_ir: model.iter().map(|m| graph.calls_into(m, &ours)).sum(),
    }
}

/// Fails loudly if the model was counted: any function of oxnet_sim with a
/// self cost, or a model cost (SimRegisters::read32/write32 inclusive)
/// other than 0. Nothing is subtracted any more; this checks that there is
/// nothing to subtract.
fn check_model_out(file: &Path, model_ir: u64) -> Result<()> {
    let leaked = callgrind::model_functions_with_cost(&callgrind::annotate(file, false)?);
    if !leaked.is_empty() || model_ir != 0 {
        return Err(Error::Device(format!(
            "the model's code was counted in {} ({model_ir} Ir inside SimRegisters::read32/write32): {}",
            file.display(),
            leaked.join(", ")
        )));
    }
    Ok(())
}

/// Runs the 12 combinations and the two forwarding loops under callgrind.
pub fn outer(exe: &Path, valgrind: String, out: &Path, messages: u64, fwd_packets: u64) -> Result<FeaturesReport> {
    let started = Instant::now();
    let mut rows = Vec::new();
    for c in Combination::all() {
        eprint!("oxnet bench features: {} under callgrind ... ", c.label());
        let out_file = out.join(format!("callgrind.features.{}.out", c.label()));
        let mut inner = vec![
            "bench".to_string(),
            "features-inner".to_string(),
            "--tso".to_string(),
            c.tso_name().to_string(),
            "--messages".to_string(),
            messages.to_string(),
        ];
        if c.rsc {
            inner.push("--rsc".into());
        }
        if c.twb {
            inner.push("--twb".into());
        }
        let patterns = super::fwd::toggle_patterns(&format!("*{STREAM_SYMBOL}*"));
        let patterns: Vec<&str> = patterns.iter().map(|p| p.as_str()).collect();
        let stdout = callgrind::run_toggles(exe, &inner, &patterns, &out_file)?;
        let run = StreamRun::parse(&stdout)
            .ok_or_else(|| Error::Device(format!("features-inner printed no result line: {stdout}")))?;
        let annotation = callgrind::annotate(&out_file, true)?;
        let graph = callgrind::read_graph(&out_file)?;
        let tx = side_cost(&graph, "measured_features_tx");
        let rx = side_cost(&graph, "measured_features_rx");
        let annotate_model = annotation.inclusive(callgrind::MODEL_READ) + annotation.inclusive(callgrind::MODEL_WRITE);
        let result = StreamResult {
            combination: c,
            run,
            tx,
            rx,
            annotate_total: annotation.total,
            annotate_model,
        };
        let sides = result.tx.collected_ir + result.rx.collected_ir;
        let models = result.tx.model_ir + result.rx.model_ir;
        if result.tx.collected_ir == 0 || result.rx.collected_ir == 0 {
            return Err(Error::Device(format!(
                "no cost found for the measured functions in {}: did a symbol change?",
                out_file.display()
            )));
        }
        check_model_out(&out_file, models + annotate_model)?;
        if sides.abs_diff(annotation.total) > annotation.total / 1000
            || models.abs_diff(annotate_model) > annotate_model / 1000
        {
            eprintln!(
                "\noxnet bench features: warning: sides {sides} / model {models} (call graph) differ from \
                 {} / {annotate_model} (callgrind_annotate) in {}",
                annotation.total,
                out_file.display()
            );
        }
        eprintln!(
            "TX {:.0} RX {:.0} instructions/wire packet, {}, {:.1} s so far",
            result.tx_per_wire(),
            result.rx_per_wire(),
            if result.run.clean() {
                "all bytes arrived"
            } else {
                "NOT CLEAN"
            },
            started.elapsed().as_secs_f64()
        );
        rows.push(result);
    }
    let mut fwd = Vec::new();
    for (kind, symbol, flag) in [
        (FwdKind::Plain, PLAIN_SYMBOL, "--plain"),
        (FwdKind::Mutex, MUTEX_SYMBOL, "--mutex"),
    ] {
        eprint!("oxnet bench features: forwarding loop {kind:?} under callgrind ... ");
        let out_file = out.join(format!("callgrind.features.fwd-{}.out", flag.trim_start_matches('-')));
        let inner: Vec<String> = [
            "bench",
            "features-fwd-inner",
            flag,
            "--packets",
            &fwd_packets.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let patterns = super::fwd::toggle_patterns(&format!("*{symbol}*"));
        let patterns: Vec<&str> = patterns.iter().map(|p| p.as_str()).collect();
        let stdout = callgrind::run_toggles(exe, &inner, &patterns, &out_file)?;
        let run = FwdRun::parse(&stdout)
            .ok_or_else(|| Error::Device(format!("features-fwd-inner printed no result line: {stdout}")))?;
        let annotation = callgrind::annotate(&out_file, true)?;
        let model_ir = annotation.inclusive(callgrind::MODEL_READ) + annotation.inclusive(callgrind::MODEL_WRITE);
        check_model_out(&out_file, model_ir)?;
        let r = FwdResult {
            kind,
            run,
            collected_ir: annotation.total,
            model_ir,
        };
        eprintln!("{:.1} instructions/packet", r.per_packet());
        fwd.push(r);
    }
    eprintln!("oxnet bench features: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(FeaturesReport { valgrind, rows, fwd })
}

fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// The table printed at the end.
pub fn table(r: &FeaturesReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\noxnet bench features: a TCP-like bulk stream over the simulated 82599 (sim:{TX_PORT} -> sim:{RX_PORT}): \
         messages of {PAYLOAD} payload bytes = {SEGMENTS_PER_MESSAGE} wire packets of MSS {MSS}, each a chain of \
         2 KiB buffers with one TSO request, {BURST} messages per transmit step, receive batch {RX_BATCH}, rings of 512"
    );
    let _ = writeln!(
        s,
        "driver+app instructions under callgrind ({}), collection switched off inside the model (nothing \
         subtracted); per wire packet (MSS segment) and per message (the application's 64 KiB packet)",
        r.valgrind
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:>6} {:>3} {:>3} | {:>8} {:>9} {:>8} {:>8} {:>7} | {:>8} {:>9} {:>8} {:>8} {:>8} {:>7} | {:>5}",
        "TSO",
        "RSC",
        "TWB",
        "TX Ir/",
        "TX Ir/",
        "TX desc/",
        "TX desc/",
        "TX regW",
        "RX Ir/",
        "RX Ir/",
        "RX pkts",
        "RX desc/",
        "RX desc/",
        "RX regW",
        "bytes"
    );
    let _ = writeln!(
        s,
        "{:>6} {:>3} {:>3} | {:>8} {:>9} {:>8} {:>8} {:>7} | {:>8} {:>9} {:>8} {:>8} {:>8} {:>7} | {:>5}",
        "",
        "",
        "",
        "wire pkt",
        "message",
        "wire pkt",
        "message",
        "/msg",
        "wire pkt",
        "message",
        "/msg",
        "wire pkt",
        "message",
        "/msg",
        ""
    );
    for row in &r.rows {
        let run = &row.run;
        let (m, w) = (run.messages.max(1) as f64, run.wire_packets().max(1) as f64);
        let _ = writeln!(
            s,
            "{:>6} {:>3} {:>3} | {:>8.1} {:>9.0} {:>8.3} {:>8.2} {:>7.3} | {:>8.1} {:>9.0} {:>8.2} {:>8.3} {:>8.2} {:>7.3} | {:>5}",
            row.combination.tso_name(),
            on(row.combination.rsc),
            on(row.combination.twb),
            row.tx_per_wire(),
            row.tx_per_message(),
            run.tx_descriptors as f64 / w,
            run.tx_descriptors as f64 / m,
            run.tx_reg_writes as f64 / m,
            row.rx_per_wire(),
            row.rx_per_message(),
            run.rx_packets as f64 / m,
            run.rx_descriptors as f64 / w,
            run.rx_descriptors as f64 / m,
            run.rx_reg_writes as f64 / m,
            if run.clean() { "ok" } else { "LOST" }
        );
    }
    let _ = writeln!(
        s,
        "  TX = measured_features_tx: one tx_batch per {BURST} messages (clean the previous burst, segment in software \
         / copy into one buffer / describe the chain, one TDT write)"
    );
    let _ = writeln!(
        s,
        "  RX = measured_features_rx: free the previous step's packets, rx_batch({RX_BATCH}) until the ring is empty \
         (one RDT write per non-empty call); RX pkts/msg = packets the application got per message (RSC: chains)"
    );
    let _ = writeln!(
        s,
        "  desc = descriptors (driver's per-queue counters, context descriptors included); regW = register writes \
         (model trace; register reads were {} on both sides); bytes ok = every payload byte arrived once, in order, \
         headers and checksums valid, nothing missed, refused or faulted",
        if r.rows
            .iter()
            .all(|x| x.run.tx_reg_reads == 0 && x.run.rx_reg_reads == 0)
        {
            "0"
        } else {
            "NOT 0, see JSON"
        }
    );
    if r.fwd.len() == 2 {
        let plain = &r.fwd[0];
        let mutex = &r.fwd[1];
        let _ = writeln!(
            s,
            "\noxnet fwd --queues N shares each device behind a Mutex: the forwarding loop of `oxnet bench` (batch \
             {FWD_BATCH}, one direction, one queue, 60-byte frames), driver+app instructions per packet:"
        );
        let _ = writeln!(s, "{:>44} {:>10} {:>9} {:>6}", "loop", "packets", "Ir/pkt", "check");
        for (name, f) in [
            ("Forwarder::step (&mut dyn Device)", plain),
            ("multiqueue::step (Arc<Mutex<Box<dyn Device>>>)", mutex),
        ] {
            let _ = writeln!(
                s,
                "{:>44} {:>10} {:>9.1} {:>6}",
                name,
                f.run.forwarded,
                f.per_packet(),
                if f.clean() { "ok" } else { "FAIL" }
            );
        }
        let _ = writeln!(
            s,
            "{:>44} {:>10} {:>+9.1}",
            "Mutex cost (difference)",
            "",
            mutex.per_packet() - plain.per_packet()
        );
    }
    s
}

/// features.json.
pub fn json(r: &FeaturesReport) -> String {
    use super::report::{json_num, json_str};
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"benchmark\": \"oxnet bench features\",");
    let _ = writeln!(s, "  \"valgrind\": {},", json_str(&r.valgrind));
    let _ = writeln!(
        s,
        "  \"workload\": {{\"mss\": {MSS}, \"payload_bytes_per_message\": {PAYLOAD}, \"wire_packets_per_message\": \
         {SEGMENTS_PER_MESSAGE}, \"messages_per_tx_step\": {BURST}, \"rx_batch\": {RX_BATCH}, \"ring_size\": 512, \
         \"buffer_bytes\": 2048, \"rsc_max_descriptors\": 16}},"
    );
    let _ = writeln!(s, "  \"combinations\": [");
    for (i, row) in r.rows.iter().enumerate() {
        let run = &row.run;
        let (m, w) = (run.messages.max(1) as f64, run.wire_packets().max(1) as f64);
        let histogram: Vec<String> = run
            .tx_histogram
            .split(',')
            .filter_map(|p| p.split_once(':'))
            .map(|(n, c)| format!("\"{n}\": {c}"))
            .collect();
        let _ = write!(
            s,
            "    {{\"tso\": {}, \"rsc\": {}, \"twb\": {}, \"messages\": {}, \"wire_packets\": {}, \
             \"tx\": {{\"collected_ir\": {}, \"model_ir\": {}, \"driver_app_ir\": {}, \"ir_per_wire_packet\": {}, \
             \"ir_per_message\": {}, \"packets\": {}, \"descriptors\": {}, \"descriptors_per_wire_packet\": {}, \
             \"descriptors_per_message\": {}, \"context_descriptors\": {}, \"software_fallback\": {}, \
             \"hw_packets\": {}, \"descriptors_per_packet_histogram\": {{{}}}, \"register_writes\": {}, \
             \"register_reads\": {}, \"register_writes_per_message\": {}, \"register_writes_per_wire_packet\": {}, \
             \"steps\": {}, \"wall_seconds_with_model\": {}}}, \
             \"rx\": {{\"collected_ir\": {}, \"model_ir\": {}, \"driver_app_ir\": {}, \"ir_per_wire_packet\": {}, \
             \"ir_per_message\": {}, \"ir_per_app_packet\": {}, \"packets\": {}, \"packets_per_message\": {}, \
             \"descriptors\": {}, \"descriptors_per_wire_packet\": {}, \"descriptors_per_message\": {}, \
             \"hw_packets\": {}, \"register_writes\": {}, \"register_reads\": {}, \"register_writes_per_message\": {}, \
             \"register_writes_per_wire_packet\": {}, \"steps\": {}, \"rx_batch_calls\": {}, \
             \"wall_seconds_with_model\": {}}}, \
             \"check\": {{\"clean\": {}, \"payload_sent\": {}, \"payload_received\": {}, \"bad_packets\": {}, \
             \"faults\": {}, \"rx_missed\": {}, \"tx_ring_full\": {}, \"tx_invalid\": {}, \
             \"annotate_total_ir\": {}, \"annotate_model_ir\": {}}}}}",
            json_str(row.combination.tso_name()),
            row.combination.rsc,
            row.combination.twb,
            run.messages,
            run.wire_packets(),
            row.tx.collected_ir,
            row.tx.model_ir,
            row.tx.driver_app(),
            json_num(row.tx_per_wire()),
            json_num(row.tx_per_message()),
            run.tx_packets,
            run.tx_descriptors,
            json_num(run.tx_descriptors as f64 / w),
            json_num(run.tx_descriptors as f64 / m),
            run.tx_context_descriptors,
            run.tx_software_fallback,
            run.tx_hw_packets,
            histogram.join(", "),
            run.tx_reg_writes,
            run.tx_reg_reads,
            json_num(run.tx_reg_writes as f64 / m),
            json_num(run.tx_reg_writes as f64 / w),
            run.tx_steps,
            json_num(run.tx_seconds),
            row.rx.collected_ir,
            row.rx.model_ir,
            row.rx.driver_app(),
            json_num(row.rx_per_wire()),
            json_num(row.rx_per_message()),
            json_num(row.rx_per_app_packet()),
            run.rx_packets,
            json_num(run.rx_packets as f64 / m),
            run.rx_descriptors,
            json_num(run.rx_descriptors as f64 / w),
            json_num(run.rx_descriptors as f64 / m),
            run.rx_hw_packets,
            run.rx_reg_writes,
            run.rx_reg_reads,
            json_num(run.rx_reg_writes as f64 / m),
            json_num(run.rx_reg_writes as f64 / w),
            run.rx_steps,
            run.rx_calls,
            json_num(run.rx_seconds),
            run.clean(),
            run.payload_sent,
            run.payload_received,
            run.bad_packets,
            run.faults,
            run.rx_missed,
            run.tx_ring_full,
            run.tx_invalid,
            row.annotate_total,
            row.annotate_model
        );
        s.push_str(if i + 1 < r.rows.len() { ",\n" } else { "\n" });
    }
    let _ = writeln!(s, "  ],");
    let _ = writeln!(s, "  \"fwd_mutex\": [");
    for (i, f) in r.fwd.iter().enumerate() {
        let _ = write!(
            s,
            "    {{\"loop\": {}, \"batch\": {FWD_BATCH}, \"packets\": {}, \"collected_ir\": {}, \"model_ir\": {}, \
             \"driver_app_ir_per_packet\": {}, \"register_writes\": {}, \"register_reads\": {}, \"captured\": {}, \
             \"duplicated\": {}, \"reordered\": {}, \"faults\": {}, \"empty_steps\": {}, \"clean\": {}}}",
            json_str(match f.kind {
                FwdKind::Plain => "Forwarder::step",
                FwdKind::Mutex => "multiqueue::step (Mutex)",
            }),
            f.run.forwarded,
            f.collected_ir,
            f.model_ir,
            json_num(f.per_packet()),
            f.run.reg_writes,
            f.run.reg_reads,
            f.run.captured,
            f.run.duplicated,
            f.run.reordered,
            f.run.faults,
            f.run.empty_steps,
            f.clean()
        );
        s.push_str(if i + 1 < r.fwd.len() { ",\n" } else { "\n" });
    }
    let _ = writeln!(s, "  ],");
    let mutex_cost = if r.fwd.len() == 2 {
        json_num(r.fwd[1].per_packet() - r.fwd[0].per_packet())
    } else {
        "null".to_string()
    };
    let _ = writeln!(s, "  \"mutex_cost_ir_per_packet\": {mutex_cost}");
    s.push_str("}\n");
    s
}
