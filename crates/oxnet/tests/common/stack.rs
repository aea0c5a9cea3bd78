//! Helpers of the stack's tests against Linux (stack_echo.rs,
//! stack_interop.rs).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The repository's top directory.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Random bytes (a fixed-seed xorshift: the same every run).
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// SHA-256 of `data` in hex (coreutils' sha256sum).
pub fn sha256(data: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The value printed after `name:` in oxnet's -h output.
pub fn value(stdout: &str, name: &str) -> u64 {
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        if l == format!("{name}:") {
            return lines.next().unwrap().trim().parse().unwrap();
        }
    }
    panic!("no {name} in\n{stdout}");
}

/// socat sends `data` to `target` (socat's address) from namespace `ns`
/// and returns what came back; after its input ends socat waits `wait`
/// seconds for the other side (TCP's close ends it sooner).
pub fn socat_echo(ns: &str, target: &str, data: &[u8], wait: u32) -> Vec<u8> {
    let wait = wait.to_string();
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "timeout", "90", "socat", "-t", &wait, "-", target])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("socat (scripts/install-deps.sh installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "socat {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Waits up to 20 s for `link` to appear in `ns` (oxnet's TAP), failing
/// at once if `oxnet` ends first.
pub fn wait_for_link(ns: &super::netns::Netns, link: &str, oxnet: &mut std::process::Child) {
    let start = std::time::Instant::now();
    while !ns.links().iter().any(|l| l == link) {
        assert!(
            oxnet.try_wait().unwrap().is_none(),
            "oxnet ended before its TAP came up"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "no {link} after 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `oxnet run CONFIG VARS... -h HANDLER...` inside `ns`, under `timeout
/// secs`, its output piped: stop it with [`stop_oxnet`].
pub fn run_oxnet(
    ns: &super::netns::Netns,
    secs: u32,
    config: &str,
    vars: &[String],
    handlers: &[&str],
) -> std::process::Child {
    let mut cmd = ns.command("timeout");
    cmd.arg(secs.to_string())
        .arg(env!("CARGO_BIN_EXE_oxnet"))
        .arg("run")
        .arg(repo().join(config))
        .args(vars);
    for h in handlers {
        cmd.args(["-h", h]);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Ends an `oxnet run` started by [`run_oxnet`] (SIGINT: it prints its
/// handlers) and returns its standard output and everything it printed.
pub fn stop_oxnet(oxnet: std::process::Child) -> (String, String) {
    // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
    unsafe { libc::kill(oxnet.id() as libc::pid_t, libc::SIGINT) };
    let out = oxnet.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (stdout, all)
}
