//! Teardown of an 82599: stop every DMA the device could still do before
//! the driver frees the rings and buffers it points at.
//!
//! A queue that is switched off while descriptors are in flight still
//! writes them back; a ring unmapped before that write-back lands in a page
//! the kernel may have given to someone else. So, in order:
//!
//! 1. each transmit queue: wait (bounded) until TDH == TDT, the queue has
//!    sent what it was given; then clear TXDCTL.ENABLE and poll until it
//!    reads 0 (§4.6.8.1.2 "Dynamic enabling and disabling of a TX queue");
//! 2. each receive queue: clear RXDCTL.ENABLE and poll until it reads 0
//!    (§4.6.7.1.2), then the receiver (RXCTRL.RXEN) and the transmit DMA
//!    (DMATXCTL.TE) off;
//! 3. PCIe master disable: CTRL.PCIe_Master_Disable, then poll until
//!    STATUS.PCIe_Master_Enable_Status reads 0, no request outstanding
//!    (§5.2.5.3.2, the step before a reset);
//! 4. global reset, CTRL.RST, polled until it clears (§4.6.3.2): nothing
//!    of the old configuration is left;
//! 5. bus mastering off in the PCI command register
//!    ([`RegisterAccess::disable_bus_master`]), where the handle reaches
//!    config space: from then on the device cannot reach memory at all.
//!
//! Each wait is bounded: a device that does not answer must not hang the
//! process. The functions say whether the device acknowledged; a caller
//! that was not told "stopped" should not free the memory (the driver's
//! `Drop` then leaks it rather than hand it back, see mod.rs).

use super::regs::*;
use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
use std::time::Duration;

pub use crate::advanced::QUEUE_STOP_TIMEOUT;

/// CTRL.PCIe_Master_Disable (§8.2.3.1.1, bit 2) and
/// STATUS.PCIe_Master_Enable_Status (§8.2.3.1.2, bit 19).
const CTRL_PCIE_MASTER_DISABLE: u32 = 1 << 2;
const STATUS: u32 = 0x00008;
const STATUS_PCIE_MASTER_ENABLE: u32 = 1 << 19;

/// Stops receive queue `q` (§4.6.7.1.2, [`crate::advanced::stop`]). True
/// once the device acknowledged.
pub fn stop_rx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_rx(regs, rxdctl(q))
}

/// Stops transmit queue `q` (§4.6.8.1.2): drained, then disabled. True
/// once the device acknowledged the disable.
pub fn stop_tx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_tx(regs, tdh(q), tdt(q), txdctl(q))
}

/// Stops all DMA of the device with `rx_queues` receive and `tx_queues`
/// transmit queues in use, resets it, and clears bus mastering (steps 1–5
/// above). True if every step was acknowledged: the memory the queues used
/// can be freed.
pub fn stop_device<R: RegisterAccess>(regs: &R, rx_queues: u32, tx_queues: u32) -> bool {
    let mut stopped = true;
    for q in 0..tx_queues {
        stopped &= stop_tx_queue(regs, q);
    }
    for q in 0..rx_queues {
        stopped &= stop_rx_queue(regs, q);
    }
    regs.clear_flags32(RXCTRL, RXCTRL_RXEN);
    regs.clear_flags32(DMATXCTL, DMATXCTL_TE);
    regs.set_flags32(CTRL, CTRL_PCIE_MASTER_DISABLE);
    // On a timeout the reset below ends outstanding requests anyway.
    let _ = poll_bits(regs, STATUS, STATUS_PCIE_MASTER_ENABLE, 0, QUEUE_STOP_TIMEOUT);
    regs.write32(CTRL, CTRL_RST_MASK);
    // §8.2.3.1.1: at least 1 ms before the next access after RST.
    std::thread::sleep(Duration::from_millis(1));
    stopped &= poll_bits(regs, CTRL, CTRL_RST_MASK, 0, QUEUE_STOP_TIMEOUT);
    regs.disable_bus_master();
    stopped
}
