//! `oxnet stats DEV`: the hardware counters, the per-queue counters (the
//! NIC's QPRC/QBRC/QPTC/QBTC and the driver's own), the histogram of
//! descriptors per transmitted packet, and the registers that show how the
//! feature switches are programmed — what explains a result.

use crate::report::json_string;
use oxnet_driver::device::TX_DESCRIPTOR_HISTOGRAM;
use oxnet_driver::{Device, DeviceStats, QueueStats};

/// Everything `oxnet stats` shows about one device.
pub struct StatsReport {
    pub spec: String,
    pub device: DeviceStats,
    pub queues: Vec<QueueStats>,
    pub registers: Vec<(String, u32)>,
}

impl StatsReport {
    /// Reads the counters of `dev` (clear-on-read registers are added up by
    /// the driver, so reading does not lose anything).
    pub fn read(dev: &mut dyn Device) -> StatsReport {
        StatsReport {
            spec: dev.spec().to_string(),
            device: dev.stats(),
            queues: dev.queue_stats(),
            registers: dev.feature_registers(),
        }
    }

    /// A table for people.
    pub fn text(&self) -> String {
        let d = &self.device;
        let mut out = format!("{}\n", self.spec);
        for (name, value) in [
            ("rx_packets", d.rx_packets),
            ("rx_bytes", d.rx_bytes),
            ("tx_packets", d.tx_packets),
            ("tx_bytes", d.tx_bytes),
            ("rx_missed", d.rx_missed),
            ("rx_crc_errors", d.rx_crc_errors),
            ("rx_length_errors", d.rx_length_errors),
            ("rx_undersize", d.rx_undersize),
            ("rx_oversize", d.rx_oversize),
            ("rx_pool_empty", d.rx_pool_empty),
            ("tx_ring_full", d.tx_ring_full),
            ("tx_invalid", d.tx_invalid),
            ("tx_copied", d.tx_copied),
            ("tx_copy_pool_empty", d.tx_copy_pool_empty),
            ("tx_not_sent", d.tx_not_sent),
            ("kernel_rx_dropped", d.kernel_rx_dropped),
            ("kernel_invalid_descs", d.kernel_invalid_descs),
        ] {
            out += &format!("  {name:<20} {value}\n");
        }
        if !self.queues.is_empty() {
            out += "  queue   hw_rx_pkts   hw_rx_bytes   hw_tx_pkts   hw_tx_bytes  rx_descs   rx_pkts  tx_descs   tx_pkts  ctx_descs  sw_fallback  tx_copied\n";
            for q in &self.queues {
                out += &format!(
                    "  {:>5} {:>12} {:>13} {:>12} {:>13} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12} {:>10}\n",
                    q.queue,
                    q.hw_rx_packets,
                    q.hw_rx_bytes,
                    q.hw_tx_packets,
                    q.hw_tx_bytes,
                    q.rx_descriptors,
                    q.rx_packets,
                    q.tx_descriptors,
                    q.tx_packets,
                    q.tx_context_descriptors,
                    q.tx_software_fallback,
                    q.tx_copied
                );
            }
            out += "  descriptors per transmitted packet (queue: descriptors=packets):\n";
            for q in &self.queues {
                let used: Vec<String> = histogram(q).map(|(n, count)| format!("{n}={count}")).collect();
                out += &format!(
                    "  {:>5}: {}\n",
                    q.queue,
                    if used.is_empty() { "-".into() } else { used.join(" ") }
                );
            }
        }
        if !self.registers.is_empty() {
            out += "  feature registers:\n";
            for (name, value) in &self.registers {
                out += &format!("  {name:<18} {value:#010x}\n");
            }
        }
        out
    }

