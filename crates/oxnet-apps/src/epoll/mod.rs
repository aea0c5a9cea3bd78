//! TCPEpollServer and TCPEpollClient (ClickNF §4.1): the elements that
//! own connections and carry their bytes as stream packets.

use oxnet_graph::elements::Module;

pub const MODULE: Module = Module {
    classes: &[],
    create: |_class| None,
};
