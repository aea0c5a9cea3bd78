//! Fuzz target `stack_tcp_input`: the body is oxnet_stack::fuzzing::tcp_input (so that
//! `cargo test -p oxnet-stack` replays fuzz/corpus/stack_tcp_input and
//! fuzz/regressions/stack_tcp_input). Run: cargo +nightly fuzz run stack_tcp_input -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_stack::fuzzing::tcp_input(data));
