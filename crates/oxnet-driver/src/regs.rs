//! Register access: the one seam between a driver and its device.
//!
//! A driver is generic over [`RegisterAccess`]. On hardware the implementation
//! is [`Mmio`], a volatile load/store into the mapped BAR0, which the compiler
//! inlines to a single `mov` — no dynamic dispatch, no cost. A software device
//! model (`oxnet-sim`) implements the same trait, so the very same driver code
//! runs against it in tests and in `oxnet demo`.

use std::ptr::NonNull;

/// 32-bit register access at a byte offset into the device's register space.
///
/// Implementations must be cheap to call; drivers call them on the data path
/// (RDT/TDT once per batch).
pub trait RegisterAccess: Send + Sync {
    /// Reads the 32-bit register at byte `offset`.
    fn read32(&self, offset: u32) -> u32;
    /// Writes the 32-bit register at byte `offset`.
    fn write32(&self, offset: u32, value: u32);

    /// Sets `mask` bits (read-modify-write).
    #[inline]
    fn set_flags32(&self, offset: u32, mask: u32) {
        let value = self.read32(offset);
        self.write32(offset, value | mask);
    }

    /// Clears `mask` bits (read-modify-write).
    #[inline]
    fn clear_flags32(&self, offset: u32, mask: u32) {
        let value = self.read32(offset);
        self.write32(offset, value & !mask);
    }
}

/// Memory-mapped registers of a real device (BAR0 mapped with mmap).
pub struct Mmio {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is device memory shared with the NIC; volatile 32-bit
// accesses from any thread are what the hardware expects. Ordering between
// threads is the driver's job (one queue belongs to one thread).
unsafe impl Send for Mmio {}
// SAFETY: see above; register accesses take `&self` and are single volatile ops.
unsafe impl Sync for Mmio {}

impl Mmio {
    /// Wraps a mapping of `len` bytes at `base`.
    ///
    /// # Safety
    /// `base` must point to a live mapping of at least `len` bytes that stays
    /// mapped for the lifetime of the returned value.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Mmio {
        Mmio { base, len }
    }

    /// Length of the mapped register space in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the mapping is empty (never for a real BAR).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl RegisterAccess for Mmio {
    #[inline(always)]
    fn read32(&self, offset: u32) -> u32 {
        debug_assert!(
            offset as usize + 4 <= self.len,
            "register offset {offset:#x} outside BAR"
        );
        // SAFETY: offset lies inside the mapped BAR (checked in debug builds;
        // drivers only use offsets from their regs.rs); MMIO must be volatile.
        unsafe { std::ptr::read_volatile(self.base.as_ptr().add(offset as usize) as *const u32) }
    }

    #[inline(always)]
    fn write32(&self, offset: u32, value: u32) {
        debug_assert!(
            offset as usize + 4 <= self.len,
            "register offset {offset:#x} outside BAR"
        );
        // SAFETY: as in read32.
        unsafe { std::ptr::write_volatile(self.base.as_ptr().add(offset as usize) as *mut u32, value) }
    }
}

impl Drop for Mmio {
    fn drop(&mut self) {
        // SAFETY: base/len came from a successful mmap of the BAR (see pci.rs).
        unsafe {
            libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}
