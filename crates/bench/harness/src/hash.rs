//! ns per Toeplitz hash (`flowsteer bench hash`) for every implementation,
//! side by side in one run, with the ratio to the bit-by-bit reference.
//!
//! Modes:
//! * `single`: every input hashed in its own pass (no pairing), driven by a
//!   loop compiled for the CPU's features: [`Toeplitz::hash_each`]. This is
//!   the shape in which DPDK measures its `static inline rte_thash_gfni()`.
//! * `single-call`: one call of the per-packet [`Toeplitz::hash`] API per
//!   input through a function boundary (what a caller that is not compiled
//!   for AVX-512 pays).
//! * `batch`: [`Toeplitz::hash_batch`] (two inputs share one GFNI pass).
//!
//! Inputs: 1024 pseudo-random tuples (L1-resident), the Microsoft key.
//! Each measurement is repeated [`Config::reps`] times for about
//! [`Config::seconds`] each; the median is reported with the min and max.

use flowsteer_prim::SplitMix64;
use flowsteer_rss::{Impl, RssKey, Toeplitz};
use std::fmt::Write;
use std::hint::black_box;
use std::time::Instant;

const INPUTS: usize = 1024;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seconds per measurement (the reference implementation gets a tenth).
    pub seconds: f64,
    /// Repetitions per measurement; the median is reported.
    pub reps: usize,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--seconds must be > 0 and --reps >= 1")]
    Config,
}

/// One implementation, input and mode.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    #[serde(rename = "impl")]
    pub imp: &'static str,
    pub input: &'static str,
    pub mode: &'static str,
    /// Median over the repetitions.
    pub ns_per_hash: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// How many times faster than the bit-by-bit reference.
    pub ratio_to_reference: Option<f64>,
}

/// A run's results and what they were measured with.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub results: Vec<Measurement>,
}

/// Measures every implementation this CPU has, in every mode, on the
/// three input shapes.
pub fn run(cfg: &Config) -> Result<Report, Error> {
    if !(cfg.seconds > 0.0 && cfg.seconds.is_finite()) || cfg.reps == 0 {
        return Err(Error::Config);
    }
    let key = RssKey::microsoft();
    let mut rng = SplitMix64(0xbe9c);
    let v4_2: Vec<[u8; 8]> = (0..INPUTS).map(|_| random_array(&mut rng)).collect();
    let v4_4: Vec<[u8; 12]> = (0..INPUTS).map(|_| random_array(&mut rng)).collect();
    let v6_4: Vec<[u8; 36]> = (0..INPUTS).map(|_| random_array(&mut rng)).collect();
    let mut results = Vec::new();
    for imp in Impl::available() {
        let t = Toeplitz::with_impl(&key, imp);
        // The reference is ~100x slower: a tenth of the time is plenty.
        let secs = if imp == Impl::Reference { cfg.seconds / 10.0 } else { cfg.seconds };
        for mode in ["single", "single-call", "batch"] {
            results.push(measure(&t, "ipv4-2tuple", mode, &v4_2, secs, cfg.reps));
            results.push(measure(&t, "ipv4-4tuple", mode, &v4_4, secs, cfg.reps));
            results.push(measure(&t, "ipv6-4tuple", mode, &v6_4, secs, cfg.reps));
        }
    }
    let reference: Vec<Measurement> = results.iter().filter(|m| m.imp == "reference").cloned().collect();
    for m in results.iter_mut() {
        m.ratio_to_reference =
            reference.iter().find(|r| r.input == m.input && r.mode == m.mode).map(|r| r.ns_per_hash / m.ns_per_hash);
    }
    Ok(Report { config: cfg.clone(), results })
}

