//! `flowsteer bench flows`, run as the real binary with tiny `--seconds`:
//! the JSON it returns (schema, one engine row per flow count and
//! distribution, four table rows each, no packet out of order), its
//! refusals, and, where Debian's `libdpdk-dev` is installed, the run beside
//! DPDK's `rte_hash` with the harness (`bench/dpdk/flowtable-dpdk`) built
//! here into a temporary directory.
//!
//! Behaviour only: rates must be positive and finite, never compared with a
//! bar (the machine is shared and noisy). Without `pkg-config`'s `libdpdk`
//! (or without `make`) the DPDK test prints `skipped: <reason>` and passes.

#[allow(dead_code)] // the live tests' helpers are not used here
mod common;
use common::{build_dpdk_harness, dpdk_skip_reason, flowsteer, TempDir};
use serde_json::Value;
use std::process::Output;

fn bench_flows(args: &[&str]) -> Output {
    let mut all = vec!["bench", "flows", "--reps", "1", "--seconds", "0.1", "--cpu", "0"];
    all.extend_from_slice(args);
    all.push("--json");
    flowsteer(&all)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(out: &Output) -> Value {
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "exit {:?}, stderr: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema"], "flowsteer.bench.flows.v1");
    doc
}

fn rows<'a>(doc: &'a Value, part: &str) -> Vec<&'a Value> {
    doc["results"].as_array().expect("results").iter().filter(|r| r["part"] == part).collect()
}

fn positive(r: &Value) -> bool {
    ["mpps", "ns_per_packet"].iter().all(|k| r[*k].as_f64().is_some_and(|x| x.is_finite() && x > 0.0))
}

#[test]
fn engine_and_table_rows_for_every_case() {
    let doc = json(&bench_flows(&["--flows", "1000,20000", "--dist", "uniform,zipf:1.1"]));
    let engine = rows(&doc, "engine");
    assert_eq!(engine.len(), 4, "{doc}");
    for r in &engine {
        assert!(positive(r), "{r}");
        assert_eq!(r["order_violations"], 0, "{r}");
        assert!(r["source_ns"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
    assert_eq!(engine[0]["slowdown"], 1.0);
    let table = rows(&doc, "table");
    assert_eq!(table.len(), 16, "scalar and burst, fill and steady, per case: {doc}");
    assert!(table.iter().all(|r| positive(r)));
    assert!(rows(&doc, "dpdk").is_empty());
    let only = json(&bench_flows(&["--flows", "1000", "--dist", "uniform", "--only", "engine"]));
    assert_eq!((rows(&only, "engine").len(), rows(&only, "table").len()), (1, 0));
}

fn refused(args: &[&str], names: &str) {
    let out = bench_flows(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains(names), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_values_are_refused_before_anything_runs() {
    refused(&["--dist", "normal"], "--dist");
    refused(&["--dpdk", "/nonexistent/x"], "--dpdk /nonexistent/x");
    refused(&["--plot", "chart.txt"], "--plot");
}

/// A harness that fails (a script standing in for an EAL failure) stops
/// the run with its own stderr in the one-line error.
#[test]
fn failing_dpdk_harness_is_reported_with_its_stderr() {
    let dir = TempDir::new("cli-bench-flows", "fake-harness");
    let fake = dir.path("flowtable-dpdk");
    std::fs::write(&fake, "#!/bin/sh\necho 'EAL: cannot init memory (fake)' >&2\nexit 1\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out =
        bench_flows(&["--flows", "1000", "--dist", "uniform", "--only", "table", "--dpdk", fake.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("measuring: ")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].starts_with("error: ") && errors[0].contains(fake.to_str().unwrap()), "{stderr}");
    assert!(errors[0].contains("EAL: cannot init memory (fake)"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// The flow table and `rte_hash` over the same keys: both variants, both
/// phases, positive rates.
#[test]
fn dpdk_beside_the_table() {
    if let Some(why) = dpdk_skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("cli-bench-flows", "dpdk");
    let harness = build_dpdk_harness(&dir, "flowtable-dpdk", &["flowtable.c"]);
    let doc = json(&bench_flows(&[
        "--flows",
        "5000",
        "--dist",
        "zipf:1.1",
        "--only",
        "table",
        "--dpdk",
        harness.to_str().unwrap(),
    ]));
    assert_eq!(doc["dpdk"].as_str().map(|v| v.split('.').count()), Some(3), "{doc}");
    let dpdk = rows(&doc, "dpdk");
    let mut cases: Vec<(String, String)> =
        dpdk.iter().map(|r| (r["mode"].as_str().unwrap().into(), r["phase"].as_str().unwrap().into())).collect();
    cases.sort();
    let want: Vec<(String, String)> = [("crc", "fill"), ("crc", "steady"), ("crc_ext", "fill"), ("crc_ext", "steady")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(cases, want, "{doc}");
    assert!(dpdk.iter().all(|r| positive(r)), "{doc}");
    assert_eq!(rows(&doc, "table").len(), 4);
}
