//! The work of TLSServer and TLSClient, apart from the graph so that
//! tests drive it with packets: a table of rustls connections by stream
//! id, records in from the network side and plaintext out to the
//! application, plaintext in from the application and records out.
//!
//! Per connection, in the stream rules' terms (crate::stream):
//! - network `Open`: a server makes its rustls connection; the `Open`
//!   goes on to the application;
//! - network `Data`: records are decrypted; plaintext goes to the
//!   application, handshake records back to the network; a peer's
//!   close_notify becomes the application's `Eof`;
//! - network `Eof`: the application's `Eof` if close_notify did not
//!   give it already (a truncated stream, RFC 8446 §6.1: counted);
//! - network `Close`: the rustls connection is dropped and the `Close`
//!   (its errno) goes on, unless the application had its `Close` already;
//! - application `Data`: encrypted, records to the network;
//! - application `Eof`: close_notify (RFC 8446 §6.1), then the `Eof`
//!   (after the handshake: plaintext written before it waits in rustls
//!   until then, and close_notify must not overtake it);
//! - application `Close`: close_notify if not sent, then the `Close`
//!   (during the handshake: at once, plaintext still waiting is lost);
//!   the network's `Close` that answers it goes back to the application;
//! - application `Open`: a client's connect request, passed on, and its
//!   rustls connection made, its ClientHello behind the request (the
//!   client element holds data until the connection is up); a server
//!   ignores it (stream rules);
//! - a TLS error: rustls's alert, then a `Close` to the network, and a
//!   `Close` with `EPROTO` to the application at once (its only one).
//!
//! Packets for an id not in the table are dropped (Data counted; a late
//! Eof or Close is the normal end of a race and is not).

use super::conn::{decrypt, fail, flush, push_close, send_close, send_eof, settle, Conn};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch};
use rustls::pki_types::ServerName;
use rustls::Connection;
use std::collections::HashMap;
use std::sync::Arc;

/// Plaintext that may wait in rustls before the handshake ends (the
/// application wrote before the peer finished): past it the connection
/// fails rather than hold more.
pub const PLAINTEXT_LIMIT: usize = 256 * 1024;

/// Which side of the handshake this end plays.
pub enum Role {
    Server(Arc<rustls::ServerConfig>),
    Client {
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    },
}

impl Role {
    fn connect(&self) -> Result<Connection, rustls::Error> {
        let mut conn = match self {
            Role::Server(config) => Connection::Server(rustls::ServerConnection::new(config.clone())?),
            Role::Client { config, name } => {
                Connection::Client(rustls::ClientConnection::new(config.clone(), name.clone())?)
            }
        };
        conn.set_buffer_limit(Some(PLAINTEXT_LIMIT));
        Ok(conn)
    }
}

/// What happened, for the elements' handlers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Connections whose rustls connection was made.
    pub opened: u64,
    /// Handshakes completed.
    pub handshakes: u64,
    /// Of those, resumed ones (a ticket or a cached session).
    pub resumed: u64,
    /// TLS errors (bad records, failed handshakes): alert and Close sent.
    pub errors: u64,
    /// Streams that ended (TCP FIN) without close_notify.
    pub truncated: u64,
    /// Connections refused over the element's LIMIT.
    pub refused: u64,
    /// Data for no connection, a closed one, or one not up yet.
    pub drops: u64,
    /// Times the packet pool was empty (bytes wait in rustls).
    pub no_buffers: u64,
    /// Plaintext bytes given to the application.
    pub plain_in: u64,
    /// Plaintext bytes taken from the application.
    pub plain_out: u64,
}

/// What one packet in made: packets for output 0 (the application) and
/// output 1 (the network).
#[derive(Default)]
pub struct Out {
    pub plain: PacketBatch,
    pub records: PacketBatch,
}

/// The connection table of one TLSServer or TLSClient.
pub struct Relay {
    role: Role,
    conns: HashMap<u32, Conn>,
    /// Ids of connections that found the pool empty.
    starved: Vec<u32>,
    limit: usize,
    pub counters: Counters,
    /// The last TLS error, for the `last_error` handler.
    pub last_error: String,
}

