//! The transmit path against a fake device that reads the transmit queue
//! as a virtio-net device does (VirtIO 1.0 §2.4.5 descriptor chains,
//! §5.1.6.2 header): chains arrive whole; offload requests go into the
//! header when the feature is offered and switched on, and are done in
//! software (and counted) when not. Expected values come from the spec and
//! the RFCs, the checksums are completed the way §5.1.6.2 tells a device
//! to, and checked by an independent RFC 1071 sum.

use super::net_header::{self, NetHeader};
use super::transport::Transport;
use super::virtqueue::Virtqueue;
use super::{net, VirtioNet, VirtioOptions};
use crate::device::{Config, Device, Offloads, TsoMode};
use crate::error::Result;
use crate::memory::{iova_to_virt, MemoryKind};
use crate::mempool::Mempool;
use crate::offload;
use crate::packet::{Packet, PacketBatch, TxOffload, TX_IP_CSUM, TX_TCP_CSUM, TX_TSO};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Queue {
    desc: u64,
    avail: u64,
    used: u64,
    size: u16,
    /// avail.idx up to which the device has taken chains.
    seen: u16,
}

#[derive(Default)]
struct State {
    offered: u64,
    negotiated: u64,
    queues: [Queue; 2],
}

/// A device behind a transport: records where the queues are, and reads
/// the transmit queue on request.
#[derive(Clone)]
struct Fake(Arc<Mutex<State>>);

impl Transport for Fake {
    fn describe(&self) -> String {
        "fake".into()
    }
    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Plain
    }
    fn reset(&mut self) -> Result<()> {
        Ok(())
    }
    fn set_status(&mut self, _status: u8) -> Result<()> {
        Ok(())
    }
    fn device_features(&mut self) -> Result<u64> {
        Ok(self.0.lock().unwrap().offered)
    }
    fn set_driver_features(&mut self, features: u64) -> Result<()> {
        self.0.lock().unwrap().negotiated = features;
        Ok(())
    }
    fn queue_size(&mut self, queue: u16, wanted: u16) -> Result<u16> {
        Ok(if queue < 2 { wanted } else { 0 })
    }
    fn setup_queue(&mut self, queue: &Virtqueue) -> Result<()> {
        let mut s = self.0.lock().unwrap();
        s.queues[queue.index as usize] = Queue {
            desc: queue.desc_virt(),
            avail: queue.avail_virt(),
            used: queue.used_virt(),
            size: queue.size(),
            seen: 0,
        };
        Ok(())
    }
    fn notify(&mut self, _queue: u16) {}
    fn read_config(&self, _offset: u16, _buf: &mut [u8]) -> Result<bool> {
        Ok(false)
    }
}

impl Fake {
    /// Takes every chain the driver made available on the transmit queue:
    /// the header and the frame (all descriptors' bytes in order, §2.4.5),
    /// and marks each used (§2.4.8).
    fn take_tx(&self) -> Vec<(NetHeader, Vec<u8>)> {
        let mut s = self.0.lock().unwrap();
        let q = &mut s.queues[net::TX_QUEUE as usize];
        let mut out = Vec::new();
        // SAFETY: the queue's memory, set up by the driver and alive while
        // the device is; addresses from setup_queue.
        unsafe {
            let avail_idx = std::ptr::read_volatile((q.avail + 2) as *const u16);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            while q.seen != avail_idx {
                let slot = (q.seen % q.size) as u64;
                let head = std::ptr::read_volatile((q.avail + 4 + 2 * slot) as *const u16);
                let mut bytes = Vec::new();
                let mut d = head;
                for _ in 0..q.size {
                    let base = q.desc + 16 * d as u64;
                    let addr = std::ptr::read_volatile(base as *const u64);
                    let len = std::ptr::read_volatile((base + 8) as *const u32) as usize;
                    let flags = std::ptr::read_volatile((base + 12) as *const u16);
                    let next = std::ptr::read_volatile((base + 14) as *const u16);
                    assert_eq!(flags & 2, 0, "transmit buffers are device-readable (§2.4.5)");
                    let p = iova_to_virt(addr, len).expect("a descriptor outside our memory");
                    bytes.extend_from_slice(std::slice::from_raw_parts(p.as_ptr(), len));
                    if flags & 1 == 0 {
                        break;
                    }
                    d = next;
                }
                let header = NetHeader::read(&bytes).expect("a header");
                out.push((header, bytes[net::HEADER_LEN_LEGACY..].to_vec()));
                let used_idx = std::ptr::read_volatile((q.used + 2) as *const u16);
                let elem = q.used + 4 + 8 * (used_idx % q.size) as u64;
                std::ptr::write_volatile(elem as *mut u32, head as u32);
                std::ptr::write_volatile((elem + 4) as *mut u32, 0);
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                std::ptr::write_volatile((q.used + 2) as *mut u16, used_idx.wrapping_add(1));
                q.seen = q.seen.wrapping_add(1);
            }
        }
        out
    }
}

