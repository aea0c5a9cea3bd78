//! SACK-based loss recovery (RFC 6675) through the elements, where the
//! scripts cannot reach: the window rule of the connection deciding the
//! reduction, the stack without TCPSackRecovery keeping NewReno, the
//! handlers counting bad, stale and D-SACK blocks, the bound and
//! reneging.

use super::harness::*;
use crate::tcp::tcb::Tcb;
use crate::wire::{IpEndpoint, TcpFlags, TcpOptions, TcpRepr, TcpSeqNumber};

const CPORT: u16 = 40000;

/// A rig around `stack` (the text of a compound named `Stack`, or
/// TCPStack's own) with a listener on port 80.
fn rig(stack: Option<String>) -> Rig {
    let config = match stack {
        Some(text) => format!("{text}\nsrc :: PlugSource -> tcp :: Stack -> out :: PlugSink;"),
        None => "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink;".to_string(),
    };
    let rig = Rig::new(&config);
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 4).unwrap();
    rig
}

/// The client's segment to port 80 acknowledging `ack` (relative to the
/// server's ISN) with SACK `blocks` (relative too).
fn ack(iss: TcpSeqNumber, ack: u32, blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut s = seg(CPORT, 80, 1001, Some((iss + ack as usize).0), TcpFlags::empty(), 0);
    for (slot, &(l, r)) in s.options.sack_blocks.iter_mut().zip(blocks) {
        *slot = Some((iss + l as usize, iss + r as usize));
    }
    from_client(&s, &[])
}

/// A handshake with SACK permitted and an MSS of 1000 (no timestamps),
/// then 10000 bytes from the server: ten segments, 1..10001. Returns the
/// server's ISN.
fn ten_segments(rig: &mut Rig) -> TcpSeqNumber {
    ten_segments_and(rig, false)
}

/// [`ten_segments`], and the server's FIN after them if `fin` (as a
/// close would: FIN-WAIT-1).
fn ten_segments_and(rig: &mut Rig, fin: bool) -> TcpSeqNumber {
    let syn = TcpRepr {
        options: TcpOptions {
            mss: Some(1000),
            sack_permitted: true,
            ..TcpOptions::default()
        },
        ..seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0)
    };
    let iss = to_client(&rig.exchange(vec![from_client(&syn, &[])])[0]).0.seq;
    rig.exchange(vec![ack(iss, 1, &[])]);
    {
        let mut info = rig.info.borrow_mut();
        let r = info.lookup(&server_key(CPORT, 80)).unwrap();
        let tcb = info.tcbs.get_mut(r).unwrap();
        assert!(tcb.sack_permitted);
        tcb.send_buffer.extend(std::iter::repeat_n(b'x', 10_000));
        if fin {
            tcb.fin_queued = true;
            tcb.state = crate::tcp::tcb::TcpState::FinWait1;
        }
        info.want_output(r);
    }
    let out = rig.exchange(vec![]);
    assert_eq!(out.len(), 10);
    iss
}

fn with_tcb<T>(rig: &Rig, f: impl FnOnce(&Tcb) -> T) -> T {
    let info = rig.info.borrow();
    let r = info.lookup(&server_key(CPORT, 80)).expect("the connection");
    f(info.tcbs.get(r).unwrap())
}

/// The relative sequence numbers of the data segments in `out`.
fn data_seqs(iss: TcpSeqNumber, out: &[Vec<u8>]) -> Vec<i32> {
    out.iter()
        .map(|b| to_client(b))
        .filter(|(_, p)| !p.is_empty())
        .map(|(s, _)| s.seq - iss)
        .collect()
}

/// The first segment acknowledged, then three duplicates SACKing 2001
/// to 3001, 4001 and 5001: 1001:2001 is lost.
fn lose_the_second(rig: &mut Rig, iss: TcpSeqNumber) -> Vec<Vec<u8>> {
    rig.exchange(vec![ack(iss, 1001, &[])]);
    let mut out = Vec::new();
    for right in [3001, 4001, 5001] {
        out.extend(rig.exchange(vec![ack(iss, 1001, &[(2001, right)])]));
    }
    out
}

#[test]
fn sack_recovery_reduces_the_window_by_the_rule_of_the_connection() {
    // NewReno: half of FlightSize (9000).
    let mut reno = rig(None);
    let iss = ten_segments(&mut reno);
    let out = lose_the_second(&mut reno, iss);
    assert_eq!(data_seqs(iss, &out), vec![1001]);
    assert_eq!(with_tcb(&reno, |t| (t.cc.cwnd(), t.cc.ssthresh())), (4500, 4500));
    // CUBIC (TCPCubicAck in TCPNewRenoAck's place): β_cubic = 0.7 of
    // FlightSize, W_max the 11 segments of cwnd before; no inflation.
    let cubic = super::TCP_STACK
        .replace("TCPStack", "Stack")
        .replace("TCPNewRenoAck", "TCPCubicAck");
    let mut cubic = rig(Some(cubic));
    let iss = ten_segments(&mut cubic);
    let out = lose_the_second(&mut cubic, iss);
    assert_eq!(data_seqs(iss, &out), vec![1001]);
    assert_eq!(with_tcb(&cubic, |t| (t.cc.cwnd(), t.cc.ssthresh())), (6300, 6300));
    assert_eq!(with_tcb(&cubic, |t| t.cc.cubic().unwrap().w_max()), 11.0);
    assert_eq!(cubic.handler("sack.recoveries"), "1");
    assert_eq!(cubic.handler("sackrtx.retransmits"), "1");
    assert_eq!(cubic.handler("cc.recoveries"), "0", "not NewReno's recovery");
}

