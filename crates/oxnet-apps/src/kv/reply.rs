//! What a protocol answers: bytes to copy into header packets and stored
//! values to send as they are (their shared buffers, no copy), in order.
//! One reply is reused for a connection's requests: its byte buffer and
//! value list keep their capacity.

use super::store::Value;

/// The replies of a connection's requests, in order: `buf`, with each
/// value inserted at its byte offset.
#[derive(Default)]
pub struct Reply {
    buf: Vec<u8>,
    values: Vec<(usize, Value)>,
}

/// A piece of a reply ([`Reply::pieces`]).
pub enum Piece<'a> {
    Bytes(&'a [u8]),
    Value(&'a Value),
}

impl Reply {
    /// Appends bytes.
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends a text line and its "\r\n".
    pub fn line(&mut self, s: &str) {
        self.bytes(s.as_bytes());
        self.bytes(b"\r\n");
    }

    /// Appends a number in decimal (no allocation).
    #[inline]
    pub fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.buf.extend_from_slice(&digits[i..]);
    }

    /// Appends a stored value (another reference to its buffers).
    pub fn value(&mut self, v: &Value) {
        if v.len > 0 {
            self.values.push((self.buf.len(), v.clone()));
        }
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.buf.len() + self.values.iter().map(|(_, v)| v.len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.values.is_empty()
    }

    /// Where the reply ends now, for [`Reply::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        (self.buf.len(), self.values.len())
    }

    /// Drops what was added after `mark`: a command that fails half-way
    /// answers only its error.
    pub fn truncate(&mut self, mark: (usize, usize)) {
        self.buf.truncate(mark.0);
        self.values.truncate(mark.1);
    }

    /// Empties the reply, keeping its capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.values.clear();
    }

    /// Calls `f` on the pieces in order (bytes between values, and the
    /// values) while it returns true; false if it stopped.
    pub fn for_each(&self, mut f: impl FnMut(Piece<'_>) -> bool) -> bool {
        let mut pos = 0;
        for (at, v) in &self.values {
            if *at > pos && !f(Piece::Bytes(&self.buf[pos..*at])) {
                return false;
            }
            if !f(Piece::Value(v)) {
                return false;
            }
            pos = *at;
        }
        pos == self.buf.len() || f(Piece::Bytes(&self.buf[pos..]))
    }

    /// Everything as one byte vector (tests; the copying path).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|p| {
            match p {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Value(v) => {
                    for b in v.buffers.iter() {
                        out.extend_from_slice(b);
                    }
                }
            }
            true
        });
        out
    }
}
