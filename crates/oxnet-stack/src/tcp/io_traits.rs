//! Poll-style reads and writes on a [`TcpStream`], and through them the
//! ecosystem's I/O traits (issue 11, item 5 "Ecosystem"): `futures-io`'s
//! `AsyncRead`/`AsyncWrite` (feature `futures-io`) and tokio's
//! (feature `tokio`), so libraries written against either run on oxnet
//! sockets unchanged.
//!
//! Each poll call is the `try_` call; on EAGAIN it waits on the TCB's
//! event (`readable` or `writable`, `crate::exec::Event`). The wait is
//! kept in the stream between polls ([`IoWaits`]): an `Event` keeps no
//! notification for nobody, so a wait made and dropped at each poll
//! would leave no waker registered; the kept wait was made before the
//! `try_` call that failed (or right after it, in the same poll), so no
//! notification between the two is lost. A wait that completed is
//! dropped and the call tried again.
//!
//! Flushing has nothing to do: a write has queued its bytes in the
//! stack's send buffer, which sends them by itself. Closing (`poll_close`,
//! `poll_shutdown`) is [`TcpStream::shutdown_write`]: our FIN follows the
//! data.

use super::socket::TcpStream;
use crate::exec::Wait;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The waits of a stream's pending poll calls, one per direction.
#[derive(Default)]
pub struct IoWaits {
    read: Option<Wait>,
    write: Option<Wait>,
}

/// Which of the TCB's events a poll call waits on.
#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

impl TcpStream {
    /// Reads into `buf` if data (or the end, or an error) is there;
    /// otherwise registers `cx`'s waker for the TCB's `readable` event
    /// and returns Pending. Ok(0) is the end of the stream (or an empty
    /// `buf`).
    pub fn poll_read_bytes(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize, i32>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            match self.try_read(buf) {
                Err(libc::EAGAIN) => {}
                done => {
                    self.io.read = None;
                    return Poll::Ready(done);
                }
            }
            match self.poll_wait(cx, Direction::Read) {
                Ok(true) => continue,
                Ok(false) => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Queues what the send buffer has room for of `data`; with no room,
    /// registers `cx`'s waker for the TCB's `writable` event and returns
    /// Pending.
    pub fn poll_write_bytes(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<Result<usize, i32>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            match self.try_write(data) {
                Err(libc::EAGAIN) => {}
                done => {
                    self.io.write = None;
                    return Poll::Ready(done);
                }
            }
            match self.poll_wait(cx, Direction::Write) {
                Ok(true) => continue,
                Ok(false) => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Polls the kept wait of `dir`, making one first if there is none:
    /// Ok(true) if it has completed (the caller tries again), Ok(false)
    /// if `cx`'s waker is registered.
    fn poll_wait(&mut self, cx: &mut Context<'_>, dir: Direction) -> Result<bool, i32> {
        let armed = match dir {
            Direction::Read => self.io.read.is_some(),
            Direction::Write => self.io.write.is_some(),
        };
        let made = if armed {
            None
        } else {
            let info = self.stack().borrow();
            let tcb = info.tcbs.get(self.tcb_ref()).ok_or(libc::ENOTCONN)?;
            Some(match dir {
                Direction::Read => tcb.readable.wait(),
                Direction::Write => tcb.writable.wait(),
            })
        };
        let slot = match dir {
            Direction::Read => &mut self.io.read,
            Direction::Write => &mut self.io.write,
        };
        if made.is_some() {
            *slot = made;
        }
        let wait = slot.as_mut().expect("made above");
        match Pin::new(wait).poll(cx) {
            Poll::Ready(()) => {
                *slot = None;
                Ok(true)
            }
            Poll::Pending => Ok(false),
        }
    }
}

#[cfg(any(feature = "futures-io", feature = "tokio"))]
fn io_error(errno: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(errno)
}

#[cfg(feature = "futures-io")]
mod futures_impls {
    use super::*;

    impl futures_io::AsyncRead for TcpStream {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
            self.get_mut().poll_read_bytes(cx, buf).map_err(io_error)
        }
    }

    impl futures_io::AsyncWrite for TcpStream {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            self.get_mut().poll_write_bytes(cx, buf).map_err(io_error)
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(self.shutdown_write().map_err(io_error))
        }
    }
}

#[cfg(feature = "tokio")]
mod tokio_impls {
    use super::*;
    use tokio::io::ReadBuf;

    impl tokio::io::AsyncRead for TcpStream {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            let dst = buf.initialize_unfilled();
            match this.poll_read_bytes(cx, dst) {
                Poll::Ready(Ok(n)) => {
                    buf.advance(n);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(io_error(e))),
                Poll::Pending => Poll::Pending,
            }
        }
    }

    impl tokio::io::AsyncWrite for TcpStream {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            self.get_mut().poll_write_bytes(cx, buf).map_err(io_error)
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(self.shutdown_write().map_err(io_error))
        }
    }
}
