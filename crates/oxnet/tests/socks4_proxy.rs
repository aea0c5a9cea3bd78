//! conf/socks4.click (StackHost + TCPEpollServer + Socks4Proxy +
//! TCPEpollClient, ClickNF Figure 11) on a TAP device in a namespace
//! made here; nginx, started here with its own configuration, serves
//! files on the TAP's kernel side. Through the proxy: curl --socks4 and
//! --socks4a (a name from the proxy's HOSTS file) fetch a file byte for
//! byte, and a slow reader's 6 MB arrive whole beside a fast one (flow
//! control across the proxy); a name the proxy does not know and a destination its DENY names
//! are refused (91); a client that leaves mid-handshake is cleaned up;
//! BIND with a small client of std sockets (curl has none): the first
//! reply names the listening port, the application server connects, the
//! second reply names it, and bytes go both ways; a BIND whose inbound
//! connection comes from another address than DSTIP gets 91. The
//! client that sends nothing is closed after REQUEST_TIMEOUT. The
//! proxy's counters are checked exactly at the end.

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, run_oxnet, stop_oxnet, value, wait_for_link};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

const NGINX_PORT: u16 = 8080;
/// A port DENY names (nothing listens there either: the refusal must
/// come from the rule, counted as such).
const DENIED_PORT: u16 = 8081;
const APP_PORT: u16 = 7000;

/// Runs `f` on a thread inside namespace `ns` (setns affects only the
/// calling thread), so that std sockets are the namespace's.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace descriptor; only this thread moves.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

