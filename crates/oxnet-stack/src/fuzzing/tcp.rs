//! `stack_tcp_input`: the whole TCP input path against live state. A
//! router with TCPStack (both paths and the timers) has a listener on
//! port 80 and one connection established by a handshake; the fuzz bytes
//! are then a sequence of operations:
//!
//! * a segment from the client: flags, source port (the established
//!   connection, a new connection to the listener, or a closed port),
//!   sequence and acknowledgment numbers relative to the flow's RCV.NXT
//!   and SND.UNA (0: in sequence, a duplicate ACK), window, options
//!   (MSS, window scale, SACK-permitted, timestamps, a SACK block),
//!   payload length;
//! * time moving forward (the timers fire);
//! * the application: read, write, shut down, drop a socket, accept;
//! * a burst: one segment sent up to 8160 times (a flood of small
//!   segments).
//!
//! After every operation: no panic; every packet out is a valid IPv4
//! packet from the server to the client with a valid TCP segment
//! (checksums verified); the TCB table and each TCB's queues within their
//! limits (receive queue within the window, out-of-order queue within
//! TCPReordering's bound and the window, send buffer within its limit);
//! no timer left behind its deadline, and the timer set no bigger than
//! three per connection per moment time stood at; the router's packet
//! pool never empty (what the stack holds is bounded by windows and
//! queues far below the pool's size: an empty pool means buffers kept
//! beyond those bounds).

use super::rig::Rig;
use super::Reader;
use crate::anno::TcbRef;
use crate::tcp::info::TcpInfo;
use crate::tcp::socket::{Stack, TcpListener, TcpStream};
use crate::wire::{
    Checksum, FlowKey, IpAddress, IpEndpoint, IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags, TcpOptions, TcpPacket,
    TcpRepr, TcpSeqNumber,
};
use std::collections::HashSet;
use std::net::Ipv4Addr;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The established connection's client port.
const CPORT: u16 = 40000;
/// New connections come from ports NEW_PORT .. NEW_PORT + NEW_PORTS.
const NEW_PORT: u16 = 40001;
const NEW_PORTS: u16 = 8;
/// Operations run at most (an input longer than this is cut).
const MAX_OPS: usize = 512;
/// The settings that make the limits reachable in a short input.
const RECV_BUFFER: u32 = 4096;
const SEND_BUFFER: u32 = 8192;
const BACKLOG: usize = 4;
/// TCPReordering's default MAX_SEGMENTS (TCPStack does not set it).
const MAX_HELD: usize = 256;
/// Largest payload a segment carries (one buffer of the router's pool
/// holds headers and all).
const MAX_PAYLOAD: usize = 1400;

/// The target's body.
pub fn tcp_input(data: &[u8]) {
    let mut f = Fuzz::new();
    let mut r = Reader::new(data);
    let mut ops = 0;
    while !r.is_empty() && ops < MAX_OPS {
        f.step(&mut r);
        ops += 1;
    }
    // Let every timer run out: retransmissions give up, TIME-WAIT ends.
    for _ in 0..8 {
        let out = f.rig.advance(30_000_000);
        f.settled(out, true);
    }
}

struct Fuzz {
    rig: Rig,
    info: Stack,
    listener: Option<TcpListener>,
    streams: Vec<TcpStream>,
    /// The established connection's numbers as the client last knew
    /// them (RCV.NXT and SND.UNA), for segments of a flow without a TCB.
    client_seq: TcpSeqNumber,
    client_ack: TcpSeqNumber,
    /// The client's timestamp clock (ms).
    ts_clock: u32,
    /// Moments time stood at (for the bound on the timer set).
    moments: usize,
    /// Every TCB seen, to bound the timer set.
    tcbs_seen: HashSet<TcbRef>,
}

