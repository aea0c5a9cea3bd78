//! The ixgbe driver's initialisation, checked access by access against the
//! order of 82599 datasheet §4.6.3 (and §4.6.7 / §4.6.8), on the model.

mod datasheet;
use datasheet::*;
use oxnet_driver::Config;
use oxnet_sim::{Access, World};

/// Index of the first access after `from` that matches.
fn find(trace: &[Access], from: usize, what: &str, pred: impl Fn(&Access) -> bool) -> usize {
    trace[from..]
        .iter()
        .position(pred)
        .map(|i| i + from)
        .unwrap_or_else(|| panic!("{what}: not found after access #{from}"))
}

fn write_of(offset: u32, pred: impl Fn(u32) -> bool) -> impl Fn(&Access) -> bool {
    move |a| matches!(*a, Access::Write { offset: o, value } if o == offset && pred(value))
}

fn read_of(offset: u32, pred: impl Fn(u32) -> bool) -> impl Fn(&Access) -> bool {
    move |a| matches!(*a, Access::Read { offset: o, value } if o == offset && pred(value))
}

#[test]
fn init_follows_the_datasheet_order() {
    let port = "init-order";
    World::global().set_tracing(port, true);
    let config = Config {
        rx_ring_size: 256,
        tx_ring_size: 128,
        ..Config::default()
    };
    let dev = oxnet_sim::open(port, &config).unwrap();
    let t = World::global().trace(port);
    World::global().set_tracing(port, false);

    // §4.6.3.1: interrupts off first of all.
    assert!(
        write_of(EIMC, |v| v == EIMC_ALL)(&t[0]),
        "first access must mask interrupts, got {:?}",
        t[0]
    );
    // §4.6.3.2: global reset, then poll CTRL until RST/LRST clear (the
    // model keeps them set for two reads, so polling is required).
    let reset = find(
        &t,
        0,
        "CTRL.RST write",
        write_of(CTRL, |v| v & CTRL_RST_MASK == CTRL_RST_MASK),
    );
    let still_set = find(
        &t,
        reset,
        "CTRL read with RST still set",
        read_of(CTRL, |v| v & CTRL_RST_MASK != 0),
    );
    let cleared = find(
        &t,
        still_set,
        "CTRL read with RST clear",
        read_of(CTRL, |v| v & CTRL_RST_MASK == 0),
    );
    // §4.6.3.1 again after the reset.
    let eimc_again = find(&t, cleared, "EIMC after reset", write_of(EIMC, |v| v == EIMC_ALL));
    // §4.6.3: EEPROM auto-read done, then DMA init done, each polled.
    let ard = find(&t, eimc_again, "EEC.ARD set", read_of(EEC, |v| v & EEC_ARD != 0));
    assert!(
        t[eimc_again..ard].iter().any(read_of(EEC, |v| v & EEC_ARD == 0)),
        "EEC.ARD must be polled"
    );
    let dmaidone = find(
        &t,
        ard,
        "RDRXCTL.DMAIDONE set",
        read_of(RDRXCTL, |v| v & RDRXCTL_DMAIDONE != 0),
    );
    // §4.6.4: link set-up after the reset completes.
    let autoc = find(
        &t,
        dmaidone,
        "AUTOC write",
        write_of(AUTOC, |v| v & AUTOC_LMS_MASK == AUTOC_LMS_10G_SERIAL),
    );
    // §4.6.5: statistics cleared by reading them before traffic is enabled.
    let stats = find(&t, dmaidone, "GPRC read", read_of(GPRC, |_| true));
    // §4.6.7: receive disabled, rings programmed, then receive enabled.
    let rx_off = find(
        &t,
        dmaidone,
        "RXCTRL.RXEN cleared",
        write_of(RXCTRL, |v| v & RXCTRL_RXEN == 0),
    );
    let rdbal0 = find(&t, rx_off, "RDBAL(0)", write_of(rdbal(0), |_| true));
    let rdlen0 = find(&t, rdbal0, "RDLEN(0) = 256 x 16", write_of(rdlen(0), |v| v == 256 * 16));
    let srrctl0 = find(
        &t,
        rx_off,
        "SRRCTL(0) advanced one-buffer",
        write_of(srrctl(0), |v| v & SRRCTL_DESCTYPE_MASK == SRRCTL_DESCTYPE_ADV_ONEBUF),
    );
    let strip = find(
        &t,
        dmaidone,
        "HLREG0.RXCRCSTRP",
        write_of(HLREG0, |v| v & HLREG0_RXCRCSTRP != 0),
    );
    let strip_dma = find(
        &t,
        dmaidone,
        "RDRXCTL.CRCSTRIP",
        write_of(RDRXCTL, |v| v & RDRXCTL_CRCSTRIP != 0),
    );
    let rx_on = find(
        &t,
        rdlen0,
        "RXCTRL.RXEN set",
        write_of(RXCTRL, |v| v & RXCTRL_RXEN != 0),
    );
    for (what, at) in [
        ("SRRCTL", srrctl0),
        ("CRC strip", strip),
        ("RDRXCTL.CRCSTRIP", strip_dma),
        ("statistics", stats),
        ("AUTOC", autoc),
    ] {
        assert!(at < rx_on, "{what} must be set before receive is enabled");
    }
    // §4.6.8: transmit rings programmed, then DMATXCTL.TE, then the queue.
    let tdlen0 = find(
        &t,
        dmaidone,
        "TDLEN(0) = 128 x 16",
        write_of(tdlen(0), |v| v == 128 * 16),
    );
    let te = find(&t, tdlen0, "DMATXCTL.TE", write_of(DMATXCTL, |v| v & DMATXCTL_TE != 0));
    let tx_enable = find(
        &t,
        te,
        "TXDCTL(0).ENABLE",
        write_of(txdctl(0), |v| v & DCTL_ENABLE != 0),
    );
    find(
        &t,
        tx_enable,
        "TXDCTL(0).ENABLE polled",
        read_of(txdctl(0), |v| v & DCTL_ENABLE != 0),
    );
    // §4.6.7.1: queue enabled and polled before RDT hands it descriptors.
    let rx_enable = find(
        &t,
        rdlen0,
        "RXDCTL(0).ENABLE",
        write_of(rxdctl(0), |v| v & DCTL_ENABLE != 0),
    );
    let rx_enabled = find(
        &t,
        rx_enable,
        "RXDCTL(0).ENABLE polled",
        read_of(rxdctl(0), |v| v & DCTL_ENABLE != 0),
    );
    let rdt_full = find(&t, rx_enabled, "RDT(0) = 255", write_of(rdt(0), |v| v == 255));
    assert!(rx_on < rdt_full);
    // Nothing the model does not know was touched.
    let faults: Vec<String> = World::global()
        .faults()
        .into_iter()
        .filter(|f| f.contains(port))
        .collect();
    assert!(faults.is_empty(), "{faults:?}");
    drop(dev);
}

#[test]
fn link_and_mac_come_from_the_device() {
    let dev = oxnet_sim::open("init-mac", &Config::default()).unwrap();
    assert_eq!(dev.mac(), World::global().mac("init-mac"), "MAC read from RAL0/RAH0");
    let link = dev.link();
    assert!(link.up, "a port on its loopback plug has link");
    assert_eq!(link.speed_mbps, 10_000);
}
