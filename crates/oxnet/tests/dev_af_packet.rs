//! `af_packet:IF` over veth pairs in network namespaces this test makes
//! and removes (tests/common/netns.rs): pktgen -> fwd -> pcap with every
//! sequence number once and in order, the receive path's system calls
//! counted by `strace -c`, two queues in one PACKET_FANOUT group, Linux's
//! `ping` and `arping` against `oxnet respond` with `tcpdump` watching the
//! kernel side, and the errors for bad input.
//!
//! IPv6 is switched off in every namespace before its veths are made
//! (net.ipv6.conf.default.disable_ipv6, ip-sysctl.rst), so the kernel
//! sends nothing on them by itself (no router or neighbour solicitations,
//! no MLD reports) and the frame counts below are exact.
//!
//! Needs root, iproute2, strace, tcpdump, ping, arping, setpriv
//! (scripts/install-deps.sh); without root each test says so and returns.

mod common;

use common::netns::{self, Netns};
use common::{field, json_line, text};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// A namespace with IPv6 off for every interface made in it afterwards
/// (/proc/sys/net shows the namespace of the process reading it).
fn quiet_netns(prefix: &str) -> Netns {
    let ns = Netns::new(prefix);
    let o = ns.run(
        "sh",
        &[
            "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
        ],
    );
    assert!(o.status.success(), "disabling IPv6: {}", text(&o.stderr));
    ns
}

/// A scratch directory for this test's files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("oxnet-afp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `args` (a command line) inside `ns` with stdout and stderr
/// going to `out` and `err`.
fn spawn_in(ns: &Netns, args: &[&str], out: &Path, err: &Path) -> Child {
    let mut command = ns.command(args[0]);
    command
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::from(File::create(out).expect("stdout file")))
        .stderr(Stdio::from(File::create(err).expect("stderr file")));
    command.spawn().expect("spawn in namespace")
}

