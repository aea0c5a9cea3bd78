//! DMA domains (docs/dma-domains.md): a packet whose buffer lies in
//! another DMA domain than the transmitting device's never reaches a
//! descriptor with its own address; the driver copies it into its own
//! domain, with the bytes intact, and counts it in `tx_copied`.
//!
//! The descriptors are read back from the ring the model was given
//! (TDBAL/TDBAH), and each buffer address is looked up in the process's
//! IOVA map for the domain of the memory it lies in. Ports have their own
//! names, so the tests run in parallel. Tests whose name contains "huge"
//! need free 2 MiB huge pages and root: they skip with a message unless
//! `OXNET_EXPECT_HUGEPAGES` is set (scripts/test.sh sets it after
//! reserving pages), and then they must work.

mod common;
use common::chained;
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::memory::{iova_domain, iova_to_virt};
use oxnet_driver::offload;
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM};
use oxnet_driver::{Config, Device, DmaDomain, MemoryKind, Mempool, Offloads, Packet, PacketBatch, RegisterAccess};
use oxnet_sim::{SimRegisters, World};

// 82599 datasheet §8.2.3.9.5 / §8.2.3.9.6 / §8.2.3.9.7: TDBAL[n], TDBAH[n]
// and TDLEN[n] at 0x06000 / 0x06004 / 0x06008 + 0x40 * n.
const TDBAL0: u32 = 0x06000;
const TDBAH0: u32 = 0x06004;
const TDLEN0: u32 = 0x06008;
// §7.2.3.2.4: DTYP (bits 23:20 of dword 2) of an advanced data descriptor.
const DTYP_DATA: u32 = 0b0011;

fn open(port: &str, memory: MemoryKind, offloads: Offloads) -> IxgbeDevice<SimRegisters> {
    let config = Config {
        rx_ring_size: 128,
        tx_ring_size: 128,
        offloads,
        memory: Some(memory),
        ..Config::default()
    };
    common::capturing_sim_port(port, &config)
}

/// A 60..=1514-byte frame whose bytes say which one it is.
fn numbered(i: usize, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x88B5u16.to_be_bytes()); // local experimental EtherType
    for (k, b) in f[14..].iter_mut().enumerate() {
        *b = (i * 31 + k * 7) as u8;
    }
    f[14..18].copy_from_slice(&(i as u32).to_be_bytes());
    f
}

fn packet(pool: &Mempool, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.copy_from_slice(bytes);
    p
}

/// The frames `port` sent since the last call, FCS removed.
fn wire(port: &str) -> Vec<Vec<u8>> {
    World::global()
        .frames_on_wire(port)
        .into_iter()
        .map(|mut f| {
            f.truncate(f.len() - 4);
            f
        })
        .collect()
}

fn no_faults(port: &str) {
    let faults: Vec<String> = World::global()
        .faults()
        .into_iter()
        .filter(|f| f.contains(&format!("'{port}'")))
        .collect();
    assert!(
        faults.is_empty(),
        "{port}: {} model faults, first {:?}",
        faults.len(),
        &faults[..faults.len().min(3)]
    );
}

/// Buffer address and DTYP of descriptors `0..n` of transmit queue 0 of
/// `port`, read from the ring the model was given.
fn descriptors(port: &str, n: usize) -> Vec<(u64, u32)> {
    let regs = World::global().port(port);
    let base = (u64::from(regs.read32(TDBAH0)) << 32) | u64::from(regs.read32(TDBAL0));
    let len = regs.read32(TDLEN0) as usize;
    assert!(n * 16 <= len, "{port}: {n} descriptors in a ring of {len} bytes");
    let ring = iova_to_virt(base, len).unwrap_or_else(|| panic!("{port}: ring at {base:#x} is not DMA memory"));
    (0..n)
        .map(|i| {
            // SAFETY: i * 16 + 16 <= len bytes of live DMA memory (checked
            // by iova_to_virt); the device is idle (everything was sent).
            let d = unsafe { std::slice::from_raw_parts(ring.as_ptr().add(i * 16), 16) };
            let address = u64::from_le_bytes(d[0..8].try_into().unwrap());
            let dword2 = u32::from_le_bytes(d[8..12].try_into().unwrap());
            (address, (dword2 >> 20) & 0xF)
        })
        .collect()
}

