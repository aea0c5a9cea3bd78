//! The seed corpora of the stack's fuzz targets, written out by hand as
//! code so that they can be read and made again:
//! `cargo test -p oxnet-stack --test fuzz_seeds -- --ignored` rewrites
//! `fuzz/corpus/stack_*/seed-*` (the other files there, minimized
//! fuzzer finds, stay). Each seed's name says what it is.

use oxnet_stack::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, NdiscOptions, NdiscPrefixInfo,
    NdiscRepr, TcpFlags, TcpOptions, TcpPacket, TcpRepr, TcpSeqNumber, UdpPacket, UdpRepr,
};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

const US_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const US4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const US6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
const PEER6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// ff02::1:ff00:2, our solicited-node group (RFC 4291 §2.7.1), and its
/// Ethernet address (RFC 2464 §7).
const US6_SOLICITED: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
const SOLICITED_MAC: EthernetAddress = EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2]);

fn ethernet(dst: EthernetAddress, ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let repr = EthernetRepr {
        src: PEER_MAC,
        dst,
        ethertype,
    };
    let mut f = vec![0; 14 + payload.len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[14..].copy_from_slice(payload);
    f
}

fn arp(op: ArpOperation, sender: Ipv4Addr, target_hw: EthernetAddress, target: Ipv4Addr) -> Vec<u8> {
    let repr = ArpRepr {
        op,
        sender_hw: PEER_MAC,
        sender_ip: sender,
        target_hw,
        target_ip: target,
    };
    let mut b = vec![0; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
    ethernet(EthernetAddress::BROADCAST, EtherType::Arp, &b)
}

/// An IPv4 packet from the peer to `dst` (fragment fields: more
/// fragments, offset in 8-byte units).
fn ipv4(dst: Ipv4Addr, protocol: IpProtocol, payload: &[u8], more_frags: bool, frag_offset: u16) -> Vec<u8> {
    let repr = Ipv4Repr {
        src: PEER4,
        dst,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: false,
        more_frags,
        frag_offset: frag_offset * 8,
    };
    let mut b = vec![0; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut b[..]));
    b[20..].copy_from_slice(payload);
    b
}

fn echo4(data_len: usize) -> Vec<u8> {
    let repr = Icmpv4Repr::EchoRequest {
        ident: 0x1234,
        seq_no: 1,
        data_len,
    };
    let mut b = vec![0; repr.buffer_len()];
    for (i, x) in b[8..].iter_mut().enumerate() {
        *x = i as u8;
    }
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut b[..]));
    b
}

fn tcp_bytes(src: IpAddress, dst: IpAddress, repr: &TcpRepr) -> Vec<u8> {
    let mut b = vec![0x61; repr.buffer_len()];
    repr.emit(&mut TcpPacket::new_unchecked(&mut b[..]), &src, &dst);
    b
}

fn udp_bytes(src: IpAddress, dst: IpAddress, payload: &[u8]) -> Vec<u8> {
    let repr = UdpRepr {
        src_port: 5353,
        dst_port: 53,
        payload_len: payload.len(),
    };
    let mut b = vec![0; repr.buffer_len()];
    b[8..].copy_from_slice(payload);
    repr.emit(&mut UdpPacket::new_unchecked(&mut b[..]), &src, &dst);
    b
}

fn syn() -> TcpRepr {
    TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: TcpSeqNumber(1000),
        ack: None,
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((100, 0)),
            ..TcpOptions::default()
        },
        payload_len: 0,
    }
}

/// An IPv6 packet from `src` to `dst`: `next` is the first next header,
/// `payload` what follows the fixed header.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0; 40];
    b[0] = 0x60;
    b[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    b[6] = next;
    b[7] = hop_limit;
    b[8..24].copy_from_slice(&src.octets());
    b[24..40].copy_from_slice(&dst.octets());
    b.extend_from_slice(payload);
    b
}

fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr) -> Vec<u8> {
    let mut b = vec![0; repr.buffer_len()];
    for (i, x) in b[8..].iter_mut().enumerate() {
        *x = i as u8;
    }
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut b[..]), &src, &dst);
    b
}

fn lladdr(source: bool) -> NdiscOptions {
    NdiscOptions {
        source_lladdr: source.then_some(PEER_MAC),
        target_lladdr: (!source).then_some(PEER_MAC),
        ..NdiscOptions::default()
    }
}

