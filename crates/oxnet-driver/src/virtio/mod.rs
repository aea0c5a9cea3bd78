//! VirtIO network driver (VirtIO 1.0 spec, legacy interface), for QEMU's
//! `virtio-net-pci,disable-modern=on` and, through vhost-user, for any
//! vhost-user backend (DPDK, Open vSwitch, VPP, Snabb).
//!
//! Read top-down: [`VirtioNet::init`] follows the initialisation sequence of
//! §3.1.1 (legacy variant, §3.1.2); `rx_batch`/`tx_batch` move packets
//! through split virtqueues ([`virtqueue`]); the transport ([`Transport`])
//! is the only part that differs between PCI and vhost-user.
//!
//! Batching as in the ixgbe driver: the device is told about new buffers
//! once per batch (one avail.idx write, at most one notification), and not
//! at all while it says it needs none (VIRTQ_USED_F_NO_NOTIFY).

pub mod legacy_pci;
pub mod net;
pub mod net_header;
pub mod transport;
#[cfg(test)]
mod tx_tests;
pub mod vhost_user;
pub mod virtqueue;

use crate::device::{Config, Device, DeviceStats, Features, Link, QueueStats, TsoMode};
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::offload;
use crate::packet::{BulkFree, Packet, PacketBatch, TX_REQUEST_MASK, TX_TSO};
use net_header::NetHeader;
use std::time::{Duration, Instant};
use transport::status;
pub use transport::{DeviceEvent, Transport};
use virtqueue::Virtqueue;

/// Feature bits this driver can use; everything else is declined
/// (§3.1.1 step 4: "only features the driver understands").
const WANTED_FEATURES: u64 = net::F_MAC | net::F_STATUS | net::F_CTRL_VQ | net::F_CTRL_RX | net::F_ANY_LAYOUT;

/// The offload features asked for when the application turned the
/// matching switch of [`Config::offloads`] on (and only then: a device
/// that checksums or segments changes what goes on the wire of the peer,
/// so it is the application's choice, as for the NICs).
fn offload_features(config: &Config) -> u64 {
    let o = &config.offloads;
    let mut f = 0;
    if o.tx_checksum {
        f |= net_header::F_CSUM;
    }
    if o.tso != TsoMode::Off {
        // HOST_TSO4 and HOST_TSO6 require CSUM (§5.1.3.1).
        f |= net_header::F_CSUM | net_header::F_HOST_TSO4 | net_header::F_HOST_TSO6;
    }
    if o.rx_checksum {
        f |= net_header::F_GUEST_CSUM;
    }
    f
}

/// The driver asks the transport whether its device is still there (and
/// lets it reconnect) once per this many `rx_batch`/`tx_batch` calls: a
/// vhost-user check is a system call, too dear for every batch.
const DEVICE_POLL_INTERVAL: u32 = 1024;

/// Driver-side options of a virtio device.
#[derive(Debug, Clone, Copy)]
pub struct VirtioOptions {
    /// Negotiate VIRTIO_F_ANY_LAYOUT when offered (one descriptor per
    /// packet); off forces the two-descriptor layout of legacy devices.
    pub any_layout: bool,
}

impl Default for VirtioOptions {
    fn default() -> VirtioOptions {
        VirtioOptions { any_layout: true }
    }
}

/// A virtio-net device on transport `T`.
pub struct VirtioNet<T: Transport> {
    transport: T,
    spec: String,
    features: u64,
    header_len: usize,
    rx: Virtqueue,
    tx: Virtqueue,
    ctrl: Option<Virtqueue>,
    pool: Mempool,
    /// Buffers allocated for refilling the receive queue.
    spare: PacketBatch,
    mac: [u8; 6],
    stats: DeviceStats,
    /// Receive completions too short to hold a header (device bug).
    rx_errors: u64,
    /// Packets whose offload request was done in software because the
    /// device did not offer (or the application did not switch on) the
    /// feature, as [`QueueStats::tx_software_fallback`] counts for NICs.
    tx_software_fallback: u64,
    /// The last reason a packet was refused (tx_invalid), for messages.
    last_tx_error: Option<String>,
    /// The receive queue's interrupt (an eventfd), with `config.interrupts`.
    rx_interrupt: Option<std::fs::File>,
    /// The device went away (vhost-user back-end gone) and has not come
    /// back: nothing is transmitted until it does.
    gone: bool,
    /// Calls since the transport was last polled ([`DEVICE_POLL_INTERVAL`]).
    polls: u32,
    /// How long closing waits for the device to consume what is posted.
    tx_drain_timeout: Duration,
}

