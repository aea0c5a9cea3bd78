//! `oxnet fwd --queues N` on the software 82599: two threads, each with its
//! own queue pair and pinned to its own core, forward RSS-spread flows; every
//! frame arrives once.

use oxnet::apps::multiqueue;
use oxnet_driver::{Config, Device, Offloads, PacketBatch};
use oxnet_sim::World;

fn udp_frame(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0xFF; 6]);
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

#[test]
fn two_queue_pairs_forward_every_frame_once() {
    let config = Config {
        rx_queues: 2,
        tx_queues: 2,
        offloads: Offloads {
            rss: true,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let a = oxnet_sim::open("mq-a", &config).unwrap();
    let b = oxnet_sim::open("mq-b", &config).unwrap();
    let mut sink = oxnet_sim::open("mq-sink", &Config::default()).unwrap();
    World::global().connect("mq-b", "mq-sink");
    let frames = 300;
    for flow in 0..frames {
        World::global().inject("mq-a", &udp_frame(flow));
    }
    let result = multiqueue::forward(a, b, &config, Some(0.5), true).unwrap();
    assert_eq!(result.per_queue.len(), 2);
    assert!(
        result.per_queue.iter().all(|&n| n > 0),
        "both queues worked: {:?}",
        result.per_queue
    );
    assert_eq!(result.per_queue.iter().sum::<u64>(), frames as u64);
    let mut batch = PacketBatch::with_capacity(64);
    let mut received = Vec::new();
    while sink.rx_batch(0, &mut batch, 64) > 0 {
        received.extend(batch.iter().map(|p| u16::from_be_bytes([p[34], p[35]]) - 1000));
        batch.clear();
    }
    received.sort_unstable();
    assert_eq!(received, (0..frames).collect::<Vec<_>>(), "every frame once");
    assert!(result.json.contains("\"forwarded_per_queue\":["));
}

/// Issue 8 item 7: SRRCTL.DROP_EN (82599 datasheet §8.2.3.8.7, bit 28;
/// SRRCTL(n) at 0x01014 + 0x40·n for queues 0–63, §8.2.3.8.7) is set on
/// every receive queue when there are several and flow control is off, and
/// clear with one queue or with flow control (a full buffer must then send
/// PAUSE, not drop).
#[test]
fn drop_en_is_set_per_queue_only_with_several_queues_and_no_flow_control() {
    const DROP_EN: u32 = 1 << 28;
    let srrctl = |q: u32| 0x01014 + 0x40 * q;
    for (port, queues, flow_control, expected) in [
        ("mq-drop-4", 4u16, false, DROP_EN),
        ("mq-drop-1", 1, false, 0),
        ("mq-drop-fc", 4, true, 0),
    ] {
        let config = Config {
            rx_queues: queues,
            tx_queues: queues,
            rx_ring_size: 64,
            tx_ring_size: 64,
            flow_control,
            offloads: Offloads {
                rss: queues > 1,
                ..Offloads::default()
            },
            ..Config::default()
        };
        let dev = oxnet_driver::ixgbe::IxgbeDevice::init(
            World::global().port(port),
            &format!("sim:{port}"),
            &config,
            oxnet_driver::MemoryKind::Plain,
        )
        .unwrap();
        for q in 0..queues as u32 {
            assert_eq!(
                dev.read_register(srrctl(q)) & DROP_EN,
                expected,
                "{port}: SRRCTL({q}).DROP_EN with {queues} queues, flow control {flow_control}"
            );
        }
    }
}

/// RSS as the 82599 datasheet defines it, written here (not taken from the
/// driver): the Toeplitz hash of §7.1.2.8.1 — for each set bit of the
/// input, from the most significant bit of byte 0, XOR in the 32 key bits
/// that start at the same bit position of the key.
fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let key_bit = |i: usize| u32::from(key[i / 8] >> (7 - i % 8) & 1);
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut hash = 0;
    for (i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                hash ^= window;
            }
            window = window << 1 | key_bit(32 + i * 8 + bit);
        }
    }
    hash
}

