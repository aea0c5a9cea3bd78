//! The incoming path end to end: segments in, the segments the server
//! answers with out, and the TCB in between.

use super::harness::*;
use crate::tcp::tcb::TcpState;
use crate::wire::{IpEndpoint, TcpFlags, TcpOptions, TcpSeqNumber};

/// cTCP (TCPStack: both paths and the timers) between a source and a
/// sink; its elements' handlers are read as `tcp/NAME.HANDLER` (the rig
/// adds the `tcp/`).
fn path() -> String {
    "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink;".to_string()
}

const CPORT: u16 = 40000;

fn rig_listening() -> Rig {
    let rig = Rig::new(&path());
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 16).unwrap();
    rig
}

/// The client's SYN (seq 1000, MSS 1400, window shift 7, SACK, TSval 100)
/// and the server's answer.
fn handshake(rig: &mut Rig) -> TcpSeqNumber {
    let mut syn = seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0);
    syn.options = TcpOptions {
        mss: Some(1400),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((100, 0)),
        ..TcpOptions::default()
    };
    let out = rig.exchange(vec![from_client(&syn, &[])]);
    assert_eq!(out.len(), 1, "one SYN-ACK");
    let (syn_ack, payload) = to_client(&out[0]);
    assert!(payload.is_empty());
    assert_eq!(syn_ack.flags, TcpFlags::SYN);
    assert_eq!(syn_ack.ack, Some(TcpSeqNumber(1001)));
    assert_eq!((syn_ack.src_port, syn_ack.dst_port), (80, CPORT));
    assert_eq!(syn_ack.options.mss, Some(1460));
    assert_eq!(syn_ack.options.window_scale, Some(7));
    assert!(syn_ack.options.sack_permitted);
    assert_eq!(
        syn_ack.options.timestamps.map(|t| t.1),
        Some(100),
        "TSecr echoes the SYN's TSval"
    );
    let iss = syn_ack.seq;
    let mut ack = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 0);
    ack.options.timestamps = Some((101, 0));
    let out = rig.exchange(vec![from_client(&ack, &[])]);
    assert!(out.is_empty(), "the handshake's ACK is not answered: {out:?}");
    iss
}

fn state(rig: &Rig) -> Option<TcpState> {
    let info = rig.info.borrow();
    let r = info.lookup(&server_key(CPORT, 80))?;
    info.tcbs.get(r).map(|t| t.state)
}

#[test]
fn a_passive_open_reaches_established_and_joins_the_accept_queue() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    assert_eq!(state(&rig), Some(TcpState::Established));
    let info = rig.info.borrow();
    let l = info.listeners.get(&IpEndpoint::new(SERVER, 80)).unwrap();
    assert_eq!((l.half_open, l.accept_queue.len()), (0, 1));
    let tcb = info.tcbs.get(l.accept_queue[0]).unwrap();
    assert_eq!(
        (tcb.snd_una, tcb.snd_nxt, tcb.rcv_nxt),
        (iss + 1, iss + 1, TcpSeqNumber(1001))
    );
    assert_eq!((tcb.snd_mss, tcb.snd_wscale, tcb.rcv_wscale), (1400, 7, 7));
    assert_eq!(tcb.snd_wnd, 65535 << 7, "the ACK's window is scaled");
    assert!(tcb.timestamps && tcb.sack_permitted);
    assert_eq!(tcb.ts_recent, 101);
    drop(info);
    assert_eq!(rig.handler("ack.established"), "1");
    assert_eq!(rig.handler("listen.syns"), "1");
}

#[test]
fn data_in_sequence_is_queued_without_a_copy_and_acknowledged() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let mut d = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::PSH, 5);
    d.options.timestamps = Some((102, 0));
    // One segment: its ACK waits (RFC 1122 §4.2.3.2), 40 ms.
    assert!(rig.exchange(vec![from_client(&d, b"hello")]).is_empty());
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    assert_eq!(rig.router.now_us(), 40_000, "the delay, in simulated time");
    let out: Vec<_> = rig.output.borrow_mut().drain(..).collect();
    assert_eq!(out.len(), 1);
    let (ack, _) = to_client(&out[0]);
    assert_eq!(
        (ack.seq, ack.ack, ack.flags),
        (iss + 1, Some(TcpSeqNumber(1006)), TcpFlags::empty())
    );
    assert_eq!(ack.options.timestamps.map(|t| t.1), Some(102));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(CPORT, 80)).unwrap()).unwrap();
    assert_eq!(tcb.recv_queued, 5);
    assert_eq!(&tcb.recv_queue[0][..], b"hello");
    drop(info);
    assert_eq!(rig.handler("data.delivered_bytes"), "5");
}

#[test]
fn old_data_is_trimmed_to_what_is_new() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let ack = Some((iss + 1).0);
    rig.exchange(vec![from_client(
        &seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 3),
        b"abc",
    )]);
    // A retransmission that overlaps: "abcdef" from 1001, of which "def" is new.
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 6),
        b"abcdef",
    )]);
    assert_eq!(out.len(), 1);
    assert_eq!(to_client(&out[0]).0.ack, Some(TcpSeqNumber(1007)));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(CPORT, 80)).unwrap()).unwrap();
    let got: Vec<u8> = tcb.recv_queue.iter().flat_map(|p| p.to_vec()).collect();
    assert_eq!(got, b"abcdef");
    drop(info);
    assert_eq!(rig.handler("cs.trimmed"), "1");
}

