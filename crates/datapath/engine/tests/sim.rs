//! Deterministic simulation tests of the steering engine (seeded schedule,
//! fake clock): RSS flow affinity, RFS and rebalancing moves without
//! reordering (and the naive switch that does reorder), RPS, queue overflow,
//! conservation.

use flowsteer_engine::engine::{Engine, EngineConfig};
use flowsteer_engine::sim::Sim;
use flowsteer_engine::source::{GenSource, RxSource};
use flowsteer_engine::Snapshot;
use flowsteer_flow::FlowKey;
use flowsteer_gen::{GenConfig, Spread};
use flowsteer_rss::RssConfig;
use flowsteer_steer::cpuset::CpuSet;
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::rebalance::RebalanceConfig;
use flowsteer_steer::steer::Policy;
use flowsteer_wire::FlowTuple;

struct Setup {
    workers: usize,
    rx_queues: u16,
    policy: Policy,
    dispatch: Dispatch,
    drain_rule: bool,
    ring_capacity: usize,
    flows: u32,
    zipf: Option<f64>,
    rps: Vec<CpuSet>,
    seed: u64,
    listen: Vec<(u8, u16)>,
    idle_timeout_ns: Option<u64>,
    frag_share: f64,
    frag_every: u32,
    tcp_share: f64,
    hash_types: &'static str,
    frag_steer: flowsteer_engine::engine::FragSteer,
    /// Sources that offer a full burst at every poll (`GenSource::flooding`)
    /// instead of holding back when the hand-off queues are full.
    flood: bool,
}

impl Setup {
    fn new(policy: Policy, dispatch: Dispatch) -> Setup {
        Setup {
            workers: 3,
            rx_queues: 1,
            policy,
            dispatch,
            drain_rule: true,
            ring_capacity: 1024,
            flows: 64,
            zipf: None,
            rps: Vec::new(),
            seed: 7,
            listen: Vec::new(),
            idle_timeout_ns: None,
            frag_share: 0.0,
            frag_every: 1,
            tcp_share: 0.5,
            hash_types: "default",
            frag_steer: flowsteer_engine::engine::FragSteer::Off,
            flood: false,
        }
    }

    fn build(&self) -> Result<(Sim, Vec<FlowTuple>), String> {
        let mut rss = RssConfig::default_for_queues(usize::from(self.rx_queues)).unwrap();
        rss.types = flowsteer_rss::HashTypes::parse(self.hash_types).unwrap();
        let gen_cfg = GenConfig {
            flows: self.flows,
            zipf: self.zipf,
            seed: self.seed,
            frag_share: self.frag_share,
            frag_every: self.frag_every,
            tcp_share: self.tcp_share,
            ..GenConfig::default()
        };
        let spread = || {
            if self.rx_queues == 1 {
                Spread::Single
            } else {
                Spread::Rss { queues: self.rx_queues, config: rss.clone() }
            }
        };
        let sources: Vec<Box<dyn RxSource>> = (0..self.workers)
            .map(|_| {
                let s = GenSource::new(&gen_cfg, spread(), 32).unwrap();
                Box::new(if self.flood { s.flooding() } else { s }) as Box<dyn RxSource>
            })
            .collect();
        let tuples = {
            let g = GenSource::new(&gen_cfg, spread(), 1).unwrap();
            (0..self.flows).map(|f| g.generator().flow_tuple(f)).collect()
        };
        let mut cfg = EngineConfig::new((0..self.workers as u32).collect(), rss);
        cfg.rx_queues = self.rx_queues;
        cfg.policy = self.policy;
        cfg.dispatch = self.dispatch;
        cfg.drain_rule = self.drain_rule;
        cfg.ring_capacity = self.ring_capacity;
        cfg.tracked_flows = self.flows as usize;
        cfg.rps_cpus = self.rps.clone();
        cfg.seed = Some(self.seed);
        cfg.listen = self.listen.clone();
        cfg.frag_steer = self.frag_steer;
        if let Some(t) = self.idle_timeout_ns {
            cfg.flow_table.idle_timeout_ns = t;
        }
        let engine = Engine::build(cfg, sources).map_err(|e| e.to_string())?;
        Ok((Sim::new(engine, self.seed), tuples))
    }
}

