//! Socket I/O multiplexing (ClickNF §3.3; issue 11 item 5 "epoll"): an
//! [`Epoll`] per application watches listeners and streams and reports
//! which are ready, with Linux's epoll(7) flags and semantics, so the C
//! ABI can map `epoll_create`/`epoll_ctl`/`epoll_wait` onto it.
//!
//! # How readiness reaches it
//!
//! Linux keeps a ready list per epoll instance: a socket's wakeup (data,
//! room, a state change) calls back into every epoll watching it, which
//! queues the socket; `epoll_wait` looks only at the queued sockets. The
//! same here, without touching the elements: every watched socket keeps
//! a wait armed on each of its events (a stream's `readable` and
//! `writable`, a listener's `accept_event`, all `crate::exec::Event`s)
//! with a waker of its own. When an element notifies the event, the
//! waker (running inside the element, so it only records) marks the
//! socket in a shared list and wakes the task in [`Epoll::wait`]. A wait
//! then takes the marked sockets, re-arms their events first (so no
//! notification is lost between the check and the next one), reads their
//! state and reports. Sockets with nothing new cost nothing.
//!
//! Which event fired decides whether a socket is queued at all, as
//! Linux's wakeup keys do: `readable` can signal EPOLLIN, EPOLLRDHUP,
//! EPOLLERR and EPOLLHUP; `writable` EPOLLOUT, EPOLLERR and EPOLLHUP; a
//! socket watched for EPOLLOUT only is not queued by arriving data. What
//! is reported is then the socket's whole readiness ([`readiness`]),
//! masked by the events asked for (EPOLLERR and EPOLLHUP always).
//!
//! # Level- and edge-triggered (epoll(7))
//!
//! Level-triggered (the default): a socket reported stays queued and is
//! looked at again by the next wait, reported while it is ready, dropped
//! from the queue once it is not (a later event queues it again).
//! EPOLLET: a socket is reported once per event that queues it; reading
//! only part of the data does not report it again, new data does.
//! EPOLLONESHOT: after one report the socket is disabled until
//! [`Epoll::ctl`] MOD arms it again. ADD and MOD look at the socket at
//! once, so a socket ready when added is reported (even edge-triggered),
//! as Linux does.
//!
//! # Known limits
//!
//! - A state change no event signals is no edge: our own `shutdown_write`
//!   notifies nothing, so an edge-triggered watcher does not learn of the
//!   EPOLLHUP it completes (level-triggered ones do, at their next wait if
//!   still queued). Linux wakes the socket on shutdown.
//! - TCPProcessAck wakes a listener's accept event with `notify` (one
//!   waiter, the oldest), not `notify_all`: if a task also waits in
//!   `TcpListener::accept` on a listener an epoll watches, only the older
//!   of the two learns of the connection. Accept from epoll-watched
//!   listeners with `try_accept` (what every epoll server does); the fix
//!   is `notify_all` in `tcp/elements/ack.rs`.
//! - One task waits on an epoll at a time (`wait` takes `&mut self`).
//! - A socket dropped while watched is not forgotten by itself (Linux
//!   removes a closed descriptor): DEL it first, or [`Epoll::forget`]
//!   its [`Source`].

use super::info::TcpInfo;
use super::socket::{Stack, TcpListener, TcpStream};
use super::tcb::TcpState;
use crate::anno::TcbRef;
use crate::exec::{Event, Wait};
use crate::wire::IpEndpoint;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Data to read, the end of the stream, or a connection to accept.
pub const EPOLLIN: u32 = libc::EPOLLIN as u32;
/// Urgent data (never set: the stack does not deliver urgent data apart).
pub const EPOLLPRI: u32 = libc::EPOLLPRI as u32;
/// Room in the send buffer (or a write would fail at once: shut down).
pub const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
/// The connection has an error (reported whether asked for or not).
pub const EPOLLERR: u32 = libc::EPOLLERR as u32;
/// Both directions are closed, or the connection is reset (reported
/// whether asked for or not).
pub const EPOLLHUP: u32 = libc::EPOLLHUP as u32;
/// The peer has closed its direction (its FIN has arrived).
pub const EPOLLRDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Report once per event, not while ready.
pub const EPOLLET: u32 = libc::EPOLLET as u32;
/// Report once, then stay silent until armed again with MOD.
pub const EPOLLONESHOT: u32 = libc::EPOLLONESHOT as u32;

