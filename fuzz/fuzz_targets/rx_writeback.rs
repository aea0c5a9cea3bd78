//! Fuzz target `rx_writeback`: the body is oxnet_driver::fuzzing::rx_writeback (so that
//! `cargo test -p oxnet-driver` replays fuzz/corpus/rx_writeback and
//! fuzz/regressions/rx_writeback). Run: cargo +nightly fuzz run rx_writeback -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_driver::fuzzing::rx_writeback(data));