    /// One JSON object.
    pub fn json(&self) -> String {
        let d = &self.device;
        let queues: Vec<String> = self
            .queues
            .iter()
            .map(|q| {
                let histogram: Vec<String> = histogram(q).map(|(n, c)| format!("\"{n}\":{c}")).collect();
                format!(
                    "{{\"queue\":{},\"hw_rx_packets\":{},\"hw_rx_bytes\":{},\"hw_tx_packets\":{},\"hw_tx_bytes\":{},\
                     \"rx_descriptors\":{},\"rx_packets\":{},\"rx_bytes\":{},\"tx_descriptors\":{},\"tx_packets\":{},\
                     \"tx_bytes\":{},\"tx_context_descriptors\":{},\"tx_software_fallback\":{},\"tx_copied\":{},\
                     \"tx_copy_pool_empty\":{},\
                     \"tx_descriptors_per_packet\":{{{}}}}}",
                    q.queue,
                    q.hw_rx_packets,
                    q.hw_rx_bytes,
                    q.hw_tx_packets,
                    q.hw_tx_bytes,
                    q.rx_descriptors,
                    q.rx_packets,
                    q.rx_bytes,
                    q.tx_descriptors,
                    q.tx_packets,
                    q.tx_bytes,
                    q.tx_context_descriptors,
                    q.tx_software_fallback,
                    q.tx_copied,
                    q.tx_copy_pool_empty,
                    histogram.join(",")
                )
            })
            .collect();
        let registers: Vec<String> = self
            .registers
            .iter()
            .map(|(name, value)| format!("{}:{value}", json_string(name)))
            .collect();
        format!(
            "{{\"device\":{},\"rx_packets\":{},\"rx_bytes\":{},\"tx_packets\":{},\"tx_bytes\":{},\"rx_missed\":{},\
             \"rx_crc_errors\":{},\"rx_length_errors\":{},\"rx_undersize\":{},\"rx_oversize\":{},\"rx_pool_empty\":{},\
             \"tx_ring_full\":{},\"tx_invalid\":{},\"tx_copied\":{},\"tx_copy_pool_empty\":{},\"tx_not_sent\":{},\
             \"kernel_rx_dropped\":{},\"kernel_invalid_descs\":{},\"queues\":[{}],\"registers\":{{{}}}}}",
            json_string(&self.spec),
            d.rx_packets,
            d.rx_bytes,
            d.tx_packets,
            d.tx_bytes,
            d.rx_missed,
            d.rx_crc_errors,
            d.rx_length_errors,
            d.rx_undersize,
            d.rx_oversize,
            d.rx_pool_empty,
            d.tx_ring_full,
            d.tx_invalid,
            d.tx_copied,
            d.tx_copy_pool_empty,
            d.tx_not_sent,
            d.kernel_rx_dropped,
            d.kernel_invalid_descs,
            queues.join(","),
            registers.join(",")
        )
    }
}

/// The non-empty buckets of the histogram: (descriptors, packets); the
/// last bucket is "that many or more".
fn histogram(q: &QueueStats) -> impl Iterator<Item = (String, u64)> + '_ {
    q.tx_descriptors_per_packet
        .iter()
        .enumerate()
        .filter(|(_, &c)| c != 0)
        .map(|(n, &c)| {
            let label = if n == TX_DESCRIPTOR_HISTOGRAM - 1 {
                format!("{n}+")
            } else {
                n.to_string()
            };
            (label, c)
        })
}

/// `oxnet stats`: opens `spec`, receives and drops on every queue for
/// `seconds`, prints the report (a table, or one JSON object).
pub fn main(spec: &str, config: &oxnet_driver::Config, seconds: f64, json: bool) -> oxnet_driver::Result<()> {
    let mut dev = crate::commands::open(spec, config)?;
    let (queues, _) = dev.queues();
    let deadline = crate::deadline_after(std::time::Instant::now(), seconds);
    let mut batch = oxnet_driver::PacketBatch::with_capacity(config.batch_size);
    while deadline.is_none_or(|d| std::time::Instant::now() < d) && !crate::signal::stop_requested() {
        for q in 0..queues {
            dev.rx_batch(q, &mut batch, config.batch_size);
            batch.clear();
        }
    }
    let report = StatsReport::read(&mut *dev);
    if json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    Ok(())
}
