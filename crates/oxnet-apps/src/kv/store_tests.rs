use super::*;

const T0: u64 = 1_700_000_000;

fn store(limit: usize) -> Store {
    Store::new(StoreConfig {
        memory_limit: limit,
        item_size_max: 1 << 20,
        memory_kind: MemoryKind::Plain,
    })
    .unwrap()
}

fn get(s: &mut Store, key: &str, now: u64) -> Option<Vec<u8>> {
    s.get(key.as_bytes(), now).map(|h| h.value.to_vec())
}

#[test]
fn set_get_replace_add_and_cas_counter() {
    let mut s = store(1 << 20);
    assert_eq!(s.store(Mode::Set, b"a", 5, 0, b"one", T0), (Stored::Stored, 1));
    assert_eq!(s.store(Mode::Add, b"a", 0, 0, b"x", T0).0, Stored::NotStored);
    assert_eq!(s.store(Mode::Replace, b"b", 0, 0, b"x", T0).0, Stored::NotStored);
    assert_eq!(s.store(Mode::Replace, b"a", 7, 0, b"two", T0), (Stored::Stored, 2));
    let h = s.get(b"a", T0).unwrap();
    assert_eq!((h.flags, h.cas, h.value.to_vec()), (7, 2, b"two".to_vec()));
    assert_eq!(s.store(Mode::Cas(1), b"a", 0, 0, b"z", T0).0, Stored::Exists);
    assert_eq!(s.store(Mode::Cas(9), b"q", 0, 0, b"z", T0).0, Stored::NotFound);
    assert_eq!(s.store(Mode::Cas(2), b"a", 0, 0, b"three", T0), (Stored::Stored, 3));
    assert_eq!(get(&mut s, "a", T0).unwrap(), b"three");
    assert_eq!((s.stats.cmd_get, s.stats.get_hits, s.stats.get_misses), (2, 2, 0));
    assert_eq!((s.stats.curr_items, s.stats.total_items), (1, 3));
    assert_eq!(s.stats.bytes, (1 + 5 + ITEM_OVERHEAD) as u64);
    assert_eq!((s.stats.cas_hits, s.stats.cas_badval, s.stats.cas_misses), (1, 1, 1));
}

#[test]
fn append_prepend_keep_flags_and_exptime() {
    let mut s = store(1 << 20);
    s.store(Mode::Set, b"k", 3, 100, b"mid", T0);
    s.store(Mode::Append, b"k", 9, 0, b"-end", T0);
    s.store(Mode::Prepend, b"k", 9, 0, b"start-", T0);
    let h = s.get(b"k", T0).unwrap();
    assert_eq!(
        (h.value.to_vec(), h.flags, h.exptime),
        (b"start-mid-end".to_vec(), 3, T0 + 100)
    );
    assert_eq!(s.store(Mode::Append, b"none", 0, 0, b"x", T0).0, Stored::NotStored);
}

#[test]
fn expiry_relative_absolute_negative_under_simulated_time() {
    let mut s = store(1 << 20);
    s.store(Mode::Set, b"rel", 0, 10, b"v", T0);
    s.store(Mode::Set, b"abs", 0, (T0 + 100) as i64, b"v", T0);
    s.store(Mode::Set, b"past", 0, (T0 - 1) as i64, b"v", T0);
    s.store(Mode::Set, b"neg", 0, -1, b"v", T0);
    s.store(Mode::Set, b"max", 0, RELATIVE_MAX, b"v", T0);
    assert_eq!(get(&mut s, "past", T0), None, "an absolute time in the past");
    assert_eq!(get(&mut s, "neg", T0), None);
    assert!(get(&mut s, "rel", T0 + 9).is_some());
    assert_eq!(get(&mut s, "rel", T0 + 10), None, "expires at set time + exptime");
    assert_eq!(s.stats.get_expired, 3, "past, neg, rel");
    assert!(get(&mut s, "abs", T0 + 99).is_some());
    assert_eq!(get(&mut s, "abs", T0 + 100), None);
    assert!(
        get(&mut s, "max", T0 + RELATIVE_MAX as u64 - 1).is_some(),
        "30 days is still relative"
    );
    assert_eq!(s.stats.curr_items, 1);
    // touch moves the expiry; gat too.
    s.store(Mode::Set, b"t", 0, 5, b"v", T0);
    assert!(s.touch(b"t", 100, T0 + 4));
    assert!(get(&mut s, "t", T0 + 50).is_some());
    assert!(s.gat(b"t", 1, T0 + 50).is_some());
    assert_eq!(get(&mut s, "t", T0 + 51), None);
    assert!(!s.touch(b"t", 100, T0 + 51));
}

#[test]
fn flush_all_now_and_delayed() {
    let mut s = store(1 << 20);
    s.store(Mode::Set, b"a", 0, 0, b"1", T0);
    s.flush(0, T0);
    assert_eq!(get(&mut s, "a", T0), None);
    s.store(Mode::Set, b"a", 0, 0, b"1", T0);
    s.flush(10, T0);
    assert!(get(&mut s, "a", T0 + 9).is_some());
    assert_eq!(get(&mut s, "a", T0 + 10), None);
    s.store(Mode::Set, b"b", 0, 0, b"2", T0 + 11);
    assert!(get(&mut s, "b", T0 + 12).is_some(), "a flush happens once");
}

