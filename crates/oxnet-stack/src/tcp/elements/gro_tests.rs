//! TCPGRO: segments in through PlugSource, exact packets out.

use super::harness::{from_client, seg, server_key, to_client, Rig, SERVER};
use crate::wire::{TcpFlags, TcpOptions};

const A: TcpFlags = TcpFlags::empty();

fn rig(args: &str) -> Rig {
    Rig::new(&format!("PlugSource -> g :: TCPGRO({args}) -> PlugSink;"))
}

/// Data from the client: `len` bytes at `seq` (byte i of the stream is
/// `i as u8`), ACK 7, the flags given besides ACK.
fn data(sport: u16, seq: u32, len: usize, flags: TcpFlags) -> Vec<u8> {
    let payload: Vec<u8> = (seq..seq + len as u32).map(|i| i as u8).collect();
    from_client(&seg(sport, 80, seq, Some(7), flags, len), &payload)
}

fn counters(rig: &Rig) -> Vec<u64> {
    [
        "count",
        "merged",
        "flushed",
        "full",
        "bad_checksums",
        "not_mergeable_flags",
        "not_mergeable_out_of_order",
        "not_mergeable_header",
        "not_mergeable_size",
        "not_mergeable_other",
    ]
    .iter()
    .map(|h| rig.handler(&format!("g.{h}")).parse().unwrap())
    .collect()
}

/// Four in-order segments of one flow, PSH on the last, become one: the
/// bytes of the segment the sender would have sent whole (4000 bytes,
/// PSH), except the TCP checksum field, which is the first segment's
/// (the merged segment carries the "verified" flags instead).
#[test]
fn in_order_segments_of_a_flow_become_one_segment() {
    let mut rig = rig("");
    let parts = vec![
        data(5000, 100, 1000, A),
        data(5000, 1100, 1000, A),
        data(5000, 2100, 1000, A),
        data(5000, 3100, 1000, TcpFlags::PSH),
    ];
    let first = parts[0].clone();
    let out = rig.exchange(parts);
    assert_eq!(out.len(), 1);
    let mut whole = data(5000, 100, 4000, TcpFlags::PSH);
    whole[36..38].copy_from_slice(&first[36..38]);
    assert_eq!(out[0], whole);
    assert_eq!(counters(&rig), [4, 3, 1, 0, 0, 0, 0, 0, 0, 0]);
}

/// What does not merge, and why: a gap (out of order), another ACK
/// number (header), a FIN (flags), a segment larger than the first
/// (size), a bad checksum; every packet comes out, in order.
#[test]
fn segments_that_may_not_merge_pass_through_counted_by_reason() {
    let mut rig = rig("");
    let mut other_ack = seg(5000, 80, 1600, Some(8), A, 500);
    other_ack.window = 65535;
    let mut bad = data(5000, 3200, 100, A);
    let last = bad.len() - 1;
    bad[last] ^= 0xFF;
    let frames = vec![
        data(5000, 100, 500, A),              // starts a merge
        data(5000, 1100, 500, A),             // a gap: out of order, starts another
        from_client(&other_ack, &[1; 500]),   // ACK 8: header, starts another
        data(5000, 2100, 500, TcpFlags::FIN), // FIN: flags
        data(5000, 2600, 500, A),             // starts another
        data(5000, 3100, 600, A),             // larger than 500: size
        bad,                                  // bad checksum
    ];
    let sent = frames.clone();
    let out = rig.exchange(frames);
    assert_eq!(out, sent, "nothing merged, nothing changed, the order kept");
    assert_eq!(counters(&rig), [7, 0, 0, 0, 1, 1, 1, 1, 1, 0]);
}

/// MAX_SEGMENTS bounds a merge (the next segment starts another), and
/// two flows interleaved in one batch merge each on its own, in the
/// order of their first segments; a shorter segment ends its merge.
#[test]
fn merges_are_bounded_and_flows_merge_apart() {
    let mut rig = rig("MAX_SEGMENTS 2");
    let out = rig.exchange(vec![
        data(5000, 0, 100, A),
        data(6000, 0, 100, A),
        data(5000, 100, 100, A),
        data(6000, 100, 50, A),  // shorter: joins and ends flow 6000's merge
        data(5000, 200, 100, A), // flow 5000 is full: starts another
        data(6000, 150, 100, A), // starts another
    ]);
    let whole = |sport, seq, len| {
        let mut w = data(sport, seq, len, A);
        let first = data(sport, seq, 100.min(len), A);
        w[36..38].copy_from_slice(&first[36..38]);
        w
    };
    assert_eq!(
        out,
        vec![
            whole(5000, 0, 200),
            whole(6000, 0, 150),
            data(5000, 200, 100, A),
            data(6000, 150, 100, A)
        ]
    );
    assert_eq!(counters(&rig), [6, 2, 2, 1, 0, 0, 0, 0, 0, 0]);
}

