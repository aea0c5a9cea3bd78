//! `oxnet handler`: reads or writes one handler of a running router
//! through its ControlSocket (Click's ControlSocket protocol; see
//! crates/oxnet-graph/src/elements/control.rs), as Click's `click-read`
//! / `click-write` tools do.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Where the router listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// TCP port on 127.0.0.1 (`oxnet run -p PORT`).
    Port(u16),
    /// Unix socket (`oxnet run -u PATH`).
    Unix(String),
}

trait Io: Read + Write {}
impl<T: Read + Write> Io for T {}

/// Calls `handler` (`ELEMENT.NAME` or a global one): a read without
/// `value`, a write with it. Ok: what a read returned (empty for a write).
/// Err: the router's answer (code and message) or why it could not be
/// reached.
pub fn call(endpoint: &Endpoint, handler: &str, value: Option<&str>) -> Result<String, String> {
    let timeout = Some(Duration::from_secs(10));
    let stream: Box<dyn Io> = match endpoint {
        Endpoint::Port(p) => {
            let s = TcpStream::connect(("127.0.0.1", *p)).map_err(|e| {
                format!("cannot reach a router on 127.0.0.1:{p}: {e} (start it with `oxnet run -p {p} ...`)")
            })?;
            s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
            Box::new(s)
        }
        Endpoint::Unix(path) => {
            let s = UnixStream::connect(path).map_err(|e| {
                format!("cannot reach a router at {path}: {e} (start it with `oxnet run -u {path} ...`)")
            })?;
            s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
            Box::new(s)
        }
    };
    let mut reader = BufReader::new(stream);
    let mut greeting = String::new();
    reader
        .read_line(&mut greeting)
        .map_err(|e| format!("no greeting: {e}"))?;
    if !greeting.starts_with("Click::ControlSocket/") {
        return Err(format!(
            "not a Click control socket (it said '{}')",
            greeting.trim_end()
        ));
    }
    let command = match value {
        None => format!("READ {handler}\r\n"),
        Some(v) => format!("WRITEDATA {handler} {}\r\n{v}", v.len()),
    };
    reader
        .get_mut()
        .write_all(command.as_bytes())
        .map_err(|e| format!("sending the command: {e}"))?;
    // The status: lines "CODE-text" continue, "CODE text" ends.
    let mut message = Vec::new();
    let code = loop {
        let mut line = String::new();
        if reader
            .read_line(&mut line)
            .map_err(|e| format!("reading the answer: {e}"))?
            == 0
        {
            return Err("the router closed the connection".into());
        }
        let line = line.trim_end();
        let (code, rest) = line.split_at(line.len().min(3));
        message.push(rest.get(1..).unwrap_or("").to_string());
        if !rest.starts_with('-') {
            break code.to_string();
        }
    };
    if code != "200" {
        return Err(format!("{code} {}", message.join("\n")));
    }
    if value.is_some() {
        let _ = reader.get_mut().write_all(b"QUIT\r\n");
        return Ok(String::new());
    }
    let mut data_line = String::new();
    reader
        .read_line(&mut data_line)
        .map_err(|e| format!("reading the answer: {e}"))?;
    let n: usize = data_line
        .trim_end()
        .strip_prefix("DATA ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("malformed answer '{}'", data_line.trim_end()))?;
    let mut data = vec![0u8; n];
    reader
        .read_exact(&mut data)
        .map_err(|e| format!("reading the value: {e}"))?;
    let _ = reader.get_mut().write_all(b"QUIT\r\n");
    Ok(String::from_utf8_lossy(&data).into_owned())
}
