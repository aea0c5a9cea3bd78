//! Fuzz target `vhost_user_reply`: the body is oxnet_driver::fuzzing::vhost_user_reply (so that
//! `cargo test -p oxnet-driver` replays fuzz/corpus/vhost_user_reply and
//! fuzz/regressions/vhost_user_reply). Run: cargo +nightly fuzz run vhost_user_reply -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_driver::fuzzing::vhost_user_reply(data));
