//! TCP throughput between two hosts through a device under test
//! (`flowsteer bench tcp`): iperf3 in two network namespaces, the DUT in a
//! third between them, every DUT in the same run.
//!
//! ```text
//!  ns host 1                 ns hub (the DUT)                          ns host 2
//!  h1 10.K.0.1  <-- veth -->  hub_dev(1) [br0 | flowsteer bridge] hub_dev(2)  <-- veth -->  h2 10.K.0.2
//!  iperf3 -c -P STREAMS -J                                                     iperf3 -s -1 -B 10.K.0.2
//! ```
//!
//! The topology is a [`flowsteer_netns::Star`] of two hosts, a fresh one
//! per DUT, removed when it drops (also on an error or a panic; the
//! flowsteer bridge is stopped, its XDP programs detached, before). Its
//! veths keep the kernel's default offloads, and nothing here changes
//! them: a host's TCP frames leave with partial checksums (transmit
//! checksum offload) and as GSO segments of up to 64 KB, as between
//! containers on one machine. The report records them (`ethtool -k` on
//! the hosts' veths, when ethtool is installed).
//!
//! DUTs ([`DUTS`]): `linux-bridge` ([`crate::dut::linux_bridge`]: netfilter
//! calls off in the hub, STP and multicast snooping off), and the flowsteer
//! bridge over AF_XDP (`flowsteer-bridge`) or AF_PACKET
//! (`flowsteer-bridge-afpacket`) ports, started in-process in the hub
//! ([`crate::bridge::BridgeDut::start_on`]), one worker, not pinned, at
//! nice [`crate::bridge::WORKER_NICE`].
//!
//! Per DUT: build, start, ping host 2 from host 1 (at most
//! [`PING_TIMEOUT`]), then per streams value [`TcpConfig::repeat`] runs of
//! [`iperf::run`]: a one-off server in host 2 on [`PORT`], the client in
//! host 1 for [`TcpConfig::seconds`], every child bounded by a deadline and
//! killed past it. A failure (building the DUT, the ping, one run) is
//! recorded where it happened, with iperf3's own error text, and the next
//! run goes on; only a bad configuration or a machine that cannot run the
//! bench ([`skip_reason`]) fail [`run`] itself.
//!
//! Figures: a run's rate is iperf3's `end.sum_received.bits_per_second`
//! (TCP payload host 2 received); a cell (DUT x streams) reports the median
//! of its runs that succeeded (the mean of the middle two for an even
//! count), their min and max, the median retransmissions
//! (`end.sum_sent.retransmits`) and the ratio of its median to
//! linux-bridge's at the same streams. For the flowsteer DUTs each run and
//! each cell carry the bridge's own counts over it ([`DutCounters`]), so a
//! failed cell can be explained (dropped by reason, not sent).

pub mod iperf;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowsteer_bridge::BridgeStats;
use flowsteer_netns::Star;
use serde::Serialize;

use crate::bridge::{BridgeDut, DutCounters};
use crate::dut::DutKind;
use crate::Error;

/// Schema of the report.
pub const SCHEMA: &str = "flowsteer.bench.tcp.v1";
/// The TCP port the server listens on (iperf3's default), in host 2.
pub const PORT: u16 = 5201;
/// How long host 1 may take to get a ping reply from host 2 through a new DUT.
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Most parallel streams (iperf3's `-P` limit).
pub const MAX_STREAMS: u16 = 128;
/// Longest run, seconds (iperf3's `-t` limit, one day).
pub const MAX_SECONDS: u32 = 86_400;
/// Most runs per cell.
pub const MAX_REPEAT: u32 = 100;
/// The DUTs this bench builds, in the order it measures them by default.
pub const DUTS: [DutKind; 4] =
    [DutKind::LinuxBridge, DutKind::FlowsteerBridge, DutKind::FlowsteerBridgeAfpacket, DutKind::FlowsteerBridgeXdp];
/// The offloads the report records for each host's veth (`ethtool -k` names).
pub const OFFLOADS: [&str; 4] =
    ["tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"];

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TcpConfig {
    /// DUTs, measured in this order (each of [`DUTS`], once).
    pub duts: Vec<DutKind>,
    /// Parallel streams per cell (`iperf3 -P`), each 1..=[`MAX_STREAMS`].
    pub streams: Vec<u16>,
    /// Seconds per run (`iperf3 -t`), 1..=[`MAX_SECONDS`].
    pub seconds: u32,
    /// Runs per cell, 1..=[`MAX_REPEAT`].
    pub repeat: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig { duts: DUTS.to_vec(), streams: vec![1, 4], seconds: 10, repeat: 3 }
    }
}

