//! Queues with Click's notifiers, a hub, and the scheduling information
//! elements, after Click's documentation of the classes of the same names
//! (elements/standard/fullnotequeue.hh, mixedqueue.hh, hub.hh,
//! scheduleinfo.hh; elements/threads/staticthreadsched.hh).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | FullNoteQueue(CAPACITY) | 1/1-2 | push in, pull out (output 1 push) | FIFO; a full queue drops new packets (to output 1 if connected); tells sources upstream when it is full |
//! | MixedQueue(CAPACITY) | 2/1-2 | push in, pull out (output 1 push) | input 0 FIFO (dropping new packets when full), input 1 LIFO (dropping the packet last in line) |
//! | Hub | -/= | push | a packet on input N goes out of every output but N |
//! | ScheduleInfo(ELEMENT PARAM, ...) | 0/0 | - | scheduling weights (accepted and recorded; one core runs every task in turn) |
//! | StaticThreadSched(ELEMENT THREAD, ...) | 0/0 | - | the thread each element's task should run on, recorded for a multi-threaded run |
//!
//! Click's notifiers: a queue is "nonfull" while it has room, and a
//! source upstream sleeps while it is full ([`Element::room`], asked
//! through [`crate::router::Ctx::downstream_room`]); it is "nonempty"
//! while it holds packets, and a puller downstream (RatedUnqueue,
//! BandwidthRatedUnqueue) sleeps while it is empty ([`Element::nonempty`],
//! asked through [`crate::router::Ctx::upstream_nonempty`]). Click's
//! queues wait for a few failed pulls before they say "empty"; here the
//! answer is exact, so a sleeping puller never misses a packet.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};
use std::collections::VecDeque;

/// The storage and handlers FullNoteQueue and MixedQueue share (Click's
/// NotifierQueue): CAPACITY (default 1000), `length`,
/// `highwater_length`, `capacity` (read/write), `drops`, `reset_counts`
/// and `reset` (write).
struct Storage {
    packets: VecDeque<Packet>,
    capacity: usize,
    highwater: usize,
    drops: u64,
    /// The configuration after a write to `capacity`.
    config: Option<String>,
}

impl Default for Storage {
    fn default() -> Storage {
        Storage {
            packets: VecDeque::new(),
            capacity: 1000,
            highwater: 0,
            drops: 0,
            config: None,
        }
    }
}

const QUEUE_HANDLERS: &[(&str, bool, bool)] = &[
    ("length", true, false),
    ("highwater_length", true, false),
    ("capacity", true, true),
    ("drops", true, false),
    ("reset_counts", false, true),
    ("reset", false, true),
];

impl Storage {
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(c) = a.positional_or("CAPACITY") {
            self.capacity = args::unsigned(&c).map_err(|e| format!("CAPACITY: {e}"))? as usize;
        }
        Ok(())
    }

    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.packets.len())
    }

    fn note_length(&mut self) {
        self.highwater = self.highwater.max(self.packets.len());
    }

    fn pull(&mut self, max: usize) -> Option<PacketBatch> {
        if self.packets.is_empty() {
            return None;
        }
        let n = max.min(self.packets.len());
        let mut batch = PacketBatch::with_capacity(n);
        for p in self.packets.drain(..n) {
            batch.push(p);
        }
        Some(batch)
    }

    /// Dropped packets go out of output 1 if it is connected, else they
    /// are freed; `drops` counts them either way.
    fn drop_out(&mut self, dropped: PacketBatch, ctx: &mut Ctx<'_>) {
        self.drops += dropped.len() as u64;
        if ctx.noutputs() > 1 {
            ctx.push(1, dropped);
        }
    }

    fn read(&self, name: &str) -> Option<String> {
        match name {
            "length" => Some(self.packets.len().to_string()),
            "highwater_length" => Some(self.highwater.to_string()),
            "capacity" => Some(self.capacity.to_string()),
            "drops" => Some(self.drops.to_string()),
            "config" => self.config.clone(),
            _ => None,
        }
    }

    fn write(&mut self, name: &str, value: &str) -> Option<Result<(), String>> {
        Some(match name {
            "capacity" => args::unsigned(value.trim()).map(|v| {
                // A smaller capacity frees what no longer fits, from the
                // end of the line, as Click's reconfiguration does: not
                // counted in drops, not sent out of output 1.
                self.capacity = v as usize;
                self.packets.truncate(self.capacity);
                self.config = Some(format!("CAPACITY {v}"));
            }),
            "reset_counts" => {
                self.drops = 0;
                self.highwater = self.packets.len();
                Ok(())
            }
            "reset" => {
                self.packets.clear();
                Ok(())
            }
            _ => return None,
        })
    }
}

