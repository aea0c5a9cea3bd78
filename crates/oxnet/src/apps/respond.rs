//! A small host on any device: answers ARP requests for its IPv4 address
//! (RFC 826) and ICMP echo requests to it (RFC 792), so that Linux's
//! `ping` and `arping` can talk to oxnet over a TAP device, a veth or a
//! NIC. Everything else is dropped and counted. Replies are written into
//! the received buffer and sent back (no copy, no allocation).
//!
//! This is not the TCP/IP stack (that is the stack layer's job); it is the
//! smallest peer that proves a device carries real traffic both ways.

use oxnet_driver::{Device, PacketBatch};
use std::net::Ipv4Addr;

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_VLAN: u16 = 0x8100;
/// ARP for IPv4 over Ethernet is 28 bytes (RFC 826; htype 1, ptype 0x0800,
/// hlen 6, plen 4).
const ARP_LEN: usize = 28;
const ARP_REQUEST: u16 = 1;
const ARP_REPLY: u16 = 2;
const IPPROTO_ICMP: u8 = 1;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO_REQUEST: u8 = 8;

/// What the responder did, per kind of frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames received.
    pub received: u64,
    /// ARP requests for our address, answered.
    pub arp_replies: u64,
    /// ICMP echo requests to our address, answered.
    pub echo_replies: u64,
    /// Well-formed frames not for us or of other kinds (dropped).
    pub ignored: u64,
    /// Frames too short or inconsistent for what they claim to be (dropped).
    pub malformed: u64,
    /// Replies the device did not take (ring full; dropped).
    pub tx_dropped: u64,
}

/// What to do with one frame.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The frame was rewritten into the reply: send it.
    Reply,
    Ignore,
    Malformed,
}

/// Answers ARP and ICMP echo for one IPv4 address on queue 0 of a device.
pub struct Responder {
    ip: Ipv4Addr,
    mac: [u8; 6],
    rx: PacketBatch,
    tx: PacketBatch,
    batch_size: usize,
    pub counters: Counters,
}

impl Responder {
    /// A responder that owns `ip` and answers with `mac`.
    pub fn new(ip: Ipv4Addr, mac: [u8; 6], batch_size: usize) -> Responder {
        Responder {
            ip,
            mac,
            rx: PacketBatch::with_capacity(batch_size),
            tx: PacketBatch::with_capacity(batch_size),
            batch_size,
            counters: Counters::default(),
        }
    }

    /// One batch: receive, answer what is ours, send the answers. Returns
    /// the frames received.
    pub fn step(&mut self, device: &mut dyn Device) -> usize {
        let n = device.rx_batch(0, &mut self.rx, self.batch_size);
        self.counters.received += n as u64;
        while let Some(mut packet) = self.rx.pop() {
            if packet.is_chained() {
                // A coalesced (RSC/LRO) frame is never an ARP or ping we
                // answer; count it and let it go.
                self.counters.ignored += 1;
                continue;
            }
            match respond(&mut packet, self.ip, self.mac) {
                Verdict::Reply => {
                    if packet.len() >= ETH_LEN + 2 && u16::from_be_bytes([packet[12], packet[13]]) == ETHERTYPE_ARP {
                        self.counters.arp_replies += 1;
                    } else {
                        self.counters.echo_replies += 1;
                    }
                    self.tx.push(packet);
                }
                Verdict::Ignore => self.counters.ignored += 1,
                Verdict::Malformed => self.counters.malformed += 1,
            }
        }
        if !self.tx.is_empty() {
            device.tx_batch(0, &mut self.tx);
            // Whatever the ring did not take is dropped, as a host drops
            // a reply it cannot queue.
            self.counters.tx_dropped += self.tx.len() as u64;
            self.tx.clear();
        }
        n
    }
}

/// Turns `frame` into the reply if it is an ARP request for `ip` or an
/// ICMP echo request to `ip`.
fn respond(frame: &mut [u8], ip: Ipv4Addr, mac: [u8; 6]) -> Verdict {
    if frame.len() < ETH_LEN {
        return Verdict::Malformed;
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        ETHERTYPE_ARP => arp(frame, ip, mac),
        ETHERTYPE_IPV4 => {
            // Only frames for our MAC or broadcast (a promiscuous device
            // also hands us frames for other hosts on a shared segment).
            let dst = &frame[0..6];
            if dst != mac && dst != [0xff; 6] {
                return Verdict::Ignore;
            }
            icmp_echo(frame, ip, mac)
        }
        ETHERTYPE_VLAN => Verdict::Ignore,
        _ => Verdict::Ignore,
    }
}

