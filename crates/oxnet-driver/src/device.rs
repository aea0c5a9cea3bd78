//! The `Device` trait every driver implements, its `Config`, and statistics.

use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::PacketBatch;

/// Smallest and largest descriptor ring (82599 datasheet §7.1.9 / §7.2.3.3:
/// RDLEN/TDLEN are multiples of 128 bytes, i.e. 8 descriptors; we keep ring
/// sizes powers of two so that index wrap-around is a mask).
pub const MIN_RING_SIZE: usize = 64;
/// Largest descriptor ring we accept (the 82599 allows up to 8192; 4096 is
/// DPDK's and ixgbe's limit for ring sizes that are powers of two too).
pub const MAX_RING_SIZE: usize = 4096;

/// Largest batch size we accept.
pub const MAX_BATCH_SIZE: usize = 4096;

/// Configuration for opening a device.
#[derive(Debug, Clone)]
pub struct Config {
    /// RX queues (each gets its own ring and mempool).
    pub rx_queues: u16,
    /// TX queues.
    pub tx_queues: u16,
    /// RX descriptors per ring: a power of two, 64..=4096.
    pub rx_ring_size: usize,
    /// TX descriptors per ring: a power of two, 64..=4096.
    pub tx_ring_size: usize,
    /// Packets per `rx_batch`/`tx_batch` call the application intends to use
    /// (used to size TX cleaning batches).
    pub batch_size: usize,
    /// Receive every frame, whatever its destination MAC.
    pub promiscuous: bool,
    /// IEEE 802.3x flow control: the NIC sends PAUSE when its receive buffer
    /// fills, and honours PAUSE from its link partner.
    pub flow_control: bool,
    /// Buffers per RX mempool (0: chosen from the ring size).
    pub pool_size: usize,
    /// Which memory to use; `None`: the device's natural choice (huge pages
    /// for real PCI devices, plain memory for models).
    pub memory: Option<MemoryKind>,
    /// How long to wait for the link to come up at start-up.
    pub link_timeout: std::time::Duration,
    /// Legacy VirtIO: reach the I/O-port BAR with in/out instructions
    /// (ioperm) instead of pread/pwrite on sysfs (falls back if refused).
    pub port_io: bool,
    /// Receive interrupts (MSI-X through vfio): queues can be put to sleep
    /// until a packet arrives (see [`Device::set_rx_interrupt`]).
    pub interrupts: bool,
    /// Interrupt throttling: at least this many microseconds between two
    /// interrupts of a queue (82599 EITR / 82576 EITR); 0 = no throttling.
    pub itr_us: u32,
    /// Hardware offloads (switches; what a device lacks is done in software).
    pub offloads: Offloads,
    /// Largest IP packet the link carries (default 1500). Drivers refuse
    /// what they cannot receive; with RSC a frame of this size must fit the
    /// coalescing limit (82599: RSCCTL.MAXDESC buffers, §7.11).
    pub mtu: usize,
    /// RSC: most receive buffers one coalesced packet may use (82599
    /// RSCCTL.MAXDESC: 1, 4, 8 or 16; default 16 = 32 KiB with 2 KiB buffers).
    pub rsc_max_descriptors: usize,
    /// How long closing a device waits for it to consume the packets
    /// still posted for transmission ([`Device::drain_tx`]); what it has
    /// not consumed by then is freed and counted as not sent
    /// ([`DeviceStats::tx_not_sent`]). Default 1 s.
    pub tx_drain_timeout: std::time::Duration,
    /// `tap:` devices: give the kernel side of the TAP this IPv4 address
    /// ("10.0.0.1/24") and bring it up (`--tap-ip`; the spec's `ip=` wins).
    pub tap_ip: Option<String>,
}

/// TCP segmentation offload mode (82599 datasheet §7.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsoMode {
    /// Segmentation in software.
    #[default]
    Off,
    /// The driver copies a chained packet into one buffer, one data
    /// descriptor per packet.
    Single,
    /// One data descriptor per segment of the chain.
    Multi,
}