fn assert_conserved(s: &Snapshot) {
    assert!(s.conservation_ok, "conservation failed: {:#?}", s.totals);
    assert_eq!(
        s.totals.received + s.totals.reassembled,
        s.totals.delivered + s.totals.dropped + s.totals.in_flight + s.totals.reasm_absorbed
    );
    for w in &s.workers {
        assert_eq!(w.handled, w.dispatched + w.hdispatched + (w.queued - w.len), "worker {}", w.worker);
    }
}

#[test]
fn rss_every_flow_is_handled_by_exactly_one_worker() {
    for dispatch in [Dispatch::Deferred, Dispatch::Hybrid] {
        let (mut sim, tuples) = Setup::new(Policy::Rss, dispatch).build().unwrap();
        sim.run_packets(50_000);
        sim.drain();
        let snap = sim.snapshot();
        assert_conserved(&snap);
        assert_eq!(snap.totals.dropped, 0);
        assert_eq!(snap.totals.order_violations, 0);
        let mut total = 0;
        for t in &tuples {
            let key = FlowKey::from(*t);
            let owners: Vec<(usize, u64)> = sim
                .engine
                .lcores
                .iter_mut()
                .enumerate()
                .filter_map(|(i, l)| l.flow_packets(&key).map(|p| (i, p)))
                .collect();
            assert_eq!(owners.len(), 1, "{dispatch:?}: flow {t:?} on workers {owners:?}");
            total += owners[0].1;
        }
        assert_eq!(total, snap.totals.delivered);
        // Every worker got a share (64 flows over 3 workers).
        assert!(snap.workers.iter().all(|w| w.handled > 0), "{:?}", snap.workers);
    }
}

/// Run with consumers migrating every `every` packets while worker 1 lags,
/// so queues hold backlog when flows move. The sources flood, as a NIC
/// would (a full queue drops instead of holding the receive side back).
fn rfs_migration(drain_rule: bool, dispatch: Dispatch) -> Snapshot {
    let mut setup = Setup::new(Policy::Rfs, dispatch);
    setup.drain_rule = drain_rule;
    setup.flood = true;
    let (mut sim, _) = setup.build().unwrap();
    sim.set_slowdown(1, 2);
    for _ in 0..12 {
        sim.run_packets(4_000);
        sim.engine.consumers.rotate();
    }
    sim.drain();
    sim.snapshot()
}

#[test]
fn rfs_moves_flows_to_their_consumers_without_reordering() {
    for dispatch in [Dispatch::Deferred, Dispatch::Hybrid] {
        let snap = rfs_migration(true, dispatch);
        assert_conserved(&snap);
        assert_eq!(snap.totals.order_violations, 0, "{dispatch:?}");
        // The lagging worker may overflow while flows wait for it to drain:
        // such losses are counted as queue_full, never silent.
        assert!(snap.totals.drops.keys().all(|k| k == "queue_full"), "{:?}", snap.totals.drops);
        assert!(snap.totals.steer_moves > 0, "flows moved");
        assert!(snap.totals.held_for_drain > 0, "the drain rule held packets back");
        let local: u64 = snap.workers.iter().map(|w| w.consumer_local).sum();
        let remote: u64 = snap.workers.iter().map(|w| w.consumer_remote).sum();
        assert!(
            local > 4 * remote,
            "RFS delivers mostly on the consumer's core: {local} local, {remote} remote {snap:#?}"
        );
    }
}

#[test]
fn naive_switch_without_drain_rule_reorders() {
    let snap = rfs_migration(false, Dispatch::Deferred);
    assert_conserved(&snap);
    assert!(snap.totals.order_violations > 0, "the naive switch must reorder: {:#?}", snap.totals);
}

fn rebalance_run(drain_rule: bool) -> (Snapshot, usize) {
    let mut setup = Setup::new(Policy::Rss, Dispatch::Deferred);
    setup.drain_rule = drain_rule;
    setup.zipf = Some(1.2);
    setup.flows = 256;
    let (mut sim, _) = setup.build().unwrap();
    sim.set_slowdown(0, 3);
    let cfg = RebalanceConfig { threshold: 1.05, max_moves: 4, min_packets: 100 };
    let mut moves = 0;
    for _ in 0..20 {
        sim.run_packets(3_000);
        moves += sim.rebalance(&cfg);
    }
    sim.drain();
    (sim.snapshot(), moves)
}

