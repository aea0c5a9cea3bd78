//! IPv4 header elements, after Click's documentation of the classes of the
//! same names (Click's `elements/ip/*.hh` and `elements/tcpudp/udpipencap.hh`).
//! The header is RFC 791's; checks and TTL handling follow RFC 1812; the
//! checksum is RFC 1071's, updated incrementally by RFC 1624 eq. 3 where
//! one 16-bit word changes.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | CheckIPHeader([OFFSET], ...) | 1/1-2 | a/ah | checks version, lengths, checksum and source address; marks the header, trims to the IP length, sets the destination annotation; bad packets to output 1 (else dropped) |
//! | CheckIPHeader2([OFFSET], ...) | 1/1-2 | a/ah | CheckIPHeader without the checksum check (CHECKSUM false by default) |
//! | MarkIPHeader([OFFSET]) | 1/1 | agnostic | marks the IP header at OFFSET (no checks) |
//! | StripIPHeader | 1/1 | agnostic | removes everything up to the transport header |
//! | UnstripIPHeader | 1/1 | agnostic | puts a stripped IP header back |
//! | DecIPTTL | 1/1-2 | a/ah | decrements the TTL (RFC 1812 §5.3.1); expired packets to output 1 |
//! | SetIPChecksum | 1/1 | agnostic | recomputes the header checksum |
//! | SetIPDSCP(DSCP) | 1/1 | agnostic | sets the DSCP (RFC 2474) |
//! | MarkIPCE([FORCE]) | 1/1 | agnostic | sets ECN to Congestion Experienced (RFC 3168 §5) |
//! | IPEncap(PROTO, SRC, DST, ...) | 1/1 | agnostic | prepends an IP header |
//! | UDPIPEncap(SRC, SPORT, DST, DPORT, [CHECKSUM]) | 1/1 | agnostic | prepends UDP (RFC 768) and IP headers |
//! | IPFragmenter(MTU, ...) | 1/1-2 | push | fragments packets longer than MTU (RFC 791 §3.2); DF packets to output 1 |
//! | IPReassembler(...) | 1/1-2 | push | reassembles fragments (RFC 791 §3.2); incomplete datagrams time out to output 1 |
//! | IPGWOptions(MYADDR, [OTHERADDRS]) | 1/1-2 | a/ah | fills Record Route and Timestamp options (RFC 791 §3.1); bad options to output 1 |
//! | FixIPSrc(IPADDR) | 1/1 | agnostic | sets the source of packets whose Fix IP Source annotation is set |
//! | GetIPAddress(OFFSET, [ANNO], IP) | 1/1 | agnostic | copies 4 packet bytes to an address annotation |
//! | SetIPAddress(ADDR, [ANNO]) | 1/1 | agnostic | sets an address annotation |
//! | IPInputCombo(COLOR, ...) | 1/1 | agnostic | Paint, Strip(14), CheckIPHeader, GetIPAddress(16) in one |
//! | IPOutputCombo(COLOR, IPADDR, MTU) | 1/5 | push | DropBroadcasts, PaintTee, IPGWOptions, FixIPSrc, DecIPTTL, CheckLength in one |
//!
//! Elements that expect an IP header (all but CheckIPHeader, MarkIPHeader,
//! GetIPAddress with OFFSET, SetIPAddress and the combos) drop and count
//! (`drops`) a packet whose header is not marked or does not fit the
//! packet, where Click would assert.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::offload::{fold, ones_sum, set_ipv4_checksum};
use oxnet_driver::{Packet, PacketBatch};

/// Bytes of an IPv4 header without options (RFC 791 §3.1).
pub const IP_HEADER: usize = 20;
/// Flags and fragment offset (RFC 791 §3.1): Don't Fragment.
const IP_DF: u16 = 0x4000;
/// More Fragments.
const IP_MF: u16 = 0x2000;
/// The fragment offset, in units of 8 bytes.
const IP_OFFSET_MASK: u16 = 0x1fff;
/// The ECN field: the low two bits of the TOS byte (RFC 3168 §5).
const ECN_MASK: u8 = 3;
/// ECN codepoint Congestion Experienced (RFC 3168 §5).
const ECN_CE: u8 = 3;
/// User annotation byte 1: ICMP Parameter Problem pointer (Click's
/// ICMP_PARAMPROB_ANNO).
const ICMP_PARAMPROB_ANNO: usize = oxnet_driver::packet::USER_ANNO + 1;
/// User annotation byte 3: Fix IP Source (Click's FIX_IP_SRC_ANNO).
const FIX_IP_SRC_ANNO: usize = oxnet_driver::packet::USER_ANNO + 3;
/// Click's packet type annotation for link-level broadcasts.
const PACKET_BROADCAST: u8 = 1;

// ---- Helpers shared by the elements of this file (and iplookup.rs).

/// The RFC 1071 checksum of `data`: 0 for an IPv4 header whose checksum
/// field is right.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(ones_sum(data, 0))
}

/// RFC 1624 eq. 3: the checksum after one 16-bit word of the summed data
/// changed from `old` to `new`, `HC' = ~(~HC + ~m + m')`.
pub fn update_checksum(sum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!sum) + u64::from(!old) + u64::from(new))
}

