//! Descriptor ring index arithmetic.
//!
//! Ring sizes are powers of two, so "next index" is an add and a mask and
//! never a division or a branch (ixy: "ring sizes must be a power of two").

/// Index arithmetic for a ring of `size` entries (a power of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingIndex {
    mask: u16,
}

impl RingIndex {
    /// For a ring of `size` entries.
    ///
    /// # Panics
    /// If `size` is not a power of two in 1..=32768 (Config::validate checks
    /// user input before it gets here).
    pub const fn new(size: usize) -> RingIndex {
        assert!(
            size.is_power_of_two() && size <= 32768,
            "ring size must be a power of two"
        );
        RingIndex {
            mask: (size - 1) as u16,
        }
    }

    /// Number of entries.
    #[inline]
    pub const fn size(self) -> usize {
        self.mask as usize + 1
    }

    /// `index + n`, wrapped.
    #[inline]
    pub const fn add(self, index: u16, n: u16) -> u16 {
        index.wrapping_add(n) & self.mask
    }

    /// The entry after `index`.
    #[inline]
    pub const fn next(self, index: u16) -> u16 {
        self.add(index, 1)
    }

    /// The entry before `index`.
    #[inline]
    pub const fn prev(self, index: u16) -> u16 {
        index.wrapping_sub(1) & self.mask
    }

    /// Entries from `from` up to (not including) `to`, going forward.
    #[inline]
    pub const fn distance(self, from: u16, to: u16) -> u16 {
        to.wrapping_sub(from) & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ring_size_wraps_and_measures_distances() {
        let mut size = 64;
        while size <= 4096 {
            let ring = RingIndex::new(size);
            let last = (size - 1) as u16;
            assert_eq!(ring.size(), size);
            assert_eq!(ring.next(last), 0, "size {size}");
            assert_eq!(ring.prev(0), last, "size {size}");
            assert_eq!(ring.add(last, 3), 2, "size {size}");
            assert_eq!(ring.distance(last, 1), 2, "size {size}");
            assert_eq!(ring.distance(5, 5), 0, "size {size}");
            assert_eq!(ring.distance(1, 0), last, "size {size}");
            // Walking the ring once visits every index exactly once.
            let mut seen = vec![false; size];
            let mut i = 7u16 & last;
            for _ in 0..size {
                assert!(!seen[i as usize]);
                seen[i as usize] = true;
                i = ring.next(i);
            }
            assert!(seen.iter().all(|&s| s));
            size *= 2;
        }
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn non_power_of_two_is_refused() {
        RingIndex::new(100);
    }
}
