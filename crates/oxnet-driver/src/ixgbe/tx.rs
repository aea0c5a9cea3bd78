//! One 82599 transmit queue: ring set-up (§4.6.8). The transmit path
//! (§7.2) is the advanced-descriptor queue shared with the igb driver,
//! [`crate::advanced::TxQueue`].

use super::regs::*;
use super::TxQueue;
use crate::device::Config;
use crate::error::Result;
use crate::memory::MemoryKind;
use crate::regs::RegisterAccess;

/// Allocates the ring and programs the queue (§4.6.8: TDBAL/TDBAH, TDLEN,
/// TXDCTL thresholds, head write-back). The caller enables it.
pub(super) fn new_tx_queue<R: RegisterAccess>(
    regs: &R,
    id: u16,
    config: &Config,
    memory: MemoryKind,
) -> Result<TxQueue> {
    let queue = TxQueue::new(id, config, memory)?;
    let q = id as u32;
    let base = queue.ring_iova();
    regs.write32(tdbal(q), base as u32);
    regs.write32(tdbah(q), (base >> 32) as u32);
    regs.write32(tdlen(q), queue.ring_bytes() as u32);
    // §7.2.3.4.1 / §8.2.3.9.10: prefetch, host and write-back thresholds.
    // PTHRESH 36, HTHRESH 8, WTHRESH 4: DPDK's defaults, which ixy uses
    // too (fewer, larger descriptor fetches and write-backs over PCIe).
    let head_writeback = queue.head_writeback_iova();
    // §7.2.3.5.2: head write-back needs WTHRESH = 0 (the NIC then does
    // not write descriptors back at all, only the head).
    let wthresh = if head_writeback.is_some() { 0 } else { 4 };
    let value = regs.read32(txdctl(q)) & !(0x7F | (0x7F << 8) | (0x7F << 16));
    regs.write32(txdctl(q), value | 36 | (8 << 8) | (wthresh << 16));
    if let Some(iova) = head_writeback {
        // §8.2.3.9.11: TDWBAL holds the address (4-byte aligned) and
        // Head_WB_En in bit 0; TDWBAH the upper 32 bits.
        regs.write32(tdwbah(q), (iova >> 32) as u32);
        regs.write32(tdwbal(q), (iova as u32 & !0x3) | TDWBAL_HEAD_WB_EN);
    }
    Ok(queue)
}
