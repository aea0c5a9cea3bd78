//! Shared buffers and attached segments: one buffer's bytes in several
//! packets (and chains) at once, without a copy.
//!
//! A [`Packet`] owns its buffer exclusively, and a chain links buffers
//! through their headers, so one buffer cannot sit in two chains. Zero-copy
//! senders need exactly that: a TCP connection keeps the application's
//! payload until the peer acknowledges it and sends ranges of it (again on
//! a retransmission), and a cache server sends the same stored value in
//! many responses at once, each a header packet followed by the value.
//!
//! The mechanism (DPDK has the same idea as indirect mbufs,
//! `rte_pktmbuf_attach`, with a per-buffer `refcnt`):
//! * [`SharedBuffer::new`] turns a single-buffer packet into a *direct*
//!   buffer with a reference count (an atomic in its header, so handles
//!   and segments may live on any thread). The bytes are read-only from
//!   then on.
//! * [`SharedBuffer::attach`] makes an *attached segment*: a packet with a
//!   header of its own (length, data offset, chain link, annotations, from
//!   an [`AttachPool`]) whose data is a range of the direct buffer. It
//!   holds one reference. It may stand alone or be chained
//!   ([`Packet::append`]) behind a header packet, as any segment.
//! * Dropping a handle or freeing an attached segment (however: `Drop`,
//!   `free_batch`, `BulkFree`, a driver's ring cleaning) drops one
//!   reference; the direct buffer goes back to its pool when the last one
//!   goes.
//!
//! # Lifetime
//! A buffer given to [`SharedBuffer::new`] is the stack's or the
//! application's to read, never to write, until every handle and every
//! attached segment is gone: a device may be reading it (by DMA) for a
//! segment queued long ago. [`SharedBuffer::try_into_packet`] gives the
//! packet back (writable again) only when its handle is the last
//! reference.
//!
//! # What the drivers see
//! An attached segment's header carries its direct buffer's IOVA (plus the
//! range's offset) and DMA domain, so a NIC reads it by address like any
//! segment, and `Deref` reads the same bytes for the software paths (TAP,
//! AF_PACKET, AF_XDP and memif copies, [`crate::offload::linearize`],
//! software segmentation). A flag in its request word
//! (`REQUEST_ATTACHED`) sends it down the transmit slow paths and makes
//! it read-only: `DerefMut` and `data_room_mut` panic (a program error),
//! [`Packet::prepend`] is refused and [`Packet::head_room_mut`] is `None`
//! (virtio's net header goes in front of the head's data, so virtio
//! refuses an attached *head*, counted, and takes attached segments after
//! a header packet), and [`Packet::set_tx_offload`] leaves it without
//! requests (a device fulfils them by writing into the head's bytes).
//!
//! # Cost for everything else
//! Plain packets never read the count. Every free path already tested one
//! word of the header for a chain; it now tests the request word for
//! `REQUEST_CHAINED | REQUEST_ATTACHED` instead (the same one test), so an
//! attached segment takes the chains' slow way out and a plain packet's
//! free costs what it did. `Deref` and `DerefMut` test the flag in the
//! header line they read anyway (the same test: code that reads and then
//! writes a byte pays it once) and jump out of line for an attached
//! segment. Plain rings (the 82599's and 82576's plain path) hold no
//! attached segment: a standalone one is copied there (counted in
//! `tx_software_fallback`), so their bulk free needs no test.

use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::{give_back, Mempool};
use crate::packet::{request_domain_bits, BufferHeader, Packet, HEADER_SIZE, REQUEST_ATTACHED};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Where an attached segment keeps what it refers to: in its own (unused)
/// room, the address of its range's first byte, then its direct buffer's
/// header.
const DATA_SLOT: usize = HEADER_SIZE;
const DIRECT_SLOT: usize = HEADER_SIZE + 8;
/// An attached segment's own room: the two pointers above, rounded up to
/// the pools' 64-byte entry granularity.
const ATTACH_ROOM: usize = 64;
/// More references than this is a leak (a handle cloned in a loop): abort
/// rather than wrap, as `Arc` does.
const MAX_REFS: u32 = u32::MAX / 2;

/// Headers for attached segments: a pool whose buffers have no data room
/// of their own (CPU memory; no device ever reads a header). Cloning
/// gives another handle to the same pool.
#[derive(Clone)]
pub struct AttachPool {
    pool: Mempool,
}

impl AttachPool {
    /// A pool of `num_entries` attached-segment headers.
    pub fn new(name: &str, num_entries: usize) -> Result<AttachPool> {
        let pool = Mempool::with_layout(name, num_entries, 0, ATTACH_ROOM, MemoryKind::CpuOnly)?;
        Ok(AttachPool { pool })
    }

    /// Headers currently free.
    pub fn free_count(&self) -> usize {
        self.pool.free_count()
    }

    /// Number of headers in the pool.
    pub fn size(&self) -> usize {
        self.pool.size()
    }

    /// Attachments that found the pool empty.
    pub fn alloc_failures(&self) -> u64 {
        self.pool.alloc_failures()
    }
}

