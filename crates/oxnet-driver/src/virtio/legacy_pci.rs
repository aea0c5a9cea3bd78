//! Legacy virtio over PCI (VirtIO 1.0 §4.1.4.8 "Legacy Interfaces: A Note on
//! PCI Device Layout"): the common registers live in an I/O-port BAR 0.
//!
//! Two ways to reach an I/O BAR from user space:
//! * `pread`/`pwrite` of exactly 1, 2 or 4 bytes on the sysfs `resource0`
//!   file — a system call per register access, works everywhere;
//! * `in`/`out` instructions after `ioperm` (needs CAP_SYS_RAWIO) — no
//!   system call, the faster option, used for the queue notifications on the
//!   data path. Permissions from `ioperm` belong to a thread, so each thread
//!   that notifies asks for them once;
//! * through vfio, when the device is bound to vfio-pci: `pread`/`pwrite`
//!   on the BAR's region of the vfio device fd (vfio-pci does the port
//!   access). Only there can the device interrupt us: its MSI-X vectors go
//!   to eventfds ([`Transport::enable_queue_interrupts`]). DMA memory stays
//!   huge pages with physical addresses (root): a legacy device bypasses
//!   the IOMMU (see `memory_kind`).

use super::transport::Transport;
use super::virtqueue::{Virtqueue, LEGACY_ALIGN};
use crate::device::Config;
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::pci::{self, PciDeviceInfo};
use crate::vfio::{self, InterruptKind, VfioDevice};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// PCI vendor id of virtio devices (Red Hat / Qumranet).
pub const VIRTIO_VENDOR_ID: u16 = 0x1af4;
/// Transitional (legacy-capable) network device id (§4.1.2.1).
pub const LEGACY_NET_DEVICE_ID: u16 = 0x1000;
/// Modern-only network device id (0x1040 + device type 1).
pub const MODERN_NET_DEVICE_ID: u16 = 0x1041;

// §4.1.4.8: legacy register layout of BAR 0.
const DEVICE_FEATURES: u16 = 0x00; // 32 bit, read
const DRIVER_FEATURES: u16 = 0x04; // 32 bit, read/write
const QUEUE_ADDRESS: u16 = 0x08; // 32 bit: page frame number of the queue
const QUEUE_SIZE: u16 = 0x0C; // 16 bit, read
const QUEUE_SELECT: u16 = 0x0E; // 16 bit
const QUEUE_NOTIFY: u16 = 0x10; // 16 bit
const DEVICE_STATUS: u16 = 0x12; // 8 bit
/// Device-specific configuration starts here while MSI-X is disabled.
const DEVICE_CONFIG: u16 = 0x14;
// §4.1.4.8: with MSI-X enabled two 16-bit registers come first, and the
// device-specific configuration moves to 0x18.
/// Vector for configuration changes (MSI-X only).
const MSI_CONFIG_VECTOR: u16 = 0x14;
/// Vector of the selected queue (MSI-X only).
const MSI_QUEUE_VECTOR: u16 = 0x16;
/// Device-specific configuration while MSI-X is enabled.
const DEVICE_CONFIG_MSIX: u16 = 0x18;
/// VIRTIO_MSI_NO_VECTOR: no interrupt (also what a device answers when it
/// cannot use the vector asked for, §4.1.5.1.2.1).
const NO_VECTOR: u16 = 0xFFFF;

/// How the I/O BAR is reached.
enum PortAccess {
    /// pread/pwrite on sysfs resource0.
    Sysfs(File),
    /// in/out instructions at this base port.
    PortIo { base: u16, len: u16 },
    /// pread/pwrite on the BAR's region of the vfio device.
    Vfio { device: VfioDevice, bar: vfio::Region },
}

/// A legacy virtio device on PCI.
pub struct LegacyPci {
    address: String,
    access: PortAccess,
    /// The sysfs file stays open for configuration reads (not with vfio).
    resource: Option<File>,
    /// Where the device-specific configuration starts (moves with MSI-X).
    device_config: u16,
}

