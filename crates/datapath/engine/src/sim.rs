//! The deterministic simulation: every core of an [`Engine`] driven from one
//! thread by a seeded schedule with a fake clock. The same receive and
//! worker code as the threaded runtime runs here; only the interleaving is
//! chosen by the seed, so a test that fails fails again with its seed.

use crate::counters::Snapshot;
use crate::engine::Engine;
use crate::runtime::MoveLog;
use flowsteer_prim::SplitMix64;
use flowsteer_steer::rebalance::{plan_moves, RebalanceConfig};

/// Fake time per scheduling step.
pub const TICK_NS: u64 = 1_000;

pub struct Sim {
    pub engine: Engine,
    rng: SplitMix64,
    now: u64,
    steps: u64,
    /// Worker `w` drains its queues only on every `slowdown[w]`-th turn.
    slowdown: Vec<u32>,
    turns: Vec<u32>,
    last_buckets: Vec<u64>,
    pub rebalance_log: Vec<MoveLog>,
}

impl Sim {
    pub fn new(engine: Engine, seed: u64) -> Sim {
        let n = engine.lcores.len();
        let buckets = engine.shared.buckets.len();
        Sim {
            engine,
            rng: SplitMix64(seed),
            now: 0,
            steps: 0,
            slowdown: vec![1; n],
            turns: vec![0; n],
            last_buckets: vec![0; buckets],
            rebalance_log: Vec::new(),
        }
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    /// Make worker `w` drain its queues `k` times less often (builds backlog).
    pub fn set_slowdown(&mut self, w: usize, k: u32) {
        if let Some(s) = self.slowdown.get_mut(w) {
            *s = k.max(1);
        }
    }

    /// One scheduling step: a random core either receives a random-sized
    /// burst (while `rx` is allowed) or drains its queues.
    pub fn step(&mut self, rx: bool) -> usize {
        let n = self.engine.lcores.len();
        let i = (self.rng.next_u64() % n as u64) as usize;
        let burst = self.engine.cfg.burst.max(1);
        let k = 1 + (self.rng.next_u64() % burst as u64) as usize;
        let do_rx = rx && self.rng.next_u64().is_multiple_of(2);
        let now = self.now;
        let lc = &mut self.engine.lcores[i];
        let did = if do_rx {
            lc.poll_rx(k, now)
        } else {
            self.turns[i] += 1;
            if self.turns[i].is_multiple_of(self.slowdown[i]) {
                lc.poll_rings(k, now)
            } else {
                0
            }
        };
        self.now += TICK_NS;
        self.steps += 1;
        if self.steps.is_multiple_of(16) {
            let now = self.now;
            for lc in self.engine.lcores.iter_mut() {
                lc.run_timers(now);
            }
        }
        did
    }

    /// Receive about `packets` packets (whole bursts), interleaved with work.
    pub fn run_packets(&mut self, packets: u64) {
        let target = self.received() + packets;
        while self.received() < target {
            self.step(true);
            if self.engine.lcores.iter().all(|l| l.sources_exhausted()) {
                break;
            }
        }
    }

    fn received(&self) -> u64 {
        self.engine.lcores.iter().map(|l| l.counters.received).sum()
    }

    /// Stop receiving and process everything queued.
    pub fn drain(&mut self) {
        loop {
            let mut did = 0;
            for lc in self.engine.lcores.iter_mut() {
                did += lc.poll_rings(usize::MAX, self.now);
            }
            self.now += TICK_NS;
            if did == 0 && self.engine.lcores.iter().all(|l| l.pending() == 0) {
                break;
            }
        }
        self.housekeeping();
    }

    /// End the run as the threaded runtime does: [`Sim::drain`], then every
    /// core drops what it still holds ([`crate::lcore::Lcore::finish`]).
    pub fn finish(&mut self) {
        self.drain();
        let now = self.now;
        for lc in self.engine.lcores.iter_mut() {
            lc.finish(now);
        }
    }

    /// Advances the fake clock by `ns` without receiving or draining (an
    /// idle stretch), then runs every core's housekeeping at the new time.
    pub fn idle(&mut self, ns: u64) {
        self.now += ns;
        self.housekeeping();
    }

    /// Flow expiry, time-outs and counter publication on every core, now.
    pub fn housekeeping(&mut self) {
        let now = self.now;
        for lc in self.engine.lcores.iter_mut() {
            lc.housekeeping(now);
        }
    }

    /// Plan and apply bucket moves from the load since the last call.
    pub fn rebalance(&mut self, cfg: &RebalanceConfig) -> usize {
        self.housekeeping();
        let mut totals = vec![0u64; self.last_buckets.len()];
        for lc in &self.engine.lcores {
            for (a, b) in totals.iter_mut().zip(&lc.counters.bucket_packets) {
                *a += b;
            }
        }
        let delta: Vec<u64> = totals.iter().zip(&self.last_buckets).map(|(a, b)| a.saturating_sub(*b)).collect();
        self.last_buckets = totals;
        let map = self.engine.shared.buckets.snapshot();
        let moves = plan_moves(&delta, &map, self.engine.lcores.len(), cfg);
        for m in &moves {
            self.engine.shared.buckets.set(m.bucket, m.to);
            self.rebalance_log.push(MoveLog {
                at_s: self.now as f64 / 1e9,
                bucket: m.bucket,
                from: m.from.0,
                to: m.to.0,
                load: m.load,
            });
        }
        moves.len()
    }

    pub fn snapshot(&mut self) -> Snapshot {
        self.housekeeping();
        Engine::snapshot(
            &self.engine.ring_stats,
            &self.engine.published,
            &self.engine.cfg.cpus,
            self.now as f64 / 1e9,
            self.rebalance_log.len() as u64,
        )
    }
}
