//! Test-only elements and helpers: a source that pushes the IP packets a
//! test queued (header marks set, as the IP layer sets them) and a sink
//! that keeps what reaches it, around a router built from a configuration.

use crate::wire::{
    Checksum, FlowKey, IpAddress, IpEndpoint, IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags, TcpOptions, TcpPacket,
    TcpRepr, TcpSeqNumber,
};
use oxnet_graph::Router;
use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;

pub use crate::plug::{Flags, Frames};

/// A router from `config` (which may use PlugSource and PlugSink, see
/// `crate::plug`), with simulated time; and the queues: frames to
/// inject, frames that came out.
pub struct Rig {
    pub router: Router,
    pub input: Frames,
    pub output: Frames,
    pub info: Rc<RefCell<crate::tcp::info::TcpInfo>>,
    /// Flags the source sets on the packets it makes from now on.
    pub flags: Flags,
}

impl Rig {
    pub fn new(config: &str) -> Rig {
        let plug = crate::plug::Plug::build("t.click", config).unwrap_or_else(|e| panic!("{e}"));
        Rig {
            router: plug.router,
            input: plug.input,
            output: plug.output,
            info: plug.stack,
            flags: plug.flags,
        }
    }

    /// Injects `frames`, runs the router until it has nothing to do, and
    /// returns what came out.
    pub fn exchange(&mut self, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.input.borrow_mut().extend(frames);
        for _ in 0..10 {
            if !self.router.run_once() {
                break;
            }
        }
        self.output.borrow_mut().drain(..).collect()
    }

    /// Reads `element.handler`; an element not found at the top is
    /// looked for inside the TCPStack compound named `tcp`.
    pub fn handler(&self, spec: &str) -> String {
        let (element, handler) = spec.split_once('.').unwrap();
        let index = self
            .router
            .find(element)
            .or_else(|| self.router.find(&format!("tcp/{element}")))
            .unwrap_or_else(|| panic!("no element {element}"));
        self.router.read_handler(index, handler).unwrap()
    }
}

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// The flow as the server sees it.
pub fn server_key(client_port: u16, server_port: u16) -> FlowKey {
    FlowKey {
        local: IpEndpoint::new(SERVER, server_port),
        remote: IpEndpoint::new(CLIENT, client_port),
    }
}

/// An IPv4 packet carrying `seg` and `payload` from the client to the
/// server, checksums right.
pub fn from_client(seg: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let tcp_len = seg.buffer_len();
    let mut bytes = vec![0; 20 + tcp_len];
    let ip = Ipv4Repr {
        src: CLIENT,
        dst: SERVER,
        protocol: IpProtocol::Tcp,
        payload_len: tcp_len,
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..20]));
    bytes[20 + seg.header_len()..].copy_from_slice(payload);
    seg.emit(
        &mut TcpPacket::new_unchecked(&mut bytes[20..]),
        &IpAddress::V4(CLIENT),
        &IpAddress::V4(SERVER),
    );
    bytes
}

/// A segment header from the client.
pub fn seg(sport: u16, dport: u16, seq: u32, ack: Option<u32>, flags: TcpFlags, payload_len: usize) -> TcpRepr {
    TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: TcpSeqNumber(seq),
        ack: ack.map(TcpSeqNumber),
        flags,
        window: 65535,
        urgent: 0,
        options: TcpOptions::default(),
        payload_len,
    }
}

/// Parses a packet the server sent: its TCP header (checksums verified)
/// and payload.
pub fn to_client(bytes: &[u8]) -> (TcpRepr, Vec<u8>) {
    let ip = Ipv4Packet::new_checked(bytes).expect("an IPv4 packet");
    let repr = Ipv4Repr::parse(&ip, Checksum::Verify).expect("a good IPv4 header");
    assert_eq!((repr.src, repr.dst), (SERVER, CLIENT));
    let tcp = TcpPacket::new_checked(&bytes[20..]).unwrap();
    let seg = TcpRepr::parse(&tcp, &IpAddress::V4(SERVER), &IpAddress::V4(CLIENT), Checksum::Verify)
        .expect("a good TCP segment");
    (seg, tcp.payload().to_vec())
}
