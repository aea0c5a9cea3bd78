//! Script and DriverManager: Click's small scripting language for
//! controlling a configuration (Click's `elements/standard/script.hh`
//! documentation is the specification: instructions, types,
//! substitutions, handlers).
//!
//! Instructions: `set`/`setq`, `init`/`initq`, `export`/`exportq`,
//! `print`/`printn`/`printq`/`printnq` (optionally `>FILE`/`>>FILE`),
//! `read`/`readq`, `write`/`writeq`, `pause [N]`, `wait TIME`, `label`,
//! `goto LABEL [COND]` (also `goto exit|end|loop|error|stop`), `loop`,
//! `end`, `exit`, `stop`, `return`/`returnq`, `error`/`errorq`.
//! Types: ACTIVE (no ports), PASSIVE, PACKET (with ports), DRIVER
//! (DriverManager). Substitutions: `$x`, `${x}`, `$?`, `$args`, `$1`..,
//! `$#`, `$input`, and `$(HANDLER ARGS)` — a handler of another element
//! (`c.count`) or one of the script's own: add, sub, min, max, mul, div,
//! idiv, mod, rem, neg, abs, eq, ne, lt, gt, le, ge, not, and, or, if,
//! in, cat, length, unquote, now.

use crate::args::{self, Args};
use crate::element::*;
use crate::lang::vars::split_words;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::PacketBatch;
use std::collections::HashMap;

/// How often a TYPE SIGNAL script looks for its signals, microseconds.
const SIGNAL_POLL_US: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Active,
    Passive,
    Packet,
    Driver,
    /// Runs when one of these signals arrives (bit per signal number).
    Signal(u32),
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Not running (before start, or after the end for non-driver types).
    Idle,
    /// Blocked at `pause` with this many steps to go.
    Paused(u64),
    /// Blocked at `wait` until this timer fires (or a step).
    Waiting(TimerId),
    /// Ended for good.
    Done,
}

/// How a run of the script ended.
#[derive(Debug, PartialEq)]
enum Finish {
    /// Blocked (pause, wait).
    Blocked,
    /// `end` or falling off the end.
    End,
    /// `exit`.
    Exit,
    /// `return VALUE`.
    Return(String),
    /// `stop`.
    Stop,
    /// `error`.
    Error,
}

/// Script(INSTRUCTIONS..., TYPE T) and DriverManager(INSTRUCTIONS...).
pub struct Script {
    class: &'static str,
    kind: Option<Kind>,
    insns: Vec<(String, String)>,
    labels: HashMap<String, usize>,
    vars: HashMap<String, String>,
    exports: Vec<String>,
    pc: usize,
    state: State,
    status: i64,
    /// TYPE SIGNAL: the timer that looks for arrived signals.
    signal_timer: Option<TimerId>,
}

impl Script {
    /// The class Script (the other constructor makes DriverManager).
    #[allow(clippy::self_named_constructors)]
    pub fn script() -> Script {
        Script::new("Script", None)
    }

    pub fn driver_manager() -> Script {
        Script::new("DriverManager", Some(Kind::Driver))
    }

    fn new(class: &'static str, kind: Option<Kind>) -> Script {
        Script {
            class,
            kind,
            insns: Vec::new(),
            labels: HashMap::new(),
            vars: HashMap::new(),
            exports: Vec::new(),
            pc: 0,
            state: State::Idle,
            status: 0,
            signal_timer: None,
        }
    }

    fn kind(&self) -> Kind {
        self.kind.unwrap_or(Kind::Active)
    }

