//! Congestion control and ECN through the elements: the handshake's ECN
//! negotiation, the receiver's echo (RFC 3168's and DCTCP's), the
//! sender's reaction, DCTCP's alpha and CUBIC's loss response.

use super::harness::*;
use crate::tcp::cc::Algorithm;
use crate::tcp::tcb::Tcb;
use crate::wire::{IpEndpoint, Ipv4Packet, TcpFlags, TcpRepr, TcpSeqNumber};

const CPORT: u16 = 40000;

/// The stack and an echo server on port 7, ECN on or off and the
/// algorithm new connections start with.
fn echo_rig(ecn: bool, congestion: Algorithm, stack: &str) -> Rig {
    let config =
        format!("src :: PlugSource -> tcp :: {stack} -> out :: PlugSink;\nAppExecutor;\necho :: TCPEchoServer(7);");
    let rig = Rig::new(&config);
    let mut info = rig.info.borrow_mut();
    info.settings.ecn = ecn;
    info.settings.congestion = congestion;
    drop(info);
    rig
}

/// `seg` and `payload` from the client with the IP header's ECN field
/// set to `ecn` (RFC 3168 §5), the header checksum recomputed.
fn from_client_ecn(seg: &TcpRepr, payload: &[u8], ecn: u8) -> Vec<u8> {
    let mut bytes = from_client(seg, payload);
    let mut ip = Ipv4Packet::new_unchecked(&mut bytes[..20]);
    ip.set_dscp_ecn(ecn);
    ip.fill_checksum();
    bytes
}

/// The ECN field of a packet the server sent.
fn ecn_field(bytes: &[u8]) -> u8 {
    bytes[1] & 3
}

/// The client's ECN-setup SYN (ECE+CWR) to port 7 and the handshake's
/// ACK; returns the SYN-ACK.
fn connect(rig: &mut Rig, syn_flags: TcpFlags) -> TcpRepr {
    let syn = seg(CPORT, 7, 1000, None, syn_flags, 0);
    let out = rig.exchange(vec![from_client(&syn, &[])]);
    assert_eq!(out.len(), 1);
    let (syn_ack, _) = to_client(&out[0]);
    assert_eq!(ecn_field(&out[0]), 0, "RFC 3168 §6.1.1: a SYN-ACK is not ECT");
    let ack = seg(CPORT, 7, 1001, Some((syn_ack.seq + 1).0), TcpFlags::empty(), 0);
    assert!(rig.exchange(vec![from_client(&ack, &[])]).is_empty());
    syn_ack
}

fn with_tcb<T>(rig: &Rig, f: impl FnOnce(&Tcb) -> T) -> T {
    let info = rig.info.borrow();
    let r = info.lookup(&server_key(CPORT, 7)).expect("the connection");
    f(info.tcbs.get(r).unwrap())
}

