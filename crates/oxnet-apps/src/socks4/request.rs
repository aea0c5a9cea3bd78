//! The SOCKS4 and SOCKS4a wire formats: the request a client sends and
//! the 8-byte reply (SOCKS4.protocol, "SOCKS: A protocol for TCP proxy
//! across firewalls", sections 1 and 2; SOCKS4A.protocol, "SOCKS 4A").
//!
//! ```text
//! request: VN=4 | CD (1 CONNECT, 2 BIND) | DSTPORT (2) | DSTIP (4) | USERID | NUL
//!          [SOCKS4a, DSTIP = 0.0.0.x with x != 0: | HOSTNAME | NUL]
//! reply:   VN=0 | CD (90 granted, 91 rejected or failed) | DSTPORT (2) | DSTIP (4)
//! ```
//!
//! [`parse`] reads a request from the bytes received so far: it never
//! panics, and it says "incomplete" only while the bytes stay within the
//! limits given (the user id's and the host name's lengths), so a client
//! cannot make the proxy buffer more than a request's bounded size.

use std::net::Ipv4Addr;

/// SOCKS4's version number (the request's VN).
pub const VERSION: u8 = 4;
/// The bytes before USERID: VN, CD, DSTPORT, DSTIP.
pub const FIXED: usize = 8;
/// The reply's length.
pub const REPLY_LEN: usize = 8;
/// Reply codes (SOCKS4.protocol §1): request granted.
pub const GRANTED: u8 = 90;
/// Request rejected or failed.
pub const REJECTED: u8 = 91;

/// What the client asks for (CD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// CD 1: connect to DSTIP:DSTPORT and relay (§1).
    Connect,
    /// CD 2: wait for one connection from DSTIP (the application
    /// server) and relay it (§2).
    Bind,
}

/// Where the request points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// SOCKS4: DSTIP.
    Address(Ipv4Addr),
    /// SOCKS4a: a name for the proxy to resolve (lower-cased).
    Host(String),
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    /// DSTPORT.
    pub port: u16,
    pub destination: Destination,
    /// USERID, without its NUL (may be empty).
    pub user: Vec<u8>,
}

/// Why bytes are not a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// VN is not 4.
    Version,
    /// CD is neither 1 nor 2.
    Command,
    /// No NUL within the user id limit.
    UserTooLong,
    /// No NUL within the host name limit.
    HostTooLong,
    /// A SOCKS4a host name that is empty or not printable ASCII.
    BadHost,
}

/// The outcome of [`parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// More bytes are needed (the limits are not reached yet).
    Incomplete,
    /// A request, and how many bytes it took (what follows is the
    /// client's data for the destination).
    Done(Request, usize),
    /// Not a request: answer 91 and close.
    Invalid(Invalid),
}

/// The NUL-terminated field at `from`: its end (the NUL's index), None
/// if incomplete, Err if more than `max` bytes come without a NUL.
fn terminated(buf: &[u8], from: usize, max: usize, err: Invalid) -> Result<Option<usize>, Invalid> {
    let window = &buf[from.min(buf.len())..buf.len().min(from + max + 1)];
    match window.iter().position(|&b| b == 0) {
        Some(i) => Ok(Some(from + i)),
        None if window.len() > max => Err(err),
        None => Ok(None),
    }
}

/// Reads a request from `buf` (everything received so far), with a user
/// id of at most `max_user` bytes and a SOCKS4a host name of at most
/// `max_host`.
pub fn parse(buf: &[u8], max_user: usize, max_host: usize) -> Parse {
    // Check what we have as soon as we have it, so that a client that
    // is not speaking SOCKS4 hears so at once.
    match buf.first() {
        None => return Parse::Incomplete,
        Some(&VERSION) => {}
        Some(_) => return Parse::Invalid(Invalid::Version),
    }
    let command = match buf.get(1) {
        None => return Parse::Incomplete,
        Some(1) => Command::Connect,
        Some(2) => Command::Bind,
        Some(_) => return Parse::Invalid(Invalid::Command),
    };
    if buf.len() < FIXED {
        return Parse::Incomplete;
    }
    let port = u16::from_be_bytes([buf[2], buf[3]]);
    let ip = Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
    let user_end = match terminated(buf, FIXED, max_user, Invalid::UserTooLong) {
        Err(e) => return Parse::Invalid(e),
        Ok(None) => return Parse::Incomplete,
        Ok(Some(end)) => end,
    };
    let user = buf[FIXED..user_end].to_vec();
    let o = ip.octets();
    // SOCKS4A.protocol: 0.0.0.x with x nonzero announces a host name
    // after the user id's NUL.
    if o[..3] == [0, 0, 0] && o[3] != 0 {
        let host_end = match terminated(buf, user_end + 1, max_host, Invalid::HostTooLong) {
            Err(e) => return Parse::Invalid(e),
            Ok(None) => return Parse::Incomplete,
            Ok(Some(end)) => end,
        };
        let host = &buf[user_end + 1..host_end];
        if host.is_empty() || !host.iter().all(|b| b.is_ascii_graphic()) {
            return Parse::Invalid(Invalid::BadHost);
        }
        let host = String::from_utf8_lossy(host).to_ascii_lowercase();
        let request = Request {
            command,
            port,
            destination: Destination::Host(host),
            user,
        };
        return Parse::Done(request, host_end + 1);
    }
    let request = Request {
        command,
        port,
        destination: Destination::Address(ip),
        user,
    };
    Parse::Done(request, user_end + 1)
}

