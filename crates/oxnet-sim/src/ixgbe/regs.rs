//! 82599 register offsets and bits, as the model names them (datasheet
//! rev. 3.3, chapter 8.2.3 "Device Registers — PF"). Written from the
//! datasheet, independently of the driver's own `regs.rs`, so that a wrong
//! offset on one side shows up as a fault instead of cancelling out.
//!
//! [`decode`] turns an offset into a [`Reg`]; an offset it does not know is
//! an unmodelled register, which the model reports as a fault.

// §8.2.3.1 General control registers.
pub const CTRL: u32 = 0x00000;
pub const STATUS: u32 = 0x00008;
pub const CTRL_EXT: u32 = 0x00018;
pub const EEC: u32 = 0x10010;

/// CTRL bits (§8.2.3.1.1): PCIe master disable, link reset, device reset.
pub const CTRL_PCIE_MASTER_DISABLE: u32 = 1 << 2;
pub const CTRL_LRST: u32 = 1 << 3;
pub const CTRL_RST: u32 = 1 << 26;
/// STATUS bits (§8.2.3.1.2): link up, PCIe master enable status.
pub const STATUS_LINK_UP: u32 = 1 << 7;
pub const STATUS_PCIE_MASTER_ENABLE: u32 = 1 << 19;
/// EEC bits (§8.2.3.2.1): EEPROM present, auto-read done.
pub const EEC_PRES: u32 = 1 << 8;
pub const EEC_ARD: u32 = 1 << 9;

// §8.2.3.5 Interrupt registers.
pub const EICR: u32 = 0x00800;
pub const EIAC: u32 = 0x00810;
pub const EITR_BASE: u32 = 0x00820; // EITR(n), n < 24
pub const EIMS: u32 = 0x00880;
pub const EIMC: u32 = 0x00888;
pub const EIAM: u32 = 0x00890;
pub const GPIE: u32 = 0x00898;
pub const IVAR_BASE: u32 = 0x00900; // IVAR(n), n < 64

// §8.2.3.8 Receive DMA registers, queue n at +0x40·n (queues 0..63).
pub const RDBAL_BASE: u32 = 0x01000;
pub const RDRXCTL: u32 = 0x02F00;
pub const RXPBSIZE_BASE: u32 = 0x03C00;
pub const RXCTRL: u32 = 0x03000;
/// RDRXCTL bits (§8.2.3.8.8).
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// RXCTRL.RXEN (§8.2.3.8.10).
pub const RXCTRL_RXEN: u32 = 1 << 0;
/// RXDCTL.ENABLE / TXDCTL.ENABLE (§8.2.3.8.6, §8.2.3.9.10).
pub const QUEUE_ENABLE: u32 = 1 << 25;
/// SRRCTL fields (§8.2.3.8.7).
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
pub const SRRCTL_DESCTYPE_SHIFT: u32 = 25;
pub const SRRCTL_DESCTYPE_MASK: u32 = 0b111 << SRRCTL_DESCTYPE_SHIFT;
pub const SRRCTL_DESCTYPE_ADV_ONE_BUFFER: u32 = 0b001 << SRRCTL_DESCTYPE_SHIFT;

// §8.2.3.9 Transmit DMA registers, queue n at +0x40·n.
pub const TDBAL_BASE: u32 = 0x06000;
pub const DMATXCTL: u32 = 0x04A80;
pub const DMATXCTL_TE: u32 = 1 << 0;
pub const DTXMXSZRQ: u32 = 0x08100;
pub const MTQC: u32 = 0x08120;
pub const TXPBSIZE_BASE: u32 = 0x0CC00;
pub const RTTDCS: u32 = 0x04900;

// §8.2.3.22 MAC registers.
pub const HLREG0: u32 = 0x04240;
pub const MAXFRS: u32 = 0x04268;
pub const AUTOC: u32 = 0x042A0;
pub const LINKS: u32 = 0x042A4;
pub const MFLCN: u32 = 0x04294;
/// HLREG0 bits (§8.2.3.22.8).
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
pub const HLREG0_JUMBOEN: u32 = 1 << 2;
pub const HLREG0_TXPADEN: u32 = 1 << 10;
pub const HLREG0_LPBK: u32 = 1 << 15;
/// AUTOC.AN_RESTART (§8.2.3.22.19), self-clearing.
pub const AUTOC_AN_RESTART: u32 = 1 << 12;
/// LINKS bits (§8.2.3.22.20).
pub const LINKS_UP: u32 = 1 << 30;
pub const LINKS_SPEED_10G: u32 = 0b11 << 28;
/// MFLCN.RFCE: honour received PAUSE frames (§8.2.3.22.34).
pub const MFLCN_RFCE: u32 = 1 << 3;

