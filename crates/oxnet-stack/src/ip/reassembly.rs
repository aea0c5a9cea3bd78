//! The IPv4 reassembly table (RFC 791 §3.2, "Fragmentation and
//! Reassembly"): fragments of one datagram are those with the same
//! source, destination, protocol and identification; each brings the
//! bytes at its offset; the datagram is whole when the last fragment
//! (More Fragments clear) has come and no hole is left.
//!
//! Instead of RFC 815's hole descriptors written into the buffer, the
//! received ranges are kept as a short sorted list of disjoint ranges
//! (adjacent ones merged): no hole is ever split by an overlap, because
//! overlaps are not allowed (below).
//!
//! * **Overlaps** (RFC 5722 §3, written for IPv6, applied to IPv4 here):
//!   a fragment that overlaps bytes already received discards the whole
//!   datagram, and the fragments still to come: the entry stays, emptied,
//!   until its timeout, and every fragment for it is dropped. An *exact*
//!   copy of bytes already received (a duplicated fragment, which RFC
//!   8200 §4.5 allows to drop alone) is dropped and the datagram goes on.
//!   A fragment that disagrees about the end (data past the last
//!   fragment's end, or a second last fragment with another end) counts
//!   as overlapping.
//! * **Limits**: at most `max_datagrams` datagrams in progress (a
//!   fragment of a new one beyond that is dropped: the ones in progress
//!   are not evicted), at most `max_bytes` bytes of data per datagram
//!   (the datagram is discarded when a fragment would go past), and at
//!   most `max_total_bytes` in all entries (a fragment that would go past
//!   is dropped). A datagram's bytes are the length of its buffer, which
//!   grows to the highest end received.
//! * **Timeout**: a datagram not whole `timeout_us` after its first
//!   fragment is given up (RFC 791 §3.2's timer, set by the first
//!   fragment and not restarted; RFC 1122 §3.3.2 recommends 60 to 120 s,
//!   Linux uses 30 s, the default of IPv4Input). No ICMP time exceeded is
//!   sent (RFC 1122 §3.3.2's SHOULD: there is no ICMP error sender yet).

use std::net::Ipv4Addr;

/// Largest IPv4 datagram: the total length is 16 bits (RFC 791 §3.1).
pub const MAX_DATAGRAM: usize = 65535;

/// What identifies the fragments of one datagram (RFC 791 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentKey {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub ident: u16,
}

/// One fragment, as IPv4Input hands it over.
#[derive(Debug, Clone, Copy)]
pub struct Fragment<'a> {
    /// Offset of its data in the datagram's data, in bytes.
    pub offset: usize,
    /// More Fragments.
    pub more: bool,
    /// Its data (the IP payload).
    pub data: &'a [u8],
    /// The bytes in front of the data (the Ethernet and IP headers): kept
    /// from the first fragment (offset 0) to head the datagram.
    pub headers: &'a [u8],
}

/// The limits of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_datagrams: usize,
    pub max_bytes: usize,
    pub max_total_bytes: usize,
    pub timeout_us: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_datagrams: 64,
            max_bytes: MAX_DATAGRAM,
            // Linux's ipfrag_high_thresh (4 MiB).
            max_total_bytes: 4 << 20,
            timeout_us: 30_000_000,
        }
    }
}

/// What became of a fragment.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Kept; the datagram is not whole yet.
    Stored,
    /// The datagram is whole: the first fragment's headers and the data.
    Complete { headers: Vec<u8>, data: Vec<u8> },
    /// An exact copy of bytes already received: dropped.
    Duplicate,
    /// Overlapping or inconsistent: the datagram is discarded (RFC 5722).
    Overlap,
    /// For a datagram discarded earlier: dropped.
    Discarded,
    /// The table holds `max_datagrams` already: dropped.
    TooManyDatagrams,
    /// Past `max_bytes` (the datagram is discarded) or `max_total_bytes`
    /// (the fragment is dropped).
    TooBig,
    /// A fragment but the last whose length is not a multiple of 8, or
    /// one without data (RFC 791 §3.2: fragments are cut on 8-octet
    /// boundaries), or one that ends past 65535 - 20.
    Malformed,
}

#[derive(Debug)]
struct Datagram {
    deadline_us: u64,
    /// The first fragment's headers, once it came.
    headers: Option<Vec<u8>>,
    /// The data, at its offsets; as long as the highest end received.
    data: Vec<u8>,
    /// Received ranges of `data`: sorted, disjoint, not adjacent.
    received: Vec<(usize, usize)>,
    /// The data's length, once the last fragment came.
    end: Option<usize>,
    /// Discarded (overlap, too big): fragments for it are dropped until
    /// the deadline.
    discarded: bool,
}

impl Datagram {
    fn discard(&mut self) -> usize {
        self.discarded = true;
        self.headers = None;
        self.received = Vec::new();
        std::mem::take(&mut self.data).len()
    }
}

