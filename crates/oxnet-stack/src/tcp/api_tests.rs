//! The application APIs end to end on a router with the stack, in
//! simulated time: epoll (`super::epoll`), zero-copy (`super::zerocopy`)
//! and the poll-style I/O with its traits (`super::io_traits`). The peer
//! is a hand-written client (`elements::harness`), or a second router.

use super::elements::harness::*;
use super::epoll::*;
use super::socket::{TcpListener, TcpStream};
use crate::wire::{IpEndpoint, TcpFlags, TcpSeqNumber};

const CPORT: u16 = 40000;

/// The stack at SERVER listening on port 80 through a socket, and the
/// router's executor.
fn server() -> (Rig, TcpListener) {
    let rig = Rig::new("src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink; AppExecutor;");
    let listener = TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, 80), 16).unwrap();
    (rig, listener)
}

/// The client's SYN and the handshake's ACK; returns the server's ISS.
/// The client's first data byte is 1001.
fn handshake(rig: &mut Rig) -> TcpSeqNumber {
    let out = rig.exchange(vec![from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[])]);
    let iss = to_client(&out[0]).0.seq;
    let ack = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 0);
    assert!(rig.exchange(vec![from_client(&ack, &[])]).is_empty());
    iss
}

/// A connection accepted through the listener.
fn accepted() -> (Rig, TcpListener, TcpStream, TcpSeqNumber) {
    let (mut rig, listener) = server();
    let iss = handshake(&mut rig);
    let stream = listener.try_accept().expect("established");
    (rig, listener, stream, iss)
}

/// The client sends `payload` at `seq`, acknowledging `ack`; returns
/// what the server answered.
fn client_data(rig: &mut Rig, seq: u32, ack: TcpSeqNumber, flags: TcpFlags, payload: &[u8]) -> Vec<Vec<u8>> {
    rig.exchange(vec![from_client(
        &seg(CPORT, 80, seq, Some(ack.0), flags, payload.len()),
        payload,
    )])
}

// ---- epoll ----

#[test]
fn a_listener_is_readable_while_a_connection_waits_to_be_accepted() {
    let (mut rig, listener) = server();
    let mut ep = Epoll::new();
    ep.ctl(EpollOp::Add, &listener, EPOLLIN, 7).unwrap();
    assert_eq!(ep.ctl(EpollOp::Add, &listener, EPOLLIN, 7), Err(libc::EEXIST));
    assert!(ep.try_wait(8).is_empty(), "nothing to accept yet");
    // A SYN alone is not a connection to accept.
    let out = rig.exchange(vec![from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[])]);
    assert!(ep.try_wait(8).is_empty());
    let iss = to_client(&out[0]).0.seq;
    let ack = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 0);
    rig.exchange(vec![from_client(&ack, &[])]);
    assert_eq!(ep.try_wait(8), [(EPOLLIN, 7)]);
    assert_eq!(ep.try_wait(8), [(EPOLLIN, 7)], "level-triggered: still there");
    let _stream = listener.try_accept().unwrap();
    assert!(ep.try_wait(8).is_empty(), "accepted: nothing left");
}

#[test]
fn level_triggered_reports_again_edge_triggered_only_on_new_data() {
    let (mut rig, _l, stream, iss) = accepted();
    let (mut lt, mut et) = (Epoll::new(), Epoll::new());
    lt.ctl(EpollOp::Add, &stream, EPOLLIN, 1).unwrap();
    et.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLET, 2).unwrap();
    assert!(lt.try_wait(8).is_empty() && et.try_wait(8).is_empty());
    client_data(&mut rig, 1001, iss + 1, TcpFlags::PSH, b"hello");
    assert_eq!(lt.try_wait(8), [(EPOLLIN, 1)]);
    assert_eq!(et.try_wait(8), [(EPOLLIN, 2)]);
    // Nothing read: level-triggered says so again, edge-triggered not.
    assert_eq!(lt.try_wait(8), [(EPOLLIN, 1)]);
    assert!(et.try_wait(8).is_empty());
    // Part read: the same.
    let mut buf = [0; 2];
    assert_eq!(stream.try_read(&mut buf), Ok(2));
    assert_eq!(lt.try_wait(8), [(EPOLLIN, 1)]);
    assert!(et.try_wait(8).is_empty());
    // New data is a new edge.
    client_data(&mut rig, 1006, iss + 1, TcpFlags::PSH, b"!");
    assert_eq!(et.try_wait(8), [(EPOLLIN, 2)]);
    assert!(et.try_wait(8).is_empty());
    // All read: neither reports.
    let mut buf = [0; 16];
    assert_eq!(stream.try_read(&mut buf), Ok(4));
    assert_eq!(&buf[..4], b"llo!");
    assert!(lt.try_wait(8).is_empty());
    assert!(et.try_wait(8).is_empty());
}

