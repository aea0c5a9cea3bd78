//! The VirtIO driver over legacy PCI, inside a QEMU guest (the rig of
//! `crates/oxnet-rig`): QEMU's `virtio-net-pci,disable-modern=on` is a
//! device model nobody here wrote.
//!
//! The ixy-ci topology: pktgen on NIC 0 → (hub 0) → NIC 1 → fwd → NIC 2 →
//! (hub 1) → NIC 3 → pcap, every sequence number checked once, in order.

mod common;
use common::{field, line, static_oxnet as oxnet};
use oxnet_rig::{Vm, VIRTIO_LEGACY};
use std::time::Duration;

fn topology_script(count: u64, extra: &str) -> String {
    format!("set -e\n{}", common::topology_script(count, extra, ""))
}

fn four_nics() -> Vm {
    Vm::new()
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 1)
        .nic(VIRTIO_LEGACY, 1)
        .file(oxnet(), "/bin/oxnet")
        .hugepages(96)
        .memory_mb(768)
        .timeout(Duration::from_secs(240))
}

fn check_topology(out: &oxnet_rig::VmOutput, count: u64) {
    assert!(out.success(), "{}", out.report());
    let gen = line(&out.stdout, "GEN ");
    let pcap = line(&out.stdout, "PCAP ");
    let fwd = line(&out.stdout, "FWD ");
    assert_eq!(field(gen, "sent"), count, "{}", out.report());
    assert_eq!(field(pcap, "captured"), count, "{}", out.report());
    assert_eq!(field(pcap, "foreign"), 0, "{}", out.report());
    assert_eq!(field(pcap, "lost"), 0, "{}", out.report());
    assert_eq!(field(pcap, "duplicated"), 0, "{}", out.report());
    assert_eq!(field(pcap, "reordered"), 0, "{}", out.report());
    assert_eq!(field(fwd, "forwarded"), count, "{}", out.report());
    // Our driver's own counters agree: each device's tx/rx packets.
    assert_eq!(field(gen, "tx_packets"), count, "{}", out.report());
    assert!(out.stdout.contains("virtio driver"), "{}", out.report());
}

#[test]
fn legacy_virtio_pktgen_fwd_pcap_every_packet_once_in_order() {
    let count = 3000;
    let out = four_nics().run(&topology_script(count, "")).expect("guest ran");
    check_topology(&out, count);
}

#[test]
fn legacy_virtio_through_sysfs_pread_pwrite_instead_of_port_io() {
    // Port I/O is the default; --no-port-io uses the sysfs resource file.
    let count = 1000;
    let out = four_nics()
        .run(&topology_script(count, "--no-port-io"))
        .expect("guest ran");
    check_topology(&out, count);
}

#[test]
fn devices_that_are_not_legacy_virtio_net_are_refused() {
    let script = r#"
rng=$(grep -l 0x1005 /sys/bus/pci/devices/*/device | head -n 1 | xargs dirname | xargs basename)
modern=$(grep -l 0x1041 /sys/bus/pci/devices/*/device | head -n 1 | xargs dirname | xargs basename)
echo "RNG $rng MODERN $modern"
oxnet pktgen $rng --count 1 2>&1; echo "EXIT $?"
oxnet pktgen $modern --count 1 2>&1; echo "EXIT $?"
"#;
    let out = Vm::new()
        .nic("virtio-net-pci,disable-legacy=on", 0)
        .device("virtio-rng-pci,disable-modern=on")
        .file(oxnet(), "/bin/oxnet")
        .hugepages(16)
        .run(script)
        .expect("guest ran");
    assert!(out.success(), "{}", out.report());
    assert!(
        out.stdout.contains("is a virtio device but not a network card"),
        "{}",
        out.report()
    );
    assert!(out.stdout.contains("modern-only virtio-net device"), "{}", out.report());
    assert!(out.stdout.contains("disable-modern=on"), "{}", out.report());
    assert_eq!(out.stdout.matches("EXIT 1").count(), 2, "{}", out.report());
}
