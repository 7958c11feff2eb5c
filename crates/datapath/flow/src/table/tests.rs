use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const SEED: (u64, u64) = (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);

fn key(i: u32) -> FlowKey {
    let (src, dst) = if i & 1 == 0 {
        (IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)))
    } else {
        (IpAddr::V6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i))), IpAddr::V6(Ipv6Addr::LOCALHOST))
    };
    FlowKey { src, dst, proto: 17, sport: 1000 + (i % 7) as u16, dport: 53 }
}

fn table(capacity: usize, idle_timeout_ns: u64) -> FlowTable<u64> {
    FlowTable::with_seed(FlowTableConfig { capacity, idle_timeout_ns }, SEED).unwrap()
}

#[test]
fn owned_by_one_core_movable_to_it() {
    fn send<T: Send>() {}
    send::<FlowTable<Vec<u8>>>();
    send::<crate::TimerWheel>();
    send::<crate::Listeners<u32>>();
}

#[test]
fn a_bucket_and_an_entry_are_one_cache_line_each() {
    assert_eq!(std::mem::size_of::<Bucket>(), 64);
    assert_eq!(std::mem::align_of::<Bucket>(), 64);
    // The engine's per-flow state is two counters: key, stamp, generation
    // and value share one line.
    assert_eq!(std::mem::size_of::<Entry<[u64; 2]>>(), 64);
    assert_eq!(std::mem::align_of::<Entry<[u64; 2]>>(), 64);
}

#[test]
fn config_is_checked() {
    let c = |capacity| FlowTableConfig { capacity, ..FlowTableConfig::default() };
    assert_eq!(FlowTable::<()>::new(c(0)).unwrap_err(), FlowError::ZeroCapacity);
    assert_eq!(
        FlowTable::<()>::new(c(MAX_CAPACITY + 1)).unwrap_err(),
        FlowError::CapacityTooLarge { requested: MAX_CAPACITY + 1, max: MAX_CAPACITY }
    );
    let t = FlowTable::<()>::new(FlowTableConfig::default()).unwrap();
    assert_eq!(t.capacity(), 65_536);
    assert_eq!(t.idle_timeout_ns(), 30_000_000_000);
    assert_eq!(t.buckets.len() * SLOTS, 131_072, "two slots per flow: load <= 1/2");
    assert!(t.is_empty());
    // A tick of 2^28 ns (268 ms, <= 1/64 of 30 s); 112 of them cover 30 s.
    assert_eq!((t.shift, t.timeout_ticks), (28, 112));
    // Odd capacities round up to whole buckets.
    let t = table(3, 100);
    assert_eq!((t.buckets.len(), t.shift, t.timeout_ticks), (1, 0, 100));
}

#[test]
fn insert_lookup_remove() {
    let mut t = table(8, 100);
    let (id, v) = t.lookup_or_insert(&key(1), 5, || 11).unwrap();
    assert_eq!(*v, 11);
    *v = 12;
    let (id2, v) = t.lookup_or_insert(&key(1), 6, || panic!("init on a hit")).unwrap();
    assert_eq!((id, *v), (id2, 12));
    assert_eq!(t.get(&key(2)), None);
    assert_eq!(t.get(&key(1)).copied(), Some(12));
    assert_eq!(t.key_of(id), Some(key(1)));
    assert_eq!(t.by_id(id).copied(), Some(12));
    assert_eq!(t.len(), 1);
    assert_eq!(t.remove(&key(1)), Some(12));
    assert_eq!(t.remove(&key(1)), None);
    assert!(t.is_empty());
    // The id is stale now, also once its slot is reused.
    assert_eq!(t.by_id(id), None);
    assert_eq!(t.key_of(id), None);
    let (id3, _) = t.lookup_or_insert(&key(2), 7, || 20).unwrap();
    assert_eq!(id3.index(), id.index());
    assert_ne!(id3, id);
    t.touch(id, 1000);
    assert_eq!(t.flows(), vec![(key(2), 7)]);
    t.touch(id3, 9);
    assert_eq!(t.flows(), vec![(key(2), 9)]);
    assert_eq!(FlowId::from_u64(id3.to_u64()), id3);
    let s = t.stats();
    assert_eq!((s.inserts, s.removed, s.lookups, s.hits), (2, 1, 5, 2));
    assert_eq!((s.probes, s.max_probe), (5, 1), "every lookup read its home line only");
    t.check_invariants();
}

