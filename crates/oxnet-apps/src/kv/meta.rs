//! memcached's meta protocol (protocol.txt "Meta Commands"): mg, ms, md,
//! ma, mn and me, with their flags, as memcached 1.6 answers them
//! (proto_text.c process_m*_command): a return code (VA, HD, EN, NF, NS,
//! EX, MN, ME) and the requested flags in the order they were given.
//!
//! Flags: mg b c f h k l O q s t u v N R T; ms b c C F I k O q T M(E A P
//! R S); md b C I k O q T; ma b C N J D T M(I + D -) q t c v O k; every
//! command ignores P and L. `E(token)` (a CAS value to set, from memcached
//! 1.6.21, not in Debian's 1.6.18) is taken by ms, ma and mg with N.
//! Errors are memcached's strings and are never suppressed by q.

use super::info::Env;
use super::reply::Reply;
use super::store::{parse_u64, Delta, Mode, Store, Stored, KEY_MAX};
use super::text::{parse_i32, Step, TextState};

/// memcached's MFLAG_MAX_OPT_LENGTH: more tokens than this is refused.
const MAX_OPT_TOKENS: usize = 20;
/// Opaque tokens are at most 32 bytes.
const OPAQUE_MAX: usize = 32;

fn done(consumed: usize) -> Step {
    Step::Done { consumed, close: false }
}

/// The parsed flags of a meta command (memcached's `_meta_flags`).
#[derive(Default)]
struct Flags {
    no_update: bool,
    vivify: Option<i64>,
    la: bool,
    value: bool,
    set_stale: bool,
    no_reply: bool,
    cas: Option<u64>,
    new_cas: Option<u64>,
    ttl: Option<i64>,
    recache: Option<i64>,
    key_binary: bool,
    mode: Option<u8>,
    client_flags: u32,
    delta: u64,
    initial: u64,
}

/// Parses flags from `tokens` (memcached's `_meta_flag_preparse`); the
/// key is decoded in place for `b`. Err: memcached's message.
fn preparse(tokens: &[&[u8]], key: &mut Vec<u8>) -> Result<Flags, &'static str> {
    let mut f = Flags {
        delta: 1,
        ..Flags::default()
    };
    let mut seen = [false; 128];
    let mut err: Option<&'static str> = None;
    for t in tokens {
        let o = t[0];
        if o >= 127 || seen[o as usize] {
            return Err("CLIENT_ERROR duplicate flag");
        }
        seen[o as usize] = true;
        let arg = &t[1..];
        let time = |err: &mut Option<&'static str>| {
            let v = parse_i32(arg);
            if v.is_none() {
                *err = Some("CLIENT_ERROR bad token in command line format");
            }
            v
        };
        match o {
            b'b' => match base64_decode(key) {
                Some(k) => {
                    *key = k;
                    f.key_binary = true;
                }
                None => err = Some("CLIENT_ERROR error decoding key"),
            },
            b'N' => f.vivify = time(&mut err),
            b'T' => f.ttl = time(&mut err),
            b'R' => f.recache = time(&mut err),
            b'l' => f.la = true,
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' => {}
            b'v' => f.value = true,
            b'u' => f.no_update = true,
            b'q' => f.no_reply = true,
            b'F' => match parse_u64(arg) {
                Some(v) => f.client_flags = v as u32,
                None => err = Some("CLIENT_ERROR bad command line format"),
            },
            b'C' => match parse_u64(arg) {
                Some(v) => f.cas = Some(v),
                None => err = Some("CLIENT_ERROR bad token in command line format"),
            },
            b'E' => match parse_u64(arg) {
                Some(v) => f.new_cas = Some(v),
                None => err = Some("CLIENT_ERROR bad token in command line format"),
            },
            b'M' => {
                if t.len() != 2 {
                    err = Some("CLIENT_ERROR incorrect length for M token");
                } else {
                    f.mode = Some(t[1]);
                }
            }
            b'J' => match parse_u64(arg) {
                Some(v) => f.initial = v,
                None => err = Some("CLIENT_ERROR invalid numeric initial value"),
            },
            b'D' => match parse_u64(arg) {
                Some(v) => f.delta = v,
                None => err = Some("CLIENT_ERROR invalid numeric delta value"),
            },
            b'I' => f.set_stale = true,
            _ => return Err("CLIENT_ERROR invalid flag"),
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(f),
    }
}

