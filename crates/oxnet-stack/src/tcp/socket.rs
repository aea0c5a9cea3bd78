//! Sockets for applications (ClickNF §3.3): a listener and a stream,
//! with `async` calls for tasks on the router's executor (the blocking
//! API of ClickNF's blocking tasks: the compiler does the context switch)
//! and `try_` calls that return `EAGAIN` instead of waiting (non-blocking
//! sockets). Errors are errno values, as the C ABI will give them.
//!
//! A call changes the TCB and asks the outgoing path to act (TCPOutput
//! runs after the application tasks in the same round); an element that
//! changes what a call waits for notifies the TCB's event (data,
//! acknowledgment, connection, error), which wakes the task.

use super::elements::rst_syn::abort;
use super::info::TcpInfo;
use super::io_traits::IoWaits;
use super::isn::{ephemeral_port, initial_sequence_number};
use super::tcb::{Tcb, TcpState};
use crate::anno::TcbRef;
use crate::wire::{FlowKey, IpEndpoint, TcpSeqNumber};
use std::cell::RefCell;
use std::rc::Rc;

/// The router's TCP state, as sockets hold it.
pub type Stack = Rc<RefCell<TcpInfo>>;

/// A listening socket (RFC 9293 §3.10.1, passive OPEN). Dropping it stops
/// listening; connections not yet accepted are reset.
pub struct TcpListener {
    stack: Stack,
    local: IpEndpoint,
}

impl TcpListener {
    /// TCP_MAXSEG on a listener: the MSS the connections it makes
    /// announce in their SYN-ACK and send at most (None: the
    /// interface's).
    pub fn set_max_segment(&self, mss: Option<u16>) {
        if let Some(l) = self.stack.borrow_mut().listeners.get_mut(&self.local) {
            l.user_mss = mss;
        }
    }

    /// Listens on `local` (an unspecified address: every address of its
    /// family), with `backlog` established connections waiting at most.
    pub fn bind(stack: &Stack, local: IpEndpoint, backlog: usize) -> Result<TcpListener, i32> {
        stack.borrow_mut().listen(local, backlog)?;
        Ok(TcpListener {
            stack: stack.clone(),
            local,
        })
    }

    /// The endpoint it listens on.
    pub fn local(&self) -> IpEndpoint {
        self.local
    }

    /// The stack it belongs to (for epoll, `super::epoll`).
    pub(crate) fn stack(&self) -> &Stack {
        &self.stack
    }

    /// The next established connection, or EAGAIN.
    pub fn try_accept(&self) -> Result<TcpStream, i32> {
        let mut info = self.stack.borrow_mut();
        let info = &mut *info;
        let l = info.listeners.get_mut(&self.local).ok_or(libc::EBADF)?;
        while let Some(r) = l.accept_queue.pop_front() {
            if let Some(tcb) = info.tcbs.get_mut(r) {
                tcb.has_socket = true;
                return Ok(TcpStream {
                    stack: self.stack.clone(),
                    tcb: r,
                    io: IoWaits::default(),
                });
            }
        }
        Err(libc::EAGAIN)
    }

    /// Waits for the next established connection.
    pub async fn accept(&self) -> Result<TcpStream, i32> {
        loop {
            let wait = match self.try_accept() {
                Err(libc::EAGAIN) => {
                    let info = self.stack.borrow();
                    info.listeners.get(&self.local).ok_or(libc::EBADF)?.accept_event.wait()
                }
                done => return done,
            };
            wait.await;
        }
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let mut info = self.stack.borrow_mut();
        if let Some(l) = info.listeners.remove(&self.local) {
            for r in l.accept_queue {
                abort(&mut info, r, None);
            }
        }
    }
}

/// A connection.
pub struct TcpStream {
    stack: Stack,
    tcb: TcbRef,
    /// The waits of the poll-style calls (`super::io_traits`), kept
    /// across polls so the waker stays registered.
    pub(crate) io: IoWaits,
}

