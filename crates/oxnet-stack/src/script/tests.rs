//! The script language as a whole: the sample scripts (the stack's future
//! conformance tests, `tests/scripts/*.pkt`) parse to exactly the trees
//! written out here, print back to text that parses the same, broken
//! lines get errors that say where and what was expected, and no input
//! makes the parser panic.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const PASSIVE: &str = include_str!("../../tests/scripts/passive_open_data_close.pkt");
const ACTIVE: &str = include_str!("../../tests/scripts/active_open.pkt");
const RETRANSMISSION: &str = include_str!("../../tests/scripts/retransmission.pkt");
const IPV6: &str = include_str!("../../tests/scripts/ipv6_sack_reset.pkt");

const SAMPLES: [(&str, &str); 4] = [
    ("passive_open_data_close.pkt", PASSIVE),
    ("active_open.pkt", ACTIVE),
    ("retransmission.pkt", RETRANSMISSION),
    ("ipv6_sack_reset.pkt", IPV6),
];

// ---- Builders for expected trees ----

fn ev(line: u32, time: EventTime, kind: EventKind) -> Event {
    Event { line, time, kind }
}

fn abs(seconds: f64) -> EventTime {
    EventTime::Absolute(micros(seconds))
}

fn rel(seconds: f64) -> EventTime {
    EventTime::Relative(micros(seconds))
}

fn rel_range(start: f64, end: f64) -> EventTime {
    EventTime::Range {
        relative: true,
        start: micros(start),
        end: micros(end),
    }
}

fn micros(seconds: f64) -> Micros {
    (seconds * 1e6).round() as Micros
}

fn sym(name: &str) -> Expr {
    Expr::Symbol(name.to_string())
}

fn int(n: i64) -> Expr {
    Expr::Int(n)
}

const ANY: Expr = Expr::Ellipsis;

fn call(name: &str, args: Vec<Expr>, result: i64) -> EventKind {
    EventKind::Syscall {
        name: name.to_string(),
        args,
        result: int(result),
        errno: None,
    }
}

fn failing_call(name: &str, args: Vec<Expr>, errno: &str) -> EventKind {
    EventKind::Syscall {
        name: name.to_string(),
        args,
        result: int(-1),
        errno: Some(errno.to_string()),
    }
}

/// `socket(..., SOCK_STREAM, IPPROTO_TCP) = fd`
fn tcp_socket(fd: i64) -> EventKind {
    call("socket", vec![ANY, sym("SOCK_STREAM"), sym("IPPROTO_TCP")], fd)
}

/// The flags of a packetdrill flag string, spelled out bit by bit.
fn flags(letters: &str) -> TcpFlags {
    let mut flags = TcpFlags::default();
    for letter in letters.chars() {
        match letter {
            'S' => flags.syn = true,
            'F' => flags.fin = true,
            'R' => flags.rst = true,
            'P' => flags.psh = true,
            'U' => flags.urg = true,
            'E' => flags.ece = true,
            'W' => flags.cwr = true,
            '.' => flags.ack = true,
            _ => panic!("not a flag letter: {letter}"),
        }
    }
    flags
}

/// A segment being written out: `inbound("S.", 0, 0).ack(1).win(100).done()`.
struct Seg {
    direction: Direction,
    letters: &'static str,
    seq_start: u32,
    payload_len: u16,
    ack: Option<u32>,
    window: Option<u16>,
    urgent: Option<u16>,
    options: Option<Vec<TcpOptionSpec>>,
}

fn segment(direction: Direction, letters: &'static str, seq_start: u32, payload_len: u16) -> Seg {
    Seg {
        direction,
        letters,
        seq_start,
        payload_len,
        ack: None,
        window: None,
        urgent: None,
        options: Some(Vec::new()),
    }
}

fn inbound(letters: &'static str, seq_start: u32, payload_len: u16) -> Seg {
    segment(Direction::Inbound, letters, seq_start, payload_len)
}

fn outbound(letters: &'static str, seq_start: u32, payload_len: u16) -> Seg {
    segment(Direction::Outbound, letters, seq_start, payload_len)
}

impl Seg {
    fn ack(self, n: u32) -> Seg {
        Seg { ack: Some(n), ..self }
    }

