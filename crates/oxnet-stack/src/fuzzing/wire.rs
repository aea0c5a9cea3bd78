//! `stack_wire_headers`: every parser of [`crate::wire`] on the bytes,
//! as a frame (Ethernet, then what its EtherType says, down to the
//! transport header) and each on the bytes as they are; and for every
//! value a parser accepts, emit then parse gives it back (the round trip
//! each wire module promises, STYLE.md).

use crate::wire::ethernet::HEADER_LEN as ETHERNET_LEN;
use crate::wire::{
    ArpPacket, ArpRepr, Checksum, EtherType, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, NdiscOptions, TcpOptions, TcpPacket,
    TcpRepr, UdpPacket, UdpRepr,
};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Addresses for the transport parsers run on the bytes as they are.
const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

/// The target's body.
pub fn wire_headers(data: &[u8]) {
    ethernet(data);
    arp(data);
    ipv4(data);
    ipv6(data);
    let (s4, d4) = (IpAddress::V4(V4_SRC), IpAddress::V4(V4_DST));
    tcp(data, &s4, &d4);
    udp(data, &s4, &d4);
    icmpv4(data);
    icmpv6(data, &V6_SRC, &V6_DST);
    let _ = TcpOptions::parse(data);
    let _ = NdiscOptions::parse(data);
    let _ = Ipv4Repr::parse_quoted(data);
    let _ = Ipv6Repr::parse_quoted(data);
}

/// A frame: the Ethernet header, then its payload by EtherType.
fn ethernet(data: &[u8]) {
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        return;
    };
    let Ok(repr) = EthernetRepr::parse(&frame) else { return };
    let mut buf = vec![0; repr.header_len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let again = EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).expect("an emitted Ethernet header"));
    assert_eq!(again, Ok(repr), "Ethernet: emit then parse");
    let payload = &data[ETHERNET_LEN.min(data.len())..];
    match repr.ethertype {
        EtherType::Arp => arp(payload),
        EtherType::Ipv4 => ipv4(payload),
        EtherType::Ipv6 => ipv6(payload),
        _ => {}
    }
}

fn arp(data: &[u8]) {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let Ok(repr) = ArpRepr::parse(&packet) else { return };
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    let again = ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).expect("an emitted ARP packet"));
    assert_eq!(again, Ok(repr), "ARP: emit then parse");
}

/// An IPv4 packet, then its transport header (first fragments only: a
/// later fragment's data is not a header).
fn ipv4(data: &[u8]) {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = Ipv4Repr::parse(&packet, Checksum::Verify);
    let Ok(repr) = Ipv4Repr::parse(&packet, Checksum::Ignore) else {
        return;
    };
    let payload = packet.payload();
    assert_eq!(
        payload.len(),
        repr.payload_len,
        "IPv4: the payload is total length minus header"
    );
    let mut buf = vec![0; repr.buffer_len()];
    buf[repr.header_len()..].copy_from_slice(payload);
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
    let view = Ipv4Packet::new_checked(&buf[..]).expect("an emitted IPv4 packet");
    assert_eq!(
        Ipv4Repr::parse(&view, Checksum::Verify),
        Ok(repr),
        "IPv4: emit then parse"
    );
    if repr.frag_offset != 0 {
        return;
    }
    let (src, dst) = (IpAddress::V4(repr.src), IpAddress::V4(repr.dst));
    match repr.protocol {
        IpProtocol::Tcp => tcp(payload, &src, &dst),
        IpProtocol::Udp => udp(payload, &src, &dst),
        IpProtocol::Icmp => icmpv4(payload),
        _ => {}
    }
}

/// An IPv6 packet, its extension headers walked to the upper layer.
fn ipv6(data: &[u8]) {
    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let Ok(repr) = Ipv6Repr::parse(&packet) else { return };
    let payload = packet.payload();
    assert_eq!(payload.len(), repr.payload_len, "IPv6: the payload is payload length");
    let mut buf = vec![0; repr.buffer_len()];
    buf[repr.header_len()..].copy_from_slice(payload);
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    let view = Ipv6Packet::new_checked(&buf[..]).expect("an emitted IPv6 packet");
    assert_eq!(Ipv6Repr::parse(&view), Ok(repr), "IPv6: emit then parse");
    let Ok((protocol, offset)) = packet.upper_layer() else {
        return;
    };
    let end = repr.header_len() + repr.payload_len;
    assert!(offset <= end, "IPv6: the upper layer starts inside the packet");
    let upper = &data[offset..end];
    let (src, dst) = (IpAddress::V6(repr.src), IpAddress::V6(repr.dst));
    match protocol {
        IpProtocol::Tcp => tcp(upper, &src, &dst),
        IpProtocol::Udp => udp(upper, &src, &dst),
        IpProtocol::Icmpv6 => icmpv6(upper, &repr.src, &repr.dst),
        _ => {}
    }
}

