//! Read-side cost of the bridge's MAC table (`flowsteer-fdb`, `left-right`)
//! against a plain `HashMap` behind an `RwLock` and behind a `Mutex`, in
//! one run, same shape ([`run`]; the `fdb_bench` example calls it).
//!
//! Shape: a table of `entries` (MAC, VLAN) keys on 4 ports; two reader
//! threads (pinned to `reader_cpus` when given) look up keys that are all
//! in the table, in a shuffled order, taking the guard (or the lock) once
//! per burst of `burst` lookups; one unpinned writer thread makes
//! `updates_per_s` changes (refreshes and port moves of existing keys, so
//! every lookup keeps hitting) in ticks of 1 ms. The `left-right` writer
//! applies a tick's changes and publishes once, as `FdbWriter::drain`
//! does; the locked tables take the write lock once per change, as a
//! locked bridge table does. Designs alternate round by round, so a slow
//! minute on the shared host hits all of them; a design's figure is the
//! median over `rounds` of the two readers' mean ns per lookup.
//!
//! All three hash with std's `RandomState` (SipHash-1-3), the table's own
//! choice, so the difference is the read-side synchronisation; a fourth
//! row reads a `HashMap` nobody writes, unsynchronised: the floor, what
//! the lookup itself costs. This module
//! spawns and pins threads and reads clocks; the table does neither. No
//! test asserts any figure.

use flowsteer_fdb::{fdb, Entry, FdbConfig, FdbEvent, FdbKey, Mac, PortId, VlanId};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The harness's parameters.
#[derive(Clone, Debug)]
pub struct Config {
    /// Keys in the table (default 65,536).
    pub entries: usize,
    /// Lookups per guard or lock (default 32).
    pub burst: usize,
    /// Rounds per design (default 9).
    pub rounds: usize,
    /// Length of one round (default 300 ms).
    pub round: Duration,
    /// CPUs the two readers are pinned to (default 0 and 1; `None`: unpinned).
    pub reader_cpus: [Option<usize>; 2],
    /// Changes per second by the writer (default 10,000).
    pub updates_per_s: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            entries: 65_536,
            burst: 32,
            rounds: 9,
            round: Duration::from_millis(300),
            reader_cpus: [Some(0), Some(1)],
            updates_per_s: 10_000,
        }
    }
}

/// The designs measured.
/// The last one is the floor: the same lookups in a `HashMap` nobody
/// writes, with no synchronisation at all (its writer thread only ticks).
pub const DESIGNS: [&str; 4] =
    ["left-right (flowsteer-fdb)", "RwLock<HashMap>", "Mutex<HashMap>", "HashMap, no writer (floor)"];

/// One design's result.
#[derive(Clone, Debug, PartialEq)]
pub struct FdbBenchResult {
    /// One of [`DESIGNS`].
    pub design: &'static str,
    /// Median over rounds of the readers' mean ns per lookup.
    pub ns_per_lookup: f64,
    /// Lowest and highest round.
    pub min_max: (f64, f64),
    /// Median over rounds of the writer's achieved changes per second.
    pub updates_per_s: f64,
}

struct Round {
    ns_per_lookup: f64,
    updates_per_s: f64,
}

/// Runs every design `cfg.rounds` times, alternating, and returns one
/// result per design in [`DESIGNS`] order.
pub fn run(cfg: &Config) -> Vec<FdbBenchResult> {
    let keys = shuffled_keys(cfg.entries);
    let mut rounds: Vec<Vec<Round>> = (0..DESIGNS.len()).map(|_| Vec::new()).collect();
    for _ in 0..cfg.rounds.max(1) {
        rounds[0].push(round_left_right(cfg, &keys));
        rounds[1].push(round_locked(cfg, &keys, Locked::Rw(RwLock::new(table(&keys)))));
        rounds[2].push(round_locked(cfg, &keys, Locked::Mx(Mutex::new(table(&keys)))));
        rounds[3].push(round_floor(cfg, &keys));
    }
    DESIGNS
        .iter()
        .zip(rounds)
        .map(|(design, rs)| {
            let mut ns: Vec<f64> = rs.iter().map(|r| r.ns_per_lookup).collect();
            let mut up: Vec<f64> = rs.iter().map(|r| r.updates_per_s).collect();
            ns.sort_by(f64::total_cmp);
            up.sort_by(f64::total_cmp);
            FdbBenchResult {
                design,
                ns_per_lookup: ns[ns.len() / 2],
                min_max: (ns[0], ns[ns.len() - 1]),
                updates_per_s: up[up.len() / 2],
            }
        })
        .collect()
}