impl<T: Transport> VirtioNet<T> {
    /// Initialises the device (§3.1.1), sets up the receive, transmit and
    /// (if offered) control queues, and fills the receive queue.
    pub fn init(mut transport: T, spec: &str, config: &Config, options: VirtioOptions) -> Result<VirtioNet<T>> {
        config.validate()?;
        if config.rx_queues != 1 || config.tx_queues != 1 {
            return Err(Error::Config("the virtio driver supports one queue pair".into()));
        }
        let kind = config.memory.unwrap_or(transport.memory_kind());
        // §3.1.1: reset, ACKNOWLEDGE, DRIVER, features, queues, DRIVER_OK.
        transport.reset()?;
        transport.set_status(status::ACKNOWLEDGE)?;
        transport.set_status(status::ACKNOWLEDGE | status::DRIVER)?;
        let offered = transport.device_features()?;
        let mut wanted = WANTED_FEATURES | offload_features(config);
        if !options.any_layout {
            wanted &= !net::F_ANY_LAYOUT;
        }
        let features = offered & wanted;
        transport.set_driver_features(features)?;
        let header_len = net::header_len(features);
        let chain = if features & net::F_ANY_LAYOUT != 0 { 1 } else { 2 };

        let setup = |transport: &mut T, index: u16, wanted: usize, chain: u16| -> Result<Virtqueue> {
            let size = transport.queue_size(index, wanted.min(32768) as u16)?;
            if size == 0 {
                return Err(Error::Device(format!(
                    "{}: virtqueue {index} does not exist",
                    transport.describe()
                )));
            }
            let queue = Virtqueue::new(index, size, chain, kind)?;
            transport.setup_queue(&queue)?;
            Ok(queue)
        };
        let rx = setup(&mut transport, net::RX_QUEUE, config.rx_ring_size, chain)?;
        // The transmit queue takes chains of any length: a chained packet
        // (RSC-coalesced, or built by the application) is one descriptor
        // chain, one descriptor per segment (§2.4.5).
        let tx = {
            let size = transport.queue_size(net::TX_QUEUE, config.tx_ring_size.min(32768) as u16)?;
            if size == 0 {
                return Err(Error::Device(format!(
                    "{}: virtqueue {} does not exist",
                    transport.describe(),
                    net::TX_QUEUE
                )));
            }
            let queue = Virtqueue::new_chains(net::TX_QUEUE, size, chain == 2, kind)?;
            transport.setup_queue(&queue)?;
            queue
        };
        let ctrl = if features & net::F_CTRL_VQ != 0 {
            Some(setup(&mut transport, net::CTRL_QUEUE, 64, 3)?)
        } else {
            None
        };
        // Interrupts: only the receive queue gets a vector; both queues
        // start with interrupts suppressed (§2.4.7) until the application
        // arms the receive queue (set_rx_interrupt).
        let rx_interrupt = if config.interrupts {
            let mut fds = transport.enable_queue_interrupts(&[net::RX_QUEUE])?;
            rx.set_interrupts(false);
            tx.set_interrupts(false);
            Some(fds.remove(0))
        } else {
            None
        };
        let pool_size = config
            .effective_pool_size()
            .max(rx.size() as usize + tx.size() as usize + 2 * config.batch_size);
        let pool = Mempool::new(&format!("{spec} rx"), pool_size, kind)?;
        if pool.headroom() < header_len {
            return Err(Error::Config(
                "packet head room too small for the virtio-net header".into(),
            ));
        }
        transport.set_status(status::ACKNOWLEDGE | status::DRIVER | status::DRIVER_OK)?;

        let mut mac = [0u8; 6];
        if features & net::F_MAC == 0 || !transport.read_config(net::CONFIG_MAC, &mut mac)? {
            // No MAC from the device: a locally administered one.
            mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
        }
        let mut dev = VirtioNet {
            transport,
            spec: spec.to_string(),
            features,
            header_len,
            rx,
            tx,
            ctrl,
            pool,
            spare: PacketBatch::with_capacity(config.batch_size.max(64)),
            mac,
            stats: DeviceStats::default(),
            rx_errors: 0,
            tx_software_fallback: 0,
            last_tx_error: None,
            rx_interrupt,
            gone: false,
            polls: 0,
            tx_drain_timeout: config.tx_drain_timeout,
        };
        dev.fill_rx()?;
        dev.set_promisc(config.promiscuous)?;
        Ok(dev)
    }

