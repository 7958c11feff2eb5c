//! flowsteer-fdb: the bridge's MAC table (forwarding database), keyed by
//! (MAC, VLAN), read by every worker on every frame without a lock.
//!
//! # Design note
//!
//! ## Who does what
//!
//! * **Workers** (many, one [`FdbWorker`] each) take a guard once per burst
//!   ([`FdbWorker::burst`]), and for each frame learn its source and decide
//!   where it goes ([`Burst::forward`] -> [`Decision`]). A lookup is a hash
//!   probe in the published copy: no lock, no atomic read-modify-write.
//!   Learning never blocks: a worker posts a [`FdbEvent`] to the writer over
//!   its own bounded SPSC queue (`flowsteer-ring`); a full queue drops the
//!   event and counts it (`events_dropped`).
//! * **The writer** (one thread, [`FdbWriter`]) drains the queues
//!   ([`FdbWriter::drain`]), learns, refreshes, follows moves, ages
//!   ([`FdbWriter::age`], one O(n) pass, time passed in), flushes ports,
//!   holds static entries, and publishes a new version.
//!
//! Sans-IO: nothing here reads a clock, spawns a thread or touches a
//! socket. Seconds are arguments (`now_s`), threads are the caller's.
//!
//! ## Why `left-right`
//!
//! The table is read on every frame by every core and written by one
//! thread, in batches. `left-right` keeps two copies: readers use one while
//! the writer applies its operation log to the other, then swaps the
//! pointer. A reader enters with two increments of a counter on its own
//! cache line and a fence, once per guard (so once per burst of 32), and its
//! lookups are plain `HashMap` probes, wait-free; each reader owns its
//! handle, which fits pinned workers. `arc-swap` was the other candidate: a
//! published `Arc<HashMap>` snapshot is as cheap to read, but every learned
//! entry would mean cloning the whole table (64k entries) or a persistent
//! map with slower lookups; it fits the small, rarely changed member-port
//! list, not a table written on every learn. `left-right`'s costs, accepted:
//! two copies of the table (plus the writer's own authoritative map, so
//! three), and a publish that waits for readers still inside the old copy,
//! which is why a guard is never held across a blocking call.
//!
//! ## How old versions are reclaimed
//!
//! There is no freeing of versions: the two copies are reused. After the
//! swap, `WriteHandle::publish` reads every reader's epoch counter and
//! waits until each reader that was inside the old copy has left it (its
//! counter changed or it is outside any guard); only then does it apply the
//! log to that copy. A reader entering after the swap reads the new
//! pointer, after a fence that orders it behind its own epoch increment. So
//! no reader ever sees a copy being written, and an entry removed (aged,
//! flushed, port removed) is dropped from a copy only when no reader is in
//! it. This is the quiescent-state rule of RCU, NetBSD's `pserialize` and
//! DPDK's `rte_rcu_qsbr`, with the end of a guard as the quiescent state.
//!
//! ## Refresh rate
//!
//! A worker posts an event for a source only if the published entry is
//! missing, names another port, or was last seen before the current second,
//! and only if it has not posted that key for that port in the current
//! second (a per-worker filter of `posted_per_second` keys, cleared when the
//! second changes). So at most one event per entry per second per worker,
//! whatever the frame rate.
//!
//! ## Capacities
//!
//! | what | default | bound | when full |
//! |---|---|---|---|
//! | learned entries, bridge | 65,536 | 2^24 | nothing new learned, `not_learned_full`; known keep forwarding, unknown flood |
//! | learned entries, port | 65,536 | 2^24 | same |
//! | configured entries (static, sticky, external) | 4,096 | 2^24 | `add` returns `StaticFull` |
//! | event queue per worker | 1,024 | 2^24 | event dropped, `events_dropped` |
//! | keys posted per second per worker | 4,096 | 2^24 | event not posted, `events_suppressed` |
//! | move records | one per moved key with an entry | the table | removed with the entry |
//!
//! Memory: three maps of up to `max_learned + max_static` entries (24-byte
//! key+value plus hashbrown's control byte), about 2 MiB each at 65,536.
//!
//! ## API groups
//!
//! * Construction: [`fdb`] -> ([`FdbWriter`], one [`FdbWorker`] per worker).
//! * Read side: [`FdbWorker::burst`] -> [`Burst::forward`] / [`Burst::learn`];
//!   [`FdbReader::enter`] -> [`FdbGuard`] ([`Table::lookup`],
//!   [`Table::decide`]); [`is_reserved`].
//! * Write side: [`FdbWriter::drain`], [`FdbWriter::apply`],
//!   [`FdbWriter::age`], [`FdbWriter::flush_port`], [`FdbWriter::remove_port`],
//!   [`FdbWriter::add_static`], [`FdbWriter::remove`], [`FdbWriter::publish`].
//! * Counters: [`WorkerStats`] (per worker), [`FdbStats`] (writer),
//!   [`MoveRecord`] (per moved MAC).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod key;
mod table;
mod worker;
mod writer;

pub use error::{FdbError, MAX_CAPACITY};
pub use key::{is_reserved, Entry, EntryKind, FdbKey, Mac, PortId, VlanId};
pub use table::{Decision, DropReason, Op, Table};
pub use worker::{Burst, FdbEvent, FdbGuard, FdbReader, FdbWorker, WorkerStats};
pub use writer::{Changes, FdbConfig, FdbStats, FdbWriter, Flush, MoveRecord, MAX_PENDING_CHANGES};

/// Builds an empty table with its writer and `workers` worker handles,
/// each with its own event queue to the writer.
///
/// Errors: [`FdbError::BadCapacity`] when a capacity of `cfg` (or
/// `workers`) is 0 or above [`MAX_CAPACITY`].
pub fn fdb(cfg: FdbConfig, workers: usize) -> Result<(FdbWriter, Vec<FdbWorker>), FdbError> {
    for (what, v) in [
        ("max_learned", cfg.max_learned),
        ("max_learned_per_port", cfg.max_learned_per_port),
        ("max_static", cfg.max_static),
        ("event_queue", cfg.event_queue),
        ("posted_per_second", cfg.posted_per_second),
        ("workers", workers),
    ] {
        if v == 0 || v > MAX_CAPACITY {
            return Err(FdbError::BadCapacity(what));
        }
    }
    let initial = Table::with_capacity((cfg.max_learned + cfg.max_static).min(1 << 16));
    let (w, r) = left_right::new_from_empty::<Table, Op>(initial);
    let mut handles = Vec::with_capacity(workers);
    let mut queues = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tx, rx) = flowsteer_ring::channel(cfg.event_queue).map_err(|_| FdbError::BadCapacity("event_queue"))?;
        handles.push(FdbWorker::new(FdbReader { r: r.clone() }, tx, cfg.posted_per_second));
        queues.push(rx);
    }
    Ok((FdbWriter::new(cfg, w, queues), handles))
}
