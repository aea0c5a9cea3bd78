//! The parser: tokens (`lex.rs`) to a [`Script`], by recursive descent
//! over packetdrill's grammar (its `Syntax.md`, "Syntactic Structure"),
//! cut down to the subset `mod.rs` lists; segment lines are parsed in
//! `segment.rs`. One event per line: an event may wrap onto later lines
//! inside its brackets, but the next event starts on a new line, which
//! lets errors say "found end of line".

use std::collections::{BTreeMap, VecDeque};

use super::ast::{Direction, Event, EventKind, EventTime, Expr, Field, Micros, Script};
use super::error::{ErrorMessage, ScriptError};
use super::lex::{error_at, Lexer, Pos, Tok, Token};
use super::segment;

/// How deep lists, structs and calls may nest: deeper input is refused
/// rather than recursed into (the stack is not the input's to spend).
const MAX_NESTING: u32 = 32;

/// What may follow an event's time.
const ACTION: &str = "a segment (`<` or `>`), a system call or a shell command";

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

pub(super) struct Parser<'a> {
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
        if time != EventTime::Untimed && self.peek()?.line_start {
            // A time alone on its line: "found end of line".
            return Err(self.expected(ACTION, ""));
        }
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
                Ok((self.packet(Direction::Inbound)?, segment::WHAT))
            }
            Tok::Punct('>') => {
                self.bump()?;
                Ok((self.packet(Direction::Outbound)?, segment::WHAT))
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
            _ => Err(self.expected(ACTION, "")),
        }
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

    pub(super) fn peek(&mut self) -> Result<&Token, ScriptError> {
        self.fill(1)?;
        Ok(&self.ahead[0])
    }

    pub(super) fn peek2(&mut self) -> Result<&Token, ScriptError> {
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

    pub(super) fn bump(&mut self) -> Result<Token, ScriptError> {
        self.fill(1)?;
        let token = self.ahead.pop_front().expect("fill(1) left a token");
        self.prev_end = token.end;
        Ok(token)
    }

    /// Consumes the punctuation `c`, or fails saying `want`.
    pub(super) fn punct(&mut self, c: char, want: &str) -> Result<(), ScriptError> {
        if self.peek()?.tok != Tok::Punct(c) {
            return Err(self.expected(want, ""));
        }
        self.bump()?;
        Ok(())
    }

    /// Consumes the word `word`, or fails.
    pub(super) fn keyword(&mut self, word: &str) -> Result<(), ScriptError> {
        if !matches!(&self.peek()?.tok, Tok::Word(w) if w == word) {
            return Err(self.expected(&format!("`{word}`"), ""));
        }
        self.bump()?;
        Ok(())
    }

    /// `word N` if the next token is `word` (on this line), else `None`.
    pub(super) fn keyword_number(&mut self, word: &str, what: &str, max: u64) -> Result<Option<u64>, ScriptError> {
        let next = self.peek()?;
        if next.line_start || !matches!(&next.tok, Tok::Word(w) if w == word) {
            return Ok(None);
        }
        self.bump()?;
        self.unsigned(what, max).map(Some)
    }

    /// A decimal integer from 0 to `max` (so a caller's cast to the type
    /// whose maximum that is loses nothing).
    pub(super) fn unsigned(&mut self, what: &str, max: u64) -> Result<u64, ScriptError> {
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
    pub(super) fn expected(&mut self, want: &str, found: &str) -> ScriptError {
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

    pub(super) fn expected_at(&self, at: Pos, want: &str, found: &str) -> ScriptError {
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
    pub(super) fn unsupported(&mut self, what: &str) -> ScriptError {
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
