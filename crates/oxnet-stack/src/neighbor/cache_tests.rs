//! The cache's transitions, one test per row (or group of rows) of RFC
//! 4861 Appendix C, in simulated time (microseconds), with `u32`s as the
//! waiting packets.

use super::cache::*;
use crate::wire::EthernetAddress;
use std::net::Ipv6Addr;

type Cache = NeighborCache<Ipv6Addr, u32>;

const S: u64 = 1_000_000;

fn mac(n: u8) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0, 0, n])
}

fn addr(n: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n)
}

fn cache() -> Cache {
    NeighborCache::new(Settings::default())
}

fn polled(c: &mut Cache, now: u64) -> Vec<Solicit<Ipv6Addr>> {
    let mut out = Vec::new();
    c.poll(now, &mut out);
    out
}

fn multicast(n: u16) -> Solicit<Ipv6Addr> {
    Solicit {
        addr: addr(n),
        unicast: None,
    }
}

fn unicast(n: u16, m: u8) -> Solicit<Ipv6Addr> {
    Solicit {
        addr: addr(n),
        unicast: Some(mac(m)),
    }
}

/// An entry for addr(1) in `state` with mac(1), made at time 0 through
/// the transitions the RFC has (the cache starts empty).
fn with_entry(state: State) -> Cache {
    let mut c = cache();
    match state {
        State::Incomplete => {
            assert!(matches!(c.send(addr(1), 0, 0), Outcome::Queued { solicit: true }));
        }
        State::Stale => {
            c.learned(addr(1), mac(1), true, 0);
        }
        State::Reachable => {
            c.learned(addr(1), mac(1), true, 0);
            c.confirm(addr(1), 0);
        }
        State::Delay => {
            c.learned(addr(1), mac(1), true, 0);
            assert!(matches!(c.send(addr(1), 0, 0), Outcome::Send(m, 0) if m == mac(1)));
        }
        State::Probe => {
            c.learned(addr(1), mac(1), true, 0);
            c.send(addr(1), 0, 0);
            assert_eq!(polled(&mut c, DELAY_FIRST_PROBE_TIME_US), [unicast(1, 1)]);
        }
        State::Permanent => {
            c.insert_permanent(addr(1), mac(1), 0).unwrap();
        }
    }
    assert_eq!(c.state(&addr(1)), Some(state));
    c
}

#[test]
fn the_defaults_are_rfc_4861_section_10s_constants() {
    let s = Settings::default();
    assert_eq!(
        (s.max_multicast_solicit, s.max_unicast_solicit),
        (3, 3),
        "MAX_MULTICAST_SOLICIT, MAX_UNICAST_SOLICIT"
    );
    assert_eq!(s.base_reachable_time_us, 30 * S);
    assert_eq!(s.retrans_timer_us, S);
    assert_eq!(s.delay_first_probe_time_us, 5 * S);
    assert_eq!((s.max_entries, s.queue_len), (1024, 3));
    assert!(s.check().is_ok());
    assert!(Settings { max_entries: 0, ..s }.check().is_err());
    assert!(Settings {
        retrans_timer_us: 0,
        ..s
    }
    .check()
    .is_err());
}

#[test]
fn a_packet_to_an_unknown_neighbour_makes_an_incomplete_entry_and_waits() {
    let mut c = cache();
    assert!(matches!(c.send(addr(1), 7, 100), Outcome::Queued { solicit: true }));
    assert_eq!(c.state(&addr(1)), Some(State::Incomplete));
    assert_eq!(c.lladdr(&addr(1)), None);
    assert_eq!(c.next_deadline(), Some(100 + S));
    // More packets wait without another solicitation.
    assert!(matches!(c.send(addr(1), 8, 200), Outcome::Queued { solicit: false }));
    assert_eq!(c.waiting(), 2);
}

