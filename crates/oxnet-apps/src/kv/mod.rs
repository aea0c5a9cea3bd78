//! The key-value server speaking memcached's protocols (issue 12 item 6):
//! the store ([`store`]: items, LRU, memory limit, expiry, CAS; values in
//! shared packet buffers), the text ([`text`]), meta ([`meta`]) and
//! binary ([`binary`]) protocols, the connections ([`conns`]) and the
//! `MemcachedServer` element ([`element`]) that sits between a
//! TCPEpollServer's output and its input.

pub mod binary;
pub mod conns;
pub mod element;
pub mod fuzzing;
pub mod info;
pub mod meta;
pub mod reply;
pub mod slabs;
pub mod store;
pub mod text;
pub mod udp;

use oxnet_graph::elements::Module;

pub const MODULE: Module = Module {
    classes: &["MemcachedServer"],
    create: |class| (class == "MemcachedServer").then(|| Box::new(element::MemcachedServer::default()) as Box<_>),
};
