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

    /// The write barrier between a driver's last descriptor write and the
    /// tail write (RDT/TDT) that hands the descriptors to the device.
    /// The default is the architecture's barrier ([`crate::barrier`]); a
    /// device model overrides it to check the protocol.
    #[inline(always)]
    fn release_before_tail(&self) {
        crate::barrier::release_before_tail();
    }

    /// The read barrier after a driver saw a descriptor's DD bit (or the
    /// written-back head) and before it reads the rest or reuses the slot.
    /// The default is the architecture's barrier ([`crate::barrier`]).
    #[inline(always)]
    fn acquire_after_status(&self) {
        crate::barrier::acquire_after_status();
    }

    /// Stops the device from mastering the bus (clears Bus Master Enable
    /// in its PCI command register, PCI Local Bus spec 3.0 §6.2.2): the
    /// last step of a teardown, after which the device cannot DMA at all.
    /// The default does nothing (a model, or a device whose config space
    /// this handle cannot reach).
    fn disable_bus_master(&self) {}
}

/// Memory-mapped registers of a real device (BAR0 mapped with mmap).
pub struct Mmio {
    base: NonNull<u8>,
    len: usize,
    /// The device's PCI config space (sysfs `config`), where the handle
    /// came from sysfs: teardown clears Bus Master Enable through it.
    pci_config: Option<std::fs::File>,
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
        Mmio {
            base,
            len,
            pci_config: None,
        }
    }

    /// Remembers the device's config space (an open sysfs `config` file),
    /// so that [`RegisterAccess::disable_bus_master`] can reach it.
    pub(crate) fn with_pci_config(mut self, config: std::fs::File) -> Mmio {
        self.pci_config = Some(config);
        self
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

    /// Clears Bus Master Enable (bit 2 of the command register at config
    /// offset 4, PCI Local Bus spec 3.0 §6.2.2) through sysfs, if known.
    fn disable_bus_master(&self) {
        use std::os::unix::fs::FileExt;
        let Some(config) = &self.pci_config else {
            return;
        };
        let mut command = [0u8; 2];
        if config.read_exact_at(&mut command, 4).is_ok() {
            let value = u16::from_le_bytes(command) & !(1 << 2);
            if let Err(e) = config.write_all_at(&value.to_le_bytes(), 4) {
                eprintln!("oxnet: cannot clear bus mastering: {e}");
            }
        }
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