/// Timestamps are compared as every other option byte (Linux): a
/// different TSval ends the merge; the same one merges.
#[test]
fn option_bytes_must_be_equal() {
    let mut rig = rig("");
    let with_ts = |seq: u32, tsval: u32| {
        let mut s = seg(5000, 80, seq, Some(7), A, 100);
        s.options = TcpOptions {
            timestamps: Some((tsval, 1)),
            ..TcpOptions::default()
        };
        from_client(&s, &[3; 100])
    };
    let out = rig.exchange(vec![with_ts(0, 9), with_ts(100, 9), with_ts(200, 10)]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1], with_ts(200, 10));
    assert_eq!(counters(&rig), [3, 1, 1, 0, 0, 0, 0, 1, 0, 0]);
}

/// Behind TCPGRO the stack reads a merged segment whole: the bytes
/// arrive in order, RCV.NXT moves past all of them, and one ACK answers
/// (delayed ACKs off: one segment, one ACK).
#[test]
fn the_stack_takes_a_merged_segment() {
    let mut rig = Rig::new(
        "TCPSettings(DELAYED_ACK false);
         PlugSource -> g :: TCPGRO -> tcp :: TCPStack -> PlugSink;",
    );
    rig.info
        .borrow_mut()
        .listen(crate::wire::IpEndpoint::new(SERVER, 80), 4)
        .unwrap();
    let out = rig.exchange(vec![from_client(&seg(5000, 80, 1000, None, TcpFlags::SYN, 0), &[])]);
    let (syn_ack, _) = to_client(&out[0]);
    let ack = (syn_ack.seq + 1).0;
    assert!(rig
        .exchange(vec![from_client(&seg(5000, 80, 1001, Some(ack), A, 0), &[])])
        .is_empty());
    let part = |seq: u32, byte: u8, len: usize| from_client(&seg(5000, 80, seq, Some(ack), A, len), &vec![byte; len]);
    let out = rig.exchange(vec![part(1001, 1, 1000), part(2001, 2, 1000), part(3001, 3, 500)]);
    assert_eq!(rig.handler("g.merged"), "2");
    assert_eq!(out.len(), 1, "one ACK for the merged segment");
    let (answer, _) = to_client(&out[0]);
    assert_eq!(answer.ack, Some(crate::wire::TcpSeqNumber(3501)));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(5000, 80)).unwrap()).unwrap();
    let mut got = Vec::new();
    for p in &tcb.recv_queue {
        got.extend_from_slice(p);
    }
    let mut want = vec![1; 1000];
    want.extend([2; 1000]);
    want.extend([3; 500]);
    assert_eq!(got, want);
    assert_eq!(tcb.recv_queued, 2500);
}

/// A merged segment that starts in data already received is trimmed
/// across its buffers (TCPCheckSeqNo, `tcp::chain`): 1100 bytes old, the
/// whole first part and 100 bytes of the second; the new 900 are queued
/// after the 1600 before, and the ACK covers them.
#[test]
fn a_merged_segment_overlapping_old_data_is_trimmed_across_its_buffers() {
    let mut rig = Rig::new(
        "TCPSettings(DELAYED_ACK false);
         PlugSource -> g :: TCPGRO -> tcp :: TCPStack -> PlugSink;",
    );
    rig.info
        .borrow_mut()
        .listen(crate::wire::IpEndpoint::new(SERVER, 80), 4)
        .unwrap();
    let out = rig.exchange(vec![from_client(&seg(5000, 80, 1000, None, TcpFlags::SYN, 0), &[])]);
    let ack = (to_client(&out[0]).0.seq + 1).0;
    rig.exchange(vec![from_client(&seg(5000, 80, 1001, Some(ack), A, 0), &[])]);
    let stream: Vec<u8> = (0..2500u32).map(|i| (i % 253) as u8).collect();
    let part = |from: usize, len: usize| {
        from_client(
            &seg(5000, 80, 1001 + from as u32, Some(ack), A, len),
            &stream[from..from + len],
        )
    };
    rig.exchange(vec![part(0, 1600)]);
    let out = rig.exchange(vec![part(500, 1000), part(1500, 1000)]);
    assert_eq!(rig.handler("g.merged"), "1");
    assert_eq!(rig.handler("cs.trimmed"), "1");
    let (answer, _) = to_client(out.last().unwrap());
    assert_eq!(answer.ack, Some(crate::wire::TcpSeqNumber(1001 + 2500)));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(5000, 80)).unwrap()).unwrap();
    let mut got = Vec::new();
    for p in &tcb.recv_queue {
        got.extend_from_slice(p);
    }
    assert_eq!(got, stream);
}
