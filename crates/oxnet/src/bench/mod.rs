//! `oxnet bench`: instructions per packet of the forwarding path (driver +
//! application, the model kept out of the count) at batch sizes 1..256, and
//! mempool alloc + free per packet. See docs/bench.md.
//!
//! Method (DESIGN.md, "Performance method"): a deterministic count, not a
//! clock. `oxnet bench` re-runs its own executable (`oxnet bench fwd-inner`,
//! hidden) under `valgrind --tool=callgrind`, collecting only inside
//! `measured_forward_step` (one `Forwarder::step`), and not inside the
//! model: the driver reaches it through the bench's register wrapper, whose
//! two functions into the model switch collection off again
//! (`--toggle-collect`, see fwd.rs). Nothing is subtracted; the run fails if
//! any oxnet_sim function has a cost. Polls meet a seeded mix of empty
//! polls, partial batches and late tail writes ([`fwd::Mix`]). The anchors are ixy's published
//! figures (127 instructions per packet for the C driver, 209 for ixy.rs, at
//! batch 32); they are not measured here.

pub mod callgrind;
pub mod features;
pub mod fwd;
pub mod mempool;
pub mod report;

use clap::{Args, Subcommand};
use oxnet_driver::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// ixy's C driver, instructions per packet at batch 32 (published).
pub const IXY_C_INSTRUCTIONS: f64 = 127.0;
/// ixy's C driver, cycles per packet at batch 32 (published).
pub const IXY_C_CYCLES: f64 = 94.0;
/// ixy.rs, instructions per packet at batch 32 (published).
pub const IXY_RS_INSTRUCTIONS: f64 = 209.0;
/// Our target, instructions per packet at batch 32.
pub const TARGET_INSTRUCTIONS: f64 = 100.0;

/// `oxnet bench` options.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub inner: Option<InnerCommand>,
    /// Directory for fwd.json, fwd.svg and the callgrind output files.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Packets forwarded (measured) per batch size under callgrind. The
    /// count is deterministic; more packets only average the warm-up away.
    #[arg(long, default_value_t = 200_000)]
    pub packets: u64,
    /// Batch sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 8, 16, 32, 64, 128, 256])]
    pub batches: Vec<usize>,
    /// Wall-clock repeats per batch size (the median is reported); 0 skips
    /// the wall clock.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Packets allocated and freed per mempool measurement.
    #[arg(long, default_value_t = 200_000)]
    pub mempool_packets: u64,
}

/// The processes `oxnet bench` runs (under callgrind or not), and `oxnet
/// bench features`.
#[derive(Subcommand, Debug, Clone)]
pub enum InnerCommand {
    /// Instructions and descriptors per packet of a TCP-like bulk stream
    /// for each combination of TSO (off/single/multi) x RSC x TX head
    /// write-back, and the cost of the Mutex of `oxnet fwd --queues N`;
    /// writes features.json (needs valgrind; see docs/bench.md).
    Features {
        /// Directory for features.json and the callgrind output files.
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
        /// 64 KiB messages (45 wire packets each) measured per combination.
        #[arg(long, default_value_t = 400)]
        messages: u64,
        /// Packets forwarded (measured) by each forwarding loop.
        #[arg(long, default_value_t = 200_000)]
        packets: u64,
    },
    /// Send and receive --messages messages inside measured_features_tx/rx.
    #[command(hide = true)]
    FeaturesInner {
        #[arg(long)]
        tso: String,
        #[arg(long)]
        rsc: bool,
        #[arg(long)]
        twb: bool,
        #[arg(long)]
        messages: u64,
    },
    /// Forward --packets packets with Forwarder::step (--plain) or the
    /// Mutex step of `fwd --queues` (--mutex).
    #[command(hide = true)]
    FeaturesFwdInner {
        #[arg(long)]
        plain: bool,
        #[arg(long)]
        mutex: bool,
        #[arg(long)]
        packets: u64,
    },
    /// The graph's forwarding cost: `oxnet fwd`'s loop and the graph
    /// `FromDevice -> ToDevice` (conf/fwd.click, one direction) on the same
    /// ports, instructions per packet of each under callgrind and the
    /// difference; writes graph-fwd.json (needs valgrind).
    Graph {
        /// Directory for graph-fwd.json and the callgrind output files.
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
        /// Packets forwarded (measured) by each.
        #[arg(long, default_value_t = 200_000)]
        packets: u64,
        /// Batch size (BURST of the graph's elements).
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Numbers of Null elements between FromDevice and ToDevice, each
        /// measured (ClickNF's Figure 7 with I/O, in instructions).
        #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1, 5, 10, 50])]
        nulls: Vec<usize>,
    },
    /// Forward --packets packets at --batch through the graph inside
    /// measured_graph_step.
    #[command(hide = true)]
    GraphFwdInner {
        #[arg(long)]
        batch: usize,
        #[arg(long)]
        packets: u64,
        #[arg(long, default_value_t = 0)]
        nulls: usize,
    },
    /// Forward --packets packets at --batch inside measured_forward_loop.
    #[command(hide = true)]
    FwdInner {
        #[arg(long)]
        batch: usize,
        #[arg(long)]
        packets: u64,
        /// Accepted for compatibility: register accesses are always counted.
        #[arg(long)]
        count_registers: bool,
    },
    /// Allocate and free --packets packets, --batch at a time (or one at a
    /// time with alloc() and drop with --single).
    #[command(hide = true)]
    MempoolInner {
        #[arg(long)]
        batch: usize,
        #[arg(long)]
        packets: u64,
        #[arg(long)]
        single: bool,
    },
}

