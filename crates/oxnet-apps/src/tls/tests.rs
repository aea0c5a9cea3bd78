//! The relay driven by stream packets, with rustls clients and servers
//! of the test's own on the other end (in memory: no graph, no network).

use super::classifier::TlsClassifier;
use super::relay::{Out, Relay, Role};
use super::{cert, config};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{MemoryKind, Mempool, Packet, PacketBatch};
use oxnet_graph::args::Args;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::sync::Arc;

const ID: u32 = 7;

fn pool() -> Mempool {
    Mempool::new("tls-test", 4096, MemoryKind::Plain).unwrap()
}

/// Deterministic bytes (xorshift), so a failure reproduces.
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A temporary directory of the test's own, removed at the end.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("oxnet-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server relay with a fresh self-signed certificate for `localhost`
/// (written to `dir`) and `extra` keywords; returns the relay and the
/// certificate, for the test's client to trust.
fn server(dir: &TempDir, extra: &str) -> (Relay, CertificateDer<'static>) {
    let (cert, key) = cert::write_self_signed(&dir.0, &["localhost".to_string()]).unwrap();
    let conf = format!("CERT {}, KEY {}{extra}", cert.display(), key.display());
    let mut args = Args::new(&conf);
    let config = config::server(&mut args).unwrap();
    args.complete().unwrap();
    let der = CertificateDer::from_pem_file(&cert).unwrap();
    (Relay::new(Role::Server(config), 1000), der)
}

fn rustls_client(
    trust: &CertificateDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// The relay's outputs, kept in order, with the stream rules checked.
#[derive(Default)]
struct Seen {
    /// Events to the application, in order.
    app_events: Vec<StreamEvent>,
    /// Plaintext bytes to the application.
    app_bytes: Vec<u8>,
    /// Events to the network.
    net_events: Vec<StreamEvent>,
    /// Record bytes to the network not yet given to the peer.
    net_bytes: Vec<u8>,
    /// The errno of the application's Close.
    app_errno: Option<i32>,
}

impl Seen {
    fn take(&mut self, out: Out) {
        for p in out.plain.iter() {
            assert_eq!(stream::socket(p), ID);
            let e = stream::event(p);
            if e == StreamEvent::Data {
                assert!(p.total_len() > 0, "empty Data to the application");
                p.copy_chain_to(&mut self.app_bytes);
            } else {
                assert!(!self.app_events.contains(&StreamEvent::Close), "{e:?} after Close");
                if e == StreamEvent::Close {
                    self.app_errno = Some(stream::errno(p));
                }
                self.app_events.push(e);
            }
        }
        for p in out.records.iter() {
            assert_eq!(stream::socket(p), ID);
            let e = stream::event(p);
            if e == StreamEvent::Data {
                assert!(!self.net_events.contains(&StreamEvent::Close), "records after Close");
                p.copy_chain_to(&mut self.net_bytes);
            } else {
                self.net_events.push(e);
            }
        }
    }
}

/// One relay and the packets around it.
struct Rig {
    relay: Relay,
    pool: Mempool,
    seen: Seen,
    /// Plaintext the peer decrypted.
    peer_plain: Vec<u8>,
}

impl Rig {
    fn new(relay: Relay) -> Rig {
        Rig {
            relay,
            pool: pool(),
            seen: Seen::default(),
            peer_plain: Vec::new(),
        }
    }

    fn control(&self, e: StreamEvent) -> Packet {
        stream::control(&self.pool, ID, e).unwrap()
    }

    /// Data packets of `bytes`, `chunk` bytes each (chained two by two,
    /// as the stack's zero-copy receive may give them).
    fn data(&self, bytes: &[u8], chunk: usize) -> Vec<Packet> {
        let mut out: Vec<Packet> = Vec::new();
        for (i, piece) in bytes.chunks(chunk).enumerate() {
            let mut p = self.pool.alloc().unwrap();
            p.set_len(piece.len()).unwrap();
            p.copy_from_slice(piece);
            if i % 2 == 1 {
                out.last_mut().unwrap().append(p);
            } else {
                out.push(stream::data(p, ID));
            }
        }
        out
    }

    fn network(&mut self, p: Packet) {
        let mut out = Out::default();
        self.relay.from_network(p, &self.pool, &mut out);
        self.seen.take(out);
    }

    fn application(&mut self, p: Packet) {
        let mut out = Out::default();
        self.relay.from_application(p, &self.pool, &mut out);
        self.seen.take(out);
    }

    /// What `peer` has to send goes in as network Data.
    fn peer_to_relay(&mut self, peer: &mut rustls::Connection) {
        let mut bytes = Vec::new();
        while peer.wants_write() {
            peer.write_tls(&mut bytes).unwrap();
        }
        for p in self.data(&bytes, 700) {
            self.network(p);
        }
    }

    /// Records the relay sent go to `peer`.
    fn relay_to_peer(&mut self, peer: &mut rustls::Connection) -> Result<(), rustls::Error> {
        let bytes = std::mem::take(&mut self.seen.net_bytes);
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            peer.read_tls(&mut rest).unwrap();
            peer.process_new_packets()?;
            // Read as it comes, or rustls's plaintext buffer fills.
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = peer.reader().read(&mut chunk) {
                self.peer_plain.extend_from_slice(&chunk[..n]);
            }
        }
        Ok(())
    }

    /// Runs the handshake with `peer` to its end.
    fn handshake(&mut self, peer: &mut rustls::Connection) {
        for _ in 0..10 {
            self.peer_to_relay(peer);
            self.relay_to_peer(peer).unwrap();
            if !peer.is_handshaking() && !peer.wants_write() {
                return;
            }
        }
        panic!("no handshake after 10 rounds ({})", self.relay.last_error);
    }
}

