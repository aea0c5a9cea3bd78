//! The 82599's offloads for IPv6 on the software 82599: TSO and checksum
//! insertion with the context descriptor's TUCMD.IPV4 clear (§7.2.3.2.3,
//! §7.2.4.7), and the receive verdict for TCP/IPv6 (§7.1.6.2: no IP
//! checksum, the TCP checksum over the IPv6 pseudo-header). Switched on,
//! the model does the work; switched off, the driver's software path puts
//! the identical bytes on the wire. Segments are checked here by an
//! independent RFC 8200 §8.1 sum. Each test uses its own port names.

mod common;
use common::{chained, offload_sim_port as open, send_on_wire as send};
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::offload;
use oxnet_driver::packet::{
    FLAG_CSUM_BAD, FLAG_CSUM_CHECKED, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD, TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM,
};
use oxnet_driver::{Config, Device, MemoryKind, Offloads, Packet, PacketBatch, TsoMode};
use oxnet_sim::{SimRegisters, World};

/// Ethernet + IPv6 + TCP.
const TCP_HEADERS: usize = 14 + 40 + 20;

/// Ethernet + IPv6 (fd00::1 to fd00::2) + TCP (sequence 1 000 000, FIN
/// PSH ACK) or UDP with `payload` bytes, checksum fields zero.
fn frame6(payload: usize, udp: bool) -> Vec<u8> {
    let l4 = if udp { 8 } else { 20 };
    let mut f = vec![0u8; 14 + 40 + l4 + payload];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
    f[14] = 0x60; // version 6 (RFC 8200 §3)
    f[18..20].copy_from_slice(&((l4 + payload) as u16).to_be_bytes());
    f[20] = if udp { 17 } else { 6 };
    f[21] = 64;
    f[22] = 0xfd;
    f[37] = 1;
    f[38] = 0xfd;
    f[53] = 2;
    f[54..56].copy_from_slice(&4000u16.to_be_bytes());
    f[56..58].copy_from_slice(&80u16.to_be_bytes());
    if udp {
        f[58..60].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    } else {
        f[58..62].copy_from_slice(&1_000_000u32.to_be_bytes());
        f[66] = 5 << 4;
        f[67] = 0x19; // FIN PSH ACK: FIN and PSH only in the last TSO segment
    }
    for (i, b) in f[54 + l4..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    f
}

/// RFC 8200 §8.1, summed here: the addresses, the 32-bit upper-layer
/// length (from the payload length field), next header, the L4 bytes.
fn l4_checksum_good(f: &[u8]) -> bool {
    let length = u16::from_be_bytes([f[18], f[19]]) as usize;
    let mut bytes = f[22..54].to_vec();
    bytes.extend_from_slice(&(length as u32).to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, f[20]]);
    bytes.extend_from_slice(&f[54..54 + length]);
    if bytes.len() % 2 == 1 {
        bytes.push(0);
    }
    let mut sum: u32 = bytes.chunks(2).map(|w| (w[0] as u32) << 8 | w[1] as u32).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum == 0xFFFF
}

fn tso_packet(pool: &oxnet_driver::Mempool, payload: usize, mss: u16) -> Packet {
    let f = frame6(payload, false);
    let mut p = chained(pool, &f, 1500);
    p.set_tx_offload(offload::offload_for(&f, TX_TSO, mss).unwrap());
    p
}

/// Every segment: the original's IPv6 header but for the payload length
/// (TCP header + this segment's data), sequence number 1 000 000 + the
/// data before it, FIN/PSH on the last only, the data in order, and a
/// TCP checksum good by the independent sum.
fn assert_valid_segments(frames: &[Vec<u8>], payload: usize, mss: usize, what: &str) {
    let original = frame6(payload, false);
    assert_eq!(frames.len(), payload.div_ceil(mss), "{what}: segments on the wire");
    let mut at = TCP_HEADERS;
    for (k, s) in frames.iter().enumerate() {
        let len = (original.len() - at).min(mss);
        assert_eq!(s.len(), TCP_HEADERS + len, "{what}: segment {k} length");
        assert_eq!(s[..18], original[..18], "{what}: segment {k} header");
        assert_eq!(
            u16::from_be_bytes([s[18], s[19]]) as usize,
            20 + len,
            "{what}: segment {k} payload length"
        );
        assert_eq!(s[20..54], original[20..54], "{what}: segment {k} header");
        assert_eq!(
            u32::from_be_bytes(s[58..62].try_into().unwrap()),
            1_000_000 + (at - TCP_HEADERS) as u32,
            "{what}: segment {k} sequence number"
        );
        assert_eq!(s[67] & 0x09 != 0, k + 1 == frames.len(), "{what}: FIN/PSH ({k})");
        assert!(l4_checksum_good(s), "{what}: segment {k} TCP checksum");
        assert_eq!(&s[TCP_HEADERS..], &original[at..at + len], "{what}: segment {k} data");
        at += len;
    }
}