/// Reported whether asked for or not (epoll_ctl(2)).
const ALWAYS: u32 = EPOLLERR | EPOLLHUP;
/// What a notification of each event may have changed.
const READABLE_SIGNALS: u32 = EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP;
const WRITABLE_SIGNALS: u32 = EPOLLOUT | EPOLLERR | EPOLLHUP;
const ACCEPT_SIGNALS: u32 = EPOLLIN;

/// epoll_ctl's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpollOp {
    /// Start watching a socket (EEXIST if watched already).
    Add,
    /// Change the events and the data of a watched socket (ENOENT if not
    /// watched); re-arms an EPOLLONESHOT socket.
    Mod,
    /// Stop watching (ENOENT if not watched).
    Del,
}

/// What an epoll watches: a stream's TCB or a listener's endpoint (the
/// file descriptor of Linux's interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Stream(TcbRef),
    Listener(IpEndpoint),
}

/// A socket an epoll can watch.
pub trait Pollable {
    /// Its stack and what to watch in it.
    fn epoll_source(&self) -> (Stack, Source);
}

impl Pollable for TcpStream {
    fn epoll_source(&self) -> (Stack, Source) {
        (self.stack().clone(), Source::Stream(self.tcb_ref()))
    }
}

impl Pollable for TcpListener {
    fn epoll_source(&self) -> (Stack, Source) {
        (self.stack().clone(), Source::Listener(self.local()))
    }
}

/// A socket's readiness now, as Linux's `tcp_poll` computes it: the
/// events that hold, of EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP.
/// A source that no longer exists (a stream whose socket let go, a
/// listener dropped) is EPOLLHUP.
pub fn readiness(info: &TcpInfo, source: Source) -> u32 {
    match source {
        Source::Listener(local) => match info.listeners.get(&local) {
            Some(l) if !l.accept_queue.is_empty() => EPOLLIN,
            Some(_) => 0,
            None => EPOLLHUP,
        },
        Source::Stream(r) => {
            let Some(tcb) = info.tcbs.get(r) else { return EPOLLHUP };
            // CLOSED (reset, timed out, or fully closed) is both
            // directions shut, as Linux's tcp_done shuts them.
            let closed = tcb.state == TcpState::Closed;
            let read_shut = tcb.fin_received || closed;
            let write_shut = tcb.fin_queued || closed;
            let mut mask = 0;
            if read_shut && write_shut {
                mask |= EPOLLHUP;
            }
            if read_shut {
                mask |= EPOLLIN | EPOLLRDHUP;
            }
            // Before the handshake completes a stream is neither readable
            // nor writable.
            if !matches!(tcb.state, TcpState::SynSent | TcpState::SynReceived) {
                if tcb.recv_queued > 0 {
                    mask |= EPOLLIN;
                }
                // Shut for writing: a write fails at once, so it does not
                // block (Linux reports EPOLLOUT then too).
                if write_shut || tcb.send_buffer.len() < tcb.send_buffer_limit {
                    mask |= EPOLLOUT;
                }
            }
            if tcb.error.is_some() {
                mask |= EPOLLERR;
            }
            mask
        }
    }
}

/// The list the wakers write to (they may run inside an element, so they
/// only record) and the task waiting in [`Epoll::wait`]. Behind a mutex
/// because `Waker` must be `Send`; it is only ever touched from the
/// router's thread, so the mutex is never contended.
#[derive(Default)]
struct Hub {
    marked: Mutex<Vec<usize>>,
    waiter: Mutex<Option<Waker>>,
}

/// One watched socket's side of the hub: the events signalled since its
/// last look (its slot is in `marked` while this is not 0).
struct Mark {
    hub: Arc<Hub>,
    slot: usize,
    signalled: AtomicU32,
}

/// The waker of one of a socket's events.
struct EventWaker {
    mark: Arc<Mark>,
    signals: u32,
}

impl Wake for EventWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mark = &self.mark;
        if mark.signalled.fetch_or(self.signals, Ordering::Relaxed) == 0 {
            mark.hub
                .marked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(mark.slot);
        }
        let waiter = mark.hub.waiter.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

/// A wait kept armed on one of a socket's events (the wait holds the
/// event).
struct Armed {
    wait: Wait,
    waker: Waker,
}

impl Armed {
    fn new(event: Event, mark: &Arc<Mark>, signals: u32) -> Armed {
        let waker = Waker::from(Arc::new(EventWaker {
            mark: mark.clone(),
            signals,
        }));
        let mut armed = Armed {
            wait: event.wait(),
            waker,
        };
        armed.poll();
        armed
    }

