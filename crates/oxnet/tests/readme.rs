//! The README's promise: its two commands, taken from README.md itself (not
//! copied here), do what it says. The first runs the demo exactly as written;
//! the second is what `.ci/run` runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The commands of the README's "Two commands" block, comments removed.
fn two_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
    let section = readme
        .split("## Two commands")
        .nth(1)
        .expect("README.md has a '## Two commands' section");
    let block = section.split("```").nth(1).expect("the section has a code block");
    block
        .lines()
        .skip(1) // the fence's language tag
        .map(|line| line.split('#').next().unwrap_or("").trim().to_string())
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn readme_has_exactly_two_commands() {
    let commands = two_commands();
    assert_eq!(commands.len(), 2, "README's two commands: {commands:?}");
    assert!(commands[0].starts_with("cargo run"), "first command: {:?}", commands[0]);
}

#[test]
fn ci_runs_the_readme_test_command() {
    let test_command = &two_commands()[1];
    let ci = std::fs::read_to_string(repository().join(".ci/run")).expect(".ci/run");
    let runs_it = ci
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .any(|line| line == test_command);
    assert!(
        runs_it,
        ".ci/run does not run the README's test command {test_command:?}:\n{ci}"
    );
}

/// Runs the first command as a new user would type it, from the top of the
/// repository. Its own target directory keeps it off the lock of the
/// `cargo test` that runs this test (the command line is unchanged).
#[test]
fn readme_demo_command_runs_the_demo() {
    let command = &two_commands()[0];
    let target = repository().join("target/readme");
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(repository())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`{command}` failed ({:?}):\n{stdout}\n{stderr}",
        output.status
    );
    let check = stdout
        .lines()
        .find(|line| line.starts_with("sequence check:"))
        .unwrap_or_else(|| panic!("`{command}` printed no sequence check:\n{stdout}"));
    assert!(check.ends_with("OK"), "{check}");
    assert!(check.contains("lost 0, duplicated 0, reordered 0"), "{check}");
}
