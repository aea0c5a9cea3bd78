//! The software 82599: one port's registers and what accesses to them do.
//!
//! By default everything happens synchronously inside a register access:
//! writing TDT transmits, writing RDT drains the receive packet buffer.
//! With a DMA engine (`World::set_dma_mode`, engine.rs) register writes
//! only store, and the engine does the work later, in partial runs. [`read`] and
//! [`write`] return `Err(message)` for an access the model does not
//! implement; the caller (`world.rs`) records it as a fault.
//!
//! Simplifications (each a choice, documented where it is made):
//! * the link is up whenever neither end of the wire is in reset — AUTOC
//!   need not be written first (§8.2.3.22.19 describes auto-negotiation;
//!   the model's link partner is always there and always 10 Gb/s);
//! * no interrupts: EICR always reads 0;
//! * receive queues are chosen by RSS only (no pools, no flow director);
//! * RSC closes its open contexts at the end of each burst (see rx.rs).

pub(crate) mod engine;
pub(crate) mod ordering;
pub(crate) mod packet;
pub(crate) mod regs;
pub(crate) mod rsc;
pub(crate) mod rx;
pub(crate) mod stats;
pub(crate) mod tx;

use crate::world::WorldState;
use regs::*;
use stats::Stats;
use std::collections::VecDeque;

/// How many reads of CTRL still show the reset bits, of EEC still show
/// ARD = 0, of RDRXCTL still show DMAIDONE = 0 after a reset: a driver that
/// does not poll sees the wrong value.
const RESET_READS: u8 = 2;
/// RXDCTL/TXDCTL.ENABLE reads back as 1 from the 2nd read after enabling.
const ENABLE_READS: u8 = 1;

/// One receive queue's registers (§8.2.3.8).
#[derive(Debug, Clone, Default)]
pub(crate) struct RxQueue {
    pub rdbal: u32,
    pub rdbah: u32,
    pub rdlen: u32,
    pub dca_rxctrl: u32,
    pub rdh: u32,
    pub srrctl: u32,
    pub rdt: u32,
    pub rxdctl: u32,
    pub rscctl: u32,
    enable_reads_left: u8,
    /// ENABLE was cleared while write-backs were outstanding (threaded
    /// DMA): it reads 1 until the engine has finished them (§4.6.7.1.2).
    pub stopping: bool,
    /// Write-backs not done yet (threaded DMA): (slot, status dword). The
    /// data and the other fields are in memory already; DD comes later.
    pub pending: Vec<(usize, u32)>,
    pub handover: ordering::Handover,
}

impl RxQueue {
    /// The ring as RDBAL/RDBAH/RDLEN describe it.
    pub fn ring(&self) -> ordering::Ring {
        ordering::Ring {
            base: (u64::from(self.rdbah) << 32) | u64::from(self.rdbal),
            bytes: self.rdlen,
        }
    }
}

/// One transmit queue's registers (§8.2.3.9).
#[derive(Debug, Clone, Default)]
pub(crate) struct TxQueue {
    pub tdbal: u32,
    pub tdbah: u32,
    pub tdlen: u32,
    pub dca_txctrl: u32,
    pub tdh: u32,
    pub tdt: u32,
    pub txdctl: u32,
    pub tdwbal: u32,
    pub tdwbah: u32,
    /// The context last given by a context descriptor (§7.2.3.2.3):
    /// dwords 0, 2 and 3 (MACLEN/IPLEN, TUCMD, MSS/L4LEN).
    pub context: [u32; 3],
    enable_reads_left: u8,
    /// As [`RxQueue::stopping`] (§4.6.8.1.2).
    pub stopping: bool,
    /// Descriptors past TDH that the engine has fetched and sent but not
    /// yet written back (threaded DMA), and their packets' descriptor counts.
    pub fetched: usize,
    pub pending: VecDeque<usize>,
    pub handover: ordering::Handover,
}

impl TxQueue {
    /// The ring as TDBAL/TDBAH/TDLEN describe it.
    pub fn ring(&self) -> ordering::Ring {
        ordering::Ring {
            base: (u64::from(self.tdbah) << 32) | u64::from(self.tdbal),
            bytes: self.tdlen,
        }
    }
}

