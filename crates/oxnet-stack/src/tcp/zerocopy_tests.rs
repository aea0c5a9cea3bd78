//! Zero-copy send end to end on a router with the stack (the API tests'
//! rig, `elements::harness`): a given packet's bytes go out attached, not
//! copied, on the first transmission and on a retransmission, exact on
//! the wire (checksums verified by the hand-written client); the packet's
//! buffer is back in its pool once the peer acknowledges its last byte;
//! byte writes and packet sends keep their order.

use super::elements::harness::*;
use super::socket::{TcpListener, TcpStream};
use crate::wire::{IpEndpoint, TcpFlags, TcpSeqNumber};
use oxnet_driver::{MemoryKind, Mempool, Packet, SharedBuffer};

const CPORT: u16 = 40000;

/// An established connection at SERVER:80 accepted through a listener,
/// and the server's ISS.
fn accepted() -> (Rig, TcpListener, TcpStream, TcpSeqNumber) {
    let mut rig = Rig::new("src :: PlugSource -> tcp :: TCPStack -> out :: PlugSink; AppExecutor;");
    let listener = TcpListener::bind(&rig.info, IpEndpoint::new(SERVER, 80), 16).unwrap();
    let out = rig.exchange(vec![from_client(&seg(CPORT, 80, 1000, None, TcpFlags::SYN, 0), &[])]);
    let iss = to_client(&out[0]).0.seq;
    let ack = seg(CPORT, 80, 1001, Some((iss + 1).0), TcpFlags::empty(), 0);
    assert!(rig.exchange(vec![from_client(&ack, &[])]).is_empty());
    let stream = listener.try_accept().expect("established");
    (rig, listener, stream, iss)
}

/// A packet of `pool` holding `bytes`.
fn packet(pool: &Mempool, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.copy_from_slice(bytes);
    p
}

/// `n` numbered bytes starting from `seed`.
fn numbered(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add((i * 7) as u8)).collect()
}

/// The client acknowledges everything up to `ack`.
fn client_ack(rig: &mut Rig, ack: TcpSeqNumber) -> Vec<Vec<u8>> {
    rig.exchange(vec![from_client(
        &seg(CPORT, 80, 1001, Some(ack.0), TcpFlags::empty(), 0),
        &[],
    )])
}

/// (attached, copied) bytes of the connection so far.
fn zero_copy_stats(rig: &Rig, stream: &TcpStream) -> (u64, u64) {
    let info = rig.info.borrow();
    let s = info.tcbs.get(stream.tcb_ref()).unwrap().send_buffer.stats();
    (s.attached_bytes.get(), s.copied_bytes.get())
}

/// A 1000-byte packet is larger than the MSS (536: the client sent no MSS
/// option, RFC 9293 §3.7.1): two segments, each an attached range of it.
#[test]
fn a_given_packet_goes_out_attached_and_returns_to_its_pool_after_the_ack() {
    let (mut rig, _l, stream, iss) = accepted();
    let app = Mempool::new("app", 8, MemoryKind::Plain).unwrap();
    let data = numbered(1, 1000);
    stream.try_send_packet(packet(&app, &data)).unwrap();
    assert_eq!(app.free_count(), 7, "the stack holds the packet");
    let out = rig.exchange(vec![]);
    let got: Vec<_> = out.iter().map(|f| to_client(f)).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].0.seq, &got[0].1[..]),
        (iss + 1, &data[..536]),
        "exact, checksums good"
    );
    assert_eq!((got[1].0.seq, &got[1].1[..]), (iss + 1 + 536, &data[536..]));
    assert_eq!(zero_copy_stats(&rig, &stream), (1000, 0), "attached, not copied");
    // The segments left (the sink dropped them): no attached header out;
    // the send buffer still holds the packet.
    let attach = rig.info.borrow().attach.clone().expect("made with the first packet");
    assert_eq!(attach.free_count(), attach.size());
    assert_eq!(app.free_count(), 7);
    client_ack(&mut rig, iss + 1 + 536);
    assert_eq!(app.free_count(), 7, "464 bytes still unacknowledged");
    client_ack(&mut rig, iss + 1 + 1000);
    assert_eq!(app.free_count(), 8, "its last byte acknowledged: back in the pool");
    let info = rig.info.borrow();
    assert_eq!(info.tcbs.get(stream.tcb_ref()).unwrap().send_buffer.shared_count(), 0);
}

