//! The measured side of scripts/vhost/bench.sh: transmit-only or
//! receive-only on one device for a fixed time, nothing else (no pcap, no
//! sequence checks), then one JSON line with the driver's own counters.
//!
//!     oxnet-vhost-bench tx|rx SPEC SECONDS [BATCH]

use oxnet::apps::PacketGenerator;
use oxnet_driver::{Config, PacketBatch};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 || !matches!(args[1].as_str(), "tx" | "rx") {
        eprintln!("usage: oxnet-vhost-bench tx|rx SPEC SECONDS [BATCH [RING]]");
        return ExitCode::from(2);
    }
    let seconds = match oxnet::parse_seconds(&args[3]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("oxnet-vhost-bench: error: SECONDS {e}");
            return ExitCode::from(2);
        }
    };
    let batch: usize = args.get(4).and_then(|b| b.parse().ok()).unwrap_or(32);
    let ring: usize = args.get(5).and_then(|r| r.parse().ok()).unwrap_or(256);
    let config = Config {
        batch_size: batch,
        rx_ring_size: ring,
        tx_ring_size: ring,
        ..Config::default()
    };
    let mut dev = match oxnet_driver::open(&args[2], &config) {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("oxnet-vhost-bench: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let deadline = oxnet::deadline_after(Instant::now(), seconds);
    let start = Instant::now();
    let mut iterations = 0u64;
    if args[1] == "tx" {
        let mut generator = match PacketGenerator::new(&*dev, 60, None, None, batch) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("oxnet-vhost-bench: error: {e}");
                return ExitCode::FAILURE;
            }
        };
        while !iterations.is_multiple_of(1024) || deadline.is_none_or(|d| Instant::now() < d) {
            generator.step(&mut *dev);
            iterations += 1;
        }
    } else {
        let mut packets = PacketBatch::with_capacity(batch);
        while !iterations.is_multiple_of(1024) || deadline.is_none_or(|d| Instant::now() < d) {
            dev.rx_batch(0, &mut packets, batch);
            packets.clear();
            iterations += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let s = dev.stats();
    let packets = if args[1] == "tx" { s.tx_packets } else { s.rx_packets };
    println!(
        "{{\"mode\":\"{}\",\"seconds\":{elapsed:.3},\"packets\":{packets},\"mpps\":{:.3}}}",
        args[1],
        packets as f64 / elapsed / 1e6
    );
    ExitCode::SUCCESS
}
