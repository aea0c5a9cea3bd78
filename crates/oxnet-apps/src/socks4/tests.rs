//! The proxy driven by stream packets, as TCPEpollServer (input 0) and
//! TCPEpollClient (input 1) would push them; what comes out is checked
//! byte for byte. The whole chain on a stack, in process, is in
//! `in_process.rs`.

use super::hosts::Hosts;
use super::policy;
use super::proxy::{Config, Out, Proxy};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{MemoryKind, Mempool, PacketBatch};
use oxnet_stack::wire::IpEndpoint;
use std::net::Ipv4Addr;

use StreamEvent::{Close, Data, Eof, Open};

fn pool() -> Mempool {
    Mempool::new("socks4-test", 64, MemoryKind::Plain).unwrap()
}

/// Each packet as (id, event, bytes).
fn view(b: &mut PacketBatch) -> Vec<(u32, StreamEvent, Vec<u8>)> {
    let v = b
        .iter()
        .map(|p| {
            let bytes = p.segments().flat_map(|s| s.iter().copied()).collect();
            (stream::socket(p), stream::event(p), bytes)
        })
        .collect();
    b.clear();
    v
}

struct Rig {
    pool: Mempool,
    proxy: Proxy,
    out: Out,
}

impl Rig {
    fn new(config: Config) -> Rig {
        Rig {
            pool: pool(),
            proxy: Proxy::new(config, None),
            out: Out::default(),
        }
    }
    fn client(&mut self, id: u32, e: StreamEvent, bytes: &[u8]) {
        let p = self.packet(id, e, bytes);
        self.proxy.client_input(p, &mut self.out, &self.pool);
    }
    fn remote(&mut self, id: u32, e: StreamEvent, bytes: &[u8]) {
        let p = self.packet(id, e, bytes);
        self.proxy.remote_input(p, &mut self.out, &self.pool);
    }
    fn packet(&self, id: u32, e: StreamEvent, bytes: &[u8]) -> oxnet_driver::Packet {
        let mut p = stream::control(&self.pool, id, e).unwrap();
        p.set_len(bytes.len()).unwrap();
        p.copy_from_slice(bytes);
        p
    }
    fn client_out(&mut self) -> Vec<(u32, StreamEvent, Vec<u8>)> {
        view(&mut self.out.client)
    }
    fn remote_out(&mut self) -> Vec<(u32, StreamEvent, Vec<u8>)> {
        view(&mut self.out.remote)
    }
}

fn connect_request(port: u16, ip: [u8; 4], user: &[u8]) -> Vec<u8> {
    let mut b = vec![4, 1];
    b.extend_from_slice(&port.to_be_bytes());
    b.extend_from_slice(&ip);
    b.extend_from_slice(user);
    b.push(0);
    b
}

fn open_bytes(ip: [u8; 4], port: u16) -> Vec<u8> {
    let pool = pool();
    let p = stream::open_request(&pool, 1, IpEndpoint::new(Ipv4Addr::from(ip), port)).unwrap();
    p.to_vec()
}