fn key(i: usize) -> FdbKey {
    let b = (i as u32).to_be_bytes();
    FdbKey::new(Mac([0x02, 0, b[0], b[1], b[2], b[3]]), VlanId(0))
}

fn port_of(i: usize) -> PortId {
    PortId((i % 4) as u16)
}

/// `0..n` as keys, in a fixed pseudo-random order.
fn shuffled_keys(n: usize) -> Vec<FdbKey> {
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = flowsteer_prim::SplitMix64(0x5eed);
    for i in (1..idx.len()).rev() {
        idx.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    idx.into_iter().map(key).collect()
}

fn table(keys: &[FdbKey]) -> HashMap<FdbKey, Entry> {
    (0..keys.len())
        .map(|i| (key(i), Entry { port: port_of(i), kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: 0 }))
        .collect()
}

/// The writer's `n`-th change: a refresh of key `n % entries`, or every
/// fourth time a move to the next port.
fn change(n: u64, entries: usize) -> FdbEvent {
    let i = (n as usize).wrapping_mul(7_919) % entries;
    let port = if n & 3 == 0 { PortId((port_of(i).0 + 1 + (n / 4 % 3) as u16) % 4) } else { port_of(i) };
    FdbEvent { key: key(i), port, at_s: n / 10_000 + 1 }
}

fn pin(cpu: Option<usize>) {
    if let Some(id) = cpu {
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

/// Runs two readers (`read_burst` is one burst of lookups from a start
/// index, returning a checksum) and the writer (`tick` makes `n` changes
/// from change number `from`) for one round; returns the readers' mean
/// ns per lookup and the writer's achieved rate.
fn round_with<R, W>(cfg: &Config, keys: &[FdbKey], readers: [R; 2], mut tick: W) -> Round
where
    R: FnMut(&[FdbKey]) -> u64 + Send,
    W: FnMut(u64, u64) + Send,
{
    let stop = AtomicBool::new(false);
    let start = Barrier::new(4);
    let burst = cfg.burst.max(1);
    let per_tick = (cfg.updates_per_s / 1_000).max(1);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (r, mut read) in readers.into_iter().enumerate() {
            let (stop, start) = (&stop, &start);
            let cpu = cfg.reader_cpus[r];
            handles.push(s.spawn(move || {
                pin(cpu);
                let mut at = r * keys.len() / 2;
                let mut lookups = 0u64;
                let mut sum = 0u64;
                start.wait();
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if at + burst > keys.len() {
                        at = 0;
                    }
                    sum = sum.wrapping_add(read(&keys[at..at + burst]));
                    at += burst;
                    lookups += burst as u64;
                }
                black_box(sum);
                t0.elapsed().as_nanos() as f64 / lookups.max(1) as f64
            }));
        }
        let (stop_w, start_w) = (&stop, &start);
        let writer = s.spawn(move || {
            start_w.wait();
            let t0 = Instant::now();
            let mut made = 0u64;
            let mut next = t0;
            while !stop_w.load(Ordering::Relaxed) {
                tick(made, per_tick);
                made += per_tick;
                next += Duration::from_millis(1);
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
            }
            made as f64 / t0.elapsed().as_secs_f64()
        });
        start.wait();
        std::thread::sleep(cfg.round);
        stop.store(true, Ordering::Relaxed);
        let ns: Vec<f64> = handles.into_iter().map(|h| h.join().unwrap_or(f64::NAN)).collect();
        let updates_per_s = writer.join().unwrap_or(f64::NAN);
        Round { ns_per_lookup: ns.iter().sum::<f64>() / ns.len() as f64, updates_per_s }
    })
}