/// RFC 826, "Packet Reception": an Ethernet/IPv4 request whose target
/// protocol address is ours is answered by swapping sender and target,
/// putting our hardware address in as sender, and setting the opcode to
/// reply. Requests for other addresses and replies are ignored.
fn arp(frame: &mut [u8], ip: Ipv4Addr, mac: [u8; 6]) -> Verdict {
    if frame.len() < ETH_LEN + ARP_LEN {
        return Verdict::Malformed;
    }
    let a = ETH_LEN;
    let htype = u16::from_be_bytes([frame[a], frame[a + 1]]);
    let ptype = u16::from_be_bytes([frame[a + 2], frame[a + 3]]);
    let (hlen, plen) = (frame[a + 4], frame[a + 5]);
    if htype != 1 || ptype != ETHERTYPE_IPV4 || hlen != 6 || plen != 4 {
        return Verdict::Ignore;
    }
    let op = u16::from_be_bytes([frame[a + 6], frame[a + 7]]);
    let target_ip = &frame[a + 24..a + 28];
    if op != ARP_REQUEST || target_ip != ip.octets() {
        return Verdict::Ignore;
    }
    let mut sender_mac = [0u8; 6];
    sender_mac.copy_from_slice(&frame[a + 8..a + 14]);
    let mut sender_ip = [0u8; 4];
    sender_ip.copy_from_slice(&frame[a + 14..a + 18]);
    // Ethernet: back to the requester, from us.
    frame[0..6].copy_from_slice(&sender_mac);
    frame[6..12].copy_from_slice(&mac);
    frame[a + 6..a + 8].copy_from_slice(&ARP_REPLY.to_be_bytes());
    frame[a + 8..a + 14].copy_from_slice(&mac);
    frame[a + 14..a + 18].copy_from_slice(&ip.octets());
    frame[a + 18..a + 24].copy_from_slice(&sender_mac);
    frame[a + 24..a + 28].copy_from_slice(&sender_ip);
    Verdict::Reply
}

/// RFC 792, "Echo or Echo Reply Message": the reply is the request with
/// the addresses reversed, type 0 and the ICMP checksum recomputed; the
/// identifier, sequence number and data are returned unchanged. The IPv4
/// header (RFC 791 §3.1) must be valid: version 4, IHL ≥ 5, total length
/// within the frame, a correct header checksum, not a fragment.
fn icmp_echo(frame: &mut [u8], ip: Ipv4Addr, mac: [u8; 6]) -> Verdict {
    let h = ETH_LEN;
    if frame.len() < h + 20 {
        return Verdict::Malformed;
    }
    let version = frame[h] >> 4;
    let ihl = usize::from(frame[h] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[h + 2], frame[h + 3]]));
    if version != 4 || ihl < 20 || total < ihl || h + total > frame.len() {
        return Verdict::Malformed;
    }
    if checksum(&frame[h..h + ihl]) != 0 {
        return Verdict::Malformed;
    }
    if frame[h + 9] != IPPROTO_ICMP || frame[h + 16..h + 20] != ip.octets() {
        return Verdict::Ignore;
    }
    // More-fragments set or a fragment offset: not reassembled here.
    let fragment = u16::from_be_bytes([frame[h + 6], frame[h + 7]]);
    if fragment & 0x3fff != 0 {
        return Verdict::Ignore;
    }
    let icmp = h + ihl;
    let icmp_end = h + total;
    if icmp_end - icmp < 8 {
        return Verdict::Malformed;
    }
    if frame[icmp] != ICMP_ECHO_REQUEST || frame[icmp + 1] != 0 {
        return Verdict::Ignore;
    }
    if checksum(&frame[icmp..icmp_end]) != 0 {
        return Verdict::Malformed;
    }
    // Ethernet: back to the sender.
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&frame[6..12]);
    frame[0..6].copy_from_slice(&src_mac);
    frame[6..12].copy_from_slice(&mac);
    // IPv4: swap addresses, fresh TTL, header checksum again.
    let mut src_ip = [0u8; 4];
    src_ip.copy_from_slice(&frame[h + 12..h + 16]);
    frame[h + 12..h + 16].copy_from_slice(&ip.octets());
    frame[h + 16..h + 20].copy_from_slice(&src_ip);
    frame[h + 8] = 64;
    frame[h + 10..h + 12].copy_from_slice(&[0, 0]);
    let sum = checksum(&frame[h..h + ihl]);
    frame[h + 10..h + 12].copy_from_slice(&sum.to_be_bytes());
    // ICMP: type 0, checksum over the whole message.
    frame[icmp] = ICMP_ECHO_REPLY;
    frame[icmp + 2..icmp + 4].copy_from_slice(&[0, 0]);
    let sum = checksum(&frame[icmp..icmp_end]);
    frame[icmp + 2..icmp + 4].copy_from_slice(&sum.to_be_bytes());
    Verdict::Reply
}

