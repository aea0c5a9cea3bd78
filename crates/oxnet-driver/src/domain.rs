//! DMA domains: which addresses a device can really use.
//!
//! A packet carries the IOVA of its buffer ([`Packet::data_iova`]), but an
//! IOVA means something only to the devices that share its address space:
//!
//! | domain | memory | IOVA is | who can use it |
//! |---|---|---|---|
//! | [`DmaDomain::Physical`] | huge pages ([`MemoryKind::HugePages`]) | the physical address (`/proc/self/pagemap`) | PCI devices used through sysfs (no IOMMU), legacy VirtIO (also behind vfio: it bypasses the IOMMU) |
//! | [`DmaDomain::Virtual`] | the plain-memory arena ([`MemoryKind::Plain`]) | the virtual address | the software 82599; vhost-user back-ends (they map the arena's memfd, guest address = our virtual address); PCI devices behind vfio (every arena allocation is mapped into every open container at IOVA = virtual address, [`crate::memory::DmaMapper`]) |
//! | [`DmaDomain::CpuOnly`] | ordinary private memory ([`MemoryKind::CpuOnly`]) | meaningless to devices | nobody but the CPU: not in the arena, not in the IOVA map, not mapped into any IOMMU |
//!
//! vfio needs no domain of its own: containers map *every* arena
//! allocation at its virtual address, those made before a container was
//! opened included, so a Virtual-domain IOVA is valid in all of them.
//!
//! A device reads (transmits) and writes (receives) only its own domain:
//! the domain of the memory it was opened with. Its receive pools are its
//! own, so received packets are always in its domain. A packet handed to
//! `tx_batch` from another domain is never given to the ring with its own
//! address: the driver copies it ([`copy_into`], every segment of a chain)
//! into a buffer of its own domain and counts it (`tx_copied`); if no
//! buffer is free, the packet stays with the caller as with a full ring
//! and that is counted too (`tx_copy_pool_empty`). Nothing is lost
//! silently.
//!
//! The check costs the 82599/82576 plain transmit path nothing per packet:
//! every buffer header holds its pool's domain (written once when the pool
//! is made), and a copy of it in the request word, next to the length
//! (rewritten with every reset of that word, at no extra store). The path
//! already loads length and request word together and compares them with
//! one bound; subtracting its own domain's value first
//! ([`crate::packet::plain_word_base`]) makes that same compare fail for a
//! packet of another domain, which then takes the slow path. Other drivers
//! compare [`Packet::dma_domain`] (one byte of the header line they read).

use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::Packet;

/// The address space an IOVA belongs to (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DmaDomain {
    /// IOVA = physical address (huge pages).
    Physical = 1,
    /// IOVA = virtual address inside the plain-memory arena.
    Virtual = 2,
    /// No device may be given this memory.
    CpuOnly = 3,
}

impl DmaDomain {
    /// The domain of memory of `kind`.
    #[inline]
    pub const fn of(kind: MemoryKind) -> DmaDomain {
        match kind {
            MemoryKind::HugePages => DmaDomain::Physical,
            MemoryKind::Plain => DmaDomain::Virtual,
            MemoryKind::CpuOnly => DmaDomain::CpuOnly,
        }
    }

    /// A short name for messages and statistics.
    pub const fn name(self) -> &'static str {
        match self {
            DmaDomain::Physical => "physical",
            DmaDomain::Virtual => "virtual",
            DmaDomain::CpuOnly => "cpu-only",
        }
    }
}

impl std::fmt::Display for DmaDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The memory a device puts its rings and receive buffers in: refuses
/// memory no device can reach (a ring there would hand the device a
/// meaningless address).
pub fn device_memory(kind: MemoryKind, spec: &str) -> Result<MemoryKind> {
    if DmaDomain::of(kind) == DmaDomain::CpuOnly {
        return Err(Error::Config(format!(
            "{spec}: CPU-only memory cannot hold a device's rings or receive buffers \
             (no device can reach it); use plain or huge-page memory"
        )));
    }
    Ok(kind)
}

/// True if every segment of `packet` lies in `domain`.
#[inline]
pub fn in_domain(packet: &Packet, domain: DmaDomain) -> bool {
    packet.segments().all(|segment| segment.dma_domain() == domain)
}