impl Relay {
    /// A relay for `role` holding at most `limit` connections.
    pub fn new(role: Role, limit: usize) -> Relay {
        Relay {
            role,
            conns: HashMap::new(),
            starved: Vec::new(),
            limit,
            counters: Counters::default(),
            last_error: String::new(),
        }
    }

    /// Connections in the table.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// A stream packet from the network side (input 0).
    pub fn from_network(&mut self, p: Packet, pool: &Mempool, out: &mut Out) {
        if !self.starved.is_empty() {
            self.retry_starved(pool, out);
        }
        let id = stream::socket(&p);
        match stream::event(&p) {
            StreamEvent::Open => self.network_open(id, p, pool, out),
            StreamEvent::Data => self.network_data(id, p, pool, out),
            StreamEvent::Eof => self.network_eof(id, p, out),
            StreamEvent::Close => {
                if let Some(mut conn) = self.conns.remove(&id) {
                    if conn.starved && !conn.app_closed {
                        // A last try for plaintext still in rustls; what
                        // the pool cannot take now is lost (counted).
                        let _ = settle(&mut conn, id, pool, out, &mut self.counters);
                    }
                    if !conn.app_closed {
                        out.plain.push(p);
                    }
                }
            }
        }
    }

    /// A stream packet from the application (input 1).
    pub fn from_application(&mut self, p: Packet, pool: &Mempool, out: &mut Out) {
        if !self.starved.is_empty() {
            self.retry_starved(pool, out);
        }
        let id = stream::socket(&p);
        match stream::event(&p) {
            StreamEvent::Open => self.application_open(id, p, pool, out),
            StreamEvent::Data => self.application_data(id, p, pool, out),
            StreamEvent::Eof => self.application_eof(id, p, pool, out),
            StreamEvent::Close => self.application_close(id, p, pool, out),
        }
    }

    fn network_open(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        let full = self.conns.len() >= self.limit;
        match self.conns.get_mut(&id) {
            // A duplicate Open: not by the rules.
            Some(conn) if conn.connected => {
                self.counters.drops += 1;
                return;
            }
            // A client's connection is up: its ClientHello went out with
            // the request.
            Some(conn) => {
                conn.connected = true;
                if !conn.app_closed {
                    out.plain.push(p);
                }
                return;
            }
            None if full => {
                self.counters.refused += 1;
                // The application never hears of it; the network's Close
                // ends the entry.
                let conn = self.conns.entry(id).or_default();
                conn.connected = true;
                conn.app_closed = true;
                conn.net_closed = true;
                push_close(pool, id, 0, &mut out.records, &mut self.counters);
                return;
            }
            None => {}
        }
        out.plain.push(p);
        self.conns.entry(id).or_default().connected = true;
        self.start(id, pool, out);
    }

    /// Makes connection `id`'s rustls connection (the role's) and sends
    /// what it says first (a client's ClientHello); a failure ends the
    /// connection.
    fn start(&mut self, id: u32, pool: &Mempool, out: &mut Out) {
        let conn = self.conns.entry(id).or_default();
        match self.role.connect() {
            Ok(mut tls) => {
                self.counters.opened += 1;
                flush(&mut tls, id, pool, &mut out.records, &mut self.counters);
                conn.tls = Some(Box::new(tls));
            }
            Err(e) => {
                self.last_error = e.to_string();
                self.counters.errors += 1;
                fail(conn, id, pool, out, &mut self.counters);
            }
        }
    }

    fn network_data(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        let Relay {
            conns,
            counters,
            last_error,
            starved,
            ..
        } = self;
        let Some(conn) = conns.get_mut(&id) else {
            counters.drops += 1;
            return;
        };
        let Some(tls) = conn.tls.as_mut() else {
            // After the end.
            counters.drops += 1;
            return;
        };
        let result = decrypt(tls, &p, id, pool, out, counters).and_then(|()| settle(conn, id, pool, out, counters));
        if let Err(e) = result {
            *last_error = e;
            counters.errors += 1;
            fail(conn, id, pool, out, counters);
            return;
        }
        if conn.starved && !starved.contains(&id) {
            starved.push(id);
        }
    }

