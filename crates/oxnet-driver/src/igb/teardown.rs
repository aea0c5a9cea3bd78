//! Teardown of an 82576: stop every DMA the device could still do before
//! the driver frees the rings and buffers. The same steps as the 82599's
//! (see `ixgbe/teardown.rs` for why each is needed):
//!
//! 1. each transmit queue: wait (bounded) until TDH == TDT, clear
//!    TXDCTL.ENABLE, poll until it reads 0; each receive queue: clear
//!    RXDCTL.ENABLE, poll until it reads 0 (82576 datasheet §4.5.9,
//!    receive and transmit queue disabling; Linux igb polls the same bits);
//! 2. receiver (RCTL.EN) and transmitter (TCTL.EN) off;
//! 3. GIO master disable: CTRL.GIO_MASTER_DISABLE, poll until
//!    STATUS.GIO_MASTER_ENABLE reads 0 (§4.5.2, before a reset);
//! 4. device reset, CTRL.RST, polled until it clears (§4.5.1);
//!    CTRL_EXT.DRV_LOAD cleared: the driver no longer owns the device;
//! 5. bus mastering off ([`RegisterAccess::disable_bus_master`]).

use super::regs::*;
use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
use std::time::Duration;

pub use crate::advanced::QUEUE_STOP_TIMEOUT;

/// Stops receive queue `q` ([`crate::advanced::stop`]). True once the
/// device acknowledged.
pub fn stop_rx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_rx(regs, rxdctl(q))
}

/// Stops transmit queue `q`: drained, then disabled. True once the
/// device acknowledged the disable.
pub fn stop_tx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_tx(regs, tdh(q), tdt(q), txdctl(q))
}

/// Stops all DMA of the device with `rx_queues` receive and `tx_queues`
/// transmit queues in use, resets it and clears bus mastering. True if
/// every step was acknowledged: the queues' memory can be freed.
pub fn stop_device<R: RegisterAccess>(regs: &R, rx_queues: u32, tx_queues: u32) -> bool {
    let mut stopped = true;
    for q in 0..tx_queues {
        stopped &= stop_tx_queue(regs, q);
    }
    for q in 0..rx_queues {
        stopped &= stop_rx_queue(regs, q);
    }
    regs.clear_flags32(RCTL, RCTL_EN);
    regs.clear_flags32(TCTL, TCTL_EN);
    regs.set_flags32(CTRL, CTRL_GIO_MASTER_DISABLE);
    // On a timeout the reset below ends outstanding requests anyway.
    let _ = poll_bits(regs, STATUS, STATUS_GIO_MASTER_ENABLE, 0, QUEUE_STOP_TIMEOUT);
    let ctrl = regs.read32(CTRL);
    regs.write32(CTRL, ctrl | CTRL_RST);
    // §8.2.1 (CTRL.RST): at least 1 ms before the next register access.
    std::thread::sleep(Duration::from_millis(2));
    stopped &= poll_bits(regs, CTRL, CTRL_RST, 0, QUEUE_STOP_TIMEOUT);
    regs.clear_flags32(CTRL_EXT, CTRL_EXT_DRV_LOAD);
    regs.disable_bus_master();
    stopped
}