impl TcpConfig {
    /// Checks every value; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.duts.is_empty() {
            return bad("at least one DUT".into());
        }
        for (i, d) in self.duts.iter().enumerate() {
            if !DUTS.contains(d) {
                return bad(format!("DUT {}: bench tcp builds {}", d.name(), names(&DUTS)));
            }
            if self.duts[..i].contains(d) {
                return bad(format!("DUT {} given twice", d.name()));
            }
        }
        if self.streams.is_empty() || self.streams.iter().any(|s| !(1..=MAX_STREAMS).contains(s)) {
            return bad(format!("streams: at least one value, each in 1..={MAX_STREAMS}"));
        }
        if !(1..=MAX_SECONDS).contains(&self.seconds) {
            return bad(format!("seconds: 1..={MAX_SECONDS}"));
        }
        if !(1..=MAX_REPEAT).contains(&self.repeat) {
            return bad(format!("repeat: 1..={MAX_REPEAT}"));
        }
        Ok(())
    }

    /// About how long [`run`] takes when every run succeeds (a run: its
    /// seconds and about 1.5 s of start and end; a DUT: about 3 s to
    /// build, start and ping). A failed run takes the connect timeout.
    pub fn estimate(&self) -> Duration {
        let runs = (self.duts.len() * self.streams.len()) as u32 * self.repeat;
        Duration::from_secs(u64::from(runs * self.seconds))
            + Duration::from_millis(1500) * runs
            + Duration::from_secs(3) * self.duts.len() as u32
    }
}

fn names(duts: &[DutKind]) -> String {
    duts.iter().map(DutKind::name).collect::<Vec<_>>().join(", ")
}

/// Why this machine cannot run the bench (not root, no `ip`, no iperf3), or `None`.
pub fn skip_reason() -> Option<String> {
    flowsteer_netns::skip_reason().or_else(|| iperf::version().err())
}

/// The machine the run happened on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Machine {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// `iperf3 --version`'s first line.
    pub iperf3: String,
}

/// One DUT's topology: built and reachable, or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DutSetup {
    /// The DUT.
    pub dut: DutKind,
    /// Why no run was tried (the topology, the DUT or the ping failed).
    pub error: Option<String>,
    /// Seconds until host 1 had a ping reply from host 2.
    pub ping_s: Option<f64>,
    /// Offloads of each host's veth (`h1`, `h2`) as `ethtool -k` shows
    /// them ([`OFFLOADS`]); empty when ethtool is not installed.
    pub offloads: BTreeMap<String, BTreeMap<String, String>>,
    /// The flowsteer bridge's counts from its start to the ping's reply.
    pub setup_counters: Option<DutCounters>,
}

/// One iperf3 run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunRecord {
    /// 1-based.
    pub run: u32,
    /// `end.sum_received.bits_per_second` (`None`: the run failed).
    pub bits_per_second: Option<f64>,
    /// `end.sum_sent.bits_per_second`.
    pub sent_bits_per_second: Option<f64>,
    /// `end.sum_sent.retransmits`.
    pub retransmits: Option<u64>,
    /// Why it failed: iperf3's error text, or what the harness saw.
    pub error: Option<String>,
    /// Wall-clock seconds of the run, server start to both gone.
    pub elapsed_s: f64,
    /// The flowsteer bridge's counts over the run.
    pub dut_counters: Option<DutCounters>,
}

