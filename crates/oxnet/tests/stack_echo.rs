//! oxnet's TCP/IP stack against Linux (issue 11): the shipped
//! conf/echo.click on a TAP device in a namespace made here, and Linux's
//! socat as the client, over IPv4 and IPv6, TCP and UDP; random bytes must come back
//! byte for byte, also with several connections at once and with 3 % of
//! the frames oxnet receives dropped (its RandomSample element, switched
//! on through the control socket: this kernel has no tc netem), so that
//! both sides' loss recovery runs.

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, repo, socat_echo, value, wait_for_link};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// socat from namespace `ns` to `target`: what came back. UDP has no
/// close, so socat waits only briefly after its input ends.
fn socat(ns: &str, target: &str, data: &[u8]) -> Vec<u8> {
    socat_echo(ns, target, data, if target.starts_with("UDP") { 1 } else { 10 })
}

#[test]
fn linux_socat_gets_its_bytes_back_from_the_oxnet_echo_server_over_ipv4_and_ipv6() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("se");
    let tap = netns::unique("te");
    let config = repo().join("conf/echo.click");
    let socket = std::env::temp_dir().join(format!("{}.sock", netns::unique("ctl")));
    let mut oxnet = ns
        .command("timeout")
        .args([
            "120",
            OXNET,
            "run",
            config.to_str().unwrap(),
            &format!("DEV=tap:{tap},ip=10.79.0.1/24"),
            "IP=10.79.0.2",
            "IP6=fd00:79::2",
            "-h",
            "echo.connections",
            "-h",
            "echo.bytes",
            "-h",
            "echo.errors",
            "-h",
            "tcp/listen.syns",
            "-h",
            "loss.drops",
            "-h",
            "uecho.datagrams",
            "-u",
            socket.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_link(&ns, &tap, &mut oxnet);
    ns.ip(&["-6", "addr", "add", "fd00:79::1/64", "dev", &tap, "nodad"]);
    let mut sent = 0usize;
    let mut connections = 0u64;

    // IPv4 and IPv6, 300 kB each (many segments, window updates).
    for (i, target) in ["TCP:10.79.0.2:7", "TCP6:[fd00:79::2]:7"].iter().enumerate() {
        let data = random_bytes(300_000, 7 + i as u64);
        let back = socat(&ns.name, target, &data);
        assert_eq!(back.len(), data.len(), "{target}: bytes back");
        assert!(back == data, "{target}: the bytes came back changed");
        sent += data.len();
        connections += 1;
    }

    // UDP, both families: one datagram each, back as it went.
    for (i, target) in ["UDP:10.79.0.2:7", "UDP6:[fd00:79::2]:7"].iter().enumerate() {
        let data = format!("datagram {i} for the UDP echo\n").into_bytes();
        let back = socat(&ns.name, target, &data);
        assert_eq!(back, data, "{target}");
    }

    // Eight connections at once.
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let data = random_bytes(40_000, 100 + i);
            let name = ns.name.clone();
            std::thread::spawn(move || {
                let back = socat(&name, "TCP:10.79.0.2:7", &data);
                (data, back)
            })
        })
        .collect();
    for c in clients {
        let (data, back) = c.join().unwrap();
        assert!(back == data, "a concurrent connection's bytes came back changed");
        sent += data.len();
        connections += 1;
    }

    // 3 % of what oxnet receives lost from now on.
    let set = Command::new(OXNET)
        .args([
            "handler",
            "--socket",
            socket.to_str().unwrap(),
            "loss.drop_prob",
            "0.03",
        ])
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "oxnet handler: {}",
        String::from_utf8_lossy(&set.stderr)
    );
    let data = random_bytes(200_000, 999);
    let back = socat(&ns.name, "TCP:10.79.0.2:7", &data);
    assert!(
        back == data,
        "with loss the bytes came back changed ({} of {})",
        back.len(),
        data.len()
    );
    sent += data.len();
    connections += 1;

    // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
    unsafe { libc::kill(oxnet.id() as libc::pid_t, libc::SIGINT) };
    let out = oxnet.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(value(&stdout, "echo.connections"), connections, "{stdout}{stderr}");
    assert_eq!(
        value(&stdout, "echo.bytes"),
        sent as u64,
        "every byte echoed exactly once"
    );
    assert_eq!(value(&stdout, "echo.errors"), 0, "{stdout}{stderr}");
    assert!(value(&stdout, "tcp/listen.syns") >= connections);
    assert!(
        value(&stdout, "loss.drops") > 0,
        "the loss phase lost nothing: {stdout}"
    );
    assert_eq!(value(&stdout, "uecho.datagrams"), 2, "{stdout}");
    let _ = std::fs::remove_file(&socket);
    drop(ns);
}

#[test]
fn the_oxnet_echo_client_gets_its_bytes_back_from_linux_socat_over_ipv4_and_ipv6() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("sc");
    let tap = netns::unique("tc");
    // Linux's side: socat echoing on port 7007 (IPv6 socket, IPv4 mapped).
    let mut server = ns
        .command("timeout")
        .args(["60", "socat", "TCP6-LISTEN:7007,reuseaddr,fork,ipv6only=0", "PIPE"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !String::from_utf8_lossy(&ns.run("ss", &["-ltn"]).stdout).contains(":7007") {
        assert!(start.elapsed() < Duration::from_secs(10), "socat did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let config = repo().join("conf/echo-client.click");
    for (dst, extra) in [("10.82.0.1", None), ("fd00:82::1", Some("fd00:82::2"))] {
        let mut args = vec![
            "60".to_string(),
            OXNET.to_string(),
            "run".to_string(),
            config.to_str().unwrap().to_string(),
            format!("DEV=tap:{tap},ip=10.82.0.1/24"),
            "IP=10.82.0.2".to_string(),
            format!("DST={dst}"),
            "PORT=7007".to_string(),
            "CONNECTIONS=6".to_string(),
            "BYTES=150000".to_string(),
        ];
        // The client's source, of DST's family.
        args.push(format!("SRC={}", extra.unwrap_or("10.82.0.2")));
        if let Some(ours) = extra {
            args.push(format!("IP6={ours}"));
        }
        for h in ["cli.done", "cli.failed", "cli.bytes", "cli.errors"] {
            args.push("-h".into());
            args.push(h.into());
        }
        let mut client = ns
            .command("timeout")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if extra.is_some() {
            // The kernel side's IPv6 address, once oxnet made the TAP.
            wait_for_link(&ns, &tap, &mut client);
            ns.ip(&["-6", "addr", "add", "fd00:82::1/64", "dev", &tap, "nodad"]);
        }
        let out = client.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{dst}: {stdout}{stderr}");
        assert_eq!(value(&stdout, "cli.failed"), 0, "{dst}: {stdout}");
        assert_eq!(value(&stdout, "cli.done"), 6, "{dst}: {stdout}");
        assert_eq!(value(&stdout, "cli.bytes"), 6 * 150_000, "{dst}: {stdout}");
    }
    // SAFETY: our own child (`timeout`), by pid.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let _ = server.wait();
    drop(ns);
}
