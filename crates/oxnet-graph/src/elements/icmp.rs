//! ICMP (RFC 792; RFC 1122 §3.2.2 for hosts, RFC 1812 §4.3 for routers),
//! after Click's documentation of the classes of the same names
//! (elements/icmp/*.hh in Click).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | ICMPPingResponder | 1/1-2 | agnostic, output 1 push | turns ICMP echo requests into echo replies; other packets to output 1 |
//! | ICMPError(SRC, TYPE, CODE, ...) | 1/1 | agnostic | makes the ICMP error message about a packet (RFC 1812 §4.3.2), source route reversed |
//! | ICMPIPEncap(SRC, DST, TYPE, CODE, IDENTIFIER) | 1/1 | agnostic | prepends an IP and ICMP header |
//! | CheckICMPHeader(VERBOSE, DETAILS) | 1/1-2 | agnostic, output 1 push | checks ICMP lengths and checksums; bad packets to output 1 or dropped |
//!
//! The IP header of an input packet is the one its network header mark
//! points at (Click's `ip_header`, set by CheckIPHeader or MarkIPHeader),
//! the ICMP header the transport mark; elements that need them send an
//! unmarked or truncated packet to their error output, or drop and count
//! it.

use super::ether::{ip_text, parse_or};
use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::offload::{fold, ones_sum, set_ipv4_checksum};
use oxnet_driver::{Packet, PacketBatch};

/// IP protocol number of ICMP.
pub const IPPROTO_ICMP: u8 = 1;

/// ICMP types (RFC 792, RFC 950 for the mask messages, RFC 1256 for the
/// router messages).
pub mod types {
    pub const ECHO_REPLY: u8 = 0;
    pub const UNREACHABLE: u8 = 3;
    pub const SOURCE_QUENCH: u8 = 4;
    pub const REDIRECT: u8 = 5;
    pub const ECHO: u8 = 8;
    pub const ROUTER_ADVERT: u8 = 9;
    pub const ROUTER_SOLICIT: u8 = 10;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAMETER_PROBLEM: u8 = 12;
    pub const TIMESTAMP: u8 = 13;
    pub const TIMESTAMP_REPLY: u8 = 14;
    pub const INFO_REQUEST: u8 = 15;
    pub const INFO_REPLY: u8 = 16;
    pub const MASK_REQUEST: u8 = 17;
    pub const MASK_REPLY: u8 = 18;
}

/// Click's names for ICMP types (its NameInfo database); IPFilter,
/// IPClassifier and the IP summary dumps use them too.
pub const TYPE_NAMES: &[(&str, u8)] = &[
    ("echo-reply", types::ECHO_REPLY),
    ("unreachable", types::UNREACHABLE),
    ("sourcequench", types::SOURCE_QUENCH),
    ("redirect", types::REDIRECT),
    ("echo", types::ECHO),
    ("routeradvert", types::ROUTER_ADVERT),
    ("routersolicit", types::ROUTER_SOLICIT),
    ("timeexceeded", types::TIME_EXCEEDED),
    ("parameterproblem", types::PARAMETER_PROBLEM),
    ("timestamp", types::TIMESTAMP),
    ("timestamp-reply", types::TIMESTAMP_REPLY),
    ("inforeq", types::INFO_REQUEST),
    ("inforeq-reply", types::INFO_REPLY),
    ("maskreq", types::MASK_REQUEST),
    ("maskreq-reply", types::MASK_REPLY),
];

/// Names of codes per type (RFC 792; `needfrag` is RFC 1191's use of
/// code 4).
const CODE_NAMES: &[(u8, &str, u8)] = &[
    (types::UNREACHABLE, "net", 0),
    (types::UNREACHABLE, "host", 1),
    (types::UNREACHABLE, "protocol", 2),
    (types::UNREACHABLE, "port", 3),
    (types::UNREACHABLE, "needfrag", 4),
    (types::UNREACHABLE, "srcroutefail", 5),
    (types::UNREACHABLE, "net-unknown", 6),
    (types::UNREACHABLE, "host-unknown", 7),
    (types::UNREACHABLE, "isolated", 8),
    (types::UNREACHABLE, "net-prohib", 9),
    (types::UNREACHABLE, "host-prohib", 10),
    (types::UNREACHABLE, "tos-net", 11),
    (types::UNREACHABLE, "tos-host", 12),
    (types::UNREACHABLE, "filter-prohib", 13),
    (types::UNREACHABLE, "host-precedence", 14),
    (types::UNREACHABLE, "precedence-cutoff", 15),
    (types::REDIRECT, "net", 0),
    (types::REDIRECT, "host", 1),
    (types::REDIRECT, "tos-net", 2),
    (types::REDIRECT, "tos-host", 3),
    (types::TIME_EXCEEDED, "transit", 0),
    (types::TIME_EXCEEDED, "reassembly", 1),
    (types::PARAMETER_PROBLEM, "erroratptr", 0),
    (types::PARAMETER_PROBLEM, "missingopt", 1),
    (types::PARAMETER_PROBLEM, "length", 2),
];

/// An ICMP type: 0-255 or one of Click's names.
pub fn icmp_type(text: &str) -> Result<u8, String> {
    let t = text.trim();
    if let Some(&(_, v)) = TYPE_NAMES.iter().find(|(n, _)| *n == t) {
        return Ok(v);
    }
    args::unsigned(t)
        .ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("'{t}' is not an ICMP type (0-255 or a name such as unreachable)"))
}

