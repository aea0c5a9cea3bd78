//! The 82599's receive switches on the software 82599: RSS (hash and queue
//! choice), receive checksum verdicts, and DCA's register programming.
//! Switched off, the software path gives the same verdicts; impossible
//! combinations are refused at init with a clear message.

mod datasheet;
use datasheet::*;
use oxnet_driver::ixgbe::IxgbeDevice;
use oxnet_driver::offload::{self, checksum_verdict};
use oxnet_driver::packet::{FLAG_CSUM_BAD, FLAG_CSUM_CHECKED, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_GOOD, FLAG_RSS_HASH};
use oxnet_driver::{rss, Config, Device, MemoryKind, Offloads, PacketBatch};
use oxnet_sim::{SimRegisters, World};

fn open(port: &str, queues: u16, offloads: Offloads) -> oxnet_driver::Result<IxgbeDevice<SimRegisters>> {
    let config = Config {
        rx_queues: queues,
        tx_queues: queues,
        rx_ring_size: 128,
        tx_ring_size: 128,
        offloads,
        ..Config::default()
    };
    IxgbeDevice::init(
        World::global().port(port),
        &format!("sim:{port}"),
        &config,
        MemoryKind::Plain,
    )
}

/// Ethernet + IPv4 + UDP/TCP from 10.0.0.`host`:`port` with valid checksums.
fn frame(host: u8, source_port: u16, tcp: bool) -> Vec<u8> {
    let l4 = if tcp { 20 } else { 8 };
    let payload = 46;
    let mut f = vec![0u8; 34 + l4 + payload];
    f[0..6].copy_from_slice(&[0xFF; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x07]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + l4 + payload) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = if tcp { 6 } else { 17 };
    f[26..30].copy_from_slice(&[10, 0, 0, host]);
    f[30..34].copy_from_slice(&[10, 0, 1, 1]);
    f[34..36].copy_from_slice(&source_port.to_be_bytes());
    f[36..38].copy_from_slice(&9000u16.to_be_bytes());
    if tcp {
        f[46] = 5 << 4;
        f[47] = 0x10;
    } else {
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    }
    for (i, b) in f[34 + l4..].iter_mut().enumerate() {
        *b = i as u8;
    }
    offload::set_ipv4_checksum(&mut f[14..34]);
    let protocol = f[23];
    offload::set_l4_checksum(&mut f, 14, 20, protocol);
    f
}

fn receive_all(dev: &mut IxgbeDevice<SimRegisters>, queue: u16) -> PacketBatch {
    let mut batch = PacketBatch::with_capacity(64);
    dev.rx_batch(queue, &mut batch, 64);
    batch
}

#[test]
fn rss_hashes_flows_and_spreads_them_over_the_queues() {
    let port = "feat-rss";
    let queues = 4;
    let mut dev = open(
        port,
        queues,
        Offloads {
            rss: true,
            ..Offloads::default()
        },
    )
    .unwrap();
    let reta = rss::default_reta(queues);
    let mut expected = vec![Vec::new(); queues as usize];
    for k in 0..32u16 {
        let tcp = k % 2 == 0;
        let f = frame(1 + k as u8, 1000 + k, tcp);
        // TCP and UDP over IPv4: the 4-tuple (MRQC TcpIPv4, UdpIPv4).
        let hash = rss::hash_ipv4_tcp(
            &rss::DEFAULT_KEY,
            [10, 0, 0, 1 + k as u8],
            [10, 0, 1, 1],
            1000 + k,
            9000,
        );
        expected[rss::queue_of(&reta, hash) as usize].push((f[26..38].to_vec(), hash));
        World::global().inject(port, &f);
    }
    let mut used = 0;
    for q in 0..queues {
        let batch = receive_all(&mut dev, q);
        let got: Vec<_> = batch.iter().map(|p| (p[26..38].to_vec(), p.meta().rss_hash)).collect();
        assert_eq!(got, expected[q as usize], "queue {q}: flows and hashes");
        for p in batch.iter() {
            assert_ne!(p.meta().flags & FLAG_RSS_HASH, 0);
        }
        used += (!got.is_empty()) as usize;
        let stats = &dev.queue_stats()[q as usize];
        assert_eq!(stats.hw_rx_packets, got.len() as u64, "QPRC({q})");
    }
    assert_eq!(used, queues as usize, "32 flows land on every one of 4 queues");
}

