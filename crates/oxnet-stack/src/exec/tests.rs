//! The executor's behaviour, pinned: what runs, in which order, when.

use super::*;
use std::sync::Mutex;
use std::task::Wake;
use std::time::Duration;

/// Names of wakers woken, in order (a waker must be `Send`, hence the
/// mutex).
#[derive(Clone, Default)]
pub(super) struct Log(Arc<Mutex<Vec<&'static str>>>);

struct Named(Log, &'static str);

impl Wake for Named {
    fn wake(self: Arc<Self>) {
        self.0 .0.lock().unwrap().push(self.1);
    }
}

impl Log {
    /// A waker that appends `name` when woken.
    pub fn waker(&self, name: &'static str) -> Waker {
        Waker::from(Arc::new(Named(self.clone(), name)))
    }

    pub fn push(&self, name: &'static str) {
        self.0.lock().unwrap().push(name);
    }

    /// What was logged since the last take.
    pub fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Where a parked task leaves its waker, as a socket will.
type Slot = Rc<RefCell<Option<Waker>>>;

/// Pending once, leaving the task's waker in `slot`; ready when polled
/// again (by a wake through that waker).
async fn park(slot: &Slot) {
    let mut parked = false;
    std::future::poll_fn(|cx| {
        if parked {
            return Poll::Ready(());
        }
        parked = true;
        *slot.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

fn wake(slot: &Slot) {
    slot.borrow().as_ref().expect("the task has parked").wake_by_ref();
}

/// Spawns a task that logs `name`, then parks in the returned slot, for
/// ever.
fn spawn_parker(exec: &Executor, log: &Log, name: &'static str) -> Slot {
    let slot = Slot::default();
    let (log, s) = (log.clone(), slot.clone());
    exec.spawn(async move {
        loop {
            log.push(name);
            park(&s).await;
        }
    });
    slot
}

#[test]
fn tasks_run_in_wake_order() {
    let exec = Executor::new();
    let log = Log::default();
    let [a, b, c] = ["a", "b", "c"].map(|n| spawn_parker(&exec, &log, n));
    assert_eq!(exec.run_ready(100), 3);
    assert_eq!(log.take(), ["a", "b", "c"]);
    wake(&c);
    wake(&a);
    wake(&b);
    // A wake only queues: nothing ran yet.
    assert!(log.take().is_empty());
    assert_eq!(exec.run_ready(100), 3);
    assert_eq!(log.take(), ["c", "a", "b"]);
    assert!(!exec.has_ready());
}

#[test]
fn several_wakes_before_a_run_give_one_poll() {
    let exec = Executor::new();
    let log = Log::default();
    let a = spawn_parker(&exec, &log, "a");
    exec.run_ready(100);
    log.take();
    wake(&a);
    wake(&a);
    // By value too (the waker leaves the slot, as a socket's would).
    let waker = a.borrow_mut().take().unwrap();
    waker.wake();
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(log.take(), ["a"]);
    assert_eq!(exec.run_ready(100), 0);
}

proptest::proptest! {
    /// Any sequence of wakes and budgeted runs polls exactly what a plain
    /// FIFO of woken tasks (each in it at most once) says, in its order.
    #[test]
    fn runs_follow_a_fifo_of_woken_tasks(
        ops in proptest::collection::vec((proptest::bool::ANY, 0usize..6, 0usize..4), 0..200),
    ) {
        const NAMES: [&str; 6] = ["0", "1", "2", "3", "4", "5"];
        let exec = Executor::new();
        let log = Log::default();
        let slots: Vec<Slot> = NAMES.iter().map(|n| spawn_parker(&exec, &log, n)).collect();
        // Spawned tasks are queued for their first poll.
        let mut fifo: std::collections::VecDeque<usize> = (0..NAMES.len()).collect();
        let mut queued = [true; NAMES.len()];
        for (is_wake, i, budget) in ops {
            if is_wake {
                // A task not yet polled has left no waker; it is queued anyway.
                if let Some(w) = slots[i].borrow().as_ref() {
                    w.wake_by_ref();
                }
                if !queued[i] {
                    queued[i] = true;
                    fifo.push_back(i);
                }
            } else {
                let n = budget.min(fifo.len());
                let expected: Vec<&str> = fifo.drain(..n).map(|i| {
                    queued[i] = false;
                    NAMES[i]
                }).collect();
                proptest::prop_assert_eq!(exec.run_ready(budget), n);
                proptest::prop_assert_eq!(log.take(), expected);
            }
            proptest::prop_assert_eq!(exec.has_ready(), !fifo.is_empty());
        }
    }
}

#[test]
fn a_task_woken_while_tasks_run_runs_next_round() {
    let exec = Executor::new();
    let turns = Rc::new(Cell::new(0));
    let t = turns.clone();
    exec.spawn(async move {
        loop {
            t.set(t.get() + 1);
            yield_now().await;
        }
    });
    // The budget would allow 100 polls; the task that woke itself gets one.
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(turns.get(), 1);
    assert!(exec.has_ready());
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(turns.get(), 2);
}

#[test]
fn run_ready_keeps_to_its_budget_and_the_order() {
    let exec = Executor::new();
    let log = Log::default();
    for n in ["a", "b", "c", "d", "e"] {
        spawn_parker(&exec, &log, n);
    }
    assert_eq!(exec.run_ready(2), 2);
    assert_eq!(log.take(), ["a", "b"]);
    assert_eq!(exec.run_ready(2), 2);
    assert_eq!(log.take(), ["c", "d"]);
    assert_eq!(exec.run_ready(0), 0);
    assert_eq!(exec.run_ready(2), 1);
    assert_eq!(log.take(), ["e"]);
}

#[test]
fn a_task_spawned_by_a_task_runs_next_round() {
    let exec = Executor::new();
    let log = Log::default();
    let l = log.clone();
    exec.spawn(async move {
        let l2 = l.clone();
        let child = spawn(async move {
            l2.push("child");
            5
        });
        l.push("parent");
        child.await
    });
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(log.take(), ["parent"]);
    // The child, then the parent woken by the child's end.
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(log.take(), ["child"]);
    assert!(exec.is_empty());
}

#[test]
fn join_handles_give_the_values() {
    let exec = Executor::new();
    let answer = exec.spawn(async { 6 * 7 });
    assert!(!answer.is_finished());
    assert_eq!(answer.try_take(), None);
    let pair = exec.spawn(async { ("x".to_string(), 2u8) });
    let joined = exec.spawn(async move { pair.await.unwrap().1 + 1 });
    exec.run_ready(100);
    exec.run_ready(100);
    assert!(answer.is_finished());
    assert_eq!(answer.try_take(), Some(Ok(42)));
    assert_eq!(answer.try_take(), None);
    assert!(answer.is_finished());
    assert_eq!(joined.try_take(), Some(Ok(3)));
    assert_eq!(exec.len(), 0);
}

#[test]
fn dropping_the_join_handle_detaches_the_task() {
    let exec = Executor::new();
    let done = Rc::new(Cell::new(false));
    let slot = Slot::default();
    let (d, s) = (done.clone(), slot.clone());
    drop(exec.spawn(async move {
        park(&s).await;
        d.set(true);
    }));
    exec.run_ready(100);
    assert_eq!(exec.len(), 1);
    wake(&slot);
    exec.run_ready(100);
    assert!(done.get());
    assert_eq!(exec.len(), 0);
}

#[test]
fn a_panicking_task_is_dropped_counted_and_told_to_its_handle() {
    let exec = Executor::new();
    let log = Log::default();
    let bad = exec.spawn(async {
        if exec_time_is_zero() {
            panic!("boom {}", 7);
        }
    });
    let a = spawn_parker(&exec, &log, "a");
    assert_eq!(exec.run_ready(100), 2);
    assert_eq!(log.take(), ["a"]);
    assert_eq!(exec.panic_count(), 1);
    assert_eq!(exec.take_panics(), ["boom 7"]);
    assert!(exec.take_panics().is_empty());
    assert_eq!(bad.try_take(), Some(Err(JoinError::Panicked("boom 7".to_string()))));
    assert_eq!(exec.len(), 1);
    // The executor goes on.
    wake(&a);
    let after = exec.spawn(async { "still running" });
    assert_eq!(exec.run_ready(100), 2);
    assert_eq!(log.take(), ["a"]);
    assert_eq!(after.try_take(), Some(Ok("still running")));
}

/// Keeps the compiler from seeing that the panic always happens.
fn exec_time_is_zero() -> bool {
    now() == 0
}

#[test]
fn panic_messages_kept_are_bounded() {
    let exec = Executor::new();
    for _ in 0..MAX_KEPT_PANICS + 10 {
        exec.spawn(async { panic!("again") });
    }
    exec.run_ready(usize::MAX);
    assert_eq!(exec.panic_count(), MAX_KEPT_PANICS as u64 + 10);
    assert_eq!(exec.take_panics().len(), MAX_KEPT_PANICS);
}

#[test]
fn a_waker_that_outlives_its_task_does_nothing() {
    let exec = Executor::new();
    let slot = Slot::default();
    let s = slot.clone();
    exec.spawn(async move { park(&s).await });
    exec.run_ready(100);
    wake(&slot);
    exec.run_ready(100);
    assert!(exec.is_empty());
    // The slot is reused by a new task; the old waker must not wake it.
    let log = Log::default();
    spawn_parker(&exec, &log, "new");
    exec.run_ready(100);
    wake(&slot);
    assert!(!exec.has_ready());
}

#[test]
fn a_wake_from_another_thread_reaches_the_queue() {
    let exec = Executor::new();
    let log = Log::default();
    let a = spawn_parker(&exec, &log, "a");
    exec.run_ready(100);
    log.take();
    let waker = a.borrow().clone().unwrap();
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert!(exec.has_ready());
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(log.take(), ["a"]);
}

#[test]
fn wakes_from_other_threads_while_tasks_run_are_not_lost() {
    // A task counts its polls and parks; four threads wake it 1000 times
    // each. However the wakes interleave with the polls, the last wake is
    // followed by a poll.
    let exec = Executor::new();
    let slot = Slot::default();
    let polls = Rc::new(Cell::new(0u32));
    let (s, p) = (slot.clone(), polls.clone());
    exec.spawn(async move {
        loop {
            p.set(p.get() + 1);
            park(&s).await;
        }
    });
    exec.run_ready(1);
    let waker = slot.borrow().clone().unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let w = waker.clone();
            std::thread::spawn(move || (0..1000).for_each(|_| w.wake_by_ref()))
        })
        .collect();
    let before = polls.get();
    while threads.iter().any(|t| !t.is_finished()) {
        exec.run_ready(1);
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    exec.run_ready(1);
    assert!(polls.get() > before);
    assert!(polls.get() <= before + 4000);
    assert!(!exec.has_ready());
    // The flag and the queue still agree: one more wake, one more poll
    // (a flag left set with no key queued would swallow it).
    waker.wake_by_ref();
    assert_eq!(exec.run_ready(1), 1);
}

#[test]
fn sleeping_tasks_wake_exactly_at_their_deadline() {
    let exec = Executor::new();
    exec.set_now(100);
    let woke = Rc::new(RefCell::new(Vec::new()));
    for (name, us) in [("late", 50), ("early", 20), ("now", 0)] {
        let w = woke.clone();
        exec.spawn(async move {
            sleep(Duration::from_micros(us)).await;
            w.borrow_mut().push((name, now()));
        });
    }
    assert_eq!(exec.run_ready(100), 3);
    assert_eq!(*woke.borrow(), [("now", 100)]);
    assert_eq!(exec.pending_timers(), 2);
    assert_eq!(exec.next_timer(), Some(120));
    exec.set_now(119);
    assert!(!exec.has_ready());
    assert_eq!(exec.run_ready(100), 0);
    exec.set_now(120);
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(exec.next_timer(), Some(150));
    // A jump past a deadline wakes the task once; it sees the time jumped to.
    exec.set_now(1_000);
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(*woke.borrow(), [("now", 100), ("early", 120), ("late", 1_000)]);
    assert_eq!(exec.next_timer(), None);
    assert!(exec.is_empty());
}

#[test]
fn sleep_until_a_past_time_is_ready_at_once() {
    let exec = Executor::new();
    exec.set_now(500);
    let h = exec.spawn(async {
        sleep_until(499).await;
        sleep_until(500).await;
        now()
    });
    assert_eq!(exec.run_ready(100), 1);
    assert_eq!(h.try_take(), Some(Ok(500)));
    assert_eq!(exec.pending_timers(), 0);
}

#[test]
fn timeout_gives_elapsed_at_the_deadline_and_not_before() {
    let exec = Executor::new();
    let never = Event::new();
    let w = never.clone();
    let h = exec.spawn(async move { timeout(Duration::from_micros(10), w.wait()).await });
    exec.run_ready(100);
    exec.set_now(9);
    exec.run_ready(100);
    assert!(!h.is_finished());
    exec.set_now(10);
    exec.run_ready(100);
    assert_eq!(h.try_take(), Some(Ok(Err(Elapsed))));
    // The wait it dropped left the event.
    assert_eq!(never.waiters(), 0);
}

#[test]
fn timeout_gives_the_value_when_it_comes_first_and_drops_its_timer() {
    let exec = Executor::new();
    let h = exec.spawn(async {
        let v = timeout(Duration::from_micros(100), async {
            sleep(Duration::from_micros(30)).await;
            "in time"
        })
        .await;
        (v, now())
    });
    exec.run_ready(100);
    assert_eq!(exec.pending_timers(), 2);
    exec.set_now(exec.next_timer().unwrap());
    exec.run_ready(100);
    assert_eq!(h.try_take(), Some(Ok((Ok("in time"), 30))));
    // The 100 µs timer went with the timeout, not left to expire.
    assert_eq!(exec.pending_timers(), 0);
    assert_eq!(exec.next_timer(), None);
}

#[test]
fn an_event_wakes_the_task_waiting_on_it() {
    let exec = Executor::new();
    let ev = Event::new();
    let log = Log::default();
    for name in ["a", "b"] {
        let (ev, log) = (ev.clone(), log.clone());
        exec.spawn(async move {
            loop {
                ev.wait().await;
                log.push(name);
            }
        });
    }
    exec.run_ready(100);
    assert!(ev.notify());
    exec.run_ready(100);
    assert_eq!(log.take(), ["a"]);
    assert_eq!(ev.notify_all(), 2);
    exec.run_ready(100);
    assert_eq!(log.take(), ["b", "a"]);
}

#[test]
#[should_panic(expected = "exec::sleep polled outside an executor")]
fn sleep_outside_an_executor_says_so() {
    let mut s = std::pin::pin!(sleep(Duration::from_micros(1)));
    let _ = s.as_mut().poll(&mut Context::from_waker(&Log::default().waker("x")));
}

#[test]
fn a_finished_task_leaves_nothing_behind() {
    let exec = Executor::new();
    let held = Rc::new(());
    let h = held.clone();
    exec.spawn(async move {
        let _h = h;
        yield_now().await;
    });
    let header = Arc::downgrade(
        exec.inner
            .tasks
            .borrow()
            .header(TaskKey { slot: 0, generation: 0 })
            .unwrap(),
    );
    exec.run_ready(100);
    assert_eq!(Rc::strong_count(&held), 2);
    assert!(header.upgrade().is_some());
    exec.run_ready(100);
    assert!(exec.is_empty());
    assert_eq!(Rc::strong_count(&held), 1);
    assert!(header.upgrade().is_none(), "the task's waker is freed");
}

#[test]
fn a_panicked_task_leaves_nothing_behind() {
    let exec = Executor::new();
    let held = Rc::new(());
    let h = held.clone();
    exec.spawn(async move {
        let _h = h;
        yield_now().await;
        panic!("late");
    });
    let header = Arc::downgrade(
        exec.inner
            .tasks
            .borrow()
            .header(TaskKey { slot: 0, generation: 0 })
            .unwrap(),
    );
    exec.run_ready(100);
    exec.run_ready(100);
    assert_eq!(exec.panic_count(), 1);
    assert_eq!(Rc::strong_count(&held), 1);
    assert!(header.upgrade().is_none());
}

#[test]
fn dropping_the_executor_drops_its_tasks_and_cancels_their_handles() {
    let exec = Executor::new();
    let held = Rc::new(());
    let h = held.clone();
    let slot = Slot::default();
    let s = slot.clone();
    let handle = exec.spawn(async move {
        let _h = h;
        park(&s).await;
    });
    exec.run_ready(100);
    drop(exec);
    assert_eq!(Rc::strong_count(&held), 1);
    assert_eq!(handle.try_take(), Some(Err(JoinError::Cancelled)));
    // The waker left in the socket is harmless.
    wake(&slot);
}

/// Not a test: prints what a wake and a poll cost (the table in the module
/// documentation). Asserts only that every wake was seen.
#[test]
#[ignore = "a measurement; run in release with --nocapture"]
fn measure_wake_cost() {
    use std::time::Instant;
    const TASKS: usize = 1024;
    let exec = Executor::new();
    let log = Log::default();
    let slots: Vec<Slot> = (0..TASKS).map(|_| spawn_parker(&exec, &log, "")).collect();
    exec.run_ready(TASKS);
    let wakers: Vec<Waker> = slots.iter().map(|s| s.borrow().clone().unwrap()).collect();
    let (mut first, mut again, mut polls) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2000 {
        let t0 = Instant::now();
        wakers.iter().for_each(Waker::wake_by_ref);
        let t1 = Instant::now();
        wakers.iter().for_each(Waker::wake_by_ref);
        let t2 = Instant::now();
        assert_eq!(exec.run_ready(TASKS), TASKS);
        let t3 = Instant::now();
        let per = |d: Duration| d.as_nanos() as f64 / TASKS as f64;
        first.push(per(t1 - t0));
        again.push(per(t2 - t1));
        polls.push(per(t3 - t2));
        log.take();
    }
    for (what, mut ns) in [
        ("wake, not queued", first),
        ("wake, already queued", again),
        ("poll", polls),
    ] {
        ns.sort_by(f64::total_cmp);
        println!("{what}: median {:.1} ns", ns[ns.len() / 2]);
    }
}
