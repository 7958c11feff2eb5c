//! The runtime against a scripted live source (no OS): a source that
//! fails stops the run with its reason; an idle source is waited on, not
//! spun on, unless busy polling is asked for; a source's counts from
//! before the engine join the final snapshot's conservation sum.

use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::runtime::{run, RunOptions, RunReport};
use flowsteer_engine::source::RxSource;
use flowsteer_engine::{Ingress, SocketDrops};
use flowsteer_rss::{QueueId, RssConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the test reads back after the run consumed the sources.
#[derive(Default)]
struct Probe {
    waits: AtomicU64,
    closed: AtomicBool,
    delivered: AtomicU64,
}

/// Hands out `frames` frames, then nothing; fails once `fail` is raised;
/// reports `extra_seen` more frames seen than it placed.
struct Scripted {
    frames: u64,
    fail: Arc<AtomicBool>,
    extra_seen: u64,
    probe: Arc<Probe>,
}

impl RxSource for Scripted {
    fn poll(&mut self, _q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.frames.min(max as u64);
        for _ in 0..n {
            sink(&[0u8; 60]);
        }
        self.frames -= n;
        self.probe.delivered.fetch_add(n, Ordering::Relaxed);
        n as usize
    }

    fn exhausted(&self, _q: QueueId) -> bool {
        false
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        self.probe.waits.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(timeout);
        true
    }

    fn failure(&self) -> Option<String> {
        self.fail.load(Ordering::Relaxed).then(|| "interface test0 is gone".to_string())
    }

    fn close(&mut self) -> Duration {
        self.probe.closed.store(true, Ordering::Relaxed);
        Duration::from_millis(5)
    }

    fn ingress(&mut self) -> Option<Ingress> {
        let delivered = self.probe.delivered.load(Ordering::Relaxed);
        let dropped = 3;
        Some(Ingress {
            seen: delivered + dropped + 2 + self.extra_seen,
            passed: 2,
            redirected: delivered + dropped + self.extra_seen,
            delivered,
            socket_drops: SocketDrops { ring_full: dropped, ..SocketDrops::default() },
            ..Ingress::default()
        })
    }
}

fn engine(source: Scripted) -> Engine {
    let mut cfg = EngineConfig::new(vec![0], RssConfig::default_for_queues(1).unwrap());
    cfg.rx_queues = 1;
    cfg.order_stamps = false;
    Engine::build(cfg, vec![Box::new(source) as Box<dyn RxSource>]).unwrap()
}

fn scripted(frames: u64, extra_seen: u64) -> (Scripted, Arc<AtomicBool>, Arc<Probe>) {
    let fail = Arc::new(AtomicBool::new(false));
    let probe = Arc::new(Probe::default());
    (Scripted { frames, fail: fail.clone(), extra_seen, probe: probe.clone() }, fail, probe)
}

fn run_for(source: Scripted, duration: Duration, busy_poll: bool) -> RunReport {
    let opts = RunOptions { duration: Some(duration), busy_poll, ..RunOptions::default() };
    run(engine(source), &opts, |_| {})
}

#[test]
fn a_failed_source_stops_the_run_with_its_reason_and_final_counters() {
    let (source, fail, probe) = scripted(500, 0);
    let raise = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        fail.store(true, Ordering::Relaxed);
    });
    let t = Instant::now();
    let report = run_for(source, Duration::from_secs(60), false);
    raise.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "the run went on after its source failed");
    assert_eq!(report.source_error.as_deref(), Some("interface test0 is gone"));
    assert_eq!(report.snapshot.totals.received, 500);
    assert!(report.snapshot.conservation_ok, "{}", report.snapshot.conservation);
    assert!(probe.closed.load(Ordering::Relaxed), "the source was not closed");
}

#[test]
fn an_idle_source_is_waited_on_unless_busy_polling() {
    let (source, _, probe) = scripted(0, 0);
    let report = run_for(source, Duration::from_millis(300), false);
    assert!(report.source_error.is_none());
    assert!(probe.waits.load(Ordering::Relaxed) > 0, "an idle core never waited in its source");
    let (source, _, probe) = scripted(0, 0);
    run_for(source, Duration::from_millis(300), true);
    assert_eq!(probe.waits.load(Ordering::Relaxed), 0, "--busy-poll waited");
}

#[test]
fn the_ingress_sum_joins_the_final_snapshot() {
    let (source, _, _) = scripted(1000, 0);
    let report = run_for(source, Duration::from_millis(300), false);
    let s = &report.snapshot;
    let i = s.ingress.expect("a live source's counts in the final snapshot");
    assert_eq!((i.delivered, i.seen, i.passed), (1000, 1005, 2));
    assert!(s.conservation_ok, "{}", s.conservation);
    assert!(s.conservation.contains("seen 1005 = passed 2 + hook dropped 0 + redirected 1003"), "{}", s.conservation);
    let doc = serde_json::to_value(&report).unwrap();
    assert_eq!(doc["ingress"]["socket_drops"]["ring_full"], 3);
    assert!(doc["conservation"].as_str().unwrap().starts_with("received 1000"));
}

#[test]
fn a_frame_the_source_cannot_place_fails_conservation() {
    let (source, _, _) = scripted(1000, 1);
    let report = run_for(source, Duration::from_millis(300), false);
    assert!(!report.snapshot.conservation_ok, "{}", report.snapshot.conservation);
}