#[test]
fn a_fin_moves_to_close_wait_and_is_acknowledged() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let f = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::FIN, 3);
    let out = rig.exchange(vec![from_client(&f, b"bye")]);
    assert_eq!(out.len(), 1);
    assert_eq!(
        to_client(&out[0]).0.ack,
        Some(TcpSeqNumber(1005)),
        "3 bytes and the FIN"
    );
    assert_eq!(state(&rig), Some(TcpState::CloseWait));
    assert_eq!(rig.handler("fin.fins"), "1");
}

#[test]
fn an_out_of_window_segment_gets_an_ack_and_changes_nothing() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let far = seg(CPORT, 80, 1001 + 10_000_000, Some((iss + 1).0), TcpFlags::empty(), 4);
    let out = rig.exchange(vec![from_client(&far, b"junk")]);
    assert_eq!(out.len(), 1);
    assert_eq!(to_client(&out[0]).0.ack, Some(TcpSeqNumber(1001)));
    assert_eq!(rig.handler("cs.unacceptable"), "1");
    assert_eq!(rig.handler("data.delivered_bytes"), "0");
}

#[test]
fn a_reset_in_the_window_is_challenged_and_one_at_rcv_nxt_ends_the_connection() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let blind = seg(CPORT, 80, 1500, None, TcpFlags::RST, 0);
    let out = rig.exchange(vec![from_client(&blind, &[])]);
    assert_eq!(out.len(), 1, "RFC 5961 §3.2: a challenge ACK");
    let (challenge, _) = to_client(&out[0]);
    assert_eq!((challenge.seq, challenge.ack), (iss + 1, Some(TcpSeqNumber(1001))));
    assert_eq!(state(&rig), Some(TcpState::Established));
    let exact = seg(CPORT, 80, 1001, None, TcpFlags::RST, 0);
    assert!(rig.exchange(vec![from_client(&exact, &[])]).is_empty());
    assert_eq!(state(&rig), None);
    assert_eq!(rig.handler("rst.resets"), "1");
    let info = rig.info.borrow();
    assert_eq!(info.counters.resets_received, 1);
    assert!(info.tcbs.is_empty());
    assert!(info.listeners[&IpEndpoint::new(SERVER, 80)].accept_queue.is_empty());
}

#[test]
fn a_syn_on_an_established_connection_is_challenged() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let out = rig.exchange(vec![from_client(&seg(CPORT, 80, 1001, None, TcpFlags::SYN, 0), &[])]);
    assert_eq!(out.len(), 1);
    assert_eq!(to_client(&out[0]).0.seq, iss + 1);
    assert_eq!(rig.handler("syn.challenges"), "1");
    assert_eq!(state(&rig), Some(TcpState::Established));
}

#[test]
fn segments_to_no_listener_get_a_reset_and_resets_get_nothing() {
    let mut rig = rig_listening();
    // A SYN to a closed port: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
    let out = rig.exchange(vec![from_client(&seg(CPORT, 81, 7000, None, TcpFlags::SYN, 0), &[])]);
    let (rst, _) = to_client(&out[0]);
    assert_eq!(
        (rst.flags, rst.seq, rst.ack),
        (TcpFlags::RST, TcpSeqNumber(0), Some(TcpSeqNumber(7001)))
    );
    // An ACK to a listener: <SEQ=SEG.ACK><CTL=RST>.
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 80, 7000, Some(555), TcpFlags::empty(), 0),
        &[],
    )]);
    let (rst, _) = to_client(&out[0]);
    assert_eq!((rst.flags, rst.seq, rst.ack), (TcpFlags::RST, TcpSeqNumber(555), None));
    assert!(rig
        .exchange(vec![from_client(&seg(CPORT, 81, 1, None, TcpFlags::RST, 0), &[])])
        .is_empty());
    assert_eq!(rig.handler("listen.resets"), "2");
}

#[test]
fn a_retransmitted_syn_gets_the_same_syn_ack_again() {
    let mut rig = rig_listening();
    let syn = seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0);
    let first = to_client(&rig.exchange(vec![from_client(&syn, &[])])[0]).0;
    let again = rig.exchange(vec![from_client(&syn, &[])]);
    assert_eq!(again.len(), 1);
    let second = to_client(&again[0]).0;
    assert_eq!(
        (second.seq, second.ack, second.flags),
        (first.seq, first.ack, TcpFlags::SYN)
    );
    assert_eq!(rig.handler("listen.syns"), "1", "no second TCB");
}

#[test]
fn a_bad_checksum_is_dropped_and_counted() {
    let mut rig = rig_listening();
    let mut bytes = from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(rig.exchange(vec![bytes]).is_empty());
    assert_eq!(rig.handler("fl.bad_checksums"), "1");
    assert!(rig.info.borrow().tcbs.is_empty());
}

#[test]
fn a_full_listener_drops_new_syns() {
    let mut rig = Rig::new(&path());
    rig.info.borrow_mut().settings.syn_backlog = 0;
    rig.info.borrow_mut().settings.syn_cookies = false;
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 2).unwrap();
    let syns = (0..5)
        .map(|i| from_client(&seg(CPORT + i, 80, 1000, None, TcpFlags::SYN, 0), &[]))
        .collect();
    let out = rig.exchange(syns);
    assert_eq!(out.len(), 2);
    assert_eq!(rig.handler("listen.overflows"), "3");
    assert_eq!(rig.info.borrow().tcbs.len(), 2);
}

#[test]
fn paws_rejects_an_old_timestamp() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let mut old = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 3);
    old.options.timestamps = Some((50, 0));
    let out = rig.exchange(vec![from_client(&old, b"old")]);
    assert_eq!(out.len(), 1, "answered with an ACK");
    assert_eq!(rig.handler("cs.paws_rejected"), "1");
    assert_eq!(rig.handler("data.delivered_bytes"), "0");
}

