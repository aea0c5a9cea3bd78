//! Binding a device to vfio-pci and back, as DPDK's dpdk-devbind does:
//! write the driver's name to the device's `driver_override`, unbind it
//! from its current driver, and ask the PCI core to probe it again
//! (`/sys/bus/pci/drivers_probe`), which now only matches the override.
//! `bind_kernel` clears the override and probes again, so the kernel's own
//! driver (if it has one) takes the device back.
//!
//! Only the device named is touched — never the other members of its
//! IOMMU group; we say which of them stand in the way.

use super::{no_iommu_group, VFIO_PCI_DRIVER};
use crate::error::{Error, Result};
use crate::pci::{self, PciAddress};
use std::path::Path;

const DRIVERS_PROBE: &str = "/sys/bus/pci/drivers_probe";
const VFIO_PCI_SYSFS: &str = "/sys/bus/pci/drivers/vfio-pci";

/// The user (and group) who may open a device's /dev/vfio node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl Owner {
    /// `UID`, `UID:GID` or a user name from /etc/passwd (read directly: a
    /// static binary has no NSS).
    pub fn parse(text: &str) -> Result<Owner> {
        let number = |s: &str| s.parse::<u32>().ok();
        if let Some((u, g)) = text.split_once(':') {
            if let (Some(uid), Some(gid)) = (number(u), number(g)) {
                return Ok(Owner { uid, gid });
            }
        }
        if let Some(uid) = number(text) {
            return Ok(Owner { uid, gid: uid });
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        for line in passwd.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() >= 4 && fields[0] == text {
                if let (Some(uid), Some(gid)) = (number(fields[2]), number(fields[3])) {
                    return Ok(Owner { uid, gid });
                }
            }
        }
        Err(Error::Config(format!(
            "unknown user '{text}': give a user name from /etc/passwd, a uid or uid:gid"
        )))
    }
}

fn write_sysfs(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value)
        .map_err(|e| pci::permission_or(e, format!("cannot write {value:?} to {}", path.display())))
}

fn dev_node(group: u32) -> String {
    format!("/dev/vfio/{group}")
}

/// Binds `address` to vfio-pci; with `owner`, gives its /dev/vfio node to
/// that user so that oxnet can run as them. Returns what was done, in words.
pub fn bind_vfio(address: &PciAddress, owner: Option<Owner>) -> Result<String> {
    let info = pci::info(address)?;
    let Some(group) = info.iommu_group else {
        return Err(no_iommu_group(address));
    };
    if !Path::new(VFIO_PCI_SYSFS).exists() {
        return Err(Error::Pci(format!(
            "the vfio-pci driver is not loaded ({VFIO_PCI_SYSFS} is missing): run `modprobe vfio-pci`"
        )));
    }
    let dir = pci::sysfs_file(address, "");
    let before = info.driver.clone();
    if before.as_deref() != Some(VFIO_PCI_DRIVER) {
        write_sysfs(&dir.join("driver_override"), VFIO_PCI_DRIVER)?;
        if let Some(driver) = &before {
            write_sysfs(&dir.join("driver/unbind"), &address.to_string())
                .map_err(|e| Error::Pci(format!("{e} (unbinding {address} from {driver})")))?;
        }
        // drivers_probe fails with an error when no driver takes the device;
        // the check below says why in words.
        let _ = std::fs::write(DRIVERS_PROBE, address.to_string());
    }
    let after = pci::info(address)?;
    if after.driver.as_deref() != Some(VFIO_PCI_DRIVER) {
        return Err(Error::Pci(format!(
            "{address} did not bind to vfio-pci (now: {}); see `dmesg` for vfio-pci's reason",
            after.driver.as_deref().unwrap_or("no driver")
        )));
    }
    let node = dev_node(group);
    let mut report = format!(
        "{address}: bound to vfio-pci (was: {}), IOMMU group {group}, {node}",
        before.as_deref().unwrap_or("no driver")
    );
    if let Some(owner) = owner {
        let path = std::ffi::CString::new(node.clone()).expect("no NUL in a path");
        // SAFETY: chown of a path given as a C string.
        if unsafe { libc::chown(path.as_ptr(), owner.uid, owner.gid) } != 0 {
            return Err(crate::error::os_error(&format!("chown {node}")));
        }
        report.push_str(&format!(
            " owned by uid {} gid {} (that user also needs RLIMIT_MEMLOCK for the pinned DMA memory: \
             about 32 MiB for a forwarder on two ports)",
            owner.uid, owner.gid
        ));
    }
    let others = group_members(group)
        .into_iter()
        .filter(|(a, driver)| a != &address.to_string() && driver.as_deref().is_some_and(|d| d != VFIO_PCI_DRIVER))
        .map(|(a, driver)| format!("{a} ({})", driver.unwrap_or_default()))
        .collect::<Vec<_>>();
    if !others.is_empty() {
        report.push_str(&format!(
            "\nwarning: IOMMU group {group} also holds {}, bound to other drivers: the group is not usable \
             until they are bound to vfio-pci too (`oxnet bind vfio ADDRESS` for each; oxnet does not touch \
             devices you did not name)",
            others.join(", ")
        ));
    }
    Ok(report)
}

/// Gives `address` back to the kernel: clears driver_override, unbinds it
/// from vfio-pci and probes it again.
pub fn bind_kernel(address: &PciAddress) -> Result<String> {
    let info = pci::info(address)?;
    let dir = pci::sysfs_file(address, "");
    // A lone newline clears the override (Documentation/ABI/testing/sysfs-bus-pci).
    write_sysfs(&dir.join("driver_override"), "\n")?;
    if let Some(driver) = &info.driver {
        write_sysfs(&dir.join("driver/unbind"), &address.to_string())
            .map_err(|e| Error::Pci(format!("{e} (unbinding {address} from {driver})")))?;
    }
    let _ = std::fs::write(DRIVERS_PROBE, address.to_string());
    let after = pci::info(address)?;
    Ok(format!(
        "{address}: unbound from {}, now bound to {}",
        info.driver.as_deref().unwrap_or("no driver"),
        after
            .driver
            .as_deref()
            .unwrap_or("no driver (the kernel has none loaded for it)")
    ))
}

/// Devices of IOMMU group `group` and their drivers.
pub fn group_members(group: u32) -> Vec<(String, Option<String>)> {
    let dir = format!("/sys/kernel/iommu_groups/{group}/devices");
    let mut members: Vec<(String, Option<String>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let driver = std::fs::read_link(e.path().join("driver"))
                        .ok()
                        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
                    (e.file_name().to_string_lossy().into_owned(), driver)
                })
                .collect()
        })
        .unwrap_or_default();
    members.sort();
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_parse_from_numbers() {
        assert_eq!(Owner::parse("1000").unwrap(), Owner { uid: 1000, gid: 1000 });
        assert_eq!(Owner::parse("1000:100").unwrap(), Owner { uid: 1000, gid: 100 });
        assert_eq!(Owner::parse("root").unwrap(), Owner { uid: 0, gid: 0 });
        assert!(Owner::parse("no-such-user-here").is_err());
    }
}