/// Ethernet + IPv6 + ND message from the peer, hop limit 255.
fn nd_frame(src: Ipv6Addr, dst: Ipv6Addr, mac: EthernetAddress, nd: NdiscRepr) -> Vec<u8> {
    let icmp = icmpv6(src, dst, &Icmpv6Repr::Ndisc(nd));
    ethernet(mac, EtherType::Ipv6, &ipv6(src, dst, 58, 255, &icmp))
}

/// Every kind of frame the stack parses, valid.
fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let (p4, u4) = (IpAddress::V4(PEER4), IpAddress::V4(US4));
    let (p6, u6) = (IpAddress::V6(PEER6), IpAddress::V6(US6));
    let mut out = vec![
        (
            "arp-request",
            arp(ArpOperation::Request, PEER4, EthernetAddress([0; 6]), US4),
        ),
        ("arp-reply", arp(ArpOperation::Reply, PEER4, US_MAC, US4)),
        (
            "arp-announcement",
            arp(ArpOperation::Request, PEER4, EthernetAddress([0; 6]), PEER4),
        ),
        (
            "arp-probe",
            arp(
                ArpOperation::Request,
                Ipv4Addr::UNSPECIFIED,
                EthernetAddress([0; 6]),
                US4,
            ),
        ),
        (
            "ipv4-icmp-echo",
            ethernet(
                US_MAC,
                EtherType::Ipv4,
                &ipv4(US4, IpProtocol::Icmp, &echo4(32), false, 0),
            ),
        ),
        (
            "ipv4-tcp-syn",
            ethernet(
                US_MAC,
                EtherType::Ipv4,
                &ipv4(US4, IpProtocol::Tcp, &tcp_bytes(p4, u4, &syn()), false, 0),
            ),
        ),
        (
            "ipv4-udp",
            ethernet(
                US_MAC,
                EtherType::Ipv4,
                &ipv4(US4, IpProtocol::Udp, &udp_bytes(p4, u4, b"hello"), false, 0),
            ),
        ),
        (
            "ipv4-broadcast-udp",
            ethernet(
                EthernetAddress::BROADCAST,
                EtherType::Ipv4,
                &ipv4(
                    Ipv4Addr::new(10, 0, 0, 255),
                    IpProtocol::Udp,
                    &udp_bytes(p4, IpAddress::V4(Ipv4Addr::new(10, 0, 0, 255)), b"x"),
                    false,
                    0,
                ),
            ),
        ),
    ];
    // An ICMP destination unreachable quoting a UDP datagram we sent.
    let quoted = {
        let mut q = ipv4(PEER4, IpProtocol::Udp, &udp_bytes(u4, p4, b"abcdefgh"), false, 0);
        q[12..16].copy_from_slice(&US4.octets());
        q[16..20].copy_from_slice(&PEER4.octets());
        Ipv4Packet::new_unchecked(&mut q[..]).fill_checksum();
        q
    };
    let mut unreachable = vec![3, 3, 0, 0, 0, 0, 0, 0];
    unreachable.extend_from_slice(&quoted[..28]);
    Icmpv4Packet::new_unchecked(&mut unreachable[..]).fill_checksum();
    out.push((
        "ipv4-icmp-port-unreachable",
        ethernet(
            US_MAC,
            EtherType::Ipv4,
            &ipv4(US4, IpProtocol::Icmp, &unreachable, false, 0),
        ),
    ));
    // IPv4 with options (a NOP and End, header 24 bytes).
    let mut opts = ipv4(US4, IpProtocol::Udp, &udp_bytes(p4, u4, b"opt"), false, 0);
    opts.splice(20..20, [1, 1, 1, 0]);
    opts[0] = 0x46;
    let total = opts.len() as u16;
    opts[2..4].copy_from_slice(&total.to_be_bytes());
    Ipv4Packet::new_unchecked(&mut opts[..24]).fill_checksum();
    out.push(("ipv4-options-udp", ethernet(US_MAC, EtherType::Ipv4, &opts)));
    // An echo request in two fragments.
    let echo = echo4(40);
    out.push((
        "ipv4-fragment-first",
        ethernet(
            US_MAC,
            EtherType::Ipv4,
            &ipv4(US4, IpProtocol::Icmp, &echo[..24], true, 0),
        ),
    ));
    out.push((
        "ipv4-fragment-last",
        ethernet(
            US_MAC,
            EtherType::Ipv4,
            &ipv4(US4, IpProtocol::Icmp, &echo[24..], false, 3),
        ),
    ));
    // IPv6.
    let echo6 = icmpv6(
        PEER6,
        US6,
        &Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data_len: 16,
        },
    );
    out.push((
        "ipv6-icmp-echo",
        ethernet(US_MAC, EtherType::Ipv6, &ipv6(PEER6, US6, 58, 64, &echo6)),
    ));
    let mut syn6 = syn();
    syn6.options.mss = Some(1440);
    out.push((
        "ipv6-tcp-syn",
        ethernet(
            US_MAC,
            EtherType::Ipv6,
            &ipv6(PEER6, US6, 6, 64, &tcp_bytes(p6, u6, &syn6)),
        ),
    ));
    out.push((
        "ipv6-udp",
        ethernet(
            US_MAC,
            EtherType::Ipv6,
            &ipv6(PEER6, US6, 17, 64, &udp_bytes(p6, u6, b"hello")),
        ),
    ));
    // Hop-by-Hop (8 bytes: next UDP, length 0, PadN of 4) then UDP.
    let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend(udp_bytes(p6, u6, b"hbh"));
    out.push((
        "ipv6-hop-by-hop-udp",
        ethernet(US_MAC, EtherType::Ipv6, &ipv6(PEER6, US6, 0, 64, &hbh)),
    ));
    // A Fragment header (first fragment, more to come) then UDP.
    let mut frag = vec![17, 0, 0, 1, 0, 0, 0, 9];
    frag.extend(udp_bytes(p6, u6, b"frag"));
    out.push((
        "ipv6-fragment-udp",
        ethernet(US_MAC, EtherType::Ipv6, &ipv6(PEER6, US6, 44, 64, &frag)),
    ));
    // Destination Options then Routing (type 0, segments left 0) then ICMPv6.
    let mut chain = vec![43, 0, 1, 4, 0, 0, 0, 0, 58, 0, 0, 0, 0, 0, 0, 0];
    chain.extend(&echo6);
    out.push((
        "ipv6-dstopts-routing-icmp",
        ethernet(US_MAC, EtherType::Ipv6, &ipv6(PEER6, US6, 60, 64, &chain)),
    ));
    // A Packet Too Big quoting one of our packets.
    let quoted6 = ipv6(US6, PEER6, 17, 64, &udp_bytes(u6, p6, b"big"));
    let too_big = icmpv6(
        PEER6,
        US6,
        &Icmpv6Repr::PacketTooBig {
            mtu: 1280,
            header: oxnet_stack::wire::Ipv6Repr::parse_quoted(&quoted6).unwrap(),
            data: &quoted6[40..],
        },
    );
    out.push((
        "ipv6-icmp-packet-too-big",
        ethernet(US_MAC, EtherType::Ipv6, &ipv6(PEER6, US6, 58, 64, &too_big)),
    ));
    // Neighbor Discovery.
    out.push((
        "nd-neighbor-solicit",
        nd_frame(
            PEER6,
            US6_SOLICITED,
            SOLICITED_MAC,
            NdiscRepr::NeighborSolicit {
                target: US6,
                options: lladdr(true),
            },
        ),
    ));
    out.push((
        "nd-dad-solicit",
        nd_frame(
            Ipv6Addr::UNSPECIFIED,
            US6_SOLICITED,
            SOLICITED_MAC,
            NdiscRepr::NeighborSolicit {
                target: US6,
                options: NdiscOptions::default(),
            },
        ),
    ));
    out.push((
        "nd-neighbor-advert",
        nd_frame(
            PEER6,
            US6,
            US_MAC,
            NdiscRepr::NeighborAdvert {
                router: false,
                solicited: true,
                override_cache: true,
                target: PEER6,
                options: lladdr(false),
            },
        ),
    ));
    out.push((
        "nd-router-solicit",
        nd_frame(
            PEER6,
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2),
            EthernetAddress([0x33, 0x33, 0, 0, 0, 2]),
            NdiscRepr::RouterSolicit { options: lladdr(true) },
        ),
    ));
    let mut ra_options = lladdr(true);
    ra_options.mtu = Some(1500);
    ra_options.prefixes[0] = Some(NdiscPrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 86400,
        preferred_lifetime: 14400,
        prefix: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
    });
    out.push((
        "nd-router-advert",
        nd_frame(
            PEER6,
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
            NdiscRepr::RouterAdvert {
                hop_limit: 64,
                managed: false,
                other_config: true,
                router_lifetime: 1800,
                reachable_time: 30000,
                retrans_timer: 1000,
                options: ra_options,
            },
        ),
    ));
    out.push((
        "nd-redirect",
        nd_frame(
            PEER6,
            US6,
            US_MAC,
            NdiscRepr::Redirect {
                target: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 3),
                dest: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9),
                options: NdiscOptions::default(),
            },
        ),
    ));
    out
}

