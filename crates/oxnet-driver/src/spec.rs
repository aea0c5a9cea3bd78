//! Device spec strings and [`open`], which picks the driver.
//!
//! | spec | device |
//! |---|---|
//! | `0000:03:00.0` (or `03:00.0`) | a PCI device, driver chosen by vendor/device id |
//! | `sim:NAME` | a port of the software 82599 (`oxnet-sim`) |
//! | `vhost-user:PATH` | virtio-net over the vhost-user socket at PATH (a back-end such as DPDK's vhost PMD, Open vSwitch's `dpdkvhostuser` port) |
//! | `vhost-user:PATH,server` | the same, but oxnet listens at PATH and the back-end connects (Open vSwitch's `dpdkvhostuserclient` port) |
//! | `tap:NAME` | a Linux TAP device ([`crate::tap`]) |
//! | `af_packet:IF` | any Linux interface through AF_PACKET rings ([`crate::af_packet`]) |
//! | `af_xdp:IF[:QUEUE]` | a queue of a Linux interface through an XDP socket ([`crate::af_xdp`]) |
//! | `memif:PATH[,role=client\|server][,id=N]` | shared memory with another process: VPP, DPDK, oxnet ([`crate::memif`]) |

use crate::device::{Config, Device};
use crate::error::{Error, Result};
use crate::pci::PciAddress;
use std::sync::RwLock;

/// The accepted forms, for error messages.
pub const ACCEPTED_FORMS: &str = "a PCI address like 0000:03:00.0, sim:NAME (a simulated 82599 port), \
                                   vhost-user:PATH[,server] (the Unix socket of a vhost-user back-end; \
                                   with ,server oxnet listens and the back-end connects), tap:NAME, \
                                   af_packet:IF, af_xdp:IF[:QUEUE] or memif:PATH[,role=client|server][,id=N]";

/// Prefixes reserved for drivers that do not exist yet.
const FUTURE_PREFIXES: &[&str] = &[];

/// Prefix of specs for the vhost-user transport of the virtio driver.
pub const VHOST_USER_PREFIX: &str = "vhost-user";

/// A parsed spec string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A PCI device.
    Pci(PciAddress),
    /// `prefix:rest` handled by a registered opener (e.g. `sim`).
    Other { prefix: String, rest: String },
}

impl Spec {
    /// Parses a spec string; a malformed one gets an error naming the
    /// accepted forms.
    pub fn parse(spec: &str) -> Result<Spec> {
        if let Some((prefix, rest)) = spec.split_once(':') {
            let is_word = !prefix.is_empty() && prefix.chars().all(|c| c.is_ascii_alphabetic() || c == '-' || c == '_');
            if is_word && !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
                if rest.is_empty() {
                    return Err(Error::BadSpec(format!(
                        "device spec '{spec}' has an empty name after '{prefix}:'"
                    )));
                }
                if FUTURE_PREFIXES.contains(&prefix) {
                    return Err(Error::BadSpec(format!(
                        "device spec '{spec}': the {prefix} driver is not part of this version of oxnet; \
                         use {ACCEPTED_FORMS}"
                    )));
                }
                return Ok(Spec::Other {
                    prefix: prefix.to_string(),
                    rest: rest.to_string(),
                });
            }
        }
        match PciAddress::parse(spec) {
            Some(address) => Ok(Spec::Pci(address)),
            None => Err(Error::BadSpec(format!(
                "'{spec}' is not a device spec: use {ACCEPTED_FORMS}"
            ))),
        }
    }
}

/// Opens a device from a spec that is not a PCI address.
pub type SpecOpener = fn(&str, &Config) -> Result<Box<dyn Device>>;

static OPENERS: RwLock<Vec<(String, SpecOpener)>> = RwLock::new(Vec::new());

/// Lets another crate handle `prefix:...` specs (oxnet-sim registers `sim`).
pub fn register_spec_opener(prefix: &str, opener: SpecOpener) {
    let mut openers = OPENERS.write().unwrap_or_else(|e| e.into_inner());
    openers.retain(|(p, _)| p != prefix);
    openers.push((prefix.to_string(), opener));
}

/// Opens the device named by `spec` with `config`.
pub fn open(spec: &str, config: &Config) -> Result<Box<dyn Device>> {
    config.validate()?;
    match Spec::parse(spec)? {
        Spec::Pci(address) => crate::pci::open(&address, config),
        Spec::Other { prefix, rest } if prefix == VHOST_USER_PREFIX => crate::virtio::vhost_user::open(&rest, config),
        Spec::Other { prefix, rest } if prefix == "tap" => crate::tap::open(&rest, config),
        Spec::Other { prefix, rest } if prefix == "af_packet" => crate::af_packet::open(&rest, config),
        Spec::Other { prefix, rest } if prefix == "af_xdp" => crate::af_xdp::open(&rest, config),
        Spec::Other { prefix, rest } if prefix == "memif" => crate::memif::open(&rest, config),
        Spec::Other { prefix, rest } => {
            let opener = {
                let openers = OPENERS.read().unwrap_or_else(|e| e.into_inner());
                openers.iter().find(|(p, _)| *p == prefix).map(|(_, f)| *f)
            };
            match opener {
                Some(open) => open(&rest, config),
                None if prefix == "sim" => Err(Error::BadSpec(format!(
                    "'{spec}': simulated devices need oxnet-sim (call oxnet_sim::install() first)"
                ))),
                None => Err(Error::BadSpec(format!(
                    "unknown device type '{prefix}' in '{spec}': use {ACCEPTED_FORMS}"
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pci_and_prefixed_specs() {
        assert_eq!(
            Spec::parse("0000:03:00.0").unwrap(),
            Spec::Pci(PciAddress::parse("0000:03:00.0").unwrap())
        );
        assert_eq!(
            Spec::parse("03:00.1").unwrap(),
            Spec::Pci(PciAddress::parse("0000:03:00.1").unwrap())
        );
        assert_eq!(
            Spec::parse("sim:a").unwrap(),
            Spec::Other {
                prefix: "sim".into(),
                rest: "a".into()
            }
        );
    }

    #[test]
    fn malformed_specs_name_the_accepted_forms() {
        for bad in ["", "eth0", "0000:03:00", "0000:03:00.8", "sim:", "0000:0g:00.0"] {
            let err = Spec::parse(bad).unwrap_err().to_string();
            assert!(err.contains("sim:NAME") || err.contains("empty name"), "{bad}: {err}");
        }
        let err = Spec::parse("nosuch:x")
            .map(|_| ())
            .and_then(|_| open("nosuch:x", &Config::default()).map(|_| ()));
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("unknown device type") && err.contains("af_xdp:IF"),
            "{err}"
        );
    }

    #[test]
    fn vhost_user_specs_go_to_the_vhost_user_transport() {
        assert_eq!(
            Spec::parse("vhost-user:/tmp/a:b.sock").unwrap(),
            Spec::Other {
                prefix: "vhost-user".into(),
                rest: "/tmp/a:b.sock".into()
            }
        );
        let err = open("vhost-user:/nonexistent/oxnet.sock", &Config::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("vhost-user:/nonexistent/oxnet.sock: cannot connect"),
            "{err}"
        );
    }

    #[test]
    fn unknown_prefix_is_an_error() {
        let err = open("bogus:x", &Config::default()).err().unwrap().to_string();
        assert!(err.contains("unknown device type 'bogus'"), "{err}");
    }
}