/// The records `from` sent, into `to` as network Data.
fn shuttle(from: &mut Rig, to: &mut Rig) {
    let bytes = std::mem::take(&mut from.seen.net_bytes);
    for p in to.data(&bytes, 1000) {
        to.network(p);
    }
}

fn client_connection(config: &Arc<rustls::ClientConfig>) -> rustls::Connection {
    rustls::Connection::Client(
        rustls::ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap()).unwrap(),
    )
}

/// A whole connection with a rustls client: handshake, `up` bytes from
/// the client to the application and `down` back, close_notify both
/// ways, Close; byte-exact and in the stream rules' order.
fn round_trip(version: &'static rustls::SupportedProtocolVersion, expected: rustls::ProtocolVersion) {
    let dir = TempDir::new(&format!("rt{:?}", expected));
    let (relay, trust) = server(&dir, ", ALPN http/1.1 h2");
    let mut rig = Rig::new(relay);
    let mut client_config = (*rustls_client(&trust, &[version])).clone();
    client_config.alpn_protocols = vec![b"h2".to_vec()];
    let mut client = client_connection(&Arc::new(client_config));

    rig.network(rig.control(StreamEvent::Open));
    assert_eq!(rig.seen.app_events, [StreamEvent::Open]);
    rig.handshake(&mut client);
    assert_eq!(client.protocol_version(), Some(expected));
    assert_eq!(client.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(rig.relay.counters.handshakes, 1);

    let up = random_bytes(100_000, 1);
    for piece in up.chunks(16_384) {
        client.writer().write_all(piece).unwrap();
        rig.peer_to_relay(&mut client);
    }
    assert_eq!(rig.seen.app_bytes.len(), up.len());
    assert!(rig.seen.app_bytes == up, "plaintext to the application differs");

    let down = random_bytes(70_001, 2);
    for p in rig.data(&down, 1500) {
        rig.application(p);
    }
    rig.relay_to_peer(&mut client).unwrap();
    assert!(rig.peer_plain == down, "plaintext to the client differs");

    // The client's close_notify is the application's Eof; the
    // application's Eof is close_notify and then a FIN.
    client.send_close_notify();
    rig.peer_to_relay(&mut client);
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Eof]);
    rig.application(rig.control(StreamEvent::Eof));
    assert_eq!(rig.seen.net_events, [StreamEvent::Eof]);
    rig.relay_to_peer(&mut client).unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        client.reader().read_to_end(&mut rest).unwrap(),
        0,
        "close_notify read as a clean end"
    );

    // The network's FIN then Close: one Close to the application, with
    // its errno; no truncation counted.
    rig.network(rig.control(StreamEvent::Eof));
    let mut close = rig.control(StreamEvent::Close);
    stream::set_errno(&mut close, 0);
    rig.network(close);
    assert_eq!(
        rig.seen.app_events,
        [StreamEvent::Open, StreamEvent::Eof, StreamEvent::Close]
    );
    assert_eq!(rig.seen.app_errno, Some(0));
    assert_eq!(rig.relay.connections(), 0);
    let c = &rig.relay.counters;
    assert_eq!(
        (
            c.opened,
            c.handshakes,
            c.errors,
            c.truncated,
            c.drops,
            c.plain_in,
            c.plain_out
        ),
        (1, 1, 0, 0, 0, up.len() as u64, down.len() as u64)
    );
}