/// The state of one 82599 port.
pub(crate) struct Ixgbe {
    /// The address "loaded from the EEPROM" into RAL/RAH(0) at every reset.
    mac: [u8; 6],
    ctrl: u32,
    /// The reset bits (RST/LRST) that CTRL still shows, and for how many reads.
    reset_bits: u32,
    reset_reads_left: u8,
    eec: u32,
    eec_reads_left: u8,
    rdrxctl: u32,
    rdrxctl_reads_left: u8,
    eims: u32,
    pub rxctrl: u32,
    pub rxpbsize: [u32; 8],
    pub dmatxctl: u32,
    pub hlreg0: u32,
    pub maxfrs: u32,
    autoc: u32,
    pub mflcn: u32,
    pub fcrtl: [u32; 8],
    pub fcrth: [u32; 8],
    pub fccfg: u32,
    pub fctrl: u32,
    pub ral: [u32; RECEIVE_ADDRESSES],
    pub rah: [u32; RECEIVE_ADDRESSES],
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
    plain: Vec<u32>,
    pub stats: Stats,
    /// The receive packet buffer (§7.1.3.2): frames (with CRC) that arrived
    /// but are not yet in host memory, bounded by RXPBSIZE(0) bytes.
    pub rx_buffer: VecDeque<(Vec<u8>, u32)>,
    /// Open RSC contexts (rsc.rs).
    pub rsc: Vec<rsc::Context>,
    pub rx_buffer_bytes: usize,
    /// This receiver has sent XOFF and not yet XON (§8.2.3.3).
    pub xoff_sent: bool,
    /// Reused buffer where the transmit path gathers a packet.
    pub tx_frame: Vec<u8>,
    /// The driver's barriers, as far as the model sees them (ordering.rs).
    pub barriers: ordering::Barriers,
}

impl Ixgbe {
    /// Power-on state: every register at its datasheet initial value, and
    /// the EEPROM auto-read, DMA init and reset still "in progress" for a
    /// few reads.
    pub fn power_on(mac: [u8; 6]) -> Ixgbe {
        let mut ral = [0; RECEIVE_ADDRESSES];
        let mut rah = [0; RECEIVE_ADDRESSES];
        // §8.2.3.7.8/9: RAL/RAH(0) are loaded from the EEPROM, AV set.
        ral[0] = u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]);
        rah[0] = u32::from(u16::from_le_bytes([mac[4], mac[5]])) | RAH_AV;
        let mut rxpbsize = [0; 8];
        rxpbsize[0] = 512 << 10; // §8.2.3.8.9: 512 KB for buffer 0
        let queue = RxQueue {
            srrctl: 0x0000_0402,
            // §8.2.3.11.1 / §4.6.7: bit 12 is reserved, 1 at power-on, and
            // the driver must clear it (ixy notes the same). The
            // relaxed-ordering bits (9, 11, 13, 15) are not modelled.
            dca_rxctrl: 1 << 12,
            ..RxQueue::default()
        }; // §8.2.3.8.7: 2 KB buffers, 256 B headers, legacy
        Ixgbe {
            mac,
            ctrl: 0,
            reset_bits: 0,
            reset_reads_left: 0,
            eec: EEC_PRES,
            eec_reads_left: RESET_READS,
            rdrxctl: 0,
            rdrxctl_reads_left: RESET_READS,
            eims: 0,
            rxctrl: 0,
            rxpbsize,
            dmatxctl: 0,
            // §8.2.3.22.8: CRC append, CRC strip and padding on by default
            // (reserved bits modelled as 0).
            hlreg0: HLREG0_TXCRCEN | HLREG0_RXCRCSTRP | HLREG0_TXPADEN,
            maxfrs: 1518 << 16, // §8.2.3.22.13: MFS = 1518
            autoc: 0,
            mflcn: 0,
            fcrtl: [0; 8],
            fcrth: [0; 8],
            fccfg: 0,
            fctrl: 0,
            ral,
            rah,
            rx: vec![queue; QUEUES],
            tx: vec![TxQueue::default(); QUEUES],
            plain: PLAIN
                .iter()
                .flat_map(|g| std::iter::repeat_n(g.reset, g.count as usize))
                .collect(),
            stats: Stats::default(),
            rx_buffer: VecDeque::new(),
            rsc: Vec::new(),
            rx_buffer_bytes: 0,
            xoff_sent: false,
            tx_frame: Vec::with_capacity(16 * 1024),
            barriers: ordering::Barriers::default(),
        }
    }

    /// The port's own MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// True while a reset is in progress (until the driver has polled the
    /// reset bits away): the link is down.
    pub fn in_reset(&self) -> bool {
        self.reset_reads_left > 0
    }

    /// §4.6.3.2 Global reset: everything back to power-on.
    fn reset(&mut self, bits: u32) {
        let tx_frame = std::mem::take(&mut self.tx_frame);
        // The barrier counters are shared with the port's SimRegisters.
        let barriers = std::mem::take(&mut self.barriers);
        *self = Ixgbe::power_on(self.mac);
        self.tx_frame = tx_frame;
        self.barriers = barriers;
        self.reset_bits = bits;
        self.reset_reads_left = RESET_READS;
    }

    /// The value of a stored-only register (RXCSUM, MRQC, RETA, ...).
    /// RDRXCTL as the driver wrote it.
    pub fn rdrxctl(&self) -> u32 {
        self.rdrxctl
    }

    pub fn plain(&self, offset: u32) -> u32 {
        match decode(offset) {
            Some(Reg::Plain(slot)) => self.plain[slot],
            _ => panic!("{offset:#x} is not a stored-only register"),
        }
    }

    /// Bytes the receive packet buffer holds (RXPBSIZE(0), bits 19:10 in KB).
    pub fn rx_buffer_capacity(&self) -> usize {
        (self.rxpbsize[0] & 0x000F_FC00) as usize
    }
}

