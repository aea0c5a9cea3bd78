//! `oxnet`: the command line. See `oxnet --help`.

use clap::{Args, Parser, Subcommand};
use oxnet::commands::{self, RunOptions};
use oxnet::demo::{self, DemoOptions};
use oxnet_driver::{Config, MemoryKind};
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
        run: RunArgs,
    },
    /// List PCI network devices: vendor, device, bound driver, NUMA node,
    /// IOMMU group.
    Devices,
    /// Benchmark the forwarding path: instructions per packet of driver +
    /// application at batch sizes 1..256 (callgrind, the model's cost
    /// excluded) and mempool alloc + free per packet; prints a table,
    /// writes fwd.json and fwd.svg (needs valgrind; see docs/bench.md).
    Bench(oxnet::bench::BenchArgs),
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
}

#[derive(Args)]
struct RunArgs {
    /// Stop after this many seconds.
    #[arg(long)]
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
            run,
        } => commands::fwd(&dev1, &dev2, &device.config(), &run.options()).map(|()| true),
        Command::Pktgen {
            dev,
            size,
            count,
            rate,
            device,
            run,
        } => commands::pktgen(&dev, &device.config(), size, count, rate, &run.options()).map(|()| true),
        Command::Pcap {
            dev,
            file,
            count,
            device,
            run,
        } => commands::pcap(&dev, &file, &device.config(), count, &run.options()).map(|()| true),
        Command::Devices => {
            print!("{}", oxnet::setup::devices_table()?);
            Ok(true)
        }
        Command::Bench(args) => oxnet::bench::main(&args),
        Command::Setup {
            what: SetupCommand::Hugepages { count },
        } => {
            println!("{}", oxnet::setup::hugepages(count)?);
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("oxnet: error: {e}");
            ExitCode::FAILURE
        }
    }
}
