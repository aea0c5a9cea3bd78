//! UDP (RFC 768) with sockets, IPv4 and IPv6.
//!
//! | element | ports | what |
//! |---|---|---|
//! | UDPInput | 1/1 | datagrams from the IP layer (IPv4Input / IPv6Input output 1), checksum checked, to the socket bound to their destination (its own address, else the wildcard); datagrams for no socket go out of output 0 (for an ICMP port unreachable; Discard them otherwise) |
//! | UDPOutput([CHECKSUM_OFFLOAD false]) | 0/1 | task: the datagrams the sockets sent, as IP packets for the neighbour resolver; with CHECKSUM_OFFLOAD the IPv4 ones leave their UDP checksum to the device (a `TxOffload` request for the IPv4 header and UDP checksums; IPv6 ones are summed here: not done yet, though the driver's offloads now take UDP over IPv6) |
//! | UDPEchoServer(PORT, [ADDR]) | 0/0 | RFC 862's echo service on UDP: every datagram goes back to its sender |
//!
//! A socket's receive queue holds the received packets themselves (the
//! payload, no copy) up to QUEUE datagrams (default 256): beyond, new
//! ones are dropped and counted (`queue_drops`), as a full socket buffer
//! drops them in Linux. A datagram sent is copied once, into a packet of
//! the router's pool, by UDPOutput (socket calls run outside the
//! elements and have no pool).
//!
//! Handlers of UDPInput: `count`, `delivered`, `no_socket`,
//! `bad_datagrams` (short, malformed or a bad checksum), `queue_drops`.

pub mod socket;
#[cfg(test)]
mod tests;

use crate::anno;
use crate::exec::Event;
use crate::ip::encap::write_ip_packet;
use crate::wire::{Checksum, IpAddress, IpEndpoint, IpProtocol, UdpPacket, UdpRepr};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::Args;
use oxnet_graph::element::{Element, PORTS_0_1, PORTS_1_1, PUSH};
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

pub const MODULE: Module = Module {
    classes: &["UDPEchoServer", "UDPInput", "UDPOutput"],
    create: |class| {
        Some(match class {
            "UDPEchoServer" => Box::new(socket::EchoServer::default()),
            "UDPInput" => Box::new(UdpInput::default()),
            "UDPOutput" => Box::new(UdpOutput::default()),
            _ => return None,
        })
    },
};

/// Datagrams a socket keeps by default.
pub const DEFAULT_QUEUE: usize = 256;

/// One bound socket's state.
pub struct Bound {
    /// Received datagrams: the sender, the address they were sent to,
    /// and the payload.
    pub queue: VecDeque<(IpEndpoint, IpEndpoint, Packet)>,
    pub limit: usize,
    /// Notified when a datagram arrives.
    pub readable: Event,
}

/// The per-core UDP state the elements and sockets share.
#[derive(Default)]
pub struct UdpInfo {
    pub sockets: crate::FlowMap<IpEndpoint, Bound>,
    /// Datagrams sent and not yet on their way: (from, to, payload).
    pub outgoing: VecDeque<(IpEndpoint, IpEndpoint, Vec<u8>)>,
    /// Datagrams UDPOutput could not send (no buffer, mixed families).
    pub send_drops: u64,
}

impl UdpInfo {
    /// The socket a datagram to `local` goes to: that endpoint, else the
    /// wildcard address of its family on that port.
    pub fn socket_for(&self, local: &IpEndpoint) -> Option<IpEndpoint> {
        if self.sockets.contains_key(local) {
            return Some(*local);
        }
        let any = IpEndpoint {
            addr: match local.addr {
                IpAddress::V4(_) => IpAddress::V4(std::net::Ipv4Addr::UNSPECIFIED),
                IpAddress::V6(_) => IpAddress::V6(std::net::Ipv6Addr::UNSPECIFIED),
            },
            port: local.port,
        };
        self.sockets.contains_key(&any).then_some(any)
    }
}

/// The router's UDP state (one per router).
pub fn info() -> Rc<RefCell<UdpInfo>> {
    crate::elements::shared::<UdpInfo>()
}

