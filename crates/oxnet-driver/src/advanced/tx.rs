//! One transmit queue over advanced descriptors, for the 82599 and the
//! 82576: the ring and the packets in flight, and the transmit path (82599
//! §7.2, context and data descriptors §7.2.3.2.3/4; 82576 §7.2.2.2/3),
//! with the offload switches (checksum insertion, TSO, head write-back).
//! The driver allocates it with [`TxQueue::new`], programs the queue's
//! registers from [`TxQueue::ring_iova`], [`TxQueue::ring_bytes`] and
//! [`TxQueue::head_writeback_iova`], and enables it.

use super::{
    DescriptorPtr, Nic, DESCRIPTOR_SIZE, TX_DCMD_EOP, TX_DCMD_IFCS, TX_DCMD_RS, TX_DCMD_TSE, TX_L4LEN_SHIFT,
    TX_MACLEN_SHIFT, TX_MSS_SHIFT, TX_POPTS_IXSM, TX_POPTS_TXSM, TX_STATUS_DD, TX_TUCMD_IPV4, TX_TUCMD_L4T_TCP,
};
use crate::device::{Config, QueueStats, TsoMode};
use crate::domain::{self, DmaDomain};
use crate::error::{Error, Result};
use crate::memory::{DmaMemory, MemoryKind};
use crate::mempool::Mempool;
use crate::offload;
use crate::packet::{
    free_ring_run, plain_word_base, Packet, PacketBatch, TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM,
};
use crate::regs::RegisterAccess;
use crate::ring::RingIndex;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// Descriptors cleaned at once: we check the DD bit of the last descriptor
/// of a batch of this many and free all of them together (ixy's
/// TX_CLEAN_BATCH; cleaning one at a time costs a cache miss per packet).
pub const TX_CLEAN_BATCH: u16 = 32;

/// Largest frame one data descriptor can carry without TSO (DTALEN is 16
/// bits, and without jumbo frames the MAC sends at most 1518 + VLAN bytes;
/// we refuse what the buffer cannot hold anyway).
const MAX_FRAME: usize = 16 * 1024 - 1;

/// A transmit ring and the packets in flight on it.
pub struct TxQueue<N: Nic> {
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
    /// Software counters (descriptors, packets, histogram) of the offload
    /// and software paths.
    stats: QueueStats,
    /// Descriptors (= packets) sent by the plain path.
    plain_descriptors: u64,
    /// Set by the slow paths (the only writers of `stats`), cleared by
    /// [`TxQueue::take_stats_changed`]: a split queue's handle publishes
    /// the whole block only after a batch that may have changed it.
    stats_changed: bool,
    /// The offload path: set when any transmit switch is on. The plain
    /// path keeps one packet per descriptor (cleaned in runs of
    /// [`TX_CLEAN_BATCH`]); the offload path may use several descriptors
    /// per packet and keeps the packet at its last descriptor.
    offload: Option<Box<OffloadState>>,
    /// Buffers for what the driver builds itself: software segments,
    /// linearised chains (allocated on first use).
    fallback_pool: Option<Mempool>,
    memory: MemoryKind,
    /// The DMA domain of `memory`: the only one whose addresses go into a
    /// descriptor; packets of another are copied ([`crate::domain`]).
    domain: DmaDomain,
    /// Minus the length-and-request word of a 1-byte plain packet of
    /// `domain` ([`plain_word_base`]), computed once: added to a packet's
    /// word it gives len - 1 for a plain packet of this domain (one `lea`),
    /// a huge value for any other.
    minus_plain_base: u64,
    /// Why the last packet was refused, for a person to read.
    last_error: Option<String>,
    nic: PhantomData<N>,
}

/// State of the offload path.
struct OffloadState {
    tx_checksum: bool,
    tso: TsoMode,
    /// Head write-back (82599 §7.2.3.5.2, 82576 TDWBAL/TDWBAH): the NIC
    /// writes TDH here.
    head_writeback: Option<DmaMemory>,
    /// Ring index of the last descriptor of each packet in flight, oldest first.
    ends: VecDeque<u16>,
    /// The context last written (slot 0), to write it only when it changes.
    context: Option<(u32, u32, u32)>,
    /// Large buffers for `TsoMode::Single` (a chain copied into one).
    single_pool: Option<Mempool>,
}

impl<N: Nic> TxQueue<N> {
    /// Allocates the ring (and the head write-back word, if that switch is
    /// on); the driver then programs the queue's registers.
    pub(crate) fn new(id: u16, config: &Config, memory: MemoryKind) -> Result<TxQueue<N>> {
        let memory = domain::device_memory(memory, &format!("tx queue {id}"))?;
        let size = config.tx_ring_size;
        let ring = DmaMemory::allocate(size * DESCRIPTOR_SIZE, memory)?;
        // SAFETY: our own allocation (see RxQueue::new for the 0xFF trick).
        unsafe { std::ptr::write_bytes(ring.virt(), 0xFF, size * DESCRIPTOR_SIZE) };
        let o = &config.offloads;
        let head_writeback = if o.tx_head_writeback {
            let memory = DmaMemory::allocate(64, memory)?;
            // SAFETY: our own fresh allocation of at least 4 bytes.
            unsafe { std::ptr::write_volatile(memory.virt() as *mut u32, 0) };
            Some(memory)
        } else {
            None
        };
        let offload = (o.tx_checksum || o.tso != TsoMode::Off || o.tx_head_writeback).then(|| {
            Box::new(OffloadState {
                tx_checksum: o.tx_checksum,
                tso: o.tso,
                head_writeback,
                ends: VecDeque::with_capacity(size),
                context: None,
                single_pool: None,
            })
        });
        Ok(TxQueue {
            id: id as u32,
            ring,
            index: RingIndex::new(size),
            tx_index: 0,
            clean_index: 0,
            packets: (0..size).map(|_| MaybeUninit::uninit()).collect(),
            ring_full: 0,
            invalid: 0,
            stats: QueueStats::new(id),
            plain_descriptors: 0,
            stats_changed: true,
            offload,
            fallback_pool: None,
            memory,
            domain: DmaDomain::of(memory),
            minus_plain_base: plain_word_base(DmaDomain::of(memory)).wrapping_neg(),
            last_error: None,
            nic: PhantomData,
        })
    }

