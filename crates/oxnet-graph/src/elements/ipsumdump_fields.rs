//! The fields of Click's IP summary dump format (Click's
//! `elements/analysis/toipsumdump.hh` documentation is the
//! specification: field names, their text forms, the IP and TCP option
//! syntax): how each field is read from a packet for ToIPSummaryDump and
//! written into a new packet for FromIPSummaryDump.
//!
//! A packet made from a line starts empty; each field, in a fixed order
//! (annotations, then the IP header, then the transport header, then the
//! payload), grows it as far as it needs: an IPv4 header (version 4,
//! header length 20, TTL 100, the default protocol), then the transport
//! header of its protocol. Lengths the line does not give are worked out
//! at the end (IP length, UDP length), as Click's FromIPSummaryDump does.

use super::icmp::TYPE_NAMES as ICMP_TYPES;
use oxnet_driver::Packet;

/// Offsets in Click's annotation area (see `oxnet_driver::Annotations`).
pub const AGGREGATE_ANNO: usize = 20;
pub const EXTRA_PACKETS_ANNO: usize = 24;
pub const EXTRA_LENGTH_ANNO: usize = 28;
pub const FIRST_TIMESTAMP_ANNO: usize = 32;

pub const IP_PROTO_ICMP: u8 = 1;
pub const IP_PROTO_TCP: u8 = 6;
pub const IP_PROTO_UDP: u8 = 17;
const IP_PROTO_DCCP: u8 = 33;
const IP_PROTO_UDPLITE: u8 = 136;

/// One field of the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Timestamp,
    /// `ntimestamp`: the same, nanoseconds in the binary format.
    NTimestamp,
    TsSec,
    TsUsec,
    TsUsec1,
    FirstTimestamp,
    FirstNTimestamp,
    Count,
    Link,
    Direction,
    Aggregate,
    WireLen,
    IpSrc,
    IpDst,
    IpTos,
    IpDscp,
    IpEcn,
    IpTtl,
    IpFrag,
    IpFragoff,
    IpId,
    IpSum,
    IpProto,
    IpHl,
    IpLen,
    IpCaptureLen,
    IpOpt,
    Sport,
    Dport,
    TcpSeq,
    TcpAck,
    TcpOff,
    TcpFlags,
    TcpWindow,
    TcpUrp,
    TcpOpt,
    TcpNtopt,
    TcpSack,
    UdpLen,
    IcmpType,
    IcmpCode,
    IcmpTypeName,
    IcmpCodeName,
    IcmpFlowid,
    IcmpSeq,
    IcmpNextmtu,
    PayloadLen,
    Payload,
    PayloadMd5,
    PayloadMd5Hex,
    EthSrc,
    EthDst,
}

/// Name, field, and the order in which FromIPSummaryDump applies it
/// (None: ignored on input).
const FIELDS: &[(&str, Field, Option<i32>)] = &[
    ("timestamp", Field::Timestamp, Some(ORDER_ANNO)),
    ("ntimestamp", Field::NTimestamp, Some(ORDER_ANNO)),
    ("ts_sec", Field::TsSec, Some(ORDER_ANNO)),
    ("ts_usec", Field::TsUsec, Some(ORDER_ANNO)),
    ("ts_usec1", Field::TsUsec1, Some(ORDER_ANNO)),
    ("first_timestamp", Field::FirstTimestamp, Some(ORDER_ANNO)),
    ("first_ntimestamp", Field::FirstNTimestamp, Some(ORDER_ANNO)),
    ("count", Field::Count, Some(ORDER_ANNO)),
    ("link", Field::Link, Some(ORDER_ANNO)),
    ("paint", Field::Link, Some(ORDER_ANNO)),
    ("direction", Field::Direction, Some(ORDER_ANNO)),
    ("aggregate", Field::Aggregate, Some(ORDER_ANNO)),
    ("wire_len", Field::WireLen, Some(ORDER_ANNO)),
    ("ip_src", Field::IpSrc, Some(ORDER_NET)),
    ("ip_dst", Field::IpDst, Some(ORDER_NET)),
    ("ip_tos", Field::IpTos, Some(ORDER_NET)),
    ("ip_dscp", Field::IpDscp, Some(ORDER_NET)),
    ("ip_ecn", Field::IpEcn, Some(ORDER_NET)),
    ("ip_ttl", Field::IpTtl, Some(ORDER_NET)),
    ("ip_frag", Field::IpFrag, Some(ORDER_NET - 2)),
    ("ip_fragoff", Field::IpFragoff, Some(ORDER_NET - 1)),
    ("ip_id", Field::IpId, Some(ORDER_NET)),
    ("ip_sum", Field::IpSum, Some(ORDER_NET + 2)),
    ("ip_proto", Field::IpProto, Some(ORDER_NET)),
    ("ip_hl", Field::IpHl, Some(ORDER_NET - 1)),
    ("ip_len", Field::IpLen, Some(ORDER_NET + 1)),
    ("ip_capture_len", Field::IpCaptureLen, Some(ORDER_PAYLOAD + 2)),
    ("ip_opt", Field::IpOpt, Some(ORDER_NET)),
    ("sport", Field::Sport, Some(ORDER_TRANSP)),
    ("dport", Field::Dport, Some(ORDER_TRANSP)),
    ("tcp_seq", Field::TcpSeq, Some(ORDER_TRANSP)),
    ("tcp_ack", Field::TcpAck, Some(ORDER_TRANSP)),
    ("tcp_off", Field::TcpOff, Some(ORDER_TRANSP - 1)),
    ("tcp_flags", Field::TcpFlags, Some(ORDER_TRANSP)),
    ("tcp_window", Field::TcpWindow, Some(ORDER_TRANSP)),
    ("tcp_urp", Field::TcpUrp, Some(ORDER_TRANSP)),
    ("tcp_opt", Field::TcpOpt, Some(ORDER_TRANSP + 3)),
    ("tcp_ntopt", Field::TcpNtopt, Some(ORDER_TRANSP + 2)),
    ("tcp_sack", Field::TcpSack, Some(ORDER_TRANSP + 1)),
    ("udp_len", Field::UdpLen, Some(ORDER_TRANSP)),
    ("icmp_type", Field::IcmpType, Some(ORDER_TRANSP)),
    ("icmp_code", Field::IcmpCode, Some(ORDER_TRANSP + 1)),
    ("icmp_type_name", Field::IcmpTypeName, Some(ORDER_TRANSP)),
    ("icmp_code_name", Field::IcmpCodeName, Some(ORDER_TRANSP + 1)),
    ("icmp_flowid", Field::IcmpFlowid, Some(ORDER_TRANSP + 2)),
    ("icmp_seq", Field::IcmpSeq, Some(ORDER_TRANSP + 2)),
    ("icmp_nextmtu", Field::IcmpNextmtu, Some(ORDER_TRANSP + 2)),
    ("payload_len", Field::PayloadLen, Some(ORDER_PAYLOAD + 1)),
    ("payload", Field::Payload, Some(ORDER_PAYLOAD)),
    ("payload_md5", Field::PayloadMd5, None),
    ("payload_md5_hex", Field::PayloadMd5Hex, None),
    ("eth_src", Field::EthSrc, None),
    ("eth_dst", Field::EthDst, None),
];

const ORDER_ANNO: i32 = 100;
const ORDER_NET: i32 = 300;
const ORDER_TRANSP: i32 = 400;
const ORDER_PAYLOAD: i32 = 500;

/// Other names of fields (toipsumdump.hh and the field files).
const SYNONYMS: &[(&str, &str)] = &[
    ("length", "ip_len"),
    ("ip_p", "ip_proto"),
    ("tcp_seqno", "tcp_seq"),
    ("tcp_ackno", "tcp_ack"),
    ("tcp_win", "tcp_window"),
    ("utimestamp", "timestamp"),
    ("ts", "timestamp"),
    ("sec", "ts_sec"),
    ("usec", "ts_usec"),
    ("usec1", "ts_usec1"),
    ("first_utimestamp", "first_timestamp"),
    ("first_ts", "first_timestamp"),
    ("pkt_count", "count"),
    ("packet_count", "count"),
    ("agg", "aggregate"),
    ("wire_length", "wire_len"),
    ("payload_length", "payload_len"),
];

/// Finds a field by name: a synonym, a name, or (as the format allows) a
/// name with a space for an underscore, or without its `ip_` prefix
/// (`src` is `ip_src`). Returns the canonical name too.
pub fn find(name: &str) -> Option<(&'static str, Field, Option<i32>)> {
    if let Some((_, to)) = SYNONYMS.iter().find(|(n, _)| *n == name) {
        return find(to);
    }
    if let Some(f) = FIELDS.iter().find(|(n, _, _)| *n == name) {
        return Some(*f);
    }
    if name.contains(' ') {
        return find(&name.replacen(' ', "_", 1));
    }
    if !name.contains('_') && !name.is_empty() {
        return find(&format!("ip_{name}"));
    }
    None
}

// ---- Names (Click's ipnameinfo.cc tables).

const ICMP_UNREACH_CODES: &[(&str, u8)] = &[
    ("net", 0),
    ("host", 1),
    ("protocol", 2),
    ("port", 3),
    ("needfrag", 4),
    ("srcroutefail", 5),
    ("netunknown", 6),
    ("hostunknown", 7),
    ("isolated", 8),
    ("netprohibited", 9),
    ("hostprohibited", 10),
    ("tosnet", 11),
    ("toshost", 12),
    ("filterprohibited", 13),
    ("hostprecedence", 14),
    ("precedencecutoff", 15),
];
const ICMP_REDIRECT_CODES: &[(&str, u8)] = &[("net", 0), ("host", 1), ("tosnet", 2), ("toshost", 3)];
const ICMP_TIMXCEED_CODES: &[(&str, u8)] = &[("transit", 0), ("reassembly", 1)];
const ICMP_PARAMPROB_CODES: &[(&str, u8)] = &[("erroratptr", 0), ("missingopt", 1), ("length", 2)];

const IP_PROTOS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("ipip", 4),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("dccp", 33),
    ("sctp", 132),
];

fn icmp_codes(icmp_type: u8) -> &'static [(&'static str, u8)] {
    match icmp_type {
        3 => ICMP_UNREACH_CODES,
        5 => ICMP_REDIRECT_CODES,
        11 => ICMP_TIMXCEED_CODES,
        12 => ICMP_PARAMPROB_CODES,
        _ => &[],
    }
}

/// The name of an ICMP type (`echo`), if it has one.
pub fn icmp_type_name(t: u8) -> Option<&'static str> {
    ICMP_TYPES.iter().find(|(_, v)| *v == t).map(|(n, _)| *n)
}

/// The name of an ICMP code of type `t` (`port`), if it has one.
pub fn icmp_code_name(t: u8, code: u8) -> Option<&'static str> {
    icmp_codes(t).iter().find(|(_, v)| *v == code).map(|(n, _)| *n)
}

/// The name of an IP protocol (`tcp`), if it has one.
pub fn ip_proto_name(p: u8) -> Option<&'static str> {
    IP_PROTOS.iter().find(|(_, v)| *v == p).map(|(n, _)| *n)
}

