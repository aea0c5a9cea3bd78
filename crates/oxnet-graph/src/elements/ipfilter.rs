//! IP classification with tcpdump-like expressions, after Click's
//! documentation of IPClassifier (elements/ip/ipclassifier.hh) and
//! IPFilter (elements/ip/ipfilter.hh).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | IPClassifier(PATTERN, ...) | 1/- | push | a packet goes to the output of the first pattern it matches; no match: dropped |
//! | IPFilter(ACTION PATTERN, ...) | 1/- | push | the first matching pattern's ACTION: `allow` (output 0), an output number, or `deny`/`drop` |
//!
//! Tests read the packet from its network header mark (CheckIPHeader,
//! MarkIPHeader, FromIPSummaryDump set it) and its transport header
//! mark. A packet without the marks offers no IP or transport bytes: its
//! tests are all false, so it goes where a pattern such as `-`, `true`
//! or `not tcp` sends it (Click reads through a null header there).
//! A test on bytes the packet does not have is false, whatever its
//! operator (Click's tests ip/IPFilter-01 and -03).
//!
//! ## Pattern syntax (ipclassifier.hh)
//!
//! Primitives, each with an optional operator `==` (the default), `!=`,
//! and for numbers `<`, `>`, `<=`, `>=`, an optional mask `& MASK`
//! before the operator, and for numbers a range `LO-HI` as the value:
//!
//! - `[SRCORDST] host ADDR`, `[SRCORDST] net PREFIX` (`A.B.C.D/LEN`,
//!   `A.B.C.D mask M.M.M.M`, or an AddressInfo name); SRCORDST is `src`,
//!   `dst`, `src or dst` (the default) or `src and dst`.
//! - `[ip] proto PROTO`, or the protocol alone: `tcp`, `udp`, `icmp`,
//!   `igmp`, `ipip`, a number after `proto`.
//! - `[SRCORDST] [tcp|udp] port PORT` (a number or a name: `www`,
//!   `ssh`, ...); only first fragments of TCP or UDP packets match.
//! - `tcp opt FLAG` (also `tcp flags FLAG`, or the flag alone: `syn`,
//!   `fin`, `ack`, `rst`, `psh`, `urg`, or a number: all its bits set).
//! - `tcp win N`, `icmp type TYPE` (a number or a name: `echo`,
//!   `echo-reply`, `unreachable`, ...).
//! - `ip vers`, `ip hl`, `ip id`, `ip tos`, `ip dscp`, `ip ttl`,
//!   `ip len` with a number; `ip ect` (ECN capable), `ip ce`
//!   (congestion experienced), `ip frag`, `ip unfrag`.
//! - `ip[POS]`, `ip[POS:LEN]` (LEN 1 to 4), `transp[POS:LEN]`, and
//!   `tcp[..]`, `udp[..]`, `icmp[..]` (that protocol, first fragments).
//! - `true`, `false`; a whole pattern `-`, `any` or `all` matches all.
//!
//! Connectives: `and`/`&&` (also two primitives side by side), `or`/
//! `||`, `not`/`!`, `C ? A : B` (spaces around `:`), parentheses. A bare
//! value takes the kind of the primitive before it: `src port 80 or
//! 81` is `src port 80 or src port 81`; a bare address is a `host`, a
//! prefix a `net`, a name a port, protocol, flag or ICMP type.
//!
//! `!=`, `<=` and `>=` negate the comparison; with `src or dst` the
//! negation covers both: `host != H` is "neither address is H". The
//! port, ICMP type and TCP flag primitives also check the protocol, so
//! `src tcp port != 5` matches only TCP packets, unlike `not src tcp
//! port 5` (as Click documents).
//!
//! Not done: `ether host` (oxnet has no MAC header mark yet).

use super::classifier::{Base, Expr, Program, Rel, Splitter, Test};
use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::PacketBatch;

/// Port names (ipclassifier.hh's list, with the usual numbers).
const PORTS: &[(&str, u32)] = &[
    ("echo", 7),
    ("discard", 9),
    ("daytime", 13),
    ("chargen", 19),
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("dns", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("finger", 79),
    ("www", 80),
    ("http", 80),
    ("pop3", 110),
    ("sunrpc", 111),
    ("auth", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("snmp", 161),
    ("snmp-trap", 162),
    ("irc", 194),
    ("imap3", 220),
    ("https", 443),
    ("rip", 520),
    ("route", 520),
    ("imaps", 993),
    ("pop3s", 995),
];

/// IP protocol names (RFC 790's numbers).
const PROTOS: &[(&str, u32)] = &[("icmp", 1), ("igmp", 2), ("ipip", 4), ("tcp", 6), ("udp", 17)];

/// TCP flags (RFC 793 section 3.1, RFC 3168 for ECE and CWR).
const TCP_FLAGS: &[(&str, u32)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

const TCP: u32 = 6;
const UDP: u32 = 17;
const ICMP: u32 = 1;

/// An ICMP type by Click's name (RFC 792, RFC 1256; icmp.rs holds the
/// table).
fn icmp_type(word: &str) -> Option<u32> {
    super::icmp::TYPE_NAMES
        .iter()
        .find(|(n, _)| *n == word)
        .map(|&(_, v)| v.into())
}

fn lookup(table: &[(&str, u32)], word: &str) -> Option<u32> {
    table.iter().find(|(n, _)| *n == word).map(|&(_, v)| v)
}

/// Which addresses or ports a primitive looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SrcDst {
    Src,
    Dst,
    Or,
    And,
}

/// The transport protocol a primitive names (`tcp port`): its number.
type Transp = u32;

/// A field of the IP or transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    name: &'static str,
    base: Base,
    offset: u32,
    len: u8,
    shift: u8,
    /// The largest value (all the field's bits).
    full: u32,
    /// The protocol the field belongs to (checked with first fragment).
    proto: Option<u32>,
}

const fn ip_field(name: &'static str, offset: u32, len: u8, shift: u8, full: u32) -> Field {
    Field {
        name,
        base: Base::Network,
        offset,
        len,
        shift,
        full,
        proto: None,
    }
}

// RFC 791 section 3.1 (the IPv4 header); DSCP and ECN: RFC 2474, RFC 3168.
const VERS: Field = ip_field("ip vers", 0, 1, 4, 0xf);
const HL: Field = ip_field("ip hl", 0, 1, 0, 0xf);
const TOS: Field = ip_field("ip tos", 1, 1, 0, 0xff);
const DSCP: Field = ip_field("ip dscp", 1, 1, 2, 0x3f);
const ECN: Field = ip_field("ip ect", 1, 1, 0, 0x3);
const LEN: Field = ip_field("ip len", 2, 2, 0, 0xffff);
const ID: Field = ip_field("ip id", 4, 2, 0, 0xffff);
const TTL: Field = ip_field("ip ttl", 8, 1, 0, 0xff);
const PROTO: Field = ip_field("ip proto", 9, 1, 0, 0xff);
const TCP_WIN: Field = Field {
    name: "tcp win",
    base: Base::Transport,
    offset: 14,
    len: 2,
    shift: 0,
    full: 0xffff,
    proto: Some(TCP),
};
const ICMP_TYPE: Field = Field {
    name: "icmp type",
    base: Base::Transport,
    offset: 0,
    len: 1,
    shift: 0,
    full: 0xff,
    proto: Some(ICMP),
};

/// What a primitive tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Net,
    Proto,
    Port,
    TcpOpt,
    Field(Field),
    Frag,
    Unfrag,
    Ect,
    Ce,
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Net => "net",
            Kind::Proto => "proto",
            Kind::Port => "port",
            Kind::TcpOpt => "tcp opt",
            Kind::Field(f) => f.name,
            Kind::Frag => "ip frag",
            Kind::Unfrag => "ip unfrag",
            Kind::Ect => "ip ect",
            Kind::Ce => "ip ce",
        }
    }
}

