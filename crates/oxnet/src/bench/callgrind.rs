//! Running a command under callgrind and reading `callgrind_annotate`.

use oxnet_driver::{Error, Result};
use std::path::Path;
use std::process::Command;

/// The two functions everything the model does happens inside
/// (`#[inline(never)]` in oxnet-sim's world.rs).
pub const MODEL_READ: &str = "<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::read32";
pub const MODEL_WRITE: &str = "<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32";

/// Fails with a clear message if valgrind (with callgrind_annotate) is missing.
pub fn check_installed() -> Result<String> {
    let version = Command::new("valgrind").arg("--version").output();
    let annotate = Command::new("callgrind_annotate").arg("--version").output();
    match (version, annotate) {
        (Ok(v), Ok(_)) if v.status.success() => Ok(String::from_utf8_lossy(&v.stdout).trim().to_string()),
        _ => Err(Error::Config(
            "`oxnet bench` counts instructions with valgrind's callgrind, which is not \
             installed (valgrind and callgrind_annotate must be on PATH). Install it with \
             `sudo apt-get install valgrind` (Debian/Ubuntu) or run scripts/bench.sh, \
             which does that for you."
                .into(),
        )),
    }
}

/// Runs `exe args` under callgrind, collecting only inside functions whose
/// name matches `*toggle*`; returns the program's stdout.
pub fn run(exe: &Path, args: &[String], toggle: &str, out_file: &Path) -> Result<String> {
    run_toggles(exe, args, &[format!("*{toggle}*").as_str()], out_file)
}

/// Runs `exe args` under callgrind with one `--toggle-collect=PATTERN` per
/// pattern (callgrind flips collection on entry to and exit from each
/// matching function); returns the program's stdout.
pub fn run_toggles(exe: &Path, args: &[String], patterns: &[&str], out_file: &Path) -> Result<String> {
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .args(patterns.iter().map(|p| format!("--toggle-collect={p}")))
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| Error::Io(format!("cannot run valgrind: {e}")))?;
    if !output.status.success() {
        return Err(Error::Device(format!(
            "valgrind {} {} failed ({}): {}",
            exe.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// One line of `callgrind_annotate`: a cost and a `file:function [object]`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub ir: u64,
    /// `file:function`, without the object in brackets.
    pub name: String,
    /// The line named the object (`[/path/oxnet]`).
    pub has_object: bool,
}

impl Entry {
    /// The function name (the part after `file:`).
    pub fn function(&self) -> &str {
        // File names do not contain "::"; function names do. The file part
        // ends at the first ':' that is not part of a "::".
        let bytes = self.name.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b':' {
                if bytes.get(i + 1) == Some(&b':') {
                    i += 2;
                    continue;
                }
                return &self.name[i + 1..];
            }
            i += 1;
        }
        &self.name
    }
}

/// Functions of the model (crate oxnet_sim) with a cost in a self-cost
/// annotation: must be none when the model is kept out of the count.
pub fn model_functions_with_cost(a: &Annotation) -> Vec<String> {
    a.entries
        .iter()
        .filter(|e| e.ir > 0 && e.function().contains("oxnet_sim"))
        .map(|e| format!("{} ({} Ir)", e.function(), e.ir))
        .collect()
}

/// What `callgrind_annotate` reports for one file.
#[derive(Debug, Clone)]
pub struct Annotation {
    /// Instructions collected in total (PROGRAM TOTALS).
    pub total: u64,
    /// Per `file:function`, all of them (threshold 100%).
    pub entries: Vec<Entry>,
}

impl Annotation {
    /// Inclusive cost of `function` (exact name) from an inclusive
    /// annotation. Inlining splits a function into one entry per source
    /// file, and callgrind_annotate may even list the function's own file
    /// twice (absolute and relative path, depending on its working
    /// directory); the entry holding the whole function is the largest, the
    /// others are parts of it. (Summing them would count parts twice.)
    pub fn inclusive(&self, function: &str) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.function() == function)
            .map(|e| e.ir)
            .max()
            .unwrap_or(0)
    }
}

