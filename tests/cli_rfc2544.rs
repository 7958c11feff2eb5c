//! `flowsteer rfc2544` end to end, CI-sized: short trials, one size, the
//! two kernel DUTs; and a SIGTERM mid-search. Root only (namespaces,
//! AF_XDP): skipped with a printed reason otherwise. Every namespace the
//! run creates is checked gone afterwards.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skip() -> bool {
    match flowsteer_netns::skip_reason() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("fs2544-{pid}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

const SHORT: [&str; 10] =
    ["--sizes", "64", "--trial", "0.3", "--short-trial", "0.2", "--wait", "0.2", "--resolution", "0.2"];

#[test]
fn json_report_of_two_duts_and_nothing_left_behind() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("ndr.svg");
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "linux-bridge", "--dut", "patch", "--repeat", "2", "--json", "--plot"])
        .arg(&chart)
        .args(SHORT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("estimate: about"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["schema"], "flowsteer.rfc2544.v2");
    assert_eq!(doc["complete"], true);
    for key in ["cpu_model", "kernel", "driver", "xdp_mode", "xsk_bind", "queues"] {
        assert!(doc["machine"].get(key).is_some(), "machine.{key}");
    }
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["dut"], "linux-bridge");
    assert_eq!(results[1]["dut"], "patch");
    for r in results {
        for key in [
            "frame_size",
            "cores",
            "ndr_fps",
            "pdr_fps",
            "ndr_bps",
            "generator_max_fps",
            "generator_limited",
            "cpu_ns_per_frame",
            "repeats",
            "latency",
        ] {
            assert!(r.get(key).is_some(), "{key}");
        }
        let repeats = r["repeats"].as_array().expect("repeats");
        assert_eq!(repeats.len(), 2, "{}", r["repeats"]);
        for t in r["trials"].as_array().expect("trials") {
            for key in
                ["search", "offered_fps", "achieved_fps", "sent", "received", "loss_ratio", "duration_s", "valid"]
            {
                assert!(t.get(key).is_some(), "trial {key}");
            }
            // No invalid or lossy trial at or below its own search's NDR.
            let search = t["search"].as_u64().unwrap() as usize;
            if let Some(ndr) = repeats[search]["ndr_fps"].as_f64() {
                if t["offered_fps"].as_f64().unwrap() <= ndr {
                    assert_eq!(t["valid"], true, "{t}");
                    assert_eq!(t["sent"], t["received"], "{t}");
                }
            }
        }
    }
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    let svg = std::fs::read_to_string(&chart).expect("chart");
    assert!(svg.contains("generator ceiling") && svg.contains("linux-bridge NDR") && svg.contains("patch NDR"));
}

#[test]
fn sigterm_mid_search_removes_every_namespace() {
    if skip() {
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "linux-bridge", "--sizes", "64", "--trial", "2", "--wait", "0.2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    // Wait until the harness has built the bridge's namespace: the
    // generator's ceiling is measured, the search has begun.
    let searching = || namespaces_of(pid).iter().any(|n| n.ends_with("-d"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !searching() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(searching(), "the run built no DUT namespace: {:?}", namespaces_of(pid));
    std::thread::sleep(Duration::from_millis(700));
    Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("stopped by a signal"), "{text}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(["rfc2544", "--dut", "vpp"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(["rfc2544", "--sizes", "64"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "--dut is required");
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "none", "--repeat", "0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "--repeat 0");
}

/// `--tx IFACE --rx IFACE`: a device the harness does not build (here a
/// veth pair in a namespace the test makes; the command runs inside it).
#[test]
fn tx_rx_measure_existing_interfaces_as_external() {
    if skip() {
        return;
    }
    let ns = format!("fs2544-{}-cli-ext", std::process::id());
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().expect("ip").success(), "ip {args:?}");
    ip(&["netns", "add", &ns]);
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _del = Del(ns.clone());
    ip(&["-n", &ns, "link", "add", "ctx", "type", "veth", "peer", "name", "crx"]);
    ip(&["-n", &ns, "link", "set", "ctx", "up"]);
    ip(&["-n", &ns, "link", "set", "crx", "up"]);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            env!("CARGO_BIN_EXE_flowsteer"),
            "rfc2544",
            "--tx",
            "ctx",
            "--rx",
            "crx",
            "--json",
        ])
        .args(SHORT)
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["dut"], "external");
    assert!(results[0]["ndr_fps"].as_f64().is_some(), "{}", results[0]);
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(["rfc2544", "--tx", "ctx"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "--tx without --rx");
}