/// One DUT at one streams value: its runs and their summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// The DUT.
    pub dut: DutKind,
    /// Parallel streams.
    pub streams: u16,
    /// Every run tried succeeded (and at least one was).
    pub ok: bool,
    /// Runs that succeeded.
    pub ok_runs: usize,
    /// Median received rate over the runs that succeeded, bits/s.
    pub bits_per_second: Option<f64>,
    /// The slowest of them.
    pub bits_per_second_min: Option<f64>,
    /// The fastest of them.
    pub bits_per_second_max: Option<f64>,
    /// Median retransmissions per run.
    pub retransmits: Option<f64>,
    /// `bits_per_second` over linux-bridge's at the same streams, same run.
    pub vs_linux_bridge: Option<f64>,
    /// The first failure: the DUT's setup, or a run's (`run N: ...`).
    pub error: Option<String>,
    /// The flowsteer bridge's counts over all the cell's runs.
    pub dut_counters: Option<DutCounters>,
    /// Every run, in order.
    pub runs: Vec<RunRecord>,
}

/// The median of `v` (the mean of the middle two for an even count), or
/// `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

impl Cell {
    /// A cell's summary of `runs`; `setup_error` when none could be tried.
    pub fn summarise(
        dut: DutKind,
        streams: u16,
        runs: Vec<RunRecord>,
        dut_counters: Option<DutCounters>,
        setup_error: Option<&str>,
    ) -> Cell {
        let rates: Vec<f64> = runs.iter().filter_map(|r| r.bits_per_second).collect();
        let retrans: Vec<f64> = runs
            .iter()
            .filter(|r| r.bits_per_second.is_some())
            .filter_map(|r| r.retransmits)
            .map(|n| n as f64)
            .collect();
        let error = setup_error
            .map(String::from)
            .or_else(|| runs.iter().find_map(|r| r.error.as_ref().map(|e| format!("run {}: {e}", r.run))));
        Cell {
            dut,
            streams,
            ok: !rates.is_empty() && rates.len() == runs.len() && setup_error.is_none(),
            ok_runs: rates.len(),
            bits_per_second: median(&rates),
            bits_per_second_min: rates.iter().copied().reduce(f64::min),
            bits_per_second_max: rates.iter().copied().reduce(f64::max),
            retransmits: median(&retrans),
            vs_linux_bridge: None,
            error,
            dut_counters,
            runs,
        }
    }
}

/// Sets every cell's ratio to linux-bridge's median at the same streams.
pub fn compare_to_linux_bridge(cells: &mut [Cell]) {
    let base: BTreeMap<u16, f64> = cells
        .iter()
        .filter(|c| c.dut == DutKind::LinuxBridge)
        .filter_map(|c| Some((c.streams, c.bits_per_second.filter(|b| *b > 0.0)?)))
        .collect();
    for c in cells {
        c.vs_linux_bridge = c.bits_per_second.zip(base.get(&c.streams)).map(|(b, l)| b / l);
    }
}

/// The report (`--json`: this, schema [`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// What was asked.
    pub config: TcpConfig,
    /// The TCP port.
    pub port: u16,
    /// Each DUT's setup, in order.
    pub duts: Vec<DutSetup>,
    /// One cell per DUT and streams value, in order.
    pub results: Vec<Cell>,
    /// False when a signal stopped the run (the cells that finished are here).
    pub complete: bool,
    /// Seconds the whole run took.
    pub elapsed_s: f64,
}

/// What [`run`] reports while it runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// A DUT is built and reachable, or failed to be.
    Setup(&'a DutSetup),
    /// A run ended.
    Run {
        /// The DUT.
        dut: DutKind,
        /// Its streams.
        streams: u16,
        /// The run.
        record: &'a RunRecord,
    },
}

