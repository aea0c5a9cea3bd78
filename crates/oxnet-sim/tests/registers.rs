//! Register-level behaviour: reset, polling, faults, link, tracing.

mod common;

use common::*;
use oxnet_driver::RegisterAccess;
use oxnet_sim::{Access, World, FAULT_VALUE};

#[test]
fn reset_bits_self_clear_after_two_reads() {
    let world = World::new();
    let regs = world.port("a");
    for bit in [CTRL_RST, CTRL_LRST] {
        regs.write32(CTRL, bit);
        assert_eq!(regs.read32(CTRL) & bit, bit, "1st read: reset still in progress");
        assert_eq!(regs.read32(CTRL) & bit, bit, "2nd read: reset still in progress");
        assert_eq!(regs.read32(CTRL) & bit, 0, "3rd read: done");
    }
    assert!(world.faults().is_empty(), "{:?}", world.faults());
}

#[test]
fn eeprom_auto_read_and_dma_init_need_polling_after_reset() {
    let world = World::new();
    let regs = world.port("a");
    for _ in 0..2 {
        // At power-on, and again after a reset.
        assert_eq!(regs.read32(EEC) & EEC_ARD, 0);
        assert_eq!(regs.read32(EEC) & EEC_ARD, 0);
        assert_eq!(regs.read32(EEC) & EEC_ARD, EEC_ARD);
        assert_eq!(regs.read32(RDRXCTL) & RDRXCTL_DMAIDONE, 0);
        assert_eq!(regs.read32(RDRXCTL) & RDRXCTL_DMAIDONE, 0);
        assert_eq!(regs.read32(RDRXCTL) & RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE);
        regs.write32(CTRL, CTRL_RST);
    }
}

#[test]
fn reset_restores_power_on_values_and_zeroes_statistics() {
    let world = World::new();
    let regs = world.port("a");
    reset(&regs);
    let _ring = setup_rx(&regs, 64, 2, true, 63);
    regs.write32(FCTRL, FCTRL_UPE);
    regs.write32(RAL0, 0x1234_5678);
    world.inject("a", &frame([0xFF; 6], 60, 1));
    reset(&regs);
    assert_eq!(regs.read32(FCTRL), 0);
    assert_eq!(regs.read32(RXCTRL), 0);
    assert_eq!(regs.read32(RXDCTL) & ENABLE, 0);
    assert_eq!(regs.read32(HLREG0), HLREG0_TXCRCEN | HLREG0_RXCRCSTRP | HLREG0_TXPADEN);
    assert_eq!(regs.read32(RXPBSIZE0), 512 << 10);
    assert_eq!(regs.read32(GPRC), 0, "statistics are zeroed by reset");
    let mac = world.mac("a");
    assert_eq!(regs.read32(RAL0), u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]));
    assert_eq!(regs.read32(RAH0), u32::from(mac[4]) | u32::from(mac[5]) << 8 | 1 << 31);
}

#[test]
fn mac_is_deterministic_and_locally_administered() {
    let (w1, w2) = (World::new(), World::new());
    assert_eq!(w1.mac("port0"), w2.mac("port0"));
    assert_ne!(w1.mac("port0"), w1.mac("port1"));
    assert_eq!(w1.mac("port0")[0], 0x02, "locally administered unicast");
}

#[test]
fn unmodelled_register_is_a_fault() {
    let world = World::new();
    let regs = world.port("nic7");
    assert_eq!(regs.read32(0x0BAD0), FAULT_VALUE);
    regs.write32(0x0BAD4, 1);
    assert_eq!(regs.read32(EIMC), FAULT_VALUE, "EIMC is write-only");
    regs.write32(EIMC, 0x7FFF_FFFF);
    regs.write32(STATUS, 0);
    let faults = world.faults();
    assert_eq!(faults.len(), 4, "{faults:?}");
    assert!(
        faults[0].contains("'nic7'") && faults[0].contains("read of 0x0bad0"),
        "{}",
        faults[0]
    );
    assert!(faults[1].contains("write of 0x00000001 to 0x0bad4"), "{}", faults[1]);
    assert!(faults[2].contains("EIMC"), "{}", faults[2]);
    assert!(faults[3].contains("read-only"), "{}", faults[3]);
}

#[test]
fn queue_enable_reads_back_from_the_second_read() {
    let world = World::new();
    let regs = world.port("a");
    regs.write32(RXDCTL, ENABLE);
    assert_eq!(regs.read32(RXDCTL) & ENABLE, 0);
    assert_eq!(regs.read32(RXDCTL) & ENABLE, ENABLE);
    regs.write32(TXDCTL, ENABLE);
    assert_eq!(poll(&regs, TXDCTL, ENABLE, true), 2);
}

#[test]
fn link_is_down_during_reset_and_up_at_10g_after() {
    let world = World::new();
    let regs = world.port("a");
    regs.write32(CTRL, CTRL_RST);
    assert_eq!(regs.read32(LINKS), 0, "in reset: link down");
    poll(&regs, CTRL, CTRL_RST, false);
    regs.write32(AUTOC, 1 << 12);
    assert_eq!(regs.read32(AUTOC) & (1 << 12), 0, "AN_RESTART self-clears");
    assert_eq!(regs.read32(LINKS), (1 << 30) | (0b11 << 28));
    assert_eq!(regs.read32(STATUS) & (1 << 7), 1 << 7);
}

#[test]
fn tracing_records_every_access_in_order() {
    let world = World::new();
    let regs = world.port("a");
    regs.write32(FCTRL, 1);
    world.set_tracing("a", true);
    regs.write32(FCTRL, FCTRL_BAM);
    let value = regs.read32(FCTRL);
    regs.read32(0x0BAD0);
    world.set_tracing("a", false);
    regs.read32(FCTRL);
    assert_eq!(
        world.trace("a"),
        vec![
            Access::Write {
                offset: FCTRL,
                value: FCTRL_BAM
            },
            Access::Read { offset: FCTRL, value },
            Access::Read {
                offset: 0x0BAD0,
                value: FAULT_VALUE
            },
        ]
    );
}

#[test]
fn eims_and_eimc_set_and_clear_the_mask() {
    let world = World::new();
    let regs = world.port("a");
    regs.write32(0x00880, 0b1011);
    regs.write32(EIMC, 0b0010);
    assert_eq!(regs.read32(0x00880), 0b1001);
    assert!(world.faults().is_empty());
}
