//! Timing of `flowsteer-flow`'s table under random and hostile keys, for
//! `bench steer` and the `collision_bench` example: keys whose Toeplitz
//! hashes collide in the low 16 bits should cost within 2x of random ones.
//! No test times it.

pub mod dpdk;

use flowsteer_flow::hostile::{colliding_v4_udp, random_v4_udp, MICROSOFT_KEY};
use flowsteer_flow::{FlowKey, FlowTable, FlowTableConfig};
use std::hint::black_box;
use std::time::Instant;

/// Nanoseconds per operation (one insert and one lookup per key, in a table
/// with a fresh random hash key sized for `n` flows) for `n` random IPv4
/// UDP tuples and for `n` tuples whose Toeplitz hashes (Microsoft key)
/// collide in the low 16 bits. Steady state: each run first fills and
/// empties the table untimed (so page faults of the first touch are not
/// counted), then times one insert and one lookup per key. Runs alternate
/// between the two sets; best of three each. `(0.0, 0.0)` for `n == 0`.
pub fn collision_bench(n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let random = random_v4_udp(n, 1);
    let colliding = colliding_v4_udp(n, &MICROSOFT_KEY, 1);
    let (mut r, mut c) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        r = r.min(ns_per_op(&random));
        c = c.min(ns_per_op(&colliding));
    }
    (r, c)
}

fn ns_per_op(keys: &[FlowKey]) -> f64 {
    let cfg = FlowTableConfig { capacity: keys.len().max(1), idle_timeout_ns: u64::MAX };
    let Ok(mut t) = FlowTable::<u64>::new(cfg) else { return f64::NAN };
    for (i, k) in keys.iter().enumerate() {
        let _ = t.lookup_or_insert(k, 0, || i as u64);
    }
    for k in keys {
        black_box(t.remove(k));
    }
    let start = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        if let Ok((_, v)) = t.lookup_or_insert(k, i as u64, || i as u64) {
            black_box(v);
        }
    }
    for k in keys {
        black_box(t.get(k));
    }
    let elapsed = start.elapsed();
    elapsed.as_nanos() as f64 / (2 * keys.len()) as f64
}
