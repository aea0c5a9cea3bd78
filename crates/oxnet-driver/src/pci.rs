//! PCI devices through sysfs: find, identify, unbind from the kernel driver,
//! enable bus mastering, map BAR0 (ixy's approach, no vfio).
//!
//! Safety note for people running this: opening a PCI device *unbinds its
//! kernel driver*. We only do that after checking the vendor/device id
//! belongs to a driver of ours, so pointing oxnet at your disk controller
//! gets an error, not an unbound disk.

use crate::device::{Config, Device};
use crate::error::{os_error, Error, Result};
use crate::regs::Mmio;
use std::fmt;
use std::path::PathBuf;
use std::ptr::NonNull;

const SYSFS_PCI: &str = "/sys/bus/pci/devices";

/// A PCI address `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) 0..=31.
    pub device: u8,
    /// Function 0..=7.
    pub function: u8,
}

impl PciAddress {
    /// Parses `0000:03:00.0` or `03:00.0` (domain 0).
    pub fn parse(s: &str) -> Option<PciAddress> {
        let parts: Vec<&str> = s.split(':').collect();
        let (domain, bus, rest) = match parts.as_slice() {
            // Hex digits only: from_str_radix alone also takes "+123"
            // (found by the spec_pci fuzz target).
            [d, b, r] if d.len() == 4 && d.chars().all(|c| c.is_ascii_hexdigit()) => {
                (u16::from_str_radix(d, 16).ok()?, *b, *r)
            }
            [b, r] => (0, *b, *r),
            _ => return None,
        };
        let (dev, func) = rest.split_once('.')?;
        let hex = |t: &str, len: usize| {
            (t.len() == len && t.chars().all(|c| c.is_ascii_hexdigit())).then(|| u8::from_str_radix(t, 16).ok())?
        };
        let bus = hex(bus, 2)?;
        let device = hex(dev, 2)?;
        let function = (func.len() == 1).then(|| func.parse::<u8>().ok()).flatten()?;
        if device > 31 || function > 7 {
            return None;
        }
        Some(PciAddress {
            domain,
            bus,
            device,
            function,
        })
    }

