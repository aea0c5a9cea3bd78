//! Fuzz target `frame_offload`: the body is oxnet_driver::fuzzing::frame_offload (so that
//! `cargo test -p oxnet-driver` replays fuzz/corpus/frame_offload and
//! fuzz/regressions/frame_offload). Run: cargo +nightly fuzz run frame_offload -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_driver::fuzzing::frame_offload(data));