impl Fuzz {
    /// The router, the listener and the handshake of the connection from
    /// CPORT (MSS 1400, window shift 7, SACK, timestamps), accepted.
    fn new() -> Fuzz {
        let rig = Rig::new("src :: FuzzSource0 -> tcp :: TCPStack -> out :: FuzzSink;");
        // Right after the build, on this thread: this router's TCPInfo.
        let info = crate::elements::shared::<TcpInfo>();
        {
            let mut i = info.borrow_mut();
            i.settings.tcb.recv_buffer = RECV_BUFFER;
            i.settings.tcb.send_buffer = SEND_BUFFER;
            i.settings.syn_backlog = BACKLOG;
            i.settings.msl_us = 1_000_000;
        }
        let listener = TcpListener::bind(&info, IpEndpoint::new(SERVER, 80), BACKLOG).expect("listen");
        let mut f = Fuzz {
            rig,
            info,
            listener: Some(listener),
            streams: Vec::new(),
            client_seq: TcpSeqNumber(1001),
            client_ack: TcpSeqNumber(0),
            ts_clock: 100,
            moments: 1,
            tcbs_seen: HashSet::new(),
        };
        let mut syn = segment(CPORT, 80, TcpSeqNumber(1000), None, TcpFlags::SYN, 65535);
        syn.options = TcpOptions {
            mss: Some(1400),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((100, 0)),
            ..TcpOptions::default()
        };
        f.send(&syn);
        let out = f.rig.settle();
        assert_eq!(out.len(), 1, "one SYN-ACK");
        let (syn_ack, _) = parse_out(&out[0]);
        let iss = syn_ack.seq;
        let mut ack = segment(CPORT, 80, TcpSeqNumber(1001), Some(iss + 1), TcpFlags::empty(), 65535);
        ack.options.timestamps = Some((101, 0));
        f.send(&ack);
        f.rig.settle();
        let stream = f
            .listener
            .as_ref()
            .unwrap()
            .try_accept()
            .expect("the handshake's connection");
        f.streams.push(stream);
        f.client_ack = iss + 1;
        f.check(false);
        f
    }

    /// One operation.
    fn step(&mut self, r: &mut Reader) {
        let op = r.u8();
        match op % 8 {
            0..=2 => self.segment_from_client(r),
            3 => {
                let b = r.u8();
                // 1 µs to ~67 s, in steps of growing size.
                let us = ((b & 0x1f) as u64 + 1) << ((b >> 5) * 3);
                self.ts_clock = self.ts_clock.wrapping_add((us / 1000) as u32);
                self.moments += 1;
                let out = self.rig.advance(us);
                self.settled(out, true);
                return;
            }
            4 => {
                let len = r.u8() as usize * 16 + 1;
                if let Some(s) = self.pick(r.u8()) {
                    let mut buf = vec![0; len];
                    let _ = s.try_read(&mut buf);
                }
            }
            5 => {
                let len = (r.u16() % 12_000) as usize;
                if let Some(s) = self.pick(r.u8()) {
                    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
                    let _ = s.try_write(&data);
                }
            }
            6 => {
                let how = r.u8();
                if !self.streams.is_empty() {
                    let at = how as usize % self.streams.len();
                    if how & 0x80 != 0 {
                        drop(self.streams.swap_remove(at));
                    } else {
                        let _ = self.streams[at].shutdown_write();
                    }
                }
            }
            _ => {
                let what = r.u8();
                match what % 4 {
                    0 if self.streams.len() < 8 => {
                        if let Some(l) = &self.listener {
                            if let Ok(s) = l.try_accept() {
                                self.streams.push(s);
                            }
                        }
                    }
                    1 => {
                        if let Some(s) = self.pick(r.u8()) {
                            s.set_nodelay(what & 0x80 != 0);
                        }
                    }
                    2 if what & 0x80 != 0 => self.listener = None,
                    3 => self.burst(r),
                    _ => {}
                }
            }
        }
        // Time stood still: the timers had nothing due.
        let out = self.rig.settle();
        self.settled(out, false);
    }

    /// A flood: one segment (as [`Fuzz::segment_from_client`] reads it)
    /// sent up to 8160 times, its numbers relative to the flow's state
    /// at each send (so data in sequence stays in sequence).
    fn burst(&mut self, r: &mut Reader) {
        let count = r.u8() as usize * 32;
        let spec = *r;
        for _ in 0..count {
            let mut again = spec;
            self.segment_from_client(&mut again);
            // One at a time: the next one's numbers follow this one's
            // effect (in sequence data advances RCV.NXT).
            let out = self.rig.settle();
            self.settled(out, false);
        }
        // The reader moves past the segment's bytes.
        self.segment_from_client(r);
    }

