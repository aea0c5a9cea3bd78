//! Exact replies, checked against memcached 1.6.18 with the same bytes
//! (CAS values aside).

use super::*;
use crate::kv::text::tests::{feed, new_store, NOW};

fn run(input: &str) -> String {
    let mut s = new_store();
    String::from_utf8(feed(&mut s, NOW, input.as_bytes()).0).unwrap()
}

#[test]
fn mn_me_and_misses() {
    assert_eq!(run("mn\r\n"), "MN\r\n");
    assert_eq!(run("me\r\nme k\r\n"), "CLIENT_ERROR bad command line format\r\nEN\r\n");
    assert_eq!(
        run("set k 5 0 3\r\nabc\r\nme k\r\n"),
        "STORED\r\nME k exp=-1 la=0 cas=1 fetch=no cls=1 size=67\r\n"
    );
    assert_eq!(run("mg k v\r\n"), "EN\r\n");
    assert_eq!(
        run("mg k\r\nmg k q\r\nmg k k Oabc\r\nmn\r\n"),
        "EN\r\nEN kk Oabc\r\nMN\r\n"
    );
    assert_eq!(run("mg\r\nmz k\r\n"), "ERROR\r\nERROR\r\n");
}

#[test]
fn mg_flags() {
    assert_eq!(
        run("set k 5 0 3\r\nabc\r\nmg k v f s t k Oxy\r\nmg k h l\r\nmg k c\r\n"),
        "STORED\r\nVA 3 f5 s3 t-1 kk Oxy\r\nabc\r\nHD h1 l0\r\nHD c1\r\n"
    );
    assert_eq!(
        run("set k 5 100 3\r\nabc\r\nmg k t v T30\r\nmg k t\r\n"),
        "STORED\r\nVA 3 t100\r\nabc\r\nHD t30\r\n"
    );
    assert_eq!(
        run("mg k N30 v s t\r\nmg k v\r\nmg k N30 v\r\n"),
        "VA 0 s0 t30 W\r\n\r\nVA 0 Z\r\n\r\nVA 0 Z\r\n\r\n"
    );
    assert_eq!(run("mg k x\r\n"), "CLIENT_ERROR invalid flag\r\n");
    assert_eq!(run("mg k v v\r\n"), "CLIENT_ERROR duplicate flag\r\n");
    assert_eq!(
        run("mg k Tabc\r\n"),
        "CLIENT_ERROR bad token in command line format\r\n"
    );
    assert_eq!(
        run("mg k a b c d e f g h i j k l m n o p q r s t u v w x y z\r\n"),
        "CLIENT_ERROR options flags are too long\r\n"
    );
    // h and l show the state before the read; u leaves it.
    let mut s = new_store();
    feed(&mut s, NOW, b"set k 0 0 1\r\nx\r\n");
    assert_eq!(
        feed(&mut s, NOW + 5, b"mg k h l u\r\nmg k h l\r\nmg k h l\r\n").0,
        b"HD h0 l5\r\nHD h0 l5\r\nHD h1 l0\r\n"
    );
}