/// Both paths, the timers and an echo server on the router's executor,
/// through the TCPStack compound.
fn echo_config() -> String {
    "src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink;
AppExecutor;
echo :: TCPEchoServer(7);"
        .to_string()
}

/// The client's side of a connection to port 7: handshake, returns the
/// server's ISS.
fn connect_echo(rig: &mut Rig) -> TcpSeqNumber {
    let out = rig.exchange(vec![from_client(&seg(CPORT, 7, 1000, None, TcpFlags::SYN, 0), &[])]);
    let iss = to_client(&out[0]).0.seq;
    assert!(rig
        .exchange(vec![from_client(
            &seg(CPORT, 7, 1001, Some((iss + 1).0), TcpFlags::empty(), 0),
            &[]
        )])
        .is_empty());
    iss
}

#[test]
fn the_echo_server_sends_back_what_it_reads_and_closes_after_the_peer() {
    let mut rig = Rig::new(&echo_config());
    let iss = connect_echo(&mut rig);
    let ack = Some((iss + 1).0);
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 7, 1001, ack, TcpFlags::PSH, 11),
        b"hello world",
    )]);
    // The ACK for the data, then the echo (which acknowledges it too).
    let segs: Vec<_> = out.iter().map(|b| to_client(b)).collect();
    let echoed: Vec<u8> = segs.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(echoed, b"hello world", "{segs:?}");
    let (data_seg, _) = segs.iter().find(|(_, p)| !p.is_empty()).unwrap();
    assert_eq!((data_seg.seq, data_seg.ack), (iss + 1, Some(TcpSeqNumber(1012))));
    assert!(data_seg.flags.contains(TcpFlags::PSH));
    assert_eq!(rig.handler("echo.bytes"), "11");
    // The client acknowledges the echo and closes: the server answers
    // the FIN with an ACK and, its reader at the end, with its own FIN.
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 7, 1012, Some((iss + 12).0), TcpFlags::FIN, 0),
        &[],
    )]);
    let segs: Vec<_> = out.iter().map(|b| to_client(b).0).collect();
    assert!(segs.iter().all(|s| s.ack == Some(TcpSeqNumber(1013))), "{segs:?}");
    let fin = segs
        .iter()
        .find(|s| s.flags.contains(TcpFlags::FIN))
        .expect("the server's FIN");
    assert_eq!(fin.seq, iss + 12);
    assert_eq!(state_of(&rig, 7), Some(TcpState::LastAck));
    // The last ACK: the connection is gone.
    assert!(rig
        .exchange(vec![from_client(
            &seg(CPORT, 7, 1013, Some((iss + 13).0), TcpFlags::empty(), 0),
            &[]
        )])
        .is_empty());
    assert_eq!(state_of(&rig, 7), None);
    assert!(rig.info.borrow().tcbs.is_empty());
    assert_eq!(rig.handler("echo.connections"), "1");
}

#[test]
fn unacknowledged_data_is_sent_again_when_the_timer_expires() {
    let mut rig = Rig::new(&echo_config());
    let iss = connect_echo(&mut rig);
    let out = rig.exchange(vec![from_client(
        &seg(CPORT, 7, 1001, Some((iss + 1).0), TcpFlags::PSH, 4),
        b"ping",
    )]);
    assert!(out.iter().any(|b| to_client(b).1 == b"ping"));
    // No ACK from the client: after the RTO (1 s before any sample), the
    // same bytes again, from SND.UNA.
    let out = rig.exchange(vec![]);
    assert!(out.is_empty(), "nothing before the timeout");
    // Simulated time jumps to the timer; stop once something came out.
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let again: Vec<_> = rig.output.borrow_mut().drain(..).map(|b| to_client(&b)).collect();
    assert!(again.iter().any(|(s, p)| p == b"ping" && s.seq == iss + 1), "{again:?}");
    assert_eq!(rig.handler("timers.timeouts"), "1");
}

fn state_of(rig: &Rig, port: u16) -> Option<TcpState> {
    let info = rig.info.borrow();
    let r = info.lookup(&server_key(CPORT, port))?;
    info.tcbs.get(r).map(|t| t.state)
}

fn client_stream(rig: &Rig, port: u16) -> crate::tcp::socket::TcpStream {
    crate::tcp::socket::TcpStream::connect(&rig.info, IpEndpoint::new(SERVER, port), IpEndpoint::new(CLIENT, 9000))
        .unwrap()
}

#[test]
fn an_active_open_sends_a_syn_with_our_options_and_completes_on_the_syn_ack() {
    // Here the stack is the one at SERVER's address opening to CLIENT:9000.
    let mut rig = Rig::new(&echo_config());
    let stream = client_stream(&rig, 45000);
    let out = rig.exchange(vec![]);
    assert_eq!(out.len(), 1);
    let (syn, _) = to_client(&out[0]);
    assert_eq!(
        (syn.flags, syn.ack, syn.src_port, syn.dst_port),
        (TcpFlags::SYN, None, 45000, 9000)
    );
    assert_eq!(syn.options.mss, Some(1460));
    assert_eq!(syn.options.window_scale, Some(7));
    assert!(syn.options.sack_permitted && syn.options.timestamps.is_some());
    assert_eq!(stream.state(), TcpState::SynSent);
    // The peer's SYN-ACK (from port 9000 to 45000).
    let mut syn_ack = seg(9000, 45000, 5000, Some((syn.seq + 1).0), TcpFlags::SYN, 0);
    syn_ack.options = TcpOptions {
        mss: Some(1200),
        ..TcpOptions::default()
    };
    let out = rig.exchange(vec![from_client(&syn_ack, &[])]);
    assert_eq!(out.len(), 1, "the handshake's ACK");
    let (ack, _) = to_client(&out[0]);
    assert_eq!(
        (ack.seq, ack.ack, ack.flags),
        (syn.seq + 1, Some(TcpSeqNumber(5001)), TcpFlags::empty())
    );
    assert_eq!(stream.state(), TcpState::Established);
    let info = rig.info.borrow();
    let key = stream.key().unwrap();
    let tcb = info.tcbs.get(info.lookup(&key).unwrap()).unwrap();
    assert_eq!(tcb.snd_mss, 1200);
    assert!(!tcb.timestamps && tcb.snd_wscale == 0, "the peer offered neither");
    drop(info);
    // Data both ways over it.
    assert_eq!(stream.try_write(b"hi"), Ok(2));
    let out = rig.exchange(vec![]);
    let (d, payload) = to_client(&out[0]);
    assert_eq!((d.seq, payload.as_slice()), (syn.seq + 1, &b"hi"[..]));
}

