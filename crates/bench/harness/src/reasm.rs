//! IP reassembly throughput of one [`Reassembler`] on one core
//! (`flowsteer bench reasm`).
//!
//! Cases (each for IPv4 and IPv6):
//! * 4,416-byte UDP payloads (a 4,424-byte UDP datagram) with 64 and 4,096
//!   datagrams in flight, fragments of each datagram in order, reversed and
//!   shuffled;
//! * 65,507-byte UDP payloads (the largest IPv4 UDP datagram) with 64 in
//!   flight only: 4,096 of them would hold 268 MB;
//! * `flood`: 200,000 never-completing datagrams (one middle fragment each,
//!   random source and id) spread evenly between the fragments of 20,032
//!   legitimate 4,416-byte datagrams (64 in flight, in order), with the
//!   default 4 MiB configuration. The point: accounted memory stays under the
//!   threshold, the legitimate datagrams still complete, and the cost per
//!   fragment stays flat (compare its ns/frag with the in-order row).
//! * `flood` set (the flood sweep): 10,000, 100,000 and 1,000,000
//!   never-completing datagrams (one middle fragment each, a random
//!   source and id) interleaved with legitimate 4,416-byte
//!   datagrams (64 in flight, in order, the warm set replayed), at a fixed
//!   ratio of 10 flood datagrams per legitimate one, default 4 MiB
//!   configuration. The work grows with the flood size but the mix does
//!   not, so ns/fragment must not grow with it: every flood fragment
//!   creates a queue and, the memory bound reached, evicts the oldest one,
//!   O(1) each, whatever the number of flood datagrams seen so far. The
//!   flood fragments come round from a pool of 8,192 pre-built frames,
//!   each with its own source and id in its header (the reassembler reads
//!   an IPv4 key from the frame): a key comes back only long after its
//!   queue was evicted, which the row checks (no duplicate counted).
//!
//! Fragment sizes are what Linux sends at MTU 1500: IPv4 1,480 bytes of
//! fragment payload (1500 - 20), IPv6 1,448 (1500 - 40 - 8 rounded down to a
//! multiple of 8). A 4,416-byte payload gives 3 IPv4 / 4 IPv6 fragments, a
//! 65,507-byte one 45 / 46.
//!
//! "In flight" is a block pattern: fragment k of datagrams i..i+in_flight is
//! pushed round-robin, then fragment k+1, ..., so `in_flight` datagrams are
//! open at once. "Order" is the order of the fragments within each datagram.
//!
//! Two frame sets (`set`):
//! * `cold`: about 32 MB of frames (at least two blocks), so fragment
//!   payloads are read from memory, not from the cache, as a NIC's receive
//!   buffers would be.
//! * `warm`: two blocks only (64 in flight: ~0.6 MB of IPv4 frames), so the
//!   frames stay in the cache, as in DPDK's perf test
//!   (`app/test/test_reassembly_perf.c`), which builds its fragment mbufs
//!   and then times only the reassemble calls.
//!
//! Two deliveries (`delivery`):
//! * `copy`: [`Reassembler::push`] lends the frame, the datagram comes out
//!   contiguous; the loop counts it and reads its length.
//! * `chain`: [`Reassembler::push_owned`] takes a frame handle over (a
//!   borrowed frame of the set, 16 bytes: what an AF_XDP UMEM descriptor or
//!   DPDK's mbuf pointer is; the frame itself never moves), the datagram
//!   comes out as a [`Chain`] (rewritten header + payload slices, no copy);
//!   the loop counts it, reads its length and its header's first bytes (as
//!   DPDK's test does with the reassembled mbuf), and gives the handles
//!   back ([`Chain::clear`], and `spare` for dropped ones), counting
//!   them: every handle pushed must come back (checked after each case). No
//!   allocation per fragment or per datagram.
//!
//! [`Config::dpdk`] (`--dpdk PATH`) runs DPDK's `rte_ip_frag` on the same
//! warm workload beside each warm chain row, in the same run and on the
//! same CPU (`bench/dpdk/reasm-dpdk`, built with `make -C bench/dpdk` where
//! Debian's `libdpdk-dev` is installed; see `bench/dpdk/README.md`), with
//! its example table shape and the tight shapes that were its best here,
//! and reports flowsteer's ratio to the example shape and to the best shape
//! (the best median over the rounds), paired per round ([`dpdk`]). The harness times what
//! this loop times: the reassemble calls and the delivered datagram's
//! header read; it restores its mbufs (DPDK rewrites them) outside the
//! timed part.
//!
//! Every frame and its parse result are built before timing; only the
//! push calls and the delivered datagram's handling are timed, with a clock
//! read per block of `in_flight` datagrams (its time is passed as `now`). A
//! round replays the pre-built set; a (src, dst, id) is reused only in a
//! later round, once the earlier one has completed. Each case warms up for
//! one round, then runs 3 repetitions of about [`Config::seconds`]; the
//! median is reported. In-flight cases use a generous configuration (64 MiB high
//! threshold) so nothing is evicted.

use flowsteer_prim::SplitMix64;
use flowsteer_reasm::{Chain, DropReason, ReasmConfig, ReasmConfigError, ReasmStats, Reassembler, Verdict};
use flowsteer_wire::build::{ipv4_fragments, ipv4_header_checksum, ipv6_fragments};
use flowsteer_wire::{parse_frame, L3Info, LinkType, ParseOptions};
use serde::Serialize;
use std::fmt::Write;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Instant;

pub mod dpdk;

