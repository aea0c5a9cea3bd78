//! The TPACKET_V3 receive ring: blocks the kernel fills with frames back
//! to back and hands over whole (packet_mmap.rst, "TPACKET_V3"):
//!
//! ```text
//! block k: | tpacket_block_desc | tpacket3_hdr + sockaddr_ll + frame | ... | (num_pkts frames)
//!            block_status: TP_STATUS_KERNEL (0) -> TP_STATUS_USER (1) -> back to 0 by us
//! ```
//!
//! The kernel retires a block (sets TP_STATUS_USER) when it is full or
//! when the block timeout (1 ms, [`super::socket::Geometry`]) has passed
//! since its first frame. Blocks are handed over in order, so user space
//! walks them round-robin: the block at `block` is either ours (status
//! USER) or the ring is empty. No system call: polling reads the status
//! word; a frame is copied into a mempool packet, and the block goes back
//! to the kernel (status KERNEL) once every frame in it was copied.

use super::abi::{self, block, frame};
use crate::mempool::Mempool;
use crate::packet::{Packet, PacketBatch, FLAG_CSUM_CHECKED, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_GOOD};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Counters of one receive ring.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxCounters {
    pub packets: u64,
    pub bytes: u64,
    /// Blocks handed back to the kernel.
    pub blocks: u64,
    /// Frames the pool had no buffer for (left in the ring; counted once
    /// per call that found the pool empty).
    pub pool_empty: u64,
    /// Frames longer than a packet buffer, or cut by the kernel: dropped.
    pub oversize: u64,
}

/// Our position in the receive ring.
pub struct RxRing {
    base: NonNull<u8>,
    block_size: usize,
    block_nr: usize,
    /// The block we read (ours when its status is TP_STATUS_USER).
    block: usize,
    /// Frames of `block` not read yet (0: we do not hold the block).
    left: u32,
    /// Offset of the next frame inside `block`.
    offset: usize,
    pub counters: RxCounters,
}

// SAFETY: the ring memory belongs to the socket this ring lives beside
// (PacketSocket, which outlives it inside the same queue); moving the
// reader to another thread is fine, the kernel synchronises through the
// block status word.
unsafe impl Send for RxRing {}

impl RxRing {
    /// A reader of the ring at `base` (block 0 first).
    ///
    /// # Safety
    /// `base` points to a mapped TPACKET_V3 receive ring of `block_nr`
    /// blocks of `block_size` bytes that stays mapped while this exists.
    pub unsafe fn new(base: NonNull<u8>, block_size: usize, block_nr: usize) -> RxRing {
        RxRing {
            base,
            block_size,
            block_nr,
            block: 0,
            left: 0,
            offset: 0,
            counters: RxCounters::default(),
        }
    }

    #[inline]
    fn block_ptr(&self) -> *mut u8 {
        // SAFETY: block < block_nr: inside the mapping.
        unsafe { self.base.as_ptr().add(self.block * self.block_size) }
    }

    #[inline]
    fn block_status(&self) -> &AtomicU32 {
        // SAFETY: block_status is an aligned u32 inside the block header;
        // the kernel writes it concurrently, hence atomic access.
        unsafe { &*(self.block_ptr().add(block::STATUS) as *const AtomicU32) }
    }

    /// Copies up to `max` frames into packets of `pool` appended to
    /// `batch`; returns how many.
    pub fn receive(&mut self, pool: &Mempool, batch: &mut PacketBatch, max: usize) -> usize {
        let mut received = 0;
        while received < max {
            if self.left == 0 && !self.take_block() {
                break;
            }
            let want = (self.left as usize).min(max - received);
            let start = batch.len();
            let got = pool.alloc_batch_for_receive(batch, want);
            if got < want {
                self.counters.pool_empty += 1;
            }
            let mut kept = start;
            for _ in 0..got {
                // SAFETY: left > 0: offset is the header of a frame of the
                // block we hold (the kernel no longer writes it).
                let header = unsafe { self.block_ptr().add(self.offset) };
                let next = unsafe { read_u32(header, frame::NEXT_OFFSET) } as usize;
                self.offset += next;
                self.left -= 1;
                // The fresh buffers are all alike: the frame goes into the
                // first one not used yet, so skipped frames leave no holes.
                if self.copy_frame(header, &mut batch[kept]) {
                    kept += 1;
                }
            }
            // Frames skipped (sent by this host, too long): their buffers
            // go back to the pool.
            while batch.len() > kept {
                batch.pop();
            }
            received += kept - start;
            if self.left == 0 {
                self.release_block();
            }
            if got < want {
                break;
            }
        }
        received
    }

    /// Takes the next block if the kernel handed it over.
    #[inline]
    fn take_block(&mut self) -> bool {
        // Acquire: the frames the kernel wrote before setting the status
        // are visible to the reads below (the kernel's smp_wmb before
        // setting TP_STATUS_USER, af_packet.c prb_close_block).
        if self.block_status().load(Ordering::Acquire) & abi::TP_STATUS_USER == 0 {
            return false;
        }
        let b = self.block_ptr();
        // SAFETY: the block is ours; its header fields are aligned u32s.
        unsafe {
            self.left = read_u32(b, block::NUM_PKTS);
            self.offset = read_u32(b, block::OFFSET_TO_FIRST_PKT) as usize;
        }
        if self.left == 0 {
            // An empty block (retired by the timer with nothing in it,
            // which the kernel does not do, but cheap to handle).
            self.release_block();
            return self.block_status().load(Ordering::Acquire) & abi::TP_STATUS_USER != 0 && self.take_block();
        }
        true
    }

