//! Ethernet framing and the information elements, after Click's
//! documentation of the classes of the same names
//! (elements/ethernet/*.hh, include/click/standard/addressinfo.hh and
//! portinfo.hh in Click).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | AddressInfo(NAME ADDR..., ...) | 0/0 | - | names IPv4 addresses, prefixes and Ethernet addresses for the other elements' arguments |
//! | PortInfo(NAME PORT[/PROTO], ...) | 0/0 | - | names TCP and UDP ports |
//! | EtherEncap(ETHERTYPE, SRC, DST) | 1/1 | agnostic | prepends a 14-byte Ethernet header |
//! | EtherRewrite(SRC, DST) | 1/1 | agnostic | overwrites the source and destination Ethernet addresses |
//! | EtherMirror | 1/1 | agnostic | swaps the source and destination Ethernet addresses |
//! | HostEtherFilter(ETHER, DROP_OWN, DROP_OTHER, OFFSET) | 1/1-2 | agnostic, output 1 push | sets the packet type annotation as a NIC with address ETHER would, drops (or emits on output 1) frames for other hosts |
//! | EnsureEther(ETHERTYPE, SRC, DST) | 1/1 | agnostic | gives IP packets an Ethernet header if they have none |
//!
//! The Ethernet header (IEEE 802.3 / RFC 894): destination address (6
//! bytes), source address (6), EtherType (2, network order). A frame too
//! short to hold the header the element edits is dropped and counted in
//! `drops` (Click's elements assume well-formed input; ours never read
//! past a packet).

use crate::args::{self, AddressEntry, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};

/// Ethernet header length.
pub const ETHER_LEN: usize = 14;
/// EtherType of IPv4 (RFC 894).
pub const ETHERTYPE_IP: u16 = 0x0800;
/// EtherType of ARP (RFC 826).
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IP6: u16 = 0x86dd;
/// The broadcast Ethernet address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// An Ethernet address as Click prints it: `00-1B-21-0A-0B-FF`.
pub fn ether_text(a: &[u8]) -> String {
    a.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join("-")
}

/// An IPv4 address in dotted decimal.
pub fn ip_text(a: &[u8]) -> String {
    a.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(".")
}

/// A prefix as Click's `unparse_with_mask`: `ADDR/LEN`, or `ADDR/MASK` if
/// the mask is not contiguous.
pub fn prefix_text(addr: [u8; 4], mask: [u8; 4]) -> String {
    match args::mask_len(mask) {
        Some(len) => format!("{}/{len}", ip_text(&addr)),
        None => format!("{}/{}", ip_text(&addr), ip_text(&mask)),
    }
}

/// Click's timestamp text: seconds and microseconds (`0.081000`).
pub fn timestamp_text(ns: i64) -> String {
    let us = ns.div_euclid(1000);
    format!("{}.{:06}", us.div_euclid(1_000_000), us.rem_euclid(1_000_000))
}

pub(crate) fn parse_or<T>(
    value: Option<String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    value.map(|v| parse(&v).map_err(|e| format!("{key}: {e}"))).transpose()
}