impl TcpStream {
    /// Opens a connection from `local` to `remote` (RFC 9293 §3.10.1,
    /// active OPEN): the SYN goes out in the router's next round; wait
    /// for the handshake with [`TcpStream::connected`]. A local port of 0
    /// takes an ephemeral port (RFC 6056, Linux's range 32768-60999).
    pub fn connect(stack: &Stack, local: IpEndpoint, remote: IpEndpoint) -> Result<TcpStream, i32> {
        if local.addr.is_ipv4() != remote.addr.is_ipv4() {
            return Err(libc::EAFNOSUPPORT);
        }
        if local.addr.is_unspecified() {
            return Err(libc::EADDRNOTAVAIL);
        }
        let mut info = stack.borrow_mut();
        let info = &mut *info;
        let mut key = FlowKey { local, remote };
        if local.port == 0 {
            let (flows, listeners, rss) = (&info.flows, &info.listeners, info.rss);
            // A port is usable if free and, with several cores, if the
            // NIC sends the replies to this core (ClickNF §5.2).
            let in_use = |port: u16| {
                let mut k = key;
                k.local.port = port;
                flows.contains_key(&k)
                    || listeners.contains_key(&k.local)
                    || rss.is_some_and(|rss| !rss.replies_come_here(&k))
            };
            key.local.port = ephemeral_port(&info.secret, &key, 32768..=60999, &mut info.next_port, in_use)
                .ok_or(libc::EADDRNOTAVAIL)?;
        } else if info.flows.contains_key(&key) {
            return Err(libc::EADDRINUSE);
        }
        let iss = TcpSeqNumber(initial_sequence_number(&info.secret, &key, info.clock_us));
        let mut tcb = Tcb::new(key, TcpState::SynSent, iss, &info.settings.tcb);
        tcb.has_socket = true;
        let r = info.insert(tcb);
        info.want_output(r);
        Ok(TcpStream {
            stack: stack.clone(),
            tcb: r,
            io: IoWaits::default(),
        })
    }

    /// Waits for the handshake: Ok once established, the error if it
    /// failed (ECONNREFUSED for a RST, ETIMEDOUT).
    pub async fn connected(&self) -> Result<(), i32> {
        loop {
            let wait = {
                let info = self.stack.borrow();
                let tcb = info.tcbs.get(self.tcb).ok_or(libc::ENOTCONN)?;
                if let Some(e) = tcb.error {
                    return Err(e);
                }
                match tcb.state {
                    TcpState::SynSent | TcpState::SynReceived => tcb.writable.wait(),
                    TcpState::Closed => return Err(libc::ECONNREFUSED),
                    _ => return Ok(()),
                }
            };
            wait.await;
        }
    }

    /// The stack it belongs to (for epoll and zero-copy, `super::epoll`,
    /// `super::zerocopy`).
    pub(crate) fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Its TCB.
    pub(crate) fn tcb_ref(&self) -> TcbRef {
        self.tcb
    }

    fn with<T>(&self, f: impl FnOnce(&mut TcpInfo, TcbRef) -> Result<T, i32>) -> Result<T, i32> {
        let mut info = self.stack.borrow_mut();
        f(&mut info, self.tcb)
    }

    /// The connection's state.
    pub fn state(&self) -> TcpState {
        self.stack
            .borrow()
            .tcbs
            .get(self.tcb)
            .map_or(TcpState::Closed, |t| t.state)
    }

    /// The endpoints, ours first.
    pub fn key(&self) -> Option<crate::wire::FlowKey> {
        self.stack.borrow().tcbs.get(self.tcb).map(|t| t.key)
    }

    /// SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT (None:
    /// off, the default).
    pub fn set_keepalive(&self, keepalive: Option<super::tcb::Keepalive>) {
        let mut info = self.stack.borrow_mut();
        let now = info.clock_us;
        let Some(tcb) = info.tcbs.get_mut(self.tcb) else { return };
        tcb.keepalive = keepalive;
        tcb.keepalive_probes = 0;
        tcb.keepalive_deadline = None;
        if tcb.last_heard_us == 0 {
            tcb.last_heard_us = now;
        }
        if let Some(ka) = keepalive {
            let at = tcb.last_heard_us.max(now) + ka.idle_us;
            info.arm_keepalive(self.tcb, at);
        }
    }

    /// TCP_USER_TIMEOUT (RFC 5482): give up when data stays
    /// unacknowledged this long (None: only after the retransmissions).
    pub fn set_user_timeout(&self, timeout_us: Option<u64>) {
        if let Some(t) = self.stack.borrow_mut().tcbs.get_mut(self.tcb) {
            t.user_timeout_us = timeout_us;
        }
    }

    /// TCP_SYNCNT: how many times an active open sends its SYN again
    /// before it gives up with ETIMEDOUT (RFC 1122 §4.2.3.5's R2 for a
    /// SYN; None: the stack's limit for every segment). Set it before the
    /// first retransmission to count from the start.
    pub fn set_syn_retries(&self, retries: Option<u32>) {
        if let Some(t) = self.stack.borrow_mut().tcbs.get_mut(self.tcb) {
            t.syn_retries = retries;
        }
    }

