//! Driver for the Intel 82576 1 GbE controller (copper ports). The I350 is
//! refused: its IVAR layout differs (docs/devices.md).
//!
//! Read it beside the 82576 datasheet: [`IgbDevice::init`] follows the
//! software initialisation sequence of §4.5 step by step, receive follows
//! §4.5.8 and §7.1, transmit §4.5.9 and §7.2. The structure is the ixgbe
//! driver's (`crate::ixgbe`), which is ixy's:
//!
//! * one descriptor ring per queue in DMA memory, advanced descriptors
//!   ([`crate::advanced`]: the 82576 and the 82599 share the formats, and
//!   the two drivers share the code);
//! * receive: check DD in the descriptor in memory (never read RDH), hand
//!   the buffer to the application, re-arm the descriptor with a fresh
//!   buffer, write RDT once per batch;
//! * transmit: clean finished descriptors in batches of [`TX_CLEAN_BATCH`],
//!   fill descriptors, write TDT once per batch;
//! * more than one receive queue: receive-side scaling (RSS) spreads flows
//!   over them by a hash of addresses and ports;
//! * the hardware features of [`Config::offloads`] the 82576 has (checksum
//!   offload, TSO, head write-back, DCA, RSS) as switches, as the ixgbe
//!   driver does them ([`features`]); RSC, which it lacks, is refused.
//!
//! The driver is generic over [`RegisterAccess`]: on hardware that is
//! volatile loads and stores into BAR0 (mapped through sysfs or vfio).
//! It is tested against QEMU's `igb` device model (docs/igb.md).

pub mod features;
pub mod regs;
mod rx;
pub mod teardown;
mod tx;

use crate::device::{Config, Device, DeviceStats, Features, Link};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::PacketBatch;
use crate::regs::RegisterAccess;
use crate::wait::{poll_bits, wait_bits};
use regs::*;
use std::time::{Duration, Instant};

pub use crate::advanced::TX_CLEAN_BATCH;

/// The 82576's side of the advanced-descriptor queues
/// ([`crate::advanced::Nic`]).
pub struct Nic82576;

impl crate::advanced::Nic for Nic82576 {
    #[inline]
    fn rdt(queue: u32) -> u32 {
        regs::rdt(queue)
    }
    #[inline]
    fn tdt(queue: u32) -> u32 {
        regs::tdt(queue)
    }
    // §7.1.5.2: L4E and IPE are one bit lower than the 82599's.
    const RX_ERROR_IPE: u32 = crate::advanced::RX_ERROR_82576_IPE;
    const RX_ERROR_L4E: u32 = crate::advanced::RX_ERROR_82576_L4E;
    // No RSC on the 82576 (features.rs refuses the switch).
    const RSC: bool = false;
    const COUNT_FAST_RX: bool = false;
    const TSO_LIMITS: crate::offload::TsoLimits = features::TSO_LIMITS;
}

/// A receive queue of the 82576 (set up in rx.rs).
pub type RxQueue = crate::advanced::RxQueue<Nic82576>;
/// A transmit queue of the 82576 (set up in tx.rs).
pub type TxQueue = crate::advanced::TxQueue<Nic82576>;

/// PCI vendor id of Intel.
pub const INTEL_VENDOR_ID: u16 = 0x8086;

/// Device ids this driver accepts, with the number of queues per direction
/// (Linux's e1000_hw.h lists the same ids). Copper ports only: fibre and
/// SerDes ports set their link up through the PCS, which this driver does
/// not program.
pub const DEVICE_IDS: &[(u16, &str, u16)] = &[
    (0x10C9, "82576", 16),
    (0x10E8, "82576 quad copper", 16),
    (0x1526, "82576 quad copper ET2", 16),
    (0x150A, "82576NS", 16),
];
// The I350 is refused (crate::pci::REFUSED_IDS): its IVAR layout differs
// from the 82576's (docs/devices.md).

/// True if this driver handles the device with these PCI ids.
pub fn supports(vendor: u16, device: u16) -> bool {
    vendor == INTEL_VENDOR_ID && DEVICE_IDS.iter().any(|(id, _, _)| *id == device)
}

