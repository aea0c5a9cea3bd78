//! ControlSocket: the router's handlers over a socket, speaking Click's
//! ControlSocket text protocol (Click's `elements/userlevel/controlsocket.hh`
//! documents it), so that Click's tools and `oxnet handler` can read and
//! write handlers while the router runs.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | ControlSocket(TYPE, PORT_OR_PATH) | 0/0 | - | accepts connections on TCP port PORT of 127.0.0.1 (`TCP`) or on a Unix socket PATH (`UNIX`), answers their commands |
//!
//! The protocol: on connecting, the server sends `Click::ControlSocket/1.3`.
//! Commands, one per line: `READ HANDLER [PARAMS]`, `WRITE HANDLER
//! [VALUE]`, `WRITEDATA HANDLER N` (N bytes of value follow),
//! `CHECKREAD HANDLER`, `CHECKWRITE HANDLER`, `QUIT`. `HANDLER` is
//! `ELEMENT.NAME` or a global handler: `version`, `list` (the number of
//! elements, then their names), `classes`, `stop` (write: stops the
//! router, every graph thread of it with `-j`). Every answer starts with a three-digit code: 200 OK (a read
//! adds `DATA N` and N bytes), 500 syntax error, 501 unimplemented
//! command, 510 no such element, 511 no such handler, 520 the handler
//! failed (its message follows), 530 permission denied (not readable /
//! not writable).
//!
//! TCP sockets listen on the loopback address only (Click's LOCALHOST
//! true): handlers can reconfigure the router, so they are not offered
//! to the network. A Unix socket file is removed when the router stops.
//! The element polls its sockets from a timer every millisecond; the
//! data path pays nothing.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

/// Poll interval of the sockets, microseconds.
const POLL_US: u64 = 1000;
/// The greeting, Click's protocol version.
const GREETING: &str = "Click::ControlSocket/1.3\r\n";
/// Longest command line accepted (a longer one is a syntax error and the
/// connection is closed).
const MAX_LINE: usize = 65536;

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        // Answers are short; the socket is switched to blocking for the
        // write so that an answer is never cut.
        match self {
            Stream::Tcp(s) => {
                s.set_nonblocking(false)?;
                let r = s.write_all(data);
                s.set_nonblocking(true)?;
                r
            }
            Stream::Unix(s) => {
                s.set_nonblocking(false)?;
                let r = s.write_all(data);
                s.set_nonblocking(true)?;
                r
            }
        }
    }
}

struct Conn {
    stream: Stream,
    input: Vec<u8>,
    closed: bool,
}

/// The element.
#[derive(Default)]
pub struct ControlSocket {
    kind: String,
    address: String,
    listener: Option<Listener>,
    conns: Vec<Conn>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if let Some(Listener::Unix(_, path)) = &self.listener {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Element for ControlSocket {
    fn class_name(&self) -> &'static str {
        "ControlSocket"
    }
    fn port_count(&self) -> &'static str {
        "0/0"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let kind = args::string(&a.required("TYPE")?)?.to_ascii_uppercase();
        let address = args::string(&a.required(if kind == "UNIX" { "FILENAME" } else { "PORT" })?)?;
        if let Some(v) = a.keyword("LOCALHOST") {
            if !args::boolean(&v)? {
                return Err("LOCALHOST false is refused: oxnet's control socket listens on 127.0.0.1 only".into());
            }
        }
        match kind.as_str() {
            "TCP" => {
                address
                    .parse::<u16>()
                    .map_err(|_| format!("'{address}' is not a TCP port"))?;
            }
            "UNIX" => {}
            other => return Err(format!("TYPE '{other}': expected TCP or UNIX")),
        }
        (self.kind, self.address) = (kind, address);
        Ok(())
    }
    fn initialize(&mut self, _ports: &Ports) -> Result<(), String> {
        let listener = if self.kind == "TCP" {
            let l = TcpListener::bind(("127.0.0.1", self.address.parse::<u16>().unwrap_or(0)))
                .map_err(|e| format!("TCP port {}: {e}", self.address))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            Listener::Tcp(l)
        } else {
            let path = PathBuf::from(&self.address);
            // A socket file left by a router that is gone is replaced; a
            // live one is not taken over.
            if path.exists() {
                if UnixStream::connect(&path).is_ok() {
                    return Err(format!("{}: another router is listening there", path.display()));
                }
                let _ = std::fs::remove_file(&path);
            }
            let l = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            Listener::Unix(l, path)
        };
        self.listener = Some(listener);
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        ctx.schedule_after_us(POLL_US);
    }
    fn run_timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        self.poll(ctx);
        ctx.schedule_after_us(POLL_US);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("connections", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "connections").then(|| self.conns.len().to_string())
    }
}

