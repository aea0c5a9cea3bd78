//! `af_packet:IF`: any Linux interface through AF_PACKET sockets with
//! memory-mapped rings (packet(7), `Documentation/networking/packet_mmap.rst`).
//!
//! One socket per queue, bound to the interface for every protocol
//! (ETH_P_ALL), each with
//!
//! * a TPACKET_V3 receive ring: blocks of frames the kernel hands over
//!   whole, when full or 1 ms after their first frame ([`rx`]);
//! * a transmit ring of fixed frames (V3 layout) and one `sendto` per
//!   transmit batch to make the kernel send what was posted ([`tx`]);
//! * PACKET_QDISC_BYPASS where the kernel allows it;
//! * with several queues, a PACKET_FANOUT group in hash mode: the kernel
//!   spreads flows over the sockets as RSS spreads them over a NIC's queues.
//!
//! The data path makes no system call on receive (it reads the block
//! status word) and one per transmit batch. Frames are copied by the CPU:
//! from the receive ring into the queue's mempool packets, and from any
//! packet (any pool, any DMA domain, chained or not) into the transmit
//! ring, so there is nothing to map and no DMA-domain copy to count
//! (`tx_copied` stays 0). Offload requests (checksums, TSO) are done in
//! software in the ring's frames.
//!
//! The interface must exist and be up; oxnet needs CAP_NET_RAW. When the
//! kernel has an IP address on the interface, a warning says that Linux
//! will answer oxnet's traffic too (docs/af_packet.md).

mod abi;
mod rx;
mod socket;
mod split;
mod tx;

use crate::device::{Config, Device, DeviceStats, Features, Link, QueueHandles, QueueStats};
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::netif;
use crate::packet::PacketBatch;
use rx::RxRing;
use socket::{Geometry, PacketSocket};
use tx::TxRing;

pub use socket::Geometry as RingGeometry;

/// Opens `af_packet:` + `rest` (`rest` is the interface name).
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    Ok(Box::new(AfPacketDevice::open(rest, config)?))
}

/// One queue: its socket, its two rings and its receive pool.
struct Queue {
    rx: RxRing,
    tx: TxRing,
    pool: Mempool,
    /// PACKET_STATISTICS tp_drops read so far (the kernel clears on read).
    kernel_drops: u64,
    /// Declared last: dropped (unmapped, closed) after the rings.
    socket: PacketSocket,
}

/// An interface driven through AF_PACKET rings.
pub struct AfPacketDevice {
    spec: String,
    name: String,
    mac: [u8; 6],
    queues: Vec<Queue>,
    promisc: bool,
    drain_timeout: std::time::Duration,
}

impl AfPacketDevice {
    /// Opens interface `name` with `config.rx_queues` queues.
    pub fn open(name: &str, config: &Config) -> Result<AfPacketDevice> {
        let spec = format!("af_packet:{name}");
        if config.rx_queues != config.tx_queues {
            return Err(Error::Config(format!(
                "{spec}: each queue is one socket with a receive and a transmit ring: \
                 use as many rx as tx queues (got {} and {})",
                config.rx_queues, config.tx_queues
            )));
        }
        let ifindex = netif::ifindex(name).map_err(|e| Error::BadSpec(format!("{spec}: {e}")))?;
        let flags = netif::flags(name)?;
        if flags & libc::IFF_UP as u32 == 0 {
            return Err(Error::Device(format!(
                "{spec}: interface {name} is down: bring it up with `ip link set {name} up`"
            )));
        }
        let mac = netif::mac(name)?;
        let mtu = netif::mtu(name)?;
        let memory = crate::domain::device_memory(config.memory.unwrap_or(crate::MemoryKind::Plain), &spec)?;
        let mut queues = Vec::with_capacity(config.rx_queues as usize);
        for q in 0..config.rx_queues {
            let pool = Mempool::new(&format!("{spec} rx{q}"), config.effective_pool_size(), memory)?;
            // Ethernet header + VLAN tag + MTU, what the pool's buffers hold.
            let max_frame = (mtu + 18).min(pool.data_room());
            let geometry = Geometry::for_config(config.rx_ring_size, config.tx_ring_size, max_frame);
            let socket = PacketSocket::open(&spec, name, ifindex, geometry)?;
            if q == 0 && !socket.qdisc_bypass {
                eprintln!(
                    "{spec}: note: the kernel refused PACKET_QDISC_BYPASS; frames are sent through the qdisc layer"
                );
            }
            // SAFETY: the rings are mapped by `socket`, which lives in the
            // same Queue and is dropped after them.
            let (rx, tx) = unsafe {
                (
                    RxRing::new(
                        socket.rx_ring(),
                        geometry.rx_block_size as usize,
                        geometry.rx_block_nr as usize,
                    ),
                    TxRing::new(
                        socket.tx_ring(),
                        geometry.tx_frame_size as usize,
                        geometry.tx_frame_nr as usize,
                        mtu,
                    ),
                )
            };
            queues.push(Queue {
                rx,
                tx,
                pool,
                kernel_drops: 0,
                socket,
            });
        }
        // Several queues: one fanout group, flows spread by their hash
        // (packet(7) PACKET_FANOUT, PACKET_FANOUT_HASH). Each socket was
        // bound first (the kernel requires it); until it joins, it sees
        // every frame, which is why no traffic should be counted on before
        // the device says it is ready.
        if queues.len() > 1 {
            let id = queues[0].socket.create_fanout(&spec)?;
            for queue in &queues[1..] {
                queue.socket.join_fanout(&spec, id)?;
            }
        }
        let mut device = AfPacketDevice {
            spec,
            name: name.to_string(),
            mac,
            queues,
            promisc: false,
            drain_timeout: config.tx_drain_timeout,
        };
        if config.promiscuous {
            device.set_promisc(true)?;
        }
        if let Some(warning) = netif::address_warning(name) {
            eprintln!("{}: {warning}", device.spec);
        }
        Ok(device)
    }