fn required<T>(a: &mut Args, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, String> {
    let v = a.required(key)?;
    parse(&v).map_err(|e| format!("{key}: {e}"))
}

/// An EtherType: an integer 0-0xFFFF (Click writes them in hex, 0x0800).
pub fn ethertype(text: &str) -> Result<u16, String> {
    let v = args::unsigned(text)?;
    u16::try_from(v).map_err(|_| format!("'{}' is not an EtherType (0-0xFFFF)", text.trim()))
}

/// What [`sort_out`] does with one packet.
pub(crate) enum Verdict {
    /// On to output 0.
    Pass,
    /// To output 1 if it is connected, else dropped and counted.
    Reject,
    /// Dropped and counted.
    Drop,
}

/// Runs `f` on every packet of `batch`: returns the ones for output 0,
/// pushes the rejected ones out of output 1 when there is one, and adds
/// the packets dropped to `drops`. The agnostic elements with an optional
/// second push output (Click's `checked_output_push(1, p)`) use it from
/// `simple_action`, so it works on both their push and pull paths.
pub(crate) fn sort_out(
    mut batch: PacketBatch,
    ctx: &mut Ctx<'_>,
    drops: &mut u64,
    mut f: impl FnMut(&mut Packet) -> Verdict,
) -> PacketBatch {
    let n = batch.len();
    // In place while every packet passes (the common case): the batch
    // goes on as it came, no new one.
    let mut stop = None;
    for (i, p) in batch.iter_mut().enumerate() {
        match f(p) {
            Verdict::Pass => {}
            other => {
                stop = Some((i, other));
                break;
            }
        }
    }
    let Some((at, verdict)) = stop else { return batch };
    let mut pass = crate::element::take_batch(n);
    let mut reject = PacketBatch::default();
    let second = ctx.noutputs() > 1;
    let mut i = 0;
    let mut verdict = Some(verdict);
    batch.consume_front(n, |mut p| {
        // Packets before `at` passed already, `at` has its verdict; f
        // runs once per packet.
        let v = match i.cmp(&at) {
            std::cmp::Ordering::Less => Verdict::Pass,
            std::cmp::Ordering::Equal => verdict.take().unwrap_or(Verdict::Drop),
            std::cmp::Ordering::Greater => f(&mut p),
        };
        i += 1;
        match v {
            Verdict::Pass => pass.push(p),
            Verdict::Reject if second => reject.push(p),
            _ => *drops += 1,
        }
    });
    crate::element::recycle_batch(batch);
    ctx.push(1, reject);
    pass
}

// ---- AddressInfo, PortInfo

/// AddressInfo(NAME ADDRESS [ADDRESS...], ...): each argument gives NAME
/// one or more of an IPv4 address (`10.0.0.1`), an IPv4 prefix
/// (`10.0.0.0/8`; `10.0.0.1/8` defines both the address and the prefix,
/// as Click does) and an Ethernet address. Other elements' arguments then
/// take NAME, or NAME with a suffix that picks the kind: `NAME:ip`,
/// `NAME:ipnet` (or `:net`), `NAME:bcast` (the prefix with every host bit
/// set), `NAME:gw` (the network address with its lowest bit set),
/// `NAME:eth`. The router configures AddressInfo elements before all
/// others (Click's CONFIGURE_PHASE_FIRST). Names are global to the
/// configuration (Click scopes them by compound element; ours are not).
/// No ports, no handlers.
#[derive(Default)]
pub struct AddressInfo;

impl Element for AddressInfo {
    fn class_name(&self) -> &'static str {
        "AddressInfo"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        for arg in a.rest_positional() {
            let words = crate::lang::vars::split_words(&arg);
            let Some((name, addrs)) = words.split_first() else {
                continue;
            };
            if addrs.is_empty() {
                return Err(format!("'{arg}': expected NAME ADDRESS..."));
            }
            let mut entry = AddressEntry::default();
            for word in addrs {
                // A word may be an Ethernet address, an IPv4 address or an
                // IPv4 prefix (Click's AddressInfo::configure); an address
                // and a prefix given apart are kept together when the
                // address lies in the prefix, else the later one wins.
                let ether = args::ether_address(word).ok();
                let ip = if let Ok(ip) = args::ip_address(word) {
                    Some((ip, 32))
                } else if word.contains('/') {
                    match args::ip_prefix(word) {
                        Ok((addr, mask)) => Some((
                            addr,
                            args::mask_len(mask).ok_or_else(|| format!("'{word}': the mask is not contiguous"))?,
                        )),
                        Err(_) => None,
                    }
                } else {
                    None
                };
                if ether.is_none() && ip.is_none() {
                    return Err(format!("'{word}' is not a recognizable address"));
                }
                if ether.is_some() && (ip.is_none() || entry.ether.is_none()) {
                    entry.ether = ether;
                }
                if let Some((addr, len)) = ip {
                    let mask = u32::from_be_bytes(args::prefix_mask(len));
                    entry.ip = Some(match entry.ip {
                        // An address, then its network.
                        Some((old, 32))
                            if len < 32 && u32::from_be_bytes(old) & mask == u32::from_be_bytes(addr) & mask =>
                        {
                            (old, len)
                        }
                        // A network, then an address in it.
                        Some((net, l))
                            if len == 32 && l < 32 && {
                                let m = u32::from_be_bytes(args::prefix_mask(l));
                                u32::from_be_bytes(net) & m == u32::from_be_bytes(addr) & m
                            } =>
                        {
                            (addr, l)
                        }
                        _ => (addr, len),
                    });
                }
            }
            args::define_address(name, entry);
        }
        Ok(())
    }
}