#[test]
fn a_reset_answering_our_syn_refuses_the_connection() {
    let mut rig = Rig::new(&echo_config());
    let stream = client_stream(&rig, 45001);
    let (syn, _) = to_client(&rig.exchange(vec![])[0]);
    let rst = seg(9000, 45001, 0, Some((syn.seq + 1).0), TcpFlags::RST, 0);
    assert!(rig.exchange(vec![from_client(&rst, &[])]).is_empty());
    assert_eq!(stream.state(), TcpState::Closed);
    let mut buf = [0; 4];
    assert_eq!(stream.try_read(&mut buf), Err(libc::ECONNREFUSED));
    drop(stream);
    assert!(rig.info.borrow().tcbs.is_empty(), "the socket let go: the TCB is gone");
}

#[test]
fn an_unanswered_syn_is_sent_again_after_the_timeout() {
    let mut rig = Rig::new(&echo_config());
    let _stream = client_stream(&rig, 45002);
    let (first, _) = to_client(&rig.exchange(vec![])[0]);
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let again: Vec<_> = rig.output.borrow_mut().drain(..).map(|b| to_client(&b).0).collect();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].flags, again[0].seq), (TcpFlags::SYN, first.seq));
    assert!(rig.router.now_us() >= 1_000_000, "RFC 6298 §2.1: 1 s");
}

#[test]
fn data_ahead_of_rcv_nxt_is_held_sacked_and_delivered_in_order_once_the_gap_fills() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let ack = Some((iss + 1).0);
    let ts = |mut s: crate::wire::TcpRepr, v: u32| {
        s.options.timestamps = Some((v, 0));
        s
    };
    // "cd" at 1003 and "gh" at 1007 arrive before "ab" (1001) and "ef" (1005).
    let out = rig.exchange(vec![
        from_client(&ts(seg(CPORT, 80, 1003, ack, TcpFlags::empty(), 2), 110), b"cd"),
        from_client(&ts(seg(CPORT, 80, 1007, ack, TcpFlags::empty(), 2), 111), b"gh"),
    ]);
    let dups: Vec<_> = out.iter().map(|b| to_client(b).0).collect();
    assert_eq!(dups.len(), 2, "an immediate duplicate ACK for each");
    assert!(dups.iter().all(|d| d.ack == Some(TcpSeqNumber(1001))));
    // RFC 2018 §4: the newest block first.
    let blocks: Vec<_> = dups[1].options.sack_blocks.iter().flatten().copied().collect();
    assert_eq!(
        blocks,
        [
            (TcpSeqNumber(1007), TcpSeqNumber(1009)),
            (TcpSeqNumber(1003), TcpSeqNumber(1005))
        ]
    );
    // "abcd" at 1001 overlaps the held "cd"; then "ef" fills the last gap.
    let out = rig.exchange(vec![from_client(
        &ts(seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 4), 112),
        b"abcd",
    )]);
    assert_eq!(to_client(out.last().unwrap()).0.ack, Some(TcpSeqNumber(1005)));
    let out = rig.exchange(vec![from_client(
        &ts(seg(CPORT, 80, 1005, ack, TcpFlags::empty(), 2), 113),
        b"ef",
    )]);
    assert_eq!(to_client(out.last().unwrap()).0.ack, Some(TcpSeqNumber(1009)));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(CPORT, 80)).unwrap()).unwrap();
    let got: Vec<u8> = tcb.recv_queue.iter().flat_map(|p| p.to_vec()).collect();
    assert_eq!(got, b"abcdefgh", "every byte once, in order");
    assert!(tcb.ooo.is_empty());
    drop(info);
    assert_eq!(rig.handler("ro.held"), "2");
    assert_eq!(rig.handler("ro.released"), "1", "gh; cd was covered by abcd");
}

#[test]
fn every_second_segment_is_acknowledged_at_once() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let ack = Some((iss + 1).0);
    let mut a = seg(CPORT, 80, 1001, ack, TcpFlags::empty(), 2);
    a.options.timestamps = Some((110, 0));
    let mut b = seg(CPORT, 80, 1003, ack, TcpFlags::empty(), 2);
    b.options.timestamps = Some((111, 0));
    assert!(rig.exchange(vec![from_client(&a, b"ab")]).is_empty(), "the first waits");
    let out = rig.exchange(vec![from_client(&b, b"cd")]);
    assert_eq!(out.len(), 1, "the second is acknowledged with the first");
    assert_eq!(to_client(&out[0]).0.ack, Some(TcpSeqNumber(1005)));
    assert_eq!(rig.router.now_us(), 0);
    // And the delayed-ACK timer, now stale, sends nothing more.
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    assert!(rig.output.borrow().is_empty());
    assert_eq!(rig.handler("ar.delayed"), "1");
}

