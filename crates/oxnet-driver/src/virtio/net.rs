//! virtio-net specifics: feature bits, the packet header, control commands
//! (VirtIO 1.0 §5.1).

/// VIRTIO_NET_F_MAC: the device has a MAC address in config space (§5.1.3).
pub const F_MAC: u64 = 1 << 5;
/// VIRTIO_NET_F_MRG_RXBUF: merged receive buffers (header becomes 12 bytes).
pub const F_MRG_RXBUF: u64 = 1 << 15;
/// VIRTIO_NET_F_STATUS: link status in config space.
pub const F_STATUS: u64 = 1 << 16;
/// VIRTIO_NET_F_CTRL_VQ: a control queue exists.
pub const F_CTRL_VQ: u64 = 1 << 17;
/// VIRTIO_NET_F_CTRL_RX: receive-mode commands (promiscuous) on it.
pub const F_CTRL_RX: u64 = 1 << 18;
/// VIRTIO_F_ANY_LAYOUT (§6.3): the device does not care how header and
/// data are split over descriptors.
pub const F_ANY_LAYOUT: u64 = 1 << 27;
/// VIRTIO_F_VERSION_1: a modern (non-legacy) device; header 12 bytes.
pub const F_VERSION_1: u64 = 1 << 32;

/// struct virtio_net_hdr without num_buffers (§5.1.6, legacy without
/// MRG_RXBUF): flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.
pub const HEADER_LEN_LEGACY: usize = 10;
/// With num_buffers (MRG_RXBUF or VERSION_1).
pub const HEADER_LEN_MODERN: usize = 12;

/// Header length for a negotiated feature set.
pub fn header_len(features: u64) -> usize {
    if features & (F_MRG_RXBUF | F_VERSION_1) != 0 {
        HEADER_LEN_MODERN
    } else {
        HEADER_LEN_LEGACY
    }
}

/// Config space: MAC at 0, status at 6 (§5.1.4).
pub const CONFIG_MAC: u16 = 0;
/// Config space offset of the status field.
pub const CONFIG_STATUS: u16 = 6;
/// VIRTIO_NET_S_LINK_UP.
pub const S_LINK_UP: u16 = 1;

/// VIRTIO_NET_CTRL_RX class (§5.1.6.5.1).
pub const CTRL_RX: u8 = 0;
/// VIRTIO_NET_CTRL_RX_PROMISC command.
pub const CTRL_RX_PROMISC: u8 = 0;
/// VIRTIO_NET_OK ack.
pub const CTRL_OK: u8 = 0;

/// Queue numbers of a single queue pair device (§5.1.2).
pub const RX_QUEUE: u16 = 0;
/// Transmit queue.
pub const TX_QUEUE: u16 = 1;
/// Control queue (with one queue pair).
pub const CTRL_QUEUE: u16 = 2;
