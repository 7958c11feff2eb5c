//! Runs `flowsteer_bench::fdb::run` and prints one line per design, then
//! the ratios to the `left-right` table.
//!
//! `cargo run --release -p flowsteer-bench --example fdb_bench -- [rounds] [round_ms] [reader_cpu0] [reader_cpu1] [burst]`
//! (defaults: 9 rounds of 300 ms, readers on cpu0 and cpu1, bursts of 32 then of 1 lookup
//! per guard or lock; `-` leaves a reader unpinned). 65,536 entries, a writer at 10,000
//! changes/s.

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let cpu = |i: usize, default: usize| match args.get(i).map(String::as_str) {
        Some("-") => None,
        Some(s) => s.parse().ok(),
        None => Some(default),
    };
    let bursts: Vec<usize> = match args.get(4).and_then(|s| s.parse().ok()) {
        Some(b) => vec![b],
        None => vec![32, 1],
    };
    for burst in bursts {
        let cfg = flowsteer_bench::fdb::Config {
            rounds: num(0, 9) as usize,
            round: Duration::from_millis(num(1, 300)),
            reader_cpus: [cpu(2, 0), cpu(3, 1)],
            burst,
            ..Default::default()
        };
        report(&cfg);
    }
}

fn report(cfg: &flowsteer_bench::fdb::Config) {
    println!(
        "{} entries, burst {}, {} rounds of {:?}, readers on {:?}, writer unpinned at {} changes/s [{}]",
        cfg.entries,
        cfg.burst,
        cfg.rounds,
        cfg.round,
        cfg.reader_cpus,
        cfg.updates_per_s,
        flowsteer_bench::cpu_model()
    );
    let rs = flowsteer_bench::fdb::run(cfg);
    let base = rs.first().map_or(f64::NAN, |r| r.ns_per_lookup);
    for r in &rs {
        println!(
            "{:<28} {:>7.2} ns/lookup (rounds {:.2}-{:.2})  x{:<6.2} writer {:>6.0} changes/s",
            r.design,
            r.ns_per_lookup,
            r.min_max.0,
            r.min_max.1,
            r.ns_per_lookup / base,
            r.updates_per_s
        );
    }
}
