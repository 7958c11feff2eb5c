//! A sweep: the generator's ceiling per frame size (`--dut none`, same CPU
//! placement), then for each DUT and frame size `repeat` searches, each
//! NDR and PDR (each repeat after the first tries first the interval the
//! one before found, see [`search`]), then latency trials at 50, 90 and
//! 99 % of the median NDR; the machine description; the report
//! (`flowsteer.rfc2544.v2`). The library prints nothing: the caller gets
//! [`Event`]s while it runs and the [`Report`] at the end.
//!
//! Before it runs, [`Plan::new`] says what a sweep will do and how long it
//! takes ([`Plan::estimate_s`], [`Plan::max_s`]), without building anything.
//!
//! In the JSON documents every duration is a number of seconds under a key
//! ending in `_s`, a frame size is its number of bytes or `"imix"`, and
//! every other choice a lowercase string.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bridge::DutCounters;
use crate::dut::{DutKind, Ports, Topology};
use crate::io::IoMode;
use crate::live::{LiveConfig, LiveRunner, TrialDetail};
use crate::search::{self, SearchConfig, Spread, TrialRecord};
use crate::spread::SpreadSpec;
use crate::Error;
use flowsteer_gen::frames::FrameSize;

/// JSON schema name of [`Report`]. v2: the durations of `config` are
/// seconds under `_s` keys (`trial_s`, not v1's `trial: {secs, nanos}`),
/// its frame sizes numbers or `"imix"` (not `{"Fixed": 64}`), `external`
/// an object `{tx, rx}` (not a two-element array).
pub const SCHEMA: &str = "flowsteer.rfc2544.v2";

/// JSON schema name of [`Plan`] (`flowsteer rfc2544 --dry-run --json`).
pub const PLAN_SCHEMA: &str = "flowsteer.rfc2544-plan.v1";

/// What to measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepConfig {
    /// Devices under test, in order (none: only the generator's ceiling).
    pub duts: Vec<DutKind>,
    /// Frame sizes, in order.
    pub sizes: Vec<FrameSize>,
    /// Full trial length.
    #[serde(rename = "trial_s", serialize_with = "crate::json::secs")]
    pub trial: Duration,
    /// Short trial length (at most `trial`).
    #[serde(rename = "short_trial_s", serialize_with = "crate::json::secs")]
    pub short_trial: Duration,
    /// Searches per (DUT, size).
    pub repeat: u32,
    /// Relative resolution of the search.
    pub resolution: f64,
    /// Wait after each trial.
    #[serde(rename = "wait_s", serialize_with = "crate::json::secs")]
    pub wait: Duration,
    /// Learning time before each trial.
    #[serde(rename = "learning_s", serialize_with = "crate::json::secs")]
    pub learning: Duration,
    /// Length of the generator-ceiling trial.
    #[serde(rename = "gen_max_trial_s", serialize_with = "crate::json::secs")]
    pub gen_max_trial: Duration,
    /// Flows.
    pub flows: u32,
    /// IPv6 frames.
    pub ipv6: bool,
    /// CPU of the generator thread.
    pub gen_cpu: Option<usize>,
    /// CPU of the receiver thread.
    pub rx_cpu: Option<usize>,
    /// CPUs given to the DUT ([`Topology::start`]): the flowsteer bridge's
    /// worker is pinned to the first; with `kernel_rps` the kernel's DUTs
    /// get RPS on their ports to these CPUs. Empty: the bridge is not
    /// pinned.
    pub dut_cpus: Vec<usize>,
    /// RPS on the kernel DUTs' ports to `dut_cpus`; off (the default), they
    /// forward in the sender's softirq on the generator's CPU, the kernel's
    /// fastest placement on veth.
    pub kernel_rps: bool,
    /// Search floor, frames/s.
    pub min_fps: f64,
    /// Two existing interfaces (transmit, receive) with a real device
    /// between them, measured after the built DUTs as `external` (the
    /// generator's ceiling is still measured on a veth pair of its own).
    /// In JSON: `{"tx": ..., "rx": ...}` or null.
    #[serde(serialize_with = "external_json")]
    pub external: Option<(String, String)>,
    /// Latency trials (full length) at these shares of the median NDR
    /// (RFC 2544 section 26.2; default 50, 90 and 99 %). Empty: none.
    pub latency_shares: Vec<f64>,
    /// Offered rate of the CPU-cost trial (frames/s), run on every DUT and
    /// on `none` at each size; `None`: no cost trial.
    pub cost_rate: Option<f64>,
    /// Socket family of the generator and receiver (default auto: AF_XDP,
    /// AF_PACKET when AF_XDP cannot be set up).
    pub io: IoMode,
    /// Both ends generate and receive at once, each direction at the
    /// offered rate (rates in the report are per direction).
    pub bidirectional: bool,
    /// Source ports planned onto N receive queues of this RSS
    /// configuration; `None`: ports count up from 1024.
    pub spread: Option<SpreadSpec>,
}

impl SweepConfig {
    /// Defaults: every RFC 2544 size, 60 s trials, 1 repeat.
    pub fn new(duts: Vec<DutKind>) -> SweepConfig {
        SweepConfig {
            duts,
            sizes: FrameSize::DEFAULTS.to_vec(),
            trial: Duration::from_secs(60),
            short_trial: Duration::from_secs(1),
            repeat: 1,
            resolution: search::DEFAULT_RESOLUTION,
            wait: Duration::from_secs(2),
            learning: Duration::from_millis(100),
            gen_max_trial: Duration::from_secs(2),
            flows: 16,
            ipv6: false,
            gen_cpu: None,
            rx_cpu: None,
            dut_cpus: Vec::new(),
            kernel_rps: false,
            min_fps: 1000.0,
            external: None,
            latency_shares: vec![0.5, 0.9, 0.99],
            cost_rate: None,
            io: IoMode::Auto,
            bidirectional: false,
            spread: None,
        }
    }

