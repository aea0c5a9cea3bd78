//! NDResolver: IPv6 next hops to Ethernet addresses with Neighbor
//! Discovery (RFC 4861 §7), and duplicate address detection of our own
//! addresses (RFC 4862 §5.4).

use super::addresses::{AddressState, DadStep, OwnAddresses};
use super::cache::{NeighborCache, Outcome, Released, Settings, Solicit};
use super::support::{self, TimerSlot};
use crate::anno;
use crate::wire::ethernet::HEADER_LEN as ETHERNET_LEN;
use crate::wire::icmpv6::msg_type;
use crate::wire::ipv6::HEADER_LEN as IPV6_LEN;
use crate::wire::{
    Checksum, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpProtocol,
    Ipv6Packet, Ipv6Repr, NdiscOptions, NdiscRepr,
};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use oxnet_graph::timer::TimerId;
use std::net::Ipv6Addr;

/// DupAddrDetectTransmits' default (RFC 4862 §5.1).
pub const DUP_ADDR_DETECT_TRANSMITS: u32 = 1;
/// The hop limit of every Neighbor Discovery message, sent and required
/// on receipt (RFC 4861 §7.1.1, §7.1.2, §7.2.2): 255 proves the sender is
/// on the link.
pub const ND_HOP_LIMIT: u8 = 255;
/// The all-nodes multicast address (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// What the element counted, besides the cache's [`super::cache::Stats`].
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    /// Neighbor Solicitations sent for resolution and probes.
    solicitations: u64,
    /// DAD solicitations sent.
    dad_solicitations: u64,
    /// Neighbor Advertisements sent (answers and unsolicited).
    advertisements: u64,
    /// Packets on input 0 without a next hop (::).
    no_next_hop: u64,
    /// Packets on input 0 without 14 bytes of head room.
    no_headroom: u64,
    /// Packets on input 0 that are not IPv6.
    bad_packets: u64,
    /// Packets on input 0 from a tentative address of ours.
    tentative_drops: u64,
    /// Packets on input 0 from a duplicate address of ours.
    duplicate_drops: u64,
    /// Frames on input 1 that are not Ethernet + IPv6 + ICMPv6 Neighbor
    /// Discovery.
    bad_frames: u64,
    /// Neighbor Discovery messages failing RFC 4861 §7.1's checks (hop
    /// limit 255, checksum, code 0, length, target, options, source and
    /// destination rules).
    invalid: u64,
    /// Router Solicitations and Advertisements, Redirects: ignored.
    router_messages: u64,
    /// Solicitations for an address that is not ours (or a duplicate).
    not_for_us: u64,
    /// Advertisements of a preferred address of ours by another node, and
    /// solicitations from one of our addresses.
    conflicts: u64,
    /// Our own frames heard back.
    own_frames: u64,
    /// Solicitations not sent: no preferred address to send them from.
    no_source: u64,
    /// Frames not sent: the pool was empty.
    alloc_failures: u64,
}

