//! 82599 register offsets and bits, named as in the datasheet (rev. 3.3,
//! chapter 8 "Programming Interface"). Only what the driver uses.

// §8.2.3.1 General control registers.
/// Device Control Register (§8.2.3.1.1).
pub const CTRL: u32 = 0x00000;
/// CTRL.LRST: link reset (self-clearing).
pub const CTRL_LRST: u32 = 1 << 3;
/// CTRL.RST: device reset (self-clearing).
pub const CTRL_RST: u32 = 1 << 26;
/// What ixy and the datasheet (§4.6.3.2) write for a global reset.
pub const CTRL_RST_MASK: u32 = CTRL_LRST | CTRL_RST;
/// Extended Device Control Register (§8.2.3.1.3).
pub const CTRL_EXT: u32 = 0x00018;
/// CTRL_EXT.NS_DIS: no-snoop disable.
pub const CTRL_EXT_NS_DIS: u32 = 1 << 16;
/// EEPROM/Flash Control Register (§8.2.3.2.1).
pub const EEC: u32 = 0x10010;
/// EEC.ARD: EEPROM auto-read done.
pub const EEC_ARD: u32 = 1 << 9;

// §8.2.3.5 Interrupt registers.
/// Extended Interrupt Mask Clear (§8.2.3.5.4): writing 1s masks causes.
pub const EIMC: u32 = 0x00888;
/// All interrupt causes of EIMC (bits 30:0).
pub const EIMC_ALL: u32 = 0x7FFF_FFFF;

// §8.2.3.22 MAC registers.
/// Auto-Negotiation Control Register (§8.2.3.22.19).
pub const AUTOC: u32 = 0x042A0;
/// AUTOC.LMS: link mode select, bits 15:13.
pub const AUTOC_LMS_MASK: u32 = 0x7 << 13;
/// LMS = 011b: 10 GbE serial link (KR/SFI) with KX4/KX auto-negotiation.
pub const AUTOC_LMS_10G_SERIAL: u32 = 0x3 << 13;
/// AUTOC.10G_PMA_PMD_PARALLEL, bits 8:7.
pub const AUTOC_10G_PMA_PMD_MASK: u32 = 0x3 << 7;
/// 10G_PMA_PMD = 00b: XAUI.
pub const AUTOC_10G_XAUI: u32 = 0x0 << 7;
/// AUTOC.RESTART_AN: restart auto-negotiation (self-clearing).
pub const AUTOC_AN_RESTART: u32 = 1 << 12;
/// Link Status Register (§8.2.3.22.20).
pub const LINKS: u32 = 0x042A4;
/// LINKS.LINK_UP.
pub const LINKS_UP: u32 = 1 << 30;
/// LINKS.LINK_SPEED, bits 29:28.
pub const LINKS_SPEED_MASK: u32 = 0x3 << 28;
/// MAC Core Control 0 (§8.2.3.22.8).
pub const HLREG0: u32 = 0x04240;
/// HLREG0.TXCRCEN: append the CRC on transmit.
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
/// HLREG0.RXCRCSTRP: strip the CRC on receive.
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
/// HLREG0.TXPADEN: pad short frames to 64 bytes (with CRC).
pub const HLREG0_TXPADEN: u32 = 1 << 10;
/// MAC Flow Control Register (§8.2.3.22.34).
pub const MFLCN: u32 = 0x04294;
/// MFLCN.RFCE: honour received 802.3x PAUSE frames.
pub const MFLCN_RFCE: u32 = 1 << 3;

// §8.2.3.8 Receive registers.
/// Receive Control Register (§8.2.3.8.10).
pub const RXCTRL: u32 = 0x03000;
/// RXCTRL.RXEN.
pub const RXCTRL_RXEN: u32 = 1 << 0;
/// Receive DMA Control Register (§8.2.3.8.8).
pub const RDRXCTL: u32 = 0x02F00;
/// RDRXCTL.CRCSTRIP: must match HLREG0.RXCRCSTRP.
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
/// RDRXCTL.DMAIDONE: DMA initialisation done.
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// Filter Control Register (§8.2.3.7.1).
pub const FCTRL: u32 = 0x05080;
/// FCTRL.MPE: multicast promiscuous.
pub const FCTRL_MPE: u32 = 1 << 8;
/// FCTRL.UPE: unicast promiscuous.
pub const FCTRL_UPE: u32 = 1 << 9;
/// FCTRL.BAM: accept broadcast.
pub const FCTRL_BAM: u32 = 1 << 10;
/// Receive Address Low/High of entry 0 (§8.2.3.7.8/9): the MAC address.
pub const RAL0: u32 = 0x0A200;
/// See [`RAL0`].
pub const RAH0: u32 = 0x0A204;

