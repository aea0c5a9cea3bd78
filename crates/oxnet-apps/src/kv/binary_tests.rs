//! Exact responses, checked against memcached 1.6.18 with the same bytes
//! (CAS values aside: memcached's counter starts elsewhere).

use super::*;
use crate::kv::info::ServerInfo;
use crate::kv::text::tests::{new_store, NOW};

/// A request: opcode, extras, key, value, opaque 0xdeadbeef, CAS.
pub(crate) fn req(opcode: u8, ext: &[u8], key: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let mut b = vec![REQUEST_MAGIC, opcode];
    b.extend_from_slice(&(key.len() as u16).to_be_bytes());
    b.push(ext.len() as u8);
    b.extend_from_slice(&[0, 0, 0]);
    b.extend_from_slice(&((ext.len() + key.len() + value.len()) as u32).to_be_bytes());
    b.extend_from_slice(&0xdead_beefu32.to_be_bytes());
    b.extend_from_slice(&cas.to_be_bytes());
    b.extend_from_slice(ext);
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b
}

/// A response as memcached writes it.
fn res(opcode: u8, st: u16, ext: &[u8], key: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let mut b = req(opcode, ext, key, value, cas);
    b[0] = RESPONSE_MAGIC;
    b[6..8].copy_from_slice(&st.to_be_bytes());
    b
}

fn err(opcode: u8, st: u16) -> Vec<u8> {
    res(opcode, st, &[], &[], message(st).as_bytes(), 0)
}

