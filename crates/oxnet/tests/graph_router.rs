//! conf/router.click between two network namespaces over veth pairs
//! (AF_PACKET devices), with Linux's ping through it and to it: every
//! counter exact. Everything runs in namespaces this test creates and
//! removes (tests/common/netns.rs).

mod common;
use common::netns::{self, Netns};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn quiet_netns(prefix: &str) -> Netns {
    let ns = Netns::new(prefix);
    let o = ns.run(
        "sh",
        &[
            "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
        ],
    );
    assert!(o.status.success(), "disabling IPv6: {}", text(&o.stderr));
    ns
}

fn mac_of(ns: &Netns, interface: &str) -> String {
    let o = Command::new("ip")
        .args(["-n", &ns.name, "-o", "link", "show", interface])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC in {out}"))
        .to_string()
}

fn ping(ns: &Netns, args: &[&str]) -> Output {
    ns.run("ping", args)
}

fn handler(socket: &str, args: &[&str]) -> Output {
    Command::new(OXNET)
        .args(["handler", "--socket", socket])
        .args(args)
        .output()
        .unwrap()
}

fn value(stdout: &str, name: &str) -> u64 {
    let mut lines = stdout.lines();
    while let Some(l) = lines.next() {
        if l == format!("{name}:") {
            return lines.next().unwrap().trim().parse().unwrap();
        }
    }
    panic!("no {name} in\n{stdout}");
}

fn wait_ready(socket: &str, router: &mut Child) {
    let start = Instant::now();
    while !handler(socket, &["version"]).status.success() {
        if let Ok(Some(status)) = router.try_wait() {
            panic!("the router ended ({status}) before it was ready");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the router never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn linux_pings_through_and_to_conf_router_click_with_exact_counters() {
    let have_ping = Command::new("sh")
        .args(["-c", "command -v ping"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !netns::available() || !have_ping {
        eprintln!("skipping: needs root, iproute2 and ping (scripts/install-deps.sh)");
        return;
    }
    let a = quiet_netns("rta");
    let r = quiet_netns("rtr");
    let b = quiet_netns("rtb");
    let (a_if, r0) = a.veth_to(&r);
    let (r1, b_if) = r.veth_to(&b);
    a.ip(&["addr", "add", "10.0.1.2/24", "dev", &a_if]);
    a.ip(&["route", "add", "default", "via", "10.0.1.1"]);
    b.ip(&["addr", "add", "10.0.2.2/24", "dev", &b_if]);
    b.ip(&["route", "add", "default", "via", "10.0.2.1"]);
    let (mac0, mac1) = (mac_of(&r, &r0), mac_of(&r, &r1));

    let dir = std::env::temp_dir().join(format!("oxnet-router-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("ctl.sock").to_str().unwrap().to_string();
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../../conf/router.click");
    let mut router = r
        .command(OXNET)
        .args(["run", "-u", &socket, conf])
        .arg(format!("IF0=af_packet:{r0}"))
        .arg(format!("MAC0={mac0}"))
        .arg(format!("IF1=af_packet:{r1}"))
        .arg(format!("MAC1={mac1}"))
        .args([
            "-h",
            "fwd0.count",
            "-h",
            "fwd1.count",
            "-h",
            "local.count",
            "-h",
            "pings.count",
            "-h",
            "ttl.count",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&socket, &mut router);

    // Through the router: A pings B.
    let o = ping(&a, &["-c", "5", "-i", "0.2", "-W", "3", "10.0.2.2"]);
    let through = text(&o.stdout);
    // To the router: its near address, then its far one.
    let near = ping(&a, &["-c", "3", "-i", "0.2", "-W", "3", "10.0.1.1"]);
    let far = ping(&a, &["-c", "2", "-i", "0.2", "-W", "3", "10.0.2.1"]);
    // TTL 1 through the router: time exceeded from the near address.
    let expired = ping(&a, &["-c", "1", "-t", "1", "-W", "3", "10.0.2.2"]);

    assert!(handler(&socket, &["stop", ""]).status.success());
    let out = router.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        through.contains("5 packets transmitted, 5 received"),
        "{through}\n{stderr}"
    );
    assert!(
        text(&near.stdout).contains("3 packets transmitted, 3 received"),
        "{}",
        text(&near.stdout)
    );
    assert!(
        text(&far.stdout).contains("2 packets transmitted, 2 received"),
        "{}",
        text(&far.stdout)
    );
    let exp = text(&expired.stdout);
    assert!(
        exp.contains("From 10.0.1.1") && exp.contains("Time to live exceeded"),
        "{exp}"
    );
    // Exact: 5 requests out to B; out to A the 5 replies from B, the 5
    // echo replies of the router and the one time-exceeded message.
    assert_eq!(value(&stdout, "fwd1.count"), 5, "{stdout}");
    assert_eq!(value(&stdout, "fwd0.count"), 11, "{stdout}");
    assert_eq!(value(&stdout, "local.count"), 5, "{stdout}");
    assert_eq!(value(&stdout, "pings.count"), 5, "{stdout}");
    assert_eq!(value(&stdout, "ttl.count"), 1, "{stdout}");
}
