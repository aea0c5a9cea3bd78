//! Click's basic elements (Click's `elements/standard/*.hh` documentation
//! is the specification of each one's arguments, ports and handlers).

use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};
use std::collections::VecDeque;

/// A packet from the router's pool holding `data` (None: pool empty).
pub fn packet_from(ctx: &Ctx<'_>, data: &[u8]) -> Option<Packet> {
    let mut p = ctx.pool().alloc().ok()?;
    p.set_len(data.len().min(p.capacity())).ok()?;
    let n = p.len();
    p.copy_from_slice(&data[..n]);
    Some(p)
}

/// A copy of `packet` from the router's pool: its bytes (a chain is
/// copied into one buffer, cut at the buffer's size), its metadata and its
/// annotations (header marks on the same bytes), as Click's
/// `Packet::clone` gives a packet with the same annotations.
pub fn copy_packet(ctx: &Ctx<'_>, packet: &Packet) -> Option<Packet> {
    let mut c = if packet.is_chained() {
        let mut bytes = Vec::with_capacity(packet.total_len());
        packet.copy_chain_to(&mut bytes);
        packet_from(ctx, &bytes)?
    } else {
        packet_from(ctx, packet)?
    };
    c.copy_meta_from(packet);
    Some(c)
}

/// Idle: never pushes, never pulls; packets pushed to it are dropped.
/// Ports: any number of agnostic inputs and outputs.
#[derive(Default)]
pub struct Idle;

impl Element for Idle {
    fn class_name(&self) -> &'static str {
        "Idle"
    }
    fn port_count(&self) -> &'static str {
        "-/-"
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        drop(std::mem::take(batch));
    }
    fn pull(&mut self, _port: usize, _max: usize, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        None
    }
}

/// Discard(ACTIVE, BURST): drops every packet. Agnostic input; when pull,
/// a task pulls BURST packets at a time while ACTIVE. Handlers: `count`,
/// `reset_counts` (write), `active` (read/write).
pub struct Discard {
    count: u64,
    active: bool,
    burst: usize,
    pulling: bool,
}

impl Default for Discard {
    fn default() -> Discard {
        Discard {
            count: 0,
            active: true,
            burst: 1,
            pulling: false,
        }
    }
}

impl Element for Discard {
    fn class_name(&self) -> &'static str {
        "Discard"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = opt(a.keyword("ACTIVE"), args::boolean, "ACTIVE")? {
            self.active = v;
        }
        if let Some(v) = opt(a.keyword("BURST"), args::unsigned, "BURST")? {
            self.burst = v.max(1) as usize;
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        self.count += batch.len() as u64;
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active || ctx.ninputs() == 0 || !self.pulling {
            return false;
        }
        match ctx.pull(0, self.burst) {
            Some(b) if !b.is_empty() => {
                self.count += b.len() as u64;
                true
            }
            _ => false,
        }
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pulling = ports.input_pull.first().copied().unwrap_or(false);
        Ok(())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset_counts", false, true),
            ("active", true, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "active" => Some(self.active.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "reset_counts" => {
                self.count = 0;
                Some(Ok(()))
            }
            "active" => Some(args::boolean(value).map(|v| self.active = v)),
            _ => None,
        }
    }
}

/// Null: passes packets on unchanged (agnostic); PushNull and PullNull
/// are the push-only and pull-only versions.
pub struct Null {
    class: &'static str,
    processing: &'static str,
}

impl Null {
    pub fn agnostic() -> Null {
        Null {
            class: "Null",
            processing: AGNOSTIC,
        }
    }
    pub fn push_only() -> Null {
        Null {
            class: "PushNull",
            processing: PUSH,
        }
    }
    pub fn pull_only() -> Null {
        Null {
            class: "PullNull",
            processing: PULL,
        }
    }
}

impl Element for Null {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn processing(&self) -> &'static str {
        self.processing
    }
    #[inline]
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        ctx.forward(0, batch);
    }
}

