//! The syntax tree of a script: what [`parse`](super::parse) returns and
//! what [`Display`](std::fmt::Display) prints back (`print.rs`). Nothing here
//! is interpreted: system call arguments stay expressions, and the runner
//! decides what `SOCK_STREAM` or `...` mean.

use std::collections::BTreeMap;

/// A whole script: the option lines at its top, then its events in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `--name=value` lines, by name without the dashes (packetdrill's
    /// command-line flags written into the script, e.g. `tolerance_usecs`);
    /// a switch written `--name` alone has the empty value.
    /// A sorted map, so printing is deterministic.
    pub options: BTreeMap<String, String>,
    /// The events, in the order they are written.
    pub events: Vec<Event>,
}

/// The address family a script runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4 (the default).
    V4,
    /// IPv6, chosen by the option line `--ip_version=ipv6`.
    V6,
}

impl Script {
    /// The option that chooses IPv6: packetdrill's own flag, so a script
    /// that sets it runs over IPv6 under packetdrill too.
    pub const IP_VERSION_OPTION: &'static str = "ip_version";

    /// IPv4 unless the script has `--ip_version=ipv6` (the parser accepts
    /// no other value than `ipv4` and `ipv6`).
    pub fn ip_version(&self) -> IpVersion {
        match self.options.get(Self::IP_VERSION_OPTION).map(String::as_str) {
            Some("ipv6") => IpVersion::V6,
            _ => IpVersion::V4,
        }
    }
}

/// One line of the script (or several, for a system call whose arguments
/// are wrapped): when it happens and what happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The line (from 1) where the event starts, for the runner's messages.
    pub line: u32,
    /// When the event happens, or is expected to.
    pub time: EventTime,
    /// What happens.
    pub kind: EventKind,
}

/// A time in microseconds, the unit packetdrill scripts are resolved to
/// (times are written in seconds with at most six decimals).
pub type Micros = u64;

/// When an event happens. A relative time counts from the previous event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTime {
    /// `0.100`: this many microseconds after the script started.
    Absolute(Micros),
    /// `+0.1`, `+0`: this many microseconds after the previous event.
    Relative(Micros),
    /// `0.1~0.2` (both absolute) or `+0.1~+0.2` (both relative): any time
    /// from `start` to `end`, inclusive; `start <= end`.
    Range {
        /// Whether both ends count from the previous event (`+`).
        relative: bool,
        /// The earliest time.
        start: Micros,
        /// The latest time.
        end: Micros,
    },
    /// `*`: at any time (an outbound segment whose timing is not pinned).
    Any,
    /// No time written: only a shell command may omit it, as packetdrill's
    /// set-up command on the first line does.
    Untimed,
}

/// What an event does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// `name(args) = result [ERRNO (note)]`: call the socket API and expect
    /// this result. The note after the errno is a comment and is not kept.
    Syscall {
        /// The call, e.g. `socket`, `accept`, `poll`.
        name: String,
        /// Its arguments, uninterpreted.
        args: Vec<Expr>,
        /// The expected return value (usually an integer, `-1` on error).
        result: Expr,
        /// The expected `errno` name, e.g. `EINPROGRESS`.
        errno: Option<String>,
    },
    /// `< flags seq ...` (inject) or `> flags seq ...` (expect) a TCP segment.
    Packet {
        /// Into the stack (`<`) or out of it (`>`).
        direction: Direction,
        /// The control bits.
        flags: TcpFlags,
        /// The first sequence number, relative to the sender's initial one.
        seq_start: u32,
        /// `seq_start + payload_len` (checked by the parser).
        seq_end: u32,
        /// Bytes of payload.
        payload_len: u16,
        /// `ack N`: the acknowledgment number, relative; `None` if not given.
        ack: Option<u32>,
        /// `win N`: the window field as sent (not scaled); `None` if not
        /// given, which only an outbound segment may do (not checked then).
        window: Option<u16>,
        /// `urg N`: the urgent pointer; `None` if not given.
        urgent: Option<u16>,
        /// The options in order; `Some(vec![])` when none are written (the
        /// segment must carry none), `None` for `<...>` (any options).
        options: Option<Vec<TcpOptionSpec>>,
    },
    /// `` `command` ``: a shell command, as written between the backquotes.
    /// Kept so a runner can refuse it by name; oxnet runs no shell.
    Shell(String),
}

