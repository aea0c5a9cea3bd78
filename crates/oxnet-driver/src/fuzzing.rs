//! Bodies of the fuzz targets in `fuzz/` (cargo-fuzz), kept here so that a
//! normal `cargo test` replays every corpus and regression file and runs a
//! bounded number of seeded random inputs (docs/fuzzing.md). Each function
//! takes arbitrary bytes and must never panic; the properties it checks
//! panic on purpose when broken.

use crate::advanced::{RxQueue, DESCRIPTOR_SIZE};
use crate::device::{Config, Offloads};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::offload;
use crate::packet::{PacketBatch, TxOffload};
use crate::pci::PciAddress;
use crate::regs::RegisterAccess;
use crate::spec::Spec;

/// The names of the targets, as in `fuzz/fuzz_targets/` and
/// `fuzz/corpus/`.
pub const TARGETS: &[&str] = &["frame_offload", "spec_pci", "vhost_user_reply", "rx_writeback"];

/// Runs the target `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "frame_offload" => frame_offload(data),
        "spec_pci" => spec_pci(data),
        "vhost_user_reply" => vhost_user_reply(data),
        "rx_writeback" => rx_writeback(data),
        _ => panic!("no fuzz target {name}"),
    }
}

fn u16_at(data: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([
        data.get(at).copied().unwrap_or(0),
        data.get(at + 1).copied().unwrap_or(0),
    ])
}

thread_local! {
    static POOL: Mempool = Mempool::new("fuzz", 256, MemoryKind::Plain).expect("fuzz pool");
}

/// Frame parsing, checksum verdicts, and offload preparation: the first 8
/// bytes are a transmit offload request (flags, L2/L3/L4 lengths, MSS), the
/// rest the frame. Software checksums, TSO checks and segmentation run on
/// it as the transmit path would run them.
pub fn frame_offload(data: &[u8]) {
    let (request, frame) = data.split_at(data.len().min(8));
    let _ = offload::parse(frame);
    let _ = offload::checksum_verdict(frame);
    let flags = u16_at(request, 0) as u32;
    let request = TxOffload {
        flags: flags & (offload_flag_mask()),
        l2_len: request.get(2).copied().unwrap_or(0),
        l3_len: u16_at(request, 3),
        l4_len: request.get(5).copied().unwrap_or(0),
        mss: u16_at(request, 6),
    };
    let mut copy = frame.to_vec();
    let _ = offload::fill_checksums(&mut copy, &request);
    if let Ok(parsed) = offload::offload_for(frame, request.flags, request.mss) {
        let mut copy = frame.to_vec();
        // A request derived from the frame itself always fits it.
        offload::fill_checksums(&mut copy, &parsed).expect("offload_for's request fits its frame");
    }
    POOL.with(|pool| {
        let Ok(mut packet) = pool.alloc() else { return };
        if packet.set_len(frame.len()).is_err() {
            return;
        }
        packet.copy_from_slice(frame);
        packet.set_tx_offload(request);
        let _ = offload::check_tso(&packet);
        if request.flags & crate::packet::TX_TSO != 0 && request.mss >= 64 {
            let mut out = Vec::new();
            let _ = offload::segment(&packet, pool, &mut out);
        }
    });
}

fn offload_flag_mask() -> u32 {
    use crate::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO, TX_UDP_CSUM};
    TX_IP_CSUM | TX_TCP_CSUM | TX_UDP_CSUM | TX_TSO
}

/// Device specs and PCI addresses: parsing any string gives an answer, and
/// an accepted PCI address prints back to the same text (lower case).
pub fn spec_pci(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = Spec::parse(&text);
    if let Some(address) = PciAddress::parse(&text) {
        let printed = address.to_string();
        assert_eq!(PciAddress::parse(&printed), Some(address), "{text:?} -> {printed}");
        let canonical = if text.len() == 7 {
            format!("0000:{text}")
        } else {
            text.to_string()
        };
        assert_eq!(
            printed,
            canonical.to_ascii_lowercase(),
            "{text:?} is accepted but not canonical"
        );
    }
}

/// A vhost-user back-end's reply: the first 4 bytes name the request that
/// was sent, the next 12 are the reply header, the rest the payload.
pub fn vhost_user_reply(data: &[u8]) {
    let code = u32::from(u16_at(data, 0)) | u32::from(u16_at(data, 2)) << 16;
    let header = data.get(4..16).unwrap_or(&[]);
    if let Ok(size) = crate::virtio::vhost_user::parse_reply_header(code, header) {
        assert!(size <= 64, "accepted a {size}-byte payload");
        let payload = &data[16..];
        if size == 8 && payload.len() >= 8 {
            let _ = u64::from_ne_bytes(payload[..8].try_into().expect("8 bytes"));
        }
    }
}

