//! Errors are values with a message a person can act on.

use std::fmt;

/// What went wrong, in words that say what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A device spec string that no driver accepts.
    BadSpec(String),
    /// Not enough huge pages, no hugetlbfs, memory could not be locked ...
    Memory(String),
    /// The operation needs privileges the process does not have.
    Permission(String),
    /// A PCI device that is missing or not supported.
    Pci(String),
    /// A configuration value out of range.
    Config(String),
    /// A mempool has no free buffer left.
    PoolExhausted { pool: String, size: usize },
    /// The device did not do what the datasheet says it does (timeout ...).
    Device(String),
    /// An operating-system call failed.
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadSpec(m)
            | Error::Memory(m)
            | Error::Permission(m)
            | Error::Pci(m)
            | Error::Config(m)
            | Error::Device(m)
            | Error::Io(m) => f.write_str(m),
            Error::PoolExhausted { pool, size } => write!(
                f,
                "mempool '{pool}' is exhausted: all {size} buffers are in use \
                 (raise the pool size or free packets faster)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Result with oxnet's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps the last OS error with what we were doing.
pub(crate) fn os_error(what: &str) -> Error {
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EPERM) || err.raw_os_error() == Some(libc::EACCES) {
        Error::Permission(format!(
            "{what}: {err} (run as root, or set up vfio for unprivileged use)"
        ))
    } else {
        Error::Io(format!("{what}: {err}"))
    }
}
