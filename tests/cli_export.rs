//! `flowsteer export`: the commands that put a configuration on an
//! interface, checked as golden text (veth has no RSS to apply them to).

use flowsteer_rss::RssKey;
use std::process::{Command, Output};

fn flowsteer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run flowsteer")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A seeded random key, 8 queues, UDP on the 4-tuple, RPS on CPUs 0-1 of
/// every queue: the script, line for line. The key in it is the one `plan`
/// prints for the same flags.
#[test]
fn export_prints_the_ethtool_and_sysfs_commands() {
    let o = flowsteer(&[
        "export",
        "eth0",
        "--key",
        "random",
        "--seed",
        "7",
        "--queues",
        "8",
        "--hash-types",
        "default,udp4",
        "--steer",
        "rps",
        "--rps-cpus",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let key = RssKey::from_seed(52, 7).unwrap().to_hex();
    let mut want = String::from(
        "\
# RSS on eth0: Toeplitz, the key --key random --seed 7 draws (52 bytes), indirection table of 128 entries over 8 queues
# these reproduce flowsteer's placement on a NIC whose key is 52 bytes and whose table has 128 entries (ethtool -x eth0 shows both)
",
    );
    want.push_str(&format!("ethtool -X eth0 hkey {key} equal 8 hfunc toeplitz\n"));
    want.push_str(
        "\
# fields hashed per flow type (hash types ipv4,tcp4,udp4,ipv6,tcp6): s/d source/destination address, f/n source/destination port
ethtool -N eth0 rx-flow-hash tcp4 sdfn
ethtool -N eth0 rx-flow-hash udp4 sdfn
ethtool -N eth0 rx-flow-hash tcp6 sdfn
ethtool -N eth0 rx-flow-hash udp6 sd
# RPS and RFS steer by the hash the NIC delivers with each packet; without it the kernel hashes by itself and flowsteer's predictions do not apply
ethtool -K eth0 rxhash on
# RPS: each receive queue hands a packet to cpus[(hash * n) >> 32] of its mask
",
    );
    for q in 0..8 {
        want.push_str(&format!("echo 3 > /sys/class/net/eth0/queues/rx-{q}/rps_cpus\n"));
    }
    assert_eq!(stdout(&o), want);

    // The same key as `plan` shows for the same flags.
    let p = flowsteer(&[
        "plan",
        "--src-net",
        "10.0.0.0/24",
        "--dst",
        "10.0.1.1",
        "--key",
        "random",
        "--seed",
        "7",
        "--queues",
        "8",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(v["key"], key.as_str());

    // JSON: the same commands, in order.
    let o = flowsteer(&["export", "eth0", "--key", &key, "--queues", "8", "--hash-types", "default,udp4", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "flowsteer.export.v1");
    let commands: Vec<&str> = v["commands"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    let text_commands: Vec<&str> = want.lines().filter(|l| !l.starts_with('#')).take(5).collect();
    assert_eq!(commands, text_commands);
}

#[test]
fn export_bad_flags_give_one_line_errors() {
    for args in [
        &["export", "eth0; reboot"][..],
        &["export", "eth0", "--steer", "rps"][..],
        &["export", "eth0", "--rps-cpus", "3"][..],
        &["export", "eth0", "--steer", "rps", "--rps-cpus", "3", "--rps-cpus", "1", "--queues", "4"][..],
        &["export", "eth0", "--seed", "3"][..],
    ] {
        let o = flowsteer(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: usage errors");
        let e = String::from_utf8_lossy(&o.stderr);
        let err: Vec<&str> = e.lines().filter(|l| !l.starts_with("warning:")).collect();
        assert_eq!(err.len(), 1, "{args:?}: {e}");
        assert!(err[0].starts_with("error: "), "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
