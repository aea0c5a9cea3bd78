//! memcached's UDP protocol (protocol.txt, "UDP protocol"): every
//! datagram starts with an 8-byte frame header, big-endian: request ID
//! (echoed in the reply), sequence number, total number of datagrams in
//! the message, and 2 reserved bytes (0). A request must fit in one
//! datagram (sequence 0 of 1; others are dropped and counted, as
//! memcached ignores them); a reply is cut into datagrams of at most
//! 1400 bytes, header included, numbered from 0, each saying the total.
//!
//! Each request is answered as a connection of its own would be: the
//! datagram's payload goes through [`KvServer::input`] as the Data of a
//! connection opened and closed around it (an id with the top bit set,
//! which TCPEpollServer's ids never reach), and the reply's bytes are
//! what that connection would have been sent, copied into the
//! datagrams.

use super::conns::KvServer;
use crate::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, PacketBatch};
use oxnet_stack::udp::socket::UdpSocket;
use oxnet_stack::wire::IpEndpoint;

/// The frame header's length.
pub const HEADER: usize = 8;
/// Largest datagram memcached sends (its UDP_MAX_PAYLOAD_SIZE), header
/// included.
pub const MAX_DATAGRAM: usize = 1400;
/// Datagrams taken per socket per round.
const BUDGET: usize = 64;

/// The UDP side: its sockets and counters.
pub struct UdpFront {
    sockets: Vec<UdpSocket>,
    next: u32,
    /// Requests answered, datagrams sent, datagrams dropped (too short,
    /// a multi-datagram request, reserved bytes set), replies that could
    /// not be sent.
    pub requests: u64,
    pub datagrams_out: u64,
    pub dropped: u64,
    pub send_errors: u64,
}

impl UdpFront {
    /// Listens on `port` on every IPv4 and IPv6 address.
    pub fn bind(port: u16) -> Result<UdpFront, String> {
        let info = oxnet_stack::udp::info();
        let mut sockets = Vec::new();
        for local in [
            IpEndpoint::new(std::net::Ipv4Addr::UNSPECIFIED, port),
            IpEndpoint::new(std::net::Ipv6Addr::UNSPECIFIED, port),
        ] {
            sockets.push(
                UdpSocket::bind(&info, local)
                    .map_err(|e| format!("cannot bind UDP port {port}: {}", std::io::Error::from_raw_os_error(e)))?,
            );
        }
        Ok(UdpFront {
            sockets,
            next: 0,
            requests: 0,
            datagrams_out: 0,
            dropped: 0,
            send_errors: 0,
        })
    }

    /// Answers the datagrams that have arrived; returns whether any did.
    pub fn poll(&mut self, server: &mut KvServer, now: u64, pool: &Mempool) -> bool {
        let mut work = false;
        for s in 0..self.sockets.len() {
            for _ in 0..BUDGET {
                let Ok((mut p, from, to)) = self.sockets[s].try_recv_packet() else {
                    break;
                };
                work = true;
                let h: [u8; HEADER] = match p.get(..HEADER).and_then(|h| h.try_into().ok()) {
                    Some(h) => h,
                    None => {
                        self.dropped += 1;
                        continue;
                    }
                };
                let (seq, total, reserved) = (
                    u16::from_be_bytes([h[2], h[3]]),
                    u16::from_be_bytes([h[4], h[5]]),
                    u16::from_be_bytes([h[6], h[7]]),
                );
                if seq != 0 || total != 1 || reserved != 0 || p.strip_front(HEADER).is_err() {
                    self.dropped += 1;
                    continue;
                }
                let reply = self.answer(server, p, now, pool);
                self.send(s, [h[0], h[1]], &reply, from, to);
            }
        }
        work
    }

    /// The reply's bytes to one request.
    fn answer(&mut self, server: &mut KvServer, p: oxnet_driver::Packet, now: u64, pool: &Mempool) -> Vec<u8> {
        self.next = self.next.wrapping_add(1);
        let id = 0x8000_0000 | (self.next & 0x7fff_ffff);
        let mut out = PacketBatch::default();
        let mut reply = Vec::new();
        let (Some(open), Some(close)) = (
            stream::control(pool, id, StreamEvent::Open),
            stream::control(pool, id, StreamEvent::Close),
        ) else {
            self.send_errors += 1;
            return reply;
        };
        self.requests += 1;
        server.input(open, now, pool, &mut out);
        server.input(stream::data(p, id), now, pool, &mut out);
        server.input(close, now, pool, &mut out);
        for r in out.iter() {
            if stream::socket(r) == id && stream::event(r) == StreamEvent::Data {
                r.copy_chain_to(&mut reply);
            }
        }
        reply
    }

    /// Sends `reply` to `to` in datagrams of at most MAX_DATAGRAM bytes.
    fn send(&mut self, socket: usize, request: [u8; 2], reply: &[u8], to: IpEndpoint, from: IpEndpoint) {
        if reply.is_empty() {
            return;
        }
        let chunks: Vec<&[u8]> = reply.chunks(MAX_DATAGRAM - HEADER).collect();
        let total = chunks.len().min(u16::MAX as usize) as u16;
        let mut datagram = Vec::with_capacity(MAX_DATAGRAM);
        for (seq, chunk) in chunks.iter().take(total as usize).enumerate() {
            datagram.clear();
            datagram.extend_from_slice(&request);
            datagram.extend_from_slice(&(seq as u16).to_be_bytes());
            datagram.extend_from_slice(&total.to_be_bytes());
            datagram.extend_from_slice(&[0, 0]);
            datagram.extend_from_slice(chunk);
            match self.sockets[socket].send_to(&datagram, to, Some(from.addr)) {
                Ok(_) => self.datagrams_out += 1,
                Err(_) => self.send_errors += 1,
            }
        }
    }
}
