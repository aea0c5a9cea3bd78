//! IPPrint: IP packets in a tcpdump-like line (Click's
//! `elements/ip/ipprint.hh` documentation is the specification).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | IPPrint(LABEL, ...) | 1/1 | agnostic | prints one line per IP packet on standard error (or OUTFILE), passes it on |
//!
//! The line: `LABEL: `, the timestamp (`1.000030: `, TIMESTAMP true), then
//! `id N `, `ttl N `, `tos N `, `length N ` as asked, then per protocol:
//! TCP `SRC.SPORT > DST.DPORT: FLAGS SEQ:END(LEN,PKTLEN,IPLEN) ack N win
//! N`; UDP `SRC.SPORT > DST.DPORT: udp LEN`; ICMP `SRC > DST: icmp echo
//! (ID, SEQ)` and the like; others `SRC > DST: ip-proto-N`; a fragment
//! adds ` (frag ID:LEN@OFFSET[+])`.

use super::ipsumdump_fields::{self as f, format_timestamp};
use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};
use std::io::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Contents {
    None,
    Hex,
    Ascii,
}

/// IPPrint(LABEL, CONTENTS, PAYLOAD, MAXLENGTH, ID, TTL, TOS, LENGTH,
/// TIMESTAMP, AGGREGATE, PAINT, SWAP, OUTFILE, ACTIVE): prints IP packets
/// (the network header annotation must be set, else nothing is printed).
/// CONTENTS / PAYLOAD NONE, HEX or ASCII: also the packet's (or only the
/// payload's) bytes, at most MAXLENGTH (default 1500, -1 all). ID, TTL,
/// TOS, LENGTH (default false): print those IP fields. TIMESTAMP (default
/// true): the timestamp. AGGREGATE, PAINT: those annotations. SWAP
/// (default true): ICMP identifier and sequence in network order.
/// Handler: `active` (rw).
pub struct IpPrint {
    label: String,
    contents: Contents,
    payload: bool,
    max: i64,
    id: bool,
    ttl: bool,
    tos: bool,
    length: bool,
    timestamp: bool,
    aggregate: bool,
    paint: bool,
    swap: bool,
    active: bool,
    outfile: Option<String>,
    out: Option<std::fs::File>,
}

impl Default for IpPrint {
    fn default() -> IpPrint {
        IpPrint {
            label: String::new(),
            contents: Contents::None,
            payload: false,
            max: 1500,
            id: false,
            ttl: false,
            tos: false,
            length: false,
            timestamp: true,
            aggregate: false,
            paint: false,
            swap: true,
            active: true,
            outfile: None,
            out: None,
        }
    }
}

