//! `oxnet bench mempool-inner`: mempool alloc + free per packet.
//!
//! Three measured functions, each run under callgrind with collection
//! toggled on it alone:
//! * [`measured_mempool_batch`]: `alloc_batch(n)` then `clear()` (bulk free),
//!   what a driver's receive refill and TX clean do;
//! * [`measured_mempool_single`]: `alloc()` and drop, one packet at a time;
//! * the cross-thread wall-clock variant ([`cross_thread`]) is not counted
//!   (a second thread spinning on the lock is not deterministic).

use oxnet_driver::{Error, MemoryKind, Mempool, PacketBatch, Result};
use std::hint::black_box;
use std::time::Instant;

/// Symbol of the batched measured function.
pub const BATCH_SYMBOL: &str = "measured_mempool_batch";
/// Symbol of the single-packet measured function.
pub const SINGLE_SYMBOL: &str = "measured_mempool_single";

/// Buffers in the benchmark pool (as a 512-descriptor port's pool).
const POOL_SIZE: usize = 4096;

/// Which loop to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `alloc_batch(n)` + `clear()`.
    Batch,
    /// `alloc()` + drop.
    Single,
}

/// `rounds` times: allocate `n` packets in one call, free them in bulk.
#[inline(never)]
fn measured_mempool_batch(pool: &Mempool, batch: &mut PacketBatch, n: usize, rounds: u64) -> u64 {
    let mut got = 0u64;
    for _ in 0..rounds {
        got += pool.alloc_batch(batch, n) as u64;
        black_box(&mut *batch);
        batch.clear();
    }
    got
}

/// `rounds` times: allocate one packet, drop it.
#[inline(never)]
fn measured_mempool_single(pool: &Mempool, rounds: u64) -> u64 {
    let mut got = 0u64;
    for _ in 0..rounds {
        if let Ok(packet) = pool.alloc() {
            got += 1;
            drop(black_box(packet));
        }
    }
    got
}

/// Result of one run: packets allocated and freed, wall-clock seconds.
#[derive(Debug, Clone, Copy)]
pub struct MempoolRun {
    pub packets: u64,
    pub seconds: f64,
}

impl MempoolRun {
    /// The line the inner command prints.
    pub fn to_line(&self) -> String {
        format!("oxnet-bench-mempool packets={} seconds={}", self.packets, self.seconds)
    }

    /// Parses [`MempoolRun::to_line`] out of `output`.
    pub fn parse(output: &str) -> Option<MempoolRun> {
        let line = output.lines().find(|l| l.starts_with("oxnet-bench-mempool "))?;
        let mut packets = None;
        let mut seconds = None;
        for field in line.split_whitespace().skip(1) {
            match field.split_once('=')? {
                ("packets", v) => packets = v.parse().ok(),
                ("seconds", v) => seconds = v.parse().ok(),
                _ => {}
            }
        }
        Some(MempoolRun {
            packets: packets?,
            seconds: seconds?,
        })
    }
}

/// Runs about `packets` allocations (+ frees) in `mode` with batches of `n`.
pub fn run(mode: Mode, n: usize, packets: u64) -> Result<MempoolRun> {
    if n == 0 || n > POOL_SIZE {
        return Err(Error::Config(format!("batch {n} is outside 1..={POOL_SIZE}")));
    }
    let pool = Mempool::new("bench", POOL_SIZE, MemoryKind::Plain)?;
    let mut batch = PacketBatch::with_capacity(n);
    let rounds = match mode {
        Mode::Batch => (packets / n as u64).max(1),
        Mode::Single => packets.max(1),
    };
    // Warm-up (not collected): first touches, lazy set-up.
    measured_warmup(&pool, &mut batch, n);
    let start = Instant::now();
    let got = match mode {
        Mode::Batch => measured_mempool_batch(&pool, &mut batch, n, rounds),
        Mode::Single => measured_mempool_single(&pool, rounds),
    };
    let seconds = start.elapsed().as_secs_f64();
    if pool.free_count() != POOL_SIZE {
        return Err(Error::Device(format!(
            "mempool benchmark leaked: {} of {POOL_SIZE} buffers free",
            pool.free_count()
        )));
    }
    Ok(MempoolRun { packets: got, seconds })
}

#[inline(never)]
fn measured_warmup(pool: &Mempool, batch: &mut PacketBatch, n: usize) {
    for _ in 0..64 {
        pool.alloc_batch(batch, n);
        batch.clear();
        drop(pool.alloc());
    }
}

/// Cross-thread wall clock (not deterministic, secondary): one thread
/// allocates batches of `n` and hands them over a channel to another that
/// frees them. Returns nanoseconds per packet (alloc + free + hand-over).
pub fn cross_thread(n: usize, packets: u64) -> Result<f64> {
    let pool = Mempool::new("bench-xthread", POOL_SIZE, MemoryKind::Plain)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<PacketBatch>(16);
    let freer = std::thread::spawn(move || {
        let mut freed = 0u64;
        while let Ok(mut batch) = rx.recv() {
            freed += batch.len() as u64;
            batch.clear();
        }
        freed
    });
    let start = Instant::now();
    let mut allocated = 0u64;
    while allocated < packets {
        let mut batch = PacketBatch::with_capacity(n);
        allocated += pool.alloc_batch(&mut batch, n) as u64;
        if tx.send(batch).is_err() {
            break;
        }
    }
    drop(tx);
    let freed = freer
        .join()
        .map_err(|_| Error::Device("the freeing thread panicked".into()))?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(seconds * 1e9 / freed.max(1) as f64)
}