#[test]
fn connect_relays_both_ways_in_order_with_half_close() {
    let mut r = Rig::new(Config::default());
    r.client(5, Open, b"");
    // The request in two pieces, the first data right behind it.
    let mut req = connect_request(80, [10, 0, 0, 3], b"fred");
    req.extend_from_slice(b"GET ");
    r.client(5, Data, &req[..3]);
    assert!(
        r.client_out().is_empty() && r.remote_out().is_empty(),
        "incomplete: nothing yet"
    );
    r.client(5, Data, &req[3..]);
    assert_eq!(r.remote_out(), vec![(5, Open, open_bytes([10, 0, 0, 3], 80))]);
    // Data while connecting is held, in order.
    r.client(5, Data, b"/ HTTP/1.0\r\n\r\n");
    r.client(5, Eof, b"");
    assert!(r.client_out().is_empty() && r.remote_out().is_empty());
    r.remote(5, Open, b"");
    assert_eq!(r.client_out(), vec![(5, Data, vec![0, 90, 0, 80, 10, 0, 0, 3])]);
    assert_eq!(
        r.remote_out(),
        vec![
            (5, Data, b"GET ".to_vec()),
            (5, Data, b"/ HTTP/1.0\r\n\r\n".to_vec()),
            (5, Eof, vec![])
        ]
    );
    r.remote(5, Data, b"HTTP/1.0 200 OK\r\n");
    r.remote(5, Eof, b"");
    r.remote(5, Close, b"");
    assert_eq!(
        r.client_out(),
        vec![
            (5, Data, b"HTTP/1.0 200 OK\r\n".to_vec()),
            (5, Eof, vec![]),
            (5, Close, vec![])
        ]
    );
    // The server's Close of the connection closed for it asks nothing.
    r.client(5, Close, b"");
    assert!(r.client_out().is_empty() && r.remote_out().is_empty());
    let s = &r.proxy.stats;
    assert_eq!(
        (s.requests, s.connects, s.granted, s.rejected, s.unknown),
        (1, 1, 1, 0, 0)
    );
    assert_eq!((s.bytes_up, s.bytes_down), (18, 17));
    assert_eq!(r.proxy.sessions(), 0);
}

#[test]
fn a_client_close_closes_the_destination() {
    let mut r = Rig::new(Config::default());
    r.client(1, Open, b"");
    r.client(1, Data, &connect_request(443, [192, 0, 2, 1], b""));
    r.remote(1, Open, b"");
    r.client_out();
    r.remote_out();
    r.client(1, Data, b"x");
    r.client(1, Close, b"");
    assert_eq!(r.remote_out(), vec![(1, Data, b"x".to_vec()), (1, Close, vec![])]);
    assert_eq!(r.proxy.sessions(), 0);
}

#[test]
fn flow_signals_cross_the_relay() {
    let mut r = Rig::new(Config::default());
    r.client(1, Open, b"");
    r.client(1, Data, &connect_request(80, [10, 0, 0, 3], b""));
    let pause = stream::flow_signal(&r.pool, 1, stream::Flow::Pause).unwrap();
    r.proxy.client_input(pause, &mut r.out, &r.pool);
    assert_eq!(
        r.remote_out().len(),
        1,
        "only the Open: no relay yet, the signal is dropped"
    );
    r.remote(1, Open, b"");
    r.client_out();
    r.remote_out();
    let pause = stream::flow_signal(&r.pool, 1, stream::Flow::Pause).unwrap();
    r.proxy.client_input(pause, &mut r.out, &r.pool);
    let resume = stream::flow_signal(&r.pool, 1, stream::Flow::Resume).unwrap();
    r.proxy.remote_input(resume, &mut r.out, &r.pool);
    let flows = |b: &mut PacketBatch| {
        let v: Vec<_> = b.iter().map(|p| (stream::socket(p), stream::flow(p))).collect();
        b.clear();
        v
    };
    assert_eq!(flows(&mut r.out.remote), vec![(1, Some(stream::Flow::Pause))]);
    assert_eq!(flows(&mut r.out.client), vec![(1, Some(stream::Flow::Resume))]);
    let s = &r.proxy.stats;
    assert_eq!((s.bytes_up, s.bytes_down, s.unknown), (0, 0, 0));
}

#[test]
fn a_failed_connect_is_91_and_closed() {
    let mut r = Rig::new(Config::default());
    r.client(2, Open, b"");
    r.client(2, Data, &connect_request(81, [10, 0, 0, 3], b""));
    r.remote_out();
    let mut close = stream::close(&r.pool, 2, libc::ECONNREFUSED).unwrap();
    stream::set_socket(&mut close, 2);
    r.proxy.remote_input(close, &mut r.out, &r.pool);
    assert_eq!(
        r.client_out(),
        vec![(2, Data, vec![0, 91, 0, 81, 10, 0, 0, 3]), (2, Close, vec![])]
    );
    let s = &r.proxy.stats;
    assert_eq!((s.failed, s.rejected, s.granted), (1, 1, 0));
}