fn ip(a: &[u8]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn contents_arg(v: &str) -> Result<Contents, String> {
    if let Ok(b) = args::boolean(v) {
        return Ok(if b { Contents::Hex } else { Contents::None });
    }
    match v.trim().to_ascii_uppercase().as_str() {
        "NONE" | "NO" => Ok(Contents::None),
        "HEX" | "YES" => Ok(Contents::Hex),
        "ASCII" => Ok(Contents::Ascii),
        other => Err(format!("'{other}' should be NONE, HEX or ASCII")),
    }
}

impl IpPrint {
    /// The line for packet `p` (None: no network header, not printed).
    pub fn line(&self, p: &Packet) -> Option<String> {
        let net_off = usize::try_from(p.network_offset()?).ok()?;
        let data: &[u8] = p;
        let mut s = String::new();
        if !self.label.is_empty() {
            s += &self.label;
            s += ": ";
        }
        if self.timestamp {
            s += &format_timestamp(p.anno().timestamp_ns);
            s += ": ";
        }
        if self.aggregate {
            s += &format!("#{}", f::anno_u32(p, f::AGGREGATE_ANNO));
        }
        if self.paint {
            s += if self.aggregate { "." } else { "paint " };
            s += &p.anno().paint().to_string();
        }
        if self.aggregate || self.paint {
            s += ": ";
        }
        let net = data.get(net_off..).unwrap_or(&[]);
        if net.len() < 20 {
            s += "truncated-ip";
            return Some(s);
        }
        let ip_len = usize::from(be16(net, 2));
        let hl = usize::from(net[0] & 0xf) * 4;
        let payload_len = ip_len as isize - hl as isize;
        let t_off = p
            .transport_offset()
            .and_then(|t| usize::try_from(t).ok())
            .unwrap_or(net_off + hl);
        let t = data.get(t_off..).unwrap_or(&[]);
        let tl = (t.len() as isize).min(payload_len).max(0) as usize;
        let t = &t[..tl];
        if self.id {
            s += &format!("id {} ", be16(net, 4));
        }
        if self.ttl {
            s += &format!("ttl {} ", net[8]);
        }
        if self.tos {
            s += &format!("tos {} ", net[1]);
        }
        if self.length {
            s += &format!("length {ip_len} ");
        }
        let first_frag = be16(net, 6) & 0x1fff == 0;
        let (src, dst) = (ip(&net[12..16]), ip(&net[16..20]));
        match net[9] {
            f::IP_PROTO_TCP => Self::tcp_line(&mut s, &src, &dst, t, first_frag, ip_len, hl, p.len()),
            f::IP_PROTO_UDP => {
                if tl < 4 || !first_frag {
                    s += &format!("{src} > {dst}: {}", if first_frag { "truncated-udp" } else { "udp" });
                } else {
                    s += &format!("{src}.{} > {dst}.{}: ", be16(t, 0), be16(t, 2));
                    if tl < 8 {
                        s += "truncated-udp";
                    } else {
                        s += &format!("udp {}", be16(t, 4));
                    }
                }
            }
            f::IP_PROTO_ICMP => {
                s += &format!("{src} > {dst}: ");
                self.icmp_line(&mut s, t, first_frag);
            }
            other => s += &format!("{src} > {dst}: ip-proto-{other}"),
        }
        let off = be16(net, 6);
        if off & 0x3fff != 0 {
            s += &format!(
                " (frag {}:{}@{}{})",
                be16(net, 4),
                payload_len,
                u32::from(off & 0x1fff) << 3,
                if off & 0x2000 != 0 { "+" } else { "" }
            );
        }
        if self.contents != Contents::None {
            let start = if self.payload {
                if first_frag && net[9] == f::IP_PROTO_TCP && t.len() >= 13 {
                    t_off + usize::from(t[12] >> 4) * 4
                } else if first_frag && net[9] == f::IP_PROTO_UDP {
                    t_off + 8
                } else {
                    t_off
                }
            } else {
                0
            };
            let bytes = data.get(start..).unwrap_or(&[]);
            let n = if self.max < 0 {
                bytes.len()
            } else {
                bytes.len().min(self.max as usize)
            };
            for (i, b) in bytes[..n].iter().enumerate() {
                if self.contents == Contents::Hex {
                    if i % 24 == 0 {
                        s += "\n  ";
                    } else if i % 4 == 0 {
                        s.push(' ');
                    }
                    s += &format!("{b:02x}");
                } else {
                    if i % 48 == 0 {
                        s += "\n  ";
                    } else if i % 8 == 0 {
                        s.push(' ');
                    }
                    s.push(if (32..=126).contains(b) { *b as char } else { '.' });
                }
            }
        }
        Some(s)
    }

    #[allow(clippy::too_many_arguments)]
    fn tcp_line(
        s: &mut String,
        src: &str,
        dst: &str,
        t: &[u8],
        first_frag: bool,
        ip_len: usize,
        hl: usize,
        pkt_len: usize,
    ) {
        if t.len() < 4 || !first_frag {
            *s += &format!("{src} > {dst}: {}", if first_frag { "truncated-tcp" } else { "tcp" });
            return;
        }
        *s += &format!("{src}.{} > {dst}.{}: ", be16(t, 0), be16(t, 2));
        if t.len() < 14 {
            *s += "truncated-tcp";
            return;
        }
        let flags = t[13];
        let mut seqlen = ip_len as i64 - hl as i64 - i64::from(t[12] >> 4) * 4;
        if flags & 0x02 != 0 {
            s.push('S');
            seqlen += 1;
        }
        if flags & 0x01 != 0 {
            s.push('F');
            seqlen += 1;
        }
        if flags & 0x04 != 0 {
            s.push('R');
        }
        if flags & 0x08 != 0 {
            s.push('P');
        }
        if flags & 0x0f == 0 {
            s.push('.');
        }
        let seq = be32(t, 4);
        *s += &format!(
            " {seq}:{}({seqlen},{pkt_len},{ip_len})",
            seq.wrapping_add(seqlen as u32)
        );
        if flags & 0x10 != 0 {
            *s += &format!(" ack {}", be32(t, 8));
        }
        if t.len() < 16 {
            *s += "truncated-tcp";
            return;
        }
        *s += &format!(" win {}", be16(t, 14));
    }

    fn icmp_line(&self, s: &mut String, t: &[u8], first_frag: bool) {
        if !first_frag {
            *s += "icmp";
            return;
        }
        if t.len() < 2 {
            *s += "truncated-icmp";
            return;
        }
        let (ty, code) = (t[0], t[1]);
        match ty {
            0 | 8 => {
                *s += if ty == 0 { "icmp echo-reply " } else { "icmp echo " };
                if t.len() < 8 {
                    *s += "truncated-icmp";
                    return;
                }
                let (id, seq) = if self.swap {
                    (be16(t, 4), be16(t, 6))
                } else {
                    (u16::from_le_bytes([t[4], t[5]]), u16::from_le_bytes([t[6], t[7]]))
                };
                *s += &format!("({id}, {seq})");
            }
            3 => {
                let name = f::icmp_code_name(3, code).map_or_else(|| format!("code {code}"), str::to_string);
                let e = &t[8.min(t.len())..];
                if e.len() < 20 {
                    *s += &format!("icmp unreachable {name} truncated-icmp");
                    return;
                }
                let ehl = usize::from(e[0] & 0xf) * 4;
                *s += &format!("icmp {} unreachable {name}", ip(&e[16..20]));
                let proto = |prepend: bool| {
                    f::ip_proto_name(e[9]).map_or_else(
                        || {
                            if prepend {
                                format!("protocol {}", e[9])
                            } else {
                                e[9].to_string()
                            }
                        },
                        str::to_string,
                    )
                };
                match code {
                    2 => *s += &format!(" {}", proto(false)),
                    3 => {
                        *s += &format!(" {}", proto(true));
                        if e.len() < ehl + 4 {
                            *s += "truncated-icmp";
                            return;
                        }
                        *s += &format!("/{}", be16(e, ehl + 2));
                    }
                    4 if t.len() >= 8 && be16(t, 6) != 0 => *s += &format!(" (mtu {})", be16(t, 6)),
                    _ => {}
                }
            }
            _ => {
                *s += "icmp ";
                match f::icmp_type_name(ty) {
                    Some(n) => *s += n,
                    None => *s += &format!("type {ty}"),
                }
                match f::icmp_code_name(ty, code) {
                    Some(n) => *s += &format!(" {n}"),
                    None if code != 0 => *s += &format!(" code {code}"),
                    None => {}
                }
            }
        }
    }
}

impl Element for IpPrint {
    fn class_name(&self) -> &'static str {
        "IPPrint"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(l) = a.positional_or("LABEL") {
            self.label = args::string(&l)?;
        }
        if let Some(c) = a.keyword("CONTENTS") {
            self.contents = contents_arg(&c).map_err(|e| format!("CONTENTS: {e}"))?;
        }
        if let Some(c) = a.keyword("PAYLOAD") {
            let v = contents_arg(&c).map_err(|e| format!("PAYLOAD: {e}"))?;
            if v != Contents::None {
                if self.contents != Contents::None {
                    return Err("specify at most one of PAYLOAD and CONTENTS".into());
                }
                self.contents = v;
                self.payload = true;
            }
        }
        for key in ["MAXLENGTH", "NBYTES"] {
            if let Some(v) = opt(a.keyword(key), args::integer, key)? {
                self.max = v;
            }
        }
        for (key, slot) in [
            ("ID", &mut self.id),
            ("TTL", &mut self.ttl),
            ("TOS", &mut self.tos),
            ("LENGTH", &mut self.length),
            ("TIMESTAMP", &mut self.timestamp),
            ("AGGREGATE", &mut self.aggregate),
            ("PAINT", &mut self.paint),
            ("SWAP", &mut self.swap),
            ("ACTIVE", &mut self.active),
        ] {
            if let Some(v) = opt(a.keyword(key), args::boolean, key)? {
                *slot = v;
            }
        }
        if let Some(o) = a.keyword("OUTFILE") {
            self.outfile = Some(args::string(&o)?);
        }
        let _ = a.keyword("CHANNEL");
        Ok(())
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        if let Some(name) = &self.outfile {
            self.out = Some(std::fs::File::create(name).map_err(|e| format!("{name}: {e}"))?);
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if self.active {
            let mut text = String::new();
            for p in batch.iter() {
                if let Some(line) = self.line(p) {
                    text += &line;
                    text.push('\n');
                }
            }
            let _ = match &mut self.out {
                Some(file) => file.write_all(text.as_bytes()),
                None => std::io::stderr().lock().write_all(text.as_bytes()),
            };
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("active", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "active").then(|| self.active.to_string())
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "active").then(|| args::boolean(value).map(|v| self.active = v))
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["IPPrint"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "IPPrint" => Box::<IpPrint>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    #[test]
    fn any_packet_bytes_print_without_panic() {
        let pool = Mempool::new("print", 4, MemoryKind::Plain).unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let printers = [
            IpPrint::default(),
            IpPrint {
                contents: Contents::Hex,
                payload: true,
                id: true,
                ttl: true,
                tos: true,
                length: true,
                paint: true,
                aggregate: true,
                ..IpPrint::default()
            },
            IpPrint {
                contents: Contents::Ascii,
                max: -1,
                swap: false,
                ..IpPrint::default()
            },
        ];
        for round in 0..3000u64 {
            let mut p = pool.alloc().unwrap();
            let len = (next() % 100) as usize;
            p.set_len(len).unwrap();
            for b in p.iter_mut() {
                *b = next() as u8;
            }
            if len > 0 {
                p[0] = 0x40 | (next() % 16) as u8;
                if len > 9 {
                    p[9] = [1, 6, 17, 99][(round % 4) as usize];
                }
            }
            let _ = p.set_network_header(0, (next() % 64) as usize % (len + 1));
            for printer in &printers {
                let _ = printer.line(&p);
            }
        }
    }

    #[test]
    fn icmp_unreachable_names_its_code_and_the_original_destination() {
        let pool = Mempool::new("print", 2, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        // IP (20) + ICMP port unreachable (8) + the original IP header
        // (20) and UDP ports (4): RFC 792's layout.
        let mut bytes = vec![0u8; 52];
        bytes[0] = 0x45;
        bytes[2..4].copy_from_slice(&52u16.to_be_bytes());
        bytes[9] = 1;
        bytes[12..16].copy_from_slice(&[9, 9, 9, 9]);
        bytes[16..20].copy_from_slice(&[1, 0, 0, 1]);
        bytes[20] = 3;
        bytes[21] = 3;
        bytes[28] = 0x45;
        bytes[37] = 17;
        bytes[44..48].copy_from_slice(&[5, 5, 5, 5]);
        bytes[50..52].copy_from_slice(&53u16.to_be_bytes());
        p.set_len(52).unwrap();
        p.copy_from_slice(&bytes);
        p.set_network_header(0, 20).unwrap();
        let line = IpPrint {
            timestamp: false,
            ..IpPrint::default()
        }
        .line(&p)
        .unwrap();
        assert_eq!(line, "9.9.9.9 > 1.0.0.1: icmp 5.5.5.5 unreachable port udp/53");
    }
}
