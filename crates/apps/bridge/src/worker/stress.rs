//! Stress of what the workers and the writer share, without sockets: real
//! [`Worker`]s forward synthetic bursts (their own `forward_and_send`, on
//! ports that have no sockets, so every transmit is counted `tx_failed`)
//! while the test thread, as the writer, removes and adds member ports
//! through the runtime's own [`remove_member`] and [`add_member`] (new
//! list, acknowledgements, sockets handed back, entries removed) and
//! removes and flushes MAC-table entries. Checks: every frame a worker
//! took is counted once on its port and its worker, the sums add up, a
//! removed port has no entry left, and (under Miri) no use-after-free or
//! data race in the port list's hand-over or the table's.
//!
//! Natively it runs 2 s (part of `cargo test`). Under Miri, outside CI:
//! `cargo +nightly miri test -p flowsteer-bridge --lib stress` runs 12
//! writer rounds (see the crate's documentation for its duration).

use super::{RxFrame, VnetHdr, Worker};
use crate::api::{PortKind, PortSpec};
use crate::config::{BridgeConfig, PortConf};
use crate::counters::{PortCounters, WorkerCounters};
use crate::port::{PortShared, WorkerPort};
use crate::runtime::{add_member, remove_member, stats};
use crate::shared::{Member, PortList, Shared};
use arc_swap::ArcSwap;
use flowsteer_fdb::{FdbConfig, Mac, PortId, VlanId};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WORKERS: usize = 2;
const FIRST_PORTS: u16 = 4;
/// Stations per port, and stations that roam over every port: each frame
/// of a roaming one seen on a port other than its entry's is a MAC move,
/// posted at once (the workers' once-a-second filter lets moves through),
/// so learning events are always in flight when a port is removed.
const STATIONS: u64 = 64;
/// The pseudo-port of the roaming stations' addresses.
const ROAMING: u64 = 0xffff;
const BURST: usize = 8;

fn fake_port(id: u16) -> Arc<PortShared> {
    Arc::new(PortShared {
        id: PortId(id),
        spec: PortSpec { kind: PortKind::Afpacket, iface: format!("fake{id}") },
        ifindex: 0,
        mtu: 1500,
        counters: (0..WORKERS).map(|_| PortCounters::default()).collect(),
        handoff: (0..WORKERS).map(|_| Mutex::new(Some(WorkerPort::default()))).collect(),
        program: Mutex::new(None),
        program_dropped: AtomicU64::new(0),
        program_fast_forwarded: AtomicU64::new(0),
        member: AtomicBool::new(true),
        up: AtomicBool::new(true),
        removed_at: Mutex::new(None),
        fast_note: Mutex::new(String::new()),
        learned_entries: AtomicU64::new(0),
        fast_path: "off (a fake port)".into(),
        link_counts: Mutex::new(Default::default()),
        xdp: None,
    })
}

/// Station `k` behind port `port`.
fn station(port: u64, k: u64) -> [u8; 6] {
    let (p, k) = ((port as u16).to_be_bytes(), (k as u16).to_be_bytes());
    [0x02, 0, p[0], p[1], k[0], k[1]]
}

/// SplitMix64.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Forwards bursts on every port it holds until `stop`; returns how many
/// frames it took.
fn work(mut wk: Worker, seed: u64, ids: &AtomicU64) -> u64 {
    let shared = wk.shared.clone();
    let mut rng = seed;
    let mut taken = 0;
    loop {
        let stopping = shared.stop.load(Ordering::Acquire);
        let list = shared.ports.load_full();
        if list.version != wk.version {
            wk.sync(&list);
        }
        if stopping {
            return taken;
        }
        for p in &list.ports {
            let id = p.id.0 as usize;
            if wk.local.get(id).and_then(Option::as_ref).is_none() {
                continue;
            }
            wk.buf.arena.clear();
            wk.buf.frames.clear();
            for _ in 0..BURST {
                let r = next(&mut rng);
                let home = if r & (1 << 40) == 0 { u64::from(p.id.0) } else { ROAMING };
                let src = station(home, r % STATIONS);
                // To a station of any port ever (removed ones too), or broadcast.
                let dst = match (r >> 8) % 8 {
                    0 => [0xff; 6],
                    _ => station((r >> 16) % ids.load(Ordering::Relaxed), (r >> 24) % STATIONS),
                };
                let start = wk.buf.arena.len();
                wk.buf.arena.extend_from_slice(&dst);
                wk.buf.arena.extend_from_slice(&src);
                wk.buf.arena.extend_from_slice(&0x88b5u16.to_be_bytes());
                wk.buf.arena.resize(start + 60, 0);
                wk.buf.frames.push(RxFrame { start, len: 60, rxq: 0, vnet: VnetHdr::PLAIN, truncated: false });
            }
            taken += BURST as u64;
            wk.forward_and_send(id, &list);
        }
    }
}