/// Measures every DUT x streams x repeat of `cfg`. `stop` (set by the
/// caller's signal handler) ends it after the current run, which is
/// discarded; the report then says `complete: false`.
pub fn run(cfg: &TcpConfig, stop: Option<Arc<AtomicBool>>, on: &mut dyn FnMut(Event<'_>)) -> Result<Report, Error> {
    cfg.validate()?;
    if let Some(why) = flowsteer_netns::skip_reason() {
        return Err(Error::Unavailable(why));
    }
    let iperf3 = iperf::version().map_err(Error::Unavailable)?;
    let started = Instant::now();
    let mut report = Report {
        schema: SCHEMA,
        machine: Machine {
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            iperf3,
        },
        config: cfg.clone(),
        port: PORT,
        duts: Vec::new(),
        results: Vec::new(),
        complete: true,
        elapsed_s: 0.0,
    };
    let stop = stop.as_deref();
    for &dut in &cfg.duts {
        if stopped(stop) {
            report.complete = false;
            break;
        }
        let (setup, cells, complete) = measure_dut(dut, cfg, stop, on);
        report.duts.push(setup);
        report.results.extend(cells);
        if !complete {
            report.complete = false;
            break;
        }
    }
    compare_to_linux_bridge(&mut report.results);
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn stopped(stop: Option<&AtomicBool>) -> bool {
    stop.is_some_and(|s| s.load(Ordering::Relaxed))
}

/// A DUT running in a star's hub: the Linux bridge lives in the hub's
/// namespace (gone with it); the flowsteer bridge is stopped on drop.
struct Built {
    // Field order is drop order: the bridge (its XDP programs detached)
    // before the namespaces.
    bridge: Option<BridgeDut>,
    star: Star,
}

impl Built {
    fn new(dut: DutKind) -> Result<Built, String> {
        let star = Star::new("btcp", 2).map_err(|e| format!("building the namespaces: {e}"))?;
        let hub = star.hub_ns().to_string();
        let ports = [star.hub_dev(1), star.hub_dev(2)];
        let bridge = match dut.bridge_ports() {
            Some(kind) => {
                if dut == DutKind::FlowsteerBridgeXdp {
                    // A veth takes frames an XDP program redirects into it
                    // only while its peer has GRO on (what the bridge tells
                    // its user); the hosts' veths are those peers.
                    for i in [1, 2] {
                        let dev = star.host_dev(i);
                        flowsteer_netns::ip(&["netns", "exec", star.host_ns(i), "ethtool", "-K", &dev, "gro", "on"])
                            .map_err(|e| format!("GRO on host {i}'s veth for the fast path: {e}"))?;
                    }
                }
                let fast = dut.bridge_fast_path();
                Some(BridgeDut::start_on(&hub, kind, fast, &ports, &[]).map_err(|e| format!("starting the DUT: {e}"))?)
            }
            None => {
                crate::dut::linux_bridge(&hub, &ports).map_err(|e| format!("building the Linux bridge: {e}"))?;
                None
            }
        };
        Ok(Built { bridge, star })
    }

    fn stats(&self) -> Option<BridgeStats> {
        self.bridge.as_ref().and_then(BridgeDut::stats)
    }
}

fn between(before: &Option<BridgeStats>, after: &Option<BridgeStats>) -> Option<DutCounters> {
    before.as_ref().zip(after.as_ref()).map(|(b, a)| DutCounters::between(b, a))
}

/// One DUT: its setup, its cells, and false when `stop` cut it short.
fn measure_dut(
    dut: DutKind,
    cfg: &TcpConfig,
    stop: Option<&AtomicBool>,
    on: &mut dyn FnMut(Event<'_>),
) -> (DutSetup, Vec<Cell>, bool) {
    let mut setup = DutSetup::new(dut);
    let failed = |setup: DutSetup, on: &mut dyn FnMut(Event<'_>)| {
        on(Event::Setup(&setup));
        let why = setup.error.clone().unwrap_or_default();
        let cells = cfg.streams.iter().map(|&s| Cell::summarise(dut, s, Vec::new(), None, Some(&why))).collect();
        (setup, cells, true)
    };
    let built = match Built::new(dut) {
        Ok(b) => b,
        Err(e) => {
            setup.error = Some(e);
            return failed(setup, on);
        }
    };
    let star = &built.star;
    setup.offloads = (1..=2).filter_map(|i| Some((star.host_dev(i), offloads_of(star, i)?))).collect();
    let before = built.stats();
    let t0 = Instant::now();
    let to: IpAddr = star.v4(2).into();
    let ping = star.run_in(1, move || flowsteer_netns::ping(to, PING_TIMEOUT));
    setup.setup_counters = between(&before, &built.stats());
    match ping {
        Ok(Ok(true)) => setup.ping_s = Some(t0.elapsed().as_secs_f64()),
        Ok(Ok(false)) => {
            setup.error =
                Some(format!("host 1 had no ping reply from host 2 ({to}) through the DUT within {PING_TIMEOUT:?}"));
            return failed(setup, on);
        }
        Ok(Err(e)) => {
            setup.error = Some(format!("ping from host 1: {e}"));
            return failed(setup, on);
        }
        Err(e) => {
            setup.error = Some(format!("ping from host 1: {e}"));
            return failed(setup, on);
        }
    }
    on(Event::Setup(&setup));
    let mut cells = Vec::new();
    for &streams in &cfg.streams {
        let cell_before = built.stats();
        let mut runs = Vec::new();
        let test = iperf::Test {
            server_ns: star.host_ns(2),
            client_ns: star.host_ns(1),
            addr: star.v4(2),
            port: PORT,
            seconds: cfg.seconds,
            streams,
        };
        for run in 1..=cfg.repeat {
            let before = built.stats();
            let t0 = Instant::now();
            let result = iperf::run(&test, stop);
            if matches!(result, Err(iperf::IperfError::Stopped)) || stopped(stop) {
                if !runs.is_empty() {
                    cells.push(Cell::summarise(dut, streams, runs, between(&cell_before, &built.stats()), None));
                }
                return (setup, cells, false);
            }
            let mut record = RunRecord {
                run,
                elapsed_s: t0.elapsed().as_secs_f64(),
                dut_counters: between(&before, &built.stats()),
                ..RunRecord::default()
            };
            match result {
                Ok(m) => {
                    record.bits_per_second = Some(m.received_bps);
                    record.sent_bits_per_second = Some(m.sent_bps);
                    record.retransmits = m.retransmits;
                }
                Err(e) => record.error = Some(e.to_string()),
            }
            on(Event::Run { dut, streams, record: &record });
            runs.push(record);
        }
        cells.push(Cell::summarise(dut, streams, runs, between(&cell_before, &built.stats()), None));
    }
    (setup, cells, true)
}

/// [`OFFLOADS`] of host i's veth (`ethtool -k` in its namespace); `None`
/// without ethtool.
fn offloads_of(star: &Star, i: usize) -> Option<BTreeMap<String, String>> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", star.host_ns(i), "ethtool", "-k", &star.host_dev(i)])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(parse_offloads(&String::from_utf8_lossy(&out.stdout)))
}

/// [`OFFLOADS`] from `ethtool -k` output (`name: on [fixed]`).
pub fn parse_offloads(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(':')?;
            let value = value.split_whitespace().next()?;
            OFFLOADS.contains(&name).then(|| (name.to_string(), value.to_string()))
        })
        .collect()
}

