//! What a script parse error says: where (file, line, column) and what was
//! expected there.

use std::fmt;

/// A script the parser refuses.
///
/// Displays as `file:line:col: expected X, found Y`, the place being the
/// token that did not fit (or the end of the line before it, when the
/// event had to go on but the line ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// The file's name as given to [`parse`](super::parse).
    pub file: String,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1, in characters.
    pub column: u32,
    /// What is wrong.
    pub message: ErrorMessage,
}

/// What is wrong at the error's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorMessage {
    /// The grammar wanted something else here.
    Expected {
        /// What would have fitted, e.g. "`)`" or "a window from 0 to 65535".
        expected: String,
        /// What the text has, e.g. "`+0`" or "end of line".
        found: String,
    },
    /// Valid packetdrill that this subset does not parse (the module's
    /// documentation lists what is supported).
    Unsupported {
        /// What was met, e.g. "ECN markers such as `[ect0]`".
        what: String,
    },
}

impl fmt::Display for ErrorMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorMessage::Expected { expected, found } => write!(f, "expected {expected}, found {found}"),
            ErrorMessage::Unsupported { what } => write!(f, "unsupported: {what} (not in oxnet's script subset)"),
        }
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

impl std::error::Error for ScriptError {}
