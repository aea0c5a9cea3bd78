//! Shared memory: regions (a memfd mapped by both peers) and the rings in
//! them (header with cookie, flags, head, tail; then descriptors).

use super::proto::{desc, ring, COOKIE};
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};

/// A mapped region. The client creates it (memfd_create(2)); the server
/// maps the descriptor it received with ADD_REGION.
pub struct Region {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory, valid until drop; who
// writes where is governed by the ring protocol.
unsafe impl Send for Region {}

impl Region {
    /// A new zeroed region of `len` bytes.
    pub fn create(name: &str, len: usize) -> Result<Region> {
        let cname = std::ffi::CString::new(name).unwrap_or_default();
        // SAFETY: plain syscall; the result is checked and owned at once.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(crate::error::os_error("memif: memfd_create for the shared region"));
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(crate::error::os_error("memif: sizing the shared region"));
        }
        Region::map(fd, len)
    }

    /// Maps `len` bytes of `fd` shared, read and write.
    pub fn map(fd: OwnedFd, len: usize) -> Result<Region> {
        if len == 0 {
            return Err(Error::Device("memif: a region of 0 bytes".into()));
        }
        // SAFETY: a new mapping of a descriptor we own; the kernel checks
        // the descriptor and the length; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Io(format!(
                "memif: cannot map the shared region ({len} bytes): {}",
                std::io::Error::last_os_error()
            )));
        }
        // A file shorter than `len` maps, but touching past its end
        // raises SIGBUS: check the size the peer claims.
        // SAFETY: fstat on our descriptor into a zeroed stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let size_ok = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 && st.st_size as u64 >= len as u64;
        let region = Region {
            ptr: ptr as *mut u8,
            len,
            fd,
        };
        if !size_ok {
            return Err(Error::Device(format!(
                "memif: the region's file is {} bytes, shorter than the {len} bytes announced",
                st.st_size
            )));
        }
        Ok(region)
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Pointer to `len` bytes at `offset`, if they lie inside the region
    /// (descriptors come from the peer: never trusted).
    #[inline]
    pub fn slice_ptr(&self, offset: u32, len: u32) -> Option<*mut u8> {
        let end = offset as u64 + len as u64;
        if end > self.len as u64 {
            return None;
        }
        // SAFETY: offset + len lies inside the mapping.
        Some(unsafe { self.ptr.add(offset as usize) })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; rings pointing into it
        // are dropped with the connection before or with it.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// A descriptor copied out of the ring.
#[derive(Debug, Clone, Copy, Default)]
pub struct Desc {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
}

/// A view of one ring inside a region.
pub struct Ring {
    base: *mut u8,
    pub log2: u8,
}

// SAFETY: a pointer into a region owned by the same connection.
unsafe impl Send for Ring {}

impl Ring {
    /// The ring at `offset` of `region`, if it fits.
    pub fn at(region: &Region, offset: u32, log2: u8) -> Option<Ring> {
        let base = region.slice_ptr(offset, ring::bytes(log2) as u32)?;
        if !(base as usize).is_multiple_of(64) {
            return None;
        }
        Some(Ring { base, log2 })
    }

    pub fn size(&self) -> u16 {
        // log2 <= 14 (checked when the ring is added).
        1u16 << self.log2
    }

    pub fn mask(&self) -> u16 {
        self.size() - 1
    }

    fn atomic(&self, at: usize) -> &AtomicU16 {
        // SAFETY: `at` is a 2-byte aligned field of the header inside the
        // mapping; both peers access it as an atomic u16 (memif.h marks
        // head and tail volatile / RTE_ATOMIC).
        unsafe { &*(self.base.add(at) as *const AtomicU16) }
    }

    pub fn head(&self) -> &AtomicU16 {
        self.atomic(ring::HEAD)
    }

    pub fn tail(&self) -> &AtomicU16 {
        self.atomic(ring::TAIL)
    }

    pub fn flags(&self) -> &AtomicU16 {
        self.atomic(ring::FLAGS)
    }

    pub fn cookie(&self) -> u32 {
        // SAFETY: the first 4 bytes of the header, aligned.
        unsafe { std::ptr::read_volatile(self.base.add(ring::COOKIE) as *const u32) }
    }

    /// Writes a fresh header: cookie, flags 0, head = tail = 0.
    pub fn init(&self) {
        // SAFETY: the header lies inside the mapping (checked in `at`).
        unsafe { std::ptr::write_volatile(self.base.add(ring::COOKIE) as *mut u32, COOKIE) };
        self.flags().store(0, Ordering::Relaxed);
        self.head().store(0, Ordering::Relaxed);
        self.tail().store(0, Ordering::Release);
    }

    fn desc_ptr(&self, slot: u16) -> *mut u8 {
        let index = (slot & self.mask()) as usize;
        // SAFETY: index < size, and the descriptors lie inside the mapping.
        unsafe { self.base.add(ring::DESCRIPTORS + index * desc::SIZE) }
    }

    /// Reads descriptor `slot` (modulo the ring size) once.
    #[inline]
    pub fn read(&self, slot: u16) -> Desc {
        let p = self.desc_ptr(slot);
        // SAFETY: 16 bytes inside the mapping; unaligned reads because the
        // layout is packed. The peer does not write this slot now (the
        // ring protocol gives it to us), and whatever it holds is checked.
        unsafe {
            Desc {
                flags: std::ptr::read_unaligned(p as *const u16),
                region: std::ptr::read_unaligned(p.add(2) as *const u16),
                length: std::ptr::read_unaligned(p.add(4) as *const u32),
                offset: std::ptr::read_unaligned(p.add(8) as *const u32),
            }
        }
    }

    /// Writes descriptor `slot`.
    #[inline]
    pub fn write(&self, slot: u16, d: Desc) {
        let p = self.desc_ptr(slot);
        // SAFETY: as in `read`; the slot is ours to write.
        unsafe {
            std::ptr::write_unaligned(p as *mut u16, d.flags);
            std::ptr::write_unaligned(p.add(2) as *mut u16, d.region);
            std::ptr::write_unaligned(p.add(4) as *mut u32, d.length);
            std::ptr::write_unaligned(p.add(8) as *mut u32, d.offset);
            std::ptr::write_unaligned(p.add(12) as *mut u32, 0);
        }
    }

    /// Sets only the length and flags of descriptor `slot`.
    #[inline]
    pub fn set_length(&self, slot: u16, length: u32, flags: u16) {
        let p = self.desc_ptr(slot);
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::write_unaligned(p as *mut u16, flags);
            std::ptr::write_unaligned(p.add(4) as *mut u32, length);
        }
    }
}

/// A non-blocking eventfd (eventfd(2)): a ring's interrupt line.
pub fn eventfd() -> Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked and owned at once.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(crate::error::os_error("memif: eventfd"));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd (adds 1 to its counter).
#[inline]
pub fn signal(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64; a full counter (EAGAIN)
    // already means "interrupt pending".
    unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
}
