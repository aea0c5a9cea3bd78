//! The hardware feature switches of [`Config::offloads`], programmed as the
//! 82599 datasheet describes them. Each function says which section it
//! implements; what the software 82599 (`oxnet-sim`) does with the values
//! is tested in `crates/oxnet/tests/features_*.rs`.

use super::regs::*;
use crate::device::{Config, TsoMode};
use crate::error::{Error, Result};
use crate::offload::{TSO_FLAGS_FIRST, TSO_FLAGS_LAST, TSO_FLAGS_MIDDLE};
use crate::regs::RegisterAccess;
use crate::rss;

/// Queues RSS can spread over: RETA entries hold 4-bit queue numbers
/// (§7.1.2.8.2).
pub const MAX_RSS_QUEUES: u16 = 16;

/// Refuses combinations the 82599 cannot do, with a message that says why.
pub fn validate(config: &Config) -> Result<()> {
    let o = &config.offloads;
    if o.rss && config.rx_queues > MAX_RSS_QUEUES {
        return Err(Error::Config(format!(
            "RSS spreads over at most {MAX_RSS_QUEUES} queues (RETA entries are 4 bits, §7.1.2.8.2), not {}",
            config.rx_queues
        )));
    }
    if o.rsc {
        let encoding = [1, 4, 8, 16].iter().position(|&n| n == config.rsc_max_descriptors);
        if encoding.is_none() {
            return Err(Error::Config(format!(
                "RSC: {} descriptors per coalesced packet; RSCCTL.MAXDESC allows 1, 4, 8 or 16 (§8.2.3.8.13)",
                config.rsc_max_descriptors
            )));
        }
        // §7.11 / §8.2.3.8.13: one frame of the largest size must fit the
        // MAXDESC buffers of one RSC packet (and MAXDESC x buffer size must
        // stay below 64 KB).
        let frame = config.mtu + 18;
        let needed = frame.div_ceil(RSC_BUFFER_SIZE);
        if needed > config.rsc_max_descriptors {
            return Err(Error::Config(format!(
                "RSC: a frame of MTU {} needs {needed} receive buffers of {RSC_BUFFER_SIZE} bytes, more than \
                 RSCCTL.MAXDESC = {} allows (§7.11); raise --rsc-max-descriptors or lower the MTU",
                config.mtu, config.rsc_max_descriptors
            )));
        }
        if config.rsc_max_descriptors * RSC_BUFFER_SIZE > 0xFFFF {
            return Err(Error::Config(format!(
                "RSC: MAXDESC {} x {RSC_BUFFER_SIZE}-byte buffers exceeds 64 KB (§8.2.3.8.13)",
                config.rsc_max_descriptors
            )));
        }
    }
    if config.mtu != 1500 {
        return Err(Error::Config(format!(
            "MTU {}: the 82599 driver receives standard frames only (MTU 1500); jumbo frames \
             (HLREG0.JUMBOEN, MAXFRS, §8.2.3.22.13) are not implemented",
            config.mtu
        )));
    }
    if !o.rss && config.rx_queues > 1 {
        return Err(Error::Config(format!(
            "{} receive queues without RSS: every frame would go to queue 0; turn RSS on (--rss)",
            config.rx_queues
        )));
    }
    Ok(())
}

/// Receive buffer size the driver programs in SRRCTL.BSIZEPACKET (2 KiB).
const RSC_BUFFER_SIZE: usize = 2048;

/// RSC (§7.11, with the values Linux' ixgbe uses): RFCTL.RSC_DIS clear and
/// NFS header recognition off (§8.2.3.7.6), RDRXCTL.RSCACKC and FCOE_WRFIX
/// set and RSCFRSTSIZE 0 (§8.2.3.8.8), PSRTYPE(0) (0x0EA00) the header
/// types, and per queue RSCCTL.RSCEN with MAXDESC (§8.2.3.8.13). Off:
/// RFCTL.RSC_DIS set.
pub fn init_rsc<R: RegisterAccess>(regs: &R, config: &Config) {
    if !config.offloads.rsc {
        regs.set_flags32(RFCTL, RFCTL_RSC_DIS);
        return;
    }
    let rfctl = regs.read32(RFCTL) & !RFCTL_RSC_DIS;
    regs.write32(RFCTL, rfctl | RFCTL_NFSW_DIS | RFCTL_NFSR_DIS);
    let rdrxctl = regs.read32(RDRXCTL) & !RDRXCTL_RSCFRSTSIZE;
    regs.write32(RDRXCTL, rdrxctl | RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX);
    regs.write32(
        psrtype(0),
        PSRTYPE_TCPHDR | PSRTYPE_UDPHDR | PSRTYPE_IPV4HDR | PSRTYPE_IPV6HDR | PSRTYPE_L2HDR,
    );
    let maxdesc = [1, 4, 8, 16]
        .iter()
        .position(|&n| n == config.rsc_max_descriptors)
        .unwrap_or(3) as u32;
    for q in 0..config.rx_queues as u32 {
        regs.write32(rscctl(q), RSCCTL_RSCEN | (maxdesc << RSCCTL_MAXDESC_SHIFT));
    }
}

/// The CPU a queue's DCA hints name: queue q runs on core q (as `oxnet fwd
/// --queues N` pins its threads), wrapped to the cores there are.
pub fn dca_cpu(queue: u16) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    queue as u32 % cores
}

