//! What a new user meets in `run`'s output: the built-in generator loses
//! nothing to full queues unless a rate is asked for, the text sums add up
//! on screen (reassembly included), every interval is printed, a signal
//! says it interrupted the run (a second one still prints the counters),
//! the rate line states its reference, and counts read "1 worker", not
//! "1 worker(s)".

#[allow(dead_code)] // not every helper is used here
mod common;

use common::{flowsteer, TempDir};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn text(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&text(o)).expect("one JSON document")
}

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line `{prefix}...` in:\n{out}"))
}

/// The numbers of a line, in order (`1.25` counts as two).
fn numbers(l: &str) -> Vec<u64> {
    l.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect()
}

/// README's `run` examples (shortened to 1 s, unpinned): the generator
/// offers what the workers take, so none of them drops a packet.
#[test]
fn the_readme_examples_lose_nothing_to_full_queues() {
    for example in [
        &["--cores", "0,1", "--steer", "rfs", "--migrate", "0.5"][..],
        &["--single-queue", "--steer", "rps", "--rps-cpus", "3"][..],
        &["--zipf", "1.2", "--rebalance", "--dispatch", "deferred"][..],
        &[][..],
    ] {
        let mut args = vec!["run", "--duration", "1", "--no-pin", "--json"];
        args.extend(example);
        let v = json(&flowsteer(&args));
        let t = &v["totals"];
        assert_eq!(v["conservation_ok"], true, "{example:?}");
        assert!(t["received"].as_u64().unwrap() > 0, "{example:?}: {t}");
        assert_eq!(t["dropped"], 0, "{example:?}: {}", t["drops"]);
        assert_eq!(v["run"]["workload"]["rate_pps"], serde_json::Value::Null);
        assert_eq!(v["stopped_by"], "duration");
    }
}

/// The header says how the generator offers its traffic, and the `rate:`
/// line what the figure is measured against.
#[test]
fn the_header_says_how_traffic_is_offered_and_the_rate_line_its_reference() {
    let out = text(&flowsteer(&["run", "--cores", "0", "--packets", "20000", "--duration", "30", "--no-pin"]));
    let header = line(&out, "flowsteer run: ");
    assert!(header.starts_with("flowsteer run: 1 worker on CPUs [0], 1 receive queue, "), "{header}");
    let workload = line(&out, "workload: ");
    assert!(
        workload.contains("spread over 1 receive queue by RSS, offered as fast as the workers take it"),
        "{workload}"
    );
    assert!(workload.contains("no queue_full drops; --rate PPS offers a fixed rate instead"), "{workload}");
    let rate = line(&out, "rate: ");
    assert!(rate.contains(" Mpps per worker (") && rate.contains(" over 1 worker), "), "{rate}");
    assert!(rate.contains("% of the reference 11.14 Mpps per core (bench steer: one worker"), "{rate}");
    assert!(rate.contains("BENCHMARKS.md; --dispatch hybrid)"), "{rate}");
    let verdict = ["good (", "fair: ", "poor: "];
    assert!(verdict.iter().any(|v| rate.contains(&format!("): {v}"))), "{rate}");
    assert!(!out.contains("loss:"), "{out}");

    // Another workload: the same figures, no verdict, and why.
    let args = ["run", "--cores", "0", "--packets", "20000", "--duration", "30", "--no-pin", "--steer", "rps"];
    let out = text(&flowsteer(&args));
    let rate = line(&out, "rate: ");
    assert!(rate.ends_with("; no verdict: the reference's workload differs (--steer rps)"), "{rate}");

    let v = json(&flowsteer(&["run", "--cores", "0", "--packets", "20000", "--duration", "30", "--no-pin", "--json"]));
    assert_eq!(v["rate"]["reference_mpps_per_core"], 11.14);
    assert!(["good", "fair", "poor"].contains(&v["rate"]["verdict"].as_str().unwrap()), "{}", v["rate"]);
    assert_eq!(v["stopped_by"], "packets");
    assert_eq!(v["interrupted"], serde_json::Value::Null);
}

/// `--rate` offers a fixed rate whatever the workers take: the header says
/// so and why packets may be dropped, the `offered:` line what was asked
/// and generated.
#[test]
fn rate_offers_a_fixed_rate_and_says_so() {
    let args = ["run", "--cores", "0", "--rate", "200000", "--packets", "20000", "--duration", "30", "--no-pin"];
    let out = text(&flowsteer(&args));
    let workload = line(&out, "workload: ");
    assert!(workload.contains("offered at 200000 packets/s in total (--rate; 200000 per receive queue)"), "{workload}");
    assert!(workload.contains("what they cannot take is dropped as queue_full"), "{workload}");
    let offered = line(&out, "offered: ");
    assert!(offered.starts_with("offered: 0.200 Mpps asked (--rate 200000), "), "{offered}");
    assert!(!out.contains("\nrate: "), "{out}");

    let mut args = args.to_vec();
    args.push("--json");
    let v = json(&flowsteer(&args));
    assert_eq!(v["run"]["workload"]["rate_pps"], 200000);
    assert_eq!(v["rate"]["offered_pps"], 200000);
    assert_eq!(v["totals"]["received"], 20000);

    // Only the generator is paced.
    let o = flowsteer(&["run", "--source", "pcap:/nonexistent.pcap", "--rate", "1000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rate paces the built-in generator"));
}

