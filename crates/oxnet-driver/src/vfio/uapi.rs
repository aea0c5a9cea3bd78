//! The parts of the Linux vfio user API we use, from
//! `include/uapi/linux/vfio.h` (same numbers since Linux 3.6; the layouts
//! are `#[repr(C)]` copies of the header's structs, field for field).
//!
//! Every ioctl is `_IO(VFIO_TYPE, VFIO_BASE + n)` with `VFIO_TYPE` = ';'
//! (0x3B) and `VFIO_BASE` = 100: no size or direction bits, the kernel
//! reads `argsz` from the struct instead. `_IO(t, nr)` = `(t << 8) | nr`.

#![allow(dead_code)]

const VFIO_TYPE: u64 = b';' as u64;
const VFIO_BASE: u64 = 100;

const fn io(n: u64) -> u64 {
    (VFIO_TYPE << 8) | (VFIO_BASE + n)
}

/// VFIO_GET_API_VERSION: returns VFIO_API_VERSION (0).
pub const GET_API_VERSION: u64 = io(0);
/// VFIO_CHECK_EXTENSION(type): > 0 if the IOMMU type is supported.
pub const CHECK_EXTENSION: u64 = io(1);
/// VFIO_SET_IOMMU(type): chooses the container's IOMMU model; needs a group
/// in the container first.
pub const SET_IOMMU: u64 = io(2);
/// VFIO_GROUP_GET_STATUS(struct vfio_group_status).
pub const GROUP_GET_STATUS: u64 = io(3);
/// VFIO_GROUP_SET_CONTAINER(int *container_fd).
pub const GROUP_SET_CONTAINER: u64 = io(4);
/// VFIO_GROUP_GET_DEVICE_FD(char *name): the device fd, e.g. "0000:00:03.0".
pub const GROUP_GET_DEVICE_FD: u64 = io(6);
/// VFIO_DEVICE_GET_INFO(struct vfio_device_info).
pub const DEVICE_GET_INFO: u64 = io(7);
/// VFIO_DEVICE_GET_REGION_INFO(struct vfio_region_info).
pub const DEVICE_GET_REGION_INFO: u64 = io(8);
/// VFIO_DEVICE_GET_IRQ_INFO(struct vfio_irq_info).
pub const DEVICE_GET_IRQ_INFO: u64 = io(9);
/// VFIO_DEVICE_SET_IRQS(struct vfio_irq_set + data).
pub const DEVICE_SET_IRQS: u64 = io(10);
/// VFIO_DEVICE_RESET.
pub const DEVICE_RESET: u64 = io(11);
/// VFIO_IOMMU_GET_INFO(struct vfio_iommu_type1_info).
pub const IOMMU_GET_INFO: u64 = io(12);
/// VFIO_IOMMU_MAP_DMA(struct vfio_iommu_type1_dma_map).
pub const IOMMU_MAP_DMA: u64 = io(13);
/// VFIO_IOMMU_UNMAP_DMA(struct vfio_iommu_type1_dma_unmap).
pub const IOMMU_UNMAP_DMA: u64 = io(14);

/// VFIO_API_VERSION.
pub const API_VERSION: i32 = 0;
/// VFIO_TYPE1_IOMMU.
pub const TYPE1_IOMMU: u64 = 1;
/// VFIO_TYPE1v2_IOMMU (preferred: unmap semantics without splitting).
pub const TYPE1V2_IOMMU: u64 = 3;

/// struct vfio_group_status.
#[repr(C)]
#[derive(Default)]
pub struct GroupStatus {
    pub argsz: u32,
    pub flags: u32,
}
/// VFIO_GROUP_FLAGS_VIABLE: every device of the group is bound to a vfio
/// driver (or to none).
pub const GROUP_FLAGS_VIABLE: u32 = 1 << 0;
/// VFIO_GROUP_FLAGS_CONTAINER_SET.
pub const GROUP_FLAGS_CONTAINER_SET: u32 = 1 << 1;