/// A comparison operator as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Op {
    rel: Rel,
    negate: bool,
}

const EQ: Op = Op {
    rel: Rel::Eq,
    negate: false,
};

fn op_of(token: &str) -> Option<Op> {
    let (rel, negate) = match token {
        "==" | "=" => (Rel::Eq, false),
        "!=" => (Rel::Eq, true),
        ">" => (Rel::Gt, false),
        "<=" => (Rel::Gt, true),
        "<" => (Rel::Lt, false),
        ">=" => (Rel::Lt, true),
        _ => return None,
    };
    Some(Op { rel, negate })
}

/// A primitive's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    Int(u32),
    Range(u32, u32),
    /// Address and mask (host: all ones).
    Addr(u32, u32),
}

/// Splits a pattern into words and operators.
fn lex(text: &str) -> Result<Vec<String>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let two = b.get(i..i + 2).unwrap_or(&[]);
        let op: Option<&str> = match (c, two) {
            (_, b"==") => Some("=="),
            (_, b"!=") => Some("!="),
            (_, b"<=") => Some("<="),
            (_, b">=") => Some(">="),
            (_, b"&&") => Some("&&"),
            (_, b"||") => Some("||"),
            (b'=', _) => Some("="),
            (b'!', _) => Some("!"),
            (b'<', _) => Some("<"),
            (b'>', _) => Some(">"),
            (b'&', _) => Some("&"),
            (b'(', _) => Some("("),
            (b')', _) => Some(")"),
            (b'?', _) => Some("?"),
            (b':', _) => Some(":"),
            _ => None,
        };
        if c.is_ascii_whitespace() {
            i += 1;
        } else if let Some(op) = op {
            out.push(op.to_string());
            i += op.len();
        } else if c.is_ascii_alphanumeric() || b"._-/".contains(&c) {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"._-/".contains(&b[i])) {
                i += 1;
            }
            // `ip[4:2]`: the brackets belong to the word.
            if b.get(i) == Some(&b'[') {
                let close = b[i..]
                    .iter()
                    .position(|&x| x == b']')
                    .ok_or_else(|| format!("missing ']' in '{}'", &text[start..]))?;
                i += close + 1;
            }
            out.push(text[start..i].to_string());
        } else {
            return Err(format!("unexpected character '{}'", c as char));
        }
    }
    Ok(out)
}

/// What the previous primitive was, for bare values (`port 80 or 81`).
#[derive(Debug, Clone, Copy, Default)]
struct Prev {
    kind: Option<Kind>,
    srcdst: Option<SrcDst>,
    transp: Option<Transp>,
}

struct Parser<'a> {
    words: &'a [String],
    pos: usize,
    prev: Prev,
}

