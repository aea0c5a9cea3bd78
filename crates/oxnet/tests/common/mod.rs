//! Helpers shared by the integration tests: running the `oxnet` binary,
//! reading numbers out of its JSON line, and the guest-side script pieces.
#![allow(dead_code)] // each test file uses a different subset

use std::process::{Command, Output};

pub mod netns;
pub mod stack;

/// Runs the `oxnet` binary of this build with `args`.
pub fn oxnet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxnet"))
        .args(args)
        .output()
        .expect("run oxnet")
}

/// Bytes as text, lossily.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last line of stdout, which `--json` promises is one JSON object.
pub fn json_line(o: &Output) -> String {
    text(&o.stdout).lines().last().unwrap_or("").to_string()
}

/// The number after `"key":` in a JSON line (digits and a decimal point).
pub fn number(json: &str, key: &str) -> f64 {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} missing in {json}"));
    json[at + key.len() + 3..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
}

/// The whole number after `"key":` in a JSON line.
pub fn field(json: &str, key: &str) -> u64 {
    number(json, key) as u64
}

/// The line of `out` that starts with `prefix`.
pub fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

/// A guest shell snippet that waits until `file` has `lines` lines saying
/// "ready" (the commands announce each initialised device on stderr), at
/// most 60 s.
pub fn wait_ready(file: &str, lines: usize) -> String {
    format!(
        "n=0; until [ \"$(grep -c ready {file} 2>/dev/null)\" -ge {lines} ]; do n=$((n+1)); \
         [ $n -gt 600 ] && {{ echo 'timeout waiting for {file}'; cat {file}; exit 9; }}; sleep 0.1; done"
    )
}

/// The statically linked `oxnet` for QEMU guests (built once per process).
pub fn static_oxnet() -> std::path::PathBuf {
    oxnet_rig::static_binary("oxnet", "oxnet").expect("static build of oxnet")
}

/// The guest script of the ixy-ci topology over NICs 0–3 of a rig guest:
/// `pcap` on NIC 3 and `fwd` between NICs 1 and 2 start first (the script
/// waits until they say they are ready), then `pktgen` sends `count`
/// numbered frames on NIC 0. `extra` goes to all three commands,
/// `pktgen_extra` to pktgen only. Prints one line each, `GEN `, `PCAP `,
/// `FWD `, with the command's final JSON, then their stderr.
pub fn topology_script(count: u64, extra: &str, pktgen_extra: &str) -> String {
    topology_script_on([0, 1, 2, 3], count, extra, pktgen_extra)
}

/// [`topology_script`] over the NICs `[pktgen, fwd in, fwd out, pcap]`.
pub fn topology_script_on(nics: [usize; 4], count: u64, extra: &str, pktgen_extra: &str) -> String {
    let nic = |i: usize| oxnet_rig::Vm::nic_address(nics[i]);
    format!(
        r#"oxnet pcap {cap} /tmp/out.pcap --count {count} --seconds 120 --json --quiet {extra} > /tmp/pcap.out 2> /tmp/pcap.err &
PCAP=$!
oxnet fwd {fwd_in} {fwd_out} --seconds 120 --json --quiet {extra} > /tmp/fwd.out 2> /tmp/fwd.err &
FWD=$!
{wait_pcap}
{wait_fwd}
oxnet pktgen {gen} --count {count} --rate 0.005 --json --quiet {extra} {pktgen_extra} > /tmp/gen.out 2> /tmp/gen.err
echo "GEN $(tail -n 1 /tmp/gen.out)"
wait $PCAP || {{ echo "pcap failed"; cat /tmp/pcap.err; exit 3; }}
echo "PCAP $(tail -n 1 /tmp/pcap.out)"
kill -INT $FWD; wait $FWD || true
echo "FWD $(tail -n 1 /tmp/fwd.out)"
cat /tmp/gen.err /tmp/fwd.err /tmp/pcap.err
"#,
        cap = nic(3),
        fwd_in = nic(1),
        fwd_out = nic(2),
        gen = nic(0),
        wait_pcap = wait_ready("/tmp/pcap.err", 1),
        wait_fwd = wait_ready("/tmp/fwd.err", 2),
    )
}