#[test]
fn ms_modes_cas_and_errors() {
    assert_eq!(run("ms k 3\r\nabc\r\nmg k v f\r\n"), "HD\r\nVA 3 f0\r\nabc\r\n");
    assert_eq!(run("ms k 3 F7 T0 k Oo1 c\r\nxyz\r\n"), "HD kk Oo1 c1\r\n");
    assert_eq!(run("ms k 3 q\r\nabc\r\nmn\r\n"), "MN\r\n");
    assert_eq!(run("ms k 3 ME\r\nabc\r\nms k 3 ME\r\nabc\r\n"), "HD\r\nNS\r\n");
    assert_eq!(run("ms k 3 MR\r\nabc\r\nms k 1 MA\r\nx\r\n"), "NS\r\nNS\r\n");
    assert_eq!(
        run("ms k 3\r\nabc\r\nms k 1 MA\r\nx\r\nms k 1 MP\r\ny\r\nmg k v\r\n"),
        "HD\r\nHD\r\nHD\r\nVA 5\r\nyabcx\r\n"
    );
    assert_eq!(
        run("ms k 3 C999\r\nabc\r\nms k 3\r\nabc\r\nms k 3 C999\r\nabc\r\nms k 1 C1 c\r\nz\r\n"),
        "NF\r\nHD\r\nEX\r\nHD c2\r\n"
    );
    assert_eq!(
        run("ms k 3 MX\r\nabc\r\nmn\r\n"),
        "CLIENT_ERROR invalid mode for ms M token\r\nMN\r\n"
    );
    assert_eq!(
        run("ms k 3 Mxy\r\nabc\r\nmn\r\n"),
        "CLIENT_ERROR incorrect length for M token\r\nMN\r\n"
    );
    assert_eq!(
        run("ms k\r\nms k abc\r\n"),
        "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(run("ms k 3\r\nabcd\r\n"), "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    // E sets the new CAS (memcached 1.6.21's flag).
    assert_eq!(run("ms k 1 E77 c\r\nx\r\nmg k c\r\n"), "HD c77\r\nHD c77\r\n");
}

#[test]
fn md_ma_and_stale_items() {
    assert_eq!(
        run("md k\r\nms k 1\r\nx\r\nmd k q\r\nmd k\r\nmd k k O1\r\n"),
        "NF\r\nHD\r\nNF\r\nNF kk O1\r\n"
    );
    assert_eq!(
        run("ms k 1\r\nx\r\nmd k C999\r\nmd k I T30\r\nmg k v c\r\nmg k v t\r\n"),
        "HD\r\nEX\r\nHD\r\nVA 1 c2 X W\r\nx\r\nVA 1 t30 Z X\r\nx\r\n"
    );
    assert_eq!(run("md k x\r\n"), "CLIENT_ERROR invalid or duplicate flag\r\n");
    assert_eq!(
        run("ma k\r\nma k N0 J10\r\nma k\r\nma k v\r\nma k MD D5 v\r\nma k q\r\nmn\r\n"),
        "NF\r\nHD\r\nHD\r\nVA 2\r\n12\r\nVA 1\r\n7\r\nMN\r\n"
    );
    assert_eq!(run("ma k N0 J10 v t c\r\n"), "VA 2 t-1 c1\r\n10\r\n");
    assert_eq!(
        run("ms k 1\r\nx\r\nma k\r\n"),
        "HD\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(
        run("ma k Dx\r\nma k MZ\r\nma k C999\r\n"),
        "CLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid mode for ma M token\r\nNF\r\n"
    );
}

#[test]
fn binary_keys_in_base64() {
    assert_eq!(
        run("mg a2V5 b v k\r\nms a2V5 3 b\r\nabc\r\nmg a2V5 b v k\r\nmg k v\r\nmg key v\r\n"),
        "EN ka2V5 b\r\nHD\r\nVA 3 ka2V5 b\r\nabc\r\nEN\r\nVA 3\r\nabc\r\n"
    );
    for bytes in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\x10\x80"] {
        let enc = base64_encode(bytes);
        if !bytes.is_empty() {
            assert_eq!(base64_decode(enc.as_bytes()).unwrap(), bytes, "{enc}");
        }
    }
    assert_eq!(base64_encode(b"key"), "a2V5");
    assert_eq!(base64_decode(b"a2V"), None);
    assert_eq!(base64_decode(b"a=V5"), None);
}

mod fuzz {
    use super::*;
    use crate::kv::info::{Env, ServerInfo};
    use crate::kv::reply::Reply;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Random meta lines never panic; what waits is bounded.
        #[test]
        fn random_meta_commands_never_panic(lines in proptest::collection::vec(
            "m[gsdaen] [a-zA-Z0-9=]{0,12}( [0-9]{0,3})?( [a-zA-Z+-][a-zA-Z0-9]{0,4}){0,8}\r\n[a-z\r\n]{0,8}", 1..30)) {
            let mut s = new_store();
            let mut info = ServerInfo::default();
            let mut env = Env { store: &mut s, info: &mut info, now: NOW };
            let mut st = crate::kv::text::TextState::default();
            let mut out = Reply::default();
            let mut buf = Vec::new();
            for l in lines {
                buf.extend_from_slice(l.as_bytes());
                while let Step::Done { consumed, close } = crate::kv::text::step(&buf, &mut st, &mut env, &mut out, 1 << 16) {
                    prop_assert!(consumed <= buf.len());
                    buf.drain(..consumed);
                    if close { buf.clear(); }
                }
                prop_assert!(buf.len() <= 2048 + 1000 + 2);
            }
        }
    }
}
