//! The stack's packet annotations (ClickNF §3.1: "packet annotations"),
//! in the annotation area of the packet's second cache line
//! (`oxnet_driver::Annotations::area`, Click's 48 bytes):
//!
//! | bytes | what | written by | read by |
//! |---|---|---|---|
//! | 0..4 / 0..16 | next hop: IPv4 address (Click's DST_IP) or IPv6 address | IP output | the neighbour resolvers |
//! | 16..20 | left to Click's elements (PAINT at 16 ...) | | |
//! | 20..24 | TCB id (0: none) | TCPFlowLookup, the socket calls | every TCP element |
//! | 24..28 | TCB generation (a stale id is detected, not followed) | the same | the same |
//! | 28..32 | bytes this segment newly acknowledges | TCPProcessAck | congestion control |
//! | 32..36 | an RTT sample, microseconds (0: none) | TCPProcessAck (timestamps or the RTX queue) | TCPEstimateRTT |
//! | 36..38 | [`TcpFlags`]: what earlier elements decided | the incoming path | later elements |
//! | 38 | stream event (Data, Open, Eof, Close) | application elements (`oxnet_apps::stream`) | application elements |
//! | 40..44 | socket (file descriptor; a connection id between application elements) | the socket calls, TCPEpollServer/Client | application elements |
//! | 28..32 (between application elements) | a stream Close's errno | TCPEpollServer/Client | application elements |
//! | 44..48 | bytes the windows allow to send now | TCPRateControl | TCPSegmentation |

use oxnet_driver::Packet;
use std::net::{Ipv4Addr, Ipv6Addr};

const TCB_ID: usize = 20;
const TCB_GEN: usize = 24;
const ACKED: usize = 28;
const RTT: usize = 32;
const FLAGS: usize = 36;
const SOCKET: usize = 40;
const ALLOWED: usize = 44;

fn get_u32(p: &Packet, at: usize) -> u32 {
    let a = &p.anno().area;
    u32::from_ne_bytes([a[at], a[at + 1], a[at + 2], a[at + 3]])
}