#[test]
fn the_peers_fin_is_epollrdhup_and_our_close_after_it_epollhup() {
    let (mut rig, _l, stream, iss) = accepted();
    let mut ep = Epoll::new();
    ep.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLRDHUP | EPOLLET, 3)
        .unwrap();
    assert!(ep.try_wait(8).is_empty(), "writable, but EPOLLOUT not asked for");
    client_data(&mut rig, 1001, iss + 1, TcpFlags::FIN, &[]);
    assert_eq!(ep.try_wait(8), [(EPOLLIN | EPOLLRDHUP, 3)]);
    assert!(ep.try_wait(8).is_empty(), "edge-triggered: once");
    let mut buf = [0; 4];
    assert_eq!(stream.try_read(&mut buf), Ok(0), "the end");
    // Level-triggered with EPOLLOUT: our shutdown closes the other
    // direction, both closed is EPOLLHUP.
    let mut lt = Epoll::new();
    lt.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 4)
        .unwrap();
    assert_eq!(lt.try_wait(8), [(EPOLLIN | EPOLLOUT | EPOLLRDHUP, 4)]);
    stream.shutdown_write().unwrap();
    assert_eq!(lt.try_wait(8), [(EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP, 4)]);
}

#[test]
fn epollout_comes_back_once_a_full_send_buffer_drains() {
    let (mut rig, _l, stream, iss) = accepted();
    let r = rig.info.borrow().lookup(&server_key(CPORT, 80)).unwrap();
    rig.info.borrow_mut().tcbs.get_mut(r).unwrap().send_buffer_limit = 1000;
    let (mut lt, mut et) = (Epoll::new(), Epoll::new());
    lt.ctl(EpollOp::Add, &stream, EPOLLOUT, 5).unwrap();
    et.ctl(EpollOp::Add, &stream, EPOLLOUT | EPOLLET, 6).unwrap();
    assert_eq!(lt.try_wait(8), [(EPOLLOUT, 5)], "room at first");
    assert_eq!(et.try_wait(8), [(EPOLLOUT, 6)], "ready when added: reported once");
    assert!(et.try_wait(8).is_empty());
    assert_eq!(stream.try_write(&[7; 1500]), Ok(1000));
    assert_eq!(stream.try_write(&[7; 1]), Err(libc::EAGAIN));
    assert!(lt.try_wait(8).is_empty(), "full");
    // The data goes out (536-byte segments: no MSS option from the
    // client); an ACK of part of it makes room.
    let out = rig.exchange(vec![]);
    let sent: usize = out.iter().map(|b| to_client(b).1.len()).sum();
    assert_eq!(sent, 1000);
    assert!(lt.try_wait(8).is_empty() && et.try_wait(8).is_empty());
    client_data(&mut rig, 1001, iss + 1 + 536, TcpFlags::empty(), &[]);
    assert_eq!(lt.try_wait(8), [(EPOLLOUT, 5)]);
    assert_eq!(et.try_wait(8), [(EPOLLOUT, 6)]);
    assert!(et.try_wait(8).is_empty(), "edge-triggered: once per ACK");
    assert_eq!(lt.try_wait(8), [(EPOLLOUT, 5)]);
    client_data(&mut rig, 1001, iss + 1 + 1000, TcpFlags::empty(), &[]);
    assert_eq!(et.try_wait(8), [(EPOLLOUT, 6)], "the next ACK is a new edge");
}

