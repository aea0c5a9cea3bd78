//! A connection's congestion control: which algorithm it runs and its
//! state. NewReno's loss recovery ([`super::newreno`]: fast retransmit,
//! recovery, the timeout's loss window) is shared by all; each variant
//! adds its window rule or signal:
//!
//! | variant | RFC | window rule | ECN echo |
//! |---|---|---|---|
//! | [`CongestionControl::NewReno`] | 5681, 6582 | [`Reno`] | halve (RFC 3168 §6.1.2) |
//! | [`CongestionControl::Cubic`] | 9438 | [`Cubic`] | β_cubic = 0.7 (RFC 9438 §4.6) |
//! | [`CongestionControl::Dctcp`] | 8257 | [`Reno`] (§3.5) | cwnd·(1 - alpha/2) ([`Dctcp`]) |
//!
//! The elements choose by the variant: TCPNewRenoAck and TCPCubicAck
//! feed ACKs in (TCPCubicAck first makes a NewReno connection CUBIC),
//! TCPProcessECN and DCTCPProcessECN the ECN signals (DCTCPProcessECN
//! first makes a connection DCTCP).

use super::cubic::Cubic;
use super::dctcp::Dctcp;
use super::newreno::{AckAction, NewReno, Reno, WindowRule};

/// The algorithm a new connection starts with (TcpSettings'
/// `congestion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    #[default]
    NewReno,
    Cubic,
    Dctcp,
}

/// The congestion state of one connection.
#[derive(Debug, Clone, PartialEq)]
pub enum CongestionControl {
    NewReno(NewReno),
    Cubic(NewReno, Cubic),
    Dctcp(NewReno, Dctcp),
}

impl CongestionControl {
    /// A connection's start (see [`NewReno::new`]); `iss` is also where
    /// DCTCP's first observation window ends.
    pub fn new(algorithm: Algorithm, smss: u32, iss: u32, initial_segments: Option<u32>) -> CongestionControl {
        let reno = NewReno::new(smss, iss, initial_segments);
        match algorithm {
            Algorithm::NewReno => CongestionControl::NewReno(reno),
            Algorithm::Cubic => CongestionControl::Cubic(reno, Cubic::new()),
            Algorithm::Dctcp => CongestionControl::Dctcp(reno, Dctcp::new(iss)),
        }
    }

