//! SYN cookies (RFC 4987 §3.6): when a listener's queue of half-open
//! connections is full, the SYN is answered without keeping any state;
//! the SYN-ACK's initial sequence number carries what is needed to make
//! the connection when the ACK comes back:
//!
//! | bits | what |
//! |---|---|
//! | 31..27 | a counter of 64-second periods, modulo 32 |
//! | 26..24 | the MSS, as an index into [`MSS_TABLE`] |
//! | 23..0 | a keyed hash of the endpoints, the counter and the MSS index |
//!
//! A cookie is good for the period it was made in and the one after (64
//! to 128 s). The options the SYN offered beyond the MSS (window scale,
//! SACK, timestamps) are not kept: a connection made from a cookie goes
//! without them (Linux keeps some in the timestamp; that is left out).

use super::isn::Secret;
use crate::wire::FlowKey;

/// MSS values a cookie can say (3 bits): common link MTUs less the
/// headers.
pub const MSS_TABLE: [u16; 8] = [536, 1220, 1300, 1380, 1440, 1460, 4036, 8960];

const PERIOD_US: u64 = 64_000_000;

fn period(now_us: u64) -> u32 {
    ((now_us / PERIOD_US) % 32) as u32
}

fn hash(secret: &Secret, key: &FlowKey, period: u32, mss_index: u32) -> u32 {
    (secret.keyed(key, (period << 3 | mss_index) as u64) & 0x00ff_ffff) as u32
}

/// The cookie (our ISS) answering a SYN for `key` that offered `mss`.
pub fn make(secret: &Secret, key: &FlowKey, mss: u16, now_us: u64) -> u32 {
    let index = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
    let t = period(now_us);
    t << 27 | index << 24 | hash(secret, key, t, index)
}

/// Checks the cookie an ACK returns (its acknowledgment number less
/// one); the MSS it carries if it is good.
pub fn check(secret: &Secret, key: &FlowKey, cookie: u32, now_us: u64) -> Option<u16> {
    let t = cookie >> 27;
    let index = (cookie >> 24) & 7;
    let now = period(now_us);
    let fresh = t == now || (t + 1) % 32 == now;
    (fresh && hash(secret, key, t, index) == cookie & 0x00ff_ffff).then(|| MSS_TABLE[index as usize])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::IpEndpoint;
    use std::net::Ipv4Addr;

    fn key(port: u16) -> FlowKey {
        FlowKey {
            local: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            remote: IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), port),
        }
    }

    #[test]
    fn a_cookie_checks_for_its_flow_in_its_period_and_the_next_only() {
        let s = Secret::fixed(3, 4);
        let c = make(&s, &key(1000), 1460, 10_000_000);
        assert_eq!(check(&s, &key(1000), c, 10_000_000), Some(1460));
        assert_eq!(check(&s, &key(1000), c, 10_000_000 + PERIOD_US), Some(1460));
        assert_eq!(check(&s, &key(1000), c, 10_000_000 + 2 * PERIOD_US), None, "too old");
        assert_eq!(check(&s, &key(1001), c, 10_000_000), None, "another flow");
        assert_eq!(
            check(&Secret::fixed(3, 5), &key(1000), c, 10_000_000),
            None,
            "another secret"
        );
        assert_eq!(check(&s, &key(1000), c ^ 1, 10_000_000), None, "altered");
    }

    #[test]
    fn the_mss_is_rounded_down_to_the_table() {
        let s = Secret::fixed(3, 4);
        for (offered, kept) in [(1460, 1460), (1400, 1380), (9000, 8960), (100, 536)] {
            let c = make(&s, &key(1), offered, 0);
            assert_eq!(check(&s, &key(1), c, 0), Some(kept), "{offered}");
        }
    }
}