/// The source and destination of an IP packet whose network mark is set.
fn addresses(p: &Packet) -> Option<(IpAddress, IpAddress)> {
    let net = usize::try_from(p.network_offset()?).ok()?;
    let ip = p.get(net..)?;
    match ip.first()? >> 4 {
        4 if ip.len() >= 20 => Some((
            IpAddress::V4(std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
            IpAddress::V4(std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
        )),
        6 if ip.len() >= 40 => {
            let mut s = [0; 16];
            let mut d = [0; 16];
            s.copy_from_slice(&ip[8..24]);
            d.copy_from_slice(&ip[24..40]);
            Some((IpAddress::V6(s.into()), IpAddress::V6(d.into())))
        }
        _ => None,
    }
}

#[derive(Default)]
pub struct UdpInput {
    info: Option<Rc<RefCell<UdpInfo>>>,
    count: u64,
    delivered: u64,
    no_socket: u64,
    bad_datagrams: u64,
    queue_drops: u64,
}

impl Element for UdpInput {
    fn class_name(&self) -> &'static str {
        "UDPInput"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, _a: &mut Args) -> Result<(), String> {
        self.info = Some(info());
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let mut unreachable = PacketBatch::with_capacity(0);
        {
            let mut info = info.borrow_mut();
            let mut input = std::mem::take(batch);
            let n = input.len();
            for mut p in input.drain_front(n) {
                self.count += 1;
                let Some((src, dst)) = addresses(&p) else {
                    self.bad_datagrams += 1;
                    continue;
                };
                let Some(at) = p.transport_offset().and_then(|t| usize::try_from(t).ok()) else {
                    self.bad_datagrams += 1;
                    continue;
                };
                // RFC 768 / RFC 8200 §8.1: the checksum over the
                // pseudo-header (none over IPv4 when zero).
                let parsed = p.get(at..).and_then(|b| {
                    let udp = UdpPacket::new_checked(b).ok()?;
                    let repr = UdpRepr::parse(&udp, &src, &dst, Checksum::Verify).ok()?;
                    Some((repr, udp.payload().len()))
                });
                let Some((repr, len)) = parsed else {
                    self.bad_datagrams += 1;
                    continue;
                };
                let local = IpEndpoint {
                    addr: dst,
                    port: repr.dst_port,
                };
                let remote = IpEndpoint {
                    addr: src,
                    port: repr.src_port,
                };
                let Some(key) = info.socket_for(&local) else {
                    self.no_socket += 1;
                    unreachable.push(p);
                    continue;
                };
                let bound = info.sockets.get_mut(&key).expect("found above");
                if bound.queue.len() >= bound.limit {
                    self.queue_drops += 1;
                    continue;
                }
                // The payload only, exactly (IP padding cut by the IP layer).
                if p.strip_front(at + 8).is_err() || p.set_len(len).is_err() {
                    self.bad_datagrams += 1;
                    continue;
                }
                anno::set_socket(&mut p, None);
                bound.queue.push_back((remote, local, p));
                bound.readable.notify_all();
                self.delivered += 1;
            }
        }
        ctx.push(0, unreachable);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("delivered", true, false),
            ("no_socket", true, false),
            ("bad_datagrams", true, false),
            ("queue_drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let v = match name {
            "count" => self.count,
            "delivered" => self.delivered,
            "no_socket" => self.no_socket,
            "bad_datagrams" => self.bad_datagrams,
            "queue_drops" => self.queue_drops,
            _ => return None,
        };
        Some(v.to_string())
    }
}

#[derive(Default)]
pub struct UdpOutput {
    info: Option<Rc<RefCell<UdpInfo>>>,
    checksum_offload: bool,
    sent: u64,
}

impl Element for UdpOutput {
    fn class_name(&self) -> &'static str {
        "UDPOutput"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = a.keyword("CHECKSUM_OFFLOAD") {
            self.checksum_offload = oxnet_graph::args::boolean(&v).map_err(|e| format!("CHECKSUM_OFFLOAD: {e}"))?;
        }
        self.info = Some(info());
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    /// Its work comes from this router only (sockets written by the
    /// executor's tasks, the router's timers): an idle router may sleep.
    fn idle_wake(&self, _fds: &mut Vec<std::os::fd::RawFd>) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(info) = self.info.clone() else { return false };
        let offload = self.checksum_offload;
        let mut out = PacketBatch::with_capacity(0);
        {
            let mut info = info.borrow_mut();
            if info.outgoing.is_empty() {
                return false;
            }
            let mut dropped = 0;
            while let Some((from, to, data)) = info.outgoing.pop_front() {
                let Ok(mut p) = ctx.pool().alloc() else {
                    // Tried again next round.
                    info.outgoing.push_front((from, to, data));
                    break;
                };
                let repr = UdpRepr {
                    src_port: from.port,
                    dst_port: to.port,
                    payload_len: data.len(),
                };
                let device_sums = offload && from.addr.is_ipv4();
                let written = write_ip_packet(&mut p, from.addr, to.addr, IpProtocol::Udp, 8 + data.len(), 0, |udp| {
                    udp[8..].copy_from_slice(&data);
                    let mut view = UdpPacket::new_unchecked(udp);
                    if device_sums {
                        // RFC 768's header; the checksum is the device's
                        // (the driver seeds it, 82599 §7.2.5.1).
                        view.set_src_port(repr.src_port);
                        view.set_dst_port(repr.dst_port);
                        view.set_len((8 + data.len()) as u16);
                        view.set_checksum(0);
                    } else {
                        repr.emit(&mut view, &from.addr, &to.addr);
                    }
                });
                if written && device_sums {
                    p.set_tx_offload(oxnet_driver::TxOffload {
                        flags: oxnet_driver::packet::TX_IP_CSUM | oxnet_driver::packet::TX_UDP_CSUM,
                        l2_len: crate::ip::ETHER_LEN as u8,
                        l3_len: 20,
                        l4_len: 8,
                        mss: 0,
                    });
                }
                if written {
                    self.sent += 1;
                    out.push(p);
                } else {
                    dropped += 1;
                }
            }
            info.send_drops += dropped;
        }
        let worked = !out.is_empty();
        ctx.push(0, out);
        worked
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("sent", true, false), ("send_drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "sent" => Some(self.sent.to_string()),
            "send_drops" => Some(self.info.as_ref()?.borrow().send_drops.to_string()),
            _ => None,
        }
    }
}