/// The 16-bit word at `at` of `bytes`.
fn word(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Sets the 16-bit word at `at` of an IP header and updates its checksum
/// incrementally (RFC 1624). `at` must be even.
fn set_header_word(ip: &mut [u8], at: usize, new: u16) {
    let old = word(ip, at);
    let sum = update_checksum(word(ip, 10), old, new);
    ip[at..at + 2].copy_from_slice(&new.to_be_bytes());
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// Where the marked IP header of `p` is: (offset into the data, header
/// length), if a header is marked, starts inside the data and its whole
/// header (IHL) fits.
pub fn ip_header(p: &Packet) -> Option<(usize, usize)> {
    let offset = usize::try_from(p.network_offset()?).ok()?;
    let first = *p.get(offset)?;
    let hlen = usize::from(first & 0x0f) * 4;
    (hlen >= IP_HEADER && offset + hlen <= p.len()).then_some((offset, hlen))
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// On to output 0.
    Pass,
    /// To output 1 if it is connected, else dropped.
    Reject,
    /// Dropped.
    Drop,
}

/// Runs `check` on every packet of `batch` and returns those that pass;
/// rejected packets are pushed out of output 1 when the element has one.
fn sort_batch(mut batch: PacketBatch, ctx: &mut Ctx<'_>, mut check: impl FnMut(&mut Packet) -> Verdict) -> PacketBatch {
    // The common case, every packet good, moves nothing: the batch goes
    // on as it came.
    let mut first_other = None;
    for (i, p) in batch.iter_mut().enumerate() {
        let verdict = check(p);
        if verdict != Verdict::Pass {
            first_other = Some((i, verdict));
            break;
        }
    }
    let Some((bad, bad_verdict)) = first_other else {
        return batch;
    };
    let n = batch.len();
    let mut pass = PacketBatch::with_capacity(n);
    let mut reject = PacketBatch::with_capacity(0);
    let mut i = 0;
    batch.consume_front(n, |mut p| {
        // Packets before `bad` passed already; after it, not yet checked.
        let verdict = match i.cmp(&bad) {
            std::cmp::Ordering::Less => Verdict::Pass,
            std::cmp::Ordering::Equal => bad_verdict,
            std::cmp::Ordering::Greater => check(&mut p),
        };
        i += 1;
        match verdict {
            Verdict::Pass => pass.push(p),
            Verdict::Reject => reject.push(p),
            Verdict::Drop => {}
        }
    });
    if ctx.noutputs() > 1 {
        ctx.push(1, reject);
    }
    pass
}

/// Applies `edit` to the IP header of every packet; packets without a
/// usable header are dropped and counted in `drops`.
fn edit_headers(
    batch: PacketBatch,
    ctx: &mut Ctx<'_>,
    drops: &mut u64,
    mut edit: impl FnMut(&mut [u8]),
) -> PacketBatch {
    sort_batch(batch, ctx, |p| match ip_header(p) {
        Some((offset, hlen)) => {
            edit(&mut p[offset..offset + hlen]);
            Verdict::Pass
        }
        None => {
            *drops += 1;
            Verdict::Drop
        }
    })
}

fn parse_with<T>(
    value: Option<String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    value.map(|v| parse(&v).map_err(|e| format!("{key}: {e}"))).transpose()
}

fn byte(text: &str) -> Result<u8, String> {
    let v = args::unsigned(text)?;
    u8::try_from(v).map_err(|_| format!("'{}' is larger than 255", text.trim()))
}

/// A space-separated list of IP addresses.
fn address_list(text: &str) -> Result<Vec<[u8; 4]>, String> {
    text.split_whitespace().map(args::ip_address).collect()
}

/// An IP protocol: a number or one of the names Click knows for the
/// common ones (IANA's protocol numbers).
pub fn ip_protocol(text: &str) -> Result<u8, String> {
    const NAMES: &[(&str, u8)] = &[
        ("icmp", 1),
        ("igmp", 2),
        ("ipip", 4),
        ("tcp", 6),
        ("udp", 17),
        ("ipv6", 41),
        ("rsvp", 46),
        ("gre", 47),
        ("esp", 50),
        ("ah", 51),
        ("icmp6", 58),
        ("icmpv6", 58),
        ("sctp", 132),
    ];
    let t = text.trim();
    if let Some(&(_, n)) = NAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(t)) {
        return Ok(n);
    }
    byte(t).map_err(|_| format!("'{t}' is not an IP protocol (a number or tcp, udp, icmp, ...)"))
}

/// A UDP port: a number, a PortInfo name, or a service name
/// ([`args::ip_port`]).
pub fn ip_port(text: &str) -> Result<u16, String> {
    args::ip_port(text, 17)
}

fn dotted(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

// ---- CheckIPHeader, CheckIPHeader2, IPInputCombo's check.

/// Why CheckIPHeader refused a packet (Click's reason texts, in order).
const REASONS: [&str; 6] = [
    "tiny packet",
    "bad IP version",
    "bad IP header length",
    "bad IP length",
    "bad IP checksum",
    "bad source address",
];

/// The checks of CheckIPHeader, shared with IPInputCombo.
#[derive(Default, Clone)]
struct HeaderCheck {
    offset: usize,
    checksum: bool,
    bad_src: Vec<[u8; 4]>,
    good_dst: Vec<[u8; 4]>,
}

impl HeaderCheck {
    /// Reads BADSRC, GOODDST and INTERFACES (RFC 1812 §5.3.7: a source
    /// that is one of the router's broadcast addresses, 0.0.0.0 or
    /// 255.255.255.255 is illegal unless the packet is for the router).
    fn configure_addresses(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(list) = parse_with(a.keyword("BADSRC"), "BADSRC", address_list)? {
            self.bad_src.extend(list);
        }
        if let Some(list) = parse_with(a.keyword("GOODDST"), "GOODDST", address_list)? {
            self.good_dst.extend(list);
        }
        if let Some(text) = a.keyword("INTERFACES") {
            for item in text.split_whitespace() {
                let (addr, mask) = args::ip_prefix(item).map_err(|e| format!("INTERFACES: {e}"))?;
                let a = u32::from_be_bytes(addr);
                let m = u32::from_be_bytes(mask);
                self.bad_src.push((a | !m).to_be_bytes());
                self.good_dst.push(addr);
            }
            self.bad_src.push([0; 4]);
            self.bad_src.push([255; 4]);
        }
        Ok(())
    }

    /// Checks the header at `offset` (RFC 791 §3.1 fields, RFC 1812
    /// §5.2.2); on success marks it, trims the packet to the IP length
    /// and sets the destination annotation.
    fn check(&self, p: &mut Packet) -> Result<(), usize> {
        let offset = self.offset;
        let Some(plen) = p.len().checked_sub(offset) else {
            return Err(0);
        };
        if plen < IP_HEADER {
            return Err(0);
        }
        let ip = &p[offset..];
        if ip[0] >> 4 != 4 {
            return Err(1);
        }
        let hlen = usize::from(ip[0] & 0x0f) * 4;
        if hlen < IP_HEADER {
            return Err(2);
        }
        let len = usize::from(word(ip, 2));
        if len > plen || len < hlen {
            return Err(3);
        }
        if self.checksum && checksum(&ip[..hlen]) != 0 {
            return Err(4);
        }
        let src: [u8; 4] = ip[12..16].try_into().expect("20 bytes checked");
        let dst: [u8; 4] = ip[16..20].try_into().expect("20 bytes checked");
        if self.bad_src.contains(&src) && !self.good_dst.contains(&dst) {
            return Err(5);
        }
        // Ethernet padding and the like go: the packet ends with the IP
        // length.
        let _ = p.set_len(offset + len);
        let _ = p.set_network_header(offset, hlen);
        p.anno_mut().set_dst_ip(dst);
        Ok(())
    }
}

/// CheckIPHeader([OFFSET], keywords OFFSET, INTERFACES, BADSRC, GOODDST,
/// CHECKSUM, VERBOSE, DETAILS) and CheckIPHeader2 (CHECKSUM false by
/// default). The old syntax CheckIPHeader(BADSRC2, OFFSET) is accepted:
/// BADSRC2 is a list of bad sources to which 0.0.0.0 and 255.255.255.255
/// are added. The first bad packet is reported on standard error (every
/// one with VERBOSE). Handlers: `drops`, `drop_details` (per reason).
pub struct CheckIPHeader {
    class: &'static str,
    check: HeaderCheck,
    verbose: bool,
    drops: u64,
    reason_drops: [u64; 6],
}

impl CheckIPHeader {
    pub fn new(class: &'static str) -> CheckIPHeader {
        CheckIPHeader {
            class,
            check: HeaderCheck {
                checksum: class == "CheckIPHeader",
                ..HeaderCheck::default()
            },
            verbose: false,
            drops: 0,
            reason_drops: [0; 6],
        }
    }
}

impl Element for CheckIPHeader {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let offset = match a.keyword("OFFSET") {
            Some(v) => Some(v),
            None => match a.positional_or("OFFSET") {
                // The old syntax: a list of bad sources comes first.
                Some(first) if args::unsigned(&first).is_err() => {
                    self.check.bad_src = address_list(&first).map_err(|e| format!("BADSRC2: {e}"))?;
                    self.check.bad_src.push([0; 4]);
                    self.check.bad_src.push([255; 4]);
                    a.positional_or("OFFSET")
                }
                other => other,
            },
        };
        if let Some(v) = parse_with(offset, "OFFSET", args::unsigned)? {
            self.check.offset = v as usize;
        }
        self.check.configure_addresses(a)?;
        if let Some(v) = parse_with(a.keyword("CHECKSUM"), "CHECKSUM", args::boolean)? {
            self.check.checksum = v;
        }
        if let Some(v) = parse_with(a.keyword("VERBOSE"), "VERBOSE", args::boolean)? {
            self.verbose = v;
        }
        parse_with(a.keyword("DETAILS"), "DETAILS", args::boolean)?;
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let name = ctx.name().to_string();
        let check = &self.check;
        let (drops, reasons, verbose) = (&mut self.drops, &mut self.reason_drops, self.verbose);
        Some(sort_batch(batch, ctx, |p| match check.check(p) {
            Ok(()) => Verdict::Pass,
            Err(reason) => {
                if *drops == 0 || verbose {
                    eprintln!("{name}: IP header check failed: {}", REASONS[reason]);
                }
                *drops += 1;
                reasons[reason] += 1;
                Verdict::Reject
            }
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("drop_details", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.to_string()),
            "drop_details" => Some(
                REASONS
                    .iter()
                    .zip(self.reason_drops)
                    .map(|(text, n)| format!("{n}\t{text}\n"))
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// MarkIPHeader([OFFSET]): marks the IP header OFFSET bytes in (its length
/// from the IHL field); no other check. A packet too short to hold the
/// header it announces is dropped and counted (`drops`).
#[derive(Default)]
pub struct MarkIPHeader {
    offset: usize,
    drops: u64,
}

impl Element for MarkIPHeader {
    fn class_name(&self) -> &'static str {
        "MarkIPHeader"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = parse_with(a.positional_or("OFFSET"), "OFFSET", args::unsigned)? {
            self.offset = v as usize;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (offset, drops) = (self.offset, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let hlen = p.get(offset).map_or(0, |b| usize::from(b & 0x0f) * 4);
            if p.set_network_header(offset, hlen).is_ok() && hlen >= IP_HEADER {
                Verdict::Pass
            } else {
                *drops += 1;
                Verdict::Drop
            }
        }))
    }
    crate::drops_handler!();
}

/// StripIPHeader and UnstripIPHeader: remove everything up to the
/// transport header, or put the IP header (and what was before it) back.
/// The header marks stay. Packets without a marked header are dropped and
/// counted (`drops`).
pub struct StripIPHeader {
    unstrip: bool,
    drops: u64,
}

impl Element for StripIPHeader {
    fn class_name(&self) -> &'static str {
        if self.unstrip {
            "UnstripIPHeader"
        } else {
            "StripIPHeader"
        }
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (unstrip, drops) = (self.unstrip, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let done = if unstrip {
                match p.network_offset() {
                    Some(n) if n < 0 => p.prepend(n.unsigned_abs()).is_ok(),
                    Some(_) => true,
                    None => false,
                }
            } else {
                match p.transport_offset() {
                    Some(t) => usize::try_from(t).is_ok_and(|t| p.strip_front(t).is_ok()),
                    None => false,
                }
            };
            if done {
                Verdict::Pass
            } else {
                *drops += 1;
                Verdict::Drop
            }
        }))
    }
    crate::drops_handler!();
}

// ---- TTL, checksum, DSCP, ECN.

/// What DecIPTTL does to one header: true if the packet goes on.
fn decrement_ttl(ip: &mut [u8], multicast: bool) -> bool {
    if !multicast && (224..=239).contains(&ip[16]) {
        return true;
    }
    let ttl = ip[8];
    if ttl <= 1 {
        return false;
    }
    // RFC 1812 §5.3.1: decrement by one; RFC 1624 updates the checksum.
    let old = word(ip, 8);
    set_header_word(ip, 8, old - 0x100);
    true
}

/// DecIPTTL([ACTIVE, MULTICAST]): decrements the TTL and updates the
/// checksum incrementally; a packet whose TTL is 0 or 1 goes to output 1
/// (dropped if there is none) (RFC 1812 §5.3.1, §4.2.2.9). ACTIVE false:
/// packets pass unchanged; MULTICAST false: multicast destinations keep
/// their TTL. Handlers: `drops` (expired), `active` (rw).
pub struct DecIPTTL {
    active: bool,
    multicast: bool,
    drops: u64,
    bad: u64,
}

impl Default for DecIPTTL {
    fn default() -> DecIPTTL {
        DecIPTTL {
            active: true,
            multicast: true,
            drops: 0,
            bad: 0,
        }
    }
}

impl Element for DecIPTTL {
    fn class_name(&self) -> &'static str {
        "DecIPTTL"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = parse_with(a.keyword("ACTIVE"), "ACTIVE", args::boolean)? {
            self.active = v;
        }
        if let Some(v) = parse_with(a.keyword("MULTICAST"), "MULTICAST", args::boolean)? {
            self.multicast = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if !self.active {
            return Some(batch);
        }
        let multicast = self.multicast;
        let (drops, bad) = (&mut self.drops, &mut self.bad);
        Some(sort_batch(batch, ctx, |p| match ip_header(p) {
            Some((offset, hlen)) => {
                if decrement_ttl(&mut p[offset..offset + hlen], multicast) {
                    Verdict::Pass
                } else {
                    *drops += 1;
                    Verdict::Reject
                }
            }
            None => {
                *bad += 1;
                Verdict::Drop
            }
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("active", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.to_string()),
            "active" => Some(self.active.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "active").then(|| args::boolean(value).map(|v| self.active = v))
    }
}

/// SetIPChecksum: recomputes the header checksum (RFC 1071) of the marked
/// IP header, or of one at the front if none is marked. Packets too short
/// for the header they announce are dropped and counted (`drops`).
#[derive(Default)]
pub struct SetIPChecksum {
    drops: u64,
}

impl Element for SetIPChecksum {
    fn class_name(&self) -> &'static str {
        "SetIPChecksum"
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let drops = &mut self.drops;
        Some(sort_batch(batch, ctx, |p| {
            // The marked header, or the data's start if none is marked.
            let offset = match p.network_offset() {
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
                None => 0,
            };
            let hlen = p.get(offset).map_or(0, |b| usize::from(b & 0x0f) * 4);
            if hlen < IP_HEADER || offset + hlen > p.len() {
                if *drops == 0 {
                    eprintln!("SetIPChecksum: bad input packet");
                }
                *drops += 1;
                return Verdict::Drop;
            }
            set_ipv4_checksum(&mut p[offset..offset + hlen]);
            Verdict::Pass
        }))
    }
    crate::drops_handler!();
}

fn dscp(text: &str) -> Result<u8, String> {
    let v = args::unsigned(text)?;
    if v > 63 {
        return Err(format!("DSCP '{}' must be between 0 and 63", text.trim()));
    }
    Ok(v as u8)
}

/// SetIPDSCP(DSCP): sets the Differentiated Services Code Point, the upper
/// six bits of the TOS byte (RFC 2474 §3), keeping the ECN bits, and
/// updates the checksum incrementally. Handlers: `dscp` (rw), `drops`.
#[derive(Default)]
pub struct SetIPDSCP {
    dscp: u8,
    drops: u64,
}

impl Element for SetIPDSCP {
    fn class_name(&self) -> &'static str {
        "SetIPDSCP"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.dscp = dscp(&a.required("DSCP")?).map_err(|e| format!("DSCP: {e}"))?;
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let bits = self.dscp << 2;
        Some(edit_headers(batch, ctx, &mut self.drops, |ip| {
            let tos = (ip[1] & ECN_MASK) | bits;
            set_header_word(ip, 0, u16::from_be_bytes([ip[0], tos]));
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("dscp", true, true), ("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "dscp" => Some(self.dscp.to_string()),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "dscp").then(|| dscp(value).map(|v| self.dscp = v))
    }
}

/// MarkIPCE([FORCE]): sets the ECN field to Congestion Experienced (RFC
/// 3168 §5, "a router sets the CE codepoint ... instead of dropping") and
/// updates the checksum incrementally. A packet that is not ECN-capable
/// (ECN 0) is dropped (RFC 3168 §6.1.1), unless FORCE is true. Handler:
/// `drops`.
#[derive(Default)]
pub struct MarkIPCE {
    force: bool,
    drops: u64,
}

impl Element for MarkIPCE {
    fn class_name(&self) -> &'static str {
        "MarkIPCE"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = parse_with(a.positional_or("FORCE"), "FORCE", args::boolean)? {
            self.force = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (force, drops) = (self.force, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let Some((offset, hlen)) = ip_header(p) else {
                *drops += 1;
                return Verdict::Drop;
            };
            let ip = &mut p[offset..offset + hlen];
            match ip[1] & ECN_MASK {
                0 if !force => {
                    *drops += 1;
                    return Verdict::Drop;
                }
                ECN_CE => {}
                _ => set_header_word(ip, 0, u16::from_be_bytes([ip[0], ip[1] | ECN_CE])),
            }
            Verdict::Pass
        }))
    }
    crate::drops_handler!();
}

// ---- Encapsulation.

/// Writes a 20-byte IPv4 header (RFC 791 §3.1) at the front of `out`.
#[allow(clippy::too_many_arguments)]
pub fn write_ip_header(
    out: &mut [u8],
    tos: u8,
    total: u16,
    id: u16,
    frag: u16,
    ttl: u8,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
) {
    out[0] = 0x45;
    out[1] = tos;
    out[2..4].copy_from_slice(&total.to_be_bytes());
    out[4..6].copy_from_slice(&id.to_be_bytes());
    out[6..8].copy_from_slice(&frag.to_be_bytes());
    out[8] = ttl;
    out[9] = proto;
    out[12..16].copy_from_slice(&src);
    out[16..20].copy_from_slice(&dst);
    set_ipv4_checksum(&mut out[..IP_HEADER]);
}

/// A DST argument: an address, or `DST_ANNO` (None: the packet's
/// destination annotation).
fn destination(text: &str) -> Result<Option<[u8; 4]>, String> {
    if text.trim() == "DST_ANNO" {
        return Ok(None);
    }
    args::ip_address(text).map(Some)
}

/// IPEncap(PROTO, SRC, DST, keywords TTL, DSCP, ECT, CE, TOS, DF): puts a
/// 20-byte IP header in front of each packet: protocol PROTO (a number or
/// a name: ipip, tcp, udp, ...), source SRC, destination DST (or
/// `DST_ANNO`: the destination annotation), TTL (250), TOS (0; or DSCP
/// plus ECT (true = 1, 2) or CE), DF (false); the IP ID counts up from 0.
/// Sets the destination annotation to DST and marks the header. Packets
/// without 20 bytes of head room are dropped and counted. Handlers: `src`,
/// `dst` (rw), `drops`.
pub struct IPEncap {
    proto: u8,
    src: [u8; 4],
    dst: Option<[u8; 4]>,
    ttl: u8,
    tos: u8,
    df: bool,
    id: u16,
    drops: u64,
}

impl Default for IPEncap {
    fn default() -> IPEncap {
        IPEncap {
            proto: 0,
            src: [0; 4],
            dst: None,
            ttl: 250,
            tos: 0,
            df: false,
            id: 0,
            drops: 0,
        }
    }
}

impl Element for IPEncap {
    fn class_name(&self) -> &'static str {
        "IPEncap"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.proto = ip_protocol(&a.required("PROTO")?).map_err(|e| format!("PROTO: {e}"))?;
        self.src = args::ip_address(&a.required("SRC")?).map_err(|e| format!("SRC: {e}"))?;
        self.dst = destination(&a.required("DST")?).map_err(|e| format!("DST: {e}"))?;
        if let Some(v) = parse_with(a.keyword("TTL"), "TTL", byte)? {
            self.ttl = v;
        }
        if let Some(v) = parse_with(a.keyword("DF"), "DF", args::boolean)? {
            self.df = v;
        }
        let tos = parse_with(a.keyword("TOS"), "TOS", byte)?;
        let dscp_bits = parse_with(a.keyword("DSCP"), "DSCP", dscp)?;
        let ect = parse_with(a.keyword("ECT"), "ECT", |v| match v.trim() {
            "2" => Ok(2u8),
            other => args::boolean(other).map(u8::from),
        })?;
        let ce = parse_with(a.keyword("CE"), "CE", args::boolean)?;
        match tos {
            Some(_) if dscp_bits.is_some() || ect.is_some() || ce.is_some() => {
                return Err("TOS may not be given with DSCP, ECT or CE".into());
            }
            Some(t) => self.tos = t,
            None => {
                if ect.unwrap_or(0) != 0 && ce == Some(true) {
                    return Err("ECT and CE are exclusive".into());
                }
                let ecn = if ce == Some(true) { ECN_CE } else { ect.unwrap_or(0) };
                self.tos = (dscp_bits.unwrap_or(0) << 2) | ecn;
            }
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let frag = if self.df { IP_DF } else { 0 };
        let (proto, src, dst, ttl, tos) = (self.proto, self.src, self.dst, self.ttl, self.tos);
        let (id, drops) = (&mut self.id, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let total = p.len() + IP_HEADER;
            if total > usize::from(u16::MAX) || p.prepend(IP_HEADER).is_err() {
                *drops += 1;
                return Verdict::Drop;
            }
            let dst = dst.unwrap_or_else(|| p.anno().dst_ip());
            write_ip_header(p, tos, total as u16, *id, frag, ttl, proto, src, dst);
            *id = id.wrapping_add(1);
            p.anno_mut().set_dst_ip(dst);
            let _ = p.set_network_header(0, IP_HEADER);
            Verdict::Pass
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("src", true, true), ("dst", true, true), ("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "src" => Some(dotted(self.src)),
            "dst" => Some(self.dst.map_or_else(|| "DST_ANNO".to_string(), dotted)),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "src" => Some(args::ip_address(value).map(|v| self.src = v)),
            "dst" => Some(destination(value).map(|v| self.dst = v)),
            _ => None,
        }
    }
}

/// UDPIPEncap(SRC, SPORT, DST, DPORT, [CHECKSUM]): puts UDP (RFC 768) and
/// IP headers in front of each packet: TTL 250, TOS 0, IP ID counting up
/// from 0; the UDP checksum (pseudo-header included) unless CHECKSUM is
/// false. DST may be `DST_ANNO`. Ports are numbers or service names.
/// Handlers: `src`, `sport`, `dst`, `dport` (rw), `drops`.
pub struct UDPIPEncap {
    src: [u8; 4],
    sport: u16,
    dst: Option<[u8; 4]>,
    dport: u16,
    checksum: bool,
    id: u16,
    drops: u64,
}

impl Default for UDPIPEncap {
    fn default() -> UDPIPEncap {
        UDPIPEncap {
            src: [0; 4],
            sport: 0,
            dst: None,
            dport: 0,
            checksum: true,
            id: 0,
            drops: 0,
        }
    }
}

/// Bytes of a UDP header (RFC 768).
const UDP_HEADER: usize = 8;

impl Element for UDPIPEncap {
    fn class_name(&self) -> &'static str {
        "UDPIPEncap"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.src = args::ip_address(&a.required("SRC")?).map_err(|e| format!("SRC: {e}"))?;
        self.sport = ip_port(&a.required("SPORT")?).map_err(|e| format!("SPORT: {e}"))?;
        self.dst = destination(&a.required("DST")?).map_err(|e| format!("DST: {e}"))?;
        self.dport = ip_port(&a.required("DPORT")?).map_err(|e| format!("DPORT: {e}"))?;
        if let Some(v) = parse_with(a.positional_or("CHECKSUM"), "CHECKSUM", args::boolean)? {
            self.checksum = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (src, dst, sport, dport, with_checksum) = (self.src, self.dst, self.sport, self.dport, self.checksum);
        let (id, drops) = (&mut self.id, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let total = p.len() + IP_HEADER + UDP_HEADER;
            if total > usize::from(u16::MAX) || p.prepend(IP_HEADER + UDP_HEADER).is_err() {
                *drops += 1;
                return Verdict::Drop;
            }
            let dst = dst.unwrap_or_else(|| p.anno().dst_ip());
            write_ip_header(p, 0, total as u16, *id, 0, 250, 17, src, dst);
            *id = id.wrapping_add(1);
            let udp_len = (total - IP_HEADER) as u16;
            let udp = &mut p[IP_HEADER..];
            udp[0..2].copy_from_slice(&sport.to_be_bytes());
            udp[2..4].copy_from_slice(&dport.to_be_bytes());
            udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            if with_checksum {
                oxnet_driver::offload::set_l4_checksum(p, 0, IP_HEADER, 17);
            }
            p.anno_mut().set_dst_ip(dst);
            let _ = p.set_network_header(0, IP_HEADER);
            Verdict::Pass
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("src", true, true),
            ("sport", true, true),
            ("dst", true, true),
            ("dport", true, true),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "src" => Some(dotted(self.src)),
            "sport" => Some(self.sport.to_string()),
            "dst" => Some(self.dst.map_or_else(|| "DST_ANNO".to_string(), dotted)),
            "dport" => Some(self.dport.to_string()),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "src" => Some(args::ip_address(value).map(|v| self.src = v)),
            "sport" => Some(ip_port(value).map(|v| self.sport = v)),
            "dst" => Some(destination(value).map(|v| self.dst = v)),
            "dport" => Some(ip_port(value).map(|v| self.dport = v)),
            _ => None,
        }
    }
}

// ---- Fragmentation (RFC 791 §3.2, "Fragmentation and reassembly").

/// The options of header `ip` that every fragment carries (RFC 791 §3.1:
/// those whose copied flag, the top bit of the type, is set), padded with
/// End of Option List to a multiple of 4 bytes. No Operation is not
/// copied; a malformed option ends the list.
fn copied_options(ip: &[u8]) -> Vec<u8> {
    let hlen = usize::from(ip[0] & 0x0f) * 4;
    let options = &ip[IP_HEADER..hlen.min(ip.len())];
    let mut out = Vec::new();
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = options.get(i + 1) else { break };
                let len = usize::from(len);
                if len < 2 || i + len > options.len() {
                    break;
                }
                if kind & 0x80 != 0 {
                    out.extend_from_slice(&options[i..i + len]);
                }
                i += len;
            }
        }
    }
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// IPFragmenter(MTU, [HONOR_DF, VERBOSE], keyword HEADROOM): a packet
/// whose IP part is longer than MTU is split into fragments of at most
/// MTU bytes (RFC 791 §3.2): the first keeps the whole header and what
/// precedes it; the others get the header with only the copied options,
/// and each its offset and More Fragments flag, and its checksum. A packet
/// with DF set goes to output 1 instead (dropped if there is none), unless
/// HONOR_DF is false: then DF is cleared (and the ID changed, since the
/// sender did not expect fragments). Fragments go out in order, the
/// first first, with the original's annotations. Handlers: `drops` (DF
/// packets and packets without a header), `fragments`.
pub struct IPFragmenter {
    mtu: usize,
    honor_df: bool,
    verbose: bool,
    drops: u64,
    fragments: u64,
    /// State of the xorshift generator of IDs for DF packets fragmented
    /// anyway.
    id_state: u32,
}

impl Default for IPFragmenter {
    fn default() -> IPFragmenter {
        IPFragmenter {
            mtu: 0,
            honor_df: true,
            verbose: false,
            drops: 0,
            fragments: 0,
            id_state: 0x9e37_79b9,
        }
    }
}

impl IPFragmenter {
    fn next_id(&mut self) -> u16 {
        let mut x = self.id_state;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.id_state = x;
        x as u16
    }

    /// Fragments `p` (its IP header at `offset`, `hlen` long) into `out`;
    /// Err(p) if it must go to output 1.
    fn fragment(
        &mut self,
        mut p: Packet,
        offset: usize,
        hlen: usize,
        pool: &oxnet_driver::Mempool,
        out: &mut PacketBatch,
    ) -> Result<(), Packet> {
        let first_data = (self.mtu.saturating_sub(hlen)) & !7;
        let ip_len = usize::from(word(&p[offset..], 2)).clamp(hlen, p.len() - offset);
        let data_len = ip_len - hlen;
        let frag = word(&p[offset..], 6);
        if data_len <= first_data {
            // Only bytes past the IP length made it long: they go.
            let _ = p.set_len(offset + ip_len);
            out.push(p);
            return Ok(());
        }
        let options = copied_options(&p[offset..offset + hlen]);
        let out_hlen = IP_HEADER + options.len();
        let later_data = self.mtu.saturating_sub(out_hlen) & !7;
        if (frag & IP_DF != 0 && self.honor_df) || first_data < 8 || later_data < 8 {
            if self.verbose || self.drops < 5 {
                let ip = &p[offset..];
                eprintln!(
                    "IPFragmenter({}) DF {} {} len={}",
                    self.mtu,
                    dotted(ip[12..16].try_into().expect("header")),
                    dotted(ip[16..20].try_into().expect("header")),
                    p.len()
                );
            }
            self.drops += 1;
            return Err(p);
        }
        let mut frag = frag;
        if frag & IP_DF != 0 {
            frag &= !IP_DF;
            let id = self.next_id();
            p[offset + 4..offset + 6].copy_from_slice(&id.to_be_bytes());
        }
        let had_more = frag & IP_MF != 0;
        let base_offset = frag & IP_OFFSET_MASK;
        let mut header = [0u8; IP_HEADER];
        header.copy_from_slice(&p[offset..offset + IP_HEADER]);
        // The rest first, built from the original's bytes, then the first
        // fragment cut out of the original itself.
        let mut rest = Vec::new();
        let mut at = first_data;
        while at < data_len {
            let n = later_data.min(data_len - at);
            let Ok(mut q) = pool.alloc() else { break };
            if q.set_len(out_hlen + n).is_err() {
                break;
            }
            q.copy_meta_from(&p);
            q[..IP_HEADER].copy_from_slice(&header);
            q[IP_HEADER..out_hlen].copy_from_slice(&options);
            let start = offset + hlen + at;
            q[out_hlen..].copy_from_slice(&p[start..start + n]);
            q[0] = 0x40 | (out_hlen / 4) as u8;
            let mut f = (frag & !IP_OFFSET_MASK) | IP_MF | (base_offset + (at / 8) as u16);
            if at + n >= data_len && !had_more {
                f &= !IP_MF;
            }
            q[2..4].copy_from_slice(&((out_hlen + n) as u16).to_be_bytes());
            q[6..8].copy_from_slice(&f.to_be_bytes());
            set_ipv4_checksum(&mut q[..out_hlen]);
            let _ = q.set_network_header(0, out_hlen);
            rest.push(q);
            at += n;
        }
        let ip = &mut p[offset..offset + hlen];
        ip[2..4].copy_from_slice(&((hlen + first_data) as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&(frag | IP_MF).to_be_bytes());
        set_ipv4_checksum(ip);
        let _ = p.set_len(offset + hlen + first_data);
        out.push(p);
        self.fragments += 1 + rest.len() as u64;
        for q in rest {
            out.push(q);
        }
        Ok(())
    }
}

impl Element for IPFragmenter {
    fn class_name(&self) -> &'static str {
        "IPFragmenter"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.mtu = args::unsigned(&a.required("MTU")?).map_err(|e| format!("MTU: {e}"))? as usize;
        if self.mtu < 8 {
            return Err("MTU must be at least 8".into());
        }
        if let Some(v) = parse_with(a.positional_or("HONOR_DF"), "HONOR_DF", args::boolean)? {
            self.honor_df = v;
        }
        if let Some(v) = parse_with(a.positional_or("VERBOSE"), "VERBOSE", args::boolean)? {
            self.verbose = v;
        }
        // Fragments come from the router's pool, with its head room.
        parse_with(a.keyword("HEADROOM"), "HEADROOM", args::unsigned)?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let n = batch.len();
        let mut out = PacketBatch::with_capacity(n);
        let mut df = PacketBatch::with_capacity(0);
        let mtu = self.mtu;
        batch.consume_front(n, |p| {
            let Some((offset, hlen)) = ip_header(&p) else {
                self.drops += 1;
                return;
            };
            if p.len() - offset <= mtu {
                out.push(p);
            } else if let Err(p) = self.fragment(p, offset, hlen, ctx.pool(), &mut out) {
                df.push(p);
            }
        });
        ctx.push(0, out);
        if ctx.noutputs() > 1 {
            ctx.push(1, df);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("fragments", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.to_string()),
            "fragments" => Some(self.fragments.to_string()),
            _ => None,
        }
    }
}

/// How long an incomplete datagram waits for its missing fragments
/// (Click's 30 seconds; RFC 791 §3.2 suggests a timer of this order).
const REASSEMBLY_TIMEOUT_US: u64 = 30_000_000;

/// Fragments identify their datagram by source, destination, protocol
/// and identification (RFC 791 §3.2).
type DatagramKey = ([u8; 4], [u8; 4], u8, u16);

/// One datagram being reassembled.
struct Partial {
    /// The fragment at offset 0 (its header and what precedes it are the
    /// reassembled packet's), once it came.
    first: Option<Packet>,
    /// The header of the first fragment that came, if not at offset 0
    /// (for a datagram whose offset-0 fragment never comes).
    other: Option<Packet>,
    /// The payload so far, at its offsets.
    data: Vec<u8>,
    /// Byte ranges received, sorted and merged.
    have: Vec<(usize, usize)>,
    /// The payload length, known once the last fragment (MF clear) came.
    total: Option<usize>,
    /// When a fragment last came (router microseconds).
    last_us: u64,
    /// The largest fragment seen (for MAX_MTU_ANNO).
    max_fragment: usize,
}

impl Partial {
    fn memory(&self) -> usize {
        self.data.capacity() + 2 * 2048
    }

    fn add_range(&mut self, start: usize, end: usize) {
        self.have.push((start, end));
        self.have.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.have.len());
        for &(s, e) in &self.have {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.have = merged;
    }

    fn complete(&self) -> bool {
        self.first.is_some()
            && self
                .total
                .is_some_and(|t| self.have == [(0, t)] || (t == 0 && self.have.is_empty()))
    }
}

/// IPReassembler([keywords HIMEM, MAX_MTU_ANNO]): packets that are not
/// fragments pass on output 0. Fragments (RFC 791 §3.2) are held until
/// their datagram is whole, then it leaves on output 0: the header (and
/// the bytes before it) of the fragment at offset 0, with the total
/// length, no MF and no offset, a new checksum, the fragments' payloads
/// at their offsets (later data overwrites earlier). A datagram that got
/// no fragment for 30 seconds is dropped, or, if output 1 exists, pushed
/// there with what came at its place (zeros in the holes). When the held
/// fragments pass HIMEM bytes (256K), the oldest datagrams are dropped
/// until they are under 3/4 of it. MAX_MTU_ANNO: a user annotation offset
/// where the largest fragment's length is written (2 bytes, network
/// order). A datagram longer than a packet buffer is dropped. Handlers:
/// `drops` (fragments and datagrams dropped, packets without a header),
/// `mem` (bytes held).
pub struct IPReassembler {
    partial: std::collections::HashMap<DatagramKey, Partial>,
    himem: usize,
    max_mtu_anno: Option<usize>,
    drops: u64,
    timer: Option<crate::timer::TimerId>,
}

impl Default for IPReassembler {
    fn default() -> IPReassembler {
        IPReassembler {
            partial: std::collections::HashMap::new(),
            himem: 256 * 1024,
            max_mtu_anno: None,
            drops: 0,
            timer: None,
        }
    }
}

impl IPReassembler {
    fn memory(&self) -> usize {
        self.partial.values().map(Partial::memory).sum()
    }

    /// Takes one packet; returns a packet for output 0 if one is ready.
    fn take(&mut self, p: Packet, now: u64, pool: &oxnet_driver::Mempool) -> Option<Packet> {
        let Some((offset, hlen)) = ip_header(&p) else {
            self.drops += 1;
            return None;
        };
        let ip = &p[offset..];
        let frag = word(ip, 6);
        if frag & (IP_MF | IP_OFFSET_MASK) == 0 {
            return Some(p);
        }
        let ip_len = usize::from(word(ip, 2)).clamp(hlen, p.len() - offset);
        let start = usize::from(frag & IP_OFFSET_MASK) * 8;
        let length = ip_len - hlen;
        let end = start + length;
        // A fragment whose data would pass 65535 bytes of datagram, or a
        // non-last fragment whose length is not a multiple of 8, is bad.
        if end + hlen > usize::from(u16::MAX) || (frag & IP_MF != 0 && length % 8 != 0) {
            self.drops += 1;
            return None;
        }
        let key: DatagramKey = (
            ip[12..16].try_into().expect("header"),
            ip[16..20].try_into().expect("header"),
            ip[9],
            word(ip, 4),
        );
        let payload = offset + hlen..offset + hlen + length;
        let mut partial = match self.partial.remove(&key) {
            Some(partial) => partial,
            None => Partial {
                first: None,
                other: None,
                data: Vec::new(),
                have: Vec::new(),
                total: None,
                last_us: now,
                max_fragment: 0,
            },
        };
        partial.last_us = now;
        partial.max_fragment = partial.max_fragment.max(ip_len);
        if partial.data.len() < end {
            partial.data.resize(end, 0);
        }
        partial.data[start..end].copy_from_slice(&p[payload]);
        if length > 0 {
            partial.add_range(start, end);
        }
        if frag & IP_MF == 0 {
            partial.total = Some(end);
        }
        let mut header = p;
        let _ = header.set_len(offset + hlen);
        if start == 0 {
            partial.first = Some(header);
        } else if partial.other.is_none() {
            partial.other = Some(header);
        }
        if partial.complete() {
            return self.finish(partial, pool, false);
        }
        self.partial.insert(key, partial);
        self.enforce_himem();
        None
    }

    /// Builds the datagram of `partial` (holes as zeros when `incomplete`).
    fn finish(&mut self, partial: Partial, pool: &oxnet_driver::Mempool, incomplete: bool) -> Option<Packet> {
        let Some(first) = partial.first.as_ref().or(partial.other.as_ref().filter(|_| incomplete)) else {
            self.drops += 1;
            return None;
        };
        let Some((offset, hlen)) = ip_header(first) else {
            self.drops += 1;
            return None;
        };
        let total = partial.total.unwrap_or(partial.data.len()).max(partial.data.len());
        let Ok(mut q) = pool.alloc() else {
            self.drops += 1;
            return None;
        };
        if q.set_len(offset + hlen + total).is_err() {
            self.drops += 1;
            return None;
        }
        q.copy_meta_from(first);
        q[..offset + hlen].copy_from_slice(&first[..offset + hlen]);
        q[offset + hlen..offset + hlen + partial.data.len()].copy_from_slice(&partial.data);
        let ip = &mut q[offset..offset + hlen];
        ip[2..4].copy_from_slice(&((hlen + total) as u16).to_be_bytes());
        let flags = word(ip, 6) & !(IP_MF | IP_OFFSET_MASK);
        ip[6..8].copy_from_slice(&flags.to_be_bytes());
        set_ipv4_checksum(ip);
        let _ = q.set_network_header(offset, hlen);
        if let Some(at) = self.max_mtu_anno {
            q.anno_mut().area[at..at + 2].copy_from_slice(&(partial.max_fragment as u16).to_be_bytes());
        }
        Some(q)
    }

    /// Drops the oldest datagrams while more than HIMEM bytes are held,
    /// down to 3/4 of HIMEM.
    fn enforce_himem(&mut self) {
        if self.memory() <= self.himem {
            return;
        }
        while self.memory() > self.himem * 3 / 4 {
            let Some(oldest) = self.partial.iter().min_by_key(|(_, p)| p.last_us).map(|(k, _)| *k) else {
                break;
            };
            self.partial.remove(&oldest);
            self.drops += 1;
        }
    }
}

impl Element for IPReassembler {
    fn class_name(&self) -> &'static str {
        "IPReassembler"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = parse_with(a.keyword("HIMEM"), "HIMEM", args::unsigned)? {
            self.himem = v as usize;
        }
        if let Some(v) = parse_with(a.keyword("MAX_MTU_ANNO"), "MAX_MTU_ANNO", args::unsigned)? {
            let at = v as usize;
            if at + 2 > oxnet_driver::packet::ANNO_AREA {
                return Err(format!("MAX_MTU_ANNO: offset {at} is outside the annotation area"));
            }
            self.max_mtu_anno = Some(at);
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let now = ctx.now_us();
        let n = batch.len();
        let mut out = PacketBatch::with_capacity(n);
        batch.consume_front(n, |p| {
            if let Some(q) = self.take(p, now, ctx.pool()) {
                out.push(q);
            }
        });
        ctx.push(0, out);
        if !self.partial.is_empty() && self.timer.is_none() {
            self.timer = Some(ctx.schedule_after_us(REASSEMBLY_TIMEOUT_US));
        }
    }
    fn run_timer(&mut self, _timer: crate::timer::TimerId, ctx: &mut Ctx<'_>) {
        self.timer = None;
        let now = ctx.now_us();
        let expired: Vec<DatagramKey> = self
            .partial
            .iter()
            .filter(|(_, p)| now.saturating_sub(p.last_us) >= REASSEMBLY_TIMEOUT_US)
            .map(|(k, _)| *k)
            .collect();
        let mut incomplete = PacketBatch::with_capacity(expired.len());
        for key in expired {
            let partial = self.partial.remove(&key).expect("listed");
            self.drops += 1;
            if ctx.noutputs() > 1 {
                if let Some(q) = self.finish(partial, ctx.pool(), true) {
                    incomplete.push(q);
                }
            }
        }
        if ctx.noutputs() > 1 {
            ctx.push(1, incomplete);
        }
        if let Some(next) = self.partial.values().map(|p| p.last_us + REASSEMBLY_TIMEOUT_US).min() {
            self.timer = Some(ctx.schedule_after_us(next.saturating_sub(now).max(1)));
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("mem", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.drops.to_string()),
            "mem" => Some(self.memory().to_string()),
            _ => None,
        }
    }
}

// ---- Router options (RFC 791 §3.1; RFC 1812 §5.2.4, §4.2.2.2).

/// Milliseconds since midnight UT, the time format of the Timestamp
/// option (RFC 791 §3.1). Read from the system clock: the option asks for
/// wall-clock time, which the router's clock is not.
fn ms_since_midnight() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ((now.as_secs() % 86_400) * 1000 + u64::from(now.subsec_millis())) as u32
}

/// Fills the Record Route and Timestamp options of header `ip` (RFC 791
/// §3.1) with `me` (and, for prespecified timestamps, only when the
/// address is one of `mine`). Ok(changed) or Err(offset of the bad byte).
fn gateway_options(ip: &mut [u8], me: [u8; 4], mine: &[[u8; 4]], now_ms: u32) -> Result<bool, usize> {
    let hlen = ip.len();
    let mut changed = false;
    let mut i = IP_HEADER;
    while i < hlen {
        let kind = ip[i];
        match kind {
            0 => break,
            1 => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(*ip.get(i + 1).ok_or(i + 1)?);
        if len < 2 || i + len > hlen {
            return Err(i + 1);
        }
        let pointer = usize::from(*ip.get(i + 2).unwrap_or(&0));
        match kind {
            // Record Route: the pointer is 1-origin; a full route is left
            // as it is.
            7 => {
                let p = pointer.wrapping_sub(1);
                if (3..).contains(&p) && p + 4 <= len {
                    ip[i + p..i + p + 4].copy_from_slice(&me);
                    ip[i + 2] += 4;
                    changed = true;
                } else if p != len {
                    return Err(i + 2);
                }
            }
            // Internet Timestamp: flag 0 timestamps only, 1 address and
            // timestamp, 3 prespecified addresses; a full option counts
            // an overflow instead.
            68 => {
                if len < 4 {
                    return Err(i + 1);
                }
                let p = pointer.wrapping_sub(1);
                let overflow = ip[i + 3] >> 4;
                let flag = ip[i + 3] & 0x0f;
                let stamp = now_ms.to_be_bytes();
                let mut overflowed = false;
                if !(4..=40).contains(&p) {
                    return Err(i + 2);
                } else if flag == 0 {
                    if p + 4 <= len {
                        ip[i + p..i + p + 4].copy_from_slice(&stamp);
                        ip[i + 2] += 4;
                    } else {
                        overflowed = true;
                    }
                } else if flag == 1 {
                    if p + 8 <= len {
                        ip[i + p..i + p + 4].copy_from_slice(&me);
                        ip[i + p + 4..i + p + 8].copy_from_slice(&stamp);
                        ip[i + 2] += 8;
                    } else {
                        overflowed = true;
                    }
                } else if flag == 3 && p + 8 <= len {
                    let addr: [u8; 4] = ip[i + p..i + p + 4].try_into().expect("in range");
                    if addr == me || mine.contains(&addr) {
                        ip[i + p + 4..i + p + 8].copy_from_slice(&stamp);
                        ip[i + 2] += 8;
                    }
                } else if flag != 3 {
                    return Err(i + 3);
                }
                if overflowed {
                    if overflow == 15 {
                        return Err(i + 3);
                    }
                    ip[i + 3] = ((overflow + 1) << 4) | flag;
                }
                changed = true;
            }
            _ => {}
        }
        i += len;
    }
    if changed {
        set_ipv4_checksum(ip);
    }
    Ok(changed)
}

/// IPGWOptions(MYADDR, [OTHERADDRS]): processes the options every router
/// processes (RFC 1812 §5.2.4): Record Route gets MYADDR, the address of
/// the outgoing interface (RFC 1812 §4.2.2.2), Timestamp gets the time
/// (and MYADDR, or a prespecified address among MYADDR and OTHERADDRS).
/// The checksum is recomputed if the header changed. A malformed option
/// sends the packet to output 1 (dropped if there is none) with the ICMP
/// Parameter Problem annotation pointing at the bad byte. Handler: `drops`.
#[derive(Default)]
pub struct IPGWOptions {
    me: [u8; 4],
    others: Vec<[u8; 4]>,
    drops: u64,
}

impl IPGWOptions {
    fn process(&mut self, p: &mut Packet) -> Verdict {
        let Some((offset, hlen)) = ip_header(p) else {
            self.drops += 1;
            return Verdict::Drop;
        };
        if hlen == IP_HEADER {
            return Verdict::Pass;
        }
        match gateway_options(
            &mut p[offset..offset + hlen],
            self.me,
            &self.others,
            ms_since_midnight(),
        ) {
            Ok(_) => Verdict::Pass,
            Err(at) => {
                self.drops += 1;
                p.anno_mut().area[ICMP_PARAMPROB_ANNO] = at as u8;
                Verdict::Reject
            }
        }
    }
}

impl Element for IPGWOptions {
    fn class_name(&self) -> &'static str {
        "IPGWOptions"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.me = args::ip_address(&a.required("MYADDR")?).map_err(|e| format!("MYADDR: {e}"))?;
        if let Some(list) = parse_with(a.positional_or("OTHERADDRS"), "OTHERADDRS", address_list)? {
            self.others = list;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        Some(sort_batch(batch, ctx, |p| self.process(p)))
    }
    crate::drops_handler!();
}

/// Sets the source of a packet whose Fix IP Source annotation is set.
fn fix_source(p: &mut Packet, me: [u8; 4]) {
    if p.anno().area[FIX_IP_SRC_ANNO] == 0 {
        return;
    }
    p.anno_mut().area[FIX_IP_SRC_ANNO] = 0;
    if let Some((offset, hlen)) = ip_header(p) {
        let ip = &mut p[offset..offset + hlen];
        ip[12..16].copy_from_slice(&me);
        set_ipv4_checksum(ip);
    }
}

/// FixIPSrc(IPADDR): a packet whose Fix IP Source annotation is set (by
/// ICMPError: RFC 1812 §4.3.2.4 wants the outgoing interface's address as
/// the source) gets IPADDR as its source and a new checksum; the
/// annotation is cleared.
#[derive(Default)]
pub struct FixIPSrc {
    me: [u8; 4],
}

impl Element for FixIPSrc {
    fn class_name(&self) -> &'static str {
        "FixIPSrc"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.me = args::ip_address(&a.required("IPADDR")?).map_err(|e| format!("IPADDR: {e}"))?;
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        for p in batch.iter_mut() {
            fix_source(p, self.me);
        }
        Some(batch)
    }
}

// ---- Address annotations.

/// An ANNO argument: a byte offset in the annotation area where a 4-byte
/// address fits, or DST_IP / DST_IP_ANNO (offset 0).
fn anno_offset(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let offset = match t {
        "DST_IP" | "DST_IP_ANNO" => 0,
        _ => args::unsigned(t).map_err(|_| format!("'{t}' is not an annotation (DST_IP or a byte offset)"))? as usize,
    };
    if offset + 4 > oxnet_driver::packet::ANNO_AREA {
        return Err(format!("annotation offset {offset} leaves no room for an address"));
    }
    Ok(offset)
}

/// GetIPAddress(OFFSET, [ANNO], keyword IP): copies the 4 bytes at OFFSET
/// (usually 16, the destination of an IP header at the front) into the
/// address annotation ANNO (the destination IP annotation by default).
/// Instead of OFFSET, IP `src` or `dst` takes the marked IP header's
/// source or destination. Packets too short (or without a marked header)
/// are dropped and counted (`drops`).
#[derive(Default)]
pub struct GetIPAddress {
    /// Offset from the data start, or from the IP header if `from_header`.
    offset: usize,
    from_header: bool,
    anno: usize,
    drops: u64,
}

impl Element for GetIPAddress {
    fn class_name(&self) -> &'static str {
        "GetIPAddress"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let ip = a.keyword("IP");
        let offset = parse_with(a.positional_or("OFFSET"), "OFFSET", args::unsigned)?;
        if let Some(v) = parse_with(a.positional_or("ANNO"), "ANNO", anno_offset)? {
            self.anno = v;
        }
        match (offset, ip.as_deref().map(str::trim)) {
            (Some(o), None) => self.offset = o as usize,
            (None, Some("src")) => (self.offset, self.from_header) = (12, true),
            (None, Some("dst")) => (self.offset, self.from_header) = (16, true),
            (None, Some(other)) => return Err(format!("IP: '{other}' is neither src nor dst")),
            _ => return Err("set one of OFFSET, IP".into()),
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (offset, from_header, anno, drops) = (self.offset, self.from_header, self.anno, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            let start = if from_header {
                match ip_header(p) {
                    Some((o, _)) => o + offset,
                    None => usize::MAX,
                }
            } else {
                offset
            };
            let Some(bytes) = start.checked_add(4).and_then(|end| p.get(start..end)) else {
                *drops += 1;
                return Verdict::Drop;
            };
            let addr: [u8; 4] = bytes.try_into().expect("4 bytes");
            p.anno_mut().area[anno..anno + 4].copy_from_slice(&addr);
            Verdict::Pass
        }))
    }
    crate::drops_handler!();
}

/// SetIPAddress(ADDR, [ANNO]): sets the address annotation ANNO (the
/// destination IP annotation by default) of every packet to ADDR.
/// Handler: `addr` (rw).
#[derive(Default)]
pub struct SetIPAddress {
    addr: [u8; 4],
    anno: usize,
}

impl Element for SetIPAddress {
    fn class_name(&self) -> &'static str {
        "SetIPAddress"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.addr = args::ip_address(&a.required("ADDR")?).map_err(|e| format!("ADDR: {e}"))?;
        if let Some(v) = parse_with(a.positional_or("ANNO"), "ANNO", anno_offset)? {
            self.anno = v;
        }
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        for p in batch.iter_mut() {
            p.anno_mut().area[self.anno..self.anno + 4].copy_from_slice(&self.addr);
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("addr", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "addr").then(|| dotted(self.addr))
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "addr").then(|| args::ip_address(value).map(|v| self.addr = v))
    }
}

