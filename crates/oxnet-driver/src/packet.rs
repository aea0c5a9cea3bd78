//! `Packet`: one buffer of a [`Mempool`], owned.
//!
//! A packet derefs to its data (`&[u8]`), knows the IOVA a device needs, and
//! carries metadata filled by the driver on receive or read by it on transmit.
//! Dropping a packet returns its buffer to its pool — applications never free
//! by hand.
//!
//! Like ixy's `pkt_buf` and DPDK's `rte_mbuf`, the bookkeeping lives at the
//! start of the buffer itself, so a `Packet` is a single pointer: moving
//! packets between rings, batches and pools copies 8 bytes, not a struct.
//! Buffer layout:
//!
//! ```text
//! | header (64) | annotations (64) | head room (128) ..... | data (len) .... | tail room |
//!                                  ^ buffer_iova()         ^ data_iova()
//! ```
//! The header is the driver's cache line; the annotation line is the
//! packet graph's ([`Annotations`], Click's packet annotations) and no
//! driver path touches it.
//! Devices only ever see the head room and the data: the header is never
//! given to a device as a DMA address.

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
/// The NIC found a bad checksum (IP or L4; see the two flags below).
pub const FLAG_CSUM_BAD: u32 = 1 << 2;
/// The NIC found a bad IPv4 header checksum.
pub const FLAG_IP_CSUM_BAD: u32 = 1 << 3;
/// The NIC found a bad TCP/UDP checksum.
pub const FLAG_L4_CSUM_BAD: u32 = 1 << 4;
/// Receive checksum offload was on: the NIC looked at this packet's
/// checksums, and the four flags above are its verdict (if none is set, the
/// packet had no checksum the NIC checks). Without this flag,
/// [`crate::offload::rx_checksum`] computes the same verdict in software.
pub const FLAG_CSUM_CHECKED: u32 = 1 << 5;
/// `rss_hash` holds an RSS hash (RSS was on and the packet type was hashed).
pub const FLAG_RSS_HASH: u32 = 1 << 6;
/// The annotation line holds annotations written since the buffer was
/// allocated (else it is stale and reads as all zero, see
/// [`Packet::anno`]). Allocation and every receive path clear it with the
/// rest of the metadata, so annotations cost a driver nothing.
pub const FLAG_ANNO: u32 = 1 << 7;

/// Click's packet annotations (`include/click/packet.hh`, `packet_anno.hh`),
/// in the buffer's second cache line: what elements tell each other about a
/// packet besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Annotations {
    /// Click's 48-byte annotation area: the address annotations at 0..16
    /// (destination IPv4 address at 0..4, IPv6 at 0..16) and the user
    /// annotations at 16..48 (PAINT at 16, ICMP_PARAMPROB at 17,
    /// FIX_IP_SRC at 19, AGGREGATE at 20..24, EXTRA_PACKETS at 24..28,
    /// EXTRA_LENGTH at 28..32, FIRST_TIMESTAMP at 32..40).
    pub area: [u8; ANNO_AREA],
    /// Timestamp in nanoseconds (Click's timestamp annotation; 0 = none).
    pub timestamp_ns: i64,
    /// Network header: offset from the start of the head room, plus one
    /// (0: not set). Kept as a buffer position, as Click keeps a pointer,
    /// so stripping and unstripping data does not move it.
    pub(crate) network: u16,
    /// Transport header, the same way.
    pub(crate) transport: u16,
    /// Click's packet type annotation (`Packet::PacketType`: HOST 0,
    /// BROADCAST 1, MULTICAST 2, OTHERHOST 3, OUTGOING 4, LOOPBACK 5,
    /// FASTROUTE 6).
    pub packet_type: u8,
    _reserved: [u8; 3],
}

/// Bytes in Click's annotation area.
pub const ANNO_AREA: usize = 48;
/// Offset of the destination IPv4 address annotation (Click's
/// `DST_IP_ANNO_OFFSET`).
pub const DST_IP_ANNO: usize = 0;
/// Offset of the first user annotation (Click's `user_anno_offset`).
pub const USER_ANNO: usize = 16;
/// Offset of the paint annotation (user annotation byte 0).
pub const PAINT_ANNO: usize = USER_ANNO;

const ZERO_ANNO: Annotations = Annotations {
    area: [0; ANNO_AREA],
    timestamp_ns: 0,
    network: 0,
    transport: 0,
    packet_type: 0,
    _reserved: [0; 3],
};

impl Default for Annotations {
    fn default() -> Annotations {
        ZERO_ANNO
    }
}

impl Annotations {
    /// The destination IPv4 address annotation.
    #[inline]
    pub fn dst_ip(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.area[DST_IP_ANNO..DST_IP_ANNO + 4]);
        a
    }

    /// Sets the destination IPv4 address annotation.
    #[inline]
    pub fn set_dst_ip(&mut self, ip: [u8; 4]) {
        self.area[DST_IP_ANNO..DST_IP_ANNO + 4].copy_from_slice(&ip);
    }

    /// The paint annotation.
    #[inline]
    pub fn paint(&self) -> u8 {
        self.area[PAINT_ANNO]
    }

    /// Sets the paint annotation.
    #[inline]
    pub fn set_paint(&mut self, color: u8) {
        self.area[PAINT_ANNO] = color;
    }
}

const _: () = assert!(std::mem::size_of::<Annotations>() == 64);