    fn win(self, n: u16) -> Seg {
        Seg {
            window: Some(n),
            ..self
        }
    }

    fn urg(self, n: u16) -> Seg {
        Seg {
            urgent: Some(n),
            ..self
        }
    }

    fn options(self, options: Vec<TcpOptionSpec>) -> Seg {
        Seg {
            options: Some(options),
            ..self
        }
    }

    /// `<...>`
    fn any_options(self) -> Seg {
        Seg { options: None, ..self }
    }

    fn done(self) -> EventKind {
        EventKind::Packet {
            direction: self.direction,
            flags: flags(self.letters),
            seq_start: self.seq_start,
            seq_end: self.seq_start.wrapping_add(self.payload_len.into()),
            payload_len: self.payload_len,
            ack: self.ack,
            window: self.window,
            urgent: self.urgent,
            options: self.options,
        }
    }
}

fn parse_ok(text: &str) -> Script {
    match parse("t.pkt", text) {
        Ok(script) => script,
        Err(e) => panic!("{e}"),
    }
}

fn parse_err(text: &str) -> String {
    match parse("t.pkt", text) {
        Ok(script) => panic!("parsed, expected an error:\n{script}"),
        Err(e) => e.to_string(),
    }
}

fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The events without their line numbers, which printing changes.
fn unlined(script: &Script) -> Vec<(EventTime, EventKind)> {
    script.events.iter().map(|e| (e.time, e.kind.clone())).collect()
}

// ---- The sample scripts, tree by tree ----

#[test]
fn passive_open_data_close_parses_to_its_tree() {
    use TcpOptionSpec::*;
    let script = parse_ok(PASSIVE);
    assert_eq!(script.options, options(&[("tolerance_usecs", "10000")]));
    assert_eq!(script.ip_version(), IpVersion::V4);
    let expected = vec![
        ev(9, abs(0.0), tcp_socket(3)),
        ev(
            10,
            rel(0.0),
            call(
                "setsockopt",
                vec![
                    int(3),
                    sym("SOL_SOCKET"),
                    sym("SO_REUSEADDR"),
                    Expr::List(vec![int(1)]),
                    int(4),
                ],
                0,
            ),
        ),
        ev(11, rel(0.0), call("bind", vec![int(3), ANY, ANY], 0)),
        ev(12, rel(0.0), call("listen", vec![int(3), int(1)], 0)),
        ev(
            15,
            rel(0.0),
            inbound("S", 0, 0)
                .win(65535)
                .options(vec![Mss(1460), SackPermitted, Nop, Nop, Nop, WindowScale(7)])
                .done(),
        ),
        ev(16, rel(0.0), outbound("S.", 0, 0).ack(1).any_options().done()),
        ev(17, rel(0.1), inbound(".", 1, 0).ack(1).win(514).done()),
        ev(18, rel(0.0), call("accept", vec![int(3), ANY, ANY], 4)),
        ev(22, rel(0.1), inbound("P.", 1, 1000).ack(1).win(514).done()),
        ev(23, rel(0.0), call("read", vec![int(4), ANY, int(1000)], 1000)),
        ev(24, rel_range(0.0, 0.5), outbound(".", 1, 0).ack(1001).done()),
        ev(27, rel(0.0), call("write", vec![int(4), ANY, int(1000)], 1000)),
        ev(28, rel(0.0), outbound("P.", 1, 1000).ack(1001).done()),
        ev(29, rel(0.1), inbound(".", 1001, 0).ack(1001).win(514).done()),
        ev(33, rel(0.0), call("close", vec![int(4)], 0)),
        ev(34, rel(0.0), outbound("F.", 1001, 0).ack(1001).done()),
        ev(35, rel(0.1), inbound(".", 1001, 0).ack(1002).win(514).done()),
        ev(36, rel(0.1), inbound("F.", 1001, 0).ack(1002).win(514).done()),
        ev(37, rel(0.0), outbound(".", 1002, 0).ack(1002).done()),
    ];
    assert_eq!(script.events, expected);
}

