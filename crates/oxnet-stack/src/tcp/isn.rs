//! Initial sequence numbers (RFC 9293 §3.4.1, RFC 6528) and ephemeral
//! ports (RFC 6056): both a clock or counter plus a keyed hash of the
//! connection's endpoints, so that an off-path attacker can guess neither.

use crate::wire::FlowKey;
use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher, Hash, Hasher};

/// The secret both use, 128 bits, chosen at random for each stack
/// (or fixed, for tests that want the same numbers every run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Secret([u64; 2]);

impl Secret {
    /// A random secret (from the OS's randomness, through std's
    /// randomly keyed hasher).
    pub fn random() -> Secret {
        let state = std::collections::hash_map::RandomState::new();
        Secret([state.hash_one(1u8), state.hash_one(2u8)])
    }

    /// A fixed secret (tests).
    pub fn fixed(a: u64, b: u64) -> Secret {
        Secret([a, b])
    }

    /// RFC 6528 §3's F(): a hash of the endpoints and the secret (SipHash
    /// over them, the secret part of the input as the RFC's MD5 example
    /// has it).
    /// The keyed hash of `key` and `extra`, for other uses of the secret
    /// (SYN cookies).
    pub fn keyed(&self, key: &FlowKey, extra: u64) -> u64 {
        let mut h = DefaultHasher::new();
        2u8.hash(&mut h);
        self.0.hash(&mut h);
        extra.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    }

    fn hash(&self, key: &FlowKey, salt: u8) -> u64 {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        self.0.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    }
}

impl Default for Secret {
    fn default() -> Secret {
        Secret::random()
    }
}

/// RFC 6528 §3: ISN = M + F(localip, localport, remoteip, remoteport,
/// secretkey), M a timer ticking every 4 microseconds (RFC 9293 §3.4.1's
/// clock), `now_us` the stack's clock.
pub fn initial_sequence_number(secret: &Secret, key: &FlowKey, now_us: u64) -> u32 {
    let m = (now_us / 4) as u32;
    m.wrapping_add(secret.hash(key, 0) as u32)
}

/// RFC 6056 §3.3.3, Algorithm 3 ("simple hash-based"): the search for a
/// free port starts at an offset that is a hash of the endpoints (the
/// local port left out), plus a counter that moves on after each choice,
/// so that connections to one destination take ports in sequence and
/// different destinations are unrelated. `in_use(port)` says whether a
/// port is taken for this destination (or may not be used: the caller
/// can refuse ports that RSS would send to another core, ClickNF §5.2).
/// None: every port of the range is taken.
pub fn ephemeral_port(
    secret: &Secret,
    key: &FlowKey,
    range: std::ops::RangeInclusive<u16>,
    next: &mut u16,
    mut in_use: impl FnMut(u16) -> bool,
) -> Option<u16> {
    let (min, max) = (*range.start() as u32, *range.end() as u32);
    if min > max {
        return None;
    }
    let count = max - min + 1;
    let mut without_port = *key;
    without_port.local.port = 0;
    let offset = secret.hash(&without_port, 1) as u32;
    for i in 0..count {
        let port = (min + (offset.wrapping_add(*next as u32).wrapping_add(i)) % count) as u16;
        if !in_use(port) {
            *next = next.wrapping_add(i as u16 + 1);
            return Some(port);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::IpEndpoint;
    use std::net::Ipv4Addr;

    fn key(remote_port: u16) -> FlowKey {
        FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 40000),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), remote_port),
        }
    }

    #[test]
    fn the_isn_moves_with_the_clock_and_differs_between_connections_and_secrets() {
        let s = Secret::fixed(1, 2);
        let a = initial_sequence_number(&s, &key(80), 0);
        assert_eq!(
            initial_sequence_number(&s, &key(80), 400),
            a.wrapping_add(100),
            "one tick per 4 µs"
        );
        assert_ne!(initial_sequence_number(&s, &key(81), 0), a);
        assert_ne!(initial_sequence_number(&Secret::fixed(1, 3), &key(80), 0), a);
        assert_ne!(Secret::random(), Secret::random());
    }

    #[test]
    fn ephemeral_ports_skip_used_ones_stay_in_range_and_run_out_cleanly() {
        let s = Secret::fixed(7, 8);
        let mut next = 0;
        let mut taken = std::collections::HashSet::new();
        for _ in 0..100 {
            let p = ephemeral_port(&s, &key(80), 50000..=50099, &mut next, |p| taken.contains(&p)).unwrap();
            assert!((50000..=50099).contains(&p));
            assert!(taken.insert(p), "a port is never handed out twice");
        }
        assert_eq!(
            ephemeral_port(&s, &key(80), 50000..=50099, &mut next, |p| taken.contains(&p)),
            None
        );
    }

    #[test]
    fn connections_to_one_destination_take_ports_in_sequence() {
        let s = Secret::fixed(7, 8);
        let mut next = 0;
        let a = ephemeral_port(&s, &key(80), 1024..=65535, &mut next, |_| false).unwrap();
        let b = ephemeral_port(&s, &key(80), 1024..=65535, &mut next, |_| false).unwrap();
        assert_eq!(b, if a == 65535 { 1024 } else { a + 1 });
    }
}
