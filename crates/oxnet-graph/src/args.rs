//! Element arguments with Click's conventions (click(5), "CONFIGURATION
//! STRINGS"; Click's `Args` class): a configuration string is a comma-
//! separated list of arguments; an argument whose first word is an
//! upper-case keyword (`LIMIT 5`) is a keyword argument, the others are
//! positional, in order. Elements read what they take; whatever is left
//! is an error naming it.

use crate::lang::vars::{split_args, split_words};

/// The arguments of one element, consumed by its `configure`.
#[derive(Debug)]
pub struct Args {
    positional: Vec<(String, bool)>,
    keywords: Vec<(String, String, bool)>,
    next_positional: usize,
    /// Every argument as written, in order (for [`Args::take_raw`]).
    raw: Vec<String>,
}

fn is_keyword(word: &str) -> bool {
    let mut bytes = word.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z'))
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Args {
    /// Splits `config` into positional and keyword arguments.
    pub fn new(config: &str) -> Args {
        let mut positional = Vec::new();
        let mut keywords = Vec::new();
        let raw = split_args(config);
        for arg in raw.iter().cloned() {
            let first = split_words(&arg).into_iter().next().unwrap_or_default();
            let rest = arg[first.len().min(arg.len())..].trim();
            if is_keyword(&first) && first.len() < arg.len() && arg.as_bytes()[first.len()].is_ascii_whitespace() {
                keywords.push((first, rest.to_string(), false));
            } else {
                positional.push((arg, false));
            }
        }
        Args {
            positional,
            keywords,
            next_positional: 0,
            raw,
        }
    }

    /// A keyword argument (the last one wins if repeated, as in Click).
    pub fn keyword(&mut self, key: &str) -> Option<String> {
        let mut found = None;
        for (k, v, used) in self.keywords.iter_mut() {
            if k == key {
                *used = true;
                found = Some(v.clone());
            }
        }
        found
    }

    /// The next positional argument, or the keyword argument `key`
    /// (Click's `read_p`).
    pub fn positional_or(&mut self, key: &str) -> Option<String> {
        if let Some(v) = self.keyword(key) {
            // A keyword given: the positional slot is skipped only if it
            // is not there.
            return Some(v);
        }
        let i = self.next_positional;
        if i < self.positional.len() {
            self.next_positional += 1;
            self.positional[i].1 = true;
            return Some(self.positional[i].0.clone());
        }
        None
    }

    /// Like [`Args::positional_or`], but missing is an error (`read_mp`).
    pub fn required(&mut self, key: &str) -> Result<String, String> {
        self.positional_or(key)
            .ok_or_else(|| format!("missing mandatory {key} argument"))
    }

    /// Every remaining positional argument (for elements with a list of
    /// patterns: Classifier, Script).
    pub fn rest_positional(&mut self) -> Vec<String> {
        let out = self.positional[self.next_positional..]
            .iter()
            .map(|(a, _)| a.clone())
            .collect();
        for p in &mut self.positional[self.next_positional..] {
            p.1 = true;
        }
        self.next_positional = self.positional.len();
        out
    }

    /// Every argument as written and in order, all taken as read (for
    /// elements whose arguments are patterns, where an upper-case word
    /// such as an AddressInfo name is no keyword: IPClassifier, IPFilter).
    pub fn take_raw(&mut self) -> Vec<String> {
        for p in &mut self.positional {
            p.1 = true;
        }
        for k in &mut self.keywords {
            k.2 = true;
        }
        self.next_positional = self.positional.len();
        self.raw.clone()
    }

    /// Every keyword argument not read yet, marked read (for elements
    /// whose arguments start with upper-case names of their own, as
    /// IPRewriterPatterns' `NAME PATTERN`).
    pub fn rest_keywords(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v, used) in self.keywords.iter_mut().filter(|(_, _, used)| !*used) {
            *used = true;
            out.push((k.clone(), v.clone()));
        }
        out
    }

    /// Every argument in order, keyword ones with their keyword (for
    /// Script and DriverManager, which read instructions).
    pub fn all_raw(config: &str) -> Vec<String> {
        split_args(config)
    }

    /// Errors for arguments nobody read.
    pub fn complete(&self) -> Result<(), String> {
        if let Some((k, _, _)) = self.keywords.iter().find(|(_, _, used)| !used) {
            return Err(format!("unknown keyword argument '{k}'"));
        }
        let extra = self.positional.iter().filter(|(_, used)| !used).count();
        if extra > 0 {
            return Err(format!("too many arguments ({extra} left over)"));
        }
        Ok(())
    }
}

