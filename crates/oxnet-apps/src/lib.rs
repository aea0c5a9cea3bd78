//! oxnet's application layer (DESIGN.md: `crates/oxnet-apps`; issue 12):
//! servers built, as in ClickNF §4 (Figures 6 and 11), from a few
//! elements wired on top of the TCP elements. TCPEpollServer and
//! TCPEpollClient own the connections and turn them into stream packets
//! ([`stream`]); the elements between them (TLS, the HTTP cache, the
//! SOCKS4 proxy, the key-value server) read and write only those, so a
//! function is added to a server by rewiring it, not by editing it.
//!
//! Each family of elements (a file or folder) has a `MODULE`, listed in
//! [`MODULES`]; [`register`] adds them, with the stack's, to the graph's
//! library (the `oxnet` binary does it at start-up).

pub mod epoll;
#[cfg(test)]
mod fuzz_replay;
pub mod http;
pub mod kv;
pub mod socks4;
pub mod stream;
pub mod testkit;
pub mod tls;

use oxnet_graph::elements::Module;

/// Every family of application elements; a new family adds one line.
pub const MODULES: &[Module] = &[epoll::MODULE, http::MODULE, kv::MODULE, socks4::MODULE, tls::MODULE];

/// Adds the stack's elements and these to the graph's library
/// (idempotent).
pub fn register() {
    oxnet_stack::elements::register();
    oxnet_graph::elements::add_modules(MODULES);
}
