//! Shared buffers and attached segments: exact reference counts, the
//! bytes and addresses an attached segment shows, its read-only rules.

use super::*;
use crate::packet::{free_batch, PacketBatch, TxOffload, TX_IP_CSUM};
use crate::MemoryKind;

fn filled(pool: &Mempool, len: usize) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(len).unwrap();
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    p
}

#[test]
fn an_attached_segment_shows_its_range_by_address_and_by_bytes() {
    let pool = Mempool::new("direct", 4, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 4).unwrap();
    let p = filled(&pool, 1000);
    let (iova, bytes) = (p.data_iova(), p.to_vec());
    let shared = SharedBuffer::new(p).unwrap();
    assert_eq!(
        (shared.len(), shared.data_iova(), &shared[..]),
        (1000, iova, &bytes[..])
    );
    let a = shared.attach(100, 300, &heads).unwrap();
    assert!(a.is_attached() && !a.is_chained());
    assert_eq!((a.len(), a.data_iova(), a.headroom()), (300, iova + 100, 0));
    assert_eq!(&a[..], &bytes[100..400]);
    assert_eq!(a.dma_domain(), shared.dma_domain());
    assert_eq!(a.capacity(), 300, "it can never grow past its range");
    assert!(shared.attach(900, 101, &heads).is_err(), "past the end");
    assert!(shared.attach(usize::MAX, 2, &heads).is_err(), "overflowing range");
    assert_eq!(shared.ref_count(), 2);
    assert_eq!(heads.free_count(), 3);
}

#[test]
fn the_direct_buffer_returns_only_after_its_last_reference_in_any_order() {
    let pool = Mempool::new("direct", 4, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 4).unwrap();
    for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [1, 2, 0]] {
        let shared = SharedBuffer::new(filled(&pool, 500)).unwrap();
        let mut holders = [None, None, None];
        holders[1] = Some(shared.attach(0, 10, &heads).unwrap());
        holders[2] = Some(shared.attach(10, 490, &heads).unwrap());
        let mut shared = Some(shared);
        assert_eq!((pool.free_count(), heads.free_count()), (3, 2));
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(pool.free_count(), 3, "{order:?}: still referenced after {k} drops");
            if i == 0 {
                shared = None;
            } else {
                holders[i] = None;
            }
        }
        assert!(shared.is_none());
        assert_eq!((pool.free_count(), heads.free_count()), (4, 4), "{order:?}");
    }
}

#[test]
fn one_buffer_in_two_chains_at_once_frees_through_every_path() {
    let pool = Mempool::new("direct", 16, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 16).unwrap();
    let value = SharedBuffer::new(filled(&pool, 200)).unwrap();
    let mut batch = PacketBatch::with_capacity(4);
    for tag in 0..2u8 {
        let mut head = pool.alloc().unwrap();
        head.set_len(4).unwrap();
        head.fill(tag);
        head.append(value.attach_all(&heads).unwrap());
        batch.push(head);
    }
    // A standalone attached segment too (free_batch's one-pool run).
    let mut solo = PacketBatch::with_capacity(2);
    solo.push(value.attach(5, 5, &heads).unwrap());
    solo.push(value.attach(6, 5, &heads).unwrap());
    for p in batch.iter() {
        let mut out = Vec::new();
        p.copy_chain_to(&mut out);
        assert_eq!(&out[4..], &value[..]);
        assert_eq!(p.total_len(), 204);
    }
    assert_eq!(value.ref_count(), 5);
    drop(value);
    assert_eq!(pool.free_count(), 16 - 3, "two headers and the value");
    free_batch(&mut solo);
    assert_eq!(heads.free_count(), 14);
    // BulkFree (a driver's ring cleaning) frees the chains.
    let mut bulk = crate::packet::BulkFree::new();
    batch.consume_front(2, |p| bulk.push(p));
    assert_eq!(
        (pool.free_count(), heads.free_count()),
        (16 - 2, 16),
        "the value is back with its last segment; the header packets wait for the flush"
    );
    drop(bulk);
    assert_eq!((pool.free_count(), heads.free_count()), (16, 16));
}

