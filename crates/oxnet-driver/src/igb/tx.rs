//! One 82576 transmit queue: ring set-up (§4.5.9 transmit initialisation)
//! and the transmit path (§7.2, advanced data descriptor §7.2.2.3 through
//! [`crate::advanced`], the same code the 82599 driver uses).

use super::regs::*;
use crate::advanced::{
    release_before_tail, DescriptorPtr, DESCRIPTOR_SIZE, TX_DCMD_EOP, TX_DCMD_IFCS, TX_DCMD_RS, TX_STATUS_DD,
};
use crate::device::Config;
use crate::error::Result;
use crate::memory::{DmaMemory, MemoryKind};
use crate::packet::{free_ring_run, Packet, PacketBatch};
use crate::regs::RegisterAccess;
use crate::ring::RingIndex;
use std::mem::MaybeUninit;

/// Descriptors cleaned at once: we check DD of the last descriptor of a
/// batch of this many and free all of them together (ixy's TX_CLEAN_BATCH;
/// cleaning one at a time costs a cache miss per packet).
pub const TX_CLEAN_BATCH: u16 = 32;

/// Largest frame one data descriptor can carry: DTALEN is 16 bits. Without
/// jumbo frames the MAC sends at most 1518 (+ VLAN) bytes; we refuse what
/// no buffer can hold anyway.
const MAX_FRAME: usize = 16 * 1024 - 1;

/// Transmit descriptor thresholds (TXDCTL): prefetch 8, host 1, write-back
/// 16 — the values of Linux's igb and DPDK's e1000 driver for the 82576.
/// Write-back 16 is below TX_CLEAN_BATCH, so a batch's last DD comes.
const TX_PTHRESH: u32 = 8;
const TX_HTHRESH: u32 = 1;
const TX_WTHRESH: u32 = 16;

/// A transmit ring and the packets in flight on it.
pub struct TxQueue {
    id: u32,
    ring: DmaMemory,
    index: RingIndex,
    /// Next free descriptor.
    tx_index: u16,
    /// Oldest descriptor not yet cleaned.
    clean_index: u16,
    /// The packet behind each descriptor in flight: the slots from
    /// `clean_index` up to `tx_index` are initialised, the others are not.
    packets: Box<[MaybeUninit<Packet>]>,
    ring_full: u64,
    invalid: u64,
}

impl TxQueue {
    /// Allocates the ring and programs the queue (§4.5.9: queue disabled
    /// while TDBAL/TDBAH/TDLEN and TDH/TDT are written). The caller enables
    /// it.
    pub(super) fn new<R: RegisterAccess>(regs: &R, id: u16, config: &Config, memory: MemoryKind) -> Result<TxQueue> {
        let size = config.tx_ring_size;
        let ring = DmaMemory::allocate(size * DESCRIPTOR_SIZE, memory)?;
        // SAFETY: our own allocation (see RxQueue::new for the 0xFF trick).
        unsafe { std::ptr::write_bytes(ring.virt(), 0xFF, size * DESCRIPTOR_SIZE) };
        let q = id as u32;
        // Queue 0 comes out of reset enabled: disable it first.
        regs.write32(txdctl(q), 0);
        let base = ring.iova(0);
        regs.write32(tdbal(q), base as u32);
        regs.write32(tdbah(q), (base >> 32) as u32);
        regs.write32(tdlen(q), (size * DESCRIPTOR_SIZE) as u32);
        regs.write32(tdh(q), 0);
        regs.write32(tdt(q), 0);
        Ok(TxQueue {
            id: q,
            ring,
            index: RingIndex::new(size),
            tx_index: 0,
            clean_index: 0,
            packets: (0..size).map(|_| MaybeUninit::uninit()).collect(),
            ring_full: 0,
            invalid: 0,
        })
    }

