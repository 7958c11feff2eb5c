//! `flowsteer bench tcp` end to end, CI-sized: linux-bridge only, one
//! stream, one 1 s run, `--json`; every namespace it made is gone after.
//! A --dut outside the list is a usage error (exit 2) anywhere. Root and
//! iperf3 only for the run (skipped with a printed reason otherwise; then
//! the command itself must refuse with exit 1 and say why).

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;
use std::process::{Command, Stdio};

/// Namespaces of the run of process `pid` (a `Star`'s: `fs-btcp-*-PID-N`).
fn namespaces_of(pid: u32) -> Vec<String> {
    let mark = format!("-{pid}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("fs-btcp-") && n.contains(&mark))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_dut_outside_the_list_is_a_usage_error() {
    let o = flowsteer(&["bench", "tcp", "--dut", "patch", "--seconds", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty());
    assert!(err.starts_with("error: ") && err.contains("--dut") && err.contains("linux-bridge"), "{err}");
}

#[test]
fn linux_bridge_json_has_a_positive_rate_and_leaves_no_namespace() {
    let args = ["bench", "tcp", "--dut", "linux-bridge", "--streams", "1", "--seconds", "1", "--repeat", "1", "--json"];
    if let Some(why) = flowsteer_rfc2544::tcp::skip_reason() {
        println!("skipped: {why}");
        // The command refuses as clearly.
        let o = flowsteer(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(o.stdout.is_empty());
        assert!(err.starts_with("error: bench tcp builds network namespaces and runs iperf3: "), "{err}");
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["schema"], "flowsteer.bench.tcp.v1");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["config"]["seconds"], 1);
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{doc}");
    let cell = &results[0];
    assert_eq!((cell["dut"].as_str(), cell["streams"].as_u64()), (Some("linux-bridge"), Some(1)), "{cell}");
    assert_eq!(cell["ok"], true, "{cell}");
    let rate = cell["bits_per_second"].as_f64().expect("a rate");
    assert!(rate > 0.0, "{cell}");
    assert_eq!(cell["runs"][0]["bits_per_second"].as_f64(), Some(rate), "{cell}");
    assert!(cell["runs"][0]["retransmits"].is_u64(), "{cell}");
    assert_eq!(cell["vs_linux_bridge"], 1.0, "{cell}");
    assert!(doc["duts"][0]["error"].is_null(), "{doc}");
    assert!(namespaces_of(pid).is_empty(), "left behind: {:?}", namespaces_of(pid));
}