/// An error line, always sent (memcached's out_errstring).
fn error(env: &mut Env<'_>, out: &mut Reply, msg: &str) {
    env.info.protocol_errors += 1;
    out.line(msg);
}

/// " k<key>" (base64 and " b" for a binary key).
fn key_flag(line: &mut Vec<u8>, key: &[u8], binary: bool) {
    line.extend_from_slice(b" k");
    if binary {
        line.extend_from_slice(base64_encode(key).as_bytes());
        line.extend_from_slice(b" b");
    } else {
        line.extend_from_slice(key);
    }
}

/// Appends the O and k flags of a response that has no item.
fn opaque_and_key(line: &mut Vec<u8>, flags: &[&[u8]], key: &[u8], binary: bool) -> Result<(), &'static str> {
    for t in flags {
        match t[0] {
            b'O' => {
                if t.len() > OPAQUE_MAX {
                    return Err("CLIENT_ERROR opaque token too long");
                }
                line.push(b' ');
                line.extend_from_slice(t);
            }
            b'k' => key_flag(line, key, binary),
            _ => {}
        }
    }
    Ok(())
}

/// Remaining TTL as mg/ma's `t` prints it (-1: never).
fn ttl(exptime: u64, now: u64) -> String {
    if exptime == 0 {
        "-1".to_string()
    } else {
        (exptime.saturating_sub(now) as u32).to_string()
    }
}

/// A meta command line (`tokens[0]` is "m" and one letter); `line_len`
/// bytes of `buf` are the line, a data block may follow. `ntokens`
/// counts as memcached does (the tokens and the terminal one).
pub fn command(
    tokens: &[&[u8]],
    ntokens: usize,
    line_len: usize,
    buf: &[u8],
    st: &mut TextState,
    env: &mut Env<'_>,
    out: &mut Reply,
) -> Step {
    env.store.stats.cmd_meta += 1;
    match tokens[0][1] {
        b'n' => {
            out.line("MN");
            done(line_len)
        }
        b'e' => {
            me(tokens, ntokens, env, out);
            done(line_len)
        }
        b'g' | b'd' | b'a' if ntokens < 3 => {
            error(env, out, "ERROR");
            done(line_len)
        }
        b'g' => {
            mg(tokens, ntokens, env, out);
            done(line_len)
        }
        b'd' => {
            md(tokens, ntokens, env, out);
            done(line_len)
        }
        b'a' => {
            ma(tokens, ntokens, env, out);
            done(line_len)
        }
        b's' => ms(tokens, ntokens, line_len, buf, st, env, out),
        _ => {
            error(env, out, "ERROR");
            done(line_len)
        }
    }
}

/// me <key> [b]: "ME key exp= la= cas= fetch= cls= size=" or "EN".
fn me(tokens: &[&[u8]], ntokens: usize, env: &mut Env<'_>, out: &mut Reply) {
    if ntokens < 3 || tokens[1].len() > KEY_MAX {
        error(env, out, "CLIENT_ERROR bad command line format");
        return;
    }
    let mut key = tokens[1].to_vec();
    let binary = ntokens >= 4 && tokens[2] == b"b";
    if binary {
        match base64_decode(&key) {
            Some(k) => key = k,
            None => {
                error(env, out, "CLIENT_ERROR bad command line format");
                return;
            }
        }
    }
    let now = env.now;
    let Some(slot) = env.store.find(&key, now) else {
        out.line("EN");
        return;
    };
    let it = env.store.item(slot);
    let shown = if binary {
        base64_encode(&key)
    } else {
        String::from_utf8_lossy(&key).into_owned()
    };
    let exp = if it.exptime == 0 {
        -1
    } else {
        it.exptime as i64 - now as i64
    };
    let size = Store::item_total(key.len(), it.flags, it.value.len);
    out.line(&format!(
        "ME {shown} exp={exp} la={} cas={} fetch={} cls=1 size={size}",
        now.saturating_sub(it.access),
        it.cas,
        if it.fetched { "yes" } else { "no" },
    ));
}

