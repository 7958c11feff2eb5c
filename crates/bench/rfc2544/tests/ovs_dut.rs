//! Live: Open vSwitch (userspace datapath, AF_XDP ports, NORMAL) as a
//! device under test, through the generator and receiver; nothing of it
//! left after a drop or a panic; a sweep that skips it when it is not
//! installed. Root only (network namespaces, AF_XDP) and, for the first
//! two, Open vSwitch installed (Debian: `openvswitch-switch`); skipped with
//! a printed reason otherwise. Traffic stays inside the namespaces the
//! tests create; the daemons are the tests' own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use flowsteer_rfc2544::dut::{leftovers, DutKind, Topology};
use flowsteer_rfc2544::frames::FrameSize;
use flowsteer_rfc2544::live::{LiveConfig, LiveRunner};
use flowsteer_rfc2544::sweep::{self, SweepConfig};

/// One OVS at a time: two PMD threads busy-polling the same DUT CPU
/// would starve each other's trial.
static OVS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn skip_netns() -> bool {
    match flowsteer_netns::skip_reason() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

fn skip_ovs() -> bool {
    if skip_netns() {
        return true;
    }
    match flowsteer_rfc2544::ovs::skip_reason() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Generator and receiver on the first CPU, the DUT on the second (on one
/// CPU: all on it).
fn placement() -> (usize, usize) {
    let cpus: Vec<usize> = flowsteer_live::available_cpus().into_iter().map(|c| c as usize).collect();
    let gen = cpus.first().copied().unwrap_or(0);
    (gen, cpus.get(1).copied().unwrap_or(gen))
}

/// Processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<u32> {
    let want = dir.to_string_lossy().into_owned();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    proc_dir
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).split('\0').any(|a| a.contains(&want))
        })
        .collect()
}

/// Nothing of an OVS DUT is left: no daemon, no directory, no namespace.
fn assert_gone(dir: &Path, pids: &[u32], namespaces: &[String]) {
    assert!(!dir.exists(), "{} left behind", dir.display());
    for pid in pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} left running");
    }
    assert!(processes_naming(dir).is_empty(), "processes naming {}: {:?}", dir.display(), processes_naming(dir));
    let left = leftovers();
    for n in namespaces {
        assert!(!left.contains(n), "{n} left behind");
    }
}

/// An XDP program is attached to `dev` in namespace `ns`.
fn has_xdp(ns: &str, dev: &str) -> bool {
    let out = std::process::Command::new("ip").args(["-n", ns, "link", "show", "dev", dev]).output().expect("ip");
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

/// Each thread named `pmd*` of process `pid`: the CPUs it may run on and
/// its nice value.
fn pmd_threads(pid: u32) -> Vec<(String, i64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("pmd")))
        .filter_map(|t| {
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_string();
            // stat: "pid (comm) state ..."; nice is field 19.
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let nice = stat.rsplit_once(')')?.1.split_whitespace().nth(16)?.parse().ok()?;
            Some((cpus, nice))
        })
        .collect()
}

/// Every frame sent at a low rate is forwarded by OVS, once; its PMD
/// thread runs on the DUT CPU at the bridge worker's nice and its AF_XDP
/// ports hold XDP programs;
/// after the drop no daemon, directory or namespace is left.
#[test]
fn ovs_forwards_every_frame_and_leaves_nothing() {
    if skip_ovs() {
        return;
    }
    let _one = OVS.lock().unwrap_or_else(|e| e.into_inner());
    let (gen, dut_cpu) = placement();
    let topo = Topology::start(DutKind::Ovs, &[dut_cpu], false).expect("topology with ovs");
    let names = topo.namespaces().to_vec();
    let ns = topo.dut_ns().expect("a DUT namespace").to_string();
    let ovs = topo.ovs().expect("ovs running");
    let dir: PathBuf = ovs.dir().to_path_buf();
    let pids = ovs.pids();
    assert_eq!(pids.len(), 2, "ovsdb-server and ovs-vswitchd");
    assert!(dir.join("conf.db").is_file());
    let nice = i64::from(flowsteer_rfc2544::bridge::WORKER_NICE);
    assert_eq!(pmd_threads(pids[1]), vec![(dut_cpu.to_string(), nice)], "one PMD thread, on the DUT CPU");
    assert!(has_xdp(&ns, "dut0") && has_xdp(&ns, "dut1"), "AF_XDP ports without XDP programs");
    let mut c = LiveConfig::new(FrameSize::Fixed(64));
    c.gen_cpu = Some(gen);
    c.rx_cpu = Some(gen);
    c.wait = Duration::from_millis(200);
    c.learning = Duration::from_millis(100);
    let cpu0 = topo.dut_cpu_ns().expect("ovs-vswitchd's CPU time");
    {
        let mut runner = LiveRunner::new(&topo.ports(), c, None).expect("runner");
        let (out, d) = runner.trial(20_000.0, Duration::from_millis(300)).expect("trial");
        assert!(out.sent >= 5_000, "{out:?}");
        assert_eq!(out.received, out.sent, "{d:?}");
        assert_eq!((d.rx.duplicates, d.rx.foreign), (0, 0), "{d:?}");
    }
    assert!(topo.dut_cpu_ns().expect("ovs-vswitchd's CPU time") > cpu0);
    drop(topo);
    assert_gone(&dir, &pids, &names);
}