// §8.2.3.3 Flow control registers.
pub const FCTTV_BASE: u32 = 0x03200; // n < 4
pub const FCRTL_BASE: u32 = 0x03220; // n < 8
pub const FCRTH_BASE: u32 = 0x03260; // n < 8
pub const FCRTV: u32 = 0x032A0;
pub const FCCFG: u32 = 0x03D00;
/// FCRTL.XONE / FCRTH.FCEN, and the threshold field (bits 18:5, in bytes).
pub const FCRTL_XONE: u32 = 1 << 31;
pub const FCRTH_FCEN: u32 = 1 << 31;
pub const FC_THRESHOLD_MASK: u32 = 0x0007_FFE0;
/// FCCFG.TFCE (bits 4:3): 01b = link flow control.
pub const FCCFG_TFCE_MASK: u32 = 0b11 << 3;
pub const FCCFG_TFCE_LINK: u32 = 0b01 << 3;

// §8.2.3.7 Receive filter registers.
pub const RXCSUM: u32 = 0x05000;
pub const FCTRL: u32 = 0x05080;
pub const VLNCTRL: u32 = 0x05088;
pub const MTA_BASE: u32 = 0x05200; // n < 128
pub const MRQC: u32 = 0x05818;
pub const RAL_BASE: u32 = 0x0A200; // RAL(n) at +8·n, RAH(n) at +8·n + 4, n < 128
pub const RETA_BASE: u32 = 0x0EB00; // n < 32
pub const RSSRK_BASE: u32 = 0x0EB80; // n < 10
pub const RFCTL: u32 = 0x05008;
pub const PSRTYPE_BASE: u32 = 0x0EA00; // n < 64
/// RXCSUM.PCSD (§8.2.3.7.5): dword 1 of the write-back holds the RSS hash.
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// MRQC (§8.2.3.7.12): MRQE in bits 3:0 (0001b RSS), field enables.
pub const MRQC_MRQE_MASK: u32 = 0xF;
pub const MRQC_MRQE_RSS: u32 = 0b0001;
pub const MRQC_TCPIPV4: u32 = 1 << 16;
pub const MRQC_IPV4: u32 = 1 << 17;
pub const MRQC_UDPIPV4: u32 = 1 << 22;
/// RFCTL.RSC_DIS (§8.2.3.7.6).
pub const RFCTL_RSC_DIS: u32 = 1 << 5;
/// RSCCTL (§8.2.3.8.13): RSCEN, MAXDESC (bits 3:2).
pub const RSCCTL_RSCEN: u32 = 1 << 0;
/// RDRXCTL bits RSC needs (§8.2.3.8.8).
pub const RDRXCTL_RSCACKC: u32 = 1 << 25;
pub const RDRXCTL_FCOE_WRFIX: u32 = 1 << 26;
pub const RDRXCTL_RSCFRSTSIZE: u32 = 0x1F << 17;

// Per-queue statistics mapping (§8.2.3.8/§8.2.3.9, subsection not verified)
// and counters (§8.2.3.23.71-76).
pub const RQSMR_BASE: u32 = 0x02300; // n < 32
pub const TQSM_BASE: u32 = 0x08600; // n < 32
pub const QBTC_BASE: u32 = 0x08700; // QBTC_L(n) at +8n, QBTC_H(n) at +8n + 4

// §8.2.3.11 DCA, §8.2.3.9.3/4 TSO flags.
pub const DCA_ID: u32 = 0x11070;
pub const DCA_CTRL: u32 = 0x11074;
pub const DTXTCPFLGL: u32 = 0x04A88;
pub const DTXTCPFLGH: u32 = 0x04A8C;
/// TDWBAL.Head_WB_En (§8.2.3.9.11).
pub const TDWBAL_HEAD_WB_EN: u32 = 1 << 0;
/// FCTRL bits (§8.2.3.7.1).
pub const FCTRL_MPE: u32 = 1 << 8;
pub const FCTRL_UPE: u32 = 1 << 9;
pub const FCTRL_BAM: u32 = 1 << 10;
/// RAH.AV: the address is valid (§8.2.3.7.9).
pub const RAH_AV: u32 = 1 << 31;