/// An ICMP code of type `ty`: 0-255 or one of Click's names for the type.
pub fn icmp_code(ty: u8, text: &str) -> Result<u8, String> {
    let t = text.trim();
    if let Some(&(_, _, v)) = CODE_NAMES.iter().find(|(k, n, _)| *k == ty && *n == t) {
        return Ok(v);
    }
    args::unsigned(t)
        .ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("'{t}' is not an ICMP code of type {ty} (0-255 or a name)"))
}

/// The Internet checksum (RFC 1071) of `data`, ready to store.
fn checksum(data: &[u8]) -> u16 {
    !fold(ones_sum(data, 0))
}

/// Updates checksum `sum` for a 16-bit word that changed from `old` to
/// `new` (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')).
fn update_checksum(sum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!sum) + u64::from(!old) + u64::from(new))
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The IP header offset and the transport (ICMP) offset of a marked
/// packet, when both lie inside it and the transport one follows.
fn ip_and_transport(p: &Packet) -> Option<(usize, usize)> {
    let ip = usize::try_from(p.network_offset()?).ok()?;
    let tp = usize::try_from(p.transport_offset()?).ok()?;
    (ip + 20 <= tp && tp <= p.len()).then_some((ip, tp))
}

/// Is `t` an ICMP error message type (RFC 1812 §4.3.2.7: never answered
/// with another error)?
pub fn is_error_type(t: u8) -> bool {
    matches!(
        t,
        types::UNREACHABLE | types::SOURCE_QUENCH | types::REDIRECT | types::TIME_EXCEEDED | types::PARAMETER_PROBLEM
    )
}

// ---- ICMPPingResponder

/// ICMPPingResponder: answers ICMP echo requests (RFC 792 "Echo or Echo
/// Reply Message": source and destination swapped, type 0, the data
/// returned unchanged; RFC 1122 §3.2.2.6). The reply also has its
/// fragment field cleared and TTL 255, as Click's; both checksums are
/// updated incrementally (RFC 1624), so a corrupt request gives an
/// equally corrupt reply. Its destination IP annotation is set, its
/// paint annotation cleared, its timestamp set to now. Packets that are
/// not echo requests (or are too short to be one: 8 bytes of ICMP) go
/// to output 1 if connected, else are dropped and counted (`drops`).
#[derive(Default)]
pub struct ICMPPingResponder {
    drops: u64,
}

fn echo_reply(p: &mut Packet, now_ns: i64) -> bool {
    let Some((ip, tp)) = ip_and_transport(p) else {
        return false;
    };
    if p[ip + 9] != IPPROTO_ICMP || p.len() < tp + 8 || p[tp] != types::ECHO {
        return false;
    }
    let h = &mut p[ip..];
    let mut sum = be16(h, 10);
    // Source and destination swapped: the sum of the header is the same.
    let (src, rest) = h[12..20].split_at_mut(4);
    src.swap_with_slice(rest);
    // Fragment field cleared (Click: "clear MF, DF, etc.").
    sum = update_checksum(sum, be16(h, 6), 0);
    h[6] = 0;
    h[7] = 0;
    let old = be16(h, 8);
    h[8] = 255;
    sum = update_checksum(sum, old, be16(h, 8));
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    let dst = [h[16], h[17], h[18], h[19]];
    let icmp = &mut p[tp..];
    let old = be16(icmp, 0);
    icmp[0] = types::ECHO_REPLY;
    icmp[1] = 0;
    let mut sum = update_checksum(be16(icmp, 2), old, be16(icmp, 0));
    // The incremental update never gives 0xFFFF, but an all-zero reply
    // (identifier, sequence and data 0) needs exactly that (RFC 1624 §3:
    // +0 and -0).
    if sum == 0 && icmp[..2].iter().chain(&icmp[4..]).all(|&b| b == 0) {
        sum = 0xffff;
    }
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let a = p.anno_mut();
    a.set_dst_ip(dst);
    a.set_paint(0);
    a.timestamp_ns = now_ns;
    true
}

impl Element for ICMPPingResponder {
    fn class_name(&self) -> &'static str {
        "ICMPPingResponder"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn simple_action(&mut self, mut batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let now = ctx.now_us() as i64 * 1000;
        let n = batch.len();
        let mut replies = PacketBatch::with_capacity(n);
        let mut others = PacketBatch::with_capacity(0);
        batch.consume_front(n, |mut p| {
            if echo_reply(&mut p, now) {
                replies.push(p);
            } else {
                others.push(p);
            }
        });
        if ctx.noutputs() > 1 {
            ctx.push(1, others);
        } else {
            self.drops += others.len() as u64;
        }
        Some(replies)
    }
    crate::drops_handler!();
}

// ---- ICMPError

/// IP option types (RFC 791 §3.1).
const IPOPT_EOL: u8 = 0;
const IPOPT_NOP: u8 = 1;
const IPOPT_LSRR: u8 = 131;
const IPOPT_SSRR: u8 = 137;