    fn sysfs(&self) -> PathBuf {
        PathBuf::from(SYSFS_PCI).join(self.to_string())
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// What sysfs tells about a PCI device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDeviceInfo {
    /// Its address.
    pub address: PciAddress,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// PCI class code (0x02xxxx: network).
    pub class: u32,
    /// Kernel driver bound to it, if any.
    pub driver: Option<String>,
    /// NUMA node (-1: none).
    pub numa_node: i32,
    /// IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
}

fn read_hex(path: PathBuf) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

/// Reads vendor, device, class, driver, NUMA node and IOMMU group.
pub fn info(address: &PciAddress) -> Result<PciDeviceInfo> {
    let dir = address.sysfs();
    if !dir.exists() {
        return Err(Error::Pci(format!(
            "no PCI device at {address}: {} does not exist (`oxnet devices` lists the network devices)",
            dir.display()
        )));
    }
    let vendor = read_hex(dir.join("vendor")).ok_or_else(|| Error::Pci(format!("{address}: cannot read vendor id")))?;
    let device = read_hex(dir.join("device")).ok_or_else(|| Error::Pci(format!("{address}: cannot read device id")))?;
    let class = read_hex(dir.join("class")).unwrap_or(0);
    let link_name = |p: PathBuf| {
        std::fs::read_link(p)
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let numa_node = std::fs::read_to_string(dir.join("numa_node"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(-1);
    Ok(PciDeviceInfo {
        address: *address,
        vendor: vendor as u16,
        device: device as u16,
        class,
        driver: link_name(dir.join("driver")),
        numa_node,
        iommu_group: link_name(dir.join("iommu_group")).and_then(|g| g.parse().ok()),
    })
}

/// All PCI devices of class "network controller" (0x02).
pub fn network_devices() -> Result<Vec<PciDeviceInfo>> {
    let entries = match std::fs::read_dir(SYSFS_PCI) {
        Ok(e) => e,
        Err(e) => return Err(Error::Pci(format!("cannot list {SYSFS_PCI}: {e}"))),
    };
    let mut devices = Vec::new();
    for entry in entries.flatten() {
        if let Some(address) = PciAddress::parse(&entry.file_name().to_string_lossy()) {
            if let Ok(info) = info(&address) {
                if info.class >> 16 == 0x02 {
                    devices.push(info);
                }
            }
        }
    }
    devices.sort_by_key(|d| d.address);
    Ok(devices)
}

/// Opens a PCI device with the driver that its ids call for.
pub fn open(address: &PciAddress, config: &Config) -> Result<Box<dyn Device>> {
    let info = info(address)?;
    if let Some(refusal) = refusal(info.vendor, info.device) {
        return Err(Error::Pci(format!("{address}: {refusal}")));
    }
    if info.driver.as_deref() == Some(crate::vfio::VFIO_PCI_DRIVER) {
        // Through vfio: IOMMU, DMA memory at IOVA = virtual address, no root.
        return crate::vfio::open_pci(&info, config);
    }
    let is_intel = crate::ixgbe::supports(info.vendor, info.device) || crate::igb::supports(info.vendor, info.device);
    if config.interrupts && is_intel {
        return Err(Error::Config(format!(
            "{address}: receive interrupts need the device bound to vfio-pci (`oxnet bind vfio {address}`)"
        )));
    }
    if crate::ixgbe::supports(info.vendor, info.device) {
        let registers = map_bar0(&info)?;
        let spec = address.to_string();
        let device = crate::ixgbe::IxgbeDevice::init(registers, &spec, config, crate::MemoryKind::HugePages)?;
        return Ok(Box::new(device));
    }
    if crate::igb::supports(info.vendor, info.device) {
        let registers = map_bar0(&info)?;
        let spec = address.to_string();
        let queues = crate::igb::max_queues(info.device);
        let device = crate::igb::IgbDevice::init(registers, &spec, config, crate::MemoryKind::HugePages, queues)?;
        return Ok(Box::new(device));
    }
    if info.vendor == crate::virtio::legacy_pci::VIRTIO_VENDOR_ID {
        let transport = crate::virtio::legacy_pci::LegacyPci::open(&info, config)?;
        let device = crate::virtio::VirtioNet::init(transport, &address.to_string(), config, Default::default())?;
        return Ok(Box::new(device));
    }
    Err(Error::Pci(format!(
        "{address} ({:04x}:{:04x}, class {:06x}) is not a device oxnet drives; supported: {SUPPORTED_DEVICES}",
        info.vendor, info.device, info.class
    )))
}

/// What oxnet drives, for error messages (every id: docs/devices.md).
pub const SUPPORTED_DEVICES: &str = "Intel 82599/X520 (ixgbe), Intel 82576 copper ports (igb), \
     legacy VirtIO network devices 1af4:1000 (virtio)";

/// Intel devices that a driver here would almost fit but that are refused:
/// (device id, name, what differs and is not implemented).
pub const REFUSED_IDS: &[(u16, &str, &str)] = &[
    (0x1528, "X540-T", X540_X550),
    (0x1560, "X540-T1", X540_X550),
    (0x1563, "X550-T", X540_X550),
    (0x15D1, "X550-T1", X540_X550),
    (0x1521, "I350 copper", I350),
    (0x1522, "I350 fibre", I350),
    (0x1523, "I350 backplane", I350),
    (0x1524, "I350 SGMII", I350),
];

const X540_X550: &str = "its link set-up (copper PHY, X540/X550 datasheets) differs from the 82599's and is not \
     implemented or tested";
const I350: &str = "its interrupt routing differs from the 82576's (IVAR: one register per two queues, 16-bit \
     halves, per the I350 datasheet's IVAR description and Linux's igb) and is not implemented";

/// The reason a device with these ids is refused, as a message naming
/// what is supported; `None` for devices not in [`REFUSED_IDS`].
pub fn refusal(vendor: u16, device: u16) -> Option<String> {
    if vendor != crate::ixgbe::INTEL_VENDOR_ID {
        return None;
    }
    REFUSED_IDS
        .iter()
        .find(|(id, _, _)| *id == device)
        .map(|(_, name, why)| {
            format!("Intel {name} ({vendor:04x}:{device:04x}) is not supported: {why}; supported: {SUPPORTED_DEVICES}")
        })
}

/// Unbinds the kernel driver and enables bus mastering (ixy: pci.c).
/// Needs root. Only called after the ids were checked to be ours.
pub(crate) fn take_over(info: &PciDeviceInfo) -> Result<()> {
    if let Some(driver) = &info.driver {
        let unbind = info.address.sysfs().join("driver/unbind");
        std::fs::write(&unbind, info.address.to_string()).map_err(|e| {
            let what = format!(
                "cannot unbind {} from its driver {driver} via {}",
                info.address,
                unbind.display()
            );
            permission_or(e, what)
        })?;
    }
    enable_bus_master(info)
}

/// Path of a sysfs file of the device (resource0, config ...).
pub(crate) fn sysfs_file(address: &PciAddress, name: &str) -> PathBuf {
    address.sysfs().join(name)
}

/// Unbinds the kernel driver, enables bus mastering and maps BAR0.
pub(crate) fn map_bar0(info: &PciDeviceInfo) -> Result<Mmio> {
    take_over(info)?;
    let dir = info.address.sysfs();
    let path = dir.join("resource0");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| permission_or(e, format!("cannot open {}", path.display())))?;
    let len = file
        .metadata()
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?
        .len() as usize;
    if len == 0 {
        return Err(Error::Pci(format!("{}: BAR0 is empty", info.address)));
    }
    use std::os::unix::io::AsRawFd;
    // SAFETY: mapping a sysfs resource file of the given length, checked below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(os_error(&format!("mmap of {}", path.display())));
    }
    // SAFETY: a live mapping of `len` bytes, owned by the Mmio from now on.
    let mmio = unsafe { Mmio::new(NonNull::new_unchecked(addr as *mut u8), len) };
    // Config space stays open for teardown (bus mastering off, teardown.rs).
    let config = dir.join("config");
    match std::fs::OpenOptions::new().read(true).write(true).open(&config) {
        Ok(file) => Ok(mmio.with_pci_config(file)),
        Err(e) => Err(permission_or(e, format!("cannot open {}", config.display()))),
    }
}

/// Sets the Bus Master Enable bit (bit 2 of the command register at config
/// offset 4; PCI Local Bus spec 3.0 §6.2.2) so the device may do DMA.
fn enable_bus_master(info: &PciDeviceInfo) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let path = info.address.sysfs().join("config");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| permission_or(e, format!("cannot open {}", path.display())))?;
    let mut command = [0u8; 2];
    file.read_exact_at(&mut command, 4)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let value = u16::from_le_bytes(command) | (1 << 2);
    file.write_all_at(&value.to_le_bytes(), 4)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))
}