#[test]
fn tls13_round_trip_is_byte_exact_with_close_notify() {
    round_trip(&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3);
}

#[test]
fn tls12_round_trip_is_byte_exact_with_close_notify() {
    round_trip(&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2);
}

/// An empty pool: the plaintext waits in rustls, no record byte is
/// skipped, and the peer's FIN waits behind it; when buffers are back
/// (the element's retry timer), all of it comes out, in order.
#[test]
fn an_empty_pool_delays_plaintext_and_eof_and_loses_no_byte() {
    let dir = TempDir::new("nobuffers");
    let (relay, trust) = server(&dir, "");
    let mut rig = Rig::new(relay);
    let mut client = client_connection(&rustls_client(&trust, &[&rustls::version::TLS13]));
    rig.network(rig.control(StreamEvent::Open));
    rig.handshake(&mut client);
    let data = random_bytes(3000, 8);
    // Records of 500 bytes of plaintext (they end inside the packets),
    // then close_notify.
    for piece in data.chunks(500) {
        client.writer().write_all(piece).unwrap();
    }
    client.send_close_notify();
    let mut records = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut records).unwrap();
    }
    let inputs = rig.data(&records, 700);
    let fin = rig.control(StreamEvent::Eof);
    let mut hoard = Vec::new();
    while let Ok(p) = rig.pool.alloc() {
        hoard.push(p);
    }
    for p in inputs.into_iter().chain([fin]) {
        rig.network(p);
        // The input's own buffer is back in the pool: taken again.
        while let Ok(p) = rig.pool.alloc() {
            hoard.push(p);
        }
    }
    assert!(rig.seen.app_bytes.is_empty());
    assert_eq!(rig.seen.app_events, [StreamEvent::Open], "no Eof before the plaintext");
    assert!(rig.relay.starving() && rig.relay.counters.no_buffers > 0);
    drop(hoard);
    let mut out = Out::default();
    rig.relay.retry_starved(&rig.pool, &mut out);
    rig.seen.take(out);
    assert!(rig.seen.app_bytes == data, "{} bytes out", rig.seen.app_bytes.len());
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Eof]);
    assert!(!rig.relay.starving());
    let c = &rig.relay.counters;
    assert_eq!((c.errors, c.truncated), (0, 0), "{}", rig.relay.last_error);
}

/// An empty pool on the way out: the application's records wait in
/// rustls, and its Eof or Close waits behind them (close_notify too);
/// the retry sends all of it in order.
#[test]
fn an_empty_pool_keeps_the_applications_end_behind_its_records() {
    for end in [StreamEvent::Eof, StreamEvent::Close] {
        let dir = TempDir::new("nobuffers-out");
        let (relay, trust) = server(&dir, "");
        let mut rig = Rig::new(relay);
        let mut client = client_connection(&rustls_client(&trust, &[&rustls::version::TLS12]));
        rig.network(rig.control(StreamEvent::Open));
        rig.handshake(&mut client);
        let data = random_bytes(3000, 9);
        let inputs: Vec<Packet> = rig.data(&data, 500).into_iter().chain([rig.control(end)]).collect();
        let mut hoard = Vec::new();
        while let Ok(p) = rig.pool.alloc() {
            hoard.push(p);
        }
        for p in inputs {
            rig.application(p);
            while let Ok(p) = rig.pool.alloc() {
                hoard.push(p);
            }
        }
        assert!(rig.seen.net_events.is_empty(), "{end:?} before the records");
        assert!(rig.relay.starving());
        drop(hoard);
        let mut out = Out::default();
        rig.relay.retry_starved(&rig.pool, &mut out);
        rig.seen.take(out);
        assert_eq!(rig.seen.net_events, [end]);
        rig.relay_to_peer(&mut client).unwrap();
        assert!(rig.peer_plain == data, "{end:?}: {} bytes", rig.peer_plain.len());
        let mut rest = Vec::new();
        assert_eq!(client.reader().read_to_end(&mut rest).unwrap(), 0, "close_notify last");
        assert!(!rig.relay.starving());
    }
}