#[test]
fn attached_bytes_are_read_only_and_take_no_requests() {
    let pool = Mempool::new("direct", 2, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 2).unwrap();
    let shared = SharedBuffer::new(filled(&pool, 100)).unwrap();
    let mut a = shared.attach(10, 50, &heads).unwrap();
    assert!(a.prepend(1).is_err());
    assert!(a.head_room_mut(0).is_none());
    a.set_tx_offload(TxOffload {
        flags: TX_IP_CSUM,
        l2_len: 14,
        l3_len: 20,
        ..TxOffload::default()
    });
    assert_eq!(
        a.tx_offload().flags,
        0,
        "a device would write the checksum into shared bytes"
    );
    assert!(a.is_attached());
    // Stripping and regrowing stays inside the range.
    a.strip_front(20).unwrap();
    assert_eq!((&a[..], a.data_iova()), (&shared[30..60], shared.data_iova() + 30));
    assert!(a.set_len(31).is_err());
    a.reset();
    assert!(a.is_attached() && a.is_empty());
    a.set_len(50).unwrap();
    assert_eq!(&a[..], &shared[10..60]);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a[0] = 1;
    }));
    assert!(caught.is_err(), "DerefMut of an attached segment panics");
    assert_eq!(shared[10], filled(&pool, 11)[10], "the byte is unchanged");
}

#[test]
fn chained_or_attached_packets_cannot_be_shared_and_the_last_handle_gets_its_packet_back() {
    let pool = Mempool::new("direct", 4, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 2).unwrap();
    let mut chain = filled(&pool, 10);
    chain.append(filled(&pool, 10));
    let chain = SharedBuffer::new(chain).expect_err("a chain");
    assert_eq!(chain.segment_count(), 2);
    let shared = SharedBuffer::new(filled(&pool, 10)).unwrap();
    let a = shared.attach_all(&heads).unwrap();
    let a = SharedBuffer::new(a).expect_err("an attached segment");
    let second = shared.clone();
    let shared = shared.try_into_packet().expect_err("three references");
    drop((a, second));
    let mut p = shared.try_into_packet().expect("the last reference");
    p[0] = 42;
    assert_eq!(pool.free_count(), 1);
    drop((p, chain));
    assert_eq!((pool.free_count(), heads.free_count()), (4, 2));
}

#[test]
fn references_dropped_on_other_threads_balance() {
    let pool = Mempool::new("direct", 64, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 4096).unwrap();
    for _ in 0..20 {
        let shared = SharedBuffer::new(filled(&pool, 64)).unwrap();
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let mut batch = PacketBatch::with_capacity(256);
                for k in 0..256 {
                    batch.push(shared.attach(k % 64, 1, &heads).unwrap());
                }
                let mine = shared.clone();
                std::thread::spawn(move || {
                    let sum: u64 = batch.iter().map(|p| p[0] as u64).sum();
                    drop(batch);
                    drop(mine);
                    sum
                })
            })
            .collect();
        drop(shared);
        let sums: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(sums.windows(2).all(|w| w[0] == w[1]));
        assert_eq!((pool.free_count(), heads.free_count()), (64, 4096));
    }
}

#[test]
fn an_empty_attach_pool_is_an_error_that_is_counted_and_takes_no_reference() {
    let pool = Mempool::new("direct", 1, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 1).unwrap();
    let shared = SharedBuffer::new(filled(&pool, 10)).unwrap();
    let a = shared.attach_all(&heads).unwrap();
    assert!(shared.attach_all(&heads).is_err());
    assert_eq!((heads.alloc_failures(), shared.ref_count()), (1, 2));
    drop((a, shared));
    assert_eq!(pool.free_count(), 1);
}

