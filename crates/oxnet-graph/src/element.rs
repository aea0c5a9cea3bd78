//! The element trait: ports, push/pull/agnostic processing, batches,
//! tasks and handlers (DESIGN.md, "The graph and the stack"; Click's
//! `Element` class is the model).
//!
//! The unit that moves is a [`PacketBatch`]. An element that thinks in
//! packets implements [`Element::simple_action`] on the batch, or loops
//! over it; the default `push` and `pull` call it, so a one-in one-out
//! element is a single method.

use crate::args::Args;
use crate::router::Ctx;
use oxnet_driver::PacketBatch;

/// Click's processing codes for the common cases: every port agnostic.
pub const AGNOSTIC: &str = "a/a";
/// Every port push.
pub const PUSH: &str = "h/h";
/// Every port pull.
pub const PULL: &str = "l/l";
/// Push inputs, pull outputs (a queue).
pub const PUSH_TO_PULL: &str = "h/l";
/// Pull inputs, push outputs (Unqueue).
pub const PULL_TO_PUSH: &str = "l/h";

/// One input and one output.
pub const PORTS_1_1: &str = "1/1";
/// No input, one output (a source).
pub const PORTS_0_1: &str = "0/1";
/// One input, no output (a sink).
pub const PORTS_1_0: &str = "1/0";

/// Inside `impl Element for X`: the one handler of an element that drops
/// what it cannot handle and counts it in a `drops: u64` field — `drops`,
/// read-only (many of Click's elements have exactly this).
#[macro_export]
macro_rules! drops_handler {
    () => {
        fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
            &[("drops", true, false)]
        }
        fn read_handler(&self, name: &str) -> Option<String> {
            (name == "drops").then(|| self.drops.to_string())
        }
    };
}

/// An element. `'static` so that a router can hold any of them.
pub trait Element: 'static {
    /// The class name, as in configurations.
    fn class_name(&self) -> &'static str;

    /// Click's port count: `"1/1"`, `"1/1-2"`, `"0/1"`, `"1/-"` (any
    /// number), `"1-/="` (outputs as many as inputs).
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }

    /// Click's processing code: per side, one letter per port, the last
    /// repeating: `h` push, `l` pull, `a` agnostic (`"a/ah"`: output 0
    /// agnostic, the others push).
    fn processing(&self) -> &'static str {
        AGNOSTIC
    }

    /// Reads the element's arguments. Whatever is left unread is an error
    /// reported by the router.
    fn configure(&mut self, _args: &mut Args) -> Result<(), String> {
        Ok(())
    }

    /// Called once the graph is built, with the ports as resolved.
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        Ok(())
    }

    /// A batch arrives on push input `port`.
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let _ = port;
        if let Some(out) = self.simple_action(batch, ctx) {
            ctx.push(0, out);
        }
    }

    /// At most `max` packets are asked for on pull output `port`.
    fn pull(&mut self, port: usize, max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let _ = port;
        let batch = ctx.pull(0, max)?;
        self.simple_action(batch, ctx)
    }

    /// One-in one-out processing: returns what goes on (None or an empty
    /// batch: nothing).
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        Some(batch)
    }

    /// Packets input `input` can still take before it drops (a queue's
    /// free places); None for elements that pass packets on. Click's
    /// "nonfull" notifier: a source upstream asks
    /// [`crate::router::Ctx::downstream_room`] and sleeps while it is 0.
    fn room(&self, _input: usize) -> Option<usize> {
        None
    }

    /// Whether pull output `output` has packets to give: Some(false)
    /// while a queue is empty, None for elements that only pass pulls on.
    /// Click's "empty" notifier: a puller downstream asks
    /// [`crate::router::Ctx::upstream_nonempty`] and sleeps while it is
    /// false instead of pulling in vain. An element that keeps packets
    /// of its own on a pull path (a delay line) must answer for itself,
    /// as in Click, or the walk would go past it.
    fn nonempty(&self, _output: usize) -> Option<bool> {
        None
    }

    /// Whether the element has a task the scheduler runs (a source, the
    /// pull side of a queue, a device).
    fn has_task(&self) -> bool {
        false
    }

    /// Runs the task once; returns whether it did work.
    fn run_task(&mut self, _ctx: &mut Ctx<'_>) -> bool {
        false
    }

    /// How an idle task gets work again, so that an idle router may sleep
    /// until then instead of polling ([`crate::Router::run`]): `true`
    /// when the task's work can only come from the descriptors it adds to
    /// `fds` (level-triggered `POLLIN`, never read by the router: a
    /// device queue's fd) or from this router itself (pushes, pulls,
    /// handlers and timers of this router, as a stack's output task or an
    /// executor whose wake-ups all come from the router's elements and
    /// timers). `false`, the default, when the router cannot know (a
    /// source that generates, a queue filled by another thread): then an
    /// idle router keeps polling.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        false
    }

    /// Called once when the router starts running (an active script
    /// starts here).
    fn start(&mut self, _ctx: &mut Ctx<'_>) {}

    /// A timer the element scheduled through [`Ctx::schedule_after`] fired.
    fn run_timer(&mut self, _timer: crate::timer::TimerId, _ctx: &mut Ctx<'_>) {}

    /// An element asked the driver to stop ([`Ctx::stop`]). Return true to
    /// take the request (DriverManager and driver scripts do: the router
    /// goes on); if no element takes it, the router stops.
    fn driver_stop(&mut self, _ctx: &mut Ctx<'_>) -> bool {
        false
    }

    /// Names of the element's own handlers: (name, readable, writable).
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[]
    }

    /// Reads a handler (None: no such read handler).
    fn read_handler(&self, _name: &str) -> Option<String> {
        None
    }

    /// Reads a handler with parameters (`$(s.add 1 2)`); by default the
    /// parameters are ignored and [`Element::read_handler`] answers.
    fn read_handler_with(&mut self, name: &str, _params: &str, _ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        self.read_handler(name).map(Ok)
    }

    /// Writes a handler (None: no such write handler).
    fn write_handler(&mut self, _name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        None
    }
}

