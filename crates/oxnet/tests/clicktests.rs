//! Click's own clicktest files (`../shared/clicktests/`, data beside the
//! repository) run with oxnet as `click`. The files listed in
//! docs/elements.md as passing must pass; the others are run and
//! reported, so that the list can only grow.

use oxnet::clicktest::{find, parse, Outcome, Runner};
use std::path::PathBuf;

/// Files that pass today (relative to the clicktests directory).
const PASSING: &[&str] = &[
    "IPRewriter/ICMPPingRewriter-01.clicktest",
    "IPRewriter/ICMPPingRewriter-02.clicktest",
    "IPRewriter/IPAddrRewriter-01.clicktest",
    "IPRewriter/IPRewriter-01.clicktest",
    "IPRewriter/IPRewriter-02.clicktest",
    "IPRewriter/IPRewriter-04.clicktest",
    "IPRewriter/IPRewriter-09.clicktest",
    "IPRewriter/IPRewriter-10.clicktest",
    "IPRewriter/IPRewriter-11.clicktest",
    "IPRewriter/IPRewriter-12.clicktest",
    "IPRewriter/IPRewriter-15.clicktest",
    "IPRewriter/IPRewriter-17.clicktest",
    "IPRewriter/TCPRewriter-02.clicktest",
    "IPRewriter/UDPRewriter-01.clicktest",
    "IPRewriter/UDPRewriter-03.clicktest",
    "IPRewriter/UDPRewriter-09.clicktest",
    "IPRewriter/UDPRewriter-13.clicktest",
    "compound/variables-01.clicktest",
    "ethernet/ARPQuerier-02.clicktest",
    "ethernet/ARPQuerier-05.clicktest",
    "ethernet/ARPQuerier-06.clicktest",
    "ethernet/ARPResponder-01.clicktest",
    "handlers/expansion-01.clicktest",
    "handlers/handlercall-01.clicktest",
    "icmp/ICMPError-sourceroute-01.clicktest",
    "icmp/ICMPIPEncap-01.clicktest",
    "ip/AddressInfo-bcast-01.clicktest",
    "ip/IPFilter-01.clicktest",
    "ip/IPFilter-03.clicktest",
    "ip/IPFragmenter-01.clicktest",
    "ip/IPFragmenter-02.clicktest",
    "ip/MarkIPCE-01.clicktest",
    "ip/SetIPDSCP-01.clicktest",
    "ip/iplookups-02.clicktest",
    "standard/Classifier-02.clicktest",
    "standard/FrontDropQueue-01.clicktest",
    "standard/FullNoteQueue-upstream-notifier-01.clicktest",
    "standard/Hub-01.clicktest",
    "standard/MixedQueue-02.clicktest",
    "standard/Queue-notifiers-01.clicktest",
    "standard/RatedSplitter-01.clicktest",
    "standard/RatedUnqueue-01.clicktest",
    "standard/Script-01.clicktest",
    "standard/Script-04.clicktest",
    "standard/Tee-01.clicktest",
    "standard/Unqueue-01.clicktest",
    "tcpudp/UDPIPEncap-01.clicktest",
    "userlevel/packetpool-01.clicktest",
];

fn clicktests_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("OXNET_CLICKTESTS") {
        return Some(PathBuf::from(dir));
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/clicktests");
    dir.is_dir().then_some(dir)
}

#[test]
fn clicks_own_tests_pass_with_oxnet_as_click() {
    let Some(dir) = clicktests_dir() else {
        // The data lives beside the repository, not in it (it is Click's,
        // under Click's license); without it there is nothing to run.
        eprintln!("skipping: ../shared/clicktests is not there (set OXNET_CLICKTESTS)");
        return;
    };
    let mut runner = Runner::new(std::path::Path::new(env!("CARGO_BIN_EXE_oxnet"))).unwrap();
    // Click's tests finish in well under a second; one that hangs (an
    // element we lack the notifier of) costs at most this.
    runner.timeout = std::time::Duration::from_secs(5);
    let files = find(&dir);
    assert!(
        files.len() >= PASSING.len(),
        "only {} files in {}",
        files.len(),
        dir.display()
    );
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&dir).unwrap().display().to_string();
        let text = std::fs::read(file).unwrap();
        let outcome = match parse(&rel, &text) {
            Ok(tests) => tests
                .iter()
                .map(|t| runner.run(t))
                .find(|o| *o != Outcome::Pass)
                .unwrap_or(Outcome::Pass),
            Err(e) => Outcome::Fail(e),
        };
        match outcome {
            Outcome::Pass => passed.push(rel),
            other => {
                if PASSING.contains(&rel.as_str()) {
                    failures.push(format!("{rel}: {other:?}"));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&runner.bin_dir);
    println!("clicktests passing: {} of {}: {passed:?}", passed.len(), files.len());
    assert!(
        failures.is_empty(),
        "clicktests that used to pass fail now:\n{}",
        failures.join("\n")
    );
    for p in PASSING {
        assert!(
            passed.iter().any(|x| x == p),
            "{p} is listed as passing but was not found"
        );
    }
}

/// Our own files in Click's format (`tests/clicktests/`): behaviour Click's
/// files do not pin, checked against Click's documentation. Every one must
/// pass.
#[test]
fn our_own_clicktests_pass() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clicktests");
    let mut runner = Runner::new(std::path::Path::new(env!("CARGO_BIN_EXE_oxnet"))).unwrap();
    runner.timeout = std::time::Duration::from_secs(10);
    let files = find(&dir);
    assert!(!files.is_empty(), "no files in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&dir).unwrap().display().to_string();
        let text = std::fs::read(file).unwrap();
        match parse(&rel, &text) {
            Ok(tests) => {
                for t in &tests {
                    let outcome = runner.run(t);
                    if outcome != Outcome::Pass {
                        failures.push(format!("{rel}: {outcome:?}"));
                    }
                }
            }
            Err(e) => failures.push(format!("{rel}: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(&runner.bin_dir);
    println!("own clicktests: {} files", files.len());
    assert!(failures.is_empty(), "failing:\n{}", failures.join("\n"));
}
