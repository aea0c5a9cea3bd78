//! Stopping one queue, the step both teardowns (`ixgbe/teardown.rs`,
//! `igb/teardown.rs`) and a dropped queue handle share: the 82599 and the
//! 82576 have the same RXDCTL/TXDCTL.ENABLE bit (25) and the same
//! TDH/TDT meaning; only the register offsets differ, and the driver
//! passes its own.

use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
use std::time::Duration;

/// RXDCTL/TXDCTL.ENABLE (82599 §8.2.3.8.6 / §8.2.3.9.10; 82576 §8.10.x,
/// the same bit).
const DCTL_ENABLE: u32 = 1 << 25;

/// How long a queue may take to drain or to acknowledge a disable.
/// Linux's ixgbe polls RXDCTL for at most 10 × 10 µs on hardware; the
/// model's DMA engine runs on a thread that a loaded machine may not
/// schedule for a while, and QEMU's igb runs under TCG, so we allow far
/// more.
pub const QUEUE_STOP_TIMEOUT: Duration = Duration::from_millis(500);

/// Stops a receive queue: ENABLE cleared in its RXDCTL (at offset
/// `rxdctl`) and read back as 0 (82599 §4.6.7.1.2, 82576 §4.5.9). True
/// once the device acknowledged.
pub fn stop_rx<R: RegisterAccess>(regs: &R, rxdctl: u32) -> bool {
    regs.clear_flags32(rxdctl, DCTL_ENABLE);
    poll_bits(regs, rxdctl, DCTL_ENABLE, 0, QUEUE_STOP_TIMEOUT)
}

/// Stops a transmit queue (82599 §4.6.8.1.2, 82576 §4.5.9): waits until
/// TDH == TDT (what was handed over is sent; bounded: a queue the link
/// partner pauses may never get there), then clears TXDCTL.ENABLE and
/// waits until it reads 0. True once the device acknowledged the disable.
pub fn stop_tx<R: RegisterAccess>(regs: &R, tdh: u32, tdt: u32, txdctl: u32) -> bool {
    let tail = regs.read32(tdt);
    let _drained = poll_bits(regs, tdh, u32::MAX, tail, QUEUE_STOP_TIMEOUT);
    regs.clear_flags32(txdctl, DCTL_ENABLE);
    poll_bits(regs, txdctl, DCTL_ENABLE, 0, QUEUE_STOP_TIMEOUT)
}