/// Queues per direction of a device id (16 for the 82576, 8 for the I350).
pub fn max_queues(device: u16) -> u16 {
    DEVICE_IDS
        .iter()
        .find(|(id, _, _)| *id == device)
        .map_or(16, |(_, _, queues)| *queues)
}

/// The name in error messages.
const NAME: &str = "82576";

/// How long the EEPROM auto-read may take after a reset: Linux's igb waits
/// 10 ms (AUTO_READ_DONE_TIMEOUT).
const AUTO_READ_TIMEOUT: Duration = Duration::from_millis(10);

/// An initialised 82576 with its queues.
pub struct IgbDevice<R: RegisterAccess> {
    /// Shared with the queue handles after [`Device::split`].
    regs: std::sync::Arc<R>,
    spec: String,
    rx_queues: Vec<RxQueue>,
    tx_queues: Vec<TxQueue>,
    /// Hardware counters are clear-on-read; we add them up here.
    stats: DeviceStats,
    mac: [u8; 6],
    /// False if EECD.AUTO_RD never came after the reset (QEMU's model does
    /// not set it; a real 82576 does within milliseconds).
    eeprom_auto_read_seen: bool,
    /// One eventfd per receive queue once MSI-X is set up (vfio only).
    rx_interrupts: Vec<std::fs::File>,
}

impl<R: RegisterAccess> IgbDevice<R> {
    /// Resets and initialises the device per datasheet §4.5, sets up
    /// `config.rx_queues` / `config.tx_queues` queues (at most
    /// `max_queues`: 16 on the 82576, 8 on the I350) and starts them.
    pub fn init(
        regs: R,
        spec: &str,
        config: &Config,
        default_memory: MemoryKind,
        max_queues: u16,
    ) -> Result<IgbDevice<R>> {
        config.validate()?;
        features::validate(config).map_err(|e| Error::Config(format!("{spec}: {}", config_message(e))))?;
        if config.rx_queues > max_queues || config.tx_queues > max_queues {
            return Err(Error::Config(format!(
                "{spec}: this igb device has {max_queues} queues per direction, {} rx / {} tx asked for",
                config.rx_queues, config.tx_queues
            )));
        }
        if config.flow_control {
            return Err(Error::Config(format!(
                "{spec}: the igb driver does not implement 802.3x flow control yet (drop --flow-control)"
            )));
        }
        let memory = crate::domain::device_memory(config.memory.unwrap_or(default_memory), spec)?;
        let mut dev = IgbDevice {
            regs: std::sync::Arc::new(regs),
            spec: spec.to_string(),
            rx_queues: Vec::new(),
            tx_queues: Vec::new(),
            stats: DeviceStats::default(),
            mac: [0; 6],
            eeprom_auto_read_seen: false,
            rx_interrupts: Vec::new(),
        };
        dev.reset()?;
        dev.mac = dev.read_mac()?;
        dev.init_link()?;
        // §4.5.6 (statistics): the counters are clear-on-read; read them
        // once so that counting starts at zero.
        dev.read_hardware_stats();
        dev.stats = DeviceStats::default();
        dev.init_rx(config, memory)?;
        dev.init_tx(config, memory)?;
        dev.set_promisc(config.promiscuous)?;
        dev.wait_for_link(config.link_timeout);
        Ok(dev)
    }

