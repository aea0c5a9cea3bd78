//! DMA memory: where descriptor rings and packet buffers live.
//!
//! Two kinds, chosen by the device:
//!
//! * [`MemoryKind::HugePages`] — 2 MiB huge pages from a `memfd_create`
//!   (`MFD_HUGETLB`) file, mapped shared, populated and locked (`mlock`), so
//!   the kernel never moves or swaps them. The IOVA a NIC needs is the
//!   physical address, read from `/proc/self/pagemap` (ixy's approach, no
//!   IOMMU). A 2 MiB page is physically contiguous, so any allocation up to
//!   2 MiB that does not cross a page boundary is contiguous for the device.
//!   Reading page frame numbers needs `CAP_SYS_ADMIN`; without it pagemap
//!   returns zeros, which we detect and report instead of handing the NIC
//!   address 0.
//! * [`MemoryKind::Plain`] — ordinary pages (also a memfd, so that a later
//!   vhost-user backend can map them), IOVA = virtual address. Used for the
//!   software 82599 and kernel-backed devices.
//! * [`MemoryKind::CpuOnly`] — ordinary private pages that no device can
//!   reach: not in the arena, not in the IOVA map, never mapped into an
//!   IOMMU. For packets only the CPU touches; a device given one copies it
//!   into its own memory first ([`crate::domain`]).
//!
//! With vfio (an IOMMU) plain memory is what devices get, at IOVA =
//! virtual address: every allocation is mapped into each open vfio
//! container when it is made and unmapped when freed ([`DmaMapper`]).
//!
//! Every allocation is entered in a process-wide IOVA map
//! ([`iova_to_virt`]). A software device model does its "DMA" through that
//! map, so a driver bug that hands the model a wild address is caught as an
//! error instead of corrupting memory.

use crate::error::{os_error, Error, Result};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, RwLock};

/// Size of a huge page: the 2 MiB pages of x86-64.
pub const HUGE_PAGE_SIZE: usize = 2 * 1024 * 1024;
const SMALL_PAGE_SIZE: usize = 4096;

/// Which memory backs an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// 2 MiB huge pages, IOVA = physical address (needs root).
    HugePages,
    /// Ordinary memory, IOVA = virtual address (models, kernel devices).
    Plain,
    /// Ordinary private memory no device can reach (see [`crate::domain`]).
    /// Never chosen for a device's rings or receive buffers.
    CpuOnly,
}

impl std::str::FromStr for MemoryKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<MemoryKind> {
        match s {
            "huge" | "hugepages" => Ok(MemoryKind::HugePages),
            "plain" => Ok(MemoryKind::Plain),
            _ => Err(Error::Config(format!(
                "unknown memory kind '{s}': use 'huge' or 'plain'"
            ))),
        }
    }
}

/// A block of DMA-able memory: a mapping plus the IOVA of each of its pages.
pub struct DmaMemory {
    virt: NonNull<u8>,
    len: usize,
    kind: MemoryKind,
    /// IOVA of each chunk of `chunk_size` bytes (one entry for plain memory).
    chunk_iova: Vec<u64>,
    chunk_size: usize,
    fd: libc::c_int,
    /// Where this allocation starts in the file behind `fd`.
    fd_offset: usize,
    /// Plain memory is carved out of the process-wide arena (see [`arena`]).
    from_arena: bool,
}

// SAFETY: DmaMemory owns its mapping; the raw pointer is not tied to a thread.
unsafe impl Send for DmaMemory {}
// SAFETY: shared access only hands out addresses; writes go through raw
// pointers whose synchronisation is the user's (driver's) responsibility.
unsafe impl Sync for DmaMemory {}

impl DmaMemory {
    /// Allocates at least `len` bytes of `kind` memory.
    ///
    /// Huge-page memory is rounded up to whole 2 MiB pages. Allocations of at
    /// most 2 MiB are physically contiguous.
    pub fn allocate(len: usize, kind: MemoryKind) -> Result<DmaMemory> {
        if len == 0 {
            return Err(Error::Memory("cannot allocate 0 bytes of DMA memory".into()));
        }
        match kind {
            MemoryKind::HugePages => allocate_huge(len),
            MemoryKind::Plain => allocate_plain(len),
            MemoryKind::CpuOnly => allocate_cpu_only(len),
        }
    }