/// An IP protocol: a number or a name (`tcp`, `udp`, `icmp`, ...) or
/// the dump's letters T, U, I.
pub fn parse_ip_proto(s: &str) -> Option<u8> {
    match s {
        "T" => return Some(IP_PROTO_TCP),
        "U" => return Some(IP_PROTO_UDP),
        "I" => return Some(IP_PROTO_ICMP),
        _ => {}
    }
    if let Ok(v) = crate::args::unsigned(s) {
        return u8::try_from(v).ok();
    }
    IP_PROTOS.iter().find(|(n, _)| *n == s).map(|(_, v)| *v)
}

fn parse_num(s: &str) -> Option<u64> {
    if !s.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    crate::args::unsigned(s).ok()
}

/// Click's time syntax in a dump: `SEC[.FRACTION]` (`.1` too), to
/// nanoseconds.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let sec: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut nsec: i64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        if i >= 9 {
            break;
        }
        nsec += i64::from(b - b'0') * 10i64.pow(8 - i as u32);
    }
    let t = sec.checked_mul(1_000_000_000)?.checked_add(nsec)?;
    Some(if neg { -t } else { t })
}

/// A timestamp as Click prints it: seconds, a dot, six digits of
/// microseconds.
pub fn format_timestamp(ns: i64) -> String {
    let sec = ns.div_euclid(1_000_000_000);
    let usec = ns.rem_euclid(1_000_000_000) / 1000;
    format!("{sec}.{usec:06}")
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}
fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// An annotation word of the area, in host order (as Click keeps it).
pub fn anno_u32(p: &Packet, at: usize) -> u32 {
    let a = &p.anno().area;
    u32::from_ne_bytes([a[at], a[at + 1], a[at + 2], a[at + 3]])
}

/// Reads a trace file (`-`: standard input); a gzip or bzip2 file (by its
/// magic bytes) is uncompressed through zcat(1) or bzcat(1), as Click's
/// FromFile does.
pub fn read_trace(name: &str) -> std::io::Result<Vec<u8>> {
    if name == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut v)?;
        return Ok(v);
    }
    let bytes = std::fs::read(name)?;
    let tool = if bytes.starts_with(&[0x1f, 0x8b]) {
        "zcat"
    } else if bytes.starts_with(b"BZh") {
        "bzcat"
    } else {
        return Ok(bytes);
    };
    let out = std::process::Command::new(tool).arg(name).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "{tool} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// The first timestamp annotation, in nanoseconds (0: none).
pub fn first_timestamp(p: &Packet) -> i64 {
    let a = &p.anno().area;
    let mut b = [0u8; 8];
    b.copy_from_slice(&a[FIRST_TIMESTAMP_ANNO..FIRST_TIMESTAMP_ANNO + 8]);
    i64::from_ne_bytes(b)
}

/// Sets the first timestamp annotation.
pub fn set_first_timestamp(p: &mut Packet, ns: i64) {
    p.anno_mut().area[FIRST_TIMESTAMP_ANNO..FIRST_TIMESTAMP_ANNO + 8].copy_from_slice(&ns.to_ne_bytes());
}

/// Sets an annotation word of the area.
pub fn set_anno_u32(p: &mut Packet, at: usize, v: u32) {
    p.anno_mut().area[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn is_first_frag(ip: &[u8]) -> bool {
    be16(ip, 6) & 0x1fff == 0
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, IP_PROTO_TCP | IP_PROTO_UDP | IP_PROTO_DCCP | IP_PROTO_UDPLITE)
}

/// The ICMP types whose header carries an identifier and sequence number.
fn icmp_has_flow(t: u8) -> bool {
    matches!(t, 0 | 8 | 13 | 14 | 15 | 16)
}

/// The length of an ICMP header of type `t` (RFC 792: 20 for timestamps,
/// 12 for address masks per RFC 950, 8 for the others).
pub fn icmp_header_len(t: u8) -> usize {
    match t {
        13 | 14 => 20,
        17 | 18 => 12,
        _ => 8,
    }
}

// ---- Reading a packet (ToIPSummaryDump).

/// What ToIPSummaryDump knows of one packet: where its IP and transport
/// headers are, after Click's checks (`ip_prepare`): a header that is
/// truncated or wrong is treated as absent, and bytes past the IP length
/// (link padding) are not the packet's.
pub struct Desc<'a> {
    p: &'a Packet,
    /// The packet's bytes without trailing padding.
    data: &'a [u8],
    /// Offset of a valid IP header.
    ip: Option<usize>,
    /// Offset of the transport header.
    transport: usize,
    tcp: bool,
    udp: bool,
    icmp: bool,
    extra_length: u32,
    /// Lengths include the extra length annotation (ToIPSummaryDump's
    /// EXTRA_LENGTH, default true).
    pub force_extra_length: bool,
    /// What the header checks found wrong, for ToIPSummaryDump's `!bad`
    /// lines: a header not used, bytes missing from the IP length.
    header_problem: Option<String>,
    ip_missing: Option<u32>,
    tcp_problem: Option<String>,
}

impl<'a> Desc<'a> {
    pub fn new(p: &'a Packet) -> Desc<'a> {
        let data: &[u8] = p;
        let mut d = Desc {
            p,
            data,
            ip: None,
            transport: 0,
            tcp: false,
            udp: false,
            icmp: false,
            extra_length: anno_u32(p, EXTRA_LENGTH_ANNO),
            force_extra_length: true,
            header_problem: None,
            ip_missing: None,
            tcp_problem: None,
        };
        let Some(off) = p.network_offset().and_then(|o| usize::try_from(o).ok()) else {
            return d;
        };
        if off > data.len() {
            return d;
        }
        let net = &data[off..];
        d.header_problem = Some(String::from("no IP header"));
        if net.len() < 4 {
            d.header_problem = Some("truncated IP header".into());
            return d;
        }
        let hl = usize::from(net[0] & 0xf) * 4;
        let ip_len = usize::from(be16(net, 2));
        let problem = if net[0] >> 4 != 4 {
            Some(format!("IP version {}", net[0] >> 4))
        } else if hl < 20 {
            Some(format!("IP header length {}", net[0] & 0xf))
        } else if ip_len < hl {
            Some(format!("IP length {ip_len}"))
        } else {
            None
        };
        if problem.is_some() {
            d.header_problem = problem;
            return d;
        }
        d.header_problem = None;
        if net.len() > ip_len {
            d.data = &data[..off + ip_len];
        } else if net.len() as u64 + u64::from(d.extra_length) < ip_len as u64 {
            d.ip_missing = Some((ip_len - net.len()) as u32 - d.extra_length);
        }
        d.ip = Some(off);
        d.transport = p
            .transport_offset()
            .and_then(|t| usize::try_from(t).ok())
            .unwrap_or(off + hl);
        let net = &d.data[off..];
        if net.len() > hl && is_first_frag(net) && d.transport <= d.data.len() {
            d.tcp = net[9] == IP_PROTO_TCP;
            d.udp = net[9] == IP_PROTO_UDP;
            d.icmp = net[9] == IP_PROTO_ICMP;
        }
        let t = d.transport_bytes();
        if d.tcp && t.len() > 12 && t[12] >> 4 < 5 {
            d.tcp_problem = Some(format!("TCP header length {}", t[12] >> 4));
            d.tcp = false;
        }
        // Lengths come from the IP length field once there is a header.
        if d.extra_length > 0 {
            let full = net.len() as u32 + d.extra_length;
            d.extra_length = if be16(net, 2) != 0xffff || full <= 0xffff {
                0
            } else {
                full - 0xffff
            };
        }
        d
    }

    /// The `!bad` message of Click's header checks, if any (the first
    /// one: a header not used, the IP length beyond the data when
    /// `careful_trunc`, a TCP header length under 20).
    pub fn header_message(&self, careful_trunc: bool) -> Option<String> {
        let trunc = self
            .ip_missing
            .filter(|_| careful_trunc)
            .map(|n| format!("truncated IP missing {n}"));
        self.header_problem
            .clone()
            .filter(|_| self.p.network_offset().is_some())
            .or(trunc)
            .or_else(|| self.tcp_problem.clone())
    }

    /// Why `field` is `-` for this packet, as a `!bad` message (Click's
    /// `field_missing`): None when the field simply does not apply (a
    /// port of an ICMP packet, the identifier of an ICMP error).
    pub fn missing_message(&self, field: Field) -> Option<String> {
        use Field::*;
        const IP: u8 = 0;
        const TCP_OR_UDP: u8 = 255;
        let tl = self.transport_len();
        let (proto, need) = match field {
            IpSrc => (IP, 16),
            IpDst => (IP, 20),
            IpTos | IpDscp | IpEcn => (IP, 2),
            IpTtl => (IP, 9),
            IpFrag | IpFragoff => (IP, 8),
            IpId => (IP, 6),
            IpSum => (IP, 12),
            IpProto => (IP, 10),
            IpHl => (IP, 1),
            IpOpt => (IP, self.net().map_or(20, |n| usize::from(n[0] & 0xf) * 4)),
            Sport => (TCP_OR_UDP, 2),
            Dport => (TCP_OR_UDP, 4),
            TcpSeq => (IP_PROTO_TCP, 8),
            TcpAck => (IP_PROTO_TCP, 12),
            TcpOff => (IP_PROTO_TCP, 13),
            TcpFlags => (IP_PROTO_TCP, 14),
            TcpWindow => (IP_PROTO_TCP, 16),
            TcpUrp => (IP_PROTO_TCP, 20),
            TcpOpt | TcpNtopt | TcpSack => (IP_PROTO_TCP, tl + 1),
            UdpLen => (IP_PROTO_UDP, 6),
            IcmpType | IcmpTypeName => (IP_PROTO_ICMP, 1),
            IcmpCode | IcmpCodeName => (IP_PROTO_ICMP, 2),
            IcmpFlowid | IcmpSeq | IcmpNextmtu => {
                // Present but of a type without these: not applicable.
                if self.icmp && tl >= 2 {
                    let t = self.transport_bytes();
                    let applies = match field {
                        IcmpNextmtu => t[0] == 3 && t[1] == 4,
                        _ => icmp_has_flow(t[0]),
                    };
                    if !applies {
                        return None;
                    }
                }
                (IP_PROTO_ICMP, if field == IcmpFlowid { 6 } else { 8 })
            }
            EthSrc | EthDst => return Some("Ethernet header".into()),
            _ => return None,
        };
        let Some(net) = self.net() else {
            return Some("no IP header".into());
        };
        if proto == IP {
            return Some("truncated IP header capture".into());
        }
        let wrong = match proto {
            TCP_OR_UDP => net.len() > 9 && net[9] != IP_PROTO_TCP && net[9] != IP_PROTO_UDP,
            p => net.len() > 9 && net[9] != p,
        };
        if wrong {
            return None;
        }
        let name = match proto {
            IP_PROTO_TCP => "TCP",
            IP_PROTO_UDP => "UDP",
            IP_PROTO_ICMP => "ICMP",
            _ => "TCP/UDP",
        };
        Some(if net.len() >= 8 && !is_first_frag(net) {
            format!("fragmented {name} header")
        } else if tl as u64 + u64::from(self.extra_length) >= need as u64 {
            format!("truncated {name} header capture")
        } else {
            format!("truncated {name} header")
        })
    }

    fn net(&self) -> Option<&'a [u8]> {
        self.ip.map(|o| &self.data[o..])
    }

