//! Shared buffers and attached segments (oxnet_driver::shared) on the
//! software 82599: one buffer's bytes in two chains at once, each frame
//! on the wire byte-exact, the NIC reading the shared bytes by their own
//! address (no copy), and the buffer back in its pool only after both
//! transmissions are done.

mod common;
use oxnet_driver::memory::iova_to_virt;
use oxnet_driver::{
    AttachPool, Config, Device, MemoryKind, Mempool, Offloads, PacketBatch, RegisterAccess, SharedBuffer,
};
use oxnet_sim::World;

// 82599 datasheet §8.2.3.9.5 / §8.2.3.9.6 / §8.2.3.9.7: TDBAL[n], TDBAH[n]
// and TDLEN[n] of queue 0.
const TDBAL0: u32 = 0x06000;
const TDBAH0: u32 = 0x06004;
const TDLEN0: u32 = 0x06008;

fn wire(port: &str) -> Vec<Vec<u8>> {
    World::global()
        .frames_on_wire(port)
        .into_iter()
        .map(|mut f| {
            f.truncate(f.len() - 4); // the CRC
            f
        })
        .collect()
}

/// Buffer addresses of descriptors `0..n` of transmit queue 0.
fn descriptor_addresses(port: &str, n: usize) -> Vec<u64> {
    let regs = World::global().port(port);
    let base = (u64::from(regs.read32(TDBAH0)) << 32) | u64::from(regs.read32(TDBAL0));
    let len = regs.read32(TDLEN0) as usize;
    let ring = iova_to_virt(base, len).expect("the ring is DMA memory");
    (0..n)
        .map(|i| {
            // SAFETY: i * 16 + 8 <= len bytes of live DMA memory (checked
            // by iova_to_virt); the device is idle.
            let d = unsafe { std::slice::from_raw_parts(ring.as_ptr().add(i * 16), 8) };
            u64::from_le_bytes(d.try_into().unwrap())
        })
        .collect()
}

/// A response-like frame head: Ethernet header + a tag.
fn head(pool: &Mempool, tag: u8) -> oxnet_driver::Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(20).unwrap();
    p[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    p[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    p[14..20].fill(tag);
    p
}

/// The offload path (checksum insertion on) posts each segment by
/// address, so the shared bytes go out in place; the plain path (every
/// switch off) takes no chains and linearises them (counted in
/// `tx_software_fallback`), reading the attached bytes through `Deref`.
#[test]
fn one_buffer_in_two_chains_goes_out_twice_byte_exact_and_returns_after_both() {
    for (port, offloads, in_place) in [
        (
            "shared-offload",
            Offloads {
                tx_checksum: true,
                ..Offloads::default()
            },
            true,
        ),
        ("shared-plain", Offloads::default(), false),
    ] {
        let config = Config {
            rx_ring_size: 128,
            tx_ring_size: 128,
            offloads,
            ..Config::default()
        };
        let mut dev = common::capturing_sim_port(port, &config);
        let pool = dev.mempool(0);
        let start = pool.free_count();
        let heads = AttachPool::new("attached", 8).unwrap();
        // The stored value: 1000 numbered bytes.
        let mut value = pool.alloc().unwrap();
        value.set_len(1000).unwrap();
        for (i, b) in value.iter_mut().enumerate() {
            *b = (i * 7 + 1) as u8;
        }
        let value = SharedBuffer::new(value).unwrap();
        let value_iova = value.data_iova();
        let mut batch = PacketBatch::with_capacity(2);
        let mut a = head(&pool, 0xA);
        a.append(value.attach_all(&heads).unwrap());
        let mut b = head(&pool, 0xB);
        b.append(value.attach(100, 500, &heads).unwrap());
        batch.push(a);
        batch.push(b);
        assert_eq!(dev.tx_batch(0, &mut batch), 2, "{port}");
        let expected_a = [&head(&pool, 0xA)[..], &value[..]].concat();
        let expected_b = [&head(&pool, 0xB)[..], &value[100..600]].concat();
        assert_eq!(wire(port), vec![expected_a, expected_b], "{port}");
        let q = dev.queue_stats()[0].clone();
        if in_place {
            let addresses = descriptor_addresses(port, 4);
            assert_eq!(
                (addresses[1], addresses[3]),
                (value_iova, value_iova + 100),
                "{port}: the NIC read the shared bytes in place: {addresses:x?}"
            );
            assert_eq!((q.tx_copied, q.tx_software_fallback), (0, 0), "{port}: no copy");
            // The handle goes; the two segments in the ring still hold it.
            drop(value);
            assert_eq!(
                pool.free_count(),
                start - 3,
                "{port}: two heads and the value in flight"
            );
            assert_eq!(heads.free_count(), 6, "{port}");
        } else {
            assert_eq!((q.tx_copied, q.tx_software_fallback), (0, 2), "{port}: two linearised");
            // The chains were dropped once copied: only the handle holds it.
            assert_eq!(heads.free_count(), 8, "{port}");
            assert_eq!(value.ref_count(), 1, "{port}");
            drop(value);
        }
        // The rings' packets are freed when the device goes: every buffer
        // is back (the receive ring's too), the value exactly once.
        drop(dev);
        assert_eq!(pool.free_count(), pool.size(), "{port}: the value back after both");
        assert_eq!(heads.free_count(), 8, "{port}");
    }
}

/// A standalone attached segment (no header packet) is a frame of its
/// own: the offload path posts it by address; the plain path (every
/// switch off), whose ring cleaning frees runs of plain buffers without
/// looking at them, copies it (counted in `tx_software_fallback`).
#[test]
fn a_standalone_attached_segment_is_sent_by_address_or_copied_on_the_plain_path() {
    for (port, offloads, in_place) in [
        (
            "shared-solo-offload",
            Offloads {
                tx_checksum: true,
                ..Offloads::default()
            },
            true,
        ),
        ("shared-solo-plain", Offloads::default(), false),
    ] {
        let config = Config {
            rx_ring_size: 128,
            tx_ring_size: 128,
            offloads,
            ..Config::default()
        };
        let mut dev = common::capturing_sim_port(port, &config);
        let pool = Mempool::new("frames", 4, MemoryKind::Plain).unwrap();
        let heads = AttachPool::new("attached", 4).unwrap();
        let mut frame = head(&pool, 0xC);
        frame.set_len(200).unwrap();
        let frame = SharedBuffer::new(frame).unwrap();
        let mut batch = PacketBatch::with_capacity(2);
        batch.push(frame.attach_all(&heads).unwrap());
        batch.push(frame.attach_all(&heads).unwrap());
        assert_eq!(dev.tx_batch(0, &mut batch), 2, "{port}");
        assert_eq!(wire(port), vec![frame.to_vec(), frame.to_vec()], "{port}");
        let q = dev.queue_stats()[0].clone();
        if in_place {
            assert_eq!(descriptor_addresses(port, 2), vec![frame.data_iova(); 2], "{port}");
            assert_eq!(q.tx_software_fallback, 0, "{port}");
        } else {
            assert_eq!(q.tx_software_fallback, 2, "{port}: copied");
            assert_eq!(heads.free_count(), 4, "{port}: the originals freed at once");
        }
        drop(frame);
        drop(dev);
        assert_eq!((pool.free_count(), heads.free_count()), (4, 4), "{port}");
    }
}