fn open(offered: u64, offloads: Offloads) -> (VirtioNet<Fake>, Fake) {
    let fake = Fake(Arc::new(Mutex::new(State {
        offered,
        ..State::default()
    })));
    let config = Config {
        rx_ring_size: 64,
        tx_ring_size: 64,
        offloads,
        ..Config::default()
    };
    let dev = VirtioNet::init(fake.clone(), "fake", &config, VirtioOptions::default()).unwrap();
    (dev, fake)
}

/// A TCP/IPv4 frame (RFC 791, RFC 793) of `payload` bytes with value =
/// offset, checksums zero: only a device or the fallback can fill them.
fn tcp_frame(payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[38..42].copy_from_slice(&7000u32.to_be_bytes());
    f[46] = 5 << 4;
    f[47] = 0x18; // ACK PSH
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    f
}

/// `frame` as a packet of the device's pool, cut into segments of at most
/// `segment` bytes (chained if longer).
fn packet(dev: &VirtioNet<Fake>, frame: &[u8], segment: usize) -> Packet {
    let pool = dev.mempool(0);
    let mut chunks = frame.chunks(segment);
    let mut head = pool.alloc().unwrap();
    let first = chunks.next().unwrap();
    head.set_len(first.len()).unwrap();
    head.copy_from_slice(first);
    for c in chunks {
        let mut s = pool.alloc().unwrap();
        s.set_len(c.len()).unwrap();
        s.copy_from_slice(c);
        head.append(s);
    }
    head
}

fn send(dev: &mut VirtioNet<Fake>, p: Packet) {
    let mut batch = PacketBatch::with_capacity(1);
    batch.push(p);
    assert_eq!(dev.tx_batch(0, &mut batch), 1);
    assert!(batch.is_empty());
}

