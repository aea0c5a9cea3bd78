//! One 82576 receive queue: ring set-up (§4.5.8 receive initialisation)
//! and the receive path (§7.1, advanced descriptors §7.1.5 through
//! [`crate::advanced`], the same code the 82599 driver uses).

use super::regs::*;
use crate::advanced::{
    acquire_after_status, release_before_tail, DescriptorPtr, DESCRIPTOR_SIZE, RX_STATUS_DD, RX_STATUS_EOP,
};
use crate::device::Config;
use crate::error::{Error, Result};
use crate::memory::{DmaMemory, MemoryKind};
use crate::mempool::Mempool;
use crate::packet::{Metadata, Packet, PacketBatch};
use crate::regs::RegisterAccess;
use crate::ring::RingIndex;

/// Receive descriptor thresholds (RXDCTL): prefetch 8, host 8, write-back
/// 4 — the values of Linux's igb and DPDK's e1000 driver for the 82576.
const RX_PTHRESH: u32 = 8;
const RX_HTHRESH: u32 = 8;
const RX_WTHRESH: u32 = 4;

/// A receive ring, the packet buffer behind each of its descriptors, and
/// the pool that refills it.
pub struct RxQueue {
    id: u32,
    ring: DmaMemory,
    index: RingIndex,
    /// Next descriptor to look at for DD.
    rx_index: u16,
    /// The buffer armed in each descriptor (all of them, once started).
    buffers: Vec<Packet>,
    /// Bytes a fresh buffer can take (the pool's data room).
    capacity: usize,
    /// Fresh buffers, allocated a batch at a time.
    spare: PacketBatch,
    pool: Mempool,
    pool_empty: u64,
    /// Inside a frame spread over several descriptors, dropping up to EOP.
    discarding: bool,
    discarded: u64,
}

impl RxQueue {
    /// Allocates the ring and the pool and programs the queue's registers
    /// (§4.5.8: queue disabled while RDBAL/RDBAH/RDLEN, RDH/RDT and SRRCTL
    /// are written). The caller enables the queue.
    pub(super) fn new<R: RegisterAccess>(
        regs: &R,
        id: u16,
        config: &Config,
        memory: MemoryKind,
        spec: &str,
    ) -> Result<RxQueue> {
        let size = config.rx_ring_size;
        let ring = DmaMemory::allocate(size * DESCRIPTOR_SIZE, memory)?;
        // 0xFF before the NIC may look at it (ixy credits Snabb): a
        // descriptor read too early points nowhere useful instead of to
        // physical address 0. Every descriptor is armed before start.
        // SAFETY: our own fresh allocation of at least this many bytes.
        unsafe { std::ptr::write_bytes(ring.virt(), 0xFF, size * DESCRIPTOR_SIZE) };
        let pool = Mempool::new(&format!("{spec} rx{id}"), config.effective_pool_size(), memory)?;
        let q = id as u32;
        // Queue 0 comes out of reset enabled (RXDCTL[0].ENABLE = 1): disable
        // it before changing its ring, as the datasheet's dynamic queue
        // enabling (§4.5.8.x) and Linux's igb do.
        regs.write32(rxdctl(q), 0);
        // SRRCTL: advanced descriptors, one buffer, buffer size in KB.
        // Drop_En stays 0: with no free descriptor, frames wait in the
        // packet buffer and are counted in MPC when that is full too.
        let bsize = pool.data_room() / 1024;
        if bsize == 0 || bsize > SRRCTL_BSIZEPACKET_MASK as usize {
            return Err(Error::Config(format!(
                "receive buffers of {} bytes cannot be used",
                pool.data_room()
            )));
        }
        let value = regs.read32(srrctl(q)) & !(SRRCTL_DESCTYPE_MASK | SRRCTL_BSIZEPACKET_MASK | SRRCTL_DROP_EN);
        regs.write32(srrctl(q), value | SRRCTL_DESCTYPE_ADV_ONEBUF | bsize as u32);
        // Ring base (128-byte aligned: DMA memory is page aligned) and
        // length in bytes (a multiple of 128: rings are >= 64 descriptors).
        let base = ring.iova(0);
        regs.write32(rdbal(q), base as u32);
        regs.write32(rdbah(q), (base >> 32) as u32);
        regs.write32(rdlen(q), (size * DESCRIPTOR_SIZE) as u32);
        regs.write32(rdh(q), 0);
        regs.write32(rdt(q), 0);
        Ok(RxQueue {
            id: q,
            ring,
            index: RingIndex::new(size),
            rx_index: 0,
            buffers: Vec::with_capacity(size),
            capacity: pool.data_room(),
            spare: PacketBatch::with_capacity(config.batch_size.max(64)),
            pool,
            pool_empty: 0,
            discarding: false,
            discarded: 0,
        })
    }

    /// The RXDCTL value that enables this queue with our thresholds.
    pub(super) fn rxdctl_enable() -> u32 {
        dctl_thresholds(RX_PTHRESH, RX_HTHRESH, RX_WTHRESH) | DCTL_ENABLE
    }

    /// Number of descriptors.
    pub fn ring_size(&self) -> usize {
        self.index.size()
    }

