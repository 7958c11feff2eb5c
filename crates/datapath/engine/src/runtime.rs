//! The threaded runtime: one thread per worker core, pinned to its CPU,
//! polling its receive queues and its input queues in a loop; the calling
//! thread is the control thread (interval reports, rebalancing, consumer
//! migration, stop).
//!
//! Stop protocol: the control thread raises `stop_rx`; each core stops
//! receiving, flushes its staged bursts and counts itself in `rx_done`
//! (Release). A core exits when every core is done receiving (Acquire) and
//! its own input queues are empty, so every packet that was queued is
//! processed before the final counters are read: in flight is zero at the
//! end and conservation is exact.
//!
//! A source that fails (its interface is gone) raises the stop for every
//! core; the report carries its one-line reason in `source_error`. After
//! the cores stopped, live sources are closed (no frame taken in any more)
//! and their counts from before the engine are added to the final snapshot.
//!
//! Idle: a core that found nothing to do 64 times in a row yields, then
//! (unless `busy_poll`) sleeps in its source's `wait` for at most
//! [`IDLE_WAIT`], so an idle live source does not spin a CPU.

use crate::counters::{LcoreCounters, Snapshot};
use crate::engine::Engine;
use crate::ingress::Ingress;
use flowsteer_steer::rebalance::{plan_moves, Move, RebalanceConfig};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long and how to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub duration: Option<Duration>,
    /// Stop after this many received packets (all queues together).
    pub packets: Option<u64>,
    /// Report every interval.
    pub interval: Option<Duration>,
    pub rebalance: Option<RebalanceConfig>,
    pub rebalance_interval: Option<Duration>,
    /// Move every flow's consumer to the next core this often (RFS demo).
    pub migrate_every: Option<Duration>,
    /// Pin worker threads to their CPUs.
    pub pin: bool,
    /// Stop when this flag is set (SIGINT/SIGTERM handlers set it).
    pub stop: Option<Arc<AtomicBool>>,
    /// Spin on an idle source instead of sleeping in its `wait`.
    pub busy_poll: bool,
}

/// Longest sleep of an idle core in its source's `wait`: the most a
/// packet handed to an idle core by another core waits for it, and the
/// stop latency of an idle core.
pub const IDLE_WAIT: Duration = Duration::from_millis(1);

/// Idle loop iterations before a core yields (and then waits).
const SPIN_BEFORE_YIELD: u32 = 64;

/// One bucket move, as logged.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MoveLog {
    pub at_s: f64,
    pub bucket: usize,
    pub from: u16,
    pub to: u16,
    pub load: u64,
}

/// What a run returns.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub snapshot: Snapshot,
    pub rebalance_log: Vec<MoveLog>,
    pub migrations: u64,
    /// Per-flow order was checked (generator stamps); false for captures.
    pub order_checked: bool,
    pub warnings: Vec<String>,
    /// Why a source stopped the run (its interface lost), one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_error: Option<String>,
}

