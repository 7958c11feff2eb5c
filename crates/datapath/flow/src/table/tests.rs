use super::*;
use proptest::prelude::*;
use std::collections::HashMap;
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
    assert_eq!(t.buckets.len(), 131_072, "load factor <= 1/2");
    assert!(t.is_empty());
    assert_eq!(t.next_expiry(), None);
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
    assert_eq!(t.lru_order(), vec![(key(2), 7)]);
    assert_eq!(FlowId::from_u64(id3.to_u64()), id3);
    let s = t.stats();
    assert_eq!((s.inserts, s.removed, s.lookups, s.hits), (2, 1, 5, 2));
    t.check_invariants();
}

/// Keys whose home bucket is `home` in a table of `t`'s size (found by search).
fn keys_with_home(t: &FlowTable<u64>, home: usize, n: usize, skip: &mut u32) -> Vec<FlowKey> {
    let mut out = Vec::new();
    while out.len() < n {
        *skip += 1;
        let k = key(*skip);
        if t.hash(&Packed::new(&k)) as usize & t.mask == home {
            out.push(k);
        }
    }
    out
}

#[test]
fn backward_shift_keeps_runs_reachable() {
    // capacity 8 -> 16 buckets. Build a run that wraps around the end:
    // three keys homed at 14, two at 15, two at 0; remove from the middle.
    let mut t = table(8, 100);
    let mut skip = 0;
    let a = keys_with_home(&t, 14, 3, &mut skip);
    let b = keys_with_home(&t, 15, 2, &mut skip);
    let c = keys_with_home(&t, 0, 2, &mut skip);
    let all: Vec<FlowKey> = a.iter().chain(&b).chain(&c).copied().collect();
    for (i, k) in all.iter().enumerate() {
        t.lookup_or_insert(k, 0, || i as u64).unwrap();
    }
    assert_eq!(t.stats().max_probe, 5, "the last key (home 0) probes 0,1,2,3,4");
    t.check_invariants();
    for victim in [1usize, 3, 5, 0] {
        assert_eq!(t.remove(&all[victim]), Some(victim as u64));
        t.check_invariants();
        for (i, k) in all.iter().enumerate() {
            let removed = [1usize, 3, 5, 0].iter().take_while(|&&v| v != victim).any(|&v| v == i) || i == victim;
            assert_eq!(t.get(k).copied(), if removed { None } else { Some(i as u64) }, "key {i}");
        }
    }
    // What is left sits in a contiguous run starting at the lowest home.
    assert_eq!(t.len(), 3);
}

#[test]
fn full_table_refuses_then_evicts_idle_lru() {
    let mut t = table(3, 100);
    for i in 0..3 {
        t.lookup_or_insert(&key(i), 10 * u64::from(i), || u64::from(i)).unwrap();
    }
    // Nothing idle at 50: refuse, count, do not call init.
    assert_eq!(t.lookup_or_insert(&key(9), 50, || panic!("init on refusal")).unwrap_err(), FlowError::Full);
    assert_eq!(t.stats().insert_failed_full, 1);
    // Existing flows still work while full.
    let (id0, _) = t.lookup_or_insert(&key(0), 60, || 99).unwrap();
    // At 111 key(1) (seen at 10) is idle (> 100 ns) and the LRU: evicted.
    assert_eq!(t.lookup_or_insert(&key(9), 111, || 9).map(|(_, v)| *v), Ok(9));
    assert_eq!(t.get(&key(1)), None);
    assert_eq!(t.stats().evicted, 1);
    assert_eq!(t.len(), 3);
    // key(2) was seen at 20: at exactly 120 it is not idle yet (strictly older).
    assert_eq!(t.lookup_or_insert(&key(10), 120, || 10).unwrap_err(), FlowError::Full);
    t.touch(id0, 121);
    assert_eq!(t.lookup_or_insert(&key(10), 121, || 10).map(|(_, v)| *v), Ok(10));
    assert_eq!(t.get(&key(2)), None, "key(2) was the LRU");
    assert_eq!(t.get(&key(0)).copied(), Some(0));
    let s = t.stats();
    assert_eq!((s.evicted, s.insert_failed_full, s.inserts), (2, 2, 5));
    t.check_invariants();
}

#[test]
fn expire_pops_oldest_first_within_budget_and_spares_fresh_flows() {
    let mut t = table(64, 100);
    for i in 0..20u32 {
        t.lookup_or_insert(&key(i), u64::from(i) * 10, || u64::from(i)).unwrap();
    }
    // Re-seeing key(0) at 150 makes it the freshest.
    t.lookup_or_insert(&key(0), 150, || unreachable!()).unwrap();
    assert_eq!(t.next_expiry(), Some(10 + 100 + 1));
    // At 200, flows seen before 100 (keys 1..=9) are idle.
    let mut got = Vec::new();
    assert_eq!(t.expire(200, 4, |k, v| got.push((k, v))), 4);
    assert_eq!(got, (1..=4).map(|i| (key(i), u64::from(i))).collect::<Vec<_>>());
    got.clear();
    assert_eq!(t.expire(200, 100, |k, v| got.push((k, v))), 5);
    assert_eq!(got, (5..=9).map(|i| (key(i), u64::from(i))).collect::<Vec<_>>());
    // key(10), seen at exactly 100, is not idle at 200.
    assert_eq!(t.expire(200, 100, |_, _| panic!("fresh flow expired")), 0);
    assert_eq!(t.len(), 11);
    assert_eq!(t.stats().expired, 9);
    assert_eq!(t.next_expiry(), Some(201));
    t.check_invariants();
}