/// Waits until `file` holds `needle` at least `times` times (at most 30 s).
fn wait_for(file: &Path, needle: &str, times: usize, child: &mut Child) {
    let start = Instant::now();
    loop {
        let content = std::fs::read_to_string(file).unwrap_or_default();
        if content.matches(needle).count() >= times {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("process ended ({status}) before saying {needle:?}:\n{content}");
        }
        if start.elapsed() > Duration::from_secs(30) {
            common::terminate(child);
            panic!("no {needle:?} x{times} in {} after 30 s:\n{content}", file.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (at most `limit`) for a child to end; kills it past that.
fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            common::terminate(child);
            panic!("process {} still running after {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends SIGINT to process `pid` (one this test started).
fn interrupt(pid: u32) {
    // SAFETY: signalling a process this test started, by its pid.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
}

/// The children of process `pid` (/proc/PID/task/PID/children).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Calls per system call from an `strace -c` summary (strace(1): the
/// table's columns are % time, seconds, usecs/call, calls, errors,
/// syscall; errors may be empty).
fn strace_calls(summary: &str) -> Vec<(String, u64)> {
    summary
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 5 || cols[0].parse::<f64>().is_err() {
                return None;
            }
            let name = cols.last()?.to_string();
            if name == "total" {
                return None;
            }
            Some((name, cols[3].parse().ok()?))
        })
        .collect()
}

/// System calls a receive path could use to wait for or read frames.
const RECEIVE_CALLS: &[&str] = &[
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "read",
    "readv",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
];

fn calls(table: &[(String, u64)], names: &[&str]) -> u64 {
    table
        .iter()
        .filter(|(n, _)| names.contains(&n.as_str()))
        .map(|(_, c)| c)
        .sum()
}

/// A namespace is gone once its Netns is dropped.
fn assert_removed(name: &str) {
    assert!(
        !netns::namespaces_with_prefix(name).contains(&name.to_string()),
        "namespace {name} left behind"
    );
}

fn tools_present(tools: &[&str]) -> bool {
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            eprintln!("skipping: {tool} is missing (scripts/install-deps.sh installs it)");
            return false;
        }
    }
    true
}

/// pktgen on a0 -> veth -> fwd a1 <-> b0 -> veth -> pcap on b1, 100 000
/// frames at 0.1 Mpps, fwd and pcap under `strace -c -f`.
///
/// Order: a veth hands each frame to its peer in the sender's own context
/// (veth_xmit -> netif_rx, which runs the receive softirq when bottom
/// halves are enabled again), so the frames of one sender that stays on
/// one CPU reach the peer's sockets in the order sent: pktgen is pinned
/// to CPU 0 and fwd to CPU 1 (taskset). Count: the rings are 4096
/// frames deep (128 blocks of 64 KiB, each handed over 1 ms after its
/// first frame: 128 ms of traffic at this rate), far more than a
/// descheduled receiver needs; kernel drops would show in
/// kernel_rx_dropped, which must be 0.
#[test]
fn pktgen_fwd_pcap_every_frame_once_in_order_with_no_receive_syscalls() {
    if !netns::available() || !tools_present(&["strace", "taskset", "tcpdump"]) {
        return;
    }
    const COUNT: u64 = 100_000;
    let scratch = Scratch::new("topology");
    let ns = quiet_netns("afp");
    let (a0, a1) = ns.veth_pair();
    let (b0, b1) = ns.veth_pair();
    let pcap_file = scratch.path("out.pcap");
    let (fwd_trace, pcap_trace) = (scratch.path("fwd.strace"), scratch.path("pcap.strace"));
    let spec = |i: &str| format!("af_packet:{i}");
    let count = COUNT.to_string();

    let mut pcap = spawn_in(
        &ns,
        &[
            "taskset",
            "-c",
            "1",
            "strace",
            "-c",
            "-f",
            "-o",
            pcap_trace.to_str().unwrap(),
            OXNET,
            "pcap",
            &spec(&b1),
            pcap_file.to_str().unwrap(),
            "--count",
            &count,
            "--seconds",
            "60",
            "--json",
            "--quiet",
            "--ring",
            "4096",
        ],
        &scratch.path("pcap.out"),
        &scratch.path("pcap.err"),
    );
    let mut fwd = spawn_in(
        &ns,
        &[
            "taskset",
            "-c",
            "1",
            "strace",
            "-c",
            "-f",
            "-o",
            fwd_trace.to_str().unwrap(),
            OXNET,
            "fwd",
            &spec(&a1),
            &spec(&b0),
            "--seconds",
            "60",
            "--json",
            "--quiet",
            "--ring",
            "4096",
        ],
        &scratch.path("fwd.out"),
        &scratch.path("fwd.err"),
    );
    wait_for(&scratch.path("pcap.err"), "ready", 1, &mut pcap);
    wait_for(&scratch.path("fwd.err"), "ready", 2, &mut fwd);

    let generator = ns.run(
        "taskset",
        &[
            "-c",
            "0",
            OXNET,
            "pktgen",
            &spec(&a0),
            "--count",
            &count,
            "--rate",
            "0.1",
            "--json",
            "--quiet",
            "--ring",
            "4096",
        ],
    );
    assert!(generator.status.success(), "pktgen: {}", text(&generator.stderr));
    let gen_json = json_line(&generator);
    assert_eq!(field(&gen_json, "sent"), COUNT, "{gen_json}");

    let status = wait_bounded(&mut pcap, Duration::from_secs(30));
    let pcap_out = std::fs::read_to_string(scratch.path("pcap.out")).unwrap();
    let pcap_err = std::fs::read_to_string(scratch.path("pcap.err")).unwrap();
    assert!(status.success(), "pcap: {pcap_err}");
    let pcap_json = pcap_out.lines().last().unwrap_or("").to_string();
    // fwd: SIGINT to the oxnet process strace runs (its only child).
    let traced = children_of(fwd.id());
    assert_eq!(traced.len(), 1, "strace's children: {traced:?}");
    interrupt(traced[0]);
    assert!(wait_bounded(&mut fwd, Duration::from_secs(30)).success());
    let fwd_out = std::fs::read_to_string(scratch.path("fwd.out")).unwrap();
    let fwd_json = fwd_out.lines().last().unwrap_or("").to_string();
    println!("pktgen: {gen_json}\nfwd: {fwd_json}\npcap: {pcap_json}");

    // Every sequence number once and in order.
    assert_eq!(field(&pcap_json, "captured"), COUNT, "{pcap_json}");
    assert_eq!(field(&pcap_json, "lost"), 0, "{pcap_json}");
    assert_eq!(field(&pcap_json, "duplicated"), 0, "{pcap_json}");
    assert_eq!(field(&pcap_json, "reordered"), 0, "{pcap_json}");
    assert_eq!(field(&pcap_json, "kernel_rx_dropped"), 0, "{pcap_json}");
    assert_eq!(field(&fwd_json, "forwarded"), COUNT, "{fwd_json}");
    assert_eq!(field(&fwd_json, "kernel_rx_dropped"), 0, "{fwd_json}");
    // An independent reader agrees: tcpdump reads COUNT frames back.
    let read_back = Command::new("tcpdump")
        .args(["-r", pcap_file.to_str().unwrap(), "-n", "-q"])
        .output()
        .expect("tcpdump -r");
    assert_eq!(text(&read_back.stdout).lines().count() as u64, COUNT);

    // The rings, not system calls, carry the frames: receive-side calls
    // per packet far below one (0 expected: the receive path only reads
    // the block status word), and one sendto per transmit batch, never
    // one per packet.
    for (who, trace) in [("pcap", &pcap_trace), ("fwd", &fwd_trace)] {
        let summary = std::fs::read_to_string(trace).expect("strace summary");
        let table = strace_calls(&summary);
        let receive = calls(&table, RECEIVE_CALLS);
        let per_packet = receive as f64 / COUNT as f64;
        println!("{who}: {receive} receive-side system calls for {COUNT} packets ({per_packet:.5} per packet)");
        assert!(
            per_packet < 0.05,
            "{who}: {per_packet} receive calls per packet:\n{summary}"
        );
        if who == "fwd" {
            let sendto = calls(&table, &["sendto"]);
            let per_packet = sendto as f64 / COUNT as f64;
            println!("fwd: {sendto} sendto kicks for {COUNT} packets ({per_packet:.4} per packet)");
            assert!(
                sendto > 0 && per_packet < 0.25,
                "fwd: {sendto} sendto calls:\n{summary}"
            );
        }
    }
    let name = ns.name.clone();
    drop(ns);
    assert_removed(&name);
}

/// The sockets bound to interface index `ifindex` in `ns` that are
/// running (/proc/net/packet: sk RefCnt Type Proto Iface R Rmem User Inode).
fn running_packet_sockets(ns: &Netns, ifindex: u32) -> usize {
    let o = ns.run("cat", &["/proc/net/packet"]);
    text(&o.stdout)
        .lines()
        .skip(1)
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 5 && cols[4] == ifindex.to_string() && cols[5] == "1"
        })
        .count()
}

