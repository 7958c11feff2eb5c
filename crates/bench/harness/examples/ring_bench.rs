//! Runs `flowsteer_bench::ring::run` and prints one line per design.
//!
//! `cargo run --release -p flowsteer-bench --example ring_bench -- [items] [burst] [producer_cpu] [consumer_cpu]`
//! (defaults: 100000000 items, bursts 1 and 32, cpu0 -> cpu1; `-` leaves a side unpinned).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let items = args.first().and_then(|s| s.parse().ok()).unwrap_or(100_000_000u64);
    let bursts: Vec<usize> = match args.get(1).and_then(|s| s.parse().ok()) {
        Some(b) => vec![b],
        None => vec![1, 32],
    };
    let cpu = |i: usize, default: usize| match args.get(i).map(String::as_str) {
        Some("-") => None,
        Some(s) => s.parse().ok(),
        None => Some(default),
    };
    let (pcpu, ccpu) = (cpu(2, 0), cpu(3, 1));
    for burst in bursts {
        for r in flowsteer_bench::ring::run(items, burst, pcpu, ccpu) {
            println!(
                "{:<22} burst {:>3}  {:>11} items  {:>7.3} s  {:>9.1} M items/s  [{}]",
                r.design, r.burst, r.items, r.seconds, r.mitems_per_s, r.placement
            );
        }
    }
}
