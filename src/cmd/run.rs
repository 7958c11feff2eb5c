//! `flowsteer run`: the steering engine on the built-in workload or a
//! replayed capture, with the `netstat -Q`-style table.

use crate::cli::RunArgs;
use crate::cmd::usage;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve_with, Resolved, SeedUse};
use anyhow::{bail, Context, Result};
use flowsteer_engine::counters::Snapshot;
use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::runtime::{run as run_engine, RunOptions, RunReport, StopReason};
use flowsteer_engine::source::{GenSource, ReplaySource, RxSource};
use flowsteer_engine::DestFilter;
use flowsteer_flow::FlowTableConfig;
use flowsteer_gen::{GenConfig, SizeDist, Spread};
use flowsteer_live::link::LinkReader;
use flowsteer_live::source::{FanoutChoice, Guard, LiveOptions, LiveSpec};
use flowsteer_live::{available_cpus, replay, LiveError};
use flowsteer_rss::RssConfig;
use flowsteer_steer::cpuset::CpuSet;
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::rebalance::RebalanceConfig;
use flowsteer_steer::steer::Policy;
use flowsteer_steer::WorkerId;
use flowsteer_xsk::{Claim, Fragments, XdpMode};
use std::sync::Arc;
use std::time::Duration;

/// Exit code of a run whose live source lost its interface (deleted or set
/// down): the final counters are printed, then the one-line error.
pub const EXIT_SOURCE_LOST: i32 = 4;

/// The generator's seed when `--seed` is not given.
const DEFAULT_GEN_SEED: u64 = 1;

/// After a second SIGINT/SIGTERM the run ends at once and prints what it
/// counted; if it has not ended this long after that signal (a thread stuck
/// in the kernel), the process exits without its counters, saying so.
const ABORT_GRACE: Duration = Duration::from_secs(2);

/// The per-core reference the `rate:` line compares a run with: `bench
/// steer`'s one-worker figure for each dispatch policy (per-core design, RSS,
/// burst 32, 1,000 flows, 64-byte frames from the built-in generator inside
/// the measured loop; median of 3), from BENCHMARKS.md "Steering engine",
/// measured on the project's 2-vCPU development host with the vCPUs apart.
const REFERENCE_MPPS_PER_CORE: [(&str, f64); 3] = [("direct", 11.93), ("deferred", 9.78), ("hybrid", 11.14)];

/// Where [`REFERENCE_MPPS_PER_CORE`] comes from, as the `rate:` line says it.
const REFERENCE_SOURCE: &str = "bench steer: one worker, RSS, 1,000 flows, 64-byte frames; BENCHMARKS.md";

/// Verdict thresholds of the `rate:` line, as shares of the reference: at
/// least `GOOD` is good, at least `FAIR` fair, below it poor.
const GOOD: f64 = 0.75;
const FAIR: f64 = 0.40;

/// What `build` made of the flags: the engine, its options, the warnings
/// to print (and to put in `--json`), the live source's guard and what the
/// workload is.
pub struct Built {
    pub engine: Engine,
    pub opts: RunOptions,
    pub warnings: Vec<String>,
    pub guard: Guard,
    pub workload: Workload,
}

/// What traffic the run is fed, said in the header and in `--json` (`run.workload`).
pub struct Workload {
    /// One line for the header.
    pub text: String,
    /// The same as a JSON object (`kind`: generator, capture or live).
    pub json: serde_json::Value,
}

pub fn run(args: &RunArgs) -> Result<i32> {
    let Built { engine, mut opts, mut warnings, guard, workload } = build(args)?;
    // Every source stops cleanly on SIGINT/SIGTERM with its final counters
    // (the XDP program is detached when `guard` drops); a second signal
    // ends the run at once, without the drain, and its counters so far are
    // printed; if even that does not come within ABORT_GRACE, exit 1.
    let signals = flowsteer_live::stop_then_abort_on_signals(|| {
        std::thread::sleep(ABORT_GRACE);
        eprintln!(
            "error: a second signal, and the run did not end within {} s of it: exiting without its counters",
            ABORT_GRACE.as_secs()
        );
        std::process::exit(1);
    })?;
    opts.stop = Some(signals.stop.clone());
    opts.abort = Some(signals.abort.clone());
    crate::cmd::warn_all(&warnings);
    let header = describe(&engine.cfg, args);
    let mut run_json = run_json(&engine.cfg, args, &workload);
    let xdp = guard.xdp().map(|(mode, fallback)| XdpAttached::new(mode, fallback));
    if let Some(x) = &xdp {
        run_json["xdp"] = x.json();
    }
    let key = engine.cfg.rss.key().clone();
    if !args.json {
        println!("{header}");
        println!("workload: {}", workload.text);
        if let Some(x) = &xdp {
            println!("{}", x.line(&args.xdp_mode));
        }
        if args.source != "gen" || !args.listen_dst.is_empty() {
            println!("{}", listener_line(&engine.cfg.dest));
        }
        if let Some(line) = drawn_key_line(&key) {
            println!("{line}");
        }
    }
    let json = args.json;
    // Each interval report shows that interval's own rates (the engine
    // hands over cumulative snapshots, the final one last, so the intervals
    // cover the whole run); the final table, the whole run's.
    let mut prev: Option<Snapshot> = None;
    let report = run_engine(engine, &opts, |snap| {
        let iv = snap.interval_since(prev.as_ref());
        if json {
            // One line per interval; the final document follows, also on one line.
            if let Ok(line) = serde_json::to_string(&interval_json(prev.as_ref(), &iv)) {
                println!("{line}");
            }
        } else {
            println!("{}", interval_line(prev.as_ref(), &iv));
            print_table(&iv);
            println!();
        }
        prev = Some(snap.clone());
    });
    crate::cmd::warn_all(&report.warnings);
    let interrupted = interruption(&report, &signals);
    if args.json {
        warnings.extend(report.warnings.iter().cloned());
        let extra = Extra { interrupted: interrupted.as_ref(), rate: rate_json(&report, args) };
        print_json(&report, run_json, &warnings, &key, opts.interval.is_some(), &extra)?;
    } else {
        if opts.interval.is_some() {
            println!("{} whole run", crate::report::interval_label(0.0, report.snapshot.elapsed_s));
        }
        print_table(&report.snapshot);
        println!("{}", crate::legend::footer(crate::legend::RUN));
        if let Some(i) = &interrupted {
            println!("{}", i.line(args.duration));
        }
        print_summary(&report, args);
    }
    drop(guard);
    if !report.snapshot.conservation_ok {
        eprintln!("error: counters do not add up ({}): this is a bug", report.snapshot.conservation);
        return Ok(1);
    }
    if let Some(e) = &report.source_error {
        eprintln!("error: {e}");
        return Ok(EXIT_SOURCE_LOST);
    }
    // Ended at once by a second signal: the counters printed are complete
    // as counts, but the queued packets were never processed.
    Ok(if report.aborted { 1 } else { 0 })
}