#[test]
fn active_open_parses_to_its_tree() {
    use TcpOptionSpec::*;
    let script = parse_ok(ACTIVE);
    assert_eq!(script.options, options(&[("tolerance_usecs", "10000")]));
    let pollfd = Expr::Struct(vec![
        Field {
            name: Some("fd".into()),
            value: int(3),
        },
        Field {
            name: Some("events".into()),
            value: Expr::BitOr(vec![sym("POLLIN"), sym("POLLOUT")]),
        },
        Field {
            name: Some("revents".into()),
            value: sym("POLLOUT"),
        },
    ]);
    let expected = vec![
        ev(9, abs(0.0), tcp_socket(3)),
        ev(
            10,
            rel(0.0),
            call(
                "fcntl",
                vec![
                    int(3),
                    sym("F_SETFL"),
                    Expr::BitOr(vec![sym("O_RDWR"), sym("O_NONBLOCK")]),
                ],
                0,
            ),
        ),
        ev(
            11,
            rel(0.0),
            failing_call("connect", vec![int(3), ANY, ANY], "EINPROGRESS"),
        ),
        ev(12, rel(0.0), outbound("S", 0, 0).any_options().done()),
        ev(
            13,
            rel(0.1),
            inbound("S.", 0, 0)
                .ack(1)
                .win(65535)
                .options(vec![Mss(1460), Nop, Nop, SackPermitted, Nop, WindowScale(6)])
                .done(),
        ),
        ev(14, rel(0.0), outbound(".", 1, 0).ack(1).done()),
        // The call wraps onto line 16; the event is where it starts.
        ev(
            15,
            rel(0.0),
            call("poll", vec![Expr::List(vec![pollfd]), int(1), int(0)], 1),
        ),
        ev(
            17,
            rel(0.0),
            call(
                "getsockopt",
                vec![
                    int(3),
                    sym("SOL_SOCKET"),
                    sym("SO_ERROR"),
                    Expr::List(vec![int(0)]),
                    Expr::List(vec![int(4)]),
                ],
                0,
            ),
        ),
        ev(20, rel(0.0), call("write", vec![int(3), ANY, int(100)], 100)),
        ev(21, rel(0.0), outbound("P.", 1, 100).ack(1).done()),
        ev(22, rel(0.1), inbound("P.", 1, 500).ack(101).win(1024).done()),
        ev(23, rel(0.0), call("read", vec![int(3), ANY, int(1000)], 500)),
        ev(24, rel_range(0.0, 0.5), outbound(".", 101, 0).ack(501).done()),
        ev(28, rel(0.1), inbound("F.", 501, 0).ack(101).win(1024).done()),
        ev(29, rel(0.0), outbound(".", 101, 0).ack(502).done()),
        ev(30, rel(0.0), call("read", vec![int(3), ANY, int(1000)], 0)),
        ev(31, rel(0.0), call("close", vec![int(3)], 0)),
        ev(32, rel(0.0), outbound("F.", 101, 0).ack(502).done()),
        ev(33, rel(0.1), inbound(".", 502, 0).ack(102).win(1024).done()),
    ];
    assert_eq!(script.events, expected);
}

#[test]
fn retransmission_parses_to_its_tree() {
    use TcpOptionSpec::*;
    let script = parse_ok(RETRANSMISSION);
    assert_eq!(script.options, options(&[("tolerance_usecs", "10000")]));
    let syn_ack = || outbound("S.", 0, 0).ack(1).any_options().done();
    let data = || outbound("P.", 1, 1000).ack(1).done();
    let fin = || outbound("F.", 1001, 0).ack(1).done();
    let expected = vec![
        ev(8, abs(0.0), tcp_socket(3)),
        ev(
            9,
            rel(0.0),
            call(
                "setsockopt",
                vec![
                    int(3),
                    sym("SOL_SOCKET"),
                    sym("SO_REUSEADDR"),
                    Expr::List(vec![int(1)]),
                    int(4),
                ],
                0,
            ),
        ),
        ev(10, rel(0.0), call("bind", vec![int(3), ANY, ANY], 0)),
        ev(11, rel(0.0), call("listen", vec![int(3), int(1)], 0)),
        ev(
            14,
            rel(0.0),
            inbound("S", 0, 0)
                .win(65535)
                .options(vec![Mss(1460), Nop, Nop, SackPermitted])
                .done(),
        ),
        ev(15, rel(0.0), syn_ack()),
        ev(16, rel(1.0), syn_ack()),
        ev(17, rel(0.1), inbound(".", 1, 0).ack(1).win(65535).done()),
        ev(18, rel(0.0), call("accept", vec![int(3), ANY, ANY], 4)),
        ev(22, rel(0.0), call("write", vec![int(4), ANY, int(1000)], 1000)),
        ev(23, rel(0.0), data()),
        ev(24, rel_range(2.9, 3.1), data()),
        ev(25, rel_range(5.9, 6.1), data()),
        ev(26, rel(0.1), inbound(".", 1, 0).ack(1001).win(65535).done()),
        ev(32, rel(0.0), call("shutdown", vec![int(4), sym("SHUT_WR")], 0)),
        ev(33, rel(0.0), fin()),
        ev(34, EventTime::Any, fin()),
        ev(35, rel(0.1), inbound(".", 1, 0).ack(1002).win(65535).done()),
    ];
    assert_eq!(script.events, expected);
}