/// The first loose or strict source route option of IP header `h` whose
/// pointer is sane (at least 4, a multiple of 4, at most length + 1):
/// its offset in the header.
fn source_route(h: &[u8]) -> Option<usize> {
    let hlen = usize::from(h[0] & 0xf) * 4;
    let mut i = 20;
    while i < hlen.min(h.len()) {
        match h[i] {
            IPOPT_NOP => i += 1,
            IPOPT_EOL => return None,
            t => {
                let len = usize::from(*h.get(i + 1)?);
                if len < 2 || i + len > hlen {
                    return None;
                }
                let ptr = usize::from(*h.get(i + 2)?);
                if (t == IPOPT_LSRR || t == IPOPT_SSRR) && len >= 3 && ptr >= 4 && ptr % 4 == 0 && ptr <= len + 1 {
                    return Some(i);
                }
                i += len;
            }
        }
    }
    None
}

/// ICMPError(SRC, TYPE [, CODE, BADADDRS], MTU, PMTU, SET_FIX_ANNO):
/// makes the ICMP error message TYPE/CODE (numbers or Click's names:
/// `unreachable` with `net`, `host`, `protocol`, `port`, `needfrag`...;
/// `sourcequench`; `redirect` with `net`, `host`; `timeexceeded` with
/// `transit`, `reassembly`; `parameterproblem` with `erroratptr`,
/// `missingopt`, `length`) about each input packet, from SRC to the
/// packet's source: a new IP header (TTL 200, an IP ID that counts up,
/// as Click's), the ICMP header, then as much of the packet from its IP
/// header on as fits in MTU bytes (default 576, RFC 1812 §4.3.2.3). The
/// input packet is consumed.
///
/// No error is made (RFC 1812 §4.3.2.7) about an ICMP error message, a
/// packet to a broadcast or multicast IP address or to one of BADADDRS,
/// a packet that came as a link broadcast or multicast (packet type
/// annotation), a packet from an invalid source (0/8, 127/8, 240/4,
/// broadcast, multicast, BADADDRS; RFC 1812 §5.3.7), a fragment other
/// than the first, or an unmarked or truncated packet: those are dropped
/// and counted (`drops`). A source-routed packet gets no redirect (RFC
/// 1812 §5.2.7.2); for the others, the error carries the source route
/// already travelled, reversed (RFC 1812 §4.3.2.6), unless a parameter
/// problem points inside that option. Parameter problems (code 0) take
/// their pointer from the ICMP_PARAMPROB annotation, redirects their
/// gateway from the destination IP annotation, `needfrag` its next-hop
/// MTU from PMTU (RFC 1191). Output packets get their destination IP
/// annotation and, unless SET_FIX_ANNO is false, the fix-IP-source one.
/// Rate limiting is left to an element after it, as Click's
/// documentation advises (`ICMPError(...) -> RatedSplitter(10)`).
///
/// Handlers: `src`, `mtu`, `pmtu` (read/write), `drops`.
pub struct ICMPError {
    src: [u8; 4],
    ty: u8,
    code: u8,
    bad: Vec<[u8; 4]>,
    mtu: usize,
    pmtu: u16,
    fix_anno: bool,
    ip_id: u16,
    drops: u64,
}

impl Default for ICMPError {
    fn default() -> ICMPError {
        ICMPError {
            src: [0; 4],
            ty: types::UNREACHABLE,
            code: 0,
            bad: Vec::new(),
            mtu: 576,
            pmtu: 0,
            fix_anno: true,
            ip_id: 1,
            drops: 0,
        }
    }
}

/// Annotation offsets in Click's area (oxnet_driver::packet documents
/// them): ICMP_PARAMPROB and FIX_IP_SRC.
const PARAMPROB_ANNO: usize = oxnet_driver::packet::USER_ANNO + 1;
const FIX_IP_SRC_ANNO: usize = oxnet_driver::packet::USER_ANNO + 3;

impl ICMPError {
    fn unicast(&self, a: [u8; 4]) -> bool {
        a != [255; 4] && a[0] & 0xf0 != 0xe0 && !self.bad.contains(&a)
    }

    fn valid_source(&self, a: [u8; 4]) -> bool {
        self.unicast(a) && a[0] != 0 && a[0] != 127 && a[0] & 0xf0 != 0xf0
    }

