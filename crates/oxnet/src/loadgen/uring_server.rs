//! One thread of the io_uring echo server ([`super::serve_uring`]): its
//! ring's event loop, the connections and what each completion does.

use super::serve_uring::{new_ring, setup_error};
use super::uring_buffers::{Buffers, BUF_SIZE, GROUP};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Buffers in each thread's provided-buffer ring (16 MiB of 16 KiB).
const RING_BUFFERS: u16 = 1024;
/// The environment variable that sets the buffers per ring instead (a
/// power of two up to 32768), e.g. few, so that tests see the ring run
/// out.
pub const BUFFERS_ENV: &str = "OXNET_IO_URING_BUFFERS";
/// Buffers a connection may hold (received, not yet echoed): 64 KiB.
pub const MAX_CHUNKS: usize = 4;
/// How often the loop wakes to look at the stop request and the clock.
const TICK: Duration = Duration::from_millis(100);
/// How long the shutdown waits for cancelled operations to complete.
const DRAIN: Duration = Duration::from_secs(2);
/// The environment variable that forces the paths for older kernels, a
/// comma list of `accept` (single accepts) and `buffers` (a buffer per
/// recv, no buffer ring), so that tests run them on any kernel.
pub const FALLBACK_ENV: &str = "OXNET_IO_URING_FALLBACK";

/// What a completion is for: the top byte of its user_data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Accept = 1,
    Recv = 2,
    Send = 3,
    Close = 4,
    Cancel = 5,
    Tick = 6,
}

/// user_data: the operation, the connection's generation (24 bits, so
/// that a late completion or cancel never reaches the slot's next
/// connection) and its slot.
fn user_data(op: Op, gen: u32, slot: u32) -> u64 {
    ((op as u64) << 56) | (u64::from(gen & 0xff_ffff) << 32) | u64::from(slot)
}

fn decode(ud: u64) -> (Option<Op>, u32, u32) {
    let op = match ud >> 56 {
        1 => Some(Op::Accept),
        2 => Some(Op::Recv),
        3 => Some(Op::Send),
        4 => Some(Op::Close),
        5 => Some(Op::Cancel),
        6 => Some(Op::Tick),
        _ => None,
    };
    (op, (ud >> 32) as u32 & 0xff_ffff, ud as u32)
}

/// Bytes received into a buffer and not yet all sent back.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    buf: u32,
    /// Sent up to here.
    start: u32,
    end: u32,
}

struct Conn {
    fd: OwnedFd,
    gen: u32,
    /// What waits to be echoed, oldest first; the first is being sent
    /// whenever the queue is not empty.
    chunks: VecDeque<Chunk>,
    recv_pending: bool,
    /// Without a buffer ring: the buffer the pending recv reads into.
    recv_buf: Option<u32>,
    send_pending: bool,
    /// The client sent its FIN: echo what is queued, then close.
    eof: bool,
    /// An error (or the shutdown): close once nothing is in flight.
    failed: bool,
    /// The operations in flight were asked to stop.
    cancelled: bool,
}

/// The connection in `slot` if it is generation `gen` (a completion for
/// an older one finds nothing).
fn conn_of(conns: &mut [Option<Conn>], slot: u32, gen: u32) -> Option<&mut Conn> {
    conns
        .get_mut(slot as usize)
        .and_then(|c| c.as_mut())
        .filter(|c| c.gen == gen)
}

/// Says once per process that multishot accept is not available.
static SINGLE_ACCEPT: Once = Once::new();
fn say_single_accept() {
    SINGLE_ACCEPT.call_once(|| {
        eprintln!("oxnet loadgen: io_uring: no multishot accept here (Linux 5.19); accepting one at a time")
    });
}

/// Says once per process that buffer rings are not available.
static OWN_BUFFERS: Once = Once::new();