#[test]
fn rebalance_moves_buckets_without_reordering() {
    let (snap, moves) = rebalance_run(true);
    assert_conserved(&snap);
    assert!(moves > 0, "skewed load must trigger moves");
    assert_eq!(snap.totals.rebalance_moves as usize, moves);
    assert_eq!(snap.totals.order_violations, 0);
    let (naive, naive_moves) = rebalance_run(false);
    assert!(naive_moves > 0);
    assert!(naive.totals.order_violations > 0, "naive bucket moves reorder: {:#?}", naive.totals);
}

#[test]
fn rps_spreads_over_the_mask_only() {
    let mut setup = Setup::new(Policy::Rps, Dispatch::Hybrid);
    setup.workers = 4;
    setup.rps = vec![CpuSet::parse("6").unwrap()]; // CPUs 1 and 2
    let (mut sim, _) = setup.build().unwrap();
    sim.run_packets(20_000);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    assert_eq!(snap.workers[0].handled, 0);
    assert_eq!(snap.workers[3].handled, 0);
    assert!(snap.workers[1].handled > 0 && snap.workers[2].handled > 0);
    assert_eq!(snap.totals.order_violations, 0);
    // A mask naming a CPU without a worker is refused.
    setup.rps = vec![CpuSet::parse("30").unwrap()];
    let err = setup.build().err().unwrap();
    assert!(err.contains("CPU 4") || err.contains("CPU 5"), "{err}");
}

/// A source that cannot wait (a NIC; the generator flooding): full hand-off
/// queues drop, counted as queue_full.
#[test]
fn full_queues_drop_and_count_never_block() {
    let mut setup = Setup::new(Policy::Rss, Dispatch::Deferred);
    setup.ring_capacity = 8;
    setup.flood = true;
    let (mut sim, _) = setup.build().unwrap();
    sim.set_slowdown(2, 50);
    sim.run_packets(30_000);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    assert!(snap.workers[2].qdrops > 0, "{:?}", snap.workers[2]);
    assert_eq!(
        snap.totals.drops.get("queue_full").copied().unwrap_or(0),
        snap.workers.iter().map(|w| w.qdrops).sum::<u64>()
    );
    assert!(snap.workers[2].wmark <= 8);
    assert_eq!(snap.totals.order_violations, 0);
}

/// The generator as `run` uses it by default holds back while a hand-off
/// queue is full: the same slow worker and tiny queues lose nothing, and
/// the run still receives everything it asked for.
#[test]
fn a_source_that_holds_back_loses_nothing_to_full_queues() {
    for (policy, dispatch, rx_queues, rps) in [
        (Policy::Rss, Dispatch::Deferred, 1, None),
        (Policy::Rss, Dispatch::Hybrid, 3, None),
        (Policy::Rps, Dispatch::Hybrid, 1, Some("7")),
        (Policy::Rfs, Dispatch::Deferred, 1, Some("7")),
    ] {
        let mut setup = Setup::new(policy, dispatch);
        setup.ring_capacity = 8;
        setup.rx_queues = rx_queues;
        setup.rps = rps.map(|m| vec![CpuSet::parse(m).unwrap()]).unwrap_or_default();
        let (mut sim, _) = setup.build().unwrap();
        sim.set_slowdown(2, 50);
        sim.run_packets(30_000);
        sim.drain();
        let snap = sim.snapshot();
        assert_conserved(&snap);
        assert!(snap.totals.received >= 30_000, "{policy:?} {dispatch:?}: {:?}", snap.totals);
        assert_eq!(snap.totals.dropped, 0, "{policy:?} {dispatch:?}: {:?}", snap.totals.drops);
        assert!(snap.workers.iter().all(|w| w.wmark <= 8));
    }
}

#[test]
fn direct_dispatch_processes_on_the_receiving_core() {
    let mut setup = Setup::new(Policy::Rss, Dispatch::Direct);
    setup.rx_queues = 3;
    let (mut sim, _) = setup.build().unwrap();
    sim.run_packets(10_000);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    for w in &snap.workers {
        assert_eq!(w.dispatched, w.received);
        assert_eq!(w.queued, 0);
    }
}