    /// Start of the mapping.
    pub fn virt(&self) -> *mut u8 {
        self.virt.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: allocations of 0 bytes are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory kind.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// The DMA domain its IOVAs belong to.
    pub fn dma_domain(&self) -> crate::domain::DmaDomain {
        crate::domain::DmaDomain::of(self.kind)
    }

    /// Bytes over which the IOVA is contiguous (2 MiB for huge pages).
    pub fn contiguous_chunk(&self) -> usize {
        self.chunk_size
    }

    /// The file descriptor behind the mapping (for sharing with a backend).
    pub fn fd(&self) -> libc::c_int {
        self.fd
    }

    /// Offset of this allocation in the file behind [`DmaMemory::fd`].
    pub fn fd_offset(&self) -> usize {
        self.fd_offset
    }

    /// IOVA of the byte at `offset`.
    ///
    /// # Panics
    /// If `offset` is outside the allocation (a bug in the caller).
    #[inline]
    pub fn iova(&self, offset: usize) -> u64 {
        assert!(
            offset < self.len,
            "offset {offset} outside DMA memory of {} bytes",
            self.len
        );
        self.chunk_iova[offset / self.chunk_size] + (offset % self.chunk_size) as u64
    }
}

impl Drop for DmaMemory {
    fn drop(&mut self) {
        if self.kind == MemoryKind::CpuOnly {
            // Never registered, no file behind it.
            // SAFETY: virt/len is our own anonymous mapping.
            unsafe { libc::munmap(self.virt.as_ptr() as *mut libc::c_void, self.len) };
            return;
        }
        unregister(self);
        if self.from_arena {
            if let Ok(arena) = arena() {
                arena.free(self.fd_offset, self.len);
            }
            return;
        }
        // SAFETY: virt/len is our own mapping, fd our own descriptor.
        unsafe {
            libc::munmap(self.virt.as_ptr() as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}

fn memfd(name: &str, flags: libc::c_uint) -> Result<libc::c_int> {
    let cname = std::ffi::CString::new(name).expect("static name without NUL");
    // SAFETY: plain syscall with a valid C string.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), flags | libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_error("memfd_create"));
    }
    Ok(fd)
}

fn map_fd(fd: libc::c_int, len: usize, extra_flags: libc::c_int) -> Result<NonNull<u8>> {
    // SAFETY: ftruncate/mmap on our own fd; the result is checked.
    unsafe {
        if libc::ftruncate(fd, len as libc::off_t) != 0 {
            let e = os_error("ftruncate of DMA memory file");
            libc::close(fd);
            return Err(e);
        }
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE | extra_flags,
            fd,
            0,
        );
        if addr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(Error::Memory(format!("mmap of {len} bytes of DMA memory failed: {e}")));
        }
        Ok(NonNull::new_unchecked(addr as *mut u8))
    }
}

fn allocate_plain(len: usize) -> Result<DmaMemory> {
    let len = len.div_ceil(SMALL_PAGE_SIZE) * SMALL_PAGE_SIZE;
    let arena = arena()?;
    let offset = arena.alloc(len)?;
    // SAFETY: offset + len lies inside the arena mapping (Arena::alloc).
    let virt = unsafe { NonNull::new_unchecked(arena.base.add(offset)) };
    let mem = DmaMemory {
        virt,
        len,
        kind: MemoryKind::Plain,
        chunk_iova: vec![virt.as_ptr() as u64],
        chunk_size: len,
        fd: arena.fd,
        fd_offset: offset,
        from_arena: true,
    };
    // On failure `mem` is dropped: its block goes back to the arena.
    register(&mem)?;
    Ok(mem)
}

/// Private anonymous pages, populated; not registered anywhere, so no
/// device, model or back-end can reach them.
fn allocate_cpu_only(len: usize) -> Result<DmaMemory> {
    let len = len.div_ceil(SMALL_PAGE_SIZE) * SMALL_PAGE_SIZE;
    // SAFETY: a fresh anonymous mapping; the result is checked.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(os_error("mmap of CPU-only packet memory"));
    }
    let virt = NonNull::new(addr as *mut u8).ok_or_else(|| Error::Memory("mmap returned address 0".into()))?;
    Ok(DmaMemory {
        virt,
        len,
        kind: MemoryKind::CpuOnly,
        // Only the CPU uses this "IOVA" (a Packet's data_iova()).
        chunk_iova: vec![virt.as_ptr() as u64],
        chunk_size: len,
        fd: -1,
        fd_offset: 0,
        from_arena: false,
    })
}

