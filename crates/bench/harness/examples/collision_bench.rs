//! Print the flow table's cost and probe lengths for random and colliding
//! keys (colliding: Toeplitz hashes equal in the low 16 bits).
//! `cargo run --release -p flowsteer-bench --example collision_bench [n]`.

use flowsteer_bench::flow::collision_bench;
use flowsteer_flow::hostile::{colliding_v4_udp, fill, random_v4_udp, MICROSOFT_KEY};

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let (random, colliding) = collision_bench(n);
    println!("n={n}: {random:.1} ns/op random, {colliding:.1} ns/op colliding (ratio {:.2})", colliding / random);
    let r = fill(&random_v4_udp(n, 1), (1, 2));
    let c = fill(&colliding_v4_udp(n, &MICROSOFT_KEY, 1), (1, 2));
    for (name, s) in [("random", r), ("colliding", c)] {
        let mean = s.probes as f64 / s.lookups.max(1) as f64;
        println!("{name:>9}: max probe {}, mean probe {mean:.3}, hits {}/{}", s.max_probe, s.hits, n);
    }
}