    /// The negotiated feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Bytes of virtio-net header in front of each packet.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Descriptors per packet (1 with ANY_LAYOUT, else 2).
    pub fn descriptors_per_packet(&self) -> usize {
        if self.features & net::F_ANY_LAYOUT != 0 {
            1
        } else {
            2
        }
    }

    /// Packets whose offload request was done in software.
    pub fn tx_software_fallback(&self) -> u64 {
        self.tx_software_fallback
    }

    /// Why the last refused packet was refused.
    pub fn last_tx_error(&self) -> Option<&str> {
        self.last_tx_error.as_deref()
    }

    /// Drops a packet that cannot be sent, counting it and keeping why.
    fn refuse(&mut self, e: Error) {
        self.stats.tx_invalid += 1;
        self.last_tx_error = Some(e.to_string());
    }

    /// Puts one packet that is not plain (a chain, or an offload request)
    /// in the transmit queue. `Err(packet)`: no room now (it stays with the
    /// caller); `Ok`: sent, or refused and counted.
    ///
    /// * A request the device can do goes into the virtio-net header
    ///   (§5.1.6.2, [`NetHeader::for_request`]); one it cannot is done
    ///   here: checksums inserted or the packet segmented
    ///   ([`crate::offload`]), frames sent plain, the packet counted in
    ///   `tx_software_fallback`.
    /// * A chain is posted as one descriptor chain. Only a chain with more
    ///   descriptors than the queue has entries is copied into one buffer
    ///   first: §2.4.5 makes the queue size "the maximum possible
    ///   descriptor chain length", so such a chain could never be posted.
    ///   A chain that merely finds too few free descriptors waits, like a
    ///   plain packet in a full ring (copying it would cost a copy to save
    ///   nothing: the device frees descriptors soon).
    #[cold]
    fn tx_special(&mut self, mut packet: Packet, sent: &mut usize) -> std::result::Result<(), Packet> {
        let header_len = self.header_len;
        let request = packet.tx_offload();
        if packet.is_empty() || packet.headroom() < header_len {
            self.refuse(Error::Config(
                "empty packet, or no head room for the virtio-net header".into(),
            ));
            return Ok(());
        }
        // Another DMA domain (crate::domain): copied, every segment, into
        // a buffer of the device's own pool (which keeps metadata and the
        // offload request); no buffer free: it stays with the caller.
        if !crate::domain::in_domain(&packet, self.pool.dma_domain()) {
            match crate::domain::into_domain(packet, &self.pool) {
                Ok(copy) => {
                    self.stats.tx_copied += 1;
                    packet = copy;
                }
                Err(packet) => {
                    self.stats.tx_copy_pool_empty += 1;
                    return Err(packet);
                }
            }
        }
        let ipv6 = offload::is_ipv6(&packet, request.l2_len as usize);
        if request.flags & TX_REQUEST_MASK != 0 && !net_header::device_can(self.features, &request, ipv6) {
            return self.tx_software(packet, sent);
        }
        if self.tx.descriptors_for(&packet) > self.tx.size() as usize {
            match offload::linearize(&packet, &self.pool) {
                Ok(copy) => packet = copy,
                Err(e) => {
                    self.refuse(e);
                    return Ok(());
                }
            }
        }
        if self.tx.descriptors_for(&packet) > self.tx.free_slots() {
            return Err(packet);
        }
        let header = if request.flags & TX_REQUEST_MASK != 0 {
            let total = packet.total_len();
            match NetHeader::for_request(&mut packet, total, &request) {
                Ok(header) => header,
                Err(e) => {
                    self.refuse(e);
                    return Ok(());
                }
            }
        } else {
            NetHeader::default()
        };
        if let Some(room) = packet.head_room_mut(header_len) {
            header.write(room);
        }
        self.tx.post_chain(packet, header_len)?;
        *sent += 1;
        Ok(())
    }

