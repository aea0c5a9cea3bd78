//! Zero-copy calls on a [`TcpStream`] (ClickNF §3.3, issue 11 item 5
//! "Zero-copy"): the application takes the received packets themselves
//! and hands over packets it wrote.
//!
//! **Receive is zero-copy.** TCPProcessData queues each in-sequence
//! segment's packet on the TCB, its data starting at the payload (the
//! headers stripped, not copied); [`TcpStream::try_recv_packet`] hands
//! out that packet. The caller owns it and frees it by dropping it (back
//! to the router's pool). Byte reads ([`TcpStream::try_read`]) and packet
//! reads may be mixed: a partly read packet comes out with what is left.
//!
//! **Send is zero-copy.** The application writes its bytes into a packet
//! from a pool (the router's, `Ctx::pool`, taken by the application's
//! element; any `Mempool`) and gives it to
//! [`TcpStream::try_send_packet`]. The stack keeps the packet itself in
//! the send buffer ([`super::send_buffer`]), shared
//! ([`oxnet_driver::SharedBuffer`]): each transmission of its bytes, a
//! retransmission too, is a chain of a header packet (IP and TCP headers,
//! written bytes before it) and an *attached segment* that refers to the
//! packet's bytes ([`super::payload`]); the NIC reads them where the
//! application wrote them. Byte writes ([`TcpStream::try_write`]) and
//! packet sends may be mixed: the send buffer keeps them in order.
//!
//! **The lifetime of a given packet.** From the call on, the packet is the
//! stack's: the caller has given it away (the call takes it by value) and
//! can neither write nor read it through the old handle. The stack never
//! writes its bytes (headers go into a packet of their own). Its buffer
//! returns to its pool when (1) the peer has acknowledged its last byte
//! (RFC 9293 §3.10.7.4: SND.UNA passes it) and (2) every segment that
//! carries it has left the transmit ring (a device frees sent packets
//! when it cleans its ring, so that may be some polls later), or when
//! the connection is deleted. A caller that wants to reuse the bytes
//! keeps them elsewhere; a caller that wants the same bytes sent on
//! several connections (a cache's value) makes a `SharedBuffer` once and
//! gives each connection a handle with [`TcpStream::try_send_shared`].
//!
//! **Copies that remain, each counted** (per connection, in the send
//! buffer's [`super::payload::ZeroCopyStats`]): a chained packet is
//! copied into the send buffer when given (only a single buffer can be
//! shared); a segment whose data has written bytes *after* a given
//! packet's (a boundary between the two kinds of write) is copied whole;
//! so is a segment for which the stack's attach pool
//! ([`super::info::ATTACH_HEADERS`] headers) has no header free. A device
//! without chain support linearises the chain itself (the driver's
//! `tx_software_fallback` counts it).

use super::send_buffer::SendBuffer;
use super::socket::{consumed, TcpStream};
use super::tcb::TcpState;
use oxnet_driver::{Packet, PacketBatch, SharedBuffer};

impl TcpStream {
    /// The next received packet (payload only), Ok(None) at the end of
    /// the stream, EAGAIN if nothing has arrived, the connection's error
    /// if it ended with one.
    pub fn try_recv_packet(&self) -> Result<Option<Packet>, i32> {
        let mut info = self.stack().borrow_mut();
        let r = self.tcb_ref();
        let tcb = info.tcbs.get_mut(r).ok_or(libc::ENOTCONN)?;
        // Packets emptied by byte reads are not handed out.
        while let Some(p) = tcb.recv_queue.pop_front() {
            if p.is_empty() {
                continue;
            }
            let n = p.len();
            consumed(&mut info, r, n);
            return Ok(Some(p));
        }
        end_or_again(tcb.error, tcb.fin_received, tcb.state)
    }

    /// Waits for the next received packet; Ok(None) at the end.
    pub async fn recv_packet(&self) -> Result<Option<Packet>, i32> {
        loop {
            let wait = match self.try_recv_packet() {
                Err(libc::EAGAIN) => self.readable_wait()?,
                done => return done,
            };
            wait.await;
        }
    }

    /// Moves up to `max` received packets into `batch`, in order; Ok(0)
    /// at the end of the stream, EAGAIN if nothing has arrived.
    pub fn try_recv_packets(&self, batch: &mut PacketBatch, max: usize) -> Result<usize, i32> {
        let mut info = self.stack().borrow_mut();
        let r = self.tcb_ref();
        let tcb = info.tcbs.get_mut(r).ok_or(libc::ENOTCONN)?;
        let (mut count, mut bytes) = (0, 0);
        while count < max {
            let Some(p) = tcb.recv_queue.pop_front() else { break };
            if p.is_empty() {
                continue;
            }
            bytes += p.len();
            count += 1;
            batch.push(p);
        }
        if count > 0 {
            consumed(&mut info, r, bytes);
            return Ok(count);
        }
        if max == 0 {
            return Ok(0);
        }
        end_or_again(tcb.error, tcb.fin_received, tcb.state).map(|_| 0)
    }

