//! Receive path: frames injected from the wire into a ring set up by hand.

mod common;

use common::*;
use oxnet_driver::RegisterAccess;
use oxnet_sim::{crc32, World};

#[test]
fn frames_are_written_back_with_crc_stripped() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let ring = setup_rx(&regs, 64, 2, true, 63);
    for fill in 1..=3 {
        world.inject("a", &frame([0xFF; 6], 100, fill));
    }
    for i in 0..3 {
        assert_eq!(ring.status(i), RX_DD | RX_EOP);
        assert_eq!(ring.length(i), 100, "PKT_LEN excludes the CRC");
        assert_eq!(ring.data(i, 100), frame([0xFF; 6], 100, i as u8 + 1));
    }
    assert_eq!(ring.status(3) & RX_DD, 0);
    assert_eq!(regs.read32(RDH), 3);
    assert_eq!(regs.read32(GPRC), 3);
    assert_eq!(read_octets(&regs, GORCL, GORCH), 3 * 104, "octets include the CRC");
    assert_eq!(regs.read32(GPRC), 0, "clear on read");
    assert_eq!(read_octets(&regs, GORCL, GORCH), 0);
    assert!(world.faults().is_empty(), "{:?}", world.faults());
}

#[test]
fn without_crc_strip_the_fcs_lands_in_host_memory() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let ring = setup_rx(&regs, 64, 2, false, 63);
    let sent = frame([0xFF; 6], 100, 7);
    world.inject("a", &sent);
    assert_eq!(ring.length(0), 104);
    let received = ring.data(0, 104);
    assert_eq!(&received[..100], &sent[..]);
    assert_eq!(&received[100..], &crc32(&sent).to_le_bytes());
}

#[test]
fn frame_bigger_than_the_buffer_spans_descriptors() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let ring = setup_rx(&regs, 64, 1, true, 63);
    let sent = frame([0xFF; 6], 1500, 9);
    world.inject("a", &sent);
    assert_eq!(ring.status(0), RX_DD, "first part: no EOP");
    assert_eq!(ring.length(0), 1024);
    assert_eq!(ring.status(1), RX_DD | RX_EOP);
    assert_eq!(ring.length(1), 1500 - 1024);
    assert_eq!([ring.data(0, 1024), ring.data(1, 476)].concat(), sent);
    assert_eq!(regs.read32(RDH), 2);
    assert_eq!(regs.read32(GPRC), 1);
}

#[test]
fn full_ring_buffers_frames_until_rdt_and_counts_the_excess_as_missed() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    regs.write32(RXPBSIZE0, 1 << 10); // a 1 KB packet buffer: 16 frames of 64 bytes
    let ring = setup_rx(&regs, 64, 2, true, 7); // 7 free descriptors
    for fill in 0..30 {
        world.inject("a", &frame([0xFF; 6], 60, fill));
    }
    assert_eq!(regs.read32(RDH), 7, "7 frames in the ring");
    assert_eq!(
        regs.read32(MPC0),
        30 - 7 - 16,
        "the excess over ring + buffer is missed"
    );
    assert_eq!(regs.read32(GPRC), 7 + 16, "buffered frames count as received");
    write_tail(&regs, RDT, 63);
    assert_eq!(regs.read32(RDH), 7 + 16, "RDT drained the buffer");
    for i in 0..23 {
        assert_eq!(ring.status(i), RX_DD | RX_EOP);
        assert_eq!(ring.data(i, 60), frame([0xFF; 6], 60, i as u8), "in order");
    }
    assert_eq!(regs.read32(MPC0), 0, "clear on read");
    world.inject("a", &frame([0xFF; 6], 60, 99));
    assert_eq!(regs.read32(RDH), 24, "buffer empty: straight to the ring again");
}

#[test]
fn bad_crc_is_counted_and_dropped() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let ring = setup_rx(&regs, 64, 2, true, 63);
    let mut bad = frame([0xFF; 6], 60, 1);
    bad.extend_from_slice(&(crc32(&bad) ^ 1).to_le_bytes());
    world.inject_with_fcs("a", &bad);
    world.inject_with_fcs("a", &bad);
    assert_eq!(regs.read32(CRCERRS), 2);
    assert_eq!(regs.read32(GPRC), 0);
    assert_eq!(ring.status(0) & RX_DD, 0);
    assert_eq!(regs.read32(RDH), 0);
}

#[test]
fn runts_are_counted_as_undersize() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _ring = setup_rx(&regs, 64, 2, true, 63);
    world.inject("a", &frame([0xFF; 6], 59, 1)); // 63 bytes with CRC
    assert_eq!(regs.read32(RUC), 1);
    assert_eq!(regs.read32(RDH), 0);
}

#[test]
fn address_filter_follows_fctrl_and_ral() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _ring = setup_rx(&regs, 64, 2, true, 63);
    let own = world.mac("a");
    let other = [0x02, 9, 9, 9, 9, 9];
    let multicast = [0x01, 0x00, 0x5E, 0, 0, 1];
    regs.write32(FCTRL, 0);
    for destination in [own, other, [0xFF; 6], multicast] {
        world.inject("a", &frame(destination, 60, 0));
    }
    assert_eq!(regs.read32(GPRC), 1, "only the own address passes");
    regs.write32(FCTRL, FCTRL_BAM | FCTRL_MPE);
    for destination in [own, other, [0xFF; 6], multicast] {
        world.inject("a", &frame(destination, 60, 0));
    }
    assert_eq!(regs.read32(GPRC), 3, "own, broadcast, multicast");
    regs.write32(FCTRL, FCTRL_UPE);
    world.inject("a", &frame(other, 60, 0));
    assert_eq!(regs.read32(GPRC), 1, "promiscuous");
    assert_eq!(regs.read32(MPC0), 0, "filtered frames are not missed frames");
    assert_eq!(regs.read32(RDH), 5);
}

#[test]
fn buffer_address_outside_dma_memory_is_a_fault_not_a_crash() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let ring = setup_rx(&regs, 64, 2, true, 63);
    ring.arm_with_address(0, 0x1000);
    world.inject("a", &frame([0xFF; 6], 60, 1));
    let faults = world.faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].contains("0x1000") && faults[0].contains("not inside any live DmaMemory"),
        "{}",
        faults[0]
    );
    assert_eq!(regs.read32(RDH), 0, "nothing written back");
    assert_eq!(ring.status(0) & RX_DD, 0);
}

#[test]
fn descriptor_type_other_than_advanced_one_buffer_is_a_fault() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _ring = setup_rx(&regs, 64, 2, true, 63);
    regs.write32(SRRCTL, 2); // DESCTYPE 000b: legacy
    world.inject("a", &frame([0xFF; 6], 60, 1));
    let faults = world.faults();
    assert_eq!(faults.len(), 1);
    assert!(faults[0].contains("DESCTYPE"), "{}", faults[0]);
}
