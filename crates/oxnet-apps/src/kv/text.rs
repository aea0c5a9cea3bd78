//! memcached's text protocol (protocol.txt "Commands"): one request at a
//! time from the front of a connection's buffered bytes, as memcached
//! 1.6 parses it (proto_text.c): a line ends at "\n" (a "\r" before it is
//! dropped), tokens are separated by spaces, at most 24 of them, and each
//! command checks its token count, key length (250) and numbers with the
//! same error strings. Storage commands take their data block after the
//! line; a block too large for the item size limit is skipped as it
//! arrives (never buffered), as memcached's `conn_swallow`.

use super::info::{self, Env, VERSION};
use super::reply::Reply;
use super::store::{parse_u64, Delta, Mode, Stored, KEY_MAX};

/// A line without "\n" longer than this ends the connection, unless it is
/// a get (memcached's 2048-byte rule in try_read_command_ascii).
pub const LINE_MAX: usize = 2048;
/// memcached's MAX_TOKENS: 23 tokens and the rest.
const MAX_TOKENS: usize = 24;

/// What [`step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A request is not complete yet: call again with more bytes.
    NeedMore,
    /// `consumed` bytes were one request (or skipped data); `close`: end
    /// the connection after the replies (quit, a line too long).
    Done { consumed: usize, close: bool },
}

/// A connection's text-protocol state between requests.
#[derive(Debug, Default)]
pub struct TextState {
    /// Bytes of a refused data block still to skip.
    pub swallow: usize,
}

fn done(consumed: usize) -> Step {
    Step::Done { consumed, close: false }
}

/// Processes the request at the front of `buf`. `buf_limit` is the most
/// the caller buffers (a get line may grow to it).
pub fn step(buf: &[u8], st: &mut TextState, env: &mut Env<'_>, out: &mut Reply, buf_limit: usize) -> Step {
    if st.swallow > 0 {
        if buf.is_empty() {
            return Step::NeedMore;
        }
        let n = st.swallow.min(buf.len());
        st.swallow -= n;
        return done(n);
    }
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > LINE_MAX {
            // Only a large multiget may be this long.
            let spaces = buf.iter().take_while(|&&b| b == b' ').count();
            let rest = &buf[spaces..];
            if spaces > 100 || !(rest.starts_with(b"get ") || rest.starts_with(b"gets ")) || buf.len() >= buf_limit {
                env.info.protocol_errors += 1;
                return Step::Done {
                    consumed: buf.len(),
                    close: true,
                };
            }
        }
        return Step::NeedMore;
    };
    let mut line = &buf[..nl];
    if line.len() > 1 && line[line.len() - 1] == b'\r' {
        line = &line[..line.len() - 1];
    }
    command(line, nl + 1, buf, st, env, out)
}

/// Splits on spaces as memcached's tokenize_command: up to 23 tokens in
/// `tokens`, their count, and `ntokens` as memcached counts it (the
/// tokens plus the terminal one, which holds the rest: 24 when more).
fn tokenize<'a>(line: &'a [u8], tokens: &mut [&'a [u8]; MAX_TOKENS]) -> (usize, usize) {
    let mut n = 0;
    for t in line.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        if n == MAX_TOKENS - 1 {
            return (n, MAX_TOKENS);
        }
        tokens[n] = t;
        n += 1;
    }
    (n, n + 1)
}

/// Replies to requests that fail, counted.
fn error(env: &mut Env<'_>, out: &mut Reply, noreply: bool, msg: &str) {
    env.info.protocol_errors += 1;
    if !noreply {
        out.line(msg);
    }
}

fn reply(out: &mut Reply, noreply: bool, msg: &str) {
    if !noreply {
        out.line(msg);
    }
}

/// memcached's `set_noreply_maybe`: the last token is "noreply".
fn noreply(tokens: &[&[u8]], ntokens: usize) -> bool {
    ntokens >= 2 && tokens.get(ntokens - 2) == Some(&&b"noreply"[..])
}