/// A connection to port 81 accepted through a listener socket, and the
/// server's ISS.
fn accepted(rig: &mut Rig) -> (crate::tcp::socket::TcpStream, TcpSeqNumber) {
    let listener = crate::tcp::socket::TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, 81), 4).unwrap();
    let out = rig.exchange(vec![from_client(&seg(CPORT, 81, 1000, None, TcpFlags::SYN, 0), &[])]);
    let iss = to_client(&out[0]).0.seq;
    rig.exchange(vec![from_client(
        &seg(CPORT, 81, 1001, Some((iss + 1).0), TcpFlags::empty(), 0),
        &[],
    )]);
    let stream = listener.try_accept().unwrap();
    std::mem::forget(listener); // keep listening; nothing else uses it
    (stream, iss)
}

/// Runs the router until something comes out (simulated time jumps to
/// the next timer) and returns it with the time.
fn next_output(rig: &mut Rig) -> (u64, Vec<(crate::wire::TcpRepr, Vec<u8>)>) {
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let out = rig.output.borrow_mut().drain(..).map(|b| to_client(&b)).collect();
    (rig.router.now_us(), out)
}

#[test]
fn keepalive_probes_an_idle_peer_and_gives_up_after_its_count() {
    let mut rig = Rig::new(&path());
    let (stream, iss) = accepted(&mut rig);
    stream.set_keepalive(Some(crate::tcp::tcb::Keepalive {
        idle_us: 1_000_000,
        interval_us: 500_000,
        count: 2,
    }));
    // First probe after 1 s idle: an ACK at SND.NXT - 1.
    let (t, out) = next_output(&mut rig);
    assert_eq!(t, 1_000_000);
    assert_eq!((out[0].0.seq, out[0].0.ack), (iss, Some(TcpSeqNumber(1001))));
    // The peer answers: the count starts again, the next probe 1 s later.
    rig.exchange(vec![from_client(
        &seg(CPORT, 81, 1001, Some((iss + 1).0), TcpFlags::empty(), 0),
        &[],
    )]);
    let (t, _) = next_output(&mut rig);
    assert_eq!(t, 2_000_000);
    // Now silence: the second probe 0.5 s later, then it gives up.
    let (t, _) = next_output(&mut rig);
    assert_eq!(t, 2_500_000);
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    assert_eq!(stream.state(), TcpState::Closed);
    assert_eq!(stream.error(), Some(libc::ETIMEDOUT));
    assert_eq!(rig.handler("timers.keepalive_probes"), "3");
    assert_eq!(rig.handler("timers.keepalive_timeouts"), "1");
    assert_eq!(rig.handler("timers.user_timeouts"), "0");
}

#[test]
fn keepalive_also_probes_in_fin_wait_2_and_gives_up_there() {
    let mut rig = Rig::new(&path());
    let (stream, iss) = accepted(&mut rig);
    stream.set_keepalive(Some(crate::tcp::tcb::Keepalive {
        idle_us: 1_000_000,
        interval_us: 500_000,
        count: 2,
    }));
    // Our FIN, acknowledged: FIN-WAIT-2, waiting for a peer that is gone.
    stream.shutdown_write().unwrap();
    let out = rig.exchange(vec![]);
    assert!(to_client(&out[0]).0.flags.contains(TcpFlags::FIN));
    rig.exchange(vec![from_client(
        &seg(CPORT, 81, 1001, Some((iss + 2).0), TcpFlags::empty(), 0),
        &[],
    )]);
    assert_eq!(stream.state(), TcpState::FinWait2);
    // Probes at SND.NXT - 1 (the FIN's number) after 1 s, then 0.5 s.
    let (t, out) = next_output(&mut rig);
    assert_eq!((t, out[0].0.seq), (1_000_000, iss + 1));
    let (t, _) = next_output(&mut rig);
    assert_eq!(t, 1_500_000);
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    assert_eq!(stream.error(), Some(libc::ETIMEDOUT));
    assert_eq!(rig.router.now_us(), 2_000_000);
    assert_eq!(rig.handler("timers.keepalive_timeouts"), "1");
}

#[test]
fn a_zero_window_is_probed_with_one_octet_until_it_opens() {
    let mut rig = Rig::new(&path());
    let (stream, iss) = accepted(&mut rig);
    // The peer's window closes.
    let mut zero = seg(CPORT, 81, 1001, Some((iss + 1).0), TcpFlags::empty(), 0);
    zero.window = 0;
    rig.exchange(vec![from_client(&zero, &[])]);
    assert_eq!(stream.try_write(b"hello"), Ok(5));
    assert!(rig.exchange(vec![]).is_empty(), "nothing into a zero window");
    let (t, out) = next_output(&mut rig);
    assert_eq!(t, 1_000_000, "the persist timer: the RTO");
    assert_eq!((out[0].0.seq, out[0].1.as_slice()), (iss + 1, &b"h"[..]), "one octet");
    // The probe is acknowledged and the window opens: the rest goes.
    let open = seg(CPORT, 81, 1001, Some((iss + 2).0), TcpFlags::empty(), 0);
    let out = rig.exchange(vec![from_client(&open, &[])]);
    let (d, payload) = to_client(&out[0]);
    assert_eq!((d.seq, payload.as_slice()), (iss + 2, &b"ello"[..]));
    assert_eq!(rig.handler("timers.window_probes"), "1");
}

