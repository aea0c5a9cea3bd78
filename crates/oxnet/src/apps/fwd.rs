//! Forwarder: receive a batch on one device, touch one byte per packet,
//! send it on the other (ixy-fwd).

use oxnet_driver::{Device, PacketBatch};

/// Forwards queue 0 of one device to queue 0 of another.
pub struct Forwarder {
    batch: PacketBatch,
    batch_size: usize,
    /// Packets forwarded.
    pub forwarded: u64,
}

impl Forwarder {
    /// A forwarder moving up to `batch_size` packets per step.
    pub fn new(batch_size: usize) -> Forwarder {
        Forwarder {
            batch: PacketBatch::with_capacity(batch_size),
            batch_size,
            forwarded: 0,
        }
    }

    /// Packets received but not yet taken by the transmit ring.
    pub fn pending(&self) -> usize {
        self.batch.len()
    }

    /// One batch from `rx` to `tx`; returns how many were sent.
    ///
    /// When the transmit ring is full, the rest waits here and nothing new
    /// is received until it has gone: the back-pressure reaches the
    /// receiving NIC, which counts what it cannot hold (missed packets) or
    /// pauses its link partner (flow control). No packet is dropped here.
    #[inline]
    pub fn step(&mut self, rx: &mut dyn Device, tx: &mut dyn Device) -> usize {
        if self.batch.is_empty() {
            let n = rx.rx_batch(0, &mut self.batch, self.batch_size);
            if n == 0 {
                return 0;
            }
            // Touch every packet, as ixy does: a forwarder that never reads
            // the data would measure an unrealistic workload.
            for packet in self.batch.iter_mut() {
                if packet.len() > 1 {
                    packet[1] = packet[1].wrapping_add(1);
                }
            }
        }
        let sent = tx.tx_batch(0, &mut self.batch);
        self.forwarded += sent as u64;
        sent
    }
}
