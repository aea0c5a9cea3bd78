//! Issue 8 item 9: bad input gives a clear error, never a panic. Each test
//! names the panic it guards against.

use oxnet::commands::open;
use oxnet_driver::{Config, Offloads, PacketBatch};
use oxnet_sim::World;
use std::process::Command;

/// `--seconds` values that used to panic in `Duration::from_secs_f64` or
/// in `Instant + Duration`: a usage error (exit 2) naming the value.
#[test]
fn bad_seconds_are_a_usage_error_not_a_panic() {
    let exe = env!("CARGO_BIN_EXE_oxnet");
    for bad in ["-1", "nan", "inf", "1e18"] {
        for args in [
            vec!["demo", "--seconds", bad],
            vec!["fwd", "sim:bi-a", "sim:bi-b", "--seconds", bad],
            vec!["stats", "sim:bi-c", "--seconds", bad],
        ] {
            let mut full = args.clone();
            // `--seconds=-1`: clap would read a bare `-1` as an option.
            let at = full.iter().position(|a| *a == "--seconds").unwrap();
            let joined = format!("--seconds={bad}");
            full.splice(at..at + 2, [joined.as_str()]);
            let out = Command::new(exe).args(&full).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{full:?}: {stderr}");
            assert!(stderr.contains(&format!("`{bad}`")), "{full:?}: {stderr}");
            assert!(!stderr.contains("panicked"), "{full:?}: {stderr}");
        }
    }
    let bench = env!("CARGO_BIN_EXE_oxnet-vhost-bench");
    let out = Command::new(bench).args(["tx", "sim:bi-d", "nan"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`nan`") && !stderr.contains("panicked"), "{stderr}");
}

/// `rx_batch(.., usize::MAX)` used to reach `Vec::reserve(usize::MAX)`
/// ("capacity overflow"), on the plain and on the offload receive path.
/// Now it receives what is there: exactly the frames injected.
#[test]
fn rx_batch_with_usize_max_receives_what_is_there() {
    for (name, offloads) in [
        ("bi-rx-plain", Offloads::default()),
        (
            "bi-rx-features",
            Offloads {
                rx_checksum: true,
                ..Offloads::default()
            },
        ),
    ] {
        let config = Config {
            rx_ring_size: 64,
            tx_ring_size: 64,
            offloads,
            ..Config::default()
        };
        let mut dev = open(&format!("sim:{name}"), &config).unwrap();
        let mut frame = vec![0u8; 60];
        frame[0..6].copy_from_slice(&World::global().mac(name));
        for _ in 0..5 {
            World::global().inject(name, &frame);
        }
        let mut batch = PacketBatch::with_capacity(8);
        let mut got = 0;
        for _ in 0..100 {
            got += dev.rx_batch(0, &mut batch, usize::MAX);
            if got >= 5 {
                break;
            }
        }
        assert_eq!(got, 5, "{name}");
        assert_eq!(batch.len(), 5, "{name}");
        let pool = dev.mempool(0);
        let mut more = PacketBatch::with_capacity(1);
        let taken = pool.alloc_batch(&mut more, usize::MAX);
        assert!(taken <= pool.size(), "{name}: {taken}");
    }
}

/// A TCP checksum request whose L4 length (8) cannot hold the checksum
/// field (bytes 16..18), on a frame that ends there: `tx_batch` used to
/// panic in the software checksum path (`offload.rs`). Now the packet is
/// refused and counted (tx_invalid), and the queue keeps working.
#[test]
fn short_l4_checksum_request_is_refused_by_tx_batch() {
    use oxnet_driver::packet::{TxOffload, TX_TCP_CSUM};
    let config = Config {
        rx_ring_size: 64,
        tx_ring_size: 64,
        offloads: Offloads {
            tx_checksum: false, // the software path, where the panic was
            ..Offloads::default()
        },
        ..Config::default()
    };
    let mut dev = open("sim:bi-tx-short", &config).unwrap();
    let pool = dev.mempool(0);
    let mut batch = PacketBatch::with_capacity(2);
    for _ in 0..2 {
        let mut p = pool.alloc().unwrap();
        p.set_len(42).unwrap(); // 14 + 20 + 8 bytes
        p.fill(0);
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        p[14] = 0x45;
        p[23] = 6;
        p.set_tx_offload(TxOffload {
            flags: TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 8,
            mss: 0,
        });
        batch.push(p);
    }
    let taken = dev.tx_batch(0, &mut batch);
    assert_eq!(taken, 2, "both taken off the batch (refused)");
    assert!(batch.is_empty());
    assert_eq!(dev.stats().tx_invalid, 2);
}
