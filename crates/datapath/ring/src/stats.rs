//! The ring's shared counters and [`RingStats`], the read-only view of them
//! that other threads (stats export, RFS) hold.
//!
//! Every counter that a different core writes sits on its own 128-byte line
//! ([`Line`]): 64-byte lines plus the adjacent-line prefetcher make 128 bytes
//! the unit of false sharing on x86 (the same reason `crossbeam_utils::CachePadded`
//! and DPDK's `RTE_CACHE_GUARD` use 128).

use crate::sync::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// A value alone on a 128-byte cache-line pair.
#[repr(C, align(128))]
pub(crate) struct Line<T>(pub(crate) T);

/// `Counters::closed` bit: the [`Producer`](crate::Producer) was dropped.
pub(crate) const PRODUCER_GONE: u8 = 1;
/// `Counters::closed` bit: the [`Consumer`](crate::Consumer) was dropped.
pub(crate) const CONSUMER_GONE: u8 = 2;

/// The counters both sides and any number of observers share.
///
/// Writers: `tail` and `wmark` only by the producer; `head` and `done` only
/// by the consumer; `closed` by whichever side is dropped. Everything else
/// is read-only after construction.
#[repr(C)]
pub(crate) struct Counters {
    /// Read-only after construction (shares its line with nothing hot).
    pub(crate) capacity: Line<usize>,
    /// Items ever enqueued. Producer stores (Release), everybody loads.
    pub(crate) tail: Line<AtomicU64>,
    /// Items ever dequeued. Consumer stores (Release), everybody loads.
    pub(crate) head: Line<AtomicU64>,
    /// Items ever *processed* (`done <= head`). Consumer stores (Release).
    pub(crate) done: Line<AtomicU64>,
    /// Highest length the producer saw right after a push (Relaxed).
    pub(crate) wmark: Line<AtomicUsize>,
    /// `PRODUCER_GONE | CONSUMER_GONE` bits, set on drop (Release).
    pub(crate) closed: Line<AtomicU8>,
}

impl Counters {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: Line(capacity),
            tail: Line(AtomicU64::new(0)),
            head: Line(AtomicU64::new(0)),
            done: Line(AtomicU64::new(0)),
            wmark: Line(AtomicUsize::new(0)),
            closed: Line(AtomicU8::new(0)),
        }
    }
}

/// A cheap, cloneable, read-only view of one ring's counters, for threads
/// other than the producer and the consumer (stats export, the RFS
/// "has the old queue drained" rule, `netstat -Q`-style `Len`/`WMark`).
///
/// Thread safety: `Clone + Send + Sync`; every method is a plain atomic load
/// and never blocks or writes. Holding a `RingStats` keeps the counters (not
/// the slots) alive after both sides are dropped.
///
/// All values are snapshots: by the time the caller looks, the producer and
/// consumer may have moved on. `head <= tail` and `done <= head` always hold
/// for values read by the same call, and all three only grow.
#[derive(Clone)]
pub struct RingStats {
    pub(crate) counters: std::sync::Arc<Counters>,
}

impl RingStats {
    /// Total items ever enqueued (monotonic).
    ///
    /// Acquire: pairs with the producer's Release store, so whatever the
    /// producer did before enqueueing item `tail - 1` is visible to the caller.
    pub fn tail(&self) -> u64 {
        self.counters.tail.0.load(Ordering::Acquire)
    }

    /// Total items ever dequeued (monotonic).
    ///
    /// Acquire: pairs with the consumer's Release store; the consumer has
    /// finished *reading* every slot below `head` (not necessarily processing
    /// the items; see [`done`](Self::done)).
    pub fn head(&self) -> u64 {
        self.counters.head.0.load(Ordering::Acquire)
    }

    /// Total items the consumer has marked processed (monotonic, `<= head`),
    /// see [`Consumer::set_processed`](crate::Consumer::set_processed).
    ///
    /// Acquire: pairs with the consumer's Release store, so once a caller sees
    /// `done() >= n` it also sees every side effect of processing items
    /// `0..n` (the RFS rule: a flow may move to another worker once the old
    /// worker's `done` passed the flow's last enqueued position).
    pub fn done(&self) -> u64 {
        self.counters.done.0.load(Ordering::Acquire)
    }

    /// Items in the ring now (enqueued, not yet dequeued), `0..=capacity`.
    ///
    /// Relaxed loads: a number for display, nothing is dereferenced on its
    /// strength. Head is loaded before tail so the difference is never
    /// negative; it is clamped to the capacity because the producer may run
    /// ahead between the two loads.
    pub fn len(&self) -> usize {
        let head = self.counters.head.0.load(Ordering::Relaxed);
        let tail = self.counters.tail.0.load(Ordering::Relaxed);
        let len = tail.saturating_sub(head);
        usize::try_from(len).map_or(self.capacity(), |l| l.min(self.capacity()))
    }

    /// True when [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Usable slots (the requested capacity rounded up to a power of two).
    pub fn capacity(&self) -> usize {
        self.counters.capacity.0
    }

    /// The highest length the producer observed right after a push or burst
    /// (`netstat -Q` `WMark`). Exact, not sampled: see the crate's design
    /// note for how it stays cheap.
    pub fn high_watermark(&self) -> usize {
        self.counters.wmark.0.load(Ordering::Relaxed)
    }

    /// True once the producer or the consumer has been dropped.
    pub fn is_abandoned(&self) -> bool {
        self.counters.closed.0.load(Ordering::Acquire) != 0
    }
}

impl std::fmt::Debug for RingStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingStats")
            .field("tail", &self.tail())
            .field("head", &self.head())
            .field("done", &self.done())
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("high_watermark", &self.high_watermark())
            .field("abandoned", &self.is_abandoned())
            .finish()
    }
}