/// stack_wire_headers: every frame, and a few headers alone.
fn wire_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = frames().into_iter().map(|(n, f)| (n.to_string(), f)).collect();
    let (p4, u4) = (IpAddress::V4(PEER4), IpAddress::V4(US4));
    let mut sack = syn();
    sack.flags = TcpFlags::empty();
    sack.ack = Some(TcpSeqNumber(5000));
    sack.options = TcpOptions {
        timestamps: Some((200, 100)),
        sack_blocks: [
            Some((TcpSeqNumber(6000), TcpSeqNumber(7000))),
            Some((TcpSeqNumber(8000), TcpSeqNumber(9000))),
            Some((TcpSeqNumber(10000), TcpSeqNumber(11000))),
            None,
        ],
        ..TcpOptions::default()
    };
    out.push(("tcp-ack-sack-alone".into(), tcp_bytes(p4, u4, &sack)));
    out.push(("tcp-syn-alone".into(), tcp_bytes(p4, u4, &syn())));
    // Linux's SYN options alone (MSS, SACK-permitted, timestamps, window scale).
    out.push((
        "tcp-options-linux-syn".into(),
        vec![2, 4, 5, 180, 4, 2, 8, 10, 0, 0, 0, 100, 0, 0, 0, 0, 1, 3, 3, 7],
    ));
    out.push(("udp-alone".into(), udp_bytes(p4, u4, b"hi")));
    out.push(("icmp-echo-alone".into(), echo4(8)));
    out
}