/// Two queues in one PACKET_FANOUT_HASH group: 200 UDP datagrams of 200
/// flows (one destination port each, and a fresh source port per socket)
/// from the Linux side. The kernel's flow hash spreads them: both queues
/// receive, and together exactly 200 (no ARP: the neighbour entry is
/// static; no IPv6).
#[test]
fn two_queues_in_a_fanout_group_both_receive_and_sum_exactly() {
    if !netns::available() {
        return;
    }
    const DATAGRAMS: u64 = 200;
    let scratch = Scratch::new("fanout");
    let peer = quiet_netns("afl");
    let dut = quiet_netns("afd");
    let (linux_if, oxnet_if) = peer.veth_to(&dut);
    peer.ip(&["addr", "add", "10.9.0.1/24", "dev", &linux_if]);
    let mac = text(&dut.run("cat", &[&format!("/sys/class/net/{oxnet_if}/address")]).stdout)
        .trim()
        .to_string();
    peer.ip(&[
        "neigh",
        "add",
        "10.9.0.2",
        "lladdr",
        &mac,
        "dev",
        &linux_if,
        "nud",
        "permanent",
    ]);
    let ifindex: u32 = text(&dut.run("cat", &[&format!("/sys/class/net/{oxnet_if}/ifindex")]).stdout)
        .trim()
        .parse()
        .unwrap();

    let mut stats = spawn_in(
        &dut,
        &[
            OXNET,
            "stats",
            &format!("af_packet:{oxnet_if}"),
            "--queues",
            "2",
            "--seconds",
            "4",
            "--json",
        ],
        &scratch.path("stats.out"),
        &scratch.path("stats.err"),
    );
    // Ready: both sockets bound (fanout joins right after the second bind).
    let start = Instant::now();
    while running_packet_sockets(&dut, ifindex) < 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "sockets never bound");
        assert!(stats.try_wait().unwrap().is_none(), "stats ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let send = peer.run(
        "bash",
        &[
            "-c",
            &format!(
                "for p in $(seq 20000 {}); do printf x > /dev/udp/10.9.0.2/$p; done",
                20000 + DATAGRAMS - 1
            ),
        ],
    );
    assert!(send.status.success(), "{}", text(&send.stderr));
    assert!(wait_bounded(&mut stats, Duration::from_secs(30)).success());
    let json = std::fs::read_to_string(scratch.path("stats.out")).unwrap();
    let json = json.lines().last().unwrap_or("");
    println!("{json}");
    let per_queue: Vec<u64> = json
        .split("{\"queue\":")
        .skip(1)
        .map(|q| field(&format!("{{\"queue\":{q}"), "rx_packets"))
        .collect();
    assert_eq!(per_queue.len(), 2, "{json}");
    println!(
        "fanout: queue 0 received {}, queue 1 received {}",
        per_queue[0], per_queue[1]
    );
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "a queue received nothing: {per_queue:?}"
    );
    assert_eq!(per_queue.iter().sum::<u64>(), DATAGRAMS);
    assert_eq!(field(json, "rx_packets"), DATAGRAMS);
    let names = [peer.name.clone(), dut.name.clone()];
    drop((peer, dut));
    names.iter().for_each(|n| assert_removed(n));
}