    /// Routes receive queue q to MSI-X vector q, whose interrupts signal
    /// `eventfds[q]` (vfio set them up), throttled to one per `itr_us`
    /// microseconds (82576 datasheet §7.3 interrupts, §8.8 registers; the
    /// Linux igb driver programs the same registers). Every vector starts
    /// masked: [`Device::set_rx_interrupt`] arms one, and it masks itself
    /// again when it fires (EIAM with GPIE.EIAME), as NAPI expects.
    pub fn enable_msix(&mut self, eventfds: Vec<std::fs::File>, itr_us: u32) -> Result<()> {
        if eventfds.len() < self.rx_queues.len() {
            return Err(Error::Device(format!(
                "{}: {} interrupt vectors for {} receive queues",
                self.spec,
                eventfds.len(),
                self.rx_queues.len()
            )));
        }
        let r = &*self.regs;
        r.write32(GPIE, GPIE_NSICR | GPIE_MSIX_MODE | GPIE_EIAME | GPIE_PBA);
        let mut vectors = 0u32;
        for q in 0..self.rx_queues.len() as u32 {
            // RX queue q → vector q: row q & 7, byte 0 (queues 0–7) or 2.
            let shift = (q & 8) << 1;
            let value = r.read32(ivar(q & 7)) & !(0xFF << shift);
            r.write32(ivar(q & 7), value | ((q | IVAR_VALID) << shift));
            // The interval field counts microseconds in bits 14:2.
            r.write32(eitr(q), ((itr_us << 2) & EITR_INTERVAL_MASK) | EITR_CNT_IGNR);
            vectors |= 1 << q;
        }
        r.write32(EIAC, vectors);
        r.write32(EIAM, vectors);
        r.write32(EIMC, INTERRUPTS_ALL);
        self.rx_interrupts = eventfds;
        self.rx_interrupts.truncate(self.rx_queues.len());
        Ok(())
    }

    /// Transmit queue `q` (tests look at its head write-back and errors).
    pub fn tx_queue(&self, q: u16) -> Option<&TxQueue> {
        self.tx_queues.get(q as usize)
    }

    /// Reads the register at byte `offset` (tests look inside the device
    /// with it). Reading cannot make the NIC DMA anywhere; it does clear
    /// the clear-on-read statistics counters (82576 §8.19), which
    /// [`Device::stats`] then misses.
    pub fn read_register(&self, offset: u32) -> u32 {
        self.regs.read32(offset)
    }

    /// The raw register interface.
    ///
    /// # Safety
    /// Whoever writes through it can point the NIC's DMA (RDBAL/TDBAL,
    /// head write-back) at any memory: the caller must not write registers
    /// that change where or whether the device reads and writes memory.
    pub unsafe fn registers(&self) -> &R {
        &self.regs
    }

    /// The register interface, mutable (vfio: enabling interrupts).
    /// Only before [`Device::split`] (vfio opens interrupts right after
    /// `init`), when nothing else holds the registers.
    pub(crate) fn registers_mut(&mut self) -> &mut R {
        std::sync::Arc::get_mut(&mut self.regs).expect("igb registers are borrowed mutably only before split")
    }

    /// Whether EECD.AUTO_RD was seen after the reset (see docs/igb.md).
    pub fn eeprom_auto_read_seen(&self) -> bool {
        self.eeprom_auto_read_seen
    }

    /// §4.5.1 disable interrupts, §4.5.2 global reset: stop DMA (master
    /// disable), stop receive and transmit, CTRL.RST, wait for the EEPROM
    /// auto-read, disable interrupts again.
    fn reset(&mut self) -> Result<()> {
        let r = &*self.regs;
        // §4.5.1: "interrupts should be masked ... before the reset".
        r.write32(IMC, INTERRUPTS_ALL);
        r.write32(EIMC, INTERRUPTS_ALL);
        // §4.5.2 / §5.2.x master disable: let outstanding DMA finish before
        // the reset (STATUS.GIO_MASTER_ENABLE clears when none is left).
        r.set_flags32(CTRL, CTRL_GIO_MASTER_DISABLE);
        // On a timeout the reset below ends outstanding requests anyway
        // (Linux's igb carries on too).
        let _ = poll_bits(r, STATUS, STATUS_GIO_MASTER_ENABLE, 0, Duration::from_millis(100));
        // Receiver and transmitter off; PSP kept, as after power-on.
        r.write32(RCTL, 0);
        r.write32(TCTL, TCTL_PSP);
        std::thread::sleep(Duration::from_millis(10));
        // Device reset: self-clearing; the datasheet asks to wait at least
        // 1 ms before the next register access (§8.2.1, CTRL.RST).
        let ctrl = r.read32(CTRL);
        r.write32(CTRL, ctrl | CTRL_RST);
        std::thread::sleep(Duration::from_millis(2));
        wait_bits(r, NAME, CTRL, CTRL_RST, 0, "device reset (CTRL.RST)")?;
        // §4.5.2: "wait for EEPROM auto read completion" (EECD.AUTO_RD).
        // Linux's igb carries on when it does not come (boards without
        // EEPROM); QEMU's igb model never sets the bit, so neither do we
        // fail, but remember it.
        self.eeprom_auto_read_seen = poll_bits(r, EECD, EECD_AUTO_RD, EECD_AUTO_RD, AUTO_READ_TIMEOUT);
        // §4.5.1 again after the reset; read ICR to clear pending causes.
        r.write32(IMC, INTERRUPTS_ALL);
        r.write32(EIMC, INTERRUPTS_ALL);
        let _ = r.read32(ICR);
        // Tell manageability firmware (if any) that a driver owns the port.
        r.set_flags32(CTRL_EXT, CTRL_EXT_DRV_LOAD);
        Ok(())
    }

