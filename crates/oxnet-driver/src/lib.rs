//! oxnet-driver: user-space network drivers in the style of ixy.
//!
//! Read top-down: [`open`] picks a driver from a spec string; a driver
//! implements [`Device`]; drivers are generic over [`RegisterAccess`] so
//! the same code drives a real NIC and the software 82599 of `oxnet-sim`;
//! packets are [`Packet`]s from a [`Mempool`] in [`memory::DmaMemory`].

pub mod advanced;
pub mod af_packet;
pub mod af_xdp;
pub mod barrier;
pub mod device;
pub mod domain;
pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod igb;
pub mod ixgbe;
pub mod memif;
pub mod memory;
pub mod mempool;
pub mod netif;
pub mod offload;
pub mod packet;
pub mod pci;
mod queue_handles;
pub mod regs;
pub mod ring;
pub mod rss;
pub mod shared;
pub mod spec;
pub mod tap;
mod unix;
pub mod vfio;
pub mod virtio;
pub mod wait;

pub use device::{
    split_locked, Config, ControlHandle, Device, DeviceStats, Features, Link, Offloads, QueueHandles, QueueStats,
    RxHandle, TsoMode, TxHandle,
};
pub use domain::DmaDomain;
pub use error::{Error, Result};
pub use memory::MemoryKind;
pub use mempool::Mempool;
pub use packet::{Annotations, Metadata, Packet, PacketBatch, TxOffload};
pub use regs::RegisterAccess;
pub use shared::{AttachPool, SharedBuffer};
pub use spec::{open, register_spec_opener, Spec};