impl std::fmt::Debug for AttachPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AttachPool({}, {} headers)", self.pool.name(), self.size())
    }
}

/// A counted handle to a read-only direct buffer (see the module doc).
pub struct SharedBuffer {
    header: NonNull<BufferHeader>,
}

// SAFETY: the buffer is never written while shared; the count is atomic,
// and the last reference returns the buffer through the pool's lock.
unsafe impl Send for SharedBuffer {}
// SAFETY: as above; &SharedBuffer only reads.
unsafe impl Sync for SharedBuffer {}

impl SharedBuffer {
    /// Shares `packet`'s buffer, without a copy. A chained packet or an
    /// attached segment is given back (`Err`): only a single direct buffer
    /// can be the target of attached segments.
    pub fn new(packet: Packet) -> std::result::Result<SharedBuffer, Packet> {
        if packet.is_chained() || packet.is_attached() {
            return Err(packet);
        }
        let header = packet.into_header();
        // SAFETY: we own the buffer exclusively until this store is seen.
        unsafe { refs(header) }.store(1, Ordering::Relaxed);
        Ok(SharedBuffer { header })
    }

    /// The direct buffer's fields, fixed while it is shared. Read through
    /// the raw pointer, field by field: a `&BufferHeader` would assert
    /// that nothing changes under it, while other holders change the
    /// count.
    #[inline]
    fn direct(&self) -> Direct {
        let h = self.header.as_ptr();
        // SAFETY: our reference keeps the buffer out of its pool; these
        // fields are not written while it is shared.
        unsafe {
            Direct {
                iova: (*h).iova,
                len: (*h).len as usize,
                data_offset: (*h).data_offset as usize,
                domain: (*h).domain,
            }
        }
    }

    /// Bytes of data.
    #[inline]
    pub fn len(&self) -> usize {
        self.direct().len
    }

    /// True if the buffer holds no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// References held now (handles and attached segments): a snapshot,
    /// exact only when no other thread holds one.
    pub fn ref_count(&self) -> usize {
        // SAFETY: our reference keeps the header valid.
        unsafe { refs(self.header) }.load(Ordering::Acquire) as usize
    }

    /// IOVA of the first data byte.
    pub fn data_iova(&self) -> u64 {
        let d = self.direct();
        d.iova + d.data_offset as u64
    }

    /// The buffer's DMA domain (every attached segment has it too).
    pub fn dma_domain(&self) -> crate::domain::DmaDomain {
        self.direct().domain
    }

    /// A packet whose data is bytes `offset..offset + len` of this buffer,
    /// holding a reference to it; its header comes from `pool`. Refused if
    /// the range is outside the data or the pool is empty (counted in
    /// [`AttachPool::alloc_failures`]).
    pub fn attach(&self, offset: usize, len: usize, pool: &AttachPool) -> Result<Packet> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => {}
            _ => {
                return Err(Error::Config(format!(
                    "cannot attach bytes {offset}..+{len} of a {}-byte buffer",
                    self.len()
                )))
            }
        }
        let segment = pool.pool.alloc()?;
        let d = self.direct();
        let start = d.data_offset + offset;
        // SAFETY: our reference keeps the header valid.
        take_ref(unsafe { refs(self.header) });
        let header = segment.header_ptr();
        // SAFETY: a fresh header of an attach pool, ours alone; its room
        // holds ATTACH_ROOM >= 16 bytes for the two slots (8-aligned: the
        // header is 64-aligned). The range lies inside the direct buffer.
        unsafe {
            let h = &mut *header.as_ptr();
            h.iova = d.iova + start as u64;
            h.room = len as u32;
            h.len = len as u32;
            h.data_offset = 0;
            h.domain = d.domain;
            h.request = request_domain_bits(d.domain) | REQUEST_ATTACHED;
            let base = header.as_ptr() as *mut u8;
            let data = (self.header.as_ptr() as *mut u8).add(HEADER_SIZE + start);
            (base.add(DATA_SLOT) as *mut *mut u8).write(data);
            (base.add(DIRECT_SLOT) as *mut NonNull<BufferHeader>).write(self.header);
        }
        Ok(segment)
    }

    /// For an attached segment: another handle to the buffer it refers
    /// to, and where its bytes start in that buffer's data (its length is
    /// the segment's). None for any other packet. A sender that keeps
    /// buffers rather than segments (a TCP send buffer) takes a chained
    /// response's stored value this way, without a copy.
    pub fn of_attached(segment: &Packet) -> Option<(SharedBuffer, usize)> {
        if !segment.is_attached() {
            return None;
        }
        let header = segment.header_ptr();
        // SAFETY: attach wrote the direct buffer's header in DIRECT_SLOT
        // and the range's first byte in DATA_SLOT; the segment's reference
        // keeps the direct buffer alive while we take one of our own.
        let (direct, start) = unsafe {
            let base = header.as_ptr() as *const u8;
            let direct = (base.add(DIRECT_SLOT) as *const NonNull<BufferHeader>).read();
            take_ref(refs(direct));
            (direct, attached_data(header))
        };
        let buffer = SharedBuffer { header: direct };
        let data = buffer[..].as_ptr() as usize;
        let offset = start as usize + segment.headroom() - data;
        debug_assert!(offset + segment.len() <= buffer.len());
        Some((buffer, offset))
    }

    /// The whole data as an attached segment.
    pub fn attach_all(&self, pool: &AttachPool) -> Result<Packet> {
        self.attach(0, self.len(), pool)
    }

    /// The packet again, writable, if this handle is the last reference;
    /// else the handle back.
    pub fn try_into_packet(self) -> std::result::Result<Packet, SharedBuffer> {
        // Acquire: the other holders' reads happen before we write.
        // SAFETY: our reference keeps the header valid.
        let count = unsafe { refs(self.header) };
        if count.load(Ordering::Acquire) != 1 {
            return Err(self);
        }
        count.store(0, Ordering::Relaxed);
        let header = self.header;
        std::mem::forget(self);
        // SAFETY: the last reference: nobody else reaches the buffer, and
        // it is a plain single buffer (SharedBuffer::new checked).
        Ok(unsafe { Packet::from_header(header) })
    }
}

