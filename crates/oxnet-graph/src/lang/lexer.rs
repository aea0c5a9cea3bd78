//! Tokens of the Click language (click(5), "LEXICAL ISSUES").
//!
//! Identifiers are letters, digits, `_`, `@` and `/`, not beginning or
//! ending with `/` and never containing `//` (a comment starts there).
//! `->`, `=>`, `::`, `;`, `,`, `(`, `)`, `[`, `]`, `{`, `}`, `|`, `||` and
//! `...` are single tokens; `$name` is a parameter. Comments are C++'s.
//! Lines `# N "file"` and `#line N "file"` change the position reported
//! in errors. A configuration string is not tokenised: after a `(` that
//! opens one, the parser asks for [`Lexer::config_string`], which reads up
//! to the next unbalanced `)`, skipping quotes and comments.

use super::{Error, Pos};
use std::rc::Rc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `$name` (without the dollar sign).
    Param(String),
    Arrow,
    /// `=>`, the many-to-many connector.
    FatArrow,
    ColonColon,
    Semi,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Bar,
    BarBar,
    Ellipsis,
    /// `-` on its own (port ranges `[0-2]`).
    Minus,
    Eof,
}

impl Tok {
    /// How the token is written, for "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Param(s) => format!("'${s}'"),
            Tok::Arrow => "'->'".into(),
            Tok::FatArrow => "'=>'".into(),
            Tok::ColonColon => "'::'".into(),
            Tok::Semi => "';'".into(),
            Tok::Comma => "','".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::LBrace => "'{'".into(),
            Tok::RBrace => "'}'".into(),
            Tok::Bar => "'|'".into(),
            Tok::BarBar => "'||'".into(),
            Tok::Ellipsis => "'...'".into(),
            Tok::Minus => "'-'".into(),
            Tok::Eof => "end of file".into(),
        }
    }
}

pub struct Lexer<'a> {
    src: &'a [u8],
    at: usize,
    file: Rc<str>,
    line: u32,
    line_start: usize,
}

fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'@' || b == b'/'
}

impl<'a> Lexer<'a> {
    pub fn new(file: &str, src: &'a str) -> Lexer<'a> {
        Lexer {
            src: src.as_bytes(),
            at: 0,
            file: Rc::from(file),
            line: 1,
            line_start: 0,
        }
    }

    pub fn pos(&self) -> Pos {
        self.pos_at(self.at)
    }

    fn pos_at(&self, at: usize) -> Pos {
        // Columns count characters, not bytes, from 1.
        let col = String::from_utf8_lossy(&self.src[self.line_start..at.max(self.line_start)])
            .chars()
            .count() as u32
            + 1;
        Pos {
            file: self.file.clone(),
            line: self.line,
            col,
        }
    }

    fn peek_byte(&self, ahead: usize) -> u8 {
        self.src.get(self.at + ahead).copied().unwrap_or(0)
    }

    fn bump(&mut self) {
        if self.peek_byte(0) == b'\n' {
            self.line += 1;
            self.line_start = self.at + 1;
        }
        self.at += 1;
    }

    /// Skips white space, comments and line directives.
    fn skip_space(&mut self) -> Result<(), Error> {
        loop {
            let b = self.peek_byte(0);
            if self.at >= self.src.len() {
                return Ok(());
            }
            if b.is_ascii_whitespace() {
                self.bump();
            } else if b == b'/' && self.peek_byte(1) == b'/' {
                while self.at < self.src.len() && self.peek_byte(0) != b'\n' {
                    self.bump();
                }
            } else if b == b'/' && self.peek_byte(1) == b'*' {
                let start = self.pos();
                self.bump();
                self.bump();
                loop {
                    if self.at >= self.src.len() {
                        return Err(Error::new(start, "unterminated '/*' comment"));
                    }
                    if self.peek_byte(0) == b'*' && self.peek_byte(1) == b'/' {
                        self.bump();
                        self.bump();
                        break;
                    }
                    self.bump();
                }
            } else if b == b'#'
                && self.src[self.line_start..self.at]
                    .iter()
                    .all(|c| c.is_ascii_whitespace())
            {
                self.line_directive();
            } else {
                return Ok(());
            }
        }
    }

    /// `# N "file"` or `#line N "file"` (click(5)): the next line is line N
    /// of that file. Anything else after `#` at the start of a line is a
    /// comment line, as Click's lexer treats it.
    fn line_directive(&mut self) {
        let start = self.at;
        while self.at < self.src.len() && self.peek_byte(0) != b'\n' {
            self.bump();
        }
        let text = String::from_utf8_lossy(&self.src[start + 1..self.at]).into_owned();
        let text = text.trim_start();
        let text = text.strip_prefix("line").unwrap_or(text).trim_start();
        let digits: String = text.chars().take_while(|c| c.is_ascii_digit()).collect();
        let Ok(number) = digits.parse::<u32>() else {
            return;
        };
        let rest = text[digits.len()..].trim();
        if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
            self.file = Rc::from(name);
        }
        if self.at < self.src.len() {
            self.bump(); // the newline; line becomes N below
        }
        self.line = number;
    }