fn set_u32(p: &mut Packet, at: usize, v: u32) {
    p.anno_mut().area[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// The IPv4 next hop (Click's destination IP annotation).
pub fn next_hop_v4(p: &Packet) -> Ipv4Addr {
    Ipv4Addr::from(p.anno().dst_ip())
}

pub fn set_next_hop_v4(p: &mut Packet, addr: Ipv4Addr) {
    p.anno_mut().set_dst_ip(addr.octets());
}

/// The IPv6 next hop (the whole address area).
pub fn next_hop_v6(p: &Packet) -> Ipv6Addr {
    let mut a = [0; 16];
    a.copy_from_slice(&p.anno().area[0..16]);
    Ipv6Addr::from(a)
}

pub fn set_next_hop_v6(p: &mut Packet, addr: Ipv6Addr) {
    p.anno_mut().area[0..16].copy_from_slice(&addr.octets());
}

/// A TCB reference: slot + 1 (0 is none) and the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TcbRef {
    pub id: u32,
    pub generation: u32,
}

pub fn tcb(p: &Packet) -> Option<TcbRef> {
    let id = get_u32(p, TCB_ID);
    (id != 0).then(|| TcbRef {
        id,
        generation: get_u32(p, TCB_GEN),
    })
}

pub fn set_tcb(p: &mut Packet, tcb: Option<TcbRef>) {
    let t = tcb.unwrap_or(TcbRef { id: 0, generation: 0 });
    set_u32(p, TCB_ID, t.id);
    set_u32(p, TCB_GEN, t.generation);
}

pub fn acked_bytes(p: &Packet) -> u32 {
    get_u32(p, ACKED)
}

pub fn set_acked_bytes(p: &mut Packet, n: u32) {
    set_u32(p, ACKED, n)
}

/// An RTT sample in microseconds, if the segment gave one.
pub fn rtt_sample_us(p: &Packet) -> Option<u32> {
    let v = get_u32(p, RTT);
    (v != 0).then_some(v)
}

/// Sets the RTT sample (a sample of 0 µs is stored as 1).
pub fn set_rtt_sample_us(p: &mut Packet, us: Option<u32>) {
    set_u32(p, RTT, us.map_or(0, |v| v.max(1)))
}

/// What the incoming path's elements found, for the ones after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// The segment carried data in sequence (TCPProcessData).
    pub const NEW_DATA: u16 = 1;
    /// An ACK must go back (out of window, data, FIN...).
    pub const ACK_NEEDED: u16 = 2;
    /// A duplicate ACK (RFC 5681 §2).
    pub const DUP_ACK: u16 = 4;
    /// The segment carried a FIN in sequence.
    pub const FIN: u16 = 8;
    /// The ACK must not be delayed (a gap was filled, RFC 5681 §4.2).
    pub const ACK_NOW: u16 = 16;
    /// A segment out of order: its duplicate ACK goes even if another
    /// ACK of the connection went in the same batch (RFC 5681 §4.2: one
    /// per out-of-order segment, the sender counts them).
    pub const OUT_OF_ORDER: u16 = 32;

    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

pub fn tcp_flags(p: &Packet) -> TcpFlags {
    let a = &p.anno().area;
    TcpFlags(u16::from_ne_bytes([a[FLAGS], a[FLAGS + 1]]))
}

pub fn set_tcp_flags(p: &mut Packet, f: TcpFlags) {
    p.anno_mut().area[FLAGS..FLAGS + 2].copy_from_slice(&f.0.to_ne_bytes());
}

/// Bytes the congestion and receive windows allow to send now.
pub fn send_allowance(p: &Packet) -> u32 {
    get_u32(p, ALLOWED)
}

pub fn set_send_allowance(p: &mut Packet, n: u32) {
    set_u32(p, ALLOWED, n)
}

/// The socket (file descriptor) a packet belongs to, for applications.
pub fn socket(p: &Packet) -> Option<u32> {
    let v = get_u32(p, SOCKET);
    (v != 0).then(|| v - 1)
}

pub fn set_socket(p: &mut Packet, fd: Option<u32>) {
    set_u32(p, SOCKET, fd.map_or(0, |v| v + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    #[test]
    fn every_annotation_reads_back_and_none_overlaps_another() {
        let pool = Mempool::new("anno", 8, MemoryKind::Plain).unwrap();
        let mut p = pool.alloc().unwrap();
        p.anno_mut().set_paint(9);
        set_next_hop_v4(&mut p, Ipv4Addr::new(10, 0, 0, 1));
        set_tcb(&mut p, Some(TcbRef { id: 5, generation: 7 }));
        set_acked_bytes(&mut p, 1460);
        set_rtt_sample_us(&mut p, Some(250));
        set_tcp_flags(&mut p, TcpFlags(TcpFlags::NEW_DATA | TcpFlags::FIN));
        set_socket(&mut p, Some(0));
        assert_eq!(next_hop_v4(&p), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(tcb(&p), Some(TcbRef { id: 5, generation: 7 }));
        assert_eq!(acked_bytes(&p), 1460);
        assert_eq!(rtt_sample_us(&p), Some(250));
        assert!(tcp_flags(&p).has(TcpFlags::FIN) && !tcp_flags(&p).has(TcpFlags::DUP_ACK));
        assert_eq!(socket(&p), Some(0));
        assert_eq!(p.anno().paint(), 9, "Click's paint is left alone");
        set_next_hop_v6(&mut p, "fe80::1".parse().unwrap());
        assert_eq!(next_hop_v6(&p), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(tcb(&p), Some(TcbRef { id: 5, generation: 7 }));
        set_tcb(&mut p, None);
        set_socket(&mut p, None);
        assert_eq!((tcb(&p), socket(&p)), (None, None));
    }
}
