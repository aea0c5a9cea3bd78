//! memcached's binary protocol.

use super::info::Env;
use super::reply::Reply;
use super::text::Step;

/// The first byte of a binary request.
pub const REQUEST_MAGIC: u8 = 0x80;

pub fn step(buf: &[u8], _env: &mut Env<'_>, _out: &mut Reply, _limit: usize) -> Step {
    Step::Done {
        consumed: buf.len(),
        close: true,
    }
}
