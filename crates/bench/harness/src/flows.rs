//! Throughput against the number of flows (`flowsteer bench flows`): does a
//! million flows go at the speed of a thousand?
//!
//! * `engine`: `flowsteer run`'s engine, one worker pinned to one CPU,
//!   direct dispatch, 64-byte frames (a quarter IPv6, half TCP) cycled from
//!   a ring of pre-built frames ([`RingSource`]): the generator's cost is
//!   kept out of the figure, and measured apart (`source ns`, the ring
//!   handing out frames to a sink that reads them). A uniform mix is
//!   shuffled, so consecutive packets belong to unrelated flows; Zipf
//!   draws are random by nature. Each run first takes one whole pass of
//!   the ring (every flow inserted), then is measured for `seconds` (from
//!   the published counters, every 50 ms). Every run must conserve its
//!   packets and its order check is reported.
//! * `table`: the flow table alone, sized for the flows, over the same
//!   keys in the same order: one pass from empty (`fill`: the first sight of
//!   each flow inserts it) and one more (`steady`: hits), looked up one key
//!   at a time (`scalar`) and in bursts (`burst`,
//!   `FlowTable::lookup_or_insert_burst`).
//! * `dpdk`: with a harness, DPDK's `rte_hash` doing the same work over the
//!   same keys (bulk lookup, add on miss), on the same CPU ([`crate::flow::dpdk`]).

use crate::flow::dpdk;
use crate::steer::median;
use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::ringsource::RingSource;
use flowsteer_engine::runtime::{run as run_engine, RunOptions};
use flowsteer_engine::source::RxSource;
use flowsteer_flow::{FlowKey, FlowTable, FlowTableConfig};
use flowsteer_gen::GenConfig;
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::steer::Policy;
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use serde::Serialize;
use std::fmt::Write;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest warm-up (one pass of the ring) an engine case may take.
const WARMUP_LIMIT_S: f64 = 120.0;

/// How flows are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Every flow equally often.
    Uniform,
    /// Flow `i` weighs `(i + 1)^-s`.
    Zipf(f64),
}

impl Dist {
    /// `uniform` or `zipf:S`.
    pub fn label(&self) -> String {
        match self {
            Dist::Uniform => "uniform".into(),
            Dist::Zipf(s) => format!("zipf:{s}"),
        }
    }

    /// Parses [`Dist::label`]'s forms.
    pub fn parse(s: &str) -> Result<Dist, String> {
        if s == "uniform" {
            return Ok(Dist::Uniform);
        }
        match s.strip_prefix("zipf:").map(str::parse::<f64>) {
            Some(Ok(x)) if x.is_finite() && x >= 0.0 => Ok(Dist::Zipf(x)),
            _ => Err(format!("'{s}' is neither 'uniform' nor 'zipf:S' with a finite S >= 0 (e.g. zipf:1.1)")),
        }
    }
}

/// Which parts run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Engine,
    Table,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Flow counts, `1..=2^24`.
    pub flows: Vec<u32>,
    pub dists: Vec<Dist>,
    /// Seconds per engine run.
    pub seconds: f64,
    /// Repetitions of each case (median, min and max reported).
    pub reps: usize,
    /// Keys per burst of the table's burst mode, `1..=64`.
    pub burst: usize,
    /// The CPU everything runs on (default: the first this process may use).
    pub cpu: Option<u32>,
    /// Only this part (default both).
    pub only: Option<Part>,
    /// DPDK's harness (`bench/dpdk/flowtable-dpdk`) for the `dpdk` rows.
    pub dpdk: Option<PathBuf>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--seconds must be positive and --reps at least 1")]
    Timing,
    #[error("--flows: counts must be 1 to 16777216")]
    Flows,
    #[error("--burst must be 1 to 64")]
    Burst,
    #[error("--cpu {0} is not one this process may run on")]
    Cpu(u32),
    #[error("{0}")]
    Setup(String),
    #[error("bench run failed conservation: {0}")]
    Conservation(String),
    #[error("--dpdk: {0}")]
    Dpdk(#[from] dpdk::DpdkError),
    #[error("--dpdk: cannot write the key file {path}: {err}")]
    KeyFile { path: PathBuf, err: std::io::Error },
}

