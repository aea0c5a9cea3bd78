//! The long-running commands: `pktgen`, `fwd`, `pcap`. Each runs until
//! `--seconds` (or `--count`) is reached or Ctrl-C, prints statistics once
//! per second and, with `--json`, one JSON object as its last line.

use crate::apps::napi::cpu_seconds;
use crate::apps::{Capture, Forwarder, Napi, PacketGenerator};
use crate::pcap::PcapWriter;
use crate::report::{summary_json, LivePrinter};
use crate::signal;
use oxnet_driver::{Config, Device, DeviceStats, Error, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Options every running command shares.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Stop after this long (None: until Ctrl-C or the count).
    pub seconds: Option<f64>,
    /// Print the final JSON object.
    pub json: bool,
    /// Print live statistics once per second.
    pub live: bool,
}

/// Opens a device by spec, with the simulator's `sim:` devices available.
pub fn open(spec: &str, config: &Config) -> Result<Box<dyn Device>> {
    oxnet_sim::install();
    oxnet_driver::open(spec, config)
}

/// One line on stderr once a device is initialised, so that a person (or a
/// script starting several commands) sees it is ready.
fn announce(dev: &dyn Device) {
    let mac = dev.mac();
    let link = dev.link();
    eprintln!(
        "[{}] ready: {} driver, MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, link {}",
        dev.spec(),
        dev.driver_name(),
        mac[0],
        mac[1],
        mac[2],
        mac[3],
        mac[4],
        mac[5],
        if link.up {
            format!("up at {} Mbit/s", link.speed_mbps)
        } else {
            "down".to_string()
        }
    );
}

struct Runner {
    start: Instant,
    deadline: Option<Instant>,
    printer: LivePrinter,
    names: Vec<String>,
    live: bool,
}

impl Runner {
    fn new(names: Vec<String>, options: &RunOptions) -> Runner {
        signal::install();
        let start = Instant::now();
        Runner {
            start,
            deadline: options.seconds.and_then(|s| crate::deadline_after(start, s)),
            printer: LivePrinter::new(names.len()),
            names,
            live: options.live,
        }
    }

