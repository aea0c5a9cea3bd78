//! The 82599 split into per-queue handles ([`Device::split`]): the queue
//! handles are the shared ones of `queue_handles.rs`; this file adds the
//! control handle and the per-queue stop they call when dropped.

use super::regs::*;
use super::IxgbeDevice;
use crate::device::{ControlHandle, Device, DeviceStats, Link, QueueHandles, QueueStats, RxHandle, TxHandle};
use crate::error::Result;
use crate::mempool::Mempool;
use crate::queue_handles::{QueueCounters, QueueRx, QueueTx};
use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a queue may take to acknowledge its disable. Linux's ixgbe
/// polls for about 100 µs on hardware; a device model on a loaded machine
/// may need far longer, and this runs only when a handle is dropped.
const STOP_TIMEOUT: Duration = Duration::from_millis(500);

/// Stops receive queue `q` for its handle's drop: RXDCTL.ENABLE cleared,
/// then polled until it reads 0 (§4.6.7.1.2). True once acknowledged.
/// (The same step as the device teardown's; one of the two can go when
/// both are merged.)
pub(super) fn stop_rx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    regs.clear_flags32(rxdctl(q), DCTL_ENABLE);
    poll_bits(regs, rxdctl(q), DCTL_ENABLE, 0, STOP_TIMEOUT)
}

/// Stops transmit queue `q`: TXDCTL.ENABLE cleared, then polled until it
/// reads 0 (§4.6.8.1.2). True once acknowledged.
pub(super) fn stop_tx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    regs.clear_flags32(txdctl(q), DCTL_ENABLE);
    poll_bits(regs, txdctl(q), DCTL_ENABLE, 0, STOP_TIMEOUT)
}

/// What is left of the device once its queues went to their handles: its
/// `Drop` is the device-wide teardown.
type Core<R> = Mutex<IxgbeDevice<R>>;

/// Splits `device` (see [`Device::split`]).
pub(super) fn split<R: RegisterAccess + 'static>(mut device: IxgbeDevice<R>) -> Result<QueueHandles> {
    let rx_queues = std::mem::take(&mut device.rx_queues);
    let tx_queues = std::mem::take(&mut device.tx_queues);
    let queues = (rx_queues.len() as u16, tx_queues.len() as u16);
    let counters: Vec<Arc<QueueCounters>> = (0..queues.0.max(queues.1))
        .map(|_| Arc::new(QueueCounters::default()))
        .collect();
    let mempools: Vec<Mempool> = rx_queues.iter().map(|q| q.mempool().clone()).collect();
    let regs = device.regs.clone();
    let spec = device.spec.clone();
    let mac = device.mac;
    let core: Arc<Core<R>> = Arc::new(Mutex::new(device));
    let rx = rx_queues
        .into_iter()
        .enumerate()
        .map(|(q, queue)| {
            Box::new(QueueRx::new(
                queue,
                q as u16,
                regs.clone(),
                counters[q].clone(),
                stop_rx_queue::<R>,
                core.clone(),
            )) as Box<dyn RxHandle>
        })
        .collect();
    let tx = tx_queues
        .into_iter()
        .enumerate()
        .map(|(q, queue)| {
            Box::new(QueueTx::new(
                queue,
                q as u16,
                regs.clone(),
                counters[q].clone(),
                stop_tx_queue::<R>,
                core.clone(),
            )) as Box<dyn TxHandle>
        })
        .collect();
    let control = Control {
        device: core,
        counters,
        mempools,
        queues,
        spec,
        mac,
    };
    Ok(QueueHandles {
        rx,
        tx,
        control: Box::new(control),
    })
}

/// The control handle: hardware counters (clear-on-read, so read and
/// accumulated here only), link, promiscuous mode; the queues' software
/// counters from the atomics their handles publish.
struct Control<R: RegisterAccess> {
    /// Locked by this handle only, never on the data path.
    device: Arc<Core<R>>,
    counters: Vec<Arc<QueueCounters>>,
    mempools: Vec<Mempool>,
    queues: (u16, u16),
    spec: String,
    mac: [u8; 6],
}

impl<R: RegisterAccess> Control<R> {
    fn device(&self) -> MutexGuard<'_, IxgbeDevice<R>> {
        // A panic while this handle held the lock left plain counters.
        self.device.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<R: RegisterAccess> ControlHandle for Control<R> {
    fn driver_name(&self) -> &'static str {
        "ixgbe"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn stats(&mut self) -> DeviceStats {
        let mut device = self.device();
        device.read_hardware_stats();
        let mut stats = device.stats;
        for c in &self.counters {
            c.add_to(&mut stats);
        }
        stats
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        let mut device = self.device();
        device.read_hardware_stats();
        (0..self.counters.len())
            .map(|q| {
                let mut s = QueueStats::new(q as u16);
                self.counters[q].fill(&mut s);
                if let Some(&(rp, rb, tp, tb)) = device.queue_hw.get(q) {
                    (s.hw_rx_packets, s.hw_rx_bytes, s.hw_tx_packets, s.hw_tx_bytes) = (rp, rb, tp, tb);
                }
                s
            })
            .collect()
    }

    fn link(&self) -> Link {
        self.device().link()
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        self.device().set_promisc(on)
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.mempools[(queue as usize).min(self.mempools.len() - 1)].clone()
    }

    fn queues(&self) -> (u16, u16) {
        self.queues
    }
}
