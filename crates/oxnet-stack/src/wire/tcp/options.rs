//! TCP options (RFC 9293 §3.2): Maximum Segment Size, Window Scale and
//! Timestamps (RFC 7323), SACK-permitted and SACK (RFC 2018).

use super::seq_number::TcpSeqNumber;
use crate::wire::{get_u16, get_u32, put_u16, put_u32, Result, WireError};

/// Option kinds (IANA "TCP Option Kind Numbers").
mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

/// The most option bytes a header holds: a data offset of 15 words less
/// the 20-byte fixed header (RFC 9293 §3.1).
pub const MAX_OPTIONS_LEN: usize = 40;

/// The largest window shift (RFC 7323 §2.3): a larger one received is used
/// as 14.
pub const MAX_WINDOW_SHIFT: u8 = 14;

/// Most SACK blocks in one option: 2 + 8 * 4 = 34 bytes fill what 40 bytes
/// of options leave after the 4 bytes of NOP padding and alignment.
pub const MAX_SACK_BLOCKS: usize = 4;

/// A SACK block: the left edge and the right edge (one past the last
/// byte) of a block received out of order (RFC 2018 §3).
pub type SackBlock = (TcpSeqNumber, TcpSeqNumber);

/// The options of a segment that the stack understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2, RFC 9293 §3.7.1).
    pub mss: Option<u16>,
    /// Window shift (kind 3, RFC 7323 §2), at most [`MAX_WINDOW_SHIFT`].
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4, RFC 2018 §2).
    pub sack_permitted: bool,
    /// SACK blocks (kind 5, RFC 2018 §3), the first ones filled; parse
    /// fills them from the front, emit writes every `Some` in order.
    pub sack_blocks: [Option<SackBlock>; MAX_SACK_BLOCKS],
    /// Timestamps (kind 8, RFC 7323 §3): TSval and TSecr.
    pub timestamps: Option<(u32, u32)>,
}

