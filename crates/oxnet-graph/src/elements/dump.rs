//! pcap files, as `tcpdump -w` writes them (Click's
//! `elements/userlevel/fromdump.hh` and `todump.hh` documentation is the
//! specification; the file format is libpcap's: a 24-byte file header —
//! magic 0xA1B2C3D4 for microseconds or 0xA1B23C4D for nanoseconds, in
//! the writer's byte order, version 2.4, snap length, link type — then a
//! 16-byte header per packet: seconds, fraction, captured length, length
//! on the wire).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | FromDump(FILENAME, ...) | 0/1-2 | agnostic, output 1 push | sends the packets of a pcap file (either byte order, micro- or nanosecond), pushed from a task or pulled |
//! | ToDump(FILENAME, ...) | 1/0-1 | agnostic | writes packets to a pcap file (`-`: standard output), passes them on if output 0 is connected |

use super::ipsumdump_fields as f;
use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::{Packet, PacketBatch};
use std::io::Write;

const MAGIC_USEC: u32 = 0xA1B2_C3D4;
const MAGIC_NSEC: u32 = 0xA1B2_3C4D;
/// Link types (pcap's DLT_ values).
const DLT_EN10MB: u32 = 1;
const DLT_RAW: u32 = 101;
const DLT_HOST_RAW: u32 = 12;
const DLT_NULL: u32 = 0;
const DLT_LINUX_SLL: u32 = 113;
/// A captured length beyond this is a corrupt record, not a packet.
const MAX_CAPLEN: u32 = 256 * 1024;

/// The link type of an ENCAP name (Click's names).
fn encap_dlt(name: &str) -> Option<u32> {
    Some(match name.trim().to_ascii_uppercase().as_str() {
        "ETHER" => DLT_EN10MB,
        "IP" => DLT_RAW,
        "NULL" => DLT_NULL,
        "SLL" => DLT_LINUX_SLL,
        "FDDI" => 10,
        "ATM" => 100,
        "802_11" => 105,
        "AIRONET" => 120,
        "HDLC" => 104,
        "PPP_HDLC" => 50,
        "PPP" => 9,
        "SUNATM" => 123,
        "PRISM" => 119,
        _ => return None,
    })
}

fn dlt_name(dlt: u32) -> String {
    match dlt {
        DLT_EN10MB => "ETHER".into(),
        DLT_RAW | DLT_HOST_RAW => "IP".into(),
        DLT_NULL => "NULL".into(),
        DLT_LINUX_SLL => "SLL".into(),
        other => other.to_string(),
    }
}

/// A parsed pcap file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapHeader {
    pub swapped: bool,
    pub nano: bool,
    pub snaplen: u32,
    pub linktype: u32,
}

