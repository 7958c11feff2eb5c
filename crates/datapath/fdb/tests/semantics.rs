//! The table's semantics, one behaviour per test, driven through a worker
//! and the writer on one thread with a fake clock.

use flowsteer_fdb::*;

const V0: VlanId = VlanId(0);

fn mac(n: u32) -> Mac {
    let b = n.to_be_bytes();
    Mac([0x02, 0, b[0], b[1], b[2], b[3]])
}

fn p(n: u16) -> PortId {
    PortId(n)
}

fn one_worker(cfg: FdbConfig) -> (FdbWriter, FdbWorker) {
    let (w, mut ws) = fdb(cfg, 1).unwrap();
    (w, ws.pop().unwrap())
}

/// A frame from `src` on `ingress` to `dst`, at `now_s`, then the writer drains.
fn frame(w: &mut FdbWriter, k: &mut FdbWorker, now_s: u64, ingress: u16, src: Mac, dst: Mac) -> Decision {
    let d = k.burst(now_s).unwrap().forward(p(ingress), src, dst, V0);
    w.drain();
    d
}

#[test]
fn learns_the_source_and_then_forwards_to_it() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    assert_eq!(frame(&mut w, &mut k, 1, 0, mac(1), mac(2)), Decision::Flood, "unknown destination floods");
    assert_eq!(
        w.entry(mac(1), V0),
        Some(Entry { port: p(0), kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: 1 })
    );
    assert_eq!(frame(&mut w, &mut k, 1, 1, mac(2), mac(1)), Decision::Unicast(p(0)));
    assert_eq!(frame(&mut w, &mut k, 1, 0, mac(1), mac(2)), Decision::Unicast(p(1)));
    assert_eq!(w.stats().learned, 2);
    let s = k.stats();
    assert_eq!((s.frames, s.unicast, s.flooded), (3, 2, 1));
    assert!(s.conservation_ok());
    // The same MAC in another VLAN is another entry.
    assert_eq!(k.burst(1).unwrap().forward(p(1), mac(9), mac(1), VlanId(5)), Decision::Flood);
}

#[test]
fn a_destination_on_the_ingress_port_is_dropped_as_same_port() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 3, mac(1), Mac::BROADCAST);
    assert_eq!(frame(&mut w, &mut k, 1, 3, mac(2), mac(1)), Decision::Drop(DropReason::SamePort));
    assert_eq!(k.stats().same_port, 1);
    assert!(k.stats().conservation_ok());
}

#[test]
fn a_source_seen_on_another_port_is_a_move_recorded_per_mac() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 0, mac(1), Mac::BROADCAST);
    frame(&mut w, &mut k, 2, 1, mac(1), Mac::BROADCAST);
    assert_eq!(w.entry(mac(1), V0).unwrap().port, p(1));
    assert_eq!(w.move_record(FdbKey::new(mac(1), V0)), Some(MoveRecord { count: 1, from: p(0), to: p(1), at_s: 2 }));
    // Back in the same second: the filter lets a move for another port through.
    frame(&mut w, &mut k, 2, 2, mac(1), Mac::BROADCAST);
    let rec = w.move_record(FdbKey::new(mac(1), V0)).unwrap();
    assert_eq!((rec.count, rec.from, rec.to), (2, p(1), p(2)));
    assert_eq!(w.stats().moved, 2);
    assert_eq!(w.move_record(FdbKey::new(mac(2), V0)), None);
    assert_eq!(frame(&mut w, &mut k, 2, 0, mac(2), mac(1)), Decision::Unicast(p(2)));
    assert_eq!((w.learned_on(p(0)), w.learned_on(p(1)), w.learned_on(p(2))), (1, 0, 1));
}