    /// Waits for received packets and moves up to `max` into `batch`.
    pub async fn recv_packets(&self, batch: &mut PacketBatch, max: usize) -> Result<usize, i32> {
        loop {
            let wait = match self.try_recv_packets(batch, max) {
                Err(libc::EAGAIN) => self.readable_wait()?,
                done => return done,
            };
            wait.await;
        }
    }

    /// Gives `packet`'s data (every segment of a chain) to the stack to
    /// send, whole, without a copy (module doc: the packet is the stack's
    /// from now on): EAGAIN, with the packet back, if the send buffer has
    /// not room for all of it (a packet larger than the whole buffer is
    /// taken when the buffer is empty, so it cannot wait for ever). After
    /// shutdown or an error: EPIPE or the error, the packet back.
    pub fn try_send_packet(&self, packet: Packet) -> Result<(), (i32, Packet)> {
        if let Err(e) = self.send_room(packet.total_len()) {
            return Err((e, packet));
        }
        let mut info = self.stack().borrow_mut();
        let r = self.tcb_ref();
        let pool = info.attach_pool();
        let Some(tcb) = info.tcbs.get_mut(r) else {
            return Err((libc::ENOTCONN, packet));
        };
        match (pool, SharedBuffer::new(packet)) {
            (Some(pool), Ok(shared)) => {
                tcb.send_buffer.set_attach_pool(&pool);
                tcb.send_buffer.push_shared(shared);
            }
            // No attach pool: a byte copy, counted.
            (None, Ok(shared)) => copy_in(&mut tcb.send_buffer, &[&shared[..]]),
            // A chain (or an attached segment): copied, counted.
            (_, Err(packet)) => {
                let segments: Vec<&[u8]> = packet.segments().map(|s| &s[..]).collect();
                copy_in(&mut tcb.send_buffer, &segments);
            }
        }
        info.want_output(r);
        Ok(())
    }

    /// Gives the bytes of `buffer` to the stack to send, without a copy,
    /// as [`TcpStream::try_send_packet`] does; the handle is the stack's
    /// (the buffer is released with the last handle and segment, on any
    /// connection). EAGAIN, EPIPE or the error with the handle back.
    pub fn try_send_shared(&self, buffer: SharedBuffer) -> Result<(), (i32, SharedBuffer)> {
        if let Err(e) = self.send_room(buffer.len()) {
            return Err((e, buffer));
        }
        let mut info = self.stack().borrow_mut();
        let r = self.tcb_ref();
        let pool = info.attach_pool();
        let Some(tcb) = info.tcbs.get_mut(r) else {
            return Err((libc::ENOTCONN, buffer));
        };
        match pool {
            Some(pool) => {
                tcb.send_buffer.set_attach_pool(&pool);
                tcb.send_buffer.push_shared(buffer);
            }
            None => copy_in(&mut tcb.send_buffer, &[&buffer[..]]),
        }
        info.want_output(r);
        Ok(())
    }

    /// Whether `len` bytes may be given now: the connection's error,
    /// EPIPE after shutdown, EAGAIN without room for all of them (unless
    /// the buffer is empty).
    fn send_room(&self, len: usize) -> Result<(), i32> {
        let info = self.stack().borrow();
        let tcb = info.tcbs.get(self.tcb_ref()).ok_or(libc::ENOTCONN)?;
        if let Some(e) = tcb.error {
            return Err(e);
        }
        if tcb.fin_queued || !matches!(tcb.state, TcpState::Established | TcpState::CloseWait) {
            return Err(libc::EPIPE);
        }
        let room = tcb.send_buffer_limit.saturating_sub(tcb.send_buffer.len());
        if len > room && !tcb.send_buffer.is_empty() {
            return Err(libc::EAGAIN);
        }
        Ok(())
    }

    /// Waits for room and gives `packet` to the stack (dropped, back to
    /// its pool, if the connection fails first).
    pub async fn send_packet(&self, mut packet: Packet) -> Result<(), i32> {
        loop {
            let wait = match self.try_send_packet(packet) {
                Err((libc::EAGAIN, p)) => {
                    packet = p;
                    let info = self.stack().borrow();
                    info.tcbs.get(self.tcb_ref()).ok_or(libc::ENOTCONN)?.writable.wait()
                }
                Err((e, _)) => return Err(e),
                Ok(()) => return Ok(()),
            };
            wait.await;
        }
    }

    fn readable_wait(&self) -> Result<crate::exec::Wait, i32> {
        let info = self.stack().borrow();
        Ok(info.tcbs.get(self.tcb_ref()).ok_or(libc::ENOTCONN)?.readable.wait())
    }
}

/// Copies given bytes into the send buffer (the counted fallback).
fn copy_in(buffer: &mut SendBuffer, parts: &[&[u8]]) {
    for part in parts {
        buffer.extend_from_slice(part);
        let copied = &buffer.stats().copied_bytes;
        copied.set(copied.get() + part.len() as u64);
    }
}

/// With nothing queued: the error, the end (Ok(None)), or EAGAIN, as
/// [`TcpStream::try_read`] decides.
fn end_or_again(error: Option<i32>, fin_received: bool, state: TcpState) -> Result<Option<Packet>, i32> {
    if let Some(e) = error {
        return Err(e);
    }
    if fin_received || state == TcpState::Closed {
        return Ok(None);
    }
    Err(libc::EAGAIN)
}