/// What to measure. The filters take the names the rows carry (`None`:
/// every value); a name not listed is an error.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seconds per measurement.
    pub seconds: f64,
    /// Frame set: "cold", "warm" or "flood".
    pub set: Option<String>,
    /// Delivery: "copy" or "chain".
    pub delivery: Option<String>,
    /// IP version: "4" or "6".
    pub family: Option<String>,
    /// Datagrams in flight of the in-flight cases: "64" or "4096".
    pub in_flight: Option<String>,
    /// Fragment order of the in-flight cases: "in-order", "reversed" or
    /// "shuffled".
    pub order: Option<String>,
    /// Run on this CPU (pinned).
    pub cpu: Option<u32>,
    /// DPDK's harness (`bench/dpdk/reasm-dpdk`), run beside every warm
    /// chain row.
    pub dpdk: Option<PathBuf>,
    /// IPv4 max-distance rule of the in-flight cases (`None`: the
    /// reassembler's default, 64; 0 turns it off).
    pub max_dist: Option<u32>,
    /// With `dpdk`: rounds of flowsteer-then-DPDK per case (default 3).
    pub rounds: Option<usize>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value out of range; the text names the option.
    #[error("{0}")]
    Config(String),
    /// The run could not be pinned to a CPU.
    #[error("{what}")]
    Pin {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A frame of the workload could not be built.
    #[error("{0}")]
    Build(String),
    #[error("{0}")]
    Reassembler(ReasmConfigError),
    /// A measurement lost, corrupted or leaked something.
    #[error("{0}")]
    Check(String),
    #[error(transparent)]
    Dpdk(#[from] dpdk::Error),
}

type Result<T, E = Error> = std::result::Result<T, E>;

const REPS: usize = 3;
/// Fragment payload sizes at MTU 1500 (see the module docs).
const V4_FRAG: usize = 1480;
const V6_FRAG: usize = 1448;
const SMALL: usize = 4416;
const LARGE: usize = 65507;
const FLOOD_DGRAMS: usize = 200_000;
/// Flood sizes of the `flood` set.
const FLOOD_SWEEP: [usize; 3] = [10_000, 100_000, 1_000_000];
/// Distinct never-completing datagram frames the `flood` set cycles through
/// (about 12 MB): more than three times the queues the 4 MiB bound holds.
const FLOOD_POOL: usize = 8192;
/// Never-completing datagrams per legitimate one in the `flood` set.
const FLOOD_RATIO: usize = 10;
const FLOOD_LEGIT: usize = 20_000;
/// Pre-built frames per cold in-flight case: about this many bytes (at least
/// two blocks), so the set does not sit in the cache.
const SET_BYTES: usize = 32 << 20;
/// Blocks of `in_flight` datagrams in a warm set.
const WARM_BLOCKS: usize = 2;
const ETH: usize = 14;
/// Pushes ahead whose frame headers the chain loop prefetches (DPDK's
/// `examples/ip_reassembly` PREFETCH_OFFSET).
const PREFETCH: usize = 3;

/// One case's result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// "flowsteer", or "dpdk" for a row of the comparison harness.
    #[serde(rename = "impl")]
    pub implementation: &'static str,
    /// DPDK's table shape (`bktBxE[/maxM]`), on its rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// On DPDK's rows: "example" (its example application's shape, the
    /// 1.5x bar) or "tight" (a shape that was among its fastest here, the
    /// no-slower bar).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape_role: Option<&'static str>,
    pub family: u8,
    pub payload: usize,
    pub fragments: usize,
    pub in_flight: usize,
    pub order: String,
    pub delivery: &'static str,
    pub set: &'static str,
    pub dgrams_per_s: f64,
    pub ns_per_frag: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_mem: Option<usize>,
    pub completed_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood_dgrams: Option<usize>,
    /// With `dpdk`: the round this row was measured in (internal: the
    /// rows reported are the medians over the rounds).
    #[serde(skip)]
    pub(crate) round: Option<usize>,
    /// With `dpdk`: the number of rounds this row is the median of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Forward,
    Reversed,
    Shuffled,
}

impl Order {
    fn name(self) -> &'static str {
        match self {
            Order::Forward => "in-order",
            Order::Reversed => "reversed",
            Order::Shuffled => "shuffled",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    Copy,
    Chain,
}

impl Delivery {
    fn name(self) -> &'static str {
        match self {
            Delivery::Copy => "copy",
            Delivery::Chain => "chain",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Set {
    Cold,
    Warm,
    Flood,
}

impl Set {
    fn name(self) -> &'static str {
        match self {
            Set::Cold => "cold",
            Set::Warm => "warm",
            Set::Flood => "flood",
        }
    }
}

/// One pre-built fragment: the frame and its parse result.
struct Push {
    frame: Vec<u8>,
    l3: L3Info,
}

/// A frame handed to the reassembler on the chain path: a borrowed frame of
/// the pre-built set, 16 bytes (address and length), the shape of an AF_XDP
/// UMEM frame descriptor or of DPDK's mbuf pointer: the frame stays where
/// it was received, the reassembler holds the handle until it gives it back
/// (in a delivered chain, or in `spare` when dropped). Not `Clone`: every
/// handle pushed must come back, and the loop counts them.
struct FrameRef<'a>(&'a [u8]);

impl AsRef<[u8]> for FrameRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.0
    }
}

/// A stretch of pushes after which every legitimate datagram in it has been
/// fully fed (a block of `in_flight` datagrams): where a repetition may stop.
struct Segment {
    end: usize,
    legit: usize,
}