/// Which way a segment goes, seen from the stack under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<`: the script injects the segment into the stack.
    Inbound,
    /// `>`: the stack is expected to send the segment.
    Outbound,
}

/// TCP control bits (RFC 9293 §3.1; ECE and CWR from RFC 3168 §6.1),
/// written as packetdrill's letters: `S` SYN, `F` FIN, `R` RST, `P` PSH,
/// `U` URG, `E` ECE, `W` CWR, and `.` for ACK; `-` when none is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// `S`
    pub syn: bool,
    /// `F`
    pub fin: bool,
    /// `R`
    pub rst: bool,
    /// `P`
    pub psh: bool,
    /// `U`
    pub urg: bool,
    /// `E`
    pub ece: bool,
    /// `W`
    pub cwr: bool,
    /// `.`
    pub ack: bool,
}

/// One TCP option as a script writes it (kinds from RFC 9293 §3.1,
/// RFC 7323 §2.2 and §3.2, RFC 2018 §2 and §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpOptionSpec {
    /// `eol`: end of option list (kind 0).
    EndOfList,
    /// `nop`: no-operation, padding (kind 1).
    Nop,
    /// `mss N`: maximum segment size (kind 2, RFC 9293 §3.7.1).
    Mss(u16),
    /// `wscale N`: window scale shift count (kind 3, RFC 7323 §2.2).
    WindowScale(u8),
    /// `sackOK`: SACK permitted (kind 4, RFC 2018 §2).
    SackPermitted,
    /// `sack L:R L:R ...`: SACK blocks (kind 5, RFC 2018 §3), at least one.
    Sack(Vec<SackBlock>),
    /// `TS val N ecr N`: timestamps (kind 8, RFC 7323 §3.2).
    Timestamp {
        /// TSval.
        val: u32,
        /// TSecr.
        ecr: u32,
    },
}

impl TcpOptionSpec {
    /// Bytes the option takes in a TCP header (kind, length and value), so
    /// the parser can hold a list to the header's 40 bytes.
    pub fn encoded_len(&self) -> usize {
        match self {
            TcpOptionSpec::EndOfList | TcpOptionSpec::Nop => 1,
            TcpOptionSpec::Mss(_) => 4,
            TcpOptionSpec::WindowScale(_) => 3,
            TcpOptionSpec::SackPermitted => 2,
            TcpOptionSpec::Sack(blocks) => 2 + 8 * blocks.len(),
            TcpOptionSpec::Timestamp { .. } => 10,
        }
    }
}

/// One SACK block: the sequence numbers `left:right`, relative, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackBlock {
    /// The first sequence number of the block.
    pub left: u32,
    /// The sequence number just past the block.
    pub right: u32,
}

/// A system call argument or result, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `...`: any value (or "fill in what fits", for buffers and addresses).
    Ellipsis,
    /// `1000`, `-1`, `0x1f`: an integer (packetdrill's are 64-bit signed).
    Int(i64),
    /// `SOCK_STREAM`: a name the runner looks up.
    Symbol(String),
    /// `"text"`: a string, the text between the quotes as written (a
    /// backslash escapes the next character; escapes are not decoded, as
    /// in packetdrill, which leaves them to the call that uses the string).
    Str(String),
    /// `[a, b]`: a list (an array, or an `int` passed by pointer: `[1]`).
    List(Vec<Expr>),
    /// `{fd=4, events=POLLIN}`: a struct, its fields named or not.
    Struct(Vec<Field>),
    /// `htons(8080)`, `inet_addr("192.0.2.1")`: a helper applied to values.
    Call {
        /// The helper's name.
        name: String,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// `O_RDWR|O_NONBLOCK`: a bitwise or of two or more values, in order.
    BitOr(Vec<Expr>),
}

/// One field of an [`Expr::Struct`]: `name=value`, or just `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name, if written.
    pub name: Option<String>,
    /// Its value.
    pub value: Expr,
}
