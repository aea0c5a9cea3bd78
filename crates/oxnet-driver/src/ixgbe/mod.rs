//! Driver for the Intel 82599 (X520) 10 GbE controller. (X540 and X550 are
//! refused: docs/devices.md.)
//!
//! Read it beside the 82599 datasheet (rev. 3.3): [`IxgbeDevice::init`]
//! follows §4.6.3 step by step, receive follows §4.6.7 and §7.1, transmit
//! §4.6.8 and §7.2. The structure is ixy's (ixgbe.c), in Rust:
//!
//! * one descriptor ring per queue in DMA memory, advanced descriptors
//!   and the receive and transmit queues built on them
//!   ([`crate::advanced`], shared with the igb driver; [`Nic82599`] says
//!   what is particular to the 82599);
//! * receive: check DD in the descriptor in memory (never read RDH — an MMIO
//!   read costs a PCIe round trip), hand the buffer to the application,
//!   re-arm the descriptor with a fresh buffer, write RDT once per batch;
//! * transmit: clean finished descriptors in batches of [`TX_CLEAN_BATCH`],
//!   fill descriptors, write TDT once per batch.
//!
//! The driver is generic over [`RegisterAccess`]: on hardware that is
//! volatile loads and stores into BAR0, inlined; under test it is the
//! software 82599 of `oxnet-sim`.

pub mod features;
mod handles;
pub mod regs;
mod rx;
pub mod teardown;
pub(crate) use rx::drop_when_full;
mod tx;

use crate::device::{Config, Device, DeviceStats, Features, Link, QueueHandles};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::PacketBatch;
use crate::regs::RegisterAccess;
use crate::wait::wait_bits;
use regs::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::advanced::TX_CLEAN_BATCH;

/// The 82599's side of the advanced-descriptor queues
/// ([`crate::advanced::Nic`]).
pub struct Nic82599;

impl crate::advanced::Nic for Nic82599 {
    #[inline]
    fn rdt(queue: u32) -> u32 {
        regs::rdt(queue)
    }
    #[inline]
    fn tdt(queue: u32) -> u32 {
        regs::tdt(queue)
    }
    const RX_ERROR_IPE: u32 = crate::advanced::RX_ERROR_IPE;
    const RX_ERROR_L4E: u32 = crate::advanced::RX_ERROR_TCPE;
    const RSC: bool = true;
    const COUNT_FAST_RX: bool = true;
    const TSO_LIMITS: crate::offload::TsoLimits = crate::offload::TSO_LIMITS_82599;
}

/// A receive queue of the 82599 (set up in rx.rs).
pub type RxQueue = crate::advanced::RxQueue<Nic82599>;
/// A transmit queue of the 82599 (set up in tx.rs).
pub type TxQueue = crate::advanced::TxQueue<Nic82599>;

/// PCI vendor id of Intel.
pub const INTEL_VENDOR_ID: u16 = 0x8086;

/// Device ids this driver accepts (Linux ixgbe_type.h lists the same ids).
pub const DEVICE_IDS: &[(u16, &str)] = &[
    (0x10F7, "82599 KX4"),
    (0x10F8, "82599 combo backplane"),
    (0x10F9, "82599 CX4"),
    (0x10FB, "82599 SFP+ (X520)"),
    (0x10FC, "82599 XAUI LOM"),
    (0x1507, "82599 SFP+ EM"),
    (0x1514, "82599 KX4 mezzanine"),
    (0x1517, "82599 KR"),
    (0x151C, "82599 T3 LOM"),
    (0x1529, "82599 SFP+ FCoE"),
    (0x152A, "82599 backplane FCoE"),
    (0x154A, "82599 SFP+ quad port"),
    (0x154D, "82599 SFP+ SF2"),
    (0x154F, "82599 LS"),
    (0x1557, "82599EN SFP+"),
    (0x1558, "82599 QSFP+ quad port"),
];
// X540/X550 ids are refused (crate::pci::REFUSED_IDS): their link set-up
// differs from the 82599's and nothing here tests it (docs/devices.md).

/// True if this driver handles the device with these PCI ids.
pub fn supports(vendor: u16, device: u16) -> bool {
    vendor == INTEL_VENDOR_ID && DEVICE_IDS.iter().any(|(id, _)| *id == device)
}