/// stack_ip_input's records: (kind, frame), kind 4 a time step.
fn record(kind: u8, frame: &[u8]) -> Vec<u8> {
    let mut r = vec![kind];
    r.extend_from_slice(&(frame.len() as u16).to_be_bytes());
    r.extend_from_slice(frame);
    r
}

/// Time forward: (b & 0x1f) + 1 ms, times 2^((b >> 5) * 3 / 2).
fn wait(b: u8) -> Vec<u8> {
    vec![4, b]
}

fn ip_seeds() -> Vec<(String, Vec<u8>)> {
    let f: std::collections::HashMap<&str, Vec<u8>> = frames().into_iter().collect();
    let input = |name: &str| -> u8 {
        match name.split('-').next().unwrap() {
            "ipv4" => 0,
            "ipv6" => 1,
            "arp" => 2,
            _ => 3,
        }
    };
    // Every frame alone, into its input.
    let mut out: Vec<(String, Vec<u8>)> = frames()
        .into_iter()
        .map(|(n, frame)| (format!("one-{n}"), record(input(n), &frame)))
        .collect();
    let cat = |parts: &[Vec<u8>]| parts.concat();
    // An echo request answered after ARP resolves the peer.
    out.push((
        "ping-then-arp-reply".into(),
        cat(&[record(0, &f["ipv4-icmp-echo"]), record(2, &f["arp-reply"])]),
    ));
    out.push((
        "ping-arp-times-out".into(),
        cat(&[record(0, &f["ipv4-icmp-echo"]), wait(0xff), wait(0xff)]),
    ));
    out.push((
        "fragments-in-order".into(),
        cat(&[
            record(0, &f["ipv4-fragment-first"]),
            record(0, &f["ipv4-fragment-last"]),
        ]),
    ));
    out.push((
        "fragments-reversed".into(),
        cat(&[
            record(0, &f["ipv4-fragment-last"]),
            record(0, &f["ipv4-fragment-first"]),
        ]),
    ));
    out.push((
        "fragment-times-out".into(),
        cat(&[record(0, &f["ipv4-fragment-first"]), wait(0xdf)]),
    ));
    // Five first fragments of five datagrams (the table holds four).
    let mut many = Vec::new();
    for ident in 0..5u8 {
        let mut frame = f["ipv4-fragment-first"].clone();
        frame[14 + 5] = ident;
        many.extend(record(0x80, &frame));
    }
    out.push(("fragments-five-datagrams".into(), many));
    out.push((
        "checksums-filled".into(),
        cat(&[record(0x80, &{
            let mut frame = f["ipv4-icmp-echo"].clone();
            frame[14 + 10..14 + 12].fill(0);
            frame
        })]),
    ));
    // IPv6: past duplicate address detection (1 s), a ping from the peer
    // resolved by the NA; the peer's NS answered.
    out.push((
        "ping6-then-neighbor-advert".into(),
        cat(&[
            wait(0x9f),
            wait(0x9f),
            record(1, &f["ipv6-icmp-echo"]),
            record(3, &f["nd-neighbor-advert"]),
        ]),
    ));
    out.push((
        "neighbor-solicit-answered".into(),
        cat(&[wait(0x9f), wait(0x9f), record(3, &f["nd-neighbor-solicit"])]),
    ));
    out.push((
        "neighbor-solicit-through-ipv6-input".into(),
        cat(&[wait(0x9f), wait(0x9f), record(1, &f["nd-neighbor-solicit"])]),
    ));
    out.push((
        "dad-conflict".into(),
        cat(&[record(3, &f["nd-dad-solicit"]), wait(0x9f)]),
    ));
    out.push((
        "arp-request-then-ping".into(),
        cat(&[record(2, &f["arp-request"]), record(0, &f["ipv4-icmp-echo"])]),
    ));
    out
}

