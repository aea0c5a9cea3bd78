//! The SACK scoreboard of a sender (RFC 6675 §3 and §4): the ranges of
//! sequence space above SND.UNA that the peer reported in SACK blocks
//! (RFC 2018 §3), kept sorted, disjoint and merged, and RFC 6675 §4's
//! routines over them: `IsLost` ([`Scoreboard::is_lost`]), `SetPipe`
//! ([`Scoreboard::pipe`]) and `NextSeg` ([`Scoreboard::next_seg`]).
//!
//! The scoreboard holds ranges, not segments: the send buffer keeps bytes
//! (`Tcb::send_buffer`), so a "segment" here is up to one SMSS of bytes
//! cut where a SACKed range begins. Between two SACKed ranges lies a
//! *hole*; every octet of a hole has the same SACKed ranges above it, so
//! `IsLost` is the same for a whole hole, and the lost holes are always
//! the lowest ones (fewer ranges lie above a higher hole).
//!
//! Bounded: at most [`MAX_RANGES`] ranges, in a fixed array. A peer that
//! reports more disjoint ranges than that costs the highest ones (those
//! furthest from SND.UNA, which matter least for `IsLost` and `NextSeg`);
//! [`Update::dropped`] counts them.
//!
//! Sequence numbers are [`TcpSeqNumber`]s compared modulo 2^32 (RFC 9293
//! §3.4); every range lies between SND.UNA and SND.MAX, less than 2^31
//! apart, so the comparisons are sound.

use crate::wire::{SackBlock, TcpSeqNumber};

/// RFC 6675 §2's DupThresh: duplicate ACKs (or SACKed segments above a
/// hole) that mean a loss.
pub const DUP_THRESH: u32 = 3;

/// Ranges a scoreboard keeps at most (4 blocks per ACK, RFC 2018 §3, so
/// a handful of ACKs' worth of distinct holes).
pub const MAX_RANGES: usize = 16;

/// What one ACK's SACK blocks did to the scoreboard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Update {
    /// Octets SACKed for the first time (RFC 6675 §2: an ACK that SACKs
    /// new octets counts as a duplicate ACK).
    pub new_bytes: u32,
    /// The first block was a D-SACK (RFC 2883 §4): a report of data
    /// received twice, not new SACK information.
    pub dsack: bool,
    /// Blocks refused: empty or inverted, reaching from SND.UNA or below
    /// to above it, or beyond
    /// SND.MAX (RFC 2018 §4 / RFC 6675 §5: they cannot be for data we
    /// sent and not yet had acknowledged).
    pub bad: u32,
    /// Blocks at or below SND.UNA (not a D-SACK): an old ACK's, nothing
    /// to learn.
    pub stale: u32,
    /// Ranges given up to keep the scoreboard within [`MAX_RANGES`].
    pub dropped: u32,
}

/// The next segment to send in loss recovery (RFC 6675 §4, NextSeg).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSeg {
    /// Rule 1: a lost hole's octets from `seq`, `len` of them.
    Lost { seq: TcpSeqNumber, len: u32 },
    /// Rule 2: previously unsent data (the caller knows how much).
    NewData,
    /// Rule 3: unSACKed octets above HighRxt not yet deemed lost.
    Unsacked { seq: TcpSeqNumber, len: u32 },
    /// Rule 4: the rescue retransmission, ending at the highest
    /// outstanding unSACKed octet.
    Rescue { seq: TcpSeqNumber, len: u32 },
}

/// What [`Scoreboard::next_seg`] works from: the RFC's variables, as
/// exclusive ends (one past the octet the RFC names).
#[derive(Debug, Clone, Copy)]
pub struct NextSegInput {
    /// SND.UNA (HighACK + 1).
    pub una: TcpSeqNumber,
    /// SND.MAX (HighData + 1).
    pub snd_max: TcpSeqNumber,
    /// One past HighRxt: everything unSACKed below was retransmitted.
    pub high_rxt: TcpSeqNumber,
    /// One past RescueRxt, None while undefined.
    pub rescue_rxt: Option<TcpSeqNumber>,
    /// Rule 2's condition: unsent data that the peer's window allows.
    pub new_data: bool,
    /// SMSS: the most one segment carries.
    pub smss: u32,
    /// Our FIN was sent: it is the last sequence number before SND.MAX.
    pub fin: bool,
}