    fn transport_len(&self) -> usize {
        self.data.len().saturating_sub(self.transport)
    }

    fn transport_bytes(&self) -> &'a [u8] {
        &self.data[self.transport.min(self.data.len())..]
    }

    /// The payload's offset and length (Click's `payload_info`).
    fn payload_info(&self) -> (usize, usize) {
        match self.net() {
            Some(net) => {
                let ip_len = usize::from(be16(net, 2));
                let mut off = self.transport;
                // A header cut before its protocol byte: no transport
                // header is known.
                if net.len() >= 10 && is_first_frag(net) {
                    match net[9] {
                        IP_PROTO_TCP => {
                            let t = self.transport_bytes();
                            off += if t.len() >= 13 && usize::from(t[12] >> 4) * 4 >= 20 {
                                usize::from(t[12] >> 4) * 4
                            } else {
                                20
                            };
                        }
                        IP_PROTO_UDP | IP_PROTO_UDPLITE => off += 8,
                        _ => {}
                    }
                }
                (off, ip_len.saturating_sub(off.saturating_sub(self.ip.unwrap_or(0))))
            }
            None => (0, self.data.len()),
        }
    }

    /// The field's text, or None (printed as `-`) when it does not apply.
    pub fn text(&self, field: Field) -> Option<String> {
        let p = self.p;
        let net = self.net();
        let nl = net.map_or(0, |n| n.len());
        let ip = |need: usize| net.filter(|_| nl >= need);
        let tl = self.transport_len();
        let t = self.transport_bytes();
        let tcp = |need: usize| (self.tcp && tl >= need).then_some(t);
        let icmp = |need: usize| (self.icmp && tl >= need).then_some(t);
        Some(match field {
            Field::Timestamp | Field::NTimestamp => format_timestamp(p.anno().timestamp_ns),
            Field::TsSec => p.anno().timestamp_ns.div_euclid(1_000_000_000).to_string(),
            Field::TsUsec => (p.anno().timestamp_ns.rem_euclid(1_000_000_000) / 1000).to_string(),
            Field::TsUsec1 => (p.anno().timestamp_ns.div_euclid(1000)).to_string(),
            Field::FirstTimestamp | Field::FirstNTimestamp => {
                let a = &p.anno().area;
                let mut b = [0u8; 8];
                b.copy_from_slice(&a[FIRST_TIMESTAMP_ANNO..FIRST_TIMESTAMP_ANNO + 8]);
                format_timestamp(i64::from_ne_bytes(b))
            }
            Field::Count => (1 + anno_u32(p, EXTRA_PACKETS_ANNO)).to_string(),
            Field::Link => p.anno().paint().to_string(),
            Field::Direction => match p.anno().paint() {
                0 => ">".into(),
                1 => "<".into(),
                v => v.to_string(),
            },
            Field::Aggregate => anno_u32(p, AGGREGATE_ANNO).to_string(),
            Field::WireLen => p.len().to_string(),
            Field::IpSrc => fmt_ip(&ip(16)?[12..16]),
            Field::IpDst => fmt_ip(&ip(20)?[16..20]),
            Field::IpTos => ip(2)?[1].to_string(),
            Field::IpDscp => (ip(2)?[1] >> 2).to_string(),
            Field::IpEcn => ["no", "ect1", "ect2", "ce"][usize::from(ip(2)?[1] & 3)].into(),
            Field::IpTtl => ip(9)?[8].to_string(),
            Field::IpFrag => {
                let off = be16(ip(8)?, 6);
                if off & 0x3fff != 0 {
                    if off & 0x1fff == 0 { "F" } else { "f" }.into()
                } else if off & 0x4000 != 0 {
                    "!".into()
                } else {
                    ".".into()
                }
            }
            Field::IpFragoff => {
                let off = be16(ip(8)?, 6);
                let mut s = (u32::from(off & 0x1fff) << 3).to_string();
                if off & 0x2000 != 0 {
                    s.push('+');
                }
                if off & 0x4000 != 0 {
                    s.push('!');
                }
                s
            }
            Field::IpId => be16(ip(6)?, 4).to_string(),
            Field::IpSum => be16(ip(12)?, 10).to_string(),
            Field::IpProto => match ip(10)?[9] {
                IP_PROTO_TCP => "T".into(),
                IP_PROTO_UDP => "U".into(),
                IP_PROTO_ICMP => "I".into(),
                v => v.to_string(),
            },
            Field::IpHl => (usize::from(ip(1)?[0] & 0xf) * 4).to_string(),
            Field::IpLen => {
                let v = match net {
                    Some(n) => u32::from(be16(n, 2)),
                    None => self.data.len() as u32,
                };
                (v + if self.force_extra_length { self.extra_length } else { 0 }).to_string()
            }
            Field::IpCaptureLen => {
                let allow = if net.is_some() { nl } else { self.data.len() };
                let len = net.map_or(allow, |n| usize::from(be16(n, 2)));
                len.min(allow).to_string()
            }
            Field::IpOpt => {
                let n = net?;
                let hl = usize::from(n[0] & 0xf) * 4;
                if hl <= 20 {
                    ".".into()
                } else if nl < hl {
                    return None;
                } else {
                    unparse_ip_opt(&n[20..hl])
                }
            }
            Field::Sport | Field::Dport => {
                let n = net?;
                let need = if field == Field::Dport { 4 } else { 2 };
                let hl = usize::from(n[0] & 0xf) * 4;
                if nl <= hl || !is_first_frag(n) || !has_ports(n[9]) || tl < need {
                    return None;
                }
                be16(t, need - 2).to_string()
            }
            Field::TcpSeq => be32(tcp(8)?, 4).to_string(),
            Field::TcpAck => be32(tcp(12)?, 8).to_string(),
            Field::TcpOff => (usize::from(tcp(13)?[12] >> 4) * 4).to_string(),
            Field::TcpFlags => {
                let t = tcp(14)?;
                format_tcp_flags(u16::from(t[13]) | (u16::from(t[12] & 0xf) << 8))
            }
            Field::TcpWindow => be16(tcp(16)?, 14).to_string(),
            Field::TcpUrp => be16(tcp(20)?, 18).to_string(),
            Field::TcpOpt | Field::TcpNtopt | Field::TcpSack => {
                let t = tcp(13)?;
                let off = usize::from(t[12] >> 4) * 4;
                if off <= 20 {
                    ".".into()
                } else if tl < off {
                    return None;
                } else {
                    let opts = &t[20..off];
                    let mask = match field {
                        Field::TcpOpt => TCPOPT_ALL,
                        Field::TcpNtopt => TCPOPT_ALL & !TCPOPT_TIMESTAMP,
                        _ => TCPOPT_SACK,
                    };
                    // A lone timestamp option (NOP NOP TS) is no "ntopt".
                    if field != Field::TcpOpt && off == 32 && opts[..4] == [1, 1, 8, 10] {
                        ".".into()
                    } else {
                        unparse_tcp_opt(opts, mask)
                    }
                }
            }
            Field::UdpLen => {
                if !self.udp || tl < 6 {
                    return None;
                }
                be16(t, 4).to_string()
            }
            Field::IcmpType => icmp(1)?[0].to_string(),
            Field::IcmpTypeName => {
                let v = icmp(1)?[0];
                icmp_type_name(v).map_or_else(|| v.to_string(), str::to_string)
            }
            Field::IcmpCode => icmp(2)?[1].to_string(),
            Field::IcmpCodeName => {
                let t = icmp(2)?;
                icmp_code_name(t[0], t[1]).map_or_else(|| t[1].to_string(), str::to_string)
            }
            Field::IcmpFlowid | Field::IcmpSeq => {
                if !icmp_has_flow(icmp(1)?[0]) {
                    return None;
                }
                let t = icmp(if field == Field::IcmpSeq { 8 } else { 6 })?;
                be16(t, if field == Field::IcmpSeq { 6 } else { 4 }).to_string()
            }
            Field::IcmpNextmtu => {
                let t = icmp(2)?;
                if t[0] != 3 || t[1] != 4 {
                    return None;
                }
                be16(icmp(8)?, 6).to_string()
            }
            Field::PayloadLen => {
                let (_, len) = self.payload_info();
                let extra = if net.is_none() || self.force_extra_length {
                    self.extra_length
                } else {
                    0
                };
                (len as u32 + extra).to_string()
            }
            Field::Payload | Field::PayloadMd5 | Field::PayloadMd5Hex => {
                let (off, len) = self.payload_info();
                if len != 0 && off >= p.len() {
                    return None;
                }
                let end = (off + len).min(self.data.len());
                let bytes = &self.data[off.min(end)..end];
                match field {
                    Field::Payload => quote(bytes),
                    Field::PayloadMd5 => md5_text(&md5(bytes)),
                    _ => md5(bytes).iter().map(|b| format!("{b:02x}")).collect(),
                }
            }
            Field::EthSrc | Field::EthDst => {
                let off = self.ip?;
                if off < 14 {
                    return None;
                }
                let at = if field == Field::EthSrc { off - 8 } else { off - 14 };
                let e = &self.data[at..at + 6];
                e.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join("-")
            }
        })
    }
}

fn fmt_ip(a: &[u8]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// TCP flags as the dump writes them: `PA`, `A`, `.` for none, else one
/// letter per flag in the order FSRPAUECN.
pub fn format_tcp_flags(v: u16) -> String {
    match v {
        0x18 => "PA".into(),
        0x10 => "A".into(),
        0 => ".".into(),
        _ => "FSRPAUECN"
            .chars()
            .enumerate()
            .filter(|(i, _)| v & (1 << i) != 0)
            .map(|(_, c)| c)
            .collect(),
    }
}

/// The flags of a dump's TCP flags field: letters (W, X, Y accepted for
/// old dumps), `.`, or a number.
pub fn parse_tcp_flags(s: &str) -> Option<u32> {
    if s == "." {
        return Some(0);
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        return parse_num(s).filter(|&v| v < 0x1000).map(|v| v as u32);
    }
    if s.is_empty() {
        return None;
    }
    let mut v = 0;
    for c in s.chars() {
        let bit = match c {
            'F' => 0,
            'S' => 1,
            'R' => 2,
            'P' => 3,
            'A' => 4,
            'U' => 5,
            'E' | 'X' => 6,
            'C' | 'W' | 'Y' => 7,
            'N' => 8,
            _ => return None,
        };
        v |= 1 << bit;
    }
    Some(v)
}

/// A string as Click quotes it (`cp_quote`): in double quotes, with `\\`,
/// `\"`, `\$`, `\t`, `\r`, `\n` and octal escapes for other
/// unprintable bytes.
pub fn quote(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'\\' | b'"' | b'$' => {
                s.push('\\');
                s.push(b as char);
            }
            b'\t' => s += "\\t",
            b'\r' => s += "\\r",
            b'\n' => s += "\\n",
            32..=126 => s.push(b as char),
            _ => s += &format!("\\{:03o}", b),
        }
    }
    s.push('"');
    s
}