#[test]
fn static_entries_are_never_aged_nor_moved_by_learning() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    w.add_static(mac(1), V0, p(4), 0).unwrap();
    frame(&mut w, &mut k, 5, 0, mac(1), Mac::BROADCAST);
    w.apply(FdbEvent { key: FdbKey::new(mac(1), V0), port: p(0), at_s: 5 });
    w.publish();
    assert_eq!(w.stats().static_kept, 1);
    assert_eq!(w.age(10_000), 0);
    assert_eq!(w.entry(mac(1), V0), Some(Entry { port: p(4), kind: flowsteer_fdb::EntryKind::Static, last_seen_s: 0 }));
    assert_eq!(frame(&mut w, &mut k, 10_000, 0, mac(2), mac(1)), Decision::Unicast(p(4)));
    assert_eq!(w.learned_len(), 1, "only mac(2) is learned");
    assert_eq!(w.flush_port(p(4)), 0, "a flush keeps static entries");
    assert_eq!(w.remove_port(p(4)), 1, "removing the port removes them");
}

#[test]
fn a_learned_entry_made_static_leaves_the_learned_count() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 0, mac(1), Mac::BROADCAST);
    w.add_static(mac(1), V0, p(2), 1).unwrap();
    assert_eq!((w.learned_len(), w.learned_on(p(0)), w.len()), (0, 0, 1));
    assert!(w.remove(mac(1), V0));
    assert!(w.is_empty());
}

#[test]
fn aging_removes_entries_idle_longer_than_the_ageing_time() {
    let cfg = FdbConfig::default();
    assert_eq!(cfg.ageing_s, 300);
    let (mut w, mut k) = one_worker(cfg);
    frame(&mut w, &mut k, 100, 0, mac(1), Mac::BROADCAST);
    frame(&mut w, &mut k, 200, 0, mac(2), Mac::BROADCAST);
    frame(&mut w, &mut k, 350, 0, mac(2), Mac::BROADCAST); // refresh
    assert_eq!(w.entry(mac(2), V0).unwrap().last_seen_s, 350);
    assert_eq!(w.age(400), 0, "idle exactly 300 s stays");
    assert_eq!(w.age(401), 1);
    assert_eq!(w.entry(mac(1), V0), None);
    assert_eq!(frame(&mut w, &mut k, 401, 1, mac(3), mac(1)), Decision::Flood, "an aged destination floods");
    assert_eq!(w.age(651), 1);
    assert_eq!(w.stats().aged, 2);
    assert_eq!(w.entries().count(), 1, "only mac(3)");
}

#[test]
fn a_full_bridge_learns_nothing_new_and_known_entries_keep_forwarding() {
    let cfg = FdbConfig { max_learned: 3, ..FdbConfig::default() };
    assert_eq!(FdbConfig::default().max_learned, 65_536);
    let (mut w, mut k) = one_worker(cfg);
    for i in 0..5 {
        frame(&mut w, &mut k, 1, 0, mac(i), Mac::BROADCAST);
    }
    assert_eq!(w.learned_len(), 3);
    assert_eq!(w.stats().not_learned_full, 2);
    assert_eq!(frame(&mut w, &mut k, 1, 1, mac(100), mac(0)), Decision::Unicast(p(0)), "known: forwarded");
    assert_eq!(frame(&mut w, &mut k, 1, 1, mac(101), mac(4)), Decision::Flood, "unknown: flooded");
    assert_eq!(w.stats().not_learned_full, 4);
    // Room again after aging.
    w.age(1_000);
    frame(&mut w, &mut k, 1_000, 0, mac(4), Mac::BROADCAST);
    assert!(w.entry(mac(4), V0).is_some());
}