/// Counter: counts packets and bytes passing through. Handlers: `count`,
/// `byte_count`, `reset` (write).
#[derive(Default)]
pub struct Counter {
    count: u64,
    bytes: u64,
    /// COUNT_CALL N HANDLER [VALUE]: when the count reaches N, write
    /// HANDLER (once), before the Nth packet goes on (Click's counter.hh).
    count_call: Option<(u64, String, String)>,
    called: bool,
}

impl Counter {
    fn call(&mut self, ctx: &mut Ctx<'_>) {
        self.called = true;
        if let Some((_, handler, value)) = &self.count_call {
            if let Err(e) = ctx.write_handler(handler, value) {
                eprintln!("{}: COUNT_CALL {handler}: {e}", ctx.name());
            }
        }
    }

    fn count_batch(&mut self, batch: &PacketBatch) {
        self.count += batch.len() as u64;
        self.bytes += batch.iter().map(|p| p.len() as u64).sum::<u64>();
    }
}

impl Element for Counter {
    fn class_name(&self) -> &'static str {
        "Counter"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(call) = a.keyword("COUNT_CALL") {
            let words = crate::lang::vars::split_words(&call);
            let usage = "COUNT_CALL: expected N HANDLER [VALUE]";
            let n = args::unsigned(words.first().ok_or(usage)?).map_err(|e| format!("COUNT_CALL: {e}"))?;
            let handler = words.get(1).ok_or(usage)?.clone();
            self.count_call = Some((n, handler, words[2..].join(" ")));
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        // A COUNT_CALL that this batch reaches: the packets before the Nth
        // go on first, then the call, then the rest, the Nth included, as
        // Click does packet by packet.
        if let Some((n, _, _)) = self.count_call {
            if !self.called && n > self.count && n <= self.count + batch.len() as u64 {
                let before = (n - self.count - 1) as usize;
                let mut first = PacketBatch::with_capacity(before);
                batch.consume_front(before, |p| first.push(p));
                self.count_batch(&first);
                ctx.push(0, first);
                self.call(ctx);
            }
        }
        if let Some(out) = self.simple_action(batch, ctx) {
            ctx.push(0, out);
        }
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        self.count_batch(&batch);
        // On the pull path the call comes after the batch that reached N.
        if let Some((n, _, _)) = self.count_call {
            if !self.called && self.count >= n {
                self.call(ctx);
            }
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("byte_count", true, false),
            ("reset", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "byte_count" => Some(self.bytes.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "reset").then(|| {
            self.count = 0;
            self.bytes = 0;
            self.called = false;
            Ok(())
        })
    }
}

/// Switch([K]): every packet goes to output K (-1: dropped). Push, one
/// input, any number of outputs. Handler `switch` (read/write) changes K
/// at run time (Click's switch.hh).
#[derive(Default)]
pub struct Switch {
    output: i64,
    drops: u64,
}

impl Element for Switch {
    fn class_name(&self) -> &'static str {
        "Switch"
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(k) = opt(a.positional_or("OUTPUT"), args::integer, "OUTPUT")? {
            self.output = k;
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        if self.output >= 0 && (self.output as usize) < ctx.noutputs() {
            ctx.push(self.output as usize, batch);
        } else {
            self.drops += batch.len() as u64;
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("switch", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "switch").then(|| self.output.to_string())
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "switch").then(|| match args::integer(value.trim()) {
            Ok(k) if k >= -1 => {
                self.output = k;
                Ok(())
            }
            Ok(k) => Err(format!("switch: {k} is not an output or -1")),
            Err(e) => Err(format!("switch: {e}")),
        })
    }
}

/// Tee(N): a copy of each packet on every output (the original on the
/// last). Push. Copies come from the router's pool; a copy that finds the
/// pool empty is not made, and counted (`drops`).
#[derive(Default)]
pub struct Tee {
    outputs: usize,
    drops: u64,
}

impl Element for Tee {
    fn class_name(&self) -> &'static str {
        "Tee"
    }
    fn port_count(&self) -> &'static str {
        "1/1-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(n) = opt(a.positional_or("N"), args::unsigned, "N")? {
            self.outputs = n as usize;
        }
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        let outputs = ports.outputs();
        if self.outputs != 0 && self.outputs != outputs {
            return Err(format!("{} outputs connected, but N is {}", outputs, self.outputs));
        }
        self.outputs = outputs;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let n = ctx.noutputs();
        for port in 0..n.saturating_sub(1) {
            let mut copy = PacketBatch::with_capacity(batch.len());
            for p in batch.iter() {
                match copy_packet(ctx, p) {
                    Some(c) => copy.push(c),
                    None => self.drops += 1,
                }
            }
            ctx.push(port, copy);
        }
        ctx.push(n.saturating_sub(1), batch);
    }
    crate::drops_handler!();
}

