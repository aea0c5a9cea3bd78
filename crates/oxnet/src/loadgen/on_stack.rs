//! `oxnet loadgen --device SPEC`: the client on oxnet's own stack. One
//! router per `-T` thread, built from the same configuration (the host
//! part of conf/echo-client.click, written out by [`config_text`], or
//! `--config FILE`), each owning queue *t* of the device as `oxnet run
//! -j` threads do; the router and the client's state machine run on the
//! thread that built them ([`super::stack::StackNet`]). With several
//! threads the stack picks source ports whose replies the NIC's RSS
//! brings back to the thread's queue (`TcpInfo::rss`, set by
//! TCPFlowLookup from the thread's place).

use super::client;
use super::options::Options;
use super::stack::StackNet;
use super::summary::Summary;
use oxnet_graph::elements::device::{reset_devices, ThreadPlace};
use oxnet_stack::tcp::info::TcpInfo;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

/// The most packets waiting for a neighbour's address.
const MAX_NEIGHBOR_QUEUE: usize = 4096;
/// Router time given to the closes of a run's end to leave.
const SETTLE_US: u64 = 20_000;

/// Where and as whom the client runs on oxnet's stack.
#[derive(Clone, Debug, Default)]
pub struct StackOptions {
    /// The device spec (`sim:NAME`, `tap:NAME`, `memif:...`,
    /// `af_packet:IF`, ...): the DEV variable of the configuration.
    pub device: Option<String>,
    /// Our IPv4 address and prefix length (ARP answers for it; the
    /// prefix gives the subnet's broadcast address).
    pub ip: Option<(Ipv4Addr, u8)>,
    /// Our IPv6 address.
    pub ip6: Option<Ipv6Addr>,
    /// Our Ethernet address.
    pub mac: String,
    /// Every packet goes to this Ethernet address (the server's, or the
    /// gateway's when the server is on another network): no ARP or ND
    /// for our own packets (ARP and ND still answer the peer). Needed
    /// with several threads: an ARP reply reaches one queue only.
    pub next_hop_mac: Option<String>,
    /// A configuration of one's own instead of the built-in one (file
    /// name, text): it must have one TCPStack; DEV, IP, IP6, MAC and
    /// NEXT_HOP_MAC (and NEIGHBOR_QUEUE) are given as variables.
    pub config: Option<(String, String)>,
    /// Simulated time (the router's clock jumps when nothing happens).
    pub simtime: bool,
    /// Before the clock starts, each thread opens one connection to the
    /// target and resets it ([`StackNet::prime`]): the link is up and
    /// the next hop resolved when the measured run begins. The server
    /// sees one more connection per thread.
    pub warm_up: bool,
}

/// Our default Ethernet address (locally administered).
pub const DEFAULT_MAC: &str = "02:6f:78:00:00:01";