/// Keys whose home bucket is `home` in a table of `t`'s size (found by search).
fn keys_with_home(t: &FlowTable<u64>, home: usize, n: usize, skip: &mut u32) -> Vec<FlowKey> {
    let mut out = Vec::new();
    while out.len() < n {
        *skip += 1;
        let k = key(*skip);
        if t.home(t.hash(&Packed::new(&k))) == home {
            out.push(k);
        }
    }
    out
}

#[test]
fn overflow_counts_keep_displaced_keys_reachable() {
    // capacity 16 -> 4 buckets of 8. Eleven keys homed at bucket 3 fill it
    // and wrap into bucket 0; two more are homed at 0.
    let mut t = table(16, 100);
    let mut skip = 0;
    let a = keys_with_home(&t, 3, 11, &mut skip);
    let b = keys_with_home(&t, 0, 2, &mut skip);
    let all: Vec<FlowKey> = a.iter().chain(&b).copied().collect();
    for (i, k) in all.iter().enumerate() {
        t.lookup_or_insert(k, 0, || i as u64).unwrap();
    }
    assert_eq!(t.buckets[3].ovf, 3, "three keys passed bucket 3");
    assert_eq!(t.buckets[0].ovf, 0);
    assert_eq!(t.stats().max_probe, 2, "a wrapped key reads bucket 3, then bucket 0");
    t.check_invariants();
    let mut gone = HashSet::new();
    for victim in [8usize, 0, 11, 9, 10, 3] {
        assert_eq!(t.remove(&all[victim]), Some(victim as u64));
        gone.insert(victim);
        t.check_invariants();
        for (i, k) in all.iter().enumerate() {
            assert_eq!(t.get(k).copied(), (!gone.contains(&i)).then_some(i as u64), "key {i}");
        }
    }
    // The wrapped keys (8, 9, 10) are gone: a miss at bucket 3 ends there.
    assert_eq!(t.buckets[3].ovf, 0);
    let before = t.stats().probes;
    assert_eq!(t.get(&keys_with_home(&t, 3, 1, &mut skip)[0]), None);
    assert_eq!(t.stats().probes - before, 1);
    // A new key homed at 3 takes a freed slot there.
    let k = keys_with_home(&t, 3, 1, &mut skip)[0];
    t.lookup_or_insert(&k, 0, || 99).unwrap();
    assert_eq!(t.buckets[3].ovf, 0);
    t.check_invariants();
}

#[test]
fn stuck_overflow_counts_stay_correct() {
    // One bucket of 8 slots cannot overflow (capacity 4), so force the
    // count to stick and check lookups, inserts and removals still work.
    let mut t = table(16, 100);
    for b in t.buckets.iter_mut() {
        b.ovf = OVF_STUCK;
    }
    for i in 0..16 {
        t.lookup_or_insert(&key(i), 0, || u64::from(i)).unwrap();
    }
    for i in (0..16).step_by(3) {
        assert_eq!(t.remove(&key(i)), Some(u64::from(i)));
    }
    for i in 0..16 {
        assert_eq!(t.get(&key(i)).copied(), (i % 3 != 0).then_some(u64::from(i)));
    }
    assert!(t.stats().max_probe <= 4, "bounded by the bucket count");
    t.check_invariants();
}