fn round_left_right(cfg: &Config, keys: &[FdbKey]) -> Round {
    let fcfg =
        FdbConfig { max_learned: keys.len().max(1), max_learned_per_port: keys.len().max(1), ..FdbConfig::default() };
    let Ok((mut w, _workers)) = fdb(fcfg, 1) else {
        return Round { ns_per_lookup: f64::NAN, updates_per_s: f64::NAN };
    };
    for i in 0..keys.len() {
        w.apply(FdbEvent { key: key(i), port: port_of(i), at_s: 0 });
    }
    w.publish();
    let (r0, r1) = (w.reader(), w.reader());
    let read = |r: flowsteer_fdb::FdbReader| {
        move |burst: &[FdbKey]| {
            let Some(g) = r.enter() else { return 0 };
            burst.iter().map(|k| g.lookup(k.mac, k.vlan).map_or(0, |e| e.port.0 as u64)).sum()
        }
    };
    let entries = keys.len();
    round_with(cfg, keys, [read(r0), read(r1)], move |from, n| {
        for c in from..from + n {
            w.apply(change(c, entries));
        }
        w.publish();
    })
}

enum Locked {
    Rw(RwLock<HashMap<FdbKey, Entry>>),
    Mx(Mutex<HashMap<FdbKey, Entry>>),
}

impl Locked {
    fn read_burst(&self, burst: &[FdbKey]) -> u64 {
        let sum = |m: &HashMap<FdbKey, Entry>| burst.iter().map(|k| m.get(k).map_or(0, |e| e.port.0 as u64)).sum();
        match self {
            Locked::Rw(l) => l.read().map(|m| sum(&m)).unwrap_or(0),
            Locked::Mx(l) => l.lock().map(|m| sum(&m)).unwrap_or(0),
        }
    }

    fn write(&self, ev: FdbEvent) {
        let set = |m: &mut HashMap<FdbKey, Entry>| {
            m.insert(ev.key, Entry { port: ev.port, kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: ev.at_s });
        };
        match self {
            Locked::Rw(l) => {
                if let Ok(mut m) = l.write() {
                    set(&mut m)
                }
            }
            Locked::Mx(l) => {
                if let Ok(mut m) = l.lock() {
                    set(&mut m)
                }
            }
        }
    }
}

fn round_locked(cfg: &Config, keys: &[FdbKey], table: Locked) -> Round {
    let t = &table;
    let entries = keys.len();
    let read = || move |b: &[FdbKey]| t.read_burst(b);
    round_with(cfg, keys, [read(), read()], move |from, n| {
        for c in from..from + n {
            t.write(change(c, entries));
        }
    })
}

fn round_floor(cfg: &Config, keys: &[FdbKey]) -> Round {
    let t = table(keys);
    let t = &t;
    let read = || move |b: &[FdbKey]| b.iter().map(|k| t.get(k).map_or(0, |e| e.port.0 as u64)).sum();
    let r = round_with(cfg, keys, [read(), read()], |_, _| {});
    Round { updates_per_s: 0.0, ..r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_design_runs_and_every_lookup_hits() {
        let cfg = Config {
            entries: 1_024,
            rounds: 1,
            round: Duration::from_millis(20),
            reader_cpus: [None, None],
            ..Config::default()
        };
        let keys = shuffled_keys(cfg.entries);
        let mut seen = keys.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), cfg.entries, "the shuffle is a permutation");
        let rs = run(&cfg);
        assert_eq!(rs.iter().map(|r| r.design).collect::<Vec<_>>(), DESIGNS);
        for r in &rs {
            assert!(r.ns_per_lookup.is_finite() && r.ns_per_lookup > 0.0, "{r:?}");
        }
        // Changes keep every key in the table.
        let mut t = table(&keys);
        for c in 0..10_000 {
            let ev = change(c, cfg.entries);
            t.insert(ev.key, Entry { port: ev.port, kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: ev.at_s });
        }
        assert_eq!(t.len(), cfg.entries);
    }
}
