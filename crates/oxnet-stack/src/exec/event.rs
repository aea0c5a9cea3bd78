//! [`Event`]: what a socket signals and a task waits on (ClickNF §4.2:
//! "accept queue non-empty", "RX queue non-empty", "TX queue non-full").

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// How far a waiter has got.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Waiting,
    /// Chosen by [`Event::notify`]: if its future is dropped before it
    /// completes, the notification passes to the next waiter.
    NotifiedOne,
    NotifiedAll,
}

struct Waiter {
    stage: Cell<Stage>,
    waker: RefCell<Option<Waker>>,
}

impl Waiter {
    fn notify(&self, stage: Stage) {
        self.stage.set(stage);
        // Woken outside the borrow: a waker may be anything.
        let waker = self.waker.borrow_mut().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// An edge-triggered signal on one thread: [`Event::wait`] gives a future
/// that completes at the next [`Event::notify`] (one waiter, the oldest)
/// or [`Event::notify_all`] (every waiter) made after the wait began. A
/// notification with nobody waiting is not kept: a task checks its
/// condition (bytes in the receive queue), then waits, in the same poll,
/// so it cannot miss the edge between the two.
///
/// Not `Send`: the network context that notifies and the task that waits
/// run on the same graph thread. Cloning gives another handle to the same
/// event.
#[derive(Clone, Default)]
pub struct Event {
    waiters: Rc<RefCell<VecDeque<Rc<Waiter>>>>,
}

impl Event {
    /// A new event with nobody waiting.
    pub fn new() -> Event {
        Event::default()
    }

    /// A future that completes at the next notification. The wait begins
    /// here, not at the first poll: a notification between this call and
    /// the first poll is seen (so `let w = ev.wait(); if ready() {..}
    /// w.await` loses nothing).
    pub fn wait(&self) -> Wait {
        let waiter = Rc::new(Waiter {
            stage: Cell::new(Stage::Waiting),
            waker: RefCell::new(None),
        });
        self.waiters.borrow_mut().push_back(waiter.clone());
        Wait {
            event: self.clone(),
            waiter,
            done: false,
        }
    }

    /// Wakes the oldest waiter; returns whether there was one.
    pub fn notify(&self) -> bool {
        let first = self.waiters.borrow_mut().pop_front();
        match first {
            Some(w) => {
                w.notify(Stage::NotifiedOne);
                true
            }
            None => false,
        }
    }

    /// Wakes every waiter; returns how many.
    pub fn notify_all(&self) -> usize {
        let mut all = std::mem::take(&mut *self.waiters.borrow_mut());
        let n = all.len();
        for w in all.drain(..) {
            w.notify(Stage::NotifiedAll);
        }
        // The queue keeps its room unless someone began waiting during
        // the wakes: a socket notified per segment does not free and
        // allocate it again each time (kv-instructions.sh).
        let mut queue = self.waiters.borrow_mut();
        if queue.is_empty() {
            *queue = all;
        }
        n
    }

    /// Futures waiting now (made by [`Event::wait`], not yet notified nor
    /// dropped).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }
}

/// The future of [`Event::wait`].
pub struct Wait {
    event: Event,
    waiter: Rc<Waiter>,
    done: bool,
}

impl Wait {
    /// Begins the next wait on the same event, as `*self = event.wait()`
    /// would; a wait that has completed is reused, not allocated again
    /// (an epoll re-arms a socket's waits at every notification).
    pub fn restart(&mut self) {
        if self.done {
            if let Some(w) = Rc::get_mut(&mut self.waiter) {
                // Completed and out of the queue (no other handle): as new.
                w.stage.set(Stage::Waiting);
                *w.waker.get_mut() = None;
                self.done = false;
                self.event.waiters.borrow_mut().push_back(self.waiter.clone());
                return;
            }
        }
        *self = self.event.wait();
    }
}

impl Future for Wait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.waiter.stage.get() != Stage::Waiting {
            self.done = true;
            return Poll::Ready(());
        }
        let mut waker = self.waiter.waker.borrow_mut();
        match &*waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        match self.waiter.stage.get() {
            // Still queued: leave the queue (a linear search, as an event
            // has a waiter or a few; a timeout loop would otherwise grow
            // the queue at every turn).
            Stage::Waiting => self.event.waiters.borrow_mut().retain(|w| !Rc::ptr_eq(w, &self.waiter)),
            // Chosen by `notify` but dropped before it saw it (a timeout
            // that fired in the same round): pass it on, so it is not lost.
            Stage::NotifiedOne if !self.done => {
                self.event.notify();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Log;
    use super::*;

    fn poll(w: &mut Wait, waker: &Waker) -> Poll<()> {
        Pin::new(w).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn notify_wakes_the_oldest_waiter_only() {
        let ev = Event::new();
        let log = Log::default();
        let (mut a, mut b) = (ev.wait(), ev.wait());
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Pending);
        assert_eq!(poll(&mut b, &log.waker("b")), Poll::Pending);
        assert!(ev.notify());
        assert_eq!(log.take(), ["a"]);
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Ready(()));
        assert_eq!(poll(&mut b, &log.waker("b")), Poll::Pending);
        assert_eq!(ev.waiters(), 1);
    }

    #[test]
    fn notify_with_nobody_waiting_is_not_kept() {
        let ev = Event::new();
        assert!(!ev.notify());
        assert_eq!(ev.notify_all(), 0);
        let log = Log::default();
        let mut a = ev.wait();
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Pending);
        assert!(log.take().is_empty());
    }

    #[test]
    fn notify_all_wakes_every_waiter_once() {
        let ev = Event::new();
        let log = Log::default();
        let mut ws: Vec<Wait> = (0..3).map(|_| ev.wait()).collect();
        for (w, name) in ws.iter_mut().zip(["a", "b", "c"]) {
            assert_eq!(poll(w, &log.waker(name)), Poll::Pending);
        }
        assert_eq!(ev.notify_all(), 3);
        assert_eq!(log.take(), ["a", "b", "c"]);
        for w in &mut ws {
            assert_eq!(poll(w, &log.waker("x")), Poll::Ready(()));
        }
        assert_eq!(ev.waiters(), 0);
    }

    #[test]
    fn the_wait_begins_when_made_not_when_first_polled() {
        let ev = Event::new();
        let log = Log::default();
        let mut a = ev.wait();
        ev.notify();
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Ready(()));
    }

