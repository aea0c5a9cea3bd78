//! Running a command under callgrind and reading `callgrind_annotate`.

use oxnet_driver::{Error, Result};
use std::path::Path;
use std::process::Command;

/// The two functions everything the model does happens inside
/// (`#[inline(never)]` in oxnet-sim's world.rs).
pub const MODEL_READ: &str = "<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::read32";
pub const MODEL_WRITE: &str =
    "<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32";

/// Fails with a clear message if valgrind (with callgrind_annotate) is missing.
pub fn check_installed() -> Result<String> {
    let version = Command::new("valgrind").arg("--version").output();
    let annotate = Command::new("callgrind_annotate").arg("--version").output();
    match (version, annotate) {
        (Ok(v), Ok(_)) if v.status.success() => {
            Ok(String::from_utf8_lossy(&v.stdout).trim().to_string())
        }
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
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--toggle-collect=*{toggle}*"))
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

/// What `callgrind_annotate` reports for one file.
#[derive(Debug, Clone)]
pub struct Annotation {
    /// Instructions collected in total (PROGRAM TOTALS).
    pub total: u64,
    /// Per `file:function`, all of them (threshold 100%).
    pub entries: Vec<Entry>,
}

impl Annotation {
    /// Sum over the entries of functions named exactly `function` (one
    /// function may be split over several files by inlining).
    pub fn sum(&self, function: &str) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.function() == function)
            .map(|e| e.ir)
            .sum()
    }
}

/// Runs `callgrind_annotate` on `file`, inclusive or self costs.
pub fn annotate(file: &Path, inclusive: bool) -> Result<Annotation> {
    let output = Command::new("callgrind_annotate")
        .arg(format!("--inclusive={}", if inclusive { "yes" } else { "no" }))
        .arg("--threshold=100")
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
    parse(&String::from_utf8_lossy(&output.stdout))
        .ok_or_else(|| Error::Device(format!("cannot read callgrind_annotate's output for {}", file.display())))
}

/// Parses `callgrind_annotate` output: lines `  1,234 (12.3%)  file:fn [obj]`
/// (the percentage is absent in some versions) and the PROGRAM TOTALS line.
pub fn parse(text: &str) -> Option<Annotation> {
    let mut total = None;
    let mut entries = Vec::new();
    for line in text.lines() {
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
        let name = match rest.rfind(" [") {
            Some(i) if rest.ends_with(']') => &rest[..i],
            _ => rest,
        };
        if name.is_empty() {
            continue;
        }
        entries.push(Entry {
            ir,
            name: name.to_string(),
        });
    }
    Some(Annotation {
        total: total?,
        entries,
    })
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
   100 ( 0.83%)  /rustc/abc/library/std/src/sync/mutex.rs:<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32 [/x/oxnet]
";
        let a = parse(text).unwrap();
        assert_eq!(a.total, 12_000);
        assert_eq!(a.sum(MODEL_WRITE), 5_100);
        assert_eq!(a.sum(MODEL_READ), 0);
        assert_eq!(
            a.entries[0].function(),
            "oxnet::bench::fwd::measured_forward_loop"
        );
    }
}