/// stack_tcp_input's operations (src/fuzzing/tcp.rs).
mod op {
    /// A segment: flags (ACK 0x10 sets the ACK field), port selector
    /// (0: the established connection, 2 | n << 2: new connection n, 3:
    /// a closed port), sequence and acknowledgment deltas, window, option
    /// bits (8: timestamps, TSval the client's clock + ts - 128), payload
    /// length byte ([`len_byte`]).
    pub fn seg(flags: u8, port: u8, seq: i16, ack: i16, payload: usize) -> Vec<u8> {
        seg_with(flags, port, seq, ack, 65535, 8, len_byte(payload), &[130, 0, 0, 0, 0])
    }

    /// The payload length byte for `len` bytes (under 64 exactly, else
    /// rounded down to 8).
    pub fn len_byte(len: usize) -> u8 {
        if len < 64 {
            len as u8
        } else {
            (len / 8 + 63).min(255) as u8
        }
    }

    /// A burst: the segment `seg` (bytes as [`seg`] writes them, without
    /// the operation byte) sent 32 * `count32` times.
    pub fn burst(count32: u8, seg: Vec<u8>) -> Vec<u8> {
        let mut v = vec![7, 3, count32];
        v.extend_from_slice(&seg[1..]);
        v
    }

    #[allow(clippy::too_many_arguments)]
    pub fn seg_with(
        flags: u8,
        port: u8,
        seq: i16,
        ack: i16,
        window: u16,
        options: u8,
        payload: u8,
        extra: &[u8],
    ) -> Vec<u8> {
        let mut v = vec![0, flags, port];
        v.extend_from_slice(&seq.to_be_bytes());
        v.extend_from_slice(&ack.to_be_bytes());
        v.extend_from_slice(&window.to_be_bytes());
        v.push(options);
        v.push(payload);
        v.extend_from_slice(extra);
        v
    }

    pub fn wait(b: u8) -> Vec<u8> {
        vec![3, b]
    }
    pub fn read(len16: u8) -> Vec<u8> {
        vec![4, len16, 0]
    }
    pub fn write(len: u16) -> Vec<u8> {
        let mut v = vec![5];
        v.extend_from_slice(&len.to_be_bytes());
        v.push(0);
        v
    }
    pub fn shutdown() -> Vec<u8> {
        vec![6, 0]
    }
    pub fn drop_socket() -> Vec<u8> {
        vec![6, 0x80]
    }
    pub fn accept() -> Vec<u8> {
        vec![7, 0]
    }
    pub fn close_listener() -> Vec<u8> {
        vec![7, 0x82]
    }
}

