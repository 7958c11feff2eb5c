//! `flowsteer analyze` over many captures and `analyze --merge`, as the
//! real binary: a capture cut at arbitrary packet boundaries into N files
//! (N = 2, 7, 64) analysed as one multi-file run and as N runs merged gives
//! the single-file report on every exact figure; refusals; the README's
//! GNU parallel recipe.

mod common;
use common::{flowsteer, TempDir};
use flowsteer_capture::{CaptureReader, CaptureWriter};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}, stderr: {}", out.status, text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", text(&out.stdout)))
}

/// A capture made by `bench analyze` (IPv4 and IPv6, UDP and TCP, one flow
/// in 64 fragmenting every datagram in two, timestamps 1 us apart).
fn bench_capture(path: &Path, packets: u64, flows: u64) {
    let out = flowsteer(&[
        "bench",
        "analyze",
        "--packets",
        &packets.to_string(),
        "--flows",
        &flows.to_string(),
        "--keep",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Every record of a capture: (timestamp, data, original length).
fn records(path: &Path) -> Vec<(u64, Vec<u8>, u32)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push((p.ts_nanos, p.data.to_vec(), p.orig_len));
    }
    v
}

/// Writes `records` cut at `n - 1` pseudo-random distinct packet boundaries
/// into `n` files in `dir`, named so that their name order is not their
/// time order; returns the paths in time order.
fn split(records: &[(u64, Vec<u8>, u32)], n: usize, dir: &Path, seed: u64) -> Vec<PathBuf> {
    let mut state = seed;
    let mut cuts = std::collections::BTreeSet::new();
    while cuts.len() < n - 1 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        cuts.insert(1 + (state % (records.len() as u64 - 1)) as usize);
    }
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(records.len());
    std::fs::create_dir_all(dir).unwrap();
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            // Reverse name order: part-063 holds the first packets.
            let path = dir.join(format!("part-{:03}.pcap", n - 1 - i));
            let mut out = CaptureWriter::create(&path, 1).unwrap();
            for (ts, data, orig) in &records[w[0]..w[1]] {
                out.write_packet(*ts, data, *orig).unwrap();
            }
            out.finish().unwrap();
            path
        })
        .collect()
}

/// The members of the report that the capture alone decides (all but what
/// it was made from and the warnings).
const FIGURES: &[&str] = &[
    "schema",
    "rss",
    "packets_read",
    "bytes_read",
    "analysed_packets",
    "analysed_bytes",
    "queues",
    "imbalance",
    "flows",
    "fragments",
    "split_flows",
    "unhashed",
    "encap",
    "top_flows",
    "drops",
    "conservation_ok",
    "accuracy",
    "state",
];

fn assert_same_figures(got: &Value, want: &Value, what: &str) {
    for key in FIGURES {
        assert!(want.get(*key).is_some(), "{key} missing from the single-file report");
        assert_eq!(got[*key], want[*key], "{what}: {key}");
    }
}

#[test]
fn a_capture_cut_into_n_files_gives_the_single_file_report_both_ways() {
    let dir = TempDir::new("cli-archives", "split");
    let whole = dir.path("whole.pcap");
    bench_capture(&whole, 40_000, 3_000);
    let recs = records(&whole);
    let flags = ["--json", "--quiet", "--queues", "8", "--top", "25"];
    let mut args = vec!["analyze", whole.to_str().unwrap()];
    args.extend(flags);
    let single = json(&flowsteer(&args));
    assert!(single["fragments"]["first"].as_u64().unwrap() > 0);
    assert_eq!(single["inputs"].as_array().unwrap().len(), 1);
    assert_eq!(single["accuracy"]["bounded"].as_array().unwrap().len(), 1, "only the estimate");

    for n in [2usize, 7, 64] {
        let parts_dir = dir.path(&format!("parts-{n}"));
        let parts = split(&recs, n, &parts_dir, 0x9e37_79b9 + n as u64);
        // (a) One run over the directory, on two threads.
        let mut args = vec!["analyze", parts_dir.to_str().unwrap(), "--threads", "2"];
        args.extend(flags);
        let multi = json(&flowsteer(&args));
        assert_same_figures(&multi, &single, &format!("{n} files in one run"));
        let inputs = multi["inputs"].as_array().unwrap();
        assert_eq!(inputs.len(), n);
        let paths: Vec<&str> = inputs.iter().map(|i| i["path"].as_str().unwrap()).collect();
        let want: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(paths, want, "analysed in time order, not name order");
        assert!(multi.get("capture").is_none());
        assert_eq!(multi["warnings"].as_array().unwrap().len(), 0, "{}", multi["warnings"]);
        let packets: u64 = inputs.iter().map(|i| i["packets"].as_u64().unwrap()).sum();
        assert_eq!(packets, recs.len() as u64);

        // (b) One run per file, then --merge (given in name order).
        let reports_dir = dir.path(&format!("reports-{n}"));
        std::fs::create_dir_all(&reports_dir).unwrap();
        let mut reports = Vec::new();
        let mut held = 0;
        for p in &parts {
            let mut args = vec!["analyze", p.to_str().unwrap()];
            args.extend(flags);
            let out = flowsteer(&args);
            assert!(out.status.success(), "{}", text(&out.stderr));
            let report = reports_dir.join(format!("{}.json", p.file_name().unwrap().to_string_lossy()));
            std::fs::write(&report, &out.stdout).unwrap();
            held += json(&out)["state"]["held_fragments"].as_array().unwrap().len();
            reports.push(report);
        }
        if n == 64 {
            assert!(held > 0, "some cut falls between a datagram's fragments");
        }
        reports.sort();
        let mut args: Vec<&str> = vec!["analyze", "--merge", "--json", "--top", "25"];
        args.extend(reports.iter().map(|r| r.to_str().unwrap()));
        let merged = json(&flowsteer(&args));
        // The directory of reports, too.
        let by_dir = json(&flowsteer(&["analyze", "--merge", reports_dir.to_str().unwrap(), "--json", "--top", "25"]));
        assert_eq!(by_dir["state"], merged["state"]);
        assert_same_figures(&merged, &single, &format!("{n} reports merged"));
        assert_eq!(merged["inputs"], multi["inputs"]);
        assert_eq!(merged["merged_reports"].as_array().unwrap().len(), n);
    }
}

