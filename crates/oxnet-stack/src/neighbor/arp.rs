//! ARPResolver: IPv4 next hops to Ethernet addresses with ARP (RFC 826),
//! over the neighbour cache and its RFC 4861 states ([`super::cache`]).

use super::cache::{NeighborCache, Outcome, Released, Settings, Solicit};
use super::support::{self, TimerSlot};
use crate::anno;
use crate::wire::arp::ETHERNET_IPV4_LEN;
use crate::wire::ethernet::HEADER_LEN as ETHERNET_LEN;
use crate::wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, PUSH};
use oxnet_graph::router::Ctx;
use oxnet_graph::timer::TimerId;
use std::net::Ipv4Addr;

/// ANNOUNCE_NUM (RFC 5227 §1.1): announcements sent.
pub const ANNOUNCE_NUM: u32 = 2;
/// ANNOUNCE_INTERVAL (RFC 5227 §1.1): 2 s between announcements.
pub const ANNOUNCE_INTERVAL_US: u64 = 2_000_000;

/// What the element counted, besides the cache's [`super::cache::Stats`].
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    requests: u64,
    replies: u64,
    announcements: u64,
    /// Packets on input 0 without a next hop (0.0.0.0).
    no_next_hop: u64,
    /// Packets on input 0 without 14 bytes of head room.
    no_headroom: u64,
    /// Frames on input 1 that are not ARP for Ethernet and IPv4, or carry
    /// a sender address no host has (multicast, broadcast).
    bad_frames: u64,
    /// Our own frames heard back.
    own_frames: u64,
    /// ARP packets from another host claiming our address (RFC 5227 §2.4).
    conflicts: u64,
    /// Frames not sent: the pool was empty.
    alloc_failures: u64,
}

