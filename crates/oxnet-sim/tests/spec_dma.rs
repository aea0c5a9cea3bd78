//! The `sim:NAME,dma=thread|sync` spec option: it sets the DMA mode of the
//! process-wide world (one engine for every sim port), overriding
//! `OXNET_SIM_DMA`; frames still arrive whole; a later spec asking for the
//! other mode is refused with a message naming the first. One test in its
//! own binary: the global world is this process's alone.

use oxnet_driver::{Config, PacketBatch};
use oxnet_sim::{DmaMode, World};
use std::time::Duration;

fn dma_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter(|task| {
            let comm = std::fs::read_to_string(task.as_ref().unwrap().path().join("comm")).unwrap_or_default();
            comm.trim_end() == "oxnet-sim dma"
        })
        .count()
}

#[test]
fn dma_option_runs_the_global_engine_on_its_own_thread() {
    // The test must not depend on the caller's environment: the option
    // overrides it, and the message check below needs a known first mode.
    std::env::set_var("OXNET_SIM_DMA", "sync");
    oxnet_sim::install();
    assert_eq!(World::global().dma_mode(), DmaMode::Synchronous);
    assert_eq!(dma_threads(), 0);

    let config = Config::default();
    let mut dev = oxnet_driver::open("sim:specdma0,dma=thread", &config).expect("sim with dma=thread");
    assert_eq!(World::global().dma_mode(), DmaMode::Thread);
    assert_eq!(dma_threads(), 1, "the model's DMA thread runs");
    World::global().set_capture("specdma0", true);

    // 100 numbered frames, sent by the engine thread after the tail write.
    let pool = dev.mempool(0);
    let mut batch = PacketBatch::with_capacity(100);
    for i in 0..100u32 {
        let mut p = pool.alloc().unwrap();
        p.set_len(60).unwrap();
        p.fill(0);
        p[0..6].copy_from_slice(&[0xff; 6]);
        p[14..18].copy_from_slice(&i.to_be_bytes());
        batch.push(p);
    }
    let mut sent = 0;
    while !batch.is_empty() {
        sent += dev.tx_batch(0, &mut batch);
    }
    assert_eq!(sent, 100);
    assert!(
        World::global().settle(Duration::from_secs(10)),
        "the DMA engine settles"
    );
    let wire = World::global().frames_on_wire("specdma0");
    let numbers: Vec<u32> = wire
        .iter()
        .map(|f| u32::from_be_bytes(f[14..18].try_into().unwrap()))
        .collect();
    assert_eq!(numbers, (0..100).collect::<Vec<u32>>(), "every frame once, in order");

    // The same mode again is fine; the other one is refused.
    let again = oxnet_driver::open("sim:specdma1,dma=thread", &config).expect("the same mode again");
    let error = oxnet_driver::open("sim:specdma2,dma=sync", &config)
        .err()
        .expect("another mode is refused")
        .to_string();
    assert!(
        error.contains("'sim:specdma2,dma=sync'") && error.contains("'sim:specdma0,dma=thread'"),
        "{error}"
    );
    let error = oxnet_driver::open("sim:specdma3,dma=fast", &config)
        .err()
        .expect("bad value")
        .to_string();
    assert!(error.contains("dma=fast is not a DMA mode"), "{error}");
    drop(again);
    drop(dev);
}
