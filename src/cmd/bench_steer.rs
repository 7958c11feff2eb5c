//! `flowsteer bench steer`: the steering engine against the pre-RSS design,
//! the hand-off ring alone, and the cost of each stage.
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
//!   table lock is taken per packet, as a global PCB lock was.
//! * `ring`: `flowsteer-ring` between two pinned threads, bursts of 1 and
//!   32, beside `rtrb` and crossbeam's `ArrayQueue` in the same run.
//! * `stage`: ns per packet for each stage alone on one core (generate,
//!   parse, hash, steer, flow table).

use crate::cli::BenchSteerArgs;
use anyhow::Result;
use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::runtime::{run as run_engine, RunOptions};
use flowsteer_engine::source::{GenSource, RxSource};
use flowsteer_flow::{FlowKey, FlowTable, FlowTableConfig};
use flowsteer_gen::{GenConfig, Spread};
use flowsteer_rss::{Fields, RssConfig};
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::steer::{BucketMap, Policy, QueueView, SharedTables, Steerer};
use flowsteer_steer::WorkerId;
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use serde::Serialize;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
struct Row {
    design: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dispatch: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flows: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    burst: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'static str>,
    mpps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    mpps_per_core: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ns_per_packet: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_shared_queue: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_shared_queue_classic: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    order_violations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mpps_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mpps_max: Option<f64>,
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

pub fn run(args: &BenchSteerArgs) -> Result<i32> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) || args.reps == 0 {
        anyhow::bail!("--seconds must be positive and --reps at least 1");
    }
    let cpus = flowsteer_live::available_cpus();
    let mut rows = Vec::new();
    for &flows in &args.flows {
        if flows == 0 {
            anyhow::bail!("--flows: counts must be at least 1");
        }
        for workers in [1usize, 2] {
            if workers > cpus.len() {
                continue;
            }
            // Two shapes of the baseline: the classic one packet per lock
            // (IF_DEQUEUE) and a batched one, 32 per lock (the stronger).
            let mut baselines = Vec::new();
            for burst in [1usize, 32] {
                let (m, lo, hi) =
                    median((0..args.reps).map(|_| shared_queue(flows, workers, args.seconds, burst)).collect());
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
        for r in flowsteer_ring::bench::run(args.ring_items, burst, pc, cc) {
            let mut row = Row::new("ring", r.mitems_per_s);
            row.stage = Some(r.design);
            row.burst = Some(r.burst);
            row.placement = Some(r.placement.clone());
            rows.push(row);
        }
    }
    // Hostile traffic: 100,000 tuples whose Toeplitz hashes collide in the
    // low 16 bits against 100,000 random ones, through the keyed flow table.
    let (random_ns, colliding_ns) = flowsteer_flow::bench::collision_bench(100_000);
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
    if args.json {
        let doc = serde_json::json!({"schema": "flowsteer.bench.steer.v1", "cpu": crate::cmd::bench::cpu_model(), "results": rows});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_text(&rows, args.seconds);
    }
    Ok(0)
}

/// (median, min, max) of the samples.
fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    match (v.first(), v.last()) {
        (Some(&lo), Some(&hi)) => (v[v.len() / 2], lo, hi),
        _ => (0.0, 0.0, 0.0),
    }
}

fn print_text(rows: &[Row], seconds: f64) {
    println!(
        "engine: 64-byte frames from the built-in generator, rss steering, {seconds:.1} s per case; cpu: {}",
        crate::cmd::bench::cpu_model()
    );
    println!(
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
    );
    for r in rows.iter().filter(|r| r.design == "per-core" || r.design == "shared-queue") {
        println!(
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
        );
    }
    println!();
    println!("{:<22} {:>6} {:>14}  placement", "ring", "burst", "M items/s");
    for r in rows.iter().filter(|r| r.design == "ring") {
        println!(
            "{:<22} {:>6} {:>14.1}  {}",
            r.stage.unwrap_or("-"),
            r.burst.unwrap_or(0),
            r.mpps,
            r.placement.as_deref().unwrap_or("")
        );
    }
    println!();
    for r in rows.iter().filter(|r| r.design == "flow-table") {
        println!(
            "flow table, 100,000 {} tuples: {:.1} ns per lookup/insert",
            r.stage.unwrap_or("-"),
            r.ns_per_packet.unwrap_or(0.0)
        );
    }
    println!();
    println!("{:<12} {:>12}", "stage", "ns/packet");
    for r in rows.iter().filter(|r| r.design == "stage") {
        println!("{:<12} {:>12.2}", r.stage.unwrap_or("-"), r.ns_per_packet.unwrap_or(0.0));
    }
}