    /// The error message about `p`, or None if none is due.
    fn error_for(&mut self, p: &Packet, ctx: &Ctx<'_>) -> Option<Packet> {
        let ip = usize::try_from(p.network_offset()?).ok()?;
        let h = p.get(ip..)?;
        if h.len() < 20 {
            return None;
        }
        let hlen = usize::from(h[0] & 0xf) * 4;
        if hlen < 20 || h.len() < hlen {
            return None;
        }
        let (src, dst) = ([h[12], h[13], h[14], h[15]], [h[16], h[17], h[18], h[19]]);
        if h[9] == IPPROTO_ICMP && (h.len() < hlen + 4 || is_error_type(h[hlen])) {
            return None;
        }
        use super::ether::packet_type;
        let kind = p.anno().packet_type;
        if !self.unicast(dst) || kind == packet_type::BROADCAST || kind == packet_type::MULTICAST {
            return None;
        }
        if !self.valid_source(src) {
            return None;
        }
        // Only the first fragment (offset 0).
        if be16(h, 6) & 0x1fff != 0 {
            return None;
        }
        let pointer = p.anno().area[PARAMPROB_ANNO];
        let mut route = source_route(&h[..hlen]);
        if let Some(at) = route {
            if self.ty == types::REDIRECT {
                return None;
            }
            let ptr = usize::from(pointer);
            if self.ty == types::PARAMETER_PROBLEM && self.code == 0 && at <= ptr && ptr < at + usize::from(h[at + 1]) {
                route = None;
            }
        }
        // The reversed route: the addresses before the pointer, last
        // first, then an end-of-options byte, padded to 32 bits.
        let option: Vec<u8> = match route {
            Some(at) => {
                let ptr = usize::from(h[at + 2]);
                let olen = ptr - 1;
                let mut o = vec![0u8; olen + 1];
                o[0] = h[at];
                o[1] = olen as u8;
                o[2] = 4;
                let mut k = 3;
                let mut from = at + ptr - 5;
                while from >= at + 3 {
                    o[k..k + 4].copy_from_slice(&h[from..from + 4]);
                    k += 4;
                    from -= 4;
                }
                o[olen] = IPOPT_EOL;
                o.resize((olen + 1).div_ceil(4) * 4, IPOPT_EOL);
                o
            }
            None => Vec::new(),
        };
        let nhl = 20 + option.len();
        let mut q = ctx.pool().alloc().ok()?;
        let room = self.mtu.min(q.capacity());
        if room < nhl + 8 {
            return None;
        }
        let quoted = h.len().min(room - nhl - 8);
        let total = nhl + 8 + quoted;
        q.set_len(total).ok()?;
        q.fill(0);
        q[0] = 0x40 | (nhl / 4) as u8;
        q[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        q[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        q[8] = 200;
        q[9] = IPPROTO_ICMP;
        q[12..16].copy_from_slice(&self.src);
        q[16..20].copy_from_slice(&src);
        q[20..nhl].copy_from_slice(&option);
        let icmp = &mut q[nhl..];
        icmp[0] = self.ty;
        icmp[1] = self.code;
        match (self.ty, self.code) {
            (types::PARAMETER_PROBLEM, 0) => icmp[4] = pointer,
            (types::REDIRECT, _) => icmp[4..8].copy_from_slice(&p.anno().dst_ip()),
            (types::UNREACHABLE, 4) => icmp[6..8].copy_from_slice(&self.pmtu.to_be_bytes()),
            _ => {}
        }
        icmp[8..8 + quoted].copy_from_slice(&h[..quoted]);
        let sum = checksum(&icmp[..8 + quoted]);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        set_ipv4_checksum(&mut q[..nhl]);
        q.set_network_header(0, nhl).ok()?;
        let now = ctx.now_us() as i64 * 1000;
        let a = q.anno_mut();
        a.set_dst_ip(src);
        if self.fix_anno {
            a.area[FIX_IP_SRC_ANNO] = 1;
        }
        a.timestamp_ns = now;
        Some(q)
    }
}

impl Element for ICMPError {
    fn class_name(&self) -> &'static str {
        "ICMPError"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.src = args::ip_address(&a.required("SRC")?).map_err(|e| format!("SRC: {e}"))?;
        self.ty = icmp_type(&a.required("TYPE")?).map_err(|e| format!("TYPE: {e}"))?;
        if !is_error_type(self.ty) {
            return Err(format!("ICMP type {} is not an error type", self.ty));
        }
        if let Some(c) = a.positional_or("CODE") {
            self.code = icmp_code(self.ty, &c).map_err(|e| format!("CODE: {e}"))?;
        }
        if let Some(b) = a.positional_or("BADADDRS") {
            self.bad = crate::lang::vars::split_words(&b)
                .iter()
                .map(|w| args::ip_address(w))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("BADADDRS: {e}"))?;
        }
        if let Some(v) = parse_or(a.keyword("MTU"), "MTU", args::unsigned)? {
            self.mtu = v as usize;
        }
        if let Some(v) = parse_or(a.keyword("PMTU"), "PMTU", args::unsigned)? {
            self.pmtu = u16::try_from(v).map_err(|_| "PMTU: at most 65535".to_string())?;
        }
        if let Some(v) = parse_or(a.keyword("SET_FIX_ANNO"), "SET_FIX_ANNO", args::boolean)? {
            self.fix_anno = v;
        }
        if let Some(v) = parse_or(a.keyword("USE_FIX_ANNO"), "USE_FIX_ANNO", args::boolean)? {
            self.fix_anno = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let n = batch.len();
        let mut out = PacketBatch::with_capacity(n);
        batch.consume_front(n, |p| match self.error_for(&p, ctx) {
            Some(q) => out.push(q),
            None => self.drops += 1,
        });
        Some(out)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("src", true, true),
            ("mtu", true, true),
            ("pmtu", true, true),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "src" => ip_text(&self.src),
            "mtu" => self.mtu.to_string(),
            "pmtu" => self.pmtu.to_string(),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "src" => args::ip_address(value).map(|a| self.src = a),
            "mtu" => args::unsigned(value).map(|v| self.mtu = v as usize),
            "pmtu" => args::unsigned(value)
                .and_then(|v| u16::try_from(v).map_err(|_| "at most 65535".to_string()))
                .map(|v| self.pmtu = v),
            _ => return None,
        })
    }
}

// ---- ICMPIPEncap

