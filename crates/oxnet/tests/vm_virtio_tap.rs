//! VirtIO offload requests checked by a peer that acts on them: QEMU's
//! legacy virtio-net with a TAP back end (`vnet_hdr=on`), whose host side
//! is the Linux kernel.
//!
//! With a TAP back end that carries the virtio-net header, QEMU offers the
//! guest VIRTIO_NET_F_CSUM and VIRTIO_NET_F_HOST_TSO4 (VirtIO 1.x §5.1.3)
//! and passes each packet's header through to the host kernel (the tun
//! driver's IFF_VNET_HDR), which checksums and segments it when the frame
//! leaves through a device that cannot (§5.1.6.2: NEEDS_CSUM with
//! csum_start/csum_offset; gso_type TCPV4 with gso_size). The rig's hubs
//! have no header, so this is the only guest test where somebody else
//! than our own code or testpmd does what oxnet asks for.
//!
//! Topology, all in a namespace of the test's own:
//!
//! ```text
//! guest oxnet ─ virtio-net ─ QEMU ─ tap ─┐
//!                                        br ─ veth a ══ veth b ← tcpdump
//! ```
//!
//! veth a has segmentation and checksum offload switched off (ethtool -K),
//! so the kernel's software GSO and checksum run before the frame crosses
//! to b, where tcpdump records exactly what a wire would carry. The guest
//! (a test of this file, `guest_sends_offload_requests`) sends one TSO
//! request of 3 × 1000 bytes and one TCP and one UDP checksum request,
//! every checksum field spoiled; the host test finds 5 frames in tcpdump's
//! file: 3 MSS-sized segments with consecutive sequence numbers and the
//! original payload, and the two others, every IPv4 and L4 checksum valid
//! (RFC 1071, RFC 793 §3.1 and RFC 768 pseudo-headers).

mod common;
use common::netns::{self, Netns};
use oxnet::frame::internet_checksum;
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM};
use oxnet_driver::{offload, Config, MemoryKind, Offloads, PacketBatch, TsoMode};
use oxnet_rig::{static_test, Vm, VIRTIO_LEGACY};
use std::process::Stdio;
use std::time::{Duration, Instant};

const GUEST_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x01];
const MSS: u16 = 1000;
const TSO_PAYLOAD: usize = 3000;
const TCP_SEQ: u32 = 1_000_000;