#[test]
fn socks4a_names_resolve_through_hosts_or_are_refused() {
    let config = Config {
        hosts: Some(Hosts::parse("10.0.0.3 web.test\n")),
        ..Config::default()
    };
    let mut r = Rig::new(config);
    let mut req = vec![4, 1, 0, 80, 0, 0, 0, 1];
    req.extend_from_slice(b"u\0WEB.Test\0");
    r.client(1, Open, b"");
    r.client(1, Data, &req);
    assert_eq!(r.remote_out(), vec![(1, Open, open_bytes([10, 0, 0, 3], 80))]);
    r.remote(1, Open, b"");
    assert_eq!(r.client_out(), vec![(1, Data, vec![0, 90, 0, 80, 10, 0, 0, 3])]);

    let mut req = vec![4, 1, 0, 80, 0, 0, 0, 9];
    req.extend_from_slice(b"\0nowhere.test\0");
    r.client(2, Open, b"");
    r.client(2, Data, &req);
    assert!(r.remote_out().is_empty());
    assert_eq!(
        r.client_out(),
        vec![(2, Data, vec![0, 91, 0, 80, 0, 0, 0, 0]), (2, Close, vec![])]
    );
    assert_eq!((r.proxy.stats.unresolved, r.proxy.stats.rejected), (1, 1));

    // Without HOSTS, every name is refused; an address literal is no
    // name.
    let mut r = Rig::new(Config::default());
    let mut req = vec![4, 1, 0, 80, 0, 0, 0, 1];
    req.extend_from_slice(b"\x0010.0.0.4\0");
    r.client(4, Open, b"");
    r.client(4, Data, &req);
    assert_eq!(r.remote_out(), vec![(4, Open, open_bytes([10, 0, 0, 4], 80))]);
    r.client(3, Open, b"");
    let mut req = vec![4, 1, 0, 80, 0, 0, 0, 1];
    req.extend_from_slice(b"\0web.test\0");
    r.client(3, Data, &req);
    assert!(r.remote_out().is_empty());
    assert_eq!(
        r.client_out(),
        vec![(3, Data, vec![0, 91, 0, 80, 0, 0, 0, 0]), (3, Close, vec![])]
    );
}

#[test]
fn refused_destinations_and_users_are_91_and_counted() {
    let mut config = Config::default();
    config.policy.deny = policy::rules("10.0.0.9 10.0.0.3:22").unwrap();
    config.policy.users = Some(vec![b"alice".to_vec(), b"bob".to_vec()]);
    let mut r = Rig::new(config);
    for (id, port, ip, user) in [(1, 80, [10, 0, 0, 9], "alice"), (2, 22, [10, 0, 0, 3], "bob")] {
        r.client(id, Open, b"");
        r.client(id, Data, &connect_request(port, ip, user.as_bytes()));
        let mut reply = vec![0, 91];
        reply.extend_from_slice(&port.to_be_bytes());
        reply.extend_from_slice(&ip);
        assert_eq!(r.client_out(), vec![(id, Data, reply), (id, Close, vec![])]);
    }
    r.client(3, Open, b"");
    r.client(3, Data, &connect_request(80, [10, 0, 0, 3], b"mallory"));
    assert_eq!(
        r.client_out(),
        vec![(3, Data, vec![0, 91, 0, 80, 0, 0, 0, 0]), (3, Close, vec![])]
    );
    r.client(4, Open, b"");
    r.client(4, Data, &connect_request(80, [10, 0, 0, 3], b"alice"));
    assert_eq!(r.remote_out().len(), 1, "allowed");
    assert!(r.client_out().is_empty());
    let s = &r.proxy.stats;
    assert_eq!((s.requests, s.denied, s.users_refused, s.rejected), (4, 2, 1, 3));
}

