//! Device I/O: any oxnet device spec (`0000:03:00.0`, `sim:NAME`,
//! `tap:NAME`, `af_packet:IF`, `af_xdp:IF`, `memif:PATH`,
//! `vhost-user:PATH`) as a source and a sink of a graph, after Click's
//! userlevel FromDevice/ToDevice and FastClick's FromDPDKDevice /
//! ToDPDKDevice (batches, queues, BURST).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | FromDevice(DEVNAME [, QUEUE]) | 0/1 | push | a task: receives up to BURST packets from one receive queue per run and pushes them as one batch |
//! | ToDevice(DEVNAME [, QUEUE]) | 1/0 | agnostic | sends what it is pushed (or pulls BURST at a time) on one transmit queue; partial bursts wait at most TIMEOUT |
//!
//! Arguments of both: `DEVNAME` (an oxnet device spec), `QUEUE` (default
//! 0), `N_QUEUES` (queues to open; default: the highest queue any
//! element of the configuration uses, plus one), `BURST` (default 32).
//! FromDevice also takes `PROMISC` (default false: the device's own
//! address, broadcast and multicast) and `TIMESTAMP` (default false: set
//! the timestamp annotation to the router's time on receive); ToDevice
//! takes `TIMEOUT` (how long a partial burst may wait, default 100 µs as
//! ClickNF's I/O element; 0 sends every push at once), `IQUEUE` (packets it
//! holds while the transmit ring is full; default 1024; beyond that they
//! are dropped and counted).
//!
//! Every FromDevice and ToDevice naming the same DEVNAME shares one open
//! device (opened once the whole configuration is read, with the queue
//! counts all of them need), as Click's FromDevice and ToDevice share a
//! Linux interface.
//!
//! Handlers: FromDevice `count` (packets received), `device` (the driver
//! and spec), `stats` (the device's counters, `name value` lines);
//! ToDevice `count` (packets handed to the device), `dropped` (refused
//! because IQUEUE was full), `pending` (held now); both `reset_counts`.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::{Config, Device, PacketBatch};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// A device shared by the elements of one router (one thread).
pub type SharedDevice = Rc<RefCell<Box<dyn Device>>>;

#[derive(Default)]
struct Wanted {
    rx_queues: u16,
    tx_queues: u16,
    promisc: bool,
    device: Weak<RefCell<Box<dyn Device>>>,
}

thread_local! {
    /// What the elements of the configuration being built want of each
    /// device, then the open device itself.
    static DEVICES: RefCell<HashMap<String, Wanted>> = RefCell::new(HashMap::new());
}

/// Records at configure time that a queue of `spec` is needed.
fn want(spec: &str, rx: Option<u16>, tx: Option<u16>, promisc: bool) {
    DEVICES.with(|d| {
        let mut d = d.borrow_mut();
        let w = d.entry(spec.to_string()).or_default();
        if let Some(q) = rx {
            w.rx_queues = w.rx_queues.max(q);
        }
        if let Some(q) = tx {
            w.tx_queues = w.tx_queues.max(q);
        }
        w.promisc |= promisc;
    });
}

/// The open device for `spec`, opened on first use with what every
/// element asked for.
fn device(spec: &str) -> Result<SharedDevice, String> {
    DEVICES.with(|d| {
        let mut d = d.borrow_mut();
        let w = d.entry(spec.to_string()).or_default();
        if let Some(dev) = w.device.upgrade() {
            return Ok(dev);
        }
        let config = Config {
            rx_queues: w.rx_queues.max(1),
            tx_queues: w.tx_queues.max(1),
            promiscuous: w.promisc,
            ..Config::default()
        };
        let dev = oxnet_driver::open(spec, &config).map_err(|e| format!("{spec}: {e}"))?;
        let dev = Rc::new(RefCell::new(dev));
        w.device = Rc::downgrade(&dev);
        Ok(dev)
    })
}