    /// The next token and where it starts.
    pub fn next_token(&mut self) -> Result<(Tok, Pos), Error> {
        self.skip_space()?;
        let pos = self.pos();
        if self.at >= self.src.len() {
            return Ok((Tok::Eof, pos));
        }
        let b = self.peek_byte(0);
        let two = [b, self.peek_byte(1)];
        let (tok, len) = match &two {
            b"->" => (Tok::Arrow, 2),
            b"=>" => (Tok::FatArrow, 2),
            b"::" => (Tok::ColonColon, 2),
            b"||" => (Tok::BarBar, 2),
            b".." if self.peek_byte(2) == b'.' => (Tok::Ellipsis, 3),
            _ => match b {
                b';' => (Tok::Semi, 1),
                b',' => (Tok::Comma, 1),
                b'(' => (Tok::LParen, 1),
                b')' => (Tok::RParen, 1),
                b'[' => (Tok::LBracket, 1),
                b']' => (Tok::RBracket, 1),
                b'{' => (Tok::LBrace, 1),
                b'}' => (Tok::RBrace, 1),
                b'|' => (Tok::Bar, 1),
                b'-' => (Tok::Minus, 1),
                b'$' => return self.param(pos),
                _ if ident_byte(b) && b != b'/' => return self.ident(pos),
                _ => {
                    let c = String::from_utf8_lossy(&self.src[self.at..])
                        .chars()
                        .next()
                        .unwrap_or('?');
                    return Err(Error::new(pos, format!("unexpected character '{c}'")));
                }
            },
        };
        for _ in 0..len {
            self.bump();
        }
        Ok((tok, pos))
    }

    fn ident(&mut self, pos: Pos) -> Result<(Tok, Pos), Error> {
        let start = self.at;
        while ident_byte(self.peek_byte(0)) {
            // A comment ends an identifier ("an/identifier//comment").
            if self.peek_byte(0) == b'/' && matches!(self.peek_byte(1), b'/' | b'*') {
                break;
            }
            self.bump();
        }
        let text = String::from_utf8_lossy(&self.src[start..self.at]).into_owned();
        if text.ends_with('/') {
            return Err(Error::new(pos, format!("identifier '{text}' ends with '/'")));
        }
        Ok((Tok::Ident(text), pos))
    }

    fn param(&mut self, pos: Pos) -> Result<(Tok, Pos), Error> {
        self.bump(); // '$'
        let start = self.at;
        while self.peek_byte(0).is_ascii_alphanumeric() || self.peek_byte(0) == b'_' {
            self.bump();
        }
        if start == self.at {
            return Err(Error::new(pos, "'$' must be followed by a parameter name"));
        }
        Ok((
            Tok::Param(String::from_utf8_lossy(&self.src[start..self.at]).into_owned()),
            pos,
        ))
    }