fn batch_of(packets: Vec<Packet>) -> PacketBatch {
    let mut batch = PacketBatch::with_capacity(packets.len());
    for p in packets {
        batch.push(p);
    }
    batch
}

/// Plain path (every switch off): CPU-only packets (a domain no device can
/// read, and that the model cannot reach either) are copied; the device's
/// own packets are not; a chain goes through the software path and is
/// copied there. Order and bytes are kept.
#[test]
fn a_foreign_packet_never_reaches_a_descriptor_with_its_own_address() {
    let port = "dom-plain";
    let mut dev = open(port, MemoryKind::Plain, Offloads::default());
    let own = dev.mempool(0);
    let cpu = Mempool::new("cpu-only", 256, MemoryKind::CpuOnly).unwrap();
    assert_eq!(own.dma_domain(), DmaDomain::Virtual);
    assert_eq!(dev.dma_domain(), DmaDomain::Virtual);
    // 100 packets: every third one from the device's own pool, the others
    // from CPU-only memory.
    let frames: Vec<Vec<u8>> = (0..100).map(|i| numbered(i, 60 + i * 14)).collect();
    let packets: Vec<Packet> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| packet(if i % 3 == 0 { &own } else { &cpu }, f))
        .collect();
    let original: Vec<u64> = packets.iter().map(|p| p.data_iova()).collect();
    let foreign = (0..100).filter(|i| i % 3 != 0).count() as u64;
    let mut batch = batch_of(packets);
    assert_eq!(dev.tx_batch(0, &mut batch), 100);
    no_faults(port);
    assert_eq!(wire(port), frames, "every frame, in order, bytes intact");
    for (i, (address, dtyp)) in descriptors(port, 100).into_iter().enumerate() {
        assert_eq!(dtyp, DTYP_DATA);
        assert_eq!(
            iova_domain(address),
            Some(DmaDomain::Virtual),
            "descriptor {i}: {address:#x}"
        );
        if i % 3 == 0 {
            assert_eq!(
                address, original[i],
                "descriptor {i}: the device's own packet is not copied"
            );
        } else {
            assert_ne!(
                address, original[i],
                "descriptor {i}: a CPU-only address reached the ring"
            );
        }
    }
    let q = &dev.queue_stats()[0];
    assert_eq!(q.tx_copied, foreign);
    assert_eq!(q.tx_software_fallback, 0);
    assert_eq!(q.tx_copy_pool_empty, 0);
    assert_eq!(dev.stats().tx_copied, foreign);
    // What `oxnet stats` and the commands' --json summaries show.
    let report = oxnet::apps::stats::StatsReport::read(&mut dev);
    let json = report.json();
    assert!(
        json.contains(&format!(
            "\"tx_ring_full\":0,\"tx_invalid\":0,\"tx_copied\":{foreign},\"tx_copy_pool_empty\":0"
        )),
        "{json}"
    );
    assert!(
        json.contains(&format!(
            "\"tx_copied\":{foreign},\"tx_copy_pool_empty\":0,\"tx_descriptors_per_packet\""
        )),
        "{json}"
    );
    assert!(
        // One line "tx_copied <n>", whatever the column width.
        report
            .text()
            .lines()
            .any(|line| line.split_whitespace().eq(["tx_copied", &foreign.to_string()])),
        "{}",
        report.text()
    );
    let summary = oxnet::report::device_json("sim:dom-plain", &report.device);
    assert!(summary.contains(&format!("\"tx_copied\":{foreign},")), "{summary}");
    assert_eq!(cpu.free_count(), 256, "the originals went back to their pool");

    // A chain of CPU-only segments with every switch off: linearised by the
    // software path, which copies it into the device's domain too.
    let f = numbered(1000, 1400);
    let mut batch = batch_of(vec![chained(&cpu, &f, 500)]);
    assert_eq!(dev.tx_batch(0, &mut batch), 1);
    no_faults(port);
    assert_eq!(dev.stats().tx_invalid, 0, "{:?}", dev.tx_queue(0).unwrap().last_error());
    assert_eq!(wire(port), vec![f]);
    let (address, _) = descriptors(port, 101)[100];
    assert_eq!(iova_domain(address), Some(DmaDomain::Virtual));
    let q = &dev.queue_stats()[0];
    assert_eq!((q.tx_copied, q.tx_software_fallback), (foreign + 1, 1));
}

