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
use crate::device::{
    ControlHandle, Device, DeviceStats, Link, QueueHandles, QueueStats, RxHandle, TxHandle, TX_DESCRIPTOR_HISTOGRAM,
};
use crate::error::Result;
use crate::mempool::Mempool;
use crate::packet::PacketBatch;
use crate::regs::RegisterAccess;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

/// Stops queue `q` and says whether the NIC acknowledged (enable bit read
/// back as 0): only then may its memory be freed.
pub(crate) type StopQueue<R> = fn(&R, u32) -> bool;

/// The software counters of one queue pair, published by its handles once
/// per batch (single writer each, relaxed stores) for the control handle.
/// The transmit side publishes the plain path's descriptor count after
/// every batch, and the counters of the offload and software paths
/// (`TxQueue::slow_path_stats`: descriptors, packets, bytes, context
/// descriptors, fallbacks, copies, the descriptor histogram) only after a
/// batch that took one of those paths: the plain path pays one store.
#[derive(Default)]
pub(crate) struct QueueCounters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_descriptors: AtomicU64,
    rx_pool_empty: AtomicU64,
    tx_ring_full: AtomicU64,
    tx_invalid: AtomicU64,
    tx_plain_descriptors: AtomicU64,
    tx_slow: SlowPathCounters,
}

/// `TxQueue::slow_path_stats`, as atomics.
struct SlowPathCounters {
    descriptors: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
    context_descriptors: AtomicU64,
    software_fallback: AtomicU64,
    copied: AtomicU64,
    copy_pool_empty: AtomicU64,
    descriptors_per_packet: [AtomicU64; TX_DESCRIPTOR_HISTOGRAM],
}

