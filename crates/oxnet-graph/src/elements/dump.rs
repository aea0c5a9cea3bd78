//! pcap files (placeholder, filled in below).

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module { classes: &[], create };

fn create(_class: &str) -> Option<Box<dyn crate::element::Element>> {
    None
}