/// The receive queue RSS gives each flow of [`udp_frame`]: the key and the
/// redirection table read back from the NIC (RSSRK(n) at 0x0EB80 + 4·n,
/// byte 0 in bits 7:0, §8.2.3.7.16; RETA(n) at 0x0EB00 + 4·n, entry 4n+i
/// in bits 8i+3:8i, §8.2.3.7.15), the hash over source and destination
/// address and port for UDP over IPv4 (§7.1.2.8.1; MRQC enables the UDP
/// field), its 7 low bits indexing the table (§7.1.2.8.2).
fn rss_queues(read: impl Fn(u32) -> u32, flows: u16) -> Vec<usize> {
    let mut key = [0u8; 40];
    for n in 0..10 {
        key[4 * n..4 * n + 4].copy_from_slice(&read(0x0EB80 + 4 * n as u32).to_le_bytes());
    }
    let reta: Vec<u8> = (0..32u32)
        .flat_map(|n| read(0x0EB00 + 4 * n).to_le_bytes())
        .map(|entry| entry & 0xF)
        .collect();
    (0..flows)
        .map(|flow| {
            let f = udp_frame(flow);
            let input: Vec<u8> = [&f[26..30], &f[30..34], &f[34..36], &f[36..38]].concat();
            reta[(toeplitz(&key, &input) & 0x7F) as usize] as usize
        })
        .collect()
}

/// Issue 8 item 7: N threads (2 and 4) forward concurrently on split
/// handles; each queue pair forwards exactly the flows RSS gives its
/// queue, every frame arrives once, and the control handle's per-queue
/// counters (read while nothing is locked on the data path) agree.
#[test]
fn n_threads_forward_exactly_what_rss_gives_each_queue() {
    forward_on_threads(World::global(), "mqn");
}

/// The same with the model's DMA engine on its own thread (descriptors
/// complete after the tail write, in partial runs): N driver threads and
/// the device run concurrently, and the counts are still exact.
#[test]
fn n_threads_forward_exactly_with_the_models_dma_thread() {
    let world = World::new_threaded();
    forward_on_threads(&world, "mqt");
    assert!(world.faults().is_empty(), "model faults: {:?}", world.faults());
}

fn forward_on_threads(world: &World, tag: &str) {
    let open = |name: &str, config: &Config| {
        oxnet_driver::ixgbe::IxgbeDevice::init(
            world.port(name),
            &format!("sim:{name}"),
            config,
            oxnet_driver::MemoryKind::Plain,
        )
        .unwrap()
    };
    for queues in [2u16, 4] {
        let config = Config {
            rx_queues: queues,
            tx_queues: queues,
            rx_ring_size: 256,
            tx_ring_size: 256,
            offloads: Offloads {
                rss: true,
                ..Offloads::default()
            },
            ..Config::default()
        };
        let (pa, pb, ps) = (
            format!("{tag}{queues}-a"),
            format!("{tag}{queues}-b"),
            format!("{tag}{queues}-sink"),
        );
        let a = open(&pa, &config);
        let frames: u16 = 200;
        let assigned = rss_queues(|offset| a.read_register(offset), frames);
        let mut expected = vec![0u64; queues as usize];
        for &q in &assigned {
            expected[q] += 1;
        }
        assert!(
            expected.iter().all(|&n| n > 0),
            "{queues} queues: the flows cover every queue ({expected:?})"
        );
        let b: Box<dyn Device> = Box::new(open(&pb, &config));
        let mut sink = open(&ps, &Config::default());
        world.connect(&pb, &ps);
        for flow in 0..frames {
            world.inject(&pa, &udp_frame(flow));
        }
        let result = multiqueue::forward(Box::new(a), b, &config, Some(0.5), false).unwrap();
        assert_eq!(result.per_queue, expected, "{queues} queues: forwarded per queue pair");
        let (spec, stats) = &result.queue_stats[0];
        assert_eq!(spec, &format!("sim:{pa}"));
        let received: Vec<u64> = stats.iter().map(|s| s.rx_packets).collect();
        assert_eq!(
            received, expected,
            "{queues} queues: control handle's rx_packets per queue"
        );
        let sent: Vec<u64> = result.queue_stats[1].1.iter().map(|s| s.tx_packets).collect();
        assert_eq!(
            sent, expected,
            "{queues} queues: control handle's tx_packets per queue of b"
        );
        // The model's DMA thread (if any) finishes what it was given.
        assert!(
            world.settle(std::time::Duration::from_secs(10)),
            "the model's DMA engine settles"
        );
        let mut batch = PacketBatch::with_capacity(64);
        let mut arrived = Vec::new();
        while sink.rx_batch(0, &mut batch, 64) > 0 {
            arrived.extend(batch.iter().map(|p| u16::from_be_bytes([p[34], p[35]]) - 1000));
            batch.clear();
        }
        arrived.sort_unstable();
        assert_eq!(
            arrived,
            (0..frames).collect::<Vec<_>>(),
            "{queues} queues: every frame once"
        );
    }
}

