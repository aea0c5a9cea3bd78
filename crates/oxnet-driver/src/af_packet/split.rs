//! The native split of an `af_packet:` device ([`crate::Device::split`]):
//! each queue is its own socket with its own two rings, so a receive
//! handle owns its receive ring, a transmit handle its transmit ring, and
//! they share only the socket (`Arc`; `sendto`, `getsockopt` and
//! `setsockopt` on one descriptor from several threads are safe). No lock
//! on the data path. Counters are published once per batch into per-queue
//! atomics (single writer each, relaxed stores) for the control handle.

use super::rx::RxRing;
use super::tx::TxRing;
use super::{kick, AfPacketDevice};
use crate::device::{ControlHandle, DeviceStats, Link, QueueHandles, QueueStats, RxHandle, TxHandle};
use crate::error::Result;
use crate::mempool::Mempool;
use crate::netif;
use crate::packet::PacketBatch;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::socket::PacketSocket;

/// What the handles of one queue share.
struct Shared {
    socket: PacketSocket,
    pool: Mempool,
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_blocks: AtomicU64,
    rx_pool_empty: AtomicU64,
    rx_oversize: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    tx_ring_full: AtomicU64,
    tx_invalid: AtomicU64,
    tx_software_fallback: AtomicU64,
    kernel_drops: AtomicU64,
}

struct Rx {
    queue: u16,
    ring: RxRing,
    shared: Arc<Shared>,
}

struct Tx {
    queue: u16,
    ring: TxRing,
    shared: Arc<Shared>,
    drain_timeout: std::time::Duration,
}

struct Control {
    spec: String,
    name: String,
    mac: [u8; 6],
    promisc: bool,
    queues: Vec<Arc<Shared>>,
}

impl RxHandle for Rx {
    fn queue(&self) -> u16 {
        self.queue
    }

    #[inline]
    fn rx_batch(&mut self, batch: &mut PacketBatch, max: usize) -> usize {
        let n = self.ring.receive(&self.shared.pool, batch, max);
        let c = &self.ring.counters;
        let s = &self.shared;
        if n > 0 {
            s.rx_packets.store(c.packets, Relaxed);
            s.rx_bytes.store(c.bytes, Relaxed);
            s.rx_blocks.store(c.blocks, Relaxed);
        }
        if c.pool_empty | c.oversize != 0 {
            s.rx_pool_empty.store(c.pool_empty, Relaxed);
            s.rx_oversize.store(c.oversize, Relaxed);
        }
        n
    }

    fn poll_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.shared.socket.raw_fd())
    }
}

impl TxHandle for Tx {
    fn queue(&self) -> u16 {
        self.queue
    }