// Transmit offload requests ([`TxOffload::flags`]).
/// Insert the IPv4 header checksum.
pub const TX_IP_CSUM: u32 = 1 << 0;
/// Insert the TCP checksum.
pub const TX_TCP_CSUM: u32 = 1 << 1;
/// Insert the UDP checksum.
pub const TX_UDP_CSUM: u32 = 1 << 2;
/// Segment this TCP packet into `mss`-sized segments (TSO); implies the
/// IPv4 and TCP checksums of every segment.
pub const TX_TSO: u32 = 1 << 3;
/// Every transmit request bit.
pub const TX_REQUEST_MASK: u32 = TX_IP_CSUM | TX_TCP_CSUM | TX_UDP_CSUM | TX_TSO;
/// Set in a chain head's request word (not a request: it sends a chained
/// packet down the same slow path as the requests).
pub(crate) const REQUEST_CHAINED: u32 = 1 << 31;
/// Set in the request word of an attached segment ([`crate::shared`]):
/// its data lies in another buffer. Not a request either: it sends the
/// packet down the transmit slow paths, which read it by IOVA or through
/// `Deref` (both of which know), and it makes the bytes read-only.
pub(crate) const REQUEST_ATTACHED: u32 = 1 << 30;
/// The request bits that make freeing a packet more than giving its buffer
/// back: a chain head (its other segments; `REQUEST_CHAINED` is set
/// exactly on a head whose `next` is set) or an attached segment (its
/// reference). Every free path tests this word, in the header line it
/// reads anyway, instead of `next`: the same one test, and attached
/// segments cost a plain packet's free nothing.
const FREE_SPECIAL: u32 = REQUEST_CHAINED | REQUEST_ATTACHED;
/// The request word's copy of the buffer's DMA domain (bits 29:28 =
/// `DmaDomain as u8`), written with every reset of the word: a transmit
/// fast path subtracts its own domain's value from the length-and-request
/// word and so learns "plain, sendable length, own domain" from one
/// compare ([`plain_word_base`]). Not a request; [`Packet::len_and_request`]
/// and [`Packet::tx_offload`] leave it out.
pub(crate) const REQUEST_DOMAIN_SHIFT: u32 = 28;
/// The bits of [`REQUEST_DOMAIN_SHIFT`].
pub(crate) const REQUEST_DOMAIN_MASK: u32 = 0b11 << REQUEST_DOMAIN_SHIFT;

/// The domain bits of the request word of a buffer of `domain`.
#[inline]
pub(crate) const fn request_domain_bits(domain: crate::domain::DmaDomain) -> u32 {
    (domain as u32) << REQUEST_DOMAIN_SHIFT
}

/// The length-and-request word ([`Packet::len_and_request_domain`]) of a
/// plain, single-buffer, 1-byte packet of `domain`. For any packet,
/// `word.wrapping_sub(base) < max` holds exactly when the packet is plain
/// (no request, not chained), of `domain`, and 1..=max bytes long: the
/// upper half of the difference is zero only when the request word is
/// exactly the domain bits (a length of 0 borrows and makes the lower half
/// 0xFFFF_FFFF).
#[inline]
pub(crate) const fn plain_word_base(domain: crate::domain::DmaDomain) -> u64 {
    ((request_domain_bits(domain) as u64) << 32) | 1
}

/// What a packet asks the transmitting device to do for it: checksums and
/// TCP segmentation, with the header lengths the NIC needs (the 82599's and
/// the 82576's advanced context descriptor take exactly these, §7.2.3.2.3).
/// A device that cannot do it in hardware does it in software, with the
/// same bytes on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxOffload {
    /// `TX_*` request bits.
    pub flags: u32,
    /// Ethernet header length (14, or 18 with a VLAN tag).
    pub l2_len: u8,
    /// IP header length (20 for IPv4 without options).
    pub l3_len: u16,
    /// TCP header length (options included) or 8 for UDP.
    pub l4_len: u8,
    /// TCP payload bytes per segment (TSO only).
    pub mss: u16,
}

/// Bytes reserved at the start of every buffer: the [`BufferHeader`] line
/// and the [`Annotations`] line.
pub const HEADER_SIZE: usize = 128;
/// Offset of the annotation line in a buffer.
const ANNO_OFFSET: usize = 64;

/// Bookkeeping at the start of each buffer; written by the pool when the
/// buffer is created (pool, iova, size) and reset on each allocation.
///
/// The field order is part of the data path's design (`repr(C)`):
/// * `len` and `request` are adjacent, so a transmit fast path reads both
///   with one 8-byte load and tests "plain packet of a sendable length" with
///   one compare (a non-zero `request` makes the value larger than any
///   frame): offload requests and chains cost the features-off path nothing;
/// * `request`, `data_offset` and `segments` share one aligned 8-byte word,
///   so a receive refill resets all three with one store;
/// * `next` is null for every buffer on a free stack (freeing a chain nulls
///   the links), so a received packet never needs it written.
#[repr(C, align(64))]
pub(crate) struct BufferHeader {
    /// The pool the buffer returns to.
    pub(crate) pool: NonNull<PoolInner>,
    /// IOVA of the byte right after this header (the head room).
    pub(crate) iova: u64,
    /// Bytes after the header: head room + data room.
    pub(crate) room: u32,
    /// Length of the data (of this segment).
    pub(crate) len: u32,
    /// `TX_*` request bits, [`REQUEST_CHAINED`] and the domain bits
    /// ([`REQUEST_DOMAIN_MASK`]); only the domain bits for a plain packet.
    pub(crate) request: u32,
    /// Offset of the data from the end of the header.
    pub(crate) data_offset: u16,
    /// Buffers in the chain starting here (valid in a chain head; 1 otherwise).
    pub(crate) segments: u16,
    pub(crate) meta: Metadata,
    /// The next segment of a chained packet; owned by this one.
    pub(crate) next: Option<NonNull<BufferHeader>>,
    /// Bytes in the whole chain (valid in a chain head when `next` is set).
    pub(crate) total_len: u32,
    pub(crate) l3_len: u16,
    pub(crate) l2_len: u8,
    pub(crate) l4_len: u8,
    pub(crate) mss: u16,
    /// The pool's DMA domain, written once when the pool is made: a
    /// transmit path compares it with its own in the cache line it reads
    /// anyway ([`crate::domain`]); an attached segment's is its direct
    /// buffer's.
    pub(crate) domain: crate::domain::DmaDomain,
    /// References to a shared buffer ([`crate::shared::SharedBuffer`]
    /// handles and attached segments); read and written only while the
    /// buffer is shared, atomically through `crate::shared` (a plain
    /// field: an atomic type here would take `&BufferHeader`'s
    /// no-mutation guarantee from every packet).
    pub(crate) refs: u32,
}

