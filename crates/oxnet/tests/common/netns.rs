//! Network namespaces and veth pairs that a test creates and removes.
//!
//! Every interface with an address lives in a namespace made here, never
//! in the machine's root namespace (README: tests and the machine). A
//! [`Netns`] is deleted when dropped, with everything in it; names carry
//! the test's process id so that parallel tests and runs never collide.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Whether this process may create namespaces (root, `ip` present).
/// Tests that need one print why and return early when it is false.
pub fn available() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !root || !ip {
        eprintln!("skipping: network namespaces need root and iproute2 (root: {root}, ip: {ip})");
    }
    root && ip
}

/// A short unique name: `{prefix}{pid%100000}x{n}` (at most 15 bytes for
/// a prefix of up to 4 bytes, so it also works as an interface name).
pub fn unique(prefix: &str) -> String {
    assert!(prefix.len() <= 4, "prefix '{prefix}' too long for an interface name");
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}x{n}", std::process::id() % 100_000)
}

/// Runs `ip ARGS`, panicking with its stderr when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, removed (with its interfaces) on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates a namespace named `unique(prefix)` with `lo` up.
    pub fn new(prefix: &str) -> Netns {
        let name = unique(prefix);
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `ip -n NS ARGS`.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// A command run inside the namespace (`ip netns exec NS program`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Runs `program args` inside the namespace and returns its output.
    pub fn run(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
        self.command(program).args(args).output().expect("ip netns exec")
    }

    /// The test's `oxnet` binary, run inside the namespace.
    pub fn oxnet(&self, args: &[&str]) -> Output {
        self.run(env!("CARGO_BIN_EXE_oxnet"), args)
    }

    /// Creates a veth pair `a` <-> `b` inside this namespace, both up, no
    /// addresses. Returns the two names.
    pub fn veth_pair(&self) -> (String, String) {
        let a = unique("va");
        let b = unique("vb");
        self.ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        self.ip(&["link", "set", &a, "up"]);
        self.ip(&["link", "set", &b, "up"]);
        (a, b)
    }

    /// A veth pair with `a` in this namespace and `b` in `other`, both up.
    pub fn veth_to(&self, other: &Netns) -> (String, String) {
        let a = unique("va");
        let b = unique("vb");
        self.ip(&[
            "link",
            "add",
            &a,
            "type",
            "veth",
            "peer",
            "name",
            &b,
            "netns",
            &other.name,
        ]);
        self.ip(&["link", "set", &a, "up"]);
        other.ip(&["link", "set", &b, "up"]);
        (a, b)
    }

    /// The interface names in the namespace (to check nothing is left).
    pub fn links(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["-n", &self.name, "-o", "link", "show"])
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(':').nth(1))
            .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Namespaces whose name starts with `prefix` (a test checks it left none).
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}