#[test]
fn without_tcp_sack_recovery_a_sack_connection_keeps_newreno() {
    let stack = super::TCP_STACK
        .replace("TCPStack", "Stack")
        .replace("-> sack :: TCPSackRecovery ", "")
        .replace("-> sackrtx :: TCPSackRetransmit ", "")
        .replace("  sackrtx[1] -> output;\n", "");
    assert!(!stack.contains("Sack"));
    let mut rig = rig(Some(stack));
    let iss = ten_segments(&mut rig);
    let out = lose_the_second(&mut rig, iss);
    assert_eq!(data_seqs(iss, &out), vec![1001]);
    // RFC 5681 §3.2 step 3: ssthresh + 3 SMSS, inflated.
    assert_eq!(with_tcb(&rig, |t| (t.cc.cwnd(), t.cc.ssthresh())), (7500, 4500));
    assert!(!with_tcb(&rig, |t| t.sack.active));
    assert_eq!(rig.handler("cc.recoveries"), "1");
}

#[test]
fn bad_stale_and_duplicate_blocks_are_counted_and_not_taken() {
    let mut rig = rig(None);
    let iss = ten_segments(&mut rig);
    rig.exchange(vec![ack(iss, 2001, &[])]);
    // A D-SACK below the ACK (RFC 2883 §4), a stale block, a block past
    // SND.MAX and an inverted one.
    let out = rig.exchange(vec![ack(
        iss,
        2001,
        &[(1001, 2001), (1, 1001), (9001, 10_002), (5001, 4001)],
    )]);
    assert!(out.is_empty());
    assert_eq!(rig.handler("sack.dsacks"), "1");
    assert_eq!(rig.handler("sack.stale_blocks"), "1");
    assert_eq!(rig.handler("sack.bad_blocks"), "2");
    assert_eq!(rig.handler("sack.dup_acks"), "0", "no new SACK information");
    assert!(with_tcb(&rig, |t| t.sack.board.is_empty()));
    // A D-SACK within the second block: only the second is new.
    rig.exchange(vec![ack(iss, 2001, &[(3001, 3501), (3001, 4001)])]);
    assert_eq!(rig.handler("sack.dsacks"), "2");
    assert_eq!(rig.handler("sack.new_sacked"), "1000");
    assert_eq!(
        with_tcb(&rig, |t| t.sack.board.ranges().to_vec()),
        vec![(iss + 3001, iss + 4001)]
    );
}

#[test]
fn a_peer_reporting_more_ranges_than_the_bound_costs_the_highest() {
    let mut rig = rig(None);
    let iss = ten_segments(&mut rig);
    // 20 ranges of 100 octets, 400 apart, four per ACK, highest first.
    let ranges: Vec<(u32, u32)> = (0..20).map(|i| (2001 + 400 * i, 2101 + 400 * i)).collect();
    for four in ranges.chunks(4).rev() {
        rig.exchange(vec![ack(iss, 1001, four)]);
    }
    let kept = with_tcb(&rig, |t| t.sack.board.ranges().to_vec());
    assert_eq!(kept.len(), crate::tcp::scoreboard::MAX_RANGES);
    assert_eq!(kept[0], (iss + 2001, iss + 2101));
    assert_eq!(rig.handler("sack.overflows"), "4");
}

#[test]
fn an_ack_into_a_sacked_range_means_reneging_and_clears_the_scoreboard() {
    let mut rig = rig(None);
    let iss = ten_segments(&mut rig);
    rig.exchange(vec![ack(iss, 1001, &[(3001, 4001)])]);
    assert!(!with_tcb(&rig, |t| t.sack.board.is_empty()));
    // The peer acknowledges up to 3001 and no longer reports 3001:4001.
    rig.exchange(vec![ack(iss, 3001, &[])]);
    assert_eq!(rig.handler("sack.reneged"), "1");
    assert!(with_tcb(&rig, |t| t.sack.board.is_empty()));
}

