//! The ixgbe driver on the software 82599, end to end: pktgen -> fwd ->
//! capture with exact sequence-number checks, ring overflow, pool
//! exhaustion. Each test uses its own port names in the process-wide
//! simulated world.
//!
//! The model's DMA engine runs on its own thread here (`DmaMode::Thread`):
//! descriptors complete some time after the tail write, in partial runs,
//! data before DD, concurrently with the driver; the model checks the
//! driver's barriers at every tail write and records any DMA into freed
//! memory. The tests run one at a time (the engine thread and the driver
//! share a 2-core machine), each holding [`serial`].

use oxnet::apps::{Capture, PacketGenerator};
use oxnet::commands::{open, RunOptions};
use oxnet::demo::{self, DemoOptions};
use oxnet_driver::{Config, Device, Error, Offloads, PacketBatch};
use oxnet_sim::{DmaMode, World};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One test at a time, with the world's DMA engine on its own thread.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    World::global().set_dma_mode(DmaMode::Thread);
    guard
}

/// The faults of the ports whose names contain `name`, once the engine
/// has finished what was in flight (after the devices were dropped: a
/// teardown that freed memory the engine still wrote shows up here).
fn faults_of(name: &str) -> Vec<String> {
    assert!(
        World::global().settle(Duration::from_secs(10)),
        "the DMA engine never went idle"
    );
    World::global()
        .faults()
        .into_iter()
        .filter(|f| f.contains(name))
        .collect()
}

fn demo_options(ring: usize, batch: usize, count: u64) -> DemoOptions {
    DemoOptions {
        size: 60,
        count: Some(count),
        config: Config {
            rx_ring_size: ring,
            tx_ring_size: ring,
            batch_size: batch,
            ..Config::default()
        },
        pcap: None,
        run: RunOptions {
            seconds: None,
            json: false,
            live: false,
        },
    }
}

fn assert_every_packet_once_in_order(ring: usize, batch: usize) {
    assert_every_packet_once_in_order_with(ring, batch, Offloads::default(), "");
}

/// As above, with offload switches on: the receive and transmit paths
/// that offloads select (checksum flags, context descriptors, head
/// write-back) carry their own barriers, checked the same way.
fn assert_every_packet_once_in_order_with(ring: usize, batch: usize, offloads: Offloads, name: &str) {
    let _serial = serial();
    let count = 30_000;
    let prefix = format!("e2e-{name}r{ring}-b{batch}-");
    let mut options = demo_options(ring, batch, count);
    options.config.offloads = offloads;
    let r = demo::run(&options, &prefix).unwrap();
    assert_eq!(r.sent, count, "ring {ring} batch {batch}: generator sent all");
    assert_eq!(r.received, count, "ring {ring} batch {batch}: capture received all");
    assert_eq!(
        (r.lost, r.duplicated, r.reordered),
        (0, 0, 0),
        "ring {ring} batch {batch}"
    );
    assert!(r.faults.is_empty(), "model faults: {:?}", r.faults);
    // The NICs' own counters agree with the applications' counts.
    let by_name = |n: &str| r.devices.iter().find(|(name, _)| name.ends_with(n)).unwrap().1;
    assert_eq!(by_name("pktgen").tx_packets, count);
    assert_eq!(by_name("fwd0").rx_packets, count);
    assert_eq!(by_name("fwd1").tx_packets, count);
    assert_eq!(by_name("capture").rx_packets, count);
    // 60-byte frames are counted with their 4-byte CRC (§8.2.3.23.26 GORC).
    assert_eq!(by_name("capture").rx_bytes, count * 64);
    assert_eq!(by_name("fwd0").rx_missed, 0, "flow control: nothing missed");
    // The devices are gone now: their teardown left the engine nothing to
    // write into freed memory.
    assert_eq!(faults_of(&prefix), Vec::<String>::new());
}

#[test]
fn offload_paths_ring_64_batch_32() {
    let offloads = Offloads {
        rx_checksum: true,
        tx_checksum: true,
        rss: true,
        ..Offloads::default()
    };
    assert_every_packet_once_in_order_with(64, 32, offloads, "csum-");
}

#[test]
fn head_write_back_ring_64_batch_32() {
    let offloads = Offloads {
        tx_head_writeback: true,
        ..Offloads::default()
    };
    assert_every_packet_once_in_order_with(64, 32, offloads, "headwb-");
}

#[test]
fn ring_64_batch_1() {
    assert_every_packet_once_in_order(64, 1);
}

#[test]
fn ring_64_batch_32() {
    assert_every_packet_once_in_order(64, 32);
}

#[test]
fn ring_64_batch_256() {
    assert_every_packet_once_in_order(64, 256);
}

#[test]
fn ring_4096_batch_1() {
    assert_every_packet_once_in_order(4096, 1);
}

#[test]
fn ring_4096_batch_32() {
    assert_every_packet_once_in_order(4096, 32);
}

#[test]
fn ring_4096_batch_256() {
    assert_every_packet_once_in_order(4096, 256);
}

