//! Every numeric flag of every subcommand, given 0, -1, 2^64 and a value
//! just past its documented range: a usage error (exit 2), one line on
//! stderr that names the flag and its range, nothing on stdout, no panic.
//! Also usage errors found after parsing (flags that contradict each other).

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;

/// How a flag's values are checked.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer in `min..=max`.
    Int(u64, u64),
    /// A power of two in `min..=max`.
    Pow2(u64, u64),
    /// Seconds, `> 0` and at most a year.
    Secs,
    /// Seconds, `>= 0` and at most a year.
    SecsOrZero,
    /// A share, `0..=1`.
    Share,
    /// A Zipf exponent, `0..=10`.
    Zipf,
    /// A frame size: imix or 64..=9000.
    Frame,
}

const YEAR: u64 = 365 * 24 * 3600;
const CPU: Kind = Kind::Int(0, 4095);
const RFS: Kind = Kind::Int(1, 1 << 22);

/// Values out of `kind`'s range.
fn bad_values(kind: Kind) -> Vec<String> {
    let mut v = vec!["-1".to_string(), "18446744073709551616".to_string()];
    match kind {
        Kind::Int(min, max) | Kind::Pow2(min, max) => {
            if min > 0 {
                v.push("0".into());
                v.push((min - 1).to_string());
            }
            if max < u64::MAX {
                v.push((max + 1).to_string());
            }
            if let Kind::Pow2(..) = kind {
                v.push("3".into());
            }
        }
        Kind::Secs => v.extend(["0".to_string(), (YEAR + 1).to_string(), "nan".into()]),
        Kind::SecsOrZero => v.push((YEAR + 1).to_string()),
        Kind::Share => v.push("1.01".into()),
        Kind::Zipf => v.push("10.5".into()),
        Kind::Frame => v.extend(["0".to_string(), "63".into(), "9001".into()]),
    }
    v.sort();
    v.dedup();
    v
}

const RSS_FLAGS: &[(&str, Kind)] = &[
    ("--seed", Kind::Int(0, u64::MAX)),
    ("--key-len", Kind::Int(40, 256)),
    ("--reta-size", Kind::Pow2(1, 65536)),
    ("--queues", Kind::Int(1, 4096)),
    ("--cpus", CPU),
];

