//! Receive side coalescing (§7.11) on the software 82599: in-order TCP
//! segments of a flow arrive as one chained packet; switched off, the same
//! segments arrive one by one with the same payload bytes; an MTU whose
//! frames do not fit RSCCTL.MAXDESC buffers is refused at init.

use oxnet_driver::ixgbe::regs::*;
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::offload;
use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_L4_CSUM_GOOD};
use oxnet_driver::{Config, Device, MemoryKind, Offloads, PacketBatch};
use oxnet_sim::{SimRegisters, World};

fn config(rsc: bool) -> Config {
    Config {
        rx_ring_size: 128,
        tx_ring_size: 128,
        offloads: Offloads {
            rsc,
            rx_checksum: true,
            ..Offloads::default()
        },
        ..Config::default()
    }
}

fn open(port: &str, config: &Config) -> oxnet_driver::Result<IxgbeDevice<SimRegisters>> {
    IxgbeDevice::init(
        World::global().port(port),
        &format!("sim:{port}"),
        config,
        MemoryKind::Plain,
    )
}

/// A TCP/IPv4 segment of flow `port` with sequence number `sequence` and
/// `payload` bytes (value = offset in the stream), checksums valid.
fn segment(source_port: u16, sequence: u32, payload: usize, flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[0..6].copy_from_slice(&[0xFF; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&source_port.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[38..42].copy_from_slice(&sequence.to_be_bytes());
    f[46] = 5 << 4;
    f[47] = flags;
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (sequence as usize + i) as u8;
    }
    offload::set_ipv4_checksum(&mut f[14..34]);
    offload::set_l4_checksum(&mut f, 14, 20, 6);
    f
}

/// Ten in-order segments of 1000 bytes of one flow.
fn burst(source_port: u16) -> Vec<Vec<u8>> {
    (0..10)
        .map(|k| segment(source_port, 5000 + 1000 * k, 1000, 0x10))
        .collect()
}

fn payload_of(p: &oxnet_driver::Packet) -> Vec<u8> {
    let mut bytes = Vec::new();
    p.copy_chain_to(&mut bytes);
    bytes[54..].to_vec()
}

#[test]
fn rsc_on_coalesces_a_burst_into_one_chained_packet_and_off_gives_the_same_bytes() {
    let port = "feat-rsc-on";
    let mut dev = open(port, &config(true)).unwrap();
    let r = |offset| dev.read_register(offset);
    assert_eq!(r(RFCTL) & RFCTL_RSC_DIS, 0);
    assert_eq!(r(rscctl(0)) & RSCCTL_RSCEN, RSCCTL_RSCEN);
    assert_eq!((r(rscctl(0)) >> RSCCTL_MAXDESC_SHIFT) & 0b11, 0b11, "MAXDESC = 16");
    assert_eq!(
        r(RDRXCTL) & (RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX),
        RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX
    );
    World::global().inject_burst(port, &burst(7000));
    let mut batch = PacketBatch::with_capacity(32);
    assert_eq!(dev.rx_batch(0, &mut batch, 32), 1, "one coalesced packet");
    assert!(World::global().faults().iter().all(|f| !f.contains(port)));
    let p = &batch[0];
    assert_eq!(p.total_len(), 54 + 10_000);
    assert_eq!(
        p.segment_count(),
        (54 + 10_000usize).div_ceil(2048),
        "chained over 2 KiB buffers"
    );
    let mut head = Vec::new();
    p.copy_chain_to(&mut head);
    assert_eq!(
        u16::from_be_bytes([head[16], head[17]]) as usize,
        40 + 10_000,
        "IPv4 total length updated"
    );
    assert_eq!(
        offload::fold(offload::ones_sum(&head[14..34], 0)),
        0xFFFF,
        "IPv4 header checksum updated"
    );
    assert_eq!(
        p.meta().flags & (FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD),
        FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD
    );
    let coalesced = payload_of(p);

    // Off: ten packets, the same payload bytes in order.
    let port = "feat-rsc-off";
    let mut dev = open(port, &config(false)).unwrap();
    assert_eq!(dev.read_register(RFCTL) & RFCTL_RSC_DIS, RFCTL_RSC_DIS);
    World::global().inject_burst(port, &burst(7000));
    let mut batch = PacketBatch::with_capacity(32);
    assert_eq!(dev.rx_batch(0, &mut batch, 32), 10);
    let separate: Vec<u8> = batch.iter().flat_map(payload_of).collect();
    assert_eq!(coalesced, separate, "the same payload either way");
}

#[test]
fn rsc_closes_on_a_gap_on_fin_and_at_the_end_of_a_burst() {
    let port = "feat-rsc-close";
    let mut dev = open(port, &config(true)).unwrap();
    let mut frames = burst(7100);
    frames.remove(5); // a gap: segments 0-4 coalesce, 6-9 start anew
    frames.push(segment(7100, 15_000, 100, 0x11)); // FIN ends it, itself alone
    frames.push(segment(7200, 1, 500, 0x10)); // another flow, its own context
    World::global().inject_burst(port, &frames);
    let mut batch = PacketBatch::with_capacity(32);
    dev.rx_batch(0, &mut batch, 32);
    let lengths: Vec<usize> = batch.iter().map(|p| p.total_len() - 54).collect();
    // The order on the ring: the context closed by the gap, the one closed
    // by FIN, FIN itself, then the other flow closed at the end of the burst.
    assert_eq!(lengths, vec![5000, 4000, 100, 500]);
    // A burst of one frame (World::inject): closed at once.
    World::global().inject(port, &segment(7300, 1, 600, 0x10));
    batch.clear();
    assert_eq!(dev.rx_batch(0, &mut batch, 32), 1);
    assert!(!batch[0].is_chained());
}

#[test]
fn rsc_limits_a_packet_to_maxdesc_buffers() {
    let port = "feat-rsc-max4";
    let mut config = config(true);
    config.rsc_max_descriptors = 4;
    let mut dev = open(port, &config).unwrap();
    World::global().inject_burst(port, &burst(7400));
    let mut batch = PacketBatch::with_capacity(32);
    dev.rx_batch(0, &mut batch, 32);
    // 4 buffers of 2 KiB hold 54 + 8000 bytes at most: 8 segments, then 2.
    let lengths: Vec<usize> = batch.iter().map(|p| p.total_len() - 54).collect();
    assert_eq!(lengths, vec![8000, 2000]);
    assert!(batch.iter().all(|p| p.segment_count() <= 4));
}

#[test]
fn rsc_with_an_mtu_that_does_not_fit_maxdesc_is_refused() {
    let mut config = config(true);
    config.rsc_max_descriptors = 4;
    config.mtu = 9000;
    let error = open("feat-rsc-mtu", &config).err().unwrap().to_string();
    assert!(error.contains("MAXDESC") && error.contains("9000"), "{error}");
    config.rsc_max_descriptors = 5;
    let error = open("feat-rsc-5", &config).err().unwrap().to_string();
    assert!(error.contains("1, 4, 8 or 16"), "{error}");
}