    fn search_config(&self, max_fps: f64) -> SearchConfig {
        let mut c = SearchConfig::new(max_fps);
        c.final_trial = self.trial;
        c.short_trial = self.short_trial.min(self.trial);
        c.resolution = self.resolution;
        c.wait = self.wait;
        c.learning = self.learning;
        c.min_fps = self.min_fps.min(max_fps / 2.0);
        c
    }

    /// How long the sweep usually takes at most, every DUT built:
    /// [`Plan::estimate_s`].
    pub fn estimate(&self) -> Duration {
        self.bound(self.duts.len() as u32 + u32::from(self.external.is_some()), 0).usual
    }

    /// The trial counts and the two times of a sweep that builds `duts`
    /// DUTs (`external` included), `ovs` of them Open vSwitch.
    fn bound(&self, duts: u32, ovs: u32) -> Bound {
        let search = self.search_config(1e6);
        let (short, full) = search.expected_trials();
        let usual = TrialCount { short, full };
        let sizes = self.sizes.len() as u32;
        let pairs = duts * sizes;
        let searches = pairs * self.repeat;
        let latency = self.latency_shares.len() as u32 * pairs;
        let cost = u32::from(self.cost_rate.is_some()) * (pairs + sizes);
        // Each trial: learning before, the wait after, and its overhead.
        let trial = |d: Duration| d + self.learning + self.wait + TRIAL_OVERHEAD;
        let (short_trial, full_trial) = (trial(search.short_trial), trial(search.final_trial));
        let extra = trial(self.gen_max_trial) * sizes + full_trial * (latency + cost);
        // The ceiling's `none` and every DUT, each size's sockets on each.
        let setup = SETUP_PER_DUT * (1 + duts) + SETUP_PER_OVS * ovs + SETUP_PER_SIZE * (sizes + pairs);
        let usual_time = (short_trial * usual.short + full_trial * usual.full) * searches + extra + setup;
        let max_time = full_trial * search.max_trials * searches + extra + setup;
        Bound {
            searches,
            search_max: search.max_trials,
            search_usual: usual,
            ceiling: sizes,
            latency,
            cost,
            max_trials: search.max_trials * searches + sizes + latency + cost,
            usual: usual_time,
            max: max_time,
        }
    }

    fn live(&self, size: FrameSize) -> LiveConfig {
        let mut l = LiveConfig::new(size);
        l.flows = self.flows;
        l.ipv6 = self.ipv6;
        l.gen_cpu = self.gen_cpu;
        l.rx_cpu = self.rx_cpu;
        l.wait = self.wait;
        l.learning = self.learning;
        l.io = self.io;
        l.bidirectional = self.bidirectional;
        l.spread = self.spread.clone().map(Arc::new);
        l
    }
}

/// What the estimates allow, per DUT built (the generator's ceiling's
/// `none` included), for building its namespaces and veths, starting it,
/// and removing it all after (measured: under 1 s for each DUT on veth).
pub const SETUP_PER_DUT: Duration = Duration::from_secs(3);
/// What they allow on top for Open vSwitch: starting `ovsdb-server` and
/// `ovs-vswitchd`, waiting for its AF_XDP ports, stopping them.
pub const SETUP_PER_OVS: Duration = Duration::from_secs(10);
/// Per (DUT, frame size) and per frame size of the ceiling: opening the
/// generator's and the receiver's sockets (AF_XDP: loading and attaching
/// the XDP program) and building the frames.
pub const SETUP_PER_SIZE: Duration = Duration::from_secs(1);
/// Per trial beyond its length, learning time and wait: the threads'
/// start and the transmit ring's drain (a few ms on veth).
pub const TRIAL_OVERHEAD: Duration = Duration::from_millis(100);

/// Trials of a search, by length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TrialCount {
    /// Short trials (`short_trial_s` long).
    pub short: u32,
    /// Full-length trials (`trial_s` long).
    pub full: u32,
}

/// Trial counts and times of a sweep ([`SweepConfig::bound`]).
struct Bound {
    searches: u32,
    search_max: u32,
    search_usual: TrialCount,
    ceiling: u32,
    latency: u32,
    cost: u32,
    max_trials: u32,
    usual: Duration,
    max: Duration,
}

/// `SweepConfig::external` in JSON: `{"tx": ..., "rx": ...}` or null.
fn external_json<S: serde::Serializer>(ext: &Option<(String, String)>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    match ext {
        None => s.serialize_none(),
        Some((tx, rx)) => {
            let mut st = s.serialize_struct("External", 2)?;
            st.serialize_field("tx", tx)?;
            st.serialize_field("rx", rx)?;
            st.end()
        }
    }
}