#[test]
fn a_reset_is_epollerr_and_epollhup_with_everything_else() {
    let (mut rig, _l, stream, iss) = accepted();
    let (mut only_in, mut all) = (Epoll::new(), Epoll::new());
    only_in.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLET, 8).unwrap();
    all.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 9)
        .unwrap();
    assert_eq!(all.try_wait(8), [(EPOLLOUT, 9)]);
    assert!(only_in.try_wait(8).is_empty());
    // A RST at RCV.NXT ends the connection (RFC 9293 §3.10.7.4, RFC 5961
    // §3.2).
    client_data(&mut rig, 1001, iss + 1, TcpFlags::RST, &[]);
    // EPOLLERR and EPOLLHUP come whether asked for or not.
    assert_eq!(only_in.try_wait(8), [(EPOLLIN | EPOLLERR | EPOLLHUP, 8)]);
    assert_eq!(
        all.try_wait(8),
        [(EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLERR | EPOLLHUP, 9)]
    );
    let mut buf = [0; 4];
    assert_eq!(stream.try_read(&mut buf), Err(libc::ECONNRESET));
}

#[test]
fn del_stops_the_reports_and_oneshot_waits_for_mod() {
    let (mut rig, _l, stream, iss) = accepted();
    let mut ep = Epoll::new();
    ep.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLONESHOT, 10).unwrap();
    client_data(&mut rig, 1001, iss + 1, TcpFlags::PSH, b"a");
    assert_eq!(ep.try_wait(8), [(EPOLLIN, 10)]);
    assert!(ep.try_wait(8).is_empty(), "one shot");
    client_data(&mut rig, 1002, iss + 1, TcpFlags::PSH, b"b");
    assert!(ep.try_wait(8).is_empty(), "disabled until MOD");
    ep.ctl(EpollOp::Mod, &stream, EPOLLIN, 11).unwrap();
    assert_eq!(ep.try_wait(8), [(EPOLLIN, 11)], "MOD looks at once, with the new data");
    ep.ctl(EpollOp::Del, &stream, 0, 0).unwrap();
    assert!(ep.is_empty());
    assert!(ep.try_wait(8).is_empty());
    client_data(&mut rig, 1003, iss + 1, TcpFlags::PSH, b"c");
    assert!(ep.try_wait(8).is_empty());
    assert_eq!(ep.ctl(EpollOp::Del, &stream, 0, 0), Err(libc::ENOENT));
    assert_eq!(ep.ctl(EpollOp::Mod, &stream, EPOLLIN, 0), Err(libc::ENOENT));
    // A dropped socket is forgotten by its source.
    ep.ctl(EpollOp::Add, &stream, EPOLLIN, 12).unwrap();
    let (_, source) = stream.epoll_source();
    assert_eq!(ep.forget(source), Ok(()));
    assert_eq!(ep.forget(source), Err(libc::ENOENT));
    // The waits left the TCB's events.
    let r = rig.info.borrow().lookup(&server_key(CPORT, 80)).unwrap();
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(r).unwrap();
    assert_eq!((tcb.readable.waiters(), tcb.writable.waiters()), (0, 0));
}

#[test]
fn max_events_limits_a_wait_and_the_rest_come_next() {
    let (mut rig, listener) = server();
    let mut ep = Epoll::new();
    ep.ctl(EpollOp::Add, &listener, EPOLLIN, 100).unwrap();
    let iss = handshake(&mut rig);
    let stream = listener.try_accept().unwrap();
    ep.ctl(EpollOp::Add, &stream, EPOLLOUT, 200).unwrap();
    client_data(&mut rig, 1001, iss + 1, TcpFlags::PSH, b"x");
    // The listener has nothing; the stream is writable.
    assert_eq!(ep.try_wait(1), [(EPOLLOUT, 200)]);
    ep.ctl(EpollOp::Mod, &stream, EPOLLOUT | EPOLLIN, 201).unwrap();
    assert_eq!(ep.try_wait(1), [(EPOLLIN | EPOLLOUT, 201)]);
    assert_eq!(ep.len(), 2);
}

