//! In-process tests of the cache: stream packets in (as TCPEpollServer
//! and TCPEpollClient would push them), exact bytes out, the clock
//! given by the test.

use super::cache::{Cache, Now, Out};
use super::object::Headers;
use super::store::Store;
use super::Config;
use crate::stream::{self, StreamEvent};
use oxnet_driver::{MemoryKind, Mempool, Packet};
use oxnet_stack::wire::IpEndpoint;
use std::net::Ipv4Addr;

/// Sun, 06 Nov 1994 08:49:37 GMT.
const T0: u64 = 784111777;
const DATE: &str = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
/// Last-Modified of the test object: Sat, 05 Nov 1994 08:49:37 GMT.
const LM: u64 = T0 - 86400;
const C: u32 = 5;
const ORIGIN_PORT: u16 = 8080;

fn pool() -> Mempool {
    Mempool::new("http-test", 512, MemoryKind::Plain).unwrap()
}

fn at(secs: u64) -> Now {
    Now {
        us: (secs - T0) * 1_000_000,
        secs,
    }
}

fn config(origin: bool) -> Config {
    Config {
        origin: origin.then(|| IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), ORIGIN_PORT)),
        timeout_us: 5_000_000,
        ..Config::default()
    }
}

/// A cache with `/a.txt` ("hello\n") pinned, as DIR would load it.
fn cache_with(config: Config, memory: usize) -> Cache {
    let mut c = Cache::new(config, Store::new("http-test-store", memory, 256).unwrap());
    let headers = Headers {
        content_type: Some("text/plain".into()),
        last_modified: Some(LM),
        etag: Some("\"abc-6\"".into()),
        ..Headers::default()
    };
    let o = c.make_object(b"hello\n", &headers).unwrap();
    c.pin("/a.txt", o);
    c
}

fn cache() -> Cache {
    cache_with(config(false), 1 << 20)
}

fn data(pool: &Mempool, id: u32, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.copy_from_slice(bytes);
    stream::data(p, id)
}

fn control(pool: &Mempool, id: u32, e: StreamEvent) -> Packet {
    stream::control(pool, id, e).unwrap()
}

/// What came out for `id`: its bytes, and its events (O, D, E, C) with
/// repeated D folded.
fn seen(batch: &oxnet_driver::PacketBatch, id: u32) -> (String, String) {
    let (mut bytes, mut events) = (Vec::new(), String::new());
    for p in batch.iter().filter(|p| stream::socket(p) == id) {
        let e = match stream::event(p) {
            StreamEvent::Open => 'O',
            StreamEvent::Data => 'D',
            StreamEvent::Eof => 'E',
            StreamEvent::Close => 'C',
        };
        if e == 'D' {
            p.copy_chain_to(&mut bytes);
        }
        if !(e == 'D' && events.ends_with('D')) {
            events.push(e);
        }
    }
    (String::from_utf8(bytes).unwrap(), events)
}

/// Opens connection C and sends each of `pieces` as one packet at `now`.
fn request(c: &mut Cache, pool: &Mempool, now: Now, pieces: &[&[u8]]) -> Out {
    let mut out = Out::default();
    c.client_input(control(pool, C, StreamEvent::Open), now, pool, &mut out);
    for piece in pieces {
        c.client_input(data(pool, C, piece), now, pool, &mut out);
    }
    out
}

fn a_txt(conn: &str, extra: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: oxnet\r\n{DATE}{extra}Content-Type: text/plain\r\nLast-Modified: Sat, 05 Nov 1994 08:49:37 GMT\r\nETag: \"abc-6\"\r\nContent-Length: 6\r\nConnection: {conn}\r\n\r\n"
    )
}

