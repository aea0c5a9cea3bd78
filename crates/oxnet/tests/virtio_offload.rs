//! VirtIO transmit of chained packets and offload requests, against DPDK's
//! vhost back-end (`dpdk-testpmd --vdev net_vhost0`), whose `csum`
//! forwarding engine with GSO on segments the TCP packets it receives and
//! sends the segments back to us:
//!
//! * an RSC-coalesced chain from the software 82599 (10 segments of 1000
//!   bytes in one chained packet of 5 buffers) forwarded to VirtIO reaches
//!   testpmd whole: it comes back as exactly the 10 segments GSO cuts from
//!   the whole packet, the payload bytes identical;
//! * a TSO request travels in the virtio-net header (the back-end started
//!   with `tso=1` offers HOST_TSO4) and the packet arrives whole;
//! * without the switch, the same request is segmented in software
//!   (counted in `tx_software_fallback`) and arrives as the same bytes.
//!
//! Back-end on CPU 1, the test on CPU 0 (as in vhost_user.rs).

mod common;
use common::pin_to_cpu0;

use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::offload;
use oxnet_driver::virtio::net_header;
use oxnet_driver::{Config, Device, MemoryKind, Offloads, Packet, PacketBatch, TsoMode, TxOffload};
use oxnet_sim::World;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TESTPMD: &str = "dpdk-testpmd";

/// One testpmd at a time: each busy-polls CPU 1.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// testpmd as a vhost-user back-end, stopped (by its pid) when dropped.
struct Backend {
    child: Option<Child>,
    socket: PathBuf,
    files: Vec<PathBuf>,
}

impl Backend {
    /// Starts testpmd with `vdev_args` appended to the vhost vdev and the
    /// testpmd `commands` run before forwarding starts (--cmdline-file).
    fn start(name: &str, vdev_args: &str, commands: &[&str]) -> Backend {
        let id = format!("oxnet-vo-{}-{name}", std::process::id());
        let dir = std::env::temp_dir();
        let socket = dir.join(format!("{id}.sock"));
        let log = dir.join(format!("{id}.log"));
        let cmds = dir.join(format!("{id}.cmds"));
        let _ = std::fs::remove_file(&socket);
        std::fs::write(&cmds, commands.join("\n") + "\n").unwrap();
        let child = Command::new(TESTPMD)
            .args(["--lcores", "0@1,1@1", "--no-pci", "--no-huge", "-m", "512"])
            .arg("--vdev")
            .arg(format!("net_vhost0,iface={},queues=1{vdev_args}", socket.display()))
            .arg(format!("--file-prefix={id}"))
            .args([
                "--",
                "-a",
                "--no-mlockall",
                "--total-num-mbufs=16384",
                "--stats-period=1",
            ])
            .arg(format!("--cmdline-file={}", cmds.display()))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::from(std::fs::File::create(log.with_extension("err")).unwrap()))
            .spawn()
            .unwrap_or_else(|e| panic!("start {TESTPMD} ({e}): run scripts/install-deps.sh (Debian's dpdk-dev)"));
        let mut backend = Backend {
            child: Some(child),
            socket,
            files: vec![log.clone(), log.with_extension("err"), cmds],
        };
        let start = Instant::now();
        while !backend.socket.exists() {
            if let Some(status) = backend.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("testpmd exited ({status}):\n{}", backend.output());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no socket:\n{}",
                backend.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        backend
    }

    fn spec(&self) -> String {
        format!("vhost-user:{}", self.socket.display())
    }

    fn output(&self) -> String {
        self.files[..2]
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_default())
            .collect()
    }

    fn stop(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            common::terminate(&mut child);
        }
        self.output()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.socket);
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// testpmd's csum engine with GSO: TCP/IPv4 packets longer than 1054 bytes
/// are cut into 1054-byte frames (54 bytes of headers + 1000 of payload).
/// The GSO library leaves the TCP checksum to the port ("hw"): the vhost
/// port hands it to us as a partial checksum (NEEDS_CSUM in the header),
/// which our receive path completes (GUEST_CSUM, negotiated with the
/// rx_checksum switch).
const CSUM_GSO: &[&str] = &[
    "set fwd csum",
    "port stop 0",
    "csum set ip sw 0",
    "csum set tcp hw 0",
    "set port 0 gso on",
    "set gso segsz 1054",
    "port start 0",
];