/// The sequence space one segment from `start` covers in the stretch up
/// to `end`: at most `smss` octets of data, and the FIN too when it is
/// the last of the stretch and fits behind them (it takes a sequence
/// number, not room in the segment).
pub fn segment_len(start: TcpSeqNumber, end: TcpSeqNumber, snd_max: TcpSeqNumber, fin: bool, smss: u32) -> u32 {
    let span = span(start, end);
    if fin && end == snd_max && span <= smss.saturating_add(1) {
        span
    } else {
        span.min(smss)
    }
}

/// The SACKed ranges above SND.UNA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scoreboard {
    ranges: [SackBlock; MAX_RANGES],
    len: usize,
}

/// `b - a` as a length (0 if b is not after a).
fn span(a: TcpSeqNumber, b: TcpSeqNumber) -> u32 {
    (b - a).max(0) as u32
}

impl Scoreboard {
    /// The ranges, lowest first: sorted, disjoint and not touching.
    pub fn ranges(&self) -> &[SackBlock] {
        &self.ranges[..self.len]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every range.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Octets SACKed.
    pub fn sacked_bytes(&self) -> u32 {
        self.ranges().iter().map(|&(l, r)| span(l, r)).sum()
    }

    /// Octets SACKed below `seq`.
    pub fn sacked_below(&self, seq: TcpSeqNumber) -> u32 {
        self.ranges().iter().map(|&(l, r)| span(l, r.min(seq))).sum()
    }

    /// One past the highest SACKed octet, if any.
    pub fn highest_sacked(&self) -> Option<TcpSeqNumber> {
        self.ranges().last().map(|r| r.1)
    }

    /// The range holding `seq`, if it is SACKed.
    pub fn range_at(&self, seq: TcpSeqNumber) -> Option<SackBlock> {
        self.ranges().iter().copied().find(|&(l, r)| l <= seq && seq < r)
    }

    /// The lowest range starting after `seq`.
    pub fn next_range_after(&self, seq: TcpSeqNumber) -> Option<SackBlock> {
        self.ranges().iter().copied().find(|&(l, _)| l > seq)
    }

    /// SND.UNA moved to `una`: ranges it covers go. A range that reaches
    /// down to SND.UNA means the peer discarded data it had SACKed (RFC
    /// 2018 §8, reneging: it would have acknowledged it otherwise); the
    /// whole scoreboard is then dropped and true returned, so that the
    /// data is sent again rather than waited for.
    pub fn prune(&mut self, una: TcpSeqNumber) -> bool {
        let mut kept = 0;
        for i in 0..self.len {
            let (l, r) = self.ranges[i];
            if r <= una {
                continue;
            }
            if l <= una {
                self.clear();
                return true;
            }
            self.ranges[kept] = (l, r);
            kept += 1;
        }
        self.len = kept;
        false
    }

    /// RFC 6675 §4's Update(): records an ACK's SACK blocks. `seg_ack` is
    /// the ACK's own acknowledgment number (for D-SACK), `una` SND.UNA
    /// after it and `snd_max` one past the highest octet sent. Blocks are
    /// checked first (RFC 2018 §4, RFC 6675 §5): a block must be
    /// non-empty and lie within [SND.UNA, SND.MAX]. The first block is a
    /// D-SACK (RFC 2883 §4) when its left edge is below the ACK or it
    /// lies within the second block; it is counted, not recorded.
    pub fn update(
        &mut self,
        blocks: &[SackBlock],
        seg_ack: TcpSeqNumber,
        una: TcpSeqNumber,
        snd_max: TcpSeqNumber,
    ) -> Update {
        let mut out = Update::default();
        for (i, &(l, r)) in blocks.iter().enumerate() {
            if r - l <= 0 {
                out.bad += 1;
                continue;
            }
            if i == 0 {
                let inside_second = blocks.get(1).is_some_and(|&(l2, r2)| r2 - l2 > 0 && l2 <= l && r <= r2);
                if l < seg_ack || inside_second {
                    out.dsack = true;
                    continue;
                }
            }
            if r <= una {
                out.stale += 1;
                continue;
            }
            // A block starting at or below SND.UNA but reaching above it
            // reports data the peer holds and does not acknowledge.
            if l <= una || r > snd_max {
                out.bad += 1;
                continue;
            }
            let (new, dropped) = self.insert(l, r);
            out.new_bytes += new;
            out.dropped += dropped;
        }
        out
    }

    /// Adds [l, r), merging it with the ranges it overlaps or touches.
    /// Returns the octets that were not SACKed before and the ranges
    /// dropped for the bound.
    fn insert(&mut self, l: TcpSeqNumber, r: TcpSeqNumber) -> (u32, u32) {
        let overlap: u32 = self.ranges().iter().map(|&(a, b)| span(a.max(l), b.min(r))).sum();
        let new = span(l, r) - overlap;
        // One more than the bound, on the stack: the merged list before
        // the highest range is cut off.
        let mut merged = [(TcpSeqNumber(0), TcpSeqNumber(0)); MAX_RANGES + 1];
        let mut n = 0;
        let (mut nl, mut nr) = (l, r);
        let mut placed = false;
        for &(a, b) in self.ranges() {
            if b < nl {
                merged[n] = (a, b);
                n += 1;
            } else if a > nr {
                if !placed {
                    merged[n] = (nl, nr);
                    n += 1;
                    placed = true;
                }
                merged[n] = (a, b);
                n += 1;
            } else {
                nl = nl.min(a);
                nr = nr.max(b);
            }
        }
        if !placed {
            merged[n] = (nl, nr);
            n += 1;
        }
        let dropped = n.saturating_sub(MAX_RANGES) as u32;
        self.len = n.min(MAX_RANGES);
        self.ranges[..self.len].copy_from_slice(&merged[..self.len]);
        (new, dropped)
    }

    /// RFC 6675 §4's IsLost(SeqNum): true when DupThresh discontiguous
    /// SACKed ranges lie above `seq`, or more than (DupThresh - 1) * SMSS
    /// SACKed octets do.
    pub fn is_lost(&self, seq: TcpSeqNumber, smss: u32) -> bool {
        let above = self.ranges().iter().filter(|&&(l, _)| l > seq);
        let count = above.clone().count() as u32;
        let bytes: u64 = above.map(|&(l, r)| span(l, r) as u64).sum();
        count >= DUP_THRESH || bytes > (DUP_THRESH as u64 - 1) * smss as u64
    }

    /// The holes between `una` and `snd_max`, lowest first: the unSACKed
    /// stretches of what was sent.
    pub fn holes(&self, una: TcpSeqNumber, snd_max: TcpSeqNumber) -> impl Iterator<Item = SackBlock> + '_ {
        let mut cursor = una;
        let mut i = 0;
        std::iter::from_fn(move || {
            while cursor < snd_max {
                let (start, end) = match self.ranges().get(i) {
                    Some(&(l, r)) => {
                        i += 1;
                        let hole = (cursor, l.min(snd_max));
                        cursor = cursor.max(r);
                        hole
                    }
                    None => {
                        let hole = (cursor, snd_max);
                        cursor = snd_max;
                        hole
                    }
                };
                if start < end {
                    return Some((start, end));
                }
            }
            None
        })
    }