#[test]
fn incr_decr_wrap_floor_pad_and_errors() {
    let mut s = store(1 << 20);
    s.store(Mode::Set, b"n", 0, 0, b"18446744073709551615", T0);
    assert!(
        matches!(s.delta(b"n", true, 2, 0, T0), Delta::Value(1, _)),
        "wraps at 2^64"
    );
    assert_eq!(get(&mut s, "n", T0).unwrap(), b"1                   ");
    assert!(matches!(s.delta(b"n", true, 9, 0, T0), Delta::Value(10, _)));
    s.store(Mode::Set, b"m", 0, 0, b"10", T0);
    assert!(matches!(s.delta(b"m", false, 1, 0, T0), Delta::Value(9, _)));
    assert_eq!(get(&mut s, "m", T0).unwrap(), b"9 ", "decr pads as memcached");
    assert!(
        matches!(s.delta(b"m", false, 100, 0, T0), Delta::Value(0, _)),
        "floors at 0"
    );
    assert!(matches!(s.delta(b"m", true, 100, 0, T0), Delta::Value(100, _)));
    assert_eq!(get(&mut s, "m", T0).unwrap(), b"100");
    s.store(Mode::Set, b"x", 0, 0, b"12a", T0);
    assert_eq!(s.delta(b"x", true, 1, 0, T0), Delta::NonNumeric);
    assert_eq!(s.delta(b"none", true, 1, 0, T0), Delta::NotFound);
    assert_eq!(parse_counter(b""), None);
    assert_eq!(parse_counter(b"18446744073709551616"), None);
}

#[test]
fn lru_eviction_under_the_memory_limit() {
    // About 30 buffers; each 1000-byte value takes one.
    let mut s = store(30 * 2048);
    let v = vec![b'x'; 1000];
    for i in 0..100 {
        assert_eq!(
            s.store(Mode::Set, format!("k{i}").as_bytes(), 0, 0, &v, T0).0,
            Stored::Stored
        );
        if i == 10 {
            // k0 read: it is recent now and outlives k1..
            assert!(get(&mut s, "k0", T0).is_some());
        }
    }
    assert!(s.stats.evictions > 60, "{}", s.stats.evictions);
    assert!(s.stats.bytes <= (30 * 2048) as u64);
    assert_eq!(s.stats.curr_items + s.stats.evictions, 100);
    assert!(get(&mut s, "k99", T0).is_some());
    assert_eq!(get(&mut s, "k1", T0), None);
    // Too large for the whole memory: refused, nothing evicted for it.
    let before = s.stats.evictions;
    assert_eq!(
        s.store(Mode::Set, b"big", 0, 0, &vec![0; 200_000], T0).0,
        Stored::TooLarge
    );
    assert_eq!(s.stats.evictions, before);
}

#[test]
fn item_size_limit_and_a_too_large_set_drops_the_old_item() {
    let mut s = Store::new(StoreConfig {
        memory_limit: 1 << 20,
        item_size_max: 4000,
        memory_kind: MemoryKind::Plain,
    })
    .unwrap();
    s.store(Mode::Set, b"k", 0, 0, b"old", T0);
    // 48 + 1 + 1 + 3934 + 2 + 8 = 3994 + 6: the largest value with a
    // one-byte key and flags 0 is 3940 bytes.
    assert_eq!(s.store(Mode::Set, b"k", 0, 0, &[1; 3941], T0).0, Stored::TooLarge);
    assert_eq!(get(&mut s, "k", T0), None);
    assert_eq!(
        s.store(Mode::Set, b"k", 1, 0, &[1; 3937], T0).0,
        Stored::TooLarge,
        "flags take 4 bytes"
    );
    assert_eq!(s.stats.store_too_large, 2);
    let big: Vec<u8> = (0..3940u32).map(|i| i as u8).collect();
    assert_eq!(s.store(Mode::Set, b"k", 0, 0, &big, T0).0, Stored::Stored);
    let h = s.get(b"k", T0).unwrap();
    assert_eq!(h.value.buffers.len(), 3, "3940 bytes in 1920-byte buffers");
    assert_eq!(h.value.to_vec(), big);
}

#[test]
fn a_replaced_value_stays_intact_while_a_reader_holds_it() {
    let mut s = store(8 * 2048);
    s.store(Mode::Set, b"k", 0, 0, &[7; 1500], T0);
    let held = s.get(b"k", T0).unwrap().value;
    let free = s.free_buffers();
    // Overwrite it and churn through every buffer: the held one is not
    // reused.
    for i in 0..50 {
        s.store(Mode::Set, format!("k{}", i % 3).as_bytes(), 0, 0, &[i as u8; 1500], T0);
    }
    s.delete(b"k", T0);
    assert_eq!(held.to_vec(), vec![7; 1500]);
    assert_eq!(held.buffers[0].ref_count(), 1);
    assert!(s.free_buffers() < free + 1);
    let total = s.total_buffers();
    s.flush(0, T0);
    assert_eq!(s.free_buffers(), total - 1, "the held buffer is still out");
    drop(held);
    assert_eq!(s.free_buffers(), total);
}

#[test]
fn small_values_take_small_buffers_and_pages_follow_the_sizes() {
    // 1 MiB: 4000 values of 10 bytes fit (192-byte buffers; in 2 KiB
    // buffers only 512 would).
    let mut s = store(1 << 20);
    for i in 0..4000 {
        assert_eq!(
            s.store(Mode::Set, format!("s{i}").as_bytes(), 0, 0, b"0123456789", T0)
                .0,
            Stored::Stored
        );
    }
    assert_eq!((s.stats.curr_items, s.stats.evictions), (4000, 0));
    // Then large values: the small items are evicted as their pages are
    // needed, and the pages that empty move to the large class.
    for i in 0..600 {
        s.store(Mode::Set, format!("l{i}").as_bytes(), 0, 0, &[1; 1500], T0);
    }
    assert!(s.stats.evictions >= 3000, "{}", s.stats.evictions);
    assert!(get(&mut s, "l599", T0).is_some());
    let classes = s.slabs().class_stats();
    assert!(classes[2].1 > classes[0].1, "{classes:?}");
    s.check_bounds(0);
}
