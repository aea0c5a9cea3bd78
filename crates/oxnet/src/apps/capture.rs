//! Capture: receive frames, check their sequence numbers, optionally write
//! them to a pcap file.

use super::seq::SequenceChecker;
use crate::frame;
use crate::pcap::PcapWriter;
use oxnet_driver::{Device, PacketBatch};

/// Receives from queue 0 of a device.
pub struct Capture {
    batch: PacketBatch,
    batch_size: usize,
    /// Where frames go, if anywhere.
    pub pcap: Option<PcapWriter>,
    /// Sequence numbers seen.
    pub checker: SequenceChecker,
    /// First error writing the pcap file.
    pub write_error: Option<std::io::Error>,
}

impl Capture {
    /// A capture taking up to `batch_size` frames per step.
    pub fn new(batch_size: usize, pcap: Option<PcapWriter>) -> Capture {
        Capture {
            batch: PacketBatch::with_capacity(batch_size),
            batch_size,
            pcap,
            checker: SequenceChecker::new(),
            write_error: None,
        }
    }

    /// Frames received so far.
    pub fn received(&self) -> u64 {
        self.checker.received + self.checker.foreign
    }

    /// One batch, at most `limit` frames; returns how many were received.
    #[inline]
    pub fn step(&mut self, device: &mut dyn Device, limit: usize) -> usize {
        let n = device.rx_batch(0, &mut self.batch, self.batch_size.min(limit));
        for packet in self.batch.iter() {
            self.checker.record(frame::sequence(packet));
            if let Some(pcap) = &mut self.pcap {
                if let Err(e) = pcap.write(packet) {
                    self.write_error.get_or_insert(e);
                }
            }
        }
        self.batch.clear();
        n
    }
}