    /// The pool that refills this queue.
    pub fn mempool(&self) -> &Mempool {
        &self.pool
    }

    /// Frames dropped because they did not fit one buffer.
    pub fn discarded_count(&self) -> u64 {
        self.discarded
    }

    /// Receive calls that could not refill a descriptor (pool empty).
    pub fn pool_empty_count(&self) -> u64 {
        self.pool_empty
    }

    #[inline]
    fn descriptor(&self, i: u16) -> DescriptorPtr {
        // SAFETY: i < ring size, so the 16 bytes lie inside the ring.
        unsafe { DescriptorPtr::new(self.ring.virt().add(i as usize * DESCRIPTOR_SIZE)) }
    }

    /// Puts a buffer into every descriptor (§4.5.8: "allocate a region of
    /// memory for the receive descriptor list ... and receive buffers").
    pub(super) fn arm_all(&mut self) -> Result<()> {
        let size = self.ring_size();
        let mut batch = PacketBatch::with_capacity(size);
        if self.pool.alloc_batch(&mut batch, size) < size {
            return Err(Error::PoolExhausted {
                pool: self.pool.name().to_string(),
                size: self.pool.size(),
            });
        }
        self.buffers.clear();
        for (i, packet) in batch.drain_front(size).enumerate() {
            self.descriptor(i as u16).rx_arm(packet.data_iova());
            self.buffers.push(packet);
        }
        Ok(())
    }

    /// Receives up to `max` packets (§7.1.5: the NIC writes the descriptor
    /// back with DD set when it is done).
    #[inline]
    pub(super) fn rx_batch<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch, max: usize) -> usize {
        // Fresh buffers for the descriptors we are about to take over, one
        // pool access per batch.
        if self.spare.len() < max {
            let want = max - self.spare.len();
            self.pool.alloc_batch_for_receive(&mut self.spare, want);
        }
        batch.reserve(max);
        // Everything the loop touches lives in locals (registers): the
        // descriptor accesses are volatile, and through them the compiler
        // would otherwise reload every field of `self` per packet.
        let ring = self.ring.virt();
        let index = self.index;
        let capacity = self.capacity;
        let buffers = self.buffers.as_mut_ptr();
        let (spare, mut spare_len) = self.spare.raw_parts();
        let (out, out_start) = batch.raw_parts();
        let mut received = 0;
        let mut discarding = self.discarding;
        let mut i = self.rx_index;
        while received < max {
            // SAFETY: i < ring size, so the descriptor lies inside the ring.
            let desc = unsafe { DescriptorPtr::new(ring.add(i as usize * DESCRIPTOR_SIZE)) };
            let status = desc.rx_status();
            if status & RX_STATUS_DD == 0 {
                break;
            }
            // The NIC wrote the data and the rest of the descriptor before
            // DD; read them only now.
            acquire_after_status();
            if spare_len == 0 {
                // Pool empty: leave the frame in the ring; it is received
                // once buffers come back (the NIC counts what overflows).
                self.pool_empty += 1;
                break;
            }
            spare_len -= 1;
            // SAFETY: element spare_len < the spare batch's length; it is
            // moved out here and the batch's length is lowered below.
            let fresh = unsafe { std::ptr::read(spare.add(spare_len)) };
            let length = desc.rx_length() as usize;
            let rss_hash = desc.rx_rss_hash();
            desc.rx_arm(fresh.data_iova());
            // SAFETY: i is a ring index and every descriptor holds a buffer
            // since arm_all: swap the received one for the fresh one.
            let mut packet = unsafe { std::ptr::replace(buffers.add(i as usize), fresh) };
            i = index.next(i);
            let end_of_packet = status & RX_STATUS_EOP != 0;
            // The length comes from the device: never trust it further than
            // the buffer goes.
            if !end_of_packet || discarding || length > capacity {
                // A frame spread over several descriptors: only possible
                // with jumbo frames, which this driver does not enable
                // (RCTL.LPE = 0). Drop every piece up to and including EOP
                // rather than deliver part of a frame.
                discarding = !end_of_packet;
                if end_of_packet {
                    self.discarded += 1;
                }
                drop(packet);
                continue;
            }
            // SAFETY: length <= capacity of this fresh buffer, checked above.
            unsafe { packet.set_len_unchecked(length) };
            *packet.meta_mut() = Metadata { rss_hash, flags: 0 };
            // SAFETY: reserve(max) above, and received < max.
            unsafe { std::ptr::write(out.add(out_start + received), packet) };
            received += 1;
        }
        // SAFETY: the spare batch lost exactly the elements read above; the
        // output batch gained `received` initialised packets.
        unsafe {
            self.spare.set_len_raw(spare_len);
            batch.set_len_raw(out_start + received);
        }
        self.discarding = discarding;
        if i != self.rx_index {
            self.rx_index = i;
            // Hand the re-armed descriptors back: RDT = last one processed
            // (one behind rx_index, see IgbDevice::start_rx_queue). One MMIO
            // write per batch.
            release_before_tail();
            regs.write32(rdt(self.id), self.index.prev(i) as u32);
        }
        received
    }
}
