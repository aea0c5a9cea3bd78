//! A data segment's payload, cut from the send buffer, and writing it
//! out: written bytes are copied behind the headers (their one copy); the
//! bytes of a packet the application gave ([`super::zerocopy`]) are
//! *attached*: the segment is a chain, a header packet followed by
//! attached segments that refer to the application's buffer
//! ([`oxnet_driver::shared`]), so neither a first transmission nor a
//! retransmission copies them.
//!
//! Headers go into a packet of their own rather than into the
//! application's head room: the same bytes may be in several segments at
//! once (a retransmission while the first transmission still sits in a
//! transmit ring, a window probe), and each needs different headers, so
//! the payload buffer is never written.

use super::ecn::Codepoint;
use super::send_buffer::{Piece, SendBuffer};
use crate::ip::encap::write_ip_packet;
use crate::wire::{pseudo_header_sum, IpAddress, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, TcpRepr};
use oxnet_driver::offload::{fold, ones_sum};
use oxnet_driver::{AttachPool, Packet};
use std::cell::Cell;

/// What the zero-copy output did, per connection (the send buffer's).
#[derive(Debug, Default)]
pub struct ZeroCopyStats {
    /// Payload bytes sent attached (not copied), retransmissions included.
    pub attached_bytes: Cell<u64>,
    /// Bytes of given packets copied after all: into a segment that also
    /// carries written bytes after them, or when the attach pool was
    /// empty.
    pub copied_bytes: Cell<u64>,
    /// Segments copied because the attach pool had no header free.
    pub attach_failures: Cell<u64>,
}

/// `len` bytes of a send buffer from `offset`: a segment's data.
#[derive(Clone, Copy)]
pub struct Payload<'a> {
    pub buffer: &'a SendBuffer,
    pub offset: usize,
    pub len: usize,
}

/// Writes the IP packet carrying `seg` with `payload` into `packet`,
/// with `ecn` in the IP header. False if it does not fit or the key
/// mixes families (the packet is then empty).
pub fn write_payload(
    packet: &mut Packet,
    src: IpAddress,
    dst: IpAddress,
    seg: &TcpRepr,
    payload: Payload<'_>,
    ecn: Codepoint,
) -> bool {
    debug_assert_eq!(seg.payload_len, payload.len);
    let Payload { buffer, offset, len } = payload;
    if let Some(pool) = buffer.attach_pool() {
        if buffer.has_shared(offset, len) {
            match attached_segments(buffer, offset, len, pool) {
                Attached::Chain { lead, segments, bytes } => {
                    let ok = write_chain(packet, src, dst, seg, buffer, offset, lead, segments, ecn);
                    if ok {
                        let s = buffer.stats();
                        s.attached_bytes.set(s.attached_bytes.get() + bytes as u64);
                    }
                    return ok;
                }
                Attached::Copy {
                    shared_bytes,
                    no_header,
                } => {
                    let s = buffer.stats();
                    s.copied_bytes.set(s.copied_bytes.get() + shared_bytes as u64);
                    s.attach_failures.set(s.attach_failures.get() + no_header as u64);
                }
            }
        }
    }
    write_ip_packet(packet, src, dst, IpProtocol::Tcp, seg.buffer_len(), ecn.bits(), |tcp| {
        buffer.copy_to(offset, &mut tcp[seg.header_len()..]);
        seg.emit(&mut TcpPacket::new_unchecked(tcp), &src, &dst);
    })
}

enum Attached {
    /// `lead` written bytes go behind the headers, then `segments`
    /// (attached, `bytes` of them).
    Chain {
        lead: usize,
        segments: Vec<Packet>,
        bytes: usize,
    },
    /// Copy the whole payload (`shared_bytes` of it from given packets);
    /// `no_header`: because the attach pool ran out.
    Copy { shared_bytes: usize, no_header: bool },
}

