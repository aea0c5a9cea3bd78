//! `oxnet`: the command line. See `oxnet --help`.

use clap::{Args, Parser, Subcommand};
use oxnet::commands::{self, RunOptions};
use oxnet::demo::{self, DemoOptions};
use oxnet_driver::{Config, MemoryKind, Offloads, TsoMode};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "oxnet", version, about = "A user-space network stack: drivers, packet graph, TCP", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the main job: pktgen -> fwd -> capture over simulated 82599 ports
    /// (no hardware, no root), then check every sequence number arrived
    /// exactly once, in order.
    Demo {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        run: RunArgs,
        /// Frame size in bytes, without the 4-byte CRC (60..=1514).
        #[arg(long, default_value_t = 60)]
        size: usize,
        /// Packets to send (default: as many as fit in --seconds).
        #[arg(long)]
        count: Option<u64>,
        /// Also write what the capture port receives to this pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
    },
    /// Forward packets between two devices in both directions, touching one
    /// byte per packet (as ixy-fwd).
    Fwd {
        /// First device (PCI address like 0000:03:00.0, or sim:NAME).
        dev1: String,
        /// Second device.
        dev2: String,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        features: FeatureArgs,
        #[command(flatten)]
        interrupts: InterruptArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Send UDP packets with a sequence number in the payload.
    Pktgen {
        /// Device (PCI address like 0000:03:00.0, or sim:NAME).
        dev: String,
        /// Frame size in bytes, without the 4-byte CRC (60..=1514).
        #[arg(long, default_value_t = 60)]
        size: usize,
        /// Stop after this many packets.
        #[arg(long)]
        count: Option<u64>,
        /// Limit the rate to this many million packets per second.
        #[arg(long)]
        rate: Option<f64>,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        features: FeatureArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Capture packets from a device into a pcap file (tcpdump/tshark read it).
    Pcap {
        /// Device (PCI address like 0000:03:00.0, or sim:NAME).
        dev: String,
        /// Output file.
        file: PathBuf,
        /// Stop after this many packets.
        #[arg(long)]
        count: Option<u64>,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        features: FeatureArgs,
        #[command(flatten)]
        interrupts: InterruptArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Run a configuration in Click's language (Click's `click` options:
    /// -e EXPR, -f FILE, NAME=VALUE, -h ELEMENT.HANDLER, -q, -t; `oxnet run
    /// --help`). The binary called `click` does the same.
    Run {
        /// Click's options and the configuration file.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Read or write a handler of a running router (`oxnet run -p PORT` or
    /// `-u PATH`) through its control socket: ELEMENT.NAME alone reads,
    /// with a VALUE writes. Prints what a read returned.
    Handler {
        /// The handler: ELEMENT.NAME, or a global one (list, version, classes, stop).
        handler: String,
        /// Write this value (without it: read).
        value: Option<String>,
        /// The router's Unix control socket (oxnet run -u PATH).
        #[arg(long, conflicts_with = "port")]
        socket: Option<String>,
        /// The router's TCP control port on 127.0.0.1 (oxnet run -p PORT).
        #[arg(long, short = 'p')]
        port: Option<u16>,
    },
    /// The element reference: every element class of the packet graph with
    /// its ports, processing and handlers (docs/elements.md is this output).
    Elements,
    /// Run Click's clicktest files (a file or a directory of them) with
    /// oxnet as `click`; one line per test and a summary.
    Clicktest {
        /// Test files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print the whole reason for each failure.
        #[arg(short, long)]
        verbose: bool,
        /// Seconds one test may run before it is killed and failed.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Answer ARP requests for an IPv4 address and ICMP echo requests to it
    /// (so that Linux's ping and arping can talk to oxnet over any device);
    /// everything else is dropped and counted.
    Respond {
        /// Device (tap:NAME, af_packet:IF, a PCI address, sim:NAME, ...).
        dev: String,
        /// The IPv4 address oxnet answers for, optionally with a prefix
        /// length (10.0.0.2/24; the prefix is accepted and not used).
        #[arg(long, value_parser = parse_ipv4_with_prefix)]
        ip: std::net::Ipv4Addr,
        /// Stop after this many echo replies.
        #[arg(long)]
        count: Option<u64>,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Show a device's hardware and per-queue counters, the histogram of
    /// descriptors per sent packet and the registers of the feature
    /// switches (after receiving and dropping for --seconds).
    Stats {
        /// Device (PCI address like 0000:03:00.0, or sim:NAME).
        dev: String,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Receive (and drop) on every queue for this many seconds first.
        #[arg(long, default_value_t = 0.0, value_parser = oxnet::parse_seconds)]
        seconds: f64,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        features: FeatureArgs,
    },
    /// List PCI network devices (vendor, device, bound driver, NUMA node,
    /// IOMMU group) and the Linux interfaces of this network namespace with
    /// the specs oxnet opens on them (tap:, af_packet:, af_xdp:).
    Devices,
    /// Benchmark the forwarding path: instructions per packet of driver +
    /// application at batch sizes 1..256 (callgrind, the model's cost
    /// excluded) and mempool alloc + free per packet; prints a table,
    /// writes fwd.json and fwd.svg (needs valgrind; see docs/bench.md).
    Bench(oxnet::bench::BenchArgs),
    /// TCP load on kernel sockets against an echo server: short
    /// connections (connect, send, echo, reset) or persistent ones, open
    /// loop at --rate (latency from each request's scheduled time) or
    /// closed loop; HDR latency histogram, --json. --serve-echo PORT runs
    /// the Linux epoll echo server it is compared with.
    Loadgen(oxnet::loadgen::LoadgenArgs),
    /// Bind a PCI device to vfio-pci (IOMMU, oxnet then runs without
    /// root) or give it back to its kernel driver (needs root).
    Bind {
        #[command(subcommand)]
        to: BindCommand,
    },
    /// Write a self-signed certificate and key (ECDSA P-256) as
    /// DIR/cert.pem and DIR/key.pem, for TLSServer's CERT and KEY in tests
    /// and demos.
    Cert {
        /// The directory to write to (made if missing).
        #[arg(long)]
        out: PathBuf,
        /// A name the certificate is for (a host name or an IP address);
        /// repeat for more.
        #[arg(long = "name", default_value = "localhost")]
        names: Vec<String>,
    },
    /// Prepare the machine (needs root).
    Setup {
        #[command(subcommand)]
        what: SetupCommand,
    },
}

#[derive(Subcommand)]
enum SetupCommand {
    /// Reserve N 2 MiB huge pages and mount hugetlbfs at /mnt/huge.
    Hugepages {
        /// Number of 2 MiB pages.
        count: u64,
    },
}

#[derive(Subcommand)]
enum BindCommand {
    /// Hand the device to vfio-pci (driver_override, unbind, probe); only
    /// this device is touched.
    Vfio {
        /// PCI address, e.g. 0000:03:00.0.
        address: String,
        /// Give /dev/vfio/GROUP to this user (name, uid or uid:gid) so that
        /// oxnet runs as them; they also need RLIMIT_MEMLOCK for the pinned
        /// DMA memory (`ulimit -l`).
        #[arg(long)]
        owner: Option<String>,
    },
    /// Give the device back to its kernel driver.
    Kernel {
        /// PCI address, e.g. 0000:03:00.0.
        address: String,
    },
}

/// Receive interrupts (devices bound to vfio-pci).
#[derive(Args)]
struct InterruptArgs {
    /// Sleep in epoll while idle, woken by MSI-X receive interrupts;
    /// switches to polling when the rate is high (see docs/vfio.md).
    #[arg(long)]
    interrupts: bool,
    /// Interrupt throttling: at least this many microseconds between two
    /// wake-ups of a queue.
    #[arg(long, value_name = "US", default_value_t = 0)]
    itr: u32,
}

impl InterruptArgs {
    fn apply(&self, mut config: Config) -> Config {
        config.interrupts = self.interrupts;
        config.itr_us = self.itr;
        config
    }
}

/// The NIC's hardware features as switches (82599; docs/features.md).
#[derive(Args)]
struct FeatureArgs {
    /// Queue pairs; `fwd` runs one thread per pair, pinned to a core.
    /// More than one needs --rss.
    #[arg(long, default_value_t = 1)]
    queues: u16,
    /// Receive side scaling over the queues (MRQC, RETA, RSSRK; §7.1.2.8).
    #[arg(long)]
    rss: bool,
    /// Report the NIC's IPv4/TCP/UDP checksum verdicts (RXCSUM; §7.1.6.2).
    #[arg(long)]
    rx_checksum: bool,
    /// Insert IPv4/TCP/UDP checksums in hardware (IXSM/TXSM; §7.2.5).
    #[arg(long)]
    tx_checksum: bool,
    /// TCP segmentation: off (software), single (one buffer per packet) or
    /// multi (one descriptor per segment of a chain) (§7.2.4).
    #[arg(long, default_value = "off", value_parser = parse_tso)]
    tso: TsoMode,
    /// Receive side coalescing of TCP segments (RSCCTL; §7.11).
    #[arg(long)]
    rsc: bool,
    /// Transmit head write-back instead of DD bits (TDWBAL; §7.2.3.5.2).
    #[arg(long)]
    twb: bool,
    /// Direct cache access hints (DCA_CTRL, DCA_RXCTRL/TXCTRL; §7.5).
    #[arg(long)]
    dca: bool,
    /// Largest IP packet (the 82599 driver takes 1500 only; checked
    /// against --rsc-max-descriptors).
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// RSC: receive buffers per coalesced packet (RSCCTL.MAXDESC: 1, 4, 8, 16).
    #[arg(long, default_value_t = 16)]
    rsc_max_descriptors: usize,
}

fn parse_tso(value: &str) -> Result<TsoMode, String> {
    match value {
        "off" => Ok(TsoMode::Off),
        "single" => Ok(TsoMode::Single),
        "multi" => Ok(TsoMode::Multi),
        _ => Err(format!("`{value}`: use off, single or multi")),
    }
}

impl FeatureArgs {
    fn apply(&self, mut config: Config) -> Config {
        config.rx_queues = self.queues;
        config.tx_queues = self.queues;
        config.offloads = Offloads {
            rss: self.rss,
            rx_checksum: self.rx_checksum,
            tx_checksum: self.tx_checksum,
            tso: self.tso,
            rsc: self.rsc,
            tx_head_writeback: self.twb,
            dca: self.dca,
        };
        config.mtu = self.mtu;
        config.rsc_max_descriptors = self.rsc_max_descriptors;
        config
    }

    /// For commands that use queue 0 only.
    fn apply_one_queue(&self, config: Config, command: &str) -> oxnet_driver::Result<Config> {
        if self.queues != 1 {
            return Err(oxnet_driver::Error::Config(format!(
                "--queues {}: `oxnet {command}` uses one queue; `oxnet fwd` runs one thread per queue",
                self.queues
            )));
        }
        Ok(self.apply(config))
    }
}

#[derive(Args)]
struct DeviceArgs {
    /// Packets per batch (rx_batch / tx_batch).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Descriptors per RX and TX ring (a power of two, 64..=4096).
    #[arg(long, default_value_t = 512)]
    ring: usize,
    /// DMA memory: huge (2 MiB huge pages, needs root) or plain. Default:
    /// huge for PCI devices, plain for simulated ones.
    #[arg(long)]
    memory: Option<MemoryKind>,
    /// Enable IEEE 802.3x flow control (PAUSE frames).
    #[arg(long)]
    flow_control: bool,
    /// Leave promiscuous mode off.
    #[arg(long)]
    no_promisc: bool,
    /// Legacy VirtIO: reach the I/O BAR through sysfs pread/pwrite instead
    /// of in/out instructions.
    #[arg(long)]
    no_port_io: bool,
    /// tap:NAME devices: give the kernel side this IPv4 address (A/N) and
    /// bring it up, so the host talks to oxnet through it (docs/tap.md).
    #[arg(long, value_name = "A/N")]
    tap_ip: Option<String>,
}

#[derive(Args)]
struct RunArgs {
    /// Stop after this many seconds.
    #[arg(long, value_parser = oxnet::parse_seconds)]
    seconds: Option<f64>,
    /// Print one JSON object with the final statistics as the last line.
    #[arg(long)]
    json: bool,
    /// Do not print statistics every second.
    #[arg(long)]
    quiet: bool,
}

impl DeviceArgs {
    fn config(&self) -> Config {
        Config {
            batch_size: self.batch,
            rx_ring_size: self.ring,
            tx_ring_size: self.ring,
            memory: self.memory,
            flow_control: self.flow_control,
            promiscuous: !self.no_promisc,
            port_io: !self.no_port_io,
            tap_ip: self.tap_ip.clone(),
            ..Config::default()
        }
    }
}

impl RunArgs {
    fn options(&self) -> RunOptions {
        RunOptions {
            seconds: self.seconds,
            json: self.json,
            live: !self.quiet,
        }
    }
}

fn run(cli: Cli) -> oxnet_driver::Result<bool> {
    match cli.command {
        Command::Demo {
            device,
            run,
            size,
            count,
            pcap,
        } => {
            let mut options = run.options();
            if options.seconds.is_none() && count.is_none() {
                options.seconds = Some(5.0);
            }
            demo::main(&DemoOptions {
                size,
                count,
                config: device.config(),
                pcap,
                run: options,
            })
        }
        Command::Fwd {
            dev1,
            dev2,
            device,
            features,
            interrupts,
            run,
        } => {
            let config = interrupts.apply(features.apply(device.config()));
            if features.queues > 1 {
                return oxnet::apps::multiqueue::main(&dev1, &dev2, &config, &run.options());
            }
            commands::fwd(&dev1, &dev2, &config, &run.options()).map(|()| true)
        }
        Command::Pktgen {
            dev,
            size,
            count,
            rate,
            device,
            features,
            run,
        } => {
            let config = features.apply_one_queue(device.config(), "pktgen")?;
            commands::pktgen(&dev, &config, size, count, rate, &run.options()).map(|()| true)
        }
        Command::Clicktest {
            paths,
            verbose,
            timeout,
        } => oxnet::clicktest::main(&paths, verbose, std::time::Duration::from_secs(timeout))
            .map_err(oxnet_driver::Error::Config)
            .map(|ok| {
                if !ok {
                    std::process::exit(1);
                }
                true
            }),
        Command::Run { args } => std::process::exit(i32::from(oxnet::run::main(&args))),
        Command::Handler {
            handler,
            value,
            socket,
            port,
        } => {
            let endpoint = match (socket, port) {
                (Some(path), _) => oxnet::handler::Endpoint::Unix(path),
                (None, Some(p)) => oxnet::handler::Endpoint::Port(p),
                (None, None) => {
                    match std::env::var("OXNET_SOCKET") {
                        Ok(path) => oxnet::handler::Endpoint::Unix(path),
                        Err(_) => {
                            eprintln!("oxnet handler: say where the router listens: --socket PATH, --port PORT or OXNET_SOCKET");
                            std::process::exit(2);
                        }
                    }
                }
            };
            match oxnet::handler::call(&endpoint, &handler, value.as_deref()) {
                Ok(out) => {
                    print!("{out}");
                    Ok(true)
                }
                Err(e) => {
                    eprintln!("{handler}: {e}");
                    std::process::exit(1);
                }
            }
        }
        Command::Elements => {
            print!("{}", oxnet_graph::elements::reference());
            Ok(true)
        }
        Command::Respond {
            dev,
            ip,
            count,
            device,
            run,
        } => commands::respond(&dev, ip, &device.config(), count, &run.options()).map(|()| true),
        Command::Pcap {
            dev,
            file,
            count,
            device,
            features,
            interrupts,
            run,
        } => {
            let config = interrupts.apply(features.apply_one_queue(device.config(), "pcap")?);
            commands::pcap(&dev, &file, &config, count, &run.options()).map(|()| true)
        }
        Command::Stats {
            dev,
            json,
            seconds,
            device,
            features,
        } => oxnet::apps::stats::main(&dev, &features.apply(device.config()), seconds, json).map(|()| true),
        Command::Devices => {
            print!("{}", oxnet::setup::devices_table()?);
            println!();
            print!("{}", oxnet::setup::interfaces_table(&oxnet_driver::netif::list()));
            Ok(true)
        }
        Command::Bench(args) => oxnet::bench::main(&args),
        Command::Loadgen(args) => oxnet::loadgen::main(&args).map_err(oxnet_driver::Error::Config),
        Command::Bind {
            to: BindCommand::Vfio { address, owner },
        } => {
            println!("{}", oxnet::setup::bind_vfio(&address, owner.as_deref())?);
            Ok(true)
        }
        Command::Bind {
            to: BindCommand::Kernel { address },
        } => {
            println!("{}", oxnet::setup::bind_kernel(&address)?);
            Ok(true)
        }
        Command::Cert { out, names } => oxnet::cert::main(&out, &names)
            .map(|()| true)
            .map_err(oxnet_driver::Error::Config),
        Command::Setup {
            what: SetupCommand::Hugepages { count },
        } => {
            println!("{}", oxnet::setup::hugepages(count)?);
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    // The stack's elements join the graph's library (docs/stack.md).
    oxnet_apps::register();
    // Called as `click` (a link to this binary): Click's command line.
    let argv: Vec<String> = std::env::args().collect();
    let called = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default();
    if called == "click" {
        return ExitCode::from(oxnet::run::main(&argv[1..]));
    }
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("oxnet: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// "10.0.0.2" or "10.0.0.2/24" (prefix 0..=32).
fn parse_ipv4_with_prefix(text: &str) -> std::result::Result<std::net::Ipv4Addr, String> {
    let (address, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    if let Some(p) = prefix {
        match p.parse::<u8>() {
            Ok(n) if n <= 32 => {}
            _ => return Err(format!("'{p}' is not a prefix length (0..=32)")),
        }
    }
    address
        .parse()
        .map_err(|_| format!("'{address}' is not an IPv4 address (like 10.0.0.2 or 10.0.0.2/24)"))
}