/// Print(LABEL, MAXLENGTH, CONTENTS, ACTIVE): prints each packet on
/// standard error as Click does: `LABEL: ` then the length in 4 columns,
/// then ` | ` and up to MAXLENGTH (default 24) bytes in hex, a space
/// every 4 bytes (CONTENTS ASCII: printable characters, NONE: nothing).
pub struct Print {
    label: String,
    max: Option<usize>,
    contents: Contents,
    active: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Contents {
    None,
    Hex,
    Ascii,
}

impl Default for Print {
    fn default() -> Print {
        Print {
            label: String::new(),
            max: Some(24),
            contents: Contents::Hex,
            active: true,
        }
    }
}

impl Print {
    fn line(&self, p: &[u8]) -> String {
        let mut s = String::new();
        let mut sep = "";
        if !self.label.is_empty() {
            s += &self.label;
            sep = ": ";
        }
        s += &format!("{sep}{:4}", p.len());
        let bytes = match (self.contents, self.max) {
            (Contents::None, _) => 0,
            (_, Some(m)) => m.min(p.len()),
            (_, None) => p.len(),
        };
        if bytes > 0 {
            s += " | ";
            for (i, b) in p[..bytes].iter().enumerate() {
                match self.contents {
                    Contents::Hex => {
                        if i > 0 && i % 4 == 0 {
                            s.push(' ');
                        }
                        s += &format!("{b:02x}");
                    }
                    _ => {
                        if i % 8 == 0 {
                            s.push(' ');
                        }
                        s.push(if (32..=126).contains(b) { *b as char } else { '.' });
                    }
                }
            }
        }
        s
    }
}

impl Element for Print {
    fn class_name(&self) -> &'static str {
        "Print"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(l) = a.positional_or("LABEL") {
            self.label = args::string(&l)?;
        }
        if let Some(m) = opt(a.positional_or("MAXLENGTH"), args::integer, "MAXLENGTH")? {
            self.max = usize::try_from(m).ok();
        }
        if let Some(c) = a.keyword("CONTENTS") {
            self.contents = match c.trim() {
                "HEX" | "hex" | "true" => Contents::Hex,
                "ASCII" | "ascii" => Contents::Ascii,
                "NONE" | "none" | "false" => Contents::None,
                other => return Err(format!("CONTENTS: '{other}' is not HEX, ASCII or NONE")),
            };
        }
        if let Some(v) = opt(a.keyword("ACTIVE"), args::boolean, "ACTIVE")? {
            self.active = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if self.active {
            use std::io::Write;
            let mut err = std::io::stderr().lock();
            for p in batch.iter() {
                let _ = writeln!(err, "{}", self.line(p));
            }
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("active", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "active").then(|| self.active.to_string())
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "active").then(|| args::boolean(value).map(|v| self.active = v))
    }
}

/// The data InfiniteSource sends when given none: 64 bytes, zero.
const DEFAULT_DATA_LEN: usize = 64;

/// InfiniteSource(DATA, LIMIT, BURST, ACTIVE, STOP, LENGTH): sends copies
/// of DATA, BURST at a time, LIMIT in all (-1: no limit). With STOP true
/// the router stops once LIMIT packets are out. Agnostic output: pushes
/// from a task, or answers pulls. Handlers: `count`, `reset` (write),
/// `active`, `limit`, `burst`, `length` (read/write), `data` (read).
pub struct InfiniteSource {
    data: Vec<u8>,
    limit: i64,
    burst: usize,
    active: bool,
    stop: bool,
    count: u64,
    stopped: bool,
}

impl Default for InfiniteSource {
    fn default() -> InfiniteSource {
        InfiniteSource {
            data: vec![0; DEFAULT_DATA_LEN],
            limit: -1,
            burst: 1,
            active: true,
            stop: false,
            count: 0,
            stopped: false,
        }
    }
}

impl InfiniteSource {
    fn allowed(&self) -> usize {
        if self.limit < 0 {
            usize::MAX
        } else {
            (self.limit as u64).saturating_sub(self.count) as usize
        }
    }

