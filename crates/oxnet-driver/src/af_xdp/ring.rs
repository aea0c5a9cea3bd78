//! The four single-producer/single-consumer rings of an XDP socket
//! (Documentation/networking/af_xdp.rst, "Rings"): fill and TX are
//! produced by us and consumed by the kernel, RX and completion the other
//! way round.
//!
//! Each ring is an mmap'ed area holding a producer index, a consumer index,
//! a flags word and an array of entries (u64 UMEM addresses for fill and
//! completion, `struct xdp_desc` for RX and TX), at the offsets the kernel
//! reports through `getsockopt(XDP_MMAP_OFFSETS)`. libxdp's
//! `xsk_umem__create`/`xsk_socket__create` do that mapping and store the
//! pointers in a `struct xsk_ring_prod`/`xsk_ring_cons` (the layout of
//! DEFINE_XSK_RING in xsk.h, [`XskRing`]); the producer/consumer functions
//! that go with it are inline in the header, so this file implements them.
//!
//! Indexes are free-running u32 counters; an entry lives at
//! `index & mask` (ring sizes are powers of two). Memory ordering as in
//! the kernel's xsk_queue.h comment: a producer writes its entries, then
//! publishes the producer index with release semantics; a consumer reads
//! the producer index with acquire semantics before reading entries, and
//! publishes its consumer index with release semantics after it is done
//! with them (so the producer may reuse them).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

/// `struct xsk_ring_prod` / `struct xsk_ring_cons` (same layout, xsk.h).
///
/// libxdp fills it in; afterwards only this module touches it.
/// `cached_prod` / `cached_cons` are our private copies of the two shared
/// indexes (here: the plain index values, re-read from the shared words
/// with [`XskRing::sync`] after creation).
#[repr(C)]
#[derive(Debug)]
pub struct XskRing {
    cached_prod: u32,
    cached_cons: u32,
    mask: u32,
    size: u32,
    producer: *mut u32,
    consumer: *mut u32,
    ring: *mut c_void,
    flags: *mut u32,
}

// SAFETY: the pointers point into mappings owned by the socket/UMEM that
// owns this ring; the ring is used by one thread at a time (&mut self).
unsafe impl Send for XskRing {}

impl Default for XskRing {
    fn default() -> XskRing {
        XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: 0,
            size: 0,
            producer: std::ptr::null_mut(),
            consumer: std::ptr::null_mut(),
            ring: std::ptr::null_mut(),
            flags: std::ptr::null_mut(),
        }
    }
}