fn is_connective(w: &str) -> bool {
    matches!(w, "and" | "&&" | "or" | "||" | ")" | "?" | ":")
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.words.get(self.pos).map(String::as_str)
    }
    fn peek_at(&self, k: usize) -> Option<&'a str> {
        self.words.get(self.pos + k).map(String::as_str)
    }
    fn next(&mut self) -> Option<&'a str> {
        let w = self.peek();
        self.pos += usize::from(w.is_some());
        w
    }

    /// expr := or [ '?' expr ':' expr ]
    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.or()?;
        if self.peek() != Some("?") {
            return Ok(c);
        }
        self.pos += 1;
        let a = self.expr()?;
        if self.next() != Some(":") {
            return Err("missing ':' after '?'".into());
        }
        let b = self.expr()?;
        Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)))
    }

    /// or := and { ('or' | '||') and }
    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while matches!(self.peek(), Some("or" | "||")) {
            self.pos += 1;
            e = Expr::or(e, self.and()?);
        }
        Ok(e)
    }

    /// and := factor { ['and' | '&&'] factor }
    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.factor()?;
        loop {
            match self.peek() {
                Some("and" | "&&") => self.pos += 1,
                Some(w) if !is_connective(w) => {}
                _ => return Ok(e),
            }
            e = Expr::and(e, self.factor()?);
        }
    }

    /// factor := ('not' | '!') factor | '(' expr ')' | primitive
    fn factor(&mut self) -> Result<Expr, String> {
        match self.peek() {
            None => Err("missing expression at the end".into()),
            Some("not" | "!") => {
                self.pos += 1;
                Ok(Expr::negation(self.factor()?))
            }
            Some("(") => {
                self.pos += 1;
                let e = self.expr()?;
                if self.next() != Some(")") {
                    return Err("missing ')'".into());
                }
                Ok(e)
            }
            Some(w) if is_connective(w) => Err(format!("unexpected '{w}'")),
            Some(_) => self.primitive(),
        }
    }

    fn primitive(&mut self) -> Result<Expr, String> {
        // [src | dst | src or dst | src and dst]
        let mut srcdst = None;
        let sd = |w: Option<&str>| match w {
            Some("src") => Some(SrcDst::Src),
            Some("dst" | "dest") => Some(SrcDst::Dst),
            _ => None,
        };
        if let Some(first) = sd(self.peek()) {
            self.pos += 1;
            srcdst = Some(first);
            if let (Some(c @ ("or" | "and")), Some(second)) = (self.peek(), sd(self.peek_at(1))) {
                if second == first {
                    return Err("'src' or 'dst' specified twice".into());
                }
                srcdst = Some(if c == "or" { SrcDst::Or } else { SrcDst::And });
                self.pos += 2;
            }
        }
        // `ip` before a type word is just syntax.
        if self.peek() == Some("ip") && self.peek_at(1).is_some_and(|w| type_word(w, None).is_some()) {
            self.pos += 1;
        }
        // A transport protocol: `tcp port`, `icmp type`, or alone.
        let mut transp = None;
        while let Some(p) = self.peek().and_then(|w| lookup(PROTOS, w)) {
            if transp.is_some_and(|t| t != p) {
                return Err("transport protocol specified twice".into());
            }
            transp = Some(p);
            self.pos += 1;
        }
        let mut kind = None;
        if let Some(w) = self.peek() {
            if sd(Some(w)).is_some() && srcdst.is_some() {
                return Err("'src' or 'dst' specified twice".into());
            }
            if let Some(k) = type_word(w, transp) {
                self.pos += 1;
                kind = Some(k?);
            } else if w == "true" || w == "false" {
                if srcdst.is_some() || transp.is_some() {
                    return Err(format!("'{w}' takes no qualifiers"));
                }
                self.pos += 1;
                return Ok(if w == "true" { Expr::True } else { Expr::False });
            }
        }
        // [& MASK] [OP]
        let mut mask = None;
        if self.peek() == Some("&") {
            self.pos += 1;
            let m = self.next().ok_or("mask missing after '&'")?;
            // A number, or an address for host and net masks.
            let v = match args::unsigned(m) {
                Ok(v) => u32::try_from(v).ok(),
                Err(_) => args::ip_address(m).ok().map(u32::from_be_bytes),
            };
            mask = Some(v.ok_or_else(|| format!("'{m}' is not a mask"))?);
        }
        let mut op = None;
        if let Some(o) = self.peek().and_then(op_of) {
            self.pos += 1;
            op = Some(o);
        }
        let value_here = self
            .peek()
            .filter(|w| !is_connective(w) && *w != "(" && op_of(w).is_none());
        let explicit = kind.is_some();
        // The value, and the kind if no type word gave it.
        let mut value = None;
        match kind {
            Some(Kind::Ect) if op.is_none() && mask.is_none() && value_here.and_then(number).is_none() => {}
            Some(k @ (Kind::Frag | Kind::Unfrag | Kind::Ce)) => {
                if mask.is_some() || value_here.is_some_and(|w| op.is_some() || number(w).is_some()) {
                    return Err(format!("'{}' directive takes no data", k.name()));
                }
            }
            Some(k) => {
                let Some(w) = value_here else {
                    return Err(missing(k));
                };
                self.pos += 1;
                value = Some(self.value_of(k, w)?);
            }
            None => {
                let Some(w) = value_here else {
                    if let Some(p) = transp {
                        if srcdst.is_some() {
                            return Err(format!("'src' or 'dst' is meaningless with '{}'", proto_name(p)));
                        }
                        self.prev = Prev {
                            kind: Some(Kind::Proto),
                            srcdst: None,
                            transp,
                        };
                        return Ok(proto_is(p));
                    }
                    return Err(match self.peek() {
                        Some(w) => format!("unexpected '{w}'"),
                        None => "partial directive at the end".into(),
                    });
                };
                self.pos += 1;
                let (k, v) = self.bare_value(w, transp)?;
                kind = Some(k);
                value = Some(v);
            }
        }
        let kind = kind.expect("set above");
        if !explicit {
            // Click's inheritance: a primitive without a type word takes
            // the qualifiers of the one before.
            if matches!(kind, Kind::Host | Kind::Net | Kind::Port) && srcdst.is_none() {
                srcdst = self.prev.srcdst;
            }
            if kind == Kind::Port && transp.is_none() {
                transp = self.prev.transp;
            }
        }
        self.prev = Prev {
            kind: Some(kind),
            srcdst,
            transp,
        };
        build(kind, srcdst, transp, mask, op, value)
    }

    /// A value after a type word.
    fn value_of(&mut self, kind: Kind, w: &str) -> Result<Value, String> {
        match kind {
            Kind::Host => args::ip_address(w)
                .map(|a| Value::Addr(u32::from_be_bytes(a), u32::MAX))
                .map_err(|_| format!("'{w}' is not an IP address")),
            Kind::Net => self.prefix(w).ok_or_else(|| format!("'{w}' is not an IP prefix")),
            Kind::Proto => number(w)
                .or_else(|| lookup(PROTOS, w).map(Value::Int))
                .ok_or_else(|| format!("'{w}' is not an IP protocol")),
            Kind::Port => number(w)
                .or_else(|| lookup(PORTS, w).map(Value::Int))
                .ok_or_else(|| format!("'{w}' is not a port")),
            Kind::TcpOpt => number(w)
                .or_else(|| lookup(TCP_FLAGS, w).map(Value::Int))
                .ok_or_else(|| format!("'{w}' is not a TCP flag")),
            Kind::Field(f) if f.name == "icmp type" => number(w)
                .or_else(|| icmp_type(w).map(Value::Int))
                .ok_or_else(|| format!("'{w}' is not an ICMP type")),
            _ => number(w).ok_or_else(|| format!("'{w}' is not a number")),
        }
    }

    /// `A.B.C.D/LEN`, `A.B.C.D mask M`, or an AddressInfo name.
    fn prefix(&mut self, w: &str) -> Option<Value> {
        if self.peek() == Some("mask") {
            let addr = args::ip_address(w).ok()?;
            let m = args::ip_address(self.peek_at(1)?).ok()?;
            self.pos += 2;
            let m = u32::from_be_bytes(m);
            return Some(Value::Addr(u32::from_be_bytes(addr) & m, m));
        }
        let (addr, m) = args::ip_prefix(w).ok()?;
        let m = u32::from_be_bytes(m);
        Some(Value::Addr(u32::from_be_bytes(addr) & m, m))
    }

    /// A value with no type word before it: its kind is told by its form.
    fn bare_value(&mut self, w: &str, transp: Option<Transp>) -> Result<(Kind, Value), String> {
        if let Some(v) = number(w) {
            let kind = match self.prev.kind {
                Some(k @ (Kind::Field(_) | Kind::Proto | Kind::Port)) => k,
                _ => return Err(format!("specify header field or 'port' before '{w}'")),
            };
            return Ok((kind, v));
        }
        if w.contains('/') || self.peek() == Some("mask") {
            if let Some(v) = self.prefix(w) {
                return Ok((Kind::Net, v));
            }
        }
        // An address (or AddressInfo name) is a host, as Click tries
        // the address before the prefix.
        if let Ok(a) = args::ip_address(w) {
            return Ok((Kind::Host, Value::Addr(u32::from_be_bytes(a), u32::MAX)));
        }
        if let Some(v) = self.prefix(w) {
            return Ok((Kind::Net, v));
        }
        // Names: Click's lookup keeps those the qualifiers allow.
        let tcpudp = matches!(transp, None | Some(TCP | UDP));
        let mut found: Vec<(Kind, u32, String)> = Vec::new();
        if transp.is_none() {
            if let Some(v) = lookup(PROTOS, w) {
                found.push((Kind::Proto, v, format!("proto {w}")));
            }
        }
        if tcpudp {
            if let Some(v) = lookup(PORTS, w) {
                found.push((Kind::Port, v, format!("port {w}")));
            }
        }
        if matches!(transp, None | Some(TCP)) {
            if let Some(v) = lookup(TCP_FLAGS, w) {
                found.push((Kind::TcpOpt, v, format!("tcp opt {w}")));
            }
        }
        if matches!(transp, None | Some(ICMP)) {
            if let Some(v) = icmp_type(w) {
                found.push((Kind::Field(ICMP_TYPE), v, format!("icmp type {w}")));
            }
        }
        match found.len() {
            0 => Err(format!("unknown word '{w}'")),
            1 => Ok((found[0].0, Value::Int(found[0].1))),
            _ => {
                let tries: Vec<String> = found.iter().map(|f| format!("'{}'", f.2)).collect();
                Err(format!("'{w}' is ambiguous; try {}", tries.join(", ")))
            }
        }
    }
}

