//! IP summary dumps: Click's text trace format, one packet per line
//! (Click's `elements/analysis/fromipsumdump.hh` and `toipsumdump.hh`
//! documentation is the specification; the fields are in
//! [`super::ipsumdump_fields`]).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | FromIPSummaryDump(FILENAME, ...) | 0/1 | agnostic | makes a packet from each line of a dump file (`-`: standard input), pushed from a task or pulled |
//! | ToIPSummaryDump(FILENAME, FIELDS ...) | 1/0-1 | agnostic input, push output | writes one line per packet (`-`: standard output), then passes the packet on if output 0 is connected |
//!
//! A dump starts with `!` lines: `!IPSummaryDump 1.3`, `!data FIELD...`
//! (which fields each line has; `!contents` is the old name), `!proto P`
//! (the protocol of packets whose line has none), `!flowid SRC SPORT DST
//! DPORT [PROTO]` (default addresses and ports). Lines starting with `#`
//! are comments; a field `-` is absent; extra words at the end of a line
//! are ignored.

use super::ipsumdump_fields::{self as f, Builder, Desc, Field, FlowId};
use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::{Packet, PacketBatch};
use std::io::Write;

/// The fields of a `!data` line or FIELDS argument: (field, order), in
/// the line's order; unknown names are kept as absent fields so that the
/// columns still line up (Click warns and ignores them).
fn parse_field_list(text: &str) -> (Vec<Option<(Field, i32)>>, Vec<String>) {
    let mut fields = Vec::new();
    let mut unknown = Vec::new();
    for (i, word) in crate::lang::vars::split_words(text).into_iter().enumerate() {
        let word = args::string(&word).unwrap_or(word);
        if i == 0 && (word == "!data" || word == "!contents") {
            continue;
        }
        match f::find(&word) {
            Some((_, field, Some(order))) => fields.push(Some((field, order))),
            _ => {
                unknown.push(word);
                fields.push(None);
            }
        }
    }
    (fields, unknown)
}

/// FromIPSummaryDump(FILENAME, STOP, TIMING, ACTIVE, ZERO, CHECKSUM,
/// PROTO, MULTIPACKET, SAMPLE, FIELDS, FLOWID, ALLOW_NONEXISTENT, DATA):
/// reads IP packet descriptions from a dump (gzip or bzip2 compressed
/// too) and makes packets of them.
/// STOP true: asks the router to stop at the end of the file. TIMING
/// true: keeps the gaps between the packets' timestamps (the first goes
/// at once). ACTIVE false: sends nothing until `active` is written.
/// CHECKSUM true: packets carry data up to their IP length and correct
/// IP/TCP/UDP/ICMP checksums; else they may be shorter than their IP
/// length (the extra length annotation says by how much). PROTO: the
/// protocol when the dump gives none (default TCP). FIELDS: the fields
/// when the dump has no `!data` line. FLOWID: default addresses and
/// ports, as a `!flowid` line. MULTIPACKET true: a line whose `count` is
/// N sends N packets sharing its length. DATA: the dump itself instead
/// of a file. ALLOW_NONEXISTENT: a missing file is an empty dump. A
/// binary dump (after a `!binary` line) is read too. SAMPLE is accepted
/// and must be 1; ZERO is accepted (packet data is always zero here). Each line's packet has version 4, TTL 100 and its
/// destination address annotation set. Handlers: `active` (rw), `encap`
/// (r, `IP`), `stop` (w), `sampling_prob`, `filesize`, `filepos` (r),
/// `count` (r: packets sent), `errors` (r: lines that could not be read).
pub struct FromIPSummaryDump {
    filename: Option<String>,
    data: Option<Vec<u8>>,
    stop: bool,
    active: bool,
    timing: bool,
    checksum: bool,
    multipacket: bool,
    default_proto: u8,
    fields: Vec<Option<(Field, i32)>>,
    flowid: Option<FlowId>,
    allow_nonexistent: bool,
    /// After a `!binary` line: records, not lines.
    binary: bool,
    /// MULTIPACKET: each packet's length, the timestamp step, the last
    /// timestamp, while a line's packets go out.
    multipacket_state: Option<(u32, i64, i64)>,
    /// The file's bytes and how far we read.
    text: Vec<u8>,
    pos: usize,
    loaded: bool,
    /// A packet waiting for its time (TIMING) or the rest of a
    /// MULTIPACKET line.
    waiting: Option<Packet>,
    timing_offset: Option<i64>,
    timer: Option<TimerId>,
    stopped: bool,
    count: u64,
    errors: u64,
    complained: bool,
}

