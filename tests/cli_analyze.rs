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
        "\nlegend:\n  Queue ",
        "\n  legend:\n    Proto ",
    ] {
        assert!(stdout.contains(section), "missing {section:?} in:\n{stdout}");
    }
    // Warnings go to stderr with the prefix; no progress bar off a terminal.
    let stderr = text(&out.stderr);
    // A modelled key reaches no NIC: no public-key warning.
    assert!(!stderr.contains("the Microsoft default key is public"), "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("warning: ")), "{stderr}");
}

#[test]
fn json_report_adds_up() {
    let dir = TempDir::new("cli-analyze", "json");
    let cap = dir.path("mixed.pcap");
    let frames = mixed_frames(50);
    write_capture(&cap, &frames);
    let doc = json(&analyze(&cap, &["--json", "--queues", "8", "--top", "3"]));
    assert_eq!(doc["schema"], "flowsteer.analyze.v2");
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
    assert!(!doc["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("Microsoft")));
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
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Inner-header spread"), "{stdout}");
    // The encapsulation table has its legend; the outer spread (everything
    // on one of 4 queues) is read as severe, with what the figures mean.
    assert!(stdout.contains("\n  legend:\n    Kind "), "{stdout}");
    assert!(stdout.contains("the encapsulation: vlan"), "{stdout}");
    let verdict = stdout.lines().find(|l| l.starts_with("  severe: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        verdict.contains("the busiest queue gets 4.0x its fair share of the packets (max/mean; 1.0 = even)"),
        "{verdict}"
    );
    assert!(verdict.contains("standard deviation of packets per queue over their mean"), "{verdict}");
    assert!(verdict.ends_with("(balanced below 1.25x, uneven below 2x, severe from 2x)"), "{verdict}");
}

/// Counts read as words: one entry, one queue, one flow.
#[test]
fn counts_of_one_are_singular() {
    let dir = TempDir::new("cli-analyze", "plural");
    let cap = dir.path("one.pcap");
    write_capture(&cap, &[build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1000, 53, b"x")]);
    let out = analyze(&cap, &["--reta-size", "1", "--queues", "1"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains(", RETA 1 entry over 1 queue, "), "{stdout}");
    assert!(stdout.contains("Top 1 flow by packets:"), "{stdout}");
    assert!(stdout.contains("Drops: 0 packets"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("  balanced: the busiest queue gets 1.0x")), "{stdout}");
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

/// A classic pcap (little-endian, microseconds) of `linktype` built byte by
/// byte: `(data, orig_len)` per record, so a record may claim any length.
fn raw_pcap(path: &Path, linktype: u32, records: &[(Vec<u8>, u32)]) {
    let mut v = Vec::new();
    for x in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, linktype] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for (i, (data, orig)) in records.iter().enumerate() {
        for x in [1_000_000 + i as u32, 0, data.len() as u32, *orig] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(data);
    }
    std::fs::write(path, v).unwrap();
}

/// Two TCP connections over loopback, both directions each: 4 flows.
fn loopback_frames() -> Vec<Vec<u8>> {
    let (a, b) = (ip("127.0.0.1"), ip("::1"));
    vec![
        build::tcp_frame(a, a, 50000, 8080, 1, 0x02, b""),
        build::tcp_frame(a, a, 8080, 50000, 1, 0x12, b""),
        build::tcp_frame(b, b, 50001, 443, 1, 0x02, b""),
        build::tcp_frame(b, b, 443, 50001, 1, 0x12, b"hi"),
    ]
}

#[test]
fn bsd_loopback_captures_count_their_flows() {
    let dir = TempDir::new("cli-analyze", "loopback");
    for (lt, name) in [(flowsteer_wire::LinkType::Null, "null.pcap"), (flowsteer_wire::LinkType::Loop, "loop.pcap")] {
        let cap = dir.path(name);
        let frames: Vec<(Vec<u8>, u32)> = loopback_frames()
            .iter()
            .map(|f| {
                let g = build::convert_link(f, lt);
                let len = g.len() as u32;
                (g, len)
            })
            .collect();
        raw_pcap(&cap, lt.to_pcap(), &frames);
        let doc = json(&analyze(&cap, &["--json"]));
        assert_eq!(doc["drops"]["total"], 0, "{name}: {doc}");
        assert_eq!(doc["analysed_packets"], 4, "{name}");
        assert_eq!(doc["flows"]["tracked"], 4, "{name}");
        assert_eq!(doc["split_flows"]["directions"]["connections"], 2, "{name}");
    }
}

#[test]
fn pcapng_interfaces_of_several_link_types_are_all_read() {
    use flowsteer_capture::{NgInterface, PcapNgWriter};
    use flowsteer_wire::LinkType;
    let dir = TempDir::new("cli-analyze", "ng-links");
    let cap = dir.path("mixed.pcapng");
    let mut w = PcapNgWriter::new(std::fs::File::create(&cap).unwrap()).unwrap();
    let links = [
        (LinkType::Ethernet, 1u32),
        (LinkType::Null, 0),
        (LinkType::Loop, 108),
        (LinkType::LinuxSll, 113),
        (LinkType::LinuxSll2, 276),
        (LinkType::RawIp, 101),
        (LinkType::RawIp, 228),
        (LinkType::RawIp, 229),
    ];
    let mut packets = 0;
    for (i, (link, linktype)) in links.iter().enumerate() {
        let id = w.add_interface(&NgInterface { linktype: *linktype, name: format!("if{i}"), tsresol: 9 }).unwrap();
        let frame = if *linktype == 229 {
            build::udp_frame(ip("2001:db8::1"), ip("2001:db8::2"), 1000 + i as u16, 53, b"q")
        } else {
            build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1000 + i as u16, 53, b"q")
        };
        let f = build::convert_link(&frame, *link);
        w.write_packet(id, 1_000_000_000 + i as u64, &f, f.len() as u32).unwrap();
        packets += 1;
    }
    w.finish().unwrap();
    let doc = json(&analyze(&cap, &["--json"]));
    assert_eq!(doc["capture"]["format"], "pcapng");
    assert_eq!(doc["drops"]["total"], 0, "{doc}");
    assert_eq!(doc["analysed_packets"], packets);
    assert_eq!(doc["flows"]["tracked"], packets);
}

#[test]
fn a_record_captured_beyond_its_original_length_counts_its_captured_bytes() {
    let dir = TempDir::new("cli-analyze", "caplen");
    let cap = dir.path("bad-len.pcap");
    let f = build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, b"payload");
    let g = build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, b"x");
    raw_pcap(&cap, 1, &[(f.clone(), 20), (g.clone(), g.len() as u32), (f.clone(), 30)]);
    let out = analyze(&cap, &["--json"]);
    let doc = json(&out);
    assert_eq!(doc["packets_read"], 3);
    assert_eq!(doc["bytes_read"], (2 * f.len() + g.len()) as u64);
    let warnings: Vec<&str> = doc["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    let about: Vec<&&str> = warnings.iter().filter(|w| w.contains("captured length above")).collect();
    assert_eq!(about.len(), 1, "{warnings:?}");
    assert!(about[0].starts_with("2 records"), "{warnings:?}");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

#[test]
fn gzip_and_zstd_captures_give_the_plain_capture_report() {
    let dir = TempDir::new("cli-analyze", "compressed");
    let plain = dir.path("mixed.pcap");
    write_capture(&plain, &mixed_frames(2000));
    let bytes = std::fs::read(&plain).unwrap();
    let base = json(&analyze(&plain, &["--json", "--queues", "4"]));
    // Named without a telling extension: recognised by content.
    for (name, data, compression) in [("gz.cap", gzip(&bytes), "gzip"), ("zst.cap", zstd(&bytes), "zstd")] {
        let path = dir.path(name);
        std::fs::write(&path, &data).unwrap();
        let doc = json(&analyze(&path, &["--json", "--queues", "4"]));
        assert_eq!(doc["capture"]["compression"], compression);
        for key in ["packets_read", "bytes_read", "queues", "flows", "split_flows", "drops"] {
            assert_eq!(doc[key], base[key], "{name}: {key}");
        }
        // Cut in the middle: the packets before the cut, and a warning.
        std::fs::write(&path, &data[..data.len() / 2]).unwrap();
        let out = analyze(&path, &["--json"]);
        let doc = json(&out);
        assert_eq!(doc["capture"]["truncated"], true, "{name}");
        assert!(doc["packets_read"].as_u64().unwrap() < base["packets_read"].as_u64().unwrap());
        assert!(text(&out.stderr).contains("capture truncated after"), "{}", text(&out.stderr));
        // Cut before a whole file header decompresses: unreadable, exit 1.
        std::fs::write(&path, &data[..12]).unwrap();
        let out = analyze(&path, &["--json"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("ends inside its file header"), "{}", text(&out.stderr));
    }
}

#[test]
fn a_pcapng_section_of_an_unknown_version_is_skipped_with_a_warning() {
    use flowsteer_capture::{NgInterface, PcapNgWriter};
    let dir = TempDir::new("cli-analyze", "ng-version");
    let cap = dir.path("v2.pcapng");
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let id = w.add_interface(&NgInterface { linktype: 1, name: "eth0".into(), tsresol: 6 }).unwrap();
    let f = build::udp_frame(ip("10.0.0.1"), ip("10.0.0.2"), 1, 2, b"x");
    w.write_packet(id, 0, &f, f.len() as u32).unwrap();
    let mut bytes = w.finish().unwrap();
    // A second section, the same, of major version 2.
    let second = bytes.clone();
    bytes.extend_from_slice(&second);
    let at = second.len() + 12;
    bytes[at..at + 2].copy_from_slice(&2u16.to_le_bytes());
    std::fs::write(&cap, &bytes).unwrap();
    let out = analyze(&cap, &["--json"]);
    let doc = json(&out);
    assert_eq!(doc["packets_read"], 1);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("1 pcapng section of an unknown major version was skipped (1 packet in it)"), "{stderr}");
}
