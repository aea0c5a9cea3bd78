//! The hardware feature switches of [`Config::offloads`] on the 82576, as
//! the ixgbe driver's `features.rs` does them for the 82599: each function
//! says which part of the 82576 datasheet it implements. What QEMU's `igb`
//! model does with the values is tested in `crates/oxnet/tests/vm_igb.rs`
//! (docs/features.md says what it does not model).
//!
//! The 82576 has RSS, receive and transmit checksum offload, TSO, transmit
//! head write-back and DCA; it has **no RSC** (receive side coalescing is
//! an 82599 feature), so `Offloads::rsc` is refused.

use super::regs::*;
use crate::device::Config;
use crate::error::{Error, Result};
use crate::offload::{TsoLimits, MAX_DATA_DESCRIPTORS, MAX_TSO_PAYLOAD};
use crate::regs::RegisterAccess;
use crate::rss;

/// Queues RSS can spread over: the 82576 has 16 receive queues (RETA
/// entries select one of them, §7.1.2).
pub const MAX_RSS_QUEUES: u16 = 16;

/// The 82576's TSO limits. PAYLEN is 18 bits in the advanced data
/// descriptor (§7.2.2.3), as on the 82599. For descriptors per packet we
/// keep the 82599's 40 (see docs/features.md: the 82576 datasheet states no
/// such number; DPDK's igb PMD allows 255, QEMU's model holds 64 buffers
/// per packet), so that a packet one of our drivers takes, the other takes
/// too.
pub const TSO_LIMITS: TsoLimits = TsoLimits {
    device: "82576",
    max_payload: MAX_TSO_PAYLOAD,
    payload_source: "PAYLEN is 18 bits, 82576 datasheet §7.2.2.3",
    max_data_descriptors: MAX_DATA_DESCRIPTORS,
    descriptors_source: "the limit oxnet keeps for the 82576 and the 82599, docs/features.md",
};

/// Refuses switches the 82576 does not have, with a message that says why.
pub fn validate(config: &Config) -> Result<()> {
    let o = &config.offloads;
    if o.rsc {
        return Err(Error::Config(
            "the 82576 has no receive side coalescing (RSC is an 82599 feature, §7.11 of its datasheet); \
             drop --rsc for an igb device"
                .into(),
        ));
    }
    if (o.rss || config.rx_queues > 1) && config.rx_queues > MAX_RSS_QUEUES {
        return Err(Error::Config(format!(
            "RSS spreads over at most {MAX_RSS_QUEUES} queues on the 82576, not {}",
            config.rx_queues
        )));
    }
    if config.mtu != 1500 {
        return Err(Error::Config(format!(
            "MTU {}: the igb driver receives standard frames only (MTU 1500); jumbo frames \
             (RCTL.LPE, RLPML) are not implemented",
            config.mtu
        )));
    }
    Ok(())
}

/// Whether RSS is on: asked for, or implied by more than one receive
/// queue (the igb driver has always spread several queues with RSS).
pub fn rss_enabled(config: &Config) -> bool {
    config.offloads.rss || config.rx_queues > 1
}

/// Receive features, before RCTL.EN: the checksum control (§8.10.x RXCSUM)
/// and RSS (§7.1.2: MRQC selects RSS, RETA maps the low 7 bits of the
/// hash to a queue, RSSRK holds the key).
pub fn init_rx<R: RegisterAccess>(regs: &R, config: &Config) {
    // RXCSUM.PCSD: dword 1 of the write-back carries the RSS hash instead
    // of the fragment checksum / IP identification (needed for the hash in
    // the metadata). IPOFLD/TUOFLD: the NIC checks the IPv4 and TCP/UDP
    // checksums and reports IPCS/L4CS with IPE/L4E (§7.1.5.2); off, the
    // driver reports nothing and `offload::rx_checksum` computes the same
    // verdict in software.
    let mut rxcsum = regs.read32(RXCSUM) & !(RXCSUM_PCSD | RXCSUM_IPOFLD | RXCSUM_TUOFLD);
    if rss_enabled(config) {
        rxcsum |= RXCSUM_PCSD;
    }
    if config.offloads.rx_checksum {
        rxcsum |= RXCSUM_IPOFLD | RXCSUM_TUOFLD;
    }
    regs.write32(RXCSUM, rxcsum);
    if !rss_enabled(config) {
        regs.write32(MRQC, 0);
        return;
    }
    // The key of Microsoft's RSS verification suite (crate::rss, shared
    // with the ixgbe driver), four bytes per register, byte 0 lowest.
    for (n, word) in rss::DEFAULT_KEY.chunks_exact(4).enumerate() {
        let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        regs.write32(rssrk(n as u32), value);
    }
    // 128 one-byte entries, round-robin over the queues, four per register
    // with entry 0 in the lowest byte.
    let table = rss::default_reta(config.rx_queues);
    for (n, entries) in table.chunks_exact(4).enumerate() {
        let value = u32::from_le_bytes([entries[0], entries[1], entries[2], entries[3]]);
        regs.write32(reta(n as u32), value);
    }
    // MRQC = 010b (RSS only), hashing IPv4/IPv6 addresses and TCP/UDP ports.
    regs.write32(
        MRQC,
        MRQC_RSS
            | MRQC_RSS_FIELD_IPV4
            | MRQC_RSS_FIELD_IPV4_TCP
            | MRQC_RSS_FIELD_IPV4_UDP
            | MRQC_RSS_FIELD_IPV6
            | MRQC_RSS_FIELD_IPV6_TCP
            | MRQC_RSS_FIELD_IPV6_UDP,
    );
}

