//! 82576 register offsets and bits, named as in the datasheet (82576 GbE
//! Controller datasheet, chapter 8 "Programming Interface"). Only what the
//! driver uses.

// §8.2 General registers.
/// Device Control Register (§8.2.1).
pub const CTRL: u32 = 0x00000;
/// CTRL.FD: full duplex (a forced setting; ignored while the PHY's
/// auto-negotiation result is used).
pub const CTRL_FD: u32 = 1 << 0;
/// CTRL.GIO_MASTER_DISABLE: stop issuing master (DMA) requests.
pub const CTRL_GIO_MASTER_DISABLE: u32 = 1 << 2;
/// CTRL.LRST: link reset.
pub const CTRL_LRST: u32 = 1 << 3;
/// CTRL.SLU: set link up — the MAC follows the link the PHY reports.
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL.FRCSPD: force the speed in CTRL.SPEED instead of the PHY's.
pub const CTRL_FRCSPD: u32 = 1 << 11;
/// CTRL.FRCDPLX: force the duplex in CTRL.FD instead of the PHY's.
pub const CTRL_FRCDPX: u32 = 1 << 12;
/// CTRL.RST: device (software) reset, self-clearing.
pub const CTRL_RST: u32 = 1 << 26;
/// Device Status Register (§8.2.2).
pub const STATUS: u32 = 0x00008;
/// STATUS.LU: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// STATUS.SPEED, bits 7:6: 00b 10 Mb/s, 01b 100 Mb/s, 1xb 1000 Mb/s.
pub const STATUS_SPEED_MASK: u32 = 0x3 << 6;
/// STATUS.GIO_MASTER_ENABLE: master requests may still be pending.
pub const STATUS_GIO_MASTER_ENABLE: u32 = 1 << 19;
/// EEPROM/Flash Control Register (EECD).
pub const EECD: u32 = 0x00010;
/// EECD.AUTO_RD: the EEPROM auto-read after reset is done.
pub const EECD_AUTO_RD: u32 = 1 << 9;
/// Extended Device Control Register (CTRL_EXT).
pub const CTRL_EXT: u32 = 0x00018;
/// CTRL_EXT.DRV_LOAD: tells the manageability firmware a driver runs.
pub const CTRL_EXT_DRV_LOAD: u32 = 1 << 28;
/// MDI Control Register: access to the PHY's registers.
pub const MDIC: u32 = 0x00020;
/// MDIC.REGADD, bits 20:16.
pub const MDIC_REG_SHIFT: u32 = 16;
/// MDIC.PHYADD, bits 25:21: the internal PHY is at address 1.
pub const MDIC_PHY_ADDRESS: u32 = 1 << 21;
/// MDIC.OP = 01b: write.
pub const MDIC_OP_WRITE: u32 = 1 << 26;
/// MDIC.OP = 10b: read.
pub const MDIC_OP_READ: u32 = 2 << 26;
/// MDIC.R: ready (the access completed).
pub const MDIC_READY: u32 = 1 << 28;
/// MDIC.E: error (no PHY answered, or the register does not exist).
pub const MDIC_ERROR: u32 = 1 << 30;

// PHY registers (IEEE 802.3 clause 22, reached through MDIC; §8.23 of the
// 82576 datasheet lists the internal PHY's).
/// PHY Control Register (register 0).
pub const PHY_CONTROL: u32 = 0;
/// PHY Control: restart auto-negotiation (self-clearing).
pub const PHY_CONTROL_RESTART_AN: u16 = 1 << 9;
/// PHY Control: auto-negotiation enable.
pub const PHY_CONTROL_AN_ENABLE: u16 = 1 << 12;