/// An initialised 82599 with its queues.
pub struct IxgbeDevice<R: RegisterAccess> {
    /// Shared with the queue handles after [`Device::split`].
    regs: Arc<R>,
    spec: String,
    rx_queues: Vec<RxQueue>,
    tx_queues: Vec<TxQueue>,
    /// Hardware counters are clear-on-read; we add them up here.
    stats: DeviceStats,
    /// Per-queue hardware counters (QPRC, QBRC, QPTC, QBTC), accumulated.
    queue_hw: Vec<(u64, u64, u64, u64)>,
    mac: [u8; 6],
}

impl<R: RegisterAccess> IxgbeDevice<R> {
    /// Resets and initialises the device per datasheet §4.6.3, sets up
    /// `config.rx_queues` / `config.tx_queues` queues and starts them.
    ///
    /// `default_memory` is used unless `config.memory` says otherwise: huge
    /// pages for a real NIC, plain memory for the model.
    pub fn init(regs: R, spec: &str, config: &Config, default_memory: MemoryKind) -> Result<IxgbeDevice<R>> {
        config.validate()?;
        features::validate(config)?;
        if config.rx_queues > 64 || config.tx_queues > 64 {
            return Err(Error::Config(
                "the 82599 driver supports at most 64 queues per direction".into(),
            ));
        }
        let memory = crate::domain::device_memory(config.memory.unwrap_or(default_memory), spec)?;
        let mut dev = IxgbeDevice {
            regs: Arc::new(regs),
            spec: spec.to_string(),
            rx_queues: Vec::new(),
            tx_queues: Vec::new(),
            stats: DeviceStats::default(),
            queue_hw: vec![(0, 0, 0, 0); config.rx_queues.max(config.tx_queues).min(STAT_QUEUES as u16) as usize],
            mac: [0; 6],
        };
        dev.reset()?;
        dev.mac = dev.read_mac();
        dev.init_link();
        // §4.6.5: the statistics registers are clear-on-read; read them once
        // so that counting starts at zero.
        dev.read_hardware_stats();
        dev.init_rx(config, memory)?;
        dev.init_tx(config, memory)?;
        for q in 0..config.rx_queues {
            dev.start_rx_queue(q)?;
        }
        for q in 0..config.tx_queues {
            dev.start_tx_queue(q)?;
        }
        if config.flow_control {
            dev.enable_flow_control();
        }
        dev.set_promisc(config.promiscuous)?;
        dev.wait_for_link(config.link_timeout);
        Ok(dev)
    }

    /// Transmit queue `q` (tests look at its head write-back and errors).
    pub fn tx_queue(&self, q: u16) -> Option<&TxQueue> {
        self.tx_queues.get(q as usize)
    }

    /// Reads the register at byte `offset` (tests look inside the device
    /// with it). Reading cannot make the NIC DMA anywhere; it does clear
    /// the clear-on-read statistics counters (§8.2.3.23), which
    /// [`Device::stats`] then misses. On real hardware an offset outside
    /// the BAR panics (see [`crate::regs::Mmio`]).
    pub fn read_register(&self, offset: u32) -> u32 {
        self.regs.read32(offset)
    }

    /// The raw register interface.
    ///
    /// # Safety
    /// Whoever writes through it can point the NIC's DMA (RDBAL/TDBAL,
    /// head write-back) at any memory, or stop queues under the driver:
    /// the caller must not write registers that change where or whether
    /// the device reads and writes memory. Use [`Self::read_register`] to
    /// look.
    pub unsafe fn registers(&self) -> &R {
        &self.regs
    }

