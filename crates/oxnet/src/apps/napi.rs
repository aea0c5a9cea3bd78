//! Interrupts or polling, switched by packet rate — what Linux NAPI does
//! and what ixy's interrupt mode does.
//!
//! A poll-mode driver burns a core even when nothing arrives. With
//! interrupts (MSI-X through vfio, one eventfd per receive queue) the loop
//! can sleep in `epoll_wait` instead; but an interrupt per packet costs far
//! more than a poll when packets come fast. So a loop runs in one of two
//! modes:
//!
//! * **interrupt mode** — when a poll finds nothing, the queues' interrupts
//!   are armed and the queues polled once more (a packet that arrived
//!   between the empty poll and the arming is found there, not lost — the
//!   interrupt would not fire for it); if still nothing, the thread sleeps
//!   in epoll. On wake-up the interrupts are disarmed (the device stays
//!   quiet while we poll) and polling resumes until the queues are empty;
//! * **poll mode** — the loop never sleeps.
//!
//! Switching, measured over windows of [`WINDOW`]:
//!
//! | from | to | when |
//! |---|---|---|
//! | interrupt | poll | a receive batch came back full (a backlog, as NAPI's exhausted budget), or the window's rate ≥ [`POLL_ABOVE_PPS`] |
//! | poll | interrupt | the window's rate < [`INTERRUPT_BELOW_PPS`] |
//!
//! The gap between the two thresholds (hysteresis) keeps a rate near one of
//! them from flapping. A loop starts in interrupt mode.
//!
//! Interrupt throttling (`--itr US`): devices with a throttling register
//! (82576/82599 EITR) get it programmed by their driver; here, in software
//! for every device, a wake-up less than `itr` after the previous one waits
//! out the rest before polling, so a queue wakes the thread at most once
//! per `itr` (packets collect in the ring meanwhile).

use oxnet_driver::{Device, Error, Result};
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Rate measurement window.
pub const WINDOW: Duration = Duration::from_millis(100);
/// Interrupt → poll above this many packets per second (the loop then
/// receives a packet every 50 µs or more often: waking up for each costs
/// more than polling).
pub const POLL_ABOVE_PPS: u64 = 20_000;
/// Poll → interrupt below this many packets per second.
pub const INTERRUPT_BELOW_PPS: u64 = 5_000;
/// Longest single sleep, so that the loop checks its deadline and Ctrl-C
/// (epoll_wait also returns on a signal).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// Which mode a loop is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sleeps in epoll when idle.
    Interrupt,
    /// Busy-polls.
    Poll,
}

/// Mode switching and sleeping for the receive queues (queue 0) of a set
/// of devices that one thread polls.
pub struct Napi {
    epoll: OwnedFd,
    /// Index of the device and its eventfd.
    queues: Vec<(usize, RawFd)>,
    mode: Mode,
    armed: bool,
    itr: Duration,
    window_start: Instant,
    window_packets: u64,
    last_wake: Option<Instant>,
    /// Interrupts signalled (the eventfd counters).
    pub interrupts: u64,
    /// Returns from epoll_wait because of an interrupt.
    pub wakeups: u64,
    /// Changes between interrupt and poll mode.
    pub mode_switches: u64,
}