#[test]
fn a_client_gone_mid_handshake_is_cleaned_up() {
    let mut r = Rig::new(Config::default());
    // Half a request, then gone.
    r.client(1, Open, b"");
    r.client(1, Data, &[4, 1, 0]);
    r.client(1, Close, b"");
    // A request whose destination is being connected, then gone: the
    // connect is cancelled.
    r.client(2, Open, b"");
    r.client(2, Data, &connect_request(80, [10, 0, 0, 3], b""));
    r.remote_out();
    r.client(2, Close, b"");
    assert_eq!(r.remote_out(), vec![(2, Close, vec![])]);
    // The client element answers the cancelled connect anyway: closed.
    r.remote(2, Open, b"");
    assert_eq!(r.remote_out(), vec![(2, Close, vec![])]);
    // Eof before a whole request: nothing more can come; closed.
    r.client(3, Open, b"");
    r.client(3, Data, &[4]);
    r.client(3, Eof, b"");
    assert_eq!(r.client_out(), vec![(3, Close, vec![])]);
    assert_eq!(r.proxy.stats.aborted, 3);
    assert_eq!(r.proxy.sessions(), 0);
}

#[test]
fn late_requests_are_closed_and_late_binds_refused() {
    let stack: oxnet_stack::tcp::socket::Stack = Default::default();
    let config = Config {
        request_timeout_us: 1_000,
        bind_timeout_us: 5_000,
        ..Config::default()
    };
    let mut r = Rig::new(config.clone());
    r.proxy = Proxy::new(config, Some(stack.clone()));
    r.client(1, Open, b"");
    r.client(1, Data, &[4, 1]);
    r.proxy.now_us = 500;
    r.client(2, Open, b"");
    let mut bind = connect_request(21, [10, 0, 0, 3], b"");
    bind[1] = 2;
    r.client(2, Data, &bind);
    r.client_out();
    r.proxy.now_us = 999;
    r.proxy.sweep(&mut r.out, &r.pool);
    assert!(r.client_out().is_empty(), "not late yet");
    r.proxy.now_us = 1_000;
    r.proxy.sweep(&mut r.out, &r.pool);
    assert_eq!(r.client_out(), vec![(1, Close, vec![])], "the silent client");
    r.proxy.now_us = 5_500;
    r.proxy.sweep(&mut r.out, &r.pool);
    assert_eq!(
        r.client_out(),
        vec![(2, Data, vec![0, 91, 0, 0, 10, 0, 0, 3]), (2, Close, vec![])]
    );
    assert!(stack.borrow().listeners.is_empty(), "the BIND's listener is gone");
    let s = &r.proxy.stats;
    assert_eq!((s.timeouts, s.rejected, r.proxy.sessions()), (2, 1, 0));
}

#[test]
fn malformed_and_oversized_requests_are_91_at_once() {
    let mut r = Rig::new(Config {
        max_user: 4,
        ..Config::default()
    });
    r.client(1, Open, b"");
    r.client(1, Data, &[5, 1, 0]);
    assert_eq!(
        r.client_out(),
        vec![(1, Data, vec![0, 91, 0, 0, 0, 0, 0, 0]), (1, Close, vec![])]
    );
    r.client(2, Open, b"");
    r.client(2, Data, &[4, 1, 0, 80, 1, 2, 3, 4, b'a', b'b', b'c', b'd']);
    assert!(r.client_out().is_empty(), "4 bytes: the NUL may come");
    r.client(2, Data, b"e");
    assert_eq!(
        r.client_out(),
        vec![(2, Data, vec![0, 91, 0, 0, 0, 0, 0, 0]), (2, Close, vec![])]
    );
    assert_eq!(r.proxy.stats.errors, 2);
}

