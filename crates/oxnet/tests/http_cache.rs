//! conf/http-cache-origin.click (StackHost, TCPEpollServer, HTTPCache,
//! TCPEpollClient) on a TAP device in a namespace made here, with DIR
//! files preloaded and nginx as the origin on the kernel's side of the
//! TAP, reached by Debian's clients from the same namespace:
//! - curl: status, Content-Length, Date (IMF-fixdate, now), ETag, and
//!   304 for If-None-Match with that ETag; a GET over IPv6;
//! - ab -k: every request 200 over keep-alive connections, counted exactly;
//! - wrk: a few seconds of keep-alive load, every response 200;
//! - a miss filled from nginx (its body, its Cache-Control, an Age),
//!   then a hit without a second fetch;
//! - a malformed request (400), a huge header (431);
//! - a slowloris client that trickles its head: 408 and closed after
//!   TIMEOUT, while curl is answered meanwhile.
//!
//! The cache's counters are checked against what the clients did.

mod common;

use common::netns::{self, Netns};
use common::stack::{repo, value, wait_for_link};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");
const HOST: &str = "10.85.0.1";
const CACHE: &str = "10.85.0.2";
const ORIGIN_PORT: u16 = 8085;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A directory of its own under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("oxnet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nginx in the foreground (no master, no daemon), its config, logs and
/// temp paths in `dir`, serving `dir/root` on HOST:ORIGIN_PORT with a
/// Cache-Control of its own.
fn nginx(ns: &Netns, dir: &Path) -> Child {
    let conf = format!(
        "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  server {{ listen {HOST}:{ORIGIN_PORT}; root {d}/root; add_header Cache-Control \"max-age=300\"; }}
}}
",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    ns.command("nginx")
        .args([
            "-c",
            dir.join("nginx.conf").to_str().unwrap(),
            "-e",
            dir.join("error.log").to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nginx (scripts/install-deps.sh installs nginx-light)")
}

fn curl(ns: &Netns, args: &[&str]) -> Output {
    ns.run("timeout", &[&["20", "curl", "-sS", "-m", "10"], args].concat())
}

/// The value of header `name` in a head printed by curl -D -.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn wait_for_port(ns: &Netns, addr: &str, port: u16) {
    let start = Instant::now();
    loop {
        let o = ns.run(
            "timeout",
            &["2", "bash", "-c", &format!("exec 3<>/dev/tcp/{addr}/{port}")],
        );
        if o.status.success() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nothing listens on {addr}:{port}: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn curl_ab_wrk_and_bad_clients_against_the_http_cache() {
    if !netns::available() {
        return;
    }
    let www = TempDir::new("http-www");
    std::fs::write(www.0.join("index.html"), b"<h1>oxnet</h1>\n").unwrap();
    std::fs::write(www.0.join("1k.bin"), vec![b'x'; 1024]).unwrap();
    let origin = TempDir::new("http-origin");
    std::fs::create_dir_all(origin.0.join("root")).unwrap();
    let page: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(origin.0.join("root/page.html"), &page).unwrap();

    let ns = Netns::new("hc");
    let tap = netns::unique("thc");
    let config = repo().join("conf/http-cache-origin.click");
    let mut args: Vec<String> = vec![
        "100".into(),
        OXNET.into(),
        "run".into(),
        config.to_str().unwrap().into(),
        format!("DEV=tap:{tap},ip={HOST}/24"),
        format!("IP={CACHE}"),
        "IP6=fd00:85::2".into(),
        format!("DIR={}", www.0.display()),
        format!("ORIGIN={HOST}:{ORIGIN_PORT}"),
        "TIMEOUT=2".into(),
    ];
    let handlers = [
        "cache.requests",
        "cache.hits",
        "cache.misses",
        "cache.fetches",
        "cache.errors",
        "cache.timeouts",
        "cache.origin_errors",
        "cache.alloc_failures",
        "srv.unknown",
    ];
    for h in handlers.iter().chain(&["cache.statuses"]) {
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
    ns.ip(&["-6", "addr", "add", "fd00:85::1/64", "dev", &tap, "nodad"]);
    let mut nginx = nginx(&ns, &origin.0);
    wait_for_port(&ns, CACHE, 80);
    wait_for_port(&ns, HOST, ORIGIN_PORT);
    let url = |path: &str| format!("http://{CACHE}{path}");
    let mut requests = 0u64;

    // curl: the head, field by field.
    let o = curl(&ns, &["-D", "-", &url("/index.html")]);
    requests += 1;
    let out = text(&o);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert_eq!(header(&out, "Content-Length"), Some("15"), "{out}");
    assert!(out.ends_with("\r\n\r\n<h1>oxnet</h1>\n"), "{out}");
    let date = header(&out, "Date").unwrap();
    let when = oxnet_apps::http::date::parse(date).expect("Date is an HTTP date");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert!(when <= now && now - when < 5, "Date: {date}");
    assert_eq!(oxnet_apps::http::date::format(when), date, "IMF-fixdate");
    let etag = header(&out, "ETag").unwrap().to_string();
    let o = curl(
        &ns,
        &["-D", "-", "-H", &format!("If-None-Match: {etag}"), &url("/index.html")],
    );
    requests += 1;
    let out = text(&o);
    assert!(out.starts_with("HTTP/1.1 304 Not Modified\r\n"), "{out}");
    assert_eq!(header(&out, "ETag"), Some(etag.as_str()));

    // The same over IPv6.
    let o = curl(
        &ns,
        &[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
            "http://[fd00:85::2]/index.html",
        ],
    );
    assert_eq!(text(&o), "200 15");
    requests += 1;

    // ab -k: exact counts, every connection kept.
    let o = ns.run(
        "timeout",
        &["30", "ab", "-q", "-k", "-n", "2000", "-c", "8", &url("/1k.bin")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for line in [
        "Complete requests:      2000",
        "Failed requests:        0",
        "Keep-Alive requests:    2000",
    ] {
        assert!(out.contains(line), "ab: no '{line}' in\n{out}");
    }
    assert!(!out.contains("Non-2xx"), "{out}");
    requests += 2000;

    // wrk: a few seconds with keep-alive; every response 200.
    let o = ns.run(
        "timeout",
        &["30", "wrk", "-t", "1", "-c", "8", "-d", "2s", &url("/index.html")],
    );
    let out = text(&o);
    assert!(
        o.status.success() && !out.contains("Non-2xx") && !out.contains("Socket errors"),
        "{out}"
    );
    let wrk: u64 = out
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .map(|(n, _)| n.parse().unwrap())
        .expect("wrk's count");
    assert!(wrk > 100, "{out}");
    requests += wrk;

    // A miss filled from nginx, then a hit.
    let o = curl(&ns, &["-D", "-", &url("/page.html")]);
    let mut first = text(&o);
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert_eq!(header(&first, "Cache-Control"), Some("max-age=300"), "{first}");
    assert!(header(&first, "Age").is_some(), "{first}");
    assert!(
        first.split_off(first.find("\r\n\r\n").unwrap() + 4).as_bytes() == page,
        "the origin's body"
    );
    let o = curl(
        &ns,
        &[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
            &url("/page.html"),
        ],
    );
    assert_eq!(text(&o), "200 3000");
    let o = curl(&ns, &["-o", "/dev/null", "-w", "%{http_code}", &url("/none.html")]);
    assert_eq!(text(&o), "404", "nginx's 404 is passed on");
    requests += 3;

    // A malformed request, a huge header.
    let o = ns.run(
        "timeout",
        &[
            "10",
            "bash",
            "-c",
            &format!("printf 'GET /\\x01 HTTP/1.1\\r\\n\\r\\n' | socat -t 3 - TCP:{CACHE}:80"),
        ],
    );
    assert!(text(&o).starts_with("HTTP/1.1 400 Bad Request\r\n"), "{}", text(&o));
    let big = format!("X-Big: {}", "a".repeat(10_000));
    let o = curl(
        &ns,
        &["-o", "/dev/null", "-w", "%{http_code}", "-H", &big, &url("/index.html")],
    );
    assert_eq!(text(&o), "431");

    // A slowloris client: half a head, then a byte now and then; curl is
    // answered meanwhile; the slow one gets 408 after TIMEOUT (2 s).
    let mut slow = ns
        .command("timeout")
        .args(["20", "bash", "-c", &format!("(printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\n'; for i in 1 2 3 4 5 6 7 8; do sleep 0.5; printf 'X'; done; sleep 5) | socat -t 8 - TCP:{CACHE}:80")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let o = curl(&ns, &["-o", "/dev/null", "-w", "%{http_code}", &url("/index.html")]);
    assert_eq!(text(&o), "200", "other clients go on");
    requests += 1;
    let mut answer = String::new();
    slow.stdout.take().unwrap().read_to_string(&mut answer).unwrap();
    let _ = slow.wait();
    assert!(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "closed by the cache, not by the client's end"
    );

    common::terminate(&mut nginx);
    // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
    unsafe { libc::kill(oxnet.id() as libc::pid_t, libc::SIGINT) };
    let out = oxnet.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // wrk stops with up to one request per connection unanswered (8).
    let served = value(&stdout, "cache.requests");
    assert!(
        (requests..=requests + 8).contains(&served),
        "{requests} requests made, {served} counted\n{all}"
    );
    assert_eq!(
        value(&stdout, "cache.fetches"),
        2,
        "page.html once, none.html once\n{all}"
    );
    assert_eq!(value(&stdout, "cache.misses"), 2, "{all}");
    assert_eq!(value(&stdout, "cache.hits"), served - 2, "{all}");
    assert_eq!(value(&stdout, "cache.errors"), 4, "404, 400, 431, 408\n{all}");
    assert_eq!(value(&stdout, "cache.timeouts"), 1, "{all}");
    assert_eq!(value(&stdout, "cache.origin_errors"), 0, "{all}");
    assert_eq!(value(&stdout, "cache.alloc_failures"), 0, "{all}");
    assert_eq!(value(&stdout, "srv.unknown"), 0, "{all}");
    drop(ns);
}
