//! DPDK's `rte_ip_frag` on the same warm
//! workload, run beside each warm chain row by the C harness in
//! `bench/dpdk/` (it builds the byte-identical frames in the same push
//! order; see its README), and the side-by-side comparison against the
//! issue's bars: at least 1.5x DPDK's example table shape, and no slower
//! than its best shape.

use super::{Case, Row, DPDK_SHAPES_4096, DPDK_SHAPES_64, SMALL};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

/// Why the DPDK harness could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "--dpdk {}: not a file (build the harness with `make -C bench/dpdk`; it needs Debian's libdpdk-dev)",
        .0.display()
    )]
    NotAFile(PathBuf),
    #[error("cannot run {}", .path.display())]
    Spawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// It ran and failed: its exit status and stderr.
    #[error("{} failed ({status}): {stderr}", .path.display())]
    Failed { path: PathBuf, status: std::process::ExitStatus, stderr: String },
    #[error("{}: unreadable --json output", .path.display())]
    Output {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// A DPDK table shape that could not complete a case (it lost datagrams),
/// left out of the rows; its `Display` is the line the CLI shows.
#[derive(Clone, Debug)]
pub struct LeftOut {
    pub shape: String,
    pub family: u8,
    pub in_flight: usize,
    pub order: String,
    /// The harness's status for it, and its note.
    pub status: String,
    pub note: String,
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dpdk {} IPv{} {} in flight {}: {} ({}), left out",
            self.shape, self.family, self.in_flight, self.order, self.status, self.note
        )
    }
}

/// The harness binary and the CPU both sides run on.
pub(super) struct Harness {
    path: PathBuf,
    pub cpu: u32,
    /// DPDK's version as the harness reports it (e.g. "DPDK 22.11.11").
    pub version: String,
}

/// The part of the harness's `--json` output used here.
#[derive(Deserialize)]
struct Output {
    dpdk: String,
    results: Vec<Result_>,
}

#[derive(Deserialize)]
struct Result_ {
    shape: String,
    shape_role: String,
    family: u8,
    payload: usize,
    fragments: usize,
    in_flight: usize,
    order: String,
    status: String,
    /// Null (or 0) when the shape could not complete the case.
    dgrams_per_s: Option<f64>,
    ns_per_frag: Option<f64>,
    completed_share: f64,
    #[serde(default)]
    note: String,
}

impl Harness {
    /// Checks that the harness runs here (a tiny case), so a missing build
    /// or an EAL failure is reported before any measuring.
    pub(super) fn new(path: &std::path::Path, cpu: u32) -> Result<Harness, Error> {
        if !path.is_file() {
            return Err(Error::NotAFile(path.to_path_buf()));
        }
        let mut h = Harness { path: path.to_path_buf(), cpu, version: String::new() };
        let out = h.call(&["--family", "4", "--in-flight", "64", "--order", "in-order", "--shape", "bkt64x2"], 0.01)?;
        h.version = out.dpdk;
        Ok(h)
    }

    fn call(&self, filter: &[&str], seconds: f64) -> Result<Output, Error> {
        let out = Command::new(&self.path)
            .args(filter)
            .args(["--payload", &SMALL.to_string(), "--seconds", &seconds.to_string()])
            .args(["--cpu", &self.cpu.to_string(), "--json"])
            .output()
            .map_err(|source| Error::Spawn { path: self.path.clone(), source })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(Error::Failed { path: self.path.clone(), status: out.status, stderr: err.trim().to_string() });
        }
        serde_json::from_slice(&out.stdout).map_err(|source| Error::Output { path: self.path.clone(), source })
    }

    /// DPDK's rows for `case` (a warm 4,416-byte case), one per table shape
    /// that completed every datagram; shapes too small for the case (they
    /// lose datagrams) are told to `on_left_out` and left out.
    pub(super) fn run(
        &self,
        case: &Case,
        seconds: f64,
        round: usize,
        on_left_out: &mut dyn FnMut(&LeftOut),
    ) -> Result<Vec<Row>, Error> {
        let (family, in_flight) = (case.family.to_string(), case.in_flight.to_string());
        let shapes = if case.in_flight <= 64 { DPDK_SHAPES_64 } else { DPDK_SHAPES_4096 };
        let filter = ["--family", &family, "--in-flight", &in_flight, "--order", case.order, "--shape", shapes];
        let out = self.call(&filter, seconds)?;
        let mut rows = Vec::new();
        for r in out.results {
            let (Some(dgrams_per_s), Some(ns_per_frag), "ok") = (r.dgrams_per_s, r.ns_per_frag, r.status.as_str())
            else {
                on_left_out(&LeftOut {
                    shape: r.shape,
                    family: r.family,
                    in_flight: r.in_flight,
                    order: r.order,
                    status: r.status,
                    note: r.note,
                });
                continue;
            };
            rows.push(Row {
                implementation: "dpdk",
                shape_role: Some(if r.shape_role == "example" { "example" } else { "tight" }),
                shape: Some(r.shape),
                family: r.family,
                payload: r.payload,
                fragments: r.fragments,
                in_flight: r.in_flight,
                order: r.order,
                delivery: "chain",
                set: "warm",
                dgrams_per_s,
                ns_per_frag,
                peak_mem: None,
                completed_share: r.completed_share,
                flood_dgrams: None,
                round: Some(round),
                rounds: None,
            });
        }
        Ok(rows)
    }
}