#[test]
fn rss_off_keeps_everything_on_queue_0_and_more_queues_need_it() {
    let mut dev = open("feat-rss-off", 1, Offloads::default()).unwrap();
    World::global().inject("feat-rss-off", &frame(1, 1000, true));
    let batch = receive_all(&mut dev, 0);
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].meta().flags & FLAG_RSS_HASH, 0);
    assert_eq!(batch[0].meta().rss_hash, 0);
    let error = open("feat-rss-off-4", 4, Offloads::default())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("--rss"), "{error}");
    let error = open(
        "feat-rss-17",
        17,
        Offloads {
            rss: true,
            ..Offloads::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(error.contains("at most 16"), "{error}");
}

#[test]
fn rx_checksum_on_reports_the_verdict_and_off_software_gives_the_same() {
    let mut good = frame(3, 1234, true);
    let mut bad_l4 = good.clone();
    bad_l4[60] ^= 0xFF;
    let mut bad_ip = frame(4, 1234, false);
    bad_ip[24] ^= 0x01;
    let frames = [std::mem::take(&mut good), bad_l4, std::mem::take(&mut bad_ip)];
    let mut verdicts = Vec::new();
    for (port, on) in [("feat-rxcsum-on", true), ("feat-rxcsum-off", false)] {
        let mut dev = open(
            port,
            1,
            Offloads {
                rx_checksum: on,
                ..Offloads::default()
            },
        )
        .unwrap();
        for f in &frames {
            World::global().inject(port, f);
        }
        let batch = receive_all(&mut dev, 0);
        assert_eq!(batch.len(), 3, "{port}");
        let flags: Vec<u32> = batch.iter().map(|p| p.meta().flags & FLAG_CSUM_CHECKED).collect();
        assert_eq!(flags, vec![if on { FLAG_CSUM_CHECKED } else { 0 }; 3], "{port}");
        verdicts.push(batch.iter().map(offload::rx_checksum).collect::<Vec<_>>());
    }
    assert_eq!(verdicts[0], verdicts[1], "hardware and software verdicts differ");
    assert_eq!(verdicts[0][0], FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD);
    assert_ne!(verdicts[0][1] & FLAG_CSUM_BAD, 0);
    assert_ne!(verdicts[0][2] & FLAG_CSUM_BAD, 0);
    assert_eq!(verdicts[0][1], checksum_verdict(&frames[1]));
}

/// The model has no DCA behaviour to observe (it stores DCA_CTRL and
/// DCA_RXCTRL/TXCTRL only), so this test checks the exact values the driver
/// writes against the datasheet's bit layout (§8.2.3.11.1/2/4), including
/// the bits that must stay 0 (reserved bit 12 and everything not named).
#[test]
fn dca_writes_the_datasheet_register_values_and_off_disables_it() {
    let dev = open(
        "feat-dca",
        2,
        Offloads {
            dca: true,
            rss: true,
            ..Offloads::default()
        },
    )
    .unwrap();
    let r = |offset| dev.read_register(offset);
    // DCA_CTRL = DCA_DIS clear, DCA_MODE 0001b (DCA 1.0): exactly 0x2.
    assert_eq!(r(DCA_CTRL), DCA_CTRL_MODE_10);
    assert_eq!(DCA_CTRL_MODE_10, 0x0000_0002);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    for q in 0..2u32 {
        // Queue q is tagged with core q (wrapped to the cores there are).
        let cpu = (q % cores) << DCA_CPUID_SHIFT;
        let rx = r(dca_rxctrl(q));
        assert_eq!(
            rx,
            0x0000_00E0 | cpu,
            "DCA_RXCTRL({q}) = {rx:#010x}: bits 5, 6, 7 and the CPU ID"
        );
        assert_eq!(rx & DCA_RXCTRL_RESERVED_12, 0, "bit 12 reserved (§4.6.7)");
        let tx = r(dca_txctrl(q));
        assert_eq!(
            tx,
            0x0000_0020 | cpu,
            "DCA_TXCTRL({q}) = {tx:#010x}: bit 5 and the CPU ID"
        );
    }
    let off = open("feat-dca-off", 1, Offloads::default()).unwrap();
    assert_eq!(off.read_register(DCA_CTRL), DCA_CTRL_DISABLE);
    // Without DCA too, receive set-up clears reserved bit 12 (§4.6.7; the
    // model powers on with it set) and nothing else of DCA_RXCTRL.
    assert_eq!(off.read_register(dca_rxctrl(0)), 0);
}

/// The RSS hash the NIC reports, against a literal: the first IPv4/TCP
/// vector of Microsoft's RSS verification suite ("Verifying the RSS Hash
/// Calculation": 66.9.149.187:2794 -> 161.142.100.80:1766 with the default
/// key gives 0x51ccc178; 82599 §7.1.2.8.1 uses the same Toeplitz hash and
/// key layout). Not computed by the driver's own rss module.
#[test]
fn rss_hash_matches_the_published_verification_vector() {
    let port = "feat-rss-vector";
    let mut dev = open(
        port,
        2,
        Offloads {
            rss: true,
            ..Offloads::default()
        },
    )
    .unwrap();
    let mut f = frame(1, 2794, true);
    f[26..30].copy_from_slice(&[66, 9, 149, 187]);
    f[30..34].copy_from_slice(&[161, 142, 100, 80]);
    f[34..36].copy_from_slice(&2794u16.to_be_bytes());
    f[36..38].copy_from_slice(&1766u16.to_be_bytes());
    World::global().inject(port, &f);
    let hashes: Vec<u32> = (0..2)
        .flat_map(|q| {
            receive_all(&mut dev, q)
                .iter()
                .map(|p| p.meta().rss_hash)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(hashes, [0x51cc_c178]);
}