#[test]
fn held_data_past_its_limit_ends_the_session() {
    let mut r = Rig::new(Config {
        max_pending: 100,
        ..Config::default()
    });
    r.client(1, Open, b"");
    r.client(1, Data, &connect_request(80, [10, 0, 0, 3], b""));
    r.remote_out();
    r.client(1, Data, &[7; 100]);
    assert!(r.client_out().is_empty());
    r.client(1, Data, &[7]);
    assert_eq!(r.client_out(), vec![(1, Close, vec![])]);
    assert_eq!(r.remote_out(), vec![(1, Close, vec![])]);
    assert_eq!((r.proxy.stats.errors, r.proxy.sessions()), (1, 0));
}

#[test]
fn bind_answers_with_the_listening_port_and_refuses_when_none_is_free() {
    let stack: oxnet_stack::tcp::socket::Stack = Default::default();
    let config = Config {
        bind_ports: (61000, 61001),
        bind_addr: Some(Ipv4Addr::new(10, 0, 0, 2)),
        ..Config::default()
    };
    let mut r = Rig::new(config.clone());
    r.proxy = Proxy::new(config, Some(stack.clone()));
    let bind = |port: u16| {
        let mut b = connect_request(port, [10, 0, 0, 3], b"");
        b[1] = 2;
        b
    };
    for (id, port) in [(1u32, 61000u16), (2, 61001)] {
        r.client(id, Open, b"");
        r.client(id, Data, &bind(5000));
        let mut reply = vec![0, 90];
        reply.extend_from_slice(&port.to_be_bytes());
        reply.extend_from_slice(&[10, 0, 0, 2]);
        assert_eq!(r.client_out(), vec![(id, Data, reply)]);
        assert!(r.remote_out().is_empty(), "BIND does not use the client element");
        let local = IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), port);
        assert!(stack.borrow().listeners.contains_key(&local));
    }
    // The range is used up: 91.
    r.client(3, Open, b"");
    r.client(3, Data, &bind(5000));
    assert_eq!(
        r.client_out(),
        vec![(3, Data, vec![0, 91, 0x13, 0x88, 10, 0, 0, 3]), (3, Close, vec![])]
    );
    // A client gone while waiting: its listener goes, its port is free.
    r.client(1, Close, b"");
    assert_eq!(r.proxy.listeners(), 1);
    assert!(!stack
        .borrow()
        .listeners
        .contains_key(&IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 61000)));
    let s = &r.proxy.stats;
    assert_eq!((s.binds, s.bound, s.rejected, s.aborted), (3, 2, 1, 1));
}

proptest::proptest! {
    /// Whatever bytes and events arrive, in whatever order, the proxy
    /// never panics, answers each session at most one reply before its
    /// relay (or its 91), and keeps no session whose client closed.
    #[test]
    fn random_streams_never_panic(ops in proptest::collection::vec(
        (0u8..6, 1u32..4, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)), 0..60)) {
        let config = Config {
            hosts: Some(Hosts::parse("10.0.0.3 a\n")),
            max_user: 8,
            max_host: 8,
            max_pending: 64,
            ..Config::default()
        };
        let mut r = Rig::new(config);
        for (op, id, bytes) in ops {
            match op {
                0 => r.client(id, Open, b""),
                1 => {
                    // Often a plausible request, otherwise noise.
                    let mut b = if bytes.first().is_some_and(|&x| x < 128) {
                        vec![4, 1 + (bytes.len() % 2) as u8, 0, 80, 0, 0, 0, 1]
                    } else {
                        vec![]
                    };
                    b.extend(&bytes);
                    r.client(id, Data, &b)
                }
                2 => r.client(id, if bytes.is_empty() { Eof } else { Close }, b""),
                3 => r.remote(id, Open, b""),
                4 => r.remote(id, Data, &bytes),
                _ => r.remote(id, if bytes.is_empty() { Eof } else { Close }, b""),
            }
            r.client_out();
            r.remote_out();
        }
        for id in 1..4 {
            r.client(id, Close, b"");
        }
        proptest::prop_assert_eq!(r.proxy.sessions(), 0);
    }
}