    /// Runs from `self.pc` until the script blocks or ends.
    fn run(&mut self, ctx: &mut Ctx<'_>, extra: &HashMap<String, String>) -> Finish {
        let mut gotos = 0;
        while self.pc < self.insns.len() {
            let (op, text) = self.insns[self.pc].clone();
            self.pc += 1;
            let q = op.ends_with('q') && op != "q";
            let base = if q { &op[..op.len() - 1] } else { op.as_str() };
            match base {
                "set" => {
                    let (var, rest) = split_first(&text);
                    let value = self.expand(rest, ctx, extra);
                    let value = if q { unquote_text(&value) } else { value };
                    self.vars.insert(var.to_string(), value);
                }
                "init" | "export" => {}
                "print" | "printn" => {
                    let newline = base == "print";
                    let (target, text) = redirect(&text);
                    let expanded = self.expand(text, ctx, extra);
                    // Click's print: TEXT that starts (before expansion)
                    // with a letter, '@' or '_' names a handler to read;
                    // anything else ("$(...)", quotes, numbers) is text.
                    let value = if looks_like_handler(text) {
                        let handler = if q { unquote_text(&expanded) } else { expanded.clone() };
                        let (name, params) = split_first(&handler);
                        match self.call_read(name, params, ctx) {
                            Ok(v) => v,
                            Err(e) => {
                                eprintln!("{}: {e}", ctx.name());
                                continue;
                            }
                        }
                    } else {
                        unquote_text(&expanded)
                    };
                    let mut out = value;
                    if newline && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    write_out(&target, &out);
                }
                "read" => {
                    let expanded = self.expand(&text, ctx, extra);
                    let handler = if q { unquote_text(&expanded) } else { expanded };
                    let (name, params) = split_first(&handler);
                    match self.call_read(name, params, ctx) {
                        Ok(v) => {
                            let v = if v.ends_with('\n') || v.is_empty() { v } else { v + "\n" };
                            eprint!("{name}:\n{v}\n");
                        }
                        Err(e) => eprintln!("{}: {e}", ctx.name()),
                    }
                }
                "write" => {
                    let expanded = self.expand(&text, ctx, extra);
                    let (name, value) = split_first(&expanded);
                    let value = if q { unquote_text(value) } else { value.to_string() };
                    self.status = match self.call_write(name, &value, ctx) {
                        Ok(()) => 0,
                        Err(e) => {
                            eprintln!("{}: {e}", ctx.name());
                            -1
                        }
                    };
                }
                "pause" => {
                    let n = args::unsigned(&self.expand(&text, ctx, extra)).unwrap_or(1).max(1);
                    self.state = State::Paused(n);
                    return Finish::Blocked;
                }
                "wait" => {
                    let t = args::seconds(&self.expand(&text, ctx, extra)).unwrap_or(0.0);
                    let id = ctx.schedule_after_us((t * 1e6).round() as u64);
                    self.state = State::Waiting(id);
                    return Finish::Blocked;
                }
                "label" => {}
                "goto" => {
                    let (label, cond) = split_first(&text);
                    let go = cond.trim().is_empty() || truth(&self.expand(cond, ctx, extra));
                    if !go {
                        continue;
                    }
                    match label {
                        "exit" => return Finish::Exit,
                        "end" => return Finish::End,
                        "stop" => return Finish::Stop,
                        "error" => return Finish::Error,
                        "loop" => self.pc = 0,
                        l => match self.labels.get(l) {
                            Some(&at) => self.pc = at,
                            None => {
                                eprintln!("{}: no label '{l}'", ctx.name());
                                return Finish::Error;
                            }
                        },
                    }
                    gotos += 1;
                    if gotos >= 1000 {
                        eprintln!("{}: 1000 gotos without blocking: script disabled", ctx.name());
                        self.state = State::Done;
                        return Finish::Exit;
                    }
                }
                "loop" => {
                    self.pc = 0;
                    gotos += 1;
                    if gotos >= 1000 {
                        self.state = State::Done;
                        return Finish::Exit;
                    }
                }
                "end" => return Finish::End,
                "exit" => return Finish::Exit,
                "stop" => return Finish::Stop,
                "return" => {
                    let v = self.expand(&text, ctx, extra);
                    return Finish::Return(if q { unquote_text(&v) } else { v });
                }
                "error" => {
                    let v = self.expand(&text, ctx, extra);
                    if !v.trim().is_empty() {
                        eprintln!("{}: {}", ctx.name(), if q { unquote_text(&v) } else { v });
                    }
                    return Finish::Error;
                }
                _ => {}
            }
        }
        Finish::End
    }