/// NDResolver(IP6 [IP6...], MAC, keywords): puts IPv6 packets in Ethernet
/// frames for their next hop, resolving it with Neighbor Discovery (RFC
/// 4861 §7), and checks that our addresses are unique (RFC 4862 §5.4).
///
/// Input 0: IPv6 packets without an Ethernet header, with the next-hop
/// annotation set ([`crate::anno::next_hop_v6`]). As ARPResolver's input
/// 0: sent at once to a known neighbour (a STALE entry goes to DELAY, RFC
/// 4861 §7.3.3), else queued while Neighbor Solicitations go to the
/// target's solicited-node address (RFC 4291 §2.7.1; Ethernet 33:33 and
/// its last four bytes, RFC 2464 §7), every RETRANS_TIMER, MCAST_SOLICIT
/// times; then the packets are dropped and counted (no ICMPv6 address
/// unreachable, RFC 4861 §7.2.2: the IPv6 layer is another element).
/// Multicast next hops go to their group's Ethernet address; :: is
/// dropped and counted. A packet whose source is one of our addresses
/// still tentative, or found duplicate, is dropped and counted (RFC 4862
/// §5.4: such an address is not used).
///
/// Input 1: ICMPv6 Neighbor Discovery messages as whole frames (Ethernet,
/// IPv6, ICMPv6) from the IP layer, which keeps MLD (and everything else)
/// away. Checked as RFC 4861 §7.1 asks (hop limit 255, code 0, checksum,
/// length, target not multicast, options; an NS from :: to a
/// solicited-node address without a source link-layer option; an NA to a
/// multicast address not solicited); others are ignored and counted.
/// * A Neighbor Solicitation for one of our preferred addresses is
///   answered with a Neighbor Advertisement (§7.2.4: solicited and
///   override set, router clear, our MAC as target link-layer address;
///   to the all-nodes address, not solicited, if the solicitation came
///   from ::), sent to the source link-layer address, or to the frame's
///   Ethernet source when the solicitation has none (a unicast probe).
///   Its sender's address makes or updates a STALE entry (§7.2.3).
/// * A Neighbor Advertisement updates the cache (§7.2.5); its Router flag
///   is not kept (there is no default router list).
/// * A solicitation from :: (another node's DAD, RFC 4862 §5.4.3) or an
///   advertisement (§5.4.4) for a tentative address of ours marks it
///   duplicate: it is never used, a message says so once, and the
///   `duplicates` handler lists it. A solicitation for a tentative
///   address from a unicast source is ignored (§5.4.3). An advertisement
///   of a preferred address of ours is counted as a conflict.
/// * Router Solicitations and Advertisements and Redirects are ignored
///   and counted: this is a host with a static configuration (no default
///   router list, no prefixes, no redirects are learned).
///
/// Output 0: Ethernet frames to the device.
///
/// At start, DAD for each address (RFC 4862 §5.4.2): DAD_TRANSMITS
/// solicitations from :: to its solicited-node address, RETRANS_TIMER
/// apart; RETRANS_TIMER after the last without a conflict, the address is
/// preferred and one unsolicited Neighbor Advertisement (RFC 4861 §7.2.6:
/// to all-nodes, override set) announces it. No MLD report for the
/// solicited-node groups is sent (RFC 4862 §5.4.2 asks for one: switches
/// that snoop MLD may then not forward them to us).
///
/// Arguments: the addresses (IPv6, unicast) and MAC, in any order among
/// the positional arguments. Keywords: those of ARPResolver's cache
/// (ENTRIES, QUEUE, MCAST_SOLICIT, UCAST_SOLICIT, REACHABLE_TIME,
/// RETRANS_TIMER, DELAY_FIRST_PROBE, SEED) and DAD_TRANSMITS (default 1;
/// 0: no DAD).
///
/// Handlers (read): `table` (one `IP6 MAC STATE` line per neighbour),
/// `addresses` (one `IP6 STATE` line per address of ours: TENTATIVE,
/// PREFERRED, DUPLICATE), `duplicates` (the duplicate ones, one a line),
/// `count`, `waiting`, `solicitations`, `dad_solicitations`,
/// `advertisements`, `conflicts`, `router_messages`, `not_for_us`,
/// `evictions`, `resolution_failures`, `probe_failures`, `no_source`, and
/// the drops: `queue_drops`, `unresolved_drops`, `full_drops`,
/// `no_next_hop`, `no_headroom`, `bad_packets`, `tentative_drops`,
/// `duplicate_drops`, `bad_frames`, `invalid`, `alloc_failures`, and
/// `drops` (their sum). Write: `insert` (`IP6 MAC`), `delete` (`IP6`).
pub struct NDResolver {
    own: OwnAddresses,
    mac: EthernetAddress,
    cache: NeighborCache<Ipv6Addr>,
    timer: TimerSlot,
    counters: Counters,
}

impl Default for NDResolver {
    fn default() -> Self {
        NDResolver {
            own: OwnAddresses::default(),
            mac: EthernetAddress::default(),
            cache: NeighborCache::new(Settings::default()),
            timer: TimerSlot::default(),
            counters: Counters::default(),
        }
    }
}

/// The fields of an IPv6 frame carrying a Neighbor Discovery message.
struct Received {
    eth_src: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    message: NdiscRepr,
}

