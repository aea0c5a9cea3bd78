//! Byte streams as packets between application elements (ClickNF §4,
//! Figures 6 and 11): what TCPEpollServer and TCPEpollClient push out and
//! take in, and what every element between them (TLSServer, HTTPCache,
//! Socks4Proxy, the memcached server, an echo) reads and writes.
//!
//! A packet on these ports is one piece of one connection's stream. Two
//! annotations say which and what (the stack's annotation table,
//! [`oxnet_stack::anno`]):
//!
//! | bytes | what |
//! |---|---|
//! | 40..44 | the connection's id ([`socket`]), chosen by the element that owns the connection; never 0 |
//! | 38 | the [`StreamEvent`] |
//! | 28..32 | with [`StreamEvent::Close`]: the errno it ended with (0: a clean end) |
//! | 39 | with an empty `Data`: a [`Flow`] signal (0: none) |
//!
//! The rules, for every element that owns connections:
//! - Out: each connection starts with one `Open`, then `Data` (the
//!   stream's bytes, in order, in as many packets as it likes, each with
//!   at least one byte), at most one `Eof` (the peer will send nothing
//!   more), and ends with exactly one `Close` (the connection has left
//!   the table; its id may be reused after it).
//! - In: `Data` is written to the connection (in order, nothing lost: a
//!   connection without room holds it); `Eof` shuts our sending side
//!   after what was given before it (a FIN); `Close` ends the connection
//!   after what was given before it, and its `Close` comes out; `Open`
//!   is ignored by a server and is a connect request for a client
//!   ([`open_request`]). A packet for an id not in the table is dropped
//!   and counted (a `Close` of one is ignored: it is gone already).
//!
//! Flow control across owners (a proxy's two sides, Figure 11): an
//! owner configured with `FLOW_CONTROL true` says [`Flow::Pause`] for a
//! connection whose data waits beyond its limit (more is fed than its
//! peer reads) and [`Flow::Resume`] once half has gone, each as an empty
//! `Data` packet ([`flow_signal`]); pushed into any owner, Pause stops
//! reading that connection until Resume. An element that relays two
//! owners' streams passes the signals across, so a slow reader stops
//! its source's data being read instead of queuing it; an element that
//! knows nothing of them sees empty Data.
//!
//! Data packets may be chains; the owner sends their bytes in order.
//! Control packets (`Open`, `Eof`, `Close`) carry no bytes, except a
//! client's `Open` request, which carries the destination.

use oxnet_driver::{Mempool, Packet};
use oxnet_stack::wire::{IpAddress, IpEndpoint};
use std::net::{Ipv4Addr, Ipv6Addr};

const SOCKET: usize = 40;
const EVENT: usize = 38;
const ERRNO: usize = 28;
const FLOW: usize = 39;

/// What a stream packet is (annotation byte 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StreamEvent {
    /// Bytes of the stream (the annotation's zero value).
    Data = 0,
    /// A new connection (out); a connect request to a client (in).
    Open = 1,
    /// The end of the stream in this direction: the peer's FIN (out), a
    /// FIN to send (in).
    Eof = 2,
    /// The connection is gone (out, with its errno); end it (in).
    Close = 3,
}

/// The connection id of a stream packet (0: none).
pub fn socket(p: &Packet) -> u32 {
    let a = &p.anno().area;
    u32::from_ne_bytes([a[SOCKET], a[SOCKET + 1], a[SOCKET + 2], a[SOCKET + 3]])
}

pub fn set_socket(p: &mut Packet, id: u32) {
    p.anno_mut().area[SOCKET..SOCKET + 4].copy_from_slice(&id.to_ne_bytes());
}

/// The packet's event; an unknown value reads as `Data`'s neighbour
/// `Close`, so that a corrupt annotation ends a connection rather than
/// writing control bytes into it.
pub fn event(p: &Packet) -> StreamEvent {
    match p.anno().area[EVENT] {
        0 => StreamEvent::Data,
        1 => StreamEvent::Open,
        2 => StreamEvent::Eof,
        _ => StreamEvent::Close,
    }
}

pub fn set_event(p: &mut Packet, e: StreamEvent) {
    p.anno_mut().area[EVENT] = e as u8;
}

/// The errno a `Close` carries (0: a clean end).
pub fn errno(p: &Packet) -> i32 {
    let a = &p.anno().area;
    i32::from_ne_bytes([a[ERRNO], a[ERRNO + 1], a[ERRNO + 2], a[ERRNO + 3]])
}

pub fn set_errno(p: &mut Packet, errno: i32) {
    p.anno_mut().area[ERRNO..ERRNO + 4].copy_from_slice(&errno.to_ne_bytes());
}

/// Marks `p` as data of connection `id`.
pub fn data(mut p: Packet, id: u32) -> Packet {
    set_socket(&mut p, id);
    set_event(&mut p, StreamEvent::Data);
    p.anno_mut().area[FLOW] = 0;
    p
}

/// A flow signal between owners of connections (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Flow {
    /// Stop reading this connection: its peer has too much waiting.
    Pause = 1,
    /// Read it again.
    Resume = 2,
}

/// The flow signal `p` carries, if it is one (an empty Data packet with
/// the flow annotation).
pub fn flow(p: &Packet) -> Option<Flow> {
    if event(p) != StreamEvent::Data || p.total_len() != 0 {
        return None;
    }
    match p.anno().area[FLOW] {
        1 => Some(Flow::Pause),
        2 => Some(Flow::Resume),
        _ => None,
    }
}