#[test]
fn a_lost_segment_is_retransmitted_attached_and_byte_exact() {
    let (mut rig, _l, stream, iss) = accepted();
    let app = Mempool::new("app", 8, MemoryKind::Plain).unwrap();
    let data = numbered(9, 400);
    stream.try_send_packet(packet(&app, &data)).unwrap();
    let first = rig.exchange(vec![]);
    assert_eq!(to_client(&first[0]).1, data);
    // Lost: no ACK. After the RTO (1 s before any sample), the same bytes
    // from SND.UNA, attached again.
    let output = rig.output.clone();
    rig.router.run(&|| !output.borrow().is_empty());
    let again: Vec<_> = rig.output.borrow_mut().drain(..).map(|b| to_client(&b)).collect();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!((again[0].0.seq, &again[0].1), (iss + 1, &data));
    assert_eq!(rig.handler("timers.timeouts"), "1");
    assert_eq!(zero_copy_stats(&rig, &stream), (800, 0), "both transmissions attached");
    assert_eq!(app.free_count(), 7);
    client_ack(&mut rig, iss + 1 + 400);
    assert_eq!(app.free_count(), 8);
}

#[test]
fn byte_writes_and_packet_sends_keep_their_order() {
    let (mut rig, _l, stream, iss) = accepted();
    let app = Mempool::new("app", 8, MemoryKind::Plain).unwrap();
    // Written bytes in front of a packet share its segment (behind the
    // headers, copied: a write's one copy); the packet is attached.
    assert_eq!(stream.try_write(b"GET-"), Ok(4));
    let value = numbered(3, 300);
    stream.try_send_packet(packet(&app, &value)).unwrap();
    let out = rig.exchange(vec![]);
    let (s, payload) = to_client(&out[0]);
    assert_eq!(
        (s.seq, &payload[..4], &payload[4..]),
        (iss + 1, &b"GET-"[..], &value[..])
    );
    assert_eq!(zero_copy_stats(&rig, &stream), (300, 0));
    client_ack(&mut rig, iss + 1 + 304);
    // Bytes written after a packet, in the same segment: the segment is
    // copied whole (counted), the order kept.
    stream.try_send_packet(packet(&app, &value[..100])).unwrap();
    assert_eq!(stream.try_write(b"-END"), Ok(4));
    let out = rig.exchange(vec![]);
    let wire: Vec<u8> = out.iter().flat_map(|f| to_client(f).1).collect();
    assert_eq!(wire, [&value[..100], &b"-END"[..]].concat());
    assert_eq!(zero_copy_stats(&rig, &stream), (300, 100));
    client_ack(&mut rig, iss + 1 + 304 + 104);
    assert_eq!(app.free_count(), 8);
}

#[test]
fn one_shared_value_goes_to_two_connections_and_returns_after_both_acks() {
    let (mut rig, listener, a, iss_a) = accepted();
    // A second client port on the same rig.
    let port_b = CPORT + 1;
    let out = rig.exchange(vec![from_client(&seg(port_b, 80, 5000, None, TcpFlags::SYN, 0), &[])]);
    let iss_b = to_client(&out[0]).0.seq;
    let ack = seg(port_b, 80, 5001, Some((iss_b + 1).0), TcpFlags::empty(), 0);
    rig.exchange(vec![from_client(&ack, &[])]);
    let b = listener.try_accept().expect("second connection");
    let app = Mempool::new("app", 4, MemoryKind::Plain).unwrap();
    let data = numbered(5, 500);
    let value = SharedBuffer::new(packet(&app, &data)).unwrap();
    a.try_send_shared(value.clone()).unwrap();
    b.try_send_shared(value.clone()).unwrap();
    drop(value);
    let out = rig.exchange(vec![]);
    let mut got: Vec<_> = out.iter().map(|f| to_client(f)).collect();
    got.sort_by_key(|(s, _)| s.dst_port);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0.seq, &got[0].1), (iss_a + 1, &data));
    assert_eq!((got[1].0.seq, &got[1].1), (iss_b + 1, &data));
    client_ack(&mut rig, iss_a + 1 + 500);
    assert_eq!(app.free_count(), 3, "the other connection still holds it");
    rig.exchange(vec![from_client(
        &seg(port_b, 80, 5001, Some((iss_b + 1 + 500).0), TcpFlags::empty(), 0),
        &[],
    )]);
    assert_eq!(app.free_count(), 4);
}

#[test]
fn a_chained_packet_is_copied_in_and_counted() {
    let (mut rig, _l, stream, iss) = accepted();
    let app = Mempool::new("app", 8, MemoryKind::Plain).unwrap();
    let mut p = packet(&app, b"first ");
    p.append(packet(&app, b"second"));
    stream.try_send_packet(p).unwrap();
    assert_eq!(app.free_count(), 8, "copied: the chain is free at once");
    let out = rig.exchange(vec![]);
    assert_eq!(to_client(&out[0]), (to_client(&out[0]).0, b"first second".to_vec()));
    assert_eq!(zero_copy_stats(&rig, &stream), (0, 12));
    client_ack(&mut rig, iss + 1 + 12);
}
