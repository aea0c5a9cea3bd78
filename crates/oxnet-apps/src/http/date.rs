//! HTTP dates (RFC 9110 §5.6.7): IMF-fixdate written, all three forms
//! read (the httpdate crate), as seconds since the epoch.

use std::time::{Duration, UNIX_EPOCH};

/// `secs` as an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn format(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// A date in any of the three forms; None if it is none of them.
pub fn parse(text: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(text.trim()).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// The Date header's value, formatted once per second.
#[derive(Default)]
pub struct DateCache {
    secs: u64,
    text: String,
}

impl DateCache {
    pub fn get(&mut self, secs: u64) -> &str {
        if self.text.is_empty() || secs != self.secs {
            self.secs = secs;
            self.text = format(secs);
        }
        &self.text
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_three_forms_of_rfc_9110_read_the_same() {
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(super::parse(text), Some(784111777), "{text}");
        }
        assert_eq!(super::format(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(super::parse("0"), None);
    }
}
