//! The igb driver inside a QEMU guest, on QEMU's `igb` device model (an
//! 82576, 8086:10c9, that nobody here wrote), through sysfs: the kernel
//! driver is not loaded, oxnet maps BAR0 from `resource0` and takes
//! physical addresses of its huge pages from pagemap.
//!
//! * the ixy-ci topology: pktgen on NIC 0 → (hub 0) → NIC 1 → fwd → NIC 2 →
//!   (hub 1) → NIC 3 → pcap, every sequence number once and in order, and
//!   each command's final statistics (the NIC's own counters) equal to the
//!   counts;
//! * promiscuous mode off: pktgen's frames (to 02:00:00:00:00:02, not the
//!   NIC's MAC) are not received; on: they are;
//! * four queues with RSS: a small program in the guest (a test of this
//!   file, `guest_rss_*`, run by the host test) sends UDP flows with
//!   different ports and checks that they arrive on all four queues.
//!
//! See docs/igb.md for what QEMU's model counts and implements.

use oxnet_driver::{Config, MemoryKind, PacketBatch};
use oxnet_rig::{static_binary, static_target_dir, static_test, Vm, IGB, TARGET};
use std::time::{Duration, Instant};

fn oxnet() -> std::path::PathBuf {
    static_binary("oxnet", "oxnet").expect("static build of oxnet")
}

/// Number after `"key":` in a piece of JSON.
fn field(json: &str, key: &str) -> u64 {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} missing in {json}"));
    json[at + key.len() + 3..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The JSON object of device `name` in a command's summary line.
fn device<'a>(json: &'a str, name: &str) -> &'a str {
    let at = json
        .find(&format!("\"name\":\"{name}\""))
        .unwrap_or_else(|| panic!("device {name} missing in {json}"));
    let end = json[at..].find('}').map_or(json.len(), |e| at + e);
    &json[at..end]
}

/// The line of the guest's output that starts with `prefix`.
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

/// Waits (in the guest) until `file` has `lines` lines saying "ready", at
/// most 60 s.
fn wait_ready(file: &str, lines: usize) -> String {
    format!(
        "n=0; until [ \"$(grep -c ready {file} 2>/dev/null)\" -ge {lines} ]; do n=$((n+1)); \
         [ $n -gt 600 ] && {{ echo 'timeout waiting for {file}'; cat {file}; exit 9; }}; sleep 0.1; done"
    )
}

fn four_nics() -> Vm {
    Vm::new()
        .nic(IGB, 0)
        .nic(IGB, 0)
        .nic(IGB, 1)
        .nic(IGB, 1)
        .file(oxnet(), "/bin/oxnet")
        .hugepages(96)
        .memory_mb(768)
        .timeout(Duration::from_secs(240))
}

/// 60-byte frames: QEMU's igb counts 4 CRC bytes more per frame in
/// GORC/GOTC, as the 82576 does (§8.19: octets "from destination address
/// through CRC, inclusive").
const FRAME: u64 = 60;
const FRAME_ON_WIRE: u64 = FRAME + 4;

