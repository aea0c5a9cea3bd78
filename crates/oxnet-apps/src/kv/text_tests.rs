//! Exact replies, checked against memcached 1.6.18 (Debian's) with the
//! same bytes.

use super::*;
use crate::kv::info::ServerInfo;
use crate::kv::store::{Store, StoreConfig};
use oxnet_driver::MemoryKind;

pub(crate) const NOW: u64 = 1_700_000_000;

pub(crate) fn new_store() -> Store {
    Store::new(StoreConfig {
        memory_limit: 4 << 20,
        item_size_max: 1 << 20,
        memory_kind: MemoryKind::Plain,
    })
    .unwrap()
}

/// Feeds `input` as one stream (requests complete or not), as a
/// connection does; the replies and whether it asked to close.
pub(crate) fn feed(store: &mut Store, now: u64, input: &[u8]) -> (Vec<u8>, bool) {
    let mut info = ServerInfo::default();
    let mut env = Env {
        store,
        info: &mut info,
        now,
    };
    let mut st = TextState::default();
    let mut out = Reply::default();
    let mut pos = 0;
    loop {
        match step(&input[pos..], &mut st, &mut env, &mut out, 2 << 20) {
            Step::NeedMore => return (out.to_vec(), false),
            Step::Done { consumed, close } => {
                pos += consumed;
                if close {
                    return (out.to_vec(), true);
                }
            }
        }
    }
}

fn run(input: &str) -> String {
    let mut s = new_store();
    String::from_utf8(feed(&mut s, NOW, input.as_bytes()).0).unwrap()
}

#[test]
fn storage_and_retrieval() {
    assert_eq!(
        run("set a 5 0 3\r\nabc\r\nget a b\r\ngets a\r\nadd a 0 0 1\r\nx\r\nreplace b 0 0 1\r\nx\r\n"),
        "STORED\r\nVALUE a 5 3\r\nabc\r\nEND\r\nVALUE a 5 3 1\r\nabc\r\nEND\r\nNOT_STORED\r\nNOT_STORED\r\n"
    );
    assert_eq!(
        run("set a 0 0 1\r\n1\r\ncas a 0 0 1 9\r\n2\r\ncas a 0 0 1 1\r\n3\r\ncas b 0 0 1 1\r\n4\r\nget a\r\n"),
        "STORED\r\nEXISTS\r\nSTORED\r\nNOT_FOUND\r\nVALUE a 0 1\r\n3\r\nEND\r\n"
    );
    assert_eq!(
        run("append a 0 0 1\r\nx\r\nset a 0 0 2\r\nmm\r\nappend a 0 0 2\r\nzz\r\nprepend a 0 0 2\r\naa\r\nget a\r\n"),
        "NOT_STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\nVALUE a 0 6\r\naammzz\r\nEND\r\n"
    );
    // Empty values, and "\n" alone ends a line.
    assert_eq!(run("set e 0 0 0\n\r\nget e\n"), "STORED\r\nVALUE e 0 0\r\n\r\nEND\r\n");
}

#[test]
fn noreply_suppresses_replies_and_errors() {
    assert_eq!(
        run("set a 0 0 1 noreply\r\n1\r\nincr a 5 noreply\r\ndelete b noreply\r\nflush_all noreply\r\nget a\r\n"),
        "END\r\n"
    );
    assert_eq!(run("set a 0 0 x noreply\r\nget a\r\n"), "END\r\n");
}

#[test]
fn delete_incr_decr_touch() {
    assert_eq!(
        run("set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 20\r\nget n\r\nincr n abc\r\nincr x 1\r\ndelete n\r\ndelete n\r\n"),
        "STORED\r\n15\r\n0\r\nVALUE n 0 2\r\n0 \r\nEND\r\nCLIENT_ERROR invalid numeric delta argument\r\nNOT_FOUND\r\nDELETED\r\nNOT_FOUND\r\n"
    );
    assert_eq!(
        run("set s 0 0 1\r\nx\r\nincr s 1\r\ndelete s 0\r\ndelete s 1\r\ndelete s 0 noreply\r\n"),
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nDELETED\r\nCLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
    );
    assert_eq!(
        run("touch t 10\r\nset t 0 0 1\r\nx\r\ntouch t 10\r\ntouch t x\r\n"),
        "NOT_FOUND\r\nSTORED\r\nTOUCHED\r\nCLIENT_ERROR invalid exptime argument\r\n"
    );
}

#[test]
fn gat_touches_and_expiry_follows_the_clock() {
    let mut s = new_store();
    let (out, _) = feed(&mut s, NOW, b"set k 1 2 1\r\nv\r\ngats 100 k\r\n");
    assert_eq!(out, b"STORED\r\nVALUE k 1 1 1\r\nv\r\nEND\r\n");
    let (out, _) = feed(&mut s, NOW + 99, b"gat 0 k\r\n");
    assert_eq!(out, b"VALUE k 1 1\r\nv\r\nEND\r\n");
    let (out, _) = feed(&mut s, NOW + 1000, b"get k\r\ngat x k\r\n");
    assert_eq!(
        out, b"VALUE k 1 1\r\nv\r\nEND\r\nCLIENT_ERROR invalid exptime argument\r\n",
        "gat 0: never"
    );
    let (out, _) = feed(&mut s, NOW, b"set k 0 1 1\r\nv\r\n");
    assert_eq!(out, b"STORED\r\n");
    assert_eq!(feed(&mut s, NOW + 1, b"get k\r\n").0, b"END\r\n");
}

