//! What a host would drop, and when a held frame becomes a drop, on live
//! `run` sources (AF_PACKET and AF_XDP) in a throw-away pair of network
//! namespaces, fed from a raw socket:
//!
//! * IPv4 frames with a bad header checksum are dropped as
//!   `ipv4_bad_checksum`, never delivered;
//! * orphan non-first fragments (held for their first one) and lone first
//!   fragments (pending in the reassembler) are dropped at the end of a run
//!   as `frag_hold_pending_at_end` / `reasm_pending_at_end`, or age out at
//!   `--frag-timeout` (`frag_hold_timeout` / `reasm_timed_out`) on an idle
//!   core; a 42 s run at the default timeout (30 s for IPv4) shows them aged
//!   out, not before 30 s after they came;
//! * at the end of every run `received = delivered + dropped` (by reason),
//!   nothing in flight, and every frame sent is in the source's sum;
//! * by default the listener takes unicast to its interface only: frames
//!   to the broadcast MAC or 255.255.255.255, to multicast MACs or groups,
//!   and to other hosts' MACs are dropped as `dst_broadcast`,
//!   `dst_multicast` and `dst_other_host`; `--listen-dst` takes them.
//!
//! Root only (skipped with a printed reason otherwise).

#[allow(dead_code)] // the live helpers only
mod common;

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use flowsteer_wire::build::{ipv4_fragments, FrameBuilder, Ipv6Ext};
use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 47_100;

