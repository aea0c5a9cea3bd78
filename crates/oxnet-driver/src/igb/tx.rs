//! One 82576 transmit queue: ring set-up (§4.5.9 transmit initialisation).
//! The transmit path (§7.2) with its offload switches (checksum insertion,
//! TSO, head write-back) is the queue shared with the 82599 driver,
//! [`crate::advanced::TxQueue`]: the 82576 uses the same advanced context
//! and data descriptors (82576 datasheet §7.2.2.2 and §7.2.2.3); only
//! register names, thresholds and limits differ ([`super::Nic82576`]).

use super::regs::*;
use super::TxQueue;
use crate::device::Config;
use crate::error::Result;
use crate::memory::MemoryKind;
use crate::regs::RegisterAccess;

/// Transmit descriptor thresholds (TXDCTL): prefetch 8, host 1, write-back
/// 16 — the values of Linux's igb and DPDK's e1000 driver for the 82576.
/// Write-back 16 is below TX_CLEAN_BATCH, so a batch's last DD comes.
const TX_PTHRESH: u32 = 8;
const TX_HTHRESH: u32 = 1;
const TX_WTHRESH: u32 = 16;

/// Allocates the ring and programs the queue (§4.5.9: queue disabled while
/// TDBAL/TDBAH/TDLEN, TDH/TDT and the head write-back address are
/// written). The caller enables it with [`txdctl_enable`].
pub(super) fn new_tx_queue<R: RegisterAccess>(
    regs: &R,
    id: u16,
    config: &Config,
    memory: MemoryKind,
) -> Result<TxQueue> {
    let queue = TxQueue::new(id, config, memory)?;
    let q = id as u32;
    // Queue 0 comes out of reset enabled: disable it first.
    regs.write32(txdctl(q), 0);
    let base = queue.ring_iova();
    regs.write32(tdbal(q), base as u32);
    regs.write32(tdbah(q), (base >> 32) as u32);
    regs.write32(tdlen(q), queue.ring_bytes() as u32);
    regs.write32(tdh(q), 0);
    regs.write32(tdt(q), 0);
    if let Some(iova) = queue.head_writeback_iova() {
        // §8.12 TDWBAL/TDWBAH: the address (4-byte aligned) with
        // Head_WB_En in bit 0; the NIC writes TDH there after each
        // descriptor with RS, instead of writing DD into the descriptor.
        regs.write32(tdwbah(q), (iova >> 32) as u32);
        regs.write32(tdwbal(q), (iova as u32 & !0x3) | TDWBAL_HEAD_WB_EN);
    } else {
        regs.write32(tdwbal(q), 0);
        regs.write32(tdwbah(q), 0);
    }
    Ok(queue)
}

/// The TXDCTL value that enables `queue` with our thresholds. With head
/// write-back, WTHRESH = 0 as the 82599 requires (§7.2.3.5.2 of its
/// datasheet): descriptors are then reported one by one; harmless on the
/// 82576, and QEMU's model ignores WTHRESH anyway.
pub(super) fn txdctl_enable(queue: &TxQueue) -> u32 {
    let wthresh = if queue.head_writeback_iova().is_some() {
        0
    } else {
        TX_WTHRESH
    };
    dctl_thresholds(TX_PTHRESH, TX_HTHRESH, wthresh) | DCTL_ENABLE
}