    /// The software fallback: the request done here, with the bytes the
    /// device would have sent, the frames posted plain.
    #[cold]
    fn tx_software(&mut self, packet: Packet, sent: &mut usize) -> std::result::Result<(), Packet> {
        let request = packet.tx_offload();
        let mut frames = Vec::new();
        let made = if request.flags & TX_TSO != 0 {
            offload::segment(&packet, &self.pool, &mut frames)
        } else {
            let copy = if packet.is_chained() {
                offload::linearize(&packet, &self.pool)
            } else {
                self.pool.alloc().and_then(|mut copy| {
                    copy.set_len(packet.len())?;
                    copy.copy_from_slice(&packet);
                    Ok(copy)
                })
            };
            copy.and_then(|mut copy| {
                offload::fill_checksums(&mut copy, &request)?;
                copy.set_tx_offload(Default::default());
                frames.push(copy);
                Ok(())
            })
        };
        if let Err(e) = made {
            self.refuse(e);
            return Ok(());
        }
        let needed = frames.len() * self.descriptors_per_packet();
        if needed > self.tx.size() as usize {
            self.refuse(Error::Config(format!(
                "a packet of {} segments needs {needed} descriptors; the transmit queue has {}",
                frames.len(),
                self.tx.size()
            )));
            return Ok(());
        }
        if needed > self.tx.free_slots() {
            return Err(packet);
        }
        let header_len = self.header_len;
        for mut frame in frames {
            if let Some(room) = frame.head_room_mut(header_len) {
                room.fill(0);
            }
            if self.tx.post_chain(frame, header_len).is_err() {
                unreachable!("free descriptors were counted");
            }
        }
        self.tx_software_fallback += 1;
        *sent += 1;
        Ok(())
    }

    /// With GUEST_CSUM: the received header's checksum flags become the
    /// packet's checksum metadata (§5.1.6.4); a partial checksum
    /// (NEEDS_CSUM, from a local sender) is completed first, so the packet
    /// can be forwarded as it is. A header pointing outside the packet is
    /// counted in `rx_errors` and the packet left unmarked (software checks
    /// it later if asked).
    #[cold]
    fn rx_checksum(&mut self, packet: &mut Packet) {
        let header_len = self.header_len;
        let Some(header) = packet.head_room_mut(header_len).and_then(|b| NetHeader::read(b)) else {
            return;
        };
        if header.complete_partial(packet).is_err() {
            self.rx_errors += 1;
            return;
        }
        let flags = header.rx_checksum_flags(packet);
        packet.meta_mut().flags |= flags;
    }

    /// Posts a buffer in every free receive slot (§5.1.6.3).
    fn fill_rx(&mut self) -> Result<()> {
        let want = self.rx.free_slots();
        let mut batch = PacketBatch::with_capacity(want);
        if self.pool.alloc_batch(&mut batch, want) < want {
            return Err(Error::PoolExhausted {
                pool: self.pool.name().to_string(),
                size: self.pool.size(),
            });
        }
        for packet in batch.drain_front(want) {
            if self.rx.post(packet, self.header_len, true).is_err() {
                unreachable!("free slots were counted");
            }
        }
        self.rx.publish();
        if self.rx.needs_notification() {
            self.transport.notify(self.rx.index);
        }
        Ok(())
    }

    /// Takes back the transmit chains the device has used (§2.4.8) and
    /// counts them: `tx_packets` is what the device consumed, not what
    /// was posted.
    #[inline]
    fn reap_tx(&mut self) {
        let mut free = BulkFree::new();
        while let Some((packet, _)) = self.tx.pop_used() {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += packet.total_len() as u64;
            free.push(packet);
        }
    }

    /// Every [`DEVICE_POLL_INTERVAL`] calls: lets the transport check its
    /// device and reconnect.
    #[inline]
    fn poll_transport(&mut self) {
        self.polls += 1;
        if self.polls >= DEVICE_POLL_INTERVAL {
            self.polls = 0;
            self.check_device();
        }
    }

    #[cold]
    fn check_device(&mut self) {
        match self.transport.poll_device() {
            DeviceEvent::Unchanged => {}
            DeviceEvent::Lost => self.gone = true,
            DeviceEvent::Back => {
                self.gone = self.restart_queues().is_err();
                if self.gone {
                    self.transport.disconnect();
                }
            }
        }
    }

