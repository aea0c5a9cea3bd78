//! vfio: PCI devices behind an IOMMU, from user space, without root after
//! set-up (ixy paper §3.3–3.5; Linux Documentation/driver-api/vfio.rst).
//!
//! What changes against the sysfs path of [`crate::pci`]:
//!
//! * the device is bound to the kernel's `vfio-pci` driver (see [`bind`]),
//!   which hands it to us through `/dev/vfio/<IOMMU group>`;
//! * the IOMMU translates every DMA address the device uses, so DMA memory
//!   is ordinary (plain) memory with **IOVA = virtual address**, mapped
//!   with `VFIO_IOMMU_MAP_DMA` allocation by allocation (the hook in
//!   [`crate::memory`]); no physical addresses, no huge pages needed, no
//!   `/proc/self/pagemap`, no root. A buggy driver cannot write outside its
//!   own memory;
//! * BARs are regions of the device fd (`VFIO_DEVICE_GET_REGION_INFO`):
//!   memory BARs are mmap'ed, I/O-port BARs (legacy VirtIO) read and written
//!   with `pread`/`pwrite` at the region's offset, and config space is
//!   region 7 (bus mastering is switched on there);
//! * interrupts: MSI-X (or MSI) vectors signal eventfds
//!   (`VFIO_DEVICE_SET_IRQS`), which an application waits for with epoll.
//!
//! Pinned DMA memory counts against RLIMIT_MEMLOCK of an unprivileged
//! process: the errors say so. See docs/vfio.md.

pub mod bind;
mod container;
mod uapi;

use crate::device::{Config, Device};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::pci::{PciAddress, PciDeviceInfo};
use crate::regs::{Mmio, RegisterAccess};
use container::{file_from_fd, Group};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

pub use container::memlock_limit;

/// Name of the kernel driver that hands devices to vfio.
pub const VFIO_PCI_DRIVER: &str = "vfio-pci";

/// PCI command register (config offset 4) and its Bus Master Enable bit
/// (PCI Local Bus spec 3.0 §6.2.2).
const PCI_COMMAND: u64 = 0x04;
const PCI_COMMAND_MASTER: u16 = 1 << 2;
/// Interrupt Disable (bit 10): no legacy INTx; we use MSI-X or poll.
const PCI_COMMAND_INTX_DISABLE: u16 = 1 << 10;

/// A region of the device fd (a BAR, config space).
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// Region index (BAR n = n, config = 7).
    pub index: u32,
    /// Bytes.
    pub size: u64,
    /// Offset of the region in the device fd.
    pub offset: u64,
    /// The region may be mmap'ed.
    pub mappable: bool,
}

/// Which kind of interrupt vectors a device got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptKind {
    /// MSI-X: one table entry per vector.
    MsiX,
    /// MSI: the fallback for devices without MSI-X.
    Msi,
}

/// Interrupt vectors wired to eventfds.
pub struct Interrupts {
    /// MSI-X or MSI.
    pub kind: InterruptKind,
    /// One eventfd per vector, in vector order (non-blocking).
    pub eventfds: Vec<File>,
}

/// A PCI device opened through vfio.
pub struct VfioDevice {
    address: PciAddress,
    device: File,
    group: Arc<Group>,
    config: Region,
    interrupts_enabled: Option<(u32, usize)>,
}

