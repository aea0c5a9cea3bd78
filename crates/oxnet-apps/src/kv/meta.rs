//! memcached's meta protocol (protocol.txt "Meta Commands").

use super::info::Env;
use super::reply::Reply;
use super::text::Step;

/// A meta command line (`tokens[0]` is "m" and one letter).
pub fn command(_tokens: &[&[u8]], line_len: usize, _buf: &[u8], env: &mut Env<'_>, out: &mut Reply) -> Step {
    env.info.protocol_errors += 1;
    out.line("ERROR");
    Step::Done {
        consumed: line_len,
        close: false,
    }
}
