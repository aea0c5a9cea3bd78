//! The Linux echo server on io_uring (`--serve-echo PORT --io-uring`):
//! the second Linux server the echo benchmark compares oxnet with.
//!
//! One thread per core, each with its own ring and its own SO_REUSEPORT
//! listener (as the epoll server, [`super::serve`]). On each ring:
//!
//! - one multishot accept (IORING_OP_ACCEPT with IORING_ACCEPT_MULTISHOT,
//!   Linux 5.19) that keeps yielding connections; where the kernel
//!   refuses it, single accepts re-armed after each one (said once on
//!   stderr);
//! - per connection one recv at a time, its buffer picked by the kernel
//!   from a provided-buffer ring (`uring_buffers.rs`) when data
//!   comes; what came is queued and sent in order, one send at a time, a
//!   short send resubmitted for the rest; at most 4 buffers (`MAX_CHUNKS`)
//!   per connection (no recv while that many wait to be echoed);
//! - the connection closed (IORING_OP_CLOSE) after the client's FIN once
//!   everything is echoed, or at once after an error (its operations in
//!   flight cancelled first);
//! - submissions batched: one io_uring_enter per loop submits every
//!   queued operation and waits for the next completion.
//!
//! This file starts the threads ([`run`]) and makes the rings; the loop
//! of each thread is `uring_server.rs`.
//!
//! A timeout on the ring wakes the loop every 100 ms to notice
//! SIGINT/SIGTERM or the end of `--seconds`; then every operation in
//! flight is cancelled and awaited before the buffers are freed.

use super::serve::{ServeOptions, ServeStats};
use super::sys;
use super::uring_server::Server;
use io_uring::IoUring;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// Submission queue entries per ring.
const SQ_ENTRIES: u32 = 1024;
/// Completion queue entries per ring: room for a burst of completions of
/// every connection (the kernel keeps overflow, but at a cost).
const CQ_ENTRIES: u32 = 8192;

/// Serves echo on io_uring until the time is up or a signal asks to
/// stop; the same options and statistics as [`super::serve::run`].
/// Errors setting up a ring name the cause and the epoll server as the
/// way out.
pub fn run(o: &ServeOptions) -> Result<ServeStats, String> {
    let (listeners, bound) = super::serve::listeners(o)?;
    for l in &listeners {
        sys::set_blocking(l.as_raw_fd()).map_err(|e| format!("listener: {e}"))?;
        sys::set_nodelay(l.as_raw_fd()).map_err(|e| format!("listener: TCP_NODELAY: {e}"))?;
    }
    let threads = listeners.len();
    let connections = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let abort = Arc::new(AtomicBool::new(false));
    let end = o.duration.and_then(|d| Instant::now().checked_add(d));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut handles = Vec::new();
    for (t, l) in listeners.into_iter().enumerate() {
        let (c, b, a, ready) = (
            Arc::clone(&connections),
            Arc::clone(&bytes),
            Arc::clone(&abort),
            ready_tx.clone(),
        );
        let h = std::thread::Builder::new().name(format!("uecho{t}")).spawn(move || {
            // The ring is made by the thread that submits to it
            // (IORING_SETUP_SINGLE_ISSUER ties it to its maker).
            let mut server = match Server::new(l) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready.send(Err(e.clone()));
                    return Err(e);
                }
            };
            let _ = ready.send(Ok(()));
            let served = server.serve(end, &a);
            c.fetch_add(server.connections, Ordering::Relaxed);
            b.fetch_add(server.bytes, Ordering::Relaxed);
            server.finish();
            served
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                abort.store(true, Ordering::Relaxed);
                return Err(format!("cannot start a server thread: {e}"));
            }
        }
    }
    drop(ready_tx);
    let mut setup_error = None;
    for _ in 0..threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                setup_error.get_or_insert(e);
            }
            Err(_) => {
                setup_error.get_or_insert("a server thread ended before its ring was ready".into());
            }
        }
    }
    if let Some(e) = setup_error {
        abort.store(true, Ordering::Relaxed);
        for h in handles {
            let _ = h.join();
        }
        return Err(e);
    }
    eprintln!("oxnet loadgen: echo server (io_uring) listening on {bound} ({threads} threads)");
    let mut result = Ok(());
    for h in handles {
        let r = h
            .join()
            .map_err(|_| "a server thread panicked".to_string())
            .and_then(|r| r);
        if result.is_ok() {
            result = r;
        }
    }
    result.map(|()| ServeStats {
        connections: connections.load(Ordering::Relaxed),
        bytes: bytes.load(Ordering::Relaxed),
    })
}

/// The message for a ring the kernel would not make: the cause by
/// errno, and the epoll server as the fallback.
pub fn setup_error(e: &io::Error) -> String {
    let cause = match e.raw_os_error() {
        Some(libc::EPERM) => {
            "io_uring is switched off or restricted here (sysctl kernel.io_uring_disabled, or a seccomp filter)"
        }
        Some(libc::ENOSYS) => "this kernel has no io_uring (built without it, or a seccomp filter hides it)",
        Some(libc::ENOMEM) => {
            "no memory for the ring (before Linux 5.12 rings count against RLIMIT_MEMLOCK: see `ulimit -l`)"
        }
        _ => "the kernel refused to make the ring",
    };
    format!("io_uring_setup: {e}: {cause}; run `oxnet loadgen --serve-echo PORT` without --io-uring (the epoll server) instead")
}

/// A ring with the flags that make a one-thread server cheapest where
/// the kernel has them (SINGLE_ISSUER and DEFER_TASKRUN, Linux 6.1:
/// completions are run when this thread waits, not by interrupting it);
/// a plain ring elsewhere.
pub(super) fn new_ring() -> io::Result<IoUring> {
    let tuned = IoUring::builder()
        .setup_cqsize(CQ_ENTRIES)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(SQ_ENTRIES);
    match tuned {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::builder().setup_cqsize(CQ_ENTRIES).build(SQ_ENTRIES)
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_errors_name_the_cause_and_the_epoll_fallback() {
        for (errno, says) in [
            (libc::EPERM, "kernel.io_uring_disabled"),
            (libc::ENOSYS, "no io_uring"),
            (libc::ENOMEM, "RLIMIT_MEMLOCK"),
        ] {
            let m = setup_error(&io::Error::from_raw_os_error(errno));
            assert!(m.contains(says), "{m}");
            assert!(m.contains("--serve-echo PORT` without --io-uring"), "{m}");
        }
    }
}
