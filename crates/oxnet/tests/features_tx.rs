//! The 82599's transmit switches on the software 82599: checksum insertion,
//! TSO (single- and multi-descriptor), head write-back. Switched on, the
//! behaviour is seen on the wire (the model's capture of what a port
//! sends); switched off, the software path puts the identical bytes on the
//! wire; requests the 82599 cannot do are refused with a clear message.
//! Each test uses its own port names, so they run in parallel.

mod common;
use common::{chained, offload_sim_port as open, send_on_wire as send};
use oxnet_driver::offload::{self, checksum_verdict};
use oxnet_driver::packet::{FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_GOOD, TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM};
use oxnet_driver::{Device, MemoryKind, Mempool, Offloads, Packet, PacketBatch, TsoMode};
use oxnet_sim::World;

const TCP_HEADERS: usize = 54;

/// Ethernet + IPv4 + TCP (or UDP) with `payload` bytes, checksum fields
/// zero (the offload or the software path fills them).
fn frame(payload: usize, udp: bool) -> Vec<u8> {
    let l4 = if udp { 8 } else { 20 };
    let mut f = vec![0u8; 14 + 20 + l4 + payload];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + l4 + payload) as u16).to_be_bytes());
    f[18..20].copy_from_slice(&0x4242u16.to_be_bytes());
    f[22] = 64;
    f[23] = if udp { 17 } else { 6 };
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    if udp {
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    } else {
        f[38..42].copy_from_slice(&1_000_000u32.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = 0x19; // FIN PSH ACK: FIN and PSH only in the last TSO segment
    }
    for (i, b) in f[14 + 20 + l4..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    f
}

/// A TSO packet of `payload` bytes, MSS `mss`, chained in 1500-byte pieces.
fn tso_packet(pool: &Mempool, payload: usize, mss: u16) -> Packet {
    let f = frame(payload, false);
    let mut p = chained(pool, &f, 1500);
    p.set_tx_offload(offload::offload_for(&f, TX_TSO, mss).unwrap());
    p
}

fn assert_valid_segments(frames: &[Vec<u8>], payload: usize, mss: usize, what: &str) {
    let original = frame(payload, false);
    assert_eq!(frames.len(), payload.div_ceil(mss), "{what}: segments on the wire");
    let mut at = TCP_HEADERS;
    for (k, s) in frames.iter().enumerate() {
        let last = k + 1 == frames.len();
        assert_eq!(
            checksum_verdict(s),
            FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD,
            "{what}: segment {k} checksums"
        );
        let seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
        assert_eq!(
            seq,
            1_000_000 + (at - TCP_HEADERS) as u32,
            "{what}: segment {k} sequence number"
        );
        assert_eq!(
            u16::from_be_bytes([s[18], s[19]]),
            0x4242 + k as u16,
            "{what}: segment {k} IP id"
        );
        assert_eq!(
            s[47] & 0x09 != 0,
            last,
            "{what}: FIN/PSH only in the last segment ({k})"
        );
        let len = (original.len() - at).min(mss);
        assert_eq!(s.len(), TCP_HEADERS + len, "{what}: segment {k} length");
        assert_eq!(
            &s[TCP_HEADERS..],
            &original[at..at + len],
            "{what}: segment {k} payload"
        );
        at += len;
    }
}

#[test]
fn tso_multi_descriptor_puts_valid_segments_on_the_wire() {
    let port = "feat-tso-multi";
    let mut dev = open(
        port,
        Offloads {
            tso: TsoMode::Multi,
            ..Offloads::default()
        },
    );
    let pool = dev.mempool(0);
    let frames = send(&mut dev, port, vec![tso_packet(&pool, 9000, 1460)]);
    assert_valid_segments(&frames, 9000, 1460, "TSO multi");
    let stats = &dev.queue_stats()[0];
    assert_eq!(stats.tx_software_fallback, 0);
    assert_eq!(stats.tx_context_descriptors, 1);
    // 7 buffers of the chain + the context descriptor.
    let descriptors = 9054usize.div_ceil(1500) + 1;
    assert_eq!(
        stats.tx_descriptors_per_packet[descriptors], 1,
        "{:?}",
        stats.tx_descriptors_per_packet
    );
    assert_eq!(stats.hw_tx_packets, frames.len() as u64, "QPTC counts segments");
}

#[test]
fn tso_single_descriptor_puts_valid_segments_on_the_wire() {
    let port = "feat-tso-single";
    let mut dev = open(
        port,
        Offloads {
            tso: TsoMode::Single,
            ..Offloads::default()
        },
    );
    let pool = dev.mempool(0);
    let frames = send(&mut dev, port, vec![tso_packet(&pool, 20000, 1000)]);
    assert_valid_segments(&frames, 20000, 1000, "TSO single");
    let stats = &dev.queue_stats()[0];
    assert_eq!(stats.tx_descriptors_per_packet[2], 1, "context + one data descriptor");
}

#[test]
fn tso_off_software_segmentation_gives_identical_bytes() {
    let mut on = open(
        "feat-tso-cmp-on",
        Offloads {
            tso: TsoMode::Multi,
            ..Offloads::default()
        },
    );
    let mut off = open("feat-tso-cmp-off", Offloads::default());
    let pool = on.mempool(0);
    let hardware = send(&mut on, "feat-tso-cmp-on", vec![tso_packet(&pool, 5000, 536)]);
    let software = send(&mut off, "feat-tso-cmp-off", vec![tso_packet(&pool, 5000, 536)]);
    assert_valid_segments(&software, 5000, 536, "software TSO");
    assert_eq!(hardware, software, "hardware and software segmentation differ");
    assert_eq!(off.queue_stats()[0].tx_software_fallback, 1);
}

#[test]
fn tx_checksum_on_and_off_give_identical_correct_bytes() {
    let mut on = open(
        "feat-csum-on",
        Offloads {
            tx_checksum: true,
            ..Offloads::default()
        },
    );
    let mut off = open("feat-csum-off", Offloads::default());
    let pool = on.mempool(0);
    let packets = |pool: &Mempool| {
        [
            (false, TX_IP_CSUM | TX_TCP_CSUM),
            (true, TX_IP_CSUM | TX_UDP_CSUM),
            (false, TX_TCP_CSUM),
        ]
        .iter()
        .map(|&(udp, flags)| {
            let f = frame(300, udp);
            let mut p = chained(pool, &f, 2048);
            p.set_tx_offload(offload::offload_for(&f, flags, 0).unwrap());
            p
        })
        .collect::<Vec<_>>()
    };
    let hardware = send(&mut on, "feat-csum-on", packets(&pool));
    let software = send(&mut off, "feat-csum-off", packets(&pool));
    assert_eq!(hardware.len(), 3);
    assert_eq!(hardware, software, "hardware and software checksums differ");
    for f in &hardware[..2] {
        assert_eq!(checksum_verdict(f), FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
    }
    // Only the TCP checksum asked for: the IP checksum field stays 0.
    assert_eq!(checksum_verdict(&hardware[2]) & FLAG_L4_CSUM_GOOD, FLAG_L4_CSUM_GOOD);
    assert_eq!(&hardware[2][24..26], &[0, 0]);
    assert_eq!(on.queue_stats()[0].tx_software_fallback, 0);
    assert_eq!(off.queue_stats()[0].tx_software_fallback, 3);
}

#[test]
fn head_write_back_reports_the_head_and_cleans_from_it() {
    let port = "feat-twb";
    let mut dev = open(
        port,
        Offloads {
            tx_head_writeback: true,
            ..Offloads::default()
        },
    );
    let pool = dev.mempool(0);
    let free_before = pool.free_count();
    let packets = (0..40).map(|_| chained(&pool, &frame(100, true), 2048)).collect();
    let frames = send(&mut dev, port, packets);
    assert_eq!(frames.len(), 40);
    let tdh = dev.read_register(oxnet_driver::ixgbe::regs::tdh(0));
    assert_eq!(
        dev.tx_queue(0).unwrap().written_back_head(),
        Some(tdh),
        "head written back = TDH"
    );
    assert_eq!(tdh, 40);
    // TXDCTL.WTHRESH must be 0 with head write-back (§7.2.3.5.2).
    let txdctl = dev.read_register(oxnet_driver::ixgbe::regs::txdctl(0));
    assert_eq!((txdctl >> 16) & 0x7F, 0);
    // The next call cleans up to the written-back head: every buffer back.
    send(&mut dev, port, Vec::new());
    assert_eq!(
        pool.free_count(),
        free_before,
        "all 40 buffers cleaned from the written-back head"
    );
}

#[test]
fn tso_payload_over_256_kib_is_refused() {
    let port = "feat-tso-too-big";
    let mut dev = open(
        port,
        Offloads {
            tso: TsoMode::Multi,
            ..Offloads::default()
        },
    );
    let pool = Mempool::new("feat-tso-too-big", 256, MemoryKind::Plain).unwrap();
    let payload = 256 * 1024;
    let f = frame(payload, false);
    let mut p = chained(&pool, &f, 2048);
    p.set_tx_offload(offload::offload_for(&f[..TCP_HEADERS], TX_TSO, 1460).unwrap());
    let mut batch = PacketBatch::with_capacity(1);
    batch.push(p);
    assert_eq!(dev.tx_batch(0, &mut batch), 1, "taken (and dropped)");
    assert!(World::global().frames_on_wire(port).is_empty());
    let error = dev.tx_queue(0).unwrap().last_error().unwrap().to_string();
    assert!(error.contains("256 KiB"), "{error}");
    assert_eq!(pool.free_count(), 256, "the refused chain went back to its pool");
}

#[test]
fn more_than_40_segments_are_refused() {
    let port = "feat-tso-41";
    let mut dev = open(
        port,
        Offloads {
            tso: TsoMode::Multi,
            ..Offloads::default()
        },
    );
    let pool = dev.mempool(0);
    let f = frame(41 * 100, false);
    let mut p = chained(&pool, &f[..TCP_HEADERS], 2048);
    for piece in f[TCP_HEADERS..].chunks(100) {
        p.append(chained(&pool, piece, 2048));
    }
    assert_eq!(p.segment_count(), 42);
    p.set_tx_offload(offload::offload_for(&f[..TCP_HEADERS], TX_TSO, 1460).unwrap());
    let mut batch = PacketBatch::with_capacity(1);
    batch.push(p);
    dev.tx_batch(0, &mut batch);
    assert!(World::global().frames_on_wire(port).is_empty());
    let error = dev.tx_queue(0).unwrap().last_error().unwrap().to_string();
    assert!(error.contains("40 data descriptors"), "{error}");
}
