//! Packet generator: UDP frames with a sequence number (ixy-pktgen).

use crate::frame;
use oxnet_driver::{Device, Mempool, PacketBatch, Result};
use std::time::Instant;

/// Sends numbered test frames on queue 0 of a device.
pub struct PacketGenerator {
    pool: Mempool,
    batch: PacketBatch,
    batch_size: usize,
    size: usize,
    /// Next sequence number = packets handed to the device so far.
    next_seq: u64,
    limit: Option<u64>,
    rate: Option<RateLimit>,
}

struct RateLimit {
    packets_per_second: f64,
    start: Instant,
}

impl PacketGenerator {
    /// A generator of `size`-byte frames (without CRC) for `device`, at most
    /// `count` of them, at most `rate_mpps` million per second.
    pub fn new(
        device: &dyn Device,
        size: usize,
        count: Option<u64>,
        rate_mpps: Option<f64>,
        batch_size: usize,
    ) -> Result<PacketGenerator> {
        if !(frame::MIN_FRAME..=frame::MAX_FRAME).contains(&size) {
            return Err(oxnet_driver::Error::Config(format!(
                "frame size {size} is outside {}..={} bytes",
                frame::MIN_FRAME,
                frame::MAX_FRAME
            )));
        }
        if let Some(rate) = rate_mpps {
            if !(rate > 0.0 && rate.is_finite()) {
                return Err(oxnet_driver::Error::Config(format!(
                    "rate {rate} Mpps must be positive"
                )));
            }
        }
        // Our own pool, in the kind of memory the device can reach. Filled
        // with the template once: buffers come back unchanged, so each send
        // only writes the sequence number (ixy's trick).
        let ring_hint = 4096;
        let pool = Mempool::new(
            &format!("{} pktgen", device.spec()),
            ring_hint + 2 * batch_size.max(64),
            device.mempool(0).memory_kind(),
        )?;
        let template = frame::template(size);
        let mut all = PacketBatch::with_capacity(pool.size());
        pool.alloc_batch(&mut all, pool.size());
        for packet in all.iter_mut() {
            packet.set_len(size)?;
            packet.copy_from_slice(&template);
        }
        drop(all);
        Ok(PacketGenerator {
            pool,
            batch: PacketBatch::with_capacity(batch_size),
            batch_size,
            size,
            next_seq: 0,
            limit: count,
            rate: rate_mpps.map(|r| RateLimit {
                packets_per_second: r * 1e6,
                start: Instant::now(),
            }),
        })
    }

    /// Packets handed to the device so far.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }

    /// True once `count` packets have been sent.
    pub fn is_done(&self) -> bool {
        self.limit.is_some_and(|l| self.next_seq >= l) && self.batch.is_empty()
    }

    /// Stops numbering new packets; those already numbered are still sent.
    pub fn stop(&mut self) {
        self.limit = Some(self.next_seq + self.batch.len() as u64);
    }

    /// Sends one batch; returns how many packets the device took.
    #[inline]
    pub fn step(&mut self, device: &mut dyn Device) -> usize {
        // Packets the ring had no room for last time go first: nothing is
        // dropped, the order is kept.
        let numbered = self.next_seq + self.batch.len() as u64;
        let mut want = self.batch_size - self.batch.len().min(self.batch_size);
        if let Some(limit) = self.limit {
            want = want.min(limit.saturating_sub(numbered) as usize);
        }
        if let Some(rate) = &mut self.rate {
            let mut allowed = (rate.start.elapsed().as_secs_f64() * rate.packets_per_second) as u64;
            // Credit for time when nothing could be sent (the device had
            // no room, or was gone) is not kept beyond one batch: after a
            // stall the generator resumes at its rate instead of sending
            // the backlog at full speed, which a receiver behind the
            // device (a switch, a capture) would have to absorb.
            let burst = self.batch_size as u64;
            if allowed > numbered + burst {
                let excess = allowed - numbered - burst;
                rate.start += std::time::Duration::from_secs_f64(excess as f64 / rate.packets_per_second);
                allowed = numbered + burst;
            }
            want = want.min(allowed.saturating_sub(numbered) as usize);
        }
        if want > 0 {
            let before = self.batch.len();
            let got = self.pool.alloc_batch(&mut self.batch, want);
            for (i, packet) in self.batch.iter_mut().skip(before).enumerate() {
                // The buffer still holds the template; only length and
                // sequence number change.
                let _ = packet.set_len(self.size);
                frame::set_sequence(packet, numbered + i as u64);
            }
            debug_assert_eq!(self.batch.len(), before + got);
        }
        if self.batch.is_empty() {
            return 0;
        }
        let sent = device.tx_batch(0, &mut self.batch);
        self.next_seq += sent as u64;
        sent
    }
}