#[test]
fn an_ecn_setup_syn_gets_a_syn_ack_with_ece_when_the_setting_allows() {
    let mut rig = echo_rig(true, Algorithm::NewReno, "TCPStack");
    let syn_ack = connect(&mut rig, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    assert_eq!(syn_ack.flags, TcpFlags::SYN | TcpFlags::ECE);
    assert!(with_tcb(&rig, |t| t.ecn.enabled));
    // The setting off: a plain SYN-ACK, no ECN.
    let mut off = echo_rig(false, Algorithm::NewReno, "TCPStack");
    let syn_ack = connect(&mut off, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    assert_eq!(syn_ack.flags, TcpFlags::SYN);
    assert!(!with_tcb(&off, |t| t.ecn.enabled));
    // A SYN without both flags is not ECN-setup.
    let mut half = echo_rig(true, Algorithm::NewReno, "TCPStack");
    let syn_ack = connect(&mut half, TcpFlags::SYN | TcpFlags::ECE);
    assert_eq!(syn_ack.flags, TcpFlags::SYN);
}

#[test]
fn our_syn_asks_for_ecn_and_an_ecn_setup_syn_ack_turns_it_on() {
    let mut rig = echo_rig(true, Algorithm::NewReno, "TCPStack");
    let stream = crate::tcp::socket::TcpStream::connect(
        &rig.info,
        IpEndpoint::new(SERVER, 45000),
        IpEndpoint::new(CLIENT, 9000),
    )
    .unwrap();
    let out = rig.exchange(vec![]);
    let (syn, _) = to_client(&out[0]);
    assert_eq!(syn.flags, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    let syn_ack = seg(
        9000,
        45000,
        5000,
        Some((syn.seq + 1).0),
        TcpFlags::SYN | TcpFlags::ECE,
        0,
    );
    rig.exchange(vec![from_client(&syn_ack, &[])]);
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&stream.key().unwrap()).unwrap()).unwrap();
    assert!(tcb.ecn.enabled);
}

#[test]
fn ce_marked_data_gets_ece_on_every_ack_until_the_peer_sends_cwr() {
    let mut rig = echo_rig(true, Algorithm::NewReno, "TCPStack");
    rig.info.borrow_mut().settings.delayed_ack_us = None;
    // No echo server on port 80: the data is only acknowledged.
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 4).unwrap();
    let syn = seg(CPORT, 80, 1000, None, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR, 0);
    let (syn_ack, _) = to_client(&rig.exchange(vec![from_client(&syn, &[])])[0]);
    let ack = Some((syn_ack.seq + 1).0);
    rig.exchange(vec![from_client(&seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 0), &[])]);
    let mut data = |seq: u32, flags: TcpFlags, ecn: u8| {
        let out = rig.exchange(vec![from_client_ecn(&seg(CPORT, 80, seq, ack, flags, 2), b"ab", ecn)]);
        assert_eq!(out.len(), 1);
        assert_eq!(ecn_field(&out[0]), 0, "RFC 3168 §6.1.4: a pure ACK is not ECT");
        to_client(&out[0]).0
    };
    // ECT(0) data: no echo.
    assert_eq!(data(1001, TcpFlags::empty(), 2).flags, TcpFlags::empty());
    // CE: ECE from now on, also for unmarked data...
    let a = data(1003, TcpFlags::empty(), 3);
    assert_eq!((a.flags, a.ack), (TcpFlags::ECE, Some(TcpSeqNumber(1005))));
    assert_eq!(data(1005, TcpFlags::empty(), 2).flags, TcpFlags::ECE);
    // ... until a segment with CWR.
    assert_eq!(data(1007, TcpFlags::CWR, 2).flags, TcpFlags::empty());
    assert_eq!(data(1009, TcpFlags::empty(), 2).flags, TcpFlags::empty());
    assert_eq!(rig.handler("ecn.ce_received"), "1");
}

/// Handshake with ECN to the echo server, then `n` bytes through it;
/// returns the server's ISS.
fn echo_bytes(rig: &mut Rig, n: usize) -> TcpSeqNumber {
    let iss = connect(rig, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR).seq;
    let data = vec![b'x'; n];
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 7, 1001, Some((iss + 1).0), TcpFlags::PSH, n),
        &data,
    )]);
    let sent: Vec<_> = out.iter().filter(|b| !to_client(b).1.is_empty()).collect();
    assert!(!sent.is_empty());
    for b in &sent {
        assert_eq!(ecn_field(b), 2, "RFC 3168 §6.1.2: new data is ECT(0)");
    }
    iss
}

#[test]
fn an_ece_halves_the_window_once_and_the_next_data_carries_cwr() {
    let mut rig = echo_rig(true, Algorithm::NewReno, "TCPStack");
    let iss = echo_bytes(&mut rig, 100);
    assert_eq!(with_tcb(&rig, |t| t.cc.cwnd()), 5360, "ten segments of 536");
    // The client acknowledges the echo with ECE and sends more.
    let ack = seg(CPORT, 7, 1101, Some((iss + 101).0), TcpFlags::ECE, 3);
    let out = rig.exchange(vec![from_client(&ack, b"abc")]);
    // Flight 0 at the reaction: ssthresh = max(0, 2·536), and the window
    // did not grow on the ACK that carried the echo (RFC 3168 §6.1.2).
    assert_eq!(
        with_tcb(&rig, |t| (t.cc.ssthresh(), t.cc.cwnd(), t.ecn.cwr_pending)),
        (1072, 1072, false)
    );
    let (echo, payload) = out.iter().map(|b| to_client(b)).find(|(_, p)| !p.is_empty()).unwrap();
    assert_eq!(payload, b"abc");
    assert!(echo.flags.contains(TcpFlags::CWR), "{echo:?}");
    // A second ECE before the CWR data is acknowledged (SND.UNA iss + 101
    // is not past SND.NXT at the reaction, iss + 101): no second reduction.
    let again = seg(CPORT, 7, 1104, Some((iss + 101).0), TcpFlags::ECE, 0);
    rig.exchange(vec![from_client(&again, &[])]);
    assert_eq!(with_tcb(&rig, |t| (t.cc.ssthresh(), t.ecn.cwr_pending)), (1072, false));
    assert_eq!(rig.handler("ecn.reductions"), "1");
    // The timeout resends "abc": a retransmission, neither ECT nor CWR
    // (RFC 3168 §6.1.5).
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let out: Vec<_> = rig.output.borrow_mut().drain(..).collect();
    let resent = out
        .iter()
        .find(|b| to_client(b).1 == b"abc")
        .expect("the retransmission");
    assert_eq!(ecn_field(resent), 0);
    assert!(!to_client(resent).0.flags.contains(TcpFlags::CWR));
}