#[test]
fn full_table_refuses_then_evicts_an_idle_flow() {
    let mut t = table(3, 100);
    for i in 0..3 {
        t.lookup_or_insert(&key(i), 10 * u64::from(i), || u64::from(i)).unwrap();
    }
    // Nothing idle at 50: refuse, count, do not call init.
    assert_eq!(t.lookup_or_insert(&key(9), 50, || panic!("init on refusal")).unwrap_err(), FlowError::Full);
    assert_eq!(t.stats().insert_failed_full, 1);
    // Existing flows still work while full.
    let (id0, _) = t.lookup_or_insert(&key(0), 60, || 99).unwrap();
    // At 111 only key(1) (seen at 10) is idle (> 100 ns): evicted.
    assert_eq!(t.lookup_or_insert(&key(9), 111, || 9).map(|(_, v)| *v), Ok(9));
    assert_eq!(t.get(&key(1)), None);
    assert_eq!(t.stats().evicted, 1);
    assert_eq!(t.len(), 3);
    // key(2) was seen at 20: at exactly 120 it is not idle yet (strictly older).
    assert_eq!(t.lookup_or_insert(&key(10), 120, || 10).unwrap_err(), FlowError::Full);
    t.touch(id0, 121);
    assert_eq!(t.lookup_or_insert(&key(10), 121, || 10).map(|(_, v)| *v), Ok(10));
    assert_eq!(t.get(&key(2)), None, "key(2) was the only idle flow");
    assert_eq!(t.get(&key(0)).copied(), Some(0));
    let s = t.stats();
    assert_eq!((s.evicted, s.insert_failed_full, s.inserts), (2, 2, 5));
    t.check_invariants();
}

#[test]
fn expire_removes_idle_flows_and_spares_fresh_ones() {
    let mut t = table(64, 100);
    for i in 0..20u32 {
        t.lookup_or_insert(&key(i), u64::from(i) * 10, || u64::from(i)).unwrap();
    }
    // Re-seeing key(0) at 150 makes it fresh.
    t.lookup_or_insert(&key(0), 150, || unreachable!()).unwrap();
    // At 200, flows seen before 100 (keys 1..=9) are idle. A budget of 4
    // visits 4 slots (slab order: insertion order here).
    let mut got = Vec::new();
    assert_eq!(t.expire(200, 4, |k, v| got.push((k, v))), 3);
    assert_eq!(got, (1..=3).map(|i| (key(i), u64::from(i))).collect::<Vec<_>>());
    assert_eq!(t.stats().expire_visits, 4);
    got.clear();
    assert_eq!(t.expire(200, 100, |k, v| got.push((k, v))), 6);
    assert_eq!(got, (4..=9).map(|i| (key(i), u64::from(i))).collect::<Vec<_>>());
    assert_eq!(t.stats().expire_visits, 4 + 20, "a budget past the slab visits each slot once");
    // key(10), seen at exactly 100, is not idle at 200.
    assert_eq!(t.expire(200, 100, |_, _| panic!("fresh flow expired")), 0);
    assert_eq!(t.len(), 11);
    assert_eq!(t.stats().expired, 9);
    // Freed slots are reused; the hand goes on passing them.
    for i in 100..105 {
        t.lookup_or_insert(&key(i), 250, || 0).unwrap();
    }
    assert_eq!(t.expire(400, 1000, |_, _| {}), 16);
    assert!(t.is_empty());
    t.check_invariants();
}

#[test]
fn expire_work_is_bounded_by_budget_and_never_early() {
    // A 1 000 ns timeout is kept in 8 ns ticks (125 of them).
    let mut t = table(10_000, 1_000);
    assert_eq!((t.shift, t.timeout_ticks), (3, 125));
    for i in 0..10_000u32 {
        t.lookup_or_insert(&key(i), u64::from(i), || u64::from(i)).unwrap();
    }
    assert_eq!(t.expire(1_000, usize::MAX, |_, _| panic!("nothing is idle")), 0);
    assert_eq!(t.stats().expire_visits, 10_000);
    // Small budgets at 1 500: each visits exactly its budget of slots and
    // removes only flows seen more than 1 000 ns before.
    let mut removed = Vec::new();
    for k in [0usize, 1, 7, 100] {
        let before = t.stats().expire_visits;
        t.expire(1_500, k, |_, v| removed.push((1_500, v)));
        assert_eq!(t.stats().expire_visits - before, k as u64);
    }
    assert_eq!(removed.len(), 108, "the first 108 slots hold flows seen at 0..108");
    // At 6 000 a whole sweep: every flow seen before 5 000 goes (late by at
    // most two ticks, 16 ns), none seen later.
    t.expire(6_000, usize::MAX, |_, v| removed.push((6_000, v)));
    assert!(removed.iter().all(|&(now, seen)| now - seen > 1_000), "never early");
    assert!(removed.iter().filter(|&&(_, seen)| seen < 5_000 - 16).count() == 5_000 - 16, "late by two ticks at most");
    assert_eq!(t.len(), 10_000 - removed.len());
    t.check_invariants();
}

