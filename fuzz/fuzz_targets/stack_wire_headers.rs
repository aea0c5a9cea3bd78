//! Fuzz target `stack_wire_headers`: the body is oxnet_stack::fuzzing::wire_headers (so that
//! `cargo test -p oxnet-stack` replays fuzz/corpus/stack_wire_headers and
//! fuzz/regressions/stack_wire_headers). Run: cargo +nightly fuzz run stack_wire_headers -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_stack::fuzzing::wire_headers(data));
