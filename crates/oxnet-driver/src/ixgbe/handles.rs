//! The 82599 split into per-queue handles ([`Device::split`], built by
//! `queue_handles.rs`): the per-queue stop a handle calls when dropped.

use super::IxgbeDevice;
use crate::device::QueueHandles;
use crate::queue_handles::{split_device, SplitCore};
use crate::regs::RegisterAccess;

// A queue handle's drop stops its queue with the teardown's per-queue
// steps (teardown.rs): drained, disabled, acknowledged.
use super::teardown::{stop_rx_queue, stop_tx_queue};

impl<R: RegisterAccess> SplitCore for IxgbeDevice<R> {
    fn hardware_queue_counters(&mut self) -> Vec<(u64, u64, u64, u64)> {
        self.read_hardware_stats();
        self.queue_hw.clone()
    }
}

/// Splits `device` (see [`crate::Device::split`]): its queues go to their
/// handles, the rest of it to the control handle.
pub(super) fn split<R: RegisterAccess + 'static>(mut device: IxgbeDevice<R>) -> QueueHandles {
    let rx_queues = std::mem::take(&mut device.rx_queues);
    let tx_queues = std::mem::take(&mut device.tx_queues);
    let regs = device.regs.clone();
    split_device(
        device,
        rx_queues,
        tx_queues,
        regs,
        stop_rx_queue::<R>,
        stop_tx_queue::<R>,
    )
}
