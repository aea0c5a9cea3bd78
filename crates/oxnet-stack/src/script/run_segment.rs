//! Segments between a script and the stack: the inbound ones built as IP
//! packets, the outbound ones read back into the script's notation, the
//! sequence numbers mapped as packetdrill maps them, and the comparison of
//! what came out with what the script expects.
//!
//! # Sequence numbers (packetdrill's mapping)
//! - The remote end is the script: its sequence numbers are absolute (its
//!   ISN is what its first SYN says, usually 0), so an inbound `seq` goes
//!   on the wire as written, and an outbound `ack` is compared after
//!   subtracting that ISN.
//! - oxnet's ISN is learnt from its first SYN or SYN-ACK: an outbound
//!   `seq` is compared relative to it, and an inbound `ack` has it added
//!   (0 until it is known). SACK blocks follow the same rule as the
//!   number they acknowledge.
//!
//! # Options
//! Inbound options go on the wire exactly as written, in order, `nop`s
//! and all. The TSecr of an inbound timestamps option, when not 0, is
//! replaced by the TSval of the last segment oxnet sent (what a real peer
//! would echo; oxnet's TSval is its clock, which the script cannot know).
//! Outbound options are compared in order, kind by kind, with their
//! values; oxnet's TSval is not compared (its clock), its TSecr is (the
//! script's TSval echoed back). `<...>` accepts any options.
//!
//! Inbound payload bytes are zeros, as packetdrill's.

use super::ast::{Direction, EventKind, IpVersion, SackBlock, TcpFlags as Flags, TcpOptionSpec};
use crate::wire::{
    Checksum, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpFlags, TcpPacket, TcpRepr,
    TcpSeqNumber,
};
use std::net::{Ipv4Addr, Ipv6Addr};

/// oxnet's address over IPv4 (packetdrill's default local address).
pub const LOCAL_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
/// The script's address over IPv4 (packetdrill's default remote address,
/// from RFC 5737's documentation block).
pub const REMOTE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// oxnet's address over IPv6 (packetdrill's default, RFC 4193 space).
pub const LOCAL_V6: Ipv6Addr = Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 1);
/// The script's address over IPv6 (packetdrill's default, RFC 3849's
/// documentation prefix).
pub const REMOTE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// The port `bind(..., ...)` gives oxnet's socket (packetdrill's default).
pub const LOCAL_PORT: u16 = 8080;
/// The script's port (packetdrill picks an ephemeral one; any will do).
pub const REMOTE_PORT: u16 = 40_000;

/// The two ends' addresses for a script's IP version: (oxnet, script).
pub fn addresses(ip: IpVersion) -> (IpAddress, IpAddress) {
    match ip {
        IpVersion::V4 => (LOCAL_V4.into(), REMOTE_V4.into()),
        IpVersion::V6 => (LOCAL_V6.into(), REMOTE_V6.into()),
    }
}

/// What the runner has learnt of both ends' sequence and timestamp
/// clocks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SeqMap {
    /// oxnet's ISN, once its first SYN has come out.
    pub local_isn: Option<u32>,
    /// The script's ISN, once its first SYN has gone in.
    pub remote_isn: Option<u32>,
    /// The TSval of the last segment oxnet sent.
    pub last_tsval: Option<u32>,
}

impl SeqMap {
    fn local(&self) -> u32 {
        self.local_isn.unwrap_or(0)
    }

    fn remote(&self) -> u32 {
        self.remote_isn.unwrap_or(0)
    }

    /// Learns the script's ISN from an inbound SYN (the first one).
    pub fn learn_inbound(&mut self, syn: bool, seq: u32) {
        if syn && self.remote_isn.is_none() {
            self.remote_isn = Some(seq);
        }
    }

    /// Learns oxnet's ISN (its first SYN) and its TSval.
    pub fn learn_outbound(&mut self, seg: &TcpRepr) {
        if seg.flags.contains(TcpFlags::SYN) && self.local_isn.is_none() {
            self.local_isn = Some(seg.seq.0);
        }
        if let Some((val, _)) = seg.options.timestamps {
            self.last_tsval = Some(val);
        }
    }
}

