//! oxnet-sim: a software Intel 82599 (ixgbe), written from the datasheet
//! (82599 10 GbE Controller Datasheet, rev. 3.3), so that the ixgbe driver
//! runs unmodified without the hardware.
//!
//! Read top-down:
//! * [`World`] (`world.rs`): named ports, wires between them, one lock;
//!   [`SimRegisters`] is what a driver gets — it implements
//!   [`oxnet_driver::RegisterAccess`].
//! * `ixgbe/mod.rs`: what a register access does; `ixgbe/regs.rs` the
//!   offsets; `ixgbe/rx.rs` and `ixgbe/tx.rs` the data paths;
//!   `ixgbe/stats.rs` the clear-on-read counters.
//! * `dma.rs`: DMA through oxnet-driver's IOVA map; `crc.rs`: the FCS.
//!
//! By default everything happens inside `read32`/`write32`, on the
//! driver's thread; a world can instead run its DMA engine on a thread of
//! its own ([`DmaMode`], `ixgbe/engine.rs`). An access the model does not
//! implement is recorded in [`World::faults`] (reads return
//! [`FAULT_VALUE`]), never silently accepted; so is a driver that breaks
//! the ordering protocol (`ixgbe/ordering.rs`) or frees memory the device
//! may still write.

mod crc;
mod dma;
mod ixgbe;
mod world;

pub use crc::crc32;
pub use world::{Access, DmaMode, SimRegisters, World, FAULT_VALUE};

use oxnet_driver::{Config, Device, Result};

/// Opens port `name` of the global [`World`] with the ixgbe driver: the
/// `sim:NAME` device spec.
pub fn open(name: &str, config: &Config) -> Result<Box<dyn Device>> {
    let device = oxnet_driver::ixgbe::IxgbeDevice::init(
        World::global().port(name),
        &format!("sim:{name}"),
        config,
        oxnet_driver::MemoryKind::Plain,
    )?;
    Ok(Box::new(device))
}

/// Makes `oxnet_driver::open("sim:NAME", ..)` open simulated ports.
pub fn install() {
    let open_fn: fn(&str, &Config) -> Result<Box<dyn Device>> = open;
    oxnet_driver::register_spec_opener("sim", open_fn);
}
