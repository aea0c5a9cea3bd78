//! TCPSettings: the router's TCP settings from the configuration (one
//! element, no ports; it sets TCPInfo's settings when configured, so
//! connections made after take them). Every keyword is optional:
//!
//! | keyword | what | default |
//! |---|---|---|
//! | MSS n, MSS6 n | the MSS we announce over IPv4 / IPv6 (RFC 9293 §3.7.1) | 1460 / 1440 |
//! | RCVBUF n, SNDBUF n | receive window and send buffer, bytes | 262144 each |
//! | WINDOW_SCALE n / false | our window shift (RFC 7323 §2) | 7 |
//! | TIMESTAMPS b, SACK b | offer the options (RFC 7323, RFC 2018) | true |
//! | DELAYED_ACK time / false | how long an ACK may wait (RFC 1122 §4.2.3.2) | 40ms |
//! | SYN_BACKLOG n, SYN_COOKIES b | half-open connections per listener; cookies past it (RFC 4987) | 128, true |
//! | ECN b | ask for ECN (RFC 3168) | false |
//! | CONGESTION newreno / cubic / dctcp | new connections' congestion control | newreno |
//! | INITIAL_WINDOW n | the initial window in segments (RFC 6928's 10; 0: RFC 5681's rule) | 10 |
//! | RTO_MIN time, RTO_MAX time | the RTO's bounds (RFC 6298 §2.4-2.5) | 200ms, 120s |
//! | MSL time | maximum segment lifetime; TIME-WAIT is two (RFC 9293 §3.4.2) | 30s |
//! | TSO b | IPv4 data goes to the device as one large segment with a segmentation request (`crate::tcp::offload`) | false |
//! | CHECKSUM_OFFLOAD b | the device computes the IPv4 and TCP checksums of the data segments (implied by TSO) | false |
//!
//! TSO and CHECKSUM_OFFLOAD are set by the configuration, not learnt
//! from the device: the stack does not know which ToDevice its packets
//! reach (a graph may route them to several devices, through queues and
//! classifiers), and every driver does a request the device cannot in
//! software with the same bytes (`oxnet_driver::offload`), so a wrong
//! setting costs time, never correctness.

use crate::tcp::cc::Algorithm;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;

/// Holds the router's TCPInfo (the shared state lives as long as an
/// element holds it).
#[derive(Default)]
pub struct Settings(Option<super::Info>);

fn micros(text: &str, what: &str) -> Result<u64, String> {
    args::seconds(text)
        .map(|s| (s * 1e6).round() as u64)
        .map_err(|e| format!("{what}: {e}"))
}

fn number(text: &str, what: &str, max: u64) -> Result<u64, String> {
    let n = args::unsigned(text).map_err(|e| format!("{what}: {e}"))?;
    if n > max {
        return Err(format!("{what}: {n} is more than {max}"));
    }
    Ok(n)
}