/// One result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// "engine", "table" or "dpdk".
    pub part: &'static str,
    pub flows: u32,
    pub dist: String,
    /// table: "scalar" or "burst"; dpdk: the variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// table and dpdk: "fill" or "steady".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Million packets (keys) per second, median over the repetitions.
    pub mpps: f64,
    pub mpps_min: f64,
    pub mpps_max: f64,
    pub ns_per_packet: f64,
    /// engine: ns per packet the frame ring itself costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_ns: Option<f64>,
    /// engine: `ns_per_packet - source_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_ns: Option<f64>,
    /// engine: how many times slower than the fewest flows of this
    /// distribution (Mpps there / Mpps here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_violations: Option<u64>,
    /// table: MiB the table reserved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mib: Option<f64>,
}

impl Row {
    fn new(part: &'static str, flows: u32, dist: Dist, samples: Vec<f64>) -> Row {
        let (mpps, mpps_min, mpps_max) = median(samples);
        Row {
            part,
            flows,
            dist: dist.label(),
            mode: None,
            phase: None,
            mpps,
            mpps_min,
            mpps_max,
            ns_per_packet: 1e3 / mpps.max(1e-9),
            source_ns: None,
            engine_ns: None,
            slowdown: None,
            order_violations: None,
            mib: None,
        }
    }
}

/// A run's rows and what they were measured with.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub cpu: u32,
    pub dpdk_version: Option<String>,
    pub rows: Vec<Row>,
}

fn gen_cfg(flows: u32, dist: Dist) -> GenConfig {
    let zipf = match dist {
        Dist::Uniform => None,
        Dist::Zipf(s) => Some(s),
    };
    GenConfig { flows, zipf, ipv6_share: 0.25, tcp_share: 0.5, ..GenConfig::default() }
}

/// Runs every case, calling `progress` with a line before each.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&str)) -> Result<Report, Error> {
    if !(cfg.seconds > 0.0 && cfg.seconds.is_finite()) || cfg.reps == 0 {
        return Err(Error::Timing);
    }
    if cfg.flows.iter().any(|&f| f == 0 || f > 1 << 24) {
        return Err(Error::Flows);
    }
    if !(1..=flowsteer_flow::table::BURST_MAX).contains(&cfg.burst) {
        return Err(Error::Burst);
    }
    let cpus = flowsteer_live::available_cpus();
    let cpu = match cfg.cpu {
        Some(c) if !cpus.contains(&c) => return Err(Error::Cpu(c)),
        Some(c) => c,
        None => cpus.first().copied().unwrap_or(0),
    };
    let mut rows = Vec::new();
    let mut dpdk_version = None;
    for &dist in &cfg.dists {
        let mut first: Option<f64> = None;
        for &flows in &cfg.flows {
            if cfg.only != Some(Part::Table) {
                progress(&format!("engine, {flows} flows, {}", dist.label()));
                let mut r = engine_rows(flows, dist, cpu, cfg)?;
                let base = *first.get_or_insert(r.mpps);
                r.slowdown = Some(base / r.mpps.max(1e-9));
                rows.push(r);
            }
            if cfg.only != Some(Part::Engine) {
                progress(&format!("table, {flows} flows, {}", dist.label()));
                let (table_rows, version) = table_rows(flows, dist, cpu, cfg)?;
                rows.extend(table_rows);
                dpdk_version = dpdk_version.or(version);
            }
        }
    }
    Ok(Report { config: cfg.clone(), cpu, dpdk_version, rows })
}

/// ns per frame of the ring alone: `n` frames handed to a sink that reads
/// their first and last bytes.
fn source_ns(ring: &mut RingSource, n: usize) -> f64 {
    let mut acc = 0u64;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        done += ring.poll(QueueId(0), 32, &mut |b| {
            acc = acc.wrapping_add(u64::from(b[0]) + u64::from(b[b.len() - 1]));
        });
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / done as f64
}

