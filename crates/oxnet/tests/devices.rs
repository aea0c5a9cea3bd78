//! `oxnet devices` lists the Linux interfaces of its network namespace
//! with the specs oxnet opens on each (issue 9): run inside a namespace
//! of the test's own holding a veth pair (one end with an address) and a
//! TAP device, it shows exactly those, and marks the address.

mod common;
use common::netns::{self, Netns};
use common::text;

#[test]
fn devices_lists_the_namespaces_interfaces_with_their_specs() {
    if !netns::available() {
        return;
    }
    let ns = Netns::new("odev");
    let (a, b) = ns.veth_pair();
    let tap = netns::unique("tap");
    ns.ip(&["tuntap", "add", "dev", &tap, "mode", "tap"]);
    ns.ip(&["addr", "add", "10.11.0.1/24", "dev", &a]);
    let out = ns.oxnet(&["devices"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let row = |name: &str| -> Vec<String> {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let ra = row(&a);
    assert_eq!(ra[1], "veth", "{stdout}");
    assert!(
        ra.contains(&format!("af_packet:{a}")) && ra.contains(&format!("af_xdp:{a}")),
        "{stdout}"
    );
    assert!(ra.contains(&"10.11.0.1".to_string()), "{stdout}");
    assert_eq!(
        row(&b).last().map(String::as_str),
        Some("-"),
        "no address on {b}: {stdout}"
    );
    let rt = row(&tap);
    assert_eq!(rt[1], "tun", "{stdout}");
    assert!(rt.contains(&format!("tap:{tap}")), "{stdout}");
    assert_eq!(row("lo")[5], "af_packet:lo", "{stdout}");
    // Exactly the namespace's interfaces: lo, the pair and the TAP.
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("interface "))
        .skip(1)
        .filter(|l| !l.starts_with("memif:"))
        .collect();
    assert_eq!(table.len(), 4, "{stdout}");
}
