//! Stress: workers look up and learn on their own threads while the writer
//! drains, ages, flushes ports, removes ports and adds/removes static
//! entries. Checks behaviour only: no panic, every decision well formed,
//! every event posted applied (or counted dropped), every frame counted.
//!
//! Under Miri (`cargo +nightly miri test -p flowsteer-fdb --test stress`)
//! the same test runs 20 bursts per worker and 30 writer rounds instead of
//! seconds, and checks `left-right`'s and the ring's unsafe code for
//! use-after-free and data races on the way. It passes: about 6 minutes
//! of test on an idle 2-CPU machine, 9 minutes (23 with the first build)
//! on a loaded one.

use flowsteer_fdb::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PORTS: u16 = 4;
const STATIONS: u32 = 3_000;
const BURST: usize = 32;

fn mac(n: u32) -> Mac {
    let b = n.to_be_bytes();
    Mac([0x02, 0, b[0], b[1], b[2], b[3]])
}

/// SplitMix64, so each worker's frames are reproducible.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[test]
fn readers_and_the_writer_run_together_and_every_count_adds_up() {
    let miri = cfg!(miri);
    let cfg = FdbConfig {
        ageing_s: 3,
        max_learned: 2_000,
        max_learned_per_port: 800,
        event_queue: 256,
        ..FdbConfig::default()
    };
    let (mut w, workers) = fdb(cfg, 2).unwrap();
    let clock = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let bursts_min: u64 = if miri { 20 } else { 2_000 };

    let handles: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(i, mut k)| {
            let clock = Arc::clone(&clock);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rng = 0x1234 + i as u64;
                let mut bursts = 0u64;
                let mut seen_entries = 0u64;
                while bursts < bursts_min || !stop.load(Ordering::Relaxed) {
                    let now = clock.load(Ordering::Relaxed);
                    let Some(mut b) = k.burst(now) else { break };
                    for _ in 0..BURST {
                        let r = next(&mut rng);
                        let src = mac((r % STATIONS as u64) as u32);
                        let dst = if r >> 60 == 0 { Mac::BROADCAST } else { mac(((r >> 20) % STATIONS as u64) as u32) };
                        // A station mostly stays on its port, sometimes moves.
                        let port = if (r >> 40) & 63 == 0 {
                            ((r >> 50) % PORTS as u64) as u16
                        } else {
                            (src.0[5] as u16) % PORTS
                        };
                        let ingress = PortId(port);
                        match b.forward(ingress, src, dst, VlanId((r >> 33) as u16 & 1)) {
                            Decision::Unicast(out) => assert!(out != ingress && out.0 < PORTS),
                            Decision::Flood | Decision::Drop(DropReason::SamePort) => {}
                            Decision::Drop(DropReason::Reserved) => panic!("no reserved destination was sent"),
                        }
                    }
                    // Walk a little of the version this burst sees.
                    for (key, e) in b.table().iter().take(8) {
                        assert!(e.port.0 < PORTS, "{key:?} {e:?}");
                        seen_entries += 1;
                    }
                    drop(b);
                    bursts += 1;
                }
                (k.stats(), bursts, seen_entries)
            })
        })
        .collect();

    let started = Instant::now();
    let run_for = if miri { Duration::ZERO } else { Duration::from_secs(2) };
    let mut round = 0u64;
    let mut statics_added = 0u32;
    let rounds_min = if miri { 30 } else { 0 };
    while started.elapsed() < run_for || round < rounds_min {
        round += 1;
        w.drain();
        match round % 50 {
            10 => {
                let now = clock.fetch_add(1, Ordering::Relaxed) + 1;
                w.age(now);
            }
            20 => {
                w.flush_port(PortId((round / 50 % PORTS as u64) as u16));
            }
            30 => {
                w.remove_port(PortId((round / 50 % PORTS as u64) as u16));
            }
            40 => {
                let m = mac(STATIONS + statics_added % 16);
                if round % 100 == 40 {
                    let _ = w.add_static(
                        m,
                        VlanId(0),
                        PortId((round % PORTS as u64) as u16),
                        clock.load(Ordering::Relaxed),
                    );
                    statics_added += 1;
                } else {
                    w.remove(m, VlanId(0));
                }
            }
            _ => {}
        }
        assert!(w.learned_len() <= 2_000);
        if miri {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("worker panicked")).collect();
    w.drain();

    let mut posted = 0;
    for (s, bursts, _) in &results {
        assert!(s.conservation_ok(), "{s:?}");
        assert_eq!(s.frames, bursts * BURST as u64);
        assert!(*bursts >= bursts_min);
        posted += s.events_posted;
    }
    let ws = w.stats();
    assert_eq!(ws.events_applied, posted, "every event posted was applied: {ws:?}");
    assert!(ws.learned > 0 && ws.aged + ws.flushed > 0, "{ws:?}");
    assert_eq!(w.learned_len() + w.entries().filter(|(_, e)| e.is_static()).count(), w.len());
    let reader = w.reader();
    assert_eq!(reader.enter().unwrap().len(), w.len(), "the published copy is the writer's table");
}