/// True if the link of `port` is up: neither it nor its partner is in reset.
pub(crate) fn link_up(state: &WorldState, port: usize) -> bool {
    let partner = state.wire_partner(port);
    !state.ports[port].nic.in_reset() && !state.ports[partner].nic.in_reset()
}

/// A register read, with its side effects (clear-on-read, polling counters).
pub(crate) fn read(state: &mut WorldState, port: usize, offset: u32) -> Result<u32, String> {
    let reg = decode(offset).ok_or("read of an unmodelled register")?;
    let link = link_up(state, port);
    let nic = &mut state.ports[port].nic;
    let value = match reg {
        // §8.2.3.1.1: RST/LRST self-clear once the reset is done.
        Reg::Ctrl => {
            let mut value = nic.ctrl;
            if nic.reset_reads_left > 0 {
                nic.reset_reads_left -= 1;
                value |= nic.reset_bits;
            }
            value
        }
        // §8.2.3.1.2: link up, and master enable unless CTRL disabled it.
        Reg::Status => {
            let master = if nic.ctrl & CTRL_PCIE_MASTER_DISABLE == 0 {
                STATUS_PCIE_MASTER_ENABLE
            } else {
                0
            };
            master | if link { STATUS_LINK_UP } else { 0 }
        }
        // §8.2.3.2.1: ARD goes to 1 when the EEPROM auto-read is done.
        Reg::Eec => nic.eec | countdown_bit(&mut nic.eec_reads_left, EEC_ARD),
        Reg::Eicr => 0,
        Reg::Eims => nic.eims,
        Reg::Eimc => return Err("read of EIMC, a write-only register (§8.2.3.5.4)".into()),
        // §8.2.3.8.8: DMAIDONE is set when the DMA init after reset is done.
        Reg::Rdrxctl => nic.rdrxctl | countdown_bit(&mut nic.rdrxctl_reads_left, RDRXCTL_DMAIDONE),
        Reg::Rxctrl => nic.rxctrl,
        Reg::Rxpbsize(n) => nic.rxpbsize[n],
        Reg::Dmatxctl => nic.dmatxctl,
        Reg::Hlreg0 => nic.hlreg0,
        Reg::Maxfrs => nic.maxfrs,
        Reg::Autoc => nic.autoc,
        // §8.2.3.22.20: up at 10 Gb/s, or down.
        Reg::Links => {
            if link {
                LINKS_UP | LINKS_SPEED_10G
            } else {
                0
            }
        }
        Reg::Mflcn => nic.mflcn,
        Reg::Fcrtl(n) => nic.fcrtl[n],
        Reg::Fcrth(n) => nic.fcrth[n],
        Reg::Fccfg => nic.fccfg,
        Reg::Fctrl => nic.fctrl,
        Reg::Ral(n) => nic.ral[n],
        Reg::Rah(n) => nic.rah[n],
        Reg::Rx(q, reg) => read_rx(&mut nic.rx[q], reg),
        Reg::Tx(q, reg) => read_tx(&mut nic.tx[q], reg),
        Reg::Stat(stat) => nic.stats.read(stat),
        Reg::Plain(slot) => nic.plain[slot],
    };
    Ok(value)
}

