//! `flowsteer analyze` and `flowsteer bench analyze`, run as the real binary
//! on small captures written with `CaptureWriter`.

mod common;
use common::{flowsteer, TempDir};
use flowsteer_capture::CaptureWriter;
use flowsteer_wire::build;
use serde_json::Value;
use std::net::IpAddr;
use std::path::Path;
use std::process::Output;

fn analyze(capture: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["analyze", capture.to_str().unwrap()];
    args.extend_from_slice(extra);
    flowsteer(&args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, 1).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_000_000_000 + i as u64 * 1000, f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
}

/// `n` TCP connections seen in both directions, 3 packets each, plus a few
/// UDP flows.
fn mixed_frames(n: u16) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for i in 0..n {
        let client = IpAddr::from([10, 1, (i >> 8) as u8, i as u8]);
        let server = ip("192.0.2.1");
        frames.push(build::tcp_frame(client, server, 40000 + i, 443, 1, 0x02, b""));
        frames.push(build::tcp_frame(server, client, 443, 40000 + i, 1, 0x12, b""));
        frames.push(build::tcp_frame(client, server, 40000 + i, 443, 2, 0x10, b"hello"));
        frames.push(build::udp_frame(ip("2001:db8::1"), ip("2001:db8::2"), 1000 + i, 53, b"q"));
    }
    frames
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}, stderr: {}", out.status, text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", text(&out.stdout)))
}

fn queue_sum(doc: &Value, table: &str) -> u64 {
    doc[table]["queues"]
        .as_array()
        .or_else(|| doc[table].as_array())
        .unwrap()
        .iter()
        .map(|q| q["packets"].as_u64().unwrap())
        .sum()
}

