//! What a protocol answers: bytes to copy into a header packet and stored
//! values to send as they are (their shared buffers, no copy), in order.

use super::store::Value;

/// One piece of a reply.
pub enum Piece {
    Bytes(Vec<u8>),
    /// A stored value's buffers, sent as attached segments.
    Value(Value),
}

/// The replies of a connection's requests, in order.
#[derive(Default)]
pub struct Reply {
    pub pieces: Vec<Piece>,
}

impl Reply {
    /// Appends bytes (joined to the last piece when it is bytes).
    pub fn bytes(&mut self, b: &[u8]) {
        if let Some(Piece::Bytes(v)) = self.pieces.last_mut() {
            v.extend_from_slice(b);
        } else {
            self.pieces.push(Piece::Bytes(b.to_vec()));
        }
    }

    /// Appends a text line and its "\r\n".
    pub fn line(&mut self, s: &str) {
        self.bytes(s.as_bytes());
        self.bytes(b"\r\n");
    }

    /// Appends a stored value (another reference to its buffers).
    pub fn value(&mut self, v: &super::store::Value) {
        if v.len > 0 {
            self.pieces.push(Piece::Value(v.clone()));
        }
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Bytes(b) => b.len(),
                Piece::Value(v) => v.len,
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Drops what was added after `mark` pieces and `bytes` bytes of the
    /// last one ([`Reply::mark`]): a command that fails half-way answers
    /// only its error.
    pub fn truncate(&mut self, mark: (usize, usize)) {
        self.pieces.truncate(mark.0 + 1);
        if self.pieces.len() > mark.0 {
            if let Some(Piece::Bytes(b)) = self.pieces.get_mut(mark.0) {
                b.truncate(mark.1);
                if mark.1 == 0 {
                    self.pieces.truncate(mark.0);
                }
            } else {
                self.pieces.truncate(mark.0);
            }
        }
    }

    /// Where the reply ends now, for [`Reply::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        match self.pieces.last() {
            Some(Piece::Bytes(b)) => (self.pieces.len() - 1, b.len()),
            _ => (self.pieces.len(), 0),
        }
    }

    /// Everything as one byte vector (tests; the copying path).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for p in &self.pieces {
            match p {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Value(v) => {
                    for b in &v.buffers {
                        out.extend_from_slice(b);
                    }
                }
            }
        }
        out
    }
}