impl Default for SlowPathCounters {
    fn default() -> Self {
        SlowPathCounters {
            descriptors: AtomicU64::new(0),
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            context_descriptors: AtomicU64::new(0),
            software_fallback: AtomicU64::new(0),
            copied: AtomicU64::new(0),
            copy_pool_empty: AtomicU64::new(0),
            descriptors_per_packet: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl SlowPathCounters {
    fn store(&self, s: &QueueStats) {
        self.descriptors.store(s.tx_descriptors, Relaxed);
        self.packets.store(s.tx_packets, Relaxed);
        self.bytes.store(s.tx_bytes, Relaxed);
        self.context_descriptors.store(s.tx_context_descriptors, Relaxed);
        self.software_fallback.store(s.tx_software_fallback, Relaxed);
        self.copied.store(s.tx_copied, Relaxed);
        self.copy_pool_empty.store(s.tx_copy_pool_empty, Relaxed);
        for (counter, &value) in self.descriptors_per_packet.iter().zip(&s.tx_descriptors_per_packet) {
            counter.store(value, Relaxed);
        }
    }
}

impl QueueCounters {
    /// Adds the device-wide software counters (as `add_queue_counters`).
    pub(crate) fn add_to(&self, stats: &mut DeviceStats) {
        stats.rx_pool_empty += self.rx_pool_empty.load(Relaxed);
        stats.tx_ring_full += self.tx_ring_full.load(Relaxed);
        stats.tx_invalid += self.tx_invalid.load(Relaxed);
        stats.tx_copied += self.tx_slow.copied.load(Relaxed);
        stats.tx_copy_pool_empty += self.tx_slow.copy_pool_empty.load(Relaxed);
    }

    /// Fills the software part of one queue's [`QueueStats`], as
    /// `software_queue_stats` does for an unsplit device (plain-path
    /// descriptors count as one packet and one descriptor each).
    pub(crate) fn fill(&self, stats: &mut QueueStats) {
        stats.rx_packets = self.rx_packets.load(Relaxed);
        stats.rx_bytes = self.rx_bytes.load(Relaxed);
        stats.rx_descriptors = self.rx_descriptors.load(Relaxed);
        let plain = self.tx_plain_descriptors.load(Relaxed);
        let slow = &self.tx_slow;
        stats.tx_descriptors = slow.descriptors.load(Relaxed) + plain;
        stats.tx_packets = slow.packets.load(Relaxed) + plain;
        stats.tx_bytes = slow.bytes.load(Relaxed);
        stats.tx_context_descriptors = slow.context_descriptors.load(Relaxed);
        stats.tx_software_fallback = slow.software_fallback.load(Relaxed);
        stats.tx_copied = slow.copied.load(Relaxed);
        stats.tx_copy_pool_empty = slow.copy_pool_empty.load(Relaxed);
        for (value, counter) in stats
            .tx_descriptors_per_packet
            .iter_mut()
            .zip(&slow.descriptors_per_packet)
        {
            *value = counter.load(Relaxed);
        }
        stats.tx_descriptors_per_packet[1] += plain;
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
        let mut handle = QueueTx {
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

    /// See [`QueueRx::publish`]; the slow paths' block only when a batch
    /// took one of them ([`QueueCounters`]).
    #[inline]
    fn publish(&mut self) {
        let c = &self.counters;
        c.tx_plain_descriptors.store(self.queue.plain_descriptors(), Relaxed);
        c.tx_ring_full.store(self.queue.ring_full_count(), Relaxed);
        c.tx_invalid.store(self.queue.invalid_count(), Relaxed);
        if self.queue.take_stats_changed() {
            c.tx_slow.store(self.queue.slow_path_stats());
        }
    }
}

impl<R: RegisterAccess, N: Nic + Send, K: Send + Sync> TxHandle for QueueTx<R, N, K> {
    fn queue(&self) -> u16 {
        self.id
    }

    #[inline]
    fn tx_batch(&mut self, batch: &mut PacketBatch) -> usize {
        let n = self.queue.tx_batch(&*self.regs, batch);
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

/// What a driver's device keeps after its queues went to their handles:
/// the control handle reads it (hardware counters, link, promiscuous
/// mode) through its [`Device`] methods, whose queue lists are empty by
/// then; its `Drop` is the device-wide teardown.
pub(crate) trait SplitCore: Device {
    /// The hardware per-queue counters (packets and bytes received,
    /// packets and bytes sent) accumulated so far, after reading the
    /// clear-on-read registers; empty if the driver reads none.
    fn hardware_queue_counters(&mut self) -> Vec<(u64, u64, u64, u64)> {
        Vec::new()
    }
}

/// Builds the handles of a natively split device: `core` is the device
/// with its queues taken out (`rx_queues`, `tx_queues`), `regs` its
/// registers, `stop_rx`/`stop_tx` the driver's per-queue stop.
pub(crate) fn split_device<R, N, D>(
    core: D,
    rx_queues: Vec<RxQueue<N>>,
    tx_queues: Vec<TxQueue<N>>,
    regs: Arc<R>,
    stop_rx: StopQueue<R>,
    stop_tx: StopQueue<R>,
) -> QueueHandles
where
    R: RegisterAccess + 'static,
    N: Nic + Send + 'static,
    D: SplitCore + 'static,
{
    let queues = (rx_queues.len() as u16, tx_queues.len() as u16);
    let counters: Vec<Arc<QueueCounters>> = (0..queues.0.max(queues.1))
        .map(|_| Arc::new(QueueCounters::default()))
        .collect();
    let mempools: Vec<Mempool> = rx_queues.iter().map(|q| q.mempool().clone()).collect();
    let (spec, mac, driver_name) = (core.spec().to_string(), core.mac(), core.driver_name());
    let core = Arc::new(Mutex::new(core));
    let rx = rx_queues
        .into_iter()
        .enumerate()
        .map(|(q, queue)| {
            let handle = QueueRx::new(
                queue,
                q as u16,
                regs.clone(),
                counters[q].clone(),
                stop_rx,
                core.clone(),
            );
            Box::new(handle) as Box<dyn RxHandle>
        })
        .collect();
    let tx = tx_queues
        .into_iter()
        .enumerate()
        .map(|(q, queue)| {
            let handle = QueueTx::new(
                queue,
                q as u16,
                regs.clone(),
                counters[q].clone(),
                stop_tx,
                core.clone(),
            );
            Box::new(handle) as Box<dyn TxHandle>
        })
        .collect();
    let control = Control {
        core,
        counters,
        mempools,
        queues,
        spec,
        mac,
        driver_name,
    };
    QueueHandles {
        rx,
        tx,
        control: Box::new(control),
    }
}

/// The control handle: hardware counters (clear-on-read, so read and
/// accumulated here only), link, promiscuous mode; the queues' software
/// counters from the atomics their handles publish.
struct Control<D: SplitCore> {
    /// Locked by this handle only, never on the data path.
    core: Arc<Mutex<D>>,
    counters: Vec<Arc<QueueCounters>>,
    mempools: Vec<Mempool>,
    queues: (u16, u16),
    spec: String,
    mac: [u8; 6],
    driver_name: &'static str,
}

impl<D: SplitCore> Control<D> {
    fn core(&self) -> MutexGuard<'_, D> {
        // A panic while this handle held the lock left plain counters.
        self.core.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<D: SplitCore> ControlHandle for Control<D> {
    fn driver_name(&self) -> &'static str {
        self.driver_name
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn stats(&mut self) -> DeviceStats {
        let mut stats = self.core().stats();
        for c in &self.counters {
            c.add_to(&mut stats);
        }
        stats
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        let hardware = self.core().hardware_queue_counters();
        (0..self.counters.len())
            .map(|q| {
                let mut s = QueueStats::new(q as u16);
                self.counters[q].fill(&mut s);
                if let Some(&(rp, rb, tp, tb)) = hardware.get(q) {
                    (s.hw_rx_packets, s.hw_rx_bytes, s.hw_tx_packets, s.hw_tx_bytes) = (rp, rb, tp, tb);
                }
                s
            })
            .collect()
    }

    fn link(&self) -> Link {
        self.core().link()
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        self.core().set_promisc(on)
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.mempools[(queue as usize).min(self.mempools.len() - 1)].clone()
    }

    fn queues(&self) -> (u16, u16) {
        self.queues
    }
}
