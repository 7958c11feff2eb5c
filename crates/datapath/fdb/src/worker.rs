//! The read side: a worker's handle on the table, its forwarding decisions,
//! and the learn/refresh events it posts to the writer.

use crate::key::{FdbKey, Mac, PortId, VlanId};
use crate::table::{Decision, DropReason, Table};
use flowsteer_ring::Producer;
use std::collections::HashMap;

/// A worker's request to the writer: `key` was seen as a source on `port`
/// in second `at_s`. The writer decides whether that is a new entry, a
/// refresh or a move.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FdbEvent {
    /// The source address in its VLAN.
    pub key: FdbKey,
    /// The ingress port.
    pub port: PortId,
    /// The second it was seen.
    pub at_s: u64,
}

/// A read handle on the published table, without the event queue (a
/// control reader, or the read side of a [`FdbWorker`]).
///
/// Thread safety: `Send`, not `Sync`; each reading thread owns its own
/// handle (clone one, or ask the writer). Entering costs two atomic
/// increments of a counter on the handle's own cache line and one fence,
/// once per guard; lookups under the guard are plain loads.
pub struct FdbReader {
    pub(crate) r: left_right::ReadHandle<Table>,
}

impl FdbReader {
    /// Enters the current version: lookups through the guard see that
    /// version until it is dropped. Take one per burst; never hold one
    /// across a blocking call, since the writer's next publish waits for
    /// it. `None` once the writer is gone.
    #[inline]
    pub fn enter(&self) -> Option<FdbGuard<'_>> {
        self.r.enter()
    }
}

impl Clone for FdbReader {
    fn clone(&self) -> Self {
        Self { r: self.r.clone() }
    }
}

impl std::fmt::Debug for FdbReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FdbReader")
    }
}

/// A reader inside one published version (derefs to [`Table`]:
/// `lookup`, `decide`, `len`, `iter`).
pub type FdbGuard<'a> = left_right::ReadGuard<'a, Table>;

/// A worker's counters. Only the worker changes them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct WorkerStats {
    /// Frames decided.
    pub frames: u64,
    /// ... sent to one port.
    pub unicast: u64,
    /// ... flooded.
    pub flooded: u64,
    /// ... dropped: reserved 802.1D destination.
    pub dropped_reserved: u64,
    /// ... dropped: destination learned on the ingress port.
    pub same_port: u64,
    /// Learn/refresh events pushed to the writer's queue.
    pub events_posted: u64,
    /// Events not posted because the queue was full.
    pub events_dropped: u64,
    /// Events not posted because the per-second filter was full.
    pub events_suppressed: u64,
    /// Frames whose source is never learned (group or zero address).
    pub source_not_learnable: u64,
}

impl WorkerStats {
    /// Every frame decided is counted once by its outcome.
    pub fn conservation_ok(&self) -> bool {
        self.frames == self.unicast + self.flooded + self.dropped_reserved + self.same_port
    }
}

/// One worker's side of the table: its read handle, its bounded queue to
/// the writer, and the filter that keeps it to one event per key per
/// second.
///
/// Thread safety: `Send`, not `Sync`; one worker thread owns it.
pub struct FdbWorker {
    reader: FdbReader,
    poster: Poster,
}

struct Poster {
    tx: Producer<FdbEvent>,
    /// Keys posted in second `posted_s`, with the port each was posted for.
    posted: HashMap<FdbKey, PortId>,
    posted_s: u64,
    /// The table's removal count when `posted` was last cleared: a removal
    /// since (a flush, aging, a port's state) may have taken a posted key
    /// out, so the filter starts over.
    posted_removals: u64,
    posted_cap: usize,
    stats: WorkerStats,
}

impl FdbWorker {
    pub(crate) fn new(reader: FdbReader, tx: Producer<FdbEvent>, posted_cap: usize) -> Self {
        Self {
            reader,
            poster: Poster {
                tx,
                posted: HashMap::with_capacity(posted_cap),
                posted_s: 0,
                posted_removals: 0,
                posted_cap,
                stats: WorkerStats::default(),
            },
        }
    }

