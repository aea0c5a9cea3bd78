//! What a virtio driver needs from the way it reaches its device. Two
//! transports implement it: legacy PCI (an I/O-port BAR, VirtIO 1.0
//! §4.1.4.8) and vhost-user (a Unix socket to a backend such as DPDK).

use super::virtqueue::Virtqueue;
use crate::error::{Error, Result};
use crate::memory::MemoryKind;

/// Device status bits (VirtIO 1.0 §2.1).
pub mod status {
    /// The guest has noticed the device.
    pub const ACKNOWLEDGE: u8 = 1;
    /// The guest knows how to drive it.
    pub const DRIVER: u8 = 2;
    /// The driver is set up and ready to drive the device.
    pub const DRIVER_OK: u8 = 4;
    /// Something went wrong in the guest; it gave up on the device.
    pub const FAILED: u8 = 128;
}

/// What [`Transport::poll_device`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceEvent {
    /// Nothing changed.
    Unchanged,
    /// The device went away (a vhost-user back-end closed the connection):
    /// it no longer reads or writes the rings.
    Lost,
    /// A device is there again (the back-end restarted, or reconnected),
    /// features and memory already negotiated: the driver sets up its
    /// queues again ([`Transport::setup_queue`], then DRIVER_OK).
    Back,
}

/// How a virtio driver talks to its device.
pub trait Transport: Send {
    /// For messages: "0000:00:03.0", "vhost-user:/tmp/sock".
    fn describe(&self) -> String;
    /// Memory the device can reach (huge pages with physical addresses for
    /// PCI, the shared plain arena for vhost-user).
    fn memory_kind(&self) -> MemoryKind;
    /// Resets the device (status 0).
    fn reset(&mut self) -> Result<()>;
    /// Sets the device status byte.
    fn set_status(&mut self, status: u8) -> Result<()>;
    /// The feature bits the device offers.
    fn device_features(&mut self) -> Result<u64>;
    /// Tells the device which features the driver uses.
    fn set_driver_features(&mut self, features: u64) -> Result<()>;
    /// Queue size for `queue`: fixed by the device (legacy PCI), or our
    /// choice `wanted` (vhost-user). 0 means the queue does not exist.
    fn queue_size(&mut self, queue: u16, wanted: u16) -> Result<u16>;
    /// Tells the device where queue `queue` lives and enables it.
    fn setup_queue(&mut self, queue: &Virtqueue) -> Result<()>;
    /// Notifies the device of new buffers in `queue`.
    fn notify(&mut self, queue: u16);
    /// Reads device configuration space (virtio-net: MAC, status); false
    /// where the transport has no config space.
    fn read_config(&self, offset: u16, buf: &mut [u8]) -> Result<bool>;
    /// Called before transmitting: a transport may refresh what the device
    /// can reach (vhost-user re-sends its memory table). Cheap when nothing
    /// changed.
    fn before_tx(&mut self) -> Result<()> {
        Ok(())
    }
    /// The device is still there (a vhost-user backend may close the socket).
    fn check_alive(&mut self) -> Result<()> {
        Ok(())
    }
    /// Called by the driver every few hundred polls: a transport whose
    /// device can go away and come back (vhost-user) checks its connection
    /// and tries to reconnect. PCI devices do not go away.
    fn poll_device(&mut self) -> DeviceEvent {
        DeviceEvent::Unchanged
    }
    /// Gives up the current device (setting its queues up again failed);
    /// [`Transport::poll_device`] tries again later.
    fn disconnect(&mut self) {}
    /// Wires an interrupt per queue of `queues` (vector i for the i-th) to
    /// an eventfd each, returned in the same order. Only legacy PCI over
    /// vfio can; the others refuse.
    fn enable_queue_interrupts(&mut self, _queues: &[u16]) -> Result<Vec<std::fs::File>> {
        Err(Error::Config(format!(
            "{}: receive interrupts are not available on this transport",
            self.describe()
        )))
    }
}
