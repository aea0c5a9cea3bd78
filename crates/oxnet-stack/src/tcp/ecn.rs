//! Explicit Congestion Notification in TCP (RFC 3168 §6.1) and DCTCP's
//! precise echo (RFC 8257 §3.2): a connection's ECN state, kept apart from
//! the elements that drive it (`elements::ecn`).
//!
//! | RFC | here |
//! |---|---|
//! | 3168 §5: the ECN field of the IP header (Not-ECT, ECT(1), ECT(0), CE) | [`Codepoint`], [`codepoint`] |
//! | 3168 §6.1.1: negotiation (ECE+CWR in the SYN, ECE in the SYN-ACK) | the handshake elements set [`Ecn::enabled`] |
//! | 3168 §6.1.2: the sender halves once per window on ECE, then sets CWR | [`Ecn::may_react`], [`Ecn::reacted`], [`Ecn::cwr_pending`] |
//! | 3168 §6.1.3: the receiver sets ECE on every ACK from a CE until a CWR | [`Ecn::on_segment_classic`] |
//! | 3168 §6.1.4-5: ECT(0) on new data only (not on ACKs, SYNs, retransmissions) | the outgoing path |
//! | 8257 §3.2: ECE exactly while CE arrives, and the delayed-ACK state machine (an immediate ACK when CE changes) | [`Ecn::on_data_precise`] |
//!
//! Left out: ECN++ (ECT on SYNs and pure ACKs, RFC 8311 experiments),
//! AccECN (counters in the header), ECT(1) / L4S, and RFC 3168 §6.1.1.1's
//! fallback when the SYN with ECE+CWR is lost.

/// The ECN field of an IP header (RFC 3168 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codepoint {
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Codepoint {
    /// From the field's two bits.
    pub fn from_bits(bits: u8) -> Codepoint {
        match bits & 3 {
            0 => Codepoint::NotEct,
            1 => Codepoint::Ect1,
            2 => Codepoint::Ect0,
            _ => Codepoint::Ce,
        }
    }

    /// The field's two bits.
    pub fn bits(self) -> u8 {
        match self {
            Codepoint::NotEct => 0,
            Codepoint::Ect1 => 1,
            Codepoint::Ect0 => 2,
            Codepoint::Ce => 3,
        }
    }
}

/// The ECN field of the IPv4 or IPv6 header at the start of `ip` (IPv4:
/// the low bits of the TOS byte; IPv6: of the traffic class). None if it
/// is neither or too short.
pub fn codepoint(ip: &[u8]) -> Option<Codepoint> {
    match ip.first()? >> 4 {
        4 => Some(Codepoint::from_bits(*ip.get(1)?)),
        6 => Some(Codepoint::from_bits(ip.get(1)? >> 4)),
        _ => None,
    }
}

/// a > b, modulo 2^32 (RFC 9293 §3.4).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// One connection's ECN state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ecn {
    /// Both sides agreed in the handshake (RFC 3168 §6.1.1).
    pub enabled: bool,
    /// The receiver's echo: set ECE on the ACKs we send.
    pub ece: bool,
    /// The sender reduced its window: set CWR on the next new data.
    pub cwr_pending: bool,
    /// The sender does not react again until SND.UNA passes this (SND.NXT
    /// at the last reaction: the first byte sent with CWR).
    react_until: Option<u32>,
    /// The end of the highest data sent (RFC 3168 §6.1.5: what lies
    /// below it is a retransmission and is not ECT).
    sent_end: Option<u32>,
}

impl Ecn {
    /// RFC 3168 §6.1.3, for a received segment: CWR ends the echo, then a
    /// CE (on this very segment too) starts it again.
    pub fn on_segment_classic(&mut self, ce: bool, cwr: bool) {
        if cwr {
            self.ece = false;
        }
        if ce {
            self.ece = true;
        }
    }

    /// RFC 8257 §3.2, for a received data segment: ECE follows CE
    /// exactly. When CE changes while an ACK is held back
    /// (`ack_pending`), the segments before this one must be
    /// acknowledged at once with the old state: returns that state.
    pub fn on_data_precise(&mut self, ce: bool, ack_pending: bool) -> Option<bool> {
        if ce == self.ece {
            return None;
        }
        let old = self.ece;
        self.ece = ce;
        ack_pending.then_some(old)
    }