/// mg <key> <flags>*: "VA <size> <flags>" and the value, "HD <flags>",
/// or "EN" (suppressed by q).
fn mg(tokens: &[&[u8]], ntokens: usize, env: &mut Env<'_>, out: &mut Reply) {
    if tokens[1].len() > KEY_MAX {
        error(env, out, "CLIENT_ERROR bad command line format");
        return;
    }
    if ntokens > MAX_OPT_TOKENS {
        error(env, out, "CLIENT_ERROR options flags are too long");
        return;
    }
    let mut key = tokens[1].to_vec();
    let flags = &tokens[2..];
    let f = match preparse(flags, &mut key) {
        Ok(f) => f,
        Err(e) => return error(env, out, e),
    };
    let now = env.now;
    let store = &mut *env.store;
    store.stats.cmd_get += 1;
    let mut slot = store.find(&key, now);
    let mut created = false;
    if slot.is_none() {
        if let Some(n) = f.vivify {
            slot = store.vivify(&key, Store::absolute(n, now), now);
            if let (Some(s), Some(c)) = (slot, f.new_cas) {
                store.item_mut(s).cas = c;
            }
            created = slot.is_some();
        }
    }
    let Some(slot) = slot else {
        store.stats.get_misses += 1;
        let mut line = b"EN".to_vec();
        if let Err(e) = opaque_and_key(&mut line, flags, &key, f.key_binary) {
            return error(env, out, e);
        }
        if !f.no_reply {
            line.extend_from_slice(b"\r\n");
            out.bytes(&line);
        }
        return;
    };
    store.stats.get_hits += 1;
    let mut won = false;
    let mut line = Vec::new();
    {
        let it = store.item(slot);
        if f.value {
            line.extend_from_slice(format!("VA {}", it.value.len).as_bytes());
        } else {
            line.extend_from_slice(b"HD");
        }
    }
    for t in flags {
        let it = store.item_mut(slot);
        match t[0] {
            b'T' => it.exptime = Store::absolute(f.ttl.unwrap_or(0), now),
            b'N' if created => won = true,
            b'R' => {
                let recache = Store::absolute(f.recache.unwrap_or(0), now);
                if !it.token_sent && !created && it.exptime != 0 && it.exptime < recache {
                    won = true;
                }
            }
            b's' => line.extend_from_slice(format!(" s{}", it.value.len).as_bytes()),
            b't' => line.extend_from_slice(format!(" t{}", ttl(it.exptime, now)).as_bytes()),
            b'c' => line.extend_from_slice(format!(" c{}", it.cas).as_bytes()),
            b'f' => line.extend_from_slice(format!(" f{}", it.flags).as_bytes()),
            b'l' => line.extend_from_slice(format!(" l{}", now.saturating_sub(it.access)).as_bytes()),
            b'h' => line.extend_from_slice(if it.fetched { b" h1" } else { b" h0" }),
            b'O' => {
                if t.len() > OPAQUE_MAX {
                    return error(env, out, "CLIENT_ERROR opaque token too long");
                }
                line.push(b' ');
                line.extend_from_slice(t);
            }
            b'k' => key_flag(&mut line, &key, f.key_binary),
            _ => {}
        }
    }
    let it = store.item_mut(slot);
    if it.token_sent {
        line.extend_from_slice(b" Z");
    }
    if it.stale {
        line.extend_from_slice(b" X");
        if !it.token_sent {
            won = true;
        }
    }
    if won {
        line.extend_from_slice(b" W");
        it.token_sent = true;
    }
    line.extend_from_slice(b"\r\n");
    let value = it.value.clone();
    if !f.no_update {
        // After reading h and l: they show the state before this read.
        it.fetched = true;
        it.access = now;
        store.bump(slot);
    }
    out.bytes(&line);
    if f.value {
        out.value(&value);
        out.bytes(b"\r\n");
    }
}