    #[test]
    fn a_restarted_wait_sees_only_later_notifications() {
        let ev = Event::new();
        let log = Log::default();
        let mut a = ev.wait();
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Pending);
        assert_eq!(ev.notify_all(), 1);
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Ready(()));
        a.restart();
        assert_eq!(ev.waiters(), 1);
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Pending);
        assert!(ev.notify());
        assert_eq!(log.take(), ["a", "a"]);
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Ready(()));
        // Restarted before it completed: still one wait, still queued once.
        a.restart();
        a.restart();
        assert_eq!(ev.waiters(), 1);
        drop(a);
        assert_eq!(ev.waiters(), 0);
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue() {
        let ev = Event::new();
        for _ in 0..100 {
            drop(ev.wait());
        }
        assert_eq!(ev.waiters(), 0);
    }

    #[test]
    fn a_notify_given_to_a_dropped_waiter_passes_to_the_next() {
        let ev = Event::new();
        let log = Log::default();
        let (mut a, mut b) = (ev.wait(), ev.wait());
        assert_eq!(poll(&mut a, &log.waker("a")), Poll::Pending);
        assert_eq!(poll(&mut b, &log.waker("b")), Poll::Pending);
        ev.notify();
        drop(a);
        assert_eq!(log.take(), ["a", "b"]);
        assert_eq!(poll(&mut b, &log.waker("b")), Poll::Ready(()));
        // Having completed, b passes nothing on.
        let mut c = ev.wait();
        drop(b);
        assert_eq!(poll(&mut c, &log.waker("c")), Poll::Pending);
    }
}
