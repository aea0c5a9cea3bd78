//! The per-core executor: applications as Rust `async` tasks beside the
//! graph's elements (DESIGN.md, "The graph and the stack"; ClickNF §4.1-4.2,
//! `../shared/papers/clicknf-modular-stack-atc18.txt`).
//!
//! ClickNF splits a core's work in two contexts. The *network context* is
//! the elements: packet reception, TCP processing, timers. The
//! *application context* is the application's code: it blocks on
//! `accept`, `read`, `write`, and is rescheduled when the event it waits
//! for happens (ClickNF's Figure 5: the element that takes in a data
//! segment reschedules the task blocked on it). ClickNF switches stacks
//! with Boost contexts; here the compiler turns each application into a
//! state machine (`async`), and "block" is `.await` on a future that
//! returns `Pending`.
//!
//! # What runs when
//!
//! One [`Executor`] per graph thread, owned by that thread's router (it is
//! not `Send`). The graph will run it from a task element, once per round
//! of the scheduler:
//!
//! 1. the router fires its timers and runs its tasks: the network context.
//!    An element that changes a socket (data arrived, a connection was
//!    accepted, room to send) wakes the waiting task, through the
//!    `Waker` that the task left in the socket or by
//!    [`Event::notify`]. A wake only appends the task to the ready queue:
//!    no application code runs inside a push, so an element is never
//!    re-entered by an application;
//! 2. the executor's task element calls [`Executor::set_now`] with the
//!    router's clock (which wakes the tasks whose [`sleep`] is due), then
//!    [`Executor::run_ready`] with a budget: the tasks woken in step 1 run
//!    in wake order, each polled once: a batch of application work per
//!    round, as in ClickNF, to spread the cost of switching. A task may call
//!    into the graph (a `write` pushes down the transmit path, ClickNF's
//!    Figure 2, which is the application context's half of the work); a
//!    wake made while tasks run queues the woken task for the *next*
//!    round, so a task that keeps waking itself cannot starve the network
//!    context, and the budget bounds a round;
//! 3. the element returns whether it polled a task ("work happened"), and
//!    keeps one router timer set at [`Executor::next_timer`], so that an
//!    idle router in simulated time jumps to the next sleep's deadline as
//!    it jumps to its own timers.
//!
//! Code that is not async calls the stack through [`block_on`], which
//! drives the graph one round at a time and the executor until a future
//! completes.
//!
//! The executor knows nothing of the graph (no `Router`, no `Ctx`): the
//! element that runs it, and the sockets that wake its tasks, hold it and
//! its wakers; it holds nothing of theirs.
//!
//! # Time
//!
//! The executor never reads a clock (DESIGN.md: time is passed in). Its
//! owner sets it with [`Executor::set_now`] (microseconds, the router's
//! `Clock::now`), which also fires the due timers ([`Executor::fire_timers`]
//! fires them again without moving time). [`sleep`], [`sleep_until`] and
//! [`timeout`] measure that time, so a test in simulated time jumps
//! straight to [`Executor::next_timer`] and tasks wake exactly at their
//! deadline.
//!
//! # Finding the executor
//!
//! While [`Executor::run_ready`] polls tasks (and while [`block_on`] polls
//! its future) the executor is set in a thread-local, which is how
//! [`sleep`], [`spawn`] and [`now`] find it with nothing passed down.
//! Polling a sleep anywhere else is a programming error and panics saying
//! so; nothing that comes from the network can cause it.
//!
//! # Why not tokio
//!
//! tokio's single-thread runtime owns its loop: `block_on` parks the
//! thread in its I/O reactor (epoll) and its timers read the system clock.
//! Here the loop is the graph's scheduler, on its own core, polling the
//! NIC: the executor must be a step of that loop with a budget, run in
//! simulated time in tests, with no reactor and no thread of its own.
//! What it takes for that is this module; the sockets will still implement
//! the `futures-io` / tokio I/O traits, so libraries written for tokio's
//! traits run on it.
//!
//! # Cost of a wake
//!
//! A task's waker is an `Arc` of its `TaskWaker` (`task.rs`: its key, a
//! "queued" flag, the ready queue), made once at spawn. A wake swaps the
//! flag and, if it was clear, appends the key under the ready queue's
//! mutex, which another thread can take too (a control thread waking a
//! task; it is seen at the owner's next `run_ready`, as the graph polls).
//! Measured on the same thread, uncontended: 1024 parked tasks woken one
//! after the other, then run (AMD EPYC, shared machine; medians of 2000
//! rounds). Time from `cargo test -p oxnet-stack --release --lib
//! exec::tests::measure_wake_cost -- --ignored --nocapture`; instructions
//! from callgrind on the same loop built alone with `rustc -O`:
//!
//! | | instructions | time |
//! |---|---|---|
//! | wake of a task not yet queued (swap, lock, push, unlock) | 71 | 9 ns |
//! | wake of a task already queued (swap) | 11 | 4 ns |
//! | one poll in `run_ready`, the task storing its waker and parking | 198 | 20 ns (35 ns when it also logs through a mutex, as in the test) |
//!
//! The lock is two of the three atomic operations of a first wake; a
//! lock-free queue for the same thread would save them, at the price of
//! `unsafe` and a thread check on every wake. Not worth it at 9 ns.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Executor`]: spawn, run_ready, time, panics; [`spawn`], [`now`], [`yield_now`] |
//! | `task.rs` | the task table, a task's waker, the ready queue |
//! | `join.rs` | [`JoinHandle`], [`JoinError`] |
//! | `time.rs` | the timer list, [`sleep`], [`sleep_until`], [`timeout`] |
//! | `event.rs` | [`Event`], the edge-triggered signal for sockets |
//! | `block_on.rs` | [`block_on`], for the blocking API |

