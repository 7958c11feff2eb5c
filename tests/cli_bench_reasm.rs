//! `flowsteer bench reasm`, run as the real binary with tiny `--seconds`:
//! the JSON it returns (schema, one row per selected case, the datagrams
//! all completed), its refusals of bad filter values, and, where Debian's
//! `libdpdk-dev` is installed, the side-by-side run with the DPDK harness
//! (`bench/dpdk/`), built here into a temporary directory.
//!
//! Behaviour only: rates must be positive and finite, never compared with a
//! bar (the machine is shared and noisy). The flood *set* (up to 1,000,000
//! never-completing datagrams per row) is too slow for a test and is not
//! run; the cold `flood` case (200,000 of them) takes well under a second
//! and is.
//!
//! Without `pkg-config`'s `libdpdk` (or without `make`) the DPDK test prints
//! `skipped: <reason>` and passes.

mod common;
use common::{build_dpdk_harness, dpdk_skip_reason, flowsteer, TempDir};
use serde_json::Value;
use std::process::Output;

/// `flowsteer bench reasm ARGS --json`.
fn bench_reasm(args: &[&str]) -> Output {
    let mut all = vec!["bench", "reasm"];
    all.extend_from_slice(args);
    all.push("--json");
    flowsteer(&all)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON document of a successful run (the run's stderr in the panic
/// message otherwise: a harness failure must be visible, not hidden).
fn json(out: &Output) -> Value {
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "exit {:?}, stderr: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", text(&out.stdout)));
    assert_eq!(doc["schema"], "flowsteer.bench.reasm.v3", "{doc}");
    doc
}

fn results(doc: &Value) -> &Vec<Value> {
    doc["results"].as_array().unwrap_or_else(|| panic!("no results array: {doc}"))
}

/// A number field that must be present (any JSON number).
fn num(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {row}"))
}

/// A rate or size that must be finite and above zero.
fn positive(row: &Value, key: &str) -> f64 {
    let v = num(row, key);
    assert!(v.is_finite() && v > 0.0, "{key} = {v} in {row}");
    v
}

/// The fields every row of a warm or cold 4,416-byte case shares, whoever
/// measured it.
fn check_case(row: &Value, family: u64, fragments: u64, order: &str, delivery: &str, set: &str) {
    assert_eq!(row["family"], family, "{row}");
    assert_eq!(row["payload"], 4416, "{row}");
    assert_eq!(row["fragments"], fragments, "{row}");
    assert_eq!(row["in_flight"], 64, "{row}");
    assert_eq!(row["order"], order, "{row}");
    assert_eq!(row["delivery"], delivery, "{row}");
    assert_eq!(row["set"], set, "{row}");
    // Every legitimate datagram of a case completes (the bench itself fails
    // a warm-up that loses one, so anything else is a reporting bug).
    assert_eq!(num(row, "completed_share"), 1.0, "{row}");
    positive(row, "dgrams_per_s");
    positive(row, "ns_per_frag");
}

/// One warm flowsteer row, without `--dpdk`.
fn check_warm_single(args: &[&str], family: u64, fragments: u64, order: &str, delivery: &str) {
    let doc = json(&bench_reasm(args));
    let rows = results(&doc);
    assert_eq!(rows.len(), 1, "{doc}");
    let row = &rows[0];
    assert_eq!(row["impl"], "flowsteer", "{row}");
    check_case(row, family, fragments, order, delivery, "warm");
    positive(row, "peak_mem");
    // No DPDK: no shape, no rounds, no comparison.
    for field in ["shape", "shape_role", "round", "rounds"] {
        assert!(row.get(field).is_none(), "{field}: {row}");
    }
    assert!(row.get("flood_dgrams").is_none(), "{row}");
    assert_eq!(doc["comparison"], serde_json::json!([]), "{doc}");
    assert!(doc["dpdk"].is_null() && doc["rounds"].is_null(), "{doc}");
}

/// `--set SET --delivery D --family F --in-flight 64 --order O --seconds
/// 0.02`, then `extra`: one case, tiny timing.
fn case_args<'a>(set: &'a str, delivery: &'a str, family: &'a str, order: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--set", set, "--delivery", delivery, "--family", family, "--in-flight", "64", "--order", order];
    v.extend(["--seconds", "0.02"]);
    v.extend_from_slice(extra);
    v
}

#[test]
fn warm_chain_ipv4_in_order() {
    check_warm_single(&case_args("warm", "chain", "4", "in-order", &[]), 4, 3, "in-order", "chain");
}

/// `--max-dist` reaches the in-flight cases (0: the rule off, as DPDK has
/// none) and is reported; every datagram still completes (the warm-up
/// checks that), and the default is Linux's 64.
#[test]
fn max_dist_is_reported() {
    let doc = json(&bench_reasm(&case_args("warm", "chain", "4", "reversed", &["--max-dist", "0"])));
    assert_eq!(doc["max_dist"], 0, "{doc}");
    let rows = results(&doc);
    assert_eq!(rows.len(), 1, "{doc}");
    check_case(&rows[0], 4, 3, "reversed", "chain", "warm");
    assert_eq!(json(&bench_reasm(&case_args("warm", "chain", "4", "reversed", &[])))["max_dist"], 64);
}

