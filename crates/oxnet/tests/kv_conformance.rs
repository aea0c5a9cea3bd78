//! memcached's protocols, command by command (issue 12, item 6, Tests
//! "memcached protocols"): every conformance file in tests/memcached/
//! (one per command, written from memcached's doc/protocol.txt; format
//! in docs/apps.md, "memcached conformance files") is played over TCP
//! against Debian's memcached 1.6 on loopback, which proves the files
//! right, and against `oxnet memcached` on a TAP device in a namespace
//! made here, so that the two answer byte for byte the same except for
//! the placeholders' fields (CAS values, version, stats values).

mod common;

use common::netns::{self, Netns};
use common::stack::{repo, wait_for_link};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");
/// How long a response line may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest response line read (a value or a stats line is far less).
const MAX_LINE: usize = 1 << 20;
/// The most lines one `<...` may skip.
const MAX_SKIPPED: usize = 1000;

/// One line of a conformance file, with its line number.
#[derive(Debug)]
enum Step {
    /// `> TEXT`: send TEXT and CRLF (`>> TEXT`: without the CRLF).
    Send { text: String, crlf: bool },
    /// `< TEXT`: the next response line is TEXT (placeholders allowed).
    Expect(String),
    /// `<...`: skip lines until one matches the next `<` line.
    Skip,
    /// `<closed`: the server closes the connection, sending nothing more.
    Closed,
    /// `reconnect`: a new connection (the captured values stay).
    Reconnect,
    /// `>x BYTES`: send bytes written in hex and "quoted text" (the
    /// binary protocol).
    SendBytes(String),
    /// `<x BYTES`: the next bytes are exactly these (placeholders
    /// `{$NAME:N}`, `{any:N}`).
    ExpectBytes(String),
}

/// A parsed conformance file.
struct Script {
    name: String,
    steps: Vec<(usize, Step)>,
}

fn parse(name: &str, text: &str) -> Script {
    let mut steps = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let step = if line.is_empty() || line.starts_with('#') {
            continue;
        } else if line == ">" {
            // An empty line (an empty data block): `> ` loses its space
            // to editors.
            Step::Send {
                text: String::new(),
                crlf: true,
            }
        } else if line == "<" {
            Step::Expect(String::new())
        } else if let Some(t) = line.strip_prefix(">x ") {
            Step::SendBytes(t.into())
        } else if let Some(t) = line.strip_prefix("<x ") {
            Step::ExpectBytes(t.into())
        } else if let Some(t) = line.strip_prefix(">> ") {
            Step::Send {
                text: t.into(),
                crlf: false,
            }
        } else if let Some(t) = line.strip_prefix("> ") {
            Step::Send {
                text: t.into(),
                crlf: true,
            }
        } else if line == "<..." {
            Step::Skip
        } else if line == "<closed" {
            Step::Closed
        } else if let Some(t) = line.strip_prefix("< ") {
            Step::Expect(t.into())
        } else if line == "reconnect" {
            Step::Reconnect
        } else {
            panic!("{name}:{n}: not a conformance line (> , >> , < , <..., <closed, >x , <x , reconnect, #): {line:?}");
        };
        steps.push((n, step));
    }
    for w in steps.windows(2) {
        if matches!(w[0].1, Step::Skip) {
            assert!(
                matches!(w[1].1, Step::Expect(_)),
                "{name}:{}: `<...` must be followed by a `< ` line",
                w[0].0
            );
        }
    }
    Script {
        name: name.into(),
        steps,
    }
}

/// Turns `\r`, `\n`, `\s` (a space, for the ends of lines), `\\` and
/// `\xHH` into their bytes.
fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b's' => out.push(b' '),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < b.len() => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).expect("ASCII escape");
                    out.push(u8::from_str_radix(hex, 16).expect("\\xHH with two hex digits"));
                    i += 4;
                    continue;
                }
                other => panic!("unknown escape \\{}", other as char),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// A piece of an expected line.
enum Piece {
    Literal(Vec<u8>),
    /// `{num}`: one or more decimal digits.
    Num,
    /// `{any}`: one or more bytes other than a space.
    Any,
    /// `{$NAME}`: digits, captured the first time, equal afterwards.
    Var(String),
}

