//! Split virtqueues (VirtIO 1.0 §2.4): a descriptor table, an available
//! ring the driver writes and a used ring the device writes, in DMA memory.
//!
//! Layout with the legacy alignment (§2.4.2 "Legacy Interfaces: A Note on
//! Virtqueue Layout"): the used ring starts on the next 4096-byte boundary
//! after the available ring, so the whole queue is found from one page frame
//! number (legacy PCI's QueueAddress register).
//!
//! One packet occupies a *chain* of one descriptor (header and data in one
//! buffer, allowed once VIRTIO_F_ANY_LAYOUT is negotiated) or two (header,
//! then data: the layout legacy devices assume otherwise). Both point into
//! the packet's own buffer: the virtio-net header sits in the head room just
//! in front of the data (ixy's trick), so nothing is copied.

use crate::error::{Error, Result};
use crate::memory::{DmaMemory, MemoryKind};
use crate::packet::Packet;
use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{fence, Ordering};

/// Alignment of the used ring for legacy devices (§2.4.2).
pub const LEGACY_ALIGN: usize = 4096;
const DESC_SIZE: usize = 16;

/// VIRTQ_DESC_F_NEXT: the chain continues in `next` (§2.4.5).
pub const DESC_F_NEXT: u16 = 1;
/// VIRTQ_DESC_F_WRITE: the device writes this buffer (§2.4.5).
pub const DESC_F_WRITE: u16 = 2;
/// VIRTQ_USED_F_NO_NOTIFY: the device asks not to be notified (§2.4.7).
pub const USED_F_NO_NOTIFY: u16 = 1;
/// VIRTQ_AVAIL_F_NO_INTERRUPT: the driver asks not to be interrupted (§2.4.7).
pub const AVAIL_F_NO_INTERRUPT: u16 = 1;

/// Byte offsets of the three parts of a queue of `size` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VringLayout {
    /// Entries.
    pub size: u16,
    /// Offset of the available ring.
    pub avail: usize,
    /// Offset of the used ring.
    pub used: usize,
    /// Total bytes.
    pub total: usize,
}

impl VringLayout {
    /// §2.4: descriptors (16 × size), then avail (flags, idx, ring[size],
    /// used_event), then — aligned — used (flags, idx, ring[size] of 8-byte
    /// elements, avail_event).
    pub fn new(size: u16) -> VringLayout {
        let n = size as usize;
        let avail = DESC_SIZE * n;
        let avail_end = avail + 2 * (3 + n);
        let used = avail_end.div_ceil(LEGACY_ALIGN) * LEGACY_ALIGN;
        let used_end = used + 2 * 3 + 8 * n;
        VringLayout {
            size,
            avail,
            used,
            total: used_end.div_ceil(LEGACY_ALIGN) * LEGACY_ALIGN,
        }
    }
}

/// A split virtqueue and the packets the device holds.
pub struct Virtqueue {
    /// Queue number on the device.
    pub index: u16,
    layout: VringLayout,
    memory: DmaMemory,
    /// Descriptors per packet (1 or 2).
    chain: u16,
    /// Our copy of avail.idx (what we have published or will publish).
    avail_idx: u16,
    /// used.idx up to which we have consumed.
    last_used: u16,
    /// Chain heads not in use, first in first out: a device that completes
    /// in order (every vhost backend and QEMU do) then sees descriptors and
    /// available-ring entries used in sequence, and entries that already
    /// hold the right head are not rewritten (DPDK's virtio PMD does the
    /// same): fewer cache lines change hands between the two cores.
    free_heads: HeadFifo,
    /// Packet behind each chain head.
    slots: Vec<Option<Packet>>,
    /// Used elements that named no chain of ours (a device bug): skipped.
    bad_used: u64,
}