    fn make(&mut self, n: usize, ctx: &mut Ctx<'_>) -> PacketBatch {
        let mut batch = PacketBatch::with_capacity(n);
        // One trip to the pool for the whole burst, then each packet gets
        // the data (every packet is a pool buffer, freed where it ends).
        let got = ctx.pool().alloc_batch(&mut batch, n);
        let len = self.data.len().min(ctx.pool().data_room());
        for p in batch.iter_mut() {
            if p.set_len(len).is_ok() {
                p.copy_from_slice(&self.data[..len]);
            }
        }
        self.count += got as u64;
        batch
    }

    fn check_stop(&mut self, ctx: &mut Ctx<'_>) {
        if self.stop && !self.stopped && self.allowed() == 0 {
            self.stopped = true;
            ctx.stop();
        }
    }
}

impl Element for InfiniteSource {
    fn class_name(&self) -> &'static str {
        "InfiniteSource"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(d) = a.positional_or("DATA") {
            self.data = args::unquote(&d)?;
        }
        if let Some(v) = opt(a.positional_or("LIMIT"), args::integer, "LIMIT")? {
            self.limit = v;
        }
        if let Some(v) = opt(a.positional_or("BURST"), args::unsigned, "BURST")? {
            self.burst = (v as usize).max(1);
        }
        if let Some(v) = opt(a.positional_or("ACTIVE"), args::boolean, "ACTIVE")? {
            self.active = v;
        }
        if let Some(v) = opt(a.keyword("STOP"), args::boolean, "STOP")? {
            self.stop = v;
        }
        if let Some(len) = opt(a.keyword("LENGTH"), args::unsigned, "LENGTH")? {
            self.data = resize_data(&self.data, len as usize);
        }
        // Accepted and not used: packets here carry no timestamp yet.
        let _ = a.keyword("TIMESTAMP");
        let _ = a.keyword("END_CALL");
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active || ctx.noutputs() == 0 {
            return false;
        }
        let mut n = self.burst.min(self.allowed());
        if n == 0 {
            self.check_stop(ctx);
            return false;
        }
        // A full queue downstream: sleep until it has room (Click's
        // nonfull notifier) instead of making packets it would drop.
        if let Some(room) = ctx.downstream_room(0) {
            n = n.min(room);
            if n == 0 {
                return false;
            }
        }
        let batch = self.make(n, ctx);
        let worked = !batch.is_empty();
        ctx.push(0, batch);
        self.check_stop(ctx);
        worked
    }
    fn pull(&mut self, _port: usize, max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if !self.active {
            return None;
        }
        let n = self.burst.min(max).min(self.allowed());
        let batch = self.make(n, ctx);
        self.check_stop(ctx);
        (!batch.is_empty()).then_some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset", false, true),
            ("active", true, true),
            ("limit", true, true),
            ("burst", true, true),
            ("length", true, true),
            ("data", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "active" => Some(self.active.to_string()),
            "limit" => Some(self.limit.to_string()),
            "burst" => Some(self.burst.to_string()),
            "length" => Some(self.data.len().to_string()),
            "data" => Some(String::from_utf8_lossy(&self.data).into_owned()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "reset" => {
                self.count = 0;
                self.stopped = false;
                Ok(())
            }
            "active" => args::boolean(value).map(|v| self.active = v),
            "limit" => args::integer(value).map(|v| self.limit = v),
            "burst" => args::unsigned(value).map(|v| self.burst = (v as usize).max(1)),
            "length" => args::unsigned(value).map(|v| self.data = resize_data(&self.data, v as usize)),
            _ => return None,
        })
    }
}