/// Lines of a tcpdump capture file as `tcpdump -r FILE -n -e` prints them.
fn tcpdump_lines(file: &Path) -> Vec<String> {
    let o = Command::new("tcpdump")
        .args(["-r", file.to_str().unwrap(), "-n", "-e"])
        .output()
        .expect("tcpdump -r");
    text(&o.stdout).lines().map(str::to_string).collect()
}

/// Linux's `arping -c 3` and `ping -c 5` in one namespace against
/// `oxnet respond af_packet:...` on the other end of a veth (an
/// interface without a kernel address): every request answered, and
/// tcpdump on the Linux side sees exactly the requests Linux sent and the
/// replies oxnet sent, nothing else.
#[test]
fn linux_ping_and_arping_get_every_reply_and_tcpdump_sees_exactly_those_frames() {
    if !netns::available() || !tools_present(&["ping", "arping", "tcpdump", "timeout"]) {
        return;
    }
    let scratch = Scratch::new("respond");
    let linux = quiet_netns("afl");
    let dut = quiet_netns("afr");
    let (linux_if, oxnet_if) = linux.veth_to(&dut);
    linux.ip(&["addr", "add", "10.7.0.1/24", "dev", &linux_if]);
    let capture = scratch.path("linux.pcap");
    let mut tcpdump = spawn_in(
        &linux,
        &[
            "timeout",
            "-s",
            "INT",
            "60",
            "tcpdump",
            "--immediate-mode",
            "-i",
            &linux_if,
            "-n",
            "-U",
            "-w",
            capture.to_str().unwrap(),
        ],
        &scratch.path("tcpdump.out"),
        &scratch.path("tcpdump.err"),
    );
    wait_for(&scratch.path("tcpdump.err"), "listening on", 1, &mut tcpdump);
    let mut respond = spawn_in(
        &dut,
        &[
            OXNET,
            "respond",
            &format!("af_packet:{oxnet_if}"),
            "--ip",
            "10.7.0.2/24",
            "--count",
            "5",
            "--seconds",
            "40",
            "--json",
            "--quiet",
        ],
        &scratch.path("respond.out"),
        &scratch.path("respond.err"),
    );
    wait_for(&scratch.path("respond.err"), "answering ARP", 1, &mut respond);

    // Habets' arping 2.x (Debian's arping): -i interface, -W seconds
    // between requests; its summary "3 packets transmitted, 3 packets
    // received" (arping(8)).
    let arping = linux.run("arping", &["-c", "3", "-W", "0.2", "-i", &linux_if, "10.7.0.2"]);
    let arping_out = text(&arping.stdout);
    assert!(
        arping.status.success() && arping_out.contains("3 packets transmitted, 3 packets received"),
        "{arping_out}{}",
        text(&arping.stderr)
    );
    // ping(8): "5 packets transmitted, 5 received".
    let ping = linux.run("ping", &["-c", "5", "-i", "0.2", "-W", "2", "10.7.0.2"]);
    let ping_out = text(&ping.stdout);
    assert!(
        ping.status.success() && ping_out.contains("5 packets transmitted, 5 received"),
        "{ping_out}{}",
        text(&ping.stderr)
    );
    assert!(wait_bounded(&mut respond, Duration::from_secs(30)).success());
    let respond_json = std::fs::read_to_string(scratch.path("respond.out")).unwrap();
    let respond_json = respond_json.lines().last().unwrap_or("").to_string();
    std::thread::sleep(Duration::from_millis(300));
    interrupt(tcpdump.id());
    wait_bounded(&mut tcpdump, Duration::from_secs(20));

    let lines = tcpdump_lines(&capture);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count() as u64;
    let arp_requests = count("Request who-has 10.7.0.2");
    let arp_replies = count("Reply 10.7.0.2 is-at");
    let echo_requests = count("ICMP echo request");
    let echo_replies = count("ICMP echo reply");
    println!(
        "tcpdump on {linux_if}: {} frames: {arp_requests} ARP requests, {arp_replies} ARP replies, \
         {echo_requests} echo requests, {echo_replies} echo replies\nrespond: {respond_json}",
        lines.len()
    );
    assert_eq!(echo_requests, 5, "{lines:#?}");
    assert_eq!(echo_replies, 5, "{lines:#?}");
    // arping's 3 and the kernel's own for ping (at least one), each
    // answered once.
    assert!(arp_requests >= 4, "{lines:#?}");
    assert_eq!(arp_replies, arp_requests, "{lines:#?}");
    assert_eq!(
        lines.len() as u64,
        arp_requests + arp_replies + echo_requests + echo_replies,
        "{lines:#?}"
    );
    // oxnet's side of the story matches what the wire shows.
    assert_eq!(field(&respond_json, "echo_replies"), 5);
    assert_eq!(field(&respond_json, "arp_replies"), arp_replies);
    assert_eq!(field(&respond_json, "tx_packets"), arp_replies + echo_replies);
    assert_eq!(field(&respond_json, "rx_packets"), arp_requests + echo_requests);
    let names = [linux.name.clone(), dut.name.clone()];
    drop((linux, dut));
    names.iter().for_each(|n| assert_removed(n));
}