/// An optional argument parsed with `parse`; an error names the argument
/// (`KEY: what is wrong`). For `Args::keyword` / `Args::positional_or`
/// results: `opt(a.keyword("LIMIT"), args::integer, "LIMIT")?`.
pub fn opt<T>(
    value: Option<String>,
    parse: impl Fn(&str) -> Result<T, String>,
    key: &str,
) -> Result<Option<T>, String> {
    value.map(|v| parse(&v).map_err(|e| format!("{key}: {e}"))).transpose()
}

/// Click's unquoting (click(5) "Backslash Substitutions"): double quotes
/// with C escapes, `\<hex>` data, single quotes literally, and
/// juxtaposed pieces concatenated. Returns bytes (DATA may hold any byte).
pub fn unquote(text: &str) -> Result<Vec<u8>, String> {
    let b = text.trim().as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => {
                let end = b[i + 1..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .ok_or("unterminated single quote")?;
                out.extend_from_slice(&b[i + 1..i + 1 + end]);
                i += end + 2;
            }
            b'"' => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err("unterminated double quote".into()),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => i = backslash(b, i, &mut out)?,
                        Some(&c) => {
                            out.push(c);
                            i += 1;
                        }
                    }
                }
            }
            b'\\' if b.get(i + 1) == Some(&b'<') => i = backslash(b, i, &mut out)?,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// One backslash sequence at `b[i]`; returns the index after it.
fn backslash(b: &[u8], i: usize, out: &mut Vec<u8>) -> Result<usize, String> {
    let Some(&c) = b.get(i + 1) else {
        return Ok(i + 1);
    };
    let simple = match c {
        b'a' => Some(7),
        b'b' => Some(8),
        b't' => Some(b'\t'),
        b'n' => Some(b'\n'),
        b'v' => Some(11),
        b'f' => Some(12),
        b'r' => Some(b'\r'),
        b'\\' => Some(b'\\'),
        _ => None,
    };
    if let Some(v) = simple {
        out.push(v);
        return Ok(i + 2);
    }
    match c {
        b'0'..=b'7' => {
            let digits = b[i + 1..]
                .iter()
                .take(3)
                .take_while(|d| (b'0'..=b'7').contains(d))
                .count();
            let v = std::str::from_utf8(&b[i + 1..i + 1 + digits])
                .ok()
                .and_then(|s| u32::from_str_radix(s, 8).ok())
                .unwrap_or(0);
            out.push(v as u8);
            Ok(i + 1 + digits)
        }
        b'x' => {
            let digits = b[i + 2..].iter().take_while(|d| d.is_ascii_hexdigit()).count();
            if digits > 0 {
                let s = std::str::from_utf8(&b[i + 2 + digits.saturating_sub(2)..i + 2 + digits]).unwrap_or("0");
                out.push(u8::from_str_radix(s, 16).unwrap_or(0));
            }
            Ok(i + 2 + digits)
        }
        b'<' => {
            let end = b[i + 2..]
                .iter()
                .position(|&d| d == b'>')
                .ok_or("unterminated '\\<' data")?;
            let hex: Vec<u8> = b[i + 2..i + 2 + end]
                .iter()
                .copied()
                .filter(|d| !d.is_ascii_whitespace())
                .collect();
            if !hex.len().is_multiple_of(2) || !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err("'\\<...>' must hold pairs of hex digits".into());
            }
            for pair in hex.chunks(2) {
                out.push(u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("00"), 16).unwrap_or(0));
            }
            Ok(i + 3 + end)
        }
        b'\n' => Ok(i + 2),
        b'\r' if b.get(i + 2) == Some(&b'\n') => Ok(i + 3),
        b'\r' => Ok(i + 2),
        other => {
            out.push(other);
            Ok(i + 2)
        }
    }
}

