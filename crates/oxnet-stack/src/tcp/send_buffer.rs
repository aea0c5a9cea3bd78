//! The send buffer: what the application gave and the peer has not
//! acknowledged, from SND.UNA on, in order — bytes written with
//! `write` (copied in, in chunks) and packets given with
//! `send_packet` (kept as they are, shared: [`oxnet_driver::shared`]).
//!
//! Segments are cut from it by offset (new data and retransmissions
//! alike, RFC 9293 §3.8.1); an acknowledgment drops bytes from the front,
//! and a packet's buffer is released once every byte of it is
//! acknowledged (and every transmission that still refers to it is done).

use super::payload::ZeroCopyStats;
use oxnet_driver::{AttachPool, SharedBuffer};
use std::collections::VecDeque;

/// Bytes per chunk of written data: the memory of acknowledged bytes is
/// given back a chunk at a time, so a connection that writes and is
/// acknowledged for ever holds at most the buffer limit plus one chunk.
const CHUNK: usize = 16 * 1024;

/// One piece of the send buffer.
enum Chunk {
    /// Written bytes (at most [`CHUNK`]).
    Bytes(Vec<u8>),
    /// A packet given whole, its bytes in place.
    Shared(SharedBuffer),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::Shared(s) => s.len(),
        }
    }
}

/// A run of the send buffer's bytes, as [`SendBuffer::pieces`] yields them.
pub enum Piece<'a> {
    /// Bytes to copy.
    Bytes(&'a [u8]),
    /// `len` bytes of a shared buffer from `offset`: to attach.
    Shared {
        buffer: &'a SharedBuffer,
        offset: usize,
        len: usize,
    },
}

impl Piece<'_> {
    /// The piece's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Piece::Bytes(b) => b,
            Piece::Shared { buffer, offset, len } => &buffer[*offset..*offset + *len],
        }
    }
}

/// The send buffer (see the module doc).
#[derive(Default)]
pub struct SendBuffer {
    chunks: VecDeque<Chunk>,
    /// Bytes of the first chunk already acknowledged.
    front: usize,
    /// Bytes in the buffer (not counting `front`).
    len: usize,
    /// Headers for attaching the shared buffers to segments: the stack's
    /// pool, set with the first packet given (`TcpStream::try_send_packet`).
    attach: Option<AttachPool>,
    stats: ZeroCopyStats,
}

impl SendBuffer {
    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pool attached segments take their headers from, once a packet
    /// was given.
    pub fn attach_pool(&self) -> Option<&AttachPool> {
        self.attach.as_ref()
    }

    /// Sets that pool (the stack's; kept for the connection's life).
    pub fn set_attach_pool(&mut self, pool: &AttachPool) {
        if self.attach.is_none() {
            self.attach = Some(pool.clone());
        }
    }

    /// What the zero-copy output did for this connection.
    pub fn stats(&self) -> &ZeroCopyStats {
        &self.stats
    }

    /// Drops everything (shared buffers lose this reference).
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.front = 0;
        self.len = 0;
    }

    /// Appends written bytes (copied).
    pub fn extend_from_slice(&mut self, mut data: &[u8]) {
        self.len += data.len();
        while !data.is_empty() {
            let room = match self.chunks.back() {
                Some(Chunk::Bytes(b)) => CHUNK - b.len(),
                _ => 0,
            };
            if room == 0 {
                self.chunks
                    .push_back(Chunk::Bytes(Vec::with_capacity(data.len().min(CHUNK))));
                continue;
            }
            let n = room.min(data.len());
            if let Some(Chunk::Bytes(b)) = self.chunks.back_mut() {
                b.extend_from_slice(&data[..n]);
            }
            data = &data[n..];
        }
    }

    /// Appends a packet's bytes without a copy; the buffer is released
    /// when they are acknowledged (and every segment carrying them is
    /// sent). An empty one is dropped at once.
    pub fn push_shared(&mut self, buffer: SharedBuffer) {
        if buffer.is_empty() {
            return;
        }
        self.len += buffer.len();
        self.chunks.push_back(Chunk::Shared(buffer));
    }

    /// Drops `n` bytes from the front (acknowledged); more than held drops
    /// everything.
    pub fn consume(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let first = self.chunks.front().map_or(0, Chunk::len) - self.front;
            if n < first {
                self.front += n;
                return;
            }
            n -= first;
            self.chunks.pop_front();
            self.front = 0;
        }
        if self.len == 0 {
            // A partly acknowledged byte chunk with nothing after it:
            // dropped too, so the next write starts a fresh one.
            self.chunks.clear();
            self.front = 0;
        }
    }

    /// The bytes `offset..offset + len` (clamped to what is held), as
    /// pieces in order.
    pub fn pieces(&self, offset: usize, len: usize) -> Pieces<'_> {
        Pieces {
            chunks: self.chunks.iter(),
            skip: self.front,
            at: 0,
            offset,
            end: offset.saturating_add(len).min(self.len),
        }
    }

    /// True if any byte of `offset..offset + len` lies in a shared buffer.
    pub fn has_shared(&self, offset: usize, len: usize) -> bool {
        self.pieces(offset, len).any(|p| matches!(p, Piece::Shared { .. }))
    }

    /// Copies the bytes from `offset` into `out` (as many as `out` holds
    /// and the buffer has).
    pub fn copy_to(&self, offset: usize, out: &mut [u8]) {
        let mut at = 0;
        for piece in self.pieces(offset, out.len()) {
            let b = piece.bytes();
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
    }

    /// Shared buffers held (for tests and statistics).
    pub fn shared_count(&self) -> usize {
        self.chunks.iter().filter(|c| matches!(c, Chunk::Shared(_))).count()
    }
}