#[test]
fn igb_pktgen_fwd_pcap_every_packet_once_in_order_and_counters_match() {
    let count = 3000;
    let nic = Vm::nic_address;
    let script = format!(
        r#"set -e
oxnet devices
oxnet pcap {cap} /tmp/out.pcap --count {count} --seconds 120 --json --quiet > /tmp/pcap.out 2> /tmp/pcap.err &
PCAP=$!
oxnet fwd {fwd_in} {fwd_out} --seconds 120 --json --quiet > /tmp/fwd.out 2> /tmp/fwd.err &
FWD=$!
{wait_pcap}
{wait_fwd}
oxnet pktgen {gen} --count {count} --size {FRAME} --rate 0.005 --json --quiet > /tmp/gen.out 2> /tmp/gen.err
echo "GEN $(tail -n 1 /tmp/gen.out)"
wait $PCAP || {{ echo "pcap failed"; cat /tmp/pcap.err; exit 3; }}
echo "PCAP $(tail -n 1 /tmp/pcap.out)"
kill -INT $FWD; wait $FWD || true
echo "FWD $(tail -n 1 /tmp/fwd.out)"
cat /tmp/gen.err /tmp/fwd.err /tmp/pcap.err
"#,
        cap = nic(3),
        fwd_in = nic(1),
        fwd_out = nic(2),
        gen = nic(0),
        wait_pcap = wait_ready("/tmp/pcap.err", 1),
        wait_fwd = wait_ready("/tmp/fwd.err", 2),
    );
    let out = four_nics().run(&script).expect("guest ran");
    println!("{}\nguest ran {:?}", out.stdout, out.duration);
    let report = out.report();
    assert!(out.success(), "{report}");
    assert!(out.stdout.contains("8086   10c9"), "{report}");
    assert!(out.stdout.contains("igb driver"), "{report}");
    assert!(out.stdout.contains("link up at 1000 Mbit/s"), "{report}");
    let gen = line(&out.stdout, "GEN ");
    let pcap = line(&out.stdout, "PCAP ");
    let fwd = line(&out.stdout, "FWD ");
    // Every sequence number once, in order.
    assert_eq!(field(gen, "sent"), count, "{report}");
    assert_eq!(field(pcap, "captured"), count, "{report}");
    assert_eq!(field(pcap, "lost"), 0, "{report}");
    assert_eq!(field(pcap, "duplicated"), 0, "{report}");
    assert_eq!(field(pcap, "reordered"), 0, "{report}");
    assert_eq!(field(fwd, "forwarded"), count, "{report}");
    // The NICs' own counters (GPTC/GPRC, GOTC/GORC) agree with the counts.
    let gen_dev = device(gen, &nic(0));
    assert_eq!(field(gen_dev, "tx_packets"), count, "{report}");
    assert_eq!(field(gen_dev, "tx_bytes"), count * FRAME_ON_WIRE, "{report}");
    assert_eq!(field(gen_dev, "rx_packets"), 0, "{report}");
    let fwd_in = device(fwd, &nic(1));
    assert_eq!(field(fwd_in, "rx_packets"), count, "{report}");
    assert_eq!(field(fwd_in, "rx_bytes"), count * FRAME_ON_WIRE, "{report}");
    assert_eq!(field(fwd_in, "tx_packets"), 0, "{report}");
    let fwd_out = device(fwd, &nic(2));
    assert_eq!(field(fwd_out, "tx_packets"), count, "{report}");
    assert_eq!(field(fwd_out, "tx_bytes"), count * FRAME_ON_WIRE, "{report}");
    assert_eq!(field(fwd_out, "rx_packets"), 0, "{report}");
    let cap = device(pcap, &nic(3));
    assert_eq!(field(cap, "rx_packets"), count, "{report}");
    assert_eq!(field(cap, "rx_bytes"), count * FRAME_ON_WIRE, "{report}");
    assert_eq!(field(cap, "rx_missed"), 0, "{report}");
}

#[test]
fn igb_without_promiscuous_mode_frames_to_another_mac_are_not_received() {
    // pktgen sends to 02:00:00:00:00:02; NIC 1's MAC is 52:54:00:00:00:02.
    let count = 500;
    let nic = Vm::nic_address;
    let run = |name: &str, extra: &str| {
        format!(
            r#"oxnet pcap {cap} /tmp/{name}.pcap --seconds 4 --json --quiet {extra} > /tmp/{name}.out 2> /tmp/{name}.err &
PCAP=$!
{wait}
oxnet pktgen {gen} --count {count} --rate 0.01 --json --quiet > /dev/null 2>&1
wait $PCAP || {{ echo "pcap failed"; cat /tmp/{name}.err; exit 3; }}
echo "{name} $(tail -n 1 /tmp/{name}.out)"
"#,
            cap = nic(1),
            gen = nic(0),
            wait = wait_ready(&format!("/tmp/{name}.err"), 1),
        )
    };
    let script = format!("set -e\n{}{}", run("OFF", "--no-promisc"), run("ON", ""));
    let out = Vm::new()
        .nic(IGB, 0)
        .nic(IGB, 0)
        .file(oxnet(), "/bin/oxnet")
        .hugepages(64)
        .memory_mb(768)
        .timeout(Duration::from_secs(120))
        .run(&script)
        .expect("guest ran");
    println!("{}\nguest ran {:?}", out.stdout, out.duration);
    let report = out.report();
    assert!(out.success(), "{report}");
    let off = line(&out.stdout, "OFF ");
    assert_eq!(field(off, "captured"), 0, "{report}");
    assert_eq!(field(off, "rx_packets"), 0, "{report}");
    let on = line(&out.stdout, "ON ");
    assert_eq!(field(on, "captured"), count, "{report}");
    assert_eq!(field(on, "rx_packets"), count, "{report}");
}

