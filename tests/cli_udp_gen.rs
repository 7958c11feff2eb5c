//! `flowsteer udp-gen`'s safe defaults, as a new user meets them: the rate
//! it sends at unless told (10,000 datagrams/s, in the header), `--rate max`
//! to flood on purpose and `--rate 0` refused with a pointer to it, and a
//! remote beyond this host's directly connected networks refused (exit 2,
//! one line naming the address, its route and `--allow-routed`) unless
//! `--allow-routed`; the kernel's route decides (`flowsteer_live::route`,
//! asked here too to know which case this machine is). Nothing is sent
//! anywhere but this host, except one datagram to a documentation address
//! (TEST-NET) that a routed case accepts with `--allow-routed -n 1`.
//! The same in a namespace with routes of the test's own: `live_udp.rs`.

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;
use flowsteer_live::route::{self, Route};
use flowsteer_live::LiveError;
use std::net::UdpSocket;
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A bound socket that never reads (its port receives and drops), and the port.
fn silent(ip: &str) -> (UdpSocket, String) {
    let s = UdpSocket::bind((ip, 0)).unwrap();
    let port = s.local_addr().unwrap().port().to_string();
    (s, port)
}

/// The header line of the text report.
fn header(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    let out = stdout(o);
    out.lines().next().unwrap_or_else(|| panic!("no header: {out}")).to_string()
}

/// Exit 2, nothing on stdout, one line on stderr containing every `needle`.
fn refused(o: &Output, needles: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(o));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "no {n:?} in {err}");
    }
    err
}

#[test]
fn the_default_rate_is_10000_per_second_and_the_header_says_so() {
    let (_s, port) = silent("127.0.0.1");
    let o = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &port, "-n", "20"]);
    let h = header(&o);
    assert!(h.starts_with("udp-gen -> 127.0.0.1:") && h.ends_with("rate 10000 pps"), "{h}");
    let o = flowsteer(&["udp-gen", "-r", "127.0.0.1", "-p", &port, "-n", "20", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rate_target"], 10_000);
    assert_eq!(v["sent"], 20);
    let help = stdout(&flowsteer(&["udp-gen", "--help"]));
    assert!(help.contains("--rate <PPS>") && help.contains("[default: 10000]"), "{help}");
    assert!(help.contains("or max: as fast as the kernel takes them"), "{help}");
    assert!(help.contains("--allow-routed") && help.contains("directly connected"), "{help}");
}

#[test]
fn rate_max_floods_on_purpose_a_number_still_works_and_0_points_at_max() {
    let (_s, port) = silent("127.0.0.1");
    let base = ["udp-gen", "-r", "127.0.0.1", "-p", &port, "-n", "50"];
    let with = |extra: &[&str]| flowsteer(&[&base[..], extra].concat());
    assert!(header(&with(&["--rate", "max"])).ends_with("rate max (unpaced)"));
    assert!(header(&with(&["--rate", "5000"])).ends_with("rate 5000 pps"));
    let o = with(&["--rate", "max", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["rate_target"].as_u64(), v["sent"].as_u64()), (Some(0), Some(50)), "{v}");
    let err = refused(&with(&["--rate", "0"]), &["--rate", "--rate max", "1..="]);
    assert!(err.contains("no longer means as fast as possible"), "{err}");
    refused(&with(&["--rate", "fast"]), &["--rate", "max or an integer in 1..="]);
}

#[test]
fn loopback_and_this_hosts_own_addresses_are_sent_to_without_a_flag() {
    let mut local: Vec<String> = vec!["127.0.0.1".into(), "127.0.0.2".into()];
    if flowsteer_live::queues::iface_with_addr("::1".parse().unwrap()).is_some() {
        local.push("::1".into());
    }
    // The address this host sends from towards the world, when it has a
    // route there: one of its own, so local too.
    if let Some(src) = route::get("198.51.100.1".parse().unwrap(), None).ok().and_then(|r| r.src) {
        local.push(src.to_string());
    }
    for ip in &local {
        let r = route::get(ip.parse().unwrap(), None).unwrap();
        assert!(r.is_local(), "{ip}: {r:?}");
        let (_s, port) = silent(if ip.contains(':') { "::" } else { "0.0.0.0" });
        let o = flowsteer(&["udp-gen", "-r", ip, "-p", &port, "-n", "5"]);
        assert!(header(&o).contains("rate 10000 pps"), "{ip}");
    }
}

/// What this machine's kernel says about `ip`: routed, no route, or on a
/// directly connected network (the test cannot use it).
enum Case {
    Routed(Route),
    NoRoute,
    OnLink,
}

fn case(ip: &str) -> Case {
    match route::get(ip.parse().unwrap(), None) {
        Ok(r) if r.is_routed() => Case::Routed(r),
        Ok(_) => Case::OnLink,
        Err(LiveError::NoRoute { .. }) => Case::NoRoute,
        Err(e) => panic!("{ip}: {e}"),
    }
}

#[test]
fn a_remote_beyond_the_connected_networks_is_refused_unless_allow_routed() {
    // The documentation networks (TEST-NET-1..3, 2001:db8::/32): routed
    // through the default route where there is one, else unreachable;
    // one may be on a connected network here, and is then skipped.
    let mut checked = 0;
    for ip in ["192.0.2.1", "198.51.100.1", "203.0.113.1", "2001:db8::1"] {
        let gen = |extra: &[&str]| flowsteer(&[&["udp-gen", "-r", ip, "-p", "9", "-n", "1"][..], extra].concat());
        match case(ip) {
            Case::Routed(r) => {
                let route = format!("its route is `{r}`");
                let err = refused(&gen(&[]), &[ip, "not on a directly connected network", &route, "--allow-routed"]);
                assert!(err.contains("(at --rate 10000)"), "{err}");
                assert_eq!(err.contains("(the default route)"), r.is_default(), "{err}");
                refused(&gen(&["--rate", "max"]), &[ip, "--allow-routed", "(at --rate max)"]);
                // Allowed: one datagram to a documentation address.
                let o = gen(&["--allow-routed"]);
                assert!(header(&o).ends_with("rate 10000 pps"), "{ip}");
                assert!(stdout(&o).contains("sent 1 in"), "{ip}: {}", stdout(&o));
                println!("{ip}: routed ({r}), refused, then allowed");
            }
            Case::NoRoute => {
                for extra in [&[][..], &["--allow-routed"]] {
                    let err = refused(&gen(extra), &[ip, "the kernel has no route to it", "ip route get"]);
                    assert!(!err.contains("os error"), "{err}");
                }
                println!("{ip}: no route here, refused");
            }
            Case::OnLink => {
                println!("{ip}: on a directly connected network here, not a routed case");
                continue;
            }
        }
        checked += 1;
    }
    assert!(checked > 0, "every documentation address is on a connected network here");
}