/// ARPResolver(IP, MAC, keywords): puts IPv4 packets in Ethernet frames
/// for their next hop, resolving it with ARP (RFC 826).
///
/// Input 0: IPv4 packets without an Ethernet header, with the next-hop
/// annotation set ([`crate::anno::next_hop_v4`]; IPv4Output writes it).
/// If the next hop's Ethernet address is known (REACHABLE, STALE, DELAY,
/// PROBE, or written by hand; a STALE entry goes to DELAY, RFC 4861
/// §7.3.3), the packet leaves on output 0 in an Ethernet frame (type
/// 0x0800, source MAC). Else it waits in the cache (QUEUE packets per
/// neighbour, the oldest dropped beyond) and an ARP request is broadcast
/// ("who has the next hop? tell IP"), repeated every RETRANS_TIMER; after
/// MCAST_SOLICIT requests and one more RETRANS_TIMER without a reply, the
/// waiting packets are dropped and counted. No ICMP host unreachable is
/// sent (RFC 4861 §7.2.2 and RFC 1122 §2.3.2.2 would have one; the IPv4
/// layer is another element, which does not hear of it). Next hops with a
/// fixed address: 255.255.255.255 and the subnet's broadcast address (if
/// IP has a prefix) to ff:ff:ff:ff:ff:ff, 224.0.0.0/4 to its group address
/// (RFC 1112 §6.4); 0.0.0.0 (no annotation) is dropped and counted.
///
/// Input 1: Ethernet frames carrying ARP (the device delivers those for
/// MAC and broadcast). RFC 826, "Packet Reception": the sender's address
/// updates its entry if there is one (the merge; a new address makes the
/// entry STALE); if the target is IP, a request makes or updates a STALE
/// entry and is answered, and a reply makes its entry REACHABLE (as a
/// solicited Neighbor Advertisement with the override flag, RFC 4861
/// §7.2.5; a reply to us for an address we have no entry for makes a
/// STALE one, as RFC 826 adds the sender when it is the target). Packets
/// waiting for the sender leave, in order. A probe (sender 0.0.0.0, RFC
/// 5227 §2.1.1) for IP is answered and teaches nothing. A packet whose
/// sender is IP from another host is counted as a conflict (RFC 5227
/// §2.4) and printed once; the address is not defended. Our own frames
/// heard back are ignored.
///
/// Output 0: Ethernet frames to the device: IPv4 packets, ARP requests,
/// replies and announcements (42 bytes: the device pads to the minimum).
///
/// At start (and on `announce`), ANNOUNCE ARP Announcements (RFC 5227
/// §2.3: a broadcast request with IP as sender and target), ANNOUNCE_INTERVAL
/// apart. There is no probing for conflicts before (RFC 5227 §2.1): the
/// address is configured, not chosen.
///
/// Arguments: IP (an address, or address/prefix for the subnet's
/// broadcast), MAC. Keywords: ENTRIES (neighbours at most, default 1024;
/// full: the least recently updated STALE entry is evicted, else the new
/// one refused and counted), QUEUE (packets waiting per neighbour, default
/// 3), MCAST_SOLICIT (requests before giving up, default 3), UCAST_SOLICIT
/// (unicast probes of a PROBE entry, default 3), REACHABLE_TIME (default
/// 30 s, randomized 0.5 to 1.5 times), RETRANS_TIMER (default 1 s),
/// DELAY_FIRST_PROBE (default 5 s), SEED (of that randomization; default
/// from IP and MAC), ANNOUNCE (default 2, 0: none), ANNOUNCE_INTERVAL
/// (default 2 s).
///
/// Handlers (read): `table` (one `IP MAC STATE` line per neighbour, by
/// address), `count` (neighbours), `waiting` (packets waiting),
/// `requests`, `replies`, `announcements` (ARP packets sent),
/// `conflicts`, `evictions`, `resolution_failures`, `probe_failures`,
/// and the drops: `queue_drops`, `unresolved_drops`, `full_drops`,
/// `no_next_hop`, `no_headroom`, `bad_frames`, `alloc_failures`, and
/// `drops` (their sum). Write: `insert` (`IP MAC`: a PERMANENT entry;
/// packets waiting for IP leave), `delete` (`IP`), `announce`.
pub struct ARPResolver {
    ip: Ipv4Addr,
    /// The subnet's broadcast address, if IP came with a prefix.
    subnet_broadcast: Option<Ipv4Addr>,
    mac: EthernetAddress,
    cache: NeighborCache<Ipv4Addr>,
    announce_num: u32,
    announce_interval_us: u64,
    /// Announcements left to send, and when the next one goes.
    announce_left: u32,
    announce_at: Option<u64>,
    timer: TimerSlot,
    counters: Counters,
    conflict_reported: bool,
}

impl Default for ARPResolver {
    fn default() -> Self {
        ARPResolver {
            ip: Ipv4Addr::UNSPECIFIED,
            subnet_broadcast: None,
            mac: EthernetAddress::default(),
            cache: NeighborCache::new(Settings::default()),
            announce_num: ANNOUNCE_NUM,
            announce_interval_us: ANNOUNCE_INTERVAL_US,
            announce_left: 0,
            announce_at: None,
            timer: TimerSlot::default(),
            counters: Counters::default(),
            conflict_reported: false,
        }
    }
}

/// Where a next hop's frame goes.
enum LinkDestination {
    /// Resolved with ARP.
    Neighbor,
    /// A fixed address (broadcast, multicast).
    Fixed(EthernetAddress),
    /// Nowhere: no next hop.
    None,
}

impl ARPResolver {
    fn link_destination(&self, hop: Ipv4Addr) -> LinkDestination {
        if hop.is_unspecified() {
            LinkDestination::None
        } else if hop.is_broadcast() || Some(hop) == self.subnet_broadcast {
            LinkDestination::Fixed(EthernetAddress::BROADCAST)
        } else if hop.is_multicast() {
            LinkDestination::Fixed(support::ipv4_multicast_mac(hop))
        } else {
            LinkDestination::Neighbor
        }
    }

