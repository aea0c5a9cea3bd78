//! `oxnet fwd --queues N`: N threads, thread q forwarding queue pair q of
//! each device in both directions (receive on queue q, send on queue q),
//! pinned to core q (wrapped to the cores there are). Each receive queue
//! has its own mempool (the driver allocates one per queue), so buffers
//! stay with the core that receives into them.
//!
//! Each device is split into per-queue handles ([`Device::split`]): a
//! thread owns the receive and transmit handles of its queue pair and
//! takes no lock on ixgbe and igb (VirtIO and vhost-user fall back to one
//! lock per batch, `oxnet_driver::split_locked`). A panic in one thread is
//! reported as an error naming its queue; the other threads do not share
//! anything it could have left half-done, and are stopped cleanly.

use crate::report::summary_json;
use crate::signal;
use oxnet_driver::{Config, Device, Error, PacketBatch, QueueHandles, QueueStats, Result, RxHandle, TxHandle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A device shared behind one lock: how `fwd --queues` worked before the
/// queue handles; kept for `oxnet bench features`, which measures what
/// the lock costs ([`step`]).
pub type Shared = Arc<Mutex<Box<dyn Device>>>;

/// Pins the calling thread to `core` (sched_setaffinity).
pub fn pin_to_core(core: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; sched_setaffinity reads size_of::<cpu_set_t>() bytes.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(Error::Io(format!(
            "pinning a thread to core {core}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// One direction of one queue pair on split handles: receive on `rx`,
/// touch one byte per packet, send on `tx`; unsent packets wait.
pub fn step_handles(rx: &mut dyn RxHandle, tx: &mut dyn TxHandle, batch: &mut PacketBatch, batch_size: usize) -> usize {
    if batch.is_empty() {
        if rx.rx_batch(batch, batch_size) == 0 {
            return 0;
        }
        for packet in batch.iter_mut() {
            if packet.len() > 1 {
                packet[1] = packet[1].wrapping_add(1);
            }
        }
    }
    tx.tx_batch(batch)
}

/// [`step_handles`] on devices behind one lock ([`Shared`]): receive on
/// `rx` queue `q`, send on `tx` queue `q`. (For `oxnet bench features`,
/// which measures the lock's cost.)
pub fn step(rx: &Shared, tx: &Shared, q: u16, batch: &mut PacketBatch, batch_size: usize) -> usize {
    if batch.is_empty() {
        let n = rx
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .rx_batch(q, batch, batch_size);
        if n == 0 {
            return 0;
        }
        for packet in batch.iter_mut() {
            if packet.len() > 1 {
                packet[1] = packet[1].wrapping_add(1);
            }
        }
    }
    tx.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .tx_batch(q, batch)
}

/// What `forward` reports.
pub struct MultiQueueResult {
    /// Packets forwarded by each queue pair (both directions).
    pub per_queue: Vec<u64>,
    /// Per-queue counters of each device (spec, counters), read from its
    /// control handle after the threads were joined.
    pub queue_stats: Vec<(String, Vec<QueueStats>)>,
    pub seconds: f64,
    pub json: String,
}

/// The handles of queue pair `q` of both devices, for one thread.
struct Pair {
    a_rx: Box<dyn RxHandle>,
    a_tx: Box<dyn TxHandle>,
    b_rx: Box<dyn RxHandle>,
    b_tx: Box<dyn TxHandle>,
}

/// Takes the handles of the first `queues` queue pairs out of `a` and `b`
/// (the rest stay, unused, in the vectors).
fn pairs(a: &mut QueueHandles, b: &mut QueueHandles, queues: u16) -> Vec<Pair> {
    let n = queues as usize;
    let mut a_rx = a.rx.drain(..n);
    let mut a_tx = a.tx.drain(..n);
    let mut b_rx = b.rx.drain(..n);
    let mut b_tx = b.tx.drain(..n);
    (0..n)
        .filter_map(|_| {
            Some(Pair {
                a_rx: a_rx.next()?,
                a_tx: a_tx.next()?,
                b_rx: b_rx.next()?,
                b_tx: b_tx.next()?,
            })
        })
        .collect()
}

/// What a panic carried, for the error message.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Forwards between `a` and `b` with `config.rx_queues` threads until
/// `seconds` pass (or Ctrl-C, or a thread ends early: an error or a panic,
/// reported as an error).
pub fn forward(
    a: Box<dyn Device>,
    b: Box<dyn Device>,
    config: &Config,
    seconds: Option<f64>,
    pin: bool,
) -> Result<MultiQueueResult> {
    let queues = config.rx_queues.min(config.tx_queues);
    // Checked here (not only by the command line): a negative, NaN or
    // huge duration is an error, never a panic.
    let duration = match seconds {
        Some(s) => Some(
            Duration::try_from_secs_f64(s)
                .map_err(|_| Error::Config(format!("--seconds {s}: not a duration (a number of seconds >= 0)")))?,
        ),
        None => None,
    };
    let (mut a, mut b) = (a.split()?, b.split()?);
    for (handles, what) in [(&a, "first"), (&b, "second")] {
        if handles.rx.len() < queues as usize || handles.tx.len() < queues as usize {
            return Err(Error::Config(format!(
                "the {what} device ({}) has {} rx / {} tx queues, {queues} pairs asked for",
                handles.control.spec(),
                handles.rx.len(),
                handles.tx.len()
            )));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Arc<Vec<AtomicU64>> = Arc::new((0..queues).map(|_| AtomicU64::new(0)).collect());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    // A duration too long to add is as good as no deadline.
    let deadline = duration.and_then(|d| start.checked_add(d));
    let mut threads = Vec::new();
    for (q, mut pair) in pairs(&mut a, &mut b, queues).into_iter().enumerate() {
        let (stop, counters) = (stop.clone(), counters.clone());
        let batch_size = config.batch_size;
        let thread = std::thread::Builder::new()
            .name(format!("fwd-q{q}"))
            .spawn(move || -> Result<()> {
                if pin {
                    pin_to_core(q % cores)?;
                }
                let mut a_to_b = PacketBatch::with_capacity(batch_size);
                let mut b_to_a = PacketBatch::with_capacity(batch_size);
                let mut forwarded = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    forwarded += step_handles(&mut *pair.a_rx, &mut *pair.b_tx, &mut a_to_b, batch_size) as u64;
                    forwarded += step_handles(&mut *pair.b_rx, &mut *pair.a_tx, &mut b_to_a, batch_size) as u64;
                    counters[q].store(forwarded, Ordering::Relaxed);
                }
                Ok(())
            })
            .map_err(|e| Error::Io(format!("starting forwarding thread {q}: {e}")))?;
        threads.push(thread);
    }
    while !signal::stop_requested()
        && deadline.is_none_or(|d| Instant::now() < d)
        && !threads.iter().any(|t| t.is_finished())
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for (q, t) in threads.into_iter().enumerate() {
        let outcome = match t.join() {
            Ok(result) => result,
            Err(payload) => Err(Error::Io(format!(
                "forwarding thread of queue pair {q} panicked: {}",
                panic_message(&*payload)
            ))),
        };
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let seconds = start.elapsed().as_secs_f64();
    let per_queue: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let mut devices = Vec::new();
    let mut queue_stats = Vec::new();
    for control in [&mut a.control, &mut b.control] {
        devices.push((control.spec().to_string(), control.stats()));
        queue_stats.push((control.spec().to_string(), control.queue_stats()));
    }
    let extra = [
        ("queues", queues.to_string()),
        ("forwarded", per_queue.iter().sum::<u64>().to_string()),
        (
            "forwarded_per_queue",
            format!(
                "[{}]",
                per_queue.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            ),
        ),
    ];
    let json = summary_json(&devices, seconds, &extra);
    Ok(MultiQueueResult {
        per_queue,
        queue_stats,
        seconds,
        json,
    })
}

/// `oxnet fwd --queues N`: opens both devices, forwards, prints the
/// per-queue counts (and, with `--json`, one JSON object as the last line).
pub fn main(spec_a: &str, spec_b: &str, config: &Config, options: &crate::commands::RunOptions) -> Result<bool> {
    signal::install();
    let a = crate::commands::open(spec_a, config)?;
    let b = crate::commands::open(spec_b, config)?;
    eprintln!(
        "[{spec_a}] [{spec_b}] ready: {} queue pairs, one thread each",
        config.rx_queues
    );
    let result = forward(a, b, config, options.seconds, true)?;
    for (q, n) in result.per_queue.iter().enumerate() {
        eprintln!(
            "queue {q}: forwarded {n} ({:.2} Mpps)",
            *n as f64 / result.seconds / 1e6
        );
    }
    if options.json {
        println!("{}", result.json);
    }
    Ok(true)
}