impl Virtqueue {
    /// Allocates a queue of `size` entries (a power of two) whose packets
    /// each use `chain` descriptors.
    pub fn new(index: u16, size: u16, chain: u16, kind: MemoryKind) -> Result<Virtqueue> {
        if size == 0 || !size.is_power_of_two() || size > 32768 {
            return Err(Error::Device(format!(
                "virtqueue {index}: size {size} is not a power of two up to 32768"
            )));
        }
        if !(1..=3).contains(&chain) || size < chain {
            return Err(Error::Device(format!(
                "virtqueue {index}: unusable chain length {chain}"
            )));
        }
        let layout = VringLayout::new(size);
        if kind == MemoryKind::HugePages && layout.total > crate::memory::HUGE_PAGE_SIZE {
            return Err(Error::Device(format!(
                "virtqueue {index}: {size} entries do not fit one huge page"
            )));
        }
        let memory = DmaMemory::allocate(layout.total, kind)?;
        // SAFETY: our own fresh allocation of layout.total bytes.
        unsafe { std::ptr::write_bytes(memory.virt(), 0, layout.total) };
        let heads = size / chain;
        // Chains start at multiples of `chain` (for 3: 0, 3, 6, ...).
        let queue = Virtqueue {
            index,
            layout,
            memory,
            chain,
            avail_idx: 0,
            last_used: 0,
            // Highest head on top: heads are handed out 0, chain, 2·chain ...
            free_heads: HeadFifo::new(heads, chain),
            slots: (0..size).map(|_| None).collect(),
            bad_used: 0,
        };
        Ok(queue)
    }

    /// Entries in the queue.
    pub fn size(&self) -> u16 {
        self.layout.size
    }

    /// Where the parts are.
    pub fn layout(&self) -> VringLayout {
        self.layout
    }

    /// IOVA of the descriptor table (start of the queue).
    pub fn desc_iova(&self) -> u64 {
        self.memory.iova(0)
    }

    /// IOVA of the available ring.
    pub fn avail_iova(&self) -> u64 {
        self.memory.iova(self.layout.avail)
    }

    /// IOVA of the used ring.
    pub fn used_iova(&self) -> u64 {
        self.memory.iova(self.layout.used)
    }

    /// Virtual address of the descriptor table (vhost-user wants these).
    pub fn desc_virt(&self) -> u64 {
        self.memory.virt() as u64
    }

    /// Virtual address of the available ring.
    pub fn avail_virt(&self) -> u64 {
        self.memory.virt() as u64 + self.layout.avail as u64
    }

    /// Virtual address of the used ring.
    pub fn used_virt(&self) -> u64 {
        self.memory.virt() as u64 + self.layout.used as u64
    }

    /// Packets that can still be posted.
    #[inline]
    pub fn free_slots(&self) -> usize {
        self.free_heads.len() as usize
    }

    /// Used elements that named no chain of ours.
    pub fn bad_used_count(&self) -> u64 {
        self.bad_used
    }

    #[inline]
    fn base(&self) -> *mut u8 {
        self.memory.virt()
    }

    #[inline]
    fn write_desc(&mut self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        // SAFETY: i < size, so the 16 bytes are inside the descriptor table.
        unsafe {
            let d = self.base().add(i as usize * DESC_SIZE);
            write_volatile(d as *mut u64, addr.to_le());
            write_volatile(d.add(8) as *mut u32, len.to_le());
            write_volatile(d.add(12) as *mut u16, flags.to_le());
            write_volatile(d.add(14) as *mut u16, next.to_le());
        }
    }

    /// Offers `packet` to the device: for a receive queue (`device_writes`)
    /// its whole buffer after the header room; for a transmit queue the
    /// header and the data. `header_len` bytes in front of the data are the
    /// virtio-net header. Not visible to the device before [`publish`].
    ///
    /// [`publish`]: Virtqueue::publish
    #[inline]
    pub fn post(&mut self, packet: Packet, header_len: usize, device_writes: bool) -> std::result::Result<(), Packet> {
        let Some(head) = self.free_heads.pop() else {
            return Err(packet);
        };
        let header_iova = packet.data_iova() - header_len as u64;
        let data_len = if device_writes { packet.capacity() } else { packet.len() } as u32;
        let write = if device_writes { DESC_F_WRITE } else { 0 };
        if self.chain == 1 {
            self.write_desc(head, header_iova, header_len as u32 + data_len, write, 0);
        } else {
            self.write_desc(head, header_iova, header_len as u32, write | DESC_F_NEXT, head + 1);
            self.write_desc(head + 1, packet.data_iova(), data_len, write, 0);
        }
        self.offer(head);
        self.slots[head as usize] = Some(packet);
        Ok(())
    }

