//! The two barriers of the descriptor-ring protocol between a driver and a
//! DMA device, per architecture. The reasoning, once:
//!
//! * **Release before the tail write.** A driver writes descriptors (and
//!   packet data) into ordinary write-back memory, then writes the tail
//!   register (RDT/TDT) in uncached MMIO space. The device may fetch the
//!   descriptors as soon as it sees the new tail, so every earlier store
//!   must be visible to the device before the tail store is.
//! * **Acquire after the status.** The device writes a descriptor's data
//!   and fields first and its status (DD) last (82599 §7.1.6.2 and
//!   §7.2.3.5.1; 82576 §7.1.5 and §7.2.2.3), or the head write-back
//!   (82599 §7.2.3.5.2). Once the driver has read DD (or the written-back
//!   head), its later reads of the descriptor and the buffer must not be
//!   satisfied by loads issued before that read, and its later writes (re-arming the slot, reusing
//!   the buffer) must not become visible before it.
//!
//! Rust's `std::sync::atomic::fence` orders memory between CPUs (it is
//! defined by the C++ memory model, which knows no devices): on arm64 a
//! release fence is `dmb ish`, inner-shareable, which does not reach a
//! device in the outer-shareable domain. So the barriers are spelled per
//! architecture:
//!
//! * **x86-64** (tested): stores are not reordered with other stores, nor
//!   loads with other loads (Intel SDM vol. 3A §8.2.2, "Memory ordering in
//!   P6 and more recent processor families"), and writes to UC memory (the
//!   mapped BAR) are not reordered with earlier writes. The only thing
//!   that can reorder is the compiler, so both barriers are a
//!   `compiler_fence`, which emits no instruction. (Linux's `dma_wmb()` and
//!   `dma_rmb()` are also plain compiler barriers on x86-64.)
//! * **arm64** (not verified: this project cannot build or test it here):
//!   `dmb oshst` before the tail write (stores before stores, outer
//!   shareable: the device's domain) and `dmb oshld` after reading DD or
//!   the head (loads before later loads and stores), as Linux's arm64
//!   `dma_wmb()` / `dma_rmb()` do.
//! * Any other architecture: a compile error, rather than a guess.
//!
//! Drivers do not call these directly: they call
//! [`RegisterAccess::release_before_tail`](crate::RegisterAccess::release_before_tail)
//! and [`RegisterAccess::acquire_after_status`](crate::RegisterAccess::acquire_after_status),
//! whose defaults are these functions (inlined: nothing on the fast path
//! costs more). A device model overrides them to check that the driver
//! calls them where the protocol needs them (`oxnet-sim`).

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("oxnet-driver: no DMA barriers for this architecture; see src/barrier.rs for what they must order");

/// Makes every earlier store (descriptors, packet data) visible to the
/// device before any later store (the tail register write).
#[inline(always)]
pub fn release_before_tail() {
    #[cfg(target_arch = "x86_64")]
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a memory barrier instruction; it touches no memory and no register.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
}

/// Orders every later load and store after the earlier load of a status
/// (DD bit, written-back head) that the device wrote last.
#[inline(always)]
pub fn acquire_after_status() {
    #[cfg(target_arch = "x86_64")]
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Acquire);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a memory barrier instruction; it touches no memory and no register.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
}