const _: () = assert!(std::mem::size_of::<BufferHeader>() == ANNO_OFFSET);
const _: () = assert!(ANNO_OFFSET + std::mem::size_of::<Annotations>() == HEADER_SIZE);
const _: () = assert!(std::mem::offset_of!(BufferHeader, len) + 4 == std::mem::offset_of!(BufferHeader, request));
const _: () = assert!(std::mem::offset_of!(BufferHeader, request) == REQUEST_WORD_OFFSET);

/// Offset of the 8-byte word holding `request` (low half), `data_offset`
/// and `segments` (high half).
pub(crate) const REQUEST_WORD_OFFSET: usize = 24;

/// The value of that word for a fresh, plain, single-buffer packet of a
/// pool of `domain`.
#[inline]
pub(crate) const fn fresh_request_word(headroom: u16, domain: crate::domain::DmaDomain) -> u64 {
    ((headroom as u64) << 32) | (1u64 << 48) | request_domain_bits(domain) as u64
}

/// A packet buffer owned by the holder.
#[repr(transparent)]
pub struct Packet {
    header: NonNull<BufferHeader>,
}

// SAFETY: a Packet exclusively owns its buffer; returning it to the pool is
// thread-safe (the pool's free stack is locked), so it may move between threads.
unsafe impl Send for Packet {}
// SAFETY: &Packet only gives read access to the owned buffer.
unsafe impl Sync for Packet {}

impl Packet {
    /// # Safety
    /// `header` must be the header of a buffer taken off its pool's free
    /// stack, with one pool reference counted for this packet.
    #[inline]
    pub(crate) unsafe fn from_header(header: NonNull<BufferHeader>) -> Packet {
        Packet { header }
    }

    /// Gives up ownership without returning the buffer (the caller does).
    #[inline]
    pub(crate) fn into_header(self) -> NonNull<BufferHeader> {
        let header = self.header;
        std::mem::forget(self);
        header
    }

    #[inline]
    fn h(&self) -> &BufferHeader {
        // SAFETY: the header lives as long as the buffer, which we own.
        unsafe { self.header.as_ref() }
    }

    #[inline]
    fn h_mut(&mut self) -> &mut BufferHeader {
        // SAFETY: as above, exclusively.
        unsafe { self.header.as_mut() }
    }

    /// The head room after the header and annotation lines (of a packet
    /// known not to be attached).
    #[inline]
    fn own_room_ptr(&self) -> *mut u8 {
        // SAFETY: the head room starts right after the header and
        // annotation lines.
        unsafe { (self.header.as_ptr() as *mut u8).add(HEADER_SIZE) }
    }

    /// `Deref` of an attached segment: its range, from the start the
    /// segment keeps in its own room (out of line: the test for it is
    /// all a plain packet pays).
    #[cold]
    #[inline(never)]
    fn attached_bytes(&self) -> &[u8] {
        // SAFETY: the range lies inside the direct buffer, which the
        // segment's reference keeps alive.
        unsafe {
            let start = crate::shared::attached_data(self.header);
            std::slice::from_raw_parts(start.add(self.headroom()), self.len())
        }
    }

    /// True for an attached segment: its data is a range of another
    /// buffer, shared and read-only ([`crate::shared`]).
    #[inline]
    pub fn is_attached(&self) -> bool {
        self.h().request & REQUEST_ATTACHED != 0
    }

    /// The header pointer (for [`crate::shared`]).
    #[inline]
    pub(crate) fn header_ptr(&self) -> NonNull<BufferHeader> {
        self.header
    }

