//! Hostile traffic: the flow table resists keys crafted to collide in the
//! RSS hash. 100 000 IPv4 UDP tuples whose Toeplitz hashes (Microsoft
//! key) agree in the low 16 bits, so a table indexed by the RSS hash would
//! chain them all in one bucket, must probe no longer than random keys (a
//! generous bound: 2 x the random maximum + 4), be found every time, and a
//! table too small for them must refuse and count, not grow.

use flowsteer_flow::hostile::{colliding_v4_udp, fill, random_v4_udp, toeplitz, v4_input, MICROSOFT_KEY};
use flowsteer_flow::{FlowError, FlowKey, FlowTable, FlowTableConfig};
use std::collections::HashSet;

const N: usize = 100_000;

fn low16(k: &FlowKey) -> u32 {
    flowsteer_rss::reference(&MICROSOFT_KEY, &v4_input(k).unwrap()) & 0xffff
}

#[test]
fn microsoft_key_known_answer() {
    // Microsoft "Verifying the RSS Hash Calculation", IPv4 with TCP:
    // 66.9.149.187:2794 -> 161.142.100.80:1766 = 0x51ccc178.
    let input = [66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6];
    assert_eq!(toeplitz(&MICROSOFT_KEY, &input), 0x51cc_c178);
    assert_eq!(flowsteer_rss::reference(&MICROSOFT_KEY, &input), 0x51cc_c178);
    assert_eq!(flowsteer_rss::RssKey::microsoft().as_bytes(), &MICROSOFT_KEY[..]);
}

#[test]
fn colliding_set_really_collides() {
    let keys = colliding_v4_udp(N, &MICROSOFT_KEY, 7);
    assert_eq!(keys.len(), N);
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), N, "distinct tuples");
    let want = low16(&keys[0]);
    assert!(keys.iter().all(|k| low16(k) == want), "every hash has low 16 bits {want:#06x}");
    for k in keys.iter().step_by(997) {
        let input = v4_input(k).unwrap();
        assert_eq!(toeplitz(&MICROSOFT_KEY, &input), flowsteer_rss::reference(&MICROSOFT_KEY, &input));
    }
    let random = random_v4_udp(N, 7);
    let distinct_low16: HashSet<u32> = random.iter().map(low16).collect();
    assert!(distinct_low16.len() > 50_000, "random tuples spread: {}", distinct_low16.len());
}

#[test]
fn probe_lengths_stay_bounded_under_collisions() {
    let colliding = colliding_v4_udp(N, &MICROSOFT_KEY, 1);
    let random = random_v4_udp(N, 1);
    for seed in [(1, 2), (0xdead_beef, 0x1234_5678), (u64::MAX, 0)] {
        let r = fill(&random, seed);
        let c = fill(&colliding, seed);
        for s in [&r, &c] {
            assert_eq!(s.inserts, N as u64);
            assert_eq!(s.hits, N as u64, "every lookup hits");
            assert_eq!(s.insert_failed_full, 0);
        }
        assert!(
            c.max_probe <= 2 * r.max_probe + 4,
            "seed {seed:?}: colliding max probe {} vs random {}",
            c.max_probe,
            r.max_probe
        );
        // Mean probe length too (probes per lookup, 2N lookups).
        assert!(c.probes <= 2 * r.probes, "seed {seed:?}: colliding probes {} vs random {}", c.probes, r.probes);
        assert!(c.max_probe < 64, "load <= 1/2 keeps probes short: {}", c.max_probe);
    }
}

#[test]
fn table_with_random_key_finds_every_colliding_flow() {
    let keys = colliding_v4_udp(N, &MICROSOFT_KEY, 3);
    let mut t = FlowTable::new(FlowTableConfig { capacity: N, idle_timeout_ns: 1_000 }).unwrap();
    for (i, k) in keys.iter().enumerate() {
        t.lookup_or_insert(k, 0, || i).unwrap();
    }
    assert!(keys.iter().enumerate().all(|(i, k)| t.get(k) == Some(&mut { i })));
    assert_eq!(t.len(), N);
}

#[test]
fn overflow_is_refused_and_counted() {
    let keys = colliding_v4_udp(N, &MICROSOFT_KEY, 5);
    let cap = N / 2;
    let mut t = FlowTable::with_seed(FlowTableConfig { capacity: cap, idle_timeout_ns: 1_000_000 }, (9, 9)).unwrap();
    let mut refused = 0;
    for k in &keys {
        match t.lookup_or_insert(k, 10, || ()) {
            Ok(_) => {}
            Err(FlowError::Full) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let s = t.stats();
    assert_eq!(t.len(), cap);
    assert_eq!(refused, N - cap);
    assert_eq!(s.insert_failed_full, (N - cap) as u64);
    assert_eq!(s.inserts + s.insert_failed_full, N as u64, "every new flow is inserted or counted");
    // Once idle (past the timeout by more than the table's two-tick
    // rounding, 1/32 of it), new flows push old ones out (and are counted).
    let fresh = random_v4_udp(10, 99);
    for k in &fresh {
        t.lookup_or_insert(k, 10 + 1_000_000 + 1_000_000 / 32 + 1, || ()).unwrap();
    }
    assert_eq!(t.stats().evicted, 10);
    assert_eq!(t.len(), cap);
}
