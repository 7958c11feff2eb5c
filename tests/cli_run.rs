//! Integration tests that run the real binary: `run` and its counters.

use std::process::{Command, Output};

fn flowsteer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run flowsteer")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

fn check_totals(v: &serde_json::Value) {
    assert_eq!(v["schema"], "flowsteer.run.v2");
    assert_eq!(v["conservation_ok"], true);
    let t = &v["totals"];
    let received = t["received"].as_u64().unwrap();
    let delivered = t["delivered"].as_u64().unwrap();
    let in_flight = t["in_flight"].as_u64().unwrap();
    let by_reason: u64 = t["drops"].as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(t["dropped"].as_u64().unwrap(), by_reason);
    assert_eq!(received, delivered + by_reason + in_flight);
    assert_eq!(in_flight, 0);
    let handled: u64 = v["workers"].as_array().unwrap().iter().map(|w| w["handled"].as_u64().unwrap()).sum();
    assert!(handled >= delivered);
    for w in v["workers"].as_array().unwrap() {
        let (h, d, hd, q, l) = (&w["handled"], &w["dispatched"], &w["hdispatched"], &w["queued"], &w["len"]);
        assert_eq!(
            h.as_u64().unwrap(),
            d.as_u64().unwrap() + hd.as_u64().unwrap() + q.as_u64().unwrap() - l.as_u64().unwrap()
        );
    }
}

#[test]
fn run_packet_budget_is_exact_and_totals_add_up() {
    for (steer, dispatch) in [("rss", "hybrid"), ("rss", "deferred"), ("rfs", "hybrid"), ("rps", "direct")] {
        let mut args = vec!["run", "--packets", "20000", "--duration", "30", "--steer", steer, "--dispatch", dispatch];
        // RPS CPUs apply to rps and rfs only (with rss they are refused).
        if steer != "rss" {
            args.extend(["--rps-cpus", "3"]);
        }
        args.extend(["--json", "--no-pin"]);
        let v = json(&flowsteer(&args));
        check_totals(&v);
        assert_eq!(v["totals"]["received"], 20000, "{steer}/{dispatch}");
        assert_eq!(v["totals"]["order_violations"], 0);
    }
}

#[test]
fn run_single_queue_rps_and_listeners() {
    let v = json(&flowsteer(&[
        "run",
        "--packets",
        "50000",
        "--single-queue",
        "--steer",
        "rps",
        "--rps-cpus",
        "3",
        "--listen",
        "udp:53,tcp:80",
        "--json",
        "--no-pin",
    ]));
    check_totals(&v);
    let t = &v["totals"];
    assert!(t["drops"]["no_listener"].as_u64().unwrap() > 0);
    assert_eq!(
        t["delivered"].as_u64().unwrap(),
        t["listener_bucket"].as_u64().unwrap() + t["listener_wildcard"].as_u64().unwrap()
    );
}