    /// Length of the data in bytes.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.h().len as usize
    }

    /// Bytes the data may grow to (buffer size minus the current head room).
    #[inline]
    pub fn capacity(&self) -> usize {
        (self.h().room - self.h().data_offset as u32) as usize
    }

    /// Head room left in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.h().data_offset as usize
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
        self.resize_head(len);
        Ok(())
    }

    /// Sets the first segment's length, keeping a chain's total length in
    /// step (a header prepended to a chained TSO packet counts in the
    /// PAYLEN the driver derives from the total).
    #[inline]
    fn resize_head(&mut self, len: usize) {
        let h = self.h_mut();
        if h.next.is_some() {
            h.total_len = h.total_len + len as u32 - h.len;
        }
        h.len = len as u32;
    }

    /// Sets the length without checking it (drivers, after checking it
    /// against the buffer they armed).
    ///
    /// # Safety
    /// `len <= capacity()`.
    #[inline]
    pub(crate) unsafe fn set_len_unchecked(&mut self, len: usize) {
        self.h_mut().len = len as u32;
    }

    /// Metadata (RSS hash, checksum flags).
    #[inline]
    pub fn meta(&self) -> &Metadata {
        &self.h().meta
    }

    /// Metadata, for writing.
    #[inline]
    pub fn meta_mut(&mut self) -> &mut Metadata {
        &mut self.h_mut().meta
    }

    /// The packet's annotations; all zero if none was written since the
    /// buffer was allocated or received.
    #[inline]
    pub fn anno(&self) -> &Annotations {
        if self.h().meta.flags & FLAG_ANNO == 0 {
            return &ZERO_ANNO;
        }
        // SAFETY: the annotation line follows the header inside our
        // buffer, 64-byte aligned, and FLAG_ANNO says it was initialised.
        unsafe { &*((self.header.as_ptr() as *const u8).add(ANNO_OFFSET) as *const Annotations) }
    }

    /// The annotations, for writing; a stale line is zeroed first.
    #[inline]
    pub fn anno_mut(&mut self) -> &mut Annotations {
        // SAFETY: as in `anno`, exclusively (we own the buffer).
        let line = unsafe { &mut *((self.header.as_ptr() as *mut u8).add(ANNO_OFFSET) as *mut Annotations) };
        let flags = &mut self.h_mut().meta.flags;
        if *flags & FLAG_ANNO == 0 {
            *flags |= FLAG_ANNO;
            *line = ZERO_ANNO;
        }
        line
    }

    /// Copies `other`'s metadata and annotations, as Click copies them
    /// with the packet; header marks keep their place relative to the
    /// data even if the two buffers' head rooms differ.
    pub fn copy_meta_from(&mut self, other: &Packet) {
        let anno = self.meta().flags & FLAG_ANNO;
        *self.meta_mut() = Metadata {
            flags: (other.meta().flags & !FLAG_ANNO) | anno,
            ..*other.meta()
        };
        if other.meta().flags & FLAG_ANNO == 0 {
            if anno != 0 {
                *self.anno_mut() = ZERO_ANNO;
            }
            return;
        }
        let shift = self.h().data_offset as isize - other.h().data_offset as isize;
        let moved = |mark: u16| -> u16 {
            if mark == 0 {
                return 0;
            }
            let m = mark as isize + shift;
            if (1..=u16::MAX as isize).contains(&m) {
                m as u16
            } else {
                0
            }
        };
        let mut a = *other.anno();
        a.network = moved(a.network);
        a.transport = moved(a.transport);
        *self.anno_mut() = a;
    }

    /// Offset of the network header from the start of the data (negative
    /// if the data now starts after it), or `None` if no element marked it
    /// (Click's `network_header_offset`).
    #[inline]
    pub fn network_offset(&self) -> Option<isize> {
        let n = self.anno().network;
        (n != 0).then(|| n as isize - 1 - self.h().data_offset as isize)
    }

    /// Offset of the transport header from the start of the data, as
    /// [`network_offset`](Packet::network_offset).
    #[inline]
    pub fn transport_offset(&self) -> Option<isize> {
        let t = self.anno().transport;
        (t != 0).then(|| t as isize - 1 - self.h().data_offset as isize)
    }

    /// Marks the network header at `offset` bytes into the data and the
    /// transport header `len` bytes after it (Click's
    /// `set_network_header`). Offsets outside the data are refused.
    pub fn set_network_header(&mut self, offset: usize, len: usize) -> Result<()> {
        if offset > self.len() || offset + len > self.len() {
            return Err(Error::Config(format!(
                "network header at {offset} (+{len}) lies outside the packet's {} bytes",
                self.len()
            )));
        }
        let base = self.h().data_offset as usize + 1;
        let a = self.anno_mut();
        a.network = (base + offset) as u16;
        a.transport = (base + offset + len) as u16;
        Ok(())
    }

    /// Forgets the network and transport header marks.
    pub fn clear_network_header(&mut self) {
        if self.meta().flags & FLAG_ANNO != 0 {
            let a = self.anno_mut();
            a.network = 0;
            a.transport = 0;
        }
    }

    /// `len` in the low 32 bits and the request word (requests and
    /// [`REQUEST_CHAINED`], without the domain bits) in the high 32 bits:
    /// `value >> 32 == 0` for a plain packet (no request, not chained),
    /// and `value - 1 < max_frame` also checks its length.
    #[inline]
    pub(crate) fn len_and_request(&self) -> u64 {
        self.len_and_request_domain() & !((REQUEST_DOMAIN_MASK as u64) << 32)
    }

    /// `len` and the whole request word, domain bits included, in one
    /// load: a transmit fast path compares `value - plain_word_base(own
    /// domain) < max_frame` and so learns in one compare that the packet
    /// is plain, of a sendable length and of its own DMA domain
    /// ([`plain_word_base`]).
    #[inline]
    pub(crate) fn len_and_request_domain(&self) -> u64 {
        // SAFETY: len and request are adjacent u32 fields (asserted above);
        // the 8 bytes lie inside our header; the read may be unaligned.
        unsafe {
            std::ptr::read_unaligned(
                (self.header.as_ptr() as *const u8).add(std::mem::offset_of!(BufferHeader, len)) as *const u64,
            )
        }
    }

    /// The transmit offload this packet asks for.
    #[inline]
    pub fn tx_offload(&self) -> TxOffload {
        let h = self.h();
        TxOffload {
            flags: h.request & TX_REQUEST_MASK,
            l2_len: h.l2_len,
            l3_len: h.l3_len,
            l4_len: h.l4_len,
            mss: h.mss,
        }
    }

    /// Asks the transmitting device for checksums / segmentation (see
    /// [`TxOffload`]); unknown flag bits are ignored. An attached segment
    /// takes no request bits (a device fulfils them by writing into the
    /// head's bytes, and an attached segment's are shared): chain it
    /// behind a header packet of its own, which carries the request.
    #[inline]
    pub fn set_tx_offload(&mut self, offload: TxOffload) {
        let h = self.h_mut();
        let keep = h.request & (REQUEST_CHAINED | REQUEST_DOMAIN_MASK | REQUEST_ATTACHED);
        let flags = if keep & REQUEST_ATTACHED != 0 {
            0
        } else {
            offload.flags & TX_REQUEST_MASK
        };
        h.request = keep | flags;
        h.l2_len = offload.l2_len;
        h.l3_len = offload.l3_len;
        h.l4_len = offload.l4_len;
        h.mss = offload.mss;
    }

    /// True if this packet has further segments.
    #[inline]
    pub fn is_chained(&self) -> bool {
        self.h().next.is_some()
    }

    /// The next segment of a chained packet.
    #[inline]
    pub fn next(&self) -> Option<&Packet> {
        // SAFETY: Option<NonNull<BufferHeader>> and Option<Packet> have the
        // same layout (Packet is a transparent NonNull); the segment is
        // owned by this packet, so it lives as long as the borrow.
        unsafe { (*(&self.h().next as *const Option<NonNull<BufferHeader>> as *const Option<Packet>)).as_ref() }
    }

    /// The next segment, mutably.
    #[inline]
    pub fn next_mut(&mut self) -> Option<&mut Packet> {
        // SAFETY: as in next(), exclusively.
        unsafe { (*(&mut self.h_mut().next as *mut Option<NonNull<BufferHeader>> as *mut Option<Packet>)).as_mut() }
    }

    /// The segments of this packet, itself first.
    pub fn segments(&self) -> impl Iterator<Item = &Packet> {
        std::iter::successors(Some(self), |p| p.next())
    }

    /// Number of buffers in the chain (1 for a plain packet).
    #[inline]
    pub fn segment_count(&self) -> usize {
        if self.is_chained() {
            match self.h().segments {
                // Saturated (a chain of 65535 buffers or more): count them.
                u16::MAX => self.segments().count(),
                n => n as usize,
            }
        } else {
            1
        }
    }

    /// Bytes in the whole chain (`len()` for a plain packet).
    #[inline]
    pub fn total_len(&self) -> usize {
        if self.is_chained() {
            self.h().total_len as usize
        } else {
            self.len()
        }
    }

    /// Appends `segment` (and its own chain) at the end of this packet's
    /// chain; this packet owns it from now on (dropping this packet frees it).
    pub fn append(&mut self, segment: Packet) {
        let add_len = segment.total_len() as u32;
        let add_segments = segment.segment_count();
        // The header's count is a u16: a longer chain saturates at
        // u16::MAX, where segment_count() walks the chain instead.
        let (total, count) = (
            self.total_len() as u32 + add_len,
            (self.segment_count() + add_segments).min(u16::MAX as usize) as u16,
        );
        let mut tail: &mut Packet = self;
        while tail.is_chained() {
            tail = tail.next_mut().expect("chained");
        }
        tail.h_mut().next = Some(segment.into_header());
        let h = self.h_mut();
        h.total_len = total;
        h.segments = count;
        h.request |= REQUEST_CHAINED;
    }

    /// Detaches everything after the first segment and returns it as a
    /// packet of its own (a chain head again, if it has more segments).
    pub fn take_next(&mut self) -> Option<Packet> {
        let next = self.h_mut().next.take()?;
        let h = self.h_mut();
        h.request &= !REQUEST_CHAINED;
        h.segments = 1;
        // SAFETY: the segment was owned by this packet; ownership moves out.
        let mut rest = unsafe { Packet::from_header(next) };
        if rest.is_chained() {
            let (len, count) = rest.segments().fold((0, 0), |(l, c), p| (l + p.len(), c + 1));
            let h = rest.h_mut();
            h.total_len = len as u32;
            h.segments = count.min(u16::MAX as usize) as u16;
            h.request |= REQUEST_CHAINED;
        } else {
            rest.h_mut().request &= !REQUEST_CHAINED;
        }
        Some(rest)
    }

    /// Copies the data of every segment, in order, to the end of `out`.
    pub fn copy_chain_to(&self, out: &mut Vec<u8>) {
        for segment in self.segments() {
            out.extend_from_slice(segment);
        }
    }

    /// True if freeing this packet takes more than giving its buffer back
    /// ([`FREE_SPECIAL`]).
    #[inline]
    fn needs_free_work(&self) -> bool {
        self.h().request & FREE_SPECIAL != 0
    }

    /// The rest of freeing a chain head or an attached segment, before its
    /// buffer goes back (after that it may be reused at once): the other
    /// segments freed, the attached reference dropped.
    #[cold]
    fn before_free(&mut self) {
        if self.h().next.is_some() {
            self.free_rest_of_chain();
        }
        if self.is_attached() {
            // SAFETY: an attached segment being freed, once.
            unsafe { crate::shared::release_attached(self.header) };
        }
    }

    /// Frees every segment after this one.
    #[cold]
    fn free_rest_of_chain(&mut self) {
        let mut next = self.h_mut().next.take();
        let mut free = BulkFree::new();
        while let Some(header) = next {
            // SAFETY: each segment is owned by the one before it; we take it
            // over, unlink it (a free buffer has no next) and free it once.
            let mut segment = unsafe { Packet::from_header(header) };
            next = segment.h_mut().next.take();
            free.push(segment);
        }
    }

    /// Grows the data at the front by `n` bytes taken from the head room and
    /// returns them (a driver header, an encapsulation). Refused on an
    /// attached segment (its bytes are shared).
    pub fn prepend(&mut self, n: usize) -> Result<&mut [u8]> {
        if self.is_attached() {
            return Err(Error::Config(
                "cannot prepend to an attached segment: its bytes are shared and read-only".into(),
            ));
        }
        if n > self.headroom() {
            return Err(Error::Config(format!(
                "cannot prepend {n} bytes: only {} bytes of head room",
                self.headroom()
            )));
        }
        self.h_mut().data_offset -= n as u16;
        let len = self.len() + n;
        self.resize_head(len);
        Ok(&mut self[..n])
    }

    /// The `n` bytes of head room just in front of the data (where a driver
    /// writes its header), or `None` if the head room is shorter or the
    /// packet is an attached segment (whose bytes are shared).
    #[inline]
    pub fn head_room_mut(&mut self, n: usize) -> Option<&mut [u8]> {
        if self.is_attached() {
            return None;
        }
        let start = self.headroom().checked_sub(n)?;
        // SAFETY: [start, data_offset) lies inside our own head room.
        Some(unsafe { std::slice::from_raw_parts_mut(self.own_room_ptr().add(start), n) })
    }

    /// Removes `n` bytes from the front of the data (they become head room).
    pub fn strip_front(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::Config(format!(
                "cannot strip {n} bytes from a {}-byte packet",
                self.len()
            )));
        }
        self.h_mut().data_offset += n as u16;
        let len = self.len() - n;
        self.resize_head(len);
        Ok(())
    }

    /// IOVA of the first data byte: what a device reads from or writes to.
    #[inline]
    pub fn data_iova(&self) -> u64 {
        self.h().iova + self.h().data_offset as u64
    }

    /// The DMA domain of this buffer (of this segment only; see
    /// [`crate::domain::in_domain`] for chains).
    #[inline]
    pub fn dma_domain(&self) -> crate::domain::DmaDomain {
        self.h().domain
    }

    /// IOVA of the start of the head room.
    #[inline]
    pub fn buffer_iova(&self) -> u64 {
        self.h().iova
    }

    /// Resets the data to start after the pool's head room, length 0.
    #[inline]
    pub fn reset(&mut self) {
        if self.is_chained() {
            self.free_rest_of_chain();
        }
        let headroom = self.pool().headroom() as u16;
        let h = self.h_mut();
        h.data_offset = headroom;
        h.len = 0;
        // An attached segment stays one (its pool's head room is 0: the
        // data restarts at the start of its range).
        h.request = request_domain_bits(h.domain) | (h.request & REQUEST_ATTACHED);
        h.segments = 1;
        h.meta = Metadata::default();
    }

    #[inline]
    fn pool(&self) -> &PoolInner {
        // SAFETY: this packet holds a reference to its pool.
        unsafe { self.h().pool.as_ref() }
    }

    #[inline]
    pub(crate) fn pool_ptr(&self) -> NonNull<PoolInner> {
        self.h().pool
    }

    /// The whole data room after the head room, whatever `len` is: what a
    /// device may write on receive.
    ///
    /// # Panics
    /// On an attached segment (its bytes are shared and read-only; only
    /// a program error reaches this: receive paths use fresh buffers).
    pub fn data_room_mut(&mut self) -> &mut [u8] {
        if self.is_attached() {
            attached_is_read_only();
        }
        let cap = self.capacity();
        // SAFETY: the buffer is ours and `data_offset + cap` is its room.
        unsafe { std::slice::from_raw_parts_mut(self.own_room_ptr().add(self.headroom()), cap) }
    }
}