fn engine_rows(flows: u32, dist: Dist, cpu: u32, cfg: &Config) -> Result<Row, Error> {
    let mut mpps = Vec::new();
    let mut src = Vec::new();
    let mut violations = 0;
    for _ in 0..cfg.reps {
        let mut ring =
            RingSource::new(&gen_cfg(flows, dist), flows as usize).map_err(|e| Error::Setup(e.to_string()))?;
        let timed = ring.frames().clamp(1 << 20, 1 << 22);
        src.push(source_ns(&mut ring, timed));
        let rss = RssConfig::default_for_queues(1).map_err(|e| Error::Setup(e.to_string()))?;
        let mut ecfg = EngineConfig::new(vec![cpu], rss);
        ecfg.dispatch = Dispatch::Direct;
        ecfg.policy = Policy::Rss;
        ecfg.tracked_flows = flows as usize;
        ecfg.flow_table = FlowTableConfig { capacity: (flows as usize).max(1024), ..FlowTableConfig::default() };
        let frames = ring.frames() as u64;
        let engine =
            Engine::build(ecfg, vec![Box::new(ring) as Box<dyn RxSource>]).map_err(|e| Error::Setup(e.to_string()))?;
        // Warm up with one whole pass of the ring (every flow in the table),
        // then measure for `seconds`; the run's own limit is a safety net.
        let stop = Arc::new(AtomicBool::new(false));
        let opts = RunOptions {
            duration: Some(Duration::from_secs_f64(cfg.seconds + WARMUP_LIMIT_S)),
            interval: Some(Duration::from_millis(50)),
            stop: Some(stop.clone()),
            pin: true,
            ..RunOptions::default()
        };
        let mut warm: Option<(f64, u64)> = None;
        let mut last = (0.0, 0u64);
        let report = run_engine(engine, &opts, |snap| {
            let (t, delivered) = (snap.elapsed_s, snap.totals.delivered);
            match warm {
                None if delivered >= frames => warm = Some((t, delivered)),
                Some((t0, _)) if t - t0 >= cfg.seconds => stop.store(true, Ordering::Relaxed),
                _ => {}
            }
            last = (t, delivered);
        });
        if !report.snapshot.conservation_ok {
            return Err(Error::Conservation(format!("{:?}", report.snapshot.totals)));
        }
        let Some((t0, d0)) = warm.filter(|&(t0, _)| last.0 > t0) else {
            return Err(Error::Setup(format!(
                "{flows} flows: one pass of the ring ({frames} frames) took more than {WARMUP_LIMIT_S} s"
            )));
        };
        mpps.push((last.1 - d0) as f64 / (last.0 - t0) / 1e6);
        violations += report.snapshot.totals.order_violations;
    }
    let mut r = Row::new("engine", flows, dist, mpps);
    let (s, _, _) = median(src);
    r.source_ns = Some(s);
    r.engine_ns = Some(r.ns_per_packet - s);
    r.order_violations = Some(violations);
    Ok(r)
}

/// The keys of the ring's frames, in its order.
fn stream(flows: u32, dist: Dist) -> Result<Vec<FlowKey>, Error> {
    let mut ring = RingSource::new(&gen_cfg(flows, dist), flows as usize).map_err(|e| Error::Setup(e.to_string()))?;
    let n = ring.frames();
    let opts = ParseOptions::default();
    let mut keys = Vec::with_capacity(n);
    while keys.len() < n {
        let want = (n - keys.len()).min(32);
        ring.poll(QueueId(0), want, &mut |b| {
            if let Some(l3) = parse_frame(b, LinkType::Ethernet, &opts).ok().and_then(|p| p.outer) {
                keys.push(FlowKey::from(l3.tuple));
            }
        });
    }
    Ok(keys)
}

fn table(flows: u32) -> Result<FlowTable<u64>, Error> {
    let cfg = FlowTableConfig { capacity: flows as usize, idle_timeout_ns: u64::MAX };
    FlowTable::new(cfg).map_err(|e| Error::Setup(e.to_string()))
}

/// ns per key of a fill pass and a steady pass over `keys`.
fn passes(t: &mut FlowTable<u64>, keys: &[FlowKey], burst: Option<usize>) -> [f64; 2] {
    let mut out = [0.0; 2];
    for o in &mut out {
        let start = Instant::now();
        match burst {
            None => {
                for k in keys {
                    if let Ok((_, v)) = t.lookup_or_insert(k, 0, || 0) {
                        *v += 1;
                    }
                }
            }
            Some(b) => {
                for chunk in keys.chunks(b) {
                    t.lookup_or_insert_burst(
                        chunk,
                        0,
                        || 0,
                        |_, r| {
                            if let Ok((_, v)) = r {
                                *v += 1;
                            }
                        },
                    );
                }
            }
        }
        *o = start.elapsed().as_nanos() as f64 / keys.len().max(1) as f64;
    }
    black_box(t.stats());
    out
}