/// Forgets what the previous configuration wanted (a new one is built).
pub fn reset_wanted() {
    DEVICES.with(|d| d.borrow_mut().retain(|_, w| w.device.strong_count() > 0));
}

/// The arguments FromDevice and ToDevice share.
struct Common {
    spec: String,
    queue: u16,
    n_queues: u16,
    burst: usize,
}

fn common(a: &mut Args) -> Result<Common, String> {
    let spec = args::string(&a.required("DEVNAME")?)?;
    let queue = match a.positional_or("QUEUE") {
        Some(q) => u16::try_from(args::unsigned(&q)?).map_err(|_| format!("QUEUE {q} is too large"))?,
        None => 0,
    };
    let n_queues = match a.keyword("N_QUEUES") {
        Some(n) => {
            let n = u16::try_from(args::unsigned(&n)?).map_err(|_| format!("N_QUEUES {n} is too large"))?;
            if n <= queue {
                return Err(format!("QUEUE {queue} needs N_QUEUES above it (N_QUEUES is {n})"));
            }
            n
        }
        None => queue + 1,
    };
    let burst = match a.keyword("BURST") {
        Some(b) => args::unsigned(&b)? as usize,
        None => 32,
    };
    if burst == 0 || burst > 1024 {
        return Err(format!("BURST {burst} must be between 1 and 1024"));
    }
    Ok(Common {
        spec,
        queue,
        n_queues,
        burst,
    })
}

/// Receives from one queue of a device.
#[derive(Default)]
pub struct FromDevice {
    spec: String,
    queue: u16,
    burst: usize,
    timestamp: bool,
    device: Option<SharedDevice>,
    count: u64,
}

