//! `flowsteer bridge` from start to stop, live: the built binary runs in
//! the hub of a star of two hosts (`ip netns exec`) over AF_XDP ports.
//!
//! * `bridge-ctl fdb show` lists both hosts (after a ping) in iproute2's
//!   `bridge fdb show` shape, each on its own port; `stats --json` parses;
//! * a second `flowsteer bridge` given the same `--ctl` path is refused
//!   before it opens any port: it exits nonzero naming the path, and the
//!   first keeps its ports, its socket and its traffic;
//! * SIGTERM: exit 0, the final table printed with `conservation: ok`, no
//!   XDP program left on the ports, the socket file removed;
//! * SIGHUP, SIGUSR1 and SIGUSR2 leave it running and forwarding (over
//!   AF_PACKET ports); each SIGUSR1 prints the counters tables; SIGTERM
//!   then stops it as above.
//!
//! * each `afxdp:` port says its XDP mode (native, or generic and why
//!   native was refused: a veth whose peer has an MTU of 9000) in the
//!   header, `bridge-ctl stats` and `--json`, and as a warning.
//!
//! Root only (skipped with a printed reason otherwise), but for `--cpus`
//! naming a CPU this process may not run on: a usage error (exit 2) that
//! names the CPUs it may run on, before anything is opened.

#[allow(dead_code)] // only `TempDir` and `flowsteer` are used here
mod common;

use common::{flowsteer, TempDir};
use flowsteer_netns::{skip_reason, Star};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowsteer");