/// Number of queues of each direction.
pub const QUEUES: usize = 64;
/// Receive address registers RAL/RAH.
pub const RECEIVE_ADDRESSES: usize = 128;

/// A per-queue receive register (offset from RDBAL(n)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxReg {
    Rdbal,
    Rdbah,
    Rdlen,
    DcaRxctrl,
    Rdh,
    Srrctl,
    Rdt,
    Rxdctl,
    Rscctl,
}

/// A per-queue transmit register (offset from TDBAL(n)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxReg {
    Tdbal,
    Tdbah,
    Tdlen,
    DcaTxctrl,
    Tdh,
    Tdt,
    Txdctl,
    Tdwbal,
    Tdwbah,
}

/// Statistics registers (§8.2.3.23), all clear-on-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    Crcerrs,
    Rlec,
    Lxontxc,
    Lxonrxcnt,
    Lxofftxc,
    Lxoffrxcnt,
    Gprc,
    Gptc,
    Gorcl,
    Gorch,
    Gotcl,
    Gotch,
    Ruc,
    Roc,
    Mpc(usize),
    /// Per-queue counter sets n < 16 (§8.2.3.23.71–76).
    Qprc(usize),
    QbrcL(usize),
    QbrcH(usize),
    Qptc(usize),
    QbtcL(usize),
    QbtcH(usize),
}

/// A decoded register: what the model does on an access to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    Ctrl,
    Status,
    Eec,
    Eicr,
    Eims,
    Eimc,
    Rdrxctl,
    Rxctrl,
    Rxpbsize(usize),
    Dmatxctl,
    Hlreg0,
    Maxfrs,
    Autoc,
    Links,
    Mflcn,
    Fcrtl(usize),
    Fcrth(usize),
    Fccfg,
    Fctrl,
    Ral(usize),
    Rah(usize),
    Rx(usize, RxReg),
    Tx(usize, TxReg),
    Stat(Stat),
    /// A register the model only stores: index into [`PLAIN`] storage.
    Plain(usize),
}

/// A group of registers that the model stores and returns unchanged, but
/// whose values do not change its behaviour (yet).
pub struct PlainGroup {
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    pub base: u32,
    pub count: u32,
    pub stride: u32,
    /// Power-on value.
    pub reset: u32,
}

const fn plain(name: &'static str, base: u32, count: u32, stride: u32, reset: u32) -> PlainGroup {
    PlainGroup {
        name,
        base,
        count,
        stride,
        reset,
    }
}

/// Every stored-only register, listed explicitly (an offset not here and
/// not decoded below is a fault).
pub const PLAIN: &[PlainGroup] = &[
    plain("CTRL_EXT", CTRL_EXT, 1, 0, 0),               // §8.2.3.1.3
    plain("EIAC", EIAC, 1, 0, 0),                       // §8.2.3.5.7
    plain("EITR", EITR_BASE, 24, 4, 0),                 // §8.2.3.5.12
    plain("EIAM", EIAM, 1, 0, 0),                       // §8.2.3.5.6
    plain("GPIE", GPIE, 1, 0, 0),                       // §8.2.3.5.11
    plain("IVAR", IVAR_BASE, 64, 4, 0),                 // §8.2.3.5.16
    plain("FCTTV", FCTTV_BASE, 4, 4, 0),                // §8.2.3.3.2
    plain("FCRTV", FCRTV, 1, 0, 0),                     // §8.2.3.3.5
    plain("RXCSUM", RXCSUM, 1, 0, 0),                   // §8.2.3.7.5
    plain("VLNCTRL", VLNCTRL, 1, 0, 0),                 // §8.2.3.7.2
    plain("MTA", MTA_BASE, 128, 4, 0),                  // §8.2.3.7.7
    plain("MRQC", MRQC, 1, 0, 0),                       // §8.2.3.7.12 (82598-compatible address)
    plain("RETA", RETA_BASE, 32, 4, 0),                 // §8.2.3.7.15
    plain("RSSRK", RSSRK_BASE, 10, 4, 0),               // §8.2.3.7.16
    plain("RFCTL", RFCTL, 1, 0, 0),                     // §8.2.3.7.6
    plain("PSRTYPE", PSRTYPE_BASE, 64, 4, 0),           // §8.2.3.7.4
    plain("RQSMR", RQSMR_BASE, 32, 4, 0),               // queue -> statistics set
    plain("TQSM", TQSM_BASE, 32, 4, 0),                 // queue -> statistics set
    plain("DCA_ID", DCA_ID, 1, 0, 0),                   // §8.2.3.11.3
    plain("DCA_CTRL", DCA_CTRL, 1, 0, 1),               // §8.2.3.11.4: DCA_DIS at reset
    plain("DTXTCPFLGL", DTXTCPFLGL, 1, 0, 0x0FF6_0FF6), // §8.2.3.9.3
    plain("DTXTCPFLGH", DTXTCPFLGH, 1, 0, 0x0000_0FFF), // §8.2.3.9.4
    plain("RTTDCS", RTTDCS, 1, 0, 0),                   // §8.2.3.10.2
    plain("DTXMXSZRQ", DTXMXSZRQ, 1, 0, 0x10),          // §8.2.3.9.1
    plain("MTQC", MTQC, 1, 0, 0),                       // §8.2.3.9.16
    plain("TXPBSIZE0", TXPBSIZE_BASE, 1, 0, 0xA_0000),  // §8.2.3.9.13: 160 KB
    plain("TXPBSIZE", TXPBSIZE_BASE + 4, 7, 4, 0),
];