impl Element for Settings {
    fn class_name(&self) -> &'static str {
        "TCPSettings"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let shared = super::info();
        self.0 = Some(shared.clone());
        let mut info = shared.borrow_mut();
        let s = &mut info.settings;
        if let Some(v) = a.keyword("MSS") {
            s.mss_v4 = number(&v, "MSS", 65_495)?.max(88) as u16;
        }
        if let Some(v) = a.keyword("MSS6") {
            s.mss_v6 = number(&v, "MSS6", 65_475)?.max(1220) as u16;
        }
        if let Some(v) = a.keyword("RCVBUF") {
            s.tcb.recv_buffer = number(&v, "RCVBUF", 1 << 30)?.max(1) as u32;
        }
        if let Some(v) = a.keyword("SNDBUF") {
            s.tcb.send_buffer = number(&v, "SNDBUF", 1 << 30)?.max(1) as u32;
        }
        if let Some(v) = a.keyword("WINDOW_SCALE") {
            s.window_scale = match args::boolean(&v) {
                Ok(false) => None,
                _ => Some(number(&v, "WINDOW_SCALE", 14)? as u8),
            };
        }
        if let Some(v) = a.keyword("TIMESTAMPS") {
            s.timestamps = args::boolean(&v).map_err(|e| format!("TIMESTAMPS: {e}"))?;
        }
        if let Some(v) = a.keyword("SACK") {
            s.sack = args::boolean(&v).map_err(|e| format!("SACK: {e}"))?;
        }
        if let Some(v) = a.keyword("DELAYED_ACK") {
            s.delayed_ack_us = match args::boolean(&v) {
                Ok(false) => None,
                _ => {
                    let us = micros(&v, "DELAYED_ACK")?;
                    // RFC 1122 §4.2.3.2: "MUST be less than 0.5 seconds".
                    if us >= 500_000 {
                        return Err(format!("DELAYED_ACK: {v} is not under 0.5 s (RFC 1122 §4.2.3.2)"));
                    }
                    Some(us)
                }
            };
        }
        if let Some(v) = a.keyword("SYN_BACKLOG") {
            s.syn_backlog = number(&v, "SYN_BACKLOG", 1 << 20)? as usize;
        }
        if let Some(v) = a.keyword("SYN_COOKIES") {
            s.syn_cookies = args::boolean(&v).map_err(|e| format!("SYN_COOKIES: {e}"))?;
        }
        if let Some(v) = a.keyword("ECN") {
            s.ecn = args::boolean(&v).map_err(|e| format!("ECN: {e}"))?;
        }
        if let Some(v) = a.keyword("CONGESTION") {
            s.congestion = match v.to_ascii_lowercase().as_str() {
                "newreno" => Algorithm::NewReno,
                "cubic" => Algorithm::Cubic,
                "dctcp" => Algorithm::Dctcp,
                _ => return Err(format!("CONGESTION: '{v}' is not newreno, cubic or dctcp")),
            };
        }
        if let Some(v) = a.keyword("INITIAL_WINDOW") {
            let n = number(&v, "INITIAL_WINDOW", 1000)?;
            s.tcb.initial_window = (n > 0).then_some(n as u32);
        }
        if let Some(v) = a.keyword("RTO_MIN") {
            s.tcb.rto.min_us = micros(&v, "RTO_MIN")?.max(1);
        }
        if let Some(v) = a.keyword("RTO_MAX") {
            s.tcb.rto.max_us = micros(&v, "RTO_MAX")?;
        }
        if s.tcb.rto.max_us < s.tcb.rto.min_us {
            return Err("RTO_MAX is below RTO_MIN".into());
        }
        if let Some(v) = a.keyword("MSL") {
            s.msl_us = micros(&v, "MSL")?;
        }
        if let Some(v) = a.keyword("TSO") {
            s.tso = args::boolean(&v).map_err(|e| format!("TSO: {e}"))?;
        }
        if let Some(v) = a.keyword("CHECKSUM_OFFLOAD") {
            s.checksum_offload = args::boolean(&v).map_err(|e| format!("CHECKSUM_OFFLOAD: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::tcp::cc::Algorithm;

    #[test]
    fn keywords_set_the_routers_tcp_settings_and_bad_ones_are_clear_errors() {
        let rig = super::super::harness::Rig::new(
            "TCPSettings(MSS 1400, RCVBUF 65536, DELAYED_ACK false, CONGESTION cubic, ECN true, \
             INITIAL_WINDOW 0, RTO_MIN 1s, MSL 2s, WINDOW_SCALE false, SYN_COOKIES false);
             PlugSource -> tcp :: TCPStack -> PlugSink;",
        );
        let info = rig.info.borrow();
        let s = info.settings;
        assert_eq!((s.mss_v4, s.tcb.recv_buffer, s.delayed_ack_us), (1400, 65536, None));
        assert_eq!(
            (s.congestion, s.ecn, s.tcb.initial_window),
            (Algorithm::Cubic, true, None)
        );
        assert_eq!(
            (s.tcb.rto.min_us, s.msl_us, s.window_scale, s.syn_cookies),
            (1_000_000, 2_000_000, None, false)
        );
        drop(info);
        crate::elements::register();
        for (bad, says) in [
            ("DELAYED_ACK 1s", "0.5 s"),
            ("CONGESTION bbr", "newreno, cubic or dctcp"),
            ("WINDOW_SCALE 15", "more than 14"),
            ("RTO_MIN 2s, RTO_MAX 1s", "RTO_MAX is below RTO_MIN"),
            ("MSS x", "MSS"),
        ] {
            let e = oxnet_graph::build("t.click", &format!("TCPSettings({bad})"), &[])
                .err()
                .unwrap();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