/// `flowsteer ARGS` in the hub, its output collected; killed on drop.
struct Running {
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

impl Running {
    fn spawn(star: &Star, args: &[&str]) -> Running {
        let mut child = Command::new("ip")
            .args(["netns", "exec", star.hub_ns(), BIN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn flowsteer");
        let out = Some(collect(child.stdout.take().unwrap()));
        let err = Some(collect(child.stderr.take().unwrap()));
        Running { child, out, err }
    }

    /// Sends signal `sig` (`TERM`, `HUP`, ...).
    fn signal(&self, sig: &str) {
        // `ip netns exec` execs the binary: the child's pid is the bridge's.
        let kill = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status().unwrap();
        assert!(kill.success());
    }

    /// Whether it has not exited.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGTERM and waits (at most 20 s) for the exit.
    fn terminate(mut self) -> (ExitStatus, String, String) {
        self.signal("TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "the bridge did not exit within 20 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = self.out.take().unwrap().join().unwrap();
        let err = self.err.take().unwrap().join().unwrap();
        (status, out, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ctl(path: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(["bridge-ctl", "--ctl", path.to_str().unwrap()]).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits (at most 20 s) until the bridge answers on `sock`.
fn wait_up(sock: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while ctl(sock, &["stats", "--json"]).status.code() != Some(0) {
        assert!(Instant::now() < deadline, "no answer on {} within 20 s", sock.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One ICMP echo from host `from` to host `to` answered (5 s at most).
fn ping(star: &Star, from: usize, to: usize) -> bool {
    let to = star.v4(to).into();
    star.run_in(from, move || flowsteer_netns::ping(to, Duration::from_secs(5))).unwrap().unwrap()
}

fn xdp_attached(star: &Star, i: usize) -> bool {
    let out = Command::new("ip").args(["-n", star.hub_ns(), "link", "show", "dev", star.hub_dev(i)]).output().unwrap();
    text(&out.stdout).contains("xdp")
}

#[test]
fn bridge_serves_refuses_a_second_on_its_socket_and_stops_clean_on_sigterm() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let star = Star::new("bcli", 2).unwrap();
    let dir = TempDir::new("live-bridge-cli", "lifecycle");
    let sock = dir.path("bridge.sock");
    let (p1, p2) = (format!("afxdp:{}", star.hub_dev(1)), format!("afxdp:{}", star.hub_dev(2)));
    let sock_arg = sock.to_str().unwrap();
    let first = Running::spawn(&star, &["bridge", "--port", &p1, "--port", &p2, "--ctl", sock_arg, "--interval", "1"]);

    // Up once the socket answers.
    wait_up(&sock);
    let (to1, to2) = (star.v4(1).into(), star.v4(2).into());
    let ping = |from: usize, to| {
        star.run_in(from, move || flowsteer_netns::ping(to, Duration::from_secs(5))).unwrap().unwrap()
    };
    assert!(ping(1, to2) && ping(2, to1), "the hosts reach each other through the bridge");

    let out = ctl(&sock, &["fdb", "show"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    for i in 1..=2 {
        let line = table
            .lines()
            .find(|l| l.starts_with(&star.mac_text(i)))
            .unwrap_or_else(|| panic!("host {i} not in the table:\n{table}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        // `MAC dev IFACE age Ns master flowsteer`
        assert_eq!(words.len(), 7, "{line}");
        assert_eq!((words[1], words[2], words[3]), ("dev", star.hub_dev(i), "age"), "{line}");
        assert!(words[4].strip_suffix('s').is_some_and(|n| n.parse::<u64>().is_ok()), "{line}");
        assert_eq!((words[5], words[6]), ("master", "flowsteer"), "{line}");
    }
    let out = ctl(&sock, &["stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json is JSON");
    assert_eq!(stats["ports"].as_array().map(Vec::len), Some(2), "{stats}");
    assert_eq!(stats["conservation_ok"], true, "{stats}");

    // A second bridge on the same socket: refused before it opens a port
    // (opening one would fail on the first's XDP program, naming the port).
    let second = Command::new("ip")
        .args(["netns", "exec", star.hub_ns(), BIN, "bridge", "--port", &p1, "--port", &p2, "--ctl", sock_arg])
        .output()
        .unwrap();
    let err = text(&second.stderr);
    assert!(!second.status.success(), "a second bridge ran: {err}");
    assert!(err.contains(sock_arg) && err.contains("already answers"), "{err}");
    assert!(!err.contains("port "), "the second bridge opened a port: {err}");
    assert!(xdp_attached(&star, 1) && xdp_attached(&star, 2), "the first bridge lost its ports");
    assert!(sock.exists(), "the first bridge lost its socket");
    assert!(ping(1, to2), "traffic through the first bridge");
    assert_eq!(ctl(&sock, &["stats"]).status.code(), Some(0));

    let (status, stdout, stderr) = first.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let fin = stdout.rfind("final at").unwrap_or_else(|| panic!("no final table:\n{stdout}"));
    assert!(stdout[fin..].contains("conservation: ok"), "{}", &stdout[fin..]);
    for i in 1..=2 {
        assert!(!xdp_attached(&star, i), "XDP program left on port {i}");
    }
    assert!(!sock.exists(), "socket file left behind");
}

/// Each `afxdp:` port says which XDP mode it attached in: native on a plain
/// veth; generic, with why native was refused, when the veth's peer has an
/// MTU of 9000 (too large for native XDP on a veth): in the start-up header,
/// in `bridge-ctl stats` and `--json`, and as a warning on stderr.
#[test]
fn each_afxdp_port_says_its_xdp_mode_and_why_native_was_refused() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let star = Star::new("bxm", 2).unwrap();
    let status = Command::new("ip")
        .args(["-n", star.host_ns(1), "link", "set", &star.host_dev(1), "mtu", "9000"])
        .status()
        .unwrap();
    assert!(status.success());
    let dir = TempDir::new("live-bridge-cli", "xdp-mode");
    let sock = dir.path("bridge.sock");
    let (d1, d2) = (star.hub_dev(1), star.hub_dev(2));
    let (p1, p2) = (format!("afxdp:{d1}"), format!("afxdp:{d2}"));
    let bridge = Running::spawn(&star, &["bridge", "--port", &p1, "--port", &p2, "--ctl", sock.to_str().unwrap()]);
    wait_up(&sock);

    let out = ctl(&sock, &["stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json is JSON");
    let row = |d: &str| stats["ports"].as_array().unwrap().iter().find(|p| p["name"] == d).unwrap().clone();
    let (r1, r2) = (row(d1), row(d2));
    assert_eq!(r1["xdp_mode"], "generic", "{r1}");
    let why = r1["xdp_fallback"].as_str().unwrap_or_else(|| panic!("no xdp_fallback: {r1}")).to_string();
    assert!(why.contains("MTU"), "{why}");
    assert_eq!((r2["xdp_mode"].as_str(), r2.get("xdp_fallback")), (Some("native"), None), "{r2}");
    let table = text(&ctl(&sock, &["stats"]).stdout);
    let line = table.lines().find(|l| l.starts_with("xdp: ")).unwrap_or_else(|| panic!("no xdp line:\n{table}"));
    assert_eq!(line, format!("xdp: {d1} generic (native refused: {why}); {d2} native"), "{table}");

    let (status, stdout, stderr) = bridge.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let header = |d: &str| {
        let head = format!("  {d}: ");
        stdout
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no line for {d}:\n{stdout}"))
            .to_string()
    };
    println!("{}\n{}", header(d1), header(d2));
    assert!(header(d1).starts_with(&format!("  {d1}: xdp generic (native refused: {why}), fast path ")), "{stdout}");
    assert!(header(d2).starts_with(&format!("  {d2}: xdp native, fast path ")), "{stdout}");
    let warning = format!("{d1}: XDP attached in generic (skb) mode, slower than native: native refused: {why}");
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(!stderr.contains(&format!("{d2}: XDP attached in generic")), "{stderr}");
}

#[test]
fn hup_usr1_and_usr2_leave_the_bridge_running_and_forwarding() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let star = Star::new("bsig", 2).unwrap();
    let dir = TempDir::new("live-bridge-cli", "signals");
    let sock = dir.path("bridge.sock");
    let (p1, p2) = (format!("afpacket:{}", star.hub_dev(1)), format!("afpacket:{}", star.hub_dev(2)));
    let mut bridge = Running::spawn(&star, &["bridge", "--port", &p1, "--port", &p2, "--ctl", sock.to_str().unwrap()]);
    wait_up(&sock);
    assert!(ping(&star, 1, 2), "the hosts reach each other through the bridge");
    for sig in ["HUP", "USR1", "USR2", "USR1"] {
        bridge.signal(sig);
        // The bridge looks at its signals every 20 ms.
        std::thread::sleep(Duration::from_millis(300));
        assert!(bridge.running(), "SIG{sig} ended the bridge");
        assert!(ping(&star, 1, 2) && ping(&star, 2, 1), "no traffic through the bridge after SIG{sig}");
        assert_eq!(ctl(&sock, &["stats"]).status.code(), Some(0), "no answer on the socket after SIG{sig}");
    }
    let (status, stdout, stderr) = bridge.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    // One table per SIGUSR1, before the final one.
    let fin = stdout.rfind("final at").unwrap_or_else(|| panic!("no final table:\n{stdout}"));
    assert_eq!(stdout[..fin].matches("SIGUSR1 at ").count(), 2, "{stdout}");
    let usr1 = stdout.find("SIGUSR1 at ").unwrap();
    let table = &stdout[usr1..fin];
    assert!(table.contains(star.hub_dev(1)) && table.contains("conservation: ok"), "{table}");
    assert!(stdout[fin..].contains("conservation: ok"), "{}", &stdout[fin..]);
    assert!(!sock.exists(), "socket file left behind");
}

#[test]
fn cpus_this_process_may_not_run_on_are_a_usage_error_naming_the_available_ones() {
    let available = flowsteer_live::available_cpus();
    let absent = (99..).find(|c| !available.contains(c)).unwrap();
    let cpus = format!("{},{absent}", available[0]);
    let o = flowsteer(&["bridge", "--port", "afpacket:fs-none-a", "--port", "afpacket:fs-none-b", "--cpus", &cpus]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
    let want = format!("error: --cpus: CPU {absent} is not available to this process (available: {available:?})");
    assert_eq!(err.trim_end(), want);
}
