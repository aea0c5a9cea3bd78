//! Compiles `tests/c/echo.c` with the system C compiler (`cc`) against
//! `include/oxnet.h` and the cdylib, runs it, and fails if it fails (or
//! if there is no `cc`: the test must not pass without running C).

mod common;

use common::cdylib_dir;
use std::path::Path;
use std::process::Command;

#[test]
fn echo_c_talks_to_the_stack_through_the_c_abi() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_dir = cdylib_dir();
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oxnet_echo_c");
    let compiled = Command::new("cc")
        .args(["-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(crate_dir.join("tests/c/echo.c"))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-L")
        .arg(&lib_dir)
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-loxnet_ffi")
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler `cc` failed ({e}): install gcc or clang to run this test"));
    assert!(
        compiled.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&exe).output().expect("running echo.c");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "echo.c failed ({}):\n{stdout}{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(stdout, "echo.c: ok\n");
}

/// The names of `text`'s functions: `oxnet_x(` after a type in the
/// header, `fn oxnet_x(` in Rust.
fn names(text: &str, prefix: &str) -> std::collections::BTreeSet<String> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let end = rest.find('(').unwrap_or(0);
            rest[..end].to_string()
        })
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect()
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(crate_dir.join("include/oxnet.h")).expect("oxnet.h");
    let abi = std::fs::read_to_string(crate_dir.join("src/abi.rs")).expect("abi.rs");
    let declared = names(&header, " oxnet_");
    let declared_ptr: std::collections::BTreeSet<String> = names(&header, "*oxnet_");
    let declared: std::collections::BTreeSet<String> = declared.union(&declared_ptr).cloned().collect();
    let exported = names(&abi, "extern \"C\" fn oxnet_");
    assert_eq!(declared, exported);
    assert_eq!(exported.len(), 24, "{exported:?}");
}