/// What a sweep will run, and how long it takes: known before anything is
/// built (`flowsteer rfc2544` prints it before the first trial,
/// `--dry-run` prints only this; schema [`PLAN_SCHEMA`]).
///
/// Two times, both counting every trial's length, learning time, wait and
/// [`TRIAL_OVERHEAD`], every latency and CPU-cost trial, and the set-up
/// allowances ([`SETUP_PER_DUT`], [`SETUP_PER_OVS`], [`SETUP_PER_SIZE`]):
///
/// * [`Plan::max_s`], an upper bound on any device: a search stops at
///   [`SearchConfig::max_trials`] trials, here all full-length;
/// * [`Plan::estimate_s`], what a sweep usually stays under: every search,
///   repeats included, runs the trials a first search takes on a device
///   whose loss rises with the rate ([`SearchConfig::expected_trials`]).
///   A repeat that finds the device where the search before it did takes
///   4 full-length trials, but devices move between searches: counting
///   each repeat as a first search covered the runs in BENCHMARKS.md,
///   which 4 did not (155 min against 120).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// [`PLAN_SCHEMA`].
    pub schema: &'static str,
    /// The configuration, as the report's `config` gives it.
    pub config: SweepConfig,
    /// The DUTs that will be measured, in order (`external` last).
    pub duts: Vec<String>,
    /// DUTs this machine cannot build (`ovs` without Open vSwitch), and
    /// why: not measured, not in the times.
    pub skipped: Vec<SkippedDut>,
    /// Searches: DUTs x frame sizes x repeats.
    pub searches: u32,
    /// Trials one search runs at most, on any device
    /// ([`SearchConfig::max_trials`], both goals together).
    pub search_max_trials: u32,
    /// Trials a search usually runs ([`SearchConfig::expected_trials`]).
    pub search_usual_trials: TrialCount,
    /// Generator-ceiling trials, one per frame size, `gen_max_trial_s` long.
    pub ceiling_trials: u32,
    /// Latency trials at most, full-length: one per share of
    /// `latency_shares` and (DUT, frame size) with an NDR.
    pub latency_trials: u32,
    /// CPU-cost trials, full-length: one per (DUT, frame size) and one per
    /// frame size on `none` (0 without `cost_rate`).
    pub cost_trials: u32,
    /// Trials of the whole sweep at most.
    pub max_trials: u32,
    /// What the sweep usually stays under, seconds.
    pub estimate_s: f64,
    /// What it takes at most, on any device, seconds.
    pub max_s: f64,
}

impl Plan {
    /// The plan of `cfg` on this machine (a DUT it cannot build is
    /// skipped, as [`run`] skips it). Builds nothing; fails only on a
    /// configuration [`run`] refuses.
    pub fn new(cfg: &SweepConfig) -> Result<Plan, Error> {
        check(cfg)?;
        let mut duts = Vec::new();
        let mut skipped = Vec::new();
        let mut ovs = 0;
        for dut in &cfg.duts {
            match dut.skip_reason() {
                Some(reason) => skipped.push(SkippedDut { dut: dut.name().into(), reason }),
                None => {
                    duts.push(dut.name().to_string());
                    ovs += u32::from(*dut == DutKind::Ovs);
                }
            }
        }
        if cfg.external.is_some() {
            duts.push(DutKind::External.name().to_string());
        }
        let b = cfg.bound(duts.len() as u32, ovs);
        Ok(Plan {
            schema: PLAN_SCHEMA,
            config: cfg.clone(),
            duts,
            skipped,
            searches: b.searches,
            search_max_trials: b.search_max,
            search_usual_trials: b.search_usual,
            ceiling_trials: b.ceiling,
            latency_trials: b.latency,
            cost_trials: b.cost,
            max_trials: b.max_trials,
            estimate_s: b.usual.as_secs_f64(),
            max_s: b.max.as_secs_f64(),
        })
    }
}

/// The checks [`run`] makes before anything is built.
fn check(cfg: &SweepConfig) -> Result<(), Error> {
    if cfg.sizes.is_empty() || cfg.repeat == 0 {
        return Err(Error::Config("a sweep needs at least one frame size and one repeat".into()));
    }
    Ok(())
}

/// The machine, so a result can be reproduced.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Machine {
    /// `model name` of /proc/cpuinfo.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Interface driver of the generator and receiver ports.
    pub driver: String,
    /// XDP mode of the receiver's program (native or generic).
    pub xdp_mode: String,
    /// Why native XDP was refused on a port whose program fell back to
    /// generic (skb) mode (`--xdp-mode auto`, the harness's choice); the
    /// first such port's reason. `None`: no program fell back.
    pub xdp_fallback: Option<String>,
    /// AF_XDP bind mode of the generator (copy or zero-copy).
    pub xsk_bind: String,
    /// Receive and transmit queues per port.
    pub queues: u32,
    /// Socket family used: `afxdp`, `afpacket`, or `mixed` when `--io auto`
    /// fell back on some ports only (an external DUT's, say).
    pub io: String,
    /// Why `--io auto` fell back to AF_PACKET (`None`: it did not).
    pub io_fallback: Option<String>,
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

/// A trial as the report gives it: the search's record (its fields at the
/// top level of the JSON object) with the receiver's and the DUT's counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialRow {
    /// The search it belongs to (0-based, `repeats[search]`).
    pub search: u32,
    /// What was offered and what came of it.
    #[serde(flatten)]
    pub record: TrialRecord,
    /// The receiver's counts, latency and the softnet deltas.
    pub detail: TrialDetail,
    /// The flowsteer bridge's own counts of the trial (`None` for other DUTs).
    pub dut_counters: Option<DutCounters>,
}

/// One search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatRow {
    /// NDR of this search.
    pub ndr_fps: Option<f64>,
    /// PDR of this search.
    pub pdr_fps: Option<f64>,
    /// Both goals reached the resolution.
    pub converged: bool,
}

/// A frame size as the report gives it: bytes, or `"imix"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SizeLabel {
    /// Fixed size, bytes.
    Bytes(u16),
    /// A mix.
    Mix(String),
}

impl From<FrameSize> for SizeLabel {
    fn from(s: FrameSize) -> SizeLabel {
        match s {
            FrameSize::Fixed(n) => SizeLabel::Bytes(n),
            FrameSize::Imix => SizeLabel::Mix("imix".into()),
        }
    }
}