/// The reply: VN 0, `code`, DSTPORT, DSTIP (SOCKS4.protocol §1).
pub fn reply(code: u8, port: u16, ip: Ipv4Addr) -> [u8; REPLY_LEN] {
    let mut r = [0u8; REPLY_LEN];
    r[1] = code;
    r[2..4].copy_from_slice(&port.to_be_bytes());
    r[4..8].copy_from_slice(&ip.octets());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_request_parses_with_what_follows_left() {
        let mut b = vec![4, 1, 0, 80, 10, 0, 0, 3];
        b.extend_from_slice(b"fred\0GET /");
        let r = Request {
            command: Command::Connect,
            port: 80,
            destination: Destination::Address(Ipv4Addr::new(10, 0, 0, 3)),
            user: b"fred".to_vec(),
        };
        assert_eq!(parse(&b, 255, 255), Parse::Done(r, 13));
        // Every prefix short of the NUL is incomplete.
        for n in 0..13 {
            assert_eq!(parse(&b[..n], 255, 255), Parse::Incomplete, "{n}");
        }
    }

    #[test]
    fn a_socks4a_request_carries_its_host_lower_cased() {
        let mut b = vec![4, 2, 0x1f, 0x90, 0, 0, 0, 7, 0];
        b.extend_from_slice(b"Web.Example\0");
        let r = Request {
            command: Command::Bind,
            port: 8080,
            destination: Destination::Host("web.example".into()),
            user: vec![],
        };
        assert_eq!(parse(&b, 255, 255), Parse::Done(r, b.len()));
        assert_eq!(parse(&b[..b.len() - 1], 255, 255), Parse::Incomplete);
        // 0.0.0.0 is an address, not the 4a form.
        let b = [4, 1, 0, 80, 0, 0, 0, 0, 0];
        assert!(matches!(
            parse(&b, 255, 255),
            Parse::Done(
                Request {
                    destination: Destination::Address(_),
                    ..
                },
                9
            )
        ));
    }

    #[test]
    fn limits_and_bad_fields_are_invalid_at_once() {
        assert_eq!(parse(&[5], 8, 8), Parse::Invalid(Invalid::Version));
        assert_eq!(parse(&[4, 3], 8, 8), Parse::Invalid(Invalid::Command));
        let mut b = vec![4, 1, 0, 80, 1, 2, 3, 4];
        b.extend_from_slice(&[b'u'; 8]);
        assert_eq!(parse(&b, 8, 8), Parse::Incomplete, "8 bytes: the NUL may come");
        b.push(b'u');
        assert_eq!(parse(&b, 8, 8), Parse::Invalid(Invalid::UserTooLong));
        let mut b = vec![4, 1, 0, 80, 0, 0, 0, 1, 0];
        b.extend_from_slice(&[b'h'; 9]);
        assert_eq!(parse(&b, 8, 8), Parse::Invalid(Invalid::HostTooLong));
        let b = [4, 1, 0, 80, 0, 0, 0, 1, 0, 0];
        assert_eq!(parse(&b, 8, 8), Parse::Invalid(Invalid::BadHost));
        let b = [4, 1, 0, 80, 0, 0, 0, 1, 0, b'a', b' ', b'b', 0];
        assert_eq!(parse(&b, 8, 8), Parse::Invalid(Invalid::BadHost));
    }

    #[test]
    fn a_reply_is_vn_0_code_port_address() {
        assert_eq!(
            reply(GRANTED, 0x1234, Ipv4Addr::new(10, 0, 0, 3)),
            [0, 90, 0x12, 0x34, 10, 0, 0, 3]
        );
        assert_eq!(reply(REJECTED, 0, Ipv4Addr::UNSPECIFIED), [0, 91, 0, 0, 0, 0, 0, 0]);
    }

    proptest::proptest! {
        /// Random bytes never panic, and a request never takes more than
        /// the fixed part and the two bounded fields.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
                                    max_user in 0usize..300, max_host in 0usize..300) {
            if let Parse::Done(r, used) = parse(&bytes, max_user, max_host) {
                proptest::prop_assert!(used <= bytes.len());
                proptest::prop_assert!(used <= FIXED + max_user + 1 + max_host + 1);
                proptest::prop_assert!(r.user.len() <= max_user);
            }
        }
    }
}