/// Hardware feature switches (issue: the 82599's features as switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    /// Receive checksum checking (RXCSUM).
    pub rx_checksum: bool,
    /// Transmit IPv4/TCP/UDP checksum insertion.
    pub tx_checksum: bool,
    /// TCP segmentation offload.
    pub tso: TsoMode,
    /// Receive side coalescing (§7.11).
    pub rsc: bool,
    /// Receive side scaling over `rx_queues` queues (§7.1.2.8).
    pub rss: bool,
    /// Transmit head write-back (§7.2.3.5.2) instead of DD bits.
    pub tx_head_writeback: bool,
    /// Direct cache access (§7.5); no observable effect without hardware.
    pub dca: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rx_queues: 1,
            tx_queues: 1,
            rx_ring_size: 512,
            tx_ring_size: 512,
            batch_size: 32,
            promiscuous: true,
            flow_control: false,
            pool_size: 0,
            memory: None,
            link_timeout: std::time::Duration::from_secs(10),
            port_io: true,
            interrupts: false,
            itr_us: 0,
            offloads: Offloads::default(),
            mtu: 1500,
            rsc_max_descriptors: 16,
            tx_drain_timeout: std::time::Duration::from_secs(1),
            tap_ip: None,
        }
    }
}

impl Config {
    /// Checks every value and says which one is wrong and why.
    pub fn validate(&self) -> Result<()> {
        for (what, size) in [("rx ring size", self.rx_ring_size), ("tx ring size", self.tx_ring_size)] {
            if !size.is_power_of_two() || !(MIN_RING_SIZE..=MAX_RING_SIZE).contains(&size) {
                return Err(Error::Config(format!(
                    "{what} {size} is not a power of two between {MIN_RING_SIZE} and {MAX_RING_SIZE}"
                )));
            }
        }
        if self.rx_queues == 0 || self.tx_queues == 0 {
            return Err(Error::Config("a device needs at least one rx and one tx queue".into()));
        }
        // A batch may be larger than a ring: rx_batch then returns at most
        // what the ring holds, tx_batch leaves the rest with the caller.
        if self.batch_size == 0 || self.batch_size > MAX_BATCH_SIZE {
            return Err(Error::Config(format!(
                "batch size {} must be between 1 and {MAX_BATCH_SIZE}",
                self.batch_size
            )));
        }
        if let Some(kind) = self.memory {
            crate::domain::device_memory(kind, "config")?;
        }
        let needed = self.rx_ring_size + self.batch_size;
        if self.pool_size != 0 && self.pool_size < needed {
            return Err(Error::Config(format!(
                "pool size {} is too small: a queue needs a full ring of {} buffers plus a batch of {}",
                self.pool_size, self.rx_ring_size, self.batch_size
            )));
        }
        Ok(())
    }

    /// Buffers per RX pool: enough for a full RX ring, a full TX ring (a
    /// forwarder parks received buffers there) and batches in flight.
    pub fn effective_pool_size(&self) -> usize {
        if self.pool_size != 0 {
            self.pool_size
        } else {
            (self.rx_ring_size + self.tx_ring_size + 2 * self.batch_size).max(2048)
        }
    }
}

/// Packet and byte counters of a device, accumulated since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Good packets received (hardware counter where the device has one).
    pub rx_packets: u64,
    /// Good packets transmitted.
    pub tx_packets: u64,
    /// Octets of the good packets received (the 82599 counts the CRC too).
    pub rx_bytes: u64,
    /// Octets of the good packets transmitted.
    pub tx_bytes: u64,
    /// Packets the device dropped because no receive descriptor was free
    /// (82599: MPC, "missed packets").
    pub rx_missed: u64,
    /// Frames received with a bad CRC.
    pub rx_crc_errors: u64,
    /// Receive attempts that found the mempool empty (software).
    pub rx_pool_empty: u64,
    /// Transmit attempts that found the ring full (software): packets that
    /// stayed with the caller.
    pub tx_ring_full: u64,
    /// Packets refused because they cannot be sent (empty or too long);
    /// they are dropped (software).
    pub tx_invalid: u64,
    /// Packets from another DMA domain sent from a copy in the device's
    /// own memory (software; see [`crate::domain`]).
    pub tx_copied: u64,
    /// Packets from another DMA domain that stayed with the caller because
    /// no buffer was free to copy them into (software): the packet whose
    /// copy failed, once per failure. The packets behind it in the batch
    /// stay with the caller too (transmission is in order) and are not
    /// counted here.
    pub tx_copy_pool_empty: u64,
    /// Frames received with a length error (82599: RLEC).
    pub rx_length_errors: u64,
    /// Frames shorter than 64 bytes (82599: RUC).
    pub rx_undersize: u64,
    /// Frames longer than the maximum frame size (82599: ROC).
    pub rx_oversize: u64,
    /// Packets `tx_batch` took that the device never consumed: still
    /// posted when the device was closed, or in flight when a vhost-user
    /// back-end went away (software). They were freed, not sent.
    pub tx_not_sent: u64,
    /// Frames the kernel dropped before oxnet saw them (kernel-backed
    /// devices: AF_PACKET's PACKET_STATISTICS tp_drops, AF_XDP's
    /// XDP_STATISTICS rx_dropped + rx_ring_full, TAP queue overruns).
    pub kernel_rx_dropped: u64,
    /// Descriptors the kernel refused as invalid (AF_XDP's XDP_STATISTICS
    /// rx_invalid_descs + tx_invalid_descs; 0 elsewhere).
    pub kernel_invalid_descs: u64,
}

