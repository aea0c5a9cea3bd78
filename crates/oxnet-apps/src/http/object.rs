//! A cached object: its status, its body in DMA-able shared buffers
//! (sent as attached segments, without a copy), the header fields every
//! response carries, its validators (RFC 9110 §8.8) and its freshness
//! (RFC 9111 §4.2).

use oxnet_driver::{Packet, SharedBuffer};

/// How long an object may be served without asking the origin
/// (RFC 9111 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The freshness lifetime in seconds (§4.2.1); None: never stale (an
    /// object from DIR, which has no origin to ask).
    pub lifetime: Option<u64>,
    /// The age it had when stored (§4.2.3: the Age header or the
    /// apparent age, whichever is larger).
    pub initial_age: u64,
    /// When it was stored (seconds since the epoch).
    pub stored_at: u64,
}

impl Freshness {
    /// Never stale.
    pub const FOREVER: Freshness = Freshness {
        lifetime: None,
        initial_age: 0,
        stored_at: 0,
    };

    /// The current age (RFC 9111 §4.2.3: initial age plus resident time).
    pub fn age(&self, now: u64) -> u64 {
        self.initial_age + now.saturating_sub(self.stored_at)
    }

    /// Fresh at `now`, for a client that accepts at most `max_age`
    /// (the request's max-age, RFC 9111 §5.2.1.1).
    pub fn fresh(&self, now: u64, max_age: Option<u64>) -> bool {
        let age = self.age(now);
        if max_age.is_some_and(|m| age > m) {
            return false;
        }
        self.lifetime.is_none_or(|l| l > age)
    }
}

/// One object.
pub struct Object {
    /// The status it is served with (200; an origin's other answers
    /// pass through unstored).
    pub status: u16,
    /// The body, in order.
    pub body: Vec<SharedBuffer>,
    pub len: usize,
    /// Header lines sent with a 200 (each `Name: value\r\n`):
    /// Content-Type, Last-Modified, ETag, Cache-Control, Expires.
    pub fields: Vec<u8>,
    /// The lines a 304 repeats (RFC 9110 §15.4.5): ETag, Cache-Control,
    /// Expires.
    pub validators: Vec<u8>,
    pub etag: Option<String>,
    pub last_modified: Option<u64>,
    pub freshness: Freshness,
    /// Sent with an Age header (it came from an origin).
    pub from_origin: bool,
}

impl Object {
    /// An object whose body is `chunks` (written packets, shared now).
    pub fn new(status: u16, chunks: Vec<Packet>, headers: &Headers, freshness: Freshness, from_origin: bool) -> Object {
        let body: Vec<SharedBuffer> = chunks
            .into_iter()
            .filter(|p| !p.is_empty())
            .filter_map(|p| SharedBuffer::new(p).ok())
            .collect();
        let len = body.iter().map(|b| b.len()).sum();
        let mut fields = Vec::new();
        let mut validators = Vec::new();
        let mut line = |to_both: bool, name: &str, value: &str| {
            let l = format!("{name}: {value}\r\n");
            fields.extend_from_slice(l.as_bytes());
            if to_both {
                validators.extend_from_slice(l.as_bytes());
            }
        };
        if let Some(v) = &headers.content_type {
            line(false, "Content-Type", v);
        }
        if let Some(t) = headers.last_modified {
            line(false, "Last-Modified", &super::date::format(t));
        }
        if let Some(v) = &headers.etag {
            line(true, "ETag", v);
        }
        if let Some(v) = &headers.cache_control {
            line(true, "Cache-Control", v);
        }
        if let Some(v) = &headers.expires {
            line(true, "Expires", v);
        }
        Object {
            status,
            body,
            len,
            fields,
            validators,
            etag: headers.etag.clone(),
            last_modified: headers.last_modified,
            freshness,
            from_origin,
        }
    }

    /// Buffers the body holds (the store's memory accounting).
    pub fn chunks(&self) -> usize {
        self.body.len()
    }

    /// RFC 9110 §13.1.2: If-None-Match matches (weak comparison, "*").
    pub fn none_match(&self, list: &str) -> bool {
        let Some(etag) = &self.etag else { return false };
        let weak = |t: &str| t.trim().trim_start_matches("W/").to_string();
        list.trim() == "*" || list.split(',').any(|t| weak(t) == weak(etag))
    }

    /// RFC 9110 §13.1.3: not modified since `since`.
    pub fn not_modified_since(&self, since: u64) -> bool {
        self.last_modified.is_some_and(|lm| lm <= since)
    }
}

/// The fields an object keeps from its source.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Headers {
    pub content_type: Option<String>,
    pub last_modified: Option<u64>,
    pub etag: Option<String>,
    pub cache_control: Option<String>,
    pub expires: Option<String>,
}

/// A media type for a file name (what DIR's files are served as).
pub fn content_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "application/javascript",
        "json" => "application/json",
        "txt" => "text/plain",
        "xml" => "text/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_ages_and_expires() {
        let f = Freshness {
            lifetime: Some(60),
            initial_age: 10,
            stored_at: 1000,
        };
        assert_eq!(f.age(1020), 30);
        assert!(f.fresh(1049, None));
        assert!(!f.fresh(1050, None));
        assert!(!f.fresh(1020, Some(29)), "the request's max-age");
        assert!(Freshness::FOREVER.fresh(u64::MAX / 2, None));
    }
}