    /// Puts an IPv4 packet in an Ethernet frame to `dst`.
    fn encapsulate(&mut self, mut p: Packet, dst: EthernetAddress, out: &mut PacketBatch) {
        let Ok(header) = p.prepend(ETHERNET_LEN) else {
            self.counters.no_headroom += 1;
            return;
        };
        EthernetRepr {
            src: self.mac,
            dst,
            ethertype: EtherType::Ipv4,
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

    /// An ARP packet from us, in an Ethernet frame to `eth_dst`.
    fn arp_frame(
        &mut self,
        ctx: &Ctx<'_>,
        eth_dst: EthernetAddress,
        op: ArpOperation,
        target_hw: EthernetAddress,
        target_ip: Ipv4Addr,
    ) -> Option<Packet> {
        let Some(mut p) = support::new_frame(ctx, ETHERNET_LEN + ETHERNET_IPV4_LEN) else {
            self.counters.alloc_failures += 1;
            return None;
        };
        EthernetRepr {
            src: self.mac,
            dst: eth_dst,
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut p[..]));
        ArpRepr {
            op,
            sender_hw: self.mac,
            sender_ip: self.ip,
            target_hw,
            target_ip,
        }
        .emit(&mut ArpPacket::new_unchecked(&mut p[ETHERNET_LEN..]));
        // As Click marks ARP frames, so that printers find the header.
        let _ = p.set_network_header(ETHERNET_LEN, ETHERNET_IPV4_LEN);
        Some(p)
    }

    /// A request for `target`: broadcast, or unicast to the cached address
    /// of a PROBE entry (RFC 1122 §2.3.2.1's unicast poll). The target
    /// hardware address is zero (RFC 826 leaves it to be filled).
    fn request(&mut self, ctx: &Ctx<'_>, solicit: Solicit<Ipv4Addr>, out: &mut PacketBatch) {
        let dst = solicit.unicast.unwrap_or(EthernetAddress::BROADCAST);
        let zero = EthernetAddress::default();
        if let Some(p) = self.arp_frame(ctx, dst, ArpOperation::Request, zero, solicit.addr) {
            self.counters.requests += 1;
            out.push(p);
        }
    }

    /// An ARP Announcement (RFC 5227 §2.3): a broadcast request whose
    /// sender and target addresses are both IP, target hardware zero.
    fn announce(&mut self, ctx: &Ctx<'_>, out: &mut PacketBatch) {
        let zero = EthernetAddress::default();
        if let Some(p) = self.arp_frame(ctx, EthernetAddress::BROADCAST, ArpOperation::Request, zero, self.ip) {
            self.counters.announcements += 1;
            out.push(p);
        }
    }

    /// Starts the announcements: one now, the others ANNOUNCE_INTERVAL apart.
    fn start_announcing(&mut self, ctx: &mut Ctx<'_>, out: &mut PacketBatch) {
        self.announce_left = self.announce_num;
        self.announce_at = None;
        self.next_announcement(ctx, out);
    }

    fn next_announcement(&mut self, ctx: &mut Ctx<'_>, out: &mut PacketBatch) {
        if self.announce_left == 0 {
            self.announce_at = None;
            return;
        }
        self.announce(ctx, out);
        self.announce_left -= 1;
        self.announce_at = (self.announce_left > 0).then(|| ctx.now_us() + self.announce_interval_us);
    }

    fn handle_ip(&mut self, p: Packet, now: u64, ctx: &Ctx<'_>, out: &mut PacketBatch) {
        let hop = anno::next_hop_v4(&p);
        match self.link_destination(hop) {
            LinkDestination::None => self.counters.no_next_hop += 1,
            LinkDestination::Fixed(mac) => self.encapsulate(p, mac, out),
            LinkDestination::Neighbor => match self.cache.send(hop, p, now) {
                Outcome::Send(mac, p) => self.encapsulate(p, mac, out),
                Outcome::Queued { solicit: true } => self.request(
                    ctx,
                    Solicit {
                        addr: hop,
                        unicast: None,
                    },
                    out,
                ),
                Outcome::Queued { solicit: false } => {}
                Outcome::Refused(_) => {} // counted by the cache
            },
        }
    }

    /// An ARP frame from the wire (RFC 826, "Packet Reception").
    fn handle_arp(&mut self, frame: &[u8], now: u64, ctx: &Ctx<'_>, out: &mut PacketBatch) {
        let Some(arp) = parse_arp(frame) else {
            self.counters.bad_frames += 1;
            return;
        };
        if arp.sender_hw == self.mac {
            self.counters.own_frames += 1;
            return;
        }
        if !arp.sender_hw.is_unicast() || arp.sender_ip.is_broadcast() || arp.sender_ip.is_multicast() {
            self.counters.bad_frames += 1;
            return;
        }
        let for_us = arp.target_ip == self.ip;
        let request = arp.op == ArpOperation::Request;
        if arp.sender_ip.is_unspecified() {
            // RFC 5227 §2.1.1: a probe. The sender has no address yet:
            // answer if it asks for ours, learn nothing.
            if for_us && request {
                self.reply(ctx, &arp, out);
            }
            return;
        }
        if arp.sender_ip == self.ip {
            self.counters.conflicts += 1;
            if !std::mem::replace(&mut self.conflict_reported, true) {
                eprintln!(
                    "{}: {} is also used by {} (RFC 5227 §2.4); not defended",
                    ctx.name(),
                    self.ip,
                    arp.sender_hw
                );
            }
            return;
        }
        let known = self.cache.state(&arp.sender_ip).is_some();
        let released = match (request, for_us) {
            (false, true) if known => self
                .cache
                .advertised(arp.sender_ip, Some(arp.sender_hw), true, true, now),
            (_, true) => self.cache.learned(arp.sender_ip, arp.sender_hw, true, now),
            (_, false) => self.cache.learned(arp.sender_ip, arp.sender_hw, false, now),
        };
        if for_us && request {
            self.reply(ctx, &arp, out);
        }
        self.send_released(released, out);
    }

    /// RFC 826: swap the sender and target fields, put our addresses as
    /// the sender's, set the opcode to reply, and send it to the requester.
    fn reply(&mut self, ctx: &Ctx<'_>, request: &ArpRepr, out: &mut PacketBatch) {
        if let Some(p) = self.arp_frame(
            ctx,
            request.sender_hw,
            ArpOperation::Reply,
            request.sender_hw,
            request.sender_ip,
        ) {
            self.counters.replies += 1;
            out.push(p);
        }
    }

    fn rearm(&mut self, ctx: &mut Ctx<'_>) {
        let next = match (self.cache.next_deadline(), self.announce_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.timer.arm(next, ctx);
    }

    fn drops(&self) -> u64 {
        let s = self.cache.stats();
        let c = &self.counters;
        s.queue_drops + s.unresolved_drops + s.full_drops + c.no_next_hop + c.no_headroom + c.bad_frames
    }

    fn parse_insert(value: &str) -> Result<(Ipv4Addr, EthernetAddress), String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        let [ip, mac] = words[..] else {
            return Err("expected 'IP MAC'".into());
        };
        let ip = Ipv4Addr::from(args::ip_address(ip)?);
        let mac = EthernetAddress(args::ether_address(mac)?);
        Ok((ip, mac))
    }
}

/// The ARP packet in an Ethernet frame, if it is one for Ethernet and IPv4.
fn parse_arp(frame: &[u8]) -> Option<ArpRepr> {
    let frame = EthernetFrame::new_checked(frame).ok()?;
    if frame.ethertype() != EtherType::Arp {
        return None;
    }
    ArpRepr::parse(&ArpPacket::new_checked(frame.payload()).ok()?).ok()
}

impl Element for ARPResolver {
    fn class_name(&self) -> &'static str {
        "ARPResolver"
    }

