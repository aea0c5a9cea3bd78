//! conf/echo-epoll.click (StackHost + TCPEpollServer wired to itself) on
//! a TAP device in a namespace made here, Linux's socat as the client,
//! IPv4 and IPv6, one at a time and eight at once: every byte back
//! unchanged, and the server's counters exact (one Open and one Close
//! per connection, every byte in and out once).

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, run_oxnet, socat_echo, stop_oxnet, value, wait_for_link};
use std::time::Duration;

#[test]
fn socat_gets_its_bytes_back_from_the_epoll_echo_over_ipv4_and_ipv6() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("ee");
    let tap = netns::unique("tee");
    let vars = [
        format!("DEV=tap:{tap},ip=10.83.0.1/24"),
        "IP=10.83.0.2".into(),
        "IP6=fd00:83::2".into(),
    ];
    let handlers = [
        "srv.opened",
        "srv.closed",
        "srv.errors",
        "srv.bytes_in",
        "srv.bytes_out",
        "srv.unknown",
        "srv.connections",
    ];
    let mut oxnet = run_oxnet(&ns, 120, "conf/echo-epoll.click", &vars, &handlers);
    wait_for_link(&ns, &tap, &mut oxnet);
    ns.ip(&["-6", "addr", "add", "fd00:83::1/64", "dev", &tap, "nodad"]);
    let mut sent = 0u64;
    let mut connections = 0u64;
    for (i, target) in ["TCP:10.83.0.2:7", "TCP6:[fd00:83::2]:7"].iter().enumerate() {
        let data = random_bytes(300_000, 30 + i as u64);
        let back = socat_echo(&ns.name, target, &data, 10);
        assert!(
            back == data,
            "{target}: {} bytes back of {}, or changed",
            back.len(),
            data.len()
        );
        sent += data.len() as u64;
        connections += 1;
    }
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let name = ns.name.clone();
            std::thread::spawn(move || {
                let data = random_bytes(50_000, 200 + i);
                let back = socat_echo(&name, "TCP:10.83.0.2:7", &data, 10);
                (data, back)
            })
        })
        .collect();
    for c in clients {
        let (data, back) = c.join().unwrap();
        assert!(back == data, "a concurrent connection's bytes came back changed");
        sent += data.len() as u64;
        connections += 1;
    }
    // The last Close may still be on its way (the FIN's ACK): a moment.
    std::thread::sleep(Duration::from_millis(300));
    let (stdout, all) = stop_oxnet(oxnet);
    assert_eq!(value(&stdout, "srv.opened"), connections, "{all}");
    assert_eq!(value(&stdout, "srv.closed"), connections, "{all}");
    assert_eq!(value(&stdout, "srv.connections"), 0, "{all}");
    assert_eq!(value(&stdout, "srv.errors"), 0, "{all}");
    assert_eq!(value(&stdout, "srv.unknown"), 0, "{all}");
    assert_eq!(
        (value(&stdout, "srv.bytes_in"), value(&stdout, "srv.bytes_out")),
        (sent, sent),
        "{all}"
    );
    drop(ns);
}