fn pieces(template: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        let Some(end) = rest[at..].find('}') else { break };
        let inner = &rest[at + 1..at + end];
        let piece = match inner {
            "num" => Piece::Num,
            "any" => Piece::Any,
            v if v.starts_with('$') && v.len() > 1 => Piece::Var(v[1..].into()),
            _ => {
                // Not a placeholder: a literal brace.
                out.push(Piece::Literal(unescape(&rest[..at + 1])));
                rest = &rest[at + 1..];
                continue;
            }
        };
        out.push(Piece::Literal(unescape(&rest[..at])));
        out.push(piece);
        rest = &rest[at + end + 1..];
    }
    out.push(Piece::Literal(unescape(rest)));
    out
}

/// Whether `line` (without its CRLF) matches `template`; captures go
/// into `vars` only on a match.
fn matches(template: &str, line: &[u8], vars: &mut HashMap<String, String>) -> bool {
    let mut new = Vec::new();
    let mut at = 0;
    for piece in pieces(template) {
        let rest = &line[at..];
        match piece {
            Piece::Literal(l) => {
                if !rest.starts_with(&l) {
                    return false;
                }
                at += l.len();
            }
            Piece::Num | Piece::Var(_) | Piece::Any => {
                let n = match piece {
                    Piece::Any => rest.iter().take_while(|&&c| c != b' ').count(),
                    _ => rest.iter().take_while(|c| c.is_ascii_digit()).count(),
                };
                if n == 0 {
                    return false;
                }
                if let Piece::Var(name) = piece {
                    let got = String::from_utf8_lossy(&rest[..n]).into_owned();
                    match vars.get(&name) {
                        Some(v) if *v != got => return false,
                        Some(_) => {}
                        None => new.push((name, got)),
                    }
                }
                at += n;
            }
        }
    }
    if at != line.len() {
        return false;
    }
    vars.extend(new);
    true
}

/// `{$NAME}` in a line to send replaced by its captured value.
fn substitute(text: &str, vars: &HashMap<String, String>, where_: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("{$") {
        let end = rest[at..].find('}').unwrap_or_else(|| panic!("{where_}: unclosed {{$"));
        let name = &rest[at + 2..at + end];
        let v = vars
            .get(name)
            .unwrap_or_else(|| panic!("{where_}: {{${name}}} sent before a `<` line captured it"));
        out.push_str(&rest[..at]);
        out.push_str(v);
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    out
}

/// A piece of a binary line (`>x`, `<x`).
#[derive(Debug, PartialEq)]
enum BinPiece {
    /// Hex digit pairs, or "text" (with the escapes of [`unescape`]).
    Bytes(Vec<u8>),
    /// `{$NAME:N}`: N bytes, captured the first time, equal afterwards
    /// (and sent as captured in `>x` lines).
    Var(String, usize),
    /// `{any:N}`: N bytes of any value.
    Any(usize),
}

fn bin_pieces(template: &str, where_: &str) -> Vec<BinPiece> {
    let mut out = Vec::new();
    let mut rest = template.trim_start();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap_or_else(|| panic!("{where_}: an unclosed \""));
            out.push(BinPiece::Bytes(unescape(&r[..end])));
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').unwrap_or_else(|| panic!("{where_}: an unclosed {{"));
            let (name, len) = r[..end]
                .split_once(':')
                .unwrap_or_else(|| panic!("{where_}: {{$NAME:N}} or {{any:N}}"));
            let len: usize = len
                .parse()
                .unwrap_or_else(|_| panic!("{where_}: {len} is not a length"));
            out.push(match name.strip_prefix('$') {
                Some(n) => BinPiece::Var(n.into(), len),
                None if name == "any" => BinPiece::Any(len),
                None => panic!("{where_}: unknown placeholder {{{name}:...}}"),
            });
            rest = &r[end + 1..];
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let hex = &rest[..end];
            assert!(
                hex.len().is_multiple_of(2) && hex.bytes().all(|c| c.is_ascii_hexdigit()),
                "{where_}: {hex:?} is not hex bytes"
            );
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            out.push(BinPiece::Bytes(bytes));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
    }
    out
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a `>x` line, captured values put in.
fn bin_send(template: &str, vars: &HashMap<String, String>, where_: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in bin_pieces(template, where_) {
        match piece {
            BinPiece::Bytes(b) => out.extend_from_slice(&b),
            BinPiece::Var(name, len) => {
                let hex = vars
                    .get(&name)
                    .unwrap_or_else(|| panic!("{where_}: {{${name}}} sent before a `<x` line captured it"));
                assert_eq!(
                    hex.len(),
                    2 * len,
                    "{where_}: {{${name}:{len}}} was captured with another length"
                );
                out.extend((0..len).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()));
            }
            BinPiece::Any(_) => panic!("{where_}: {{any:N}} cannot be sent"),
        }
    }
    out
}

