//! The vfio container and groups (Documentation/driver-api/vfio.rst,
//! "VFIO Usage Example"): one container per process, holding the IOMMU
//! groups of every device we open, with one set of DMA mappings for all.
//!
//! Set-up order, as the kernel requires it:
//! 1. open `/dev/vfio/vfio`, check `VFIO_GET_API_VERSION` and that the
//!    type-1 IOMMU is supported (`VFIO_CHECK_EXTENSION`);
//! 2. open `/dev/vfio/<group>`, check `VFIO_GROUP_GET_STATUS` says viable;
//! 3. `VFIO_GROUP_SET_CONTAINER`; for the first group `VFIO_SET_IOMMU`;
//! 4. map DMA memory (`VFIO_IOMMU_MAP_DMA`), get device fds.

use super::uapi;
use crate::error::{Error, Result};
use crate::memory::{self, DmaMapper, DmaMapperId};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::sync::{Arc, Mutex, Weak};

const CONTAINER_PATH: &str = "/dev/vfio/vfio";

/// The process's vfio container.
pub(crate) struct Container {
    fd: Arc<File>,
    mapper: Mutex<Option<DmaMapperId>>,
    groups: Mutex<HashMap<u32, Weak<Group>>>,
}

/// An IOMMU group attached to the container. Devices keep it alive.
pub(crate) struct Group {
    pub(crate) number: u32,
    pub(crate) fd: File,
    /// Keeps the container (and its DMA mappings) alive.
    _container: Arc<Container>,
}

static CONTAINER: Mutex<Weak<Container>> = Mutex::new(Weak::new());

fn errno_error(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Container {
    /// The process's container, opened on first use.
    fn get() -> Result<Arc<Container>> {
        let mut slot = CONTAINER.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(container) = slot.upgrade() {
            return Ok(container);
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(CONTAINER_PATH)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::Pci(format!(
                    "{CONTAINER_PATH} does not exist: load the vfio modules (`modprobe vfio-pci`)"
                )),
                std::io::ErrorKind::PermissionDenied => {
                    Error::Permission(format!("cannot open {CONTAINER_PATH}: permission denied"))
                }
                _ => Error::Io(format!("cannot open {CONTAINER_PATH}: {e}")),
            })?;
        // SAFETY: argument-less ioctls on our own fd.
        let version = unsafe { libc::ioctl(file.as_raw_fd(), uapi::GET_API_VERSION as _) };
        if version != uapi::API_VERSION {
            return Err(Error::Pci(format!(
                "{CONTAINER_PATH}: unknown vfio API version {version} (expected {})",
                uapi::API_VERSION
            )));
        }
        // SAFETY: as above; the argument is an integer.
        let type1 = unsafe { libc::ioctl(file.as_raw_fd(), uapi::CHECK_EXTENSION as _, uapi::TYPE1V2_IOMMU) };
        if type1 <= 0 {
            return Err(Error::Pci(format!(
                "{CONTAINER_PATH}: the type-1 IOMMU driver is missing (`modprobe vfio_iommu_type1`)"
            )));
        }
        let container = Arc::new(Container {
            fd: Arc::new(file),
            mapper: Mutex::new(None),
            groups: Mutex::new(HashMap::new()),
        });
        *slot = Arc::downgrade(&container);
        Ok(container)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(id) = self.mapper.lock().unwrap_or_else(|e| e.into_inner()).take() {
            memory::remove_dma_mapper(id);
        }
    }
}