const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;
const FIN_ACK: u8 = 0x11;
const RST: u8 = 0x04;
const SYN: u8 = 0x02;

fn tcp_seeds() -> Vec<(String, Vec<u8>)> {
    use op::*;
    let s = |name: &str, ops: Vec<Vec<u8>>| (name.to_string(), ops.concat());
    vec![
        s("handshake-only", vec![]),
        s("data-40", vec![seg(PSH_ACK, 0, 0, 0, 40)]),
        s("data-then-delayed-ack", vec![seg(PSH_ACK, 0, 0, 0, 40), wait(0xa1)]),
        s(
            "two-segments-acked-at-once",
            vec![seg(ACK, 0, 0, 0, 800), seg(ACK, 0, 800, 0, 800)],
        ),
        s("data-read", vec![seg(PSH_ACK, 0, 0, 0, 160), read(20)]),
        s(
            "out-of-order-then-gap-filled",
            vec![seg(ACK, 0, 80, 0, 80), seg(ACK, 0, 0, 0, 80), read(255)],
        ),
        s(
            "out-of-order-many",
            (1..20).map(|i| seg(ACK, 0, i * 100, 0, 40)).collect(),
        ),
        s("fill-receive-window", vec![seg(ACK, 0, 0, 0, 1400); 4]),
        s("data-beyond-window", vec![seg(ACK, 0, 8000, 0, 400)]),
        s("old-data", vec![seg(ACK, 0, -100, 0, 400)]),
        s("fin-from-client", vec![seg(FIN_ACK, 0, 0, 0, 0)]),
        s(
            "fin-then-close-then-ack",
            vec![seg(FIN_ACK, 0, 0, 0, 0), shutdown(), seg(ACK, 0, 0, 1, 0), wait(0xff)],
        ),
        s(
            "close-first-then-fin",
            vec![
                shutdown(),
                seg(ACK, 0, 0, 1, 0),
                seg(FIN_ACK, 0, 0, 1, 0),
                wait(0xff),
                wait(0xff),
            ],
        ),
        s(
            "simultaneous-close",
            vec![shutdown(), seg(FIN_ACK, 0, 0, 0, 0), seg(ACK, 0, 0, 1, 0), wait(0xff)],
        ),
        s("data-and-fin", vec![seg(PSH_ACK | 1, 0, 0, 0, 24), read(10)]),
        s("rst-in-window", vec![seg(RST, 0, 0, 0, 0)]),
        s(
            "rst-ack-in-window",
            vec![seg(RST | ACK, 0, 0, 0, 0), read(1), write(10)],
        ),
        s("rst-not-exact", vec![seg(RST, 0, 100, 0, 0)]),
        s("rst-out-of-window", vec![seg(RST, 0, 20000, 0, 0)]),
        s("syn-on-established", vec![seg(SYN, 0, 0, 0, 0)]),
        s("syn-to-closed-port", vec![seg(SYN, 3, 0, 0, 0)]),
        s("ack-to-closed-port", vec![seg(ACK, 3, 0, 0, 0)]),
        s(
            "second-connection-accepted",
            vec![
                seg_with(SYN, 2, 0, 0, 65535, 1 | 2 | 4 | 8, 0, &[5, 0xb4, 7, 130, 0, 0, 0, 0]),
                seg(ACK, 2, 0, 1, 0),
                accept(),
                seg(PSH_ACK, 2, 0, 0, 16),
            ],
        ),
        s(
            "syn-flood-past-backlog",
            (0..8u8).map(|n| seg(SYN, 2 | (n << 2), 0, 0, 0)).collect(),
        ),
        s(
            "write-then-acked",
            vec![write(3000), seg(ACK, 0, 0, 1400, 0), seg(ACK, 0, 0, 1600, 0)],
        ),
        s(
            "write-then-retransmissions",
            vec![write(2000), wait(0xdf), wait(0xdf), wait(0xdf)],
        ),
        s(
            "write-then-duplicate-acks",
            // The first data acknowledged first, then duplicates of that
            // ACK (RFC 6582 §3.2 step 1, tcp/newreno.rs).
            vec![
                write(1000),
                seg(ACK, 0, 0, 1000, 0),
                write(11000),
                seg(ACK, 0, 0, 0, 0),
                seg(ACK, 0, 0, 0, 0),
                seg(ACK, 0, 0, 0, 0),
                seg(ACK, 0, 0, 1400, 0),
            ],
        ),
        s(
            "write-then-sack",
            vec![
                write(6000),
                seg_with(ACK, 0, 0, 0, 65535, 8 | 16, 0, &[130, 0, 0, 0, 0, 5, 0x78, 5, 0x78]),
            ],
        ),
        s(
            "zero-window-then-update",
            vec![
                seg_with(ACK, 0, 0, 0, 0, 8, 0, &[130, 0, 0, 0, 0]),
                write(3000),
                wait(0xdf),
                seg(ACK, 0, 0, 0, 0),
            ],
        ),
        s("ack-of-unsent-data", vec![write(100), seg(ACK, 0, 0, 5000, 0)]),
        s(
            "no-timestamps",
            vec![seg_with(PSH_ACK, 0, 0, 0, 65535, 0, len_byte(16), &[])],
        ),
        s(
            "options-on-data",
            vec![seg_with(
                PSH_ACK,
                0,
                0,
                0,
                65535,
                1 | 2 | 4 | 8,
                len_byte(16),
                &[2, 0, 14, 130, 0, 0, 0, 0],
            )],
        ),
        s("urgent-and-ecn-flags", vec![seg(0xf8, 0, 0, 0, 16)]),
        s(
            "drop-socket-with-unread-data",
            vec![seg(PSH_ACK, 0, 0, 0, 40), drop_socket(), wait(0xff)],
        ),
        s(
            "drop-socket-then-data",
            vec![drop_socket(), seg(PSH_ACK, 0, 0, 0, 40), wait(0xff)],
        ),
        s(
            "close-listener-with-pending",
            vec![seg(SYN, 2, 0, 0, 0), seg(ACK, 2, 0, 1, 0), close_listener(), wait(0xff)],
        ),
        s(
            "time-wait-ends",
            vec![
                shutdown(),
                seg(FIN_ACK, 0, 0, 1, 0),
                wait(0xff),
                wait(0xff),
                seg(SYN, 0, 5000, 0, 0),
            ],
        ),
        s(
            "burst-one-byte-segments",
            vec![burst(8, seg(ACK, 0, 0, 0, 1)), read(255)],
        ),
        s("burst-out-of-order", vec![burst(2, seg(ACK, 0, 100, 0, 8))]),
        s(
            "burst-duplicate-acks",
            vec![write(3000), burst(1, seg(ACK, 0, 0, 0, 0))],
        ),
        s(
            "echo-like",
            vec![
                seg(PSH_ACK, 0, 0, 0, 32),
                read(4),
                write(32),
                wait(0xa1),
                seg(ACK, 0, 0, 32, 0),
            ],
        ),
    ]
}