thread_local! {
    /// Empty batches kept for reuse: a source takes one, the element that
    /// ends the batch's trip (a sink, a device) gives it back, so that a
    /// busy graph allocates no batch memory per batch.
    static BATCH_BIN: std::cell::RefCell<Vec<PacketBatch>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Batches kept at most in the bin.
const BIN_SIZE: usize = 64;

/// An empty batch with room for `capacity` packets, reused if one is kept.
#[inline]
pub fn take_batch(capacity: usize) -> PacketBatch {
    let mut batch = BATCH_BIN
        .with(|bin| bin.borrow_mut().pop())
        .unwrap_or_else(|| PacketBatch::with_capacity(capacity));
    batch.reserve(capacity);
    batch
}

/// Gives an emptied batch back for reuse (packets still in it are freed).
#[inline]
pub fn recycle_batch(mut batch: PacketBatch) {
    batch.clear();
    BATCH_BIN.with(|bin| {
        let mut bin = bin.borrow_mut();
        if bin.len() < BIN_SIZE {
            bin.push(batch);
        }
    });
}

/// The ports of an element once the graph is built: how many are used
/// and which are pull.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ports {
    /// Per input port: true if pull.
    pub input_pull: Vec<bool>,
    /// Per output port: true if pull.
    pub output_pull: Vec<bool>,
}

impl Ports {
    pub fn inputs(&self) -> usize {
        self.input_pull.len()
    }
    pub fn outputs(&self) -> usize {
        self.output_pull.len()
    }
}

/// A parsed port count: how many inputs and outputs an element accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCount {
    pub inputs: (usize, usize),
    /// `None`: as many as inputs (`=`).
    pub outputs: Option<(usize, usize)>,
}

fn range(text: &str) -> Option<(usize, usize)> {
    if text == "-" {
        return Some((0, usize::MAX));
    }
    match text.split_once('-') {
        Some((lo, "")) => Some((lo.parse().ok()?, usize::MAX)),
        Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
        None => {
            let n = text.parse().ok()?;
            Some((n, n))
        }
    }
}

impl PortCount {
    /// Parses Click's port count syntax; None if malformed (a bug in the
    /// element, reported as such).
    pub fn parse(text: &str) -> Option<PortCount> {
        let (i, o) = text.split_once('/')?;
        let inputs = range(i)?;
        let outputs = if o == "=" { None } else { Some(range(o)?) };
        Some(PortCount { inputs, outputs })
    }
}

/// Push, pull, or not yet decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Push,
    Pull,
    Agnostic,
}

/// The processing of port `port` on one side of a code like `"a/ah"`.
pub fn port_flow(code: &str, output: bool, port: usize) -> Flow {
    let side = code.split('/').nth(usize::from(output)).unwrap_or("a");
    let letters = side.as_bytes();
    let letter = letters.get(port).or(letters.last()).copied().unwrap_or(b'a');
    match letter {
        b'h' => Flow::Push,
        b'l' => Flow::Pull,
        _ => Flow::Agnostic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_counts_parse_as_click_writes_them() {
        assert_eq!(
            PortCount::parse("1/1"),
            Some(PortCount {
                inputs: (1, 1),
                outputs: Some((1, 1))
            })
        );
        assert_eq!(PortCount::parse("1/1-2").unwrap().outputs, Some((1, 2)));
        assert_eq!(PortCount::parse("1/-").unwrap().outputs, Some((0, usize::MAX)));
        assert_eq!(
            PortCount::parse("1-/=").unwrap(),
            PortCount {
                inputs: (1, usize::MAX),
                outputs: None
            }
        );
        assert_eq!(PortCount::parse("1"), None);
        assert_eq!(PortCount::parse("x/1"), None);
    }

    #[test]
    fn processing_codes_repeat_their_last_letter() {
        assert_eq!(port_flow("a/ah", true, 0), Flow::Agnostic);
        assert_eq!(port_flow("a/ah", true, 5), Flow::Push);
        assert_eq!(port_flow("h/l", false, 3), Flow::Push);
        assert_eq!(port_flow("h/l", true, 0), Flow::Pull);
    }
}