impl std::ops::Deref for SharedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let d = self.direct();
        // SAFETY: the data lies in the buffer (a packet's invariant, kept
        // since nobody writes a shared buffer).
        unsafe {
            std::slice::from_raw_parts(
                (self.header.as_ptr() as *const u8).add(HEADER_SIZE + d.data_offset),
                d.len,
            )
        }
    }
}

impl Clone for SharedBuffer {
    fn clone(&self) -> SharedBuffer {
        // SAFETY: our reference keeps the header valid.
        take_ref(unsafe { refs(self.header) });
        SharedBuffer { header: self.header }
    }
}

impl Drop for SharedBuffer {
    fn drop(&mut self) {
        // SAFETY: this handle holds one reference.
        unsafe { release_direct(self.header) };
    }
}

impl std::fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedBuffer(len {}, refs {})", self.len(), self.ref_count())
    }
}

/// A direct buffer's fixed fields ([`SharedBuffer::direct`]).
struct Direct {
    iova: u64,
    len: usize,
    data_offset: usize,
    domain: crate::domain::DmaDomain,
}

/// The reference count of the buffer at `header`, as an atomic. The field
/// is a plain `u32` (an atomic type in the header would make every
/// `&BufferHeader` of every packet one that may change under it, and the
/// compiler would reload fields on the data path); only this module
/// touches it, atomically, and only while the buffer is shared.
///
/// # Safety
/// `header` is a live buffer header, valid for `'a`.
#[inline]
unsafe fn refs<'a>(header: NonNull<BufferHeader>) -> &'a AtomicU32 {
    // SAFETY: the field is 4-aligned inside a live header, and every
    // access to it while shared is atomic (through here).
    unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*header.as_ptr()).refs)) }
}

/// Counts one more reference (Relaxed, as `Arc::clone`: the new holder got
/// the buffer through an existing reference).
#[inline]
fn take_ref(count: &AtomicU32) {
    if count.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
        std::process::abort();
    }
}

/// Drops one reference to the direct buffer at `direct`; the last one
/// returns it to its pool.
///
/// # Safety
/// The caller holds a reference and gives it up.
unsafe fn release_direct(direct: NonNull<BufferHeader>) {
    // Release / Acquire: every holder's reads of the bytes happen before
    // the buffer is reused (as `Arc`'s drop).
    // SAFETY: the caller's reference keeps the header valid until here.
    if unsafe { refs(direct) }.fetch_sub(1, Ordering::Release) == 1 {
        fence(Ordering::Acquire);
        // SAFETY: the last reference: nobody else reaches the header; the
        // buffer is a plain single buffer of its pool (SharedBuffer::new),
        // given up exactly once, here.
        unsafe { give_back((*direct.as_ptr()).pool, &[direct]) };
    }
}

/// The first byte of an attached segment's range (`Packet::room_ptr`).
#[inline]
pub(crate) fn attached_data(header: NonNull<BufferHeader>) -> *mut u8 {
    // SAFETY: an attached segment's DATA_SLOT was written by attach.
    unsafe { ((header.as_ptr() as *const u8).add(DATA_SLOT) as *const *mut u8).read() }
}

/// Drops the reference of an attached segment being freed, before its
/// header goes back to its pool (`Packet::before_free`, out of line).
///
/// # Safety
/// `header` is an attached segment ([`SharedBuffer::attach`]) being
/// freed, once.
#[cold]
#[inline(never)]
pub(crate) unsafe fn release_attached(header: NonNull<BufferHeader>) {
    // SAFETY: attach wrote the direct buffer's header in DIRECT_SLOT, and
    // the segment holds one reference to it.
    unsafe {
        let direct = ((header.as_ptr() as *const u8).add(DIRECT_SLOT) as *const NonNull<BufferHeader>).read();
        release_direct(direct);
    }
}

#[cfg(test)]
#[path = "shared_tests.rs"]
mod tests;