#[test]
fn dctcp_alpha_after_a_window_with_half_its_bytes_marked() {
    let mut rig = echo_rig(true, Algorithm::Dctcp, "TCPStack");
    let iss = echo_bytes(&mut rig, 200);
    // The handshake's ACK acknowledged no bytes: alpha is still 1.
    assert_eq!(with_tcb(&rig, |t| t.cc.dctcp().unwrap().alpha()), 1.0);
    // A1: 100 bytes, unmarked: past WindowEnd (iss + 1): F = 0,
    // alpha = 15/16, and the next window ends at SND.NXT = iss + 201.
    let a1 = seg(CPORT, 7, 1201, Some((iss + 101).0), TcpFlags::empty(), 0);
    rig.exchange(vec![from_client(&a1, &[])]);
    assert_eq!(with_tcb(&rig, |t| t.cc.dctcp().unwrap().alpha()), 15.0 / 16.0);
    // B1: the other 100 with ECE (not past iss + 201), and 100 bytes more
    // to echo. C1: those 100, unmarked, past WindowEnd: F = 100/200.
    let b1 = seg(CPORT, 7, 1201, Some((iss + 201).0), TcpFlags::ECE, 100);
    let out = rig.exchange(vec![from_client(&b1, &[b'y'; 100])]);
    let (echo, _) = out.iter().map(|b| to_client(b)).find(|(_, p)| !p.is_empty()).unwrap();
    assert!(echo.flags.contains(TcpFlags::CWR));
    // The cut used alpha = 15/16: 5460 (slow start added A1's 100 bytes)
    // · (1 - 15/32) = 2900.625.
    assert_eq!(with_tcb(&rig, |t| t.cc.ssthresh()), 2900);
    let c1 = seg(CPORT, 7, 1301, Some((iss + 301).0), TcpFlags::empty(), 0);
    rig.exchange(vec![from_client(&c1, &[])]);
    // alpha = 15/16 · 15/16 + 1/16 · 1/2 = 233/256.
    assert_eq!(with_tcb(&rig, |t| t.cc.dctcp().unwrap().alpha()), 233.0 / 256.0);
    assert_eq!(rig.handler("ecn.reductions"), "1");
}

#[test]
fn dctcp_echoes_ce_exactly_and_acks_at_once_when_it_changes() {
    let mut rig = echo_rig(true, Algorithm::Dctcp, "TCPStack");
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 4).unwrap();
    let syn = seg(CPORT, 80, 1000, None, TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR, 0);
    let (syn_ack, _) = to_client(&rig.exchange(vec![from_client(&syn, &[])])[0]);
    let ack = Some((syn_ack.seq + 1).0);
    rig.exchange(vec![from_client(&seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 0), &[])]);
    // An unmarked segment: its ACK is delayed.
    let d1 = from_client_ecn(&seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 2), b"ab", 2);
    assert!(rig.exchange(vec![d1]).is_empty());
    // A CE segment: CE changed with an ACK held back: that ACK now, for
    // 1003, without ECE (RFC 8257 §3.2's state machine); this segment's
    // own ACK waits, and will carry ECE.
    let d2 = from_client_ecn(&seg(CPORT, 80, 1003, ack, TcpFlags::empty(), 2), b"cd", 3);
    let out = rig.exchange(vec![d2]);
    assert_eq!(out.len(), 1);
    let (now, _) = to_client(&out[0]);
    assert_eq!((now.ack, now.flags), (Some(TcpSeqNumber(1003)), TcpFlags::empty()));
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let late: Vec<_> = rig.output.borrow_mut().drain(..).map(|b| to_client(&b).0).collect();
    assert_eq!(late.len(), 1);
    assert_eq!((late[0].ack, late[0].flags), (Some(TcpSeqNumber(1005)), TcpFlags::ECE));
    // Unlike RFC 3168's echo, CWR does not matter and ECE ends with CE.
    // CE changes back, but no ACK is held back (the delayed one went):
    // nothing at once, and the next ACK, delayed, has no ECE.
    let d3 = from_client_ecn(&seg(CPORT, 80, 1005, ack, TcpFlags::empty(), 2), b"ef", 2);
    assert!(rig.exchange(vec![d3]).is_empty());
    rig.router.run(&|| !output.borrow().is_empty());
    let late: Vec<_> = rig.output.borrow_mut().drain(..).map(|b| to_client(&b).0).collect();
    assert_eq!(
        (late[0].ack, late[0].flags),
        (Some(TcpSeqNumber(1007)), TcpFlags::empty())
    );
    assert_eq!(rig.handler("ecn.immediate_acks"), "1");
}