fn error(status: &str, conn: &str, extra: &str) -> String {
    let body = format!("{status}\n");
    format!(
        "HTTP/1.1 {status}\r\nServer: oxnet\r\n{DATE}{extra}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn a_get_is_answered_with_exact_status_line_headers_and_body() {
    let (pool, mut c) = (pool(), cache());
    let out = request(&mut c, &pool, at(T0), &[b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"]);
    assert_eq!(seen(&out.client, C), (a_txt("keep-alive", "") + "hello\n", "D".into()));
    assert_eq!((c.stats.requests, c.stats.hits, c.stats.misses), (1, 1, 0));
}

#[test]
fn head_gets_the_head_only_and_http10_closes_after_it() {
    let (pool, mut c) = (pool(), cache());
    let out = request(&mut c, &pool, at(T0), &[b"HEAD /a.txt HTTP/1.0\r\n\r\n"]);
    assert_eq!(
        seen(&out.client, C),
        (a_txt("close", ""), "DE".into()),
        "the head, then our end"
    );
    let mut out = Out::default();
    c.client_input(data(&pool, C, b"GET /a.txt HTTP/1.0\r\n\r\n"), at(T0), &pool, &mut out);
    assert!(out.client.is_empty(), "nothing is read after the end");
}

#[test]
fn http10_keep_alive_persists() {
    let (pool, mut c) = (pool(), cache());
    let out = request(
        &mut c,
        &pool,
        at(T0),
        &[b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"],
    );
    assert_eq!(seen(&out.client, C), (a_txt("keep-alive", "") + "hello\n", "D".into()));
}

#[test]
fn conditions_give_304_with_the_validators() {
    let (pool, mut c) = (pool(), cache());
    let not_modified = format!(
        "HTTP/1.1 304 Not Modified\r\nServer: oxnet\r\n{DATE}ETag: \"abc-6\"\r\nConnection: keep-alive\r\n\r\n"
    );
    for (req, expect) in [
        ("If-None-Match: \"zz\", W/\"abc-6\"\r\n", not_modified.clone()),
        ("If-None-Match: *\r\n", not_modified.clone()),
        ("If-None-Match: \"zz\"\r\n", a_txt("keep-alive", "") + "hello\n"),
        (
            "If-Modified-Since: Sat, 05 Nov 1994 08:49:37 GMT\r\n",
            not_modified.clone(),
        ),
        (
            "If-Modified-Since: Sat, 05 Nov 1994 08:49:36 GMT\r\n",
            a_txt("keep-alive", "") + "hello\n",
        ),
        // RFC 9110 §13.2.2: If-Modified-Since is ignored with If-None-Match.
        (
            "If-None-Match: \"zz\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
            a_txt("keep-alive", "") + "hello\n",
        ),
    ] {
        let raw = format!("GET /a.txt HTTP/1.1\r\nHost: x\r\n{req}\r\n");
        let out = request(&mut c, &pool, at(T0), &[raw.as_bytes()]);
        assert_eq!(seen(&out.client, C).0, expect, "{req}");
    }
    assert_eq!(c.stats.statuses.get(&304), Some(&3));
}

#[test]
fn pipelined_requests_are_answered_in_order_and_the_last_closes() {
    let (pool, mut c) = (pool(), cache());
    let out = request(
        &mut c,
        &pool,
        at(T0),
        &[b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"],
    );
    let expect = a_txt("keep-alive", "") + "hello\n" + &error("404 Not Found", "keep-alive", "") + &a_txt("close", "");
    assert_eq!(
        seen(&out.client, C),
        (expect, "DE".into()),
        "nothing after Connection: close"
    );
    assert_eq!(c.stats.requests, 3);
}

#[test]
fn a_request_split_across_packets_byte_by_byte() {
    let (pool, mut c) = (pool(), cache());
    let raw = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    let pieces: Vec<&[u8]> = raw.chunks(1).collect();
    let out = request(&mut c, &pool, at(T0), &pieces);
    assert_eq!(seen(&out.client, C), (a_txt("keep-alive", "") + "hello\n", "D".into()));
}

#[test]
fn a_directory_target_serves_its_index() {
    let (pool, mut c) = (pool(), cache());
    let o = c.make_object(b"<p>", &Headers::default()).unwrap();
    c.pin("/d/index.html", o);
    let out = request(&mut c, &pool, at(T0), &[b"GET /d/?q HTTP/1.1\r\nHost: x\r\n\r\n"]);
    assert!(seen(&out.client, C)
        .0
        .ends_with("Content-Length: 3\r\nConnection: keep-alive\r\n\r\n<p>"));
}

#[test]
fn malformed_huge_and_unsupported_requests_get_their_status() {
    let cases: &[(&[u8], &str, &str, &str)] = &[
        (b"GET /a.txt HTTP/1.1\r\nHost x\r\n\r\n", "400 Bad Request", "close", ""),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            "400 Bad Request",
            "close",
            "",
        ),
        (b"GET /a.txt HTTP/1.1\r\n\r\n", "400 Bad Request", "close", ""),
        (
            b"DELETE /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
            "405 Method Not Allowed",
            "keep-alive",
            "Allow: GET, HEAD\r\n",
        ),
        (
            b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n",
            "501 Not Implemented",
            "keep-alive",
            "",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            "501 Not Implemented",
            "close",
            "",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n",
            "413 Content Too Large",
            "close",
            "",
        ),
    ];
    for &(raw, status, conn, extra) in cases {
        let (pool, mut c) = (pool(), cache());
        let out = request(&mut c, &pool, at(T0), &[raw]);
        let events = if conn == "close" { "DE" } else { "D" };
        assert_eq!(
            seen(&out.client, C),
            (error(status, conn, extra), events.into()),
            "{}",
            String::from_utf8_lossy(raw)
        );
        assert_eq!(c.stats.errors(), 1);
    }
}

#[test]
fn a_refused_post_body_is_skipped_and_the_connection_goes_on() {
    let (pool, mut c) = (pool(), cache());
    let out = request(
        &mut c,
        &pool,
        at(T0),
        &[
            b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
            b"cdeGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        ],
    );
    let expect =
        error("405 Method Not Allowed", "keep-alive", "Allow: GET, HEAD\r\n") + &a_txt("keep-alive", "") + "hello\n";
    assert_eq!(seen(&out.client, C).0, expect);
}

#[test]
fn a_huge_header_gets_431_before_it_ends() {
    let (pool, mut c) = (pool(), cache());
    let mut out = request(&mut c, &pool, at(T0), &[b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: "]);
    let filler = vec![b'a'; 1000];
    for _ in 0..9 {
        c.client_input(data(&pool, C, &filler), at(T0), &pool, &mut out);
    }
    assert_eq!(
        seen(&out.client, C),
        (error("431 Request Header Fields Too Large", "close", ""), "DE".into())
    );
    // The peer's end after ours: the server closes; its Close forgets it.
    c.client_input(control(&pool, C, StreamEvent::Close), at(T0), &pool, &mut out);
    assert_eq!(c.connections(), 0);
}

#[test]
fn a_slowloris_client_gets_408_after_the_timeout_and_is_closed() {
    let (pool, mut c) = (pool(), cache());
    let mut out = request(&mut c, &pool, at(T0), &[b"GET /a.txt HTTP/1.1\r\n"]);
    // A byte a second keeps the connection busy but not the head's clock.
    for s in 1..=5 {
        c.client_input(data(&pool, C, b"X"), at(T0 + s), &pool, &mut out);
        c.tick(at(T0 + s), &pool, &mut out);
    }
    assert!(out.client.is_empty(), "5 s is not more than TIMEOUT");
    c.tick(at(T0 + 6), &pool, &mut out);
    let date = "Date: Sun, 06 Nov 1994 08:49:43 GMT\r\n";
    let body = "408 Request Timeout\n";
    let expect = format!("HTTP/1.1 408 Request Timeout\r\nServer: oxnet\r\n{date}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    assert_eq!(seen(&out.client, C), (expect, "DE".into()));
    assert_eq!(c.stats.timeouts, 1);
    // It does not end its side either: closed after another TIMEOUT.
    let mut out = Out::default();
    c.tick(at(T0 + 12), &pool, &mut out);
    assert_eq!(seen(&out.client, C).1, "C");
    assert_eq!(c.connections(), 0);
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let (pool, mut c) = (pool(), cache());
    c.config.idle_us = 30_000_000;
    let mut out = request(&mut c, &pool, at(T0), &[b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"]);
    c.tick(at(T0 + 30), &pool, &mut out);
    assert_eq!(seen(&out.client, C).1, "D");
    c.tick(at(T0 + 31), &pool, &mut out);
    assert_eq!(seen(&out.client, C).1, "DC");
    assert_eq!(c.stats.timeouts, 1);
}

/// The origin side: what the cache pushed to the client element for
/// fetch `fid`: its events and bytes.
fn origin_seen(out: &Out, fid: u32) -> (String, String) {
    seen(&out.origin, fid)
}

fn origin_reply(c: &mut Cache, pool: &Mempool, now: Now, fid: u32, pieces: &[&[u8]]) -> Out {
    let mut out = Out::default();
    c.origin_input(control(pool, fid, StreamEvent::Open), now, pool, &mut out);
    for piece in pieces {
        c.origin_input(data(pool, fid, piece), now, pool, &mut out);
    }
    out
}

#[test]
fn a_miss_is_fetched_from_the_origin_stored_and_then_a_hit() {
    let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
    let out = request(&mut c, &pool, at(T0), &[b"GET /o.html HTTP/1.1\r\nHost: www\r\n\r\n"]);
    assert!(out.client.is_empty(), "the answer waits for the origin");
    let open = out.origin.iter().next().unwrap();
    assert_eq!(
        stream::parse_open_request(open),
        Some(IpEndpoint::new(Ipv4Addr::new(10, 0, 0, 1), ORIGIN_PORT))
    );
    let fid = stream::socket(open);
    assert_eq!(
        origin_seen(&out, fid),
        (
            "GET /o.html HTTP/1.0\r\nHost: www\r\nUser-Agent: oxnet-http-cache\r\nConnection: close\r\n\r\n".into(),
            "OD".into()
        )
    );
    let out = origin_reply(
        &mut c,
        &pool,
        at(T0),
        fid,
        &[b"HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:35 GMT\r\nCache-Control: max-age=60\r\nETag: \"o1\"\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\n<h", b"1>"],
    );
    let expect = format!("HTTP/1.1 200 OK\r\nServer: oxnet\r\n{DATE}Age: 2\r\nContent-Type: text/html\r\nETag: \"o1\"\r\nCache-Control: max-age=60\r\nContent-Length: 4\r\nConnection: keep-alive\r\n\r\n<h1>");
    assert_eq!(seen(&out.client, C), (expect, "D".into()));
    assert_eq!(
        origin_seen(&out, fid).1,
        "C",
        "the origin's connection is ended once the body is whole"
    );
    assert_eq!((c.stats.misses, c.stats.fetches, c.store.len()), (1, 1, 2));
    // Ten seconds later: from memory, twelve seconds old.
    let mut out = Out::default();
    c.client_input(
        data(&pool, C, b"GET /o.html HTTP/1.1\r\nHost: www\r\n\r\n"),
        at(T0 + 10),
        &pool,
        &mut out,
    );
    assert!(out.origin.is_empty());
    assert!(seen(&out.client, C).0.contains("\r\nAge: 12\r\n"));
    assert_eq!(c.stats.hits, 1);
}

#[test]
fn a_stale_object_is_revalidated_and_a_304_from_the_origin_refreshes_it() {
    let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
    let out = request(&mut c, &pool, at(T0), &[b"GET /o HTTP/1.1\r\nHost: www\r\n\r\n"]);
    let fid = stream::socket(out.origin.iter().next().unwrap());
    origin_reply(
        &mut c,
        &pool,
        at(T0),
        fid,
        &[b"HTTP/1.1 200 OK\r\nCache-Control: max-age=5\r\nETag: \"v1\"\r\nContent-Length: 2\r\n\r\nok"],
    );
    // Stale at T0 + 5: a conditional request with the stored ETag.
    let mut out = Out::default();
    c.client_input(
        data(&pool, C, b"GET /o HTTP/1.1\r\nHost: www\r\n\r\n"),
        at(T0 + 5),
        &pool,
        &mut out,
    );
    let fid = stream::socket(out.origin.iter().next().unwrap());
    assert!(origin_seen(&out, fid).0.contains("\r\nIf-None-Match: \"v1\"\r\n"));
    let mut out = origin_reply(
        &mut c,
        &pool,
        at(T0 + 5),
        fid,
        &[b"HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=5\r\n\r\n"],
    );
    assert!(seen(&out.client, C)
        .0
        .ends_with("Content-Length: 2\r\nConnection: keep-alive\r\n\r\nok"));
    // Fresh again: the next request is a hit.
    c.client_input(
        data(&pool, C, b"GET /o HTTP/1.1\r\nHost: www\r\n\r\n"),
        at(T0 + 9),
        &pool,
        &mut out,
    );
    assert_eq!((c.stats.revalidations, c.stats.hits, c.stats.fetches), (1, 1, 2));
}

#[test]
fn no_store_and_private_responses_are_passed_on_but_not_kept() {
    for cc in ["no-store", "private, max-age=60"] {
        let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
        let out = request(&mut c, &pool, at(T0), &[b"GET /p HTTP/1.1\r\nHost: www\r\n\r\n"]);
        let fid = stream::socket(out.origin.iter().next().unwrap());
        let reply = format!("HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\nContent-Length: 2\r\n\r\nok");
        let out = origin_reply(&mut c, &pool, at(T0), fid, &[reply.as_bytes()]);
        assert!(seen(&out.client, C).0.ends_with("\r\n\r\nok"));
        assert_eq!(c.store.len(), 1, "{cc}: only /a.txt");
    }
}

#[test]
fn pipelined_requests_wait_behind_a_miss_and_concurrent_misses_share_one_fetch() {
    let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
    let mut out = request(
        &mut c,
        &pool,
        at(T0),
        &[b"GET /m HTTP/1.1\r\nHost: www\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: www\r\n\r\n"],
    );
    c.client_input(control(&pool, C + 1, StreamEvent::Open), at(T0), &pool, &mut out);
    c.client_input(data(&pool, C + 1, b"GET /m HTTP/1.0\r\n\r\n"), at(T0), &pool, &mut out);
    assert!(out.client.is_empty(), "the hit waits behind the miss");
    assert_eq!(out.origin.len(), 2, "one fetch: Open and its request");
    let fid = stream::socket(out.origin.iter().next().unwrap());
    let out = origin_reply(
        &mut c,
        &pool,
        at(T0),
        fid,
        &[b"HTTP/1.0 200 OK\r\nETag: \"m\"\r\n\r\nmm"],
    );
    // Without Content-Length the body ends with the origin's end.
    assert!(out.client.is_empty());
    let mut out = Out::default();
    c.origin_input(control(&pool, fid, StreamEvent::Eof), at(T0), &pool, &mut out);
    let (bytes, events) = seen(&out.client, C);
    assert!(
        bytes.contains("ETag: \"m\"\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nmmHTTP/1.1 200 OK"),
        "{bytes}"
    );
    assert!(bytes.ends_with("hello\n"));
    assert_eq!(events, "D");
    assert_eq!(seen(&out.client, C + 1).1, "DE", "HTTP/1.0: closed after it");
}

#[test]
fn an_origin_that_refuses_gives_502() {
    let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
    let out = request(&mut c, &pool, at(T0), &[b"GET /x HTTP/1.1\r\nHost: www\r\n\r\n"]);
    let fid = stream::socket(out.origin.iter().next().unwrap());
    let mut out = Out::default();
    c.origin_input(
        stream::close(&pool, fid, libc::ECONNREFUSED).unwrap(),
        at(T0),
        &pool,
        &mut out,
    );
    assert_eq!(seen(&out.client, C).0, error("502 Bad Gateway", "keep-alive", ""));
    assert_eq!((c.stats.origin_errors, c.fetching()), (1, 0));
}

#[test]
fn large_bodies_leave_as_attached_segments_of_the_stored_buffers() {
    let (pool, mut c) = (pool(), cache());
    let body: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    let o = c.make_object(&body, &Headers::default()).unwrap();
    c.pin("/big", o);
    let out = request(&mut c, &pool, at(T0), &[b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"]);
    let attached: Vec<bool> = out.client.iter().map(|p| p.is_attached()).collect();
    assert_eq!(
        attached,
        [false, true, true, true],
        "a head, then 2048 + 2048 + 904 bytes of the store"
    );
    // Each covers its whole stored buffer: TCPEpollServer gives such a
    // segment to the stack as another handle to it (no copy).
    for p in out.client.iter().skip(1) {
        let (buffer, offset) = oxnet_driver::SharedBuffer::of_attached(p).unwrap();
        assert_eq!((offset, buffer.len()), (0, p.len()));
    }
    let mut bytes = Vec::new();
    for p in out.client.iter() {
        p.copy_chain_to(&mut bytes);
    }
    assert!(bytes.ends_with(&body));
    assert_eq!(c.stats.copies, 0);
}

#[test]
fn objects_from_the_origin_are_evicted_least_recently_used() {
    // Three buffers: /a.txt (pinned) takes one, each 2-byte object one.
    let (pool, mut c) = (pool(), cache_with(config(true), 3 * super::store::CHUNK));
    let fetch = |c: &mut Cache, path: &str, secs: u64| {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: www\r\n\r\n");
        let out = request(c, &pool, at(secs), &[raw.as_bytes()]);
        if let Some(open) = out.origin.iter().next() {
            let fid = stream::socket(open);
            origin_reply(
                c,
                &pool,
                at(secs),
                fid,
                &[b"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 2\r\n\r\nok"],
            );
        }
    };
    fetch(&mut c, "/1", T0);
    fetch(&mut c, "/2", T0);
    fetch(&mut c, "/1", T0 + 1); // a hit: /2 is now the least recently used
    fetch(&mut c, "/3", T0 + 2);
    assert_eq!((c.stats.hits, c.store.evictions, c.store.len()), (1, 1, 3));
    fetch(&mut c, "/1", T0 + 3);
    assert_eq!(c.stats.hits, 2, "/1 stayed");
    assert!(c.store.peek("/2").is_none());
}

#[test]
fn dir_loads_files_with_nginx_style_validators() {
    let root = std::env::temp_dir().join(format!("oxnet-http-dir-{}", std::process::id()));
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("index.html"), b"<html>").unwrap();
    std::fs::write(root.join("sub/x.css"), b"a{}").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(root.join("sub/x.css"))
        .unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(LM))
        .unwrap();
    let mut c = Cache::new(config(false), Store::new("http-test-dir", 1 << 20, 16).unwrap());
    assert_eq!(super::dir::load(&mut c, &root).unwrap(), 2);
    std::fs::remove_dir_all(&root).unwrap();
    let pool = pool();
    let out = request(&mut c, &pool, at(T0), &[b"GET /sub/x.css HTTP/1.1\r\nHost: x\r\n\r\n"]);
    let expect = format!(
        "HTTP/1.1 200 OK\r\nServer: oxnet\r\n{DATE}Content-Type: text/css\r\nLast-Modified: Sat, 05 Nov 1994 08:49:37 GMT\r\nETag: \"{LM:x}-3\"\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\na{{}}"
    );
    assert_eq!(seen(&out.client, C).0, expect);
    assert!(c.store.peek("/index.html").is_some());
}

#[test]
fn a_client_no_cache_or_max_age_revalidates_a_fresh_object() {
    let (pool, mut c) = (pool(), cache_with(config(true), 1 << 20));
    let out = request(&mut c, &pool, at(T0), &[b"GET /f HTTP/1.1\r\nHost: www\r\n\r\n"]);
    let fid = stream::socket(out.origin.iter().next().unwrap());
    origin_reply(
        &mut c,
        &pool,
        at(T0),
        fid,
        &[b"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nLast-Modified: Sat, 05 Nov 1994 08:49:37 GMT\r\nContent-Length: 1\r\n\r\nf"],
    );
    // A validation makes the object new again (its age restarts).
    for (req, secs, revalidations) in [
        ("Cache-Control: max-age=600\r\n", 10, 0),
        ("Cache-Control: no-cache\r\n", 10, 1),
        ("Pragma: no-cache\r\n", 10, 2),
        ("Cache-Control: max-age=9\r\n", 19, 2),
        ("Cache-Control: max-age=9\r\n", 20, 3),
    ] {
        let raw = format!("GET /f HTTP/1.1\r\nHost: www\r\n{req}\r\n");
        let mut out = Out::default();
        c.client_input(data(&pool, C, raw.as_bytes()), at(T0 + secs), &pool, &mut out);
        assert_eq!(c.stats.revalidations, revalidations, "{req}");
        if let Some(open) = out.origin.iter().next() {
            // Conditional on the stored Last-Modified (no ETag stored).
            let fid = stream::socket(open);
            assert!(origin_seen(&out, fid)
                .0
                .contains("\r\nIf-Modified-Since: Sat, 05 Nov 1994 08:49:37 GMT\r\n"));
            origin_reply(
                &mut c,
                &pool,
                at(T0 + secs),
                fid,
                &[b"HTTP/1.1 304 Not Modified\r\n\r\n"],
            );
        }
    }
    assert_eq!((c.stats.hits, c.stats.fetches), (2, 4));
}

#[test]
fn a_response_that_cannot_be_made_ends_the_connection() {
    let big = pool();
    let mut c = cache();
    let mut out = request(&mut c, &big, at(T0), &[]);
    // A pool with one buffer: the request's own packet, then nothing.
    let tiny = Mempool::new("http-test-tiny", 1, MemoryKind::Plain).unwrap();
    let p = data(&tiny, C, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    c.client_input(p, at(T0), &tiny, &mut out);
    assert!(out.client.is_empty());
    assert_eq!(
        (c.stats.alloc_failures, c.connections()),
        (2, 0),
        "the response and the Close"
    );
    // The Close goes out with the next tick that finds a buffer.
    c.tick(at(T0), &tiny, &mut out);
    assert_eq!(seen(&out.client, C).1, "C");
}