/// One thread's server. The ring is declared before the buffers so that
/// it is dropped first: the kernel must be done with every buffer before
/// it is freed.
pub(super) struct Server {
    ring: IoUring,
    buffers: Buffers,
    listener: OwnedFd,
    /// Connections by slot; `free_slots` are the empty ones.
    conns: Vec<Option<Conn>>,
    free_slots: Vec<u32>,
    next_gen: u32,
    /// Connections whose recv found no buffer in the ring (ENOBUFS):
    /// (slot, generation), re-armed as buffers come back.
    starved: VecDeque<(u32, u32)>,
    /// Operations submitted whose last completion has not come (the
    /// tick excluded): the shutdown waits for them.
    inflight: usize,
    multishot: bool,
    tick_armed: bool,
    /// The tick's interval, read by the kernel when the timeout is
    /// submitted (boxed: its address must not move before that).
    tick: Box<types::Timespec>,
    stopping: bool,
    /// Completions of this round: (user_data, result, flags).
    cqes: Vec<(u64, i32, u32)>,
    /// Connections accepted.
    pub(super) connections: u64,
    /// Bytes echoed.
    pub(super) bytes: u64,
}

impl Server {
    /// A ring and its buffers for the thread that calls it, serving
    /// `listener`.
    pub(super) fn new(listener: OwnedFd) -> Result<Server, String> {
        let ring = new_ring().map_err(|e| setup_error(&e))?;
        let forced = std::env::var(FALLBACK_ENV).unwrap_or_default();
        let forced = |what: &str| forced.split(',').any(|f| f.trim() == what);
        let no_ring = Err(io::Error::other(format!("{FALLBACK_ENV} says so")));
        let count = match std::env::var(BUFFERS_ENV) {
            Ok(v) => match v.parse::<u16>() {
                Ok(n) if n.is_power_of_two() && n <= 32768 => n,
                _ => return Err(format!("{BUFFERS_ENV}={v}: a power of two from 1 to 32768")),
            },
            Err(_) => RING_BUFFERS,
        };
        let provided = if forced("buffers") {
            no_ring
        } else {
            Buffers::with_ring(&ring.submitter(), count)
        };
        let buffers = match provided {
            Ok(b) => b,
            Err(e) => {
                OWN_BUFFERS.call_once(|| {
                    eprintln!(
                        "oxnet loadgen: io_uring: no provided-buffer rings here ({e}); each recv gets a buffer of its own"
                    )
                });
                Buffers::own()
            }
        };
        Ok(Server {
            ring,
            buffers,
            listener,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_gen: 0,
            starved: VecDeque::new(),
            inflight: 0,
            multishot: !forced("accept"),
            tick_armed: false,
            tick: Box::new(types::Timespec::from(TICK)),
            stopping: false,
            cqes: Vec::new(),
            connections: 0,
            bytes: 0,
        })
    }

    /// The event loop, until `end`, a signal or `abort`.
    pub(super) fn serve(&mut self, end: Option<Instant>, abort: &AtomicBool) -> Result<(), String> {
        if !self.multishot {
            say_single_accept();
        }
        self.arm_accept()?;
        self.arm_tick()?;
        loop {
            if end.is_some_and(|e| Instant::now() >= e)
                || crate::signal::stop_requested()
                || abort.load(Ordering::Relaxed)
            {
                break;
            }
            self.round()?;
        }
        self.stop()
    }