// IP options (RFC 791 §3.1): option types.
const IPOPT_EOL: u8 = 0;
const IPOPT_NOP: u8 = 1;
const IPOPT_RR: u8 = 7;
const IPOPT_TS: u8 = 68;
const IPOPT_LSRR: u8 = 131;
const IPOPT_SSRR: u8 = 137;

/// IP options as the dump writes them (toipsumdump.hh "IP OPTIONS"):
/// `rr{A,B}+N`, `ssrr{A,^B}`, `lsrr{...}`, `ts{...}`, other options as
/// `N` or `N=x:y`, separated by `;`; `.` for none, `?` if malformed.
pub fn unparse_ip_opt(opts: &[u8]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let o = &opts[i..];
        match o[0] {
            IPOPT_EOL => break,
            IPOPT_NOP => i += 1,
            IPOPT_RR | IPOPT_LSRR | IPOPT_SSRR => {
                if o.len() < 3 || usize::from(o[1]) > o.len() || o[1] < 3 || o[2] < 4 {
                    return "?".into();
                }
                let len = usize::from(o[1]);
                let ptr = usize::from(o[2]) - 1;
                let rr = o[0] == IPOPT_RR;
                let mut s = String::from(match o[0] {
                    IPOPT_RR => "rr{",
                    IPOPT_LSRR => "lsrr{",
                    _ => "ssrr{",
                });
                let mut sep = "";
                let mut at = 3;
                while at + 4 <= len {
                    if at == ptr {
                        if rr {
                            break;
                        }
                        sep = "^";
                    }
                    s += sep;
                    s += &fmt_ip(&o[at..at + 4]);
                    sep = ",";
                    at += 4;
                }
                if at == len && at == ptr && !rr {
                    s.push('^');
                }
                s.push('}');
                if at + 4 <= len && at == ptr && rr {
                    s += &format!("+{}", (len - at) / 4);
                }
                out.push(s);
                i += len;
            }
            IPOPT_TS => {
                if o.len() < 4 || usize::from(o[1]) > o.len() || o[1] < 4 || o[2] < 5 {
                    return "?".into();
                }
                let len = usize::from(o[1]);
                let ptr = usize::from(o[2]) - 1;
                let flag = o[3] & 0xf;
                let size = if (1..=3).contains(&flag) { 8 } else { 4 };
                let mut s = String::from("ts");
                match flag {
                    0 => {}
                    1 => s += ".ip",
                    3 => s += ".preip",
                    f => s += &format!(".{f}"),
                }
                s.push('{');
                let mut sep = "";
                let mut at = 4;
                while at + size <= len {
                    if at == ptr {
                        if flag != 3 {
                            break;
                        }
                        sep = "^";
                    }
                    s += sep;
                    let mut v_at = at;
                    if flag != 0 {
                        s += &fmt_ip(&o[at..at + 4]);
                        s.push('=');
                        v_at += 4;
                    }
                    if flag == 3 && v_at > ptr {
                        s.pop();
                    } else {
                        let v = be32(o, v_at);
                        if v & 0x8000_0000 != 0 {
                            s.push('!');
                        }
                        s += &(v & 0x7fff_ffff).to_string();
                    }
                    sep = ",";
                    at += size;
                }
                if at == len && at == ptr {
                    s.push('^');
                }
                s.push('}');
                if at + size <= len && at == ptr {
                    s += &format!("+{}", (len - at) / size);
                }
                if o[3] & 0xf0 != 0 {
                    s += &format!("++{}", o[3] >> 4);
                }
                out.push(s);
                i += len;
            }
            t => {
                if o.len() < 2 || usize::from(o[1]) > o.len() || o[1] < 2 {
                    return "?".into();
                }
                let len = usize::from(o[1]);
                let mut s = t.to_string();
                for (k, b) in o[2..len].iter().enumerate() {
                    s.push(if k == 0 { '=' } else { ':' });
                    s += &b.to_string();
                }
                out.push(s);
                i += len;
            }
        }
    }
    if out.is_empty() {
        ".".into()
    } else {
        out.join(";")
    }
}

fn parse_quad(s: &[u8], i: &mut usize) -> Option<[u8; 4]> {
    let mut a = [0u8; 4];
    for (k, slot) in a.iter_mut().enumerate() {
        let start = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        let v: u32 = std::str::from_utf8(&s[start..*i]).ok()?.parse().ok()?;
        *slot = u8::try_from(v).ok()?;
        if k < 3 {
            if s.get(*i) != Some(&b'.') {
                return None;
            }
            *i += 1;
        }
    }
    Some(a)
}

fn parse_uint(s: &[u8], i: &mut usize) -> Option<u32> {
    let start = *i;
    while *i < s.len() && s[*i].is_ascii_digit() {
        *i += 1;
    }
    std::str::from_utf8(&s[start..*i]).ok()?.parse().ok()
}

/// Parses the dump's IP option syntax back to option bytes (route
/// options, `nop`, `eol` and numbered options; timestamps as `ts{N,...}`
/// of type 0). None if malformed or over 40 bytes.
pub fn parse_ip_opt(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || text == "." {
        return Some(Vec::new());
    }
    let s = text.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    loop {
        let rest = &s[i..];
        let route = if rest.starts_with(b"rr{") {
            Some((IPOPT_RR, 3))
        } else if rest.starts_with(b"ssrr{") {
            Some((IPOPT_SSRR, 5))
        } else if rest.starts_with(b"lsrr{") {
            Some((IPOPT_LSRR, 5))
        } else {
            None
        };
        if let Some((kind, skip)) = route {
            i += skip;
            let start = out.len();
            out.extend_from_slice(&[kind, 0, 0]);
            let mut pointer = None;
            loop {
                if s.get(i) == Some(&b'^') && pointer.is_none() {
                    pointer = Some(out.len() - start + 1);
                    i += 1;
                }
                if !s.get(i).is_some_and(u8::is_ascii_digit) {
                    break;
                }
                out.extend_from_slice(&parse_quad(s, &mut i)?);
                if s.get(i) == Some(&b',') {
                    i += 1;
                }
            }
            if s.get(i) != Some(&b'}') {
                return None;
            }
            i += 1;
            out[start + 2] = pointer.unwrap_or(out.len() - start + 1) as u8;
            if s.get(i) == Some(&b'+') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1;
                let n = parse_uint(s, &mut i)?;
                if n < 64 {
                    out.resize(out.len() + n as usize * 4, 0);
                }
            }
            if out.len() - start > 255 {
                return None;
            }
            out[start + 1] = (out.len() - start) as u8;
        } else if rest.starts_with(b"ts{") || rest.starts_with(b"ts.") {
            i = parse_ts_opt(s, i, &mut out)?;
        } else if rest.first().is_some_and(u8::is_ascii_digit) {
            let t = parse_uint(s, &mut i)?;
            out.push(u8::try_from(t).ok()?);
            if s.get(i) == Some(&b'=') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
                let len_at = out.len();
                out.push(0);
                loop {
                    i += 1;
                    let v = parse_uint(s, &mut i)?;
                    out.push(u8::try_from(v).ok()?);
                    if !(s.get(i) == Some(&b':') && s.get(i + 1).is_some_and(u8::is_ascii_digit)) {
                        break;
                    }
                }
                out[len_at] = (out.len() - len_at + 1) as u8;
            }
        } else if rest.starts_with(b"nop") {
            out.push(IPOPT_NOP);
            i += 3;
        } else if rest.starts_with(b"eol") {
            out.push(IPOPT_EOL);
            i += 3;
        } else {
            return None;
        }
        if i >= s.len() {
            while out.len() > 40 && out[0] == IPOPT_NOP {
                out.remove(0);
            }
            return (out.len() <= 40).then_some(out);
        }
        if s[i] != b',' && s[i] != b';' {
            return None;
        }
        i += 1;
    }
}

// TCP options (RFC 793 §3.1, RFC 7323, RFC 2018).
const TCPOPT_PADDING: u32 = 1;
const TCPOPT_MSS: u32 = 2;
const TCPOPT_WSCALE: u32 = 4;
const TCPOPT_SACK: u32 = 8;
const TCPOPT_TIMESTAMP: u32 = 16;
const TCPOPT_UNKNOWN: u32 = 32;
const TCPOPT_ALL: u32 = !TCPOPT_PADDING;

/// TCP options as the dump writes them: `mss1400`, `wscale10`, `sackok`,
/// `sack95-98`, `ts1:2`, other options `N=x:y`, separated by `;`.
pub fn unparse_tcp_opt(opts: &[u8], mask: u32) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let o = &opts[i..];
        if o[0] == 0 {
            break;
        }
        if o[0] == 1 {
            i += 1;
            continue;
        }
        if o.len() < 2 || usize::from(o[1]) > o.len() {
            return "?".into();
        }
        let len = usize::from(o[1]);
        let (bit, good) = match o[0] {
            2 => (TCPOPT_MSS, len == 4),
            3 => (TCPOPT_WSCALE, len == 3),
            4 => (TCPOPT_SACK, len == 2),
            5 => (TCPOPT_SACK, len % 8 == 2),
            8 => (TCPOPT_TIMESTAMP, len == 10),
            _ => (TCPOPT_UNKNOWN, len >= 2),
        };
        if !good {
            return "?".into();
        }
        if mask & bit != 0 {
            match o[0] {
                2 => out.push(format!("mss{}", be16(o, 2))),
                3 => out.push(format!("wscale{}", o[2])),
                4 => out.push("sackok".into()),
                5 => {
                    let mut at = 2;
                    while at + 8 <= len {
                        out.push(format!("sack{}-{}", be32(o, at), be32(o, at + 4)));
                        at += 8;
                    }
                }
                8 => out.push(format!("ts{}:{}", be32(o, 2), be32(o, 6))),
                t => {
                    let mut s = t.to_string();
                    for (k, b) in o[2..len].iter().enumerate() {
                        s.push(if k == 0 { '=' } else { ':' });
                        s += &b.to_string();
                    }
                    out.push(s);
                }
            }
        }
        i += len;
    }
    if out.is_empty() {
        ".".into()
    } else {
        out.join(";")
    }
}