/// The XDP mode an AF_XDP source's program was attached in.
struct XdpAttached {
    /// `native` or `generic`.
    mode: &'static str,
    /// Why native mode was refused (`--xdp-mode auto` fell back).
    fallback: Option<String>,
}

impl XdpAttached {
    fn new(mode: XdpMode, fallback: Option<&str>) -> XdpAttached {
        let mode = if mode == XdpMode::Native { "native" } else { "generic" };
        XdpAttached { mode, fallback: fallback.map(str::to_string) }
    }

    /// The header line, e.g. `xdp: generic (skb) mode (--xdp-mode auto
    /// fell back: ...)`.
    fn line(&self, asked: &str) -> String {
        let mode = if self.mode == "native" { "native (driver) mode" } else { "generic (skb) mode" };
        match &self.fallback {
            Some(why) => format!("xdp: {mode} (--xdp-mode {asked} fell back, native refused: {why})"),
            None => format!("xdp: {mode} (--xdp-mode {asked})"),
        }
    }

    /// `run.xdp` of `--json`.
    fn json(&self) -> serde_json::Value {
        serde_json::json!({"mode": self.mode, "fallback": self.fallback})
    }
}

/// How a run stopped by SIGINT/SIGTERM ended (`None`: not by a signal).
struct Interruption {
    /// The first signal's name.
    signal: &'static str,
    /// When the run stopped, seconds from its start.
    at_s: f64,
    /// A second signal ended it before the queues were drained.
    aborted: bool,
    /// Packets left in the queues (in flight) when it ended.
    in_flight: u64,
}

impl Interruption {
    /// The text line, e.g. `interrupted by SIGTERM at 0.31 s (of --duration
    /// 600 s): ...`.
    fn line(&self, duration: f64) -> String {
        let head = format!("interrupted by {} at {:.2} s (of --duration {duration} s)", self.signal, self.at_s);
        if self.aborted {
            format!(
                "{head}, then ended at once by a second signal: the counters are those gathered so far; {} still queued, counted in flight, never processed",
                crate::report::count(self.in_flight, "packet", "packets")
            )
        } else {
            format!("{head}: the counters cover the run up to then, every packet queued by then processed")
        }
    }

    /// The `interrupted` object of `--json`.
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "signal": self.signal,
            "at_s": self.at_s,
            "second_signal": self.aborted,
            "drained": !self.aborted,
        })
    }
}

/// The interruption of a run that a signal stopped.
fn interruption(r: &RunReport, signals: &flowsteer_live::StopSignals) -> Option<Interruption> {
    if r.stopped_by != StopReason::Interrupted {
        return None;
    }
    Some(Interruption {
        signal: signals.first().unwrap_or("a signal"),
        at_s: r.snapshot.elapsed_s,
        aborted: r.aborted,
        in_flight: r.snapshot.totals.in_flight,
    })
}

