//! 82599 register offsets and bits the tests expect, written here as
//! literals from the datasheet (Intel 82599 10 GbE Controller Datasheet rev
//! 3.3, sections cited), never imported from the driver under test
//! (issue 8 item 10). A wrong constant in the driver then fails a test
//! instead of being compared with itself.
#![allow(dead_code)] // each test file uses a different subset

/// CTRL, Device Control (§8.2.3.1.1).
pub const CTRL: u32 = 0x0_0000;
/// CTRL.LRST (bit 3) | CTRL.RST (bit 26): the global reset (§4.6.3.2).
pub const CTRL_RST_MASK: u32 = 0x0400_0008;
/// EEC, EEPROM/Flash Control (§8.2.3.2.1).
pub const EEC: u32 = 0x1_0010;
/// EEC.ARD, EEPROM auto-read done (bit 9).
pub const EEC_ARD: u32 = 1 << 9;
/// EIMC, Extended Interrupt Mask Clear (§8.2.3.5.4).
pub const EIMC: u32 = 0x0_0888;
/// Every interrupt cause bit (30:0) of EIMC.
pub const EIMC_ALL: u32 = 0x7FFF_FFFF;
/// AUTOC, Auto-Negotiation Control (§8.2.3.22.19).
pub const AUTOC: u32 = 0x0_42A0;
/// AUTOC.LMS, link mode select (bits 15:13).
pub const AUTOC_LMS_MASK: u32 = 0b111 << 13;
/// AUTOC.LMS = 011b: 10 GbE serial link without auto-negotiation.
pub const AUTOC_LMS_10G_SERIAL: u32 = 0b011 << 13;
/// HLREG0, MAC Core Control 0 (§8.2.3.22.8).
pub const HLREG0: u32 = 0x0_4240;
/// HLREG0.RXCRCSTRP, strip the CRC (bit 1).
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
/// RAL(0) / RAH(0), Receive Address Low / High (§8.2.3.7.8, §8.2.3.7.9).
pub const RAL0: u32 = 0x0_A200;
pub const RAH0: u32 = 0x0_A204;
/// RDRXCTL, Receive DMA Control (§8.2.3.8.8).
pub const RDRXCTL: u32 = 0x0_2F00;
/// RDRXCTL.CRCSTRIP (bit 1).
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
/// RDRXCTL.DMAIDONE, DMA init done (bit 3).
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// RXCTRL, Receive Control (§8.2.3.8.10).
pub const RXCTRL: u32 = 0x0_3000;
/// RXCTRL.RXEN (bit 0).
pub const RXCTRL_RXEN: u32 = 1 << 0;
/// DMATXCTL, DMA Tx Control (§8.2.3.9.2).
pub const DMATXCTL: u32 = 0x0_4A80;
/// DMATXCTL.TE, transmit enable (bit 0).
pub const DMATXCTL_TE: u32 = 1 << 0;
/// GPRC, Good Packets Received Count (§8.2.3.23.18).
pub const GPRC: u32 = 0x0_4074;
/// RXDCTL.ENABLE / TXDCTL.ENABLE (bit 25; §8.2.3.8.6, §8.2.3.9.10).
pub const DCTL_ENABLE: u32 = 1 << 25;
/// SRRCTL.DESCTYPE (bits 27:25; §8.2.3.8.7).
pub const SRRCTL_DESCTYPE_MASK: u32 = 0b111 << 25;
/// SRRCTL.DESCTYPE = 001b: advanced descriptor, one buffer.
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0b001 << 25;

// Per-queue receive registers, queues 0..63: 0x01000 + 0x40·n (§8.2.3.8.1–7).
pub const fn rdbal(q: u32) -> u32 {
    0x0_1000 + 0x40 * q
}
pub const fn rdlen(q: u32) -> u32 {
    0x0_1008 + 0x40 * q
}
pub const fn dca_rxctrl(q: u32) -> u32 {
    0x0_100C + 0x40 * q
}
pub const fn srrctl(q: u32) -> u32 {
    0x0_1014 + 0x40 * q
}
pub const fn rdt(q: u32) -> u32 {
    0x0_1018 + 0x40 * q
}
pub const fn rxdctl(q: u32) -> u32 {
    0x0_1028 + 0x40 * q
}
// Per-queue transmit registers: 0x06000 + 0x40·n (§8.2.3.9.5–10).
pub const fn tdlen(q: u32) -> u32 {
    0x0_6008 + 0x40 * q
}
pub const fn dca_txctrl(q: u32) -> u32 {
    0x0_600C + 0x40 * q
}
pub const fn txdctl(q: u32) -> u32 {
    0x0_6028 + 0x40 * q
}

/// DCA_CTRL, DCA Control (§8.2.3.11.4).
pub const DCA_CTRL: u32 = 0x1_1074;
/// DCA_CTRL.DCA_DIS (bit 0).
pub const DCA_CTRL_DISABLE: u32 = 1 << 0;
/// DCA_CTRL.DCA_MODE (bits 4:1) = 0001b, DCA 1.0.
pub const DCA_CTRL_MODE_10: u32 = 0b0001 << 1;
/// DCA_RXCTRL / DCA_TXCTRL (§8.2.3.11.1, §8.2.3.11.2): descriptor DCA (bit 5).
pub const DCA_DESC_EN: u32 = 1 << 5;
/// DCA_RXCTRL: header DCA (bit 6).
pub const DCA_RXCTRL_HEAD_EN: u32 = 1 << 6;
/// DCA_RXCTRL: payload DCA (bit 7).
pub const DCA_RXCTRL_DATA_EN: u32 = 1 << 7;
/// DCA_RXCTRL bit 12: reserved, must be written 0 (§4.6.7).
pub const DCA_RXCTRL_RESERVED_12: u32 = 1 << 12;
/// DCA_RXCTRL / DCA_TXCTRL: CPU ID in bits 31:24 (DCA 1.0).
pub const DCA_CPUID_SHIFT: u32 = 24;