    /// Puts `head` into the next available-ring entry, unless it is there
    /// already.
    #[inline]
    fn offer(&mut self, head: u16) {
        let slot = self.avail_idx & (self.layout.size - 1);
        // SAFETY: avail ring entry `slot` < size lies inside the queue.
        unsafe {
            let entry = (self.base().add(self.layout.avail + 4) as *mut u16).add(slot as usize);
            if read_volatile(entry) != head.to_le() {
                write_volatile(entry, head.to_le());
            }
        }
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Offers a control command (§5.1.6.5): `out` bytes at the start of
    /// the packet's data for the device to read — class, command, data, in
    /// separate descriptors for header and data as legacy devices expect —
    /// followed by one byte the device writes (the ack). Needs a queue made
    /// with chains of 3.
    pub fn post_control(&mut self, packet: Packet) -> std::result::Result<(), Packet> {
        if self.chain != 3 || packet.len() < 4 {
            return Err(packet);
        }
        let Some(head) = self.free_heads.pop() else {
            return Err(packet);
        };
        let base = packet.data_iova();
        let data_len = packet.len() as u32 - 3;
        self.write_desc(head, base, 2, DESC_F_NEXT, head + 1);
        self.write_desc(head + 1, base + 2, data_len, DESC_F_NEXT, head + 2);
        self.write_desc(head + 2, base + 2 + data_len as u64, 1, DESC_F_WRITE, 0);
        self.offer(head);
        self.slots[head as usize] = Some(packet);
        Ok(())
    }

    /// Makes everything posted visible: one write of avail.idx per batch,
    /// after the ring entries (§2.4.6.2: a write barrier in between).
    #[inline]
    pub fn publish(&mut self) {
        fence(Ordering::Release);
        // SAFETY: avail.idx is at avail + 2.
        unsafe {
            write_volatile(
                self.base().add(self.layout.avail + 2) as *mut u16,
                self.avail_idx.to_le(),
            )
        };
    }

    /// Asks the device not to interrupt when it has used buffers
    /// (VIRTQ_AVAIL_F_NO_INTERRUPT, §2.4.7.1): a polling driver needs none,
    /// and a vhost-user back-end would otherwise write the call eventfd —
    /// a system call — after every batch.
    pub fn suppress_interrupts(&self) {
        // SAFETY: avail.flags is at the start of the available ring.
        unsafe {
            write_volatile(
                self.base().add(self.layout.avail) as *mut u16,
                AVAIL_F_NO_INTERRUPT.to_le(),
            )
        };
    }

    /// Lets the device interrupt again after used buffers (`true`: avail
    /// flags 0) or asks it not to (VIRTQ_AVAIL_F_NO_INTERRUPT, §2.4.7.1).
    /// A full barrier follows, so that a caller that checks the used ring
    /// next sees what the device wrote before it read the flag: a packet
    /// that raced with arming is found by that check, not lost.
    pub fn set_interrupts(&self, on: bool) {
        let flags = if on { 0 } else { AVAIL_F_NO_INTERRUPT };
        // SAFETY: avail.flags is at the start of the available ring.
        unsafe { write_volatile(self.base().add(self.layout.avail) as *mut u16, flags.to_le()) };
        fence(Ordering::SeqCst);
    }

    /// True unless the device set VIRTQ_USED_F_NO_NOTIFY (§2.4.7.2). A full
    /// barrier first, so the flag is read after avail.idx was written.
    #[inline]
    pub fn needs_notification(&self) -> bool {
        fence(Ordering::SeqCst);
        // SAFETY: used.flags is at the start of the used ring.
        let flags = u16::from_le(unsafe { read_volatile(self.base().add(self.layout.used) as *const u16) });
        flags & USED_F_NO_NOTIFY == 0
    }

    /// Takes the next chain the device has finished with: the packet and
    /// the number of bytes the device wrote (§2.4.8).
    #[inline]
    pub fn pop_used(&mut self) -> Option<(Packet, u32)> {
        loop {
            // SAFETY: used.idx is at used + 2.
            let used_idx = u16::from_le(unsafe { read_volatile(self.base().add(self.layout.used + 2) as *const u16) });
            if used_idx == self.last_used {
                return None;
            }
            // Read the element only after seeing the index move.
            fence(Ordering::Acquire);
            let slot = (self.last_used & (self.layout.size - 1)) as usize;
            // SAFETY: element `slot` < size lies inside the used ring.
            let (id, len) = unsafe {
                let elem = self.base().add(self.layout.used + 4 + slot * 8);
                (
                    u32::from_le(read_volatile(elem as *const u32)),
                    u32::from_le(read_volatile(elem.add(4) as *const u32)),
                )
            };
            self.last_used = self.last_used.wrapping_add(1);
            // The device is outside our control: a used element naming a
            // chain we never posted is counted and skipped, never trusted.
            let packet = (id < self.layout.size as u32 && id % self.chain as u32 == 0)
                .then(|| self.slots[id as usize].take())
                .flatten();
            match packet {
                Some(packet) => {
                    self.free_heads.push(id as u16);
                    return Some((packet, len));
                }
                None => self.bad_used += 1,
            }
        }
    }
}

impl Virtqueue {
    /// Packets posted that the device has not given back yet.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().filter(|slot| slot.is_some()).count()
    }

