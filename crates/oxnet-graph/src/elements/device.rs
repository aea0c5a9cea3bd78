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
//! 0; with `-j N`, graph thread i takes queue i and QUEUE is refused),
//! `N_QUEUES` (queues to open; default: the highest queue any element of
//! the configuration uses plus one, at least N with `-j N`; several
//! receive queues are filled by RSS), `BURST` (default 32).
//! Both take `FLOW_CONTROL` (default false: 802.3x pause frames where the
//! device has them: a receiver that falls behind pauses its link partner
//! instead of dropping). Both take the device's offload switches (docs/features.md; off by
//! default; where one element of a device turns one on, it is on):
//! `RX_CHECKSUM` (the device's checksum verdicts on receive),
//! `TX_CHECKSUM` (checksums inserted on transmit), `TSO off|single|multi`
//! (TCP segmentation), `RSC` (receive side coalescing, chained packets).
//! A device without a feature refuses the switch at open; a request the
//! device is not asked to do is done in software by the driver.
//! FromDevice also takes `PROMISC` (default false:
//! the device's own address, broadcast and multicast) and `TIMESTAMP`
//! (default false: set the timestamp annotation to the router's time on
//! receive); ToDevice
//! takes `TIMEOUT` (how long a partial burst may wait, default 100 µs as
//! ClickNF's I/O element; 0 sends every push at once), `IQUEUE` (packets it
//! holds while the transmit ring is full; default 1024; beyond that they
//! are dropped and counted).
//!
//! Every FromDevice and ToDevice naming the same DEVNAME shares one open
//! device (opened once the whole configuration is read, with the queue
//! counts all of them need), as Click's FromDevice and ToDevice share a
//! Linux interface; the device is split into per-queue handles and each
//! element owns its queue's handle, so graphs on several threads take no
//! lock on the data path (drivers without a native split share the device
//! behind one lock per batch, see `oxnet_driver::split_locked`).
//!
//! Handlers: FromDevice `count` (packets received), `device` (the driver
//! and spec), `stats` (the device's counters, `name value` lines);
//! ToDevice `count` (packets handed to the device), `dropped` (refused
//! because IQUEUE was full), `pending` (held now); both `reset_counts`.