// §8.8 Interrupt registers.
/// Interrupt Cause Read (read to clear).
pub const ICR: u32 = 0x000C0;
/// Interrupt Mask Clear: writing 1s masks the legacy causes.
pub const IMC: u32 = 0x000D8;
/// Extended Interrupt Mask Clear: writing 1s masks the extended causes.
pub const EIMC: u32 = 0x01528;
/// Every cause bit of IMC / EIMC.
pub const INTERRUPTS_ALL: u32 = 0xFFFF_FFFF;
/// Extended Interrupt Mask Set (§8.8.x): writing 1s enables MSI-X vectors.
pub const EIMS: u32 = 0x01524;
/// Extended Interrupt Auto Clear: vectors whose EICR bit clears itself
/// when the interrupt is sent.
pub const EIAC: u32 = 0x0152C;
/// Extended Interrupt Auto Mask: vectors masked again when they fire
/// (with GPIE.EIAME), so an interrupt arrives once per arming.
pub const EIAM: u32 = 0x01530;
/// General Purpose Interrupt Enable (§8.8.x).
pub const GPIE: u32 = 0x01514;
/// GPIE.NSICR: non-selective interrupt clear on read.
pub const GPIE_NSICR: u32 = 1 << 0;
/// GPIE.Multiple_MSIX: one MSI-X vector per cause (MSI-X mode).
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE.EIAME: apply EIAM when an MSI-X interrupt is sent.
pub const GPIE_EIAME: u32 = 1 << 30;
/// GPIE.PBA_support: MSI-X pending bits in the PBA.
pub const GPIE_PBA: u32 = 1 << 31;
/// Interrupt Vector Allocation n (§8.8.x): on the 82576 a table of 8 rows
/// × 2 columns; row = queue & 7; bytes 0/2 map RX queues 0–7/8–15 and
/// bytes 1/3 TX queues, each byte = vector | IVAR_VALID.
pub const fn ivar(n: u32) -> u32 {
    0x01700 + 4 * n
}
/// IVAR entry valid.
pub const IVAR_VALID: u32 = 0x80;
/// Extended Interrupt Throttle n (§8.8.x): interval in bits 14:2.
pub const fn eitr(n: u32) -> u32 {
    0x01680 + 4 * n
}
/// EITR interval field.
pub const EITR_INTERVAL_MASK: u32 = 0x7FFC;
/// EITR.CNT_INGR: do not reset the interval counter on writes (82576).
pub const EITR_CNT_IGNR: u32 = 1 << 31;

// §8.10 Receive registers.
/// Receive Control Register (§8.10.1).
pub const RCTL: u32 = 0x00100;
/// RCTL.EN: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL.UPE: unicast promiscuous.
pub const RCTL_UPE: u32 = 1 << 3;
/// RCTL.MPE: multicast promiscuous.
pub const RCTL_MPE: u32 = 1 << 4;
/// RCTL.LPE: long packets (jumbo frames) enable.
pub const RCTL_LPE: u32 = 1 << 5;
/// RCTL.BAM: accept broadcast.
pub const RCTL_BAM: u32 = 1 << 15;
/// RCTL.BSIZE, bits 17:16 (legacy buffer size; SRRCTL overrides it).
pub const RCTL_BSIZE_MASK: u32 = 0x3 << 16;
/// RCTL.SECRC: strip the Ethernet CRC from received frames.
pub const RCTL_SECRC: u32 = 1 << 26;
/// Receive Checksum Control (RXCSUM).
pub const RXCSUM: u32 = 0x05000;
/// RXCSUM.PCSD: packet checksum disable — the RSS hash is written back in
/// the descriptor instead of the fragment checksum / IP identification.
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// RXCSUM.IPOFLD: check the IPv4 header checksum (IPCS/IPE in the
/// write-back).
pub const RXCSUM_IPOFLD: u32 = 1 << 8;
/// RXCSUM.TUOFLD: check the TCP/UDP checksum (L4CS/UDPCS/L4E).
pub const RXCSUM_TUOFLD: u32 = 1 << 9;
/// Multicast Table Array, 128 registers.
pub const MTA: u32 = 0x05200;
/// Number of MTA registers.
pub const MTA_ENTRIES: u32 = 128;
/// Receive Address Low/High of entry 0: the MAC address (RAL holds
/// bytes 0–3, RAH bytes 4–5 and the Address Valid bit).
pub const RAL0: u32 = 0x05400;
/// See [`RAL0`].
pub const RAH0: u32 = 0x05404;
/// RAH.AV: address valid.
pub const RAH_AV: u32 = 1 << 31;