impl Element for FromDevice {
    fn class_name(&self) -> &'static str {
        "FromDevice"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let c = common(a)?;
        let promisc = match a.keyword("PROMISC") {
            Some(v) => args::boolean(&v)?,
            None => false,
        };
        self.timestamp = match a.keyword("TIMESTAMP") {
            Some(v) => args::boolean(&v)?,
            None => false,
        };
        want(&c.spec, Some(c.n_queues), None, promisc);
        (self.spec, self.queue, self.burst) = (c.spec, c.queue, c.burst);
        Ok(())
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        self.device = Some(device(&self.spec)?);
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    #[inline]
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(dev) = &self.device else { return false };
        let mut batch = PacketBatch::with_capacity(self.burst);
        let n = dev.borrow_mut().rx_batch(self.queue, &mut batch, self.burst);
        if n == 0 {
            return false;
        }
        self.count += n as u64;
        if self.timestamp {
            let now = ctx.now_us() as i64 * 1000;
            for p in batch.iter_mut() {
                p.anno_mut().timestamp_ns = now;
            }
        }
        ctx.push(0, batch);
        true
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("device", true, false),
            ("stats", true, false),
            ("reset_counts", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "device" => Some(device_line(&self.device, &self.spec)),
            "stats" => Some(stats_lines(&self.device)),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "reset_counts" => {
                self.count = 0;
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

fn device_line(dev: &Option<SharedDevice>, spec: &str) -> String {
    match dev {
        Some(d) => {
            let d = d.borrow();
            let m = d.mac();
            format!(
                "{} {} {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                d.driver_name(),
                spec,
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5]
            )
        }
        None => format!("(not open) {spec}"),
    }
}

fn stats_lines(dev: &Option<SharedDevice>) -> String {
    let Some(d) = dev else { return String::new() };
    let s = d.borrow_mut().stats();
    format!(
        "rx_packets {}\nrx_bytes {}\ntx_packets {}\ntx_bytes {}\nrx_missed {}\n",
        s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.rx_missed
    )
}

/// Sends on one queue of a device.
pub struct ToDevice {
    spec: String,
    queue: u16,
    burst: usize,
    timeout_us: u64,
    iqueue: usize,
    device: Option<SharedDevice>,
    pending: PacketBatch,
    timer: Option<TimerId>,
    pull: bool,
    count: u64,
    dropped: u64,
}

impl Default for ToDevice {
    fn default() -> ToDevice {
        ToDevice {
            spec: String::new(),
            queue: 0,
            burst: 32,
            timeout_us: 100,
            iqueue: 1024,
            device: None,
            pending: PacketBatch::with_capacity(64),
            timer: None,
            pull: false,
            count: 0,
            dropped: 0,
        }
    }
}

impl ToDevice {
    /// Hands what is pending to the device; what the ring does not take
    /// stays pending.
    #[inline]
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let Some(dev) = &self.device else { return };
        let sent = dev.borrow_mut().tx_batch(self.queue, &mut self.pending);
        self.count += sent as u64;
    }

    /// Keeps at most IQUEUE packets pending; the rest are dropped, counted.
    fn bound(&mut self) {
        if self.pending.len() > self.iqueue {
            let extra = self.pending.len() - self.iqueue;
            self.dropped += extra as u64;
            let keep = self.iqueue;
            // The newest are dropped (a full queue refuses what arrives).
            let mut rest = PacketBatch::with_capacity(keep);
            self.pending.consume_front(keep, |p| rest.push(p));
            self.pending.clear();
            self.pending = rest;
        }
    }
}

impl Element for ToDevice {
    fn class_name(&self) -> &'static str {
        "ToDevice"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        AGNOSTIC
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let c = common(a)?;
        if let Some(t) = a.keyword("TIMEOUT") {
            self.timeout_us = (args::seconds(&t)? * 1e6).round() as u64;
        }
        if let Some(q) = a.keyword("IQUEUE") {
            self.iqueue = args::unsigned(&q)? as usize;
        }
        want(&c.spec, None, Some(c.n_queues), false);
        (self.spec, self.queue, self.burst) = (c.spec, c.queue, c.burst);
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pull = ports.input_pull.first().copied().unwrap_or(false);
        self.device = Some(device(&self.spec)?);
        Ok(())
    }
    #[inline]
    fn push(&mut self, _port: usize, mut batch: PacketBatch, ctx: &mut Ctx<'_>) {
        if self.pending.is_empty() && (batch.len() >= self.burst || self.timeout_us == 0) {
            // The common case: a whole burst, sent as it came.
            std::mem::swap(&mut self.pending, &mut batch);
            self.flush();
            if !self.pending.is_empty() {
                self.bound();
                self.arm(ctx);
            }
            return;
        }
        self.pending.append(&mut batch);
        if self.pending.len() >= self.burst || self.timeout_us == 0 {
            self.flush();
        }
        self.bound();
        if !self.pending.is_empty() {
            self.arm(ctx);
        }
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.pull {
            let room = self.burst.saturating_sub(self.pending.len());
            if room > 0 {
                if let Some(mut b) = ctx.pull(0, room) {
                    self.pending.append(&mut b);
                }
            }
            let had = self.pending.len();
            self.flush();
            return had > 0;
        }
        false
    }
    fn run_timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        self.timer = None;
        self.flush();
        if !self.pending.is_empty() {
            self.arm(ctx);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("dropped", true, false),
            ("pending", true, false),
            ("device", true, false),
            ("reset_counts", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "dropped" => Some(self.dropped.to_string()),
            "pending" => Some(self.pending.len().to_string()),
            "device" => Some(device_line(&self.device, &self.spec)),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "reset_counts" => {
                self.count = 0;
                self.dropped = 0;
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

impl ToDevice {
    fn arm(&mut self, ctx: &mut Ctx<'_>) {
        if self.timer.is_none() {
            self.timer = Some(ctx.schedule_after_us(self.timeout_us.max(1)));
        }
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["FromDevice", "ToDevice"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "FromDevice" => Box::<FromDevice>::default(),
        "ToDevice" => Box::<ToDevice>::default(),
        _ => return None,
    })
}
