//! Mempool: fixed-size packet buffers in DMA memory, handed out from a free
//! stack.
//!
//! A stack, not a queue: the buffer freed last is handed out next, so it is
//! likely still in the cache (ixy's choice, and DPDK's per-core caches).
//!
//! # Freeing on another thread
//! ixy's mempool is single-threaded: a packet received on one core and freed
//! on another corrupts it. Here the free stack sits behind a small spinlock,
//! taken once per *batch* by [`Mempool::alloc_batch`] and by
//! [`crate::packet::free_batch`] (which the drivers use when they clean
//! their TX rings), and once per packet only when a single [`Packet`] is
//! dropped. The lock is uncontended in the common run-to-completion case
//! (one core allocates and frees), where it costs one atomic
//! compare-and-swap and one store per batch; `oxnet bench` measures it.
//!
//! # Lifetime
//! A [`Mempool`] is a counted handle. Every outstanding [`Packet`] counts as
//! a handle too, so the memory stays valid until the last handle and the last
//! packet are gone, whichever comes last, on whichever thread.

use crate::domain::DmaDomain;
use crate::error::{Error, Result};
use crate::memory::{DmaMemory, MemoryKind};
use crate::packet::{
    fresh_request_word, request_domain_bits, BufferHeader, Metadata, Packet, PacketBatch, HEADER_SIZE,
    REQUEST_WORD_OFFSET,
};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Head room in front of the packet data of every buffer, for headers a
/// driver or protocol prepends (VirtIO's net header, an encapsulation). Same
/// as DPDK's RTE_PKTMBUF_HEADROOM.
pub const DEFAULT_HEADROOM: usize = 128;
/// Data room after the head room: a full 2 KiB receive buffer (82599
/// SRRCTL.BSIZEPACKET is in 1 KiB units).
pub const DEFAULT_DATA_ROOM: usize = 2048;

pub(crate) struct PoolInner {
    /// Handles plus outstanding packets; the pool is freed at zero.
    refs: AtomicUsize,
    /// Owns the mapping the buffers live in (unmapped when the pool goes).
    memory: DmaMemory,
    name: String,
    entry_size: usize,
    headroom: usize,
    num_entries: usize,
    lock: AtomicBool,
    /// Headers of the free buffers; guarded by `lock`.
    free_stack: UnsafeCell<Vec<NonNull<BufferHeader>>>,
    alloc_failures: AtomicU64,
    /// The request word of a fresh buffer ([`fresh_request_word`]: head
    /// room, one segment, the pool's domain bits), computed once.
    fresh_word: u64,
}

/// A pool of equally sized DMA buffers. Cloning gives another handle to the
/// same pool.
pub struct Mempool {
    inner: NonNull<PoolInner>,
}