    /// Ends the connection at once (RFC 9293 §3.10.5 ABORT; what close
    /// does with SO_LINGER on and a time of 0): in SYN-RECEIVED,
    /// ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2 and CLOSE-WAIT a reset
    /// <SEQ=SND.NXT><CTL=RST> goes out; in every state the TCB is deleted
    /// and data queued is dropped. The socket lets go of the connection.
    pub fn abort(&self) {
        let mut info = self.stack.borrow_mut();
        let Some(tcb) = info.tcbs.get_mut(self.tcb) else { return };
        let reset = matches!(
            tcb.state,
            TcpState::SynReceived
                | TcpState::Established
                | TcpState::FinWait1
                | TcpState::FinWait2
                | TcpState::CloseWait
        );
        tcb.has_socket = false;
        if reset {
            tcb.send_rst = true;
            info.want_output(self.tcb);
        } else {
            abort(&mut info, self.tcb, None);
        }
    }

    /// The connection's error (SO_ERROR), if it ended with one.
    pub fn error(&self) -> Option<i32> {
        self.stack.borrow().tcbs.get(self.tcb).and_then(|t| t.error)
    }

    /// SO_SNDBUF: the bytes the send buffer may hold (written and not yet
    /// acknowledged), at least 1; in bytes as given (Linux doubles the
    /// value and counts its own overhead in it). Lowered below what is
    /// queued, writes wait until acknowledgments make room; raised, a
    /// writer waiting for room is woken.
    pub fn set_send_buffer(&self, bytes: usize) {
        if let Some(t) = self.stack.borrow_mut().tcbs.get_mut(self.tcb) {
            t.send_buffer_limit = bytes.max(1);
            if t.send_buffer.len() < t.send_buffer_limit {
                t.writable.notify_all();
            }
        }
    }

    /// TCP_MAXSEG before the connection opens (Linux's "user MSS"): the
    /// MSS our SYN announces and the largest segment sent are at most
    /// `mss` (None: the interface's). Set later, it changes nothing.
    pub fn set_max_segment(&self, mss: Option<u16>) {
        if let Some(t) = self.stack.borrow_mut().tcbs.get_mut(self.tcb) {
            t.user_mss = mss;
        }
    }

    /// TCP_MAXSEG as getsockopt gives it on a connection: the payload of
    /// a full segment (the MSS in use less the timestamps option, as
    /// Linux's `mss_cache`); None once the connection is gone.
    pub fn max_segment(&self) -> Option<u16> {
        let info = self.stack.borrow();
        let t = info.tcbs.get(self.tcb)?;
        Some(t.snd_mss.saturating_sub(if t.timestamps { 12 } else { 0 }))
    }

    /// SO_SNDBUF's value (None once the connection is gone).
    pub fn send_buffer(&self) -> Option<usize> {
        self.stack.borrow().tcbs.get(self.tcb).map(|t| t.send_buffer_limit)
    }

    /// TCP_NODELAY.
    pub fn set_nodelay(&self, on: bool) {
        if let Some(t) = self.stack.borrow_mut().tcbs.get_mut(self.tcb) {
            t.nodelay = on;
        }
    }

    /// Reads what has arrived: Ok(0) at the end of the stream, EAGAIN if
    /// nothing yet, the connection's error if it ended with one.
    pub fn try_read(&self, buf: &mut [u8]) -> Result<usize, i32> {
        self.with(|info, r| {
            let tcb = info.tcbs.get_mut(r).ok_or(libc::ENOTCONN)?;
            let mut n = 0;
            while n < buf.len() {
                let Some(front) = tcb.recv_queue.front_mut() else { break };
                let take = front.len().min(buf.len() - n);
                buf[n..n + take].copy_from_slice(&front[..take]);
                n += take;
                if take == front.len() {
                    tcb.recv_queue.pop_front();
                } else {
                    let _ = front.strip_front(take);
                }
            }
            if n > 0 {
                consumed(info, r, n);
                return Ok(n);
            }
            if let Some(e) = tcb.error {
                return Err(e);
            }
            if tcb.fin_received || tcb.state == TcpState::Closed {
                return Ok(0);
            }
            Err(libc::EAGAIN)
        })
    }