/// (command line without the flag, the flag, its range, whether the RSS flags apply).
fn table() -> Vec<(Vec<&'static str>, &'static str, Kind)> {
    let hash = vec!["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"];
    let plan = vec!["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1"];
    let analyze = vec!["analyze", "/nonexistent/flowsteer-test.pcap"];
    let export = vec!["export", "eth0"];
    let run = vec!["run"];
    let defrag = vec!["defrag", "/nonexistent/in.pcap", "-o", "/nonexistent/out.pcap"];
    let udp_echo = vec!["udp-echo", "127.0.0.1:9"];
    let udp_gen = vec!["udp-gen", "-r", "127.0.0.1", "-p", "9"];
    let mut t = Vec::new();
    for base in [&hash, &plan, &analyze, &export, &run, &udp_gen] {
        for (flag, kind) in RSS_FLAGS {
            if base[0] == "run" && *flag == "--queues" {
                continue; // refused outright by `run` (see --rx-queues)
            }
            t.push((base.clone(), *flag, *kind));
        }
    }
    let mut add = |base: &Vec<&'static str>, flags: &[(&'static str, Kind)]| {
        for (flag, kind) in flags {
            t.push((base.clone(), *flag, *kind));
        }
    };
    add(&hash, &[("--sport", Kind::Int(0, 65535)), ("--dport", Kind::Int(0, 65535))]);
    add(
        &plan,
        &[("--sport", Kind::Int(0, 65535)), ("--buckets", Kind::Int(1, 4096)), ("--per-bucket", Kind::Int(1, 65536))],
    );
    add(&plan, &[("--dport", Kind::Int(0, 65535))]);
    add(&export, &[("--rfs-entries", RFS), ("--rfs-flow-cnt", RFS)]);
    add(
        &analyze,
        &[
            ("--vxlan-port", Kind::Int(1, 65535)),
            ("--max-flows", Kind::Int(1, 1 << 28)),
            ("--top", Kind::Int(0, 100_000)),
            ("--threads", Kind::Int(1, 1024)),
        ],
    );
    add(
        &run,
        &[
            ("--cores", CPU),
            ("--rx-queues", Kind::Int(1, 1024)),
            ("--queue-cpus", CPU),
            ("--rfs-entries", RFS),
            ("--rfs-flow-cnt", RFS),
            ("--buckets", Kind::Pow2(1, 65536)),
            ("--ring-size", Kind::Int(1, 1 << 24)),
            ("--burst", Kind::Int(1, 1024)),
            ("--flow-capacity", Kind::Int(1, 1 << 24)),
            ("--flow-timeout", Kind::Secs),
            ("--loops", Kind::Int(1, u64::MAX)),
            ("--max-capture-mib", Kind::Int(1, 1 << 20)),
            ("--flows", Kind::Int(1, 1 << 24)),
            ("--ipv6-share", Kind::Share),
            ("--tcp-share", Kind::Share),
            ("--size", Kind::Frame),
            ("--zipf", Kind::Zipf),
            ("--frag-share", Kind::Share),
            ("--frag-every", Kind::Int(1, 1_000_000)),
            ("--rate", Kind::Int(1, 1_000_000_000)),
            ("--reasm-mem", Kind::Int(1, 1 << 36)),
            ("--frag-timeout", Kind::Secs),
            ("--duration", Kind::Secs),
            ("--packets", Kind::Int(1, u64::MAX)),
            ("--interval", Kind::Secs),
            ("--migrate", Kind::Secs),
        ],
    );
    add(
        &defrag,
        &[("--mem-limit", Kind::Int(1, 1 << 36)), ("--timeout", Kind::Secs), ("--max-frags", Kind::Int(1, 8192))],
    );
    add(&vec!["queues", "lo"], &[("--queue-cpus", CPU)]);
    add(&vec!["bench", "hash"], &[("--seconds", Kind::Secs), ("--reps", Kind::Int(1, 1000))]);
    add(&vec!["bench", "offload"], &[("--seconds", Kind::Secs), ("--reps", Kind::Int(1, 1000))]);
    add(&vec!["bench", "analyze"], &[("--packets", Kind::Int(1, u64::MAX)), ("--flows", Kind::Int(1, 1 << 24))]);
    add(
        &vec!["bench", "steer"],
        &[
            ("--seconds", Kind::Secs),
            ("--flows", Kind::Int(1, 1 << 24)),
            ("--reps", Kind::Int(1, 1000)),
            ("--ring-items", Kind::Int(1, u64::MAX)),
        ],
    );
    add(
        &vec!["bench", "flows"],
        &[
            ("--flows", Kind::Int(1, 1 << 24)),
            ("--seconds", Kind::Secs),
            ("--reps", Kind::Int(1, 1000)),
            ("--burst", Kind::Int(1, 64)),
            ("--cpu", CPU),
        ],
    );
    add(
        &vec!["bench", "reasm"],
        &[
            ("--seconds", Kind::Secs),
            ("--cpu", CPU),
            ("--max-dist", Kind::Int(0, u32::MAX as u64)),
            ("--rounds", Kind::Int(1, 1000)),
        ],
    );
    add(
        &vec!["bench", "udp"],
        &[
            ("--seconds", Kind::Secs),
            ("--size", Kind::Int(32, 65507)),
            ("--flows", Kind::Int(1, 4096)),
            ("--max-flows", Kind::Int(1, 4096)),
        ],
    );
    add(
        &vec!["bench", "tcp"],
        &[("--seconds", Kind::Int(1, 86400)), ("--streams", Kind::Int(1, 128)), ("--repeat", Kind::Int(1, 100))],
    );
    add(
        &udp_echo,
        &[
            ("--queues", Kind::Int(0, 1023)),
            ("--cpus", CPU),
            ("--duration", Kind::Secs),
            ("--interval", Kind::Secs),
            ("--batch", Kind::Int(1, 1024)),
            ("--max-size", Kind::Int(1, 65535)),
            ("--rcvbuf", Kind::Int(1, i32::MAX as u64)),
        ],
    );
    add(
        &udp_gen,
        &[
            ("--count", Kind::Int(1, u64::MAX)),
            ("--size", Kind::Int(32, 65507)),
            // Or `max`; 0 (once `max`) is refused with a pointer to it.
            ("--rate", Kind::Int(1, u64::MAX)),
            ("--duration", Kind::Secs),
            ("--flows", Kind::Int(1, 4096)),
            ("--spread", Kind::Int(1, 4096)),
            ("--drain", Kind::SecsOrZero),
            ("--batch", Kind::Int(1, 1024)),
        ],
    );
    add(&vec!["udp-gen", "-r", "127.0.0.1"], &[("--port", Kind::Int(1, 65535))]);
    add(&vec!["udp-gen", "-r", "127.0.0.1", "-p", "9", "--afxdp", "lo"], &[("--afxdp-queue", Kind::Int(0, 4095))]);
    add(
        &vec!["rfc2544", "--dut", "none"],
        &[
            ("--sizes", Kind::Frame),
            ("--trial", Kind::Secs),
            ("--short-trial", Kind::Secs),
            ("--repeat", Kind::Int(1, 100)),
            ("--resolution", Kind::Share),
            ("--wait", Kind::SecsOrZero),
            ("--gen-cpus", CPU),
            ("--dut-cpus", CPU),
            ("--flows", Kind::Int(1, 65536)),
            ("--cost-rate", Kind::Int(1, 100_000_000)),
            ("--spread-queues", Kind::Int(1, 4096)),
        ],
    );
    add(&vec!["rfc2544", "--dut", "none", "--spread-queues", "2"], &[("--reta-size", Kind::Pow2(1, 65536))]);
    // A dry run checks every value as a run does.
    add(
        &vec!["rfc2544", "--dut", "none", "--dry-run"],
        &[("--trial", Kind::Secs), ("--repeat", Kind::Int(1, 100)), ("--gen-cpus", CPU)],
    );
    add(
        &vec!["bridge", "--port", "afxdp:fs-none-a", "--port", "afxdp:fs-none-b"],
        &[
            ("--workers", Kind::Int(1, 64)),
            ("--cpus", CPU),
            ("--ageing", Kind::Int(1, 1_000_000)),
            ("--max-learned", Kind::Int(0, 16_777_216)),
            ("--port-max-learned", Kind::Int(0, 16_777_216)),
            ("--default-pvid", Kind::Int(0, 4094)),
            ("--rx-copy-threshold", Kind::Int(0, 4096)),
            ("--interval", Kind::Secs),
            ("--duration", Kind::Secs),
        ],
    );
    t
}