#[test]
fn incomplete_retransmits_every_retrans_timer_then_gives_up_and_drops_the_queue() {
    let mut c = with_entry(State::Incomplete);
    c.send(addr(1), 1, 0);
    assert_eq!(polled(&mut c, S - 1), []);
    assert_eq!(polled(&mut c, S), [multicast(1)]);
    assert_eq!(c.next_deadline(), Some(2 * S));
    assert_eq!(polled(&mut c, 2 * S), [multicast(1)]);
    assert_eq!(c.state(&addr(1)), Some(State::Incomplete));
    // Three sent (at 0, 1 s, 2 s): one RetransTimer later, resolution failed.
    assert_eq!(polled(&mut c, 3 * S - 1), []);
    assert_eq!(polled(&mut c, 3 * S), []);
    assert_eq!(c.state(&addr(1)), None);
    assert_eq!(c.stats().resolution_failures, 1);
    assert_eq!(c.stats().unresolved_drops, 2);
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn the_queue_keeps_the_latest_packets_and_counts_the_oldest_dropped() {
    let mut c = cache();
    for p in 1..=5 {
        c.send(addr(1), p, 0);
    }
    assert_eq!(c.waiting(), 3);
    assert_eq!(c.stats().queue_drops, 2);
    let released = c.advertised(addr(1), Some(mac(9)), true, false, 10).unwrap();
    assert_eq!(released.lladdr, mac(9));
    assert_eq!(Vec::from(released.packets), [3, 4, 5]);
    assert_eq!(c.waiting(), 0);
}

#[test]
fn a_queue_of_zero_drops_every_waiting_packet_but_still_resolves() {
    let mut c = NeighborCache::<Ipv6Addr, u32>::new(Settings {
        queue_len: 0,
        ..Settings::default()
    });
    assert!(matches!(c.send(addr(1), 1, 0), Outcome::Queued { solicit: true }));
    assert_eq!((c.waiting(), c.stats().queue_drops), (0, 1));
    // INCOMPLETE, NA with Solicited=0: record the address, STALE.
    assert!(c.advertised(addr(1), Some(mac(1)), false, false, 5).is_none());
    assert_eq!(c.state(&addr(1)), Some(State::Stale));
    assert_eq!(c.lladdr(&addr(1)), Some(mac(1)));
}

#[test]
fn incomplete_and_a_solicited_advertisement_is_reachable_and_sends_the_queue() {
    let mut c = with_entry(State::Incomplete);
    c.send(addr(1), 1, 0);
    let released = c.advertised(addr(1), Some(mac(2)), true, false, 500).unwrap();
    assert_eq!((released.lladdr, Vec::from(released.packets)), (mac(2), vec![0, 1]));
    assert_eq!(c.state(&addr(1)), Some(State::Reachable));
    // The retransmission's deadline was noted first: the timer runs in
    // vain once, then waits for ReachableTime.
    assert_eq!(c.next_deadline(), Some(S));
    assert_eq!(polled(&mut c, S), []);
    assert_eq!(c.next_deadline(), Some(500 + c.reachable_time_us()));
}

#[test]
fn incomplete_and_an_unsolicited_advertisement_is_stale_and_its_queue_sent_moves_it_to_delay() {
    let mut c = with_entry(State::Incomplete);
    let released = c.advertised(addr(1), Some(mac(2)), false, true, 500).unwrap();
    assert_eq!(Vec::from(released.packets), [0]);
    // STALE, and the packets now sent make it DELAY (§7.3.3).
    assert_eq!(c.state(&addr(1)), Some(State::Delay));
    assert_eq!(polled(&mut c, S), []);
    assert_eq!(c.next_deadline(), Some(500 + DELAY_FIRST_PROBE_TIME_US));
}

#[test]
fn an_advertisement_without_a_link_layer_address_leaves_incomplete_alone() {
    let mut c = with_entry(State::Incomplete);
    assert!(c.advertised(addr(1), None, true, true, 10).is_none());
    assert_eq!(c.state(&addr(1)), Some(State::Incomplete));
    assert_eq!(c.waiting(), 1);
}

#[test]
fn an_advertisement_makes_no_entry() {
    let mut c = cache();
    assert!(c.advertised(addr(1), Some(mac(1)), true, true, 0).is_none());
    assert!(c.is_empty());
}

#[test]
fn solicited_without_override_and_the_same_address_is_reachable_from_every_known_state() {
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.advertised(addr(1), Some(mac(1)), true, false, 10 * S);
        assert_eq!(c.state(&addr(1)), Some(State::Reachable), "from {state}");
        // No option: the same as the cached address (§7.2.5).
        let mut c = with_entry(state);
        c.advertised(addr(1), None, true, false, 10 * S);
        assert_eq!(c.state(&addr(1)), Some(State::Reachable), "from {state}, no option");
    }
}

#[test]
fn solicited_without_override_and_another_address_makes_reachable_stale_and_changes_nothing_else() {
    let mut c = with_entry(State::Reachable);
    c.advertised(addr(1), Some(mac(2)), true, false, 10);
    assert_eq!(c.state(&addr(1)), Some(State::Stale));
    assert_eq!(c.lladdr(&addr(1)), Some(mac(1)));
    for state in [State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.advertised(addr(1), Some(mac(2)), true, false, 10);
        assert_eq!(c.state(&addr(1)), Some(state), "{state} unchanged");
        assert_eq!(c.lladdr(&addr(1)), Some(mac(1)));
    }
}

