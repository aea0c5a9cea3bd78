//! The resolver of SOCKS4a host names: a table read from a file in
//! /etc/hosts format (hosts(5): an address, then its names, `#` starts
//! a comment). SOCKS4 replies carry an IPv4 address, so only IPv4 lines
//! count; the first line that names a host wins, as in hosts(5).

use std::collections::HashMap;
use std::io::Read;
use std::net::Ipv4Addr;

/// Bytes of a hosts file read at most: a table, not a zone.
pub const MAX_FILE: u64 = 1 << 20;
/// A DNS name's length limit (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;

/// Names and their addresses.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    names: HashMap<String, Ipv4Addr>,
}

impl Hosts {
    /// Reads `path` (at most [`MAX_FILE`] bytes).
    pub fn load(path: &str) -> Result<Hosts, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("HOSTS: cannot open {path}: {e}"))?;
        let mut text = String::new();
        file.take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("HOSTS: cannot read {path}: {e}"))?;
        if text.len() as u64 > MAX_FILE {
            return Err(format!("HOSTS: {path} is larger than {MAX_FILE} bytes"));
        }
        Ok(Hosts::parse(&text))
    }

    /// The table of a hosts file's text; lines that are not an IPv4
    /// address and names are skipped.
    pub fn parse(text: &str) -> Hosts {
        let mut names = HashMap::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let Some(Ok(addr)) = words.next().map(str::parse::<Ipv4Addr>) else {
                continue;
            };
            for name in words.filter(|n| n.len() <= MAX_NAME) {
                names.entry(name.to_ascii_lowercase()).or_insert(addr);
            }
        }
        Hosts { names }
    }

    /// The address of `name` (already lower-cased), if known.
    pub fn resolve(&self, name: &str) -> Option<Ipv4Addr> {
        self.names.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_format_lines_resolve_and_others_are_skipped() {
        let h = Hosts::parse(
            "# comment\n10.0.0.3 web.test Web2.Test # trailing\n\n::1 six.test\n10.0.0.4 web.test\nbogus line\n",
        );
        assert_eq!(
            h.resolve("web.test"),
            Some(Ipv4Addr::new(10, 0, 0, 3)),
            "the first line wins"
        );
        assert_eq!(h.resolve("web2.test"), Some(Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(h.resolve("six.test"), None, "IPv6 lines do not count");
        assert_eq!(h.resolve("trailing"), None);
        assert_eq!(h.len(), 2);
    }
}