/// One batch size of the forwarding benchmark.
#[derive(Debug, Clone)]
pub struct FwdResult {
    pub batch: usize,
    pub run: fwd::FwdRun,
    /// Instructions collected inside measured_forward_step with the model
    /// kept out (nothing subtracted): driver + forwarder + mempool.
    pub collected_ir: u64,
    /// Wall-clock Mpps of the measured polls (model included), one per repeat.
    pub wall_mpps: Vec<f64>,
}

impl FwdResult {
    pub fn packets(&self) -> f64 {
        self.run.forwarded.max(1) as f64
    }
    pub fn driver_app_per_packet(&self) -> f64 {
        self.collected_ir as f64 / self.packets()
    }
    pub fn wall_median(&self) -> Option<f64> {
        median(&self.wall_mpps)
    }
}

/// One mempool measurement.
#[derive(Debug, Clone)]
pub struct MempoolResult {
    /// Packets per call (1 with `single`).
    pub batch: usize,
    /// `alloc()` + drop instead of `alloc_batch` + `clear`.
    pub single: bool,
    pub packets: u64,
    pub collected_ir: u64,
    /// Wall-clock ns per packet, same thread (median of repeats).
    pub wall_ns: Option<f64>,
    /// Wall-clock ns per packet, freed on another thread (median).
    pub cross_thread_ns: Option<f64>,
}

impl MempoolResult {
    pub fn per_packet(&self) -> f64 {
        self.collected_ir as f64 / self.packets.max(1) as f64
    }
}

/// Where the driver + application instructions go at one batch size: self
/// cost per function, the model's functions left out.
#[derive(Debug, Clone)]
pub struct Breakdown {
    pub batch: usize,
    /// (function, instructions per packet).
    pub items: Vec<(String, f64)>,
}

/// Everything one `oxnet bench` measured.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub valgrind: String,
    pub fwd: Vec<FwdResult>,
    pub mempool: Vec<MempoolResult>,
    pub breakdown: Option<Breakdown>,
}

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// `oxnet bench ...`: the outer command or one of the inner ones.
pub fn main(args: &BenchArgs) -> Result<bool> {
    match &args.inner {
        Some(InnerCommand::FwdInner {
            batch,
            packets,
            count_registers: _,
        }) => {
            let r = fwd::run(*batch, *packets)?;
            println!("{}", r.to_line());
            Ok(true)
        }
        Some(InnerCommand::GraphFwdInner { batch, packets, nulls }) => {
            let r = fwd::run_graph(*batch, *packets, *nulls)?;
            println!("{}", r.to_line());
            Ok(true)
        }
        Some(InnerCommand::Graph {
            out,
            packets,
            batch,
            nulls,
        }) => graph_outer(out, *packets, *batch, nulls),
        Some(InnerCommand::MempoolInner { batch, packets, single }) => {
            let mode = if *single {
                mempool::Mode::Single
            } else {
                mempool::Mode::Batch
            };
            let r = mempool::run(mode, *batch, *packets)?;
            println!("{}", r.to_line());
            Ok(true)
        }
        Some(InnerCommand::Features { out, messages, packets }) => features_outer(out, *messages, *packets),
        Some(InnerCommand::FeaturesInner {
            tso,
            rsc,
            twb,
            messages,
        }) => {
            let combination = features::Combination {
                tso: features::parse_tso(tso)?,
                rsc: *rsc,
                twb: *twb,
            };
            let r = features::run_stream(combination, *messages)?;
            println!("{}", r.to_line());
            Ok(true)
        }
        Some(InnerCommand::FeaturesFwdInner { plain, mutex, packets }) => {
            let kind = match (*plain, *mutex) {
                (true, false) => features::FwdKind::Plain,
                (false, true) => features::FwdKind::Mutex,
                _ => return Err(Error::Config("features-fwd-inner: one of --plain or --mutex".into())),
            };
            let r = features::run_fwd(kind, *packets)?;
            println!("{}", r.to_line());
            Ok(true)
        }
        None => outer(args),
    }
}