/// Why a frame on input 1 was not handled.
enum Rejected {
    /// Not Ethernet, IPv6 and ICMPv6 Neighbor Discovery.
    NotNd,
    /// Neighbor Discovery failing a check of RFC 4861 §7.1 that
    /// [`Icmpv6Repr::parse`] makes (checksum, code 0, length, target not
    /// multicast, options).
    Invalid,
}

/// The Neighbor Discovery message of a frame (checksum verified, and the
/// checks of [`NdiscRepr::parse`]).
fn parse_nd(frame: &[u8]) -> Result<Received, Rejected> {
    let frame = EthernetFrame::new_checked(frame).map_err(|_| Rejected::NotNd)?;
    if frame.ethertype() != EtherType::Ipv6 {
        return Err(Rejected::NotNd);
    }
    let bytes = frame.payload();
    let ip = Ipv6Packet::new_checked(bytes).map_err(|_| Rejected::NotNd)?;
    let (protocol, at) = ip.upper_layer().map_err(|_| Rejected::NotNd)?;
    if protocol != IpProtocol::Icmpv6 {
        return Err(Rejected::NotNd);
    }
    let end = IPV6_LEN + ip.payload_len() as usize;
    let icmp = bytes.get(at..end).ok_or(Rejected::NotNd)?;
    let icmp = Icmpv6Packet::new_checked(icmp).map_err(|_| Rejected::NotNd)?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let is_nd = (msg_type::ROUTER_SOLICIT..=msg_type::REDIRECT).contains(&icmp.msg_type());
    match Icmpv6Repr::parse(&icmp, &src, &dst, Checksum::Verify) {
        Ok(Icmpv6Repr::Ndisc(message)) => Ok(Received {
            eth_src: frame.src_addr(),
            src,
            dst,
            hop_limit: ip.hop_limit(),
            message,
        }),
        Err(_) if is_nd => Err(Rejected::Invalid),
        _ => Err(Rejected::NotNd),
    }
}

impl NDResolver {
    fn encapsulate(&mut self, mut p: Packet, dst: EthernetAddress, out: &mut PacketBatch) {
        let Ok(header) = p.prepend(ETHERNET_LEN) else {
            self.counters.no_headroom += 1;
            return;
        };
        EthernetRepr {
            src: self.mac,
            dst,
            ethertype: EtherType::Ipv6,
        }
        .emit(&mut EthernetFrame::new_unchecked(header));
        out.push(p);
    }

    fn send_released(&mut self, released: Option<Released<Packet>>, out: &mut PacketBatch) {
        if let Some(r) = released {
            for p in r.packets {
                self.encapsulate(p, r.lladdr, out);
            }
        }
    }