/// A string argument, unquoted, as text.
pub fn string(text: &str) -> Result<String, String> {
    Ok(String::from_utf8_lossy(&unquote(text)?).into_owned())
}

/// Booleans: `0`/`false`/`no` and `1`/`true`/`yes` (click(5)).
pub fn boolean(text: &str) -> Result<bool, String> {
    match text.trim() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        other => Err(format!("'{other}' is not a boolean (true/false, yes/no, 1/0)")),
    }
}

/// Integers with an optional sign, decimal, octal (leading 0) or hex
/// (0x) (click(5)).
pub fn integer(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let value = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16)
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8)
    } else {
        body.parse()
    }
    .map_err(|_| format!("'{t}' is not an integer"))?;
    Ok(if neg { -value } else { value })
}

/// A non-negative integer.
pub fn unsigned(text: &str) -> Result<u64, String> {
    let v = integer(text)?;
    u64::try_from(v).map_err(|_| format!("'{}' must not be negative", text.trim()))
}

/// A time in seconds, with an optional unit: s/sec, ms, us, ns, m/min,
/// h/hr (click(5)).
pub fn seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.trim().parse().map_err(|_| format!("'{t}' is not a time"))?;
    let scale = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" | "msec" => 1e-3,
        "us" | "usec" => 1e-6,
        "ns" | "nsec" => 1e-9,
        "m" | "min" => 60.0,
        "h" | "hr" => 3600.0,
        other => return Err(format!("'{other}' is not a time unit (s, ms, us, ns, min, h)")),
    };
    if !(value >= 0.0 && value.is_finite()) {
        return Err(format!("'{t}' is not a time"));
    }
    Ok(value * scale)
}

// ---- Addresses (click(5) "ADDRESSES"; Click's IPAddressArg,
// IPPrefixArg, EtherAddressArg), with AddressInfo names.

/// One AddressInfo name's addresses (Click's AddressInfo element): any of
/// an IPv4 address with its prefix, an Ethernet address. `10.0.0.1/24`
/// (host bits set) defines both the address 10.0.0.1 and the prefix
/// 10.0.0.0/24, `10.0.0.0/24` (no host bits) only the prefix, `10.0.0.1`
/// (/32) only the address, as Click's AddressInfo reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressEntry {
    /// IPv4 address and prefix length (32 for a bare address).
    pub ip: Option<([u8; 4], u8)>,
    /// Ethernet address.
    pub ether: Option<[u8; 6]>,
}

impl AddressEntry {
    /// The IPv4 address, if the entry defines one.
    fn address(&self) -> Option<[u8; 4]> {
        let (a, len) = self.ip?;
        let host_bits = u32::from_be_bytes(a) & !u32::from_be_bytes(prefix_mask(len)) != 0;
        (len == 32 || host_bits).then_some(a)
    }
}