fn stats_in(ns: &Netns, spec: &str) -> Output {
    ns.run(OXNET, &["stats", spec, "--seconds", "0.2"])
}

/// The interface's promiscuity count (`ip -d link show`: "promiscuity
/// N"). A packet socket's PACKET_MR_PROMISC membership raises it
/// (dev_set_promiscuity) without setting the IFF_PROMISC flag `ip link`
/// prints, which shows only what SIOCSIFFLAGS asked for.
fn promiscuity(ns: &Netns, name: &str) -> u32 {
    let line = text(&ns.run("ip", &["-d", "-o", "link", "show", name]).stdout);
    let at = line
        .find("promiscuity ")
        .unwrap_or_else(|| panic!("no promiscuity in {line}"));
    line[at + 12..].split_whitespace().next().unwrap().parse().unwrap()
}

/// No such interface, an interface that is down, a user without
/// CAP_NET_RAW, an interface with a kernel address: clear messages, and
/// nothing left behind (no promiscuous flag, no socket, no namespace).
#[test]
fn bad_input_gets_clear_errors_and_leaves_nothing_behind() {
    if !netns::available() || !tools_present(&["setpriv"]) {
        return;
    }
    let ns = quiet_netns("afb");
    let (a, b) = ns.veth_pair();

    let o = stats_in(&ns, "af_packet:nosuch0");
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("there is no network interface 'nosuch0'") && err.contains("oxnet devices"),
        "{err}"
    );

    ns.ip(&["link", "set", &b, "down"]);
    let o = stats_in(&ns, &format!("af_packet:{b}"));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!("interface {b} is down")) && err.contains(&format!("ip link set {b} up")),
        "{err}"
    );

    // As nobody, with no capabilities at all (setpriv(1)).
    let o = ns.run(
        "setpriv",
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            OXNET,
            "stats",
            &format!("af_packet:{a}"),
            "--seconds",
            "0.2",
        ],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("needs CAP_NET_RAW") && err.contains("Operation not permitted"),
        "{err}"
    );

    // A kernel address on the interface: it works, with a warning.
    ns.ip(&["link", "set", &b, "up"]);
    ns.ip(&["addr", "add", "10.8.0.1/24", "dev", &a]);
    let o = stats_in(&ns, &format!("af_packet:{a}"));
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("warning: {a} has the kernel IP address(es) 10.8.0.1")),
        "{err}"
    );

    // Promiscuous membership ended with the socket; no packet socket left.
    for name in [&a, &b] {
        assert_eq!(promiscuity(&ns, name), 0, "{name}");
    }
    let sockets = text(&ns.run("cat", &["/proc/net/packet"]).stdout);
    assert_eq!(sockets.lines().count(), 1, "packet sockets left:\n{sockets}");
    let name = ns.name.clone();
    drop(ns);
    assert_removed(&name);
}