// ---- The combos.

/// Bytes of an Ethernet header (IEEE 802.3), which IPInputCombo strips.
const ETHER_HEADER: usize = 14;

/// IPInputCombo(COLOR, [BADSRC], keywords INTERFACES, BADSRC, GOODDST):
/// one element for `Paint(COLOR) -> Strip(14) -> CheckIPHeader(...) ->
/// GetIPAddress(16)`. Packets that fail the check are dropped and counted
/// (`drops`).
#[derive(Default)]
pub struct IPInputCombo {
    color: u8,
    check: HeaderCheck,
    drops: u64,
}

impl Element for IPInputCombo {
    fn class_name(&self) -> &'static str {
        "IPInputCombo"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.color = byte(&a.required("COLOR")?).map_err(|e| format!("COLOR: {e}"))?;
        self.check.checksum = true;
        if let Some(list) = parse_with(a.positional_or("BADSRC"), "BADSRC", address_list)? {
            self.check.bad_src = list;
            self.check.bad_src.push([0; 4]);
            self.check.bad_src.push([255; 4]);
        }
        self.check.configure_addresses(a)
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (color, check, drops) = (self.color, &self.check, &mut self.drops);
        Some(sort_batch(batch, ctx, |p| {
            p.anno_mut().set_paint(color);
            if p.strip_front(ETHER_HEADER).is_err() || check.check(p).is_err() {
                *drops += 1;
                return Verdict::Drop;
            }
            Verdict::Pass
        }))
    }
    crate::drops_handler!();
}