#[test]
fn same_seed_same_result() {
    let a = rfs_migration(true, Dispatch::Hybrid);
    let b = rfs_migration(true, Dispatch::Hybrid);
    assert_eq!(a.workers, b.workers);
}

#[test]
fn per_bucket_listeners_then_wildcard_after_moves() {
    use flowsteer_wire::proto;
    let mut setup = Setup::new(Policy::Rss, Dispatch::Deferred);
    setup.listen = vec![(proto::UDP, 53), (proto::TCP, 80)];
    setup.zipf = Some(1.2);
    setup.flows = 256;
    let (mut sim, tuples) = setup.build().unwrap();
    sim.run_packets(20_000);
    sim.drain();
    let before = sim.snapshot();
    assert_conserved(&before);
    let t = &before.totals;
    assert!(t.listener_bucket > 0);
    assert_eq!(t.listener_wildcard, 0, "no bucket has moved yet");
    assert!(t.drops.get("no_listener").copied().unwrap_or(0) > 0, "other ports have no listener");
    assert_eq!(t.delivered, t.listener_bucket + t.listener_wildcard);
    let listened = tuples
        .iter()
        .filter(|t| matches!((t.proto, t.ports), (proto::UDP, Some((_, 53))) | (proto::TCP, Some((_, 80)))))
        .count();
    assert!(listened > 0 && listened < tuples.len());
    // Move buckets: packets of moved buckets now meet the wildcard listener.
    sim.set_slowdown(0, 3);
    let cfg = RebalanceConfig { threshold: 1.05, max_moves: 8, min_packets: 100 };
    let mut moves = 0;
    for _ in 0..10 {
        sim.run_packets(3_000);
        moves += sim.rebalance(&cfg);
    }
    sim.drain();
    let after = sim.snapshot();
    assert_conserved(&after);
    assert!(moves > 0);
    assert!(after.totals.listener_wildcard > 0, "{:?}", after.totals);
    assert_eq!(after.totals.order_violations, 0);
}

#[test]
fn timers_fire_on_each_core_and_expire_idle_flows() {
    let mut setup = Setup::new(Policy::Rss, Dispatch::Hybrid);
    setup.idle_timeout_ns = Some(200_000); // 0.2 ms of fake time
    let (mut sim, _) = setup.build().unwrap();
    sim.run_packets(5_000);
    // No more traffic: let fake time pass so the per-core timers run.
    for _ in 0..20_000 {
        sim.step(false);
    }
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    assert!(snap.totals.timers_fired > 0);
    assert!(snap.totals.flows_expired > 0);
    assert!(snap.workers.iter().all(|w| w.flows == 0), "every idle flow expired on its core: {:?}", snap.workers);
}

#[test]
fn fragments_are_reassembled_and_rehashed_under_every_policy() {
    use flowsteer_engine::engine::FragSteer;
    for (dispatch, policy) in [
        (Dispatch::Deferred, FragSteer::Local),
        (Dispatch::Hybrid, FragSteer::Local),
        (Dispatch::Deferred, FragSteer::Rehash),
        (Dispatch::Hybrid, FragSteer::Rehash),
        (Dispatch::Deferred, FragSteer::Owner),
        (Dispatch::Direct, FragSteer::Owner),
        (Dispatch::Direct, FragSteer::Rehash),
    ] {
        let mut setup = Setup::new(Policy::Rss, dispatch);
        setup.frag_share = 0.5;
        setup.hash_types = "all"; // UDP on the 4-tuple: datagrams and fragments hash differently
        setup.frag_steer = policy;
        let (mut sim, _) = setup.build().unwrap();
        sim.run_packets(30_000);
        sim.drain();
        let snap = sim.snapshot();
        assert_conserved(&snap);
        let t = &snap.totals;
        assert!(t.reassembled > 1000, "{policy:?} {dispatch:?}: {t:?}");
        match (policy, dispatch) {
            // Reassembled where the 2-tuple sends the fragments, then moved on.
            (FragSteer::Rehash | FragSteer::Local, Dispatch::Deferred | Dispatch::Hybrid) => {
                assert!(t.reinjected > 0 && t.reinjected < t.reassembled, "{policy:?}: {t:?}")
            }
            // Reassembled at the owner / everything on one core.
            _ => assert_eq!(t.reinjected, 0, "{policy:?} {dispatch:?}: {t:?}"),
        }
        assert_eq!(t.order_violations, 0);
        // Every datagram is 3 fragments here.
        assert_eq!(t.reasm_absorbed, 3 * t.reassembled + t.reasm_pending, "{t:?}");
        // Fragments that were still pending when the run stopped are the only
        // difference between fragments received and fragments absorbed.
        assert!(t.drops.keys().all(|k| k == "queue_full"), "{:?}", t.drops);
    }
    // Off: each fragment is a packet of its own.
    let mut setup = Setup::new(Policy::Rss, Dispatch::Deferred);
    setup.frag_share = 0.5;
    setup.hash_types = "all";
    let (mut sim, _) = setup.build().unwrap();
    sim.run_packets(30_000);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    assert_eq!(snap.totals.reassembled, 0);
    assert_eq!(snap.totals.received, snap.totals.delivered + snap.totals.dropped);
}