/// flowsteer against DPDK in one case, over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub family: u8,
    pub in_flight: usize,
    pub order: String,
    pub rounds: usize,
    /// Medians over the rounds (datagrams/s).
    pub flowsteer: f64,
    pub dpdk_example: Option<f64>,
    pub dpdk_best: Option<f64>,
    /// The shape with the best median.
    pub dpdk_best_shape: Option<String>,
    /// flowsteer / DPDK example shape, paired per round, median (the bar:
    /// >= 1.5) and lowest.
    pub vs_example: Option<f64>,
    pub vs_example_min: Option<f64>,
    /// flowsteer / DPDK's best shape (`dpdk_best_shape`) in the same
    /// round, median (the bar: >= 1.0) and lowest.
    pub vs_best: Option<f64>,
    pub vs_best_min: Option<f64>,
    /// 95 % confidence intervals of those two medians (the sign test's,
    /// distribution-free): `[low, high]`, absent below 6 rounds.
    pub vs_example_ci95: Option<[f64; 2]>,
    pub vs_best_ci95: Option<[f64; 2]>,
}

/// The median (the mean of the two middle values for an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let hi = v.get(v.len() / 2).copied()?;
    Some(if v.len().is_multiple_of(2) { v.get(v.len() / 2 - 1).map_or(hi, |lo| (lo + hi) / 2.0) } else { hi })
}