/// Copies `packet` — every segment of a chain — into buffers of `pool`,
/// with the same bytes, metadata and offload request. The copy is a chain
/// when the data does not fit one buffer (each buffer filled to its data
/// room). `None` if `pool` has too few free buffers; nothing stays
/// allocated then.
pub fn copy_into(packet: &Packet, pool: &Mempool) -> Option<Packet> {
    let room = pool.data_room();
    let mut left = packet.total_len();
    let mut segments = packet.segments();
    let mut source: &[u8] = &[];
    // On a failed allocation `head` is dropped: the partial copy goes back.
    let mut head: Option<Packet> = None;
    loop {
        let len = left.min(room);
        let mut buffer = pool.alloc().ok()?;
        buffer.set_len(len).ok()?;
        let mut at = 0;
        while at < len {
            while source.is_empty() {
                // total_len() is the sum of the segments' lengths, so the
                // segments do not run out before `left` does.
                source = segments.next().map(|s| &s[..])?;
            }
            let n = source.len().min(len - at);
            buffer[at..at + n].copy_from_slice(&source[..n]);
            source = &source[n..];
            at += n;
        }
        left -= len;
        match head.as_mut() {
            None => head = Some(buffer),
            Some(chain) => chain.append(buffer),
        }
        if left == 0 {
            break;
        }
    }
    let mut out = head?;
    out.copy_meta_from(packet);
    out.set_tx_offload(packet.tx_offload());
    Some(out)
}