/// Receive features, before RXCTRL.RXEN: RSS (§7.1.2.8, §4.6.10.1.1 "RSS
/// configuration"), the checksum control (§8.2.3.7.5) and per-queue
/// statistics mapping (§8.2.3.8.?/§8.2.3.23).
pub fn init_rx<R: RegisterAccess>(regs: &R, config: &Config) {
    let o = &config.offloads;
    // RXCSUM.PCSD: dword 1 of the write-back carries the RSS hash, not the
    // fragment checksum (§7.1.6.2); required for the hash in the metadata.
    // IP and TCP/UDP checksums are checked either way; the switch decides
    // whether the driver reports the verdict.
    let mut rxcsum = 0;
    if o.rss {
        rxcsum |= RXCSUM_PCSD;
    }
    if o.rx_checksum {
        rxcsum |= RXCSUM_IPPCSE;
    }
    regs.write32(RXCSUM, rxcsum);
    if o.rss {
        // §8.2.3.7.14: the 40-byte key, byte 0 in the low byte of RSSRK(0).
        for (n, chunk) in rss::DEFAULT_KEY.chunks(4).enumerate() {
            regs.write32(
                rssrk(n as u32),
                u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
            );
        }
        // §8.2.3.7.13: 128 entries, four per register, entry 4n in bits 7:0.
        let table = rss::default_reta(config.rx_queues);
        for (n, entries) in table.chunks(4).enumerate() {
            regs.write32(
                reta(n as u32),
                u32::from_le_bytes([entries[0], entries[1], entries[2], entries[3]]),
            );
        }
        // §8.2.3.7.12: RSS on; hash TCP/IPv4 (4-tuple), UDP/IPv4 (4-tuple)
        // and other IPv4 (addresses).
        regs.write32(
            MRQC,
            MRQC_RSSEN | MRQC_RSS_FIELD_IPV4_TCP | MRQC_RSS_FIELD_IPV4 | MRQC_RSS_FIELD_IPV4_UDP,
        );
    }
    map_queue_statistics(regs, config);
    init_rsc(regs, config);
}

/// Queue q counts in statistics set q (q < 16): RQSMR/TQSM hold four
/// 4-bit... entries per register (bits 3:0, 11:8, 19:16, 27:24).
fn map_queue_statistics<R: RegisterAccess>(regs: &R, config: &Config) {
    for (queues, mapping) in [(config.rx_queues, rqsmr as fn(u32) -> u32), (config.tx_queues, tqsm)] {
        let n = (queues as u32).min(STAT_QUEUES);
        for register in 0..n.div_ceil(4) {
            let mut value = 0;
            for k in 0..4 {
                let q = register * 4 + k;
                if q < n {
                    value |= q << (8 * k);
                }
            }
            regs.write32(mapping(register), value);
        }
    }
}

/// DCA (§7.5, §8.2.3.11): on, DCA 1.0 mode, and each queue's descriptor,
/// header and payload writes tagged with its CPU; off: DCA_CTRL.DCA_DIS.
pub fn init_dca<R: RegisterAccess>(regs: &R, config: &Config) {
    if !config.offloads.dca {
        regs.write32(DCA_CTRL, DCA_CTRL_DISABLE);
        return;
    }
    regs.write32(DCA_CTRL, DCA_CTRL_MODE_10);
    for q in 0..config.rx_queues {
        let value = regs.read32(dca_rxctrl(q as u32)) & !(DCA_RXCTRL_RESERVED_12 | (0xFF << DCA_CPUID_SHIFT));
        regs.write32(
            dca_rxctrl(q as u32),
            value | DCA_DESC_EN | DCA_RXCTRL_HEAD_EN | DCA_RXCTRL_DATA_EN | (dca_cpu(q) << DCA_CPUID_SHIFT),
        );
    }
    for q in 0..config.tx_queues {
        let value = regs.read32(dca_txctrl(q as u32)) & !(0xFF << DCA_CPUID_SHIFT);
        regs.write32(
            dca_txctrl(q as u32),
            value | DCA_DESC_EN | (dca_cpu(q) << DCA_CPUID_SHIFT),
        );
    }
}

/// TSO (§7.2.4): the TCP flags kept in first / middle / last segments
/// (§8.2.3.9.12), the same values the software fallback uses.
pub fn init_tso<R: RegisterAccess>(regs: &R, config: &Config) {
    if config.offloads.tso != TsoMode::Off {
        regs.write32(DTXTCPFLGL, TSO_FLAGS_FIRST as u32 | ((TSO_FLAGS_MIDDLE as u32) << 16));
        regs.write32(DTXTCPFLGH, TSO_FLAGS_LAST as u32);
    }
}

/// The registers `oxnet stats` shows to explain how the features are set.
pub fn registers<R: RegisterAccess>(regs: &R, rx_queues: u16, tx_queues: u16) -> Vec<(String, u32)> {
    let mut out = vec![
        ("RXCSUM".to_string(), regs.read32(RXCSUM)),
        ("MRQC".to_string(), regs.read32(MRQC)),
        ("RDRXCTL".to_string(), regs.read32(RDRXCTL)),
        ("RFCTL".to_string(), regs.read32(RFCTL)),
        ("PSRTYPE(0)".to_string(), regs.read32(psrtype(0))),
        ("DCA_CTRL".to_string(), regs.read32(DCA_CTRL)),
    ];
    for q in 0..rx_queues as u32 {
        out.push((format!("RSCCTL({q})"), regs.read32(rscctl(q))));
        out.push((format!("DCA_RXCTRL({q})"), regs.read32(dca_rxctrl(q))));
    }
    for q in 0..tx_queues as u32 {
        out.push((format!("DCA_TXCTRL({q})"), regs.read32(dca_txctrl(q))));
        out.push((format!("TDWBAL({q})"), regs.read32(tdwbal(q))));
        out.push((format!("TXDCTL({q})"), regs.read32(txdctl(q))));
    }
    out
}