impl LegacyPci {
    /// Checks the ids, takes the device from its kernel driver, and opens
    /// its I/O BAR (port I/O if `config.port_io` and permitted).
    pub fn open(info: &PciDeviceInfo, config: &Config) -> Result<LegacyPci> {
        let address = info.address.to_string();
        check_ids(info)?;
        let (start, end, flags) = bar0(info)?;
        const IORESOURCE_IO: u64 = 0x100;
        if flags & IORESOURCE_IO == 0 {
            return Err(Error::Pci(format!(
                "{address}: BAR 0 is not an I/O-port BAR; is this a legacy virtio device?"
            )));
        }
        pci::take_over(info)?;
        let path = pci::sysfs_file(&info.address, "resource0");
        let resource = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| pci::permission_or(e, format!("cannot open {}", path.display())))?;
        let len = (end - start + 1) as u16;
        let access = if config.port_io && start + len as u64 <= 0x10000 && grant_ports(start as u16, len) {
            PortAccess::PortIo {
                base: start as u16,
                len,
            }
        } else {
            PortAccess::Sysfs(
                resource
                    .try_clone()
                    .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?,
            )
        };
        Ok(LegacyPci {
            address,
            access,
            resource: Some(resource),
            device_config: DEVICE_CONFIG,
        })
    }

    /// Opens a device bound to vfio-pci: BAR 0 through the vfio device's
    /// region, bus mastering through its config region. No root needed.
    pub fn open_vfio(info: &PciDeviceInfo, device: VfioDevice) -> Result<LegacyPci> {
        check_ids(info)?;
        let bar = device.bar(0)?;
        if bar.mappable {
            return Err(Error::Pci(format!(
                "{}: BAR 0 is memory, not I/O ports; is this a legacy virtio device?",
                info.address
            )));
        }
        device.enable_bus_master()?;
        Ok(LegacyPci {
            address: info.address.to_string(),
            access: PortAccess::Vfio { device, bar },
            resource: None,
            device_config: DEVICE_CONFIG,
        })
    }

    /// True if register accesses use in/out instructions.
    pub fn uses_port_io(&self) -> bool {
        matches!(self.access, PortAccess::PortIo { .. })
    }

    /// True if the device is reached through vfio.
    pub fn uses_vfio(&self) -> bool {
        matches!(self.access, PortAccess::Vfio { .. })
    }

    fn write(&self, offset: u16, bytes: &[u8]) {
        match &self.access {
            PortAccess::Sysfs(file) => {
                let _ = file.write_all_at(bytes, offset as u64);
            }
            PortAccess::Vfio { device, bar } => {
                let _ = device.write_region(bar, offset as u64, bytes);
            }
            PortAccess::PortIo { base, len } => {
                ensure_ports(*base, *len);
                let port = base + offset;
                // SAFETY: the port lies in our device's I/O BAR and this
                // thread has permission (ensure_ports).
                unsafe {
                    match bytes.len() {
                        1 => port_io::outb(port, bytes[0]),
                        2 => port_io::outw(port, u16::from_le_bytes([bytes[0], bytes[1]])),
                        _ => port_io::outl(port, u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]))),
                    }
                }
            }
        }
    }

    fn read(&self, offset: u16, bytes: &mut [u8]) {
        match &self.access {
            PortAccess::Sysfs(file) => {
                if file.read_exact_at(bytes, offset as u64).is_err() {
                    bytes.fill(0xFF);
                }
            }
            PortAccess::Vfio { device, bar } => {
                if device.read_region(bar, offset as u64, bytes).is_err() {
                    bytes.fill(0xFF);
                }
            }
            PortAccess::PortIo { base, len } => {
                ensure_ports(*base, *len);
                let port = base + offset;
                // SAFETY: as in write.
                unsafe {
                    match bytes.len() {
                        1 => bytes[0] = port_io::inb(port),
                        2 => bytes.copy_from_slice(&port_io::inw(port).to_le_bytes()),
                        _ => bytes.copy_from_slice(&port_io::inl(port).to_le_bytes()),
                    }
                }
            }
        }
    }

    fn read8(&self, offset: u16) -> u8 {
        let mut b = [0u8; 1];
        self.read(offset, &mut b);
        b[0]
    }

    fn read16(&self, offset: u16) -> u16 {
        let mut b = [0u8; 2];
        self.read(offset, &mut b);
        u16::from_le_bytes(b)
    }

    fn read32(&self, offset: u16) -> u32 {
        let mut b = [0u8; 4];
        self.read(offset, &mut b);
        u32::from_le_bytes(b)
    }
}

impl Transport for LegacyPci {
    fn describe(&self) -> String {
        self.address.clone()
    }