thread_local! {
    static ADDRESS_INFO: std::cell::RefCell<std::collections::HashMap<String, AddressEntry>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
    static PORT_INFO: std::cell::RefCell<std::collections::HashMap<(String, Option<u8>), u16>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
    /// The compound element path of the element being configured (`c/`,
    /// `c/d/`, or empty at the top): AddressInfo and PortInfo names are
    /// local to the compound that defines them (Click's addressinfo.hh).
    static SCOPE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Sets the scope for the names defined and looked up next: that of the
/// element `element_name` (a flattened name such as `c/d/x`), which the
/// router calls before configuring each element.
pub fn set_scope(element_name: &str) {
    let scope = element_name.rfind('/').map_or("", |i| &element_name[..=i]);
    SCOPE.with(|s| *s.borrow_mut() = scope.to_string());
    ELEMENT.with(|e| *e.borrow_mut() = element_name.to_string());
}

thread_local! {
    static ELEMENT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The name of the element being configured (set with [`set_scope`]):
/// state that the graph threads of `-j` share is keyed by it.
pub fn current_element() -> String {
    ELEMENT.with(|e| e.borrow().clone())
}

thread_local! {
    static ROUTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A new router is being built on this thread: its elements are
/// configured and initialized under a new [`router_id`].
pub fn begin_router() {
    ROUTER.with(|r| r.set(r.get() + 1));
}

/// Which router the element being configured or initialized belongs to,
/// unique on this thread: state one router's elements share (the stack's
/// tables) is keyed by it, so that routers built one after another (or
/// side by side) on one thread never see each other's.
pub fn router_id() -> u64 {
    ROUTER.with(|r| r.get())
}

/// `name` as defined in the current scope (its table key).
fn scoped(name: &str) -> String {
    SCOPE.with(|s| format!("{}{name}", s.borrow()))
}

/// The keys `name` may have from the current scope: its own compound's,
/// then each enclosing one's, then the top's.
fn visible(name: &str) -> Vec<String> {
    SCOPE.with(|s| {
        let s = s.borrow();
        let mut keys = Vec::new();
        let mut scope = s.as_str();
        loop {
            keys.push(format!("{scope}{name}"));
            if scope.is_empty() {
                return keys;
            }
            scope = scope[..scope.len() - 1].rfind('/').map_or("", |i| &scope[..=i]);
        }
    })
}

/// Defines an AddressInfo name for the configuration being built on this
/// thread (the router configures AddressInfo elements before the others,
/// as Click does with its configure phases). A kind already defined for
/// the name is replaced.
pub fn define_address(name: &str, entry: AddressEntry) {
    ADDRESS_INFO.with(|t| {
        let mut t = t.borrow_mut();
        let e = t.entry(scoped(name)).or_default();
        if entry.ip.is_some() {
            e.ip = entry.ip;
        }
        if entry.ether.is_some() {
            e.ether = entry.ether;
        }
    });
}

/// Forgets every AddressInfo and PortInfo name (a new configuration
/// starts).
pub fn clear_addresses() {
    ADDRESS_INFO.with(|t| t.borrow_mut().clear());
    PORT_INFO.with(|t| t.borrow_mut().clear());
}

/// A name's entry, and the suffix after its last `:` if that is one of
/// AddressInfo's (`NAME:ip`, `NAME:ipnet`, `NAME:bcast`, `NAME:eth`...).
fn lookup_address(name: &str) -> Option<(AddressEntry, &str)> {
    const SUFFIXES: [&str; 10] = [
        "ip", "ip4", "bcast", "gw", "net", "ipnet", "ip4net", "eth", "ether", "ethernet",
    ];
    let (base, suffix) = match name.rsplit_once(':') {
        Some((b, s)) if SUFFIXES.contains(&s.to_ascii_lowercase().as_str()) => (b, s),
        _ => (name, ""),
    };
    let keys = visible(base);
    ADDRESS_INFO
        .with(|t| {
            let t = t.borrow();
            keys.iter().find_map(|k| t.get(k).cloned())
        })
        .map(|e| (e, suffix))
}

/// A name's IPv4 address (Click's `AddressInfo::query_ip`): the address,
/// or with `:bcast` its prefix's broadcast address (host bits all 1),
/// with `:gw` the prefix's network address with the lowest bit set.
fn lookup_ip(name: &str) -> Option<[u8; 4]> {
    let (entry, suffix) = lookup_address(name)?;
    let with_mask = |f: fn(u32, u32) -> u32| {
        entry.ip.map(|(a, len)| {
            let mask = u32::from_be_bytes(prefix_mask(len));
            f(u32::from_be_bytes(a), mask).to_be_bytes()
        })
    };
    match suffix.to_ascii_lowercase().as_str() {
        "" | "ip" | "ip4" => entry.address(),
        "bcast" => with_mask(|a, m| a | !m),
        "gw" => with_mask(|a, m| (a & m) | 1),
        _ => None,
    }
}

/// A name's IPv4 prefix (Click's `AddressInfo::query_ip_prefix`): plain or
/// with `:net`, `:ipnet`, `:ip4net`.
fn lookup_prefix(name: &str) -> Option<([u8; 4], u8)> {
    let (entry, suffix) = lookup_address(name)?;
    match suffix.to_ascii_lowercase().as_str() {
        "" | "net" | "ipnet" | "ip4net" => entry.ip,
        _ => None,
    }
}

/// A name's Ethernet address: plain or with `:eth`, `:ether`,
/// `:ethernet`.
fn lookup_ether(name: &str) -> Option<[u8; 6]> {
    let (entry, suffix) = lookup_address(name)?;
    match suffix.to_ascii_lowercase().as_str() {
        "" | "eth" | "ether" | "ethernet" => entry.ether,
        _ => None,
    }
}

/// Defines a PortInfo name: `port` for `protocol` (6 TCP, 17 UDP; None:
/// both), as Click's PortInfo element does, in the current scope.
pub fn define_port(name: &str, protocol: Option<u8>, port: u16) {
    PORT_INFO.with(|t| {
        t.borrow_mut().insert((scoped(name), protocol), port);
    });
}

/// Well-known ports Click knows without /etc/services (its IPNameInfo
/// table; numbers as IANA assigns them), for TCP and UDP alike.
const KNOWN_PORTS: &[(&str, u16)] = &[
    ("auth", 113),
    ("bootpc", 68),
    ("bootps", 67),
    ("chargen", 19),
    ("daytime", 13),
    ("discard", 9),
    ("dns", 53),
    ("domain", 53),
    ("echo", 7),
    ("finger", 79),
    ("ftp", 21),
    ("ftp-data", 20),
    ("http", 80),
    ("https", 443),
    ("imap3", 220),
    ("imaps", 993),
    ("irc", 194),
    ("netbios-dgm", 138),
    ("netbios-ns", 137),
    ("netbios-ssn", 139),
    ("nntp", 119),
    ("ntp", 123),
    ("pop3", 110),
    ("pop3s", 995),
    ("pptp", 1723),
    ("rip", 520),
    ("route", 520),
    ("smtp", 25),
    ("snmp", 161),
    ("snmp-trap", 162),
    ("ssh", 22),
    ("sunrpc", 111),
    ("telnet", 23),
    ("tftp", 69),
    ("www", 80),
];

/// /etc/services (services(5): `name port/protocol aliases... # comment`)
/// as (name or alias, port, protocol), read once.
fn services() -> &'static [(String, u16, String)] {
    static SERVICES: std::sync::OnceLock<Vec<(String, u16, String)>> = std::sync::OnceLock::new();
    SERVICES.get_or_init(|| {
        let text = std::fs::read_to_string("/etc/services").unwrap_or_default();
        let mut out = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let (Some(name), Some(spec)) = (words.next(), words.next()) else {
                continue;
            };
            let Some((port, proto)) = spec.split_once('/') else {
                continue;
            };
            let Ok(port) = port.parse::<u16>() else {
                continue;
            };
            for n in std::iter::once(name).chain(words) {
                out.push((n.to_string(), port, proto.to_string()));
            }
        }
        out
    })
}

/// A TCP or UDP port (Click's IPPortArg): a number 0-65535, a PortInfo
/// name visible here (one defined for `protocol`, else for both), a
/// service of /etc/services for `protocol` (6 `tcp`, 17 `udp`), or one of
/// the well-known ports Click knows without it.
pub fn ip_port(text: &str, protocol: u8) -> Result<u16, String> {
    let t = text.trim();
    if let Ok(v) = integer(t) {
        return u16::try_from(v).map_err(|_| format!("'{t}' is not a port (0-65535)"));
    }
    let keys = visible(t);
    let named = PORT_INFO.with(|m| {
        let m = m.borrow();
        keys.iter().find_map(|k| {
            m.get(&(k.clone(), Some(protocol)))
                .or_else(|| m.get(&(k.clone(), None)))
                .copied()
        })
    });
    if let Some(p) = named {
        return Ok(p);
    }
    let proto = match protocol {
        6 => "tcp",
        17 => "udp",
        132 => "sctp",
        33 => "dccp",
        _ => "",
    };
    services()
        .iter()
        .find(|(n, _, p)| n == t && p == proto)
        .map(|&(_, port, _)| port)
        .or_else(|| KNOWN_PORTS.iter().find(|(n, _)| *n == t).map(|&(_, p)| p))
        .ok_or_else(|| format!("'{t}' is not a port (a number, a PortInfo name or a service)"))
}

/// An IPv4 address: dotted quad (`10.0.0.1`; Click also accepts fewer
/// than four parts only in prefixes) or an AddressInfo name (`NAME`,
/// `NAME:ip`, `NAME:bcast`, `NAME:gw`).
pub fn ip_address(text: &str) -> Result<[u8; 4], String> {
    let t = text.trim();
    if let Some(a) = parse_dotted(t, false) {
        return Ok(a);
    }
    lookup_ip(t).ok_or_else(|| format!("'{t}' is not an IP address (a.b.c.d or an AddressInfo name)"))
}

fn parse_dotted(t: &str, partial: bool) -> Option<[u8; 4]> {
    let parts: Vec<&str> = t.split('.').collect();
    if parts.len() > 4 || (!partial && parts.len() != 4) || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut out = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 3 {
            return None;
        }
        out[i] = p.parse().ok()?;
    }
    Some(out)
}