#[test]
fn ipv6_sack_reset_parses_to_its_tree() {
    use TcpOptionSpec::*;
    let script = parse_ok(IPV6);
    assert_eq!(
        script.options,
        options(&[("ip_version", "ipv6"), ("tolerance_usecs", "10000")])
    );
    assert_eq!(script.ip_version(), IpVersion::V6);
    let expected = vec![
        ev(11, abs(0.0), tcp_socket(3)),
        ev(12, rel(0.0), call("bind", vec![int(3), ANY, ANY], 0)),
        ev(13, rel(0.0), call("listen", vec![int(3), int(1)], 0)),
        ev(
            14,
            rel(0.0),
            inbound("S", 0, 0)
                .win(65535)
                .options(vec![Mss(1440), SackPermitted, Nop, Nop, Nop, WindowScale(7)])
                .done(),
        ),
        ev(15, rel(0.0), outbound("S.", 0, 0).ack(1).any_options().done()),
        ev(16, rel(0.1), inbound(".", 1, 0).ack(1).win(514).done()),
        ev(17, rel(0.0), call("accept", vec![int(3), ANY, ANY], 4)),
        ev(20, rel(0.1), inbound(".", 1001, 1000).ack(1).win(514).done()),
        ev(
            21,
            rel(0.0),
            outbound(".", 1, 0)
                .ack(1)
                .options(vec![
                    Nop,
                    Nop,
                    Sack(vec![SackBlock {
                        left: 1001,
                        right: 2001,
                    }]),
                ])
                .done(),
        ),
        ev(22, rel(0.1), inbound(".", 1, 1000).ack(1).win(514).done()),
        ev(23, rel(0.0), outbound(".", 1, 0).ack(2001).done()),
        ev(24, rel(0.0), call("read", vec![int(4), ANY, int(4000)], 2000)),
        ev(26, rel(0.1), inbound("R.", 2001, 0).ack(1).win(0).done()),
        ev(
            27,
            rel(0.0),
            failing_call("read", vec![int(4), ANY, int(1000)], "ECONNRESET"),
        ),
        ev(28, rel(0.0), call("close", vec![int(4)], 0)),
    ];
    assert_eq!(script.events, expected);
}

// ---- Printing ----

#[test]
fn samples_print_and_parse_back_the_same() {
    for (name, text) in SAMPLES {
        let script = parse(name, text).unwrap();
        let printed = script.to_string();
        let again = parse("printed", &printed).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert_eq!(again.options, script.options, "{name}");
        assert_eq!(unlined(&again), unlined(&script), "{name}");
        assert_eq!(again.to_string(), printed, "{name}: printing is not a fixed point");
    }
}

