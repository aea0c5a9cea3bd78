//! UDP through a router: datagrams in, the echo server's answers out.

use crate::tcp::elements::harness::{Rig, CLIENT, SERVER};
use crate::wire::{Checksum, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

const CONFIG: &str = "src :: PlugSource -> udp :: UDPInput -> out :: PlugSink;
UDPOutput -> out;
AppExecutor;
echo :: UDPEchoServer(7);";

fn datagram(dport: u16, payload: &[u8], corrupt: bool) -> Vec<u8> {
    let repr = UdpRepr {
        src_port: 5000,
        dst_port: dport,
        payload_len: payload.len(),
    };
    let mut b = vec![0; 28 + payload.len()];
    Ipv4Repr {
        src: CLIENT,
        dst: SERVER,
        protocol: IpProtocol::Udp,
        payload_len: 8 + payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut b[..20]));
    b[28..].copy_from_slice(payload);
    repr.emit(
        &mut UdpPacket::new_unchecked(&mut b[20..]),
        &IpAddress::V4(CLIENT),
        &IpAddress::V4(SERVER),
    );
    if corrupt {
        let last = b.len() - 1;
        b[last] ^= 1;
    }
    b
}

#[test]
fn datagrams_are_echoed_to_their_sender_and_the_others_counted() {
    let mut rig = Rig::new(CONFIG);
    let out = rig.exchange(vec![
        datagram(7, b"one", false),
        datagram(7, b"two!", false),
        datagram(9, b"nobody", false),
        datagram(7, b"bad", true),
    ]);
    // Output: the datagram for no socket (output 0 of UDPInput), then
    // the two echoes.
    let mut echoes = Vec::new();
    for bytes in &out {
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let repr = Ipv4Repr::parse(&ip, Checksum::Verify).unwrap();
        if repr.src == SERVER {
            assert_eq!(repr.dst, CLIENT);
            let udp = UdpPacket::new_checked(ip.payload()).unwrap();
            let r = UdpRepr::parse(&udp, &IpAddress::V4(SERVER), &IpAddress::V4(CLIENT), Checksum::Verify).unwrap();
            assert_eq!((r.src_port, r.dst_port), (7, 5000));
            echoes.push(udp.payload().to_vec());
        }
    }
    assert_eq!(echoes, [b"one".to_vec(), b"two!".to_vec()]);
    assert_eq!(out.len(), 3, "the echoes and the datagram for port 9");
    assert_eq!(rig.handler("udp.delivered"), "2");
    assert_eq!(rig.handler("udp.no_socket"), "1");
    assert_eq!(rig.handler("udp.bad_datagrams"), "1");
    assert_eq!(rig.handler("echo.datagrams"), "2");
}

#[test]
fn a_full_socket_queue_drops_and_counts() {
    let mut rig = Rig::new("src :: PlugSource -> udp :: UDPInput -> out :: PlugSink;");
    let udp = super::info();
    let _socket = super::socket::UdpSocket::bind(&udp, crate::wire::IpEndpoint::new(SERVER, 7)).unwrap();
    let frames = (0..super::DEFAULT_QUEUE + 5)
        .map(|_| datagram(7, b"x", false))
        .collect();
    rig.exchange(frames);
    assert_eq!(rig.handler("udp.queue_drops"), "5");
    assert_eq!(
        udp.borrow().sockets.values().next().unwrap().queue.len(),
        super::DEFAULT_QUEUE
    );
}

/// UDPOutput(CHECKSUM_OFFLOAD true): the echo leaves its UDP checksum to
/// the device (the field is 0 here, where software would have summed
/// it), and the device's checksum (the driver's software one, the same
/// bytes) makes it valid.
#[test]
fn checksum_offload_leaves_the_udp_checksum_to_the_device() {
    let mut rig = Rig::new(&CONFIG.replace("UDPOutput ->", "UDPOutput(CHECKSUM_OFFLOAD true) ->"));
    let out = rig.exchange(vec![datagram(7, b"offloaded", false)]);
    assert_eq!(out.len(), 1);
    let ip = &out[0];
    assert_eq!(&ip[26..28], &[0, 0], "no checksum computed here");
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(ip);
    let request = oxnet_driver::offload::offload_for(
        &frame,
        oxnet_driver::packet::TX_IP_CSUM | oxnet_driver::packet::TX_UDP_CSUM,
        0,
    )
    .unwrap();
    oxnet_driver::offload::fill_checksums(&mut frame, &request).unwrap();
    let udp = UdpPacket::new_checked(&frame[34..]).unwrap();
    let r = UdpRepr::parse(&udp, &IpAddress::V4(SERVER), &IpAddress::V4(CLIENT), Checksum::Verify).unwrap();
    assert_eq!((r.src_port, r.dst_port, udp.payload()), (7, 5000, &b"offloaded"[..]));
}
