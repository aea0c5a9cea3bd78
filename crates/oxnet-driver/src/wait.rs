//! Polling a register until bits read back as expected: the "wait until"
//! steps of the Intel datasheets' initialisation sequences (82599 §4.6.3,
//! 82576 §4.5). Shared by the ixgbe and igb drivers.

use crate::error::{Error, Result};
use crate::regs::RegisterAccess;
use std::time::{Duration, Instant};

/// How long a datasheet "wait until" step may take before we give up.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Polls `offset` every millisecond until `(value & mask) == expected`;
/// false if that did not happen within `timeout`.
pub fn poll_bits<R: RegisterAccess>(regs: &R, offset: u32, mask: u32, expected: u32, timeout: Duration) -> bool {
    let start = Instant::now();
    loop {
        if regs.read32(offset) & mask == expected {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `offset` until `(value & mask) == expected`, or fails after
/// [`INIT_TIMEOUT`] with a message that names the device (`"82599"`,
/// `"82576"`) and the datasheet step that hung.
pub fn wait_bits<R: RegisterAccess>(
    regs: &R,
    device: &str,
    offset: u32,
    mask: u32,
    expected: u32,
    what: &str,
) -> Result<()> {
    if poll_bits(regs, offset, mask, expected, INIT_TIMEOUT) {
        return Ok(());
    }
    Err(Error::Device(format!(
        "{device} did not complete {what} within {} ms (register {offset:#07x})",
        INIT_TIMEOUT.as_millis()
    )))
}