/// `packet` as a packet the devices of `pool`'s domain can use: itself if
/// every segment already lies in that domain, otherwise a copy in `pool`
/// ([`copy_into`]; the original is freed). `Err(packet)` gives the
/// original back, untouched, when `pool` has no buffer free: the caller
/// keeps it, as with a full ring, and counts it.
///
/// This is what a transmit path calls for each packet that fails the
/// one-compare check `packet.dma_domain() == own domain` (chained packets:
/// [`in_domain`]).
pub fn into_domain(packet: Packet, pool: &Mempool) -> std::result::Result<Packet, Packet> {
    if in_domain(&packet, pool.dma_domain()) {
        return Ok(packet);
    }
    match copy_into(&packet, pool) {
        Some(copy) => Ok(copy),
        None => Err(packet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{TxOffload, TX_TCP_CSUM};

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn packet(pool: &Mempool, data: &[u8]) -> Packet {
        let mut p = pool.alloc().unwrap();
        p.set_len(data.len()).unwrap();
        p.copy_from_slice(data);
        p
    }

    fn chain_bytes(p: &Packet) -> Vec<u8> {
        let mut out = Vec::new();
        p.copy_chain_to(&mut out);
        out
    }

    #[test]
    fn pools_carry_the_domain_of_their_memory() {
        let plain = Mempool::new("plain", 4, MemoryKind::Plain).unwrap();
        let cpu = Mempool::new("cpu", 4, MemoryKind::CpuOnly).unwrap();
        assert_eq!(plain.dma_domain(), DmaDomain::Virtual);
        assert_eq!(cpu.dma_domain(), DmaDomain::CpuOnly);
        assert_eq!(plain.alloc().unwrap().dma_domain(), DmaDomain::Virtual);
        assert_eq!(cpu.alloc().unwrap().dma_domain(), DmaDomain::CpuOnly);
        assert_eq!(DmaDomain::of(MemoryKind::HugePages), DmaDomain::Physical);
    }

    #[test]
    fn cpu_only_memory_is_invisible_to_devices() {
        let cpu = Mempool::new("cpu", 4, MemoryKind::CpuOnly).unwrap();
        let p = packet(&cpu, &bytes(60));
        // The software device models do their DMA through the IOVA map:
        // CPU-only memory is not in it.
        assert!(crate::memory::iova_to_virt(p.data_iova(), 60).is_none());
        assert_eq!(crate::memory::iova_domain(p.data_iova()), None);
        assert!(device_memory(MemoryKind::CpuOnly, "sim:x").is_err());
        assert!(device_memory(MemoryKind::Plain, "sim:x").is_ok());
    }

    #[test]
    fn a_packet_of_the_same_domain_is_not_copied() {
        let pool = Mempool::new("own", 4, MemoryKind::Plain).unwrap();
        let p = packet(&pool, &bytes(100));
        let iova = p.data_iova();
        let p = into_domain(p, &pool).unwrap();
        assert_eq!(p.data_iova(), iova, "the same buffer");
        assert_eq!(pool.free_count(), 3);
    }

    #[test]
    fn a_foreign_packet_is_copied_with_its_metadata_and_request() {
        let cpu = Mempool::new("cpu", 4, MemoryKind::CpuOnly).unwrap();
        let own = Mempool::new("own", 4, MemoryKind::Plain).unwrap();
        let data = bytes(1514);
        let mut p = packet(&cpu, &data);
        p.meta_mut().rss_hash = 0xABCD;
        let request = TxOffload {
            flags: TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        };
        p.set_tx_offload(request);
        let copy = into_domain(p, &own).unwrap();
        assert_eq!(copy.dma_domain(), DmaDomain::Virtual);
        assert!(!copy.is_chained());
        assert_eq!(&copy[..], &data[..]);
        assert_eq!(copy.meta().rss_hash, 0xABCD);
        assert_eq!(copy.tx_offload(), request);
        assert_eq!(cpu.free_count(), 4, "the original went back to its pool");
        assert_eq!(own.free_count(), 3);
    }

    #[test]
    fn every_segment_of_a_chain_is_copied() {
        let cpu = Mempool::new("cpu", 8, MemoryKind::CpuOnly).unwrap();
        let own = Mempool::new("own", 8, MemoryKind::Plain).unwrap();
        let data = bytes(2048 + 2048 + 700);
        let mut head = packet(&cpu, &data[..2048]);
        head.append(packet(&cpu, &data[2048..4096]));
        head.append(packet(&cpu, &data[4096..]));
        // A chain whose head is in the own domain but a segment is not is
        // foreign too.
        let copy = into_domain(head, &own).unwrap();
        assert_eq!(copy.segment_count(), 3);
        assert_eq!(copy.total_len(), data.len());
        assert!(copy.segments().all(|s| s.dma_domain() == DmaDomain::Virtual));
        assert_eq!(chain_bytes(&copy), data);
        assert_eq!(cpu.free_count(), 8);

        let mut mixed = packet(&own, &data[..100]);
        mixed.append(packet(&cpu, &data[100..300]));
        assert!(!in_domain(&mixed, DmaDomain::Virtual));
        let copy = into_domain(mixed, &own).unwrap();
        assert!(in_domain(&copy, DmaDomain::Virtual));
        assert_eq!(copy.segment_count(), 1, "300 bytes fit one buffer");
        assert_eq!(chain_bytes(&copy), &data[..300]);
    }

    #[test]
    fn a_large_single_buffer_becomes_a_chain_of_full_buffers() {
        let big = Mempool::with_layout("big", 2, 128, 9216, MemoryKind::CpuOnly).unwrap();
        let own = Mempool::new("own", 8, MemoryKind::Plain).unwrap();
        let data = bytes(9000);
        let copy = into_domain(packet(&big, &data), &own).unwrap();
        let lens: Vec<usize> = copy.segments().map(|s| s.len()).collect();
        assert_eq!(lens, vec![2048, 2048, 2048, 2048, 808]);
        assert_eq!(chain_bytes(&copy), data);
    }

    #[test]
    fn without_free_buffers_the_packet_comes_back_untouched() {
        let cpu = Mempool::new("cpu", 4, MemoryKind::CpuOnly).unwrap();
        let own = Mempool::new("own", 2, MemoryKind::Plain).unwrap();
        let data = bytes(5000); // needs three 2 KiB buffers, two exist
        let mut p = packet(&cpu, &data[..2048]);
        p.append(packet(&cpu, &data[2048..4096]));
        p.append(packet(&cpu, &data[4096..]));
        let back = into_domain(p, &own).unwrap_err();
        assert_eq!(chain_bytes(&back), data);
        assert_eq!(back.dma_domain(), DmaDomain::CpuOnly);
        assert_eq!(own.free_count(), 2, "the partial copy was freed");
        assert_eq!(own.alloc_failures(), 1);
    }
}
