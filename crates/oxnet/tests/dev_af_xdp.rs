//! `af_xdp:IF[:QUEUE]` over veth pairs inside namespaces this test makes:
//! pktgen → fwd → pcap in generic+copy and native+copy modes (every
//! sequence number once and in order), Linux ping and arping against
//! `oxnet respond`, the refusals (zero-copy on veth, native XDP on an
//! interface without it, a missing interface, no permission), and the
//! removal of a program a killed oxnet left behind. After each test no
//! XDP program is left on any interface and no namespace is left.
//!
//! Needs root, iproute2, libxdp1 (scripts/install-deps.sh); skipped with
//! a message otherwise.

mod common;

use common::netns::{self, Netns};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn libxdp_present() -> bool {
    let ok = Path::new("/usr/lib/x86_64-linux-gnu/libxdp.so.1").exists()
        || Path::new("/usr/lib/aarch64-linux-gnu/libxdp.so.1").exists()
        || Path::new("/usr/lib/libxdp.so.1").exists();
    if !ok {
        eprintln!("skipping: libxdp.so.1 missing (apt-get install libxdp1)");
    }
    ok
}

fn can_run() -> bool {
    netns::available() && libxdp_present()
}

/// A namespace with IPv6 off (no router solicitations or MLD reports on
/// the veths: only the test's own frames cross them).
fn namespace(prefix: &str) -> Netns {
    let ns = Netns::new(prefix);
    for key in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        let out = ns.run("sysctl", &["-q", "-w", key]);
        assert!(out.status.success(), "sysctl {key}: {}", common::text(&out.stderr));
    }
    ns
}

/// Lines of `ip link` (in `ns`, or the root namespace) that show an XDP
/// program (ip-link(8) prints `xdp`, `xdpgeneric`, `xdpdrv`, `prog/xdp`).
fn xdp_lines(ns: Option<&Netns>) -> Vec<String> {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["-n", &ns.name]);
    }
    let out = c.args(["-d", "link", "show"]).output().expect("ip link");
    common::text(&out.stdout)
        .lines()
        .filter(|l| l.contains(" xdp") || l.contains("prog/xdp"))
        .map(str::to_string)
        .collect()
}

/// Nothing left: no XDP program in `ns` nor in the root namespace.
fn assert_no_xdp(ns: &Netns) {
    let left = xdp_lines(Some(ns));
    assert!(left.is_empty(), "XDP program left in {}: {left:?}", ns.name);
    let root = xdp_lines(None);
    assert!(root.is_empty(), "XDP program on a root-namespace interface: {root:?}");
}

fn assert_no_namespaces(prefix: &str) {
    // Our namespaces carry this process's id (netns::unique).
    let ours = format!("{prefix}{}x", std::process::id() % 100_000);
    let left = netns::namespaces_with_prefix(&ours);
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

struct Spawned {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("oxnet-afxdp-{}-{name}", std::process::id()))
}

/// `oxnet ARGS` in `ns`, in the background, stdout/stderr to files.
fn spawn(ns: &Netns, name: &str, args: &[&str]) -> Spawned {
    let out = temp(&format!("{name}.out"));
    let err = temp(&format!("{name}.err"));
    let child = ns
        .command(env!("CARGO_BIN_EXE_oxnet"))
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn oxnet");
    Spawned { child, out, err }
}

