//! memcached's text and binary protocols as `oxnet loadgen`'s request
//! and response (issue 12, Benchmark "Key-value"): `--proto
//! memcached-text|memcached-binary`, `--keys N`, `--value-size B`,
//! `--get-ratio F`.
//!
//! Every value is known in advance: key `k`'s value is
//! [`value_byte`]`(k, i)` for `i < value_size` and its client flags are
//! `k` (32 bits), whoever stored it. So a GET that hits must return
//! exactly those bytes and flags, whatever the interleaving of SETs over
//! the connections; a miss is legitimate only before the key was first
//! stored (counted apart, not an error). Each thread first SETs its own
//! share of the keys (key `k` by thread `k mod threads`), then draws a
//! key uniformly and a GET with probability `get_ratio`. (A server that
//! still holds the keys of a run with another `--value-size` answers
//! with values of the wrong length, which count as wrong: flush it
//! first.)
//!
//! Wire formats: the text protocol as memcached's doc/protocol.txt
//! ("Storage commands", "Retrieval command"); the binary one as
//! doc/protocol-binary.txt (§3 the 24-byte header, §4.1 Get, §4.2 Set).

use super::workload::Records;
use std::fmt;

/// The request/response protocol of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    /// `--size` bytes sent, the same bytes back (issue 11's echo).
    Echo,
    /// memcached's text protocol: `get` and `set`.
    MemcachedText,
    /// memcached's binary protocol: Get (0x00) and Set (0x01).
    MemcachedBinary,
}

impl Proto {
    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Echo => "echo",
            Proto::MemcachedText => "memcached-text",
            Proto::MemcachedBinary => "memcached-binary",
        }
    }
}

/// Whether a run first SETs its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Each thread SETs its share of the keys, then draws at random
    /// (the default).
    First,
    /// No fill (mutilate's `--noload`): random requests from the start.
    Skip,
    /// Only the fill (mutilate's `--loadonly`): the run ends when every
    /// key was SET once.
    Only,
}

/// The key-value load of a run.
#[derive(Clone, Debug)]
pub struct KvOptions {
    /// Text or binary (never Echo).
    pub proto: Proto,
    /// Keys `0..keys`.
    pub keys: u64,
    /// Bytes of every value.
    pub value_size: usize,
    /// Share of requests that are GETs (after the fill).
    pub get_ratio: f64,
    /// mutilate-style records (`-K`, `-V` a distribution): each key's
    /// name and value length ([`super::workload::Records`]); None: keys
    /// `key:N`, every value `value_size` bytes.
    pub records: Option<Records>,
    /// Whether the run SETs every key first.
    pub fill: Fill,
}

/// The longest text-protocol line before a value (`VALUE key flags
/// bytes`, keys up to 250 bytes): more without a CRLF is an error, not
/// a reason to buffer.
const MAX_LINE: usize = 320;

/// What a request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// GET of key `k`.
    Get(u64),
    /// SET of key `k` to its value.
    Set(u64),
}

/// What an answer said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The GET returned the key's value and flags.
    Hit,
    /// The GET found nothing.
    Miss,
    /// The SET was stored.
    Stored,
}

/// An answer that is not the one asked for (wrong value, an error line,
/// an unexpected status).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrong(pub String);

impl fmt::Display for Wrong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of looking at the bytes received so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not all of the answer yet.
    Incomplete,
    /// A whole answer of `len` bytes.
    Done { len: usize, outcome: Outcome },
    /// An answer that is wrong.
    Wrong(Wrong),
}

/// Byte `i` of key `k`'s value: printable, and different per key (a
/// 64-bit mix of `k` picks the letters), so a value returned for the
/// wrong key is caught.
pub fn value_byte(k: u64, i: usize) -> u8 {
    let mut x = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let r = x.rotate_left((i % 64) as u32) as usize ^ i;
    b'a' + (r % 26) as u8
}

fn key(k: u64) -> String {
    format!("key:{k}")
}

/// Key `k`'s client flags: `k`'s low 32 bits.
fn flags(k: u64) -> u32 {
    k as u32
}

/// One thread's requests: the fill of its keys, then random ones.
#[derive(Debug)]
pub struct Workload {
    options: KvOptions,
    /// The next key this thread fills, stepping by `stride`.
    fill: u64,
    stride: u64,
    rng: u64,
}

