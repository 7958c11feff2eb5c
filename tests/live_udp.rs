//! `flowsteer udp-echo` and `flowsteer udp-gen` against each other across a
//! veth pair between two network namespaces (`flowsteer_netns::Lab`, two
//! queues). The built binary runs under `ip netns exec`.
//!
//! What is proved: every echoed reply is byte-exact, nothing is lost or
//! reordered, and each reply leaves from the core that received the request
//! (per-core sent == received, no CPU mismatch; with `taskset`, a generator
//! pinned to CPU c is served entirely by the socket of CPU c, because veth
//! receive processing runs on the sender's CPU). SIGTERM during traffic
//! ends the server with exit code 0 and final counters that add up. The
//! same for `--mode xdp` (AF_XDP sockets per queue). Bad addresses and a
//! missing interface fail with one line and exit 1.
//!
//! Needs root and `ip` (otherwise prints `skipped: <reason>`); every run is
//! bounded by a datagram count and a timeout, and the lab is removed on drop.

use flowsteer_netns::{skip_reason, Lab, LabConfig, Side};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowsteer");
const READY: Duration = Duration::from_secs(20);
const LIMIT: Duration = Duration::from_secs(60);

/// A child process with its output collected by reader threads; killed on drop.
struct Proc {
    child: Child,
    stderr_lines: Receiver<String>,
    stderr_seen: Vec<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc { child, stderr_lines: rx, stderr_seen: Vec::new(), stdout: Some(stdout) }
    }

    /// Wait (bounded) for a stderr line containing `needle`.
    fn wait_for(&mut self, needle: &str, limit: Duration) {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            match self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    self.stderr_seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => {
                    if let Ok(Some(st)) = self.child.try_wait() {
                        self.drain_stderr();
                        panic!("exited ({st}) before '{needle}'; stderr: {:?}", self.stderr_seen);
                    }
                }
            }
        }
        panic!("no '{needle}' within {limit:?}; stderr: {:?}", self.stderr_seen);
    }

    fn drain_stderr(&mut self) {
        while let Ok(l) = self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
            self.stderr_seen.push(l);
        }
    }

    /// Wait (bounded) for exit; returns status, stdout, stderr.
    fn finish(mut self, limit: Duration) -> (ExitStatus, String, Vec<String>) {
        let until = Instant::now() + limit;
        let st = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("did not exit within {limit:?}; stderr so far: {:?}", self.stderr_seen);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.drain_stderr();
        let out = self.stdout.take().unwrap().join().unwrap();
        (st, out, std::mem::take(&mut self.stderr_seen))
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill").args([sig, &self.child.id().to_string()]).status().expect("kill");
        assert!(st.success());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `[taskset -c CPU] ip netns exec NS flowsteer ARGS`.
fn in_ns(lab: &Lab, side: Side, pin: Option<u32>, args: &[String]) -> Command {
    let mut c = match pin {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "ip"]);
            c
        }
        None => Command::new("ip"),
    };
    c.args(["netns", "exec", lab.ns(side), BIN]).args(args);
    c
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn have_taskset() -> bool {
    Command::new("taskset").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no number '{k}' in {v}"))
}

/// The two-namespace lab (2 queues, MTU 1500) a live echo test runs in,
/// or None after printing why the test skips (not root, no iproute2, or
/// with `two_cpus` on a one-CPU machine).
fn echo_lab(tag: &str, need_two_cpus: bool) -> Option<Lab> {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return None;
    }
    if need_two_cpus && !two_cpus() {
        println!("skipped: needs two CPUs");
        return None;
    }
    Some(Lab::new(tag, &LabConfig { queues: 2, mtu: 1500 }).unwrap())
}

fn start_server(lab: &Lab, port: u16, extra: &[&str]) -> Proc {
    let mut args = strings(&["udp-echo", "--mode", "kernel", "--echo", "--cpus", "0,1", "--duration", "45"]);
    args.insert(1, format!("{}:{port}", lab.v4(Side::B)));
    args.extend(strings(extra));
    let mut p = Proc::spawn(in_ns(lab, Side::B, None, &args));
    p.wait_for("udp-echo: serving", READY);
    p
}