    /// MAC address from receive address register 0, which the NIC loads
    /// from its EEPROM (RAL0 holds bytes 0–3, RAH0 bytes 4–5 and AV).
    fn read_mac(&self) -> Result<[u8; 6]> {
        let low = self.regs.read32(RAL0);
        let high = self.regs.read32(RAH0);
        if high & RAH_AV == 0 {
            return Err(Error::Device(format!(
                "{}: receive address 0 is not valid after the reset (no MAC address in the EEPROM?)",
                self.spec
            )));
        }
        let l = low.to_le_bytes();
        let h = high.to_le_bytes();
        Ok([l[0], l[1], l[2], l[3], h[0], h[1]])
    }

    /// §4.5.7 link set-up for the internal copper PHY: the MAC takes speed
    /// and duplex from the PHY (CTRL.SLU = 1, FRCSPD = FRCDPLX = 0), and the
    /// PHY (re)starts auto-negotiation (PHY control register, bits 12/9).
    fn init_link(&mut self) -> Result<()> {
        let ctrl = self.regs.read32(CTRL);
        let ctrl = (ctrl | CTRL_SLU) & !(CTRL_FRCSPD | CTRL_FRCDPX | CTRL_LRST);
        self.regs.write32(CTRL, ctrl);
        let control = self.phy_read(PHY_CONTROL)?;
        self.phy_write(PHY_CONTROL, control | PHY_CONTROL_AN_ENABLE | PHY_CONTROL_RESTART_AN)
    }

    /// Reads PHY register `register` through MDIC (§8.2.4: write the
    /// command, poll MDIC.R, check MDIC.E).
    fn phy_read(&self, register: u32) -> Result<u16> {
        self.regs
            .write32(MDIC, (register << MDIC_REG_SHIFT) | MDIC_PHY_ADDRESS | MDIC_OP_READ);
        let value = self.mdic_wait(register)?;
        Ok(value as u16)
    }

    /// Writes PHY register `register` through MDIC.
    fn phy_write(&self, register: u32, value: u16) -> Result<()> {
        self.regs.write32(
            MDIC,
            value as u32 | (register << MDIC_REG_SHIFT) | MDIC_PHY_ADDRESS | MDIC_OP_WRITE,
        );
        self.mdic_wait(register).map(|_| ())
    }

    fn mdic_wait(&self, register: u32) -> Result<u32> {
        let what = format!("PHY register {register} access (MDIC.R)");
        wait_bits(&*self.regs, NAME, MDIC, MDIC_READY, MDIC_READY, &what)?;
        let mdic = self.regs.read32(MDIC);
        if mdic & MDIC_ERROR != 0 {
            return Err(Error::Device(format!(
                "{}: the PHY did not answer the access to its register {register} (MDIC.E set)",
                self.spec
            )));
        }
        Ok(mdic)
    }