    /// Which algorithm this is.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            CongestionControl::NewReno(_) => Algorithm::NewReno,
            CongestionControl::Cubic(..) => Algorithm::Cubic,
            CongestionControl::Dctcp(..) => Algorithm::Dctcp,
        }
    }

    /// The shared loss-recovery state.
    pub fn reno(&self) -> &NewReno {
        match self {
            CongestionControl::NewReno(r) | CongestionControl::Cubic(r, _) | CongestionControl::Dctcp(r, _) => r,
        }
    }

    fn reno_mut(&mut self) -> &mut NewReno {
        match self {
            CongestionControl::NewReno(r) | CongestionControl::Cubic(r, _) | CongestionControl::Dctcp(r, _) => r,
        }
    }

    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u32 {
        self.reno().cwnd()
    }

    /// The slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u32 {
        self.reno().ssthresh()
    }

    /// Whether fast recovery is under way.
    pub fn in_recovery(&self) -> bool {
        self.reno().in_recovery()
    }

    /// Runs `f` with the shared state and this variant's window rule (at
    /// `now_us`, smoothed RTT `srtt_us`, for CUBIC).
    fn with_rule<T>(&mut self, now_us: u64, srtt_us: u64, f: impl FnOnce(&mut NewReno, &mut dyn WindowRule) -> T) -> T {
        match self {
            CongestionControl::NewReno(r) | CongestionControl::Dctcp(r, _) => f(r, &mut Reno),
            CongestionControl::Cubic(r, c) => f(r, c.at(now_us, srtt_us)),
        }
    }

    /// An ACK of new data ([`NewReno::on_new_ack`]).
    pub fn on_new_ack(&mut self, ack: u32, acked: u32, flight_size: u32, now_us: u64, srtt_us: u64) -> AckAction {
        self.with_rule(now_us, srtt_us, |r, rule| {
            r.on_new_ack_with(rule, ack, acked, flight_size)
        })
    }

    /// A duplicate ACK ([`NewReno::on_dup_ack`]).
    pub fn on_dup_ack(&mut self, ack: u32, flight_size: u32, high_data: u32, now_us: u64, srtt_us: u64) -> AckAction {
        self.with_rule(now_us, srtt_us, |r, rule| {
            r.on_dup_ack_with(rule, ack, flight_size, high_data)
        })
    }

    /// SACK-based recovery begins, the window reduced by the variant's
    /// rule ([`NewReno::enter_sack_recovery_with`]).
    pub fn enter_sack_recovery(&mut self, flight_size: u32, high_data: u32, now_us: u64, srtt_us: u64) {
        self.with_rule(now_us, srtt_us, |r, rule| {
            r.enter_sack_recovery_with(rule, flight_size, high_data)
        })
    }

    /// SACK-based recovery ends ([`NewReno::leave_sack_recovery`]).
    pub fn leave_sack_recovery(&mut self) {
        self.reno_mut().leave_sack_recovery()
    }

    /// An ACK of new data when RFC 6675 runs the loss recovery
    /// ([`NewReno::on_sack_ack_with`]).
    pub fn on_sack_ack(&mut self, acked: u32, now_us: u64, srtt_us: u64) {
        self.with_rule(now_us, srtt_us, |r, rule| r.on_sack_ack_with(rule, acked))
    }

    /// The recovery point ([`NewReno::recover`]).
    pub fn recover(&self) -> u32 {
        self.reno().recover()
    }

    /// Sets the recovery point ([`NewReno::set_recover`]).
    pub fn set_recover(&mut self, high_data: u32) {
        self.reno_mut().set_recover(high_data)
    }

    /// The retransmission timer expired ([`NewReno::on_timeout`]).
    pub fn on_timeout(&mut self, flight_size: u32, high_data: u32) {
        self.with_rule(0, 0, |r, rule| r.on_timeout_with(rule, flight_size, high_data))
    }

    /// RFC 3168 §6.1.2: an ECN echo the caller found to be the first of
    /// its window: the window falls as for a loss, by the variant's rule
    /// (DCTCP's by alpha), and nothing is retransmitted.
    pub fn on_ecn_echo(&mut self, flight_size: u32) {
        let cwnd = self.cwnd();
        let smss = self.reno().smss();
        let ssthresh = match self {
            CongestionControl::NewReno(_) => Reno.on_congestion(cwnd, flight_size, smss),
            CongestionControl::Cubic(_, c) => c.on_congestion(cwnd, flight_size, smss),
            CongestionControl::Dctcp(_, d) => d.reduced(cwnd),
        };
        self.reno_mut().reduce(ssthresh);
    }

    /// Makes a NewReno connection CUBIC, keeping its window, threshold and
    /// recovery (TCPCubicAck in the path). A DCTCP connection stays DCTCP:
    /// with both DCTCPProcessECN and TCPCubicAck in a path, DCTCP wins
    /// instead of the two switching it back and forth.
    pub fn make_cubic(&mut self) {
        if let CongestionControl::NewReno(_) = self {
            *self = CongestionControl::Cubic(self.reno().clone(), Cubic::new());
        }
    }

    /// Makes this connection DCTCP, its first observation window ending
    /// at `snd_nxt` (DCTCPProcessECN in the path).
    pub fn make_dctcp(&mut self, snd_nxt: u32) {
        if !matches!(self, CongestionControl::Dctcp(..)) {
            *self = CongestionControl::Dctcp(self.reno().clone(), Dctcp::new(snd_nxt));
        }
    }

    /// DCTCP's state, if this is DCTCP.
    pub fn dctcp_mut(&mut self) -> Option<&mut Dctcp> {
        match self {
            CongestionControl::Dctcp(_, d) => Some(d),
            _ => None,
        }
    }

    /// DCTCP's state, if this is DCTCP.
    pub fn dctcp(&self) -> Option<&Dctcp> {
        match self {
            CongestionControl::Dctcp(_, d) => Some(d),
            _ => None,
        }
    }

    /// CUBIC's state, if this is CUBIC.
    pub fn cubic(&self) -> Option<&Cubic> {
        match self {
            CongestionControl::Cubic(_, c) => Some(c),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    #[test]
    fn newreno_through_the_enum_is_newreno() {
        let mut a = CongestionControl::new(Algorithm::NewReno, MSS, 0, Some(4));
        let mut b = NewReno::new(MSS, 0, Some(4));
        for i in 1..20u32 {
            assert_eq!(
                a.on_new_ack(i * 1000 + 1, 1000, 4000, 0, 0),
                b.on_new_ack(i * 1000 + 1, 1000, 4000)
            );
        }
        a.on_timeout(8000, 30_000);
        b.on_timeout(8000, 30_000);
        assert_eq!(a.reno(), &b);
    }

    #[test]
    fn an_ecn_echo_halves_newreno_and_keeps_seven_tenths_for_cubic() {
        let mut reno = CongestionControl::new(Algorithm::NewReno, MSS, 0, Some(10));
        reno.on_ecn_echo(10_000);
        assert_eq!((reno.cwnd(), reno.ssthresh()), (5_000, 5_000));
        let mut cubic = CongestionControl::new(Algorithm::Cubic, MSS, 0, Some(10));
        cubic.on_ecn_echo(10_000);
        assert_eq!((cubic.cwnd(), cubic.ssthresh()), (7_000, 7_000));
        assert_eq!(cubic.cubic().unwrap().w_max(), 10.0);
        let mut dctcp = CongestionControl::new(Algorithm::Dctcp, MSS, 0, Some(10));
        dctcp.on_ecn_echo(10_000);
        assert_eq!(dctcp.cwnd(), 5_000, "alpha starts at 1");
    }

    #[test]
    fn cubic_does_not_take_a_dctcp_connection() {
        let mut cc = CongestionControl::new(Algorithm::Dctcp, MSS, 0, None);
        cc.make_cubic();
        assert_eq!(cc.algorithm(), Algorithm::Dctcp);
    }

    #[test]
    fn switching_algorithm_keeps_the_window() {
        let mut cc = CongestionControl::new(Algorithm::NewReno, MSS, 0, Some(10));
        cc.on_timeout(10_000, 9_999);
        cc.make_cubic();
        assert_eq!(cc.algorithm(), Algorithm::Cubic);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1_000, 5_000));
        cc.make_dctcp(10_000);
        assert_eq!(cc.algorithm(), Algorithm::Dctcp);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (1_000, 5_000));
    }
}