    /// A new device (a restarted vhost-user back-end) replaces one that
    /// went away: what the old one used is counted as sent, every other
    /// packet it held is freed (transmit: counted as not sent), and the
    /// queues are set up again from index 0, as at initialisation.
    fn restart_queues(&mut self) -> Result<()> {
        self.reap_tx();
        self.stats.tx_not_sent += self.tx.reset() as u64;
        self.rx.reset();
        if let Some(ctrl) = self.ctrl.as_mut() {
            ctrl.reset();
        }
        self.transport.setup_queue(&self.rx)?;
        self.transport.setup_queue(&self.tx)?;
        if let Some(ctrl) = self.ctrl.as_ref() {
            self.transport.setup_queue(ctrl)?;
        }
        self.transport
            .set_status(status::ACKNOWLEDGE | status::DRIVER | status::DRIVER_OK)?;
        self.fill_rx()
    }

    /// Sends one control command and waits for the device's ack
    /// (§5.1.6.5). Legacy devices answer at once; we poll up to a second.
    fn control(&mut self, class: u8, command: u8, data: &[u8]) -> Result<()> {
        let Some(ctrl) = self.ctrl.as_mut() else {
            return Err(Error::Device(format!("{}: the device has no control queue", self.spec)));
        };
        let mut packet = self.pool.alloc()?;
        packet.set_len(3 + data.len())?;
        packet[0] = class;
        packet[1] = command;
        packet[2..2 + data.len()].copy_from_slice(data);
        let last = packet.len() - 1;
        packet[last] = 0xFF;
        if ctrl.post_control(packet).is_err() {
            return Err(Error::Device(format!("{}: control queue full", self.spec)));
        }
        ctrl.publish();
        let index = ctrl.index;
        self.transport.notify(index);
        let start = std::time::Instant::now();
        loop {
            let ctrl = self.ctrl.as_mut().expect("checked above");
            if let Some((packet, _)) = ctrl.pop_used() {
                let ack = packet[packet.len() - 1];
                return if ack == net::CTRL_OK {
                    Ok(())
                } else {
                    Err(Error::Device(format!(
                        "{}: control command class {class} command {command} refused (ack {ack})",
                        self.spec
                    )))
                };
            }
            if start.elapsed() > std::time::Duration::from_secs(1) {
                return Err(Error::Device(format!(
                    "{}: no answer to a control command within 1 s",
                    self.spec
                )));
            }
            self.transport.check_alive()?;
            std::thread::yield_now();
        }
    }
}

