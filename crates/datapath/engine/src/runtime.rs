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
//! end and conservation is exact. As it exits, a core drops what it still
//! holds (fragments waiting for their first one, datagrams not complete),
//! counted by reason as `*_pending_at_end` ([`crate::lcore::Lcore::finish`]),
//! so `received = delivered + dropped` after a run that ended.
//!
//! A source that fails (its interface is gone) raises the stop for every
//! core; the report carries its one-line reason in `source_error`. After
//! the cores stopped, live sources are closed (no frame taken in any more)
//! and their counts from before the engine are added to the final snapshot.
//!
//! Abort: a run whose `abort` flag is raised (a second SIGINT) ends at
//! once: the cores stop without draining their input queues, and what is
//! left in them is counted in flight (conservation still holds).
//!
//! Interval reports: `on_interval` sees a snapshot every interval and, at
//! the end, the final snapshot (the last interval, however short), so the
//! intervals cover the whole run.
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
    /// End at once when this flag is set (a second signal): no drain, the
    /// packets left in the queues counted in flight.
    pub abort: Option<Arc<AtomicBool>>,
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

/// Why a run ended.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `RunOptions::duration` passed.
    Duration,
    /// `RunOptions::packets` were received.
    Packets,
    /// Every source was exhausted (a capture replayed to its end).
    SourcesDone,
    /// The `stop` (or `abort`) flag was raised: SIGINT or SIGTERM.
    Interrupted,
    /// A source failed (`RunReport::source_error` says why).
    SourceFailed,
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
    /// Why the run ended.
    pub stopped_by: StopReason,
    /// The `abort` flag ended the run before the cores drained their
    /// queues (what was left there is in `totals.in_flight`).
    pub aborted: bool,
}

/// Run until the duration passes, the packet budget is spent, or every
/// source is exhausted. With an interval, `on_interval` sees a snapshot
/// every interval and the final one at the end.
pub fn run(engine: Engine, opts: &RunOptions, mut on_interval: impl FnMut(&Snapshot)) -> RunReport {
    let Engine { cfg, lcores, shared, consumers, ring_stats, published } = engine;
    let n = lcores.len();
    let stop_rx = Arc::new(AtomicBool::new(false));
    let rx_done = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(AtomicU64::new(opts.packets.unwrap_or(u64::MAX)));
    let pin_failed = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let abort = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let burst = cfg.burst.max(1);
    let mut handles = Vec::with_capacity(n);
    for (i, mut lc) in lcores.into_iter().enumerate() {
        let (t_stop, t_done, t_budget, t_pin) = (stop_rx.clone(), rx_done.clone(), budget.clone(), pin_failed.clone());
        let (t_failed, t_abort) = (failed.clone(), abort.clone());
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
                abort: &t_abort,
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
    let raised = |f: &Option<Arc<AtomicBool>>| f.as_ref().is_some_and(|s| s.load(Ordering::Relaxed));
    let stopped_by = loop {
        std::thread::sleep(Duration::from_millis(2));
        let now = Instant::now();
        if failed.load(Ordering::Relaxed) {
            break StopReason::SourceFailed;
        }
        if raised(&opts.stop) || raised(&opts.abort) {
            break StopReason::Interrupted;
        }
        if rx_done.load(Ordering::Acquire) >= n || handles.iter().all(|h| h.is_finished()) {
            break if budget.load(Ordering::Relaxed) == 0 { StopReason::Packets } else { StopReason::SourcesDone };
        }
        if opts.duration.is_some_and(|d| now >= start + d) {
            break StopReason::Duration;
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
    };
    stop_rx.store(true, Ordering::Relaxed);
    // A second signal while the cores drain ends them at once.
    if let Some(flag) = opts.abort.clone() {
        while !handles.iter().all(|h| h.is_finished()) {
            if flag.load(Ordering::Relaxed) {
                abort.store(true, Ordering::Relaxed);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
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
    let aborted = abort.load(Ordering::Relaxed);
    if !settle.is_zero() && !aborted {
        std::thread::sleep(settle);
    }
    let mut ingress: Option<Ingress> = None;
    for lc in &mut lcores {
        if let Some(i) = lc.source_ingress() {
            *ingress.get_or_insert_with(Ingress::default) += &i;
        }
    }
    if pin_failed.load(Ordering::Relaxed) > 0 {
        warnings.push(pinned_warning(pin_failed.load(Ordering::Relaxed)));
    }
    let mut snapshot = Engine::snapshot(&ring_stats, &published, &cfg.cpus, elapsed, log.len() as u64);
    if let Some(i) = ingress {
        snapshot = snapshot.with_ingress(i);
    }
    if opts.interval.is_some() {
        on_interval(&snapshot);
    }
    RunReport {
        snapshot,
        rebalance_log: log,
        migrations,
        order_checked: cfg.order_stamps,
        warnings,
        source_error,
        stopped_by,
        aborted,
    }
}

/// The warning for `n` worker threads left unpinned.
fn pinned_warning(n: usize) -> String {
    if n == 1 {
        "1 worker thread could not be pinned to its CPU".to_string()
    } else {
        format!("{n} worker threads could not be pinned to their CPUs")
    }
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
    /// Raised by the control thread to end the cores at once (no drain).
    abort: &'a AtomicBool,
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
    let WorkerShared { workers, burst, start, busy_poll, stop_rx, rx_done, budget, failed, abort } = *sh;
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
        if !rx_active && abort.load(Ordering::Relaxed) {
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
    lc.finish(start.elapsed().as_nanos() as u64);
}