/// util.c `safe_strtoul` into 32 bits (C truncates what is too wide).
fn parse_u32(t: &[u8]) -> Option<u32> {
    parse_u64(t).map(|n| n as u32)
}

/// util.c `safe_strtol` into an int32.
pub fn parse_i32(t: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(t).ok()?;
    let s = s.strip_prefix('+').unwrap_or(s);
    let n: i64 = s.parse().ok()?;
    (i32::MIN as i64..=i32::MAX as i64).contains(&n).then_some(n)
}

fn command(line: &[u8], line_len: usize, buf: &[u8], st: &mut TextState, env: &mut Env<'_>, out: &mut Reply) -> Step {
    let mut array: [&[u8]; MAX_TOKENS] = [&[]; MAX_TOKENS];
    let (count, ntokens) = tokenize(line, &mut array);
    let tokens = &array[..count];
    if tokens.is_empty() || tokens[0].len() < 2 {
        error(env, out, false, "ERROR");
        return done(line_len);
    }
    let cmd = tokens[0];
    if cmd.len() == 2 && cmd[0] == b'm' {
        return super::meta::command(tokens, ntokens, line_len, buf, st, env, out);
    }
    let want = |ok: bool, env: &mut Env<'_>, out: &mut Reply| {
        if !ok {
            error(env, out, false, "ERROR");
        }
        ok
    };
    match cmd {
        b"get" | b"gets" | b"gat" | b"gats" | b"bget" => {
            if want(ntokens >= 3, env, out) {
                let cas = cmd == b"gets" || cmd == b"gats";
                let touch = cmd == b"gat" || cmd == b"gats";
                // Every key, also past the 24 tokens (memcached reads on).
                let args = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).skip(1);
                get(args, cas, touch, env, out);
            }
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let is_cas = cmd == b"cas";
            let ok = if is_cas {
                ntokens == 7 || ntokens == 8
            } else {
                ntokens == 6 || ntokens == 7
            };
            if !want(ok, env, out) {
                return done(line_len);
            }
            return update(tokens, ntokens, line_len, buf, st, env, out);
        }
        b"delete" => {
            if want((3..=5).contains(&ntokens), env, out) {
                delete(tokens, ntokens, env, out);
            }
        }
        b"incr" | b"decr" => {
            if want(ntokens == 4 || ntokens == 5, env, out) {
                arithmetic(tokens, ntokens, cmd == b"incr", env, out);
            }
        }
        b"touch" => {
            if want(ntokens == 4 || ntokens == 5, env, out) {
                let nr = noreply(tokens, ntokens);
                if tokens[1].len() > KEY_MAX {
                    error(env, out, nr, "CLIENT_ERROR bad command line format");
                } else if let Some(exp) = parse_i32(tokens[2]) {
                    let hit = env.store.touch(tokens[1], exp, env.now);
                    reply(out, nr, if hit { "TOUCHED" } else { "NOT_FOUND" });
                } else {
                    error(env, out, nr, "CLIENT_ERROR invalid exptime argument");
                }
            }
        }
        b"flush_all" => {
            if want((2..=4).contains(&ntokens), env, out) {
                let nr = noreply(tokens, ntokens);
                let mut delay = 0;
                if ntokens != if nr { 3 } else { 2 } {
                    match parse_i32(tokens[1]) {
                        Some(d) => delay = d,
                        None => {
                            error(env, out, nr, "CLIENT_ERROR invalid exptime argument");
                            return done(line_len);
                        }
                    }
                }
                env.store.flush(delay.max(0), env.now);
                reply(out, nr, "OK");
            }
        }
        b"version" => out.line(&format!("VERSION {VERSION}")),
        b"quit" => {
            return Step::Done {
                consumed: line_len,
                close: true,
            }
        }
        b"verbosity" => {
            if want(ntokens == 3 || ntokens == 4, env, out) {
                let nr = noreply(tokens, ntokens);
                match parse_u32(tokens[1]) {
                    Some(level) => {
                        env.info.verbosity = level.min(2);
                        reply(out, nr, "OK");
                    }
                    None => error(env, out, nr, "CLIENT_ERROR bad command line format"),
                }
            }
        }
        b"stats" => stats(tokens, env, out),
        _ => {
            if tokens[tokens.len() - 1].starts_with(b"HTTP/") {
                // An HTTP request: memcached closes without a word.
                return Step::Done {
                    consumed: line_len,
                    close: true,
                };
            }
            error(env, out, false, "ERROR");
        }
    }
    done(line_len)
}