impl TcpOptions {
    /// Parses the options area of a header (everything between the fixed
    /// header and the data). An End option ends the list (what follows is
    /// padding); unknown kinds are skipped by their length. A length under
    /// 2, or one running past the area, leaves no way to find the next
    /// option: Malformed (RFC 9293 §3.2 asks that an illegal length be
    /// handled; the caller may reset). A known kind with a length that is
    /// wrong for it (an MSS of 3 bytes, SACK without a whole block) is
    /// skipped like an unknown one, as Linux does, so that a peer's odd
    /// option costs that option and not the segment. A repeated option: the
    /// last one counts.
    pub fn parse(bytes: &[u8]) -> Result<TcpOptions> {
        let mut options = TcpOptions::default();
        let mut at = 0;
        while at < bytes.len() {
            let kind = bytes[at];
            match kind {
                kind::END => break,
                kind::NOP => {
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let len = *bytes
                .get(at + 1)
                .ok_or(WireError::Malformed("TCP option without its length"))? as usize;
            if len < 2 {
                return Err(WireError::Malformed("TCP option length under 2"));
            }
            let body = bytes
                .get(at + 2..at + len)
                .ok_or(WireError::Malformed("TCP option runs past the header"))?;
            match kind {
                kind::MSS if len == 4 => options.mss = Some(get_u16(body, 0)),
                kind::WINDOW_SCALE if len == 3 => options.window_scale = Some(body[0].min(MAX_WINDOW_SHIFT)),
                kind::SACK_PERMITTED if len == 2 => options.sack_permitted = true,
                kind::SACK if body.len() % 8 == 0 && (1..=MAX_SACK_BLOCKS).contains(&(body.len() / 8)) => {
                    options.sack_blocks = [None; MAX_SACK_BLOCKS];
                    for (slot, block) in options.sack_blocks.iter_mut().zip(body.chunks_exact(8)) {
                        *slot = Some((TcpSeqNumber(get_u32(block, 0)), TcpSeqNumber(get_u32(block, 4))));
                    }
                }
                kind::TIMESTAMPS if len == 10 => options.timestamps = Some((get_u32(body, 0), get_u32(body, 4))),
                // RFC 9293 §3.2: skip an option we do not implement (or
                // that has the wrong length for its kind).
                _ => {}
            }
            at += len;
        }
        Ok(options)
    }

    /// Bytes of the options other than SACK blocks, as emit lays them out.
    fn fixed_len(&self) -> usize {
        let mut len = 0;
        if self.mss.is_some() {
            len += 4;
        }
        len += match (self.sack_permitted, self.timestamps.is_some()) {
            (_, true) => 12, // SACK-permitted + Timestamps, or NOP NOP Timestamps
            (true, false) => 4,
            (false, false) => 0,
        };
        if self.window_scale.is_some() {
            len += 4;
        }
        len
    }

    /// How many of the SACK blocks emit writes: all of them if they fit in
    /// [`MAX_OPTIONS_LEN`] beside the other options, else as many as fit
    /// (RFC 2018 §3: three beside Timestamps).
    pub fn sack_blocks_emitted(&self) -> usize {
        let given = self.sack_blocks.iter().flatten().count();
        let room = MAX_OPTIONS_LEN - self.fixed_len();
        if given == 0 || room < 12 {
            return 0;
        }
        given.min((room - 4) / 8)
    }

    /// Length of the options emit writes: a multiple of 4, at most
    /// [`MAX_OPTIONS_LEN`].
    pub fn len(&self) -> usize {
        let blocks = self.sack_blocks_emitted();
        self.fixed_len() + if blocks > 0 { 4 + 8 * blocks } else { 0 }
    }

    /// Whether there is no option to emit.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the options into the first [`TcpOptions::len`] bytes of
    /// `buf`, each aligned as RFC 7323 Appendix A and RFC 2018 §3 suggest
    /// (NOPs in front, so no End or padding is ever needed). Returns the
    /// length written.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut at = 0;
        if let Some(mss) = self.mss {
            buf[at..at + 2].copy_from_slice(&[kind::MSS, 4]);
            put_u16(buf, at + 2, mss);
            at += 4;
        }
        match (self.sack_permitted, self.timestamps) {
            (sack_permitted, Some((tsval, tsecr))) => {
                let head = if sack_permitted {
                    [kind::SACK_PERMITTED, 2]
                } else {
                    [kind::NOP, kind::NOP]
                };
                buf[at..at + 4].copy_from_slice(&[head[0], head[1], kind::TIMESTAMPS, 10]);
                put_u32(buf, at + 4, tsval);
                put_u32(buf, at + 8, tsecr);
                at += 12;
            }
            (true, None) => {
                buf[at..at + 4].copy_from_slice(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]);
                at += 4;
            }
            (false, None) => {}
        }
        if let Some(shift) = self.window_scale {
            buf[at..at + 4].copy_from_slice(&[kind::NOP, kind::WINDOW_SCALE, 3, shift]);
            at += 4;
        }
        let blocks = self.sack_blocks_emitted();
        if blocks > 0 {
            buf[at..at + 4].copy_from_slice(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * blocks) as u8]);
            at += 4;
            for (left, right) in self.sack_blocks.iter().flatten().take(blocks) {
                put_u32(buf, at, left.0);
                put_u32(buf, at + 4, right.0);
                at += 8;
            }
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Linux's SYN: MSS 1460, SACK-permitted, Timestamps (100, 0), NOP,
    /// Window Scale 7.
    const SYN_OPTIONS: [u8; 20] = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 100, 0, 0, 0, 0, 1, 3, 3, 7];

    fn syn_options() -> TcpOptions {
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((100, 0)),
            ..TcpOptions::default()
        }
    }

    #[test]
    fn parses_and_emits_linux_syn_options() {
        assert_eq!(TcpOptions::parse(&SYN_OPTIONS).unwrap(), syn_options());
        let mut buf = [0u8; 40];
        assert_eq!(syn_options().emit(&mut buf), 20);
        assert_eq!(buf[..20], SYN_OPTIONS);
        assert_eq!(syn_options().len(), 20);
    }

    #[test]
    fn parses_sack_blocks_and_skips_unknown_options() {
        let bytes = [
            1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40, // two SACK blocks
            254, 4, 0xab, 0xcd, // experimental option (RFC 6994), skipped
            0, 9, 9, 9, // End, then padding that is not parsed
        ];
        let options = TcpOptions::parse(&bytes).unwrap();
        assert_eq!(options.sack_blocks[0], Some((TcpSeqNumber(10), TcpSeqNumber(20))));
        assert_eq!(options.sack_blocks[1], Some((TcpSeqNumber(30), TcpSeqNumber(40))));
        assert_eq!(options.sack_blocks[2], None);
        assert_eq!(
            TcpOptions {
                sack_blocks: [None; 4],
                ..options
            },
            TcpOptions::default()
        );
    }

    #[test]
    fn window_shift_over_14_is_14() {
        assert_eq!(TcpOptions::parse(&[3, 3, 15, 0]).unwrap().window_scale, Some(14));
        assert_eq!(TcpOptions::parse(&[3, 3, 255, 0]).unwrap().window_scale, Some(14));
        assert_eq!(TcpOptions::parse(&[3, 3, 14, 0]).unwrap().window_scale, Some(14));
    }

    #[test]
    fn lengths_that_lose_the_next_option_are_malformed() {
        for bytes in [
            &[2, 4, 5][..],              // MSS runs past the area
            &[2][..],                    // no length byte
            &[254, 1, 0, 0][..],         // length 1
            &[254, 0, 0, 0][..],         // length 0: would loop for ever
            &[1, 1, 8, 10, 0, 0, 0][..], // Timestamps cut by the end of the area
        ] {
            assert!(
                matches!(TcpOptions::parse(bytes), Err(WireError::Malformed(_))),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn known_kinds_of_the_wrong_length_are_skipped() {
        for bytes in [
            &[2, 3, 5, 1, 1, 1, 1, 1][..], // MSS of length 3
            &[3, 4, 7, 0, 1, 1, 1, 1][..], // Window Scale of length 4
            &[4, 3, 0, 1, 1, 1, 1, 1][..], // SACK-permitted of length 3
            &[5, 2, 1, 1, 1, 1, 1, 1][..], // SACK without a block
            &[5, 6, 0, 0, 0, 0, 1, 1][..], // SACK with half a block
            &[8, 8, 0, 0, 0, 0, 0, 0][..], // Timestamps of length 8
        ] {
            assert_eq!(TcpOptions::parse(bytes).unwrap(), TcpOptions::default(), "{bytes:?}");
        }
        // What follows a skipped option is still read.
        let options = TcpOptions::parse(&[2, 3, 5, 2, 4, 0x05, 0xb4, 0]).unwrap();
        assert_eq!(options.mss, Some(1460));
    }

    #[test]
    fn sack_blocks_beyond_the_room_are_dropped() {
        let block = |n: u32| Some((TcpSeqNumber(n), TcpSeqNumber(n + 1)));
        let mut options = TcpOptions {
            timestamps: Some((1, 2)),
            sack_blocks: [block(1), block(3), block(5), block(7)],
            ..Default::default()
        };
        // 12 bytes of Timestamps leave 28: NOP NOP SACK header and 3 blocks.
        assert_eq!(options.sack_blocks_emitted(), 3);
        assert_eq!(options.len(), 40);
        let mut buf = [0u8; 40];
        options.emit(&mut buf);
        let parsed = TcpOptions::parse(&buf).unwrap();
        assert_eq!(parsed.sack_blocks, [block(1), block(3), block(5), None]);
        // Without Timestamps all four fit.
        options.timestamps = None;
        assert_eq!(options.sack_blocks_emitted(), 4);
        assert_eq!(options.len(), 36);
        // With MSS, Timestamps and Window Scale (20 bytes): two.
        let full = TcpOptions {
            mss: Some(1),
            window_scale: Some(1),
            timestamps: Some((1, 2)),
            ..options
        };
        assert_eq!(full.sack_blocks_emitted(), 2);
        assert_eq!(full.len(), 40);
    }

    fn any_options() -> impl Strategy<Value = TcpOptions> {
        (
            proptest::option::of(any::<u16>()),
            proptest::option::of(0..=MAX_WINDOW_SHIFT),
            any::<bool>(),
            proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=MAX_SACK_BLOCKS),
            proptest::option::of((any::<u32>(), any::<u32>())),
        )
            .prop_map(|(mss, window_scale, sack_permitted, blocks, timestamps)| {
                let mut options = TcpOptions {
                    mss,
                    window_scale,
                    sack_permitted,
                    timestamps,
                    ..Default::default()
                };
                // Only the blocks that fit (emit drops the others).
                let room = options.len();
                let fit = if MAX_OPTIONS_LEN - room >= 12 {
                    (MAX_OPTIONS_LEN - room - 4) / 8
                } else {
                    0
                };
                for (slot, (l, r)) in options.sack_blocks.iter_mut().zip(blocks.into_iter().take(fit)) {
                    *slot = Some((TcpSeqNumber(l), TcpSeqNumber(r)));
                }
                options
            })
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..=MAX_OPTIONS_LEN)) {
            let _ = TcpOptions::parse(&bytes);
        }

        #[test]
        fn parse_of_emit_is_identity(options in any_options()) {
            let mut buf = [0u8; MAX_OPTIONS_LEN];
            let len = options.emit(&mut buf);
            prop_assert_eq!(len, options.len());
            prop_assert!(len % 4 == 0 && len <= MAX_OPTIONS_LEN);
            prop_assert_eq!(TcpOptions::parse(&buf[..len]).unwrap(), options);
        }
    }
}