impl DeviceStats {
    /// Adds `other` to `self` field by field.
    pub fn add(&mut self, other: &DeviceStats) {
        self.rx_packets += other.rx_packets;
        self.tx_packets += other.tx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_bytes += other.tx_bytes;
        self.rx_missed += other.rx_missed;
        self.rx_crc_errors += other.rx_crc_errors;
        self.rx_pool_empty += other.rx_pool_empty;
        self.tx_ring_full += other.tx_ring_full;
        self.tx_invalid += other.tx_invalid;
        self.tx_copied += other.tx_copied;
        self.tx_copy_pool_empty += other.tx_copy_pool_empty;
        self.rx_length_errors += other.rx_length_errors;
        self.rx_undersize += other.rx_undersize;
        self.rx_oversize += other.rx_oversize;
        self.tx_not_sent += other.tx_not_sent;
        self.kernel_rx_dropped += other.kernel_rx_dropped;
        self.kernel_invalid_descs += other.kernel_invalid_descs;
    }
}

/// Buckets of [`QueueStats::tx_descriptors_per_packet`]: index n counts
/// packets that used n descriptors (context descriptor included), the last
/// one those that used more.
pub const TX_DESCRIPTOR_HISTOGRAM: usize = 42;

/// Counters of one queue pair, to explain a result: the hardware's
/// per-queue counters and the driver's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    /// Queue number.
    pub queue: u16,
    /// Packets / bytes received on this queue (hardware: 82599 QPRC/QBRC).
    pub hw_rx_packets: u64,
    pub hw_rx_bytes: u64,
    /// Packets / bytes sent from this queue (hardware: 82599 QPTC/QBTC).
    pub hw_tx_packets: u64,
    pub hw_tx_bytes: u64,
    /// Receive descriptors the driver took back from the NIC (software).
    pub rx_descriptors: u64,
    /// Packets handed to the application (a chained RSC packet is one).
    pub rx_packets: u64,
    /// Bytes handed to the application (software; whole chains).
    pub rx_bytes: u64,
    /// Transmit descriptors the driver handed to the NIC, context
    /// descriptors included (software).
    pub tx_descriptors: u64,
    /// Packets the application handed to the driver (a TSO packet is one).
    pub tx_packets: u64,
    /// Bytes the application handed to the driver (software).
    pub tx_bytes: u64,
    /// Context descriptors written (software).
    pub tx_context_descriptors: u64,
    /// Packets segmented or checksummed in software because the switch
    /// was off (software).
    pub tx_software_fallback: u64,
    /// Packets from another DMA domain sent from a copy in this queue's
    /// own domain (software; [`crate::domain`]).
    pub tx_copied: u64,
    /// Packets from another DMA domain that stayed with the caller because
    /// no copy buffer was free (software; as in [`DeviceStats`]).
    pub tx_copy_pool_empty: u64,
    /// Histogram of descriptors per transmitted packet (software).
    pub tx_descriptors_per_packet: [u64; TX_DESCRIPTOR_HISTOGRAM],
}