/// The CPU a queue's DCA hints name: queue q runs on core q (as `oxnet fwd
/// --queues N` pins its threads), wrapped to the cores there are.
pub fn dca_cpu(queue: u16) -> u32 {
    crate::ixgbe::features::dca_cpu(queue)
}

/// DCA (§7.7, registers §8.13; Linux's igb_setup_dca programs the same):
/// on, DCA_CTRL in DCA 1.0 mode and each queue's descriptor (receive:
/// also header and payload) writes tagged with its CPU in bits 31:24;
/// off: DCA_CTRL.DCA_DIS.
pub fn init_dca<R: RegisterAccess>(regs: &R, config: &Config) {
    if !config.offloads.dca {
        regs.write32(DCA_CTRL, DCA_CTRL_DISABLE);
        return;
    }
    regs.write32(DCA_CTRL, DCA_CTRL_MODE_10);
    for q in 0..config.rx_queues {
        let value = regs.read32(dca_rxctrl(q as u32)) & !(0xFF << DCA_CPUID_SHIFT);
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

/// The registers `oxnet stats` shows to explain how the features are set.
pub fn registers<R: RegisterAccess>(regs: &R, rx_queues: u16, tx_queues: u16) -> Vec<(String, u32)> {
    let mut out = vec![
        ("RXCSUM".to_string(), regs.read32(RXCSUM)),
        ("MRQC".to_string(), regs.read32(MRQC)),
        ("DCA_CTRL".to_string(), regs.read32(DCA_CTRL)),
    ];
    for q in 0..rx_queues as u32 {
        out.push((format!("DCA_RXCTRL({q})"), regs.read32(dca_rxctrl(q))));
    }
    for q in 0..tx_queues as u32 {
        out.push((format!("DCA_TXCTRL({q})"), regs.read32(dca_txctrl(q))));
        out.push((format!("TDWBAL({q})"), regs.read32(tdwbal(q))));
        out.push((format!("TXDCTL({q})"), regs.read32(txdctl(q))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Offloads, TsoMode};
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// Registers as plain memory (0 until written), to see what the
    /// functions above program where QEMU's model does not keep a register
    /// (DCA_CTRL, DCA_RXCTRL read 0 there).
    #[derive(Default)]
    struct Memory(Mutex<HashMap<u32, u32>>);

    impl RegisterAccess for Memory {
        fn read32(&self, offset: u32) -> u32 {
            *self.0.lock().unwrap().get(&offset).unwrap_or(&0)
        }
        fn write32(&self, offset: u32, value: u32) {
            self.0.lock().unwrap().insert(offset, value);
        }
    }

    #[test]
    fn dca_on_tags_every_queue_with_its_cpu_and_off_disables_it() {
        let regs = Memory::default();
        let config = Config {
            rx_queues: 2,
            tx_queues: 2,
            offloads: Offloads {
                dca: true,
                ..Offloads::default()
            },
            ..Config::default()
        };
        init_dca(&regs, &config);
        assert_eq!(regs.read32(DCA_CTRL), DCA_CTRL_MODE_10);
        for q in 0..2u16 {
            let cpu = dca_cpu(q) << 24;
            assert_eq!(regs.read32(dca_rxctrl(q as u32)), 0xE0 | cpu, "DCA_RXCTRL({q})");
            assert_eq!(regs.read32(dca_txctrl(q as u32)), 0x20 | cpu, "DCA_TXCTRL({q})");
        }
        assert_eq!(dca_rxctrl(0), 0x0C014);
        assert_eq!(dca_txctrl(1), 0x0E054);
        init_dca(&regs, &Config::default());
        assert_eq!(regs.read32(DCA_CTRL), DCA_CTRL_DISABLE);
    }

    #[test]
    fn rsc_and_jumbo_frames_are_refused_the_rest_accepted() {
        let rsc = Config {
            offloads: Offloads {
                rsc: true,
                ..Offloads::default()
            },
            ..Config::default()
        };
        let error = validate(&rsc).unwrap_err().to_string();
        assert!(error.contains("the 82576 has no receive side coalescing"), "{error}");
        let jumbo = Config {
            mtu: 9000,
            ..Config::default()
        };
        assert!(validate(&jumbo).unwrap_err().to_string().contains("MTU 9000"));
        let everything = Config {
            rx_queues: 4,
            tx_queues: 4,
            offloads: Offloads {
                rx_checksum: true,
                tx_checksum: true,
                tso: TsoMode::Single,
                rsc: false,
                rss: true,
                tx_head_writeback: true,
                dca: true,
            },
            ..Config::default()
        };
        validate(&everything).unwrap();
    }

    #[test]
    fn rx_checksum_and_rss_set_rxcsum() {
        let regs = Memory::default();
        let both = Config {
            rx_queues: 2,
            offloads: Offloads {
                rx_checksum: true,
                ..Offloads::default()
            },
            ..Config::default()
        };
        init_rx(&regs, &both);
        assert_eq!(regs.read32(RXCSUM), RXCSUM_PCSD | RXCSUM_IPOFLD | RXCSUM_TUOFLD);
        assert_eq!(regs.read32(MRQC) & 0b111, MRQC_RSS);
        init_rx(&regs, &Config::default());
        assert_eq!(regs.read32(RXCSUM), 0);
        assert_eq!(regs.read32(MRQC), 0);
    }
}