#[test]
fn solicited_with_override_records_the_address_and_is_reachable() {
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.advertised(addr(1), Some(mac(2)), true, true, 10 * S);
        assert_eq!(c.state(&addr(1)), Some(State::Reachable), "from {state}");
        assert_eq!(c.lladdr(&addr(1)), Some(mac(2)));
    }
}

#[test]
fn unsolicited_without_override_changes_nothing_but_reachable_hearing_another_address() {
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        for m in [mac(1), mac(2)] {
            let mut c = with_entry(state);
            c.advertised(addr(1), Some(m), false, false, 10);
            // §7.2.5 (a) holds whatever the Solicited flag (Appendix C's
            // row "S=0, O=0: unchanged" leaves it out; the text rules, and
            // Linux's weak override does the same).
            let expected = if state == State::Reachable && m != mac(1) {
                State::Stale
            } else {
                state
            };
            assert_eq!(c.state(&addr(1)), Some(expected), "{state} with {m}");
            assert_eq!(c.lladdr(&addr(1)), Some(mac(1)));
        }
    }
}

#[test]
fn unsolicited_with_override_changes_only_a_different_address_and_makes_it_stale() {
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.advertised(addr(1), Some(mac(1)), false, true, 10);
        assert_eq!(c.state(&addr(1)), Some(state), "same address: {state} unchanged");
        c.advertised(addr(1), Some(mac(2)), false, true, 10);
        assert_eq!(c.state(&addr(1)), Some(State::Stale), "from {state}");
        assert_eq!(c.lladdr(&addr(1)), Some(mac(2)));
    }
}

#[test]
fn an_upper_layer_confirmation_makes_any_known_entry_reachable() {
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.confirm(addr(1), 7 * S);
        assert_eq!(c.state(&addr(1)), Some(State::Reachable), "from {state}");
    }
    let mut c = with_entry(State::Incomplete);
    c.confirm(addr(1), 10);
    assert_eq!(c.state(&addr(1)), Some(State::Incomplete));
}

#[test]
fn reachable_goes_stale_exactly_reachable_time_after_the_confirmation() {
    let mut c = with_entry(State::Reachable);
    let t = c.reachable_time_us();
    assert_eq!(c.next_deadline(), Some(t));
    assert_eq!(polled(&mut c, t - 1), []);
    assert_eq!(c.state(&addr(1)), Some(State::Reachable));
    assert_eq!(polled(&mut c, t), []);
    assert_eq!(c.state(&addr(1)), Some(State::Stale));
    assert_eq!(c.next_deadline(), None, "STALE has no timer");
}

#[test]
fn a_packet_sent_past_reachable_time_before_the_timer_ran_finds_the_entry_stale() {
    let mut c = with_entry(State::Reachable);
    let t = c.reachable_time_us();
    assert!(matches!(c.send(addr(1), 5, t), Outcome::Send(m, 5) if m == mac(1)));
    assert_eq!(c.state(&addr(1)), Some(State::Delay));
}

#[test]
fn reachable_sends_without_changing_state() {
    let mut c = with_entry(State::Reachable);
    assert!(matches!(c.send(addr(1), 5, 10), Outcome::Send(m, 5) if m == mac(1)));
    assert_eq!(c.state(&addr(1)), Some(State::Reachable));
}

#[test]
fn stale_sends_and_delays_then_probes_three_times_then_deletes() {
    let mut c = with_entry(State::Stale);
    assert!(matches!(c.send(addr(1), 5, 10 * S), Outcome::Send(m, 5) if m == mac(1)));
    assert_eq!(c.state(&addr(1)), Some(State::Delay));
    // DELAY and PROBE still send to the cached address.
    assert!(matches!(c.send(addr(1), 6, 11 * S), Outcome::Send(m, 6) if m == mac(1)));
    assert_eq!(polled(&mut c, 15 * S - 1), []);
    assert_eq!(polled(&mut c, 15 * S), [unicast(1, 1)]);
    assert_eq!(c.state(&addr(1)), Some(State::Probe));
    assert!(matches!(c.send(addr(1), 7, 15 * S + 1), Outcome::Send(m, 7) if m == mac(1)));
    assert_eq!(polled(&mut c, 16 * S), [unicast(1, 1)]);
    assert_eq!(polled(&mut c, 17 * S), [unicast(1, 1)]);
    assert_eq!(c.state(&addr(1)), Some(State::Probe));
    assert_eq!(polled(&mut c, 18 * S - 1), []);
    assert_eq!(polled(&mut c, 18 * S), []);
    assert_eq!(c.state(&addr(1)), None);
    assert_eq!(c.stats().probe_failures, 1);
}