    /// §4.5.8 receive initialisation (the per-queue part is in rx.rs).
    fn init_rx(&mut self, config: &Config, memory: MemoryKind) -> Result<()> {
        // Receive stays off while we set it up.
        self.regs.clear_flags32(RCTL, RCTL_EN);
        // §4.5.8: "initialise the Multicast Table Array": no groups joined.
        for n in 0..MTA_ENTRIES {
            self.regs.write32(MTA + 4 * n, 0);
        }
        for q in 0..config.rx_queues {
            let queue = rx::new_rx_queue(&*self.regs, q, config, memory, &self.spec)?;
            self.rx_queues.push(queue);
        }
        // Offload switches: RSS, checksum control (features.rs).
        features::init_rx(&*self.regs, config);
        // §8.10.1 RCTL: accept broadcast, strip the CRC (the application
        // never sees the 4 CRC bytes), no long packets, 2 KB buffers in
        // RCTL.BSIZE = 00b (SRRCTL's size is the one used). UPE/MPE are
        // set by set_promisc.
        let rctl = self.regs.read32(RCTL) & !(RCTL_LPE | RCTL_BSIZE_MASK);
        self.regs.write32(RCTL, rctl | RCTL_BAM | RCTL_SECRC);
        for q in 0..config.rx_queues {
            self.start_rx_queue(q)?;
        }
        // §4.5.8 last step: enable the receiver.
        self.regs.set_flags32(RCTL, RCTL_EN);
        Ok(())
    }

    /// §4.5.9 transmit initialisation (the per-queue part is in tx.rs).
    fn init_tx(&mut self, config: &Config, memory: MemoryKind) -> Result<()> {
        // §8.12.1 TCTL: pad short packets, collision threshold and distance
        // for full duplex, re-transmit on late collision; enabled last.
        let tctl = self.regs.read32(TCTL) & !(TCTL_CT_COLD_MASK | TCTL_EN);
        self.regs
            .write32(TCTL, tctl | TCTL_PSP | TCTL_CT_15 | TCTL_COLD_63 | TCTL_RTLC);
        for q in 0..config.tx_queues {
            let queue = tx::new_tx_queue(&*self.regs, q, config, memory)?;
            self.tx_queues.push(queue);
        }
        features::init_dca(&*self.regs, config);
        for q in 0..config.tx_queues {
            self.start_tx_queue(q)?;
        }
        self.regs.set_flags32(TCTL, TCTL_EN);
        Ok(())
    }

    fn start_rx_queue(&mut self, q: u16) -> Result<()> {
        let queue = &mut self.rx_queues[q as usize];
        queue.arm_all()?;
        let q32 = q as u32;
        // §4.5.8: enable the queue, poll until RXDCTL.ENABLE reads back.
        self.regs.write32(rxdctl(q32), rx::rxdctl_enable());
        wait_bits(
            &*self.regs,
            NAME,
            rxdctl(q32),
            DCTL_ENABLE,
            DCTL_ENABLE,
            &format!("rx queue {q} enable (RXDCTL.ENABLE)"),
        )?;
        // Hand all descriptors but one to the NIC: RDH = 0, RDT = size - 1.
        // RDT is "one behind" on purpose: RDH == RDT means the ring is empty
        // for the NIC, so the driver always keeps one descriptor.
        self.regs.write32(rdh(q32), 0);
        // The armed descriptors must be visible before RDT (barrier.rs).
        self.regs.release_before_tail();
        self.regs.write32(rdt(q32), (queue.ring_size() - 1) as u32);
        Ok(())
    }

    fn start_tx_queue(&mut self, q: u16) -> Result<()> {
        let q32 = q as u32;
        // §4.5.9: enable the queue and poll until it reads back enabled.
        let txdctl_value = tx::txdctl_enable(&self.tx_queues[q as usize]);
        self.regs.write32(txdctl(q32), txdctl_value);
        wait_bits(
            &*self.regs,
            NAME,
            txdctl(q32),
            DCTL_ENABLE,
            DCTL_ENABLE,
            &format!("tx queue {q} enable (TXDCTL.ENABLE)"),
        )
    }