/// The fields of an `EventKind::Packet`, by name.
pub struct PacketSpec<'a> {
    /// The control bits.
    pub flags: Flags,
    /// The first sequence number (as the script writes it).
    pub seq: u32,
    /// Bytes of payload.
    pub payload_len: u16,
    /// `ack N`, if given (as the script writes it).
    pub ack: Option<u32>,
    /// `win N`, if given.
    pub window: Option<u16>,
    /// `urg N`, if given.
    pub urgent: Option<u16>,
    /// The options in order; None for `<...>`.
    pub options: Option<&'a [TcpOptionSpec]>,
}

impl<'a> PacketSpec<'a> {
    /// The segment fields of `kind`, None if it is not a segment.
    pub fn of(kind: &'a EventKind) -> Option<PacketSpec<'a>> {
        match kind {
            EventKind::Packet {
                flags,
                seq_start,
                payload_len,
                ack,
                window,
                urgent,
                options,
                ..
            } => Some(PacketSpec {
                flags: *flags,
                seq: *seq_start,
                payload_len: *payload_len,
                ack: *ack,
                window: *window,
                urgent: *urgent,
                options: options.as_deref(),
            }),
            _ => None,
        }
    }
}

/// The script's flags as the header's.
fn wire_flags(f: Flags) -> TcpFlags {
    let mut out = TcpFlags::empty();
    for (on, bit) in [
        (f.fin, TcpFlags::FIN),
        (f.syn, TcpFlags::SYN),
        (f.rst, TcpFlags::RST),
        (f.psh, TcpFlags::PSH),
        (f.ack, TcpFlags::ACK),
        (f.urg, TcpFlags::URG),
        (f.ece, TcpFlags::ECE),
        (f.cwr, TcpFlags::CWR),
    ] {
        if on {
            out.insert(bit);
        }
    }
    out
}

/// The header's flags in the script's notation.
fn script_flags(f: TcpFlags) -> Flags {
    Flags {
        syn: f.contains(TcpFlags::SYN),
        fin: f.contains(TcpFlags::FIN),
        rst: f.contains(TcpFlags::RST),
        psh: f.contains(TcpFlags::PSH),
        urg: f.contains(TcpFlags::URG),
        ece: f.contains(TcpFlags::ECE),
        cwr: f.contains(TcpFlags::CWR),
        ack: f.contains(TcpFlags::ACK),
    }
}

/// The option bytes of an inbound segment, exactly as listed (kinds and
/// lengths from RFC 9293 §3.1, RFC 7323 §2.2 and §3.2, RFC 2018 §2-3).
fn option_bytes(options: &[TcpOptionSpec], map: &SeqMap) -> Vec<u8> {
    let mut b = Vec::new();
    for o in options {
        match o {
            TcpOptionSpec::EndOfList => b.push(0),
            TcpOptionSpec::Nop => b.push(1),
            TcpOptionSpec::Mss(mss) => b.extend([2, 4, (mss >> 8) as u8, *mss as u8]),
            TcpOptionSpec::WindowScale(shift) => b.extend([3, 3, *shift]),
            TcpOptionSpec::SackPermitted => b.extend([4, 2]),
            TcpOptionSpec::Sack(blocks) => {
                b.extend([5, (2 + 8 * blocks.len()) as u8]);
                for block in blocks {
                    b.extend(block.left.wrapping_add(map.local()).to_be_bytes());
                    b.extend(block.right.wrapping_add(map.local()).to_be_bytes());
                }
            }
            TcpOptionSpec::Timestamp { val, ecr } => {
                let ecr = match (*ecr, map.last_tsval) {
                    (0, _) | (_, None) => *ecr,
                    (_, Some(ours)) => ours,
                };
                b.extend([8, 10]);
                b.extend(val.to_be_bytes());
                b.extend(ecr.to_be_bytes());
            }
        }
    }
    b
}

/// The IP packet for an inbound segment: from the script's end to
/// oxnet's, sequence numbers mapped, payload zeros, checksums right.
pub fn build_inbound(spec: &PacketSpec<'_>, map: &SeqMap, ip: IpVersion) -> Vec<u8> {
    let (local, remote) = addresses(ip);
    let options = option_bytes(spec.options.unwrap_or(&[]), map);
    let tcp_len = 20 + options.len() + usize::from(spec.payload_len);
    let ip_len = match ip {
        IpVersion::V4 => 20,
        IpVersion::V6 => 40,
    };
    let mut bytes = vec![0; ip_len + tcp_len];
    match (local, remote) {
        (IpAddress::V4(dst), IpAddress::V4(src)) => Ipv4Repr {
            src,
            dst,
            protocol: IpProtocol::Tcp,
            payload_len: tcp_len,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..ip_len])),
        (IpAddress::V6(dst), IpAddress::V6(src)) => Ipv6Repr {
            src,
            dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp_len,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut bytes[..ip_len])),
        _ => unreachable!("addresses() gives one family"),
    }
    let mut tcp = TcpPacket::new_unchecked(&mut bytes[ip_len..]);
    tcp.set_src_port(REMOTE_PORT);
    tcp.set_dst_port(LOCAL_PORT);
    tcp.set_seq_number(TcpSeqNumber(spec.seq));
    let ack = spec.ack.unwrap_or(0).wrapping_add(map.local());
    tcp.set_ack_number(TcpSeqNumber(if spec.flags.ack { ack } else { 0 }));
    tcp.set_header_len(20 + options.len());
    tcp.set_flags(wire_flags(spec.flags));
    tcp.set_window_len(spec.window.unwrap_or(0));
    tcp.set_urgent_at(spec.urgent.unwrap_or(0));
    tcp.options_mut().copy_from_slice(&options);
    tcp.fill_checksum(&remote, &local);
    bytes
}