/// The iterator of [`SendBuffer::pieces`]: walks the chunks up to the
/// range's end, no further.
pub struct Pieces<'a> {
    chunks: std::collections::vec_deque::Iter<'a, Chunk>,
    /// Acknowledged bytes at the start of the next chunk (the first only).
    skip: usize,
    /// Buffer position of the next chunk's first live byte.
    at: usize,
    offset: usize,
    end: usize,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        while self.at < self.end && self.offset < self.end {
            let chunk = self.chunks.next()?;
            let skip = std::mem::take(&mut self.skip);
            let size = chunk.len() - skip;
            let start = self.at;
            self.at += size;
            if self.at <= self.offset {
                continue;
            }
            let from = skip + self.offset.saturating_sub(start);
            let to = skip + (self.end - start).min(size);
            return Some(match chunk {
                Chunk::Bytes(b) => Piece::Bytes(&b[from..to]),
                Chunk::Shared(s) => Piece::Shared {
                    buffer: s,
                    offset: from,
                    len: to - from,
                },
            });
        }
        None
    }
}

impl Extend<u8> for SendBuffer {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        let bytes: Vec<u8> = iter.into_iter().collect();
        self.extend_from_slice(&bytes);
    }
}

impl<'a> Extend<&'a u8> for SendBuffer {
    fn extend<I: IntoIterator<Item = &'a u8>>(&mut self, iter: I) {
        let bytes: Vec<u8> = iter.into_iter().copied().collect();
        self.extend_from_slice(&bytes);
    }
}

impl std::fmt::Debug for SendBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SendBuffer({} bytes, {} chunks)", self.len, self.chunks.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    fn shared(pool: &Mempool, bytes: &[u8]) -> SharedBuffer {
        let mut p = pool.alloc().unwrap();
        p.set_len(bytes.len()).unwrap();
        p.copy_from_slice(bytes);
        SharedBuffer::new(p).unwrap()
    }

    fn all(b: &SendBuffer, offset: usize, len: usize) -> Vec<u8> {
        b.pieces(offset, len).flat_map(|p| p.bytes().to_vec()).collect()
    }

    #[test]
    fn bytes_and_packets_keep_their_order_and_ranges_cut_across_them() {
        let pool = Mempool::new("app", 4, MemoryKind::Plain).unwrap();
        let mut b = SendBuffer::default();
        let mut model = Vec::new();
        b.extend_from_slice(b"head:");
        model.extend_from_slice(b"head:");
        let big: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
        b.push_shared(shared(&pool, &big));
        model.extend_from_slice(&big);
        b.extend_from_slice(&[9; 40_000]);
        model.extend_from_slice(&[9; 40_000]);
        assert_eq!(b.len(), model.len());
        for (o, l) in [
            (0, 5),
            (3, 10),
            (5, 1500),
            (1000, 20_000),
            (0, 100_000),
            (41_000, 10),
            (50_000, 3),
            (7, 0),
        ] {
            let end = (o + l).min(model.len());
            assert_eq!(all(&b, o, l), &model[o.min(end)..end], "{o}+{l}");
        }
        assert!(b.has_shared(4, 2) && !b.has_shared(0, 5) && !b.has_shared(1505, 100));
        b.consume(3);
        model.drain(..3);
        assert_eq!(all(&b, 0, 10), &model[..10]);
        b.consume(1000);
        model.drain(..1000);
        assert_eq!(all(&b, 0, 600), &model[..600]);
        assert_eq!(pool.free_count(), 3, "the packet is still held");
        b.consume(502);
        assert_eq!(pool.free_count(), 4, "its last byte acknowledged: released");
        assert_eq!(b.shared_count(), 0);
        b.consume(usize::MAX);
        assert!(b.is_empty());
        let mut out = [0; 3];
        b.extend_from_slice(b"xyz");
        b.copy_to(0, &mut out);
        assert_eq!(&out, b"xyz");
    }

    #[test]
    fn memory_of_acknowledged_bytes_goes_back_a_chunk_at_a_time() {
        let mut b = SendBuffer::default();
        for _ in 0..100 {
            b.extend_from_slice(&[1; 10_000]);
            b.consume(9_000);
            assert!(b.chunks.len() <= 2 + b.len() / CHUNK, "{} chunks", b.chunks.len());
        }
        assert_eq!(b.len(), 100_000);
    }
}