#[test]
fn a_full_port_learns_nothing_new_on_it_but_others_still_learn() {
    let cfg = FdbConfig { max_learned_per_port: 2, ..FdbConfig::default() };
    let (mut w, mut k) = one_worker(cfg);
    for i in 0..3 {
        frame(&mut w, &mut k, 1, 0, mac(i), Mac::BROADCAST);
    }
    assert_eq!((w.learned_on(p(0)), w.stats().not_learned_full), (2, 1));
    frame(&mut w, &mut k, 1, 1, mac(10), Mac::BROADCAST);
    frame(&mut w, &mut k, 1, 1, mac(11), Mac::BROADCAST);
    assert_eq!(w.learned_on(p(1)), 2);
    // A move onto a full port is not followed either.
    frame(&mut w, &mut k, 2, 1, mac(0), Mac::BROADCAST);
    assert_eq!(w.entry(mac(0), V0).unwrap().port, p(0));
    assert_eq!(w.stats().not_learned_full, 2);
    assert_eq!(w.stats().moved, 0);
}

#[test]
fn flush_by_port_removes_only_that_ports_learned_entries() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    for i in 0..10 {
        frame(&mut w, &mut k, 1, (i % 2) as u16, mac(i), Mac::BROADCAST);
    }
    assert_eq!(w.flush_port(p(1)), 5);
    assert_eq!((w.learned_on(p(0)), w.learned_on(p(1)), w.len()), (5, 0, 5));
    assert_eq!(frame(&mut w, &mut k, 1, 0, mac(50), mac(1)), Decision::Flood, "flushed destination floods");
    assert_eq!(frame(&mut w, &mut k, 1, 1, mac(51), mac(0)), Decision::Unicast(p(0)));
    assert_eq!(w.stats().flushed, 5);
}

#[test]
fn reserved_group_addresses_are_dropped_and_never_entries() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    let stp = Mac([0x01, 0x80, 0xc2, 0, 0, 0]);
    let lldp = Mac([0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    assert!(is_reserved(stp) && is_reserved(lldp));
    assert_eq!(w.add_static(stp, V0, p(1), 0), Err(FdbError::Reserved));
    assert_eq!(frame(&mut w, &mut k, 1, 0, mac(1), lldp), Decision::Drop(DropReason::Reserved));
    assert_eq!(k.stats().dropped_reserved, 1);
    assert!(k.stats().conservation_ok());
    assert_eq!(w.add_static(Mac([0x01, 0, 0x5e, 0, 0, 1]), V0, p(1), 0), Err(FdbError::NotUnicast));
}

#[test]
fn group_and_zero_sources_are_never_learned() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    for src in [Mac::BROADCAST, Mac([0x01, 0, 0x5e, 0, 0, 1]), Mac([0x33, 0x33, 0, 0, 0, 1]), Mac([0; 6])] {
        frame(&mut w, &mut k, 1, 0, src, mac(1));
    }
    assert!(w.is_empty());
    assert_eq!(k.stats().source_not_learnable, 4);
    assert_eq!(k.stats().events_posted, 0);
    // An event the writer receives anyway is refused and counted.
    w.apply(FdbEvent { key: FdbKey::new(Mac::BROADCAST, V0), port: p(0), at_s: 1 });
    assert_eq!((w.len(), w.stats().invalid_source), (0, 1));
}

#[test]
fn refresh_events_are_at_most_one_per_entry_per_second_per_worker() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 0, mac(1), Mac::BROADCAST);
    assert_eq!(k.stats().events_posted, 1);
    // Same second, already seen: nothing to post.
    for _ in 0..100 {
        k.burst(1).unwrap().forward(p(0), mac(1), Mac::BROADCAST, V0);
    }
    assert_eq!(k.stats().events_posted, 1);
    // Next second, the writer not draining: one event, however many frames.
    {
        let mut b = k.burst(2).unwrap();
        for _ in 0..100 {
            b.forward(p(0), mac(1), Mac::BROADCAST, V0);
        }
    }
    for _ in 0..100 {
        k.burst(2).unwrap().forward(p(0), mac(1), Mac::BROADCAST, V0);
    }
    assert_eq!(k.stats().events_posted, 2);
    w.drain();
    assert_eq!((w.stats().refreshed, w.entry(mac(1), V0).unwrap().last_seen_s), (1, 2));
    assert_eq!(w.stats().events_applied, 2);
}

