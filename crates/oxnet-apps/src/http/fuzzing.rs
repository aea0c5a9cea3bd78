//! The body of fuzz target `http_session` (fuzz/fuzz_targets/): a cache
//! with one stored object and an origin, driven by records of bytes as
//! clients and an origin would send them, with time passing; after every
//! record the bounds of [`Cache::check_bounds`] must hold and no packet
//! may fail to be made. `cargo test -p oxnet-apps --lib http::fuzzing`
//! replays fuzz/corpus/http_session and seeded random and mutated inputs.
//!
//! Records: a kind byte, then for kinds that carry bytes a length byte
//! and that many bytes (fewer at the end of the input):
//! - `(k & 0x7f) % 6 == 0`: Data from client connection `1 + (k >> 7)`;
//! - 1: that connection's Eof; 2: its Close, then a new Open of it;
//! - 3: Data from the origin on the latest fetch;
//! - 4: the origin's Eof (`k >> 7 == 0`) or Close with ECONNRESET;
//! - 5: time forward by the length byte × 100 ms, and the timer.

use super::cache::{Cache, Now, Out};
use super::object::Headers;
use super::store::Store;
use super::{Config, Limits};
use crate::stream::{self, StreamEvent};
use oxnet_driver::{MemoryKind, Mempool, Packet};
use oxnet_stack::wire::IpEndpoint;
use std::net::Ipv4Addr;

fn data(pool: &Mempool, id: u32, bytes: &[u8]) -> Option<Packet> {
    let mut p = pool.alloc().ok()?;
    p.set_len(bytes.len()).ok()?;
    p.copy_from_slice(bytes);
    Some(stream::data(p, id))
}

/// One session; panics if a bound breaks.
pub fn session(input: &[u8]) {
    let pool = Mempool::new("http-fuzz", 512, MemoryKind::Plain).expect("pool");
    let config = Config {
        limits: Limits {
            max_header_bytes: 512,
            max_headers: 8,
            max_body: 300,
        },
        origin: Some(IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), 80)),
        timeout_us: 2_000_000,
        idle_us: 10_000_000,
        max_object: 6000,
        max_pipeline: 3,
    };
    let mut cache = Cache::new(
        config,
        Store::new("http-fuzz-store", 8 * super::store::CHUNK, 64).expect("store"),
    );
    let stored = cache.make_object(
        b"stored body",
        &Headers {
            etag: Some("\"e\"".into()),
            ..Headers::default()
        },
    );
    cache.pin("/s", stored.expect("room"));
    let mut now = Now {
        us: 0,
        secs: 1_000_000_000,
    };
    let mut out = Out::default();
    for id in [1, 2] {
        cache.client_input(
            stream::control(&pool, id, StreamEvent::Open).expect("pool"),
            now,
            &pool,
            &mut out,
        );
    }
    let mut fetch = 0;
    let mut i = 0;
    while i < input.len() {
        let kind = input[i];
        let op = (kind & 0x7f) % 6;
        let len = input.get(i + 1).copied().unwrap_or(0) as usize;
        let carries = matches!(op, 0 | 3);
        let bytes = if carries {
            &input[(i + 2).min(input.len())..(i + 2 + len).min(input.len())]
        } else {
            &[][..]
        };
        i += match op {
            0 | 3 => 2 + bytes.len(),
            5 => 2,
            _ => 1,
        };
        let id = 1 + (kind >> 7) as u32;
        match op {
            0 if !bytes.is_empty() => cache.client_input(data(&pool, id, bytes).expect("pool"), now, &pool, &mut out),
            1 => cache.client_input(
                stream::control(&pool, id, StreamEvent::Eof).expect("pool"),
                now,
                &pool,
                &mut out,
            ),
            2 => {
                cache.client_input(stream::close(&pool, id, 0).expect("pool"), now, &pool, &mut out);
                cache.client_input(
                    stream::control(&pool, id, StreamEvent::Open).expect("pool"),
                    now,
                    &pool,
                    &mut out,
                );
            }
            3 if fetch != 0 && !bytes.is_empty() => {
                cache.origin_input(data(&pool, fetch, bytes).expect("pool"), now, &pool, &mut out)
            }
            4 if fetch != 0 => {
                let p = if kind >> 7 == 0 {
                    stream::control(&pool, fetch, StreamEvent::Eof)
                } else {
                    stream::close(&pool, fetch, libc::ECONNRESET)
                };
                cache.origin_input(p.expect("pool"), now, &pool, &mut out);
            }
            5 => {
                now.us += len as u64 * 100_000;
                now.secs = 1_000_000_000 + now.us / 1_000_000;
                cache.tick(now, &pool, &mut out);
            }
            _ => {}
        }
        // The origin's connection to answer: the latest one asked for.
        if let Some(p) = out.origin.iter().rev().find(|p| stream::event(p) == StreamEvent::Open) {
            fetch = stream::socket(p);
        }
        cache.check_bounds();
        assert_eq!(cache.stats.alloc_failures, 0, "the pool ran dry");
        out = Out::default();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_and_seeded_random_and_mutated_inputs_keep_the_bounds() {
        crate::fuzz_replay::replay("http_session", 0x2545_F491_4F6C_DD1D, 600, super::session);
    }
}
