//! Fuzz target `http_session`: the body is oxnet_apps::http::fuzzing::session
//! (so that `cargo test -p oxnet-apps --lib http::fuzzing` replays
//! fuzz/corpus/http_session and fuzz/regressions/http_session).
//! Run: cargo +nightly fuzz run http_session -- -runs=N
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| oxnet_apps::http::fuzzing::session(data));