#[test]
fn text_report_has_the_table_and_sections() {
    let dir = TempDir::new("cli-analyze", "text");
    let cap = dir.path("mixed.pcap");
    write_capture(&cap, &mixed_frames(50));
    let out = analyze(&cap, &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let header = stdout.lines().find(|l| l.contains("Queue")).unwrap();
    for col in ["Queue", "CPU", "Packets", "Pkt%", "Bytes", "Flows"] {
        assert!(header.contains(col), "{header}");
    }
    for section in [
        "Total",
        "Imbalance:",
        "Split flows",
        "Encapsulation:",
        "Top 10 flows",
        "Drops: 0",
        "Conservation: 200 read = 200 analysed + 0 dropped: ok",
    ] {
        assert!(stdout.contains(section), "missing {section:?} in:\n{stdout}");
    }
    // Warnings go to stderr with the prefix; no progress bar off a terminal.
    let stderr = text(&out.stderr);
    assert!(stderr.contains("warning: the Microsoft default key is public"), "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("warning: ")), "{stderr}");
}

#[test]
fn json_report_adds_up() {
    let dir = TempDir::new("cli-analyze", "json");
    let cap = dir.path("mixed.pcap");
    let frames = mixed_frames(50);
    write_capture(&cap, &frames);
    let doc = json(&analyze(&cap, &["--json", "--queues", "8", "--top", "3"]));
    assert_eq!(doc["schema"], "flowsteer.analyze.v1");
    let queues = doc["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 8);
    for q in queues {
        for field in ["queue", "cpu", "packets", "bytes", "flows"] {
            assert!(q[field].is_u64(), "{field} in {q}");
        }
    }
    assert_eq!(queue_sum(&doc, "queues"), frames.len() as u64);
    assert_eq!(doc["packets_read"], frames.len() as u64);
    assert_eq!(doc["conservation_ok"], true);
    assert_eq!(doc["flows"]["tracked"], 150);
    assert_eq!(doc["split_flows"]["directions"]["connections"], 50);
    assert!(doc["imbalance"]["max_mean"].as_f64().unwrap() >= 1.0);
    assert!(doc["imbalance"]["cv"].is_f64());
    assert_eq!(doc["top_flows"].as_array().unwrap().len(), 3);
    assert_eq!(doc["drops"]["total"], 0);
    assert!(doc["encap"]["vxlan"]["packets"].is_u64());
    assert!(doc.get("inner").is_none());
    assert!(doc["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("Microsoft")));
    assert_eq!(doc["capture"]["format"], "pcap");
}

#[test]
fn symmetric_key_keeps_both_directions_together() {
    let dir = TempDir::new("cli-analyze", "symmetric");
    let cap = dir.path("mixed.pcap");
    write_capture(&cap, &mixed_frames(64));
    let doc = json(&analyze(&cap, &["--json", "--key", "default"]));
    assert!(doc["split_flows"]["directions"]["split"].as_u64().unwrap() > 0);
    let doc = json(&analyze(&cap, &["--json", "--key", "symmetric"]));
    assert_eq!(doc["split_flows"]["directions"]["connections"], 64);
    assert_eq!(doc["split_flows"]["directions"]["split"], 0);
}

#[test]
fn inner_spread_of_a_vxlan_tunnel() {
    let dir = TempDir::new("cli-analyze", "vxlan");
    let cap = dir.path("vxlan.pcap");
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| {
            let inner = build::udp_frame(IpAddr::from([172, 16, 0, i as u8]), ip("172.16.1.1"), 5000 + i, 80, b"in");
            build::vxlan_frame(ip("198.51.100.1"), ip("198.51.100.2"), 49152, 7, &inner)
        })
        .collect();
    write_capture(&cap, &frames);
    let doc = json(&analyze(&cap, &["--json", "--inner", "--hash-types", "all"]));
    let busy = |v: &Value| v.as_array().unwrap().iter().filter(|q| q["packets"].as_u64().unwrap() > 0).count();
    assert_eq!(busy(&doc["queues"]), 1);
    assert!(busy(&doc["inner"]["queues"]) >= 3, "{}", doc["inner"]);
    assert_eq!(queue_sum(&doc, "inner"), 64);
    assert_eq!(doc["encap"]["vxlan"]["queues_hit"], 1);
    let out = analyze(&cap, &["--inner"]);
    assert!(text(&out.stdout).contains("Inner-header spread"), "{}", text(&out.stdout));
}

#[test]
fn plots_svg_and_png() {
    let dir = TempDir::new("cli-analyze", "plot");
    let cap = dir.path("mixed.pcap");
    write_capture(&cap, &mixed_frames(20));
    for name in ["chart.svg", "chart.png"] {
        let chart = dir.path(name);
        let out = analyze(&cap, &["--plot", chart.to_str().unwrap(), "--inner", "--quiet"]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(std::fs::metadata(&chart).unwrap().len() > 0, "{name}");
    }
    let bad = dir.path("chart.jpg");
    let out = analyze(&cap, &["--plot", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(".svg or .png"), "{}", text(&out.stderr));
    assert!(!bad.exists());
}

#[test]
fn plot_never_overwrites_the_capture() {
    let dir = TempDir::new("cli-analyze", "plot-input");
    // A capture is read by its content, so it may well be named like a chart.
    let cap = dir.path("trace.png");
    write_capture(&cap, &mixed_frames(20));
    let before = std::fs::read(&cap).unwrap();
    let link = dir.path("link.svg");
    std::os::unix::fs::symlink(&cap, &link).unwrap();
    let hard = dir.path("hard.png");
    std::fs::hard_link(&cap, &hard).unwrap();
    for chart in [&cap, &link, &hard] {
        let out = analyze(&cap, &["--plot", chart.to_str().unwrap(), "--quiet"]);
        assert_eq!(out.status.code(), Some(1), "{}", chart.display());
        let stderr = text(&out.stderr);
        let want = format!("error: {}: the output is the input {}", chart.display(), cap.display());
        assert!(stderr.starts_with(&want), "{stderr}");
        assert!(out.stdout.is_empty(), "refused before the capture is read");
        assert_eq!(std::fs::read(&cap).unwrap(), before);
    }
    // Charts elsewhere are whole files of their format.
    let png = dir.path("chart.png");
    let svg = dir.path("chart.svg");
    for chart in [&png, &svg] {
        assert!(analyze(&cap, &["--plot", chart.to_str().unwrap(), "--quiet"]).status.success());
    }
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(std::fs::read_to_string(&svg).unwrap().trim_end().ends_with("</svg>"));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["chart.png", "chart.svg", "hard.png", "link.svg", "trace.png"], "no temporary file left");
}

#[test]
fn a_text_file_is_not_a_capture() {
    let dir = TempDir::new("cli-analyze", "notcap");
    let file = dir.path("notes.txt");
    std::fs::write(&file, "this is not a capture\n").unwrap();
    let out = analyze(&file, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("warning: ")).collect();
    assert_eq!(errors, [format!("error: {}: not a pcap or pcapng capture", file.display())], "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_file_names_its_path() {
    let dir = TempDir::new("cli-analyze", "missing");
    let file = dir.path("nope.pcap");
    let out = analyze(&file, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("error: {}", file.display())), "{stderr}");
}

#[test]
fn a_truncated_capture_is_reported_with_a_warning() {
    let dir = TempDir::new("cli-analyze", "truncated");
    let cap = dir.path("cut.pcap");
    let frames = mixed_frames(10);
    write_capture(&cap, &frames);
    let bytes = std::fs::read(&cap).unwrap();
    std::fs::write(&cap, &bytes[..bytes.len() - 10]).unwrap();
    let out = analyze(&cap, &["--json"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("warning: capture truncated after {} packets", frames.len() - 1)), "{stderr}");
    let doc = json(&out);
    assert_eq!(doc["packets_read"], frames.len() as u64 - 1);
    assert_eq!(doc["capture"]["truncated"], true);
    assert_eq!(doc["conservation_ok"], true);

    // Cut inside the file header: no packet can be read, an error (exit 1).
    std::fs::write(&cap, &bytes[..10]).unwrap();
    let out = analyze(&cap, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("ends inside its file header"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn garbage_after_a_valid_header_does_not_panic() {
    let dir = TempDir::new("cli-analyze", "garbage");
    let cap = dir.path("garbage.pcap");
    write_capture(&cap, &[]);
    let header = std::fs::read(&cap).unwrap();
    let mut state = 0x1234_5678_9abc_def1u64;
    for round in 0..8 {
        let mut bytes = header.clone();
        for _ in 0..(500 + round * 300) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bytes.push(state as u8);
        }
        std::fs::write(&cap, &bytes).unwrap();
        let out = analyze(&cap, &["--quiet"]);
        let stderr = text(&out.stderr);
        assert!(matches!(out.status.code(), Some(0) | Some(1)), "{:?} {stderr}", out.status);
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn garbage_frames_are_dropped_by_reason_and_conserved() {
    let dir = TempDir::new("cli-analyze", "dropped");
    let cap = dir.path("junk.pcap");
    let mut frames = mixed_frames(5);
    frames.push(vec![1, 2, 3]);
    let mut bad = build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, b"x");
    bad[14] = 0x35;
    frames.push(bad);
    write_capture(&cap, &frames);
    let doc = json(&analyze(&cap, &["--json"]));
    assert_eq!(doc["drops"]["total"], 2);
    assert_eq!(doc["drops"]["parse_errors"]["truncated_ethernet"], 1);
    assert_eq!(doc["drops"]["parse_errors"]["bad_version"], 1);
    assert_eq!(queue_sum(&doc, "queues"), 20);
    assert_eq!(doc["conservation_ok"], true);
}

#[test]
fn bench_analyze_runs_and_keeps_the_capture_on_request() {
    let dir = TempDir::new("cli-analyze", "bench");
    let keep = dir.path("bench.pcap");
    let out = flowsteer(&[
        "bench",
        "analyze",
        "--packets",
        "20000",
        "--flows",
        "500",
        "--json",
        "--keep",
        keep.to_str().unwrap(),
    ]);
    let doc = json(&out);
    let r = &doc["results"][0];
    assert_eq!(r["bench"], "analyze");
    assert_eq!(r["packets"], 20000);
    assert!(r["seconds"].as_f64().unwrap() > 0.0);
    assert!(r["mpps"].as_f64().unwrap() > 0.0);
    assert!(std::fs::metadata(&keep).unwrap().len() > 20000 * 60);
}

/// `--key random --seed N` draws the same key every run and shows it (text
/// header and `--json`); that key given back with `--key` gives the same
/// report.
#[test]
fn a_random_key_is_shown_and_reproduces_the_report() {
    let dir = TempDir::new("cli-analyze", "random-key");
    let cap = dir.path("mixed.pcap");
    write_capture(&cap, &mixed_frames(40));
    let a = json(&analyze(&cap, &["--json", "--queues", "8", "--key", "random", "--seed", "5"]));
    let b = json(&analyze(&cap, &["--json", "--queues", "8", "--key", "random", "--seed", "5"]));
    let key = a["key"].as_str().expect("the drawn key is in the report").to_string();
    assert_eq!(a["key_seed"], 5);
    assert_eq!(a["queues"], b["queues"]);
    assert_eq!(b["key"], a["key"]);
    let back = json(&analyze(&cap, &["--json", "--queues", "8", "--key", &key]));
    assert_eq!(back["queues"], a["queues"]);
    assert_eq!(back["split_flows"], a["split_flows"]);
    assert!(back.get("key").is_none());
    let out = analyze(&cap, &["--queues", "8", "--key", "random", "--seed", "5"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).lines().any(|l| l.starts_with("key (--key random --seed 5") && l.ends_with(&key)));
}