/// Registers that store nothing: the receive path writes RDT only.
struct NoRegisters;

impl RegisterAccess for NoRegisters {
    fn read32(&self, _offset: u32) -> u32 {
        0
    }
    fn write32(&self, _offset: u32, _value: u32) {}
}

/// The 82599's receive path fed hostile descriptor write-backs: the first
/// byte picks the path (fast, offloads without RSC, RSC) and the batch
/// size; every following 16 bytes are written over the next descriptor
/// (status, length, NEXTP, RSCCNT, RSS type as the fuzzer likes; DD is
/// forced on), then the queue receives. Every packet delivered must lie in
/// its buffers, and no buffer may be lost.
pub fn rx_writeback(data: &[u8]) {
    let Some((&mode, descriptors)) = data.split_first() else {
        return;
    };
    let config = Config {
        rx_ring_size: 32,
        tx_ring_size: 32,
        batch_size: 8,
        pool_size: 128,
        offloads: Offloads {
            rx_checksum: mode & 1 != 0,
            rsc: mode & 2 != 0,
            ..Offloads::default()
        },
        ..Config::default()
    };
    let rss = mode & 4 != 0;
    let mut queue = RxQueue::<crate::ixgbe::Nic82599>::new(0, &config, MemoryKind::Plain, "fuzz", rss)
        .expect("queue on plain memory");
    queue.arm_all().expect("arm");
    let max = match mode >> 3 {
        0 => usize::MAX,
        n => n as usize,
    };
    let size = queue.ring_size();
    let pool_size = queue.mempool().size();
    let mut batch = PacketBatch::with_capacity(64);
    let mut next = 0usize;
    let mut received = 0;
    for chunk in descriptors.chunks(DESCRIPTOR_SIZE) {
        let mut bytes = [0u8; DESCRIPTOR_SIZE];
        bytes[..chunk.len()].copy_from_slice(chunk);
        bytes[8] |= 1; // DD (dword 2, bit 0)
        queue.write_descriptor_for_fuzzing(next % size, &bytes);
        next += 1;
        if next.is_multiple_of(4) {
            received += queue.rx_batch(&NoRegisters, &mut batch, max);
        }
    }
    received += queue.rx_batch(&NoRegisters, &mut batch, max);
    assert_eq!(received, batch.len());
    for packet in batch.iter() {
        for segment in packet.segments() {
            assert!(segment.len() <= segment.capacity(), "a segment longer than its buffer");
        }
    }
    drop(batch);
    // Every buffer is in the ring, in the spare batch, in a pending chain,
    // or back in the pool: never more taken than the pool has.
    assert!(queue.mempool().free_count() <= pool_size);
    drop(queue);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn files(kind: &str, target: &str) -> Vec<PathBuf> {
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz"))
            .join(kind)
            .join(target);
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// xorshift64*: a fixed sequence, so a failure repeats.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    /// Every corpus file and every kept crash replays without a panic, and
    /// each target has a corpus (the directories exist and are not empty).
    #[test]
    fn corpus_and_regressions_replay() {
        for target in TARGETS {
            let corpus = files("corpus", target);
            assert!(!corpus.is_empty(), "fuzz/corpus/{target} is empty");
            for path in corpus.iter().chain(files("regressions", target).iter()) {
                let data = std::fs::read(path).unwrap();
                run(target, &data);
            }
        }
    }

    /// A bounded random run per target (seeded, well under a second each):
    /// random bytes, and corpus files with random bytes changed.
    #[test]
    fn seeded_random_inputs() {
        for (t, target) in TARGETS.iter().enumerate() {
            let corpus: Vec<Vec<u8>> = files("corpus", target)
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect();
            let mut rng = Rng(0x0A0E_7000 + t as u64);
            let runs = if *target == "rx_writeback" { 300 } else { 3000 };
            for _ in 0..runs {
                let mut data = match (rng.next() % 2, corpus.is_empty()) {
                    (0, false) => corpus[(rng.next() % corpus.len() as u64) as usize].clone(),
                    _ => {
                        let len = (rng.next() % 600) as usize;
                        (0..len).map(|_| rng.next() as u8).collect()
                    }
                };
                if !data.is_empty() {
                    for _ in 0..1 + rng.next() % 8 {
                        let at = (rng.next() % data.len() as u64) as usize;
                        data[at] = rng.next() as u8;
                    }
                }
                run(target, &data);
            }
        }
    }
}
