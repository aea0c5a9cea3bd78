//! oxnet's TCP/IP stack (DESIGN.md, layer 3; issue 11): the protocols as
//! graph elements, as ClickNF's cTCP (`../shared/papers/
//! clicknf-modular-stack-atc18.txt`, §3), so that every step can be read,
//! replaced or removed by rewiring a configuration.
//!
//! | module | what |
//! |---|---|
//! | [`wire`] | a typed view per header (Ethernet, ARP, IPv4, IPv6, ICMP, ICMPv6 and Neighbor Discovery, UDP, TCP and its options): parse checks lengths and never panics, emit writes |
//! | [`script`] | script tests of TCP in a subset of packetdrill's language: the syntax tree, the parser (errors say line, column and what was expected) and the printer back to text |
pub mod script;
pub mod wire;