/// TSO over IPv6 in the model (multi- and single-descriptor) gives the
/// bytes the driver's software segmentation gives with TSO off; the
/// model's QPTC counts the segments.
#[test]
fn ipv6_tso_in_hardware_and_software_gives_identical_valid_segments() {
    let mut multi = open(
        "v6-tso-multi",
        Offloads {
            tso: TsoMode::Multi,
            ..Offloads::default()
        },
    );
    let mut single = open(
        "v6-tso-single",
        Offloads {
            tso: TsoMode::Single,
            ..Offloads::default()
        },
    );
    let mut off = open("v6-tso-off", Offloads::default());
    let pool = multi.mempool(0);
    let hardware = send(&mut multi, "v6-tso-multi", vec![tso_packet(&pool, 9000, 1440)]);
    let hardware_single = send(&mut single, "v6-tso-single", vec![tso_packet(&pool, 9000, 1440)]);
    let software = send(&mut off, "v6-tso-off", vec![tso_packet(&pool, 9000, 1440)]);
    assert_valid_segments(&hardware, 9000, 1440, "IPv6 TSO multi");
    assert_eq!(hardware, hardware_single, "multi- and single-descriptor TSO differ");
    assert_eq!(hardware, software, "hardware and software IPv6 segmentation differ");
    let stats = &multi.queue_stats()[0];
    assert_eq!(stats.tx_software_fallback, 0);
    assert_eq!(stats.tx_context_descriptors, 1);
    assert_eq!(stats.hw_tx_packets, 7, "QPTC counts segments");
    assert_eq!(off.queue_stats()[0].tx_software_fallback, 1);
}

/// TCP and UDP checksum insertion for IPv6 (TXSM, no IXSM) in the model
/// and in software: identical bytes, good by the independent sum; an
/// IPv4 header checksum request on an IPv6 packet is refused, not sent.
#[test]
fn ipv6_checksum_offload_on_and_off_give_identical_correct_bytes() {
    let mut on = open(
        "v6-csum-on",
        Offloads {
            tx_checksum: true,
            ..Offloads::default()
        },
    );
    let mut off = open("v6-csum-off", Offloads::default());
    let pool = on.mempool(0);
    let packets = |pool: &oxnet_driver::Mempool| {
        [(false, TX_TCP_CSUM), (true, TX_UDP_CSUM), (false, TX_TCP_CSUM)]
            .iter()
            .enumerate()
            .map(|(k, &(udp, flags))| {
                let f = frame6(300 + k, udp);
                let mut p = chained(pool, &f, 2048);
                p.set_tx_offload(offload::offload_for(&f, flags, 0).unwrap());
                p
            })
            .collect::<Vec<_>>()
    };
    let hardware = send(&mut on, "v6-csum-on", packets(&pool));
    let software = send(&mut off, "v6-csum-off", packets(&pool));
    assert_eq!(hardware.len(), 3);
    assert_eq!(hardware, software, "hardware and software checksums differ");
    for (k, f) in hardware.iter().enumerate() {
        assert!(l4_checksum_good(f), "frame {k}");
        assert_ne!([f[70], f[71]], [0, 0], "frame {k}: a checksum was written");
    }
    assert_eq!(on.queue_stats()[0].tx_software_fallback, 0);
    assert_eq!(off.queue_stats()[0].tx_software_fallback, 3);
    // TX_IP_CSUM on IPv6: refused by the driver (no IXSM reaches the model).
    let f = frame6(40, false);
    let mut p = chained(&pool, &f, 2048);
    p.set_tx_offload(oxnet_driver::TxOffload {
        flags: TX_IP_CSUM | TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 40,
        l4_len: 20,
        mss: 0,
    });
    let mut batch = PacketBatch::with_capacity(1);
    batch.push(p);
    dev_send_refused(&mut on, &mut batch);
    assert!(World::global().frames_on_wire("v6-csum-on").is_empty());
}

fn dev_send_refused(dev: &mut IxgbeDevice<SimRegisters>, batch: &mut PacketBatch) {
    let before = dev.queue_stats()[0].tx_packets;
    dev.tx_batch(0, batch);
    assert_eq!(dev.queue_stats()[0].tx_packets, before, "nothing sent");
    assert!(batch.is_empty(), "the refused packet is dropped (and counted)");
}

/// The model's receive verdict for TCP/IPv6 (§7.1.6.2): L4CS without
/// IPCS; a damaged byte gives TCPE. The software verdict (receive
/// checksum offload off) is the same.
#[test]
fn ipv6_rx_checksum_verdict_in_hardware_and_software() {
    let mut good = frame6(100, false);
    let request = offload::offload_for(&good, TX_TCP_CSUM, 0).unwrap();
    offload::fill_checksums(&mut good, &request).unwrap();
    assert!(l4_checksum_good(&good));
    let mut bad = good.clone();
    bad[100] ^= 0xFF;
    let frames = [good, bad];
    let mut verdicts = Vec::new();
    for (port, on) in [("v6-rxcsum-on", true), ("v6-rxcsum-off", false)] {
        let config = Config {
            rx_ring_size: 128,
            tx_ring_size: 128,
            offloads: Offloads {
                rx_checksum: on,
                ..Offloads::default()
            },
            ..Config::default()
        };
        let mut dev = IxgbeDevice::init(
            World::global().port(port),
            &format!("sim:{port}"),
            &config,
            MemoryKind::Plain,
        )
        .unwrap();
        for f in &frames {
            World::global().inject(port, f);
        }
        let mut batch = PacketBatch::with_capacity(8);
        dev.rx_batch(0, &mut batch, 8);
        assert_eq!(batch.len(), 2, "{port}");
        let checked: Vec<u32> = batch.iter().map(|p| p.meta().flags & FLAG_CSUM_CHECKED).collect();
        assert_eq!(checked, vec![if on { FLAG_CSUM_CHECKED } else { 0 }; 2], "{port}");
        verdicts.push(batch.iter().map(offload::rx_checksum).collect::<Vec<_>>());
    }
    assert_eq!(verdicts[0], vec![FLAG_L4_CSUM_GOOD, FLAG_L4_CSUM_BAD | FLAG_CSUM_BAD]);
    assert_eq!(verdicts[0], verdicts[1], "hardware and software verdicts differ");
}