/// Whether `got` matches a `<x` line; captures go into `vars` only on a
/// match. `got` has the template's length.
fn bin_matches(template: &str, got: &[u8], vars: &mut HashMap<String, String>, where_: &str) -> bool {
    let mut new = Vec::new();
    let mut at = 0;
    for piece in bin_pieces(template, where_) {
        match piece {
            BinPiece::Bytes(b) => {
                if got[at..at + b.len()] != b[..] {
                    return false;
                }
                at += b.len();
            }
            BinPiece::Var(name, len) => {
                let hex = to_hex(&got[at..at + len]);
                match vars.get(&name) {
                    Some(v) if *v != hex => return false,
                    Some(_) => {}
                    None => new.push((name, hex)),
                }
                at += len;
            }
            BinPiece::Any(len) => at += len,
        }
    }
    vars.extend(new);
    true
}

/// How many bytes a `<x` line stands for.
fn bin_len(template: &str, where_: &str) -> usize {
    bin_pieces(template, where_)
        .iter()
        .map(|p| match p {
            BinPiece::Bytes(b) => b.len(),
            BinPiece::Var(_, n) | BinPiece::Any(n) => *n,
        })
        .sum()
}

fn connect(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, READ_TIMEOUT).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    BufReader::new(s)
}

/// The next line without its CRLF; None at the end of the stream.
fn read_line(conn: &mut BufReader<TcpStream>) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    let n = conn
        .by_ref()
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("reading a line: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\r\n") {
        return Err(format!("a line without CRLF: {:?}", String::from_utf8_lossy(&line)));
    }
    line.truncate(line.len() - 2);
    Ok(Some(line))
}

/// Plays `script` against the server at `addr`: Err says where it
/// differed, with the exchange up to there.
fn play(script: &Script, addr: SocketAddr) -> Result<(), String> {
    let mut vars = HashMap::new();
    let mut conn = connect(addr);
    let mut log = String::new();
    let mut skipping = false;
    for (n, step) in &script.steps {
        let here = format!("{}:{n}", script.name);
        let fail = |what: String, log: &str| Err(format!("{here}: {what}\nexchange so far:\n{log}"));
        match step {
            Step::Send { text, crlf } => {
                let text = substitute(text, &vars, &here);
                let mut bytes = unescape(&text);
                if *crlf {
                    bytes.extend_from_slice(b"\r\n");
                }
                log.push_str(&format!("> {text}\n"));
                if let Err(e) = conn.get_mut().write_all(&bytes) {
                    return fail(format!("send: {e}"), &log);
                }
            }
            Step::Skip => skipping = true,
            Step::Expect(template) => {
                let mut skipped = 0;
                loop {
                    let line = match read_line(&mut conn) {
                        Ok(Some(l)) => l,
                        Ok(None) => return fail(format!("expected {template:?}, the server closed"), &log),
                        Err(e) => return fail(format!("expected {template:?}: {e}"), &log),
                    };
                    log.push_str(&format!("< {}\n", String::from_utf8_lossy(&line)));
                    if matches(template, &line, &mut vars) {
                        break;
                    }
                    if !skipping || skipped == MAX_SKIPPED {
                        return fail(
                            format!("expected {template:?}, got {:?}", String::from_utf8_lossy(&line)),
                            &log,
                        );
                    }
                    skipped += 1;
                }
                skipping = false;
            }
            Step::Closed => match read_line(&mut conn) {
                Ok(None) => {}
                Ok(Some(l)) => {
                    return fail(
                        format!("expected the server to close, got {:?}", String::from_utf8_lossy(&l)),
                        &log,
                    )
                }
                Err(e) => return fail(format!("expected the server to close: {e}"), &log),
            },
            Step::Reconnect => {
                conn = connect(addr);
                log.push_str("(reconnected)\n");
            }
            Step::SendBytes(template) => {
                let bytes = bin_send(template, &vars, &here);
                log.push_str(&format!(">x {}\n", to_hex(&bytes)));
                if let Err(e) = conn.get_mut().write_all(&bytes) {
                    return fail(format!("send: {e}"), &log);
                }
            }
            Step::ExpectBytes(template) => {
                let mut got = vec![0u8; bin_len(template, &here)];
                let mut have = 0;
                while have < got.len() {
                    match conn.read(&mut got[have..]) {
                        Ok(0) => break,
                        Ok(n) => have += n,
                        Err(e) => {
                            log.push_str(&format!("<x {} (then: {e})\n", to_hex(&got[..have])));
                            return fail(format!("expected {} bytes, got {have}", got.len()), &log);
                        }
                    }
                }
                log.push_str(&format!("<x {}\n", to_hex(&got[..have])));
                if have < got.len() {
                    return fail(
                        format!("expected {} bytes, the server closed after {have}", got.len()),
                        &log,
                    );
                }
                if !bin_matches(template, &got, &mut vars, &here) {
                    return fail(format!("expected <x {template}"), &log);
                }
            }
        }
    }
    // Nothing more may have come: a reply to a noreply command, a second
    // error line.
    conn.get_mut()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut extra = [0u8; 256];
    match conn.read(&mut extra) {
        Ok(n) if n > 0 => Err(format!(
            "{}: bytes after the last expected line: {:?}\nexchange:\n{log}",
            script.name,
            String::from_utf8_lossy(&extra[..n])
        )),
        _ => Ok(()),
    }
}