impl Default for FromIPSummaryDump {
    fn default() -> FromIPSummaryDump {
        FromIPSummaryDump {
            filename: None,
            data: None,
            stop: false,
            active: true,
            timing: false,
            checksum: false,
            multipacket: false,
            default_proto: f::IP_PROTO_TCP,
            fields: Vec::new(),
            flowid: None,
            allow_nonexistent: false,
            binary: false,
            multipacket_state: None,
            text: Vec::new(),
            pos: 0,
            loaded: false,
            waiting: None,
            timing_offset: None,
            timer: None,
            stopped: false,
            count: 0,
            errors: 0,
            complained: false,
        }
    }
}

/// Sets a packet's IP length (and UDP length) to `len`, for
/// MULTIPACKET's shares of a line's length.
fn set_lengths(p: &mut Packet, len: u32) {
    let Some(off) = p.network_offset().and_then(|o| usize::try_from(o).ok()) else {
        return;
    };
    if p.len() < off + 20 {
        return;
    }
    let len = len.min(0xffff) as u16;
    p[off + 2..off + 4].copy_from_slice(&len.to_be_bytes());
    let hl = usize::from(p[off] & 0xf) * 4;
    if p[off + 9] == f::IP_PROTO_UDP && p.len() >= off + hl + 6 {
        let udp = len.saturating_sub(hl as u16);
        p[off + hl + 4..off + hl + 6].copy_from_slice(&udp.to_be_bytes());
    }
}

/// `SRC SPORT DST DPORT [PROTO]`, `-` for any part left out.
fn parse_flowid(words: &[String]) -> Option<(FlowId, Option<u8>)> {
    if words.len() < 4 {
        return None;
    }
    let addr = |s: &str| {
        if s == "-" {
            Some([0; 4])
        } else {
            args::ip_address(s).ok()
        }
    };
    let port = |s: &str| {
        if s == "-" {
            Some(0)
        } else {
            args::unsigned(s).ok().and_then(|v| u16::try_from(v).ok())
        }
    };
    let flow = FlowId {
        src: addr(&words[0])?,
        sport: port(&words[1])?,
        dst: addr(&words[2])?,
        dport: port(&words[3])?,
    };
    let proto = match words.get(4) {
        Some(p) => Some(f::parse_ip_proto(p)?),
        None => None,
    };
    Some((flow, proto))
}

impl FromIPSummaryDump {
    fn load(&mut self) -> Result<(), String> {
        if self.loaded {
            return Ok(());
        }
        self.loaded = true;
        if let Some(d) = self.data.take() {
            self.text = d;
            return Ok(());
        }
        let name = self.filename.clone().unwrap_or_default();
        match f::read_trace(&name) {
            Ok(v) => {
                self.text = v;
                Ok(())
            }
            Err(e) if self.allow_nonexistent && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{name}: {e}")),
        }
    }