    fn memory_kind(&self) -> MemoryKind {
        // Even behind vfio: a legacy device bypasses the IOMMU. Only a
        // device that negotiated VIRTIO_F_ACCESS_PLATFORM (bit 33, VirtIO
        // 1.1 §6.1) has its addresses translated; a legacy device has 32
        // feature bits and "the same access to memory addresses supplied to
        // it as the driver has", i.e. physical ones (QEMU's legacy
        // virtio-net-pci does exactly that, whatever the vIOMMU). So the
        // rings and buffers are huge pages with physical addresses, and
        // vfio gives us the BAR, bus mastering and MSI-X.
        MemoryKind::HugePages
    }

    fn reset(&mut self) -> Result<()> {
        // §2.1 / §4.1.4.8: writing 0 to the status resets a legacy device.
        self.write(DEVICE_STATUS, &[0]);
        if self.read8(DEVICE_STATUS) != 0 {
            return Err(Error::Device(format!(
                "{}: device did not reset (status stays non-zero)",
                self.address
            )));
        }
        Ok(())
    }

    fn set_status(&mut self, status: u8) -> Result<()> {
        self.write(DEVICE_STATUS, &[status]);
        Ok(())
    }

    fn device_features(&mut self) -> Result<u64> {
        // Legacy devices have 32 feature bits only.
        Ok(self.read32(DEVICE_FEATURES) as u64)
    }

    fn set_driver_features(&mut self, features: u64) -> Result<()> {
        self.write(DRIVER_FEATURES, &(features as u32).to_le_bytes());
        Ok(())
    }

    fn queue_size(&mut self, queue: u16, _wanted: u16) -> Result<u16> {
        // The legacy device fixes the size (§4.1.5.1.3.1 legacy).
        self.write(QUEUE_SELECT, &queue.to_le_bytes());
        Ok(self.read16(QUEUE_SIZE))
    }

    fn setup_queue(&mut self, queue: &Virtqueue) -> Result<()> {
        let iova = queue.desc_iova();
        if !iova.is_multiple_of(LEGACY_ALIGN as u64) || iova >> 12 > u32::MAX as u64 {
            return Err(Error::Device(format!(
                "{}: virtqueue {} at {iova:#x} is not a 4 KiB aligned address below 16 TiB",
                self.address, queue.index
            )));
        }
        self.write(QUEUE_SELECT, &queue.index.to_le_bytes());
        self.write(QUEUE_ADDRESS, &((iova >> 12) as u32).to_le_bytes());
        Ok(())
    }

    #[inline]
    fn notify(&mut self, queue: u16) {
        self.write(QUEUE_NOTIFY, &queue.to_le_bytes());
    }

    fn read_config(&self, offset: u16, buf: &mut [u8]) -> Result<bool> {
        // Configuration bytes are read one at a time through the file (or
        // the vfio region); multi-byte fields of legacy devices are
        // guest-endian (x86: LE).
        for (i, b) in buf.iter_mut().enumerate() {
            let at = self.device_config + i as u16 + offset;
            let mut byte = [0u8];
            match (&self.resource, &self.access) {
                (Some(file), _) => file
                    .read_exact_at(&mut byte, at as u64)
                    .map_err(|e| Error::Io(format!("{}: reading config space: {e}", self.address)))?,
                (None, PortAccess::Vfio { device, bar }) => device.read_region(bar, at as u64, &mut byte)?,
                (None, _) => self.read(at, &mut byte),
            }
            *b = byte[0];
        }
        Ok(true)
    }

    fn enable_queue_interrupts(&mut self, queues: &[u16]) -> Result<Vec<File>> {
        let PortAccess::Vfio { device, .. } = &mut self.access else {
            return Err(Error::Config(format!(
                "{}: receive interrupts need the device bound to vfio-pci (`oxnet bind vfio {}`)",
                self.address, self.address
            )));
        };
        let interrupts = device.enable_interrupts(queues.len())?;
        if interrupts.kind != InterruptKind::MsiX {
            return Err(Error::Device(format!("{}: the device has no MSI-X", self.address)));
        }
        // vfio-pci has set MSI-X Enable: the device-specific configuration
        // now starts at 0x18 (§4.1.4.8).
        self.device_config = DEVICE_CONFIG_MSIX;
        // No interrupt for configuration changes (we read the link state
        // when asked); queue i of the list signals vector i (§4.1.5.1.2.1:
        // the device answers NO_VECTOR if it cannot use the vector).
        self.write(MSI_CONFIG_VECTOR, &NO_VECTOR.to_le_bytes());
        for (vector, queue) in queues.iter().enumerate() {
            self.write(QUEUE_SELECT, &queue.to_le_bytes());
            self.write(MSI_QUEUE_VECTOR, &(vector as u16).to_le_bytes());
            if self.read16(MSI_QUEUE_VECTOR) != vector as u16 {
                return Err(Error::Device(format!(
                    "{}: the device refused MSI-X vector {vector} for queue {queue}",
                    self.address
                )));
            }
        }
        Ok(interrupts.eventfds)
    }
}

