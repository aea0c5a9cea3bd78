//! Per-queue handles of a natively split device ([`crate::Device::split`]),
//! shared by the ixgbe and igb drivers (both use the advanced-descriptor
//! queues of [`crate::advanced`]).
//!
//! A handle owns its queue (ring, buffers, pool) and shares only the
//! register mapping (`Arc<R>`, `R: RegisterAccess` is `Send + Sync`: a
//! register access is one volatile load or store) and a reference that
//! keeps the rest of the device alive. Nothing on the data path is locked:
//! a queue's registers (RDT/TDT) are written by its handle only.
//!
//! Dropping a handle stops its queue first (the driver's `stop` function:
//! enable bit cleared, then polled until it reads 0, 82599 §4.6.7.1.2 /
//! §4.6.8.1.2) and frees the ring and buffers only once the NIC has
//! acknowledged; if it never does, the memory is leaked rather than handed
//! back while the NIC may still write into it. The device-wide teardown
//! runs when the last handle (the last `Arc` of the device) is gone.

use crate::advanced::{Nic, RxQueue, TxQueue};
use crate::device::{DeviceStats, QueueStats, RxHandle, TxHandle};
use crate::packet::PacketBatch;
use crate::regs::RegisterAccess;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Stops queue `q` and says whether the NIC acknowledged (enable bit read
/// back as 0): only then may its memory be freed.
pub(crate) type StopQueue<R> = fn(&R, u32) -> bool;

/// The software counters of one queue pair, published by its handles once
/// per batch (single writer each, relaxed stores) for the control handle.
#[derive(Default)]
pub(crate) struct QueueCounters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_descriptors: AtomicU64,
    rx_pool_empty: AtomicU64,
    tx_packets: AtomicU64,
    tx_ring_full: AtomicU64,
    tx_invalid: AtomicU64,
}

impl QueueCounters {
    /// Adds the device-wide software counters (as `add_queue_counters`).
    pub(crate) fn add_to(&self, stats: &mut DeviceStats) {
        stats.rx_pool_empty += self.rx_pool_empty.load(Relaxed);
        stats.tx_ring_full += self.tx_ring_full.load(Relaxed);
        stats.tx_invalid += self.tx_invalid.load(Relaxed);
    }

    /// Fills the software part of one queue's [`QueueStats`].
    pub(crate) fn fill(&self, stats: &mut QueueStats) {
        stats.rx_packets = self.rx_packets.load(Relaxed);
        stats.rx_bytes = self.rx_bytes.load(Relaxed);
        stats.rx_descriptors = self.rx_descriptors.load(Relaxed);
        stats.tx_packets = self.tx_packets.load(Relaxed);
    }
}

/// A receive queue with the registers it needs; `K` keeps the device
/// alive until the queue is stopped and freed.
pub(crate) struct QueueRx<R: RegisterAccess, N: Nic, K: Send + Sync> {
    queue: ManuallyDrop<RxQueue<N>>,
    id: u16,
    regs: Arc<R>,
    counters: Arc<QueueCounters>,
    stop: StopQueue<R>,
    _device: Arc<K>,
}

impl<R: RegisterAccess, N: Nic, K: Send + Sync> QueueRx<R, N, K> {
    pub(crate) fn new(
        queue: RxQueue<N>,
        id: u16,
        regs: Arc<R>,
        counters: Arc<QueueCounters>,
        stop: StopQueue<R>,
        device: Arc<K>,
    ) -> Self {
        let handle = QueueRx {
            queue: ManuallyDrop::new(queue),
            id,
            regs,
            counters,
            stop,
            _device: device,
        };
        handle.publish();
        handle
    }

    /// Copies the queue's software counters to the shared atomics: a
    /// handful of relaxed stores, once per batch (one writer).
    #[inline]
    fn publish(&self) {
        let s = self.queue.software_stats();
        let c = &self.counters;
        c.rx_packets.store(s.rx_packets, Relaxed);
        c.rx_bytes.store(s.rx_bytes, Relaxed);
        c.rx_descriptors.store(s.rx_descriptors, Relaxed);
        c.rx_pool_empty.store(self.queue.pool_empty_count(), Relaxed);
    }
}

impl<R: RegisterAccess, N: Nic + Send, K: Send + Sync> RxHandle for QueueRx<R, N, K> {
    fn queue(&self) -> u16 {
        self.id
    }

    #[inline]
    fn rx_batch(&mut self, batch: &mut PacketBatch, max: usize) -> usize {
        let n = self.queue.rx_batch(&*self.regs, batch, max);
        self.publish();
        n
    }
}

impl<R: RegisterAccess, N: Nic, K: Send + Sync> Drop for QueueRx<R, N, K> {
    fn drop(&mut self) {
        if (self.stop)(&self.regs, self.id as u32) {
            // SAFETY: dropped once, here; the NIC no longer uses the ring.
            unsafe { ManuallyDrop::drop(&mut self.queue) };
        } else {
            eprintln!(
                "oxnet: receive queue {} did not stop; keeping its DMA memory allocated",
                self.id
            );
        }
    }
}

/// A transmit queue with the registers it needs (see [`QueueRx`]).
pub(crate) struct QueueTx<R: RegisterAccess, N: Nic, K: Send + Sync> {
    queue: ManuallyDrop<TxQueue<N>>,
    id: u16,
    regs: Arc<R>,
    counters: Arc<QueueCounters>,
    stop: StopQueue<R>,
    /// Packets taken by this handle (the driver counts plain-path packets
    /// as descriptors; counting here avoids copying its histogram).
    packets: u64,
    _device: Arc<K>,
}

impl<R: RegisterAccess, N: Nic, K: Send + Sync> QueueTx<R, N, K> {
    pub(crate) fn new(
        queue: TxQueue<N>,
        id: u16,
        regs: Arc<R>,
        counters: Arc<QueueCounters>,
        stop: StopQueue<R>,
        device: Arc<K>,
    ) -> Self {
        let packets = queue.software_stats().tx_packets;
        let handle = QueueTx {
            queue: ManuallyDrop::new(queue),
            id,
            regs,
            counters,
            stop,
            packets,
            _device: device,
        };
        handle.publish();
        handle
    }

    /// See [`QueueRx::publish`].
    #[inline]
    fn publish(&self) {
        let c = &self.counters;
        c.tx_packets.store(self.packets, Relaxed);
        c.tx_ring_full.store(self.queue.ring_full_count(), Relaxed);
        c.tx_invalid.store(self.queue.invalid_count(), Relaxed);
    }
}

impl<R: RegisterAccess, N: Nic + Send, K: Send + Sync> TxHandle for QueueTx<R, N, K> {
    fn queue(&self) -> u16 {
        self.id
    }

    #[inline]
    fn tx_batch(&mut self, batch: &mut PacketBatch) -> usize {
        let n = self.queue.tx_batch(&*self.regs, batch);
        self.packets += n as u64;
        self.publish();
        n
    }
}

impl<R: RegisterAccess, N: Nic, K: Send + Sync> Drop for QueueTx<R, N, K> {
    fn drop(&mut self) {
        if (self.stop)(&self.regs, self.id as u32) {
            // SAFETY: dropped once, here; the NIC no longer uses the ring.
            unsafe { ManuallyDrop::drop(&mut self.queue) };
        } else {
            eprintln!(
                "oxnet: transmit queue {} did not stop; keeping its DMA memory allocated",
                self.id
            );
        }
    }
}