/// Build the engine and options from the flags (shared with `bench steer`).
pub fn build(args: &RunArgs) -> Result<Built> {
    let available = available_cpus();
    let cpus: Vec<u32> = if args.cores.is_empty() { available.clone() } else { args.cores.clone() };
    if cpus.is_empty() {
        bail!("no CPUs to run workers on");
    }
    crate::cmd::check_cpus("--cores", &cpus)?;
    let mut sorted = cpus.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != cpus.len() {
        return Err(usage("--cores lists a CPU twice"));
    }
    let single = args.single_queue;
    if args.rate.is_some() && args.source != "gen" {
        return Err(usage(format!(
            "--rate paces the built-in generator (--source gen); --source {} offers its own rate",
            args.source
        )));
    }
    let live = LiveSpec::parse(&args.source).map_err(|e| usage(format!("--source '{}': {e}", args.source)))?;
    let live_queues = match &live {
        Some(spec) => {
            let q = spec.rx_queues(args.rx_queues.unwrap_or(cpus.len() as u16))?;
            if let Some(n) = args.rx_queues.filter(|&n| usize::from(n) != q.len()) {
                return Err(usage(format!(
                    "--rx-queues {n} but --source {} names {} queue(s): {q:?}",
                    args.source,
                    q.len()
                )));
            }
            if single {
                return Err(usage("--single-queue does not apply to a live source (its queues are the device's)"));
            }
            Some(q)
        }
        None => None,
    };
    let rx_queues = match &live_queues {
        Some(q) => u16::try_from(q.len()).map_err(|_| anyhow::anyhow!("too many receive queues"))?,
        None if single => 1,
        None => args.rx_queues.unwrap_or(cpus.len() as u16),
    };
    if rx_queues == 0 {
        return Err(usage("--rx-queues must be at least 1"));
    }
    if !args.rss.cpus.is_empty() {
        return Err(usage(
            "`run` places workers with --cores and receive queues with --queue-cpus; --cpus (the modelled queue -> CPU map of hash, plan and analyze) does not apply",
        ));
    }
    if args.allow_mtu_drops && !args.source.starts_with("afxdp:") {
        return Err(usage("--allow-mtu-drops applies to --source afxdp:IFACE only"));
    }
    if args.rss.queues.is_some() {
        return Err(usage(
            "`run` takes the receive queue count from --rx-queues (the engine's queues), not --queues (the modelled table of hash, plan, analyze and export)",
        ));
    }
    let Resolved { config: rss, mut warnings } =
        resolve_with(&args.rss, Some(usize::from(rx_queues)), SeedUse::KeyAndGenerator)?;
    let policy = Policy::parse(&args.steer).map_err(|e| usage(format!("--steer: {e}")))?;
    let dispatch = Dispatch::parse(&args.dispatch).map_err(|e| usage(format!("--dispatch: {e}")))?;
    let rps_cpus = args
        .rps_cpus
        .iter()
        .map(|m| CpuSet::parse(m).map_err(|e| usage(format!("--rps-cpus '{m}': {e}"))))
        .collect::<Result<Vec<_>>>()?;
    if rps_cpus.len() > 1 && rps_cpus.len() != usize::from(rx_queues) {
        return Err(usage(format!(
            "--rps-cpus given {} times for {rx_queues} receive queues (give it once, or once per queue)",
            rps_cpus.len()
        )));
    }
    if policy == Policy::Rss && !rps_cpus.is_empty() {
        return Err(usage("--rps-cpus applies to --steer rps or rfs, not --steer rss"));
    }
    if policy == Policy::Rps && rps_cpus.is_empty() {
        warnings.push("--steer rps without --rps-cpus: RPS is off, packets stay on the polling core".into());
    }
    let rxq_worker = if args.queue_cpus.is_empty() {
        None
    } else {
        if args.queue_cpus.len() != usize::from(rx_queues) {
            return Err(usage(format!(
                "--queue-cpus has {} entries for {rx_queues} receive queues",
                args.queue_cpus.len()
            )));
        }
        Some(
            args.queue_cpus
                .iter()
                .map(|c| {
                    cpus.iter()
                        .position(|x| x == c)
                        .map(|p| WorkerId(p as u16))
                        .ok_or_else(|| usage(format!("--queue-cpus: CPU {c} runs no worker (--cores {cpus:?})")))
                })
                .collect::<Result<Vec<_>>>()?,
        )
    };
    let listen = parse_listen(&args.listen)?;
    let n = cpus.len();
    let mut guard = Guard::None;
    let workload;
    let (sources, tracked): (Vec<Box<dyn RxSource>>, usize) = if args.source == "gen" {
        let size = match args.size.as_str() {
            "imix" => SizeDist::Imix,
            s => {
                SizeDist::Fixed(s.parse().map_err(|_| usage(format!("--size '{s}': a frame length in bytes or imix")))?)
            }
        };
        let gen_cfg = GenConfig {
            flows: args.flows,
            ipv6_share: args.ipv6_share,
            tcp_share: args.tcp_share,
            size,
            zipf: args.zipf,
            frag_share: args.frag_share,
            frag_every: args.frag_every,
            seed: args.rss.seed.unwrap_or(DEFAULT_GEN_SEED),
        };
        gen_cfg.validate().map_err(|e| usage(format!("generator: {e}")))?;
        workload = gen_workload(&gen_cfg, &args.size, rx_queues, args.rate);
        let per_queue = args.rate.map(|r| r as f64 / f64::from(rx_queues));
        let spread = |rss: &RssConfig| {
            if rx_queues == 1 {
                Spread::Single
            } else {
                Spread::Rss { queues: rx_queues, config: rss.clone() }
            }
        };
        let sources = (0..n)
            .map(|_| {
                match per_queue {
                    Some(pps) => GenSource::paced(&gen_cfg, spread(&rss), args.burst, pps),
                    None => GenSource::new(&gen_cfg, spread(&rss), args.burst),
                }
                .map(|s| Box::new(s) as Box<dyn RxSource>)
            })
            .collect::<Result<Vec<_>, _>>()
            .context("generator")?;
        (sources, args.flows as usize)
    } else if let Some(path) = args.source.strip_prefix("pcap:") {
        let spinner = crate::progress::wanted(args.json)
            .then(|| crate::progress::Spinner::start(&format!("run: loading capture {path} into memory")));
        let loaded = replay::load(path, &rss, rx_queues, args.max_capture_mib);
        drop(spinner);
        let (replay, load_warnings) = loaded?;
        warnings.extend(load_warnings);
        let frames: usize = replay.queues.iter().map(Vec::len).sum();
        let bytes: usize = replay.queues.iter().flatten().map(Vec::len).sum();
        workload = Workload {
            text: format!(
                "capture {path} replayed from memory: {} ({:.1} MiB), {}, each frame on the receive queue the RSS configuration picks, as fast as the workers take it (a receiving core takes frames only when its hand-off queues have room: no queue_full drops)",
                crate::report::count(frames as u64, "frame", "frames"),
                bytes as f64 / (1 << 20) as f64,
                crate::report::count(args.loops, "time", "times")
            ),
            json: serde_json::json!({"kind": "capture", "path": path, "frames": frames, "bytes": bytes, "loops": args.loops}),
        };
        let replay = Arc::new(replay);
        let sources =
            (0..n).map(|_| Box::new(ReplaySource::new(replay.clone(), args.loops)) as Box<dyn RxSource>).collect();
        (sources, 1)
    } else if let (Some(spec), Some(queues)) = (&live, &live_queues) {
        let worker_of: Vec<usize> = (0..queues.len())
            .map(|i| rxq_worker.as_ref().and_then(|m| m.get(i)).map_or(i % n, |w| w.index()))
            .collect();
        // Each backend checks only its own option.
        let (xdp_mode, xdp_claim, fanout) = match spec {
            LiveSpec::Xdp { iface, .. } => {
                let claim = xdp_claim(args, &listen, iface, &mut warnings)?;
                (crate::cmd::xdp_mode(&args.xdp_mode)?, claim, FanoutChoice::Rss)
            }
            LiveSpec::Packet { .. } => (XdpMode::Auto, Claim::nothing(), fanout_choice(&args.fanout)?),
        };
        let lopts = LiveOptions { xdp_mode, xdp_claim, allow_mtu_drops: args.allow_mtu_drops, fanout, rss: &rss };
        let (sources, g) = flowsteer_live::open(spec, queues, &worker_of, n, &lopts).map_err(|e| match e {
            LiveError::Fanout(e) => anyhow::anyhow!("--fanout rss: {e}"),
            LiveError::Mtu(e) => anyhow::anyhow!("--source {e}; --allow-mtu-drops runs anyway"),
            e => anyhow::anyhow!("--source {e}"),
        })?;
        warnings.extend(g.warnings().iter().cloned());
        if let Some((_, Some(why))) = g.xdp() {
            warnings.push(format!(
                "--xdp-mode {}: XDP attached in generic (skb) mode, slower than native: {why}",
                args.xdp_mode
            ));
        }
        guard = g;
        workload = Workload {
            text: format!("live traffic from {} (receive queues {queues:?})", args.source),
            json: serde_json::json!({"kind": "live", "source": args.source, "rx_queues": queues}),
        };
        (sources, 1)
    } else {
        return Err(usage(format!(
            "--source '{}': expected gen, pcap:FILE, afxdp:IFACE[:Q,...] or afpacket:IFACE",
            args.source
        )));
    };
    let mut cfg = EngineConfig::new(cpus, rss);
    cfg.rx_queues = rx_queues;
    cfg.rxq_worker = rxq_worker;
    cfg.policy = policy;
    cfg.dispatch = dispatch;
    cfg.rps_cpus = rps_cpus;
    cfg.ring_capacity = args.ring_size;
    cfg.burst = args.burst.clamp(1, 1024);
    cfg.buckets = args.buckets;
    cfg.sock_flow_entries = args.rfs_entries;
    cfg.flow_cnt = args.rfs_flow_cnt;
    // A table sized to the workload: every flow fits (a worker may own
    // them all after a rebalance), and a small one keeps its lines in
    // cache. Under `--frag-steer off` a fragmenting flow has two keys (its
    // non-first fragments carry no ports), so it counts twice.
    let keys_per_flow = if args.frag_share > 0.0 && args.frag_steer == "off" { 2 } else { 1 };
    let capacity = args.flow_capacity.unwrap_or(if args.source == "gen" {
        (args.flows as usize * keys_per_flow).next_power_of_two().clamp(1024, flowsteer_flow::table::MAX_CAPACITY)
    } else {
        65536
    });
    cfg.flow_table = FlowTableConfig { capacity, idle_timeout_ns: (args.flow_timeout * 1e9) as u64 };
    cfg.tracked_flows = tracked;
    cfg.frag_steer = flowsteer_engine::engine::FragSteer::parse(&args.frag_steer)
        .map_err(|e| usage(format!("--frag-steer '{}': {e}", args.frag_steer)))?;
    cfg.reasm = flowsteer_reasm::ReasmConfig {
        high_thresh: args.reasm_mem,
        low_thresh: args.reasm_mem / 4 * 3,
        ..flowsteer_reasm::ReasmConfig::default()
    };
    // One timeout for everything held: the reassembler's queues and the
    // holding area of `--frag-steer owner` (which takes the reassembler's).
    if let Some(t) = args.frag_timeout {
        let ns = (t * 1e9) as u64;
        cfg.reasm.timeout_v4_ns = ns;
        cfg.reasm.timeout_v6_ns = ns;
    }
    // Captures carry no generator stamps: no per-flow order check for them.
    cfg.order_stamps = args.source == "gen";
    cfg.listen = listen;
    cfg.dest = dest_filter(&args.listen_dst, live.as_ref())?;
    let engine = Engine::build(cfg, sources)?;
    let opts = RunOptions {
        duration: Some(Duration::from_secs_f64(args.duration)),
        packets: args.packets,
        interval: args.interval.filter(|i| *i > 0.0).map(Duration::from_secs_f64),
        rebalance: args.rebalance.then(RebalanceConfig::default),
        rebalance_interval: Some(Duration::from_millis(100)),
        migrate_every: args.migrate.filter(|m| *m > 0.0).map(Duration::from_secs_f64),
        pin: !args.no_pin,
        stop: None,
        abort: None,
        busy_poll: args.busy_poll,
    };
    Ok(Built { engine, opts, warnings, guard, workload })
}

