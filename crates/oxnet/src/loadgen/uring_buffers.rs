//! The receive buffers of one io_uring echo server thread.
//!
//! Where the kernel has provided-buffer rings (IORING_REGISTER_PBUF_RING,
//! Linux 5.19), a fixed set of buffers is lent to the kernel through one:
//! a recv names the buffer group instead of a buffer, and the kernel picks
//! a buffer only when data is there, so an idle connection holds none.
//! Elsewhere each recv is given a buffer of its own, taken from a free
//! list that grows as needed (bounded by the connections times the
//! server's per-connection limit).
//!
//! A buffer's memory must stay valid while the kernel may write into it:
//! the owner drops (or leaks) a [`Buffers`] only after its ring is gone
//! and no recv is in flight.

use io_uring::Submitter;
use std::alloc::{self, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// Bytes in one buffer: one recv reads at most this much.
pub const BUF_SIZE: usize = 16 * 1024;
/// The buffer group id recvs name (one group per ring).
pub const GROUP: u16 = 0;
/// The buffer ring's alignment: the kernel maps it by pages.
const PAGE: usize = 4096;

/// One entry of a provided-buffer ring, as the kernel reads it (struct
/// io_uring_buf of include/uapi/linux/io_uring.h). The ring's tail is
/// the `resv` field of entry 0.
#[repr(C)]
struct RingEntry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The ring the kernel takes buffers from.
struct ProvidedRing {
    /// The entries (page-aligned, `mask + 1` of them).
    base: *mut RingEntry,
    layout: Layout,
    /// Our copy of the tail (the next entry we fill).
    tail: u16,
    mask: u16,
    /// Buffers the kernel has (lent and not yet picked by a recv).
    in_kernel: usize,
}

/// A thread's receive buffers, named by id (a ring's buffer id, or an
/// index into the free list's buffers).
pub struct Buffers {
    /// Each buffer's memory, `BUF_SIZE` bytes (raw: the kernel writes
    /// into it while we hold the pointer).
    bufs: Vec<*mut u8>,
    /// Without a ring: the buffers no recv or connection holds.
    free: Vec<u32>,
    ring: Option<ProvidedRing>,
}

impl Buffers {
    /// `count` buffers (a power of two, at most 32768) lent to the kernel
    /// through a provided-buffer ring registered with `submitter` as
    /// group [`GROUP`]. Fails where the kernel has no buffer rings.
    pub fn with_ring(submitter: &Submitter<'_>, count: u16) -> io::Result<Buffers> {
        assert!(count.is_power_of_two(), "a buffer ring's size is a power of two");
        let layout = Layout::from_size_align(usize::from(count) * std::mem::size_of::<RingEntry>(), PAGE)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout's size is not zero (count >= 1).
        let base = unsafe { alloc::alloc_zeroed(layout) }.cast::<RingEntry>();
        if base.is_null() {
            alloc::handle_alloc_error(layout);
        }
        // SAFETY: `base` points to `count` zeroed entries that stay
        // allocated until Drop, which runs after the ring is destroyed
        // (the owner's field order) or never (leaked).
        let registered = unsafe { submitter.register_buf_ring_with_flags(base as u64, count, GROUP, 0) };
        if let Err(e) = registered {
            // SAFETY: allocated above with this layout, not registered.
            unsafe { alloc::dealloc(base.cast(), layout) };
            return Err(e);
        }
        let mut b = Buffers {
            bufs: Vec::with_capacity(usize::from(count)),
            free: Vec::new(),
            ring: Some(ProvidedRing {
                base,
                layout,
                tail: 0,
                mask: count - 1,
                in_kernel: 0,
            }),
        };
        for id in 0..u32::from(count) {
            b.bufs.push(new_buffer());
            b.give_back(id);
        }
        Ok(b)
    }

    /// Buffers given to each recv by the server (no ring).
    pub fn own() -> Buffers {
        Buffers {
            bufs: Vec::new(),
            free: Vec::new(),
            ring: None,
        }
    }

    /// Whether recvs take their buffer from the ring (buffer select).
    pub fn is_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Buffers the kernel can pick now (ring), or that a recv could take
    /// at once (the free list; more are made on demand).
    pub fn available(&self) -> usize {
        match &self.ring {
            Some(r) => r.in_kernel,
            None => usize::MAX,
        }
    }

    /// Without a ring: a buffer for a recv (a free one, or a new one).
    pub fn take(&mut self) -> u32 {
        debug_assert!(self.ring.is_none(), "ring buffers are taken by the kernel");
        self.free.pop().unwrap_or_else(|| {
            self.bufs.push(new_buffer());
            (self.bufs.len() - 1) as u32
        })
    }

    /// With a ring: the kernel picked buffer `id` for a completed recv;
    /// it is ours until [`Buffers::give_back`].
    pub fn picked(&mut self, id: u32) {
        if let Some(r) = &mut self.ring {
            r.in_kernel = r.in_kernel.saturating_sub(1);
        }
        debug_assert!((id as usize) < self.bufs.len());
    }

    /// Whether `id` names a buffer (a completion's buffer id is checked
    /// before it is used).
    pub fn is_valid(&self, id: u32) -> bool {
        (id as usize) < self.bufs.len()
    }

    /// Buffer `id`'s memory (`BUF_SIZE` bytes).
    pub fn ptr(&self, id: u32) -> *mut u8 {
        self.bufs[id as usize]
    }

    /// Buffer `id` is free again: back into the ring (published at
    /// once), or onto the free list.
    pub fn give_back(&mut self, id: u32) {
        let addr = self.bufs[id as usize] as u64;
        let Some(r) = &mut self.ring else {
            self.free.push(id);
            return;
        };
        let slot = usize::from(r.tail & r.mask);
        // SAFETY: `slot` is within the ring's entries. The fields are
        // written one by one, never entry 0's `resv` (the shared tail);
        // the kernel reads an entry only once the tail below covers it.
        unsafe {
            let e = r.base.add(slot);
            std::ptr::addr_of_mut!((*e).addr).write(addr);
            std::ptr::addr_of_mut!((*e).len).write(BUF_SIZE as u32);
            std::ptr::addr_of_mut!((*e).bid).write(id as u16);
        }
        r.tail = r.tail.wrapping_add(1);
        r.in_kernel += 1;
        // SAFETY: entry 0's `resv` is the tail, a u16 the kernel reads
        // with acquire; ours is the only store, with release so that the
        // entry written above is seen first.
        let tail = unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*r.base).resv)) };
        tail.store(r.tail, Ordering::Release);
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        for &p in &self.bufs {
            // SAFETY: made by `new_buffer` (a boxed slice of BUF_SIZE),
            // freed once; the owner drops us only when the kernel is done.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, BUF_SIZE)) });
        }
        if let Some(r) = &self.ring {
            // SAFETY: allocated in `with_ring` with this layout.
            unsafe { alloc::dealloc(r.base.cast(), r.layout) };
        }
    }
}

/// A zeroed buffer of `BUF_SIZE` bytes, as a raw pointer (freed in Drop).
fn new_buffer() -> *mut u8 {
    Box::into_raw(vec![0u8; BUF_SIZE].into_boxed_slice()).cast::<u8>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_buffers_are_reused_before_new_ones_are_made() {
        let mut b = Buffers::own();
        let (x, y) = (b.take(), b.take());
        assert_eq!((x, y), (0, 1));
        b.give_back(x);
        assert_eq!(b.take(), 0, "the free one first");
        assert_eq!(b.take(), 2);
        assert!(b.is_valid(2) && !b.is_valid(3));
    }
}