impl Napi {
    /// Sets up waiting on queue 0 of every device; each must have been
    /// opened with interrupts. `itr_us`: software throttling (see above).
    pub fn new(devices: &[&dyn Device], itr_us: u32) -> Result<Napi> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io(format!("epoll_create1: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: a fresh fd that nobody else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut queues = Vec::new();
        for (i, dev) in devices.iter().enumerate() {
            let Some(eventfd) = dev.rx_interrupt_fd(0) else {
                return Err(Error::Config(format!(
                    "{}: the {} driver has no receive interrupts here (interrupts need a device bound to \
                     vfio-pci; drop --interrupts to poll)",
                    dev.spec(),
                    dev.driver_name()
                )));
            };
            let mut event = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            // SAFETY: adding a live eventfd to our epoll set.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, eventfd, &mut event) } != 0 {
                return Err(Error::Io(format!("epoll_ctl: {}", std::io::Error::last_os_error())));
            }
            queues.push((i, eventfd));
        }
        Ok(Napi {
            epoll,
            queues,
            mode: Mode::Interrupt,
            armed: false,
            itr: Duration::from_micros(itr_us as u64),
            window_start: Instant::now(),
            window_packets: 0,
            last_wake: None,
            interrupts: 0,
            wakeups: 0,
            mode_switches: 0,
        })
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Called after each round of polling every queue once: `received`
    /// packets in the round, `full` if some batch came back full. May
    /// sleep until an interrupt, at most `max_sleep`.
    pub fn after_poll(
        &mut self,
        devices: &mut [&mut dyn Device],
        received: usize,
        full: bool,
        max_sleep: Duration,
    ) -> Result<()> {
        self.window_packets += received as u64;
        let now = Instant::now();
        let elapsed = now - self.window_start;
        if elapsed >= WINDOW {
            let rate = (self.window_packets as f64 / elapsed.as_secs_f64()) as u64;
            match self.mode {
                Mode::Interrupt if rate >= POLL_ABOVE_PPS => self.switch(devices, Mode::Poll)?,
                Mode::Poll if rate < INTERRUPT_BELOW_PPS => self.switch(devices, Mode::Interrupt)?,
                _ => {}
            }
            self.window_start = now;
            self.window_packets = 0;
        }
        if full && self.mode == Mode::Interrupt {
            self.switch(devices, Mode::Poll)?;
        }
        if received > 0 || full {
            if self.armed {
                self.arm(devices, false)?;
            }
            return Ok(());
        }
        if self.mode == Mode::Poll {
            return Ok(());
        }
        if !self.armed {
            // Arm, then let the caller poll once more before we sleep.
            return self.arm(devices, true);
        }
        self.sleep(max_sleep.min(MAX_SLEEP));
        self.arm(devices, false)
    }

    fn switch(&mut self, devices: &mut [&mut dyn Device], to: Mode) -> Result<()> {
        if self.mode != to {
            self.mode = to;
            self.mode_switches += 1;
            if to == Mode::Poll && self.armed {
                self.arm(devices, false)?;
            }
        }
        Ok(())
    }

    fn arm(&mut self, devices: &mut [&mut dyn Device], on: bool) -> Result<()> {
        for &(i, _) in &self.queues {
            devices[i].set_rx_interrupt(0, on)?;
        }
        self.armed = on;
        Ok(())
    }

    /// Waits in epoll for an interrupt (or the timeout, or a signal), then
    /// clears the eventfds and applies the throttling interval.
    fn sleep(&mut self, timeout: Duration) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let ms = timeout.as_millis().clamp(0, i32::MAX as u128) as i32;
        // SAFETY: epoll_wait writes at most events.len() entries.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, ms) };
        if n <= 0 {
            return;
        }
        self.wakeups += 1;
        for &(_, fd) in &self.queues {
            self.interrupts += oxnet_driver::vfio::drain_eventfd(fd);
        }
        let now = Instant::now();
        if let Some(last) = self.last_wake {
            let since = now - last;
            if since < self.itr {
                std::thread::sleep(self.itr - since);
            }
        }
        self.last_wake = Some(Instant::now());
    }

    /// The counters as JSON fields for the commands' final object.
    pub fn json_fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("interrupts", self.interrupts.to_string()),
            ("wakeups", self.wakeups.to_string()),
            ("mode_switches", self.mode_switches.to_string()),
            (
                "mode",
                match self.mode {
                    Mode::Interrupt => "\"interrupt\"".to_string(),
                    Mode::Poll => "\"poll\"".to_string(),
                },
            ),
        ]
    }
}

/// CPU time (user + system) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_have_hysteresis() {
        const { assert!(INTERRUPT_BELOW_PPS < POLL_ABOVE_PPS) };
    }
}