/// `bit` once `reads_left` reads have gone by, 0 before.
fn countdown_bit(reads_left: &mut u8, bit: u32) -> u32 {
    if *reads_left > 0 {
        *reads_left -= 1;
        0
    } else {
        bit
    }
}

/// ENABLE as a queue shows it: 0 on the first read after enabling.
fn enable_bit(ctl: u32, reads_left: &mut u8) -> u32 {
    if ctl & QUEUE_ENABLE != 0 && *reads_left > 0 {
        *reads_left -= 1;
        ctl & !QUEUE_ENABLE
    } else {
        ctl
    }
}

/// ENABLE still reads 1 while a queue being disabled has work in flight.
fn stopping_bit(stopping: bool) -> u32 {
    if stopping {
        QUEUE_ENABLE
    } else {
        0
    }
}

fn read_rx(queue: &mut RxQueue, reg: RxReg) -> u32 {
    match reg {
        RxReg::Rdbal => queue.rdbal,
        RxReg::Rdbah => queue.rdbah,
        RxReg::Rdlen => queue.rdlen,
        RxReg::DcaRxctrl => queue.dca_rxctrl,
        RxReg::Rdh => queue.rdh,
        RxReg::Srrctl => queue.srrctl,
        RxReg::Rdt => queue.rdt,
        RxReg::Rxdctl => enable_bit(queue.rxdctl, &mut queue.enable_reads_left) | stopping_bit(queue.stopping),
        RxReg::Rscctl => queue.rscctl,
    }
}

fn read_tx(queue: &mut TxQueue, reg: TxReg) -> u32 {
    match reg {
        TxReg::Tdbal => queue.tdbal,
        TxReg::Tdbah => queue.tdbah,
        TxReg::Tdlen => queue.tdlen,
        TxReg::DcaTxctrl => queue.dca_txctrl,
        TxReg::Tdh => queue.tdh,
        TxReg::Tdt => queue.tdt,
        TxReg::Txdctl => enable_bit(queue.txdctl, &mut queue.enable_reads_left) | stopping_bit(queue.stopping),
        TxReg::Tdwbal => queue.tdwbal,
        TxReg::Tdwbah => queue.tdwbah,
    }
}

/// A register write and what it sets off (reset, transmit, receive drain).
pub(crate) fn write(state: &mut WorldState, port: usize, offset: u32, value: u32) -> Result<(), String> {
    let reg = decode(offset).ok_or("write of an unmodelled register")?;
    let nic = &mut state.ports[port].nic;
    match reg {
        Reg::Ctrl => {
            let reset = value & (CTRL_RST | CTRL_LRST);
            if reset != 0 {
                nic.reset(reset);
            } else {
                nic.ctrl = value;
            }
        }
        Reg::Status | Reg::Links => return Err("write of a read-only register".into()),
        Reg::Stat(_) => return Err("write of a read-only statistics register".into()),
        // §8.2.3.2.1: PRES and ARD are status bits; the rest is stored.
        Reg::Eec => nic.eec = (value & !(EEC_PRES | EEC_ARD)) | EEC_PRES,
        Reg::Eicr => {} // write 1 to clear; no interrupt cause is ever set
        Reg::Eims => nic.eims |= value,
        Reg::Eimc => nic.eims &= !value,
        Reg::Rdrxctl => nic.rdrxctl = value & !RDRXCTL_DMAIDONE,
        Reg::Rxctrl => {
            nic.rxctrl = value;
            rx::drain(state, port);
        }
        Reg::Rxpbsize(n) => nic.rxpbsize[n] = value,
        Reg::Dmatxctl => {
            nic.dmatxctl = value;
            tx::kick(state, port);
        }
        Reg::Hlreg0 => nic.hlreg0 = value,
        Reg::Maxfrs => nic.maxfrs = value,
        // §8.2.3.22.19: AN_RESTART self-clears (at once: no negotiation).
        Reg::Autoc => nic.autoc = value & !AUTOC_AN_RESTART,
        Reg::Mflcn => {
            nic.mflcn = value;
            tx::kick(state, port);
        }
        Reg::Fcrtl(n) => nic.fcrtl[n] = value,
        Reg::Fcrth(n) => nic.fcrth[n] = value,
        Reg::Fccfg => nic.fccfg = value,
        Reg::Fctrl => nic.fctrl = value,
        Reg::Ral(n) => nic.ral[n] = value,
        Reg::Rah(n) => nic.rah[n] = value,
        Reg::Rx(q, reg) => return write_rx(state, port, q, reg, value),
        Reg::Tx(q, reg) => return write_tx(state, port, q, reg, value),
        Reg::Plain(slot) => nic.plain[slot] = value,
    }
    Ok(())
}

