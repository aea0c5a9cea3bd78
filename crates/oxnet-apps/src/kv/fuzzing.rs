//! The body of fuzz target `kv_session` (fuzz/fuzz_targets/): a key-value
//! server with 64 KiB of item memory and 4 KiB items, driven by records
//! of bytes as clients would send them (text, meta or binary, chosen by
//! each connection's first byte), with time passing; after every record
//! the bounds of [`KvServer::check_bounds`] must hold. `cargo test -p
//! oxnet-apps --lib kv::fuzzing` replays fuzz/corpus/kv_session and
//! seeded random and mutated inputs.
//!
//! Records: a kind byte, then for Data a length byte and that many bytes
//! (fewer at the end of the input):
//! - `k % 4 == 0`: Data from connection `1 + (k >> 2) % 3`;
//! - 1: that connection's Eof; 2: its Close, then a new Open of it;
//! - 3: time forward by `k >> 2` seconds.

use super::conns::KvServer;
use super::info::ServerInfo;
use super::store::StoreConfig;
use crate::stream::{self, StreamEvent};
use oxnet_driver::{MemoryKind, Mempool, PacketBatch};

/// One session; panics if a bound breaks.
pub fn session(input: &[u8]) {
    let pool = Mempool::new("kv-fuzz", 1024, MemoryKind::Plain).expect("pool");
    let config = StoreConfig {
        memory_limit: 64 << 10,
        item_size_max: 4096,
        memory_kind: MemoryKind::Plain,
    };
    let mut server = KvServer::new(config, ServerInfo::default()).expect("server");
    let mut now = 1_700_000_000u64;
    let mut out = PacketBatch::default();
    for id in 1..=3 {
        server.input(
            stream::control(&pool, id, StreamEvent::Open).expect("pool"),
            now,
            &pool,
            &mut out,
        );
    }
    let mut i = 0;
    while i < input.len() {
        let kind = input[i];
        let id = 1 + (kind as u32 >> 2) % 3;
        match kind % 4 {
            0 => {
                let len = input.get(i + 1).copied().unwrap_or(0) as usize;
                let bytes = &input[(i + 2).min(input.len())..(i + 2 + len).min(input.len())];
                i += 2 + len;
                if !bytes.is_empty() {
                    let mut p = pool.alloc().expect("pool");
                    p.set_len(bytes.len()).expect("room");
                    p.copy_from_slice(bytes);
                    server.input(stream::data(p, id), now, &pool, &mut out);
                }
            }
            1 => {
                i += 1;
                server.input(
                    stream::control(&pool, id, StreamEvent::Eof).expect("pool"),
                    now,
                    &pool,
                    &mut out,
                );
            }
            2 => {
                i += 1;
                server.input(stream::close(&pool, id, 0).expect("pool"), now, &pool, &mut out);
                server.input(
                    stream::control(&pool, id, StreamEvent::Open).expect("pool"),
                    now,
                    &pool,
                    &mut out,
                );
            }
            _ => {
                i += 1;
                now += (kind >> 2) as u64;
            }
        }
        // Replies sent hold value buffers until sent: count them, then
        // let them go as a peer's acknowledgement would.
        let in_flight: usize = out
            .iter()
            .map(|p| p.segments().filter(|s| s.is_attached()).count())
            .sum();
        server.check_bounds(in_flight);
        out.clear();
        server.check_bounds(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_and_seeded_random_and_mutated_inputs_keep_the_bounds() {
        crate::fuzz_replay::replay("kv_session", 0x9E37_79B9_7F4A_7C15, 600, super::session);
    }
}
