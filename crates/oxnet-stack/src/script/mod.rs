//! Script tests of the TCP stack (issue 11): a subset of packetdrill's
//! language (google/packetdrill, its `Syntax.md` and `gtests/net/tcp`),
//! parsed to a syntax tree ([`ast`], by [`parse`]) and printed back to
//! text (the tree's [`Display`](std::fmt::Display)), and played against
//! the stack in simulated time by [`run::run_script`] (its module doc
//! says how). The scripts, the stack's conformance tests, are in
//! `crates/oxnet-stack/tests/scripts/`.
//!
//! ```text
//! --tolerance_usecs=10000
//! // A passive open.
//!    0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
//!   +0 bind(3, ..., ...) = 0
//!   +0 listen(3, 1) = 0
//!   +0 < S 0:0(0) win 65535 <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7>
//!   +0 > S. 0:0(0) ack 1 <...>
//! +0.1 < . 1:1(0) ack 1 win 257
//!   +0 accept(3, ..., ...) = 4
//! ```
//!
//! # The subset
//! - **Options**, before the first event: `--name=value` lines (or a
//!   switch, `--name`, with an empty value), kept by name in
//!   [`Script::options`] (e.g. `--tolerance_usecs=10000`).
//! - **IPv6**: the option line `--ip_version=ipv6` (packetdrill's own flag,
//!   so the same script runs over IPv6 under packetdrill);
//!   [`Script::ip_version`] reads it. `ipv4` is the default; other values
//!   (packetdrill's `ipv4-mapped-ipv6`) are refused.
//! - **Times**: `0.100` (from the start), `+0.1` and `+.1` (from the
//!   previous event), ranges `0.1~0.2` and `+0.1~+0.2`, and `*` (any time);
//!   seconds with at most 6 decimals, kept in microseconds.
//! - **System calls**: `name(args) = result`, then optionally an errno name
//!   and a note in parentheses (`= -1 EINPROGRESS (Operation now in
//!   progress)`; the note is not kept). Arguments and result are
//!   expressions ([`Expr`]): integers (decimal or `0x`), names, `...`,
//!   `"strings"` (kept as written, escapes and all), `[lists]`,
//!   `{structs, name=value}`, `calls(x)` such as `htons(8080)`, and `a|b`.
//!   They may wrap onto later lines.
//! - **Segments**: `<` (inject) or `>` (expect), flags from `SFRPUEW` then
//!   `.` for ACK (or `-` for none), `start:end(length)`, then in this order
//!   `ack N`, `win N` (required inbound), `urg N`, and options: `<...>`
//!   for any, or a list of `nop`, `eol`, `mss N`, `wscale N`, `sackOK`,
//!   `sack L:R L:R`, `TS val N ecr N`, padded to 4 bytes and at most 40.
//!   No option list means the segment carries none.
//! - **Shell commands** `` `...` ``, timed or not, kept as
//!   [`EventKind::Shell`] for the runner to refuse.
//! - `// comments` and `/* comments */` anywhere between tokens.
//! - One event per line: the next event starts on a new line.
//!
//! Refused with an [`ErrorMessage::Unsupported`] error: blocking calls
//! (`+0...0.2 accept(...)`), embedded code (`%{ ... }%`), IP fields on a
//! segment (`[ect0]`, `(tos ...)`), AccECN flags (`A`, ACE digits), UDP
//! and ICMP packets, the `FO`, `FOEXP` and `md5` options, and struct
//! fields named by a call (a msghdr's `msg_name(...)=...`). Of the 162
//! scripts in packetdrill's `gtests/net/tcp`, 42 parse (and print back
//! the same); each of the others stops at one of these.
//!
//! Errors name the place and what was expected there:
//! `passive.pkt:12:31: expected `,` and another option, or `>` ending the
//! options, found end of line`. No input makes the parser panic, and it
//! refuses expressions nested more than 32 deep.

pub mod ast;
mod error;
mod lex;
mod parse;
mod print;
pub mod run;
mod run_net;
pub mod run_segment;
pub mod run_states;
mod run_syscall;
#[cfg(test)]
mod run_tests;
mod segment;
#[cfg(test)]
mod tests;

pub use ast::{
    Direction, Event, EventKind, EventTime, Expr, Field, IpVersion, Micros, SackBlock, Script, TcpFlags, TcpOptionSpec,
};
pub use error::{ErrorMessage, ScriptError};
pub use parse::parse;
pub use run::{run_script, EventOutcome, Failure, Report, RunOptions};
pub use run_states::{Transition, ALL_STATES};