#[test]
fn expire_budget_sweeps_eight_times_per_timeout() {
    let mut t = table(1 << 20, 30_000_000_000);
    assert_eq!(t.expire_budget(1_000_000), 0, "an empty slab needs no visits");
    for i in 0..100u32 {
        t.lookup_or_insert(&key(i), 0, || 0).unwrap();
    }
    assert_eq!(t.expire_budget(1_000_000), 64, "at least 64 (all 100 would be more than needed)");
    for i in 100..1_000_000u32 {
        t.lookup_or_insert(&key(i), 0, || 0).unwrap();
    }
    // 10^6 slots every 30 s / 8 = 3 750 calls of 1 ms: 267 per call.
    assert_eq!(t.expire_budget(1_000_000), 267);
    // A tiny timeout: the whole slab on every call.
    let mut t = table(100, 2);
    for i in 0..100u32 {
        t.lookup_or_insert(&key(i), 0, || 0).unwrap();
    }
    assert_eq!(t.expire_budget(1_000_000), 100);
}

#[test]
fn coarse_ticks_are_late_by_at_most_two_never_early() {
    let timeout = 30_000_000_000u64;
    let tick = 1u64 << 28;
    for t0 in [0u64, 1, tick - 1, tick, 12_345_678_901_234, u64::MAX / 4] {
        let mut t = table(4, timeout);
        t.lookup_or_insert(&key(1), t0, || 0).unwrap();
        assert_eq!(t.expire(t0 + timeout, 10, |_, _| panic!("early at {t0}")), 0);
        assert_eq!(t.expire(t0 + timeout + 2 * tick, 10, |_, _| {}), 1, "late by more than two ticks at {t0}");
    }
}

#[test]
fn stamps_are_rebased_far_into_the_future() {
    let mut t = table(8, 10);
    t.lookup_or_insert(&key(0), 0, || 0).unwrap();
    // 2^32 ns later no longer fits a u32 stamp from base 0: rebased.
    t.lookup_or_insert(&key(1), 1 << 32, || 1).unwrap();
    assert_eq!(t.base, (1 << 32) - (1 << 30));
    t.lookup_or_insert(&key(2), (1 << 32) - 3, || 2).unwrap();
    let mut got = Vec::new();
    assert_eq!(t.expire((1 << 32) + 5, 10, |k, _| got.push(k)), 1);
    assert_eq!(got, [key(0)], "only the flow from 2^32 ns ago");
    assert_eq!(t.expire((1 << 32) + 7, 10, |_, _| {}), 0, "key(2) seen 10 ns ago is not idle");
    assert_eq!(t.expire((1 << 32) + 8, 10, |k, _| got.push(k)), 1);
    t.check_invariants();
}

#[test]
fn time_going_backwards_never_panics_or_expires_early() {
    let mut t = table(4, 10);
    t.lookup_or_insert(&key(0), 1_000, || 0).unwrap();
    t.lookup_or_insert(&key(1), 5, || 1).unwrap();
    assert_eq!(t.expire(0, 10, |_, _| panic!()), 0);
    assert_eq!(t.expire(u64::MAX, 10, |_, _| {}), 2);
    // Time wrapping past u64::MAX: 7 reads as later than the base, so the
    // flow expires late, never early.
    t.lookup_or_insert(&key(2), u64::MAX, || 2).unwrap();
    t.lookup_or_insert(&key(3), 7, || 3).unwrap();
    assert_eq!(t.expire(8, 10, |_, _| panic!()), 0);
    t.check_invariants();
    // Behind a rebased base: stamp 0 (as if seen at the base, later than it
    // was), not idle while time stays behind the base, idle once it is back.
    let mut t = table(4, 10);
    t.lookup_or_insert(&key(0), 1 << 40, || 0).unwrap();
    assert_eq!(t.base, (1 << 40) - (1 << 30));
    t.lookup_or_insert(&key(1), 7, || 1).unwrap();
    assert_eq!(t.expire(8, 10, |_, _| panic!()), 0);
    let mut got = Vec::new();
    assert_eq!(t.expire(1 << 40, 10, |k, _| got.push(k)), 1);
    assert_eq!(got, [key(1)]);
    t.check_invariants();
}

