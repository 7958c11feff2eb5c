//! `flowsteer bench hash`: ns per Toeplitz hash for every implementation,
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
//! Each measurement is repeated `--reps` times for about `--seconds` each;
//! the median is reported with the min and max.

use crate::cli::BenchHashArgs;
use anyhow::Result;
use flowsteer_rss::quality::SplitMix64;
use flowsteer_rss::{Impl, RssKey, Toeplitz};
use std::hint::black_box;
use std::time::Instant;

const INPUTS: usize = 1024;

#[derive(Clone, Debug, serde::Serialize)]
struct Measurement {
    #[serde(rename = "impl")]
    imp: &'static str,
    input: &'static str,
    mode: &'static str,
    ns_per_hash: f64,
    ns_min: f64,
    ns_max: f64,
    ratio_to_reference: Option<f64>,
}

pub fn hash(args: &BenchHashArgs) -> Result<i32> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) || args.reps == 0 {
        anyhow::bail!("--seconds must be > 0 and --reps >= 1");
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
        let secs = if imp == Impl::Reference { args.seconds / 10.0 } else { args.seconds };
        for mode in ["single", "single-call", "batch"] {
            results.push(measure(&t, "ipv4-2tuple", mode, &v4_2, secs, args.reps));
            results.push(measure(&t, "ipv4-4tuple", mode, &v4_4, secs, args.reps));
            results.push(measure(&t, "ipv6-4tuple", mode, &v6_4, secs, args.reps));
        }
    }
    let reference: Vec<Measurement> = results.iter().filter(|m| m.imp == "reference").cloned().collect();
    for m in results.iter_mut() {
        m.ratio_to_reference =
            reference.iter().find(|r| r.input == m.input && r.mode == m.mode).map(|r| r.ns_per_hash / m.ns_per_hash);
    }
    if args.json {
        let doc = serde_json::json!({
            "schema": "flowsteer.bench.hash.v1",
            "cpu": cpu_model(),
            "best_impl": Impl::best().name(),
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "Toeplitz hash, Microsoft key, {INPUTS} random inputs, median of {} x {:.2}s; cpu: {}",
            args.reps,
            args.seconds,
            cpu_model()
        );
        println!(
            "{:<12} {:<12} {:<12} {:>9} {:>9} {:>9} {:>10}",
            "impl", "input", "mode", "ns/hash", "min", "max", "x faster"
        );
        for m in &results {
            println!(
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
    }
    Ok(0)
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

/// The CPU model line from /proc/cpuinfo, for the record.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}
