//! `oxnet fwd --queues N`: N threads, thread q forwarding queue pair q of
//! each device in both directions (receive on queue q, send on queue q),
//! pinned to core q (wrapped to the cores there are). Each receive queue
//! has its own mempool (the driver allocates one per queue), so buffers
//! stay with the core that receives into them.
//!
//! The `Device` trait takes `&mut self`, so the threads share each device
//! behind a `Mutex`: one lock per `rx_batch` / `tx_batch` call, i.e. per
//! batch, not per packet. Uncontended it costs 2.4 instructions per packet
//! at batch 32 (`oxnet bench features`: 99.7 against 97.3 for
//! `Forwarder::step`); with two threads on one device they serialise on
//! it, and on the model also on the world's lock. A split of the device
//! into per-queue handles would avoid that; it is not done yet
//! (docs/features.md).

use crate::report::summary_json;
use crate::signal;
use oxnet_driver::{Config, Device, Error, PacketBatch, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A device shared by the forwarding threads.
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

/// One direction of one queue pair: receive on `rx` queue `q`, touch one
/// byte per packet, send on `tx` queue `q`; unsent packets wait.
/// (Public for `oxnet bench features`, which measures its cost.)
pub fn step(rx: &Shared, tx: &Shared, q: u16, batch: &mut PacketBatch, batch_size: usize) -> usize {
    if batch.is_empty() {
        let n = rx.lock().expect("device lock").rx_batch(q, batch, batch_size);
        if n == 0 {
            return 0;
        }
        for packet in batch.iter_mut() {
            if packet.len() > 1 {
                packet[1] = packet[1].wrapping_add(1);
            }
        }
    }
    tx.lock().expect("device lock").tx_batch(q, batch)
}

/// What `forward` reports.
pub struct MultiQueueResult {
    /// Packets forwarded by each queue pair (both directions).
    pub per_queue: Vec<u64>,
    pub seconds: f64,
    pub json: String,
}

/// Forwards between `a` and `b` with `config.rx_queues` threads until
/// `seconds` pass (or Ctrl-C, or `stop` is set).
pub fn forward(
    a: Box<dyn Device>,
    b: Box<dyn Device>,
    config: &Config,
    seconds: Option<f64>,
    pin: bool,
) -> Result<MultiQueueResult> {
    let queues = config.rx_queues.min(config.tx_queues);
    let (a, b): (Shared, Shared) = (Arc::new(Mutex::new(a)), Arc::new(Mutex::new(b)));
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Arc<Vec<AtomicU64>> = Arc::new((0..queues).map(|_| AtomicU64::new(0)).collect());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let mut threads = Vec::new();
    for q in 0..queues {
        let (a, b, stop, counters) = (a.clone(), b.clone(), stop.clone(), counters.clone());
        let batch_size = config.batch_size;
        threads.push(std::thread::spawn(move || -> Result<()> {
            if pin {
                pin_to_core(q as usize % cores)?;
            }
            let mut a_to_b = PacketBatch::with_capacity(batch_size);
            let mut b_to_a = PacketBatch::with_capacity(batch_size);
            let mut forwarded = 0u64;
            while !stop.load(Ordering::Relaxed) {
                forwarded += step(&a, &b, q, &mut a_to_b, batch_size) as u64;
                forwarded += step(&b, &a, q, &mut b_to_a, batch_size) as u64;
                counters[q as usize].store(forwarded, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    let deadline = seconds.and_then(|s| crate::deadline_after(start, s));
    while !signal::stop_requested() && deadline.is_none_or(|d| Instant::now() < d) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join()
            .map_err(|_| Error::Io("a forwarding thread panicked".into()))??;
    }
    let seconds = start.elapsed().as_secs_f64();
    let per_queue: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let devices: Vec<(String, oxnet_driver::DeviceStats)> = [a, b]
        .iter()
        .map(|d| {
            let mut d = d.lock().expect("device lock");
            (d.spec().to_string(), d.stats())
        })
        .collect();
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
