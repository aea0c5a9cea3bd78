//! Helpers shared by the integration tests: running the `oxnet` binary,
//! reading numbers out of its JSON line, and the guest-side script pieces.
#![allow(dead_code)] // each test file uses a different subset

use std::process::{Command, Output};

/// Runs the `oxnet` binary of this build with `args`.
pub fn oxnet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxnet"))
        .args(args)
        .output()
        .expect("run oxnet")
}

/// Bytes as text, lossily.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last line of stdout, which `--json` promises is one JSON object.
pub fn json_line(o: &Output) -> String {
    text(&o.stdout).lines().last().unwrap_or("").to_string()
}

/// The number after `"key":` in a JSON line (digits and a decimal point).
pub fn number(json: &str, key: &str) -> f64 {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} missing in {json}"));
    json[at + key.len() + 3..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
}

/// The whole number after `"key":` in a JSON line.
pub fn field(json: &str, key: &str) -> u64 {
    number(json, key) as u64
}

/// The line of `out` that starts with `prefix`.
pub fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

/// A guest shell snippet that waits until `file` has `lines` lines saying
/// "ready" (the commands announce each initialised device on stderr), at
/// most 60 s.
pub fn wait_ready(file: &str, lines: usize) -> String {
    format!(
        "n=0; until [ \"$(grep -c ready {file} 2>/dev/null)\" -ge {lines} ]; do n=$((n+1)); \
         [ $n -gt 600 ] && {{ echo 'timeout waiting for {file}'; cat {file}; exit 9; }}; sleep 0.1; done"
    )
}

/// The statically linked `oxnet` for QEMU guests (built once per process).
pub fn static_oxnet() -> std::path::PathBuf {
    oxnet_rig::static_binary("oxnet", "oxnet").expect("static build of oxnet")
}
