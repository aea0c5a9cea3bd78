//! The handle to a spawned task's result.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Why a task ended without a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinError {
    /// The task panicked; the panic's message (also kept by
    /// [`super::Executor::take_panics`]).
    Panicked(String),
    /// The executor was dropped before the task finished.
    Cancelled,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(msg) => write!(f, "task panicked: {msg}"),
            JoinError::Cancelled => write!(f, "executor dropped before the task finished"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Where a task's end is told to its handle.
enum State<T> {
    Running(Option<Waker>),
    Done(Result<T, JoinError>),
    /// The handle took the result.
    Taken,
}

/// Shared between a task's body and its [`JoinHandle`].
pub(super) struct JoinState<T> {
    state: RefCell<State<T>>,
}

impl<T> JoinState<T> {
    pub fn new() -> Rc<JoinState<T>> {
        Rc::new(JoinState {
            state: RefCell::new(State::Running(None)),
        })
    }

    /// The task's body finished with `result`.
    pub fn finish(&self, result: Result<T, JoinError>) {
        let waker = {
            let mut state = self.state.borrow_mut();
            match std::mem::replace(&mut *state, State::Done(result)) {
                State::Running(waker) => waker,
                // A task ends once; keep the first end.
                old => {
                    *state = old;
                    None
                }
            }
        };
        // Woken outside the borrow: a waker may be anything.
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// How the executor tells a join handle of any output type that its task
/// ended without a value.
pub(super) trait Abort {
    fn abort(&self, why: JoinError);
}

impl<T> Abort for JoinState<T> {
    fn abort(&self, why: JoinError) {
        self.finish(Err(why));
    }
}

/// The result of a spawned task: a future of `Result<T, JoinError>`, or
/// polled by hand with [`JoinHandle::is_finished`] and
/// [`JoinHandle::try_take`].
///
/// Dropping the handle detaches the task: it runs on to its end and its
/// value is dropped (as with a thread's `JoinHandle`). There is no cancel;
/// a task that should stop early is told so through its own channel (an
/// [`super::Event`], a closed socket).
pub struct JoinHandle<T> {
    pub(super) state: Rc<JoinState<T>>,
}

impl<T> JoinHandle<T> {
    /// Whether the task has ended (with a value or an error), including
    /// when the result has already been taken.
    pub fn is_finished(&self) -> bool {
        !matches!(*self.state.state.borrow(), State::Running(_))
    }

    /// The task's result if it has ended and has not been taken yet.
    pub fn try_take(&self) -> Option<Result<T, JoinError>> {
        let mut state = self.state.state.borrow_mut();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(result) => Some(result),
            other => {
                *state = other;
                None
            }
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// Panics if polled again after it gave the result (as any future
    /// polled after completion may).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.state.state.borrow_mut();
        match &mut *state {
            State::Running(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => Poll::Ready(result),
                _ => unreachable!("matched Done above"),
            },
            State::Taken => panic!("JoinHandle polled after it returned the result"),
        }
    }
}