/// Size of the plain-memory arena's address range. Only what is allocated
/// is backed by memory (the file is sparse, freed blocks are punched out).
pub const ARENA_SIZE: usize = 4 << 30;

/// The process-wide arena that plain DMA memory comes from: one shared
/// memfd mapping, so that a vhost-user backend can map *all* of our DMA
/// memory (rings and every mempool, including ones made later) as a single
/// memory region — the protocol allows only 8.
pub struct Arena {
    /// The memfd behind the arena.
    pub fd: libc::c_int,
    /// Start of the mapping (IOVA = this address for plain memory).
    pub base: *mut u8,
    /// Length of the mapping.
    pub size: usize,
    state: std::sync::Mutex<ArenaState>,
    /// Bytes from the start ever handed out (the bump pointer), readable
    /// without the lock: a vhost-user transport maps only this much.
    high_water: std::sync::atomic::AtomicUsize,
}

struct ArenaState {
    /// Everything from here on was never handed out.
    bump: usize,
    /// Freed blocks (offset, length), reused first-fit.
    free: Vec<(usize, usize)>,
}

// SAFETY: the mapping is owned by the arena for the life of the process;
// its bookkeeping is behind a mutex.
unsafe impl Send for Arena {}
// SAFETY: see above.
unsafe impl Sync for Arena {}

static ARENA: std::sync::OnceLock<std::result::Result<Arena, Error>> = std::sync::OnceLock::new();

/// The plain-memory arena, created on first use.
pub fn arena() -> Result<&'static Arena> {
    ARENA.get_or_init(Arena::create).as_ref().map_err(Clone::clone)
}

impl Arena {
    fn create() -> Result<Arena> {
        let fd = memfd("oxnet-dma", 0)?;
        // SAFETY: our own fd; the result is checked.
        unsafe {
            if libc::ftruncate(fd, ARENA_SIZE as libc::off_t) != 0 {
                let e = os_error("sizing the DMA memory arena");
                libc::close(fd);
                return Err(e);
            }
            let addr = libc::mmap(
                std::ptr::null_mut(),
                ARENA_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            );
            if addr == libc::MAP_FAILED {
                let e = os_error("mapping the DMA memory arena");
                libc::close(fd);
                return Err(e);
            }
            Ok(Arena {
                fd,
                base: addr as *mut u8,
                size: ARENA_SIZE,
                state: std::sync::Mutex::new(ArenaState {
                    bump: 0,
                    free: Vec::new(),
                }),
                high_water: std::sync::atomic::AtomicUsize::new(0),
            })
        }
    }