/// Parses the dump's TCP option syntax to option bytes.
pub fn parse_tcp_opt(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || text == "." {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for part in text.split([';', ',']) {
        let num = |s: &str| -> Option<u32> { s.parse().ok() };
        if let Some(v) = part.strip_prefix("mss") {
            out.extend_from_slice(&[2, 4]);
            out.extend_from_slice(&u16::try_from(num(v)?).ok()?.to_be_bytes());
        } else if let Some(v) = part.strip_prefix("wscale") {
            out.extend_from_slice(&[3, 3, u8::try_from(num(v)?).ok()?]);
        } else if part == "sackok" {
            out.extend_from_slice(&[4, 2]);
        } else if let Some(v) = part.strip_prefix("sack") {
            let (a, b) = v.split_once(['-', ':'])?;
            out.extend_from_slice(&[5, 10]);
            out.extend_from_slice(&num(a)?.to_be_bytes());
            out.extend_from_slice(&num(b)?.to_be_bytes());
        } else if let Some(v) = part.strip_prefix("ts") {
            let (a, b) = v.split_once(':')?;
            out.extend_from_slice(&[8, 10]);
            out.extend_from_slice(&num(a)?.to_be_bytes());
            out.extend_from_slice(&num(b)?.to_be_bytes());
        } else if part == "nop" {
            out.push(1);
        } else if part == "eol" {
            out.push(0);
        } else {
            let (t, data) = part.split_once('=').unwrap_or((part, ""));
            out.push(u8::try_from(num(t)?).ok()?);
            if !data.is_empty() {
                let bytes: Option<Vec<u8>> = data
                    .split(':')
                    .map(|b| num(b).and_then(|v| u8::try_from(v).ok()))
                    .collect();
                let bytes = bytes?;
                out.push(u8::try_from(bytes.len() + 2).ok()?);
                out.extend_from_slice(&bytes);
            }
        }
    }
    (out.len() <= 40).then_some(out)
}

// ---- Building a packet (FromIPSummaryDump).

/// A default flow (`!flowid` or FLOWID): addresses and ports for packets
/// whose line gives none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowId {
    pub src: [u8; 4],
    pub sport: u16,
    pub dst: [u8; 4],
    pub dport: u16,
}

/// A parsed field value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Num(u64),
    Time(i64),
    Bytes(Vec<u8>),
}

/// A packet under construction from one dump line: its bytes (the IP
/// header at 0 once made), its header length, and the annotations.
pub struct Builder {
    pub data: Vec<u8>,
    /// An IP header exists (the network header mark).
    pub ip: bool,
    /// Offset of the transport header (the IP header's length).
    pub transport: usize,
    pub default_proto: u8,
    pub flowid: Option<FlowId>,
    pub want_len: u32,
    have_icmp_type: bool,
    have_icmp_code: bool,
    have_ip_hl: bool,
    have_tcp_hl: bool,
    pub timestamp_ns: i64,
    pub first_timestamp_ns: i64,
    pub paint: u8,
    pub aggregate: u32,
    pub extra_packets: u32,
}

impl Builder {
    pub fn new(default_proto: u8, flowid: Option<FlowId>) -> Builder {
        Builder {
            data: Vec::new(),
            ip: false,
            transport: 0,
            default_proto,
            flowid,
            want_len: 0,
            have_icmp_type: false,
            have_icmp_code: false,
            have_ip_hl: false,
            have_tcp_hl: false,
            timestamp_ns: 0,
            first_timestamp_ns: 0,
            paint: 0,
            aggregate: 0,
            extra_packets: 0,
        }
    }

    /// Makes sure there is an IP header (Click's `make_ip`); false if the
    /// header's protocol is set and is not `proto` (0: any).
    pub fn make_ip(&mut self, proto: u8) -> bool {
        if !self.ip || self.data.len() < 20 {
            self.ip = true;
            if self.data.len() < 20 {
                self.data.resize(20, 0);
                self.transport = 20;
                let d = &mut self.data;
                d[0] = 0x45;
                d[9] = self.default_proto;
                put16(d, 2, 0);
                put16(d, 6, 0);
                d[8] = 100;
                if let Some(f) = self.flowid {
                    d[12..16].copy_from_slice(&f.src);
                    d[16..20].copy_from_slice(&f.dst);
                }
            }
        }
        proto == 0 || self.data[9] == 0 || self.data[9] == proto
    }

    fn transport_len(&self) -> usize {
        self.data.len().saturating_sub(self.transport)
    }

    /// Makes sure the transport header of the IP protocol is there
    /// (Click's `make_transp`); false for a later fragment.
    pub fn make_transp(&mut self) -> bool {
        if !is_first_frag(&self.data) {
            return false;
        }
        if self.transport_len() >= 8 {
            return true;
        }
        let mut len: isize = match self.data[9] {
            IP_PROTO_TCP => 20,
            IP_PROTO_UDP | IP_PROTO_UDPLITE => 8,
            IP_PROTO_DCCP => 12,
            IP_PROTO_ICMP => 8,
            _ => return true,
        };
        let toff = self.transport as isize;
        if self.want_len > 0 && (self.want_len as isize) < toff + len {
            len = self.want_len as isize - toff;
        }
        if (self.transport_len() as isize) < len {
            let xlen = len.max(4) as usize;
            self.data.resize(self.transport + xlen, 0);
            let t = self.transport;
            if self.data[9] == IP_PROTO_TCP && len >= 13 {
                self.data[t + 12] = 5 << 4;
            }
            if let Some(f) = self.flowid {
                put16(&mut self.data, t, f.sport);
                put16(&mut self.data, t + 2, f.dport);
            }
            if xlen as isize > len {
                self.data.truncate(self.transport + len.max(0) as usize);
            }
        }
        true
    }

    /// Grows the transport header to at least `n` bytes.
    fn transport_at_least(&mut self, n: usize) {
        if self.transport_len() < n {
            self.data.resize(self.transport + n, 0);
        }
    }

    /// Applies one field's value (Click's per-field `inject`).
    pub fn inject(&mut self, field: Field, v: &Value) {
        let num = match v {
            Value::Num(n) => *n,
            _ => 0,
        };
        let n32 = num as u32;
        match field {
            Field::Timestamp | Field::NTimestamp => {
                if let Value::Time(t) = v {
                    self.timestamp_ns = *t;
                }
            }
            Field::TsSec => {
                self.timestamp_ns = (num as i64) * 1_000_000_000 + self.timestamp_ns.rem_euclid(1_000_000_000);
            }
            Field::TsUsec => {
                self.timestamp_ns = self.timestamp_ns.div_euclid(1_000_000_000) * 1_000_000_000 + (num as i64) * 1000;
            }
            Field::TsUsec1 => self.timestamp_ns = (num as i64) * 1000,
            Field::FirstTimestamp | Field::FirstNTimestamp => {
                if let Value::Time(t) = v {
                    self.first_timestamp_ns = *t;
                }
            }
            Field::Count => self.extra_packets = n32.saturating_sub(1),
            Field::Link | Field::Direction => self.paint = num as u8,
            Field::Aggregate => self.aggregate = n32,
            Field::WireLen => self.want_len = n32,
            Field::IpSrc | Field::IpDst | Field::IpTos | Field::IpDscp | Field::IpEcn | Field::IpTtl => {
                if !self.make_ip(0) {
                    return;
                }
                let d = &mut self.data;
                match field {
                    Field::IpSrc => put32(d, 12, n32),
                    Field::IpDst => put32(d, 16, n32),
                    Field::IpTos => d[1] = num as u8,
                    Field::IpDscp => d[1] = (d[1] & 3) | ((num as u8) << 2),
                    Field::IpEcn => d[1] = (d[1] & !3) | (num as u8 & 3),
                    _ => d[8] = num as u8,
                }
            }
            Field::IpFrag | Field::IpFragoff | Field::IpId | Field::IpSum | Field::IpProto => {
                if !self.make_ip(0) {
                    return;
                }
                let d = &mut self.data;
                match field {
                    Field::IpId => put16(d, 4, num as u16),
                    Field::IpSum => put16(d, 10, num as u16),
                    Field::IpProto => d[9] = num as u8,
                    _ => put16(d, 6, num as u16),
                }
            }
            Field::IpOpt => {
                if !self.make_ip(0) {
                    return;
                }
                self.have_ip_hl = true;
                let Value::Bytes(opts) = v else { return };
                if opts.is_empty() {
                    return;
                }
                let hl = (20 + opts.len() + 3) & !3;
                if self.data.len() < hl {
                    self.data.resize(hl, 0);
                }
                if hl > usize::from(self.data[0] & 0xf) * 4 {
                    self.transport = hl;
                    self.data[0] = 0x40 | (hl / 4) as u8;
                }
                self.data[20..20 + opts.len()].copy_from_slice(opts);
                self.data[20 + opts.len()..hl].fill(IPOPT_EOL);
            }
            Field::IpHl => {
                if !self.make_ip(0) {
                    return;
                }
                self.have_ip_hl = true;
                let want = ((num as usize) + 3) & !3;
                let have = usize::from(self.data[0] & 0xf) * 4;
                if want > have {
                    let more = want - have;
                    self.data.resize(self.data.len() + more, 0);
                    self.transport = want;
                }
                self.data[0] = 0x40 | ((want / 4) as u8 & 0xf);
            }
            Field::IpLen => {
                if self.make_ip(0) {
                    self.want_len = n32;
                }
            }
            Field::IpCaptureLen => {}
            Field::Sport | Field::Dport => {
                if !self.make_ip(0) || !self.make_transp() {
                    return;
                }
                if self.data[9] != 0 && !has_ports(self.data[9]) {
                    return;
                }
                let t = self.transport + if field == Field::Dport { 2 } else { 0 };
                if self.data.len() < t + 2 {
                    self.data.resize(t + 2, 0);
                }
                put16(&mut self.data, t, num as u16);
            }
            Field::TcpSeq
            | Field::TcpAck
            | Field::TcpOff
            | Field::TcpFlags
            | Field::TcpWindow
            | Field::TcpUrp
            | Field::TcpOpt
            | Field::TcpNtopt
            | Field::TcpSack => {
                if !self.make_ip(IP_PROTO_TCP) || !self.make_transp() {
                    return;
                }
                self.transport_at_least(20);
                let t = self.transport;
                let d = &mut self.data;
                match field {
                    Field::TcpSeq => put32(d, t + 4, n32),
                    Field::TcpAck => put32(d, t + 8, n32),
                    Field::TcpFlags => {
                        d[t + 13] = num as u8;
                        d[t + 12] = (d[t + 12] & 0xf0) | ((num >> 8) as u8 & 0xf);
                    }
                    Field::TcpWindow => put16(d, t + 14, num as u16),
                    Field::TcpUrp => put16(d, t + 18, num as u16),
                    Field::TcpOff => {
                        let want = ((num as usize) + 3) & !3;
                        let have = usize::from(d[t + 12] >> 4) * 4;
                        if want > have {
                            let need = t + want;
                            if d.len() < need {
                                d.resize(need, 0);
                            }
                        }
                        d[t + 12] = (d[t + 12] & 0xf) | (((want / 4) as u8 & 0xf) << 4);
                    }
                    _ => {
                        self.have_tcp_hl = true;
                        let Value::Bytes(opts) = v else { return };
                        if opts.is_empty() {
                            return;
                        }
                        let off = (20 + opts.len() + 3) & !3;
                        if d.len() < t + off {
                            d.resize(t + off, 0);
                        }
                        if off > usize::from(d[t + 12] >> 4) * 4 {
                            d[t + 12] = (d[t + 12] & 0xf) | (((off / 4) as u8) << 4);
                        }
                        d[t + 20..t + 20 + opts.len()].copy_from_slice(opts);
                        d[t + 20 + opts.len()..t + off].fill(0);
                    }
                }
            }
            Field::UdpLen => {
                if !self.make_ip(0) || !self.make_transp() {
                    return;
                }
                let proto = self.data[9];
                if proto != 0 && proto != IP_PROTO_UDP && proto != IP_PROTO_UDPLITE {
                    return;
                }
                self.transport_at_least(8);
                let t = self.transport;
                put16(&mut self.data, t + 4, num as u16);
            }
            Field::IcmpType
            | Field::IcmpTypeName
            | Field::IcmpCode
            | Field::IcmpCodeName
            | Field::IcmpFlowid
            | Field::IcmpSeq
            | Field::IcmpNextmtu => {
                if !self.make_ip(IP_PROTO_ICMP) || !self.make_transp() {
                    return;
                }
                self.transport_at_least(8);
                let t = self.transport;
                match field {
                    Field::IcmpType | Field::IcmpTypeName => {
                        self.data[t] = num as u8;
                        self.have_icmp_type = true;
                        self.transport_at_least(icmp_header_len(num as u8));
                    }
                    Field::IcmpCode | Field::IcmpCodeName => {
                        self.data[t + 1] = num as u8;
                        self.have_icmp_code = true;
                    }
                    Field::IcmpFlowid | Field::IcmpSeq => {
                        if !self.have_icmp_type || icmp_has_flow(self.data[t]) {
                            let at = t + if field == Field::IcmpSeq { 6 } else { 4 };
                            put16(&mut self.data, at, num as u16);
                        }
                    }
                    _ => {
                        if (!self.have_icmp_type || self.data[t] == 3)
                            && (!self.have_icmp_code || self.data[t + 1] == 4)
                        {
                            put16(&mut self.data, t + 6, num as u16);
                        }
                    }
                }
            }
            Field::Payload | Field::PayloadLen => {
                if self.make_ip(0) {
                    self.make_transp();
                }
                let off = self.payload_offset();
                match v {
                    Value::Bytes(bytes) if field == Field::Payload => {
                        if bytes.is_empty() {
                            return;
                        }
                        self.account_payload_len(off, bytes.len());
                        let off = self.payload_offset();
                        if self.data.len() < off + bytes.len() {
                            self.data.resize(off + bytes.len(), 0);
                        }
                        self.data[off..off + bytes.len()].copy_from_slice(bytes);
                    }
                    _ => self.account_payload_len(off, num as usize),
                }
            }
            Field::EthSrc | Field::EthDst | Field::PayloadMd5 | Field::PayloadMd5Hex => {}
        }
    }

