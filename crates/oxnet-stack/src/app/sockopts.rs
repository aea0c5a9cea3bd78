//! The socket options an application element sets on each of its
//! connections, from its configuration (what a Linux server does with
//! setsockopt after accept): SO_KEEPALIVE with TCP_KEEPIDLE /
//! TCP_KEEPINTVL / TCP_KEEPCNT, and TCP_USER_TIMEOUT. Keywords, all
//! optional:
//!
//! | keyword | what | default |
//! |---|---|---|
//! | KEEPALIVE time | idle time before the first keepalive probe (RFC 1122 §4.2.3.6); 0: keepalive off | 0 (off) |
//! | KEEPALIVE_INTERVAL time | time between probes | 75s (Linux's) |
//! | KEEPALIVE_COUNT n | unanswered probes before the connection ends with ETIMEDOUT | 9 (Linux's) |
//! | USER_TIMEOUT time | how long sent data may stay unacknowledged before the connection ends with ETIMEDOUT (RFC 5482); 0: off | 0 (off) |

use crate::tcp::socket::TcpStream;
use crate::tcp::tcb::Keepalive;
use oxnet_graph::args::{self, Args};

/// Options applied to every connection an application opens or accepts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    pub keepalive: Option<Keepalive>,
    pub user_timeout_us: Option<u64>,
}

fn micros(a: &mut Args, key: &str) -> Result<Option<u64>, String> {
    a.keyword(key)
        .map(|v| {
            args::seconds(&v).map_err(|e| format!("{key}: {e}")).and_then(|s| {
                if !(0.0..=1e7).contains(&s) {
                    Err(format!("{key}: {v} is out of range"))
                } else {
                    Ok((s * 1e6).round() as u64)
                }
            })
        })
        .transpose()
}

impl SocketOptions {
    /// Reads the keywords above from `a`.
    pub fn configure(a: &mut Args) -> Result<SocketOptions, String> {
        let idle = micros(a, "KEEPALIVE")?.unwrap_or(0);
        let interval = micros(a, "KEEPALIVE_INTERVAL")?.unwrap_or(75_000_000);
        let count = match a.keyword("KEEPALIVE_COUNT") {
            Some(v) => {
                let n = args::unsigned(&v).map_err(|e| format!("KEEPALIVE_COUNT: {e}"))?;
                // Linux's TCP_KEEPCNT is at most 127.
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=127).contains(n))
                    .ok_or_else(|| format!("KEEPALIVE_COUNT: {n} is not 1 to 127"))?
            }
            None => 9,
        };
        if idle > 0 && interval == 0 {
            return Err("KEEPALIVE_INTERVAL: must be more than 0".into());
        }
        let user_timeout = micros(a, "USER_TIMEOUT")?.unwrap_or(0);
        Ok(SocketOptions {
            keepalive: (idle > 0).then_some(Keepalive {
                idle_us: idle,
                interval_us: interval,
                count,
            }),
            user_timeout_us: (user_timeout > 0).then_some(user_timeout),
        })
    }

    /// Sets them on `stream` (nothing when all are off).
    pub fn apply(&self, stream: &TcpStream) {
        if self.keepalive.is_some() {
            stream.set_keepalive(self.keepalive);
        }
        if self.user_timeout_us.is_some() {
            stream.set_user_timeout(self.user_timeout_us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SocketOptions;
    use crate::tcp::tcb::Keepalive;
    use oxnet_graph::args::Args;

    fn parse(text: &str) -> Result<SocketOptions, String> {
        SocketOptions::configure(&mut Args::new(text))
    }

    #[test]
    fn keywords_give_keepalive_and_user_timeout_and_bad_ones_are_clear_errors() {
        assert_eq!(parse("").unwrap(), SocketOptions::default());
        assert_eq!(
            parse("KEEPALIVE 1s, KEEPALIVE_INTERVAL 500ms, KEEPALIVE_COUNT 3, USER_TIMEOUT 2s").unwrap(),
            SocketOptions {
                keepalive: Some(Keepalive {
                    idle_us: 1_000_000,
                    interval_us: 500_000,
                    count: 3
                }),
                user_timeout_us: Some(2_000_000),
            }
        );
        // Linux's defaults for what is not given; 0 is off.
        let o = parse("KEEPALIVE 10, USER_TIMEOUT 0").unwrap();
        assert_eq!(
            (o.keepalive.map(|k| (k.interval_us, k.count)), o.user_timeout_us),
            (Some((75_000_000, 9)), None)
        );
        assert_eq!(parse("KEEPALIVE 0, KEEPALIVE_COUNT 5").unwrap().keepalive, None);
        for (bad, says) in [
            ("KEEPALIVE_COUNT 0", "1 to 127"),
            ("KEEPALIVE_COUNT 128", "1 to 127"),
            ("KEEPALIVE 1s, KEEPALIVE_INTERVAL 0", "more than 0"),
            ("USER_TIMEOUT x", "USER_TIMEOUT"),
            ("KEEPALIVE -1", "KEEPALIVE"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