/// Every subcommand, as its words on the command line.
const COMMANDS: &[&[&str]] = &[
    &["hash"],
    &["plan"],
    &["analyze"],
    &["export"],
    &["run"],
    &["defrag"],
    &["bench", "hash"],
    &["bench", "offload"],
    &["bench", "analyze"],
    &["bench", "steer"],
    &["bench", "flows"],
    &["bench", "reasm"],
    &["bench", "udp"],
    &["bench", "tcp"],
    &["queues"],
    &["udp-echo"],
    &["udp-gen"],
    &["rfc2544"],
    &["bridge"],
    &["bridge-ctl"],
    &["bridge-ctl", "port", "add"],
    &["bridge-ctl", "port", "del"],
    &["bridge-ctl", "fdb", "show"],
    &["bridge-ctl", "fdb", "add"],
    &["bridge-ctl", "fdb", "del"],
    &["bridge-ctl", "fdb", "flush"],
    &["bridge-ctl", "stats"],
];

/// The RSS flags that take text.
const RSS_TEXT: &[&str] = &["--key", "--hash-types", "--ethtool-x", "--mapping", "--impl"];

/// Value flags that are not numbers, per subcommand: a choice clap checks
/// (see [`CHOICES`]) or text the command parses (addresses, paths, names,
/// lists, masks). Every value flag in a subcommand's help is either here
/// or in [`table`].
fn not_numeric(command: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = match command {
        ["hash"] => vec!["--src", "--dst", "--input"],
        ["plan"] => vec!["--src-net", "--dst", "--sport-range", "--proto"],
        ["analyze"] => vec!["--plot"],
        ["export"] => vec!["--steer", "--rps-cpus"],
        ["run"] => vec![
            "--steer",
            "--dispatch",
            "--rps-cpus",
            "--source",
            "--xdp-mode",
            "--xdp-claim",
            "--fanout",
            "--frag-steer",
            "--listen",
            "--listen-dst",
            "--queues", // refused by `run` whatever its value (see --rx-queues)
        ],
        ["defrag"] => vec!["--output"],
        ["bench", "analyze"] => vec!["--keep"],
        ["bench", "flows"] => vec!["--dist", "--only", "--dpdk", "--plot"],
        ["bench", "reasm"] => vec!["--set", "--delivery", "--family", "--in-flight", "--order", "--dpdk"],
        ["bench", "udp"] => vec!["--modes", "--xdp-mode"],
        ["bench", "tcp"] => vec!["--dut"],
        ["udp-echo"] => vec!["--mode", "--iface", "--xdp-mode", "--xdp-claim", "--bind"],
        ["udp-gen"] => vec!["--remote", "--local", "--sport-range", "--afxdp", "--dst-mac"],
        ["rfc2544"] => {
            vec!["--dut", "--tx", "--rx", "--plot", "--io", "--key", "--hash-types", "--ethtool-x", "--sport-range"]
        }
        ["bridge"] => vec![
            "--port",
            "--tx-queue",
            "--fast-path",
            "--vlan-protocol",
            "--port-vlans",
            "--port-flags",
            "--worker-nice",
            "--ctl",
            "--metrics",
        ],
        ["bridge-ctl"] => vec!["--ctl"],
        _ => vec![],
    };
    if matches!(command, ["hash"] | ["plan"] | ["analyze"] | ["export"] | ["run"] | ["udp-gen"]) {
        v.extend(RSS_TEXT);
    }
    v
}