    /// A Neighbor Discovery message from us: Ethernet to `eth_dst`, IPv6
    /// from `src` to `dst` with hop limit 255, then `message`.
    fn nd_frame(
        &mut self,
        ctx: &Ctx<'_>,
        eth_dst: EthernetAddress,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        message: NdiscRepr,
    ) -> Option<Packet> {
        let icmp = Icmpv6Repr::Ndisc(message);
        let icmp_len = icmp.buffer_len();
        let ip = Ipv6Repr {
            src,
            dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: icmp_len,
            hop_limit: ND_HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
        };
        let Some(mut p) = support::new_frame(ctx, ETHERNET_LEN + IPV6_LEN + icmp_len) else {
            self.counters.alloc_failures += 1;
            return None;
        };
        EthernetRepr {
            src: self.mac,
            dst: eth_dst,
            ethertype: EtherType::Ipv6,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut p[..]));
        ip.emit(&mut Ipv6Packet::new_unchecked(&mut p[ETHERNET_LEN..]));
        icmp.emit(
            &mut Icmpv6Packet::new_unchecked(&mut p[ETHERNET_LEN + IPV6_LEN..]),
            &src,
            &dst,
        );
        let _ = p.set_network_header(ETHERNET_LEN, IPV6_LEN);
        Some(p)
    }

    /// A Neighbor Solicitation for `s.addr` (RFC 4861 §7.2.2): multicast
    /// to its solicited-node address, or a unicast probe (§7.3.3), with
    /// our MAC as source link-layer address.
    fn solicit(&mut self, ctx: &Ctx<'_>, s: Solicit<Ipv6Addr>, hint: Option<Ipv6Addr>, out: &mut PacketBatch) {
        let Some(src) = self.own.source_for(s.addr, hint) else {
            self.counters.no_source += 1;
            return;
        };
        let (dst, eth_dst) = match s.unicast {
            Some(mac) => (s.addr, mac),
            None => {
                let group = support::solicited_node(s.addr);
                (group, support::ipv6_multicast_mac(group))
            }
        };
        let message = NdiscRepr::NeighborSolicit {
            target: s.addr,
            options: NdiscOptions {
                source_lladdr: Some(self.mac),
                ..NdiscOptions::default()
            },
        };
        if let Some(p) = self.nd_frame(ctx, eth_dst, src, dst, message) {
            self.counters.solicitations += 1;
            out.push(p);
        }
    }

    /// A DAD solicitation (RFC 4862 §5.4.2): from ::, to the tentative
    /// address's solicited-node group, no source link-layer option
    /// (RFC 4861 §4.3: not with the unspecified source).
    fn dad_solicit(&mut self, ctx: &Ctx<'_>, target: Ipv6Addr, out: &mut PacketBatch) {
        let group = support::solicited_node(target);
        let message = NdiscRepr::NeighborSolicit {
            target,
            options: NdiscOptions::default(),
        };
        let mac = support::ipv6_multicast_mac(group);
        if let Some(p) = self.nd_frame(ctx, mac, Ipv6Addr::UNSPECIFIED, group, message) {
            self.counters.dad_solicitations += 1;
            out.push(p);
        }
    }

    /// A Neighbor Advertisement of our `target` (RFC 4861 §7.2.4,
    /// §7.2.6): from it, override set, router clear, our MAC as target
    /// link-layer address.
    fn advertise(
        &mut self,
        ctx: &Ctx<'_>,
        target: Ipv6Addr,
        dst: Ipv6Addr,
        eth_dst: EthernetAddress,
        solicited: bool,
        out: &mut PacketBatch,
    ) {
        let message = NdiscRepr::NeighborAdvert {
            router: false,
            solicited,
            override_cache: true,
            target,
            options: NdiscOptions {
                target_lladdr: Some(self.mac),
                ..NdiscOptions::default()
            },
        };
        if let Some(p) = self.nd_frame(ctx, eth_dst, target, dst, message) {
            self.counters.advertisements += 1;
            out.push(p);
        }
    }

    fn dad_steps(&mut self, ctx: &Ctx<'_>, steps: Vec<DadStep>, out: &mut PacketBatch) {
        for step in steps {
            match step {
                DadStep::Solicit(addr) => self.dad_solicit(ctx, addr, out),
                DadStep::Preferred(addr) => {
                    self.advertise(ctx, addr, ALL_NODES, support::ipv6_multicast_mac(ALL_NODES), false, out)
                }
            }
        }
    }

    /// RFC 4862 §5.4.5: the address is not used, and the operator is told.
    fn mark_duplicate(&mut self, ctx: &Ctx<'_>, addr: Ipv6Addr) {
        if self.own.mark_duplicate(addr) {
            eprintln!(
                "{}: {addr} is used by another node (duplicate address detection, RFC 4862 §5.4.5): not used",
                ctx.name()
            );
        }
    }

    fn handle_ip(&mut self, p: Packet, now: u64, ctx: &Ctx<'_>, out: &mut PacketBatch) {
        // The fixed header only: a chained packet (a zero-copy TCP
        // segment, its payload attached) carries the rest of its payload
        // length in later segments (RFC 8200 §3).
        if p.len() < 40 || p[0] >> 4 != 6 {
            self.counters.bad_packets += 1;
            return;
        }
        let ip = Ipv6Packet::new_unchecked(&p[..]);
        let src = ip.src_addr();
        match self.own.state(src) {
            Some(AddressState::Tentative { .. }) => {
                self.counters.tentative_drops += 1;
                return;
            }
            Some(AddressState::Duplicate) => {
                self.counters.duplicate_drops += 1;
                return;
            }
            _ => {}
        }
        let hop = anno::next_hop_v6(&p);
        if hop.is_unspecified() {
            self.counters.no_next_hop += 1;
        } else if hop.is_multicast() {
            self.encapsulate(p, support::ipv6_multicast_mac(hop), out);
        } else {
            match self.cache.send(hop, p, now) {
                Outcome::Send(mac, p) => self.encapsulate(p, mac, out),
                Outcome::Queued { solicit: true } => {
                    let s = Solicit {
                        addr: hop,
                        unicast: None,
                    };
                    self.solicit(ctx, s, Some(src), out);
                }
                Outcome::Queued { solicit: false } | Outcome::Refused(_) => {}
            }
        }
    }

    /// A frame on input 1.
    fn handle_nd(&mut self, frame: &[u8], now: u64, ctx: &Ctx<'_>, out: &mut PacketBatch) {
        let nd = match parse_nd(frame) {
            Ok(nd) => nd,
            Err(Rejected::NotNd) => {
                self.counters.bad_frames += 1;
                return;
            }
            Err(Rejected::Invalid) => {
                self.counters.invalid += 1;
                return;
            }
        };
        if nd.hop_limit != ND_HOP_LIMIT {
            self.counters.invalid += 1;
            return;
        }
        if nd.eth_src == self.mac {
            self.counters.own_frames += 1;
            return;
        }
        // A source is never multicast (RFC 4291 §2.7); no entry is made
        // for one.
        if nd.src.is_multicast() {
            self.counters.invalid += 1;
            return;
        }
        match nd.message {
            NdiscRepr::NeighborSolicit { target, options } => self.solicited(&nd, target, &options, now, ctx, out),
            NdiscRepr::NeighborAdvert {
                solicited,
                override_cache,
                target,
                options,
                ..
            } => {
                // §7.1.2: an advertisement to a multicast address is never
                // solicited.
                if nd.dst.is_multicast() && solicited {
                    self.counters.invalid += 1;
                    return;
                }
                match self.own.state(target) {
                    // RFC 4862 §5.4.4.
                    Some(AddressState::Tentative { .. }) => self.mark_duplicate(ctx, target),
                    Some(_) => self.counters.conflicts += 1,
                    None => {
                        let released =
                            self.cache
                                .advertised(target, options.target_lladdr, solicited, override_cache, now);
                        self.send_released(released, out);
                    }
                }
            }
            NdiscRepr::RouterSolicit { .. } | NdiscRepr::RouterAdvert { .. } | NdiscRepr::Redirect { .. } => {
                self.counters.router_messages += 1
            }
        }
    }

    /// A Neighbor Solicitation (RFC 4861 §7.1.1, §7.2.3, §7.2.4; RFC 4862
    /// §5.4.3).
    fn solicited(
        &mut self,
        nd: &Received,
        target: Ipv6Addr,
        options: &NdiscOptions,
        now: u64,
        ctx: &Ctx<'_>,
        out: &mut PacketBatch,
    ) {
        let from_dad = nd.src.is_unspecified();
        // §7.1.1: from ::, only to a solicited-node address and without a
        // source link-layer option.
        if from_dad && (!support::is_solicited_node(nd.dst) || options.source_lladdr.is_some()) {
            self.counters.invalid += 1;
            return;
        }
        // Another node soliciting from one of our addresses: counted, and
        // nothing learned from it. (An advertisement from our tentative
        // address is how a node defends it, RFC 4862 §5.4.4.)
        if self.own.state(nd.src).is_some() {
            self.counters.conflicts += 1;
            return;
        }
        match self.own.state(target) {
            None | Some(AddressState::Duplicate) => self.counters.not_for_us += 1,
            Some(AddressState::Tentative { .. }) => {
                // RFC 4862 §5.4.3: another node's DAD for the same address
                // makes it a duplicate; address resolution (a unicast
                // source) of a tentative address is ignored.
                if from_dad {
                    self.mark_duplicate(ctx, target);
                }
            }
            // §7.2.4: to the all-nodes address, not solicited, when the
            // solicitation came from ::.
            Some(AddressState::Preferred) if from_dad => {
                let all_nodes_mac = support::ipv6_multicast_mac(ALL_NODES);
                self.advertise(ctx, target, ALL_NODES, all_nodes_mac, false, out);
            }
            Some(AddressState::Preferred) => {
                // §7.2.3: the sender's address makes or updates an entry.
                let released = options
                    .source_lladdr
                    .and_then(|lladdr| self.cache.learned(nd.src, lladdr, true, now));
                let eth_dst = options.source_lladdr.unwrap_or(nd.eth_src);
                self.advertise(ctx, target, nd.src, eth_dst, true, out);
                self.send_released(released, out);
            }
        }
    }

    fn rearm(&mut self, ctx: &mut Ctx<'_>) {
        let next = match (self.cache.next_deadline(), self.own.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.timer.arm(next, ctx);
    }

    fn drops(&self) -> u64 {
        let s = self.cache.stats();
        let c = &self.counters;
        s.queue_drops
            + s.unresolved_drops
            + s.full_drops
            + c.no_next_hop
            + c.no_headroom
            + c.bad_packets
            + c.tentative_drops
            + c.duplicate_drops
            + c.bad_frames
            + c.invalid
    }

    fn list(&self, only_duplicates: bool) -> String {
        let mut out = String::new();
        for (addr, state) in self.own.iter() {
            if !only_duplicates {
                out += &format!("{addr} {state}\n");
            } else if state == AddressState::Duplicate {
                out += &format!("{addr}\n");
            }
        }
        out
    }

    fn parse_address(text: &str) -> Result<Ipv6Addr, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("'{}' is not an IPv6 address", text.trim()))
    }
}

