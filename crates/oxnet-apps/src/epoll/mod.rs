//! TCPEpollServer and TCPEpollClient (ClickNF §4.1): the elements that
//! own connections and carry their bytes as stream packets
//! ([`crate::stream`]). Both keep their connections in a [`conns::Conns`]
//! table driven by one edge-triggered epoll instance of the stack's
//! (`oxnet_stack::tcp::epoll`), read in the element's task and written
//! when packets are pushed in.

pub mod client;
pub mod conns;
mod handlers;
pub mod server;

use oxnet_graph::elements::Module;

pub const MODULE: Module = Module {
    classes: &["TCPEpollClient", "TCPEpollServer"],
    create: |class| {
        Some(match class {
            "TCPEpollClient" => Box::new(client::EpollClient::default()),
            "TCPEpollServer" => Box::new(server::EpollServer::default()),
            _ => return None,
        })
    },
};
