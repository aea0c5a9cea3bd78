//! Statically linked release builds of the workspace's binaries and test
//! executables, for the guest (which has no libc). They go to their own
//! target directory so that normal builds are not invalidated by the
//! different RUSTFLAGS.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The triple we build for: naming it makes cargo apply RUSTFLAGS to the
/// target only, not to build scripts and proc macros.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";
const RUSTFLAGS: &str = "-C target-feature=+crt-static";

/// The workspace's top directory.
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace directory")
}

/// `$OXNET_RIG_STATIC_TARGET`, else `$CARGO_TARGET_DIR/static`, else
/// `<workspace>/target/static`.
pub fn static_target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OXNET_RIG_STATIC_TARGET") {
        return PathBuf::from(dir);
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("static"),
        None => workspace_dir().join("target/static"),
    }
}

/// Builds binary `bin` of workspace package `package` statically (release)
/// and returns its path, e.g. `static_binary("oxnet", "oxnet")`. Built once
/// per process: tests running in parallel share one build.
pub fn static_binary(package: &str, bin: &str) -> Result<PathBuf> {
    static BUILT: Mutex<Vec<((String, String), PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key = (package.to_string(), bin.to_string());
    if let Some((_, path)) = built.iter().find(|(k, _)| *k == key) {
        return Ok(path.clone());
    }
    let path = build_binary(package, bin)?;
    built.push((key, path.clone()));
    Ok(path)
}

fn build_binary(package: &str, bin: &str) -> Result<PathBuf> {
    let output = cargo(&["build", "--release", "-p", package, "--bin", bin])?;
    let path = static_target_dir().join(TARGET).join("release").join(bin);
    if !path.is_file() {
        return Err(Error::Build(format!(
            "cargo built {package} but {} is not there\n{output}",
            path.display()
        )));
    }
    Ok(path)
}

/// Builds the integration test `test` (tests/<test>.rs) of `package`
/// statically and returns the test executable's path. Run it in the guest
/// like any libtest binary (`/bin/t --test-threads 1 NAME`).
pub fn static_test(package: &str, test: &str) -> Result<PathBuf> {
    test_executable(&["-p", package, "--test", test])
}

/// Builds the unit tests of `package`'s library statically and returns
/// the test executable's path.
pub fn static_lib_test(package: &str) -> Result<PathBuf> {
    test_executable(&["-p", package, "--lib"])
}

fn test_executable(selection: &[&str]) -> Result<PathBuf> {
    let mut args = vec![
        "test",
        "--release",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ];
    args.extend_from_slice(selection);
    let output = cargo(&args)?;
    // The compiler-artifact message of the test: built with the test
    // profile ("test":true) — a package's binaries are artifacts with an
    // "executable" too, and may come last.
    output
        .lines()
        .rev()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && built_as_test(l))
        .find_map(|l| json_string_field(l, "executable"))
        .map(PathBuf::from)
        .ok_or_else(|| {
            Error::Build(format!(
                "cargo test --no-run {} produced no executable",
                selection.join(" ")
            ))
        })
}

/// True if a compiler-artifact message is for a target built in test mode:
/// its "profile" object says "test":true (a target's own "test" field is
/// true for binaries too, so only the profile tells).
fn built_as_test(message: &str) -> bool {
    message
        .split_once("\"profile\":{")
        .and_then(|(_, rest)| rest.split_once('}'))
        .is_some_and(|(profile, _)| profile.contains("\"test\":true"))
}

/// Runs cargo with the static flags; returns its stdout.
fn cargo(args: &[&str]) -> Result<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = static_target_dir();
    let mut command = Command::new(&cargo);
    command
        .args(args)
        .arg("--target")
        .arg(TARGET)
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(workspace_dir())
        .env("RUSTFLAGS", RUSTFLAGS)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let output = command
        .output()
        .map_err(|e| Error::Build(format!("cannot run {}: {e}", cargo.to_string_lossy())))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(Error::Build(format!(
            "`cargo {} --target {TARGET}` with RUSTFLAGS=\"{RUSTFLAGS}\" in {} failed ({}); its errors are above",
            args.join(" "),
            target_dir.display(),
            output.status
        )));
    }
    Ok(stdout)
}

/// The string value of `"field":"..."` in one line of cargo's JSON (paths
/// contain no escapes other than backslashes, which we undo).
fn json_string_field(line: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\":\"");
    let start = line.find(&key)? + key.len();
    let mut value = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => value.push(chars.next()?),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_field() {
        let line = r#"{"reason":"compiler-artifact","executable":"/t/release/deps/cli-0a1b","fresh":true}"#;
        assert_eq!(
            super::json_string_field(line, "executable").as_deref(),
            Some("/t/release/deps/cli-0a1b")
        );
        assert_eq!(super::json_string_field(r#"{"executable":null}"#, "executable"), None);
    }
}
