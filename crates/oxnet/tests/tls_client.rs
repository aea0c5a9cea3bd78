//! TLSClient against OpenSSL: socat's OPENSSL-LISTEN with `cat` behind
//! it (a TLS echo server on OpenSSL) in a namespace made here, and
//! oxnet's stack on a TAP device in that namespace (this test binary
//! again, run inside it: a graph with a test element in it). A test element
//! asks TLSClient, through TCPEpollClient, for four connections with
//! TLS 1.3 and four with TLS 1.2, writing its bytes and its Eof at once;
//! the server's certificate is checked against the CA file for
//! SERVER_NAME localhost. Every byte comes back unchanged, the events in
//! order (Open, Data, Eof, Close), the counters exact.

mod common;

use common::netns::{self, Netns};
use oxnet_apps::stream::{self, StreamEvent};
use oxnet_driver::PacketBatch;
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;
use oxnet_graph::Ctx;
use oxnet_stack::wire::IpEndpoint;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BYTES: usize = 50_000;
const PORT: u16 = 4433;

#[derive(Default, Debug)]
struct Seen {
    data: Vec<u8>,
    closes: Vec<i32>,
    /// Events in order (O, D, E, C), repeats of D folded.
    order: String,
}

static SEEN: Mutex<BTreeMap<u32, Seen>> = Mutex::new(BTreeMap::new());

fn payload(id: u32) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ id as u64;
    (0..BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// TlsClientTestRequester(FIRST, COUNT): COUNT connections to
/// 10.87.0.1:4433 from id FIRST, each with its bytes and Eof at once.
#[derive(Default)]
struct Requester {
    first: u32,
    count: u32,
}

impl Element for Requester {
    fn class_name(&self) -> &'static str {
        "TlsClientTestRequester"
    }
    fn processing(&self) -> &'static str {
        "h/h"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.first = args::unsigned(&a.required("FIRST")?)? as u32;
        self.count = args::unsigned(&a.required("COUNT")?)? as u32;
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let pool = ctx.pool().clone();
        let mut out = PacketBatch::default();
        let server = IpEndpoint::new(Ipv4Addr::new(10, 87, 0, 1), PORT);
        for id in self.first..self.first + self.count {
            out.push(stream::open_request(&pool, id, server).unwrap());
            for chunk in payload(id).chunks(1400) {
                let mut p = pool.alloc().unwrap();
                p.set_len(chunk.len()).unwrap();
                p.copy_from_slice(chunk);
                out.push(stream::data(p, id));
            }
            out.push(stream::control(&pool, id, StreamEvent::Eof).unwrap());
        }
        ctx.push(0, out);
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, _ctx: &mut Ctx<'_>) {
        let mut seen = SEEN.lock().unwrap();
        for p in batch.iter() {
            let s = seen.entry(stream::socket(p)).or_default();
            let letter = match stream::event(p) {
                StreamEvent::Open => 'O',
                StreamEvent::Data => {
                    s.data.extend(p.segments().flat_map(|seg| seg.iter().copied()));
                    'D'
                }
                StreamEvent::Eof => 'E',
                StreamEvent::Close => {
                    s.closes.push(stream::errno(p));
                    'C'
                }
            };
            if !(letter == 'D' && s.order.ends_with('D')) {
                s.order.push(letter);
            }
        }
        batch.clear();
    }
}

const TEST_MODULE: Module = Module {
    classes: &["TlsClientTestRequester"],
    create: |class| (class == "TlsClientTestRequester").then(|| Box::new(Requester::default()) as Box<dyn Element>),
};

fn handler(router: &oxnet_graph::Router, spec: &str) -> String {
    let (name, h) = spec.rsplit_once('.').unwrap();
    router
        .read_handler(router.find(name).unwrap(), h)
        .unwrap()
        .trim()
        .to_string()
}

/// Set in the child's environment: the TAP's name and the CA file.
const CHILD_TAP: &str = "OXNET_TLS_CLIENT_TAP";
const CHILD_CA: &str = "OXNET_TLS_CLIENT_CA";

