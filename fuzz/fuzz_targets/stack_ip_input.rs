//! Fuzz target `stack_ip_input`: the body is oxnet_stack::fuzzing::ip_input (so that
//! `cargo test -p oxnet-stack` replays fuzz/corpus/stack_ip_input and
//! fuzz/regressions/stack_ip_input). Run: cargo +nightly fuzz run stack_ip_input -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_stack::fuzzing::ip_input(data));