    fn wait_for_link(&self, timeout: Duration) {
        let start = Instant::now();
        while !self.link().up && start.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads the clear-on-read counters of §8.19 and adds them up.
    fn read_hardware_stats(&mut self) {
        let r = &*self.regs;
        let rx_packets = r.read32(GPRC) as u64;
        let tx_packets = r.read32(GPTC) as u64;
        // 64-bit octet counters: the low register first, then the high one
        // (reading the high one clears both).
        let rx_bytes = r.read32(GORCL) as u64 | ((r.read32(GORCH) as u64) << 32);
        let tx_bytes = r.read32(GOTCL) as u64 | ((r.read32(GOTCH) as u64) << 32);
        let missed = r.read32(MPC) as u64;
        let crc_errors = r.read32(CRCERRS) as u64;
        let _length_errors = r.read32(RLEC);
        self.stats.add(&DeviceStats {
            rx_packets,
            tx_packets,
            rx_bytes,
            tx_bytes,
            rx_missed: missed,
            rx_crc_errors: crc_errors,
            ..DeviceStats::default()
        });
    }
}

/// The text of a configuration error (without the "configuration:" prefix
/// its Display adds), to put the device's name in front.
fn config_message(e: Error) -> String {
    match e {
        Error::Config(message) => message,
        other => other.to_string(),
    }
}

/// Opens the igb device at PCI address `address` (through sysfs, as
/// `oxnet_driver::open` does) and returns the driver itself rather than a
/// `Box<dyn Device>`, for code that needs its queues (tests of head
/// write-back and of refused packets).
pub fn open_pci(address: &str, config: &Config) -> Result<IgbDevice<crate::regs::Mmio>> {
    let pci_address = crate::pci::PciAddress::parse(address)
        .ok_or_else(|| Error::Config(format!("{address} is not a PCI address (0000:03:00.0)")))?;
    let info = crate::pci::info(&pci_address)?;
    if !supports(info.vendor, info.device) {
        return Err(Error::Pci(format!(
            "{address} ({:04x}:{:04x}) is not an 82576/I350 copper port",
            info.vendor, info.device
        )));
    }
    let registers = crate::pci::map_bar0(&info)?;
    IgbDevice::init(
        registers,
        address,
        config,
        MemoryKind::HugePages,
        max_queues(info.device),
    )
}

impl<R: RegisterAccess> Device for IgbDevice<R> {
    fn driver_name(&self) -> &'static str {
        "igb"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    #[inline]
    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        match self.rx_queues.get_mut(queue as usize) {
            Some(q) => q.rx_batch(&*self.regs, batch, max),
            None => 0,
        }
    }