#[test]
fn a_full_queue_drops_events_and_counts_them() {
    let cfg = FdbConfig { event_queue: 4, ..FdbConfig::default() };
    let (mut w, mut k) = one_worker(cfg);
    {
        let mut b = k.burst(1).unwrap();
        for i in 0..10 {
            b.forward(p(0), mac(i), Mac::BROADCAST, V0);
        }
    }
    let s = k.stats();
    assert_eq!((s.events_posted, s.events_dropped), (4, 6));
    assert_eq!(w.drain(), 4);
    assert_eq!(w.len(), 4);
    // Dropped keys are retried in a later second.
    {
        let mut b = k.burst(2).unwrap();
        for i in 4..8 {
            b.forward(p(0), mac(i), Mac::BROADCAST, V0);
        }
    }
    w.drain();
    assert_eq!(w.len(), 8);
}

#[test]
fn a_full_per_second_filter_suppresses_events_and_counts_them() {
    let cfg = FdbConfig { posted_per_second: 2, ..FdbConfig::default() };
    let (mut w, mut k) = one_worker(cfg);
    {
        let mut b = k.burst(1).unwrap();
        for i in 0..5 {
            b.forward(p(0), mac(i), Mac::BROADCAST, V0);
        }
    }
    assert_eq!((k.stats().events_posted, k.stats().events_suppressed), (2, 3));
    w.drain();
    assert_eq!(w.len(), 2);
}

#[test]
fn changes_are_visible_to_readers_only_after_a_publish() {
    let (mut w, k) = one_worker(FdbConfig::default());
    let r = k.reader().clone();
    w.apply(FdbEvent { key: FdbKey::new(mac(1), V0), port: p(0), at_s: 1 });
    assert_eq!(r.enter().unwrap().lookup(mac(1), V0), None);
    w.publish();
    assert_eq!(r.enter().unwrap().lookup(mac(1), V0).map(|e| e.port), Some(p(0)));
    let extra = w.reader();
    assert_eq!(extra.enter().unwrap().len(), 1);
    drop(w);
    assert!(r.enter().is_none(), "no version once the writer is gone");
}

#[test]
fn capacities_are_checked() {
    for cfg in [
        FdbConfig { max_learned: 0, ..FdbConfig::default() },
        FdbConfig { event_queue: MAX_CAPACITY + 1, ..FdbConfig::default() },
        FdbConfig { posted_per_second: 0, ..FdbConfig::default() },
    ] {
        assert!(matches!(fdb(cfg, 1), Err(FdbError::BadCapacity(_))));
    }
    assert_eq!(fdb(FdbConfig::default(), 0).err(), Some(FdbError::BadCapacity("workers")));
    let (mut w, _) = fdb(FdbConfig { max_static: 1, ..FdbConfig::default() }, 1).unwrap();
    w.add_static(mac(1), V0, p(0), 0).unwrap();
    w.add_static(mac(1), V0, p(1), 0).unwrap(); // replacing is not adding
    assert_eq!(w.add_static(mac(2), V0, p(0), 0), Err(FdbError::StaticFull));
}