impl Element for NDResolver {
    fn class_name(&self) -> &'static str {
        "NDResolver"
    }

    fn port_count(&self) -> &'static str {
        "2/1"
    }

    fn processing(&self) -> &'static str {
        PUSH
    }

    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let mut addrs = Vec::new();
        let mut mac = None;
        for arg in a.rest_positional() {
            for word in arg.split_whitespace() {
                if let Ok(addr) = word.parse::<Ipv6Addr>() {
                    if addr.is_unspecified() || addr.is_multicast() {
                        return Err(format!("{addr} is not a unicast address"));
                    }
                    if addrs.contains(&addr) {
                        return Err(format!("{addr} is given twice"));
                    }
                    addrs.push(addr);
                } else if let Ok(m) = args::ether_address(word) {
                    if mac.replace(EthernetAddress(m)).is_some() {
                        return Err("more than one MAC".into());
                    }
                } else {
                    return Err(format!("'{word}': expected an IPv6 address or a MAC"));
                }
            }
        }
        let mac = mac.ok_or("missing MAC")?;
        if addrs.is_empty() {
            return Err("missing IP6".into());
        }
        if !mac.is_unicast() {
            return Err(format!("MAC: {mac} is not a unicast address"));
        }
        let seed = support::seed_of(&[&addrs[0].octets()[..], &mac.0[..]].concat());
        let settings = support::read_settings(a, seed)?;
        let transmits = support::read_count(a, "DAD_TRANSMITS")?.unwrap_or(DUP_ADDR_DETECT_TRANSMITS);
        self.mac = mac;
        self.own = OwnAddresses::new(&addrs, transmits, settings.retrans_timer_us);
        self.cache = NeighborCache::new(settings);
        Ok(())
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let mut steps = Vec::new();
        self.own.start(ctx.now_us(), &mut steps);
        let mut out = PacketBatch::with_capacity(steps.len());
        self.dad_steps(ctx, steps, &mut out);
        ctx.push(0, out);
        self.rearm(ctx);
    }

    fn push(&mut self, port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        let now = ctx.now_us();
        let mut out = PacketBatch::with_capacity(batch.len());
        let n = batch.len();
        batch.consume_front(n, |p| {
            if port == 0 {
                self.handle_ip(p, now, ctx, &mut out);
            } else {
                self.handle_nd(&p, now, ctx, &mut out);
            }
        });
        ctx.push(0, out);
        self.rearm(ctx);
    }

    fn run_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        self.timer.fired(id);
        let now = ctx.now_us();
        let mut solicits = Vec::new();
        self.cache.poll(now, &mut solicits);
        let mut steps = Vec::new();
        self.own.poll(now, &mut steps);
        let mut out = PacketBatch::with_capacity(solicits.len() + steps.len());
        for s in solicits {
            self.solicit(ctx, s, None, &mut out);
        }
        self.dad_steps(ctx, steps, &mut out);
        ctx.push(0, out);
        self.rearm(ctx);
    }

    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("table", true, false),
            ("addresses", true, false),
            ("duplicates", true, false),
            ("count", true, false),
            ("waiting", true, false),
            ("solicitations", true, false),
            ("dad_solicitations", true, false),
            ("advertisements", true, false),
            ("conflicts", true, false),
            ("router_messages", true, false),
            ("not_for_us", true, false),
            ("evictions", true, false),
            ("resolution_failures", true, false),
            ("probe_failures", true, false),
            ("no_source", true, false),
            ("queue_drops", true, false),
            ("unresolved_drops", true, false),
            ("full_drops", true, false),
            ("no_next_hop", true, false),
            ("no_headroom", true, false),
            ("bad_packets", true, false),
            ("tentative_drops", true, false),
            ("duplicate_drops", true, false),
            ("bad_frames", true, false),
            ("invalid", true, false),
            ("alloc_failures", true, false),
            ("drops", true, false),
            ("insert", false, true),
            ("delete", false, true),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.cache.stats();
        let c = &self.counters;
        Some(match name {
            "table" => support::table_text(&self.cache),
            "addresses" => self.list(false),
            "duplicates" => self.list(true),
            "count" => self.cache.len().to_string(),
            "waiting" => self.cache.waiting().to_string(),
            "solicitations" => c.solicitations.to_string(),
            "dad_solicitations" => c.dad_solicitations.to_string(),
            "advertisements" => c.advertisements.to_string(),
            "conflicts" => c.conflicts.to_string(),
            "router_messages" => c.router_messages.to_string(),
            "not_for_us" => c.not_for_us.to_string(),
            "evictions" => s.evictions.to_string(),
            "resolution_failures" => s.resolution_failures.to_string(),
            "probe_failures" => s.probe_failures.to_string(),
            "no_source" => c.no_source.to_string(),
            "queue_drops" => s.queue_drops.to_string(),
            "unresolved_drops" => s.unresolved_drops.to_string(),
            "full_drops" => s.full_drops.to_string(),
            "no_next_hop" => c.no_next_hop.to_string(),
            "no_headroom" => c.no_headroom.to_string(),
            "bad_packets" => c.bad_packets.to_string(),
            "tentative_drops" => c.tentative_drops.to_string(),
            "duplicate_drops" => c.duplicate_drops.to_string(),
            "bad_frames" => c.bad_frames.to_string(),
            "invalid" => c.invalid.to_string(),
            "alloc_failures" => c.alloc_failures.to_string(),
            "drops" => self.drops().to_string(),
            _ => return None,
        })
    }

    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        let now = ctx.now_us();
        let mut out = PacketBatch::with_capacity(4);
        let result = match name {
            "insert" => (|| {
                let words: Vec<&str> = value.split_whitespace().collect();
                let [ip, mac] = words[..] else {
                    return Err("expected 'IP6 MAC'".to_string());
                };
                let ip = Self::parse_address(ip)?;
                let mac = EthernetAddress(args::ether_address(mac)?);
                let released = self.cache.insert_permanent(ip, mac, now).map_err(|e| e.to_string())?;
                self.send_released(released, &mut out);
                Ok(())
            })(),
            "delete" => Self::parse_address(value).and_then(|ip| {
                self.cache
                    .remove(&ip)
                    .then_some(())
                    .ok_or_else(|| format!("no entry for {ip}"))
            }),
            _ => return None,
        };
        ctx.push(0, out);
        self.rearm(ctx);
        Some(result)
    }
}