#[test]
fn errors_as_memcached_words_them() {
    assert_eq!(run("bogus\r\n"), "ERROR\r\n");
    assert_eq!(run("\r\n"), "ERROR\r\n");
    assert_eq!(run("get\r\n"), "ERROR\r\n");
    assert_eq!(run("set a 0 0\r\n"), "ERROR\r\n");
    assert_eq!(run("set a 0 0 -1\r\n"), "CLIENT_ERROR bad command line format\r\n");
    assert_eq!(run("set a x 0 1\r\n"), "CLIENT_ERROR bad command line format\r\n");
    let long = "k".repeat(251);
    assert_eq!(
        run(&format!("set a 0 0 1\r\n1\r\nget a {long}\r\n")),
        "STORED\r\nCLIENT_ERROR bad command line format\r\n",
        "a long key drops the hits before it"
    );
    assert_eq!(
        run("set a 0 0 1\r\nxyz\r\n"),
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    );
    assert_eq!(run("incr\r\n"), "ERROR\r\n");
    assert_eq!(
        run("verbosity 1\r\nverbosity\r\nverbosity x\r\n"),
        "OK\r\nERROR\r\nCLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        run("flush_all\r\nflush_all 0\r\nflush_all x\r\n"),
        "OK\r\nOK\r\nCLIENT_ERROR invalid exptime argument\r\n"
    );
    assert_eq!(run("version\r\n"), format!("VERSION {VERSION}\r\n"));
}

#[test]
fn too_large_is_refused_and_its_data_skipped() {
    let mut s = Store::new(StoreConfig {
        memory_limit: 4 << 20,
        item_size_max: 1024,
        memory_kind: MemoryKind::Plain,
    })
    .unwrap();
    let mut input = b"set k 0 0 1\r\nx\r\nset k 0 0 2000\r\n".to_vec();
    input.extend(vec![b'g'; 2000]);
    input.extend_from_slice(b"\r\nget k\r\n");
    let (out, _) = feed(&mut s, NOW, &input);
    assert_eq!(out, b"STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\n");
}

#[test]
fn quit_line_too_long_and_http_close() {
    let mut s = new_store();
    assert_eq!(
        feed(&mut s, NOW, b"version\r\nquit\r\nversion\r\n"),
        (format!("VERSION {VERSION}\r\n").into_bytes(), true)
    );
    assert_eq!(feed(&mut s, NOW, &[b'x'; 2049]), (vec![], true));
    assert_eq!(feed(&mut s, NOW, &[b'x'; 2048]), (vec![], false));
    let mut get = b"get ".to_vec();
    get.extend(vec![b'k'; 5000]);
    assert_eq!(feed(&mut s, NOW, &get), (vec![], false), "a long get line waits");
    assert_eq!(feed(&mut s, NOW, b"GET / HTTP/1.1\r\n"), (vec![], true));
}

#[test]
fn split_at_every_byte_gives_the_same_replies() {
    let input = b"set a 1 0 5\r\nhello\r\nget a\r\nincr a 1\r\nset n 0 0 1\r\n7\r\nincr n 3\r\ngets n\r\n";
    let mut whole_store = new_store();
    let (whole, _) = feed(&mut whole_store, NOW, input);
    // A connection buffers what is left and tries again with more.
    let mut s = new_store();
    let mut info = ServerInfo::default();
    let mut env = Env {
        store: &mut s,
        info: &mut info,
        now: NOW,
    };
    let mut st = TextState::default();
    let mut out = Reply::default();
    let mut buf = Vec::new();
    for &b in input.iter() {
        buf.push(b);
        while let Step::Done { consumed, .. } = step(&buf, &mut st, &mut env, &mut out, 1 << 20) {
            buf.drain(..consumed);
        }
    }
    assert_eq!(out.to_vec(), whole);
    assert_eq!(
        String::from_utf8(whole).unwrap(),
        "STORED\r\nVALUE a 1 5\r\nhello\r\nEND\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nSTORED\r\n10\r\nVALUE n 0 2 3\r\n10\r\nEND\r\n"
    );
}

#[test]
fn stats_lists() {
    let out = run("set a 0 0 1\r\n1\r\nget a\r\nget b\r\nstats\r\n");
    for line in [
        "STAT cmd_get 2\r\n",
        "STAT get_hits 1\r\n",
        "STAT get_misses 1\r\n",
        "STAT curr_items 1\r\n",
        "STAT cmd_set 1\r\n",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    assert!(out.ends_with("END\r\n"));
    assert_eq!(run("stats bogus\r\n"), "ERROR\r\n");
    assert_eq!(run("stats reset\r\n"), "RESET\r\n");
    assert!(run("stats settings\r\n").contains("STAT item_size_max 1048576\r\n"));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Random bytes (and random commands) never panic, and what a
        /// connection must keep is bounded by the buffer limit.
        #[test]
        fn random_bytes_never_panic(chunks in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..300),
                "(get|gets|gat|set|add|cas|incr|decr|delete|touch|flush_all|stats|verbosity|append) [a-z0-9 -]{0,40}\r?\n".prop_map(|s| s.into_bytes()),
            ], 1..20)) {
            let mut s = new_store();
            let mut info = ServerInfo::default();
            let mut env = Env { store: &mut s, info: &mut info, now: NOW };
            let mut st = TextState::default();
            let mut out = Reply::default();
            let mut buf = Vec::new();
            let limit = 8192;
            for c in chunks {
                buf.extend_from_slice(&c);
                loop {
                    match step(&buf, &mut st, &mut env, &mut out, limit) {
                        Step::NeedMore => break,
                        Step::Done { consumed, close } => {
                            prop_assert!(consumed > 0 && consumed <= buf.len());
                            buf.drain(..consumed);
                            if close { buf.clear(); st = TextState::default(); break; }
                        }
                    }
                }
                // What waits is a line below LINE_MAX, a get line below
                // the limit, or a data block the store accepts.
                prop_assert!(buf.len() <= limit + (1 << 20), "{}", buf.len());
            }
        }
    }
}