struct Case {
    family: u8,
    payload: usize,
    fragments: usize,
    in_flight: usize,
    order: &'static str,
    set: Set,
    flood: Option<usize>,
    cfg: ReasmConfig,
    pushes: Vec<Push>,
    segments: Vec<Segment>,
    /// Length of every reassembled IP packet.
    ip_len: usize,
}

fn parse_filter<T: Copy>(what: &str, arg: &Option<String>, all: &[(&str, T)]) -> Result<Vec<T>> {
    match arg {
        None => Ok(all.iter().map(|(_, v)| *v).collect()),
        Some(s) => match all.iter().find(|(n, _)| n == s) {
            Some((_, v)) => Ok(vec![*v]),
            None => {
                let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
                Err(Error::Config(format!("--{what} {s}: expected one of {}", names.join(", "))))
            }
        },
    }
}

/// DPDK table shapes the comparison runs beside every warm chain row: its
/// example application's (`examples/ip_reassembly`: 4,096 buckets x 16
/// entries) and the tight shapes that were its fastest on this workload in
/// `reasm-dpdk --shape sweep` (64 in flight: 64 x 2, 256 x 1; 4,096:
/// 1,024 x 4, 16,384 x 2; see BENCHMARKS.md). Shapes too small for a case
/// (64 x 2 cannot hold 4,096 datagrams) lose datagrams and are left out.
const DPDK_SHAPES_64: &str = "example,bkt64x2,bkt256x1";
const DPDK_SHAPES_4096: &str = "example,bkt1024x4,bkt16384x2";

/// A run's rows, the comparison with DPDK (when asked) and what they were
/// measured with.
#[derive(Debug)]
pub struct Report {
    pub config: Config,
    /// The CPU the run was pinned to, if it was.
    pub pinned_cpu: Option<u32>,
    /// DPDK's version as its harness reports it, with `dpdk`.
    pub dpdk: Option<String>,
    /// Rounds per case, with `dpdk`.
    pub rounds: Option<usize>,
    /// The IPv4 max-distance rule in force.
    pub max_dist: u32,
    pub rows: Vec<Row>,
    pub comparison: Vec<dpdk::Comparison>,
}

