//! One client connection of the cache: the bytes of the request being
//! read, the responses owed in request order (RFC 9112 §9.3.2:
//! pipelined requests are answered in the order they came), and its
//! clocks (the slowloris and idle timeouts).

use oxnet_driver::Packet;
use std::collections::VecDeque;

/// A response owed, in request order.
pub struct Slot {
    pub seq: u64,
    /// Its packets, or None while it waits for the origin.
    pub packets: Option<Vec<Packet>>,
    /// The connection goes on after it (else our side ends: Eof).
    pub keep_alive: bool,
}

#[derive(Default)]
pub struct Conn {
    /// Received bytes not parsed yet (a request head still arriving,
    /// pipelined requests behind a full queue).
    pub inbuf: Vec<u8>,
    /// Bytes of `inbuf` already seen by a parse that found the head
    /// partial.
    pub scanned: usize,
    /// Request body bytes still to discard.
    pub skip: usize,
    /// When the first byte of the request being read came (µs): a head
    /// must be complete within TIMEOUT of it (slowloris).
    pub started_us: Option<u64>,
    /// Last activity (µs): a connection idle for IDLE is closed.
    pub last_us: u64,
    pub queue: VecDeque<Slot>,
    pub next_seq: u64,
    /// No more requests are read (an answer that ends the connection is
    /// queued, or the peer has ended its side).
    pub done: bool,
    /// Our side has ended (Eof pushed) at this time (µs); the peer's end
    /// is awaited, for at most TIMEOUT (RFC 9112 §9.6, lingering close).
    pub shut_us: Option<u64>,
}

impl Conn {
    pub fn new(now_us: u64) -> Conn {
        Conn {
            last_us: now_us,
            ..Conn::default()
        }
    }

    /// Queues a slot; its sequence number.
    pub fn push_slot(&mut self, packets: Option<Vec<Packet>>, keep_alive: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push_back(Slot {
            seq,
            packets,
            keep_alive,
        });
        if !keep_alive {
            self.done = true;
        }
        seq
    }

    /// Fills the waiting slot `seq`.
    pub fn fill(&mut self, seq: u64, packets: Vec<Packet>) {
        if let Some(s) = self.queue.iter_mut().find(|s| s.seq == seq) {
            s.packets = Some(packets);
        }
    }

    /// Drops `n` bytes of body to skip and of `inbuf` from the front.
    pub fn consume(&mut self, head: usize, body: usize) {
        self.inbuf.drain(..head.min(self.inbuf.len()));
        self.scanned = 0;
        self.skip = body;
        self.discard_body();
    }

    /// Drops every byte received and not parsed.
    pub fn clear_input(&mut self) {
        self.inbuf.clear();
        self.scanned = 0;
    }

    /// Discards what of the body to skip is in `inbuf`.
    pub fn discard_body(&mut self) {
        let n = self.skip.min(self.inbuf.len());
        self.inbuf.drain(..n);
        self.scanned = self.scanned.saturating_sub(n);
        self.skip -= n;
    }
}