/// Flags whose value is one of a list: a value not in it is a usage
/// error before anything runs.
const CHOICES: &[(&[&str], &str)] = &[
    (&["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"], "--mapping"),
    (&["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"], "--impl"),
    (&["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2"], "--hash-types"),
    (&["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1"], "--proto"),
    (&["export", "eth0"], "--steer"),
    (&["run"], "--steer"),
    (&["run"], "--dispatch"),
    (&["run"], "--xdp-mode"),
    (&["run"], "--xdp-claim"),
    (&["run"], "--fanout"),
    (&["run"], "--frag-steer"),
    (&["run"], "--listen-dst"),
    (&["bench", "flows"], "--only"),
    (&["bench", "flows"], "--dist"),
    (&["bench", "reasm"], "--set"),
    (&["bench", "reasm"], "--delivery"),
    (&["bench", "reasm"], "--family"),
    (&["bench", "reasm"], "--in-flight"),
    (&["bench", "reasm"], "--order"),
    (&["bench", "udp"], "--modes"),
    (&["bench", "udp"], "--xdp-mode"),
    (&["bench", "tcp"], "--dut"),
    (&["udp-echo", "127.0.0.1:9"], "--mode"),
    (&["udp-echo", "127.0.0.1:9", "--mode", "xdp", "--iface", "lo"], "--xdp-mode"),
    (&["udp-echo", "127.0.0.1:9", "--mode", "xdp", "--iface", "lo"], "--xdp-claim"),
    (&["udp-echo", "127.0.0.1:9"], "--bind"),
    (&["rfc2544"], "--dut"),
    (&["rfc2544", "--dut", "none"], "--io"),
    (&["bridge", "--port", "afxdp:fs-none-a", "--port", "afxdp:fs-none-b"], "--tx-queue"),
    (&["bridge", "--port", "afxdp:fs-none-a", "--port", "afxdp:fs-none-b"], "--fast-path"),
    (&["bridge", "--port", "afxdp:fs-none-a", "--port", "afxdp:fs-none-b"], "--vlan-protocol"),
];

