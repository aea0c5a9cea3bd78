//! Neighbour resolution: IP next hops to Ethernet addresses, for IPv4
//! with ARP (RFC 826) and for IPv6 with Neighbor Discovery (RFC 4861 §7),
//! over one neighbour cache with RFC 4861's reachability states.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | ARPResolver(IP, MAC, ...) | 2/1 | push | IPv4 packets (input 0, next hop annotated) into Ethernet frames; ARP requests, replies, announcements; ARP frames in on input 1 |
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`cache`] | 4861 §7.3, Appendix C | the neighbour cache: states, timers, bounded entries and queues |
//! | [`arp`] | 826, 5227 §2.3 | ARPResolver |
//!
//! Both elements keep their own cache (one per element: one per
//! interface, as RFC 4861 keeps one per interface), run its timers on the
//! router's timer wheel (one timer per element, set for the earliest
//! deadline) and read time from the router's clock, so that every test
//! runs in simulated time.

pub mod arp;
pub mod cache;
mod support;

#[cfg(test)]
mod arp_tests;
#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod testkit;

/// The family's elements, for the stack's library
/// ([`crate::elements::MODULES`]).
pub const MODULE: oxnet_graph::elements::Module = oxnet_graph::elements::Module {
    classes: &["ARPResolver"],
    create,
};

fn create(class: &str) -> Option<Box<dyn oxnet_graph::Element>> {
    Some(match class {
        "ARPResolver" => Box::<arp::ARPResolver>::default(),
        _ => return None,
    })
}