impl std::ops::Deref for Packet {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        if self.is_attached() {
            return self.attached_bytes();
        }
        // SAFETY: data_offset + len never exceeds the room (set_len checks).
        unsafe { std::slice::from_raw_parts(self.own_room_ptr().add(self.headroom()), self.len()) }
    }
}

/// # Panics
/// On an attached segment: its bytes are shared with other packets (and
/// maybe other threads) and read-only; copy it ([`crate::offload::linearize`])
/// to change them. Only a program error reaches this. The test is the one
/// `Deref` makes (a byte read and written pays it once).
impl std::ops::DerefMut for Packet {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.is_attached() {
            attached_is_read_only();
        }
        // SAFETY: as in deref; the packet owns its buffer exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.own_room_ptr().add(self.headroom()), self.len()) }
    }
}

/// The panic of a write to an attached segment (out of line).
#[cold]
#[inline(never)]
fn attached_is_read_only() -> ! {
    panic!("an attached segment's bytes are read-only (crate::shared)");
}

impl Drop for Packet {
    #[inline]
    fn drop(&mut self) {
        if self.needs_free_work() {
            self.before_free();
        }
        // SAFETY: this packet owns its buffer and one pool reference.
        unsafe { give_back(self.h().pool, &[self.header]) };
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packet(len {}, iova {:#x})", self.len(), self.data_iova())
    }
}

/// Frees packets in bulk: consecutive packets of the same pool go back with
/// one lock round-trip. Drivers use it to clean their TX rings.
pub struct BulkFree {
    pool: Option<NonNull<PoolInner>>,
    headers: [std::mem::MaybeUninit<NonNull<BufferHeader>>; BulkFree::CAPACITY],
    count: usize,
}

impl BulkFree {
    const CAPACITY: usize = 64;

    /// An empty collector.
    #[inline]
    pub fn new() -> BulkFree {
        BulkFree {
            pool: None,
            headers: [std::mem::MaybeUninit::uninit(); BulkFree::CAPACITY],
            count: 0,
        }
    }

    /// Takes a packet to be freed.
    #[inline]
    pub fn push(&mut self, mut packet: Packet) {
        if packet.needs_free_work() {
            packet.before_free();
        }
        let pool = packet.pool_ptr();
        if self.pool != Some(pool) || self.count == BulkFree::CAPACITY {
            self.flush();
            self.pool = Some(pool);
        }
        self.headers[self.count].write(packet.into_header());
        self.count += 1;
    }

    /// Returns what was collected to its pool.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(pool) = self.pool {
            if self.count > 0 {
                // SAFETY: the first `count` entries were written by push,
                // each from a packet of `pool` given up exactly once.
                unsafe {
                    let headers =
                        std::slice::from_raw_parts(self.headers.as_ptr() as *const NonNull<BufferHeader>, self.count);
                    give_back(pool, headers);
                }
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
    #[inline]
    fn drop(&mut self) {
        self.flush();
    }
}

/// Frees a run of packets stored in a driver's ring, in bulk. When all of
/// them come from one pool (the common case: a forwarder's packets all come
/// from the receiving queue's pool) the run goes back to the pool as it is,
/// one copy of pointers under one lock.
///
/// # Safety
/// Every element of `run` is an initialised packet that the caller gives up
/// (it must not read or drop them afterwards), a plain single buffer: not
/// chained, not attached (a plain ring holds no other kind; the transmit
/// paths copy the others or post them on the offload path).
#[inline]
pub(crate) unsafe fn free_ring_run(run: &[std::mem::MaybeUninit<Packet>]) {
    // SAFETY: Packet is a transparent NonNull<BufferHeader>; the caller
    // guarantees every element is initialised.
    let headers = unsafe { std::slice::from_raw_parts(run.as_ptr() as *const NonNull<BufferHeader>, run.len()) };
    let Some(first) = headers.first() else { return };
    // SAFETY: live headers of owned packets.
    let pool = unsafe { first.as_ref() }.pool;
    if headers.iter().all(|h| unsafe { h.as_ref() }.pool == pool) {
        // SAFETY: all from `pool`, given up by the caller.
        unsafe { give_back(pool, headers) };
    } else {
        let mut free = BulkFree::new();
        for &h in headers {
            // SAFETY: each header is an owned packet given up by the caller.
            free.push(unsafe { Packet::from_header(h) });
        }
    }
}

/// Drops every packet of `batch` in bulk.
pub fn free_batch(batch: &mut PacketBatch) {
    let packets = &mut batch.packets;
    let Some(first) = packets.first() else { return };
    let pool = first.h().pool;
    // One pass over the headers checks both conditions of the fast way out
    // (same pool, no chain and no attached segment: FREE_SPECIAL): a
    // separate pass for chains cost 5 instructions per packet of alloc +
    // free.
    if packets.iter().all(|p| {
        let h = p.h();
        h.pool == pool && h.request & FREE_SPECIAL == 0
    }) {
        // SAFETY: the length is set to 0 first, so the packets are owned
        // only by give_back, which returns each one once; all are plain
        // packets of `pool`.
        unsafe {
            let len = packets.len();
            packets.set_len(0);
            let headers = std::slice::from_raw_parts(packets.as_ptr() as *const NonNull<BufferHeader>, len);
            give_back(pool, headers);
        }
        return;
    }
    // Several pools or chains: BulkFree groups runs and frees chains.
    let mut free = BulkFree::new();
    for packet in packets.drain(..) {
        free.push(packet);
    }
}

/// An ordered batch of packets, the unit of `rx_batch` and `tx_batch`.
#[derive(Debug, Default)]
pub struct PacketBatch {
    // A Vec of 8-byte packets; drivers push into reserved room and consume
    // from the front without per-packet checks.
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

    /// Drops the batch; one that holds nothing, neither packets nor room
    /// (what `std::mem::take` leaves), costs a test, not a call.
    #[inline]
    pub fn release(self) {
        if self.packets.capacity() == 0 {
            // Nothing to free: no packet (a Vec without room has none)
            // and no allocation.
            std::mem::forget(self);
        } else {
            drop(self);
        }
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

    /// Appends a packet where the caller has already reserved room (a
    /// driver's receive loop reserves once per batch).
    ///
    /// # Safety
    /// `len() < capacity()` must hold.
    #[inline]
    pub(crate) unsafe fn push_reserved(&mut self, packet: Packet) {
        let len = self.packets.len();
        debug_assert!(len < self.packets.capacity());
        // SAFETY: the caller guarantees room for one more element.
        unsafe {
            std::ptr::write(self.packets.as_mut_ptr().add(len), packet);
            self.packets.set_len(len + 1);
        }
    }

    /// Start of the packet array and its length, for a driver's receive
    /// loop that keeps both in registers; [`PacketBatch::set_len_raw`]
    /// publishes the new length afterwards.
    #[inline]
    pub(crate) fn raw_parts(&mut self) -> (*mut Packet, usize) {
        (self.packets.as_mut_ptr(), self.packets.len())
    }

    /// # Safety
    /// The first `len` elements are initialised packets (written through
    /// [`PacketBatch::raw_parts`] within the reserved capacity), and any
    /// elements beyond `len` that were initialised were moved out.
    #[inline]
    pub(crate) unsafe fn set_len_raw(&mut self, len: usize) {
        // SAFETY: see the function's contract.
        unsafe { self.packets.set_len(len) }
    }

    /// Hands the first `n` packets (`n <= len()`) to `take`, in order, then
    /// moves the rest to the front: what a driver's transmit loop does,
    /// without the bookkeeping of a `Drain` per packet.
    #[inline]
    pub fn consume_front(&mut self, n: usize, mut take: impl FnMut(Packet)) {
        let len = self.packets.len();
        let n = n.min(len);
        let base = self.packets.as_mut_ptr();
        // SAFETY: the first n elements are read out exactly once; the length
        // is set to 0 first so a panic in `take` leaks them instead of
        // dropping them twice; the rest is moved down and the length fixed.
        unsafe {
            self.packets.set_len(0);
            for k in 0..n {
                take(std::ptr::read(base.add(k)));
            }
            std::ptr::copy(base.add(n), base, len - n);
            self.packets.set_len(len - n);
        }
    }

    /// Like [`PacketBatch::consume_front`], but `take` may give a packet
    /// back (`Err(packet)`): it stays at the front of the batch, with the
    /// ones after it, and consuming stops. Returns how many were taken.
    #[inline]
    pub fn consume_front_while(
        &mut self,
        n: usize,
        mut take: impl FnMut(Packet) -> std::result::Result<(), Packet>,
    ) -> usize {
        let len = self.packets.len();
        let n = n.min(len);
        let base = self.packets.as_mut_ptr();
        let mut taken = n;
        // SAFETY: as in consume_front; a packet given back is written to
        // the slot it was read from, which is then the first one kept.
        unsafe {
            self.packets.set_len(0);
            for k in 0..n {
                if let Err(packet) = take(std::ptr::read(base.add(k))) {
                    std::ptr::write(base.add(k), packet);
                    taken = k;
                    break;
                }
            }
            std::ptr::copy(base.add(taken), base, len - taken);
            self.packets.set_len(len - taken);
        }
        taken
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
    #[inline]
    pub fn clear(&mut self) {
        // Most batches an element hands on or drops are empty (the outputs
        // a packet did not take): no call for those (kv-instructions.sh).
        if !self.packets.is_empty() {
            free_batch(self);
        }
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
    #[inline]
    fn drop(&mut self) {
        if !self.packets.is_empty() {
            free_batch(self);
        }
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
    fn annotations_start_zero_survive_and_do_not_leak_into_the_next_owner() {
        let pool = Mempool::new("anno", 1, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        assert_eq!(*p.anno(), Annotations::default());
        p.anno_mut().set_paint(3);
        p.anno_mut().set_dst_ip([10, 0, 0, 1]);
        p.anno_mut().timestamp_ns = 42;
        assert_eq!(
            (p.anno().paint(), p.anno().dst_ip(), p.anno().timestamp_ns),
            (3, [10, 0, 0, 1], 42)
        );
        assert_eq!(p.meta().rss_hash, 0, "annotations are not metadata");
        drop(p);
        // The same buffer again: its annotation line still holds the old
        // bytes, but the packet reads as unannotated.
        let mut q = pool.alloc().unwrap();
        assert_eq!(*q.anno(), Annotations::default());
        assert_eq!(q.anno_mut().paint(), 0, "a stale line is zeroed before writing");
    }

    #[test]
    fn header_marks_stay_put_when_data_is_stripped_and_follow_a_copy() {
        let pool = Mempool::new("marks", 2, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        p.set_len(60).unwrap();
        assert_eq!(p.network_offset(), None);
        p.set_network_header(14, 20).unwrap();
        assert_eq!((p.network_offset(), p.transport_offset()), (Some(14), Some(34)));
        p.strip_front(14).unwrap();
        assert_eq!((p.network_offset(), p.transport_offset()), (Some(0), Some(20)));
        p.strip_front(4).unwrap();
        assert_eq!(p.network_offset(), Some(-4), "Click's offsets go negative too");
        assert!(p.set_network_header(40, 20).is_err(), "past the end of the data");
        // A copy with a different head room keeps the marks on the same bytes.
        let mut q = pool.alloc().unwrap();
        q.set_len(10).unwrap();
        q.prepend(30).unwrap();
        q.copy_meta_from(&p);
        assert_eq!((q.network_offset(), q.transport_offset()), (Some(-4), Some(16)));
        q.clear_network_header();
        assert_eq!(q.network_offset(), None);
    }

    #[test]
    fn head_room_prepend_and_strip() {
        let pool = Mempool::new("t", 4, MemoryKind::Plain).unwrap();
        assert_eq!(std::mem::size_of::<Packet>(), 8, "a packet is one pointer");
        assert_eq!(std::mem::size_of::<Option<Packet>>(), 8);
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

    /// A header prepended to (or stripped from, or a length set on) the
    /// first buffer of a chain counts in the chain's total length: an
    /// Ethernet header put in front of a chained TSO packet was left out
    /// of it, so the driver's PAYLEN (from the total) lost 14 bytes and
    /// single-descriptor TSO's linearize indexed past its buffer.
    #[test]
    fn the_total_length_follows_the_first_buffer() {
        let pool = Mempool::new("chain-total", 4, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        p.set_len(100).unwrap();
        let mut q = pool.alloc().unwrap();
        q.set_len(50).unwrap();
        p.append(q);
        let sum = |p: &Packet| p.segments().map(|s| s.len()).sum::<usize>();
        assert_eq!(p.total_len(), 150);
        p.prepend(14).unwrap();
        assert_eq!((p.total_len(), sum(&p)), (164, 164));
        p.strip_front(34).unwrap();
        assert_eq!((p.total_len(), sum(&p)), (130, 130));
        p.set_len(10).unwrap();
        assert_eq!((p.total_len(), sum(&p)), (60, 60));
    }

    /// A chain of more than 65535 buffers used to overflow the u16
    /// segment count (a panic in debug builds, a wrong count in release).
    #[test]
    fn segment_count_of_a_chain_longer_than_u16() {
        let n = u16::MAX as usize + 3;
        let pool = Mempool::with_layout("long chain", n, 0, 64, MemoryKind::Plain).unwrap();
        let mut head = pool.alloc().unwrap();
        head.set_len(1).unwrap();
        // Built from the back, so that each append walks no chain.
        for _ in 1..n {
            let mut p = pool.alloc().unwrap();
            p.set_len(1).unwrap();
            p.append(head);
            head = p;
        }
        assert_eq!(head.segment_count(), 65538);
        assert_eq!(head.total_len(), 65538);
        let rest = head.take_next().unwrap();
        assert_eq!(rest.segment_count(), 65537);
        assert_eq!(head.segment_count(), 1);
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
    fn consume_front_hands_out_in_order_and_keeps_the_rest() {
        let pool = Mempool::new("t", 8, MemoryKind::Plain).unwrap();
        let mut batch = PacketBatch::with_capacity(8);
        pool.alloc_batch(&mut batch, 6);
        for (i, p) in batch.iter_mut().enumerate() {
            p.set_len(1).unwrap();
            p[0] = i as u8;
        }
        let mut taken = Vec::new();
        batch.consume_front(4, |p| taken.push(p[0]));
        assert_eq!(taken, vec![0, 1, 2, 3]);
        assert_eq!(batch.iter().map(|p| p[0]).collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(
            pool.free_count(),
            2 + 4,
            "the consumed ones were dropped by the closure"
        );
        batch.consume_front(10, drop);
        assert!(batch.is_empty());
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
