//! Instruments shared by all cores: the per-flow order book (detects a
//! packet delivered after a later packet of the same flow) and the consumer
//! map (which core each flow's application thread runs on, for RFS).

use flowsteer_steer::WorkerId;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

/// Most flows tracked by the order book and the consumer map: the
/// generator's most flows (2^24), so no two flows share an entry (flow ids
/// are folded modulo the tracked count, and two folded flows would see each
/// other's sequence numbers as violations). 128 MiB of order book and
/// 32 MiB of consumer map at the maximum; allocated for the flows a run
/// has.
pub const MAX_TRACKED_FLOWS: usize = 1 << 24;

/// Highest sequence number delivered so far, per flow.
///
/// Only the worker that currently owns a flow writes its entry (the drain
/// rule makes ownership exclusive and hands it over through the queues'
/// Release/Acquire counters), so a plain load + store suffices; entries for
/// small flow counts are padded to a cache line to avoid false sharing.
#[derive(Debug)]
pub struct OrderBook {
    /// One cache-line pair per flow up to [`PADDED_FLOWS`] flows (flows of
    /// different workers never share a line); packed beyond that.
    padded: Box<[Padded]>,
    packed: Box<[AtomicU64]>,
    flows: usize,
}

/// Flows tracked with one 128-byte slot each (8 MiB at most).
pub const PADDED_FLOWS: usize = 1 << 16;

#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl OrderBook {
    pub fn new(flows: usize) -> OrderBook {
        let flows = flows.clamp(1, MAX_TRACKED_FLOWS);
        let (padded, packed) = if flows <= PADDED_FLOWS {
            ((0..flows).map(|_| Padded::default()).collect(), Box::default())
        } else {
            (Box::default(), (0..flows).map(|_| AtomicU64::new(0)).collect())
        };
        OrderBook { padded, packed, flows }
    }

    #[inline]
    fn entry(&self, flow: u32) -> &AtomicU64 {
        let i = flow as usize % self.flows;
        match self.padded.get(i) {
            Some(p) => &p.0,
            None => &self.packed[i],
        }
    }

    /// Ask for `flow`'s line ahead of [`deliver`](OrderBook::deliver).
    #[inline]
    pub fn prefetch(&self, flow: u32) {
        flowsteer_prim::prefetch(self.entry(flow));
    }

    /// Record delivery of `seq` for `flow`; `false` when it arrived after a
    /// later sequence number of the same flow (an order violation).
    #[inline]
    pub fn deliver(&self, flow: u32, seq: u64) -> bool {
        let e = self.entry(flow);
        let next = e.load(Ordering::Relaxed);
        if seq < next {
            return false;
        }
        e.store(seq + 1, Ordering::Relaxed);
        true
    }
}

/// Which worker each flow's consumer (application thread) runs on.
#[derive(Debug)]
pub struct ConsumerMap {
    map: Box<[AtomicU16]>,
    workers: usize,
}

impl ConsumerMap {
    /// Flow `f`'s consumer starts on worker `f % workers`.
    pub fn new(flows: usize, workers: usize) -> ConsumerMap {
        let flows = flows.clamp(1, MAX_TRACKED_FLOWS);
        let workers = workers.max(1);
        ConsumerMap { map: (0..flows).map(|f| AtomicU16::new((f % workers) as u16)).collect(), workers }
    }

    /// Ask for `flow`'s line ahead of [`consumer`](ConsumerMap::consumer).
    #[inline]
    pub fn prefetch(&self, flow: u32) {
        flowsteer_prim::prefetch(&self.map[flow as usize % self.map.len()]);
    }

    #[inline]
    pub fn consumer(&self, flow: u32) -> WorkerId {
        WorkerId(self.map[flow as usize % self.map.len()].load(Ordering::Relaxed))
    }

    pub fn set(&self, flow: u32, w: WorkerId) {
        self.map[flow as usize % self.map.len()].store(w.0, Ordering::Relaxed);
    }

    /// Move every consumer to the next worker (a migration wave).
    pub fn rotate(&self) {
        for e in self.map.iter() {
            let w = e.load(Ordering::Relaxed);
            e.store(((usize::from(w) + 1) % self.workers) as u16, Ordering::Relaxed);
        }
    }
}