    /// §4.6.3.1 disable interrupts, §4.6.3.2 global reset, then wait for the
    /// EEPROM auto-read and the DMA initialisation to complete.
    fn reset(&mut self) -> Result<()> {
        // §4.6.3.1: "interrupts should be disabled ... by writing EIMC".
        self.regs.write32(EIMC, EIMC_ALL);
        // §4.6.3.2: global reset = software reset + link reset.
        self.regs.write32(CTRL, CTRL_RST_MASK);
        self.wait_clear(CTRL, CTRL_RST_MASK, "global reset (CTRL.RST)")?;
        // §8.2.3.1.1: "at least 1 ms" before the next access after RST;
        // ixy waits 10 ms.
        std::thread::sleep(Duration::from_millis(10));
        // §4.6.3.1 again: a reset re-enables nothing, but the datasheet asks
        // to disable interrupts after it too.
        self.regs.write32(EIMC, EIMC_ALL);
        // §4.6.3: "wait for EEPROM auto read completion".
        self.wait_set(EEC, EEC_ARD, "EEPROM auto-read (EEC.ARD)")?;
        // §4.6.3: "wait for DMA initialization done (RDRXCTL.DMAIDONE)".
        self.wait_set(RDRXCTL, RDRXCTL_DMAIDONE, "DMA initialisation (RDRXCTL.DMAIDONE)")?;
        Ok(())
    }

    /// §4.6.4 link set-up: 10 GbE serial link mode, XAUI PMA/PMD, restart
    /// auto-negotiation. (X540/X550 copper parts negotiate through their
    /// PHY, which this driver does not program: they are refused.)
    fn init_link(&mut self) {
        let autoc = self.regs.read32(AUTOC);
        let autoc = (autoc & !AUTOC_LMS_MASK) | AUTOC_LMS_10G_SERIAL;
        let autoc = (autoc & !AUTOC_10G_PMA_PMD_MASK) | AUTOC_10G_XAUI;
        self.regs.write32(AUTOC, autoc);
        self.regs.write32(AUTOC, autoc | AUTOC_AN_RESTART);
    }

    /// MAC address from receive address register 0, which the NIC loads
    /// from its EEPROM (§8.2.3.7.8/9: RAL holds bytes 0–3, RAH bytes 4–5).
    fn read_mac(&self) -> [u8; 6] {
        let low = self.regs.read32(RAL0);
        let high = self.regs.read32(RAH0);
        let l = low.to_le_bytes();
        let h = high.to_le_bytes();
        [l[0], l[1], l[2], l[3], h[0], h[1]]
    }

    /// §4.6.7 receive initialisation (the per-queue part is in rx.rs).
    fn init_rx(&mut self, config: &Config, memory: MemoryKind) -> Result<()> {
        // Receive stays off while we set it up.
        self.regs.clear_flags32(RXCTRL, RXCTRL_RXEN);
        // §4.6.11.3.1 (no DCB, no virtualisation): all 512 KB of receive
        // packet buffer in buffer 0.
        self.regs.write32(rxpbsize(0), RXPBSIZE_512KB);
        for i in 1..8 {
            self.regs.write32(rxpbsize(i), 0);
        }
        // CRC stripping: HLREG0.RXCRCSTRP and RDRXCTL.CRCSTRIP must agree
        // (§8.2.3.8.8). The application never sees the 4 CRC bytes.
        self.regs.set_flags32(HLREG0, HLREG0_RXCRCSTRP);
        self.regs.set_flags32(RDRXCTL, RDRXCTL_CRCSTRIP);
        // Accept broadcast frames (§8.2.3.7.1).
        self.regs.set_flags32(FCTRL, FCTRL_BAM);
        for q in 0..config.rx_queues {
            let queue = rx::new_rx_queue(&*self.regs, q, config, memory, &self.spec)?;
            self.rx_queues.push(queue);
        }
        // Offload switches: RSS, checksum, statistics mapping (features.rs).
        features::init_rx(&*self.regs, config);
        // §4.6.7: "set CTRL_EXT.NS_DIS" (no snoop disable).
        self.regs.set_flags32(CTRL_EXT, CTRL_EXT_NS_DIS);
        self.regs.set_flags32(RXCTRL, RXCTRL_RXEN);
        Ok(())
    }

