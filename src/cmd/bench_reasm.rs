//! `flowsteer bench reasm`: IP reassembly throughput of one
//! [`Reassembler`] on one core.
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
//!   threshold and the legitimate datagrams still complete.
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
//! Every frame and its parse result are built before timing; only the
//! `push` calls and the delivered datagram's handling (count it, read its
//! length) are timed, with a clock read per block of `in_flight` datagrams
//! (its time is passed as `now`). A round replays the pre-built set; a
//! (src, dst, id) is reused only in a later round, once the earlier one has
//! completed. The in-flight sets hold about 32 MB of frames (at least two
//! blocks), so fragment payloads are read from memory, not from the cache,
//! as a NIC's receive buffers would be. Each case warms up for one round, then runs 3 repetitions of
//! about `--seconds`; the median is reported. In-flight cases use a generous
//! configuration (64 MiB high threshold) so nothing is evicted.

use crate::cli::BenchReasmArgs;
use anyhow::{bail, Context, Result};
use flowsteer_reasm::{ReasmConfig, Reassembler, Verdict};
use flowsteer_rss::quality::SplitMix64;
use flowsteer_wire::build::{ipv4_fragments, ipv4_header_checksum, ipv6_fragments};
use flowsteer_wire::{parse_frame, L3Info, LinkType, ParseOptions};
use serde::Serialize;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

const REPS: usize = 3;
/// Fragment payload sizes at MTU 1500 (see the module docs).
const V4_FRAG: usize = 1480;
const V6_FRAG: usize = 1448;
const SMALL: usize = 4416;
const LARGE: usize = 65507;
const FLOOD_DGRAMS: usize = 200_000;
const FLOOD_LEGIT: usize = 20_000;
/// Pre-built frames per in-flight case: about this many bytes (at least two
/// blocks), so the set does not sit in the cache.
const SET_BYTES: usize = 32 << 20;
const ETH: usize = 14;

#[derive(Clone, Debug, Serialize)]
struct Row {
    family: u8,
    payload: usize,
    fragments: usize,
    in_flight: usize,
    order: &'static str,
    dgrams_per_s: f64,
    ns_per_frag: f64,
    peak_mem: usize,
    completed_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    flood_dgrams: Option<usize>,
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

/// One pre-built fragment: the frame and its parse result.
struct Push {
    frame: Vec<u8>,
    l3: L3Info,
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
    flood: Option<usize>,
    cfg: ReasmConfig,
    pushes: Vec<Push>,
    segments: Vec<Segment>,
    /// Length of every reassembled IP packet.
    ip_len: usize,
}

pub fn run(args: &BenchReasmArgs) -> Result<i32> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds must be positive");
    }
    let generous = ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, ..ReasmConfig::default() };
    let mut rows = Vec::new();
    let mut rng = SplitMix64(0x5eed_4ea5_0000_0001);
    for family in [4u8, 6] {
        for (payload, in_flights) in [(SMALL, &[64usize, 4096][..]), (LARGE, &[64usize][..])] {
            for &in_flight in in_flights {
                for order in [Order::Forward, Order::Reversed, Order::Shuffled] {
                    let case = in_flight_case(family, payload, in_flight, order, generous, &mut rng)?;
                    rows.push(measure(&case, args.seconds)?);
                }
            }
        }
        let case = flood_case(family, &mut rng)?;
        rows.push(measure(&case, args.seconds)?);
    }
    if args.json {
        let doc = serde_json::json!({
            "schema": "flowsteer.bench.reasm.v1",
            "cpu": crate::cmd::bench::cpu_model(),
            "results": rows,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_text(&rows, args.seconds);
    }
    Ok(0)
}

fn print_text(rows: &[Row], seconds: f64) {
    println!(
        "reassembly, one core, UDP; fragment payload IPv4 {V4_FRAG} / IPv6 {V6_FRAG} B (MTU 1500); \
         median of {REPS} x {seconds:.2}s; cpu: {}",
        crate::cmd::bench::cpu_model()
    );
    println!(
        "{:>3} {:>7} {:>5} {:>9} {:<9} {:>12} {:>9} {:>12} {:>9}",
        "fam", "payload", "frags", "in_flight", "order", "dgrams/s", "ns/frag", "peak_mem", "completed"
    );
    for r in rows {
        println!(
            "{:>3} {:>7} {:>5} {:>9} {:<9} {:>12.0} {:>9.1} {:>12} {:>9.4}",
            r.family,
            r.payload,
            r.fragments,
            r.in_flight,
            r.order,
            r.dgrams_per_s,
            r.ns_per_frag,
            r.peak_mem,
            r.completed_share
        );
    }
    if let Some(n) = rows.iter().find_map(|r| r.flood_dgrams) {
        println!(
            "flood: {n} never-completing middle fragments spread between {FLOOD_LEGIT}+ legitimate datagrams, \
             default 4 MiB config; dgrams/s counts legitimate datagrams delivered, ns/frag all fragments"
        );
    }
}

/// The fragments of one UDP datagram, parsed.
fn datagram(family: u8, index: usize, payload: &[u8]) -> Result<Vec<Push>> {
    let i = u32::try_from(index).context("too many datagrams")?;
    let frames = if family == 4 {
        // Distinct (src, id) per datagram.
        let src = Ipv4Addr::from(0x0a00_0000 | (i >> 4));
        ipv4_fragments(src, Ipv4Addr::new(192, 0, 2, 1), 4000, 5000, (i & 0xf) as u16, payload, V4_FRAG)
    } else {
        let src = Ipv6Addr::from(0x2001_0db8_0000_0000_0000_0000_0000_0000u128 | u128::from(i));
        ipv6_fragments(src, "2001:db8::1".parse()?, 4000, 5000, i, payload, V6_FRAG)
    };
    frames.into_iter().map(parsed).collect()
}

fn parsed(frame: Vec<u8>) -> Result<Push> {
    let l3 = parse_frame(&frame, LinkType::Ethernet, &ParseOptions::new())
        .map_err(|e| anyhow::anyhow!("parse of a built fragment: {e}"))?
        .outer
        .context("built fragment without an IP header")?;
    if l3.frag.is_none() {
        bail!("built packet is not a fragment");
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
    cfg: ReasmConfig,
    rng: &mut SplitMix64,
) -> Result<Case> {
    let data: Vec<u8> = (0..payload).map(|i| (i * 7) as u8).collect();
    let per_dgram = ip_len(family, payload) + 64;
    let blocks = (SET_BYTES / per_dgram).div_ceil(in_flight).max(2);
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
        flood: None,
        cfg,
        pushes,
        segments,
        ip_len: ip_len(family, payload),
    })
}