fn skip() -> bool {
    match skip_reason() {
        Some(why) => {
            println!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Starts `flowsteer ARGS` inside namespace B.
fn spawn_run(lab: &Lab, args: &[&str]) -> Child {
    Command::new("ip")
        .args(["netns", "exec", lab.ns(Side::B), env!("CARGO_BIN_EXE_flowsteer")])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flowsteer")
}

fn finish(mut child: Child, limit: Duration) -> (Option<i32>, String, String) {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sigterm(child: &Child) {
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
}

/// Only the test's frames leave A (no IPv6 chatter).
fn quiet(lab: &Lab) {
    let sysctl = format!("net.ipv6.conf.{}.disable_ipv6=1", lab.dev(Side::A));
    assert!(Command::new("ip")
        .args(["netns", "exec", lab.ns(Side::A), "sysctl", "-qw", &sysctl])
        .status()
        .unwrap()
        .success());
}

/// The kinds of frames sent, each with its count and the drop reason the
/// run gives it at the end of a short run (`None`: delivered).
struct Mix {
    kinds: Vec<Kind>,
}

/// A kind of frame: its name, its frames, its drop reason (`None`: delivered,
/// or no single reason checked).
type Kind = (&'static str, Vec<Vec<u8>>, Option<&'static str>);

impl Mix {
    fn frames(&self) -> Vec<Vec<u8>> {
        self.kinds.iter().flat_map(|k| k.1.iter().cloned()).collect()
    }
    fn count(&self, kind: &str) -> u64 {
        self.kinds.iter().filter(|k| k.0 == kind).map(|k| k.1.len() as u64).sum()
    }
}

/// Valid UDP to the listener (100); the same with a bad IPv4 header
/// checksum (50); orphan non-first fragments (30 datagrams) and lone first
/// fragments (20 datagrams) to the listener's port; and to the listener's
/// port the malformed IPv4 the wire parser or the host checks reject (a
/// header cut short, a header length below 20, a total length past the
/// frame, a UDP length of 0, a zero-length option), 10 each; and 10 each
/// of the other kinds the parser rejects: an IPv4 header with version 6,
/// a total length below the header, an IPv6 header cut short, nine
/// extension headers (a chain too long), Hop-by-Hop after Destination
/// Options, a TCP data offset below 5, a TCP header cut short.
fn mix(lab: &Lab) -> Mix {
    let (a, b) = (lab.v4(Side::A), lab.v4(Side::B));
    let (mac_a, mac_b) = (lab.mac(Side::A), lab.mac(Side::B));
    let frame = |sport: u16, payload: &[u8]| {
        let mut f = FrameBuilder::udp(IpAddr::V4(a), IpAddr::V4(b), sport, PORT, payload);
        f.src_mac = mac_a;
        f.dst_mac = mac_b;
        f.build()
    };
    let macs = |mut f: Vec<u8>| {
        f[..6].copy_from_slice(&mac_b);
        f[6..12].copy_from_slice(&mac_a);
        f
    };
    let valid = frame(41_000, &[7u8; 32]);
    let mut bad_sum = frame(41_001, &[1u8; 32]);
    bad_sum[24] ^= 0x5a;
    let orphans = (0..30u16)
        .map(|id| macs(ipv4_fragments(a, b, 41_002, PORT, 500 + id, &[2u8; 3000], 1400).swap_remove(1)))
        .collect();
    let lone = (0..20u16)
        .map(|id| macs(ipv4_fragments(a, b, 41_003, PORT, 900 + id, &[3u8; 3000], 1400).swap_remove(0)))
        .collect();
    let bad = frame(41_004, &[4u8; 32]);
    let cut = bad[..14 + 10].to_vec();
    let mut short_ihl = bad.clone();
    short_ihl[14] = 0x41;
    let mut long_total = bad.clone();
    long_total[16..18].copy_from_slice(&1400u16.to_be_bytes());
    let mut udp_zero = bad.clone();
    udp_zero[38..40].copy_from_slice(&[0, 0]);
    let mut option = bad.clone();
    option.splice(34..34, [7u8, 0, 0, 0]);
    option[14] = 0x46;
    let total = u16::from_be_bytes([option[16], option[17]]) + 4;
    option[16..18].copy_from_slice(&total.to_be_bytes());
    // What else the wire parser rejects: each named by the parser's own
    // verdict below, so the count per reason is checked, not its name.
    let (a6, b6): (IpAddr, IpAddr) = ("fd00:c9::1".parse().unwrap(), "fd00:c9::2".parse().unwrap());
    let v6 = |ext: &[Ipv6Ext]| {
        let mut f = FrameBuilder::udp(a6, b6, 41_005, PORT, &[5u8; 32]);
        f.ipv6_ext = ext;
        macs(f.build())
    };
    let mut bad_version = bad.clone();
    bad_version[14] = 0x65;
    let mut short_total = bad.clone();
    short_total[16..18].copy_from_slice(&10u16.to_be_bytes());
    let v6_cut = v6(&[])[..14 + 20].to_vec();
    let long_chain = v6(&[Ipv6Ext::DestOpts { len: 8 }; 9]);
    let hbh_late = v6(&[Ipv6Ext::DestOpts { len: 8 }, Ipv6Ext::HopByHop { len: 8 }]);
    let tcp = macs(FrameBuilder::tcp(IpAddr::V4(a), IpAddr::V4(b), 41_006, PORT, 1, 0x10, &[6u8; 8]).build());
    let mut tcp_offset = tcp.clone();
    tcp_offset[14 + 20 + 12] = 0x40;
    let tcp_cut = {
        // A TCP header of 10 bytes, the IPv4 length and checksum to match.
        let mut f = tcp[..14 + 20 + 10].to_vec();
        f[16..18].copy_from_slice(&30u16.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let sum = flowsteer_wire::build::ipv4_header_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f
    };
    let parser = |kind: &'static str, frame: Vec<u8>| -> Kind {
        let why = flowsteer_wire::parse_frame(&frame, flowsteer_wire::LinkType::Ethernet, &Default::default())
            .err()
            .unwrap_or_else(|| panic!("{kind}: the wire parser takes it"));
        (kind, vec![frame; 10], Some(why.reason()))
    };
    Mix {
        kinds: vec![
            parser("bad_version", bad_version),
            parser("short_total", short_total),
            parser("ipv6_cut", v6_cut),
            parser("long_chain", long_chain),
            parser("hbh_late", hbh_late),
            parser("tcp_offset", tcp_offset),
            parser("tcp_cut", tcp_cut),
            ("valid", vec![valid; 100], None),
            ("bad_checksum", vec![bad_sum; 50], Some("ipv4_bad_checksum")),
            ("orphan", orphans, Some("frag_hold_pending_at_end")),
            ("lone_first", lone, Some("reasm_pending_at_end")),
            ("cut", vec![cut; 10], None),
            ("short_ihl", vec![short_ihl; 10], None),
            ("long_total", vec![long_total; 10], None),
            ("udp_zero", vec![udp_zero; 10], Some("udp_bad_length")),
            ("option", vec![option; 10], Some("ipv4_bad_option")),
        ],
    }
}

/// Sends `frames` from side A with an AF_PACKET socket, one per call;
/// returns how many were sent (every one: none is too long).
fn send_frames(lab: &Lab, frames: Vec<Vec<u8>>) -> u64 {
    let dev = lab.dev(Side::A).to_string();
    lab.run_in(Side::A, move || {
        let mut tx = flowsteer_afpacket::TxSocket::open(&dev, &flowsteer_afpacket::TxConfig::default()).unwrap();
        for (k, f) in frames.iter().enumerate() {
            tx.send_batch(std::slice::from_ref(f));
            if k % 16 == 15 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let st = tx.stats();
        assert_eq!(st.failed_total(), 0, "{:?}", st.failed_by_name());
        st.sent
    })
    .unwrap()
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn drop_of(t: &serde_json::Value, reason: &str) -> u64 {
    t["drops"][reason].as_u64().unwrap_or(0)
}

/// The final document of a `--json` run (its last line).
fn final_doc(out: &str) -> serde_json::Value {
    let last = out.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    match serde_json::from_str(last) {
        Ok(v) => v,
        Err(_) => serde_json::from_str(out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}")),
    }
}

/// The end-of-run bar: every frame sent is in the source's sum, the
/// engine's sum holds with nothing in flight, `received = delivered +
/// dropped`, and only valid frames reached the listener.
fn check_end(v: &serde_json::Value, sent: u64, valid: u64) {
    let sum = v["conservation"].as_str().unwrap_or_default();
    assert_eq!(v["conservation_ok"], true, "{sum}");
    let (t, i) = (&v["totals"], &v["ingress"]);
    assert_eq!(n(&i["seen"]) + i["interface"]["peer_tx_dropped"].as_u64().unwrap_or(0), sent, "{sum}");
    assert_eq!((n(&t["in_flight"]), n(&t["frag_held"]), n(&t["reasm_pending"])), (0, 0, 0), "{t}");
    assert_eq!(n(&t["received"]), n(&t["delivered"]) + n(&t["dropped"]), "{t}");
    assert_eq!(n(&t["delivered"]), valid, "{t}");
    let listened = n(&t["listener_bucket"]) + n(&t["listener_wildcard"]);
    assert_eq!(listened, valid, "{t}");
}

/// Sends the mix into a run of `source`; with `timeout` the run waits past
/// it before it is stopped, so what was held ages out instead of being
/// dropped at the end.
fn hostile_mix_into(source: &str, timeout: Option<u64>) {
    let tag = if source == "afxdp" { "lhrx" } else { "lhrp" };
    let lab = Lab::new(tag, &LabConfig::default()).unwrap();
    quiet(&lab);
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let secs = timeout.map(|t| t.to_string());
    let mut args = vec!["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "60", "--json"];
    if let Some(s) = &secs {
        args.extend(["--frag-timeout", s]);
    }
    let child = spawn_run(&lab, &args);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    let m = mix(&lab);
    let sent = send_frames(&lab, m.frames());
    assert_eq!(sent, m.frames().len() as u64);
    std::thread::sleep(Duration::from_millis(300) + Duration::from_secs(timeout.map_or(0, |t| t + 2)));
    sigterm(&child);
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = final_doc(&out);
    println!("{source} (timeout {timeout:?}): {}\ndrops {}", v["conservation"], v["totals"]["drops"]);
    check_end(&v, sent, m.count("valid"));
    let t = &v["totals"];
    assert_eq!(drop_of(t, "ipv4_bad_checksum"), m.count("bad_checksum"), "{t}");
    let (orphans, lone) = (m.count("orphan"), m.count("lone_first"));
    if timeout.is_some() {
        assert_eq!((drop_of(t, "frag_hold_timeout"), drop_of(t, "reasm_timed_out")), (orphans, lone), "{t}");
        assert_eq!(drop_of(t, "frag_hold_pending_at_end") + drop_of(t, "reasm_pending_at_end"), 0, "{t}");
    } else {
        assert_eq!(drop_of(t, "frag_hold_pending_at_end"), orphans, "{t}");
        assert_eq!(drop_of(t, "reasm_pending_at_end"), lone, "{t}");
    }
    if source == "afpacket" {
        // Every frame reaches the engine: each malformed kind is a drop.
        let mut by_reason = std::collections::BTreeMap::<&str, u64>::new();
        for (kind, frames, reason) in &m.kinds {
            if let (Some(r), false) = (reason, *kind == "orphan" || *kind == "lone_first") {
                *by_reason.entry(r).or_default() += frames.len() as u64;
            }
        }
        for (r, want) in by_reason {
            assert_eq!(drop_of(t, r), want, "{r}: {t}");
        }
        assert_eq!(n(&t["received"]), sent, "{t}");
    }
}

#[test]
fn afpacket_hostile_mix_adds_up_and_held_fragments_drop_at_the_end() {
    if skip() {
        return;
    }
    hostile_mix_into("afpacket", None);
}

#[test]
fn afxdp_hostile_mix_adds_up_and_held_fragments_drop_at_the_end() {
    if skip() {
        return;
    }
    hostile_mix_into("afxdp", None);
}

#[test]
fn afpacket_held_fragments_age_out_at_frag_timeout() {
    if skip() {
        return;
    }
    hostile_mix_into("afpacket", Some(2));
}

#[test]
fn afxdp_held_fragments_age_out_at_frag_timeout() {
    if skip() {
        return;
    }
    hostile_mix_into("afxdp", Some(2));
}

/// A 42 s run at the default timeout (30 s for IPv4), with an interval
/// report every second: the orphan fragments sent about 1 s in are held
/// (and counted in flight) in every interval that ends less than 30 s
/// after the one they arrived in began, and aged out (`frag_hold_timeout`)
/// by the end of the run; the lone first fragments time out in the
/// reassembler alike. Nothing is left to drop at the end.
fn orphans_age_out_at_the_default_timeout(source: &str) {
    let tag = if source == "afxdp" { "lhlx" } else { "lhlp" };
    let lab = Lab::new(tag, &LabConfig::default()).unwrap();
    quiet(&lab);
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let args = ["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "42", "--interval", "1"];
    let mut args = args.to_vec();
    args.push("--json");
    let child = spawn_run(&lab, &args);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    let m = mix(&lab);
    let held: Vec<Vec<u8>> = m
        .kinds
        .iter()
        .filter(|k| k.0 == "orphan" || k.0 == "lone_first" || k.0 == "valid")
        .flat_map(|k| k.1.clone())
        .collect();
    let sent = send_frames(&lab, held);
    let (code, out, err) = finish(child, Duration::from_secs(70));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.contains("flowsteer.run-interval"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let orphans = m.count("orphan");
    let arrived = lines.iter().find(|l| n(&l["totals"]["frag_held"]) == orphans).expect("orphans never held");
    let since = arrived["from_s"].as_f64().unwrap();
    for l in &lines {
        let to = l["to_s"].as_f64().unwrap();
        if to > arrived["to_s"].as_f64().unwrap() && to < since + 30.0 {
            assert_eq!(n(&l["totals"]["frag_held"]), orphans, "aged before 30 s: {l}");
            assert_eq!(drop_of(&l["totals"], "frag_hold_timeout"), 0, "{l}");
        }
    }
    let aged = lines.iter().find(|l| drop_of(&l["totals"], "frag_hold_timeout") == orphans).expect("never aged out");
    println!(
        "{source}: orphans held in the interval from {since:.2} s, aged out in the one ending at {:.2} s",
        aged["to_s"].as_f64().unwrap()
    );
    let v = final_doc(&out);
    check_end(&v, sent, m.count("valid"));
    let t = &v["totals"];
    assert_eq!(drop_of(t, "frag_hold_timeout"), orphans, "{t}");
    assert_eq!(drop_of(t, "reasm_timed_out"), m.count("lone_first"), "{t}");
    assert_eq!(drop_of(t, "frag_hold_pending_at_end") + drop_of(t, "reasm_pending_at_end"), 0, "{t}");
    assert!(v["elapsed_s"].as_f64().unwrap() >= 40.0);
}

#[test]
fn afpacket_orphans_age_out_at_the_default_timeout_in_a_42s_run() {
    if skip() {
        return;
    }
    orphans_age_out_at_the_default_timeout("afpacket");
}

#[test]
fn afxdp_orphans_age_out_at_the_default_timeout_in_a_42s_run() {
    if skip() {
        return;
    }
    orphans_age_out_at_the_default_timeout("afxdp");
}

/// `--xdp-mode auto` says which mode it attached in: native on a plain
/// veth pair; generic, with why native was refused, when the peer's MTU
/// (9000) is too large for native XDP on a veth. In `--json` (`run.xdp`,
/// and a warning for the fallback) and in the text header.
#[test]
fn afxdp_run_says_which_xdp_mode_it_attached() {
    if skip() {
        return;
    }
    for (mtu, want) in [(None, "native"), (Some("9000"), "generic")] {
        let lab = Lab::new("lhxm", &LabConfig::default()).unwrap();
        if let Some(m) = mtu {
            lab.ip_in(Side::A, &["link", "set", lab.dev(Side::A), "mtu", m]).unwrap();
        }
        let src = format!("afxdp:{}", lab.dev(Side::B));
        let listen = format!("udp:{PORT}");
        let base = ["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "1"];
        let (code, out, err) = finish(spawn_run(&lab, &[&base[..], &["--json"]].concat()), Duration::from_secs(20));
        assert_eq!(code, Some(0), "{err}\n{out}");
        let v = final_doc(&out);
        assert_eq!(v["run"]["xdp"]["mode"], want, "{}", v["run"]);
        let warned = v["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("generic (skb)"));
        assert_eq!(v["run"]["xdp"]["fallback"].is_string(), want == "generic", "{}", v["run"]);
        assert_eq!(warned, want == "generic", "{}", v["warnings"]);
        let (code, out, err) = finish(spawn_run(&lab, &base), Duration::from_secs(20));
        assert_eq!(code, Some(0), "{err}\n{out}");
        let line = out.lines().find(|l| l.starts_with("xdp: ")).unwrap_or_else(|| panic!("no xdp line:\n{out}"));
        println!("{line}");
        assert!(line.contains(if want == "native" { "native (driver) mode" } else { "generic (skb) mode" }), "{line}");
        assert_eq!(line.contains("fell back"), want == "generic", "{line}");
    }
}

/// UDP to the listener's port with every kind of destination: unicast to
/// B (10), to another host's MAC (11), the broadcast MAC with B's address
/// (12) and with 255.255.255.255 (13), a multicast MAC and group (14), a
/// group in a frame to B's MAC (15). By default only the first reaches the
/// listener; with `--listen-dst all`, all of them.
fn destinations_into(source: &str, listen_dst: Option<&str>) {
    let tag = if source == "afxdp" { "ldsx" } else { "ldsp" };
    let lab = Lab::new(tag, &LabConfig::default()).unwrap();
    quiet(&lab);
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let mut args = vec!["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "60", "--json"];
    if let Some(d) = listen_dst {
        args.extend(["--listen-dst", d]);
    }
    let child = spawn_run(&lab, &args);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    let (a, b) = (lab.v4(Side::A), lab.v4(Side::B));
    let frame = |dst_mac: [u8; 6], dst: std::net::Ipv4Addr, n: usize| {
        let mut f = FrameBuilder::udp(IpAddr::V4(a), IpAddr::V4(dst), 41_100, PORT, &[9u8; 32]);
        f.src_mac = lab.mac(Side::A);
        f.dst_mac = dst_mac;
        vec![f.build(); n]
    };
    let group = std::net::Ipv4Addr::new(239, 1, 2, 3);
    let kinds = [
        ("host", frame(lab.mac(Side::B), b, 10)),
        ("other_host", frame([0x02, 0x99, 0, 0, 0, 1], b, 11)),
        ("broadcast_mac", frame([0xff; 6], b, 12)),
        ("broadcast_ip", frame([0xff; 6], std::net::Ipv4Addr::BROADCAST, 13)),
        ("multicast_mac", frame([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03], group, 14)),
        ("multicast_ip", frame(lab.mac(Side::B), group, 15)),
    ];
    let frames: Vec<Vec<u8>> = kinds.iter().flat_map(|k| k.1.iter().cloned()).collect();
    let sent = send_frames(&lab, frames.clone());
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&child);
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = final_doc(&out);
    let t = &v["totals"];
    println!("{source} --listen-dst {listen_dst:?}: {}\ndrops {}", v["conservation"], t["drops"]);
    let d = &v["run"]["listen_dst"];
    let mac_b: Vec<String> = lab.mac(Side::B).iter().map(|x| format!("{x:02x}")).collect();
    assert_eq!(d["host_mac"].as_str(), Some(mac_b.join(":").as_str()), "{d}");
    let count = |k: &str| kinds.iter().find(|x| x.0 == k).map_or(0, |x| x.1.len() as u64);
    if listen_dst == Some("all") {
        check_end(&v, sent, sent);
        assert_eq!(drop_of(t, "dst_other_host") + drop_of(t, "dst_broadcast") + drop_of(t, "dst_multicast"), 0);
    } else {
        check_end(&v, sent, count("host"));
        assert_eq!(drop_of(t, "dst_other_host"), count("other_host"), "{t}");
        assert_eq!(drop_of(t, "dst_broadcast"), count("broadcast_mac") + count("broadcast_ip"), "{t}");
        assert_eq!(drop_of(t, "dst_multicast"), count("multicast_mac") + count("multicast_ip"), "{t}");
    }
}

#[test]
fn afpacket_listener_takes_unicast_to_its_interface_by_default() {
    if skip() {
        return;
    }
    destinations_into("afpacket", None);
}

#[test]
fn afxdp_listener_takes_unicast_to_its_interface_by_default() {
    if skip() {
        return;
    }
    destinations_into("afxdp", None);
}

#[test]
fn listen_dst_all_takes_broadcast_multicast_and_other_hosts() {
    if skip() {
        return;
    }
    destinations_into("afpacket", Some("all"));
    destinations_into("afxdp", Some("all"));
}
