//! Test-only elements and helpers: a source that pushes the IP packets a
//! test queued (header marks set, as the IP layer sets them) and a sink
//! that keeps what reaches it, around a router built from a configuration.

use crate::wire::{
    Checksum, FlowKey, IpAddress, IpEndpoint, IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags, TcpOptions, TcpPacket,
    TcpRepr, TcpSeqNumber,
};
use oxnet_driver::PacketBatch;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_0, PUSH};
use oxnet_graph::{Ctx, Registry, Router};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::rc::Rc;

pub type Frames = Rc<RefCell<VecDeque<Vec<u8>>>>;

/// Metadata flags the source sets on every packet it makes (a device's
/// receive checksum verdict, for instance).
pub type Flags = Rc<std::cell::Cell<u32>>;

struct TestSource(Frames, Flags);

impl Element for TestSource {
    fn class_name(&self) -> &'static str {
        "TestSource"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let mut batch = PacketBatch::with_capacity(32);
        while let Some(bytes) = self.0.borrow_mut().pop_front() {
            let mut p = ctx.pool().alloc().expect("test pool");
            p.set_len(bytes.len()).unwrap();
            p.copy_from_slice(&bytes);
            // An IP packet gets its header marks as the IP layer would set
            // them; an Ethernet frame (type at 12..14) goes as it is, for
            // the IP layer's own input elements.
            if bytes[0] >> 4 == 4 {
                let ihl = ((bytes[0] & 0x0f) as usize) * 4;
                p.set_network_header(0, ihl).unwrap();
            } else if bytes[0] >> 4 == 6 && bytes.len() >= 40 {
                p.set_network_header(0, 40).unwrap();
            }
            p.meta_mut().flags |= self.1.get();
            batch.push(p);
        }
        let worked = !batch.is_empty();
        ctx.push(0, batch);
        worked
    }
}

struct TestSink(Frames);

impl Element for TestSink {
    fn class_name(&self) -> &'static str {
        "TestSink"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        for p in batch.iter() {
            self.0.borrow_mut().push_back(p.to_vec());
        }
        batch.clear();
    }
}

struct WithTest {
    input: Frames,
    output: Frames,
    flags: Flags,
}

impl Registry for WithTest {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        match class {
            "TestSource" => Some(Box::new(TestSource(self.input.clone(), self.flags.clone()))),
            "TestSink" => Some(Box::new(TestSink(self.output.clone()))),
            _ => oxnet_graph::elements::Standard.create(class),
        }
    }
}

/// A router from `config` (which may use TestSource and TestSink), with
/// simulated time; and the queues: frames to inject, frames that came out.
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
        crate::elements::register();
        let input = Frames::default();
        let output = Frames::default();
        let flags = Flags::default();
        let registry = WithTest {
            input: input.clone(),
            output: output.clone(),
            flags: flags.clone(),
        };
        let flat = oxnet_graph::lang::compile("t.click", config, &[], &|c: &str| registry.create(c).is_some())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut router = Router::build(&flat, &registry).unwrap_or_else(|e| panic!("{e}"));
        router.use_simulated_time();
        // Right after the build, on this thread: this router's TCPInfo.
        let info = crate::elements::shared::<crate::tcp::info::TcpInfo>();
        Rig {
            router,
            input,
            output,
            info,
            flags,
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
