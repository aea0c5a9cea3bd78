//! Responses as stream packets (RFC 9112 §4, RFC 9110 §15): a head
//! packet (status line, Date, the object's fields, Content-Length,
//! Connection) and the body. A small body is copied behind the head
//! (one packet, which the stack takes without a copy); a larger one
//! follows as attached segments of the stored buffers (no copy here;
//! `oxnet_driver::shared`).

use super::object::Object;
use oxnet_driver::{AttachPool, Mempool, Packet};
use std::io::Write;

/// Bodies up to this many bytes are copied into the head's packet: one
/// packet is cheaper than a head and an attached segment.
pub const INLINE_BODY: usize = 1024;

/// RFC 9110 §15's reason phrases for the statuses the cache sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        301 => "Moved Permanently",
        302 => "Found",
        403 => "Forbidden",
        410 => "Gone",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

/// What is common to every response.
pub struct Common<'a> {
    pub date: &'a str,
    pub keep_alive: bool,
    /// A HEAD: the head only (RFC 9110 §9.3.2).
    pub head: bool,
}

fn start(out: &mut Vec<u8>, status: u16, c: &Common<'_>) {
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: oxnet\r\nDate: {}\r\n",
        reason(status),
        c.date
    );
}

fn end(out: &mut Vec<u8>, c: &Common<'_>) {
    out.extend_from_slice(if c.keep_alive {
        b"Connection: keep-alive\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
}

fn packet(pool: &Mempool, bytes: &[u8]) -> Option<Packet> {
    let mut p = pool.alloc().ok()?;
    p.set_len(bytes.len()).ok()?;
    p.copy_from_slice(bytes);
    Some(p)
}

/// Copies `bytes` into as many packets of `pool` as they need.
fn packets(pool: &Mempool, bytes: &[u8], out: &mut Vec<Packet>) -> Option<()> {
    let room = pool.data_room().max(1);
    for piece in bytes.chunks(room) {
        out.push(packet(pool, piece)?);
    }
    Some(())
}

/// An error (or other bodiless-object) response: a short text body
/// naming the status; 405 says what is allowed (RFC 9110 §15.5.6).
pub fn error(status: u16, c: &Common<'_>, pool: &Mempool) -> Option<Vec<Packet>> {
    let body = format!("{status} {}\n", reason(status));
    let mut h = Vec::with_capacity(256);
    start(&mut h, status, c);
    if status == 405 {
        h.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    let _ = write!(h, "Content-Type: text/plain\r\nContent-Length: {}\r\n", body.len());
    end(&mut h, c);
    if !c.head {
        h.extend_from_slice(body.as_bytes());
    }
    let mut out = Vec::new();
    packets(pool, &h, &mut out)?;
    Some(out)
}

/// The object's response with `status` (its own, or 304), at `now`.
/// `copies` counts bodies that had to be copied (no attach header free).
pub fn object(
    o: &Object,
    status: u16,
    now: u64,
    c: &Common<'_>,
    pool: &Mempool,
    attach: &AttachPool,
    copies: &mut u64,
) -> Option<Vec<Packet>> {
    let mut h = Vec::with_capacity(512);
    start(&mut h, status, c);
    if o.from_origin {
        // RFC 9111 §5.1: a response from a cache says how old it is.
        let _ = write!(h, "Age: {}\r\n", o.freshness.age(now));
    }
    if status == 304 {
        h.extend_from_slice(&o.validators);
        end(&mut h, c);
        return Some(vec![packet(pool, &h)?]);
    }
    h.extend_from_slice(&o.fields);
    let _ = write!(h, "Content-Length: {}\r\n", o.len);
    end(&mut h, c);
    let mut out = Vec::with_capacity(1 + o.body.len());
    if c.head || o.len == 0 {
        packets(pool, &h, &mut out)?;
        return Some(out);
    }
    if o.len <= INLINE_BODY && h.len() + o.len <= pool.data_room() {
        for b in &o.body {
            h.extend_from_slice(b);
        }
        out.push(packet(pool, &h)?);
        return Some(out);
    }
    packets(pool, &h, &mut out)?;
    for b in &o.body {
        match b.attach_all(attach) {
            Ok(seg) => out.push(seg),
            Err(_) => {
                *copies += 1;
                packets(pool, b, &mut out)?;
            }
        }
    }
    Some(out)
}