/// Runs `callgrind_annotate` on `file`, inclusive or self costs.
pub fn annotate(file: &Path, inclusive: bool) -> Result<Annotation> {
    let output = Command::new("callgrind_annotate")
        .arg(format!("--inclusive={}", if inclusive { "yes" } else { "no" }))
        .arg("--threshold=100")
        .arg("--auto=no")
        .arg(file)
        .output()
        .map_err(|e| Error::Io(format!("cannot run callgrind_annotate: {e}")))?;
    if !output.status.success() {
        return Err(Error::Device(format!(
            "callgrind_annotate {} failed: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    parse(&String::from_utf8_lossy(&output.stdout)).ok_or_else(|| {
        Error::Device(format!(
            "cannot read callgrind_annotate's output for {}",
            file.display()
        ))
    })
}

/// Parses `callgrind_annotate` output: lines `  1,234 (12.3%)  file:fn [obj]`
/// (the percentage is absent in some versions) and the PROGRAM TOTALS line.
pub fn parse(text: &str) -> Option<Annotation> {
    let mut total = None;
    let mut entries = Vec::new();
    for line in text.lines() {
        // Annotated source (if any) follows the function table: stop there,
        // its lines are not functions.
        if line.starts_with("-- Auto-annotated") || line.starts_with("-- User-annotated") {
            break;
        }
        let line = line.trim_start();
        let Some((count, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let Ok(ir) = count.replace(',', "").parse::<u64>() else {
            continue;
        };
        let mut rest = rest.trim_start();
        if rest.starts_with('(') {
            match rest.find(')') {
                Some(end) => rest = rest[end + 1..].trim_start(),
                None => continue,
            }
        }
        if rest.starts_with("PROGRAM TOTALS") {
            total = Some(ir);
            continue;
        }
        // Drop the " [object]" suffix.
        let (name, has_object) = match rest.rfind(" [") {
            Some(i) if rest.ends_with(']') => (&rest[..i], true),
            _ => (rest, false),
        };
        if name.is_empty() {
            continue;
        }
        entries.push(Entry {
            ir,
            name: name.to_string(),
            has_object,
        });
    }
    Some(Annotation { total: total?, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_annotate_output() {
        let text = "\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
12,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                  file:function
--------------------------------------------------------------------------------
12,000 (100.0%)  ???:oxnet::bench::fwd::measured_forward_loop [/x/oxnet]
 5,000 (41.67%)  crates/oxnet-sim/src/world.rs:<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32 [/x/oxnet]
 4,900 (40.83%)  crates/oxnet-sim/src/ixgbe/mod.rs:<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32
";
        let a = parse(text).unwrap();
        assert_eq!(a.total, 12_000);
        assert_eq!(a.inclusive(MODEL_WRITE), 5_000);
        assert_eq!(a.inclusive(MODEL_READ), 0);
        assert_eq!(a.entries[0].function(), "oxnet::bench::fwd::measured_forward_loop");
        // Both model entries have a cost: the check that the model is kept
        // out of the count must name them.
        let leaked = model_functions_with_cost(&a);
        assert_eq!(leaked.len(), 2, "{leaked:?}");
        assert!(leaked[0].starts_with("<oxnet_sim::world::SimRegisters"), "{leaked:?}");
    }

    #[test]
    fn a_profile_without_model_functions_passes_the_check() {
        let text = "\
1,000 (100.0%)  PROGRAM TOTALS
  700 (70.00%)  crates/oxnet-driver/src/advanced/rx.rs:<oxnet_driver::ixgbe::IxgbeDevice<R> as oxnet_driver::device::Device>::rx_batch [/x/oxnet]
  300 (30.00%)  crates/oxnet/src/apps/fwd.rs:oxnet::bench::fwd::measured_forward_step [/x/oxnet]
    0            crates/oxnet-sim/src/world.rs:oxnet_sim::ixgbe::tx::send [/x/oxnet]
";
        let a = parse(text).unwrap();
        assert_eq!(a.total, 1_000);
        assert!(model_functions_with_cost(&a).is_empty());
    }
}

/// The call graph of a callgrind output file: self cost per function and
/// inclusive cost per call edge (what `callgrind_annotate --tree` shows).
#[derive(Debug, Default)]
pub struct CallGraph {
    /// Self cost per function name (all source files together).
    pub self_cost: std::collections::HashMap<String, u64>,
    /// (caller, callee) -> (calls, inclusive cost of those calls).
    pub edges: std::collections::HashMap<(String, String), (u64, u64)>,
}

impl CallGraph {
    /// Functions reachable from `roots` along call edges, not entering `stop`.
    pub fn reachable(&self, roots: &[&str], stop: &[&str]) -> std::collections::HashSet<String> {
        let mut seen: std::collections::HashSet<String> = roots.iter().map(|s| s.to_string()).collect();
        let mut work: Vec<String> = seen.iter().cloned().collect();
        while let Some(f) = work.pop() {
            for (caller, callee) in self.edges.keys() {
                if *caller == f && !stop.contains(&callee.as_str()) && seen.insert(callee.clone()) {
                    work.push(callee.clone());
                }
            }
        }
        seen
    }

    /// Inclusive cost of all calls into `callee` from callers in `from`.
    pub fn calls_into(&self, callee: &str, from: &std::collections::HashSet<String>) -> u64 {
        self.edges
            .iter()
            .filter(|((caller, c), _)| c == callee && from.contains(caller))
            .map(|(_, (_, ir))| ir)
            .sum()
    }

    /// The full name of the function whose name ends with `::suffix`.
    pub fn find(&self, suffix: &str) -> Option<String> {
        let tail = format!("::{suffix}");
        self.self_cost
            .keys()
            .chain(self.edges.keys().map(|(_, callee)| callee))
            .find(|n| n.ends_with(&tail))
            .cloned()
    }
}

/// Reads a callgrind output file (format version 1, one event, name
/// compression or not).
pub fn read_graph(file: &Path) -> Result<CallGraph> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::Io(format!("cannot read {}: {e}", file.display())))?;
    let mut names: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut resolve = |spec: &str| -> String {
        // "(12) name" defines id 12, "(12)" refers to it, "name" is plain.
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix('(') {
            if let Some(end) = rest.find(')') {
                let id = rest[..end].to_string();
                let name = rest[end + 1..].trim();
                if name.is_empty() {
                    return names.get(&id).cloned().unwrap_or(id);
                }
                names.insert(id, name.to_string());
                return name.to_string();
            }
        }
        spec.to_string()
    };
    let mut graph = CallGraph::default();
    let mut current = String::new();
    let mut callee: Option<String> = None;
    let mut pending_call: Option<(String, u64)> = None;
    for line in text.lines() {
        if let Some(spec) = line.strip_prefix("fn=") {
            current = resolve(spec);
            callee = None;
            continue;
        }
        if let Some(spec) = line.strip_prefix("cfn=") {
            callee = Some(resolve(spec));
            continue;
        }
        if let Some(rest) = line.strip_prefix("calls=") {
            let calls = rest.split_whitespace().next().and_then(|c| c.parse().ok()).unwrap_or(0);
            if let Some(c) = callee.clone() {
                pending_call = Some((c, calls));
            }
            continue;
        }
        let first = line.chars().next();
        let is_cost = matches!(first, Some(c) if c.is_ascii_digit() || c == '+' || c == '-' || c == '*');
        if !is_cost {
            continue;
        }
        let cost: u64 = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        match pending_call.take() {
            Some((c, calls)) => {
                let e = graph.edges.entry((current.clone(), c)).or_insert((0, 0));
                e.0 += calls;
                e.1 += cost;
            }
            None => *graph.self_cost.entry(current.clone()).or_insert(0) += cost,
        }
    }
    Ok(graph)
}