/// Runs every selected case. DPDK table shapes that cannot complete a case
/// are left out of the rows and told to `on_left_out` as the run goes.
pub fn run(args: &Config, on_left_out: &mut dyn FnMut(&dpdk::LeftOut)) -> Result<Report> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err(Error::Config("--seconds must be positive".into()));
    }
    let sets = parse_filter("set", &args.set, &[("cold", Set::Cold), ("warm", Set::Warm), ("flood", Set::Flood)])?;
    let deliveries = parse_filter("delivery", &args.delivery, &[("copy", Delivery::Copy), ("chain", Delivery::Chain)])?;
    let families = parse_filter("family", &args.family, &[("4", 4u8), ("6", 6u8)])?;
    let in_flights = parse_filter("in-flight", &args.in_flight, &[("64", 64usize), ("4096", 4096usize)])?;
    let orders = parse_filter(
        "order",
        &args.order,
        &[("in-order", Order::Forward), ("reversed", Order::Reversed), ("shuffled", Order::Shuffled)],
    )?;
    let rounds = match (args.rounds, &args.dpdk) {
        (Some(0), _) => return Err(Error::Config("--rounds must be at least 1".into())),
        (Some(_), None) => return Err(Error::Config("--rounds is for the DPDK comparison: it needs --dpdk".into())),
        (r, _) => r.unwrap_or(3),
    };
    if let Some(cpu) = args.cpu {
        flowsteer_udp::pin_to_cpu(cpu)
            .map_err(|source| Error::Pin { what: format!("--cpu {cpu}: cannot run on that CPU"), source })?;
    }
    // Side by side with DPDK: both on one CPU (the last one unless --cpu).
    let dpdk = match &args.dpdk {
        Some(path) => {
            let cpu = match args.cpu {
                Some(c) => c,
                None => {
                    // The last CPU this process may run on (taskset, cpuset).
                    let c = flowsteer_live::available_cpus().into_iter().max().unwrap_or(0);
                    flowsteer_udp::pin_to_cpu(c)
                        .map_err(|source| Error::Pin { what: format!("cannot run on CPU {c}"), source })?;
                    c
                }
            };
            Some(dpdk::Harness::new(path, cpu)?)
        }
        None => None,
    };
    let want = |s: Set, d: Delivery| sets.contains(&s) && deliveries.contains(&d);
    let max_dist = args.max_dist.unwrap_or(ReasmConfig::default().max_dist);
    let generous = ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, max_dist, ..ReasmConfig::default() };
    let mut rows = Vec::new();
    let mut comparison = Vec::new();
    let mut rng = SplitMix64(0x5eed_4ea5_0000_0001);
    for family in families {
        // Cold set: every copy row as before; chain rows for the in-order
        // 4,416-byte cases (the flood's baseline).
        for (payload, in_flight_list) in [(SMALL, &[64usize, 4096][..]), (LARGE, &[64usize][..])] {
            for &in_flight in in_flight_list.iter().filter(|n| in_flights.contains(n)) {
                for &order in &orders {
                    let chain = payload == SMALL && order == Order::Forward && want(Set::Cold, Delivery::Chain);
                    if !want(Set::Cold, Delivery::Copy) && !chain {
                        continue;
                    }
                    let case = in_flight_case(family, payload, in_flight, order, Set::Cold, generous, &mut rng)?;
                    if want(Set::Cold, Delivery::Copy) {
                        rows.push(measure(&case, Delivery::Copy, args.seconds)?);
                    }
                    if chain {
                        rows.push(measure(&case, Delivery::Chain, args.seconds)?);
                    }
                }
            }
        }
        // The cold flood case is 64 in flight, legitimate datagrams in order:
        // left out when --order or --in-flight ask for something else.
        let flood_wanted = orders.contains(&Order::Forward) && in_flights.contains(&64);
        if flood_wanted && (want(Set::Cold, Delivery::Copy) || want(Set::Cold, Delivery::Chain)) {
            let case = flood_case(family, &mut rng)?;
            for d in [Delivery::Copy, Delivery::Chain] {
                if want(Set::Cold, d) {
                    rows.push(measure(&case, d, args.seconds)?);
                }
            }
        }
        // Warm set (DPDK's shape): 4,416-byte payloads, both deliveries,
        // DPDK beside the chain rows when asked.
        if sets.contains(&Set::Warm) {
            for &in_flight in &in_flights {
                for &order in &orders {
                    let case = in_flight_case(family, SMALL, in_flight, order, Set::Warm, generous, &mut rng)?;
                    for &d in &deliveries {
                        match (&dpdk, d) {
                            // Side by side: rounds of flowsteer then DPDK, so
                            // a slow spell of the host hits both.
                            (Some(h), Delivery::Chain) => {
                                let mut round_rows = Vec::new();
                                for round in 0..rounds {
                                    let mut r = measure(&case, d, args.seconds)?;
                                    r.round = Some(round);
                                    round_rows.push(r);
                                    round_rows.extend(h.run(&case, args.seconds, round, on_left_out)?);
                                }
                                let (merged, cmp) = dpdk::merge_rounds(round_rows);
                                rows.extend(merged);
                                comparison.extend(cmp);
                            }
                            _ => rows.push(measure(&case, d, args.seconds)?),
                        }
                    }
                }
            }
        }
        // Flood sweep: does the cost per fragment grow with the flood?
        if sets.contains(&Set::Flood) {
            let legit = in_flight_case(family, SMALL, 64, Order::Forward, Set::Warm, generous, &mut rng)?;
            for flood_n in FLOOD_SWEEP {
                for &d in &deliveries {
                    rows.push(flood_sweep(&legit, flood_n, d)?);
                }
            }
        }
    }
    Ok(Report {
        config: args.clone(),
        pinned_cpu: dpdk.as_ref().map(|h| h.cpu).or(args.cpu),
        dpdk: dpdk.as_ref().map(|h| h.version.clone()),
        rounds: dpdk.as_ref().map(|_| rounds),
        max_dist,
        rows,
        comparison,
    })
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.reasm.v3`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": "flowsteer.bench.reasm.v3",
            "cpu": crate::cpu_model(),
            "pinned_cpu": self.pinned_cpu,
            "dpdk": self.dpdk,
            "rounds": self.rounds,
            "max_dist": self.max_dist,
            "results": self.rows,
            "comparison": self.comparison,
        })
    }

    /// The text table, its flood notes and, with DPDK, the comparison.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = write_text(&mut s, &self.rows, self.config.seconds, self.max_dist);
        if self.dpdk.is_some() {
            let _ = dpdk::write_comparison(&mut s, &self.comparison);
        }
        s
    }
}

fn write_text(out: &mut String, rows: &[Row], seconds: f64, max_dist: u32) -> std::fmt::Result {
    writeln!(
        out,
        "reassembly, one core, UDP; fragment payload IPv4 {V4_FRAG} / IPv6 {V6_FRAG} B (MTU 1500); \
         median of {REPS} x {seconds:.2}s; IPv4 max-distance rule {}; cpu: {}",
        if max_dist == 0 { "off".to_string() } else { max_dist.to_string() },
        crate::cpu_model()
    )?;
    writeln!(
        out,
        "{:<9} {:<18} {:>3} {:>7} {:>5} {:>9} {:<9} {:<5} {:<5} {:>12} {:>9} {:>12} {:>9}",
        "impl",
        "shape",
        "fam",
        "payload",
        "frags",
        "in_flight",
        "order",
        "deliv",
        "set",
        "dgrams/s",
        "ns/frag",
        "peak_mem",
        "completed"
    )?;
    for r in rows {
        // DPDK's example shape is marked " ex" in the table.
        let shape = match (&r.shape, r.shape_role) {
            (Some(s), Some("example")) => format!("{s} ex"),
            (Some(s), _) => s.clone(),
            (None, _) => "-".to_string(),
        };
        writeln!(
            out,
            "{:<9} {:<18} {:>3} {:>7} {:>5} {:>9} {:<9} {:<5} {:<5} {:>12.0} {:>9.1} {:>12} {:>9.4}",
            r.implementation,
            shape,
            r.family,
            r.payload,
            r.fragments,
            r.in_flight,
            r.order,
            r.delivery,
            r.set,
            r.dgrams_per_s,
            r.ns_per_frag,
            r.peak_mem.map_or_else(|| "-".to_string(), |m| m.to_string()),
            r.completed_share
        )?;
    }
    if let Some(n) = rows.iter().filter(|r| r.set != "flood").find_map(|r| r.flood_dgrams) {
        writeln!(
            out,
            "flood: {n} never-completing middle fragments spread between {FLOOD_LEGIT}+ legitimate datagrams, \
             default 4 MiB config; dgrams/s counts legitimate datagrams delivered, ns/frag all fragments"
        )?;
    }
    for r in rows.iter().filter(|r| r.set == "flood") {
        if let Some(n) = r.flood_dgrams {
            writeln!(
                out,
                "flood set, IPv{} {}: {n} never-completing datagrams, ~{} legitimate ({FLOOD_RATIO}:1), {:.1} ns/frag",
                r.family,
                r.delivery,
                n / FLOOD_RATIO,
                r.ns_per_frag
            )?;
        }
    }
    Ok(())
}

/// The fragments of one UDP datagram, parsed.
fn datagram(family: u8, index: usize, payload: &[u8]) -> Result<Vec<Push>> {
    let i = u32::try_from(index).map_err(|e| Error::Build(format!("too many datagrams: {e}")))?;
    let frames = if family == 4 {
        // Distinct (src, id) per datagram.
        let src = Ipv4Addr::from(0x0a00_0000 | (i >> 4));
        ipv4_fragments(src, Ipv4Addr::new(192, 0, 2, 1), 4000, 5000, (i & 0xf) as u16, payload, V4_FRAG)
    } else {
        let src = Ipv6Addr::from(0x2001_0db8_0000_0000_0000_0000_0000_0000u128 | u128::from(i));
        ipv6_fragments(src, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 4000, 5000, i, payload, V6_FRAG)
    };
    frames.into_iter().map(parsed).collect()
}

fn parsed(frame: Vec<u8>) -> Result<Push> {
    let l3 = parse_frame(&frame, LinkType::Ethernet, &ParseOptions::new())
        .map_err(|e| Error::Build(format!("parse of a built fragment: {e}")))?
        .outer
        .ok_or_else(|| Error::Build("built fragment without an IP header".into()))?;
    if l3.frag.is_none() {
        return Err(Error::Build("built packet is not a fragment".into()));
    }
    Ok(Push { frame, l3 })
}

fn ip_len(family: u8, payload: usize) -> usize {
    payload + 8 + if family == 4 { 20 } else { 40 }
}

/// Fragment index permutation of one datagram.
fn permutation(n: usize, order: Order, rng: &mut SplitMix64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    match order {
        Order::Forward => {}
        Order::Reversed => p.reverse(),
        Order::Shuffled => {
            for i in (1..n).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                p.swap(i, j);
            }
        }
    }
    p
}

/// Appends the pushes of `dgrams` (each a list of fragments) in the block
/// pattern: fragment k of every datagram of the block, then fragment k+1.
fn interleave(dgrams: Vec<Vec<Push>>, order: Order, rng: &mut SplitMix64) -> Vec<Push> {
    let perms: Vec<Vec<usize>> = dgrams.iter().map(|d| permutation(d.len(), order, rng)).collect();
    let mut slots: Vec<Vec<Option<Push>>> = dgrams.into_iter().map(|d| d.into_iter().map(Some).collect()).collect();
    let most = perms.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::new();
    for k in 0..most {
        for (d, perm) in slots.iter_mut().zip(&perms) {
            if let Some(p) = perm.get(k).and_then(|&f| d.get_mut(f)).and_then(Option::take) {
                out.push(p);
            }
        }
    }
    out
}

fn in_flight_case(
    family: u8,
    payload: usize,
    in_flight: usize,
    order: Order,
    set: Set,
    cfg: ReasmConfig,
    rng: &mut SplitMix64,
) -> Result<Case> {
    let data: Vec<u8> = (0..payload).map(|i| (i * 7) as u8).collect();
    let per_dgram = ip_len(family, payload) + 64;
    let blocks = match set {
        Set::Cold => (SET_BYTES / per_dgram).div_ceil(in_flight).max(2),
        Set::Warm | Set::Flood => WARM_BLOCKS,
    };
    let mut pushes = Vec::new();
    let mut segments = Vec::new();
    let mut fragments = 0;
    for b in 0..blocks {
        let dgrams = (0..in_flight).map(|j| datagram(family, b * in_flight + j, &data)).collect::<Result<Vec<_>>>()?;
        fragments = dgrams.first().map_or(0, Vec::len);
        pushes.extend(interleave(dgrams, order, rng));
        segments.push(Segment { end: pushes.len(), legit: in_flight });
    }
    Ok(Case {
        family,
        payload,
        fragments,
        in_flight,
        order: order.name(),
        set,
        flood: None,
        cfg,
        pushes,
        segments,
        ip_len: ip_len(family, payload),
    })
}

/// A never-completing datagram: a copy of the middle fragment `template`
/// with a random source and id written into its header (the IPv4 header
/// checksum fixed), parsed. The reassembler reads an option-less IPv4
/// header's key from the frame itself, so the bytes, not only the parse
/// result, must carry the key.
fn flood_frame(family: u8, template: &[u8], rng: &mut SplitMix64) -> Result<Push> {
    let mut f = template.to_vec();
    let r = rng.next_u64();
    let ip = ETH;
    if family == 4 {
        f[ip + 12..ip + 16].copy_from_slice(&(r as u32).to_be_bytes());
        f[ip + 4..ip + 6].copy_from_slice(&((r >> 32) as u16).to_be_bytes());
        let sum = ipv4_header_checksum(&f[ip..ip + 20]).to_be_bytes();
        f[ip + 10..ip + 12].copy_from_slice(&sum);
    } else {
        let src = (0xfd00u128 << 112) | u128::from(r) << 32 | u128::from(rng.next_u64() as u32);
        f[ip + 8..ip + 24].copy_from_slice(&src.to_be_bytes());
        // Fragment header right after the fixed header: id at +4.
        f[ip + 44..ip + 48].copy_from_slice(&((r >> 32) as u32).to_be_bytes());
    }
    parsed(f)
}

/// Legitimate 4,416-byte datagrams, 64 in flight, in order, with
/// [`FLOOD_DGRAMS`] lone middle fragments (random source and id) spread
/// evenly between their fragments. Default (4 MiB) configuration.
fn flood_case(family: u8, rng: &mut SplitMix64) -> Result<Case> {
    let in_flight = 64;
    let data: Vec<u8> = (0..SMALL).map(|i| (i * 7) as u8).collect();
    let legit_n = FLOOD_LEGIT.div_ceil(in_flight) * in_flight;
    let template = datagram(family, 0, &data)?.swap_remove(1).frame;
    let flood = (0..FLOOD_DGRAMS).map(|_| flood_frame(family, &template, rng)).collect::<Result<Vec<_>>>()?;
    let mut legit_pushes = Vec::new();
    let mut legit_blocks = Vec::new();
    for b in 0..legit_n / in_flight {
        let dgrams =
            (0..in_flight).map(|j| datagram(family, 1 + b * in_flight + j, &data)).collect::<Result<Vec<_>>>()?;
        let block = interleave(dgrams, Order::Forward, rng);
        legit_blocks.push(block.len());
        legit_pushes.extend(block);
    }
    let fragments = legit_pushes.len() / legit_n;
    let total_legit = legit_pushes.len();
    let mut pushes = Vec::with_capacity(total_legit + FLOOD_DGRAMS);
    let mut segments = Vec::new();
    let mut flood_iter = flood.into_iter();
    let mut legit_iter = legit_pushes.into_iter();
    let mut p = 0usize;
    for len in legit_blocks {
        for _ in 0..len {
            // Flood fragments before legitimate push p: an even spread.
            let n = (p + 1) * FLOOD_DGRAMS / total_legit - p * FLOOD_DGRAMS / total_legit;
            pushes.extend(flood_iter.by_ref().take(n));
            pushes.extend(legit_iter.next());
            p += 1;
        }
        segments.push(Segment { end: pushes.len(), legit: in_flight });
    }
    Ok(Case {
        family,
        payload: SMALL,
        fragments,
        in_flight,
        order: "flood",
        set: Set::Cold,
        flood: Some(FLOOD_DGRAMS),
        cfg: ReasmConfig::default(),
        pushes,
        segments,
        ip_len: ip_len(family, SMALL),
    })
}

/// Counters of one timed stretch.
#[derive(Default)]
struct Tally {
    pushes: u64,
    completed: u64,
    legit: u64,
    bytes: u64,
    bad_len: u64,
}

/// A chain-path reassembler, its reusable output and the frame handles it
/// gave back so far.
struct ChainState<'a> {
    r: Reassembler<FrameRef<'a>>,
    out: Chain<FrameRef<'a>>,
    spare: Vec<FrameRef<'a>>,
    /// Handles pushed and handles given back (in a delivered chain or in
    /// `spare`): equal once the reassembler is flushed.
    pushed: u64,
    returned: u64,
}

impl<'a> ChainState<'a> {
    /// One push (the caller counts it in `pushed`); true when it delivered
    /// a datagram, left in `out` for the caller to read. Dropped handles
    /// are given back (counted).
    #[inline(always)]
    fn push(&mut self, frame: &'a [u8], l3: &L3Info, now: u64) -> bool {
        let done = matches!(
            self.r.push_owned(FrameRef(frame), l3, now, &mut self.out, &mut self.spare),
            Verdict::Complete { .. }
        );
        if !self.spare.is_empty() {
            self.returned += self.spare.len() as u64;
            self.spare.clear();
        }
        done
    }

    /// The consumer is done with the delivered datagram: its handles go
    /// back, counted (borrowed handles need no recycling: they are dropped,
    /// as DPDK's harness restores its mbufs outside the timed part).
    #[inline(always)]
    fn release(&mut self) {
        self.returned += self.out.fragments() as u64;
        self.out.clear();
    }
}

enum State<'a> {
    Copy { r: Box<Reassembler>, out: Vec<u8> },
    Chain(Box<ChainState<'a>>),
}

impl<'a> State<'a> {
    fn new(d: Delivery, cfg: ReasmConfig, ip_len: usize) -> Result<State<'a>> {
        Ok(match d {
            Delivery::Copy => State::Copy {
                r: Box::new(Reassembler::new(cfg).map_err(Error::Reassembler)?),
                out: Vec::with_capacity(ip_len),
            },
            Delivery::Chain => State::Chain(Box::new(ChainState {
                r: Reassembler::new_owning(cfg).map_err(Error::Reassembler)?,
                out: Chain::new(),
                spare: Vec::new(),
                pushed: 0,
                returned: 0,
            })),
        })
    }

    fn stats(&self) -> &ReasmStats {
        match self {
            State::Copy { r, .. } => r.stats(),
            State::Chain(c) => c.r.stats(),
        }
    }

    fn peak_mem(&self) -> usize {
        self.stats().mem_high_watermark
    }

    /// Drops whatever is pending; on the chain path, every handle must have
    /// come back (an error otherwise).
    fn finish(&mut self) -> Result<()> {
        match self {
            State::Copy { r, .. } => {
                r.flush();
            }
            State::Chain(c) => {
                c.r.flush_into(&mut c.spare);
                c.release();
                c.returned += c.spare.len() as u64;
                c.spare.clear();
                if c.returned != c.pushed {
                    return Err(Error::Check(format!(
                        "{} frames pushed, {} given back by the reassembler",
                        c.pushed, c.returned
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Pushes segments from `*seg` on (wrapping round the set) until `deadline`
/// seconds have passed since `t0`. The clock is read once per segment; its
/// time is the `now` of the segment's pushes.
fn drive<'a>(st: &mut State<'a>, case: &'a Case, seg: &mut usize, t0: Instant, deadline: Option<f64>) -> Tally {
    let mut t = Tally::default();
    let mut done_one_round = false;
    let mut header_sum = 0u64;
    loop {
        let elapsed = t0.elapsed();
        match deadline {
            Some(d) if elapsed.as_secs_f64() >= d => break,
            None if done_one_round => break,
            _ => {}
        }
        let now = elapsed.as_nanos() as u64;
        let start = if *seg == 0 { 0 } else { case.segments[*seg - 1].end };
        let s = &case.segments[*seg];
        let pushes = case.pushes.get(start..s.end).unwrap_or(&[]);
        match &mut *st {
            State::Copy { r, out } => {
                for p in pushes {
                    if let Verdict::Complete { .. } = r.push(&p.frame, &p.l3, now, out) {
                        t.completed += 1;
                        t.bytes += out.len() as u64;
                        t.bad_len += u64::from(out.len() != case.ip_len);
                    }
                }
            }
            State::Chain(c) => {
                header_sum = header_sum.wrapping_add(chain_pushes(c, pushes, now, case.ip_len, &mut t));
            }
        }
        t.pushes += pushes.len() as u64;
        t.legit += s.legit as u64;
        *seg += 1;
        if *seg == case.segments.len() {
            *seg = 0;
            done_one_round = true;
        }
    }
    black_box(header_sum);
    black_box(t.bytes);
    t
}

/// The chain loop over one segment's pushes (out of line, so the push is
/// inlined into this small loop, as a receive loop would have it): the
/// delivered datagram's length checked, its header read (the sum of the
/// bytes read is returned) and its handles given back.
#[inline(never)]
fn chain_pushes<'a>(c: &mut ChainState<'a>, pushes: &'a [Push], now: u64, ip_len: usize, t: &mut Tally) -> u64 {
    let mut header_sum = 0u64;
    for (i, p) in pushes.iter().enumerate() {
        // The frame's headers PREFETCH pushes ahead, as DPDK's example
        // application (and its harness) does: a receive loop has just parsed
        // them, they are not cold.
        if let Some(next) = pushes.get(i + PREFETCH) {
            flowsteer_prim::prefetch_at(&next.frame, next.l3.l3_offset);
        }
        if c.push(&p.frame, &p.l3, now) {
            t.completed += 1;
            t.bytes += c.out.len() as u64;
            t.bad_len += u64::from(c.out.len() != ip_len);
            // Read the header as a consumer would (version, length).
            let h = c.out.header();
            header_sum += u64::from(h.first().copied().unwrap_or(0)) + u64::from(h.get(3).copied().unwrap_or(0));
            c.release();
        }
    }
    c.pushed += pushes.len() as u64;
    header_sum
}

fn measure(case: &Case, delivery: Delivery, seconds: f64) -> Result<Row> {
    let mut st = State::new(delivery, case.cfg, case.ip_len)?;
    let t0 = Instant::now();
    let mut seg = 0;
    let result = (|| {
        // Warm-up: one round, untimed; it also checks the datagrams.
        let warm = drive(&mut st, case, &mut seg, t0, None);
        if warm.bad_len != 0 {
            return Err(Error::Check(format!("{} reassembled datagrams of the wrong length", warm.bad_len)));
        }
        if case.flood.is_none() && warm.completed != warm.legit {
            return Err(Error::Check(format!(
                "only {} of {} datagrams completed in the warm-up",
                warm.completed, warm.legit
            )));
        }
        let mut samples = Vec::new();
        for _ in 0..REPS {
            let start = Instant::now();
            let offset = start.duration_since(t0).as_secs_f64();
            let t = drive(&mut st, case, &mut seg, t0, Some(offset + seconds));
            let secs = start.elapsed().as_secs_f64();
            samples.push((
                t.completed as f64 / secs,
                secs * 1e9 / t.pushes as f64,
                t.completed as f64 / t.legit as f64,
            ));
        }
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(samples[samples.len() / 2])
    })();
    let finished = st.finish();
    let (dgrams_per_s, ns_per_frag, completed_share) = result?;
    finished?;
    Ok(Row {
        implementation: "flowsteer",
        shape: None,
        shape_role: None,
        family: case.family,
        payload: case.payload,
        fragments: case.fragments,
        in_flight: case.in_flight,
        order: case.order.to_string(),
        delivery: delivery.name(),
        set: case.set.name(),
        dgrams_per_s,
        ns_per_frag,
        peak_mem: Some(st.peak_mem()),
        completed_share,
        flood_dgrams: case.flood,
        round: None,
        rounds: None,
    })
}

/// One row of the flood sweep (the `flood` set): `flood_n` never-completing
/// datagrams interleaved with about `flood_n / FLOOD_RATIO` legitimate ones
/// (the warm in-order set `legit` replayed, whole rounds), evenly spread,
/// with the default configuration. One reassembler per row, first run
/// untimed (it grows the table and the slab to their steady state), then
/// timed runs on it, each of the whole work: at least [`REPS`], more for
/// the small sizes (as many as make the work of the largest), so a row is
/// not a millisecond's sample; the median is reported. The flood fragments
/// come round from a pool of [`FLOOD_POOL`] frames, each with its own random
/// source and id in its header ([`flood_frame`]): a key comes back only
/// long after the memory bound evicted its queue (checked: no flood
/// fragment may find its key still held, which would count a duplicate).
fn flood_sweep(legit: &Case, flood_n: usize, delivery: Delivery) -> Result<Row> {
    let family = legit.family;
    let data: Vec<u8> = (0..SMALL).map(|i| (i * 7) as u8).collect();
    let template = datagram(family, 0, &data)?.swap_remove(1).frame;
    let mut rng = SplitMix64(0xf100_d5ee_d000_0000 ^ u64::from(family));
    let pool = (0..FLOOD_POOL).map(|_| flood_frame(family, &template, &mut rng)).collect::<Result<Vec<_>>>()?;
    let mut next = 0usize;
    let set_len = legit.pushes.len();
    let legit_pushes = (flood_n / FLOOD_RATIO * legit.fragments).div_ceil(set_len).max(1) * set_len;
    let cfg = ReasmConfig::default();
    let mut samples = Vec::new();
    let mut peak = 0;
    let mut st = State::new(delivery, cfg, legit.ip_len)?;
    let reps = (FLOOD_SWEEP[FLOOD_SWEEP.len() - 1] / flood_n).clamp(REPS, 100) as u64;
    for rep in 0..=reps {
        let (mut completed, mut header_sum) = (0u64, 0u64);
        let mut now = 0u64;
        let t0 = Instant::now();
        for j in 0..legit_pushes {
            if j % 256 == 0 {
                now = t0.elapsed().as_nanos() as u64;
            }
            // The flood fragments due before legitimate push j.
            let n = (j + 1) * flood_n / legit_pushes - j * flood_n / legit_pushes;
            for _ in 0..n {
                let Some(f) = pool.get(next) else { break };
                next = (next + 1) % pool.len();
                match &mut st {
                    State::Copy { r, out } => {
                        r.push(&f.frame, &f.l3, now, out);
                    }
                    State::Chain(c) => {
                        c.pushed += 1;
                        if c.push(&f.frame, &f.l3, now) {
                            c.release();
                        }
                    }
                }
            }
            let Some(p) = legit.pushes.get(j % set_len) else { break };
            match &mut st {
                State::Copy { r, out } => {
                    if let Verdict::Complete { .. } = r.push(&p.frame, &p.l3, now, out) {
                        completed += 1;
                        header_sum += u64::from(out.first().copied().unwrap_or(0));
                    }
                }
                State::Chain(c) => {
                    c.pushed += 1;
                    if c.push(&p.frame, &p.l3, now) {
                        completed += 1;
                        header_sum += u64::from(c.out.header().first().copied().unwrap_or(0));
                        c.release();
                    }
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        black_box(header_sum);
        let pushes = (legit_pushes + flood_n) as f64;
        let dgrams = (legit_pushes / legit.fragments) as f64;
        if rep > 0 {
            samples.push((completed as f64 / secs, secs * 1e9 / pushes, completed as f64 / dgrams));
        }
        peak = peak.max(st.peak_mem());
    }
    let duplicates = st.stats().dropped(DropReason::Duplicate);
    st.finish()?;
    if duplicates != 0 {
        return Err(Error::Check(format!(
            "{duplicates} flood fragments found their key still held: the flood frame pool is too small"
        )));
    }
    samples.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (dgrams_per_s, ns_per_frag, completed_share) = samples[samples.len() / 2];
    Ok(Row {
        implementation: "flowsteer",
        shape: None,
        shape_role: None,
        family,
        payload: SMALL,
        fragments: legit.fragments,
        in_flight: legit.in_flight,
        order: "flood".to_string(),
        delivery: delivery.name(),
        set: Set::Flood.name(),
        dgrams_per_s,
        ns_per_frag,
        peak_mem: Some(peak),
        completed_share,
        flood_dgrams: Some(flood_n),
        round: None,
        rounds: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            seconds: 0.01,
            set: None,
            delivery: None,
            family: None,
            in_flight: None,
            order: None,
            cpu: None,
            dpdk: None,
            max_dist: None,
            rounds: None,
        }
    }

    fn refusal(c: &Config) -> String {
        run(c, &mut |_| panic!("no DPDK here")).expect_err("a bad config").to_string()
    }

    #[test]
    fn refuses_bad_values_with_the_flag_named() {
        assert_eq!(refusal(&Config { seconds: 0.0, ..cfg() }), "--seconds must be positive");
        assert_eq!(
            refusal(&Config { set: Some("hot".into()), ..cfg() }),
            "--set hot: expected one of cold, warm, flood"
        );
        assert_eq!(
            refusal(&Config { in_flight: Some("65".into()), ..cfg() }),
            "--in-flight 65: expected one of 64, 4096"
        );
        assert_eq!(refusal(&Config { rounds: Some(0), ..cfg() }), "--rounds must be at least 1");
        assert_eq!(
            refusal(&Config { rounds: Some(2), ..cfg() }),
            "--rounds is for the DPDK comparison: it needs --dpdk"
        );
    }

    /// One warm case: its row, the text table's header and the JSON
    /// document's fields.
    #[test]
    fn one_warm_case() {
        let c = Config {
            set: Some("warm".into()),
            delivery: Some("copy".into()),
            family: Some("6".into()),
            in_flight: Some("64".into()),
            order: Some("shuffled".into()),
            ..cfg()
        };
        let r = run(&c, &mut |_| panic!("no DPDK here")).expect("a run");
        assert_eq!(r.rows.len(), 1);
        let row = &r.rows[0];
        assert_eq!((row.family, row.fragments, row.order.as_str(), row.set), (6, 4, "shuffled", "warm"));
        assert_eq!(row.completed_share, 1.0);
        let text = r.text();
        assert!(text.starts_with("reassembly, one core, UDP; "), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
        let doc = r.json();
        assert_eq!(doc["schema"], "flowsteer.bench.reasm.v3");
        assert_eq!(doc["max_dist"], 64);
        assert!(doc["dpdk"].is_null() && doc["rounds"].is_null() && doc["pinned_cpu"].is_null(), "{doc}");
    }
}