    /// Gives the block back to the kernel and moves to the next.
    #[inline]
    fn release_block(&mut self) {
        // Release: our reads of the block happen before the kernel may
        // reuse it (packet_mmap.rst: "user space ... sets block_status to
        // TP_STATUS_KERNEL").
        self.block_status().store(abi::TP_STATUS_KERNEL, Ordering::Release);
        self.counters.blocks += 1;
        self.block += 1;
        if self.block == self.block_nr {
            self.block = 0;
        }
    }

    /// Copies the frame whose header is at `header` into `packet` (a fresh
    /// buffer); false if the frame is skipped.
    #[inline]
    fn copy_frame(&mut self, header: *mut u8, packet: &mut Packet) -> bool {
        // SAFETY: header is a frame of a block we hold; all fields are
        // inside its 48-byte header and sockaddr_ll; the frame data is
        // tp_snaplen bytes at tp_mac inside the block (the kernel keeps it
        // there: macoff + snaplen <= block size).
        let (status, snaplen, len, mac, pkttype, rxhash) = unsafe {
            (
                read_u32(header, frame::STATUS),
                read_u32(header, frame::SNAPLEN) as usize,
                read_u32(header, frame::LEN) as usize,
                read_u16(header, frame::MAC) as usize,
                *header.add(frame::PKTTYPE),
                read_u32(header, frame::RXHASH),
            )
        };
        if pkttype == abi::PACKET_OUTGOING {
            return false;
        }
        // SAFETY: see above.
        let data = unsafe { std::slice::from_raw_parts(header.add(mac), snaplen) };
        let vlan = status & abi::TP_STATUS_VLAN_VALID != 0;
        let total = snaplen + if vlan { 4 } else { 0 };
        if snaplen < len || status & abi::TP_STATUS_COPY != 0 || total > packet.capacity() || snaplen < 12 {
            self.counters.oversize += 1;
            return false;
        }
        // Cannot fail: total <= capacity was checked.
        let _ = packet.set_len(total);
        if vlan {
            // The kernel took the 802.1Q tag out of the frame into the
            // header (hardware or software VLAN acceleration): put it back
            // where it was, after the two MAC addresses (IEEE 802.1Q §9).
            // SAFETY: tci and tpid are inside the frame header.
            let (tci, tpid) = unsafe {
                (
                    read_u32(header, frame::VLAN_TCI) as u16,
                    read_u16(header, frame::VLAN_TPID),
                )
            };
            let tpid = if status & abi::TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            };
            packet[..12].copy_from_slice(&data[..12]);
            packet[12..14].copy_from_slice(&tpid.to_be_bytes());
            packet[14..16].copy_from_slice(&tci.to_be_bytes());
            packet[16..].copy_from_slice(&data[12..]);
        } else {
            packet.copy_from_slice(data);
        }
        // A frame a kernel socket of this host sent (CHECKSUM_PARTIAL,
        // TP_STATUS_CSUMNOTREADY) carries only the pseudo-header sum in
        // its TCP/UDP checksum field (packet(7): the checksum "will be
        // computed later"): we compute it, so the frame is right wherever
        // it goes next (IPv4 TCP/UDP; other frames are left as they are).
        // TP_STATUS_CSUM_VALID: the kernel or the NIC checked it.
        if status & abi::TP_STATUS_CSUMNOTREADY != 0 {
            fill_partial_checksum(packet);
        }
        let flags = if status & (abi::TP_STATUS_CSUMNOTREADY | abi::TP_STATUS_CSUM_VALID) != 0 {
            FLAG_CSUM_CHECKED | FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD
        } else {
            0
        };
        *packet.meta_mut() = crate::packet::Metadata {
            rss_hash: rxhash,
            flags,
        };
        self.counters.packets += 1;
        self.counters.bytes += total as u64;
        true
    }
}

/// Computes the TCP/UDP checksum of an IPv4 or IPv6 frame over its IP
/// length (Ethernet padding left out); fragments and other frames are
/// left as they are.
fn fill_partial_checksum(frame: &mut [u8]) {
    let Some(h) = crate::offload::parse(frame) else { return };
    let total = if h.ipv6 {
        // RFC 8200 §3: the payload length leaves out the 40-byte header.
        crate::offload::IPV6_HEADER_LEN + u16::from_be_bytes([frame[h.l2_len + 4], frame[h.l2_len + 5]]) as usize
    } else {
        u16::from_be_bytes([frame[h.l2_len + 2], frame[h.l2_len + 3]]) as usize
    };
    let end = h.l2_len + total;
    if h.fragment || total < h.l3_len + h.l4_len || end > frame.len() {
        return;
    }
    crate::offload::set_l4_checksum(&mut frame[..end], h.l2_len, h.l3_len, h.protocol);
}

/// # Safety
/// `base + offset` is a readable, 4-byte aligned u32 of the ring.
#[inline]
unsafe fn read_u32(base: *const u8, offset: usize) -> u32 {
    // SAFETY: the caller's contract; volatile: the memory is shared with
    // the kernel.
    unsafe { std::ptr::read_volatile(base.add(offset) as *const u32) }
}

/// # Safety
/// `base + offset` is a readable, 2-byte aligned u16 of the ring.
#[inline]
unsafe fn read_u16(base: *const u8, offset: usize) -> u16 {
    // SAFETY: as read_u32.
    unsafe { std::ptr::read_volatile(base.add(offset) as *const u16) }
}
