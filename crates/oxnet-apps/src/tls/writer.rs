//! Bytes written into stream packets: what rustls's `write_tls` writes
//! (records toward the network) goes straight into buffers of the pool,
//! each filled before the next is taken, so a record is copied once.

use crate::stream;
use oxnet_driver::{Mempool, Packet, PacketBatch};
use std::io;

/// An [`io::Write`] that appends Data packets of connection `id` to
/// `out`. Packets are pushed when full and when the writer is dropped.
/// An empty pool is an error (`OutOfMemory`), so that rustls keeps what
/// it could not write and sends it at the next chance.
pub struct StreamWriter<'a> {
    pool: &'a Mempool,
    id: u32,
    out: &'a mut PacketBatch,
    filling: Option<Packet>,
}

impl<'a> StreamWriter<'a> {
    pub fn new(pool: &'a Mempool, id: u32, out: &'a mut PacketBatch) -> StreamWriter<'a> {
        StreamWriter {
            pool,
            id,
            out,
            filling: None,
        }
    }
}

impl io::Write for StreamWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut p = match self.filling.take() {
            Some(p) => p,
            None => {
                let mut p = self
                    .pool
                    .alloc()
                    .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "packet pool empty"))?;
                let _ = p.set_len(0);
                p
            }
        };
        let used = p.len();
        let n = buf.len().min(p.capacity() - used);
        p.set_len(used + n).map_err(|e| io::Error::other(e.to_string()))?;
        p[used..used + n].copy_from_slice(&buf[..n]);
        if p.len() == p.capacity() {
            self.out.push(stream::data(p, self.id));
        } else {
            self.filling = Some(p);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for StreamWriter<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.filling.take() {
            self.out.push(stream::data(p, self.id));
        }
    }
}