/// ms <key> <datalen> <flags>*, then the data: HD (suppressed by q), NS,
/// EX, NF, with the O, k and c flags.
#[allow(clippy::too_many_arguments)]
fn ms(
    tokens: &[&[u8]],
    ntokens: usize,
    line_len: usize,
    buf: &[u8],
    st: &mut TextState,
    env: &mut Env<'_>,
    out: &mut Reply,
) -> Step {
    if ntokens < 3 {
        error(env, out, "ERROR");
        return done(line_len);
    }
    if tokens[1].len() > KEY_MAX || ntokens == 3 {
        error(env, out, "CLIENT_ERROR bad command line format");
        return done(line_len);
    }
    if ntokens > MAX_OPT_TOKENS {
        error(env, out, "CLIENT_ERROR options flags too long");
        return done(line_len);
    }
    let vlen = match parse_i32(tokens[2]) {
        Some(v) if v >= 0 => v as usize,
        _ => {
            error(env, out, "CLIENT_ERROR bad command line format");
            return done(line_len);
        }
    };
    let mut key = tokens[1].to_vec();
    let flags = &tokens[3..];
    // An error from here on skips the data block.
    let refuse = |st: &mut TextState, env: &mut Env<'_>, out: &mut Reply, msg: &str| {
        error(env, out, msg);
        st.swallow = vlen + 2;
        done(line_len)
    };
    let f = match preparse(flags, &mut key) {
        Ok(f) => f,
        Err(e) => return refuse(st, env, out, e),
    };
    if flags.iter().any(|t| t[0] == b'O' && t.len() > OPAQUE_MAX) {
        return refuse(st, env, out, "CLIENT_ERROR opaque token too long");
    }
    let mut mode = match f.mode {
        None | Some(b'S') => Mode::Set,
        Some(b'E') => Mode::Add,
        Some(b'A') => Mode::Append,
        Some(b'P') => Mode::Prepend,
        Some(b'R') => Mode::Replace,
        Some(_) => return refuse(st, env, out, "CLIENT_ERROR invalid mode for ms M token"),
    };
    let now = env.now;
    if !env.store.fits(key.len(), f.client_flags, vlen) {
        // memcached drops the old item whatever the mode.
        env.store.refuse_too_large(Mode::Set, &key, now);
        return refuse(st, env, out, "SERVER_ERROR object too large for cache");
    }
    if buf.len() < line_len + vlen + 2 {
        return Step::NeedMore;
    }
    let data = &buf[line_len..line_len + vlen + 2];
    let consumed = line_len + vlen + 2;
    if &data[vlen..] != b"\r\n" {
        error(env, out, "CLIENT_ERROR bad data chunk");
        return done(consumed);
    }
    // A CAS turns set and replace into cas; append and prepend check it
    // themselves; add ignores it (memcached's process_mset_command).
    let mut stale = false;
    if let Some(c) = f.cas {
        let current = env.store.peek(&key, now).map(|h| h.cas);
        match mode {
            Mode::Set | Mode::Replace => {
                // I: an older CAS still stores, as stale.
                if f.set_stale && current.is_some_and(|cur| c < cur) {
                    stale = true;
                    mode = Mode::Set;
                } else {
                    mode = Mode::Cas(c);
                }
            }
            Mode::Append | Mode::Prepend if current.is_some_and(|cur| cur != c) => {
                finish_ms(env, out, flags, &key, &f, Stored::Exists, 0);
                return done(consumed);
            }
            _ => {}
        }
    }
    let (stored, mut cas) = env
        .store
        .store(mode, &key, f.client_flags, f.ttl.unwrap_or(0), &data[..vlen], now);
    if stored == Stored::Stored {
        if let Some(slot) = env.store.find(&key, now) {
            let it = env.store.item_mut(slot);
            if let Some(c) = f.new_cas {
                it.cas = c;
                cas = c;
            }
            it.stale = stale;
        }
    }
    finish_ms(env, out, flags, &key, &f, stored, cas);
    done(consumed)
}