/// ICMPIPEncap(SRC, DST, TYPE [, CODE], IDENTIFIER): prepends a 20-byte
/// IP header (TTL 255, protocol ICMP, an IP ID counting up from 1 and
/// skipping 0) and an ICMP header of TYPE/CODE (names as ICMPError's; 20
/// bytes for timestamps, else 8). Echo, timestamp and information
/// messages get IDENTIFIER (default 0) and, as sequence number, the IP
/// ID. Both checksums are computed; the destination IP annotation is set
/// to DST and the IP header marked. A packet without the head room is
/// dropped and counted. Handlers: `src`, `dst` (read/write), `drops`.
pub struct ICMPIPEncap {
    src: [u8; 4],
    dst: [u8; 4],
    ty: u8,
    code: u8,
    identifier: u16,
    ip_id: u16,
    drops: u64,
}

impl Default for ICMPIPEncap {
    fn default() -> ICMPIPEncap {
        ICMPIPEncap {
            src: [0; 4],
            dst: [0; 4],
            ty: 0,
            code: 0,
            identifier: 0,
            ip_id: 1,
            drops: 0,
        }
    }
}

impl ICMPIPEncap {
    fn header_len(&self) -> usize {
        if matches!(self.ty, types::TIMESTAMP | types::TIMESTAMP_REPLY) {
            20
        } else {
            8
        }
    }

    fn encap(&mut self, p: &mut Packet) -> bool {
        let hl = self.header_len();
        if p.prepend(20 + hl).is_err() {
            return false;
        }
        let total = p.len();
        let Ok(total16) = u16::try_from(total) else {
            return false;
        };
        let id = self.ip_id;
        self.ip_id = if id == 0xffff { 1 } else { id + 1 };
        let h = &mut p[..20 + hl];
        h.fill(0);
        h[0] = 0x45;
        h[2..4].copy_from_slice(&total16.to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h[8] = 255;
        h[9] = IPPROTO_ICMP;
        h[12..16].copy_from_slice(&self.src);
        h[16..20].copy_from_slice(&self.dst);
        set_ipv4_checksum(&mut h[..20]);
        h[20] = self.ty;
        h[21] = self.code;
        if matches!(
            self.ty,
            types::ECHO
                | types::ECHO_REPLY
                | types::TIMESTAMP
                | types::TIMESTAMP_REPLY
                | types::INFO_REQUEST
                | types::INFO_REPLY
        ) {
            h[24..26].copy_from_slice(&self.identifier.to_be_bytes());
            h[26..28].copy_from_slice(&id.to_be_bytes());
        }
        let sum = checksum(&p[20..]);
        p[22..24].copy_from_slice(&sum.to_be_bytes());
        p.anno_mut().set_dst_ip(self.dst);
        p.set_network_header(0, 20).is_ok()
    }
}

impl Element for ICMPIPEncap {
    fn class_name(&self) -> &'static str {
        "ICMPIPEncap"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.src = args::ip_address(&a.required("SRC")?).map_err(|e| format!("SRC: {e}"))?;
        self.dst = args::ip_address(&a.required("DST")?).map_err(|e| format!("DST: {e}"))?;
        self.ty = icmp_type(&a.required("TYPE")?).map_err(|e| format!("TYPE: {e}"))?;
        if let Some(c) = a.positional_or("CODE") {
            self.code = icmp_code(self.ty, &c).map_err(|e| format!("CODE: {e}"))?;
        }
        if let Some(v) = parse_or(a.keyword("IDENTIFIER"), "IDENTIFIER", args::unsigned)? {
            self.identifier = u16::try_from(v).map_err(|_| "IDENTIFIER: at most 65535".to_string())?;
        }
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let n = batch.len();
        let mut out = PacketBatch::with_capacity(n);
        batch.consume_front(n, |mut p| {
            if self.encap(&mut p) {
                out.push(p);
            } else {
                self.drops += 1;
            }
        });
        Some(out)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("src", true, true), ("dst", true, true), ("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "src" => ip_text(&self.src),
            "dst" => ip_text(&self.dst),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "src" => args::ip_address(value).map(|a| self.src = a),
            "dst" => args::ip_address(value).map(|a| self.dst = a),
            _ => return None,
        })
    }
}

// ---- CheckICMPHeader

/// Why CheckICMPHeader refused a packet (Click's reasons and texts).
const REASONS: [&str; 3] = ["not ICMP", "bad packet length", "bad ICMP checksum"];

/// CheckICMPHeader(VERBOSE, DETAILS): checks ICMP packets (IP header
/// marked): protocol ICMP, at least 8 bytes of ICMP, the lengths RFC 792
/// gives some types (errors: at least the IP header and 64 bits of data,
/// 28 bytes after the ICMP header; timestamps: exactly 20 bytes;
/// information requests and replies: exactly 8), and the checksum.
/// Failures go to output 1 if connected, else are dropped; the first one
/// (every one with VERBOSE) is reported on standard error. Handlers:
/// `drops`, `drop_details` (with DETAILS: a count per reason).
#[derive(Default)]
pub struct CheckICMPHeader {
    verbose: bool,
    details: bool,
    drops: u64,
    reasons: [u64; 3],
}