    /// Where the payload starts (Click's `payload_info` offset).
    fn payload_offset(&self) -> usize {
        let mut off = self.transport;
        if is_first_frag(&self.data) {
            match self.data[9] {
                IP_PROTO_TCP => {
                    let tl = self.transport_len();
                    let th = if tl >= 13 {
                        usize::from(self.data[off + 12] >> 4) * 4
                    } else {
                        0
                    };
                    off += if th >= 20 { th } else { 20 };
                }
                IP_PROTO_UDP | IP_PROTO_UDPLITE => off += 8,
                _ => {}
            }
        }
        off
    }

    /// A payload of `plen` bytes at `off`: sets the wanted length, or,
    /// if the IP length is already more than the headers and payload,
    /// fills the difference with TCP then IP option padding (EOL), as
    /// Click's `account_payload_len` does.
    fn account_payload_len(&mut self, off: usize, plen: usize) {
        let ip_len_field = be16(&self.data, 2);
        if ip_len_field == 0 && self.want_len == 0 {
            self.want_len = (off + plen) as u32;
            return;
        }
        let ip_len = if ip_len_field != 0 {
            usize::from(ip_len_field)
        } else {
            self.want_len as usize
        };
        let mut delta = ip_len as isize - (off + plen) as isize;
        let t = self.transport;
        if delta > 0
            && is_first_frag(&self.data)
            && self.data[9] == IP_PROTO_TCP
            && !self.have_tcp_hl
            && self.data.len() >= t + 13
            && self.data[t + 12] >> 4 == 5
        {
            let th_delta = ((delta - (delta & 3)) as usize).min(40);
            let at = t + 20;
            self.data.splice(
                at.min(self.data.len())..at.min(self.data.len()),
                std::iter::repeat_n(0, th_delta),
            );
            self.data[t + 12] = (self.data[t + 12] & 0xf) | ((((20 + th_delta) / 4) as u8) << 4);
            delta -= th_delta as isize;
        }
        if delta > 0 && !self.have_ip_hl && self.data[0] & 0xf == 5 {
            let ip_delta = ((delta - (delta & 3)) as usize).min(40);
            self.data.splice(20..20, std::iter::repeat_n(0, ip_delta));
            self.data[0] = 0x40 | ((20 + ip_delta) / 4) as u8;
            self.transport = 20 + ip_delta;
        }
    }

    /// Finishes the packet after its fields (Click's read_packet tail):
    /// ports from the default flow, the transport header, the IP length
    /// (the wanted length or what is there), the UDP length, and with
    /// `checksum` the data up to the IP length and every checksum.
    /// Returns the extra length (bytes the IP length claims beyond the
    /// data).
    pub fn finish(&mut self, checksum: bool) -> u32 {
        if self.flowid.is_some() {
            self.make_ip(0);
        }
        if self.ip {
            self.make_transp();
            let mut ip_len = u32::from(be16(&self.data, 2));
            if ip_len == 0 {
                ip_len = self.want_len.min(0xffff);
                if ip_len == 0 {
                    ip_len = self.data.len() as u32;
                }
                put16(&mut self.data, 2, ip_len as u16);
            }
            let t = self.transport;
            if self.data[9] == IP_PROTO_UDP
                && is_first_frag(&self.data)
                && self.data.len() >= t + 6
                && be16(&self.data, t + 4) == 0
            {
                let len = ip_len.saturating_sub(t as u32) as u16;
                put16(&mut self.data, t + 4, len);
            }
            if checksum {
                if ip_len as usize > self.data.len() {
                    self.data.resize(ip_len as usize, 0);
                }
                self.set_checksums();
            }
        }
        self.want_len.saturating_sub(self.data.len() as u32)
    }

    fn set_checksums(&mut self) {
        let t = self.transport;
        oxnet_driver::offload::set_ipv4_checksum(&mut self.data[..t]);
        if !is_first_frag(&self.data) && be16(&self.data, 6) & 0x3fff != 0 {
            return;
        }
        if be16(&self.data, 6) & 0x3fff != 0 {
            // A fragment: its transport checksum covers other fragments.
            return;
        }
        match self.data[9] {
            IP_PROTO_TCP if self.data.len() >= t + 18 => {
                oxnet_driver::offload::set_l4_checksum(&mut self.data, 0, t, IP_PROTO_TCP)
            }
            IP_PROTO_UDP if self.data.len() >= t + 8 => {
                oxnet_driver::offload::set_l4_checksum(&mut self.data, 0, t, IP_PROTO_UDP)
            }
            IP_PROTO_ICMP if self.data.len() >= t + 4 => {
                self.data[t + 2] = 0;
                self.data[t + 3] = 0;
                let sum = !oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&self.data[t..], 0));
                put16(&mut self.data, t + 2, sum);
            }
            _ => {}
        }
    }
}

/// Parses one field's text (Click's per-field `ina`); None if it is not
/// a value of that field. `icmp_type` is the ICMP type already set on the
/// packet, for code names.
pub fn parse_value(field: Field, s: &str, icmp_type: Option<u8>) -> Option<Value> {
    let small = |max: u64| parse_num(s).filter(|&v| v <= max).map(Value::Num);
    match field {
        Field::Timestamp | Field::NTimestamp | Field::FirstTimestamp | Field::FirstNTimestamp => {
            parse_timestamp(s).map(Value::Time)
        }
        Field::Link | Field::Direction => match s {
            ">" => Some(Value::Num(0)),
            "<" => Some(Value::Num(1)),
            _ => parse_num(s).map(Value::Num),
        },
        Field::IpSrc | Field::IpDst => crate::args::ip_address(s)
            .ok()
            .map(|a| Value::Num(u32::from_be_bytes(a) as u64)),
        Field::IpFrag | Field::IpFragoff => {
            match s {
                "." => return Some(Value::Num(0)),
                "!" => return Some(Value::Num(0x4000)),
                "F" => return Some(Value::Num(0x2000)),
                "f" => return Some(Value::Num(100)),
                _ => {}
            }
            let digits = s.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 && s.is_empty() {
                return None;
            }
            let mut v: u64 = if digits > 0 { s[..digits].parse().ok()? } else { 0 };
            v >>= 3; // byte offsets since format 1.1
            for c in s[digits..].chars() {
                match c {
                    '!' => v |= 0x4000,
                    '+' => v |= 0x2000,
                    _ => return None,
                }
            }
            Some(Value::Num(v))
        }
        Field::IpProto => parse_ip_proto(s).map(|v| Value::Num(v.into())),
        Field::IpEcn => match s {
            "0" | "1" | "2" | "3" => Some(Value::Num(s.parse().ok()?)),
            "no" | "-" => Some(Value::Num(0)),
            "ect1" | "ECT(1)" => Some(Value::Num(1)),
            "ect2" | "ECT(0)" => Some(Value::Num(2)),
            "ce" | "CE" => Some(Value::Num(3)),
            _ => None,
        },
        Field::IpOpt => parse_ip_opt(s).map(Value::Bytes),
        Field::TcpOpt | Field::TcpNtopt | Field::TcpSack => parse_tcp_opt(s).map(Value::Bytes),
        Field::TcpFlags => parse_tcp_flags(s).map(|v| Value::Num(v.into())),
        Field::IcmpType | Field::IcmpTypeName => ICMP_TYPES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| Value::Num((*v).into()))
            .or_else(|| small(255)),
        Field::IcmpCode | Field::IcmpCodeName => match icmp_type {
            Some(t) => icmp_codes(t)
                .iter()
                .find(|(n, _)| *n == s)
                .map(|(_, v)| Value::Num((*v).into()))
                .or_else(|| small(255)),
            None => small(255),
        },
        Field::Payload => crate::args::unquote(s).ok().map(Value::Bytes),
        Field::IpTos | Field::IpDscp | Field::IpTtl | Field::IpHl | Field::TcpOff => small(255),
        Field::IpId
        | Field::IpSum
        | Field::Sport
        | Field::Dport
        | Field::TcpWindow
        | Field::TcpUrp
        | Field::IcmpFlowid
        | Field::IcmpSeq
        | Field::IcmpNextmtu => small(65535),
        Field::TsUsec1 => parse_num(s).map(Value::Num),
        _ => small(u32::MAX as u64),
    }
}