/// A distribution-free confidence interval of at least 95 % for the median
/// of `v` (the sign test's): from the k-th smallest to the k-th largest
/// value, k the largest rank with P(Binomial(n, 1/2) < k) <= 2.5 %. It
/// assumes nothing about the noise but that rounds are independent, which
/// suits this shared host. None below 6 values (no such k exists) or with
/// a NaN.
fn median_ci95(v: &[f64]) -> Option<[f64; 2]> {
    let n = v.len();
    if v.iter().any(|x| x.is_nan()) {
        return None;
    }
    // P(X = j) from P(X = j - 1), in logarithms so that 0.5^n cannot
    // underflow to zero for many rounds.
    let mut ln_p = n as f64 * 0.5f64.ln();
    let (mut below, mut k) = (0.0, 0);
    for j in 0..n {
        let p = ln_p.exp();
        if below + p > 0.025 {
            break;
        }
        below += p;
        k = j + 1;
        ln_p += ((n - j) as f64 / (j + 1) as f64).ln();
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some([*s.get(k.checked_sub(1)?)?, *s.get(n.checked_sub(k)?)?])
}

/// The rows of one case's rounds (flowsteer's and DPDK's, each tagged with
/// its round) merged into one row per implementation and shape (the
/// median over the rounds, `rounds` = how many), and the
/// comparison, its ratios paired within each round.
pub(super) fn merge_rounds(rows: Vec<Row>) -> (Vec<Row>, Option<Comparison>) {
    let rounds = rows.iter().filter_map(|r| r.round).max().map_or(0, |m| m + 1);
    let mut keys: Vec<(&'static str, Option<String>)> = Vec::new();
    for r in &rows {
        let k = (r.implementation, r.shape.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut merged = Vec::new();
    for (imp, shape) in &keys {
        let same: Vec<&Row> = rows.iter().filter(|r| r.implementation == *imp && &r.shape == shape).collect();
        let (Some(rate), Some(ns)) = (
            median(same.iter().map(|r| r.dgrams_per_s).collect()),
            median(same.iter().map(|r| r.ns_per_frag).collect()),
        ) else {
            continue;
        };
        if let Some(r) = same.first() {
            let mut m = (*r).clone();
            m.dgrams_per_s = rate;
            m.ns_per_frag = ns;
            m.completed_share = same.iter().map(|r| r.completed_share).fold(1.0, f64::min);
            m.round = None;
            m.rounds = Some(same.len());
            merged.push(m);
        }
    }
    let Some(f) = merged.iter().find(|r| r.implementation == "flowsteer") else { return (merged, None) };
    let dpdk: Vec<&Row> = merged.iter().filter(|r| r.implementation == "dpdk").collect();
    let ex = dpdk.iter().find(|r| r.shape_role == Some("example"));
    // DPDK's best shape is the one with the highest median over the rounds,
    // and each round is paired with that shape's row of the same round.
    // (Pairing each round with whichever shape happened to be fastest in it
    // would compare against the maximum of several noisy samples, which
    // overstates every shape: the winner's curse.)
    let top = dpdk.iter().max_by(|a, b| a.dgrams_per_s.total_cmp(&b.dgrams_per_s));
    let top_shape = top.and_then(|r| r.shape.clone());
    let ours = |round: usize| rows.iter().find(|r| r.implementation == "flowsteer" && r.round == Some(round));
    let example = |round: usize| rows.iter().find(|r| r.round == Some(round) && r.shape_role == Some("example"));
    let best = |round: usize| {
        rows.iter().find(|r| r.implementation == "dpdk" && r.round == Some(round) && r.shape == top_shape)
    };
    let (mut vs_ex, mut vs_best) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let Some(o) = ours(round) else { continue };
        if let Some(e) = example(round) {
            vs_ex.push(o.dgrams_per_s / e.dgrams_per_s);
        }
        if let Some(b) = best(round) {
            vs_best.push(o.dgrams_per_s / b.dgrams_per_s);
        }
    }
    let lowest = |v: &[f64]| v.iter().copied().min_by(f64::total_cmp);
    let cmp = Comparison {
        family: f.family,
        in_flight: f.in_flight,
        order: f.order.clone(),
        rounds,
        flowsteer: f.dgrams_per_s,
        dpdk_example: ex.map(|r| r.dgrams_per_s),
        dpdk_best: top.map(|r| r.dgrams_per_s),
        dpdk_best_shape: top_shape,
        vs_example_min: lowest(&vs_ex),
        vs_example_ci95: median_ci95(&vs_ex),
        vs_example: median(vs_ex),
        vs_best_min: lowest(&vs_best),
        vs_best_ci95: median_ci95(&vs_best),
        vs_best: median(vs_best),
    };
    (merged, Some(cmp))
}

/// The comparison table, after a blank line, with the bars it is read
/// against.
pub fn write_comparison(out: &mut String, c: &[Comparison]) -> std::fmt::Result {
    let m = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{:.2}", v / 1e6));
    let x = |v: Option<f64>, lo: Option<f64>| match (v, lo) {
        (Some(v), Some(lo)) => format!("{v:.2}x ({lo:.2})"),
        _ => "-".to_string(),
    };
    let ci = |c: Option<[f64; 2]>| c.map_or_else(|| "-".to_string(), |[lo, hi]| format!("{lo:.2}-{hi:.2}"));
    writeln!(out)?;
    writeln!(
        out,
        "flowsteer vs DPDK rte_ip_frag, same workload, same CPU, rounds of one then the other; \
         M datagrams/s (median of rounds); ratios paired per round: median (lowest), and the \
         median's 95 % interval (sign test, from 6 rounds)"
    )?;
    writeln!(
        out,
        "{:>3} {:>9} {:<9} {:>6} {:>9} {:>10} {:>9} {:<20} {:>14} {:>10} {:>14} {:>10}",
        "fam",
        "in_flight",
        "order",
        "rounds",
        "flowsteer",
        "dpdk_examp",
        "dpdk_best",
        "best_shape",
        "vs_example",
        "ex_95%",
        "vs_best",
        "best_95%"
    )?;
    for r in c {
        writeln!(
            out,
            "{:>3} {:>9} {:<9} {:>6} {:>9.2} {:>10} {:>9} {:<20} {:>14} {:>10} {:>14} {:>10}",
            r.family,
            r.in_flight,
            r.order,
            r.rounds,
            r.flowsteer / 1e6,
            m(r.dpdk_example),
            m(r.dpdk_best),
            r.dpdk_best_shape.as_deref().unwrap_or("-"),
            x(r.vs_example, r.vs_example_min),
            ci(r.vs_example_ci95),
            x(r.vs_best, r.vs_best_min),
            ci(r.vs_best_ci95)
        )?;
    }
    writeln!(
        out,
        "bars: vs_example >= 1.50x (1.5 x DPDK's example shape), vs_best >= 1.00x (no slower than its best shape)"
    )
}

#[cfg(test)]
mod tests {
    use super::super::Row;
    use super::{median_ci95, merge_rounds};

    fn row(
        implementation: &'static str,
        shape: Option<&str>,
        role: Option<&'static str>,
        round: usize,
        rate: f64,
    ) -> Row {
        Row {
            implementation,
            shape: shape.map(str::to_string),
            shape_role: role,
            family: 4,
            payload: 4416,
            fragments: 3,
            in_flight: 64,
            order: "in-order".to_string(),
            delivery: "chain",
            set: "warm",
            dgrams_per_s: rate,
            ns_per_frag: 1e9 / rate,
            peak_mem: None,
            completed_share: 1.0,
            flood_dgrams: None,
            round: Some(round),
            rounds: None,
        }
    }

    /// Two tight shapes that trade places from round to round: the best
    /// shape is the one with the best median (b), and every round is paired
    /// with b's row of that round, not with whichever shape won it.
    #[test]
    fn best_shape_is_chosen_by_median_and_paired_per_round() {
        let rates = [(10.0, 6.0, 9.0, 10.5), (10.0, 6.0, 11.0, 10.0), (10.0, 6.0, 9.5, 10.4)];
        let mut rows = Vec::new();
        for (round, (ours, ex, a, b)) in rates.into_iter().enumerate() {
            rows.push(row("flowsteer", None, None, round, ours));
            rows.push(row("dpdk", Some("bkt4096x16"), Some("example"), round, ex));
            rows.push(row("dpdk", Some("bktA"), Some("tight"), round, a));
            rows.push(row("dpdk", Some("bktB"), Some("tight"), round, b));
        }
        let (merged, cmp) = merge_rounds(rows);
        assert_eq!(merged.len(), 4);
        let c = cmp.expect("a comparison");
        assert_eq!(c.dpdk_best_shape.as_deref(), Some("bktB"));
        assert_eq!(c.dpdk_best, Some(10.4));
        // Per round against bktB: 10/10.5, 10/10, 10/10.4 (against each
        // round's fastest shape the median would be 10/10.5: round 2 paired
        // with bktA at 11).
        assert_eq!(c.vs_best, Some(10.0 / 10.4));
        assert_eq!(c.vs_best_min, Some(10.0 / 10.5));
        assert_eq!(c.vs_example, Some(10.0 / 6.0));
        // Three rounds are too few for a 95 % interval.
        assert_eq!(c.vs_best_ci95, None);
    }

    /// The sign test's ranks: 6 values give the whole range (1 - 2/64 =
    /// 96.9 %), 9 the 2nd to 8th, 15 the 4th to 12th, 45 the 16th to
    /// 30th (binomial tables); 5 values give none; thousands of rounds do
    /// not underflow; order does not matter.
    #[test]
    fn median_ci95_uses_the_sign_test_ranks() {
        let vals = |n: usize| (1..=n).rev().map(|i| i as f64).collect::<Vec<_>>();
        assert_eq!(median_ci95(&vals(5)), None);
        assert_eq!(median_ci95(&[]), None);
        assert_eq!(median_ci95(&vals(6)), Some([1.0, 6.0]));
        assert_eq!(median_ci95(&vals(9)), Some([2.0, 8.0]));
        assert_eq!(median_ci95(&vals(15)), Some([4.0, 12.0]));
        assert_eq!(median_ci95(&vals(45)), Some([16.0, 30.0]));
        // 3,000: the 1,446th to 1,555th (n / 2 -/+ 1.96 sqrt(n) / 2).
        assert_eq!(median_ci95(&vals(3000)), Some([1446.0, 1555.0]));
        assert_eq!(median_ci95(&[1.0, f64::NAN, 2.0, 3.0, 4.0, 5.0, 6.0]), None);
    }
}