#[test]
fn a_confirmation_in_delay_cancels_the_probe() {
    let mut c = with_entry(State::Delay);
    c.advertised(addr(1), Some(mac(1)), true, false, S);
    let t = c.reachable_time_us();
    assert_eq!(polled(&mut c, DELAY_FIRST_PROBE_TIME_US), []);
    assert_eq!(c.state(&addr(1)), Some(State::Reachable));
    assert_eq!(polled(&mut c, S + t), []);
    assert_eq!(c.state(&addr(1)), Some(State::Stale));
}

#[test]
fn a_solicitation_makes_a_stale_entry_and_updates_a_known_one_only_if_the_address_differs() {
    let mut c = cache();
    assert!(c.learned(addr(1), mac(1), false, 0).is_none());
    assert!(c.is_empty(), "the ARP merge alone makes no entry");
    c.learned(addr(1), mac(1), true, 0);
    assert_eq!(c.state(&addr(1)), Some(State::Stale));
    assert_eq!(c.next_deadline(), None);
    for state in [State::Reachable, State::Stale, State::Delay, State::Probe] {
        let mut c = with_entry(state);
        c.learned(addr(1), mac(1), true, 10);
        assert_eq!(c.state(&addr(1)), Some(state), "same address: {state} unchanged");
        c.learned(addr(1), mac(2), false, 10);
        assert_eq!(c.state(&addr(1)), Some(State::Stale), "from {state}");
        assert_eq!(c.lladdr(&addr(1)), Some(mac(2)));
    }
}

#[test]
fn a_solicitation_from_an_incomplete_neighbour_resolves_it() {
    let mut c = with_entry(State::Incomplete);
    let released = c.learned(addr(1), mac(3), false, 20).unwrap();
    assert_eq!((released.lladdr, Vec::from(released.packets)), (mac(3), vec![0]));
    assert_eq!(
        c.state(&addr(1)),
        Some(State::Delay),
        "STALE, then DELAY as its queue is sent"
    );
}

#[test]
fn permanent_entries_ignore_what_arrives_and_have_no_timer() {
    let mut c = with_entry(State::Permanent);
    c.advertised(addr(1), Some(mac(2)), true, true, 10);
    c.learned(addr(1), mac(3), true, 10);
    c.confirm(addr(1), 10);
    assert!(matches!(c.send(addr(1), 1, 10), Outcome::Send(m, 1) if m == mac(1)));
    assert_eq!(c.state(&addr(1)), Some(State::Permanent));
    assert_eq!(c.next_deadline(), None);
    assert_eq!(polled(&mut c, 1000 * S), []);
    assert_eq!(c.state(&addr(1)), Some(State::Permanent));
}

#[test]
fn a_permanent_entry_written_over_an_incomplete_one_releases_its_queue() {
    let mut c = with_entry(State::Incomplete);
    let released = c.insert_permanent(addr(1), mac(4), 5).unwrap().unwrap();
    assert_eq!((released.lladdr, Vec::from(released.packets)), (mac(4), vec![0]));
    assert_eq!(polled(&mut c, 10 * S), [], "no more solicitations");
    assert_eq!(c.state(&addr(1)), Some(State::Permanent));
}

#[test]
fn removing_an_entry_drops_and_counts_its_packets() {
    let mut c = with_entry(State::Incomplete);
    assert!(c.remove(&addr(1)));
    assert!(!c.remove(&addr(1)));
    assert_eq!(c.stats().unresolved_drops, 1);
}