impl Report {
    /// The `--json` document (schema `flowsteer.bench.hash.v1`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": "flowsteer.bench.hash.v1",
            "cpu": crate::cpu_model(),
            "best_impl": Impl::best().name(),
            "results": self.results,
        })
    }

    /// The text table, one line per measurement under a header.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Toeplitz hash, Microsoft key, {INPUTS} random inputs, median of {} x {:.2}s; cpu: {}",
            self.config.reps,
            self.config.seconds,
            crate::cpu_model()
        );
        let _ = writeln!(
            s,
            "{:<12} {:<12} {:<12} {:>9} {:>9} {:>9} {:>10}",
            "impl", "input", "mode", "ns/hash", "min", "max", "x faster"
        );
        for m in &self.results {
            let _ = writeln!(
                s,
                "{:<12} {:<12} {:<12} {:>9.2} {:>9.2} {:>9.2} {:>10.1}",
                m.imp,
                m.input,
                m.mode,
                m.ns_per_hash,
                m.ns_min,
                m.ns_max,
                m.ratio_to_reference.unwrap_or(f64::NAN)
            );
        }
        s
    }
}

fn random_array<const N: usize>(rng: &mut SplitMix64) -> [u8; N] {
    let mut a = [0u8; N];
    for b in a.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    a
}

/// One pass over all inputs in `mode`; returns a value that depends on
/// every hash so nothing is optimised away.
#[inline(never)]
fn pass<const N: usize>(t: &Toeplitz, mode: &str, inputs: &[[u8; N]], out: &mut [u32]) -> u32 {
    match mode {
        "single" => t.hash_each(black_box(inputs), out),
        "batch" => t.hash_batch(black_box(inputs), out),
        _ => {
            for (o, i) in out.iter_mut().zip(inputs) {
                *o = t.hash(black_box(i));
            }
        }
    }
    black_box(out.iter().fold(0, |a, &h| a ^ h))
}

fn measure<const N: usize>(
    t: &Toeplitz,
    input: &'static str,
    mode: &'static str,
    inputs: &[[u8; N]],
    secs: f64,
    reps: usize,
) -> Measurement {
    let mut out = vec![0u32; inputs.len()];
    // Calibrate: passes per repetition.
    let start = Instant::now();
    let mut passes = 0u64;
    while start.elapsed().as_secs_f64() < secs / 10.0 || passes < 2 {
        pass(t, mode, inputs, &mut out);
        passes += 1;
    }
    let per_rep = ((passes as f64) * 10.0).max(1.0) as u64;
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            for _ in 0..per_rep {
                pass(t, mode, inputs, &mut out);
            }
            s.elapsed().as_nanos() as f64 / (per_rep as f64 * inputs.len() as f64)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Measurement {
        imp: t.implementation().name(),
        input,
        mode,
        ns_per_hash: samples[samples.len() / 2],
        ns_min: samples[0],
        ns_max: samples[samples.len() - 1],
        ratio_to_reference: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_timing() {
        for (seconds, reps) in [(0.0, 1), (f64::NAN, 1), (f64::INFINITY, 1), (0.1, 0)] {
            let e = run(&Config { seconds, reps }).expect_err("a bad config");
            assert_eq!(e.to_string(), "--seconds must be > 0 and --reps >= 1");
        }
    }

    /// Every implementation in every mode on every input, the reference's
    /// ratio 1, and the text and JSON shapes the CLI prints.
    #[test]
    fn tiny_run_reports_every_case() {
        let r = run(&Config { seconds: 0.001, reps: 1 }).expect("a run");
        assert_eq!(r.results.len(), 9 * Impl::available().len());
        for m in r.results.iter().filter(|m| m.imp == "reference") {
            assert_eq!(m.ratio_to_reference, Some(1.0), "{m:?}");
        }
        let text = r.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("Toeplitz hash, Microsoft key, 1024 random inputs, median of 1 x 0.00s; cpu: "));
        assert!(lines[1].starts_with("impl         input        mode         "), "{}", lines[1]);
        assert_eq!(lines.len(), 2 + r.results.len());
        let doc = r.json();
        assert_eq!(doc["schema"], "flowsteer.bench.hash.v1");
        assert_eq!(doc["results"].as_array().map(Vec::len), Some(r.results.len()));
        assert!(doc["results"][0].get("impl").is_some(), "{doc}");
    }
}