fn describe(cfg: &EngineConfig, args: &RunArgs) -> String {
    use crate::report::count;
    format!(
        "flowsteer run: {} on CPUs {:?}, {}, steer {}, dispatch {}, source {}, {} s",
        count(cfg.workers() as u64, "worker", "workers"),
        cfg.cpus,
        count(u64::from(cfg.rx_queues), "receive queue", "receive queues"),
        cfg.policy.name(),
        cfg.dispatch.name(),
        args.source,
        args.duration
    )
}

/// The line above an interval's table: elapsed time and that interval's counts and rate.
fn interval_line(prev: Option<&Snapshot>, iv: &Snapshot) -> String {
    let (received, delivered, dropped) = iv.counts_since(prev);
    format!(
        "{} received {received}, delivered {delivered} ({:.3} Mpps), dropped {dropped} (counts and rates: this interval's)",
        crate::report::interval_label(prev.map_or(0.0, |p| p.elapsed_s), iv.elapsed_s),
        iv.totals.pps / 1e6
    )
}

/// One `--json --interval` line (schema `flowsteer.run-interval.v1`).
fn interval_json(prev: Option<&Snapshot>, iv: &Snapshot) -> serde_json::Value {
    let (received, delivered, dropped) = iv.counts_since(prev);
    let workers: Vec<_> = iv
        .workers
        .iter()
        .map(|w| serde_json::json!({"worker": w.worker, "cpu": w.cpu, "handled": w.handled, "pps": w.pps}))
        .collect();
    serde_json::json!({
        "schema": "flowsteer.run-interval.v1",
        "from_s": prev.map_or(0.0, |p| p.elapsed_s),
        "to_s": iv.elapsed_s,
        "received": received,
        "delivered": delivered,
        "dropped": dropped,
        "pps": iv.totals.pps,
        "workers": workers,
        "totals": iv.totals,
    })
}

