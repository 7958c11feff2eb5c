//! The steering policies and the drain rule.
//!
//! Every receive thread owns one [`Steerer`]. For each packet it answers
//! "which worker?" ([`Steerer::target`]) and, once the packet is queued,
//! records the queue's tail ([`Steerer::enqueued`]).
//!
//! **The drain rule** (Linux RFS, `get_rps_cpu`): a steering entry
//! (an RSS bucket, or an RFS flow slot) remembers the worker its last packet
//! went to (`current`) and that worker's queue tail just after the packet
//! was enqueued (`last_qtail`). When the entry should move to another worker
//! (the application's CPU changed, or the rebalancer moved the bucket), it
//! moves only when the old worker has *processed* its queue past
//! `last_qtail` (or it is offline, or the entry is unset). Until then packets
//! keep going to the old worker. Since all packets of a flow arrive through
//! one receive thread and a worker processes its queue in order, no packet
//! of the flow can overtake an earlier one. With `drain_rule: false` the
//! switch is immediate (the naive design), which is what the tests use to
//! show the reordering the rule prevents.
//!
//! Unlike Linux, the RFS flow slot also tracks packets steered by the
//! fallback (RPS or RSS) choice before the application recorded a desired
//! CPU, so the first move to the desired CPU waits for them too.

use crate::cpuset::CpuSet;
use crate::{SteerError, WorkerId};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;

/// Default entries in the RFS tables (Linux: `rps_sock_flow_entries` 32768
/// is a common setting; `rps_flow_cnt` per queue 4096).
pub const DEFAULT_SOCK_FLOW_ENTRIES: usize = 32768;
pub const DEFAULT_FLOW_CNT: usize = 4096;
/// Largest RFS / bucket table (entries).
pub const MAX_TABLE_ENTRIES: usize = 1 << 22;

/// `(hash * n) >> 32`, Linux `reciprocal_scale`.
#[inline]
pub fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((u64::from(hash) * u64::from(n)) >> 32) as u32
}

/// Table sizes are rounded up to a power of two and clamped to
/// 1..=[`MAX_TABLE_ENTRIES`].
pub fn table_size(requested: usize) -> usize {
    requested.clamp(1, MAX_TABLE_ENTRIES).next_power_of_two()
}

/// Which policy picks the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Bucket = low bits of the RSS hash; bucket -> worker map (FreeBSD RSS).
    Rss,
    /// CPU set per receive queue; CPU = set[(hash * n) >> 32] (Linux RPS).
    Rps,
    /// The worker where the application consumes the flow (Linux RFS).
    Rfs,
}