impl Workload {
    /// Thread `thread` of `threads`, drawing with `seed`.
    pub fn new(options: KvOptions, thread: usize, threads: usize, seed: u64) -> Workload {
        Workload {
            options,
            fill: thread as u64,
            stride: threads.max(1) as u64,
            rng: seed | 1,
        }
    }

    fn random(&mut self) -> u64 {
        // xorshift64.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Whether a fill-only run has SET all of this thread's keys.
    pub fn done(&self) -> bool {
        self.options.fill == Fill::Only && self.fill >= self.options.keys
    }

    /// The next request's operation.
    pub fn next_op(&mut self) -> Op {
        if self.options.fill != Fill::Skip && self.fill < self.options.keys {
            let k = self.fill;
            self.fill += self.stride;
            return Op::Set(k);
        }
        let k = self.random() % self.options.keys;
        let u = (self.random() >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.options.get_ratio {
            Op::Get(k)
        } else {
            Op::Set(k)
        }
    }

    /// Writes `op`'s request into `out` (cleared first); `opaque` goes
    /// into the binary header and must come back.
    pub fn encode(&self, op: Op, opaque: u32, out: &mut Vec<u8>) {
        let (name, size) = self.record(op);
        encode_as(self.options.proto, &name, size, op, opaque, out)
    }

    /// Looks at the answer to `op` received so far.
    pub fn parse(&self, op: Op, opaque: u32, got: &[u8]) -> Parsed {
        let (name, size) = self.record(op);
        parse_as(self.options.proto, &name, size, op, opaque, got)
    }

    /// The most bytes a correct answer to `op` has: what a connection
    /// buffers.
    pub fn max_response(&self, op: Op) -> usize {
        self.record(op).1 + MAX_LINE + 64
    }

    /// `op`'s key and value length.
    fn record(&self, op: Op) -> (String, usize) {
        let k = match op {
            Op::Get(k) | Op::Set(k) => k,
        };
        match &self.options.records {
            Some(r) => (r.key(k), r.value_len(k)),
            None => (key(k), self.options.value_size),
        }
    }
}

/// Binary protocol: magic bytes and opcodes (protocol-binary.txt §3.1,
/// §3.3), and the status of a miss (§3.2).
const REQUEST_MAGIC: u8 = 0x80;
const RESPONSE_MAGIC: u8 = 0x81;
const OP_GET: u8 = 0x00;
const OP_SET: u8 = 0x01;
const STATUS_NOT_FOUND: u16 = 0x0001;
const HEADER: usize = 24;

fn binary_header(out: &mut Vec<u8>, opcode: u8, key_len: usize, extras: usize, body: usize, opaque: u32) {
    out.push(REQUEST_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&(key_len as u16).to_be_bytes());
    out.push(extras as u8);
    out.push(0); // data type: raw bytes
    out.extend_from_slice(&0u16.to_be_bytes()); // vbucket
    out.extend_from_slice(&(body as u32).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes()); // CAS: none
}

/// Writes `op`'s request in `proto` into `out` (cleared first), key
/// `key:K`.
pub fn encode(proto: Proto, value_size: usize, op: Op, opaque: u32, out: &mut Vec<u8>) {
    let k = match op {
        Op::Get(k) | Op::Set(k) => k,
    };
    encode_as(proto, &key(k), value_size, op, opaque, out)
}

/// Writes `op`'s request in `proto` into `out` (cleared first), with
/// key `name` and a value of `value_size` bytes.
pub fn encode_as(proto: Proto, name: &str, value_size: usize, op: Op, opaque: u32, out: &mut Vec<u8>) {
    out.clear();
    let (k, set) = match op {
        Op::Get(k) => (k, false),
        Op::Set(k) => (k, true),
    };
    let value = (0..value_size).map(|i| value_byte(k, i));
    match (proto, set) {
        (Proto::MemcachedBinary, false) => {
            binary_header(out, OP_GET, name.len(), 0, name.len(), opaque);
            out.extend_from_slice(name.as_bytes());
        }
        (Proto::MemcachedBinary, true) => {
            // Extras: flags and expiration (§4.2), 0: never expires.
            binary_header(out, OP_SET, name.len(), 8, 8 + name.len() + value_size, opaque);
            out.extend_from_slice(&flags(k).to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend(value);
        }
        (_, false) => {
            out.extend_from_slice(format!("get {name}\r\n").as_bytes());
        }
        (_, true) => {
            out.extend_from_slice(format!("set {name} {} 0 {value_size}\r\n", flags(k)).as_bytes());
            out.extend(value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Looks at the answer to `op` in `proto` received so far (`got`), key
/// `key:K`.
pub fn parse(proto: Proto, value_size: usize, op: Op, opaque: u32, got: &[u8]) -> Parsed {
    let k = match op {
        Op::Get(k) | Op::Set(k) => k,
    };
    parse_as(proto, &key(k), value_size, op, opaque, got)
}

/// Looks at the answer to `op` in `proto` received so far (`got`), key
/// `name` whose value has `value_size` bytes.
pub fn parse_as(proto: Proto, name: &str, value_size: usize, op: Op, opaque: u32, got: &[u8]) -> Parsed {
    match proto {
        Proto::MemcachedBinary => parse_binary(name, value_size, op, opaque, got),
        _ => parse_text(name, value_size, op, got),
    }
}

fn wrong(text: String) -> Parsed {
    Parsed::Wrong(Wrong(text))
}

/// Whether `data` is key `k`'s value.
fn is_value_of(k: u64, data: &[u8]) -> bool {
    data.iter().enumerate().all(|(i, &b)| b == value_byte(k, i))
}

fn parse_text(name: &str, value_size: usize, op: Op, got: &[u8]) -> Parsed {
    let Some(eol) = got.windows(2).position(|w| w == b"\r\n") else {
        if got.len() > MAX_LINE {
            return wrong(format!(
                "a response line longer than {MAX_LINE} bytes: {:?}",
                String::from_utf8_lossy(&got[..MAX_LINE])
            ));
        }
        return Parsed::Incomplete;
    };
    let line = &got[..eol];
    let shown = || String::from_utf8_lossy(line).into_owned();
    match op {
        Op::Set(_) if line == b"STORED" => Parsed::Done {
            len: eol + 2,
            outcome: Outcome::Stored,
        },
        Op::Set(_) => wrong(format!("set {name}: {:?}", shown())),
        Op::Get(_) if line == b"END" => Parsed::Done {
            len: eol + 2,
            outcome: Outcome::Miss,
        },
        Op::Get(k) => {
            // VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n
            let expected = format!("VALUE {} {} {value_size}", name, flags(k));
            if line != expected.as_bytes() {
                return wrong(format!("get {}: {:?}, not {expected:?}", name, shown()));
            }
            let data = eol + 2;
            let total = data + value_size + b"\r\nEND\r\n".len();
            if got.len() < total {
                // A wrong value is caught as early as its bytes come.
                let have = &got[data..got.len().min(data + value_size)];
                if !is_value_of(k, have) {
                    return wrong(format!("get {}: the value differs from the one stored", name));
                }
                return Parsed::Incomplete;
            }
            if !is_value_of(k, &got[data..data + value_size]) {
                return wrong(format!("get {}: the value differs from the one stored", name));
            }
            if &got[data + value_size..total] != b"\r\nEND\r\n" {
                return wrong(format!("get {}: no CRLF END after the value", name));
            }
            Parsed::Done {
                len: total,
                outcome: Outcome::Hit,
            }
        }
    }
}

fn parse_binary(name: &str, value_size: usize, op: Op, opaque: u32, got: &[u8]) -> Parsed {
    if got.len() < HEADER {
        return Parsed::Incomplete;
    }
    let (k, opcode) = match op {
        Op::Get(k) => (k, OP_GET),
        Op::Set(k) => (k, OP_SET),
    };
    let key_len = u16::from_be_bytes([got[2], got[3]]) as usize;
    let extras = got[4] as usize;
    let status = u16::from_be_bytes([got[6], got[7]]);
    let body = u32::from_be_bytes([got[8], got[9], got[10], got[11]]) as usize;
    let their_opaque = u32::from_be_bytes([got[12], got[13], got[14], got[15]]);
    if got[0] != RESPONSE_MAGIC || got[1] != opcode || their_opaque != opaque {
        return wrong(format!(
            "{}: a response header with magic {:#04x}, opcode {:#04x}, opaque {their_opaque} (asked: opcode {opcode:#04x}, opaque {opaque})",
            name,
            got[0],
            got[1]
        ));
    }
    if body > value_size + MAX_LINE || extras + key_len > body {
        return wrong(format!("{}: a response body of {body} bytes", name));
    }
    let len = HEADER + body;
    if got.len() < len {
        return Parsed::Incomplete;
    }
    let payload = &got[HEADER..len];
    match (op, status) {
        (Op::Set(_), 0) => Parsed::Done {
            len,
            outcome: Outcome::Stored,
        },
        (Op::Get(_), STATUS_NOT_FOUND) => Parsed::Done {
            len,
            outcome: Outcome::Miss,
        },
        (Op::Get(_), 0) => {
            // Extras: the 4-byte flags (§4.1); no key (Get, not GetK).
            let value = &payload[extras + key_len..];
            if extras != 4 || u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) != flags(k) {
                return wrong(format!("get {}: flags missing or not the ones stored", name));
            }
            if value.len() != value_size || !is_value_of(k, value) {
                return wrong(format!("get {}: the value differs from the one stored", name));
            }
            Parsed::Done {
                len,
                outcome: Outcome::Hit,
            }
        }
        (_, s) => wrong(format!(
            "{}: status {s:#06x} ({:?})",
            name,
            String::from_utf8_lossy(&payload[(extras + key_len).min(payload.len())..])
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(proto: Proto) -> KvOptions {
        KvOptions {
            proto,
            keys: 10,
            value_size: 5,
            get_ratio: 0.5,
            records: None,
            fill: Fill::First,
        }
    }

    #[test]
    fn the_text_requests_are_memcached_commands() {
        let mut out = Vec::new();
        encode(Proto::MemcachedText, 3, Op::Set(7), 0, &mut out);
        let v: String = (0..3).map(|i| value_byte(7, i) as char).collect();
        assert_eq!(out, format!("set key:7 7 0 3\r\n{v}\r\n").into_bytes());
        encode(Proto::MemcachedText, 3, Op::Get(7), 0, &mut out);
        assert_eq!(out, b"get key:7\r\n");
    }

    #[test]
    fn the_binary_requests_have_protocol_binary_headers() {
        let mut out = Vec::new();
        encode(Proto::MemcachedBinary, 2, Op::Set(1), 9, &mut out);
        assert_eq!(
            &out[..24],
            &[0x80, 0x01, 0, 5, 8, 0, 0, 0, 0, 0, 0, 15, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&out[24..32], &[0, 0, 0, 1, 0, 0, 0, 0], "flags 1, never expires");
        assert_eq!(&out[32..37], b"key:1");
        assert_eq!(out.len(), 39);
        encode(Proto::MemcachedBinary, 2, Op::Get(1), 9, &mut out);
        assert_eq!(out.len(), 29);
        assert_eq!((out[1], out[4], out[11]), (0x00, 0, 5));
    }

    #[test]
    fn a_text_hit_must_carry_the_stored_value_and_flags() {
        let v: Vec<u8> = (0..5).map(|i| value_byte(3, i)).collect();
        let mut answer = b"VALUE key:3 3 5\r\n".to_vec();
        answer.extend_from_slice(&v);
        answer.extend_from_slice(b"\r\nEND\r\nSTORED\r\n");
        let done = parse(Proto::MemcachedText, 5, Op::Get(3), 0, &answer);
        assert_eq!(
            done,
            Parsed::Done {
                len: answer.len() - 8,
                outcome: Outcome::Hit
            }
        );
        for cut in 0..answer.len() - 8 {
            assert_eq!(
                parse(Proto::MemcachedText, 5, Op::Get(3), 0, &answer[..cut]),
                Parsed::Incomplete
            );
        }
        let mut bad = answer.clone();
        bad[18] ^= 1;
        assert!(matches!(
            parse(Proto::MemcachedText, 5, Op::Get(3), 0, &bad),
            Parsed::Wrong(_)
        ));
        assert!(matches!(
            parse(Proto::MemcachedText, 5, Op::Get(4), 0, &answer),
            Parsed::Wrong(_)
        ));
        assert_eq!(
            parse(Proto::MemcachedText, 5, Op::Get(3), 0, b"END\r\n"),
            Parsed::Done {
                len: 5,
                outcome: Outcome::Miss
            }
        );
        assert!(matches!(
            parse(
                Proto::MemcachedText,
                5,
                Op::Set(3),
                0,
                b"SERVER_ERROR out of memory\r\n"
            ),
            Parsed::Wrong(_)
        ));
    }

    #[test]
    fn a_binary_answer_must_match_opcode_opaque_flags_and_value() {
        let v: Vec<u8> = (0..5).map(|i| value_byte(2, i)).collect();
        let mut hit = vec![
            0x81, 0x00, 0, 0, 4, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        hit.extend_from_slice(&[0, 0, 0, 2]);
        hit.extend_from_slice(&v);
        assert_eq!(
            parse(Proto::MemcachedBinary, 5, Op::Get(2), 7, &hit),
            Parsed::Done {
                len: 33,
                outcome: Outcome::Hit
            }
        );
        assert_eq!(
            parse(Proto::MemcachedBinary, 5, Op::Get(2), 7, &hit[..32]),
            Parsed::Incomplete
        );
        assert!(matches!(
            parse(Proto::MemcachedBinary, 5, Op::Get(2), 8, &hit),
            Parsed::Wrong(_)
        ));
        let miss = [
            0x81, 0x00, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            parse(Proto::MemcachedBinary, 5, Op::Get(2), 7, &miss),
            Parsed::Done {
                len: 24,
                outcome: Outcome::Miss
            }
        );
    }

    #[test]
    fn each_thread_fills_its_share_of_the_keys_first() {
        let mut a = Workload::new(options(Proto::MemcachedText), 0, 3, 1);
        let mut b = Workload::new(options(Proto::MemcachedText), 2, 3, 1);
        let first: Vec<Op> = (0..4).map(|_| a.next_op()).collect();
        assert_eq!(first, [Op::Set(0), Op::Set(3), Op::Set(6), Op::Set(9)]);
        assert_eq!([b.next_op(), b.next_op()], [Op::Set(2), Op::Set(5)]);
        let gets = (0..10_000).filter(|_| matches!(a.next_op(), Op::Get(_))).count();
        assert!((4_700..5_300).contains(&gets), "get ratio 0.5: {gets}");
    }

    #[test]
    fn noload_skips_the_fill_and_loadonly_ends_after_it() {
        let mut skip = options(Proto::MemcachedText);
        skip.fill = Fill::Skip;
        skip.get_ratio = 1.0;
        let mut w = Workload::new(skip, 0, 1, 1);
        assert!((0..100).all(|_| matches!(w.next_op(), Op::Get(_))), "no SET first");
        let mut only = options(Proto::MemcachedText);
        only.fill = Fill::Only;
        let mut w = Workload::new(only, 1, 2, 1);
        let mut ops = Vec::new();
        while !w.done() {
            ops.push(w.next_op());
        }
        assert_eq!(ops, [Op::Set(1), Op::Set(3), Op::Set(5), Op::Set(7), Op::Set(9)]);
    }

    #[test]
    fn mutilate_records_name_keys_and_size_values_per_record() {
        let mut o = options(Proto::MemcachedBinary);
        let etc = crate::loadgen::workload::EtcWorkload::etc(10, 1);
        let records = etc.records();
        o.records = Some(records.clone());
        let w = Workload::new(o, 0, 1, 1);
        let mut out = Vec::new();
        w.encode(Op::Set(4), 3, &mut out);
        let (key, len) = (records.key(4), records.value_len(4));
        assert_eq!(u16::from_be_bytes([out[2], out[3]]) as usize, key.len());
        assert_eq!(&out[32..32 + key.len()], key.as_bytes());
        assert_eq!(out.len(), 32 + key.len() + len);
        // A GET answer with that record's value is a hit.
        let mut hit = vec![0x81, 0x00, 0, 0, 4, 0, 0, 0];
        hit.extend_from_slice(&((4 + len) as u32).to_be_bytes());
        hit.extend_from_slice(&7u32.to_be_bytes());
        hit.extend_from_slice(&[0; 8]);
        hit.extend_from_slice(&4u32.to_be_bytes());
        hit.extend_from_slice(&records.value(4));
        let done = w.parse(Op::Get(4), 7, &hit);
        assert_eq!(
            done,
            Parsed::Done {
                len: hit.len(),
                outcome: Outcome::Hit
            }
        );
    }

    #[test]
    fn random_bytes_never_panic_either_parser() {
        let mut x = 0x1234_5678u64;
        let mut buf = Vec::new();
        for round in 0..20_000 {
            buf.clear();
            let len = round % 90;
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x as u8);
            }
            if round % 3 == 0 && len > 2 {
                buf[0] = 0x81; // reach past the binary magic check
            }
            for proto in [Proto::MemcachedText, Proto::MemcachedBinary] {
                for op in [Op::Get(x % 5), Op::Set(x % 5)] {
                    let _ = parse(proto, 4, op, x as u32, &buf);
                }
            }
        }
    }
}
