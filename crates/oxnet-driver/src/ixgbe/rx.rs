//! One 82599 receive queue: ring set-up (§4.6.7). The receive path (§7.1)
//! is the advanced-descriptor queue shared with the igb driver,
//! [`crate::advanced::RxQueue`].

use super::regs::*;
use super::RxQueue;
use crate::device::Config;
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::regs::RegisterAccess;

/// Allocates the ring and the pool and programs the queue's registers
/// (§4.6.7: SRRCTL, RDBAL/RDBAH/RDLEN, RDH/RDT, DCA_RXCTRL). The queue is
/// enabled later by the caller.
pub(super) fn new_rx_queue<R: RegisterAccess>(
    regs: &R,
    id: u16,
    config: &Config,
    memory: MemoryKind,
    spec: &str,
) -> Result<RxQueue> {
    let queue = RxQueue::new(id, config, memory, spec, config.offloads.rss)?;
    let q = id as u32;
    // §8.2.3.8.7 SRRCTL: advanced descriptors, one buffer, buffer size in
    // KB, and DROP_EN (see `drop_when_full`).
    let bsize = queue.mempool().data_room() / 1024;
    if bsize == 0 || bsize > SRRCTL_BSIZEPACKET_MASK as usize {
        return Err(Error::Config(format!(
            "receive buffers of {} bytes cannot be used",
            bsize * 1024
        )));
    }
    let drop_en = if drop_when_full(config) { SRRCTL_DROP_EN } else { 0 };
    let value = regs.read32(srrctl(q)) & !(SRRCTL_DESCTYPE_MASK | SRRCTL_BSIZEPACKET_MASK | SRRCTL_DROP_EN);
    regs.write32(srrctl(q), value | SRRCTL_DESCTYPE_ADV_ONEBUF | bsize as u32 | drop_en);
    // §8.2.3.8.1–3: ring base and length in bytes.
    let base = queue.ring_iova();
    regs.write32(rdbal(q), base as u32);
    regs.write32(rdbah(q), (base >> 32) as u32);
    regs.write32(rdlen(q), queue.ring_bytes() as u32);
    regs.write32(rdh(q), 0);
    regs.write32(rdt(q), 0);
    // §4.6.7 / §8.2.3.11.1: bit 12 of DCA_RXCTRL is reserved, 1 at reset,
    // and must be cleared.
    regs.clear_flags32(dca_rxctrl(q), DCA_RXCTRL_RESERVED_12);
    Ok(queue)
}

/// Whether a receive queue drops frames when it has no free descriptor
/// (SRRCTL.DROP_EN, §8.2.3.8.7) instead of holding them in the packet
/// buffer. With one queue, holding is better (frames wait, then MPC
/// counts). With several queues sharing packet buffer 0, one queue whose
/// thread stalls would fill the buffer and block every other queue, so
/// each queue drops its own frames (counted per queue in QPRDC) — unless
/// flow control is on: then a full buffer must make the NIC send PAUSE
/// (§4.6.10) rather than drop. Linux's ixgbe (`ixgbe_set_rx_drop_en`)
/// follows the same rule.
pub(crate) fn drop_when_full(config: &Config) -> bool {
    config.rx_queues > 1 && !config.flow_control
}