#[test]
fn inputs_say_what_the_report_was_made_from() {
    let dir = TempDir::new("cli-archives", "inputs");
    let whole = dir.path("whole.pcap");
    bench_capture(&whole, 5_000, 300);
    let parts = split(&records(&whole), 3, &dir.path("parts"), 7);
    let pattern = dir.path("parts").join("part-*.pcap");
    let doc = json(&flowsteer(&["analyze", pattern.to_str().unwrap(), "--json"]));
    let inputs = doc["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 3);
    assert_eq!(doc["flowsteer_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["state"]["rss"]["reta"].as_array().unwrap().len(), 128);
    for (input, part) in inputs.iter().zip(&parts) {
        assert_eq!(input["file_bytes"], std::fs::metadata(part).unwrap().len());
        assert_eq!(input["format"], "pcap");
        assert!(input["start_ns"].as_u64().unwrap() <= input["end_ns"].as_u64().unwrap());
        let want = blake3::hash(&std::fs::read(part).unwrap()).to_hex().to_string();
        assert_eq!(input["blake3"], want.as_str(), "what b3sum prints");
    }
    let fast = json(&flowsteer(&["analyze", pattern.to_str().unwrap(), "--json", "--no-hash"]));
    assert!(fast["inputs"].as_array().unwrap().iter().all(|i| i["blake3"].is_null()));
    assert_eq!(fast["state"], doc["state"]);
    // A pattern that matches nothing, and a directory without files.
    let out = flowsteer(&["analyze", dir.path("none-*.pcap").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no file matches"), "{}", text(&out.stderr));
    std::fs::create_dir_all(dir.path("empty")).unwrap();
    let out = flowsteer(&["analyze", dir.path("empty").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("a directory with no files"), "{}", text(&out.stderr));
    // Text output names the files.
    let out = flowsteer(&["analyze", pattern.to_str().unwrap()]);
    assert!(text(&out.stdout).starts_with("captures: 3 files, "), "{}", text(&out.stdout));
}

#[test]
fn overlapping_captures_are_merged_with_a_warning() {
    let dir = TempDir::new("cli-archives", "overlap");
    let (a, b) = (dir.path("a.pcap"), dir.path("b.pcap"));
    bench_capture(&a, 2_000, 100);
    // b: the same traffic shifted by half of a's span.
    let recs = records(&a);
    let shift = (recs.last().unwrap().0 - recs[0].0) / 2;
    let mut w = CaptureWriter::create(&b, 1).unwrap();
    for (ts, data, orig) in &recs {
        w.write_packet(ts + shift, data, *orig).unwrap();
    }
    w.finish().unwrap();
    let out = flowsteer(&["analyze", b.to_str().unwrap(), a.to_str().unwrap(), "--json"]);
    let doc = json(&out);
    assert!(text(&out.stderr).contains("overlap in time"), "{}", text(&out.stderr));
    assert_eq!(doc["inputs"][0]["path"], a.to_str().unwrap(), "ordered by first packet");
    assert_eq!(doc["packets_read"], 4_000);
}

#[test]
fn a_bad_file_among_many_fails_the_run_naming_it() {
    let dir = TempDir::new("cli-archives", "bad");
    bench_capture(&dir.path("good.pcap"), 1_000, 10);
    std::fs::write(dir.path("notes.txt"), "not a capture\n").unwrap();
    let out = flowsteer(&["analyze", dir.dir().to_str().unwrap(), "--quiet"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("{}: not a pcap or pcapng capture", dir.path("notes.txt").display())), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn merge_refuses_other_configurations_schemas_and_twice_the_same_capture() {
    let dir = TempDir::new("cli-archives", "refuse");
    let cap = dir.path("c.pcap");
    bench_capture(&cap, 3_000, 50);
    let parts = split(&records(&cap), 2, &dir.path("parts"), 3);
    let report = |part: &Path, extra: &[&str], name: &str| -> PathBuf {
        let mut args = vec!["analyze", part.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let out = flowsteer(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let path = dir.path(name);
        std::fs::write(&path, &out.stdout).unwrap();
        path
    };
    let a = report(&parts[0], &[], "a.json");
    let merge = |others: &[&Path]| {
        let mut args = vec!["analyze", "--merge", a.to_str().unwrap()];
        args.extend(others.iter().map(|p| p.to_str().unwrap()));
        flowsteer(&args)
    };
    for (extra, name, want) in [
        (&["--queues", "8"][..], "q8.json", "RETA of 128 entries over 4 queues vs 128 entries over 8 queues"),
        (&["--key", "symmetric"][..], "sym.json", "RSS key microsoft (40 bytes, fingerprint "),
        (&["--hash-types", "all"][..], "all.json", "hash types ipv4,tcp4,ipv6,tcp6 vs ipv4,tcp4,udp4,ipv6,tcp6,udp6"),
        (&["--inner"][..], "inner.json", "--inner off vs on"),
    ] {
        let b = report(&parts[1], extra, name);
        let out = merge(&[&b]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let stderr = text(&out.stderr);
        let head = format!("error: {} and {}: made under different configurations: ", a.display(), b.display());
        assert!(stderr.starts_with(&head) && stderr.contains(want), "{name}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    // Another schema: v1, or not a report at all.
    let mut v1: Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    v1["schema"] = "flowsteer.analyze.v1".into();
    let old = dir.path("old.json");
    std::fs::write(&old, serde_json::to_vec(&v1).unwrap()).unwrap();
    let out = merge(&[&old]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("schema flowsteer.analyze.v1, not flowsteer.analyze.v2"),
        "{}",
        text(&out.stderr)
    );
    let out = merge(&[&cap]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a flowsteer analyze report"), "{}", text(&out.stderr));
    // The same capture twice.
    let again = report(&parts[0], &[], "again.json");
    let out = merge(&[&again]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("merging would count it twice"), "{}", text(&out.stderr));
    // Flags the reports decide are a usage error.
    let b = report(&parts[1], &[], "b.json");
    let out = flowsteer(&["analyze", "--merge", a.to_str().unwrap(), b.to_str().unwrap(), "--key", "symmetric"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("drop --key"), "{}", text(&out.stderr));
    // And the right ones merge, in text too.
    let out = merge(&[&b]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Merged from 2 reports"), "{}", text(&out.stdout));
}

/// The README's fleet recipe, with GNU parallel as the batch runner: one
/// report per capture, written in parallel, then one --merge.
#[test]
fn gnu_parallel_recipe_merges_to_the_single_file_report() {
    let gnu = Command::new("parallel").arg("--version").output();
    if !gnu.is_ok_and(|o| o.status.success() && text(&o.stdout).contains("GNU parallel")) {
        eprintln!("skipped: GNU parallel is not installed (apt-get install parallel; .ci/run installs it)");
        return;
    }
    let dir = TempDir::new("cli-archives", "parallel");
    let whole = dir.path("whole.pcap");
    bench_capture(&whole, 20_000, 1_000);
    split(&records(&whole), 16, &dir.path("caps"), 11);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_flowsteer"));
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    // As in the README.
    let recipe = "mkdir -p reports && \
        find caps -name '*.pcap*' | parallel --will-cite -j 2 --halt now,fail=1 \
          'flowsteer analyze --quiet --json {} > reports/{/}.json' && \
        flowsteer analyze --merge --json reports/*.json > week.json";
    let out = Command::new("sh").arg("-c").arg(recipe).current_dir(dir.dir()).env("PATH", path).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let merged: Value = serde_json::from_slice(&std::fs::read(dir.path("week.json")).unwrap()).unwrap();
    let single = json(&flowsteer(&["analyze", whole.to_str().unwrap(), "--json"]));
    assert_same_figures(&merged, &single, "GNU parallel recipe");
    assert_eq!(merged["merged_reports"].as_array().unwrap().len(), 16);
}