/// IPOutputCombo(COLOR, IPADDR, MTU): one element for `DropBroadcasts ->
/// PaintTee(COLOR) -> IPGWOptions(IPADDR) -> FixIPSrc(IPADDR) -> DecIPTTL
/// -> CheckLength(MTU)`. Output 0: packets that pass; 1: copies of
/// packets painted COLOR (they would leave by the interface they came
/// in on: ICMP redirect, RFC 1812 §5.2.7.2); 2: bad options; 3: expired
/// TTL; 4: longer than MTU. Link-level broadcasts are dropped and counted
/// (`drops`).
#[derive(Default)]
pub struct IPOutputCombo {
    color: u8,
    options: IPGWOptions,
    mtu: usize,
    drops: u64,
}

impl Element for IPOutputCombo {
    fn class_name(&self) -> &'static str {
        "IPOutputCombo"
    }
    fn port_count(&self) -> &'static str {
        "1/5"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.color = byte(&a.required("COLOR")?).map_err(|e| format!("COLOR: {e}"))?;
        self.options.me = args::ip_address(&a.required("IPADDR")?).map_err(|e| format!("IPADDR: {e}"))?;
        self.mtu = args::unsigned(&a.required("MTU")?).map_err(|e| format!("MTU: {e}"))? as usize;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let n = batch.len();
        let mut outs: Vec<PacketBatch> = (0..5).map(|_| PacketBatch::with_capacity(0)).collect();
        let me = self.options.me;
        batch.consume_front(n, |mut p| {
            if p.anno().packet_type == PACKET_BROADCAST {
                self.drops += 1;
                return;
            }
            if p.anno().paint() == self.color {
                if let Ok(mut copy) = ctx.pool().alloc() {
                    if copy.set_len(p.len()).is_ok() {
                        copy.copy_from_slice(&p);
                        copy.copy_meta_from(&p);
                        outs[1].push(copy);
                    }
                }
            }
            match self.options.process(&mut p) {
                Verdict::Pass => {}
                Verdict::Reject => return outs[2].push(p),
                Verdict::Drop => return,
            }
            fix_source(&mut p, me);
            let Some((offset, hlen)) = ip_header(&p) else { return };
            if !decrement_ttl(&mut p[offset..offset + hlen], true) {
                return outs[3].push(p);
            }
            let k = if p.len() > self.mtu { 4 } else { 0 };
            outs[k].push(p);
        });
        for (k, b) in outs.into_iter().enumerate() {
            ctx.push(k, b);
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "drops").then(|| (self.drops + self.options.drops).to_string())
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "CheckIPHeader",
        "CheckIPHeader2",
        "DecIPTTL",
        "FixIPSrc",
        "GetIPAddress",
        "IPEncap",
        "IPFragmenter",
        "IPGWOptions",
        "IPInputCombo",
        "IPOutputCombo",
        "IPReassembler",
        "MarkIPCE",
        "MarkIPHeader",
        "SetIPAddress",
        "SetIPChecksum",
        "SetIPDSCP",
        "StripIPHeader",
        "UDPIPEncap",
        "UnstripIPHeader",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "CheckIPHeader" | "CheckIPHeader2" => Box::new(CheckIPHeader::new(if class == "CheckIPHeader" {
            "CheckIPHeader"
        } else {
            "CheckIPHeader2"
        })),
        "MarkIPHeader" => Box::<MarkIPHeader>::default(),
        "StripIPHeader" => Box::new(StripIPHeader {
            unstrip: false,
            drops: 0,
        }),
        "UnstripIPHeader" => Box::new(StripIPHeader {
            unstrip: true,
            drops: 0,
        }),
        "DecIPTTL" => Box::<DecIPTTL>::default(),
        "SetIPChecksum" => Box::<SetIPChecksum>::default(),
        "SetIPDSCP" => Box::<SetIPDSCP>::default(),
        "MarkIPCE" => Box::<MarkIPCE>::default(),
        "IPEncap" => Box::<IPEncap>::default(),
        "UDPIPEncap" => Box::<UDPIPEncap>::default(),
        "IPFragmenter" => Box::<IPFragmenter>::default(),
        "IPGWOptions" => Box::<IPGWOptions>::default(),
        "IPReassembler" => Box::<IPReassembler>::default(),
        "FixIPSrc" => Box::<FixIPSrc>::default(),
        "GetIPAddress" => Box::<GetIPAddress>::default(),
        "SetIPAddress" => Box::<SetIPAddress>::default(),
        "IPInputCombo" => Box::<IPInputCombo>::default(),
        "IPOutputCombo" => Box::<IPOutputCombo>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    /// A 20-byte header plus `payload` zero bytes, checksum set.
    fn header(ttl: u8, tos: u8, payload: usize) -> Vec<u8> {
        let mut h = vec![0u8; IP_HEADER + payload];
        write_ip_header(
            &mut h,
            tos,
            (IP_HEADER + payload) as u16,
            0x1234,
            0,
            ttl,
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
        );
        h
    }

    fn packet(pool: &Mempool, data: &[u8]) -> Packet {
        let mut p = pool.alloc().unwrap();
        p.set_len(data.len()).unwrap();
        p.copy_from_slice(data);
        p
    }

    fn run(config: &str) -> crate::Router {
        let mut router = crate::build("test", config, &[]).unwrap();
        router.run(&|| false);
        router
    }

    fn handler(router: &crate::Router, spec: &str) -> String {
        let (element, name) = spec.split_once('.').unwrap();
        router.read_handler(router.find(element).unwrap(), name).unwrap()
    }

    #[test]
    fn incremental_checksum_equals_a_full_recomputation() {
        // RFC 1624 eq. 3 against RFC 1071 over many headers and edits.
        let mut x = 0x1234_5678u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for _ in 0..2000 {
            let mut h: Vec<u8> = (0..IP_HEADER).map(|_| next() as u8).collect();
            set_ipv4_checksum(&mut h);
            let at = (next() as usize % 10) * 2;
            if at == 10 {
                continue;
            }
            set_header_word(&mut h, at, next() as u16);
            assert_eq!(checksum(&h), 0, "header {h:02x?}");
        }
    }

    #[test]
    fn header_check_reasons_in_clicks_order() {
        let pool = Mempool::new("t", 16, MemoryKind::Plain).unwrap();
        let check = HeaderCheck {
            checksum: true,
            bad_src: vec![[10, 0, 0, 1]],
            ..HeaderCheck::default()
        };
        let good = header(64, 0, 8);
        let try_it = |data: &[u8]| check.check(&mut packet(&pool, data));
        assert_eq!(try_it(&good[..19]), Err(0));
        let mut v6 = good.clone();
        v6[0] = 0x65;
        assert_eq!(try_it(&v6), Err(1));
        let mut short = good.clone();
        short[0] = 0x44;
        assert_eq!(try_it(&short), Err(2));
        assert_eq!(try_it(&good[..27]), Err(3), "IP length beyond the packet");
        let mut bad_sum = good.clone();
        bad_sum[10] ^= 1;
        assert_eq!(try_it(&bad_sum), Err(4));
        assert_eq!(try_it(&good), Err(5), "10.0.0.1 is a bad source");
        let check = HeaderCheck {
            checksum: true,
            ..HeaderCheck::default()
        };
        // Padding after the IP length goes; the header is marked and the
        // destination annotation set.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0xee; 6]);
        let mut p = packet(&pool, &padded);
        check.check(&mut p).unwrap();
        assert_eq!(p.len(), 28);
        assert_eq!(ip_header(&p), Some((0, 20)));
        assert_eq!(p.anno().dst_ip(), [10, 0, 0, 2]);
    }

    #[test]
    fn check_ip_header_counts_and_sends_bad_packets_to_output_1() {
        // One good packet and one with a broken checksum, 3 times each.
        let good: String = header(64, 0, 4).iter().map(|b| format!("{b:02x}")).collect();
        let mut bad = header(64, 0, 4);
        bad[11] ^= 0xff;
        let bad: String = bad.iter().map(|b| format!("{b:02x}")).collect();
        let r = run(&format!(
            "InfiniteSource(DATA \\<{good}>, LIMIT 3, STOP true) -> c :: CheckIPHeader -> ok :: Counter -> Discard;
             InfiniteSource(DATA \\<{bad}>, LIMIT 3) -> c; c[1] -> no :: Counter -> Discard;"
        ));
        assert_eq!(handler(&r, "ok.count"), "3");
        assert_eq!(handler(&r, "no.count"), "3");
        assert_eq!(handler(&r, "c.drops"), "3");
        assert!(handler(&r, "c.drop_details").contains("3\tbad IP checksum\n"));
    }

    #[test]
    fn ttl_decrements_with_a_valid_checksum_and_expires_at_one() {
        let mut h = header(64, 0, 0);
        assert!(decrement_ttl(&mut h, true));
        assert_eq!(h[8], 63);
        assert_eq!(checksum(&h), 0);
        let mut h = header(1, 0, 0);
        assert!(!decrement_ttl(&mut h, true));
        assert_eq!(h[8], 1, "an expired packet is left as it was");
        let mut m = header(1, 0, 0);
        m[16] = 224;
        set_ipv4_checksum(&mut m);
        assert!(decrement_ttl(&mut m, false), "MULTICAST false: multicast passes");
        let ttl: String = header(1, 0, 0).iter().map(|b| format!("{b:02x}")).collect();
        let r = run(&format!(
            "InfiniteSource(DATA \\<{ttl}>, LIMIT 2, STOP true) -> MarkIPHeader -> d :: DecIPTTL -> Discard;
             d[1] -> expired :: Counter -> Discard;"
        ));
        assert_eq!(handler(&r, "expired.count"), "2");
        assert_eq!(handler(&r, "d.drops"), "2");
    }

    #[test]
    fn dscp_and_ce_keep_the_other_tos_bits_and_the_checksum_valid() {
        let r = run(
            "InfiniteSource(DATA \\<45010014 00000000 40110000 0a000001 0a000002>, LIMIT 2, STOP true)
                -> SetIPChecksum -> MarkIPHeader -> s :: SetIPDSCP(46) -> MarkIPCE -> CheckIPHeader
                -> c :: Counter -> Discard;",
        );
        // ECT(1) passes MarkIPCE; the checksum checks after both edits.
        assert_eq!(handler(&r, "c.count"), "2");
        assert_eq!(handler(&r, "s.dscp"), "46");
        let mut h = header(64, 0x01, 0);
        let new = u16::from_be_bytes([h[0], (46 << 2) | (h[1] & ECN_MASK)]);
        set_header_word(&mut h, 0, new);
        assert_eq!(h[1], 0xb9);
        assert_eq!(checksum(&h), 0);
        // Not ECN-capable: dropped, unless FORCE.
        let r = run(
            "InfiniteSource(DATA \\<45000014 00000000 40110000 0a000001 0a000002>, LIMIT 2, STOP true)
                -> SetIPChecksum -> MarkIPHeader -> m :: MarkIPCE -> c :: Counter -> Discard;",
        );
        assert_eq!(
            (handler(&r, "c.count"), handler(&r, "m.drops")),
            ("0".into(), "2".into())
        );
    }

    #[test]
    fn copied_options_keep_only_the_copy_flag_options() {
        // NOP, Security (130, copied, 11 bytes), Record Route (7, not
        // copied, 7 bytes), EOL.
        let mut h = vec![0x4a, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        h.push(1);
        h.extend_from_slice(&[130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        h.extend_from_slice(&[7, 7, 4, 0, 0, 0, 0]);
        h.push(0);
        assert_eq!(h.len(), 40);
        let copied = copied_options(&h);
        assert_eq!(copied, [130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]);
        // A zero length ends the list (Click's IPFragmenter-02).
        let mut bad = vec![0x46, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        bad.extend_from_slice(&[0x82, 0, 0, 0]);
        assert!(copied_options(&bad).is_empty());
    }

    #[test]
    fn fragments_carry_the_payload_in_order_with_offsets_and_flags() {
        let pool = Mempool::new("t", 64, MemoryKind::Plain).unwrap();
        let mut data = header(64, 0, 1000);
        for (i, b) in data[IP_HEADER..].iter_mut().enumerate() {
            *b = i as u8;
        }
        set_ipv4_checksum(&mut data[..IP_HEADER]);
        let mut p = packet(&pool, &data);
        p.set_network_header(0, IP_HEADER).unwrap();
        let mut f = IPFragmenter {
            mtu: 300,
            ..IPFragmenter::default()
        };
        let mut out = PacketBatch::with_capacity(8);
        assert!(f.fragment(p, 0, IP_HEADER, &pool, &mut out).is_ok());
        // 280 payload bytes a fragment (300 - 20, a multiple of 8): 280,
        // 280, 280, 160.
        let lens: Vec<usize> = out.iter().map(|q| q.len()).collect();
        assert_eq!(lens, [300, 300, 300, 180]);
        let mut payload = Vec::new();
        for (i, q) in out.iter().enumerate() {
            assert_eq!(checksum(&q[..IP_HEADER]), 0);
            let frag = word(q, 6);
            assert_eq!(usize::from(frag & IP_OFFSET_MASK) * 8, payload.len());
            assert_eq!(frag & IP_MF != 0, i < 3);
            assert_eq!(word(q, 4), 0x1234, "same ID");
            payload.extend_from_slice(&q[IP_HEADER..]);
        }
        assert_eq!(payload, data[IP_HEADER..]);
        assert_eq!(f.fragments, 4);
        // DF honoured: the packet is handed back for output 1.
        let mut df = data.clone();
        df[6] = 0x40;
        let mut p = packet(&pool, &df);
        p.set_network_header(0, IP_HEADER).unwrap();
        assert!(f.fragment(p, 0, IP_HEADER, &pool, &mut out).is_err());
        assert_eq!(f.drops, 1);
    }

    #[test]
    fn record_route_and_timestamp_options_are_filled() {
        let me = [192, 0, 2, 1];
        // Record Route with room for two addresses, pointer at the first.
        let mut h = vec![0x48, 0, 0, 32, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        h.extend_from_slice(&[7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(gateway_options(&mut h, me, &[], 0), Ok(true));
        assert_eq!(&h[20..27], &[7, 11, 8, 192, 0, 2, 1]);
        assert_eq!(checksum(&h), 0);
        gateway_options(&mut h, [198, 51, 100, 7], &[], 0).unwrap();
        // Full: the pointer is past the end and nothing changes.
        let full = h.clone();
        assert_eq!(gateway_options(&mut h, me, &[], 0), Ok(false));
        assert_eq!(h, full);
        // Timestamp, flag 1 (address and time), one slot; the second
        // visit counts an overflow.
        let mut t = vec![0x47, 0, 0, 28, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        t.extend_from_slice(&[68, 12, 5, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]);
        gateway_options(&mut t, me, &[], 0x0102_0304).unwrap();
        assert_eq!(&t[20..32], &[68, 12, 13, 0x01, 192, 0, 2, 1, 1, 2, 3, 4]);
        gateway_options(&mut t, me, &[], 0).unwrap();
        assert_eq!(t[23], 0x11, "overflow count 1, flag 1");
        // A length running past the header: the pointer names the length.
        let mut bad = vec![0x46, 0, 0, 24, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        bad.extend_from_slice(&[7, 9, 4, 0]);
        assert_eq!(gateway_options(&mut bad, me, &[], 0), Err(21));
    }

    #[test]
    fn encapsulations_write_valid_headers() {
        let r = run("InfiniteSource(LENGTH 10, LIMIT 3, STOP true)
                -> e :: UDPIPEncap(1.0.0.1, 1234, 2.0.0.2, domain)
                -> CheckIPHeader -> IPEncap(ipip, 3.3.3.3, 4.4.4.4, TTL 9) -> CheckIPHeader
                -> c :: Counter -> Discard;");
        assert_eq!(handler(&r, "c.count"), "3");
        assert_eq!(handler(&r, "c.byte_count"), (3 * (10 + 8 + 20 + 20)).to_string());
        assert_eq!(handler(&r, "e.dport"), "53");
        assert_eq!(ip_port("ssh"), Ok(22));
        assert!(ip_port("70000").is_err());
        assert_eq!(ip_protocol("UDP"), Ok(17));
    }

    #[test]
    fn fix_ip_src_only_touches_annotated_packets() {
        let pool = Mempool::new("t", 4, MemoryKind::Plain).unwrap();
        let mut p = packet(&pool, &header(64, 0, 0));
        p.set_network_header(0, IP_HEADER).unwrap();
        fix_source(&mut p, [9, 9, 9, 9]);
        assert_eq!(&p[12..16], &[10, 0, 0, 1]);
        p.anno_mut().area[FIX_IP_SRC_ANNO] = 1;
        fix_source(&mut p, [9, 9, 9, 9]);
        assert_eq!(&p[12..16], &[9, 9, 9, 9]);
        assert_eq!(checksum(&p[..IP_HEADER]), 0);
        assert_eq!(p.anno().area[FIX_IP_SRC_ANNO], 0);
    }

    #[test]
    fn reassembly_restores_fragments_in_any_order() {
        let pool = Mempool::new("t", 64, MemoryKind::Plain).unwrap();
        let mut data = header(64, 0, 1000);
        for (i, b) in data[IP_HEADER..].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        set_ipv4_checksum(&mut data[..IP_HEADER]);
        let mut p = packet(&pool, &data);
        p.set_network_header(0, IP_HEADER).unwrap();
        let mut fragmenter = IPFragmenter {
            mtu: 300,
            ..IPFragmenter::default()
        };
        let mut frags = PacketBatch::with_capacity(8);
        fragmenter.fragment(p, 0, IP_HEADER, &pool, &mut frags).unwrap();
        let mut frags: Vec<Packet> = frags.drain_front(4).collect();
        // Last first, the second one twice, the offset-0 one last.
        let dup = packet(&pool, &frags[1]);
        frags.swap(0, 3);
        frags.insert(1, dup);
        let mut r = IPReassembler::default();
        let mut out = Vec::new();
        for mut f in frags {
            let n = f.len();
            f.set_network_header(0, IP_HEADER.min(n)).unwrap();
            out.extend(r.take(f, 0, &pool));
        }
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0][..], &data[..]);
        assert!(r.partial.is_empty());
        // A non-fragment passes as it is; a bad fragment (MF with a length
        // that is not a multiple of 8) is dropped.
        let mut whole = packet(&pool, &data);
        whole.set_network_header(0, IP_HEADER).unwrap();
        assert!(r.take(whole, 0, &pool).is_some());
        let mut odd = header(64, 0, 13);
        odd[6] = 0x20;
        let mut odd = packet(&pool, &odd);
        odd.set_network_header(0, IP_HEADER).unwrap();
        assert!(r.take(odd, 0, &pool).is_none());
        assert_eq!(r.drops, 1);
    }

    #[test]
    fn fragmenter_and_reassembler_in_a_graph() {
        let mut data = header(64, 0, 1400);
        set_ipv4_checksum(&mut data[..IP_HEADER]);
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        let r = run(&format!(
            "InfiniteSource(DATA \\<{hex}>, LIMIT 5, STOP true) -> MarkIPHeader
                -> f :: IPFragmenter(576) -> frags :: Counter -> IPReassembler -> CheckIPHeader
                -> c :: Counter -> Discard;"
        ));
        // 1400 bytes of payload in 552-byte pieces: 3 fragments a packet.
        assert_eq!(handler(&r, "frags.count"), "15");
        assert_eq!(handler(&r, "f.fragments"), "15");
        assert_eq!(handler(&r, "c.count"), "5");
        assert_eq!(handler(&r, "c.byte_count"), (5 * 1420).to_string());
    }

    #[test]
    fn incomplete_datagrams_time_out_to_output_1() {
        let mut first = header(64, 0, 16);
        first[6] = 0x20; // MF, offset 0: the rest never comes
        set_ipv4_checksum(&mut first[..IP_HEADER]);
        let hex: String = first.iter().map(|b| format!("{b:02x}")).collect();
        // Another datagram of which only the last fragment (offset 8)
        // comes.
        let mut last = header(64, 0, 16);
        last[4] = 0x99;
        last[7] = 1;
        set_ipv4_checksum(&mut last[..IP_HEADER]);
        let last: String = last.iter().map(|b| format!("{b:02x}")).collect();
        let mut r = crate::build(
            "test",
            &format!(
                "InfiniteSource(DATA \\<{hex}>, LIMIT 2, STOP false) -> MarkIPHeader -> re :: IPReassembler
                    -> whole :: Counter -> Discard;
                 InfiniteSource(DATA \\<{last}>, LIMIT 1, STOP false) -> MarkIPHeader -> re;
                 re[1] -> late :: Counter -> Discard;
                 DriverManager(wait 29s, read re.mem, wait 2s, stop);"
            ),
            &[],
        )
        .unwrap();
        r.use_simulated_time();
        r.run(&|| false);
        // Both copies of the first are one datagram (same key): two
        // incomplete packets, the second with 8 zero bytes in front of
        // its 16.
        assert_eq!(handler(&r, "whole.count"), "0");
        assert_eq!(handler(&r, "late.count"), "2");
        assert_eq!(handler(&r, "late.byte_count"), (36 + 44).to_string());
        assert_eq!(handler(&r, "re.drops"), "2");
        assert_eq!(handler(&r, "re.mem"), "0");
    }

    #[test]
    fn fragmenter_refuses_what_it_cannot_split_and_trims_trailing_bytes() {
        let pool = Mempool::new("t", 16, MemoryKind::Plain).unwrap();
        let mut f = IPFragmenter {
            mtu: 40,
            honor_df: false,
            ..IPFragmenter::default()
        };
        let mut out = PacketBatch::with_capacity(4);
        // 24 bytes of copied options: later fragments would need 44-byte
        // headers, more than the MTU.
        let mut h = vec![0x4b, 0, 0, 84, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        h.extend_from_slice(&[130, 24]);
        h.extend_from_slice(&[0; 22]);
        h.extend_from_slice(&[0; 40]);
        set_ipv4_checksum(&mut h[..44]);
        let mut p = packet(&pool, &h);
        p.set_network_header(0, 44).unwrap();
        assert!(f.fragment(p, 0, 44, &pool, &mut out).is_err());
        // A 30-byte datagram in a 60-byte packet: trimmed, not fragmented.
        let mut short = header(64, 0, 10);
        short.extend_from_slice(&[0xee; 30]);
        let mut p = packet(&pool, &short);
        p.set_network_header(0, IP_HEADER).unwrap();
        f.fragment(p, 0, IP_HEADER, &pool, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 30);
    }

    #[test]
    fn interfaces_make_broadcast_sources_bad_unless_for_the_router() {
        // checkipheader.hh: INTERFACES 18.26.4.9/24 18.32.9.44/28 is BADSRC
        // 18.26.4.255 18.32.9.47 0.0.0.0 255.255.255.255 and GOODDST
        // 18.26.4.9 18.32.9.44.
        let mut check = HeaderCheck::default();
        check
            .configure_addresses(&mut Args::new("INTERFACES 18.26.4.9/24 18.32.9.44/28"))
            .unwrap();
        assert_eq!(
            check.bad_src,
            [[18, 26, 4, 255], [18, 32, 9, 47], [0, 0, 0, 0], [255, 255, 255, 255]]
        );
        assert_eq!(check.good_dst, [[18, 26, 4, 9], [18, 32, 9, 44]]);
        let pool = Mempool::new("t", 4, MemoryKind::Plain).unwrap();
        let mut h = header(64, 0, 0);
        h[12..16].copy_from_slice(&[18, 32, 9, 47]);
        set_ipv4_checksum(&mut h);
        assert_eq!(check.check(&mut packet(&pool, &h)), Err(5));
        h[16..20].copy_from_slice(&[18, 32, 9, 44]);
        set_ipv4_checksum(&mut h);
        assert_eq!(check.check(&mut packet(&pool, &h)), Ok(()));
    }
}