    /// What happens when a run ends, by type.
    fn after(&mut self, finish: &Finish, ctx: &mut Ctx<'_>) {
        if *finish == Finish::Blocked {
            return;
        }
        self.state = State::Idle;
        match (self.kind(), finish) {
            (Kind::Driver, _) => {
                // A driver script that ends stops the driver.
                self.state = State::Done;
                ctx.stop_now();
            }
            (_, Finish::Stop) => ctx.stop(),
            _ => {}
        }
    }

    /// Resumes a blocked script (step, timer, driver stop).
    fn resume(&mut self, ctx: &mut Ctx<'_>) {
        self.state = State::Idle;
        let f = self.run(ctx, &HashMap::new());
        self.after(&f, ctx);
    }

    fn step(&mut self, n: u64, ctx: &mut Ctx<'_>) {
        for _ in 0..n {
            match self.state.clone() {
                State::Paused(k) if k > 1 => self.state = State::Paused(k - 1),
                State::Paused(_) => self.resume(ctx),
                State::Waiting(id) => {
                    ctx.cancel_timer(id);
                    self.resume(ctx);
                }
                _ => {}
            }
        }
    }

    fn call_read(&mut self, name: &str, params: &str, ctx: &mut Ctx<'_>) -> Result<String, String> {
        match name.split_once('.') {
            Some((element, handler)) if element == ctx.name() => self.local_read(handler, params, ctx),
            Some(_) => ctx.read_handler(name, params),
            None => self.local_read(name, params, ctx),
        }
    }