    /// RFC 6675 §4's SetPipe(): the octets thought to be in the network.
    /// Each unSACKed octet between SND.UNA and SND.MAX counts once if it
    /// is not lost (IsLost false) and once more if it was retransmitted
    /// (below `high_rxt`, one past HighRxt).
    pub fn pipe(&self, una: TcpSeqNumber, snd_max: TcpSeqNumber, high_rxt: TcpSeqNumber, smss: u32) -> u32 {
        let mut pipe = 0u32;
        for (a, b) in self.holes(una, snd_max) {
            if !self.is_lost(a, smss) {
                pipe = pipe.saturating_add(span(a, b));
            }
            pipe = pipe.saturating_add(span(a, b.min(high_rxt)));
        }
        pipe
    }

    /// RFC 6675 §4's NextSeg(): what loss recovery sends next, by the
    /// first of its four rules that applies; None when none does.
    pub fn next_seg(&self, at: &NextSegInput) -> Option<NextSeg> {
        // Nothing SACKed: rules 1 and 3 find nothing (1.b); rules 2 and 4
        // still apply.
        let highest = self.highest_sacked().unwrap_or(at.una);
        let smss = at.smss.max(1);
        // Rules 1 and 3 look at unSACKed octets above HighRxt (1.a) and
        // HighACK, below the highest SACKed octet (1.b).
        let candidates = || {
            self.holes(at.una, at.snd_max.min(highest)).filter_map(move |(a, b)| {
                let start = a.max(at.high_rxt);
                (start < b).then_some((start, b))
            })
        };
        // Rule 1: the first such octet that IsLost (1.c).
        if let Some((s, b)) = candidates().find(|&(s, _)| self.is_lost(s, at.smss)) {
            return Some(NextSeg::Lost {
                seq: s,
                len: segment_len(s, b, at.snd_max, at.fin, smss),
            });
        }
        // Rule 2: new data, if there is some and the window allows.
        if at.new_data {
            return Some(NextSeg::NewData);
        }
        // Rule 3: the first such octet, lost or not.
        if let Some((s, b)) = candidates().next() {
            return Some(NextSeg::Unsacked {
                seq: s,
                len: segment_len(s, b, at.snd_max, at.fin, smss),
            });
        }
        // Rule 4: one rescue retransmission per recovery, HighACK >
        // RescueRxt, holding the highest outstanding unSACKed octet.
        let rescue_allowed = at.rescue_rxt.is_none_or(|r| at.una > r);
        let (a, b) = self.holes(at.una, at.snd_max).last()?;
        if rescue_allowed {
            let len = segment_len(a, b, at.snd_max, at.fin, smss);
            return Some(NextSeg::Rescue {
                seq: b - len as usize,
                len,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    /// Near the wrap, so that every test crosses it.
    const ISS: u32 = 0xffff_f000;

    fn s(offset: u32) -> TcpSeqNumber {
        TcpSeqNumber(ISS.wrapping_add(offset))
    }

    fn b(l: u32, r: u32) -> SackBlock {
        (s(l), s(r))
    }

    /// A scoreboard with SND.UNA at 1, 10 segments of 1000 sent.
    fn board(blocks: &[SackBlock]) -> (Scoreboard, Update) {
        let mut sb = Scoreboard::default();
        let u = sb.update(blocks, s(1), s(1), s(10_001));
        (sb, u)
    }

    #[test]
    fn blocks_are_kept_sorted_and_merged_and_count_only_new_octets() {
        let (mut sb, u) = board(&[b(3001, 4001)]);
        assert_eq!(u.new_bytes, 1000);
        let u = sb.update(&[b(2001, 3001), b(6001, 7001)], s(1), s(1), s(10_001));
        assert_eq!(u.new_bytes, 2000);
        assert_eq!(sb.ranges(), &[b(2001, 4001), b(6001, 7001)], "touching ranges merge");
        // Repeated blocks are no new information.
        let u = sb.update(&[b(2001, 4001), b(6001, 7001)], s(1), s(1), s(10_001));
        assert_eq!(u, Update::default());
        // One block bridging two ranges.
        let u = sb.update(&[b(3501, 6501)], s(1), s(1), s(10_001));
        assert_eq!(u.new_bytes, 2000);
        assert_eq!(sb.ranges(), &[b(2001, 7001)]);
        assert_eq!(sb.sacked_bytes(), 5000);
        assert_eq!(sb.sacked_below(s(3001)), 1000);
        assert_eq!(sb.highest_sacked(), Some(s(7001)));
    }

    #[test]
    fn bad_stale_and_duplicate_blocks_are_told_apart() {
        let (mut sb, _) = board(&[b(5001, 6001)]);
        // Beyond SND.MAX, inverted, empty, crossing SND.UNA (not first).
        let u = sb.update(
            &[b(7001, 8001), b(9001, 10_002), b(4001, 3001), b(3001, 3001)],
            s(1),
            s(1),
            s(10_001),
        );
        assert_eq!(u.bad, 3, "10_002 is past SND.MAX, 4001:3001 inverted, 3001:3001 empty");
        assert_eq!(u.new_bytes, 1000);
        // SND.UNA at 2001: a block below it is stale, one across it bad.
        let u = sb.update(&[b(7001, 8001), b(1, 1001), b(1001, 2501)], s(2001), s(2001), s(10_001));
        assert_eq!((u.stale, u.bad, u.dsack), (1, 1, false));
        // RFC 2883 §4: a first block below the ACK is a D-SACK...
        let u = sb.update(&[b(1001, 2001), b(5001, 6001)], s(2001), s(2001), s(10_001));
        assert_eq!((u.dsack, u.new_bytes, u.stale), (true, 0, 0));
        // ... and so is one within the second block.
        let u = sb.update(&[b(5001, 5501), b(5001, 6001)], s(2001), s(2001), s(10_001));
        assert_eq!((u.dsack, u.new_bytes), (true, 0));
        assert_eq!(sb.ranges(), &[b(5001, 6001), b(7001, 8001)]);
    }

    #[test]
    fn pruning_follows_snd_una_and_a_range_at_snd_una_means_reneging() {
        let (mut sb, _) = board(&[b(2001, 3001), b(4001, 5001)]);
        assert!(!sb.prune(s(3001)));
        assert_eq!(sb.ranges(), &[b(4001, 5001)]);
        // The peer acknowledges up to 4001 but not the SACKed 4001:5001.
        assert!(sb.prune(s(4001)));
        assert!(sb.is_empty());
    }

    #[test]
    fn the_bound_drops_the_highest_ranges_and_counts_them() {
        let mut sb = Scoreboard::default();
        let blocks: Vec<SackBlock> = (0..MAX_RANGES as u32 + 3)
            .map(|i| b(1001 + 200 * i, 1101 + 200 * i))
            .collect();
        let mut dropped = 0;
        for chunk in blocks.chunks(4).rev() {
            dropped += sb.update(chunk, s(1), s(1), s(10_001)).dropped;
        }
        assert_eq!(dropped, 3);
        assert_eq!(sb.ranges().len(), MAX_RANGES);
        assert_eq!(sb.ranges()[0], b(1001, 1101), "the lowest ones are kept");
        assert_eq!(sb.highest_sacked(), Some(s(1101 + 200 * (MAX_RANGES as u32 - 1))));
    }

    #[test]
    fn is_lost_needs_three_ranges_or_more_than_two_segments_above() {
        // Two segments SACKed above 1001: not lost yet.
        let (sb, _) = board(&[b(2001, 4001)]);
        assert!(!sb.is_lost(s(1001), MSS));
        // A third segment, contiguous: 3000 > 2 * SMSS.
        let (sb, _) = board(&[b(2001, 5001)]);
        assert!(sb.is_lost(s(1001), MSS));
        assert!(!sb.is_lost(s(5001), MSS), "nothing SACKed above");
        // Three small discontiguous ranges: DupThresh of them.
        let (sb, _) = board(&[b(2001, 2101), b(3001, 3101), b(4001, 4101)]);
        assert!(sb.is_lost(s(1001), MSS));
        assert!(!sb.is_lost(s(2101), MSS), "two ranges, 200 octets above");
    }

    #[test]
    fn pipe_counts_unsacked_octets_not_lost_and_retransmitted_ones_again() {
        // Sent 1..10001; SACKed 2001:5001 and 6001:7001. Holes: 1:2001
        // (lost: 4000 octets above), 5001:6001 (1000 above: not lost),
        // 7001:10001 (nothing above).
        let (sb, _) = board(&[b(2001, 5001), b(6001, 7001)]);
        assert_eq!(
            sb.holes(s(1), s(10_001)).collect::<Vec<_>>(),
            vec![b(1, 2001), b(5001, 6001), b(7001, 10_001)]
        );
        assert_eq!(sb.pipe(s(1), s(10_001), s(1), MSS), 1000 + 3000);
        // 1:1001 retransmitted (HighRxt 1000): counted once more.
        assert_eq!(sb.pipe(s(1), s(10_001), s(1001), MSS), 1000 + 3000 + 1000);
        // Retransmitted up to 5501: the lost hole twice over 1:2001 and
        // 5001:5501 (not lost: counted twice).
        assert_eq!(sb.pipe(s(1), s(10_001), s(5501), MSS), 2000 + 1000 + 500 + 3000);
        assert_eq!(Scoreboard::default().pipe(s(1), s(10_001), s(1), MSS), 10_000);
    }

    fn at(high_rxt: u32, new_data: bool, rescue: Option<u32>) -> NextSegInput {
        NextSegInput {
            una: s(1),
            snd_max: s(10_001),
            high_rxt: s(high_rxt),
            rescue_rxt: rescue.map(s),
            new_data,
            smss: MSS,
            fin: false,
        }
    }

    #[test]
    fn next_seg_takes_lost_holes_first_then_new_data_then_the_rest_then_a_rescue() {
        // Holes 1:2001 and 3001:4001 lost (three segments SACKed above
        // each), 7001:8001 not (one segment above), the tail 9001:10001.
        let (sb, _) = board(&[b(2001, 3001), b(4001, 7001), b(8001, 9001)]);
        let lost = |seq, len| Some(NextSeg::Lost { seq: s(seq), len });
        assert_eq!(sb.next_seg(&at(1, true, None)), lost(1, 1000));
        assert_eq!(sb.next_seg(&at(1001, true, None)), lost(1001, 1000));
        assert_eq!(
            sb.next_seg(&at(2001, true, None)),
            lost(3001, 1000),
            "over the SACKed range"
        );
        assert_eq!(sb.next_seg(&at(4001, true, None)), Some(NextSeg::NewData));
        assert_eq!(
            sb.next_seg(&at(4001, false, None)),
            Some(NextSeg::Unsacked {
                seq: s(7001),
                len: 1000
            }),
            "rule 3: below the highest SACKed octet only"
        );
        // Rule 4: the segment ending at the highest unSACKed octet.
        assert_eq!(
            sb.next_seg(&at(8001, false, None)),
            Some(NextSeg::Rescue {
                seq: s(9001),
                len: 1000
            })
        );
        assert_eq!(
            sb.next_seg(&at(8001, false, Some(1))),
            None,
            "HighACK is not above RescueRxt"
        );
        // Nothing SACKed: new data, else the rescue of the tail.
        let empty = Scoreboard::default();
        assert_eq!(empty.next_seg(&at(1001, true, Some(1))), Some(NextSeg::NewData));
        assert_eq!(
            empty.next_seg(&at(1001, false, None)),
            Some(NextSeg::Rescue {
                seq: s(9001),
                len: 1000
            })
        );
        assert_eq!(empty.next_seg(&at(1001, false, Some(1))), None);
    }

    #[test]
    fn a_fin_rides_behind_a_full_segment_of_data() {
        // Sent: 1..10001 and the FIN (10001); SACKed 2001:9001.
        let (mut sb, _) = board(&[]);
        sb.update(&[b(2001, 9001)], s(1), s(1), s(10_002));
        let mut input = NextSegInput {
            snd_max: s(10_002),
            fin: true,
            ..at(2001, false, None)
        };
        assert_eq!(
            sb.next_seg(&input),
            Some(NextSeg::Rescue {
                seq: s(9001),
                len: 1001
            })
        );
        input.fin = false;
        assert_eq!(
            sb.next_seg(&input),
            Some(NextSeg::Rescue {
                seq: s(9002),
                len: 1000
            })
        );
        assert_eq!(
            segment_len(s(1), s(3002), s(3002), true, MSS),
            1000,
            "the FIN is not within reach"
        );
        assert_eq!(segment_len(s(2001), s(3002), s(3002), true, MSS), 1001);
        assert_eq!(
            segment_len(s(2001), s(3002), s(4002), true, MSS),
            1000,
            "not the last stretch"
        );
    }

    #[test]
    fn a_lost_segment_ends_where_its_hole_does() {
        let (sb, _) = board(&[b(1501, 5001)]);
        assert_eq!(
            sb.next_seg(&at(1, false, None)),
            Some(NextSeg::Lost { seq: s(1), len: 1000 })
        );
        assert_eq!(
            sb.next_seg(&at(1001, false, None)),
            Some(NextSeg::Lost { seq: s(1001), len: 500 })
        );
    }

    fn blocks() -> impl Strategy<Value = Vec<(u32, u32)>> {
        proptest::collection::vec((0u32..12_000, 0u32..3_000), 0..6)
    }

    proptest! {
        #[test]
        fn random_blocks_keep_the_scoreboard_sorted_disjoint_bounded_and_pipe_within_flight(
            acks in proptest::collection::vec((0u32..2_000, blocks()), 1..40),
            high_rxt in 0u32..11_000,
        ) {
            let mut sb = Scoreboard::default();
            let snd_max = s(10_001);
            let mut una = s(1);
            for (advance, raw) in acks {
                una = (una + advance as usize).min(snd_max);
                sb.prune(una);
                let blocks: Vec<SackBlock> = raw.iter().map(|&(l, len)| b(l, l.wrapping_add(len))).collect();
                sb.update(&blocks, una, una, snd_max);
                let r = sb.ranges();
                prop_assert!(r.len() <= MAX_RANGES);
                for w in r.windows(2) {
                    prop_assert!(w[0].1 < w[1].0, "disjoint, not touching: {:?}", r);
                }
                for &(l, rr) in r {
                    prop_assert!(una < l && l < rr && rr <= snd_max, "{:?} within ({una}, {snd_max}]", r);
                }
                let flight = (snd_max - una) as u32;
                prop_assert!(sb.sacked_bytes() <= flight);
                // HighRxt no higher than SND.MAX, as the sender keeps it.
                let rxt = (s(high_rxt)).min(snd_max).max(una);
                prop_assert!(sb.pipe(una, snd_max, una, MSS) <= flight);
                prop_assert!(sb.pipe(una, snd_max, rxt, MSS) <= 2 * flight);
                let _ = sb.next_seg(&NextSegInput { una, snd_max, high_rxt: rxt, rescue_rxt: None, new_data: false, smss: MSS, fin: true });
            }
        }
    }
}