#[test]
fn the_user_timeout_ends_a_connection_whose_data_stays_unacknowledged() {
    let mut rig = Rig::new(&path());
    let (stream, _) = accepted(&mut rig);
    stream.set_user_timeout(Some(2_500_000));
    assert_eq!(stream.try_write(b"data"), Ok(4));
    rig.exchange(vec![]);
    // RTOs at 1 s and 3 s (backed off): the second finds 3 s > 2.5 s.
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    rig.output.borrow_mut().clear();
    rig.router.run(&|| false);
    assert_eq!(stream.error(), Some(libc::ETIMEDOUT));
    assert_eq!(rig.handler("timers.user_timeouts"), "1");
    assert!(
        rig.router.now_us() >= 2_500_000 && rig.router.now_us() < 4_000_000,
        "{}",
        rig.router.now_us()
    );
}

#[test]
fn past_the_syn_backlog_a_syn_cookie_makes_the_connection_without_state_until_the_ack() {
    let mut rig = Rig::new(&path());
    rig.info.borrow_mut().settings.syn_backlog = 1;
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 8).unwrap();
    // The first SYN takes the one half-open place; the second gets a cookie.
    let mut syn = seg(CPORT + 1, 80, 7000, None, TcpFlags::SYN, 0);
    syn.options.mss = Some(1400);
    let out = rig.exchange(vec![
        from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[]),
        from_client(&syn, &[]),
    ]);
    assert_eq!(out.len(), 2);
    assert_eq!(rig.info.borrow().tcbs.len(), 1, "no TCB for the cookie");
    let (cookie_syn_ack, _) = to_client(&out[1]);
    assert_eq!(cookie_syn_ack.ack, Some(TcpSeqNumber(7001)));
    assert_eq!(
        cookie_syn_ack.options.window_scale, None,
        "a cookie keeps no options but the MSS"
    );
    // A wrong cookie: RST. The right one: ESTABLISHED, accepted, data on.
    let wrong = seg(
        CPORT + 1,
        80,
        7001,
        Some((cookie_syn_ack.seq + 2).0),
        TcpFlags::empty(),
        0,
    );
    let out = rig.exchange(vec![from_client(&wrong, &[])]);
    assert_eq!(to_client(&out[0]).0.flags, TcpFlags::RST);
    let right = seg(CPORT + 1, 80, 7001, Some((cookie_syn_ack.seq + 1).0), TcpFlags::PSH, 3);
    let out = rig.exchange(vec![from_client(&right, b"abc")]);
    let info = rig.info.borrow();
    let r = info.lookup(&server_key(CPORT + 1, 80)).expect("made from the cookie");
    let tcb = info.tcbs.get(r).unwrap();
    assert_eq!(tcb.state, TcpState::Established);
    assert_eq!(tcb.snd_mss, 1380, "1400 rounded down to the cookie's table");
    assert_eq!(tcb.recv_queued, 3, "the data on the ACK was taken");
    assert!(info.listeners[&IpEndpoint::new(SERVER, 80)].accept_queue.contains(&r));
    drop(info);
    assert!(out.is_empty() || to_client(&out[0]).0.ack == Some(TcpSeqNumber(7004)));
    assert_eq!(rig.handler("listen.cookies_sent"), "1");
    assert_eq!(rig.handler("listen.cookies_accepted"), "1");
}

#[test]
fn segments_behind_the_one_that_made_a_tcb_in_the_same_batch_go_to_that_connection() {
    let mut rig = Rig::new(&path());
    rig.info.borrow_mut().settings.syn_backlog = 1;
    rig.info.borrow_mut().listen(IpEndpoint::new(SERVER, 80), 8).unwrap();
    // A SYN and its retransmission in one batch: one TCB, one SYN-ACK
    // each (the second answered by the connection, as a duplicate SYN).
    let syn = from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[]);
    rig.exchange(vec![syn.clone(), syn]);
    assert_eq!(rig.info.borrow().tcbs.len(), 1);
    assert_eq!(rig.handler("listen.syns"), "1");
    // A cookie's ACK and the request right behind it (Linux sends both at
    // once) in one batch: one connection, both segments' data taken.
    let out = rig.exchange(vec![from_client(
        &seg(CPORT + 1, 80, 7000, None, TcpFlags::SYN, 0),
        &[],
    )]);
    let (cookie_syn_ack, _) = to_client(&out[0]);
    let ack = Some((cookie_syn_ack.seq + 1).0);
    rig.exchange(vec![
        from_client(&seg(CPORT + 1, 80, 7001, ack, TcpFlags::empty(), 0), &[]),
        from_client(&seg(CPORT + 1, 80, 7001, ack, TcpFlags::PSH, 3), b"abc"),
    ]);
    let info = rig.info.borrow();
    assert_eq!(info.tcbs.len(), 2, "one TCB per connection");
    let r = info.lookup(&server_key(CPORT + 1, 80)).unwrap();
    assert_eq!(info.tcbs.get(r).unwrap().recv_queued, 3);
    let accept_queue = &info.listeners[&IpEndpoint::new(SERVER, 80)].accept_queue;
    assert_eq!(accept_queue.iter().filter(|&&q| q == r).count(), 1, "accepted once");
    drop(info);
    assert_eq!(rig.handler("listen.cookies_accepted"), "1");
    assert_eq!(rig.handler("listen.existing"), "2");
}

#[test]
fn the_devices_checksum_verdict_is_taken_when_it_checked() {
    use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD};
    let mut rig = rig_listening();
    // Said good by the device: taken, even with a wrong checksum (no
    // software check: that is the point of the offload).
    rig.flags.set(FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD);
    let mut bytes = from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[]);
    bytes[36] ^= 0xff;
    assert_eq!(rig.exchange(vec![bytes]).len(), 1, "a SYN-ACK");
    // Said bad: dropped, even with a right checksum.
    rig.flags.set(FLAG_CSUM_CHECKED | FLAG_L4_CSUM_BAD);
    let good = from_client(&seg(CPORT + 1, 80, 1000, None, TcpFlags::SYN, 0), &[]);
    assert!(rig.exchange(vec![good]).is_empty());
    assert_eq!(rig.handler("fl.device_checked"), "2");
    assert_eq!(rig.handler("fl.bad_checksums"), "1");
}

