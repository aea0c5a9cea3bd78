//! The connection layer with stream packets pushed in directly.

use super::*;
use oxnet_driver::MemoryKind;

const NOW: u64 = 1_700_000_000;

fn setup() -> (KvServer, Mempool) {
    let server = KvServer::new(
        StoreConfig {
            memory_limit: 4 << 20,
            item_size_max: 1 << 20,
            memory_kind: MemoryKind::Plain,
        },
        ServerInfo::default(),
    )
    .unwrap();
    (server, Mempool::new("kv-conns-test", 4096, MemoryKind::Plain).unwrap())
}

fn data(pool: &Mempool, id: u32, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.copy_from_slice(bytes);
    stream::data(p, id)
}

/// Events out, as (id, letter, bytes).
fn drain(out: &mut PacketBatch) -> Vec<(u32, char, Vec<u8>)> {
    let n = out.len();
    out.drain_front(n)
        .map(|p| {
            let letter = match stream::event(&p) {
                StreamEvent::Data => 'D',
                StreamEvent::Open => 'O',
                StreamEvent::Eof => 'E',
                StreamEvent::Close => 'C',
            };
            let mut bytes = Vec::new();
            p.copy_chain_to(&mut bytes);
            (stream::socket(&p), letter, bytes)
        })
        .collect()
}

#[test]
fn a_get_reply_is_a_chain_with_the_value_attached_not_copied() {
    let (mut s, pool) = setup();
    let mut out = PacketBatch::default();
    s.input(
        stream::control(&pool, 1, StreamEvent::Open).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    let value = vec![b'v'; 5000];
    let mut req = b"set big 3 0 5000\r\n".to_vec();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    // Split across packets at awkward places.
    for chunk in req.chunks(1000) {
        s.input(data(&pool, 1, chunk), NOW, &pool, &mut out);
    }
    assert_eq!(drain(&mut out), vec![(1, 'D', b"STORED\r\n".to_vec())]);
    s.input(data(&pool, 1, b"get big\r\n"), NOW, &pool, &mut out);
    assert_eq!(out.len(), 1);
    let p = out.pop().unwrap();
    // Header, three value buffers (1920 + 1920 + 1160), trailer.
    let lens: Vec<(usize, bool)> = p.segments().map(|s| (s.len(), s.is_attached())).collect();
    assert_eq!(
        lens,
        vec![(18, false), (1920, true), (1920, true), (1160, true), (7, false)]
    );
    let mut bytes = Vec::new();
    p.copy_chain_to(&mut bytes);
    let mut want = b"VALUE big 3 5000\r\n".to_vec();
    want.extend_from_slice(&value);
    want.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(bytes, want);
    // Overwritten while the reply is "in flight": the reply keeps the old
    // bytes.
    let mut req = b"set big 0 0 5000\r\n".to_vec();
    req.extend(vec![b'w'; 5000]);
    req.extend_from_slice(b"\r\n");
    for chunk in req.chunks(1500) {
        s.input(data(&pool, 1, chunk), NOW, &pool, &mut out);
    }
    s.input(data(&pool, 1, b"delete big\r\nflush_all\r\n"), NOW, &pool, &mut out);
    let mut again = Vec::new();
    p.copy_chain_to(&mut again);
    assert_eq!(again, want);
    assert_eq!(s.counters.value_copies, 0);
}

#[test]
fn pipelined_requests_answer_in_order_and_quit_closes() {
    let (mut s, pool) = setup();
    let mut out = PacketBatch::default();
    s.input(
        stream::control(&pool, 7, StreamEvent::Open).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    s.input(
        data(&pool, 7, b"set a 0 0 1\r\n1\r\nget a\r\nincr a 2\r\nquit\r\nget a\r\n"),
        NOW,
        &pool,
        &mut out,
    );
    assert_eq!(
        drain(&mut out),
        vec![
            (7, 'D', b"STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\n3\r\n".to_vec()),
            (7, 'C', vec![]),
        ]
    );
    // Closing: later data is dropped; the Close from the owner removes it.
    s.input(data(&pool, 7, b"get a\r\n"), NOW, &pool, &mut out);
    assert!(out.is_empty());
    assert_eq!((s.connections(), s.info.curr_connections), (1, 1));
    s.input(stream::close(&pool, 7, 0).unwrap(), NOW, &pool, &mut out);
    assert_eq!(
        (s.connections(), s.info.curr_connections, s.info.total_connections),
        (0, 0, 1)
    );
    s.input(data(&pool, 7, b"get a\r\n"), NOW, &pool, &mut out);
    assert_eq!(s.counters.unknown, 1);
}

#[test]
fn eof_closes_after_the_replies_and_limits_hold() {
    let (mut s, pool) = setup();
    s.info.max_connections = 1;
    let mut out = PacketBatch::default();
    s.input(
        stream::control(&pool, 1, StreamEvent::Open).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    s.input(
        stream::control(&pool, 2, StreamEvent::Open).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    assert_eq!(drain(&mut out), vec![(2, 'C', vec![])], "beyond MAX_CONNECTIONS");
    assert_eq!(s.info.rejected_connections, 1);
    s.input(data(&pool, 1, b"version\r\nget"), NOW, &pool, &mut out);
    s.input(
        stream::control(&pool, 1, StreamEvent::Eof).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    let events = drain(&mut out);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1], (1, 'C', vec![]));
    s.input(stream::close(&pool, 1, 0).unwrap(), NOW, &pool, &mut out);
    // A line with no end, longer than memcached allows: closed.
    s.input(
        stream::control(&pool, 3, StreamEvent::Open).unwrap(),
        NOW,
        &pool,
        &mut out,
    );
    for _ in 0..3 {
        s.input(data(&pool, 3, &[b'x'; 1000]), NOW, &pool, &mut out);
    }
    assert_eq!(drain(&mut out), vec![(3, 'C', vec![])]);
    assert_eq!(s.info.protocol_errors, 1);
}
