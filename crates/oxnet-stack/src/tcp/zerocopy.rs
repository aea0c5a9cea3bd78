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
//! **Send: the packet is accepted without the caller copying; the stack
//! copies once, until the driver has reference-counted buffers.** The
//! application writes its bytes into a packet from a pool (the router's,
//! `Ctx::pool`, taken by the application's element; any `Mempool`) and
//! gives it to
//! [`TcpStream::try_send_packet`]. The outgoing path keeps unacknowledged
//! data as bytes in the TCB's send buffer (retransmissions are cut from
//! it), so the packet's bytes are copied into that buffer and the packet
//! returns to the pool at once: the caller may not keep or reuse it (it
//! has given it away), and no lifetime beyond the call applies yet. With
//! reference-counted buffers the plan is the issue's: the pushed buffer
//! stays the stack's until the peer acknowledges its last byte, with the
//! headers prepended in its head room. Nothing here is measured.

use super::socket::{consumed, TcpStream};
use super::tcb::TcpState;
use oxnet_driver::{Packet, PacketBatch};

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
    /// send, whole: EAGAIN, with the packet back, if the send buffer has
    /// not room for all of it (a packet larger than the whole buffer is
    /// taken when the buffer is empty, so it cannot wait for ever). After
    /// shutdown or an error: EPIPE or the error, the packet back.
    pub fn try_send_packet(&self, packet: Packet) -> Result<(), (i32, Packet)> {
        let mut info = self.stack().borrow_mut();
        let r = self.tcb_ref();
        let Some(tcb) = info.tcbs.get_mut(r) else {
            return Err((libc::ENOTCONN, packet));
        };
        if let Some(e) = tcb.error {
            return Err((e, packet));
        }
        if tcb.fin_queued || !matches!(tcb.state, TcpState::Established | TcpState::CloseWait) {
            return Err((libc::EPIPE, packet));
        }
        let len = packet.total_len();
        let room = tcb.send_buffer_limit.saturating_sub(tcb.send_buffer.len());
        if len > room && !tcb.send_buffer.is_empty() {
            return Err((libc::EAGAIN, packet));
        }
        // The one copy (module doc): into the bytes retransmissions are
        // cut from.
        for segment in packet.segments() {
            tcb.send_buffer.extend(&segment[..]);
        }
        info.want_output(r);
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
