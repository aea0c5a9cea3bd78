//! conf/https-cache.click: the HTTP cache with TLSServer wired in front
//! (issue 12 item 4, "HTTPS through TLSServer"), on a TAP device in a
//! namespace made here, a certificate from `oxnet cert`. curl verifies
//! the certificate against it and gets a 100 kB file byte for byte over
//! TLS 1.3 and TLS 1.2 (keep-alive: two requests on one connection),
//! then a 304 for its ETag; openssl s_client with HTTP/1.1 by hand gets
//! the same bytes; a plain-text request to the TLS port is refused with
//! an alert and ends. The cache and TLS counters are exact.

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, run_oxnet, stop_oxnet, value, wait_for_link};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");
const ADDR: &str = "10.88.0.2";

fn curl(ns: &Netns, args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = ns
        .command("timeout")
        .arg("30")
        .arg("curl")
        .args(["-sS"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn curl_and_openssl_get_the_cache_s_files_over_tls() {
    if !netns::available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("oxnet-https-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let body = random_bytes(100_000, 88);
    std::fs::write(www.join("big.bin"), &body).unwrap();
    std::fs::write(www.join("index.html"), b"<p>hello over TLS</p>\n").unwrap();
    let made = Command::new(OXNET)
        .args(["cert", "--out", dir.to_str().unwrap(), "--name", ADDR])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "oxnet cert: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let cert = dir.join("cert.pem");

    let ns = Netns::new("hs");
    let tap = netns::unique("ths");
    let vars = [
        format!("DEV=tap:{tap},ip=10.88.0.1/24"),
        format!("IP={ADDR}"),
        format!("DIR={}", www.display()),
        format!("CERT={}", cert.display()),
        format!("KEY={}", dir.join("key.pem").display()),
    ];
    let handlers = [
        "cache.requests",
        "cache.hits",
        "tls.handshakes",
        "tls.errors",
        "srv.opened",
        "srv.closed",
    ];
    let mut oxnet = run_oxnet(&ns, 60, "conf/https-cache.click", &vars, &handlers);
    wait_for_link(&ns, &tap, &mut oxnet);
    let url = format!("https://{ADDR}/big.bin");
    let cacert = cert.to_str().unwrap();

    let mut requests = 0;
    let mut handshakes = 0;
    for version in ["--tlsv1.3", "--tlsv1.2"] {
        // Two requests on one connection (curl reuses it).
        let max = if version == "--tlsv1.2" {
            &["--tls-max", "1.2"][..]
        } else {
            &[][..]
        };
        let (ok, out, err) = curl(&ns, &[&["--cacert", cacert, version], max, &[&url, &url]].concat());
        assert!(ok, "curl {version}: {err}");
        let mut want = body.clone();
        want.extend_from_slice(&body);
        assert!(out == want, "curl {version}: {} bytes, not the file twice", out.len());
        requests += 2;
        handshakes += 1;
    }
    // The ETag, then a 304 for it.
    let (ok, head, err) = curl(&ns, &["--cacert", cacert, "-I", &url]);
    assert!(ok, "{err}");
    let head = String::from_utf8_lossy(&head).to_string();
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("etag: ").or_else(|| l.strip_prefix("ETag: ")))
        .unwrap_or_else(|| panic!("no ETag in {head}"))
        .trim()
        .to_string();
    let (ok, out, err) = curl(
        &ns,
        &[
            "--cacert",
            cacert,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            &format!("If-None-Match: {etag}"),
            &url,
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(String::from_utf8_lossy(&out), "304");
    requests += 2;
    handshakes += 2;

    // openssl s_client, HTTP/1.1 typed by hand.
    let mut s = ns
        .command("timeout")
        .args([
            "20",
            "openssl",
            "s_client",
            "-quiet",
            "-CAfile",
            cacert,
            "-connect",
            &format!("{ADDR}:443"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    s.stdin
        .take()
        .unwrap()
        .write_all(format!("GET /index.html HTTP/1.1\r\nHost: {ADDR}\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let out = s.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n<p>hello over TLS</p>\n"), "{text}");
    requests += 1;
    handshakes += 1;

    // Plain HTTP to the TLS port: an alert, and the connection ends.
    let (ok, _, _) = curl(&ns, &["--max-time", "5", &format!("http://{ADDR}:443/index.html")]);
    assert!(!ok, "plain HTTP on the TLS port must fail");

    std::thread::sleep(Duration::from_millis(300));
    let (stdout, all) = stop_oxnet(oxnet);
    assert_eq!(value(&stdout, "cache.requests"), requests, "{all}");
    assert_eq!(value(&stdout, "tls.handshakes"), handshakes, "{all}");
    assert_eq!(value(&stdout, "tls.errors"), 1, "the plain request: {all}");
    assert_eq!(value(&stdout, "srv.opened"), handshakes + 1, "{all}");
    assert_eq!(value(&stdout, "srv.closed"), handshakes + 1, "{all}");
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