/// `lookup_or_insert` and an increment of the value: the id and the value
/// before the increment.
type Answer = Result<(FlowId, u64), FlowError>;

fn bump(r: Result<(FlowId, &mut u64), FlowError>) -> Answer {
    r.map(|(id, v)| {
        let before = *v;
        *v += 1;
        (id, before)
    })
}

fn burst(t: &mut FlowTable<u64>, keys: &[FlowKey], now: u64) -> Vec<Answer> {
    let mut got = Vec::with_capacity(keys.len());
    t.lookup_or_insert_burst(
        keys,
        now,
        || 0,
        |i, r| {
            assert_eq!(i, got.len(), "results come in key order");
            got.push(bump(r));
        },
    );
    got
}

#[test]
fn burst_lookups_match_one_at_a_time_on_a_large_table() {
    // 100 000 flows, 125 000 distinct keys, a 1 us timeout and 100 ns per
    // burst: hits, inserts, duplicates within a burst, evictions, bursts
    // longer than BURST_MAX (refusals: the model test).
    let cfg = FlowTableConfig { capacity: 100_000, idle_timeout_ns: 1_000 };
    let mut a = FlowTable::<u64>::with_seed(cfg, SEED).unwrap();
    let mut b = FlowTable::<u64>::with_seed(cfg, SEED).unwrap();
    let keys: Vec<FlowKey> = (0..400_000u64).map(|i| key((flowsteer_prim::mix64(i) % 125_000) as u32)).collect();
    for (c, chunk) in keys.chunks(97).enumerate() {
        let now = c as u64 * 100;
        let got = burst(&mut a, chunk, now);
        let want: Vec<Answer> = chunk.iter().map(|k| bump(b.lookup_or_insert(k, now, || 0))).collect();
        assert_eq!(got, want, "burst {c}");
    }
    let s = a.stats();
    assert_eq!(s, b.stats());
    assert_eq!(a.flows(), b.flows());
    assert!(s.evicted > 0 && s.hits > 0, "{s:?}");
    a.check_invariants();
}

// ---- model-based property tests ----

#[derive(Clone, Debug)]
enum Op {
    Upsert(u32, u64),
    Burst(Vec<u32>, u64),
    Get(u32),
    Remove(u32),
    Touch(u32, u64),
    Expire(u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u32..24;
    let dt = 0u64..30;
    prop_oneof![
        4 => (k.clone(), dt.clone()).prop_map(|(k, d)| Op::Upsert(k, d)),
        2 => (proptest::collection::vec(k.clone(), 0..12), dt.clone()).prop_map(|(ks, d)| Op::Burst(ks, d)),
        2 => k.clone().prop_map(Op::Get),
        2 => k.clone().prop_map(Op::Remove),
        1 => (k, dt.clone()).prop_map(|(k, d)| Op::Touch(k, d)),
        1 => (dt, 0usize..20).prop_map(|(d, b)| Op::Expire(d, b)),
    ]
}

/// The reference: a HashMap of value, last-seen time and id.
#[derive(Default)]
struct Model {
    map: HashMap<FlowKey, (u64, u64, FlowId)>,
}

impl Model {
    fn idle(&self, now: u64, timeout: u64) -> Vec<FlowKey> {
        self.map.iter().filter(|(_, e)| now - e.1 > timeout).map(|(k, _)| *k).collect()
    }

