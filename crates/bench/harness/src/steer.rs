//! The steering engine against the pre-RSS design, the hand-off ring
//! alone, and the cost of each stage (`flowsteer bench steer`).
//!
//! * `per-core`: the engine (`flowsteer run`'s code) with 64-byte frames from
//!   the built-in generator, RSS steering, one pinned thread per worker that
//!   polls its own receive queue; for 1, 1,000 and 1,000,000 flows, 1 and 2
//!   workers, each dispatch policy. The generator runs inside the measured
//!   loop (it is the "NIC"), so the numbers include producing the packets.
//! * `shared-queue`: the baseline before RSS: one receive queue behind a
//!   lock, which every worker polls, and one flow table behind a lock shared
//!   by all workers (flows are not affine to workers), in two shapes: the
//!   classic one packet per queue lock (`burst` 1, like `IF_DEQUEUE`) and a
//!   batched one, 32 per lock (`burst` 32, the stronger baseline). The flow
//!   table lock is taken per packet, as a global PCB lock was
//!   ([`shared_queue`]).
//! * `ring`: `flowsteer-ring` between two pinned threads, bursts of 1 and
//!   32, beside `rtrb` and crossbeam's `ArrayQueue` in the same run
//!   ([`crate::ring`]).
//! * `flow-table`: the flow table under random and colliding keys
//!   ([`crate::flow`]).
//! * `stage`: ns per packet for each stage alone on one core (generate,
//!   parse, hash, steer, flow table).

use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::runtime::{run as run_engine, RunOptions};
use flowsteer_engine::source::{GenSource, RxSource};
use flowsteer_flow::{FlowKey, FlowTable, FlowTableConfig};
use flowsteer_gen::{GenConfig, Spread};
use flowsteer_rss::RssConfig;
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::steer::{BucketMap, Policy, QueueView, SharedTables, Steerer};
use flowsteer_steer::WorkerId;
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use serde::Serialize;
use std::fmt::Write;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod shared_queue;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seconds per engine measurement.
    pub seconds: f64,
    /// Flow counts of the engine cases.
    pub flows: Vec<u32>,
    /// Repetitions per engine case (median, min and max reported).
    pub reps: usize,
    /// Items moved through the ring in the ring-alone measurement.
    pub ring_items: u64,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--seconds must be positive and --reps at least 1")]
    Timing,
    #[error("--flows: counts must be at least 1")]
    ZeroFlows,
    /// The engine or its generator could not be built.
    #[error("{0}")]
    Setup(String),
    /// The engine lost or invented packets (its totals, debug-printed).
    #[error("bench run failed conservation: {0}")]
    Conservation(String),
}

/// One result; which fields are set depends on `design`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// "per-core", "shared-queue", "ring", "flow-table" or "stage".
    pub design: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<usize>,
    /// The stage, the ring design or the key set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<&'static str>,
    /// Million packets (ring: items) per second.
    pub mpps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpps_per_core: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_packet: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_shared_queue: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_shared_queue_classic: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_violations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpps_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpps_max: Option<f64>,
}

impl Row {
    fn new(design: &'static str, mpps: f64) -> Row {
        Row {
            design,
            dispatch: None,
            flows: None,
            workers: None,
            burst: None,
            stage: None,
            mpps,
            mpps_per_core: None,
            ns_per_packet: None,
            ratio_to_shared_queue: None,
            ratio_to_shared_queue_classic: None,
            placement: None,
            order_violations: None,
            mpps_min: None,
            mpps_max: None,
        }
    }
}

/// A run's rows and what they were measured with.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub rows: Vec<Row>,
}

