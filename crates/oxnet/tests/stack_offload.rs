//! The stack's offloads on the software 82599 (issue 11 item 7): two
//! hosts on one stack (`oxnet run`, as tests/stack_cores.rs) over two
//! wired `sim:` ports, an echo client sending bulk data and checking
//! every byte that comes back, with the device's TSO and checksum
//! offload, its RSC, or TCPGRO in place of RSC; TSO and checksum offload
//! also over IPv6 (fd08::1 and fd08::2). Captures at each port's input
//! (ToDump) are the frames on the wire.

use std::process::Command;

/// `oxnet run -e CONFIG` with the handlers to print; ended after 60 s.
fn run(config: &str, handlers: &[&str]) -> String {
    let mut cmd = Command::new("timeout");
    cmd.args(["60", env!("CARGO_BIN_EXE_oxnet"), "run", "-e", config]);
    for h in handlers {
        cmd.args(["-h", h]);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "oxnet did not finish: {stderr}");
    stdout
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

/// Host A (10.8.0.1, the client) on sim:NAMEa, host B (10.8.0.2, the
/// echo server) on sim:NAMEb; `dev` is the devices' offload keywords,
/// `tcp` TCPSettings' arguments, `gro` whether TCPGRO stands between IPv4Input and
/// the stack (`gro`: TCPGRO), and the captures of what each port
/// receives go to `dump` with the extensions a.pcap and b.pcap.
fn config(name: &str, dev: &str, tcp: &str, gro: bool, bytes: usize, dump: &std::path::Path) -> String {
    let (gro_a, gro_b) = if gro {
        ("-> ga :: TCPGRO", "-> gb :: TCPGRO")
    } else {
        ("", "")
    };
    let (a, b) = (format!("{name}a"), format!("{name}b"));
    let dump_a = dump.with_extension("a.pcap");
    let dump_b = dump.with_extension("b.pcap");
    format!(
        r#"
define($MACA 02:00:00:00:0a:01, $MACB 02:00:00:00:0b:02)
ina :: FromDevice("sim:{a},wire={b}", PROMISC true {dev});
inb :: FromDevice("sim:{b}", PROMISC true {dev});
ina -> ToDump("{}", SNAPLEN 0) -> ca :: Classifier(12/0800, -);
inb -> ToDump("{}", SNAPLEN 0) -> cb :: Classifier(12/0800, -);
ca[1] -> Discard;
cb[1] -> Discard;
ca[0] -> ipa :: IPv4Input(10.8.0.1);
cb[0] -> ipb :: IPv4Input(10.8.0.2);
TCPSettings({tcp});
tcp :: TCPStack;
ipa[0] {gro_a} -> tcp;
ipb[0] {gro_b} -> tcp;
ipa[1] -> Discard; ipa[2] -> Discard; ipa[3] -> Discard;
ipb[1] -> Discard; ipb[2] -> Discard; ipb[3] -> Discard;
route :: IPClassifier(dst host 10.8.0.2, dst host 10.8.0.1);
tcp -> route;
route[0] -> EtherEncap(0x0800, $MACA, $MACB) -> outa :: ToDevice("sim:{a},wire={b}" {dev});
route[1] -> EtherEncap(0x0800, $MACB, $MACA) -> outb :: ToDevice("sim:{b}" {dev});
AppExecutor;
srv :: TCPEchoServer(7, ADDR 10.8.0.2);
cli :: TCPEchoClient(10.8.0.2, PORT 7, SRC 10.8.0.1, CONNECTIONS 1, BYTES {bytes}, STOP true);
"#,
        dump_a.display(),
        dump_b.display()
    )
}

/// [`config`] over IPv6: host A fd08::1, host B fd08::2, the same
/// devices, TCPSettings and captures; IPv6Input in place of IPv4Input,
/// the stack's output routed by the last byte of the IPv6 destination
/// (offset 39 of the IP packet, RFC 8200 §3) to an EtherEncap of type
/// 86DD (no Neighbor Discovery: the MACs are fixed).
fn config6(name: &str, dev: &str, tcp: &str, bytes: usize, dump: &std::path::Path) -> String {
    let (a, b) = (format!("{name}a"), format!("{name}b"));
    let dump_a = dump.with_extension("a.pcap");
    let dump_b = dump.with_extension("b.pcap");
    format!(
        r#"
define($MACA 02:00:00:00:0a:01, $MACB 02:00:00:00:0b:02)
ina :: FromDevice("sim:{a},wire={b}", PROMISC true {dev});
inb :: FromDevice("sim:{b}", PROMISC true {dev});
ina -> ToDump("{}", SNAPLEN 0) -> ca :: Classifier(12/86dd, -);
inb -> ToDump("{}", SNAPLEN 0) -> cb :: Classifier(12/86dd, -);
ca[1] -> Discard;
cb[1] -> Discard;
ca[0] -> ipa :: IPv6Input(fd08::1);
cb[0] -> ipb :: IPv6Input(fd08::2);
TCPSettings({tcp});
tcp :: TCPStack;
ipa[0] -> tcp;
ipb[0] -> tcp;
ipa[1] -> Discard; ipa[2] -> Discard; ipa[3] -> Discard;
ipb[1] -> Discard; ipb[2] -> Discard; ipb[3] -> Discard;
route :: Classifier(39/02, 39/01);
tcp -> route;
route[0] -> EtherEncap(0x86dd, $MACA, $MACB) -> outa :: ToDevice("sim:{a},wire={b}" {dev});
route[1] -> EtherEncap(0x86dd, $MACB, $MACA) -> outb :: ToDevice("sim:{b}" {dev});
AppExecutor;
srv :: TCPEchoServer(7, ADDR fd08::2);
cli :: TCPEchoClient(fd08::2, PORT 7, SRC fd08::1, CONNECTIONS 1, BYTES {bytes}, STOP true);
"#,
        dump_a.display(),
        dump_b.display()
    )
}

/// The frames of a pcap file (this machine's byte order, ToDump's).
fn frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        let len = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(bytes[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

/// The TCP payload length of an Ethernet/IPv4/TCP frame.
fn tcp_payload(frame: &[u8]) -> usize {
    let ip_len = u16::from_be_bytes([frame[16], frame[17]]) as usize;
    let ihl = (frame[14] & 0xF) as usize * 4;
    ip_len - ihl - (frame[14 + ihl + 12] >> 4) as usize * 4
}

/// Where the TCP header of an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP
/// frame (no extension headers) starts, and its payload length; `None`
/// for any other frame.
fn tcp_segment(f: &[u8]) -> Option<(usize, usize)> {
    if f[12..14] == [0x08, 0x00] && f[23] == 6 {
        return Some((14 + (f[14] & 0xF) as usize * 4, tcp_payload(f)));
    }
    if f[12..14] == [0x86, 0xdd] && f[20] == 6 {
        // RFC 8200 §3: the payload length counts the TCP header and data.
        let payload = u16::from_be_bytes([f[18], f[19]]) as usize;
        return Some((54, payload - (f[54 + 12] >> 4) as usize * 4));
    }
    None
}

/// For each direction (TCP source port) of the captured frames: the
/// data's sequence ranges, relative to the first one seen, cover one
/// contiguous range of `bytes` bytes (no hole, whatever was sent twice).
fn assert_streams_whole(wire: &[Vec<u8>], bytes: usize) {
    let mut by_port: std::collections::BTreeMap<u16, Vec<(u32, usize)>> = Default::default();
    for f in wire {
        let Some((tcp, len)) = tcp_segment(f) else { continue };
        if len > 0 {
            let port = u16::from_be_bytes([f[tcp], f[tcp + 1]]);
            let seq = u32::from_be_bytes(f[tcp + 4..tcp + 8].try_into().unwrap());
            by_port.entry(port).or_default().push((seq, len));
        }
    }
    assert_eq!(by_port.len(), 2, "data both ways");
    for (port, segments) in by_port {
        let first = segments[0].0;
        let mut ranges: Vec<(usize, usize)> = segments
            .iter()
            .map(|&(seq, len)| {
                let at = seq.wrapping_sub(first) as usize;
                (at, at + len)
            })
            .collect();
        ranges.sort();
        let mut end = 0;
        for (start, stop) in ranges {
            assert!(start <= end, "port {port}: a hole at {end}..{start}");
            end = end.max(stop);
        }
        assert_eq!(end, bytes, "port {port}");
    }
}

const BYTES: usize = 200_000;

/// Runs the echo with the given switches; returns the printed handlers
/// and the frames both ports received.
fn echo(name: &str, dev: &str, tcp: &str, gro: bool, extra: &[&str]) -> (String, Vec<Vec<u8>>) {
    let mut handlers = vec!["ipa.bad_checksum", "ipb.bad_checksum"];
    handlers.extend_from_slice(extra);
    echo_with(name, &handlers, |dump| config(name, dev, tcp, gro, BYTES, dump))
}

/// [`echo`] over IPv6 ([`config6`]).
fn echo6(name: &str, dev: &str, tcp: &str, extra: &[&str]) -> (String, Vec<Vec<u8>>) {
    echo_with(name, extra, |dump| config6(name, dev, tcp, BYTES, dump))
}

/// Runs the configuration `make(dump)` makes; see [`echo`].
fn echo_with(name: &str, extra: &[&str], make: impl Fn(&std::path::Path) -> String) -> (String, Vec<Vec<u8>>) {
    // One directory per run: the tests run in parallel threads of one
    // process, and each removes its own directory when done.
    let dir = std::env::temp_dir().join(format!("oxnet-stack-offload-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join(name);
    let mut handlers = vec![
        "cli.done",
        "cli.failed",
        "cli.bytes",
        "outa.count",
        "outb.count",
        "tcp/seg.tso",
        "tcp/fl.bad_checksums",
        "tcp/fl.device_checked",
    ];
    handlers.extend_from_slice(extra);
    let out = run(&make(&dump), &handlers);
    assert_eq!(
        (
            value(&out, "cli.done"),
            value(&out, "cli.failed"),
            value(&out, "cli.bytes")
        ),
        (1, 0, BYTES as u64),
        "every byte echoed and checked:\n{out}"
    );
    let mut wire = frames(&dump.with_extension("a.pcap"));
    wire.extend(frames(&dump.with_extension("b.pcap")));
    let _ = std::fs::remove_file(dump.with_extension("a.pcap"));
    let _ = std::fs::remove_file(dump.with_extension("b.pcap"));
    let _ = std::fs::remove_dir(&dir);
    (out, wire)
}

/// With TSO on (the device's, both modes) the stack hands the
/// device fewer packets than there are frames on the wire; every frame
/// is at most one MSS (1448 bytes of data beside the timestamps) with
/// good IPv4 and TCP checksums, checked in software at the receiver
/// (receive checksum offload off), and the frames' sequence numbers
/// cover each direction's stream without a hole (the echo client checks
/// the payload bytes); with TSO off, one packet per frame.
#[test]
fn tso_puts_mss_sized_frames_with_good_checksums_on_the_wire() {
    // The device's TSO with one descriptor per buffer of the chain
    // (multi) and with the chain copied into one buffer (single).
    for mode in ["off", "multi", "single"] {
        let tso = mode != "off";
        let dev = if tso {
            format!(", TSO {mode}, TX_CHECKSUM true")
        } else {
            String::new()
        };
        let (out, wire) = echo(&format!("tso-{mode}"), &dev, &format!("TSO {tso}"), false, &[]);
        let handed = value(&out, "outa.count") + value(&out, "outb.count");
        for (k, f) in wire.iter().enumerate() {
            if f[12..14] == [0x08, 0x00] && f[23] == 6 {
                let verdict = oxnet_driver::offload::checksum_verdict(f);
                assert_eq!(verdict, 0b11, "frame {k}: IP and TCP checksums good");
                assert!(tcp_payload(f) <= 1448, "frame {k}: {} bytes", tcp_payload(f));
            }
        }
        assert_streams_whole(&wire, BYTES);
        assert_tso_counts(&out, handed, wire.len(), tso);
    }
}

/// The stack's counters after a TSO run: no bad checksum, every verdict
/// software's (receive offload off); with TSO, large segments and fewer
/// packets `handed` to the devices than `frames` on the wire; without,
/// none and one packet a frame.
fn assert_tso_counts(out: &str, handed: u64, frames: usize, tso: bool) {
    assert_eq!(value(out, "tcp/fl.bad_checksums"), 0);
    assert_eq!(value(out, "tcp/fl.device_checked"), 0, "software verdicts");
    let large = value(out, "tcp/seg.tso");
    if tso {
        assert!(large > 0, "{out}");
        assert!(handed < frames as u64, "{handed} packets, {frames} frames");
    } else {
        assert_eq!(large, 0);
        assert_eq!(handed, frames as u64);
    }
}

/// Checksum offload on transmit and receive: the device inserts the
/// checksums (TX_CHECKSUM; CHECKSUM_OFFLOAD in the stack) and its
/// verdicts are taken on receive (RX_CHECKSUM): no segment is summed in
/// software by TCPFlowLookup, none is bad, every frame's checksums good.
#[test]
fn checksum_offload_both_ways() {
    let (out, wire) = echo(
        "csum",
        ", TX_CHECKSUM true, RX_CHECKSUM true",
        "CHECKSUM_OFFLOAD true",
        false,
        &["tcp/fl.count"],
    );
    for f in wire.iter().filter(|f| f[12..14] == [0x08, 0x00] && f[23] == 6) {
        assert_eq!(oxnet_driver::offload::checksum_verdict(f), 0b11);
    }
    assert_eq!(value(&out, "tcp/fl.bad_checksums"), 0);
    assert_eq!(value(&out, "tcp/fl.device_checked"), value(&out, "tcp/fl.count"));
}

/// RSC on the receiving devices: in-order segments arrive coalesced
/// (chains: IPv4Input's `coalesced`), fewer packets than frames reach
/// the stack, and the bytes come back whole and in order.
#[test]
fn rsc_coalesced_segments_are_read_whole() {
    let (out, wire) = echo(
        "rsc",
        ", RSC true, RX_CHECKSUM true",
        "",
        false,
        &["ipa.coalesced", "ipb.coalesced", "tcp/fl.count"],
    );
    let coalesced = value(&out, "ipa.coalesced") + value(&out, "ipb.coalesced");
    assert!(coalesced > 0, "{out}");
    let _ = wire;
    assert_eq!(value(&out, "tcp/fl.bad_checksums"), 0);
}

/// TCPGRO in place of RSC: segments merged in software, the bytes whole.
#[test]
fn gro_merged_segments_are_read_whole() {
    let (out, _) = echo(
        "gro",
        "",
        "",
        true,
        &["ga.merged", "gb.merged", "ga.flushed", "gb.flushed"],
    );
    let merged = value(&out, "ga.merged") + value(&out, "gb.merged");
    assert!(merged > 0, "{out}");
    assert_eq!(value(&out, "tcp/fl.bad_checksums"), 0);
}

/// The IPv6 frames' checksum check, summed here (RFC 8200 §8.1: both
/// addresses, the 32-bit upper-layer length, next header 6, the TCP
/// segment), not with the driver's code.
fn ipv6_tcp_checksum_good(f: &[u8]) -> bool {
    let length = u16::from_be_bytes([f[18], f[19]]) as usize;
    let mut bytes = f[22..54].to_vec();
    bytes.extend_from_slice(&(length as u32).to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 6]);
    bytes.extend_from_slice(&f[54..54 + length]);
    if bytes.len() % 2 == 1 {
        bytes.push(0);
    }
    let mut sum: u32 = bytes.chunks(2).map(|w| (w[0] as u32) << 8 | w[1] as u32).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum == 0xFFFF
}

/// The IPv6 MSS: the 1500-byte MTU less 40 bytes of IPv6 and 20 of TCP
/// (RFC 8200 §5, RFC 9293 §3.7.1), less the 12 bytes of timestamps each
/// data segment carries.
const MSS6_DATA: usize = 1500 - 40 - 20 - 12;

/// [`tso_puts_mss_sized_frames_with_good_checksums_on_the_wire`] over
/// IPv6: with the device's TSO (both modes) fewer packets handed to the
/// devices than frames on the wire; every IPv6/TCP frame at most one MSS
/// of data, its TCP checksum good by the sum above (and by the software
/// verdict at the receiver: no bad checksum counted), the streams
/// whole; with TSO off one packet per frame.
#[test]
fn ipv6_tso_puts_mss_sized_frames_with_good_checksums_on_the_wire() {
    for mode in ["off", "multi", "single"] {
        let tso = mode != "off";
        let dev = if tso {
            format!(", TSO {mode}, TX_CHECKSUM true")
        } else {
            String::new()
        };
        let (out, wire) = echo6(&format!("tso6-{mode}"), &dev, &format!("TSO {tso}"), &[]);
        let handed = value(&out, "outa.count") + value(&out, "outb.count");
        let mut tcp_frames = 0;
        for (k, f) in wire.iter().enumerate() {
            if let Some((_, len)) = tcp_segment(f).filter(|_| f[12..14] == [0x86, 0xdd]) {
                tcp_frames += 1;
                assert!(ipv6_tcp_checksum_good(f), "{mode}: frame {k}: TCP checksum");
                assert_eq!(
                    oxnet_driver::offload::checksum_verdict(f),
                    0b10,
                    "{mode}: frame {k}: the driver's verdict, L4 good, no IP flag"
                );
                assert!(len <= MSS6_DATA, "{mode}: frame {k}: {len} bytes");
            }
        }
        assert_eq!(tcp_frames, wire.len(), "{mode}: every frame IPv6/TCP");
        assert_streams_whole(&wire, BYTES);
        assert_tso_counts(&out, handed, wire.len(), tso);
    }
}

/// [`checksum_offload_both_ways`] over IPv6: the device inserts the TCP
/// checksums, and its receive verdicts (L4 only) are taken for every
/// segment TCPFlowLookup sees; every frame's checksum good.
#[test]
fn ipv6_checksum_offload_both_ways() {
    let (out, wire) = echo6(
        "csum6",
        ", TX_CHECKSUM true, RX_CHECKSUM true",
        "CHECKSUM_OFFLOAD true",
        &["tcp/fl.count"],
    );
    assert!(!wire.is_empty());
    for f in &wire {
        assert!(ipv6_tcp_checksum_good(f));
    }
    assert_eq!(value(&out, "tcp/fl.bad_checksums"), 0);
    assert_eq!(value(&out, "tcp/fl.device_checked"), value(&out, "tcp/fl.count"));
    assert!(value(&out, "tcp/fl.count") > 100, "{out}");
}