#[test]
fn garbage_instead_of_a_client_hello_gets_an_alert_and_closes() {
    let dir = TempDir::new("garbage");
    let (relay, _) = server(&dir, "");
    let mut rig = Rig::new(relay);
    rig.network(rig.control(StreamEvent::Open));
    for p in rig.data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 100) {
        rig.network(p);
    }
    // An alert record (RFC 8446 §6: content type 21, level fatal) and
    // then the Close toward the network.
    let alert = &rig.seen.net_bytes;
    assert_eq!(alert.len(), 7, "one plaintext alert record: {alert:?}");
    assert_eq!((alert[0], alert[5]), (0x15, 2));
    assert_eq!(rig.seen.net_events, [StreamEvent::Close]);
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Close]);
    assert_eq!(rig.seen.app_errno, Some(libc::EPROTO));
    assert_eq!(rig.relay.counters.errors, 1);
    assert!(!rig.relay.last_error.is_empty());
    // More bytes and the network's own Close change nothing for the
    // application: it had its one Close.
    for p in rig.data(b"more", 4) {
        rig.network(p);
    }
    rig.network(rig.control(StreamEvent::Close));
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Close]);
    assert_eq!(rig.seen.net_events, [StreamEvent::Close]);
    assert_eq!(rig.relay.connections(), 0);
}

#[test]
fn random_bytes_never_panic_and_always_end_in_one_close() {
    let dir = TempDir::new("fuzz");
    let (relay, _) = server(&dir, "");
    let mut rig = Rig::new(relay);
    for seed in 0..200u64 {
        rig.seen = Seen::default();
        rig.network(rig.control(StreamEvent::Open));
        let mut bytes = random_bytes(1 + (seed as usize * 37) % 3000, seed);
        // Half of them look like a handshake record's header.
        if seed % 2 == 0 && bytes.len() >= 3 {
            bytes[..3].copy_from_slice(&[0x16, 0x03, 0x01]);
        }
        for p in rig.data(&bytes, 1 + seed as usize % 600) {
            rig.network(p);
        }
        rig.network(rig.control(StreamEvent::Close));
        assert_eq!(rig.seen.app_events.first(), Some(&StreamEvent::Open));
        assert_eq!(rig.seen.app_events.last(), Some(&StreamEvent::Close), "seed {seed}");
        assert!(rig.seen.app_bytes.is_empty(), "no plaintext from garbage");
    }
    assert_eq!(rig.relay.connections(), 0);
}