/// A TCP segment and its options. Emit writes at most four SACK blocks
/// and only as many as fit beside the other options: those are what
/// come back.
fn tcp(data: &[u8], src: &IpAddress, dst: &IpAddress) {
    let Ok(packet) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = TcpRepr::parse(&packet, src, dst, Checksum::Verify);
    let Ok(repr) = TcpRepr::parse(&packet, src, dst, Checksum::Ignore) else {
        return;
    };
    assert_eq!(repr.payload_len, packet.payload().len());
    let mut buf = vec![0; repr.buffer_len()];
    buf[repr.header_len()..].copy_from_slice(packet.payload());
    repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), src, dst);
    let view = TcpPacket::new_checked(&buf[..]).expect("an emitted TCP segment");
    let mut expected = repr;
    let kept = repr.options.sack_blocks_emitted();
    let mut seen = 0;
    for block in expected.options.sack_blocks.iter_mut() {
        if block.is_some() {
            seen += 1;
            if seen > kept {
                *block = None;
            }
        }
    }
    assert_eq!(
        TcpRepr::parse(&view, src, dst, Checksum::Verify),
        Ok(expected),
        "TCP: emit then parse"
    );
}

fn udp(data: &[u8], src: &IpAddress, dst: &IpAddress) {
    let Ok(packet) = UdpPacket::new_checked(data) else {
        return;
    };
    let _ = UdpRepr::parse(&packet, src, dst, Checksum::Verify);
    let Ok(repr) = UdpRepr::parse(&packet, src, dst, Checksum::Ignore) else {
        return;
    };
    let payload = &data[repr.header_len()..repr.buffer_len()];
    let mut buf = vec![0; repr.buffer_len()];
    buf[repr.header_len()..].copy_from_slice(payload);
    repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), src, dst);
    let view = UdpPacket::new_checked(&buf[..]).expect("an emitted UDP datagram");
    assert_eq!(
        UdpRepr::parse(&view, src, dst, Checksum::Verify),
        Ok(repr),
        "UDP: emit then parse"
    );
}

fn icmpv4(data: &[u8]) {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let _ = Icmpv4Repr::parse(&packet, Checksum::Verify);
    let Ok(repr) = Icmpv4Repr::parse(&packet, Checksum::Ignore) else {
        return;
    };
    let mut buf = vec![0; repr.buffer_len()];
    if let Icmpv4Repr::EchoRequest { .. } | Icmpv4Repr::EchoReply { .. } = repr {
        // Echo data is the caller's to put in place.
        buf[repr.header_len()..].copy_from_slice(&data[repr.header_len()..]);
    }
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
    let view = Icmpv4Packet::new_checked(&buf[..]).expect("an emitted ICMP message");
    assert_eq!(
        Icmpv4Repr::parse(&view, Checksum::Verify),
        Ok(repr),
        "ICMP: emit then parse"
    );
}

/// ICMPv6, Neighbor Discovery included (its options with it).
fn icmpv6(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = Icmpv6Repr::parse(&packet, src, dst, Checksum::Verify);
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, Checksum::Ignore) else {
        return;
    };
    let mut buf = vec![0; repr.buffer_len()];
    if let Icmpv6Repr::EchoRequest { .. } | Icmpv6Repr::EchoReply { .. } = repr {
        buf[repr.header_len()..].copy_from_slice(&data[repr.header_len()..]);
    }
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst);
    let view = Icmpv6Packet::new_checked(&buf[..]).expect("an emitted ICMPv6 message");
    assert_eq!(
        Icmpv6Repr::parse(&view, src, dst, Checksum::Verify),
        Ok(repr),
        "ICMPv6: emit then parse"
    );
}