    /// Empties the queue as if it had just been made (rings zeroed, indices
    /// 0, every head free) and frees the packets it held; returns how many.
    /// For a device that went away and came back (a vhost-user back-end
    /// that restarted): the new one starts from index 0 (SET_VRING_BASE 0)
    /// and knows nothing of the old chains.
    pub fn reset(&mut self) -> usize {
        // SAFETY: our own allocation of layout.total bytes; no device uses
        // it (the caller guarantees the old device is gone).
        unsafe { std::ptr::write_bytes(self.memory.virt(), 0, self.layout.total) };
        self.avail_idx = 0;
        self.last_used = 0;
        self.free_heads = HeadFifo::new(self.layout.size / self.chain, self.chain);
        self.slots.iter_mut().filter_map(Option::take).count()
    }
}

/// A first-in first-out ring of free chain heads.
struct HeadFifo {
    heads: Box<[u16]>,
    /// Next head to hand out (index into `heads`, wrapping).
    front: u32,
    /// Heads available.
    count: u32,
}

impl HeadFifo {
    fn new(heads: u16, chain: u16) -> HeadFifo {
        HeadFifo {
            heads: (0..heads).map(|h| h * chain).collect(),
            front: 0,
            count: heads as u32,
        }
    }

    #[inline]
    fn len(&self) -> u32 {
        self.count
    }

    #[inline]
    fn pop(&mut self) -> Option<u16> {
        if self.count == 0 {
            return None;
        }
        let head = self.heads[self.front as usize];
        self.front += 1;
        if self.front as usize == self.heads.len() {
            self.front = 0;
        }
        self.count -= 1;
        Some(head)
    }