/// Reads the 24-byte file header: the magic tells byte order and
/// timestamp precision.
pub fn parse_pcap_header(b: &[u8]) -> Result<PcapHeader, String> {
    if b.len() < 24 {
        return Err("not a pcap file: shorter than its 24-byte header".into());
    }
    let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let (little, nano) = match (le, be) {
        (MAGIC_USEC, _) => (true, false),
        (MAGIC_NSEC, _) => (true, true),
        (_, MAGIC_USEC) => (false, false),
        (_, MAGIC_NSEC) => (false, true),
        _ => return Err(format!("not a pcap file: magic {le:#010x}")),
    };
    let word = |at: usize| {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if little {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    Ok(PcapHeader {
        swapped: little != cfg!(target_endian = "little"),
        nano,
        snaplen: word(16),
        linktype: word(20),
    })
}

/// FromDump(FILENAME, STOP, TIMING, SAMPLE, FORCE_IP, START, START_AFTER,
/// END, END_AFTER, INTERVAL, END_CALL, ACTIVE, FILEPOS, MMAP): sends the
/// packets of a pcap file (gzip or bzip2 compressed too) with their
/// timestamps and, when the capture was cut, the missing bytes in the
/// extra length annotation. STOP true:
/// asks the router to stop at the end (or END). TIMING: keeps the gaps
/// between timestamps. FORCE_IP: only IPv4 packets, network header marked
/// (others to output 1, or dropped and counted); without it, packets of
/// a raw-IP file still get their network header marked. START/END
/// (absolute seconds), START_AFTER/END_AFTER (relative to the first
/// packet), INTERVAL (relative to the first packet sent). END_CALL: a
/// handler to write at the end (default: none; STOP and END_CALL
/// exclude each other). SAMPLE must be 1; MMAP is accepted. A truncated
/// or corrupt record ends the file (counted in `errors`). Handlers:
/// `count` (r), `reset_counts` (w), `active` (rw), `encap`, `filename`,
/// `filesize`, `filepos`, `sampling_prob`, `errors`, `drops` (r).
pub struct FromDump {
    filename: String,
    stop: bool,
    timing: bool,
    force_ip: bool,
    active: bool,
    start: Option<i64>,
    start_after: Option<i64>,
    end: Option<i64>,
    end_after: Option<i64>,
    interval: Option<i64>,
    end_call: Option<(String, String)>,
    filepos: Option<usize>,
    text: Vec<u8>,
    header: Option<PcapHeader>,
    pos: usize,
    first_ts: Option<i64>,
    first_sent_ts: Option<i64>,
    waiting: Option<Packet>,
    timing_offset: Option<i64>,
    timer: Option<TimerId>,
    ended: bool,
    count: u64,
    errors: u64,
    drops: u64,
}

impl Default for FromDump {
    fn default() -> FromDump {
        FromDump {
            filename: String::new(),
            stop: false,
            timing: false,
            force_ip: false,
            active: true,
            start: None,
            start_after: None,
            end: None,
            end_after: None,
            interval: None,
            end_call: None,
            filepos: None,
            text: Vec::new(),
            header: None,
            pos: 24,
            first_ts: None,
            first_sent_ts: None,
            waiting: None,
            timing_offset: None,
            timer: None,
            ended: false,
            count: 0,
            errors: 0,
            drops: 0,
        }
    }
}

fn ns(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

impl FromDump {
    fn word(&self, at: usize) -> u32 {
        let b = [self.text[at], self.text[at + 1], self.text[at + 2], self.text[at + 3]];
        let v = u32::from_ne_bytes(b);
        if self.header.is_some_and(|h| h.swapped) {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// The next record as (timestamp, wire length, data range); None at
    /// the end or at a truncated/corrupt record.
    fn next_record(&mut self) -> Option<(i64, u32, std::ops::Range<usize>)> {
        let h = self.header?;
        if self.pos + 16 > self.text.len() {
            if self.pos < self.text.len() {
                self.errors += 1;
                self.pos = self.text.len();
            }
            return None;
        }
        let sec = i64::from(self.word(self.pos));
        let frac = i64::from(self.word(self.pos + 4));
        let caplen = self.word(self.pos + 8);
        let len = self.word(self.pos + 12);
        let start = self.pos + 16;
        if caplen > MAX_CAPLEN || start + caplen as usize > self.text.len() {
            self.errors += 1;
            self.pos = self.text.len();
            return None;
        }
        self.pos = start + caplen as usize;
        let ts = sec * 1_000_000_000 + if h.nano { frac } else { frac * 1000 };
        Some((ts, len.max(caplen), start..start + caplen as usize))
    }

    /// The next packet to send (None: none now), and whether it goes to
    /// output 1 (not IP under FORCE_IP).
    fn next_packet(&mut self, ctx: &mut Ctx<'_>) -> Option<(Packet, bool)> {
        loop {
            let p = match self.waiting.take() {
                Some(p) => p,
                None => {
                    if self.ended {
                        return None;
                    }
                    let Some((ts, len, range)) = self.next_record() else {
                        self.ended = true;
                        return None;
                    };
                    let first = *self.first_ts.get_or_insert(ts);
                    if self.start.is_some_and(|s| ts < s) || self.start_after.is_some_and(|s| ts < first + s) {
                        continue;
                    }
                    let first_sent = *self.first_sent_ts.get_or_insert(ts);
                    if self.end.is_some_and(|e| ts >= e)
                        || self.end_after.is_some_and(|e| ts >= first + e)
                        || self.interval.is_some_and(|e| ts >= first_sent + e)
                    {
                        self.ended = true;
                        return None;
                    }
                    let Ok(mut p) = ctx.pool().alloc() else {
                        self.drops += 1;
                        continue;
                    };
                    let caplen = range.len().min(p.capacity());
                    if p.set_len(caplen).is_err() {
                        self.drops += 1;
                        continue;
                    }
                    p.copy_from_slice(&self.text[range.start..range.start + caplen]);
                    p.anno_mut().timestamp_ns = ts;
                    f::set_anno_u32(&mut p, f::EXTRA_LENGTH_ANNO, len - caplen as u32);
                    p
                }
            };
            if self.timing {
                let now = ctx.now_us() as i64 * 1000;
                let ts = p.anno().timestamp_ns;
                let offset = *self.timing_offset.get_or_insert(now - ts);
                if now < ts + offset {
                    if self.timer.is_none() {
                        self.timer = Some(ctx.schedule_after_us(((ts + offset - now) as u64).div_ceil(1000)));
                    }
                    self.waiting = Some(p);
                    return None;
                }
            }
            return Some(self.classify(p));
        }
    }

    /// Marks the network header where the link type says it is; false if
    /// FORCE_IP and the packet is not IPv4.
    fn classify(&self, mut p: Packet) -> (Packet, bool) {
        let dlt = self.header.map_or(DLT_EN10MB, |h| h.linktype);
        let offset = match dlt {
            DLT_RAW | DLT_HOST_RAW => Some(0),
            DLT_EN10MB if self.force_ip => {
                let ethertype = p.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
                match ethertype {
                    Some(0x0800) => Some(14),
                    Some(0x8100) if p.get(16..18) == Some(&[0x08, 0x00]) => Some(18),
                    _ => None,
                }
            }
            DLT_LINUX_SLL if self.force_ip => (p.get(14..16) == Some(&[0x08, 0x00])).then_some(16),
            DLT_NULL if self.force_ip => Some(4),
            _ => None,
        };
        let ip_ok = offset.and_then(|o| {
            let ip = p.get(o..)?;
            let hl = usize::from(*ip.first()? & 0xf) * 4;
            (ip[0] >> 4 == 4 && hl >= 20 && ip.len() >= hl).then_some((o, hl))
        });
        match ip_ok {
            Some((o, hl)) => {
                let _ = p.set_network_header(o, hl);
                (p, false)
            }
            None => (p, self.force_ip),
        }
    }

    fn at_end(&mut self, ctx: &mut Ctx<'_>) {
        if !self.ended || self.waiting.is_some() {
            return;
        }
        if self.stop {
            self.stop = false;
            ctx.stop();
        }
        if let Some((handler, value)) = self.end_call.take() {
            if let Err(e) = ctx.write_handler(&handler, &value) {
                eprintln!("{}: END_CALL {handler}: {e}", ctx.name());
            }
        }
    }

    fn emit(&mut self, p: Packet, not_ip: bool, ctx: &mut Ctx<'_>) {
        let mut batch = PacketBatch::with_capacity(1);
        if not_ip {
            if ctx.noutputs() > 1 {
                batch.push(p);
                ctx.push(1, batch);
            } else {
                self.drops += 1;
            }
            return;
        }
        self.count += 1;
        batch.push(p);
        ctx.push(0, batch);
    }
}

impl Element for FromDump {
    fn class_name(&self) -> &'static str {
        "FromDump"
    }
    fn port_count(&self) -> &'static str {
        "0/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.filename = args::string(&a.required("FILENAME")?)?;
        for (key, slot) in [
            ("STOP", &mut self.stop),
            ("TIMING", &mut self.timing),
            ("FORCE_IP", &mut self.force_ip),
            ("ACTIVE", &mut self.active),
        ] {
            if let Some(v) = opt(a.keyword(key), args::boolean, key)? {
                *slot = v;
            }
        }
        opt(a.keyword("MMAP"), args::boolean, "MMAP")?;
        if let Some(s) = a.keyword("SAMPLE") {
            let v: f64 = s.trim().parse().map_err(|_| format!("SAMPLE: '{s}' is not a number"))?;
            if v < 1.0 {
                return Err("SAMPLE: only 1 (every packet) is supported".into());
            }
        }
        let time = |v: Option<String>, key: &str| opt(v, args::seconds, key).map(|t| t.map(ns));
        self.start = time(a.keyword("START"), "START")?;
        self.start_after = time(a.keyword("START_AFTER"), "START_AFTER")?;
        self.end = time(a.keyword("END"), "END")?;
        self.end_after = time(a.keyword("END_AFTER"), "END_AFTER")?;
        self.interval = time(a.keyword("INTERVAL"), "INTERVAL")?;
        if self.start.is_some() && self.start_after.is_some() {
            return Err("supply at most one of START and START_AFTER".into());
        }
        if [self.end, self.end_after, self.interval]
            .iter()
            .filter(|t| t.is_some())
            .count()
            > 1
        {
            return Err("supply at most one of END, END_AFTER and INTERVAL".into());
        }
        if let Some(call) = a.keyword("END_CALL") {
            if self.stop {
                return Err("END_CALL and STOP are mutually exclusive".into());
            }
            let call = call.trim().to_string();
            let (h, v) = call.split_once(char::is_whitespace).unwrap_or((&call, ""));
            self.end_call = Some((h.to_string(), v.trim().to_string()));
        }
        if let Some(v) = opt(a.keyword("FILEPOS"), args::unsigned, "FILEPOS")? {
            self.filepos = Some(v as usize);
        }
        Ok(())
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        self.text = f::read_trace(&self.filename).map_err(|e| format!("{}: {e}", self.filename))?;
        self.header = Some(parse_pcap_header(&self.text).map_err(|e| format!("{}: {e}", self.filename))?);
        self.pos = self.filepos.unwrap_or(24).max(24);
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active || ctx.noutputs() == 0 {
            return false;
        }
        let sent = match self.next_packet(ctx) {
            Some((p, not_ip)) => {
                self.emit(p, not_ip, ctx);
                true
            }
            None => false,
        };
        self.at_end(ctx);
        sent
    }
    fn pull(&mut self, _port: usize, _max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if !self.active {
            return None;
        }
        let mut out = None;
        while let Some((p, not_ip)) = self.next_packet(ctx) {
            if not_ip {
                self.emit(p, true, ctx);
                continue;
            }
            self.count += 1;
            let mut b = PacketBatch::with_capacity(1);
            b.push(p);
            out = Some(b);
            break;
        }
        self.at_end(ctx);
        out
    }
    fn run_timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {
        self.timer = None;
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset_counts", false, true),
            ("active", true, true),
            ("encap", true, false),
            ("filename", true, false),
            ("filesize", true, false),
            ("filepos", true, false),
            ("sampling_prob", true, false),
            ("errors", true, false),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "count" => self.count.to_string(),
            "active" => self.active.to_string(),
            "encap" => dlt_name(self.header.map_or(DLT_EN10MB, |h| h.linktype)),
            "filename" => self.filename.clone(),
            "filesize" => self.text.len().to_string(),
            "filepos" => self.pos.to_string(),
            "sampling_prob" => "1".into(),
            "errors" => self.errors.to_string(),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
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

/// ToDump(FILENAME, SNAPLEN, ENCAP, USE_ENCAP_FROM, EXTRA_LENGTH, NANO,
/// UNBUFFERED): writes packets to a pcap file in this machine's byte
/// order: at most SNAPLEN bytes each (default 2000; 0: all), the wire
/// length including the extra length annotation (EXTRA_LENGTH, default
/// true), timestamps in microseconds or, with NANO, nanoseconds. ENCAP
/// (default ETHER; IP for raw IP packets) is the file's link type;
/// USE_ENCAP_FROM names elements whose `encap` handler gives it (read
/// when the router starts). Handlers: `count` (r), `reset_counts` (w),
/// `filename` (r).
pub struct ToDump {
    filename: String,
    snaplen: usize,
    linktype: u32,
    use_encap_from: Vec<String>,
    extra_length: bool,
    nano: bool,
    out: Option<Box<dyn Write>>,
    header_written: bool,
    count: u64,
    pulling: bool,
}

impl Default for ToDump {
    fn default() -> ToDump {
        ToDump {
            filename: String::new(),
            snaplen: 2000,
            linktype: DLT_EN10MB,
            use_encap_from: Vec::new(),
            extra_length: true,
            nano: false,
            out: None,
            header_written: false,
            count: 0,
            pulling: false,
        }
    }
}

/// The 24-byte pcap file header, in this machine's byte order.
pub fn pcap_file_header(nano: bool, snaplen: u32, linktype: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&(if nano { MAGIC_NSEC } else { MAGIC_USEC }).to_ne_bytes());
    h[4..6].copy_from_slice(&2u16.to_ne_bytes());
    h[6..8].copy_from_slice(&4u16.to_ne_bytes());
    h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
    h[20..24].copy_from_slice(&linktype.to_ne_bytes());
    h
}

impl ToDump {
    fn write_header(&mut self) {
        if self.header_written {
            return;
        }
        self.header_written = true;
        let snap = if self.snaplen == 0 { 0xffff } else { self.snaplen as u32 };
        let h = pcap_file_header(self.nano, snap, self.linktype);
        if let Some(out) = self.out.as_mut() {
            let _ = out.write_all(&h).and_then(|()| out.flush());
        }
    }

    fn write_batch(&mut self, batch: &PacketBatch) {
        self.write_header();
        let mut buf = Vec::new();
        for p in batch.iter() {
            let ts = p.anno().timestamp_ns;
            let sec = ts.div_euclid(1_000_000_000) as u32;
            let sub = ts.rem_euclid(1_000_000_000);
            let frac = if self.nano { sub } else { sub / 1000 } as u32;
            let caplen = if self.snaplen == 0 {
                p.len()
            } else {
                p.len().min(self.snaplen)
            };
            let extra = if self.extra_length {
                f::anno_u32(p, f::EXTRA_LENGTH_ANNO)
            } else {
                0
            };
            buf.extend_from_slice(&sec.to_ne_bytes());
            buf.extend_from_slice(&frac.to_ne_bytes());
            buf.extend_from_slice(&(caplen as u32).to_ne_bytes());
            buf.extend_from_slice(&(p.len() as u32 + extra).to_ne_bytes());
            buf.extend_from_slice(&p[..caplen]);
            self.count += 1;
        }
        if let Some(out) = self.out.as_mut() {
            let _ = out.write_all(&buf).and_then(|()| out.flush());
        }
    }
}

impl Element for ToDump {
    fn class_name(&self) -> &'static str {
        "ToDump"
    }
    fn port_count(&self) -> &'static str {
        "1/0-1"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.filename = args::string(&a.required("FILENAME")?)?;
        if let Some(v) = opt(a.keyword("SNAPLEN"), args::unsigned, "SNAPLEN")? {
            self.snaplen = v as usize;
        }
        let encap = a.keyword("ENCAP");
        let from = a.keyword("USE_ENCAP_FROM");
        if encap.is_some() && from.is_some() {
            return Err("specify at most one of ENCAP and USE_ENCAP_FROM".into());
        }
        if let Some(e) = encap {
            self.linktype =
                encap_dlt(&e).ok_or_else(|| format!("ENCAP: '{}' is not a known encapsulation", e.trim()))?;
        }
        if let Some(list) = from {
            self.use_encap_from = crate::lang::vars::split_words(&list);
        }
        for (key, slot) in [("EXTRA_LENGTH", &mut self.extra_length), ("NANO", &mut self.nano)] {
            if let Some(v) = opt(a.keyword(key), args::boolean, key)? {
                *slot = v;
            }
        }
        opt(a.keyword("UNBUFFERED"), args::boolean, "UNBUFFERED")?;
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pulling = ports.input_pull.first().copied().unwrap_or(false);
        self.out = Some(if self.filename == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(std::io::BufWriter::new(
                std::fs::File::create(&self.filename).map_err(|e| format!("{}: {e}", self.filename))?,
            ))
        });
        if self.use_encap_from.is_empty() {
            self.write_header();
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.use_encap_from.is_empty() {
            return;
        }
        let mut found: Option<u32> = None;
        for name in self.use_encap_from.clone() {
            match ctx
                .read_handler(&format!("{name}.encap"), "")
                .ok()
                .and_then(|e| encap_dlt(&e))
            {
                Some(dlt) if found.is_none_or(|f| f == dlt) => found = Some(dlt),
                _ => eprintln!(
                    "{}: USE_ENCAP_FROM: '{name}' gives no encapsulation that agrees",
                    ctx.name()
                ),
            }
        }
        if let Some(dlt) = found {
            self.linktype = dlt;
        }
        self.write_header();
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        self.write_batch(&batch);
        if ctx.noutputs() > 0 {
            ctx.push(0, batch);
        }
    }
    fn pull(&mut self, _port: usize, max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let batch = ctx.pull(0, max)?;
        self.write_batch(&batch);
        Some(batch)
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.pulling || ctx.noutputs() > 0 {
            return false;
        }
        match ctx.pull(0, 32) {
            Some(b) if !b.is_empty() => {
                self.write_batch(&b);
                true
            }
            _ => false,
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset_counts", false, true),
            ("filename", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "filename" => Some(self.filename.clone()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "reset_counts").then(|| {
            self.count = 0;
            Ok(())
        })
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["FromDump", "ToDump"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "FromDump" => Box::<FromDump>::default(),
        "ToDump" => Box::<ToDump>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_both_byte_orders_and_precisions() {
        let h = pcap_file_header(false, 2000, DLT_EN10MB);
        let p = parse_pcap_header(&h).unwrap();
        assert_eq!((p.swapped, p.nano, p.snaplen, p.linktype), (false, false, 2000, 1));
        // The same header written by a machine of the other byte order.
        let mut other = [0u8; 24];
        other[0..4].copy_from_slice(&MAGIC_NSEC.to_be_bytes());
        other[16..20].copy_from_slice(&65535u32.to_be_bytes());
        other[20..24].copy_from_slice(&DLT_RAW.to_be_bytes());
        let p = parse_pcap_header(&other).unwrap();
        assert!(p.nano);
        assert_eq!(p.swapped, cfg!(target_endian = "little"));
        assert_eq!((p.snaplen, p.linktype), (65535, 101));
        assert!(parse_pcap_header(&[0; 24]).is_err());
        assert!(parse_pcap_header(&h[..10]).is_err());
    }

    #[test]
    fn encapsulation_names() {
        assert_eq!(encap_dlt("ether"), Some(DLT_EN10MB));
        assert_eq!(encap_dlt("IP"), Some(DLT_RAW));
        assert_eq!(dlt_name(DLT_RAW), "IP");
        assert!(encap_dlt("carrier-pigeon").is_none());
    }
}

#[cfg(test)]
mod robustness_tests {
    use super::*;

    #[test]
    fn corrupt_files_end_without_panic() {
        let mut x: u64 = 7;
        for round in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut text = pcap_file_header(round % 2 == 0, 65535, DLT_RAW).to_vec();
            let extra = (x % 200) as usize;
            let mut y = x;
            for _ in 0..extra {
                y = y.rotate_left(7) ^ 0x9e37_79b9;
                text.push(y as u8);
            }
            let mut d = FromDump {
                header: Some(parse_pcap_header(&text).unwrap()),
                text,
                ..FromDump::default()
            };
            let mut records = 0;
            while d.next_record().is_some() {
                records += 1;
                assert!(records < 100, "no progress");
            }
            assert!(d.pos >= 24);
        }
    }
}