/// The per-worker table, netstat -Q columns first, then ours.
pub fn print_table(s: &Snapshot) {
    println!(
        "{:>4} {:>4} {:>6} {:>6} {:>11} {:>11} {:>9} {:>11} {:>11} {:>8} {:>7} {:>9} {:>9}",
        "WSID",
        "CPU",
        "Len",
        "WMark",
        "Disp'd",
        "HDisp'd",
        "QDrops",
        "Queued",
        "Handled",
        "Mpps",
        "Flows",
        "OrderViol",
        "Drops"
    );
    for w in &s.workers {
        let drops: u64 = w.drops.values().sum::<u64>() + w.qdrops;
        println!(
            "{:>4} {:>4} {:>6} {:>6} {:>11} {:>11} {:>9} {:>11} {:>11} {:>8.3} {:>7} {:>9} {:>9}",
            w.worker,
            w.cpu,
            w.len,
            w.wmark,
            w.dispatched,
            w.hdispatched,
            w.qdrops,
            w.queued,
            w.handled,
            w.pps / 1e6,
            w.flows,
            w.order_violations,
            drops
        );
    }
}

/// The loss line (and its top reasons) of a run's totals.
fn loss_lines(t: &flowsteer_engine::counters::Totals) -> Vec<String> {
    crate::report::loss_lines(
        t.dropped,
        t.received,
        "received packets dropped",
        t.drops.iter().map(|(k, v)| (k.as_str(), *v)),
    )
}

fn print_summary(r: &RunReport, args: &RunArgs) {
    use crate::report::count;
    let t = &r.snapshot.totals;
    println!("{}", total_line(t, r.snapshot.elapsed_s));
    let order = if r.order_checked {
        t.order_violations.to_string()
    } else {
        "not checked (only the built-in generator stamps sequence numbers)".into()
    };
    println!(
        "order violations {order}; steering moves {} (packets held for drain {}); rebalance moves {}; consumer migrations {}",
        t.steer_moves, t.held_for_drain, t.rebalance_moves, r.migrations
    );
    if t.listener_bucket + t.listener_wildcard > 0 {
        println!(
            "listeners: {} to per-bucket listeners, {} to wildcard listeners",
            count(t.listener_bucket, "packet", "packets"),
            t.listener_wildcard
        );
    }
    if t.reassembled + t.reasm_absorbed > 0 {
        println!(
            "reassembly: {} rebuilt from {} ({} still pending), {} steered to another owner than their fragments (reinjected)",
            count(t.reassembled, "datagram", "datagrams"),
            count(t.reasm_absorbed, "fragment", "fragments"),
            t.reasm_pending,
            t.reinjected
        );
    }
    if args.verbose {
        println!("per-core timers fired {}; idle flows expired {}", t.timers_fired, t.flows_expired);
    }
    for m in &r.rebalance_log {
        println!(
            "  rebalance at {:.3}s: bucket {} worker {} -> {} ({} in the interval)",
            m.at_s,
            m.bucket,
            m.from,
            m.to,
            count(m.load, "packet", "packets")
        );
    }
    if let Some(i) = &r.snapshot.ingress {
        print_ingress(i, args.source.starts_with("afxdp:"));
    }
    if let Some(line) = rate_line(r, args) {
        println!("{line}");
    }
    for line in loss_lines(t) {
        println!("{line}");
    }
    println!("conservation: {}: {}", r.snapshot.conservation, if r.snapshot.conservation_ok { "OK" } else { "FAILED" });
}