mod block_on;
mod event;
mod join;
mod task;
#[cfg(test)]
mod tests;
mod time;

pub use block_on::{block_on, BLOCK_ON_BUDGET};
pub use event::{Event, Wait};
pub use join::{JoinError, JoinHandle};
pub use time::{sleep, sleep_until, timeout, Elapsed, Sleep};

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use join::JoinState;
use task::{Body, ReadyQueue, Task, TaskKey, TaskWaker, Tasks};
use time::Timers;

/// Panic messages kept for [`Executor::take_panics`]; more are counted but
/// not kept, so a task that spawns panicking tasks in a loop cannot grow
/// the list without bound.
pub const MAX_KEPT_PANICS: usize = 64;

thread_local! {
    /// The executor polling on this thread, while one is.
    static CURRENT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

/// A single-threaded executor for one graph thread (see the module
/// documentation for when it runs). It stays on the thread that made it:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(oxnet_stack::exec::Executor::new());
/// ```
pub struct Executor {
    inner: Rc<Inner>,
}

struct Inner {
    ready: Arc<ReadyQueue>,
    tasks: RefCell<Tasks>,
    timers: Rc<Timers>,
    /// Set while `run_ready` or `block_on` polls (re-entry is refused).
    running: Cell<bool>,
    /// The keys taken from the ready queue for one `run_ready`, kept to
    /// reuse its allocation.
    batch: Cell<Vec<TaskKey>>,
    panics: RefCell<Vec<String>>,
    panic_count: Cell<u64>,
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new()
    }
}

impl Executor {
    /// An executor with no task, at time 0.
    pub fn new() -> Executor {
        Executor {
            inner: Rc::new(Inner {
                ready: Arc::new(ReadyQueue::default()),
                tasks: RefCell::new(Tasks::default()),
                timers: Rc::new(Timers::default()),
                running: Cell::new(false),
                batch: Cell::new(Vec::new()),
                panics: RefCell::new(Vec::new()),
                panic_count: Cell::new(0),
            }),
        }
    }

    /// Adds a task; it is queued to run at the next [`Executor::run_ready`].
    /// Dropping the returned handle detaches the task (it still runs).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        self.inner.spawn(fut)
    }

    /// Polls the tasks that were woken before this call, in wake order,
    /// each once, at most `max_polls` of them; returns how many it polled.
    /// Tasks woken while these run (or beyond the budget) wait for the next
    /// call. A task that panics is dropped and its panic kept
    /// ([`Executor::take_panics`]; the thread's panic hook still prints
    /// it); the executor goes on.
    ///
    /// Panics if called from inside one of its own tasks.
    pub fn run_ready(&self, max_polls: usize) -> usize {
        let _enter = self.enter("run_ready");
        let mut batch = self.inner.batch.take();
        self.inner.ready.take_front(max_polls, &mut batch);
        let mut polls = 0;
        for key in batch.drain(..) {
            if self.inner.poll(key) {
                polls += 1;
            }
        }
        self.inner.batch.set(batch);
        polls
    }

    /// Whether a task is waiting to run (from any thread's wake).
    pub fn has_ready(&self) -> bool {
        !self.inner.ready.is_empty()
    }

    /// Live tasks: spawned and not yet finished or panicked.
    pub fn len(&self) -> usize {
        self.inner.tasks.borrow().len()
    }

    /// Whether there is no live task.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the executor's time (microseconds; it never goes back) and
    /// wakes the tasks whose sleep is due then. The owner calls it before
    /// [`Executor::run_ready`].
    pub fn set_now(&self, us: u64) {
        self.inner.timers.set_now(us);
        self.inner.timers.fire();
    }

    /// The executor's time, as last set.
    pub fn now(&self) -> u64 {
        self.inner.timers.now()
    }

    /// When the earliest pending sleep is due (for an owner in simulated
    /// time to jump to), if one is.
    pub fn next_timer(&self) -> Option<u64> {
        self.inner.timers.next()
    }

    /// Wakes every task whose sleep is due at the current time; returns
    /// how many. [`Executor::set_now`] already does this; this is for an
    /// owner that wants to fire without moving time.
    pub fn fire_timers(&self) -> usize {
        self.inner.timers.fire()
    }

    /// Sleeps registered and not yet due.
    pub fn pending_timers(&self) -> usize {
        self.inner.timers.len()
    }

    /// Tasks that panicked since the executor was made.
    pub fn panic_count(&self) -> u64 {
        self.inner.panic_count.get()
    }

    /// The messages of the panics since the last call (at most
    /// [`MAX_KEPT_PANICS`]).
    pub fn take_panics(&self) -> Vec<String> {
        std::mem::take(&mut *self.inner.panics.borrow_mut())
    }

    /// Makes this the current executor of the thread until the guard
    /// drops; `what` names the caller in the re-entry panic.
    fn enter(&self, what: &str) -> Enter<'_> {
        if self.inner.running.replace(true) {
            panic!("{what} called from inside a task of this executor: a task must .await, not run its executor");
        }
        let prev = CURRENT.with(|c| c.replace(Some(self.inner.clone())));
        Enter {
            inner: &self.inner,
            prev,
        }
    }
}

