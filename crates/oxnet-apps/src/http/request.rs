//! One HTTP/1.1 request head, parsed by httparse (RFC 9112 §2-§3) into
//! what the cache needs: method, target, version, whether the connection
//! persists, the body to skip, the conditions (RFC 9110 §13) and the
//! request's Cache-Control (RFC 9111 §5.2.1). A request the cache cannot
//! take is the error status to answer with.

use super::Limits;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// GET or HEAD (other methods are answered with 405 / 501 here).
    pub head: bool,
    /// The request target's path and query (origin-form; an absolute-form
    /// target is reduced to it, RFC 9112 §3.2.2).
    pub target: String,
    /// The Host header (empty for an HTTP/1.0 request without one).
    pub host: String,
    /// HTTP/1.1 (true) or HTTP/1.0.
    pub http11: bool,
    /// The connection persists after the response (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// Bytes of request body to discard after the head.
    pub body: usize,
    pub if_none_match: Option<String>,
    /// If-Modified-Since, seconds since the epoch (ignored if unparsable,
    /// RFC 9110 §13.1.3).
    pub if_modified_since: Option<u64>,
    /// The request's Cache-Control (and Pragma).
    pub no_cache: bool,
    pub no_store: bool,
    pub max_age: Option<u64>,
}

/// What a request head turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Partial,
    /// A request to serve, and the head's length.
    Request(Request, usize),
    /// A request to refuse: the status, whether the connection can go on
    /// (the head's length and the body to skip are known), and those.
    Refuse {
        status: u16,
        keep_alive: bool,
        len: usize,
        body: usize,
    },
    /// Unusable bytes: answer with this status and close.
    Fatal(u16),
}

/// Methods RFC 9110 §9 defines that the cache does not serve (405);
/// anything else is unknown (501).
const KNOWN: &[&str] = &["POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// Parses the head at the start of `buf`.
pub fn parse(buf: &[u8], limits: &Limits) -> Parsed {
    let mut headers = vec![httparse::EMPTY_HEADER; limits.max_headers];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Partial) => {
            // RFC 9110 §15.5.20 / RFC 6585 §5: a head larger than we take.
            return if buf.len() > limits.max_header_bytes {
                Parsed::Fatal(431)
            } else {
                Parsed::Partial
            };
        }
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Fatal(431),
        Err(_) => return Parsed::Fatal(400),
    };
    if len > limits.max_header_bytes {
        return Parsed::Fatal(431);
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Fatal(400);
    };
    let http11 = version == 1;
    let mut r = Request {
        head: method == "HEAD",
        target: String::new(),
        host: String::new(),
        http11,
        keep_alive: http11,
        body: 0,
        if_none_match: None,
        if_modified_since: None,
        no_cache: false,
        no_store: false,
        max_age: None,
    };
    let mut hosts = 0;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut pragma_no_cache = false;
    let mut cache_control = false;
    for h in req.headers.iter() {
        let Ok(value) = std::str::from_utf8(h.value) else {
            // Obsolete text in a field we read is refused below only if we
            // need it; other fields pass through unread.
            if is(h.name, "host") || is(h.name, "content-length") {
                return Parsed::Fatal(400);
            }
            continue;
        };
        let value = value.trim();
        if is(h.name, "host") {
            hosts += 1;
            r.host = value.to_string();
        } else if is(h.name, "connection") {
            // RFC 9112 §9.3: "close" ends it; HTTP/1.0 persists only
            // with "keep-alive".
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    r.keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && !http11 {
                    r.keep_alive = true;
                }
            }
        } else if is(h.name, "content-length") {
            // RFC 9112 §6.3: differing or invalid lengths are fatal.
            let Ok(n) = value.parse::<u64>() else {
                return Parsed::Fatal(400);
            };
            if content_length.is_some_and(|m| m != n) {
                return Parsed::Fatal(400);
            }
            content_length = Some(n);
        } else if is(h.name, "transfer-encoding") {
            chunked = true;
        } else if is(h.name, "if-none-match") {
            r.if_none_match = Some(value.to_string());
        } else if is(h.name, "if-modified-since") {
            r.if_modified_since = super::date::parse(value);
        } else if is(h.name, "cache-control") {
            cache_control = true;
            for d in value.split(',').map(str::trim) {
                let (name, arg) = d.split_once('=').unwrap_or((d, ""));
                match name.to_ascii_lowercase().as_str() {
                    "no-cache" => r.no_cache = true,
                    "no-store" => r.no_store = true,
                    "max-age" => r.max_age = arg.trim_matches('"').parse().ok(),
                    _ => {}
                }
            }
        } else if is(h.name, "pragma") {
            pragma_no_cache |= value.eq_ignore_ascii_case("no-cache");
        }
    }
    // RFC 9111 §5.4: Pragma counts only without Cache-Control.
    if pragma_no_cache && !cache_control {
        r.no_cache = true;
    }
    // RFC 9112 §6.1: a body we cannot frame; the connection cannot go on.
    if chunked {
        return Parsed::Fatal(501);
    }
    let body = content_length.unwrap_or(0);
    if body > limits.max_body as u64 {
        return Parsed::Fatal(413);
    }
    r.body = body as usize;
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host.
    if (http11 && hosts != 1) || hosts > 1 {
        return Parsed::Refuse {
            status: 400,
            keep_alive: false,
            len,
            body: r.body,
        };
    }
    match method {
        "GET" | "HEAD" => {}
        m if KNOWN.contains(&m) => {
            return Parsed::Refuse {
                status: 405,
                keep_alive: r.keep_alive,
                len,
                body: r.body,
            };
        }
        _ => {
            return Parsed::Refuse {
                status: 501,
                keep_alive: r.keep_alive,
                len,
                body: r.body,
            }
        }
    }
    match origin_form(path) {
        Some(t) => r.target = t.to_string(),
        None => {
            return Parsed::Refuse {
                status: 400,
                keep_alive: r.keep_alive,
                len,
                body: r.body,
            }
        }
    }
    Parsed::Request(r, len)
}

