//! One 82576 receive queue: ring set-up (§4.5.8 receive initialisation).
//! The receive path (§7.1, advanced descriptors §7.1.5) is the queue
//! shared with the 82599 driver, [`crate::advanced::RxQueue`]; what is
//! particular to the 82576 there (its checksum error bits, no RSC) is in
//! [`super::Nic82576`].

use super::regs::*;
use super::RxQueue;
use crate::device::Config;
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::regs::RegisterAccess;

/// Receive descriptor thresholds (RXDCTL): prefetch 8, host 8, write-back
/// 4 — the values of Linux's igb and DPDK's e1000 driver for the 82576.
const RX_PTHRESH: u32 = 8;
const RX_HTHRESH: u32 = 8;
const RX_WTHRESH: u32 = 4;

/// Allocates the ring and the pool and programs the queue's registers
/// (§4.5.8: queue disabled while RDBAL/RDBAH/RDLEN, RDH/RDT and SRRCTL are
/// written). The caller enables the queue.
pub(super) fn new_rx_queue<R: RegisterAccess>(
    regs: &R,
    id: u16,
    config: &Config,
    memory: MemoryKind,
    spec: &str,
) -> Result<RxQueue> {
    let queue = RxQueue::new(id, config, memory, spec, super::features::rss_enabled(config))?;
    let q = id as u32;
    // Queue 0 comes out of reset enabled (RXDCTL[0].ENABLE = 1): disable
    // it before changing its ring, as the datasheet's dynamic queue
    // enabling (§4.5.8.x) and Linux's igb do.
    regs.write32(rxdctl(q), 0);
    // SRRCTL: advanced descriptors, one buffer, buffer size in KB, and
    // Drop_En (82576 §8.10.2, bit 31) under the same rule as the 82599's
    // DROP_EN: set with several queues and flow control off, so that one
    // stalled queue cannot fill the shared packet buffer for all
    // (`crate::ixgbe::rx::drop_when_full`).
    let data_room = queue.mempool().data_room();
    let bsize = data_room / 1024;
    if bsize == 0 || bsize > SRRCTL_BSIZEPACKET_MASK as usize {
        return Err(Error::Config(format!(
            "receive buffers of {data_room} bytes cannot be used"
        )));
    }
    let drop_en = if crate::ixgbe::drop_when_full(config) {
        SRRCTL_DROP_EN
    } else {
        0
    };
    let value = regs.read32(srrctl(q)) & !(SRRCTL_DESCTYPE_MASK | SRRCTL_BSIZEPACKET_MASK | SRRCTL_DROP_EN);
    regs.write32(srrctl(q), value | SRRCTL_DESCTYPE_ADV_ONEBUF | bsize as u32 | drop_en);
    // Ring base (128-byte aligned: DMA memory is page aligned) and
    // length in bytes (a multiple of 128: rings are >= 64 descriptors).
    let base = queue.ring_iova();
    regs.write32(rdbal(q), base as u32);
    regs.write32(rdbah(q), (base >> 32) as u32);
    regs.write32(rdlen(q), queue.ring_bytes() as u32);
    regs.write32(rdh(q), 0);
    regs.write32(rdt(q), 0);
    Ok(queue)
}

/// The RXDCTL value that enables a queue with our thresholds.
pub(super) fn rxdctl_enable() -> u32 {
    dctl_thresholds(RX_PTHRESH, RX_HTHRESH, RX_WTHRESH) | DCTL_ENABLE
}

#[cfg(test)]
mod tests {
    use crate::advanced::{RX_STATUS_DD, RX_STATUS_IPCS, RX_STATUS_L4CS};
    use crate::igb::Nic82576;
    use crate::packet::{FLAG_CSUM_BAD, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD};

    fn checksum_flags(status: u32) -> u32 {
        crate::advanced::checksum_flags::<Nic82576>(status)
    }

    #[test]
    fn checksum_flags_use_the_82576_error_bits() {
        assert_eq!(checksum_flags(RX_STATUS_DD), 0, "nothing checked");
        assert_eq!(
            checksum_flags(RX_STATUS_IPCS | RX_STATUS_L4CS),
            FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD
        );
        assert_eq!(
            checksum_flags(RX_STATUS_IPCS | RX_STATUS_L4CS | (1 << 29)),
            FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD,
            "L4E is bit 29 on the 82576"
        );
        assert_eq!(
            checksum_flags(RX_STATUS_IPCS | (1 << 30)),
            FLAG_IP_CSUM_BAD | FLAG_CSUM_BAD,
            "IPE is bit 30 on the 82576"
        );
        // The 82599's IPE (bit 31) means nothing here (it is RXE, a frame error).
        assert_eq!(checksum_flags(RX_STATUS_IPCS | (1 << 31)), FLAG_IP_CSUM_GOOD);
    }
}