pub(crate) fn permission_or(e: std::io::Error, what: String) -> Error {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        Error::Permission(format!("{what}: permission denied (run as root)"))
    } else {
        Error::Pci(format!("{what}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 8 item 6: X540, X550 and I350 are refused with a message that
    /// names the device, the reason and what is supported; the 82599 and
    /// 82576 ids are not.
    #[test]
    fn x540_x550_and_i350_are_refused_with_what_is_supported() {
        for (device, name, reason) in [
            (0x1528u16, "X540-T", "link set-up"),
            (0x1560, "X540-T1", "link set-up"),
            (0x1563, "X550-T", "link set-up"),
            (0x15D1, "X550-T1", "link set-up"),
            (0x1521, "I350 copper", "IVAR"),
        ] {
            let message = refusal(0x8086, device).expect("refused");
            assert!(
                message.contains(&format!("Intel {name} (8086:{device:04x}) is not supported")),
                "{message}"
            );
            assert!(message.contains(reason), "{message}");
            assert!(
                message.contains("supported: Intel 82599/X520 (ixgbe), Intel 82576 copper ports (igb)"),
                "{message}"
            );
            assert!(!crate::ixgbe::supports(0x8086, device) && !crate::igb::supports(0x8086, device));
        }
        for device in [0x10FBu16, 0x10C9] {
            assert_eq!(refusal(0x8086, device), None);
        }
        assert!(crate::ixgbe::supports(0x8086, 0x10FB));
        assert!(crate::igb::supports(0x8086, 0x10C9));
        assert_eq!(refusal(0x1AF4, 0x1528), None, "another vendor's id");
    }

    /// Found by the spec_pci fuzz target (fuzz/regressions/spec_pci).
    #[test]
    fn a_signed_domain_is_not_a_pci_address() {
        assert_eq!(PciAddress::parse("+123:03:00.0"), None);
        assert_eq!(PciAddress::parse("-123:03:00.0"), None);
        assert!(PciAddress::parse("0123:03:00.0").is_some());
    }

    #[test]
    fn pci_address_round_trip() {
        let a = PciAddress::parse("0000:03:00.1").unwrap();
        assert_eq!(
            a,
            PciAddress {
                domain: 0,
                bus: 3,
                device: 0,
                function: 1
            }
        );
        assert_eq!(a.to_string(), "0000:03:00.1");
        assert_eq!(PciAddress::parse("10:1f.7").unwrap().to_string(), "0000:10:1f.7");
        for bad in [
            "0000:03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "3:00.0",
            "0000:03:00.0.1",
            "x",
        ] {
            assert!(PciAddress::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn missing_device_is_a_clear_error() {
        let err = info(&PciAddress::parse("0000:ff:1f.7").unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no PCI device at 0000:ff:1f.7"), "{err}");
    }

    #[test]
    fn listing_network_devices_does_not_fail() {
        // The list may be empty on a machine without NICs; it must not error.
        network_devices().unwrap();
    }
}