/// Bugs found, kept as regressions (`fuzz/regressions/stack_tcp_input/`,
/// listed in KNOWN_FAILING in tests/fuzz_replay.rs until fixed).
fn tcp_regressions() -> Vec<(String, Vec<u8>)> {
    use op::*;
    vec![(
        // Three connections each sent 4096 one-byte segments in
        // sequence, which the application does not read: the receive
        // queue keeps one packet buffer per byte (its limit is in bytes),
        // so 8192 bytes of data hold every buffer of the router's pool.
        "one-byte-segments-drain-the-pool".to_string(),
        [
            seg(SYN, 2, 0, 0, 0),
            seg(ACK, 2, 0, 1, 0),
            seg(SYN, 6, 0, 0, 0),
            seg(ACK, 6, 0, 1, 0),
            burst(128, seg(ACK, 0, 0, 0, 1)),
            burst(128, seg(ACK, 2, 0, 0, 1)),
            burst(128, seg(ACK, 6, 0, 0, 1)),
        ]
        .concat(),
    )]
}

#[test]
#[ignore]
fn write_seed_corpora() {
    let regressions = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/stack_tcp_input"
    ));
    std::fs::create_dir_all(&regressions).unwrap();
    for (name, bytes) in tcp_regressions() {
        std::fs::write(regressions.join(name), bytes).unwrap();
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus"));
    for (target, seeds) in [
        ("stack_wire_headers", wire_seeds()),
        ("stack_ip_input", ip_seeds()),
        ("stack_tcp_input", tcp_seeds()),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            // Each seed runs through its body as it is written.
            oxnet_stack::fuzzing::run(target, &bytes);
            std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
}
