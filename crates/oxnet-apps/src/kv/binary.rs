//! memcached's binary protocol (protocol_binary.h; the wiki's "Binary
//! Protocol Revamped"), as memcached 1.6 answers it (proto_bin.c): a
//! 24-byte header (magic 0x80, opcode, key length, extras length, data
//! type, vbucket, body length, opaque, CAS), then extras, key and value.
//! Responses (magic 0x81) carry the request's opcode and opaque, a status
//! and the item's CAS. Quiet variants (…Q) send nothing on success;
//! getq/getkq/gatq/gatkq send nothing on a miss. Errors are always sent,
//! with memcached's message in the body. A request that breaks the
//! header rules is answered EINVAL and ends the connection; a value too
//! large is answered E2BIG and skipped as it arrives.

use super::info::{self, Env};
use super::reply::Reply;
use super::store::{Delta, Mode, Stored, Value, KEY_MAX};
use super::text::Step;

/// The first byte of a binary request; of a response.
pub const REQUEST_MAGIC: u8 = 0x80;
pub const RESPONSE_MAGIC: u8 = 0x81;
/// The header's size.
pub const HEADER: usize = 24;

/// Opcodes (protocol_binary.h).
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

/// Response status codes.
pub mod status {
    pub const OK: u16 = 0x0000;
    pub const KEY_ENOENT: u16 = 0x0001;
    pub const KEY_EEXISTS: u16 = 0x0002;
    pub const E2BIG: u16 = 0x0003;
    pub const EINVAL: u16 = 0x0004;
    pub const NOT_STORED: u16 = 0x0005;
    pub const DELTA_BADVAL: u16 = 0x0006;
    pub const UNKNOWN_COMMAND: u16 = 0x0081;
    pub const ENOMEM: u16 = 0x0082;
}

/// memcached's message for a status (proto_bin.c write_bin_error).
fn message(st: u16) -> &'static str {
    match st {
        status::ENOMEM => "Out of memory",
        status::UNKNOWN_COMMAND => "Unknown command",
        status::KEY_ENOENT => "Not found",
        status::EINVAL => "Invalid arguments",
        status::KEY_EEXISTS => "Data exists for key.",
        status::E2BIG => "Too large.",
        status::DELTA_BADVAL => "Non-numeric server-side value for incr or decr",
        status::NOT_STORED => "Not stored.",
        _ => "UNHANDLED ERROR",
    }
}

/// A request header, decoded.
#[derive(Debug, Clone, Copy)]
struct Header {
    opcode: u8,
    keylen: usize,
    extlen: usize,
    bodylen: usize,
    opaque: [u8; 4],
    cas: u64,
}

fn parse_header(b: &[u8]) -> Header {
    Header {
        opcode: b[1],
        keylen: u16::from_be_bytes([b[2], b[3]]) as usize,
        extlen: b[4] as usize,
        bodylen: u32::from_be_bytes([b[8], b[9], b[10], b[11]]) as usize,
        opaque: [b[12], b[13], b[14], b[15]],
        cas: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
    }
}

/// Writes a response header.
fn header(out: &mut Reply, h: &Header, st: u16, extlen: usize, keylen: usize, bodylen: usize, cas: u64) {
    let mut b = [0u8; HEADER];
    b[0] = RESPONSE_MAGIC;
    b[1] = h.opcode;
    b[2..4].copy_from_slice(&(keylen as u16).to_be_bytes());
    b[4] = extlen as u8;
    b[6..8].copy_from_slice(&st.to_be_bytes());
    b[8..12].copy_from_slice(&(bodylen as u32).to_be_bytes());
    b[12..16].copy_from_slice(&h.opaque);
    b[16..24].copy_from_slice(&cas.to_be_bytes());
    out.bytes(&b);
}

/// An error response: the status and memcached's message (never quiet).
fn error(out: &mut Reply, env: &mut Env<'_>, h: &Header, st: u16) {
    if st != status::KEY_ENOENT && st != status::KEY_EEXISTS && st != status::NOT_STORED {
        env.info.protocol_errors += 1;
    }
    let msg = message(st);
    header(out, h, st, 0, 0, msg.len(), 0);
    out.bytes(msg.as_bytes());
}

/// A success without a body (unless quiet).
fn ok(out: &mut Reply, h: &Header, quiet: bool, cas: u64) {
    if !quiet {
        header(out, h, status::OK, 0, 0, 0, cas);
    }
}

fn done(consumed: usize, close: bool) -> Step {
    Step::Done { consumed, close }
}

