//! One connection's steps, for [`super::relay`]: records in and
//! plaintext out, what waited for the handshake's end or for packet
//! buffers, the application's Eof and Close, a TLS error's end.
//!
//! An empty packet pool loses nothing: plaintext and records stay in
//! rustls (bounded by its own limits: past them the connection fails),
//! the connection is marked `starved`, and an Eof or Close waits behind
//! the bytes it follows until a later turn (`settle`) sends them.

use super::relay::{Counters, Out};
use super::writer::StreamWriter;
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch};
use rustls::Connection;
use std::io::Read;

/// One connection's state.
#[derive(Default)]
pub(super) struct Conn {
    /// None after the end (and in the entry of a refused connection).
    pub(super) tls: Option<Box<Connection>>,
    /// The application had its Close (a TLS error): the network's Close
    /// that follows is not passed on.
    pub(super) app_closed: bool,
    /// A Close went to the network: nothing more goes there.
    pub(super) net_closed: bool,
    /// The application had its Eof.
    pub(super) eof_to_app: bool,
    /// close_notify and Eof went to the network.
    pub(super) eof_to_net: bool,
    /// The application's Eof waits: for the handshake's end (plaintext
    /// rustls holds until then must go first), or for buffers (records
    /// still in rustls).
    pub(super) eof_waiting: bool,
    /// The application's Close waits for buffers (records in rustls).
    pub(super) close_waiting: bool,
    /// close_notify was given to rustls.
    pub(super) close_notify_sent: bool,
    /// The errno of the application's Close.
    pub(super) close_errno: i32,
    /// The network's Open came.
    pub(super) connected: bool,
    /// Plaintext or records wait in rustls for packet buffers.
    pub(super) starved: bool,
    /// The network's Eof came while starved: it goes after the plaintext.
    pub(super) fin_waiting: bool,
    /// The handshake was counted.
    pub(super) handshaken: bool,
}

/// Feeds `p`'s bytes to rustls, handing plaintext and handshake
/// records on as they come.
pub(super) fn decrypt(
    tls: &mut Connection,
    p: &Packet,
    id: u32,
    pool: &Mempool,
    out: &mut Out,
    counters: &mut Counters,
) -> Result<(), String> {
    for segment in p.segments() {
        let mut bytes: &[u8] = segment;
        while !bytes.is_empty() {
            // rustls takes what fits in its record buffer; the rest goes
            // in after these records are processed.
            tls.read_tls(&mut bytes).map_err(|e| e.to_string())?;
            let state = tls.process_new_packets().map_err(|e| e.to_string())?;
            // With the pool empty, the plaintext stays in rustls and the
            // records go on in: a later turn takes it (`settle`), or
            // rustls's limit on plaintext not read ends the connection;
            // no byte is skipped either way.
            take_plaintext(tls, state.plaintext_bytes_to_read(), id, pool, &mut out.plain, counters)?;
            flush(tls, id, pool, &mut out.records, counters);
        }
    }
    Ok(())
}

/// After records went in, or when buffers may be back: what waits in
/// rustls goes out, the handshake's end is counted, and what waited for
/// it goes (the application's Eof or Close to the network; the peer's
/// close_notify or FIN to the application, after all its plaintext).
pub(super) fn settle(
    conn: &mut Conn,
    id: u32,
    pool: &Mempool,
    out: &mut Out,
    counters: &mut Counters,
) -> Result<(), String> {
    let Some(tls) = conn.tls.as_mut() else {
        return Ok(());
    };
    // No new bytes: this only reports the state.
    let state = tls.process_new_packets().map_err(|e| e.to_string())?;
    let drained = take_plaintext(tls, state.plaintext_bytes_to_read(), id, pool, &mut out.plain, counters)?;
    let flushed = flush(tls, id, pool, &mut out.records, counters);
    let handshaking = tls.is_handshaking();
    if !conn.handshaken && !handshaking {
        conn.handshaken = true;
        counters.handshakes += 1;
        if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            counters.resumed += 1;
        }
    }
    conn.starved = !(drained && flushed);
    if drained && !conn.eof_to_app {
        // RFC 8446 §6.1: close_notify, the clean end of the peer's data
        // (sent on once every byte before it is out).
        let notified = state.peer_has_closed();
        if notified || conn.fin_waiting {
            match stream::control(pool, id, StreamEvent::Eof) {
                Some(p) => {
                    if !notified {
                        counters.truncated += 1;
                    }
                    conn.eof_to_app = true;
                    out.plain.push(p);
                }
                None => {
                    counters.no_buffers += 1;
                    conn.starved = true;
                }
            }
        }
    }
    if conn.eof_waiting && !handshaking {
        send_eof(conn, id, pool, out, counters);
    }
    if conn.close_waiting {
        send_close(conn, id, pool, out, counters);
    }
    Ok(())
}