fn gen_cfg(flows: u32) -> GenConfig {
    GenConfig { flows, ipv6_share: 0.25, tcp_share: 0.5, ..GenConfig::default() }
}

/// The engine, one receive queue per worker, pinned.
fn per_core(flows: u32, cpus: &[u32], dispatch: Dispatch, seconds: f64) -> Result<(f64, u64)> {
    let n = cpus.len();
    let rss = RssConfig::default_for_queues(n).map_err(anyhow::Error::msg)?;
    let spread = || if n == 1 { Spread::Single } else { Spread::Rss { queues: n as u16, config: rss.clone() } };
    let sources = (0..n)
        .map(|_| GenSource::new(&gen_cfg(flows), spread(), 32).map(|s| Box::new(s) as Box<dyn RxSource>))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let mut cfg = EngineConfig::new(cpus.to_vec(), rss);
    cfg.dispatch = dispatch;
    cfg.policy = Policy::Rss;
    cfg.tracked_flows = flows as usize;
    cfg.flow_table =
        FlowTableConfig { capacity: (flows as usize).next_power_of_two().max(1024), ..FlowTableConfig::default() };
    let engine = Engine::build(cfg, sources).map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = RunOptions { duration: Some(Duration::from_secs_f64(seconds)), pin: true, ..RunOptions::default() };
    let report = run_engine(engine, &opts, |_| {});
    if !report.snapshot.conservation_ok {
        anyhow::bail!("bench run failed conservation: {:?}", report.snapshot.totals);
    }
    Ok((report.snapshot.totals.pps / 1e6, report.snapshot.totals.order_violations))
}

/// The pre-RSS design: one locked receive queue, one locked flow table.
fn shared_queue(flows: u32, workers: usize, seconds: f64, burst: usize) -> f64 {
    struct Shared {
        gen: GenSource,
        queue: std::collections::VecDeque<Vec<u8>>,
    }
    let Ok(gen) = GenSource::new(&gen_cfg(flows), Spread::Single, 32) else { return 0.0 };
    let shared = Arc::new(Mutex::new(Shared { gen, queue: std::collections::VecDeque::with_capacity(1024) }));
    let cap = (flows as usize).next_power_of_two().max(1024);
    let Ok(table) = FlowTable::<u64>::new(FlowTableConfig { capacity: cap, ..FlowTableConfig::default() }) else {
        return 0.0;
    };
    let table = Arc::new(Mutex::new(table));
    let rss = RssConfig::default_for_queues(1).ok();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let cpus = flowsteer_live::available_cpus();
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let (shared, table, rss) = (shared.clone(), table.clone(), rss.clone());
            let cpu = cpus.get(i).copied().unwrap_or(0);
            std::thread::spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize });
                let Some(rss) = rss else { return 0u64 };
                let opts = ParseOptions::default();
                let mut local: Vec<Vec<u8>> = Vec::with_capacity(32);
                let mut done = 0u64;
                let mut spare: Vec<Vec<u8>> = Vec::new();
                while Instant::now() < deadline {
                    for _ in 0..64 {
                        {
                            let Ok(mut s) = shared.lock() else { return done };
                            if s.queue.len() < 32 {
                                // Poll the one receive queue (under the lock).
                                let Shared { gen, queue } = &mut *s;
                                gen.poll(flowsteer_rss::QueueId(0), 32, &mut |b| {
                                    let mut v = spare.pop().unwrap_or_default();
                                    v.clear();
                                    v.extend_from_slice(b);
                                    queue.push_back(v);
                                });
                            }
                            for _ in 0..burst {
                                match s.queue.pop_front() {
                                    Some(f) => local.push(f),
                                    None => break,
                                }
                            }
                        }
                        for f in local.drain(..) {
                            if let Ok(p) = parse_frame(&f, LinkType::Ethernet, &opts) {
                                if let Some(l3) = p.outer {
                                    let input = rss.input_for(&l3.tuple, l3.frag.is_some());
                                    let h = if input.fields() == Fields::None {
                                        0
                                    } else {
                                        rss.hasher().hash(input.as_bytes())
                                    };
                                    let key = FlowKey::from(l3.tuple);
                                    if let Ok(mut t) = table.lock() {
                                        if let Ok((_, v)) = t.lookup_or_insert(&key, done, || 0) {
                                            *v += u64::from(h & 1) + 1;
                                        }
                                    }
                                }
                            }
                            done += 1;
                            spare.push(f);
                        }
                    }
                }
                done
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    total as f64 / start.elapsed().as_secs_f64() / 1e6
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