#[test]
fn an_async_wait_is_woken_by_the_stacks_event() {
    let (mut rig, listener) = server();
    let exec = crate::app::executor();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    exec.borrow().spawn(async move {
        let mut ep = Epoll::new();
        ep.ctl(EpollOp::Add, &listener, EPOLLIN, 42).unwrap();
        let events = ep.wait(8).await;
        let stream = listener.try_accept().unwrap();
        log.borrow_mut().push(events);
        ep.ctl(EpollOp::Add, &stream, EPOLLIN | EPOLLRDHUP | EPOLLET, 43)
            .unwrap();
        loop {
            let events = ep.wait(8).await;
            let mut buf = [0; 64];
            let n = stream.try_read(&mut buf).unwrap();
            log.borrow_mut().push(events);
            if n == 0 {
                break;
            }
        }
    });
    rig.exchange(vec![]);
    assert!(seen.borrow().is_empty(), "the task waits");
    let iss = handshake(&mut rig);
    assert_eq!(*seen.borrow(), [vec![(EPOLLIN, 42)]]);
    client_data(&mut rig, 1001, iss + 1, TcpFlags::PSH, b"hi");
    client_data(&mut rig, 1003, iss + 1, TcpFlags::FIN, &[]);
    assert_eq!(
        *seen.borrow(),
        [
            vec![(EPOLLIN, 42)],
            vec![(EPOLLIN, 43)],
            vec![(EPOLLIN | EPOLLRDHUP, 43)]
        ]
    );
    assert_eq!(exec.borrow().len(), 0, "the task ended");
}

#[test]
fn a_wait_looks_only_at_sockets_that_had_events() {
    let (mut rig, _l, stream, iss) = accepted();
    let listeners: Vec<TcpListener> = (1000..1100)
        .map(|port| TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, port), 4).unwrap())
        .collect();
    let mut ep = Epoll::new();
    for (i, l) in listeners.iter().enumerate() {
        ep.ctl(EpollOp::Add, l, EPOLLIN, i as u64).unwrap();
    }
    ep.ctl(EpollOp::Add, &stream, EPOLLIN, 500).unwrap();
    assert_eq!(ep.looks(), 101, "one look each when added");
    for _ in 0..10 {
        assert!(ep.try_wait(8).is_empty());
    }
    assert_eq!(ep.looks(), 101, "idle sockets cost nothing");
    client_data(&mut rig, 1001, iss + 1, TcpFlags::PSH, b"data");
    assert_eq!(ep.try_wait(8), [(EPOLLIN, 500)]);
    assert_eq!(ep.looks(), 102, "the one socket with an event");
}

#[test]
fn an_active_open_is_writable_once_the_handshake_completes() {
    let (mut rig, _l) = server();
    let stream = TcpStream::connect(&rig.info, IpEndpoint::new(SERVER, 45000), IpEndpoint::new(CLIENT, 9000)).unwrap();
    let mut ep = Epoll::new();
    ep.ctl(EpollOp::Add, &stream, EPOLLOUT | EPOLLIN | EPOLLET, 1).unwrap();
    let (syn, _) = to_client(&rig.exchange(vec![])[0]);
    assert!(ep.try_wait(8).is_empty(), "SYN-SENT: neither readable nor writable");
    let syn_ack = seg(9000, 45000, 5000, Some((syn.seq + 1).0), TcpFlags::SYN, 0);
    rig.exchange(vec![from_client(&syn_ack, &[])]);
    assert_eq!(ep.try_wait(8), [(EPOLLOUT, 1)]);
    assert!(ep.try_wait(8).is_empty());
}

// ---- abort (SO_LINGER 0) ----

#[test]
fn abort_of_an_established_connection_sends_one_rst_at_snd_nxt_and_forgets_it() {
    let (mut rig, _l, stream, iss) = accepted();
    stream.abort();
    let out = rig.exchange(vec![]);
    assert_eq!(out.len(), 1, "one segment");
    let (rst, payload) = to_client(&out[0]);
    // RFC 9293 §3.10.5: <SEQ=SND.NXT><CTL=RST>.
    assert!(rst.flags.contains(TcpFlags::RST));
    assert!(!rst.flags.contains(TcpFlags::FIN) && !rst.flags.contains(TcpFlags::SYN));
    assert_eq!(rst.seq, iss + 1);
    assert!(payload.is_empty());
    let info = rig.info.borrow();
    assert!(info.flows.is_empty(), "no TIME-WAIT, no flow left");
    assert!(info.tcbs.is_empty());
}