    /// IO address of the ring (TDBAL/TDBAH).
    pub(crate) fn ring_iova(&self) -> u64 {
        self.ring.iova(0)
    }

    /// Length of the ring in bytes (TDLEN).
    pub(crate) fn ring_bytes(&self) -> usize {
        self.index.size() * DESCRIPTOR_SIZE
    }

    /// IO address of the word the NIC writes the head to (TDWBAL/TDWBAH),
    /// if head write-back is on.
    pub(crate) fn head_writeback_iova(&self) -> Option<u64> {
        let memory = self.offload.as_ref()?.head_writeback.as_ref()?;
        Some(memory.iova(0))
    }

    /// The driver's own counters of this queue.
    pub fn software_stats(&self) -> QueueStats {
        let mut stats = self.stats.clone();
        stats.tx_descriptors += self.plain_descriptors;
        stats.tx_packets += self.plain_descriptors;
        stats.tx_descriptors_per_packet[1] += self.plain_descriptors;
        stats
    }

    /// The counters of the offload and software paths alone (without the
    /// plain path's descriptors, which [`TxQueue::plain_descriptors`]
    /// gives): `software_stats` = this + plain descriptors, counted as one
    /// packet and one descriptor each.
    pub(crate) fn slow_path_stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Descriptors (= packets) sent by the plain path.
    #[inline]
    pub(crate) fn plain_descriptors(&self) -> u64 {
        self.plain_descriptors
    }

    /// True if [`TxQueue::slow_path_stats`] may have changed since the last
    /// call (a batch took a slow path).
    #[inline]
    pub(crate) fn take_stats_changed(&mut self) -> bool {
        std::mem::take(&mut self.stats_changed)
    }

    /// Why the last refused packet was refused.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The head the NIC last wrote back, if head write-back is on.
    pub fn written_back_head(&self) -> Option<u32> {
        let memory = self.offload.as_ref()?.head_writeback.as_ref()?;
        // SAFETY: 4 bytes of our DMA memory that the NIC writes; volatile.
        Some(u32::from_le(unsafe {
            std::ptr::read_volatile(memory.virt() as *const u32)
        }))
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
    /// has DD, all before it are done too (descriptors complete in order,
    /// §7.2.3.5.1).
    #[inline]
    fn clean<R: RegisterAccess>(&mut self, regs: &R) {
        if self.index.distance(self.clean_index, self.tx_index) < TX_CLEAN_BATCH {
            return;
        }
        loop {
            let in_flight = self.index.distance(self.clean_index, self.tx_index);
            if in_flight < TX_CLEAN_BATCH {
                break;
            }
            let last = self.index.add(self.clean_index, TX_CLEAN_BATCH - 1);
            if self.descriptor(last).tx_status() & TX_STATUS_DD == 0 {
                break;
            }
            // The NIC is done with these descriptors and buffers: the
            // buffers go back to their pool (and may be written at once),
            // the slots are refilled below, only after DD was read.
            regs.acquire_after_status();
            // clean_index is a multiple of TX_CLEAN_BATCH and the ring size
            // a multiple too, so the run never wraps around the ring.
            let start = self.clean_index as usize;
            let run = &self.packets[start..start + TX_CLEAN_BATCH as usize];
            // SAFETY: the run lies between clean_index and tx_index, so every
            // slot is initialised; advancing clean_index below gives them up.
            unsafe { free_ring_run(run) };
            let i = self.index.add(self.clean_index, TX_CLEAN_BATCH);
            self.clean_index = i;
        }
    }

    /// Sends packets from the front of `batch`; the ones that do not fit
    /// stay there.
    #[inline]
    pub(crate) fn tx_batch<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch) -> usize {
        if self.offload.is_some() {
            return self.tx_batch_offload(regs, batch);
        }
        self.clean(regs);
        // One descriptor always stays unused: tx_index == clean_index means
        // "empty", so a full ring holds size - 1 packets.
        let in_flight = self.index.distance(self.clean_index, self.tx_index) as usize;
        let free = self.index.size() - 1 - in_flight;
        let n = batch.len().min(free);
        let start = self.tx_index;
        // Up to the end of the ring: inside this run the ring index counts
        // up with the batch index (the compiler keeps one counter and
        // pointers that step), no wrap-around per packet. The run rarely
        // ends before the batch does (at the ring's end, once per ring,
        // or at a packet the fast path does not send); the rest is then
        // done by `tx_plain_rest`.
        let run = n.min(self.index.size() - start as usize);
        let ring = self.ring.virt();
        // SAFETY (both): start < ring size; the run stays inside the ring
        // and the slot array.
        let first = unsafe { ring.add(start as usize * DESCRIPTOR_SIZE) };
        // Raw pointers held in registers: through `&mut self.packets` the
        // compiler reloads the slice and re-reads the batch slot after each
        // descriptor store (two loads per packet).
        let slots = unsafe { self.packets.as_mut_ptr().add(start as usize) };
        let minus_base = self.minus_plain_base;
        // The batch's array in registers, as in the receive loop.
        let (batch_ptr, _) = batch.raw_parts();
        let mut j = 0;
        while j < run {
            // SAFETY: j < n <= len: an initialised packet of the batch,
            // read as a value; its slot is given up below (or it is
            // forgotten and stays in the batch for tx_plain_rest).
            let packet = unsafe { std::ptr::read(batch_ptr.add(j)) };
            // Length, request word and the request word's copy of the
            // buffer's DMA domain in one load, checked with one compare:
            // below MAX_FRAME only for a plain packet of a sendable length
            // in this queue's domain (packet::plain_word_base). Offload
            // requests, chains and packets of another DMA domain (whose
            // address means nothing, or something else, to this device:
            // crate::domain) cost this path nothing; they take the slow
            // path, which copies foreign packets.
            let len_minus_one = packet.len_and_request_domain().wrapping_add(minus_base);
            if len_minus_one >= MAX_FRAME as u64 {
                std::mem::forget(packet);
                break;
            }
            // SAFETY: start + j < ring size: inside the ring.
            let desc = unsafe { DescriptorPtr::new(first.add(j * DESCRIPTOR_SIZE)) };
            // §7.2.3.2.4: one data descriptor per packet, end of packet,
            // report status, insert the CRC.
            desc.tx_data(
                packet.data_iova(),
                (len_minus_one + 1) as u16,
                TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS,
            );
            // SAFETY: ring slot start + j is outside the initialised run
            // (cleaned or never used), so nothing is overwritten.
            unsafe { (*slots.add(j)).write(packet) };
            j += 1;
        }
        if j == n {
            let end = self.index.add(start, j as u16);
            return self.finish_plain(regs, batch, n, start, end, 0, false);
        }
        self.tx_plain_rest(regs, batch, n, start, j)
    }