/// A TCP/IPv4 segment (RFC 791, RFC 793) of flow 7000 → 80 with sequence
/// number `sequence` and `payload` bytes (value: offset in the stream),
/// checksums valid.
fn segment(sequence: u32, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&7000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[38..42].copy_from_slice(&sequence.to_be_bytes());
    f[46] = 5 << 4;
    f[47] = 0x10; // ACK
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (sequence as usize + i) as u8;
    }
    offload::set_ipv4_checksum(&mut f[14..34]);
    offload::set_l4_checksum(&mut f, 14, 20, 6);
    f
}

/// Sends `packet` and receives until `want` frames came back (or 10 s).
fn round_trip(dev: &mut dyn Device, packet: Packet, want: usize) -> Vec<Vec<u8>> {
    let mut batch = PacketBatch::with_capacity(1);
    batch.push(packet);
    let mut received = PacketBatch::with_capacity(64);
    let start = Instant::now();
    while !batch.is_empty() && start.elapsed() < Duration::from_secs(10) {
        dev.tx_batch(0, &mut batch);
    }
    assert!(batch.is_empty(), "not taken in 10 s");
    while received.len() < want && start.elapsed() < Duration::from_secs(10) {
        dev.rx_batch(0, &mut received, 64);
    }
    // Anything more that comes within 200 ms is an error too.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        dev.rx_batch(0, &mut received, 64);
    }
    received
        .iter()
        .map(|p| {
            let mut v = Vec::new();
            p.copy_chain_to(&mut v);
            v
        })
        .collect()
}

/// The frames GSO cut from one TCP packet whose payload is `payload`: each
/// a valid TCP/IPv4 frame (checksums checked in software, RFC 1071), of
/// 1054 bytes but the last, sequence numbers consecutive; their payloads
/// put together are `payload`.
fn check_segments(frames: &[Vec<u8>], payload: &[u8], first_sequence: u32, log: &str) {
    assert_eq!(frames.len(), payload.len().div_ceil(1000), "{log}");
    let mut joined = Vec::new();
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(f.len(), 54 + 1000.min(payload.len() - 1000 * k), "frame {k}\n{log}");
        let verdict = offload::checksum_verdict(f);
        assert_eq!(
            verdict & (oxnet_driver::packet::FLAG_IP_CSUM_GOOD | oxnet_driver::packet::FLAG_L4_CSUM_GOOD),
            oxnet_driver::packet::FLAG_IP_CSUM_GOOD | oxnet_driver::packet::FLAG_L4_CSUM_GOOD,
            "frame {k}: checksums\n{log}"
        );
        assert_eq!(
            u32::from_be_bytes([f[38], f[39], f[40], f[41]]),
            first_sequence + 1000 * k as u32,
            "frame {k}"
        );
        joined.extend_from_slice(&f[54..]);
    }
    assert!(joined == payload, "payload bytes differ\n{log}");
}