#[test]
fn echo_is_byte_exact_lossless_and_answered_by_the_receiving_core() {
    let Some(lab) = echo_lab("ue", true) else { return };
    let port = 41_000;
    let server = start_server(&lab, port, &["--json"]);
    const N: u64 = 3000;
    let pinned = have_taskset();
    if !pinned {
        println!("note: taskset not found; generators run unpinned, per-CPU split not checked");
    }
    let gens: Vec<Proc> = [0u32, 1]
        .iter()
        .map(|&cpu| {
            let args = vec![
                "udp-gen".to_string(),
                "-r".into(),
                lab.v4(Side::B).to_string(),
                "-p".into(),
                port.to_string(),
                "-l".into(),
                lab.v4(Side::A).to_string(),
                "--echo".into(),
                "-n".into(),
                N.to_string(),
                "--flows".into(),
                "4".into(),
                "--rate".into(),
                "20000".into(),
                "-s".into(),
                "200".into(),
                "--drain".into(),
                "3".into(),
                "--duration".into(),
                "20".into(),
                "--json".into(),
            ];
            Proc::spawn(in_ns(&lab, Side::A, pinned.then_some(cpu), &args))
        })
        .collect();
    for g in gens {
        let (st, out, err) = g.finish(LIMIT);
        assert!(st.success(), "udp-gen failed: {st}; stderr {err:?}");
        let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(u(&r, "sent"), N, "{r}");
        assert_eq!(u(&r, "unique"), N, "{r}");
        assert_eq!(u(&r, "replies"), N, "{r}");
        for k in ["lost", "mismatched", "reordered", "duplicates", "late"] {
            assert_eq!(u(&r, k), 0, "{k}: {r}");
        }
        assert_eq!(r["replies_add_up"], true);
        assert_eq!(u(&r["rtt"], "count"), N);
        assert!(r["send_errors"].as_object().unwrap().is_empty(), "{r}");
    }
    server.signal("-TERM");
    let (st, out, err) = server.finish(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "udp-echo: {st}; stderr {err:?}");
    let s: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(s["conservation_ok"], true, "{s}");
    let total = &s["total"];
    assert_eq!(u(total, "received"), 2 * N, "{s}");
    assert_eq!(u(total, "received"), u(total, "delivered") + u(total, "dropped"));
    let cores = s["cores"].as_array().unwrap();
    assert_eq!(cores.len(), 2);
    for c in cores {
        // Each reply left from the socket (and pinned thread) that received the request.
        assert_eq!(u(c, "sent"), u(c, "received"), "{c}");
        assert_eq!(u(c, "cpu_mismatch"), 0, "{c}");
        assert_eq!(u(c, "dropped"), 0, "{c}");
        if pinned {
            // veth receive runs on the sender's CPU: the generator pinned to CPU c is served by socket c.
            assert_eq!(u(c, "received"), N, "per-CPU steering: {s}");
        }
    }
}