/// `--bidirectional --io afpacket --spread-queues 4`: both directions in
/// every trial, the AF_PACKET path recorded in `machine`, the spread in
/// `config`; the fields the one-way report has are all still there.
#[test]
fn bidirectional_afpacket_spread_report() {
    if skip() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "patch", "--bidirectional", "--io", "afpacket", "--spread-queues", "4", "--json"])
        .args(SHORT)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["schema"], "flowsteer.rfc2544.v2");
    assert_eq!(doc["machine"]["io"], "afpacket");
    assert!(doc["machine"]["io_fallback"].is_null());
    assert_eq!(doc["config"]["io"], "afpacket");
    assert_eq!(doc["config"]["bidirectional"], true);
    assert_eq!(doc["config"]["spread"]["queues"], 4);
    let row = &doc["results"][0];
    for key in ["ndr_fps", "pdr_fps", "generator_max_fps", "trials"] {
        assert!(row.get(key).is_some(), "{key}");
    }
    if let Some(ndr) = row["ndr_fps"].as_f64() {
        let agg = row["ndr_aggregate_fps"].as_f64().expect("aggregate NDR");
        assert!((agg - 2.0 * ndr).abs() <= 1e-9 * agg, "{agg} {ndr}");
    }
    let t = &row["trials"][0]["detail"];
    let (rev, agg) = (&t["reverse"], &t["aggregate"]);
    assert!(rev["sent"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(agg["sent"].as_u64().unwrap(), t["sent"].as_u64().unwrap() + rev["sent"].as_u64().unwrap());
    assert_eq!(agg["received"].as_u64().unwrap(), t["received"].as_u64().unwrap() + rev["received"].as_u64().unwrap());
}

#[test]
fn rss_flags_need_spread_queues() {
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "none", "--hash-types", "udp4"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--spread-queues"));
    let out = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "none", "--io", "dpdk"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

/// `--io auto` where AF_XDP cannot be set up (the receiving interface's MTU
/// is beyond what a UMEM frame holds): the run falls back to AF_PACKET,
/// prints why, and records it in `machine`.
#[test]
fn auto_io_falls_back_and_says_why() {
    if skip() {
        return;
    }
    let ns = format!("fs2544-{}-cli-fb", std::process::id());
    let ip = |args: &[&str]| assert!(Command::new("ip").args(args).status().expect("ip").success(), "ip {args:?}");
    ip(&["netns", "add", &ns]);
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _del = Del(ns.clone());
    ip(&["-n", &ns, "link", "add", "ftx", "type", "veth", "peer", "name", "frx"]);
    ip(&["-n", &ns, "link", "set", "frx", "mtu", "3000"]);
    ip(&["-n", &ns, "link", "set", "ftx", "up"]);
    ip(&["-n", &ns, "link", "set", "frx", "up"]);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            env!("CARGO_BIN_EXE_flowsteer"),
            "rfc2544",
            "--tx",
            "ftx",
            "--rx",
            "frx",
            "--json",
        ])
        .args(SHORT)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("note: AF_XDP could not be set up") && stderr.contains("AF_PACKET"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let why = doc["machine"]["io_fallback"].as_str().expect("io_fallback");
    assert!(why.contains("using AF_PACKET"), "{why}");
    // The ceiling's own veth pair ran AF_XDP, the external ports AF_PACKET.
    assert_eq!(doc["machine"]["io"], "mixed");
    assert_eq!(doc["results"][0]["dut"], "external");
    assert!(doc["results"][0]["ndr_fps"].as_f64().is_some(), "{}", doc["results"][0]);
}
