//! One 82576 receive queue: ring set-up (§4.5.8 receive initialisation)
//! and the receive path (§7.1, advanced descriptors §7.1.5 through
//! [`crate::advanced`], the same code the 82599 driver uses).

use super::regs::*;
use crate::advanced::{
    acquire_after_status, release_before_tail, DescriptorPtr, DESCRIPTOR_SIZE, RX_ERROR_82576_IPE, RX_ERROR_82576_L4E,
    RX_RSS_TYPE_MASK, RX_STATUS_DD, RX_STATUS_EOP, RX_STATUS_IPCS, RX_STATUS_L4CS,
};
use crate::device::{Config, QueueStats};
use crate::error::{Error, Result};
use crate::memory::{DmaMemory, MemoryKind};
use crate::mempool::Mempool;
use crate::packet::{
    Metadata, Packet, PacketBatch, FLAG_CSUM_BAD, FLAG_CSUM_CHECKED, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD,
    FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD, FLAG_RSS_HASH,
};
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
    /// Offload switches that change the receive path (checksum verdicts,
    /// RSS hash flag); both off: the fast path.
    rx_checksum: bool,
    rss: bool,
    /// Software counters of the features path.
    stats: QueueStats,
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
            rx_checksum: config.offloads.rx_checksum,
            rss: super::features::rss_enabled(config),
            stats: QueueStats::new(id),
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

    /// The driver's own counters of this queue (the features path counts;
    /// the fast path does not).
    pub fn software_stats(&self) -> &QueueStats {
        &self.stats
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
        if self.rx_checksum || self.rss {
            return self.rx_batch_features(regs, batch, max);
        }
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

    /// The receive path with offloads on: the NIC's checksum verdict
    /// (§7.1.5.2: IPCS/L4CS status, IPE/L4E errors — the 82576's error
    /// bits, see [`RX_ERROR_82576_L4E`]) and the RSS hash with
    /// `FLAG_RSS_HASH` into the metadata. As ixgbe's features path, without
    /// RSC: a frame over several descriptors is dropped (no jumbo frames).
    fn rx_batch_features<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch, max: usize) -> usize {
        let start = self.rx_index;
        let mut i = start;
        let mut received = 0;
        while received < max {
            let desc = self.descriptor(i);
            let status = desc.rx_status();
            if status & RX_STATUS_DD == 0 {
                break;
            }
            acquire_after_status();
            if self.spare.is_empty() && self.pool.alloc_batch_for_receive(&mut self.spare, max.max(32)) == 0 {
                self.pool_empty += 1;
                break;
            }
            let fresh = self.spare.pop().expect("refilled above");
            let length = desc.rx_length() as usize;
            let lower = desc.rx_lower();
            let rss_hash = desc.rx_rss_hash();
            desc.rx_arm(fresh.data_iova());
            let mut packet = std::mem::replace(&mut self.buffers[i as usize], fresh);
            i = self.index.next(i);
            self.stats.rx_descriptors += 1;
            let end_of_packet = status & RX_STATUS_EOP != 0;
            if !end_of_packet || self.discarding || length > self.capacity {
                self.discarding = !end_of_packet;
                if end_of_packet {
                    self.discarded += 1;
                }
                continue;
            }
            // SAFETY: length <= capacity of this buffer, checked above.
            unsafe { packet.set_len_unchecked(length) };
            let mut flags = 0;
            if self.rss && lower & RX_RSS_TYPE_MASK != 0 {
                flags |= FLAG_RSS_HASH;
            }
            if self.rx_checksum {
                flags |= FLAG_CSUM_CHECKED | checksum_flags(status);
            }
            // The hash is there whenever RXCSUM.PCSD is set (RSS on); a frame
            // RSS does not hash (RSS type 0) gets hash 0 and no flag.
            let rss_hash = if self.rss { rss_hash } else { 0 };
            *packet.meta_mut() = Metadata { rss_hash, flags };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += length as u64;
            batch.push(packet);
            received += 1;
        }
        if i != start {
            self.rx_index = i;
            release_before_tail();
            regs.write32(rdt(self.id), self.index.prev(i) as u32);
        }
        received
    }
}

/// The checksum verdict flags of an 82576 receive write-back (§7.1.5.2):
/// IPCS says the IPv4 header checksum was checked, IPE that it was wrong;
/// L4CS that the TCP/UDP checksum was checked, L4E that it was wrong.
/// Nothing checked (not IPv4, a fragment, UDP without checksum): no flag,
/// as `offload::checksum_verdict` computes it in software.
pub fn checksum_flags(status: u32) -> u32 {
    let mut flags = 0;
    if status & RX_STATUS_IPCS != 0 {
        flags |= if status & RX_ERROR_82576_IPE != 0 {
            FLAG_IP_CSUM_BAD | FLAG_CSUM_BAD
        } else {
            FLAG_IP_CSUM_GOOD
        };
    }
    if status & RX_STATUS_L4CS != 0 {
        flags |= if status & RX_ERROR_82576_L4E != 0 {
            FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD
        } else {
            FLAG_L4_CSUM_GOOD
        };
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

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