/// The response line of ms: the code and the O, k, c flags in order.
fn finish_ms(env: &mut Env<'_>, out: &mut Reply, flags: &[&[u8]], key: &[u8], f: &Flags, stored: Stored, cas: u64) {
    let code: &[u8] = match stored {
        Stored::Stored => b"HD",
        Stored::Exists => b"EX",
        Stored::NotFound => b"NF",
        Stored::NotStored => b"NS",
        Stored::TooLarge => return error(env, out, "SERVER_ERROR object too large for cache"),
        Stored::NoMemory => return error(env, out, "SERVER_ERROR out of memory storing object"),
    };
    if stored == Stored::Stored && f.no_reply {
        return;
    }
    let mut line = code.to_vec();
    for t in flags {
        match t[0] {
            b'O' => {
                line.push(b' ');
                line.extend_from_slice(t);
            }
            b'k' => key_flag(&mut line, key, f.key_binary),
            b'c' => line.extend_from_slice(format!(" c{cas}").as_bytes()),
            _ => {}
        }
    }
    line.extend_from_slice(b"\r\n");
    out.bytes(&line);
}

/// md's and ma's start, with memcached's error strings for each check:
/// the key within KEY_MAX, the tokens within MAX_OPT_TOKENS, the flags
/// parsed (a base64 key decoded).
fn key_and_flags(tokens: &[&[u8]], ntokens: usize) -> Result<(Vec<u8>, Flags), &'static str> {
    if tokens[1].len() > KEY_MAX {
        return Err("CLIENT_ERROR bad command line format");
    }
    if ntokens > MAX_OPT_TOKENS {
        return Err("CLIENT_ERROR options flags too long");
    }
    let mut key = tokens[1].to_vec();
    let f = preparse(&tokens[2..], &mut key).map_err(|_| "CLIENT_ERROR invalid or duplicate flag")?;
    Ok((key, f))
}

/// md <key> <flags>*: HD (suppressed by q), NF, EX.
fn md(tokens: &[&[u8]], ntokens: usize, env: &mut Env<'_>, out: &mut Reply) {
    let flags = &tokens[2..];
    let (key, f) = match key_and_flags(tokens, ntokens) {
        Ok(kf) => kf,
        Err(e) => return error(env, out, e),
    };
    let mut tail = Vec::new();
    if let Err(e) = opaque_and_key(&mut tail, flags, &key, f.key_binary) {
        return error(env, out, e);
    }
    let now = env.now;
    let store = &mut *env.store;
    let code: &[u8] = match store.find(&key, now) {
        None => {
            store.stats.delete_misses += 1;
            b"NF"
        }
        Some(slot) if f.cas.is_some_and(|c| c != store.item(slot).cas) => b"EX",
        Some(slot) => {
            if f.set_stale {
                let cas = f.new_cas.unwrap_or_else(|| store.new_cas());
                let it = store.item_mut(slot);
                if let Some(t) = f.ttl {
                    it.exptime = Store::absolute(t, now);
                }
                it.stale = true;
                it.token_sent = false;
                it.cas = cas;
            } else {
                store.delete(&key, now);
            }
            if f.no_reply {
                return;
            }
            b"HD"
        }
    };
    let mut line = code.to_vec();
    line.extend_from_slice(&tail);
    line.extend_from_slice(b"\r\n");
    out.bytes(&line);
}