#[test]
fn an_rsc_chain_from_the_82599_reaches_the_vhost_back_end_whole() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    pin_to_cpu0();
    let mut backend = Backend::start("rsc", "", &[CSUM_GSO, &["set verbose 1"]].concat());
    let mut virtio = oxnet_driver::open(&backend.spec(), &receive_checksums()).unwrap();
    // The software 82599 with RSC on coalesces 10 in-order segments of
    // 1000 bytes into one packet chained over 2 KiB buffers.
    let port = "virtio-offload-rsc";
    let config = Config {
        rx_ring_size: 128,
        tx_ring_size: 128,
        offloads: Offloads {
            rsc: true,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let mut nic = IxgbeDevice::init(
        World::global().port(port),
        &format!("sim:{port}"),
        &config,
        MemoryKind::Plain,
    )
    .unwrap();
    let burst: Vec<Vec<u8>> = (0..10).map(|k| segment(5000 + 1000 * k, 1000)).collect();
    World::global().inject_burst(port, &burst);
    let mut batch = PacketBatch::with_capacity(32);
    assert_eq!(nic.rx_batch(0, &mut batch, 32), 1, "one coalesced packet");
    let chain = batch.pop().unwrap();
    assert_eq!(chain.total_len(), 54 + 10_000);
    assert_eq!(chain.segment_count(), 5, "10 054 bytes over 2 KiB buffers");
    let mut payload = Vec::new();
    chain.copy_chain_to(&mut payload);
    let payload = payload[54..].to_vec();
    let frames = round_trip(&mut *virtio, chain, 10);
    let stats = virtio.stats();
    drop(virtio);
    let log = backend.stop();
    check_segments(&frames, &payload, 5000, &format!("{stats:?}\n{log}"));
    let seen = received_by_testpmd(&log);
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![54 + 10_000],
        "testpmd received the whole chain as one packet\n{log}"
    );
}

/// Only the receive switch: GUEST_CSUM, so that testpmd's partial
/// checksums are completed on receive; no transmit offload negotiated.
fn receive_checksums() -> Config {
    Config {
        offloads: Offloads {
            rx_checksum: true,
            ..Offloads::default()
        },
        ..Config::default()
    }
}

/// What testpmd's csum engine printed for each packet it received (with
/// `set verbose 1`): the length, and its "rx:" line with the mbuf flags.
fn received_by_testpmd(log: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(at) = l.find("pkt_len=").filter(|_| l.starts_with("port=")) {
            let len = l[at + 8..].split(',').next().unwrap_or("").parse().unwrap_or(0);
            let rx = lines.get(i + 1).copied().unwrap_or("").to_string();
            out.push((len, rx));
        }
    }
    out
}

/// The negotiated virtio feature bits (low 32), as the driver reports them.
fn virtio_features(dev: &dyn Device) -> u64 {
    dev.feature_registers()
        .iter()
        .find(|(name, _)| name == "virtio features 31:0")
        .map(|(_, v)| *v as u64)
        .expect("the virtio driver reports its features")
}

fn tso_packet(dev: &dyn Device, payload: usize) -> (Packet, Vec<u8>) {
    let frame = segment(9000, payload);
    let pool = dev.mempool(0);
    let mut head: Option<Packet> = None;
    for chunk in frame.chunks(2000) {
        let mut p = pool.alloc().unwrap();
        p.set_len(chunk.len()).unwrap();
        p.copy_from_slice(chunk);
        match head.as_mut() {
            Some(h) => h.append(p),
            None => head = Some(p),
        }
    }
    let mut head = head.unwrap();
    // Checksums spoiled: whoever segments must compute them.
    head[24] ^= 0xFF;
    head[50] ^= 0xFF;
    head.set_tx_offload(TxOffload {
        flags: oxnet_driver::packet::TX_TSO,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 1000,
    });
    (head, frame[54..].to_vec())
}