/// Removes the test's directory however the test ends.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nginx(ns: &Netns, dir: &Path, ip: &str) -> Child {
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/cbt;\n  proxy_temp_path {d}/pt;\n  \
         fastcgi_temp_path {d}/ft;\n  uwsgi_temp_path {d}/ut;\n  scgi_temp_path {d}/st;\n  \
         server {{ listen {ip}:{NGINX_PORT}; root {d}/www; }}\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let d = dir.to_str().unwrap();
    ns.command("timeout")
        .args([
            "60",
            "nginx",
            "-p",
            d,
            "-c",
            &format!("{d}/nginx.conf"),
            "-e",
            &format!("{d}/error.log"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx (scripts/install-deps.sh installs nginx-light)")
}

fn socks(stream: &mut TcpStream, command: u8, to: SocketAddrV4) -> [u8; 8] {
    let mut req = vec![4, command];
    req.extend_from_slice(&to.port().to_be_bytes());
    req.extend_from_slice(&to.ip().octets());
    req.extend_from_slice(b"bind-test\0");
    stream.write_all(&req).unwrap();
    reply(stream)
}

fn reply(stream: &mut TcpStream) -> [u8; 8] {
    let mut r = [0u8; 8];
    stream.read_exact(&mut r).unwrap();
    r
}

#[test]
fn curl_and_a_bind_client_through_the_socks4_proxy_on_tap() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("s4");
    let tap = netns::unique("ts4");
    let (kernel, stack) = ("10.84.0.1", "10.84.0.2");
    let dir: PathBuf = std::env::temp_dir().join(format!("oxnet-socks4-{}", ns.name));
    let _remove = RemoveDir(dir.clone());
    std::fs::create_dir_all(dir.join("www")).unwrap();
    let body = random_bytes(300_000, 84);
    std::fs::write(dir.join("www/blob"), &body).unwrap();
    let big = random_bytes(6_000_000, 85);
    std::fs::write(dir.join("www/big"), &big).unwrap();
    std::fs::write(dir.join("hosts"), format!("# SOCKS4a names\n{kernel} web.test\n")).unwrap();

    let vars = [
        format!("DEV=tap:{tap},ip={kernel}/24"),
        format!("IP={stack}"),
        format!("HOSTS={}", dir.join("hosts").display()),
        format!("DENY={kernel}:{DENIED_PORT}"),
        "REQUEST_TIMEOUT=1".into(),
    ];
    let handlers = [
        "proxy.requests",
        "proxy.connects",
        "proxy.binds",
        "proxy.granted",
        "proxy.rejected",
        "proxy.denied",
        "proxy.unresolved",
        "proxy.failed",
        "proxy.bound",
        "proxy.bind_mismatches",
        "proxy.errors",
        "proxy.aborted",
        "proxy.unknown",
        "proxy.sessions",
        "proxy.bytes_down",
        "proxy.timeouts",
        "srv.paused",
        "srv.overflows",
        "cli.overflows",
    ];
    let mut oxnet = run_oxnet(&ns, 60, "conf/socks4.click", &vars, &handlers);
    wait_for_link(&ns, &tap, &mut oxnet);
    let mut web = nginx(&ns, &dir, kernel);
    // nginx is up when a kernel connection to it succeeds.
    let ready = in_ns(&ns.name, move || {
        (0..100).any(|_| {
            let to = SocketAddrV4::new(Ipv4Addr::new(10, 84, 0, 1), NGINX_PORT);
            let ok = TcpStream::connect_timeout(&to.into(), Duration::from_millis(200)).is_ok();
            if !ok {
                std::thread::sleep(Duration::from_millis(50));
            }
            ok
        })
    });
    assert!(ready, "nginx did not come up");
    let proxy = format!("{stack}:1080");
    let curl = |mode: &str, url: &str| {
        let out = ns
            .command("timeout")
            .args(["20", "curl", "-s", "--max-time", "10", mode, &proxy, url])
            .output()
            .unwrap();
        (out.status.success(), out.stdout)
    };

    // SOCKS4 and SOCKS4a to nginx: the file, byte for byte.
    let (ok, got) = curl("--socks4", &format!("http://{kernel}:{NGINX_PORT}/blob"));
    assert!(
        ok && got == body,
        "--socks4: {ok}, {} bytes of {}",
        got.len(),
        body.len()
    );
    let (ok, got) = curl("--socks4a", &format!("http://web.test:{NGINX_PORT}/blob"));
    assert!(
        ok && got == body,
        "--socks4a: {ok}, {} bytes of {}",
        got.len(),
        body.len()
    );
    let (ok, got) = curl("--socks4a", &format!("http://{kernel}:{NGINX_PORT}/blob"));
    assert!(ok && got == body, "--socks4a to an address: {ok}, {} bytes", got.len());
    // A slow reader (3 MB/s) of 6 MB beside a fast one: nginx's data is
    // not read faster than the slow client takes it (FLOW_CONTROL), so it
    // cannot hold the TAP's receive buffers and stall everyone.
    let slow = {
        let name = ns.name.clone();
        let (proxy, url) = (proxy.clone(), format!("http://{kernel}:{NGINX_PORT}/big"));
        std::thread::spawn(move || {
            let args = [
                "netns",
                "exec",
                &name,
                "timeout",
                "20",
                "curl",
                "-s",
                "--max-time",
                "10",
            ];
            let out = std::process::Command::new("ip")
                .args(args)
                .args(["--limit-rate", "3M", "--socks4", &proxy, &url])
                .output()
                .unwrap();
            (out.status.success(), out.stdout)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (ok, got) = curl("--socks4", &format!("http://{kernel}:{NGINX_PORT}/blob"));
    assert!(ok && got == body, "beside a slow client: {ok}, {} bytes", got.len());
    let (ok, got) = slow.join().unwrap();
    assert!(
        ok && got == big,
        "the slow client: {ok}, {} bytes of {}",
        got.len(),
        big.len()
    );
    // Refused: a name HOSTS lacks, a destination DENY names.
    let (ok, got) = curl("--socks4a", &format!("http://nowhere.test:{NGINX_PORT}/blob"));
    assert!(!ok && got.is_empty(), "an unknown name was not refused");
    let (ok, got) = curl("--socks4", &format!("http://{kernel}:{DENIED_PORT}/"));
    assert!(!ok && got.is_empty(), "a denied destination was not refused");

    let name = ns.name.clone();
    in_ns(&name, move || {
        let proxy = SocketAddrV4::new(Ipv4Addr::new(10, 84, 0, 2), 1080);
        // A client that says nothing: closed after REQUEST_TIMEOUT (1 s).
        let mut silent = TcpStream::connect(proxy).unwrap();
        let silent_since = std::time::Instant::now();
        // Clients gone mid-handshake: half a request, and nothing at all.
        let mut half = TcpStream::connect(proxy).unwrap();
        half.write_all(&[4, 1, 0]).unwrap();
        drop(half);
        drop(TcpStream::connect(proxy).unwrap());

        // BIND (SOCKS4.protocol §2): a control connection by CONNECT to
        // the application server, then BIND naming it.
        let app = TcpListener::bind((Ipv4Addr::new(10, 84, 0, 1), APP_PORT)).unwrap();
        let app_addr = SocketAddrV4::new(Ipv4Addr::new(10, 84, 0, 1), APP_PORT);
        let mut control = TcpStream::connect(proxy).unwrap();
        control.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(socks(&mut control, 1, app_addr), [0, 90, 0x1b, 0x58, 10, 84, 0, 1]);
        let (mut app_control, _) = app.accept().unwrap();
        let mut data = TcpStream::connect(proxy).unwrap();
        data.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let first = socks(&mut data, 2, app_addr);
        assert_eq!(
            (first[0], first[1], &first[4..]),
            (0, 90, &[10u8, 84, 0, 2][..]),
            "{first:?}"
        );
        let port = u16::from_be_bytes([first[2], first[3]]);
        // The client tells the server where to connect (as FTP's PORT).
        control.write_all(&port.to_be_bytes()).unwrap();
        let mut told = [0u8; 2];
        app_control.read_exact(&mut told).unwrap();
        let mut inbound = TcpStream::connect((Ipv4Addr::new(10, 84, 0, 2), u16::from_be_bytes(told))).unwrap();
        inbound.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let local = inbound.local_addr().unwrap();
        let second = reply(&mut data);
        let mut want = vec![0, 90];
        want.extend_from_slice(&local.port().to_be_bytes());
        want.extend_from_slice(&[10, 84, 0, 1]);
        assert_eq!(second.to_vec(), want, "the second reply names the inbound connection");
        inbound.write_all(b"from the application server").unwrap();
        inbound.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        data.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"from the application server");
        data.write_all(b"from the client").unwrap();
        data.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        inbound.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"from the client");
        drop((control, app_control));

        // A BIND naming another host: the inbound connection is refused.
        let mut data = TcpStream::connect(proxy).unwrap();
        data.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let first = socks(&mut data, 2, SocketAddrV4::new(Ipv4Addr::new(10, 84, 0, 9), APP_PORT));
        assert_eq!(first[1], 90);
        let _inbound =
            TcpStream::connect((Ipv4Addr::new(10, 84, 0, 2), u16::from_be_bytes([first[2], first[3]]))).unwrap();
        assert_eq!(reply(&mut data)[1], 91, "second reply to a BIND from elsewhere");
        let mut rest = Vec::new();
        assert_eq!(data.read_to_end(&mut rest).unwrap_or(0), 0, "closed after 91");

        silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut nothing = Vec::new();
        assert_eq!(
            silent.read_to_end(&mut nothing).unwrap(),
            0,
            "the silent client is closed, told nothing"
        );
        let waited = silent_since.elapsed();
        assert!(
            waited >= Duration::from_millis(900),
            "closed after {waited:?}, before its time"
        );
    });

    // The last Close may still be on its way: a moment.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: our own child (`timeout`, which passes the signal on), by pid.
    unsafe { libc::kill(web.id() as libc::pid_t, libc::SIGTERM) };
    let _ = web.wait();
    let (stdout, all) = stop_oxnet(oxnet);
    let v = |h: &str| value(&stdout, &format!("proxy.{h}"));
    // 5 curl fetches, 2 refused, the control CONNECT, 2 BINDs.
    assert_eq!((v("requests"), v("connects"), v("binds")), (10, 8, 2), "{all}");
    assert_eq!((v("granted"), v("rejected")), (7, 3), "{all}");
    assert_eq!((v("unresolved"), v("denied"), v("failed")), (1, 1, 0), "{all}");
    assert_eq!((v("bound"), v("bind_mismatches")), (2, 1), "{all}");
    assert_eq!(
        (v("aborted"), v("errors"), v("unknown"), v("sessions")),
        (2, 0, 0, 0),
        "{all}"
    );
    assert_eq!(v("timeouts"), 1, "{all}");
    assert!(v("bytes_down") >= 4 * body.len() as u64 + big.len() as u64, "{all}");
    assert!(
        value(&stdout, "srv.paused") >= 1,
        "the slow client's connection paused: {all}"
    );
    assert_eq!(
        (value(&stdout, "srv.overflows"), value(&stdout, "cli.overflows")),
        (0, 0),
        "{all}"
    );
    drop(ns);
}