/// A panic while the topology is up stops OVS and removes everything as
/// the unwinding drops it.
#[test]
fn a_panic_stops_ovs() {
    if skip_ovs() {
        return;
    }
    let _one = OVS.lock().unwrap_or_else(|e| e.into_inner());
    let (_, dut_cpu) = placement();
    let seen = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let topo = Topology::start(DutKind::Ovs, &[dut_cpu], false).expect("topology with ovs");
        let ovs = topo.ovs().expect("ovs running");
        *seen.lock().unwrap() = Some((ovs.dir().to_path_buf(), ovs.pids(), topo.namespaces().to_vec()));
        panic!("a test's panic with ovs up");
    }));
    assert!(result.is_err());
    let (dir, pids, names) = seen.lock().unwrap().take().expect("ovs was up");
    assert_eq!(pids.len(), 2);
    assert_gone(&dir, &pids, &names);
}

/// Without Open vSwitch a sweep with `ovs` and `patch` measures `patch`
/// and reports `ovs` as skipped, with the reason.
#[test]
fn a_sweep_skips_ovs_when_it_is_not_installed() {
    if skip_netns() {
        return;
    }
    if flowsteer_rfc2544::ovs::skip_reason().is_none() {
        eprintln!("skipped: Open vSwitch is installed (this test checks the sweep without it)");
        return;
    }
    let mut cfg = SweepConfig::new(vec![DutKind::Ovs, DutKind::Patch]);
    cfg.sizes = vec![FrameSize::Fixed(64)];
    cfg.trial = Duration::from_millis(300);
    cfg.short_trial = Duration::from_millis(200);
    cfg.wait = Duration::from_millis(200);
    cfg.learning = Duration::from_millis(20);
    cfg.gen_max_trial = Duration::from_millis(300);
    cfg.resolution = 0.1;
    cfg.min_fps = 10_000.0;
    cfg.latency_shares = Vec::new();
    let mut events = Vec::new();
    let report = sweep::run(&cfg, None, &mut |ev| {
        if let sweep::Event::Skipped { dut, reason } = ev {
            events.push((dut, reason.to_string()));
        }
    })
    .expect("sweep");
    assert!(report.complete);
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].dut, "ovs");
    assert!(report.skipped[0].reason.contains("not installed"), "{}", report.skipped[0].reason);
    assert_eq!(events, vec![(DutKind::Ovs, report.skipped[0].reason.clone())]);
    let duts: Vec<&str> = report.results.iter().map(|r| r.dut.as_str()).collect();
    assert_eq!(duts, vec!["patch"]);
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["skipped"][0]["dut"], "ovs");
}

/// `cleanup` stops a daemon a gone run left (found by its pid file, its
/// command line naming the directory) and removes the directory; a pid
/// file naming a process that does not name the directory is not acted on.
#[test]
fn cleanup_stops_what_a_gone_run_left() {
    // Beyond any pid_max: no such process.
    let dir = std::env::temp_dir().join(format!("fs2544-999999999-{}-ovs", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut left =
        std::process::Command::new("sh").args(["-c", "sleep 5; :"]).arg(&dir).spawn().expect("a stand-in daemon");
    // Until the child has exec'd, its command line is this test's: wait for
    // it to name the directory (a loaded machine takes a while).
    let cmdline = format!("/proc/{}/cmdline", left.id());
    let named = dir.to_string_lossy().into_owned();
    for _ in 0..500 {
        if std::fs::read(&cmdline).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&named)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(dir.join("ovsdb-server.pid"), format!("{}\n", left.id())).expect("pid file");
    // Our own process does not name the directory: left alone.
    std::fs::write(dir.join("ovs-vswitchd.pid"), format!("{}\n", std::process::id())).expect("pid file");
    let removed = flowsteer_rfc2544::ovs::cleanup();
    assert!(removed.contains(&dir), "{removed:?}");
    assert!(!dir.exists());
    let status = left.wait().expect("wait");
    assert!(!status.success(), "the stand-in was not stopped: {status}");
}
