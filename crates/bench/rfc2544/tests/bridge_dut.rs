//! Live: the flowsteer bridge as a device under test (AF_XDP and AF_PACKET
//! ports), through the generator and receiver and through a CI-sized
//! sweep. Root only (network namespaces, AF_XDP); skipped with a printed
//! reason otherwise. Traffic stays inside the namespaces the tests create.

use std::time::Duration;

use flowsteer_rfc2544::dut::{leftovers, DutKind, Topology};
use flowsteer_rfc2544::frames::FrameSize;
use flowsteer_rfc2544::live::{LiveConfig, LiveRunner};
use flowsteer_rfc2544::sweep::{self, SweepConfig};

fn skip() -> bool {
    match flowsteer_netns::skip_reason() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

fn mine(names: &[String]) -> Vec<String> {
    let pid = format!("fs2544-{}-", std::process::id());
    names.iter().filter(|n| n.starts_with(&pid)).cloned().collect()
}

/// An XDP program is attached to `dev` in namespace `ns`.
fn has_xdp(ns: &str, dev: &str) -> bool {
    let out = std::process::Command::new("ip").args(["-n", ns, "link", "show", "dev", dev]).output().expect("ip");
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

/// Every frame sent at a low rate is forwarded by the bridge, once, and the
/// bridge counts every one; stopping it detaches its XDP programs.
fn bridge_forwards_every_frame(dut: DutKind) {
    let cpus: Vec<usize> = flowsteer_live::available_cpus().into_iter().map(|c| c as usize).take(1).collect();
    let mut topo = Topology::start(dut, &cpus, false).expect("topology");
    let names = topo.namespaces().to_vec();
    let ns = topo.dut_ns().expect("a DUT namespace").to_string();
    assert_eq!(has_xdp(&ns, "dut0"), dut == DutKind::FlowsteerBridge);
    let mut c = LiveConfig::new(FrameSize::Fixed(64));
    c.wait = Duration::from_millis(200);
    c.learning = Duration::from_millis(50);
    let before = topo.bridge_stats().expect("bridge stats");
    {
        let mut runner = LiveRunner::new(&topo.ports(), c, None).expect("runner");
        let (out, d) = runner.trial(20_000.0, Duration::from_millis(300)).expect("trial");
        assert!(out.sent >= 5_000, "{out:?}");
        assert_eq!(out.received, out.sent, "{dut:?}: {d:?}");
        assert_eq!((d.rx.duplicates, d.rx.foreign), (0, 0), "{d:?}");
    }
    let after = topo.bridge_stats().expect("bridge stats");
    let n = flowsteer_rfc2544::bridge::DutCounters::between(&before, &after);
    assert!(n.conservation_ok, "{}", after.conservation);
    assert!(n.forwarded >= 5_000 && n.transmitted >= n.forwarded, "{n:?}");
    assert_eq!(n.received, n.forwarded + n.flooded + n.dropped.values().sum::<u64>(), "{n:?}");
    let last = topo.stop_bridge().expect("final counters");
    assert!(last.conservation_ok, "{}", last.conservation);
    assert!(!has_xdp(&ns, "dut0") && !has_xdp(&ns, "dut1"), "XDP programs left attached");
    assert!(topo.stop_bridge().is_none());
    drop(topo);
    let left = leftovers();
    for n in names {
        assert!(!left.contains(&n), "{n} left behind");
    }
}

#[test]
fn flowsteer_bridge_afxdp_forwards_every_frame() {
    if skip() {
        return;
    }
    bridge_forwards_every_frame(DutKind::FlowsteerBridge);
}

#[test]
fn flowsteer_bridge_afpacket_forwards_every_frame() {
    if skip() {
        return;
    }
    bridge_forwards_every_frame(DutKind::FlowsteerBridgeAfpacket);
}

/// `--dut flowsteer-bridge --sizes 64` in CI size: a valid result, the
/// bridge's own counts on every trial, nothing left behind.
#[test]
fn ci_sized_sweep_of_the_flowsteer_bridge() {
    if skip() {
        return;
    }
    let mut cfg = SweepConfig::new(vec![DutKind::FlowsteerBridge]);
    cfg.sizes = vec![FrameSize::Fixed(64)];
    cfg.trial = Duration::from_millis(300);
    cfg.short_trial = Duration::from_millis(200);
    cfg.wait = Duration::from_millis(200);
    cfg.learning = Duration::from_millis(50);
    cfg.gen_max_trial = Duration::from_millis(300);
    cfg.resolution = 0.1;
    cfg.min_fps = 10_000.0;
    cfg.latency_shares = vec![0.5];
    cfg.cost_rate = Some(20_000.0);
    cfg.dut_cpus = flowsteer_live::available_cpus().into_iter().map(|c| c as usize).take(1).collect();
    let report = sweep::run(&cfg, None, &mut |_| {}).expect("sweep");
    assert!(report.complete);
    assert_eq!(report.results.len(), 1);
    let row = &report.results[0];
    assert_eq!(row.dut, "flowsteer-bridge");
    assert!(!row.trials.is_empty());
    let ndr = row.ndr_fps.expect("an NDR above the floor");
    for t in &row.trials {
        let c = t.dut_counters.as_ref().expect("the bridge's counts");
        assert!(c.conservation_ok, "{c:?}");
        let t = &t.record;
        assert!(c.received >= t.received, "{c:?} {}", t.received);
        if t.offered_fps <= ndr {
            assert!(t.valid && t.received == t.sent, "trial at {} below NDR {ndr}", t.offered_fps);
        }
    }
    let cost = row.cost_dut_counters.as_ref().expect("the cost trial's counts");
    assert!(cost.forwarded > 0, "{cost:?}");
    assert!(row.cpu_ns_per_frame.is_some_and(f64::is_finite));
    assert!(mine(&leftovers()).is_empty(), "{:?}", leftovers());
    let json = serde_json::to_value(&report).expect("json");
    assert!(json["results"][0]["trials"][0]["dut_counters"]["forwarded"].is_u64());
}
