//! `oxnet fwd --queues N` on the software 82599: two threads, each with its
//! own queue pair and pinned to its own core, forward RSS-spread flows; every
//! frame arrives once.

use oxnet::apps::multiqueue;
use oxnet_driver::{Config, Offloads, PacketBatch};
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