/// Receive Packet Buffer Size n (§8.2.3.8.9).
pub const fn rxpbsize(n: u32) -> u32 {
    0x03C00 + 4 * n
}
/// One 512 KB packet buffer (the power-on value for buffer 0, bits 19:10 in KB).
pub const RXPBSIZE_512KB: u32 = 512 << 10;

// Per-queue receive registers, queues 0..63 (§8.2.3.8.1–§8.2.3.8.7).
/// Receive Descriptor Base Address Low.
pub const fn rdbal(q: u32) -> u32 {
    0x01000 + 0x40 * q
}
/// Receive Descriptor Base Address High.
pub const fn rdbah(q: u32) -> u32 {
    0x01004 + 0x40 * q
}
/// Receive Descriptor Length (bytes).
pub const fn rdlen(q: u32) -> u32 {
    0x01008 + 0x40 * q
}
/// Rx DCA Control (§8.2.3.11.1).
pub const fn dca_rxctrl(q: u32) -> u32 {
    0x0100C + 0x40 * q
}
/// Receive Descriptor Head.
pub const fn rdh(q: u32) -> u32 {
    0x01010 + 0x40 * q
}
/// Split Receive Control.
pub const fn srrctl(q: u32) -> u32 {
    0x01014 + 0x40 * q
}
/// Receive Descriptor Tail.
pub const fn rdt(q: u32) -> u32 {
    0x01018 + 0x40 * q
}
/// Receive Descriptor Control.
pub const fn rxdctl(q: u32) -> u32 {
    0x01028 + 0x40 * q
}
/// DCA_RXCTRL bit 12: reserved, 1 at reset, and the datasheet (§4.6.7,
/// §8.2.3.11.1) says to clear it; ixy does the same. (Not the relaxed-ordering
/// bit: that is [`DCA_RXCTRL_DATA_WRO_EN`], bit 13.)
pub const DCA_RXCTRL_RESERVED_12: u32 = 1 << 12;
/// DCA_RXCTRL bit 13: Rx data write relaxed ordering (§8.2.3.11.1; Linux's
/// IXGBE_DCA_RXCTRL_DATA_WRO_EN). The driver leaves it as reset set it.
pub const DCA_RXCTRL_DATA_WRO_EN: u32 = 1 << 13;
/// SRRCTL.BSIZEPACKET, bits 4:0, in 1 KB units.
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
/// SRRCTL.DESCTYPE = 001b: advanced descriptors, one buffer (bits 27:25).
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0b001 << 25;
/// SRRCTL.DESCTYPE mask.
pub const SRRCTL_DESCTYPE_MASK: u32 = 0b111 << 25;
/// SRRCTL.DROP_EN: drop when no descriptor is free instead of filling the
/// packet buffer (set with several queues and no flow control: rx.rs).
pub const SRRCTL_DROP_EN: u32 = 1 << 28;
/// RXDCTL.ENABLE / TXDCTL.ENABLE.
pub const DCTL_ENABLE: u32 = 1 << 25;

// §8.2.3.9 Transmit registers.
/// DMA Tx Control (§8.2.3.9.2).
pub const DMATXCTL: u32 = 0x04A80;
/// DMATXCTL.TE: transmit enable.
pub const DMATXCTL_TE: u32 = 1 << 0;
/// DMA Tx TCP Max Allow Size Requests (§8.2.3.9.1).
pub const DTXMXSZRQ: u32 = 0x08100;
/// DCB Transmit Descriptor Plane Control and Status (§8.2.3.10.2).
pub const RTTDCS: u32 = 0x04900;
/// RTTDCS.ARBDIS: disable the DCB arbiter.
pub const RTTDCS_ARBDIS: u32 = 1 << 6;
/// Transmit Packet Buffer Size n (§8.2.3.9.13).
pub const fn txpbsize(n: u32) -> u32 {
    0x0CC00 + 4 * n
}
/// One 160 KB transmit packet buffer (bits 19:10 in KB), the non-DCB value.
pub const TXPBSIZE_160KB: u32 = 160 << 10;

