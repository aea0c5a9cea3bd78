//! The second layer of oxnet: network functions built by wiring elements
//! together in Click's configuration language (DESIGN.md, "The graph and
//! the stack"; Click's click(5) manual page is the language's
//! specification).
//!
//! - [`lang`]: lexer, parser, and the flattening of compound elements,
//!   groups, many-to-many connections and parameters into a flat graph,
//!   with errors that name file, line and column;
//! - [`element`]: the element trait (ports, push/pull/agnostic, batches,
//!   tasks, handlers);
//! - [`router`]: a graph instance built from a flat graph and checked
//!   before it runs (ports, push/pull, fan-out), connections resolved to
//!   indices, run to completion;
//! - [`elements`]: the element library;
//! - [`args`]: Click's argument conventions.

pub mod args;
pub mod element;
pub mod elements;
pub mod lang;
pub mod router;
pub mod timer;

pub use element::Element;
pub use router::{Ctx, Registry, Router};

/// Parses, flattens and builds a configuration with the standard library.
pub fn build(file: &str, text: &str, vars: &[(String, String)]) -> Result<Router, String> {
    let registry = elements::Standard;
    let flat = lang::compile(file, text, vars, &|c: &str| registry.is_class(c)).map_err(|e| e.to_string())?;
    Router::build(&flat, &registry).map_err(|e| e.to_string())
}