#[test]
fn large_frames_arrive_intact() {
    let _serial = serial();
    let mut options = demo_options(512, 32, 2_000);
    options.size = 1514;
    let r = demo::run(&options, "e2e-large-").unwrap();
    assert!(r.ok(), "{r:?}");
    let capture = r.devices.iter().find(|(n, _)| n.ends_with("capture")).unwrap().1;
    assert_eq!(capture.rx_bytes, 2_000 * 1518);
    assert_eq!(faults_of("e2e-large-"), Vec::<String>::new());
}

/// Two ports wired together, the receiver opened with `rx`.
fn pair(name: &str, rx: &Config) -> (Box<dyn Device>, Box<dyn Device>) {
    let (a, b) = (format!("{name}-tx"), format!("{name}-rx"));
    World::global().connect(&a, &b);
    let sender = open(&format!("sim:{a}"), &Config::default()).unwrap();
    let receiver = open(&format!("sim:{b}"), rx).unwrap();
    (sender, receiver)
}

fn send_all(sender: &mut dyn Device, count: u64) -> u64 {
    let mut generator = PacketGenerator::new(sender, 60, Some(count), None, 32).unwrap();
    let start = std::time::Instant::now();
    while !generator.is_done() {
        let before = generator.sent();
        generator.step(sender);
        if generator.sent() == before {
            // Ring full: the model's DMA thread needs the CPU to empty it.
            std::thread::yield_now();
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "generator stuck at {}",
                generator.sent()
            );
        }
    }
    generator.sent()
}

/// Receives until 100 polls in a row found nothing while the DMA engine
/// had nothing left to do either.
fn receive_all(receiver: &mut dyn Device) -> Capture {
    let mut capture = Capture::new(64, None);
    let mut idle = 0;
    while idle < 100 {
        if capture.step(receiver, usize::MAX) == 0 {
            if World::global().settle(Duration::from_secs(10)) {
                idle += 1;
            }
        } else {
            idle = 0;
        }
    }
    capture
}

#[test]
fn rx_ring_overflow_is_counted_as_missed_not_lost_silently() {
    // No flow control, a receiver that does not poll while 20000 frames
    // arrive: the ring (63 usable descriptors) and the 512 KB packet buffer
    // fill up, the rest is dropped by the NIC and counted in MPC.
    let rx = Config {
        rx_ring_size: 64,
        flow_control: false,
        ..Config::default()
    };
    let _serial = serial();
    let (mut sender, mut receiver) = pair("overflow", &rx);
    let sent = send_all(&mut *sender, 20_000);
    assert!(World::global().settle(Duration::from_secs(10)));
    let capture = receive_all(&mut *receiver);
    let stats = receiver.stats();
    let received = capture.checker.unique;
    assert!(stats.rx_missed > 0, "the ring must have overflowed");
    assert!(received >= 63, "at least a full ring arrived");
    assert_eq!(
        received + stats.rx_missed,
        sent,
        "every frame is either received or counted as missed"
    );
    assert_eq!(stats.rx_packets, received, "GPRC counts what was delivered");
    assert_eq!(capture.checker.duplicated + capture.checker.reordered, 0);
    drop((sender, receiver));
    assert_eq!(faults_of("overflow-"), Vec::<String>::new());
}

#[test]
fn pool_exhaustion_stalls_without_losing_packets() {
    // Pool of ring + one batch: an application that holds on to packets
    // empties it; receiving stops (counted) and resumes when they are freed.
    let rx = Config {
        rx_ring_size: 64,
        batch_size: 32,
        pool_size: 96,
        flow_control: true,
        ..Config::default()
    };
    let _serial = serial();
    let (mut sender, mut receiver) = pair("exhaust", &rx);
    let sent = send_all(&mut *sender, 1_000);
    // Everything sent has reached the receiver's ring or packet buffer.
    assert!(World::global().settle(Duration::from_secs(10)));
    let mut held = PacketBatch::with_capacity(1024);
    for _ in 0..10 {
        receiver.rx_batch(0, &mut held, 32);
    }
    assert_eq!(held.len(), 32, "only the spare batch could be handed out");
    assert!(receiver.stats().rx_pool_empty > 0, "the empty pool was counted");
    let first: Vec<u64> = held.iter().filter_map(|p| oxnet::frame::sequence(p)).collect();
    assert_eq!(first, (0..32).collect::<Vec<u64>>());
    drop(held);
    let capture = receive_all(&mut *receiver);
    assert_eq!(
        capture.checker.unique + 32,
        sent,
        "the rest arrived once the buffers came back"
    );
    assert_eq!(
        capture.checker.lost(sent),
        32,
        "only the 32 taken earlier are missing from this capture"
    );
    assert_eq!(receiver.stats().rx_missed, 0);
    drop((sender, receiver));
    assert_eq!(faults_of("exhaust-"), Vec::<String>::new());
}

#[test]
fn a_pool_smaller_than_the_ring_is_refused_with_a_clear_error() {
    let config = Config {
        rx_ring_size: 512,
        pool_size: 100,
        ..Config::default()
    };
    let _serial = serial();
    let err = open("sim:small-pool", &config).err().expect("must fail");
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(err.to_string().contains("pool size 100 is too small"), "{err}");
}