impl Policy {
    pub fn parse(s: &str) -> Result<Policy, SteerError> {
        match s {
            "rss" => Ok(Policy::Rss),
            "rps" => Ok(Policy::Rps),
            "rfs" => Ok(Policy::Rfs),
            _ => Err(SteerError::UnknownPolicy(s.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Rss => "rss",
            Policy::Rps => "rps",
            Policy::Rfs => "rfs",
        }
    }
}

/// The software bucket -> worker map (FreeBSD `rss_getcpu`), shared by all
/// receive threads. Written by the control thread (rebalancer), read by
/// receive threads; both sides wait-free (one atomic per entry).
#[derive(Debug)]
pub struct BucketMap {
    entries: Box<[AtomicU16]>,
    mask: u32,
}

impl BucketMap {
    /// `size` buckets (rounded to a power of two) round-robin over `workers`.
    pub fn round_robin(size: usize, workers: usize) -> BucketMap {
        let size = table_size(size);
        let workers = workers.max(1);
        let entries = (0..size).map(|i| AtomicU16::new((i % workers) as u16)).collect();
        BucketMap { entries, mask: (size - 1) as u32 }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline]
    pub fn bucket_for(&self, hash: u32) -> usize {
        (hash & self.mask) as usize
    }

    #[inline]
    pub fn worker(&self, bucket: usize) -> WorkerId {
        WorkerId(self.entries[bucket & self.mask as usize].load(Ordering::Relaxed))
    }

    /// Point a bucket at another worker. Receive threads pick it up on their
    /// next packet of that bucket, subject to the drain rule.
    pub fn set(&self, bucket: usize, worker: WorkerId) {
        self.entries[bucket & self.mask as usize].store(worker.0, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Vec<WorkerId> {
        self.entries.iter().map(|e| WorkerId(e.load(Ordering::Relaxed))).collect()
    }
}

/// The RFS desired-worker table (Linux `rps_sock_flow_table`): written where
/// the application consumes a flow, read by receive threads. Each entry
/// holds the upper bits of the flow hash (to detect slot collisions) and the
/// worker in the low [`SOCK_WORKER_BITS`] bits. Wait-free on both sides.
#[derive(Debug)]
pub struct SockFlowTable {
    entries: Box<[AtomicU32]>,
    mask: u32,
}

/// Bits of a [`SockFlowTable`] entry that hold the worker.
pub const SOCK_WORKER_BITS: u32 = 10;
const SOCK_WORKER_MASK: u32 = (1 << SOCK_WORKER_BITS) - 1;
const SOCK_EMPTY: u32 = u32::MAX;

impl SockFlowTable {
    pub fn new(entries: usize) -> SockFlowTable {
        let size = table_size(entries);
        SockFlowTable { entries: (0..size).map(|_| AtomicU32::new(SOCK_EMPTY)).collect(), mask: (size - 1) as u32 }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The application consumed this flow on `worker` (Linux `rps_record_sock_flow`).
    /// Writes only when the value changes, to keep the line shared.
    #[inline]
    pub fn record(&self, hash: u32, worker: WorkerId) {
        let e = &self.entries[(hash & self.mask) as usize];
        let v = (hash & !SOCK_WORKER_MASK) | (u32::from(worker.0) & SOCK_WORKER_MASK);
        if e.load(Ordering::Relaxed) != v {
            e.store(v, Ordering::Relaxed);
        }
    }

    /// Forget a flow (the socket closed).
    pub fn clear(&self, hash: u32) {
        self.entries[(hash & self.mask) as usize].store(SOCK_EMPTY, Ordering::Relaxed);
    }

    /// The desired worker, or [`WorkerId::NONE`] if unknown (or the slot
    /// belongs to another flow).
    #[inline]
    pub fn desired(&self, hash: u32) -> WorkerId {
        let v = self.entries[(hash & self.mask) as usize].load(Ordering::Relaxed);
        if v == SOCK_EMPTY || (v ^ hash) & !SOCK_WORKER_MASK != 0 {
            WorkerId::NONE
        } else {
            WorkerId((v & SOCK_WORKER_MASK) as u16)
        }
    }
}

/// What a receive thread knows about its queues to the workers.
pub trait QueueView {
    /// Packets of this receive thread's queue to `w` that `w` has finished
    /// processing (monotonic).
    fn done(&self, w: WorkerId) -> u64;
    /// False when the worker is stopped (its entries may move at once).
    fn online(&self, _w: WorkerId) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    current: WorkerId,
    last_qtail: u64,
}

const UNSET: Entry = Entry { current: WorkerId::NONE, last_qtail: 0 };

/// Which steering entry a packet used; give it back to [`Steerer::enqueued`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    None,
    Bucket(usize),
    Flow(usize),
}

/// Counters of one [`Steerer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteerStats {
    /// Entries that moved to a new worker.
    pub moves: u64,
    /// Packets that stayed on the old worker because it had not drained yet.
    pub held_for_drain: u64,
}

/// The shared tables a [`Steerer`] reads.
#[derive(Clone, Debug)]
pub struct SharedTables {
    pub buckets: Arc<BucketMap>,
    pub sock: Option<Arc<SockFlowTable>>,
}

/// Per-receive-thread steering state. Not `Sync`: owned by its thread.
#[derive(Debug)]
pub struct Steerer {
    policy: Policy,
    own: WorkerId,
    rps: Vec<WorkerId>,
    shared: SharedTables,
    bucket_state: Vec<Entry>,
    flow_state: Vec<Entry>,
    flow_mask: u32,
    drain_rule: bool,
    stats: SteerStats,
}

impl Steerer {
    /// `own`: the worker on this receive thread's core. `rps`: the RPS CPU
    /// set of this queue, already mapped to workers (empty: RPS off, the
    /// packet stays on `own`). `flow_cnt`: RFS flow slots of this queue.
    pub fn new(policy: Policy, own: WorkerId, rps: Vec<WorkerId>, shared: SharedTables, flow_cnt: usize) -> Steerer {
        let flow_size = if policy == Policy::Rfs { table_size(flow_cnt) } else { 1 };
        Steerer {
            policy,
            own,
            rps,
            bucket_state: vec![UNSET; shared.buckets.len()],
            shared,
            flow_state: vec![UNSET; flow_size],
            flow_mask: (flow_size - 1) as u32,
            drain_rule: true,
            stats: SteerStats::default(),
        }
    }

    /// Turn the drain rule off (the naive switch; for tests and demos only).
    pub fn without_drain_rule(mut self) -> Steerer {
        self.drain_rule = false;
        self
    }

    pub fn stats(&self) -> SteerStats {
        self.stats
    }

    pub fn own(&self) -> WorkerId {
        self.own
    }

    /// The RPS choice for a hash (or `own` when RPS is off for this queue).
    #[inline]
    pub fn rps_choice(&self, hash: u32) -> WorkerId {
        if self.rps.is_empty() {
            self.own
        } else {
            self.rps[reciprocal_scale(hash, self.rps.len() as u32) as usize]
        }
    }

    /// The worker for a packet with this hash.
    #[inline]
    pub fn target(&mut self, hash: u32, queues: &impl QueueView) -> (WorkerId, Slot) {
        match self.policy {
            Policy::Rps => (self.rps_choice(hash), Slot::None),
            Policy::Rss => {
                let b = self.shared.buckets.bucket_for(hash);
                let desired = self.shared.buckets.worker(b);
                let w = self.switch(Slot::Bucket(b), desired, queues);
                (w, Slot::Bucket(b))
            }
            Policy::Rfs => {
                let mut desired = match &self.shared.sock {
                    Some(s) => s.desired(hash),
                    None => WorkerId::NONE,
                };
                if desired.is_none() {
                    desired = if self.rps.is_empty() {
                        self.shared.buckets.worker(self.shared.buckets.bucket_for(hash))
                    } else {
                        self.rps_choice(hash)
                    };
                }
                let i = (hash & self.flow_mask) as usize;
                (self.switch(Slot::Flow(i), desired, queues), Slot::Flow(i))
            }
        }
    }

    #[inline]
    fn switch(&mut self, slot: Slot, desired: WorkerId, queues: &impl QueueView) -> WorkerId {
        let drain_rule = self.drain_rule;
        let e = match slot {
            Slot::Bucket(b) => &mut self.bucket_state[b],
            Slot::Flow(i) => &mut self.flow_state[i],
            Slot::None => return desired,
        };
        if e.current == desired {
            return desired;
        }
        let may_move =
            e.current.is_none() || !drain_rule || !queues.online(e.current) || queues.done(e.current) >= e.last_qtail;
        if may_move {
            if !e.current.is_none() {
                self.stats.moves += 1;
            }
            e.current = desired;
            e.last_qtail = 0;
        } else {
            self.stats.held_for_drain += 1;
        }
        e.current
    }

    /// The packet that used `slot` was queued to its worker, whose queue
    /// (from this receive thread) now has `tail` packets enqueued in total.
    #[inline]
    pub fn enqueued(&mut self, slot: Slot, tail: u64) {
        match slot {
            Slot::Bucket(b) => self.bucket_state[b].last_qtail = tail,
            Slot::Flow(i) => self.flow_state[i].last_qtail = tail,
            Slot::None => {}
        }
    }
}

/// Map an RPS CPU set onto workers: CPU `c` -> the worker pinned to `c`.
/// CPUs without a worker are an error (they would never process anything).
pub fn rps_workers(set: &CpuSet, worker_cpus: &[u32]) -> Result<Vec<WorkerId>, SteerError> {
    set.cpus()
        .iter()
        .map(|&cpu| {
            worker_cpus
                .iter()
                .position(|&w| w == cpu)
                .map(|i| WorkerId(i as u16))
                .ok_or_else(|| SteerError::RpsCpuNotWorker { set: set.clone(), cpu, workers: worker_cpus.to_vec() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Fake {
        done: [Cell<u64>; 4],
    }

    impl QueueView for Fake {
        fn done(&self, w: WorkerId) -> u64 {
            self.done[w.index()].get()
        }
    }

    fn fake() -> Fake {
        Fake { done: Default::default() }
    }

    fn shared(buckets: usize, workers: usize, rfs: bool) -> SharedTables {
        SharedTables {
            buckets: Arc::new(BucketMap::round_robin(buckets, workers)),
            sock: rfs.then(|| Arc::new(SockFlowTable::new(64))),
        }
    }

    #[test]
    fn rss_bucket_move_waits_for_drain() {
        let sh = shared(8, 2, false);
        let mut s = Steerer::new(Policy::Rss, WorkerId(0), vec![], sh.clone(), 0);
        let q = fake();
        let hash = 3; // bucket 3 -> worker 1
        let (w, slot) = s.target(hash, &q);
        assert_eq!(w, WorkerId(1));
        s.enqueued(slot, 10); // worker 1's queue tail is 10 after this packet
        sh.buckets.set(3, WorkerId(0));
        // Worker 1 has processed 9: the packet at tail 10 is still pending.
        q.done[1].set(9);
        assert_eq!(s.target(hash, &q).0, WorkerId(1));
        assert_eq!(s.stats().held_for_drain, 1);
        s.enqueued(slot, 11);
        q.done[1].set(10);
        assert_eq!(s.target(hash, &q).0, WorkerId(1), "tail moved to 11");
        q.done[1].set(11);
        assert_eq!(s.target(hash, &q).0, WorkerId(0));
        assert_eq!(s.stats().moves, 1);
    }

    #[test]
    fn naive_switch_moves_at_once() {
        let sh = shared(8, 2, false);
        let mut s = Steerer::new(Policy::Rss, WorkerId(0), vec![], sh.clone(), 0).without_drain_rule();
        let q = fake();
        let (_, slot) = s.target(3, &q);
        s.enqueued(slot, 10);
        sh.buckets.set(3, WorkerId(0));
        assert_eq!(s.target(3, &q).0, WorkerId(0));
    }

    #[test]
    fn rfs_follows_the_consumer_and_falls_back() {
        let sh = shared(8, 4, true);
        let mut s = Steerer::new(Policy::Rfs, WorkerId(0), vec![WorkerId(2), WorkerId(3)], sh.clone(), 16);
        let q = fake();
        let hash = 0x8000_0005;
        // No consumer yet: RPS choice ((hash * 2) >> 32 = 1 -> worker 3).
        let (w, slot) = s.target(hash, &q);
        assert_eq!(w, WorkerId(3));
        s.enqueued(slot, 4);
        sh.sock.as_ref().unwrap().record(hash, WorkerId(1));
        assert_eq!(sh.sock.as_ref().unwrap().desired(hash), WorkerId(1));
        // A different flow in the same slot does not see it.
        assert_eq!(sh.sock.as_ref().unwrap().desired(hash ^ 0x4000_0000), WorkerId::NONE);
        assert_eq!(s.target(hash, &q).0, WorkerId(3), "old worker not drained");
        q.done[3].set(4);
        assert_eq!(s.target(hash, &q).0, WorkerId(1));
    }

    #[test]
    fn offline_worker_releases_at_once() {
        struct Off;
        impl QueueView for Off {
            fn done(&self, _: WorkerId) -> u64 {
                0
            }
            fn online(&self, w: WorkerId) -> bool {
                w != WorkerId(1)
            }
        }
        let sh = shared(8, 2, false);
        let mut s = Steerer::new(Policy::Rss, WorkerId(0), vec![], sh.clone(), 0);
        let (_, slot) = s.target(1, &Off);
        s.enqueued(slot, 100);
        sh.buckets.set(1, WorkerId(0));
        assert_eq!(s.target(1, &Off).0, WorkerId(0));
    }

    #[test]
    fn rps_uses_reciprocal_scale_over_the_set() {
        let sh = shared(8, 4, false);
        let set = CpuSet::parse("c").unwrap(); // CPUs 2, 3
        let workers = rps_workers(&set, &[0, 1, 2, 3]).unwrap();
        let mut s = Steerer::new(Policy::Rps, WorkerId(0), workers, sh, 0);
        let q = fake();
        assert_eq!(s.target(0x0000_0001, &q).0, WorkerId(2));
        assert_eq!(s.target(0xffff_ffff, &q).0, WorkerId(3));
        let e = rps_workers(&CpuSet::parse("10").unwrap(), &[0, 1]).unwrap_err();
        assert_eq!(e.to_string(), "RPS mask 10 names CPU 4, which runs no worker (workers on CPUs [0, 1])");
        // Empty set: RPS off, stays on the receiving worker.
        let mut s = Steerer::new(Policy::Rps, WorkerId(1), vec![], shared(8, 2, false), 0);
        assert_eq!(s.target(0xdead_beef, &q).0, WorkerId(1));
    }

    #[test]
    fn table_sizes_round_up_and_are_bounded() {
        assert_eq!(table_size(0), 1);
        assert_eq!(table_size(100), 128);
        assert_eq!(table_size(usize::MAX), MAX_TABLE_ENTRIES);
        assert_eq!(BucketMap::round_robin(100, 3).len(), 128);
    }
}
