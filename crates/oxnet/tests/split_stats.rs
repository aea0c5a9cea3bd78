//! A split device's control handle reports the same per-queue counters as
//! the unsplit device (`ControlHandle::queue_stats`, device.rs): the same
//! forwarded traffic, once through `Device::rx_batch/tx_batch` and once
//! through the queue handles of `Device::split`, gives equal `QueueStats`
//! (transmit descriptor histogram, context descriptors, software
//! fallbacks, copies of packets from another DMA domain, bytes) and equal
//! software `DeviceStats`, on the plain path (every switch off) and on the
//! offload path.

use oxnet_driver::packet::TX_UDP_CSUM;
use oxnet_driver::{Config, DeviceStats, MemoryKind, Mempool, Offloads, PacketBatch, QueueStats, TxOffload};
use oxnet_sim::World;

/// A 60-byte Ethernet/IPv4/UDP frame of flow `flow` (RFC 791 header, RFC
/// 768 header; the checksums are left 0).
fn udp_frame(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 1, (flow >> 8) as u8, flow as u8]);
    f[30..34].copy_from_slice(&[10, 2, 0, 1]);
    f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&9000u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// What the forwarder does to the received packets before sending them:
/// every 3rd asks for the UDP checksum, every 4th gets a second segment
/// from CPU-only memory (a chain of another DMA domain), every 5th is
/// replaced by a copy in CPU-only memory; and one empty packet (refused)
/// is added per batch.
fn rework(batch: &mut PacketBatch, own: &Mempool, cpu: &Mempool, seen: &mut usize) {
    let mut out = PacketBatch::with_capacity(batch.len() + 1);
    for i in 0..batch.len() {
        let n = *seen + i;
        let mut p = if n.is_multiple_of(5) {
            let mut copy = cpu.alloc().unwrap();
            copy.set_len(batch[i].len()).unwrap();
            copy.copy_from_slice(&batch[i]);
            copy
        } else {
            let mut copy = own.alloc().unwrap();
            copy.set_len(batch[i].len()).unwrap();
            copy.copy_from_slice(&batch[i]);
            copy
        };
        if n.is_multiple_of(3) {
            p.set_tx_offload(TxOffload {
                flags: TX_UDP_CSUM,
                l2_len: 14,
                l3_len: 20,
                l4_len: 8,
                mss: 0,
            });
        }
        if n.is_multiple_of(4) {
            let mut tail = cpu.alloc().unwrap();
            tail.set_len(40).unwrap();
            tail.fill(n as u8);
            p.append(tail);
        }
        out.push(p);
    }
    *seen += batch.len();
    batch.clear();
    out.push(own.alloc().unwrap()); // length 0: refused
    *batch = out;
}

struct Run {
    queues: Vec<QueueStats>,
    device: DeviceStats,
}

/// Injects 240 frames of distinct flows into `port` (RSS spreads them over
/// two queues) and forwards each receive queue to the transmit queue of
/// the same number, split or not.
fn forward(port: &str, offloads: Offloads, split: bool) -> Run {
    let config = Config {
        rx_queues: 2,
        tx_queues: 2,
        offloads: Offloads { rss: true, ..offloads },
        ..Config::default()
    };
    let dev = oxnet_sim::open(port, &config).unwrap();
    // What it sends goes to a port without a driver (an unconnected port
    // would receive its own frames back).
    World::global().connect(port, &format!("{port}-sink"));
    let own = Mempool::new("split-stats own", 1024, MemoryKind::Plain).unwrap();
    let cpu = Mempool::new("split-stats cpu", 1024, MemoryKind::CpuOnly).unwrap();
    let frames: Vec<Vec<u8>> = (0..240).map(udp_frame).collect();
    World::global().inject_burst(port, &frames);
    let mut batch = PacketBatch::with_capacity(64);
    let mut seen = 0;
    let mut forward_queue = |rx: &mut dyn FnMut(&mut PacketBatch) -> usize,
                             tx: &mut dyn FnMut(&mut PacketBatch) -> usize| {
        while rx(&mut batch) > 0 {
            rework(&mut batch, &own, &cpu, &mut seen);
            let mut tries = 0;
            while !batch.is_empty() {
                tx(&mut batch);
                tries += 1;
                assert!(tries < 1000, "{port}: the transmit queue never drained");
            }
        }
    };
    let run = if split {
        let mut handles = dev.split().unwrap();
        for q in 0..2 {
            let (rx, tx) = (&mut handles.rx[q], &mut handles.tx[q]);
            forward_queue(&mut |b| rx.rx_batch(b, 32), &mut |b| tx.tx_batch(b));
        }
        Run {
            queues: handles.control.queue_stats(),
            device: handles.control.stats(),
        }
    } else {
        let mut dev = dev;
        for q in 0..2u16 {
            let dev = &mut dev;
            // Two closures over one device: receive and send alternate.
            let dev = std::cell::RefCell::new(dev);
            forward_queue(&mut |b| dev.borrow_mut().rx_batch(q, b, 32), &mut |b| {
                dev.borrow_mut().tx_batch(q, b)
            });
        }
        Run {
            queues: dev.queue_stats(),
            device: dev.stats(),
        }
    };
    assert_eq!(seen, 240, "{port}: every frame received");
    run
}