fn proto_name(p: u32) -> String {
    PROTOS
        .iter()
        .find(|(_, v)| *v == p)
        .map_or_else(|| format!("ip proto {p}"), |(n, _)| n.to_string())
}

fn missing(kind: Kind) -> String {
    match kind {
        Kind::Host => "IP address missing in 'host' directive".into(),
        Kind::Net => "IP prefix missing in 'net' directive".into(),
        Kind::Port => "port number missing in 'port' directive".into(),
        Kind::Proto => "IP protocol missing in 'proto' directive".into(),
        Kind::TcpOpt => "TCP flag missing in 'tcp opt' directive".into(),
        k => format!("value missing in '{}' directive", k.name()),
    }
}

/// A number (`80`, `0x50`) or a range (`10-20`).
fn number(w: &str) -> Option<Value> {
    let n = |s: &str| args::unsigned(s).ok().and_then(|v| u32::try_from(v).ok());
    if let Some(v) = n(w) {
        return Some(Value::Int(v));
    }
    let (lo, hi) = w.split_once('-')?;
    Some(Value::Range(n(lo)?, n(hi)?))
}

/// A type word (`host`, `port`, `ttl`, `ip[4:2]`, ...), if `w` is one.
fn type_word(w: &str, transp: Option<Transp>) -> Option<Result<Kind, String>> {
    let kind = match w {
        "host" => Kind::Host,
        "net" => Kind::Net,
        "proto" => Kind::Proto,
        "port" => Kind::Port,
        "opt" | "flags" => Kind::TcpOpt,
        "win" => Kind::Field(TCP_WIN),
        "type" => Kind::Field(ICMP_TYPE),
        "vers" => Kind::Field(VERS),
        "hl" => Kind::Field(HL),
        "tos" => Kind::Field(TOS),
        "dscp" => Kind::Field(DSCP),
        "id" => Kind::Field(ID),
        "ttl" => Kind::Field(TTL),
        "len" => Kind::Field(LEN),
        "frag" => Kind::Frag,
        "unfrag" => Kind::Unfrag,
        "ect" => Kind::Ect,
        "ce" => Kind::Ce,
        _ => {
            let (name, inner) = w.strip_suffix(']')?.split_once('[')?;
            return Some(bracket_field(name, inner, transp));
        }
    };
    Some(Ok(kind))
}

/// `ip[POS]`, `ip[POS:LEN]`, `transp[..]`, `tcp[..]`, `udp[..]`, `icmp[..]`.
fn bracket_field(name: &str, inner: &str, transp: Option<Transp>) -> Result<Kind, String> {
    let (base, proto, label): (Base, Option<u32>, &'static str) = match name {
        "ip" => (Base::Network, None, "ip[...]"),
        "transp" => (Base::Transport, None, "transp[...]"),
        "tcp" => (Base::Transport, Some(TCP), "tcp[...]"),
        "udp" => (Base::Transport, Some(UDP), "udp[...]"),
        "icmp" => (Base::Transport, Some(ICMP), "icmp[...]"),
        _ => return Err(format!("unknown header '{name}[...]' (ip, transp, tcp, udp, icmp)")),
    };
    let proto = match (proto, transp) {
        (Some(p), Some(q)) if p != q => return Err("transport protocol specified twice".into()),
        (None, Some(q)) if base == Base::Transport => Some(q),
        (p, _) => p,
    };
    let bad = || format!("bad field '{name}[{inner}]' (POS or POS:LEN, LEN 1 to 4)");
    let (pos, len) = match inner.split_once(':') {
        Some((p, l)) => (p, l),
        None => (inner, "1"),
    };
    let pos = args::unsigned(pos.trim()).map_err(|_| bad())?;
    let len = args::unsigned(len.trim()).map_err(|_| bad())?;
    if !(1..=4).contains(&len) || pos > 0xffff {
        return Err(bad());
    }
    let full = if len == 4 { u32::MAX } else { (1u32 << (8 * len)) - 1 };
    Ok(Kind::Field(Field {
        name: label,
        base,
        offset: pos as u32,
        len: len as u8,
        shift: 0,
        full,
        proto,
    }))
}

/// The first fragment (or an unfragmented packet): offset 0 (RFC 791
/// section 3.1), where the transport header is.
fn first_fragment() -> Expr {
    Expr::Test(Test::eq(Base::Network, 6, 2, 0x1fff, 0))
}

fn proto_is(p: u32) -> Expr {
    Expr::Test(Test::eq(Base::Network, 9, 1, 0xff, p))
}

/// `FIELD [& mask] op value` so that missing bytes make it false.
fn compare(f: &Field, mask: Option<u32>, op: Op, value: Value) -> Result<Expr, String> {
    let m = mask.unwrap_or(f.full);
    if m & f.full != m {
        return Err(format!("mask {m:#x} out of range (0-{:#x})", f.full));
    }
    let test = |rel: Rel, v: u32, negate: bool| {
        Expr::Test(Test {
            base: f.base,
            offset: f.offset,
            len: f.len,
            shift: f.shift,
            mask: m,
            rel,
            value: v,
            negate,
        })
    };
    match value {
        Value::Int(v) => {
            if op.rel == Rel::Eq && v > f.full {
                return Err(format!("value {v} out of range (0-{})", f.full));
            }
            Ok(test(op.rel, v, op.negate))
        }
        Value::Range(lo, hi) => {
            if op.rel != Rel::Eq {
                return Err(format!("a range ({lo}-{hi}) takes '==' or '!=', not a relation"));
            }
            if lo > hi {
                return Err(format!("empty range {lo}-{hi}"));
            }
            if hi > f.full {
                return Err(format!("value {hi} out of range (0-{})", f.full));
            }
            // lo <= v <= hi, or for != v < lo or v > hi.
            Ok(if op.negate {
                Expr::or(test(Rel::Lt, lo, false), test(Rel::Gt, hi, false))
            } else {
                Expr::and(test(Rel::Lt, lo, true), test(Rel::Gt, hi, true))
            })
        }
        Value::Addr(..) => Err(format!("'{}' wants a number, not an address", f.name)),
    }
}

/// Source and destination versions of a test, combined as SRCORDST says;
/// a negated operator negates the whole (De Morgan: or becomes and).
fn both(sd: SrcDst, op: Op, src: Expr, dst: Expr) -> Expr {
    match (sd, op.negate) {
        (SrcDst::Src, _) => src,
        (SrcDst::Dst, _) => dst,
        (SrcDst::Or, false) | (SrcDst::And, true) => Expr::or(src, dst),
        (SrcDst::And, false) | (SrcDst::Or, true) => Expr::and(src, dst),
    }
}

