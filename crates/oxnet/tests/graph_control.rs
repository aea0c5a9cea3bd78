//! The control socket: `oxnet run -u PATH` / `-p PORT` and `oxnet handler`
//! read and write handlers of a running router (Click's ControlSocket
//! protocol), with Click's error codes for what is wrong.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str =
    "InfiniteSource(LENGTH 60, LIMIT -1, BURST 1) -> q :: Queue(100) -> Unqueue(BURST 1) -> c :: Counter -> Discard;";

fn oxnet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxnet"))
}

fn handler(endpoint: &[&str], args: &[&str]) -> (bool, String, String) {
    let out = oxnet().arg("handler").args(endpoint).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_for(endpoint: &[&str]) {
    let start = Instant::now();
    while !handler(endpoint, &["version"]).0 {
        assert!(start.elapsed() < Duration::from_secs(20), "the router never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check_session(endpoint: &[&str], mut router: std::process::Child) {
    wait_for(endpoint);
    // Reads: a counter that moves, the element list, a parameter.
    let (ok, first, err) = handler(endpoint, &["c.count"]);
    assert!(ok, "{err}");
    let first: u64 = first.trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let second: u64 = handler(endpoint, &["c.count"]).1.trim().parse().unwrap();
    assert!(
        second > first,
        "the router runs while it is asked: {first} then {second}"
    );
    let list = handler(endpoint, &["list"]).1;
    let mut lines = list.lines();
    let n: usize = lines.next().unwrap().parse().unwrap();
    let names: Vec<&str> = lines.collect();
    assert_eq!(names.len(), n);
    assert!(names.contains(&"q") && names.contains(&"c"), "{list}");
    assert_eq!(handler(endpoint, &["q.capacity"]).1.trim(), "100");
    // A write takes effect.
    assert!(handler(endpoint, &["q.capacity", "7"]).0);
    assert_eq!(handler(endpoint, &["q.capacity"]).1.trim(), "7");
    // Click's error codes: no element 510, no handler 511, not writable 530.
    let (ok, _, err) = handler(endpoint, &["nope.count"]);
    assert!(!ok && err.contains("510"), "{err}");
    let (ok, _, err) = handler(endpoint, &["c.nope"]);
    assert!(!ok && err.contains("511"), "{err}");
    let (ok, _, err) = handler(endpoint, &["c.count", "5"]);
    assert!(!ok && err.contains("530"), "{err}");
    // The global stop handler ends the router.
    assert!(handler(endpoint, &["stop", ""]).0);
    let start = Instant::now();
    loop {
        if let Some(status) = router.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stop did not stop the router"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unix_control_socket_reads_writes_and_stops_the_router() {
    let dir = std::env::temp_dir().join(format!("oxnet-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ctl.sock");
    let path_text = path.to_str().unwrap().to_string();
    let router = oxnet()
        .args(["run", "-u", &path_text, "-e", CONFIG])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    check_session(&["--socket", &path_text], router);
    assert!(!path.exists(), "the socket file is removed when the router stops");
    // Nobody listening: a clear error, not a hang.
    let (ok, _, err) = handler(&["--socket", &path_text], &["c.count"]);
    assert!(!ok && err.contains("cannot reach a router"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tcp_control_port_on_loopback() {
    // A free port: bind 0, read the number, let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let router = oxnet()
        .args(["run", "-p", &port, "-e", CONFIG])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    check_session(&["--port", &port], router);
}