/// The software transmit paths read an attached segment's bytes (through
/// `Deref`), never its own header's room: linearising, copying into
/// another DMA domain, and TCP segmentation (TSO in software) of a chain
/// whose payload is attached.
#[test]
fn software_fallbacks_read_the_attached_bytes() {
    let pool = Mempool::new("direct", 16, MemoryKind::Plain).unwrap();
    let cpu = Mempool::with_layout("cpu", 16, 128, 4096, MemoryKind::CpuOnly).unwrap();
    let heads = AttachPool::new("heads", 4).unwrap();
    // Ethernet + IPv4 + TCP headers of a 54 + 3000-byte TSO packet.
    let mut head = pool.alloc().unwrap();
    head.set_len(54).unwrap();
    head.fill(0);
    head[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    head[14] = 0x45;
    head[16..18].copy_from_slice(&(40u16 + 3000).to_be_bytes());
    head[22] = 64;
    head[23] = 6;
    head[46] = 5 << 4;
    let mut payload = pool.alloc().unwrap();
    payload.set_len(2000).unwrap();
    for (i, b) in payload.iter_mut().enumerate() {
        *b = (i * 11) as u8;
    }
    let value = SharedBuffer::new(payload).unwrap();
    head.append(value.attach(0, 1500, &heads).unwrap());
    head.append(value.attach(500, 1500, &heads).unwrap());
    let expected: Vec<u8> = [&head[..], &value[..1500], &value[500..]].concat();
    let flat = crate::offload::linearize(&head, &cpu).unwrap();
    assert_eq!(&flat[..], &expected[..]);
    let copy = crate::domain::copy_into(&head, &cpu).unwrap();
    let mut out = Vec::new();
    copy.copy_chain_to(&mut out);
    assert_eq!(out, expected);
    assert!(copy
        .segments()
        .all(|s| !s.is_attached() && s.dma_domain() == cpu.dma_domain()));
    head.set_tx_offload(crate::offload::offload_for(&expected, crate::packet::TX_TSO, 1000).unwrap());
    let mut frames = Vec::new();
    crate::offload::segment(&head, &cpu, &mut frames).unwrap();
    let payload: Vec<u8> = frames.iter().flat_map(|f| f[54..].to_vec()).collect();
    assert_eq!((frames.len(), &payload[..]), (3, &expected[54..]));
    drop((flat, copy, frames, head, value));
    assert_eq!((pool.free_count(), cpu.free_count(), heads.free_count()), (16, 16, 4));
}

mod accounting {
    use super::*;
    use proptest::prelude::*;

    /// One step of a random life of shared buffers and chains.
    #[derive(Debug, Clone)]
    enum Step {
        /// Share a fresh packet of this length.
        Share(usize),
        /// Attach a range of shared buffer `i` (mod count) as a new packet.
        Attach(usize, usize, usize),
        /// Append packet `j` to packet `i` (mod count; i != j).
        Append(usize, usize),
        /// Clone handle `i`.
        Clone(usize),
        /// Drop handle `i`.
        DropShared(usize),
        /// Drop packet `i`.
        DropPacket(usize),
        /// Free every packet in one batch.
        FreeAll,
        /// Detach the rest of packet `i`'s chain.
        TakeNext(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1usize..2000).prop_map(Step::Share),
            (any::<usize>(), 0usize..2000, 0usize..2000).prop_map(|(i, o, l)| Step::Attach(i, o, l)),
            (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Step::Append(i, j)),
            any::<usize>().prop_map(Step::Clone),
            any::<usize>().prop_map(Step::DropShared),
            any::<usize>().prop_map(Step::DropPacket),
            Just(Step::FreeAll),
            any::<usize>().prop_map(Step::TakeNext),
        ]
    }

    proptest! {
        #[test]
        fn the_pools_balance_after_any_sequence(steps in proptest::collection::vec(step(), 1..80)) {
            let pool = Mempool::new("direct", 64, MemoryKind::Plain).unwrap();
            let heads = AttachPool::new("heads", 64).unwrap();
            let mut shared: Vec<(SharedBuffer, Vec<u8>)> = Vec::new();
            // Each packet with the bytes its chain must show.
            let mut packets: Vec<(Packet, Vec<u8>)> = Vec::new();
            for s in steps {
                match s {
                    Step::Share(len) => {
                        if let Ok(mut p) = pool.alloc() {
                            p.set_len(len).unwrap();
                            for (k, b) in p.iter_mut().enumerate() { *b = (k * 13 + len) as u8; }
                            let bytes = p.to_vec();
                            shared.push((SharedBuffer::new(p).unwrap(), bytes));
                        }
                    }
                    Step::Attach(i, o, l) if !shared.is_empty() => {
                        let (s, bytes) = &shared[i % shared.len()];
                        match s.attach(o, l, &heads) {
                            Ok(p) => {
                                prop_assert!(o + l <= bytes.len());
                                packets.push((p, bytes[o..o + l].to_vec()));
                            }
                            Err(_) => prop_assert!(o + l > bytes.len() || heads.free_count() == 0),
                        }
                    }
                    Step::Append(i, j) if packets.len() >= 2 && i % packets.len() != j % packets.len() => {
                        let (i, j) = (i % packets.len(), j % packets.len());
                        let (tail, tail_bytes) = packets.remove(j);
                        let i = if j < i { i - 1 } else { i };
                        packets[i].0.append(tail);
                        packets[i].1.extend_from_slice(&tail_bytes);
                    }
                    Step::Clone(i) if !shared.is_empty() => {
                        let (s, b) = &shared[i % shared.len()];
                        shared.push((s.clone(), b.clone()));
                    }
                    Step::DropShared(i) if !shared.is_empty() => {
                        let k = i % shared.len();
                        shared.swap_remove(k);
                    }
                    Step::DropPacket(i) if !packets.is_empty() => {
                        let k = i % packets.len();
                        packets.swap_remove(k);
                    }
                    Step::FreeAll => {
                        let mut batch = PacketBatch::with_capacity(packets.len());
                        for (p, _) in packets.drain(..) { batch.push(p); }
                        free_batch(&mut batch);
                    }
                    Step::TakeNext(i) if !packets.is_empty() => {
                        let k = i % packets.len();
                        let first = packets[k].0.len();
                        if let Some(rest) = packets[k].0.take_next() {
                            let rest_bytes = packets[k].1.split_off(first);
                            packets.push((rest, rest_bytes));
                        }
                    }
                    _ => {}
                }
                for (p, bytes) in &packets {
                    let mut out = Vec::new();
                    p.copy_chain_to(&mut out);
                    prop_assert_eq!(&out, bytes);
                }
                for (s, bytes) in &shared {
                    prop_assert_eq!(&s[..], &bytes[..]);
                }
            }
            drop(packets);
            drop(shared);
            prop_assert_eq!(pool.free_count(), 64);
            prop_assert_eq!(heads.free_count(), 64);
        }
    }
}

#[test]
fn of_attached_gives_a_counted_handle_and_the_range_start() {
    let pool = Mempool::new("direct", 4, MemoryKind::Plain).unwrap();
    let heads = AttachPool::new("heads", 4).unwrap();
    let p = filled(&pool, 1000);
    let bytes = p.to_vec();
    let shared = SharedBuffer::new(p).unwrap();
    let mut a = shared.attach(100, 300, &heads).unwrap();
    // A segment whose front was pulled off starts later in the buffer.
    a.strip_front(20).unwrap();
    let (again, offset) = SharedBuffer::of_attached(&a).unwrap();
    assert_eq!(offset, 120);
    assert_eq!(&again[offset..offset + a.len()], &bytes[120..400]);
    assert_eq!(shared.ref_count(), 3, "the handle, the segment, the new handle");
    drop(a);
    drop(shared);
    assert_eq!(again.ref_count(), 1);
    assert_eq!(pool.free_count(), 3, "still held by the new handle");
    drop(again);
    assert_eq!(pool.free_count(), 4);
    assert!(SharedBuffer::of_attached(&filled(&pool, 10)).is_none(), "not attached");
}
