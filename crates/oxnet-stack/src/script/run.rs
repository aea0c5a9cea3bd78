//! The runner: plays a [`Script`] against oxnet's TCP stack in simulated
//! time, with packetdrill's semantics (google/packetdrill's README and
//! `gtests/net/tcp`): oxnet is the local end (192.168.0.1, or
//! fd3d:fa7b:d17d::1 with `--ip_version=ipv6`), the script plays the
//! remote one (192.0.2.1, or 2001:db8::1) and the application on oxnet's
//! side, through system calls on its sockets (`run_syscall.rs` lists
//! them).
//!
//! # Time
//! Script time 0 is the router's simulated time 0. An event's time is
//! resolved when it comes: absolute, or relative to when the previous
//! event actually happened (an expected segment happens when it came
//! out, a call when it returned). Before an inbound segment or a call,
//! the clock moves to the event's time, stopping at each TCP timer
//! deadline (RTO, delayed ACK, TIME-WAIT: TCPInfo's timer set) on the
//! way so that what a timer sends carries its own time;
//! then every segment oxnet has sent and no event has claimed is a
//! failure ("unexpected outbound segment"), as it is after the last
//! event (the clock does not move past the last event).
//!
//! An expected segment (`>`) must come out between its time minus the
//! tolerance and its time (or the end of its range) plus the tolerance
//! (`--tolerance_usecs`, 4000 µs by default, as packetdrill's). The first
//! segment oxnet sent since the last claimed one is compared; if none is
//! waiting, the clock moves until one comes out or the window closes (so
//! that timers, RTO or delayed ACK, can fire). `*` waits at most
//! [`MAX_WAIT_US`].
//!
//! A blocking call that cannot complete (an `accept` with no connection
//! queued, a `read` with nothing to read) waits until the next event's
//! time and tries again; if it still would block, the script fails.
//! A non-blocking one (`fcntl(fd, F_SETFL, O_NONBLOCK)`) returns
//! `-1 EAGAIN`.
//!
//! Sequence numbers and options: `run_segment.rs`. The TCP states the
//! connections go through, in the [`Report`]: `run_states.rs`.
//!
//! # Not done
//! Shell commands, option lines other than `--tolerance_usecs` and
//! `--ip_version`, a blocking `connect`, and system calls not listed in
//! `run_syscall.rs` fail the script by name. oxnet's TSval is never
//! compared (packetdrill compares it only with `--tcp_ts_tick_usecs`).

use super::ast::{Direction, Event, EventKind, EventTime, Expr, IpVersion, Micros, Script};
use super::print::Seconds;
use super::run_net::Net;
use super::run_segment::{build_inbound, differences, parse_outbound, to_script, PacketSpec, SeqMap};
use super::run_states::{StateLog, Transition};
use super::run_syscall::{errno_matches, errno_name, int_value, Attempt, Sockets};
use crate::tcp::tcb::TcpState;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::fmt;

/// packetdrill's default tolerance for an expected segment's time.
pub const DEFAULT_TOLERANCE_US: Micros = 4000;

/// How long an expected segment timed `*` is waited for.
pub const MAX_WAIT_US: Micros = 120_000_000;

/// The option lines the runner understands; any other is refused.
const KNOWN_OPTIONS: &[&str] = &["tolerance_usecs", Script::IP_VERSION_OPTION];

/// How to run a script.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The script's file name, for messages.
    pub file: String,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            file: "script".to_string(),
        }
    }
}

/// What a script did, event by event, when it passed, and the TCP
/// states its connections went through (`run_states.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every event, in order.
    pub events: Vec<EventOutcome>,
    /// Every change of state the runner saw, in order.
    pub transitions: Vec<Transition>,
}

impl Report {
    /// The states some connection entered (CLOSED too: a connection
    /// ended).
    pub fn entered(&self) -> HashSet<TcpState> {
        self.transitions.iter().map(|t| t.to).collect()
    }

    /// The states some connection left (CLOSED: one was opened or a
    /// listener made).
    pub fn left(&self) -> HashSet<TcpState> {
        self.transitions.iter().map(|t| t.from).collect()
    }
}