/// Legitimate 4,416-byte datagrams, 64 in flight, in order, with
/// [`FLOOD_DGRAMS`] lone middle fragments (random source and id) spread
/// evenly between their fragments. Default (4 MiB) configuration.
fn flood_case(family: u8, rng: &mut SplitMix64) -> Result<Case> {
    let in_flight = 64;
    let data: Vec<u8> = (0..SMALL).map(|i| (i * 7) as u8).collect();
    let legit_n = FLOOD_LEGIT.div_ceil(in_flight) * in_flight;
    let template = datagram(family, 0, &data)?.swap_remove(1).frame;
    let mut flood = Vec::with_capacity(FLOOD_DGRAMS);
    for _ in 0..FLOOD_DGRAMS {
        let mut f = template.clone();
        let r = rng.next_u64();
        if family == 4 {
            // 198.18.0.0/15 style random source (any address will do), random id.
            let ip = ETH;
            f[ip + 12..ip + 16].copy_from_slice(&(r as u32).to_be_bytes());
            f[ip + 4..ip + 6].copy_from_slice(&((r >> 32) as u16).to_be_bytes());
            let sum = ipv4_header_checksum(&f[ip..ip + 20]).to_be_bytes();
            f[ip + 10..ip + 12].copy_from_slice(&sum);
        } else {
            let ip = ETH;
            let src = (0xfd00u128 << 112) | u128::from(r) << 32 | u128::from(rng.next_u64() as u32);
            f[ip + 8..ip + 24].copy_from_slice(&src.to_be_bytes());
            // Fragment header right after the fixed header: id at +4.
            f[ip + 44..ip + 48].copy_from_slice(&((r >> 32) as u32).to_be_bytes());
        }
        flood.push(parsed(f)?);
    }
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

/// Pushes segments from `*seg` on (wrapping round the set) until `deadline`
/// seconds have passed since `t0`. The clock is read once per segment; its
/// time is the `now` of the segment's pushes.
fn drive(r: &mut Reassembler, case: &Case, seg: &mut usize, t0: Instant, deadline: Option<f64>) -> Tally {
    let mut t = Tally::default();
    let mut out = Vec::with_capacity(case.ip_len);
    let mut done_one_round = false;
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
        for p in &case.pushes[start..s.end] {
            if let Verdict::Complete { .. } = r.push(&p.frame, &p.l3, now, &mut out) {
                t.completed += 1;
                t.bytes += out.len() as u64;
                t.bad_len += u64::from(out.len() != case.ip_len);
            }
        }
        t.pushes += (s.end - start) as u64;
        t.legit += s.legit as u64;
        *seg += 1;
        if *seg == case.segments.len() {
            *seg = 0;
            done_one_round = true;
        }
    }
    black_box(t.bytes);
    t
}

fn measure(case: &Case, seconds: f64) -> Result<Row> {
    let mut r = Reassembler::new(case.cfg).map_err(anyhow::Error::msg)?;
    let t0 = Instant::now();
    let mut seg = 0;
    // Warm-up: one round, untimed; it also checks the datagrams.
    let warm = drive(&mut r, case, &mut seg, t0, None);
    if warm.bad_len != 0 {
        bail!("{} reassembled datagrams of the wrong length", warm.bad_len);
    }
    if case.flood.is_none() && warm.completed != warm.legit {
        bail!("only {} of {} datagrams completed in the warm-up", warm.completed, warm.legit);
    }
    let mut samples = Vec::new();
    for _ in 0..REPS {
        let start = Instant::now();
        let offset = start.duration_since(t0).as_secs_f64();
        let t = drive(&mut r, case, &mut seg, t0, Some(offset + seconds));
        let secs = start.elapsed().as_secs_f64();
        samples.push((t.completed as f64 / secs, secs * 1e9 / t.pushes as f64, t.completed as f64 / t.legit as f64));
    }
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (dgrams_per_s, ns_per_frag, completed_share) = samples[samples.len() / 2];
    Ok(Row {
        family: case.family,
        payload: case.payload,
        fragments: case.fragments,
        in_flight: case.in_flight,
        order: case.order,
        dgrams_per_s,
        ns_per_frag,
        peak_mem: r.stats().mem_high_watermark,
        completed_share,
        flood_dgrams: case.flood,
    })
}