/// The child's part, run by the test below as this same test binary
/// under `ip netns exec` (which gives the namespace its own /sys, where
/// the devices look interfaces up); without the environment, nothing.
#[test]
fn router_in_the_namespace() {
    let (Ok(tap), Ok(ca)) = (std::env::var(CHILD_TAP), std::env::var(CHILD_CA)) else {
        return;
    };
    oxnet_apps::register();
    oxnet_graph::elements::add_modules(&[TEST_MODULE]);
    let config = format!(
        r#"
host :: StackHost("tap:{tap},ip=10.87.0.1/24", 10.87.0.2, fd00:87::2, 02:00:00:00:87:02);
AppExecutor;
r13 :: TlsClientTestRequester(FIRST 1, COUNT 4) -> [1]c13 :: TLSClient(CA {ca}, SERVER_NAME localhost, VERSIONS 1.3);
c13[1] -> e13 :: TCPEpollClient(SRC 10.87.0.2) -> c13 -> r13;
r12 :: TlsClientTestRequester(FIRST 101, COUNT 4) -> [1]c12 :: TLSClient(CA {ca}, SERVER_NAME localhost, VERSIONS 1.2);
c12[1] -> e12 :: TCPEpollClient(SRC 10.87.0.2) -> c12 -> r12;
"#
    );
    let mut router = oxnet_graph::build("tls-client", &config, &[]).unwrap();
    let ids: Vec<u32> = (1..=4).chain(101..=104).collect();
    let start = Instant::now();
    loop {
        let done = {
            let seen = SEEN.lock().unwrap();
            ids.iter().all(|id| seen.get(id).is_some_and(|s| !s.closes.is_empty()))
        };
        if done || start.elapsed() > Duration::from_secs(30) {
            break;
        }
        router.run_once();
    }
    for _ in 0..200 {
        router.run_once();
    }
    let counters: Vec<String> = ["handshakes", "errors", "truncated", "last_error"]
        .iter()
        .flat_map(|h| ["c13", "c12"].map(|side| format!("{side}.{h}={}", handler(&router, &format!("{side}.{h}")))))
        .collect();
    println!("counters: {counters:?}");
    let seen = SEEN.lock().unwrap();
    for id in ids {
        let s = seen
            .get(&id)
            .unwrap_or_else(|| panic!("connection {id}: nothing; {counters:?}"));
        assert_eq!(s.order, "ODEC", "connection {id}: {counters:?}");
        assert_eq!(s.closes, [0], "connection {id}");
        assert!(
            s.data == payload(id),
            "connection {id}: {} bytes back, not the ones sent",
            s.data.len()
        );
    }
    for side in ["c13", "c12"] {
        assert_eq!(handler(&router, &format!("{side}.handshakes")), "4", "{counters:?}");
        assert_eq!(handler(&router, &format!("{side}.errors")), "0", "{counters:?}");
    }
    println!("tls-client: all connections echoed");
}

#[test]
fn tls_client_talks_to_openssl_with_tls13_and_tls12_byte_exact() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("tlc");
    let tap = netns::unique("ttc");
    let dir = std::env::temp_dir().join(format!("oxnet-tls-client-{}", ns.name));
    let (cert, key) = oxnet_apps::tls::cert::write_self_signed(&dir, &["localhost".to_string()]).unwrap();
    let mut socat = ns
        .command("timeout")
        .args(["60", "socat"])
        .arg(format!(
            "OPENSSL-LISTEN:{PORT},reuseaddr,fork,cert={},key={},verify=0",
            cert.display(),
            key.display()
        ))
        .arg("EXEC:cat")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("socat (scripts/install-deps.sh installs it)");
    let start = Instant::now();
    loop {
        let listening = ns.run("ss", &["-Hltn", &format!("sport = :{PORT}")]);
        if !String::from_utf8_lossy(&listening.stdout).trim().is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "socat does not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let child = ns
        .command("timeout")
        .arg("60")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "router_in_the_namespace",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_TAP, &tap)
        .env(CHILD_CA, &cert)
        .output()
        .unwrap();
    // SAFETY: our own child (`timeout`, which passes SIGTERM on), by pid.
    unsafe { libc::kill(socat.id() as libc::pid_t, libc::SIGTERM) };
    let _ = socat.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    eprintln!("{all}");
    assert!(child.status.success(), "{all}");
    assert!(all.contains("tls-client: all connections echoed"), "{all}");
    drop(ns);
}
