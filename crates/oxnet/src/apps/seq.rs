//! Checks that every sequence number arrives exactly once and in order.

/// Counts what arrived against what was expected.
#[derive(Debug, Default, Clone)]
pub struct SequenceChecker {
    /// Bit per sequence number seen.
    seen: Vec<u64>,
    /// Highest sequence number seen so far + 1.
    next_expected: u64,
    /// Frames with a sequence number (including duplicates).
    pub received: u64,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Sequence numbers received more than once (each extra copy counts).
    pub duplicated: u64,
    /// Frames that arrived after a higher sequence number had arrived.
    pub reordered: u64,
    /// Frames that were not test frames.
    pub foreign: u64,
}

impl SequenceChecker {
    /// A checker expecting sequence numbers from 0.
    pub fn new() -> SequenceChecker {
        SequenceChecker::default()
    }

    /// Records one frame's sequence number (`None`: not a test frame).
    #[inline]
    pub fn record(&mut self, seq: Option<u64>) {
        let Some(seq) = seq else {
            self.foreign += 1;
            return;
        };
        self.received += 1;
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            // Grow in large steps; a sequence number far beyond what was
            // sent would be caught as "lost" accounting, not a crash.
            if word > 1 << 28 {
                self.foreign += 1;
                self.received -= 1;
                return;
            }
            self.seen.resize((word + 1).next_power_of_two(), 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicated += 1;
            return;
        }
        self.seen[word] |= 1 << bit;
        self.unique += 1;
        if seq < self.next_expected {
            self.reordered += 1;
        } else {
            self.next_expected = seq + 1;
        }
    }

    /// Sequence numbers below `sent` that never arrived.
    pub fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique_below(sent))
    }

    fn unique_below(&self, sent: u64) -> u64 {
        let full_words = (sent / 64) as usize;
        let mut n: u64 = self.seen.iter().take(full_words).map(|w| w.count_ones() as u64).sum();
        if let Some(w) = self.seen.get(full_words) {
            let rest = sent % 64;
            if rest > 0 {
                n += (w & ((1u64 << rest) - 1)).count_ones() as u64;
            }
        }
        n
    }

    /// Gaps below the highest sequence number seen (what a capture that
    /// does not know how many were sent can call lost).
    pub fn lost_below_highest(&self) -> u64 {
        self.lost(self.next_expected)
    }

    /// True if exactly `0..sent` arrived, each once, in order.
    pub fn is_perfect(&self, sent: u64) -> bool {
        self.lost(sent) == 0 && self.duplicated == 0 && self.reordered == 0 && self.unique == sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_exactly_once_is_perfect() {
        let mut c = SequenceChecker::new();
        (0..1000).for_each(|s| c.record(Some(s)));
        assert!(c.is_perfect(1000));
        assert_eq!(c.lost(1000), 0);
    }

    #[test]
    fn loss_duplicates_and_reordering_are_each_counted() {
        let mut c = SequenceChecker::new();
        for s in [0, 1, 3, 2, 3, 5] {
            c.record(Some(s));
        }
        c.record(None);
        assert_eq!(c.lost(7), 2, "4 and 6");
        assert_eq!(c.duplicated, 1);
        assert_eq!(c.reordered, 1, "2 after 3");
        assert_eq!(c.foreign, 1);
        assert!(!c.is_perfect(7));
    }
}
