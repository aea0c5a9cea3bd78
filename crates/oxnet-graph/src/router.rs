//! A router: one graph instance, built from a flat configuration,
//! checked before anything runs, and run to completion on one core.
//!
//! Connections are resolved once (DESIGN.md): each push output is a
//! [`Target`], the receiving element's address, input port and context,
//! and an element pushing on output p calls it directly, depth first, as
//! Click does; a pull follows `inputs[me][p]`.
//!
//! Each element sits in a `RefCell`, so that an element can call its
//! neighbours while it runs. Whether a push must check that cell depends
//! on where the receiving element sits in the call graph (push
//! connections downstream, pull connections upstream):
//!
//! - **Not on a cycle** (every element of the usual graph, and of every
//!   benchmark configuration): no push or pull can reach it while it is
//!   already running, since the path back to it would close a cycle. A
//!   push to it is a direct call through its vtable with nothing to do
//!   after it, which the compiler makes a jump: a chain of N elements
//!   costs N jumps, as FastClick's `output(0).push_batch()` does. The one
//!   other way back into a running element is a handler call made by an
//!   element ([`Ctx::write_handler`], e.g. a Script on the data path);
//!   such a call is checked against the call graph instead
//!   (`Shared::handler_would_reenter`) and treated as a call into a busy
//!   element when it could reach a running one. Debug builds borrow every
//!   cell anyway and panic if the analysis was wrong.
//! - **On a cycle** (router.click's ICMP errors going back into the
//!   routing table, ARPQuerier's queries coming back through an
//!   ARPResponder, a Tee feeding itself): a push to it borrows its cell.
//!   A packet that would re-enter an element already on the call stack
//!   waits in a queue and is delivered as soon as that element returns,
//!   as if Click had called it recursively after its current work; beyond
//!   a bound (an endless cycle) such packets are dropped and counted.

use crate::args::Args;
use crate::element::{port_flow, Element, Flow, PortCount};
use crate::lang::{Flat, Pos};
use crate::timer::{TimerId, TimerWheel};
use oxnet_driver::{MemoryKind, Mempool, PacketBatch};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::ptr::NonNull;

/// Creates elements by class name.
pub trait Registry {
    fn create(&self, class: &str) -> Option<Box<dyn Element>>;
    fn is_class(&self, class: &str) -> bool {
        self.create(class).is_some()
    }
}

/// A build error, with the place in the configuration when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Link {
    element: usize,
    port: usize,
}

/// What elements reach through [`Ctx`].
pub struct Shared {
    elements: Vec<RefCell<Box<dyn Element>>>,
    names: Vec<String>,
    configs: Vec<String>,
    positions: Vec<Pos>,
    /// Per element, per output port, the input it pushes to, flat: element
    /// `e`'s output `p` is `push_links[push_start[e] + p]`, below
    /// `push_start[e + 1]`; one contiguous table for the hot path
    /// ([`Ctx::forward`]) and everything else ([`Shared::output`]).
    push_start: Box<[u32]>,
    push_links: Box<[PushLink]>,
    /// Per element, per input port: the output it pulls from.
    inputs: Vec<Vec<Option<Link>>>,
    /// The router has stopped for good.
    stopped: Cell<bool>,
    /// Stop requests from elements not yet handled (Click's "driver stop
    /// events").
    stop_requests: Cell<u32>,
    timers: RefCell<TimerWheel>,
    clock: Clock,
    /// Write handler calls on elements that were busy (on the call stack)
    /// when called: made as soon as the current step returns.
    deferred: RefCell<Vec<(String, String)>>,
    /// Per element: where the full-notifier walk from output 0 ends (the
    /// topology is fixed once built): 0 not yet known, `NO_ROOM` no
    /// queue, else element index + 1 and input port in the high bits.
    room_target: Vec<Cell<u64>>,
    /// Packets dropped because they would have re-entered an element.
    reentry_drops: Cell<u64>,
    /// Pushes that found their element busy, waiting for it to return.
    reentrant: RefCell<std::collections::VecDeque<(Link, PacketBatch)>>,
    /// `reentrant` is not empty: the one test a push makes after its call.
    reentrant_waiting: Cell<bool>,
    /// Re-entrant pushes delivered since the router's current step began
    /// (bounded by [`MAX_REENTRANT`]).
    reentrant_delivered: Cell<u64>,
    pool: Mempool,
    /// Some pushes are direct calls (module doc): handler calls are
    /// checked against the call graph.
    direct: bool,
    /// Elements on a cycle of the call graph (their pushes are checked).
    on_cycle: Vec<bool>,
    /// One of those cycles, element by element (empty if none).
    cycle: Vec<usize>,
    /// Per element: its push outputs' [`Target`]s (in the router's
    /// target table) and how many there are.
    out_ranges: Box<[(*const Target, usize)]>,
    /// The call graph: `calls[a]` holds every element `a` may call (push
    /// outputs, pull inputs); `called_by` the reverse.
    calls: Vec<Vec<u32>>,
    called_by: Vec<Vec<u32>>,
    /// Direct mode: the element the router called to start the current
    /// step (a task, a timer, a handler) and, for each handler call made
    /// from inside that step, the (start, caller) pair it was made from:
    /// every running element lies on a call path from a start to its
    /// caller.
    root: Cell<usize>,
    chains: RefCell<Vec<(usize, usize)>>,
}

/// A push output, resolved: where a push goes (Router::build).
struct Target {
    /// The receiving element, called directly (it is on no cycle of the
    /// call graph); None: through its `RefCell` (`Shared::checked_push`).
    direct: Option<NonNull<dyn Element>>,
    /// The receiver's context (direct only: it is not running, so this is
    /// the one reference to it).
    ctx: *mut Ctx<'static>,
    /// Receiving element and input port; element [`PushLink::NONE`] for
    /// an output that is not connected.
    element: u32,
    port: u32,
}

/// A slice the router owns through a raw pointer, so that pointers into
/// it (targets, contexts) stay valid however the router is moved or
/// borrowed.
struct RawSlice<T>(NonNull<[T]>);

impl<T> RawSlice<T> {
    fn new(v: Vec<T>) -> RawSlice<T> {
        RawSlice(NonNull::from(Box::leak(v.into_boxed_slice())))
    }
    fn base(&self) -> *mut T {
        self.0.as_ptr() as *mut T
    }
}

impl<T> Drop for RawSlice<T> {
    fn drop(&mut self) {
        // SAFETY: made by RawSlice::new from a boxed slice, freed once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A link of [`Shared::push_links`]: element and input port, `element`
/// [`PushLink::NONE`] for an output that is not connected.
#[derive(Debug, Clone, Copy)]
struct PushLink {
    element: u32,
    port: u32,
}

impl PushLink {
    const NONE: u32 = u32::MAX;
}

impl Shared {
    /// A context for element `e`.
    fn ctx(&self, e: usize) -> Ctx<'_> {
        let (outs, nouts) = self.out_ranges[e];
        Ctx {
            shared: self,
            me: e,
            outs,
            nouts,
        }
    }

    /// Output ports element `e` has.
    fn noutputs(&self, e: usize) -> usize {
        (self.push_start[e + 1] - self.push_start[e]) as usize
    }

    /// Where output `port` of element `e` pushes to (None: no such port,
    /// or not connected).
    fn output(&self, e: usize, port: usize) -> Option<Link> {
        if port >= self.noutputs(e) {
            return None;
        }
        let link = self.push_links[self.push_start[e] as usize + port];
        (link.element != PushLink::NONE).then_some(Link {
            element: link.element as usize,
            port: link.port as usize,
        })
    }

    /// `element.handler` → (element index, handler name).
    fn resolve<'s>(&self, spec: &'s str) -> Result<(usize, &'s str), String> {
        let (element, handler) = spec
            .split_once('.')
            .ok_or_else(|| format!("'{spec}' is not ELEMENT.HANDLER"))?;
        let index = self
            .names
            .iter()
            .position(|n| n == element)
            .ok_or_else(|| format!("no element named '{element}'"))?;
        Ok((index, handler))
    }

