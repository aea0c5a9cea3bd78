//! Click's configuration language (click(5)): [`lexer`] → [`parser`] (a
//! syntax tree, [`ast`]) → [`flatten`] (compound elements, groups,
//! parameters and many-to-many connections expanded into a [`Flat`]
//! graph of primitive elements and port-to-port connections).

pub mod ast;
pub mod flatten;
pub mod lexer;
pub mod parser;
pub mod vars;

pub use flatten::{flatten, Flat, FlatElement, PrimitiveClasses};

use std::fmt;
use std::rc::Rc;

/// A place in a configuration: file, line and column (both from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pos {
    pub file: Rc<str>,
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// A language error: where, and what was expected or is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub pos: Pos,
    pub message: String,
}

impl Error {
    pub fn new(pos: Pos, message: impl Into<String>) -> Error {
        Error {
            pos,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for Error {}

/// Compound element classes other crates add to the language (the
/// stack's `TCPStack`): their `elementclass` statements are in scope in
/// every configuration, as if written before its first line; a
/// configuration's own class of the same name hides them.
static PRELUDES: std::sync::RwLock<Vec<(&'static str, &'static str)>> = std::sync::RwLock::new(Vec::new());

/// Adds `text` (only `elementclass` statements count) to the prelude of
/// every configuration compiled after; `name` names it in errors.
/// Adding the same text twice adds it once.
pub fn add_prelude(name: &'static str, text: &'static str) {
    let mut preludes = PRELUDES.write().unwrap_or_else(|e| e.into_inner());
    if !preludes.iter().any(|(_, t)| std::ptr::eq(*t, text)) {
        preludes.push((name, text));
    }
}

/// Parses and flattens a whole configuration: `file` names it in errors,
/// `vars` are command-line definitions (`NAME=value`, overriding the
/// file's top-level `define`s, click(5) "PARAMETER DEFINITIONS").
pub fn compile(
    file: &str,
    text: &str,
    vars: &[(String, String)],
    classes: &dyn PrimitiveClasses,
) -> Result<Flat, Error> {
    let mut program = Vec::new();
    let preludes = PRELUDES.read().unwrap_or_else(|e| e.into_inner()).clone();
    for (name, prelude) in preludes {
        let stmts = parser::parse(name, prelude)?;
        program.extend(
            stmts
                .into_iter()
                .filter(|s| matches!(s, ast::Stmt::ElementClass { .. })),
        );
    }
    program.extend(parser::parse(file, text)?);
    flatten(&program, vars, classes)
}