/// The built-in configuration: conf/echo-client.click's host part for the
/// families `o` has an address of (device, ARP and ND, IPv4/IPv6 input,
/// ICMP, TCPStack), with no application (the load generator is the
/// application, through the socket API). ToDevice sends every push at
/// once (TIMEOUT 0): a partial burst held for its default 100 µs would
/// add the client's wait to every latency measured.
pub fn config_text(o: &StackOptions) -> String {
    let mut t = String::from(
        "// oxnet loadgen's host (conf/echo-client.click's shape).\n\
         dev :: FromDevice(\"$DEV\", PROMISC true);\n\
         out :: ToDevice(\"$DEV\", TIMEOUT 0);\n\
         eth :: Classifier(12/0800, 12/86dd, 12/0806, -);\n\
         dev -> eth;\n\
         eth[3] -> Discard;\n\
         tcp :: TCPStack;\n\
         family :: Classifier(0/40%f0, 0/60%f0);\n\
         tcp -> family;\n\
         tcperr :: TCPIcmpError;\n",
    );
    if o.ip.is_some() {
        t += "arp :: ARPResolver($IP, $MAC, QUEUE $NEIGHBOR_QUEUE) -> out;\n\
              eth[2] -> [1]arp;\n\
              ip4 :: IPv4Input($IP4);\n\
              eth[0] -> ip4;\n\
              ip4[0] -> tcp;\n\
              icmp4 :: ICMPv4Responder;\n\
              ip4[2] -> icmp4;\n\
              icmp4[0] -> arp;\n\
              icmp4[1] -> tcperr;\n\
              ip4[1] -> Discard;\n\
              ip4[3] -> Discard;\n";
        t += if o.next_hop_mac.is_some() {
            "family[0] -> EtherEncap(0x0800, $MAC, $NEXT_HOP_MAC) -> out;\n"
        } else {
            "family[0] -> arp;\n"
        };
    } else {
        t += "eth[0] -> Discard;\neth[2] -> Discard;\nfamily[0] -> Discard;\n";
    }
    if o.ip6.is_some() {
        t += "nd :: NDResolver($IP6, $MAC, QUEUE $NEIGHBOR_QUEUE) -> out;\n\
              ip6 :: IPv6Input($IP6);\n\
              eth[1] -> ip6;\n\
              ip6[0] -> tcp;\n\
              icmp6 :: ICMPv6Responder;\n\
              ip6[2] -> icmp6;\n\
              icmp6[0] -> nd;\n\
              icmp6[1] -> tcperr;\n\
              icmp6[2] -> [1]nd;\n\
              ip6[1] -> Discard;\n\
              ip6[3] -> Discard;\n";
        t += if o.next_hop_mac.is_some() {
            "family[1] -> EtherEncap(0x86dd, $MAC, $NEXT_HOP_MAC) -> out;\n"
        } else {
            "family[1] -> nd;\n"
        };
    } else {
        t += "eth[1] -> Discard;\nfamily[1] -> Discard;\n";
    }
    t
}

/// The configuration's variables; `connections` is a thread's most.
fn variables(o: &StackOptions, connections: usize) -> Vec<(String, String)> {
    // Every connection's SYN may wait for the server's address at the
    // start: the neighbour cache keeps them all (3 by default, Linux's old
    // unres_qlen, would leave the others to a 1 s retransmission).
    let queue = connections.clamp(3, MAX_NEIGHBOR_QUEUE);
    let mut v = vec![
        ("MAC".to_string(), o.mac.clone()),
        ("NEIGHBOR_QUEUE".to_string(), queue.to_string()),
    ];
    if let Some(d) = &o.device {
        v.push(("DEV".into(), d.clone()));
    }
    if let Some((ip, len)) = o.ip {
        v.push(("IP".into(), format!("{ip}/{len}")));
        v.push(("IP4".into(), ip.to_string()));
    }
    if let Some(ip6) = o.ip6 {
        v.push(("IP6".into(), ip6.to_string()));
    }
    if let Some(m) = &o.next_hop_mac {
        v.push(("NEXT_HOP_MAC".into(), m.clone()));
    }
    v
}

/// Checks what the stack's client needs beyond [`Options`].
fn check(options: &Options, o: &StackOptions) -> Result<(), String> {
    if o.device.is_none() && o.config.is_none() {
        return Err("give --device SPEC (or --config FILE) to run on oxnet's stack".into());
    }
    let family_ok = match options.target.ip() {
        IpAddr::V4(_) => o.ip.is_some(),
        IpAddr::V6(_) => o.ip6.is_some(),
    };
    if !family_ok {
        return Err(format!(
            "--target {}: give our address of its family (--ip ADDR/PREFIX or --ip6 ADDR)",
            options.target
        ));
    }
    if options.threads > 1 {
        if o.next_hop_mac.is_none() && o.config.is_none() {
            return Err(format!(
                "--threads {}: on oxnet's stack several threads need --next-hop-mac MAC (an ARP or ND \
                 reply reaches one thread's queue only)",
                options.threads
            ));
        }
        if options.target.is_ipv6() {
            return Err(format!(
                "--threads {} with an IPv6 target: the drivers' RSS hash covers TCP over IPv4 only, so \
                 replies could reach another thread's stack; use one thread",
                options.threads
            ));
        }
    }
    Ok(())
}