/// The attached segments for the range, or why it is copied instead:
/// written bytes after a given packet's (they would need a buffer of
/// their own; rare: only at a boundary between the two kinds of write),
/// or an empty attach pool.
fn attached_segments(buffer: &SendBuffer, offset: usize, len: usize, pool: &AttachPool) -> Attached {
    let (mut lead, mut segments, mut bytes) = (0, Vec::new(), 0);
    let shared_bytes: usize = buffer
        .pieces(offset, len)
        .filter(|p| matches!(p, Piece::Shared { .. }))
        .map(|p| p.bytes().len())
        .sum();
    for piece in buffer.pieces(offset, len) {
        match piece {
            Piece::Bytes(b) if segments.is_empty() => lead += b.len(),
            Piece::Bytes(_) => {
                return Attached::Copy {
                    shared_bytes,
                    no_header: false,
                }
            }
            Piece::Shared { buffer, offset, len } => match buffer.attach(offset, len, pool) {
                Ok(p) => {
                    bytes += len;
                    segments.push(p);
                }
                // The segments made so far go back with `segments`.
                Err(_) => {
                    return Attached::Copy {
                        shared_bytes,
                        no_header: true,
                    }
                }
            },
        }
    }
    Attached::Chain { lead, segments, bytes }
}

/// The header packet (with `lead` written bytes behind the TCP header)
/// and the attached segments after it. The checksum covers the whole
/// chain (RFC 9293 §3.1: pseudo-header, header and all data); the IP
/// length too.
#[allow(clippy::too_many_arguments)]
fn write_chain(
    packet: &mut Packet,
    src: IpAddress,
    dst: IpAddress,
    seg: &TcpRepr,
    buffer: &SendBuffer,
    offset: usize,
    lead: usize,
    segments: Vec<Packet>,
    ecn: Codepoint,
) -> bool {
    let header = seg.header_len();
    let attached: usize = segments.iter().map(|s| s.len()).sum();
    let head = TcpRepr {
        payload_len: lead,
        ..*seg
    };
    let ok = write_ip_packet(packet, src, dst, IpProtocol::Tcp, header + lead, ecn.bits(), |tcp| {
        buffer.copy_to(offset, &mut tcp[header..]);
        head.emit(&mut TcpPacket::new_unchecked(&mut *tcp), &src, &dst);
    });
    if !ok {
        return false;
    }
    let ip_len = match src {
        IpAddress::V4(_) => 20,
        IpAddress::V6(_) => 40,
    };
    let tcp_len = header + lead + attached;
    {
        let bytes: &mut [u8] = &mut *packet;
        let (ip, tcp) = bytes.split_at_mut(ip_len);
        // The IP length covers the attached bytes (RFC 791 §3.1 total
        // length, then the header checksum again; RFC 8200 §3 payload
        // length).
        match src {
            IpAddress::V4(_) => {
                let mut ip = Ipv4Packet::new_unchecked(ip);
                ip.set_total_len((ip_len + tcp_len) as u16);
                ip.fill_checksum();
            }
            IpAddress::V6(_) => Ipv6Packet::new_unchecked(ip).set_payload_len(tcp_len as u16),
        }
        TcpPacket::new_unchecked(&mut *tcp).set_checksum(0);
        let mut sum = ones_sum(tcp, pseudo_header_sum(&src, &dst, IpProtocol::Tcp, tcp_len as u32));
        // Each attached segment at its place in the byte stream: one
        // starting at an odd position adds its sum byte-swapped (RFC 1071
        // §2(B)); the header is a multiple of 4 bytes.
        let mut at = lead;
        for s in &segments {
            let part = fold(ones_sum(s, 0));
            sum += if at % 2 == 1 { part.swap_bytes() } else { part } as u64;
            at += s.len();
        }
        TcpPacket::new_unchecked(tcp).set_checksum(!fold(sum));
    }
    for s in segments {
        packet.append(s);
    }
    true
}