#[test]
fn with_several_cores_a_connection_picks_a_port_whose_replies_come_back_to_its_core() {
    let rig = Rig::new(&path());
    for queue in 0..2u16 {
        rig.info.borrow_mut().rss = Some(crate::tcp::info::RssPlace::for_thread(queue, 2));
        let rss = rig.info.borrow().rss.unwrap();
        let streams: Vec<_> = (0..40)
            .map(|i| {
                crate::tcp::socket::TcpStream::connect(
                    &rig.info,
                    IpEndpoint::new(SERVER, 0),
                    IpEndpoint::new(CLIENT, 9000 + i),
                )
                .unwrap()
            })
            .collect();
        for s in &streams {
            let key = s.key().unwrap();
            assert!(rss.replies_come_here(&key), "{key:?} would reach the other core");
            let hash = oxnet_driver::rss::hash_ipv4_tcp(
                &oxnet_driver::rss::DEFAULT_KEY,
                CLIENT.octets(),
                SERVER.octets(),
                key.remote.port,
                key.local.port,
            );
            assert_eq!(
                oxnet_driver::rss::queue_of(&oxnet_driver::rss::default_reta(2), hash),
                queue as u8
            );
        }
    }
}

#[test]
fn several_segments_in_order_in_one_batch_are_all_delivered() {
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let ack = Some((iss + 1).0);
    let frames = (0..4u32)
        .map(|i| {
            let mut s = seg(CPORT, 80, 1001 + 100 * i, ack, TcpFlags::empty(), 100);
            s.options.timestamps = Some((110 + i, 0));
            from_client(&s, &[b'a' + i as u8; 100])
        })
        .collect();
    let out = rig.exchange(frames);
    assert_eq!(to_client(out.last().unwrap()).0.ack, Some(TcpSeqNumber(1401)));
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(CPORT, 80)).unwrap()).unwrap();
    assert_eq!(tcb.recv_queued, 400);
    assert!(tcb.ooo.is_empty(), "nothing held");
}

/// Through the IP layer: Ethernet frames in, IPv4Input, TCPStack, the
/// ICMP responder and TCPIcmpError.
const WITH_IP: &str = "src :: PlugSource -> eth :: Classifier(12/0800, -);
eth[1] -> Discard;
eth[0] -> ip4 :: IPv4Input(10.0.0.2);
ip4[0] -> tcp :: TCPStack -> out :: PlugSink;
ip4[1] -> Discard;
ip4[3] -> Discard;
ip4[2] -> icmp :: ICMPv4Responder;
icmp[0] -> out;
icmp[1] -> err :: TCPIcmpError;";

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// An ICMP error from a router (10.0.0.254) about `quoted` (an IP packet
/// the server sent): type, code, and the 4 bytes after the checksum.
fn icmp_error(kind: u8, code: u8, rest: u32, quoted: &[u8]) -> Vec<u8> {
    use oxnet_driver::offload::{fold, ones_sum};
    let quote = &quoted[..quoted.len().min(28)];
    let mut icmp = vec![kind, code, 0, 0];
    icmp.extend_from_slice(&rest.to_be_bytes());
    icmp.extend_from_slice(quote);
    let sum = !fold(ones_sum(&icmp, 0));
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut ip = vec![0u8; 20];
    crate::wire::Ipv4Repr {
        src: std::net::Ipv4Addr::new(10, 0, 0, 254),
        dst: SERVER,
        protocol: crate::wire::IpProtocol::Icmp,
        payload_len: icmp.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut crate::wire::Ipv4Packet::new_unchecked(&mut ip[..]));
    ip.extend_from_slice(&icmp);
    ethernet(&ip)
}

#[test]
fn fragmentation_needed_lowers_the_mss_and_resends_smaller() {
    let mut rig = Rig::new(WITH_IP);
    let listener = crate::tcp::socket::TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, 80), 4).unwrap();
    let mut syn = seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0);
    syn.options.mss = Some(1460);
    let out = rig.exchange(vec![ethernet(&from_client(&syn, &[]))]);
    let iss = to_client(&out[0]).0.seq;
    rig.exchange(vec![ethernet(&from_client(
        &seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 0),
        &[],
    ))]);
    let stream = listener.try_accept().unwrap();
    stream.set_nodelay(true);
    assert_eq!(stream.try_write(&[7u8; 1400]), Ok(1400));
    let out = rig.exchange(vec![]);
    assert_eq!(to_client(&out[0]).1.len(), 1400);
    // A router on the way takes 1000 bytes at most.
    let out = rig.exchange(vec![icmp_error(3, 4, 1000, &out[0])]);
    assert_eq!(rig.handler("err.mtu_updates"), "1");
    let (again, payload) = to_client(&out[0]);
    assert_eq!((again.seq, payload.len()), (iss + 1, 960), "1000 - 20 - 20");
    // An error quoting a sequence number outside the flight is ignored.
    let mut stale = out[0].clone();
    stale[24..28].copy_from_slice(&(iss.0.wrapping_sub(5000)).to_be_bytes());
    rig.exchange(vec![icmp_error(3, 4, 600, &stale)]);
    assert_eq!(rig.handler("err.ignored"), "1");
    drop(listener);
}

