//! Integration tests that run the real `flowsteer` binary: `hash` and `plan`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn flowsteer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run flowsteer")
}

fn flowsteer_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flowsteer");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn hash_single_tuple_matches_microsoft_vector() {
    let o = flowsteer(&[
        "hash",
        "--src",
        "66.9.149.187",
        "--dst",
        "161.142.100.80",
        "--sport",
        "2794",
        "--dport",
        "1766",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["hash"], "0x51ccc178");
    assert_eq!(v["reta_index"], 120);
    assert_eq!(v["queue"], 0);
    // The key is a model here, on no NIC: no public-key warning.
    assert!(!stderr(&o).contains("public"), "{}", stderr(&o));
    let o = flowsteer(&["hash", "--src", "66.9.149.187", "--dst", "161.142.100.80"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("0x323e8fc2"), "{}", stdout(&o));
}

#[test]
fn hash_input_file_one_result_per_line_in_order() {
    let input = "# comment\n66.9.149.187,161.142.100.80,2794,1766\n\n3ffe:2501:200:1fff::7,3ffe:2501:200:3::1,2794,1766\n199.92.111.2,65.69.140.83\n";
    let o = flowsteer_stdin(&["hash", "--input", "-", "--json"], input);
    assert!(o.status.success(), "{}", stderr(&o));
    let hashes: Vec<String> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["hash"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hashes, ["0x51ccc178", "0x40207d3d", "0xd718262a"]);
}

#[test]
fn hash_bad_lines_are_reported_in_place() {
    let o = flowsteer_stdin(
        &["hash", "--input", "-", "--json"],
        "1.2.3.4,5.6.7.8\nnot,an,address\n1.2.3.4,::1\n5.6.7.8,1.2.3.4\n",
    );
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0]["hash"].is_string());
    assert_eq!(lines[1]["line"], 2);
    assert!(lines[2]["error"].as_str().unwrap().contains("IPv4"));
    assert!(lines[3]["hash"].is_string());
}

