//! The stack on several cores (issue 11, ClickNF §5.2): `oxnet run -j 2`
//! over two software 82599 ports wired together, host A's echo client on
//! one, host B's echo server on the other, one graph (and one stack) per
//! thread, each thread owning queue i of both ports. RSS spreads the
//! connections over the threads; a client connection must pick a source
//! port whose replies the NIC's RSS brings back to its own thread, or its
//! SYN-ACK lands on the other thread's stack, which knows nothing of it.
//! Every connection of every thread must complete with its bytes back.

use std::process::Command;

/// `oxnet run ARGS`, ended after 60 s if it has not stopped by itself
/// (a connection that never completes would keep it running).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_oxnet"), "run"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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

const CONFIG: &str = r#"
// Host A (10.9.0.1, the client) on sim:scA, host B (10.9.0.2, the server)
// on sim:scB, the two ports wired; static Ethernet addresses (no ARP:
// with -j 2 an ARP reply would reach one thread only).
define($MACA 02:00:00:00:0a:01, $MACB 02:00:00:00:0b:02)
FromDevice("sim:scA,wire=scB", PROMISC true) -> ca :: Classifier(12/0800, -);
FromDevice("sim:scB", PROMISC true) -> cb :: Classifier(12/0800, -);
ca[1] -> Discard;
cb[1] -> Discard;
ca[0] -> ipa :: IPv4Input(10.9.0.1);
cb[0] -> ipb :: IPv4Input(10.9.0.2);
tcp :: TCPStack;
ipa[0] -> tcp;
ipb[0] -> tcp;
ipa[1] -> Discard; ipa[2] -> Discard; ipa[3] -> Discard;
ipb[1] -> Discard; ipb[2] -> Discard; ipb[3] -> Discard;
route :: IPClassifier(dst host 10.9.0.2, dst host 10.9.0.1);
tcp -> route;
route[0] -> EtherEncap(0x0800, $MACA, $MACB) -> ToDevice("sim:scA,wire=scB");
route[1] -> EtherEncap(0x0800, $MACB, $MACA) -> ToDevice("sim:scB");
AppExecutor;
srv :: TCPEchoServer(7, ADDR 10.9.0.2);
cli :: TCPEchoClient(10.9.0.2, PORT 7, SRC 10.9.0.1, CONNECTIONS 24, BYTES 20000, CONCURRENCY 4, STOP true);
"#;

#[test]
fn on_two_cores_every_client_connection_completes_on_its_own_core() {
    let (ok, out, err) = run(&[
        "-j",
        "2",
        "-e",
        CONFIG,
        "-h",
        "cli.done",
        "-h",
        "cli.failed",
        "-h",
        "cli.bytes",
        "-h",
        "srv.connections",
    ]);
    assert!(ok, "oxnet did not finish by itself (a connection hung?): {err}");
    // Sums over the two threads; each thread's values are on stderr.
    assert_eq!(value(&out, "cli.failed"), 0, "{out}{err}");
    assert_eq!(value(&out, "cli.done"), 48, "{out}{err}");
    assert_eq!(value(&out, "cli.bytes"), 48 * 20_000, "{out}{err}");
    assert_eq!(value(&out, "srv.connections"), 48, "{out}{err}");
    // RSS spread the server's connections over both threads.
    let per_thread: Vec<u64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .filter(|l| l.contains("srv.connections"))
        .map(|l| l.split_whitespace().last().unwrap().parse().unwrap())
        .collect();
    assert_eq!(per_thread.len(), 2, "{err}");
    assert!(per_thread.iter().all(|&n| n > 0), "both threads served: {per_thread:?}");
}