#[test]
fn abort_in_syn_sent_sends_nothing_more_and_deletes_the_tcb() {
    let (mut rig, _l) = server();
    let stream = TcpStream::connect(&rig.info, IpEndpoint::new(SERVER, 45000), IpEndpoint::new(CLIENT, 9000)).unwrap();
    let (syn, _) = to_client(&rig.exchange(vec![])[0]);
    assert!(syn.flags.contains(TcpFlags::SYN));
    stream.abort();
    assert!(rig.exchange(vec![]).is_empty(), "no RST from SYN-SENT");
    let info = rig.info.borrow();
    assert!(info.flows.is_empty());
    assert!(info.tcbs.is_empty());
}

// ---- zero-copy ----

#[test]
fn packets_received_come_out_whole_and_in_order() {
    let (mut rig, _l, stream, iss) = accepted();
    assert_eq!(stream.try_recv_packet().err(), Some(libc::EAGAIN));
    // Segments above TCPProcessData's COALESCE_MAX keep their packets.
    let (a, b, c) = (vec![b'a'; 600], vec![b'b'; 700], vec![b'c'; 800]);
    let parts: [&[u8]; 3] = [&a, &b, &c];
    let mut seq = 1001;
    for p in parts {
        client_data(&mut rig, seq, iss + 1, TcpFlags::PSH, p);
        seq += p.len() as u32;
    }
    for p in parts {
        let got = stream.try_recv_packet().unwrap().expect("a packet");
        assert_eq!(&got[..], p);
    }
    assert_eq!(stream.try_recv_packet().err(), Some(libc::EAGAIN));
    assert_eq!(rig.info.borrow().tcbs.get(stream.tcb_ref()).unwrap().recv_queued, 0);
    // A batch, after a byte read took the front of the first packet.
    for p in parts {
        client_data(&mut rig, seq, iss + 1, TcpFlags::PSH, p);
        seq += p.len() as u32;
    }
    let mut one = [0; 1];
    assert_eq!(stream.try_read(&mut one), Ok(1));
    let mut batch = oxnet_driver::PacketBatch::with_capacity(4);
    assert_eq!(stream.try_recv_packets(&mut batch, 2), Ok(2));
    assert_eq!(stream.try_recv_packets(&mut batch, 2), Ok(1));
    let got: Vec<Vec<u8>> = batch.iter().map(|p| p.to_vec()).collect();
    assert_eq!(got, [a[1..].to_vec(), b.clone(), c.clone()]);
    // Small segments are copied onto the packet before them: their bytes,
    // in order, in fewer packets.
    for p in [&b"abc"[..], b"defgh", b"ij"] {
        client_data(&mut rig, seq, iss + 1, TcpFlags::PSH, p);
        seq += p.len() as u32;
    }
    let small = stream.try_recv_packet().unwrap().expect("a packet");
    assert_eq!(&small[..], b"abcdefghij");
    client_data(&mut rig, seq, iss + 1, TcpFlags::FIN, &[]);
    assert!(stream.try_recv_packet().unwrap().is_none(), "the end");
    assert_eq!(stream.try_recv_packets(&mut batch, 2), Ok(0));
}

#[test]
fn a_packet_given_to_send_goes_out_with_its_bytes() {
    let (mut rig, _l, stream, iss) = accepted();
    let r = stream.tcb_ref();
    rig.info.borrow_mut().tcbs.get_mut(r).unwrap().send_buffer_limit = 1000;
    let pool = oxnet_driver::Mempool::new("app", 8, oxnet_driver::MemoryKind::Plain).unwrap();
    let packet_of = |_: &Rig, bytes: &[u8]| {
        let mut p = pool.alloc().unwrap();
        p.set_len(bytes.len()).unwrap();
        p.copy_from_slice(bytes);
        p
    };
    stream.try_send_packet(packet_of(&rig, b"zero-copy")).unwrap();
    let out = rig.exchange(vec![]);
    let (s, payload) = to_client(&out[0]);
    assert_eq!((s.seq, payload.as_slice()), (iss + 1, &b"zero-copy"[..]));
    // Whole or not at all: 991 bytes of room left.
    stream.try_send_packet(packet_of(&rig, &[1; 600])).unwrap();
    let (e, back) = stream.try_send_packet(packet_of(&rig, &[2; 600])).unwrap_err();
    assert_eq!((e, back.len()), (libc::EAGAIN, 600));
    stream.shutdown_write().unwrap();
    let (e, _) = stream.try_send_packet(back).unwrap_err();
    assert_eq!(e, libc::EPIPE);
}