    /// One io_uring_enter (submit everything queued, wait for a
    /// completion), then every completion handled.
    fn round(&mut self) -> Result<(), String> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => {}
            // A signal, or completions the kernel holds in its overflow
            // list: reap what is there and go on.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)) => {}
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        self.cqes.clear();
        self.reap();
        let mut i = 0;
        // By index: handling a completion may reap more (SQ full).
        while i < self.cqes.len() {
            let (ud, res, flags) = self.cqes[i];
            i += 1;
            self.complete(ud, res, flags)?;
        }
        self.feed_starved()
    }

    fn reap(&mut self) {
        for cqe in self.ring.completion() {
            self.cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
    }

    /// Queues `e`; when the submission queue is full, submits it first.
    ///
    /// # Safety
    /// Every pointer in `e` must stay valid until its completion: the
    /// buffers (freed only after the shutdown has awaited every
    /// operation), the tick's timespec (boxed, read at submission).
    unsafe fn push(&mut self, e: squeue::Entry, counted: bool) -> Result<(), String> {
        loop {
            // SAFETY: the caller's promise.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                if counted {
                    self.inflight += 1;
                }
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)) => self.reap(),
                Err(e) => return Err(format!("io_uring_enter: {e}")),
            }
        }
    }

    fn arm_accept(&mut self) -> Result<(), String> {
        let fd = types::Fd(self.listener.as_raw_fd());
        let e = if self.multishot {
            opcode::AcceptMulti::new(fd).flags(libc::SOCK_CLOEXEC).build()
        } else {
            opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
        };
        // SAFETY: no peer address asked for; no pointers.
        unsafe { self.push(e.user_data(user_data(Op::Accept, 0, 0)), true) }
    }

    fn arm_tick(&mut self) -> Result<(), String> {
        let e = opcode::Timeout::new(&*self.tick)
            .build()
            .user_data(user_data(Op::Tick, 0, 0));
        self.tick_armed = true;
        // SAFETY: the timespec is boxed in `self` and outlives the submit.
        unsafe { self.push(e, false) }
    }

    fn complete(&mut self, ud: u64, res: i32, flags: u32) -> Result<(), String> {
        let (op, gen, slot) = decode(ud);
        if op != Some(Op::Tick) && !cqueue::more(flags) {
            self.inflight = self.inflight.saturating_sub(1);
        }
        match op {
            Some(Op::Accept) => self.accepted(res, flags),
            Some(Op::Recv) => self.received(slot, gen, res, flags),
            Some(Op::Send) => self.sent(slot, gen, res),
            Some(Op::Tick) => {
                self.tick_armed = false;
                if self.stopping {
                    return Ok(());
                }
                self.arm_tick()
            }
            // A close's or a cancel's result changes nothing.
            Some(Op::Close | Op::Cancel) | None => Ok(()),
        }
    }

    fn accepted(&mut self, res: i32, flags: u32) -> Result<(), String> {
        if res >= 0 {
            // SAFETY: a new descriptor the kernel made for us.
            let fd = unsafe { OwnedFd::from_raw_fd(res) };
            if self.stopping {
                return Ok(());
            }
            self.connections += 1;
            let slot = self.new_conn(fd);
            self.arm_recv(slot)?;
        } else if -res == libc::EINVAL && self.multishot && self.connections == 0 {
            // A kernel before 5.19 reads the multishot flag as a bad field.
            self.multishot = false;
            say_single_accept();
        } else if -res == libc::EINVAL {
            return Err(format!("io_uring accept: {}", io::Error::from_raw_os_error(-res)));
        }
        // Other errors (ECONNABORTED, EMFILE, ...) concern one connection.
        if !cqueue::more(flags) && !self.stopping {
            self.arm_accept()?;
        }
        Ok(())
    }

    fn new_conn(&mut self, fd: OwnedFd) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1) & 0xff_ffff;
        let conn = Conn {
            fd,
            gen: self.next_gen,
            chunks: VecDeque::with_capacity(MAX_CHUNKS),
            recv_pending: false,
            recv_buf: None,
            send_pending: false,
            eof: false,
            failed: false,
            cancelled: false,
        };
        match self.free_slots.pop() {
            Some(slot) => {
                self.conns[slot as usize] = Some(conn);
                slot
            }
            None => {
                self.conns.push(Some(conn));
                (self.conns.len() - 1) as u32
            }
        }
    }

    /// Posts a recv on `slot` if the connection may read now.
    fn arm_recv(&mut self, slot: u32) -> Result<(), String> {
        let ring_buffers = self.buffers.is_ring();
        let Some(c) = self.conns[slot as usize].as_mut() else {
            return Ok(());
        };
        if c.recv_pending || c.eof || c.failed || c.chunks.len() >= MAX_CHUNKS {
            return Ok(());
        }
        let fd = types::Fd(c.fd.as_raw_fd());
        let e = if ring_buffers {
            opcode::Recv::new(fd, std::ptr::null_mut(), BUF_SIZE as u32)
                .buf_group(GROUP)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
        } else {
            let id = self.buffers.take();
            c.recv_buf = Some(id);
            opcode::Recv::new(fd, self.buffers.ptr(id), BUF_SIZE as u32).build()
        };
        c.recv_pending = true;
        let ud = user_data(Op::Recv, c.gen, slot);
        // SAFETY: the buffer (ours, or one the kernel picks from the
        // ring) lives until the shutdown has awaited every operation.
        unsafe { self.push(e.user_data(ud), true) }
    }

    /// Posts a send of the first queued chunk's rest.
    fn arm_send(&mut self, slot: u32) -> Result<(), String> {
        let Some(c) = self.conns[slot as usize].as_mut() else {
            return Ok(());
        };
        let Some(&ch) = c.chunks.front() else { return Ok(()) };
        if c.send_pending || c.failed {
            return Ok(());
        }
        // SAFETY: `start < end <= BUF_SIZE` within the chunk's buffer.
        let from = unsafe { self.buffers.ptr(ch.buf).add(ch.start as usize) };
        let e = opcode::Send::new(types::Fd(c.fd.as_raw_fd()), from, ch.end - ch.start)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(Op::Send, c.gen, slot));
        c.send_pending = true;
        // SAFETY: the chunk's buffer is held by the connection until the
        // send's completion.
        unsafe { self.push(e, true) }
    }

    fn received(&mut self, slot: u32, gen: u32, res: i32, flags: u32) -> Result<(), String> {
        let ring_buf = cqueue::buffer_select(flags).map(u32::from);
        if let Some(id) = ring_buf {
            if !self.buffers.is_valid(id) {
                return Err(format!("io_uring recv: the kernel picked buffer {id}, not one of ours"));
            }
            self.buffers.picked(id);
        }
        let Some(c) = conn_of(&mut self.conns, slot, gen) else {
            if let Some(id) = ring_buf {
                self.buffers.give_back(id);
            }
            return Ok(());
        };
        c.recv_pending = false;
        let buf = ring_buf.or(c.recv_buf.take());
        let mut unused = buf;
        let mut starved = false;
        match (res, buf) {
            (1.., Some(id)) if res as usize <= BUF_SIZE && !self.stopping && !c.failed => {
                c.chunks.push_back(Chunk {
                    buf: id,
                    start: 0,
                    end: res as u32,
                });
                unused = None;
            }
            (0, _) => c.eof = true,
            // Every ring buffer is held by some connection: wait for one.
            (_, None) if -res == libc::ENOBUFS => starved = true,
            _ => c.failed = true,
        }
        if let Some(id) = unused {
            self.buffers.give_back(id);
        }
        self.arm_send(slot)?;
        if starved {
            self.starved.push_back((slot, gen));
        } else {
            self.arm_recv(slot)?;
        }
        self.settle(slot)
    }

    fn sent(&mut self, slot: u32, gen: u32, res: i32) -> Result<(), String> {
        let Some(c) = conn_of(&mut self.conns, slot, gen) else {
            return Ok(());
        };
        c.send_pending = false;
        let mut done = None;
        match c.chunks.front_mut() {
            Some(ch) if res > 0 => {
                let n = (res as u32).min(ch.end - ch.start);
                ch.start += n;
                self.bytes += u64::from(n);
                if ch.start == ch.end {
                    done = c.chunks.pop_front().map(|ch| ch.buf);
                }
            }
            // 0 bytes of a non-empty send, or an error (EPIPE,
            // ECONNRESET, ECANCELED).
            _ => c.failed = true,
        }
        if self.stopping {
            c.failed = true;
        }
        if let Some(id) = done {
            self.buffers.give_back(id);
        }
        // The rest of a short send, or the next chunk.
        self.arm_send(slot)?;
        self.arm_recv(slot)?;
        self.settle(slot)
    }

    /// Closes the connection in `slot` when it is over and nothing is in
    /// flight; after an error, cancels what is.
    fn settle(&mut self, slot: u32) -> Result<(), String> {
        let Some(c) = self.conns[slot as usize].as_mut() else {
            return Ok(());
        };
        let busy = c.recv_pending || c.send_pending;
        if c.failed && busy && !c.cancelled {
            c.cancelled = true;
            let pending = [(c.recv_pending, Op::Recv), (c.send_pending, Op::Send)];
            let gen = c.gen;
            for (_, op) in pending.into_iter().filter(|&(p, _)| p) {
                let e = opcode::AsyncCancel::new(user_data(op, gen, slot))
                    .build()
                    .user_data(user_data(Op::Cancel, gen, slot));
                // SAFETY: no pointers.
                unsafe { self.push(e, true)? };
            }
            return Ok(());
        }
        let over = c.failed || (c.eof && c.chunks.is_empty());
        if busy || !over {
            return Ok(());
        }
        let Some(c) = self.conns[slot as usize].take() else {
            return Ok(());
        };
        for ch in &c.chunks {
            self.buffers.give_back(ch.buf);
        }
        self.free_slots.push(slot);
        let e = opcode::Close::new(types::Fd(c.fd.into_raw_fd()))
            .build()
            .user_data(user_data(Op::Close, c.gen, slot));
        // SAFETY: no pointers; the descriptor is the close's now.
        unsafe { self.push(e, true) }
    }

    /// Re-arms the recvs that found the ring empty, as many as it has
    /// buffers now.
    fn feed_starved(&mut self) -> Result<(), String> {
        let mut room = self.buffers.available();
        while room > 0 && !self.stopping {
            let Some((slot, gen)) = self.starved.pop_front() else {
                break;
            };
            if conn_of(&mut self.conns, slot, gen).is_some() {
                self.arm_recv(slot)?;
                room -= 1;
            }
        }
        Ok(())
    }

    /// The shutdown: every connection failed (nothing more is echoed),
    /// every operation in flight cancelled and awaited.
    fn stop(&mut self) -> Result<(), String> {
        self.stopping = true;
        // SAFETY: no pointers.
        unsafe {
            self.push(
                opcode::AsyncCancel::new(user_data(Op::Accept, 0, 0))
                    .build()
                    .user_data(user_data(Op::Cancel, 0, 0)),
                true,
            )?
        };
        for slot in 0..self.conns.len() as u32 {
            if let Some(c) = self.conns[slot as usize].as_mut() {
                c.failed = true;
                self.settle(slot)?;
            }
        }
        let deadline = Instant::now() + DRAIN;
        while self.inflight > 0 && Instant::now() < deadline {
            if !self.tick_armed {
                self.arm_tick()?;
            }
            self.round()?;
        }
        Ok(())
    }

    /// Frees the thread's resources: the ring first, then the buffers,
    /// unless operations were still in flight (then they are leaked: the
    /// kernel might still write into them).
    pub(super) fn finish(self) {
        let Server {
            ring,
            buffers,
            inflight,
            conns,
            ..
        } = self;
        drop(conns);
        drop(ring);
        if inflight > 0 {
            eprintln!("oxnet loadgen: io_uring: {inflight} operations still in flight at exit; their buffers are left allocated");
            std::mem::forget(buffers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips_and_keeps_the_generation_apart() {
        let ud = user_data(Op::Send, 0x12_3456, 77);
        assert_eq!(decode(ud), (Some(Op::Send), 0x12_3456, 77));
        assert_ne!(user_data(Op::Recv, 1, 5), user_data(Op::Recv, 2, 5));
        assert_eq!(decode(0).0, None);
    }
}