/// DATA repeated or cut to `len` bytes (InfiniteSource's LENGTH).
fn resize_data(data: &[u8], len: usize) -> Vec<u8> {
    if data.is_empty() {
        return vec![0; len];
    }
    data.iter().copied().cycle().take(len).collect()
}

/// Queue(CAPACITY) and SimpleQueue: a FIFO between a push input and a
/// pull output; packets beyond CAPACITY (default 1000) are dropped and
/// counted. Handlers: `length`, `highwater_length`, `capacity`
/// (read/write), `drops`, `reset_counts` and `reset` (write).
pub struct Queue {
    class: &'static str,
    packets: VecDeque<Packet>,
    capacity: usize,
    highwater: usize,
    drops: u64,
    /// The configuration after a write to `capacity` (None: as given).
    config: Option<String>,
}

impl Queue {
    pub fn new(class: &'static str) -> Queue {
        Queue {
            class,
            packets: VecDeque::new(),
            capacity: 1000,
            highwater: 0,
            drops: 0,
            config: None,
        }
    }
}

impl Element for Queue {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn processing(&self) -> &'static str {
        PUSH_TO_PULL
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(c) = opt(a.positional_or("CAPACITY"), args::unsigned, "CAPACITY")? {
            self.capacity = c as usize;
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        if self.class == "FrontDropQueue" {
            // Full: the oldest packets make room (Click's frontdropqueue.hh).
            let n = batch.len();
            batch.consume_front(n, |p| self.packets.push_back(p));
            while self.packets.len() > self.capacity {
                self.packets.pop_front();
                self.drops += 1;
            }
            self.highwater = self.highwater.max(self.packets.len());
            return;
        }
        let room = self.capacity.saturating_sub(self.packets.len());
        let take = room.min(batch.len());
        self.drops += (batch.len() - take) as u64;
        batch.consume_front(take, |p| self.packets.push_back(p));
        self.highwater = self.highwater.max(self.packets.len());
    }
    fn room(&self, _input: usize) -> Option<usize> {
        // A FrontDropQueue never refuses: it drops its oldest instead.
        (self.class != "FrontDropQueue").then(|| self.capacity.saturating_sub(self.packets.len()))
    }
    fn nonempty(&self, _output: usize) -> Option<bool> {
        // Click's empty notifier: a puller downstream sleeps while false.
        Some(!self.packets.is_empty())
    }
    fn pull(&mut self, _port: usize, max: usize, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
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
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("length", true, false),
            ("highwater_length", true, false),
            ("capacity", true, true),
            ("drops", true, false),
            ("reset_counts", false, true),
            ("reset", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "length" => Some(self.packets.len().to_string()),
            "highwater_length" => Some(self.highwater.to_string()),
            "capacity" => Some(self.capacity.to_string()),
            "config" => self.config.clone(),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "capacity" => args::unsigned(value.trim()).map(|v| {
                // A smaller capacity drops what no longer fits (the newest
                // packets), counted as drops; `config` shows the new value.
                self.capacity = v as usize;
                while self.packets.len() > self.capacity {
                    self.packets.pop_back();
                    self.drops += 1;
                }
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

/// Unqueue(BURST, LIMIT, ACTIVE): a task that pulls up to BURST packets
/// (default 1) and pushes them, LIMIT in all (-1: no limit). Handlers:
/// `count`, `reset` (write), `active`, `limit`, `burst` (read/write).
pub struct Unqueue {
    burst: usize,
    limit: i64,
    active: bool,
    count: u64,
}

impl Default for Unqueue {
    fn default() -> Unqueue {
        Unqueue {
            burst: 1,
            limit: -1,
            active: true,
            count: 0,
        }
    }
}

impl Element for Unqueue {
    fn class_name(&self) -> &'static str {
        "Unqueue"
    }
    fn processing(&self) -> &'static str {
        PULL_TO_PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = opt(a.positional_or("BURST"), args::integer, "BURST")? {
            // Click: BURST 0 or negative means "as many as are there".
            self.burst = if v <= 0 { usize::MAX } else { v as usize };
        }
        if let Some(v) = opt(a.keyword("LIMIT"), args::integer, "LIMIT")? {
            self.limit = v;
        }
        if let Some(v) = opt(a.keyword("ACTIVE"), args::boolean, "ACTIVE")? {
            self.active = v;
        }
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active {
            return false;
        }
        let allowed = if self.limit < 0 {
            usize::MAX
        } else {
            (self.limit as u64).saturating_sub(self.count) as usize
        };
        let n = self.burst.min(allowed).min(256);
        // Asleep while the queue upstream says it is empty (Click's empty
        // notifier): no pull call down an empty path.
        if n == 0 || ctx.upstream_nonempty(0) == Some(false) {
            return false;
        }
        match ctx.pull(0, n) {
            Some(batch) if !batch.is_empty() => {
                self.count += batch.len() as u64;
                ctx.push(0, batch);
                true
            }
            _ => false,
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset", false, true),
            ("active", true, true),
            ("limit", true, true),
            ("burst", true, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "active" => Some(self.active.to_string()),
            "limit" => Some(self.limit.to_string()),
            "burst" => Some(if self.burst == usize::MAX {
                "0".into()
            } else {
                self.burst.to_string()
            }),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "reset" => {
                self.count = 0;
                Ok(())
            }
            "active" => args::boolean(value).map(|v| self.active = v),
            "limit" => args::integer(value).map(|v| self.limit = v),
            "burst" => args::integer(value).map(|v| self.burst = if v <= 0 { usize::MAX } else { v as usize }),
            _ => return None,
        })
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "Counter",
        "Discard",
        "FrontDropQueue",
        "Idle",
        "InfiniteSource",
        "Null",
        "Print",
        "PullNull",
        "PushNull",
        "Queue",
        "SimpleQueue",
        "Switch",
        "Tee",
        "Unqueue",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "Counter" => Box::<Counter>::default(),
        "Discard" => Box::<Discard>::default(),
        "Idle" => Box::new(Idle),
        "InfiniteSource" => Box::<InfiniteSource>::default(),
        "Null" => Box::new(Null::agnostic()),
        "PullNull" => Box::new(Null::pull_only()),
        "PushNull" => Box::new(Null::push_only()),
        "Print" => Box::<Print>::default(),
        "Queue" => Box::new(Queue::new("Queue")),
        "SimpleQueue" => Box::new(Queue::new("SimpleQueue")),
        "FrontDropQueue" => Box::new(Queue::new("FrontDropQueue")),
        "Switch" => Box::<Switch>::default(),
        "Tee" => Box::<Tee>::default(),
        "Unqueue" => Box::<Unqueue>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_lines_are_formatted_as_clicks() {
        let p = Print {
            label: "ok".into(),
            ..Print::default()
        };
        assert_eq!(p.line(&[]), "ok:    0");
        let data: Vec<u8> = (0..30).collect();
        assert_eq!(
            p.line(&data),
            "ok:   30 | 00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617"
        );
        let unlabelled = Print::default();
        assert_eq!(unlabelled.line(&[]), "   0");
        let ascii = Print {
            contents: Contents::Ascii,
            ..Print::default()
        };
        assert_eq!(ascii.line(b"hi\x01there!!"), "  10 |  hi.there !!");
    }

    #[test]
    fn infinite_source_length_repeats_or_cuts_data() {
        assert_eq!(resize_data(b"ab", 5), b"ababa");
        assert_eq!(resize_data(b"abcdef", 2), b"ab");
        assert_eq!(resize_data(b"", 3), [0, 0, 0]);
    }
}