// Receive-side scaling (§7.1.2 "receive queues", RSS; registers in §8.10).
/// Multiple Receive Queues Command.
pub const MRQC: u32 = 0x05818;
/// MRQC.Multiple_Receive_Queues_Enable = 010b: RSS only (no VMDq).
pub const MRQC_RSS: u32 = 0b010;
/// MRQC field enables: hash TCP/IPv4 ports.
pub const MRQC_RSS_FIELD_IPV4_TCP: u32 = 1 << 16;
/// Hash IPv4 addresses.
pub const MRQC_RSS_FIELD_IPV4: u32 = 1 << 17;
/// Hash IPv6 addresses.
pub const MRQC_RSS_FIELD_IPV6: u32 = 1 << 20;
/// Hash TCP/IPv6 ports.
pub const MRQC_RSS_FIELD_IPV6_TCP: u32 = 1 << 21;
/// Hash UDP/IPv4 ports.
pub const MRQC_RSS_FIELD_IPV4_UDP: u32 = 1 << 22;
/// Hash UDP/IPv6 ports.
pub const MRQC_RSS_FIELD_IPV6_UDP: u32 = 1 << 23;
/// Redirection Table: 128 one-byte entries in 32 registers; the low bits
/// of an entry are the queue.
pub const fn reta(n: u32) -> u32 {
    0x05C00 + 4 * n
}
/// Number of RETA registers.
pub const RETA_REGISTERS: u32 = 32;
/// RSS Random Key, 10 registers (40 bytes).
pub const fn rssrk(n: u32) -> u32 {
    0x05C80 + 4 * n
}

// Per-queue receive registers, queues 0..15 (§8.10). Queues 0–3 also
// have the 82575-compatible aliases at 0x02800 + 0x100 * n; we use the
// main addresses for all queues.
/// Receive Descriptor Base Address Low.
pub const fn rdbal(q: u32) -> u32 {
    0x0C000 + 0x40 * q
}
/// Receive Descriptor Base Address High.
pub const fn rdbah(q: u32) -> u32 {
    0x0C004 + 0x40 * q
}
/// Receive Descriptor Length (bytes, multiple of 128).
pub const fn rdlen(q: u32) -> u32 {
    0x0C008 + 0x40 * q
}
/// Split and Replication Receive Control.
pub const fn srrctl(q: u32) -> u32 {
    0x0C00C + 0x40 * q
}
/// Receive Descriptor Head.
pub const fn rdh(q: u32) -> u32 {
    0x0C010 + 0x40 * q
}
/// Receive Descriptor Tail.
pub const fn rdt(q: u32) -> u32 {
    0x0C018 + 0x40 * q
}
/// Receive Descriptor Control.
pub const fn rxdctl(q: u32) -> u32 {
    0x0C028 + 0x40 * q
}
/// SRRCTL.BSIZEPACKET, bits 6:0, in 1 KB units.
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x7F;
/// SRRCTL.DESCTYPE = 001b: advanced descriptors, one buffer (bits 27:25).
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0b001 << 25;
/// SRRCTL.DESCTYPE mask.
pub const SRRCTL_DESCTYPE_MASK: u32 = 0b111 << 25;
/// SRRCTL.Drop_En: drop frames for this queue when it has no free
/// descriptor (set with several queues and no flow control: rx.rs).
pub const SRRCTL_DROP_EN: u32 = 1 << 31;
/// RXDCTL.ENABLE / TXDCTL.ENABLE.
pub const DCTL_ENABLE: u32 = 1 << 25;
/// Prefetch (bits 4:0), host (12:8) and write-back (20:16) thresholds of
/// RXDCTL / TXDCTL.
pub const fn dctl_thresholds(prefetch: u32, host: u32, write_back: u32) -> u32 {
    (prefetch & 0x1F) | ((host & 0x1F) << 8) | ((write_back & 0x1F) << 16)
}

// §8.12 Transmit registers.
/// Transmit Control Register (§8.12.1).
pub const TCTL: u32 = 0x00400;
/// TCTL.EN: transmitter enable.
pub const TCTL_EN: u32 = 1 << 1;
/// TCTL.PSP: pad short packets to 64 bytes (with CRC).
pub const TCTL_PSP: u32 = 1 << 3;
/// TCTL.CT, bits 11:4: collision threshold (15, the datasheet's value;
/// only meaningful at half duplex).
pub const TCTL_CT_15: u32 = 0x0F << 4;
/// TCTL.COLD, bits 21:12: collision distance (63 byte times, full duplex).
pub const TCTL_COLD_63: u32 = 0x3F << 12;
/// TCTL.CT and TCTL.COLD fields.
pub const TCTL_CT_COLD_MASK: u32 = (0xFF << 4) | (0x3FF << 12);
/// TCTL.RTLC: re-transmit on late collision.
pub const TCTL_RTLC: u32 = 1 << 24;