/// The change log a kernel copy of the table follows: new entries, moves,
/// static entries and removals, in order; refreshes are not changes.
#[test]
fn the_change_log_has_every_change_but_refreshes() {
    let (mut w, mut k) = one_worker(FdbConfig { ageing_s: 10, ..FdbConfig::default() });
    assert_eq!(w.take_changes(), Changes::List(vec![]), "not recording: nothing");
    w.record_changes(true);
    frame(&mut w, &mut k, 1, 0, mac(1), Mac::BROADCAST);
    frame(&mut w, &mut k, 2, 0, mac(1), Mac::BROADCAST); // a refresh
    frame(&mut w, &mut k, 3, 1, mac(1), Mac::BROADCAST); // a move
    w.add_static(mac(7), V0, p(2), 3).unwrap();
    w.remove(mac(7), V0);
    let key = FdbKey::new(mac(1), V0);
    let learned =
        |port, at| Op::Set(key, Entry { port: p(port), kind: flowsteer_fdb::EntryKind::Learned, last_seen_s: at });
    let stat =
        Op::Set(FdbKey::new(mac(7), V0), Entry { port: p(2), kind: flowsteer_fdb::EntryKind::Static, last_seen_s: 3 });
    assert_eq!(
        w.take_changes(),
        Changes::List(vec![learned(0, 1), learned(1, 3), stat, Op::Remove(FdbKey::new(mac(7), V0))])
    );
    assert_eq!(w.take_changes(), Changes::List(vec![]), "taken once");
    w.age(20);
    assert_eq!(w.take_changes(), Changes::List(vec![Op::Remove(key)]));
    w.record_changes(false);
    frame(&mut w, &mut k, 21, 0, mac(2), Mac::BROADCAST);
    assert_eq!(w.take_changes(), Changes::List(vec![]));
}

/// Aging asks about stations seen elsewhere (a kernel fast path): one seen
/// within the ageing time is refreshed, not removed; one not seen, or seen
/// too long ago, ages out as before.
#[test]
fn aging_keeps_an_entry_seen_by_the_fast_path() {
    let (mut w, mut k) = one_worker(FdbConfig { ageing_s: 10, ..FdbConfig::default() });
    for m in 1..=3 {
        frame(&mut w, &mut k, 1, 0, mac(m), Mac::BROADCAST);
    }
    let n = w.age_with(20, |key| match key.mac {
        m if m == mac(1) => Some(19),
        m if m == mac(2) => Some(5),
        _ => None,
    });
    assert_eq!(n, 2);
    assert_eq!(w.entry(mac(1), V0).map(|e| e.last_seen_s), Some(19));
    assert_eq!((w.entry(mac(2), V0), w.entry(mac(3), V0)), (None, None));
    assert_eq!(w.stats().aged, 2);
    // The readers see the refreshed entry.
    assert_eq!(k.burst(20).unwrap().forward(p(1), mac(9), mac(1), V0), Decision::Unicast(p(0)));
}

#[test]
fn sticky_and_external_entries_age_but_never_move() {
    let cfg = FdbConfig { ageing_s: 10, ..FdbConfig::default() };
    let (mut w, mut k) = one_worker(cfg);
    w.add(mac(1), V0, p(1), EntryKind::Sticky, 0).unwrap();
    w.add(mac(2), V0, p(1), EntryKind::External, 0).unwrap();
    assert_eq!(w.add(mac(3), V0, p(1), EntryKind::Learned, 0), Err(FdbError::NotConfigured));
    // Seen on another port: neither moves (the worker does not even post
    // the event: the entry says it would change nothing).
    frame(&mut w, &mut k, 1, 0, mac(1), mac(9));
    frame(&mut w, &mut k, 1, 0, mac(2), mac(9));
    assert_eq!(w.entry(mac(1), V0).map(|e| (e.port, e.kind)), Some((p(1), EntryKind::Sticky)));
    assert_eq!(w.entry(mac(2), V0).map(|e| (e.port, e.kind)), Some((p(1), EntryKind::External)));
    assert_eq!(w.stats().events_applied, 0);
    assert_eq!(w.learned_len(), 0, "configured entries are not learned ones");
    // Seen on their own port: refreshed, so they outlive an idle one.
    frame(&mut w, &mut k, 8, 1, mac(1), mac(9));
    assert_eq!(w.entry(mac(1), V0).map(|e| e.last_seen_s), Some(8));
    assert_eq!(w.age(15), 1, "the idle external entry ages");
    assert!(w.entry(mac(2), V0).is_none());
    assert_eq!(w.age(19), 1, "the sticky one ages once idle");
    assert!(w.is_empty());
}