/// Random stream events on both inputs, the network side keeping the
/// stream rules and the application not: what comes out keeps them
/// (per id: Open first, Data and Eof only while open, one Close per
/// Open; nothing to the network after its Close).
#[test]
fn random_event_sequences_keep_the_stream_rules_on_both_outputs() {
    let dir = TempDir::new("sequences");
    let (cert, key) = cert::write_self_signed(&dir.0, &["localhost".to_string()]).unwrap();
    let config = config::server(&mut Args::new(&format!(
        "CERT {}, KEY {}",
        cert.display(),
        key.display()
    )))
    .unwrap();
    let mut relay = Relay::new(Role::Server(config), 3);
    let pool = pool();
    let mut x = 99u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 32) as usize
    };
    // Per id: the network owner's connection is open; the application
    // saw Open (and no Close yet); the network got our Close.
    let mut net_open = [false; 5];
    let mut app_open = [false; 5];
    let mut net_closed_by_us = [false; 5];
    for step in 0..8000 {
        let id = 1 + next() % 4;
        let op = next() % 9;
        let mut out = Out::default();
        let event = [
            StreamEvent::Open,
            StreamEvent::Data,
            StreamEvent::Eof,
            StreamEvent::Close,
        ][op % 4];
        let mut p = stream::control(&pool, id as u32, event).unwrap();
        if event == StreamEvent::Data {
            let n = 1 + next() % 300;
            p.set_len(n).unwrap();
            for b in p.iter_mut() {
                *b = next() as u8;
            }
            if next() % 2 == 0 {
                p[0] = 0x16;
            }
        }
        if op < 4 {
            // The network side keeps the rules: Open only when closed,
            // the rest only when open.
            if (event == StreamEvent::Open) == net_open[id] {
                continue;
            }
            match event {
                StreamEvent::Open => {
                    net_open[id] = true;
                    net_closed_by_us[id] = false;
                }
                StreamEvent::Close => net_open[id] = false,
                _ => {}
            }
            relay.from_network(p, &pool, &mut out);
        } else {
            relay.from_application(p, &pool, &mut out);
        }
        for p in out.plain.iter() {
            let i = stream::socket(p) as usize;
            match stream::event(p) {
                StreamEvent::Open => {
                    assert!(!app_open[i], "step {step}: a second Open for {i}");
                    app_open[i] = true;
                }
                StreamEvent::Close => {
                    assert!(app_open[i], "step {step}: Close without Open for {i}");
                    app_open[i] = false;
                }
                e => assert!(app_open[i], "step {step}: {e:?} for {i}, not open"),
            }
        }
        for p in out.records.iter() {
            let i = stream::socket(p) as usize;
            assert!(
                !net_closed_by_us[i],
                "step {step}: {:?} to the network after our Close of {i}",
                stream::event(p)
            );
            assert!(
                net_open[i],
                "step {step}: {:?} to the network for {i}, not open",
                stream::event(p)
            );
            if stream::event(p) == StreamEvent::Close {
                net_closed_by_us[i] = true;
            }
        }
    }
    assert!(relay.connections() <= 4);
}

#[test]
fn sessions_resume_with_tickets_and_with_the_cache() {
    for (keywords, version) in [
        ("", &rustls::version::TLS13),
        ("", &rustls::version::TLS12),
        (", TICKETS false", &rustls::version::TLS13),
        (", TICKETS false", &rustls::version::TLS12),
    ] {
        let dir = TempDir::new("resume");
        let (relay, trust) = server(&dir, keywords);
        let mut rig = Rig::new(relay);
        let client_config = rustls_client(&trust, &[version]);
        for round in 0..2 {
            let mut client = client_connection(&client_config);
            rig.seen = Seen::default();
            rig.network(rig.control(StreamEvent::Open));
            rig.handshake(&mut client);
            // TLS 1.3 tickets come after the handshake: a byte the
            // client reads makes it take them.
            rig.application(rig.data(b"x", 1).pop().unwrap());
            rig.relay_to_peer(&mut client).unwrap();
            let kind = client.handshake_kind().unwrap();
            let expected = if round == 0 {
                rustls::HandshakeKind::Full
            } else {
                rustls::HandshakeKind::Resumed
            };
            assert_eq!(kind, expected, "{keywords:?} {version:?} round {round}");
            rig.network(rig.control(StreamEvent::Close));
        }
        let c = &rig.relay.counters;
        assert_eq!((c.handshakes, c.resumed), (2, 1), "{keywords:?} {version:?}");
    }
}

#[test]
fn no_resumption_when_cache_and_tickets_are_off() {
    let dir = TempDir::new("noresume");
    let (relay, trust) = server(&dir, ", TICKETS false, SESSION_CACHE 0");
    let mut rig = Rig::new(relay);
    let client_config = rustls_client(&trust, &[&rustls::version::TLS13]);
    for _ in 0..2 {
        let mut client = client_connection(&client_config);
        rig.seen = Seen::default();
        rig.network(rig.control(StreamEvent::Open));
        rig.handshake(&mut client);
        assert_eq!(client.handshake_kind(), Some(rustls::HandshakeKind::Full));
        rig.network(rig.control(StreamEvent::Close));
    }
    assert_eq!(rig.relay.counters.resumed, 0);
}