    fn port_count(&self) -> &'static str {
        "2/1"
    }

    fn processing(&self) -> &'static str {
        PUSH
    }

    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let ip = a.required("IP")?;
        let mac = a.required("MAC")?;
        let (addr, mask) = args::ip_address(&ip)
            .map(|a| (a, [255; 4]))
            .or_else(|_| args::ip_prefix(&ip))
            .map_err(|e| format!("IP: {e}"))?;
        self.ip = Ipv4Addr::from(addr);
        let broadcast = Ipv4Addr::from(u32::from_be_bytes(addr) | !u32::from_be_bytes(mask));
        self.subnet_broadcast = (broadcast != self.ip).then_some(broadcast);
        self.mac = EthernetAddress(args::ether_address(&mac).map_err(|e| format!("MAC: {e}"))?);
        let seed = support::seed_of(&[&addr[..], &self.mac.0[..]].concat());
        let settings = support::read_settings(a, seed)?;
        self.cache = NeighborCache::new(settings);
        if let Some(n) = support::read_count(a, "ANNOUNCE")? {
            self.announce_num = n;
        }
        if let Some(t) = support::read_time(a, "ANNOUNCE_INTERVAL")? {
            self.announce_interval_us = t;
        }
        if self.ip.is_unspecified() || self.ip.is_multicast() || self.ip.is_broadcast() {
            return Err(format!("IP: {} is not a unicast address", self.ip));
        }
        if !self.mac.is_unicast() {
            return Err(format!("MAC: {} is not a unicast address", self.mac));
        }
        Ok(())
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let mut out = PacketBatch::with_capacity(1);
        self.start_announcing(ctx, &mut out);
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
                self.handle_arp(&p, now, ctx, &mut out);
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
        let mut out = PacketBatch::with_capacity(solicits.len() + 1);
        for s in solicits {
            self.request(ctx, s, &mut out);
        }
        if self.announce_at.is_some_and(|at| at <= now) {
            self.next_announcement(ctx, &mut out);
        }
        ctx.push(0, out);
        self.rearm(ctx);
    }

    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("table", true, false),
            ("count", true, false),
            ("waiting", true, false),
            ("requests", true, false),
            ("replies", true, false),
            ("announcements", true, false),
            ("conflicts", true, false),
            ("evictions", true, false),
            ("resolution_failures", true, false),
            ("probe_failures", true, false),
            ("queue_drops", true, false),
            ("unresolved_drops", true, false),
            ("full_drops", true, false),
            ("no_next_hop", true, false),
            ("no_headroom", true, false),
            ("bad_frames", true, false),
            ("alloc_failures", true, false),
            ("drops", true, false),
            ("insert", false, true),
            ("delete", false, true),
            ("announce", false, true),
        ]
    }

    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.cache.stats();
        let c = &self.counters;
        Some(match name {
            "table" => support::table_text(&self.cache),
            "count" => self.cache.len().to_string(),
            "waiting" => self.cache.waiting().to_string(),
            "requests" => c.requests.to_string(),
            "replies" => c.replies.to_string(),
            "announcements" => c.announcements.to_string(),
            "conflicts" => c.conflicts.to_string(),
            "evictions" => s.evictions.to_string(),
            "resolution_failures" => s.resolution_failures.to_string(),
            "probe_failures" => s.probe_failures.to_string(),
            "queue_drops" => s.queue_drops.to_string(),
            "unresolved_drops" => s.unresolved_drops.to_string(),
            "full_drops" => s.full_drops.to_string(),
            "no_next_hop" => c.no_next_hop.to_string(),
            "no_headroom" => c.no_headroom.to_string(),
            "bad_frames" => c.bad_frames.to_string(),
            "alloc_failures" => c.alloc_failures.to_string(),
            "drops" => self.drops().to_string(),
            _ => return None,
        })
    }

    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        let now = ctx.now_us();
        let mut out = PacketBatch::with_capacity(4);
        let result = match name {
            "insert" => Self::parse_insert(value).and_then(|(ip, mac)| {
                let released = self.cache.insert_permanent(ip, mac, now).map_err(|e| e.to_string())?;
                self.send_released(released, &mut out);
                Ok(())
            }),
            "delete" => args::ip_address(value).and_then(|ip| {
                let ip = Ipv4Addr::from(ip);
                self.cache
                    .remove(&ip)
                    .then_some(())
                    .ok_or_else(|| format!("no entry for {ip}"))
            }),
            "announce" => {
                self.start_announcing(ctx, &mut out);
                Ok(())
            }
            _ => return None,
        };
        ctx.push(0, out);
        self.rearm(ctx);
        Some(result)
    }
}