    #[inline]
    fn tx_batch(&mut self, batch: &mut PacketBatch) -> usize {
        if batch.is_empty() {
            return 0;
        }
        let before = self.ring.counters.packets;
        let taken = self.ring.fill(batch, &self.shared.pool);
        if self.ring.counters.packets != before || !batch.is_empty() {
            kick(&self.shared.socket, &mut self.ring);
        }
        let c = &self.ring.counters;
        let s = &self.shared;
        s.tx_packets.store(c.packets, Relaxed);
        s.tx_bytes.store(c.bytes, Relaxed);
        s.tx_ring_full.store(c.ring_full, Relaxed);
        s.tx_invalid.store(c.invalid, Relaxed);
        s.tx_software_fallback.store(c.software_fallback, Relaxed);
        taken
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        // As the unsplit device: let the kernel take what was posted
        // before the socket may close (bounded).
        let start = std::time::Instant::now();
        while self.ring.in_flight() > 0 && start.elapsed() < self.drain_timeout {
            kick(&self.shared.socket, &mut self.ring);
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

impl ControlHandle for Control {
    fn driver_name(&self) -> &'static str {
        "af_packet"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn stats(&mut self) -> DeviceStats {
        let mut stats = DeviceStats::default();
        for s in &self.queues {
            let drops = s.kernel_drops.load(Relaxed) + s.socket.take_drops();
            s.kernel_drops.store(drops, Relaxed);
            stats.rx_packets += s.rx_packets.load(Relaxed);
            stats.rx_bytes += s.rx_bytes.load(Relaxed);
            stats.rx_pool_empty += s.rx_pool_empty.load(Relaxed);
            stats.rx_oversize += s.rx_oversize.load(Relaxed);
            stats.tx_packets += s.tx_packets.load(Relaxed);
            stats.tx_bytes += s.tx_bytes.load(Relaxed);
            stats.tx_ring_full += s.tx_ring_full.load(Relaxed);
            stats.tx_invalid += s.tx_invalid.load(Relaxed);
            stats.kernel_rx_dropped += drops;
        }
        stats
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut q = QueueStats::new(i as u16);
                q.rx_descriptors = s.rx_blocks.load(Relaxed);
                q.rx_packets = s.rx_packets.load(Relaxed);
                q.rx_bytes = s.rx_bytes.load(Relaxed);
                q.tx_packets = s.tx_packets.load(Relaxed);
                q.tx_descriptors = q.tx_packets;
                q.tx_bytes = s.tx_bytes.load(Relaxed);
                q.tx_software_fallback = s.tx_software_fallback.load(Relaxed);
                q
            })
            .collect()
    }

    fn link(&self) -> Link {
        netif::link(&self.name)
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        if on != self.promisc {
            self.queues[0].socket.set_promisc(&self.spec, on)?;
            self.promisc = on;
        }
        Ok(())
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.queues[(queue as usize).min(self.queues.len() - 1)].pool.clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.queues.len() as u16, self.queues.len() as u16)
    }
}

/// Splits `device` into one receive and one transmit handle per queue
/// and a control handle.
pub(super) fn split(mut device: AfPacketDevice) -> QueueHandles {
    // Taken out: the emptied device's Drop has nothing left to drain.
    let queues = std::mem::take(&mut device.queues);
    let (mut rx_handles, mut tx_handles, mut shared_all) = (Vec::new(), Vec::new(), Vec::new());
    for (i, q) in queues.into_iter().enumerate() {
        let super::Queue {
            rx,
            tx,
            pool,
            kernel_drops,
            socket,
        } = q;
        let shared = Arc::new(Shared {
            socket,
            pool,
            rx_packets: AtomicU64::new(rx.counters.packets),
            rx_bytes: AtomicU64::new(rx.counters.bytes),
            rx_blocks: AtomicU64::new(rx.counters.blocks),
            rx_pool_empty: AtomicU64::new(rx.counters.pool_empty),
            rx_oversize: AtomicU64::new(rx.counters.oversize),
            tx_packets: AtomicU64::new(tx.counters.packets),
            tx_bytes: AtomicU64::new(tx.counters.bytes),
            tx_ring_full: AtomicU64::new(tx.counters.ring_full),
            tx_invalid: AtomicU64::new(tx.counters.invalid),
            tx_software_fallback: AtomicU64::new(tx.counters.software_fallback),
            kernel_drops: AtomicU64::new(kernel_drops),
        });
        rx_handles.push(Box::new(Rx {
            queue: i as u16,
            ring: rx,
            shared: shared.clone(),
        }) as Box<dyn RxHandle>);
        tx_handles.push(Box::new(Tx {
            queue: i as u16,
            ring: tx,
            shared: shared.clone(),
            drain_timeout: device.drain_timeout,
        }) as Box<dyn TxHandle>);
        shared_all.push(shared);
    }
    QueueHandles {
        rx: rx_handles,
        tx: tx_handles,
        control: Box::new(Control {
            spec: device.spec.clone(),
            name: device.name.clone(),
            mac: device.mac,
            promisc: device.promisc,
            queues: shared_all,
        }),
    }
}
