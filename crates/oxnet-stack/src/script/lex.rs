//! Splits a script into tokens, packetdrill's lexical structure (its
//! `Syntax.md`, "Lexical Structure"): words, numbers, strings, backquoted
//! shell commands, `--name=value` options, `...`, and single punctuation
//! characters. Whitespace and both comment styles are skipped; where a
//! token sits (and whether it starts a line) is kept for error messages.

use super::error::{ErrorMessage, ScriptError};

/// A place in the text: line and column (in characters), both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: u32,
    pub column: u32,
}

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`: a name, keyword or TCP flag letters.
    Word(String),
    /// `-?` then `0x` and hex digits, or digits with an optional `.digits`
    /// (`.1` too): the text as written; the parser decides what fits.
    Number(String),
    /// `"..."`, the text between the quotes as written.
    Str(String),
    /// `` `...` ``, the text between the backquotes as written.
    Shell(String),
    /// `--name=value` (the value is the run of non-blank characters after
    /// the `=`: an IP address, a word, a number) or `--name` (value empty).
    Opt { name: String, value: String },
    /// `...`
    Ellipsis,
    /// Any other single character.
    Punct(char),
    /// The end of the text (returned again on every later call).
    End,
}

/// A token and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub tok: Tok,
    /// Its first character.
    pub start: Pos,
    /// Just past its last character.
    pub end: Pos,
    /// Whether it is the first token on its line (or of the text).
    pub line_start: bool,
}

impl Token {
    /// How an error message names the token ("found ...").
    pub fn describe(&self) -> String {
        match &self.tok {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Number(n) => format!("`{n}`"),
            Tok::Str(_) => "a string".to_string(),
            Tok::Shell(_) => "a shell command".to_string(),
            Tok::Opt { name, .. } => format!("the option `--{name}` (options go before the first event)"),
            Tok::Ellipsis => "`...`".to_string(),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::End => "end of file".to_string(),
        }
    }
}

/// Produces tokens one at a time, so an error late in the text does not
/// hide an earlier one.
pub(super) struct Lexer<'a> {
    file: &'a str,
    text: &'a str,
    /// Byte offset of the next character.
    at: usize,
    pos: Pos,
    /// The line the previous token ended on (0 before the first token).
    last_line: u32,
}

impl<'a> Lexer<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Lexer<'a> {
        Lexer {
            file,
            text,
            at: 0,
            pos: Pos { line: 1, column: 1 },
            last_line: 0,
        }
    }

    /// The next token, or an error for text that is no token (an
    /// unterminated string, comment or command; embedded code).
    pub fn next_token(&mut self) -> Result<Token, ScriptError> {
        self.skip_blanks_and_comments()?;
        let start = self.pos;
        let tok = self.token(start)?;
        let line_start = start.line != self.last_line;
        self.last_line = self.pos.line;
        Ok(Token {
            tok,
            start,
            end: self.pos,
            line_start,
        })
    }

    fn token(&mut self, start: Pos) -> Result<Tok, ScriptError> {
        let Some(c) = self.peek(0) else {
            return Ok(Tok::End);
        };
        let next = self.peek(1);
        let is_digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        if c == '`' {
            return Ok(Tok::Shell(self.quoted(start, '`', "shell command")?));
        }
        if c == '"' {
            return Ok(Tok::Str(self.quoted(start, '"', "string")?));
        }
        if c == '%' && next == Some('{') {
            return Err(self.unsupported(start, "embedded code `%{ ... }%`"));
        }
        if c == '-' && next == Some('-') && self.peek(2).is_some_and(is_word_char) {
            return self.option();
        }
        let signed_digit = c == '-' && (is_digit(next) || (next == Some('.') && is_digit(self.peek(2))));
        if c.is_ascii_digit() || (c == '.' && is_digit(next)) || signed_digit {
            return Ok(self.number());
        }
        if c == '.' && next == Some('.') && self.peek(2) == Some('.') {
            self.bump_n(3);
            return Ok(Tok::Ellipsis);
        }
        if c.is_ascii_alphabetic() || c == '_' {
            return Ok(Tok::Word(self.take_while(is_word_char)));
        }
        self.bump();
        Ok(Tok::Punct(c))
    }

    /// Skips blanks, newlines, `// ...` to the end of the line and
    /// `/* ... */` (which may span lines).
    fn skip_blanks_and_comments(&mut self) -> Result<(), ScriptError> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('/'), Some('/')) => {
                    self.take_while(|c| c != '\n');
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos;
                    self.bump_n(2);
                    loop {
                        match (self.peek(0), self.peek(1)) {
                            (None, _) => return Err(self.expected(start, "`*/` closing this comment", "end of file")),
                            (Some('*'), Some('/')) => {
                                self.bump_n(2);
                                break;
                            }
                            _ => {
                                self.bump();
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// `"text"` or `` `command` `` (`close` is the quote): a backslash
    /// escapes the next character, so the text may hold the quote; the
    /// text is kept as written (packetdrill too leaves escapes to whoever
    /// uses the string).
    fn quoted(&mut self, start: Pos, close: char, what: &str) -> Result<String, ScriptError> {
        self.bump();
        let mut raw = String::new();
        let close_name = if close == '`' {
            "`` ` ``".to_string()
        } else {
            format!("`{close}`")
        };
        let unterminated =
            |lexer: &Self| lexer.expected(start, &format!("{close_name} closing this {what}"), "end of file");
        loop {
            match self.bump() {
                None => return Err(unterminated(self)),
                Some(c) if c == close => return Ok(raw),
                Some('\\') => {
                    raw.push('\\');
                    match self.bump() {
                        Some(c) => raw.push(c),
                        None => return Err(unterminated(self)),
                    }
                }
                Some(c) => raw.push(c),
            }
        }
    }

    /// `--name=value`, blanks allowed around the `=` but not a newline;
    /// or `--name` alone (a switch such as `--strict_segments`), whose
    /// value is empty.
    fn option(&mut self) -> Result<Tok, ScriptError> {
        self.bump_n(2);
        let name = self.take_while(is_word_char);
        self.take_while(|c| c == ' ' || c == '\t');
        if self.peek(0) != Some('=') {
            return Ok(Tok::Opt {
                name,
                value: String::new(),
            });
        }
        self.bump();
        self.take_while(|c| c == ' ' || c == '\t');
        let value = self.take_while(|c| !c.is_whitespace());
        if value.is_empty() {
            let here = self.pos;
            let found = describe_char(self.peek(0));
            return Err(self.expected(here, &format!("a value for `--{name}`"), &found));
        }
        Ok(Tok::Opt { name, value })
    }

    /// `-?`, then `0x` and hex digits, or `digits` and `.digits` (either
    /// part may be missing, not both: the caller has seen a digit).
    fn number(&mut self) -> Tok {
        let mut text = String::new();
        if self.peek(0) == Some('-') {
            self.bump();
            text.push('-');
        }
        let hex_prefix = self.peek(0) == Some('0') && matches!(self.peek(1), Some('x' | 'X'));
        if hex_prefix && self.peek(2).is_some_and(|c| c.is_ascii_hexdigit()) {
            self.bump_n(2);
            text.push_str("0x");
            text.push_str(&self.take_while(|c| c.is_ascii_hexdigit()));
            return Tok::Number(text);
        }
        text.push_str(&self.take_while(|c| c.is_ascii_digit()));
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            text.push('.');
            text.push_str(&self.take_while(|c| c.is_ascii_digit()));
        }
        Tok::Number(text)
    }

    fn peek(&self, n: usize) -> Option<char> {
        self.text.get(self.at..)?.chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.pos.line = self.pos.line.saturating_add(1);
            self.pos.column = 1;
        } else {
            self.pos.column = self.pos.column.saturating_add(1);
        }
        Some(c)
    }

    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let mut taken = String::new();
        while let Some(c) = self.peek(0).filter(|&c| keep(c)) {
            self.bump();
            taken.push(c);
        }
        taken
    }

    fn expected(&self, at: Pos, expected: &str, found: &str) -> ScriptError {
        error_at(
            self.file,
            at,
            ErrorMessage::Expected {
                expected: expected.to_string(),
                found: found.to_string(),
            },
        )
    }

    fn unsupported(&self, at: Pos, what: &str) -> ScriptError {
        error_at(self.file, at, ErrorMessage::Unsupported { what: what.to_string() })
    }
}