/// Offload path (checksum insertion on): a foreign chain (RSC-like
/// segments) is copied segment by segment and sent as a chain of data
/// descriptors, each pointing into the device's domain; a checksum
/// request survives the copy and the NIC completes it.
#[test]
fn foreign_chains_are_copied_segment_by_segment_on_the_offload_path() {
    let port = "dom-offload";
    let offloads = Offloads {
        tx_checksum: true,
        ..Offloads::default()
    };
    let mut dev = open(port, MemoryKind::Plain, offloads);
    let cpu = Mempool::new("cpu-only chains", 64, MemoryKind::CpuOnly).unwrap();
    // Three segments of a 4700-byte (jumbo-sized) chain, 2048 + 2048 + 604:
    // as the 82599 hands out an RSC packet in 2 KiB receive buffers.
    let long = numbered(1, 4700);
    let chain = chained(&cpu, &long, 2048);
    assert_eq!(chain.segment_count(), 3);
    // A TCP frame asking for its checksum.
    let mut tcp = numbered(2, 54 + 100);
    tcp[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    tcp[14] = 0x45;
    tcp[16..18].copy_from_slice(&(140u16).to_be_bytes());
    tcp[20..22].copy_from_slice(&[0, 0]); // not a fragment
    tcp[22] = 64;
    tcp[23] = 6;
    tcp[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    tcp[46] = 5 << 4;
    tcp[24..26].copy_from_slice(&[0, 0]); // checksums to be filled in
    tcp[50..52].copy_from_slice(&[0, 0]);
    let mut request = packet(&cpu, &tcp);
    request.set_tx_offload(offload::offload_for(&tcp, TX_IP_CSUM | TX_TCP_CSUM, 0).unwrap());
    let mut batch = batch_of(vec![chain, request]);
    assert_eq!(dev.tx_batch(0, &mut batch), 2);
    no_faults(port);
    let sent = wire(port);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], long, "the chain arrives whole");
    assert_eq!(&sent[1][..24], &tcp[..24]);
    assert_eq!(&sent[1][26..50], &tcp[26..50]);
    assert_eq!(&sent[1][52..], &tcp[52..]);
    assert_eq!(
        offload::checksum_verdict(&sent[1]),
        oxnet_driver::packet::FLAG_L4_CSUM_GOOD | oxnet_driver::packet::FLAG_IP_CSUM_GOOD,
        "the request survived the copy"
    );
    // Ring: 3 data descriptors, 1 context descriptor, 1 data descriptor.
    let ring = descriptors(port, 5);
    let data: Vec<u64> = ring.iter().filter(|d| d.1 == DTYP_DATA).map(|d| d.0).collect();
    assert_eq!(data.len(), 4, "{ring:x?}");
    for address in data {
        assert_eq!(iova_domain(address), Some(DmaDomain::Virtual), "{address:#x}");
    }
    let q = &dev.queue_stats()[0];
    assert_eq!(q.tx_copied, 2);
    assert_eq!(q.tx_descriptors_per_packet[3], 1, "the chain: three data descriptors");
    assert_eq!(q.tx_software_fallback, 0);
    assert_eq!(cpu.free_count(), 64);
}

