//! `tap:NAME` devices (issue 9 item 1), as root, everything inside network
//! namespaces made and removed here (tests/common/netns.rs):
//!
//! * pktgen → fwd → pcap over four TAPs bridged in pairs by the kernel:
//!   every sequence number once and in order, and nothing else on the
//!   capture (IPv6 is off in the namespace, so Linux sends no router
//!   solicitations or MLD reports);
//! * Linux `ping -c 5` and `arping -c 3` against `oxnet respond` on a TAP
//!   whose kernel side has the address (`--tap-ip`): exact reply counts,
//!   and tcpdump on the kernel side sees exactly those frames;
//! * IFF_VNET_HDR: a TSO request of 3 MSS written into one TAP comes out
//!   of another as 3 segments with valid checksums (the kernel acted on
//!   the virtio-net header, VirtIO 1.0 §5.1.6.2), and a checksum request
//!   is filled in; the same over IPv6 (gso_type TCPV6, forwarded by Linux
//!   in a namespace with IPv6 on);
//! * multi-queue: two queues (IFF_MULTI_QUEUE) both receive;
//! * bad input: invalid names, a name taken by a veth or a TUN device,
//!   `nobody` (no CAP_NET_ADMIN): clear errors; a TAP oxnet created is
//!   gone after it exits, a persistent one stays; no stray TAP devices.

mod common;
use common::netns::{self, Netns};
use common::{field, json_line, text};
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// Namespaces of this file start with this prefix (stray check).
const PREFIX: &str = "tap";

/// A namespace with IPv6 off for every interface made in it from now on
/// (net.ipv6.conf.default), so the kernel sends nothing of its own.
fn quiet_netns() -> Netns {
    let ns = Netns::new(PREFIX);
    for key in ["net/ipv6/conf/default/disable_ipv6", "net/ipv6/conf/all/disable_ipv6"] {
        set_sysctl(&ns, key, "1");
    }
    // Bridged frames skip iptables (br_netfilter, when the host has it
    // loaded, would validate and filter them; per namespace since 5.3).
    if std::path::Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables").exists() {
        set_sysctl(&ns, "net/bridge/bridge-nf-call-iptables", "0");
    }
    ns
}

/// Writes `/proc/sys/KEY` from inside `ns` (the namespace's own value;
/// no dependency on procps' sysctl).
fn set_sysctl(ns: &Netns, key: &str, value: &str) {
    let o = ns.run("sh", &["-c", &format!("echo {value} > /proc/sys/{key}")]);
    assert!(o.status.success(), "{key}: {}", text(&o.stderr));
}

