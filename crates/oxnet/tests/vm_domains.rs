//! DMA domains (docs/dma-domains.md) between device kinds that meet in a
//! QEMU guest: an igb bound to vfio-pci (DMA through the emulated IOMMU,
//! IOVA = virtual address: the virtual domain) and igbs used through sysfs
//! (huge pages, IOVA = physical address: the physical domain). The guest
//! boots with `iommu=pt`, so devices without a driver keep identity-mapped
//! DMA while the vfio-bound one gets its own IOMMU domain.
//!
//! pktgen -> fwd -> pcap across the two kinds, in both directions, and from
//! legacy VirtIO (physical domain) to an igb behind vfio: every frame
//! arrives once and in order, and the transmitting side of fwd copies
//! exactly the frames it got from the other domain.

mod common;
use common::{field, line, static_oxnet as oxnet, topology_script_on};
use oxnet_rig::{Vm, IGB, VFIO_MODULES, VFIO_OPTIONAL_MODULES, VIRTIO_LEGACY};
use std::time::Duration;

/// The object of device `name` in a command's JSON summary.
fn device<'a>(json: &'a str, name: &str) -> &'a str {
    let at = json
        .find(&format!("\"name\":\"{name}\""))
        .unwrap_or_else(|| panic!("device {name} missing in {json}"));
    let end = json[at..].find('}').map_or(json.len(), |e| at + e);
    &json[at..end]
}

#[test]
fn vfio_and_sysfs_igb_forward_both_ways_with_copies() {
    let nic = Vm::nic_address;
    const COUNT: u64 = 500;
    // NIC 1 through vfio; NICs 0, 2, 3 through sysfs. Hubs: 0-1 and 2-3.
    let script = format!(
        "set -e\noxnet bind vfio {vfio}\necho RUN-A\n{a}echo RUN-B\n{b}",
        vfio = nic(1),
        // pktgen NIC 0 -> NIC 1 (vfio) -> fwd -> NIC 2 (sysfs) -> pcap NIC 3
        a = topology_script_on([0, 1, 2, 3], COUNT, "", ""),
        // pktgen NIC 3 -> NIC 2 (sysfs) -> fwd -> NIC 1 (vfio) -> pcap NIC 0
        b = topology_script_on([3, 2, 1, 0], COUNT, "", ""),
    );
    let vm = Vm::new()
        .machine_q35_iommu(true)
        .kernel_args("iommu=pt")
        .modules(VFIO_MODULES)
        .optional_modules(VFIO_OPTIONAL_MODULES)
        .file(oxnet(), "/bin/oxnet")
        .hugepages(128)
        .memory_mb(1024)
        .timeout(Duration::from_secs(300))
        .nic(IGB, 0)
        .nic(IGB, 0)
        .nic(IGB, 1)
        .nic(IGB, 1);
    let out = vm.run(&script).expect("guest ran");
    eprintln!("guest: {:.1} s", out.duration.as_secs_f64());
    assert!(out.success(), "{}", out.report());
    let (a, b) = out
        .stdout
        .split_once("RUN-B")
        .unwrap_or_else(|| panic!("{}", out.report()));
    for (run, text, from, to) in [("A", a, nic(1), nic(2)), ("B", b, nic(2), nic(1))] {
        let pcap = line(text, "PCAP ");
        let fwd = line(text, "FWD ");
        assert_eq!(field(pcap, "captured"), COUNT, "run {run}: {}", out.report());
        assert_eq!(field(pcap, "lost"), 0, "run {run}");
        assert_eq!(field(pcap, "duplicated"), 0, "run {run}");
        assert_eq!(field(pcap, "reordered"), 0, "run {run}");
        assert_eq!(field(fwd, "forwarded"), COUNT, "run {run}: {}", out.report());
        // The receiving side's packets are of the other domain: the
        // transmitting side copies each one, and only those.
        assert_eq!(field(device(fwd, &to), "tx_copied"), COUNT, "run {run}: {fwd}");
        assert_eq!(field(device(fwd, &to), "tx_copy_pool_empty"), 0, "run {run}: {fwd}");
        assert_eq!(field(device(fwd, &from), "tx_copied"), 0, "run {run}: {fwd}");
    }
}

/// Legacy VirtIO (bound to vfio-pci, but a legacy device bypasses the
/// IOMMU: huge pages, physical domain) forwarded to an igb behind vfio
/// (virtual domain): the igb copies every frame. The other direction needs
/// the virtio driver's transmit path to copy too (docs/dma-domains.md).
#[test]
fn virtio_frames_are_copied_by_an_igb_behind_vfio() {
    let nic = Vm::nic_address;
    // QEMU's legacy virtio-net has 256 receive buffers. fwd makes its copy
    // pool on the first frame of another domain (a vfio DMA mapping, slow
    // under TCG); with 500 frames the ring overflowed once during that
    // pause and QEMU delivered 13 of the frames it had to hold back out of
    // order. 200 frames always have a buffer.
    const COUNT: u64 = 200;
    // NICs 0, 1: legacy VirtIO on hub 0; NICs 2, 3: igb on hub 1.
    // pktgen NIC 0 -> NIC 1 (virtio) -> fwd -> NIC 2 (igb, vfio) -> pcap NIC 3 (igb, sysfs)
    let script = format!(
        "set -e\noxnet bind vfio {}\noxnet bind vfio {}\noxnet bind vfio {}\n{}",
        nic(0),
        nic(1),
        nic(2),
        topology_script_on([0, 1, 2, 3], COUNT, "", ""),
    );
    let vm = Vm::new()
        .machine_q35_iommu(true)
        .kernel_args("iommu=pt")
        .modules(VFIO_MODULES)
        .optional_modules(VFIO_OPTIONAL_MODULES)
        .file(oxnet(), "/bin/oxnet")
        .hugepages(128)
        .memory_mb(1024)
        .timeout(Duration::from_secs(300))
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 0)
        .nic(IGB, 1)
        .nic(IGB, 1);
    let out = vm.run(&script).expect("guest ran");
    eprintln!("guest: {:.1} s", out.duration.as_secs_f64());
    assert!(out.success(), "{}", out.report());
    let pcap = line(&out.stdout, "PCAP ");
    let fwd = line(&out.stdout, "FWD ");
    assert_eq!(field(pcap, "captured"), COUNT, "{}", out.report());
    assert_eq!(field(pcap, "lost"), 0);
    assert_eq!(field(pcap, "duplicated"), 0);
    assert_eq!(field(pcap, "reordered"), 0, "{}", out.report());
    assert_eq!(field(fwd, "forwarded"), COUNT, "{}", out.report());
    assert_eq!(field(device(fwd, &nic(2)), "tx_copied"), COUNT, "{fwd}");
    assert_eq!(field(device(fwd, &nic(1)), "tx_copied"), 0, "{fwd}");
}