    /// One lookup-or-insert against the model; `got` is the table's answer
    /// (id and the value before this call's increment).
    fn upsert(
        &mut self,
        t: &FlowTable<u64>,
        k: FlowKey,
        now: u64,
        capacity: usize,
        timeout: u64,
        got: Result<(FlowId, u64), FlowError>,
    ) -> Result<(), TestCaseError> {
        if let Some(e) = self.map.get_mut(&k) {
            prop_assert_eq!(got, Ok((e.2, e.0)));
            e.0 += 1;
            e.1 = now;
            return Ok(());
        }
        if self.map.len() >= capacity {
            let idle = self.idle(now, timeout);
            if idle.is_empty() {
                prop_assert_eq!(got, Err(FlowError::Full));
                return Ok(());
            }
            // The scan covers the whole (small) slab: some idle flow went.
            let gone: Vec<FlowKey> = idle.into_iter().filter(|k| t.key_of(self.map[k].2).is_none()).collect();
            prop_assert_eq!(gone.len(), 1, "exactly one idle flow evicted");
            self.map.remove(&gone[0]);
        }
        let (id, v) = got.map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(v, 0);
        self.map.insert(k, (1, now, id));
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    /// `t` takes bursts as bursts, its twin `s` key by key; both take
    /// everything else alike and must answer alike. The model checks `s`.
    #[test]
    fn matches_hashmap_model(capacity in 1usize..16, timeout in 0u64..40, ops in proptest::collection::vec(op(), 1..200)) {
        let mut t = table(capacity, timeout);
        let mut s = table(capacity, timeout);
        let mut m = Model::default();
        let mut ids: HashMap<u32, FlowId> = HashMap::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Upsert(i, dt) => {
                    now += dt;
                    let k = key(i);
                    let got = bump(t.lookup_or_insert(&k, now, || 0));
                    prop_assert_eq!(bump(s.lookup_or_insert(&k, now, || 0)), got);
                    if let Ok((id, _)) = got {
                        ids.insert(i, id);
                    }
                    m.upsert(&s, k, now, capacity, timeout, got)?;
                }
                Op::Burst(is, dt) => {
                    now += dt;
                    let keys: Vec<FlowKey> = is.iter().map(|&i| key(i)).collect();
                    let got = burst(&mut t, &keys, now);
                    prop_assert_eq!(got.len(), keys.len());
                    for (j, k) in keys.iter().enumerate() {
                        let r = bump(s.lookup_or_insert(k, now, || 0));
                        prop_assert_eq!(got[j], r, "key {} of the burst", j);
                        if let Ok((id, _)) = r {
                            ids.insert(is[j], id);
                        }
                        m.upsert(&s, *k, now, capacity, timeout, r)?;
                    }
                }
                Op::Get(i) => {
                    let got = t.get(&key(i)).copied();
                    prop_assert_eq!(s.get(&key(i)).copied(), got);
                    prop_assert_eq!(got, m.map.get(&key(i)).map(|e| e.0));
                }
                Op::Remove(i) => {
                    let k = key(i);
                    let want = m.map.remove(&k).map(|e| e.0);
                    prop_assert_eq!(t.remove(&k), want);
                    prop_assert_eq!(s.remove(&k), want);
                }
                Op::Touch(i, dt) => {
                    now += dt;
                    if let Some(&id) = ids.get(&i) {
                        t.touch(id, now);
                        s.touch(id, now);
                        let k = key(i);
                        if let Some(e) = m.map.get_mut(&k).filter(|e| e.2 == id) {
                            e.1 = now;
                        }
                        let want = m.map.get(&k).filter(|e| e.2 == id).map(|e| e.0);
                        prop_assert_eq!(t.by_id(id).copied(), want);
                        prop_assert_eq!(s.by_id(id).copied(), want);
                    }
                }
                Op::Expire(dt, budget) => {
                    now += dt;
                    let mut got = Vec::new();
                    let visits = t.stats().expire_visits;
                    let slots = t.slab.len();
                    let n = t.expire(now, budget, |k, v| got.push((k, v)));
                    let mut twin = Vec::new();
                    s.expire(now, budget, |k, v| twin.push((k, v)));
                    prop_assert_eq!(&twin, &got);
                    prop_assert_eq!(t.stats().expire_visits - visits, budget.min(slots) as u64);
                    prop_assert_eq!(n, got.len());
                    for (k, v) in got {
                        let e = m.map.remove(&k);
                        prop_assert!(e.is_some_and(|e| e.0 == v && now - e.1 > timeout), "{:?} expired early", k);
                    }
                    if budget >= slots {
                        prop_assert!(m.idle(now, timeout).is_empty(), "a full sweep leaves no idle flow");
                    }
                }
            }
            prop_assert_eq!(t.len(), m.map.len());
            prop_assert_eq!(t.stats(), s.stats());
            let flows = t.flows();
            prop_assert_eq!(&s.flows(), &flows);
            let mut flows = flows;
            flows.sort();
            let mut want: Vec<(FlowKey, u32)> = m.map.iter().map(|(k, e)| (*k, e.1 as u32)).collect();
            want.sort();
            prop_assert_eq!(flows, want);
            t.check_invariants();
        }
    }
}