#[test]
fn printer_layout_is_packetdrills() {
    let script = parse_ok(
        "--tolerance_usecs=10000\n--strict_segments\n`set up`\n0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
         +.1 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)\n\
         0.25~0.5 > SEW 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7>\n\
         * < SE. 0:0(0) ack 1 win 65535 urg 0 <...>\n+1.000001 < - 1:1(0) win 0\n\
         +0 poll([{fd=3, events=POLLOUT}, {..., 100}], 0x2, -1) = 1\n\
         +0 setsockopt(3, IPPROTO_IPV6, IPV6_V6ONLY, [], \"a b\") = 0 (a note)\n+0 `tear down`\n",
    );
    let expected = "\
--strict_segments
--tolerance_usecs=10000
`set up`
     0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
  +0.1 connect(3, ..., ...) = -1 EINPROGRESS (EINPROGRESS)
0.25~0.5 > SEW 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7>
     * < SE. 0:0(0) ack 1 win 65535 urg 0 <...>
+1.000001 < - 1:1(0) win 0
    +0 poll([{fd=3, events=POLLOUT}, {..., 100}], 2, -1) = 1
    +0 setsockopt(3, IPPROTO_IPV6, IPV6_V6ONLY, [], \"a b\") = 0
    +0 `tear down`
";
    assert_eq!(script.to_string(), expected);
}

// ---- The language, piece by piece ----

#[test]
fn times() {
    let script = parse_ok("0.100 close(3) = 0\n+.1 close(3) = 0\n+0 close(3) = 0\n0.1~0.2 close(3) = 0\n+0~+2 close(3) = 0\n* close(3) = 0\n");
    let times: Vec<EventTime> = script.events.iter().map(|e| e.time).collect();
    assert_eq!(
        times,
        vec![
            EventTime::Absolute(100_000),
            EventTime::Relative(100_000),
            EventTime::Relative(0),
            EventTime::Range {
                relative: false,
                start: 100_000,
                end: 200_000
            },
            EventTime::Range {
                relative: true,
                start: 0,
                end: 2_000_000
            },
            EventTime::Any,
        ]
    );
}

#[test]
fn shell_commands_timed_or_not() {
    let script = parse_ok("`../common/defaults.sh\n ./more.sh`\n+0 `echo \\` quoted`\n");
    assert_eq!(
        script.events,
        vec![
            ev(
                1,
                EventTime::Untimed,
                EventKind::Shell("../common/defaults.sh\n ./more.sh".into())
            ),
            ev(3, rel(0.0), EventKind::Shell("echo \\` quoted".into())),
        ]
    );
}

#[test]
fn segment_flags_and_fields() {
    use TcpOptionSpec::*;
    let script = parse_ok(
        "+0 < SEW 0:0(0) win 1\n+0 > FP. 5:10(5) ack 7\n+0 < - 0:0(0) win 0\n+0 > R 4294967295:9(10)\n\
         +0 < UP. 1:2(1) ack 1 win 2 urg 1\n+0 > . 1:1(0) <sack 1:2 3:4,nop,nop,eol,eol,eol,eol>\n",
    );
    let expected = vec![
        inbound("SEW", 0, 0).win(1).done(),
        outbound("FP.", 5, 5).ack(7).done(),
        inbound("", 0, 0).win(0).done(),
        // Sequence numbers wrap (RFC 9293 §3.4).
        outbound("R", u32::MAX, 10).done(),
        inbound("UP.", 1, 1).ack(1).win(2).urg(1).done(),
        outbound(".", 1, 0)
            .options(vec![
                Sack(vec![SackBlock { left: 1, right: 2 }, SackBlock { left: 3, right: 4 }]),
                Nop,
                Nop,
                EndOfList,
                EndOfList,
                EndOfList,
                EndOfList,
            ])
            .done(),
    ];
    assert_eq!(script.events.into_iter().map(|e| e.kind).collect::<Vec<_>>(), expected);
}

#[test]
fn the_briefs_syn_options() {
    use TcpOptionSpec::*;
    let script = parse_ok("0 < S 0:0(0) win 65535 <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7>\n");
    let expected = inbound("S", 0, 0)
        .win(65535)
        .options(vec![
            Mss(1460),
            SackPermitted,
            Timestamp { val: 100, ecr: 0 },
            Nop,
            WindowScale(7),
        ])
        .done();
    assert_eq!(script.events[0].kind, expected);
}

#[test]
fn expressions() {
    let script = parse_ok(
        "+0 f(0x1f, -12, \"a\\\"b\", [], {}, g(), {sin_port=htons(8080), sin_addr=inet_addr(\"192.0.2.1\")},\n\
         [[1, [2]]], A|B|C, ..., {..., 1000}) = X (note)\n+0 g() = -1 EAGAIN\n",
    );
    let field = |name: Option<&str>, value: Expr| Field {
        name: name.map(String::from),
        value,
    };
    let expected_args = vec![
        int(31),
        int(-12),
        Expr::Str("a\\\"b".into()),
        Expr::List(vec![]),
        Expr::Struct(vec![]),
        Expr::Call {
            name: "g".into(),
            args: vec![],
        },
        Expr::Struct(vec![
            field(
                Some("sin_port"),
                Expr::Call {
                    name: "htons".into(),
                    args: vec![int(8080)],
                },
            ),
            field(
                Some("sin_addr"),
                Expr::Call {
                    name: "inet_addr".into(),
                    args: vec![Expr::Str("192.0.2.1".into())],
                },
            ),
        ]),
        Expr::List(vec![Expr::List(vec![int(1), Expr::List(vec![int(2)])])]),
        Expr::BitOr(vec![sym("A"), sym("B"), sym("C")]),
        ANY,
        Expr::Struct(vec![field(None, ANY), field(None, int(1000))]),
    ];
    assert_eq!(
        script.events[0].kind,
        EventKind::Syscall {
            name: "f".into(),
            args: expected_args,
            // A word before a note is the result, not a call.
            result: sym("X"),
            errno: None,
        }
    );
    assert_eq!(script.events[1].kind, failing_call("g", vec![], "EAGAIN"));
}

#[test]
fn comments_go_anywhere_between_tokens() {
    let script =
        parse_ok("/* head */ --tolerance_usecs=5 // why\n+0 /* mid */ close(/* fd */ 3) = 0 // end\n/* a\nb */\n");
    assert_eq!(script.options, options(&[("tolerance_usecs", "5")]));
    assert_eq!(script.events, vec![ev(2, rel(0.0), call("close", vec![int(3)], 0))]);
}

// ---- Errors: where, and what was expected ----

#[test]
fn errors_name_the_place_and_what_was_expected() {
    let cases = [
        (
            "0 socket(..., SOCK_STREAM, IPPROTO_TCP = 3\n",
            "t.pkt:1:40: expected `,` or `)`, found `=`",
        ),
        (
            "socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n",
            "t.pkt:1:1: expected an event: a time (`0`, `+0.1`, `0.1~0.2`, `*`) or a shell command, found `socket`",
        ),
        (
            "+0 < S 0:0(0) <mss 1460>\n",
            "t.pkt:1:15: expected `win N` (an inbound segment must give its window), found `<`",
        ),
        (
            "+0 < S 0:0(0)\n+0 close(3) = 0\n",
            "t.pkt:1:14: expected `win N` (an inbound segment must give its window), found end of line",
        ),
        (
            "+0 > S. 0:0(0) ack 1 <mss 1460,sackOK\n+0 close(3) = 0\n",
            "t.pkt:1:38: expected `,` and another option, or `>` ending the options, found end of line",
        ),
        (
            "+0 > P. 1:1001(999) ack 1\n",
            "t.pkt:1:11: expected the end sequence number 1000 (start 1 + length 999), found `1001`",
        ),
        (
            "+0 > S. 0:0(0) win 70000\n",
            "t.pkt:1:20: expected a window from 0 to 65535, found `70000`",
        ),
        (
            "+0 > S. 0:0(70000)\n",
            "t.pkt:1:13: expected a payload length from 0 to 65535, found `70000`",
        ),
        (
            "+0 > X 0:0(0)\n",
            "t.pkt:1:6: expected TCP flags (letters from `SFRPUEW`, then `.` for ACK; `-` for none), found `X`",
        ),
        ("+0 > SS 0:0(0)\n", "t.pkt:1:6: expected each flag once, found `SS`"),
        (
            "+0 > . 1:1(0) win 10 ack 1\n",
            "t.pkt:1:22: expected the end of the line after the segment (its fields come in the order \
             flags, seq, ack, win, urg, <options>), found `ack`",
        ),
        (
            "+0\nclose(3) = 0\n",
            "t.pkt:1:3: expected a segment (`<` or `>`), a system call or a shell command, found end of line",
        ),
        (
            "+0 close(3) = 0 +0 close(4) = 0\n",
            "t.pkt:1:17: expected the end of the line after the system call, found `+`",
        ),
        (
            "0.1~+0.2 close(3) = 0\n",
            "t.pkt:1:5: expected an absolute time (both ends of an absolute range are absolute), found `+`",
        ),
        (
            "+0.2~+0.1 close(3) = 0\n",
            "t.pkt:1:7: expected a range end no earlier than 0.2, found 0.1 (earlier)",
        ),
        (
            "+.0000001 close(3) = 0\n",
            "t.pkt:1:2: expected a time in seconds (at most 6 decimals), found `.0000001`",
        ),
        (
            "+0 > . 1:1(0) <mss 1460,nop>\n",
            "t.pkt:1:15: expected options padded with `nop` to a multiple of 4 bytes (the data offset counts \
             32-bit words, RFC 9293 §3.1), found 5 bytes",
        ),
        (
            "+0 > . 1:1(0) <sack 1:2 3:4 5:6 7:8 9:10,nop,nop>\n",
            "t.pkt:1:15: expected options that fit in a TCP header's 40 bytes (RFC 9293 §3.1), found 44 bytes",
        ),
        (
            "+0 > . 1:1(0) <mss>\n",
            "t.pkt:1:19: expected an MSS from 0 to 65535, found `>`",
        ),
        (
            "+0 > . 1:1(0) <timestamp 1>\n",
            "t.pkt:1:16: expected a TCP option (`nop`, `eol`, `mss N`, `wscale N`, `sackOK`, `sack L:R ...`, \
             `TS val N ecr N`), found `timestamp`",
        ),
        (
            "+0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now\n+0 close(3) = 0\n",
            "t.pkt:1:56: expected `)` ending the note, found end of line",
        ),
        (
            "+0 write(4, ..., 1.5) = 1\n",
            "t.pkt:1:18: expected an integer (64-bit, decimal or 0x hex), found `1.5`",
        ),
        (
            "+0 write(4, ..., 1000) =\n",
            "t.pkt:1:25: expected a value (an integer, a name, a string, `...`, `[list]` or `{struct}`), \
             found end of file",
        ),
        (
            "+0 close(3)\n",
            "t.pkt:1:12: expected `=` and the expected result, found end of file",
        ),
        (
            "--ip_version=ipv5\n",
            "t.pkt:1:1: expected `--ip_version=ipv4` or `--ip_version=ipv6`, found `ipv5`",
        ),
        (
            "--mss=1\n--mss=2\n",
            "t.pkt:2:1: expected each option once, found `--mss` a second time",
        ),
        (
            "+0 close(3) = 0\n--mss=1\n",
            "t.pkt:2:1: expected an event: a time (`0`, `+0.1`, `0.1~0.2`, `*`) or a shell command, \
             found the option `--mss` (options go before the first event)",
        ),
        (
            "+0 close(3) = 0 /* never closed\n",
            "t.pkt:1:17: expected `*/` closing this comment, found end of file",
        ),
        // Valid packetdrill outside the subset.
        (
            "+0 < [ect0] S 0:0(0) win 1\n",
            "t.pkt:1:6: unsupported: IP header fields such as `[ect0]`, `[ce]`, `(tos 0x2)` or `(flowlabel 1)` \
             (not in oxnet's script subset)",
        ),
        (
            "+0...0.1 accept(3, ..., ...) = 4\n",
            "t.pkt:1:3: unsupported: blocking system calls (`...END` before the call) (not in oxnet's script subset)",
        ),
        (
            "+0 < S 0:0(0) win 1 <FO abcd1234,nop,nop>\n",
            "t.pkt:1:22: unsupported: TCP Fast Open options (`FO`, `FOEXP`) (not in oxnet's script subset)",
        ),
        (
            "+0 %{ print(tcpi_rto) }%\n",
            "t.pkt:1:4: unsupported: embedded code `%{ ... }%` (not in oxnet's script subset)",
        ),
        (
            "+0 < udp (1000)\n",
            "t.pkt:1:6: unsupported: UDP and ICMP packets (not in oxnet's script subset)",
        ),
        (
            "+0 > .5 1:1(0)\n",
            "t.pkt:1:6: unsupported: AccECN flags (`A` and the ACE digits) (not in oxnet's script subset)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_err(text), want, "for {text:?}");
    }
}

#[test]
fn deep_nesting_is_refused_not_recursed_into() {
    let deep = format!("+0 f({}1{}) = 0\n", "[".repeat(100), "]".repeat(100));
    assert_eq!(
        parse_err(&deep),
        "t.pkt:1:38: expected expressions nested at most 32 deep, found `[`"
    );
    let fine = format!("+0 f({}1{}) = 0\n", "[".repeat(31), "]".repeat(31));
    parse_ok(&fine);
}

#[test]
fn error_fields_are_public_and_structured() {
    let error = parse("x.pkt", "+0 > S 0:0(0) win 65536\n").unwrap_err();
    assert_eq!(
        error,
        ScriptError {
            file: "x.pkt".into(),
            line: 1,
            column: 19,
            message: ErrorMessage::Expected {
                expected: "a window from 0 to 65535".into(),
                found: "`65536`".into(),
            },
        }
    );
}

// ---- No input panics; whatever parses prints back the same ----

/// Parses `text`; if it parses, its printed form must parse to the same
/// script, and print the same again. Errors must point into the text.
fn check_any_text(text: &str) -> Result<(), TestCaseError> {
    match parse("p.pkt", text) {
        Ok(script) => {
            let printed = script.to_string();
            let again = parse("printed", &printed);
            prop_assert!(again.is_ok(), "{text:?} printed as {printed:?}: {:?}", again.err());
            let again = again.unwrap();
            prop_assert_eq!(&again.options, &script.options);
            prop_assert_eq!(unlined(&again), unlined(&script));
            prop_assert_eq!(again.to_string(), printed);
        }
        Err(error) => {
            let lines = text.split('\n').count() as u32;
            prop_assert!(error.line >= 1 && error.line <= lines, "{error} in {lines} lines");
            prop_assert!(error.column >= 1);
        }
    }
    Ok(())
}

/// Pieces of scripts, so random sequences get past the first token.
const PIECES: &[&str] = &[
    "+0",
    "+.1",
    "0.5",
    "*",
    "~",
    "+",
    "<",
    ">",
    "S",
    "S.",
    ".",
    "P.",
    "F.",
    "R",
    "-",
    "SEW",
    "0:0(0)",
    "1:1001(1000)",
    "ack",
    "win",
    "urg",
    "1",
    "65535",
    "<...>",
    "<",
    "mss",
    "1460",
    "sackOK",
    "nop",
    "eol",
    "wscale",
    "7",
    "sack",
    "1:2",
    "TS",
    "val",
    "ecr",
    ",",
    "socket",
    "close",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "=",
    "|",
    "...",
    "fd",
    "POLLIN",
    "-1",
    "0x10",
    "EAGAIN",
    "\"s\"",
    "`cmd`",
    "--opt=1",
    "--ip_version=ipv6",
    "\n",
    "// c\n",
    "/* c */",
    "%{",
    "\\",
    "\"",
];

fn mutate(text: &str, edits: &[(usize, u8, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, op, c) in edits {
        let at = at % (chars.len() + 1);
        match op % 4 {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 => chars.insert(at, c),
            2 if at < chars.len() => chars[at] = c,
            _ => {
                // Duplicate a short run, as a careless paste would.
                let end = (at + 8).min(chars.len());
                let run: Vec<char> = chars[at..end].to_vec();
                for (i, c) in run.into_iter().enumerate() {
                    chars.insert(end + i, c);
                }
            }
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #[test]
    fn random_text_never_panics(text in any::<String>()) {
        check_any_text(&text)?;
    }

    #[test]
    fn random_printable_text_never_panics(text in "[ -~\n]{0,300}") {
        check_any_text(&text)?;
    }

    #[test]
    fn random_token_soup_never_panics(picks in proptest::collection::vec(0..PIECES.len(), 0..60)) {
        let text = picks.iter().map(|&i| PIECES[i]).collect::<Vec<_>>().join(" ");
        check_any_text(&text)?;
    }

    #[test]
    fn mutated_samples_never_panic(
        sample in 0..SAMPLES.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), proptest::char::range(' ', '~')), 1..6),
    ) {
        check_any_text(&mutate(SAMPLES[sample].1, &edits))?;
    }
}