fn is(name: &str, lower: &str) -> bool {
    name.eq_ignore_ascii_case(lower)
}

/// The path and query of a target in origin-form or absolute-form
/// (RFC 9112 §3.2.1-§3.2.2); None for the other forms.
fn origin_form(path: &str) -> Option<&str> {
    if path.starts_with('/') {
        return Some(path);
    }
    let lower = path.get(..8)?.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &path[7..]
    } else if lower == "https://" {
        &path[8..]
    } else {
        return None;
    };
    Some(rest.find('/').map_or("/", |i| &rest[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn a_get_with_conditions_and_cache_control() {
        let raw = b"GET /a?b HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"1\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nCache-Control: no-cache, max-age=5\r\n\r\nrest";
        let Parsed::Request(r, len) = parse(raw, &limits()) else {
            panic!()
        };
        assert_eq!(len, raw.len() - 4);
        assert_eq!(
            (r.head, r.target.as_str(), r.host.as_str(), r.http11, r.keep_alive),
            (false, "/a?b", "x", true, true)
        );
        assert_eq!(r.if_none_match.as_deref(), Some("\"1\""));
        assert_eq!(r.if_modified_since, Some(784111777));
        assert_eq!((r.no_cache, r.no_store, r.max_age), (true, false, Some(5)));
    }

    #[test]
    fn connection_defaults_follow_the_version() {
        let p = |raw: &[u8]| match parse(raw, &limits()) {
            Parsed::Request(r, _) => r.keep_alive,
            other => panic!("{other:?}"),
        };
        assert!(p(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(!p(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        assert!(!p(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(p(b"HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    }

    #[test]
    fn refusals_and_fatal_errors() {
        let l = limits();
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHo", &l), Parsed::Partial);
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\n\r\n", &l),
            Parsed::Refuse {
                status: 400,
                keep_alive: false,
                len: 18,
                body: 0
            }
        );
        assert!(matches!(
            parse(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n", &l),
            Parsed::Refuse {
                status: 405,
                keep_alive: true,
                body: 3,
                ..
            }
        ));
        assert!(matches!(
            parse(b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", &l),
            Parsed::Refuse { status: 501, .. }
        ));
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", &l),
            Parsed::Fatal(501)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", &l),
            Parsed::Fatal(413)
        );
        assert_eq!(
            parse(
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                &l
            ),
            Parsed::Fatal(400)
        );
        assert_eq!(parse(b"G\x01T / HTTP/1.1\r\n\r\n", &l), Parsed::Fatal(400));
        assert_eq!(parse(b"GET / HTTP/2.0\r\n\r\n", &l), Parsed::Fatal(400));
        let big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(l.max_header_bytes));
        assert_eq!(parse(big.as_bytes(), &l), Parsed::Fatal(431));
        let many: String = (0..=l.max_headers).map(|i| format!("X{i}: y\r\n")).collect();
        assert_eq!(
            parse(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(), &l),
            Parsed::Fatal(431)
        );
    }

    #[test]
    fn absolute_form_targets_become_paths() {
        assert_eq!(origin_form("http://h:80/x?y"), Some("/x?y"));
        assert_eq!(origin_form("HTTPS://h"), Some("/"));
        assert_eq!(origin_form("*"), None);
        assert_eq!(origin_form("h:80"), None);
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = parse(&bytes, &limits());
        }

        #[test]
        fn random_fields_never_panic(name in "[A-Za-z-]{1,20}", value in "[ -~]{0,40}") {
            let raw = format!("GET / HTTP/1.1\r\nHost: x\r\n{name}: {value}\r\n\r\n");
            let _ = parse(raw.as_bytes(), &limits());
        }
    }
}