/// Legacy virtio-net only; a modern-only device or another virtio device
/// gets an error that says what to do.
fn check_ids(info: &PciDeviceInfo) -> Result<()> {
    let address = info.address.to_string();
    match info.device {
        LEGACY_NET_DEVICE_ID => {}
        MODERN_NET_DEVICE_ID => {
            return Err(Error::Pci(format!(
                "{address} is a modern-only virtio-net device (1af4:1041); oxnet drives the legacy interface: \
                     start QEMU with -device virtio-net-pci,disable-modern=on"
            )))
        }
        other => {
            return Err(Error::Pci(format!(
                "{address} (1af4:{other:04x}) is a virtio device but not a network card; oxnet drives \
                     virtio-net (1af4:1000)"
            )))
        }
    }
    Ok(())
}

/// BAR 0 from the sysfs `resource` file: start, end, flags.
fn bar0(info: &PciDeviceInfo) -> Result<(u64, u64, u64)> {
    let path = pci::sysfs_file(&info.address, "resource");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Pci(format!("{}: {e}", path.display())))?;
    let line = text.lines().next().unwrap_or("");
    let mut fields = line
        .split_whitespace()
        .map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16));
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Ok(start)), Some(Ok(end)), Some(Ok(flags))) if end > start => Ok((start, end, flags)),
        _ => Err(Error::Pci(format!("{}: BAR 0 is not set up ({line:?})", info.address))),
    }
}

thread_local! {
    /// I/O port ranges this thread may access.
    static GRANTED: std::cell::RefCell<Vec<u16>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Asks for permission to access ports [base, base + len) on this thread.
fn grant_ports(base: u16, len: u16) -> bool {
    // SAFETY: plain syscall; failure (no CAP_SYS_RAWIO) is reported.
    let ok = unsafe { libc::ioperm(base as libc::c_ulong, len as libc::c_ulong, 1) } == 0;
    if ok {
        GRANTED.with(|g| g.borrow_mut().push(base));
    }
    ok
}

#[inline]
fn ensure_ports(base: u16, len: u16) {
    let granted = GRANTED.with(|g| g.borrow().contains(&base));
    if !granted {
        // Permission was given to the thread that opened the device; this
        // is another one. If it is refused, the access below faults loudly.
        grant_ports(base, len);
    }
}

/// x86 port I/O.
mod port_io {
    use std::arch::asm;

    pub unsafe fn outb(port: u16, value: u8) {
        // SAFETY: the caller holds ioperm permission for `port`.
        unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags)) }
    }
    pub unsafe fn outw(port: u16, value: u16) {
        // SAFETY: as above.
        unsafe { asm!("out dx, ax", in("dx") port, in("ax") value, options(nomem, nostack, preserves_flags)) }
    }
    pub unsafe fn outl(port: u16, value: u32) {
        // SAFETY: as above.
        unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags)) }
    }
    pub unsafe fn inb(port: u16) -> u8 {
        let value: u8;
        // SAFETY: as above.
        unsafe { asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack, preserves_flags)) }
        value
    }
    pub unsafe fn inw(port: u16) -> u16 {
        let value: u16;
        // SAFETY: as above.
        unsafe { asm!("in ax, dx", out("ax") value, in("dx") port, options(nomem, nostack, preserves_flags)) }
        value
    }
    pub unsafe fn inl(port: u16) -> u32 {
        let value: u32;
        // SAFETY: as above.
        unsafe { asm!("in eax, dx", out("eax") value, in("dx") port, options(nomem, nostack, preserves_flags)) }
        value
    }
}
