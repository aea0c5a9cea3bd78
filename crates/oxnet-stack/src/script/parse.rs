//! The parser: tokens (`lex.rs`) to a [`Script`], by recursive descent
//! over packetdrill's grammar (its `Syntax.md`, "Syntactic Structure"),
//! cut down to the subset `mod.rs` lists. One event per line: an event
//! may wrap onto later lines inside its brackets, but the next event
//! starts on a new line, which lets errors say "found end of line".

use std::collections::{BTreeMap, VecDeque};

use super::ast::{
    Direction, Event, EventKind, EventTime, Expr, Field, Micros, SackBlock, Script, TcpFlags, TcpOptionSpec,
};
use super::error::{ErrorMessage, ScriptError};
use super::lex::{error_at, Lexer, Pos, Tok, Token};

/// How deep lists, structs and calls may nest: deeper input is refused
/// rather than recursed into (the stack is not the input's to spend).
const MAX_NESTING: u32 = 32;

/// The most option bytes a TCP header holds: the data offset counts 32-bit
/// words in 4 bits, so at most 60 header bytes, 20 of them fixed
/// (RFC 9293 §3.1, "Data Offset" and "Options").
const MAX_OPTION_BYTES: usize = 40;

/// How the end-of-line check names a segment: a field out of order is
/// the usual reason a segment's line goes on.
const SEGMENT: &str = "segment (its fields come in the order flags, seq, ack, win, urg, <options>)";

/// Parses the text of a script; `file` names it in error messages.
pub fn parse(file: &str, text: &str) -> Result<Script, ScriptError> {
    Parser {
        file,
        lexer: Lexer::new(file, text),
        ahead: VecDeque::new(),
        prev_end: Pos { line: 1, column: 1 },
        in_event: false,
        depth: 0,
    }
    .script()
}

struct Parser<'a> {
    file: &'a str,
    lexer: Lexer<'a>,
    /// Tokens looked at but not consumed (at most two).
    ahead: VecDeque<Token>,
    /// Where the last consumed token ended.
    prev_end: Pos,
    /// Whether the current event has consumed a token: a token that then
    /// starts a new line is reported as "end of line" at the end of the
    /// previous one, which is where the text stopped making sense.
    in_event: bool,
    /// Current nesting of expressions.
    depth: u32,
}

