//! Hand-built IPv4/TCP packets for the tests (RFC 791 §3.1, RFC 9293
//! §3.1 layouts) and a small parser of what oxnet sends.

#![allow(dead_code)]

use oxnet_driver::offload::{fold, ones_sum};
use std::net::Ipv4Addr;

/// The stack's address (packetdrill's default local one).
pub const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
/// The peer's address (packetdrill's default remote one).
pub const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The port the tests listen on.
pub const LOCAL_PORT: u16 = 8080;
/// The peer's port.
pub const REMOTE_PORT: u16 = 40000;
/// The peer's initial sequence number.
pub const PEER_ISN: u32 = 1000;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// An IPv4 packet carrying a TCP segment from REMOTE:REMOTE_PORT to
/// LOCAL:LOCAL_PORT; a SYN carries an MSS option of 1000.
pub fn segment(flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let options: &[u8] = if flags & SYN != 0 { &[2, 4, 0x03, 0xe8] } else { &[] };
    let tcp_len = 20 + options.len() + payload.len();
    let total = 20 + tcp_len;
    let mut p = Vec::with_capacity(total);
    // IPv4 header: version 4, IHL 5, DF, TTL 64, protocol 6 (TCP).
    p.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    p.extend_from_slice(&REMOTE.octets());
    p.extend_from_slice(&LOCAL.octets());
    let ip_sum = !fold(ones_sum(&p[..20], 0));
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP header.
    p.extend_from_slice(&REMOTE_PORT.to_be_bytes());
    p.extend_from_slice(&LOCAL_PORT.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ack.to_be_bytes());
    p.push((((20 + options.len()) / 4) << 4) as u8);
    p.push(flags);
    p.extend_from_slice(&65535u16.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend_from_slice(options);
    p.extend_from_slice(payload);
    // Pseudo-header (RFC 9293 §3.1): addresses, zero, protocol, length.
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&REMOTE.octets());
    pseudo.extend_from_slice(&LOCAL.octets());
    pseudo.extend_from_slice(&[0, 6, (tcp_len >> 8) as u8, tcp_len as u8]);
    let sum = !fold(ones_sum(&p[20..], ones_sum(&pseudo, 0)));
    p[36..38].copy_from_slice(&sum.to_be_bytes());
    p
}

/// A segment oxnet sent, the fields the tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: Vec<u8>,
}

/// Parses an IPv4/TCP packet (panics on anything else: a test failure).
pub fn parse(p: &[u8]) -> Sent {
    assert!(p.len() >= 40 && p[0] >> 4 == 4 && p[9] == 6, "not IPv4/TCP: {p:02x?}");
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    assert_eq!(total, p.len(), "IPv4 total length");
    assert_eq!(fold(ones_sum(&p[..ihl], 0)), 0xffff, "IPv4 header checksum");
    let t = &p[ihl..];
    let off = usize::from(t[12] >> 4) * 4;
    let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
    Sent {
        src: Ipv4Addr::new(p[12], p[13], p[14], p[15]),
        dst: Ipv4Addr::new(p[16], p[17], p[18], p[19]),
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: be32(4),
        ack: be32(8),
        flags: t[13],
        payload: t[off..].to_vec(),
    }
}

/// The directory holding `liboxnet_ffi.so`: the test binary's
/// (`target/debug/deps`) or its parent.
pub fn cdylib_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let deps = exe.parent().expect("a directory").to_path_buf();
    let up = deps
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| deps.clone());
    [deps, up]
        .into_iter()
        .find(|d| d.join("liboxnet_ffi.so").exists())
        .expect("liboxnet_ffi.so next to the test binary (cargo builds the cdylib for the tests)")
}

/// Recomputes the TCP checksum of an IPv4 packet built by `segment`.
pub fn fix_tcp_checksum(p: &mut [u8]) {
    p[36] = 0;
    p[37] = 0;
    let tcp_len = p.len() - 20;
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&p[12..20]);
    pseudo.extend_from_slice(&[0, 6, (tcp_len >> 8) as u8, tcp_len as u8]);
    let sum = !fold(ones_sum(&p[20..], ones_sum(&pseudo, 0)));
    p[36..38].copy_from_slice(&sum.to_be_bytes());
}
