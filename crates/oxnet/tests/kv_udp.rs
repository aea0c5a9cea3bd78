//! `oxnet memcached -U PORT`: memcached's UDP protocol (protocol.txt, "UDP
//! protocol") on a TAP device in a namespace made here, a client of
//! Python's sockets (/usr/bin/python3) in the same namespace. Checked:
//! a set over UDP answered STORED in one datagram with the request ID
//! echoed (sequence 0 of 1); a 5000-byte value stored over TCP comes
//! back over UDP in ceil(len / 1392) datagrams, numbered in order, each
//! at most 1400 bytes with the total, reassembled byte for byte; a
//! datagram that is no request (a two-datagram request) gets nothing
//! and is counted.

mod common;

use common::netns::{self, Netns};
use common::stack::{value, wait_for_link};
use std::process::Stdio;

const CLIENT: &str = r#"
import socket, struct, sys
addr = sys.argv[1]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(3)
def ask(rid, payload, seq=0, total=1):
    u.sendto(struct.pack(">HHHH", rid, seq, total, 0) + payload, (addr, 11311))
def answer(rid):
    parts = {}
    count = None
    while count is None or len(parts) < count:
        d, _ = u.recvfrom(65535)
        assert len(d) <= 1400, len(d)
        r, seq, total, res = struct.unpack(">HHHH", d[:8])
        assert r == rid and res == 0, (r, rid, res)
        assert count in (None, total), (count, total)
        count = total
        parts[seq] = d[8:]
    assert sorted(parts) == list(range(count)), sorted(parts)
    return count, b"".join(parts[i] for i in range(count))
ask(7, b"set small 5 0 5\r\nhello\r\n")
n, body = answer(7)
assert (n, body) == (1, b"STORED\r\n"), (n, body)
ask(8, b"get small\r\n")
n, body = answer(8)
assert (n, body) == (1, b"VALUE small 5 5\r\nhello\r\nEND\r\n"), (n, body)
big = bytes((i * 7 + 1) % 251 for i in range(5000))
t = socket.create_connection((addr, 11311), timeout=3)
t.sendall(b"set big 0 0 5000\r\n" + big + b"\r\n")
assert t.recv(100) == b"STORED\r\n"
ask(9, b"get big\r\n")
n, body = answer(9)
want = b"VALUE big 0 5000\r\n" + big + b"\r\nEND\r\n"
assert body == want, (len(body), len(want))
assert n == -(-len(want) // 1392), n
# A request in two datagrams: memcached ignores it; so must we.
ask(10, b"get small\r\n", seq=0, total=2)
u.settimeout(0.5)
try:
    u.recvfrom(65535)
    sys.exit("an answer to a two-datagram request")
except socket.timeout:
    pass
print("UDP OK", n)
"#;

#[test]
fn memcached_s_udp_protocol_answers_in_numbered_datagrams() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("ku");
    let tap = netns::unique("tku");
    let mut oxnet = ns
        .command("timeout")
        .args(["60", env!("CARGO_BIN_EXE_oxnet"), "memcached"])
        .arg(format!("tap:{tap},ip=10.90.0.1/24"))
        .args(["--ip", "10.90.0.2/24", "-p", "11311", "-U", "11311", "-m", "8", "--"])
        .args([
            "-h",
            "kv.udp_requests",
            "-h",
            "kv.udp_datagrams_out",
            "-h",
            "kv.udp_dropped",
            "-h",
            "kv.cmd_set",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_link(&ns, &tap, &mut oxnet);
    let out = ns
        .command("/usr/bin/python3")
        .args(["-c", CLIENT, "10.90.0.2"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let datagrams: u64 = said
        .trim()
        .strip_prefix("UDP OK ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the UDP client: {said}"));
    let (stdout, all) = common::stack::stop_oxnet(oxnet);
    assert_eq!(value(&stdout, "kv.udp_requests"), 3, "{all}");
    assert_eq!(value(&stdout, "kv.udp_datagrams_out"), 2 + datagrams, "{all}");
    assert_eq!(value(&stdout, "kv.udp_dropped"), 1, "{all}");
    assert_eq!(value(&stdout, "kv.cmd_set"), 2, "one over UDP, one over TCP: {all}");
    drop(ns);
}