#[test]
fn warm_copy_ipv6_shuffled() {
    check_warm_single(&case_args("warm", "copy", "6", "shuffled", &[]), 6, 4, "shuffled", "copy");
}

/// The cold set's chain rows for one family and 64 in flight: the in-order
/// 4,416-byte case (32 MB of frames) and the `flood` case (200,000
/// never-completing datagrams among 20,032 legitimate ones, default 4 MiB
/// configuration). About half a second in all; the flood *set* is not run.
#[test]
fn cold_chain_with_flood_case() {
    let doc = json(&bench_reasm(&case_args("cold", "chain", "4", "in-order", &[])));
    let rows = results(&doc);
    assert_eq!(rows.len(), 2, "{doc}");
    let plain = rows.iter().find(|r| r["order"] == "in-order").unwrap_or_else(|| panic!("no in-order row: {doc}"));
    let flood = rows.iter().find(|r| r["order"] == "flood").unwrap_or_else(|| panic!("no flood row: {doc}"));
    for row in [plain, flood] {
        assert_eq!(row["impl"], "flowsteer", "{row}");
        positive(row, "peak_mem");
    }
    check_case(plain, 4, 3, "in-order", "chain", "cold");
    assert!(plain.get("flood_dgrams").is_none(), "{plain}");
    // The flood: the legitimate datagrams all still complete, and accounted
    // memory never goes above the default high threshold (4 MiB).
    check_case(flood, 4, 3, "flood", "chain", "cold");
    assert_eq!(flood["flood_dgrams"], 200_000, "{flood}");
    assert!(num(flood, "peak_mem") <= (4u64 << 20) as f64, "{flood}");
}

