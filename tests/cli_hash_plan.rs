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
    assert!(stderr(&o).contains("public"), "warns about the public key: {}", stderr(&o));
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
    ] {
        let o = flowsteer(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
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