    fn pick(&self, b: u8) -> Option<&TcpStream> {
        match self.streams.len() {
            0 => None,
            n => Some(&self.streams[b as usize % n]),
        }
    }

    /// A segment built from the fuzz bytes (see the module's doc).
    fn segment_from_client(&mut self, r: &mut Reader) {
        let flags = r.u8();
        let port = r.u8();
        let shift = (port >> 5) & 7;
        let seq_delta = (r.u16() as i16 as i32) << shift;
        let ack_delta = (r.u16() as i16 as i32) << shift;
        let window = r.u16();
        let options = r.u8();
        // Under 64: that many bytes; above, steps of 8 up to MAX_PAYLOAD.
        let payload_len = match r.u8() as usize {
            b if b < 64 => b,
            b => ((b - 63) * 8).min(MAX_PAYLOAD),
        };
        let (sport, dport) = match port & 3 {
            0 | 1 => (CPORT, 80),
            2 => (NEW_PORT + (port >> 2) as u16 % NEW_PORTS, 80),
            _ => (CPORT + 100 + (port >> 2) as u16 % 4, 81),
        };
        // Relative to the flow's TCB if it has one (RCV.NXT, SND.UNA: in
        // sequence, acknowledging nothing new), else to what the client
        // last knew of the established connection.
        let key = FlowKey {
            local: IpEndpoint::new(SERVER, dport),
            remote: IpEndpoint::new(CLIENT, sport),
        };
        let (seq_base, ack_base) = {
            let info = self.info.borrow();
            match info.lookup(&key).and_then(|r| info.tcbs.get(r)) {
                Some(tcb) => (tcb.rcv_nxt, tcb.snd_una),
                None => (self.client_seq, self.client_ack),
            }
        };
        let seq = TcpSeqNumber(seq_base.0.wrapping_add(seq_delta as u32));
        let ack = TcpSeqNumber(ack_base.0.wrapping_add(ack_delta as u32));
        let mut seg = segment(
            sport,
            dport,
            seq,
            (flags & 0x10 != 0).then_some(ack),
            TcpFlags::from_bits(flags).without(TcpFlags::ACK),
            window,
        );
        let o = &mut seg.options;
        if options & 1 != 0 {
            o.mss = Some(r.u16());
        }
        if options & 2 != 0 {
            o.window_scale = Some(r.u8() % 16);
        }
        o.sack_permitted = options & 4 != 0;
        if options & 8 != 0 {
            let tsval = self.ts_clock.wrapping_add(r.u8() as u32).wrapping_sub(128);
            o.timestamps = Some((tsval, r.u32()));
        }
        if options & 16 != 0 {
            let left = self.client_ack + r.u16() as usize;
            o.sack_blocks[0] = Some((left, left + r.u16() as usize));
        }
        seg.payload_len = payload_len;
        self.send(&seg);
    }

    /// Queues `seg` from the client, its payload a byte pattern.
    fn send(&self, seg: &TcpRepr) {
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
        for (i, b) in bytes[20 + seg.header_len()..].iter_mut().enumerate() {
            *b = b'a' + (i % 26) as u8;
        }
        seg.emit(
            &mut TcpPacket::new_unchecked(&mut bytes[20..]),
            &IpAddress::V4(CLIENT),
            &IpAddress::V4(SERVER),
        );
        self.rig.queue(0, bytes, Some((0, 20)));
    }

    /// Checks what came out, then the state; follows the connection's
    /// numbers.
    fn settled(&mut self, out: Vec<Vec<u8>>, timers_ran: bool) {
        for bytes in &out {
            parse_out(bytes);
        }
        self.check(timers_ran);
        let info = self.info.borrow();
        let key = FlowKey {
            local: IpEndpoint::new(SERVER, 80),
            remote: IpEndpoint::new(CLIENT, CPORT),
        };
        if let Some(tcb) = info.lookup(&key).and_then(|r| info.tcbs.get(r)) {
            self.client_seq = tcb.rcv_nxt;
            self.client_ack = tcb.snd_una;
        }
    }

