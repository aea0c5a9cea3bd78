//! `oxnet memcached` (and `oxnet run conf/memcached.click`) on a TAP
//! device in a namespace made here, reached by
//! the clients memcached users already have: libmemcached's protocol
//! checker `memccapable` (ascii and binary; every check that passes
//! against Debian's memcached 1.6, started here in the same namespace,
//! passes against oxnet), memccp / memccat / memcrm / memcstat round trips,
//! pymemcache (Debian's /usr/bin/python3) over the text protocol, LRU
//! eviction under a small -m, and four clients rewriting four keys while
//! others read them, with 3% of the frames lost each way (so that values
//! being replaced are still being retransmitted): every GET is one whole
//! stored value.

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, wait_for_link};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const OXNET: &str = env!("CARGO_BIN_EXE_oxnet");
const PORT: &str = "11211";

/// oxnet memcached in `ns` on a TAP whose kernel side is 10.N.0.1/24,
/// serving at 10.N.0.2.
struct Server {
    oxnet: Child,
    ip: String,
    tap: String,
}

impl Server {
    /// `oxnet memcached` with memcached's flags `extra`, or (`conf`)
    /// `oxnet run conf/memcached.click` with the variables `extra`.
    fn start(ns: &Netns, net: u8, conf: bool, extra: &[&str]) -> Server {
        let tap = netns::unique("tkv");
        let ip = format!("10.{net}.0.2");
        let dev = format!("tap:{tap},ip=10.{net}.0.1/24");
        let mut args: Vec<String> = vec!["120".into(), OXNET.into()];
        if conf {
            let file = common::stack::repo().join("conf/memcached.click");
            args.extend([
                "run".into(),
                file.to_str().unwrap().into(),
                format!("DEV={dev}"),
                format!("IP={ip}"),
                format!("IP6=fd00:{net}::2"),
                format!("PORT={PORT}"),
            ]);
            args.extend(extra.iter().map(|s| s.to_string()));
            args.extend(["-h".into(), "kv.stats".into()]);
        } else {
            args.extend([
                "memcached".into(),
                dev,
                "--ip".into(),
                format!("{ip}/24"),
                "--ip6".into(),
                format!("fd00:{net}::2"),
                "-p".into(),
                PORT.into(),
                "-U".into(),
                "0".into(),
            ]);
            args.extend(extra.iter().map(|s| s.to_string()));
            args.extend(["--".into(), "-h".into(), "kv.stats".into()]);
        }
        let mut oxnet = ns
            .command("timeout")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        wait_for_link(ns, &tap, &mut oxnet);
        // Serving: a version request answers.
        let server = Server { oxnet, ip, tap };
        while !ns
            .run(
                "timeout",
                &["5", "memcstat", &format!("--servers={}:{PORT}", server.ip)],
            )
            .status
            .success()
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "oxnet memcached does not answer"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Ends oxnet (SIGINT, by pid) and returns what it printed.
    fn stop(mut self) -> String {
        // SAFETY: our own child (`timeout`, which passes SIGINT on).
        unsafe { libc::kill(self.oxnet.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.oxnet.try_wait();
        let out = std::mem::replace(&mut self.oxnet, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

/// memcached 1.6 (Debian's), in the foreground inside `ns`, on loopback.
struct Memcached(Child);

impl Memcached {
    fn start(ns: &Netns, port: &str) -> Memcached {
        let child = ns
            .command("timeout")
            .args([
                "120",
                "memcached",
                "-l",
                "127.0.0.1",
                "-p",
                port,
                "-U",
                "0",
                "-u",
                "nobody",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("memcached (scripts/install-deps.sh installs it)");
        let start = Instant::now();
        while !ns
            .run("timeout", &["5", "memcstat", &format!("--servers=127.0.0.1:{port}")])
            .status
            .success()
        {
            assert!(start.elapsed() < Duration::from_secs(20), "memcached does not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
        Memcached(child)
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        // SAFETY: our own child, by pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// memccapable's verdicts: (check, passed) per line "name [pass]".
fn capable(ns: &Netns, host: &str, port: &str, mode: &str) -> (Vec<(String, bool)>, String) {
    let out = ns.run(
        "timeout",
        &["60", "memccapable", "-h", host, "-p", port, mode, "-t", "5"],
    );
    let all = text(&out);
    let verdicts = all
        .lines()
        .filter_map(|l| {
            let (name, verdict) = l.rsplit_once('[')?;
            let verdict = verdict.trim_end_matches(']');
            matches!(verdict, "pass" | "FAIL" | "fail" | "skipped")
                .then(|| (name.trim().to_string(), verdict == "pass"))
        })
        .collect();
    (verdicts, all)
}

#[test]
fn memccapable_passes_every_check_that_memcached_passes() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("kvc");
    let reference = Memcached::start(&ns, "21211");
    let server = Server::start(&ns, 91, false, &[]);
    for mode in ["-a", "-b"] {
        let (want, want_all) = capable(&ns, "127.0.0.1", "21211", mode);
        assert!(want.len() > 20, "memccapable {mode} against memcached: {want_all}");
        let (got, got_all) = capable(&ns, &server.ip, PORT, mode);
        let passed: Vec<&String> = want.iter().filter(|(_, p)| *p).map(|(n, _)| n).collect();
        let got_passed: Vec<&String> = got.iter().filter(|(_, p)| *p).map(|(n, _)| n).collect();
        assert_eq!(got_passed, passed, "memccapable {mode} against oxnet:\n{got_all}");
        assert!(got_all.contains("All tests passed"), "{got_all}");
    }
    // A multi-get larger than TCPEpollServer's default bound on waiting
    // data (4 MiB): eight values of a million bytes in one reply, over
    // IPv4 and IPv6.
    ns.ip(&["-6", "addr", "add", "fd00:91::1/64", "dev", &server.tap, "nodad"]);
    let script = r#"
import sys
from pymemcache.client.base import Client
for host in ("10.91.0.2", "fd00:91::2"):
    c = Client((host, 11211), connect_timeout=5, timeout=10)
    values = {"big%d" % i: bytes([65 + i]) * 1000000 for i in range(8)}
    for k, v in values.items():
        assert c.set(k, v, noreply=False)
    assert c.get_many(list(values)) == values
    c.close()
print("ok")
"#;
    let py = ns.run("timeout", &["60", "/usr/bin/python3", "-c", script]);
    assert!(
        py.status.success() && text(&py).starts_with("ok"),
        "pymemcache multi-get: {}",
        text(&py)
    );
    drop(reference);
    let out = server.stop();
    assert!(out.contains("curr_connections 0"), "{out}");
}

#[test]
fn libmemcached_tools_pymemcache_and_eviction() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("kvt");
    // conf/memcached.click this time, with 2 MiB of items.
    let server = Server::start(&ns, 92, true, &["MEMORY=2"]);
    let servers = format!("--servers={}:{PORT}", server.ip);
    // memccp stores a file under its name; memccat gives it back.
    let dir = std::env::temp_dir().join(netns::unique("kvf"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("blob.bin");
    let data = random_bytes(300_000, 9);
    std::fs::write(&file, &data).unwrap();
    let cp = ns.run("timeout", &["20", "memccp", &servers, file.to_str().unwrap()]);
    assert!(cp.status.success(), "memccp: {}", text(&cp));
    let cat = ns.run("timeout", &["20", "memccat", &servers, "blob.bin"]);
    assert!(cat.status.success(), "memccat: {}", text(&cat));
    // memccat ends what it prints with a newline.
    assert!(
        cat.stdout[..cat.stdout.len().min(data.len())] == data[..] && cat.stdout[data.len()..] == b"\n"[..],
        "memccat gave {} bytes back of {}",
        cat.stdout.len(),
        data.len()
    );
    let rm = ns.run("timeout", &["20", "memcrm", &servers, "blob.bin"]);
    assert!(rm.status.success(), "memcrm: {}", text(&rm));
    let cat = ns.run("timeout", &["20", "memccat", &servers, "blob.bin"]);
    assert!(
        !cat.status.success() && cat.stdout.is_empty(),
        "removed, still there: {}",
        text(&cat)
    );
    let stat = ns.run("timeout", &["20", "memcstat", &servers]);
    let stat = text(&stat);
    for field in [
        "curr_items: 0",
        "cmd_get: 2",
        "get_hits: 1",
        "get_misses: 1",
        "delete_hits: 1",
        "limit_maxbytes: 2097152",
    ] {
        assert!(stat.contains(field), "memcstat has no '{field}':\n{stat}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // memcslap: 200 keys set, then 4 threads get each of them, over the
    // text protocol and then the binary one; every get hits.
    for binary in [false, true] {
        let mut args = vec![
            "20",
            "memcslap",
            &servers,
            "--concurrency=4",
            "--execute-number=200",
            "--test=get",
        ];
        if binary {
            args.push("--binary");
        }
        let slap = ns.run("timeout", &args);
        assert!(slap.status.success(), "memcslap: {}", text(&slap));
    }
    let stat = text(&ns.run("timeout", &["20", "memcstat", &servers]));
    for field in ["get_hits: 1601", "get_misses: 1", "cmd_get: 1602", "curr_items: 400"] {
        assert!(
            stat.contains(field),
            "after memcslap, memcstat has no '{field}':\n{stat}"
        );
    }

    // pymemcache over the text protocol; then eviction under -m 2: 3000
    // values of 1000 bytes (each takes one 2 KiB buffer), the oldest go.
    let script = format!(
        r#"
from pymemcache.client.base import Client
c = Client(("{ip}", {PORT}), connect_timeout=5, timeout=5)
assert c.set("k", b"v" * 100, expire=0, noreply=False)
assert c.get("k") == b"v" * 100
assert c.add("k", b"x", noreply=False) is False
assert c.replace("k", b"r", noreply=False) is True
assert c.append("k", b"+", noreply=False) is True
assert c.prepend("k", b"-", noreply=False) is True
assert c.get("k") == b"-r+"
value, cas = c.gets("k")
assert c.cas("k", b"new", cas, noreply=False) is True
assert c.cas("k", b"newer", cas, noreply=False) is False
assert c.set("n", b"41", noreply=False)
assert c.incr("n", 1) == 42
assert c.decr("n", 50) == 0
assert c.get_many(["k", "n", "none"]) == {{"k": b"new", "n": b"0 "}}
assert c.touch("k", 100, noreply=False) is True
assert c.delete("k", noreply=False) is True
assert c.get("k") is None
assert c.version().startswith(b"1.6")
for i in range(3000):
    c.set("e%d" % i, bytes([65 + i % 26]) * 1000, noreply=False)
s = c.stats()
assert s[b"evictions"] > 1000, s
assert c.get("e0") is None
assert c.get("e2999") == bytes([65 + 2999 % 26]) * 1000
print("ok", s[b"evictions"], s[b"curr_items"])
"#,
        ip = server.ip
    );
    let py = ns.run("timeout", &["60", "/usr/bin/python3", "-c", &script]);
    assert!(
        py.status.success() && text(&py).starts_with("ok"),
        "pymemcache: {}",
        text(&py)
    );
    let out = server.stop();
    assert!(out.contains("evictions "), "{out}");
}

/// StackHost with `RandomSample(DROP LOSS)` on what it receives and on
/// the IPv4 frames it sends (the kernel here has no sch_netem).
fn lossy_host(loss: &str) -> String {
    let text = oxnet_stack::app::host::STACK_HOST
        .replace("elementclass StackHost", "elementclass LossyHost")
        .replace(
            "dev -> eth;",
            &format!("dev -> rxloss :: RandomSample(DROP {loss}) -> eth;"),
        )
        .replace(
            "arp :: ARPResolver($ip, $mac) -> out;",
            &format!("arp :: ARPResolver($ip, $mac) -> txloss :: RandomSample(DROP {loss}) -> out;"),
        );
    assert!(
        text.contains("RandomSample(DROP") && text.matches("RandomSample").count() == 2,
        "StackHost changed: {text}"
    );
    text
}

#[test]
fn gets_return_whole_values_while_four_clients_rewrite_them_under_loss() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("kvl");
    let tap = netns::unique("tkv");
    let config = format!(
        "{}\nhost :: LossyHost(\"tap:{tap},ip=10.93.0.1/24\", 10.93.0.2, fd00:93::2, 02:00:00:00:00:02);\n\
         AppExecutor;\nsrv :: TCPEpollServer(11211, MAX_PENDING 16777216);\n\
         srv -> kv :: MemcachedServer(MEMORY 8) -> srv;\n",
        lossy_host("0.03")
    );
    let mut oxnet = ns
        .command("timeout")
        .args([
            "120",
            OXNET,
            "run",
            "-e",
            &config,
            "-h",
            "kv.value_copies",
            "-h",
            "host/rxloss.drops",
            "-h",
            "host/txloss.drops",
            "-h",
            "kv.cmd_set",
            "-h",
            "kv.get_hits",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_link(&ns, &tap, &mut oxnet);
    // Four clients, four shared keys: sets of values stamped with their
    // writer and sequence, gets checked against the stamp's pattern.
    let script = r#"
import random, sys, threading, time
from pymemcache.client.base import Client

def value(stamp):
    body = (stamp * (4000 // len(stamp) + 1))[:4000 - len(stamp) - 1]
    return (stamp + "|" + body).encode()

checked = [0] * 4
errors = []
def client(n):
    for attempt in range(100):
        try:
            c = Client(("10.93.0.2", 11211), connect_timeout=5, timeout=20)
            c.version()
            break
        except Exception:
            time.sleep(0.1)
    rnd = random.Random(n)
    for seq in range(150):
        key = "k%d" % rnd.randrange(4)
        if rnd.random() < 0.5:
            c.set(key, value("w%d-%d" % (n, seq)), noreply=False)
        else:
            v = c.get(key)
            if v is None:
                continue
            stamp = v.split(b"|", 1)[0].decode()
            if v != value(stamp):
                errors.append("%s: a torn value (%d bytes, stamp %s)" % (key, len(v), stamp))
            checked[n] += 1
threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("checked", sum(checked), "errors", len(errors))
for e in errors[:5]: print(e)
sys.exit(1 if errors or sum(checked) < 100 else 0)
"#;
    let py = ns.run("timeout", &["100", "/usr/bin/python3", "-c", script]);
    // SAFETY: our own child (`timeout`, which passes SIGINT on), by pid.
    unsafe { libc::kill(oxnet.id() as libc::pid_t, libc::SIGINT) };
    let out = oxnet.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(py.status.success(), "pymemcache under loss: {}\n{stdout}", text(&py));
    assert!(text(&py).starts_with("checked"), "{}", text(&py));
    assert_eq!(common::stack::value(&stdout, "kv.value_copies"), 0, "{stdout}");
    // The loss was there: frames dropped both ways (each a retransmission
    // by one side or the other, while values were being replaced).
    let drops = |h: &str| common::stack::value(&stdout, h);
    assert!(
        drops("host/rxloss.drops") > 0 && drops("host/txloss.drops") > 0,
        "{stdout}"
    );
    assert!(drops("kv.cmd_set") >= 200 && drops("kv.get_hits") >= 100, "{stdout}");
    eprintln!("{}", text(&py).trim());
}