    /// Registers the waker; a wait that has completed is replaced by a
    /// new one (before the caller looks at the socket: nothing is lost).
    fn poll(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        if Pin::new(&mut self.wait).poll(&mut cx).is_ready() {
            self.wait.restart();
            let _ = Pin::new(&mut self.wait).poll(&mut cx);
        }
    }
}

/// One watched socket.
struct Entry {
    stack: Stack,
    source: Source,
    /// The events asked for, with EPOLLET / EPOLLONESHOT.
    events: u32,
    data: u64,
    mark: Arc<Mark>,
    armed: Vec<Armed>,
    /// In `Epoll::ready`.
    queued: bool,
    /// EPOLLONESHOT, reported: silent until MOD.
    disabled: bool,
}

impl Entry {
    /// Whether a notification of `signals` concerns what it watches.
    fn wants(&self, signals: u32) -> bool {
        !self.disabled && signals & (self.events | ALWAYS) != 0
    }

    /// The events to report now (0: none).
    fn ready_events(&self) -> u32 {
        if self.disabled {
            return 0;
        }
        readiness(&self.stack.borrow(), self.source) & (self.events | ALWAYS)
    }
}

/// An epoll instance: the sockets it watches and the queue of those that
/// may be ready. Not `Send`, as the sockets are not.
#[derive(Default)]
pub struct Epoll {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    by_source: crate::FlowMap<Source, usize>,
    /// Linux's ready list: sockets to look at in the next wait.
    ready: VecDeque<usize>,
    hub: Arc<Hub>,
    /// The hub's marked list's other half ([`Epoll::take_marks`]).
    spare_marks: Vec<usize>,
    /// Times a socket's state was read, for [`Epoll::looks`].
    looks: std::cell::Cell<u64>,
}

impl Epoll {
    /// An epoll watching nothing (epoll_create).
    pub fn new() -> Epoll {
        Epoll::default()
    }

    /// Sockets watched.
    pub fn len(&self) -> usize {
        self.by_source.len()
    }

    /// How many times it has read a socket's state (at ADD and MOD, and
    /// for each queued socket in a wait): what the waits cost, which
    /// grows with the sockets that had events, not with those watched.
    pub fn looks(&self) -> u64 {
        self.looks.get()
    }

    /// Whether it watches nothing.
    pub fn is_empty(&self) -> bool {
        self.by_source.is_empty()
    }

    /// epoll_ctl: `op` on `socket`, watching `events` (EPOLLIN, EPOLLOUT,
    /// EPOLLRDHUP, with EPOLLET, EPOLLONESHOT; EPOLLERR and EPOLLHUP are
    /// always watched) and reporting `data` with them. Errors: EEXIST
    /// (ADD of a watched socket), ENOENT (MOD or DEL of one not watched),
    /// EBADF (a socket whose connection or listener is gone).
    pub fn ctl(&mut self, op: EpollOp, socket: &dyn Pollable, events: u32, data: u64) -> Result<(), i32> {
        let (stack, source) = socket.epoll_source();
        match op {
            EpollOp::Add => self.add(stack, source, events, data),
            EpollOp::Mod => {
                let slot = *self.by_source.get(&source).ok_or(libc::ENOENT)?;
                let e = self.entries[slot].as_mut().expect("indexed");
                e.events = events;
                e.data = data;
                e.disabled = false;
                self.queue_if_ready(slot);
                Ok(())
            }
            EpollOp::Del => self.forget(source),
        }
    }

    /// DEL by what the socket was watched as (`Pollable::epoll_source`),
    /// for a socket already dropped: Linux forgets a closed descriptor
    /// by itself, here a socket dropped while watched keeps its entry (it
    /// reports nothing more) until this. ENOENT if not watched.
    pub fn forget(&mut self, source: Source) -> Result<(), i32> {
        let slot = self.by_source.remove(&source).ok_or(libc::ENOENT)?;
        // Dropping the entry drops its waits: they leave the events'
        // queues.
        self.entries[slot] = None;
        self.free.push(slot);
        self.ready.retain(|&s| s != slot);
        Ok(())
    }