    /// The plain path after a run that ended before the batch: packets
    /// `k..n` of `batch` (the first `k` are in descriptors from `start`),
    /// one at a time with the ring index wrapping; a packet that is not
    /// plain, of another domain or of a bad length is handled here.
    #[inline(never)]
    fn tx_plain_rest<R: RegisterAccess>(
        &mut self,
        regs: &R,
        batch: &mut PacketBatch,
        n: usize,
        start: u16,
        mut k: usize,
    ) -> usize {
        let mut i = self.index.add(start, k as u16);
        let mut invalid = 0;
        let (batch_ptr, _) = batch.raw_parts();
        while k < n {
            // SAFETY: k < n <= len: an initialised packet of the batch.
            let packet = unsafe { std::ptr::read(batch_ptr.add(k)) };
            let len_minus_one = packet.len_and_request_domain().wrapping_add(self.minus_plain_base);
            if len_minus_one >= MAX_FRAME as u64 {
                // len_minus_one + 1 is the word minus this domain's bits:
                // something above the length is a request, a chain or
                // another domain (the slow path); otherwise the length
                // cannot be sent (0 or above MAX_FRAME) and the packet is
                // dropped and counted.
                if len_minus_one.wrapping_add(1) >> 32 != 0 {
                    // It stays in the batch (its slot is still there).
                    std::mem::forget(packet);
                    return self.finish_plain(regs, batch, k, start, i, invalid, true);
                }
                invalid += 1;
                drop(packet);
                k += 1;
                continue;
            }
            self.descriptor(i).tx_data(
                packet.data_iova(),
                (len_minus_one + 1) as u16,
                TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS,
            );
            // SAFETY: ring slot i is outside the initialised run.
            unsafe { (*self.packets.as_mut_ptr().add(i as usize)).write(packet) };
            i = self.index.next(i);
            k += 1;
        }
        self.finish_plain(regs, batch, k, start, i, invalid, false)
    }