    /// §4.6.8 transmit initialisation (the per-queue part is in tx.rs).
    fn init_tx(&mut self, config: &Config, memory: MemoryKind) -> Result<()> {
        // CRC offload and padding of short frames (§8.2.3.22.8).
        self.regs.set_flags32(HLREG0, HLREG0_TXCRCEN | HLREG0_TXPADEN);
        // §4.6.11.3.1: one 160 KB transmit packet buffer without DCB.
        self.regs.write32(txpbsize(0), TXPBSIZE_160KB);
        for i in 1..8 {
            self.regs.write32(txpbsize(i), 0);
        }
        // §4.6.11.3.1: DTXMXSZRQ = 0xFFF (max TCP request size) without DCB;
        // the arbiter is disabled while the transmit queues are configured
        // (§8.2.3.10.2, RTTDCS.ARBDIS) and enabled again afterwards.
        self.regs.write32(DTXMXSZRQ, 0xFFF);
        self.regs.set_flags32(RTTDCS, RTTDCS_ARBDIS);
        for q in 0..config.tx_queues {
            let queue = tx::new_tx_queue(&*self.regs, q, config, memory)?;
            self.tx_queues.push(queue);
        }
        self.regs.clear_flags32(RTTDCS, RTTDCS_ARBDIS);
        features::init_tso(&*self.regs, config);
        features::init_dca(&*self.regs, config);
        // §8.2.3.9.2: global transmit enable.
        self.regs.set_flags32(DMATXCTL, DMATXCTL_TE);
        Ok(())
    }