fn gbit(b: Option<f64>) -> String {
    b.map_or("-".into(), |b| format!("{:.2}", b / 1e9))
}

/// `received R, forwarded F, ... conservation ok` for one counts record.
pub fn counters_text(c: &DutCounters) -> String {
    let reasons = |m: &BTreeMap<String, u64>| {
        let total: u64 = m.values().sum();
        if m.is_empty() {
            total.to_string()
        } else {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            format!("{total} ({})", parts.join(", "))
        }
    };
    format!(
        "received {}, forwarded {}, flooded {}, dropped {}, transmitted {}, tx_dropped {}; conservation {}",
        c.received,
        c.forwarded,
        c.flooded,
        reasons(&c.dropped),
        c.transmitted,
        reasons(&c.tx_dropped),
        if c.conservation_ok { "ok" } else { "VIOLATED" }
    )
}

fn streams_text(n: u16) -> String {
    format!("{n} stream{}", if n == 1 { "" } else { "s" })
}

impl DutSetup {
    /// Not built yet.
    pub fn new(dut: DutKind) -> DutSetup {
        DutSetup { dut, error: None, ping_s: None, offloads: BTreeMap::new(), setup_counters: None }
    }
}

impl Report {
    /// Cells with a failed run, or no run at all.
    pub fn failed_cells(&self) -> usize {
        self.results.iter().filter(|c| !c.ok).count()
    }