/// Devices refuse CPU-only memory for their own rings and pools.
#[test]
fn a_device_cannot_be_opened_on_cpu_only_memory() {
    let config = Config {
        memory: Some(MemoryKind::CpuOnly),
        ..Config::default()
    };
    let err = IxgbeDevice::init(
        World::global().port("dom-refuse"),
        "sim:dom-refuse",
        &config,
        MemoryKind::Plain,
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("CPU-only memory cannot hold a device's rings"), "{err}");
}

/// True if huge pages were promised; otherwise says why the test skips.
fn huge_pages_expected(test: &str) -> bool {
    if std::env::var_os("OXNET_EXPECT_HUGEPAGES").is_some() {
        return true;
    }
    println!(
        "{test}: skipped: OXNET_EXPECT_HUGEPAGES is not set (scripts/test.sh sets it as root after \
         reserving 2 MiB huge pages)"
    );
    false
}

/// Forwards `frames` injected at `from` to `to`, 32 at a time, and returns
/// what `to` put on the wire.
fn forward(
    from_port: &str,
    from: &mut IxgbeDevice<SimRegisters>,
    to_port: &str,
    to: &mut IxgbeDevice<SimRegisters>,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for chunk in frames.chunks(32) {
        for f in chunk {
            World::global().inject(from_port, f);
        }
        let mut batch = PacketBatch::with_capacity(32);
        assert_eq!(from.rx_batch(0, &mut batch, 32), chunk.len(), "{from_port}");
        assert_eq!(
            to.tx_batch(0, &mut batch),
            chunk.len(),
            "{to_port}: {:?} {:?} {:?}",
            to.stats(),
            to.queue_stats()[0],
            to.tx_queue(0).unwrap().last_error()
        );
        out.extend(wire(to_port));
        // A port without a wire partner receives what it sends: take
        // those frames off its receive ring.
        let mut echo = PacketBatch::with_capacity(32);
        assert_eq!(
            to.rx_batch(0, &mut echo, 32),
            chunk.len(),
            "{to_port}: its own frames back"
        );
    }
    no_faults(from_port);
    no_faults(to_port);
    out
}

/// Two devices of different domains forward to each other: the software
/// 82599 on huge pages (physical addresses) and on plain memory (virtual
/// addresses). Each copies exactly the other's packets, and every
/// descriptor points into its own domain.
#[test]
fn huge_page_and_plain_sim_ports_forward_both_ways_with_copies() {
    if !huge_pages_expected("huge_page_and_plain_sim_ports_forward_both_ways_with_copies") {
        return;
    }
    let (huge_port, plain_port) = ("dom-huge", "dom-huge-plain");
    let mut huge = open(huge_port, MemoryKind::HugePages, Offloads::default());
    let mut plain = open(plain_port, MemoryKind::Plain, Offloads::default());
    assert_eq!(huge.dma_domain(), DmaDomain::Physical);
    let frames: Vec<Vec<u8>> = (0..300).map(|i| numbered(i, 60 + (i * 5) % 1455)).collect();
    // huge -> plain: physical-domain packets sent by the plain port.
    assert_eq!(forward(huge_port, &mut huge, plain_port, &mut plain, &frames), frames);
    // plain -> huge: virtual-domain packets sent by the huge-page port.
    assert_eq!(forward(plain_port, &mut plain, huge_port, &mut huge, &frames), frames);
    for (port, dev, domain) in [
        (plain_port, &mut plain, DmaDomain::Virtual),
        (huge_port, &mut huge, DmaDomain::Physical),
    ] {
        for (i, (address, _)) in descriptors(port, 128).into_iter().enumerate() {
            assert_eq!(
                iova_domain(address),
                Some(domain),
                "{port} descriptor {i}: {address:#x}"
            );
        }
        assert_eq!(dev.queue_stats()[0].tx_copied, 300, "{port}");
        assert_eq!(dev.stats().tx_copied, 300, "{port}");
    }
}