/// The datagrams in progress.
#[derive(Debug, Default)]
pub struct Reassembly {
    limits: Limits,
    datagrams: crate::FlowMap<FragmentKey, Datagram>,
    bytes: usize,
}

impl Reassembly {
    pub fn new(limits: Limits) -> Reassembly {
        Reassembly {
            limits,
            datagrams: crate::FlowMap::default(),
            bytes: 0,
        }
    }

    /// Datagrams in progress (discarded ones waiting for their deadline
    /// included).
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// Bytes held in all entries.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The earliest deadline, if any datagram is in progress.
    pub fn next_deadline(&self) -> Option<u64> {
        self.datagrams.values().map(|d| d.deadline_us).min()
    }

    /// Gives up the datagrams whose deadline is `now_us` or before;
    /// returns how many of them were still being reassembled (not
    /// discarded already).
    pub fn expire(&mut self, now_us: u64) -> usize {
        let mut timed_out = 0;
        let mut freed = 0;
        self.datagrams.retain(|_, d| {
            if d.deadline_us > now_us {
                return true;
            }
            timed_out += usize::from(!d.discarded);
            freed += d.data.len();
            false
        });
        self.bytes -= freed;
        timed_out
    }

    /// Adds a fragment of datagram `key` received at `now_us`.
    pub fn insert(&mut self, key: FragmentKey, fragment: Fragment<'_>, now_us: u64) -> Outcome {
        let (start, len) = (fragment.offset, fragment.data.len());
        let end = start + len;
        if (fragment.more && (len == 0 || len % 8 != 0)) || end > MAX_DATAGRAM - 20 {
            return Outcome::Malformed;
        }
        if !self.datagrams.contains_key(&key) {
            if self.datagrams.len() >= self.limits.max_datagrams {
                return Outcome::TooManyDatagrams;
            }
            self.datagrams.insert(
                key,
                Datagram {
                    deadline_us: now_us.saturating_add(self.limits.timeout_us),
                    headers: None,
                    data: Vec::new(),
                    received: Vec::new(),
                    end: None,
                    discarded: false,
                },
            );
        }
        let Some(d) = self.datagrams.get_mut(&key) else {
            return Outcome::Discarded;
        };
        if d.discarded {
            return Outcome::Discarded;
        }
        // The end must agree with the last fragment's, from either side.
        let inconsistent = match (d.end, fragment.more) {
            (Some(known), true) => end > known,
            (Some(known), false) => end != known,
            (None, false) => d.received.last().is_some_and(|r| r.1 > end),
            (None, true) => false,
        };
        if inconsistent {
            self.bytes -= d.discard();
            return Outcome::Overlap;
        }
        // Overlap with what came before: an exact copy of received bytes
        // is a duplicate, anything else discards the datagram.
        if let Some(&(s, e)) = d.received.iter().find(|(s, e)| *s < end && start < *e) {
            let duplicate = s <= start && end <= e && d.data[start..end] == *fragment.data;
            if duplicate {
                return Outcome::Duplicate;
            }
            self.bytes -= d.discard();
            return Outcome::Overlap;
        }
        if len == 0 && start == 0 && !fragment.more {
            // Offset 0 and no more fragments: not a fragment at all.
            return Outcome::Malformed;
        }
        if end > d.data.len() {
            let grow = end - d.data.len();
            if end > self.limits.max_bytes {
                self.bytes -= d.discard();
                return Outcome::TooBig;
            }
            if self.bytes + grow > self.limits.max_total_bytes {
                return Outcome::TooBig;
            }
            d.data.resize(end, 0);
            self.bytes += grow;
        }
        d.data[start..end].copy_from_slice(fragment.data);
        if !fragment.more {
            d.end = Some(end);
        }
        if start == 0 {
            d.headers = Some(fragment.headers.to_vec());
        }
        insert_range(&mut d.received, start, end);
        let whole = d.end.is_some_and(|e| d.received == [(0, e)]);
        if !whole {
            return Outcome::Stored;
        }
        let Some(d) = self.datagrams.remove(&key) else {
            return Outcome::Stored;
        };
        self.bytes -= d.data.len();
        Outcome::Complete {
            headers: d.headers.unwrap_or_default(),
            data: d.data,
        }
    }
}

