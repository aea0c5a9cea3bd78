//! Our own IPv6 addresses and their duplicate address detection (RFC 4862
//! §5.4): each is tentative while its solicitations go out, then
//! preferred (usable), or a duplicate (never used) if another node
//! answered or solicited it meanwhile.

use std::fmt;
use std::net::Ipv6Addr;

/// Where an address of ours stands (RFC 4862 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressState {
    /// DAD in progress: `sent` solicitations so far, the next step at `next_at`.
    Tentative { sent: u32, next_at: u64 },
    /// Usable (we keep no lifetimes: the configuration is static).
    Preferred,
    /// Another node has it (RFC 4862 §5.4.5): never used.
    Duplicate,
}

impl fmt::Display for AddressState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressState::Tentative { .. } => "TENTATIVE",
            AddressState::Preferred => "PREFERRED",
            AddressState::Duplicate => "DUPLICATE",
        })
    }
}

/// What DAD asks the element to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DadStep {
    /// Send a DAD solicitation for the address (from ::, RFC 4862 §5.4.2).
    Solicit(Ipv6Addr),
    /// The address became preferred: advertise it (RFC 4861 §7.2.6).
    Preferred(Ipv6Addr),
}

/// The addresses of the interface, in the order configured.
#[derive(Debug, Clone, Default)]
pub struct OwnAddresses {
    list: Vec<(Ipv6Addr, AddressState)>,
    /// DupAddrDetectTransmits (RFC 4862 §5.1).
    transmits: u32,
    /// RetransTimer (RFC 4861 §6.3.2), between DAD solicitations.
    retrans_us: u64,
}

impl OwnAddresses {
    /// `addrs`, not started: all tentative until [`OwnAddresses::start`].
    pub fn new(addrs: &[Ipv6Addr], transmits: u32, retrans_us: u64) -> Self {
        OwnAddresses {
            list: addrs
                .iter()
                .map(|a| (*a, AddressState::Tentative { sent: 0, next_at: 0 }))
                .collect(),
            transmits,
            retrans_us,
        }
    }

    /// Starts DAD for every address at `now`; with DupAddrDetectTransmits
    /// 0, DAD is not performed (RFC 4862 §5.1) and each is preferred at
    /// once. No random delay before the first solicitation (RFC 4862
    /// §5.4.2 asks for one only when joining the group is the first
    /// message after the interface comes up, to spread many hosts
    /// starting together; ours starts with the router, configured by hand).
    pub fn start(&mut self, now: u64, steps: &mut Vec<DadStep>) {
        for (_, state) in self.list.iter_mut() {
            *state = AddressState::Tentative { sent: 0, next_at: now };
        }
        self.poll(now, steps);
    }

    /// Runs the DAD steps due by `now` (RFC 4862 §5.4.2): a solicitation
    /// every RetransTimer until DupAddrDetectTransmits were sent, then
    /// after one more RetransTimer without conflict the address is
    /// preferred.
    pub fn poll(&mut self, now: u64, steps: &mut Vec<DadStep>) {
        for (addr, state) in self.list.iter_mut() {
            let AddressState::Tentative { sent, next_at } = *state else {
                continue;
            };
            if now < next_at {
                continue;
            }
            if sent < self.transmits {
                *state = AddressState::Tentative {
                    sent: sent + 1,
                    next_at: now.saturating_add(self.retrans_us),
                };
                steps.push(DadStep::Solicit(*addr));
            } else {
                *state = AddressState::Preferred;
                steps.push(DadStep::Preferred(*addr));
            }
        }
    }

    /// The next DAD step's time.
    pub fn next_deadline(&self) -> Option<u64> {
        self.list
            .iter()
            .filter_map(|(_, s)| match s {
                AddressState::Tentative { next_at, .. } => Some(*next_at),
                _ => None,
            })
            .min()
    }

    /// The state of `addr` if it is ours.
    pub fn state(&self, addr: Ipv6Addr) -> Option<AddressState> {
        self.list.iter().find(|(a, _)| *a == addr).map(|(_, s)| *s)
    }

