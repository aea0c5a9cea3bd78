//! What the commands print: live statistics once per second (the way ixy
//! prints them) and one JSON object at the end.

use oxnet_driver::DeviceStats;
use std::fmt::Write;
use std::time::Instant;

/// Ethernet preamble, start-of-frame delimiter and inter-frame gap, in
/// bytes: what a frame costs on the wire beyond its own octets (which the
/// NIC counts including the CRC). ixy adds the same to its Mbit/s.
const WIRE_OVERHEAD: u64 = 20;

/// Per-device statistics between two prints.
pub struct LivePrinter {
    last: Vec<DeviceStats>,
    last_time: Instant,
}

impl LivePrinter {
    /// Starts measuring `n` devices from zero.
    pub fn new(n: usize) -> LivePrinter {
        LivePrinter {
            last: vec![DeviceStats::default(); n],
            last_time: Instant::now(),
        }
    }

    /// True once a second has passed since the last print.
    pub fn due(&self) -> bool {
        self.last_time.elapsed().as_secs_f64() >= 1.0
    }

    /// Lines "[name] RX: x Mpps, y Mbit/s" and "TX: ..." for each device.
    pub fn lines(&mut self, names: &[String], stats: &[DeviceStats]) -> String {
        let seconds = self.last_time.elapsed().as_secs_f64().max(1e-9);
        let mut out = String::new();
        for (i, (name, now)) in names.iter().zip(stats).enumerate() {
            let before = self.last[i];
            let rx_packets = now.rx_packets - before.rx_packets;
            let tx_packets = now.tx_packets - before.tx_packets;
            let rx_bytes = now.rx_bytes - before.rx_bytes;
            let tx_bytes = now.tx_bytes - before.tx_bytes;
            let _ = writeln!(out, "[{name}] RX: {}", rate(rx_packets, rx_bytes, seconds));
            let _ = writeln!(out, "[{name}] TX: {}", rate(tx_packets, tx_bytes, seconds));
            self.last[i] = *now;
        }
        self.last_time = Instant::now();
        out
    }
}

fn rate(packets: u64, bytes: u64, seconds: f64) -> String {
    let mpps = packets as f64 / seconds / 1e6;
    let mbit = (bytes + packets * WIRE_OVERHEAD) as f64 * 8.0 / seconds / 1e6;
    format!("{mpps:.2} Mpps, {mbit:.0} Mbit/s")
}

/// One device in the final JSON object.
pub fn device_json(name: &str, s: &DeviceStats) -> String {
    format!(
        "{{\"name\":{},\"rx_packets\":{},\"rx_bytes\":{},\"tx_packets\":{},\"tx_bytes\":{},\
         \"rx_missed\":{},\"rx_crc_errors\":{},\"rx_pool_empty\":{},\"tx_ring_full\":{},\"tx_invalid\":{},\"tx_copied\":{},\"tx_copy_pool_empty\":{},\"tx_not_sent\":{},\"kernel_rx_dropped\":{},\"kernel_invalid_descs\":{}}}",
        json_string(name),
        s.rx_packets,
        s.rx_bytes,
        s.tx_packets,
        s.tx_bytes,
        s.rx_missed,
        s.rx_crc_errors,
        s.rx_pool_empty,
        s.tx_ring_full,
        s.tx_invalid,
        s.tx_copied,
        s.tx_copy_pool_empty,
        s.tx_not_sent,
        s.kernel_rx_dropped,
        s.kernel_invalid_descs
    )
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The final JSON object: devices plus extra `"key":value` fields.
pub fn summary_json(devices: &[(String, DeviceStats)], seconds: f64, extra: &[(&str, String)]) -> String {
    let list: Vec<String> = devices.iter().map(|(n, s)| device_json(n, s)).collect();
    let mut out = format!("{{\"seconds\":{seconds:.3},\"devices\":[{}]", list.join(","));
    for (key, value) in extra {
        let _ = write!(out, ",{}:{}", json_string(key), value);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_and_shapes() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        let s = DeviceStats {
            rx_packets: 3,
            ..Default::default()
        };
        let j = summary_json(&[("sim:a".into(), s)], 1.0, &[("lost", "0".into())]);
        assert!(j.starts_with("{\"seconds\":1.000,\"devices\":[{\"name\":\"sim:a\",\"rx_packets\":3,"));
        assert!(j.ends_with(",\"lost\":0}"));
    }

    #[test]
    fn rates_include_wire_overhead() {
        // 1 Mpps of 64-byte frames (with CRC) = 84 bytes on the wire = 672 Mbit/s.
        assert_eq!(rate(1_000_000, 64_000_000, 1.0), "1.00 Mpps, 672 Mbit/s");
    }
}
