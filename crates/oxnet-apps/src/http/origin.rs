//! What the cache asks an origin server and what it makes of the answer:
//! the request (HTTP/1.0, so that the origin neither chunks the body nor
//! keeps the connection, RFC 9112 §7.1, §9.3; conditional when it
//! revalidates, RFC 9111 §4.3.1), the response head (httparse), and
//! whether and for how long the response may be stored (RFC 9111 §3,
//! §4.2).

use super::object::{Freshness, Headers, Object};

/// Largest origin response head taken.
pub const MAX_HEAD: usize = 16 * 1024;
const MAX_FIELDS: usize = 64;

/// The request for `target` (with the client's Host), conditional on
/// the stored object's validators if it is a revalidation.
pub fn request(target: &str, host: &str, stored: Option<&Object>) -> Vec<u8> {
    let mut r = format!("GET {target} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: oxnet-http-cache\r\n");
    if let Some(o) = stored {
        if let Some(etag) = &o.etag {
            r.push_str(&format!("If-None-Match: {etag}\r\n"));
        }
        if let Some(lm) = o.last_modified {
            r.push_str(&format!("If-Modified-Since: {}\r\n", super::date::format(lm)));
        }
    }
    r.push_str("Connection: close\r\n\r\n");
    r.into_bytes()
}

/// An origin response head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Content-Length (None: the body ends with the connection).
    pub length: Option<usize>,
    pub headers: Headers,
    /// May be stored (RFC 9111 §3): not no-store, not private, no Vary
    /// (this cache keeps one variant per target).
    pub storable: bool,
    /// The freshness lifetime (RFC 9111 §4.2.1), 0 with no-cache (§5.2.2.4:
    /// revalidate every time).
    pub lifetime: u64,
    /// The header carried explicit freshness (Cache-Control max-age /
    /// s-maxage / no-cache or Expires); a 304 without it keeps the old.
    pub explicit: bool,
    /// The age it had on arrival (§4.2.3).
    pub initial_age: u64,
}

impl Head {
    pub fn freshness(&self, now: u64) -> Freshness {
        Freshness {
            lifetime: Some(self.lifetime),
            initial_age: self.initial_age,
            stored_at: now,
        }
    }
}

/// What parsing an origin's bytes gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Partial,
    /// The head and its length.
    Head(Head, usize),
    Invalid,
}

/// Parses a response head received at `now` (seconds since the epoch).
pub fn parse(buf: &[u8], now: u64) -> Parsed {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut fields);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Parsed::Partial,
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        _ => return Parsed::Invalid,
    };
    let Some(status) = resp.code else {
        return Parsed::Invalid;
    };
    let mut h = Head {
        status,
        storable: status == 200,
        ..Head::default()
    };
    let (mut date, mut age, mut expires, mut max_age, mut s_maxage) = (None, 0u64, None, None, None);
    let mut no_cache = false;
    for f in resp.headers.iter() {
        let Ok(value) = std::str::from_utf8(f.value) else {
            continue;
        };
        let value = value.trim();
        let name = f.name.to_ascii_lowercase();
        match name.as_str() {
            "content-length" => match value.parse() {
                Ok(n) if h.length.is_none_or(|m| m == n) => h.length = Some(n),
                _ => return Parsed::Invalid,
            },
            // Not asked for (HTTP/1.0 request): refused rather than misread.
            "transfer-encoding" => return Parsed::Invalid,
            "content-type" => h.headers.content_type = Some(value.to_string()),
            "etag" => h.headers.etag = Some(value.to_string()),
            "last-modified" => h.headers.last_modified = super::date::parse(value),
            "date" => date = super::date::parse(value),
            "age" => age = value.parse().unwrap_or(0),
            "vary" => h.storable = false,
            "expires" => {
                h.headers.expires = Some(value.to_string());
                // §5.3: an invalid date means already expired.
                expires = Some(super::date::parse(value).unwrap_or(0));
            }
            "cache-control" => {
                h.headers.cache_control = Some(value.to_string());
                for d in value.split(',').map(str::trim) {
                    let (n, arg) = d.split_once('=').unwrap_or((d, ""));
                    let arg = arg.trim_matches('"').parse::<u64>().ok();
                    match n.to_ascii_lowercase().as_str() {
                        "no-store" | "private" => h.storable = false,
                        "no-cache" => no_cache = true,
                        "max-age" => max_age = arg.or(Some(0)),
                        "s-maxage" => s_maxage = arg.or(Some(0)),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let date = date.unwrap_or(now);
    h.initial_age = age.max(now.saturating_sub(date));
    // §4.2.1: s-maxage (a shared cache), max-age, Expires - Date, then
    // the heuristic of §4.2.2 (a tenth of the time since Last-Modified).
    h.explicit = no_cache || s_maxage.is_some() || max_age.is_some() || expires.is_some();
    h.lifetime = if no_cache {
        0
    } else if let Some(s) = s_maxage.or(max_age) {
        s
    } else if let Some(e) = expires {
        e.saturating_sub(date)
    } else if let Some(lm) = h.headers.last_modified {
        date.saturating_sub(lm) / 10
    } else {
        0
    };
    Parsed::Head(h, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT

    fn head(raw: &str) -> Head {
        match parse(raw.as_bytes(), NOW) {
            Parsed::Head(h, n) => {
                assert_eq!(n, raw.len());
                h
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn freshness_comes_from_cache_control_then_expires_then_last_modified() {
        let d = "Date: Sun, 06 Nov 1994 08:49:27 GMT\r\n";
        let h = head(&format!(
            "HTTP/1.1 200 OK\r\n{d}Cache-Control: max-age=60, s-maxage=90\r\nContent-Length: 5\r\n\r\n"
        ));
        assert_eq!(
            (h.status, h.length, h.storable, h.lifetime, h.initial_age),
            (200, Some(5), true, 90, 10)
        );
        let h = head(&format!(
            "HTTP/1.1 200 OK\r\n{d}Expires: Sun, 06 Nov 1994 08:50:27 GMT\r\n\r\n"
        ));
        assert_eq!((h.lifetime, h.explicit), (60, true));
        let h = head(&format!("HTTP/1.1 200 OK\r\n{d}Expires: 0\r\n\r\n"));
        assert_eq!(h.lifetime, 0, "an invalid Expires is in the past");
        let h = head(&format!(
            "HTTP/1.1 200 OK\r\n{d}Last-Modified: Sun, 06 Nov 1994 08:32:47 GMT\r\n\r\n"
        ));
        assert_eq!((h.lifetime, h.explicit), (100, false));
        let h = head("HTTP/1.1 200 OK\r\nCache-Control: no-cache, max-age=60\r\nAge: 3\r\n\r\n");
        assert_eq!((h.lifetime, h.storable, h.initial_age), (0, true, 3));
    }

    #[test]
    fn what_is_not_stored_and_what_is_refused() {
        assert!(!head("HTTP/1.1 200 OK\r\nCache-Control: private\r\n\r\n").storable);
        assert!(!head("HTTP/1.1 200 OK\r\nCache-Control: no-store\r\n\r\n").storable);
        assert!(!head("HTTP/1.1 200 OK\r\nVary: Cookie\r\n\r\n").storable);
        assert!(!head("HTTP/1.1 404 Not Found\r\n\r\n").storable);
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", NOW),
            Parsed::Invalid
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", NOW),
            Parsed::Invalid
        );
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nCont", NOW), Parsed::Partial);
        assert_eq!(parse(b"garbage\r\n\r\n", NOW), Parsed::Invalid);
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = parse(&bytes, NOW);
        }
    }
}