/// FullNoteQueue(CAPACITY) (Click's Queue): a FIFO from a push input to
/// a pull output. A full queue drops new packets (out of output 1 if it
/// is connected) and, while full, tells sources upstream to sleep (the
/// full notifier: [`Element::room`]); while empty, it tells pullers
/// downstream to sleep (the empty notifier: [`Element::nonempty`]).
/// Handlers: as Click's Queue.
#[derive(Default)]
pub struct FullNoteQueue {
    q: Storage,
}

impl Element for FullNoteQueue {
    fn class_name(&self) -> &'static str {
        "FullNoteQueue"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "h/lh"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.q.configure(a)
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let take = self.q.room().min(batch.len());
        batch.consume_front(take, |p| self.q.packets.push_back(p));
        self.q.note_length();
        self.q.drop_out(batch, ctx);
    }
    fn room(&self, _input: usize) -> Option<usize> {
        Some(self.q.room())
    }
    fn pull(&mut self, _port: usize, max: usize, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        self.q.pull(max)
    }
    fn nonempty(&self, output: usize) -> Option<bool> {
        (output == 0).then_some(!self.q.packets.is_empty())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        QUEUE_HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.q.read(name)
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        self.q.write(name, value)
    }
}

/// MixedQueue(CAPACITY): input 0 is FIFO, input 1 LIFO, one pull output.
/// When full, a packet on input 0 is dropped; a packet on input 1 takes
/// the place of the packet last in line (the one that would have been
/// pulled last), which is dropped. Dropped packets go out of output 1 if
/// it is connected. Click's example: pushes A(0) B(0) C(1) D(0) E(1) give
/// the line E C A B D. Handlers: as Click's Queue.
#[derive(Default)]
pub struct MixedQueue {
    q: Storage,
}

impl Element for MixedQueue {
    fn class_name(&self) -> &'static str {
        "MixedQueue"
    }
    fn port_count(&self) -> &'static str {
        "2/1-2"
    }
    fn processing(&self) -> &'static str {
        "h/lh"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.q.configure(a)
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let n = batch.len();
        let mut dropped = PacketBatch::with_capacity(0);
        let q = &mut self.q;
        batch.consume_front(n, |p| {
            if port == 0 {
                if q.packets.len() < q.capacity {
                    q.packets.push_back(p);
                } else {
                    dropped.push(p);
                }
            } else if q.capacity == 0 {
                dropped.push(p);
            } else {
                if q.packets.len() >= q.capacity {
                    if let Some(last) = q.packets.pop_back() {
                        dropped.push(last);
                    }
                }
                q.packets.push_front(p);
            }
        });
        self.q.note_length();
        self.q.drop_out(dropped, ctx);
    }
    fn pull(&mut self, _port: usize, max: usize, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        self.q.pull(max)
    }
    fn nonempty(&self, output: usize) -> Option<bool> {
        (output == 0).then_some(!self.q.packets.is_empty())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        QUEUE_HANDLERS
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        self.q.read(name)
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        self.q.write(name, value)
    }
}

/// Hub: a packet arriving on input N goes out of every output except N
/// (as many outputs as inputs), copies from the router's pool with the
/// original's annotations; the original goes out of the last. A copy that
/// finds the pool empty is not made, and counted (`drops`).
#[derive(Default)]
pub struct Hub {
    drops: u64,
}

impl Element for Hub {
    fn class_name(&self) -> &'static str {
        "Hub"
    }
    fn port_count(&self) -> &'static str {
        "-/="
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let targets: Vec<usize> = (0..ctx.noutputs()).filter(|&o| o != port).collect();
        let Some((&last, copies)) = targets.split_last() else {
            return;
        };
        for &o in copies {
            let mut copy = PacketBatch::with_capacity(batch.len());
            for p in batch.iter() {
                match super::standard::packet_from(ctx, p) {
                    Some(mut c) => {
                        c.copy_meta_from(p);
                        copy.push(c);
                    }
                    None => self.drops += 1,
                }
            }
            ctx.push(o, copy);
        }
        ctx.push(last, batch);
    }
    crate::drops_handler!();
}

