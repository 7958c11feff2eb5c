//! The README's examples, run as a new user would: every `flowsteer ...`
//! line of the fenced blocks under "Subcommands", in order, in one scratch
//! directory (so a line that makes a file serves the lines after it), with
//! the release names swapped for this build's binary. Each must exit 0.
//!
//! Lines that cannot run here are skipped with the reason printed: those
//! that need root and a lab of interfaces (live sources, the bridge, the
//! UDP server and generator, the RFC 2544 harness, which its own tests run
//! in namespaces they build), a NIC named in the example that this machine
//! lacks, or more than a minute (listed with their time in the README).

#[allow(dead_code)] // only `TempDir` is used here
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Lines not run, by a word they contain, and why.
const SKIP: &[(&str, &str)] = &[
    ("flowsteer bridge", "needs root and member interfaces (crates/apps/bridge/tests/live*.rs run it in namespaces)"),
    ("flowsteer udp-echo", "needs the example's addresses on an interface (tests/live_udp.rs runs it across a veth)"),
    ("flowsteer udp-gen", "needs the example's addresses on an interface (tests/live_udp*.rs run it across a veth)"),
    (
        "flowsteer rfc2544",
        "needs root; runs for minutes (tests/cli_rfc2544.rs runs short trials; --dry-run shows the plan)",
    ),
    ("--source afxdp:", "needs root and an interface"),
    ("--source afpacket:", "needs root and an interface"),
    ("--dpdk ", "needs DPDK's harness built (tests/cli_bench_reasm.rs builds it when libdpdk-dev is installed)"),
    ("flowsteer bench steer", "a sweep of about 2 minutes (BENCHMARKS.md)"),
    ("flowsteer bench flows  ", "a sweep of about 5 minutes and 3 GB (BENCHMARKS.md); the quick look runs"),
    ("flowsteer bench reasm", "a sweep of about 1.5 minutes (BENCHMARKS.md)"),
    ("flowsteer bench tcp", "needs root and iperf3"),
    (
        "reports/*.json",
        "the fleet recipe needs a directory of captures (tests/cli_archives.rs runs it with GNU parallel)",
    ),
    ("/captures/", "runs in a Kubernetes pod"),
];

/// Every example line (continuation lines joined, trailing comment cut)
/// of the fenced blocks after `## Subcommands` and before the next `## `.
fn examples(readme: &str) -> Vec<String> {
    let start = readme.find("\n## Subcommands").expect("a Subcommands section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let mut out = Vec::new();
    let mut in_block = false;
    let mut cur = String::new();
    for line in rest[..end].lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let l = line.trim();
        if cur.is_empty() && !l.starts_with("flowsteer ") {
            continue;
        }
        let (body, more) = match l.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (l, false),
        };
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(body);
        if !more {
            let cmd = match cur.find(" #") {
                Some(i) => cur[..i].trim_end().to_string(),
                None => cur.clone(),
            };
            out.push(cmd);
            cur.clear();
        }
    }
    out
}

fn skip_reason(line: &str) -> Option<String> {
    for (word, why) in SKIP {
        if format!("{line}  ").contains(word) {
            return Some((*why).to_string());
        }
    }
    for nic in ["eth0", "eth1"] {
        let named = line.split_whitespace().any(|w| w == nic);
        if named && !Path::new("/sys/class/net").join(nic).exists() {
            return Some(format!("names {nic}, which this machine does not have"));
        }
    }
    None
}

/// Splits a shell line into its words and the file its standard output is
/// redirected to (`> FILE`, the one shell feature the examples use).
fn words(line: &str) -> (Vec<String>, Option<String>) {
    let (cmd, out) = match line.split_once(" > ") {
        Some((cmd, file)) => (cmd, Some(file.trim().to_string())),
        None => (line, None),
    };
    (cmd.split_whitespace().map(str::to_string).collect(), out)
}

#[test]
fn every_quick_example_runs_as_written() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = examples(&readme);
    assert!(lines.len() > 30, "found only {} examples", lines.len());
    let dir = common::TempDir::new("readme", "examples");
    // The NIC's own key and table, as `ethtool -x eth0 > eth0-x.txt`
    // writes them (the README's line needs a NIC; a fixture stands in).
    std::fs::write(dir.path("eth0-x.txt"), ETHTOOL_X).unwrap();
    let mut ran = 0;
    let mut skipped = Vec::new();
    let mut failed = Vec::new();
    for line in &lines {
        if let Some(why) = skip_reason(line) {
            skipped.push(format!("{line}: {why}"));
            continue;
        }
        let (w, stdout_to) = words(line);
        let started = Instant::now();
        let out =
            Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(&w[1..]).current_dir(dir.path(".")).output().unwrap();
        ran += 1;
        if let Some(file) = stdout_to {
            std::fs::write(dir.path(&file), &out.stdout).unwrap();
        }
        let took = started.elapsed();
        if !out.status.success() {
            failed.push(format!(
                "{line}: exit {:?} after {took:?}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        } else if took > Duration::from_secs(60) {
            // Not a failure (the machine may be busy), but the README
            // should say so: print it.
            println!("note: {line} took {took:?}");
        }
    }
    println!("ran {ran} README examples; skipped {}:", skipped.len());
    for s in &skipped {
        println!("  skipped: {s}");
    }
    assert!(failed.is_empty(), "README examples that failed:\n{}", failed.join("\n"));
    assert!(ran >= 15, "only {ran} examples ran");
}

/// `ethtool -x` of a NIC with 8 queues and the Microsoft key.
const ETHTOOL_X: &str = "RX flow hash indirection table for eth0 with 8 RX ring(s):
    0:      0     1     2     3     4     5     6     7
    8:      0     1     2     3     4     5     6     7
   16:      0     1     2     3     4     5     6     7
   24:      0     1     2     3     4     5     6     7
   32:      0     1     2     3     4     5     6     7
   40:      0     1     2     3     4     5     6     7
   48:      0     1     2     3     4     5     6     7
   56:      0     1     2     3     4     5     6     7
   64:      0     1     2     3     4     5     6     7
   72:      0     1     2     3     4     5     6     7
   80:      0     1     2     3     4     5     6     7
   88:      0     1     2     3     4     5     6     7
   96:      0     1     2     3     4     5     6     7
  104:      0     1     2     3     4     5     6     7
  112:      0     1     2     3     4     5     6     7
  120:      0     1     2     3     4     5     6     7
RSS hash key:
6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa
RSS hash function:
    toeplitz: on
    xor: off
    crc32: off
";