impl ControlSocket {
    fn poll(&mut self, ctx: &mut Ctx<'_>) {
        // New connections.
        loop {
            let accepted = match &self.listener {
                Some(Listener::Tcp(l)) => l.accept().map(|(s, _)| s.set_nonblocking(true).map(|_| Stream::Tcp(s))),
                Some(Listener::Unix(l, _)) => l
                    .accept()
                    .map(|(s, _)| s.set_nonblocking(true).map(|_| Stream::Unix(s))),
                None => return,
            };
            match accepted {
                Ok(Ok(mut stream)) => {
                    if stream.write_all(GREETING.as_bytes()).is_ok() {
                        self.conns.push(Conn {
                            stream,
                            input: Vec::new(),
                            closed: false,
                        });
                    }
                }
                Ok(Err(_)) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => break,
            }
        }
        // Commands on each connection.
        let mut conns = std::mem::take(&mut self.conns);
        for conn in conns.iter_mut() {
            let mut buf = [0u8; 4096];
            loop {
                match conn.stream.read(&mut buf) {
                    Ok(0) => {
                        conn.closed = true;
                        break;
                    }
                    Ok(n) => conn.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        conn.closed = true;
                        break;
                    }
                }
            }
            while !conn.closed {
                match next_command(&mut conn.input) {
                    Next::Incomplete => {
                        if conn.input.len() > MAX_LINE {
                            let _ = conn.stream.write_all(b"500 Line too long\r\n");
                            conn.closed = true;
                        }
                        break;
                    }
                    Next::Command(line, data) => {
                        let (answer, quit) = answer(&line, data, ctx);
                        if conn.stream.write_all(&answer).is_err() || quit {
                            conn.closed = true;
                        }
                    }
                }
            }
        }
        conns.retain(|c| !c.closed);
        self.conns = conns;
    }
}

enum Next {
    Incomplete,
    /// A command line and, for WRITEDATA, its data.
    Command(String, Option<Vec<u8>>),
}

/// Takes one complete command off the front of `input`.
fn next_command(input: &mut Vec<u8>) -> Next {
    let Some(end) = input.iter().position(|&b| b == b'\n') else {
        return Next::Incomplete;
    };
    let line = String::from_utf8_lossy(&input[..end])
        .trim_end_matches('\r')
        .to_string();
    let mut words = line.split_whitespace();
    if words.next().is_some_and(|w| w.eq_ignore_ascii_case("WRITEDATA")) {
        let _handler = words.next();
        let n: usize = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        if input.len() < end + 1 + n {
            return Next::Incomplete;
        }
        let data = input[end + 1..end + 1 + n].to_vec();
        input.drain(..end + 1 + n);
        return Next::Command(line, Some(data));
    }
    input.drain(..=end);
    Next::Command(line, None)
}

fn status(code: u16, text: &str) -> Vec<u8> {
    // Multi-line messages: every line but the last has `-` after the code.
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let sep = if i + 1 == lines.len() { ' ' } else { '-' };
        out += &format!("{code}{sep}{l}\r\n");
    }
    if lines.is_empty() {
        out += &format!("{code} \r\n");
    }
    out.into_bytes()
}

/// The error code for a handler call that failed with `msg`.
fn error_code(spec: &str, msg: &str, ctx: &Ctx<'_>) -> u16 {
    match spec.split_once('.') {
        Some((element, _)) if !ctx.element_names().iter().any(|n| n == element) => 510,
        _ if msg.starts_with("no '") && msg.ends_with("handler") => 511,
        _ => 520,
    }
}