// SAFETY: all shared mutable state of PoolInner (the free stack) is guarded
// by its spinlock; counters are atomics; the memory is owned by the pool.
unsafe impl Send for Mempool {}
// SAFETY: see above.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool of `num_entries` buffers with `DEFAULT_HEADROOM` bytes
    /// of head room and `DEFAULT_DATA_ROOM` bytes of data room each.
    pub fn new(name: &str, num_entries: usize, kind: MemoryKind) -> Result<Mempool> {
        Mempool::with_layout(name, num_entries, DEFAULT_HEADROOM, DEFAULT_DATA_ROOM, kind)
    }

    /// Creates a pool with an explicit head room and data room per buffer.
    ///
    /// Buffers never cross a 2 MiB page, so each is physically contiguous
    /// even in huge-page memory.
    pub fn with_layout(
        name: &str,
        num_entries: usize,
        headroom: usize,
        data_room: usize,
        kind: MemoryKind,
    ) -> Result<Mempool> {
        let entry_size = HEADER_SIZE + headroom + data_room;
        if num_entries == 0 || num_entries > u32::MAX as usize {
            return Err(Error::Config(format!(
                "mempool '{name}': {num_entries} entries is not a usable size"
            )));
        }
        if entry_size > crate::memory::HUGE_PAGE_SIZE || !entry_size.is_multiple_of(64) {
            return Err(Error::Config(format!(
                "mempool '{name}': head room + data room ({}) must be a multiple of 64 below 2 MiB",
                headroom + data_room
            )));
        }
        if headroom > u16::MAX as usize {
            return Err(Error::Config(format!(
                "mempool '{name}': head room {headroom} too large"
            )));
        }
        let (entries_per_chunk, chunk_bytes) = match kind {
            MemoryKind::HugePages => (
                crate::memory::HUGE_PAGE_SIZE / entry_size,
                crate::memory::HUGE_PAGE_SIZE,
            ),
            MemoryKind::Plain | MemoryKind::CpuOnly => (num_entries, num_entries * entry_size),
        };
        let chunks = num_entries.div_ceil(entries_per_chunk);
        let memory = DmaMemory::allocate(chunks * chunk_bytes, kind)?;
        let inner = Box::new(PoolInner {
            refs: AtomicUsize::new(1),
            memory,
            name: name.to_string(),
            entry_size,
            headroom,
            num_entries,
            lock: AtomicBool::new(false),
            free_stack: UnsafeCell::new(Vec::with_capacity(num_entries)),
            alloc_failures: AtomicU64::new(0),
            fresh_word: fresh_request_word(headroom as u16, DmaDomain::of(kind)),
        });
        let inner = NonNull::from(Box::leak(inner));
        // SAFETY: just created, not shared yet.
        let pool = unsafe { inner.as_ref() };
        // SAFETY: not shared yet, no lock needed.
        let stack = unsafe { &mut *pool.free_stack.get() };
        // Write each buffer's header once; push in reverse so a fresh pool
        // hands out buffers in address order.
        for i in (0..num_entries).rev() {
            let offset = (i / entries_per_chunk) * chunk_bytes + (i % entries_per_chunk) * entry_size;
            // SAFETY: offset + entry_size lies inside the pool's memory by
            // the layout above; the header is 64-byte aligned because
            // entry sizes and chunk starts are.
            let header = unsafe { pool.memory.virt().add(offset) } as *mut BufferHeader;
            // SAFETY: as above; a valid place for a BufferHeader.
            unsafe {
                header.write(BufferHeader {
                    pool: inner,
                    iova: pool.memory.iova(offset + HEADER_SIZE),
                    room: (headroom + data_room) as u32,
                    len: 0,
                    request: request_domain_bits(pool.memory.dma_domain()),
                    data_offset: headroom as u16,
                    segments: 1,
                    meta: Metadata::default(),
                    next: None,
                    total_len: 0,
                    l3_len: 0,
                    l2_len: 0,
                    l4_len: 0,
                    mss: 0,
                    domain: pool.memory.dma_domain(),
                    refs: 0,
                });
                stack.push(NonNull::new_unchecked(header));
            }
        }
        Ok(Mempool { inner })
    }

    #[inline]
    fn inner(&self) -> &PoolInner {
        // SAFETY: a handle keeps the pool alive (refs > 0).
        unsafe { self.inner.as_ref() }
    }

    /// The pool's name (for messages).
    pub fn name(&self) -> &str {
        &self.inner().name
    }

    /// Number of buffers in the pool.
    pub fn size(&self) -> usize {
        self.inner().num_entries
    }

    /// Bytes per buffer (64-byte header + head room + data room).
    pub fn entry_size(&self) -> usize {
        self.inner().entry_size
    }

    /// Bytes of data room after the head room.
    pub fn data_room(&self) -> usize {
        self.inner().entry_size - HEADER_SIZE - self.inner().headroom
    }

    /// The kind of memory the buffers live in (a packet generator making
    /// its own pool for a device uses the same kind as the device's pool).
    pub fn memory_kind(&self) -> MemoryKind {
        self.inner().memory.kind()
    }

    /// The DMA domain of its buffers: the devices that can use them
    /// without a copy ([`crate::domain`]).
    pub fn dma_domain(&self) -> crate::domain::DmaDomain {
        self.inner().memory.dma_domain()
    }

    /// Bytes of head room in front of the data.
    pub fn headroom(&self) -> usize {
        self.inner().headroom
    }

    /// Buffers currently free.
    pub fn free_count(&self) -> usize {
        let inner = self.inner();
        inner.lock();
        // SAFETY: guarded by the lock.
        let n = unsafe { (*inner.free_stack.get()).len() };
        inner.unlock();
        n
    }

    /// Allocation attempts that found the pool empty.
    pub fn alloc_failures(&self) -> u64 {
        self.inner().alloc_failures.load(Ordering::Relaxed)
    }

    /// Allocates one packet of length 0, or says the pool is exhausted.
    pub fn alloc(&self) -> Result<Packet> {
        let inner = self.inner();
        inner.lock();
        // SAFETY: guarded by the lock.
        let header = unsafe { (*inner.free_stack.get()).pop() };
        inner.unlock();
        match header {
            Some(header) => {
                inner.refs.fetch_add(1, Ordering::Relaxed);
                Ok(fresh_packet(header, inner.fresh_word))
            }
            None => {
                inner.alloc_failures.fetch_add(1, Ordering::Relaxed);
                Err(Error::PoolExhausted {
                    pool: self.name().to_string(),
                    size: self.size(),
                })
            }
        }
    }

    /// Allocates up to `n` packets (length 0) onto `batch`; returns how many.
    /// Fewer than `n` means the pool ran out (counted in
    /// [`Mempool::alloc_failures`]).
    #[inline]
    pub fn alloc_batch(&self, batch: &mut PacketBatch, n: usize) -> usize {
        self.take(batch, n, fresh_packet)
    }

    /// Like [`Mempool::alloc_batch`], but only the data offset, the offload
    /// requests and the segment count are reset (one 8-byte store): length
    /// and metadata hold stale values that a receiving driver overwrites
    /// anyway (two stores per packet saved on the receive path).
    #[inline]
    pub(crate) fn alloc_batch_for_receive(&self, batch: &mut PacketBatch, n: usize) -> usize {
        let fresh = self.inner().fresh_word;
        self.take(batch, n, move |header, _| {
            // SAFETY: as in fresh_packet; the word at REQUEST_WORD_OFFSET is
            // 8-byte aligned inside the header (request, data_offset,
            // segments), and `next` is already null on a free buffer.
            unsafe {
                let word = (header.as_ptr() as *mut u8).add(REQUEST_WORD_OFFSET) as *mut u64;
                word.write(fresh);
                Packet::from_header(header)
            }
        })
    }

    #[inline]
    fn take(&self, batch: &mut PacketBatch, n: usize, make: impl Fn(NonNull<BufferHeader>, u64) -> Packet) -> usize {
        let inner = self.inner();
        // Never more than the pool holds: `n = usize::MAX` must not reach
        // `reserve` (capacity overflow panic).
        let wanted = n;
        let n = n.min(self.size());
        batch.reserve(n);
        inner.lock();
        // SAFETY: guarded by the lock.
        let stack = unsafe { &mut *inner.free_stack.get() };
        let take = n.min(stack.len());
        let start = stack.len() - take;
        inner.refs.fetch_add(take, Ordering::Relaxed);
        for &header in stack[start..].iter().rev() {
            // SAFETY: `reserve(n)` above made room for `take <= n` packets.
            unsafe { batch.push_reserved(make(header, inner.fresh_word)) };
        }
        stack.truncate(start);
        inner.unlock();
        if take < wanted {
            inner.alloc_failures.fetch_add(1, Ordering::Relaxed);
        }
        take
    }
}