/// The Internet checksum (RFC 1071): the ones' complement of the ones'
/// complement sum of 16-bit words. Over data with a correct checksum in
/// place it is 0.
fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
    const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

    fn arp_request(target: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&[10, 0, 0, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&target.octets());
        f.resize(60, 0);
        f
    }

    /// An echo request as Linux's ping builds it; the checksums are the
    /// ones RFC 791/792 define, computed here independently of `respond`.
    fn echo_request(dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
        let mut f = OUR_MAC.to_vec();
        f.extend_from_slice(&PEER_MAC);
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + 8 + payload.len();
        let mut ip = vec![
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0x12,
            0x34,
            0x40,
            0,
            64,
            1,
            0,
            0,
        ];
        ip.extend_from_slice(&[10, 0, 0, 1]);
        ip.extend_from_slice(&dst.octets());
        let s = checksum(&ip);
        ip[10..12].copy_from_slice(&s.to_be_bytes());
        let mut icmp = vec![8, 0, 0, 0, 0xab, 0xcd, 0, 7];
        icmp.extend_from_slice(payload);
        let s = checksum(&icmp);
        icmp[2..4].copy_from_slice(&s.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&icmp);
        f
    }

    #[test]
    fn checksum_matches_rfc_1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to 0xddf2
        // (ones' complement), so the checksum is !0xddf2.
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
    }

    #[test]
    fn arp_request_for_us_becomes_the_rfc_826_reply() {
        let mut f = arp_request(OURS);
        assert_eq!(respond(&mut f, OURS, OUR_MAC), Verdict::Reply);
        assert_eq!(&f[0..6], &PEER_MAC);
        assert_eq!(&f[6..12], &OUR_MAC);
        assert_eq!(&f[20..22], &[0, 2], "opcode reply");
        assert_eq!(&f[22..28], &OUR_MAC, "sender hardware address");
        assert_eq!(&f[28..32], &[10, 0, 0, 2], "sender protocol address");
        assert_eq!(&f[32..38], &PEER_MAC, "target hardware address");
        assert_eq!(&f[38..42], &[10, 0, 0, 1], "target protocol address");
    }

    #[test]
    fn arp_for_others_and_replies_are_ignored() {
        let mut f = arp_request(Ipv4Addr::new(10, 0, 0, 3));
        assert_eq!(respond(&mut f, OURS, OUR_MAC), Verdict::Ignore);
        let mut f = arp_request(OURS);
        f[21] = 2;
        assert_eq!(respond(&mut f, OURS, OUR_MAC), Verdict::Ignore);
    }

    #[test]
    fn echo_request_becomes_a_reply_with_valid_checksums_and_the_same_data() {
        let payload: Vec<u8> = (0..56u8).collect();
        let request = echo_request(OURS, &payload);
        let mut f = request.clone();
        assert_eq!(respond(&mut f, OURS, OUR_MAC), Verdict::Reply);
        assert_eq!(&f[0..6], &PEER_MAC);
        assert_eq!(&f[6..12], &OUR_MAC);
        assert_eq!(&f[26..30], &[10, 0, 0, 2]);
        assert_eq!(&f[30..34], &[10, 0, 0, 1]);
        assert_eq!(checksum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(f[34], 0, "type echo reply");
        assert_eq!(checksum(&f[34..]), 0, "ICMP checksum");
        assert_eq!(&f[38..42], &request[38..42], "identifier and sequence");
        assert_eq!(&f[42..], &payload[..]);
    }

    #[test]
    fn corrupt_truncated_and_foreign_frames_are_not_answered() {
        let good = echo_request(OURS, b"abcdefgh");
        let mut bad_ip_sum = good.clone();
        bad_ip_sum[24] ^= 1;
        assert_eq!(respond(&mut bad_ip_sum, OURS, OUR_MAC), Verdict::Malformed);
        let mut bad_icmp_sum = good.clone();
        bad_icmp_sum[36] ^= 1;
        assert_eq!(respond(&mut bad_icmp_sum, OURS, OUR_MAC), Verdict::Malformed);
        let mut other = echo_request(Ipv4Addr::new(10, 0, 0, 9), b"x");
        assert_eq!(respond(&mut other, OURS, OUR_MAC), Verdict::Ignore);
        for cut in 0..good.len() {
            let mut short = good[..cut].to_vec();
            assert_ne!(respond(&mut short, OURS, OUR_MAC), Verdict::Reply, "cut at {cut}");
        }
        let arp = arp_request(OURS);
        for cut in 0..ETH_LEN + ARP_LEN {
            let mut short = arp[..cut].to_vec();
            assert_ne!(respond(&mut short, OURS, OUR_MAC), Verdict::Reply, "cut at {cut}");
        }
    }
}
