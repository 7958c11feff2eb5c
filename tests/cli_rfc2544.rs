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
    // The plan and its estimate, before the run.
    assert!(stderr.starts_with("plan: 2 DUTs (linux-bridge, patch)"), "{stderr}");
    assert!(stderr.contains("\nestimate: usually under "), "{stderr}");
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
    let scratch = ScratchNs::new("ext");
    let ns = scratch.name();
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
    let scratch = ScratchNs::new("fb");
    let ns = scratch.name();
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

/// An XDP program that the driver refuses in native mode (a macvlan has no
/// native XDP) attaches in generic (skb) mode: the run warns, says why in
/// the text header, and records it in `machine.xdp_fallback`. The external
/// DUT is a veth pair whose receiving end carries a macvlan (`--rx`), which
/// the frames are addressed to.
#[test]
fn generic_xdp_fallback_is_warned_and_recorded() {
    if skip() {
        return;
    }
    let scratch = ScratchNs::new("xg");
    let ns = scratch.name();
    ip(&["-n", &ns, "link", "add", "gtx", "type", "veth", "peer", "name", "grx"]);
    ip(&["-n", &ns, "link", "add", "link", "grx", "name", "gmv", "type", "macvlan", "mode", "bridge"]);
    for dev in ["gtx", "grx", "gmv"] {
        ip(&["-n", &ns, "link", "set", dev, "up"]);
    }
    let run = |json: bool| {
        let mut args =
            vec!["netns", "exec", &ns, env!("CARGO_BIN_EXE_flowsteer"), "rfc2544", "--tx", "gtx", "--rx", "gmv"];
        if json {
            args.push("--json");
        }
        let out = Command::new("ip").args(&args).args(SHORT).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    };
    let (stdout, stderr) = run(true);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let why = doc["machine"]["xdp_fallback"].as_str().unwrap_or_else(|| panic!("no xdp_fallback: {}", doc["machine"]));
    assert!(why.contains("gmv"), "{why}");
    let warning = format!("warning: XDP attached in generic (skb) mode, slower than native: native refused: {why}");
    assert!(stderr.contains(&warning), "{stderr}");
    assert_eq!(doc["results"][0]["dut"], "external");
    let (stdout, _) = run(false);
    let line = format!("xdp fallback: generic (skb) mode, native refused: {why}");
    assert!(stdout.lines().any(|l| l == line), "{stdout}");
}

fn flowsteer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run")
}

/// `--dry-run`: the plan and its estimate on stdout, exit 0; nothing built
/// (no namespace), root or not.
#[test]
fn dry_run_prints_the_plan_and_the_estimate() {
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["rfc2544", "--dut", "linux-bridge", "--dut", "patch", "--sizes", "64,imix", "--trial", "2"])
        .args(["--repeat", "2", "--cost-rate", "100000", "--dry-run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\
plan: 2 DUTs (linux-bridge, patch) x 2 frame sizes (64, imix) x 2 repeats: 8 searches
trials: 2 s full-length, 1 s short; each after 0.1 s of learning frames, then a 2 s wait
each search: at most 40 trials, usually about 6 short and 12 full-length
also: 2 generator-ceiling trials of 2 s, up to 12 latency trials (at 50, 90, 99 % of NDR), 6 CPU-cost trials at 100000 frames/s
trials in all: at most 340
estimate: usually under 11 min; at most 25 min (an upper bound: every search stops at 40 trials)
"
    );
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));

    // Only the generator's ceiling.
    let out = flowsteer(&["rfc2544", "--ceiling", "--sizes", "64,1518", "--trial", "3", "--dry-run"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\
plan: no DUT, only the generator's ceiling at 2 frame sizes (64, 1518)
trials: 2 generator-ceiling trials of 3 s
estimate: at most 16 s
"
    );
}

/// The CPUs default to this machine's: the golden documents leave them out.
fn without_cpus(mut doc: serde_json::Value) -> serde_json::Value {
    let c = doc["config"].as_object_mut().expect("config");
    for key in ["gen_cpu", "rx_cpu", "dut_cpus"] {
        assert!(c.remove(key).is_some(), "config.{key}");
    }
    doc
}

#[test]
fn dry_run_json_is_the_plan() {
    let out = flowsteer(&[
        "rfc2544",
        "--dut",
        "linux-bridge",
        "--dut",
        "patch",
        "--sizes",
        "64,imix",
        "--trial",
        "2",
        "--repeat",
        "2",
        "--cost-rate",
        "100000",
        "--dry-run",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        without_cpus(doc),
        serde_json::json!({
            "schema": "flowsteer.rfc2544-plan.v1",
            "config": {
                "duts": ["linux-bridge", "patch"],
                "sizes": [64, "imix"],
                "trial_s": 2.0,
                "short_trial_s": 1.0,
                "repeat": 2,
                "resolution": 0.01,
                "wait_s": 2.0,
                "learning_s": 0.1,
                "gen_max_trial_s": 2.0,
                "flows": 16,
                "ipv6": false,
                "kernel_rps": false,
                "min_fps": 1000.0,
                "external": null,
                "latency_shares": [0.5, 0.9, 0.99],
                "cost_rate": 100000.0,
                "io": "auto",
                "bidirectional": false,
                "spread": null
            },
            "duts": ["linux-bridge", "patch"],
            "skipped": [],
            "searches": 8,
            "search_max_trials": 40,
            "search_usual_trials": {"short": 6, "full": 12},
            "ceiling_trials": 2,
            "latency_trials": 12,
            "cost_trials": 6,
            "max_trials": 340,
            "estimate_s": 655.8,
            "max_s": 1443.0
        })
    );
}

/// Where a JSON document shows a Rust type's serde form: a `Duration`'s
/// `secs`/`nanos`, an enum variant's capitalised name as a key
/// (`{"Fixed": 64}`) or a string (`"Auto"`).
fn rust_forms(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    let variant =
        |s: &str| s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric());
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                if k == "secs" || k == "nanos" || variant(k) {
                    out.push(format!("{at}.{k}"));
                }
                rust_forms(v, &format!("{at}.{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                rust_forms(v, &format!("{at}[{i}]"), out);
            }
        }
        serde_json::Value::String(s) if variant(s) => out.push(format!("{at} = {s:?}")),
        _ => {}
    }
}

