//! The blocking calls under way, so that time does not run past one
//! that could return.
//!
//! packetdrill makes a blocking call (`...` in a script) on its syscall
//! thread and goes on with the script on its main thread as soon as that
//! thread sleeps (run_system_call.c, `enqueue_system_call`). Against a
//! kernel, the packet the main thread injects wakes the call at once.
//! Here the call retries from its own thread, and the main thread's next
//! entry (a sniff that runs time to the next timer, a usleep) could move
//! the simulated clock before it did: the call would end, by the clock,
//! late (a read woken by data at 0.54 s returning at 0.68 s). So every
//! change a waiting call may answer to bumps a generation; an entry that
//! moves the clock first waits (in real time, a bounded while) until
//! every waiting call has tried again since the last change, and until a
//! call that returned has had its thread call again (packetdrill reads
//! the clock on that thread right after the call returns: that reading
//! is the call's end time).

use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a call that returned holds the clock for its thread's next
/// entry (packetdrill's reading of the end time comes microseconds
/// later; a caller that never calls again costs each later clock move
/// this much real time).
pub const RETURNED_GRACE: Duration = Duration::from_millis(20);

/// How long a clock move waits at most for the waiting calls (a bound,
/// so that a call that cannot get the lock never hangs the script).
pub const CATCH_UP_BOUND: Duration = Duration::from_millis(200);

/// One blocking call under way, or one that just returned.
struct Waiter {
    /// The thread making the call.
    thread: ThreadId,
    /// The generation at its last try.
    tried: u64,
    /// When it returned (its thread has not called since).
    returned: Option<Instant>,
}

/// The generation of changes and the calls waiting on them.
#[derive(Default)]
pub struct Waiters {
    generation: u64,
    calls: Vec<Waiter>,
}

impl Waiters {
    /// Something a waiting call may answer to happened (a packet in,
    /// the clock moved, another call).
    pub fn changed(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The current thread starts waiting, having just tried.
    pub fn start(&mut self) {
        let thread = std::thread::current().id();
        self.calls.retain(|w| w.thread != thread);
        self.calls.push(Waiter {
            thread,
            tried: self.generation,
            returned: None,
        });
    }

    /// The current thread's call tried again.
    pub fn tried(&mut self) {
        let (thread, generation) = (std::thread::current().id(), self.generation);
        for w in self.calls.iter_mut().filter(|w| w.thread == thread) {
            w.tried = generation;
        }
    }

    /// The current thread's call returned: it holds the clock until its
    /// thread calls again (or for [`RETURNED_GRACE`]).
    pub fn returned(&mut self) {
        let thread = std::thread::current().id();
        for w in self.calls.iter_mut().filter(|w| w.thread == thread) {
            w.returned = Some(Instant::now());
        }
    }

    /// An entry on the current thread: a call of its that returned is
    /// over; calls that returned longer than the grace ago are forgotten.
    pub fn entered(&mut self) {
        let thread = std::thread::current().id();
        self.calls.retain(|w| match w.returned {
            Some(at) => w.thread != thread && at.elapsed() < RETURNED_GRACE,
            None => true,
        });
    }

    /// Whether every call has seen the last change and no returned call
    /// still waits for its thread: the clock may move.
    pub fn caught_up(&self) -> bool {
        self.calls.iter().all(|w| match w.returned {
            Some(at) => at.elapsed() >= RETURNED_GRACE,
            None => w.tried == self.generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_holds_the_clock_until_the_waiting_call_tried_again() {
        let mut w = Waiters::default();
        assert!(w.caught_up(), "nobody waits");
        w.start();
        assert!(w.caught_up(), "it tried when it started");
        w.changed();
        assert!(!w.caught_up());
        w.tried();
        assert!(w.caught_up());
        w.changed();
        w.returned();
        assert!(!w.caught_up(), "returned: held for its thread's next entry");
        w.entered();
        assert!(w.caught_up());
        assert!(w.calls.is_empty());
    }

    #[test]
    fn a_returned_call_whose_thread_never_calls_again_lets_go_after_the_grace() {
        let mut w = Waiters::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                w.start();
                w.returned();
            });
        });
        w.entered();
        assert!(!w.caught_up(), "another thread's returned call holds");
        std::thread::sleep(RETURNED_GRACE);
        assert!(w.caught_up());
        w.entered();
        assert!(w.calls.is_empty());
    }
}
