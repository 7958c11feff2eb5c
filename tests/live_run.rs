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

/// Packet sockets open in namespace B (`/proc/net/packet` is per namespace).
fn packet_sockets(lab: &Lab) -> usize {
    let out = Command::new("ip").args(["netns", "exec", lab.ns(Side::B), "cat", "/proc/net/packet"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count().saturating_sub(1)
}

/// Waits (bounded) until the receiver is ready: the XDP program is attached
/// (its sockets are registered right after), or the AF_PACKET rings are open.
fn wait_ready(lab: &Lab, xdp: bool) {
    let t = Instant::now();
    let ready = || if xdp { xdp_attached(lab) } else { packet_sockets(lab) >= 2 };
    while !ready() && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ready(), "receiver never became ready");
    std::thread::sleep(Duration::from_millis(500));
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
            let drops: u64 = w["drops"].as_object().map_or(0, |d| d.values().filter_map(|x| x.as_u64()).sum());
            w["handled"].as_u64().unwrap() - drops
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
    wait_ready(&lab, xdp);
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
    wait_ready(&lab, false);
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

#[test]
fn sigterm_stops_an_afxdp_run_prints_counters_and_detaches() {
    if skip() {
        return;
    }
    let lab = Lab::new("lsig", &LabConfig::default()).unwrap();
    let src = format!("afxdp:{}", lab.dev(Side::B));
    let listen = format!("udp:{PORT}");
    let child = spawn_run(&lab, &["run", "--source", &src, "--cores", "0,1", "--listen", &listen, "--duration", "60"]);
    wait_ready(&lab, true);
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
    assert!(out.contains("conservation: received + reassembled = delivered + dropped"), "{out}");
    assert!(out.contains("OK"), "{out}");
    assert!(!xdp_attached(&lab), "XDP program left attached after SIGTERM");
}
