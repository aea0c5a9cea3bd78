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
pub mod transport;
pub mod vhost_user;
pub mod virtqueue;

use crate::device::{Config, Device, DeviceStats, Features, Link};
use crate::error::{Error, Result};
use crate::mempool::Mempool;
use crate::packet::{BulkFree, PacketBatch};
use std::time::{Duration, Instant};
use transport::status;
pub use transport::{DeviceEvent, Transport};
use virtqueue::Virtqueue;

/// Feature bits this driver can use; everything else is declined
/// (§3.1.1 step 4: "only features the driver understands").
const WANTED_FEATURES: u64 = net::F_MAC | net::F_STATUS | net::F_CTRL_VQ | net::F_CTRL_RX | net::F_ANY_LAYOUT;

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
        let mut wanted = WANTED_FEATURES;
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
        let tx = setup(&mut transport, net::TX_QUEUE, config.tx_ring_size, chain)?;
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
        let n = batch.len().min(self.tx.free_slots());
        if n < batch.len() {
            self.stats.tx_ring_full += (batch.len() - n) as u64;
        }
        let header_len = self.header_len;
        let mut sent = 0;
        for mut packet in batch.drain_front(n) {
            if packet.is_empty() || packet.headroom() < header_len {
                self.stats.tx_invalid += 1;
                continue;
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
            let _ = self.tx.post(packet, header_len, false);
            sent += 1;
        }
        if sent > 0 {
            self.tx.publish();
            if self.tx.needs_notification() {
                self.transport.notify(self.tx.index);
            }
        }
        n
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