    /// The end of the plain path's batch: the first `k` packets of `batch`
    /// were consumed (descriptors `start..i`, `invalid` refused); with
    /// `special`, the k-th needs the slow path. Called from each exit of
    /// the loop, so that no flag says which exit it was.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn finish_plain<R: RegisterAccess>(
        &mut self,
        regs: &R,
        batch: &mut PacketBatch,
        k: usize,
        start: u16,
        i: u16,
        invalid: u64,
        special: bool,
    ) -> usize {
        let (base, len) = batch.raw_parts();
        // SAFETY: the first k packets were moved out; the rest moves down.
        unsafe {
            std::ptr::copy(base.add(k), base, len - k);
            batch.set_len_raw(len - k);
        }
        self.invalid += invalid;
        // One counter per batch; software_stats() derives packets and the
        // histogram from it (one descriptor per packet on this path).
        self.plain_descriptors += self.index.distance(start, i) as u64;
        self.tx_index = i;
        let mut taken = k;
        if special {
            // An offload request or a chain with every switch off, or a
            // packet of another DMA domain: done in software (copied),
            // then sent as plain packets.
            taken += self.tx_software(batch);
        } else {
            // What did not fit stays with the caller.
            self.ring_full += batch.len() as u64;
        }
        if self.tx_index != start {
            // One tail write per batch.
            regs.release_before_tail();
            regs.write32(N::tdt(self.id), self.tx_index as u32);
        }
        taken
    }

    fn pool_for_fallback(&mut self) -> Result<Mempool> {
        if self.fallback_pool.is_none() {
            let pool = Mempool::new(
                &format!("tx{} software offload", self.id),
                2 * self.index.size(),
                self.memory,
            )?;
            self.fallback_pool = Some(pool);
        }
        Ok(self.fallback_pool.clone().expect("just set"))
    }

    /// Turns one packet into plain single-buffer frames in software: TSO
    /// segmentation, checksums, chain linearisation — the same bytes the
    /// NIC would send ([`crate::offload`]).
    fn software_frames(&mut self, packet: &Packet, out: &mut Vec<Packet>) -> Result<()> {
        let pool = self.pool_for_fallback()?;
        let request = packet.tx_offload();
        if request.flags & TX_TSO != 0 {
            // The NIC's limits (and messages) first; segment() checks the
            // 82599's numbers (the same) again.
            offload::check_tso_with(packet, &N::TSO_LIMITS)?;
            return offload::segment(packet, &pool, out);
        }
        let mut frame = if packet.is_chained() {
            offload::linearize(packet, &pool)?
        } else {
            let mut copy = pool.alloc()?;
            copy.set_len(packet.len())?;
            copy.copy_from_slice(packet);
            copy
        };
        // A chain without requests (an RSC packet forwarded with every
        // switch off) only needs linearising.
        if request.flags != 0 {
            offload::fill_checksums(&mut frame, &request)?;
        }
        frame.set_tx_offload(Default::default());
        out.push(frame);
        Ok(())
    }

    /// The plain path's slow continuation: packets from the front of
    /// `batch` that need software work, converted and put in the ring one
    /// frame per descriptor. Stops at the first packet that does not fit.
    #[cold]
    fn tx_software(&mut self, batch: &mut PacketBatch) -> usize {
        self.stats_changed = true;
        let mut taken = 0;
        let mut frames = Vec::new();
        while !batch.is_empty() {
            frames.clear();
            // Plain: no request, no chain, not attached (a standalone
            // attached segment is copied below: `clean` frees the plain
            // ring's runs without looking at them, free_ring_run).
            let plain = batch[0].len_and_request() >> 32 == 0;
            let foreign = !domain::in_domain(&batch[0], self.domain);
            if plain && !foreign {
                // A plain packet of this queue's domain after one that
                // needed work: sent as the fast path sends it, so that a
                // batch mixing domains is taken whole.
                let len = batch[0].len();
                if len == 0 || len > MAX_FRAME {
                    self.refuse(batch, Error::Config(format!("a packet of {len} bytes cannot be sent")));
                    taken += 1;
                    continue;
                }
                if self.free_descriptors() == 0 {
                    self.ring_full += batch.len() as u64;
                    break;
                }
                let i = self.tx_index;
                batch.consume_front(1, |packet| {
                    self.descriptor(i)
                        .tx_data(packet.data_iova(), len as u16, TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS);
                    self.packets[i as usize].write(packet);
                });
                self.tx_index = self.index.next(i);
                self.plain_descriptors += 1;
                taken += 1;
                continue;
            }
            let converted = if plain {
                self.copy_plain(&batch[0], &mut frames)
            } else {
                self.software_frames(&batch[0], &mut frames).map(|()| true)
            };
            match converted {
                Ok(true) => {}
                Ok(false) => {
                    // No buffer to copy into: it stays with the caller,
                    // counted once; the packets behind it stay too (in
                    // order) but were not refused for want of a buffer.
                    self.stats.tx_copy_pool_empty += 1;
                    break;
                }
                Err(e) => {
                    self.refuse(batch, e);
                    taken += 1;
                    continue;
                }
            }
            let in_flight = self.index.distance(self.clean_index, self.tx_index) as usize;
            if frames.len() > self.index.size() - 1 - in_flight {
                self.ring_full += batch.len() as u64;
                break;
            }
            batch.consume_front(1, drop);
            taken += 1;
            self.stats.tx_packets += 1;
            if plain {
                self.stats.tx_copied += 1;
            } else {
                self.stats.tx_software_fallback += 1;
                self.stats.tx_copied += foreign as u64;
            }
            for frame in frames.drain(..) {
                let i = self.tx_index;
                self.stats.tx_bytes += frame.len() as u64;
                self.descriptor(i).tx_data(
                    frame.data_iova(),
                    frame.len() as u16,
                    TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS,
                );
                self.packets[i as usize].write(frame);
                self.tx_index = self.index.next(i);
                self.stats.tx_descriptors += 1;
                self.stats.count_tx_descriptors(1, 1);
            }
        }
        taken
    }

    /// A plain packet of another DMA domain, copied into one buffer of this
    /// queue's domain (the plain path puts one buffer per descriptor).
    /// `Ok(false)`: no buffer free.
    #[cold]
    fn copy_plain(&mut self, packet: &Packet, out: &mut Vec<Packet>) -> Result<bool> {
        let len = packet.len();
        if len == 0 || len > MAX_FRAME {
            return Err(Error::Config(format!("a packet of {len} bytes cannot be sent")));
        }
        let pool = self.pool_for_fallback()?;
        if len > pool.data_room() {
            return Err(Error::Config(format!(
                "a packet of {len} bytes from the {} DMA domain does not fit one {}-byte buffer of this \
                 device's ({}) memory; send it from the device's own pool, or turn an offload switch on \
                 (that path sends a copy as a chain)",
                packet.dma_domain(),
                pool.data_room(),
                self.domain
            )));
        }
        match domain::copy_into(packet, &pool) {
            Some(copy) => {
                out.push(copy);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Drops the first packet of `batch`, counting it and keeping why.
    fn refuse(&mut self, batch: &mut PacketBatch, e: Error) {
        self.invalid += 1;
        self.last_error = Some(e.to_string());
        batch.consume_front(1, drop);
    }

    // --- The offload path -------------------------------------------------

    /// Frees the packets of finished descriptors: up to the head the NIC
    /// wrote back (§7.2.3.5.2), or while the last descriptor of the oldest
    /// packet has DD (§7.2.3.5.1; RS is set there).
    fn clean_offload<R: RegisterAccess>(&mut self, regs: &R) {
        let state = self.offload.as_mut().expect("offload path");
        let head = state.head_writeback.as_ref().map(|memory| {
            // SAFETY: 4 bytes of our DMA memory that the NIC writes.
            u32::from_le(unsafe { std::ptr::read_volatile(memory.virt() as *const u32) }) as u16
        });
        while let Some(&end) = state.ends.front() {
            let done = match head {
                // Done if `end` lies before the head, counting from clean_index.
                Some(head) => self.index.distance(self.clean_index, end) < self.index.distance(self.clean_index, head),
                None => {
                    // SAFETY: end < ring size.
                    let desc = unsafe { DescriptorPtr::new(self.ring.virt().add(end as usize * DESCRIPTOR_SIZE)) };
                    desc.tx_status() & TX_STATUS_DD != 0
                }
            };
            if !done {
                break;
            }
            // As in `clean`: free and reuse only after the status was read.
            regs.acquire_after_status();
            state.ends.pop_front();
            // SAFETY: the slot of a packet's last descriptor holds it until
            // cleaned here, once.
            drop(unsafe { self.packets[end as usize].assume_init_read() });
            self.clean_index = self.index.next(end);
        }
    }

    fn tx_batch_offload<R: RegisterAccess>(&mut self, regs: &R, batch: &mut PacketBatch) -> usize {
        self.stats_changed = true;
        self.clean_offload(regs);
        let start = self.tx_index;
        let mut taken = 0;
        let mut frames = Vec::new();
        while !batch.is_empty() {
            match self.tx_one_offload(batch, &mut frames) {
                Ok(Put::Taken) => taken += 1,
                Ok(Put::RingFull) => {
                    self.ring_full += batch.len() as u64;
                    break;
                }
                Ok(Put::NoCopyBuffer) => {
                    // As in tx_software: the one packet that found no buffer.
                    self.stats.tx_copy_pool_empty += 1;
                    break;
                }
                Err(e) => {
                    self.refuse(batch, e);
                    taken += 1;
                }
            }
        }
        if self.tx_index != start {
            regs.release_before_tail();
            regs.write32(N::tdt(self.id), self.tx_index as u32);
        }
        taken
    }

    fn free_descriptors(&self) -> usize {
        let in_flight = self.index.distance(self.clean_index, self.tx_index) as usize;
        self.index.size() - 1 - in_flight
    }

    /// Puts the first packet of `batch` in the ring.
    fn tx_one_offload(&mut self, batch: &mut PacketBatch, frames: &mut Vec<Packet>) -> Result<Put> {
        let state = self.offload.as_ref().expect("offload path");
        let (tx_checksum, tso) = (state.tx_checksum, state.tso);
        let packet = &batch[0];
        let request = packet.tx_offload();
        if packet.is_empty() {
            return Err(Error::Config("empty packet".into()));
        }
        let foreign = !domain::in_domain(packet, self.domain);
        let hardware = if request.flags & TX_TSO != 0 {
            offload::check_tso_with(packet, &N::TSO_LIMITS)?;
            tso != TsoMode::Off
        } else if request.flags & (TX_IP_CSUM | TX_TCP_CSUM | TX_UDP_CSUM) != 0 {
            tx_checksum
        } else {
            true // nothing to offload: a plain or chained packet
        };
        if !hardware {
            // Software: plain frames, one descriptor each.
            frames.clear();
            self.software_frames(packet, frames)?;
            if frames.len() > self.free_descriptors() {
                return Ok(Put::RingFull);
            }
            batch.consume_front(1, drop);
            self.stats.tx_packets += 1;
            self.stats.tx_software_fallback += 1;
            // The frames are in this queue's domain whatever the packet's.
            self.stats.tx_copied += foreign as u64;
            for frame in frames.drain(..) {
                self.put_data(frame, None);
            }
            return Ok(Put::Taken);
        }
        let single = request.flags & TX_TSO != 0 && tso == TsoMode::Single;
        // What goes into the ring instead of the packet itself, made
        // before the packet leaves the batch (a failure leaves it there):
        // a chain linearised for single-descriptor TSO (into this queue's
        // domain), or a copy of a packet of another DMA domain.
        let replacement = if single && packet.is_chained() {
            let pool = self.single_pool()?;
            Some(offload::linearize(packet, &pool)?)
        } else if foreign {
            let pool = self.pool_for_fallback()?;
            match domain::copy_into(packet, &pool) {
                Some(copy) => Some(copy),
                None => return Ok(Put::NoCopyBuffer),
            }
        } else {
            None
        };
        let packet = replacement.as_ref().unwrap_or(&batch[0]);
        let segments = packet.segment_count();
        let limits = &N::TSO_LIMITS;
        if segments > limits.max_data_descriptors {
            return Err(Error::Config(format!(
                "a packet of {segments} segments: the {} takes at most {} data descriptors per packet ({})",
                limits.device, limits.max_data_descriptors, limits.descriptors_source
            )));
        }
        let ipv6 = offload::is_ipv6(packet, request.l2_len as usize);
        if ipv6 && request.flags & TX_IP_CSUM != 0 {
            return Err(Error::Config(
                "IP header checksum requested for an IPv6 packet, which has none (RFC 8200 §3)".into(),
            ));
        }
        let context = (request.flags != 0).then(|| context_fields(&request, ipv6));
        if segments + context.is_some() as usize > self.free_descriptors() {
            return Ok(Put::RingFull);
        }
        let mut original = None;
        batch.consume_front(1, |p| original = Some(p));
        let mut packet = match replacement {
            Some(replacement) => replacement, // the original is dropped
            None => original.expect("one packet"),
        };
        debug_assert!(domain::in_domain(&packet, self.domain));
        self.stats.tx_copied += foreign as u64;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += packet.total_len() as u64;
        if request.flags != 0 {
            seed_checksums(&mut packet, &request);
        }
        self.put_data(packet, context.map(|c| (c, request)));
        Ok(Put::Taken)
    }

    /// Large buffers for single-descriptor TSO: DTALEN is 16 bits, so one
    /// descriptor carries at most 64 KiB - 1 (§7.2.3.2.4).
    fn single_pool(&mut self) -> Result<Mempool> {
        let state = self.offload.as_mut().expect("offload path");
        if state.single_pool.is_none() {
            let pool = Mempool::with_layout(
                &format!("tx{} single-descriptor TSO", self.id),
                32,
                crate::mempool::DEFAULT_HEADROOM,
                64 * 1024 - 64,
                self.memory,
            )?;
            state.single_pool = Some(pool);
        }
        Ok(state.single_pool.clone().expect("just set"))
    }

    /// Writes the descriptors of one packet (possibly chained): the context
    /// descriptor if it changed, one data descriptor per segment.
    fn put_data(&mut self, packet: Packet, context: Option<((u32, u32, u32), crate::packet::TxOffload)>) {
        let mut used = 0;
        let mut popts = 0;
        let mut tse = 0;
        let mut paylen = packet.total_len() as u32;
        if let Some((fields, request)) = context {
            let state = self.offload.as_mut().expect("offload path");
            if state.context != Some(fields) {
                state.context = Some(fields);
                let i = self.tx_index;
                self.descriptor(i).tx_context(fields.0, fields.1, fields.2);
                self.tx_index = self.index.next(i);
                used += 1;
                self.stats.tx_context_descriptors += 1;
            }
            if request.flags & TX_TSO != 0 {
                tse = TX_DCMD_TSE;
                // IXSM only for IPv4: IPv6 has no header checksum (as
                // Linux's ixgbe sets IXSM only with its IPV4 flag).
                popts = if fields.1 & TX_TUCMD_IPV4 != 0 {
                    TX_POPTS_IXSM | TX_POPTS_TXSM
                } else {
                    TX_POPTS_TXSM
                };
                paylen -= (request.l2_len as u32) + request.l3_len as u32 + request.l4_len as u32;
            } else {
                if request.flags & TX_IP_CSUM != 0 {
                    popts |= TX_POPTS_IXSM;
                }
                if request.flags & (TX_TCP_CSUM | TX_UDP_CSUM) != 0 {
                    popts |= TX_POPTS_TXSM;
                }
            }
        }
        let segments = packet.segment_count();
        let mut last = self.tx_index;
        for (k, segment) in packet.segments().enumerate() {
            let i = self.tx_index;
            let eop = if k + 1 == segments { TX_DCMD_EOP | TX_DCMD_RS } else { 0 };
            // §7.2.3.2.4: PAYLEN and POPTS count in the first data
            // descriptor of a packet.
            let (p, o) = if k == 0 { (paylen, popts) } else { (0, 0) };
            self.descriptor(i).tx_data_offload(
                segment.data_iova(),
                segment.len() as u16,
                TX_DCMD_IFCS | tse | eop,
                p,
                o,
            );
            last = i;
            self.tx_index = self.index.next(i);
            used += 1;
        }
        self.stats.tx_descriptors += used as u64;
        self.stats.count_tx_descriptors(used, 1);
        self.packets[last as usize].write(packet);
        self.offload.as_mut().expect("offload path").ends.push_back(last);
    }
}

/// What [`TxQueue::tx_one_offload`] did with the first packet of a batch.
enum Put {
    /// It is in the ring.
    Taken,
    /// Not enough free descriptors: it stays with the caller.
    RingFull,
    /// It is of another DMA domain and no buffer was free to copy it
    /// into: it stays with the caller.
    NoCopyBuffer,
}

/// The context descriptor's three fields for `request` (§7.2.3.2.3):
/// MACLEN/IPLEN, TUCMD (IPv4, L4 type), MSS/L4LEN (TSO only). TUCMD.IPV4
/// is clear for an IPv6 packet: the NIC then writes no IP checksum or
/// identification and puts each segment's length in the IPv6 payload
/// length (§7.2.4.7).
fn context_fields(request: &crate::packet::TxOffload, ipv6: bool) -> (u32, u32, u32) {
    let maclen_iplen = ((request.l2_len as u32) << TX_MACLEN_SHIFT) | request.l3_len as u32;
    let mut tucmd = if ipv6 { 0 } else { TX_TUCMD_IPV4 };
    if request.flags & (TX_TCP_CSUM | TX_TSO) != 0 {
        tucmd |= TX_TUCMD_L4T_TCP;
    }
    let mss_l4len = if request.flags & TX_TSO != 0 {
        ((request.mss as u32) << TX_MSS_SHIFT) | ((request.l4_len as u32) << TX_L4LEN_SHIFT)
    } else {
        0
    };
    (maclen_iplen, tucmd, mss_l4len)
}

/// What the NIC expects in the checksum fields before it completes them
/// (82599 §7.2.4.7 / §7.2.5; 82576 §7.2.4/§7.2.5, as Linux's igb_tso seeds
/// them): the TCP/UDP field seeded with the pseudo-header sum
/// (without the length for TSO, with it otherwise); the IPv4 field is
/// computed by the NIC with IXSM (we zero it for TSO, as Linux does).
/// IPv6 (RFC 8200 §8.1 pseudo-header) has no header checksum to zero.
fn seed_checksums(packet: &mut Packet, request: &crate::packet::TxOffload) {
    let (l2, l3) = (request.l2_len as usize, request.l3_len as usize);
    let ipv6 = offload::is_ipv6(packet, l2);
    let l3_minimum = if ipv6 { offload::IPV6_HEADER_LEN } else { 20 };
    if l3 < l3_minimum || packet.len() < l2 + l3 + 8 {
        return;
    }
    let total = packet.total_len();
    let (protocol, field) = if request.flags & (TX_TCP_CSUM | TX_TSO) != 0 {
        (offload::IPPROTO_TCP, l2 + l3 + 16)
    } else if request.flags & TX_UDP_CSUM != 0 {
        (offload::IPPROTO_UDP, l2 + l3 + 6)
    } else {
        return;
    };
    if field + 2 > packet.len() {
        return;
    }
    let length = (request.flags & TX_TSO == 0).then_some(total - l2 - l3);
    let seed = offload::pseudo_header_sum(packet, l2, protocol, length);
    packet[field..field + 2].copy_from_slice(&seed.to_be_bytes());
    if request.flags & TX_TSO != 0 && !ipv6 {
        packet[l2 + 10] = 0;
        packet[l2 + 11] = 0;
    }
}

impl<N: Nic> Drop for TxQueue<N> {
    fn drop(&mut self) {
        if let Some(state) = self.offload.take() {
            for &end in &state.ends {
                // SAFETY: each packet in flight sits at its last descriptor.
                drop(unsafe { self.packets[end as usize].assume_init_read() });
            }
            return;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Offloads;
    use crate::ixgbe::Nic82599;

    /// Registers that store nothing: the model never completes a
    /// descriptor, so every packet put in the ring stays in flight.
    struct NoRegisters;

    impl RegisterAccess for NoRegisters {
        fn read32(&self, _offset: u32) -> u32 {
            0
        }
        fn write32(&self, _offset: u32, _value: u32) {}
    }

    fn queue(offloads: Offloads) -> TxQueue<Nic82599> {
        let config = Config {
            tx_ring_size: 64,
            offloads,
            ..Config::default()
        };
        TxQueue::new(0, &config, MemoryKind::Plain).expect("queue on plain memory")
    }

    fn packet(pool: &Mempool, tag: u8) -> Packet {
        let mut p = pool.alloc().unwrap();
        p.set_len(60).unwrap();
        p.fill(tag);
        p
    }

    /// A batch own, foreign, foreign, own, foreign, foreign (tags 0..6)
    /// and a copy pool of two buffers: the two first foreign packets are
    /// copied, the own one between is sent as it is, the third foreign
    /// packet finds no buffer and stays with the caller with the one
    /// behind it. `tx_copy_pool_empty` counts that one packet (device.rs:
    /// "packets from another DMA domain that stayed with the caller
    /// because no buffer was free"), not the rest of the batch.
    fn copy_pool_runs_dry(offloads: Offloads) {
        let mut queue = queue(offloads);
        queue.fallback_pool = Some(Mempool::new("two copy buffers", 2, MemoryKind::Plain).unwrap());
        let own = Mempool::new("own", 8, MemoryKind::Plain).unwrap();
        let cpu = Mempool::new("cpu", 8, MemoryKind::CpuOnly).unwrap();
        let mut batch = PacketBatch::with_capacity(8);
        for (tag, foreign) in [false, true, true, false, true, true].into_iter().enumerate() {
            batch.push(packet(if foreign { &cpu } else { &own }, tag as u8));
        }
        let taken = queue.tx_batch(&NoRegisters, &mut batch);
        assert_eq!(taken, 4);
        let left: Vec<u8> = (0..batch.len()).map(|i| batch[i][0]).collect();
        assert_eq!(left, vec![4, 5], "the packets that stayed, in order");
        let stats = queue.software_stats();
        assert_eq!(stats.tx_copied, 2);
        assert_eq!(stats.tx_copy_pool_empty, 1);
        assert_eq!(stats.tx_packets, 4);
        assert_eq!(queue.ring_full_count(), 0);
        assert_eq!(queue.invalid_count(), 0);
        // The next attempt fails again (both copies are still in flight):
        // one more packet refused for want of a buffer.
        assert_eq!(queue.tx_batch(&NoRegisters, &mut batch), 0);
        assert_eq!(queue.software_stats().tx_copy_pool_empty, 2);
        assert_eq!(batch.len(), 2);
    }

    /// (address, length) of descriptor `i`: quadword 0 is the buffer
    /// address, the low 16 bits of dword 2 DTALEN (82599 §7.2.3.2.4).
    fn descriptor_fields(queue: &TxQueue<Nic82599>, i: usize) -> (u64, u16) {
        // SAFETY: i < ring size; the ring is our own memory and nothing
        // else writes it (NoRegisters).
        unsafe {
            let d = queue.ring.virt().add(i * DESCRIPTOR_SIZE);
            (std::ptr::read(d as *const u64), std::ptr::read(d.add(8) as *const u16))
        }
    }

    /// The plain path across the end of the ring, with a packet of length
    /// 0 (refused) and one of another DMA domain (copied) in the batch:
    /// every descriptor holds the packet's own address and length, in
    /// order, except the foreign one, whose address is a copy's.
    #[test]
    fn plain_path_across_the_ring_end_with_refused_and_foreign_packets() {
        let mut queue = queue(Offloads::default());
        let own = Mempool::new("own", 256, MemoryKind::Plain).unwrap();
        let cpu = Mempool::new("cpu", 4, MemoryKind::CpuOnly).unwrap();
        let mut batch = PacketBatch::with_capacity(64);
        for tag in 0..40 {
            batch.push(packet(&own, tag));
        }
        assert_eq!(queue.tx_batch(&NoRegisters, &mut batch), 40);
        // The NIC finished the first 32 (§7.2.3.5.1: DD in the last one of
        // the clean batch, RS is set on every descriptor).
        // SAFETY: descriptor 31's status dword, inside our ring.
        unsafe { *(queue.ring.virt().add(31 * DESCRIPTOR_SIZE + 12) as *mut u32) |= TX_STATUS_DD };
        let mut expected = Vec::new();
        for k in 0..50usize {
            let mut p = packet(if k == 30 { &cpu } else { &own }, 100 + k as u8);
            let len = if k == 5 { 0 } else { 60 + k };
            p.set_len(len).unwrap();
            if k != 5 {
                expected.push((p.data_iova(), len as u16, k == 30));
            }
            batch.push(p);
        }
        assert_eq!(queue.tx_batch(&NoRegisters, &mut batch), 50);
        assert!(batch.is_empty());
        assert_eq!(queue.invalid_count(), 1);
        let stats = queue.software_stats();
        assert_eq!((stats.tx_packets, stats.tx_copied), (40 + 49, 1));
        // 49 descriptors from index 40: 24 up to the end of the ring, then 25.
        assert_eq!(queue.tx_index, 25);
        for (n, &(iova, len, foreign)) in expected.iter().enumerate() {
            let (address, dtalen) = descriptor_fields(&queue, (40 + n) % 64);
            assert_eq!(dtalen, len, "descriptor {n}");
            if foreign {
                assert_ne!(address, iova, "a CPU-only address reached the ring");
                assert_eq!(crate::memory::iova_domain(address), Some(DmaDomain::Virtual));
            } else {
                assert_eq!(address, iova, "descriptor {n}: the packet itself");
            }
        }
    }

    /// A batch of plain own packets that reaches past the ring's end: the
    /// fast run stops at the end, the rest continues from descriptor 0.
    #[test]
    fn plain_path_wraps_at_the_ring_end() {
        let mut queue = queue(Offloads::default());
        let own = Mempool::new("own", 256, MemoryKind::Plain).unwrap();
        let mut batch = PacketBatch::with_capacity(64);
        for tag in 0..40 {
            batch.push(packet(&own, tag));
        }
        assert_eq!(queue.tx_batch(&NoRegisters, &mut batch), 40);
        // SAFETY: descriptor 31's status dword, inside our ring (§7.2.3.5.1).
        unsafe { *(queue.ring.virt().add(31 * DESCRIPTOR_SIZE + 12) as *mut u32) |= TX_STATUS_DD };
        let mut expected = Vec::new();
        for k in 0..40usize {
            let p = packet(&own, k as u8);
            expected.push(p.data_iova());
            batch.push(p);
        }
        assert_eq!(queue.tx_batch(&NoRegisters, &mut batch), 40);
        assert_eq!(queue.tx_index, 16, "24 up to the end, then 16 from 0");
        for (n, &iova) in expected.iter().enumerate() {
            assert_eq!(descriptor_fields(&queue, (40 + n) % 64), (iova, 60), "descriptor {n}");
        }
        assert_eq!(queue.software_stats().tx_packets, 80);
    }

    #[test]
    fn copy_pool_empty_counts_the_packet_refused_plain_path() {
        copy_pool_runs_dry(Offloads::default());
    }

    #[test]
    fn copy_pool_empty_counts_the_packet_refused_offload_path() {
        copy_pool_runs_dry(Offloads {
            tx_checksum: true,
            ..Offloads::default()
        });
    }
}
