//! Two of oxnet's servers chained, as issue 12 asks of the HTTP cache:
//! `curl --socks4` through oxnet's SOCKS4 proxy (conf/socks4.click on
//! one TAP) to oxnet's HTTP cache (conf/http-cache.click on another),
//! in a namespace made here whose kernel forwards between the two TAPs
//! (proxy ARP on both, so each oxnet host reaches the other's subnet
//! through its TAP's kernel side). A 200 kB file comes back byte for
//! byte, twice, with an ETag and then a 304; the proxy's and the cache's
//! counters agree with what curl did.

mod common;

use common::netns::{self, Netns};
use common::stack::{random_bytes, run_oxnet, stop_oxnet, value, wait_for_link};

const PROXY: &str = "10.89.0.2";
const CACHE: &str = "10.89.1.2";

fn sysctl(ns: &Netns, key: &str, value: &str) {
    let out = ns.run("sysctl", &["-qw", &format!("{key}={value}")]);
    assert!(
        out.status.success(),
        "sysctl {key}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn curl(ns: &Netns, args: &[&str]) -> (Vec<u8>, String) {
    let out = ns
        .command("timeout")
        .arg("30")
        .arg("curl")
        .arg("-sS")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "curl {args:?}: {err}");
    (out.stdout, err)
}

#[test]
fn curl_through_the_oxnet_socks4_proxy_reaches_the_oxnet_http_cache() {
    if !netns::available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("oxnet-socks-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let body = random_bytes(200_000, 89);
    std::fs::write(dir.join("big.bin"), &body).unwrap();

    let ns = Netns::new("sc");
    sysctl(&ns, "net.ipv4.ip_forward", "1");
    let (tap_proxy, tap_cache) = (netns::unique("tsp"), netns::unique("tsc"));
    let mut cache = run_oxnet(
        &ns,
        60,
        "conf/http-cache.click",
        &[
            format!("DEV=tap:{tap_cache},ip=10.89.1.1/24"),
            format!("IP={CACHE}"),
            format!("DIR={}", dir.display()),
        ],
        &["cache.requests", "cache.hits", "srv.opened"],
    );
    wait_for_link(&ns, &tap_cache, &mut cache);
    let mut proxy = run_oxnet(
        &ns,
        60,
        "conf/socks4.click",
        &[format!("DEV=tap:{tap_proxy},ip=10.89.0.1/24"), format!("IP={PROXY}")],
        &["proxy.granted", "proxy.rejected", "proxy.bytes_down"],
    );
    wait_for_link(&ns, &tap_proxy, &mut proxy);
    // Each oxnet host ARPs for the other's address on its own TAP: the
    // kernel answers for it and forwards.
    for tap in [&tap_proxy, &tap_cache] {
        sysctl(&ns, &format!("net.ipv4.conf.{tap}.proxy_arp"), "1");
    }

    let socks = format!("{PROXY}:1080");
    let url = format!("http://{CACHE}/big.bin");
    let (out, _) = curl(&ns, &["--socks4", &socks, &url]);
    assert!(out == body, "{} bytes through the proxy, not the file", out.len());
    let (head, _) = curl(&ns, &["--socks4", &socks, "-I", &url]);
    let head = String::from_utf8_lossy(&head).to_string();
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("ETag: ").or_else(|| l.strip_prefix("etag: ")))
        .unwrap_or_else(|| panic!("no ETag in {head}"))
        .trim()
        .to_string();
    let (code, _) = curl(
        &ns,
        &[
            "--socks4",
            &socks,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            &format!("If-None-Match: {etag}"),
            &url,
        ],
    );
    assert_eq!(String::from_utf8_lossy(&code), "304");
    let (again, _) = curl(&ns, &["--socks4", &socks, &url]);
    assert!(again == body, "the second fetch");

    let (proxy_out, proxy_all) = stop_oxnet(proxy);
    let (cache_out, cache_all) = stop_oxnet(cache);
    assert_eq!(value(&proxy_out, "proxy.granted"), 4, "{proxy_all}");
    assert_eq!(value(&proxy_out, "proxy.rejected"), 0, "{proxy_all}");
    assert!(
        value(&proxy_out, "proxy.bytes_down") >= 2 * body.len() as u64,
        "{proxy_all}"
    );
    assert_eq!(value(&cache_out, "cache.requests"), 4, "{cache_all}");
    assert_eq!(value(&cache_out, "cache.hits"), 4, "every file preloaded: {cache_all}");
    assert_eq!(
        value(&cache_out, "srv.opened"),
        4,
        "one connection per proxied request: {cache_all}"
    );
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
