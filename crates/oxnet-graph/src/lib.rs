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
pub mod signals;
pub mod timer;

pub use element::Element;
pub use router::{Ctx, Registry, Router};

/// Parses, flattens and builds a configuration with the standard library,
/// for one thread: devices are opened for this router alone, and queues
/// it does not use are closed once it is built.
pub fn build(file: &str, text: &str, vars: &[(String, String)]) -> Result<Router, String> {
    elements::device::reset_devices();
    let router = build_on_thread(file, text, vars, elements::device::ThreadPlace { index: 0, count: 1 });
    elements::device::reset_devices();
    router
}

/// Builds graph thread `place.index` of `place.count` (`oxnet run -j`):
/// each thread builds its own router from the same configuration; devices
/// are shared and each thread takes its own queues. The caller calls
/// [`elements::device::reset_devices`] before the first thread builds and
/// after the last has built.
pub fn build_on_thread(
    file: &str,
    text: &str,
    vars: &[(String, String)],
    place: elements::device::ThreadPlace,
) -> Result<Router, String> {
    elements::device::set_thread_place(place);
    let registry = elements::Standard;
    let flat = lang::compile(file, text, vars, &|c: &str| registry.is_class(c)).map_err(|e| e.to_string())?;
    Router::build(&flat, &registry).map_err(|e| e.to_string())
}