    /// Connections with bytes waiting in rustls for packet buffers.
    pub fn starving(&self) -> bool {
        !self.starved.is_empty()
    }

    /// Gives the connections that found the pool empty another turn.
    pub fn retry_starved(&mut self, pool: &Mempool, out: &mut Out) {
        let ids = std::mem::take(&mut self.starved);
        for id in ids {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            if let Err(e) = settle(conn, id, pool, out, &mut self.counters) {
                self.last_error = e;
                self.counters.errors += 1;
                fail(conn, id, pool, out, &mut self.counters);
            } else if conn.starved {
                self.starved.push(id);
            }
        }
    }

    fn network_eof(&mut self, id: u32, p: Packet, out: &mut Out) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.app_closed || conn.eof_to_app {
            return;
        }
        if conn.starved {
            // Plaintext still waits in rustls: the Eof goes after it.
            conn.fin_waiting = true;
            return;
        }
        // The peer's FIN without close_notify: the application still
        // learns that the stream ended; a truncation is counted, not
        // treated as an error, as most clients end this way.
        self.counters.truncated += 1;
        conn.eof_to_app = true;
        out.plain.push(p);
    }

    fn application_open(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        if matches!(self.role, Role::Server(_)) {
            return;
        }
        if self.conns.contains_key(&id) {
            self.counters.drops += 1;
            return;
        }
        if self.conns.len() >= self.limit {
            self.counters.refused += 1;
            push_close(pool, id, libc::ENOBUFS, &mut out.plain, &mut self.counters);
            return;
        }
        // The request goes on, and the ClientHello right behind it: the
        // client element holds data until the connection is up, as it
        // holds the application's plaintext, which rustls keeps until the
        // handshake ends.
        out.records.push(p);
        self.start(id, pool, out);
    }

    fn application_data(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        let Relay {
            conns,
            counters,
            last_error,
            starved,
            ..
        } = self;
        let Some(conn) = conns
            .get_mut(&id)
            .filter(|c| !c.net_closed && !c.eof_to_net && !c.eof_waiting && !c.close_waiting)
        else {
            counters.drops += 1;
            return;
        };
        let Some(tls) = conn.tls.as_mut() else {
            counters.drops += 1;
            return;
        };
        for segment in p.segments() {
            let taken = std::io::Write::write(&mut tls.writer(), segment).unwrap_or(0);
            counters.plain_out += taken as u64;
            // Records out after each segment keep rustls's buffer small.
            if !flush(tls, id, pool, &mut out.records, counters) && !conn.starved {
                conn.starved = true;
                starved.push(id);
            }
            if taken < segment.len() {
                *last_error = format!("more than {PLAINTEXT_LIMIT} bytes of plaintext waiting");
                counters.errors += 1;
                fail(conn, id, pool, out, counters);
                return;
            }
        }
    }

    fn application_eof(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.net_closed || conn.eof_to_net || conn.eof_waiting || conn.close_waiting {
            return;
        }
        conn.eof_waiting = true;
        match conn.tls.as_ref() {
            // No TLS any more (not expected while the network is open).
            None => {
                conn.eof_waiting = false;
                conn.eof_to_net = true;
                out.records.push(p);
                return;
            }
            // close_notify now would overtake the plaintext rustls holds
            // until the handshake ends: the Eof waits for that (`settle`).
            Some(tls) if tls.is_handshaking() => {}
            Some(_) => send_eof(conn, id, pool, out, &mut self.counters),
        }
        if conn.starved && !self.starved.contains(&id) {
            self.starved.push(id);
        }
    }

    fn application_close(&mut self, id: u32, p: Packet, pool: &Mempool, out: &mut Out) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.net_closed || conn.close_waiting {
            return;
        }
        conn.eof_waiting = false;
        conn.close_waiting = true;
        conn.close_errno = stream::errno(&p);
        send_close(conn, id, pool, out, &mut self.counters);
        if conn.starved && !self.starved.contains(&id) {
            self.starved.push(id);
        }
    }
}