/// ma <key> <flags>*: HD or "VA <size>" and the number (q suppresses HD),
/// NF, NS, EX.
fn ma(tokens: &[&[u8]], ntokens: usize, env: &mut Env<'_>, out: &mut Reply) {
    let flags = &tokens[2..];
    let (key, f) = match key_and_flags(tokens, ntokens) {
        Ok(kf) => kf,
        Err(e) => return error(env, out, e),
    };
    let incr = match f.mode {
        None | Some(b'I') | Some(b'+') => true,
        Some(b'D') | Some(b'-') => false,
        Some(_) => return error(env, out, "CLIENT_ERROR invalid mode for ma M token"),
    };
    let now = env.now;
    let mut created = false;
    let mut number = 0;
    let outcome = env.store.delta(&key, incr, f.delta, f.cas.unwrap_or(0), now);
    let mut code: Option<&[u8]> = None;
    match outcome {
        Delta::Value(n, _) => number = n,
        Delta::NonNumeric => return error(env, out, "CLIENT_ERROR cannot increment or decrement non-numeric value"),
        Delta::NoMemory => return error(env, out, "SERVER_ERROR out of memory"),
        Delta::Exists => code = Some(b"EX"),
        Delta::NotFound => match f.vivify {
            Some(n) => {
                let text = f.initial.to_string();
                let (st, _) = env.store.store(Mode::Add, &key, 0, n, text.as_bytes(), now);
                match st {
                    Stored::Stored => {
                        created = true;
                        number = f.initial;
                    }
                    Stored::NoMemory => return error(env, out, "SERVER_ERROR Out of memory allocating new item"),
                    _ => code = Some(b"NS"),
                }
            }
            None => code = Some(b"NF"),
        },
    }
    let slot = if code.is_none() {
        env.store.find(&key, now)
    } else {
        None
    };
    let mut line = Vec::new();
    match slot {
        Some(slot) => {
            if let Some(c) = f.new_cas {
                env.store.item_mut(slot).cas = c;
            }
            if !created && f.no_reply {
                // Applied; its TTL update still applies.
                if let Some(t) = f.ttl {
                    env.store.item_mut(slot).exptime = Store::absolute(t, now);
                }
                return;
            }
            let digits = number.to_string();
            if f.value {
                line.extend_from_slice(format!("VA {}", digits.len()).as_bytes());
            } else {
                line.extend_from_slice(b"HD");
            }
            for t in flags {
                let it = env.store.item_mut(slot);
                match t[0] {
                    b'c' => line.extend_from_slice(format!(" c{}", it.cas).as_bytes()),
                    b't' => line.extend_from_slice(format!(" t{}", ttl(it.exptime, now)).as_bytes()),
                    b'T' => it.exptime = Store::absolute(f.ttl.unwrap_or(0), now),
                    b'N' if created => it.exptime = Store::absolute(f.vivify.unwrap_or(0), now),
                    b'O' => {
                        if t.len() > OPAQUE_MAX {
                            return error(env, out, "CLIENT_ERROR opaque token too long");
                        }
                        line.push(b' ');
                        line.extend_from_slice(t);
                    }
                    b'k' => key_flag(&mut line, &key, f.key_binary),
                    _ => {}
                }
            }
            if f.value {
                line.extend_from_slice(b"\r\n");
                line.extend_from_slice(digits.as_bytes());
            }
        }
        None => {
            line.extend_from_slice(code.unwrap_or(b"NF"));
            if let Err(e) = opaque_and_key(&mut line, flags, &key, f.key_binary) {
                return error(env, out, e);
            }
        }
    }
    line.extend_from_slice(b"\r\n");
    out.bytes(&line);
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 (RFC 4648 section 4, with padding), for binary keys (`b`).
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Decodes base64 (RFC 4648 section 4); None if it is not (memcached
/// refuses the key).
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for (ci, chunk) in text.chunks(4).enumerate() {
        let last = ci == text.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk[..4 - pad].iter().enumerate() {
            let v = B64.iter().position(|&b| b == c)? as u32;
            n |= v << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
#[path = "meta_tests.rs"]
mod tests;