/// A capture whose fragments are reassembled: the text total adds up on
/// screen (the fragments merged into datagrams are a term of the sum) and
/// the conservation line shows its numbers.
#[test]
fn the_text_total_adds_up_with_reassembly() {
    let dir = TempDir::new("run-output", "reasm");
    let pcap = dir.path("t.pcap");
    let mut w = flowsteer_capture::CaptureWriter::create(&pcap, 1).unwrap();
    let (a, b): (std::net::Ipv4Addr, std::net::Ipv4Addr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let mut ts = 0;
    for i in 0..10u16 {
        // One whole datagram, then one in three fragments.
        let whole = flowsteer_wire::build::udp_frame(a.into(), b.into(), 1000 + i, 53, &[0u8; 20]);
        let frags = flowsteer_wire::build::ipv4_fragments(a, b, 2000 + i, 53, 100 + i, &[7u8; 40], 16);
        assert_eq!(frags.len(), 3);
        for f in std::iter::once(&whole).chain(&frags) {
            ts += 1000;
            w.write_packet(ts, f, f.len() as u32).unwrap();
        }
    }
    w.finish().unwrap();
    let source = format!("pcap:{}", pcap.display());
    let out = text(&flowsteer(&["run", "--source", &source, "--loops", "5", "--cores", "0", "--no-pin"]));
    let total = line(&out, "total: ");
    assert!(
        total.starts_with(
            "total: received 200 = delivered 100 + dropped 0 + in flight 0 + merged by reassembly 100 \
             (150 fragments absorbed into 50 datagrams, 0 of them still pending); "
        ),
        "{total}"
    );
    let conservation = line(&out, "conservation: ");
    assert_eq!(
        conservation,
        "conservation: received 200 + reassembled 50 = delivered 100 + dropped 0 + in flight 0 + absorbed 150: OK"
    );
    let workload = line(&out, "workload: ");
    assert!(workload.contains(": 40 frames (0.0 MiB), 5 times, "), "{workload}");
    let rate = line(&out, "rate: ");
    assert!(rate.contains("no verdict: the reference's workload differs (a capture, "), "{rate}");
}

/// `--interval`: every interval is printed, the last one up to the end of
/// the run, and (JSON) they add up to the whole run.
#[test]
fn every_interval_is_printed() {
    let args = ["run", "--cores", "0", "--duration", "2", "--interval", "1", "--no-pin"];
    let out = text(&flowsteer(&args));
    let labels: Vec<&str> = out.lines().filter(|l| l.starts_with('[') && l.contains(" s] received ")).collect();
    assert!(labels.len() >= 2, "{out}");
    let whole = out.lines().find(|l| l.ends_with(" s] whole run")).unwrap_or_else(|| panic!("{out}"));
    let end = |l: &str| l.split(" s]").next().unwrap().rsplit('-').next().unwrap().to_string();
    assert_eq!(end(labels.last().unwrap()), end(whole), "the last interval ends with the run:\n{out}");

    let mut args = args.to_vec();
    args.push("--json");
    let o = flowsteer(&args);
    let docs: Vec<serde_json::Value> = text(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (last, intervals) = docs.split_last().unwrap();
    assert!(intervals.len() >= 2, "{docs:?}");
    let mut from = 0.0;
    let mut received = 0;
    for iv in intervals {
        assert_eq!(iv["from_s"].as_f64().unwrap(), from);
        from = iv["to_s"].as_f64().unwrap();
        received += iv["received"].as_u64().unwrap();
    }
    assert_eq!(from, last["elapsed_s"].as_f64().unwrap());
    assert_eq!(received, last["totals"]["received"].as_u64().unwrap());
}

/// True once the process catches SIGINT and SIGTERM (`SigCgt`).
fn catches_stop_signals(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    mask & (1 << 1) != 0 && mask & (1 << 14) != 0
}

/// A second signal never loses the counters: the run ends (at once when
/// the second signal finds it still draining, exit 1 and said so; cleanly
/// otherwise, exit 0) and prints what it counted.
#[test]
fn a_second_signal_still_prints_the_counters() {
    let child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["run", "--cores", "0", "--no-pin", "--duration", "600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !catches_stop_signals(child.id()) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    // Two different signals: two of the same may merge into one.
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let _ = Command::new("kill").args(["-TERM", &pid]).stderr(Stdio::null()).status();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let interrupted = line(&out, "interrupted by SIGINT at ");
    let conservation = line(&out, "conservation: received ");
    assert!(conservation.ends_with(": OK"), "{conservation}");
    let cut = interrupted.contains("then ended at once by a second signal");
    assert_eq!(o.status.code(), Some(if cut { 1 } else { 0 }), "{out}");
}

/// `queues` counts its queues in words that agree with the number.
#[test]
fn queues_counts_read_as_words() {
    let out = text(&flowsteer(&["queues", "lo"]));
    let head = out.lines().next().unwrap();
    let n = numbers(head);
    let (rx, tx) = (n[n.len() - 2], n[n.len() - 1]);
    let word = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    assert!(
        head.ends_with(&format!("{}, {}", word(rx, "rx queue", "rx queues"), word(tx, "tx queue", "tx queues"))),
        "{head}"
    );
    let help = String::from_utf8_lossy(&flowsteer(&["queues", "--help"]).stdout).into_owned();
    assert!(help.contains("would be pinned to (--queue-cpus)") && !help.contains("(--cpus)"), "{help}");
}