/// While oxnet runs, the interface is promiscuous (PACKET_MR_PROMISC);
/// with --no-promisc it is not.
#[test]
fn promiscuous_membership_holds_while_open_only() {
    if !netns::available() {
        return;
    }
    let scratch = Scratch::new("promisc");
    let ns = quiet_netns("afp");
    let (a, _b) = ns.veth_pair();
    for (extra, expect) in [(None, true), (Some("--no-promisc"), false)] {
        let mut args = vec![OXNET, "stats", "--seconds", "1.5"];
        let spec = format!("af_packet:{a}");
        args.push(&spec);
        args.extend(extra);
        let mut stats = spawn_in(&ns, &args, &scratch.path("out"), &scratch.path("err"));
        let ifindex: u32 = text(&ns.run("cat", &[&format!("/sys/class/net/{a}/ifindex")]).stdout)
            .trim()
            .parse()
            .unwrap();
        let start = Instant::now();
        while running_packet_sockets(&ns, ifindex) < 1 {
            assert!(start.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(promiscuity(&ns, &a), expect as u32);
        assert!(wait_bounded(&mut stats, Duration::from_secs(20)).success());
        assert_eq!(promiscuity(&ns, &a), 0);
    }
}

/// Sends `frames` on interface `ifname` of namespace `ns` from a thread
/// of this test that enters the namespace (setns(2) changes only the
/// calling thread's namespace) and uses a plain AF_PACKET socket.
fn send_raw_frames(ns: &Netns, ifname: &str, frames: Vec<Vec<u8>>) {
    let path = format!("/var/run/netns/{}", ns.name);
    let ifname = ifname.to_string();
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let netns = File::open(&path).expect("namespace file");
        // SAFETY: plain system calls on descriptors this thread owns;
        // sockaddr_ll is filled before use; the frames live for each call.
        unsafe {
            assert_eq!(libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET), 0, "setns");
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let name = std::ffi::CString::new(ifname).unwrap();
            let mut address: libc::sockaddr_ll = std::mem::zeroed();
            address.sll_family = libc::AF_PACKET as u16;
            address.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            address.sll_halen = 6;
            for frame in &frames {
                let sent = libc::sendto(
                    fd,
                    frame.as_ptr() as *const libc::c_void,
                    frame.len(),
                    0,
                    &address as *const libc::sockaddr_ll as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                );
                assert_eq!(sent, frame.len() as isize, "{}", std::io::Error::last_os_error());
            }
            libc::close(fd);
        }
    })
    .join()
    .expect("sender thread");
}