impl<T: Transport> Device for VirtioNet<T> {
    fn driver_name(&self) -> &'static str {
        "virtio"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    #[inline]
    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        if queue != 0 {
            return 0;
        }
        self.poll_transport();
        if self.spare.len() < max {
            let want = max - self.spare.len();
            self.pool.alloc_batch(&mut self.spare, want);
        }
        let mut received = 0;
        while received < max {
            // Refill before taking: never leave the device without buffers
            // for longer than one packet.
            let Some(fresh) = self.spare.pop() else {
                self.stats.rx_pool_empty += 1;
                break;
            };
            let Some((mut packet, written)) = self.rx.pop_used() else {
                self.spare.push(fresh);
                break;
            };
            let _ = self.rx.post(fresh, self.header_len, true);
            let written = written as usize;
            if written < self.header_len || packet.set_len(written - self.header_len).is_err() {
                self.rx_errors += 1;
                continue;
            }
            if self.features & net_header::F_GUEST_CSUM != 0 {
                self.rx_checksum(&mut packet);
            }
            self.stats.rx_bytes += packet.len() as u64;
            batch.push(packet);
            received += 1;
        }
        if received > 0 {
            self.stats.rx_packets += received as u64;
            self.rx.publish();
            if self.rx.needs_notification() {
                self.transport.notify(self.rx.index);
            }
        }
        received
    }

    #[inline]
    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        if queue != 0 {
            return 0;
        }
        self.poll_transport();
        if self.gone || self.transport.before_tx().is_err() {
            return 0;
        }
        // Clean: the device is done with these (§2.4.8).
        self.reap_tx();
        let header_len = self.header_len;
        let per_plain = self.descriptors_per_packet();
        let domain = self.pool.dma_domain();
        let mut sent = 0;
        let taken = batch.consume_front_while(batch.len(), |mut packet| {
            // A chain or an offload request (a chain head carries a flag in
            // the request word): the slow path.
            if packet.len_and_request() >> 32 != 0 {
                return self.tx_special(packet, &mut sent);
            }
            if packet.is_empty() || packet.headroom() < header_len {
                self.stats.tx_invalid += 1;
                return Ok(());
            }
            // A packet of another DMA domain: its address means nothing to
            // this device (crate::domain); copied on the slow path.
            if packet.dma_domain() != domain {
                return self.tx_special(packet, &mut sent);
            }
            if self.tx.free_slots() < per_plain {
                return Err(packet);
            }
            // The header goes into the head room in front of the data; all
            // zero: no checksum offload, no segmentation (§5.1.6.2).
            // Written only where it is not zero already (DPDK's virtio PMD
            // does the same): a buffer that comes back unchanged keeps its
            // header's cache line clean, so the device reads it without
            // taking it from our core's cache.
            if let Some(header) = packet.head_room_mut(header_len) {
                if header.iter().any(|&b| b != 0) {
                    header.fill(0);
                }
            }
            self.tx.post_chain(packet, header_len)?;
            sent += 1;
            Ok(())
        });
        self.stats.tx_ring_full += batch.len() as u64;
        if sent > 0 {
            self.tx.publish();
            if self.tx.needs_notification() {
                self.transport.notify(self.tx.index);
            }
        }
        taken
    }

    fn stats(&mut self) -> DeviceStats {
        // A virtio device counts nothing itself: these are the driver's,
        // transmit counted when the device has used the chain.
        self.reap_tx();
        self.stats
    }

    fn link(&self) -> Link {
        // Without VIRTIO_NET_F_STATUS the link is always up (§5.1.4).
        let mut status = [0u8; 2];
        let up = self.features & net::F_STATUS == 0
            || !matches!(self.transport.read_config(net::CONFIG_STATUS, &mut status), Ok(true))
            || u16::from_le_bytes(status) & net::S_LINK_UP != 0;
        Link {
            up,
            speed_mbps: if up { 10_000 } else { 0 },
        }
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        if self.features & net::F_CTRL_RX == 0 {
            // Without the receive-mode commands the device delivers every
            // frame already (QEMU without CTRL_RX is promiscuous).
            return Ok(());
        }
        self.control(net::CTRL_RX, net::CTRL_RX_PROMISC, &[on as u8])
    }

    fn features(&self) -> Features {
        Features {
            crc_offload: true,
            hardware_stats: false,
            flow_control: false,
        }
    }

    /// The negotiated feature bits (§2.2), for `oxnet stats` and tests.
    fn feature_registers(&self) -> Vec<(String, u32)> {
        vec![
            ("virtio features 31:0".into(), self.features as u32),
            ("virtio features 63:32".into(), (self.features >> 32) as u32),
        ]
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        let mut q = QueueStats::new(0);
        q.rx_packets = self.stats.rx_packets;
        q.rx_bytes = self.stats.rx_bytes;
        q.tx_packets = self.stats.tx_packets;
        q.tx_bytes = self.stats.tx_bytes;
        q.tx_software_fallback = self.tx_software_fallback;
        vec![q]
    }

    fn mempool(&self, _queue: u16) -> Mempool {
        self.pool.clone()
    }

    fn queues(&self) -> (u16, u16) {
        (1, 1)
    }

    fn rx_interrupt_fd(&self, queue: u16) -> Option<std::os::unix::io::RawFd> {
        use std::os::unix::io::AsRawFd;
        (queue == 0).then_some(self.rx_interrupt.as_ref()?.as_raw_fd())
    }

    fn set_rx_interrupt(&mut self, queue: u16, enabled: bool) -> Result<()> {
        if queue != 0 || self.rx_interrupt.is_none() {
            return Err(Error::Config(format!(
                "{}: no receive interrupt on queue {queue} (open the device with interrupts, bound to vfio-pci)",
                self.spec
            )));
        }
        // Interrupt suppression is a flag in the available ring (§2.4.7.1).
        self.rx.set_interrupts(enabled);
        Ok(())
    }

    /// Polls the used ring until every posted chain is back (§2.4.8), the
    /// time is up, or the device is gone.
    fn drain_tx(&mut self, timeout: Duration) -> usize {
        let start = Instant::now();
        loop {
            self.reap_tx();
            let left = self.tx.in_flight();
            if left == 0 || self.gone || start.elapsed() >= timeout || self.transport.check_alive().is_err() {
                return left;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl<T: Transport> Drop for VirtioNet<T> {
    fn drop(&mut self) {
        // Give the device the time to send what it was handed (a vhost-user
        // back-end stops the ring at GET_VRING_BASE and would drop the
        // rest), then stop it before its queues and buffers are freed.
        let left = self.drain_tx(self.tx_drain_timeout);
        self.stats.tx_not_sent += left as u64;
        let _ = self.transport.reset();
    }
}