fn set_ext(flags: u32, exptime: u32) -> Vec<u8> {
    let mut e = flags.to_be_bytes().to_vec();
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

fn incr_ext(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

/// Runs requests as one stream: the responses and whether it closed.
fn run(input: &[u8]) -> (Vec<u8>, bool) {
    let mut s = new_store();
    let mut info = ServerInfo::default();
    let mut env = Env {
        store: &mut s,
        info: &mut info,
        now: NOW,
    };
    let mut out = Reply::default();
    let mut swallow = 0;
    let mut pos = 0;
    loop {
        match step(&input[pos..], &mut swallow, &mut env, &mut out) {
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

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn set_get_getk_and_misses() {
    let input = cat(&[
        req(op::GET, &[], b"k", &[], 0),
        req(op::GETK, &[], b"k", &[], 0),
        req(op::GETQ, &[], b"k", &[], 0),
        req(op::SET, &set_ext(7, 0), b"k", b"val", 0),
        req(op::GET, &[], b"k", &[], 0),
        req(op::GETKQ, &[], b"k", &[], 0),
        req(op::NOOP, &[], &[], &[], 0),
    ]);
    let want = cat(&[
        err(op::GET, status::KEY_ENOENT),
        res(op::GETK, status::KEY_ENOENT, &[], b"k", &[], 0),
        res(op::SET, 0, &[], &[], &[], 1),
        res(op::GET, 0, &7u32.to_be_bytes(), &[], b"val", 1),
        res(op::GETKQ, 0, &7u32.to_be_bytes(), b"k", b"val", 1),
        res(op::NOOP, 0, &[], &[], &[], 0),
    ]);
    assert_eq!(run(&input), (want, false));
}

#[test]
fn add_replace_append_cas_and_quiet_variants() {
    let input = cat(&[
        req(op::REPLACE, &set_ext(0, 0), b"k", b"x", 0),
        req(op::APPEND, &[], b"k", b"x", 0),
        req(op::ADDQ, &set_ext(0, 0), b"k", b"a", 0),
        req(op::ADD, &set_ext(0, 0), b"k", b"b", 0),
        req(op::APPENDQ, &[], b"k", b"c", 0),
        req(op::PREPEND, &[], b"k", b"p", 0),
        req(op::SET, &set_ext(0, 0), b"k", b"z", 99),
        req(op::SET, &set_ext(0, 0), b"k", b"z", 3),
        req(op::GET, &[], b"k", &[], 0),
        req(op::DELETE, &[], b"k", &[], 1),
        req(op::DELETEQ, &[], b"k", &[], 0),
        req(op::DELETE, &[], b"k", &[], 0),
    ]);
    let want = cat(&[
        err(op::REPLACE, status::KEY_ENOENT),
        err(op::APPEND, status::NOT_STORED),
        err(op::ADD, status::KEY_EEXISTS),
        res(op::PREPEND, 0, &[], &[], &[], 3),
        err(op::SET, status::KEY_EEXISTS),
        res(op::SET, 0, &[], &[], &[], 4),
        res(op::GET, 0, &[0; 4], &[], b"z", 4),
        err(op::DELETE, status::KEY_EEXISTS),
        err(op::DELETE, status::KEY_ENOENT),
    ]);
    assert_eq!(run(&input), (want, false));
}

#[test]
fn incr_decr_with_initial_values() {
    let input = cat(&[
        req(op::INCREMENT, &incr_ext(1, 10, 0xffff_ffff), b"n", &[], 0),
        req(op::INCREMENT, &incr_ext(1, 10, 0), b"n", &[], 0),
        req(op::INCREMENT, &incr_ext(5, 0, 0), b"n", &[], 0),
        req(op::DECREMENTQ, &incr_ext(100, 0, 0), b"n", &[], 0),
        req(op::GET, &[], b"n", &[], 0),
        req(op::SET, &set_ext(0, 0), b"s", b"abc", 0),
        req(op::DECREMENT, &incr_ext(1, 0, 0), b"s", &[], 0),
    ]);
    let want = cat(&[
        err(op::INCREMENT, status::KEY_ENOENT),
        res(op::INCREMENT, 0, &[], &[], &10u64.to_be_bytes(), 1),
        res(op::INCREMENT, 0, &[], &[], &15u64.to_be_bytes(), 2),
        res(op::GET, 0, &[0; 4], &[], b"0 ", 3),
        res(op::SET, 0, &[], &[], &[], 4),
        err(op::DECREMENT, status::DELTA_BADVAL),
    ]);
    assert_eq!(run(&input), (want, false));
}

#[test]
fn touch_gat_flush_version_stat_quit() {
    let input = cat(&[
        req(op::SET, &set_ext(1, 0), b"k", b"v", 0),
        req(op::TOUCH, &100u32.to_be_bytes(), b"k", &[], 0),
        req(op::GATK, &100u32.to_be_bytes(), b"k", &[], 0),
        req(op::GATQ, &100u32.to_be_bytes(), b"none", &[], 0),
        req(op::FLUSHQ, &[], &[], &[], 0),
        req(op::GET, &[], b"k", &[], 0),
        req(op::VERSION, &[], &[], &[], 0),
        req(op::STAT, &[], b"bogus", &[], 0),
        req(op::QUIT, &[], &[], &[], 0),
        req(op::NOOP, &[], &[], &[], 0),
    ]);
    let want = cat(&[
        res(op::SET, 0, &[], &[], &[], 1),
        res(op::TOUCH, 0, &1u32.to_be_bytes(), &[], &[], 1),
        res(op::GATK, 0, &1u32.to_be_bytes(), b"k", b"v", 1),
        err(op::GET, status::KEY_ENOENT),
        res(op::VERSION, 0, &[], &[], info::VERSION.as_bytes(), 0),
        err(op::STAT, status::KEY_ENOENT),
        res(op::QUIT, 0, &[], &[], &[], 0),
    ]);
    assert_eq!(run(&input), (want, true));
    // stat: "name value" responses, then an empty one.
    let (out, _) = run(&req(op::STAT, &[], b"settings", &[], 0));
    let end = res(op::STAT, 0, &[], &[], &[], 0);
    assert!(out.ends_with(&end));
    let first = res(op::STAT, 0, &[], b"maxbytes", b"4194304", 0);
    assert!(out.starts_with(&first), "{out:?}");
}

#[test]
fn protocol_errors_close_unknown_opcodes_skip_large_values_skip() {
    assert_eq!(run(&[0x81; 24]), (vec![], true), "bad magic");
    let mut bad = req(op::GET, &[], b"k", &[], 0);
    bad[11] = 0; // body 0 < key 1
    assert_eq!(run(&bad), (err(op::GET, status::UNKNOWN_COMMAND), true));
    assert_eq!(
        run(&req(op::GET, &[1, 2, 3, 4], b"k", &[], 0)),
        (err(op::GET, status::EINVAL), true),
        "get with extras"
    );
    let input = cat(&[
        req(0x55, &[], &[], b"body", 0),
        req(op::SET, &set_ext(0, 0), b"big", &vec![7; 2 << 20], 0),
        req(op::GET, &[], b"big", &[], 0),
    ]);
    assert_eq!(
        run(&input),
        (
            cat(&[
                err(0x55, status::UNKNOWN_COMMAND),
                err(op::SET, status::E2BIG),
                err(op::GET, status::KEY_ENOENT)
            ]),
            false
        )
    );
}

#[test]
fn split_at_every_byte_gives_the_same_responses() {
    let input = cat(&[
        req(op::SET, &set_ext(3, 0), b"key", &[9; 3000], 0),
        req(op::GETK, &[], b"key", &[], 0),
        req(op::INCREMENT, &incr_ext(2, 5, 0), b"n", &[], 0),
        req(op::NOOP, &[], &[], &[], 0),
    ]);
    let (whole, _) = run(&input);
    let mut s = new_store();
    let mut info = ServerInfo::default();
    let mut env = Env {
        store: &mut s,
        info: &mut info,
        now: NOW,
    };
    let mut out = Reply::default();
    let mut swallow = 0;
    let mut buf = Vec::new();
    for &b in &input {
        buf.push(b);
        while let Step::Done { consumed, .. } = step(&buf, &mut swallow, &mut env, &mut out) {
            buf.drain(..consumed);
        }
    }
    assert_eq!(out.to_vec(), whole);
    let mut value = 3u32.to_be_bytes().to_vec();
    value.extend_from_slice(b"key");
    value.extend_from_slice(&[9; 3000]);
    let mut getk = res(op::GETK, 0, &[], &[], &value, 1);
    getk[2..4].copy_from_slice(&3u16.to_be_bytes());
    getk[4] = 4;
    assert_eq!(
        whole,
        cat(&[
            res(op::SET, 0, &[], &[], &[], 1),
            getk,
            res(op::INCREMENT, 0, &[], &[], &5u64.to_be_bytes(), 2),
            res(op::NOOP, 0, &[], &[], &[], 0),
        ])
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Random headers and bodies never panic; what waits for more is
        /// a header, extras and key, or a value the store accepts.
        #[test]
        fn random_bytes_never_panic(chunks in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..100),
                (0u8..0x26, proptest::collection::vec(any::<u8>(), 0..24), proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..40), any::<u64>())
                    .prop_map(|(o, e, k, v, c)| req(o, &e, &k, &v, c % 4)),
            ], 1..20)) {
            let mut s = new_store();
            let mut info = ServerInfo::default();
            let mut env = Env { store: &mut s, info: &mut info, now: NOW };
            let mut out = Reply::default();
            let mut buf = Vec::new();
            let mut swallow = 0;
            for c in chunks {
                buf.extend_from_slice(&c);
                loop {
                    match step(&buf, &mut swallow, &mut env, &mut out) {
                        Step::NeedMore => break,
                        Step::Done { consumed, close } => {
                            prop_assert!(consumed > 0 && consumed <= buf.len());
                            buf.drain(..consumed);
                            if close { buf.clear(); swallow = 0; break; }
                        }
                    }
                }
                prop_assert!(buf.len() <= HEADER + 255 + 250 + (1 << 20));
            }
        }
    }
}
