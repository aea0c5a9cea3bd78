//! A recursive-descent parser for click(5)'s BNF grammar ("BNF GRAMMAR").
//! Each function is named after the production it reads.

use super::ast::*;
use super::lexer::{Lexer, Tok};
use super::{Error, Pos};
use std::collections::VecDeque;
use std::rc::Rc;

/// Keywords that may not be identifiers (click(5), "LEXICAL ISSUES").
const KEYWORDS: &[&str] = &["elementclass", "require", "provide", "define"];

/// Parses a whole file.
pub fn parse(file: &str, text: &str) -> Result<Stmts, Error> {
    let mut p = Parser {
        lexer: Lexer::new(file, text),
        ahead: VecDeque::new(),
    };
    let stmts = p.stmts()?;
    let (tok, pos) = p.next()?;
    if tok != Tok::Eof {
        return Err(Error::new(
            pos,
            format!("expected a statement, found {}", tok.describe()),
        ));
    }
    Ok(stmts)
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: VecDeque<(Tok, Pos)>,
}

impl Parser<'_> {
    fn fill(&mut self, n: usize) -> Result<(), Error> {
        while self.ahead.len() < n {
            let t = self.lexer.next_token()?;
            self.ahead.push_back(t);
        }
        Ok(())
    }

    fn peek(&mut self) -> Result<&Tok, Error> {
        self.fill(1)?;
        Ok(&self.ahead[0].0)
    }

    fn peek2(&mut self) -> Result<&Tok, Error> {
        self.fill(2)?;
        Ok(&self.ahead[1].0)
    }

    fn peek_pos(&mut self) -> Result<Pos, Error> {
        self.fill(1)?;
        Ok(self.ahead[0].1.clone())
    }

    fn next(&mut self) -> Result<(Tok, Pos), Error> {
        self.fill(1)?;
        Ok(self.ahead.pop_front().expect("filled"))
    }

    fn expect(&mut self, want: Tok, context: &str) -> Result<Pos, Error> {
        let (tok, pos) = self.next()?;
        if tok != want {
            return Err(Error::new(
                pos,
                format!("expected {} {context}, found {}", want.describe(), tok.describe()),
            ));
        }
        Ok(pos)
    }

    /// The configuration string after `(` (which must be the last token
    /// read: the lexer continues right after it).
    fn config_after_paren(&mut self) -> Result<String, Error> {
        let open = self.next()?.1;
        debug_assert!(self.ahead.is_empty(), "config string with tokens buffered");
        self.lexer.config_string(&open)
    }

    /// `stmts`: until a token that ends a block (end of file, `}`, `||`,
    /// or `)` of a group).
    fn stmts(&mut self) -> Result<Stmts, Error> {
        let mut out = Vec::new();
        loop {
            match self.peek()? {
                Tok::Eof | Tok::RBrace | Tok::BarBar | Tok::RParen => return Ok(out),
                Tok::Semi => {
                    self.next()?;
                }
                Tok::Ident(word) if word == "elementclass" => out.push(self.elementclass()?),
                Tok::Ident(word) if word == "require" || word == "define" => {
                    let is_require = word == "require";
                    let (_, pos) = self.next()?;
                    if *self.peek()? != Tok::LParen {
                        let (tok, at) = self.next()?;
                        let what = if is_require { "require" } else { "define" };
                        return Err(Error::new(
                            at,
                            format!("expected '(' after '{what}', found {}", tok.describe()),
                        ));
                    }
                    let config = self.config_after_paren()?;
                    out.push(if is_require {
                        Stmt::Require { config, pos }
                    } else {
                        Stmt::Define { config, pos }
                    });
                }
                Tok::Ident(word) if word == "provide" => {
                    let pos = self.peek_pos()?;
                    return Err(Error::new(pos, "'provide' is not supported by oxnet"));
                }
                _ => out.push(Stmt::Connection(self.connection()?)),
            }
        }
    }

    /// `elementclassstmt`.
    fn elementclass(&mut self) -> Result<Stmt, Error> {
        let (_, pos) = self.next()?;
        let (tok, at) = self.next()?;
        let name = match tok {
            Tok::Ident(name) if !KEYWORDS.contains(&name.as_str()) => name,
            other => {
                return Err(Error::new(
                    at,
                    format!("expected a class name after 'elementclass', found {}", other.describe()),
                ))
            }
        };
        let class = match self.peek()? {
            Tok::LBrace => ClassRef::Compound(self.compound()?),
            Tok::Ident(_) => match self.next()?.0 {
                Tok::Ident(other) => ClassRef::Name(other),
                _ => unreachable!("peeked an identifier"),
            },
            _ => {
                let (tok, at) = self.next()?;
                return Err(Error::new(
                    at,
                    format!(
                        "expected '{{' or a class name after 'elementclass {name}', found {}",
                        tok.describe()
                    ),
                ));
            }
        };
        Ok(Stmt::ElementClass { name, class, pos })
    }

    /// `"{" compounds "}"` or `"{" compounds "||" "..." "}"`.
    fn compound(&mut self) -> Result<Rc<Compound>, Error> {
        let pos = self.expect(Tok::LBrace, "to open a compound element")?;
        let mut overloads = Vec::new();
        let mut extends = false;
        loop {
            let at = self.peek_pos()?;
            let formals = self.opt_formals()?;
            let body = Rc::new(self.stmts()?);
            overloads.push(Overload { formals, body, pos: at });
            let (tok, at) = self.next()?;
            match tok {
                Tok::RBrace => break,
                Tok::BarBar => {
                    if *self.peek()? == Tok::Ellipsis {
                        self.next()?;
                        self.expect(Tok::RBrace, "after '|| ...'")?;
                        extends = true;
                        break;
                    }
                }
                other => {
                    return Err(Error::new(
                        at,
                        format!(
                            "expected '}}' to close the compound element opened at {pos}, found {}",
                            other.describe()
                        ),
                    ))
                }
            }
        }
        Ok(Rc::new(Compound {
            overloads,
            extends,
            pos,
        }))
    }

    /// `opt-formals "|"`, when the compound starts with formals: `$a`,
    /// `KEYWORD $a`, or a lone `|`.
    fn opt_formals(&mut self) -> Result<Vec<Formal>, Error> {
        let starts = match self.peek()? {
            Tok::Param(_) | Tok::Bar => true,
            Tok::Ident(_) => matches!(self.peek2()?, Tok::Param(_)),
            _ => false,
        };
        if !starts {
            return Ok(Vec::new());
        }
        let mut formals = Vec::new();
        if *self.peek()? == Tok::Bar {
            self.next()?;
            return Ok(formals);
        }
        loop {
            let (tok, at) = self.next()?;
            let formal = match tok {
                Tok::Param(name) => Formal { keyword: None, name },
                Tok::Ident(keyword) => match self.next()? {
                    (Tok::Param(name), _) => Formal {
                        keyword: Some(keyword),
                        name,
                    },
                    (other, at) => {
                        return Err(Error::new(
                            at,
                            format!("expected a parameter like '$a', found {}", other.describe()),
                        ))
                    }
                },
                other => {
                    return Err(Error::new(
                        at,
                        format!("expected a parameter like '$a', found {}", other.describe()),
                    ))
                }
            };
            if formals.iter().any(|f: &Formal| f.name == formal.name) {
                return Err(Error::new(
                    at,
                    format!("parameter '${}' is declared twice", formal.name),
                ));
            }
            let positional = formal.keyword.is_none();
            if positional && formals.iter().any(|f: &Formal| f.keyword.is_some()) {
                return Err(Error::new(
                    at,
                    "positional parameters must come before keyword parameters",
                ));
            }
            if formals
                .iter()
                .any(|f: &Formal| f.keyword.as_deref() == Some("__REST__"))
            {
                return Err(Error::new(at, "'__REST__' must be the last parameter"));
            }
            formals.push(formal);
            let (tok, at) = self.next()?;
            match tok {
                Tok::Comma => continue,
                Tok::Bar => return Ok(formals),
                other => {
                    return Err(Error::new(
                        at,
                        format!(
                            "expected ',' or '|' after a compound parameter, found {}",
                            other.describe()
                        ),
                    ))
                }
            }
        }
    }

    fn at_arrow(&mut self) -> Result<Option<Arrow>, Error> {
        Ok(match self.peek()? {
            Tok::Arrow => Some(Arrow::Single),
            Tok::FatArrow => Some(Arrow::Many),
            _ => None,
        })
    }

    /// `connection`.
    fn connection(&mut self) -> Result<Connection, Error> {
        let pos = self.peek_pos()?;
        let mut lists = Vec::new();
        let mut arrows = Vec::new();
        if self.at_arrow()?.is_some() {
            lists.push(vec![ElementUse {
                inputs: None,
                target: Target::Implicit,
                outputs: None,
                pos: pos.clone(),
            }]);
        } else {
            lists.push(self.elements()?);
        }
        while let Some(arrow) = self.at_arrow()? {
            let (_, at) = self.next()?;
            arrows.push(arrow);
            match self.peek()? {
                Tok::Semi | Tok::Eof | Tok::RBrace | Tok::BarBar | Tok::RParen => lists.push(vec![ElementUse {
                    inputs: None,
                    target: Target::Implicit,
                    outputs: None,
                    pos: at,
                }]),
                _ => lists.push(self.elements()?),
            }
        }
        Ok(Connection { lists, arrows, pos })
    }

    /// `elements`: `element ("," element)*`.
    fn elements(&mut self) -> Result<Vec<ElementUse>, Error> {
        let mut out = vec![self.element()?];
        while *self.peek()? == Tok::Comma {
            self.next()?;
            out.push(self.element()?);
        }
        Ok(out)
    }

    /// `element`: `opt-port element-reference opt-port`.
    fn element(&mut self) -> Result<ElementUse, Error> {
        let pos = self.peek_pos()?;
        let inputs = self.opt_ports()?;
        let target = match self.peek()?.clone() {
            Tok::Ident(name) => {
                if KEYWORDS.contains(&name.as_str()) {
                    return Err(Error::new(pos, format!("'{name}' is a keyword, not an element")));
                }
                self.next()?;
                match self.peek()? {
                    Tok::ColonColon => {
                        self.next()?;
                        let class = self.class()?;
                        let config = self.opt_config()?;
                        Target::Declare { name, class, config }
                    }
                    Tok::LParen => Target::Anonymous {
                        class: ClassRef::Name(name),
                        config: Some(self.config_after_paren()?),
                    },
                    _ => Target::Name(name),
                }
            }
            Tok::LBrace => {
                let class = ClassRef::Compound(self.compound()?);
                let config = self.opt_config()?;
                Target::Anonymous { class, config }
            }
            Tok::LParen => {
                let open = self.next()?.1;
                let body = self.stmts()?;
                let (tok, at) = self.next()?;
                if tok != Tok::RParen {
                    return Err(Error::new(
                        at,
                        format!(
                            "expected ')' to close the element group opened at {open}, found {}",
                            tok.describe()
                        ),
                    ));
                }
                Target::Group(Rc::new(body))
            }
            Tok::Arrow
            | Tok::FatArrow
            | Tok::Semi
            | Tok::Comma
            | Tok::Eof
            | Tok::RBrace
            | Tok::RParen
            | Tok::BarBar
                if inputs.is_some() =>
            {
                Target::Implicit
            }
            other => {
                let at = self.peek_pos()?;
                return Err(Error::new(
                    at,
                    format!("expected an element name, a class or '(', found {}", other.describe()),
                ));
            }
        };
        let outputs = self.opt_ports()?;
        Ok(ElementUse {
            inputs,
            target,
            outputs,
            pos,
        })
    }

    /// `class` after `::`: a name or a compound.
    fn class(&mut self) -> Result<ClassRef, Error> {
        match self.peek()?.clone() {
            Tok::Ident(name) if !KEYWORDS.contains(&name.as_str()) => {
                self.next()?;
                Ok(ClassRef::Name(name))
            }
            Tok::LBrace => Ok(ClassRef::Compound(self.compound()?)),
            other => {
                let at = self.peek_pos()?;
                Err(Error::new(
                    at,
                    format!("expected a class after '::', found {}", other.describe()),
                ))
            }
        }
    }

    fn opt_config(&mut self) -> Result<Option<String>, Error> {
        if *self.peek()? == Tok::LParen {
            Ok(Some(self.config_after_paren()?))
        } else {
            Ok(None)
        }
    }

    /// `opt-port`: `[0]`, `[0,1,2]`, `[0-2]`.
    fn opt_ports(&mut self) -> Result<Option<Vec<u32>>, Error> {
        if *self.peek()? != Tok::LBracket {
            return Ok(None);
        }
        let open = self.next()?.1;
        let mut ports = Vec::new();
        loop {
            let first = self.port_number()?;
            if *self.peek()? == Tok::Minus {
                self.next()?;
                let (last_at, last) = (self.peek_pos()?, self.port_number()?);
                if last < first {
                    return Err(Error::new(last_at, format!("port range {first}-{last} is backwards")));
                }
                ports.extend(first..=last);
            } else {
                ports.push(first);
            }
            let (tok, at) = self.next()?;
            match tok {
                Tok::Comma => continue,
                Tok::RBracket => return Ok(Some(ports)),
                other => {
                    return Err(Error::new(
                        at,
                        format!(
                            "expected ',' or ']' in the port list opened at {open}, found {}",
                            other.describe()
                        ),
                    ))
                }
            }
        }
    }

    fn port_number(&mut self) -> Result<u32, Error> {
        let (tok, at) = self.next()?;
        match tok {
            Tok::Ident(text) if text.bytes().all(|b| b.is_ascii_digit()) => text
                .parse()
                .map_err(|_| Error::new(at, format!("port number {text} is too large"))),
            other => Err(Error::new(
                at,
                format!("expected a port number, found {}", other.describe()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> String {
        parse("t.click", src).unwrap_err().to_string()
    }

    #[test]
    fn declarations_connections_and_ports() {
        let stmts = parse(
            "t",
            "a :: Queue(10); b, c :: Counter; a [1] -> [2] b -> Discard; x [0-2] => y, z, w",
        )
        .unwrap();
        assert_eq!(stmts.len(), 4);
        let Stmt::Connection(c) = &stmts[2] else { panic!() };
        assert_eq!(c.lists.len(), 3);
        assert_eq!(c.lists[0][0].outputs, Some(vec![1]));
        assert_eq!(c.lists[1][0].inputs, Some(vec![2]));
        let Stmt::Connection(c) = &stmts[3] else { panic!() };
        assert_eq!(c.arrows, vec![Arrow::Many]);
        assert_eq!(c.lists[0][0].outputs, Some(vec![0, 1, 2]));
        assert_eq!(c.lists[1].len(), 3);
    }

    #[test]
    fn compounds_with_formals_overloads_and_extension() {
        let stmts = parse(
            "t",
            "elementclass Q { input -> Queue -> output || $cap | input -> Queue($cap) -> output || COUNT $n, __REST__ $r | input -> output || ... }",
        )
        .unwrap();
        let Stmt::ElementClass {
            class: ClassRef::Compound(c),
            ..
        } = &stmts[0]
        else {
            panic!()
        };
        assert_eq!(c.overloads.len(), 3);
        assert!(c.extends);
        assert_eq!(
            c.overloads[1].formals,
            vec![Formal {
                keyword: None,
                name: "cap".into()
            }]
        );
        assert_eq!(c.overloads[2].formals[0].keyword.as_deref(), Some("COUNT"));
    }

    #[test]
    fn groups_and_implicit_input_output() {
        let stmts = parse("t", "x -> ( [0] -> [0]; [1] -> [1] ) => (->) -> y;").unwrap();
        let Stmt::Connection(c) = &stmts[0] else { panic!() };
        let Target::Group(g) = &c.lists[1][0].target else {
            panic!()
        };
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn every_syntax_error_names_its_place_and_what_was_expected() {
        let cases = [
            ("a :: ;", "t.click:1:6: expected a class after '::', found ';'"),
            ("a -> [x] b", "t.click:1:7: expected a port number, found 'x'"),
            (
                "a -> [1 b",
                "t.click:1:9: expected ',' or ']' in the port list opened at t.click:1:6, found 'b'",
            ),
            ("a [2-1] -> b", "t.click:1:6: port range 2-1 is backwards"),
            (
                "elementclass { }",
                "t.click:1:14: expected a class name after 'elementclass', found '{'",
            ),
            (
                "elementclass X ;",
                "t.click:1:16: expected '{' or a class name after 'elementclass X', found ';'",
            ),
            (
                "x :: { input -> output",
                "t.click:1:23: expected '}' to close the compound element opened at t.click:1:6, found end of file",
            ),
            (
                "x :: { $a, | }",
                "t.click:1:12: expected a parameter like '$a', found '|'",
            ),
            (
                "x :: { $a $b | }",
                "t.click:1:11: expected ',' or '|' after a compound parameter, found '$b'",
            ),
            ("x :: { $a, $a | }", "t.click:1:12: parameter '$a' is declared twice"),
            (
                "x :: { K $a, $b | }",
                "t.click:1:14: positional parameters must come before keyword parameters",
            ),
            (
                "x -> (a -> b",
                "t.click:1:13: expected ')' to close the element group opened at t.click:1:6, found end of file",
            ),
            ("x -> }", "t.click:1:6: expected a statement, found '}'"),
            ("define $a 1", "t.click:1:8: expected '(' after 'define', found '$a'"),
            ("a -> define", "t.click:1:6: 'define' is a keyword, not an element"),
            (
                "a -> ,",
                "t.click:1:6: expected an element name, a class or '(', found ','",
            ),
            (
                "a -> X(1",
                "t.click:1:7: unbalanced '(': the configuration string has no ')'",
            ),
            ("a/ -> b", "t.click:1:1: identifier 'a/' ends with '/'"),
            ("provide(x)", "t.click:1:1: 'provide' is not supported by oxnet"),
        ];
        for (src, want) in cases {
            assert_eq!(err(src), want, "{src}");
        }
    }
}