/// Reads `ELEMENT VALUE` arguments (ScheduleInfo, StaticThreadSched).
fn pairs(a: &mut Args, what: &str) -> Result<Vec<(String, String)>, String> {
    a.rest_positional()
        .into_iter()
        .map(|arg| {
            let words = crate::lang::vars::split_words(&arg);
            match words.as_slice() {
                [element, value] => Ok((element.clone(), value.clone())),
                _ => Err(format!("'{arg}': expected ELEMENT {what}")),
            }
        })
        .collect()
}

/// ScheduleInfo(ELEMENT PARAM, ...): how often each named element's task
/// should run relative to the others (PARAM a real number, default 1).
/// Accepted and recorded: one core runs every task once a round. Handler
/// `params`: one `ELEMENT PARAM` line per argument.
#[derive(Default)]
pub struct ScheduleInfo {
    params: Vec<(String, f64)>,
}

impl Element for ScheduleInfo {
    fn class_name(&self) -> &'static str {
        "ScheduleInfo"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        for (element, value) in pairs(a, "PARAM")? {
            let v: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("'{value}' is not a scheduling parameter (a real number)"))?;
            self.params.push((element, v));
        }
        Ok(())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("params", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "params").then(|| self.params.iter().map(|(e, v)| format!("{e} {v}\n")).collect())
    }
}

/// StaticThreadSched(ELEMENT THREAD, ...): binds each named element's
/// task to thread THREAD (-1: any). Today one thread runs the router;
/// the placement is recorded for a run on several threads (`-j`), which
/// reads it from handler `threads`: one `ELEMENT THREAD` line per
/// element, a later argument overriding an earlier one. A THREAD below
/// -1 is taken as -1 with a warning, as Click does; element names are
/// not checked (a name may be a compound's prefix, as in Click).
#[derive(Default)]
pub struct StaticThreadSched {
    threads: Vec<(String, i64)>,
}

impl StaticThreadSched {
    /// The thread named for `element`, if any.
    pub fn thread_of(&self, element: &str) -> Option<i64> {
        self.threads.iter().rev().find(|(e, _)| e == element).map(|(_, t)| *t)
    }
}

impl Element for StaticThreadSched {
    fn class_name(&self) -> &'static str {
        "StaticThreadSched"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        for (element, value) in pairs(a, "THREAD")? {
            let mut t = args::integer(&value).map_err(|e| format!("THREAD: {e}"))?;
            if t < -1 {
                // Click warns and takes "any thread".
                eprintln!("warning: StaticThreadSched: thread preference {t} out of range");
                t = -1;
            }
            self.threads.retain(|(e, _)| *e != element);
            self.threads.push((element, t));
        }
        Ok(())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("threads", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "threads").then(|| self.threads.iter().map(|(e, t)| format!("{e} {t}\n")).collect())
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "FullNoteQueue",
        "Hub",
        "MixedQueue",
        "ScheduleInfo",
        "StaticThreadSched",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "FullNoteQueue" => Box::<FullNoteQueue>::default(),
        "MixedQueue" => Box::<MixedQueue>::default(),
        "Hub" => Box::<Hub>::default(),
        "ScheduleInfo" => Box::<ScheduleInfo>::default(),
        "StaticThreadSched" => Box::<StaticThreadSched>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_arguments_are_element_value_pairs() {
        let mut s = StaticThreadSched::default();
        s.configure(&mut Args::new("rs1 0, d1 0, rs2 1, rs1 -1")).unwrap();
        assert_eq!(s.read_handler("threads").unwrap(), "d1 0\nrs2 1\nrs1 -1\n");
        assert_eq!(s.thread_of("rs2"), Some(1));
        assert_eq!(s.thread_of("x"), None);
        assert!(StaticThreadSched::default().configure(&mut Args::new("a")).is_err());
        let mut low = StaticThreadSched::default();
        low.configure(&mut Args::new("a -2")).unwrap();
        assert_eq!(low.thread_of("a"), Some(-1));
        let mut i = ScheduleInfo::default();
        i.configure(&mut Args::new("unq 1, src 2.5")).unwrap();
        assert_eq!(i.read_handler("params").unwrap(), "unq 1\nsrc 2.5\n");
        assert!(ScheduleInfo::default().configure(&mut Args::new("unq x")).is_err());
    }
}
