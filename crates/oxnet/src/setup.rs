//! `oxnet setup hugepages N` and `oxnet devices`.

use oxnet_driver::pci;
use oxnet_driver::{Error, Result};

const NR_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
const MOUNT_POINT: &str = "/mnt/huge";

/// Reserves `n` 2 MiB huge pages and mounts hugetlbfs at /mnt/huge (for
/// tools that want a mount; oxnet itself allocates through memfd).
pub fn hugepages(n: u64) -> Result<String> {
    std::fs::write(NR_HUGEPAGES, n.to_string()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            Error::Permission(format!("cannot write {NR_HUGEPAGES}: permission denied (run as root)"))
        } else {
            Error::Io(format!("cannot write {NR_HUGEPAGES}: {e}"))
        }
    })?;
    let got: u64 = std::fs::read_to_string(NR_HUGEPAGES)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let mut report = format!("{got} huge pages of 2 MiB reserved");
    if got < n {
        report.push_str(&format!(" (asked for {n}: memory is fragmented or short)"));
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if !mounts.lines().any(|l| l.split_whitespace().nth(1) == Some(MOUNT_POINT)) {
        std::fs::create_dir_all(MOUNT_POINT).map_err(|e| Error::Io(format!("mkdir {MOUNT_POINT}: {e}")))?;
        let status = std::process::Command::new("mount")
            .args(["-t", "hugetlbfs", "-o", "pagesize=2M", "hugetlbfs", MOUNT_POINT])
            .status()
            .map_err(|e| Error::Io(format!("mount: {e}")))?;
        if !status.success() {
            return Err(Error::Io(format!("mounting hugetlbfs at {MOUNT_POINT} failed")));
        }
        report.push_str(&format!(", hugetlbfs mounted at {MOUNT_POINT}"));
    }
    Ok(report)
}

/// The last column of `oxnet devices`: the driver oxnet would use, `not
/// supported: ...` for a refused relative (pci::REFUSED_IDS), or `-`.
pub fn driver_column(vendor: u16, device: u16) -> String {
    if oxnet_driver::ixgbe::supports(vendor, device) {
        "ixgbe".to_string()
    } else if oxnet_driver::igb::supports(vendor, device) {
        "igb".to_string()
    } else if let Some((_, name, why)) = pci::REFUSED_IDS
        .iter()
        .find(|(id, _, _)| vendor == oxnet_driver::ixgbe::INTEL_VENDOR_ID && *id == device)
    {
        format!("not supported: {name}, {why}")
    } else {
        "-".to_string()
    }
}

/// The table `oxnet devices` prints.
pub fn devices_table() -> Result<String> {
    let devices = pci::network_devices()?;
    let mut out = format!(
        "{:<14} {:<6} {:<6} {:<12} {:<5} {:<6} {}\n",
        "address", "vendor", "device", "driver", "numa", "iommu", "oxnet driver"
    );
    for d in &devices {
        let ours = driver_column(d.vendor, d.device);
        out.push_str(&format!(
            "{:<14} {:04x}   {:04x}   {:<12} {:<5} {:<6} {}\n",
            d.address.to_string(),
            d.vendor,
            d.device,
            d.driver.as_deref().unwrap_or("(none)"),
            d.numa_node,
            d.iommu_group.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            ours
        ));
    }
    if devices.is_empty() {
        out.push_str("(no PCI network devices; `oxnet demo` runs on simulated 82599 ports)\n");
    }
    Ok(out)
}

/// The specs oxnet can open on a Linux interface of this kind (issue 9):
/// any interface takes AF_PACKET; AF_XDP wants a real or virtual NIC
/// (generic attach works on any, native on drivers with XDP support); a
/// TAP device also opens as `tap:`.
pub fn interface_specs(name: &str, kind: &str) -> String {
    let mut specs = Vec::new();
    if kind == "tun" {
        specs.push(format!("tap:{name}"));
    }
    specs.push(format!("af_packet:{name}"));
    if kind != "loopback" {
        specs.push(format!("af_xdp:{name}"));
    }
    specs.join(" ")
}