/// PortInfo(NAME PORT[/PROTOCOL] [NAME...], ...): names TCP and UDP ports
/// (PROTOCOL `tcp`, `udp` or a number; without it, both), read by
/// [`args::ip_port`]. Further words after the port are more names for it
/// and `#` starts a comment, so /etc/services lines work verbatim, as
/// Click's PortInfo says. No ports, no handlers.
#[derive(Default)]
pub struct PortInfo;

impl Element for PortInfo {
    fn class_name(&self) -> &'static str {
        "PortInfo"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        for arg in a.rest_positional() {
            let words: Vec<String> = crate::lang::vars::split_words(&arg)
                .into_iter()
                .take_while(|w| !w.starts_with('#'))
                .collect();
            if words.is_empty() {
                continue;
            }
            let bad = || format!("'{arg}': expected NAME PORT[/PROTOCOL]");
            let spec = words.get(1).ok_or_else(bad)?;
            let (port, proto) = match spec.split_once('/') {
                Some((p, proto)) => (p, Some(proto)),
                None => (spec.as_str(), None),
            };
            let port = u16::try_from(args::unsigned(port).map_err(|_| bad())?).map_err(|_| bad())?;
            let proto = match proto {
                None => None,
                Some("tcp") => Some(6),
                Some("udp") => Some(17),
                Some(other) => Some(u8::try_from(args::unsigned(other).map_err(|_| bad())?).map_err(|_| bad())?),
            };
            for (i, name) in words.iter().enumerate() {
                if i != 1 {
                    args::define_port(name, proto, port);
                }
            }
        }
        Ok(())
    }
}

// ---- Ethernet header edits

/// EtherEncap(ETHERTYPE, SRC, DST): prepends an Ethernet header with
/// these fields (ETHERTYPE in host order, e.g. 0x0800). A packet without
/// 14 bytes of head room is dropped and counted. Handlers: `ethertype`
/// (read in decimal, as Click), `src`, `dst` (read/write), `drops`.
#[derive(Default)]
pub struct EtherEncap {
    header: [u8; ETHER_LEN],
    drops: u64,
}

impl EtherEncap {
    fn set_type(&mut self, t: u16) {
        self.header[12..14].copy_from_slice(&t.to_be_bytes());
    }
}

impl Element for EtherEncap {
    fn class_name(&self) -> &'static str {
        "EtherEncap"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let t = required(a, "ETHERTYPE", ethertype)?;
        let src = required(a, "SRC", args::ether_address)?;
        let dst = required(a, "DST", args::ether_address)?;
        self.header[0..6].copy_from_slice(&dst);
        self.header[6..12].copy_from_slice(&src);
        self.set_type(t);
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let header = self.header;
        Some(sort_out(batch, ctx, &mut self.drops, |p| match p.prepend(ETHER_LEN) {
            Ok(h) => {
                h.copy_from_slice(&header);
                Verdict::Pass
            }
            Err(_) => Verdict::Drop,
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("ethertype", true, true),
            ("src", true, true),
            ("dst", true, true),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            // Decimal, as Click's data handler prints it.
            "ethertype" => u16::from_be_bytes([self.header[12], self.header[13]]).to_string(),
            "src" => ether_text(&self.header[6..12]),
            "dst" => ether_text(&self.header[0..6]),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "ethertype" => ethertype(value).map(|t| self.set_type(t)),
            "src" => args::ether_address(value).map(|a| self.header[6..12].copy_from_slice(&a)),
            "dst" => args::ether_address(value).map(|a| self.header[0..6].copy_from_slice(&a)),
            _ => return None,
        })
    }
}

/// EtherRewrite(SRC, DST): overwrites the source and destination
/// addresses of each frame, EtherType untouched. Frames shorter than 14
/// bytes are dropped and counted. Handlers: `src`, `dst` (read/write),
/// `drops`.
#[derive(Default)]
pub struct EtherRewrite {
    src: [u8; 6],
    dst: [u8; 6],
    drops: u64,
}