/// `bytes` as a packet chained from pieces of at most `piece` bytes from
/// `pool` (the first piece must hold the headers a test needs).
pub fn chained(pool: &oxnet_driver::Mempool, bytes: &[u8], piece: usize) -> oxnet_driver::Packet {
    let mut pieces = bytes.chunks(piece);
    let mut head = pool.alloc().unwrap();
    let first = pieces.next().unwrap();
    head.set_len(first.len()).unwrap();
    head.copy_from_slice(first);
    for chunk in pieces {
        let mut p = pool.alloc().unwrap();
        p.set_len(chunk.len()).unwrap();
        p.copy_from_slice(chunk);
        head.append(p);
    }
    head
}

/// Ends a child process this test started: SIGTERM (testpmd and OVS print
/// their final statistics and close their sockets on it), then SIGKILL if
/// it is still there after 10 s. Reaps it either way.
pub fn terminate(child: &mut std::process::Child) {
    // SAFETY: signalling a process we started, by its pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let start = std::time::Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The ixgbe driver on port `port` of the global software 82599 world
/// (plain memory unless `config.memory` says otherwise), with the frames
/// it sends captured (`World::frames_on_wire`).
pub fn capturing_sim_port(
    port: &str,
    config: &oxnet_driver::Config,
) -> oxnet_driver::ixgbe::IxgbeDevice<oxnet_sim::SimRegisters> {
    let dev = oxnet_driver::ixgbe::IxgbeDevice::init(
        oxnet_sim::World::global().port(port),
        &format!("sim:{port}"),
        config,
        oxnet_driver::MemoryKind::Plain,
    )
    .unwrap_or_else(|e| panic!("{port}: {e}"));
    oxnet_sim::World::global().set_capture(port, true);
    dev
}

/// [`capturing_sim_port`] with rings of 128 and `offloads` (the transmit
/// feature tests).
pub fn offload_sim_port(
    port: &str,
    offloads: oxnet_driver::Offloads,
) -> oxnet_driver::ixgbe::IxgbeDevice<oxnet_sim::SimRegisters> {
    let config = oxnet_driver::Config {
        rx_ring_size: 128,
        tx_ring_size: 128,
        offloads,
        ..oxnet_driver::Config::default()
    };
    capturing_sim_port(port, &config)
}

/// Sends `packets` on `dev` (port `port` of the global world, capturing)
/// and returns the frames on the wire, FCS removed; every packet taken and
/// no model fault on the port.
pub fn send_on_wire(
    dev: &mut oxnet_driver::ixgbe::IxgbeDevice<oxnet_sim::SimRegisters>,
    port: &str,
    packets: Vec<oxnet_driver::Packet>,
) -> Vec<Vec<u8>> {
    use oxnet_driver::Device;
    let mut batch = oxnet_driver::PacketBatch::with_capacity(packets.len());
    for p in packets {
        batch.push(p);
    }
    let n = batch.len();
    assert_eq!(dev.tx_batch(0, &mut batch), n, "{port}: every packet taken");
    let faults = oxnet_sim::World::global().faults();
    assert!(
        faults.iter().all(|f| !f.contains(port)),
        "{port}: model faults {faults:?}"
    );
    oxnet_sim::World::global()
        .frames_on_wire(port)
        .into_iter()
        .map(|mut f| {
            f.truncate(f.len() - 4);
            f
        })
        .collect()
}

/// Pins the calling thread to CPU 0: the busy-polling peer (testpmd, a
/// back end) runs on CPU 1, and two busy pollers on one CPU make both
/// crawl on this 2-core machine.
pub fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