/// The `total:` line, a sum that adds up on screen: received = delivered +
/// dropped (by reason) + in flight, plus the packets reassembly merged
/// (fragments absorbed less the datagrams rebuilt from them) when there are
/// any; then the delivered rate.
fn total_line(t: &flowsteer_engine::counters::Totals, elapsed_s: f64) -> String {
    let drops: Vec<String> = t.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let mut sum = format!(
        "total: received {} = delivered {} + dropped {}{} + in flight {}",
        t.received,
        t.delivered,
        t.dropped,
        if drops.is_empty() { String::new() } else { format!(" ({})", drops.join(", ")) },
        t.in_flight
    );
    if t.reasm_absorbed > 0 || t.reassembled > 0 {
        let merged = t.reasm_absorbed.saturating_sub(t.reassembled);
        sum.push_str(&format!(
            " + merged by reassembly {merged} ({} absorbed into {}, {} of them still pending)",
            crate::report::count(t.reasm_absorbed, "fragment", "fragments"),
            crate::report::count(t.reassembled, "datagram", "datagrams"),
            t.reasm_pending
        ));
    }
    format!("{sum}; {:.3} Mpps delivered over {:.2} s", t.pps / 1e6, elapsed_s)
}

/// How this run's rate reads: for the generator at `--rate`, what it
/// offered and what was delivered; for the generator or a capture
/// otherwise, delivered per worker against [`REFERENCE_MPPS_PER_CORE`] with
/// a verdict when the workload is the reference's. `None` for a live
/// source (its rate is the traffic's).
fn rate_line(r: &RunReport, args: &RunArgs) -> Option<String> {
    let t = &r.snapshot.totals;
    let secs = r.snapshot.elapsed_s;
    if let Some(rate) = args.rate {
        let generated = if secs > 0.0 { t.received as f64 / secs } else { 0.0 };
        return Some(format!(
            "offered: {:.3} Mpps asked (--rate {rate}), {:.3} Mpps generated ({} of the rate asked), {:.3} Mpps delivered ({} of those generated)",
            rate as f64 / 1e6,
            generated / 1e6,
            crate::report::percent(generated.round() as u64, rate),
            t.pps / 1e6,
            crate::report::percent(t.delivered, t.received),
        ));
    }
    if args.source != "gen" && !args.source.starts_with("pcap:") {
        return None;
    }
    let workers = r.snapshot.workers.len().max(1);
    let dispatch = args.dispatch.as_str();
    let reference = REFERENCE_MPPS_PER_CORE.iter().find(|(d, _)| *d == dispatch).map_or(0.0, |(_, m)| *m);
    let per_worker = t.pps / 1e6 / workers as f64;
    let share = if reference > 0.0 { per_worker / reference } else { 0.0 };
    let head = format!(
        "rate: {per_worker:.2} Mpps per worker ({:.2} over {}), {:.0} % of the reference {reference:.2} Mpps per core ({REFERENCE_SOURCE}; --dispatch {dispatch})",
        t.pps / 1e6,
        crate::report::count(workers as u64, "worker", "workers"),
        share * 100.0
    );
    let differs = differences(args, workers);
    Some(if differs.is_empty() {
        let verdict = if share >= GOOD {
            "good"
        } else if share >= FAIR {
            "fair: other load on these CPUs, vCPUs sharing a physical core, or a slower host"
        } else {
            "poor: other load on these CPUs, or a much slower host"
        };
        format!("{head}: {verdict} (good >= {:.0} %, fair >= {:.0} %)", GOOD * 100.0, FAIR * 100.0)
    } else {
        format!("{head}; no verdict: the reference's workload differs ({})", differs.join(", "))
    })
}

/// How this run's workload differs from the reference's (empty: it is the
/// reference's, so the `rate:` line gives a verdict).
fn differences(args: &RunArgs, workers: usize) -> Vec<String> {
    let mut d = Vec::new();
    if let Some(path) = args.source.strip_prefix("pcap:") {
        d.push(format!("a capture, {path}"));
    }
    if args.steer != "rss" {
        d.push(format!("--steer {}", args.steer));
    }
    if args.single_queue {
        d.push("--single-queue: one core receives for every worker".into());
    } else if args.rx_queues.is_some_and(|q| usize::from(q) != workers) {
        d.push("--rx-queues other than one per worker".into());
    }
    if args.source == "gen" {
        if args.size != "64" {
            d.push(format!("--size {}", args.size));
        }
        if !(256..=16384).contains(&args.flows) {
            d.push(format!("--flows {}", args.flows));
        }
        if let Some(z) = args.zipf {
            d.push(format!("--zipf {z}"));
        }
        if args.frag_share > 0.0 {
            d.push(format!("--frag-share {}", args.frag_share));
        }
    }
    if !args.listen.is_empty() {
        d.push("--listen".into());
    }
    if args.migrate.is_some() {
        d.push("--migrate".into());
    }
    d
}