/// The comparison: one receive queue (software steering), UDP flows
/// that mix small whole datagrams with fragmented ones, hashed on the
/// 4-tuple. `owner` reassembles at the flow's owner, behind its earlier
/// packets: in order. `rehash` (FreeBSD) reassembles where the 2-tuple hash
/// sends the fragments and re-injects the datagram to the owner: the extra
/// hop lets later small datagrams overtake it.
#[test]
fn owner_keeps_mixed_size_flows_in_order_where_rehash_reorders() {
    use flowsteer_engine::engine::FragSteer;
    let mut violations = Vec::new();
    for policy in [FragSteer::Owner, FragSteer::Rehash, FragSteer::Local] {
        let mut setup = Setup::new(Policy::Rss, Dispatch::Deferred);
        setup.workers = 3;
        setup.rx_queues = 1;
        setup.tcp_share = 0.0;
        setup.frag_share = 1.0;
        setup.frag_every = 4;
        setup.hash_types = "all";
        setup.frag_steer = policy;
        let (mut sim, _) = setup.build().unwrap();
        sim.run_packets(40_000);
        sim.drain();
        let snap = sim.snapshot();
        assert_conserved(&snap);
        let t = &snap.totals;
        assert!(t.reassembled > 1000, "{policy:?}: {t:?}");
        assert!(t.drops.is_empty(), "{policy:?}: {:?}", t.drops);
        if policy == FragSteer::Owner {
            assert_eq!(t.reinjected, 0, "{t:?}");
        }
        violations.push((policy, t.order_violations));
    }
    assert_eq!(violations[0].1, 0, "owner: {violations:?}");
    assert!(violations[1].1 > 0, "rehash should reorder mixed flows: {violations:?}");
    assert_eq!(violations[2].1, 0, "local: {violations:?}");
}

/// `owner` with fragments arriving before their first fragment: they wait
/// on the receive side and follow it; nothing is lost or counted twice.
#[test]
fn owner_holds_fragments_that_overtake_their_first() {
    use flowsteer_engine::engine::{EngineConfig, FragSteer};
    use flowsteer_engine::source::{Replay, ReplaySource};
    use flowsteer_wire::build::{ipv4_fragments, udp_frame};
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    let (src, dst) = (Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 1, 0, 2));
    let mut frames = Vec::new();
    for id in 0..200u16 {
        let payload = vec![id as u8; 3000];
        let mut frags = ipv4_fragments(src, dst, 4000 + (id % 7), 53, id, &payload, 1500);
        if id % 2 == 0 {
            frags.reverse(); // last first, the first fragment last
        }
        frames.extend(frags);
        frames.push(udp_frame(src.into(), dst.into(), 4000 + (id % 7), 53, &[1, 2, 3]));
    }
    let n = frames.len() as u64;
    let mut rss = RssConfig::default_for_queues(1).unwrap();
    rss.types = flowsteer_rss::HashTypes::parse("all").unwrap();
    let replay = Arc::new(Replay { queues: vec![frames] });
    let sources: Vec<Box<dyn RxSource>> =
        (0..2).map(|_| Box::new(ReplaySource::new(replay.clone(), 1)) as Box<dyn RxSource>).collect();
    let mut cfg = EngineConfig::new(vec![0, 1], rss);
    cfg.rx_queues = 1;
    cfg.frag_steer = FragSteer::Owner;
    let engine = Engine::build(cfg, sources).unwrap();
    let mut sim = Sim::new(engine, 3);
    sim.run_packets(n);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    let t = &snap.totals;
    assert_eq!(t.received, n);
    assert_eq!(t.reassembled, 200, "{t:?}");
    assert_eq!(t.delivered, 400, "{t:?}");
    assert_eq!((t.dropped, t.in_flight, t.frag_held), (0, 0, 0), "{t:?}");
}

