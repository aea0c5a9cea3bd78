//! The handlers TCPEpollServer and TCPEpollClient share: the table's
//! counters ([`super::conns::ConnStats`]).

use super::conns::Conns;

/// The table's handler names, then `extra` (TCPEpollClient's own).
macro_rules! conn_handlers {
    ($($extra:literal),*) => {
        &[
            ("connections", true, false),
            ("opened", true, false),
            ("closed", true, false),
            ("errors", true, false),
            ("bytes_in", true, false),
            ("bytes_out", true, false),
            ("unknown", true, false),
            ("write_drops", true, false),
            ("paused", true, false),
            ("overflows", true, false),
            ("alloc_failures", true, false),
            $(($extra, true, false),)*
        ]
    };
}
pub(crate) use conn_handlers;

/// TCPEpollServer's handlers.
pub const NAMES: &[(&str, bool, bool)] = conn_handlers!();

pub fn read(conns: &Conns, name: &str) -> Option<String> {
    let s = &conns.stats;
    Some(
        match name {
            "connections" => conns.len() as u64,
            "opened" => s.opened,
            "closed" => s.closed,
            "errors" => s.errors,
            "bytes_in" => s.bytes_in,
            "bytes_out" => s.bytes_out,
            "unknown" => s.unknown,
            "write_drops" => s.write_drops,
            "paused" => s.paused,
            "overflows" => s.overflows,
            "alloc_failures" => s.alloc_failures,
            _ => return None,
        }
        .to_string(),
    )
}
