//! TCPSegmentation with TCPSettings' TSO: the large segments it hands to
//! the device, cut as the device cuts them (the driver's software
//! segmentation: the 82599's bytes, `oxnet_driver::offload`), are the
//! segments it sends without TSO, byte for byte in the TCP header and
//! payload; fewer packets leave the stack; retransmissions stay single.

use super::harness::{from_client, seg, to_client, Rig, SERVER};
use crate::tcp::socket::{TcpListener, TcpStream};
use crate::wire::{IpEndpoint, TcpFlags, TcpRepr, TcpSeqNumber};
use oxnet_driver::offload::{fill_checksums, offload_for, segment};
use oxnet_driver::packet::{TX_IP_CSUM, TX_TCP_CSUM, TX_TSO};
use oxnet_driver::{MemoryKind, Mempool};

const MSS: usize = 1000;

/// What the NIC does with a packet of a stack whose TCPSettings say
/// `TSO true` (so checksum offload too): segmentation beyond one MSS of
/// payload, else the checksums. Returns IP packets.
fn device(pool: &Mempool, ip: &[u8]) -> Vec<Vec<u8>> {
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(ip);
    let payload = frame.len() - 14 - 20 - ((frame[14 + 20 + 12] >> 4) as usize * 4);
    if payload > MSS {
        let mut p = pool.alloc().unwrap();
        let first = frame.len().min(p.capacity());
        p.set_len(first).unwrap();
        p.copy_from_slice(&frame[..first]);
        for chunk in frame[first..].chunks(pool.data_room()) {
            let mut b = pool.alloc().unwrap();
            b.set_len(chunk.len()).unwrap();
            b.copy_from_slice(chunk);
            p.append(b);
        }
        let head = &frame[..first];
        p.set_tx_offload(offload_for(head, TX_TSO, MSS as u16).unwrap());
        let mut out = Vec::new();
        segment(&p, pool, &mut out).unwrap();
        out.iter().map(|s| s[14..].to_vec()).collect()
    } else {
        let request = offload_for(&frame, TX_IP_CSUM | TX_TCP_CSUM, 0).unwrap();
        fill_checksums(&mut frame, &request).unwrap();
        vec![frame[14..].to_vec()]
    }
}

/// A connection the peer (the test, MSS 1000, no other option) opened to
/// port 81, accepted; and the stream and the server's ISS.
fn open(tso: bool) -> (Rig, TcpStream, TcpSeqNumber) {
    let mut rig = Rig::new(&format!(
        "TCPSettings(TSO {tso}, DELAYED_ACK false, INITIAL_WINDOW 10);
         PlugSource -> tcp :: TCPStack -> PlugSink;"
    ));
    let listener = TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, 81), 4).unwrap();
    let mut syn = seg(40000, 81, 1000, None, TcpFlags::SYN, 0);
    syn.options.mss = Some(MSS as u16);
    let out = rig.exchange(vec![from_client(&syn, &[])]);
    let iss = to_client(&out[0]).0.seq;
    rig.exchange(vec![from_client(
        &seg(40000, 81, 1001, Some((iss + 1).0), TcpFlags::empty(), 0),
        &[],
    )]);
    let stream = listener.try_accept().unwrap();
    std::mem::forget(listener);
    (rig, stream, iss)
}

/// The peer's ACK of everything up to `ack` (relative to ISS + 1).
fn ack(iss: TcpSeqNumber, ack: usize) -> Vec<u8> {
    from_client(
        &seg(40000, 81, 1001, Some((iss + 1 + ack).0), TcpFlags::empty(), 0),
        &[],
    )
}

/// 25 000 bytes written; the peer acknowledges the first round whole,
/// then 3500 bytes into the second (the middle of a segment, and of the
/// TSO packet that carried it), then nothing: the RTO sends one segment
/// from there. Returns what left the stack (IP packets) per step, and
/// TCPSegmentation's segments and tso counters.
fn run(tso: bool) -> (Vec<Vec<Vec<u8>>>, u64, u64, TcpSeqNumber) {
    let (mut rig, stream, iss) = open(tso);
    let data: Vec<u8> = (0..25_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(stream.try_write(&data), Ok(25_000));
    let mut steps = vec![rig.exchange(vec![])];
    steps.push(rig.exchange(vec![ack(iss, 10_000)]));
    steps.push(rig.exchange(vec![ack(iss, 13_500)]));
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    steps.push(rig.output.borrow_mut().drain(..).collect());
    let count = |h: &str| rig.handler(&format!("seg.{h}")).parse::<u64>().unwrap();
    (steps, count("segments"), count("tso"), iss)
}

/// The segments (checksums verified), their sequence numbers made
/// relative to the ISS (each run has its own).
fn parsed(packets: &[Vec<u8>], iss: TcpSeqNumber) -> Vec<(TcpRepr, Vec<u8>)> {
    packets
        .iter()
        .map(|p| {
            let (mut seg, payload) = to_client(p);
            seg.seq = TcpSeqNumber((seg.seq - iss) as u32);
            (seg, payload)
        })
        .collect()
}

#[test]
fn tso_segments_cut_by_the_device_are_the_software_segments() {
    let pool = Mempool::new("tso-device", 256, MemoryKind::Plain).unwrap();
    let (software, software_count, software_tso, iss_soft) = run(false);
    let (offloaded, offloaded_count, tso_packets, iss_tso) = run(true);
    assert_eq!(software_tso, 0);
    // Round 1: 10 segments of 1000 (the initial window); round 2: 11
    // (cwnd + 1 MSS for the ACK, RFC 5681 §3.1); the partial ACK opens
    // 4500 bytes: the last 4000, PSH on the last segment; the RTO: one
    // segment from SND.UNA.
    let lens: Vec<usize> = software.iter().map(|s| s.len()).collect();
    assert_eq!(lens, [10, 11, 4, 1]);
    let on_wire: Vec<Vec<Vec<u8>>> = offloaded
        .iter()
        .map(|step| step.iter().flat_map(|p| device(&pool, p)).collect())
        .collect();
    for (k, (soft, hard)) in software.iter().zip(&on_wire).enumerate() {
        let (a, b) = (parsed(soft, iss_soft), parsed(hard, iss_tso));
        let summary = |v: &[(TcpRepr, Vec<u8>)]| -> Vec<(u32, usize, String)> {
            v.iter()
                .map(|(s, p)| (s.seq.0, p.len(), format!("{:?}", s.flags)))
                .collect()
        };
        assert!(a == b, "step {k}: {:?} against {:?}", summary(&a), summary(&b));
    }
    // What left the stack: one packet per round with TSO.
    let packets: Vec<usize> = offloaded.iter().map(|s| s.len()).collect();
    assert_eq!(packets, [1, 1, 1, 1]);
    assert_eq!((software_count, offloaded_count, tso_packets), (26, 4, 3));
    // The retransmission: one MSS from the partial ACK (SND.UNA =
    // ISS + 1 + 13 500), not a TSO packet.
    let (rtx, payload) = &parsed(&on_wire[3], iss_tso)[0];
    assert_eq!(offloaded[3][0].len(), 20 + 20 + MSS);
    assert_eq!(payload.len(), MSS);
    assert_eq!(rtx.seq, TcpSeqNumber(1 + 13_500));
}