/// Adds the range `start..end` (disjoint from the others) to a sorted
/// list of disjoint ranges, merging it with its neighbours if they touch.
fn insert_range(ranges: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    if start == end {
        return;
    }
    let at = ranges.partition_point(|r| r.0 < start);
    ranges.insert(at, (start, end));
    if at + 1 < ranges.len() && ranges[at].1 == ranges[at + 1].0 {
        ranges[at].1 = ranges[at + 1].1;
        ranges.remove(at + 1);
    }
    if at > 0 && ranges[at - 1].1 == ranges[at].0 {
        ranges[at - 1].1 = ranges[at].1;
        ranges.remove(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ident: u16) -> FragmentKey {
        FragmentKey {
            src: Ipv4Addr::new(10, 0, 0, 2),
            dst: Ipv4Addr::new(10, 0, 0, 1),
            protocol: 17,
            ident,
        }
    }

    fn frag(offset: usize, more: bool, data: &[u8]) -> Fragment<'_> {
        Fragment {
            offset,
            more,
            data,
            headers: b"HDR",
        }
    }

    #[test]
    fn ranges_merge_with_both_neighbours() {
        let mut r = Vec::new();
        insert_range(&mut r, 16, 24);
        insert_range(&mut r, 0, 8);
        assert_eq!(r, [(0, 8), (16, 24)]);
        insert_range(&mut r, 8, 16);
        assert_eq!(r, [(0, 24)]);
        insert_range(&mut r, 32, 40);
        insert_range(&mut r, 24, 32);
        assert_eq!(r, [(0, 40)]);
    }

    #[test]
    fn three_fragments_in_any_order_give_the_datagram() {
        let data: Vec<u8> = (0..20).collect();
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut table = Reassembly::new(Limits::default());
            let pieces = [
                frag(0, true, &data[..8]),
                frag(8, true, &data[8..16]),
                frag(16, false, &data[16..]),
            ];
            for (i, &k) in order.iter().enumerate() {
                let outcome = table.insert(key(1), pieces[k], 0);
                if i < 2 {
                    assert_eq!(outcome, Outcome::Stored, "{order:?}");
                } else {
                    assert_eq!(
                        outcome,
                        Outcome::Complete {
                            headers: b"HDR".to_vec(),
                            data: data.clone()
                        }
                    );
                }
            }
            assert!(table.is_empty());
            assert_eq!(table.bytes(), 0);
        }
    }

    #[test]
    fn overlap_discards_the_datagram_and_what_comes_after() {
        let mut table = Reassembly::new(Limits::default());
        assert_eq!(table.insert(key(1), frag(0, true, &[1; 16]), 0), Outcome::Stored);
        assert_eq!(table.insert(key(1), frag(0, true, &[1; 8]), 0), Outcome::Duplicate);
        assert_eq!(table.insert(key(1), frag(8, true, &[2; 16]), 0), Outcome::Overlap);
        assert_eq!(table.bytes(), 0);
        assert_eq!(table.insert(key(1), frag(16, false, &[3; 4]), 0), Outcome::Discarded);
        assert_eq!(table.len(), 1);
        assert_eq!(table.expire(30_000_000), 0, "a discarded datagram does not time out");
        assert!(table.is_empty());
    }

    #[test]
    fn an_end_that_disagrees_is_an_overlap() {
        let mut table = Reassembly::new(Limits::default());
        assert_eq!(table.insert(key(1), frag(8, false, &[1; 8]), 0), Outcome::Stored);
        assert_eq!(table.insert(key(1), frag(16, true, &[1; 8]), 0), Outcome::Overlap);
        let mut table = Reassembly::new(Limits::default());
        assert_eq!(table.insert(key(2), frag(16, true, &[1; 8]), 0), Outcome::Stored);
        assert_eq!(table.insert(key(2), frag(8, false, &[1; 4]), 0), Outcome::Overlap);
    }

    #[test]
    fn malformed_fragments() {
        let mut table = Reassembly::new(Limits::default());
        assert_eq!(table.insert(key(1), frag(0, true, &[1; 7]), 0), Outcome::Malformed);
        assert_eq!(table.insert(key(1), frag(0, true, &[]), 0), Outcome::Malformed);
        assert_eq!(table.insert(key(1), frag(65512, false, &[1; 8]), 0), Outcome::Malformed);
        assert!(table.is_empty());
    }

    #[test]
    fn limits() {
        let limits = Limits {
            max_datagrams: 2,
            max_bytes: 64,
            max_total_bytes: 100,
            timeout_us: 1000,
        };
        let mut table = Reassembly::new(limits);
        assert_eq!(table.insert(key(1), frag(0, true, &[1; 48]), 0), Outcome::Stored);
        assert_eq!(table.insert(key(2), frag(0, true, &[1; 48]), 10), Outcome::Stored);
        assert_eq!(
            table.insert(key(3), frag(0, true, &[1; 8]), 0),
            Outcome::TooManyDatagrams
        );
        // 96 held: 8 more would pass the total of 100.
        assert_eq!(table.insert(key(1), frag(48, true, &[1; 8]), 0), Outcome::TooBig);
        assert_eq!(table.len(), 2, "over the total: only the fragment is dropped");
        // Past 64 bytes for one datagram: discarded.
        assert_eq!(table.insert(key(2), frag(64, false, &[1; 1]), 0), Outcome::TooBig);
        assert_eq!(table.bytes(), 48);
        assert_eq!(table.next_deadline(), Some(1000));
        assert_eq!(table.expire(999), 0);
        assert_eq!(table.expire(1000), 1);
        assert_eq!(table.len(), 1);
        assert_eq!(table.expire(1010), 0, "the discarded one goes silently");
        assert!(table.is_empty());
        assert_eq!(table.bytes(), 0);
    }
}