/// The error at `at` in `file`.
pub(super) fn error_at(file: &str, at: Pos, message: ErrorMessage) -> ScriptError {
    ScriptError {
        file: file.to_string(),
        line: at.line,
        column: at.column,
        message,
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn describe_char(c: Option<char>) -> String {
    match c {
        None => "end of file".to_string(),
        Some('\n') => "end of line".to_string(),
        Some(c) => format!("`{c}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        let mut lexer = Lexer::new("t.pkt", text);
        let mut out = Vec::new();
        loop {
            let token = lexer.next_token().unwrap();
            if token.tok == Tok::End {
                return out;
            }
            out.push(token.tok);
        }
    }

    fn word(w: &str) -> Tok {
        Tok::Word(w.to_string())
    }

    fn num(n: &str) -> Tok {
        Tok::Number(n.to_string())
    }

    #[test]
    fn segment_line() {
        assert_eq!(
            toks("+.1 < P. 1:1001(1000) ack 1 win 257 <...>"),
            vec![
                Tok::Punct('+'),
                num(".1"),
                Tok::Punct('<'),
                word("P"),
                Tok::Punct('.'),
                num("1"),
                Tok::Punct(':'),
                num("1001"),
                Tok::Punct('('),
                num("1000"),
                Tok::Punct(')'),
                word("ack"),
                num("1"),
                word("win"),
                num("257"),
                Tok::Punct('<'),
                Tok::Ellipsis,
                Tok::Punct('>'),
            ]
        );
    }

    #[test]
    fn numbers_signs_and_hex() {
        assert_eq!(
            toks("-1 0x1F 0.100 - 5 0x"),
            vec![
                num("-1"),
                num("0x1F"),
                num("0.100"),
                Tok::Punct('-'),
                num("5"),
                num("0"),
                word("x")
            ]
        );
        // A blocking call's end time: `+.1`, `...`, `0.2`.
        assert_eq!(
            toks("+.1...0.2"),
            vec![Tok::Punct('+'), num(".1"), Tok::Ellipsis, num("0.2")]
        );
    }

    #[test]
    fn comments_strings_commands_options() {
        assert_eq!(
            toks("--tolerance_usecs = 10000 // c\n/* a\n b */ `a \\` b` \"x\\\"\\n\" --ip_version=ipv4-mapped-ipv6 --strict // c"),
            vec![
                Tok::Opt {
                    name: "tolerance_usecs".into(),
                    value: "10000".into()
                },
                Tok::Shell("a \\` b".into()),
                Tok::Str(r#"x\"\n"#.into()),
                Tok::Opt {
                    name: "ip_version".into(),
                    value: "ipv4-mapped-ipv6".into()
                },
                Tok::Opt {
                    name: "strict".into(),
                    value: String::new()
                },
            ]
        );
    }

    #[test]
    fn positions_and_line_starts() {
        let mut lexer = Lexer::new("t.pkt", "a /* x\n y */ b\n  c");
        let a = lexer.next_token().unwrap();
        let b = lexer.next_token().unwrap();
        let c = lexer.next_token().unwrap();
        assert_eq!(
            (a.start, a.end, a.line_start),
            (Pos { line: 1, column: 1 }, Pos { line: 1, column: 2 }, true)
        );
        assert_eq!((b.start, b.line_start), (Pos { line: 2, column: 7 }, true));
        assert_eq!((c.start, c.line_start), (Pos { line: 3, column: 3 }, true));
        let mut lexer = Lexer::new("t.pkt", "a b");
        lexer.next_token().unwrap();
        assert!(!lexer.next_token().unwrap().line_start);
    }

    #[test]
    fn unterminated_things_are_errors_at_their_start() {
        let err = |text: &str| Lexer::new("t.pkt", text).next_token().unwrap_err().to_string();
        assert_eq!(
            err("\n  /* x"),
            "t.pkt:2:3: expected `*/` closing this comment, found end of file"
        );
        assert_eq!(
            err("\"abc"),
            "t.pkt:1:1: expected `\"` closing this string, found end of file"
        );
        assert_eq!(
            err(" `ls"),
            "t.pkt:1:2: expected `` ` `` closing this shell command, found end of file"
        );
        assert_eq!(
            err("\"a\\\""),
            "t.pkt:1:1: expected `\"` closing this string, found end of file"
        );
        assert_eq!(
            err("--mss= \n"),
            "t.pkt:1:8: expected a value for `--mss`, found end of line"
        );
        assert_eq!(
            err("  %{ assert x }%"),
            "t.pkt:1:3: unsupported: embedded code `%{ ... }%` (not in oxnet's script subset)"
        );
    }
}