/// An 802.1Q-tagged (VLAN `vlan`) IPv4/UDP frame to `dst`, UDP checksum 0
/// ("no checksum", RFC 768), IPv4 header checksum computed (RFC 791).
fn tagged_udp_frame(dst: [u8; 6], vlan: u16, port: u16) -> Vec<u8> {
    let payload = b"oxnet vlan test";
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x05]);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vlan.to_be_bytes());
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 6, 0, 1, 10, 6, 0, 2];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let sum = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Frames as the wire had them.
///
/// * VLAN: 3 frames with an 802.1Q tag (id 5) sent raw on the Linux end
///   of the veth. The receiving kernel takes the tag out of the frame
///   (skb_vlan_untag in __netif_receive_skb_core) and hands packet
///   sockets the tag out of band (TP_STATUS_VLAN_VALID); oxnet must put it
///   back: tcpdump reads "vlan 5" in each captured frame.
/// * Partial checksums: 3 UDP datagrams from a Linux socket. veth offers
///   checksum offload, so their UDP checksum is only the pseudo-header
///   sum (TP_STATUS_CSUMNOTREADY); oxnet completes it: tcpdump says
///   "udp sum ok" for each.
#[test]
fn vlan_tags_and_partial_checksums_of_linux_frames_arrive_as_on_the_wire() {
    if !netns::available() || !tools_present(&["tcpdump"]) {
        return;
    }
    let scratch = Scratch::new("vlan");
    let linux = quiet_netns("afl");
    let dut = quiet_netns("afv");
    let (linux_if, oxnet_if) = linux.veth_to(&dut);
    linux.ip(&["addr", "add", "10.6.0.1/24", "dev", &linux_if]);
    let mac_text = text(&dut.run("cat", &[&format!("/sys/class/net/{oxnet_if}/address")]).stdout)
        .trim()
        .to_string();
    let mut mac = [0u8; 6];
    for (byte, hex) in mac.iter_mut().zip(mac_text.split(':')) {
        *byte = u8::from_str_radix(hex, 16).unwrap();
    }
    linux.ip(&[
        "neigh",
        "add",
        "10.6.0.2",
        "lladdr",
        &mac_text,
        "dev",
        &linux_if,
        "nud",
        "permanent",
    ]);
    let capture = scratch.path("frames.pcap");
    let mut pcap = spawn_in(
        &dut,
        &[
            OXNET,
            "pcap",
            &format!("af_packet:{oxnet_if}"),
            capture.to_str().unwrap(),
            "--count",
            "6",
            "--seconds",
            "20",
            "--json",
            "--quiet",
        ],
        &scratch.path("pcap.out"),
        &scratch.path("pcap.err"),
    );
    wait_for(&scratch.path("pcap.err"), "ready", 1, &mut pcap);
    send_raw_frames(
        &linux,
        &linux_if,
        (1..=3).map(|k| tagged_udp_frame(mac, 5, 40000 + k)).collect(),
    );
    let send = linux.run(
        "bash",
        &[
            "-c",
            "for p in 41001 41002 41003; do printf 'oxnet csum test' > /dev/udp/10.6.0.2/$p; done",
        ],
    );
    assert!(send.status.success(), "{}", text(&send.stderr));
    assert!(wait_bounded(&mut pcap, Duration::from_secs(30)).success());
    let o = Command::new("tcpdump")
        .args(["-r", capture.to_str().unwrap(), "-n", "-e", "-vv"])
        .output()
        .expect("tcpdump -r");
    let out = text(&o.stdout);
    println!("{out}");
    let tagged = out
        .lines()
        .filter(|l| l.contains("ethertype 802.1Q (0x8100)") && l.contains("vlan 5"))
        .count();
    assert_eq!(tagged, 3, "{out}");
    // (Ports away from those tcpdump decodes as other protocols.)
    for port in 40001..=40003 {
        assert!(
            out.contains(&format!("10.6.0.1.40000 > 10.6.0.2.{port}: [no cksum] UDP, length 15")),
            "{port}: {out}"
        );
    }
    assert_eq!(out.matches("[udp sum ok]").count(), 3, "{out}");
    assert!(!out.contains("bad udp cksum"), "{out}");
    for port in ["41001", "41002", "41003"] {
        assert!(
            out.contains(&format!("10.6.0.2.{port}: [udp sum ok] UDP, length 15")),
            "{port}: {out}"
        );
    }
}