/// The configuration as the report gives it (the plan's `config` is the
/// report's): durations in seconds under `_s` keys, sizes as numbers or
/// "imix", every choice a lowercase string; with every option that adds
/// to it given.
#[test]
fn the_json_config_shows_no_rust_forms() {
    let out = flowsteer(&[
        "rfc2544",
        "--dut",
        "flowsteer-bridge-xdp",
        "--tx",
        "tx0",
        "--rx",
        "rx0",
        "--sizes",
        "64,imix",
        "--io",
        "afpacket",
        "--bidirectional",
        "--spread-queues",
        "4",
        "--cost-rate",
        "1000",
        "--dry-run",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut found = Vec::new();
    rust_forms(&doc, "", &mut found);
    assert!(found.is_empty(), "{found:?} in {doc:#}");
    let c = &doc["config"];
    assert_eq!(c["sizes"], serde_json::json!([64, "imix"]));
    assert_eq!((c["trial_s"].as_f64(), c["wait_s"].as_f64()), (Some(60.0), Some(2.0)));
    assert_eq!(c["external"], serde_json::json!({"tx": "tx0", "rx": "rx0"}));
    assert_eq!((&c["io"], &c["duts"][0]), (&serde_json::json!("afpacket"), &serde_json::json!("flowsteer-bridge-xdp")));
    assert_eq!(c["spread"]["queues"], 4);
    assert_eq!(doc["duts"], serde_json::json!(["flowsteer-bridge-xdp", "external"]));
}

/// The README's `flowsteer rfc2544` examples (section "`flowsteer rfc2544`"),
/// but `--cleanup`, which measures nothing: with `--dry-run` each prints
/// its estimate (the JSON's `estimate_s` and `max_s` with `--json`).
const README_EXAMPLES: [&str; 4] = [
    "flowsteer rfc2544 --dut linux-bridge --dut patch --sizes 64,1518 --trial 2 --json",
    "flowsteer rfc2544 --dut linux-bridge --dut patch --sizes 64 --bidirectional --gen-cpus 0,1",
    "flowsteer rfc2544 --dut none --io afpacket --sizes 64 --trial 2",
    "flowsteer rfc2544 --dut linux-bridge --spread-queues 4 --hash-types all --key default",
];

#[test]
fn the_readme_examples_have_an_estimate() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let section = readme.split("### `flowsteer rfc2544`").nth(1).expect("the rfc2544 section");
    let section = section.split("\n### ").next().unwrap_or(section);
    let available = flowsteer_live::available_cpus();
    for example in README_EXAMPLES {
        assert!(section.lines().any(|l| l.trim_start().starts_with(example)), "{example}: not in the README");
        let mut args: Vec<&str> = example.split_whitespace().skip(1).collect();
        if args.windows(2).any(|w| w == ["--gen-cpus", "0,1"]) && !(available.contains(&0) && available.contains(&1)) {
            eprintln!("skipped: {example}: needs CPUs 0 and 1, this process has {available:?}");
            continue;
        }
        args.push("--dry-run");
        let out = flowsteer(&args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{example}: {stderr}");
        if args.contains(&"--json") {
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
            let (estimate, max) =
                (doc["estimate_s"].as_f64().expect("estimate_s"), doc["max_s"].as_f64().expect("max_s"));
            assert!(0.0 < estimate && estimate <= max, "{example}: {estimate} {max}");
        } else {
            let line =
                stdout.lines().find(|l| l.starts_with("estimate: ")).unwrap_or_else(|| panic!("{example}: {stdout}"));
            assert!(line.contains("usually under") && line.contains("at most"), "{example}: {line}");
        }
        eprintln!("{example} --dry-run: {}", stdout.lines().find(|l| l.starts_with("estimate: ")).unwrap_or(&stdout));
    }
}

/// A network namespace of the test's own (`fs2544-PID-cli-TAG`), removed
/// when dropped, also when the test fails.
struct ScratchNs(String);

impl ScratchNs {
    fn new(tag: &str) -> ScratchNs {
        let ns = format!("fs2544-{}-cli-{tag}", std::process::id());
        ip(&["netns", "add", &ns]);
        ScratchNs(ns)
    }

    fn name(&self) -> String {
        self.0.clone()
    }
}

impl Drop for ScratchNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    assert!(Command::new("ip").args(args).status().expect("ip").success(), "ip {args:?}");
}