    fn start_rx_queue(&mut self, q: u16) -> Result<()> {
        let queue = &mut self.rx_queues[q as usize];
        queue.arm_all()?;
        let q32 = q as u32;
        // §4.6.7.1: enable the queue, wait until RXDCTL.ENABLE reads back.
        self.regs.set_flags32(rxdctl(q32), DCTL_ENABLE);
        wait_bits(
            &*self.regs,
            "82599",
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
        self.regs.write32(tdh(q32), 0);
        self.regs.write32(tdt(q32), 0);
        // §4.6.8.1: enable the queue and poll until it reads back enabled.
        self.regs.set_flags32(txdctl(q32), DCTL_ENABLE);
        wait_bits(
            &*self.regs,
            "82599",
            txdctl(q32),
            DCTL_ENABLE,
            DCTL_ENABLE,
            &format!("tx queue {q} enable (TXDCTL.ENABLE)"),
        )
    }

    /// IEEE 802.3x link flow control (§4.6.10, §8.2.3.3): send XOFF when
    /// packet buffer 0 fills past the high-water mark, XON below the low
    /// mark, and pause our own transmitter on received XOFF (MFLCN.RFCE).
    fn enable_flow_control(&mut self) {
        // Water marks in bytes (bits 18:5, 32-byte granularity). The high
        // mark leaves room for the frames still arriving while the PAUSE
        // frame travels: 32 KB below the 512 KB buffer, as the Linux driver
        // leaves several maximum-size frames plus the link delay.
        let high = (RXPBSIZE_512KB >> 10) * 1024 - 32 * 1024;
        let low = high - 32 * 1024;
        self.regs.write32(fcttv(0), 0x0680_0680); // pause time, in 512-bit-time quanta
        self.regs.write32(fcrtl(0), FCRTL_XONE | (low & 0x7FFE0));
        self.regs.write32(fcrth(0), FCRTH_FCEN | (high & 0x7FFE0));
        self.regs.write32(FCRTV, 0x0680 / 2);
        self.regs.write32(FCCFG, FCCFG_TFCE_802_3X);
        self.regs.set_flags32(MFLCN, MFLCN_RFCE);
    }

    fn wait_for_link(&self, timeout: Duration) {
        let start = Instant::now();
        while !self.link().up && start.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_set(&self, offset: u32, mask: u32, what: &str) -> Result<()> {
        wait_bits(&*self.regs, "82599", offset, mask, mask, what)
    }

    fn wait_clear(&self, offset: u32, mask: u32, what: &str) -> Result<()> {
        wait_bits(&*self.regs, "82599", offset, mask, 0, what)
    }

    /// Reads the clear-on-read counters of §8.2.3.23 and adds them up.
    fn read_hardware_stats(&mut self) {
        let r = &*self.regs;
        let rx_packets = r.read32(GPRC) as u64;
        let tx_packets = r.read32(GPTC) as u64;
        // 36-bit octet counters: the low register first, then the high one.
        let rx_bytes = r.read32(GORCL) as u64 | ((r.read32(GORCH) as u64 & 0xF) << 32);
        let tx_bytes = r.read32(GOTCL) as u64 | ((r.read32(GOTCH) as u64 & 0xF) << 32);
        let mut missed = 0;
        for n in 0..8 {
            missed += r.read32(mpc(n)) as u64;
        }
        let crc_errors = r.read32(CRCERRS) as u64;
        let length_errors = r.read32(RLEC) as u64;
        let undersize = r.read32(RUC) as u64;
        let oversize = r.read32(ROC) as u64;
        for (n, q) in self.queue_hw.iter_mut().enumerate() {
            let n = n as u32;
            q.0 += r.read32(qprc(n)) as u64;
            q.1 += r.read32(qbrc_l(n)) as u64 | ((r.read32(qbrc_h(n)) as u64 & 0xF) << 32);
            q.2 += r.read32(qptc(n)) as u64;
            q.3 += r.read32(qbtc_l(n)) as u64 | ((r.read32(qbtc_h(n)) as u64 & 0xF) << 32);
        }
        self.stats.add(&DeviceStats {
            rx_packets,
            tx_packets,
            rx_bytes,
            tx_bytes,
            rx_missed: missed,
            rx_crc_errors: crc_errors,
            rx_length_errors: length_errors,
            rx_undersize: undersize,
            rx_oversize: oversize,
            ..DeviceStats::default()
        });
    }
}

impl<R: RegisterAccess> Device for IxgbeDevice<R> {
    fn driver_name(&self) -> &'static str {
        "ixgbe"
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
        // §8.2.3.22.20: LINK_SPEED 01b = 100 Mb/s, 10b = 1 GbE, 11b = 10 GbE.
        let links = self.regs.read32(LINKS);
        let up = links & LINKS_UP != 0;
        let speed_mbps = match (links & LINKS_SPEED_MASK) >> 28 {
            _ if !up => 0,
            0b01 => 100,
            0b10 => 1000,
            0b11 => 10_000,
            _ => 0,
        };
        Link { up, speed_mbps }
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        // §8.2.3.7.1: UPE/MPE accept all unicast/multicast frames.
        if on {
            self.regs.set_flags32(FCTRL, FCTRL_UPE | FCTRL_MPE);
        } else {
            self.regs.clear_flags32(FCTRL, FCTRL_UPE | FCTRL_MPE);
        }
        Ok(())
    }

    fn queue_stats(&mut self) -> Vec<crate::device::QueueStats> {
        self.read_hardware_stats();
        let mut stats = crate::advanced::software_queue_stats(&self.rx_queues, &self.tx_queues);
        for (s, &(rp, rb, tp, tb)) in stats.iter_mut().zip(&self.queue_hw) {
            (s.hw_rx_packets, s.hw_rx_bytes, s.hw_tx_packets, s.hw_tx_bytes) = (rp, rb, tp, tb);
        }
        stats
    }

    fn feature_registers(&self) -> Vec<(String, u32)> {
        features::registers(&*self.regs, self.rx_queues.len() as u16, self.tx_queues.len() as u16)
    }

    fn features(&self) -> Features {
        Features {
            crc_offload: true,
            hardware_stats: true,
            flow_control: true,
        }
    }

    fn mempool(&self, queue: u16) -> Mempool {
        let q = (queue as usize).min(self.rx_queues.len() - 1);
        self.rx_queues[q].mempool().clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.rx_queues.len() as u16, self.tx_queues.len() as u16)
    }

    /// Native split (queue_handles.rs): each queue handle owns its queue
    /// and shares the registers; the control handle owns what is left of
    /// the device (behind a mutex only it takes), whose `Drop` (the
    /// device-wide teardown) runs when the last handle is gone.
    fn split(self: Box<Self>) -> Result<QueueHandles>
    where
        Self: 'static,
    {
        Ok(handles::split(*self))
    }
}

impl<R: RegisterAccess> Drop for IxgbeDevice<R> {
    fn drop(&mut self) {
        // Stop DMA before the rings and buffers are freed (teardown.rs):
        // queues stopped and polled, reset, bus mastering off.
        let stopped = teardown::stop_device(&*self.regs, self.rx_queues.len() as u32, self.tx_queues.len() as u32);
        if !stopped {
            // The device did not acknowledge: it might still write into
            // the rings and buffers. Keep them (leaked) rather than hand
            // memory back that a late write-back could land in.
            eprintln!("oxnet: 82599 did not stop its queues; keeping their DMA memory allocated");
            std::mem::forget(std::mem::take(&mut self.rx_queues));
            std::mem::forget(std::mem::take(&mut self.tx_queues));
        }
    }
}
