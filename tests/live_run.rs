//! `flowsteer run` on live interfaces: AF_XDP and AF_PACKET sources in a
//! throw-away pair of network namespaces, fed by a kernel UDP sender.
//!
//! * every datagram the sender sends is received and delivered to the
//!   listener, and the run's counters add up (conservation);
//! * per-bucket exactness: 32 datagrams on a tuple
//!   planned for each bucket are delivered by that bucket's worker only;
//! * SIGTERM during traffic stops the run, prints the final counters and
//!   leaves no XDP program attached.
//!
//! Root only (skipped with a printed reason otherwise).

#[allow(dead_code)] // the live helpers only
mod common;

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use flowsteer_plan::plan::{plan, AddrRange, PlanRequest, PortRange};
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_wire::FlowTuple;
use std::net::{IpAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 47_000;

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

fn xdp_attached(lab: &Lab) -> bool {
    let out = Command::new("ip").args(["-n", lab.ns(Side::B), "link", "show", lab.dev(Side::B)]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("xdp")
}

/// Waits until the run receives (see [`common::wait_receiving`]): two
/// packet rings for AF_PACKET.
fn wait_ready(lab: &Lab, child: &Child, xdp: bool) {
    common::wait_receiving(lab, child, xdp, 2);
}

/// Sends `per` datagrams on each source port from namespace A.
fn send(lab: &Lab, sports: Vec<u16>, per: usize) {
    let (a, b) = (lab.v4(Side::A), lab.v4(Side::B));
    lab.run_in(Side::A, move || {
        for sp in sports {
            let s = UdpSocket::bind((a, sp)).unwrap();
            for i in 0..per {
                s.send_to(&(i as u32).to_be_bytes(), (b, PORT)).unwrap();
                if i % 16 == 15 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    })
    .unwrap();
}

fn finish(child: Child, limit: Duration) -> (Option<i32>, String, String) {
    let start = Instant::now();
    let mut child = child;
    loop {
        match child.try_wait().unwrap() {
            Some(_) => break,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                break;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {stdout}"))
}

/// Delivered to the UDP listener per worker: handled minus other drops.
fn per_worker_delivered(v: &serde_json::Value) -> Vec<u64> {
    v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            // A worker's own drops, of what it handled (its receive side's,
            // such as the kernel's multicast neighbour discovery refused as
            // dst_multicast, never reached a worker).
            let worker_drops: u64 =
                ["no_listener", "flow_table_full"].iter().filter_map(|r| w["drops"][*r].as_u64()).sum();
            w["handled"].as_u64().unwrap() - worker_drops
        })
        .collect()
}

fn every_datagram_arrives(source: &str, xdp: bool) {
    if skip() {
        return;
    }
    let lab = Lab::new("lrun", &LabConfig { queues: 2, mtu: 1500 }).unwrap();
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let child =
        spawn_run(&lab, &["run", "--source", &src, "--cores", "0,1", "--listen", &listen, "--duration", "4", "--json"]);
    wait_ready(&lab, &child, xdp);
    send(&lab, (40_000..40_008).collect(), 250);
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = json(&out);
    let t = &v["totals"];
    assert_eq!(v["conservation_ok"], true, "{t}");
    let listened = t["listener_bucket"].as_u64().unwrap() + t["listener_wildcard"].as_u64().unwrap();
    assert_eq!(listened, 2000, "{source}: {t}");
    assert!(t["received"].as_u64().unwrap() >= 2000, "{t}");
    assert!(!xdp_attached(&lab), "XDP program left attached");
}

#[test]
fn afxdp_source_receives_every_datagram_and_counts_add_up() {
    every_datagram_arrives("afxdp", true);
}

#[test]
fn afpacket_source_receives_every_datagram_and_counts_add_up() {
    every_datagram_arrives("afpacket", false);
}

/// Per-bucket exactness through the whole engine: for each bucket of a
/// small table, a source port whose tuple lands in it; 32 datagrams each;
/// every worker delivers exactly the datagrams of the buckets it owns.
#[test]
fn afpacket_per_bucket_exactness() {
    if skip() {
        return;
    }
    let lab = Lab::new("lbkt", &LabConfig::default()).unwrap();
    let buckets = 8usize;
    // The engine hashes UDP on the 4-tuple (--hash-types all, default key)
    // and maps bucket b = hash & 7 to worker b % 2. A 128-entry RETA over 8
    // queues gives queue = hash & 7 too, so the planner's queue is the
    // engine's bucket: one planned source port per bucket.
    let mut cfg = RssConfig::default_for_queues(buckets).unwrap();
    cfg.types = flowsteer_rss::HashTypes::parse("all").unwrap();
    let (a, b) = (IpAddr::V4(lab.v4(Side::A)), IpAddr::V4(lab.v4(Side::B)));
    let req = PlanRequest {
        src: AddrRange::single(a),
        dst: AddrRange::single(b),
        sport: Some(PortRange { lo: 20_000, hi: 30_000 }),
        dport: Some(PortRange { lo: PORT, hi: PORT }),
        proto: 17,
        buckets: (0..buckets as u16).map(QueueId).collect(),
        per_bucket: 1,
        max_candidates: flowsteer_plan::plan::DEFAULT_MAX_CANDIDATES,
    };
    let planned = plan(&cfg, &req).unwrap();
    let mut ports = vec![0u16; buckets];
    for asg in &planned.assignments {
        let sport = asg.sport;
        // Check the plan independently of the planner.
        let t = FlowTuple { src: a, dst: b, proto: 17, ports: Some((sport, PORT)) };
        assert_eq!((cfg.place(&t, false).hash as usize) & (buckets - 1), usize::from(asg.bucket.0));
        ports[usize::from(asg.bucket.0)] = sport;
    }
    assert!(ports.iter().all(|&p| p != 0), "every bucket planned: {ports:?}");
    let listen = format!("udp:{PORT}");
    let src = format!("afpacket:{}", lab.dev(Side::B));
    let child = spawn_run(
        &lab,
        &[
            "run",
            "--source",
            &src,
            "--cores",
            "0,1",
            "--buckets",
            "8",
            "--hash-types",
            "all",
            "--listen",
            &listen,
            "--duration",
            "4",
            "--json",
        ],
    );
    wait_ready(&lab, &child, false);
    send(&lab, ports.clone(), 32);
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = json(&out);
    assert_eq!(v["conservation_ok"], true);
    let delivered = per_worker_delivered(&v);
    // Buckets 0,2,4,6 -> worker 0; 1,3,5,7 -> worker 1: 4 x 32 each.
    assert_eq!(delivered, vec![128, 128], "{}", v["workers"]);
    let t = &v["totals"];
    assert_eq!(t["listener_bucket"].as_u64().unwrap(), 256, "{t}");
}

/// SIGTERM ends a live run with its final counters, says it was
/// interrupted, and (AF_XDP) detaches the program; the interface line
/// mentions the fill ring only for AF_XDP, the one source that has one.
fn sigterm_stops_a_live_run_prints_counters_and_detaches(source: &str) {
    if skip() {
        return;
    }
    let lab = Lab::new("lsig", &LabConfig::default()).unwrap();
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let child = spawn_run(&lab, &["run", "--source", &src, "--cores", "0,1", "--listen", &listen, "--duration", "60"]);
    wait_ready(&lab, &child, source == "afxdp");
    let (a, b) = (lab.v4(Side::A), lab.v4(Side::B));
    let sender = lab.spawn_in(Side::A, move || {
        let s = UdpSocket::bind((a, 0)).unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            let _ = s.send_to(b"x", (b, PORT));
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    std::thread::sleep(Duration::from_millis(800));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let (code, out, err) = finish(child, Duration::from_secs(10));
    sender.join().unwrap().unwrap();
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(out.lines().any(|l| l.starts_with("interrupted by SIGTERM at ")), "{out}");
    let conservation =
        out.lines().find(|l| l.starts_with("conservation: received ")).unwrap_or_else(|| panic!("{out}"));
    assert!(conservation.contains(" = delivered ") && conservation.ends_with(": OK"), "{conservation}");
    let interface = out.lines().find(|l| l.starts_with("interface (beside the sum")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(interface.contains("fill ring found empty"), source == "afxdp", "{interface}");
    assert!(!xdp_attached(&lab), "XDP program left attached after SIGTERM");
}

#[test]
fn sigterm_stops_an_afxdp_run_prints_counters_and_detaches() {
    sigterm_stops_a_live_run_prints_counters_and_detaches("afxdp");
}

#[test]
fn sigterm_stops_an_afpacket_run_prints_counters_without_fill_ring() {
    sigterm_stops_a_live_run_prints_counters_and_detaches("afpacket");
}

/// The run's process id as seen from here (`ip netns exec` execs it).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is 3rd,
    // utime the 14th and stime the 15th field of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100.0)
}

/// Times the run's worker threads (`fs-worker-N`) gave up the CPU by
/// themselves (went to sleep): `voluntary_ctxt_switches` of each. A
/// `sched_yield` that lets another task run is not one (it counts as
/// involuntary), so a busy-polling worker shows none.
fn voluntary_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end().starts_with("fs-worker")))
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// CPU share of the run over `span` of idle traffic, and how many times
/// its threads went to sleep in that span.
fn idle_cpu_share(source: &str, extra: &[&str]) -> (f64, u64) {
    let lab = Lab::new("lidl", &LabConfig::default()).unwrap();
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let mut args = vec!["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "30"];
    args.extend_from_slice(extra);
    let child = spawn_run(&lab, &args);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    let pid = child.id();
    let span = Duration::from_secs(2);
    let (c0, v0, t0) = (cpu_ticks(pid).unwrap(), voluntary_switches(pid), Instant::now());
    std::thread::sleep(span);
    let (c1, v1, wall) = (cpu_ticks(pid).unwrap(), voluntary_switches(pid), t0.elapsed().as_secs_f64());
    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let (code, out, err) = finish(child, Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}\n{out}");
    ((c1 - c0) as f64 / ticks_per_second() / wall, v1.saturating_sub(v0))
}

/// An idle live source sleeps in poll(2): its run uses a small part of
/// one CPU (wide margin: below half) and its worker goes to sleep about
/// once per millisecond of poll timeout, where `--busy-poll` spins and does
/// not sleep. Judged by the sleeps (voluntary context switches), which a
/// loaded machine does not change, rather than by CPU shares, which it does
/// (under two busy loops a spinning worker got as little CPU as an idle one).
#[test]
fn an_idle_live_source_does_not_spin_unless_asked() {
    if skip() {
        return;
    }
    for source in ["afpacket", "afxdp"] {
        let (idle, idle_sleeps) = idle_cpu_share(source, &[]);
        assert!(idle < 0.5, "{source}: an idle run used {:.0} % of a CPU", idle * 100.0);
        let (busy, busy_sleeps) = idle_cpu_share(source, &["--busy-poll"]);
        println!(
            "{source}: idle run {:.1} % of a CPU, {idle_sleeps} sleeps; --busy-poll {:.1} %, {busy_sleeps} sleeps",
            idle * 100.0,
            busy * 100.0
        );
        // At most 2,000 (a 1 ms poll timeout); a loaded machine wakes the
        // worker late and it sleeps less often, but hundreds of times still.
        assert!(idle_sleeps >= 100, "{source}: an idle worker slept only {idle_sleeps} times in 2 s: is it spinning?");
        assert!(
            busy_sleeps * 4 < idle_sleeps,
            "{source}: --busy-poll slept {busy_sleeps} times against {idle_sleeps} idle: it does not spin"
        );
    }
}

/// Deleting (or setting down) the interface under a live run stops it:
/// final counters, a one-line error naming the interface, exit code 4.
fn run_loses_its_interface(source: &str, how: &str) {
    let lab = Lab::new("llost", &LabConfig::default()).unwrap();
    let dev = lab.dev(Side::B).to_string();
    let src = format!("{source}:{dev}");
    let listen = format!("udp:{PORT}");
    let child =
        spawn_run(&lab, &["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "60", "--json"]);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    send(&lab, vec![40_100], 50);
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    match how {
        "deleted" => lab.ip_in(Side::B, &["link", "del", &dev]).unwrap(),
        _ => lab.ip_in(Side::B, &["link", "set", &dev, "down"]).unwrap(),
    }
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert!(t.elapsed() < Duration::from_secs(15), "{source}: the run went on after its interface was {how}");
    assert_eq!(code, Some(4), "{source} {how}: {err}\n{out}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains(&dev) && errors[0].contains(if how == "deleted" { "deleted" } else { "down" }), "{err}");
    let v = json(&out);
    assert_eq!(v["conservation_ok"], true, "{}", v["conservation"]);
    assert!(v["totals"]["received"].as_u64().unwrap() >= 50, "{}", v["totals"]);
    assert_eq!(v["source_error"].as_str(), Some(&errors[0]["error: ".len()..]));
}

#[test]
fn afpacket_run_stops_when_its_interface_is_deleted() {
    if skip() {
        return;
    }
    run_loses_its_interface("afpacket", "deleted");
}

#[test]
fn afpacket_run_stops_when_its_interface_is_set_down() {
    if skip() {
        return;
    }
    run_loses_its_interface("afpacket", "down");
}

#[test]
fn afxdp_run_stops_when_its_interface_is_deleted() {
    if skip() {
        return;
    }
    run_loses_its_interface("afxdp", "deleted");
}

#[test]
fn afxdp_run_stops_when_its_interface_is_set_down() {
    if skip() {
        return;
    }
    run_loses_its_interface("afxdp", "down");
}

/// The frames of the mixed test, by kind, each with how many to send:
/// valid UDP to the listener and to a port nobody listens on, VLAN-tagged
/// UDP to the listener, frames longer than the receiver's MTU (its veth
/// peer drops them: `tx_dropped`), and malformed IPv4 (cut inside the
/// header, a header length below 20, a total length past the frame).
fn mixed_frames(lab: &Lab) -> Vec<(&'static str, Vec<u8>, usize)> {
    use flowsteer_wire::build::{FrameBuilder, VlanTag};
    let (a, b) = (IpAddr::V4(lab.v4(Side::A)), IpAddr::V4(lab.v4(Side::B)));
    let (mac_a, mac_b) = (lab.mac(Side::A), lab.mac(Side::B));
    let frame = |sport: u16, dport: u16, payload: &[u8], vlans: &[VlanTag]| {
        let mut f = FrameBuilder::udp(a, b, sport, dport, payload);
        f.src_mac = mac_a;
        f.dst_mac = mac_b;
        f.vlans = vlans;
        f.build()
    };
    let valid = frame(41_000, PORT, &[7u8; 32], &[]);
    // Malformed frames go to a port nobody listens on: none of them may
    // reach the listener, however the engine names its drop.
    let elsewhere = frame(41_004, PORT + 2, &[4u8; 32], &[]);
    let cut = elsewhere[..14 + 10].to_vec();
    let mut short_ihl = elsewhere.clone();
    short_ihl[14] = 0x41;
    let mut long_total = elsewhere.clone();
    long_total[16..18].copy_from_slice(&1400u16.to_be_bytes());
    vec![
        ("valid", valid, 100),
        ("no_listener", frame(41_001, PORT + 1, &[1u8; 32], &[]), 20),
        ("vlan", frame(41_002, PORT, &[2u8; 32], &[VlanTag::dot1q(42)]), 20),
        ("oversized", frame(41_003, PORT, &[3u8; 3000], &[]), 10),
        ("cut_ip_header", cut, 10),
        ("short_ihl", short_ihl, 10),
        ("long_total", long_total, 10),
    ]
}

/// `tx_packets`, `tx_dropped` of a side's veth.
fn tx_counts(lab: &Lab, side: Side) -> (u64, u64) {
    let idx = lab.ifindex(side).unwrap();
    lab.run_in(side, move || {
        let mut r = flowsteer_live::link::LinkReader::new().unwrap();
        let l = r.read(idx, None).unwrap().unwrap();
        (l.tx_packets, l.tx_dropped)
    })
    .unwrap()
}

/// Sends every frame of `frames` from side A with an AF_PACKET socket;
/// returns how many the socket sent and how many the veth refused
/// (ENOBUFS: it counts them in its `tx_dropped`). No other error is
/// expected. One frame per call: a batch refused in its middle makes the
/// socket send the refused frame again (`sendmmsg` loses the error), which
/// the veth would count twice.
fn send_frames(lab: &Lab, frames: Vec<Vec<u8>>) -> (u64, u64) {
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
        let refused = st.failed.get(&libc::ENOBUFS).copied().unwrap_or(0);
        assert_eq!(st.failed_total(), refused, "{:?}", st.failed_by_name());
        assert_eq!(st.attempted, frames.len() as u64);
        (st.sent, refused)
    })
    .unwrap()
}

/// A mix of valid, VLAN-tagged, oversized and malformed frames into a live
/// run: every frame sent is in the run's stated sum (the source's hook saw
/// it, or the veth peer dropped it before the interface), and the sum holds.
fn every_frame_sent_is_placed(source: &str) -> serde_json::Value {
    let lab = Lab::new("lmix", &LabConfig::default()).unwrap();
    // Only the test's frames leave A: no IPv6 chatter; room for frames
    // longer than B's MTU, which B's veth refuses.
    let dev_a = lab.dev(Side::A).to_string();
    let sysctl = format!("net.ipv6.conf.{dev_a}.disable_ipv6=1");
    assert!(Command::new("ip")
        .args(["netns", "exec", lab.ns(Side::A), "sysctl", "-qw", &sysctl])
        .status()
        .unwrap()
        .success());
    lab.ip_in(Side::A, &["link", "set", &dev_a, "mtu", "9000"]).unwrap();
    let src = format!("{source}:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let child =
        spawn_run(&lab, &["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "60", "--json"]);
    common::wait_receiving(&lab, &child, source == "afxdp", 1);
    let kinds = mixed_frames(&lab);
    let mut frames = Vec::new();
    for (_, f, n) in &kinds {
        frames.extend(std::iter::repeat_n(f.clone(), *n));
    }
    let sent_total = frames.len() as u64;
    let oversized = kinds.iter().find(|k| k.0 == "oversized").unwrap().2 as u64;
    let (tx0, drop0) = tx_counts(&lab, Side::A);
    let (sent, refused) = send_frames(&lab, frames);
    assert_eq!((sent + refused, refused), (sent_total, oversized));
    let (tx1, drop1) = tx_counts(&lab, Side::A);
    assert_eq!((tx1 - tx0 + drop1 - drop0, drop1 - drop0), (sent_total, oversized), "A sent something else");
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = json(&out);
    let sum = v["conservation"].as_str().unwrap().to_string();
    println!("{source}: {sum}\ningress: {}", v["ingress"]);
    assert_eq!(v["conservation_ok"], true, "{sum}");
    let i = &v["ingress"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or_else(|| panic!("not a count: {x} in {i}"));
    let iface = &i["interface"];
    // A veth refuses a frame too long for its peer before the hook: the
    // sender counts it in tx_dropped (the receiver in rx_dropped too).
    assert_eq!(n(&iface["peer_tx_dropped"]), oversized, "{i}");
    assert_eq!(n(&i["seen"]) + n(&iface["peer_tx_dropped"]), sent_total, "a frame sent is not in the sum: {sum}");
    assert_eq!(n(&i["delivered"]), n(&v["totals"]["received"]), "{sum}");
    v
}

#[test]
fn afpacket_every_frame_sent_is_in_the_stated_sum() {
    if skip() {
        return;
    }
    let v = every_frame_sent_is_placed("afpacket");
    let t = &v["totals"];
    // Every frame the sockets saw reached the engine: valid and VLAN-tagged
    // ones (the kernel moves the tag out of the frame) to the listener.
    let listened = t["listener_bucket"].as_u64().unwrap() + t["listener_wildcard"].as_u64().unwrap();
    assert_eq!(listened, 120, "{t}");
    assert_eq!(t["dropped"].as_u64(), Some(50), "{t}");
}

/// The engine stopped (SIGSTOP) while more valid frames arrive than the
/// AF_XDP socket lent the kernel (2,048): the rest find the fill ring
/// empty and the kernel drops them; every frame is still in the sum.
#[test]
fn afxdp_frames_dropped_on_an_empty_fill_ring_are_in_the_stated_sum() {
    if skip() {
        return;
    }
    let lab = Lab::new("lfill", &LabConfig::default()).unwrap();
    let dev_a = lab.dev(Side::A).to_string();
    let sysctl = format!("net.ipv6.conf.{dev_a}.disable_ipv6=1");
    assert!(Command::new("ip")
        .args(["netns", "exec", lab.ns(Side::A), "sysctl", "-qw", &sysctl])
        .status()
        .unwrap()
        .success());
    let src = format!("afxdp:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let child =
        spawn_run(&lab, &["run", "--source", &src, "--cores", "0", "--listen", &listen, "--duration", "60", "--json"]);
    wait_ready(&lab, &child, true);
    let valid = mixed_frames(&lab).swap_remove(0).1;
    let pid = child.id().to_string();
    let sent_before = send_frames(&lab, vec![valid.clone(); 100]).0;
    std::thread::sleep(Duration::from_millis(200));
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let sent_stopped = send_frames(&lab, vec![valid; 2600]).0;
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}\n{out}");
    let v = json(&out);
    let sum = v["conservation"].as_str().unwrap().to_string();
    println!("afxdp: {sum}\ningress: {}", v["ingress"]);
    assert_eq!(v["conservation_ok"], true, "{sum}");
    let i = &v["ingress"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or_else(|| panic!("not a count: {x} in {i}"));
    assert_eq!((sent_before, sent_stopped), (100, 2600));
    assert_eq!(n(&i["seen"]) + n(&i["interface"]["peer_tx_dropped"]), 2700, "{sum}");
    // The socket lends 2,048 frames: the rest of the 2,600 found none.
    let no_frame = 2600 - 2048;
    assert_eq!(n(&i["socket_drops"]["rx_dropped"]), no_frame, "{i}");
    // The kernel counts each of them again as "fill ring empty" (beside the
    // sum) and, in generic XDP, in the interface's rx_dropped.
    assert_eq!(n(&i["fill_ring_empty"]), no_frame, "{i}");
    assert_eq!(n(&i["delivered"]), 2700 - no_frame, "{i}");
}

#[test]
fn afxdp_every_frame_sent_is_in_the_stated_sum() {
    if skip() {
        return;
    }
    let v = every_frame_sent_is_placed("afxdp");
    let (t, i) = (&v["totals"], &v["ingress"]);
    // The program redirects the listener's port only: the other frames
    // (another port, malformed ones) go to the kernel, counted as passed.
    let listened = t["listener_bucket"].as_u64().unwrap() + t["listener_wildcard"].as_u64().unwrap();
    assert!(listened >= 100, "{t}");
    assert!(i["passed"].as_u64().unwrap() >= 20, "{i}");
    assert_eq!(i["redirected"].as_u64(), t["received"].as_u64(), "{i}");
}