    /// Waits for data (or the end, or an error) and reads it.
    pub async fn read(&self, buf: &mut [u8]) -> Result<usize, i32> {
        loop {
            let wait = match self.try_read(buf) {
                Err(libc::EAGAIN) => {
                    self.with(|info, r| Ok(info.tcbs.get(r).ok_or(libc::ENOTCONN)?.readable.wait()))?
                }
                done => return done,
            };
            wait.await;
        }
    }

    /// Queues what the send buffer has room for; EAGAIN if none. After
    /// shutdown or an error: EPIPE or the error.
    pub fn try_write(&self, data: &[u8]) -> Result<usize, i32> {
        self.with(|info, r| {
            let tcb = info.tcbs.get_mut(r).ok_or(libc::ENOTCONN)?;
            if let Some(e) = tcb.error {
                return Err(e);
            }
            if tcb.fin_queued || !matches!(tcb.state, TcpState::Established | TcpState::CloseWait) {
                return Err(libc::EPIPE);
            }
            let room = tcb.send_buffer_limit.saturating_sub(tcb.send_buffer.len());
            if room == 0 {
                return Err(libc::EAGAIN);
            }
            let n = room.min(data.len());
            tcb.send_buffer.extend_from_slice(&data[..n]);
            info.want_output(r);
            Ok(n)
        })
    }

    /// Waits for room and queues some of `data`; returns how much.
    pub async fn write(&self, data: &[u8]) -> Result<usize, i32> {
        loop {
            let wait = match self.try_write(data) {
                Err(libc::EAGAIN) => {
                    self.with(|info, r| Ok(info.tcbs.get(r).ok_or(libc::ENOTCONN)?.writable.wait()))?
                }
                done => return done,
            };
            wait.await;
        }
    }

    /// Queues all of `data`, waiting for room as needed.
    pub async fn write_all(&self, mut data: &[u8]) -> Result<(), i32> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Closes our direction (RFC 9293 §3.10.4 CLOSE): a FIN follows the
    /// data queued so far; ESTABLISHED becomes FIN-WAIT-1, CLOSE-WAIT
    /// becomes LAST-ACK.
    pub fn shutdown_write(&self) -> Result<(), i32> {
        self.with(|info, r| {
            let tcb = info.tcbs.get_mut(r).ok_or(libc::ENOTCONN)?;
            if tcb.fin_queued {
                return Ok(());
            }
            tcb.state = match tcb.state {
                TcpState::SynReceived | TcpState::Established => TcpState::FinWait1,
                TcpState::CloseWait => TcpState::LastAck,
                _ => return Err(libc::ENOTCONN),
            };
            tcb.fin_queued = true;
            info.want_output(r);
            Ok(())
        })
    }
}

/// The application took `n` bytes of the receive queue's packets (they
/// have left `recv_queue` already): the window opens by as much.
pub(crate) fn consumed(info: &mut TcpInfo, r: TcbRef, n: usize) {
    let Some(tcb) = info.tcbs.get_mut(r) else { return };
    tcb.recv_queued -= n;
    // A window update when the peer is running short of window (RFC 9293
    // §3.8.6.2.2's receiver-side silly window avoidance; the threshold is
    // Linux's).
    if tcb.state.synchronized() && tcb.window_update_due() {
        tcb.send_ack = true;
        info.want_output(r);
    }
}

impl Drop for TcpStream {
    /// The socket lets go: our side closes if it was open (the stack
    /// finishes the close by itself), and a connection already CLOSED is
    /// deleted.
    fn drop(&mut self) {
        // RFC 1122 §4.2.2.13: closing with received data unread tells the
        // peer that data was lost, with a RST.
        {
            let mut info = self.stack.borrow_mut();
            if let Some(tcb) = info.tcbs.get_mut(self.tcb) {
                if !tcb.has_socket || tcb.send_rst {
                    // Aborted (`abort`), or resetting already: the stack
                    // (the RST) finishes it.
                    tcb.has_socket = false;
                    return;
                }
                if tcb.recv_queued > 0 && tcb.state.synchronized() && tcb.state != TcpState::TimeWait {
                    tcb.send_rst = true;
                    tcb.has_socket = false;
                    info.want_output(self.tcb);
                    return;
                }
            }
        }
        let _ = self.shutdown_write();
        let mut info = self.stack.borrow_mut();
        if let Some(tcb) = info.tcbs.get_mut(self.tcb) {
            tcb.has_socket = false;
            // CLOSE in SYN-SENT: "Delete the TCB" (RFC 9293 §3.10.4).
            if matches!(tcb.state, TcpState::Closed | TcpState::SynSent) {
                abort(&mut info, self.tcb, None);
            }
        }
    }
}