/// Latency at a share of the NDR.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// Share of the median NDR.
    pub share_of_ndr: f64,
    /// Offered rate, frames/s.
    pub offered_fps: f64,
    /// Frames sent and received, and the latency percentiles (ns).
    pub detail: TrialDetail,
}

/// One (DUT, frame size).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultRow {
    /// DUT name.
    pub dut: String,
    /// Frame size.
    pub frame_size: SizeLabel,
    /// Mean frame size, bytes (FCS included).
    pub mean_frame_bytes: f64,
    /// Cores given to the DUT.
    pub cores: u32,
    /// Median NDR over the repeats, frames/s (`None`: failed at the floor).
    pub ndr_fps: Option<f64>,
    /// Median PDR.
    pub pdr_fps: Option<f64>,
    /// NDR in bits/s of frames (FCS included, no preamble or gap).
    pub ndr_bps: Option<f64>,
    /// Bidirectional: NDR of both directions together (twice `ndr_fps`,
    /// which is per direction); `None` one-way.
    pub ndr_aggregate_fps: Option<f64>,
    /// NDR spread over the repeats.
    pub ndr_spread: Option<Spread>,
    /// PDR spread over the repeats.
    pub pdr_spread: Option<Spread>,
    /// The generator's ceiling at this size (`--dut none`, same placement).
    pub generator_max_fps: f64,
    /// NDR >= generator_max_fps x (1 - resolution): the generator, not the
    /// DUT, set the figure.
    pub generator_limited: bool,
    /// CPU cost per frame, ns: busy time of all CPUs over the cost trial
    /// (`cost_rate`) divided by the frames received, minus the same for
    /// `none` at the same rate; `None` without `cost_rate`. Accounting
    /// resolution: 10 ms per CPU ([`crate::live::USER_HZ`]); the trial's
    /// wait is inside the window.
    pub cpu_ns_per_frame: Option<f64>,
    /// CPU cost per frame from our own threads only: CPU time of the
    /// generator and receiver threads (schedstat, ns resolution) per frame
    /// received, minus `none`'s; unlike `cpu_ns_per_frame` it leaves out
    /// other work on the machine, and the forwarding the kernel does in
    /// ksoftirqd or on other CPUs.
    pub thread_ns_per_frame: Option<f64>,
    /// The cost trial: its counts and busy time.
    pub cost_trial: Option<TrialDetail>,
    /// CPU cost per frame of the DUT alone over the cost trial, ns: the
    /// flowsteer bridge's worker threads' CPU time (schedstat), or
    /// `ovs-vswitchd`'s threads' (its PMD busy-polls), or for
    /// the kernel's DUTs the irq + softirq time of the DUT CPUs
    /// (`/proc/stat`, 10 ms steps; needs `dut_cpus`), per frame received.
    /// Both include the receive work of the receiver's veth end that the
    /// DUT's transmit runs on its CPU. Unlike `cpu_ns_per_frame`, other
    /// work on the machine does not count.
    pub dut_ns_per_frame: Option<f64>,
    /// The flowsteer bridge's own counts of the cost trial.
    pub cost_dut_counters: Option<DutCounters>,
    /// Each search.
    pub repeats: Vec<RepeatRow>,
    /// Latency at shares of the NDR (full-length trials after the searches).
    pub latency: Vec<LatencyRow>,
    /// Every trial of every search, in order.
    pub trials: Vec<TrialRow>,
}

/// The generator's ceiling at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CeilingRow {
    /// Frame size.
    pub frame_size: SizeLabel,
    /// Frames/s achieved unthrottled into `--dut none`.
    pub generator_max_fps: f64,
    /// Of which received.
    pub received_fps: f64,
    /// CPU time of the generator thread per frame sent, ns (schedstat).
    pub gen_thread_ns_per_frame: f64,
    /// Of which user time (`/proc/thread-self/stat`, 10 ms steps): ours.
    pub gen_user_ns_per_frame: f64,
    /// And system time: the kernel's transmit, and the receive side the
    /// kernel runs in the generator's softirq (veth).
    pub gen_sys_ns_per_frame: f64,
    /// CPU time of the receiver thread per frame sent, ns (schedstat).
    pub rx_thread_ns_per_frame: f64,
}

/// A DUT that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedDut {
    /// DUT name.
    pub dut: String,
    /// Why ([`DutKind::skip_reason`]).
    pub reason: String,
}

/// The whole report ([`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The machine.
    pub machine: Machine,
    /// What was asked.
    pub config: SweepConfig,
    /// The generator's ceiling per size.
    pub generator: Vec<CeilingRow>,
    /// One row per (DUT, size) finished.
    pub results: Vec<ResultRow>,
    /// DUTs this machine cannot build (`ovs` without Open vSwitch), and
    /// why; the others were measured.
    pub skipped: Vec<SkippedDut>,
    /// False when a signal stopped the sweep before the end.
    pub complete: bool,
    /// Wall time, seconds.
    pub elapsed_s: f64,
}