#[test]
fn hash_with_ethtool_x_uses_its_table_and_key() {
    let dir = std::env::temp_dir().join(format!("fs-ethtool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.txt");
    // 8-entry table that sends everything to queue 3, and the Microsoft key.
    let text = "RX flow hash indirection table for eth9 with 4 RX ring(s):\n    0:      3     3     3     3     3     3     3     3\nRSS hash key:\n6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa\nRSS hash function:\n    toeplitz: on\n    xor: off\n    crc32: off\n";
    std::fs::write(&path, text).unwrap();
    let o =
        flowsteer(&["hash", "--src", "1.1.1.1", "--dst", "2.2.2.2", "--ethtool-x", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["queue"], 3);
    // The NIC uses the public key: said once, naming the file, on stderr and in the record.
    let want = format!(
        "warning: the Microsoft default key is public: anyone can aim traffic at one queue with it, and {} shows the NIC \
         uses it (put a random key on the NIC: `flowsteer export IFACE --key random`)\n",
        path.display()
    );
    assert_eq!(stderr(&o), want);
    assert_eq!(v["warnings"], serde_json::json!([want.trim_end().strip_prefix("warning: ").unwrap()]));
    // A key from the flags and one from the file: refused, not one of
    // them silently dropped.
    for key in [&["--key", "random"][..], &["--key", "random", "--seed", "7"], &["--key", "symmetric"]] {
        let mut args = vec!["hash", "--src", "1.1.1.1", "--dst", "2.2.2.2", "--ethtool-x", path.to_str().unwrap()];
        args.extend(key);
        let o = flowsteer(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
        assert!(stderr(&o).contains("--ethtool-x") && stderr(&o).contains("--key"), "{}", stderr(&o));
    }
    std::fs::write(&path, "hello world\n").unwrap();
    let o = flowsteer(&["hash", "--src", "1.1.1.1", "--dst", "2.2.2.2", "--ethtool-x", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_flags_and_keys_give_one_line_errors() {
    for args in [
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--key", "zz"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--key", "6d5a"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--reta-size", "100"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--sport", "1"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "::1"][..],
        &["hash", "--src", "1.2.3.400", "--dst", "5.6.7.8"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--hash-types", "sctp"][..],
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--ethtool-x", "/nonexistent/x"][..],
        &["hash", "--input", "/nonexistent/tuples"][..],
        &["hash"][..],
        &["plan", "--src-net", "10.0.0.0/33", "--dst", "10.0.0.1"][..],
        &["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1", "--proto", "sctp"][..],
        // --seed draws a --key random key; with a fixed key it means nothing.
        &["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--seed", "7"][..],
        &["plan", "--src-net", "10.0.0.0/24", "--dst", "10.0.0.1", "--key", "default", "--seed", "7"][..],
    ] {
        let o = flowsteer(args);
        // A file that cannot be read is a failure (1); the rest are usage errors (2).
        let want = if args.iter().any(|a| a.starts_with("/nonexistent")) { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(want), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout before an error");
        let e = stderr(&o);
        let err: Vec<&str> = e.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(err.len(), 1, "{args:?}: {}", stderr(&o));
        assert!(err[0].starts_with("error: "), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
    let o = flowsteer(&["hash", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn plan_seeds_case_each_bucket_confirmed_by_hash() {
    let o = flowsteer(&[
        "plan",
        "--src-net",
        "10.11.2.0/24",
        "--dst",
        "10.11.2.1",
        "--dport",
        "8080",
        "--buckets",
        "8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let a = v["assignments"].as_array().unwrap();
    assert_eq!(a.len(), 8);
    let mut buckets: Vec<u64> = a.iter().map(|x| x["bucket"].as_u64().unwrap()).collect();
    buckets.sort();
    assert_eq!(buckets, (0..8).collect::<Vec<_>>());
    for x in a {
        for field in ["bucket", "src", "dst", "sport", "dport", "hash"] {
            assert!(x.get(field).is_some(), "{field} missing in {x}");
        }
        assert_eq!(x["dst"], "10.11.2.1");
        assert_eq!(x["dport"], 8080);
        // Confirm with `hash` under the same configuration (8 queues).
        let h =
            flowsteer(&["hash", "--src", x["src"].as_str().unwrap(), "--dst", "10.11.2.1", "--queues", "8", "--json"]);
        let hv: serde_json::Value = serde_json::from_str(stdout(&h).trim()).unwrap();
        assert_eq!(hv["hash"], x["hash"]);
        assert_eq!(hv["queue"], x["bucket"]);
    }
}

#[test]
fn plan_sport_range_four_tuple_ipv6() {
    let o = flowsteer(&[
        "plan",
        "--src-net",
        "2001:db8::2",
        "--dst",
        "2001:db8::1",
        "--sport-range",
        "1024-65535",
        "--dport",
        "443",
        "--proto",
        "tcp",
        "--buckets",
        "4",
        "--per-bucket",
        "2",
        "--key",
        "random",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["hash_input"], "4-tuple");
    assert_eq!(v["assignments"].as_array().unwrap().len(), 8);
}

#[test]
fn plan_without_enough_free_bits_says_why() {
    let o = flowsteer(&["plan", "--src-net", "10.0.0.0/30", "--dst", "10.0.1.1", "--buckets", "8"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("free bits"), "{}", stderr(&o));
    let o = flowsteer(&[
        "plan",
        "--src-net",
        "10.0.0.0/24",
        "--dst",
        "10.0.1.1",
        "--dport",
        "80",
        "--proto",
        "tcp",
        "--buckets",
        "8",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--sport"), "{}", stderr(&o));
}

#[test]
fn a_degenerate_user_key_is_flagged() {
    let zero = "00".repeat(40);
    let o = flowsteer(&["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--key", &zero]);
    assert!(o.status.success());
    assert!(stderr(&o).contains("spreads tuples badly"), "{}", stderr(&o));
    let o = flowsteer(&["hash", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--key", "symmetric"]);
    assert!(stderr(&o).contains("16 bits"), "{}", stderr(&o));
}

/// `flowsteer ... | head`: a reader that goes away ends the process the
/// way it ends C tools (SIGPIPE), never with a panic.
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    // The read end is closed before the child starts: every write fails.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flowsteer"))
        .args(["plan", "--src-net", "10.11.0.0/16", "--dst", "10.11.2.1", "--dport", "8080", "--per-bucket", "8"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.code() == Some(0) || out.status.signal() == Some(13), "{:?} {err}", out.status);
}

fn json_doc(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(o)))
}

/// `--key random` shows the key it drew, in the form `--key` takes back;
/// `--seed` draws the same key every time. Either way the printed key,
/// passed back with `--key`, reproduces every result.
#[test]
fn a_random_key_is_printed_and_reproduces_the_results() {
    let tuple = ["hash", "--src", "198.51.100.7", "--dst", "192.0.2.1", "--sport", "40000", "--dport", "443"];
    let with = |extra: &[&str]| {
        let mut args = tuple.to_vec();
        args.extend_from_slice(extra);
        flowsteer(&args)
    };
    // Seeded: two runs, one key, one hash.
    let a = json_doc(&with(&["--key", "random", "--seed", "7", "--json"]));
    let b = json_doc(&with(&["--key", "random", "--seed", "7", "--json"]));
    let key = a["key"].as_str().expect("the drawn key is in the JSON record").to_string();
    assert_eq!(key.len(), 52 * 3 - 1, "52 bytes as xx:xx:..: {key}");
    assert_eq!(a["key_seed"], 7);
    assert_eq!(a, b);
    assert_ne!(json_doc(&with(&["--key", "random", "--seed", "8", "--json"]))["key"], a["key"]);
    // The printed key given back reproduces the hash (and is not "drawn").
    let back = json_doc(&with(&["--key", &key, "--json"]));
    assert_eq!(back["hash"], a["hash"]);
    assert_eq!(back["queue"], a["queue"]);
    assert!(back.get("key").is_none(), "a key the user gave is not echoed: {back}");
    // The text header shows the same key.
    let text = with(&["--key", "random", "--seed", "7"]);
    assert!(text.status.success(), "{}", stderr(&text));
    let first = stdout(&text).lines().next().unwrap().to_string();
    assert!(first.contains("--seed 7") && first.ends_with(&key), "{first}");
    // From OS randomness: keys differ between runs, and the printed one
    // still reproduces the result.
    let r1 = json_doc(&with(&["--key", "random", "--json"]));
    let r2 = json_doc(&with(&["--key", "random", "--json"]));
    assert_ne!(r1["key"], r2["key"]);
    assert!(r1["key_seed"].is_null());
    let back = json_doc(&with(&["--key", r1["key"].as_str().unwrap(), "--json"]));
    assert_eq!(back["hash"], r1["hash"]);

    // plan: same seed, same key and same tuples; the key given back, same tuples.
    let plan_args = ["plan", "--src-net", "10.11.2.0/24", "--dst", "10.11.2.1", "--dport", "8080", "--buckets", "8"];
    let plan_with = |extra: &[&str]| {
        let mut args = plan_args.to_vec();
        args.extend_from_slice(extra);
        json_doc(&flowsteer(&args))
    };
    let p1 = plan_with(&["--key", "random", "--seed", "11", "--json"]);
    let p2 = plan_with(&["--key", "random", "--seed", "11", "--json"]);
    assert_eq!(p1, p2);
    let pkey = p1["key"].as_str().unwrap();
    assert_eq!(p1["key_seed"], 11);
    let p3 = plan_with(&["--key", pkey, "--json"]);
    assert_eq!(p3["assignments"], p1["assignments"]);
}

/// DPDK's `dpdk-rss-flows.py 64 198.51.100.10/32 192.0.2.1 -s 1024-65535
/// -d 443` (Intel key = the Microsoft key, 128-entry RETA, queue i % 64)
/// hashes ports whenever they are given; its first two flows are source
/// ports 1024 -> queue 61 and 1025 -> queue 44. Without ports it prints
/// one flow, queue 17.
const DPDK_FOUR_TUPLE: [(u16, u64); 2] = [(1024, 61), (1025, 44)];
const DPDK_TWO_TUPLE_QUEUE: u64 = 17;

const PORTS_IGNORED: [&str; 11] = [
    "plan",
    "--src-net",
    "198.51.100.10/32",
    "--dst",
    "192.0.2.1",
    "--sport-range",
    "1024-65535",
    "--dport",
    "443",
    "--buckets",
    "64",
];

/// UDP is hashed on the 2-tuple by default: with one source and one
/// destination every tuple hashes alike, so the bucket the addresses reach
/// is served (with the first port of each range) and the other 63 are
/// reported as unreachable for that reason, with one line on top saying how
/// to make ports count.
#[test]
fn plan_with_ports_the_hash_ignores_serves_the_bucket_the_addresses_reach() {
    let o = flowsteer(&PORTS_IGNORED);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("note: ") && first.contains("2-tuple"), "{first}");
    assert!(first.contains("--proto tcp") && first.contains("--hash-types default,udp4"), "{first}");
    let err = stderr(&o);
    assert!(err.contains("63 of 64 buckets"), "{err}");
    assert!(err.contains("ignores ports") && err.contains("addresses are fixed"), "{err}");
    assert!(!err.contains("only 0 of 1 tuples"), "{err}");
    // The 63 share one line.
    assert_eq!(err.lines().filter(|l| l.starts_with("bucket")).count(), 1, "{err}");

    let mut args = PORTS_IGNORED.to_vec();
    args.push("--json");
    let o = flowsteer(&args);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["ports_ignored"], true);
    assert!(v["note"].as_str().unwrap().contains("--proto tcp"));
    assert_eq!(v["unreachable"].as_array().unwrap().len(), 63);
    let a = v["assignments"].as_array().unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!((a[0]["sport"].as_u64(), a[0]["dport"].as_u64()), (Some(1024), Some(443)));
    assert_eq!(a[0]["bucket"], DPDK_TWO_TUPLE_QUEUE);
    let h = json_doc(&flowsteer(&["hash", "--src", "198.51.100.10", "--dst", "192.0.2.1", "--queues", "64", "--json"]));
    assert_eq!(h["hash"], a[0]["hash"]);
    assert_eq!(h["queue"], a[0]["bucket"]);

    // With a source prefix the addresses reach every bucket: all served, exit 0.
    let mut args = PORTS_IGNORED.to_vec();
    args[2] = "198.51.100.0/24";
    args.push("--json");
    let v = json_doc(&flowsteer(&args));
    assert_eq!(v["complete"], true);
    assert_eq!(v["ports_ignored"], true);
    let a = v["assignments"].as_array().unwrap();
    assert_eq!(a.len(), 64);
    assert!(a.iter().all(|x| x["sport"] == 1024 && x["dport"] == 443));
}

/// The same request with `--proto tcp` hashes the 4-tuple, as DPDK's tool
/// does: all 64 buckets, each tuple's hash equal to the bit-by-bit
/// reference, and DPDK's own answers land where it says.
#[test]
fn plan_with_proto_tcp_serves_all_64_buckets_like_dpdk() {
    let mut args = PORTS_IGNORED.to_vec();
    args.extend_from_slice(&["--proto", "tcp", "--json"]);
    let v = json_doc(&flowsteer(&args));
    assert_eq!(v["complete"], true);
    assert_eq!(v["ports_ignored"], false);
    assert!(v["note"].is_null());
    let a = v["assignments"].as_array().unwrap();
    assert_eq!(a.len(), 64);
    let mut input = String::new();
    for x in a {
        let sport = x["sport"].as_u64().unwrap();
        assert!(sport >= 1024);
        input.push_str(&format!("{},{},{sport},443\n", x["src"].as_str().unwrap(), x["dst"].as_str().unwrap()));
    }
    for (sport, _) in DPDK_FOUR_TUPLE {
        input.push_str(&format!("198.51.100.10,192.0.2.1,{sport},443\n"));
    }
    let o = flowsteer_stdin(&["hash", "--input", "-", "--queues", "64", "--impl", "reference", "--json"], &input);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 66);
    let mut buckets: Vec<u64> = Vec::new();
    for (x, h) in a.iter().zip(&lines) {
        assert_eq!(h["hash"], x["hash"], "{x}");
        assert_eq!(h["queue"], x["bucket"], "{x}");
        buckets.push(x["bucket"].as_u64().unwrap());
    }
    buckets.sort();
    assert_eq!(buckets, (0..64).collect::<Vec<_>>());
    for ((_, queue), h) in DPDK_FOUR_TUPLE.iter().zip(&lines[64..]) {
        assert_eq!(h["queue"], *queue, "{h}");
    }
}