/// Transmit Descriptor Base Address Low (§8.2.3.9.5).
pub const fn tdbal(q: u32) -> u32 {
    0x06000 + 0x40 * q
}
/// Transmit Descriptor Base Address High.
pub const fn tdbah(q: u32) -> u32 {
    0x06004 + 0x40 * q
}
/// Transmit Descriptor Length.
pub const fn tdlen(q: u32) -> u32 {
    0x06008 + 0x40 * q
}
/// Transmit Descriptor Head.
pub const fn tdh(q: u32) -> u32 {
    0x06010 + 0x40 * q
}
/// Transmit Descriptor Tail.
pub const fn tdt(q: u32) -> u32 {
    0x06018 + 0x40 * q
}
/// Transmit Descriptor Control (§8.2.3.9.10).
pub const fn txdctl(q: u32) -> u32 {
    0x06028 + 0x40 * q
}

// §8.2.3.3 Flow control registers (IEEE 802.3x).
/// Flow Control Transmit Timer Value n (§8.2.3.3.2), n < 4.
pub const fn fcttv(n: u32) -> u32 {
    0x03200 + 4 * n
}
/// Flow Control Receive Threshold Low n (§8.2.3.3.3).
pub const fn fcrtl(n: u32) -> u32 {
    0x03220 + 4 * n
}
/// Flow Control Receive Threshold High n (§8.2.3.3.4).
pub const fn fcrth(n: u32) -> u32 {
    0x03260 + 4 * n
}
/// FCRTL.XONE: send XON when the buffer drains below the low threshold.
pub const FCRTL_XONE: u32 = 1 << 31;
/// FCRTH.FCEN: send XOFF above the high threshold.
pub const FCRTH_FCEN: u32 = 1 << 31;
/// Flow Control Refresh Threshold Value (§8.2.3.3.5).
pub const FCRTV: u32 = 0x032A0;
/// Flow Control Configuration (§8.2.3.3.7).
pub const FCCFG: u32 = 0x03D00;
/// FCCFG.TFCE = 01b: link flow control (802.3x), bits 4:3.
pub const FCCFG_TFCE_802_3X: u32 = 1 << 3;

// §8.2.3.23 Statistics registers: clear on read.
/// CRC Error Count.
pub const CRCERRS: u32 = 0x04000;
/// Receive Length Error Count.
pub const RLEC: u32 = 0x04040;
/// Missed Packets Count n (§8.2.3.23.4), n < 8.
pub const fn mpc(n: u32) -> u32 {
    0x03FA0 + 4 * n
}
/// Good Packets Received Count.
pub const GPRC: u32 = 0x04074;
/// Good Packets Transmitted Count.
pub const GPTC: u32 = 0x04080;
/// Good Octets Received Count, low 32 bits.
pub const GORCL: u32 = 0x04088;
/// Good Octets Received Count, high 4 bits.
pub const GORCH: u32 = 0x0408C;
/// Good Octets Transmitted Count, low 32 bits.
pub const GOTCL: u32 = 0x04090;
/// Good Octets Transmitted Count, high 4 bits.
pub const GOTCH: u32 = 0x04094;

// ---------------------------------------------------------------------------
// Hardware features (the switches of `Config::offloads`).

