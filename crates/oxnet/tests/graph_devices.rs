//! FromDevice and ToDevice over software 82599 ports (no hardware, no
//! root): the shipped conf/fwd.click forwards every packet exactly once,
//! and `-j 2` runs one graph per thread, each on its own RSS queue, whose
//! counters add up to exactly what was sent.

use std::process::Command;

fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_oxnet"))
        .arg("run")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value printed after `name:` in Click's -h output.
fn value(stdout: &str, name: &str) -> u64 {
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        if l == format!("{name}:") {
            return lines.next().unwrap().trim().parse().unwrap();
        }
    }
    panic!("no {name} in\n{stdout}");
}

#[test]
fn conf_fwd_click_forwards_every_packet_once() {
    let fwd = std::fs::read_to_string(repo().join("conf/fwd.click")).unwrap();
    // Around the shipped configuration: a generator wired to A and a
    // capture wired to B, in the same process (sim ports live in it).
    let config = format!(
        "{fwd}
gen :: FastUDPFlows(0, 5000, 60, 02:00:00:00:00:01, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 16, 4, STOP true)
  -> gtx :: ToDevice(\"sim:gdgen,wire=gdA\", TIMEOUT 0, FLOW_CONTROL true);
FromDevice(\"sim:gdcap,wire=gdB\", PROMISC true, FLOW_CONTROL true) -> cap :: Counter -> Discard;
DriverManager(pause, wait 500ms, stop)
"
    );
    let (ok, out, err) = run(&[
        "-t",
        "-e",
        &config,
        "A=sim:gdA",
        "B=sim:gdB",
        "FLOW=true",
        "-h",
        "gen.count",
        "-h",
        "gtx.count",
        "-h",
        "cap.count",
        "-h",
        "cap.byte_count",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("pushes: direct (no call cycle in the graph)"), "{err}");
    assert_eq!(value(&out, "gen.count"), 5000, "{out}");
    assert_eq!(value(&out, "gtx.count"), 5000, "{out}");
    assert_eq!(value(&out, "cap.count"), 5000, "every packet once: {out}");
    assert_eq!(value(&out, "cap.byte_count"), 5000 * 60, "{out}");
}

#[test]
fn two_graph_threads_each_take_their_rss_queue_and_the_counts_add_up() {
    let config = "
src :: FastUDPFlows(0, 4000, 60, 02:00:00:00:00:01, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 64, 1, STOP true)
  -> tx :: ToDevice(\"sim:gtgen,wire=gtrx\", TIMEOUT 0, FLOW_CONTROL true);
FromDevice(sim:gtrx, PROMISC true, FLOW_CONTROL true) -> c :: Counter -> Discard;
DriverManager(pause, wait 500ms, stop)
";
    let (ok, out, err) = run(&["-j", "2", "-e", config, "-h", "c.count", "-h", "tx.count"]);
    assert!(ok, "{err}");
    // Each thread sent LIMIT packets on its own transmit queue.
    assert_eq!(value(&out, "tx.count"), 8000, "{out}\n{err}");
    assert_eq!(value(&out, "c.count"), 8000, "every packet once: {out}\n{err}");
    // Per thread (standard error): both queues received some, and the
    // parts make the whole.
    let per_thread: Vec<u64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("thread ").and_then(|r| r.split_once(": c.count ")))
        .map(|(_, v)| v.trim().parse().unwrap())
        .collect();
    assert_eq!(per_thread.len(), 2, "{err}");
    assert!(
        per_thread.iter().all(|&n| n > 0),
        "RSS spread 64 flows over both queues: {per_thread:?}"
    );
    assert_eq!(per_thread.iter().sum::<u64>(), 8000);
}

#[test]
fn device_errors_are_clear_and_nothing_runs() {
    // A PCI address that is not there, a queue given with -j.
    let (ok, _, err) = run(&["-e", "FromDevice(0000:ff:1f.7) -> Discard;"]);
    assert!(!ok);
    assert!(
        err.contains("0000:ff:1f.7") && err.contains("Router could not be initialized"),
        "{err}"
    );
    let (ok, _, err) = run(&["-j", "2", "-e", "FromDevice(sim:gtq, 1) -> Discard;"]);
    assert!(!ok);
    assert!(err.contains("leave QUEUE out"), "{err}");
    let (ok, _, err) = run(&["-e", "FromDevice(sim:gtb, BURST 0) -> Discard;"]);
    assert!(!ok);
    assert!(err.contains("BURST 0"), "{err}");
}

/// The MAC address of simulated port `name` (its FromDevice's `device`
/// handler, read without running: `-q`).
fn sim_mac(name: &str) -> String {
    let (ok, out, err) = run(&[
        "-q",
        "-e",
        &format!("d :: FromDevice(sim:{name}) -> Discard;"),
        "-h",
        "d.device",
    ]);
    assert!(ok, "{err}");
    out.split_whitespace().last().unwrap().to_string()
}

#[test]
fn conf_router_click_on_two_threads_routes_every_packet_and_the_thread_counts_add_up() {
    let router = std::fs::read_to_string(repo().join("conf/router.click")).unwrap();
    let (mac0, mac1) = (sim_mac("grr0"), sim_mac("grr1"));
    // Around the shipped router, in the same process: host A sends 64 UDP
    // flows to host B through it (one generator per thread, 3000 packets
    // each); host B answers ARP for 10.0.2.2 and counts what arrives.
    let config = format!(
        "{router}
FastUDPFlows(0, 3000, 60, 02:aa:00:00:00:01, 10.0.1.2, $MAC0, 10.0.2.2, 64, 1, STOP true)
  -> ToDevice(\"sim:grha,wire=grr0\", TIMEOUT 0, FLOW_CONTROL true);
hb :: FromDevice(\"sim:grhb,wire=grr1\", PROMISC true, FLOW_CONTROL true)
  -> hbc :: Classifier(12/0806 20/0001, 12/0800, -);
hbc[0] -> ARPResponder(10.0.2.2 02:bb:00:00:00:02) -> ToDevice(\"sim:grhb,wire=grr1\", FLOW_CONTROL true);
hbc[1] -> got :: Counter -> Discard;
hbc[2] -> Discard;
DriverManager(pause, wait 1s, stop)
"
    );
    let (ok, out, err) = run(&[
        "-t",
        "-j",
        "2",
        "-e",
        &config,
        "IF0=sim:grr0",
        &format!("MAC0={mac0}"),
        "IF1=sim:grr1",
        &format!("MAC1={mac1}"),
        "FLOW=true",
        "-h",
        "got.count",
        "-h",
        "fwd1.count",
    ]);
    assert!(ok, "{err}");
    // The routing table, TTL and ICMP errors form cycles (an error is
    // routed like any packet): pushes into those 14 elements are checked,
    // the rest (devices, classifiers, ARP, queues) are direct calls.
    assert!(
        err.contains("pushes: direct, checked into the 14 elements on call cycles (rt local"),
        "{err}"
    );
    assert_eq!(value(&out, "fwd1.count"), 6000, "routed out of IF1: {out}\n{err}");
    assert_eq!(value(&out, "got.count"), 6000, "every packet once at B: {out}\n{err}");
    let per_thread = |handler: &str| -> Vec<u64> {
        err.lines()
            .filter_map(|l| {
                l.strip_prefix("thread ")
                    .and_then(|r| r.split_once(&format!(": {handler} ")))
            })
            .map(|(_, v)| v.trim().parse().unwrap())
            .collect()
    };
    let routed = per_thread("fwd1.count");
    assert_eq!(routed.len(), 2, "{err}");
    assert!(
        routed.iter().all(|&n| n > 0),
        "RSS gave both router threads flows: {routed:?}"
    );
    assert_eq!(routed.iter().sum::<u64>(), 6000);
}