/// `oxnet bench graph`: the `oxnet fwd` loop and the graph on the same
/// ports and arrivals, instructions per packet of each, then the graph
/// with N Null elements in the path (the cost of one element with I/O);
/// graph-fwd.json. False if a run was not clean (every packet captured
/// once, in order).
fn graph_outer(out: &Path, packets: u64, batch: usize, nulls: &[usize]) -> Result<bool> {
    callgrind::check_installed()?;
    let exe = std::env::current_exe().map_err(|e| Error::Io(format!("cannot find the oxnet executable: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| Error::Io(format!("cannot create {}: {e}", out.display())))?;
    // (label, nulls or None for the fwd loop)
    let mut runs: Vec<(String, Option<usize>)> = vec![("oxnet fwd loop".to_string(), None)];
    let mut nulls = nulls.to_vec();
    if !nulls.contains(&0) {
        nulls.insert(0, 0);
    }
    nulls.sort_unstable();
    nulls.dedup();
    for &n in &nulls {
        runs.push((format!("graph FromDevice -> {n} x Null -> ToDevice"), Some(n)));
    }
    let mut rows = Vec::new();
    for (label, n) in &runs {
        eprint!("oxnet bench graph: {label} under callgrind ... ");
        let (inner, symbol) = match n {
            None => ("fwd-inner", "measured_forward_step"),
            Some(_) => ("graph-fwd-inner", "measured_graph_step"),
        };
        let out_file = out.join(format!("callgrind.{inner}.b{batch}.n{}.out", n.unwrap_or(0)));
        let mut values = vec![("batch", batch.to_string()), ("packets", packets.to_string())];
        if let Some(n) = n {
            values.push(("nulls", n.to_string()));
        }
        let args = inner_args(&["bench", inner], &values);
        let pattern = format!("*::{symbol}");
        let stdout = callgrind::run_toggles(&exe, &args, &[pattern.as_str(), fwd::TOGGLE_SYMBOLS[1]], &out_file)?;
        let run = fwd::FwdRun::parse(&stdout)
            .ok_or_else(|| Error::Device(format!("{inner} printed no result line: {stdout}")))?;
        let annotation = callgrind::annotate(&out_file, false)?;
        let leaked = callgrind::model_functions_with_cost(&annotation);
        if !leaked.is_empty() {
            return Err(Error::Device(format!(
                "the model's code was counted: {}",
                leaked.join(", ")
            )));
        }
        let per_packet = annotation.total as f64 / run.forwarded.max(1) as f64;
        eprintln!("{per_packet:.1} instructions/packet");
        rows.push((label.clone(), *n, per_packet, run));
    }
    let fwd_ipp = rows[0].2;
    let graph_ipp = rows[1].2;
    println!("| path | instructions / packet (batch {batch}) | clean |");
    println!("|---|---|---|");
    for (label, _, ipp, run) in &rows {
        println!("| {label} | {ipp:.1} | {} |", run.clean());
    }
    println!(
        "graph - fwd loop: {:+.1} instructions per packet (goal: at most +10; the fwd loop also touches one byte per packet)",
        graph_ipp - fwd_ipp
    );
    let mut per_null = Vec::new();
    for (_, n, ipp, _) in &rows[2..] {
        if let Some(n) = n {
            let each = (ipp - graph_ipp) / *n as f64;
            println!("{n} x Null: {each:.2} instructions per packet per Null");
            per_null.push(format!(
                "{{\"nulls\": {n}, \"per_packet\": {ipp:.2}, \"per_null\": {each:.3}}}"
            ));
        }
    }
    let clean = rows.iter().all(|r| r.3.clean());
    let json = format!(
        "{{\"batch\": {batch}, \"packets\": {packets}, \"fwd_loop_per_packet\": {fwd_ipp:.2}, \"graph_per_packet\": {graph_ipp:.2}, \"difference\": {:.2}, \"nulls\": [{}], \"clean\": {clean}}}\n",
        graph_ipp - fwd_ipp,
        per_null.join(", ")
    );
    let path = out.join("graph-fwd.json");
    std::fs::write(&path, json).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    println!("wrote {}", path.display());
    Ok(clean)
}

/// `oxnet bench features`: table, features.json; false if a run was not clean.
fn features_outer(out: &Path, messages: u64, packets: u64) -> Result<bool> {
    let valgrind = callgrind::check_installed()?;
    if cfg!(debug_assertions) {
        eprintln!(
            "oxnet bench features: warning: this is a debug build; the counts mean little. \
             Build with `cargo build --release -p oxnet`."
        );
    }
    if messages == 0 || packets == 0 {
        return Err(Error::Config("--messages and --packets must be at least 1".into()));
    }
    let exe = std::env::current_exe().map_err(|e| Error::Io(format!("cannot find the oxnet executable: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| Error::Io(format!("cannot create {}: {e}", out.display())))?;
    let report = features::outer(&exe, valgrind, out, messages, packets)?;
    print!("{}", features::table(&report));
    let json_path = out.join("features.json");
    std::fs::write(&json_path, features::json(&report))
        .map_err(|e| Error::Io(format!("cannot write {}: {e}", json_path.display())))?;
    println!("wrote {}", json_path.display());
    let ok = report.rows.iter().all(|r| r.run.clean()) && report.fwd.iter().all(|f| f.clean());
    if !ok {
        eprintln!("oxnet bench features: some runs were not clean (see the bytes / check columns)");
    }
    Ok(ok)
}

fn inner_args(words: &[&str], values: &[(&str, String)]) -> Vec<String> {
    let mut v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
    for (k, val) in values {
        v.push(format!("--{k}"));
        v.push(val.clone());
    }
    v
}

fn run_native(exe: &Path, args: &[String]) -> Result<String> {
    let output = Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| Error::Io(format!("cannot run {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(Error::Device(format!(
            "{} {} failed: {}",
            exe.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn outer(args: &BenchArgs) -> Result<bool> {
    let valgrind = callgrind::check_installed()?;
    if cfg!(debug_assertions) {
        eprintln!(
            "oxnet bench: warning: this is a debug build; the counts mean little. \
             Build with `cargo build --release -p oxnet`."
        );
    }
    let exe = std::env::current_exe().map_err(|e| Error::Io(format!("cannot find the oxnet executable: {e}")))?;
    std::fs::create_dir_all(&args.out).map_err(|e| Error::Io(format!("cannot create {}: {e}", args.out.display())))?;
    let mut batches = args.batches.clone();
    batches.sort_unstable();
    batches.dedup();
    if batches.iter().any(|&b| b == 0 || b > 256) {
        return Err(Error::Config("batch sizes must be within 1..=256".into()));
    }
    let started = std::time::Instant::now();

    let mut fwd_results = Vec::new();
    let mut breakdown = None;
    for &batch in &batches {
        eprint!("oxnet bench: fwd batch {batch:>3} under callgrind ... ");
        let out_file = args.out.join(format!("callgrind.fwd.b{batch}.out"));
        let inner = inner_args(
            &["bench", "fwd-inner", "--count-registers"],
            &[("batch", batch.to_string()), ("packets", args.packets.to_string())],
        );
        let stdout = callgrind::run_toggles(&exe, &inner, &fwd::TOGGLE_SYMBOLS, &out_file)?;
        let run = fwd::FwdRun::parse(&stdout)
            .ok_or_else(|| Error::Device(format!("fwd-inner printed no result line: {stdout}")))?;
        let annotation = callgrind::annotate(&out_file, false)?;
        // The model must not be in the count: no function of oxnet_sim may
        // have a cost, and the toggle patterns must have matched (something
        // was collected, inside the measured step).
        let leaked = callgrind::model_functions_with_cost(&annotation);
        if !leaked.is_empty() {
            return Err(Error::Device(format!(
                "the model's code was counted in {} (toggle patterns {:?} did not keep it out): {}",
                out_file.display(),
                fwd::TOGGLE_SYMBOLS,
                leaked.join(", ")
            )));
        }
        if !annotation
            .entries
            .iter()
            .any(|e| e.ir > 0 && e.function().ends_with(fwd::MEASURED_SYMBOL))
        {
            return Err(Error::Device(format!(
                "nothing collected inside {} in {}: did the symbol change?",
                fwd::MEASURED_SYMBOL,
                out_file.display()
            )));
        }
        let result = FwdResult {
            batch,
            collected_ir: annotation.total,
            run,
            wall_mpps: Vec::new(),
        };
        eprintln!(
            "{:.1} instructions/packet (driver + app), {:.1} s so far",
            result.driver_app_per_packet(),
            started.elapsed().as_secs_f64()
        );
        if batch == 32 || (breakdown.is_none() && batch == *batches.last().unwrap()) {
            breakdown = Some(report::breakdown(&out_file, &result)?);
        }
        fwd_results.push(result);
    }

    if args.repeats > 0 {
        eprint!("oxnet bench: fwd wall clock ({} repeats) ...", args.repeats);
        for r in &mut fwd_results {
            for _ in 0..args.repeats {
                let inner = inner_args(
                    &["bench", "fwd-inner"],
                    &[("batch", r.batch.to_string()), ("packets", args.packets.to_string())],
                );
                let stdout = run_native(&exe, &inner)?;
                if let Some(w) = fwd::FwdRun::parse(&stdout) {
                    if w.seconds > 0.0 {
                        r.wall_mpps.push(w.forwarded as f64 / w.seconds / 1e6);
                    }
                }
            }
        }
        eprintln!(" done");
    }

    let mut mempool_results = Vec::new();
    eprint!("oxnet bench: mempool under callgrind ...");
    let mut configs: Vec<(usize, bool)> = vec![(1, true)];
    configs.extend(batches.iter().map(|&b| (b, false)));
    for (batch, single) in configs {
        let (name, symbol) = if single {
            ("single".to_string(), mempool::SINGLE_SYMBOL)
        } else {
            (format!("b{batch}"), mempool::BATCH_SYMBOL)
        };
        let out_file = args.out.join(format!("callgrind.mempool.{name}.out"));
        let mut words = vec!["bench", "mempool-inner"];
        if single {
            words.push("--single");
        }
        let inner = inner_args(
            &words,
            &[
                ("batch", batch.to_string()),
                ("packets", args.mempool_packets.to_string()),
            ],
        );
        let stdout = callgrind::run(&exe, &inner, symbol, &out_file)?;
        let run = mempool::MempoolRun::parse(&stdout)
            .ok_or_else(|| Error::Device(format!("mempool-inner printed no result line: {stdout}")))?;
        let annotation = callgrind::annotate(&out_file, true)?;
        let mode = if single {
            mempool::Mode::Single
        } else {
            mempool::Mode::Batch
        };
        let mut wall = Vec::new();
        let mut cross = Vec::new();
        for _ in 0..args.repeats {
            let w = mempool::run(mode, batch, args.mempool_packets)?;
            wall.push(w.seconds * 1e9 / w.packets.max(1) as f64);
            if !single {
                cross.push(mempool::cross_thread(batch, args.mempool_packets)?);
            }
        }
        mempool_results.push(MempoolResult {
            batch,
            single,
            packets: run.packets,
            collected_ir: annotation.total,
            wall_ns: median(&wall),
            cross_thread_ns: median(&cross),
        });
    }
    eprintln!(" done ({:.1} s in all)", started.elapsed().as_secs_f64());

    let report = BenchReport {
        valgrind,
        fwd: fwd_results,
        mempool: mempool_results,
        breakdown,
    };
    print!("{}", report::table(&report));
    let json_path = args.out.join("fwd.json");
    std::fs::write(&json_path, report::json(&report))
        .map_err(|e| Error::Io(format!("cannot write {}: {e}", json_path.display())))?;
    let svg_path = args.out.join("fwd.svg");
    std::fs::write(&svg_path, report::svg(&report))
        .map_err(|e| Error::Io(format!("cannot write {}: {e}", svg_path.display())))?;
    println!("wrote {} and {}", json_path.display(), svg_path.display());

    // A run whose end-to-end check failed is not a measurement.
    let ok = report.fwd.iter().all(|r| r.run.clean());
    if !ok {
        eprintln!("oxnet bench: some runs were not clean (see the checks column)");
    }
    Ok(ok)
}