/// struct vfio_device_info (without the capability chain).
#[repr(C)]
#[derive(Default)]
pub struct DeviceInfo {
    pub argsz: u32,
    pub flags: u32,
    pub num_regions: u32,
    pub num_irqs: u32,
}
/// VFIO_DEVICE_FLAGS_PCI.
pub const DEVICE_FLAGS_PCI: u32 = 1 << 1;

/// struct vfio_region_info.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct RegionInfo {
    pub argsz: u32,
    pub flags: u32,
    pub index: u32,
    pub cap_offset: u32,
    pub size: u64,
    /// Where the region starts in the device fd (for pread/pwrite/mmap).
    pub offset: u64,
}
/// VFIO_REGION_INFO_FLAG_READ.
pub const REGION_INFO_FLAG_READ: u32 = 1 << 0;
/// VFIO_REGION_INFO_FLAG_WRITE.
pub const REGION_INFO_FLAG_WRITE: u32 = 1 << 1;
/// VFIO_REGION_INFO_FLAG_MMAP.
pub const REGION_INFO_FLAG_MMAP: u32 = 1 << 2;

/// VFIO_PCI_BAR0_REGION_INDEX (BAR n is region n, up to 5).
pub const PCI_BAR0_REGION_INDEX: u32 = 0;
/// VFIO_PCI_CONFIG_REGION_INDEX: PCI configuration space.
pub const PCI_CONFIG_REGION_INDEX: u32 = 7;

/// struct vfio_irq_info.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct IrqInfo {
    pub argsz: u32,
    pub flags: u32,
    pub index: u32,
    /// Vectors available.
    pub count: u32,
}
/// VFIO_IRQ_INFO_EVENTFD.
pub const IRQ_INFO_EVENTFD: u32 = 1 << 0;

/// VFIO_PCI_INTX_IRQ_INDEX.
pub const PCI_INTX_IRQ_INDEX: u32 = 0;
/// VFIO_PCI_MSI_IRQ_INDEX.
pub const PCI_MSI_IRQ_INDEX: u32 = 1;
/// VFIO_PCI_MSIX_IRQ_INDEX.
pub const PCI_MSIX_IRQ_INDEX: u32 = 2;

/// struct vfio_irq_set, followed in memory by `count` eventfds (s32).
#[repr(C)]
pub struct IrqSetHeader {
    pub argsz: u32,
    pub flags: u32,
    pub index: u32,
    pub start: u32,
    pub count: u32,
}
/// VFIO_IRQ_SET_DATA_NONE.
pub const IRQ_SET_DATA_NONE: u32 = 1 << 0;
/// VFIO_IRQ_SET_DATA_EVENTFD: data is an array of s32 eventfds.
pub const IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
/// VFIO_IRQ_SET_ACTION_TRIGGER: the vector signals the eventfd.
pub const IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;

/// struct vfio_iommu_type1_dma_map.
#[repr(C)]
pub struct DmaMap {
    pub argsz: u32,
    pub flags: u32,
    pub vaddr: u64,
    pub iova: u64,
    pub size: u64,
}
/// VFIO_DMA_MAP_FLAG_READ: the device may read.
pub const DMA_MAP_FLAG_READ: u32 = 1 << 0;
/// VFIO_DMA_MAP_FLAG_WRITE: the device may write.
pub const DMA_MAP_FLAG_WRITE: u32 = 1 << 1;

/// struct vfio_iommu_type1_dma_unmap.
#[repr(C)]
pub struct DmaUnmap {
    pub argsz: u32,
    pub flags: u32,
    pub iova: u64,
    pub size: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_header() {
        // _IO(';', 100) = 0x3b64 ... as in vfio.h.
        assert_eq!(GET_API_VERSION, 0x3b64);
        assert_eq!(SET_IOMMU, 0x3b66);
        assert_eq!(GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(IOMMU_MAP_DMA, 0x3b71);
        assert_eq!(IOMMU_UNMAP_DMA, 0x3b72);
        assert_eq!(std::mem::size_of::<RegionInfo>(), 32);
        assert_eq!(std::mem::size_of::<DmaMap>(), 32);
        assert_eq!(std::mem::size_of::<IrqSetHeader>(), 20);
    }
}