impl Parser<'_> {
    fn script(&mut self) -> Result<Script, ScriptError> {
        let mut options = BTreeMap::new();
        while let Tok::Opt { name, value } = &self.peek()?.tok {
            let (name, value) = (name.clone(), value.clone());
            self.check_option(&name, &value)?;
            if options.contains_key(&name) {
                return Err(self.expected("each option once", &format!("`--{name}` a second time")));
            }
            self.bump()?;
            options.insert(name, value);
        }
        let mut events = Vec::new();
        while self.peek()?.tok != Tok::End {
            events.push(self.event()?);
        }
        Ok(Script { options, events })
    }

    /// Refuses values a runner could not act on, for the options the
    /// runner reads; other options are kept as they are.
    fn check_option(&mut self, name: &str, value: &str) -> Result<(), ScriptError> {
        if name == Script::IP_VERSION_OPTION && value != "ipv4" && value != "ipv6" {
            return Err(self.expected("`--ip_version=ipv4` or `--ip_version=ipv6`", &format!("`{value}`")));
        }
        Ok(())
    }

    // ---- Events ----

    fn event(&mut self) -> Result<Event, ScriptError> {
        self.in_event = false;
        let line = self.peek()?.start.line;
        let time = if matches!(self.peek()?.tok, Tok::Shell(_)) {
            EventTime::Untimed
        } else {
            self.time()?
        };
        self.in_event = true;
        let (kind, what) = self.action()?;
        let next = self.peek()?;
        if !next.line_start && next.tok != Tok::End {
            return Err(self.expected(&format!("the end of the line after the {what}"), ""));
        }
        Ok(Event { line, time, kind })
    }

    /// `0.1`, `+0.1`, `0.1~0.2`, `+0.1~+0.2` or `*`.
    fn time(&mut self) -> Result<EventTime, ScriptError> {
        let relative = match self.peek()?.tok {
            Tok::Punct('*') => {
                self.bump()?;
                return Ok(EventTime::Any);
            }
            Tok::Punct('+') => {
                self.bump()?;
                true
            }
            Tok::Number(_) => false,
            _ => return Err(self.expected("an event: a time (`0`, `+0.1`, `0.1~0.2`, `*`) or a shell command", "")),
        };
        let start = self.seconds()?;
        if self.peek()?.tok != Tok::Punct('~') {
            return Ok(if relative {
                EventTime::Relative(start)
            } else {
                EventTime::Absolute(start)
            });
        }
        self.bump()?;
        let end_is_relative = self.peek()?.tok == Tok::Punct('+');
        if relative != end_is_relative {
            let want = if relative {
                "`+` (both ends of a relative range are relative)"
            } else {
                "an absolute time (both ends of an absolute range are absolute)"
            };
            return Err(self.expected(want, ""));
        }
        if relative {
            self.bump()?;
        }
        let end_pos = self.peek()?.start;
        let end = self.seconds()?;
        if end < start {
            let found = format!("{} (earlier)", super::print::Seconds(end));
            return Err(self.expected_at(
                end_pos,
                &format!("a range end no earlier than {}", super::print::Seconds(start)),
                &found,
            ));
        }
        Ok(EventTime::Range { relative, start, end })
    }

    /// A time in seconds, `digits[.digits]` or `.digits`, to microseconds.
    fn seconds(&mut self) -> Result<Micros, ScriptError> {
        const WANT: &str = "a time in seconds (at most 6 decimals)";
        let Tok::Number(text) = &self.peek()?.tok else {
            return Err(self.expected(WANT, ""));
        };
        let micros = seconds_to_micros(text);
        match micros {
            Some(micros) => {
                self.bump()?;
                Ok(micros)
            }
            None => Err(self.expected(WANT, "")),
        }
    }

    /// What happens, and how the end-of-line check names it.
    fn action(&mut self) -> Result<(EventKind, &'static str), ScriptError> {
        match &self.peek()?.tok {
            Tok::Punct('<') => {
                self.bump()?;
                Ok((self.packet(Direction::Inbound)?, SEGMENT))
            }
            Tok::Punct('>') => {
                self.bump()?;
                Ok((self.packet(Direction::Outbound)?, SEGMENT))
            }
            Tok::Shell(command) => {
                let command = command.clone();
                self.bump()?;
                Ok((EventKind::Shell(command), "shell command"))
            }
            Tok::Word(name) => {
                let name = name.clone();
                self.bump()?;
                Ok((self.syscall(name)?, "system call"))
            }
            Tok::Ellipsis => Err(self.unsupported("blocking system calls (`...END` before the call)")),
            _ => Err(self.expected("a segment (`<` or `>`), a system call or a shell command", "")),
        }
    }

    // ---- Segments ----

    /// `flags start:end(len) [ack N] [win N] [urg N] [<options>]`, the
    /// direction already read.
    fn packet(&mut self, direction: Direction) -> Result<EventKind, ScriptError> {
        match &self.peek()?.tok {
            Tok::Punct('[' | '(') => {
                return Err(
                    self.unsupported("IP header fields such as `[ect0]`, `[ce]`, `(tos 0x2)` or `(flowlabel 1)`")
                )
            }
            Tok::Word(w) if w == "udp" || w == "icmp" => return Err(self.unsupported("UDP and ICMP packets")),
            _ => {}
        }
        let flags = self.flags()?;
        let seq_start = self.unsigned("a sequence number", u32::MAX.into())? as u32;
        self.punct(':', "`:` between the first and the end sequence number")?;
        let end_pos = self.peek()?.start;
        let seq_end = self.unsigned("an end sequence number", u32::MAX.into())? as u32;
        self.punct('(', "`(` and the payload length")?;
        let payload_len = self.unsigned("a payload length", u16::MAX.into())? as u16;
        self.punct(')', "`)` after the payload length")?;
        // The end is redundant, written for the reader: hold it to the sum
        // (modulo 2^32, as sequence numbers wrap, RFC 9293 §3.4).
        let want_end = seq_start.wrapping_add(payload_len.into());
        if seq_end != want_end {
            return Err(self.expected_at(
                end_pos,
                &format!("the end sequence number {want_end} (start {seq_start} + length {payload_len})"),
                &format!("`{seq_end}`"),
            ));
        }
        let ack = self
            .keyword_number("ack", "an acknowledgment number", u32::MAX.into())?
            .map(|n| n as u32);
        let window = self
            .keyword_number("win", "a window", u16::MAX.into())?
            .map(|n| n as u16);
        let urgent = self
            .keyword_number("urg", "an urgent pointer", u16::MAX.into())?
            .map(|n| n as u16);
        // packetdrill builds injected segments from the script alone, so it
        // needs their window; an expected segment's may be left unchecked.
        if direction == Direction::Inbound && window.is_none() {
            return Err(self.expected("`win N` (an inbound segment must give its window)", ""));
        }
        let options = if self.peek()?.tok == Tok::Punct('<') {
            self.options()?
        } else {
            Some(Vec::new())
        };
        Ok(EventKind::Packet {
            direction,
            flags,
            seq_start,
            seq_end,
            payload_len,
            ack,
            window,
            urgent,
            options,
        })
    }

    /// Letters from `SFRPUEW` then an optional `.` (ACK), a lone `.`, or
    /// `-` for no flag at all.
    fn flags(&mut self) -> Result<TcpFlags, ScriptError> {
        const WANT: &str = "TCP flags (letters from `SFRPUEW`, then `.` for ACK; `-` for none)";
        let mut flags = TcpFlags::default();
        match &self.peek()?.tok {
            Tok::Punct('-') => {
                self.bump()?;
                return Ok(flags);
            }
            Tok::Punct('.') => {}
            Tok::Word(letters) => {
                let letters = letters.clone();
                for letter in letters.chars() {
                    let bit = match letter {
                        'S' => &mut flags.syn,
                        'F' => &mut flags.fin,
                        'R' => &mut flags.rst,
                        'P' => &mut flags.psh,
                        'U' => &mut flags.urg,
                        'E' => &mut flags.ece,
                        'W' => &mut flags.cwr,
                        'A' | '0'..='9' => return Err(self.unsupported("AccECN flags (`A` and the ACE digits)")),
                        _ => return Err(self.expected(WANT, "")),
                    };
                    if *bit {
                        return Err(self.expected("each flag once", &format!("`{letters}`")));
                    }
                    *bit = true;
                }
                self.bump()?;
            }
            Tok::Number(n) if n.starts_with('.') => {
                return Err(self.unsupported("AccECN flags (`A` and the ACE digits)"))
            }
            _ => return Err(self.expected(WANT, "")),
        }
        if self.peek()?.tok == Tok::Punct('.') {
            self.bump()?;
            flags.ack = true;
        }
        Ok(flags)
    }

    /// `<...>` (any options: `None`) or `<option, option, ...>`.
    fn options(&mut self) -> Result<Option<Vec<TcpOptionSpec>>, ScriptError> {
        let open = self.bump()?.start;
        if self.peek()?.tok == Tok::Ellipsis {
            self.bump()?;
            self.punct('>', "`>` after `<...`")?;
            return Ok(None);
        }
        let mut options = Vec::new();
        loop {
            options.push(self.tcp_option()?);
            match self.peek()?.tok {
                Tok::Punct(',') => {
                    self.bump()?;
                }
                Tok::Punct('>') => {
                    self.bump()?;
                    break;
                }
                _ => return Err(self.expected("`,` and another option, or `>` ending the options", "")),
            }
        }
        let bytes: usize = options.iter().map(TcpOptionSpec::encoded_len).sum();
        if bytes > MAX_OPTION_BYTES {
            return Err(self.expected_at(
                open,
                "options that fit in a TCP header's 40 bytes (RFC 9293 §3.1)",
                &format!("{bytes} bytes"),
            ));
        }
        if !bytes.is_multiple_of(4) {
            return Err(self.expected_at(
                open,
                "options padded with `nop` to a multiple of 4 bytes (the data offset counts 32-bit words, RFC 9293 §3.1)",
                &format!("{bytes} bytes"),
            ));
        }
        Ok(Some(options))
    }

    fn tcp_option(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        const WANT: &str =
            "a TCP option (`nop`, `eol`, `mss N`, `wscale N`, `sackOK`, `sack L:R ...`, `TS val N ecr N`)";
        let Tok::Word(name) = &self.peek()?.tok else {
            return Err(self.expected(WANT, ""));
        };
        let option = match name.as_str() {
            "nop" => TcpOptionSpec::Nop,
            "eol" => TcpOptionSpec::EndOfList,
            "sackOK" => TcpOptionSpec::SackPermitted,
            "mss" | "wscale" | "sack" | "TS" => {
                let name = name.clone();
                self.bump()?;
                return match name.as_str() {
                    "mss" => Ok(TcpOptionSpec::Mss(self.unsigned("an MSS", u16::MAX.into())? as u16)),
                    "wscale" => Ok(TcpOptionSpec::WindowScale(
                        self.unsigned("a window scale shift count", u8::MAX.into())? as u8,
                    )),
                    "sack" => self.sack_blocks(),
                    _ => self.timestamps(),
                };
            }
            "FO" | "FOEXP" => return Err(self.unsupported("TCP Fast Open options (`FO`, `FOEXP`)")),
            "md5" => return Err(self.unsupported("TCP MD5 signature options (`md5`)")),
            _ => return Err(self.expected(WANT, "")),
        };
        self.bump()?;
        Ok(option)
    }

    /// `L:R L:R ...` after `sack`: one block or more.
    fn sack_blocks(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        let mut blocks = Vec::new();
        loop {
            let left = self.unsigned("a SACK block's left edge", u32::MAX.into())? as u32;
            self.punct(':', "`:` between a SACK block's edges")?;
            let right = self.unsigned("a SACK block's right edge", u32::MAX.into())? as u32;
            blocks.push(SackBlock { left, right });
            if !matches!(self.peek()?.tok, Tok::Number(_)) {
                return Ok(TcpOptionSpec::Sack(blocks));
            }
        }
    }

    /// `val N ecr N` after `TS`.
    fn timestamps(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        self.keyword("val")?;
        let val = self.unsigned("a TSval", u32::MAX.into())? as u32;
        self.keyword("ecr")?;
        let ecr = self.unsigned("a TSecr", u32::MAX.into())? as u32;
        Ok(TcpOptionSpec::Timestamp { val, ecr })
    }

    // ---- System calls ----

    /// `(args) = result [ERRNO] [(note)]`, the name read.
    fn syscall(&mut self, name: String) -> Result<EventKind, ScriptError> {
        self.punct('(', &format!("`(` and the arguments of `{name}`"))?;
        let args = self.expr_list(')')?;
        self.punct('=', "`=` and the expected result")?;
        let result = self.expr(false)?;
        let mut errno = None;
        let next = self.peek()?;
        if let (Tok::Word(word), false) = (&next.tok, next.line_start) {
            errno = Some(word.clone());
            self.bump()?;
        }
        if self.peek()?.tok == Tok::Punct('(') && !self.peek()?.line_start {
            self.note()?;
        }
        Ok(EventKind::Syscall {
            name,
            args,
            result,
            errno,
        })
    }

    /// `(words)` after a result: a comment for the reader (packetdrill's
    /// strerror text), skipped; it ends on its line.
    fn note(&mut self) -> Result<(), ScriptError> {
        self.bump()?;
        loop {
            let token = self.peek()?;
            if token.tok == Tok::End || token.line_start {
                return Err(self.expected("`)` ending the note", ""));
            }
            if self.bump()?.tok == Tok::Punct(')') {
                return Ok(());
            }
        }
    }

    // ---- Expressions ----

    /// `primary | primary | ...`. `call_ok` is false for a result, where a
    /// word before `(` is an errno name before its note, not a call.
    fn expr(&mut self, call_ok: bool) -> Result<Expr, ScriptError> {
        if self.depth >= MAX_NESTING {
            return Err(self.expected(&format!("expressions nested at most {MAX_NESTING} deep"), ""));
        }
        self.depth += 1;
        let expr = self.bit_or(call_ok);
        self.depth -= 1;
        expr
    }

    fn bit_or(&mut self, call_ok: bool) -> Result<Expr, ScriptError> {
        let first = self.primary(call_ok)?;
        if self.peek()?.tok != Tok::Punct('|') {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.peek()?.tok == Tok::Punct('|') {
            self.bump()?;
            items.push(self.primary(call_ok)?);
        }
        Ok(Expr::BitOr(items))
    }

    fn primary(&mut self, call_ok: bool) -> Result<Expr, ScriptError> {
        const WANT: &str = "a value (an integer, a name, a string, `...`, `[list]` or `{struct}`)";
        let token = self.peek()?.clone();
        let expr = match token.tok {
            Tok::Ellipsis => Expr::Ellipsis,
            Tok::Str(text) => Expr::Str(text),
            Tok::Number(text) => match integer(&text) {
                Some(n) => Expr::Int(n),
                None => return Err(self.expected("an integer (64-bit, decimal or 0x hex)", "")),
            },
            Tok::Word(name) => {
                self.bump()?;
                if call_ok && self.peek()?.tok == Tok::Punct('(') {
                    self.bump()?;
                    let args = self.expr_list(')')?;
                    return Ok(Expr::Call { name, args });
                }
                return Ok(Expr::Symbol(name));
            }
            Tok::Punct('[') => {
                self.bump()?;
                return Ok(Expr::List(self.expr_list(']')?));
            }
            Tok::Punct('{') => {
                self.bump()?;
                return Ok(Expr::Struct(self.fields()?));
            }
            _ => return Err(self.expected(WANT, "")),
        };
        self.bump()?;
        Ok(expr)
    }

    /// `expr, expr, ... close` (possibly empty), the opening bracket read.
    fn expr_list(&mut self, close: char) -> Result<Vec<Expr>, ScriptError> {
        let mut items = Vec::new();
        if self.peek()?.tok == Tok::Punct(close) {
            self.bump()?;
            return Ok(items);
        }
        loop {
            items.push(self.expr(true)?);
            if self.list_goes_on(close)? {
                continue;
            }
            return Ok(items);
        }
    }

    /// `name=expr` or `expr`, comma-separated, up to `}`, the `{` read.
    fn fields(&mut self) -> Result<Vec<Field>, ScriptError> {
        let mut fields = Vec::new();
        if self.peek()?.tok == Tok::Punct('}') {
            self.bump()?;
            return Ok(fields);
        }
        loop {
            let mut name = None;
            if let Tok::Word(word) = &self.peek()?.tok {
                let word = word.clone();
                if self.peek2()?.tok == Tok::Punct('=') {
                    self.bump()?;
                    self.bump()?;
                    name = Some(word);
                }
            }
            let value = self.expr(true)?;
            if self.peek()?.tok == Tok::Punct('=') {
                return Err(
                    self.unsupported("struct fields named by more than a name (a msghdr's `msg_name(...)=...`)")
                );
            }
            fields.push(Field { name, value });
            if !self.list_goes_on('}')? {
                return Ok(fields);
            }
        }
    }

    /// After an item: `,` (true, consumed) or `close` (false, consumed).
    fn list_goes_on(&mut self, close: char) -> Result<bool, ScriptError> {
        match self.peek()?.tok {
            Tok::Punct(',') => {
                self.bump()?;
                Ok(true)
            }
            Tok::Punct(c) if c == close => {
                self.bump()?;
                Ok(false)
            }
            _ => Err(self.expected(&format!("`,` or `{close}`"), "")),
        }
    }

    // ---- Tokens ----

    fn peek(&mut self) -> Result<&Token, ScriptError> {
        self.fill(1)?;
        Ok(&self.ahead[0])
    }

    fn peek2(&mut self) -> Result<&Token, ScriptError> {
        self.fill(2)?;
        Ok(&self.ahead[1])
    }

    fn fill(&mut self, n: usize) -> Result<(), ScriptError> {
        while self.ahead.len() < n {
            let token = self.lexer.next_token()?;
            self.ahead.push_back(token);
        }
        Ok(())
    }

    fn bump(&mut self) -> Result<Token, ScriptError> {
        self.fill(1)?;
        let token = self.ahead.pop_front().expect("fill(1) left a token");
        self.prev_end = token.end;
        Ok(token)
    }

    /// Consumes the punctuation `c`, or fails saying `want`.
    fn punct(&mut self, c: char, want: &str) -> Result<(), ScriptError> {
        if self.peek()?.tok != Tok::Punct(c) {
            return Err(self.expected(want, ""));
        }
        self.bump()?;
        Ok(())
    }

    /// Consumes the word `word`, or fails.
    fn keyword(&mut self, word: &str) -> Result<(), ScriptError> {
        if !matches!(&self.peek()?.tok, Tok::Word(w) if w == word) {
            return Err(self.expected(&format!("`{word}`"), ""));
        }
        self.bump()?;
        Ok(())
    }

    /// `word N` if the next token is `word` (on this line), else `None`.
    fn keyword_number(&mut self, word: &str, what: &str, max: u64) -> Result<Option<u64>, ScriptError> {
        let next = self.peek()?;
        if next.line_start || !matches!(&next.tok, Tok::Word(w) if w == word) {
            return Ok(None);
        }
        self.bump()?;
        self.unsigned(what, max).map(Some)
    }

    /// A decimal integer from 0 to `max`.
    fn unsigned(&mut self, what: &str, max: u64) -> Result<u64, ScriptError> {
        let value = match &self.peek()?.tok {
            Tok::Number(text) if text.bytes().all(|b| b.is_ascii_digit()) => text.parse::<u64>().ok(),
            _ => None,
        };
        match value.filter(|&v| v <= max) {
            Some(v) => {
                self.bump()?;
                Ok(v)
            }
            None => Err(self.expected(&format!("{what} from 0 to {max}"), "")),
        }
    }

    /// "expected `want`, found ..." at the next token; `found` empty means
    /// "describe the next token". A token that starts a new line inside
    /// an event is "end of line" at the end of the previous token.
    fn expected(&mut self, want: &str, found: &str) -> ScriptError {
        let token = match self.peek() {
            Ok(token) => token.clone(),
            Err(lex_error) => return lex_error,
        };
        let at_line_end = self.in_event && (token.line_start || token.tok == Tok::End);
        let (at, description) = if at_line_end {
            let end = if token.tok == Tok::End {
                "end of file"
            } else {
                "end of line"
            };
            (self.prev_end, end.to_string())
        } else {
            (token.start, token.describe())
        };
        let found = if found.is_empty() {
            description
        } else {
            found.to_string()
        };
        self.expected_at(at, want, &found)
    }

    fn expected_at(&self, at: Pos, want: &str, found: &str) -> ScriptError {
        error_at(
            self.file,
            at,
            ErrorMessage::Expected {
                expected: want.to_string(),
                found: found.to_string(),
            },
        )
    }

    /// "unsupported: `what`" at the next token.
    fn unsupported(&mut self, what: &str) -> ScriptError {
        let at = match self.peek() {
            Ok(token) => token.start,
            Err(lex_error) => return lex_error,
        };
        error_at(self.file, at, ErrorMessage::Unsupported { what: what.to_string() })
    }
}