fn build(
    kind: Kind,
    srcdst: Option<SrcDst>,
    transp: Option<Transp>,
    mask: Option<u32>,
    op: Option<Op>,
    value: Option<Value>,
) -> Result<Expr, String> {
    let has_op = op.is_some();
    let op = op.unwrap_or(EQ);
    let sd = srcdst.unwrap_or(SrcDst::Or);
    let relational = op.rel != Rel::Eq;
    let int = |v: Option<Value>| match v {
        Some(Value::Int(v)) => Ok(v),
        _ => Err(format!("'{}' wants one number", kind.name())),
    };
    if srcdst.is_some() && !matches!(kind, Kind::Host | Kind::Net | Kind::Port) {
        return Err(format!("'src' or 'dst' is meaningless with '{}'", kind.name()));
    }
    if let (
        Some(_),
        Kind::Host
        | Kind::Net
        | Kind::Field(Field {
            base: Base::Network, ..
        }),
    ) = (transp, kind)
    {
        return Err(format!("a transport protocol is meaningless with '{}'", kind.name()));
    }
    Ok(match kind {
        Kind::Host | Kind::Net => {
            if relational {
                return Err(format!("can't use relational operators with '{}'", kind.name()));
            }
            let Some(Value::Addr(addr, net_mask)) = value else {
                return Err(missing(kind));
            };
            let m = mask.unwrap_or(net_mask);
            let at = |offset| {
                let t = Test::eq(Base::Network, offset, 4, m, addr & m);
                Expr::Test(if op.negate { t.negated() } else { t })
            };
            // RFC 791: source address at byte 12, destination at 16.
            both(sd, op, at(12), at(16))
        }
        Kind::Proto => {
            let v = int(value)?;
            compare(&PROTO, mask, op, Value::Int(v))?
        }
        Kind::Port => {
            let protos = match transp {
                None => Expr::or(proto_is(TCP), proto_is(UDP)),
                Some(p @ (TCP | UDP)) => proto_is(p),
                Some(p) => return Err(format!("bad protocol '{}' for 'port'", proto_name(p))),
            };
            let v = value.ok_or_else(|| missing(kind))?;
            // RFC 793 / RFC 768: source port at byte 0, destination at 2.
            let port = |offset| Field {
                name: "port",
                base: Base::Transport,
                offset,
                len: 2,
                shift: 0,
                full: 0xffff,
                proto: None,
            };
            let ports = both(sd, op, compare(&port(0), mask, op, v)?, compare(&port(2), mask, op, v)?);
            Expr::all([first_fragment(), protos, ports])
        }
        Kind::TcpOpt => {
            if !matches!(transp, None | Some(TCP)) {
                return Err("bad protocol for 'tcp opt'".into());
            }
            if has_op || mask.is_some() {
                return Err("can't use relational operators or masks with 'tcp opt'".into());
            }
            let flags = int(value)?;
            if flags > 0xff {
                return Err(format!("value {flags} out of range (0-255)"));
            }
            // RFC 793 section 3.1: the flags are byte 13.
            let test = Test::eq(Base::Transport, 13, 1, flags, flags);
            Expr::all([first_fragment(), proto_is(TCP), Expr::Test(test)])
        }
        Kind::Field(f) => {
            let v = value.ok_or_else(|| missing(kind))?;
            let cmp = compare(&f, mask, op, v)?;
            match f.proto {
                Some(p) => {
                    if let Some(t) = transp {
                        if t != p && f.name != "transp[...]" {
                            return Err(format!("bad protocol for '{}'", f.name));
                        }
                    }
                    Expr::all([first_fragment(), proto_is(p), cmp])
                }
                None => cmp,
            }
        }
        Kind::Frag | Kind::Unfrag => {
            // RFC 791: more-fragments flag and fragment offset.
            let t = Test::eq(Base::Network, 6, 2, 0x3fff, 0);
            let frag = (kind == Kind::Frag) != op.negate;
            Expr::Test(if frag { t.negated() } else { t })
        }
        Kind::Ect => match value {
            // RFC 3168 section 5: ECT(0), ECT(1) or CE, not Not-ECT.
            None => Expr::Test(Test::eq(Base::Network, 1, 1, 0x3, 0).negated()),
            Some(v) => compare(&ECN, mask, op, v)?,
        },
        Kind::Ce => {
            let t = Test::eq(Base::Network, 1, 1, 0x3, 0x3);
            Expr::Test(if op.negate { t.negated() } else { t })
        }
    })
}

/// Parses one IPClassifier pattern into an expression.
pub fn parse_pattern(text: &str) -> Result<Expr, String> {
    let words = lex(text)?;
    if words.is_empty() {
        return Err("empty pattern".into());
    }
    if words.len() == 1 && matches!(words[0].as_str(), "-" | "any" | "all") {
        return Ok(Expr::True);
    }
    let mut p = Parser {
        words: &words,
        pos: 0,
        prev: Prev::default(),
    };
    let e = p.expr()?;
    match p.peek() {
        None => Ok(e),
        Some(w) => Err(format!("unexpected '{w}'")),
    }
}

/// Parses an IPFilter rule: the action (output or drop) and the pattern.
pub fn parse_rule(text: &str) -> Result<(Expr, Option<u32>), String> {
    let text = text.trim();
    let (action, pattern) = text.split_once(|c: char| c.is_ascii_whitespace()).unwrap_or((text, ""));
    let output = match action {
        "allow" => Some(0),
        "deny" | "drop" => None,
        n => match args::unsigned(n) {
            Ok(k) if k < u64::from(u32::MAX) => Some(k as u32),
            _ => return Err(format!("unknown action '{n}' (allow, deny, drop or an output number)")),
        },
    };
    Ok((parse_pattern(pattern)?, output))
}

/// IPClassifier and IPFilter: see the module comment.
///
/// Arguments: IPClassifier, one pattern per output; IPFilter, one
/// `ACTION PATTERN` rule each. Handlers: `program` (the compiled decision
/// graph), `drops` (packets no pattern matched, dropped by a rule, or
/// sent to an output that is not connected).
pub struct IpFilter {
    class: &'static str,
    program: Program,
    split: Splitter,
}

impl IpFilter {
    pub fn new(class: &'static str) -> IpFilter {
        IpFilter {
            class,
            program: Program::default(),
            split: Splitter::default(),
        }
    }
}