    fn next_line(&mut self) -> Option<String> {
        if self.pos >= self.text.len() {
            return None;
        }
        let rest = &self.text[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = String::from_utf8_lossy(&rest[..end]).trim_end_matches('\r').to_string();
        self.pos += (end + 1).min(rest.len());
        Some(line)
    }

    /// The next record of a binary dump (toipsumdump.hh "BINARY
    /// FORMAT"); a record shorter than its length word or than the file
    /// ends the dump (counted in `errors`).
    fn next_record(&mut self) -> Option<Record> {
        let rest = self.text.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let word = rest.get(..4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let len = word.map_or(0, |w| (w & 0x7fff_ffff) as usize);
        if len < 4 || len > rest.len() {
            self.errors += 1;
            self.pos = self.text.len();
            return None;
        }
        let body = rest[4..len].to_vec();
        self.pos += len;
        if word.is_some_and(|w| w & 0x8000_0000 != 0) {
            let end = body.iter().rposition(|&b| b != 0).map_or(0, |e| e + 1);
            Some(Record::Text(String::from_utf8_lossy(&body[..end]).into_owned()))
        } else {
            Some(Record::Packet(body))
        }
    }

    /// A `!` line of the dump.
    fn bang(&mut self, line: &str) {
        let words = crate::lang::vars::split_words(line);
        match words.first().map(String::as_str) {
            Some("!data") | Some("!contents") => {
                let (fields, unknown) = parse_field_list(line);
                for u in unknown {
                    eprintln!("FromIPSummaryDump: unknown content type '{u}' ignored");
                }
                self.fields = fields;
            }
            Some("!proto") => match words.get(1).and_then(|p| f::parse_ip_proto(p)) {
                Some(p) if words.len() == 2 => self.default_proto = p,
                _ => eprintln!("FromIPSummaryDump: bad !proto line '{line}'"),
            },
            Some("!flowid") => match parse_flowid(&words[1..]) {
                Some((flow, proto)) => {
                    self.flowid = Some(flow);
                    if let Some(p) = proto {
                        self.default_proto = p;
                    }
                }
                None => eprintln!("FromIPSummaryDump: bad !flowid line '{line}'"),
            },
            Some("!binary") => self.binary = true,
            _ => {}
        }
    }

    /// The next packet of the dump (None at its end).
    fn read_packet(&mut self, ctx: &Ctx<'_>) -> Option<Packet> {
        loop {
            if self.binary {
                match self.next_record()? {
                    Record::Packet(r) => match self.packet_of_record(&r, ctx) {
                        Some(p) => return Some(p),
                        None => continue,
                    },
                    Record::Text(line) => {
                        if line.starts_with('!') {
                            self.bang(line.trim_end());
                        }
                        continue;
                    }
                }
            }
            let line = self.next_line()?;
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if trimmed.starts_with('!') {
                self.bang(trimmed);
                continue;
            }
            if let Some(p) = self.packet_of(&line, ctx) {
                return Some(p);
            }
        }
    }

    /// The words of a line, a double-quoted string counting as one.
    fn words(line: &str) -> Vec<&str> {
        let b = line.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i >= b.len() {
                break;
            }
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'"' {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        if b[i] == b'\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                }
                i += 1;
            }
            // A backslash may have skipped into a multi-byte character.
            let mut end = i.min(b.len());
            while !line.is_char_boundary(end) {
                end += 1;
            }
            i = end;
            out.push(&line[start..end]);
        }
        out
    }

    fn packet_of(&mut self, line: &str, ctx: &Ctx<'_>) -> Option<Packet> {
        let words = Self::words(line);
        let raw: Vec<Option<Raw<'_>>> = (0..self.fields.len())
            .map(|i| words.get(i).filter(|w| **w != "-").map(|w| Raw::Text(w)))
            .collect();
        self.packet_from_fields(raw, line, ctx)
    }

    /// A packet record of a binary dump: the fields one after another.
    fn packet_of_record(&mut self, record: &[u8], ctx: &Ctx<'_>) -> Option<Packet> {
        let mut at = 0;
        let mut raw = Vec::with_capacity(self.fields.len());
        for slot in &self.fields {
            let value = match slot {
                Some((field, _)) => match f::decode_binary(*field, record, at) {
                    Some((v, used)) => {
                        at += used;
                        v.map(Raw::Value)
                    }
                    None => {
                        at = record.len();
                        None
                    }
                },
                None => None,
            };
            raw.push(value);
        }
        self.packet_from_fields(raw, "(binary record)", ctx)
    }

    /// Builds a packet from its fields, applied in Click's order
    /// (annotations, IP header, transport header, payload).
    fn packet_from_fields(&mut self, raw: Vec<Option<Raw<'_>>>, line: &str, ctx: &Ctx<'_>) -> Option<Packet> {
        let mut order: Vec<usize> = (0..self.fields.len()).collect();
        order.sort_by_key(|&i| self.fields[i].map_or(0, |(_, o)| o));
        let mut b = Builder::new(self.default_proto, self.flowid);
        let mut applied = 0;
        for i in order {
            let Some((field, _)) = self.fields[i] else { continue };
            let value = match raw.get(i) {
                Some(Some(Raw::Text(word))) => f::parse_value(field, word, b.icmp_type()),
                Some(Some(Raw::Value(v))) => Some(v.clone()),
                _ => None,
            };
            if let Some(v) = value {
                b.inject(field, &v);
                applied += 1;
            }
        }
        if applied == 0 {
            self.errors += 1;
            if !self.complained {
                self.complained = true;
                if self.fields.is_empty() {
                    eprintln!("{}: no '!data' provided", ctx.name());
                } else {
                    eprintln!("{}: packet parse error: '{line}'", ctx.name());
                }
            }
            return None;
        }
        let extra = b.finish(self.checksum);
        let mut p = ctx.pool().alloc().ok()?;
        let len = b.data.len().min(p.capacity());
        p.set_len(len).ok()?;
        p.copy_from_slice(&b.data[..len]);
        if b.ip && b.transport <= len {
            let _ = p.set_network_header(0, b.transport);
            let mut dst = [0u8; 4];
            dst.copy_from_slice(&b.data[16..20]);
            p.anno_mut().set_dst_ip(dst);
        }
        let a = p.anno_mut();
        a.timestamp_ns = b.timestamp_ns;
        a.set_paint(b.paint);
        a.area[f::FIRST_TIMESTAMP_ANNO..f::FIRST_TIMESTAMP_ANNO + 8]
            .copy_from_slice(&b.first_timestamp_ns.to_ne_bytes());
        f::set_anno_u32(&mut p, f::AGGREGATE_ANNO, b.aggregate);
        f::set_anno_u32(&mut p, f::EXTRA_PACKETS_ANNO, b.extra_packets);
        f::set_anno_u32(&mut p, f::EXTRA_LENGTH_ANNO, extra);
        Some(p)
    }

    /// A copy of `p` for MULTIPACKET (data and annotations).
    fn copy(p: &Packet, ctx: &Ctx<'_>) -> Option<Packet> {
        let mut q = ctx.pool().alloc().ok()?;
        q.set_len(p.len()).ok()?;
        q.copy_from_slice(p);
        q.copy_meta_from(p);
        Some(q)
    }

    /// The next packet to send, if its time has come (TIMING).
    fn next_packet(&mut self, ctx: &mut Ctx<'_>) -> Option<Packet> {
        let p = match self.waiting.take() {
            Some(p) => p,
            None => self.read_packet(ctx)?,
        };
        if self.timing {
            let now = ctx.now_us() as i64 * 1000;
            let ts = p.anno().timestamp_ns;
            let offset = *self.timing_offset.get_or_insert(now - ts);
            let due = ts + offset;
            if now < due {
                if self.timer.is_none() {
                    let wait = ((due - now) as u64).div_ceil(1000);
                    self.timer = Some(ctx.schedule_after_us(wait));
                }
                self.waiting = Some(p);
                return None;
            }
        }
        if self.multipacket {
            return self.split_multipacket(p, ctx);
        }
        Some(p)
    }

    /// MULTIPACKET: a line whose count is N sends N packets. The length
    /// (data plus extra length) is shared evenly, the last packet taking
    /// what is left, and the timestamps step evenly from the first
    /// timestamp annotation (if set) to the packet's timestamp.
    fn split_multipacket(&mut self, mut p: Packet, ctx: &Ctx<'_>) -> Option<Packet> {
        let extra_packets = f::anno_u32(&p, f::EXTRA_PACKETS_ANNO);
        if extra_packets == 0 {
            self.multipacket_state = None;
            return Some(p);
        }
        let count = 1 + extra_packets;
        let (each_len, delta, end_ts) = match self.multipacket_state {
            Some(state) => state,
            None => {
                let len = p.len() as u32;
                let mut each = (len + f::anno_u32(&p, f::EXTRA_LENGTH_ANNO)) / count;
                if each < len {
                    each = len;
                    f::set_anno_u32(&mut p, f::EXTRA_LENGTH_ANNO, each * (count - 1));
                }
                let end = p.anno().timestamp_ns;
                let first = f::first_timestamp(&p);
                let delta = if first != 0 {
                    p.anno_mut().timestamp_ns = first;
                    (end - first) / i64::from(count - 1)
                } else {
                    0
                };
                set_lengths(&mut p, each);
                let state = (each, delta, end);
                self.multipacket_state = Some(state);
                state
            }
        };
        let mut out = Self::copy(&p, ctx)?;
        f::set_anno_u32(&mut out, f::EXTRA_PACKETS_ANNO, 0);
        let out_extra = each_len.saturating_sub(out.len() as u32);
        f::set_anno_u32(&mut out, f::EXTRA_LENGTH_ANNO, out_extra);
        // The rest of the line waits, one packet lighter.
        f::set_anno_u32(&mut p, f::EXTRA_PACKETS_ANNO, count - 2);
        let rest = f::anno_u32(&p, f::EXTRA_LENGTH_ANNO).saturating_sub(each_len);
        f::set_anno_u32(&mut p, f::EXTRA_LENGTH_ANNO, rest);
        if count == 2 {
            p.anno_mut().timestamp_ns = end_ts;
            let total = p.len() as u32 + rest;
            set_lengths(&mut p, total);
            self.multipacket_state = None;
        } else {
            p.anno_mut().timestamp_ns += delta;
        }
        self.waiting = Some(p);
        Some(out)
    }

    fn at_end(&self) -> bool {
        self.waiting.is_none() && self.pos >= self.text.len()
    }

    fn check_stop(&mut self, ctx: &mut Ctx<'_>) {
        if self.stop && !self.stopped && self.at_end() {
            self.stopped = true;
            ctx.stop();
        }
    }
}

impl Element for FromIPSummaryDump {
    fn class_name(&self) -> &'static str {
        "FromIPSummaryDump"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(name) = a.positional_or("FILENAME") {
            self.filename = Some(args::string(&name)?);
        }
        for (key, slot) in [
            ("STOP", &mut self.stop),
            ("ACTIVE", &mut self.active),
            ("TIMING", &mut self.timing),
            ("CHECKSUM", &mut self.checksum),
            ("MULTIPACKET", &mut self.multipacket),
            ("ALLOW_NONEXISTENT", &mut self.allow_nonexistent),
        ] {
            if let Some(v) = opt(a.keyword(key), args::boolean, key)? {
                *slot = v;
            }
        }
        opt(a.keyword("ZERO"), args::boolean, "ZERO")?;
        if let Some(s) = a.keyword("SAMPLE") {
            let v: f64 = s.trim().parse().map_err(|_| format!("SAMPLE: '{s}' is not a number"))?;
            if v < 1.0 {
                return Err("SAMPLE: only 1 (every packet) is supported".into());
            }
        }
        if let Some(p) = a.keyword("PROTO") {
            self.default_proto =
                f::parse_ip_proto(p.trim()).ok_or_else(|| format!("PROTO: '{p}' is not an IP protocol"))?;
        }
        for key in ["DEFAULT_CONTENTS", "DEFAULT_FIELDS", "CONTENTS", "FIELDS"] {
            if let Some(v) = a.keyword(key) {
                let (fields, unknown) = parse_field_list(&v);
                if let Some(u) = unknown.first() {
                    return Err(format!("{key}: unknown field '{u}'"));
                }
                self.fields = fields;
            }
        }
        for key in ["DEFAULT_FLOWID", "FLOWID"] {
            if let Some(v) = a.keyword(key) {
                let words = crate::lang::vars::split_words(&v);
                let (flow, proto) =
                    parse_flowid(&words).ok_or_else(|| format!("{key}: expected SRC SPORT DST DPORT [PROTO]"))?;
                self.flowid = Some(flow);
                if let Some(p) = proto {
                    self.default_proto = p;
                }
            }
        }
        if let Some(d) = a.keyword("DATA") {
            self.data = Some(args::unquote(&d)?);
        }
        match (&self.filename, &self.data) {
            (Some(_), Some(_)) => Err("FILENAME and DATA conflict".into()),
            (None, None) => Err("FILENAME: required argument missing".into()),
            _ => Ok(()),
        }
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        self.load()
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active || ctx.noutputs() == 0 {
            return false;
        }
        // One packet per run, as Click does: each goes all the way
        // through the graph before the next one is made.
        let sent = match self.next_packet(ctx) {
            Some(p) => {
                self.count += 1;
                let mut batch = PacketBatch::with_capacity(1);
                batch.push(p);
                ctx.push(0, batch);
                true
            }
            None => false,
        };
        self.check_stop(ctx);
        sent
    }
    fn run_timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {
        self.timer = None;
    }
    fn pull(&mut self, _port: usize, _max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if !self.active {
            return None;
        }
        let p = self.next_packet(ctx);
        self.check_stop(ctx);
        let p = p?;
        self.count += 1;
        let mut batch = PacketBatch::with_capacity(1);
        batch.push(p);
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("active", true, true),
            ("encap", true, false),
            ("stop", false, true),
            ("sampling_prob", true, false),
            ("filesize", true, false),
            ("filepos", true, false),
            ("count", true, false),
            ("errors", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "active" => self.active.to_string(),
            "encap" => "IP".into(),
            "sampling_prob" => "1".into(),
            "filesize" => self.text.len().to_string(),
            "filepos" => self.pos.to_string(),
            "count" => self.count.to_string(),
            "errors" => self.errors.to_string(),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "active" => Some(args::boolean(value).map(|v| {
                self.active = v;
                // A new start may end again (DriverManager's wait_stop).
                self.stopped = false;
            })),
            "stop" => {
                self.active = false;
                ctx.stop();
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

/// A record of a binary dump.
enum Record {
    Packet(Vec<u8>),
    Text(String),
}

/// One field of a line or record before it is applied.
enum Raw<'a> {
    Text(&'a str),
    Value(f::Value),
}

/// Where ToIPSummaryDump writes.
enum Sink {
    None,
    Stdout,
    File(std::io::BufWriter<std::fs::File>),
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) {
        let _ = match self {
            Sink::None => Ok(()),
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
            Sink::File(f) => f.write_all(bytes).and_then(|()| f.flush()),
        };
    }
}

/// ToIPSummaryDump(FILENAME, FIELDS, HEADER, VERBOSE, BANNER, MULTIPACKET,
/// BAD_PACKETS, CAREFUL_TRUNC, EXTRA_LENGTH, BINARY): writes one line per
/// packet with the FIELDS (default `timestamp ip_src`) to FILENAME (`-`:
/// standard output), after a header (`!IPSummaryDump 1.3`, `!creator`
/// with BANNER, `!data ...`) unless HEADER is false. A field that does not
/// apply to a packet (a truncated or absent header, ports of an ICMP
/// packet) is written `-`. Lengths (`ip_len`, `payload_len`) include the
/// extra length annotation unless EXTRA_LENGTH is false. With
/// MULTIPACKET, a packet whose extra-packets annotation is N writes N+1
/// lines. Packets go on to output 0 if it is connected. BINARY true
/// writes binary records after a `!binary` line (toipsumdump.hh "BINARY
/// FORMAT"; `payload` cannot be written so; a variable-length option
/// field is one length byte and the options as they are in the packet).
/// BAD_PACKETS true: a packet whose IP, TCP, UDP or ICMP header is wrong
/// or cut short gets a `!bad MESSAGE` line before its own (`!bad
/// truncated TCP header`, `!bad IP version 6`, ...); with CAREFUL_TRUNC
/// (default true) so does one whose data plus extra length is short of
/// its IP length (`!bad truncated IP missing N`). VERBOSE is accepted. Handlers: `flush` (w), `count` (r: lines written).
pub struct ToIPSummaryDump {
    filename: String,
    fields: Vec<(String, Field)>,
    header: bool,
    banner: Option<String>,
    multipacket: bool,
    binary: bool,
    extra_length: bool,
    bad_packets: bool,
    careful_trunc: bool,
    sink: Sink,
    count: u64,
    pulling: bool,
}

impl Default for ToIPSummaryDump {
    fn default() -> ToIPSummaryDump {
        ToIPSummaryDump {
            filename: String::new(),
            fields: Vec::new(),
            header: true,
            banner: None,
            multipacket: false,
            binary: false,
            extra_length: true,
            bad_packets: false,
            careful_trunc: true,
            sink: Sink::None,
            count: 0,
            pulling: false,
        }
    }
}

impl ToIPSummaryDump {
    fn line(&self, p: &Packet) -> String {
        let mut d = Desc::new(p);
        d.force_extra_length = self.extra_length;
        let mut s = String::new();
        for (i, (_, field)) in self.fields.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            match d.text(*field) {
                Some(t) => s += &t,
                None => s.push('-'),
            }
        }
        s.push('\n');
        s
    }

    /// A binary record: the length word, then each field.
    fn record(&self, p: &Packet) -> Vec<u8> {
        let mut d = Desc::new(p);
        d.force_extra_length = self.extra_length;
        let mut r = vec![0; 4];
        for (_, field) in &self.fields {
            r.extend_from_slice(&d.binary(*field));
        }
        let len = r.len() as u32;
        r[..4].copy_from_slice(&len.to_be_bytes());
        r
    }

    fn write_batch(&mut self, batch: &mut PacketBatch) {
        let mut out = Vec::new();
        for p in batch.iter_mut() {
            let extra_packets = f::anno_u32(p, f::EXTRA_PACKETS_ANNO);
            if self.multipacket && extra_packets > 0 {
                self.write_multipacket(p, extra_packets + 1, &mut out);
            } else {
                self.write_one(p, &mut out);
            }
        }
        self.sink.write(&out);
    }

    /// BAD_PACKETS: the `!bad` line for a packet whose headers are wrong
    /// or cut short, if any (the first problem found).
    fn bad_line(&self, p: &Packet) -> Option<String> {
        let d = Desc::new(p);
        let msg = d.header_message(self.careful_trunc).or_else(|| {
            self.fields
                .iter()
                .filter(|(_, f)| d.text(*f).is_none())
                .find_map(|(_, f)| d.missing_message(*f))
        })?;
        Some(format!("!bad {msg}\n"))
    }

    fn write_one(&mut self, p: &Packet, out: &mut Vec<u8>) {
        if self.bad_packets {
            if let Some(line) = self.bad_line(p) {
                if self.binary {
                    // A text line in a binary dump: a record with the top
                    // bit of its length set.
                    out.extend_from_slice(&((line.len() as u32 + 4) | 0x8000_0000).to_be_bytes());
                }
                out.extend_from_slice(line.as_bytes());
            }
        }
        if self.binary {
            out.extend_from_slice(&self.record(p));
        } else {
            out.extend_from_slice(self.line(p).as_bytes());
        }
        self.count += 1;
    }

    /// MULTIPACKET: a packet standing for `count` packets writes `count`
    /// lines, the length shared evenly (the extra length annotation of
    /// each line says its share) and the timestamps stepping from the
    /// first timestamp annotation, if set, to the packet's own.
    fn write_multipacket(&mut self, p: &mut Packet, count: u32, out: &mut Vec<u8>) {
        let len = p.len() as u32;
        let mut total = len
            + if self.extra_length {
                f::anno_u32(p, f::EXTRA_LENGTH_ANNO)
            } else {
                0
            };
        total = total.max(count * len);
        let end = p.anno().timestamp_ns;
        let first = f::first_timestamp(p);
        let delta = if first != 0 {
            p.anno_mut().timestamp_ns = first;
            (end - first) / i64::from(count - 1)
        } else {
            0
        };
        f::set_anno_u32(p, f::EXTRA_PACKETS_ANNO, 0);
        for i in (1..=count).rev() {
            let share = total / i;
            f::set_anno_u32(p, f::EXTRA_LENGTH_ANNO, share - len);
            total -= share;
            self.write_one(p, out);
            if i == 1 {
                p.anno_mut().timestamp_ns = end;
            } else {
                p.anno_mut().timestamp_ns += delta;
            }
        }
    }
}

impl Element for ToIPSummaryDump {
    fn class_name(&self) -> &'static str {
        "ToIPSummaryDump"
    }
    fn port_count(&self) -> &'static str {
        "1/0-1"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.filename = args::string(&a.required("FILENAME")?)?;
        let mut list = "timestamp ip_src".to_string();
        for key in ["FIELDS", "CONTENTS", "DATA"] {
            if let Some(v) = a.keyword(key) {
                list = v;
            }
        }
        for word in crate::lang::vars::split_words(&list) {
            let word = args::string(&word)?;
            let (name, field, _) = f::find(&word).ok_or_else(|| format!("unknown content type '{word}'"))?;
            self.fields.push((name.to_string(), field));
        }
        if self.fields.is_empty() {
            return Err("no contents specified".into());
        }
        if let Some(v) = opt(a.keyword("HEADER"), args::boolean, "HEADER")? {
            self.header = v;
        }
        if let Some(v) = opt(a.keyword("MULTIPACKET"), args::boolean, "MULTIPACKET")? {
            self.multipacket = v && !self.fields.iter().any(|(_, f)| *f == Field::Count);
        }
        if let Some(b) = a.keyword("BANNER") {
            self.banner = Some(args::string(&b)?);
        }
        if let Some(v) = opt(a.keyword("BINARY"), args::boolean, "BINARY")? {
            self.binary = v;
        }
        if self.binary {
            if let Some((name, _)) = self
                .fields
                .iter()
                .find(|(_, f)| f::binary_kind(*f) == f::Binary::NotAllowed)
            {
                return Err(format!("cannot use field {name} with BINARY"));
            }
        }
        if let Some(v) = opt(a.keyword("EXTRA_LENGTH"), args::boolean, "EXTRA_LENGTH")? {
            self.extra_length = v;
        }
        if let Some(v) = opt(a.keyword("BAD_PACKETS"), args::boolean, "BAD_PACKETS")? {
            self.bad_packets = v;
        }
        if let Some(v) = opt(a.keyword("CAREFUL_TRUNC"), args::boolean, "CAREFUL_TRUNC")? {
            self.careful_trunc = v;
        }
        opt(a.keyword("VERBOSE"), args::boolean, "VERBOSE")?;
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pulling = ports.input_pull.first().copied().unwrap_or(false);
        self.sink = if self.filename == "-" {
            Sink::Stdout
        } else {
            let file = std::fs::File::create(&self.filename).map_err(|e| format!("{}: {e}", self.filename))?;
            Sink::File(std::io::BufWriter::new(file))
        };
        if self.header {
            let mut h = String::from("!IPSummaryDump 1.3\n");
            if let Some(b) = &self.banner {
                h += &format!("!creator {}\n", f::quote(b.as_bytes()));
            }
            let names: Vec<&str> = self
                .fields
                .iter()
                .map(|(n, _)| {
                    if n == "ntimestamp" && !self.binary {
                        "timestamp"
                    } else {
                        n.as_str()
                    }
                })
                .collect();
            h += &format!("!data {}\n", names.join(" "));
            if self.binary {
                h += "!binary\n";
            }
            self.sink.write(h.as_bytes());
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        self.write_batch(&mut batch);
        if ctx.noutputs() > 0 {
            ctx.push(0, batch);
        }
    }
    fn processing(&self) -> &'static str {
        "a/h"
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        // A pull input: the task pulls, writes, and pushes on.
        if !self.pulling {
            return false;
        }
        match ctx.pull(0, 32) {
            Some(mut b) if !b.is_empty() => {
                self.write_batch(&mut b);
                if ctx.noutputs() > 0 {
                    ctx.push(0, b);
                }
                true
            }
            _ => false,
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("flush", false, true), ("count", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "count").then(|| self.count.to_string())
    }
    fn write_handler(&mut self, name: &str, _value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "flush").then_some(Ok(()))
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["FromIPSummaryDump", "ToIPSummaryDump"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "FromIPSummaryDump" => Box::<FromIPSummaryDump>::default(),
        "ToIPSummaryDump" => Box::<ToIPSummaryDump>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_quoted_strings_whole() {
        assert_eq!(
            FromIPSummaryDump::words("1.0.0.1  \"a b\\\" c\" x"),
            ["1.0.0.1", "\"a b\\\" c\"", "x"]
        );
        // A backslash before a multi-byte character, an open quote: no
        // panic, every byte kept.
        assert_eq!(FromIPSummaryDump::words("\"\\é\" z"), ["\"\\é\"", "z"]);
        assert_eq!(FromIPSummaryDump::words("\"open"), ["\"open"]);
        assert!(FromIPSummaryDump::words("   ").is_empty());
    }

    fn run(config: &str) -> crate::router::Router {
        let mut r = crate::build("test", config, &[]).unwrap();
        r.use_simulated_time();
        r.run(&|| false);
        r
    }

    fn read(r: &crate::router::Router, spec: &str) -> String {
        let (e, h) = spec.split_once('.').unwrap();
        r.read_handler(r.find(e).unwrap(), h).unwrap()
    }

    #[test]
    fn lines_that_parse_become_packets_the_others_are_counted() {
        let r = run(r#"
            f :: FromIPSummaryDump(DATA "!data src dst\n1.0.0.1 2.0.0.2\nnot-an-address\n# comment\n\n3.0.0.3 -\n", STOP true)
              -> c :: Counter -> Discard;
        "#);
        assert_eq!(read(&r, "c.count"), "2");
        assert_eq!(read(&r, "f.count"), "2");
        assert_eq!(read(&r, "f.errors"), "1");
        // Two packets of 20 bytes: IP headers only (default protocol TCP,
        // but no transport field given).
        assert_eq!(read(&r, "c.byte_count"), "80");
    }

    #[test]
    fn inactive_source_sends_nothing_and_a_missing_file_is_an_error() {
        let r = run("f :: FromIPSummaryDump(DATA \"!data src\n1.0.0.1\n\", ACTIVE false) -> c :: Counter -> Discard;");
        assert_eq!(read(&r, "c.count"), "0");
        let err = crate::build("t", "FromIPSummaryDump(/nonexistent/dump) -> Discard;", &[])
            .err()
            .unwrap();
        assert!(err.contains("/nonexistent/dump"), "{err}");
        assert!(crate::build(
            "t",
            "FromIPSummaryDump(/nonexistent/dump, ALLOW_NONEXISTENT true) -> Discard;",
            &[]
        )
        .is_ok());
        let err = crate::build("t", "Idle -> ToIPSummaryDump(-, FIELDS src nonsense);", &[])
            .err()
            .unwrap();
        assert!(err.contains("nonsense"), "{err}");
    }
}