/// `digits[.digits]` or `.digits` seconds to microseconds; `None` for a
/// sign, hex, more than 6 decimals or more than 2^64 microseconds.
fn seconds_to_micros(text: &str) -> Option<Micros> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) || fraction.len() > 6 || (whole.is_empty() && fraction.is_empty()) {
        return None;
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction: u64 = format!("{fraction:0<6}").parse().ok()?;
    whole.checked_mul(1_000_000)?.checked_add(fraction)
}

/// `-?digits` or `-?0x hexdigits` to an `i64`; `None` for decimals or
/// values out of range.
fn integer(text: &str) -> Option<i64> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = match magnitude.strip_prefix("0x").or_else(|| magnitude.strip_prefix("0X")) {
        Some(hex) => i128::from_str_radix(hex, 16).ok()?,
        None if !magnitude.is_empty() && magnitude.bytes().all(|b| b.is_ascii_digit()) => magnitude.parse().ok()?,
        None => return None,
    };
    i64::try_from(if negative { -value } else { value }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_to_micros_reads_packetdrill_times() {
        assert_eq!(seconds_to_micros("0"), Some(0));
        assert_eq!(seconds_to_micros(".1"), Some(100_000));
        assert_eq!(seconds_to_micros("0.100"), Some(100_000));
        assert_eq!(seconds_to_micros("2.000001"), Some(2_000_001));
        assert_eq!(seconds_to_micros("0.0000001"), None);
        assert_eq!(seconds_to_micros("-1"), None);
        assert_eq!(seconds_to_micros("0x1"), None);
        assert_eq!(seconds_to_micros("18446744073709"), Some(18_446_744_073_709_000_000));
        assert_eq!(seconds_to_micros("18446744073710"), None);
    }

    #[test]
    fn integer_reads_decimal_and_hex() {
        assert_eq!(integer("0"), Some(0));
        assert_eq!(integer("-1"), Some(-1));
        assert_eq!(integer("0x1f"), Some(31));
        assert_eq!(integer("-0x10"), Some(-16));
        assert_eq!(integer("9223372036854775807"), Some(i64::MAX));
        assert_eq!(integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(integer("9223372036854775808"), None);
        assert_eq!(integer("1.5"), None);
        assert_eq!(integer("99999999999999999999999999999999999999999"), None);
    }
}