    /// Offset of a zeroed block of `len` bytes (a multiple of 4 KiB, so
    /// every block is page aligned, as legacy virtqueues require).
    fn alloc(&self, len: usize) -> Result<usize> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = state.free.iter().position(|&(_, l)| l >= len) {
            let (offset, l) = state.free[i];
            if l == len {
                state.free.swap_remove(i);
            } else {
                state.free[i] = (offset + len, l - len);
            }
            return Ok(offset);
        }
        if state.bump + len > self.size {
            return Err(Error::Memory(format!(
                "DMA memory arena full: {} of {} MiB in use, {len} more bytes wanted",
                state.bump >> 20,
                self.size >> 20
            )));
        }
        let offset = state.bump;
        state.bump += len;
        self.high_water.store(state.bump, std::sync::atomic::Ordering::Release);
        Ok(offset)
    }

    /// Bytes from the arena's start that have ever been handed out: every
    /// live allocation lies below this.
    #[inline]
    pub fn high_water(&self) -> usize {
        self.high_water.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Gives a block back; its pages return to the system (punched out of
    /// the file), so a reused block reads as zeros again.
    fn free(&self, offset: usize, len: usize) {
        // SAFETY: punching a hole in our own file, inside the arena.
        unsafe {
            libc::fallocate(
                self.fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            );
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.free.push((offset, len));
    }
}

/// Free 2 MiB huge pages according to /proc/meminfo.
pub fn free_huge_pages() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("HugePages_Free:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

fn allocate_huge(len: usize) -> Result<DmaMemory> {
    // Permission first: without CAP_SYS_ADMIN we could map huge pages but
    // never learn their physical addresses.
    check_pagemap_access()?;
    let pages = len.div_ceil(HUGE_PAGE_SIZE);
    let len = pages * HUGE_PAGE_SIZE;
    let free = free_huge_pages().unwrap_or(0);
    if free < pages as u64 {
        return Err(Error::Memory(format!(
            "no free 2 MiB huge pages: need {pages}, {free} free \
             (run `oxnet setup hugepages {}` as root)",
            pages.max(512)
        )));
    }
    let fd = memfd("oxnet-dma", libc::MFD_HUGETLB | libc::MFD_HUGE_2MB)?;
    let virt = map_fd(fd, len, 0).map_err(|e| {
        Error::Memory(format!(
            "{e}: not enough free 2 MiB huge pages (run `oxnet setup hugepages {}`)",
            pages.max(512)
        ))
    })?;
    // SAFETY: our own fresh mapping of `len` bytes.
    if unsafe { libc::mlock(virt.as_ptr() as *const libc::c_void, len) } != 0 {
        let e = os_error("mlock of DMA memory");
        // SAFETY: undo our own mapping.
        unsafe {
            libc::munmap(virt.as_ptr() as *mut libc::c_void, len);
            libc::close(fd);
        }
        return Err(e);
    }
    let mut chunk_iova = Vec::with_capacity(pages);
    for page in 0..pages {
        // SAFETY: inside our mapping.
        let va = unsafe { virt.as_ptr().add(page * HUGE_PAGE_SIZE) } as usize;
        match virt_to_phys(va) {
            Ok(pa) => chunk_iova.push(pa),
            Err(e) => {
                // SAFETY: undo our own mapping.
                unsafe {
                    libc::munmap(virt.as_ptr() as *mut libc::c_void, len);
                    libc::close(fd);
                }
                return Err(e);
            }
        }
    }
    let mem = DmaMemory {
        virt,
        len,
        kind: MemoryKind::HugePages,
        chunk_iova,
        chunk_size: HUGE_PAGE_SIZE,
        fd,
        fd_offset: 0,
        from_arena: false,
    };
    register(&mem)?;
    Ok(mem)
}

/// Translates a virtual address of this process to a physical address using
/// /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst: one 64-bit
/// entry per 4 KiB page, bits 0–54 page frame number, bit 63 page present).
pub fn virt_to_phys(virt: usize) -> Result<u64> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open("/proc/self/pagemap")
        .map_err(|e| Error::Permission(format!("cannot open /proc/self/pagemap: {e}")))?;
    let mut entry = [0u8; 8];
    let offset = (virt / SMALL_PAGE_SIZE * 8) as u64;
    file.read_exact_at(&mut entry, offset)
        .map_err(|e| Error::Memory(format!("cannot read /proc/self/pagemap: {e}")))?;
    let entry = u64::from_le_bytes(entry);
    let present = entry >> 63 == 1;
    let pfn = entry & ((1u64 << 55) - 1);
    if !present {
        return Err(Error::Memory(format!("page at {virt:#x} is not present in memory")));
    }
    if pfn == 0 {
        return Err(not_root_error());
    }
    Ok(pfn * SMALL_PAGE_SIZE as u64 + (virt % SMALL_PAGE_SIZE) as u64)
}

fn not_root_error() -> Error {
    Error::Permission(
        "not root: /proc/self/pagemap hides physical addresses without CAP_SYS_ADMIN, \
         so huge-page DMA memory cannot be used (run as root, or use vfio with an IOMMU)"
            .into(),
    )
}

/// Fails with a clear message if this process cannot read physical addresses.
pub fn check_pagemap_access() -> Result<()> {
    let probe = Box::new(0u64);
    let va = &*probe as *const u64 as usize;
    // SAFETY: touching our own heap value makes sure the page is present.
    unsafe { std::ptr::read_volatile(&*probe) };
    virt_to_phys(va).map(|_| ())
}

// ---------------------------------------------------------------------------
// The process-wide IOVA map, used by software device models to do "DMA".

struct Region {
    virt: usize,
    len: usize,
    domain: crate::domain::DmaDomain,
}

static IOVA_MAP: RwLock<BTreeMap<u64, Region>> = RwLock::new(BTreeMap::new());

// ---------------------------------------------------------------------------
// DMA mappers: IOMMUs that must know every allocation.

/// Something that must see every DMA allocation of the process: an IOMMU
/// (a vfio container) that maps each one at its IOVA before a device may
/// use it, and unmaps it when it is freed.
///
/// With vfio the IOVA of plain memory is its virtual address. Mapping the
/// whole 4 GiB arena at once is not an option: `VFIO_IOMMU_MAP_DMA` pins
/// (and so populates) every page it maps. So each allocation is mapped when
/// it is made, into every mapper there is, and a new mapper first maps the
/// allocations that already exist ([`add_dma_mapper`]).
pub trait DmaMapper: Send + Sync {
    /// Makes `len` bytes at virtual address `virt` reachable at `iova`.
    fn map(&self, virt: usize, iova: u64, len: usize) -> Result<()>;
    /// Undoes a [`DmaMapper::map`] of the same range.
    fn unmap(&self, iova: u64, len: usize);
}

/// Identifies a mapper for [`remove_dma_mapper`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaMapperId(u64);

struct Mappers {
    next_id: u64,
    list: Vec<(u64, Arc<dyn DmaMapper>)>,
}

/// The mappers. Its lock is also held while an allocation is entered in or
/// removed from [`IOVA_MAP`], so that a mapper added at the same moment
/// maps every allocation exactly once.
static MAPPERS: Mutex<Mappers> = Mutex::new(Mappers {
    next_id: 0,
    list: Vec::new(),
});

fn lock_mappers() -> std::sync::MutexGuard<'static, Mappers> {
    MAPPERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds a mapper and maps every live allocation into it; from now on every
/// new allocation is mapped into it too, and unmapped when freed.
pub fn add_dma_mapper(mapper: Arc<dyn DmaMapper>) -> Result<DmaMapperId> {
    let mut mappers = lock_mappers();
    let map = IOVA_MAP.read().unwrap_or_else(|e| e.into_inner());
    let mut done: Vec<(u64, usize)> = Vec::new();
    for (iova, region) in map.iter() {
        if let Err(e) = mapper.map(region.virt, *iova, region.len) {
            for (iova, len) in done {
                mapper.unmap(iova, len);
            }
            return Err(e);
        }
        done.push((*iova, region.len));
    }
    let id = mappers.next_id;
    mappers.next_id += 1;
    mappers.list.push((id, mapper));
    Ok(DmaMapperId(id))
}

/// Forgets a mapper (its IOMMU is going away: nothing is unmapped).
pub fn remove_dma_mapper(id: DmaMapperId) {
    lock_mappers().list.retain(|(i, _)| *i != id.0);
}

/// The chunks of an allocation: (virtual address, IOVA, length).
fn chunks(mem: &DmaMemory) -> impl Iterator<Item = (usize, u64, usize)> + '_ {
    mem.chunk_iova.iter().enumerate().map(|(i, iova)| {
        let virt = mem.virt.as_ptr() as usize + i * mem.chunk_size;
        let len = mem.chunk_size.min(mem.len - i * mem.chunk_size);
        (virt, *iova, len)
    })
}

/// Enters an allocation in the IOVA map and maps it into every mapper. On
/// failure nothing stays entered or mapped.
fn register(mem: &DmaMemory) -> Result<()> {
    let mappers = lock_mappers();
    let mut done: Vec<(&Arc<dyn DmaMapper>, u64, usize)> = Vec::new();
    for (_, mapper) in &mappers.list {
        for (virt, iova, len) in chunks(mem) {
            if let Err(e) = mapper.map(virt, iova, len) {
                for (m, iova, len) in done {
                    m.unmap(iova, len);
                }
                return Err(e);
            }
            done.push((mapper, iova, len));
        }
    }
    let mut map = IOVA_MAP.write().unwrap_or_else(|e| e.into_inner());
    for (virt, iova, len) in chunks(mem) {
        map.insert(
            iova,
            Region {
                virt,
                len,
                domain: mem.dma_domain(),
            },
        );
    }
    Ok(())
}

/// Undoes [`register`] (nothing if it failed).
fn unregister(mem: &DmaMemory) {
    let mappers = lock_mappers();
    let mut map = IOVA_MAP.write().unwrap_or_else(|e| e.into_inner());
    if map.get(&mem.chunk_iova[0]).map(|r| r.virt) != Some(mem.virt.as_ptr() as usize) {
        return;
    }
    for (_, iova, len) in chunks(mem) {
        map.remove(&iova);
        for (_, mapper) in &mappers.list {
            mapper.unmap(iova, len);
        }
    }
}

/// Host address of `len` bytes at `iova`, if all of them lie inside one
/// contiguous chunk of live DMA memory of this process.
///
/// Device models use this as their IOMMU: an address a driver never
/// allocated yields `None` (the model reports it) instead of a wild write.
/// The memory may be freed right after this returns: a model that runs
/// beside the driver (on another thread) holds an [`IovaMapGuard`] instead.
pub fn iova_to_virt(iova: u64, len: usize) -> Option<NonNull<u8>> {
    lock_iova_map().lookup(iova, len)
}

/// The IOVA map, held for reading: no DMA memory can be freed (its
/// `Drop` waits) while a guard lives, so an address looked up through it
/// stays valid until the guard is dropped. A device model that does DMA on
/// its own thread takes one for each run of work. Never take a second one
/// on the same thread while holding one (a waiting free would deadlock
/// them), and never hold one while waiting for the driver.
pub struct IovaMapGuard(std::sync::RwLockReadGuard<'static, BTreeMap<u64, Region>>);

impl IovaMapGuard {
    /// As [`iova_to_virt`], valid while the guard lives.
    pub fn lookup(&self, iova: u64, len: usize) -> Option<NonNull<u8>> {
        let (start, region) = self.0.range(..=iova).next_back()?;
        let offset = (iova - start) as usize;
        if offset.checked_add(len)? > region.len {
            return None;
        }
        NonNull::new((region.virt + offset) as *mut u8)
    }
}

/// Takes the IOVA map for reading (see [`IovaMapGuard`]).
pub fn lock_iova_map() -> IovaMapGuard {
    IovaMapGuard(IOVA_MAP.read().unwrap_or_else(|e| e.into_inner()))
}

/// The DMA domain of the live DMA memory that holds `iova`, if any (what
/// a test checks a descriptor's buffer address against).
pub fn iova_domain(iova: u64) -> Option<crate::domain::DmaDomain> {
    let map = IOVA_MAP.read().unwrap_or_else(|e| e.into_inner());
    let (start, region) = map.range(..=iova).next_back()?;
    ((iova - start) < region.len as u64).then_some(region.domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_memory_iova_is_virtual_address() {
        let mem = DmaMemory::allocate(10_000, MemoryKind::Plain).unwrap();
        assert_eq!(mem.len(), 12_288);
        assert_eq!(mem.virt() as usize % 4096, 0, "page aligned");
        let arena = arena().unwrap();
        assert_eq!(mem.fd(), arena.fd);
        assert_eq!(mem.virt() as usize - arena.base as usize, mem.fd_offset());
        assert_eq!(mem.iova(0), mem.virt() as u64);
        assert_eq!(mem.iova(5000), mem.virt() as u64 + 5000);
    }

    #[test]
    fn iova_map_finds_live_and_rejects_unknown_addresses() {
        let mem = DmaMemory::allocate(8192, MemoryKind::Plain).unwrap();
        let iova = mem.iova(100);
        assert_eq!(iova_to_virt(iova, 16).unwrap().as_ptr(), unsafe { mem.virt().add(100) });
        assert!(iova_to_virt(iova, 8192).is_none(), "runs past the end");
        let gone = mem.iova(0);
        drop(mem);
        assert!(iova_to_virt(gone, 1).is_none(), "freed memory is unmapped");
    }

    #[test]
    fn freed_arena_blocks_are_reused_and_zeroed() {
        let a = DmaMemory::allocate(8192, MemoryKind::Plain).unwrap();
        // SAFETY: our own fresh allocation.
        unsafe { std::ptr::write_bytes(a.virt(), 0xAB, 8192) };
        drop(a);
        // Some block of this size is handed out again; whichever it is,
        // it reads as zeros.
        let b = DmaMemory::allocate(8192, MemoryKind::Plain).unwrap();
        let bytes = unsafe { std::slice::from_raw_parts(b.virt(), 8192) };
        assert!(bytes.iter().all(|&x| x == 0));
    }

    /// Records what it is asked to map and unmap.
    #[derive(Default)]
    struct Recorder {
        mapped: Mutex<Vec<(usize, u64, usize)>>,
        unmapped: Mutex<Vec<(u64, usize)>>,
    }

    impl DmaMapper for Recorder {
        fn map(&self, virt: usize, iova: u64, len: usize) -> Result<()> {
            self.mapped.lock().unwrap().push((virt, iova, len));
            Ok(())
        }
        fn unmap(&self, iova: u64, len: usize) {
            self.unmapped.lock().unwrap().push((iova, len));
        }
    }

    #[test]
    fn mappers_see_existing_new_and_freed_allocations() {
        let before = DmaMemory::allocate(8192, MemoryKind::Plain).unwrap();
        let recorder = Arc::new(Recorder::default());
        let id = add_dma_mapper(recorder.clone()).unwrap();
        let entry = |m: &DmaMemory| (m.virt() as usize, m.iova(0), m.len());
        assert!(
            recorder.mapped.lock().unwrap().contains(&entry(&before)),
            "existing one mapped"
        );
        let after = DmaMemory::allocate(4096, MemoryKind::Plain).unwrap();
        let after_entry = entry(&after);
        assert!(recorder.mapped.lock().unwrap().contains(&after_entry), "new one mapped");
        assert_eq!(
            after_entry.1, after_entry.0 as u64,
            "plain memory: IOVA = virtual address"
        );
        drop(after);
        assert!(recorder
            .unmapped
            .lock()
            .unwrap()
            .contains(&(after_entry.1, after_entry.2)));
        remove_dma_mapper(id);
        let seen = recorder.mapped.lock().unwrap().len();
        let _later = DmaMemory::allocate(4096, MemoryKind::Plain).unwrap();
        assert_eq!(
            recorder.mapped.lock().unwrap().len(),
            seen,
            "a removed mapper sees nothing"
        );
    }

    #[test]
    fn zero_bytes_is_an_error() {
        assert!(DmaMemory::allocate(0, MemoryKind::Plain).is_err());
    }

    #[test]
    fn huge_pages_give_a_clear_error_or_work() {
        // On a machine with no free huge pages the error must say what to do;
        // as non-root it must say so. With huge pages and root it works and
        // the IOVA is a physical address different from the virtual one.
        // When the environment promises huge pages and root
        // (OXNET_EXPECT_HUGEPAGES, set by scripts/test.sh after `oxnet setup
        // hugepages`), only success passes.
        let result = DmaMemory::allocate(4096, MemoryKind::HugePages);
        if std::env::var_os("OXNET_EXPECT_HUGEPAGES").is_some() {
            let mem = result.unwrap_or_else(|e| panic!("OXNET_EXPECT_HUGEPAGES is set but allocation failed: {e}"));
            assert_eq!(mem.len(), HUGE_PAGE_SIZE);
            assert_ne!(mem.iova(0), 0);
            assert_eq!(mem.iova(4096), mem.iova(0) + 4096, "a huge page is contiguous");
            return;
        }
        match result {
            Ok(mem) => {
                assert_eq!(mem.len(), HUGE_PAGE_SIZE);
                assert_ne!(mem.iova(0), 0);
                assert_eq!(mem.iova(4096), mem.iova(0) + 4096, "a huge page is contiguous");
            }
            Err(Error::Memory(m)) => assert!(m.contains("oxnet setup hugepages"), "{m}"),
            Err(Error::Permission(m)) => assert!(m.contains("not root"), "{m}"),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}