/// The second table of `oxnet devices`: the Linux interfaces of this
/// network namespace, and how oxnet attaches to each. An interface with a
/// kernel IP address is marked: Linux answers traffic meant for oxnet there
/// (docs/devices.md).
pub fn interfaces_table(interfaces: &[oxnet_driver::netif::Interface]) -> String {
    let mut out = format!(
        "{:<16} {:<12} {:<17} {:<6} {:<5} {:<32} {}\n",
        "interface", "kind", "mac", "mtu", "state", "oxnet specs", "kernel addresses"
    );
    for i in interfaces {
        let mac = i.mac.map_or_else(
            || "-".to_string(),
            |m| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
        );
        let addresses = if i.addresses.is_empty() {
            "-".to_string()
        } else {
            format!("{} (Linux answers here)", i.addresses.join(" "))
        };
        out.push_str(&format!(
            "{:<16} {:<12} {:<17} {:<6} {:<5} {:<32} {}\n",
            i.name,
            if i.kind.is_empty() { "-" } else { &i.kind },
            mac,
            i.mtu,
            if i.up { "up" } else { "down" },
            interface_specs(&i.name, &i.kind),
            addresses
        ));
    }
    if interfaces.is_empty() {
        out.push_str("(no interfaces in /sys/class/net)\n");
    }
    out.push_str(
        "memif:PATH[,role=client|server][,id=N] needs no interface: it talks to another process over a socket\n",
    );
    out
}

fn parse_address(address: &str) -> Result<pci::PciAddress> {
    pci::PciAddress::parse(address).ok_or_else(|| {
        Error::BadSpec(format!(
            "'{address}' is not a PCI address like 0000:03:00.0 (`oxnet devices` lists them)"
        ))
    })
}

/// `oxnet bind vfio ADDRESS [--owner USER]`: hands the device to vfio-pci
/// (root), optionally giving its /dev/vfio node to USER.
pub fn bind_vfio(address: &str, owner: Option<&str>) -> Result<String> {
    let owner = owner.map(oxnet_driver::vfio::bind::Owner::parse).transpose()?;
    oxnet_driver::vfio::bind::bind_vfio(&parse_address(address)?, owner)
}

/// `oxnet bind kernel ADDRESS`: gives the device back to the kernel.
pub fn bind_kernel(address: &str) -> Result<String> {
    oxnet_driver::vfio::bind::bind_kernel(&parse_address(address)?)
}

#[cfg(test)]
mod tests {
    use super::{driver_column, interface_specs, interfaces_table};
    use oxnet_driver::netif::Interface;

    #[test]
    fn interfaces_get_the_specs_their_kind_takes_and_addresses_are_marked() {
        assert_eq!(interface_specs("lo", "loopback"), "af_packet:lo");
        assert_eq!(interface_specs("t0", "tun"), "tap:t0 af_packet:t0 af_xdp:t0");
        assert_eq!(interface_specs("eth0", "virtio_net"), "af_packet:eth0 af_xdp:eth0");
        let table = interfaces_table(&[
            Interface {
                name: "veth0".into(),
                kind: "veth".into(),
                mac: Some([0x02, 0, 0, 0, 0, 0x0a]),
                mtu: 1500,
                up: true,
                addresses: vec!["10.0.0.1/24".into()],
            },
            Interface {
                name: "veth1".into(),
                kind: "veth".into(),
                mac: None,
                mtu: 9000,
                up: false,
                addresses: vec![],
            },
        ]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[1].starts_with("veth0 ") && lines[1].contains("02:00:00:00:00:0a"),
            "{table}"
        );
        assert!(lines[1].contains("10.0.0.1/24 (Linux answers here)"), "{table}");
        assert!(
            lines[2].contains(" down ") && lines[2].contains("9000") && lines[2].ends_with(" -"),
            "{table}"
        );
        assert!(lines[2].contains("af_packet:veth1 af_xdp:veth1"), "{table}");
        assert!(table.contains("memif:PATH"));
    }

    /// `oxnet devices` names refused relatives as such (issue 8 item 6).
    #[test]
    fn devices_column_for_accepted_refused_and_unknown_ids() {
        assert_eq!(driver_column(0x8086, 0x10FB), "ixgbe");
        assert_eq!(driver_column(0x8086, 0x10C9), "igb");
        assert!(driver_column(0x8086, 0x1528).starts_with("not supported: X540-T, "));
        assert!(driver_column(0x8086, 0x1563).starts_with("not supported: X550-T, "));
        assert!(driver_column(0x8086, 0x1521).starts_with("not supported: I350 copper, "));
        assert_eq!(driver_column(0x8086, 0x100E), "-");
        assert_eq!(driver_column(0x10EC, 0x1528), "-", "another vendor's id");
    }
}