impl Drop for Executor {
    /// Drops the tasks that have not finished; their join handles give
    /// [`JoinError::Cancelled`].
    fn drop(&mut self) {
        let tasks = self.inner.tasks.borrow_mut().drain();
        for task in tasks {
            task.header.queued.store(true, Ordering::Release);
            task.join.abort(JoinError::Cancelled);
        }
    }
}

/// Restores the thread's previous current executor when dropped.
struct Enter<'a> {
    inner: &'a Inner,
    prev: Option<Rc<Inner>>,
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
        self.inner.running.set(false);
    }
}

impl Inner {
    fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = JoinState::new();
        let result = state.clone();
        let body: Body = Box::pin(async move { result.finish(Ok(fut.await)) });
        let key = self.tasks.borrow_mut().reserve();
        // Queued from the start: its first poll is at the next run_ready.
        let header = Arc::new(TaskWaker {
            key,
            queued: AtomicBool::new(true),
            ready: self.ready.clone(),
        });
        let waker = Waker::from(header.clone());
        let task = Task {
            header,
            waker,
            body,
            join: state.clone(),
        };
        self.tasks.borrow_mut().put(key, task);
        self.ready.push(key);
        JoinHandle { state }
    }

    /// Polls the task named by `key` once; false if the key is stale.
    fn poll(&self, key: TaskKey) -> bool {
        // Out of the table while it runs, so that it can spawn.
        let Some(mut task) = self.tasks.borrow_mut().take(key) else {
            return false;
        };
        // Cleared before the poll, so a wake during the poll (or from
        // another thread while it runs) queues it again. Both sides swap:
        // whichever comes second sees the other's writes.
        let was_queued = task.header.queued.swap(false, Ordering::AcqRel);
        debug_assert!(was_queued, "a task in the ready queue has its queued flag set");
        let polled = catch_unwind(AssertUnwindSafe(|| {
            task.body.as_mut().poll(&mut Context::from_waker(&task.waker))
        }));
        match polled {
            Ok(Poll::Pending) => self.tasks.borrow_mut().put(key, task),
            Ok(Poll::Ready(())) => self.end(key, task),
            Err(payload) => {
                let msg = panic_message(payload);
                task.join.abort(JoinError::Panicked(msg.clone()));
                self.record_panic(msg);
                self.end(key, task);
            }
        }
        true
    }

    /// Removes a finished or panicked task.
    fn end(&self, key: TaskKey, task: Task) {
        // For good: a waker that outlives the task (in a socket) does nothing.
        task.header.queued.store(true, Ordering::Release);
        self.tasks.borrow_mut().release(key);
        // Dropping the future runs the destructors of what it held; one
        // that panics is a panic of this task too.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(task))) {
            self.record_panic(panic_message(payload));
        }
    }

    fn record_panic(&self, msg: String) {
        self.panic_count.set(self.panic_count.get() + 1);
        let mut kept = self.panics.borrow_mut();
        if kept.len() < MAX_KEPT_PANICS {
            kept.push(msg);
        }
    }
}

/// The message of a panic (`panic!` with a literal or a format string).
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        return (*s).to_string();
    }
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(_) => "a panic with a payload that is not a string".to_string(),
    }
}

/// The current executor's timers, for `what` (a future's name) to use.
fn current_timers(what: &str) -> Rc<Timers> {
    CURRENT
        .with(|c| c.borrow().as_ref().map(|inner| inner.timers.clone()))
        .unwrap_or_else(|| {
            panic!("exec::{what} polled outside an executor: await it in a task (Executor::spawn) or in exec::block_on")
        })
}

/// Spawns a task on the executor running the calling task (an accept loop
/// spawning one task per connection).
///
/// Panics outside a task of an [`Executor`] or [`block_on`].
pub fn spawn<T: 'static>(fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
    let inner = CURRENT.with(|c| c.borrow().clone());
    match inner {
        Some(inner) => inner.spawn(fut),
        None => panic!("exec::spawn called outside an executor: call it from a task, or use Executor::spawn"),
    }
}

/// The time of the executor running the calling task, in microseconds.
///
/// Panics outside a task of an [`Executor`] or [`block_on`].
pub fn now() -> u64 {
    current_timers("now").now()
}

/// Lets the other ready tasks and the network context run: the calling
/// task is queued again and continues at the next [`Executor::run_ready`]
/// (a task doing a long computation calls it between pieces).
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
