//! One receive queue over advanced descriptors, for the 82599 and the
//! 82576: the ring and its buffers, and the receive path (82599 §7.1,
//! write-back format §7.1.6.2; 82576 §7.1.5). The driver allocates it
//! with [`RxQueue::new`], programs the queue's registers from
//! [`RxQueue::ring_iova`] and [`RxQueue::ring_bytes`], arms it
//! ([`RxQueue::arm_all`]) and enables it.

use super::{
    DescriptorPtr, Nic, DESCRIPTOR_SIZE, RX_NEXTP_MASK, RX_NEXTP_SHIFT, RX_RSCCNT_MASK, RX_RSS_TYPE_MASK, RX_STATUS_DD,
    RX_STATUS_EOP, RX_STATUS_IPCS, RX_STATUS_L4CS,
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
use std::marker::PhantomData;

/// A receive ring, the packet buffer behind each of its descriptors, and
/// the pool that refills it.
pub struct RxQueue<N: Nic> {
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
    /// Software counters.
    stats: QueueStats,
    /// Some offload switch changes the receive path (checksum flags, RSS
    /// hash, chained packets); all off: the fast path.
    features: bool,
    rx_checksum: bool,
    rss: bool,
    /// Partial chains (frames spread over several descriptors, RSC), kept
    /// at the index of the descriptor that continues them (NEXTP). Empty
    /// unless the NIC has RSC and the features path is on.
    chains: Vec<Option<Packet>>,
    nic: PhantomData<N>,
}

impl<N: Nic> RxQueue<N> {
    /// Allocates the ring and the pool; the driver then programs the
    /// queue's registers. `rss`: whether the NIC computes RSS hashes
    /// (the driver decides, from `config`).
    pub(crate) fn new(id: u16, config: &Config, memory: MemoryKind, spec: &str, rss: bool) -> Result<RxQueue<N>> {
        let size = config.rx_ring_size;
        let ring = DmaMemory::allocate(size * DESCRIPTOR_SIZE, memory)?;
        // Fill the ring with 0xFF before the NIC may look at it (ixy credits
        // Snabb): a descriptor read too early points nowhere useful instead
        // of to physical address 0. Every descriptor is armed before start.
        // SAFETY: our own fresh allocation of at least this many bytes.
        unsafe { std::ptr::write_bytes(ring.virt(), 0xFF, size * DESCRIPTOR_SIZE) };
        let pool = Mempool::new(&format!("{spec} rx{id}"), config.effective_pool_size(), memory)?;
        let o = &config.offloads;
        let features = o.rsc || o.rx_checksum || rss;
        Ok(RxQueue {
            id: id as u32,
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
            stats: QueueStats::new(id),
            features,
            rx_checksum: o.rx_checksum,
            rss,
            chains: if N::RSC && features {
                (0..size).map(|_| None).collect()
            } else {
                Vec::new()
            },
            nic: PhantomData,
        })
    }

    /// IO address of the ring (RDBAL/RDBAH).
    pub(crate) fn ring_iova(&self) -> u64 {
        self.ring.iova(0)
    }

    /// Length of the ring in bytes (RDLEN).
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ring_size() * DESCRIPTOR_SIZE
    }

    /// Writes a descriptor as a (hostile) NIC would: the fuzz target of
    /// the receive path.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn write_descriptor_for_fuzzing(&mut self, i: usize, bytes: &[u8; DESCRIPTOR_SIZE]) {
        assert!(i < self.ring_size());
        // SAFETY: descriptor i lies inside the ring (checked above); the
        // ring is ours and no device reads it here.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ring.virt().add(i * DESCRIPTOR_SIZE),
                DESCRIPTOR_SIZE,
            )
        };
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

    /// The driver's own counters of this queue (see [`Nic::COUNT_FAST_RX`]).
    pub fn software_stats(&self) -> &QueueStats {
        &self.stats
    }

    #[inline]
    fn descriptor(&self, i: u16) -> DescriptorPtr {
        // SAFETY: i < ring size, so the 16 bytes lie inside the ring.
        unsafe { DescriptorPtr::new(self.ring.virt().add(i as usize * DESCRIPTOR_SIZE)) }
    }

    /// Puts a buffer into every descriptor (82599 §4.6.7.1 "allocate and
    /// assign a receive buffer to each descriptor"; 82576 §4.5.8).
    pub(crate) fn arm_all(&mut self) -> Result<()> {
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

    /// Receives up to `max` packets (§7.1: the NIC sets DD in the write-back
    /// when a descriptor is done).
    #[inline]
    pub(crate) fn rx_batch<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch, max: usize) -> usize {
        // No batch can hold more than one ring of packets; a caller's
        // `usize::MAX` must not reach `reserve` (capacity overflow).
        let max = max.min(self.ring_size());
        if self.features {
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
        // descriptor writes are volatile, and through them the compiler
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
            regs.acquire_after_status();
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
                // with jumbo frames, which the drivers do not enable
                // (82599 MAXFRS stays at 1518, 82576 RCTL.LPE = 0). Drop
                // every piece up to and including EOP rather than deliver
                // part of a frame.
                discarding = !end_of_packet;
                if end_of_packet {
                    self.discarded += 1;
                }
                drop(packet);
                continue;
            }
            // SAFETY: length <= capacity of this fresh buffer, checked above.
            unsafe { packet.set_len_unchecked(length) };
            // No RSS on this path (it is a feature): no hash, no flags, and
            // the descriptor's hash field is not read.
            *packet.meta_mut() = Metadata { rss_hash: 0, flags: 0 };
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
            if N::COUNT_FAST_RX {
                self.stats.rx_descriptors += self.index.distance(self.rx_index, i) as u64;
                self.stats.rx_packets += received as u64;
            }
            self.rx_index = i;
            // Hand the re-armed descriptors back: RDT = last one processed
            // (one behind rx_index, see the drivers' start_rx_queue). One
            // MMIO write per batch.
            regs.release_before_tail();
            regs.write32(N::rdt(self.id), self.index.prev(i) as u32);
        }
        received
    }

    /// The receive path with offloads on: checksum verdicts and RSS hash
    /// into the metadata; frames over several descriptors assembled into
    /// one chained packet by following NEXTP (RSC, 82599 §7.11), or
    /// dropped where the NIC has no RSC ([`Nic::RSC`]). Out of line: when
    /// it was inlined, the fast loop above lost a register to it (one
    /// more instruction per packet).
    #[inline(never)]
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
            regs.acquire_after_status();
            if self.spare.is_empty() && self.pool.alloc_batch_for_receive(&mut self.spare, max.max(32)) == 0 {
                self.pool_empty += 1;
                break;
            }
            let fresh = self.spare.pop().expect("refilled above");
            let length = desc.rx_length() as usize;
            let lower = desc.rx_lower();
            let rss_hash = desc.rx_rss_hash();
            desc.rx_arm(fresh.data_iova());
            let mut segment = std::mem::replace(&mut self.buffers[i as usize], fresh);
            let next = self.index.next(i);
            self.stats.rx_descriptors += 1;
            let end_of_packet = status & RX_STATUS_EOP != 0;
            let mut head = if N::RSC {
                // SAFETY: the length is clamped to this buffer's capacity.
                unsafe { segment.set_len_unchecked(length.min(self.capacity)) };
                let head = match self.chains[i as usize].take() {
                    Some(mut head) => {
                        head.append(segment);
                        head
                    }
                    None => segment,
                };
                if !end_of_packet {
                    // §7.1.6.2: with RSC (RSCCNT != 0) NEXTP names the
                    // descriptor that continues this packet; otherwise it
                    // is the next one in the ring.
                    let continue_at = if lower & RX_RSCCNT_MASK != 0 {
                        ((status & RX_NEXTP_MASK) >> RX_NEXTP_SHIFT) as usize % self.index.size()
                    } else {
                        next as usize
                    };
                    self.chains[continue_at] = Some(head);
                    i = next;
                    continue;
                }
                head
            } else {
                // No RSC: as on the fast path, a frame over several
                // descriptors (no jumbo frames) is dropped up to EOP.
                if !end_of_packet || self.discarding || length > self.capacity {
                    self.discarding = !end_of_packet;
                    if end_of_packet {
                        self.discarded += 1;
                    }
                    i = next;
                    continue;
                }
                // SAFETY: length <= capacity of this buffer, checked above.
                unsafe { segment.set_len_unchecked(length) };
                segment
            };
            let mut flags = 0;
            if self.rss && lower & RX_RSS_TYPE_MASK != 0 {
                flags |= FLAG_RSS_HASH;
            }
            if self.rx_checksum {
                flags |= FLAG_CSUM_CHECKED | checksum_flags::<N>(status);
            }
            // A frame RSS does not hash (RSS type 0) gets hash 0 and no flag.
            *head.meta_mut() = Metadata {
                rss_hash: if flags & FLAG_RSS_HASH != 0 { rss_hash } else { 0 },
                flags,
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += head.total_len() as u64;
            batch.push(head);
            received += 1;
            i = next;
        }
        if i != start {
            self.rx_index = i;
            regs.release_before_tail();
            regs.write32(N::rdt(self.id), self.index.prev(i) as u32);
        }
        received
    }
}

/// The checksum verdict flags of a receive write-back (82599 §7.1.6.2,
/// 82576 §7.1.5.2): IPCS says the IPv4 header checksum was checked, IPE
/// that it was wrong; L4CS that the TCP/UDP checksum was checked, TCPE/L4E
/// that it was wrong (the error bits are the NIC's, [`Nic::RX_ERROR_IPE`]).
/// Nothing checked (not IPv4, a fragment, UDP without checksum): no flag,
/// as `offload::checksum_verdict` computes it in software.
#[inline]
pub fn checksum_flags<N: Nic>(status: u32) -> u32 {
    let mut flags = 0;
    if status & RX_STATUS_IPCS != 0 {
        flags |= if status & N::RX_ERROR_IPE != 0 {
            FLAG_IP_CSUM_BAD | FLAG_CSUM_BAD
        } else {
            FLAG_IP_CSUM_GOOD
        };
    }
    if status & RX_STATUS_L4CS != 0 {
        flags |= if status & N::RX_ERROR_L4E != 0 {
            FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD
        } else {
            FLAG_L4_CSUM_GOOD
        };
    }
    flags
}
