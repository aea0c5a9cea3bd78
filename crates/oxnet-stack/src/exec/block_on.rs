//! [`block_on`]: the plain blocking API's way into the stack.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::Executor;

/// Tasks polled per round of [`block_on`] (as a graph's task element would
/// give the executor: enough to amortise a round, few enough that the
/// network context runs often).
pub const BLOCK_ON_BUDGET: usize = 64;

/// Sets a flag: `fut` of [`block_on`] should be polled again.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `fut` to completion on this thread, as a blocking call does: polls
/// `fut` whenever it was woken, and in between runs `step` (one round of
/// the graph; it returns whether it did any work) and up to
/// [`BLOCK_ON_BUDGET`] ready tasks of `exec`. `fut` is not a task (it may
/// borrow from the caller), but it is polled as one of `exec`'s: it can
/// [`super::sleep`], wait on an [`super::Event`] and [`super::spawn`].
///
/// Time is `step`'s business: it calls [`Executor::set_now`], with the
/// real clock or, in simulated time, with [`Executor::next_timer`] when
/// nothing else is left to do. A `step` that never makes progress leaves
/// `block_on` spinning, as a blocking read of a socket that never receives
/// anything never returns.
///
/// Panics if called from inside a task or another `block_on` of the same
/// executor (a task must `.await`, not block the thread that runs it).
pub fn block_on<F: Future>(exec: &Executor, mut step: impl FnMut() -> bool, fut: F) -> F::Output {
    let flag = Arc::new(Flag(AtomicBool::new(true)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        let woken = flag.0.swap(false, Ordering::Acquire);
        if woken {
            let _enter = exec.enter("block_on");
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
        }
        let worked = step();
        let polled = exec.run_ready(BLOCK_ON_BUDGET);
        if !woken && !worked && polled == 0 {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{sleep, spawn, timeout, Elapsed, Event};
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::Duration;

    /// A step in simulated time: nothing to do, so jump to the next timer.
    fn jump(exec: &Executor) -> impl FnMut() -> bool + '_ {
        move || match exec.next_timer() {
            Some(at) if !exec.has_ready() => {
                exec.set_now(at);
                true
            }
            _ => false,
        }
    }

    #[test]
    fn returns_the_output_of_a_ready_future_without_a_step() {
        let exec = Executor::new();
        let steps = Cell::new(0);
        let out = block_on(
            &exec,
            || {
                steps.set(steps.get() + 1);
                false
            },
            async { 7 },
        );
        assert_eq!((out, steps.get()), (7, 0));
    }

    #[test]
    fn sleeps_in_simulated_time_by_jumping_to_the_timer() {
        let exec = Executor::new();
        exec.set_now(1_000);
        block_on(&exec, jump(&exec), sleep(Duration::from_millis(5)));
        assert_eq!(exec.now(), 6_000);
    }

    #[test]
    fn waits_for_a_task_that_the_step_lets_run() {
        let exec = Executor::new();
        let ev = Event::new();
        let task = exec.spawn({
            let ev = ev.clone();
            async move {
                sleep(Duration::from_micros(10)).await;
                ev.notify();
                "notified"
            }
        });
        let ev2 = ev.clone();
        let out = block_on(&exec, jump(&exec), async move {
            ev2.wait().await;
            task.await
        });
        assert_eq!(out, Ok("notified"));
        assert_eq!(exec.now(), 10);
    }

    #[test]
    fn a_blocking_call_can_spawn_and_time_out() {
        let exec = Executor::new();
        let ran = Rc::new(Cell::new(false));
        let r = ran.clone();
        let out = block_on(&exec, jump(&exec), async move {
            spawn(async move { r.set(true) });
            timeout(Duration::from_micros(3), Event::new().wait()).await
        });
        assert_eq!(out, Err(Elapsed));
        assert!(ran.get());
        assert_eq!(exec.now(), 3);
    }

    #[test]
    fn blocking_inside_a_task_is_refused() {
        let exec = Rc::new(Executor::new());
        let inner = exec.clone();
        exec.spawn(async move { block_on(&inner, || false, async {}) });
        assert_eq!(exec.run_ready(1), 1);
        let panics = exec.take_panics();
        assert_eq!(panics.len(), 1);
        assert!(panics[0].contains("block_on called from inside a task"), "{panics:?}");
    }
}