fn table_rows(flows: u32, dist: Dist, cpu: u32, cfg: &Config) -> Result<(Vec<Row>, Option<String>), Error> {
    let keys = stream(flows, dist)?;
    // On a thread of its own, pinned to the CPU the engine and DPDK use.
    let measured = std::thread::scope(|s| {
        s.spawn(|| {
            let _ = core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize });
            let mut rows = Vec::new();
            for (mode, burst) in [("scalar", None), ("burst", Some(cfg.burst))] {
                let (mut fill, mut steady, mut mib) = (Vec::new(), Vec::new(), 0.0);
                for _ in 0..cfg.reps {
                    let mut t = table(flows)?;
                    mib = t.memory_bytes() as f64 / (1 << 20) as f64;
                    let [f, s] = passes(&mut t, &keys, burst);
                    fill.push(1e3 / f);
                    steady.push(1e3 / s);
                }
                for (phase, samples) in [("fill", fill), ("steady", steady)] {
                    let mut r = Row::new("table", flows, dist, samples);
                    r.mode = Some(mode.into());
                    r.phase = Some(phase.into());
                    r.mib = Some(mib);
                    rows.push(r);
                }
            }
            Ok::<_, Error>(rows)
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Setup("the table measurement thread panicked".into())))
    });
    let mut rows = measured?;
    let mut version = None;
    if let Some(bin) = &cfg.dpdk {
        let slots = FlowTable::<u64>::slots_for(flows as usize);
        let path = std::env::temp_dir().join(format!("flowsteer-keys-{}-{flows}.bin", std::process::id()));
        let words = keys.iter().map(|k| {
            let mut b = [0u8; 48];
            for (i, w) in k.packed_words().iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            b
        });
        let distinct = keys.iter().collect::<std::collections::HashSet<_>>().len() as u64;
        dpdk::write_keys(&path, slots as u64, cfg.burst as u32, distinct, words)
            .map_err(|err| Error::KeyFile { path: path.clone(), err })?;
        let result = (|| {
            let mut runs = Vec::new();
            for _ in 0..cfg.reps {
                runs.push(dpdk::run(bin, &path, 2, cpu as usize)?);
            }
            Ok::<_, Error>(runs)
        })();
        let _ = std::fs::remove_file(&path);
        let runs = result?;
        version = runs.first().map(|r| r.dpdk.clone());
        let mut cases: Vec<(String, String)> = Vec::new();
        for r in runs.iter().flat_map(|r| &r.rows) {
            if !cases.contains(&(r.variant.clone(), r.phase.clone())) {
                cases.push((r.variant.clone(), r.phase.clone()));
            }
        }
        for (variant, phase) in cases {
            let samples = runs
                .iter()
                .flat_map(|r| &r.rows)
                .filter(|r| r.variant == variant && r.phase == phase)
                .map(|r| 1e3 / r.ns_per_key.max(1e-9))
                .collect();
            let mut row = Row::new("dpdk", flows, dist, samples);
            row.mode = Some(variant);
            row.phase = Some(phase);
            rows.push(row);
        }
    }
    Ok((rows, version))
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.flows.v1`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": "flowsteer.bench.flows.v1",
            "cpu": crate::cpu_model(),
            "cpu_id": self.cpu,
            "seconds": self.config.seconds,
            "reps": self.config.reps,
            "burst": self.config.burst,
            "dpdk": self.dpdk_version,
            "results": self.rows,
        })
    }

    /// The text tables: the engine's curve, then the table alone.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = self.write_text(&mut s);
        s
    }

    fn write_text(&self, out: &mut String) -> std::fmt::Result {
        let engine: Vec<&Row> = self.rows.iter().filter(|r| r.part == "engine").collect();
        if !engine.is_empty() {
            writeln!(
                out,
                "engine: one worker on cpu {}, direct dispatch, 64-byte frames from a ring, {:.1} s x {} per case; cpu: {}",
                self.cpu,
                self.config.seconds,
                self.config.reps,
                crate::cpu_model()
            )?;
            writeln!(
                out,
                "{:>10} {:<10} {:>8} {:>15} {:>9} {:>9} {:>9} {:>9} {:>8}",
                "flows", "dist", "Mpps", "(min-max)", "ns/pkt", "source", "engine", "slowdown", "reorder"
            )?;
            for r in engine {
                writeln!(
                    out,
                    "{:>10} {:<10} {:>8.2} {:>15} {:>9.1} {:>9.1} {:>9.1} {:>8.2}x {:>8}",
                    r.flows,
                    r.dist,
                    r.mpps,
                    format!("({:.2}-{:.2})", r.mpps_min, r.mpps_max),
                    r.ns_per_packet,
                    r.source_ns.unwrap_or(0.0),
                    r.engine_ns.unwrap_or(0.0),
                    r.slowdown.unwrap_or(1.0),
                    r.order_violations.unwrap_or(0)
                )?;
            }
        }
        let table: Vec<&Row> = self.rows.iter().filter(|r| r.part != "engine").collect();
        if !table.is_empty() {
            if !out.is_empty() {
                writeln!(out)?;
            }
            writeln!(
                out,
                "flow table alone, cpu {}, lookup-or-insert, bursts of {}{}",
                self.cpu,
                self.config.burst,
                self.dpdk_version.as_ref().map_or(String::new(), |v| format!("; DPDK {v} rte_hash beside it"))
            )?;
            writeln!(
                out,
                "{:>10} {:<10} {:<10} {:<7} {:>8} {:>9} {:>9}",
                "flows", "dist", "table", "phase", "Mkeys/s", "ns/key", "MiB"
            )?;
            for r in table {
                let name = match r.part {
                    "dpdk" => format!("dpdk-{}", r.mode.as_deref().unwrap_or("")),
                    _ => r.mode.clone().unwrap_or_default(),
                };
                writeln!(
                    out,
                    "{:>10} {:<10} {:<10} {:<7} {:>8.2} {:>9.1} {:>9}",
                    r.flows,
                    r.dist,
                    name,
                    r.phase.as_deref().unwrap_or("-"),
                    r.mpps,
                    r.ns_per_packet,
                    r.mib.map_or("-".into(), |m| format!("{m:.0}"))
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            flows: vec![100, 3000],
            dists: vec![Dist::Uniform, Dist::Zipf(1.1)],
            seconds: 0.05,
            reps: 1,
            burst: 32,
            cpu: None,
            only: None,
            dpdk: None,
        }
    }

    #[test]
    fn dist_labels_parse_back() {
        for d in [Dist::Uniform, Dist::Zipf(1.1), Dist::Zipf(0.0)] {
            assert_eq!(Dist::parse(&d.label()), Ok(d));
        }
        for bad in ["zipf", "zipf:-1", "zipf:nan", "normal", "zipf:inf"] {
            assert!(Dist::parse(bad).unwrap_err().contains("zipf:S"), "{bad}");
        }
    }

    #[test]
    fn refuses_bad_values() {
        let e = |c: Config| run(&c, &mut |_| {}).expect_err("a bad config").to_string();
        assert_eq!(e(Config { reps: 0, ..cfg() }), "--seconds must be positive and --reps at least 1");
        assert_eq!(e(Config { flows: vec![0], ..cfg() }), "--flows: counts must be 1 to 16777216");
        assert_eq!(e(Config { burst: 65, ..cfg() }), "--burst must be 1 to 64");
        assert_eq!(e(Config { cpu: Some(100_000), ..cfg() }), "--cpu 100000 is not one this process may run on");
    }

    /// A small run: every case measured, conserved, in order; the text
    /// has a row per case under its header.
    #[test]
    fn small_run_measures_every_case() {
        let mut seen = Vec::new();
        let r = run(&cfg(), &mut |l| seen.push(l.to_string())).unwrap();
        assert_eq!(seen.len(), 8);
        let engine: Vec<&Row> = r.rows.iter().filter(|r| r.part == "engine").collect();
        assert_eq!(engine.len(), 4);
        assert!(engine.iter().all(|r| r.mpps > 0.0 && r.order_violations == Some(0)));
        assert_eq!(engine[0].slowdown, Some(1.0));
        assert_eq!(r.rows.iter().filter(|r| r.part == "table").count(), 16);
        let text = r.text();
        assert!(text.contains("slowdown") && text.contains("ns/key"), "{text}");
        assert_eq!(r.json()["schema"], "flowsteer.bench.flows.v1");
    }
}
