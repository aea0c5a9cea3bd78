//! Teardown against the model's DMA engine (run beside the driver, or
//! stepped by the test): a queue being disabled keeps ENABLE at 1 until its
//! write-backs are done (82599 §4.6.8.1.2, §4.6.7.1.2), and DMA into memory
//! the driver already freed is a recorded fault. The first two tests drive
//! the registers by hand, to show the fault fires when teardown does not
//! wait and stays away when it does; the last drops a driver with traffic
//! in flight.

mod common;

use common::*;
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::{Config, Device, MemoryKind, Mempool, PacketBatch, RegisterAccess};
use oxnet_sim::{DmaMode, SimRegisters, World};
use std::sync::Arc;
use std::time::Duration;

/// A world whose engine moves only when the test steps it, with transmit
/// queue 0 of port `name` set up and one packet handed over and sent by
/// one engine step: its write-back (DD) is still in flight.
fn one_packet_in_flight(name: &str) -> (Arc<World>, SimRegisters, TxRing) {
    let world = World::new();
    world.set_dma_mode(DmaMode::Manual);
    world.connect(name, name);
    let regs = world.port(name);
    reset(&regs);
    let mut ring = setup_tx(&regs, 64);
    ring.put_packet(&frame([0xFF; 6], 60, 0xAB), true);
    ring.flush(&regs);
    assert!(world.dma_step(), "the engine took the packet");
    assert!(!ring.done(0), "its write-back comes in the next step");
    (world, regs, ring)
}

#[test]
fn freeing_a_ring_while_its_write_back_is_in_flight_is_a_fault() {
    let (world, regs, ring) = one_packet_in_flight("td-broken");
    // A teardown that does not wait: ENABLE cleared, memory freed at once.
    regs.write32(TXDCTL, regs.read32(TXDCTL) & !ENABLE);
    drop(ring);
    world.dma_step();
    let faults = world.faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].contains("TX queue 0") && faults[0].contains("not inside any live DmaMemory"),
        "{faults:?}"
    );
}

#[test]
fn waiting_for_enable_to_read_zero_before_freeing_leaves_no_fault() {
    let (world, regs, ring) = one_packet_in_flight("td-proper");
    regs.write32(TXDCTL, regs.read32(TXDCTL) & !ENABLE);
    // §4.6.8.1.2: the queue is stopped once ENABLE reads 0; with a
    // write-back in flight it does not yet.
    assert_ne!(regs.read32(TXDCTL) & ENABLE, 0, "still stopping");
    world.dma_step();
    assert_eq!(regs.read32(TXDCTL) & ENABLE, 0, "stopped after the write-back");
    assert!(ring.done(0), "the write-back landed while the ring was alive");
    drop(ring);
    world.dma_step();
    assert_eq!(world.faults(), Vec::<String>::new());
}

#[test]
fn dropping_a_device_with_traffic_in_flight_leaves_no_fault() {
    // Whether a write-back is in flight at the moment of the drop depends
    // on the engine thread's timing: ten rounds make it near certain that
    // some are (with Drop only clearing the enable bits, as before, this
    // test failed in 2 of 3 runs with one round).
    for round in 0..10 {
        drop_mid_traffic(&format!("td{round}"));
    }
}

fn drop_mid_traffic(name: &str) {
    let world = World::new_threaded();
    let (a_name, b_name) = (format!("{name}-a"), format!("{name}-b"));
    world.connect(&a_name, &b_name);
    let config = Config::default();
    let mut a = IxgbeDevice::init(world.port(&a_name), &a_name, &config, MemoryKind::Plain).unwrap();
    let mut b = IxgbeDevice::init(world.port(&b_name), &b_name, &config, MemoryKind::Plain).unwrap();
    let pool = Mempool::new(name, 4096, MemoryKind::Plain).unwrap();
    let mut sent = 0;
    let mut received = PacketBatch::with_capacity(512);
    for _ in 0..20 {
        let mut batch = PacketBatch::with_capacity(256);
        pool.alloc_batch(&mut batch, 256);
        for p in batch.iter_mut() {
            p.set_len(60).unwrap();
            p[..12].fill(0xFF);
        }
        sent += a.tx_batch(0, &mut batch) as u64;
        b.rx_batch(0, &mut received, 512);
        received.clear();
    }
    assert!(sent > 0);
    // Both dropped while the engine is still sending and receiving.
    drop(a);
    drop(b);
    assert!(world.settle(Duration::from_secs(10)), "the engine went idle");
    assert_eq!(world.faults(), Vec::<String>::new(), "{name}");
}