/// Runs the load described by `options` on oxnet's stack as `o` says
/// (module documentation). The summary's seconds are the routers' time
/// (simulated with `--simtime`).
pub fn run(options: &Options, o: &StackOptions) -> Result<Summary, String> {
    check(options, o)?;
    oxnet_sim::install();
    oxnet_apps::register();
    let (name, text) = match &o.config {
        Some((name, text)) => (name.clone(), text.clone()),
        None => ("<oxnet loadgen>".to_string(), config_text(o)),
    };
    let vars = variables(o, options.thread_plan(0).connections);
    let n = options.threads;
    let issued = Arc::new(AtomicU64::new(0));
    // Each thread says when its router is built, then waits for the go
    // (its channel closing) until every thread has taken its queues.
    let (built_tx, built_rx) = mpsc::channel::<()>();
    let mut go_senders = Vec::new();
    let failed = Arc::new(AtomicBool::new(false));
    let cpu_before = super::sys::process_cpu_seconds();
    reset_devices();
    let mut threads = Vec::new();
    for t in 0..n {
        let plan = options.thread_plan(t);
        let (name, text, vars) = (name.clone(), text.clone(), vars.clone());
        let (issued, built, any_failed) = (issued.clone(), built_tx.clone(), failed.clone());
        let (go_tx, go) = mpsc::channel::<()>();
        go_senders.push(go_tx);
        let (v4, v6, simtime, warm_up) = (
            o.ip.map(|(a, _)| IpAddr::V4(a)),
            o.ip6.map(IpAddr::V6),
            o.simtime,
            o.warm_up,
        );
        let spawned =
            std::thread::Builder::new()
                .name(format!("loadgen{t}"))
                .spawn(move || -> Result<(Summary, f64), String> {
                    let place = ThreadPlace {
                        index: t as u16,
                        count: n as u16,
                    };
                    let router = oxnet_graph::build_on_thread(&name, &text, &vars, place).and_then(|r| {
                        // Right after the build, on this thread: its TCPInfo.
                        // The elements hold it; a fresh one (one reference)
                        // means the configuration has no TCPStack.
                        let stack = oxnet_stack::elements::shared::<TcpInfo>();
                        if Rc::strong_count(&stack) < 2 {
                            return Err(format!("{name}: no TCPStack in the configuration"));
                        }
                        Ok((r, stack))
                    });
                    if router.is_err() {
                        any_failed.store(true, Ordering::Relaxed);
                    }
                    let _ = built.send(());
                    let _ = go.recv();
                    let (router, stack) = router?;
                    if any_failed.load(Ordering::Relaxed) {
                        return Err("another thread's router could not be built".into());
                    }
                    let mut net = StackNet::new(router, stack, v4, v6, simtime);
                    if warm_up {
                        // Refused is as good as accepted here: the path
                        // works. Any other failure shows in the run.
                        let _ = net.prime(&plan.options.target, plan.options.timeout);
                    }
                    let start = super::net::Net::now(&net);
                    let idle_before = net.idle();
                    let mut summary = client::run_on(&mut net, &plan, &issued, start)?;
                    let seconds = super::net::Net::now(&net).saturating_duration_since(start);
                    // `idle` is real time: in simulated time there is no
                    // busy share to tell.
                    summary.busy_seconds =
                        (!simtime).then(|| seconds.saturating_sub(net.idle() - idle_before).as_secs_f64());
                    net.settle(SETTLE_US);
                    Ok((summary, seconds.as_secs_f64()))
                });
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => {
                // The threads started end at the go, seeing the failure.
                failed.store(true, Ordering::Relaxed);
                drop(go_senders);
                return Err(format!("cannot start a client thread: {e}"));
            }
        }
    }
    drop(built_tx);
    for _ in 0..n {
        let _ = built_rx.recv();
    }
    // Every thread has taken its queues; the rest are closed now.
    reset_devices();
    drop(go_senders);
    let mut summary = Summary::new();
    let mut seconds: f64 = 0.0;
    let mut first_error = None;
    for h in threads {
        match h
            .join()
            .map_err(|_| "a client thread panicked".to_string())
            .and_then(|r| r)
        {
            Ok((part, s)) => {
                summary.merge(&part);
                seconds = seconds.max(s);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    summary.seconds = seconds;
    summary.cpu_seconds = super::sys::process_cpu_seconds() - cpu_before;
    summary.set_load(options);
    Ok(summary)
}