    /// Data `[seq, seq + len)` goes out: whether it is new (beyond all
    /// sent before), so ECT(0) and a pending CWR may go on it (RFC 3168
    /// §6.1.5: "MUST NOT set either ECT codepoint on retransmitted data
    /// packets"; CWR goes on new data). Records its end.
    pub fn send_data(&mut self, seq: u32, len: u32) -> bool {
        let end = seq.wrapping_add(len);
        let fresh = self.sent_end.is_none_or(|sent| !after(sent, seq));
        if self.sent_end.is_none_or(|sent| after(end, sent)) {
            self.sent_end = Some(end);
        }
        fresh && len > 0
    }

    /// RFC 3168 §6.1.2: an ECE with SND.UNA now `snd_una` may reduce the
    /// window unless a reduction for the window in flight was made.
    pub fn may_react(&self, snd_una: u32) -> bool {
        self.react_until.is_none_or(|until| after(snd_una, until))
    }

    /// The sender reduced its window with `snd_nxt` the next sequence
    /// number to send: the next new data (from `snd_nxt`) carries CWR, and
    /// the next reduction waits until it is acknowledged: ECEs before that
    /// echo marks on data sent before the reduction, which the receiver
    /// keeps echoing until the CWR reaches it.
    pub fn reacted(&mut self, snd_nxt: u32) {
        self.react_until = Some(snd_nxt);
        self.cwr_pending = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codepoint_is_read_from_either_family() {
        // IPv4, TOS 0x03: CE; IPv6, traffic class 0x02 (version 6, then the
        // class across bytes 0 and 1): ECT(0).
        assert_eq!(codepoint(&[0x45, 0x03]), Some(Codepoint::Ce));
        assert_eq!(codepoint(&[0x45, 0xb8]), Some(Codepoint::NotEct));
        assert_eq!(codepoint(&[0x60, 0x20, 0, 0]), Some(Codepoint::Ect0));
        assert_eq!(codepoint(&[0x60, 0x10]), Some(Codepoint::Ect1));
        assert_eq!(codepoint(&[0x45]), None);
        assert_eq!(codepoint(&[]), None);
        assert_eq!(codepoint(&[0x55, 3]), None);
        for c in [Codepoint::NotEct, Codepoint::Ect1, Codepoint::Ect0, Codepoint::Ce] {
            assert_eq!(Codepoint::from_bits(c.bits()), c);
        }
    }

    #[test]
    fn the_classic_echo_lasts_from_ce_until_cwr() {
        let mut e = Ecn::default();
        e.on_segment_classic(true, false);
        assert!(e.ece);
        e.on_segment_classic(false, false);
        assert!(e.ece, "latched");
        e.on_segment_classic(false, true);
        assert!(!e.ece);
        e.on_segment_classic(true, true);
        assert!(e.ece, "a CE on the CWR segment itself starts it again");
    }

    #[test]
    fn the_precise_echo_follows_ce_and_asks_for_an_ack_when_it_changes() {
        let mut e = Ecn::default();
        assert_eq!(e.on_data_precise(false, true), None);
        assert_eq!(e.on_data_precise(true, true), Some(false), "the old state, at once");
        assert!(e.ece);
        assert_eq!(e.on_data_precise(true, true), None);
        assert_eq!(e.on_data_precise(false, false), None, "nothing held back");
        assert!(!e.ece);
    }

    #[test]
    fn only_data_beyond_what_was_sent_is_new() {
        let mut e = Ecn::default();
        assert!(e.send_data(1000, 500));
        assert!(e.send_data(1500, 500));
        assert!(!e.send_data(1000, 500), "a retransmission");
        assert!(!e.send_data(1900, 200), "overlapping what was sent");
        assert!(e.send_data(2100, 10), "the end moved to 2100 above");
        assert!(!e.send_data(2110, 0), "no data");
        let mut w = Ecn::default();
        assert!(w.send_data(0xffff_fffe, 4));
        assert!(w.send_data(2, 1), "across the wrap");
        assert!(!w.send_data(0xffff_ffff, 3));
    }

    #[test]
    fn the_sender_reacts_once_per_window() {
        let mut e = Ecn::default();
        assert!(e.may_react(100));
        e.reacted(5000);
        assert!(e.cwr_pending);
        assert!(!e.may_react(3000));
        assert!(!e.may_react(5000), "everything sent before it: still the old window");
        assert!(e.may_react(5001), "data sent after the reduction is acknowledged");
    }
}