#[test]
fn sigterm_during_traffic_exits_zero_with_counters_that_add_up() {
    let Some(lab) = echo_lab("ut", true) else { return };
    let port = 41_001;
    let mut server = start_server(&lab, port, &["--json", "--interval", "0.2"]);
    let args = vec![
        "udp-gen".to_string(),
        "-r".into(),
        lab.v4(Side::B).to_string(),
        "-p".into(),
        port.to_string(),
        "--echo".into(),
        "--flows".into(),
        "8".into(),
        "--rate".into(),
        "30000".into(),
        "-n".into(),
        "150000".into(),
        "--duration".into(),
        "5".into(),
        "--drain".into(),
        "0.5".into(),
        "--json".into(),
    ];
    let gen = Proc::spawn(in_ns(&lab, Side::A, None, &args));
    // Let traffic flow, then stop the server in the middle of it.
    std::thread::sleep(Duration::from_millis(1500));
    server.drain_stderr();
    server.signal("-TERM");
    let t = Instant::now();
    let (st, out, err) = server.finish(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "udp-echo: {st}; stderr {err:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "stop took {:?}", t.elapsed());
    let last = out.lines().last().expect("final counters");
    let s: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"));
    let total = &s["total"];
    assert!(u(total, "received") > 0, "no traffic reached the server: {s}");
    assert_eq!(u(total, "received"), u(total, "delivered") + u(total, "dropped"), "{s}");
    assert_eq!(s["conservation_ok"], true);
    let sum = |k: &str| s["cores"].as_array().unwrap().iter().map(|c| u(c, k)).sum::<u64>();
    assert_eq!(sum("received"), u(total, "received"));
    assert_eq!(sum("delivered"), u(total, "delivered"));
    // The generator was still sending: it ends on its own (duration/count) and reports.
    let (gst, gout, gerr) = gen.finish(LIMIT);
    assert!(gst.success(), "udp-gen: {gst}; {gerr:?}");
    let r: Value = serde_json::from_str(&gout).unwrap();
    assert!(u(&r, "sent") > u(total, "received"), "the server stopped during traffic: {r}");
    assert_eq!(u(&r, "mismatched"), 0);
    // Every reply the generator got was echoed by the server.
    assert!(u(&r, "unique") <= u(total, "sent"));
}

fn one_line_error(st: ExitStatus, err: &[String], needle: &str) {
    one_line_error_with(st, err, needle, 1);
}

/// A command line that cannot run as given: exit 2.
fn one_line_usage_error(st: ExitStatus, err: &[String], needle: &str) {
    one_line_error_with(st, err, needle, 2);
}

fn one_line_error_with(st: ExitStatus, err: &[String], needle: &str, code: i32) {
    assert_eq!(st.code(), Some(code), "{err:?}");
    assert_eq!(err.len(), 1, "one line expected: {err:?}");
    assert!(err[0].starts_with("error: ") && err[0].contains(needle), "{err:?}");
}

fn run_plain(args: &[&str]) -> (ExitStatus, Vec<String>) {
    let mut c = Command::new(BIN);
    c.args(args);
    let (st, _, err) = Proc::spawn(c).finish(Duration::from_secs(20));
    (st, err)
}

#[test]
fn xdp_mode_needs_an_interface() {
    let (st, err) = run_plain(&["udp-echo", "127.0.0.1:9", "--mode", "xdp"]);
    one_line_usage_error(st, &err, "needs --iface");
    let (st, err) = run_plain(&["udp-echo", "127.0.0.1:9", "--mode", "xdp", "--iface", "fs-no-such-if0"]);
    one_line_error(st, &err, "fs-no-such-if0");
}

/// `--mode xdp`: an AF_XDP socket per veth queue, one pinned thread each,
/// answers the generator byte-exact, in order, without loss; each reply
/// leaves from the socket and core that received the request; SIGTERM
/// ends it with counters that add up and the XDP program detached.
#[test]
fn xdp_echo_is_byte_exact_lossless_and_answered_by_the_receiving_core() {
    let Some(lab) = echo_lab("ux", false) else { return };
    let port = 41_010;
    let args = vec![
        "udp-echo".to_string(),
        format!("{}:{port}", lab.v4(Side::B)),
        "--mode".into(),
        "xdp".into(),
        "--iface".into(),
        lab.dev(Side::B).to_string(),
        "--cpus".into(),
        "0,1".into(),
        "--duration".into(),
        "45".into(),
        "--json".into(),
    ];
    let mut server = Proc::spawn(in_ns(&lab, Side::B, None, &args));
    server.wait_for("udp-echo: serving", READY);
    const N: u64 = 3000;
    let gen_args = strings(&[
        "udp-gen",
        "-r",
        &lab.v4(Side::B).to_string(),
        "-p",
        &port.to_string(),
        "-l",
        &lab.v4(Side::A).to_string(),
        "--echo",
        "-n",
        &N.to_string(),
        "--flows",
        "8",
        "--rate",
        "20000",
        "-s",
        "200",
        "--drain",
        "3",
        "--duration",
        "20",
        "--json",
    ]);
    let (st, out, err) = Proc::spawn(in_ns(&lab, Side::A, None, &gen_args)).finish(LIMIT);
    assert!(st.success(), "udp-gen failed: {st}; stderr {err:?}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(u(&r, "sent"), N, "{r}");
    assert_eq!(u(&r, "unique"), N, "{r}");
    for k in ["lost", "mismatched", "reordered", "duplicates", "late"] {
        assert_eq!(u(&r, k), 0, "{k}: {r}");
    }
    server.signal("-TERM");
    let (st, out, err) = server.finish(Duration::from_secs(10));
    assert_eq!(st.code(), Some(0), "udp-echo: {st}; stderr {err:?}");
    let s: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(s["conservation_ok"], true, "{s}");
    assert_eq!(s["schema"], "flowsteer.udp-echo-xdp.v1");
    assert_eq!(u(&s["total"], "delivered"), N, "{s}");
    assert_eq!(u(&s["total"], "sent"), N, "{s}");
    for c in s["cores"].as_array().unwrap() {
        assert_eq!(u(c, "sent"), u(c, "delivered"), "{c}");
        assert_eq!(u(c, "cpu_mismatch"), 0, "{c}");
    }
    let link = Command::new("ip").args(["-n", lab.ns(Side::B), "link", "show", lab.dev(Side::B)]).output().unwrap();
    assert!(!String::from_utf8_lossy(&link.stdout).contains("xdp"), "XDP program left attached");
}

#[test]
fn bad_addresses_fail_with_one_line_and_exit_2_or_1() {
    let (st, err) = run_plain(&["udp-echo", "not-an-address"]);
    one_line_usage_error(st, &err, "is not ADDR:PORT");
    let (st, err) = run_plain(&["udp-gen", "-r", "999.1.1.1", "-p", "9", "-n", "1"]);
    one_line_usage_error(st, &err, "is not an IP address");
    if let Some(why) = skip_reason() {
        println!("skipped (non-local addresses in a namespace): {why}");
        return;
    }
    let lab = Lab::new("ub", &LabConfig { queues: 2, mtu: 1500 }).unwrap();
    let (st, _, err) =
        Proc::spawn(in_ns(&lab, Side::B, None, &strings(&["udp-echo", "10.255.255.1:9000", "--cpus", "0"])))
            .finish(Duration::from_secs(20));
    one_line_error(st, &err, "10.255.255.1 is not an address of this host");
    let args = vec![
        "udp-gen".to_string(),
        "-r".into(),
        lab.v4(Side::B).to_string(),
        "-p".into(),
        "9".into(),
        "-l".into(),
        "10.255.255.1".into(),
        "-n".into(),
        "1".into(),
    ];
    let (st, _, err) = Proc::spawn(in_ns(&lab, Side::A, None, &args)).finish(Duration::from_secs(20));
    one_line_error(st, &err, "-l 10.255.255.1: not an address of this host");
}

/// `bench udp` builds its own lab, runs every mode it is asked for and
/// prints `{"results": [...]}` with the documented fields; counters add up.
#[test]
fn bench_udp_runs_end_to_end_and_reports_the_documented_fields() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let args = [
        "bench",
        "udp",
        "--seconds",
        "0.5",
        "--max-flows",
        "1",
        "--flows",
        "2",
        "--modes",
        "kernel-single,xdp",
        "--json",
    ];
    let bench = Proc::spawn({
        let mut c = Command::new(BIN);
        c.args(args);
        c
    });
    let pid = bench.child.id();
    let (st, out, err) = bench.finish(LIMIT);
    assert!(st.success(), "{st}: {err:?}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rows = v["results"].as_array().unwrap();
    let modes: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["experiment"].as_str().unwrap(), r["mode"].as_str().unwrap())).collect();
    assert_eq!(modes, vec![("modes", "kernel-single"), ("modes", "xdp"), ("flows", "xdp")]);
    for r in rows {
        assert!(r["pps_per_core"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["flows"].as_u64().unwrap() >= 1);
        assert_eq!(r["conservation_ok"], true, "{r}");
        assert!(u(r, "server_sent") <= u(r, "delivered") && u(r, "delivered") <= u(r, "received"), "{r}");
    }
    // The bench removed its lab (namespaces are named fs-bu-{a,b}-PID-N).
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains(&format!("fs-bu-a-{pid}-")), "lab left behind");
}

