//! conf/echo-tls.click (StackHost + TCPEpollServer + TLSServer, ClickNF
//! Figure 6) on a TAP device in a namespace made here, with a key made by
//! `oxnet cert`. Clients: Debian's `openssl s_client` with TLS 1.2 and
//! with TLS 1.3 (the certificate verified against the CA file), a rustls
//! client of this test's own with 1000 connections (TLS 1.3 and 1.2,
//! sessions resumed), and a client that sends an HTTP request instead of
//! a ClientHello. Every byte comes back unchanged, and the counters are
//! exact. And `oxnet cert` itself, read back by OpenSSL (no namespace).

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, repo, value, wait_for_link};
use oxnet_apps::tls::rustls;
use rustls::pki_types::pem::PemObject;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

/// oxnet running conf/echo-tls.click in a namespace of its own.
struct Server {
    ns: Netns,
    oxnet: Option<Child>,
    dir: PathBuf,
    addr: SocketAddr,
}

const HANDLERS: &[&str] = &[
    "tls.handshakes",
    "tls.resumed",
    "tls.errors",
    "tls.truncated",
    "tls.connections",
    "tls.drops",
    "tls.plain_in",
    "tls.plain_out",
    "srv.opened",
    "srv.closed",
];

impl Server {
    /// `subnet`: the third byte of 10.X.0.0/24, distinct per test.
    fn start(prefix: &str, subnet: u8) -> Server {
        let ns = Netns::new(prefix);
        let tap = netns::unique("ttl");
        let dir = std::env::temp_dir().join(format!("oxnet-tls-echo-{}", ns.name));
        let made = Command::new(OXNET)
            .args(["cert", "--out"])
            .arg(&dir)
            .args(["--name", "localhost"])
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "oxnet cert: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let mut args: Vec<String> = vec![
            "90".into(),
            OXNET.into(),
            "run".into(),
            repo().join("conf/echo-tls.click").to_string_lossy().into_owned(),
            format!("DEV=tap:{tap},ip=10.{subnet}.0.1/24"),
            format!("IP=10.{subnet}.0.2"),
            "PORT=443".into(),
            format!("CERT={}", dir.join("cert.pem").display()),
            format!("KEY={}", dir.join("key.pem").display()),
        ];
        for h in HANDLERS {
            args.push("-h".into());
            args.push(h.to_string());
        }
        let mut oxnet = ns
            .command("timeout")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_link(&ns, &tap, &mut oxnet);
        Server {
            addr: format!("10.{subnet}.0.2:443").parse().unwrap(),
            ns,
            oxnet: Some(oxnet),
            dir,
        }
    }

    fn cert(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    /// Stops oxnet and returns its -h output (stdout, and all of it).
    fn stop(&mut self) -> (String, String) {
        // The last Close may still be on its way (the FIN's ACK).
        std::thread::sleep(Duration::from_millis(300));
        let oxnet = self.oxnet.take().unwrap();
        // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
        unsafe { libc::kill(oxnet.id() as libc::pid_t, libc::SIGINT) };
        let out = oxnet.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        (stdout, all)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut oxnet) = self.oxnet.take() {
            let _ = oxnet.kill();
            let _ = oxnet.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Moves the calling thread into namespace `ns` (setns(2) acts on the
/// thread), so that its sockets are the namespace's.
fn enter(ns: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    // SAFETY: a valid descriptor of a network namespace; only this
    // thread's namespace changes.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// `openssl s_client` with `version` (`-tls1_2`, `-tls1_3`): `data` in,
/// the same length read back.
fn s_client(ns: &Netns, addr: SocketAddr, version: &str, ca: &Path, data: &[u8]) -> Vec<u8> {
    // -quiet: no session report on stdout, no commands read from the
    // input (a line starting with Q or R would be one), and the input's
    // end does not end the connection: it is ended below, once every
    // byte is back.
    let mut child = ns
        .command("timeout")
        .args([
            "30",
            "openssl",
            "s_client",
            "-quiet",
            version,
            "-verify_return_error",
            "-CAfile",
        ])
        .arg(ca)
        .args(["-connect", &addr.to_string(), "-servername", "localhost"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl (scripts/install-deps.sh installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let input = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        stdin
    });
    let mut back = Vec::with_capacity(data.len());
    let mut chunk = [0u8; 16384];
    while back.len() < data.len() {
        match stdout.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => back.extend_from_slice(&chunk[..n]),
        }
    }
    // SAFETY: our own child (`timeout`, which passes SIGTERM on), by pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    drop(writer.join());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        back.len(),
        data.len(),
        "s_client {version}: bytes back; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    back
}

#[test]
fn openssl_s_client_echoes_byte_exact_over_tls12_and_tls13_and_garbage_gets_an_alert() {
    if !netns::available() {
        return;
    }
    let mut server = Server::start("tle", 85);
    let mut sent = 0u64;
    for (i, version) in ["-tls1_2", "-tls1_3"].iter().enumerate() {
        let data = random_bytes(200_000, 40 + i as u64);
        let back = s_client(&server.ns, server.addr, version, &server.cert(), &data);
        assert!(back == data, "s_client {version}: the bytes came back changed");
        sent += data.len() as u64;
    }

    // An HTTP request instead of a ClientHello: a fatal alert record
    // (RFC 8446 §6: type 21, level 2), then the end of the connection.
    let ns = server.ns.name.clone();
    let addr = server.addr;
    let answer = std::thread::spawn(move || {
        enter(&ns);
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        sock.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 512];
        while let Ok(n @ 1..) = sock.read(&mut chunk) {
            answer.extend_from_slice(&chunk[..n]);
        }
        answer
    })
    .join()
    .unwrap();
    assert_eq!(answer.len(), 7, "one alert record: {answer:?}");
    assert_eq!(
        (answer[0], answer[1], answer[3], answer[4], answer[5]),
        (0x15, 3, 0, 2, 2),
        "{answer:?}"
    );

    let (stdout, all) = server.stop();
    assert_eq!(value(&stdout, "tls.handshakes"), 2, "{all}");
    assert_eq!(value(&stdout, "tls.errors"), 1, "{all}");
    assert_eq!(value(&stdout, "tls.drops"), 0, "{all}");
    assert_eq!(
        (value(&stdout, "tls.plain_in"), value(&stdout, "tls.plain_out")),
        (sent, sent),
        "{all}"
    );
    assert_eq!(
        (value(&stdout, "srv.opened"), value(&stdout, "srv.closed")),
        (3, 3),
        "{all}"
    );
    assert_eq!(value(&stdout, "tls.connections"), 0, "{all}");
}

/// One connection of the rustls client: handshake, `data` echoed,
/// close_notify both ways.
fn rustls_echo(config: &Arc<rustls::ClientConfig>, addr: SocketAddr, data: &[u8]) -> Result<(), String> {
    let sock = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ClientConnection::new(config.clone(), "localhost".try_into().unwrap()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(data).map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; data.len()];
    tls.read_exact(&mut back).map_err(|e| format!("read: {e}"))?;
    if back != data {
        return Err("the bytes came back changed".into());
    }
    tls.conn.send_close_notify();
    tls.flush().map_err(|e| format!("close_notify: {e}"))?;
    // The echo answers close_notify with its own: a clean end (Ok(0)).
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest).map_err(|e| format!("end: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the echo", rest.len()));
    }
    Ok(())
}

#[test]
fn a_rustls_client_echoes_over_1000_connections_with_resumed_sessions() {
    if !netns::available() {
        return;
    }
    let mut server = Server::start("tlr", 86);
    let pem = std::fs::read(server.cert()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = |version: &'static rustls::SupportedProtocolVersion| {
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth(),
        )
    };
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 250;
    const SIZE: usize = 4096;
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let config = config(if t % 2 == 0 {
                &rustls::version::TLS13
            } else {
                &rustls::version::TLS12
            });
            let ns = server.ns.name.clone();
            let addr = server.addr;
            std::thread::spawn(move || {
                enter(&ns);
                for i in 0..PER_THREAD {
                    let data = random_bytes(SIZE, t * 10_000 + i + 1);
                    if let Err(e) = rustls_echo(&config, addr, &data) {
                        panic!("thread {t}, connection {i}: {e}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = started.elapsed();
    let (stdout, all) = server.stop();
    let n = THREADS * PER_THREAD;
    eprintln!("{n} TLS connections in {elapsed:?}");
    assert_eq!(value(&stdout, "tls.handshakes"), n, "{all}");
    // Every connection after a thread's first resumes its session (a
    // TLS 1.3 ticket, a TLS 1.2 ticket).
    assert_eq!(value(&stdout, "tls.resumed"), n - THREADS, "{all}");
    assert_eq!(value(&stdout, "tls.errors"), 0, "{all}");
    assert_eq!(
        value(&stdout, "tls.truncated"),
        0,
        "every client sent close_notify: {all}"
    );
    let bytes = n * SIZE as u64;
    assert_eq!(
        (value(&stdout, "tls.plain_in"), value(&stdout, "tls.plain_out")),
        (bytes, bytes),
        "{all}"
    );
    assert_eq!(
        (value(&stdout, "srv.opened"), value(&stdout, "srv.closed")),
        (n, n),
        "{all}"
    );
    assert_eq!(value(&stdout, "tls.connections"), 0, "{all}");
}

#[test]
fn oxnet_cert_writes_a_certificate_for_each_name_and_a_private_key() {
    let dir = std::env::temp_dir().join(format!("oxnet-cert-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(OXNET)
        .args(["cert", "--out"])
        .arg(&dir)
        .args(["--name", "localhost", "--name", "10.0.0.2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    assert_eq!(printed, format!("{}\n{}\n", cert.display(), key.display()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key is its owner's only");
    // OpenSSL reads both and finds the names and the key type.
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl (scripts/install-deps.sh installs it)");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("DNS:localhost, IP Address:10.0.0.2"), "{text}");
    assert!(text.contains("id-ecPublicKey") && text.contains("prime256v1"), "{text}");
    let check = Command::new("openssl")
        .args(["pkey", "-noout", "-in"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(check.success());
    let _ = std::fs::remove_dir_all(&dir);
}
