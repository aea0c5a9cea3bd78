//! ICMP (RFC 792).

pub const MODULE: super::Module = super::Module { classes: &[], create };

fn create(_class: &str) -> Option<Box<dyn crate::element::Element>> {
    None
}