use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::{Config, ControlHandle, PacketBatch, RxHandle, TxHandle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A device opened for a configuration and split into per-queue handles
/// ([`oxnet_driver::Device::split`]): each FromDevice takes one receive
/// handle, each ToDevice one transmit handle, so that graphs on several
/// threads (`-j`) each own their queues and take no lock on the data
/// path. The control handle (statistics, address) is shared.
struct Opened {
    rx: Vec<Option<Box<dyn RxHandle>>>,
    tx: Vec<Option<Box<dyn TxHandle>>>,
    control: Arc<Mutex<Box<dyn ControlHandle>>>,
}

#[derive(Default)]
struct Wanted {
    rx_queues: u16,
    tx_queues: u16,
    promisc: bool,
    flow_control: bool,
    offloads: oxnet_driver::Offloads,
    opened: Option<Opened>,
}

/// What the configurations being built want of each device, then the
/// device itself until its handles are taken. Process-wide: with `-j`,
/// one configuration per thread, one device for all.
static DEVICES: Mutex<Option<HashMap<String, Wanted>>> = Mutex::new(None);

fn devices() -> MutexGuard<'static, Option<HashMap<String, Wanted>>> {
    DEVICES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The graph's threads (`-j`): this thread's index and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPlace {
    pub index: u16,
    pub count: u16,
}

thread_local! {
    static PLACE: std::cell::Cell<ThreadPlace> = const { std::cell::Cell::new(ThreadPlace { index: 0, count: 1 }) };
}

/// Tells the elements built on this thread which graph thread they are
/// (FromDevice and ToDevice without a QUEUE take the queue of that index).
pub fn set_thread_place(place: ThreadPlace) {
    PLACE.with(|p| p.set(place));
}

/// This thread's place among the graph threads (`-j`).
pub fn thread_place() -> ThreadPlace {
    PLACE.with(|p| p.get())
}

/// Records at configure time that queues of `spec` are needed.
fn want(spec: &str, rx: Option<u16>, tx: Option<u16>, promisc: bool, c: &Common) {
    let flow_control = c.flow_control;
    let mut d = devices();
    let w = d.get_or_insert_with(HashMap::new).entry(spec.to_string()).or_default();
    if let Some(q) = rx {
        w.rx_queues = w.rx_queues.max(q);
    }
    if let Some(q) = tx {
        w.tx_queues = w.tx_queues.max(q);
    }
    w.promisc |= promisc;
    w.flow_control |= flow_control;
    let (o, wanted) = (&mut w.offloads, &c.offloads);
    o.rx_checksum |= wanted.rx_checksum;
    o.tx_checksum |= wanted.tx_checksum;
    o.rsc |= wanted.rsc;
    if wanted.tso != oxnet_driver::TsoMode::Off {
        o.tso = wanted.tso;
    }
}

/// Opens `spec` if nobody has, and hands `take` its handles.
fn with_device<T>(spec: &str, take: impl FnOnce(&mut Opened) -> Result<T, String>) -> Result<T, String> {
    let mut d = devices();
    let w = d.get_or_insert_with(HashMap::new).entry(spec.to_string()).or_default();
    if w.opened.is_none() {
        let (rx_queues, tx_queues) = (w.rx_queues.max(1), w.tx_queues.max(1));
        let mut config = Config {
            rx_queues,
            tx_queues,
            promiscuous: w.promisc,
            flow_control: w.flow_control,
            ..Config::default()
        };
        config.offloads = w.offloads;
        // Several receive queues are filled by RSS (where the device has it).
        config.offloads.rss = rx_queues > 1;
        let dev = oxnet_driver::open(spec, &config).map_err(|e| format!("{spec}: {e}"))?;
        let handles = dev.split().map_err(|e| format!("{spec}: {e}"))?;
        w.opened = Some(Opened {
            rx: handles.rx.into_iter().map(Some).collect(),
            tx: handles.tx.into_iter().map(Some).collect(),
            control: Arc::new(Mutex::new(handles.control)),
        });
    }
    take(w.opened.as_mut().expect("opened above"))
}

/// Forgets the devices of the previous configuration (call before
/// building, and after every thread's graph is built: handles nobody took
/// are closed then).
pub fn reset_devices() {
    *devices() = None;
    super::arp::reset_shared_tables();
}

type Control = Arc<Mutex<Box<dyn ControlHandle>>>;

/// Takes queue `queue`'s handle of `spec` (`kind`: "receive" or
/// "transmit", for the messages), opening the device if nobody has; a
/// queue the device lacks or another element took is an error.
fn take_handle<H>(
    spec: &str,
    queue: u16,
    kind: &str,
    class: &str,
    handles: impl FnOnce(&mut Opened) -> &mut Vec<Option<H>>,
) -> Result<(H, Control), String> {
    with_device(spec, |d| {
        let control = d.control.clone();
        let slot = handles(d)
            .get_mut(queue as usize)
            .ok_or_else(|| format!("{spec} has no {kind} queue {queue}"))?;
        let handle = slot
            .take()
            .ok_or_else(|| format!("{kind} queue {queue} of {spec} is taken by another {class}"))?;
        Ok((handle, control))
    })
}

fn lock_control(c: &Control) -> MutexGuard<'_, Box<dyn ControlHandle>> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// The arguments FromDevice and ToDevice share.
struct Common {
    spec: String,
    queue: u16,
    n_queues: u16,
    burst: usize,
    flow_control: bool,
    offloads: oxnet_driver::Offloads,
}

fn common(a: &mut Args) -> Result<Common, String> {
    let spec = args::string(&a.required("DEVNAME")?)?;
    // Without a QUEUE, graph thread i (of -j N) takes queue i of N.
    let here = thread_place();
    let queue = match a.positional_or("QUEUE") {
        Some(q) if here.count > 1 => {
            return Err(format!(
                "QUEUE {q} with {} graph threads: leave QUEUE out, thread i takes queue i",
                here.count
            ))
        }
        Some(q) => u16::try_from(args::unsigned(&q)?).map_err(|_| format!("QUEUE {q} is too large"))?,
        None => here.index,
    };
    let n_queues = match a.keyword("N_QUEUES") {
        Some(n) => {
            let n = u16::try_from(args::unsigned(&n)?).map_err(|_| format!("N_QUEUES {n} is too large"))?;
            if n <= queue {
                return Err(format!("QUEUE {queue} needs N_QUEUES above it (N_QUEUES is {n})"));
            }
            n
        }
        None => (queue + 1).max(here.count),
    };
    let burst = match a.keyword("BURST") {
        Some(b) => args::unsigned(&b)? as usize,
        None => 32,
    };
    if burst == 0 || burst > 1024 {
        return Err(format!("BURST {burst} must be between 1 and 1024"));
    }
    let flow_control = opt(a.keyword("FLOW_CONTROL"), args::boolean, "FLOW_CONTROL")?.unwrap_or(false);
    let mut offloads = oxnet_driver::Offloads {
        rx_checksum: opt(a.keyword("RX_CHECKSUM"), args::boolean, "RX_CHECKSUM")?.unwrap_or(false),
        tx_checksum: opt(a.keyword("TX_CHECKSUM"), args::boolean, "TX_CHECKSUM")?.unwrap_or(false),
        rsc: opt(a.keyword("RSC"), args::boolean, "RSC")?.unwrap_or(false),
        ..Default::default()
    };
    if let Some(t) = a.keyword("TSO") {
        offloads.tso = match t.to_ascii_lowercase().as_str() {
            "off" | "false" => oxnet_driver::TsoMode::Off,
            "single" => oxnet_driver::TsoMode::Single,
            "multi" | "true" => oxnet_driver::TsoMode::Multi,
            _ => return Err(format!("TSO '{t}': use off, single or multi")),
        };
    }
    Ok(Common {
        spec,
        queue,
        n_queues,
        burst,
        flow_control,
        offloads,
    })
}

/// Receives from one queue of a device.
#[derive(Default)]
pub struct FromDevice {
    spec: String,
    queue: u16,
    burst: usize,
    timestamp: bool,
    rx: Option<Box<dyn RxHandle>>,
    control: Option<Control>,
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
        let promisc = opt(a.keyword("PROMISC"), args::boolean, "PROMISC")?.unwrap_or(false);
        self.timestamp = opt(a.keyword("TIMESTAMP"), args::boolean, "TIMESTAMP")?.unwrap_or(false);
        want(&c.spec, Some(c.n_queues), None, promisc, &c);
        (self.spec, self.queue, self.burst) = (c.spec, c.queue, c.burst);
        Ok(())
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        let (rx, control) = take_handle(&self.spec, self.queue, "receive", "FromDevice", |d| &mut d.rx)?;
        (self.rx, self.control) = (Some(rx), Some(control));
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// The queue's poll descriptor (TAP, AF_PACKET, AF_XDP), if it has one.
    fn idle_wake(&self, fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        match self.rx.as_ref().and_then(|rx| rx.poll_fd()) {
            Some(fd) => {
                fds.push(fd);
                true
            }
            None => false,
        }
    }
    #[inline]
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(rx) = &mut self.rx else { return false };
        let mut batch = crate::element::take_batch(self.burst);
        let n = rx.rx_batch(&mut batch, self.burst);
        if n == 0 {
            crate::element::recycle_batch(batch);
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
            "device" => Some(device_line(&self.control, &self.spec)),
            "stats" => Some(stats_lines(&self.control)),
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

fn device_line(control: &Option<Control>, spec: &str) -> String {
    match control {
        Some(c) => {
            let d = lock_control(c);
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

fn stats_lines(control: &Option<Control>) -> String {
    let Some(c) = control else { return String::new() };
    let s = lock_control(c).stats();
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
    tx: Option<Box<dyn TxHandle>>,
    control: Option<Control>,
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
            tx: None,
            control: None,
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
        let Some(tx) = &mut self.tx else { return };
        let sent = tx.tx_batch(&mut self.pending);
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
        if let Some(t) = opt(a.keyword("TIMEOUT"), args::seconds, "TIMEOUT")? {
            self.timeout_us = (t * 1e6).round() as u64;
        }
        if let Some(q) = opt(a.keyword("IQUEUE"), args::unsigned, "IQUEUE")? {
            self.iqueue = q as usize;
        }
        want(&c.spec, None, Some(c.n_queues), false, &c);
        (self.spec, self.queue, self.burst) = (c.spec, c.queue, c.burst);
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pull = ports.input_pull.first().copied().unwrap_or(false);
        let (tx, control) = take_handle(&self.spec, self.queue, "transmit", "ToDevice", |d| &mut d.tx)?;
        (self.tx, self.control) = (Some(tx), Some(control));
        Ok(())
    }
    #[inline]
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        if self.pending.is_empty() {
            // The common case: the batch becomes the pending one as it came.
            std::mem::swap(&mut self.pending, &mut batch);
        } else {
            self.pending.append(&mut batch);
        }
        crate::element::recycle_batch(batch);
        if self.pending.len() >= self.burst || self.timeout_us == 0 {
            self.flush();
        }
        self.bound();
        if !self.pending.is_empty() {
            self.arm(ctx);
        }
    }
    fn has_task(&self) -> bool {
        // Pushed to, it sends from push and its timer: no task to run.
        self.pull
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.pull {
            let room = self.burst.saturating_sub(self.pending.len());
            if room > 0 && ctx.upstream_nonempty(0) != Some(false) {
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
            "device" => Some(device_line(&self.control, &self.spec)),
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
