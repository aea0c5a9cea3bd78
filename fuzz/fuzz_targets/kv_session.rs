//! Fuzz target `kv_session`: the body is oxnet_apps::kv::fuzzing::session
//! (so that `cargo test -p oxnet-apps --lib kv::fuzzing` replays
//! fuzz/corpus/kv_session and fuzz/regressions/kv_session): the
//! memcached-protocol server's text, meta and binary parsers on three
//! connections, with time passing.
//! Run: cargo +nightly fuzz run kv_session -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_apps::kv::fuzzing::session(data));