/// Processes the request at the front of `buf`; `swallow` is the
/// connection's count of value bytes still to skip.
pub fn step(buf: &[u8], swallow: &mut usize, env: &mut Env<'_>, out: &mut Reply) -> Step {
    if *swallow > 0 {
        if buf.is_empty() {
            return Step::NeedMore;
        }
        let n = (*swallow).min(buf.len());
        *swallow -= n;
        return done(n, false);
    }
    if buf.len() < HEADER {
        return Step::NeedMore;
    }
    if buf[0] != REQUEST_MAGIC {
        // memcached closes on a bad magic, without a word.
        env.info.protocol_errors += 1;
        return done(buf.len(), true);
    }
    let h = parse_header(buf);
    if h.keylen + h.extlen > h.bodylen {
        error(out, env, &h, status::UNKNOWN_COMMAND);
        return done(buf.len(), true);
    }
    if h.keylen > KEY_MAX {
        error(out, env, &h, status::EINVAL);
        return done(buf.len(), true);
    }
    let head = HEADER + h.extlen + h.keylen;
    if buf.len() < head {
        return Step::NeedMore;
    }
    let ext = &buf[HEADER..HEADER + h.extlen];
    let key = &buf[HEADER + h.extlen..head];
    let vlen = h.bodylen - h.extlen - h.keylen;
    let (base, quiet) = match h.opcode {
        op::SETQ => (op::SET, true),
        op::ADDQ => (op::ADD, true),
        op::REPLACEQ => (op::REPLACE, true),
        op::DELETEQ => (op::DELETE, true),
        op::INCREMENTQ => (op::INCREMENT, true),
        op::DECREMENTQ => (op::DECREMENT, true),
        op::QUITQ => (op::QUIT, true),
        op::FLUSHQ => (op::FLUSH, true),
        op::APPENDQ => (op::APPEND, true),
        op::PREPENDQ => (op::PREPEND, true),
        op::GETQ => (op::GET, true),
        op::GETKQ => (op::GETK, true),
        op::GATQ => (op::GAT, true),
        op::GATKQ => (op::GATK, true),
        o => (o, false),
    };
    let (nk, ne, nb) = (h.keylen, h.extlen, h.bodylen);
    let valid = match base {
        op::VERSION | op::NOOP | op::QUIT => ne == 0 && nk == 0 && nb == 0,
        op::FLUSH => nk == 0 && nb == ne && (ne == 0 || ne == 4),
        op::SET | op::ADD | op::REPLACE => ne == 8 && nk != 0,
        op::GET | op::GETK => ne == 0 && nb == nk && nk > 0,
        op::DELETE => nk > 0 && ne == 0 && nb == nk,
        op::INCREMENT | op::DECREMENT => nk > 0 && ne == 20 && nb == nk + ne,
        op::APPEND | op::PREPEND => nk > 0 && ne == 0,
        op::STAT => ne == 0,
        op::TOUCH | op::GAT | op::GATK => ne == 4 && nk != 0,
        _ => {
            // Unknown: answered, its body skipped.
            error(out, env, &h, status::UNKNOWN_COMMAND);
            *swallow = vlen;
            return done(head, false);
        }
    };
    if !valid {
        error(out, env, &h, status::EINVAL);
        return done(buf.len(), true);
    }
    let now = env.now;
    match base {
        op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => {
            let (flags, exptime) = if ne == 8 {
                (
                    u32::from_be_bytes(ext[0..4].try_into().expect("4")),
                    u32::from_be_bytes(ext[4..8].try_into().expect("4")) as i32 as i64,
                )
            } else {
                (0, 0)
            };
            let is_concat = base == op::APPEND || base == op::PREPEND;
            if !env.store.fits(nk, if is_concat { 0 } else { flags }, vlen) {
                let mode = if base == op::SET { Mode::Set } else { Mode::Add };
                env.store.refuse_too_large(mode, key, now);
                error(out, env, &h, status::E2BIG);
                *swallow = vlen;
                return done(head, false);
            }
            if buf.len() < head + vlen {
                return Step::NeedMore;
            }
            let data = &buf[head..head + vlen];
            let mode = match (base, h.cas) {
                (op::APPEND, 0) => Mode::Append,
                (op::PREPEND, 0) => Mode::Prepend,
                (op::APPEND | op::PREPEND, c) => {
                    // A CAS with append: only onto that version.
                    match env.store.peek(key, now) {
                        Some(hit) if hit.cas != c => {
                            error(out, env, &h, status::KEY_EEXISTS);
                            return done(head + vlen, false);
                        }
                        _ => {}
                    }
                    if base == op::APPEND {
                        Mode::Append
                    } else {
                        Mode::Prepend
                    }
                }
                (_, c) if c != 0 => Mode::Cas(c),
                (op::SET, _) => Mode::Set,
                (op::ADD, _) => Mode::Add,
                _ => Mode::Replace,
            };
            let (stored, cas) = env.store.store(mode, key, flags, exptime, data, now);
            match stored {
                Stored::Stored => ok(out, &h, quiet, cas),
                Stored::Exists => error(out, env, &h, status::KEY_EEXISTS),
                Stored::NotFound => error(out, env, &h, status::KEY_ENOENT),
                Stored::NoMemory => error(out, env, &h, status::ENOMEM),
                Stored::NotStored | Stored::TooLarge => {
                    let st = match mode {
                        Mode::Add => status::KEY_EEXISTS,
                        Mode::Replace => status::KEY_ENOENT,
                        _ => status::NOT_STORED,
                    };
                    error(out, env, &h, st);
                }
            }
            done(head + vlen, false)
        }
        op::GET | op::GETK | op::TOUCH | op::GAT | op::GATK => {
            let touch = base != op::GET && base != op::GETK;
            let hit = if touch {
                let exptime = u32::from_be_bytes(ext[0..4].try_into().expect("4")) as i32 as i64;
                if base == op::TOUCH {
                    env.store
                        .touch(key, exptime, now)
                        .then(|| env.store.peek(key, now))
                        .flatten()
                } else {
                    env.store.gat(key, exptime, now)
                }
            } else {
                env.store.get(key, now)
            };
            let with_key = base == op::GETK || base == op::GATK;
            match hit {
                Some(hit) => {
                    let value: &Value = &hit.value;
                    let vl = if base == op::TOUCH { 0 } else { value.len };
                    let kl = if with_key { nk } else { 0 };
                    header(out, &h, status::OK, 4, kl, 4 + kl + vl, hit.cas);
                    out.bytes(&hit.flags.to_be_bytes());
                    if with_key {
                        out.bytes(key);
                    }
                    if base != op::TOUCH {
                        out.value(value);
                    }
                }
                None if quiet => {}
                None if with_key => {
                    header(out, &h, status::KEY_ENOENT, 0, nk, nk, 0);
                    out.bytes(key);
                }
                None => error(out, env, &h, status::KEY_ENOENT),
            }
            done(head, false)
        }
        op::DELETE => {
            match env.store.delete_cas(key, h.cas, now) {
                Stored::Stored => ok(out, &h, quiet, 0),
                Stored::Exists => error(out, env, &h, status::KEY_EEXISTS),
                _ => error(out, env, &h, status::KEY_ENOENT),
            }
            done(head, false)
        }
        op::INCREMENT | op::DECREMENT => {
            let delta = u64::from_be_bytes(ext[0..8].try_into().expect("8"));
            let initial = u64::from_be_bytes(ext[8..16].try_into().expect("8"));
            let exptime = u32::from_be_bytes(ext[16..20].try_into().expect("4"));
            let incr = base == op::INCREMENT;
            let value = |out: &mut Reply, n: u64, cas: u64| {
                if !quiet {
                    header(out, &h, status::OK, 0, 0, 8, cas);
                    out.bytes(&n.to_be_bytes());
                }
            };
            match env.store.delta(key, incr, delta, h.cas, now) {
                Delta::Value(n, cas) => value(out, n, cas),
                Delta::NonNumeric => error(out, env, &h, status::DELTA_BADVAL),
                Delta::Exists => error(out, env, &h, status::KEY_EEXISTS),
                Delta::NoMemory => error(out, env, &h, status::ENOMEM),
                Delta::NotFound if exptime != 0xffff_ffff => {
                    // Created with the initial value (memcached: an add).
                    let text = initial.to_string();
                    let (st, cas) = env
                        .store
                        .store(Mode::Add, key, 0, exptime as i32 as i64, text.as_bytes(), now);
                    // The add counted as a set; the miss was counted too.
                    match st {
                        Stored::Stored => value(out, initial, cas),
                        Stored::NoMemory => error(out, env, &h, status::ENOMEM),
                        _ => error(out, env, &h, status::NOT_STORED),
                    }
                }
                Delta::NotFound => error(out, env, &h, status::KEY_ENOENT),
            }
            done(head, false)
        }
        op::FLUSH => {
            let delay = if ne == 4 {
                u32::from_be_bytes(ext[0..4].try_into().expect("4")) as i32 as i64
            } else {
                0
            };
            env.store.flush(delay.max(0), now);
            ok(out, &h, quiet, 0);
            done(head, false)
        }
        op::NOOP => {
            ok(out, &h, false, 0);
            done(head, false)
        }
        op::VERSION => {
            header(out, &h, status::OK, 0, 0, info::VERSION.len(), 0);
            out.bytes(info::VERSION.as_bytes());
            done(head, false)
        }
        op::QUIT => {
            ok(out, &h, quiet, 0);
            done(head, true)
        }
        op::STAT => {
            if buf.len() < head + vlen {
                return Step::NeedMore;
            }
            let list: Option<Vec<(String, String)>> = match key {
                b"" => Some(
                    info::general(env.store, env.info, now)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                ),
                b"reset" => {
                    env.store.reset_stats();
                    Some(Vec::new())
                }
                b"settings" => Some(
                    info::settings(env.store, env.info)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                ),
                b"items" => Some(info::items(env.store)),
                b"slabs" => Some(info::slabs(env.store)),
                b"sizes" => Some(vec![("sizes_status".to_string(), "disabled".to_string())]),
                b"conns" => Some(Vec::new()),
                _ => None,
            };
            match list {
                Some(list) => {
                    for (k, v) in list {
                        header(out, &h, status::OK, 0, k.len(), k.len() + v.len(), 0);
                        out.bytes(k.as_bytes());
                        out.bytes(v.as_bytes());
                    }
                    header(out, &h, status::OK, 0, 0, 0, 0);
                }
                None => error(out, env, &h, status::KEY_ENOENT),
            }
            done(head + vlen, false)
        }
        _ => unreachable!("opcodes checked above"),
    }
}

#[cfg(test)]
#[path = "binary_tests.rs"]
mod tests;