    /// Starts a burst at second `now_s`: enters the current version once
    /// for every frame of the burst. `None` once the writer is gone.
    #[inline]
    pub fn burst(&mut self, now_s: u64) -> Option<Burst<'_>> {
        let guard = self.reader.enter()?;
        self.poster.new_second(now_s, guard.removals());
        Some(Burst { guard, poster: &mut self.poster, now_s })
    }

    /// The worker's counters.
    pub fn stats(&self) -> WorkerStats {
        self.poster.stats
    }

    /// The read handle alone.
    pub fn reader(&self) -> &FdbReader {
        &self.reader
    }
}

impl std::fmt::Debug for FdbWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FdbWorker").field("stats", &self.poster.stats).finish()
    }
}

impl Poster {
    fn new_second(&mut self, now_s: u64, removals: u64) {
        if now_s != self.posted_s || removals != self.posted_removals {
            self.posted.clear();
            self.posted_s = now_s;
            self.posted_removals = removals;
        }
    }

    /// Posts `key` seen on `port` unless it was posted for that port this
    /// second. A full filter or a full queue drops the event and counts it.
    fn post(&mut self, key: FdbKey, port: PortId) {
        match self.posted.get(&key) {
            Some(p) if *p == port => return,
            Some(_) => {}
            None if self.posted.len() >= self.posted_cap => {
                self.stats.events_suppressed += 1;
                return;
            }
            None => {}
        }
        self.posted.insert(key, port);
        match self.tx.push(FdbEvent { key, port, at_s: self.posted_s }) {
            Ok(()) => self.stats.events_posted += 1,
            Err(_) => self.stats.events_dropped += 1,
        }
    }
}

/// One burst of frames under one guard.
pub struct Burst<'a> {
    guard: FdbGuard<'a>,
    poster: &'a mut Poster,
    now_s: u64,
}

impl Burst<'_> {
    /// Handles one frame: learns its source (posts an event when the
    /// source is new, has moved, or was last seen before this second and
    /// was not posted yet this second) and returns the forwarding
    /// decision, counting it. Never blocks.
    #[inline]
    pub fn forward(&mut self, ingress: PortId, src: Mac, dst: Mac, vlan: VlanId) -> Decision {
        self.learn(ingress, src, vlan);
        self.decide(ingress, dst, vlan)
    }

    /// The deciding half of [`forward`](Self::forward) alone (a port that
    /// does not learn), counted as `forward` counts it.
    #[inline]
    pub fn decide(&mut self, ingress: PortId, dst: Mac, vlan: VlanId) -> Decision {
        let d = self.guard.decide(ingress, dst, vlan);
        let s = &mut self.poster.stats;
        s.frames += 1;
        match d {
            Decision::Unicast(_) => s.unicast += 1,
            Decision::Flood => s.flooded += 1,
            Decision::Drop(DropReason::Reserved) => s.dropped_reserved += 1,
            Decision::Drop(DropReason::SamePort) => s.same_port += 1,
        }
        d
    }

    /// The learning half of [`forward`](Self::forward) alone.
    #[inline]
    pub fn learn(&mut self, ingress: PortId, src: Mac, vlan: VlanId) {
        if !src.is_learnable_source() {
            self.poster.stats.source_not_learnable += 1;
            return;
        }
        match self.guard.lookup(src, vlan) {
            // A static entry never changes, and one that does not move
            // learns nothing from another port.
            Some(e) if e.is_static() || (!e.kind.moves() && e.port != ingress) => {}
            Some(e) if e.port == ingress && e.last_seen_s >= self.now_s => {}
            _ => self.poster.post(FdbKey::new(src, vlan), ingress),
        }
    }

    /// The table as this burst sees it.
    pub fn table(&self) -> &Table {
        &self.guard
    }
}
