//! The stack's script tests: every `tests/scripts/*.pkt` is parsed and
//! run against a fresh stack ([`run_script`]). The scripts listed in
//! [`PASSING`] must pass; the others describe behaviour not built yet
//! and must fail (each with its reason printed), so that a script that
//! starts passing is noticed and added to the list.

use oxnet_stack::script::{parse, run_script, Report, RunOptions, ALL_STATES};
use oxnet_stack::tcp::tcb::TcpState;
use std::path::PathBuf;

/// Scripts that pass today.
const PASSING: &[&str] = &[
    "active_open.pkt",
    "blind_data.pkt",
    "close_linger_rst.pkt",
    "close_unread_rst.pkt",
    "data_in_read.pkt",
    "fast_retransmit.pkt",
    "fin_syn_received.pkt",
    "fin_syn_sent.pkt",
    "fin_with_data.pkt",
    "first_segment_lost.pkt",
    "gap_filled_ack.pkt",
    "half_close.pkt",
    "ipv6_active_open.pkt",
    "ipv6_keepalive.pkt",
    "ipv6_our_close.pkt",
    "ipv6_paws.pkt",
    "ipv6_rto_backoff.pkt",
    "ipv6_sack_recovery.pkt",
    "ipv6_sack_reset.pkt",
    "ipv6_simultaneous_open.pkt",
    "ipv6_syn_closed_port.pkt",
    "ipv6_syn_cookies.pkt",
    "ipv6_zero_window_persist.pkt",
    "keepalive.pkt",
    "keepalive_user_timeout.pkt",
    "large_segment.pkt",
    "max_segment.pkt",
    "mss_segments.pkt",
    "nagle.pkt",
    "newreno_partial_ack.pkt",
    "nodelay.pkt",
    "our_close.pkt",
    "out_of_window.pkt",
    "passive_open.pkt",
    "passive_open_data_close.pkt",
    "paws.pkt",
    "peer_close.pkt",
    "peer_window.pkt",
    "peer_window_update.pkt",
    "retransmission.pkt",
    "rst_at_rcv_nxt.pkt",
    "rst_close_wait.pkt",
    "rst_closing.pkt",
    "rst_fin_wait_1.pkt",
    "rst_fin_wait_2.pkt",
    "rst_in_window.pkt",
    "rst_last_ack.pkt",
    "rst_out_of_window.pkt",
    "rst_simultaneous_syn_received.pkt",
    "rst_syn_received.pkt",
    "rst_syn_sent.pkt",
    "rst_time_wait.pkt",
    "rto_backoff.pkt",
    "sack_first_segment_lost.pkt",
    "sack_limited_transmit.pkt",
    "sack_recovery.pkt",
    "sack_rto.pkt",
    "sack_two_holes.pkt",
    "send_buffer.pkt",
    "simultaneous_close.pkt",
    "simultaneous_open.pkt",
    "sws_avoidance.pkt",
    "syn_ack_backoff.pkt",
    "syn_ack_options.pkt",
    "syn_challenge.pkt",
    "syn_closed_port.pkt",
    "syn_cookies.pkt",
    "syn_in_syn_received.pkt",
    "syn_retries_give_up.pkt",
    "time_wait_ends.pkt",
    "ts_recent_invalid_ack.pkt",
    "user_timeout.pkt",
    "window_update.pkt",
    "write_psh.pkt",
    "zero_window_persist.pkt",
];

/// Scripts that do not pass yet, and why (printed with the failure).
const NOT_YET: &[(&str, &str)] = &[];

fn scripts() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pkt"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_script_passes_or_is_listed_as_not_yet() {
    let mut wrong = Vec::new();
    for path in scripts() {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let result = run(&path);
        let listed = PASSING.contains(&name.as_str());
        match (&result, listed) {
            (Ok(report), true) => println!("pass {name}\n{report}"),
            (Err(why), false) => {
                let reason = NOT_YET
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("(no reason listed)", |r| r.1);
                println!("not yet {name}: {reason}\n    {why}");
                if reason == "(no reason listed)" {
                    wrong.push(format!("{name} fails and has no reason in NOT_YET: {why}"));
                }
            }
            (Ok(_), false) => wrong.push(format!("{name} passes: add it to PASSING")),
            (Err(why), true) => wrong.push(format!("{name} is in PASSING but fails: {why}")),
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Parses and runs the script at `path`: its report, or why it failed.
fn run(path: &std::path::Path) -> Result<Report, String> {
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    parse(&name, &text)
        .map_err(|e| e.to_string())
        .and_then(|script| run_script(&script, &RunOptions { file: name.clone() }).map_err(|f| f.to_string()))
}

/// Every TCP state of RFC 9293 §3.3.2 is entered and left by some
/// script's connection (CLOSED: left), as the runner sees them: removing
/// the only script that reaches a state makes this fail and say which.
#[test]
fn the_scripts_enter_and_leave_every_tcp_state() {
    let mut by_whom: Vec<(TcpState, Vec<String>, Vec<String>)> =
        ALL_STATES.iter().map(|s| (*s, Vec::new(), Vec::new())).collect();
    for path in scripts() {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !PASSING.contains(&name.as_str()) {
            continue;
        }
        let report = run(&path).unwrap_or_else(|e| panic!("{e}"));
        let (entered, left) = (report.entered(), report.left());
        for (state, into, out_of) in &mut by_whom {
            if entered.contains(state) {
                into.push(name.clone());
            }
            if left.contains(state) {
                out_of.push(name.clone());
            }
        }
    }
    let mut missing = Vec::new();
    for (state, into, out_of) in &by_whom {
        // The scripts by name where few reach the state (the ones not to
        // lose), by count elsewhere.
        let names = |v: &Vec<String>| match v.len() {
            0..=3 => format!("[{}]", v.join(", ")),
            n => format!("{n} scripts"),
        };
        println!(
            "{}: entered by {}, left by {}",
            state.name(),
            names(into),
            names(out_of)
        );
        if into.is_empty() && *state != TcpState::Closed {
            missing.push(format!("{} is entered by no script", state.name()));
        }
        if out_of.is_empty() {
            missing.push(format!("{} is left by no script", state.name()));
        }
    }
    assert!(missing.is_empty(), "\n{}", missing.join("\n"));
}

#[test]
fn every_listed_script_exists() {
    let names: Vec<String> = scripts()
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    for name in PASSING.iter().chain(NOT_YET.iter().map(|(n, _)| n)) {
        assert!(
            names.iter().any(|n| n == name),
            "{name} is listed but not in tests/scripts"
        );
    }
}

#[test]
fn docs_list_every_script() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/stack.md")).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".pkt") {
            assert!(
                doc.contains(&format!("| `{name}` |")),
                "docs/stack.md does not list {name}"
            );
        }
    }
}