/// The value flags a subcommand's `--help` lists.
fn value_flags(command: &[&str]) -> Vec<String> {
    let mut args = command.to_vec();
    args.push("--help");
    let o = flowsteer(&args);
    assert_eq!(o.status.code(), Some(0), "{args:?}");
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut flags = Vec::new();
    for line in help.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let flag = match words.as_slice() {
            [short, long, value, ..] if short.len() == 3 && short.ends_with(',') => (*long, *value),
            [long, value, ..] => (*long, *value),
            _ => continue,
        };
        if flag.0.starts_with("--") && flag.1.starts_with('<') && line.starts_with("  ") {
            flags.push(flag.0.to_string());
        }
    }
    flags
}

/// The subcommand a table row's command line belongs to.
fn command_of(base: &[&str]) -> &'static [&'static str] {
    COMMANDS
        .iter()
        .filter(|c| base.len() >= c.len() && base[..c.len()] == ***c)
        .max_by_key(|c| c.len())
        .copied()
        .unwrap_or_else(|| panic!("{base:?} is no subcommand"))
}

#[test]
fn every_value_flag_of_every_subcommand_is_swept_or_named_as_not_numeric() {
    let table = table();
    let mut seen = 0;
    for &command in COMMANDS {
        let swept: Vec<&str> =
            table.iter().filter(|(base, _, _)| command_of(base) == command).map(|(_, flag, _)| *flag).collect();
        let text = not_numeric(command);
        let flags = value_flags(command);
        for flag in &flags {
            assert!(
                swept.contains(&flag.as_str()) || text.contains(&flag.as_str()),
                "{command:?} {flag}: a value flag neither in the numeric sweep nor named as not numeric"
            );
            seen += 1;
        }
        for flag in swept.iter().chain(&text) {
            assert!(flags.iter().any(|f| f == flag), "{command:?} {flag}: listed here but not in --help");
        }
    }
    assert!(seen > 150, "{seen} value flags");
}

