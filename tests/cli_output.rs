//! What the commands print and how they exit: the loss line, interval
//! reports, legends, the JSON documents' schema and warnings.

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;
use std::process::Output;

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_that_drops_says_how_many_the_share_and_the_top_reasons_apart_from_conservation() {
    let o = flowsteer(&["run", "--flow-capacity", "1", "--packets", "20000", "--duration", "30", "--no-pin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = text(&o);
    let loss = out.lines().find(|l| l.starts_with("loss: ")).unwrap_or_else(|| panic!("no loss line: {out}"));
    assert!(loss.contains("of 20000 received packets dropped (") && loss.contains(" %)"), "{loss}");
    let reasons = out.lines().find(|l| l.trim_start().starts_with("top reasons: ")).expect("reasons line");
    assert!(reasons.contains("flow_table_full"), "{reasons}");
    assert!(!out.lines().any(|l| l.starts_with("conservation") && l.contains("flow_table_full")));

    // Nothing dropped: no loss line.
    let o = flowsteer(&["run", "--packets", "2000", "--duration", "30", "--no-pin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!text(&o).contains("loss:"), "{}", text(&o));
}

#[test]
fn udp_gen_echo_with_no_reply_at_all_fails() {
    // A socket that never answers, on loopback.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let o = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &port, "--echo", "-n", "20", "--drain", "0.2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error: no reply to any of 20 datagrams"), "{err}");
    assert!(text(&o).contains("loss: 20 of 20 sent datagrams got no reply (100.0 %)"), "{}", text(&o));
    drop(silent);
}

fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[test]
fn run_interval_reports_carry_elapsed_time_and_the_interval_own_counts() {
    let o = flowsteer(&["run", "--duration", "1.2", "--interval", "0.3", "--no-pin", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = json_lines(&text(&o));
    let (last, intervals) = docs.split_last().unwrap();
    assert!(!intervals.is_empty());
    assert_eq!(last["schema"], "flowsteer.run.v2");
    let mut from = 0.0;
    let mut received = 0;
    for iv in intervals {
        assert_eq!(iv["schema"], "flowsteer.run-interval.v1");
        assert_eq!(iv["from_s"].as_f64().unwrap(), from, "intervals follow each other");
        let to = iv["to_s"].as_f64().unwrap();
        // The interval's own count: its cumulative total minus the previous one.
        let cum = iv["totals"]["received"].as_u64().unwrap();
        assert_eq!(iv["received"].as_u64().unwrap(), cum - received);
        let pps = iv["delivered"].as_u64().unwrap() as f64 / (to - from);
        assert!((iv["pps"].as_f64().unwrap() - pps).abs() < 1e-6 * pps.max(1.0), "{iv}");
        (from, received) = (to, cum);
    }
    assert!(last["totals"]["received"].as_u64().unwrap() >= received);
    // Each interval's per-worker counts are that interval's: they add up to
    // no more than the worker's count over the whole run.
    for w in last["workers"].as_array().unwrap() {
        let id = &w["worker"];
        let sum: u64 = intervals
            .iter()
            .flat_map(|iv| iv["workers"].as_array().unwrap())
            .filter(|x| &x["worker"] == id)
            .map(|x| x["handled"].as_u64().unwrap())
            .sum();
        assert!(sum <= w["handled"].as_u64().unwrap() && sum > 0, "worker {id}: {sum} vs {w}");
    }

    let o = flowsteer(&["run", "--duration", "0.8", "--interval", "0.3", "--no-pin"]);
    let out = text(&o);
    assert!(out.lines().any(|l| l.starts_with("[  0.00-0.") && l.contains(" s] received ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("[  0.00-") && l.ends_with(" s] whole run")), "{out}");
}

#[test]
fn udp_echo_interval_reports_carry_elapsed_time_and_the_interval_own_counts() {
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let addr = format!("127.0.0.1:{port}");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["udp-echo", &addr, "--cpus", "0", "--interval", "0.2", "--duration", "3", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Serving once it says so (after its self-test).
    // (The pipe stays open until the end: a closed one would end the server.)
    let mut err = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.starts_with("udp-echo: serving"), "{line}");
    let p = port.to_string();
    let gen = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &p, "--rate", "5000", "-n", "2000", "--echo"]);
    assert!(gen.status.success(), "{}", stderr(&gen));
    let o = server.wait_with_output().unwrap();
    drop(err);
    assert!(o.status.success(), "{:?}", o.status);
    let docs = json_lines(&text(&o));
    let (last, intervals) = docs.split_last().unwrap();
    assert!(last.get("interval").is_none());
    let (mut from, mut received) = (0.0, 0);
    for d in intervals {
        let iv = &d["interval"];
        assert_eq!(iv["from_s"].as_f64().unwrap(), from);
        let cum = d["total"]["received"].as_u64().unwrap();
        assert_eq!(iv["received"].as_u64().unwrap(), cum - received, "{d}");
        (from, received) = (iv["to_s"].as_f64().unwrap(), cum);
    }
    assert!(received >= 2000 || last["total"]["received"].as_u64().unwrap() >= 2000);
}

const PUBLIC_KEY_WARNING: &str = "the Microsoft default key is public";

fn one_doc(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

#[test]
fn run_json_describes_the_capture_that_ran_and_carries_every_warning() {
    let dir = common::TempDir::new("output", "run-json");
    let pcap = dir.path("t.pcap");
    let mut w = flowsteer_capture::CaptureWriter::create(&pcap, 1).unwrap();
    for i in 0..50u16 {
        let f = flowsteer_wire::build::udp_frame(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1000 + i,
            53,
            &[0u8; 20],
        );
        w.write_packet(u64::from(i) * 1000, &f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
    let src = format!("pcap:{}", pcap.display());
    let v = one_doc(&flowsteer(&["run", "--source", &src, "--loops", "2", "--steer", "rps", "--json", "--no-pin"]));
    assert_eq!(v["schema"], "flowsteer.run.v2");
    assert!(v.get("config").is_none(), "v1's flag echo is gone");
    let run = &v["run"];
    assert_eq!(run["source"], src.as_str());
    assert_eq!(run["workload"]["kind"], "capture");
    assert_eq!(run["workload"]["frames"], 50);
    assert_eq!(run["workload"]["loops"], 2);
    assert!(run["workload"].get("flows").is_none(), "no generator fields for a capture: {run}");
    let warnings: Vec<&str> = v["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("--steer rps without --rps-cpus")), "{warnings:?}");
    // A capture replayed through a modelled key: no NIC, no public-key warning.
    assert!(!warnings.iter().any(|w| w.contains(PUBLIC_KEY_WARNING)), "{warnings:?}");
    // Every warning on stderr is in the document.
    for line in stderr(&flowsteer(&["run", "--source", &src, "--steer", "rps", "--json", "--no-pin"])).lines() {
        if let Some(w) = line.strip_prefix("warning: ") {
            assert!(warnings.contains(&w), "{w} missing from {warnings:?}");
        }
    }

    let v =
        one_doc(&flowsteer(&["run", "--packets", "1000", "--duration", "30", "--flows", "64", "--json", "--no-pin"]));
    assert_eq!(v["run"]["workload"]["kind"], "generator");
    assert_eq!(v["run"]["workload"]["flows"], 64);
    assert_eq!(v["run"]["packet_limit"], 1000);
}

#[test]
fn plan_export_and_udp_gen_json_carry_the_warnings_printed() {
    for (args, warning) in [
        (
            &["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1", "--key", "symmetric", "--json"][..],
            "symmetric key",
        ),
        (&["export", "eth0", "--json"][..], PUBLIC_KEY_WARNING),
    ] {
        let o = flowsteer(args);
        let v = one_doc(&o);
        assert!(stderr(&o).contains(warning), "{args:?}: {}", stderr(&o));
        let w = v["warnings"].as_array().unwrap_or_else(|| panic!("{args:?}: no warnings in {v}"));
        assert!(w.iter().any(|w| w.as_str().unwrap().contains(warning)), "{args:?}: {w:?}");
    }
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let o = flowsteer(&[
        "udp-gen",
        "-r",
        "127.0.0.1",
        "-l",
        "127.0.0.2",
        "-p",
        &port,
        "--spread",
        "2",
        "--hash-types",
        "all",
        "-n",
        "10",
        "--json",
    ]);
    let v = one_doc(&o);
    let w = v["warnings"].as_array().unwrap();
    assert!(w.iter().any(|w| w.as_str().unwrap().contains(PUBLIC_KEY_WARNING)), "{w:?}");
}

/// The public-key warning only where the key reaches a NIC or real
/// traffic, and then once: `run` on the built-in generator (no NIC) and the
/// modelling commands say nothing, `run` on a live source says it; `export`, whose script programs a NIC,
/// says it and nothing else; `udp-gen --spread`, which models the
/// receiver's NIC, once; a NIC's own key read with `--ethtool-x` once, not
/// twice with `export`'s.
#[test]
fn the_public_key_warning_is_said_once_and_only_where_the_key_reaches_a_nic() {
    let o = flowsteer(&["run", "--packets", "1000", "--duration", "30", "--no-pin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains(PUBLIC_KEY_WARNING), "{}", stderr(&o));
    let v = one_doc(&flowsteer(&["run", "--packets", "1000", "--duration", "30", "--no-pin", "--json"]));
    assert!(!v["warnings"].to_string().contains(PUBLIC_KEY_WARNING), "{}", v["warnings"]);
    // A live source hashes real traffic with it: once (AF_PACKET on lo, read only; needs root).
    if flowsteer_netns::is_root() {
        let o = flowsteer(&["run", "--source", "afpacket:lo", "--duration", "0.3", "--no-pin"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stderr(&o).matches(PUBLIC_KEY_WARNING).count(), 1, "{}", stderr(&o));
    }
    for args in [
        &["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"][..],
        &["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1"][..],
    ] {
        let o = flowsteer(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
    }

    let o = flowsteer(&["export", "eth0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "warning: the Microsoft default key is public: anyone can aim traffic at one queue with it (use --key random in production)\n"
    );
    let v = one_doc(&flowsteer(&["export", "eth0", "--json"]));
    assert_eq!(
        v["warnings"],
        serde_json::json!([
            "the Microsoft default key is public: anyone can aim traffic at one queue with it (use --key random in production)"
        ])
    );
    // A key of the user's own: nothing to say.
    let o = flowsteer(&["export", "eth0", "--key", "random"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");

    let dir = common::TempDir::new("output", "key-warning");
    let x = dir.path("x.txt");
    let text = "RX flow hash indirection table for eth9 with 2 RX ring(s):\n    0:      0     1     0     1\nRSS hash key:\n6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa\n";
    std::fs::write(&x, text).unwrap();
    let o = flowsteer(&["export", "eth9", "--ethtool-x", x.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = stderr(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("warning: the Microsoft default key is public") && lines[0].contains("x.txt"),
        "{lines:?}"
    );

    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let o = flowsteer(&[
        "udp-gen",
        "-r",
        "127.0.0.1",
        "-l",
        "127.0.0.2",
        "-p",
        &port,
        "--spread",
        "1",
        "--hash-types",
        "all",
        "-n",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let public: Vec<&str> = err.lines().filter(|l| l.contains(PUBLIC_KEY_WARNING)).collect();
    assert_eq!(public.len(), 1, "{err}");
    assert!(public[0].contains("if the receiver's NIC uses it"), "{public:?}");
    // Without --spread no key is used: nothing said.
    let o = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &port, "-n", "2"]);
    assert!(o.status.success() && !stderr(&o).contains("key"), "{}", stderr(&o));
}

#[test]
fn every_table_has_a_legend_in_help_and_a_footer_and_run_names_its_workload() {
    for (cmd, columns) in [
        (&["run", "--help"][..], &["WSID", "HDisp'd", "QDrops", "Handled", "OrderViol"][..]),
        (&["udp-echo", "--help"][..], &["rcvbuf_err", "cpu_miss", "KernDrops", "NotForUs"][..]),
        (&["udp-gen", "--help"][..], &["reorder", "mismatch"][..]),
        (&["hash", "--help"][..], &["reta", "queue"][..]),
        (&["analyze", "--help"][..], &["Pkt%", "Split"][..]),
        (&["plan", "--help"][..], &["bucket", "sport, dport"][..]),
        (&["queues", "--help"][..], &["FlowCnt", "Poller"][..]),
        (&["bench", "hash", "--help"][..], &["x faster", "mode"][..]),
        (&["bench", "steer", "--help"][..], &["x sq-32", "Mpps/core"][..]),
        (&["bench", "reasm", "--help"][..], &["in_flight", "completed"][..]),
        (&["bench", "tcp", "--help"][..], &["x linux-bridge", "retrans", "Gbit/s"][..]),
        (&["bench", "offload", "--help"][..], &["x copy", "ns/frame", "segments"][..]),
        (&["rfc2544", "--help"][..], &["NDR Mfps", "limited", "gen max"][..]),
    ] {
        let help = text(&flowsteer(cmd));
        assert!(help.contains("Table columns"), "{cmd:?}: {help}");
        for c in columns {
            assert!(help.lines().any(|l| l.trim_start().starts_with(c)), "{cmd:?}: no legend for {c}");
        }
    }
    let o = flowsteer(&["run", "--packets", "2000", "--duration", "30", "--flows", "16", "--no-pin"]);
    let out = text(&o);
    let workload = out.lines().find(|l| l.starts_with("workload: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(workload.contains("built-in generator") && workload.contains("16 flows") && workload.contains("64-byte"));
    // The legend: a short table under the table, every line within 100 columns.
    let from = out.find("\nlegend:\n").unwrap_or_else(|| panic!("{out}"));
    let rows: Vec<&str> = out[from + 9..].lines().take_while(|l| l.starts_with("  ")).collect();
    assert!(
        rows.iter().any(|l| l.starts_with("  HDisp'd ")) && rows.iter().any(|l| l.starts_with("  WMark ")),
        "{rows:?}"
    );
    assert!(rows.iter().all(|l| l.chars().count() <= 100), "{rows:?}");
    // Internal figures only with --verbose.
    assert!(!out.contains("timers fired"), "{out}");
    let out = text(&flowsteer(&["run", "--packets", "2000", "--duration", "30", "--no-pin", "--verbose"]));
    assert!(out.contains("per-core timers fired"), "{out}");

    let out = text(&flowsteer(&["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"]));
    assert!(out.contains("\nlegend:\n  src, dst"), "{out}");
    let out = text(&flowsteer(&["plan", "--queues", "4", "--dst", "10.0.0.1", "--src-net", "10.1.0.0/24"]));
    assert!(out.contains("\nlegend:\n  bucket "), "{out}");
    let out = text(&flowsteer(&["queues", "lo"]));
    assert!(out.contains("\nlegend:\n  Queue "), "{out}");
}

#[test]
fn a_capture_cut_inside_its_file_header_is_an_error_for_every_command() {
    let dir = common::TempDir::new("output", "header-cut");
    let cap = dir.path("cut.pcap");
    let w = flowsteer_capture::CaptureWriter::create(&cap, 1).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&cap).unwrap();
    std::fs::write(&cap, &bytes[..10]).unwrap();
    let c = cap.to_str().unwrap();
    let out_path = dir.path("out.pcap");
    let src = format!("pcap:{c}");
    for args in [
        &["analyze", c, "--quiet"][..],
        &["defrag", c, "-o", out_path.to_str().unwrap()][..],
        &["run", "--source", &src, "--no-pin"][..],
    ] {
        let o = flowsteer(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o));
        assert!(stderr(&o).lines().any(|l| l.starts_with("error: ")), "{args:?}");
    }
    assert!(!out_path.exists(), "no output written from an unreadable capture");
}

#[test]
fn udp_gen_spread_says_it_plans_a_model_and_checks_it_against_this_host() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let base = ["udp-gen", "-r", "127.0.0.1", "-l", "127.0.0.2", "-p", &port, "--spread", "4", "--hash-types", "all"];
    let mut args = base.to_vec();
    args.extend(["-n", "4", "--json"]);
    let v = one_doc(&flowsteer(&args));
    let warnings: Vec<&str> = v["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("modelled receiver") && w.contains("--ethtool-x")), "{warnings:?}");
    // 127.0.0.1 is on lo, which has one receive queue.
    assert!(warnings.iter().any(|w| w.contains("this host's lo") && w.contains("at most 1 of the 4")), "{warnings:?}");
    // No --cpus: no CPU is claimed.
    for f in v["per_flow"].as_array().unwrap() {
        assert!(f["cpu"].is_null(), "{f}");
    }
    args.extend(["--cpus", "0,4095"]);
    let v = one_doc(&flowsteer(&args));
    let warnings: Vec<&str> = v["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("--cpus names CPU(s) 4095")), "{warnings:?}");
    drop(silent);
}

/// Runs `args` with stdout and stderr on a pseudo-terminal (`script`), or
/// `None` when `script` (util-linux) is missing.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let bin = env!("CARGO_BIN_EXE_flowsteer");
    let cmd = std::iter::once(bin).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let o = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().ok()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn long_work_shows_progress_on_a_terminal_only() {
    let dir = common::TempDir::new("output", "progress");
    let cap = dir.path("in.pcap");
    let mut w = flowsteer_capture::CaptureWriter::create(&cap, 1).unwrap();
    let f = flowsteer_wire::build::udp_frame("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1, 2, &[0; 20]);
    for i in 0..1000u64 {
        w.write_packet(i * 1000, &f, f.len() as u32).unwrap();
    }
    w.finish().unwrap();
    let (c, out) = (cap.to_str().unwrap(), dir.path("out.pcap"));
    let o = out.to_str().unwrap();
    let src = format!("pcap:{c}");
    let Some(tty) = on_a_terminal(&["defrag", c, "-o", o]) else {
        println!("skipped: no `script` to give the command a terminal");
        return;
    };
    assert!(tty.contains("defrag: reading"), "{tty}");
    let tty = on_a_terminal(&["run", "--source", &src, "--no-pin"]).unwrap();
    assert!(tty.contains("loading capture"), "{tty}");
    // Never with --json, nor when stderr is not a terminal.
    assert!(!on_a_terminal(&["defrag", c, "-o", o, "--json"]).unwrap().contains("defrag: reading"));
    assert!(!on_a_terminal(&["defrag", c, "-o", o, "--quiet"]).unwrap().contains("defrag: reading"));
    assert!(!on_a_terminal(&["run", "--source", &src, "--no-pin", "--json"]).unwrap().contains("loading capture"));
    let piped = flowsteer(&["defrag", c, "-o", o]);
    assert!(piped.status.success() && !stderr(&piped).contains("reading"), "{}", stderr(&piped));
}