    fn call_write(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Result<(), String> {
        match name.split_once('.') {
            Some((element, handler)) if element == ctx.name() => self.local_write(handler, value, ctx),
            Some(_) => ctx.write_handler(name, value),
            // Click: `write stop` asks the driver to stop.
            None if name == "stop" => {
                ctx.stop();
                Ok(())
            }
            None => self.local_write(name, value, ctx),
        }
    }

    fn local_write(&mut self, handler: &str, value: &str, ctx: &mut Ctx<'_>) -> Result<(), String> {
        match handler {
            "step" => {
                let n = if value.trim().is_empty() {
                    1
                } else {
                    args::unsigned(value)?
                };
                self.step(n, ctx);
                Ok(())
            }
            "goto" => {
                let at = *self
                    .labels
                    .get(value.trim())
                    .ok_or_else(|| format!("no label '{}'", value.trim()))?;
                self.pc = at;
                self.resume(ctx);
                Ok(())
            }
            "run" => self.run_passive(value, ctx).map(|_| ()),
            "set" => {
                let (var, rest) = split_first(value);
                if var.is_empty() {
                    return Err("no variable".into());
                }
                self.vars.insert(var.to_string(), rest.trim_start().to_string());
                Ok(())
            }
            v if self.exports.iter().any(|e| e == v) => {
                self.vars.insert(v.to_string(), value.to_string());
                Ok(())
            }
            other => Err(format!("no '{}.{other}' write handler", ctx.name())),
        }
    }

    fn run_passive(&mut self, params: &str, ctx: &mut Ctx<'_>) -> Result<String, String> {
        let mut extra = HashMap::new();
        let words = split_words(params);
        extra.insert("args".to_string(), params.to_string());
        extra.insert("#".to_string(), words.len().to_string());
        for (i, w) in words.iter().enumerate() {
            extra.insert((i + 1).to_string(), w.clone());
        }
        self.pc = 0;
        let f = self.run(ctx, &extra);
        let out = match &f {
            Finish::Return(v) => Ok(v.clone()),
            Finish::Error => Err("script error".to_string()),
            _ => Ok(String::new()),
        };
        self.after(&f, ctx);
        out
    }

    fn local_read(&mut self, handler: &str, params: &str, ctx: &mut Ctx<'_>) -> Result<String, String> {
        if handler == "run" {
            return self.run_passive(params, ctx);
        }
        if self.exports.iter().any(|e| e == handler) {
            return Ok(self.vars.get(handler).cloned().unwrap_or_default());
        }
        if handler == "now" {
            let us = ctx.now_us();
            return Ok(format!("{}.{:06}", us / 1_000_000, us % 1_000_000));
        }
        // Variable handlers (Click's script.hh: get VAR, shift VAR, and the
        // write handler set VAR VALUE).
        if handler == "get" || handler == "shift" {
            let words = split_words(params);
            let var = match words.as_slice() {
                [] if handler == "shift" => "args".to_string(),
                [v] => v.clone(),
                [] => return Err("no variable".into()),
                _ => return Err("too many arguments".into()),
            };
            let value = self
                .vars
                .get_mut(&var)
                .ok_or_else(|| format!("undefined variable '{var}'"))?;
            if handler == "get" {
                return Ok(value.clone());
            }
            let (first, rest) = split_first(value);
            let first = first.to_string();
            *value = rest.trim_start().to_string();
            return Ok(first);
        }
        arithmetic(handler, params).ok_or_else(|| format!("no '{}.{handler}' handler", ctx.name()))?
    }

    /// Substitutes variables and `$(...)` handler calls in `text`; single
    /// quotes protect what they hold.
    fn expand(&mut self, text: &str, ctx: &mut Ctx<'_>, extra: &HashMap<String, String>) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        let mut single = false;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                single = !single;
                out.push(c);
                i += 1;
                continue;
            }
            if c != '$' || single || i + 1 >= chars.len() {
                out.push(c);
                i += 1;
                continue;
            }
            let next = chars[i + 1];
            if next == '(' {
                // Matching parenthesis.
                let mut depth = 0;
                let mut j = i + 1;
                while j < chars.len() {
                    match chars[j] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let inner: String = chars[i + 2..j.min(chars.len())].iter().collect();
                let inner = self.expand(&inner, ctx, extra);
                let (name, params) = split_first(inner.trim());
                match self.call_read(name, params, ctx) {
                    Ok(v) => out.push_str(v.trim_end_matches('\n')),
                    Err(e) => eprintln!("{}: {e}", ctx.name()),
                }
                i = j + 1;
                continue;
            }
            let (name, used) = if next == '{' {
                let end = chars[i + 2..].iter().position(|&c| c == '}').map(|p| i + 2 + p);
                match end {
                    Some(e) => (chars[i + 2..e].iter().collect::<String>(), e + 1 - i),
                    None => {
                        out.push(c);
                        i += 1;
                        continue;
                    }
                }
            } else if next == '?' || next == '#' {
                (next.to_string(), 2)
            } else {
                let n = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .count();
                if n == 0 {
                    out.push(c);
                    i += 1;
                    continue;
                }
                (chars[i + 1..i + 1 + n].iter().collect(), n + 1)
            };
            let value = if name == "?" {
                Some(self.status.to_string())
            } else {
                extra.get(&name).cloned().or_else(|| self.vars.get(&name).cloned())
            };
            match value {
                Some(v) => out.push_str(&v),
                None => out.extend(chars[i..i + used].iter()),
            }
            i += used;
        }
        out
    }
}

fn split_first(text: &str) -> (&str, &str) {
    let t = text.trim_start();
    match t.find(char::is_whitespace) {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    }
}

/// `>FILE` or `>>FILE` at the start of a print argument.
fn redirect(text: &str) -> (Option<(String, bool)>, &str) {
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix(">>") {
        let (file, rest) = split_first(rest);
        return (Some((file.to_string(), true)), rest);
    }
    if let Some(rest) = t.strip_prefix('>') {
        let (file, rest) = split_first(rest);
        return (Some((file.to_string(), false)), rest);
    }
    (None, t)
}

fn write_out(target: &Option<(String, bool)>, text: &str) {
    use std::io::Write;
    match target {
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Some((file, append)) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(*append)
                .truncate(!*append)
                .open(file);
            match f {
                Ok(mut f) => {
                    let _ = f.write_all(text.as_bytes());
                }
                Err(e) => eprintln!("{file}: {e}"),
            }
        }
    }
}

/// Script's `print` rule: an argument starting with a letter, `@` or `_`
/// is a read handler.
fn looks_like_handler(text: &str) -> bool {
    text.trim_start()
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '@' || c == '_')
}