#[test]
fn random_acks_and_blocks_through_the_stack_keep_the_scoreboard_sound() {
    let mut rig = rig(None);
    let iss = ten_segments(&mut rig);
    // A fixed linear congruential sequence: blocks around and beyond
    // what was sent, the ACK creeping forward.
    let mut x: u64 = 0x5eed;
    let mut next = |m: u32| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((x >> 33) as u32) % m
    };
    let mut acked = 1;
    for _ in 0..300 {
        if next(8) == 0 {
            acked = (acked + next(1500)).min(10_001);
        }
        let blocks: Vec<(u32, u32)> = (0..next(5))
            .map(|_| {
                let l = next(14_000).wrapping_sub(2000);
                (l, l.wrapping_add(next(3000)).wrapping_sub(200))
            })
            .collect();
        rig.exchange(vec![ack(iss, acked, &blocks)]);
        let (una, snd_max, ranges, flight, in_flight) = with_tcb(&rig, |t| {
            (
                t.snd_una,
                t.snd_max(),
                t.sack.board.ranges().to_vec(),
                t.flight_size(),
                crate::tcp::sack::in_flight(t),
            )
        });
        assert!(ranges.len() <= crate::tcp::scoreboard::MAX_RANGES);
        for w in ranges.windows(2) {
            assert!(w[0].1 < w[1].0, "sorted and disjoint: {ranges:?}");
        }
        for &(l, r) in &ranges {
            assert!(una < l && l < r && r <= snd_max, "{ranges:?} within ({una}, {snd_max}]");
        }
        assert!(in_flight <= 2 * flight.max(1), "{in_flight} in flight of {flight}");
    }
    assert_ne!(rig.handler("sack.bad_blocks"), "0");
}

#[test]
fn the_rescue_retransmission_carries_the_fin_behind_a_full_segment() {
    let mut rig = rig(None);
    let iss = ten_segments_and(&mut rig, true);
    assert_eq!(with_tcb(&rig, |t| t.snd_nxt - iss), 10_002, "the FIN went");
    // 1001:2001 and the last segment with the FIN are lost.
    let out = lose_the_second(&mut rig, iss);
    assert_eq!(data_seqs(iss, &out), vec![1001]);
    for right in [6001, 7001, 8001, 9001] {
        let out = rig.exchange(vec![ack(iss, 1001, &[(2001, right)])]);
        assert_eq!(
            data_seqs(iss, &out),
            Vec::<i32>::new(),
            "nothing below the highest SACKed octet"
        );
    }
    // The partial ACK: HighACK passes RescueRxt; rule 4 sends the last
    // segment, 1000 octets of data and the FIN.
    let out = rig.exchange(vec![ack(iss, 9001, &[])]);
    let resent: Vec<_> = out
        .iter()
        .map(|b| to_client(b))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    assert_eq!(resent.len(), 1);
    assert_eq!(resent[0].0.seq - iss, 9001);
    assert_eq!(resent[0].1.len(), 1000);
    assert!(resent[0].0.flags.contains(TcpFlags::FIN));
    assert_eq!(rig.handler("sackrtx.rescues"), "1");
    // Acknowledged with the FIN: recovery over.
    rig.exchange(vec![ack(iss, 10_002, &[])]);
    assert!(!with_tcb(&rig, |t| t.cc.in_recovery()));
}

#[test]
fn a_peer_that_sends_no_sack_blocks_keeps_newreno_until_it_does() {
    let mut rig = rig(None);
    let iss = ten_segments(&mut rig);
    rig.exchange(vec![ack(iss, 1001, &[])]);
    let mut out = Vec::new();
    for _ in 0..3 {
        out.extend(rig.exchange(vec![ack(iss, 1001, &[])]));
    }
    assert_eq!(data_seqs(iss, &out), vec![1001]);
    // NewReno's fast recovery: ssthresh + 3 SMSS, inflated.
    assert_eq!(with_tcb(&rig, |t| (t.cc.cwnd(), t.cc.ssthresh())), (7500, 4500));
    assert_eq!(rig.handler("cc.recoveries"), "1");
    // A block in NewReno's recovery: not taken over in its middle.
    rig.exchange(vec![ack(iss, 1001, &[(2001, 3001)])]);
    assert_eq!(rig.handler("sack.connections"), "0");
    // Recovery over; the next block hands the connection to RFC 6675.
    rig.exchange(vec![ack(iss, 10_001, &[])]);
    assert!(!with_tcb(&rig, |t| t.sack.active));
    {
        let mut info = rig.info.borrow_mut();
        let r = info.lookup(&server_key(CPORT, 80)).unwrap();
        info.tcbs.get_mut(r).unwrap().send_buffer.extend([b'y'; 2000]);
        info.want_output(r);
    }
    // (RFC 6582 §3.2 step 6 left cwnd at max(FlightSize, SMSS) + SMSS.)
    assert_eq!(data_seqs(iss, &rig.exchange(vec![])), vec![10_001, 11_001]);
    rig.exchange(vec![ack(iss, 10_001, &[(11_001, 12_001)])]);
    assert_eq!(rig.handler("sack.connections"), "1");
    assert!(with_tcb(&rig, |t| t.sack.active));
}