#[test]
fn port_unreachable_refuses_a_connection_being_opened() {
    let mut rig = Rig::new(WITH_IP);
    let stream = client_stream(&rig, 45005);
    let out = rig.exchange(vec![]);
    assert_eq!(to_client(&out[0]).0.flags, TcpFlags::SYN);
    rig.exchange(vec![icmp_error(3, 3, 0, &out[0])]);
    assert_eq!(stream.state(), TcpState::Closed);
    assert_eq!(stream.error(), Some(libc::ECONNREFUSED));
    assert_eq!(rig.handler("err.aborted"), "1");
}

#[test]
fn an_ack_for_data_sent_before_a_timeout_is_taken_after_it() {
    let mut rig = Rig::new(&path());
    let (stream, iss) = accepted(&mut rig);
    stream.set_nodelay(true);
    assert_eq!(stream.try_write(&[1u8; 1500]), Ok(1500));
    let out = rig.exchange(vec![]);
    let sent: usize = out.iter().map(|b| to_client(b).1.len()).sum();
    assert_eq!(sent, 1500, "all of it within the initial window (MSS 536)");
    // Nothing acknowledged: the RTO sends the first segment again, from
    // SND.UNA (SND.NXT goes back).
    let (_, again) = next_output(&mut rig);
    assert_eq!(again[0].0.seq, iss + 1);
    // Then the ACK for everything sent before the timeout arrives: it is
    // taken (not answered as an ACK of unsent data), and it ends the flight.
    let all = seg(CPORT, 81, 1001, Some((iss + 1501).0), TcpFlags::empty(), 0);
    let out = rig.exchange(vec![from_client(&all, &[])]);
    assert!(
        out.is_empty(),
        "{:?}",
        out.iter().map(|b| to_client(b).0).collect::<Vec<_>>()
    );
    let info = rig.info.borrow();
    let tcb = info.tcbs.get(info.lookup(&server_key(CPORT, 81)).unwrap()).unwrap();
    assert_eq!(
        (tcb.snd_una, tcb.snd_nxt, tcb.flight_size()),
        (iss + 1501, iss + 1501, 0)
    );
    assert!(tcb.send_buffer.is_empty());
}

#[test]
fn the_echo_client_and_server_on_one_stack_looped_back_move_every_byte() {
    // Both ends on one stack, its output fed back to its input: every
    // connection has both its TCBs in the one table.
    let mut rig = Rig::new(
        "AppExecutor;
         tcp :: TCPStack;
         tcp -> q :: Queue(4096) -> Unqueue -> tcp;
         srv :: TCPEchoServer(7, ADDR 10.0.0.2);
         cli :: TCPEchoClient(10.0.0.2, PORT 7, SRC 10.0.0.2, CONNECTIONS 12, BYTES 40000, CONCURRENCY 4, STOP true);
         Idle -> out :: PlugSink; PlugSource -> Discard;",
    );
    rig.router.run(&|| false);
    assert_eq!(rig.handler("cli.errors"), "");
    assert_eq!(rig.handler("cli.done"), "12");
    assert_eq!(rig.handler("cli.failed"), "0");
    assert_eq!(rig.handler("cli.bytes"), "480000");
    assert_eq!(rig.handler("srv.bytes"), "480000");
    assert_eq!(rig.handler("q.drops"), "0");
}

#[test]
fn an_ack_far_below_snd_una_is_answered_and_changes_nothing() {
    // RFC 5961 §5.2: more than MAX.SND.WND (65535 << 7 here) below SND.UNA.
    let mut rig = rig_listening();
    let iss = handshake(&mut rig);
    let mut old = seg(CPORT, 80, 1001, Some((iss - 100_000_000usize).0), TcpFlags::empty(), 3);
    old.options.timestamps = Some((120, 0));
    let out = rig.exchange(vec![from_client(&old, b"xyz")]);
    assert_eq!(out.len(), 1, "an ACK in answer");
    assert_eq!(to_client(&out[0]).0.ack, Some(TcpSeqNumber(1001)), "its data not taken");
    assert_eq!(rig.handler("ack.bad_acks"), "1");
}

#[test]
fn a_timer_moved_later_keeps_its_one_entry_which_moves_on_when_due() {
    use crate::tcp::info::TimerKind::Retransmit;
    let mut rig = Rig::new(&path());
    let (_stream, _) = accepted(&mut rig);
    let mut info = rig.info.borrow_mut();
    let r = info.lookup(&server_key(CPORT, 81)).unwrap();
    // From a clean state: no entry of this connection's RTO.
    info.timers.retain(|e| e.1 != r);
    info.tcbs.get_mut(r).unwrap().rto_queued = None;
    let entries = |info: &crate::tcp::info::TcpInfo| -> Vec<u64> {
        info.timers
            .iter()
            .filter(|e| e.1 == r && e.2 == Retransmit)
            .map(|e| e.0)
            .collect()
    };
    info.arm_rto(r, 1_000);
    let first = info.tcbs.get(r).unwrap().rto_deadline.unwrap();
    assert_eq!(entries(&info), [first]);
    // Re-armed later (new data acknowledged): no second entry.
    info.arm_rto(r, 5_000);
    let later = info.tcbs.get(r).unwrap().rto_deadline.unwrap();
    assert_eq!(later, first + 4_000);
    assert_eq!(entries(&info), [first]);
    // The entry comes due: it moves to the deadline, nothing fires.
    info.timers.remove(&(first, r, Retransmit));
    assert!(info.timer_due(r, Retransmit, first));
    assert_eq!(entries(&info), [later]);
    // Due at the deadline: it fires (TCPTimers retransmits).
    assert!(!info.timer_due(r, Retransmit, later));
    assert_eq!(info.tcbs.get(r).unwrap().rto_queued, None);
}