/// A segment oxnet sent, parsed: its header and its options as listed.
#[derive(Debug, Clone)]
pub struct Outbound {
    /// The header, numbers as on the wire.
    pub tcp: TcpRepr,
    /// The options as listed in the header, in order.
    pub options: Vec<TcpOptionSpec>,
}

/// Reads an IP packet the stack sent: the IP header of the script's
/// family from oxnet to the script's address, a TCP segment with a good
/// checksum between the script's ports.
pub fn parse_outbound(bytes: &[u8], ip: IpVersion) -> Result<Outbound, String> {
    let (local, remote) = addresses(ip);
    let (src, dst, at) = match ip {
        IpVersion::V4 => {
            let p = Ipv4Packet::new_checked(bytes).map_err(|e| format!("not an IPv4 packet: {e:?}"))?;
            let r = Ipv4Repr::parse(&p, Checksum::Verify).map_err(|e| format!("bad IPv4 header: {e:?}"))?;
            if r.protocol != IpProtocol::Tcp {
                return Err(format!("an IPv4 packet of protocol {:?}, not TCP", r.protocol));
            }
            (IpAddress::V4(r.src), IpAddress::V4(r.dst), p.header_len())
        }
        IpVersion::V6 => {
            let p = Ipv6Packet::new_checked(bytes).map_err(|e| format!("not an IPv6 packet: {e:?}"))?;
            let r = Ipv6Repr::parse(&p).map_err(|e| format!("bad IPv6 header: {e:?}"))?;
            if r.next_header != IpProtocol::Tcp {
                return Err(format!("an IPv6 packet with next header {:?}, not TCP", r.next_header));
            }
            (IpAddress::V6(r.src), IpAddress::V6(r.dst), 40)
        }
    };
    if (src, dst) != (local, remote) {
        return Err(format!("a packet from {src} to {dst}, not from {local} to {remote}"));
    }
    let segment = bytes.get(at..).ok_or("no TCP header")?;
    let tcp = TcpPacket::new_checked(segment).map_err(|e| format!("bad TCP header: {e:?}"))?;
    let repr = TcpRepr::parse(&tcp, &src, &dst, Checksum::Verify).map_err(|e| format!("bad TCP segment: {e:?}"))?;
    let options = option_list(tcp.options())?;
    Ok(Outbound { tcp: repr, options })
}