/// `oxnet fwd --queues 2` on the natively split device (one thread per
/// queue, no lock): 200 UDP flows from Linux enter queue 0 or 1 of a1 by
/// their hash, both threads forward, and pcap on the far end counts
/// exactly 200.
#[test]
fn fwd_with_two_queues_forwards_every_flow_on_both_threads() {
    if !netns::available() {
        return;
    }
    const DATAGRAMS: u64 = 200;
    let scratch = Scratch::new("mq");
    let linux = quiet_netns("afl");
    let dut = quiet_netns("afq");
    let (linux_if, a1) = linux.veth_to(&dut);
    let (b0, b1) = dut.veth_pair();
    linux.ip(&["addr", "add", "10.4.0.1/24", "dev", &linux_if]);
    let mac = text(&dut.run("cat", &[&format!("/sys/class/net/{a1}/address")]).stdout)
        .trim()
        .to_string();
    linux.ip(&[
        "neigh",
        "add",
        "10.4.0.2",
        "lladdr",
        &mac,
        "dev",
        &linux_if,
        "nud",
        "permanent",
    ]);
    let capture = scratch.path("mq.pcap");
    let mut pcap = spawn_in(
        &dut,
        &[
            OXNET,
            "pcap",
            &format!("af_packet:{b1}"),
            capture.to_str().unwrap(),
            "--count",
            &DATAGRAMS.to_string(),
            "--seconds",
            "30",
            "--json",
            "--quiet",
        ],
        &scratch.path("pcap.out"),
        &scratch.path("pcap.err"),
    );
    let mut fwd = spawn_in(
        &dut,
        &[
            OXNET,
            "fwd",
            &format!("af_packet:{a1}"),
            &format!("af_packet:{b0}"),
            "--queues",
            "2",
            "--seconds",
            "30",
            "--json",
            "--quiet",
        ],
        &scratch.path("fwd.out"),
        &scratch.path("fwd.err"),
    );
    wait_for(&scratch.path("pcap.err"), "ready", 1, &mut pcap);
    wait_for(&scratch.path("fwd.err"), "ready: 2 queue pairs", 1, &mut fwd);
    let send = linux.run(
        "bash",
        &[
            "-c",
            &format!(
                "for p in $(seq 30000 {}); do printf x > /dev/udp/10.4.0.2/$p; done",
                30000 + DATAGRAMS - 1
            ),
        ],
    );
    assert!(send.status.success(), "{}", text(&send.stderr));
    assert!(wait_bounded(&mut pcap, Duration::from_secs(30)).success());
    interrupt(fwd.id());
    assert!(wait_bounded(&mut fwd, Duration::from_secs(30)).success());
    let fwd_out = std::fs::read_to_string(scratch.path("fwd.out")).unwrap();
    let fwd_err = std::fs::read_to_string(scratch.path("fwd.err")).unwrap();
    let fwd_json = fwd_out.lines().last().unwrap_or("");
    let pcap_json = std::fs::read_to_string(scratch.path("pcap.out")).unwrap();
    println!("{fwd_err}{fwd_json}");
    assert_eq!(field(pcap_json.lines().last().unwrap(), "captured"), DATAGRAMS);
    assert_eq!(field(fwd_json, "forwarded"), DATAGRAMS, "{fwd_json}");
    for q in 0..2 {
        let line = fwd_err
            .lines()
            .find(|l| l.starts_with(&format!("queue {q}: forwarded ")))
            .unwrap_or_else(|| panic!("no line for queue {q}: {fwd_err}"));
        let n: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(n > 0, "queue {q} forwarded nothing: {fwd_err}");
    }
}
