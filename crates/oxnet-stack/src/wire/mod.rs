//! Wire formats: one typed view per header (smoltcp's style, STYLE.md).