#[test]
fn connections_over_the_limit_are_closed_and_counted() {
    let dir = TempDir::new("limit");
    let (cert, key) = cert::write_self_signed(&dir.0, &["localhost".to_string()]).unwrap();
    let config = config::server(&mut Args::new(&format!(
        "CERT {}, KEY {}",
        cert.display(),
        key.display()
    )))
    .unwrap();
    let mut rig = Rig::new(Relay::new(Role::Server(config), 1));
    rig.network(rig.control(StreamEvent::Open));
    let mut second = rig.control(StreamEvent::Open);
    stream::set_socket(&mut second, ID + 1);
    let mut out = Out::default();
    rig.relay.from_network(second, &rig.pool, &mut out);
    assert!(out.plain.is_empty(), "the application never hears of it");
    assert_eq!(out.records.len(), 1);
    assert_eq!(
        (stream::socket(&out.records[0]), stream::event(&out.records[0])),
        (ID + 1, StreamEvent::Close)
    );
    assert_eq!(rig.relay.counters.refused, 1);
    // Its Close from the network ends the entry silently.
    let mut close = rig.control(StreamEvent::Close);
    stream::set_socket(&mut close, ID + 1);
    let mut out = Out::default();
    rig.relay.from_network(close, &rig.pool, &mut out);
    assert!(out.plain.is_empty() && out.records.is_empty());
    assert_eq!(rig.relay.connections(), 1);
}

#[test]
fn the_application_closing_sends_close_notify_and_gets_the_network_close() {
    let dir = TempDir::new("appclose");
    let (relay, trust) = server(&dir, "");
    let mut rig = Rig::new(relay);
    let mut client = client_connection(&rustls_client(&trust, &[&rustls::version::TLS13]));
    rig.network(rig.control(StreamEvent::Open));
    rig.handshake(&mut client);
    rig.application(rig.control(StreamEvent::Close));
    assert_eq!(rig.seen.net_events, [StreamEvent::Close]);
    rig.relay_to_peer(&mut client).unwrap();
    let mut rest = Vec::new();
    assert_eq!(client.reader().read_to_end(&mut rest).unwrap(), 0);
    // Data after the Close is dropped; the network's Close comes back.
    for p in rig.data(b"late", 4) {
        rig.application(p);
    }
    assert_eq!(rig.relay.counters.drops, 1);
    rig.network(rig.control(StreamEvent::Close));
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Close]);
}

#[test]
fn a_fin_without_close_notify_is_an_eof_counted_as_truncated() {
    let dir = TempDir::new("trunc");
    let (relay, trust) = server(&dir, "");
    let mut rig = Rig::new(relay);
    let mut client = client_connection(&rustls_client(&trust, &[&rustls::version::TLS12]));
    rig.network(rig.control(StreamEvent::Open));
    rig.handshake(&mut client);
    rig.network(rig.control(StreamEvent::Eof));
    rig.network(rig.control(StreamEvent::Eof));
    assert_eq!(rig.seen.app_events, [StreamEvent::Open, StreamEvent::Eof]);
    assert_eq!(rig.relay.counters.truncated, 1);
}

/// TLSClient and TLSServer relays back to back: the client's connect
/// request, its answer, a handshake between the two and bytes both ways.
fn client_against_server(client_keywords: impl Fn(&TempDir) -> String) {
    let dir = TempDir::new("pair");
    let (server_relay, _) = server(&dir, "");
    let mut args = Args::new(&client_keywords(&dir));
    let (config, name) = config::client(&mut args).unwrap();
    args.complete().unwrap();
    let mut client = Rig::new(Relay::new(Role::Client { config, name }, 10));
    let mut server = Rig::new(server_relay);

    // The application asks to connect and writes at once, and ends its
    // side: the request goes on unchanged, the ClientHello behind it.
    let server_address = oxnet_stack::wire::IpEndpoint::new(std::net::Ipv4Addr::new(10, 0, 0, 2), 443);
    client.application(stream::open_request(&client.pool, ID, server_address).unwrap());
    let early = random_bytes(5000, 5);
    for p in client.data(&early, 1400) {
        client.application(p);
    }
    client.application(client.control(StreamEvent::Eof));
    assert_eq!(client.seen.net_events, [StreamEvent::Open]);
    assert_eq!(client.seen.net_bytes.first(), Some(&0x16));
    // Connected.
    client.network(client.control(StreamEvent::Open));
    server.network(server.control(StreamEvent::Open));
    assert_eq!(client.seen.app_events, [StreamEvent::Open]);
    for _ in 0..4 {
        shuttle(&mut client, &mut server);
        shuttle(&mut server, &mut client);
    }
    // What was written before the handshake arrived, then the Eof
    // (close_notify after it, and the FIN).
    assert!(server.seen.app_bytes == early);
    assert_eq!(server.seen.app_events, [StreamEvent::Open, StreamEvent::Eof]);
    assert_eq!(client.seen.net_events, [StreamEvent::Open, StreamEvent::Eof]);
    assert_eq!(
        (client.relay.counters.handshakes, server.relay.counters.handshakes),
        (1, 1)
    );
    let down = random_bytes(30_000, 4);
    for p in server.data(&down, 1400) {
        server.application(p);
    }
    shuttle(&mut server, &mut client);
    assert!(client.seen.app_bytes == down);
    assert_eq!((client.relay.counters.errors, server.relay.counters.errors), (0, 0));
}