/// A split ixgbe device frees its queues only after the NIC acknowledged
/// the disable: after every handle is dropped, each queue's enable bit
/// (RXDCTL/TXDCTL bit 25, §8.2.3.8.6 / §8.2.3.9.10; RXDCTL(n) at 0x01028 +
/// 0x40·n, TXDCTL(n) at 0x06028 + 0x40·n) reads 0, whatever order the
/// handles go in.
#[test]
fn dropped_handles_leave_their_queues_disabled() {
    let config = Config {
        rx_queues: 2,
        tx_queues: 2,
        rx_ring_size: 64,
        tx_ring_size: 64,
        offloads: Offloads {
            rss: true,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let port = "mq-split-drop";
    let dev = oxnet_driver::ixgbe::IxgbeDevice::init(
        World::global().port(port),
        &format!("sim:{port}"),
        &config,
        oxnet_driver::MemoryKind::Plain,
    )
    .unwrap();
    let look = World::global().port(port);
    const ENABLE: u32 = 1 << 25;
    let rxdctl = |q: u32| 0x01028 + 0x40 * q;
    let txdctl = |q: u32| 0x06028 + 0x40 * q;
    use oxnet_driver::RegisterAccess;
    assert_eq!(look.read32(rxdctl(1)) & ENABLE, ENABLE, "running before the split");
    let mut handles = Box::new(dev).split().unwrap();
    let rx1 = handles.rx.pop().unwrap();
    assert_eq!(rx1.queue(), 1);
    drop(rx1);
    assert_eq!(look.read32(rxdctl(1)) & ENABLE, 0, "rx queue 1 stopped by its handle");
    assert_eq!(look.read32(rxdctl(0)) & ENABLE, ENABLE, "rx queue 0 still running");
    assert_eq!(handles.control.queues(), (2, 2));
    assert!(handles.control.link().up);
    drop(handles.control);
    assert_eq!(look.read32(txdctl(0)) & ENABLE, ENABLE, "tx queue 0 still running");
    drop(handles.tx);
    drop(handles.rx);
    for q in 0..2 {
        assert_eq!(look.read32(rxdctl(q)) & ENABLE, 0, "rx queue {q}");
        assert_eq!(look.read32(txdctl(q)) & ENABLE, 0, "tx queue {q}");
    }
    assert!(World::global().faults().iter().all(|f| !f.contains(port)));
}

/// A device whose receive queue 1 panics (a stand-in for a bug in one
/// thread's code); queue 0 receives nothing. It has no native split, so
/// it also exercises the locked fallback (`split_locked`).
struct PanicsOnQueue1 {
    pool: oxnet_driver::Mempool,
}

impl Device for PanicsOnQueue1 {
    fn driver_name(&self) -> &'static str {
        "test"
    }
    fn spec(&self) -> &str {
        "test:panics"
    }
    fn rx_batch(&mut self, queue: u16, _batch: &mut PacketBatch, _max: usize) -> usize {
        assert_ne!(queue, 1, "queue 1 is broken");
        0
    }
    fn tx_batch(&mut self, _queue: u16, _batch: &mut PacketBatch) -> usize {
        0
    }
    fn stats(&mut self) -> oxnet_driver::DeviceStats {
        oxnet_driver::DeviceStats::default()
    }
    fn link(&self) -> oxnet_driver::Link {
        oxnet_driver::Link {
            up: true,
            speed_mbps: 0,
        }
    }
    fn mac(&self) -> [u8; 6] {
        [2, 0, 0, 0, 0, 1]
    }
    fn set_promisc(&mut self, _on: bool) -> oxnet_driver::Result<()> {
        Ok(())
    }
    fn features(&self) -> oxnet_driver::Features {
        oxnet_driver::Features::default()
    }
    fn mempool(&self, _queue: u16) -> oxnet_driver::Mempool {
        self.pool.clone()
    }
    fn queues(&self) -> (u16, u16) {
        (2, 2)
    }
}

/// Issue 8 item 7: a panic in one forwarding thread is an error that names
/// its queue pair, returned promptly, instead of a poisoned lock that makes
/// every other thread panic too (`expect("device lock")` before).
#[test]
fn a_panicking_thread_is_reported_as_an_error() {
    let config = Config {
        rx_queues: 2,
        tx_queues: 2,
        ..Config::default()
    };
    let device = || {
        Box::new(PanicsOnQueue1 {
            pool: oxnet_driver::Mempool::new("panics", 64, oxnet_driver::MemoryKind::Plain).unwrap(),
        }) as Box<dyn Device>
    };
    let start = std::time::Instant::now();
    let result = multiqueue::forward(device(), device(), &config, Some(30.0), false);
    let message = result.err().expect("an error, not Ok").to_string();
    assert!(
        message.contains("queue pair 1 panicked") && message.contains("queue 1 is broken"),
        "{message}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "returned when the thread died, not at the deadline"
    );
}