impl XskRing {
    fn shared(word: *mut u32) -> &'static AtomicU32 {
        // SAFETY: `word` points to an aligned u32 in a ring mapping that
        // outlives every use of the ring; the kernel accesses it atomically
        // too (READ_ONCE/smp_store_release in xsk_queue.h).
        unsafe { AtomicU32::from_ptr(word) }
    }

    /// Whether libxdp mapped this ring (a socket without TX has none).
    pub fn is_mapped(&self) -> bool {
        !self.ring.is_null() && !self.producer.is_null() && !self.consumer.is_null()
    }

    /// Entries in the ring.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Takes the shared indexes as our starting point (after creation,
    /// libxdp's own cached values follow another convention).
    pub fn sync(&mut self) {
        self.cached_prod = Self::shared(self.producer).load(Ordering::Acquire);
        self.cached_cons = Self::shared(self.consumer).load(Ordering::Acquire);
    }

    /// The kernel set XDP_RING_NEED_WAKEUP on this ring: it will not look
    /// at it again until we kick it with a system call
    /// (af_xdp.rst, "XDP_USE_NEED_WAKEUP bind flag").
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        !self.flags.is_null() && Self::shared(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side (fill, TX) ----

    /// Free entries, at most `want`: re-reads the consumer index only when
    /// the cached one does not show enough room.
    #[inline]
    pub fn prod_free(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < want {
            self.cached_cons = Self::shared(self.consumer).load(Ordering::Acquire);
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        free.min(want)
    }

    /// The `i`-th entry after the last submitted one, as a u64 address
    /// (fill ring). Call only for `i < prod_free(..)`.
    #[inline]
    pub fn prod_addr(&mut self, i: u32) -> &mut u64 {
        let at = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: at <= mask < size, the ring array holds `size` u64 (fill
        // ring); the entry is ours until we publish it.
        unsafe { &mut *(self.ring as *mut u64).add(at) }
    }

    /// The `i`-th entry after the last submitted one, as a descriptor (TX).
    #[inline]
    pub fn prod_desc(&mut self, i: u32) -> &mut libc::xdp_desc {
        let at = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: as prod_addr, for an array of `size` xdp_desc (TX ring).
        unsafe { &mut *(self.ring as *mut libc::xdp_desc).add(at) }
    }

    /// Publishes `n` written entries to the kernel.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        Self::shared(self.producer).store(self.cached_prod, Ordering::Release);
    }

    // ---- consumer side (RX, completion) ----

    /// Entries ready to be consumed, at most `want`.
    #[inline]
    pub fn cons_ready(&mut self, want: u32) -> u32 {
        let mut ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready < want {
            self.cached_prod = Self::shared(self.producer).load(Ordering::Acquire);
            ready = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        ready.min(want)
    }

    /// The `i`-th unconsumed entry as an address (completion ring).
    #[inline]
    pub fn cons_addr(&self, i: u32) -> u64 {
        let at = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: at < size; the entry was published by the kernel (we
        // read the producer index with acquire) and is not reused before
        // we release it.
        unsafe { *(self.ring as *const u64).add(at) }
    }

    /// The `i`-th unconsumed entry as a descriptor (RX ring).
    #[inline]
    pub fn cons_desc(&self, i: u32) -> libc::xdp_desc {
        let at = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: as cons_addr, for an array of xdp_desc.
        let d = unsafe { &*(self.ring as *const libc::xdp_desc).add(at) };
        libc::xdp_desc {
            addr: d.addr,
            len: d.len,
            options: d.options,
        }
    }

    /// Gives `n` consumed entries back to the kernel.
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        Self::shared(self.consumer).store(self.cached_cons, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over local memory, to check the index arithmetic without a
    /// kernel: we play both sides.
    struct Local {
        prod: Box<u32>,
        cons: Box<u32>,
        flags: Box<u32>,
        entries: Vec<u64>,
    }

    fn ring(local: &mut Local) -> XskRing {
        let size = local.entries.len() as u32;
        XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: size - 1,
            size,
            producer: &mut *local.prod,
            consumer: &mut *local.cons,
            ring: local.entries.as_mut_ptr() as *mut c_void,
            flags: &mut *local.flags,
        }
    }

    #[test]
    fn producer_sees_room_freed_by_consumer_across_index_wrap() {
        // Start near u32::MAX so the free-running indexes wrap.
        let start = u32::MAX - 2;
        let mut l = Local {
            prod: Box::new(start),
            cons: Box::new(start),
            flags: Box::new(0),
            entries: vec![0; 4],
        };
        let mut p = ring(&mut l);
        p.sync();
        let mut c = ring(&mut l);
        c.sync();
        assert_eq!(p.prod_free(8), 4, "an empty ring of 4 has 4 free entries");
        for i in 0..4 {
            *p.prod_addr(i) = 100 + i as u64;
        }
        p.submit(4);
        assert_eq!(p.prod_free(1), 0, "full");
        assert_eq!(c.cons_ready(8), 4);
        let got: Vec<u64> = (0..4).map(|i| c.cons_addr(i)).collect();
        assert_eq!(got, [100, 101, 102, 103], "in order across the wrap");
        c.release(3);
        assert_eq!(p.prod_free(8), 3, "three entries released");
        assert_eq!(c.cons_ready(8), 1);
        assert!(!p.needs_wakeup());
        *l.flags = libc::XDP_RING_NEED_WAKEUP;
        assert!(p.needs_wakeup());
    }
}
