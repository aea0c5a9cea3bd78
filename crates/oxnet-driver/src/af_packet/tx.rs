//! The transmit ring: fixed-size frames (TPACKET_V3 layout, one
//! `tpacket3_hdr` each, the frame's bytes at offset 48), used round-robin
//! (packet_mmap.rst, "Transmission process"):
//!
//! ```text
//! tp_status: TP_STATUS_AVAILABLE (0)  --we copy a frame in-->  TP_STATUS_SEND_REQUEST (1)
//!            --sendto() kick: the kernel builds an skb-->      TP_STATUS_SENDING (2)
//!            --the skb is freed (sent, or handed to the veth peer)-->  TP_STATUS_AVAILABLE
//! ```
//!
//! The kernel walks the ring from its own head in the same order, so the
//! frame at our `head` is free exactly when its status is AVAILABLE.
//! `tx_batch` copies every packet it takes into the ring (the CPU copies:
//! any packet of any pool or DMA domain can be sent, nothing to map) and
//! makes one `sendto` for the whole batch.

use super::abi::{self, frame};
use crate::mempool::Mempool;
use crate::offload;
use crate::packet::{BulkFree, Packet, PacketBatch, TX_REQUEST_MASK, TX_TSO};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Counters of one transmit ring.
#[derive(Debug, Clone, Copy, Default)]
pub struct TxCounters {
    pub packets: u64,
    pub bytes: u64,
    /// Packets that stayed with the caller because the ring was full.
    pub ring_full: u64,
    /// Packets refused (empty, longer than the interface takes, a bad
    /// offload request): dropped.
    pub invalid: u64,
    /// Packets whose offload request (checksums, TSO) was done here.
    pub software_fallback: u64,
    /// `sendto` kicks made.
    pub kicks: u64,
    /// Kicks the kernel refused for a reason other than a full queue.
    pub kick_errors: u64,
}

/// Our position in the transmit ring.
pub struct TxRing {
    base: NonNull<u8>,
    frame_size: usize,
    frame_nr: usize,
    /// Largest frame the kernel sends: the interface's MTU + 14 + 4
    /// (af_packet.c tpacket_snd caps at dev->mtu + hard_header_len +
    /// VLAN_HLEN) and what fits a frame.
    max_len: usize,
    /// The next frame we fill.
    head: usize,
    pub counters: TxCounters,
}

// SAFETY: as RxRing: the memory is the socket's mapping, synchronised
// with the kernel through the status words.
unsafe impl Send for TxRing {}

/// What happened to one packet offered to the ring.
enum Offer {
    Sent,
    Full,
    Refused,
}

impl TxRing {
    /// # Safety
    /// `base` points to a mapped TPACKET_V3 transmit ring of `frame_nr`
    /// frames of `frame_size` bytes that stays mapped while this exists.
    pub unsafe fn new(base: NonNull<u8>, frame_size: usize, frame_nr: usize, mtu: usize) -> TxRing {
        TxRing {
            base,
            frame_size,
            frame_nr,
            max_len: (mtu + 18).min(frame_size - frame::TX_DATA),
            head: 0,
            counters: TxCounters::default(),
        }
    }

    #[inline]
    fn frame(&self, index: usize) -> *mut u8 {
        // SAFETY: index < frame_nr: inside the mapping.
        unsafe { self.base.as_ptr().add(index * self.frame_size) }
    }

    #[inline]
    fn status(&self, index: usize) -> &AtomicU32 {
        // SAFETY: tp_status is an aligned u32 of the frame header, written
        // by the kernel concurrently: atomic access.
        unsafe { &*(self.frame(index).add(frame::STATUS) as *const AtomicU32) }
    }

    /// Frames not yet given back by the kernel (posted or being sent).
    pub fn in_flight(&self) -> usize {
        (0..self.frame_nr)
            .filter(|&i| self.status(i).load(Ordering::Acquire) != abi::TP_STATUS_KERNEL)
            .count()
    }