/// Progress while a sweep runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// Measuring the generator's ceiling at a size.
    Ceiling { size: FrameSize },
    /// A search starts.
    Search { dut: DutKind, size: FrameSize, repeat: u32 },
    /// The CPU-cost trial starts.
    Cost { dut: DutKind, size: FrameSize },
    /// A latency trial at a share of the NDR starts.
    Latency { dut: DutKind, size: FrameSize, share: f64 },
    /// A DUT is skipped: this machine cannot build it.
    Skipped { dut: DutKind, reason: &'a str },
    /// `--io auto` fell back to AF_PACKET (once per sweep), and why.
    IoFallback { reason: &'a str },
    /// An XDP program attached in generic (skb) mode because the driver
    /// refused native mode (once per sweep), and why.
    XdpFallback { reason: &'a str },
    /// A trial finished; `interval` is the goal being searched and its
    /// bounds after it.
    Trial { dut: DutKind, size: FrameSize, record: &'a TrialRecord, interval: Option<(&'static str, f64, f64)> },
}

struct Recorder<'r> {
    runner: &'r mut LiveRunner,
    /// The DUT, for the flowsteer bridge's own counts of each trial.
    topo: Option<&'r Topology>,
    /// Those counts, one per trial run (`None`: not a flowsteer bridge).
    dut_counters: Vec<Option<DutCounters>>,
}

impl search::TrialRunner for Recorder<'_> {
    fn run_trial(
        &mut self,
        spec: &search::TrialSpec,
    ) -> Result<search::TrialOutcome, Box<dyn std::error::Error + Send + Sync>> {
        let before = self.topo.and_then(Topology::bridge_stats);
        let out = self.runner.run_trial(spec);
        let after = self.topo.and_then(Topology::bridge_stats);
        self.dut_counters.push(before.zip(after).map(|(b, a)| DutCounters::between(&b, &a)));
        out
    }
}

/// Busy ns of all CPUs per received frame.
fn per_frame(d: &TrialDetail) -> Option<f64> {
    (d.received > 0).then(|| d.cpu_busy_ns as f64 / d.received as f64)
}

/// Our threads' CPU ns per received frame.
fn per_frame_threads(d: &TrialDetail) -> Option<f64> {
    (d.received > 0).then(|| (d.gen_thread_ns + d.rx_thread_ns) as f64 / d.received as f64)
}

fn is_stop(e: &Error) -> bool {
    match e {
        Error::Stopped => true,
        Error::Search(search::SearchError::Trial { source, .. }) => {
            source.downcast_ref::<Error>().is_some_and(|e| matches!(e, Error::Stopped))
        }
        _ => false,
    }
}

