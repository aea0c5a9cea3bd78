//! Statistics registers (§8.2.3.23). All of them clear when read.
//!
//! The octet counters GORC/GOTC are 36 bits wide, split into a low (L) and
//! a high (H) register; the datasheet tells software to read L first, then H.
//! The model makes that pair atomic: reading L returns the low 32 bits,
//! latches the upper 4 bits for the following H read and clears the
//! counter, so an increment between the two reads is never lost nor counted
//! twice. Reading H returns the latched bits and clears the latch.

use super::regs::Stat;

const OCTET_COUNTER_MASK: u64 = (1 << 36) - 1;

/// The counters of one port.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub crc_errors: u32,
    pub length_errors: u32,
    pub undersize: u32,
    pub oversize: u32,
    pub xon_sent: u32,
    pub xon_received: u32,
    pub xoff_sent: u32,
    pub xoff_received: u32,
    pub good_packets_received: u32,
    pub good_packets_sent: u32,
    pub good_octets_received: u64,
    pub good_octets_sent: u64,
    gorc_high_latch: u32,
    gotc_high_latch: u32,
    /// MPC(n): one per packet buffer; the model has one buffer (n = 0).
    pub missed: [u32; 8],
    /// Per-queue statistics sets (§8.2.3.23.71–76): packets and 36-bit
    /// byte counts, received and transmitted.
    pub queue_rx_packets: [u32; 16],
    pub queue_rx_bytes: [u64; 16],
    pub queue_tx_packets: [u32; 16],
    pub queue_tx_bytes: [u64; 16],
    queue_latch: [u32; 16],
    queue_tx_latch: [u32; 16],
}

impl Stats {
    /// A good frame of `len` bytes (destination address through CRC) was
    /// received into the packet buffer (§8.2.3.23.26 GPRC, .27 GORC).
    pub fn count_received(&mut self, len: usize) {
        self.good_packets_received = self.good_packets_received.wrapping_add(1);
        self.good_octets_received = (self.good_octets_received + len as u64) & OCTET_COUNTER_MASK;
    }

    /// A good frame of `len` bytes including its CRC was sent
    /// (§8.2.3.23.32 GPTC, .33 GOTC).
    pub fn count_sent(&mut self, len: usize) {
        self.good_packets_sent = self.good_packets_sent.wrapping_add(1);
        self.good_octets_sent = (self.good_octets_sent + len as u64) & OCTET_COUNTER_MASK;
    }

    /// A frame of `len` bytes went to host memory through statistics set `set`.
    pub fn count_queue_received(&mut self, set: usize, len: usize) {
        self.queue_rx_packets[set] = self.queue_rx_packets[set].wrapping_add(1);
        self.queue_rx_bytes[set] = (self.queue_rx_bytes[set] + len as u64) & OCTET_COUNTER_MASK;
    }

    /// A frame of `len` bytes was sent from a queue of statistics set `set`.
    pub fn count_queue_sent(&mut self, set: usize, len: usize) {
        self.queue_tx_packets[set] = self.queue_tx_packets[set].wrapping_add(1);
        self.queue_tx_bytes[set] = (self.queue_tx_bytes[set] + len as u64) & OCTET_COUNTER_MASK;
    }

    /// Reads (and clears) a statistics register.
    pub fn read(&mut self, stat: Stat) -> u32 {
        fn take(counter: &mut u32) -> u32 {
            std::mem::take(counter)
        }
        match stat {
            Stat::Crcerrs => take(&mut self.crc_errors),
            Stat::Rlec => take(&mut self.length_errors),
            Stat::Ruc => take(&mut self.undersize),
            Stat::Roc => take(&mut self.oversize),
            Stat::Lxontxc => take(&mut self.xon_sent),
            Stat::Lxonrxcnt => take(&mut self.xon_received),
            Stat::Lxofftxc => take(&mut self.xoff_sent),
            Stat::Lxoffrxcnt => take(&mut self.xoff_received),
            Stat::Gprc => take(&mut self.good_packets_received),
            Stat::Gptc => take(&mut self.good_packets_sent),
            Stat::Mpc(n) => take(&mut self.missed[n]),
            Stat::Gorcl => {
                let value = std::mem::take(&mut self.good_octets_received);
                self.gorc_high_latch = (value >> 32) as u32;
                value as u32
            }
            Stat::Gorch => take(&mut self.gorc_high_latch),
            Stat::Gotcl => {
                let value = std::mem::take(&mut self.good_octets_sent);
                self.gotc_high_latch = (value >> 32) as u32;
                value as u32
            }
            Stat::Gotch => take(&mut self.gotc_high_latch),
            Stat::Qprc(n) => take(&mut self.queue_rx_packets[n]),
            Stat::Qptc(n) => take(&mut self.queue_tx_packets[n]),
            Stat::QbrcL(n) => {
                let value = std::mem::take(&mut self.queue_rx_bytes[n]);
                self.queue_latch[n] = (value >> 32) as u32;
                value as u32
            }
            Stat::QbrcH(n) => take(&mut self.queue_latch[n]),
            Stat::QbtcL(n) => {
                let value = std::mem::take(&mut self.queue_tx_bytes[n]);
                self.queue_tx_latch[n] = (value >> 32) as u32;
                value as u32
            }
            Stat::QbtcH(n) => take(&mut self.queue_tx_latch[n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_then_high_gives_one_36_bit_value_and_clears() {
        let mut stats = Stats {
            good_octets_received: 0x7_1234_5678,
            ..Stats::default()
        };
        assert_eq!(stats.read(Stat::Gorcl), 0x1234_5678);
        stats.count_received(64); // arrives between the two reads
        assert_eq!(stats.read(Stat::Gorch), 0x7);
        assert_eq!(stats.read(Stat::Gorcl), 64);
        assert_eq!(stats.read(Stat::Gorch), 0);
    }

    #[test]
    fn octet_counter_wraps_at_36_bits() {
        let mut stats = Stats {
            good_octets_sent: OCTET_COUNTER_MASK,
            ..Stats::default()
        };
        stats.count_sent(2);
        assert_eq!(stats.read(Stat::Gotcl), 1);
        assert_eq!(stats.read(Stat::Gotch), 0);
    }
}
