//! TCP sequence numbers: arithmetic and comparison modulo 2^32
//! (RFC 9293 §3.4).

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A TCP sequence number. Adding or subtracting a length wraps modulo
/// 2^32; the difference of two numbers is the signed distance from the
/// second to the first, and `a < b` means `a - b < 0`.
///
/// That order is not a total order: it only makes sense between numbers
/// less than 2^31 apart, which the windows of RFC 9293 and RFC 7323 (at most
/// 2^30) guarantee. Two numbers exactly 2^31 apart are each "less" than the
/// other, and `<` is not transitive around the circle. So there is no `Ord`;
/// use [`TcpSeqNumber::max`] and [`TcpSeqNumber::min`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpSeqNumber(pub u32);

impl TcpSeqNumber {
    /// The later of two numbers (RFC 9293 §3.4 order).
    pub fn max(self, other: TcpSeqNumber) -> TcpSeqNumber {
        if self > other {
            self
        } else {
            other
        }
    }

    /// The earlier of two numbers (RFC 9293 §3.4 order).
    pub fn min(self, other: TcpSeqNumber) -> TcpSeqNumber {
        if self < other {
            self
        } else {
            other
        }
    }
}

impl Add<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;

    /// `self + len`, modulo 2^32 (a length over 2^32 is taken modulo 2^32).
    fn add(self, len: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_add(len as u32))
    }
}

impl Sub<usize> for TcpSeqNumber {
    type Output = TcpSeqNumber;

    /// `self - len`, modulo 2^32.
    fn sub(self, len: usize) -> TcpSeqNumber {
        TcpSeqNumber(self.0.wrapping_sub(len as u32))
    }
}

impl AddAssign<usize> for TcpSeqNumber {
    fn add_assign(&mut self, len: usize) {
        *self = *self + len;
    }
}

impl SubAssign<usize> for TcpSeqNumber {
    fn sub_assign(&mut self, len: usize) {
        *self = *self - len;
    }
}

impl Sub for TcpSeqNumber {
    type Output = i32;

    /// The signed distance from `other` to `self`: the wrapped difference
    /// read as two's complement.
    fn sub(self, other: TcpSeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl PartialOrd for TcpSeqNumber {
    /// Compares by the sign of the wrapped difference (see the type's doc:
    /// not a total order).
    fn partial_cmp(&self, other: &TcpSeqNumber) -> Option<std::cmp::Ordering> {
        Some((*self - *other).cmp(&0))
    }
}

impl fmt::Display for TcpSeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn adds_and_subtracts_across_the_wrap() {
        let near_end = TcpSeqNumber(u32::MAX - 1);
        assert_eq!(near_end + 3, TcpSeqNumber(1));
        assert_eq!(TcpSeqNumber(1) - 3, TcpSeqNumber(u32::MAX - 1));
        let mut s = near_end;
        s += 2;
        assert_eq!(s, TcpSeqNumber(0));
        s -= 1;
        assert_eq!(s, TcpSeqNumber(u32::MAX));
    }

    #[test]
    fn distance_is_signed() {
        assert_eq!(TcpSeqNumber(1) - TcpSeqNumber(u32::MAX - 1), 3);
        assert_eq!(TcpSeqNumber(u32::MAX - 1) - TcpSeqNumber(1), -3);
        assert_eq!(TcpSeqNumber(100) - TcpSeqNumber(100), 0);
    }

    #[test]
    fn order_wraps() {
        let before = TcpSeqNumber(0xFFFF_FF00);
        let after = TcpSeqNumber(0x0000_0100);
        assert!(before < after);
        assert!(after > before);
        let same = before;
        assert_eq!(before.partial_cmp(&same), Some(std::cmp::Ordering::Equal));
        assert!(before <= same);
        assert!(before >= same);
        assert_eq!(before.max(after), after);
        assert_eq!(after.min(before), before);
        assert!(TcpSeqNumber(5) < TcpSeqNumber(6));
    }

    #[test]
    fn half_way_round_is_not_ordered_sensibly() {
        // Documented: 2^31 apart, each is less than the other.
        let a = TcpSeqNumber(0);
        let b = TcpSeqNumber(1 << 31);
        assert!(a < b && b < a);
    }

    proptest! {
        #[test]
        fn within_half_the_space_order_matches_distance(a: u32, d in 1u32..(1 << 31)) {
            let a = TcpSeqNumber(a);
            let b = a + d as usize;
            prop_assert!(a < b);
            prop_assert!(b > a);
            prop_assert_eq!(b - a, d as i32);
            prop_assert_eq!(b - d as usize, a);
        }
    }
}