    /// The configuration string after a `(` the caller has consumed, up to
    /// the next unbalanced `)` (consumed, not returned). Quotes and
    /// comments do not count for balancing; the text is returned as
    /// written, comments included (argument splitting removes them).
    pub fn config_string(&mut self, open: &Pos) -> Result<String, Error> {
        let start = self.at;
        let mut depth = 0usize;
        loop {
            if self.at >= self.src.len() {
                return Err(Error::new(
                    open.clone(),
                    "unbalanced '(': the configuration string has no ')'",
                ));
            }
            match self.peek_byte(0) {
                b'(' => depth += 1,
                b')' if depth == 0 => break,
                b')' => depth -= 1,
                q @ (b'"' | b'\'') => {
                    self.bump();
                    while self.at < self.src.len() && self.peek_byte(0) != q {
                        if q == b'"' && self.peek_byte(0) == b'\\' {
                            self.bump();
                        }
                        self.bump();
                    }
                }
                b'/' if self.peek_byte(1) == b'/' => {
                    while self.at < self.src.len() && self.peek_byte(0) != b'\n' {
                        self.bump();
                    }
                    continue;
                }
                b'/' if self.peek_byte(1) == b'*' => {
                    self.bump();
                    self.bump();
                    while self.at < self.src.len() && !(self.peek_byte(0) == b'*' && self.peek_byte(1) == b'/') {
                        self.bump();
                    }
                    self.bump();
                }
                _ => {}
            }
            self.bump();
        }
        let text = String::from_utf8_lossy(&self.src[start..self.at]).into_owned();
        self.bump(); // ')'
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(src: &str) -> Vec<Tok> {
        let mut lexer = Lexer::new("t", src);
        let mut out = Vec::new();
        loop {
            let (tok, _) = lexer.next_token().unwrap();
            if tok == Tok::Eof {
                return out;
            }
            out.push(tok);
        }
    }

    fn id(s: &str) -> Tok {
        Tok::Ident(s.into())
    }

    #[test]
    fn every_multi_character_token_of_click_5() {
        assert_eq!(
            tokens("-> => :: ; , ( ) [ ] { } | || ... -"),
            vec![
                Tok::Arrow,
                Tok::FatArrow,
                Tok::ColonColon,
                Tok::Semi,
                Tok::Comma,
                Tok::LParen,
                Tok::RParen,
                Tok::LBracket,
                Tok::RBracket,
                Tok::LBrace,
                Tok::RBrace,
                Tok::Bar,
                Tok::BarBar,
                Tok::Ellipsis,
                Tok::Minus
            ]
        );
    }

    #[test]
    fn a_comment_ends_an_identifier() {
        // click(5): "an/identifier/with/slashes//too/many" is an
        // identifier and a comment.
        assert_eq!(
            tokens("an/identifier/with/slashes//too/many"),
            vec![id("an/identifier/with/slashes")]
        );
        assert_eq!(
            tokens("a/*x*/b c@1 $v"),
            vec![id("a"), id("b"), id("c@1"), Tok::Param("v".into())]
        );
    }

    #[test]
    fn configuration_strings_balance_parentheses_outside_quotes_and_comments() {
        // The examples of click(5), "LEXICAL ISSUES".
        for (src, want) in [
            ("C1(simple string)", "simple string"),
            ("C2(string with (balanced parens))", "string with (balanced parens)"),
            ("C3(string with \")quoted\" paren)", "string with \")quoted\" paren"),
            (
                "C4(// end-of-line comment)\n still going!)",
                "// end-of-line comment)\n still going!",
            ),
            (
                "C5(/* slash-star comment) */ and backslash \\)",
                "/* slash-star comment) */ and backslash \\",
            ),
        ] {
            let mut lexer = Lexer::new("t", src);
            assert!(matches!(lexer.next_token().unwrap().0, Tok::Ident(_)));
            let (open, pos) = lexer.next_token().unwrap();
            assert_eq!(open, Tok::LParen);
            assert_eq!(lexer.config_string(&pos).unwrap(), want, "{src}");
            assert_eq!(lexer.next_token().unwrap().0, Tok::Eof, "{src}");
        }
    }

    #[test]
    fn positions_follow_lines_and_line_directives() {
        let mut lexer = Lexer::new("f.click", "a\n  b\n# 10 \"other.click\"\nc\n#line 20\nd");
        let positions: Vec<String> = (0..4).map(|_| lexer.next_token().unwrap().1.to_string()).collect();
        assert_eq!(
            positions,
            ["f.click:1:1", "f.click:2:3", "other.click:10:1", "other.click:20:1"]
        );
    }

    #[test]
    fn errors_name_the_position() {
        let mut lexer = Lexer::new("f", "a\n  ?");
        lexer.next_token().unwrap();
        assert_eq!(
            lexer.next_token().unwrap_err().to_string(),
            "f:2:3: unexpected character '?'"
        );
        let mut lexer = Lexer::new("f", "x /* open");
        lexer.next_token().unwrap();
        assert_eq!(
            lexer.next_token().unwrap_err().to_string(),
            "f:1:3: unterminated '/*' comment"
        );
        let mut lexer = Lexer::new("f", "X(1, (2)");
        lexer.next_token().unwrap();
        let (_, pos) = lexer.next_token().unwrap();
        assert!(lexer
            .config_string(&pos)
            .unwrap_err()
            .to_string()
            .starts_with("f:1:2: unbalanced '('"));
    }
}