#[test]
fn members_and_entries_change_while_workers_forward() {
    let miri = cfg!(miri);
    let cfg = BridgeConfig { workers: WORKERS, ..BridgeConfig::default() };
    let (mut fw, fdb_workers) = flowsteer_fdb::fdb(FdbConfig::default(), WORKERS).unwrap();
    let ports: Vec<Arc<PortShared>> = (0..FIRST_PORTS).map(fake_port).collect();
    let shared = Arc::new(Shared {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        ports: ArcSwap::from_pointee(PortList {
            version: 1,
            ports: ports.iter().map(|p| Member { port: p.clone(), conf: Arc::default() }).collect(),
            vlan_filtering: false,
        }),
        all_ports: Mutex::new(ports),
        acks: (0..WORKERS).map(|_| AtomicU64::new(0)).collect(),
        workers: (0..WORKERS).map(|_| WorkerCounters::default()).collect(),
        cpus: (0..WORKERS).map(|_| AtomicI64::new(-1)).collect(),
        fdb: Mutex::new(Default::default()),
        fast: None,
        fast_off: "fake ports",
        links: Mutex::new(None),
        cfg,
    });
    let ids = Arc::new(AtomicU64::new(u64::from(FIRST_PORTS)));
    let handles: Vec<_> = fdb_workers
        .into_iter()
        .enumerate()
        .map(|(w, f)| {
            let (wk, ids) = (Worker::new(w, shared.clone(), f), ids.clone());
            std::thread::spawn(move || work(wk, w as u64 + 1, &ids))
        })
        .collect();

    let (rounds_min, run_for) = if miri { (12, Duration::ZERO) } else { (200, Duration::from_secs(2)) };
    let start = Instant::now();
    let mut rng = 7u64;
    let mut round = 0;
    let mut removed: Vec<PortId> = Vec::new();
    while round < rounds_min || start.elapsed() < run_for {
        round += 1;
        fw.drain();
        // Learning events of a removed port never bring it back.
        assert!(fw.entries().all(|(_, e)| !removed.contains(&e.port)), "round {round}: entries of a removed port");
        let members = shared.ports.load_full();
        let r = next(&mut rng);
        match r % 4 {
            // A member out (never fewer than two), and its entries with it.
            0 if members.ports.len() > 2 => {
                let gone = members.ports[(r >> 8) as usize % members.ports.len()].clone();
                remove_member(&shared, &mut fw, &gone.port);
                assert!(!gone.member.load(Ordering::Relaxed));
                assert!(fw.entries().all(|(_, e)| e.port != gone.id), "round {round}: entries of a removed port");
                assert!(gone.handoff.iter().all(|h| h.lock().unwrap().is_none()), "sockets left unclosed");
                removed.push(gone.id);
            }
            // A new port in.
            0 | 1 => {
                let id = ids.load(Ordering::Relaxed) as u16;
                add_member(&shared, fake_port(id), PortConf::default());
                ids.store(u64::from(id) + 1, Ordering::Relaxed);
            }
            // Some entries removed one by one, or a port's flushed.
            2 => {
                let keys: Vec<(Mac, VlanId)> = fw.entries().take(3).map(|(k, _)| (k.mac, k.vlan)).collect();
                for (mac, vlan) in keys {
                    assert!(fw.remove(mac, vlan));
                }
            }
            _ => {
                fw.flush_port(members.ports[(r >> 8) as usize % members.ports.len()].id);
            }
        }
        if !miri {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    shared.stop.store(true, Ordering::Release);
    let taken: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    fw.drain();

    let s = stats(&shared);
    assert!(s.conservation_ok, "{}", s.conservation);
    let total: u64 = taken.iter().sum();
    assert!(total > 0);
    assert_eq!(s.ports.iter().map(|p| p.received).sum::<u64>(), total, "{}", s.conservation);
    for (w, t) in s.workers.iter().zip(&taken) {
        assert_eq!(w.received, *t, "worker {}", w.worker);
    }
    assert!(!removed.is_empty() || miri, "no port was removed in {round} rounds");
    assert_eq!(s.ports.iter().filter(|p| !p.member).count(), removed.len());
}