    fn add(&mut self, stack: Stack, source: Source, events: u32, data: u64) -> Result<(), i32> {
        if self.by_source.contains_key(&source) {
            return Err(libc::EEXIST);
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.entries.push(None);
            self.entries.len() - 1
        });
        let mark = Arc::new(Mark {
            hub: self.hub.clone(),
            slot,
            signalled: AtomicU32::new(0),
        });
        let events_of: Vec<(Event, u32)> = {
            let info = stack.borrow();
            match source {
                Source::Stream(r) => match info.tcbs.get(r) {
                    Some(t) => vec![
                        (t.readable.clone(), READABLE_SIGNALS),
                        (t.writable.clone(), WRITABLE_SIGNALS),
                    ],
                    None => vec![],
                },
                Source::Listener(local) => match info.listeners.get(&local) {
                    Some(l) => vec![(l.accept_event.clone(), ACCEPT_SIGNALS)],
                    None => vec![],
                },
            }
        };
        if events_of.is_empty() {
            self.free.push(slot);
            return Err(libc::EBADF);
        }
        let armed = events_of
            .into_iter()
            .map(|(event, signals)| Armed::new(event, &mark, signals))
            .collect();
        self.entries[slot] = Some(Entry {
            stack,
            source,
            events,
            data,
            mark,
            armed,
            queued: false,
            disabled: false,
        });
        self.by_source.insert(source, slot);
        self.queue_if_ready(slot);
        Ok(())
    }

    /// ADD and MOD look at the socket at once (Linux's ep_insert and
    /// ep_modify do): ready now, it is queued.
    fn queue_if_ready(&mut self, slot: usize) {
        let Some(e) = self.entries[slot].as_mut() else { return };
        self.looks.set(self.looks.get() + 1);
        if !e.queued && e.ready_events() != 0 {
            e.queued = true;
            self.ready.push_back(slot);
        }
    }

    /// Moves the sockets the wakers marked to the ready queue, re-arming
    /// their events.
    fn take_marks(&mut self) {
        // Swapped with a spare list, not taken: neither list is freed and
        // allocated again at every wait.
        let mut marked = std::mem::take(&mut self.spare_marks);
        std::mem::swap(
            &mut marked,
            &mut *self.hub.marked.lock().unwrap_or_else(|e| e.into_inner()),
        );
        for slot in marked.drain(..) {
            let Some(e) = self.entries.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            // A slot marked for an entry deleted since reads 0 here (the
            // new entry's mark is another).
            let signals = e.mark.signalled.swap(0, Ordering::Relaxed);
            if signals == 0 {
                continue;
            }
            for a in &mut e.armed {
                a.poll();
            }
            if !e.queued && e.wants(signals) {
                e.queued = true;
                self.ready.push_back(slot);
            }
        }
        self.spare_marks = marked;
    }

    /// epoll_wait without waiting: up to `max` ready sockets, each as
    /// (events, data); empty if none.
    pub fn try_wait(&mut self, max: usize) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        self.try_wait_into(max, &mut out);
        out
    }

    /// [`Epoll::try_wait`] into `out` (cleared first), so that a caller
    /// polling every round reuses one vector.
    pub fn try_wait_into(&mut self, max: usize, out: &mut Vec<(u32, u64)>) {
        out.clear();
        self.take_marks();
        // Each queued socket is looked at once per call: a level-triggered
        // one put back at the tail is for the next call.
        let mut to_look = self.ready.len();
        while to_look > 0 && out.len() < max {
            to_look -= 1;
            let Some(slot) = self.ready.pop_front() else { break };
            let Some(e) = self.entries[slot].as_mut() else { continue };
            e.queued = false;
            self.looks.set(self.looks.get() + 1);
            let events = e.ready_events();
            if events == 0 {
                continue;
            }
            out.push((events, e.data));
            if e.events & EPOLLONESHOT != 0 {
                e.disabled = true;
            } else if e.events & EPOLLET == 0 {
                e.queued = true;
                self.ready.push_back(slot);
            }
        }
    }

    /// epoll_wait: waits until at least one socket is ready and returns
    /// up to `max` (at least 1). For a timeout, wrap it in
    /// `crate::exec::timeout`.
    pub async fn wait(&mut self, max: usize) -> Vec<(u32, u64)> {
        let max = max.max(1);
        std::future::poll_fn(|cx| {
            let out = self.try_wait(max);
            if !out.is_empty() {
                return Poll::Ready(out);
            }
            // Nothing: the next mark wakes this task. No mark can come
            // between the look above and this (one thread).
            *self.hub.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}