#[test]
fn expire_work_is_bounded_by_budget() {
    let mut t = table(10_000, 1_000);
    for i in 0..10_000u32 {
        t.lookup_or_insert(&key(i), u64::from(i), || 0).unwrap();
    }
    // Nothing idle: one look at the tail, whatever the budget.
    let before = t.stats().expire_visits;
    assert_eq!(t.expire(1_000, 1_000_000, |_, _| {}), 0);
    assert_eq!(t.stats().expire_visits - before, 1);
    // At 1 500 the 500 flows seen before 500 are idle: budget k removes k
    // and looks at k entries.
    for k in [0usize, 1, 7, 100] {
        let before = t.stats().expire_visits;
        assert_eq!(t.expire(1_500, k, |_, _| {}), k);
        assert!(t.stats().expire_visits - before <= k as u64 + 1);
    }
    // Half idle: stops at the first fresh one.
    let len = t.len();
    let before = t.stats().expire_visits;
    let n = t.expire(6_000, usize::MAX, |_, _| {});
    assert_eq!(t.stats().expire_visits - before, n as u64 + 1);
    assert_eq!(t.len(), len - n);
    assert_eq!(n, 5_000 - 108);
    assert!(t.lru_order().iter().all(|&(_, seen)| seen >= 5_000));
    t.check_invariants();
}

#[test]
fn time_going_backwards_never_panics_or_expires_early() {
    let mut t = table(4, 10);
    t.lookup_or_insert(&key(0), 1_000, || 0).unwrap();
    t.lookup_or_insert(&key(1), 5, || 1).unwrap();
    assert_eq!(t.expire(0, 10, |_, _| panic!()), 0);
    assert_eq!(t.expire(u64::MAX, 10, |_, _| {}), 2);
    t.lookup_or_insert(&key(2), u64::MAX, || 2).unwrap();
    assert_eq!(t.next_expiry(), Some(u64::MAX));
    t.check_invariants();
}

// ---- model-based property test ----

#[derive(Clone, Debug)]
enum Op {
    Upsert(u32, u64),
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
        2 => k.clone().prop_map(Op::Get),
        2 => k.clone().prop_map(Op::Remove),
        1 => (k, dt.clone()).prop_map(|(k, d)| Op::Touch(k, d)),
        1 => (dt, 0usize..5).prop_map(|(d, b)| Op::Expire(d, b)),
    ]
}

/// The reference: a HashMap plus an explicit LRU order (front = oldest).
#[derive(Default)]
struct Model {
    map: HashMap<FlowKey, (u64, u64, FlowId)>, // value, last_seen, id
    order: Vec<FlowKey>,
}

impl Model {
    fn bump(&mut self, k: &FlowKey, now: u64) {
        self.order.retain(|x| x != k);
        self.order.push(*k);
        if let Some(e) = self.map.get_mut(k) {
            e.1 = now;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn matches_hashmap_model(capacity in 1usize..16, timeout in 0u64..40, ops in proptest::collection::vec(op(), 1..200)) {
        let mut t = table(capacity, timeout);
        let mut m = Model::default();
        let mut ids: HashMap<u32, FlowId> = HashMap::new();
        let mut now = 0u64;
        let mut next_val = 0u64;
        for op in ops {
            match op {
                Op::Upsert(i, dt) => {
                    now += dt;
                    let k = key(i);
                    next_val += 1;
                    let got = t.lookup_or_insert(&k, now, || next_val).map(|(id, v)| (id, *v));
                    if let Some(&(v, _, id)) = m.map.get(&k) {
                        prop_assert_eq!(got, Ok((id, v)));
                        m.bump(&k, now);
                    } else {
                        if m.map.len() >= capacity {
                            let lru = m.order[0];
                            if now - m.map[&lru].1 > timeout {
                                m.map.remove(&lru);
                                m.order.remove(0);
                            } else {
                                prop_assert_eq!(got, Err(FlowError::Full));
                                continue;
                            }
                        }
                        let (id, v) = got.unwrap();
                        prop_assert_eq!(v, next_val);
                        m.map.insert(k, (v, now, id));
                        m.order.push(k);
                        ids.insert(i, id);
                    }
                }
                Op::Get(i) => {
                    prop_assert_eq!(t.get(&key(i)).copied(), m.map.get(&key(i)).map(|e| e.0));
                }
                Op::Remove(i) => {
                    let k = key(i);
                    let want = m.map.remove(&k).map(|e| e.0);
                    m.order.retain(|x| *x != k);
                    prop_assert_eq!(t.remove(&k), want);
                }
                Op::Touch(i, dt) => {
                    now += dt;
                    if let Some(&id) = ids.get(&i) {
                        t.touch(id, now);
                        let k = key(i);
                        if m.map.get(&k).is_some_and(|e| e.2 == id) {
                            m.bump(&k, now);
                        }
                        prop_assert_eq!(t.by_id(id).copied(), m.map.get(&k).filter(|e| e.2 == id).map(|e| e.0));
                    }
                }
                Op::Expire(dt, budget) => {
                    now += dt;
                    let mut got = Vec::new();
                    let visits = t.stats().expire_visits;
                    let n = t.expire(now, budget, |k, v| got.push((k, v)));
                    prop_assert!(t.stats().expire_visits - visits <= budget as u64 + 1);
                    let mut want = Vec::new();
                    while want.len() < budget && !m.order.is_empty() && now - m.map[&m.order[0]].1 > timeout {
                        let k = m.order.remove(0);
                        want.push((k, m.map.remove(&k).unwrap().0));
                    }
                    prop_assert_eq!(n, want.len());
                    prop_assert_eq!(got, want);
                }
            }
            prop_assert_eq!(t.len(), m.map.len());
            let order: Vec<(FlowKey, u64)> = m.order.iter().map(|k| (*k, m.map[k].1)).collect();
            prop_assert_eq!(t.lru_order(), order);
            t.check_invariants();
        }
    }
}