impl Builder {
    /// The ICMP type set so far, if a type field was applied.
    pub fn icmp_type(&self) -> Option<u8> {
        (self.have_icmp_type && self.data.len() > self.transport).then(|| self.data[self.transport])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_synonyms_and_short_forms() {
        assert_eq!(find("src").unwrap().0, "ip_src");
        assert_eq!(find("ip src").unwrap().0, "ip_src");
        assert_eq!(find("ts").unwrap().1, Field::Timestamp);
        assert_eq!(find("proto").unwrap().1, Field::IpProto);
        assert_eq!(find("length").unwrap().1, Field::IpLen);
        assert_eq!(find("sport").unwrap().1, Field::Sport);
        assert!(find("nonsense_field").is_none());
    }

    #[test]
    fn timestamps_parse_and_print_in_microseconds() {
        assert_eq!(parse_timestamp("1.00002"), Some(1_000_020_000));
        assert_eq!(parse_timestamp(".1"), Some(100_000_000));
        assert_eq!(parse_timestamp("5"), Some(5_000_000_000));
        assert_eq!(parse_timestamp("x"), None);
        assert_eq!(format_timestamp(1_000_030_000), "1.000030");
        assert_eq!(format_timestamp(0), "0.000000");
    }

    #[test]
    fn tcp_flags_both_ways() {
        assert_eq!(format_tcp_flags(0x18), "PA");
        assert_eq!(format_tcp_flags(0x12), "SA");
        assert_eq!(format_tcp_flags(0), ".");
        assert_eq!(parse_tcp_flags("SA"), Some(0x12));
        assert_eq!(parse_tcp_flags("R"), Some(4));
        assert_eq!(parse_tcp_flags("Q"), None);
    }

    #[test]
    fn ip_options_round_trip() {
        // The syntax of toipsumdump.hh: the caret replaces the comma.
        let text = "ssrr{128.4.45.60,128.4.49.61^1.2.3.4,5.6.7.8}";
        let bytes = parse_ip_opt(text).unwrap();
        // type, length 3 + 16, pointer at the third address (4 + 8 + 1).
        assert_eq!(&bytes[..3], &[137, 19, 12]);
        assert_eq!(unparse_ip_opt(&bytes), text);
        let rr = parse_ip_opt("rr{10.0.0.1}+2").unwrap();
        assert_eq!(rr.len(), 3 + 4 + 8);
        assert_eq!(unparse_ip_opt(&rr), "rr{10.0.0.1}+2");
        assert_eq!(unparse_ip_opt(&[99, 4, 5, 10]), "99=5:10");
        assert_eq!(unparse_ip_opt(&[7, 40]), "?");
        assert!(parse_ip_opt("bogus").is_none());
    }

    #[test]
    fn a_tcp_packet_gets_headers_and_lengths() {
        let mut b = Builder::new(IP_PROTO_TCP, None);
        b.inject(Field::IpSrc, &parse_value(Field::IpSrc, "1.0.0.1", None).unwrap());
        b.inject(Field::Sport, &Value::Num(80));
        b.inject(Field::Payload, &Value::Bytes(b"XXX".to_vec()));
        let extra = b.finish(true);
        assert_eq!(extra, 0);
        assert_eq!(b.data.len(), 43);
        assert_eq!(be16(&b.data, 2), 43);
        assert_eq!(b.data[8], 100, "default TTL");
        assert_eq!(&b.data[40..], b"XXX");
        assert_eq!(b.data[32] >> 4, 5);
        // The IP checksum verifies.
        assert_eq!(
            oxnet_driver::offload::fold(oxnet_driver::offload::ones_sum(&b.data[..20], 0)),
            0xffff
        );
    }

    #[test]
    fn a_udp_packet_gets_its_udp_length() {
        let mut b = Builder::new(IP_PROTO_UDP, None);
        b.inject(Field::Dport, &Value::Num(53));
        b.inject(Field::IpLen, &Value::Num(100));
        let extra = b.finish(false);
        assert_eq!(b.data.len(), 28);
        assert_eq!(be16(&b.data, 2), 100);
        assert_eq!(be16(&b.data, 24), 80);
        assert_eq!(extra, 72);
    }

    #[test]
    fn quoting_follows_cp_quote() {
        assert_eq!(quote(b"XXX"), "\"XXX\"");
        assert_eq!(quote(b""), "\"\"");
        assert_eq!(quote(b"a\"\n\x01"), "\"a\\\"\\n\\001\"");
    }
}

/// The timestamp option of the dump syntax (toipsumdump.hh "IP
/// OPTIONS"; RFC 791 §3.1 "Internet Timestamp"): `ts{V,...}` (type 0,
/// timestamps only), `ts.ip{A=V,...}` (type 1), `ts.preip{A=V^B,...}`
/// (type 3, prespecified addresses; entries after the pointer have no
/// value yet), `ts.N{...}`; `ts{A=V,...}` is type 1 as well. `!V` sets the
/// nonstandard bit, `^` marks the pointer, `+N` adds room for N more
/// entries, `++N` sets the overflow count. Appends the option to `out`
/// and returns the index after it.
fn parse_ts_opt(s: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    // -1: not known yet; -2: entries with addresses (becomes 1 or 3).
    let mut flag: i32 = -1;
    if s[i + 2] == b'.' {
        let rest = &s[i + 3..];
        if rest.starts_with(b"ip{") {
            flag = 1;
            i += 6;
        } else if rest.starts_with(b"preip{") {
            flag = 3;
            i += 9;
        } else {
            let mut j = i + 3;
            let n = parse_uint(s, &mut j)?;
            if n > 15 || s.get(j) != Some(&b'{') {
                return None;
            }
            flag = n as i32;
            i = j + 1;
        }
    } else {
        i += 3;
    }
    let start = out.len();
    out.extend_from_slice(&[IPOPT_TS, 0, 0, 0]);
    let mut pointer: Option<usize> = None;
    loop {
        if s.get(i) == Some(&b'^') && pointer.is_none() {
            pointer = Some(out.len() - start + 1);
            i += 1;
        }
        if !s.get(i).is_some_and(|&c| c.is_ascii_digit() || c == b'!') {
            break;
        }
        let entry = i;
        let mut value_needed = true;
        loop {
            if matches!(flag, 1 | 3 | -2) {
                out.extend_from_slice(&parse_quad(s, &mut i)?);
                if pointer.is_some() && flag == -2 {
                    flag = 3;
                }
                if s.get(i) == Some(&b'=') && s.get(i + 1).is_some_and(|&c| c.is_ascii_digit() || c == b'!') {
                    i += 1;
                } else if s.get(i) == Some(&b'=') && s.get(i + 1) == Some(&b'?') && pointer.is_some() {
                    out.extend_from_slice(&[0; 4]);
                    i += 2;
                    value_needed = false;
                } else if pointer.is_some() && s.get(i) != Some(&b'=') {
                    out.extend_from_slice(&[0; 4]);
                    value_needed = false;
                } else {
                    return None;
                }
            }
            if !value_needed {
                break;
            }
            let top = if s.get(i) == Some(&b'!') {
                i += 1;
                0x8000_0000u32
            } else {
                0
            };
            if !s.get(i).is_some_and(u8::is_ascii_digit) {
                return None;
            }
            let v = parse_uint(s, &mut i)?;
            if s.get(i) == Some(&b'.') && flag == -1 {
                // An address, not a timestamp: read the entry again.
                flag = -2;
                i = entry;
                continue;
            }
            if flag == -1 {
                flag = 0;
            }
            out.extend_from_slice(&(v | top).to_be_bytes());
            break;
        }
        if s.get(i) == Some(&b',') {
            i += 1;
        }
    }
    if i < s.len() {
        if s[i] != b'}' {
            return None;
        }
        i += 1;
    }
    if flag == -2 {
        flag = 1;
    }
    let flag = flag.max(0) as u8;
    out[start + 2] = pointer.unwrap_or(out.len() - start + 1) as u8;
    if s.get(i) == Some(&b'+') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        let n = parse_uint(s, &mut i)?;
        if n < 64 {
            let size = if flag == 1 || flag == 3 { 8 } else { 4 };
            out.resize(out.len() + n as usize * size, 0);
        }
    }
    let mut overflow = 0;
    if s.get(i) == Some(&b'+') && s.get(i + 1) == Some(&b'+') && s.get(i + 2).is_some_and(u8::is_ascii_digit) {
        i += 2;
        let n = parse_uint(s, &mut i)?;
        if n < 16 {
            overflow = n as u8;
        }
    }
    out[start + 3] = (overflow << 4) | flag;
    if out.len() - start > 255 {
        return None;
    }
    out[start + 1] = (out.len() - start) as u8;
    Some(i)
}

/// MD5 of `data` (RFC 1321 §3), for the payload_md5 fields.
pub fn md5(data: &[u8]) -> [u8; 16] {
    // §3.4: the sine table T[i] = floor(2^32 * |sin(i + 1)|) and the
    // per-round shift amounts.
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14,
        20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6,
        10, 15, 21,
    ];
    let t: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    // §3.1-3.2: pad with 0x80, zeros, and the bit length (little-endian).
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    // §3.3: the initial buffer.
    let mut h: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    for block in msg.chunks_exact(64) {
        let m: Vec<u32> = block
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let rotated = a
                .wrapping_add(f)
                .wrapping_add(t[i])
                .wrapping_add(m[g])
                .rotate_left(S[i]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(rotated);
        }
        h = [
            h[0].wrapping_add(a),
            h[1].wrapping_add(b),
            h[2].wrapping_add(c),
            h[3].wrapping_add(d),
        ];
    }
    let mut out = [0u8; 16];
    for (i, w) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// An MD5 digest in the dump's 22-character text form: the bytes read
/// as a little-endian bit string, six bits per character from
/// `a-z A-Z 0-9 _ @`.
pub fn md5_text(digest: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@";
    let mut s = String::with_capacity(22);
    for chunk in digest.chunks(3) {
        let v = chunk.iter().rev().fold(0u32, |v, &b| (v << 8) | u32::from(b));
        let chars = (chunk.len() * 8).div_ceil(6);
        for k in 0..chars {
            s.push(ALPHABET[((v >> (6 * k)) & 63) as usize] as char);
        }
    }
    s
}