/// Answers one command; true: close the connection after the answer.
fn answer(line: &str, data: Option<Vec<u8>>, ctx: &mut Ctx<'_>) -> (Vec<u8>, bool) {
    let trimmed = line.trim_start();
    let (cmd, rest) = trimmed.split_once(char::is_whitespace).unwrap_or((trimmed, ""));
    let rest = rest.trim_start();
    let (handler, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    match cmd.to_ascii_uppercase().as_str() {
        "" => (Vec::new(), false),
        "QUIT" => (status(200, "Goodbye!"), true),
        "READ" | "CHECKREAD" => {
            if handler.is_empty() {
                return (status(500, "Syntax error: READ needs a handler name"), false);
            }
            match read(handler, arg, ctx) {
                Ok(value) if cmd.eq_ignore_ascii_case("READ") => {
                    let mut out = status(200, &format!("Read handler '{handler}' OK"));
                    out.extend_from_slice(format!("DATA {}\r\n", value.len()).as_bytes());
                    out.extend_from_slice(value.as_bytes());
                    (out, false)
                }
                Ok(_) => (status(200, &format!("Read handler '{handler}' OK")), false),
                Err((code, msg)) => (status(code, &msg), false),
            }
        }
        "WRITE" | "WRITEDATA" | "CHECKWRITE" => {
            if handler.is_empty() {
                return (status(500, &format!("Syntax error: {cmd} needs a handler name")), false);
            }
            if cmd.eq_ignore_ascii_case("CHECKWRITE") {
                return match writable(handler, ctx) {
                    Ok(()) => (status(200, &format!("Write handler '{handler}' OK")), false),
                    Err((code, msg)) => (status(code, &msg), false),
                };
            }
            let value = match data {
                Some(d) => String::from_utf8_lossy(&d).into_owned(),
                None => arg.to_string(),
            };
            match write(handler, &value, ctx) {
                Ok(()) => (status(200, &format!("Write handler '{handler}' OK")), false),
                Err((code, msg)) => (status(code, &msg), false),
            }
        }
        "LLRPC" => (status(501, "Unimplemented command 'LLRPC'"), false),
        other => (status(501, &format!("Unimplemented command '{other}'")), false),
    }
}

fn read(handler: &str, params: &str, ctx: &mut Ctx<'_>) -> Result<String, (u16, String)> {
    if !handler.contains('.') {
        return match handler {
            "version" => Ok(format!("{}\n", env!("CARGO_PKG_VERSION"))),
            "list" => {
                let names = ctx.element_names();
                let mut out = format!("{}\n", names.len());
                for n in names {
                    out += n;
                    out.push('\n');
                }
                Ok(out)
            }
            "classes" => Ok(super::classes().iter().map(|c| format!("{c}\n")).collect()),
            "stop" => Err((530, format!("Handler '{handler}' is not readable"))),
            _ => Err((511, format!("No handler named '{handler}'"))),
        };
    }
    match ctx.read_handler(handler, params) {
        Ok(mut v) => {
            if !v.is_empty() && !v.ends_with('\n') {
                v.push('\n');
            }
            Ok(v)
        }
        Err(msg) => Err((error_code(handler, &msg, ctx), msg)),
    }
}

fn writable(handler: &str, ctx: &mut Ctx<'_>) -> Result<(), (u16, String)> {
    if !handler.contains('.') {
        return match handler {
            "stop" => Ok(()),
            "version" | "list" | "classes" => Err((530, format!("Handler '{handler}' is not writable"))),
            _ => Err((511, format!("No handler named '{handler}'"))),
        };
    }
    // The element's `handlers` handler lists each name with its r/w flags.
    let (element, name) = handler.split_once('.').unwrap_or((handler, ""));
    let list = ctx
        .read_handler(&format!("{element}.handlers"), "")
        .map_err(|msg| (error_code(handler, &msg, ctx), msg))?;
    match list
        .lines()
        .find_map(|l| l.split_once('\t').filter(|(n, _)| *n == name))
    {
        Some((_, flags)) if flags.contains('w') => Ok(()),
        Some(_) => Err((530, format!("Handler '{handler}' is not writable"))),
        None => Err((511, format!("No handler named '{handler}'"))),
    }
}

fn write(handler: &str, value: &str, ctx: &mut Ctx<'_>) -> Result<(), (u16, String)> {
    if !handler.contains('.') {
        return match handler {
            "stop" => {
                crate::router::STOP_ALL.store(true, std::sync::atomic::Ordering::Relaxed);
                ctx.stop_now();
                Ok(())
            }
            "version" | "list" | "classes" => Err((530, format!("Handler '{handler}' is not writable"))),
            _ => Err((511, format!("No handler named '{handler}'"))),
        };
    }
    writable(handler, ctx)?;
    ctx.write_handler(handler, value.trim_end_matches(['\r', '\n']))
        .map_err(|msg| (error_code(handler, &msg, ctx), msg))
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["ControlSocket"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    (class == "ControlSocket").then(|| Box::<ControlSocket>::default() as Box<dyn Element>)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_cut_at_line_ends_and_writedata_takes_its_bytes() {
        let mut input = b"READ a.count\r\nWRITEDATA b.x 3\nabcQUIT\n".to_vec();
        match next_command(&mut input) {
            Next::Command(l, None) => assert_eq!(l, "READ a.count"),
            _ => panic!("READ"),
        }
        match next_command(&mut input) {
            Next::Command(l, Some(d)) => assert_eq!((l.as_str(), d.as_slice()), ("WRITEDATA b.x 3", &b"abc"[..])),
            _ => panic!("WRITEDATA"),
        }
        match next_command(&mut input) {
            Next::Command(l, None) => assert_eq!(l, "QUIT"),
            _ => panic!("QUIT"),
        }
        assert!(matches!(next_command(&mut input), Next::Incomplete));
        let mut partial = b"WRITEDATA b.x 10\nabc".to_vec();
        assert!(
            matches!(next_command(&mut partial), Next::Incomplete),
            "waits for the data"
        );
    }

    #[test]
    fn multi_line_messages_continue_with_a_dash() {
        assert_eq!(status(520, "one\ntwo"), b"520-one\r\n520 two\r\n");
        assert_eq!(status(200, "OK"), b"200 OK\r\n");
    }
}