/// Runs the sweep. `stop` (set by SIGINT/SIGTERM) ends it after the
/// current trial with `complete: false`; every namespace is removed either
/// way.
pub fn run(cfg: &SweepConfig, stop: Option<Arc<AtomicBool>>, on: &mut dyn FnMut(Event<'_>)) -> Result<Report, Error> {
    check(cfg)?;
    let started = Instant::now();
    let mut report = Report {
        schema: SCHEMA,
        machine: Machine {
            cpu_model: cpu_model(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            driver: "veth".into(),
            queues: 1,
            ..Machine::default()
        },
        config: cfg.clone(),
        generator: Vec::new(),
        results: Vec::new(),
        skipped: Vec::new(),
        complete: false,
        elapsed_s: 0.0,
    };
    match sweep(cfg, stop, on, &mut report) {
        Ok(()) => report.complete = true,
        Err(e) if is_stop(&e) => {}
        Err(e) => return Err(e),
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn sweep(
    cfg: &SweepConfig,
    stop: Option<Arc<AtomicBool>>,
    on: &mut dyn FnMut(Event<'_>),
    report: &mut Report,
) -> Result<(), Error> {
    // The generator's ceiling per size, into --dut none.
    let mut ceilings = Vec::new();
    let mut baselines: Vec<Option<(f64, f64)>> = Vec::new();
    {
        let topo = Topology::new(DutKind::None)?;
        for &size in &cfg.sizes {
            on(Event::Ceiling { size });
            let mut runner = LiveRunner::new(&topo.ports(), cfg.live(size), stop.clone())?;
            note_io(&mut report.machine, &runner, on);
            let (fps, detail) = runner.generator_max(cfg.gen_max_trial)?;
            let secs = cfg.gen_max_trial.as_secs_f64();
            let per = |ns: u64| if detail.sent > 0 { ns as f64 / detail.sent as f64 } else { 0.0 };
            report.generator.push(CeilingRow {
                frame_size: size.into(),
                generator_max_fps: fps,
                received_fps: detail.received as f64 / secs,
                gen_thread_ns_per_frame: per(detail.gen_thread_ns),
                gen_user_ns_per_frame: per(detail.gen_user_ns),
                gen_sys_ns_per_frame: per(detail.gen_sys_ns),
                rx_thread_ns_per_frame: per(detail.rx_thread_ns),
            });
            ceilings.push(fps);
            baselines.push(match cfg.cost_rate {
                Some(rate) => {
                    on(Event::Cost { dut: DutKind::None, size });
                    let (_, d) = runner.trial(rate, cfg.trial)?;
                    per_frame(&d).zip(per_frame_threads(&d))
                }
                None => None,
            });
        }
    }
    for &dut in &cfg.duts {
        if let Some(reason) = dut.skip_reason() {
            on(Event::Skipped { dut, reason: &reason });
            report.skipped.push(SkippedDut { dut: dut.name().into(), reason });
            continue;
        }
        let topo = Topology::start(dut, &cfg.dut_cpus, cfg.kernel_rps)?;
        measure(cfg, &stop, on, report, dut, &topo.ports(), Some(&topo), &ceilings, &baselines)?;
    }
    if let Some((tx, rx)) = &cfg.external {
        let ports = Ports::external(tx, rx)?;
        measure(cfg, &stop, on, report, DutKind::External, &ports, None, &ceilings, &baselines)?;
    }
    Ok(())
}

/// The socket family, XDP mode and fallback reason of a runner.
fn note_io(m: &mut Machine, runner: &LiveRunner, on: &mut dyn FnMut(Event<'_>)) {
    let io = runner.io().name();
    if !m.io.is_empty() && m.io != io {
        m.io = "mixed".into();
    }
    if m.io.is_empty() {
        m.io = io.to_string();
        m.xdp_mode =
            runner.program().map(|p| format!("{:?}", p.mode()).to_lowercase()).unwrap_or_else(|| "none".into());
        m.xsk_bind = runner.gen_bind().map(|b| format!("{b:?}").to_lowercase()).unwrap_or_else(|| "none".into());
    }
    if m.io_fallback.is_none() {
        if let Some(why) = runner.fallback() {
            m.io_fallback = Some(why.to_string());
            on(Event::IoFallback { reason: why });
        }
    }
    if m.xdp_fallback.is_none() {
        if let Some(why) = runner.xdp_fallback() {
            m.xdp_fallback = Some(why.to_string());
            on(Event::XdpFallback { reason: why });
        }
    }
}

/// The interval a converged goal ended on, for the next repeat to try
/// first; none for a goal without both bounds.
fn expected_interval(goal: &search::GoalResult) -> Option<(f64, f64)> {
    goal.rate_fps.zip(goal.upper_fps).filter(|_| goal.converged)
}

/// Searches every size on one DUT's ports.
#[allow(clippy::too_many_arguments)]
fn measure(
    cfg: &SweepConfig,
    stop: &Option<Arc<AtomicBool>>,
    on: &mut dyn FnMut(Event<'_>),
    report: &mut Report,
    dut: DutKind,
    ports: &Ports,
    topo: Option<&Topology>,
    ceilings: &[f64],
    baselines: &[Option<(f64, f64)>],
) -> Result<(), Error> {
    for ((&size, &gmax), &baseline) in cfg.sizes.iter().zip(ceilings).zip(baselines) {
        if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(Error::Stopped);
        }
        let mut runner = LiveRunner::new(ports, cfg.live(size), stop.clone())?;
        note_io(&mut report.machine, &runner, on);
        let mut repeats = Vec::new();
        let mut trials = Vec::new();
        let mut previous: Option<search::SearchOutcome> = None;
        for r in 0..cfg.repeat {
            on(Event::Search { dut, size, repeat: r });
            let first = runner.details.len();
            let mut scfg = cfg.search_config(gmax.max(2.0 * cfg.min_fps));
            if let Some(prev) = &previous {
                scfg.expected_ndr = expected_interval(&prev.ndr);
                scfg.expected_pdr = expected_interval(&prev.pdr);
            }
            let mut rec = Recorder { runner: &mut runner, topo, dut_counters: Vec::new() };
            let out = search::run(scfg, &mut rec, &mut |s, rec| {
                on(Event::Trial { dut, size, record: rec, interval: s.interval() });
            })?;
            let counters = std::mem::take(&mut rec.dut_counters);
            for ((rec, detail), dut_counters) in out.trials.iter().zip(&runner.details[first..]).zip(counters) {
                trials.push(TrialRow { search: r, record: *rec, detail: detail.clone(), dut_counters });
            }
            repeats.push(RepeatRow {
                ndr_fps: out.ndr.rate_fps,
                pdr_fps: out.pdr.rate_fps,
                converged: out.ndr.converged && out.pdr.converged,
            });
            previous = Some(out);
        }
        let ndrs: Vec<f64> = repeats.iter().map(|r| r.ndr_fps.unwrap_or(0.0)).collect();
        let pdrs: Vec<f64> = repeats.iter().map(|r| r.pdr_fps.unwrap_or(0.0)).collect();
        let (ndr_spread, pdr_spread) = (Spread::of(&ndrs), Spread::of(&pdrs));
        let ndr = ndr_spread.map(|s| s.median).filter(|&m| m > 0.0);
        let pdr = pdr_spread.map(|s| s.median).filter(|&m| m > 0.0);
        let mut cost_trial = None;
        let mut cost_dut_counters = None;
        let mut dut_ns_per_frame = None;
        let mut cpu_ns_per_frame = None;
        let mut thread_ns_per_frame = None;
        if let Some(rate) = cfg.cost_rate {
            on(Event::Cost { dut, size });
            let before = topo.and_then(Topology::bridge_stats);
            let dut_ns = |t: &Topology| {
                t.dut_cpu_ns().or_else(|| (!cfg.dut_cpus.is_empty()).then(|| crate::live::softirq_ns(&cfg.dut_cpus)))
            };
            let dut0 = topo.and_then(dut_ns);
            let (_, d) = runner.trial(rate, cfg.trial)?;
            let dut1 = topo.and_then(dut_ns);
            let after = topo.and_then(Topology::bridge_stats);
            dut_ns_per_frame =
                dut0.zip(dut1).filter(|_| d.received > 0).map(|(a, b)| b.saturating_sub(a) as f64 / d.received as f64);
            cost_dut_counters = before.zip(after).map(|(b, a)| DutCounters::between(&b, &a));
            cpu_ns_per_frame = per_frame(&d).zip(baseline).map(|(c, b)| c - b.0);
            thread_ns_per_frame = per_frame_threads(&d).zip(baseline).map(|(c, b)| c - b.1);
            cost_trial = Some(d);
        }
        let mut latency = Vec::new();
        if let Some(ndr) = ndr {
            for &share in &cfg.latency_shares {
                on(Event::Latency { dut, size, share });
                let (_, detail) = runner.trial(ndr * share, cfg.trial)?;
                latency.push(LatencyRow { share_of_ndr: share, offered_fps: ndr * share, detail });
            }
        }
        report.results.push(ResultRow {
            dut: dut.name().into(),
            frame_size: size.into(),
            mean_frame_bytes: size.mean_bytes(),
            cores: 1,
            ndr_fps: ndr,
            pdr_fps: pdr,
            ndr_bps: ndr.map(|f| f * size.mean_bytes() * 8.0),
            ndr_aggregate_fps: ndr.filter(|_| cfg.bidirectional).map(|f| 2.0 * f),
            ndr_spread,
            pdr_spread,
            generator_max_fps: gmax,
            generator_limited: ndr.is_some_and(|n| n >= gmax * (1.0 - cfg.resolution)),
            cpu_ns_per_frame,
            thread_ns_per_frame,
            cost_trial,
            cost_dut_counters,
            dut_ns_per_frame,
            repeats,
            latency,
            trials,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{Aggregate, DirectionDetail, SoftnetDelta};
    use crate::track::{Latency, RxCounts};
    use serde_json::json;

    fn detail(bidirectional: bool) -> TrialDetail {
        let rx = RxCounts { frames: 10, received: 10, duplicates: 0, foreign: 0, reordered: 0 };
        let latency = Latency { count: 10, p50_ns: 1000, p99_ns: 2000, p999_ns: 3000, max_ns: 4000 };
        TrialDetail {
            offered_fps: 1e5,
            sent: 10,
            received: 10,
            rx,
            latency,
            tx_incomplete: 0,
            tx_kick_errors: 0,
            softnet: vec![SoftnetDelta { cpu: 0, processed: 10, dropped: 0, time_squeeze: 0 }],
            cpu_busy_ns: 1,
            gen_thread_ns: 1,
            gen_user_ns: 1,
            gen_sys_ns: 1,
            rx_thread_ns: 1,
            tx_refused: 0,
            reverse: bidirectional.then_some(DirectionDetail {
                sent: 10,
                received: 10,
                achieved_fps: 1e5,
                rx,
                latency,
                tx_incomplete: 0,
                tx_refused: 0,
            }),
            aggregate: bidirectional.then_some(Aggregate {
                offered_fps: 2e5,
                sent: 20,
                received: 20,
                achieved_fps: 2e5,
            }),
        }
    }

    /// Every optional part filled in.
    fn full_report() -> Report {
        let mut cfg = SweepConfig::new(vec![DutKind::LinuxBridge, DutKind::FlowsteerBridgeXdp]);
        cfg.external = Some(("tx0".into(), "rx0".into()));
        cfg.cost_rate = Some(1e5);
        cfg.gen_cpu = Some(0);
        cfg.rx_cpu = Some(1);
        cfg.dut_cpus = vec![1];
        cfg.io = IoMode::Afpacket;
        cfg.bidirectional = true;
        let record = TrialRecord {
            offered_fps: 1e5,
            achieved_fps: 1e5,
            sent: 10,
            received: 10,
            loss_ratio: 0.0,
            duration_s: 1.0,
            full: true,
            valid: true,
        };
        let mut counters = DutCounters { received: 10, forwarded: 10, conservation_ok: true, ..Default::default() };
        counters.dropped.insert("too_big".into(), 1);
        let spread = Spread { median: 1e5, min: 1e5, max: 1e5 };
        let row = |size: FrameSize| ResultRow {
            dut: "linux-bridge".into(),
            frame_size: size.into(),
            mean_frame_bytes: size.mean_bytes(),
            cores: 1,
            ndr_fps: Some(1e5),
            pdr_fps: Some(1e5),
            ndr_bps: Some(1e8),
            ndr_aggregate_fps: Some(2e5),
            ndr_spread: Some(spread),
            pdr_spread: Some(spread),
            generator_max_fps: 1e6,
            generator_limited: false,
            cpu_ns_per_frame: Some(100.0),
            thread_ns_per_frame: Some(100.0),
            cost_trial: Some(detail(true)),
            dut_ns_per_frame: Some(50.0),
            cost_dut_counters: Some(counters.clone()),
            repeats: vec![RepeatRow { ndr_fps: Some(1e5), pdr_fps: Some(1e5), converged: true }],
            latency: vec![LatencyRow { share_of_ndr: 0.5, offered_fps: 5e4, detail: detail(true) }],
            trials: vec![TrialRow { search: 0, record, detail: detail(true), dut_counters: Some(counters.clone()) }],
        };
        Report {
            schema: SCHEMA,
            machine: Machine {
                cpu_model: "Some CPU @ 2.00GHz".into(),
                cpus: 2,
                kernel: "6.1.0".into(),
                driver: "veth".into(),
                xdp_mode: "generic".into(),
                xsk_bind: "copy".into(),
                queues: 1,
                io: "mixed".into(),
                io_fallback: Some("AF_XDP could not be set up".into()),
                xdp_fallback: Some("no native XDP".into()),
            },
            generator: vec![CeilingRow {
                frame_size: FrameSize::Imix.into(),
                generator_max_fps: 1e6,
                received_fps: 1e6,
                gen_thread_ns_per_frame: 1.0,
                gen_user_ns_per_frame: 0.5,
                gen_sys_ns_per_frame: 0.5,
                rx_thread_ns_per_frame: 1.0,
            }],
            results: vec![row(FrameSize::Fixed(64)), row(FrameSize::Imix)],
            skipped: vec![SkippedDut { dut: "ovs".into(), reason: "not installed".into() }],
            config: cfg,
            complete: true,
            elapsed_s: 1.0,
        }
    }

    #[test]
    fn the_report_has_numbers_with_units_and_lowercase_strings_not_rust_forms() {
        let v = serde_json::to_value(full_report()).unwrap();
        assert_eq!(crate::json::rust_forms(&v), Vec::<String>::new(), "{v:#}");
        let c = &v["config"];
        assert_eq!(c["sizes"], json!([64, 128, 256, 512, 1024, 1280, 1518, "imix"]));
        assert_eq!((c["trial_s"].as_f64(), c["short_trial_s"].as_f64()), (Some(60.0), Some(1.0)));
        assert_eq!((c["wait_s"].as_f64(), c["learning_s"].as_f64()), (Some(2.0), Some(0.1)));
        assert_eq!(c["gen_max_trial_s"].as_f64(), Some(2.0));
        assert!(c.get("trial").is_none() && c.get("wait").is_none());
        assert_eq!(c["external"], json!({"tx": "tx0", "rx": "rx0"}));
        assert_eq!((&c["io"], &c["duts"]), (&json!("afpacket"), &json!(["linux-bridge", "flowsteer-bridge-xdp"])));
        assert_eq!(v["results"][1]["frame_size"], "imix");
        assert_eq!(v["results"][0]["trials"][0]["duration_s"], 1.0);
        assert_eq!(v["schema"], "flowsteer.rfc2544.v2");
    }

    #[test]
    fn the_plan_is_json_of_the_same_forms() {
        let report = full_report();
        let plan = Plan::new(&report.config).unwrap();
        let v = serde_json::to_value(&plan).unwrap();
        assert_eq!(crate::json::rust_forms(&v), Vec::<String>::new(), "{v:#}");
        assert_eq!(v["schema"], PLAN_SCHEMA);
        assert_eq!(v["config"], serde_json::to_value(&report).unwrap()["config"]);
        assert_eq!(v["search_usual_trials"], json!({"short": 6, "full": 12}));
    }

    /// Seconds of one trial of `len` seconds with the defaults' learning
    /// time and wait.
    fn trial(len: f64) -> f64 {
        len + 0.1 + 2.0 + TRIAL_OVERHEAD.as_secs_f64()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn the_plan_counts_the_trials_and_their_time() {
        let mut cfg = SweepConfig::new(vec![DutKind::LinuxBridge, DutKind::Patch]);
        cfg.sizes = vec![FrameSize::Fixed(64), FrameSize::Fixed(1518)];
        cfg.trial = Duration::from_secs(2);
        let p = Plan::new(&cfg).unwrap();
        assert_eq!((p.duts.clone(), p.skipped.len()), (vec!["linux-bridge".to_string(), "patch".into()], 0));
        assert_eq!((p.searches, p.search_max_trials), (4, 40));
        assert_eq!(p.search_usual_trials, TrialCount { short: 6, full: 12 });
        assert_eq!((p.ceiling_trials, p.latency_trials, p.cost_trials), (2, 12, 0));
        assert_eq!(p.max_trials, 4 * 40 + 2 + 12);
        let setup = (SETUP_PER_DUT * 3 + SETUP_PER_SIZE * (2 + 4)).as_secs_f64();
        let extra = 2.0 * trial(2.0) + 12.0 * trial(2.0) + setup;
        let usual = 4.0 * (6.0 * trial(1.0) + 12.0 * trial(2.0)) + extra;
        assert!(close(p.estimate_s, usual), "{} {usual}", p.estimate_s);
        let max = 4.0 * 40.0 * trial(2.0) + extra;
        assert!(close(p.max_s, max), "{} {max}", p.max_s);
        assert!(close(cfg.estimate().as_secs_f64(), p.estimate_s));

        // Each repeat counts as a first search.
        cfg.repeat = 3;
        let r = Plan::new(&cfg).unwrap();
        assert_eq!((r.searches, r.max_trials), (12, 12 * 40 + 2 + 12));
        let more = 8.0 * (6.0 * trial(1.0) + 12.0 * trial(2.0));
        assert!(close(r.estimate_s - p.estimate_s, more), "{} {}", r.estimate_s, p.estimate_s);

        // A CPU-cost trial per (DUT, size) and one per size on none.
        cfg.repeat = 1;
        cfg.cost_rate = Some(1e5);
        let c = Plan::new(&cfg).unwrap();
        assert_eq!(c.cost_trials, 4 + 2);
        assert!(close(c.estimate_s - p.estimate_s, 6.0 * trial(2.0)));
        assert!(close(c.max_s - p.max_s, 6.0 * trial(2.0)));
    }

    #[test]
    fn only_the_ceiling_and_external_ports() {
        let mut cfg = SweepConfig::new(Vec::new());
        let p = Plan::new(&cfg).unwrap();
        assert_eq!((p.searches, p.ceiling_trials, p.latency_trials, p.max_trials), (0, 8, 0, 8));
        let setup = (SETUP_PER_DUT + SETUP_PER_SIZE * 8).as_secs_f64();
        assert!(close(p.estimate_s, 8.0 * trial(2.0) + setup), "{}", p.estimate_s);
        assert!(close(p.max_s, p.estimate_s));
        cfg.external = Some(("a".into(), "b".into()));
        let p = Plan::new(&cfg).unwrap();
        assert_eq!((p.duts.clone(), p.searches), (vec!["external".to_string()], 8));
    }

    #[test]
    fn a_plan_needs_a_frame_size_and_a_repeat() {
        let mut cfg = SweepConfig::new(vec![DutKind::Patch]);
        cfg.sizes.clear();
        assert!(matches!(Plan::new(&cfg), Err(Error::Config(_))));
        let mut cfg = SweepConfig::new(vec![DutKind::Patch]);
        cfg.repeat = 0;
        assert!(matches!(Plan::new(&cfg), Err(Error::Config(_))));
    }
}