#[test]
fn a_full_cache_evicts_the_oldest_stale_entry_else_refuses() {
    let mut c = NeighborCache::<Ipv6Addr, u32>::new(Settings {
        max_entries: 3,
        ..Settings::default()
    });
    c.learned(addr(1), mac(1), true, 10);
    c.learned(addr(2), mac(2), true, 5);
    c.send(addr(3), 0, 0);
    // Full: addr(2) is the STALE entry updated longest ago.
    assert!(matches!(c.send(addr(4), 1, 20), Outcome::Queued { solicit: true }));
    assert_eq!(c.state(&addr(2)), None);
    assert_eq!(c.stats().evictions, 1);
    c.learned(addr(5), mac(5), true, 30);
    assert_eq!(c.state(&addr(1)), None);
    assert_eq!(c.stats().evictions, 2);
    // No STALE entry left once addr(5) is confirmed: refused, counted.
    c.confirm(addr(5), 30);
    assert!(matches!(c.send(addr(6), 2, 40), Outcome::Refused(2)));
    assert_eq!(c.stats().full_drops, 1);
    assert!(c.learned(addr(7), mac(7), true, 40).is_none());
    assert_eq!(c.stats().full_ignored, 1);
    assert!(matches!(c.insert_permanent(addr(8), mac(8), 40), Err(CacheFull)));
    assert_eq!(c.len(), 3);
}

#[test]
fn reachable_time_is_drawn_between_half_and_one_and_a_half_base_and_again_after_two_hours() {
    let mut seen = std::collections::HashSet::new();
    for seed in 0..200 {
        let c = NeighborCache::<Ipv6Addr, u32>::new(Settings {
            seed,
            ..Settings::default()
        });
        let t = c.reachable_time_us();
        assert!((15 * S..=45 * S).contains(&t), "{t}");
        seen.insert(t / S);
    }
    assert!(seen.len() > 20, "spread over the range: {seen:?}");
    // The same seed draws the same value; two hours later, a new one.
    let mut a = with_entry(State::Stale);
    let first = a.reachable_time_us();
    assert_eq!(cache().reachable_time_us(), first);
    a.confirm(addr(1), REACHABLE_TIME_REDRAW_US - 1);
    assert_eq!(a.reachable_time_us(), first);
    a.confirm(addr(1), REACHABLE_TIME_REDRAW_US);
    assert_ne!(a.reachable_time_us(), first);
}

/// One operation on the cache, on one of a few addresses.
#[derive(Debug, Clone)]
enum Op {
    Send(u16),
    Advertised(u16, Option<u8>, bool, bool),
    Learned(u16, u8, bool),
    Confirm(u16),
    Permanent(u16, u8),
    Remove(u16),
    Wait(u64),
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let a = 1u16..20;
    prop_oneof![
        a.clone().prop_map(Op::Send),
        (a.clone(), proptest::option::of(0u8..4), any::<bool>(), any::<bool>())
            .prop_map(|(n, m, s, o)| Op::Advertised(n, m, s, o)),
        (a.clone(), 0u8..4, any::<bool>()).prop_map(|(n, m, c)| Op::Learned(n, m, c)),
        a.clone().prop_map(Op::Confirm),
        (a.clone(), 0u8..4).prop_map(|(n, m)| Op::Permanent(n, m)),
        a.prop_map(Op::Remove),
        (0u64..10_000_000).prop_map(Op::Wait),
    ]
}

proptest::proptest! {
    #[test]
    fn whatever_happens_the_cache_keeps_its_bounds_and_its_invariants(
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        let mut c = NeighborCache::<Ipv6Addr, u32>::new(Settings {
            max_entries: 5,
            queue_len: 2,
            ..Settings::default()
        });
        let mut now = 0;
        let mut solicits = Vec::new();
        for op in ops {
            match op {
                Op::Send(n) => {
                    c.send(addr(n), 0, now);
                }
                Op::Advertised(n, m, s, o) => {
                    c.advertised(addr(n), m.map(mac), s, o, now);
                }
                Op::Learned(n, m, create) => {
                    c.learned(addr(n), mac(m), create, now);
                }
                Op::Confirm(n) => c.confirm(addr(n), now),
                Op::Permanent(n, m) => {
                    let _ = c.insert_permanent(addr(n), mac(m), now);
                }
                Op::Remove(n) => {
                    c.remove(&addr(n));
                }
                Op::Wait(us) => {
                    now += us;
                    c.poll(now, &mut solicits);
                }
            }
            proptest::prop_assert!(c.len() <= 5);
            let incomplete = c.iter().filter(|(_, s, _)| *s == State::Incomplete).count();
            proptest::prop_assert!(c.waiting() <= 2 * incomplete);
            for (a, state, lladdr) in c.iter() {
                proptest::prop_assert_eq!(lladdr.is_none(), state == State::Incomplete, "{} {}", a, state);
            }
            // No timer is ever missed: a deadline in the past has been run.
            if let Some(t) = c.next_deadline() {
                proptest::prop_assert!(t >= now, "deadline {} before now {}", t, now);
            }
        }
    }
}