fn software(d: &DeviceStats) -> [u64; 5] {
    [
        d.rx_pool_empty,
        d.tx_ring_full,
        d.tx_invalid,
        d.tx_copied,
        d.tx_copy_pool_empty,
    ]
}

fn compare(name: &str, offloads: Offloads) -> Run {
    let unsplit = forward(&format!("{name}-unsplit"), offloads, false);
    let split = forward(&format!("{name}-split"), offloads, true);
    assert_eq!(split.queues.len(), 2);
    for q in 0..2 {
        assert_eq!(split.queues[q], unsplit.queues[q], "{name}: queue {q}");
    }
    assert_eq!(software(&split.device), software(&unsplit.device), "{name}");
    // Per queue: 120ish frames; both queues got some (RSS).
    assert!(unsplit.queues.iter().all(|q| q.rx_packets > 0), "{:?}", unsplit.queues);
    unsplit
}

/// Counts that follow from `rework` (numbers are 0..240): every 5th packet
/// is a CPU-only copy, every 4th gets a CPU-only segment: the packets with
/// n % 5 == 0 or n % 4 == 0 are foreign, 48 + 60 - 12 = 96 of them; one
/// refused empty packet per received batch.
fn check_common(run: &Run) {
    let copied: u64 = run.queues.iter().map(|q| q.tx_copied).sum();
    assert_eq!(copied, 96);
    assert_eq!(run.device.tx_copied, 96);
    assert_eq!(run.device.tx_copy_pool_empty, 0);
    assert!(run.device.tx_invalid >= 2, "one empty packet per batch");
    let packets: u64 = run.queues.iter().map(|q| q.tx_packets).sum();
    assert_eq!(packets, 240, "refused packets are not sent packets");
}

#[test]
fn split_queue_stats_equal_unsplit_on_the_plain_path() {
    let run = compare("split-stats-plain", Offloads::default());
    check_common(&run);
    // Every switch off: the checksum requests and the chains are done in
    // software, one frame and one descriptor per packet: n % 3 == 0 or
    // n % 4 == 0: 80 + 60 - 20 = 120 packets.
    let fallback: u64 = run.queues.iter().map(|q| q.tx_software_fallback).sum();
    assert_eq!(fallback, 120);
    let one: u64 = run.queues.iter().map(|q| q.tx_descriptors_per_packet[1]).sum();
    assert_eq!(one, 240);
}

#[test]
fn split_queue_stats_equal_unsplit_on_the_offload_path() {
    let run = compare(
        "split-stats-offload",
        Offloads {
            tx_checksum: true,
            ..Offloads::default()
        },
    );
    check_common(&run);
    // Chains (n % 4 == 0, 60 packets) go out as two data descriptors; the
    // foreign ones among them are copied into one 2 KiB buffer (100 bytes
    // fit): those with n % 4 == 0 all have a CPU-only segment, so all 60
    // are copies of one segment. The others take one descriptor.
    let contexts: u64 = run.queues.iter().map(|q| q.tx_context_descriptors).sum();
    assert!(contexts > 0, "checksum requests need context descriptors");
    let histogram: u64 = run
        .queues
        .iter()
        .map(|q| q.tx_descriptors_per_packet.iter().sum::<u64>())
        .sum();
    assert_eq!(histogram, 240);
}