impl VfioDevice {
    /// Opens a device bound to vfio-pci: its group into the process's
    /// container (mapping all DMA memory), then the device itself.
    pub fn open(info: &PciDeviceInfo) -> Result<VfioDevice> {
        let address = info.address;
        if info.driver.as_deref() != Some(VFIO_PCI_DRIVER) {
            return Err(Error::Pci(format!(
                "{address} is not bound to vfio-pci (driver: {}): run `oxnet bind vfio {address}` as root",
                info.driver.as_deref().unwrap_or("none")
            )));
        }
        let Some(number) = info.iommu_group else {
            return Err(no_iommu_group(&address));
        };
        let group = container::open_group(number, &address.to_string())?;
        let name = std::ffi::CString::new(address.to_string()).expect("no NUL in an address");
        // SAFETY: VFIO_GROUP_GET_DEVICE_FD takes the device name as a C string.
        let fd = unsafe { libc::ioctl(group.fd.as_raw_fd(), uapi::GROUP_GET_DEVICE_FD as _, name.as_ptr()) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::Pci(format!(
                "VFIO_GROUP_GET_DEVICE_FD for {address} in group {number}: {e}{}",
                if e.raw_os_error() == Some(libc::EBUSY) {
                    " (the device is open in another process or another device object)"
                } else {
                    ""
                }
            )));
        }
        let device = file_from_fd(fd);
        let mut dev = VfioDevice {
            address,
            device,
            group,
            config: Region {
                index: 0,
                size: 0,
                offset: 0,
                mappable: false,
            },
            interrupts_enabled: None,
        };
        dev.config = dev.region(uapi::PCI_CONFIG_REGION_INDEX)?;
        Ok(dev)
    }

    /// The device's PCI address.
    pub fn address(&self) -> PciAddress {
        self.address
    }

    /// Its IOMMU group.
    pub fn iommu_group(&self) -> u32 {
        self.group.number
    }

    /// VFIO_DEVICE_GET_REGION_INFO for region `index` (BAR n = n).
    pub fn region(&self, index: u32) -> Result<Region> {
        let mut info = uapi::RegionInfo {
            argsz: std::mem::size_of::<uapi::RegionInfo>() as u32,
            index,
            ..Default::default()
        };
        // SAFETY: the kernel fills the struct whose size argsz gives.
        if unsafe { libc::ioctl(self.device.as_raw_fd(), uapi::DEVICE_GET_REGION_INFO as _, &mut info) } != 0 {
            return Err(Error::Pci(format!(
                "{}: VFIO_DEVICE_GET_REGION_INFO({index}): {}",
                self.address,
                std::io::Error::last_os_error()
            )));
        }
        Ok(Region {
            index,
            size: info.size,
            offset: info.offset,
            mappable: info.flags & uapi::REGION_INFO_FLAG_MMAP != 0,
        })
    }

    /// Region of BAR `bar`, which must exist.
    pub fn bar(&self, bar: u32) -> Result<Region> {
        let region = self.region(uapi::PCI_BAR0_REGION_INDEX + bar)?;
        if region.size == 0 {
            return Err(Error::Pci(format!("{}: BAR {bar} is empty", self.address)));
        }
        Ok(region)
    }

    /// Maps memory BAR `bar` (registers of an Intel NIC: BAR 0).
    /// Crate-private: safe register writes could point the device's DMA
    /// anywhere (issue 8 item 4); drivers own the mapping.
    pub(crate) fn map_bar(&self, bar: u32) -> Result<Mmio> {
        let region = self.bar(bar)?;
        if !region.mappable {
            return Err(Error::Pci(format!(
                "{}: BAR {bar} cannot be mapped (an I/O-port BAR?)",
                self.address
            )));
        }
        let len = region.size as usize;
        // SAFETY: mapping the region of our device fd at the offset vfio gave.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.device.as_raw_fd(),
                region.offset as libc::off_t,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(Error::Pci(format!(
                "{}: mmap of BAR {bar} through vfio: {}",
                self.address,
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: a live mapping of `len` bytes, owned by the Mmio from now on.
        Ok(unsafe { Mmio::new(NonNull::new_unchecked(addr as *mut u8), len) })
    }

    /// Reads `buf.len()` (1, 2 or 4) bytes at `offset` of a region: for
    /// I/O-port BARs vfio-pci does the `in` instruction for us.
    pub fn read_region(&self, region: &Region, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.device.read_exact_at(buf, region.offset + offset).map_err(|e| {
            Error::Io(format!(
                "{}: reading {} bytes at {offset:#x} of region {}: {e}",
                self.address,
                buf.len(),
                region.index
            ))
        })
    }

    /// Writes `bytes` (1, 2 or 4 of them) at `offset` of a region.
    /// Crate-private: a write to a BAR can point the device's DMA anywhere
    /// (issue 8 item 4); drivers own their device's registers.
    pub(crate) fn write_region(&self, region: &Region, offset: u64, bytes: &[u8]) -> Result<()> {
        self.device.write_all_at(bytes, region.offset + offset).map_err(|e| {
            Error::Io(format!(
                "{}: writing {} bytes at {offset:#x} of region {}: {e}",
                self.address,
                bytes.len(),
                region.index
            ))
        })
    }

    /// Sets Bus Master Enable in the command register (config region): the
    /// device may do DMA — through the IOMMU, only into what we mapped.
    /// Legacy INTx is switched off at the same time: nobody would handle
    /// it (interrupts come as MSI-X through eventfds, or not at all).
    pub(crate) fn enable_bus_master(&self) -> Result<()> {
        let mut command = [0u8; 2];
        self.read_region(&self.config, PCI_COMMAND, &mut command)?;
        let value = u16::from_le_bytes(command) | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE;
        self.write_region(&self.config, PCI_COMMAND, &value.to_le_bytes())
    }

    /// Clears Bus Master Enable: the device can no longer reach memory
    /// (the last step of a driver's teardown).
    pub fn disable_bus_master(&self) -> Result<()> {
        let mut command = [0u8; 2];
        self.read_region(&self.config, PCI_COMMAND, &mut command)?;
        let value = u16::from_le_bytes(command) & !PCI_COMMAND_MASTER;
        self.write_region(&self.config, PCI_COMMAND, &value.to_le_bytes())
    }

    /// Vectors of interrupt type `index` (MSI-X: 2, MSI: 1) the device has.
    fn irq_count(&self, index: u32) -> u32 {
        let mut info = uapi::IrqInfo {
            argsz: std::mem::size_of::<uapi::IrqInfo>() as u32,
            index,
            ..Default::default()
        };
        // SAFETY: the kernel fills the struct whose size argsz gives.
        let ok = unsafe { libc::ioctl(self.device.as_raw_fd(), uapi::DEVICE_GET_IRQ_INFO as _, &mut info) } == 0;
        if ok && info.flags & uapi::IRQ_INFO_EVENTFD != 0 {
            info.count
        } else {
            0
        }
    }

    /// Enables `count` MSI-X vectors (MSI if the device has no MSI-X), each
    /// signalling its own eventfd (VFIO_DEVICE_SET_IRQS with
    /// DATA_EVENTFD | ACTION_TRIGGER, vectors 0..count). vfio-pci sets the
    /// enable bit in the device's MSI-X capability itself.
    pub fn enable_interrupts(&mut self, count: usize) -> Result<Interrupts> {
        let (index, kind) = if self.irq_count(uapi::PCI_MSIX_IRQ_INDEX) as usize >= count {
            (uapi::PCI_MSIX_IRQ_INDEX, InterruptKind::MsiX)
        } else if self.irq_count(uapi::PCI_MSI_IRQ_INDEX) as usize >= count {
            (uapi::PCI_MSI_IRQ_INDEX, InterruptKind::Msi)
        } else {
            return Err(Error::Device(format!(
                "{}: the device has neither {count} MSI-X nor {count} MSI vectors",
                self.address
            )));
        };
        let mut eventfds = Vec::with_capacity(count);
        for _ in 0..count {
            // SAFETY: plain syscall; the fd is owned by the File below.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(crate::error::os_error("eventfd"));
            }
            eventfds.push(file_from_fd(fd));
        }
        let fds: Vec<i32> = eventfds.iter().map(|f| f.as_raw_fd()).collect();
        self.set_irqs(index, uapi::IRQ_SET_DATA_EVENTFD | uapi::IRQ_SET_ACTION_TRIGGER, &fds)?;
        self.interrupts_enabled = Some((index, count));
        Ok(Interrupts { kind, eventfds })
    }

    /// VFIO_DEVICE_SET_IRQS: a struct vfio_irq_set followed by the fds.
    fn set_irqs(&self, index: u32, flags: u32, fds: &[RawFd]) -> Result<()> {
        let header = std::mem::size_of::<uapi::IrqSetHeader>();
        let argsz = header + 4 * fds.len();
        // u32 words keep the buffer aligned for the header.
        let mut buffer = vec![0u32; argsz.div_ceil(4)];
        let set = uapi::IrqSetHeader {
            argsz: argsz as u32,
            flags,
            index,
            start: 0,
            count: fds.len() as u32,
        };
        // SAFETY: the buffer holds the header and then one s32 per fd.
        unsafe {
            std::ptr::write(buffer.as_mut_ptr() as *mut uapi::IrqSetHeader, set);
            let data = (buffer.as_mut_ptr() as *mut u8).add(header) as *mut i32;
            for (i, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(data.add(i), *fd);
            }
        }
        // SAFETY: VFIO_DEVICE_SET_IRQS reads argsz bytes from the buffer.
        if unsafe { libc::ioctl(self.device.as_raw_fd(), uapi::DEVICE_SET_IRQS as _, buffer.as_ptr()) } != 0 {
            return Err(Error::Device(format!(
                "{}: VFIO_DEVICE_SET_IRQS (index {index}, {} vectors): {}",
                self.address,
                fds.len(),
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl Drop for VfioDevice {
    fn drop(&mut self) {
        if let Some((index, _)) = self.interrupts_enabled {
            // DATA_NONE | ACTION_TRIGGER with count 0 disables the vectors.
            let _ = self.set_irqs(index, uapi::IRQ_SET_DATA_NONE | uapi::IRQ_SET_ACTION_TRIGGER, &[]);
        }
    }
}

/// The memory BAR of a device opened through vfio, as registers for a
/// driver. It owns the device, so the IOMMU mappings live as long as the
/// driver does.
pub struct VfioRegisters {
    mmio: Mmio,
    device: VfioDevice,
}

impl VfioRegisters {
    /// Maps BAR `bar` and enables bus mastering. Crate-private for the
    /// reason given at [`VfioDevice::map_bar`].
    pub(crate) fn new(device: VfioDevice, bar: u32) -> Result<VfioRegisters> {
        let mmio = device.map_bar(bar)?;
        device.enable_bus_master()?;
        Ok(VfioRegisters { mmio, device })
    }

    /// The vfio device (for its interrupts).
    pub fn device(&self) -> &VfioDevice {
        &self.device
    }

    /// The vfio device, mutable (enabling interrupts).
    pub fn device_mut(&mut self) -> &mut VfioDevice {
        &mut self.device
    }
}

impl RegisterAccess for VfioRegisters {
    #[inline(always)]
    fn read32(&self, offset: u32) -> u32 {
        self.mmio.read32(offset)
    }

    #[inline(always)]
    fn write32(&self, offset: u32, value: u32) {
        self.mmio.write32(offset, value)
    }

    fn disable_bus_master(&self) {
        if let Err(e) = self.device.disable_bus_master() {
            eprintln!("oxnet: cannot clear bus mastering: {e}");
        }
    }
}

/// Opens a device bound to vfio-pci with the driver its ids call for
/// (`pci::open` sends such devices here).
pub(crate) fn open_pci(info: &PciDeviceInfo, config: &Config) -> Result<Box<dyn Device>> {
    let spec = info.address.to_string();
    if crate::ixgbe::supports(info.vendor, info.device) {
        let registers = VfioRegisters::new(VfioDevice::open(info)?, 0)?;
        let device = crate::ixgbe::IxgbeDevice::init(registers, &spec, config, MemoryKind::Plain)?;
        return Ok(Box::new(device));
    }
    if crate::igb::supports(info.vendor, info.device) {
        let registers = VfioRegisters::new(VfioDevice::open(info)?, 0)?;
        let queues = crate::igb::max_queues(info.device);
        let mut device = crate::igb::IgbDevice::init(registers, &spec, config, MemoryKind::Plain, queues)?;
        if config.interrupts {
            let interrupts = device
                .registers_mut()
                .device_mut()
                .enable_interrupts(config.rx_queues as usize)?;
            if interrupts.kind != InterruptKind::MsiX {
                return Err(Error::Device(format!(
                    "{spec}: the igb driver needs MSI-X, the device offers only MSI"
                )));
            }
            device.enable_msix(interrupts.eventfds, config.itr_us)?;
        }
        return Ok(Box::new(device));
    }
    if info.vendor == crate::virtio::legacy_pci::VIRTIO_VENDOR_ID {
        let transport = crate::virtio::legacy_pci::LegacyPci::open_vfio(info, VfioDevice::open(info)?)?;
        let device = crate::virtio::VirtioNet::init(transport, &spec, config, Default::default())?;
        return Ok(Box::new(device));
    }
    Err(Error::Pci(format!(
        "{spec} ({:04x}:{:04x}) is bound to vfio-pci but is not a device oxnet drives; supported: {}",
        info.vendor,
        info.device,
        crate::pci::SUPPORTED_DEVICES
    )))
}

/// Reads an eventfd's counter (how many interrupts since the last read);
/// 0 if none is pending.
pub fn drain_eventfd(fd: RawFd) -> u64 {
    let mut value = 0u64;
    // SAFETY: an eventfd read is exactly 8 bytes into our u64.
    let n = unsafe { libc::read(fd, &mut value as *mut u64 as *mut libc::c_void, 8) };
    if n == 8 {
        value
    } else {
        0
    }
}

/// The error for a device that has no IOMMU group.
pub(crate) fn no_iommu_group(address: &PciAddress) -> Error {
    Error::Pci(format!(
        "{address} has no IOMMU group: the IOMMU is off, so vfio cannot protect memory from the device; \
         enable VT-d/AMD-Vi in the firmware and boot Linux with intel_iommu=on (or amd_iommu=on), \
         or use the device without vfio (`oxnet bind kernel {address}`, then run oxnet as root)"
    ))
}