/// Runs every case: the engine and the baseline for each flow count and 1
/// and 2 workers (as many as there are CPUs), the ring, the flow table,
/// the stages.
pub fn run(args: &Config) -> Result<Report, Error> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) || args.reps == 0 {
        return Err(Error::Timing);
    }
    let cpus = flowsteer_live::available_cpus();
    let mut rows = Vec::new();
    for &flows in &args.flows {
        if flows == 0 {
            return Err(Error::ZeroFlows);
        }
        for workers in [1usize, 2] {
            if workers > cpus.len() {
                continue;
            }
            // Two shapes of the baseline: the classic one packet per lock
            // (IF_DEQUEUE) and a batched one, 32 per lock (the stronger).
            let mut baselines = Vec::new();
            for burst in [1usize, 32] {
                let (m, lo, hi) = median(
                    (0..args.reps).map(|_| shared_queue::run(&gen_cfg(flows), workers, args.seconds, burst)).collect(),
                );
                let mut b = Row::new("shared-queue", m);
                b.flows = Some(flows);
                b.workers = Some(workers);
                b.burst = Some(burst);
                b.mpps_per_core = Some(m / workers as f64);
                b.mpps_min = Some(lo);
                b.mpps_max = Some(hi);
                baselines.push(b);
            }
            let baseline = baselines[1].mpps;
            let classic = baselines[0].mpps;
            for dispatch in [Dispatch::Direct, Dispatch::Deferred, Dispatch::Hybrid] {
                let mut runs = Vec::new();
                let mut viol = 0;
                for _ in 0..args.reps {
                    let (m, v) = per_core(flows, &cpus[..workers], dispatch, args.seconds)?;
                    runs.push(m);
                    viol += v;
                }
                let (mpps, min, max) = median(runs);
                let mut r = Row::new("per-core", mpps);
                r.mpps_min = Some(min);
                r.mpps_max = Some(max);
                r.dispatch = Some(dispatch.name());
                r.flows = Some(flows);
                r.workers = Some(workers);
                r.burst = Some(32);
                r.mpps_per_core = Some(mpps / workers as f64);
                r.ratio_to_shared_queue = Some(mpps / baseline.max(1e-9));
                r.ratio_to_shared_queue_classic = Some(mpps / classic.max(1e-9));
                r.order_violations = Some(viol);
                rows.push(r);
            }
            rows.extend(baselines);
        }
    }
    let (pc, cc) = if cpus.len() >= 2 { (Some(cpus[0] as usize), Some(cpus[1] as usize)) } else { (None, None) };
    for burst in [1usize, 32] {
        for r in crate::ring::run(args.ring_items, burst, pc, cc) {
            let mut row = Row::new("ring", r.mitems_per_s);
            row.stage = Some(r.design);
            row.burst = Some(r.burst);
            row.placement = Some(r.placement.clone());
            rows.push(row);
        }
    }
    // Hostile traffic: 100,000 tuples whose Toeplitz hashes collide in the
    // low 16 bits against 100,000 random ones, through the keyed flow table.
    let (random_ns, colliding_ns) = crate::flow::collision_bench(100_000);
    for (name, ns) in [("random", random_ns), ("colliding", colliding_ns)] {
        let mut r = Row::new("flow-table", 1e3 / ns);
        r.stage = Some(name);
        r.flows = Some(100_000);
        r.ns_per_packet = Some(ns);
        rows.push(r);
    }
    for (stage, ns) in stages(1000) {
        let mut r = Row::new("stage", 1e3 / ns);
        r.stage = Some(stage);
        r.flows = Some(1000);
        r.ns_per_packet = Some(ns);
        rows.push(r);
    }
    Ok(Report { config: args.clone(), rows })
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.steer.v1`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"schema": "flowsteer.bench.steer.v1", "cpu": crate::cpu_model(), "results": self.rows})
    }

    /// The text tables: engine and baseline, ring, flow table, stages.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = write_text(&mut s, &self.rows, self.config.seconds);
        s
    }
}

/// (median, min, max) of the samples.
pub(crate) fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    match (v.first(), v.last()) {
        (Some(&lo), Some(&hi)) => (v[v.len() / 2], lo, hi),
        _ => (0.0, 0.0, 0.0),
    }
}

fn write_text(out: &mut String, rows: &[Row], seconds: f64) -> std::fmt::Result {
    writeln!(
        out,
        "engine: 64-byte frames from the built-in generator, rss steering, {seconds:.1} s per case; cpu: {}",
        crate::cpu_model()
    )?;
    writeln!(
        out,
        "{:<13} {:<9} {:>5} {:>8} {:>7} {:>9} {:>15} {:>10} {:>9} {:>9} {:>9}",
        "design",
        "dispatch",
        "burst",
        "flows",
        "workers",
        "Mpps",
        "(min-max)",
        "Mpps/core",
        "x sq-32",
        "x sq-1",
        "reorder"
    )?;
    for r in rows.iter().filter(|r| r.design == "per-core" || r.design == "shared-queue") {
        writeln!(
            out,
            "{:<13} {:<9} {:>5} {:>8} {:>7} {:>9.2} {:>15} {:>10.2} {:>9} {:>9} {:>9}",
            r.design,
            r.dispatch.unwrap_or("-"),
            r.burst.unwrap_or(0),
            r.flows.unwrap_or(0),
            r.workers.unwrap_or(0),
            r.mpps,
            format!("({:.2}-{:.2})", r.mpps_min.unwrap_or(0.0), r.mpps_max.unwrap_or(0.0)),
            r.mpps_per_core.unwrap_or(0.0),
            r.ratio_to_shared_queue.map_or("-".into(), |x| format!("{x:.2}")),
            r.ratio_to_shared_queue_classic.map_or("-".into(), |x| format!("{x:.2}")),
            r.order_violations.map_or("-".into(), |v| v.to_string())
        )?;
    }
    writeln!(out)?;
    writeln!(out, "{:<22} {:>6} {:>14}  placement", "ring", "burst", "M items/s")?;
    for r in rows.iter().filter(|r| r.design == "ring") {
        writeln!(
            out,
            "{:<22} {:>6} {:>14.1}  {}",
            r.stage.unwrap_or("-"),
            r.burst.unwrap_or(0),
            r.mpps,
            r.placement.as_deref().unwrap_or("")
        )?;
    }
    writeln!(out)?;
    for r in rows.iter().filter(|r| r.design == "flow-table") {
        writeln!(
            out,
            "flow table, 100,000 {} tuples: {:.1} ns per lookup/insert",
            r.stage.unwrap_or("-"),
            r.ns_per_packet.unwrap_or(0.0)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "{:<12} {:>12}", "stage", "ns/packet")?;
    for r in rows.iter().filter(|r| r.design == "stage") {
        writeln!(out, "{:<12} {:>12.2}", r.stage.unwrap_or("-"), r.ns_per_packet.unwrap_or(0.0))?;
    }
    Ok(())
}

fn gen_cfg(flows: u32) -> GenConfig {
    GenConfig { flows, ipv6_share: 0.25, tcp_share: 0.5, ..GenConfig::default() }
}

/// The engine, one receive queue per worker, pinned.
fn per_core(flows: u32, cpus: &[u32], dispatch: Dispatch, seconds: f64) -> Result<(f64, u64), Error> {
    let n = cpus.len();
    let rss = RssConfig::default_for_queues(n).map_err(|e| Error::Setup(e.to_string()))?;
    let spread = || if n == 1 { Spread::Single } else { Spread::Rss { queues: n as u16, config: rss.clone() } };
    let sources = (0..n)
        .map(|_| GenSource::new(&gen_cfg(flows), spread(), 32).map(|s| Box::new(s) as Box<dyn RxSource>))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Setup(e.to_string()))?;
    let mut cfg = EngineConfig::new(cpus.to_vec(), rss);
    cfg.dispatch = dispatch;
    cfg.policy = Policy::Rss;
    cfg.tracked_flows = flows as usize;
    cfg.flow_table =
        FlowTableConfig { capacity: (flows as usize).next_power_of_two().max(1024), ..FlowTableConfig::default() };
    let engine = Engine::build(cfg, sources).map_err(|e| Error::Setup(e.to_string()))?;
    let opts = RunOptions { duration: Some(Duration::from_secs_f64(seconds)), pin: true, ..RunOptions::default() };
    let report = run_engine(engine, &opts, |_| {});
    if !report.snapshot.conservation_ok {
        return Err(Error::Conservation(format!("{:?}", report.snapshot.totals)));
    }
    Ok((report.snapshot.totals.pps / 1e6, report.snapshot.totals.order_violations))
}

struct NoQueues;
impl QueueView for NoQueues {
    fn done(&self, _: WorkerId) -> u64 {
        u64::MAX
    }
}

/// ns per packet of each stage alone, on this thread: 4,096 distinct frames
/// (cache-resident, like a burst pipeline) passed over until 4 M packets.
fn stages(flows: u32) -> Vec<(&'static str, f64)> {
    const SET: usize = 4096;
    const TOTAL: usize = 1 << 22;
    let passes = TOTAL / SET;
    let mut out = Vec::new();
    let Ok(mut gen) = GenSource::new(&gen_cfg(flows), Spread::Single, 32) else { return out };
    let t = Instant::now();
    let mut produced = 0;
    let mut sink_len = 0usize;
    while produced < TOTAL {
        produced += gen.poll(flowsteer_rss::QueueId(0), 32, &mut |b| sink_len += b.len());
    }
    out.push(("generate", t.elapsed().as_nanos() as f64 / produced as f64));
    black_box(sink_len);
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(SET);
    while frames.len() < SET {
        gen.poll(flowsteer_rss::QueueId(0), 32, &mut |b| frames.push(b.to_vec()));
    }
    let opts = ParseOptions::default();
    let mut tuples = Vec::with_capacity(SET);
    let t = Instant::now();
    for _ in 0..passes {
        tuples.clear();
        for f in &frames {
            if let Ok(p) = parse_frame(black_box(f), LinkType::Ethernet, &opts) {
                if let Some(l3) = p.outer {
                    tuples.push((l3.tuple, l3.frag.is_some()));
                }
            }
        }
    }
    out.push(("parse", t.elapsed().as_nanos() as f64 / (passes * frames.len()) as f64));
    let Ok(rss) = RssConfig::default_for_queues(2) else { return out };
    let mut hashes = Vec::with_capacity(SET);
    let t = Instant::now();
    for _ in 0..passes {
        hashes.clear();
        for (tuple, frag) in &tuples {
            let input = rss.input_for(black_box(tuple), *frag);
            hashes.push(rss.hasher().hash(input.as_bytes()));
        }
    }
    out.push(("hash", t.elapsed().as_nanos() as f64 / (passes * tuples.len()).max(1) as f64));
    let shared = SharedTables { buckets: Arc::new(BucketMap::round_robin(128, 2)), sock: None };
    let mut steerer = Steerer::new(Policy::Rss, WorkerId(0), Vec::new(), shared, 0);
    let t = Instant::now();
    let mut acc = 0u32;
    for _ in 0..passes {
        for h in &hashes {
            acc = acc.wrapping_add(u32::from(steerer.target(black_box(*h), &NoQueues).0 .0));
        }
    }
    black_box(acc);
    out.push(("steer", t.elapsed().as_nanos() as f64 / (passes * hashes.len()).max(1) as f64));
    let cap = (flows as usize).next_power_of_two().max(1024);
    if let Ok(mut table) = FlowTable::<u64>::new(FlowTableConfig { capacity: cap, ..FlowTableConfig::default() }) {
        let keys: Vec<FlowKey> = tuples.iter().map(|(t, _)| FlowKey::from(*t)).collect();
        let t = Instant::now();
        let mut now = 0u64;
        for _ in 0..passes {
            for k in &keys {
                now += 1;
                if let Ok((_, v)) = table.lookup_or_insert(black_box(k), now, || 0) {
                    *v += 1;
                }
            }
        }
        out.push(("flow-table", t.elapsed().as_nanos() as f64 / (passes * keys.len()).max(1) as f64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seconds: f64, flows: Vec<u32>, reps: usize) -> Config {
        Config { seconds, flows, reps, ring_items: 1000 }
    }

    #[test]
    fn refuses_bad_values() {
        let e = |c: Config| run(&c).expect_err("a bad config").to_string();
        assert_eq!(e(cfg(0.0, vec![1], 1)), "--seconds must be positive and --reps at least 1");
        assert_eq!(e(cfg(0.1, vec![1], 0)), "--seconds must be positive and --reps at least 1");
        assert_eq!(e(cfg(0.1, vec![0], 1)), "--flows: counts must be at least 1");
    }

    /// The text tables pick their rows by design, under their headers.
    #[test]
    fn text_has_one_table_per_design() {
        let mut ring = Row::new("ring", 300.0);
        ring.stage = Some("flowsteer-ring");
        ring.burst = Some(32);
        ring.placement = Some("producer cpu0, consumer cpu1".into());
        let mut stage = Row::new("stage", 100.0);
        stage.stage = Some("parse");
        stage.ns_per_packet = Some(10.0);
        let report = Report { config: cfg(1.0, vec![1], 1), rows: vec![ring, stage] };
        let text = report.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0]
            .starts_with("engine: 64-byte frames from the built-in generator, rss steering, 1.0 s per case; cpu: "));
        assert!(lines[1].starts_with("design        dispatch  burst    flows workers"), "{}", lines[1]);
        assert_eq!(lines[2], "");
        assert_eq!(lines[3], "ring                    burst      M items/s  placement");
        assert_eq!(lines[4], "flowsteer-ring             32          300.0  producer cpu0, consumer cpu1");
        assert_eq!(&lines[5..], ["", "", "stage           ns/packet", "parse               10.00"]);
        assert_eq!(report.json()["results"][1]["stage"], "parse");
    }
}
