//! `Packet`: one buffer of a [`Mempool`], owned.
//!
//! A packet derefs to its data (`&[u8]`), knows the IOVA a device needs, and
//! carries metadata filled by the driver on receive or read by it on transmit.
//! Dropping a packet returns its buffer to its pool — applications never free
//! by hand. Buffer layout:
//!
//! ```text
//! | head room (128) .......... | data (len) ........ | tail room |
//! ^ buffer_iova()              ^ data_iova()
//! ```

use crate::error::{Error, Result};
use crate::mempool::{give_back, PoolInner};
use std::ptr::NonNull;

/// Per-packet metadata exchanged with the driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metadata {
    /// RSS hash the NIC computed (0 if none).
    pub rss_hash: u32,
    /// Flag bits, see the `FLAG_*` constants.
    pub flags: u32,
}

/// The NIC checked the IPv4 header checksum and found it good.
pub const FLAG_IP_CSUM_GOOD: u32 = 1 << 0;
/// The NIC checked the TCP/UDP checksum and found it good.
pub const FLAG_L4_CSUM_GOOD: u32 = 1 << 1;
/// The NIC found a bad checksum.
pub const FLAG_CSUM_BAD: u32 = 1 << 2;

/// A packet buffer owned by the holder.
pub struct Packet {
    buf: NonNull<u8>,
    iova: u64,
    pool: NonNull<PoolInner>,
    index: u32,
    data_offset: u16,
    len: u32,
    /// Metadata (RSS hash, checksum flags, offload requests).
    pub meta: Metadata,
}

// SAFETY: a Packet exclusively owns its buffer; returning it to the pool is
// thread-safe (the pool's free stack is locked), so it may move between threads.
unsafe impl Send for Packet {}
// SAFETY: &Packet only gives read access to the owned buffer.
unsafe impl Sync for Packet {}

impl Packet {
    /// # Safety
    /// `buf`/`iova` must describe buffer `index` of `pool`, taken off its
    /// free stack, with one pool reference counted for this packet.
    #[inline]
    pub(crate) unsafe fn from_raw(
        buf: NonNull<u8>,
        iova: u64,
        pool: NonNull<PoolInner>,
        index: u32,
        headroom: u16,
    ) -> Packet {
        Packet {
            buf,
            iova,
            pool,
            index,
            data_offset: headroom,
            len: 0,
            meta: Metadata::default(),
        }
    }

    #[inline]
    fn pool(&self) -> &PoolInner {
        // SAFETY: this packet holds a reference to its pool.
        unsafe { self.pool.as_ref() }
    }

    /// Length of the data in bytes.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes the data may grow to (buffer size minus the current head room).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.pool().entry_size() - self.data_offset as usize
    }

    /// Head room left in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.data_offset as usize
    }

    /// Sets the data length; the bytes are whatever the buffer holds.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        if len > self.capacity() {
            return Err(Error::Config(format!(
                "packet length {len} exceeds the buffer's capacity of {} bytes",
                self.capacity()
            )));
        }
        self.len = len as u32;
        Ok(())
    }

    /// Grows the data at the front by `n` bytes taken from the head room and
    /// returns them (a driver header, an encapsulation).
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8]> {
        if n > self.data_offset as usize {
            return Err(Error::Config(format!(
                "cannot prepend {n} bytes: only {} bytes of head room",
                self.data_offset
            )));
        }
        self.data_offset -= n as u16;
        self.len += n as u32;
        Ok(&mut self[..n])
    }

    /// The `n` bytes of head room just in front of the data (where a driver
    /// writes its header), or `None` if the head room is shorter.
    #[inline]
    pub fn head_room_mut(&mut self, n: usize) -> Option<&mut [u8]> {
        let start = (self.data_offset as usize).checked_sub(n)?;
        // SAFETY: [start, data_offset) lies inside our own buffer.
        Some(unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(start), n) })
    }

    /// Removes `n` bytes from the front of the data (they become head room).
    pub fn strip_front(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::Config(format!(
                "cannot strip {n} bytes from a {}-byte packet",
                self.len
            )));
        }
        self.data_offset += n as u16;
        self.len -= n as u32;
        Ok(())
    }

    /// IOVA of the first data byte: what a device reads from or writes to.
    #[inline]
    pub fn data_iova(&self) -> u64 {
        self.iova + self.data_offset as u64
    }

    /// IOVA of the start of the buffer (head room included).
    #[inline]
    pub fn buffer_iova(&self) -> u64 {
        self.iova
    }

    /// Resets the data to start after the pool's head room, length 0.
    #[inline]
    pub fn reset(&mut self) {
        self.data_offset = self.pool().headroom() as u16;
        self.len = 0;
        self.meta = Metadata::default();
    }

    /// The whole data room after the head room, whatever `len` is: what a
    /// device may write on receive.
    pub fn data_room_mut(&mut self) -> &mut [u8] {
        let cap = self.capacity();
        // SAFETY: the buffer is ours and `data_offset + cap` is its size.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(self.data_offset as usize), cap) }
    }
}

impl std::ops::Deref for Packet {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: data_offset + len never exceeds the buffer (set_len checks).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().add(self.data_offset as usize), self.len as usize) }
    }
}

impl std::ops::DerefMut for Packet {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref; the packet owns its buffer exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(self.data_offset as usize), self.len as usize) }
    }
}

impl Drop for Packet {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this packet owns buffer `index` and one pool reference.
        unsafe { give_back(self.pool, &[self.index]) };
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packet(len {}, iova {:#x})", self.len, self.data_iova())
    }
}

/// Frees packets in bulk: consecutive packets of the same pool go back with
/// one lock round-trip. Drivers use it to clean their TX rings.
pub struct BulkFree {
    pool: Option<NonNull<PoolInner>>,
    indices: [u32; BulkFree::CAPACITY],
    count: usize,
}

impl BulkFree {
    const CAPACITY: usize = 64;