    /// Time until the deadline (a long time without one).
    fn time_left(&self) -> Duration {
        self.deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    fn should_stop(&self) -> bool {
        signal::stop_requested() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Prints live statistics when a second has passed. Called every
    /// iteration; checks the clock only every 4096th call.
    fn tick(&mut self, iteration: u64, devices: &mut [&mut dyn Device]) {
        if !self.live || !iteration.is_multiple_of(4096) || !self.printer.due() {
            return;
        }
        let stats: Vec<DeviceStats> = devices.iter_mut().map(|d| d.stats()).collect();
        print!("{}", self.printer.lines(&self.names, &stats));
    }

    fn finish(&self, devices: &mut [&mut dyn Device], extra: &[(&str, String)], options: &RunOptions) {
        let seconds = self.start.elapsed().as_secs_f64();
        let all: Vec<(String, DeviceStats)> = devices
            .iter_mut()
            .zip(&self.names)
            .map(|(d, n)| (n.clone(), d.stats()))
            .collect();
        for (name, s) in &all {
            println!(
                "[{name}] total: rx {} packets {} bytes, tx {} packets {} bytes, missed {}, pool empty {}, ring full {}",
                s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.rx_missed, s.rx_pool_empty, s.tx_ring_full
            );
        }
        if options.json {
            println!("{}", summary_json(&all, seconds, extra));
        }
    }
}

/// `oxnet pktgen`.
pub fn pktgen(
    spec: &str,
    config: &Config,
    size: usize,
    count: Option<u64>,
    rate_mpps: Option<f64>,
    options: &RunOptions,
) -> Result<()> {
    let mut dev = open(spec, config)?;
    announce(&*dev);
    let mut generator = PacketGenerator::new(&*dev, size, count, rate_mpps, config.batch_size)?;
    let mut runner = Runner::new(vec![spec.to_string()], options);
    let mut iteration = 0u64;
    while !generator.is_done() && !runner.should_stop() {
        generator.step(&mut *dev);
        iteration += 1;
        runner.tick(iteration, &mut [&mut *dev]);
    }
    // Honest counts: a packet the driver took is sent only once the device
    // has consumed it. Wait (bounded) for the device to take what is still
    // posted; what it never took, and what was in flight when a vhost-user
    // back-end went away, is not sent.
    let left = dev.drain_tx(config.tx_drain_timeout) as u64;
    let not_sent = left + dev.stats().tx_not_sent;
    let queued = generator.sent();
    if not_sent > 0 {
        eprintln!(
            "{spec}: {not_sent} of {queued} packets not sent ({left} not consumed by the device within {:.1} s \
             of the end, the rest in flight when the back-end went away)",
            config.tx_drain_timeout.as_secs_f64()
        );
    }
    let extra = [
        ("sent", queued.saturating_sub(not_sent).to_string()),
        ("queued", queued.to_string()),
        ("not_sent", not_sent.to_string()),
    ];
    runner.finish(&mut [&mut *dev], &extra, options);
    Ok(())
}

/// `oxnet fwd`: both directions, one thread, as ixy-fwd.
pub fn fwd(spec_a: &str, spec_b: &str, config: &Config, options: &RunOptions) -> Result<()> {
    if spec_a == spec_b {
        return Err(Error::Config(format!(
            "fwd needs two different devices, got {spec_a} twice"
        )));
    }
    let mut a = open(spec_a, config)?;
    announce(&*a);
    let mut b = open(spec_b, config)?;
    announce(&*b);
    let mut a_to_b = Forwarder::new(config.batch_size);
    let mut b_to_a = Forwarder::new(config.batch_size);
    // With --interrupts the loop sleeps while both sides are idle (napi.rs).
    let mut napi = if config.interrupts {
        Some(Napi::new(&[&*a, &*b], config.itr_us)?)
    } else {
        None
    };
    let mut runner = Runner::new(vec![spec_a.to_string(), spec_b.to_string()], options);
    let mut iteration = 0u64;
    while !runner.should_stop() {
        let forward = a_to_b.step(&mut *a, &mut *b);
        let backward = b_to_a.step(&mut *b, &mut *a);
        iteration += 1;
        runner.tick(iteration, &mut [&mut *a, &mut *b]);
        if let Some(napi) = &mut napi {
            // Packets waiting for a full transmit ring count as work: no
            // interrupt would tell us when the ring has room again.
            let work = forward + backward + a_to_b.pending() + b_to_a.pending();
            let full = forward == config.batch_size || backward == config.batch_size;
            napi.after_poll(&mut [&mut *a, &mut *b], work, full, runner.time_left())?;
        }
    }
    // Counters after the devices consumed what was posted (bounded wait):
    // a virtio device counts a packet as sent once it has used it.
    a.drain_tx(config.tx_drain_timeout);
    b.drain_tx(config.tx_drain_timeout);
    let mut extra = vec![
        ("forwarded", (a_to_b.forwarded + b_to_a.forwarded).to_string()),
        ("pending", (a_to_b.pending() + b_to_a.pending()).to_string()),
        ("cpu_seconds", format!("{:.3}", cpu_seconds())),
    ];
    if let Some(napi) = &napi {
        extra.extend(napi.json_fields());
    }
    runner.finish(&mut [&mut *a, &mut *b], &extra, options);
    Ok(())
}

/// `oxnet pcap`: capture to a file, stop after `count` frames or the time.
pub fn pcap(spec: &str, file: &Path, config: &Config, count: Option<u64>, options: &RunOptions) -> Result<()> {
    let writer = PcapWriter::create(file).map_err(|e| Error::Io(format!("cannot create {}: {e}", file.display())))?;
    let mut dev = open(spec, config)?;
    announce(&*dev);
    let mut capture = Capture::new(config.batch_size, Some(writer));
    let mut napi = if config.interrupts {
        Some(Napi::new(&[&*dev], config.itr_us)?)
    } else {
        None
    };
    let mut runner = Runner::new(vec![spec.to_string()], options);
    let mut iteration = 0u64;
    while !runner.should_stop() && count.is_none_or(|c| capture.received() < c) {
        let left = count.map_or(usize::MAX, |c| (c - capture.received()) as usize);
        let received = capture.step(&mut *dev, left);
        iteration += 1;
        runner.tick(iteration, &mut [&mut *dev]);
        if let Some(napi) = &mut napi {
            let full = received == config.batch_size;
            napi.after_poll(&mut [&mut *dev], received, full, runner.time_left())?;
        }
    }
    if let Some(pcap) = &mut capture.pcap {
        pcap.flush()
            .map_err(|e| Error::Io(format!("writing {}: {e}", file.display())))?;
    }
    if let Some(e) = capture.write_error.take() {
        return Err(Error::Io(format!("writing {}: {e}", file.display())));
    }
    let c = &capture.checker;
    let mut extra = vec![
        ("captured", capture.received().to_string()),
        ("lost", c.lost_below_highest().to_string()),
        ("duplicated", c.duplicated.to_string()),
        ("reordered", c.reordered.to_string()),
        ("foreign", c.foreign.to_string()),
        ("cpu_seconds", format!("{:.3}", cpu_seconds())),
    ];
    if let Some(napi) = &napi {
        extra.extend(napi.json_fields());
    }
    runner.finish(&mut [&mut *dev], &extra, options);
    Ok(())
}

/// `oxnet respond`: answer ARP and ICMP echo for `ip` on queue 0 of a
/// device (apps/respond.rs), until Ctrl-C, --seconds, or `count` echo
/// replies have been sent.
pub fn respond(
    spec: &str,
    ip: std::net::Ipv4Addr,
    config: &Config,
    count: Option<u64>,
    options: &RunOptions,
) -> Result<()> {
    let mut dev = open(spec, config)?;
    announce(&*dev);
    let mut responder = crate::apps::respond::Responder::new(ip, dev.mac(), config.batch_size);
    eprintln!("[{spec}] answering ARP and ICMP echo for {ip}");
    let mut runner = Runner::new(vec![spec.to_string()], options);
    let mut iteration = 0u64;
    while !runner.should_stop() && count.is_none_or(|c| responder.counters.echo_replies < c) {
        if responder.step(&mut *dev) == 0 {
            // Nothing arrived: a ping every second needs no busy core.
            std::thread::sleep(Duration::from_micros(200));
        }
        iteration += 1;
        runner.tick(iteration, &mut [&mut *dev]);
    }
    let c = responder.counters;
    let extra = vec![
        ("received", c.received.to_string()),
        ("arp_replies", c.arp_replies.to_string()),
        ("echo_replies", c.echo_replies.to_string()),
        ("ignored", c.ignored.to_string()),
        ("malformed", c.malformed.to_string()),
        ("reply_tx_dropped", c.tx_dropped.to_string()),
    ];
    runner.finish(&mut [&mut *dev], &extra, options);
    Ok(())
}