impl Element for EtherRewrite {
    fn class_name(&self) -> &'static str {
        "EtherRewrite"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.src = required(a, "SRC", args::ether_address)?;
        self.dst = required(a, "DST", args::ether_address)?;
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (src, dst) = (self.src, self.dst);
        Some(sort_out(batch, ctx, &mut self.drops, |p| {
            if p.len() < ETHER_LEN {
                return Verdict::Drop;
            }
            p[0..6].copy_from_slice(&dst);
            p[6..12].copy_from_slice(&src);
            Verdict::Pass
        }))
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("src", true, true), ("dst", true, true), ("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        Some(match name {
            "src" => ether_text(&self.src),
            "dst" => ether_text(&self.dst),
            "drops" => self.drops.to_string(),
            _ => return None,
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "src" => args::ether_address(value).map(|a| self.src = a),
            "dst" => args::ether_address(value).map(|a| self.dst = a),
            _ => return None,
        })
    }
}

/// EtherMirror: swaps each frame's source and destination addresses.
/// Frames shorter than 12 bytes are dropped and counted (`drops`).
#[derive(Default)]
pub struct EtherMirror {
    drops: u64,
}

impl Element for EtherMirror {
    fn class_name(&self) -> &'static str {
        "EtherMirror"
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        Some(sort_out(batch, ctx, &mut self.drops, |p| {
            if p.len() < 12 {
                return Verdict::Drop;
            }
            let (dst, src) = p[..12].split_at_mut(6);
            dst.swap_with_slice(src);
            Verdict::Pass
        }))
    }
    crate::drops_handler!();
}

/// Click's packet type annotation values (`Packet::PacketType`).
pub mod packet_type {
    pub const HOST: u8 = 0;
    pub const BROADCAST: u8 = 1;
    pub const MULTICAST: u8 = 2;
    pub const OTHERHOST: u8 = 3;
}

/// HostEtherFilter(ETHER [, DROP_OWN, DROP_OTHER], OFFSET): acts as the
/// receive filter of a NIC whose address is ETHER: sets the packet type
/// annotation to HOST (destination ETHER), BROADCAST (FF-FF-FF-FF-FF-FF),
/// MULTICAST (group bit set) or OTHERHOST. Frames from ETHER itself
/// (DROP_OWN, default false) and frames for other hosts (DROP_OTHER,
/// default true) go to output 1 if it is connected, else are dropped.
/// The Ethernet header starts OFFSET bytes in (default 0); a frame too
/// short for it is dropped and counted. Handler: `drops` (dropped, not
/// counting those sent to output 1).
pub struct HostEtherFilter {
    addr: [u8; 6],
    drop_own: bool,
    drop_other: bool,
    offset: usize,
    drops: u64,
}

impl Default for HostEtherFilter {
    fn default() -> HostEtherFilter {
        HostEtherFilter {
            addr: [0; 6],
            drop_own: false,
            drop_other: true,
            offset: 0,
            drops: 0,
        }
    }
}

impl Element for HostEtherFilter {
    fn class_name(&self) -> &'static str {
        "HostEtherFilter"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.addr = required(a, "ETHER", args::ether_address)?;
        if let Some(v) = parse_or(a.positional_or("DROP_OWN"), "DROP_OWN", args::boolean)? {
            self.drop_own = v;
        }
        if let Some(v) = parse_or(a.positional_or("DROP_OTHER"), "DROP_OTHER", args::boolean)? {
            self.drop_other = v;
        }
        if let Some(v) = parse_or(a.keyword("OFFSET"), "OFFSET", args::unsigned)? {
            self.offset = v as usize;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let (addr, own, other, off) = (self.addr, self.drop_own, self.drop_other, self.offset);
        let mut drops = 0;
        let kept = sort_out(batch, ctx, &mut drops, |p| {
            let Some(h) = p.get(off..off + ETHER_LEN) else {
                return Verdict::Drop;
            };
            let (dst, src) = (&h[0..6], &h[6..12]);
            let (kind, verdict) = if own && src == addr {
                return Verdict::Reject;
            } else if dst == addr {
                (packet_type::HOST, Verdict::Pass)
            } else if dst == BROADCAST {
                (packet_type::BROADCAST, Verdict::Pass)
            } else if dst[0] & 1 != 0 {
                (packet_type::MULTICAST, Verdict::Pass)
            } else if other {
                (packet_type::OTHERHOST, Verdict::Reject)
            } else {
                (packet_type::OTHERHOST, Verdict::Pass)
            };
            p.anno_mut().packet_type = kind;
            verdict
        });
        self.drops += drops;
        Some(kept)
    }
    crate::drops_handler!();
}