impl Spawned {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
    /// Waits until stderr says `ready` `n` times (one per device).
    fn wait_ready(&mut self, n: usize) {
        let start = Instant::now();
        while self.stderr().matches("ready").count() < n {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("exited ({status}) before ready:\n{}{}", self.stdout(), self.stderr());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "not ready after 20 s:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    /// Waits (bounded) for the process to end; SIGINT after `grace`.
    fn finish(&mut self, grace: Duration) {
        let start = Instant::now();
        let mut signalled = false;
        while self.child.try_wait().unwrap().is_none() {
            if !signalled && start.elapsed() > grace {
                // SAFETY: signalling the process we started, by its pid
                // (`ip netns exec` execs oxnet in place).
                unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
                signalled = true;
            }
            if start.elapsed() > grace + Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.out);
        let _ = std::fs::remove_file(&self.err);
    }
}

fn sequences(pcap: &Path) -> Vec<u64> {
    oxnet::pcap::read_frames(pcap)
        .unwrap_or_else(|e| panic!("{}: {e}", pcap.display()))
        .iter()
        .map(|frame| oxnet::frame::sequence(frame).expect("only pktgen frames cross the veths"))
        .collect()
}

/// pktgen on g0 → veth → fwd f0..f1 → veth → pcap on c1, all through
/// af_xdp in mode `modes`.
fn pktgen_fwd_pcap(prefix: &str, modes: &str) {
    if !can_run() {
        return;
    }
    const COUNT: u64 = 3000;
    {
        let ns = namespace(prefix);
        let (g0, f0) = ns.veth_pair();
        let (f1, c1) = ns.veth_pair();
        let pcap_file = temp(&format!("{prefix}.pcap"));
        let count = COUNT.to_string();
        let cap = format!("af_xdp:{c1},{modes}");
        let mut pcap = spawn(
            &ns,
            &format!("{prefix}-pcap"),
            &[
                "pcap",
                &cap,
                pcap_file.to_str().unwrap(),
                "--count",
                &count,
                "--seconds",
                "30",
                "--json",
                "--quiet",
            ],
        );
        pcap.wait_ready(1);
        let fin = format!("af_xdp:{f0},{modes}");
        let fout = format!("af_xdp:{f1},{modes}");
        let mut fwd = spawn(
            &ns,
            &format!("{prefix}-fwd"),
            &["fwd", &fin, &fout, "--seconds", "40", "--json", "--quiet"],
        );
        fwd.wait_ready(2);
        // The programs are attached where asked (ip-link(8): "xdpgeneric"
        // for generic, "xdp" for driver mode).
        let want = if modes.contains("attach=generic") {
            " xdpgeneric "
        } else {
            " xdp "
        };
        let attached = xdp_lines(Some(&ns));
        assert_eq!(
            attached
                .iter()
                .filter(|l| l.contains(": <") && l.contains(want))
                .count(),
            3,
            "three interfaces with {want:?}: {attached:?}"
        );
        let gen = format!("af_xdp:{g0},{modes}");
        // 0.05 Mpps: 3000 packets in 60 ms, well within what copy-mode
        // sockets take on 2 busy cores.
        let out = ns.oxnet(&["pktgen", &gen, "--count", &count, "--rate", "0.05", "--json", "--quiet"]);
        assert!(out.status.success(), "pktgen: {}", common::text(&out.stderr));
        let gen_json = common::json_line(&out);
        assert_eq!(common::field(&gen_json, "sent"), COUNT, "{gen_json}");
        pcap.finish(Duration::from_secs(20));
        fwd.finish(Duration::from_millis(100));
        let links = common::text(&ns.run("ip", &["-s", "link", "show"]).stdout);
        let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
        let pcap_json = pcap.stdout().lines().last().unwrap_or("").to_string();
        let seqs = sequences(&pcap_file);
        let _ = std::fs::remove_file(&pcap_file);
        assert_eq!(
            seqs.len() as u64,
            COUNT,
            "captured {} of {COUNT}: {pcap_json}\n{}\nfwd: {}\n{links}\nsoftnet_stat:\n{softnet}",
            seqs.len(),
            pcap.stderr(),
            fwd.stdout().lines().last().unwrap_or("")
        );
        assert!(
            seqs.iter().copied().eq(0..COUNT),
            "every sequence number once and in order (first wrong at {:?})",
            seqs.iter().enumerate().find(|(i, s)| *i as u64 != **s)
        );
        assert_eq!(common::field(&pcap_json, "kernel_invalid_descs"), 0, "{pcap_json}");
        let fwd_json = fwd.stdout().lines().last().unwrap_or("").to_string();
        // Every packet fwd sent went through a UMEM copy (docs/af_xdp.md).
        assert!(fwd_json.contains(&format!("\"tx_copied\":{COUNT}")), "{fwd_json}");
        assert_no_xdp(&ns);
    }
    assert_no_namespaces(prefix);
}

#[test]
fn generic_copy_pktgen_fwd_pcap_every_sequence_once_in_order() {
    pktgen_fwd_pcap("axg", "attach=generic,bind=copy");
}

#[test]
fn native_copy_pktgen_fwd_pcap_every_sequence_once_in_order() {
    pktgen_fwd_pcap("axn", "attach=native,bind=copy");
}

/// Linux's ping and arping in one namespace, `oxnet respond` on an
/// af_xdp socket in mode `modes` at the other end of the veth.
fn ping_and_arping(peer_prefix: &str, ox_prefix: &str, modes: &str) {
    if !can_run() {
        return;
    }
    {
        let peer = namespace(peer_prefix);
        let ox = namespace(ox_prefix);
        let (va, vb) = peer.veth_to(&ox);
        peer.ip(&["addr", "add", "10.77.0.1/24", "dev", &va]);
        let dev = format!("af_xdp:{vb},{modes}");
        let mut respond = spawn(
            &ox,
            &format!("{ox_prefix}-respond"),
            &[
                "respond",
                &dev,
                "--ip",
                "10.77.0.2/24",
                "--seconds",
                "30",
                "--json",
                "--quiet",
            ],
        );
        respond.wait_ready(1);
        // arping(8) (Habets): -c count, -w deadline per reply; exit 0 when
        // every request got a reply; prints "N packets transmitted, N
        // packets received".
        let out = peer.run(
            "arping",
            &["-c", "3", "-C", "3", "-W", "0.2", "-w", "5", "-i", &va, "10.77.0.2"],
        );
        let text = common::text(&out.stdout);
        assert!(
            text.contains("3 packets transmitted, 3 packets received"),
            "arping: {text}{}",
            common::text(&out.stderr)
        );
        // ping(8): "5 packets transmitted, 5 received" with -c 5.
        let out = peer.run("ping", &["-c", "5", "-i", "0.2", "-W", "2", "10.77.0.2"]);
        let text = common::text(&out.stdout);
        assert!(
            out.status.success() && text.contains("5 packets transmitted, 5 received"),
            "ping: {text}"
        );
        respond.finish(Duration::from_millis(100));
        let json = respond.stdout().lines().last().unwrap_or("").to_string();
        // respond's own counts: one echo reply per ping; ARP replies to
        // arping's 3 requests plus the one request the peer's kernel sends
        // to resolve 10.77.0.2 before the first ping (its neighbour entry
        // then stays REACHABLE for far longer than the 1 s of pinging,
        // RFC 4861 §7.3.3 / ip-neighbour(8), so there is no second one).
        let err = respond.stderr();
        assert_eq!(common::field(&json, "echo_replies"), 5, "{json}\n{err}");
        assert_eq!(common::field(&json, "arp_replies"), 4, "{json}\n{err}");
        assert_eq!(common::field(&json, "tx_packets"), 9, "{json}\n{err}");
        assert_no_xdp(&ox);
    }
    assert_no_namespaces(peer_prefix);
    assert_no_namespaces(ox_prefix);
}

#[test]
fn ping_and_arping_get_exact_replies_from_oxnet_respond_native() {
    ping_and_arping("axp", "axo", "attach=native,bind=copy");
}

#[test]
fn ping_and_arping_get_exact_replies_from_oxnet_respond_generic() {
    ping_and_arping("axq", "axr", "attach=generic,bind=copy");
}

/// Refusals: each a clear error, nothing left behind.
#[test]
fn refusals_are_clear_and_leave_nothing() {
    if !can_run() {
        return;
    }
    {
        let ns = namespace("axb");
        let (va, _vb) = ns.veth_pair();
        let fail = |args: &[&str], says: &[&str]| {
            let out = ns.oxnet(args);
            let err = common::text(&out.stderr);
            assert!(!out.status.success(), "{args:?} should fail");
            for s in says {
                assert!(err.contains(s), "{args:?}: expected {s:?} in: {err}");
            }
            assert!(!err.contains("panicked"), "{err}");
            assert_no_xdp(&ns);
        };
        // veth has native XDP but no AF_XDP zero-copy (no ndo_xsk_wakeup).
        fail(
            &[
                "pktgen",
                &format!("af_xdp:{va},attach=native,bind=zerocopy"),
                "--count",
                "1",
            ],
            &["refuses zero-copy", "bind=copy", &format!("af_packet:{va}")],
        );
        // The machine has no `dummy` link type; loopback has no native XDP
        // either (no ndo_bpf): the same refusal. MTU 1500 so that the frame
        // size check passes first.
        ns.ip(&["link", "set", "lo", "mtu", "1500"]);
        fail(
            &["pktgen", "af_xdp:lo,attach=native,bind=copy", "--count", "1"],
            &["refuses native XDP", "attach=generic", "af_packet:lo"],
        );
        fail(
            &["pktgen", "af_xdp:nosuch0", "--count", "1"],
            &["no network interface 'nosuch0'"],
        );
        fail(
            &["pktgen", &format!("af_xdp:{va}:7"), "--count", "1"],
            &["there is no queue 7"],
        );
        // No permission: the same command as `nobody`.
        let out = ns.run(
            "setpriv",
            &[
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                env!("CARGO_BIN_EXE_oxnet"),
                "pktgen",
                &format!("af_xdp:{va}"),
                "--count",
                "1",
            ],
        );
        let err = common::text(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("lacks CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF")
                && err.contains("af_packet:"),
            "{err}"
        );
        // A machine without libxdp (simulated: OXNET_LIBXDP names a file
        // that is not there): the package to install and the fallback.
        let out = ns
            .command(env!("CARGO_BIN_EXE_oxnet"))
            .args(["pktgen", &format!("af_xdp:{va}"), "--count", "1"])
            .env("OXNET_LIBXDP", "/nonexistent/libxdp.so.1")
            .output()
            .expect("run oxnet");
        let err = common::text(&out.stderr);
        assert!(
            !out.status.success()
                && err.contains("could not be loaded")
                && err.contains("apt-get install libxdp1")
                && err.contains("af_packet:IF"),
            "{err}"
        );
        assert_no_xdp(&ns);
    }
    assert_no_namespaces("axb");
}

/// An oxnet killed with SIGKILL leaves its program attached; the next
/// open of the interface removes it and says so.
#[test]
fn program_left_by_a_killed_oxnet_is_removed_on_next_start() {
    if !can_run() {
        return;
    }
    {
        let ns = namespace("axk");
        let (va, _vb) = ns.veth_pair();
        let dev = format!("af_xdp:{va},attach=native,bind=copy");
        let pcap_file = temp("axk.pcap");
        let mut victim = spawn(
            &ns,
            "victim",
            &["pcap", &dev, pcap_file.to_str().unwrap(), "--seconds", "30"],
        );
        victim.wait_ready(1);
        // SAFETY: killing the process we started, by its pid.
        unsafe { libc::kill(victim.child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = victim.child.wait();
        let _ = std::fs::remove_file(&pcap_file);
        assert_eq!(
            xdp_lines(Some(&ns))
                .iter()
                .filter(|l| l.contains(": <") && l.contains(" xdp "))
                .count(),
            1,
            "the killed oxnet's program is still there"
        );
        // Next start, in the other mode (which the left-over program would
        // otherwise block).
        let out = ns.oxnet(&["pktgen", &format!("af_xdp:{va},attach=generic"), "--count", "1"]);
        let err = common::text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("removed the XDP program a previous oxnet left attached"),
            "{err}"
        );
        assert_no_xdp(&ns);
    }
    assert_no_namespaces("axk");
}
