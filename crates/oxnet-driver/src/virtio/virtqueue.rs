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
    /// Chains of any length (a transmit queue, [`Virtqueue::new_chains`]):
    /// for each head, the descriptors its chain took, and for each
    /// descriptor the next one we linked it to — our own copy, so that
    /// freeing a chain never trusts what the device may have rewritten in
    /// the descriptor table. Empty for fixed-length chains.
    chain_len: Vec<u16>,
    links: Vec<u16>,
    /// A chain's header has a descriptor of its own (no ANY_LAYOUT).
    separate_header: bool,
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
            chain_len: Vec::new(),
            links: Vec::new(),
            separate_header: chain == 2,
        };
        Ok(queue)
    }

    /// A transmit queue whose packets take chains of any length (one
    /// descriptor per segment of a chained packet, §2.4.5), posted with
    /// [`post_chain`]; `separate_header`: the virtio-net header takes a
    /// descriptor of its own (a device without ANY_LAYOUT, §2.4.4).
    /// [`free_slots`] then counts free descriptors.
    ///
    /// [`post_chain`]: Virtqueue::post_chain
    /// [`free_slots`]: Virtqueue::free_slots
    pub fn new_chains(index: u16, size: u16, separate_header: bool, kind: MemoryKind) -> Result<Virtqueue> {
        let mut queue = Virtqueue::new(index, size, 1, kind)?;
        queue.chain_len = vec![0; size as usize];
        queue.links = vec![0; size as usize];
        queue.separate_header = separate_header;
        Ok(queue)
    }

    /// Descriptors [`post_chain`] needs for `packet`.
    ///
    /// [`post_chain`]: Virtqueue::post_chain
    #[inline]
    pub fn descriptors_for(&self, packet: &Packet) -> usize {
        packet.segment_count() + self.separate_header as usize
    }

    /// Offers a (possibly chained) packet for the device to read: the
    /// `header_len` bytes in the head room of the first segment, then every
    /// segment, as one descriptor chain (§2.4.5: VIRTQ_DESC_F_NEXT links
    /// them; the device sees one packet). Err: not enough free descriptors
    /// (see [`descriptors_for`]), or a queue not made by [`new_chains`].
    ///
    /// [`descriptors_for`]: Virtqueue::descriptors_for
    /// [`new_chains`]: Virtqueue::new_chains
    #[inline]
    pub fn post_chain(&mut self, packet: Packet, header_len: usize) -> std::result::Result<(), Packet> {
        if self.chain_len.is_empty() {
            return Err(packet);
        }
        let header_iova = packet.data_iova() - header_len as u64;
        if !packet.is_chained() {
            // The common case, without walking a chain.
            let Some(head) = self.free_heads.pop() else {
                return Err(packet);
            };
            if self.separate_header {
                let Some(data) = self.free_heads.pop() else {
                    self.free_heads.push_front(head);
                    return Err(packet);
                };
                self.write_desc(head, header_iova, header_len as u32, DESC_F_NEXT, data);
                self.write_desc(data, packet.data_iova(), packet.len() as u32, 0, 0);
                self.links[head as usize] = data;
                self.chain_len[head as usize] = 2;
            } else {
                self.write_desc(head, header_iova, (header_len + packet.len()) as u32, 0, 0);
                self.chain_len[head as usize] = 1;
            }
            self.offer(head);
            self.slots[head as usize] = Some(packet);
            return Ok(());
        }
        // Counted from the segments themselves, not the head's count.
        let needed = packet.segments().count() + self.separate_header as usize;
        if needed > self.free_heads.len() as usize {
            return Err(packet);
        }
        // Each descriptor is written once its successor is known.
        let mut head = None;
        let mut pending: Option<(u16, u64, u32)> = None;
        let mut put = |queue: &mut Virtqueue, addr: u64, len: u32| {
            let id = queue.free_heads.pop().expect("counted above");
            match pending {
                Some((prev, prev_addr, prev_len)) => {
                    queue.write_desc(prev, prev_addr, prev_len, DESC_F_NEXT, id);
                    queue.links[prev as usize] = id;
                }
                None => head = Some(id),
            }
            pending = Some((id, addr, len));
        };
        if self.separate_header {
            put(self, header_iova, header_len as u32);
            put(self, packet.data_iova(), packet.len() as u32);
        } else {
            put(self, header_iova, (header_len + packet.len()) as u32);
        }
        for segment in packet.segments().skip(1) {
            put(self, segment.data_iova(), segment.len() as u32);
        }
        let (last, addr, len) = pending.expect("at least one descriptor");
        self.write_desc(last, addr, len, 0, 0);
        let head = head.expect("at least one descriptor");
        self.chain_len[head as usize] = needed as u16;
        self.offer(head);
        self.slots[head as usize] = Some(packet);
        Ok(())
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
                    if self.chain_len.is_empty() {
                        self.free_heads.push(id as u16);
                    } else {
                        // Every descriptor of the chain, by our own links.
                        let mut d = id as u16;
                        for _ in 0..self.chain_len[id as usize] {
                            self.free_heads.push(d);
                            d = self.links[d as usize];
                        }
                    }
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

    /// Gives back the head just taken by [`HeadFifo::pop`].
    #[inline]
    fn push_front(&mut self, head: u16) {
        self.front = if self.front == 0 {
            self.heads.len() as u32 - 1
        } else {
            self.front - 1
        };
        self.heads[self.front as usize] = head;
        self.count += 1;
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
    fn a_chained_packet_becomes_one_descriptor_chain_and_is_freed_whole() {
        let pool = Mempool::new("vq", 16, MemoryKind::Plain).unwrap();
        for separate_header in [false, true] {
            let mut q = Virtqueue::new_chains(1, 8, separate_header, MemoryKind::Plain).unwrap();
            let mut head = pool.alloc().unwrap();
            head.set_len(100).unwrap();
            let (a, b) = (head.data_iova(), {
                let mut s = pool.alloc().unwrap();
                s.set_len(200).unwrap();
                let iova = s.data_iova();
                head.append(s);
                iova
            });
            let mut s = pool.alloc().unwrap();
            s.set_len(300).unwrap();
            let c = s.data_iova();
            head.append(s);
            let need = 3 + separate_header as usize;
            assert_eq!(q.descriptors_for(&head), need);
            q.post_chain(head, 10).unwrap();
            q.publish();
            assert_eq!(q.free_slots(), 8 - need);
            // §2.4.5: NEXT on all but the last, `next` naming the following
            // descriptor; the device reads 10 + 600 bytes in all.
            let mut got = Vec::new();
            let mut d = avail_entry(&q, 0);
            loop {
                let (addr, len, flags, next) = desc(&q, d);
                got.push((addr, len));
                if flags & DESC_F_NEXT == 0 {
                    assert_eq!(flags, 0, "the device only reads");
                    break;
                }
                d = next;
            }
            let want = if separate_header {
                vec![(a - 10, 10), (a, 100), (b, 200), (c, 300)]
            } else {
                vec![(a - 10, 110), (b, 200), (c, 300)]
            };
            assert_eq!(got, want);
            device_uses(&q, avail_entry(&q, 0), 0, 1);
            let (p, _) = q.pop_used().unwrap();
            assert_eq!(p.total_len(), 600);
            assert_eq!(q.free_slots(), 8);
        }
    }

    #[test]
    fn a_chain_longer_than_the_free_descriptors_is_handed_back() {
        let pool = Mempool::new("vq", 16, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new_chains(1, 2, false, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        for _ in 0..2 {
            p.append(pool.alloc().unwrap());
        }
        assert!(q.post_chain(p, 10).is_err());
        assert_eq!(q.free_slots(), 2);
    }

    #[test]
    fn a_plain_packet_that_finds_one_free_descriptor_of_two_waits() {
        let pool = Mempool::new("vq", 16, MemoryKind::Plain).unwrap();
        let mut q = Virtqueue::new_chains(1, 4, true, MemoryKind::Plain).unwrap();
        let mut chain = pool.alloc().unwrap();
        chain.append(pool.alloc().unwrap());
        q.post_chain(chain, 10).unwrap(); // header + 2 segments
        assert_eq!(q.free_slots(), 1);
        assert!(q.post_chain(pool.alloc().unwrap(), 10).is_err());
        assert_eq!(q.free_slots(), 1, "the descriptor taken is given back");
        q.publish();
        device_uses(&q, avail_entry(&q, 0), 0, 1);
        assert!(q.pop_used().is_some());
        assert_eq!(q.free_slots(), 4);
        q.post_chain(pool.alloc().unwrap(), 10).unwrap();
        q.post_chain(pool.alloc().unwrap(), 10).unwrap();
        assert_eq!(q.free_slots(), 0);
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
