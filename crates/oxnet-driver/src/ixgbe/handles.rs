//! The 82599 split into per-queue handles ([`Device::split`], built by
//! `queue_handles.rs`): the per-queue stop a handle calls when dropped.

use super::regs::*;
use super::IxgbeDevice;
use crate::device::QueueHandles;
use crate::queue_handles::{split_device, SplitCore};
use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
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