fn check_icmp(p: &Packet) -> Result<(), usize> {
    let Some((ip, tp)) = ip_and_transport(p) else {
        return Err(0);
    };
    if p[ip + 9] != IPPROTO_ICMP {
        return Err(0);
    }
    let icmp = &p[tp..];
    if icmp.len() < 8 {
        return Err(1);
    }
    let ok = match icmp[0] {
        types::UNREACHABLE
        | types::TIME_EXCEEDED
        | types::PARAMETER_PROBLEM
        | types::SOURCE_QUENCH
        | types::REDIRECT => icmp.len() >= 8 + 28,
        types::TIMESTAMP | types::TIMESTAMP_REPLY => icmp.len() == 20,
        types::INFO_REQUEST | types::INFO_REPLY => icmp.len() == 8,
        _ => true,
    };
    if !ok {
        return Err(1);
    }
    if fold(ones_sum(icmp, 0)) != 0xffff {
        return Err(2);
    }
    Ok(())
}

impl Element for CheckICMPHeader {
    fn class_name(&self) -> &'static str {
        "CheckICMPHeader"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = parse_or(a.keyword("VERBOSE"), "VERBOSE", args::boolean)? {
            self.verbose = v;
        }
        if let Some(v) = parse_or(a.keyword("DETAILS"), "DETAILS", args::boolean)? {
            self.details = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let n = batch.len();
        let mut good = PacketBatch::with_capacity(n);
        let mut bad = PacketBatch::with_capacity(0);
        batch.consume_front(n, |p| match check_icmp(&p) {
            Ok(()) => good.push(p),
            Err(reason) => {
                if self.drops == 0 || self.verbose {
                    eprintln!("{}: ICMP header check failed: {}", ctx.name(), REASONS[reason]);
                }
                self.drops += 1;
                self.reasons[reason] += 1;
                bad.push(p);
            }
        });
        if ctx.noutputs() > 1 {
            ctx.push(1, bad);
        }
        Some(good)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("drop_details", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.to_string()),
            "drop_details" if self.details => Some(
                REASONS
                    .iter()
                    .zip(self.reasons)
                    .map(|(r, n)| format!("{n}\t{r}\n"))
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["CheckICMPHeader", "ICMPError", "ICMPIPEncap", "ICMPPingResponder"],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "ICMPPingResponder" => Box::<ICMPPingResponder>::default(),
        "ICMPError" => Box::<ICMPError>::default(),
        "ICMPIPEncap" => Box::<ICMPIPEncap>::default(),
        "CheckICMPHeader" => Box::<CheckICMPHeader>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::ether::testkit::{hex, of, read, run};
    use super::*;

    fn sum_ok(data: &[u8]) -> bool {
        fold(ones_sum(data, 0)) == 0xffff
    }

    /// A UDP-like IPv4 packet of `len` bytes from `src` to `dst`, with a
    /// valid header checksum and fragment field `frag`.
    fn ip_packet(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize, frag: u16) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        set_ipv4_checksum(&mut p[..20]);
        for (i, b) in p[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    #[test]
    fn icmpipencap_builds_headers_and_counts_sequences() {
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 2, STOP true) -> e :: ICMPIPEncap(1.0.0.1, 2.0.0.2, echo, IDENTIFIER 0x1234) -> Capture(out)",
            hex(b"data")
        ));
        let out = of(&seen, "out");
        assert_eq!(out.len(), 2);
        for (i, p) in out.iter().enumerate() {
            let seq = i as u8 + 1;
            assert_eq!(
                p[..20],
                [0x45, 0, 0, 32, 0, seq, 0, 0, 255, 1, p[10], p[11], 1, 0, 0, 1, 2, 0, 0, 2]
            );
            assert!(sum_ok(&p[..20]));
            assert_eq!(p[20..28], [8, 0, p[22], p[23], 0x12, 0x34, 0, seq]);
            assert!(sum_ok(&p[20..]));
            assert_eq!(&p[28..], b"data");
        }
        assert_eq!(seen[0].dst_ip, [2, 0, 0, 2]);
        assert_eq!(read(&r, "e", "dst"), "2.0.0.2");
    }