    /// Marks a tentative address duplicate; true if it was tentative.
    pub fn mark_duplicate(&mut self, addr: Ipv6Addr) -> bool {
        match self.list.iter_mut().find(|(a, _)| *a == addr) {
            Some((_, state @ AddressState::Tentative { .. })) => {
                *state = AddressState::Duplicate;
                true
            }
            _ => false,
        }
    }

    /// Every address and its state, in the order configured.
    pub fn iter(&self) -> impl Iterator<Item = (Ipv6Addr, AddressState)> + '_ {
        self.list.iter().copied()
    }

    /// The source address of a solicitation for `target` (RFC 4861
    /// §7.2.2): `hint` (the waiting packet's source) if it is ours and
    /// preferred, else a preferred address of the target's scope
    /// (link-local for a link-local target), else any preferred one.
    pub fn source_for(&self, target: Ipv6Addr, hint: Option<Ipv6Addr>) -> Option<Ipv6Addr> {
        let preferred = || {
            self.list
                .iter()
                .filter(|(_, s)| *s == AddressState::Preferred)
                .map(|(a, _)| *a)
        };
        if let Some(h) = hint.filter(|h| self.state(*h) == Some(AddressState::Preferred)) {
            return Some(h);
        }
        let scope = is_link_local(target);
        preferred()
            .find(|a| is_link_local(*a) == scope)
            .or_else(|| preferred().next())
    }
}

/// fe80::/10 (RFC 4291 §2.5.6).
fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn a(text: &str) -> Ipv6Addr {
        text.parse().unwrap()
    }

    #[test]
    fn dad_sends_its_solicitations_a_retrans_timer_apart_then_prefers_the_address() {
        let mut own = OwnAddresses::new(&[a("fe80::1"), a("2001:db8::1")], 2, S);
        let mut steps = Vec::new();
        own.start(10, &mut steps);
        assert_eq!(
            steps,
            [DadStep::Solicit(a("fe80::1")), DadStep::Solicit(a("2001:db8::1"))]
        );
        assert_eq!(own.next_deadline(), Some(10 + S));
        steps.clear();
        own.poll(10 + S - 1, &mut steps);
        assert_eq!(steps, []);
        own.poll(10 + S, &mut steps);
        assert_eq!(steps.len(), 2);
        assert!(own.mark_duplicate(a("2001:db8::1")));
        steps.clear();
        own.poll(10 + 2 * S, &mut steps);
        assert_eq!(steps, [DadStep::Preferred(a("fe80::1"))]);
        assert_eq!(own.state(a("fe80::1")), Some(AddressState::Preferred));
        assert_eq!(own.state(a("2001:db8::1")), Some(AddressState::Duplicate));
        assert!(!own.mark_duplicate(a("fe80::1")), "a preferred address stays");
        assert_eq!(own.next_deadline(), None);
        assert_eq!(own.state(a("fe80::2")), None);
    }

    #[test]
    fn no_transmits_means_no_dad() {
        let mut own = OwnAddresses::new(&[a("fe80::1")], 0, S);
        let mut steps = Vec::new();
        own.start(0, &mut steps);
        assert_eq!(steps, [DadStep::Preferred(a("fe80::1"))]);
    }

    #[test]
    fn the_source_of_a_solicitation_is_preferred_and_of_the_target_scope() {
        let mut own = OwnAddresses::new(&[a("2001:db8::1"), a("fe80::1"), a("2001:db8::2")], 0, S);
        assert_eq!(own.source_for(a("fe80::9"), None), None, "none preferred yet");
        own.start(0, &mut Vec::new());
        assert_eq!(own.source_for(a("fe80::9"), None), Some(a("fe80::1")));
        assert_eq!(own.source_for(a("2001:db8::9"), None), Some(a("2001:db8::1")));
        assert_eq!(
            own.source_for(a("2001:db8::9"), Some(a("2001:db8::2"))),
            Some(a("2001:db8::2"))
        );
        assert_eq!(
            own.source_for(a("2001:db8::9"), Some(a("2001:db8::7"))),
            Some(a("2001:db8::1"))
        );
        let own = {
            let mut o = OwnAddresses::new(&[a("2001:db8::1")], 0, S);
            o.start(0, &mut Vec::new());
            o
        };
        assert_eq!(
            own.source_for(a("fe80::9"), None),
            Some(a("2001:db8::1")),
            "any, if none of the scope"
        );
    }
}