/// Every file of tests/memcached/, parsed, in name order.
fn scripts() -> Vec<Script> {
    let dir = repo().join("tests/memcached");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            parse(&format!("tests/memcached/{name}"), &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Plays every file against `addr`, each on its own connection, and
/// panics listing every file that differed.
fn play_all(addr: SocketAddr, server: &str) {
    let scripts = scripts();
    assert!(scripts.len() >= 14, "the conformance files are missing");
    let failed: Vec<String> = scripts.iter().filter_map(|s| play(s, addr).err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} conformance files differ against {server}:\n\n{}",
        failed.len(),
        scripts.len(),
        failed.join("\n\n")
    );
    eprintln!("{} conformance files passed against {server}", scripts.len());
}

/// Waits until something accepts connections at `addr` (at most 10 s).
fn wait_listening(addr: SocketAddr, child: &mut Child, what: &str) {
    let start = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "{what} ended before it listened");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} not listening on {addr} after 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends our child `child` (a `timeout` wrapper, which passes the signal
/// on) by its pid.
fn stop(child: &mut Child, signal: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let _ = child.wait();
}

#[test]
fn the_parser_reads_every_kind_of_line_and_placeholders_capture_and_compare() {
    let s = parse(
        "t",
        "# c\n> gets a\n< VALUE a 0 1 {$c}\n<...\n< END\n>> x\\r\\n\n<closed\nreconnect\n",
    );
    assert_eq!(s.steps.len(), 7);
    let mut vars = HashMap::new();
    assert!(matches("VALUE a 0 1 {$c}", b"VALUE a 0 1 42", &mut vars));
    assert_eq!(vars["c"], "42");
    assert!(
        !matches("VALUE a 0 1 {$c}", b"VALUE a 0 1 43", &mut vars),
        "a captured value must repeat"
    );
    assert!(!matches("STAT pid {num}", b"STAT pid x1", &mut vars));
    assert!(matches("VERSION {any}", b"VERSION 1.6.18", &mut vars));
    assert!(!matches("END", b"END ", &mut vars), "the whole line must match");
    assert_eq!(substitute("cas a 0 0 1 {$c}", &vars, "t"), "cas a 0 0 1 42");
    assert_eq!(unescape("a\\r\\n\\s\\x41"), b"a\r\n A");
    assert_eq!(bin_send("80 0a0000 \"ab\"", &vars, "t"), [0x80, 0x0a, 0, 0, b'a', b'b']);
    assert!(bin_matches("81 {$k:2} {any:1}", &[0x81, 1, 2, 9], &mut vars, "t"));
    assert!(!bin_matches("81 {$k:2} {any:1}", &[0x81, 1, 3, 9], &mut vars, "t"));
    assert_eq!(bin_send("{$k:2}", &vars, "t"), [1, 2]);
    assert_eq!(bin_len("81 {$k:2} {any:1} \"xy\"", "t"), 6);
}

#[test]
fn every_conformance_file_passes_against_debian_memcached() {
    // A free port: the kernel picks one, memcached takes it right after.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut args = vec![
        "30".to_string(),
        "memcached".into(),
        "-p".into(),
        port.to_string(),
        "-U".into(),
        "0".into(),
        "-t".into(),
        "1".into(),
        "-l".into(),
        "127.0.0.1".into(),
    ];
    // memcached refuses to run as root without a user to switch to.
    if unsafe { libc::geteuid() } == 0 {
        args.extend(["-u".into(), "nobody".into()]);
    }
    let mut server = Command::new("timeout")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("memcached (scripts/install-deps.sh installs it)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr, &mut server, "memcached");
    let result = std::panic::catch_unwind(|| play_all(addr, "memcached 1.6"));
    stop(&mut server, libc::SIGTERM);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Runs `f` on a thread inside namespace `ns` (setns(2) moves only the
/// calling thread), so the sockets it makes are the namespace's.
fn in_namespace<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = Path::new("/var/run/netns").join(ns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on an open namespace file; this thread only.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

#[test]
fn the_files_reach_a_server_inside_a_namespace_from_a_thread_moved_there() {
    // The oxnet half's path (setns on a thread) with memcached inside a
    // namespace of its own, on the namespace's loopback: a server the
    // test process could not reach from its own namespace.
    if !netns::available() {
        return;
    }
    let ns = Netns::new("km");
    let mut server = ns
        .command("timeout")
        .args([
            "30",
            "memcached",
            "-p",
            "11211",
            "-U",
            "0",
            "-t",
            "1",
            "-l",
            "127.0.0.1",
            "-u",
            "nobody",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("memcached");
    let addr: SocketAddr = "127.0.0.1:11211".parse().unwrap();
    let name = ns.name.clone();
    let result = std::panic::catch_unwind(|| {
        in_namespace(&name, move || {
            let begin = Instant::now();
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                assert!(
                    begin.elapsed() < Duration::from_secs(10),
                    "memcached not listening in its namespace"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let all = scripts();
            let script = all.iter().find(|s| s.name.ends_with("/get.txt")).unwrap();
            play(script, addr)
        })
    });
    stop(&mut server, libc::SIGTERM);
    drop(ns);
    match result {
        Ok(r) => r.unwrap(),
        Err(e) => std::panic::resume_unwind(e),
    }
}

#[test]
fn every_conformance_file_passes_against_oxnet_memcached() {
    let help = Command::new(OXNET).args(["memcached", "--help"]).output().unwrap();
    if !help.status.success() {
        eprintln!(
            "skipping the oxnet half: this oxnet has no `memcached` command yet \
             (`oxnet memcached --help` failed); the memcached half ran in \
             every_conformance_file_passes_against_debian_memcached"
        );
        return;
    }
    if !netns::available() {
        return;
    }
    let ns = Netns::new("kc");
    let tap = netns::unique("tk");
    let mut oxnet = ns
        .command("timeout")
        .args([
            "60",
            OXNET,
            "memcached",
            &format!("tap:{tap},ip=10.87.0.1/24"),
            "--ip",
            "10.87.0.2/24",
            "-p",
            "11211",
            "-U",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    wait_for_link(&ns, &tap, &mut oxnet);
    let addr: SocketAddr = "10.87.0.2:11211".parse().unwrap();
    let name = ns.name.clone();
    let pid = oxnet.id();
    let result = std::panic::catch_unwind(|| {
        in_namespace(&name, move || {
            let begin = Instant::now();
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                assert!(
                    begin.elapsed() < Duration::from_secs(10),
                    "oxnet memcached (pid {pid}) not listening on {addr} after 10 s"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            play_all(addr, "oxnet memcached")
        })
    });
    stop(&mut oxnet, libc::SIGINT);
    drop(ns);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
