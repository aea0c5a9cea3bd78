//! `oxnet demo`: the whole ixy test set-up in one process, on simulated
//! 82599 ports, with no hardware and no root:
//!
//! ```text
//! pktgen ==wire== fwd0 [forwarder] fwd1 ==wire== capture
//! ```
//!
//! Every port runs the real ixgbe driver against the software 82599. The
//! three applications take turns in one thread (run to completion). At the
//! end every sequence number must have arrived exactly once, in order.

use crate::apps::{Capture, Forwarder, PacketGenerator};
use crate::commands::{self, RunOptions};
use crate::pcap::PcapWriter;
use crate::report::{summary_json, LivePrinter};
use crate::signal;
use oxnet_driver::{Config, Device, DeviceStats, Error, Result};
use oxnet_sim::World;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Frame size without CRC.
    pub size: usize,
    /// Packets to send (None: as many as fit in `seconds`).
    pub count: Option<u64>,
    /// Driver configuration of all four ports.
    pub config: Config,
    /// Write what the capture port receives to this file.
    pub pcap: Option<PathBuf>,
    /// Printing and duration.
    pub run: RunOptions,
}

/// What the demo measured.
#[derive(Debug, Clone)]
pub struct DemoResult {
    /// Packets the generator handed to its NIC.
    pub sent: u64,
    /// Test frames the capture port received.
    pub received: u64,
    /// Sequence numbers that never arrived.
    pub lost: u64,
    /// Extra copies received.
    pub duplicated: u64,
    /// Frames that arrived after a later one.
    pub reordered: u64,
    /// Per-port statistics.
    pub devices: Vec<(String, DeviceStats)>,
    /// Faults the model recorded (unmodelled register accesses ...).
    pub faults: Vec<String>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl DemoResult {
    /// True if every packet arrived once, in order, and the model saw no
    /// fault.
    pub fn ok(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.reordered == 0
            && self.received == self.sent
            && self.faults.is_empty()
    }
}

/// Port names; `prefix` keeps several demos in one process apart (tests).
fn port_names(prefix: &str) -> [String; 4] {
    ["pktgen", "fwd0", "fwd1", "capture"].map(|p| format!("{prefix}{p}"))
}

/// Runs the demo in `world` (the process-wide one for `oxnet demo`).
pub fn run(options: &DemoOptions, prefix: &str) -> Result<DemoResult> {
    let world = World::global();
    let names = port_names(prefix);
    world.connect(&names[0], &names[1]);
    world.connect(&names[2], &names[3]);
    let mut config = options.config.clone();
    // 802.3x flow control on every port: when the forwarder or the capture
    // falls behind, the NIC in front of it pauses its link partner instead
    // of dropping, so the end-to-end check can demand exact counts.
    config.flow_control = true;
    let specs: Vec<String> = names.iter().map(|n| format!("sim:{n}")).collect();
    let mut gen_dev = commands::open(&specs[0], &config)?;
    let mut fwd0 = commands::open(&specs[1], &config)?;
    let mut fwd1 = commands::open(&specs[2], &config)?;
    let mut cap_dev = commands::open(&specs[3], &config)?;

    let pcap = match &options.pcap {
        Some(path) => {
            Some(PcapWriter::create(path).map_err(|e| Error::Io(format!("cannot create {}: {e}", path.display())))?)
        }
        None => None,
    };
    let batch = config.batch_size;
    let mut generator = PacketGenerator::new(&*gen_dev, options.size, options.count, None, batch)?;
    let mut forward = Forwarder::new(batch);
    let mut backward = Forwarder::new(batch);
    let mut capture = Capture::new(batch, pcap);

    signal::install();
    let start = Instant::now();
    let deadline = options.run.seconds.and_then(|s| crate::deadline_after(start, s));
    let mut printer = LivePrinter::new(4);
    let mut drain_deadline: Option<Instant> = None;
    let mut iteration = 0u64;
    loop {
        iteration += 1;
        let check_clock = iteration.is_multiple_of(1024);
        if drain_deadline.is_none() {
            let time_up = check_clock && (signal::stop_requested() || deadline.is_some_and(|d| Instant::now() >= d));
            if time_up || generator.is_done() {
                // Stop numbering new packets; let the ones in flight arrive.
                generator.stop();
                drain_deadline = Some(Instant::now() + Duration::from_secs(5));
            }
        }
        generator.step(&mut *gen_dev);
        forward.step(&mut *fwd0, &mut *fwd1);
        backward.step(&mut *fwd1, &mut *fwd0);
        capture.step(&mut *cap_dev, usize::MAX);
        if let Some(d) = drain_deadline {
            let all_in = generator.is_done() && capture.checker.unique >= generator.sent();
            if all_in || (check_clock && Instant::now() >= d) {
                break;
            }
        }
        if options.run.live && check_clock && printer.due() {
            let mut devices: [&mut dyn Device; 4] = [&mut *gen_dev, &mut *fwd0, &mut *fwd1, &mut *cap_dev];
            let stats: Vec<DeviceStats> = devices.iter_mut().map(|d| d.stats()).collect();
            print!("{}", printer.lines(&specs, &stats));
        }
    }
    if let Some(pcap) = &mut capture.pcap {
        pcap.flush().map_err(|e| Error::Io(format!("writing pcap: {e}")))?;
    }
    let mut devices: [&mut dyn Device; 4] = [&mut *gen_dev, &mut *fwd0, &mut *fwd1, &mut *cap_dev];
    let stats: Vec<(String, DeviceStats)> = devices
        .iter_mut()
        .zip(&specs)
        .map(|(d, n)| (n.clone(), d.stats()))
        .collect();
    let sent = generator.sent();
    let checker = &capture.checker;
    let faults: Vec<String> = world
        .faults()
        .into_iter()
        .filter(|f| names.iter().any(|n| f.contains(n.as_str())))
        .collect();
    Ok(DemoResult {
        sent,
        received: checker.received,
        lost: checker.lost(sent),
        duplicated: checker.duplicated,
        reordered: checker.reordered,
        devices: stats,
        faults,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// `oxnet demo`: runs, prints the result; Ok(false) if the check failed.
pub fn main(options: &DemoOptions) -> Result<bool> {
    if options.run.live {
        println!(
            "oxnet demo: pktgen -> fwd -> capture over simulated 82599 ports \
             (ring {}, batch {}, {}-byte frames)",
            options.config.rx_ring_size, options.config.batch_size, options.size
        );
    }
    let r = run(options, "")?;
    for (name, s) in &r.devices {
        println!(
            "[{name}] total: rx {} packets, tx {} packets, missed {}, pool empty {}",
            s.rx_packets, s.tx_packets, s.rx_missed, s.rx_pool_empty
        );
    }
    let mpps = r.received as f64 / r.seconds / 1e6;
    println!(
        "sequence check: sent {}, received {}, lost {}, duplicated {}, reordered {} ({:.2} Mpps end to end, {:.1} s): {}",
        r.sent,
        r.received,
        r.lost,
        r.duplicated,
        r.reordered,
        mpps,
        r.seconds,
        if r.ok() { "OK" } else { "FAILED" }
    );
    for f in &r.faults {
        println!("model fault: {f}");
    }
    if options.run.json {
        let extra = [
            ("sent", r.sent.to_string()),
            ("received", r.received.to_string()),
            ("lost", r.lost.to_string()),
            ("duplicated", r.duplicated.to_string()),
            ("reordered", r.reordered.to_string()),
            ("faults", r.faults.len().to_string()),
            ("ok", r.ok().to_string()),
        ];
        println!("{}", summary_json(&r.devices, r.seconds, &extra));
    }
    Ok(r.ok())
}