/// A flow signal for connection `id`; None if the pool is empty.
pub fn flow_signal(pool: &Mempool, id: u32, f: Flow) -> Option<Packet> {
    let mut p = control(pool, id, StreamEvent::Data)?;
    p.anno_mut().area[FLOW] = f as u8;
    Some(p)
}

/// A control packet (no bytes) of connection `id`, from `pool`; None if
/// the pool is empty.
pub fn control(pool: &Mempool, id: u32, e: StreamEvent) -> Option<Packet> {
    let mut p = pool.alloc().ok()?;
    let _ = p.set_len(0);
    set_socket(&mut p, id);
    set_event(&mut p, e);
    p.anno_mut().area[FLOW] = 0;
    Some(p)
}

/// A `Close` of connection `id` with `errno`.
pub fn close(pool: &Mempool, id: u32, errno: i32) -> Option<Packet> {
    let mut p = control(pool, id, StreamEvent::Close)?;
    set_errno(&mut p, errno);
    Some(p)
}

/// A connect request to a client element (TCPEpollClient): `Open` for
/// connection `id` (the requester's choice, unique among its open
/// requests to that client) to `remote`. The destination is the packet's
/// bytes: 4 or 6 (the family), the address's 4 or 16 bytes, the port
/// (big-endian).
pub fn open_request(pool: &Mempool, id: u32, remote: IpEndpoint) -> Option<Packet> {
    let mut p = control(pool, id, StreamEvent::Open)?;
    let mut bytes = [0u8; 19];
    let n = match remote.addr {
        IpAddress::V4(a) => {
            bytes[0] = 4;
            bytes[1..5].copy_from_slice(&a.octets());
            5
        }
        IpAddress::V6(a) => {
            bytes[0] = 6;
            bytes[1..17].copy_from_slice(&a.octets());
            17
        }
    };
    bytes[n..n + 2].copy_from_slice(&remote.port.to_be_bytes());
    p.set_len(n + 2).ok()?;
    p.copy_from_slice(&bytes[..n + 2]);
    Some(p)
}

/// The destination of a connect request; None if its bytes are not one.
pub fn parse_open_request(p: &Packet) -> Option<IpEndpoint> {
    let b: &[u8] = p;
    let (addr, rest) = match (b.first()?, b.len()) {
        (4, 7) => {
            let a: [u8; 4] = b[1..5].try_into().ok()?;
            (IpAddress::V4(Ipv4Addr::from(a)), &b[5..])
        }
        (6, 19) => {
            let a: [u8; 16] = b[1..17].try_into().ok()?;
            (IpAddress::V6(Ipv6Addr::from(a)), &b[17..])
        }
        _ => return None,
    };
    Some(IpEndpoint {
        addr,
        port: u16::from_be_bytes([rest[0], rest[1]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Mempool {
        Mempool::new("stream-test", 16, oxnet_driver::MemoryKind::Plain).unwrap()
    }

    #[test]
    fn annotations_round_trip() {
        let pool = pool();
        let mut p = close(&pool, 7, libc::ECONNRESET).unwrap();
        assert_eq!(
            (socket(&p), event(&p), errno(&p), p.len()),
            (7, StreamEvent::Close, libc::ECONNRESET, 0)
        );
        set_event(&mut p, StreamEvent::Eof);
        assert_eq!(event(&p), StreamEvent::Eof);
        p.anno_mut().area[EVENT] = 200;
        assert_eq!(event(&p), StreamEvent::Close, "unknown events end the connection");
    }

    #[test]
    fn flow_signals_are_empty_data_with_the_flow_byte() {
        let pool = pool();
        let p = flow_signal(&pool, 9, Flow::Pause).unwrap();
        assert_eq!(
            (socket(&p), event(&p), flow(&p), p.len()),
            (9, StreamEvent::Data, Some(Flow::Pause), 0)
        );
        assert_eq!(flow(&flow_signal(&pool, 9, Flow::Resume).unwrap()), Some(Flow::Resume));
        let mut d = data(flow_signal(&pool, 9, Flow::Pause).unwrap(), 9);
        assert_eq!(flow(&d), None, "data() clears the signal");
        d.anno_mut().area[FLOW] = 1;
        d.set_len(1).unwrap();
        assert_eq!(flow(&d), None, "bytes are never a signal");
        assert_eq!(flow(&control(&pool, 9, StreamEvent::Eof).unwrap()), None);
    }

    #[test]
    fn open_requests_round_trip_and_garbage_is_none() {
        let pool = pool();
        for remote in [
            IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 2), 80),
            IpEndpoint::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), 65535),
        ] {
            let p = open_request(&pool, 3, remote).unwrap();
            assert_eq!((socket(&p), event(&p)), (3, StreamEvent::Open));
            assert_eq!(parse_open_request(&p), Some(remote));
        }
        let mut p = control(&pool, 1, StreamEvent::Open).unwrap();
        assert_eq!(parse_open_request(&p), None);
        for bad in [&[4u8, 1, 2, 3][..], &[6, 0, 0], &[5, 1, 2, 3, 4, 0, 80], &[4; 19]] {
            p.set_len(bad.len()).unwrap();
            p.copy_from_slice(bad);
            assert_eq!(parse_open_request(&p), None, "{bad:?}");
        }
    }
}
