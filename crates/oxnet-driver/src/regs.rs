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

    /// Refuses an access outside the mapping, in release builds too: one
    /// compare and a never-taken branch per access (drivers only use the
    /// offsets of their regs.rs, so it fires only on a programming error,
    /// e.g. a queue number past the register arrays; a panic with the
    /// offset beats undefined behaviour).
    #[inline(always)]
    fn check(&self, offset: u32) {
        if offset as usize > self.len.saturating_sub(4) || self.len < 4 {
            out_of_bar(offset, self.len);
        }
    }
}

#[cold]
#[inline(never)]
fn out_of_bar(offset: u32, len: usize) -> ! {
    panic!("register offset {offset:#x} lies outside the {len:#x}-byte BAR: refused (oxnet driver bug)")
}

impl RegisterAccess for Mmio {
    #[inline(always)]
    fn read32(&self, offset: u32) -> u32 {
        self.check(offset);
        // SAFETY: `check` keeps the 4 bytes inside the mapped BAR; MMIO must
        // be volatile.
        unsafe { std::ptr::read_volatile(self.base.as_ptr().add(offset as usize) as *const u32) }
    }

    #[inline(always)]
    fn write32(&self, offset: u32, value: u32) {
        self.check(offset);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An `Mmio` over a plain heap buffer (not mapped with mmap: it must not
    /// be dropped through `Mmio::drop`, hence `forget`).
    fn with_mmio(len: usize, f: impl FnOnce(&Mmio)) {
        let mut words = vec![0u32; len / 4];
        // SAFETY: `words` lives for the whole call; `len` bytes fit in it.
        let mmio = unsafe { Mmio::new(NonNull::new(words.as_mut_ptr() as *mut u8).unwrap(), len) };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mmio)));
        std::mem::forget(mmio);
        drop(words);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }

    #[test]
    fn access_inside_the_bar_works() {
        with_mmio(64, |m| {
            m.write32(60, 0xDEAD_BEEF);
            assert_eq!(m.read32(60), 0xDEAD_BEEF);
            assert_eq!(m.read32(0), 0);
        });
    }

    /// Issue 8 item 4: the bound is checked in release builds too (this
    /// test runs in both; `cargo test --release -p oxnet-driver regs`).
    #[test]
    fn access_outside_the_bar_is_refused_in_every_build() {
        for offset in [61u32, 64, 0x1000, u32::MAX] {
            for write in [false, true] {
                let result = std::panic::catch_unwind(|| {
                    with_mmio(64, |m| {
                        if write {
                            m.write32(offset, 1)
                        } else {
                            m.read32(offset);
                        }
                    })
                });
                let message = result.expect_err("out-of-BAR access must panic");
                let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(
                    message.contains(&format!("{offset:#x}")) && message.contains("outside"),
                    "clear message: {message}"
                );
            }
        }
    }
}
