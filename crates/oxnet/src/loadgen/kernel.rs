//! [`Net`] on kernel sockets: epoll, a timerfd, non-blocking sockets
//! with SO_LINGER 0 for the RST (the calls are in [`super::sys`]).

use super::net::{Net, TIMER_KEY};
use super::sys::{self, Epoll, Timer};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Most events one wait returns.
const MAX_EVENTS: usize = 256;

/// Kernel sockets for one client thread.
pub struct KernelNet {
    epoll: Epoll,
    /// Made (and registered) at the first [`Net::arm_timer`]: a closed
    /// loop never needs it.
    timer: Option<Timer>,
    buf: Vec<libc::epoll_event>,
}

impl KernelNet {
    /// A new epoll instance.
    pub fn new() -> Result<KernelNet, String> {
        Ok(KernelNet {
            epoll: Epoll::new().map_err(|e| format!("epoll_create: {e}"))?,
            timer: None,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
        })
    }
}

impl Net for KernelNet {
    type Socket = OwnedFd;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn connect(&mut self, target: &SocketAddr) -> io::Result<OwnedFd> {
        sys::connect_nonblocking(target)
    }

    fn take_error(&mut self, socket: &OwnedFd) -> io::Result<()> {
        sys::take_error(socket.as_raw_fd())
    }

    fn abort(&mut self, socket: OwnedFd) {
        // A failure here only means a FIN instead. Closing the descriptor
        // takes it out of the epoll set.
        let _ = sys::linger_zero(socket.as_raw_fd());
    }

    fn close(&mut self, socket: OwnedFd) {
        drop(socket);
    }

    fn watch(&mut self, socket: &OwnedFd, events: u32, key: u64, added: bool) -> io::Result<()> {
        if added {
            self.epoll.modify(socket.as_raw_fd(), events, key)
        } else {
            self.epoll.add(socket.as_raw_fd(), events, key)
        }
    }

    fn read(&mut self, socket: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
        sys::read(socket.as_raw_fd(), buf)
    }

    fn send(&mut self, socket: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
        sys::send(socket.as_raw_fd(), buf)
    }

    fn arm_timer(&mut self, at: Instant) -> io::Result<()> {
        if self.timer.is_none() {
            let timer = Timer::new()?;
            self.epoll.add(timer.raw(), libc::EPOLLIN as u32, TIMER_KEY)?;
            self.timer = Some(timer);
        }
        if let Some(t) = &self.timer {
            t.arm(at.saturating_duration_since(Instant::now()))?;
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<(u32, u64)>, timeout: Duration) -> io::Result<()> {
        events.clear();
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let cap = events.capacity().clamp(1, self.buf.len());
        let n = self.epoll.wait(&mut self.buf[..cap], ms)?;
        for ev in &self.buf[..n] {
            let (flags, key) = (ev.events, ev.u64);
            if key == TIMER_KEY {
                if let Some(t) = &self.timer {
                    t.clear();
                }
            }
            events.push((flags, key));
        }
        Ok(())
    }
}