/// The mask of a prefix length.
pub fn prefix_mask(len: u8) -> [u8; 4] {
    let m: u32 = if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32) as u32)
    };
    m.to_be_bytes()
}

/// The prefix length of a mask, if it is contiguous.
pub fn mask_len(mask: [u8; 4]) -> Option<u8> {
    let m = u32::from_be_bytes(mask);
    let len = m.leading_ones();
    (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

/// An IPv4 prefix: `ADDR/LEN`, `ADDR/MASK`, `ADDR MASK`, a partial
/// address with a length (`10/8`), a bare address (/32), or an
/// AddressInfo name: its prefix (`NAME`, `NAME:ipnet`), `NAME:ip` or
/// `NAME:bcast` as /32. Returns address and mask; the address keeps its
/// host bits (Click's IPPrefixArg; callers that want the network AND it
/// with the mask). Click prefers a name's address over its prefix where
/// an argument takes either (ARPResponder, a route): such callers try
/// [`ip_address`] first.
pub fn ip_prefix(text: &str) -> Result<([u8; 4], [u8; 4]), String> {
    let t = text.trim();
    let bad = || format!("'{t}' is not an IP prefix (a.b.c.d/len, a.b.c.d/mask or an AddressInfo name)");
    let (addr, mask) = match t.split_once('/').or_else(|| t.split_once(char::is_whitespace)) {
        Some((a, m)) => (a.trim(), Some(m.trim())),
        None => (t, None),
    };
    let Some(mask) = mask else {
        if let Some(a) = parse_dotted(addr, false) {
            return Ok((a, [255; 4]));
        }
        if let Some((ip, len)) = lookup_prefix(addr) {
            return Ok((ip, prefix_mask(len)));
        }
        return lookup_ip(addr).map(|a| (a, [255; 4])).ok_or_else(bad);
    };
    let base = parse_dotted(addr, true).or_else(|| lookup_ip(addr)).ok_or_else(bad)?;
    let mask = if mask.bytes().all(|b| b.is_ascii_digit()) && !mask.is_empty() {
        let len: u8 = mask.parse().map_err(|_| bad())?;
        if len > 32 {
            return Err(bad());
        }
        prefix_mask(len)
    } else {
        parse_dotted(mask, false).ok_or_else(bad)?
    };
    Ok((base, mask))
}

/// An Ethernet address: six hex bytes separated by `:` or `-`, or an
/// AddressInfo name (`NAME`, `NAME:eth`).
pub fn ether_address(text: &str) -> Result<[u8; 6], String> {
    let t = text.trim();
    let parts: Vec<&str> = t.split([':', '-']).collect();
    if parts.len() == 6 && parts.iter().all(|p| (1..=2).contains(&p.len())) {
        let mut out = [0u8; 6];
        let mut ok = true;
        for (i, p) in parts.iter().enumerate() {
            match u8::from_str_radix(p, 16) {
                Ok(v) => out[i] = v,
                Err(_) => ok = false,
            }
        }
        if ok {
            return Ok(out);
        }
    }
    lookup_ether(t)
        .ok_or_else(|| format!("'{t}' is not an Ethernet address (xx:xx:xx:xx:xx:xx or an AddressInfo name)"))
}

/// A bandwidth in bytes per second: a number with an optional unit,
/// `bps`/`kbps`/`Mbps`/`Gbps` (bits) or `Bps`/`kBps`/`MBps`/`GBps`
/// (bytes); a bare number is bytes per second (click(5) "BANDWIDTHS").
pub fn bandwidth(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.trim().parse().map_err(|_| format!("'{t}' is not a bandwidth"))?;
    let (prefix, rest) = match unit.chars().next() {
        Some('k') | Some('K') => (1e3, &unit[1..]),
        Some('M') => (1e6, &unit[1..]),
        Some('G') => (1e9, &unit[1..]),
        _ => (1.0, unit),
    };
    let per_byte = match rest {
        "" | "Bps" | "B/s" => 1.0,
        "bps" | "b/s" => 1.0 / 8.0,
        _ => {
            return Err(format!(
                "'{unit}' is not a bandwidth unit (bps, kbps, Mbps, Gbps, Bps, kBps, MBps, GBps)"
            ))
        }
    };
    if !(value >= 0.0 && value.is_finite()) {
        return Err(format!("'{t}' is not a bandwidth"));
    }
    Ok(value * prefix * per_byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_positionals_are_told_apart() {
        let mut a = Args::new("\"label\", LIMIT 5, STOP true");
        assert_eq!(a.positional_or("LABEL").as_deref(), Some("\"label\""));
        assert_eq!(a.keyword("LIMIT").as_deref(), Some("5"));
        assert!(a.complete().is_err(), "STOP unread");
        assert_eq!(a.keyword("STOP").as_deref(), Some("true"));
        a.complete().unwrap();
        let mut a = Args::new("1, 2");
        a.positional_or("A");
        assert_eq!(a.complete().unwrap_err(), "too many arguments (1 left over)");
        let mut a = Args::new("LABEL x");
        assert_eq!(a.required("LABEL").unwrap(), "x");
        assert_eq!(Args::new("").required("X").unwrap_err(), "missing mandatory X argument");
        let mut a = Args::new("allow src NET, NET and tcp, 2");
        assert_eq!(a.take_raw(), ["allow src NET", "NET and tcp", "2"]);
        a.complete().unwrap();
    }

    #[test]
    fn unquoting_follows_click_5() {
        assert_eq!(unquote("\"a\\tb\"").unwrap(), b"a\tb");
        assert_eq!(unquote("a\"b\"c").unwrap(), b"abc");
        assert_eq!(unquote("'\\n'").unwrap(), b"\\n");
        // click(5): \< 48 45 4c 4C 4f > is HELLO.
        assert_eq!(unquote("\"\\< 48 45 4c 4C 4f >\"").unwrap(), b"HELLO");
        assert_eq!(unquote("\\<0001>").unwrap(), [0, 1]);
        assert_eq!(unquote("\"\\101\\x41\\x1242\"").unwrap(), b"AAB");
        assert!(unquote("\"open").is_err());
        assert!(unquote("\\<abc>").is_err());
    }

    #[test]
    fn numbers_booleans_and_times() {
        assert_eq!(integer("0x10").unwrap(), 16);
        assert_eq!(integer("010").unwrap(), 8);
        assert_eq!(integer("-5").unwrap(), -5);
        assert!(integer("5x").is_err());
        assert!(unsigned("-1").is_err());
        assert!(boolean("yes").unwrap());
        assert!(!boolean("0").unwrap());
        assert!(boolean("maybe").is_err());
        assert_eq!(seconds("0.1s").unwrap(), 0.1);
        assert_eq!(seconds("250ms").unwrap(), 0.25);
        assert_eq!(seconds("2min").unwrap(), 120.0);
        assert!(seconds("1 fortnight").is_err());
    }

    #[test]
    fn addresses_prefixes_and_addressinfo_names() {
        assert_eq!(ip_address("10.0.0.1").unwrap(), [10, 0, 0, 1]);
        assert!(ip_address("10.0.0").is_err());
        assert!(ip_address("10.0.0.256").is_err());
        assert_eq!(ip_prefix("10/8").unwrap(), ([10, 0, 0, 0], [255, 0, 0, 0]));
        assert_eq!(
            ip_prefix("1.2.3.4/255.255.0.0").unwrap(),
            ([1, 2, 3, 4], [255, 255, 0, 0])
        );
        assert_eq!(ip_prefix("1.2.3.4").unwrap().1, [255; 4]);
        assert!(ip_prefix("1.2.3.4/33").is_err());
        assert_eq!(mask_len([255, 255, 240, 0]), Some(20));
        assert_eq!(mask_len([255, 0, 255, 0]), None);
        assert_eq!(
            ether_address("00:1b:21:0A:b:ff").unwrap(),
            [0, 0x1b, 0x21, 0x0a, 0x0b, 0xff]
        );
        assert!(ether_address("00:1b:21:0a:0b").is_err());
        clear_addresses();
        define_address(
            "eth0",
            AddressEntry {
                ip: Some(([192, 168, 1, 1], 20)),
                ether: Some([2, 0, 0, 0, 0, 1]),
            },
        );
        assert_eq!(ip_address("eth0").unwrap(), [192, 168, 1, 1]);
        assert_eq!(ip_prefix("eth0").unwrap(), ([192, 168, 1, 1], [255, 255, 240, 0]));
        assert_eq!(ip_prefix("eth0:ipnet").unwrap(), ([192, 168, 1, 1], [255, 255, 240, 0]));
        assert_eq!(ip_prefix("eth0:ip").unwrap(), ([192, 168, 1, 1], [255; 4]));
        assert_eq!(ip_address("eth0:bcast").unwrap(), [192, 168, 15, 255]);
        assert_eq!(ip_address("eth0:gw").unwrap(), [192, 168, 0, 1]);
        assert_eq!(ip_address("eth0:ip").unwrap(), [192, 168, 1, 1]);
        assert!(ip_address("eth0:eth").is_err());
        assert!(ip_prefix("eth0:eth").is_err());
        assert_eq!(ether_address("eth0").unwrap(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(ether_address("eth0:eth").unwrap(), [2, 0, 0, 0, 0, 1]);
        assert!(ether_address("eth0:ip").is_err());
        define_address(
            "lan",
            AddressEntry {
                ip: Some(([10, 0, 0, 0], 8)),
                ether: None,
            },
        );
        assert_eq!(ip_prefix("lan").unwrap(), ([10, 0, 0, 0], [255, 0, 0, 0]));
        assert!(ip_address("lan").is_err());
        define_port("web", None, 8080);
        define_port("resolver", Some(17), 53);
        assert_eq!(ip_port("web", 6).unwrap(), 8080);
        assert_eq!(ip_port("resolver", 17).unwrap(), 53);
        assert!(ip_port("resolver", 6).is_err());
        // Without a PortInfo name: services, then Click's known ports.
        assert_eq!(ip_port("ssh", 17).unwrap(), 22);
        assert_eq!(ip_port("https", 6).unwrap(), 443);
        assert!(ip_port("no-such-service", 6).is_err());
        assert_eq!(ip_port("22", 6).unwrap(), 22);
        assert!(ip_port("70000", 6).is_err());
        let err = ip_address("eth1").unwrap_err();
        assert!(err.contains("AddressInfo"), "{err}");
        clear_addresses();
    }

    #[test]
    fn names_are_local_to_their_compound() {
        clear_addresses();
        set_scope("x");
        define_port("foo", Some(17), 79);
        define_address(
            "a",
            AddressEntry {
                ip: Some(([1, 1, 1, 1], 32)),
                ether: None,
            },
        );
        set_scope("c/PortInfo@2");
        define_port("foo", Some(17), 80);
        set_scope("c/d/UDPIPEncap@1");
        assert_eq!(ip_port("foo", 17).unwrap(), 80, "the compound's own name");
        assert_eq!(ip_address("a").unwrap(), [1, 1, 1, 1], "the top's, seen from inside");
        set_scope("UDPIPEncap@3");
        assert_eq!(
            ip_port("foo", 17).unwrap(),
            79,
            "the compound's name is not seen outside"
        );
        set_scope("e/x");
        assert_eq!(ip_port("foo", 17).unwrap(), 79);
        set_scope("");
        clear_addresses();
    }

    #[test]
    fn bandwidths_in_bits_and_bytes() {
        assert_eq!(bandwidth("1000").unwrap(), 1000.0);
        assert_eq!(bandwidth("8kbps").unwrap(), 1000.0);
        assert_eq!(bandwidth("1MBps").unwrap(), 1e6);
        assert_eq!(bandwidth("1Gbps").unwrap(), 1.25e8);
        assert!(bandwidth("1 furlong").is_err());
    }
}