/// A bad value exits 1 (the command's own check: one line, `error: ...`) or
/// 2 (clap's, should the check move into the parser), names the flag, prints
/// nothing on stdout and does not panic. Returns the run's output.
fn check_refused(args: &[&str], flag: &str) -> std::process::Output {
    let out = bench_reasm(args);
    let stderr = text(&out.stderr);
    let code = out.status.code();
    assert!(matches!(code, Some(1 | 2)), "{args:?}: exit {:?}, stderr: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let first = stderr.lines().next().unwrap_or("");
    assert!(first.starts_with("error: ") && first.contains(flag), "{args:?}: {stderr}");
    if code == Some(1) {
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    assert!(out.stdout.is_empty(), "{args:?}: stdout {}", text(&out.stdout));
    out
}

#[test]
fn bad_values_are_refused() {
    let base = ["--set", "warm", "--delivery", "chain", "--seconds", "0.02"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { base.iter().chain(extra).copied().collect() };
    // A value outside a flag's list is clap's usage error (exit 2).
    for (extra, flag) in [
        (&["--family", "5"][..], "--family"),
        (&["--family", "4", "--order", "sideways"], "--order"),
        (&["--family", "4", "--in-flight", "7"], "--in-flight"),
    ] {
        let out = check_refused(&with(extra), flag);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out.stderr));
    }
    check_refused(
        &["--set", "warm", "--delivery", "chain", "--family", "4", "--in-flight", "64", "--seconds", "0"],
        "--seconds",
    );
    check_refused(&with(&["--family", "4", "--in-flight", "64", "--dpdk", "/nonexistent/x"]), "--dpdk /nonexistent/x");
    check_refused(&with(&["--family", "4", "--in-flight", "64", "--rounds", "2"]), "--rounds");
    check_refused(&with(&["--family", "4", "--in-flight", "64", "--dpdk", "/tmp", "--rounds", "0"]), "--rounds");
}

/// A harness that cannot start (here a script standing in for an EAL
/// failure) stops the run with its own stderr in the one-line error.
#[test]
fn failing_dpdk_harness_is_reported_with_its_stderr() {
    let dir = TempDir::new("cli-bench-reasm", "fake-harness");
    let fake = dir.path("reasm-dpdk");
    std::fs::write(&fake, "#!/bin/sh\necho 'EAL: cannot init memory (fake)' >&2\nexit 1\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = bench_reasm(
        // CPU 0: see `dpdk_side_by_side`.
        &case_args("warm", "chain", "4", "in-order", &["--cpu", "0", "--dpdk", fake.to_str().unwrap()]),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains(fake.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("EAL: cannot init memory (fake)"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// DPDK's `shape` strings as the comparison reports them:
/// `bkt<buckets>x<entries>[/max<M>]`.
fn is_shape(s: &str) -> bool {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let (geometry, max) = match s.split_once("/max") {
        Some((g, m)) => (g, Some(m)),
        None => (s, None),
    };
    let Some((buckets, entries)) = geometry.strip_prefix("bkt").and_then(|g| g.split_once('x')) else {
        return false;
    };
    digits(buckets) && digits(entries) && max.is_none_or(digits)
}

/// flowsteer and DPDK's `rte_ip_frag` side by side on one warm case, two
/// rounds: DPDK's rows (one per table shape), merged over the rounds, and
/// one comparison entry that agrees with them.
#[test]
fn dpdk_side_by_side() {
    if let Some(why) = dpdk_skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("cli-bench-reasm", "dpdk");
    let harness = build_dpdk_harness(&dir, "reasm-dpdk", &["reasm.c"]);
    let out = bench_reasm(
        // Without --cpu both sides pin to the last CPU, where benchmarks are
        // usually run by hand: CPU 0 keeps this test off their core.
        &case_args(
            "warm",
            "chain",
            "4",
            "reversed",
            &["--rounds", "2", "--cpu", "0", "--dpdk", harness.to_str().unwrap()],
        ),
    );
    let doc = json(&out);
    assert!(doc["dpdk"].as_str().is_some_and(|v| v.starts_with("DPDK ")), "{doc}");
    assert_eq!(doc["rounds"], 2, "{doc}");
    assert_eq!(doc["pinned_cpu"], 0, "{doc}");
    let rows = results(&doc);

    // flowsteer: one row, the median of the 2 rounds (`rounds` = 2; the
    // per-round tag is internal).
    let ours: Vec<&Value> = rows.iter().filter(|r| r["impl"] == "flowsteer").collect();
    assert_eq!(ours.len(), 1, "{doc}");
    check_case(ours[0], 4, 3, "reversed", "chain", "warm");
    positive(ours[0], "peak_mem");
    assert_eq!(ours[0]["rounds"], 2, "{doc}");
    assert!(ours[0].get("round").is_none() && ours[0].get("shape_role").is_none(), "{doc}");

    // DPDK: one row per shape that completed the case, the example shape
    // among them; nothing but flowsteer and DPDK rows.
    let dpdk: Vec<&Value> = rows.iter().filter(|r| r["impl"] == "dpdk").collect();
    assert_eq!(ours.len() + dpdk.len(), rows.len(), "{doc}");
    assert!(!dpdk.is_empty(), "no dpdk rows (stderr: {}): {doc}", text(&out.stderr));
    let mut shapes = Vec::new();
    for row in &dpdk {
        check_case(row, 4, 3, "reversed", "chain", "warm");
        assert_eq!(row["rounds"], 2, "{row}");
        assert!(row.get("round").is_none() && row.get("peak_mem").is_none(), "{row}");
        let shape = row["shape"].as_str().unwrap_or_else(|| panic!("no shape: {row}"));
        assert!(is_shape(shape), "shape {shape:?}");
        assert!(!shapes.iter().any(|(s, _)| *s == shape), "shape {shape} twice: {doc}");
        let role = row["shape_role"].as_str().unwrap_or_else(|| panic!("no shape_role: {row}"));
        assert!(role == "example" || role == "tight", "shape_role {role:?}: {row}");
        shapes.push((shape, role));
    }
    let examples: Vec<&str> = shapes.iter().filter(|(_, role)| *role == "example").map(|(s, _)| *s).collect();
    assert_eq!(examples.len(), 1, "{doc}");

    // The comparison: exactly one entry, for this case.
    let cmp = doc["comparison"].as_array().unwrap_or_else(|| panic!("no comparison array: {doc}"));
    assert_eq!(cmp.len(), 1, "{doc}");
    let c = &cmp[0];
    assert_eq!(c["family"], 4, "{c}");
    assert_eq!(c["in_flight"], 64, "{c}");
    assert_eq!(c["order"], "reversed", "{c}");
    assert_eq!(c["rounds"], 2, "{c}");
    let ours_rate = positive(c, "flowsteer");
    let example = positive(c, "dpdk_example");
    let best = positive(c, "dpdk_best");
    assert!(best >= example, "dpdk_best {best} < dpdk_example {example}: {c}");
    // The figures are the merged rows' (the same numbers, not recomputed).
    assert_eq!(ours_rate, num(ours[0], "dgrams_per_s"), "{doc}");
    let rate_of = |shape: &str| dpdk.iter().find(|r| r["shape"] == shape).map(|r| num(r, "dgrams_per_s"));
    assert_eq!(Some(example), rate_of(examples[0]), "{doc}");
    let best_shape = c["dpdk_best_shape"].as_str().unwrap_or_else(|| panic!("no dpdk_best_shape: {c}"));
    assert_eq!(Some(best), rate_of(best_shape), "{doc}");
    // Ratios paired per round: finite, positive, the lowest not above the
    // median.
    for (median, lowest) in [("vs_example", "vs_example_min"), ("vs_best", "vs_best_min")] {
        let (m, lo) = (positive(c, median), positive(c, lowest));
        assert!(lo <= m, "{lowest} {lo} > {median} {m}: {c}");
    }
}
