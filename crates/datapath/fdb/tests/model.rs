//! Property test: after any sequence of events, statics, removals, flushes
//! and aging passes, the writer's table and the readers' published copy
//! both equal a plain `HashMap` model of the same rules.

use flowsteer_fdb::*;
use proptest::prelude::*;
use std::collections::HashMap;

const AGEING: u64 = 5;
const MAX: usize = 6;
const PER_PORT: usize = 3;
const MAX_STATIC: usize = 2;

#[derive(Clone, Debug)]
enum Step {
    Seen { mac: u8, vlan: u16, port: u16 },
    Tick(u64),
    Static { mac: u8, vlan: u16, port: u16 },
    Remove { mac: u8, vlan: u16 },
    Age,
    Flush(u16),
    RemovePort(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0..10u8, 0..2u16, 0..4u16).prop_map(|(mac, vlan, port)| Step::Seen { mac, vlan, port }),
        3 => (0..4u64).prop_map(Step::Tick),
        1 => (0..10u8, 0..2u16, 0..4u16).prop_map(|(mac, vlan, port)| Step::Static { mac, vlan, port }),
        1 => (0..10u8, 0..2u16).prop_map(|(mac, vlan)| Step::Remove { mac, vlan }),
        1 => Just(Step::Age),
        1 => (0..4u16).prop_map(Step::Flush),
        1 => (0..4u16).prop_map(Step::RemovePort),
    ]
}

fn key(mac: u8, vlan: u16) -> FdbKey {
    FdbKey::new(Mac([0x02, 0, 0, 0, 0, mac]), VlanId(vlan))
}

/// The rules, written the plain way.
#[derive(Default)]
struct Model {
    map: HashMap<FdbKey, Entry>,
    moves: HashMap<FdbKey, u64>,
}

impl Model {
    fn learned(&self) -> usize {
        self.map.values().filter(|e| !e.is_static()).count()
    }
    fn learned_on(&self, port: PortId) -> usize {
        self.map.values().filter(|e| !e.is_static() && e.port == port).count()
    }
    fn seen(&mut self, k: FdbKey, port: PortId, now: u64) {
        match self.map.get(&k).copied() {
            None => {
                if self.learned() < MAX && self.learned_on(port) < PER_PORT {
                    self.map.insert(k, Entry { port, kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: now });
                }
            }
            Some(e) if e.is_static() => {}
            Some(e) if e.port == port => {
                self.map.insert(k, Entry { last_seen_s: e.last_seen_s.max(now), ..e });
            }
            Some(e) => {
                if self.learned_on(port) < PER_PORT {
                    self.map.insert(
                        k,
                        Entry { port, kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: now.max(e.last_seen_s) },
                    );
                    *self.moves.entry(k).or_insert(0) += 1;
                }
            }
        }
    }
    fn retain(&mut self, keep: impl Fn(&Entry) -> bool) {
        let gone: Vec<FdbKey> = self.map.iter().filter(|(_, e)| !keep(e)).map(|(k, _)| *k).collect();
        for k in gone {
            self.map.remove(&k);
            self.moves.remove(&k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn table_equals_the_hashmap_model(steps in proptest::collection::vec(step(), 1..120)) {
        let cfg = FdbConfig { ageing_s: AGEING, max_learned: MAX, max_learned_per_port: PER_PORT, max_static: MAX_STATIC, ..FdbConfig::default() };
        let (mut w, workers) = fdb(cfg, 1).unwrap();
        let reader = workers[0].reader().clone();
        let mut m = Model::default();
        let mut now = 0u64;
        for s in steps {
            match s {
                Step::Seen { mac, vlan, port } => {
                    w.apply(FdbEvent { key: key(mac, vlan), port: PortId(port), at_s: now });
                    w.publish();
                    m.seen(key(mac, vlan), PortId(port), now);
                }
                Step::Tick(dt) => now += dt,
                Step::Static { mac, vlan, port } => {
                    let k = key(mac, vlan);
                    let statics = m.map.values().filter(|e| e.is_static()).count();
                    let ok = w.add_static(k.mac, k.vlan, PortId(port), now).is_ok();
                    let is_static = m.map.get(&k).is_some_and(|e| e.is_static());
                    prop_assert_eq!(ok, is_static || statics < MAX_STATIC);
                    if ok {
                        m.map.insert(k, Entry { port: PortId(port), kind: flowsteer_fdb::EntryKind::Static, last_seen_s: now });
                        m.moves.remove(&k);
                    }
                }
                Step::Remove { mac, vlan } => {
                    let k = key(mac, vlan);
                    prop_assert_eq!(w.remove(k.mac, k.vlan), m.map.contains_key(&k));
                    m.map.remove(&k);
                    m.moves.remove(&k);
                }
                Step::Age => {
                    w.age(now);
                    m.retain(|e| e.is_static() || now - e.last_seen_s <= AGEING);
                }
                Step::Flush(port) => {
                    w.flush_port(PortId(port));
                    m.retain(|e| e.is_static() || e.port != PortId(port));
                }
                Step::RemovePort(port) => {
                    w.remove_port(PortId(port));
                    m.retain(|e| e.port != PortId(port));
                }
            }
            let writer: HashMap<FdbKey, Entry> = w.entries().map(|(k, e)| (*k, *e)).collect();
            prop_assert_eq!(&writer, &m.map);
            let published: HashMap<FdbKey, Entry> = reader.enter().unwrap().iter().map(|(k, e)| (*k, *e)).collect();
            prop_assert_eq!(&published, &m.map);
            prop_assert_eq!(w.learned_len(), m.learned());
            for port in 0..4 {
                prop_assert_eq!(w.learned_on(PortId(port)), m.learned_on(PortId(port)));
            }
            let moves: HashMap<FdbKey, u64> = w.moves().map(|(k, r)| (*k, r.count)).collect();
            prop_assert_eq!(&moves, &m.moves);
        }
    }
}