/// Opens IOMMU group `number` into the process's container (or returns it
/// if a device of the same group is open already).
pub(crate) fn open_group(number: u32, device: &str) -> Result<Arc<Group>> {
    let container = Container::get()?;
    let mut groups = container.groups.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(group) = groups.get(&number).and_then(Weak::upgrade) {
        return Ok(group);
    }
    let path = format!("/dev/vfio/{number}");
    let fd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Error::Permission(format!(
                "cannot open {path} (IOMMU group of {device}): permission denied; give it to your user \
                 once as root: `chown $USER {path}` (or `oxnet bind vfio {device} --owner $USER`)"
            )),
            Some(libc::EBUSY) => Error::Pci(format!(
                "{path} (IOMMU group of {device}) is busy: another process has it open"
            )),
            Some(libc::ENOENT) => Error::Pci(format!(
                "{path} does not exist: is {device} bound to vfio-pci? (`oxnet bind vfio {device}`)"
            )),
            _ => Error::Io(format!("cannot open {path}: {e}")),
        })?;
    let mut status = uapi::GroupStatus {
        argsz: std::mem::size_of::<uapi::GroupStatus>() as u32,
        flags: 0,
    };
    // SAFETY: VFIO_GROUP_GET_STATUS fills the struct whose size argsz gives.
    if unsafe { libc::ioctl(fd.as_raw_fd(), uapi::GROUP_GET_STATUS as _, &mut status) } != 0 {
        return Err(Error::Io(
            errno_error(&format!("VFIO_GROUP_GET_STATUS on {path}")).to_string(),
        ));
    }
    if status.flags & uapi::GROUP_FLAGS_VIABLE == 0 {
        return Err(Error::Pci(not_viable_message(number, device)));
    }
    let container_fd: libc::c_int = container.fd.as_raw_fd();
    // SAFETY: the argument is a pointer to the container's fd.
    if unsafe { libc::ioctl(fd.as_raw_fd(), uapi::GROUP_SET_CONTAINER as _, &container_fd) } != 0 {
        return Err(Error::Io(
            errno_error(&format!("VFIO_GROUP_SET_CONTAINER for {path}")).to_string(),
        ));
    }
    let mut mapper = container.mapper.lock().unwrap_or_else(|e| e.into_inner());
    if mapper.is_none() {
        // The IOMMU model is chosen once, after the first group is in.
        // SAFETY: integer argument.
        if unsafe { libc::ioctl(container_fd, uapi::SET_IOMMU as _, uapi::TYPE1V2_IOMMU) } != 0 {
            return Err(Error::Io(errno_error("VFIO_SET_IOMMU(VFIO_TYPE1v2_IOMMU)").to_string()));
        }
        // From now on every DMA allocation is mapped IOVA = VA, the ones
        // that exist already right here.
        let id = memory::add_dma_mapper(Arc::new(ContainerMapper {
            fd: container.fd.clone(),
        }))?;
        *mapper = Some(id);
    }
    drop(mapper);
    let group = Arc::new(Group {
        number,
        fd,
        _container: container.clone(),
    });
    groups.insert(number, Arc::downgrade(&group));
    Ok(group)
}

/// Why a group is not viable: the devices in it that are bound to some
/// other driver.
fn not_viable_message(number: u32, device: &str) -> String {
    let dir = format!("/sys/kernel/iommu_groups/{number}/devices");
    let mut others = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let driver = std::fs::read_link(entry.path().join("driver"))
                .ok()
                .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
            if let Some(driver) = driver {
                if driver != "vfio-pci" {
                    others.push(format!("{name} (bound to {driver})"));
                }
            }
        }
    }
    others.sort();
    format!(
        "IOMMU group {number} of {device} is not viable: every device in a group must be bound to vfio-pci \
         (or to no driver) before any of them can be used; in this group: {}; bind them with \
         `oxnet bind vfio ADDRESS`, or move the NIC to a slot with its own group",
        if others.is_empty() {
            "devices bound to other drivers".to_string()
        } else {
            others.join(", ")
        }
    )
}

/// Maps DMA memory into the container: IOVA as the memory module says
/// (the virtual address for plain memory).
struct ContainerMapper {
    fd: Arc<File>,
}

impl DmaMapper for ContainerMapper {
    fn map(&self, virt: usize, iova: u64, len: usize) -> Result<()> {
        let map = uapi::DmaMap {
            argsz: std::mem::size_of::<uapi::DmaMap>() as u32,
            flags: uapi::DMA_MAP_FLAG_READ | uapi::DMA_MAP_FLAG_WRITE,
            vaddr: virt as u64,
            iova,
            size: len as u64,
        };
        // SAFETY: VFIO_IOMMU_MAP_DMA reads the struct; the kernel pins the
        // pages of [virt, virt + len), which is our own live mapping.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), uapi::IOMMU_MAP_DMA as _, &map) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOMEM) {
            return Err(Error::Memory(format!(
                "vfio cannot pin {len} more bytes of DMA memory: the locked-memory limit (RLIMIT_MEMLOCK, \
                 now {}) is too low; pinned DMA memory counts against it: raise it (`ulimit -l unlimited` \
                 as root before dropping privileges, `prlimit --memlock=...`, or memlock in \
                 /etc/security/limits.conf); a forwarder on two ports needs about 32 MiB",
                memlock_limit()
            )));
        }
        Err(Error::Io(format!(
            "VFIO_IOMMU_MAP_DMA of {len} bytes at IOVA {iova:#x}: {e} (does the IOMMU reach 48-bit addresses?)"
        )))
    }

    fn unmap(&self, iova: u64, len: usize) {
        let mut unmap = uapi::DmaUnmap {
            argsz: std::mem::size_of::<uapi::DmaUnmap>() as u32,
            flags: 0,
            iova,
            size: len as u64,
        };
        // SAFETY: VFIO_IOMMU_UNMAP_DMA reads (and updates) the struct.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), uapi::IOMMU_UNMAP_DMA as _, &mut unmap) };
    }
}

/// RLIMIT_MEMLOCK as a person reads it.
pub fn memlock_limit() -> String {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return "unknown".into();
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", limit.rlim_cur / 1024)
    }
}

/// Takes ownership of a raw fd returned by an ioctl.
pub(crate) fn file_from_fd(fd: libc::c_int) -> File {
    // SAFETY: the fd was just returned to us by the kernel and is owned by
    // nobody else.
    unsafe { File::from_raw_fd(fd) }
}