/// The options area as a list, in order (padding after an End option is
/// not listed). An unknown kind or a wrong length is an error: the
/// script's notation could not show it.
pub fn option_list(bytes: &[u8]) -> Result<Vec<TcpOptionSpec>, String> {
    let mut list = Vec::new();
    let mut at = 0;
    while let Some(&kind) = bytes.get(at) {
        match kind {
            0 => {
                list.push(TcpOptionSpec::EndOfList);
                break;
            }
            1 => {
                list.push(TcpOptionSpec::Nop);
                at += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(*bytes.get(at + 1).ok_or("an option without its length")?);
        let value = bytes
            .get(at + 2..at + len.max(2))
            .filter(|_| len >= 2)
            .ok_or_else(|| format!("option kind {kind} of length {len} runs past the header"))?;
        let be32 = |v: &[u8]| u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
        list.push(match (kind, value.len()) {
            (2, 2) => TcpOptionSpec::Mss(u16::from_be_bytes([value[0], value[1]])),
            (3, 1) => TcpOptionSpec::WindowScale(value[0]),
            (4, 0) => TcpOptionSpec::SackPermitted,
            (5, n) if n > 0 && n % 8 == 0 => TcpOptionSpec::Sack(
                value
                    .chunks_exact(8)
                    .map(|c| SackBlock {
                        left: be32(&c[..4]),
                        right: be32(&c[4..]),
                    })
                    .collect(),
            ),
            (8, 8) => TcpOptionSpec::Timestamp {
                val: be32(&value[..4]),
                ecr: be32(&value[4..]),
            },
            _ => return Err(format!("option kind {kind} of length {len}")),
        });
        at += len;
    }
    Ok(list)
}

/// An outbound segment in the script's notation, numbers relative as the
/// script writes them (its window and options always shown).
pub fn to_script(seg: &Outbound, map: &SeqMap) -> EventKind {
    let t = &seg.tcp;
    let mut flags = t.flags;
    if t.ack.is_some() {
        flags.insert(TcpFlags::ACK);
    }
    let seq_start = t.seq.0.wrapping_sub(map.local());
    let payload_len = u16::try_from(t.payload_len).unwrap_or(u16::MAX);
    let options = seg
        .options
        .iter()
        .map(|o| match o {
            TcpOptionSpec::Sack(blocks) => TcpOptionSpec::Sack(
                blocks
                    .iter()
                    .map(|b| SackBlock {
                        left: b.left.wrapping_sub(map.remote()),
                        right: b.right.wrapping_sub(map.remote()),
                    })
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect();
    EventKind::Packet {
        direction: Direction::Outbound,
        flags: script_flags(flags),
        seq_start,
        seq_end: seq_start.wrapping_add(payload_len.into()),
        payload_len,
        ack: t.ack.map(|a| a.0.wrapping_sub(map.remote())),
        window: Some(t.window),
        urgent: flags.contains(TcpFlags::URG).then_some(t.urgent),
        options: Some(options),
    }
}

/// How `got` (from [`to_script`]) differs from what the script expects,
/// field by field; empty if it matches.
pub fn differences(want: &PacketSpec<'_>, got: &PacketSpec<'_>) -> Vec<String> {
    let mut diffs = Vec::new();
    if want.flags != got.flags {
        diffs.push(format!("flags {} instead of {}", got.flags, want.flags));
    }
    if want.seq != got.seq {
        diffs.push(format!("seq {} instead of {}", got.seq, want.seq));
    }
    if want.payload_len != got.payload_len {
        diffs.push(format!(
            "{} bytes of data instead of {}",
            got.payload_len, want.payload_len
        ));
    }
    if want.ack.is_some() && want.ack != got.ack {
        diffs.push(format!("ack {} instead of {}", shown(got.ack), shown(want.ack)));
    }
    if want.window.is_some() && want.window != got.window {
        diffs.push(format!("win {} instead of {}", shown(got.window), shown(want.window)));
    }
    if want.urgent.is_some() && want.urgent != got.urgent {
        diffs.push(format!("urg {} instead of {}", shown(got.urgent), shown(want.urgent)));
    }
    if let (Some(want), Some(got)) = (want.options, got.options) {
        let same = want.len() == got.len() && want.iter().zip(got).all(|(w, g)| option_matches(w, g));
        if !same {
            diffs.push("other options".to_string());
        }
    }
    diffs
}

/// A field that may be absent: its value, or "none".
fn shown<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

/// One option against the script's: equal, except oxnet's TSval (its
/// own clock), which is not compared.
fn option_matches(want: &TcpOptionSpec, got: &TcpOptionSpec) -> bool {
    match (want, got) {
        (TcpOptionSpec::Timestamp { ecr: w, .. }, TcpOptionSpec::Timestamp { ecr: g, .. }) => w == g,
        _ => want == got,
    }
}