/// One event that went as the script said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventOutcome {
    /// The event's line in the script.
    pub line: u32,
    /// When it happened (an expected segment: when it came out).
    pub time_us: Micros,
    /// What happened: `injected`, `came out: > S. 0:0(0) ack 1 ...`,
    /// `returned 4`.
    pub outcome: String,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.events {
            writeln!(f, "line {} at {}: {}", e.line, Seconds(e.time_us), e.outcome)?;
        }
        for t in &self.transitions {
            writeln!(f, "state at {}: port {}: {t}", Seconds(t.time_us), t.port)?;
        }
        Ok(())
    }
}

/// Why a script failed: where, which event, what was expected and what
/// happened instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The script's file name ([`RunOptions::file`]).
    pub file: String,
    /// The line of the event that failed (0: before the first event).
    pub line: u32,
    /// The event as the script writes it (empty before the first event).
    pub event: String,
    /// The simulated time of the failure.
    pub time_us: Micros,
    /// What was expected and what happened; segments in the script's
    /// notation.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: at t={}", self.file, self.line, Seconds(self.time_us))?;
        if !self.event.is_empty() {
            write!(f, ": `{}`", self.event)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Failure {}

/// Runs `script` against a fresh TCP stack; the report of every event,
/// or the first failure.
pub fn run_script(script: &Script, options: &RunOptions) -> Result<Report, Failure> {
    let mut runner = Runner::new(script, options)?;
    for (i, event) in script.events.iter().enumerate() {
        runner.event(event, script.events.get(i + 1))?;
    }
    runner.finish(script.events.last())?;
    runner.report.transitions = std::mem::take(&mut runner.states.transitions);
    Ok(runner.report)
}

/// Whether `event` can fail on what the stack does: a segment it expects
/// (`>`), or a system call whose result is written (not `...`).
fn checks_something(event: &Event) -> bool {
    match &event.kind {
        EventKind::Packet { direction, .. } => *direction == Direction::Outbound,
        EventKind::Syscall { result, errno, .. } => *result != Expr::Ellipsis || errno.is_some(),
        EventKind::Shell(_) => false,
    }
}

/// The state of one run.
struct Runner {
    file: String,
    net: Net,
    sockets: Sockets,
    map: SeqMap,
    ip: IpVersion,
    tolerance: Micros,
    /// When the previous event happened.
    last_us: Micros,
    /// Segments oxnet sent that no event has claimed yet, with the time
    /// they came out.
    pending: VecDeque<(Micros, Vec<u8>)>,
    report: Report,
    states: StateLog,
}

impl Runner {
    fn new(script: &Script, options: &RunOptions) -> Result<Runner, Failure> {
        let setup = |message: String| Failure {
            file: options.file.clone(),
            line: 0,
            event: String::new(),
            time_us: 0,
            message,
        };
        if let Some(name) = script.options.keys().find(|k| !KNOWN_OPTIONS.contains(&k.as_str())) {
            return Err(setup(format!("option --{name}: unsupported by the runner")));
        }
        // A script that checks nothing passes whatever the stack does (as
        // four empty scripts once did): refused.
        if !script.events.iter().any(checks_something) {
            return Err(setup(
                "the script checks nothing: it has no `>` segment and no system call with a checked result".to_string(),
            ));
        }
        let tolerance = match script.options.get("tolerance_usecs") {
            None => DEFAULT_TOLERANCE_US,
            Some(v) => v
                .parse()
                .map_err(|_| setup(format!("--tolerance_usecs={v}: not a number of microseconds")))?,
        };
        let net = Net::new().map_err(|e| setup(format!("building the router: {e}")))?;
        let ip = script.ip_version();
        Ok(Runner {
            file: options.file.clone(),
            sockets: Sockets::new(net.stack.clone(), ip),
            net,
            map: SeqMap::default(),
            ip,
            tolerance,
            last_us: 0,
            pending: VecDeque::new(),
            report: Report::default(),
            states: StateLog::default(),
        })
    }

    fn failure(&self, event: Option<&Event>, message: String) -> Failure {
        Failure {
            file: self.file.clone(),
            line: event.map_or(0, |e| e.line),
            event: event.map_or_else(String::new, |e| e.to_string().trim().to_string()),
            time_us: self.net.now(),
            message,
        }
    }

    /// The event's time window: its earliest time and its latest (None
    /// for `*`), relative times counted from `last`.
    fn window(time: EventTime, last: Micros) -> Result<(Micros, Option<Micros>), String> {
        Ok(match time {
            EventTime::Absolute(t) => (t, Some(t)),
            EventTime::Relative(d) => (last.saturating_add(d), Some(last.saturating_add(d))),
            EventTime::Range { relative, start, end } => {
                let base = if relative { last } else { 0 };
                (base.saturating_add(start), Some(base.saturating_add(end)))
            }
            EventTime::Any => (last, None),
            EventTime::Untimed => return Err("an event without a time".to_string()),
        })
    }

    fn event(&mut self, event: &Event, next: Option<&Event>) -> Result<(), Failure> {
        if let EventKind::Shell(_) = event.kind {
            let message = "shell commands are not run (oxnet's runner has no shell)".to_string();
            return Err(self.failure(Some(event), message));
        }
        let (start, end) = Self::window(event.time, self.last_us).map_err(|m| self.failure(Some(event), m))?;
        let outcome = match &event.kind {
            EventKind::Shell(_) => unreachable!("refused above"),
            EventKind::Packet {
                direction: Direction::Outbound,
                ..
            } => self.expect(event, start, end),
            EventKind::Packet { .. } => self.arrive(start).and_then(|()| self.inject(event)),
            EventKind::Syscall {
                name,
                args,
                result,
                errno,
            } => self.arrive(start).and_then(|()| {
                let next_start = next
                    .and_then(|n| Self::window(n.time, self.net.now()).ok())
                    .map_or(self.net.now(), |w| w.0);
                self.syscall(name, args, result, errno.as_deref(), next_start)
            }),
        };
        match outcome {
            Ok(outcome) => {
                self.report.events.push(EventOutcome {
                    line: event.line,
                    time_us: self.last_us,
                    outcome,
                });
                Ok(())
            }
            Err(message) => Err(self.failure(Some(event), message)),
        }
    }

    /// After the last event: what oxnet sent that no event claimed.
    fn finish(&mut self, last: Option<&Event>) -> Result<(), Failure> {
        self.collect().map_err(|m| self.failure(last, m))?;
        self.check_unexpected().map_err(|m| self.failure(last, m))
    }

    /// Runs the router at the current time and keeps what came out.
    fn collect(&mut self) -> Result<(), String> {
        let now = self.net.now();
        // What a system call changed, before the router acts on it.
        self.states.observe(&self.net.stack.borrow(), now);
        for bytes in self.net.settle(&mut |info| self.states.observe(info, now))? {
            self.pending.push_back((now, bytes));
        }
        Ok(())
    }

    /// Moves the clock to `until`, stopping at each TCP timer deadline on
    /// the way; with `stop_on_output`, as soon as a segment is waiting.
    fn advance(&mut self, until: Micros, stop_on_output: bool) -> Result<(), String> {
        loop {
            self.collect()?;
            if stop_on_output && !self.pending.is_empty() {
                return Ok(());
            }
            let now = self.net.now();
            if now >= until {
                return Ok(());
            }
            // Every timer of TCPStack is in TCPInfo's timer set (its
            // elements keep no other), so the clock can jump from one
            // deadline to the next.
            let step = self.net.next_deadline().map_or(until, |d| d.min(until));
            self.net.advance_to(step);
        }
    }

    /// The segments oxnet sent that no event claimed, as a failure.
    fn check_unexpected(&mut self) -> Result<(), String> {
        let Some((at, bytes)) = self.pending.pop_front() else {
            return Ok(());
        };
        let shown = self.show(&bytes);
        Err(format!("unexpected outbound segment `{shown}` at t={}", Seconds(at)))
    }

    /// A segment oxnet sent, in the script's notation (learning its ISN).
    fn show(&mut self, bytes: &[u8]) -> String {
        match parse_outbound(bytes, self.ip) {
            Ok(seg) => {
                self.map.learn_outbound(&seg.tcp);
                to_script(&seg, &self.map).to_string()
            }
            Err(e) => format!("(unreadable: {e})"),
        }
    }

    /// Moves the clock to an inbound segment's or a call's time; fails if
    /// oxnet sent something unexpected by then.
    fn arrive(&mut self, at: Micros) -> Result<(), String> {
        self.advance(at, false)?;
        self.check_unexpected()?;
        self.last_us = self.net.now();
        Ok(())
    }

    fn inject(&mut self, event: &Event) -> Result<String, String> {
        let spec = PacketSpec::of(&event.kind).ok_or("not a segment")?;
        self.map.learn_inbound(spec.flags.syn, spec.seq);
        let bytes = build_inbound(&spec, &self.map, self.ip);
        let (len, dropped) = (bytes.len(), self.net.input_drops());
        self.net.inject(bytes)?;
        self.collect()?;
        // Every drop of PlugSource is counted: one here means the stack
        // never saw the segment, which would pass for a silent stack.
        if self.net.input_drops() != dropped {
            return Err(format!(
                "the {len}-byte IP packet was dropped before the stack (PlugSource: no buffer)"
            ));
        }
        Ok("injected".to_string())
    }

    /// An expected segment: the next one oxnet sent, within the window.
    fn expect(&mut self, event: &Event, start: Micros, end: Option<Micros>) -> Result<String, String> {
        let deadline = end.map_or(self.net.now().saturating_add(MAX_WAIT_US), |e| {
            e.saturating_add(self.tolerance)
        });
        self.advance(deadline, true)?;
        let want = PacketSpec::of(&event.kind).ok_or("not a segment")?;
        let Some((at, bytes)) = self.pending.pop_front() else {
            return Err(format!(
                "expected `{}`, but nothing came out by t={}",
                event.kind,
                Seconds(deadline)
            ));
        };
        let seg =
            parse_outbound(&bytes, self.ip).map_err(|e| format!("oxnet sent a packet the runner cannot read: {e}"))?;
        self.map.learn_outbound(&seg.tcp);
        let got_kind = to_script(&seg, &self.map);
        let got = PacketSpec::of(&got_kind).ok_or("not a segment")?;
        let diffs = differences(&want, &got);
        if !diffs.is_empty() {
            return Err(format!(
                "expected `{}`, got `{got_kind}` at t={} ({})",
                event.kind,
                Seconds(at),
                diffs.join(", ")
            ));
        }
        let earliest = start.saturating_sub(self.tolerance);
        if at < earliest {
            return Err(format!(
                "`{got_kind}` came out at t={}, before its window [{}, {}]",
                Seconds(at),
                Seconds(earliest),
                Seconds(deadline)
            ));
        }
        self.last_us = at;
        Ok(format!("came out: {got_kind}"))
    }

    /// A system call, its result compared with the script's.
    fn syscall(
        &mut self,
        name: &str,
        args: &[Expr],
        result: &Expr,
        errno: Option<&str>,
        next_start: Micros,
    ) -> Result<String, String> {
        let mut attempt = self.sockets.call(name, args)?;
        if attempt == Attempt::WouldBlock && next_start > self.net.now() {
            // A blocking call waits, until the script's next event at most.
            self.advance(next_start, false)?;
            attempt = self.sockets.call(name, args)?;
        }
        let Attempt::Done(got) = attempt else {
            return Err(format!("{name} would block (nothing by t={})", Seconds(self.net.now())));
        };
        // What the call asked of the stack (output, a window update) runs
        // now, at the call's time.
        self.collect()?;
        self.last_us = self.net.now();
        let shown = match got {
            Ok(v) => v.to_string(),
            Err(e) => format!("-1 {}", errno_name(e)),
        };
        let want = match result {
            Expr::Ellipsis => None,
            e => Some(int_value(e)?),
        };
        let ok = match got {
            Ok(v) => want.is_none_or(|w| w == v) && errno.is_none(),
            Err(e) => want.is_none_or(|w| w == -1) && errno.is_some_and(|n| errno_matches(n, e)),
        };
        if !ok {
            let expected = match errno {
                Some(n) => format!("{result} {n}"),
                None => result.to_string(),
            };
            return Err(format!("{name} returned {shown}, expected {expected}"));
        }
        Ok(format!("returned {shown}"))
    }
}
