//! Who may go where: the proxy's destination rules (ALLOW, DENY) and its
//! user ids (USERS). SOCKS4.protocol §1 leaves the decision to the
//! server ("based on the source IP, DSTIP, DSTPORT, USERID"); these are
//! the checks this proxy makes, each refusal answered 91.

use oxnet_graph::args;
use std::net::Ipv4Addr;

/// One destination pattern: an IPv4 prefix and, optionally, a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    net: u32,
    mask: u32,
    port: Option<u16>,
}

impl Rule {
    /// `PREFIX[:PORT]`: `10.0.0.0/24`, `10.0.0.3`, `10.0.0.3:80`.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let (prefix, port) = match text.rsplit_once(':') {
            Some((p, port)) => {
                let port: u16 = port.parse().map_err(|_| format!("'{text}': '{port}' is not a port"))?;
                (p, Some(port))
            }
            None => (text, None),
        };
        let (addr, mask) = args::ip_prefix(prefix)?;
        let mask = u32::from_be_bytes(mask);
        Ok(Rule {
            net: u32::from_be_bytes(addr) & mask,
            mask,
            port,
        })
    }

    pub fn matches(&self, ip: Ipv4Addr, port: u16) -> bool {
        u32::from(ip) & self.mask == self.net && self.port.is_none_or(|p| p == port)
    }
}

/// The proxy's rules.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Destinations allowed (empty: all that DENY does not name).
    pub allow: Vec<Rule>,
    /// Destinations refused, whatever ALLOW says.
    pub deny: Vec<Rule>,
    /// User ids accepted (None: any, the empty one included).
    pub users: Option<Vec<Vec<u8>>>,
}

/// A space-separated list of rules.
pub fn rules(text: &str) -> Result<Vec<Rule>, String> {
    text.split_whitespace().map(Rule::parse).collect()
}

impl Policy {
    /// Whether a connection to (CONNECT) or from (BIND) `ip`:`port` is
    /// allowed: DENY first, then ALLOW if given.
    pub fn permits(&self, ip: Ipv4Addr, port: u16) -> bool {
        if self.deny.iter().any(|r| r.matches(ip, port)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|r| r.matches(ip, port))
    }

    /// Whether the request's USERID is accepted.
    pub fn accepts_user(&self, user: &[u8]) -> bool {
        self.users.as_ref().is_none_or(|list| list.iter().any(|u| u == user))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_allow_narrows() {
        let p = Policy {
            allow: rules("10.0.0.0/24").unwrap(),
            deny: rules("10.0.0.9 10.0.0.3:22").unwrap(),
            users: None,
        };
        let ip = |d| Ipv4Addr::new(10, 0, 0, d);
        assert!(p.permits(ip(3), 80));
        assert!(!p.permits(ip(3), 22), "a port rule");
        assert!(!p.permits(ip(9), 80), "a host rule");
        assert!(!p.permits(Ipv4Addr::new(10, 0, 1, 3), 80), "outside ALLOW");
        assert!(Policy::default().permits(ip(9), 1), "no rules: everything");
        assert!(Rule::parse("10.0.0.1:http").is_err());
        assert!(Rule::parse("nonsense").is_err());
    }

    #[test]
    fn users_are_an_allow_list() {
        let mut p = Policy::default();
        assert!(p.accepts_user(b""));
        p.users = Some(vec![b"alice".to_vec()]);
        assert!(p.accepts_user(b"alice"));
        assert!(!p.accepts_user(b"bob"));
        assert!(!p.accepts_user(b""));
    }
}