/// Total number of stored-only registers.
#[cfg(test)]
pub fn plain_count() -> usize {
    PLAIN.iter().map(|g| g.count as usize).sum()
}

/// Offset of a register in a group `base + stride·n`, n < count.
fn indexed(offset: u32, base: u32, count: u32, stride: u32) -> Option<usize> {
    if offset < base || !(offset - base).is_multiple_of(stride) {
        return None;
    }
    let n = (offset - base) / stride;
    (n < count).then_some(n as usize)
}

/// What the register at `offset` is, or `None` if the model does not know it.
pub fn decode(offset: u32) -> Option<Reg> {
    let single = match offset {
        CTRL => Some(Reg::Ctrl),
        STATUS => Some(Reg::Status),
        EEC => Some(Reg::Eec),
        EICR => Some(Reg::Eicr),
        EIMS => Some(Reg::Eims),
        EIMC => Some(Reg::Eimc),
        RDRXCTL => Some(Reg::Rdrxctl),
        RXCTRL => Some(Reg::Rxctrl),
        DMATXCTL => Some(Reg::Dmatxctl),
        HLREG0 => Some(Reg::Hlreg0),
        MAXFRS => Some(Reg::Maxfrs),
        AUTOC => Some(Reg::Autoc),
        LINKS => Some(Reg::Links),
        MFLCN => Some(Reg::Mflcn),
        FCCFG => Some(Reg::Fccfg),
        FCTRL => Some(Reg::Fctrl),
        0x04000 => Some(Reg::Stat(Stat::Crcerrs)),
        0x04040 => Some(Reg::Stat(Stat::Rlec)),
        0x03F60 => Some(Reg::Stat(Stat::Lxontxc)),
        0x041A4 => Some(Reg::Stat(Stat::Lxonrxcnt)),
        0x03F68 => Some(Reg::Stat(Stat::Lxofftxc)),
        0x041A8 => Some(Reg::Stat(Stat::Lxoffrxcnt)),
        0x04074 => Some(Reg::Stat(Stat::Gprc)),
        0x04080 => Some(Reg::Stat(Stat::Gptc)),
        0x04088 => Some(Reg::Stat(Stat::Gorcl)),
        0x0408C => Some(Reg::Stat(Stat::Gorch)),
        0x04090 => Some(Reg::Stat(Stat::Gotcl)),
        0x04094 => Some(Reg::Stat(Stat::Gotch)),
        0x040A4 => Some(Reg::Stat(Stat::Ruc)),
        0x040AC => Some(Reg::Stat(Stat::Roc)), // §8.2.3.23.18 (0x040A8 is RFC)
        _ => None,
    };
    if single.is_some() {
        return single;
    }
    if let Some(n) = indexed(offset, 0x03FA0, 8, 4) {
        return Some(Reg::Stat(Stat::Mpc(n)));
    }
    if let Some(n) = indexed(offset, QBTC_BASE, 16, 8) {
        return Some(Reg::Stat(Stat::QbtcL(n)));
    }
    if let Some(n) = indexed(offset, QBTC_BASE + 4, 16, 8) {
        return Some(Reg::Stat(Stat::QbtcH(n)));
    }
    if let Some(n) = indexed(offset, RXPBSIZE_BASE, 8, 4) {
        return Some(Reg::Rxpbsize(n));
    }
    if let Some(n) = indexed(offset, FCRTL_BASE, 8, 4) {
        return Some(Reg::Fcrtl(n));
    }
    if let Some(n) = indexed(offset, FCRTH_BASE, 8, 4) {
        return Some(Reg::Fcrth(n));
    }
    if let Some(n) = indexed(offset, RAL_BASE, RECEIVE_ADDRESSES as u32, 8) {
        return Some(Reg::Ral(n));
    }
    if let Some(n) = indexed(offset, RAL_BASE + 4, RECEIVE_ADDRESSES as u32, 8) {
        return Some(Reg::Rah(n));
    }
    if (RDBAL_BASE..RDBAL_BASE + 0x40 * QUEUES as u32).contains(&offset) {
        let queue = ((offset - RDBAL_BASE) / 0x40) as usize;
        let reg = match (offset - RDBAL_BASE) % 0x40 {
            0x00 => RxReg::Rdbal,
            0x04 => RxReg::Rdbah,
            0x08 => RxReg::Rdlen,
            0x0C => RxReg::DcaRxctrl,
            0x10 => RxReg::Rdh,
            0x14 => RxReg::Srrctl,
            0x18 => RxReg::Rdt,
            0x28 => RxReg::Rxdctl,
            0x2C => RxReg::Rscctl, // §8.2.3.8.13
            0x30 if queue < 16 => return Some(Reg::Stat(Stat::Qprc(queue))),
            0x34 if queue < 16 => return Some(Reg::Stat(Stat::QbrcL(queue))),
            0x38 if queue < 16 => return Some(Reg::Stat(Stat::QbrcH(queue))),
            _ => return None,
        };
        return Some(Reg::Rx(queue, reg));
    }
    if (TDBAL_BASE..TDBAL_BASE + 0x40 * QUEUES as u32).contains(&offset) {
        let queue = ((offset - TDBAL_BASE) / 0x40) as usize;
        let reg = match (offset - TDBAL_BASE) % 0x40 {
            0x00 => TxReg::Tdbal,
            0x04 => TxReg::Tdbah,
            0x08 => TxReg::Tdlen,
            0x0C => TxReg::DcaTxctrl,
            0x10 => TxReg::Tdh,
            0x18 => TxReg::Tdt,
            0x28 => TxReg::Txdctl,
            0x30 if queue < 16 => return Some(Reg::Stat(Stat::Qptc(queue))),
            0x38 => TxReg::Tdwbal,
            0x3C => TxReg::Tdwbah,
            _ => return None,
        };
        return Some(Reg::Tx(queue, reg));
    }
    let mut slot = 0;
    for group in PLAIN {
        let stride = group.stride.max(4);
        if let Some(n) = indexed(offset, group.base, group.count, stride) {
            return Some(Reg::Plain(slot + n));
        }
        slot += group.count as usize;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_queue_registers_and_rejects_gaps() {
        assert_eq!(decode(0x01018 + 0x40 * 3), Some(Reg::Rx(3, RxReg::Rdt)));
        assert_eq!(decode(0x06028 + 0x40 * 63), Some(Reg::Tx(63, TxReg::Txdctl)));
        assert_eq!(decode(0x0101C), None, "a hole between RDT and RXDCTL");
        assert_eq!(decode(0x0A204 + 8 * 127), Some(Reg::Rah(127)));
        assert_eq!(decode(0x03FA0 + 4 * 7), Some(Reg::Stat(Stat::Mpc(7))));
        assert_eq!(decode(0x03FA0 + 4 * 8), None);
    }

    #[test]
    fn plain_groups_do_not_overlap_decoded_registers() {
        for group in PLAIN {
            for n in 0..group.count {
                let offset = group.base + n * group.stride.max(4);
                assert!(
                    matches!(decode(offset), Some(Reg::Plain(_))),
                    "{} {offset:#x}",
                    group.name
                );
            }
        }
        assert_eq!(decode(TXPBSIZE_BASE + 4 * 7), Some(Reg::Plain(plain_count() - 1)));
    }
}