/// The `rate` object of `--json`: what the `rate:` or `offered:` line says.
fn rate_json(r: &RunReport, args: &RunArgs) -> serde_json::Value {
    let t = &r.snapshot.totals;
    let secs = r.snapshot.elapsed_s;
    if let Some(rate) = args.rate {
        let generated = if secs > 0.0 { t.received as f64 / secs } else { 0.0 };
        return serde_json::json!({"offered_pps": rate, "generated_pps": generated, "delivered_pps": t.pps});
    }
    if args.source != "gen" && !args.source.starts_with("pcap:") {
        return serde_json::Value::Null;
    }
    let workers = r.snapshot.workers.len().max(1);
    let reference = REFERENCE_MPPS_PER_CORE.iter().find(|(d, _)| *d == args.dispatch).map_or(0.0, |(_, m)| *m);
    let per_worker = t.pps / 1e6 / workers as f64;
    let share = if reference > 0.0 { per_worker / reference } else { 0.0 };
    let differs = differences(args, workers);
    let verdict = if !differs.is_empty() {
        serde_json::Value::Null
    } else if share >= GOOD {
        "good".into()
    } else if share >= FAIR {
        "fair".into()
    } else {
        "poor".into()
    };
    serde_json::json!({
        "mpps_per_worker": per_worker,
        "reference_mpps_per_core": reference,
        "reference": REFERENCE_SOURCE,
        "share_of_reference": share,
        "verdict": verdict,
        "not_the_reference_workload": differs,
    })
}

/// A live source's sum from the interface in, and the interface's own
/// counters beside it (the fill ring only for AF_XDP, the only source that
/// has one).
fn print_ingress(i: &flowsteer_engine::Ingress, afxdp: bool) {
    let d = &i.socket_drops;
    println!(
        "source: seen {} = passed to the kernel {} + dropped by the hook {} + redirected {}",
        i.seen, i.passed, i.hook_dropped, i.redirected
    );
    println!(
        "source: redirected {} = delivered to the engine {} + socket drops {} (rx_dropped {}, ring_full {}, bad_descriptor {}) + unread at stop {}",
        i.redirected,
        i.delivered,
        d.total(),
        d.rx_dropped,
        d.ring_full,
        d.bad_descriptor,
        i.unread
    );
    if let Some(f) = &i.interface {
        let peer = f.peer_tx_dropped.map(|p| format!(", veth peer tx_dropped {p}")).unwrap_or_default();
        let fill = if afxdp {
            format!("; fill ring found empty {}", crate::report::count(i.fill_ring_empty, "time", "times"))
        } else {
            String::new()
        };
        println!(
            "interface (beside the sum, over the run): rx_packets {}, rx_dropped {}{peer}{fill}",
            f.rx_packets, f.rx_dropped
        );
    }
}

/// The built-in generator's workload, with how it is offered: as fast as
/// the workers take it, or at `rate` packets per second in total.
fn gen_workload(g: &GenConfig, size: &str, rx_queues: u16, rate: Option<u64>) -> Workload {
    let size_text = if size == "imix" {
        "IMIX frames (64/570/1518 bytes, 7:4:1)".to_string()
    } else {
        format!("{size}-byte frames")
    };
    let mut text = format!(
        "built-in generator, in memory (no NIC): {} flows ({:.0} % IPv6, {:.0} % TCP), {size_text}",
        g.flows,
        g.ipv6_share * 100.0,
        g.tcp_share * 100.0
    );
    if let Some(z) = g.zipf {
        text.push_str(&format!(", Zipf {z} flow popularity"));
    }
    if g.frag_share > 0.0 {
        text.push_str(&format!(", {:.0} % of UDP flows fragmented", g.frag_share * 100.0));
    }
    let queues = crate::report::count(u64::from(rx_queues), "receive queue", "receive queues");
    match rate {
        None => text.push_str(&format!(
            ", spread over {queues} by RSS, offered as fast as the workers take it (a receiving core generates only when its hand-off queues have room: no queue_full drops; --rate PPS offers a fixed rate instead)"
        )),
        Some(r) => text.push_str(&format!(
            ", spread over {queues} by RSS, offered at {r} packets/s in total (--rate; {:.0} per receive queue) whether or not the workers keep up: what they cannot take is dropped as queue_full (without --rate the generator offers what the workers take, nothing dropped for a full queue)",
            r as f64 / f64::from(rx_queues)
        )),
    }
    Workload {
        text,
        json: serde_json::json!({
            "kind": "generator",
            "flows": g.flows,
            "ipv6_share": g.ipv6_share,
            "tcp_share": g.tcp_share,
            "size": size,
            "zipf": g.zipf,
            "frag_share": g.frag_share,
            "frag_every": g.frag_every,
            "seed": g.seed,
            "rate_pps": rate,
        }),
    }
}

