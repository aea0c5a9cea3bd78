//! UDP sockets and the UDP echo server.

use super::{info, Bound, UdpInfo, DEFAULT_QUEUE};
use crate::exec::{Event, Executor};
use crate::wire::{IpAddress, IpEndpoint};
use oxnet_driver::Packet;
use oxnet_graph::args::Args;
use oxnet_graph::element::Element;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A bound UDP socket. Dropping it unbinds it (datagrams still queued
/// are freed).
pub struct UdpSocket {
    info: Rc<RefCell<UdpInfo>>,
    local: IpEndpoint,
}

impl UdpSocket {
    /// Binds `local` (an unspecified address: every address of its
    /// family); EADDRINUSE if taken.
    pub fn bind(info: &Rc<RefCell<UdpInfo>>, local: IpEndpoint) -> Result<UdpSocket, i32> {
        let mut i = info.borrow_mut();
        if i.sockets.contains_key(&local) {
            return Err(libc::EADDRINUSE);
        }
        i.sockets.insert(
            local,
            Bound {
                queue: VecDeque::new(),
                limit: DEFAULT_QUEUE,
                readable: Event::new(),
            },
        );
        Ok(UdpSocket {
            info: info.clone(),
            local,
        })
    }

    pub fn local(&self) -> IpEndpoint {
        self.local
    }

    /// Sends `data` to `to` from our endpoint (an unspecified local
    /// address takes `from_addr`, which a reply passes as the address the
    /// request came to). EAFNOSUPPORT for mixed families, EMSGSIZE past
    /// 65507 bytes (RFC 768's length field less the headers).
    pub fn send_to(&self, data: &[u8], to: IpEndpoint, from_addr: Option<IpAddress>) -> Result<usize, i32> {
        let mut from = self.local;
        if from.addr.is_unspecified() {
            from.addr = from_addr.ok_or(libc::EDESTADDRREQ)?;
        }
        if from.addr.is_ipv4() != to.addr.is_ipv4() {
            return Err(libc::EAFNOSUPPORT);
        }
        if data.len() > 65_507 {
            return Err(libc::EMSGSIZE);
        }
        self.info.borrow_mut().outgoing.push_back((from, to, data.to_vec()));
        Ok(data.len())
    }

    /// The next datagram, the packet itself (payload only, no copy), its
    /// sender and the endpoint it was sent to; EAGAIN if none.
    pub fn try_recv_packet(&self) -> Result<(Packet, IpEndpoint, IpEndpoint), i32> {
        let mut i = self.info.borrow_mut();
        let bound = i.sockets.get_mut(&self.local).ok_or(libc::EBADF)?;
        let (from, to, p) = bound.queue.pop_front().ok_or(libc::EAGAIN)?;
        Ok((p, from, to))
    }

    /// Waits for the next datagram.
    pub async fn recv_packet(&self) -> Result<(Packet, IpEndpoint, IpEndpoint), i32> {
        loop {
            let wait = match self.try_recv_packet() {
                Err(libc::EAGAIN) => self
                    .info
                    .borrow()
                    .sockets
                    .get(&self.local)
                    .ok_or(libc::EBADF)?
                    .readable
                    .wait(),
                done => return done,
            };
            wait.await;
        }
    }

    /// Copies the next datagram into `buf` (a longer one is cut, as
    /// recvfrom does); its length and sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> Result<(usize, IpEndpoint), i32> {
        let (p, from, _) = self.recv_packet().await?;
        let n = p.len().min(buf.len());
        buf[..n].copy_from_slice(&p[..n]);
        Ok((n, from))
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        self.info.borrow_mut().sockets.remove(&self.local);
    }
}

/// UDPEchoServer(PORT, [ADDR]): every datagram back to its sender, from
/// the address it came to (RFC 862). Without ADDR, every IPv4 and IPv6
/// address. Handlers: `datagrams`, `bytes`.
#[derive(Default)]
pub struct EchoServer {
    locals: Vec<IpEndpoint>,
    info: Option<Rc<RefCell<UdpInfo>>>,
    exec: Option<Rc<RefCell<Executor>>>,
    stats: Rc<RefCell<(u64, u64)>>,
}

impl Element for EchoServer {
    fn class_name(&self) -> &'static str {
        "UDPEchoServer"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.locals = crate::app::server_endpoints(a)?;
        self.info = Some(info());
        self.exec = Some(crate::app::executor());
        Ok(())
    }
    fn initialize(&mut self, _ports: &oxnet_graph::element::Ports) -> Result<(), String> {
        let (Some(info), Some(exec)) = (&self.info, &self.exec) else {
            return Ok(());
        };
        for &local in &self.locals {
            let socket = UdpSocket::bind(info, local).map_err(|e| {
                format!(
                    "cannot bind UDP {}:{}: {}",
                    local.addr,
                    local.port,
                    std::io::Error::from_raw_os_error(e)
                )
            })?;
            let stats = self.stats.clone();
            exec.borrow().spawn(async move {
                while let Ok((p, from, to)) = socket.recv_packet().await {
                    let mut s = stats.borrow_mut();
                    s.0 += 1;
                    s.1 += p.len() as u64;
                    drop(s);
                    // From the address the request was for.
                    let _ = socket.send_to(&p, from, Some(to.addr));
                }
            });
        }
        Ok(())
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("datagrams", true, false), ("bytes", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = self.stats.borrow();
        match name {
            "datagrams" => Some(s.0.to_string()),
            "bytes" => Some(s.1.to_string()),
            _ => None,
        }
    }
}