    /// Copies packets from the front of `batch` into the ring until it is
    /// full; returns how many were taken (sent or refused). The caller
    /// kicks the kernel once afterwards when this returned > 0.
    /// `pool` gives the buffers for software TCP segmentation.
    pub fn fill(&mut self, batch: &mut PacketBatch, pool: &Mempool) -> usize {
        // Each packet taken was copied or refused: its buffer goes back,
        // in bulk.
        let mut free = BulkFree::new();
        let mut full = false;
        let n = batch.len();
        let taken = batch.consume_front_while(n, |packet| match self.offer(&packet, pool) {
            Offer::Sent | Offer::Refused => {
                free.push(packet);
                Ok(())
            }
            Offer::Full => {
                full = true;
                Err(packet)
            }
        });
        drop(free);
        if full {
            self.counters.ring_full += batch.len() as u64;
        }
        taken
    }

    /// Copies one packet into the frame at `head`.
    #[inline]
    fn offer(&mut self, packet: &Packet, pool: &Mempool) -> Offer {
        if packet.tx_offload().flags & TX_REQUEST_MASK != 0 {
            return self.offer_with_request(packet, pool);
        }
        let len = packet.total_len();
        if len == 0 || len > self.max_len {
            self.counters.invalid += 1;
            return Offer::Refused;
        }
        // Acquire: the kernel's last reads of this frame (building the
        // skb) happen before we overwrite it.
        if self.status(self.head).load(Ordering::Acquire) != abi::TP_STATUS_KERNEL {
            return Offer::Full;
        }
        self.write_frame(packet, len, |_| Ok(()));
        Offer::Sent
    }

    /// Writes `packet` (`len` bytes, chained or not) into the frame at
    /// `head`, lets `finish` change the bytes in place (software
    /// checksums), marks it for sending and moves on. The frame is free
    /// and `len <= max_len`.
    #[inline]
    fn write_frame(
        &mut self,
        packet: &Packet,
        len: usize,
        finish: impl FnOnce(&mut [u8]) -> crate::error::Result<()>,
    ) -> bool {
        let f = self.frame(self.head);
        // SAFETY: the frame is ours (status AVAILABLE) and its data area
        // holds frame_size - 48 >= max_len >= len bytes.
        let data = unsafe { std::slice::from_raw_parts_mut(f.add(frame::TX_DATA), len) };
        let mut at = 0;
        for segment in packet.segments() {
            data[at..at + segment.len()].copy_from_slice(segment);
            at += segment.len();
        }
        if finish(data).is_err() {
            self.counters.invalid += 1;
            return false;
        }
        // SAFETY: header fields of our frame.
        unsafe {
            std::ptr::write_volatile(f.add(frame::NEXT_OFFSET) as *mut u32, 0);
            std::ptr::write_volatile(f.add(frame::LEN) as *mut u32, len as u32);
            std::ptr::write_volatile(f.add(frame::SNAPLEN) as *mut u32, len as u32);
        }
        // Release: the bytes and length are in place before the kernel
        // sees the request.
        self.status(self.head)
            .store(abi::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.counters.packets += 1;
        self.counters.bytes += len as u64;
        self.head += 1;
        if self.head == self.frame_nr {
            self.head = 0;
        }
        true
    }

    /// A packet asking for checksums or TCP segmentation: done here, in
    /// the ring's frames, with the bytes a NIC would send
    /// ([`crate::offload`]).
    #[cold]
    fn offer_with_request(&mut self, packet: &Packet, pool: &Mempool) -> Offer {
        let request = packet.tx_offload();
        if request.flags & TX_TSO != 0 {
            // Every segment needs a frame: all or nothing.
            let mut segments = Vec::new();
            if offload::segment(packet, pool, &mut segments).is_err()
                || segments.iter().any(|s| s.len() > self.max_len)
                || segments.len() > self.frame_nr
            {
                self.counters.invalid += 1;
                return Offer::Refused;
            }
            let free = (0..segments.len())
                .all(|k| self.status((self.head + k) % self.frame_nr).load(Ordering::Acquire) == abi::TP_STATUS_KERNEL);
            if !free {
                return Offer::Full;
            }
            for segment in &segments {
                self.write_frame(segment, segment.len(), |_| Ok(()));
            }
            self.counters.software_fallback += 1;
            return Offer::Sent;
        }
        let len = packet.total_len();
        if len == 0 || len > self.max_len {
            self.counters.invalid += 1;
            return Offer::Refused;
        }
        if self.status(self.head).load(Ordering::Acquire) != abi::TP_STATUS_KERNEL {
            return Offer::Full;
        }
        if self.write_frame(packet, len, |bytes| offload::fill_checksums(bytes, &request)) {
            self.counters.software_fallback += 1;
        }
        Offer::Sent
    }
}
