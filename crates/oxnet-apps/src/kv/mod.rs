//! The key-value server speaking memcached's protocols (issue 12 item 6):
//! the store ([`store`]), the text, meta and binary protocols, and the
//! `MemcachedServer` element between TCPEpollServer's output and input.

pub mod info;
pub mod meta;
pub mod reply;
pub mod store;
pub mod text;

use oxnet_graph::elements::Module;

pub const MODULE: Module = Module {
    classes: &[],
    create: |_class| None,
};