/// EnsureEther([ETHERTYPE, SRC, DST]): makes sure IP packets carry an
/// Ethernet header. A packet whose IP header is not marked passes
/// unchanged; one whose IP header sits 14 bytes in behind an IPv4 or IPv6
/// EtherType passes unchanged; one whose stripped Ethernet header is still
/// in front of it in the head room gets it back; any other gets the header
/// of the arguments (default EtherType 0x0800, addresses 00-00-00-00-00-00)
/// in front of its IP header. A packet without the head room is dropped
/// and counted (`drops`).
pub struct EnsureEther {
    header: [u8; ETHER_LEN],
    drops: u64,
}

impl Default for EnsureEther {
    fn default() -> EnsureEther {
        let mut header = [0; ETHER_LEN];
        header[12..14].copy_from_slice(&ETHERTYPE_IP.to_be_bytes());
        EnsureEther { header, drops: 0 }
    }
}

fn is_ip_type(t: &[u8]) -> bool {
    let t = u16::from_be_bytes([t[0], t[1]]);
    t == ETHERTYPE_IP || t == ETHERTYPE_IP6
}

impl Element for EnsureEther {
    fn class_name(&self) -> &'static str {
        "EnsureEther"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(t) = parse_or(a.positional_or("ETHERTYPE"), "ETHERTYPE", ethertype)? {
            self.header[12..14].copy_from_slice(&t.to_be_bytes());
        }
        if let Some(s) = parse_or(a.positional_or("SRC"), "SRC", args::ether_address)? {
            self.header[6..12].copy_from_slice(&s);
        }
        if let Some(d) = parse_or(a.positional_or("DST"), "DST", args::ether_address)? {
            self.header[0..6].copy_from_slice(&d);
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let header = self.header;
        Some(sort_out(batch, ctx, &mut self.drops, |p| {
            let Some(ip) = p.network_offset() else {
                return Verdict::Pass;
            };
            if ip < 0 {
                return Verdict::Pass;
            }
            if ip as usize > p.len() {
                // The mark lies past the data (cut short): nothing to frame.
                return Verdict::Drop;
            }
            if ip == ETHER_LEN as isize && is_ip_type(&p[12..14]) {
                return Verdict::Pass;
            }
            if ip == 0 {
                if let Some(old) = p.head_room_mut(ETHER_LEN) {
                    if is_ip_type(&old[12..14]) {
                        let _ = p.prepend(ETHER_LEN);
                        return Verdict::Pass;
                    }
                }
            }
            let _ = p.strip_front(ip as usize);
            match p.prepend(ETHER_LEN) {
                Ok(h) => {
                    h.copy_from_slice(&header);
                    Verdict::Pass
                }
                Err(_) => Verdict::Drop,
            }
        }))
    }
    crate::drops_handler!();
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "AddressInfo",
        "EnsureEther",
        "EtherEncap",
        "EtherMirror",
        "EtherRewrite",
        "HostEtherFilter",
        "PortInfo",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "AddressInfo" => Box::new(AddressInfo),
        "PortInfo" => Box::new(PortInfo),
        "EtherEncap" => Box::<EtherEncap>::default(),
        "EtherRewrite" => Box::<EtherRewrite>::default(),
        "EtherMirror" => Box::<EtherMirror>::default(),
        "HostEtherFilter" => Box::<HostEtherFilter>::default(),
        "EnsureEther" => Box::<EnsureEther>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use testkit::{hex, of, read, run};