impl QueueStats {
    /// Zero counters for queue `queue`.
    pub fn new(queue: u16) -> QueueStats {
        QueueStats {
            queue,
            hw_rx_packets: 0,
            hw_rx_bytes: 0,
            hw_tx_packets: 0,
            hw_tx_bytes: 0,
            rx_descriptors: 0,
            rx_packets: 0,
            rx_bytes: 0,
            tx_descriptors: 0,
            tx_packets: 0,
            tx_bytes: 0,
            tx_context_descriptors: 0,
            tx_software_fallback: 0,
            tx_copied: 0,
            tx_copy_pool_empty: 0,
            tx_descriptors_per_packet: [0; TX_DESCRIPTOR_HISTOGRAM],
        }
    }

    /// Counts one transmitted packet that used `descriptors` descriptors.
    #[inline]
    pub fn count_tx_descriptors(&mut self, descriptors: usize, packets: u64) {
        self.tx_descriptors_per_packet[descriptors.min(TX_DESCRIPTOR_HISTOGRAM - 1)] += packets;
    }
}

/// Link state as reported by the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Link is up.
    pub up: bool,
    /// Speed in Mbit/s (0 when down).
    pub speed_mbps: u32,
}

/// Hardware features a device offers (switches arrive with later issues).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// The device strips/appends the Ethernet CRC itself.
    pub crc_offload: bool,
    /// The device counts packets in hardware registers.
    pub hardware_stats: bool,
    /// 802.3x flow control.
    pub flow_control: bool,
}

/// Turns a boxed device into `Box<dyn Device>` (lets [`Device::split`]
/// have a default body); implemented for every device.
pub trait IntoDynDevice {
    /// `self` as a trait object.
    fn into_dyn<'a>(self: Box<Self>) -> Box<dyn Device + 'a>
    where
        Self: 'a;
}

impl<T: Device> IntoDynDevice for T {
    fn into_dyn<'a>(self: Box<Self>) -> Box<dyn Device + 'a>
    where
        Self: 'a,
    {
        self
    }
}

/// A network device: batched receive and transmit on numbered queues.
///
/// One queue is used by one thread at a time (`&mut self`); packets received
/// on one device may be transmitted on another and are freed back to their
/// own pool wherever they are dropped. To run queues on several threads
/// without a lock, [`split`](Device::split) the device into
/// [`QueueHandles`].
pub trait Device: Send + IntoDynDevice {
    /// Name of the driver ("ixgbe", ...).
    fn driver_name(&self) -> &'static str;
    /// The spec string the device was opened with.
    fn spec(&self) -> &str;
    /// Receives up to `max` packets from `queue`, appending them to `batch`.
    /// Returns how many were received.
    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize;
    /// Transmits packets from the front of `batch` on `queue`; returns how
    /// many were taken. Packets that did not fit (ring full) stay in
    /// `batch`, in order, and remain the caller's.
    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize;
    /// Counters since the device was opened (reads the hardware counters).
    fn stats(&mut self) -> DeviceStats;
    /// Link state.
    fn link(&self) -> Link;
    /// The device's MAC address.
    fn mac(&self) -> [u8; 6];
    /// Turns promiscuous mode on or off.
    fn set_promisc(&mut self, on: bool) -> Result<()>;
    /// The hardware features this device has.
    fn features(&self) -> Features;
    /// The mempool that backs receive queue `queue`; applications that
    /// build packets for this device (a packet generator) allocate from it.
    fn mempool(&self, queue: u16) -> Mempool;
    /// Number of RX and TX queues.
    fn queues(&self) -> (u16, u16);

    /// The DMA domain this device reads and writes ([`crate::domain`]): that
    /// of its own memory, where its receive pools live. Packets of another
    /// domain given to `tx_batch` are copied into it (`tx_copied`).
    fn dma_domain(&self) -> crate::domain::DmaDomain {
        self.mempool(0).dma_domain()
    }

    /// Per-queue counters (hardware and software), for queues the driver
    /// counts separately; empty if it does not.
    fn queue_stats(&mut self) -> Vec<QueueStats> {
        Vec::new()
    }

    /// Register values that show how the hardware features are programmed
    /// (name, value), for `oxnet stats`; empty for devices without them.
    fn feature_registers(&self) -> Vec<(String, u32)> {
        Vec::new()
    }

    /// The eventfd that becomes readable when receive queue `queue` raises
    /// an interrupt (epoll it), if the device was opened with interrupts.
    fn rx_interrupt_fd(&self, _queue: u16) -> Option<std::os::unix::io::RawFd> {
        None
    }

