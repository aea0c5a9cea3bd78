//! Time for tasks: the executor's clock (set by its owner, never read from
//! the system), its timer list, and the [`sleep`] and [`timeout`] futures.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A timer's key: its deadline, then the order it was registered in, so
/// timers due at the same microsecond fire in registration order.
type TimerKey = (u64, u64);

/// The executor's time and pending sleeps. A `BTreeMap` rather than a
/// binary heap because a sleep dropped before its deadline (the timer of a
/// [`timeout`] whose future finished first) removes its entry at once; a
/// heap would keep it until it expired, and a loop of long timeouts would
/// grow it without bound.
#[derive(Default)]
pub(super) struct Timers {
    now: Cell<u64>,
    pending: RefCell<BTreeMap<TimerKey, Waker>>,
    next_seq: Cell<u64>,
}

impl Timers {
    pub fn now(&self) -> u64 {
        self.now.get()
    }

    /// Moves the clock to `us`; time never goes back, so an earlier `us`
    /// leaves it where it is.
    pub fn set_now(&self, us: u64) {
        self.now.set(self.now.get().max(us));
    }

    /// When the earliest pending sleep is due.
    pub fn next(&self) -> Option<u64> {
        self.pending.borrow().first_key_value().map(|(k, _)| k.0)
    }

    /// Wakes every sleep due at or before now, earliest first; returns how
    /// many.
    pub fn fire(&self) -> usize {
        let now = self.now.get();
        let mut fired = 0;
        loop {
            let waker = {
                let mut pending = self.pending.borrow_mut();
                match pending.first_key_value() {
                    Some((&(at, _), _)) if at <= now => pending.pop_first().map(|(_, w)| w),
                    _ => None,
                }
            };
            // Woken outside the borrow: a waker may be anything.
            match waker {
                Some(w) => w.wake(),
                None => return fired,
            }
            fired += 1;
        }
    }

    fn register(&self, at: u64, waker: Waker) -> TimerKey {
        let key = (at, self.next_seq.get());
        self.next_seq.set(key.1 + 1);
        self.pending.borrow_mut().insert(key, waker);
        key
    }

    /// Pending sleeps.
    pub fn len(&self) -> usize {
        self.pending.borrow().len()
    }
}

/// Microseconds in `d`, rounded up so a sleep is never shorter than asked.
fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1000)).unwrap_or(u64::MAX)
}

/// When a [`Sleep`] ends.
enum Deadline {
    /// This long after the first poll.
    After(u64),
    /// At this time (microseconds on the executor's clock).
    At(u64),
}

/// A future that completes when the executor's clock reaches its deadline
/// (see [`sleep`], [`sleep_until`]).
pub struct Sleep {
    deadline: Deadline,
    /// Found at the first poll, through the executor running it.
    timers: Option<Rc<Timers>>,
    /// The registered timer, while one is.
    key: Option<TimerKey>,
}

/// Completes `duration` (rounded up to a microsecond) after its first poll,
/// in the executor's time. The duration counts from the first poll, not
/// from this call: a future made outside the executor and awaited later
/// sleeps as long as asked.
///
/// Panics when polled outside a task of an [`super::Executor`] (or
/// [`super::block_on`]): a programming error, never a result of input.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: Deadline::After(duration_us(duration)),
        timers: None,
        key: None,
    }
}

/// Completes when the executor's clock reaches `us` microseconds; at once
/// if it already has. Panics as [`sleep`] does.
pub fn sleep_until(us: u64) -> Sleep {
    Sleep {
        deadline: Deadline::At(us),
        timers: None,
        key: None,
    }
}

impl Sleep {
    /// The deadline in microseconds on the executor's clock, once known
    /// (from the first poll, for [`sleep`]).
    pub fn deadline(&self) -> Option<u64> {
        match self.deadline {
            Deadline::At(at) => Some(at),
            Deadline::After(_) => None,
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let timers = this.timers.get_or_insert_with(|| super::current_timers("sleep"));
        let now = timers.now();
        let at = match this.deadline {
            Deadline::At(at) => at,
            Deadline::After(us) => {
                let at = now.saturating_add(us);
                this.deadline = Deadline::At(at);
                at
            }
        };
        if now >= at {
            if let Some(key) = this.key.take() {
                timers.pending.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        match this.key {
            Some(key) => {
                let mut pending = timers.pending.borrow_mut();
                match pending.get_mut(&key) {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    Some(w) => *w = cx.waker().clone(),
                    // Cannot happen (only a due timer is fired, and this
                    // one is not due), but registering again is right.
                    None => {
                        drop(pending);
                        this.key = Some(timers.register(at, cx.waker().clone()));
                    }
                }
            }
            None => this.key = Some(timers.register(at, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let (Some(timers), Some(key)) = (&self.timers, self.key) {
            timers.pending.borrow_mut().remove(&key);
        }
    }
}

/// The error of a [`timeout`] whose time ran out first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `fut` for at most `duration` of the executor's time (counted from
/// the first poll): its output, or `Err(Elapsed)` if the time passed
/// first. `fut` is polled before the timer, so a future ready at the
/// deadline wins. Dropping the timeout drops `fut` and the timer.
pub async fn timeout<F: Future>(duration: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = pin!(fut);
    let mut timer = sleep(duration);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::super::tests::Log;
    use super::*;

    #[test]
    fn durations_round_up_to_a_microsecond() {
        assert_eq!(duration_us(Duration::ZERO), 0);
        assert_eq!(duration_us(Duration::from_nanos(1)), 1);
        assert_eq!(duration_us(Duration::from_nanos(1000)), 1);
        assert_eq!(duration_us(Duration::from_nanos(1001)), 2);
        assert_eq!(duration_us(Duration::from_millis(3)), 3000);
        assert_eq!(duration_us(Duration::MAX), u64::MAX);
    }

    #[test]
    fn timers_fire_in_deadline_then_registration_order() {
        let timers = Timers::default();
        let log = Log::default();
        for (at, name) in [(30, "c"), (10, "a"), (30, "d"), (20, "b")] {
            timers.register(at, log.waker(name));
        }
        assert_eq!(timers.next(), Some(10));
        timers.set_now(29);
        assert_eq!(timers.fire(), 2);
        assert_eq!(log.take(), ["a", "b"]);
        assert_eq!(timers.next(), Some(30));
        timers.set_now(5); // back in time: ignored
        assert_eq!(timers.now(), 29);
        timers.set_now(30);
        assert_eq!(timers.fire(), 2);
        assert_eq!(log.take(), ["c", "d"]);
        assert_eq!(timers.next(), None);
    }
}