    /// An empty collector.
    #[inline]
    pub fn new() -> BulkFree {
        BulkFree {
            pool: None,
            indices: [0; BulkFree::CAPACITY],
            count: 0,
        }
    }

    /// Takes a packet to be freed.
    #[inline]
    pub fn push(&mut self, packet: Packet) {
        if self.pool != Some(packet.pool) || self.count == BulkFree::CAPACITY {
            self.flush();
            self.pool = Some(packet.pool);
        }
        self.indices[self.count] = packet.index;
        self.count += 1;
        std::mem::forget(packet);
    }

    /// Returns what was collected to its pool.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(pool) = self.pool {
            if self.count > 0 {
                // SAFETY: every index was taken from a forgotten packet of
                // `pool`, exactly once.
                unsafe { give_back(pool, &self.indices[..self.count]) };
            }
        }
        self.count = 0;
    }
}

impl Default for BulkFree {
    fn default() -> BulkFree {
        BulkFree::new()
    }
}

impl Drop for BulkFree {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Drops every packet of `batch` in bulk.
pub fn free_batch(batch: &mut PacketBatch) {
    let mut free = BulkFree::new();
    for packet in batch.packets.drain(..) {
        free.push(packet);
    }
}

/// An ordered batch of packets, the unit of `rx_batch` and `tx_batch`.
#[derive(Debug, Default)]
pub struct PacketBatch {
    packets: Vec<Packet>,
}

impl PacketBatch {
    /// An empty batch with room for `n` packets.
    pub fn with_capacity(n: usize) -> PacketBatch {
        PacketBatch {
            packets: Vec::with_capacity(n),
        }
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// True if there are no packets.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Appends a packet.
    #[inline]
    pub fn push(&mut self, packet: Packet) {
        self.packets.push(packet);
    }

    /// Removes the last packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        self.packets.pop()
    }

    /// Makes room for `n` more packets.
    #[inline]
    pub fn reserve(&mut self, n: usize) {
        self.packets.reserve(n);
    }

    /// Removes the first `n` packets (they move to the caller, e.g. a
    /// driver's TX ring).
    #[inline]
    pub fn drain_front(&mut self, n: usize) -> std::vec::Drain<'_, Packet> {
        self.packets.drain(..n)
    }

    /// Moves all packets of `other` to the end of this batch.
    pub fn append(&mut self, other: &mut PacketBatch) {
        self.packets.append(&mut other.packets);
    }

    /// Frees every packet (in bulk).
    pub fn clear(&mut self) {
        free_batch(self);
    }

    /// The packets, in order.
    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, Packet> {
        self.packets.iter()
    }

    /// The packets, in order, mutably.
    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Packet> {
        self.packets.iter_mut()
    }
}

impl std::ops::Index<usize> for PacketBatch {
    type Output = Packet;
    fn index(&self, i: usize) -> &Packet {
        &self.packets[i]
    }
}

impl std::ops::IndexMut<usize> for PacketBatch {
    fn index_mut(&mut self, i: usize) -> &mut Packet {
        &mut self.packets[i]
    }
}

impl Drop for PacketBatch {
    fn drop(&mut self) {
        free_batch(self);
    }
}

impl<'a> IntoIterator for &'a PacketBatch {
    type Item = &'a Packet;
    type IntoIter = std::slice::Iter<'a, Packet>;
    fn into_iter(self) -> Self::IntoIter {
        self.packets.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryKind, Mempool};

    #[test]
    fn head_room_prepend_and_strip() {
        let pool = Mempool::new("t", 4, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        assert_eq!(p.headroom(), 128);
        assert_eq!(p.capacity(), 2048);
        p.set_len(60).unwrap();
        let iova = p.data_iova();
        p.prepend(10).unwrap().fill(7);
        assert_eq!(p.len(), 70);
        assert_eq!(p.data_iova(), iova - 10);
        assert_eq!(&p[..10], &[7; 10]);
        assert!(p.prepend(200).is_err(), "not enough head room");
        p.strip_front(10).unwrap();
        assert_eq!(p.data_iova(), iova);
        assert!(p.set_len(4096).is_err());
    }

    #[test]
    fn bulk_free_handles_mixed_pools() {
        let a = Mempool::new("a", 100, MemoryKind::Plain).unwrap();
        let b = Mempool::new("b", 100, MemoryKind::Plain).unwrap();
        let mut batch = PacketBatch::with_capacity(200);
        for _ in 0..70 {
            batch.push(a.alloc().unwrap());
            batch.push(b.alloc().unwrap());
        }
        assert_eq!(a.free_count(), 30);
        batch.clear();
        assert_eq!(a.free_count(), 100);
        assert_eq!(b.free_count(), 100);
    }

    #[test]
    fn drain_front_keeps_the_rest_in_order() {
        let pool = Mempool::new("t", 8, MemoryKind::Plain).unwrap();
        let mut batch = PacketBatch::with_capacity(8);
        pool.alloc_batch(&mut batch, 5);
        for (i, p) in batch.iter_mut().enumerate() {
            p.set_len(1).unwrap();
            p[0] = i as u8;
        }
        let taken: Vec<Packet> = batch.drain_front(2).collect();
        assert_eq!(taken.len(), 2);
        assert_eq!(batch.iter().map(|p| p[0]).collect::<Vec<_>>(), vec![2, 3, 4]);
    }
}