    /// The ring sizes the queues use.
    pub fn geometry(&self) -> Geometry {
        self.queues[0].socket.geometry
    }

    /// `sendto` kicks made so far on all queues.
    pub fn tx_kicks(&self) -> u64 {
        self.queues.iter().map(|q| q.tx.counters.kicks).sum()
    }

    fn kick(queue: &mut Queue) {
        kick(&queue.socket, &mut queue.tx);
    }
}

/// Makes the kernel send what `ring` posted: one `sendto`.
fn kick(socket: &PacketSocket, ring: &mut TxRing) {
    ring.counters.kicks += 1;
    if let Err(e) = socket.kick() {
        // ENOBUFS/EAGAIN: the interface's queue is full; the frames stay
        // marked and the next kick sends them.
        if !matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) {
            ring.counters.kick_errors += 1;
        }
    }
}

impl Device for AfPacketDevice {
    fn driver_name(&self) -> &'static str {
        "af_packet"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn rx_poll_fd(&self, queue: u16) -> Option<std::os::fd::RawFd> {
        self.queues.get(queue as usize).map(|q| q.socket.raw_fd())
    }

    #[inline]
    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        let Some(q) = self.queues.get_mut(queue as usize) else {
            return 0;
        };
        q.rx.receive(&q.pool, batch, max)
    }

    #[inline]
    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        let Some(q) = self.queues.get_mut(queue as usize) else {
            return 0;
        };
        if batch.is_empty() {
            return 0;
        }
        let before = q.tx.counters.packets;
        let taken = q.tx.fill(batch, &q.pool);
        // One kick per batch: for what this batch posted, or, when the
        // ring was full, for frames an earlier kick could not send.
        if q.tx.counters.packets != before || !batch.is_empty() {
            Self::kick(q);
        }
        taken
    }

    fn stats(&mut self) -> DeviceStats {
        let mut stats = DeviceStats::default();
        for q in &mut self.queues {
            q.kernel_drops += q.socket.take_drops();
            stats.rx_packets += q.rx.counters.packets;
            stats.rx_bytes += q.rx.counters.bytes;
            stats.rx_pool_empty += q.rx.counters.pool_empty;
            stats.rx_oversize += q.rx.counters.oversize;
            stats.tx_packets += q.tx.counters.packets;
            stats.tx_bytes += q.tx.counters.bytes;
            stats.tx_ring_full += q.tx.counters.ring_full;
            stats.tx_invalid += q.tx.counters.invalid;
            stats.kernel_rx_dropped += q.kernel_drops;
        }
        stats
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let mut s = QueueStats::new(i as u16);
                s.rx_descriptors = q.rx.counters.blocks;
                s.rx_packets = q.rx.counters.packets;
                s.rx_bytes = q.rx.counters.bytes;
                s.tx_descriptors = q.tx.counters.packets;
                s.tx_packets = q.tx.counters.packets;
                s.tx_bytes = q.tx.counters.bytes;
                s.tx_software_fallback = q.tx.counters.software_fallback;
                s
            })
            .collect()
    }

    fn feature_registers(&self) -> Vec<(String, u32)> {
        let g = self.geometry();
        let first = &self.queues[0];
        vec![
            ("rx block size".into(), g.rx_block_size),
            ("rx blocks".into(), g.rx_block_nr),
            ("rx block timeout ms".into(), g.retire_ms),
            ("tx frame size".into(), g.tx_frame_size),
            ("tx frames".into(), g.tx_frame_nr),
            ("qdisc bypass".into(), first.socket.qdisc_bypass as u32),
            ("tx kicks".into(), self.tx_kicks() as u32),
            (
                "tx kick errors".into(),
                self.queues.iter().map(|q| q.tx.counters.kick_errors).sum::<u64>() as u32,
            ),
        ]
    }

    fn link(&self) -> Link {
        netif::link(&self.name)
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        if on != self.promisc {
            self.queues[0].socket.set_promisc(&self.spec, on)?;
            self.promisc = on;
        }
        Ok(())
    }

    fn features(&self) -> Features {
        Features {
            crc_offload: true,
            hardware_stats: false,
            flow_control: false,
        }
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.queues[(queue as usize).min(self.queues.len() - 1)].pool.clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.queues.len() as u16, self.queues.len() as u16)
    }

    /// Natively split: a queue is a socket of its own, so its handles
    /// take no lock ([`split`]).
    fn split(self: Box<Self>) -> Result<QueueHandles>
    where
        Self: 'static,
    {
        Ok(split::split(*self))
    }

    /// Kicks and waits until the kernel has taken every posted frame
    /// (status back to TP_STATUS_AVAILABLE, i.e. the skb was freed after
    /// sending); returns how many it has not.
    fn drain_tx(&mut self, timeout: std::time::Duration) -> usize {
        let start = std::time::Instant::now();
        loop {
            let mut left = 0;
            for q in &mut self.queues {
                let n = q.tx.in_flight();
                if n > 0 {
                    Self::kick(q);
                }
                left += n;
            }
            if left == 0 || start.elapsed() >= timeout {
                return left;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

impl Drop for AfPacketDevice {
    fn drop(&mut self) {
        // Closing the socket discards frames still marked for sending:
        // give the kernel a bounded time to take them first.
        let timeout = self.drain_timeout;
        self.drain_tx(timeout);
    }
}