    /// The handlers every element has.
    fn generic_read(&self, index: usize, element: &dyn Element, handler: &str) -> Result<String, String> {
        match handler {
            "class" => Ok(element.class_name().to_string()),
            "name" => Ok(self.names[index].clone()),
            "config" => Ok(self.configs[index].clone()),
            "ports" => {
                let ins = self.inputs[index].len();
                let outs = self.noutputs(index);
                Ok(format!(
                    "{ins} input{}\n{outs} output{}\n",
                    if ins == 1 { "" } else { "s" },
                    if outs == 1 { "" } else { "s" }
                ))
            }
            "handlers" => {
                let mut out = String::new();
                for (name, r, w) in element.handlers() {
                    out += &format!("{name}\t{}{}\n", if *r { "r" } else { "" }, if *w { "w" } else { "" });
                }
                for name in ["class", "config", "handlers", "name", "ports"] {
                    out += &format!("{name}\tr\n");
                }
                Ok(out)
            }
            _ => Err(format!("no '{}.{handler}' handler", self.names[index])),
        }
    }
}

impl Shared {
    /// A push through the element's `RefCell` (a graph with a cycle, or an
    /// output that is not connected).
    #[inline(never)]
    fn checked_push(&self, element: u32, port: u32, batch: &mut PacketBatch) {
        if element == PushLink::NONE {
            return drop_batch(batch);
        }
        let link = Link {
            element: element as usize,
            port: port as usize,
        };
        match self.elements[link.element].try_borrow_mut() {
            Ok(mut receiver) => {
                let mut ctx = self.ctx(link.element);
                receiver.push(link.port, batch, &mut ctx);
                drop(receiver);
                if self.reentrant_waiting.get() {
                    self.deliver_reentrant();
                }
            }
            Err(_) => self.defer_push(link, std::mem::take(batch)),
        }
    }

    /// Elements reachable from `from` in the call graph (`forward`) or
    /// reaching it (`!forward`), `from` included.
    fn reach(&self, from: usize, forward: bool) -> Vec<bool> {
        let edges = if forward { &self.calls } else { &self.called_by };
        let mut seen = vec![false; edges.len()];
        let mut todo = vec![from];
        seen[from] = true;
        while let Some(e) = todo.pop() {
            for &next in &edges[e] {
                if !std::mem::replace(&mut seen[next as usize], true) {
                    todo.push(next as usize);
                }
            }
        }
        seen
    }

    /// Direct mode: whether a handler call from running element `me` into
    /// element `x` could reach an element that is running, `x` included.
    /// Every running element lies on a call path from a step's start to
    /// the element that made the next handler call (or `me`), so it is in
    /// the set below; the call is safe when `x` reaches none of it.
    fn handler_would_reenter(&self, x: usize, me: usize) -> bool {
        let from_x = self.reach(x, true);
        let chains = self.chains.borrow();
        let current = (self.root.get(), me);
        chains.iter().chain(std::iter::once(&current)).any(|&(start, caller)| {
            let after = self.reach(start, true);
            let before = self.reach(caller, false);
            (0..from_x.len()).any(|a| from_x[a] && after[a] && before[a])
        })
    }

    /// Starts a step at element `e` (a task, timer or handler call from
    /// outside the graph): nothing else runs.
    fn begin_step(&self, e: usize) {
        self.root.set(e);
        self.chains.borrow_mut().clear();
    }

    /// A handler call made by element `me` into `x` starts a new call
    /// path at `x` (direct mode's bookkeeping); returns what to restore.
    fn enter_handler(&self, x: usize, me: usize) -> usize {
        self.chains.borrow_mut().push((self.root.get(), me));
        self.root.replace(x)
    }

    fn leave_handler(&self, root: usize) {
        self.chains.borrow_mut().pop();
        self.root.set(root);
    }

    /// Element `x`, for a handler call from running element `me`; None if
    /// it is busy: running, or (direct mode) able to reach a running
    /// element.
    fn borrow_for_handler(&self, x: usize, me: usize) -> Option<std::cell::RefMut<'_, Box<dyn Element>>> {
        if self.direct && self.handler_would_reenter(x, me) {
            return None;
        }
        let borrowed = self.elements[x].try_borrow_mut().ok();
        // Direct mode: every borrowed element is running, and the check
        // above has ruled out every running element.
        debug_assert!(
            !self.direct || borrowed.is_some(),
            "handler call into a running element (the router's cycle analysis is wrong)"
        );
        borrowed
    }

    /// A push whose element is busy: kept until that element returns, up
    /// to [`MAX_REENTRANT`] per step, then dropped and counted.
    fn defer_push(&self, link: Link, batch: PacketBatch) {
        if self.reentrant_delivered.get() >= MAX_REENTRANT {
            self.reentry_drops.set(self.reentry_drops.get() + batch.len() as u64);
            return;
        }
        self.reentrant.borrow_mut().push_back((link, batch));
        self.reentrant_waiting.set(true);
    }

    /// Delivers the waiting re-entrant pushes whose element is free now,
    /// in the order they were made.
    #[cold]
    fn deliver_reentrant(&self) {
        loop {
            let next = {
                let mut waiting = self.reentrant.borrow_mut();
                self.reentrant_waiting.set(!waiting.is_empty());
                let Some(i) = waiting
                    .iter()
                    .position(|(link, _)| self.elements[link.element].try_borrow_mut().is_ok())
                else {
                    return;
                };
                waiting.remove(i)
            };
            let Some((link, batch)) = next else {
                return;
            };
            let Ok(mut element) = self.elements[link.element].try_borrow_mut() else {
                return;
            };
            self.reentrant_delivered.set(self.reentrant_delivered.get() + 1);
            let mut ctx = self.ctx(link.element);
            let mut batch = batch;
            element.push(link.port, &mut batch, &mut ctx);
        }
    }
}

/// Re-entrant pushes delivered per router step before the rest are
/// dropped (a push cycle without a queue would otherwise never end).
const MAX_REENTRANT: u64 = 1 << 16;

/// [`Shared::room_target`]: no queue on the path.
const NO_ROOM: u64 = u64::MAX;

/// Time for the router: real (microseconds since it started) or
/// simulated (Click's `--simtime`: it jumps to the next timer when no
/// task has work).
pub struct Clock {
    start: std::time::Instant,
    /// Simulated: the time now.
    simulated: Cell<Option<u64>>,
}

impl Clock {
    pub fn real() -> Clock {
        Clock {
            start: std::time::Instant::now(),
            simulated: Cell::new(None),
        }
    }

    pub fn simulated() -> Clock {
        Clock {
            start: std::time::Instant::now(),
            simulated: Cell::new(Some(0)),
        }
    }