/// A packet for a buffer just taken off the free stack: empty, data after
/// the head room, no metadata.
#[inline]
fn fresh_packet(header: NonNull<BufferHeader>, fresh_word: u64) -> Packet {
    // SAFETY: the caller took the buffer off the free stack and counted a
    // pool reference for it; nobody else can reach its header. The word at
    // REQUEST_WORD_OFFSET is 8-byte aligned inside it (request with the
    // pool's domain bits, data offset, segment count: the pool's
    // `fresh_word`).
    unsafe {
        let h = &mut *header.as_ptr();
        h.len = 0;
        h.meta = Metadata::default();
        ((header.as_ptr() as *mut u8).add(REQUEST_WORD_OFFSET) as *mut u64).write(fresh_word);
        Packet::from_header(header)
    }
}

impl PoolInner {
    #[inline]
    fn lock(&self) {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.lock.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        self.lock.store(false, Ordering::Release);
    }

    pub(crate) fn headroom(&self) -> usize {
        self.headroom
    }
}

/// Returns buffers to the pool at `pool` and drops their references.
///
/// # Safety
/// Each header must belong to a packet of this pool that is being given up
/// (its `Packet` forgotten), each exactly once.
#[inline]
pub(crate) unsafe fn give_back(pool: NonNull<PoolInner>, headers: &[NonNull<BufferHeader>]) {
    // SAFETY: the packets being returned hold refs, so the pool is alive.
    let inner = unsafe { pool.as_ref() };
    inner.lock();
    // SAFETY: guarded by the lock.
    let stack = unsafe { &mut *inner.free_stack.get() };
    debug_assert!(stack.len() + headers.len() <= inner.num_entries, "buffer freed twice");
    stack.extend_from_slice(headers);
    inner.unlock();
    // SAFETY: the refs of these packets are released here.
    unsafe { release(pool, headers.len()) };
}