/// TCPStack with TCPCubicAck in TCPNewRenoAck's place (ClickNF's swap).
fn cubic_stack() -> String {
    super::TCP_STACK
        .replace("TCPStack", "CubicStack")
        .replace("TCPNewRenoAck", "TCPCubicAck")
}

#[test]
fn tcp_cubic_ack_makes_the_connection_cubic_and_a_loss_keeps_seven_tenths() {
    let config = format!(
        "{}\nsrc :: PlugSource -> tcp :: CubicStack -> out :: PlugSink;\nAppExecutor;\necho :: TCPEchoServer(7);",
        cubic_stack()
    );
    let mut rig = Rig::new(&config);
    let out = rig.exchange(vec![from_client(&seg(CPORT, 7, 1000, None, TcpFlags::SYN, 0), &[])]);
    let iss = to_client(&out[0]).0.seq;
    let ack = Some((iss + 1).0);
    rig.exchange(vec![from_client(&seg(CPORT, 7, 1001, ack, TcpFlags::empty(), 0), &[])]);
    assert_eq!(with_tcb(&rig, |t| t.cc.algorithm()), Algorithm::Cubic);
    // 5360 bytes to echo: the server fills its window of ten segments.
    let data = vec![b'z'; 1340];
    // (One segment per exchange: TCPReordering would hold a batch's
    // later segments until the next arrival.)
    let mut sent = 0;
    for i in 0..4 {
        let d = seg(CPORT, 7, 1001 + 1340 * i, ack, TcpFlags::empty(), 1340);
        let out = rig.exchange(vec![from_client(&d, &data)]);
        sent += out.iter().map(|b| to_client(b).1.len()).sum::<usize>();
    }
    assert_eq!(sent, 5360);
    assert_eq!(with_tcb(&rig, |t| (t.cc.cwnd(), t.flight_size())), (5360, 5360));
    // The first segment acknowledged (RFC 6582 §3.2 step 1 leaves a loss
    // of the very first to the timer), with 1072 bytes more: slow start
    // makes the window 11 segments, and the echo fills it.
    let more = seg(CPORT, 7, 6361, Some((iss + 537).0), TcpFlags::empty(), 1072);
    rig.exchange(vec![from_client(&more, &[b'w'; 1072])]);
    assert_eq!(with_tcb(&rig, |t| (t.cc.cwnd(), t.flight_size())), (5896, 5896));
    // Three duplicate ACKs: fast retransmit of iss + 537; W_max = 11
    // segments and ssthresh = β_cubic · 5896 = 4127 = 0.7 W_max.
    let dup = from_client(&seg(CPORT, 7, 7433, Some((iss + 537).0), TcpFlags::empty(), 0), &[]);
    let out = rig.exchange(vec![dup.clone(), dup.clone(), dup]);
    let resent: Vec<_> = out
        .iter()
        .map(|b| to_client(b))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    assert_eq!(resent.len(), 1);
    assert_eq!(resent[0].0.seq, iss + 537);
    let (ssthresh, cwnd, w_max) = with_tcb(&rig, |t| (t.cc.ssthresh(), t.cc.cwnd(), t.cc.cubic().unwrap().w_max()));
    assert_eq!(w_max, 11.0);
    assert_eq!(ssthresh, (0.7 * w_max * 536.0) as u32);
    assert_eq!(ssthresh, 4127);
    assert_eq!(cwnd, 4127 + 3 * 536, "RFC 5681 §3.2 step 3, as NewReno");
    assert_eq!(rig.handler("cc.recoveries"), "1");
}