#[cfg(test)]
mod md5_tests {
    use super::*;

    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn md5_of_rfc_1321_test_suite() {
        // RFC 1321 appendix A.5.
        assert_eq!(hex(&md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(&md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(&md5(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn md5_text_packs_six_bits_per_character() {
        // d4 = 11010100: its low six bits, 010100 = 20, are 'u'; the last
        // byte 7e gives 111110 = 62 '_' and then 01 'b'.
        let t = md5_text(&md5(b""));
        assert_eq!(t.len(), 22);
        assert!(t.starts_with('u') && t.ends_with("_b"), "{t}");
    }
}

// ---- The binary format (toipsumdump.hh "BINARY FORMAT"): after a
// `!binary` line, records of a 4-byte big-endian word (the record's
// length, itself included; the top bit marks a text line) and the fields
// in the `!data` order, numbers in network byte order.

/// How a field is stored in a binary record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Fixed(usize),
    /// A length byte and that many bytes.
    Variable,
    /// The field cannot be in a binary dump (`payload`).
    NotAllowed,
}

/// The binary size of a field (the table in toipsumdump.hh; the others
/// as Click's field files store them).
pub fn binary_kind(field: Field) -> Binary {
    use Field::*;
    match field {
        Timestamp | NTimestamp | FirstTimestamp | FirstNTimestamp | TsUsec1 => Binary::Fixed(8),
        IpSrc | IpDst | IpLen | IpCaptureLen | TcpSeq | TcpAck | UdpLen | PayloadLen | Count | Aggregate | WireLen
        | TsSec | TsUsec => Binary::Fixed(4),
        Sport | Dport | IpId | IpSum | IpFragoff | TcpWindow | TcpUrp | IcmpFlowid | IcmpSeq | IcmpNextmtu => {
            Binary::Fixed(2)
        }
        IpProto | IpTos | IpDscp | IpEcn | IpTtl | IpFrag | IpHl | TcpOff | TcpFlags | Link | Direction | IcmpType
        | IcmpCode | IcmpTypeName | IcmpCodeName => Binary::Fixed(1),
        EthSrc | EthDst => Binary::Fixed(6),
        PayloadMd5 | PayloadMd5Hex => Binary::Fixed(16),
        IpOpt | TcpOpt | TcpNtopt | TcpSack => Binary::Variable,
        Payload => Binary::NotAllowed,
    }
}

impl Desc<'_> {
    /// The field in binary form; a field that does not apply is zeros
    /// (an empty variable field), as Click writes it.
    pub fn binary(&self, field: Field) -> Vec<u8> {
        let kind = binary_kind(field);
        let zero = || match kind {
            Binary::Fixed(n) => vec![0; n],
            _ => vec![0],
        };
        let ts = |ns: i64, nano: bool| {
            let mut v = (ns.div_euclid(1_000_000_000) as u32).to_be_bytes().to_vec();
            let sub = ns.rem_euclid(1_000_000_000);
            v.extend_from_slice(&((if nano { sub } else { sub / 1000 }) as u32).to_be_bytes());
            v
        };
        let first_ts = || {
            let a = &self.p.anno().area;
            let mut b = [0u8; 8];
            b.copy_from_slice(&a[FIRST_TIMESTAMP_ANNO..FIRST_TIMESTAMP_ANNO + 8]);
            i64::from_ne_bytes(b)
        };
        match field {
            Field::Timestamp => return ts(self.p.anno().timestamp_ns, false),
            Field::NTimestamp => return ts(self.p.anno().timestamp_ns, true),
            Field::FirstTimestamp => return ts(first_ts(), false),
            Field::FirstNTimestamp => return ts(first_ts(), true),
            Field::IpOpt | Field::TcpOpt | Field::TcpNtopt | Field::TcpSack => {
                let opts = match field {
                    Field::IpOpt => self
                        .net()
                        .filter(|n| n.len() >= usize::from(n[0] & 0xf) * 4)
                        .map(|n| &n[20.min(n.len())..usize::from(n[0] & 0xf) * 4]),
                    _ => {
                        let t = self.transport_bytes();
                        (self.tcp && t.len() >= 13 && t.len() >= usize::from(t[12] >> 4) * 4)
                            .then(|| &t[20.min(usize::from(t[12] >> 4) * 4)..usize::from(t[12] >> 4) * 4])
                    }
                };
                let opts = opts.unwrap_or(&[]);
                let mut v = vec![opts.len().min(255) as u8];
                v.extend_from_slice(&opts[..opts.len().min(255)]);
                return v;
            }
            Field::PayloadMd5 | Field::PayloadMd5Hex => {
                let (off, len) = self.payload_info();
                let end = (off + len).min(self.data.len());
                return md5(&self.data[off.min(end)..end]).to_vec();
            }
            Field::EthSrc | Field::EthDst => {
                return match self.ip {
                    Some(off) if off >= 14 => {
                        let at = if field == Field::EthSrc { off - 8 } else { off - 14 };
                        self.data[at..at + 6].to_vec()
                    }
                    _ => zero(),
                };
            }
            _ => {}
        }
        let Some(text) = self.text(field) else {
            return zero();
        };
        // The number behind the text (the reader's parser inverts the
        // writer's format).
        let n: u64 = match field {
            Field::IpFrag => u64::from(text.as_bytes()[0]),
            Field::IcmpCodeName => self.text(Field::IcmpCode).and_then(|t| t.parse().ok()).unwrap_or(0),
            Field::TcpFlags => parse_tcp_flags(&text).unwrap_or(0).into(),
            Field::TsUsec1 => text.parse().unwrap_or(0),
            _ => match parse_value(field, &text, self.text(Field::IcmpType).and_then(|t| t.parse().ok())) {
                Some(Value::Num(n)) => n,
                _ => 0,
            },
        };
        match kind {
            Binary::Fixed(size) => n.to_be_bytes()[8 - size..].to_vec(),
            _ => zero(),
        }
    }
}

/// Reads one field of a binary record at `b[at..]`: its value and the
/// bytes it took; None if the record ends first.
pub fn decode_binary(field: Field, b: &[u8], at: usize) -> Option<(Option<Value>, usize)> {
    let rest = b.get(at..)?;
    match binary_kind(field) {
        Binary::Variable => {
            let n = usize::from(*rest.first()?);
            let bytes = rest.get(1..1 + n)?.to_vec();
            Some((Some(Value::Bytes(bytes)), 1 + n))
        }
        Binary::NotAllowed => None,
        Binary::Fixed(size) => {
            let bytes = rest.get(..size)?;
            let num = bytes.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            let value = match field {
                Field::Timestamp | Field::FirstTimestamp | Field::NTimestamp | Field::FirstNTimestamp => {
                    let sec = i64::from(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
                    let sub = i64::from(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]));
                    let nano = matches!(field, Field::NTimestamp | Field::FirstNTimestamp);
                    Some(Value::Time(sec * 1_000_000_000 + if nano { sub } else { sub * 1000 }))
                }
                Field::IpFrag => parse_value(field, &(bytes[0] as char).to_string(), None),
                Field::PayloadMd5 | Field::PayloadMd5Hex | Field::EthSrc | Field::EthDst => None,
                _ => Some(Value::Num(num)),
            };
            Some((value, size))
        }
    }
}

#[cfg(test)]
mod binary_tests {
    use super::*;

    #[test]
    fn binary_sizes_follow_the_table() {
        assert_eq!(binary_kind(Field::Timestamp), Binary::Fixed(8));
        assert_eq!(binary_kind(Field::IpSrc), Binary::Fixed(4));
        assert_eq!(binary_kind(Field::Sport), Binary::Fixed(2));
        assert_eq!(binary_kind(Field::IpProto), Binary::Fixed(1));
        assert_eq!(binary_kind(Field::IpOpt), Binary::Variable);
        assert_eq!(binary_kind(Field::Payload), Binary::NotAllowed);
    }

    #[test]
    fn binary_fields_decode() {
        let rec = [0, 0, 0, 5, 0, 0, 0x03, 0xe8, 1, 2, 3, 4, 0, 80, 2, 7, 7];
        let (v, n) = decode_binary(Field::Timestamp, &rec, 0).unwrap();
        assert_eq!((v, n), (Some(Value::Time(5_001_000_000)), 8));
        let (v, _) = decode_binary(Field::IpSrc, &rec, 8).unwrap();
        assert_eq!(v, Some(Value::Num(0x0102_0304)));
        let (v, _) = decode_binary(Field::Sport, &rec, 12).unwrap();
        assert_eq!(v, Some(Value::Num(80)));
        let (v, n) = decode_binary(Field::IpOpt, &rec, 14).unwrap();
        assert_eq!((v, n), (Some(Value::Bytes(vec![7, 7])), 3));
        assert!(decode_binary(Field::IpSrc, &rec, 15).is_none(), "record too short");
    }
}

#[cfg(test)]
mod robustness_tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    /// A small deterministic generator (xorshift), so failures repeat.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const ALL: &[Field] = &[
        Field::Timestamp,
        Field::NTimestamp,
        Field::TsSec,
        Field::TsUsec,
        Field::TsUsec1,
        Field::FirstTimestamp,
        Field::FirstNTimestamp,
        Field::Count,
        Field::Link,
        Field::Direction,
        Field::Aggregate,
        Field::WireLen,
        Field::IpSrc,
        Field::IpDst,
        Field::IpTos,
        Field::IpDscp,
        Field::IpEcn,
        Field::IpTtl,
        Field::IpFrag,
        Field::IpFragoff,
        Field::IpId,
        Field::IpSum,
        Field::IpProto,
        Field::IpHl,
        Field::IpLen,
        Field::IpCaptureLen,
        Field::IpOpt,
        Field::Sport,
        Field::Dport,
        Field::TcpSeq,
        Field::TcpAck,
        Field::TcpOff,
        Field::TcpFlags,
        Field::TcpWindow,
        Field::TcpUrp,
        Field::TcpOpt,
        Field::TcpNtopt,
        Field::TcpSack,
        Field::UdpLen,
        Field::IcmpType,
        Field::IcmpCode,
        Field::IcmpTypeName,
        Field::IcmpCodeName,
        Field::IcmpFlowid,
        Field::IcmpSeq,
        Field::IcmpNextmtu,
        Field::PayloadLen,
        Field::Payload,
        Field::PayloadMd5,
        Field::PayloadMd5Hex,
        Field::EthSrc,
        Field::EthDst,
    ];

    #[test]
    fn any_packet_bytes_are_described_without_panic() {
        let pool = Mempool::new("fuzz", 8, MemoryKind::Plain).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let mut p = pool.alloc().unwrap();
            let len = rng.below(90);
            p.set_len(len).unwrap();
            for b in p.iter_mut() {
                // Mostly plausible IPv4 headers, sometimes noise.
                *b = rng.next() as u8;
            }
            let off = rng.below(20).min(len);
            if len > off && round % 4 != 0 {
                p[off] = 0x40 | (5 + rng.below(11)) as u8;
            }
            if round % 5 != 0 {
                let hl = rng.below(70);
                let _ = p.set_network_header(off, hl.min(len - off));
            }
            set_anno_u32(&mut p, EXTRA_LENGTH_ANNO, rng.next() as u32);
            set_anno_u32(&mut p, EXTRA_PACKETS_ANNO, rng.below(4) as u32);
            let d = Desc::new(&p);
            for &f in ALL {
                let _ = d.text(f);
                let _ = d.binary(f);
            }
        }
    }

    #[test]
    fn any_field_text_builds_a_packet_without_panic() {
        let words = [
            "-",
            ".",
            "0",
            "1",
            "255",
            "256",
            "65535",
            "70000",
            "4294967295",
            "99999999999",
            "1.2.3.4",
            "T",
            "U",
            "I",
            "SA",
            "F",
            "f",
            "!",
            "0+",
            "8!",
            "ce",
            "echo",
            "port",
            "\"x\"",
            "\"\"",
            "\"\\377\"",
            "ssrr{1.2.3.4^}",
            "rr{}+63",
            "ts{1,^2}+60++15",
            "ts.preip{1.1.1.1=?}",
            "ts.9{",
            "nop;eol",
            "mss1460;sackok",
            "sack1-2,sack3",
            "ts1:2",
            "99=1:2",
            "é",
            ".5",
            "1.5",
            "-3",
        ];
        let mut rng = Rng(42);
        for _ in 0..5000 {
            let mut b = Builder::new(rng.below(256) as u8, None);
            for _ in 0..rng.below(8) {
                let f = ALL[rng.below(ALL.len())];
                let w = words[rng.below(words.len())];
                if let Some(v) = parse_value(f, w, b.icmp_type()) {
                    b.inject(f, &v);
                }
            }
            let _ = b.finish(rng.below(2) == 0);
        }
    }
}