impl Element for IpFilter {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let mut rules = Vec::new();
        for (k, text) in a.take_raw().iter().enumerate() {
            let rule = if self.class == "IPFilter" {
                parse_rule(text)
            } else {
                parse_pattern(text).map(|e| (e, Some(k as u32)))
            };
            rules.push(rule.map_err(|e| format!("pattern {k}: {e}"))?);
        }
        self.program = Program::compile(&rules);
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        self.split.push(&self.program, batch, ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("program", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.split.drops.to_string()),
            "program" => Some(self.program.listing()),
            _ => None,
        }
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["IPClassifier", "IPFilter"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    match class {
        "IPClassifier" => Some(Box::new(IpFilter::new("IPClassifier"))),
        "IPFilter" => Some(Box::new(IpFilter::new("IPFilter"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::classifier::View;
    use super::*;

    /// An IPv4 packet with a 20-byte header at offset 0 and a transport
    /// header after it (RFC 791, 793).
    #[derive(Clone, Debug)]
    struct Ip {
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        flags: u8,
        tos: u8,
        ttl: u8,
        id: u16,
        frag: u16,
        len: usize,
    }

    impl Default for Ip {
        fn default() -> Ip {
            Ip {
                proto: 6,
                src: [10, 0, 0, 1],
                dst: [192, 168, 1, 2],
                sport: 1234,
                dport: 80,
                flags: 0x10,
                tos: 0,
                ttl: 64,
                id: 7,
                frag: 0,
                len: 40,
            }
        }
    }

    impl Ip {
        fn bytes(&self) -> Vec<u8> {
            let mut p = vec![0u8; 40];
            p[0] = 0x45;
            p[1] = self.tos;
            p[2..4].copy_from_slice(&40u16.to_be_bytes());
            p[4..6].copy_from_slice(&self.id.to_be_bytes());
            p[6..8].copy_from_slice(&self.frag.to_be_bytes());
            p[8] = self.ttl;
            p[9] = self.proto;
            p[12..16].copy_from_slice(&self.src);
            p[16..20].copy_from_slice(&self.dst);
            p[20..22].copy_from_slice(&self.sport.to_be_bytes());
            p[22..24].copy_from_slice(&self.dport.to_be_bytes());
            p[33] = self.flags;
            p[34..36].copy_from_slice(&512u16.to_be_bytes());
            p.truncate(self.len);
            p
        }
    }

    fn view(p: &[u8]) -> View<'_> {
        View {
            data: p,
            network: Some(0),
            transport: Some(20),
        }
    }

    /// Whether `pattern` matches, checked both ways (direct and compiled).
    fn m(pattern: &str, ip: &Ip) -> bool {
        let e = parse_pattern(pattern).unwrap_or_else(|err| panic!("{pattern}: {err}"));
        let bytes = ip.bytes();
        let direct = e.eval(&view(&bytes));
        let prog = Program::compile(&[(e, Some(0))]);
        assert_eq!(prog.classify(&view(&bytes)) == Some(0), direct, "{pattern}");
        direct
    }

    fn err(pattern: &str) -> String {
        parse_pattern(pattern).map(|_| ()).unwrap_err()
    }

    #[test]
    fn hosts_and_nets_with_src_and_dst() {
        let p = Ip::default();
        assert!(m("host 10.0.0.1", &p));
        assert!(m("ip host 192.168.1.2", &p));
        assert!(m("src host 10.0.0.1", &p));
        assert!(!m("dst host 10.0.0.1", &p));
        assert!(m("dst 192.168.1.2", &p));
        assert!(!m("src and dst host 10.0.0.1", &p));
        assert!(m("src or dst host 192.168.1.2", &p));
        assert!(m("host != 1.2.3.4", &p));
        assert!(!m("host != 10.0.0.1", &p), "neither address may be it");
        assert!(m("src host != 192.168.1.2", &p));
        assert!(m("net 10.0.0.0/8", &p));
        assert!(m("10.0.0.0/24", &p));
        assert!(!m("src net 192.168.0.0/16", &p));
        assert!(m("dst net 192.168.0.0 mask 255.255.0.0", &p));
        assert!(m("src net 10.9.9.9/8", &p), "host bits are ignored");
        assert!(m("src host & 255.0.0.0 == 10.0.0.0", &p), "mask before value");
        assert!(m("10.0.0.1", &p));
        assert!(m("src host 1.1.1.1 or 10.0.0.1", &p), "a bare address inherits src");
        assert!(!m("src host 1.1.1.1 or 192.168.1.2", &p));
    }

    #[test]
    fn addressinfo_names_are_hosts_or_nets() {
        use crate::args::{clear_addresses, define_address, AddressEntry};
        clear_addresses();
        // An entry with one address, whether AddressEntry keeps it with
        // its prefix length or apart from the prefix.
        trait FromAddr {
            fn from_addr(a: [u8; 4]) -> Self;
        }
        impl FromAddr for [u8; 4] {
            fn from_addr(a: [u8; 4]) -> Self {
                a
            }
        }
        impl FromAddr for ([u8; 4], u8) {
            fn from_addr(a: [u8; 4]) -> Self {
                (a, 32)
            }
        }
        let entry = |addr: [u8; 4]| AddressEntry {
            ip: Some(FromAddr::from_addr(addr)),
            ..AddressEntry::default()
        };
        define_address("SERVER", entry([192, 168, 1, 2]));
        define_address("CLIENT", entry([10, 0, 0, 1]));
        let p = Ip::default();
        assert!(m("dst host SERVER", &p) && m("dst SERVER", &p) && !m("src SERVER", &p));
        assert!(m("CLIENT and SERVER", &p) && m("src net CLIENT", &p));
        assert!(m("allow src CLIENT && dst SERVER".trim_start_matches("allow "), &p));
        clear_addresses();
    }

    #[test]
    fn protocols_ports_flags_and_icmp_types() {
        let tcp = Ip::default();
        let udp = Ip {
            proto: 17,
            ..Ip::default()
        };
        let icmp = Ip {
            proto: 1,
            sport: 0x0800,
            ..Ip::default()
        };
        assert!(m("tcp", &tcp) && !m("tcp", &udp));
        assert!(m("ip proto tcp", &tcp) && m("proto 17", &udp) && m("udp", &udp));
        assert!(m("ip proto != 6", &udp) && !m("ip proto != 6", &tcp));
        assert!(m("ip proto < 10", &tcp) && !m("ip proto < 10", &udp));
        assert!(m("tcp or udp", &udp) && !m("tcp || udp", &icmp));
        assert!(m("port 80", &tcp) && m("port 80", &udp) && !m("port 80", &icmp));
        assert!(m("port www", &tcp) && m("www", &tcp) && m("dst port http", &tcp));
        assert!(m("tcp port 80", &tcp) && !m("udp port 80", &tcp));
        assert!(m("src port 1234", &tcp) && !m("src port 80", &tcp));
        assert!(m("dst tcp port > 79", &tcp) && !m("dst port > 80", &tcp));
        assert!(m("dst port >= 80", &tcp) && m("dst port <= 80", &tcp) && !m("dst port < 80", &tcp));
        assert!(m("src port 1000-2000", &tcp) && !m("src port 1235-2000", &tcp));
        assert!(m("src port != 1-1000", &tcp));
        assert!(m("port != 5", &tcp) && !m("port != 5", &icmp), "!= checks the protocol");
        assert!(m("not port 5", &icmp), "not does not");
        assert!(m("src port 80 or 1234", &tcp), "81 takes 'src port' from before");
        assert!(!m("src port 80 or 81", &tcp));
        assert!(m("dst port & 0xfff0 == 80", &tcp));
        assert!(m("tcp opt ack", &tcp) && m("ack", &tcp) && !m("syn", &tcp));
        assert!(m("tcp flags ack", &tcp) && !m("ack", &udp));
        let finack = Ip {
            flags: 0x11,
            ..Ip::default()
        };
        assert!(m("fin ack", &finack) && !m("fin ack", &tcp));
        assert!(m("tcp opt 0x11", &finack) && !m("tcp opt 0x11", &tcp));
        assert!(m("tcp win 512", &tcp) && m("tcp win > 100", &tcp) && !m("tcp win 512", &udp));
        assert!(m("icmp type echo", &icmp) && m("icmp type 8", &icmp) && m("icmp type != 4", &icmp));
        assert!(!m("icmp type != 4", &tcp), "ICMP only");
        assert!(m("icmp type < echo-reply or icmp type > 5", &icmp));
        assert!(m("icmp echo", &icmp), "'icmp' settles echo's meaning");
        assert!(m(
            "tcp port echo",
            &Ip {
                dport: 7,
                ..Ip::default()
            }
        ));
    }

    #[test]
    fn transport_tests_match_first_fragments_only() {
        let later = Ip {
            frag: 0x0010,
            ..Ip::default()
        };
        let first = Ip {
            frag: 0x2000,
            ..Ip::default()
        };
        assert!(!m("port 80", &later) && m("port 80", &first));
        assert!(!m("ack", &later) && !m("tcp[13] & 16 != 0", &later));
        assert!(m("transp[13] & 16 != 0", &later), "transp[] is just bytes");
        assert!(m("ip frag", &later) && m("frag", &first) && !m("ip frag", &Ip::default()));
        assert!(m("ip unfrag", &Ip::default()) && m("unfrag", &Ip::default()) && !m("unfrag", &later));
    }

    #[test]
    fn ip_header_fields() {
        let p = Ip {
            tos: 0xb9,
            ttl: 3,
            id: 0x1234,
            ..Ip::default()
        };
        assert!(m("ip vers 4", &p) && !m("ip vers 6", &p) && m("vers < 5", &p));
        assert!(m("ip hl 5", &p) && m("hl > 4", &p));
        assert!(m("ip id 0x1234", &p) && m("id 4660", &p));
        assert!(m("ip tos 0xb9", &p) && m("ip tos & 0xf0 == 0xb0", &p));
        assert!(m("ip dscp 46", &p) && !m("ip dscp 47", &p));
        assert!(m("ip ect", &p) && m("ip ect 1", &p) && !m("ip ce", &p));
        assert!(
            m(
                "ip ce",
                &Ip {
                    tos: 3,
                    ..Ip::default()
                }
            ) && !m("ip ect", &Ip::default())
        );
        assert!(m("ip ttl 3", &p) && m("ip ttl < 4", &p) && !m("ttl > 3", &p));
        assert!(m("ip len 40", &p) && m("ip len 30-50", &p));
        assert!(m("ip[8] == 3", &p) && m("ip[4:2] = 0x1234", &p) && m("ip[12:4] 0x0a000001", &p));
        assert!(m("ip[1]&0xf0==0xb0", &p));
        assert!(m("transp[0:2] 1234", &p) && m("tcp[2:2] 80", &p) && !m("udp[2:2] 80", &p));
        assert!(m("ip ttl 3 or 4", &p), "a bare number takes the field before");
    }

    #[test]
    fn connectives_and_constants() {
        let p = Ip::default();
        assert!(m("true", &p) && !m("false", &p) && m("-", &p) && m("any", &p) && m("all", &p));
        assert!(m("tcp and port 80", &p) && m("tcp && port 80", &p) && m("tcp port 80", &p));
        assert!(!m("udp and port 80", &p) && m("udp or port 80", &p));
        assert!(m("not udp", &p) && m("!udp", &p) && m("! udp", &p) && !m("not tcp", &p));
        assert!(m("(udp or tcp) and port 80", &p) && !m("udp or (tcp and port 81)", &p));
        assert!(m("tcp ? port 80 : false", &p) && !m("udp ? true : port 81", &p));
        assert!(
            m("not not tcp", &p) && m("udp or tcp and port 80", &p),
            "and binds tighter"
        );
    }

    #[test]
    fn bytes_a_packet_lacks_make_tests_false() {
        let short = Ip {
            len: 21,
            ..Ip::default()
        };
        assert!(!m("transp[1] & 128 == 0", &short));
        assert!(!m("transp[1] & 128 != 0", &short));
        assert!(m("not (transp[1] & 128 == 0)", &short));
        assert!(!m("src port != 5", &short));
        let no_header = View {
            data: &[0x45; 40],
            network: None,
            transport: None,
        };
        let e = parse_pattern("ip vers 4").unwrap();
        assert!(!e.eval(&no_header));
        assert_eq!(Program::compile(&[(e, Some(0))]).classify(&no_header), None);
    }

    #[test]
    fn ipfilter_actions() {
        assert_eq!(parse_rule("allow tcp").unwrap().1, Some(0));
        assert_eq!(parse_rule("deny tcp").unwrap().1, None);
        assert_eq!(parse_rule("drop all").unwrap(), (Expr::True, None));
        assert_eq!(parse_rule("3 -").unwrap(), (Expr::True, Some(3)));
        assert_eq!(
            parse_rule("accept tcp").unwrap_err(),
            "unknown action 'accept' (allow, deny, drop or an output number)"
        );
        assert_eq!(parse_rule("allow").unwrap_err(), "empty pattern");
        // The first matching rule wins; a drop rule stops the search.
        let rules: Vec<_> = ["drop src host 10.0.0.1 and udp", "1 udp", "allow -"]
            .iter()
            .map(|r| parse_rule(r).unwrap())
            .collect();
        let prog = Program::compile(&rules);
        let run = |ip: &Ip| prog.classify(&view(&ip.bytes()));
        assert_eq!(
            run(&Ip {
                proto: 17,
                ..Ip::default()
            }),
            None
        );
        assert_eq!(
            run(&Ip {
                proto: 17,
                src: [1, 1, 1, 1],
                ..Ip::default()
            }),
            Some(1)
        );
        assert_eq!(run(&Ip::default()), Some(0));
    }

    #[test]
    fn every_parse_error() {
        let cases: &[(&str, &str)] = &[
            ("", "empty pattern"),
            ("tcp $", "unexpected character '$'"),
            ("ip[4", "missing ']' in 'ip[4'"),
            ("(tcp", "missing ')'"),
            ("tcp)", "unexpected ')'"),
            ("tcp ? udp", "missing ':' after '?'"),
            ("tcp and", "missing expression at the end"),
            ("or tcp", "unexpected 'or'"),
            ("src src host 1.2.3.4", "'src' or 'dst' specified twice"),
            ("src or src host 1.2.3.4", "'src' or 'dst' specified twice"),
            ("tcp udp port 5", "transport protocol specified twice"),
            ("src true", "'true' takes no qualifiers"),
            ("port 80 & ", "mask missing after '&'"),
            ("ip ttl & x 5", "'x' is not a mask"),
            ("ip frag 5", "'ip frag' directive takes no data"),
            ("ip ce & 1", "'ip ce' directive takes no data"),
            ("host", "IP address missing in 'host' directive"),
            ("net", "IP prefix missing in 'net' directive"),
            ("port", "port number missing in 'port' directive"),
            ("ip proto", "IP protocol missing in 'proto' directive"),
            ("tcp opt", "TCP flag missing in 'tcp opt' directive"),
            ("ip ttl", "value missing in 'ip ttl' directive"),
            ("src tcp", "'src' or 'dst' is meaningless with 'tcp'"),
            ("==", "partial directive at the end"),
            ("== (", "unexpected '('"),
            ("host 1.2.3", "'1.2.3' is not an IP address"),
            ("net 1.2.3.4/40", "'1.2.3.4/40' is not an IP prefix"),
            ("proto xyz", "'xyz' is not an IP protocol"),
            ("port xyz", "'xyz' is not a port"),
            ("tcp opt xyz", "'xyz' is not a TCP flag"),
            ("icmp type xyz", "'xyz' is not an ICMP type"),
            ("ip ttl xyz", "'xyz' is not a number"),
            ("80", "specify header field or 'port' before '80'"),
            ("xyz", "unknown word 'xyz'"),
            ("echo", "'echo' is ambiguous; try 'port echo', 'icmp type echo'"),
            ("foo[1]", "unknown header 'foo[...]' (ip, transp, tcp, udp, icmp)"),
            ("ip[1:5] 0", "bad field 'ip[1:5]' (POS or POS:LEN, LEN 1 to 4)"),
            ("ip[x] 0", "bad field 'ip[x]' (POS or POS:LEN, LEN 1 to 4)"),
            ("udp tcp[1] 0", "transport protocol specified twice"),
            ("ip ttl & 0x100 1", "mask 0x100 out of range (0-0xff)"),
            ("ip ttl 256", "value 256 out of range (0-255)"),
            ("ip ttl > 1-2", "a range (1-2) takes '==' or '!=', not a relation"),
            ("ip ttl 5-2", "empty range 5-2"),
            ("ip ttl 5-256", "value 256 out of range (0-255)"),
            ("ip ttl 1.2.3.4", "'1.2.3.4' is not a number"),
            ("src ip ttl 4", "'src' or 'dst' is meaningless with 'ip ttl'"),
            ("tcp host 1.2.3.4", "a transport protocol is meaningless with 'host'"),
            ("host > 1.2.3.4", "can't use relational operators with 'host'"),
            ("net > 1.0.0.0/8", "can't use relational operators with 'net'"),
            ("ip proto 1-2", "'proto' wants one number"),
            ("icmp port 5", "bad protocol 'icmp' for 'port'"),
            ("udp opt syn", "bad protocol for 'tcp opt'"),
            (
                "tcp opt != syn",
                "can't use relational operators or masks with 'tcp opt'",
            ),
            ("tcp opt 256", "value 256 out of range (0-255)"),
            ("udp type 3", "bad protocol for 'icmp type'"),
        ];
        for (pattern, message) in cases {
            assert_eq!(&err(pattern), message, "pattern '{pattern}'");
        }
    }

    use proptest::prelude::*;

    /// Tests over the fields of [`Ip`] packets, random operators.
    fn arb_test() -> impl Strategy<Value = String> {
        let primitive = prop_oneof![
            Just("tcp".to_string()),
            Just("udp".to_string()),
            Just("ip frag".to_string()),
            Just("syn".to_string()),
            Just("ack".to_string()),
            Just("ip ect".to_string()),
            Just("ip ce".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            (0u32..4).prop_map(|k| format!("src host 10.0.0.{k}")),
            (0u32..4).prop_map(|k| format!("host != 10.0.0.{k}")),
            (0u32..4).prop_map(|k| format!("dst net 192.168.{k}.0/24")),
            (prop::sample::select(vec!["==", "!=", "<", ">", "<=", ">="]), 0u32..100)
                .prop_map(|(op, v)| format!("src port {op} {v}")),
            (prop::sample::select(vec!["==", "!=", "<", ">"]), 0u32..8).prop_map(|(op, v)| format!("ip ttl {op} {v}")),
            (0u32..4, 0u32..4).prop_map(|(lo, n)| format!("dst port {lo}-{}", lo + n)),
            (0u32..50, 0u32..256).prop_map(|(off, v)| format!("transp[{}] & 0x{:x} != 0", off % 40, v)),
            (0u32..44, 1u32..5, 0u32..3).prop_map(|(off, len, v)| format!("ip[{off}:{len}] > {v}")),
            (0u32..3).prop_map(|v| format!("icmp type {v}")),
        ];
        primitive.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|a| format!("not ({a})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) and ({b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
                (inner.clone(), inner.clone(), inner).prop_map(|(c, a, b)| format!("({c}) ? ({a}) : ({b})")),
            ]
        })
    }

    fn arb_packet() -> impl Strategy<Value = Ip> {
        (
            prop::sample::select(vec![1u8, 6, 17, 50]),
            0u8..4,
            0u8..4,
            0u16..100,
            0u16..8,
            any::<u8>(),
            0u8..8,
            prop::sample::select(vec![0u16, 0x2000, 0x0001, 0x4000]),
            0usize..44,
        )
            .prop_map(|(proto, s, d, sport, dport, flags, ttl, frag, len)| Ip {
                proto,
                src: [10, 0, 0, s],
                dst: [192, 168, d, 1],
                sport,
                dport,
                flags,
                tos: flags,
                ttl,
                frag,
                len: len.min(40),
                ..Ip::default()
            })
    }

    proptest! {
        /// The compiled decision graph sends every packet where the
        /// patterns, read directly and in order, send it.
        #[test]
        fn compiled_program_agrees_with_the_expressions(
            patterns in prop::collection::vec((arb_test(), prop::option::of(0u32..3)), 1..5),
            packets in prop::collection::vec(arb_packet(), 1..20),
        ) {
            let rules: Vec<(Expr, Option<u32>)> = patterns
                .iter()
                .map(|(p, out)| (parse_pattern(p).unwrap_or_else(|e| panic!("{p}: {e}")), *out))
                .collect();
            let prog = Program::compile(&rules);
            for ip in &packets {
                let bytes = ip.bytes();
                let v = view(&bytes);
                let direct = rules.iter().find(|(e, _)| e.eval(&v)).and_then(|(_, out)| *out);
                prop_assert_eq!(prog.classify(&v), direct, "{:?}", patterns);
            }
        }
    }
}