// §8.2.3.7 Receive filter registers: checksum and RSS.
/// Receive Checksum Control (§8.2.3.7.5).
pub const RXCSUM: u32 = 0x05000;
/// RXCSUM.IPPCSE: IP payload checksum enable (fragment checksum).
pub const RXCSUM_IPPCSE: u32 = 1 << 12;
/// RXCSUM.PCSD: packet checksum disable — the descriptor's dword 1 then
/// carries the RSS hash instead of the fragment checksum (§7.1.6.2).
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// Receive Filter Control (§8.2.3.7.6).
pub const RFCTL: u32 = 0x05008;
/// RFCTL.RSC_DIS: RSC disable (global).
pub const RFCTL_RSC_DIS: u32 = 1 << 5;
/// RFCTL.NFSW_DIS / NFSR_DIS: no NFS write / read header recognition
/// (Linux sets both with RSC, so NFS headers do not end a coalesced flow).
pub const RFCTL_NFSW_DIS: u32 = 1 << 6;
/// See [`RFCTL_NFSW_DIS`].
pub const RFCTL_NFSR_DIS: u32 = 1 << 7;
/// Multiple Receive Queues Command (§8.2.3.7.12). 0x05818 is the
/// 82598-compatible address; the 82599 decodes it too, and Linux's and
/// DPDK's ixgbe drivers program MRQC there on the 82599 as well.
pub const MRQC: u32 = 0x05818;
/// MRQC.MRQE = 0001b: RSS only (bits 3:0).
pub const MRQC_RSSEN: u32 = 0b0001;
/// MRQC field enables (bits 31:16): which packet types are hashed.
pub const MRQC_RSS_FIELD_IPV4_TCP: u32 = 1 << 16;
/// Hash IPv4 packets (addresses only).
pub const MRQC_RSS_FIELD_IPV4: u32 = 1 << 17;
/// Hash UDP/IPv4 packets with their ports.
pub const MRQC_RSS_FIELD_IPV4_UDP: u32 = 1 << 22;
/// Redirection Table n (§8.2.3.7.15), n < 32: four 8-bit entries each, the
/// low 4 bits the queue. (0x05C00 is the 82598-compatible alias that Linux
/// uses; the 82599 datasheet lists 0x0EB00.)
pub const fn reta(n: u32) -> u32 {
    0x0EB00 + 4 * n
}
/// RSS Random Key n (§8.2.3.7.16), n < 10: 40 bytes, byte 0 in the low
/// byte of RSSRK(0).
pub const fn rssrk(n: u32) -> u32 {
    0x0EB80 + 4 * n
}

// §8.2.3.8 / §7.11 Receive side coalescing.
/// RSC Control n (§8.2.3.8.13), per queue.
pub const fn rscctl(q: u32) -> u32 {
    0x0102C + 0x40 * q
}
/// RSCCTL.RSCEN.
pub const RSCCTL_RSCEN: u32 = 1 << 0;
/// RSCCTL.MAXDESC (bits 3:2): 00b = 1, 01b = 4, 10b = 8, 11b = 16
/// descriptors per coalesced packet at most.
pub const RSCCTL_MAXDESC_SHIFT: u32 = 2;
/// Packet Split Receive Type n (§8.2.3.7.4), per pool/queue, n < 64.
pub const fn psrtype(n: u32) -> u32 {
    0x0EA00 + 4 * n
}
/// PSRTYPE bits: split after TCP / UDP / IPv4 / IPv6 / L2 headers. RSC
/// needs the header types recognised (§7.11.3).
pub const PSRTYPE_TCPHDR: u32 = 1 << 4;
/// See [`PSRTYPE_TCPHDR`].
pub const PSRTYPE_UDPHDR: u32 = 1 << 5;
/// See [`PSRTYPE_TCPHDR`].
pub const PSRTYPE_IPV4HDR: u32 = 1 << 8;
/// See [`PSRTYPE_TCPHDR`].
pub const PSRTYPE_IPV6HDR: u32 = 1 << 9;
/// See [`PSRTYPE_TCPHDR`].
pub const PSRTYPE_L2HDR: u32 = 1 << 12;
/// RDRXCTL.RSCFRSTSIZE (bits 21:17): must be 0 with RSC (§8.2.3.8.8).
pub const RDRXCTL_RSCFRSTSIZE: u32 = 0x1F << 17;
/// RDRXCTL.RSCACKC: must be 1 with RSC (§8.2.3.8.8).
pub const RDRXCTL_RSCACKC: u32 = 1 << 25;
/// RDRXCTL.FCOE_WRFIX: must be 1 with RSC (§8.2.3.8.8).
pub const RDRXCTL_FCOE_WRFIX: u32 = 1 << 26;
/// Max Frame Size (§8.2.3.22.13): MFS in bits 31:16.
pub const MAXFRS: u32 = 0x04268;
/// HLREG0.JUMBOEN: accept frames up to MAXFRS.MFS.
pub const HLREG0_JUMBOEN: u32 = 1 << 2;