#[test]
fn link_down_flushes_learned_and_sticky_entries_only() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 1, mac(1), mac(9));
    w.add(mac(2), V0, p(1), EntryKind::Sticky, 1).unwrap();
    w.add(mac(3), V0, p(1), EntryKind::External, 1).unwrap();
    w.add_static(mac(4), V0, p(1), 1).unwrap();
    assert_eq!(w.flush_port(p(1)), 2);
    assert!(w.entry(mac(3), V0).is_some() && w.entry(mac(4), V0).is_some());
}

#[test]
fn flush_filters_combine() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    let v10 = VlanId(10);
    for (m, port, vlan) in [(1, 0, V0), (2, 1, V0), (3, 1, v10), (4, 0, v10)] {
        k.burst(1).unwrap().forward(p(port), mac(m), mac(99), vlan);
    }
    w.drain();
    w.add_static(mac(5), v10, p(1), 1).unwrap();
    w.add_static(mac(6), V0, p(1), 1).unwrap();
    let f =
        |port: Option<u16>, vlan: Option<VlanId>, dynamic, statics| Flush { port: port.map(p), vlan, dynamic, statics };
    assert_eq!(w.flush(&f(Some(1), Some(v10), false, true)), 1, "the static entry of port 1 in VLAN 10");
    assert!(w.entry(mac(5), v10).is_none() && w.entry(mac(6), V0).is_some());
    assert_eq!(w.flush(&f(None, Some(v10), true, false)), 2, "dynamic entries of VLAN 10, any port");
    assert_eq!(w.flush(&f(Some(1), None, true, true)), 2, "everything of port 1");
    assert_eq!(w.flush(&Flush::default()), 1, "the rest of the dynamic entries");
    assert!(w.is_empty());
}

#[test]
fn a_port_limit_of_zero_is_no_limit_of_its_own() {
    let cfg = FdbConfig { max_learned: 8, max_learned_per_port: 2, ..FdbConfig::default() };
    let (mut w, mut k) = one_worker(cfg);
    w.set_port_limit(p(1), Some(0));
    w.set_port_limit(p(2), Some(1));
    for m in 0..5 {
        k.burst(1).unwrap().forward(p(0), mac(m), mac(99), V0);
        k.burst(1).unwrap().forward(p(1), mac(100 + m), mac(99), V0);
        k.burst(1).unwrap().forward(p(2), mac(200 + m), mac(99), V0);
    }
    w.drain();
    assert_eq!((w.learned_on(p(0)), w.learned_on(p(1)), w.learned_on(p(2))), (2, 5, 1));
    assert_eq!(w.stats().not_learned_full, 3 + 4);
    w.set_port_limit(p(2), None);
    assert_eq!(w.port_limit(p(2)), 2);
}

/// A source the worker posted this second, then flushed from the table
/// (its port left a learning state, lost its carrier, `fdb flush`), is
/// posted again when it is seen again in the same second: the per-second
/// filter holds back repeats of what is in flight or learned, not what the
/// table no longer has. (A host that sends once right after a flush was
/// otherwise never learned until it sent again in a later second.)
#[test]
fn a_source_flushed_this_second_is_learned_again_this_second() {
    let (mut w, mut k) = one_worker(FdbConfig::default());
    frame(&mut w, &mut k, 1, 3, mac(1), Mac::BROADCAST);
    assert_eq!(w.entry(mac(1), V0).map(|e| e.port), Some(p(3)));
    assert_eq!(w.flush_port(p(3)), 1);
    assert_eq!(w.entry(mac(1), V0), None);
    frame(&mut w, &mut k, 1, 3, mac(1), Mac::BROADCAST);
    assert_eq!(w.entry(mac(1), V0).map(|e| e.port), Some(p(3)), "not learned again after the flush");
    assert_eq!(k.stats().events_posted, 2);
    // Without a removal in between, the filter still holds repeats back.
    frame(&mut w, &mut k, 1, 3, mac(1), Mac::BROADCAST);
    assert_eq!(k.stats().events_posted, 2);
}