    /// Microseconds since the start.
    pub fn now(&self) -> u64 {
        match self.simulated.get() {
            Some(t) => t,
            None => self.start.elapsed().as_micros() as u64,
        }
    }
}

/// An element's view of the router while it runs.
pub struct Ctx<'r> {
    shared: &'r Shared,
    me: usize,
    /// This element's push outputs: `nouts` [`Target`]s.
    outs: *const Target,
    nouts: usize,
}

impl Ctx<'_> {
    /// Pushes `batch` out of output `port` (dropped if the port is not
    /// connected, which the build check allows only for pull outputs).
    #[inline]
    pub fn push(&mut self, port: usize, batch: PacketBatch) {
        let mut batch = batch;
        self.forward(port, &mut batch);
        // Empty and without room unless the receiver left it something.
        batch.release();
    }

    /// Pushes the batch an element was given out of output `port`, in
    /// place: a batch passed on unchanged (Null) is not copied at every
    /// hop. The batch is the receiver's from then on: elements take it
    /// (`std::mem::take`) or forward it in turn, so `batch` is left empty
    /// (anything left in it is freed by its owner).
    #[inline(always)]
    pub fn forward(&mut self, port: usize, batch: &mut PacketBatch) {
        if batch.is_empty() {
            return;
        }
        if port >= self.nouts {
            return drop_batch(batch);
        }
        // SAFETY: `outs` points at this element's `nouts` targets in the
        // router's target table, which lives as long as the router.
        let target = unsafe { &*self.outs.add(port) };
        match target.direct {
            // SAFETY: a target is direct only if its element is on no
            // cycle of the call graph, so it is not running (nor is its
            // context in use) and this is the only reference to both
            // (module doc); both live as long as the router.
            #[cfg(not(debug_assertions))]
            Some(element) => unsafe { (*element.as_ptr()).push(target.port as usize, batch, &mut *target.ctx) },
            #[cfg(debug_assertions)]
            Some(_) => {
                let cell = &self.shared.elements[target.element as usize];
                let mut element = cell
                    .try_borrow_mut()
                    .expect("a direct push re-entered a running element (the router's cycle analysis is wrong)");
                // SAFETY: as above; the borrow checks it.
                element.push(target.port as usize, batch, unsafe { &mut *target.ctx });
            }
            None => self.shared.checked_push(target.element, target.port, batch),
        }
    }

    /// Pulls at most `max` packets from input `port`.
    #[inline]
    pub fn pull(&mut self, port: usize, max: usize) -> Option<PacketBatch> {
        let link = (*self.shared.inputs[self.me].get(port)?)?;
        let mut element = self.shared.elements[link.element].try_borrow_mut().ok()?;
        let mut ctx = self.shared.ctx(link.element);
        element.pull(link.port, max, &mut ctx)
    }

    /// Click's full notifier: how many packets the push path from output
    /// `port` can take before a queue on it drops. It follows elements
    /// with a single output (Null, Counter, ...) to the first element that
    /// knows its room ([`Element::room`]); None when the path forks, ends
    /// without a queue, or is busy (no limit known).
    pub fn downstream_room(&self, port: usize) -> Option<usize> {
        if port == 0 {
            let cached = self.shared.room_target[self.me].get();
            if cached == NO_ROOM {
                return None;
            }
            if cached != 0 {
                let (element, input) = ((cached & 0xffff_ffff) as usize - 1, (cached >> 32) as usize);
                return self.shared.elements[element].try_borrow().ok()?.room(input);
            }
            // Cached only when the walk saw every element (none busy).
            let found = self.walk_to_room(0).ok()?;
            self.shared.room_target[self.me].set(match found {
                Some(link) => (link.element as u64 + 1) | ((link.port as u64) << 32),
                None => NO_ROOM,
            });
            let link = found?;
            return self.shared.elements[link.element].try_borrow().ok()?.room(link.port);
        }
        let link = self.walk_to_room(port).ok()??;
        self.shared.elements[link.element].try_borrow().ok()?.room(link.port)
    }

    /// The first element on the push path from output `port` that knows
    /// its room, through single-output elements; Err if an element on the
    /// way is busy (nothing can be said).
    fn walk_to_room(&self, port: usize) -> Result<Option<Link>, ()> {
        let Some(mut link) = self.shared.output(self.me, port) else {
            return Ok(None);
        };
        for _ in 0..32 {
            let element = self.shared.elements[link.element].try_borrow().map_err(|_| ())?;
            if element.room(link.port).is_some() {
                return Ok(Some(link));
            }
            if self.shared.noutputs(link.element) != 1 {
                return Ok(None);
            }
            match self.shared.output(link.element, 0) {
                Some(next) => link = next,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Click's empty notifier: whether the pull path into input `port`
    /// has packets. It follows elements with a single input (PullNull,
    /// Shaper, ...) up to the first element that knows
    /// ([`Element::nonempty`]); None when the path forks, ends without
    /// such an element, or is busy (nothing known: pull to find out).
    pub fn upstream_nonempty(&self, port: usize) -> Option<bool> {
        let mut link = (*self.shared.inputs[self.me].get(port)?)?;
        for _ in 0..32 {
            let element = self.shared.elements[link.element].try_borrow().ok()?;
            if let Some(known) = element.nonempty(link.port) {
                return Some(known);
            }
            match self.shared.inputs[link.element].as_slice() {
                [Some(next)] => link = *next,
                _ => return None,
            }
        }
        None
    }

    /// Output ports in use.
    pub fn noutputs(&self) -> usize {
        self.shared.noutputs(self.me)
    }

    /// Input ports in use.
    pub fn ninputs(&self) -> usize {
        self.shared.inputs[self.me].len()
    }

    /// Asks the driver to stop (Click's `please_stop_driver()`): the
    /// router stops after this step unless a DriverManager or driver
    /// script takes the request.
    pub fn stop(&mut self) {
        self.shared.stop_requests.set(self.shared.stop_requests.get() + 1);
    }

    /// Stops the router for good (a driver script that ended).
    pub fn stop_now(&mut self) {
        self.shared.stopped.set(true);
    }

    /// Time since the router started, in microseconds (simulated with
    /// `--simtime`).
    pub fn now_us(&self) -> u64 {
        self.shared.clock.now()
    }

    /// Schedules a timer `us` microseconds from now; the element's
    /// [`Element::run_timer`] is called when it fires.
    pub fn schedule_after_us(&mut self, us: u64) -> TimerId {
        let at = self.shared.clock.now().saturating_add(us);
        self.shared.timers.borrow_mut().schedule(at, self.me)
    }

    /// Cancels a timer; false if it already fired.
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        self.shared.timers.borrow_mut().cancel(id)
    }

    /// Calls read handler `spec` (`element.handler`) with `params`.
    pub fn read_handler(&mut self, spec: &str, params: &str) -> Result<String, String> {
        let (index, handler) = self.shared.resolve(spec)?;
        if index == self.me {
            return Err(format!("'{spec}': an element cannot call its own handler this way"));
        }
        let Some(mut element) = self.shared.borrow_for_handler(index, self.me) else {
            return Err(format!("'{spec}': the element is busy (a handler cycle)"));
        };
        let mut ctx = self.shared.ctx(index);
        let root = self.shared.enter_handler(index, self.me);
        let result = match element.read_handler_with(handler, params, &mut ctx) {
            Some(r) => r,
            None => self.shared.generic_read(index, &**element, handler),
        };
        self.shared.leave_handler(root);
        result
    }

    /// Calls write handler `spec` (`element.handler`) with `value`. If
    /// that element is on the call stack (it pushed the packet being
    /// handled), the call is made as soon as the current step returns.
    pub fn write_handler(&mut self, spec: &str, value: &str) -> Result<(), String> {
        let (index, handler) = self.shared.resolve(spec)?;
        if index == self.me {
            return Err(format!("'{spec}': an element cannot call its own handler this way"));
        }
        let Some(mut element) = self.shared.borrow_for_handler(index, self.me) else {
            self.shared
                .deferred
                .borrow_mut()
                .push((spec.to_string(), value.to_string()));
            return Ok(());
        };
        let mut ctx = self.shared.ctx(index);
        let root = self.shared.enter_handler(index, self.me);
        let result = match element.write_handler(handler, value, &mut ctx) {
            Some(r) => r,
            None => Err(format!("no '{spec}' write handler")),
        };
        self.shared.leave_handler(root);
        result
    }

    /// The router's packet pool (plain memory), for sources and copies.
    pub fn pool(&self) -> &Mempool {
        &self.shared.pool
    }

    /// Every element's name, in configuration order.
    pub fn element_names(&self) -> &[String] {
        &self.shared.names
    }

    /// This element's name.
    pub fn name(&self) -> &str {
        &self.shared.names[self.me]
    }
}

/// Set by the global `stop` handler of a control socket: every graph
/// thread of the process stops (`oxnet run -j` checks it with the
/// signals).
pub static STOP_ALL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Packets in the router's own pool (sources, copies).
pub const POOL_SIZE: usize = 8192;

/// A built router.
pub struct Router {
    // Dropped in this order: the contexts and targets refer to `shared`.
    _ctxs: RawSlice<UnsafeCell<Ctx<'static>>>,
    _targets: RawSlice<Target>,
    shared: Box<Shared>,
    tasks: Vec<usize>,
    started: bool,
    idle: IdleWait,
}

/// How an idle router waits in real time ([`Router::run`]): it polls on
/// for `spin_us`, then, if every task said how it gets work again
/// ([`Element::idle_wake`]), sleeps in `ppoll(2)` on the device queues'
/// descriptors until one is readable or the next timer is due; otherwise
/// it sleeps at most 50 µs at a time and polls again.
struct IdleWait {
    /// The descriptors to sleep on; `None` until asked, `Some(None)` when
    /// some task cannot say.
    fds: Option<Option<Vec<libc::pollfd>>>,
    spin_us: u64,
    /// When the current run of idle rounds began.
    since: Option<u64>,
}

/// The longest sleep of an idle router, so that `should_stop` (a signal,
/// another thread's stop) is seen within it.
const MAX_IDLE_SLEEP_US: u64 = 5_000;

impl Router {
    /// Builds a router from a flat configuration: creates and configures
    /// every element, checks ports and push/pull (Click's rules), and
    /// resolves every connection to an index.
    pub fn build(flat: &Flat, registry: &dyn Registry) -> Result<Router, BuildError> {
        let n = flat.elements.len();
        let mut created: Vec<Option<Box<dyn Element>>> = Vec::with_capacity(n);
        let mut errors = Vec::new();
        for e in &flat.elements {
            let Some(element) = registry.create(&e.class) else {
                return Err(BuildError(format!("{}: unknown element class '{}'", e.pos, e.class)));
            };
            created.push(Some(element));
        }
        // Configure in Click's phases: AddressInfo and PortInfo first
        // (their names are arguments of the others), then the rest in
        // order.
        crate::args::clear_addresses();
        crate::args::begin_router();
        let named = |i: usize| matches!(flat.elements[i].class.as_str(), "AddressInfo" | "PortInfo");
        let first: Vec<usize> = (0..n).filter(|&i| named(i)).collect();
        let rest = (0..n).filter(|&i| !named(i));
        for i in first.iter().copied().chain(rest) {
            let e = &flat.elements[i];
            let element = created[i].as_mut().expect("created above");
            // AddressInfo and PortInfo names are local to compounds.
            crate::args::set_scope(&e.name);
            let mut args = Args::new(&e.config);
            if let Err(msg) = element.configure(&mut args).and_then(|()| args.complete()) {
                errors.push(format!(
                    "{}: While configuring '{} :: {}': {msg}",
                    e.pos, e.name, e.class
                ));
            }
        }
        // Names used at run time (handler writes) are looked up from the top.
        crate::args::set_scope("");
        let mut elements: Vec<Box<dyn Element>> = created.into_iter().map(|e| e.expect("created above")).collect();
        // Ports used: one more than the highest connected.
        let mut ninputs = vec![0usize; n];
        let mut noutputs = vec![0usize; n];
        for &(a, p, b, q) in &flat.connections {
            noutputs[a] = noutputs[a].max(p as usize + 1);
            ninputs[b] = ninputs[b].max(q as usize + 1);
        }
        let describe = |i: usize| format!("'{} :: {}'", flat.elements[i].name, flat.elements[i].class);
        for (i, element) in elements.iter().enumerate() {
            let Some(count) = PortCount::parse(element.port_count()) else {
                errors.push(format!(
                    "{}: {} has a malformed port count (a bug in its element)",
                    flat.elements[i].pos,
                    describe(i)
                ));
                continue;
            };
            let (lo, hi) = count.inputs;
            if ninputs[i] > hi {
                errors.push(format!(
                    "{}: {} has no input {} (it has {})",
                    flat.elements[i].pos,
                    describe(i),
                    ninputs[i] - 1,
                    count_text(lo, hi)
                ));
            }
            let (olo, ohi) = count.outputs.unwrap_or((ninputs[i], ninputs[i]));
            if noutputs[i] > ohi {
                errors.push(format!(
                    "{}: {} has no output {} (it has {})",
                    flat.elements[i].pos,
                    describe(i),
                    noutputs[i] - 1,
                    count_text(olo, ohi)
                ));
            }
            // Too few used: the unused ports still exist (and must be
            // connected if push outputs / pull inputs, checked below).
            ninputs[i] = ninputs[i].max(lo);
            noutputs[i] = noutputs[i].max(olo);
        }
        // Every port's flow, agnostic ones resolved through connections:
        // an element's agnostic ports all take one flow, as Click's
        // default flow code says (every input reaches every output).
        let mut in_flow: Vec<Vec<Flow>> = (0..n)
            .map(|i| {
                (0..ninputs[i])
                    .map(|p| port_flow(elements[i].processing(), false, p))
                    .collect()
            })
            .collect();
        let mut out_flow: Vec<Vec<Flow>> = (0..n)
            .map(|i| {
                (0..noutputs[i])
                    .map(|p| port_flow(elements[i].processing(), true, p))
                    .collect()
            })
            .collect();
        loop {
            let mut changed = false;
            for &(a, p, b, q) in &flat.connections {
                let (from, to) = (out_flow[a][p as usize], in_flow[b][q as usize]);
                // The agnostic side takes the other side's flow, and so
                // do all the agnostic ports of its element.
                let (element, flow) = match (from, to) {
                    (Flow::Agnostic, Flow::Agnostic) => continue,
                    (Flow::Agnostic, f) => (a, f),
                    (f, Flow::Agnostic) => (b, f),
                    _ => continue,
                };
                for port in in_flow[element].iter_mut().chain(out_flow[element].iter_mut()) {
                    if *port == Flow::Agnostic {
                        *port = flow;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for flows in in_flow.iter_mut().chain(out_flow.iter_mut()) {
            for f in flows.iter_mut() {
                if *f == Flow::Agnostic {
                    *f = Flow::Push;
                }
            }
        }
        let mut outputs: Vec<Vec<Option<Link>>> = (0..n).map(|i| vec![None; noutputs[i]]).collect();
        let mut inputs: Vec<Vec<Option<Link>>> = (0..n).map(|i| vec![None; ninputs[i]]).collect();
        for &(a, p, b, q) in &flat.connections {
            let (p, q) = (p as usize, q as usize);
            let (from, to) = (out_flow[a][p], in_flow[b][q]);
            if from != to {
                errors.push(format!(
                    "{}: {} {} output {p} is connected to {} {} input {q}{}",
                    flat.elements[a].pos,
                    describe(a),
                    flow_name(from),
                    describe(b),
                    flow_name(to),
                    if from == Flow::Push {
                        " (a queue between them converts push to pull)"
                    } else {
                        ""
                    }
                ));
                continue;
            }
            if from == Flow::Push {
                if let Some(other) = outputs[a][p] {
                    errors.push(format!(
                        "{}: {} push output {p} is connected more than once (to {} and {}; use a Tee to copy)",
                        flat.elements[a].pos,
                        describe(a),
                        describe(other.element),
                        describe(b)
                    ));
                }
                outputs[a][p] = Some(Link { element: b, port: q });
            } else {
                if let Some(other) = inputs[b][q] {
                    errors.push(format!(
                        "{}: {} pull input {q} is connected more than once (to {} and {})",
                        flat.elements[b].pos,
                        describe(b),
                        describe(other.element),
                        describe(a)
                    ));
                }
                inputs[b][q] = Some(Link { element: a, port: p });
            }
        }
        for i in 0..n {
            for p in 0..noutputs[i] {
                if out_flow[i][p] == Flow::Push && outputs[i][p].is_none() {
                    errors.push(format!(
                        "{}: {} push output {p} is not connected",
                        flat.elements[i].pos,
                        describe(i)
                    ));
                }
            }
            for q in 0..ninputs[i] {
                if in_flow[i][q] == Flow::Pull && inputs[i][q].is_none() {
                    errors.push(format!(
                        "{}: {} pull input {q} is not connected",
                        flat.elements[i].pos,
                        describe(i)
                    ));
                }
            }
        }
        // Initialize only a configuration that is right so far (Click's
        // order): an element that opens a device or a file does not do it
        // for a router that will not run.
        if !errors.is_empty() {
            return Err(BuildError(errors.join("\n")));
        }
        for (i, element) in elements.iter_mut().enumerate() {
            let ports = crate::element::Ports {
                input_pull: in_flow[i].iter().map(|f| *f == Flow::Pull).collect(),
                output_pull: out_flow[i].iter().map(|f| *f == Flow::Pull).collect(),
            };
            if let Err(msg) = element.initialize(&ports) {
                errors.push(format!(
                    "{}: While initializing {}: {msg}",
                    flat.elements[i].pos,
                    describe(i)
                ));
            }
        }
        if !errors.is_empty() {
            return Err(BuildError(errors.join("\n")));
        }
        let pool = Mempool::new("router", POOL_SIZE, MemoryKind::Plain)
            .map_err(|e| BuildError(format!("router packet pool: {e}")))?;
        let tasks = (0..n).filter(|&i| elements[i].has_task()).collect();
        if n >= PushLink::NONE as usize {
            return Err(BuildError("too many elements".into()));
        }
        let mut push_start = Vec::with_capacity(n + 1);
        let mut push_links = Vec::new();
        for outs in &outputs {
            push_start.push(u32::try_from(push_links.len()).map_err(|_| BuildError("too many connections".into()))?);
            push_links.extend(outs.iter().map(|link| match link {
                Some(l) => PushLink {
                    element: l.element as u32,
                    port: l.port as u32,
                },
                None => PushLink {
                    element: PushLink::NONE,
                    port: 0,
                },
            }));
        }
        push_start.push(u32::try_from(push_links.len()).map_err(|_| BuildError("too many connections".into()))?);
        // The call graph: a push connection a -> b lets a call b, a pull
        // connection a -> b lets b call a.
        let mut calls = vec![Vec::new(); n];
        let mut called_by = vec![Vec::new(); n];
        for (a, outs) in outputs.iter().enumerate() {
            for link in outs.iter().flatten() {
                calls[a].push(link.element as u32);
                called_by[link.element].push(a as u32);
            }
        }
        for (b, ins) in inputs.iter().enumerate() {
            for link in ins.iter().flatten() {
                calls[b].push(link.element as u32);
                called_by[link.element].push(b as u32);
            }
        }
        let on_cycle = on_cycles(&calls, &called_by);
        let cycle = find_cycle(&calls).unwrap_or_default();
        let direct = on_cycle.iter().any(|c| !c);
        // The targets, one per push output, in `push_links` order.
        let targets = RawSlice::new(
            push_links
                .iter()
                .map(|link| Target {
                    direct: None,
                    ctx: std::ptr::null_mut(),
                    element: link.element,
                    port: link.port,
                })
                .collect(),
        );
        let out_ranges = (0..n)
            .map(|e| {
                // SAFETY: push_start[e] <= push_links.len(), the table's length.
                let outs = unsafe { targets.base().add(push_start[e] as usize) } as *const Target;
                (outs, (push_start[e + 1] - push_start[e]) as usize)
            })
            .collect();
        let shared = Box::new(Shared {
            elements: elements.into_iter().map(RefCell::new).collect(),
            names: flat.elements.iter().map(|e| e.name.clone()).collect(),
            configs: flat.elements.iter().map(|e| e.config.clone()).collect(),
            positions: flat.elements.iter().map(|e| e.pos.clone()).collect(),
            push_start: push_start.into_boxed_slice(),
            push_links: push_links.into_boxed_slice(),
            inputs,
            stopped: Cell::new(false),
            stop_requests: Cell::new(0),
            timers: RefCell::new(TimerWheel::new(0)),
            clock: Clock::real(),
            deferred: RefCell::new(Vec::new()),
            room_target: (0..n).map(|_| Cell::new(0)).collect(),
            reentry_drops: Cell::new(0),
            reentrant: RefCell::new(std::collections::VecDeque::new()),
            reentrant_waiting: Cell::new(false),
            reentrant_delivered: Cell::new(0),
            pool,
            direct,
            on_cycle,
            cycle,
            out_ranges,
            calls,
            called_by,
            root: Cell::new(0),
            chains: RefCell::new(Vec::new()),
        });
        // One context per element, for direct pushes.
        // SAFETY: the contexts refer to the boxed Shared, which the router
        // owns and never moves, mutably borrows or frees before them
        // (field order below); the lifetime is the router's.
        let shared_ref: &'static Shared = unsafe { &*(&*shared as *const Shared) };
        let ctxs = RawSlice::new((0..n).map(|e| UnsafeCell::new(shared_ref.ctx(e))).collect());
        {
            for i in 0..shared.push_links.len() {
                // SAFETY: i < the table's length; nothing else refers to
                // the targets yet.
                let target = unsafe { &mut *targets.base().add(i) };
                if target.element == PushLink::NONE || shared.on_cycle[target.element as usize] {
                    continue;
                }
                let e = target.element as usize;
                // SAFETY: the element is boxed in the router's cell for
                // the router's life; nothing borrows it while building.
                target.direct = Some(NonNull::from(unsafe { &mut **shared.elements[e].as_ptr() }));
                // SAFETY: e < n, the contexts' length.
                target.ctx = unsafe { (*ctxs.base().add(e)).get() };
            }
        }
        Ok(Router {
            shared,
            _ctxs: ctxs,
            _targets: targets,
            tasks,
            idle: IdleWait {
                fds: None,
                spin_us: 20,
                since: None,
            },
            started: false,
        })
    }

    /// Uses a simulated clock (Click's `--simtime`); call before running.
    pub fn use_simulated_time(&mut self) {
        self.shared.clock.simulated.set(Some(0));
    }

    /// With a simulated clock: moves it forward to `us` (never back), for
    /// a test that steps time itself (the stack's script tests); the
    /// timers due by then fire in the next rounds.
    pub fn advance_simulated_time(&mut self, us: u64) {
        let clock = &self.shared.clock.simulated;
        if let Some(now) = clock.get() {
            clock.set(Some(now.max(us)));
        }
    }

    /// The router's time, microseconds since it started (simulated or
    /// real).
    pub fn now_us(&self) -> u64 {
        self.shared.clock.now()
    }

    /// When the earliest timer is due (microseconds, the clock of
    /// [`Router::now_us`]), if any: for a caller that runs rounds itself
    /// (`run_once`) and, idle, moves simulated time on or sleeps, as
    /// [`Router::run`] does.
    pub fn next_timer_us(&self) -> Option<u64> {
        self.shared.timers.borrow().next_expiry()
    }

    fn call(&self, index: usize, f: &mut dyn FnMut(&mut dyn Element, &mut Ctx<'_>)) {
        self.shared.reentrant_delivered.set(0);
        self.shared.begin_step(index);
        if let Ok(mut element) = self.shared.elements[index].try_borrow_mut() {
            let mut ctx = self.shared.ctx(index);
            f(&mut **element, &mut ctx);
        }
        if self.shared.reentrant_waiting.get() {
            self.shared.deliver_reentrant();
        }
        self.run_deferred();
    }

    /// Makes the write calls deferred because their element was busy.
    fn run_deferred(&self) {
        for _ in 0..16 {
            let calls = std::mem::take(&mut *self.shared.deferred.borrow_mut());
            if calls.is_empty() {
                return;
            }
            for (spec, value) in calls {
                let Ok((index, handler)) = self.shared.resolve(&spec) else {
                    continue;
                };
                self.shared.begin_step(index);
                if let Ok(mut element) = self.shared.elements[index].try_borrow_mut() {
                    let mut ctx = self.shared.ctx(index);
                    if let Some(Err(e)) = element.write_handler(handler, &value, &mut ctx) {
                        eprintln!("{spec}: {e}");
                    }
                }
            }
        }
    }

    /// Calls every element's `start` once.
    fn start(&mut self) {
        if !self.started {
            self.started = true;
            for i in 0..self.shared.elements.len() {
                self.call(i, &mut |e, ctx| e.start(ctx));
            }
        }
    }

    /// Hands pending stop requests to the elements that take them; if
    /// none takes one, the router stops. Returns whether an element took
    /// one (a driver script moved on: its writes may have given tasks
    /// work, so the round counts as busy and simulated time does not
    /// jump past that work, as in Click, where time warps only while no
    /// task is scheduled).
    fn handle_stop_requests(&mut self) -> bool {
        let mut handled = false;
        while self.shared.stop_requests.get() > 0 && !self.shared.stopped.get() {
            self.shared.stop_requests.set(self.shared.stop_requests.get() - 1);
            let mut taken = false;
            for i in 0..self.shared.elements.len() {
                self.call(i, &mut |e, ctx| taken = taken || e.driver_stop(ctx));
                if taken {
                    break;
                }
            }
            if !taken {
                self.shared.stopped.set(true);
            }
            handled |= taken;
        }
        handled
    }

    /// Fires the timers that are due; returns how many fired.
    fn run_timers(&mut self) -> usize {
        // No timer: no clock read (a round of a busy data path pays nothing).
        if self.shared.timers.borrow().is_empty() {
            return 0;
        }
        let now = self.shared.clock.now();
        let mut fired = Vec::new();
        self.shared
            .timers
            .borrow_mut()
            .advance(now, &mut |id, owner, _| fired.push((id, owner)));
        for &(id, owner) in &fired {
            self.call(owner, &mut |e, ctx| e.run_timer(id, ctx));
        }
        fired.len()
    }

    /// One round: stop requests, due timers, every task once. Returns
    /// whether anything happened.
    pub fn run_once(&mut self) -> bool {
        self.start();
        let mut worked = self.handle_stop_requests();
        worked |= self.run_timers() > 0;
        for i in 0..self.tasks.len() {
            if self.shared.stopped.get() {
                break;
            }
            let t = self.tasks[i];
            let mut did = false;
            self.call(t, &mut |e, ctx| did = e.run_task(ctx));
            worked |= did;
        }
        worked |= self.handle_stop_requests();
        worked
    }

    /// Runs until the router stops, or `should_stop` says so (checked
    /// every 1024 busy rounds and on every idle round). With a simulated
    /// clock, an idle round jumps to the next timer; with nothing left to
    /// happen at all, the router stops.
    pub fn run(&mut self, should_stop: &dyn Fn() -> bool) {
        let mut rounds = 0u32;
        while !self.shared.stopped.get() {
            let worked = self.run_once();
            rounds = rounds.wrapping_add(1);
            if worked {
                self.idle.since = None;
                if rounds.is_multiple_of(1024) && should_stop() {
                    break;
                }
                continue;
            }
            if should_stop() {
                break;
            }
            let next = self.shared.timers.borrow().next_expiry();
            let clock = &self.shared.clock.simulated;
            match (clock.get(), next) {
                (Some(t), Some(at)) => clock.set(Some(at.max(t))),
                (Some(_), None) => {
                    // Simulated time, no timer, no task with work: nothing
                    // can ever happen again.
                    if self.shared.stop_requests.get() == 0 {
                        self.shared.stopped.set(true);
                    }
                }
                (None, next) => {
                    let now = self.shared.clock.now();
                    let since = *self.idle.since.get_or_insert(now);
                    if now.saturating_sub(since) < self.idle.spin_us {
                        std::hint::spin_loop();
                        continue;
                    }
                    let wait = next
                        .map_or(MAX_IDLE_SLEEP_US, |at| at.saturating_sub(now))
                        .min(MAX_IDLE_SLEEP_US);
                    if wait == 0 {
                        continue;
                    }
                    if !self.sleep_on_descriptors(wait) {
                        std::thread::sleep(std::time::Duration::from_micros(wait.min(50)));
                    }
                }
            }
        }
    }

    /// How long an idle router polls before it sleeps (default 20 µs;
    /// `u64::MAX`: it never sleeps, as a DPDK poll loop).
    pub fn set_idle_spin_us(&mut self, us: u64) {
        self.idle.spin_us = us;
    }

    /// Sleeps up to `wait_us` in `ppoll(2)` on the descriptors the tasks
    /// named ([`Element::idle_wake`]); false (without sleeping) if some
    /// task could not say how it gets work. For a caller that runs the
    /// router round by round ([`Router::run_once`]) and knows it is idle.
    pub fn sleep_on_descriptors(&mut self, wait_us: u64) -> bool {
        if self.idle.fds.is_none() {
            let mut fds = Vec::new();
            let mut known = true;
            for &t in &self.tasks {
                match self.shared.elements[t].try_borrow() {
                    Ok(e) => known &= e.idle_wake(&mut fds),
                    Err(_) => known = false,
                }
            }
            let polls = fds.into_iter().map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            self.idle.fds = Some(known.then(|| polls.collect()));
        }
        let Some(Some(fds)) = &mut self.idle.fds else {
            return false;
        };
        let timeout = libc::timespec {
            tv_sec: (wait_us / 1_000_000) as libc::time_t,
            tv_nsec: ((wait_us % 1_000_000) * 1000) as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of its length; a null signal
        // mask leaves the thread's mask as it is. An error (EINTR: a
        // signal) only ends the sleep early.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &timeout, std::ptr::null()) };
        true
    }

    /// Whether an element asked the router to stop.
    pub fn stopped(&self) -> bool {
        self.shared.stopped.get()
    }

    /// Element index by name.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.shared.names.iter().position(|n| n == name)
    }

    /// Element names in configuration order.
    pub fn names(&self) -> &[String] {
        &self.shared.names
    }

    /// Reads `handler` of element `index`: the element's own handlers,
    /// then the ones every element has (`class`, `name`, `config`,
    /// `ports`, `handlers`).
    pub fn read_handler(&self, index: usize, handler: &str) -> Result<String, String> {
        self.shared.begin_step(index);
        let mut element = self.shared.elements[index]
            .try_borrow_mut()
            .map_err(|_| "element busy".to_string())?;
        let mut ctx = self.shared.ctx(index);
        if let Some(v) = element.read_handler_with(handler, "", &mut ctx) {
            return v;
        }
        self.shared.generic_read(index, &**element, handler)
    }

    /// Writes `handler` of element `index`.
    pub fn write_handler(&mut self, index: usize, handler: &str, value: &str) -> Result<(), String> {
        self.shared.begin_step(index);
        let result = {
            let mut element = self.shared.elements[index]
                .try_borrow_mut()
                .map_err(|_| "element busy".to_string())?;
            let mut ctx = self.shared.ctx(index);
            match element.write_handler(handler, value, &mut ctx) {
                Some(result) => result,
                None => Err(format!("no '{}.{handler}' write handler", self.shared.names[index])),
            }
        };
        self.run_deferred();
        result
    }

    /// Where element `index` was declared.
    pub fn position(&self, index: usize) -> &Pos {
        &self.shared.positions[index]
    }

    /// Whether every push is a direct call (no element is on a cycle of
    /// the call graph; the module doc says what that means).
    pub fn direct_pushes(&self) -> bool {
        self.shared.cycle.is_empty()
    }

    /// The elements pushes to which are checked (on a cycle of the call
    /// graph), by name.
    pub fn checked_elements(&self) -> Vec<&str> {
        (0..self.shared.names.len())
            .filter(|&e| self.shared.on_cycle[e])
            .map(|e| self.shared.names[e].as_str())
            .collect()
    }

    /// A cycle of the call graph, if there is one, as element names, each
    /// calling the next and the last the first (a push downstream or a
    /// pull upstream).
    pub fn call_cycle(&self) -> Vec<&str> {
        self.shared
            .cycle
            .iter()
            .map(|&e| self.shared.names[e].as_str())
            .collect()
    }

    /// Packets dropped because they would have re-entered an element.
    pub fn reentry_drops(&self) -> u64 {
        self.shared.reentry_drops.get()
    }
}

/// Frees what is in `batch` (a push to an output that does not exist),
/// out of line so that a push needs no stack frame of its own.
#[cold]
#[inline(never)]
fn drop_batch(batch: &mut PacketBatch) {
    drop(std::mem::take(batch));
}

/// Which nodes of a directed graph (adjacency lists both ways) lie on a
/// cycle: those from which a predecessor can be reached.
fn on_cycles(edges: &[Vec<u32>], reverse: &[Vec<u32>]) -> Vec<bool> {
    let n = edges.len();
    (0..n)
        .map(|v| {
            let mut seen = vec![false; n];
            let mut todo: Vec<usize> = edges[v].iter().map(|&w| w as usize).collect();
            while let Some(e) = todo.pop() {
                if !std::mem::replace(&mut seen[e], true) {
                    todo.extend(edges[e].iter().map(|&w| w as usize));
                }
            }
            seen[v] || reverse[v].iter().any(|&u| seen[u as usize])
        })
        .collect()
}

/// A cycle of a directed graph (adjacency lists), as the nodes along it,
/// if it has one. Kahn's algorithm removes every node without incoming
/// edges until none is left; each node that remains has a predecessor
/// that remains, so walking back through those must come round.
fn find_cycle(edges: &[Vec<u32>]) -> Option<Vec<usize>> {
    let mut incoming = vec![0usize; edges.len()];
    for next in edges.iter().flatten() {
        incoming[*next as usize] += 1;
    }
    let mut free: Vec<usize> = (0..edges.len()).filter(|&e| incoming[e] == 0).collect();
    let mut removed = vec![false; edges.len()];
    while let Some(e) = free.pop() {
        removed[e] = true;
        for &next in &edges[e] {
            incoming[next as usize] -= 1;
            if incoming[next as usize] == 0 {
                free.push(next as usize);
            }
        }
    }
    let start = removed.iter().position(|r| !r)?;
    let mut before = vec![usize::MAX; edges.len()];
    for (a, nexts) in edges.iter().enumerate() {
        for &b in nexts {
            if !removed[a] && !removed[b as usize] {
                before[b as usize] = a;
            }
        }
    }
    let mut seen = vec![false; edges.len()];
    let mut node = start;
    while !seen[node] {
        seen[node] = true;
        node = before[node];
    }
    let mut cycle = vec![node];
    let mut back = before[node];
    while back != node {
        cycle.push(back);
        back = before[back];
    }
    cycle.reverse();
    Some(cycle)
}

fn flow_name(f: Flow) -> &'static str {
    match f {
        Flow::Push => "push",
        Flow::Pull => "pull",
        Flow::Agnostic => "agnostic",
    }
}

fn count_text(lo: usize, hi: usize) -> String {
    if hi == usize::MAX {
        format!("{lo} or more")
    } else if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo} to {hi}")
    }
}

#[cfg(test)]
mod tests {
    fn run(config: &str) -> super::Router {
        let mut r = crate::build("t.click", config, &[]).unwrap();
        r.use_simulated_time();
        r.run(&|| false);
        r
    }

    #[test]
    fn a_push_back_into_a_busy_element_is_delivered_once_it_returns() {
        // Tee's copy goes round through Null into the Tee again: each
        // round trip is delivered after the Tee returns, until the
        // per-step bound drops the rest; the router does not hang.
        let r = run("InfiniteSource(LIMIT 1, STOP true) -> t :: Tee; t[0] -> Null -> t; t[1] -> d :: Discard");
        let d = r.read_handler(r.find("d").unwrap(), "count").unwrap();
        let delivered: u64 = d.parse().unwrap();
        assert_eq!(delivered, super::MAX_REENTRANT + 1);
        assert_eq!(r.reentry_drops(), 1);
    }

    #[test]
    fn pushes_are_checked_exactly_into_elements_on_a_call_cycle() {
        let build = |config: &str| crate::build("t.click", config, &[]).unwrap();
        assert!(build("InfiniteSource(LIMIT 1) -> Null -> Discard").direct_pushes());
        // Pull connections count upstream: a queue and its puller.
        assert!(build("InfiniteSource(LIMIT 1) -> Queue -> Unqueue -> Discard").direct_pushes());
        let r = build("InfiniteSource(LIMIT 1) -> t :: Tee; t[0] -> n :: Null -> t; t[1] -> d :: Discard");
        assert!(!r.direct_pushes());
        assert_eq!(r.checked_elements(), ["t", "n"]);
        let r = build("Idle -> Discard; n :: Null; n -> n");
        assert_eq!(r.checked_elements(), ["n"]);
        assert_eq!(r.call_cycle(), ["n"]);
        let r = build("InfiniteSource(LIMIT 1) -> a :: Null -> t :: Tee; t[0] -> b :: Null -> a; t[1] -> Discard");
        let cycle = r.call_cycle();
        assert_eq!(cycle.len(), 3, "{cycle:?}");
        let at = cycle.iter().position(|&n| n == "a").unwrap();
        let from_a: Vec<_> = cycle.iter().cycle().skip(at).take(3).copied().collect();
        assert_eq!(from_a, ["a", "t", "b"]);
    }

    /// Probe: on every push, reads `c.count` and `free.count` and writes
    /// `c.reset`, and keeps what the reads returned.
    /// What the probe's two reads returned, push by push.
    type Seen = std::rc::Rc<std::cell::RefCell<Vec<(Result<String, String>, Result<String, String>)>>>;

    struct Probe(Seen);

    impl crate::Element for Probe {
        fn class_name(&self) -> &'static str {
            "Probe"
        }
        fn push(&mut self, _port: usize, batch: &mut oxnet_driver::PacketBatch, ctx: &mut super::Ctx<'_>) {
            let running = ctx.read_handler("c.count", "");
            let free = ctx.read_handler("free.count", "");
            self.0.borrow_mut().push((running, free));
            ctx.write_handler("c.reset", "").unwrap();
            ctx.forward(0, batch);
        }
    }

    struct WithProbe(Seen);

    impl super::Registry for WithProbe {
        fn create(&self, class: &str) -> Option<Box<dyn crate::Element>> {
            if class == "Probe" {
                return Some(Box::new(Probe(self.0.clone())));
            }
            super::Registry::create(&crate::elements::Standard, class)
        }
    }

    #[test]
    fn a_handler_call_into_a_running_element_waits_and_one_into_a_free_element_is_made() {
        // Direct (no cycle) and checked (the path is on a cycle that no
        // packet takes): the same answers. `c` pushed the packet the probe has, so it is running:
        // the read is refused and the reset waits until the step ends (so
        // c counts 1 at each probe, then 0); `free` is not running.
        for (before, after, direct) in [
            ("p :: Null -> d :: Discard;", "", true),
            ("p :: Switch(0); p[0] -> d :: Discard;", "p[1] -> c;", false),
        ] {
            let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let registry = WithProbe(seen.clone());
            let text = format!(
                "{before} InfiniteSource(LIMIT 3, STOP true) -> c :: Counter -> Probe -> p; \
                 Idle -> free :: Counter -> Discard; {after}"
            );
            let flat = crate::lang::compile("t.click", &text, &[], &|c: &str| {
                c == "Probe" || super::Registry::is_class(&crate::elements::Standard, c)
            })
            .unwrap();
            let mut r = super::Router::build(&flat, &registry).unwrap();
            assert_eq!(r.direct_pushes(), direct);
            r.use_simulated_time();
            r.run(&|| false);
            let seen = seen.borrow();
            assert_eq!(seen.len(), 3, "{before}");
            for (running, free) in seen.iter() {
                assert!(
                    running.as_ref().is_err_and(|e| e.contains("busy")),
                    "{before}: {running:?}"
                );
                assert_eq!(free.as_deref(), Ok("0"), "{before}");
            }
            assert_eq!(r.read_handler(r.find("c").unwrap(), "count").unwrap(), "0");
            assert_eq!(r.read_handler(r.find("d").unwrap(), "count").unwrap(), "3");
        }
    }

    /// A task that waits on a pipe: its work comes only from the pipe.
    struct PipeTask {
        fd: std::os::fd::RawFd,
        runs: std::rc::Rc<std::cell::Cell<u32>>,
        says_how: bool,
    }

    impl crate::Element for PipeTask {
        fn class_name(&self) -> &'static str {
            "PipeTask"
        }
        fn port_count(&self) -> &'static str {
            "0/0"
        }
        fn has_task(&self) -> bool {
            true
        }
        fn idle_wake(&self, fds: &mut Vec<std::os::fd::RawFd>) -> bool {
            fds.push(self.fd);
            self.says_how
        }
        fn run_task(&mut self, ctx: &mut super::Ctx<'_>) -> bool {
            self.runs.set(self.runs.get() + 1);
            let mut byte = 0u8;
            // SAFETY: one byte into a local, from a non-blocking pipe.
            let n = unsafe { libc::read(self.fd, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                ctx.stop();
            }
            n == 1
        }
    }

    struct WithPipe(std::os::fd::RawFd, std::rc::Rc<std::cell::Cell<u32>>, bool);

    impl super::Registry for WithPipe {
        fn create(&self, class: &str) -> Option<Box<dyn crate::Element>> {
            if class == "PipeTask" {
                return Some(Box::new(PipeTask {
                    fd: self.0,
                    runs: self.1.clone(),
                    says_how: self.2,
                }));
            }
            super::Registry::create(&crate::elements::Standard, class)
        }
    }

    /// Runs a router whose only task reads a pipe that another thread
    /// writes after 60 ms; returns how often the task ran.
    fn runs_while_waiting_on_a_pipe(says_how: bool) -> u32 {
        let mut fds = [0; 2];
        // SAFETY: a fresh pipe, both ends ours, closed below.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
        let runs = std::rc::Rc::new(std::cell::Cell::new(0));
        let flat = crate::lang::compile("t.click", "PipeTask;", &[], &|c: &str| c == "PipeTask").unwrap();
        let mut r = super::Router::build(&flat, &WithPipe(fds[0], runs.clone(), says_how)).unwrap();
        r.set_idle_spin_us(0);
        let writer = fds[1];
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(60));
            // SAFETY: one byte from a local into the pipe.
            unsafe { libc::write(writer, [1u8].as_ptr().cast(), 1) };
        });
        let started = std::time::Instant::now();
        r.run(&|| started.elapsed() > std::time::Duration::from_secs(10));
        t.join().unwrap();
        assert!(r.stopped(), "the byte in the pipe stopped the router");
        // SAFETY: closing our own descriptors once.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        runs.get()
    }

    #[test]
    fn an_idle_router_sleeps_on_its_tasks_descriptors_and_wakes_when_one_is_readable() {
        // 60 ms idle: sleeping in ppoll, at most 5 ms at a time, the task
        // runs about 13 times; polling with 50 µs naps it would run
        // hundreds of times.
        let runs = runs_while_waiting_on_a_pipe(true);
        assert!((2..=30).contains(&runs), "the task ran {runs} times");
    }

    #[test]
    fn a_task_that_cannot_say_how_it_wakes_keeps_the_router_polling() {
        let runs = runs_while_waiting_on_a_pipe(false);
        assert!(runs > 30, "the task ran only {runs} times: the router slept");
    }
}