/// Transmit Descriptor Base Address Low.
pub const fn tdbal(q: u32) -> u32 {
    0x0E000 + 0x40 * q
}
/// Transmit Descriptor Base Address High.
pub const fn tdbah(q: u32) -> u32 {
    0x0E004 + 0x40 * q
}
/// Transmit Descriptor Length.
pub const fn tdlen(q: u32) -> u32 {
    0x0E008 + 0x40 * q
}
/// Transmit Descriptor Head.
pub const fn tdh(q: u32) -> u32 {
    0x0E010 + 0x40 * q
}
/// Transmit Descriptor Tail.
pub const fn tdt(q: u32) -> u32 {
    0x0E018 + 0x40 * q
}
/// Transmit Descriptor Control.
pub const fn txdctl(q: u32) -> u32 {
    0x0E028 + 0x40 * q
}

/// Transmit Descriptor Write-Back Address Low (§8.12.x, head write-back):
/// the address (4-byte aligned) with Head_WB_En in bit 0.
pub const fn tdwbal(q: u32) -> u32 {
    0x0E038 + 0x40 * q
}
/// Transmit Descriptor Write-Back Address High.
pub const fn tdwbah(q: u32) -> u32 {
    0x0E03C + 0x40 * q
}
/// TDWBAL.Head_WB_En: write the head back to memory.
pub const TDWBAL_HEAD_WB_EN: u32 = 1 << 0;

// §8.13 / §7.7 Direct cache access (DCA). Queues 0–3 also have aliases at
// 0x02814 / 0x03814 + 0x100 * n (Linux's E1000_RXCTL/TXCTL use those); we
// use the main addresses, as for the rings.
/// DCA Control.
pub const DCA_CTRL: u32 = 0x05B74;
/// DCA_CTRL.DCA_DIS (bit 0): DCA disabled.
pub const DCA_CTRL_DISABLE: u32 = 1 << 0;
/// DCA_CTRL.DCA_MODE (bits 4:1) = 0001b: DCA 1.0 (CB2 in Linux's igb).
pub const DCA_CTRL_MODE_10: u32 = 1 << 1;
/// Rx DCA Control of queue q.
pub const fn dca_rxctrl(q: u32) -> u32 {
    0x0C014 + 0x40 * q
}
/// Tx DCA Control of queue q.
pub const fn dca_txctrl(q: u32) -> u32 {
    0x0E014 + 0x40 * q
}
/// DCA_RXCTRL/TXCTRL.Desc_DCA_EN: tag descriptor writes.
pub const DCA_DESC_EN: u32 = 1 << 5;
/// DCA_RXCTRL.Head_DCA_EN: tag header writes.
pub const DCA_RXCTRL_HEAD_EN: u32 = 1 << 6;
/// DCA_RXCTRL.Data_DCA_EN: tag payload writes.
pub const DCA_RXCTRL_DATA_EN: u32 = 1 << 7;
/// CPUID field of DCA_RXCTRL/TXCTRL on the 82576: bits 31:24 (the 82575
/// has it in bits 4:0).
pub const DCA_CPUID_SHIFT: u32 = 24;

// §8.19 Statistics registers: clear on read.
/// CRC Error Count.
pub const CRCERRS: u32 = 0x04000;
/// Missed Packets Count: frames dropped because the packet buffer was full.
pub const MPC: u32 = 0x04010;
/// Receive Length Error Count.
pub const RLEC: u32 = 0x04040;
/// Good Packets Received Count.
pub const GPRC: u32 = 0x04074;
/// Good Packets Transmitted Count.
pub const GPTC: u32 = 0x04080;
/// Good Octets Received Count, low 32 bits (read first).
pub const GORCL: u32 = 0x04088;
/// Good Octets Received Count, high 32 bits (reading it clears both).
pub const GORCH: u32 = 0x0408C;
/// Good Octets Transmitted Count, low 32 bits (read first).
pub const GOTCL: u32 = 0x04090;
/// Good Octets Transmitted Count, high 32 bits (reading it clears both).
pub const GOTCH: u32 = 0x04094;
