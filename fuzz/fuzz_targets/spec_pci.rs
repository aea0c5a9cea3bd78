//! Fuzz target `spec_pci`: the body is oxnet_driver::fuzzing::spec_pci (so that
//! `cargo test -p oxnet-driver` replays fuzz/corpus/spec_pci and
//! fuzz/regressions/spec_pci). Run: cargo +nightly fuzz run spec_pci -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_driver::fuzzing::spec_pci(data));