/// What a device does with NEEDS_CSUM (§5.1.6.2): the ones' complement of
/// the sum from csum_start to the end, stored at csum_start + csum_offset.
fn complete(h: &NetHeader, frame: &mut [u8]) {
    let start = h.csum_start as usize;
    let c = !offload::fold(offload::ones_sum(&frame[start..], 0));
    let at = start + h.csum_offset as usize;
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Both checksums of a TCP/IPv4 frame verify (RFC 1071: the sum over the
/// IPv4 header, and over pseudo-header + TCP segment, is 0xFFFF).
fn checksums_ok(f: &[u8]) -> bool {
    let ip = offload::fold(offload::ones_sum(&f[14..34], 0)) == 0xFFFF;
    let tcp_len = f.len() - 34;
    let pseudo = offload::ones_sum(&f[26..34], 6 + tcp_len as u64);
    ip && offload::fold(offload::ones_sum(&f[34..], pseudo)) == 0xFFFF
}

const OFFERED: u64 = net::F_ANY_LAYOUT | net_header::F_CSUM | net_header::F_HOST_TSO4;

fn switches_on() -> Offloads {
    Offloads {
        tx_checksum: true,
        tso: TsoMode::Multi,
        ..Offloads::default()
    }
}

#[test]
fn a_chained_packet_arrives_whole_with_and_without_any_layout() {
    for offered in [OFFERED, OFFERED & !net::F_ANY_LAYOUT] {
        let (mut dev, fake) = open(offered, Offloads::default());
        // Switches off: the offload features are not negotiated even
        // though offered.
        assert_eq!(dev.features() & (net_header::F_CSUM | net_header::F_HOST_TSO4), 0);
        let frame = tcp_frame(10_000);
        let p = packet(&dev, &frame, 2048);
        assert_eq!(p.segment_count(), 5);
        send(&mut dev, p);
        let got = fake.take_tx();
        assert_eq!(got.len(), 1, "one packet");
        assert_eq!(got[0].0, NetHeader::default(), "no request: an all-zero header");
        assert_eq!(got[0].1, frame, "every byte of every segment, in order");
        assert_eq!(dev.stats().tx_packets, 1);
        assert_eq!(dev.stats().tx_bytes, frame.len() as u64);
        assert_eq!(dev.tx_software_fallback(), 0);
    }
}

#[test]
fn a_checksum_request_goes_into_the_header_when_offered_and_switched_on() {
    let (mut dev, fake) = open(OFFERED, switches_on());
    assert_eq!(dev.features() & OFFERED, OFFERED);
    let frame = tcp_frame(500);
    let mut p = packet(&dev, &frame, 2048);
    p.set_tx_offload(TxOffload {
        flags: TX_IP_CSUM | TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 0,
    });
    send(&mut dev, p);
    let mut got = fake.take_tx();
    assert_eq!(got.len(), 1);
    let (h, ref mut f) = got[0];
    // §5.1.6.2: NEEDS_CSUM (1), csum_start 14 + 20, csum_offset 16 (TCP).
    assert_eq!((h.flags, h.gso_type, h.csum_start, h.csum_offset), (1, 0, 34, 16));
    assert!(!checksums_ok(f), "the TCP checksum is left to the device");
    complete(&h, f);
    assert!(checksums_ok(f), "completed as the spec says, both checksums verify");
    assert_eq!(f[54..], frame[54..]);
    assert_eq!(dev.tx_software_fallback(), 0);
}

#[test]
fn a_tso_request_goes_into_the_header_as_one_chain() {
    let (mut dev, fake) = open(OFFERED, switches_on());
    let frame = tcp_frame(10_000);
    let mut p = packet(&dev, &frame, 2048);
    p.set_tx_offload(TxOffload {
        flags: TX_TSO,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 1000,
    });
    send(&mut dev, p);
    let got = fake.take_tx();
    assert_eq!(got.len(), 1, "the device segments");
    let (h, f) = &got[0];
    // §5.1.6.2: gso_type TCPV4 (1), gso_size the MSS, hdr_len 54, and
    // NEEDS_CSUM with any gso_type.
    assert_eq!(
        *h,
        NetHeader {
            flags: 1,
            gso_type: 1,
            hdr_len: 54,
            gso_size: 1000,
            csum_start: 34,
            csum_offset: 16
        }
    );
    assert_eq!(f.len(), frame.len());
    assert_eq!(f[54..], frame[54..]);
    assert_eq!(dev.tx_software_fallback(), 0);
}

#[test]
fn without_the_features_requests_are_done_in_software_and_counted() {
    // Offered but switched off, and switched on but not offered: both
    // fall back.
    for (offered, offloads) in [(OFFERED, Offloads::default()), (net::F_ANY_LAYOUT, switches_on())] {
        let (mut dev, fake) = open(offered, offloads);
        assert_eq!(dev.features() & (net_header::F_CSUM | net_header::F_HOST_TSO4), 0);
        let frame = tcp_frame(500);
        let mut p = packet(&dev, &frame, 2048);
        p.set_tx_offload(TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        });
        send(&mut dev, p);
        let got = fake.take_tx();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, NetHeader::default());
        assert!(checksums_ok(&got[0].1), "checksums filled in software");
        assert_eq!(dev.tx_software_fallback(), 1);

        let frame = tcp_frame(10_000);
        let mut p = packet(&dev, &frame, 2048);
        p.set_tx_offload(TxOffload {
            flags: TX_TSO,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 1000,
        });
        send(&mut dev, p);
        let got = fake.take_tx();
        assert_eq!(got.len(), 10, "10 000 bytes at MSS 1000");
        let mut payload = Vec::new();
        for (k, (h, f)) in got.iter().enumerate() {
            assert_eq!(*h, NetHeader::default());
            assert_eq!(f.len(), 54 + 1000);
            assert!(checksums_ok(f), "segment {k}");
            // RFC 793: sequence numbers advance by the payload before.
            assert_eq!(u32::from_be_bytes([f[38], f[39], f[40], f[41]]), 7000 + 1000 * k as u32);
            payload.extend_from_slice(&f[54..]);
        }
        assert_eq!(payload, frame[54..]);
        assert_eq!(dev.tx_software_fallback(), 2);
        assert_eq!(dev.queue_stats()[0].tx_software_fallback, 2);
        // tx_packets counts what the device consumed (as a NIC's GPTC
        // counts frames on the wire): 1 frame, then 10 segments.
        assert_eq!(dev.stats().tx_packets, 11, "frames the device used");
    }
}