#[test]
fn a_tso_request_goes_through_the_header_to_testpmd_and_arrives_whole() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    pin_to_cpu0();
    let mut backend = Backend::start("tso", ",tso=1", &[CSUM_GSO, &["set verbose 1"]].concat());
    let config = Config {
        offloads: Offloads {
            tx_checksum: true,
            tso: TsoMode::Multi,
            rx_checksum: true,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let mut virtio = oxnet_driver::open(&backend.spec(), &config).unwrap();
    let (packet, payload) = tso_packet(&*virtio, 8000);
    let negotiated = virtio_features(&*virtio);
    let frames = round_trip(&mut *virtio, packet, 8);
    let fallback = virtio.queue_stats()[0].tx_software_fallback;
    drop(virtio);
    let log = backend.stop();
    assert_eq!(
        negotiated & (net_header::F_CSUM | net_header::F_HOST_TSO4),
        net_header::F_CSUM | net_header::F_HOST_TSO4,
        "testpmd with tso=1 offers CSUM and HOST_TSO4\n{log}"
    );
    check_segments(&frames, &payload, 9000, &log);
    assert_eq!(fallback, 0, "the device was asked to segment");
    // testpmd saw one 8054-byte packet, and DPDK's vhost library took our
    // header's gso_type as a large receive (RX_LRO) with a checksum that
    // needs no check (NEEDS_CSUM with offsets it recognises).
    let seen = received_by_testpmd(&log);
    assert_eq!(seen.len(), 1, "{log}");
    assert_eq!(seen[0].0, 8054, "{log}");
    assert!(seen[0].1.contains("RTE_MBUF_F_RX_LRO"), "{log}");
    assert!(seen[0].1.contains("RTE_MBUF_F_RX_L4_CKSUM_GOOD"), "{log}");
}

#[test]
fn without_the_switch_tso_is_done_in_software_and_arrives_the_same() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    pin_to_cpu0();
    let mut backend = Backend::start("tso-sw", ",tso=1", &[CSUM_GSO, &["set verbose 1"]].concat());
    let mut virtio = oxnet_driver::open(&backend.spec(), &receive_checksums()).unwrap();
    let (packet, payload) = tso_packet(&*virtio, 8000);
    let frames = round_trip(&mut *virtio, packet, 8);
    let fallback = virtio.queue_stats()[0].tx_software_fallback;
    drop(virtio);
    let log = backend.stop();
    check_segments(&frames, &payload, 9000, &log);
    assert_eq!(fallback, 1);
    let seen = received_by_testpmd(&log);
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![1054; 8],
        "testpmd received our 8 segments\n{log}"
    );
    assert!(seen.iter().all(|s| !s.1.contains("RX_LRO")), "{log}");
}

/// A checksum request in the header, and nothing else touching the packet:
/// testpmd's io engine sends it back as it came. Both checksums were
/// spoiled before sending: the frames come back right only if the
/// back-end acted on our header (NEEDS_CSUM at csum_start 34 /
/// csum_offset 16, VirtIO 1.0 §5.1.6.2) — DPDK's vhost library (with
/// `legacy-ol-flags=1`) turns it into a transmit checksum request, and
/// back into NEEDS_CSUM towards us, which our receive path (GUEST_CSUM)
/// completes. An all-zero header (the old driver) brings the spoiled
/// checksums back. (DPDK re-derives the pseudo-header sum on the way, so
/// the value we put in the TCP checksum field is checked by the unit tests
/// in virtio/net_header.rs and virtio/tx_tests.rs, not here.)
#[test]
fn a_checksum_request_in_the_header_survives_a_round_trip_and_verifies() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    pin_to_cpu0();
    let mut backend = Backend::start("csum", ",legacy-ol-flags=1", &["set fwd io"]);
    let config = Config {
        offloads: Offloads {
            tx_checksum: true,
            rx_checksum: true,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let mut virtio = oxnet_driver::open(&backend.spec(), &config).unwrap();
    let mut frames = Vec::new();
    let mut sent = Vec::new();
    for k in 0..20u32 {
        let frame = segment(100 * k, 100 + 37 * k as usize);
        let mut p = virtio.mempool(0).alloc().unwrap();
        p.set_len(frame.len()).unwrap();
        p.copy_from_slice(&frame);
        p[24] ^= 0xFF; // both checksums spoiled: the request must fill them
        p[50] ^= 0xFF;
        p.set_tx_offload(TxOffload {
            flags: oxnet_driver::packet::TX_IP_CSUM | oxnet_driver::packet::TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        });
        frames.extend(round_trip(&mut *virtio, p, 1));
        sent.push(frame);
    }
    let negotiated = virtio_features(&*virtio);
    let fallback = virtio.queue_stats()[0].tx_software_fallback;
    drop(virtio);
    let log = backend.stop();
    assert_eq!(fallback, 0, "{log}");
    assert_eq!(negotiated & net_header::F_CSUM, net_header::F_CSUM);
    assert_eq!(
        frames, sent,
        "every frame back once, with the original checksums\n{log}"
    );
}