/// Drops `n` references; frees the pool when none are left.
///
/// # Safety
/// The caller owns `n` references to the pool.
pub(crate) unsafe fn release(pool: NonNull<PoolInner>, n: usize) {
    // SAFETY: the caller's refs keep the pool alive until the fetch_sub.
    let previous = unsafe { pool.as_ref() }.refs.fetch_sub(n, Ordering::Release);
    if previous == n {
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: that was the last reference; nobody can reach the pool.
        drop(unsafe { Box::from_raw(pool.as_ptr()) });
    }
}

impl Clone for Mempool {
    fn clone(&self) -> Mempool {
        self.inner().refs.fetch_add(1, Ordering::Relaxed);
        Mempool { inner: self.inner }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: this handle owns one reference.
        unsafe { release(self.inner, 1) };
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mempool({}, {} x {} bytes)",
            self.name(),
            self.size(),
            self.entry_size()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> Mempool {
        Mempool::new("test", n, MemoryKind::Plain).unwrap()
    }

    #[test]
    fn exhaustion_is_an_error_and_every_buffer_returns() {
        let pool = pool(64);
        let mut batch = PacketBatch::with_capacity(64);
        assert_eq!(pool.alloc_batch(&mut batch, 100), 64);
        assert_eq!(pool.free_count(), 0);
        assert_eq!(pool.alloc_failures(), 1);
        match pool.alloc() {
            Err(Error::PoolExhausted { size: 64, .. }) => {}
            other => panic!("expected exhaustion, got {other:?}"),
        }
        batch.clear();
        assert_eq!(pool.free_count(), 64);
        assert!(pool.alloc().is_ok());
    }

    #[test]
    fn buffers_are_distinct_and_inside_the_pool() {
        let pool = pool(300);
        let mut batch = PacketBatch::with_capacity(300);
        assert_eq!(pool.alloc_batch(&mut batch, 300), 300);
        let mut iovas: Vec<u64> = batch.iter().map(|p| p.buffer_iova()).collect();
        iovas.sort();
        iovas.dedup();
        assert_eq!(iovas.len(), 300);
        for w in iovas.windows(2) {
            assert!(w[1] - w[0] >= pool.entry_size() as u64);
        }
        assert_eq!(pool.entry_size(), 64 + 64 + 128 + 2048);
        assert_eq!(pool.data_room(), 2048);
    }

    #[test]
    fn free_stack_reuses_the_last_freed_buffer() {
        let pool = pool(8);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        let b_iova = b.buffer_iova();
        drop(a);
        drop(b);
        assert_eq!(pool.alloc().unwrap().buffer_iova(), b_iova);
    }

    #[test]
    fn packets_outlive_their_pool_handle() {
        let pool = pool(4);
        let mut p = pool.alloc().unwrap();
        drop(pool);
        p.set_len(60).unwrap();
        p[0] = 0xAB;
        assert_eq!(p[0], 0xAB);
        drop(p); // frees the pool memory; Miri/ASan would flag a use after free
    }

    #[test]
    fn cross_thread_free_returns_every_buffer() {
        let pool = pool(1024);
        let (tx, rx) = std::sync::mpsc::sync_channel::<PacketBatch>(4);
        let freer = std::thread::spawn(move || {
            let mut freed = 0;
            while let Ok(batch) = rx.recv() {
                freed += batch.len();
                drop(batch);
            }
            freed
        });
        let mut allocated = 0;
        for round in 0..2000 {
            let mut batch = PacketBatch::with_capacity(32);
            // Allocation may briefly fail while the other thread still holds
            // buffers; that is the documented behaviour, not an error here.
            allocated += pool.alloc_batch(&mut batch, 32);
            if round % 2 == 0 {
                tx.send(batch).unwrap();
            } else {
                crate::packet::free_batch(&mut batch);
            }
        }
        drop(tx);
        let freed = freer.join().unwrap();
        assert!(allocated > 0 && freed > 0);
        assert_eq!(pool.free_count(), 1024, "every buffer came back exactly once");
    }
}