/// Run until the duration passes, the packet budget is spent, or every
/// source is exhausted. `on_interval` sees a snapshot every interval.
pub fn run(engine: Engine, opts: &RunOptions, mut on_interval: impl FnMut(&Snapshot)) -> RunReport {
    let Engine { cfg, lcores, shared, consumers, ring_stats, published } = engine;
    let n = lcores.len();
    let stop_rx = Arc::new(AtomicBool::new(false));
    let rx_done = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(AtomicU64::new(opts.packets.unwrap_or(u64::MAX)));
    let pin_failed = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let burst = cfg.burst.max(1);
    let mut handles = Vec::with_capacity(n);
    for (i, mut lc) in lcores.into_iter().enumerate() {
        let (t_stop, t_done, t_budget, t_pin) = (stop_rx.clone(), rx_done.clone(), budget.clone(), pin_failed.clone());
        let t_failed = failed.clone();
        let cpu = cfg.cpus[i];
        let pin = opts.pin;
        let busy_poll = opts.busy_poll;
        let h = std::thread::Builder::new().name(format!("fs-worker-{i}")).spawn(move || {
            if pin && !core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize }) {
                t_pin.fetch_add(1, Ordering::Relaxed);
            }
            let shared = WorkerShared {
                workers: n,
                burst,
                start,
                busy_poll,
                stop_rx: &t_stop,
                rx_done: &t_done,
                budget: &t_budget,
                failed: &t_failed,
            };
            worker_loop(&mut lc, &shared);
            lc
        });
        match h {
            Ok(h) => handles.push(h),
            Err(_) => {
                // Could not start a thread: stop the others and report.
                stop_rx.store(true, Ordering::Relaxed);
            }
        }
    }

    // Control loop.
    let mut next_report = opts.interval.map(|i| start + i);
    let mut next_rebalance =
        opts.rebalance.map(|_| start + opts.rebalance_interval.unwrap_or(Duration::from_millis(100)));
    let mut next_migrate = opts.migrate_every.map(|m| start + m);
    let mut last_buckets: Vec<u64> = vec![0; shared.buckets.len()];
    let mut log = Vec::new();
    let mut migrations = 0;
    loop {
        std::thread::sleep(Duration::from_millis(2));
        let now = Instant::now();
        let finished = rx_done.load(Ordering::Acquire) >= n || handles.iter().all(|h| h.is_finished());
        let stopped = opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) || failed.load(Ordering::Relaxed);
        if opts.duration.is_some_and(|d| now >= start + d) || finished || stopped {
            break;
        }
        if let Some(t) = next_report.filter(|t| now >= *t) {
            let snap =
                Engine::snapshot(&ring_stats, &published, &cfg.cpus, start.elapsed().as_secs_f64(), log.len() as u64);
            on_interval(&snap);
            next_report = opts.interval.map(|i| t + i);
        }
        if let (Some(t), Some(rcfg)) = (next_rebalance.filter(|t| now >= *t), &opts.rebalance) {
            let totals = bucket_totals(&published, last_buckets.len());
            let delta: Vec<u64> = totals.iter().zip(&last_buckets).map(|(a, b)| a.saturating_sub(*b)).collect();
            last_buckets = totals;
            let map = shared.buckets.snapshot();
            for Move { bucket, from, to, load } in plan_moves(&delta, &map, n, rcfg) {
                shared.buckets.set(bucket, to);
                log.push(MoveLog { at_s: start.elapsed().as_secs_f64(), bucket, from: from.0, to: to.0, load });
            }
            next_rebalance = Some(t + opts.rebalance_interval.unwrap_or(Duration::from_millis(100)));
        }
        if let Some(t) = next_migrate.filter(|t| now >= *t) {
            consumers.rotate();
            migrations += 1;
            next_migrate = opts.migrate_every.map(|m| t + m);
        }
    }
    stop_rx.store(true, Ordering::Relaxed);
    let mut warnings = Vec::new();
    let mut lcores = Vec::with_capacity(n);
    for h in handles {
        match h.join() {
            Ok(lc) => lcores.push(lc),
            Err(_) => warnings.push("a worker thread panicked".to_string()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let source_error = lcores.iter().find_map(|lc| lc.source_failure());
    // Close every live source, let frames already on their way land, then
    // read what each counted before the engine.
    let settle = lcores.iter_mut().map(|lc| lc.close_source()).max().unwrap_or_default();
    if !settle.is_zero() {
        std::thread::sleep(settle);
    }
    let mut ingress: Option<Ingress> = None;
    for lc in &mut lcores {
        if let Some(i) = lc.source_ingress() {
            *ingress.get_or_insert_with(Ingress::default) += &i;
        }
    }
    if pin_failed.load(Ordering::Relaxed) > 0 {
        warnings
            .push(format!("{} worker thread(s) could not be pinned to their CPU", pin_failed.load(Ordering::Relaxed)));
    }
    let mut snapshot = Engine::snapshot(&ring_stats, &published, &cfg.cpus, elapsed, log.len() as u64);
    if let Some(i) = ingress {
        snapshot = snapshot.with_ingress(i);
    }
    RunReport { snapshot, rebalance_log: log, migrations, order_checked: cfg.order_stamps, warnings, source_error }
}

/// What every worker thread shares with the others and the control thread.
struct WorkerShared<'a> {
    workers: usize,
    burst: usize,
    start: Instant,
    busy_poll: bool,
    stop_rx: &'a AtomicBool,
    rx_done: &'a AtomicUsize,
    budget: &'a AtomicU64,
    /// Raised by a core whose source failed: the control thread stops the run.
    failed: &'a AtomicBool,
}

fn bucket_totals(published: &[Arc<std::sync::Mutex<LcoreCounters>>], buckets: usize) -> Vec<u64> {
    let mut t = vec![0u64; buckets];
    for p in published {
        if let Ok(c) = p.lock() {
            for (a, b) in t.iter_mut().zip(&c.bucket_packets) {
                *a += b;
            }
        }
    }
    t
}

/// Packets a core claims from a finite budget at a time (fewer atomic
/// operations on the shared counter; the unused rest is returned at stop).
const CLAIM_CHUNK: u64 = 4096;

/// Claim up to `want` packets from the shared budget.
fn claim(budget: &AtomicU64, want: u64) -> u64 {
    let mut cur = budget.load(Ordering::Relaxed);
    loop {
        if cur == 0 {
            return 0;
        }
        let take = cur.min(want);
        match budget.compare_exchange_weak(cur, cur - take, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return take,
            Err(c) => cur = c,
        }
    }
}

fn worker_loop(lc: &mut crate::lcore::Lcore, sh: &WorkerShared<'_>) {
    let WorkerShared { workers, burst, start, busy_poll, stop_rx, rx_done, budget, failed } = *sh;
    let mut rx_active = true;
    // Packets claimed from the shared budget but not yet received. With no
    // budget (u64::MAX) the shared counter is never touched.
    let unlimited = budget.load(Ordering::Relaxed) == u64::MAX;
    let mut credit: u64 = 0;
    let mut iter: u64 = 0;
    let mut now = 0u64;
    let mut idle = 0u32;
    loop {
        if iter.is_multiple_of(16) {
            now = start.elapsed().as_nanos() as u64;
        }
        let mut did = 0;
        if rx_active {
            let stop = stop_rx.load(Ordering::Relaxed) || lc.sources_exhausted();
            if !stop && !unlimited && credit == 0 {
                credit = claim(budget, CLAIM_CHUNK);
            }
            let want = if stop {
                0
            } else if unlimited {
                burst as u64
            } else {
                credit.min(burst as u64)
            };
            if want == 0 {
                rx_active = false;
                if credit > 0 {
                    budget.fetch_add(credit, Ordering::Relaxed);
                    credit = 0;
                }
                // Release: our last pushes happen-before others' Acquire of rx_done.
                rx_done.fetch_add(1, Ordering::Release);
            } else {
                let got = lc.poll_rx(want as usize, now) as u64;
                if !unlimited {
                    credit -= got;
                }
                did += got as usize;
                if got == 0 && lc.source_failure().is_some() {
                    failed.store(true, Ordering::Relaxed);
                }
            }
        }
        did += lc.poll_rings(burst, now);
        iter += 1;
        if iter.is_multiple_of(16) {
            lc.run_timers(now);
        }
        if !rx_active && did == 0 && rx_done.load(Ordering::Acquire) >= workers && lc.pending() == 0 {
            break;
        }
        if did == 0 {
            idle += 1;
            if idle <= SPIN_BEFORE_YIELD {
                std::hint::spin_loop();
            } else if busy_poll || !rx_active || !lc.wait_rx(IDLE_WAIT) {
                std::thread::yield_now();
            }
        } else {
            idle = 0;
        }
    }
    lc.housekeeping(start.elapsed().as_nanos() as u64);
}