/// Removes one layer of quotes (Click's cp_unquote on text).
fn unquote_text(text: &str) -> String {
    match args::unquote(text) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => text.to_string(),
    }
}

/// A condition's truth: a boolean, or a number (non-zero is true).
fn truth(text: &str) -> bool {
    let t = unquote_text(text.trim());
    match args::boolean(&t) {
        Ok(b) => b,
        Err(_) => t
            .trim()
            .parse::<f64>()
            .map(|v| v != 0.0)
            .unwrap_or(!t.trim().is_empty()),
    }
}

fn numbers(params: &str) -> Result<Vec<f64>, String> {
    split_words(params)
        .iter()
        .map(|w| {
            let w = unquote_text(w);
            args::integer(&w)
                .map(|v| v as f64)
                .or_else(|_| w.trim().parse::<f64>().map_err(|_| format!("'{w}' is not a number")))
        })
        .collect()
}

fn number_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn bool_text(b: bool) -> String {
    if b { "true" } else { "false" }.to_string()
}

/// The script's own read handlers with parameters (Script documentation,
/// "add", "sub", ... handlers). None: not one of them.
/// One integer operand (Click's cp_integer: signed or unsigned 32 bits).
fn int32(params: &str) -> Result<i64, String> {
    let t = params.trim();
    t.parse::<i64>()
        .ok()
        .filter(|x| (i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(x))
        .ok_or_else(|| format!("'{t}': syntax error"))
}

fn arithmetic(handler: &str, params: &str) -> Option<Result<String, String>> {
    let fold = |f: &dyn Fn(f64, f64) -> f64| -> Result<String, String> {
        let n = numbers(params)?;
        let first = *n.first().ok_or("no operands")?;
        Ok(number_text(n[1..].iter().fold(first, |a, &b| f(a, b))))
    };
    let compare = |f: &dyn Fn(std::cmp::Ordering) -> bool| -> Result<String, String> {
        let w = split_words(params);
        if w.len() != 2 {
            return Err("expected two operands".into());
        }
        let (a, b) = (unquote_text(&w[0]), unquote_text(&w[1]));
        let ord = match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
            _ => a.cmp(&b),
        };
        Ok(bool_text(f(ord)))
    };
    use std::cmp::Ordering::*;
    Some(match handler {
        "add" => fold(&|a, b| a + b),
        "sub" => fold(&|a, b| a - b),
        "mul" => fold(&|a, b| a * b),
        "div" => fold(&|a, b| a / b),
        "idiv" => fold(&|a, b| (a / b).trunc()),
        "min" => fold(&f64::min),
        "max" => fold(&f64::max),
        "mod" => fold(&|a, b| ((a as i64) % (b as i64).max(1)) as f64),
        "rem" => fold(&|a, b| a % b),
        "neg" => numbers(params).map(|n| number_text(-n.first().copied().unwrap_or(0.0))),
        "abs" => numbers(params).map(|n| number_text(n.first().copied().unwrap_or(0.0).abs())),
        "eq" => compare(&|o| o == Equal),
        "ne" => compare(&|o| o != Equal),
        "lt" => compare(&|o| o == Less),
        "gt" => compare(&|o| o == Greater),
        "le" => compare(&|o| o != Greater),
        "ge" => compare(&|o| o != Less),
        "not" => Ok(bool_text(!truth(params))),
        "and" => Ok(bool_text(split_words(params).iter().all(|w| truth(w)))),
        "or" => Ok(bool_text(split_words(params).iter().any(|w| truth(w)))),
        "if" => {
            let w = split_words(params);
            match w.as_slice() {
                [c, a, b] => Ok(if truth(c) { a.clone() } else { b.clone() }),
                [c, a] => Ok(if truth(c) { a.clone() } else { String::new() }),
                _ => Err("if: expected COND THEN [ELSE]".into()),
            }
        }
        "in" => {
            let w = split_words(params);
            Ok(bool_text(w.len() > 1 && w[1..].contains(&w[0])))
        }
        "cat" => Ok(split_words(params)
            .iter()
            .map(|w| unquote_text(w))
            .collect::<Vec<_>>()
            .join("")),
        "length" => Ok(unquote_text(params).len().to_string()),
        // Byte order (x86-64 is little-endian; network order is big).
        "htonl" | "ntohl" => int32(params).map(|x| (x as u32).swap_bytes().to_string()),
        "htons" | "ntohs" => int32(params).map(|x| (x as u16).swap_bytes().to_string()),
        "unquote" => Ok(unquote_text(params)),
        _ => return None,
    })
}