#[test]
fn run_replays_a_capture() {
    let dir = std::env::temp_dir().join(format!("fs-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("t.pcap");
    let mut w = flowsteer_capture::CaptureWriter::create(&pcap, 1).unwrap();
    for i in 0..100u16 {
        let f = flowsteer_wire::build::udp_frame(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            1000 + i,
            53,
            &[0u8; 20],
        );
        w.write_packet(u64::from(i) * 1000, &f, f.len() as u32).unwrap();
    }
    w.write_packet(200_000, &[0xffu8; 10], 10).unwrap(); // garbage: a parse drop
    w.finish().unwrap();
    let arg = format!("pcap:{}", pcap.display());
    let v = json(&flowsteer(&["run", "--source", &arg, "--loops", "3", "--json", "--no-pin"]));
    check_totals(&v);
    assert_eq!(v["totals"]["received"], 303);
    assert_eq!(v["totals"]["dropped"], 3);
    assert_eq!(v["order_checked"], false);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_bad_flags_give_one_line_errors() {
    for args in [
        &["run", "--steer", "magic"][..],
        &["run", "--dispatch", "lazy"][..],
        &["run", "--rps-cpus", "xyz", "--steer", "rps"][..],
        &["run", "--rps-cpus", "1ffffffff", "--steer", "rps"][..],
        &["run", "--cores", "4096"][..],
        &["run", "--source", "pcap:/nonexistent/file.pcap"][..],
        &["run", "--source", "tap0"][..],
        &["run", "--duration", "0"][..],
        &["run", "--size", "10"][..],
        &["run", "--listen", "sctp:5"][..],
        &["run", "--buckets", "0"][..],
        &["run", "--burst", "0"][..],
        &["run", "--frag-steer", "sideways"][..],
        &["run", "--frag-every", "0"][..],
    ] {
        let o = flowsteer(args);
        // A capture that cannot be read is a failure (1); the rest are usage errors (2).
        let want = if args.iter().any(|a| a.contains("/nonexistent")) { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(want), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        let errs: Vec<&str> = e.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(errs.len(), 1, "{args:?}: {e}");
        assert!(errs[0].starts_with("error: "), "{e}");
    }
}

/// True once the process catches SIGINT and SIGTERM (`SigCgt` in
/// /proc/PID/status): a signal sent earlier would kill it.
fn catches_stop_signals(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    let bit = |sig: u32| 1u64 << (sig - 1);
    mask & bit(2) != 0 && mask & bit(15) != 0
}

/// Starts `flowsteer ARGS`, sends `signal` once it runs, returns its exit
/// code and output.
fn interrupt(args: &[&str], signal: &str) -> (Option<i32>, String, String) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flowsteer");
    let t = Instant::now();
    while !catches_stop_signals(child.id()) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let it run a little, so there are counters to print.
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sigint_and_sigterm_stop_a_generator_or_capture_run_with_its_final_counters() {
    let dir = std::env::temp_dir().join(format!("fs-run-sig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("t.pcap");
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
    let capture = format!("pcap:{}", pcap.display());
    let common = ["run", "--cores", "0", "--no-pin", "--duration", "600"];
    for (source, signal) in [("gen", "-INT"), ("gen", "-TERM"), (capture.as_str(), "-INT")] {
        let source_args = ["--source", source, "--loops", "1000000000"];
        // The text report: header, final table and summary.
        let args: Vec<&str> = common.iter().chain(&source_args).copied().collect();
        let (code, out, err) = interrupt(&args, signal);
        assert_eq!(code, Some(0), "{source} {signal}: {err}\n{out}");
        let conservation =
            out.lines().find(|l| l.starts_with("conservation: received ")).unwrap_or_else(|| panic!("{out}"));
        assert!(conservation.contains(" = delivered ") && conservation.ends_with(": OK"), "{conservation}");
        let name = if signal == "-INT" { "SIGINT" } else { "SIGTERM" };
        assert!(out.lines().any(|l| l.starts_with(&format!("interrupted by {name} at "))), "{source} {signal}: {out}");
        // The JSON document.
        let args: Vec<&str> = common.iter().chain(&source_args).chain(&["--json"]).copied().collect();
        let (code, out, err) = interrupt(&args, signal);
        assert_eq!(code, Some(0), "{source} {signal} --json: {err}\n{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        check_totals(&v);
        assert!(v["totals"]["received"].as_u64().unwrap() > 0, "{v}");
        assert!(v["elapsed_s"].as_f64().unwrap() < 600.0);
        assert_eq!(v["stopped_by"], "interrupted", "{source} {signal}");
        assert_eq!(v["interrupted"]["signal"], name, "{source} {signal}");
        assert_eq!(v["interrupted"]["drained"], true);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `run --key random --seed N` shows the key it drew (JSON `key`), the same
/// key every time; `--seed` alone seeds the generator, as before.
#[test]
fn run_shows_a_seeded_random_key() {
    let args = ["run", "--packets", "2000", "--duration", "30", "--json", "--no-pin", "--key", "random", "--seed", "5"];
    let a = json(&flowsteer(&args));
    let b = json(&flowsteer(&args));
    check_totals(&a);
    assert!(a["key"].as_str().unwrap().len() == 52 * 3 - 1, "{}", a["key"]);
    assert_eq!(a["key"], b["key"]);
    assert_eq!(a["key_seed"], 5);
    let plain =
        json(&flowsteer(&["run", "--packets", "2000", "--duration", "30", "--json", "--no-pin", "--seed", "5"]));
    assert!(plain.get("key").is_none());
    let text =
        flowsteer(&["run", "--packets", "2000", "--duration", "30", "--no-pin", "--key", "random", "--seed", "5"]);
    assert!(text.status.success());
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out
        .lines()
        .any(|l| l.starts_with("key (--key random --seed 5") && l.ends_with(a["key"].as_str().unwrap())));
}