/// Ethernet + IPv4 + TCP (ACK) or UDP with `payload` bytes of a pattern,
/// every checksum field spoiled (0xdead): whoever acts on the request must
/// compute them.
fn frame(payload: usize, udp: bool, id: u16) -> Vec<u8> {
    let l4 = if udp { 8 } else { 20 };
    let mut f = vec![0u8; 14 + 20 + l4 + payload];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    f[6..12].copy_from_slice(&GUEST_MAC);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + l4 + payload) as u16).to_be_bytes());
    f[18..20].copy_from_slice(&id.to_be_bytes());
    f[22] = 64;
    f[23] = if udp { 17 } else { 6 };
    f[24..26].copy_from_slice(&0xdeadu16.to_be_bytes());
    f[26..30].copy_from_slice(&[10, 7, 0, 1]);
    f[30..34].copy_from_slice(&[10, 7, 0, 2]);
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    if udp {
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        f[40..42].copy_from_slice(&0xdeadu16.to_be_bytes());
    } else {
        f[38..42].copy_from_slice(&TCP_SEQ.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = 0x10; // ACK
        f[50..52].copy_from_slice(&0xdeadu16.to_be_bytes());
    }
    for (i, b) in f[14 + 20 + l4..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    f
}

/// Runs inside the guest: opens NIC 0 (legacy virtio-net on the TAP back
/// end) with the checksum and TSO switches on, prints the negotiated
/// features, and sends the three requests.
#[test]
#[ignore = "runs inside a QEMU guest whose virtio-net NIC has a TAP back end (see virtio_offload_requests_...)"]
fn guest_sends_offload_requests() {
    let config = Config {
        memory: Some(MemoryKind::HugePages),
        offloads: Offloads {
            tx_checksum: true,
            tso: TsoMode::Single,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let mut dev = oxnet_driver::open(&Vm::nic_address(0), &config).expect("open the virtio NIC");
    let features = dev
        .feature_registers()
        .iter()
        .find(|(name, _)| name == "virtio features 31:0")
        .map(|(_, v)| *v)
        .expect("the virtio driver reports its features");
    // A line of its own: libtest prints "test NAME ... " before it.
    println!("\nFEATURES {features:#x}");
    let pool = dev.mempool(0);
    let mut batch = PacketBatch::with_capacity(4);
    for (payload, udp, flags, mss, id) in [
        (TSO_PAYLOAD, false, TX_IP_CSUM | TX_TCP_CSUM | TX_TSO, MSS, 1),
        (300, false, TX_IP_CSUM | TX_TCP_CSUM, 0, 2),
        (200, true, TX_IP_CSUM | TX_UDP_CSUM, 0, 3),
    ] {
        let f = frame(payload, udp, id);
        // Chained in 1500-byte pieces: the TSO request spans buffers.
        let p = common::chained(&pool, &f, 1500);
        let mut p = p;
        p.set_tx_offload(offload::offload_for(&f, flags, mss).expect("a valid request"));
        batch.push(p);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !batch.is_empty() && Instant::now() < deadline {
        dev.tx_batch(0, &mut batch);
    }
    assert!(batch.is_empty(), "the device took every packet");
    dev.drain_tx(Duration::from_secs(2));
    let fallback = dev.queue_stats()[0].tx_software_fallback;
    let stats = dev.stats();
    println!(
        "SENT {{\"tx_packets\":{},\"tx_software_fallback\":{fallback}}}",
        stats.tx_packets
    );
    assert_eq!(stats.tx_packets, 3);
    assert_eq!(fallback, 0, "the header carried every request");
}

/// The one's-complement sum of the RFC 793/768 pseudo-header and `l4`.
fn l4_checksum(ip: &[u8], protocol: u8, l4: &[u8]) -> u16 {
    let mut data = Vec::with_capacity(12 + l4.len());
    data.extend_from_slice(&ip[12..20]);
    data.extend_from_slice(&[0, protocol]);
    data.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    data.extend_from_slice(l4);
    internet_checksum(&data)
}

/// Checks the IPv4 header and L4 checksums of `f` (both sum to 0 when
/// valid) and returns (protocol, L4 header length, payload).
fn valid(f: &[u8], what: &str) -> (u8, Vec<u8>) {
    assert_eq!(f[12..14], [0x08, 0x00], "{what}: IPv4");
    let ip = &f[14..34];
    assert_eq!(internet_checksum(ip), 0, "{what}: IPv4 header checksum");
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    assert!(14 + total <= f.len(), "{what}: total length {total} within the frame");
    let l4 = &f[34..14 + total];
    let protocol = ip[9];
    assert_eq!(l4_checksum(ip, protocol, l4), 0, "{what}: L4 checksum");
    let header = if protocol == 6 { 20 } else { 8 };
    (protocol, l4[header..].to_vec())
}

#[test]
fn virtio_offload_requests_reach_a_tap_backend_and_the_host_kernel_acts_on_them() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("oxvt");
    for key in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        ns.run("sysctl", &["-q", "-w", key]);
    }
    let tap = netns::unique("tap");
    let bridge = netns::unique("br");
    // A persistent TAP for QEMU to attach to, so that everything is wired
    // before the guest sends.
    ns.ip(&["tuntap", "add", "dev", &tap, "mode", "tap", "vnet_hdr"]);
    ns.ip(&["link", "add", &bridge, "type", "bridge"]);
    let (a, b) = ns.veth_pair();
    ns.ip(&["link", "set", &tap, "master", &bridge]);
    ns.ip(&["link", "set", &a, "master", &bridge]);
    let ethtool = ns.run("ethtool", &["-K", &a, "tso", "off", "gso", "off", "tx", "off"]);
    assert!(ethtool.status.success(), "ethtool: {}", common::text(&ethtool.stderr));
    for dev in [&tap, &bridge] {
        ns.ip(&["link", "set", dev, "up"]);
    }
    let capture = std::env::temp_dir().join(format!("{}.pcap", netns::unique("vtap")));
    let mut tcpdump = ns
        .command("tcpdump")
        // Immediate mode: libpcap's TPACKET_V3 ring would otherwise hold
        // the last frames until its block times out.
        .args(["-i", &b, "-n", "-U", "--immediate-mode", "-s", "0", "-w"])
        .arg(&capture)
        .arg("ether src 52:54:00:00:00:01")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcpdump (scripts/install-deps.sh installs it)");
    // tcpdump says "listening on" once its socket is bound.
    let mut err = tcpdump.stderr.take().expect("piped");
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut reader = std::io::BufReader::new(&mut err);
        reader.read_line(&mut line).expect("tcpdump's first line");
    }
    assert!(line.contains("listening on"), "tcpdump: {line}");

    let guest = static_test("oxnet", "vm_virtio_tap").expect("static build of this test");
    let out = Vm::new()
        .tap_nic(VIRTIO_LEGACY, &tap)
        .netns(&ns.name)
        .file(guest, "/bin/t")
        .hugepages(64)
        .memory_mb(768)
        .timeout(Duration::from_secs(150))
        .run("/bin/t --ignored --exact guest_sends_offload_requests --test-threads 1 --nocapture")
        .expect("guest ran");
    println!("{}\nguest ran {:?}", out.stdout, out.duration);
    // Let the last frames cross the bridge and reach the file (at most
    // 5 s on a busy machine), then stop tcpdump (SIGTERM flushes it).
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && oxnet::pcap::read_frames(&capture).map_or(0, |f| f.len()) < 5 {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    common::terminate(&mut tcpdump);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    let frames = oxnet::pcap::read_frames(&capture);
    let _ = std::fs::remove_file(&capture);
    let frames = frames.expect("tcpdump's file");
    assert!(out.success(), "{}\ntcpdump: {rest}", out.report());

    // The device offered, and the driver took, CSUM (bit 0) and HOST_TSO4
    // (bit 11) (VirtIO 1.x §5.1.3).
    let features = u64::from_str_radix(
        common::line(&out.stdout, "FEATURES ")
            .trim_start_matches("FEATURES 0x")
            .trim(),
        16,
    )
    .expect("FEATURES line");
    assert_eq!(features & 1, 1, "VIRTIO_NET_F_CSUM negotiated: {features:#x}");
    assert_eq!(
        features >> 11 & 1,
        1,
        "VIRTIO_NET_F_HOST_TSO4 negotiated: {features:#x}"
    );

    assert_eq!(
        frames.len(),
        5,
        "3 segments + 2 checksummed frames; tcpdump: {rest}\nframes: {:?}",
        frames.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let original = frame(TSO_PAYLOAD, false, 1);
    let mut at = 0;
    for (k, f) in frames[..3].iter().enumerate() {
        let what = format!("segment {k}");
        let (protocol, payload) = valid(f, &what);
        assert_eq!(protocol, 6, "{what}: TCP");
        assert_eq!(payload.len(), MSS as usize, "{what}: MSS-sized");
        let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
        assert_eq!(seq, TCP_SEQ + at as u32, "{what}: sequence number");
        assert_eq!(
            payload[..],
            original[54 + at..54 + at + MSS as usize],
            "{what}: payload"
        );
        at += MSS as usize;
    }
    let (protocol, payload) = valid(&frames[3], "TCP checksum request");
    assert_eq!((protocol, payload), (6, frame(300, false, 2)[54..].to_vec()));
    let (protocol, payload) = valid(&frames[4], "UDP checksum request");
    assert_eq!((protocol, payload), (17, frame(200, true, 3)[42..].to_vec()));
    drop(ns);
}