    #[inline]
    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        match self.tx_queues.get_mut(queue as usize) {
            Some(q) => q.tx_batch(&*self.regs, batch),
            None => 0,
        }
    }

    fn stats(&mut self) -> DeviceStats {
        self.read_hardware_stats();
        let mut stats = self.stats;
        crate::advanced::add_queue_counters(&mut stats, &self.rx_queues, &self.tx_queues);
        stats
    }

    fn link(&self) -> Link {
        // §8.2.2 STATUS: LU, and SPEED 00b = 10, 01b = 100, 1xb = 1000 Mb/s.
        let status = self.regs.read32(STATUS);
        let up = status & STATUS_LU != 0;
        let speed_mbps = match (status & STATUS_SPEED_MASK) >> 6 {
            _ if !up => 0,
            0b00 => 10,
            0b01 => 100,
            _ => 1000,
        };
        Link { up, speed_mbps }
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        // §8.10.1 RCTL: UPE/MPE accept all unicast/multicast frames.
        if on {
            self.regs.set_flags32(RCTL, RCTL_UPE | RCTL_MPE);
        } else {
            self.regs.clear_flags32(RCTL, RCTL_UPE | RCTL_MPE);
        }
        Ok(())
    }

    fn features(&self) -> Features {
        Features {
            crc_offload: true,
            hardware_stats: true,
            flow_control: false,
        }
    }

    /// Native split: see `queue_handles.rs` and the ixgbe driver's.
    fn split(mut self: Box<Self>) -> Result<crate::device::QueueHandles>
    where
        Self: 'static,
    {
        let rx_queues = std::mem::take(&mut self.rx_queues);
        let tx_queues = std::mem::take(&mut self.tx_queues);
        let regs = self.regs.clone();
        Ok(crate::queue_handles::split_device(
            *self,
            rx_queues,
            tx_queues,
            regs,
            teardown::stop_rx_queue::<R>,
            teardown::stop_tx_queue::<R>,
        ))
    }

    fn queue_stats(&mut self) -> Vec<crate::device::QueueStats> {
        // Software counters only: the 82576's per-queue counters (PQGPRC...)
        // belong to its virtualisation pools, which this driver leaves off.
        crate::advanced::software_queue_stats(&self.rx_queues, &self.tx_queues)
    }

    fn feature_registers(&self) -> Vec<(String, u32)> {
        features::registers(&*self.regs, self.rx_queues.len() as u16, self.tx_queues.len() as u16)
    }

    fn mempool(&self, queue: u16) -> Mempool {
        let q = (queue as usize).min(self.rx_queues.len() - 1);
        self.rx_queues[q].mempool().clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.rx_queues.len() as u16, self.tx_queues.len() as u16)
    }

    fn rx_interrupt_fd(&self, queue: u16) -> Option<std::os::unix::io::RawFd> {
        use std::os::unix::io::AsRawFd;
        self.rx_interrupts.get(queue as usize).map(|f| f.as_raw_fd())
    }

    fn set_rx_interrupt(&mut self, queue: u16, enabled: bool) -> Result<()> {
        if queue as usize >= self.rx_interrupts.len() {
            return Err(Error::Config(format!(
                "{}: no receive interrupt on queue {queue} (open the device with interrupts, bound to vfio-pci)",
                self.spec
            )));
        }
        // Vector = queue (enable_msix). EIMS arms it; it masks itself when
        // it fires (EIAM), EIMC disarms it explicitly.
        let bit = 1 << queue;
        self.regs.write32(if enabled { EIMS } else { EIMC }, bit);
        Ok(())
    }
}

impl<R: RegisterAccess> crate::queue_handles::SplitCore for IgbDevice<R> {}

impl<R: RegisterAccess> Drop for IgbDevice<R> {
    fn drop(&mut self) {
        // Stop DMA before the rings and buffers are freed (teardown.rs):
        // queues stopped and polled, reset, bus mastering off.
        let stopped = teardown::stop_device(&*self.regs, self.rx_queues.len() as u32, self.tx_queues.len() as u32);
        if !stopped {
            // As in the ixgbe driver: keep memory a late write-back could reach.
            eprintln!("oxnet: 82576 did not stop its queues; keeping their DMA memory allocated");
            std::mem::forget(std::mem::take(&mut self.rx_queues));
            std::mem::forget(std::mem::take(&mut self.tx_queues));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_queue_limits() {
        assert!(supports(0x8086, 0x10C9), "QEMU's igb");
        assert!(!supports(0x8086, 0x1521), "I350: refused, other IVAR layout");
        assert!(!supports(0x8086, 0x10FB), "an 82599 is ixgbe's");
        assert!(!supports(0x1AF4, 0x10C9), "wrong vendor");
        assert_eq!(max_queues(0x10C9), 16);
    }

    #[test]
    fn queue_registers_follow_the_datasheet_layout() {
        // 0x0C000 + 0x40 * n for receive, 0x0E000 + 0x40 * n for transmit.
        assert_eq!(rdbal(0), 0x0C000);
        assert_eq!(rdt(15), 0x0C018 + 15 * 0x40);
        assert_eq!(rxdctl(3), 0x0C0E8);
        assert_eq!(tdbal(0), 0x0E000);
        assert_eq!(txdctl(15), 0x0E3E8);
        assert_eq!(reta(31), 0x05C7C);
        assert_eq!(rssrk(9), 0x05CA4);
        assert_eq!(dctl_thresholds(8, 1, 16) | DCTL_ENABLE, 0x0210_0108);
    }
}
