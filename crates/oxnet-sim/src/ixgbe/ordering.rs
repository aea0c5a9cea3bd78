//! The ordering protocol between driver and device, checked.
//!
//! A driver writes descriptors into host memory and then the tail register
//! (RDT/TDT); a real device may fetch them the moment it sees the tail, so
//! a write barrier must come between the two (`release_before_tail`). The
//! device writes a descriptor's data first and its status (DD, or the
//! head write-back) last; a driver that saw the status must not read the
//! rest, or reuse the slot, before a read barrier (`acquire_after_status`).
//! On x86-64 both barriers are compiler barriers and a missing one rarely
//! shows; on arm64 it corrupts packets. So the model checks the protocol
//! at each tail write, for the descriptors that write hands over:
//!
//! 1. a write barrier came after the previous tail write of the queue;
//! 2. none of them changed after the last write barrier (the model keeps a
//!    copy of each ring as it was at the barrier);
//! 3. the device's last completion of each of them (its write-back) came
//!    before the driver's last read barrier.
//!
//! A violation is a fault. The model's bookkeeping: a count of write
//! barriers, and a count of completions with, per slot, the count at which
//! the slot was last completed (one counter per port: a barrier orders
//! all of a CPU's accesses, not one queue's).

use super::Ixgbe;
use crate::dma;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Descriptor size of the 82599's advanced descriptors (§7.1.6, §7.2.3.2).
const DESCRIPTOR_SIZE: usize = 16;
/// Descriptors copied at a write barrier, from the queue's tail on: the
/// ones the next tail write can hand over (a batch is at most 256 packets;
/// descriptors beyond the window are not compared). Copying whole rings of
/// 4096 at every barrier made the model too slow for batch 1.
const WINDOW: usize = 512;

/// One ring's side of the protocol.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handover {
    /// The port's barrier count at this queue's last tail write.
    releases_at_tail: u64,
    /// Descriptors from slot `snapshot_from` on, as they were at the last
    /// write barrier; empty: no barrier since the ring was set up.
    snapshot: Vec<u8>,
    snapshot_from: usize,
    /// Per slot: the port's completion count when the device last wrote it back.
    completed_at: Vec<u64>,
}

/// The port's barrier counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Barriers {
    releases: u64,
    /// Shared with the port's `SimRegisters`: a read barrier (once per
    /// received packet) only copies one counter, without the world's lock.
    pub reads: Arc<ReadSide>,
}

/// The read side's counters.
#[derive(Debug, Default)]
pub struct ReadSide {
    completions: AtomicU64,
    /// `completions` at the driver's last read barrier.
    acquired: AtomicU64,
}

impl ReadSide {
    /// The driver's read barrier: every completion so far is now ordered
    /// before its later accesses. A completion is counted before its DD is
    /// written, so one the driver has seen is always included.
    pub fn acquire(&self) {
        let now = self.completions.load(Ordering::SeqCst);
        self.acquired.fetch_max(now, Ordering::SeqCst);
    }
}

/// A ring as the queue's registers describe it: base IOVA and length in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ring {
    pub base: u64,
    pub bytes: u32,
}

impl Ring {
    fn size(self) -> usize {
        self.bytes as usize / DESCRIPTOR_SIZE
    }
}

/// The driver's write barrier: count it and copy every ring that is set
/// up (RDLEN/TDLEN not 0).
pub(crate) fn release(nic: &mut Ixgbe) {
    nic.barriers.releases += 1;
    for q in 0..nic.rx.len() {
        let (ring, tail) = (nic.rx[q].ring(), nic.rx[q].rdt);
        snapshot(&mut nic.rx[q].handover, ring, tail as usize);
    }
    for q in 0..nic.tx.len() {
        let (ring, tail) = (nic.tx[q].ring(), nic.tx[q].tdt);
        snapshot(&mut nic.tx[q].handover, ring, tail as usize);
    }
}

/// Copies up to [`WINDOW`] descriptors of `ring` from slot `from` on
/// (wrapping around the end).
fn snapshot(handover: &mut Handover, ring: Ring, from: usize) {
    handover.snapshot.clear();
    let size = ring.size();
    if size == 0 || from >= size {
        return;
    }
    let Ok(ptr) = dma::map(ring.base, size * DESCRIPTOR_SIZE, "a descriptor ring") else {
        return;
    };
    handover.snapshot_from = from;
    let count = size.min(WINDOW);
    let first = count.min(size - from);
    // SAFETY: both runs lie inside the ring mapped above (valid under dma::hold).
    unsafe {
        dma::copy_from(
            ptr.add(from * DESCRIPTOR_SIZE),
            first * DESCRIPTOR_SIZE,
            &mut handover.snapshot,
        );
        dma::copy_from(ptr, (count - first) * DESCRIPTOR_SIZE, &mut handover.snapshot);
    }
}

/// The device wrote slot `slot` back (DD, or the head past it).
pub(crate) fn completed(barriers: &Barriers, handover: &mut Handover, ring: Ring, slot: usize) {
    let count = barriers.reads.completions.fetch_add(1, Ordering::SeqCst) + 1;
    if handover.completed_at.len() != ring.size() {
        handover.completed_at = vec![0; ring.size()];
    }
    if let Some(at) = handover.completed_at.get_mut(slot) {
        *at = count;
    }
}

/// Checks a tail write that moves the tail from `old` to `new`: the slots
/// `old..new` (in ring order) go to the device. `tail`: "RDT" or "TDT".
pub(crate) fn check_handover(
    barriers: &Barriers,
    handover: &mut Handover,
    ring: Ring,
    old: u32,
    new: u32,
    tail: &str,
) -> Result<(), String> {
    let size = ring.size();
    if old == new || size == 0 || old as usize >= size || new as usize >= size {
        return Ok(()); // nothing handed over, or a ring the data path reports
    }
    let slots = (old as usize..)
        .take((new as usize + size - old as usize) % size)
        .map(|i| i % size);
    let first_last = format!("descriptors {old}..{new}");
    if barriers.releases == handover.releases_at_tail {
        return Err(format!(
            "{tail} write hands over {first_last} with no write barrier (release_before_tail) \
             since the previous {tail} write: the device may fetch them before they are written"
        ));
    }
    handover.releases_at_tail = barriers.releases;
    if handover.snapshot.is_empty() {
        return Err(format!(
            "{tail} write hands over {first_last} with no write barrier (release_before_tail) \
             since the ring was set up"
        ));
    }
    let ptr = dma::map(ring.base, size * DESCRIPTOR_SIZE, "a descriptor ring")?;
    for i in slots.clone() {
        let at = (i + size - handover.snapshot_from) % size * DESCRIPTOR_SIZE;
        let Some(then) = handover.snapshot.get(at..at + DESCRIPTOR_SIZE) else {
            continue; // beyond the window copied at the barrier
        };
        // SAFETY: slot i lies inside the ring mapped above.
        let now = unsafe { std::slice::from_raw_parts(ptr.add(i * DESCRIPTOR_SIZE), DESCRIPTOR_SIZE) };
        if now != then {
            return Err(format!(
                "{tail} write hands over descriptor {i}, written after the last write barrier \
                 (release_before_tail must come after the last descriptor write)"
            ));
        }
    }
    for i in slots {
        let at = handover.completed_at.get(i).copied().unwrap_or(0);
        if at > barriers.reads.acquired.load(Ordering::SeqCst) {
            return Err(format!(
                "{tail} write hands over descriptor {i}, which the device wrote back with no read \
                 barrier (acquire_after_status) in the driver since"
            ));
        }
    }
    Ok(())
}