// §8.2.3.9 Transmit: head write-back and TSO flags.
/// Tx Descriptor Completion Write Back Address Low (§8.2.3.9.11): bit 0
/// Head_WB_En, bits 31:2 the address.
pub const fn tdwbal(q: u32) -> u32 {
    0x06038 + 0x40 * q
}
/// Tx Descriptor Completion Write Back Address High.
pub const fn tdwbah(q: u32) -> u32 {
    0x0603C + 0x40 * q
}
/// TDWBAL.Head_WB_En.
pub const TDWBAL_HEAD_WB_EN: u32 = 1 << 0;
/// TXDCTL.WTHRESH (bits 22:16): must be 0 with head write-back.
pub const TXDCTL_WTHRESH_MASK: u32 = 0x7F << 16;
/// DMA Tx TCP Flags Control Low (§8.2.3.9.3): TCP flags kept in the first
/// (bits 11:0) and middle (27:16) segments of a TSO packet.
pub const DTXTCPFLGL: u32 = 0x04A88;
/// DMA Tx TCP Flags Control High (§8.2.3.9.4): kept in the last segment (bits 11:0).
pub const DTXTCPFLGH: u32 = 0x04A8C;

// §8.2.3.11 DCA.
/// DCA Control (§8.2.3.11.4; Linux IXGBE_DCA_CTRL): bit 0 DCA_DIS, bits
/// 4:1 DCA_MODE (0001b = DCA 1.0).
pub const DCA_CTRL: u32 = 0x11074;
/// DCA_CTRL.DCA_DIS.
pub const DCA_CTRL_DISABLE: u32 = 1 << 0;
/// DCA_CTRL.DCA_MODE = DCA 1.0.
pub const DCA_CTRL_MODE_10: u32 = 0b0001 << 1;
/// Tx DCA Control n (§8.2.3.11.2).
pub const fn dca_txctrl(q: u32) -> u32 {
    0x0600C + 0x40 * q
}
/// DCA_RXCTRL / DCA_TXCTRL: descriptor DCA enable.
pub const DCA_DESC_EN: u32 = 1 << 5;
/// DCA_RXCTRL: header DCA enable.
pub const DCA_RXCTRL_HEAD_EN: u32 = 1 << 6;
/// DCA_RXCTRL: payload DCA enable.
pub const DCA_RXCTRL_DATA_EN: u32 = 1 << 7;
/// DCA_RXCTRL / DCA_TXCTRL: CPU id, bits 31:24 (DCA 1.0 mode).
pub const DCA_CPUID_SHIFT: u32 = 24;

// §8.2.3.23 Per-queue statistics (16 counter sets; RQSMR/TQSM map queues
// to sets, 4 queues per register, 4 bits each at bits 3:0, 11:8, ...).
/// Receive Queue Statistic Mapping n (§8.2.3.8; exact subsection not
/// verified here, offset as in Linux ixgbe_type.h), n < 32.
pub const fn rqsmr(n: u32) -> u32 {
    0x02300 + 4 * n
}
/// Transmit Queue Statistic Mapping n (§8.2.3.9; exact subsection not
/// verified here, offset as in Linux ixgbe_type.h), n < 32.
pub const fn tqsm(n: u32) -> u32 {
    0x08600 + 4 * n
}
/// Queue Packets Received Count n (§8.2.3.23.71), n < 16.
pub const fn qprc(n: u32) -> u32 {
    0x01030 + 0x40 * n
}
/// Queue Bytes Received Count n, low / high (§8.2.3.23.73/74).
pub const fn qbrc_l(n: u32) -> u32 {
    0x01034 + 0x40 * n
}
/// See [`qbrc_l`].
pub const fn qbrc_h(n: u32) -> u32 {
    0x01038 + 0x40 * n
}
/// Queue Packets Transmitted Count n (§8.2.3.23.72).
pub const fn qptc(n: u32) -> u32 {
    0x06030 + 0x40 * n
}
/// Queue Bytes Transmitted Count n, low / high (§8.2.3.23.75/76).
pub const fn qbtc_l(n: u32) -> u32 {
    0x08700 + 8 * n
}
/// See [`qbtc_l`].
pub const fn qbtc_h(n: u32) -> u32 {
    0x08704 + 8 * n
}
/// Receive Undersize / Oversize Count (§8.2.3.23.16/18).
pub const RUC: u32 = 0x040A4;
/// See [`RUC`].
pub const ROC: u32 = 0x040AC;
/// Queues with their own statistics counters.
pub const STAT_QUEUES: u32 = 16;
