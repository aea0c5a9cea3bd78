//! oxnet's TCP/IP stack (DESIGN.md, layer 3; issue 11): the protocols as
//! graph elements, as ClickNF's cTCP (`../shared/papers/
//! clicknf-modular-stack-atc18.txt`, §3), so that every step can be read,
//! replaced or removed by rewiring a configuration.
//!
//! | module | what |
//! |---|---|
//! | [`anno`] | the stack's packet annotations: next hop, TCB, acked bytes, RTT sample, flags, socket |
//! | [`app`] | applications: the executor's element, the echo server |
//! | [`elements`] | the stack's element families in the graph's library ([`elements::register`]), and the per-router state they share ([`elements::shared`]) |
//! | [`ip`] | IPv4 and IPv6 input (checks, IPv4 reassembly, demultiplexing) and output (header, checksums, next hop), the ICMP echo responders |
//! | [`fuzzing`] | the bodies of the fuzz targets (cargo feature `fuzzing`): wire headers, TCP input against live connections, IP and neighbour input (docs/fuzzing.md) |
//! | [`exec`] | the per-core executor: applications as `async` tasks beside the elements, woken by socket events ([`exec::Event`]), run in batches each round, in the router's (possibly simulated) time; [`exec::block_on`] for blocking callers |
//! | [`neighbor`] | neighbour resolution: a neighbour cache with RFC 4861's states, ARP (ARPResolver) and Neighbor Discovery with duplicate address detection (NDResolver) |
//! | [`wire`] | a typed view per header (Ethernet, ARP, IPv4, IPv6, ICMP, ICMPv6 and Neighbor Discovery, UDP, TCP and its options): parse checks lengths and never panics, emit writes |
//! | [`plug`] | a router you plug bytes into (PlugSource, PlugSink, simulated time): for tests, the script runner and the C ABI |
//! | [`script`] | script tests of TCP in a subset of packetdrill's language: the syntax tree, the parser (errors say line, column and what was expected), the printer back to text, and the runner that plays a script against TCPStack in simulated time ([`script::run_script`]) |
//! | [`udp`] | UDP (RFC 768): input to sockets, output, sockets, an echo server |
//! | [`tcp`] | TCP's state and elements (docs/stack.md) |

pub mod anno;
pub mod app;
pub mod elements;
pub mod exec;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod ip;
pub mod neighbor;
pub mod plug;
pub mod script;
pub mod tcp;
pub mod udp;
pub mod wire;

/// The hash map of the stack's lookup tables (flows, listeners, UDP
/// sockets, epoll sources, reassembly): keyed by what peers send, so the
/// hash is keyed too (a per-process random seed: a peer cannot aim its
/// ports at one bucket without knowing it), and cheaper than std's
/// SipHash-1-3 on the small keys here (a flow key is 36 bytes; SipHash
/// cost about 1.5k instructions per short connection in the echo profile).
pub type FlowMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
