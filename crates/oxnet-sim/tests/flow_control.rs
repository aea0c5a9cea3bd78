//! IEEE 802.3x flow control between two wired ports: a receiver whose
//! packet buffer fills pauses its partner instead of dropping frames.

mod common;

use common::*;
use oxnet_driver::RegisterAccess;
use oxnet_sim::{SimRegisters, World};

const FRAMES: usize = 100;

/// "a" sends FRAMES 64-byte frames to "b", whose ring has 4 free
/// descriptors and whose packet buffer holds 64 such frames (4 KB).
fn setup(world: &World, pause: bool) -> (SimRegisters, SimRegisters, RxRing, TxRing) {
    world.connect("a", "b");
    let (a, b) = (world.port("a"), world.port("b"));
    reset(&a);
    reset(&b);
    b.write32(RXPBSIZE0, 4 << 10);
    let rx = setup_rx(&b, 128, 2, true, 4);
    // XOFF at 2 KB (32 frames) in the buffer, XON below 1 KB.
    b.write32(FCCFG, 0b01 << 3);
    b.write32(FCRTH0, 1 << 31 | 2048);
    b.write32(FCRTL0, 1 << 31 | 1024);
    if pause {
        a.write32(MFLCN, 1 << 3); // RFCE
    }
    let mut tx = setup_tx(&a, 128);
    for i in 0..FRAMES {
        tx.put_packet(&frame([0xFF; 6], 60, i as u8), true);
    }
    tx.flush(&a);
    (a, b, rx, tx)
}

#[test]
fn xoff_pauses_the_sender_and_xon_resumes_it_without_loss() {
    let world = World::new();
    let (a, b, rx, _tx) = setup(&world, true);
    assert_eq!(
        a.read32(TDH),
        4 + 32,
        "4 into the ring, 32 into the buffer, then paused"
    );
    assert_eq!((b.read32(LXOFFTXC), a.read32(LXOFFRXCNT)), (1, 1));
    assert_eq!(b.read32(MPC0), 0);

    write_tail(&b, RDT, 127); // 123 more descriptors: the buffer drains, XON
    assert_eq!(a.read32(TDH), FRAMES as u32, "the rest went out after XON");
    assert_eq!((b.read32(LXONTXC), a.read32(LXONRXCNT)), (1, 1));
    assert_eq!(b.read32(RDH), FRAMES as u32);
    for i in 0..FRAMES {
        assert_eq!(rx.data(i, 60), frame([0xFF; 6], 60, i as u8), "frame {i} in order");
    }
    assert_eq!(
        (a.read32(GPTC), b.read32(GPRC), b.read32(MPC0)),
        (FRAMES as u32, FRAMES as u32, 0)
    );
    assert!(world.faults().is_empty(), "{:?}", world.faults());
}

#[test]
fn a_sender_that_ignores_pause_loses_exactly_the_excess() {
    let world = World::new();
    let (a, b, _rx, _tx) = setup(&world, false);
    assert_eq!(a.read32(TDH), FRAMES as u32, "not paused");
    assert_eq!(b.read32(LXOFFTXC), 1, "XOFF was sent all the same");
    assert_eq!(a.read32(LXOFFRXCNT), 0, "and ignored");
    assert_eq!(a.read32(GPTC), FRAMES as u32);
    assert_eq!(b.read32(MPC0), (FRAMES - 4 - 64) as u32);
    assert_eq!(b.read32(GPRC), 4 + 64);
}