/// `udp-gen` decides with the namespace's own routes: with none to a
/// remote, it is refused as unreachable (even with --allow-routed); through
/// a gateway or a device-only default route, refused unless --allow-routed
/// (then one datagram goes to the gateway, side B, which drops it); the
/// peer on the veth's network is sent to without a flag.
#[test]
fn udp_gen_refuses_routed_and_unreachable_remotes_by_the_kernels_routes() {
    let Some(lab) = echo_lab("ur", false) else { return };
    let gen = |remote: &str, extra: &[&str]| {
        let mut args = strings(&["udp-gen", "-r", remote, "-p", "9", "-n", "1"]);
        args.extend(strings(extra));
        Proc::spawn(in_ns(&lab, Side::A, None, &args)).finish(Duration::from_secs(20))
    };
    for remote in ["198.51.100.1", "2001:db8::1"] {
        for extra in [&[][..], &["--allow-routed"]] {
            let (st, _, err) = gen(remote, extra);
            one_line_usage_error(st, &err, &format!("--remote {remote}: the kernel has no route to it ("));
        }
    }
    let gw = lab.v4(Side::B).to_string();
    lab.ip_in(Side::A, &["route", "add", "default", "via", &gw]).unwrap();
    let (st, _, err) = gen("198.51.100.1", &[]);
    let route = format!(
        "its route is `198.51.100.1 via {gw} dev {} src {}` (the default route)",
        lab.dev(Side::A),
        lab.v4(Side::A)
    );
    one_line_usage_error(st, &err, &route);
    assert!(err[0].contains("give --allow-routed to send there anyway (at --rate 10000)"), "{err:?}");
    let (st, out, err) = gen("198.51.100.1", &["--allow-routed", "--json"]);
    assert!(st.success(), "{err:?}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!((u(&r, "sent"), u(&r, "rate_target")), (1, 10_000), "{r}");
    // A more specific route through the gateway: no default route, still routed.
    lab.ip_in(Side::A, &["route", "add", "203.0.113.0/24", "via", &gw]).unwrap();
    let (st, _, err) = gen("203.0.113.7", &[]);
    one_line_usage_error(st, &err, &format!("203.0.113.7 via {gw} dev"));
    assert!(!err[0].contains("(the default route)"), "{err:?}");
    // A default route without a gateway (as a VPN's): still not a connected network.
    lab.ip_in(Side::A, &["route", "replace", "default", "dev", lab.dev(Side::A)]).unwrap();
    let (st, _, err) = gen("198.51.100.1", &["--rate", "max"]);
    one_line_usage_error(st, &err, "(the default route); give --allow-routed to send there anyway (at --rate max)");
    // The peer on the veth's /24 and this side's own address: sent to.
    for remote in [gw.clone(), lab.v4(Side::A).to_string(), lab.v6(Side::B).to_string()] {
        let (st, out, err) = gen(&remote, &[]);
        assert!(st.success(), "{remote}: {err:?}");
        assert!(out.lines().next().is_some_and(|h| h.ends_with("rate 10000 pps")), "{remote}: {out}");
    }
}