/// The `run` object of the `--json` document: what ran, as it ran.
fn run_json(cfg: &EngineConfig, args: &RunArgs, workload: &Workload) -> serde_json::Value {
    serde_json::json!({
        "source": args.source,
        "workload": workload.json,
        "steer": cfg.policy.name(),
        "dispatch": cfg.dispatch.name(),
        "cpus": cfg.cpus,
        "rx_queues": cfg.rx_queues,
        "buckets": cfg.buckets,
        "duration_limit_s": args.duration,
        "packet_limit": args.packets,
        "interval_s": args.interval,
        "listen_dst": {
            "host_mac": cfg.dest.host_mac.map(|m| mac_text(&m)),
            "other_host": cfg.dest.other_host,
            "broadcast": cfg.dest.broadcast,
            "multicast": cfg.dest.multicast,
        },
    })
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The `listener:` header line: which destinations reach the listener,
/// and under which reasons the others are dropped.
fn listener_line(d: &DestFilter) -> String {
    let mut refused = Vec::new();
    if d.host_mac.is_some() && !d.other_host {
        refused.push("dst_other_host");
    }
    if !d.broadcast {
        refused.push("dst_broadcast");
    }
    if !d.multicast {
        refused.push("dst_multicast");
    }
    let taken = match d.host_mac {
        Some(m) => d.describe().replacen("this host", &format!("this host ({})", mac_text(&m)), 1),
        None => d.describe(),
    };
    if refused.is_empty() {
        format!("listener: takes {taken}")
    } else {
        format!("listener: takes {taken}; drops the rest as {} (--listen-dst adds them)", refused.join(", "))
    }
}

/// Version of the `run --json` document (`schema`). v2: the `run` object
/// (what ran: source, workload, limits) replaced v1's `config` (the flags,
/// generator ones even for a capture), and `warnings` carries every warning
/// printed, not only the engine's. Fields added since, within v2:
/// `stopped_by` (duration, packets, sources_done, interrupted,
/// source_failed), `aborted`, `interrupted` (null, or the signal, when, and
/// whether a second signal cut the drain short), `rate` (the `rate:` or
/// `offered:` line's figures; null for a live source) and the generator
/// workload's `rate_pps`; `run.xdp` for an AF_XDP source (`mode`: native
/// or generic; `fallback`: null, or why native mode was refused);
/// `run.listen_dst` (the interface's MAC, null for gen and pcap sources,
/// and which of other hosts' unicast, broadcast and multicast are taken).
const RUN_SCHEMA: &str = "flowsteer.run.v2";

/// What `--json` adds to the engine's report: how a signal ended the run,
/// and how its rate reads.
struct Extra<'a> {
    interrupted: Option<&'a Interruption>,
    rate: serde_json::Value,
}

fn print_json(
    r: &RunReport,
    run: serde_json::Value,
    warnings: &[String],
    key: &flowsteer_rss::RssKey,
    one_line: bool,
    extra: &Extra<'_>,
) -> Result<()> {
    let mut v = serde_json::to_value(r)?;
    v["schema"] = RUN_SCHEMA.into();
    v["run"] = run;
    v["interrupted"] = extra.interrupted.map_or(serde_json::Value::Null, Interruption::json);
    v["rate"] = extra.rate.clone();
    v["warnings"] = serde_json::to_value(warnings)?;
    add_drawn_key(&mut v, key);
    if one_line {
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

/// `--fanout` as the AF_PACKET backend takes it.
fn fanout_choice(mode: &str) -> Result<FanoutChoice> {
    Ok(match mode {
        "rss" => FanoutChoice::Rss,
        "hash" => FanoutChoice::Hash,
        "cpu" => FanoutChoice::Cpu,
        "qm" => FanoutChoice::QueueMapping,
        "lb" => FanoutChoice::LoadBalance,
        m => return Err(usage(format!("--fanout '{m}': expected rss, hash, cpu, qm or lb"))),
    })
}

/// `--listen-dst` with, for a live source, its interface's MAC (what
/// "unicast to this host" means).
fn dest_filter(list: &[String], live: Option<&LiveSpec>) -> Result<DestFilter> {
    let on = |what: &str| list.iter().any(|l| l == what || l == "all");
    let host_mac = match live {
        Some(LiveSpec::Xdp { iface, .. } | LiveSpec::Packet { iface }) => {
            let link = LinkReader::new()
                .and_then(|mut r| r.read_name(iface))
                .with_context(|| format!("--source: reading {iface}'s address"))?;
            link.and_then(|l| l.mac)
        }
        None => None,
    };
    Ok(DestFilter { host_mac, other_host: on("other-host"), broadcast: on("broadcast"), multicast: on("multicast") })
}

/// `--listen` as (protocol, port) pairs.
fn parse_listen(list: &[String]) -> Result<Vec<(u8, u16)>> {
    list.iter()
        .map(|l| {
            let (proto, port) =
                l.split_once(':').ok_or_else(|| usage(format!("--listen '{l}': expected proto:port")))?;
            let proto = match proto {
                "udp" => flowsteer_wire::proto::UDP,
                "tcp" => flowsteer_wire::proto::TCP,
                _ => return Err(usage(format!("--listen '{l}': protocol must be udp or tcp"))),
            };
            let port: u16 = port.parse().map_err(|_| usage(format!("--listen '{l}': bad port (0..=65535)")))?;
            Ok((proto, port))
        })
        .collect()
}

/// What the XDP program of `--source afxdp:IFACE` claims: the `--listen`
/// ports (and their protocols' fragments, which the engine reassembles),
/// or with `--xdp-claim all` every IP packet, said in a warning. Without
/// either there is nothing to claim: refuse rather than take the host's
/// traffic silently.
fn xdp_claim(args: &RunArgs, listen: &[(u8, u16)], iface: &str, warnings: &mut Vec<String>) -> Result<Claim> {
    if crate::cmd::xdp_claim_all(&args.xdp_claim)? {
        warnings.push(crate::cmd::claim_all_warning(iface));
        return Ok(Claim::All);
    }
    if listen.is_empty() {
        return Err(usage(format!(
            "--source afxdp:{iface} takes from the kernel only the ports flowsteer listens on: give --listen \
             PROTO:PORT[,...] (e.g. --listen udp:9000), or --xdp-claim all to take every IP packet of {iface} \
             (cuts off ping, SSH and everything else the kernel handles there)"
        )));
    }
    let ports = |proto: u8| listen.iter().filter(|(p, _)| *p == proto).map(|(_, port)| *port).collect();
    Ok(Claim::Ports {
        udp: ports(flowsteer_wire::proto::UDP),
        tcp: ports(flowsteer_wire::proto::TCP),
        fragments: Fragments::Claim,
    })
}
