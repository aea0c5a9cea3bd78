//! The model's side of DMA: every address a driver hands the device is
//! looked up in oxnet-driver's IOVA map first, so that a wrong address
//! becomes a fault message instead of a write into random memory.

//!
//! Every piece of work the model does runs inside [`hold`], which keeps the
//! IOVA map locked for reading: memory cannot be freed between the lookup
//! of an address and the access, even when the model's DMA engine runs on
//! its own thread beside the driver. Memory a driver freed while the device
//! could still reach it is no longer in the map: the model's next access
//! to it is a fault ("not inside any live DmaMemory"), never a write into
//! memory the allocator has handed out again.

use oxnet_driver::memory::{lock_iova_map, IovaMapGuard};
use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicU32, Ordering};

thread_local! {
    /// The IOVA map guard of the work this thread is doing (see [`hold`]).
    static HELD: RefCell<Option<IovaMapGuard>> = const { RefCell::new(None) };
}

/// Runs `f` with the IOVA map held for reading (once per thread: a nested
/// call runs `f` under the guard already held). Take it before the world's
/// lock, never after (a driver freeing memory waits for the guard while
/// holding no world lock, so this order cannot deadlock).
pub(crate) fn hold<T>(f: impl FnOnce() -> T) -> T {
    if HELD.with(|h| h.borrow().is_some()) {
        return f();
    }
    HELD.with(|h| *h.borrow_mut() = Some(lock_iova_map()));
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            HELD.with(|h| h.borrow_mut().take());
        }
    }
    let _release = Release;
    f()
}

/// Host pointer to `len` bytes of DMA memory at `iova`, or a message saying
/// why the device cannot use that address. Valid until the enclosing
/// [`hold`] ends.
pub(crate) fn map(iova: u64, len: usize, what: &str) -> Result<*mut u8, String> {
    let found = HELD.with(|h| match &*h.borrow() {
        Some(guard) => guard.lookup(iova, len),
        None => lock_iova_map().lookup(iova, len),
    });
    match found {
        Some(ptr) => Ok(ptr.as_ptr()),
        None => Err(format!(
            "DMA to {what} at {iova:#x} ({len} bytes): not inside any live DmaMemory"
        )),
    }
}

/// Reads the little-endian u64 at `ptr`.
///
/// # Safety
/// `ptr` must come from [`map`] with at least 8 bytes left after it.
pub(crate) unsafe fn read_u64(ptr: *const u8) -> u64 {
    // SAFETY: the caller guarantees 8 readable bytes; unaligned is allowed.
    unsafe { u64::from_le_bytes(std::ptr::read_volatile(ptr as *const [u8; 8])) }
}

/// Reads the little-endian u32 at `ptr`.
///
/// # Safety
/// As [`read_u64`], with 4 bytes.
pub(crate) unsafe fn read_u32(ptr: *const u8) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes.
    unsafe { u32::from_le_bytes(std::ptr::read_volatile(ptr as *const [u8; 4])) }
}

/// Writes the little-endian u32 `value` at `ptr`.
///
/// # Safety
/// As [`read_u64`], with 4 writable bytes.
pub(crate) unsafe fn write_u32(ptr: *mut u8, value: u32) {
    // SAFETY: the caller guarantees 4 writable bytes.
    unsafe { std::ptr::write_volatile(ptr as *mut [u8; 4], value.to_le_bytes()) }
}

/// Writes a descriptor's status dword so that a driver polling it sees
/// everything written before (data, length) once it sees the new status:
/// a release fence, then one atomic 32-bit store.
///
/// # Safety
/// `ptr` must come from [`map`], be 4-byte aligned and have 4 writable bytes.
pub(crate) unsafe fn publish_u32(ptr: *mut u8, value: u32) {
    fence(Ordering::Release);
    // SAFETY: aligned, live, and only accessed atomically or by the driver
    // reading it after the store (the device/driver handshake via DD).
    unsafe { AtomicU32::from_ptr(ptr as *mut u32).store(value.to_le(), Ordering::Release) }
}

/// Copies `data` to host memory at `ptr`.
///
/// # Safety
/// `ptr` must come from [`map`] with `data.len()` writable bytes.
pub(crate) unsafe fn copy_to(ptr: *mut u8, data: &[u8]) {
    // SAFETY: the caller guarantees the destination; the source is a
    // model-owned buffer, so they cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) }
}

/// Appends `len` bytes of host memory at `ptr` to `out`.
///
/// # Safety
/// `ptr` must come from [`map`] with `len` readable bytes.
pub(crate) unsafe fn copy_from(ptr: *const u8, len: usize, out: &mut Vec<u8>) {
    // SAFETY: the caller guarantees `len` readable bytes.
    out.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
}