    /// The table (one row per cell), then each failure, the flowsteer
    /// bridge's counts per cell, and the time taken.
    pub fn text(&self) -> String {
        let m = &self.machine;
        let c = &self.config;
        let mut out = format!("machine: {} CPUs, kernel {}, {}\n", m.cpus, m.kernel, m.iperf3);
        let _ = writeln!(
            out,
            "path: host 1 (iperf3 client) -> veth -> DUT namespace -> veth -> host 2 (iperf3 server, port {}); veth offloads as the kernel leaves them",
            self.port
        );
        if let Some((dut, (dev, o))) = self.duts.iter().find_map(|d| d.offloads.iter().next().map(|o| (d.dut, o))) {
            let list: Vec<String> = o.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(out, "offloads ({dev} of {}'s star, ethtool -k): {}", dut.name(), list.join(", "));
        } else {
            out += "offloads: not read (no ethtool)\n";
        }
        let streams: Vec<String> = c.streams.iter().map(u16::to_string).collect();
        let _ = writeln!(
            out,
            "runs: {} s each, {} per cell, streams {}; median of the runs that succeeded",
            c.seconds,
            c.repeat,
            streams.join(",")
        );
        out.push('\n');
        let header = ["dut", "streams", "Gbit/s", "min", "max", "retrans", "x linux-bridge", "runs"];
        let mut rows: Vec<[String; 8]> = vec![header.map(String::from)];
        for cell in &self.results {
            let tried = cell.runs.len();
            rows.push([
                cell.dut.name().to_string(),
                cell.streams.to_string(),
                if cell.ok_runs == 0 { "failed".into() } else { gbit(cell.bits_per_second) },
                gbit(cell.bits_per_second_min),
                gbit(cell.bits_per_second_max),
                cell.retransmits.map_or("-".into(), |r| format!("{r:.0}")),
                cell.vs_linux_bridge.map_or("-".into(), |r| format!("{r:.2}")),
                format!("{}/{tried}", cell.ok_runs),
            ]);
        }
        let widths: Vec<usize> = (0..8).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(
                    |(i, c)| if i == 0 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) },
                )
                .collect();
            out += cells.join("  ").trim_end();
            out.push('\n');
        }
        let mut failures = Vec::new();
        for d in &self.duts {
            if let Some(e) = &d.error {
                failures.push(format!("  {}: {e}", d.dut.name()));
            }
        }
        for cell in &self.results {
            for r in &cell.runs {
                if let Some(e) = &r.error {
                    failures.push(format!("  {} {} run {}: {e}", cell.dut.name(), streams_text(cell.streams), r.run));
                }
            }
        }
        if !failures.is_empty() {
            out += "\nfailed:\n";
            out += &failures.join("\n");
            out.push('\n');
        }
        let mut counts = Vec::new();
        for d in &self.duts {
            if let Some(k) = &d.setup_counters {
                counts.push(format!("  {} setup and ping: {}", d.dut.name(), counters_text(k)));
            }
            for cell in self.results.iter().filter(|c| c.dut == d.dut) {
                if let Some(k) = &cell.dut_counters {
                    counts.push(format!("  {} {}: {}", cell.dut.name(), streams_text(cell.streams), counters_text(k)));
                }
            }
        }
        if !counts.is_empty() {
            out += "\nflowsteer bridge counters, summed over its two ports:\n";
            out += &counts.join("\n");
            out.push('\n');
        }
        if !self.complete {
            out += "stopped by a signal: the cells above are the ones that finished\n";
        }
        let _ = writeln!(out, "elapsed {:.0} s", self.elapsed_s);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_run(run: u32, gbps: f64, retrans: u64) -> RunRecord {
        RunRecord {
            run,
            bits_per_second: Some(gbps * 1e9),
            sent_bits_per_second: Some(gbps * 1e9),
            retransmits: Some(retrans),
            ..RunRecord::default()
        }
    }

    fn failed_run(run: u32, e: &str) -> RunRecord {
        RunRecord { run, error: Some(e.into()), ..RunRecord::default() }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn a_cell_summarises_the_runs_that_succeeded_and_names_the_first_failure() {
        let runs = vec![ok_run(1, 9.0, 10), failed_run(2, "unable to connect"), ok_run(3, 11.0, 30)];
        let c = Cell::summarise(DutKind::LinuxBridge, 1, runs, None, None);
        assert!(!c.ok);
        assert_eq!(c.ok_runs, 2);
        assert_eq!(c.bits_per_second, Some(10e9));
        assert_eq!((c.bits_per_second_min, c.bits_per_second_max), (Some(9e9), Some(11e9)));
        assert_eq!(c.retransmits, Some(20.0));
        assert_eq!(c.error.as_deref(), Some("run 2: unable to connect"));
        let all = Cell::summarise(DutKind::LinuxBridge, 1, vec![ok_run(1, 9.0, 0)], None, None);
        assert!(all.ok && all.error.is_none());
    }

    #[test]
    fn a_dut_that_could_not_be_built_fails_its_cells_with_no_run() {
        let c = Cell::summarise(DutKind::FlowsteerBridge, 4, Vec::new(), None, Some("no ping"));
        assert!(!c.ok);
        assert_eq!((c.ok_runs, c.bits_per_second, c.error.as_deref()), (0, None, Some("no ping")));
    }

    #[test]
    fn ratios_are_to_linux_bridge_at_the_same_streams() {
        let mut cells = vec![
            Cell::summarise(DutKind::LinuxBridge, 1, vec![ok_run(1, 10.0, 0)], None, None),
            Cell::summarise(DutKind::LinuxBridge, 4, vec![ok_run(1, 20.0, 0)], None, None),
            Cell::summarise(DutKind::FlowsteerBridge, 1, vec![ok_run(1, 5.0, 0)], None, None),
            Cell::summarise(DutKind::FlowsteerBridge, 4, vec![failed_run(1, "x")], None, None),
            Cell::summarise(DutKind::FlowsteerBridgeAfpacket, 2, vec![ok_run(1, 5.0, 0)], None, None),
        ];
        compare_to_linux_bridge(&mut cells);
        let r: Vec<Option<f64>> = cells.iter().map(|c| c.vs_linux_bridge).collect();
        assert_eq!(r, vec![Some(1.0), Some(1.0), Some(0.5), None, None]);
    }

    #[test]
    fn config_checks_name_the_bad_value() {
        assert!(TcpConfig::default().validate().is_ok());
        let bad = |f: &dyn Fn(&mut TcpConfig)| {
            let mut c = TcpConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.duts = vec![DutKind::Patch]).contains("patch"));
        assert!(bad(&|c| c.duts = vec![DutKind::LinuxBridge, DutKind::LinuxBridge]).contains("twice"));
        assert!(bad(&|c| c.streams = vec![0]).contains("streams"));
        assert!(bad(&|c| c.streams = vec![129]).contains("streams"));
        assert!(bad(&|c| c.seconds = 0).contains("seconds"));
        assert!(bad(&|c| c.repeat = 0).contains("repeat"));
        // 4 DUTs x 2 streams x 3 runs of 10 s, 1.5 s each more, 3 s per DUT.
        assert_eq!(TcpConfig::default().estimate(), Duration::from_secs(240 + 36 + 12));
    }

    #[test]
    fn offloads_are_read_from_ethtool_k() {
        let text = "Features for h1:\nrx-checksumming: on\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\n\
                    tcp-segmentation-offload: on\ngeneric-segmentation-offload: on\ngeneric-receive-offload: off\n";
        let o = parse_offloads(text);
        assert_eq!(o.len(), 4, "{o:?}");
        assert_eq!(o["tx-checksumming"], "on");
        assert_eq!(o["generic-receive-offload"], "off");
    }

    fn report(results: Vec<Cell>, duts: Vec<DutSetup>) -> Report {
        Report {
            schema: SCHEMA,
            machine: Machine { kernel: "6.1".into(), cpus: 2, iperf3: "iperf 3.12".into() },
            config: TcpConfig::default(),
            port: PORT,
            duts,
            results,
            complete: true,
            elapsed_s: 12.0,
        }
    }

    #[test]
    fn the_table_is_aligned_and_failures_and_counters_follow_it() {
        let counters =
            DutCounters { received: 7, forwarded: 3, flooded: 1, conservation_ok: true, ..Default::default() };
        let mut counters_drop = counters.clone();
        counters_drop.dropped.insert("too_big".into(), 3);
        let mut cells = vec![
            Cell::summarise(DutKind::LinuxBridge, 1, vec![ok_run(1, 10.0, 12)], None, None),
            Cell::summarise(
                DutKind::FlowsteerBridge,
                1,
                vec![failed_run(1, "unable to connect to server: Connection timed out")],
                Some(counters_drop),
                None,
            ),
        ];
        compare_to_linux_bridge(&mut cells);
        let setups = vec![
            DutSetup::new(DutKind::LinuxBridge),
            DutSetup { setup_counters: Some(counters), ..DutSetup::new(DutKind::FlowsteerBridge) },
        ];
        let t = report(cells, setups).text();
        let table: Vec<&str> = t.lines().skip_while(|l| !l.starts_with("dut ")).take(3).collect();
        assert_eq!(table.len(), 3, "{t}");
        // Right-aligned columns end at the same place on every row.
        assert!(table.iter().all(|l| l.len() == table[0].len()), "{t}");
        assert!(table[1].starts_with("linux-bridge") && table[1].contains("10.00") && table[1].contains("1.00"), "{t}");
        assert!(table[2].contains("failed") && table[2].ends_with("0/1"), "{t}");
        assert!(
            t.contains("flowsteer-bridge 1 stream run 1: unable to connect to server: Connection timed out"),
            "{t}"
        );
        assert!(t.contains("flowsteer-bridge setup and ping: received 7, forwarded 3, flooded 1, dropped 0"), "{t}");
        assert!(
            t.contains("flowsteer-bridge 1 stream: received 7, forwarded 3, flooded 1, dropped 3 (too_big 3)"),
            "{t}"
        );
        assert!(t.contains("offloads: not read"), "{t}");
    }

    #[test]
    fn the_json_names_its_schema_duts_and_rates() {
        let cells = vec![Cell::summarise(DutKind::FlowsteerBridgeAfpacket, 4, vec![ok_run(1, 2.0, 0)], None, None)];
        let v = serde_json::to_value(report(cells, Vec::new())).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["results"][0]["dut"], "flowsteer-bridge-afpacket");
        assert_eq!(v["results"][0]["bits_per_second"], 2e9);
        assert_eq!(v["config"]["duts"][0], "linux-bridge");
    }

    #[test]
    fn the_json_shows_no_rust_forms() {
        let mut counters = DutCounters { received: 7, forwarded: 4, ..Default::default() };
        counters.dropped.insert("too_big".into(), 3);
        let runs = vec![ok_run(1, 2.0, 0), RunRecord { dut_counters: Some(counters.clone()), ..failed_run(2, "x") }];
        let mut cells = vec![
            Cell::summarise(DutKind::LinuxBridge, 1, vec![ok_run(1, 4.0, 1)], None, None),
            Cell::summarise(DutKind::FlowsteerBridgeXdp, 1, runs, Some(counters.clone()), None),
        ];
        compare_to_linux_bridge(&mut cells);
        let mut setup = DutSetup {
            setup_counters: Some(counters),
            ping_s: Some(0.01),
            ..DutSetup::new(DutKind::FlowsteerBridgeXdp)
        };
        setup.offloads.insert("h1".into(), BTreeMap::from([("tx-checksumming".to_string(), "on".to_string())]));
        let v = serde_json::to_value(report(cells, vec![setup, DutSetup::new(DutKind::LinuxBridge)])).unwrap();
        assert_eq!(crate::json::rust_forms(&v), Vec::<String>::new(), "{v:#}");
        assert_eq!((v["config"]["seconds"].as_u64(), v["duts"][0]["ping_s"].as_f64()), (Some(10), Some(0.01)));
    }
}