#[test]
fn igb_four_queues_rss_spreads_udp_flows_over_all_queues() {
    let test = this_test_static();
    let out = Vm::new()
        .nic(IGB, 0)
        .nic(IGB, 0)
        .file(test, "/bin/t")
        .hugepages(64)
        .memory_mb(768)
        .timeout(Duration::from_secs(120))
        .run("/bin/t --ignored --exact guest_rss_spreads_udp_flows_over_all_queues --test-threads 1 --nocapture")
        .expect("guest ran");
    println!("{}\nguest ran {:?}", out.stdout, out.duration);
    assert!(out.success(), "{}", out.report());
    assert!(out.stdout.contains("1 passed"), "{}", out.report());
}

/// The static build of this test file, for the guest. `static_test`
/// builds it, but in a package with binaries (oxnet has two) the path it
/// returns can be one of those binaries (cargo's last artifact message);
/// so take the newest `vm_igb-*` executable it built.
fn this_test_static() -> std::path::PathBuf {
    static_test("oxnet", "vm_igb").expect("static build of this test");
    let deps = static_target_dir().join(TARGET).join("release/deps");
    std::fs::read_dir(&deps)
        .expect("static deps directory")
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("vm_igb-") && !name.contains('.')
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .unwrap_or_else(|| panic!("no vm_igb test executable in {}", deps.display()))
}

/// Runs inside the guest (started by the test above): NIC 0 sends 64 UDP
/// flows (source ports 1000..1063) round-robin over its 4 transmit queues;
/// NIC 1, with 4 receive queues and RSS, must receive every frame, on
/// every queue, each with an RSS hash, and the same flow always on the same
/// queue.
#[test]
#[ignore = "runs inside a QEMU guest with two igb NICs (see igb_four_queues_rss_...)"]
fn guest_rss_spreads_udp_flows_over_all_queues() {
    const QUEUES: u16 = 4;
    const FLOWS: u16 = 64;
    const ROUNDS: u16 = 8;
    let config = Config {
        rx_queues: QUEUES,
        tx_queues: QUEUES,
        memory: Some(MemoryKind::HugePages),
        ..Config::default()
    };
    let mut tx = oxnet_driver::open(&Vm::nic_address(0), &config).expect("open NIC 0");
    let mut rx = oxnet_driver::open(&Vm::nic_address(1), &config).expect("open NIC 1");
    assert_eq!(tx.driver_name(), "igb");
    assert_eq!(rx.queues(), (QUEUES, QUEUES));
    let pool = tx.mempool(0);
    let mut sent = 0u64;
    for round in 0..ROUNDS {
        for flow in 0..FLOWS {
            let mut frame = oxnet::frame::template(60);
            // UDP source port = flow (the IPv4 header checksum does not
            // cover it; the UDP checksum is 0).
            frame[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
            oxnet::frame::set_sequence(&mut frame, (round * FLOWS + flow) as u64);
            let mut packet = pool.alloc().expect("buffer");
            packet.set_len(frame.len()).unwrap();
            packet.copy_from_slice(&frame);
            let mut batch = PacketBatch::with_capacity(1);
            batch.push(packet);
            let queue = flow % QUEUES;
            while tx.tx_batch(queue, &mut batch) == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
            sent += 1;
        }
    }
    let mut per_queue = [0u64; QUEUES as usize];
    let mut queue_of_flow = [u16::MAX; FLOWS as usize];
    let mut batch = PacketBatch::with_capacity(64);
    let deadline = Instant::now() + Duration::from_secs(10);
    while per_queue.iter().sum::<u64>() < sent && Instant::now() < deadline {
        for q in 0..QUEUES {
            rx.rx_batch(q, &mut batch, 64);
            for packet in batch.iter() {
                let flow = u16::from_be_bytes([packet[34], packet[35]]) - 1000;
                assert_ne!(
                    packet.meta().rss_hash,
                    0,
                    "frame of flow {flow} on queue {q} has no RSS hash"
                );
                let seen = &mut queue_of_flow[flow as usize];
                assert!(*seen == u16::MAX || *seen == q, "flow {flow} on queues {seen} and {q}");
                *seen = q;
                per_queue[q as usize] += 1;
            }
            batch.clear();
        }
    }
    println!("sent {sent}, received per queue {per_queue:?}");
    assert_eq!(per_queue.iter().sum::<u64>(), sent, "{per_queue:?}");
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "a queue received nothing: {per_queue:?}"
    );
    let stats = rx.stats();
    assert_eq!(stats.rx_packets, sent);
    assert_eq!(tx.stats().tx_packets, sent);
}