// ---- poll-style I/O and the traits ----

/// Two routers wired back to back: a client stack at CLIENT, a server
/// stack at SERVER, each with its executor; frames cross between them.
struct Pair {
    client: Rig,
    server: Rig,
    client_exec: std::rc::Rc<std::cell::RefCell<crate::exec::Executor>>,
    server_exec: std::rc::Rc<std::cell::RefCell<crate::exec::Executor>>,
}

impl Pair {
    fn new() -> Pair {
        let config = "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink; AppExecutor;";
        let server = Rig::new(config);
        let server_exec = crate::app::executor();
        let client = Rig::new(config);
        let client_exec = crate::app::executor();
        Pair {
            client,
            server,
            client_exec,
            server_exec,
        }
    }

    /// Runs both until `done`, moving frames across; when neither has
    /// anything to do, both clocks step 10 ms (for the delayed ACK).
    ///
    /// One frame crosses each way per round, so that each batch into a
    /// stack holds one segment: with several segments of one connection
    /// in a batch, TCPReordering compares each with RCV.NXT before
    /// TCPProcessData has advanced it over the earlier ones, and holds
    /// the second in-order segment as out of order; the retransmission
    /// that follows rolls SND.NXT back to SND.UNA, after which the peer's
    /// ACK of data sent before the timeout is "something not yet sent"
    /// (TCPProcessAck compares with SND.NXT, no SND.MAX) and the two
    /// stacks answer each other's ACKs for ever. Both are the elements'
    /// to fix (reported); this test is about the traits.
    fn run_until(&mut self, done: &dyn Fn() -> bool) {
        for _ in 0..100_000 {
            if done() {
                return;
            }
            // One frame each way per round (see the doc above).
            let to_server = self.client.output.borrow_mut().pop_front();
            let to_client = self.server.output.borrow_mut().pop_front();
            let moved = to_server.is_some() || to_client.is_some();
            self.server.input.borrow_mut().extend(to_server);
            self.client.input.borrow_mut().extend(to_client);
            let worked = self.server.router.run_once() | self.client.router.run_once();
            if !worked && !moved {
                let now = self.server.router.now_us().max(self.client.router.now_us()) + 10_000;
                self.server.router.advance_simulated_time(now);
                self.client.router.advance_simulated_time(now);
            }
        }
        panic!("not done after 100000 rounds");
    }
}