    #[test]
    fn ether_encap_prepends_dst_src_type() {
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 2, STOP true) -> e :: EtherEncap(0x0806, 1:2:3:4:5:6, a:b:c:d:e:f) -> Capture(out)",
            hex(&[0xaa, 0xbb])
        ));
        let frame = [0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 1, 2, 3, 4, 5, 6, 0x08, 0x06, 0xaa, 0xbb];
        assert_eq!(of(&seen, "out"), vec![frame.to_vec(), frame.to_vec()]);
        assert_eq!(read(&r, "e", "ethertype"), "2054");
        assert_eq!(read(&r, "e", "src"), "01-02-03-04-05-06");
        assert_eq!(read(&r, "e", "dst"), "0A-0B-0C-0D-0E-0F");
    }

    #[test]
    fn ether_rewrite_and_mirror_edit_addresses_only() {
        let frame: Vec<u8> = (0..20).collect();
        let (_, seen) = run(&format!(
            "s :: InfiniteSource({}, LIMIT 1, STOP true) -> EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2) -> Capture(rw);
             InfiniteSource({}, LIMIT 1) -> EtherMirror -> Capture(m);
             InfiniteSource({}, LIMIT 1) -> m2 :: EtherMirror -> Capture(short)",
            hex(&frame),
            hex(&frame),
            hex(&[1, 2, 3])
        ));
        let mut rw = vec![2; 6];
        rw.extend([1; 6]);
        rw.extend(12..20);
        assert_eq!(of(&seen, "rw"), vec![rw]);
        let mut m: Vec<u8> = (6..12).collect();
        m.extend(0..6);
        m.extend(12..20);
        assert_eq!(of(&seen, "m"), vec![m]);
        assert!(of(&seen, "short").is_empty(), "a 3-byte frame has no addresses to swap");
    }

    #[test]
    fn host_ether_filter_sets_packet_types_and_filters() {
        let me = [2, 0, 0, 0, 0, 1];
        let frame = |dst: [u8; 6], src: [u8; 6]| {
            let mut f = dst.to_vec();
            f.extend(src);
            f.extend([0x08, 0x00]);
            hex(&f)
        };
        let other = [2, 0, 0, 0, 0, 9];
        let config = format!(
            "InfiniteSource({}, LIMIT 1) -> f :: HostEtherFilter(2:0:0:0:0:1, DROP_OWN true) -> Capture(in);
             InfiniteSource({}, LIMIT 1) -> f;
             InfiniteSource({}, LIMIT 1) -> f;
             InfiniteSource({}, LIMIT 1) -> f;
             InfiniteSource({}, LIMIT 1, STOP true) -> f;
             f[1] -> Capture(out)",
            frame(me, other),
            frame(BROADCAST, other),
            frame([0x01, 0, 0x5e, 0, 0, 1], other),
            frame(other, me),
            frame(other, [2, 0, 0, 0, 0, 7]),
        );
        let (_, seen) = run(&config);
        let types: Vec<(String, u8)> = seen.iter().map(|s| (s.label.clone(), s.packet_type)).collect();
        use packet_type as pt;
        assert_eq!(
            types,
            [
                ("in".to_string(), pt::HOST),
                ("in".to_string(), pt::BROADCAST),
                ("in".to_string(), pt::MULTICAST),
                // Our own frame (DROP_OWN), then one for another host.
                ("out".to_string(), 0),
                ("out".to_string(), pt::OTHERHOST),
            ]
        );
        // One output: the filtered frames are dropped and counted.
        let (r, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 3, STOP true) -> f :: HostEtherFilter(2:0:0:0:0:1) -> Capture(in)",
            frame(other, other)
        ));
        assert!(seen.is_empty());
        assert_eq!(read(&r, "f", "drops"), "3");
    }

    #[test]
    fn ensure_ether_keeps_restores_or_adds_a_header() {
        let mut ip = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        let mut framed = vec![9; 12];
        framed.extend([0x08, 0x00]);
        framed.append(&mut ip.clone());
        let (_, seen) = run(&format!(
            "InfiniteSource({}, LIMIT 1) -> MarkIP(14) -> EnsureEther(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> Capture(kept);
             InfiniteSource({}, LIMIT 1) -> MarkIP(14) -> Strip(14) -> EnsureEther(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> Capture(back);
             InfiniteSource({}, LIMIT 1, STOP true) -> MarkIP(0) -> EnsureEther(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> Capture(new)",
            hex(&framed),
            hex(&framed),
            hex(&ip)
        ));
        assert_eq!(of(&seen, "kept"), vec![framed.clone()]);
        assert_eq!(of(&seen, "back"), vec![framed]);
        let mut new = vec![2; 6];
        new.extend([1; 6]);
        new.extend([0x08, 0x00]);
        new.append(&mut ip);
        assert_eq!(of(&seen, "new"), vec![new]);
    }

    #[test]
    fn addresses_print_as_clicks() {
        assert_eq!(ether_text(&[0, 1, 0xa, 0xb, 0xc, 0xff]), "00-01-0A-0B-0C-FF");
        assert_eq!(ip_text(&[10, 0, 0, 1]), "10.0.0.1");
        assert_eq!(prefix_text([1, 0, 0, 0], [255, 255, 255, 0]), "1.0.0.0/24");
        assert_eq!(prefix_text([1, 0, 0, 0], [255, 0, 255, 0]), "1.0.0.0/255.0.255.0");
        assert_eq!(timestamp_text(81_000_000), "0.081000");
        assert_eq!(timestamp_text(0), "0.000000");
        assert_eq!(timestamp_text(12_345_678_901), "12.345678");
    }

    #[test]
    fn addressinfo_defines_address_prefix_and_ether_as_click() {
        args::clear_addresses();
        let mut e = AddressInfo;
        let mut a = Args::new(
            "a 1.0.0.2/24 00:01:02:03:04:05, net 10.0.0.0/8, h 10.1.1.1 10.1.1.2, b 00:01:02:03:04:06, \
             c 192.168.1.7 192.168.1.0/24",
        );
        e.configure(&mut a).unwrap();
        a.complete().unwrap();
        assert_eq!(args::ip_address("a").unwrap(), [1, 0, 0, 2]);
        assert_eq!(args::ip_prefix("a").unwrap(), ([1, 0, 0, 2], [255, 255, 255, 0]));
        assert_eq!(args::ip_prefix("a:ip").unwrap(), ([1, 0, 0, 2], [255; 4]));
        assert_eq!(args::ip_prefix("a:ipnet").unwrap(), ([1, 0, 0, 2], [255, 255, 255, 0]));
        assert_eq!(args::ip_address("a:bcast").unwrap(), [1, 0, 0, 255]);
        assert_eq!(args::ether_address("a").unwrap(), [0, 1, 2, 3, 4, 5]);
        // A prefix without host bits defines no address.
        assert!(args::ip_address("net").is_err());
        assert_eq!(args::ip_prefix("net").unwrap(), ([10, 0, 0, 0], [255, 0, 0, 0]));
        // Several addresses of one kind: the last (each is unambiguous).
        assert_eq!(args::ip_address("h").unwrap(), [10, 1, 1, 2]);
        assert!(args::ip_address("b").is_err());
        // An address and its network given apart make one entry.
        assert_eq!(args::ip_address("c").unwrap(), [192, 168, 1, 7]);
        assert_eq!(args::ip_address("c:bcast").unwrap(), [192, 168, 1, 255]);
        assert!(AddressInfo.configure(&mut Args::new("x nonsense")).is_err());
        args::clear_addresses();
    }

    #[test]
    fn portinfo_reads_services_lines() {
        args::clear_addresses();
        let mut a = Args::new("myssh 2222, mydomain 5353/udp mydns # myname server, , mywww 8080/tcp myhttp");
        PortInfo.configure(&mut a).unwrap();
        assert_eq!(args::ip_port("myssh", 6).unwrap(), 2222);
        assert_eq!(args::ip_port("myssh", 17).unwrap(), 2222);
        assert_eq!(args::ip_port("mydns", 17).unwrap(), 5353);
        assert!(args::ip_port("mydns", 6).is_err());
        assert_eq!(args::ip_port("myhttp", 6).unwrap(), 8080);
        assert!(args::ip_port("myname", 17).is_err(), "after # is a comment");
        args::clear_addresses();
    }
}

/// Test helpers for this family: a router with two test classes beside
/// the library, `Capture(LABEL)` (keeps every packet it gets, with its
/// destination IP and packet type annotations, in [`testkit::take`]) and
/// `MarkIP(OFFSET)` (marks the IPv4 header at OFFSET, as Click's
/// MarkIPHeader, and sets the destination IP annotation from it).
#[cfg(test)]
pub(crate) mod testkit {
    use super::*;
    use crate::router::{Registry, Router};
    use std::cell::RefCell;

    /// One captured packet.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Seen {
        pub label: String,
        pub data: Vec<u8>,
        pub dst_ip: [u8; 4],
        pub packet_type: u8,
        pub timestamp_ns: i64,
    }

    thread_local! {
        static SEEN: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
    }

    /// Every packet captured since the last call, in arrival order.
    pub fn take() -> Vec<Seen> {
        SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }

    /// The data of the packets `label` captured.
    pub fn of(seen: &[Seen], label: &str) -> Vec<Vec<u8>> {
        seen.iter()
            .filter(|s| s.label == label)
            .map(|s| s.data.clone())
            .collect()
    }

    #[derive(Default)]
    struct Capture(String);

    impl Element for Capture {
        fn class_name(&self) -> &'static str {
            "Capture"
        }
        fn port_count(&self) -> &'static str {
            PORTS_1_0
        }
        fn configure(&mut self, a: &mut Args) -> Result<(), String> {
            self.0 = a.positional_or("LABEL").unwrap_or_default();
            Ok(())
        }
        fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
            let batch = std::mem::take(batch);
            SEEN.with(|s| {
                for p in batch.iter() {
                    s.borrow_mut().push(Seen {
                        label: self.0.clone(),
                        data: p.to_vec(),
                        dst_ip: p.anno().dst_ip(),
                        packet_type: p.anno().packet_type,
                        timestamp_ns: p.anno().timestamp_ns,
                    });
                }
            });
        }
    }

    #[derive(Default)]
    struct MarkIP(usize);

    impl Element for MarkIP {
        fn class_name(&self) -> &'static str {
            "MarkIP"
        }
        fn configure(&mut self, a: &mut Args) -> Result<(), String> {
            if let Some(v) = a.positional_or("OFFSET") {
                self.0 = args::unsigned(&v)? as usize;
            }
            Ok(())
        }
        fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
            for p in batch.iter_mut() {
                let off = self.0.min(p.len());
                let Some(h) = p.get(off..off + 20) else {
                    // Too short for an IP header: marked with no length.
                    p.set_network_header(off, 0).unwrap();
                    continue;
                };
                let hl = usize::from(h[0] & 0xf) * 4;
                let dst = [h[16], h[17], h[18], h[19]];
                let hl = hl.min(p.len() - off);
                p.set_network_header(off, hl).unwrap();
                p.anno_mut().set_dst_ip(dst);
            }
            Some(batch)
        }
    }

    struct Reg;

    impl Registry for Reg {
        fn create(&self, class: &str) -> Option<Box<dyn Element>> {
            match class {
                "Capture" => Some(Box::<Capture>::default()),
                "MarkIP" => Some(Box::<MarkIP>::default()),
                _ => crate::elements::Standard.create(class),
            }
        }
    }

    /// Builds `config`, runs it in simulated time until it stops, and
    /// returns it with what was captured.
    pub fn run(config: &str) -> (Router, Vec<Seen>) {
        take();
        let flat = crate::lang::compile("t.click", config, &[], &|c: &str| Reg.is_class(c))
            .unwrap_or_else(|e| panic!("{config}\n{e}"));
        let mut router = Router::build(&flat, &Reg).unwrap_or_else(|e| panic!("{config}\n{e}"));
        router.use_simulated_time();
        router.run(&|| false);
        (router, take())
    }

    /// A read handler of element `name`.
    pub fn read(router: &Router, name: &str, handler: &str) -> String {
        router.read_handler(router.find(name).expect(name), handler).unwrap()
    }

    /// `data` as Click's `\<hex>` for InfiniteSource's DATA.
    pub fn hex(data: &[u8]) -> String {
        let h: String = data.iter().map(|b| format!("{b:02x}")).collect();
        format!("\"\\<{h}>\"")
    }
}
