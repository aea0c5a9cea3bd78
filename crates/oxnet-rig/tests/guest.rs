//! Boots QEMU guests (TCG). Needs QEMU, busybox-static and the guest kernel:
//! `sudo bash scripts/rig/install-deps.sh`. Without them these tests fail
//! (they do not skip), naming that script.

use oxnet_rig::{check_installed, static_binary, Vm, IGB, VFIO_MODULES, VFIO_OPTIONAL_MODULES, VIRTIO_LEGACY};
use std::time::Instant;

fn installed() {
    if let Err(e) = check_installed() {
        panic!("{e}");
    }
}

/// Four legacy VirtIO NICs (hub 0: NICs 0 and 1, hub 1: NICs 2 and 3), the
/// static `oxnet` binary, `oxnet devices` inside the guest.
#[test]
fn oxnet_devices_lists_four_legacy_virtio_nics() {
    installed();
    let build_started = Instant::now();
    let oxnet = static_binary("oxnet", "oxnet").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("static oxnet build: {:.1} s", build_started.elapsed().as_secs_f64());

    let vm = Vm::new()
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 1)
        .nic(VIRTIO_LEGACY, 1)
        .file(&oxnet, "/bin/oxnet");
    let script = r#"
set -e
echo "kernel $(uname -r)"
for d in /sys/bus/pci/devices/*; do
    echo "pci $(basename $d) $(cat $d/vendor):$(cat $d/device) class $(cat $d/class)"
done
oxnet devices
"#;
    let out = vm.run(script).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest boot + script: {:.1} s", out.duration.as_secs_f64());
    assert!(out.success(), "{}", out.report());

    for i in 0..4 {
        let address = Vm::nic_address(i);
        let sysfs = format!("pci {address} 0x1af4:0x1000 class 0x020000");
        assert!(out.stdout.contains(&sysfs), "no `{sysfs}` line\n{}", out.report());
        // address, vendor, device, driver: no virtio module is loaded, so
        // no kernel driver is bound.
        let row = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&address) && !l.starts_with("pci"))
            .unwrap_or_else(|| panic!("`oxnet devices` does not list {address}\n{}", out.report()));
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            &columns[1..4],
            &["1af4", "1000", "(none)"],
            "row: {row}\n{}",
            out.report()
        );
    }
    let virtio_rows = out
        .stdout
        .lines()
        .filter(|l| l.contains(" 1af4 ") && l.contains(" 1000 "))
        .count();
    assert_eq!(virtio_rows, 4, "{}", out.report());
    assert!(out.duration.as_secs() < 60, "boot + script took {:?}", out.duration);
}

/// The hubs: a frame sent on NIC 0 arrives at NIC 1 (same hub) and not at
/// NIC 2 (the other hub). Uses the guest kernel's virtio_net driver (loaded
/// as modules with their dependencies) and busybox arping.
#[test]
fn nics_on_one_hub_see_each_others_frames() {
    installed();
    let vm = Vm::new()
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 0)
        .nic(VIRTIO_LEGACY, 1)
        .nic(VIRTIO_LEGACY, 1)
        .modules(&["virtio_pci", "virtio_net"]);
    let script = format!(
        r#"
set -e
# the interface of a PCI address
netdev() {{ ls /sys/bus/pci/devices/$1/virtio*/net; }}
a=$(netdev {n0}); b=$(netdev {n1}); c=$(netdev {n2})
echo "interfaces: $a $b $c"
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
for i in $a $b $c; do ip link set $i up; done
ip addr add 10.11.0.1/24 dev $a
arping -c 3 -w 3 -I $a 10.11.0.2 || true
rx() {{ cat /sys/class/net/$1/statistics/rx_packets; }}
echo "rx: same hub $(rx $b), other hub $(rx $c)"
[ "$(rx $b)" -ge 3 ] && [ "$(rx $c)" -eq 0 ]
"#,
        n0 = Vm::nic_address(0),
        n1 = Vm::nic_address(1),
        n2 = Vm::nic_address(2)
    );
    let out = vm.run(&script).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest boot + script: {:.1} s", out.duration.as_secs_f64());
    assert!(out.success(), "{}", out.report());
}

/// A script's exit code comes back as it is.
#[test]
fn exit_code_and_output_come_back() {
    installed();
    let out = Vm::new()
        .run("echo hello from the guest; exit 7")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_code, 7, "{}", out.report());
    assert_eq!(out.stdout, "hello from the guest\n", "{}", out.report());
    assert!(out.console.contains("Linux version"), "{}", out.report());
}

/// The set-up the vfio driver will need: q35 with an emulated Intel IOMMU,
/// the vfio modules, QEMU's igb (82576) bound to vfio-pci by sysfs, each
/// NIC in its own IOMMU group.
#[test]
fn igb_binds_to_vfio_pci_behind_the_iommu() {
    installed();
    let oxnet = static_binary("oxnet", "oxnet").unwrap_or_else(|e| panic!("{e}"));
    let vm = Vm::new()
        .machine_q35_iommu(true)
        .modules(VFIO_MODULES)
        .optional_modules(VFIO_OPTIONAL_MODULES)
        .nic(IGB, 0)
        .nic(VIRTIO_LEGACY, 0)
        .file(&oxnet, "/bin/oxnet");
    let script = format!(
        r#"
set -e
igb={igb}
echo vfio-pci > /sys/bus/pci/devices/$igb/driver_override
echo $igb > /sys/bus/pci/drivers_probe
group=$(basename $(readlink /sys/bus/pci/devices/$igb/iommu_group))
echo "igb group $group, driver $(basename $(readlink /sys/bus/pci/devices/$igb/driver))"
test -c /dev/vfio/$group
oxnet devices
"#,
        igb = Vm::nic_address(0)
    );
    let out = vm.run(&script).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("guest boot + script (q35, IOMMU): {:.1} s", out.duration.as_secs_f64());
    assert!(out.success(), "{}", out.report());
    assert!(out.console.contains("DMAR: IOMMU enabled"), "{}", out.report());
    let row = |address: String| {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&address))
            .unwrap_or_else(|| panic!("{address} not listed\n{}", out.report()));
        line.split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    let igb = row(Vm::nic_address(0));
    assert_eq!(&igb[1..4], &["8086", "10c9", "vfio-pci"], "{}", out.report());
    let virtio = row(Vm::nic_address(1));
    assert_eq!(&virtio[1..4], &["1af4", "1000", "(none)"], "{}", out.report());
    assert_ne!(igb[5], "-", "igb has no IOMMU group\n{}", out.report());
    assert_ne!(
        igb[5],
        virtio[5],
        "igb and virtio share an IOMMU group\n{}",
        out.report()
    );
}
