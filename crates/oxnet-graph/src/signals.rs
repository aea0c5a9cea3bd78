//! Signals for scripts (Click's `Script(TYPE SIGNAL SIG...)`): the
//! handler only records which signal arrived (an atomic bit, the one
//! thing a signal handler may safely do); the scripts that asked for it
//! look at the bits from a timer and run.

use std::sync::atomic::{AtomicU32, Ordering};

/// Signals that arrived and no script has taken yet, one bit per number.
static PENDING: AtomicU32 = AtomicU32::new(0);

extern "C" fn record(signo: libc::c_int) {
    if (0..32).contains(&signo) {
        PENDING.fetch_or(1 << signo, Ordering::Relaxed);
    }
}

/// The signal numbers Click's Script accepts, by name.
pub const NAMES: &[(&str, libc::c_int)] = &[
    ("ABRT", libc::SIGABRT),
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("PIPE", libc::SIGPIPE),
    ("QUIT", libc::SIGQUIT),
    ("TERM", libc::SIGTERM),
    ("TSTP", libc::SIGTSTP),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
];

/// A signal by name (`INT`, `SIGINT`) or number.
pub fn parse(word: &str) -> Option<libc::c_int> {
    let name = word.strip_prefix("SIG").unwrap_or(word);
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, s)| s)
        .or_else(|| word.parse().ok().filter(|s| (1..32).contains(s)))
}

/// Catches `signo` from now on: its default action (often ending the
/// process) is replaced by recording it.
pub fn catch(signo: libc::c_int) -> Result<(), String> {
    // SAFETY: a zeroed sigaction with our handler; `record` only does an
    // atomic or, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = record as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
            return Err(format!(
                "cannot catch signal {signo}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Takes the pending signals among `mask` (clears them); returns them.
pub fn take(mask: u32) -> u32 {
    PENDING.fetch_and(!mask, Ordering::Relaxed) & mask
}
