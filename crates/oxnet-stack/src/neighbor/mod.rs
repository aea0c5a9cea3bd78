//! Neighbour resolution: IP next hops to Ethernet addresses, for IPv4
//! with ARP (RFC 826) and for IPv6 with Neighbor Discovery (RFC 4861 §7),
//! over one neighbour cache with RFC 4861's reachability states.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | ARPResolver(IP, MAC, ...) | 2/1 | push | IPv4 packets (input 0, next hop annotated) into Ethernet frames; ARP requests, replies, announcements; ARP frames in on input 1 |
//! | NDResolver(IP6 [IP6...], MAC, ...) | 2/1 | push | IPv6 packets (input 0, next hop annotated) into Ethernet frames; Neighbor Solicitations and Advertisements, duplicate address detection; ND frames in on input 1 |
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`cache`] | 4861 §7.3, Appendix C | the neighbour cache: states, timers, bounded entries and queues |
//! | [`arp`] | 826, 5227 §2.3 | ARPResolver |
//! | [`ndisc`] | 4861 §7, 4862 §5.4 | NDResolver |
//! | [`addresses`] | 4862 §5.4 | our IPv6 addresses: tentative, preferred, duplicate |
//!
//! Both elements keep their own cache (one per element: one per
//! interface, as RFC 4861 keeps one per interface), run its timers on the
//! router's timer wheel (one timer per element, set for the earliest
//! deadline) and read time from the router's clock, so that every test
//! runs in simulated time.

pub mod addresses;
pub mod arp;
pub mod cache;
pub mod ndisc;
mod support;

#[cfg(test)]
mod arp_tests;
#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod ndisc_tests;
#[cfg(test)]
mod testkit;

/// The family's elements, for the stack's library
/// ([`crate::elements::MODULES`]).
pub const MODULE: oxnet_graph::elements::Module = oxnet_graph::elements::Module {
    classes: &["ARPResolver", "NDResolver"],
    create,
};

fn create(class: &str) -> Option<Box<dyn oxnet_graph::Element>> {
    Some(match class {
        "ARPResolver" => Box::<arp::ARPResolver>::default(),
        "NDResolver" => Box::<ndisc::NDResolver>::default(),
        _ => return None,
    })
}
