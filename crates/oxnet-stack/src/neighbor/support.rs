//! What both resolvers share: the cache's settings as keyword arguments,
//! the element's one timer, the `table` text, new frames, and the
//! link-layer addresses of IP multicast groups.

use super::cache::{NeighborCache, Settings};
use crate::wire::EthernetAddress;
use oxnet_driver::Packet;
use oxnet_graph::args::{self, Args};
use oxnet_graph::router::Ctx;
use oxnet_graph::timer::TimerId;
use std::fmt::Display;
use std::net::{Ipv4Addr, Ipv6Addr};

fn micros(text: &str) -> Result<u64, String> {
    let s = args::seconds(text)?;
    if s < 0.0 {
        return Err(format!("'{}' must not be negative", text.trim()));
    }
    Ok((s * 1e6).round() as u64)
}

fn keyword<T>(a: &mut Args, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, String> {
    args::opt(a.keyword(key), parse, key)
}

/// Reads the cache's keyword arguments: ENTRIES, QUEUE, MCAST_SOLICIT,
/// UCAST_SOLICIT, REACHABLE_TIME, RETRANS_TIMER, DELAY_FIRST_PROBE (times
/// in seconds, with units: `500ms`) and SEED (default `seed`).
pub(crate) fn read_settings(a: &mut Args, seed: u64) -> Result<Settings, String> {
    let mut s = Settings {
        seed,
        ..Settings::default()
    };
    let count = |t: &str| args::unsigned(t).map(|n| n.min(u32::MAX as u64) as u32);
    let size = |t: &str| args::unsigned(t).map(|n| n.min(usize::MAX as u64) as usize);
    if let Some(v) = keyword(a, "ENTRIES", size)? {
        s.max_entries = v;
    }
    if let Some(v) = keyword(a, "QUEUE", size)? {
        s.queue_len = v;
    }
    if let Some(v) = keyword(a, "MCAST_SOLICIT", count)? {
        s.max_multicast_solicit = v;
    }
    if let Some(v) = keyword(a, "UCAST_SOLICIT", count)? {
        s.max_unicast_solicit = v;
    }
    if let Some(v) = keyword(a, "REACHABLE_TIME", micros)? {
        s.base_reachable_time_us = v;
    }
    if let Some(v) = keyword(a, "RETRANS_TIMER", micros)? {
        s.retrans_timer_us = v;
    }
    if let Some(v) = keyword(a, "DELAY_FIRST_PROBE", micros)? {
        s.delay_first_probe_time_us = v;
    }
    if let Some(v) = keyword(a, "SEED", args::unsigned)? {
        s.seed = v;
    }
    s.check()?;
    Ok(s)
}

/// Reads a keyword time in microseconds.
pub(crate) fn read_time(a: &mut Args, key: &str) -> Result<Option<u64>, String> {
    keyword(a, key, micros)
}

/// Reads a keyword count.
pub(crate) fn read_count(a: &mut Args, key: &str) -> Result<Option<u32>, String> {
    keyword(a, key, |t| args::unsigned(t).map(|n| n.min(u32::MAX as u64) as u32))
}

/// A seed that differs from host to host (so that neighbours do not draw
/// the same ReachableTime, RFC 4861 §6.3.2) and repeats run to run.
pub(crate) fn seed_of(bytes: &[u8]) -> u64 {
    // FNV-1a.
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The element's one router timer, set for the earliest of its deadlines.
#[derive(Default)]
pub(crate) struct TimerSlot {
    /// The timer and when it fires.
    pending: Option<(TimerId, u64)>,
}

impl TimerSlot {
    /// Makes the timer fire at `at` or before (a timer already set earlier
    /// stays: when it fires, the element asks again).
    pub(crate) fn arm(&mut self, at: Option<u64>, ctx: &mut Ctx<'_>) {
        let Some(at) = at else {
            return;
        };
        if let Some((id, when)) = self.pending {
            if when <= at {
                return;
            }
            ctx.cancel_timer(id);
        }
        let now = ctx.now_us();
        let id = ctx.schedule_after_us(at.saturating_sub(now));
        self.pending = Some((id, at.max(now)));
    }

    /// The timer `id` fired.
    pub(crate) fn fired(&mut self, id: TimerId) {
        if self.pending.is_some_and(|(p, _)| p == id) {
            self.pending = None;
        }
    }
}

/// The `table` handler's text: one `ADDRESS MAC STATE` line per entry, by
/// address (`-` for the MAC of an INCOMPLETE entry).
pub(crate) fn table_text<A: Ord + Copy + Display>(cache: &NeighborCache<A>) -> String {
    let mut out = String::new();
    for (addr, state, mac) in cache.iter() {
        let mac = mac.map_or_else(|| "-".to_string(), |m| m.to_string());
        out += &format!("{addr} {mac} {state}\n");
    }
    out
}

/// A new packet of `len` bytes from the router's pool (None if the pool
/// is empty).
pub(crate) fn new_frame(ctx: &Ctx<'_>, len: usize) -> Option<Packet> {
    let mut p = ctx.pool().alloc().ok()?;
    p.set_len(len).ok()?;
    Some(p)
}

/// The Ethernet group address of an IPv4 multicast group (RFC 1112 §6.4:
/// 01-00-5E-00-00-00 and the group's low 23 bits).
pub(crate) fn ipv4_multicast_mac(group: Ipv4Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
}

/// The Ethernet address of an IPv6 multicast address (RFC 2464 §7:
/// 33-33 and its last four bytes).
pub(crate) fn ipv6_multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1:
/// FF02:0:0:0:0:1:FF00::/104 and the address's low 24 bits).
pub(crate) fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

/// Whether `addr` is a solicited-node multicast address.
pub(crate) fn is_solicited_node(addr: Ipv6Addr) -> bool {
    addr.octets()[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_groups_map_to_their_ethernet_addresses() {
        // RFC 1112 §6.4: the high bit of the second byte is not carried.
        assert_eq!(
            ipv4_multicast_mac(Ipv4Addr::new(224, 129, 2, 3)),
            EthernetAddress([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03])
        );
        let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
        assert_eq!(ipv6_multicast_mac(all_nodes), EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
        let addr: Ipv6Addr = "2001:db8::2aa:ff:fe28:9c5a".parse().unwrap();
        let group = solicited_node(addr);
        // RFC 4291 §2.7.1's own example form: FF02::1:FF28:9C5A.
        assert_eq!(group, "ff02::1:ff28:9c5a".parse::<Ipv6Addr>().unwrap());
        assert!(is_solicited_node(group));
        assert!(!is_solicited_node(all_nodes));
        assert_eq!(
            ipv6_multicast_mac(group),
            EthernetAddress([0x33, 0x33, 0xff, 0x28, 0x9c, 0x5a])
        );
    }

    #[test]
    fn settings_are_read_from_keywords_and_checked() {
        let mut a = Args::new("ENTRIES 8, QUEUE 2, RETRANS_TIMER 500ms, REACHABLE_TIME 10, SEED 4");
        let s = read_settings(&mut a, 1).unwrap();
        assert!(a.complete().is_ok());
        assert_eq!(
            (
                s.max_entries,
                s.queue_len,
                s.retrans_timer_us,
                s.base_reachable_time_us,
                s.seed
            ),
            (8, 2, 500_000, 10_000_000, 4)
        );
        assert!(read_settings(&mut Args::new("ENTRIES 0"), 1).is_err());
        assert!(read_settings(&mut Args::new("RETRANS_TIMER -1"), 1).is_err());
        assert!(read_settings(&mut Args::new("QUEUE x"), 1).is_err());
    }
}