    #[inline]
    fn push(&mut self, head: u16) {
        let mut back = (self.front + self.count) as usize;
        if back >= self.heads.len() {
            back -= self.heads.len();
        }
        self.heads[back] = head;
        self.count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mempool;

    #[test]
    fn legacy_layout_matches_the_spec_formula() {
        // §2.4.2: for 256 entries the descriptors take 4096 bytes, the
        // available ring 6 + 512, so the used ring starts at 8192.
        let l = VringLayout::new(256);
        assert_eq!((l.avail, l.used, l.total), (4096, 8192, 12288));
        let l = VringLayout::new(1024);
        assert_eq!((l.avail, l.used), (16384, 20480));
    }

    /// Plays the device: marks `head` used with `len` bytes.
    fn device_uses(q: &Virtqueue, head: u16, len: u32, used_idx: u16) {
        unsafe {
            let used = q.base().add(q.layout.used);
            let slot = (used_idx.wrapping_sub(1) & (q.size() - 1)) as usize;
            write_volatile(used.add(4 + slot * 8) as *mut u32, head as u32);
            write_volatile(used.add(8 + slot * 8) as *mut u32, len);
            write_volatile(used.add(2) as *mut u16, used_idx);
        }
    }

    fn avail_entry(q: &Virtqueue, i: u16) -> u16 {
        unsafe { read_volatile((q.base().add(q.layout.avail + 4) as *const u16).add(i as usize)) }
    }

    fn desc(q: &Virtqueue, i: u16) -> (u64, u32, u16, u16) {
        unsafe {
            let d = q.base().add(i as usize * 16);
            (
                read_volatile(d as *const u64),
                read_volatile(d.add(8) as *const u32),
                read_volatile(d.add(12) as *const u16),
                read_volatile(d.add(14) as *const u16),
            )
        }
    }

    #[test]
    fn two_descriptor_chains_put_the_header_in_the_head_room() {
        let pool = Mempool::new("vq", 8, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new(1, 8, 2, MemoryKind::Plain).unwrap();
        assert_eq!(q.free_slots(), 4);
        let mut p = pool.alloc().unwrap();
        p.set_len(60).unwrap();
        let data = p.data_iova();
        q.post(p, 10, false).unwrap();
        q.publish();
        assert_eq!(avail_entry(&q, 0), 0);
        assert_eq!(desc(&q, 0), (data - 10, 10, DESC_F_NEXT, 1));
        assert_eq!(desc(&q, 1), (data, 60, 0, 0));
        assert!(q.pop_used().is_none());
        device_uses(&q, 0, 70, 1);
        let (p, len) = q.pop_used().unwrap();
        assert_eq!((p.data_iova(), len), (data, 70));
        assert_eq!(q.free_slots(), 4);
    }

    #[test]
    fn receive_buffers_are_device_writable_and_a_bogus_used_id_is_skipped() {
        let pool = Mempool::new("vq", 8, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new(0, 4, 1, MemoryKind::Plain).unwrap();
        let p = pool.alloc().unwrap();
        let data = p.data_iova();
        q.post(p, 10, true).unwrap();
        q.publish();
        assert_eq!(desc(&q, 0), (data - 10, 10 + 2048, DESC_F_WRITE, 0));
        device_uses(&q, 3, 99, 1); // never posted
        device_uses(&q, 0, 70, 2);
        let (_, len) = q.pop_used().unwrap();
        assert_eq!(len, 70);
        assert_eq!(q.bad_used_count(), 1);
    }

    #[test]
    fn reset_frees_what_the_device_held_and_starts_from_index_0() {
        let pool = Mempool::new("vq", 8, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new(1, 4, 1, MemoryKind::Plain).unwrap();
        for _ in 0..3 {
            q.post(pool.alloc().unwrap(), 10, false).unwrap();
        }
        q.publish();
        device_uses(&q, 0, 60, 1);
        let (used, _) = q.pop_used().unwrap();
        drop(used);
        assert_eq!(q.in_flight(), 2);
        assert_eq!(pool.free_count(), 8 - 2);
        assert_eq!(q.reset(), 2, "two chains were still posted");
        assert_eq!((q.in_flight(), q.free_slots(), pool.free_count()), (0, 4, 8));
        // §2.4.6 / §2.4.8: a new device starts with avail.idx and used.idx 0.
        // SAFETY (test): avail.idx / used.idx lie inside the queue.
        let idx = |q: &Virtqueue, offset: usize| unsafe { read_volatile(q.base().add(offset + 2) as *const u16) };
        assert_eq!((idx(&q, q.layout.avail), idx(&q, q.layout.used)), (0, 0));
        q.post(pool.alloc().unwrap(), 10, false).unwrap();
        q.publish();
        assert_eq!((avail_entry(&q, 0), idx(&q, q.layout.avail)), (0, 1));
    }

    #[test]
    fn a_full_queue_hands_the_packet_back() {
        let pool = Mempool::new("vq", 8, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new(0, 2, 2, MemoryKind::Plain).unwrap();
        q.post(pool.alloc().unwrap(), 10, false).unwrap();
        assert!(q.post(pool.alloc().unwrap(), 10, false).is_err());
        assert!(
            Virtqueue::new(0, 100, 1, MemoryKind::Plain).is_err(),
            "not a power of two"
        );
    }
}