/// get, gets, gat, gats (protocol.txt "Retrieval command"): "VALUE key
/// flags bytes [cas]" and the data per hit, then "END". A key too long
/// answers only the error (memcached drops the hits before it).
fn get<'a>(mut args: impl Iterator<Item = &'a [u8]>, cas: bool, touch: bool, env: &mut Env<'_>, out: &mut Reply) {
    let mark = out.mark();
    let exptime = if touch {
        match args.next().and_then(parse_i32) {
            Some(e) => e,
            None => {
                error(env, out, false, "CLIENT_ERROR invalid exptime argument");
                return;
            }
        }
    } else {
        0
    };
    for key in args {
        if key.len() > KEY_MAX {
            out.truncate(mark);
            error(env, out, false, "CLIENT_ERROR bad command line format");
            return;
        }
        let hit = if touch {
            env.store.gat(key, exptime, env.now)
        } else {
            env.store.get(key, env.now)
        };
        if let Some(h) = hit {
            out.bytes(b"VALUE ");
            out.bytes(key);
            out.bytes(b" ");
            out.number(h.flags as u64);
            out.bytes(b" ");
            out.number(h.value.len as u64);
            if cas {
                out.bytes(b" ");
                out.number(h.cas);
            }
            out.bytes(b"\r\n");
            out.value(&h.value);
            out.bytes(b"\r\n");
        }
    }
    out.bytes(b"END\r\n");
}

/// set, add, replace, append, prepend, cas (protocol.txt "Storage
/// commands").
fn update(
    tokens: &[&[u8]],
    ntokens: usize,
    line_len: usize,
    buf: &[u8],
    st: &mut TextState,
    env: &mut Env<'_>,
    out: &mut Reply,
) -> Step {
    let nr = noreply(tokens, ntokens);
    let key = tokens[1];
    if key.len() > KEY_MAX {
        error(env, out, nr, "CLIENT_ERROR bad command line format");
        return done(line_len);
    }
    let (Some(flags), Some(exptime), Some(vlen)) = (parse_u32(tokens[2]), parse_i32(tokens[3]), parse_i32(tokens[4]))
    else {
        error(env, out, nr, "CLIENT_ERROR bad command line format");
        return done(line_len);
    };
    let mode = match tokens[0] {
        b"set" => Mode::Set,
        b"add" => Mode::Add,
        b"replace" => Mode::Replace,
        b"append" => Mode::Append,
        b"prepend" => Mode::Prepend,
        _ => match parse_u64(tokens[5]) {
            Some(c) => Mode::Cas(c),
            None => {
                error(env, out, nr, "CLIENT_ERROR bad command line format");
                return done(line_len);
            }
        },
    };
    if vlen < 0 {
        error(env, out, nr, "CLIENT_ERROR bad command line format");
        return done(line_len);
    }
    let vlen = vlen as usize;
    if !env.store.fits(key.len(), flags, vlen) {
        env.store.refuse_too_large(mode, key, env.now);
        error(env, out, nr, "SERVER_ERROR object too large for cache");
        st.swallow = vlen + 2;
        return done(line_len);
    }
    if buf.len() < line_len + vlen + 2 {
        return Step::NeedMore;
    }
    let data = &buf[line_len..line_len + vlen + 2];
    let consumed = line_len + vlen + 2;
    if &data[vlen..] != b"\r\n" {
        env.store.stats.cmd_set += 1;
        error(env, out, nr, "CLIENT_ERROR bad data chunk");
        return done(consumed);
    }
    let (stored, _) = env.store.store(mode, key, flags, exptime, &data[..vlen], env.now);
    match stored {
        Stored::Stored => reply(out, nr, "STORED"),
        Stored::NotStored | Stored::TooLarge => reply(out, nr, "NOT_STORED"),
        Stored::Exists => reply(out, nr, "EXISTS"),
        Stored::NotFound => reply(out, nr, "NOT_FOUND"),
        Stored::NoMemory => error(env, out, nr, "SERVER_ERROR out of memory storing object"),
    }
    done(consumed)
}