fn write_rx(state: &mut WorldState, port: usize, q: usize, reg: RxReg, value: u32) -> Result<(), String> {
    let nic = &mut state.ports[port].nic;
    let queue = &mut nic.rx[q];
    let mut result = Ok(());
    match reg {
        RxReg::Rdbal => queue.rdbal = value,
        RxReg::Rdbah => queue.rdbah = value,
        RxReg::Rdlen => queue.rdlen = value,
        RxReg::DcaRxctrl => queue.dca_rxctrl = value,
        RxReg::Rdh => queue.rdh = value,
        RxReg::Srrctl => queue.srrctl = value,
        RxReg::Rdt => {
            let ring = queue.ring();
            result = ordering::check_handover(&nic.barriers, &mut queue.handover, ring, queue.rdt, value, "RDT");
            queue.rdt = value;
            // §7.1.9: new descriptors; frames waiting in the packet buffer
            // move to host memory now.
            rx::drain(state, port);
        }
        RxReg::Rscctl => queue.rscctl = value,
        RxReg::Rxdctl => {
            if value & QUEUE_ENABLE != 0 && queue.rxdctl & QUEUE_ENABLE == 0 {
                queue.enable_reads_left = ENABLE_READS;
            }
            // §4.6.7.1.2: a queue being disabled finishes what it has in
            // flight first; ENABLE reads 0 once it has.
            queue.stopping = value & QUEUE_ENABLE == 0 && !queue.pending.is_empty();
            queue.rxdctl = value;
            rx::drain(state, port);
        }
    }
    result
}

fn write_tx(state: &mut WorldState, port: usize, q: usize, reg: TxReg, value: u32) -> Result<(), String> {
    let nic = &mut state.ports[port].nic;
    let queue = &mut nic.tx[q];
    let mut result = Ok(());
    match reg {
        TxReg::Tdbal => queue.tdbal = value,
        TxReg::Tdbah => queue.tdbah = value,
        TxReg::Tdlen => queue.tdlen = value,
        TxReg::DcaTxctrl => queue.dca_txctrl = value,
        TxReg::Tdh => queue.tdh = value,
        TxReg::Tdwbal => queue.tdwbal = value,
        TxReg::Tdwbah => queue.tdwbah = value,
        TxReg::Tdt => {
            let ring = queue.ring();
            result = ordering::check_handover(&nic.barriers, &mut queue.handover, ring, queue.tdt, value, "TDT");
            queue.tdt = value;
            tx::transmit(state, port, q);
        }
        TxReg::Txdctl => {
            if value & QUEUE_ENABLE != 0 && queue.txdctl & QUEUE_ENABLE == 0 {
                queue.enable_reads_left = ENABLE_READS;
            }
            // §4.6.8.1.2: as for receive queues.
            queue.stopping = value & QUEUE_ENABLE == 0 && !queue.pending.is_empty();
            queue.txdctl = value;
            tx::transmit(state, port, q);
        }
    }
    result
}