impl Element for Script {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "-/-"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(t) = a.keyword("TYPE") {
            let (word, rest) = split_first(&t);
            self.kind = Some(match word {
                "ACTIVE" => Kind::Active,
                "PASSIVE" => Kind::Passive,
                "PACKET" => Kind::Packet,
                "DRIVER" => Kind::Driver,
                "SIGNAL" => {
                    // Click's script.cc: TYPE SIGNAL SIG... (at least one).
                    let mut mask = 0u32;
                    for w in split_words(rest) {
                        let signo =
                            crate::signals::parse(&w).ok_or_else(|| format!("TYPE SIGNAL: bad signal '{w}'"))?;
                        mask |= 1 << signo;
                    }
                    if mask == 0 {
                        return Err("TYPE SIGNAL: name at least one signal (INT, TERM, HUP, USR1, USR2, ...)".into());
                    }
                    Kind::Signal(mask)
                }
                other => {
                    return Err(format!(
                        "TYPE: '{other}' is not ACTIVE, PASSIVE, PACKET, DRIVER or SIGNAL (PROXY is not supported)"
                    ))
                }
            });
        }
        // Every other argument is an instruction (keyword-looking ones
        // too: instructions are lower case, keywords upper case).
        let all = a.rest_positional();
        let mut insns = Vec::new();
        for arg in all {
            let (op, text) = split_first(&arg);
            // Click's script.cc: a bare `wait` (no time) waits for a step,
            // as pause does; wait_step and wait_for are the explicit names.
            let op = match op {
                "wait_stop" | "wait_pause" | "wait_step" => "pause",
                "wait" if text.trim().is_empty() => "pause",
                "wait_time" | "wait_for" => "wait",
                o => o,
            };
            let known = [
                "set", "setq", "init", "initq", "export", "exportq", "print", "printn", "printq", "printnq", "read",
                "readq", "write", "writeq", "pause", "wait", "label", "goto", "loop", "end", "exit", "stop", "return",
                "returnq", "error", "errorq",
            ];
            if op.is_empty() {
                continue;
            }
            if !known.contains(&op) {
                return Err(format!("unknown instruction '{op}'"));
            }
            insns.push((op.to_string(), text.to_string()));
        }
        for (i, (op, text)) in insns.iter().enumerate() {
            match op.as_str() {
                "label" => {
                    self.labels.insert(split_first(text).0.to_string(), i + 1);
                }
                "init" | "initq" | "export" | "exportq" => {
                    let (var, value) = split_first(text);
                    let value = if op.ends_with('q') {
                        unquote_text(value)
                    } else {
                        value.to_string()
                    };
                    self.vars.insert(var.to_string(), value);
                    if op.starts_with("export") {
                        self.exports.push(var.to_string());
                    }
                }
                _ => {}
            }
        }
        self.insns = insns;
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        if self.kind.is_none() && (ports.inputs() > 0 || ports.outputs() > 0) {
            self.kind = Some(Kind::Packet);
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        match self.kind() {
            Kind::Active | Kind::Driver => {
                self.pc = 0;
                let f = self.run(ctx, &HashMap::new());
                self.after(&f, ctx);
            }
            Kind::Signal(mask) => {
                // The signals are caught from now on (their default action,
                // often ending the process, no longer happens); a timer
                // looks for them every SIGNAL_POLL_US.
                for signo in 0..32 {
                    if mask & (1 << signo) != 0 {
                        if let Err(e) = crate::signals::catch(signo) {
                            eprintln!("{}: {e}", ctx.name());
                        }
                    }
                }
                self.signal_timer = Some(ctx.schedule_after_us(SIGNAL_POLL_US));
            }
            _ => {}
        }
    }
    fn run_timer(&mut self, timer: TimerId, ctx: &mut Ctx<'_>) {
        if self.signal_timer == Some(timer) {
            if let Kind::Signal(mask) = self.kind() {
                // A signal that arrived runs the script from the start, if
                // it is not in the middle of a run (then it waits).
                if self.state == State::Idle && crate::signals::take(mask) != 0 {
                    self.pc = 0;
                    let f = self.run(ctx, &HashMap::new());
                    self.after(&f, ctx);
                }
                self.signal_timer = Some(ctx.schedule_after_us(SIGNAL_POLL_US));
            }
            return;
        }
        if self.state == State::Waiting(timer) {
            self.resume(ctx);
        }
    }
    fn driver_stop(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.kind() != Kind::Driver || self.state == State::Done {
            return false;
        }
        // A stop event steps the driver script past `pause`; a stop while
        // it waits for time also moves it on (Click's DriverManager).
        self.step(1, ctx);
        true
    }
    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let mut extra = HashMap::new();
        extra.insert("input".to_string(), port.to_string());
        let n = batch.len();
        let packets: Vec<_> = batch.drain_front(n).collect();
        for packet in packets {
            self.pc = 0;
            let f = self.run(ctx, &extra);
            let out = match &f {
                Finish::End | Finish::Stop => Some(0),
                Finish::Return(v) => v.trim().parse::<usize>().ok(),
                _ => None,
            };
            if f == Finish::Stop {
                ctx.stop();
            }
            if let Some(out) = out {
                let mut one = PacketBatch::with_capacity(1);
                one.push(packet);
                ctx.push(out, one);
            }
        }
    }
    fn read_handler_with(&mut self, name: &str, params: &str, ctx: &mut Ctx<'_>) -> Option<Result<String, String>> {
        if name == "step" || name == "goto" {
            return None;
        }
        match self.local_read(name, params, ctx) {
            Err(e) if e.starts_with("no '") => None,
            r => Some(r),
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match self.local_write(name, value, ctx) {
            Err(e) if e.starts_with("no '") => None,
            r => Some(r),
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("step", false, true), ("goto", false, true), ("run", true, true)]
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["DriverManager", "Script"],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "DriverManager" => Box::new(Script::driver_manager()),
        "Script" => Box::new(Script::script()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_handlers_compute_as_documented() {
        // Script's documentation: 'add 10 5 2' is 17, 'sub 10 5 2' is 3,
        // 'max 5 10 2' is 10, 'mod 7 3' is 1.
        assert_eq!(arithmetic("add", "10 5 2").unwrap().unwrap(), "17");
        assert_eq!(arithmetic("sub", "10 5 2").unwrap().unwrap(), "3");
        assert_eq!(arithmetic("max", "5 10 2").unwrap().unwrap(), "10");
        assert_eq!(arithmetic("mod", "7 3").unwrap().unwrap(), "1");
        assert_eq!(arithmetic("idiv", "7 2").unwrap().unwrap(), "3");
        assert_eq!(arithmetic("div", "7 2").unwrap().unwrap(), "3.5");
        assert_eq!(arithmetic("lt", "4 5").unwrap().unwrap(), "true");
        assert_eq!(arithmetic("eq", "a b").unwrap().unwrap(), "false");
        assert_eq!(arithmetic("if", "true x y").unwrap().unwrap(), "x");
        assert_eq!(arithmetic("in", "b a b c").unwrap().unwrap(), "true");
        assert!(arithmetic("add", "1 x").unwrap().is_err());
        assert!(arithmetic("nope", "").is_none());
    }

    #[test]
    fn conditions_and_print_targets() {
        assert!(truth("true") && truth("1") && truth("2") && !truth("false") && !truth("0"));
        assert!(looks_like_handler("c.count") && !looks_like_handler("\"c.count\"") && !looks_like_handler("5"));
        assert_eq!(redirect(">>out x"), (Some(("out".to_string(), true)), "x"));
        assert_eq!(redirect("x"), (None, "x"));
    }
}