#[test]
fn a_chain_longer_than_the_queue_is_linearised_and_a_bad_request_refused() {
    let (mut dev, fake) = open(OFFERED, switches_on());
    // 64 entries; a 71-segment chain could never be posted (§2.4.5).
    let frame = tcp_frame(1000);
    let p = packet(&dev, &frame, 15);
    assert_eq!(p.segment_count(), 71); // 1054 bytes in 15-byte pieces
    send(&mut dev, p);
    let got = fake.take_tx();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, frame);
    // A request whose lengths do not fit: refused, counted, nothing sent.
    let mut p = packet(&dev, &frame[..40], 2048);
    p.set_tx_offload(TxOffload {
        flags: TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 0,
    });
    send(&mut dev, p);
    assert!(fake.take_tx().is_empty());
    assert_eq!(dev.stats().tx_invalid, 1);
    assert!(dev.last_tx_error().unwrap().contains("do not fit"));
}

/// DMA domains (crate::domain): a packet from memory no device can reach
/// (a CPU-only pool) never reaches a descriptor with its own address — the
/// fake device maps every descriptor address through the IOVA map and
/// would fail on it — it is copied into the device's pool, bytes intact,
/// and counted; a chained one segment by segment, its request kept.
#[test]
fn a_packet_of_another_dma_domain_is_copied_and_counted() {
    let (mut dev, fake) = open(OFFERED, switches_on());
    let cpu = Mempool::new("cpu-only", 16, MemoryKind::CpuOnly).unwrap();
    let frame = tcp_frame(500);
    let mut p = cpu.alloc().unwrap();
    p.set_len(frame.len()).unwrap();
    p.copy_from_slice(&frame);
    send(&mut dev, p);
    let got = fake.take_tx();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, frame);
    assert_eq!(dev.stats().tx_copied, 1);

    // A chain of three CPU-only segments with a checksum request.
    let frame = tcp_frame(3000);
    let mut chunks = frame.chunks(1200);
    let first = chunks.next().unwrap();
    let mut head = cpu.alloc().unwrap();
    head.set_len(first.len()).unwrap();
    head.copy_from_slice(first);
    for c in chunks {
        let mut s = cpu.alloc().unwrap();
        s.set_len(c.len()).unwrap();
        s.copy_from_slice(c);
        head.append(s);
    }
    head.set_tx_offload(TxOffload {
        flags: TX_IP_CSUM | TX_TCP_CSUM,
        l2_len: 14,
        l3_len: 20,
        l4_len: 20,
        mss: 0,
    });
    send(&mut dev, head);
    let got = fake.take_tx();
    assert_eq!(got.len(), 1);
    let mut bytes = got[0].1.clone();
    complete(&got[0].0, &mut bytes);
    assert!(checksums_ok(&bytes), "the request survived the copy");
    assert_eq!(bytes[54..], frame[54..]);
    assert_eq!(dev.stats().tx_copied, 2);
    assert_eq!(cpu.free_count(), 16, "the originals went back to their pool");
}