    /// A descriptor that polls readable (`POLLIN`, level-triggered) while
    /// receive queue `queue` holds packets, with nothing to arm and never
    /// to be read by the caller: what an idle graph sleeps on
    /// (`Router::run`). TAP, AF_PACKET and AF_XDP have one (the queue's
    /// own fd); devices whose queues only a poll can see (the NIC
    /// drivers, the models) have none.
    fn rx_poll_fd(&self, _queue: u16) -> Option<std::os::unix::io::RawFd> {
        None
    }

    /// Splits the device into one handle per receive queue, one per
    /// transmit queue and a control handle ([`QueueHandles`]), each `Send`,
    /// to be moved to its own thread.
    ///
    /// ixgbe and igb split natively: a queue handle owns its ring and
    /// shares only the register mapping, so the data path takes no lock.
    /// The default (VirtIO, vhost-user) is [`split_locked`]: the handles
    /// share the device behind one mutex, one lock per batch.
    fn split(self: Box<Self>) -> Result<QueueHandles>
    where
        Self: 'static,
    {
        Ok(split_locked(self.into_dyn()))
    }

    /// Arms (`true`) or disarms the receive interrupt of `queue`. An armed
    /// queue fires once when a packet arrives; the application then polls
    /// until the queue is empty and arms it again (as Linux NAPI does).
    fn set_rx_interrupt(&mut self, _queue: u16, _enabled: bool) -> Result<()> {
        Err(Error::Config(format!(
            "{}: interrupts are not available on this device",
            self.spec()
        )))
    }

    /// Waits up to `timeout` until the device has consumed every packet
    /// posted for transmission (VirtIO: the back-end has put each chain in
    /// the used ring, §2.4.8) and returns how many it still has not; those
    /// stay posted and count as not sent if the device is closed now.
    /// Closing a device waits the same way, up to
    /// [`Config::tx_drain_timeout`]. Drivers that do not track consumption
    /// separately return 0 at once (so far only virtio does).
    fn drain_tx(&mut self, _timeout: std::time::Duration) -> usize {
        0
    }
}

/// One receive queue of a split device ([`Device::split`]): owned by one
/// thread, no lock on its data path (natively split drivers).
pub trait RxHandle: Send {
    /// The queue number.
    fn queue(&self) -> u16;
    /// Receives up to `max` packets, appending them to `batch`; returns
    /// how many (as [`Device::rx_batch`]).
    fn rx_batch(&mut self, batch: &mut PacketBatch, max: usize) -> usize;
    /// The queue's [`Device::rx_poll_fd`], if it has one.
    fn poll_fd(&self) -> Option<std::os::unix::io::RawFd> {
        None
    }
}

/// One transmit queue of a split device ([`Device::split`]).
pub trait TxHandle: Send {
    /// The queue number.
    fn queue(&self) -> u16;
    /// Transmits from the front of `batch`; returns how many were taken,
    /// the rest stay in `batch` (as [`Device::tx_batch`]).
    fn tx_batch(&mut self, batch: &mut PacketBatch) -> usize;
}

/// The device-wide part of a split device: statistics, link, address.
/// It may run on any thread while the queue handles run on theirs.
///
/// Statistics: the hardware's clear-on-read counters are read (and
/// accumulated) here only, so nothing is lost between threads. The
/// software counters of each queue (packets, bytes, pool empty, ring full,
/// refused) are published by the queue's handle into per-queue atomics
/// once per batch (relaxed stores, no lock), so they lag by at most the
/// batch in progress; they are exact once the handles are dropped or
/// joined. The ixgbe and igb handles publish every counter the unsplit
/// device's `queue_stats` shows, the transmit descriptor histogram and the
/// offload and copy counters included (those only after a batch that took
/// an offload or software path, so the plain path pays nothing for them).
pub trait ControlHandle: Send {
    /// Name of the driver.
    fn driver_name(&self) -> &'static str;
    /// The spec string the device was opened with.
    fn spec(&self) -> &str;
    /// Counters since the device was opened (as [`Device::stats`]).
    fn stats(&mut self) -> DeviceStats;
    /// Per-queue counters (as [`Device::queue_stats`]).
    fn queue_stats(&mut self) -> Vec<QueueStats>;
    /// Link state.
    fn link(&self) -> Link;
    /// The device's MAC address.
    fn mac(&self) -> [u8; 6];
    /// Turns promiscuous mode on or off.
    fn set_promisc(&mut self, on: bool) -> Result<()>;
    /// The mempool behind receive queue `queue`.
    fn mempool(&self, queue: u16) -> Mempool;
    /// Number of RX and TX queues.
    fn queues(&self) -> (u16, u16);
}