#[test]
fn a_task_pulls_packets_and_pushes_one_back_between_two_stacks() {
    let mut pair = Pair::new();
    let listener = TcpListener::bind(&pair.server.info, IpEndpoint::new(SERVER, 9), 4).unwrap();
    let pulled = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = pulled.clone();
    pair.server_exec.borrow().spawn(async move {
        let s = listener.accept().await.unwrap();
        let pool = oxnet_driver::Mempool::new("app", 8, oxnet_driver::MemoryKind::Plain).unwrap();
        while let Some(p) = s.recv_packet().await.unwrap() {
            log.borrow_mut().extend_from_slice(&p);
        }
        let total = log.borrow().len().to_string();
        let mut p = pool.alloc().unwrap();
        p.set_len(total.len()).unwrap();
        p.copy_from_slice(total.as_bytes());
        s.send_packet(p).await.unwrap();
        s.shutdown_write().unwrap();
    });
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
    let sent = data.clone();
    let reply = std::rc::Rc::new(std::cell::RefCell::new(None));
    let out = reply.clone();
    let s = TcpStream::connect(
        &pair.client.info,
        IpEndpoint::new(CLIENT, 0),
        IpEndpoint::new(SERVER, 9),
    )
    .unwrap();
    pair.client_exec.borrow().spawn(async move {
        s.connected().await.unwrap();
        s.write_all(&sent).await.unwrap();
        s.shutdown_write().unwrap();
        let mut got = Vec::new();
        let mut buf = [0; 64];
        loop {
            match s.read(&mut buf).await.unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        *out.borrow_mut() = Some(got);
    });
    pair.run_until(&|| reply.borrow().is_some());
    assert!(*pulled.borrow() == data, "the packets' bytes differ from those sent");
    assert_eq!(reply.borrow().as_deref(), Some(&b"20000"[..]));
}

#[cfg(feature = "futures-io")]
#[test]
fn a_futures_io_echo_of_100_kb_comes_back_byte_for_byte() {
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    let mut pair = Pair::new();
    let listener = TcpListener::bind(&pair.server.info, IpEndpoint::new(SERVER, 7), 4).unwrap();
    pair.server_exec.borrow().spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let mut buf = vec![0; 4096];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            s.write_all(&buf[..n]).await.unwrap();
        }
        s.close().await.unwrap();
    });
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let back = std::rc::Rc::new(std::cell::RefCell::new(None));
    let (sent, result) = (data.clone(), back.clone());
    let mut s = TcpStream::connect(
        &pair.client.info,
        IpEndpoint::new(CLIENT, 0),
        IpEndpoint::new(SERVER, 7),
    )
    .unwrap();
    // A send buffer smaller than a chunk: writes wait for ACKs (the
    // writable event's waker, kept across polls).
    let r = s.tcb_ref();
    pair.client.info.borrow_mut().tcbs.get_mut(r).unwrap().send_buffer_limit = 3000;
    pair.client_exec.borrow().spawn(async move {
        s.connected().await.unwrap();
        let mut got = Vec::new();
        for chunk in sent.chunks(8192) {
            s.write_all(chunk).await.unwrap();
            let mut echo = vec![0; chunk.len()];
            s.read_exact(&mut echo).await.unwrap();
            got.extend_from_slice(&echo);
        }
        s.close().await.unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        *result.borrow_mut() = Some(got);
    });
    pair.run_until(&|| back.borrow().is_some());
    assert!(back.borrow().as_ref().unwrap() == &data, "the echo differs");
    assert_eq!(pair.client_exec.borrow().panic_count(), 0);
    assert_eq!(pair.server_exec.borrow().panic_count(), 0);
}

#[cfg(feature = "tokio")]
#[test]
fn tokios_traits_read_and_write_through_the_same_calls() {
    use std::future::poll_fn;
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    let mut pair = Pair::new();
    let listener = TcpListener::bind(&pair.server.info, IpEndpoint::new(SERVER, 7), 4).unwrap();
    let got = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = got.clone();
    pair.server_exec.borrow().spawn(async move {
        let mut s = listener.accept().await.unwrap();
        loop {
            let mut space = [0; 100];
            let mut buf = ReadBuf::new(&mut space);
            poll_fn(|cx| Pin::new(&mut s).poll_read(cx, &mut buf)).await.unwrap();
            if buf.filled().is_empty() {
                break;
            }
            log.borrow_mut().extend_from_slice(buf.filled());
        }
    });
    let mut s = TcpStream::connect(
        &pair.client.info,
        IpEndpoint::new(CLIENT, 0),
        IpEndpoint::new(SERVER, 7),
    )
    .unwrap();
    let done = std::rc::Rc::new(std::cell::Cell::new(false));
    let flag = done.clone();
    pair.client_exec.borrow().spawn(async move {
        s.connected().await.unwrap();
        let mut left: &[u8] = b"tokio over oxnet";
        while !left.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut s).poll_write(cx, left)).await.unwrap();
            left = &left[n..];
        }
        poll_fn(|cx| Pin::new(&mut s).poll_shutdown(cx)).await.unwrap();
        flag.set(true);
    });
    let (g, d) = (got.clone(), done.clone());
    pair.run_until(&|| d.get() && g.borrow().len() == 16);
    assert_eq!(got.borrow().as_slice(), b"tokio over oxnet");
}