#[test]
fn tls_client_talks_to_tls_server_insecure() {
    client_against_server(|_| "INSECURE true".into());
}

#[test]
fn tls_client_talks_to_tls_server_with_its_ca() {
    client_against_server(|dir| format!("CA {}, SERVER_NAME localhost", dir.path("cert.pem")));
}

#[test]
fn tls_client_rejects_a_certificate_for_another_name() {
    let dir = TempDir::new("wrongname");
    let (server_relay, _) = server(&dir, "");
    let mut args = Args::new(&format!("CA {}, SERVER_NAME example.org", dir.path("cert.pem")));
    let (config, name) = config::client(&mut args).unwrap();
    let mut client = Rig::new(Relay::new(Role::Client { config, name }, 10));
    let mut server = Rig::new(server_relay);
    client.network(client.control(StreamEvent::Open));
    server.network(server.control(StreamEvent::Open));
    for _ in 0..3 {
        shuttle(&mut client, &mut server);
        shuttle(&mut server, &mut client);
    }
    assert_eq!(client.relay.counters.errors, 1);
    assert_eq!(client.seen.app_errno, Some(libc::EPROTO));
    assert!(
        client.relay.last_error.contains("not valid for name"),
        "{}",
        client.relay.last_error
    );
}

#[test]
fn keywords_are_checked_with_clear_errors() {
    let dir = TempDir::new("keywords");
    let cases: &[(&str, &str)] = &[
        (
            "CERT /nonexistent/cert.pem, KEY /nonexistent/key.pem",
            "CERT /nonexistent/cert.pem",
        ),
        ("CERT x.pem", "CERT given without KEY"),
        ("VERSIONS 1.1", "VERSIONS: '1.1'"),
    ];
    for (conf, message) in cases {
        let e = config::server(&mut Args::new(conf)).unwrap_err();
        assert!(e.contains(message), "{conf}: {e}");
    }
    let e = config::client(&mut Args::new("SERVER_NAME localhost")).unwrap_err();
    assert!(e.contains("CA FILE") && e.contains("INSECURE"), "{e}");
    // A key that is not the certificate's.
    let (cert, _) = cert::write_self_signed(&dir.0, &["a".to_string()]).unwrap();
    let other = TempDir::new("keywords-other");
    let (_, key) = cert::write_self_signed(&other.0, &["b".to_string()]).unwrap();
    let e = config::server(&mut Args::new(&format!(
        "CERT {}, KEY {}",
        cert.display(),
        key.display()
    )))
    .unwrap_err();
    assert!(e.starts_with("CERT/KEY"), "{e}");
}