    #[test]
    fn ping_responder_answers_echo_requests_only() {
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1) -> ICMPIPEncap(10.0.0.2, 10.0.0.1, echo, IDENTIFIER 7) -> p :: ICMPPingResponder -> Capture(reply);
             InfiniteSource({}, LIMIT 1, STOP true) -> ICMPIPEncap(10.0.0.2, 10.0.0.1, timestamp) -> p;
             p[1] -> Capture(other)",
            hex(b"ping payload"),
            hex(&[0; 12])
        ));
        let reply = &of(&seen, "reply")[0];
        // Addresses swapped, TTL 255, type 0, the rest as sent (RFC 792).
        assert_eq!(reply[8], 255);
        assert_eq!(reply[12..20], [10, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(reply[20], types::ECHO_REPLY);
        assert_eq!(reply[24..28], [0, 7, 0, 1]);
        assert_eq!(&reply[28..], b"ping payload");
        assert!(sum_ok(&reply[..20]), "IP checksum");
        assert!(sum_ok(&reply[20..]), "ICMP checksum");
        assert_eq!(seen.iter().find(|s| s.label == "reply").unwrap().dst_ip, [10, 0, 0, 2]);
        assert_eq!(of(&seen, "other").len(), 1);
        assert_eq!(read(&r, "p", "drops"), "0");
    }

    #[test]
    fn an_all_zero_echo_reply_gets_the_checksum_0xffff() {
        // Identifier, sequence and data 0: the reply's ICMP words are all
        // 0 but the checksum, which must then be 0xFFFF to verify.
        let mut echo = ip_packet([10, 0, 0, 9], [10, 0, 0, 1], IPPROTO_ICMP, 32, 0);
        echo[20..].fill(0);
        echo[20] = types::ECHO;
        let ck = checksum(&echo[20..]);
        echo[22..24].copy_from_slice(&ck.to_be_bytes());
        let (_, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1, STOP true) -> MarkIP(0) -> ICMPPingResponder -> c :: CheckICMPHeader -> Capture(ok)",
            hex(&echo)
        ));
        let ok = of(&seen, "ok");
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0][22..24], [0xff, 0xff]);
    }

    #[test]
    fn icmp_error_quotes_the_packet_within_the_mtu() {
        let bad = ip_packet([10, 0, 0, 9], [10, 0, 0, 1], 17, 100, 0);
        let (_, seen) = run(&format!(
            "InfiniteSource({0}, LIMIT 1) -> MarkIP(0) -> ICMPError(10.0.0.1, unreachable, port) -> Capture(e);
             InfiniteSource({0}, LIMIT 1) -> MarkIP(0) -> ICMPError(10.0.0.1, unreachable, needfrag, PMTU 1400, MTU 64) -> Capture(small);
             InfiniteSource({0}, LIMIT 1, STOP true) -> MarkIP(0) -> ICMPError(10.0.0.1, timeexceeded) -> CheckICMPHeader -> Capture(checked)",
            hex(&bad)
        ));
        let e = &of(&seen, "e")[0];
        assert_eq!(e.len(), 20 + 8 + 100);
        assert_eq!(e[2..4], 128u16.to_be_bytes());
        assert_eq!(e[9], IPPROTO_ICMP);
        assert_eq!(e[12..20], [10, 0, 0, 1, 10, 0, 0, 9]);
        assert_eq!(e[20..22], [3, 3]);
        assert_eq!(e[24..28], [0; 4]);
        assert_eq!(&e[28..], &bad[..]);
        assert!(sum_ok(&e[..20]) && sum_ok(&e[20..]));
        let small = &of(&seen, "small")[0];
        assert_eq!(small.len(), 64);
        assert_eq!(small[20..22], [3, 4]);
        assert_eq!(small[26..28], 1400u16.to_be_bytes(), "next-hop MTU (RFC 1191)");
        assert_eq!(&small[28..], &bad[..36]);
        assert!(sum_ok(&small[20..]));
        assert_eq!(of(&seen, "checked").len(), 1);
        assert_eq!(seen.iter().find(|s| s.label == "e").unwrap().dst_ip, [10, 0, 0, 9]);
    }

    #[test]
    fn icmp_error_stays_silent_where_rfc_1812_says_so() {
        let mut error_msg = ip_packet([10, 0, 0, 9], [10, 0, 0, 1], IPPROTO_ICMP, 56, 0);
        error_msg[20] = types::UNREACHABLE;
        let cases = [
            error_msg,
            ip_packet([10, 0, 0, 9], [255, 255, 255, 255], 17, 40, 0),
            ip_packet([10, 0, 0, 9], [224, 0, 0, 1], 17, 40, 0),
            ip_packet([127, 0, 0, 1], [10, 0, 0, 1], 17, 40, 0),
            ip_packet([0, 1, 2, 3], [10, 0, 0, 1], 17, 40, 0),
            ip_packet([10, 0, 0, 9], [10, 0, 0, 1], 17, 40, 0x0010),
            ip_packet([10, 0, 0, 9], [10, 0, 0, 66], 17, 40, 0),
            // An echo request is answered (not an error message); a first
            // fragment too (MF set, offset 0).
            ip_packet([10, 0, 0, 9], [10, 0, 0, 1], IPPROTO_ICMP, 40, 0),
            ip_packet([10, 0, 0, 9], [10, 0, 0, 1], 17, 40, 0x2000),
        ];
        let mut config = String::from("e :: ICMPError(10.0.0.1, unreachable, host, 10.0.0.66) -> Capture(e);\n");
        for (i, c) in cases.iter().enumerate() {
            let stop = if i + 1 == cases.len() { ", STOP true" } else { "" };
            config += &format!("InfiniteSource({}, LIMIT 1{stop}) -> MarkIP(0) -> e;\n", hex(c));
        }
        let (r, seen) = run(&config);
        let answered: Vec<[u8; 4]> = of(&seen, "e").iter().map(|p| [p[16], p[17], p[18], p[19]]).collect();
        assert_eq!(answered, [[10, 0, 0, 9], [10, 0, 0, 9]]);
        assert_eq!(read(&r, "e", "drops"), "7");
    }

    #[test]
    fn check_icmp_header_sorts_out_bad_checksums_and_lengths() {
        let (r, seen) = run(&format!(
            "InfiniteSource({0}, LIMIT 1) -> ICMPIPEncap(1.0.0.1, 2.0.0.2, echo) -> c :: CheckICMPHeader(DETAILS true) -> Capture(good);
             InfiniteSource({0}, LIMIT 1) -> ICMPIPEncap(1.0.0.1, 2.0.0.2, echo) -> Unstrip(0) -> Truncate(30) -> c;
             InfiniteSource({0}, LIMIT 1, STOP true) -> ICMPIPEncap(1.0.0.1, 2.0.0.2, unreachable) -> c;
             c[1] -> Capture(bad)",
            hex(b"abcdef")
        ));
        assert_eq!(of(&seen, "good").len(), 1);
        assert_eq!(of(&seen, "bad").len(), 2);
        assert_eq!(read(&r, "c", "drops"), "2");
        assert_eq!(
            read(&r, "c", "drop_details"),
            "0\tnot ICMP\n1\tbad packet length\n1\tbad ICMP checksum\n"
        );
    }

    #[test]
    fn truncated_and_corrupt_packets_never_panic() {
        // Every prefix of an echo request and of an ARP request, and
        // corrupt header lengths, through every element of the family.
        let mut echo = ip_packet([10, 0, 0, 9], [10, 0, 0, 1], IPPROTO_ICMP, 40, 0);
        echo[20] = types::ECHO;
        let mut arp = vec![0xff; 6];
        arp.extend([2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        arp.extend([2, 0, 0, 0, 0, 9, 10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
        echo[22..24].fill(0);
        let ck = checksum(&echo[20..]);
        echo[22..24].copy_from_slice(&ck.to_be_bytes());
        let config = String::from(
            "m :: MarkIP(0) -> p :: ICMPPingResponder -> c :: CheckICMPHeader -> Capture(ok);
             p[1] -> e :: ICMPError(10.0.0.1, parameterproblem) -> Discard; c[1] -> e;
             a :: ARPResponder(0/0 2:0:0:0:0:1) -> pr :: ARPPrint(OUTFILE /dev/null, ETHER true) -> Discard;
             a[1] -> q :: ARPQuerier(10.0.0.1, 2:0:0:0:0:1) -> Discard; q[1] -> Discard;
             h :: HostEtherFilter(2:0:0:0:0:1, OFFSET 3) -> EnsureEther -> EtherMirror -> Discard;\n",
        );
        let mut sources = String::new();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for len in 0..=echo.len() {
            frames.push(echo[..len].to_vec());
        }
        for hl in [0u8, 1, 4, 5, 6, 15] {
            let mut bad = echo.clone();
            bad[0] = 0x40 | hl;
            frames.push(bad);
        }
        let mut arps: Vec<Vec<u8>> = (0..=arp.len()).map(|len| arp[..len].to_vec()).collect();
        let mut odd = arp.clone();
        odd[19] = 200; // hardware address length
        arps.push(odd);
        for f in &frames {
            sources += &format!("InfiniteSource({}, LIMIT 1) -> m;\n", hex(f));
            sources += &format!("InfiniteSource({}, LIMIT 1) -> h;\n", hex(f));
        }
        for f in &arps {
            sources += &format!("InfiniteSource({}, LIMIT 1) -> a;\n", hex(f));
            sources += &format!("InfiniteSource({}, LIMIT 1) -> pr;\n", hex(f));
        }
        sources += "InfiniteSource(LIMIT 1, STOP true) -> Discard;\n";
        let (r, seen) = run(&(config + &sources));
        // Only the whole echo request is answered (twice: as itself and
        // as the IHL 5 "corruption", which is the same packet); nothing
        // else got through, nothing panicked.
        assert_eq!(of(&seen, "ok").len(), 2);
        // Echo requests cut to 28..39 bytes have their 8 ICMP bytes, so
        // they are answered (Click's rule), and their checksum fails.
        assert_eq!(read(&r, "c", "drops"), "12");
        assert!(read(&r, "e", "drops").parse::<u64>().unwrap() < frames.len() as u64);
    }

    #[test]
    fn names_of_types_and_codes_are_clicks() {
        assert_eq!(icmp_type("timeexceeded").unwrap(), 11);
        assert_eq!(icmp_type("8").unwrap(), 8);
        assert!(icmp_type("256").is_err());
        assert!(icmp_type("bogus").is_err());
        assert_eq!(icmp_code(3, "needfrag").unwrap(), 4);
        assert_eq!(icmp_code(11, "reassembly").unwrap(), 1);
        assert!(icmp_code(11, "needfrag").is_err());
        assert_eq!(icmp_code(5, "7").unwrap(), 7);
    }

    #[test]
    fn incremental_checksum_update_matches_recomputing() {
        let mut data = [
            0x45u8, 0, 0, 84, 0x12, 0x34, 0x40, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let sum = checksum(&data);
        data[10..12].copy_from_slice(&sum.to_be_bytes());
        let old = be16(&data, 8);
        data[8] = 255;
        let updated = update_checksum(sum, old, be16(&data, 8));
        data[10] = 0;
        data[11] = 0;
        assert_eq!(updated, checksum(&data));
    }

    #[test]
    fn source_routes_are_found_only_when_sane() {
        let mut h = vec![0u8; 40];
        h[0] = 0x4a;
        h[20] = IPOPT_NOP;
        h[21] = IPOPT_SSRR;
        h[22] = 19;
        h[23] = 12;
        assert_eq!(source_route(&h), Some(21));
        h[23] = 13; // pointer not a multiple of 4
        assert_eq!(source_route(&h), None);
        h[23] = 12;
        h[22] = 40; // runs past the header
        assert_eq!(source_route(&h), None);
        h[20] = IPOPT_EOL;
        h[22] = 19;
        assert_eq!(source_route(&h), None);
    }
}