/// Root-namespace interfaces whose name starts with `prefix`: none of the
/// tests' TAPs may appear there.
fn root_links_with_prefix(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// A scratch directory removed on drop.
struct Dir(PathBuf);
impl Dir {
    fn new() -> Dir {
        let d = std::env::temp_dir().join(netns::unique("tapd"));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `program args` in `ns` under `timeout` seconds, stdout and
/// stderr to files in `dir` named after `name`.
fn spawn(ns: &Netns, dir: &Dir, name: &str, timeout: u32, program: &str, args: &[&str]) -> Child {
    let out = std::fs::File::create(dir.file(&format!("{name}.out"))).unwrap();
    let err = std::fs::File::create(dir.file(&format!("{name}.err"))).unwrap();
    ns.command("timeout")
        .arg("-s")
        .arg("INT")
        .arg(timeout.to_string())
        .arg(program)
        .args(args)
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn")
}

fn read(dir: &Dir, file: &str) -> String {
    std::fs::read_to_string(dir.file(file)).unwrap_or_default()
}

/// Waits until `dir/file` contains `needle` `times` times (20 s at most;
/// fails early if `child` exits).
fn wait_for(dir: &Dir, file: &str, needle: &str, times: usize, child: &mut Child) {
    let start = Instant::now();
    while read(dir, file).matches(needle).count() < times {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{file}: exited ({status}) before '{needle}':\n{}", read(dir, file));
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{file}: no '{needle}' after 20 s:\n{}",
            read(dir, file)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: &mut Child, dir: &Dir, name: &str) -> (String, String) {
    let status = child.wait().unwrap();
    let (out, err) = (read(dir, &format!("{name}.out")), read(dir, &format!("{name}.err")));
    assert!(status.success(), "{name} failed ({status}):\n{out}\n{err}");
    (out, err)
}

fn last_line(s: &str) -> String {
    s.lines().last().unwrap_or("").to_string()
}

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// A persistent TAP made by iproute2 in `ns` (oxnet uses it as it is).
fn persistent_tap(ns: &Netns, name: &str, extra: &[&str]) {
    let mut args = vec!["tuntap", "add", "mode", "tap", "name", name];
    args.extend_from_slice(extra);
    ns.ip(&args);
}

#[test]
fn pktgen_fwd_pcap_over_bridged_taps_every_sequence_once_in_order() {
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let dir = Dir::new();
    // pktgen tap:a  ==br1==  tap:b  fwd  tap:c  ==br2==  tap:d pcap
    let [a, b, c, d] = ["ta", "tb", "tc", "td"].map(netns::unique);
    let (br1, br2) = (netns::unique("br"), netns::unique("br"));
    for tap in [&a, &b, &c, &d] {
        persistent_tap(&ns, tap, &[]);
        // Room for a scheduling hiccup of oxnet on a busy machine: the
        // kernel's queue towards the fd holds tx_queue_len frames.
        ns.ip(&["link", "set", tap, "txqueuelen", "10000"]);
    }
    for (br, x, y) in [(&br1, &a, &b), (&br2, &c, &d)] {
        ns.ip(&["link", "add", br, "type", "bridge", "mcast_snooping", "0"]);
        ns.ip(&["link", "set", x, "master", br]);
        ns.ip(&["link", "set", y, "master", br]);
        ns.ip(&["link", "set", br, "up"]);
    }
    let count = 5000u64;
    let pcap_file = dir.file("out.pcap");
    let (sa, sb, sc, sd) = (
        format!("tap:{a}"),
        format!("tap:{b}"),
        format!("tap:{c}"),
        format!("tap:{d}"),
    );
    let cnt = count.to_string();
    let mut pcap = spawn(
        &ns,
        &dir,
        "pcap",
        60,
        OXNET,
        &[
            "pcap",
            &sd,
            pcap_file.to_str().unwrap(),
            "--count",
            &cnt,
            "--json",
            "--quiet",
        ],
    );
    let mut fwd = spawn(&ns, &dir, "fwd", 60, OXNET, &["fwd", &sb, &sc, "--json", "--quiet"]);
    wait_for(&dir, "pcap.err", "ready", 1, &mut pcap);
    wait_for(&dir, "fwd.err", "ready", 2, &mut fwd);
    let gen = ns.oxnet(&["pktgen", &sa, "--count", &cnt, "--rate", "0.01", "--json", "--quiet"]);
    assert!(gen.status.success(), "pktgen: {}", text(&gen.stderr));
    let (pcap_out, _) = finish(&mut pcap, &dir, "pcap");
    // SAFETY: signalling the `timeout` process we started, by its pid; it
    // passes SIGINT on to fwd, which prints its totals.
    unsafe { libc::kill(fwd.id() as libc::pid_t, libc::SIGINT) };
    let (fwd_out, _) = finish(&mut fwd, &dir, "fwd");
    let gen_json = json_line(&gen);
    let pcap_json = last_line(&pcap_out);
    let fwd_json = last_line(&fwd_out);
    println!("pktgen: {gen_json}\nfwd: {fwd_json}\npcap: {pcap_json}");
    assert_eq!(field(&gen_json, "sent"), count);
    assert_eq!(field(&fwd_json, "forwarded"), count, "{fwd_json}");
    assert_eq!(field(&pcap_json, "captured"), count);
    // Read back independently of pcap's own checker: every frame in the
    // file is a pktgen frame, sequence numbers 0..count once, in order.
    let frames = oxnet::pcap::read_frames(&pcap_file).unwrap();
    let seqs: Vec<u64> = frames
        .iter()
        .map(|f| oxnet::frame::sequence(f).unwrap_or_else(|| panic!("a frame that is not pktgen's: {f:02x?}")))
        .collect();
    assert_eq!(seqs, (0..count).collect::<Vec<_>>());
    // Persistent TAPs are used as they are: still there after oxnet exits.
    let links = ns.links();
    for tap in [&a, &b, &c, &d] {
        assert!(links.contains(tap), "{tap} (persistent) removed: {links:?}");
    }
    drop(ns);
    assert!(root_links_with_prefix("t")
        .iter()
        .all(|l| ![&a, &b, &c, &d].contains(&l)));
}

/// Frames of a tcpdump -e -nn listing, by kind.
fn tcpdump_kinds(listing: &str) -> (usize, usize, usize, usize, usize) {
    let (mut arp_req, mut arp_rep, mut echo_req, mut echo_rep, mut other) = (0, 0, 0, 0, 0);
    for l in listing.lines().filter(|l| !l.trim().is_empty()) {
        if l.contains("ARP") && l.contains("Request") {
            arp_req += 1;
        } else if l.contains("ARP") && l.contains("Reply") {
            arp_rep += 1;
        } else if l.contains("ICMP echo request") {
            echo_req += 1;
        } else if l.contains("ICMP echo reply") {
            echo_rep += 1;
        } else {
            other += 1;
        }
    }
    (arp_req, arp_rep, echo_req, echo_rep, other)
}

#[test]
fn ping_and_arping_get_exact_replies_and_tcpdump_sees_exactly_them() {
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let dir = Dir::new();
    let tap = netns::unique("tp");
    let spec = format!("tap:{tap}");
    // oxnet creates the TAP and gives its kernel side 10.77.0.1/24.
    let mut respond = spawn(
        &ns,
        &dir,
        "respond",
        60,
        OXNET,
        &[
            "respond",
            &spec,
            "--ip",
            "10.77.0.2/24",
            "--tap-ip",
            "10.77.0.1/24",
            "--count",
            "5",
            "--json",
            "--quiet",
        ],
    );
    wait_for(&dir, "respond.err", "answering", 1, &mut respond);
    let ip = ns.run("ip", &["-4", "-o", "addr", "show", "dev", &tap]);
    assert!(text(&ip.stdout).contains("inet 10.77.0.1/24"), "{}", text(&ip.stdout));
    let pcap_file = dir.file("kernel.pcap");
    let mut tcpdump = spawn(
        &ns,
        &dir,
        "tcpdump",
        30,
        "tcpdump",
        &[
            "-i",
            &tap,
            "-U",
            "--immediate-mode",
            "-n",
            "-w",
            pcap_file.to_str().unwrap(),
        ],
    );
    wait_for(&dir, "tcpdump.err", "listening on", 1, &mut tcpdump);
    // Thomas Habets' arping (Debian's `arping`): -c count, -i interface.
    let arping = ns.run("timeout", &["20", "arping", "-c", "3", "-i", &tap, "10.77.0.2"]);
    let arping_out = text(&arping.stdout);
    assert!(arping.status.success(), "arping: {arping_out}{}", text(&arping.stderr));
    // arping(8): one line "N bytes from MAC (IP): index=K time=..." per reply.
    assert_eq!(arping_out.matches("bytes from").count(), 3, "{arping_out}");
    let ping = ns.run(
        "timeout",
        &["20", "ping", "-c", "5", "-i", "0.2", "-W", "2", "10.77.0.2"],
    );
    let ping_out = text(&ping.stdout);
    assert!(ping.status.success(), "ping: {ping_out}");
    // ping(8) summary line.
    assert!(
        ping_out.contains("5 packets transmitted, 5 received, 0% packet loss"),
        "{ping_out}"
    );
    let (respond_out, _) = finish(&mut respond, &dir, "respond");
    let json = last_line(&respond_out);
    println!("respond: {json}");
    assert_eq!(field(&json, "echo_replies"), 5);
    // arping's 3 requests and the kernel's one before its first ping.
    assert_eq!(field(&json, "arp_replies"), 4);
    assert_eq!(field(&json, "ignored"), 0);
    assert_eq!(field(&json, "tx_packets"), 9);
    // oxnet created the TAP: it is gone with oxnet, and tcpdump with it.
    let start = Instant::now();
    while tcpdump.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if tcpdump.try_wait().unwrap().is_none() {
        // SAFETY: our own child (`timeout`), by pid.
        unsafe { libc::kill(tcpdump.id() as libc::pid_t, libc::SIGINT) };
    }
    let _ = tcpdump.wait();
    assert!(
        !ns.links().contains(&tap),
        "the TAP oxnet created outlived it: {:?}",
        ns.links()
    );
    let listing = Command::new("tcpdump")
        .args(["-r", pcap_file.to_str().unwrap(), "-n", "-e"])
        .output()
        .unwrap();
    let listing = text(&listing.stdout);
    println!("tcpdump on the kernel side:\n{listing}");
    assert_eq!(tcpdump_kinds(&listing), (4, 4, 5, 5, 0), "{listing}");
    drop(ns);
    assert!(root_links_with_prefix("tp").iter().all(|l| l != &tap));
}

// ----- the driver through the library, in a thread inside the namespace -----

use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO};
use oxnet_driver::{Config, Device, Mempool, Packet, PacketBatch, TxOffload};

/// Runs the part of test `test` that uses the driver as a library inside
/// `ns`: this test binary runs itself again, only that test, under `ip
/// netns exec` (which also mounts the namespace's own /sys, where the
/// driver reads interface state), with `OXNET_TAP_CHILD` holding `args`
/// separated by spaces. The child's assertions are the test's; its output
/// is printed.
fn run_child(ns: &Netns, test: &str, args: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let o = ns
        .command("timeout")
        .args(["60"])
        .arg(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env("OXNET_TAP_CHILD", args.join(" "))
        .output()
        .unwrap();
    println!("child {test}:\n{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "child {test} failed");
    assert!(text(&o.stdout).contains("CHILD DONE"), "the child did not run its part");
}

/// In the child of [`run_child`]: its arguments.
fn child_args() -> Option<Vec<String>> {
    std::env::var("OXNET_TAP_CHILD")
        .ok()
        .map(|a| a.split(' ').map(str::to_string).collect())
}

/// RFC 1071 Internet checksum of `data` with `sum` added (written here,
/// not taken from oxnet, to check oxnet's and the kernel's).
fn rfc1071(data: &[u8], mut sum: u32) -> u16 {
    for pair in data.chunks(2) {
        let word = if pair.len() == 2 {
            u16::from_be_bytes([pair[0], pair[1]])
        } else {
            (pair[0] as u16) << 8
        };
        sum += word as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// IPv4 header and TCP checksums of an Ethernet/IPv4/TCP frame are valid
/// (RFC 791 §3.1, RFC 793 §3.1 with the pseudo header).
fn checksums_valid(frame: &[u8]) -> bool {
    let ip = &frame[14..34];
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let tcp = &frame[34..14 + total];
    let mut pseudo = 0u32;
    for w in [&ip[12..14], &ip[14..16], &ip[16..18], &ip[18..20]] {
        pseudo += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    pseudo += 6 + tcp.len() as u32;
    rfc1071(ip, 0) == 0 && rfc1071(tcp, pseudo) == 0
}

/// Ethernet + IPv4 + TCP (20-byte header) with `payload` bytes, to `dst`.
fn tcp_frame(dst: [u8; 6], src: [u8; 6], payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 20 + payload) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0x12,
        0x34,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ]);
    f.extend_from_slice(&[10, 78, 0, 2, 10, 78, 1, 2]);
    f.extend_from_slice(&[
        0x30, 0x39, 0x00, 0x50, 0, 0, 0x10, 0, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f.extend((0..payload).map(|i| (i % 251) as u8));
    f
}

/// Receives until `n` frames came or 5 s passed.
fn receive(dev: &mut dyn Device, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = PacketBatch::with_capacity(64);
    let start = Instant::now();
    while got.len() < n && start.elapsed() < Duration::from_secs(5) {
        dev.rx_batch(0, &mut batch, 64);
        for p in batch.iter() {
            got.push(p.to_vec());
        }
        batch.clear();
        std::thread::sleep(Duration::from_millis(1));
    }
    // Anything more that arrives shortly after is reported too.
    std::thread::sleep(Duration::from_millis(100));
    dev.rx_batch(0, &mut batch, 64);
    got.extend(batch.iter().map(|p| p.to_vec()));
    got
}

#[test]
fn vnet_hdr_tso_request_of_3_mss_comes_out_as_3_segments_with_valid_checksums() {
    if let Some(args) = child_args() {
        return tso_child(&args[0], &args[1]);
    }
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    // tap:s (vnet_hdr, oxnet sends, kernel side 10.78.0.1/24) -> Linux
    // routes -> tap:r (plain, oxnet receives, kernel side 10.78.1.1/24).
    // r cannot take GSO frames or partial checksums (no TUNSETOFFLOAD),
    // so the kernel segments and checksums on its way out to r: what r
    // reads is what the kernel made of our header. (Routed, not bridged:
    // through a bridge the GSO frame did not arrive on Linux 6.18; not
    // investigated further.)
    let (s, r) = (netns::unique("ts"), netns::unique("tr"));
    persistent_tap(&ns, &s, &[]);
    persistent_tap(&ns, &r, &[]);
    ns.ip(&["addr", "add", "10.78.0.1/24", "dev", &s]);
    ns.ip(&["addr", "add", "10.78.1.1/24", "dev", &r]);
    set_sysctl(&ns, "net/ipv4/ip_forward", "1");
    run_child(
        &ns,
        "vnet_hdr_tso_request_of_3_mss_comes_out_as_3_segments_with_valid_checksums",
        &[&s, &r],
    );
    drop(ns);
}

fn tso_child(s2: &str, r2: &str) {
    let config = Config::default();
    let mut sender = oxnet_driver::open(&format!("tap:{s2},vnet_hdr"), &config).unwrap();
    let mut receiver = oxnet_driver::open(&format!("tap:{r2}"), &config).unwrap();
    // To the kernel side of s (the router); from r's kernel side to us:
    // a static neighbour for 10.78.1.2 at r's oxnet MAC.
    let dst = oxnet_driver::netif::mac(s2).unwrap();
    let src = sender.mac();
    static_neighbour(&[], "10.78.1.2", receiver.mac(), r2);
    let pool = sender.mempool(0);
    let mss = 1000usize;
    // One packet of 3 MSS of payload: a chain (it does not fit one
    // 2048-byte buffer), TSO requested.
    let tso = TxOffload {
        flags: TX_TSO,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: mss as u16,
    };
    let mut batch = PacketBatch::with_capacity(4);
    batch.push(offload_packet(&pool, &tcp_frame(dst, src, 3 * mss), tso));
    assert_eq!(sender.tx_batch(0, &mut batch), 1);
    let frames = receive(&mut *receiver, 3);
    // A checksum request alone (IPv4 header and TCP): the frame was
    // built with both sums zero.
    let csum = TxOffload {
        flags: TX_IP_CSUM | TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 0,
    };
    batch.push(offload_packet(&pool, &tcp_frame(dst, src, 100), csum));
    assert_eq!(sender.tx_batch(0, &mut batch), 1);
    let csum_frames = receive(&mut *receiver, 1);
    let tx = sender.stats();
    assert_eq!(tx.tx_packets, 2);
    assert_eq!(tx.tx_invalid, 0);
    let kernel = |counter: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{s2}/statistics/{counter}")).unwrap_or_default()
    };
    assert_eq!(
        frames.len(),
        3,
        "segments: {:?}; kernel side of {s2}: rx_packets {} rx_dropped {} rx_errors {}",
        frames.iter().map(|f| f.len()).collect::<Vec<_>>(),
        kernel("rx_packets").trim(),
        kernel("rx_dropped").trim(),
        kernel("rx_errors").trim()
    );
    for (k, f) in frames.iter().enumerate() {
        // Each segment: 14 + 20 + 20 + 1000 bytes, its sequence number
        // advanced by the payload before it (RFC 793 §3.3).
        assert_eq!(f.len(), 14 + 20 + 20 + 1000, "segment {k}");
        let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
        assert_eq!(seq, 4096 + 1000 * k as u32, "segment {k} sequence number");
        assert_eq!(
            &f[54..],
            &tcp_frame([0; 6], [0; 6], 3000)[54 + 1000 * k..54 + 1000 * (k + 1)],
            "segment {k} payload"
        );
        assert!(checksums_valid(f), "segment {k}: bad checksum");
        // Routed once: TTL 64 - 1 (RFC 791 §3.2).
        assert_eq!(f[22], 63, "segment {k} TTL");
    }
    assert_eq!(csum_frames.len(), 1);
    assert!(checksums_valid(&csum_frames[0]), "checksum request not filled in");
    println!("CHILD DONE: 3 segments of 1000 bytes, checksums valid; checksum request filled in");
}

/// A permanent neighbour entry (`ip [FAMILY] neigh replace ADDR lladdr
/// MAC dev DEV nud permanent`): the kernel sends ADDR's frames to MAC.
fn static_neighbour(family: &[&str], addr: &str, mac: [u8; 6], dev: &str) {
    let mac = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    let st = Command::new("ip")
        .args(family)
        .args(["neigh", "replace", addr, "lladdr", &mac, "dev", dev, "nud", "permanent"])
        .status()
        .unwrap();
    assert!(st.success());
}

/// `bytes` in a packet of `pool` (chained in pieces of 1500 bytes when
/// they do not fit one 2048-byte buffer) with `offload` requested.
fn offload_packet(pool: &Mempool, bytes: &[u8], offload: TxOffload) -> Packet {
    let mut p = common::chained(pool, bytes, 1500);
    p.set_tx_offload(offload);
    p
}

/// An Ethernet/IPv6/TCP frame (RFC 8200 §3; fd78::2 to fd78:1::2, hop
/// limit 64, sequence 4096, ACK PSH) with `payload` bytes, to `dst`;
/// the TCP checksum zero.
fn tcp6_frame(dst: [u8; 6], src: [u8; 6], payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[6, 64]);
    f.extend_from_slice(&[0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0xfd, 0x78, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[
        0x30, 0x39, 0x00, 0x50, 0, 0, 0x10, 0, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f.extend((0..payload).map(|i| (i % 251) as u8));
    f
}

/// The TCP checksum of an Ethernet/IPv6/TCP frame is valid (RFC 8200
/// §8.1: the pseudo-header of both addresses, the 32-bit upper-layer
/// length and next header 6).
fn ipv6_checksum_valid(frame: &[u8]) -> bool {
    let length = u16::from_be_bytes([frame[18], frame[19]]) as usize;
    let mut pseudo = 6 + length as u32;
    for w in frame[22..54].chunks(2) {
        pseudo += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    rfc1071(&frame[54..54 + length], pseudo) == 0
}

/// [`vnet_hdr_tso_request_of_3_mss_comes_out_as_3_segments_with_valid_checksums`]
/// over IPv6: the request travels as gso_type TCPV6, Linux forwards the
/// packet between the two TAPs and cuts it on the way out.
#[test]
fn vnet_hdr_ipv6_tso_request_of_3_mss_comes_out_as_3_segments_with_valid_checksums() {
    if let Some(args) = child_args() {
        return tso6_child(&args[0], &args[1]);
    }
    if !netns::available() {
        return;
    }
    // IPv6 on (not quiet_netns): the kernel routes it. Its own frames
    // (MLD reports, router solicitations) are told apart by the child.
    let ns = Netns::new(PREFIX);
    set_sysctl(&ns, "net/ipv6/conf/all/forwarding", "1");
    let (s, r) = (netns::unique("t6s"), netns::unique("t6r"));
    persistent_tap(&ns, &s, &[]);
    persistent_tap(&ns, &r, &[]);
    ns.ip(&["-6", "addr", "add", "fd78::1/64", "dev", &s, "nodad"]);
    ns.ip(&["-6", "addr", "add", "fd78:1::1/64", "dev", &r, "nodad"]);
    run_child(
        &ns,
        "vnet_hdr_ipv6_tso_request_of_3_mss_comes_out_as_3_segments_with_valid_checksums",
        &[&s, &r],
    );
    drop(ns);
}

fn tso6_child(s2: &str, r2: &str) {
    let config = Config::default();
    let mut sender = oxnet_driver::open(&format!("tap:{s2},vnet_hdr"), &config).unwrap();
    let mut receiver = oxnet_driver::open(&format!("tap:{r2}"), &config).unwrap();
    let dst = oxnet_driver::netif::mac(s2).unwrap();
    let src = sender.mac();
    static_neighbour(&["-6"], "fd78:1::2", receiver.mac(), r2);
    // Interfaces just up: give the kernel a moment (its own first frames).
    std::thread::sleep(Duration::from_millis(200));
    let _ = receive(&mut *receiver, 0);
    let pool = sender.mempool(0);
    let mss = 1000usize;
    let tso = TxOffload {
        flags: TX_TSO,
        l2_len: 14,
        l3_len: 40,
        l4_len: 20,
        mss: mss as u16,
    };
    let mut batch = PacketBatch::with_capacity(4);
    batch.push(offload_packet(&pool, &tcp6_frame(dst, src, 3 * mss), tso));
    assert_eq!(sender.tx_batch(0, &mut batch), 1);
    // Only our TCP frames (next header 6): the kernel's ICMPv6 is not.
    let tcp = |frames: Vec<Vec<u8>>| -> Vec<Vec<u8>> {
        frames
            .into_iter()
            .filter(|f| f.len() >= 74 && f[12..14] == [0x86, 0xdd] && f[20] == 6)
            .collect()
    };
    let frames = tcp(receive(&mut *receiver, 3));
    let csum = TxOffload {
        flags: TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 40,
        l4_len: 20,
        mss: 0,
    };
    batch.push(offload_packet(&pool, &tcp6_frame(dst, src, 100), csum));
    assert_eq!(sender.tx_batch(0, &mut batch), 1);
    let csum_frames = tcp(receive(&mut *receiver, 1));
    let tx = sender.stats();
    assert_eq!((tx.tx_packets, tx.tx_invalid), (2, 0));
    assert_eq!(
        frames.len(),
        3,
        "segments: {:?}",
        frames.iter().map(|f| f.len()).collect::<Vec<_>>()
    );
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(f.len(), 14 + 40 + 20 + 1000, "segment {k}");
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 1020, "segment {k} payload length");
        let seq = u32::from_be_bytes([f[58], f[59], f[60], f[61]]);
        assert_eq!(seq, 4096 + 1000 * k as u32, "segment {k} sequence number");
        assert_eq!(
            &f[74..],
            &tcp6_frame([0; 6], [0; 6], 3000)[74 + 1000 * k..74 + 1000 * (k + 1)],
            "segment {k} payload"
        );
        assert!(ipv6_checksum_valid(f), "segment {k}: bad checksum");
        // Forwarded once: hop limit 64 - 1 (RFC 8200 §3).
        assert_eq!(f[21], 63, "segment {k} hop limit");
    }
    assert_eq!(csum_frames.len(), 1);
    assert!(ipv6_checksum_valid(&csum_frames[0]), "checksum request not filled in");
    println!("CHILD DONE: 3 IPv6 segments of 1000 bytes, checksums valid; checksum request filled in");
}

#[test]
fn two_queues_with_iff_multi_queue_both_receive() {
    if let Some(args) = child_args() {
        return multiqueue_child(&args[0]);
    }
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let tap = netns::unique("tq");
    run_child(&ns, "two_queues_with_iff_multi_queue_both_receive", &[&tap]);
    assert!(!ns.links().contains(&tap), "created multi-queue TAP not removed");
}

fn multiqueue_child(tap2: &str) {
    let config = Config {
        rx_queues: 2,
        tx_queues: 2,
        ..Config::default()
    };
    let mut dev = oxnet_driver::open(&format!("tap:{tap2},ip=10.79.0.1/24"), &config).unwrap();
    assert_eq!(dev.queues(), (2, 2));
    // The kernel needs our MAC for 10.79.0.2: a static neighbour.
    let mac = dev
        .mac()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let st = Command::new("ip")
        .args([
            "neigh",
            "replace",
            "10.79.0.2",
            "lladdr",
            &mac,
            "dev",
            tap2,
            "nud",
            "permanent",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    // 64 UDP flows (source ports): tun picks a queue per flow hash.
    let mut sockets = Vec::new();
    for _ in 0..64 {
        let s = std::net::UdpSocket::bind("10.79.0.1:0").unwrap();
        s.send_to(b"x", "10.79.0.2:9").unwrap();
        sockets.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    // Each queue's poll descriptor (what an idle router sleeps on) is
    // readable while it holds frames, and only then.
    let readable = |dev: &dyn Device, q: u16| {
        let fd = dev.rx_poll_fd(q).expect("a TAP queue has a poll descriptor");
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
    };
    assert!(readable(&*dev, 0) && readable(&*dev, 1), "both queues have frames");
    let mut per_queue = [0usize; 2];
    let mut batch = PacketBatch::with_capacity(128);
    for (q, n) in per_queue.iter_mut().enumerate() {
        *n = dev.rx_batch(q as u16, &mut batch, 128);
        batch.clear();
    }
    println!("frames per queue: {per_queue:?}");
    assert_eq!(per_queue[0] + per_queue[1], 64);
    assert!(per_queue[0] > 0 && per_queue[1] > 0, "{per_queue:?}");
    for q in 0..2 {
        // Drained: not readable, unless a frame came since (then a
        // receive finds it).
        assert!(!readable(&*dev, q) || dev.rx_batch(q, &mut batch, 128) > 0, "queue {q}");
        batch.clear();
    }
    println!("CHILD DONE");
}

// ----- bad input -----

fn fails_with(o: &Output, words: &[&str]) {
    let err = text(&o.stderr);
    assert!(!o.status.success(), "must fail:\n{err}");
    assert!(!err.contains("panicked"), "panicked:\n{err}");
    for w in words {
        assert!(err.contains(w), "stderr lacks {w:?}:\n{err}");
    }
}

#[test]
fn bad_input_gets_clear_errors_and_leaves_no_tap_behind() {
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let before = ns.links();
    for (spec, says) in [
        ("tap:", "empty name"),
        ("tap:a23456789012345x", "not a Linux interface name"),
        ("tap:a/b", "not a Linux interface name"),
        ("tap:ok0,ip=10.0.0.1", "prefix length"),
        ("tap:ok0,bogus", "unknown option"),
    ] {
        fails_with(&ns.oxnet(&["pktgen", spec, "--count", "1"]), &[says]);
    }
    // A name taken by a veth, and by a TUN (layer 3) device.
    let (va, _vb) = ns.veth_pair();
    fails_with(
        &ns.oxnet(&["pktgen", &format!("tap:{va}"), "--count", "1"]),
        &["taken by a veth", "not a TAP"],
    );
    let tun = netns::unique("tu");
    ns.ip(&["tuntap", "add", "mode", "tun", "name", &tun]);
    fails_with(
        &ns.oxnet(&["pktgen", &format!("tap:{tun}"), "--count", "1"]),
        &["TUN (layer 3)"],
    );
    // No CAP_NET_ADMIN: setpriv(1) to nobody drops every capability
    // (capabilities(7): a change of all UIDs from 0 clears them).
    let name = netns::unique("tn");
    let o = ns
        .command("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            OXNET,
            "pktgen",
            &format!("tap:{name}"),
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    fails_with(&o, &["CAP_NET_ADMIN", &name]);
    // A persistent TAP owned by `nobody` (tuntap.rst §3: the owner may
    // attach without CAP_NET_ADMIN): refused while down, with the fix named;
    // used once it is up.
    let owned = netns::unique("to");
    persistent_tap(&ns, &owned, &["user", "nobody"]);
    let as_nobody = |spec: &str| {
        ns.command("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                OXNET,
                "pktgen",
                spec,
            ])
            .args(["--count", "3", "--json", "--quiet"])
            .output()
            .unwrap()
    };
    fails_with(
        &as_nobody(&format!("tap:{owned}")),
        &["CAP_NET_ADMIN", &format!("ip link set {owned} up")],
    );
    ns.ip(&["link", "set", &owned, "up"]);
    let o = as_nobody(&format!("tap:{owned}"));
    assert!(o.status.success(), "as nobody on its own TAP: {}", text(&o.stderr));
    assert_eq!(field(&json_line(&o), "sent"), 3);
    // A TAP oxnet created is gone when it exits.
    let made = netns::unique("tm");
    let o = ns.oxnet(&["pktgen", &format!("tap:{made}"), "--count", "3", "--json", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(field(&json_line(&o), "sent"), 3);
    let mut after = ns.links();
    after.retain(|l| l != &va && l != &_vb && l != &tun && l != &owned);
    assert_eq!(after, before, "stray interfaces in the namespace");
    let name = ns.name.clone();
    drop(ns);
    assert!(
        !netns::namespaces_with_prefix(PREFIX).contains(&name),
        "namespace {name} left behind"
    );
    for prefix in ["tn", "tm", "tu"] {
        let stray: Vec<_> = root_links_with_prefix(prefix)
            .into_iter()
            .filter(|l| l.starts_with(&format!("{prefix}{}x", std::process::id() % 100_000)))
            .collect();
        assert!(stray.is_empty(), "stray TAPs in the root namespace: {stray:?}");
    }
}

#[test]
fn interrupt_mode_sleeps_in_epoll_and_wakes_for_each_frame() {
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let dir = Dir::new();
    let tap = netns::unique("ti");
    let spec = format!("tap:{tap},ip=10.80.0.1/24");
    let mut pcap = spawn(
        &ns,
        &dir,
        "pcap",
        30,
        OXNET,
        &[
            "pcap",
            &spec,
            "/dev/null",
            "--interrupts",
            "--count",
            "3",
            "--seconds",
            "20",
            "--json",
            "--quiet",
        ],
    );
    wait_for(&dir, "pcap.err", "ready", 1, &mut pcap);
    // Three ARP requests, 0.3 s apart, that nobody answers (arping(8):
    // -W is the time between requests); arping's exit status says "no
    // reply", which is expected.
    let _ = ns.run(
        "timeout",
        &["10", "arping", "-c", "3", "-W", "0.3", "-i", &tap, "10.80.0.2"],
    );
    let (out, _) = finish(&mut pcap, &dir, "pcap");
    let json = last_line(&out);
    println!("pcap --interrupts: {json}");
    assert_eq!(field(&json, "captured"), 3);
    assert!(json.contains("\"mode\":\"interrupt\""), "{json}");
    // Asleep in epoll between the requests: woken at least once, and far
    // less CPU than the wall time a polling loop would burn.
    assert!(field(&json, "wakeups") >= 1, "{json}");
    let (cpu, seconds) = (common::number(&json, "cpu_seconds"), common::number(&json, "seconds"));
    assert!(cpu < seconds / 2.0, "cpu {cpu} s over {seconds} s: not sleeping");
}

#[test]
fn kernel_drops_towards_a_full_tap_queue_are_counted() {
    if let Some(args) = child_args() {
        return kernel_drops_child(&args[0]);
    }
    if !netns::available() {
        return;
    }
    let ns = quiet_netns();
    let tap = netns::unique("tk");
    run_child(&ns, "kernel_drops_towards_a_full_tap_queue_are_counted", &[&tap]);
}

fn kernel_drops_child(tap: &str) {
    let mut dev = oxnet_driver::open(&format!("tap:{tap},ip=10.81.0.1/24"), &Config::default()).unwrap();
    // tun keeps at most tx_queue_len frames per queue for the reader and
    // drops the rest, counting them in tx_dropped (drivers/net/tun.c,
    // tun_net_xmit; the ring is resized when txqueuelen changes).
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().unwrap().success());
    ip(&["link", "set", tap, "txqueuelen", "16"]);
    let mac = dev
        .mac()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    ip(&[
        "neigh",
        "replace",
        "10.81.0.2",
        "lladdr",
        &mac,
        "dev",
        tap,
        "nud",
        "permanent",
    ]);
    let socket = std::net::UdpSocket::bind("10.81.0.1:0").unwrap();
    for _ in 0..100 {
        socket.send_to(b"x", "10.81.0.2:9").unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut batch = PacketBatch::with_capacity(128);
    let received = dev.rx_batch(0, &mut batch, 128);
    let stats = dev.stats();
    println!("received {received}, kernel_rx_dropped {}", stats.kernel_rx_dropped);
    assert_eq!(received, 16);
    assert_eq!(stats.rx_packets, 16);
    assert_eq!(stats.kernel_rx_dropped, 84);
    println!("CHILD DONE");
}