/// The application's Eof: close_notify (RFC 8446 §6.1), then, once every
/// record before it is out, the Eof (our FIN).
pub(super) fn send_eof(conn: &mut Conn, id: u32, pool: &Mempool, out: &mut Out, counters: &mut Counters) {
    let Some(tls) = conn.tls.as_mut() else {
        return;
    };
    if !conn.close_notify_sent {
        conn.close_notify_sent = true;
        tls.send_close_notify();
    }
    let eof = flush(tls, id, pool, &mut out.records, counters)
        .then(|| stream::control(pool, id, StreamEvent::Eof))
        .flatten();
    match eof {
        Some(p) => {
            conn.eof_waiting = false;
            conn.eof_to_net = true;
            out.records.push(p);
        }
        None => {
            counters.no_buffers += 1;
            conn.starved = true;
        }
    }
}

/// The application's Close: close_notify if not sent, then, once every
/// record before it is out, the Close (with the application's errno);
/// the rustls connection is dropped.
pub(super) fn send_close(conn: &mut Conn, id: u32, pool: &Mempool, out: &mut Out, counters: &mut Counters) {
    if let Some(tls) = conn.tls.as_mut() {
        if !conn.close_notify_sent {
            conn.close_notify_sent = true;
            tls.send_close_notify();
        }
        if !flush(tls, id, pool, &mut out.records, counters) {
            conn.starved = true;
            return;
        }
    }
    let Some(close) = stream::close(pool, id, conn.close_errno) else {
        counters.no_buffers += 1;
        conn.starved = true;
        return;
    };
    out.records.push(close);
    conn.tls = None;
    conn.starved = false;
    conn.close_waiting = false;
    conn.net_closed = true;
}

/// Up to `waiting` bytes of plaintext from rustls into Data packets;
/// false if the pool ran empty first.
pub(super) fn take_plaintext(
    tls: &mut Connection,
    mut waiting: usize,
    id: u32,
    pool: &Mempool,
    plain: &mut PacketBatch,
    counters: &mut Counters,
) -> Result<bool, String> {
    while waiting > 0 {
        let Ok(mut q) = pool.alloc() else {
            counters.no_buffers += 1;
            return Ok(false);
        };
        let room = q.capacity();
        let _ = q.set_len(room);
        let n = tls.reader().read(&mut q[..]).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        let _ = q.set_len(n);
        counters.plain_in += n as u64;
        plain.push(stream::data(q, id));
        waiting = waiting.saturating_sub(n);
    }
    Ok(true)
}

/// Every record rustls has for the network, into Data packets; false if
/// the pool ran empty first (the rest stays in rustls).
pub(super) fn flush(
    tls: &mut Connection,
    id: u32,
    pool: &Mempool,
    records: &mut PacketBatch,
    counters: &mut Counters,
) -> bool {
    let mut writer = StreamWriter::new(pool, id, records);
    while tls.wants_write() {
        if tls.write_tls(&mut writer).is_err() {
            counters.no_buffers += 1;
            return false;
        }
    }
    true
}

/// Ends a connection after a TLS error: the alert rustls queued for it
/// (RFC 8446 §6.2), then a Close, to the network; a Close with EPROTO to
/// the application.
pub(super) fn fail(conn: &mut Conn, id: u32, pool: &Mempool, out: &mut Out, counters: &mut Counters) {
    if let Some(mut tls) = conn.tls.take() {
        if !conn.net_closed {
            flush(&mut tls, id, pool, &mut out.records, counters);
        }
    }
    conn.starved = false;
    if !conn.net_closed {
        conn.net_closed = true;
        push_close(pool, id, 0, &mut out.records, counters);
    }
    if !conn.app_closed {
        conn.app_closed = true;
        push_close(pool, id, libc::EPROTO, &mut out.plain, counters);
    }
}

pub(super) fn push_close(pool: &Mempool, id: u32, errno: i32, out: &mut PacketBatch, counters: &mut Counters) {
    match stream::close(pool, id, errno) {
        Some(p) => out.push(p),
        None => counters.no_buffers += 1,
    }
}