/// delete key [0] [noreply] (protocol.txt "Deletion").
fn delete(tokens: &[&[u8]], ntokens: usize, env: &mut Env<'_>, out: &mut Reply) {
    let mut nr = false;
    if ntokens > 3 {
        let hold_is_zero = tokens[2] == b"0";
        nr = noreply(tokens, ntokens);
        let valid = (ntokens == 4 && (hold_is_zero || nr)) || (ntokens == 5 && hold_is_zero && nr);
        if !valid {
            error(
                env,
                out,
                nr,
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
            );
            return;
        }
    }
    if tokens[1].len() > KEY_MAX {
        error(env, out, nr, "CLIENT_ERROR bad command line format");
        return;
    }
    let hit = env.store.delete(tokens[1], env.now);
    reply(out, nr, if hit { "DELETED" } else { "NOT_FOUND" });
}

/// incr/decr key value [noreply] (protocol.txt "Increment/Decrement").
fn arithmetic(tokens: &[&[u8]], ntokens: usize, incr: bool, env: &mut Env<'_>, out: &mut Reply) {
    let nr = noreply(tokens, ntokens);
    if tokens[1].len() > KEY_MAX {
        error(env, out, nr, "CLIENT_ERROR bad command line format");
        return;
    }
    let Some(delta) = parse_u64(tokens[2]) else {
        error(env, out, nr, "CLIENT_ERROR invalid numeric delta argument");
        return;
    };
    match env.store.delta(tokens[1], incr, delta, 0, env.now) {
        Delta::Value(n, _) => reply(out, nr, &n.to_string()),
        Delta::NotFound => reply(out, nr, "NOT_FOUND"),
        Delta::NonNumeric => error(
            env,
            out,
            nr,
            "CLIENT_ERROR cannot increment or decrement non-numeric value",
        ),
        Delta::NoMemory => error(env, out, nr, "SERVER_ERROR out of memory"),
        Delta::Exists => reply(out, nr, "EXISTS"),
    }
}

/// stats [settings|items|slabs|sizes|conns|reset|detail] (protocol.txt
/// "Statistics").
fn stats(tokens: &[&[u8]], env: &mut Env<'_>, out: &mut Reply) {
    let list: Vec<(String, String)> = match tokens.get(1).copied() {
        None => info::general(env.store, env.info, env.now)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        Some(b"reset") => {
            env.store.reset_stats();
            out.line("RESET");
            return;
        }
        Some(b"settings") => info::settings(env.store, env.info)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        Some(b"items") => info::items(env.store),
        Some(b"slabs") => info::slabs(env.store),
        // memcached's item size histogram is off unless asked for.
        Some(b"sizes") => vec![("sizes_status".to_string(), "disabled".to_string())],
        Some(b"conns") => Vec::new(),
        Some(b"detail") => {
            match tokens.get(2).copied() {
                Some(b"on") | Some(b"off") => out.line("OK"),
                Some(b"dump") => out.line("END"),
                _ => error(env, out, false, "CLIENT_ERROR usage: stats detail on|off|dump"),
            }
            return;
        }
        Some(_) => {
            error(env, out, false, "ERROR");
            return;
        }
    };
    for (k, v) in list {
        out.line(&format!("STAT {k} {v}"));
    }
    out.line("END");
}

#[cfg(test)]
#[path = "text_tests.rs"]
pub(crate) mod tests;