/// Packets whose lengths a receiving host refuses are dropped by reason,
/// whole packets and reassembled datagrams alike; the rest is delivered.
#[test]
fn packets_with_impossible_lengths_are_dropped_by_reason() {
    use flowsteer_engine::engine::{EngineConfig, FragSteer};
    use flowsteer_engine::source::{Replay, ReplaySource};
    use flowsteer_wire::build::{ipv4_fragments, udp_frame};
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    let (src, dst) = (Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 1, 0, 2));
    let good = udp_frame(src.into(), dst.into(), 4000, 53, b"hello");
    let with = |at: usize, bytes: &[u8]| {
        let mut f = good.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        f
    };
    // IPv4 with a 4-byte option whose length byte is 0.
    let mut bad_option = good.clone();
    bad_option.splice(34..34, [7u8, 0, 0, 0]);
    bad_option[14] = 0x46;
    bad_option[16..18].copy_from_slice(&(u16::from_be_bytes([good[16], good[17]]) + 4).to_be_bytes());
    // A fragmented datagram whose UDP length says more than it carries.
    let mut liar = ipv4_fragments(src, dst, 4001, 53, 77, &[9u8; 3000], 1500);
    liar[0][38..40].copy_from_slice(&4000u16.to_be_bytes());
    let mut frames = vec![
        good.clone(),
        with(16, &[0x05, 0xdc]), // IP total length 1500 in a 47-byte frame
        with(38, &[0, 0]),       // UDP length 0
        with(38, &[0, 200]),     // UDP length past the datagram
        with(38, &[0, 7]),       // UDP length below its own header
        bad_option,
    ];
    frames.extend(liar);
    let n = frames.len() as u64;
    let replay = Arc::new(Replay { queues: vec![frames] });
    let sources: Vec<Box<dyn RxSource>> = vec![Box::new(ReplaySource::new(replay, 1))];
    let mut cfg = EngineConfig::new(vec![0], RssConfig::default_for_queues(1).unwrap());
    cfg.rx_queues = 1;
    cfg.frag_steer = FragSteer::Local;
    let mut sim = Sim::new(Engine::build(cfg, sources).unwrap(), 5);
    sim.run_packets(n);
    sim.drain();
    let snap = sim.snapshot();
    assert_conserved(&snap);
    let t = &snap.totals;
    assert_eq!((t.received, t.reassembled, t.delivered), (n, 1, 1), "{t:?}");
    let drop = |name: &str| t.drops.get(name).copied().unwrap_or(0);
    assert_eq!(drop("ip_len_beyond_frame"), 1, "{:?}", t.drops);
    assert_eq!(drop("udp_bad_length"), 4, "{:?}", t.drops);
    assert_eq!(drop("ipv4_bad_option"), 1, "{:?}", t.drops);
}