/// A device split into per-queue handles ([`Device::split`]).
///
/// Drop order does not matter for memory safety: a queue handle, when
/// dropped, stops its own queue and waits (bounded) until the NIC
/// acknowledges before it frees the ring and buffers; the device-wide
/// teardown runs when the last handle of the device is gone.
pub struct QueueHandles {
    /// Receive queue handles, queue 0 first.
    pub rx: Vec<Box<dyn RxHandle>>,
    /// Transmit queue handles, queue 0 first.
    pub tx: Vec<Box<dyn TxHandle>>,
    /// Statistics, link and address.
    pub control: Box<dyn ControlHandle>,
}

/// Splits any device into handles that share it behind one
/// `std::sync::Mutex`: the fallback for drivers without a native split
/// (VirtIO, vhost-user: one queue pair, whose rings share the device's
/// state). Cost: one uncontended lock and unlock per batch (two atomic
/// operations, a few instructions per packet at batch 32); threads on the
/// same device serialise on it. A panic inside one handle's call does not
/// make the others fail: the lock is taken back from a poisoned mutex
/// (the device's queues are independent; the panicking call's own queue
/// may have lost its batch).
pub fn split_locked(device: Box<dyn Device>) -> QueueHandles {
    use std::sync::{Arc, Mutex};
    let (rx_queues, tx_queues) = device.queues();
    let shared = Arc::new(Mutex::new(device));
    fn lock(shared: &Mutex<Box<dyn Device>>) -> std::sync::MutexGuard<'_, Box<dyn Device>> {
        shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    struct Rx(Arc<Mutex<Box<dyn Device>>>, u16, Option<std::os::unix::io::RawFd>);
    struct Tx(Arc<Mutex<Box<dyn Device>>>, u16);
    struct Control(Arc<Mutex<Box<dyn Device>>>, String, &'static str);
    impl RxHandle for Rx {
        fn queue(&self) -> u16 {
            self.1
        }
        fn rx_batch(&mut self, batch: &mut PacketBatch, max: usize) -> usize {
            lock(&self.0).rx_batch(self.1, batch, max)
        }
        fn poll_fd(&self) -> Option<std::os::unix::io::RawFd> {
            self.2
        }
    }
    impl TxHandle for Tx {
        fn queue(&self) -> u16 {
            self.1
        }
        fn tx_batch(&mut self, batch: &mut PacketBatch) -> usize {
            lock(&self.0).tx_batch(self.1, batch)
        }
    }
    impl ControlHandle for Control {
        fn driver_name(&self) -> &'static str {
            self.2
        }
        fn spec(&self) -> &str {
            &self.1
        }
        fn stats(&mut self) -> DeviceStats {
            lock(&self.0).stats()
        }
        fn queue_stats(&mut self) -> Vec<QueueStats> {
            lock(&self.0).queue_stats()
        }
        fn link(&self) -> Link {
            lock(&self.0).link()
        }
        fn mac(&self) -> [u8; 6] {
            lock(&self.0).mac()
        }
        fn set_promisc(&mut self, on: bool) -> Result<()> {
            lock(&self.0).set_promisc(on)
        }
        fn mempool(&self, queue: u16) -> Mempool {
            lock(&self.0).mempool(queue)
        }
        fn queues(&self) -> (u16, u16) {
            lock(&self.0).queues()
        }
    }
    let control = Control(shared.clone(), device_spec(&shared), lock(&shared).driver_name());
    QueueHandles {
        rx: (0..rx_queues)
            .map(|q| Box::new(Rx(shared.clone(), q, lock(&shared).rx_poll_fd(q))) as Box<dyn RxHandle>)
            .collect(),
        tx: (0..tx_queues)
            .map(|q| Box::new(Tx(shared.clone(), q)) as Box<dyn TxHandle>)
            .collect(),
        control: Box::new(control),
    }
}

fn device_spec(shared: &std::sync::Mutex<Box<dyn Device>>) -> String {
    shared.lock().map(|d| d.spec().to_string()).unwrap_or_default()
}