#[test]
fn a_choice_outside_its_list_is_a_usage_error_before_anything_runs() {
    for (base, flag) in CHOICES {
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        args.push(format!("{flag}=bogus"));
        let o = flowsteer(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: stdout {}", String::from_utf8_lossy(&o.stdout));
        let errs: Vec<&str> = err.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(errs.len(), 1, "{args:?}: {err}");
        assert!(errs[0].starts_with("error: ") && errs[0].contains(flag), "{args:?}: {err}");
    }
}

fn assert_usage_error(args: &[String], names: &str) {
    let o = flowsteer(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout {}", String::from_utf8_lossy(&o.stdout));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains(names), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn every_numeric_flag_out_of_range_is_a_one_line_usage_error_naming_the_flag_and_range() {
    let mut checked = 0;
    for (base, flag, kind) in table() {
        for value in bad_values(kind) {
            let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            args.push(format!("{flag}={value}"));
            assert_usage_error(&args, flag);
            // The range is in the message.
            let o = flowsteer(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("..=") || err.contains("> 0"), "{args:?}: no range in {err}");
            checked += 1;
        }
    }
    assert!(checked > 300, "{checked}");
}

#[test]
fn overlapping_flag_names_say_which_meaning_they_have() {
    let help = |cmd: &[&str]| String::from_utf8_lossy(&flowsteer(cmd).stdout).into_owned();
    let run = help(&["run", "--help"]);
    assert!(run.contains("not a count") && run.contains("`--cores 1` is one worker on CPU 1"), "{run}");
    assert!(run.contains("the shared --queues does not apply to `run`"), "{run}");
    assert!(run.contains("hex mask"), "{run}");
    let hash = help(&["hash", "--help"]);
    assert!(hash.contains("The modelled NIC's receive queues") && hash.contains("run --rx-queues"), "{hash}");
    assert!(hash.contains("The modelled queue -> CPU map"), "{hash}");
    let echo = help(&["udp-echo", "--help"]);
    assert!(echo.contains("receive queue ids of --iface"), "{echo}");
}

#[test]
fn contradicting_flags_are_usage_errors_with_nothing_on_stdout() {
    for args in [
        &["hash", "--src", "x", "--dst", "10.0.0.2"][..],
        &["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--sport", "1"][..],
        &["hash", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--queues", "256"][..],
        &["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1", "--buckets", "8", "--queues", "4"][..],
        &["run", "--queues", "2"][..],
        &["run", "--rx-queues", "2", "--queue-cpus", "0,0,0"][..],
        &["export", "eth0", "--rps-cpus", "3"][..],
        // Overlapping names: each flag has one meaning, and a flag that does
        // not apply to the command or mode given is refused.
        &["run", "--cpus", "0"][..],
        &["run", "--rps-cpus", "3"][..],
        &["run", "--allow-mtu-drops"][..],
        &["udp-echo", "127.0.0.1:9", "--queues", "0"][..],
        &["udp-echo", "127.0.0.1:9", "--iface", "lo"][..],
        &["udp-echo", "127.0.0.1:9", "--mode", "xdp", "--iface", "lo", "--rcvbuf", "100000"][..],
        &["udp-gen", "-r", "127.0.0.1", "-p", "9", "--queues", "4"][..],
        &["udp-gen", "-r", "127.0.0.1", "-p", "9", "--cpus", "0,1"][..],
        &["rfc2544", "--dut", "none", "--sizes", "64", "--ipv6"][..],
        &["rfc2544", "--dut", "none", "--plot", "chart.jpg"][..],
        &["rfc2544", "--dut", "none", "--gen-cpus", "0,1,0"][..],
        &["rfc2544", "--dut", "none", "--sizes", "64", "--ipv6", "--dry-run"][..],
        &["rfc2544", "--dut", "none", "--plot", "chart.jpg", "--dry-run"][..],
        &["rfc2544", "--cleanup", "--dry-run"][..],
    ] {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let o = flowsteer(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let errs: Vec<&str> = err.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(errs.len(), 1, "{args:?}: {err}");
        assert!(errs[0].starts_with("error: ") && errs[0].contains(" --"), "{args:?}: {err}");
    }
}

#[test]
fn a_cpu_this_process_may_not_run_on_is_a_usage_error_naming_the_flag_and_the_available_ones() {
    let available = flowsteer_live::available_cpus();
    let absent = (99..).find(|c| !available.contains(c)).unwrap().to_string();
    let bridge = ["bridge", "--port", "afpacket:fs-none-a", "--port", "afpacket:fs-none-b"];
    for (base, flag) in [
        (&["run"][..], "--cores"),
        (&["queues", "lo"][..], "--queue-cpus"),
        (&["udp-echo", "127.0.0.1:9"][..], "--cpus"),
        (&["udp-echo", "127.0.0.1:9", "--mode", "xdp", "--iface", "lo"][..], "--cpus"),
        (&["rfc2544", "--dut", "none"][..], "--gen-cpus"),
        (&["rfc2544", "--dut", "none"][..], "--dut-cpus"),
        (&["rfc2544", "--dut", "none", "--dry-run"][..], "--gen-cpus"),
        (&bridge[..], "--cpus"),
    ] {
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        args.extend([flag.to_string(), absent.clone()]);
        let names = format!("{flag}: CPU {absent} is not available to this process (available: {available:?})");
        assert_usage_error(&args, &names);
    }
}