/// The frames of [`held_fragments_age_out_or_drop_at_the_end`]: `orphans`
/// non-first IPv4 fragments whose first never comes, `lone` first fragments
/// whose rest never comes, `bad` UDP datagrams with a wrong IPv4 header
/// checksum and `good` whole ones.
fn hostile_mix(orphans: u16, lone: u16, bad: u16, good: u16) -> Vec<Vec<u8>> {
    use flowsteer_wire::build::{ipv4_fragments, udp_frame};
    use std::net::Ipv4Addr;
    let (src, dst) = (Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 1, 0, 2));
    let mut frames = Vec::new();
    for id in 0..orphans {
        frames.push(ipv4_fragments(src, dst, 4000, 53, id, &[7u8; 3000], 1500).swap_remove(1));
    }
    for id in 0..lone {
        frames.push(ipv4_fragments(src, dst, 4001, 53, 1000 + id, &[8u8; 3000], 1500).swap_remove(0));
    }
    for i in 0..bad {
        let mut f = udp_frame(src.into(), dst.into(), 5000 + i, 53, b"bad checksum");
        f[24] ^= 0x40;
        frames.push(f);
    }
    for i in 0..good {
        frames.push(udp_frame(src.into(), dst.into(), 6000 + i, 53, b"fine"));
    }
    frames
}

fn one_owner_core(frames: Vec<Vec<u8>>) -> Sim {
    use flowsteer_engine::engine::FragSteer;
    use flowsteer_engine::source::{Replay, ReplaySource};
    use std::sync::Arc;
    let replay = Arc::new(Replay { queues: vec![frames] });
    let sources: Vec<Box<dyn RxSource>> = vec![Box::new(ReplaySource::new(replay, 1))];
    let mut cfg = EngineConfig::new(vec![0], RssConfig::default_for_queues(1).unwrap());
    cfg.rx_queues = 1;
    cfg.frag_steer = FragSteer::Owner;
    Sim::new(Engine::build(cfg, sources).unwrap(), 5)
}

/// IPv4 frames with a bad header checksum are dropped as
/// `ipv4_bad_checksum`; fragments held (orphans waiting for their first,
/// first fragments waiting for the rest) age out at the 30 s IPv4 timeout on
/// an idle core, or are dropped as `*_pending_at_end` when the run ends
/// before that: either way nothing is in flight and `received = delivered +
/// dropped` holds.
#[test]
fn held_fragments_age_out_or_drop_at_the_end() {
    let (orphans, lone, bad, good) = (10u64, 5u64, 3u64, 2u64);
    let frames = || hostile_mix(orphans as u16, lone as u16, bad as u16, good as u16);
    let n = orphans + lone + bad + good;
    let drop = |s: &Snapshot, name: &str| s.totals.drops.get(name).copied().unwrap_or(0);

    // Idle past the timeout: aged out, counted as timeouts.
    let mut sim = one_owner_core(frames());
    sim.run_packets(n);
    sim.drain();
    let s = sim.snapshot();
    assert_conserved(&s);
    assert_eq!((s.totals.frag_held, s.totals.in_flight, s.totals.reasm_pending), (orphans, orphans, lone));
    assert_eq!((s.totals.delivered, drop(&s, "ipv4_bad_checksum")), (good, bad), "{:?}", s.totals.drops);
    sim.idle(29_000_000_000);
    let s = sim.snapshot();
    assert_eq!((s.totals.frag_held, s.totals.reasm_pending), (orphans, lone), "not before 30 s");
    sim.idle(1_000_000_000);
    let s = sim.snapshot();
    assert_conserved(&s);
    assert_eq!((s.totals.frag_held, s.totals.in_flight, s.totals.reasm_pending), (0, 0, 0));
    assert_eq!(drop(&s, "frag_hold_timeout"), orphans, "{:?}", s.totals.drops);
    assert_eq!(drop(&s, "reasm_timed_out"), lone, "{:?}", s.totals.drops);
    assert_eq!(s.totals.received, s.totals.delivered + s.totals.dropped);

    // Ended before the timeout: dropped at the end, by their own reason.
    let mut sim = one_owner_core(frames());
    sim.run_packets(n);
    sim.finish();
    let s = sim.snapshot();
    assert_conserved(&s);
    assert_eq!((s.totals.frag_held, s.totals.in_flight, s.totals.reasm_pending), (0, 0, 0));
    assert_eq!(drop(&s, "frag_hold_pending_at_end"), orphans, "{:?}", s.totals.drops);
    assert_eq!(drop(&s, "reasm_pending_at_end"), lone, "{:?}", s.totals.drops);
    assert_eq!(drop(&s, "ipv4_bad_checksum"), bad);
    assert_eq!(s.totals.received, s.totals.delivered + s.totals.dropped);
    assert_eq!(s.totals.received, n);
}
