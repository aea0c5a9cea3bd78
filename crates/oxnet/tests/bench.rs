//! `oxnet bench` under callgrind (valgrind comes from scripts/install-deps.sh):
//! the model is kept out of the count (no function of oxnet_sim has a cost),
//! the count is the same on every run, and the polls meet the stated mix of
//! empty polls, partial batches and late tail writes. Short runs (a few
//! thousand packets, one batch size): the figures themselves are in
//! docs/bench.md, from a release build.

mod common;
use common::{oxnet, text};
use std::path::{Path, PathBuf};
use std::process::Command;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oxnet-test-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `"key": N` values of fwd.json's forward rows, in order.
fn numbers(json: &str, key: &str) -> Vec<u64> {
    let pattern = format!("\"{key}\": ");
    json.match_indices(&pattern)
        .map(|(i, _)| {
            let rest = &json[i + pattern.len()..];
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            rest[..end]
                .parse()
                .unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
        })
        .collect()
}

fn run_bench(dir: &Path) -> String {
    let o = oxnet(&[
        "bench",
        "--batches",
        "8",
        "--packets",
        "3000",
        "--repeats",
        "0",
        "--mempool-packets",
        "256",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "oxnet bench failed: {}", text(&o.stderr));
    std::fs::read_to_string(dir.join("fwd.json")).expect("fwd.json written")
}

/// `callgrind_annotate` self costs of the functions whose name contains
/// `needle`, summed.
fn annotated_cost(file: &Path, needle: &str) -> u64 {
    let o = Command::new("callgrind_annotate")
        .args(["--inclusive=no", "--threshold=100", "--auto=no"])
        .arg(file)
        .output()
        .expect("callgrind_annotate runs (valgrind is installed by scripts/install-deps.sh)");
    assert!(o.status.success(), "callgrind_annotate: {}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.split_whitespace().next()?.replace(',', "").parse::<u64>().ok())
        .sum()
}

#[test]
fn the_count_leaves_the_model_out_and_is_the_same_every_run() {
    let (a, b) = (out_dir("a"), out_dir("b"));
    let first = run_bench(&a);
    let second = run_bench(&b);

    // Deterministic: the same instructions, packets and polls both times.
    let ir = numbers(&first, "collected_ir");
    assert_eq!(ir.len(), 1 + 2, "one forward row, two mempool rows: {first}");
    assert!(ir[0] > 0, "something was collected");
    assert_eq!(
        ir,
        numbers(&second, "collected_ir"),
        "the count differs between two runs"
    );
    for key in ["packets", "steps", "empty_steps", "partial_steps", "held_tails"] {
        assert_eq!(
            numbers(&first, key),
            numbers(&second, key),
            "{key} differs between runs"
        );
    }

    // Nothing of the model in the profile, checked here independently of
    // the command's own check.
    let profile = a.join("callgrind.fwd.b8.out");
    assert_eq!(annotated_cost(&profile, "oxnet_sim"), 0, "model code was counted");
    assert!(
        annotated_cost(&profile, "rx_batch") > 0,
        "the driver's rx_batch was counted"
    );
    assert!(
        annotated_cost(&profile, "tx_batch") > 0,
        "the driver's tx_batch was counted"
    );

    // The stated mix (docs/bench.md): before each poll 10 % nothing
    // arrives, 30 % a partial batch, 60 % a full one; the driver meets
    // empty polls, partial batches and held tails; every frame arrives
    // once, in order (the command's check), none is lost.
    let polls = numbers(&first, "arrivals_none")[0]
        + numbers(&first, "arrivals_partial")[0]
        + numbers(&first, "arrivals_full")[0];
    assert_eq!(polls, numbers(&first, "steps")[0], "one draw per measured poll");
    let pct = |key: &str| 100.0 * numbers(&first, key)[0] as f64 / polls as f64;
    assert!(
        (6.0..=14.0).contains(&pct("arrivals_none")),
        "none {:.1} %",
        pct("arrivals_none")
    );
    assert!(
        (24.0..=36.0).contains(&pct("arrivals_partial")),
        "partial {:.1} %",
        pct("arrivals_partial")
    );
    assert!(numbers(&first, "empty_steps")[0] > 0, "no empty poll");
    assert!(numbers(&first, "partial_steps")[0] > 0, "no partial batch");
    assert!(numbers(&first, "held_tails")[0] > 0, "no held TDT write");
    assert_eq!(numbers(&first, "injected"), numbers(&first, "captured"), "frames lost");
    assert_eq!(numbers(&first, "duplicated"), vec![0]);
    assert_eq!(numbers(&first, "reordered"), vec![0]);
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// The check above can fail: with collection toggled on the measured step
/// only (not off again inside the wrapper's calls into the model), the
/// model's functions do have a cost.
#[test]
fn without_the_inner_toggles_the_model_would_be_counted() {
    let dir = out_dir("leak");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("callgrind.out");
    let o = Command::new("valgrind")
        .args(["--tool=callgrind", "--toggle-collect=*::measured_forward_step"])
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(env!("CARGO_BIN_EXE_oxnet"))
        .args(["bench", "fwd-inner", "--batch", "32", "--packets", "2000"])
        .output()
        .expect("valgrind runs (installed by scripts/install-deps.sh)");
    assert!(o.status.success(), "valgrind: {}", text(&o.stderr));
    assert!(
        annotated_cost(&file, "oxnet_sim") > 0,
        "the model's functions have a cost"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
