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

use oxnet_driver::{Config, Device, Error, Result};

/// Opens a port of the global [`World`] with the ixgbe driver: the
/// `sim:NAME[,dma=thread|sync][,wire=PEER]` device spec ([`parse_spec`];
/// `wire=PEER` wires the port to port PEER first, so that a configuration
/// can build its own simulated cabling).
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    let (rest, wire) = split_wire(rest)?;
    let rest = rest.as_str();
    let (name, mode) = parse_spec(rest)?;
    if let Some(peer) = wire {
        World::global().connect(name, peer);
    }
    if let Some(mode) = mode {
        choose_global_dma_mode(rest, mode)?;
    }
    let device = oxnet_driver::ixgbe::IxgbeDevice::init(
        World::global().port(name),
        &format!("sim:{name}"),
        config,
        oxnet_driver::MemoryKind::Plain,
    )?;
    Ok(Box::new(device))
}

/// Takes the `wire=PEER` option out of a spec's options.
fn split_wire(rest: &str) -> Result<(String, Option<&str>)> {
    let mut kept = Vec::new();
    let mut wire = None;
    for (i, part) in rest.split(',').enumerate() {
        match part.strip_prefix("wire=") {
            Some(peer) if i > 0 => {
                if peer.is_empty() {
                    return Err(Error::BadSpec(format!("'sim:{rest}': wire= needs a port name")));
                }
                if wire.replace(peer).is_some() {
                    return Err(Error::BadSpec(format!("'sim:{rest}': wire= given twice")));
                }
            }
            _ => kept.push(part),
        }
    }
    Ok((kept.join(","), wire))
}

/// Splits what follows `sim:` into the port name and the DMA mode it asks
/// for: `NAME`, `NAME,dma=thread` ([`DmaMode::Thread`]) or `NAME,dma=sync`
/// ([`DmaMode::Synchronous`]).
pub fn parse_spec(rest: &str) -> Result<(&str, Option<DmaMode>)> {
    let mut parts = rest.split(',');
    let name = parts.next().unwrap_or_default();
    if name.is_empty() {
        return Err(Error::BadSpec(format!(
            "'sim:{rest}' has no port name: use sim:NAME or sim:NAME,dma=thread|sync"
        )));
    }
    let mut mode = None;
    for option in parts {
        let value = match option.split_once('=') {
            Some(("dma", value)) => value,
            _ => {
                return Err(Error::BadSpec(format!(
                    "'sim:{rest}': unknown option '{option}'; the options are dma=thread|sync and wire=PEER"
                )))
            }
        };
        let chosen = match value {
            "thread" => DmaMode::Thread,
            "sync" => DmaMode::Synchronous,
            _ => {
                return Err(Error::BadSpec(format!(
                    "'sim:{rest}': dma={value} is not a DMA mode; use dma=thread (the model's DMA \
                     engine on a thread of its own) or dma=sync (inside the register write)"
                )))
            }
        };
        if mode.replace(chosen).is_some() {
            return Err(Error::BadSpec(format!("'sim:{rest}': dma= given twice")));
        }
    }
    Ok((name, mode))
}

/// The DMA mode a `dma=` option chose for the global world, and the spec
/// that chose it.
static CHOSEN_MODE: std::sync::Mutex<Option<(DmaMode, String)>> = std::sync::Mutex::new(None);

/// Sets the global world's DMA mode for a `sim:` spec with `dma=`. The mode
/// is one for every port of the process (one engine serves them all): it
/// overrides `OXNET_SIM_DMA`, and a later spec asking for another mode is
/// an error naming the first.
fn choose_global_dma_mode(rest: &str, mode: DmaMode) -> Result<()> {
    let mut chosen = CHOSEN_MODE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((earlier, by)) = chosen.as_ref() {
        if *earlier != mode {
            return Err(Error::BadSpec(format!(
                "'sim:{rest}' asks for another DMA mode than 'sim:{by}': all sim ports of a process \
                 share one DMA engine; give every sim port the same dma= option (or none)"
            )));
        }
        return Ok(());
    }
    World::global().set_dma_mode(mode);
    *chosen = Some((mode, rest.to_string()));
    Ok(())
}

/// Makes `oxnet_driver::open("sim:NAME", ..)` open simulated ports.
pub fn install() {
    let open_fn: fn(&str, &Config) -> Result<Box<dyn Device>> = open;
    oxnet_driver::register_spec_opener("sim", open_fn);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_specs_name_a_port_and_optionally_a_dma_mode() {
        assert_eq!(parse_spec("a").unwrap(), ("a", None));
        assert_eq!(parse_spec("a,dma=thread").unwrap(), ("a", Some(DmaMode::Thread)));
        assert_eq!(
            parse_spec("port0,dma=sync").unwrap(),
            ("port0", Some(DmaMode::Synchronous))
        );
    }

    #[test]
    fn bad_sim_options_are_errors_that_name_the_accepted_values() {
        let message = |rest: &str| parse_spec(rest).unwrap_err().to_string();
        let bad = message("a,dma=threads");
        assert!(
            bad.contains("dma=threads is not a DMA mode") && bad.contains("dma=thread"),
            "{bad}"
        );
        assert!(message("a,dma=").contains("dma= is not a DMA mode"));
        assert!(message("a,speed=10g").contains("unknown option 'speed=10g'"));
        assert!(message("a,dma").contains("unknown option 'dma'"));
        assert!(message(",dma=thread").contains("no port name"));
        assert!(message("a,dma=sync,dma=thread").contains("dma= given twice"));
    }

    #[test]
    fn wire_option_is_taken_out_and_checked() {
        assert_eq!(split_wire("a,wire=b").unwrap(), ("a".to_string(), Some("b")));
        assert_eq!(
            split_wire("a,dma=sync,wire=b").unwrap(),
            ("a,dma=sync".to_string(), Some("b"))
        );
        assert_eq!(split_wire("a").unwrap(), ("a".to_string(), None));
        assert!(split_wire("a,wire=")
            .unwrap_err()
            .to_string()
            .contains("needs a port name"));
        assert!(split_wire("a,wire=b,wire=c").unwrap_err().to_string().contains("twice"));
    }
}
