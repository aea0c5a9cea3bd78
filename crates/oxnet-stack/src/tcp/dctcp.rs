//! DCTCP's sender state (RFC 8257 §3.3): the fraction of bytes the
//! network marked, averaged per window of data into `alpha`, and the
//! window cut by alpha/2 once per window with marks. Loss, slow start and
//! avoidance stay NewReno's (§3.5); the receiver's precise echo is in
//! [`super::ecn`].
//!
//! | RFC 8257 | here |
//! |---|---|
//! | §3.3 steps 1-7: bytes acknowledged and marked per observation window, alpha = (1-g)·alpha + g·F, g = 1/16 | [`Dctcp::on_ack`] |
//! | §3.3 step 8-9: cwnd = cwnd·(1 - alpha/2), once per window (RFC 3168's rule) | [`Dctcp::reduced`] (the once-per-window check is the ECN element's) |
//! | §3.4: alpha starts at 1 | [`Dctcp::new`] |
//!
//! Left out: §4.1's deployment checks (DCTCP only inside a data centre is
//! the operator's business), §4.3's reaction to loss beyond NewReno's.

/// RFC 8257 §3.3: the estimation gain.
pub const G: f64 = 1.0 / 16.0;

/// a > b, modulo 2^32 (RFC 9293 §3.4).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// One connection's DCTCP state.
#[derive(Debug, Clone, PartialEq)]
pub struct Dctcp {
    alpha: f64,
    /// DCTCP.WindowEnd: the observation window ends when SND.UNA passes it.
    window_end: u32,
    bytes_acked: u64,
    bytes_marked: u64,
}

impl Dctcp {
    /// A connection whose next sequence number to send is `snd_nxt`
    /// (§3.3 step 1; alpha = 1, the conservative start of §3.4).
    pub fn new(snd_nxt: u32) -> Dctcp {
        Dctcp {
            alpha: 1.0,
            window_end: snd_nxt,
            bytes_acked: 0,
            bytes_marked: 0,
        }
    }

    /// The estimate of the fraction of marked bytes.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// §3.3 steps 2-7: an ACK that acknowledges `acked` new bytes, SND.UNA
    /// now `snd_una`, with ECE or not; `snd_nxt` the next sequence number
    /// to send. Returns the new alpha when the ACK ended an observation
    /// window.
    pub fn on_ack(&mut self, snd_una: u32, snd_nxt: u32, acked: u32, ece: bool) -> Option<f64> {
        self.bytes_acked += acked as u64;
        if ece {
            self.bytes_marked += acked as u64;
        }
        // Step 4: the window ends once SEG.ACK is beyond WindowEnd.
        if !after(snd_una, self.window_end) {
            return None;
        }
        self.window_end = snd_nxt;
        // A window in which no byte was acknowledged (the handshake's
        // ACK) says nothing about marking: alpha stays.
        if self.bytes_acked == 0 {
            return None;
        }
        let f = self.bytes_marked as f64 / self.bytes_acked as f64;
        // Steps 5-6.
        self.alpha = self.alpha * (1.0 - G) + G * f;
        // Step 7 (WindowEnd moved above): the next window ends at what is
        // sent by now.
        self.bytes_acked = 0;
        self.bytes_marked = 0;
        Some(self.alpha)
    }

    /// Step 8-9: the window after a window with marks: cwnd·(1 - alpha/2).
    pub fn reduced(&self, cwnd: u32) -> u32 {
        (cwnd as f64 * (1.0 - self.alpha / 2.0)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_with_half_its_bytes_marked_moves_alpha_by_g_towards_one_half() {
        let mut d = Dctcp::new(1000);
        // Two ACKs of 1000 bytes inside the window (SND.UNA up to 1000),
        // one with ECE: nothing yet.
        assert_eq!(d.on_ack(500, 3000, 1000, true), None);
        assert_eq!(d.on_ack(1000, 3000, 1000, false), None);
        // The ACK past WindowEnd ends it: 1000 marked of 2000 acknowledged
        // (with this ACK's 0): alpha = 15/16·1 + 1/16·1/2 = 31/32.
        assert_eq!(d.on_ack(1001, 3000, 0, false), Some(31.0 / 32.0));
        assert_eq!(d.alpha(), 0.96875);
        // The next window ends at 3000; none marked: alpha·15/16.
        assert_eq!(d.on_ack(2000, 4000, 999, false), None);
        assert_eq!(d.on_ack(3001, 4000, 1001, false), Some(31.0 / 32.0 * 15.0 / 16.0));
    }

    #[test]
    fn a_window_without_bytes_acknowledged_leaves_alpha() {
        let mut d = Dctcp::new(100);
        assert_eq!(d.on_ack(101, 101, 0, false), None);
        assert_eq!(d.alpha(), 1.0);
        assert_eq!(
            d.on_ack(201, 301, 100, false),
            Some(15.0 / 16.0),
            "the window now ends at 101"
        );
    }

    #[test]
    fn the_window_is_cut_by_half_of_alpha() {
        let mut d = Dctcp::new(0);
        assert_eq!(d.reduced(10_000), 5_000, "alpha = 1 halves, as RFC 3168");
        d.on_ack(1, 1, 1000, false);
        // alpha = 15/16: cwnd·(1 - 15/32) = 10 000·17/32 = 5312.5.
        assert_eq!(d.reduced(10_000), 5_312);
    }

    #[test]
    fn the_window_end_compares_across_the_wrap() {
        let mut d = Dctcp::new(0xffff_fff0);
        assert_eq!(d.on_ack(0xffff_fff0, 0x10, 16, true), None);
        assert_eq!(d.on_ack(0x5, 0x10, 21, true), Some(1.0));
    }
}