    /// The TXDCTL value that enables this queue with our thresholds.
    pub(super) fn txdctl_enable() -> u32 {
        dctl_thresholds(TX_PTHRESH, TX_HTHRESH, TX_WTHRESH) | DCTL_ENABLE
    }

    /// Packets that found the ring full and stayed with the caller.
    pub fn ring_full_count(&self) -> u64 {
        self.ring_full
    }

    /// Packets dropped because they could not be sent.
    pub fn invalid_count(&self) -> u64 {
        self.invalid
    }

    #[inline]
    fn descriptor(&self, i: u16) -> DescriptorPtr {
        // SAFETY: i < ring size, so the 16 bytes lie inside the ring.
        unsafe { DescriptorPtr::new(self.ring.virt().add(i as usize * DESCRIPTOR_SIZE)) }
    }

    /// Frees the packets of finished descriptors, [`TX_CLEAN_BATCH`] at a
    /// time: RS is set on every descriptor, so when the last one of a batch
    /// has DD, all before it are done too (descriptors complete in order).
    #[inline]
    fn clean(&mut self) {
        loop {
            let in_flight = self.index.distance(self.clean_index, self.tx_index);
            if in_flight < TX_CLEAN_BATCH {
                break;
            }
            let last = self.index.add(self.clean_index, TX_CLEAN_BATCH - 1);
            if self.descriptor(last).tx_status() & TX_STATUS_DD == 0 {
                break;
            }
            // clean_index is a multiple of TX_CLEAN_BATCH and the ring size
            // a multiple too, so the run never wraps around the ring.
            let start = self.clean_index as usize;
            let run = &self.packets[start..start + TX_CLEAN_BATCH as usize];
            // SAFETY: the run lies between clean_index and tx_index, so every
            // slot is initialised; advancing clean_index below gives them up.
            unsafe { free_ring_run(run) };
            self.clean_index = self.index.add(self.clean_index, TX_CLEAN_BATCH);
        }
    }

    /// Sends packets from the front of `batch`; the ones that do not fit
    /// stay there.
    #[inline]
    pub(super) fn tx_batch<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch) -> usize {
        self.clean();
        // One descriptor always stays unused: tx_index == clean_index means
        // "empty", so a full ring holds size - 1 packets.
        let in_flight = self.index.distance(self.clean_index, self.tx_index) as usize;
        let free = self.index.size() - 1 - in_flight;
        let n = batch.len().min(free);
        if n < batch.len() {
            self.ring_full += (batch.len() - n) as u64;
        }
        let mut i = self.tx_index;
        let index = self.index;
        let ring = self.ring.virt();
        let packets = &mut self.packets;
        let mut invalid = 0;
        batch.consume_front(n, |packet| {
            let len = packet.len();
            if len == 0 || len > MAX_FRAME {
                invalid += 1;
                return;
            }
            // SAFETY: i < ring size, so the descriptor lies inside the ring.
            let desc = unsafe { DescriptorPtr::new(ring.add(i as usize * DESCRIPTOR_SIZE)) };
            // §7.2.2.3: one advanced data descriptor per packet: end of
            // packet, report status, insert the CRC.
            desc.tx_data(packet.data_iova(), len as u16, TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS);
            // SAFETY: i is a ring index; the slot is outside the initialised
            // run (cleaned or never used), so nothing is overwritten.
            unsafe { packets.get_unchecked_mut(i as usize).write(packet) };
            i = index.next(i);
        });
        self.invalid += invalid;
        if i != self.tx_index {
            self.tx_index = i;
            // One tail write per batch.
            release_before_tail();
            regs.write32(tdt(self.id), i as u32);
        }
        n
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        // The packets still in flight go back to their pools.
        let mut i = self.clean_index;
        while i != self.tx_index {
            // SAFETY: slots from clean_index to tx_index are initialised;
            // each is read once.
            drop(unsafe { self.packets[i as usize].assume_init_read() });
            i = self.index.next(i);
        }
    }
}