    /// The limits (see the module's doc).
    fn check(&mut self, timers_ran: bool) {
        let info = self.info.borrow();
        // One established connection, the new ports', each at most once.
        assert!(
            info.tcbs.len() <= 1 + NEW_PORTS as usize + 8,
            "TCB table: {} TCBs",
            info.tcbs.len()
        );
        assert!(info.flows.len() <= info.tcbs.len(), "flow entries without a TCB");
        for (key, &r) in &info.flows {
            self.tcbs_seen.insert(r);
            let tcb = info.tcbs.get(r).expect("a flow entry's TCB exists");
            assert_eq!(tcb.key, *key, "the flow entry's TCB is that flow's");
            let queued: usize = tcb.recv_queue.iter().map(|p| p.len()).sum();
            assert_eq!(queued, tcb.recv_queued, "recv_queued counts the receive queue");
            assert!(
                tcb.recv_queued as u64 <= tcb.rcv_wnd as u64,
                "receive queue {} over the window {}",
                tcb.recv_queued,
                tcb.rcv_wnd
            );
            assert!(tcb.ooo.len() <= MAX_HELD, "out-of-order queue: {}", tcb.ooo.len());
            let right_edge = tcb.rcv_nxt + tcb.rcv_window() as usize;
            for held in &tcb.ooo {
                assert!(
                    held.end - right_edge <= 1,
                    "held data past the window: ends {} , RCV.NXT {}, window {}",
                    held.end,
                    tcb.rcv_nxt,
                    tcb.rcv_window()
                );
            }
            assert!(
                tcb.send_buffer.len() <= tcb.send_buffer_limit,
                "send buffer {} over its limit {}",
                tcb.send_buffer.len(),
                tcb.send_buffer_limit
            );
        }
        if timers_ran {
            let now = self.rig.router.now_us();
            if let Some(&(at, _, kind)) = info.timers.first() {
                assert!(at > now, "a {kind:?} timer due at {at} still waits at {now}");
            }
        }
        // What the stack may hold is bounded (receive window, out-of-order
        // queue, per connection), far under the router's pool: a buffer
        // the source could not get is one kept beyond those bounds.
        assert_eq!(*self.rig.alloc_failures.borrow(), 0, "the router's pool ran dry");
        // An entry is added per arming and leaves at its deadline: at most
        // one per timer kind, connection and moment time stood at.
        let bound = 3 * self.tcbs_seen.len().max(1) * self.moments;
        assert!(
            info.timers.len() <= bound,
            "{} timer entries (bound {bound})",
            info.timers.len()
        );
    }
}

fn segment(
    sport: u16,
    dport: u16,
    seq: TcpSeqNumber,
    ack: Option<TcpSeqNumber>,
    flags: TcpFlags,
    window: u16,
) -> TcpRepr {
    TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq,
        ack,
        flags,
        window,
        urgent: 0,
        options: TcpOptions::default(),
        payload_len: 0,
    }
}

/// A packet the server sent: a valid IPv4 packet to the client carrying a
/// valid TCP segment (both checksums verified). Returns the segment and
/// its payload.
fn parse_out(bytes: &[u8]) -> (TcpRepr, Vec<u8>) {
    let ip = Ipv4Packet::new_checked(bytes).unwrap_or_else(|e| panic!("out: not IPv4 ({e}): {bytes:02x?}"));
    let repr = Ipv4Repr::parse(&ip, Checksum::Verify).unwrap_or_else(|e| panic!("out: bad IPv4 header ({e})"));
    assert_eq!(
        (repr.src, repr.dst, repr.protocol),
        (SERVER, CLIENT, IpProtocol::Tcp),
        "out: from the server to the client, TCP"
    );
    assert_eq!(ip.total_len() as usize, bytes.len(), "out: no bytes past the IP packet");
    let (src, dst) = (IpAddress::V4(SERVER), IpAddress::V4(CLIENT));
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap_or_else(|e| panic!("out: not TCP ({e})"));
    let seg = TcpRepr::parse(&tcp, &src, &dst, Checksum::Verify).unwrap_or_else(|e| panic!("out: bad TCP ({e})"));
    (seg, tcp.payload().to_vec())
}
