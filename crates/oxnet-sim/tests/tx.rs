//! Transmit path: descriptors on one port, frames on the wire and in the
//! partner's receive ring.

mod common;

use common::*;
use oxnet_driver::RegisterAccess;
use oxnet_sim::{crc32, World};

#[test]
fn short_frame_is_padded_to_60_bytes_plus_crc_and_lands_in_the_partner() {
    let world = World::new();
    world.connect("a", "b");
    let (a, b) = (world.port("a"), world.port("b"));
    reset(&a);
    reset(&b);
    let rx = setup_rx(&b, 64, 2, true, 63);
    let mut tx = setup_tx(&a, 64);
    world.set_capture("a", true);
    let sent = frame([0xFF; 6], 42, 5);
    tx.put_packet(&sent, true);
    tx.flush(&a);

    let wire = world.frames_on_wire("a");
    assert_eq!(wire.len(), 1);
    assert_eq!(wire[0].len(), 64, "60 bytes padded + 4 bytes CRC");
    assert_eq!(&wire[0][..42], &sent[..]);
    assert!(wire[0][42..60].iter().all(|&b| b == 0), "zero padding");
    assert_eq!(&wire[0][60..], &crc32(&wire[0][..60]).to_le_bytes());

    assert!(tx.done(0), "RS set: DD written back");
    assert_eq!(a.read32(TDH), 1);
    assert_eq!(rx.status(0), RX_DD | RX_EOP);
    assert_eq!(rx.length(0), 60);
    assert_eq!(rx.data(0, 60), wire[0][..60]);

    assert_eq!(a.read32(GPTC), 1);
    assert_eq!(read_octets(&a, GOTCL, GOTCH), 64);
    assert_eq!(b.read32(GPRC), 1);
    assert_eq!(read_octets(&b, GORCL, GORCH), 64);
    assert_eq!(
        (a.read32(GPTC), a.read32(GOTCL), b.read32(GPRC), b.read32(GORCL)),
        (0, 0, 0, 0),
        "clear on read"
    );
    assert!(world.faults().is_empty(), "{:?}", world.faults());
}

#[test]
fn dd_is_written_back_only_where_rs_is_set() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    for i in 0..4 {
        tx.put_packet(&frame([0xFF; 6], 60, i), i == 2);
    }
    tx.flush(&regs);
    assert_eq!(
        [tx.done(0), tx.done(1), tx.done(2), tx.done(3)],
        [false, false, true, false]
    );
    assert_eq!(regs.read32(TDH), 4);
    assert_eq!(regs.read32(GPTC), 4);
}

#[test]
fn descriptors_up_to_eop_make_one_frame() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    let whole = frame([0xFF; 6], 300, 3);
    tx.put(&whole[..100], DTYP_DATA | DCMD_DEXT | DCMD_IFCS);
    tx.put(&whole[100..], DTYP_DATA | DCMD_DEXT | DCMD_IFCS | DCMD_EOP | DCMD_RS);
    write_tail(&regs, TDT, 1);
    assert_eq!(regs.read32(TDH), 0, "no EOP before TDT: the packet waits");
    tx.flush(&regs);
    assert_eq!(regs.read32(TDH), 2);
    assert_eq!(rx.length(0), 300);
    assert_eq!(rx.data(0, 300), whole);
    assert_eq!(regs.read32(GPTC), 1);
}

#[test]
fn an_unwired_port_receives_what_it_sends() {
    let world = World::new();
    let regs = world.port("lonely");
    reset(&regs);
    let rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    tx.put_packet(&frame([0xFF; 6], 80, 1), true);
    tx.flush(&regs);
    assert_eq!(rx.data(0, 80), frame([0xFF; 6], 80, 1));
    assert_eq!(regs.read32(GPRC), 1);
}

#[test]
fn mac_loopback_keeps_frames_off_the_wire() {
    let world = World::new();
    world.connect("a", "b");
    let (a, b) = (world.port("a"), world.port("b"));
    reset(&a);
    reset(&b);
    let rx_a = setup_rx(&a, 64, 2, true, 63);
    let _rx_b = setup_rx(&b, 64, 2, true, 63);
    let mut tx = setup_tx(&a, 64);
    a.write32(HLREG0, a.read32(HLREG0) | HLREG0_LPBK);
    tx.put_packet(&frame([0xFF; 6], 80, 1), true);
    tx.flush(&a);
    assert_eq!(rx_a.length(0), 80);
    assert_eq!((a.read32(GPRC), b.read32(GPRC)), (1, 0));
}

#[test]
fn without_ifcs_the_partner_sees_a_crc_error() {
    let world = World::new();
    world.connect("a", "b");
    let (a, b) = (world.port("a"), world.port("b"));
    reset(&a);
    reset(&b);
    let _rx = setup_rx(&b, 64, 2, true, 63);
    let mut tx = setup_tx(&a, 64);
    tx.put(&frame([0xFF; 6], 64, 1), DTYP_DATA | DCMD_DEXT | DCMD_EOP | DCMD_RS);
    tx.flush(&a);
    assert_eq!(b.read32(CRCERRS), 1);
    assert_eq!(b.read32(GPRC), 0);
}

#[test]
fn bad_buffer_address_is_a_fault_and_the_ring_moves_on() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    tx.put_raw(0xDEAD_0000, DTYP_DATA | DCMD_DEXT | DCMD_EOP | DCMD_IFCS | DCMD_RS | 60);
    tx.put_packet(&frame([0xFF; 6], 60, 1), true);
    tx.flush(&regs);
    let faults = world.faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains("0xdead0000"), "{}", faults[0]);
    assert_eq!(regs.read32(TDH), 2);
    assert_eq!(regs.read32(GPTC), 1, "only the good packet was sent");
}

#[test]
fn a_context_descriptor_stands_alone_and_sends_nothing() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    tx.put_raw(0, (0b0010 << 20) | DCMD_DEXT);
    tx.put_packet(&frame([0xFF; 6], 60, 1), true);
    tx.flush(&regs);
    // §7.2.3.2.3: a context descriptor only sets the context of the
    // packets after it; the packet is sent as it is (no POPTS asked).
    assert!(world.faults().is_empty(), "{:?}", world.faults());
    assert_eq!(regs.read32(TDH), 2);
    assert_eq!(regs.read32(GPTC), 1);
}

#[test]
fn nothing_is_sent_before_the_transmitter_is_enabled() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _rx = setup_rx(&regs, 64, 2, true, 63);
    let mut tx = setup_tx(&regs, 64);
    regs.write32(DMATXCTL, 0);
    tx.put_packet(&frame([0xFF; 6], 60, 1), true);
    tx.flush(&regs);
    assert_eq!(regs.read32(TDH), 0);
    regs.write32(DMATXCTL, 1);
    assert_eq!(regs.read32(TDH), 1, "enabling TE sends what is pending");
    assert_eq!(regs.read32(GPTC), 1);
}
