//! The stack's fuzz targets in `cargo test` (docs/fuzzing.md): every file
//! of `fuzz/corpus/TARGET/` and `fuzz/regressions/TARGET/` runs through
//! the target's body (`oxnet_stack::fuzzing`, enabled for the tests by
//! the crate's dev-dependency on itself), then a fixed, seeded number of
//! random and mutated inputs. Regressions of bugs not fixed yet are
//! listed in KNOWN_FAILING: they must still fail (so that a fix is
//! noticed and the entry removed), and do not fail the test.
//!
//! A long run of the same bodies without libFuzzer (for a machine without
//! cargo-fuzz): `cargo test -p oxnet-stack --release --test fuzz_replay --
//! --ignored`, with `OXNET_FUZZ_RUNS` inputs per target (default 100 000;
//! a tenth for the targets with a router), `OXNET_FUZZ_SEED`, and
//! `OXNET_FUZZ_TARGET` to run one target only. An input that panics is
//! written to the temporary directory, its path in the failure.

use oxnet_stack::fuzzing::{run, TARGETS};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// Regression files (`TARGET/NAME`) whose bug is not fixed yet.
const KNOWN_FAILING: &[&str] = &[
    // (one-byte-segments-drain-the-pool was here: small segments are now
    // copied onto the previous buffer of the receive queue, TCPProcessData.)
];

fn files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz"))
        .join(kind)
        .join(target);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn name(target: &str, path: &std::path::Path) -> String {
    format!("{target}/{}", path.file_name().unwrap().to_string_lossy())
}

/// xorshift64*: a fixed sequence, so that a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A random input: a corpus file with a few bytes changed, cut, grown
/// or followed by part of another, or random bytes.
fn mutated(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut data = match rng.next() % 3 {
        0 | 1 if !corpus.is_empty() => corpus[(rng.next() % corpus.len() as u64) as usize].clone(),
        _ => {
            let len = (rng.next() % 600) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        }
    };
    for _ in 0..1 + rng.next() % 8 {
        match rng.next() % 8 {
            0 => data.truncate((rng.next() % (data.len() as u64 + 1)) as usize),
            1 => {
                let extra = (rng.next() % 32) as usize;
                data.extend((0..extra).map(|_| rng.next() as u8));
            }
            // The tail of another corpus file: for the targets whose input
            // is a sequence of operations, one sequence after another.
            2 if !corpus.is_empty() => {
                let other = &corpus[(rng.next() % corpus.len() as u64) as usize];
                let from = (rng.next() % (other.len() as u64 + 1)) as usize;
                data.extend_from_slice(&other[from..]);
            }
            _ if !data.is_empty() => {
                let at = (rng.next() % data.len() as u64) as usize;
                data[at] = rng.next() as u8;
            }
            _ => {}
        }
    }
    data
}

/// `runs` inputs of wire headers and `router_runs` of each target that
/// builds a router per input (which costs ~15 ms: its packet pool); only
/// for `only` if given.
fn random_run(runs: u64, router_runs: u64, seed: u64, only: Option<&str>) {
    for (t, target) in TARGETS.iter().enumerate() {
        if only.is_some_and(|o| o != *target) {
            continue;
        }
        let runs = if *target == "stack_wire_headers" {
            runs
        } else {
            router_runs
        };
        let corpus: Vec<Vec<u8>> = files("corpus", target)
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        let mut rng = Rng(seed + t as u64);
        let start = std::time::Instant::now();
        for i in 0..runs {
            let data = mutated(&mut rng, &corpus);
            if catch_unwind(AssertUnwindSafe(|| run(target, &data))).is_err() {
                let path = std::env::temp_dir().join(format!("oxnet-fuzz-{target}-{seed}-{i}"));
                std::fs::write(&path, &data).unwrap();
                panic!("{target}: input {i} panicked; written to {}", path.display());
            }
        }
        eprintln!("{target}: {runs} inputs in {:.1?}", start.elapsed());
    }
}

/// Every corpus file and every kept crash replays; each target has a
/// corpus.
#[test]
fn corpus_and_regressions_replay() {
    for target in TARGETS {
        let corpus = files("corpus", target);
        assert!(!corpus.is_empty(), "fuzz/corpus/{target} is empty");
        for path in &corpus {
            run(target, &std::fs::read(path).unwrap());
        }
        for path in files("regressions", target) {
            let data = std::fs::read(&path).unwrap();
            let known = KNOWN_FAILING.contains(&name(target, &path).as_str());
            if known {
                eprintln!(
                    "{}: known failing; the panic message that follows is expected",
                    name(target, &path)
                );
            }
            let failed = catch_unwind(AssertUnwindSafe(|| run(target, &data))).is_err();
            assert_eq!(
                failed,
                known,
                "{}: {}",
                name(target, &path),
                if known {
                    "passes now: remove it from KNOWN_FAILING"
                } else {
                    "fails"
                }
            );
        }
    }
}

/// A bounded random run per target (seeded): 2000 inputs of wire
/// headers, 50 of each other target (under 10 s in a debug build).
#[test]
fn seeded_random_inputs() {
    random_run(2000, 50, 0x0A0E_5700, None);
}

/// The long run (see the file's doc).
#[test]
#[ignore]
fn long_random_run() {
    let runs = std::env::var("OXNET_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let seed = std::env::var("OXNET_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED);
    let only = std::env::var("OXNET_FUZZ_TARGET").ok();
    random_run(runs, runs / 10, seed, only.as_deref());
}