#[test]
fn an_rsa_2048_key_from_openssl_serves_tls12_and_tls13_and_1024_bits_are_refused() {
    let dir = TempDir::new("rsa");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost", "-keyout"])
        .arg(dir.path("key.pem"))
        .arg("-out")
        .arg(dir.path("cert.pem"))
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no openssl");
        return;
    }
    let config = config::server(&mut Args::new(&format!(
        "CERT {}, KEY {}",
        dir.path("cert.pem"),
        dir.path("key.pem")
    )))
    .unwrap();
    for version in ["1.2", "1.3"] {
        let mut rig = Rig::new(Relay::new(Role::Server(config.clone()), 10));
        // openssl's certificate says CA:TRUE, which a verifier refuses
        // for a server: INSECURE still checks the RSA signature.
        let (client_config, _) = config::client(&mut Args::new(&format!("INSECURE true, VERSIONS {version}"))).unwrap();
        let mut client = client_connection(&client_config);
        rig.network(rig.control(StreamEvent::Open));
        rig.handshake(&mut client);
        assert_eq!(client.peer_certificates().map(|c| c.len()), Some(1));
        assert_eq!(rig.relay.counters.handshakes, 1);
    }
    // RSA below 2048 bits is refused when the element is configured, as
    // Debian 12's OpenSSL refuses it at handshake time.
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:1024",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(dir.path("key1024.pem"))
        .arg("-out")
        .arg(dir.path("cert1024.pem"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let conf = format!("CERT {}, KEY {}", dir.path("cert1024.pem"), dir.path("key1024.pem"));
    let e = config::server(&mut Args::new(&conf)).unwrap_err();
    assert!(e.starts_with("CERT/KEY"), "{e}");
}

#[test]
fn self_signed_certificates_name_hosts_and_addresses() {
    let made = cert::self_signed(&["localhost".into(), "10.0.0.2".into()]).unwrap();
    assert!(made.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(made.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    // A client that checks the address accepts it.
    let der = CertificateDer::from_pem_slice(made.cert_pem.as_bytes()).unwrap();
    let config = rustls_client(&der, &[&rustls::version::TLS13]);
    let server_config = {
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(made.key_pem.as_bytes()).unwrap();
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap()
    };
    let mut rig = Rig::new(Relay::new(Role::Server(Arc::new(server_config)), 10));
    let name = ServerName::try_from("10.0.0.2").unwrap();
    let mut client = rustls::Connection::Client(rustls::ClientConnection::new(config, name).unwrap());
    rig.network(rig.control(StreamEvent::Open));
    rig.handshake(&mut client);
    assert_eq!(rig.relay.counters.errors, 0);
}

#[test]
fn the_classifier_sends_tls_flows_to_0_and_others_to_1_per_connection() {
    let pool = pool();
    let mut c = TlsClassifier::new();
    let mut outs = [PacketBatch::default(), PacketBatch::default()];
    let packet = |id: u32, e: StreamEvent, bytes: &[u8]| {
        let mut p = stream::control(&pool, id, e).unwrap();
        p.set_len(bytes.len()).unwrap();
        p.copy_from_slice(bytes);
        p
    };
    // Connection 1 speaks TLS, 2 HTTP, 3 ends before a byte.
    for (id, e, bytes) in [
        (1, StreamEvent::Open, &b""[..]),
        (2, StreamEvent::Open, b""),
        (3, StreamEvent::Open, b""),
        (2, StreamEvent::Data, b"GET / HTTP/1.1\r\n"),
        (1, StreamEvent::Data, &[0x16, 3, 1, 0, 5]),
        (1, StreamEvent::Data, b"GET"),
        (3, StreamEvent::Close, b""),
        (1, StreamEvent::Close, b""),
        (2, StreamEvent::Eof, b""),
        (9, StreamEvent::Data, b"?"),
    ] {
        c.classify(packet(id, e, bytes), &mut outs);
    }
    let summary = |b: &PacketBatch| {
        b.iter()
            .map(|p| (stream::socket(p), stream::event(p), p.len()))
            .collect::<Vec<_>>()
    };
    use StreamEvent::*;
    assert_eq!(
        summary(&outs[0]),
        [(1, Open, 0), (1, Data, 5), (1, Data, 3), (1, Close, 0)]
    );
    assert_eq!(
        summary(&outs[1]),
        [(2, Open, 0), (2, Data, 16), (3, Open, 0), (3, Close, 0), (2, Eof, 0)]
    );
    let handler = |name| oxnet_graph::element::Element::read_handler(&c, name).unwrap();
    assert_eq!(
        (handler("tls"), handler("plain"), handler("drops")),
        ("1".into(), "2".into(), "1".into())
    );
    assert_eq!(c.connections(), 1, "connection 2 is still open; 1 and 3 are gone");
}
