//! flowsteer-steer: which worker handles a packet, and when a flow may move.
//!
//! Stage 3 of the packet's path (source -> parse -> hash -> **steer** ->
//! hand-off -> worker). Pure: no threads, clocks or sockets. The runtime
//! (`flowsteer-engine`) calls these from its receive threads; the
//! deterministic simulation calls the same code.
//!
//! * [`cpuset`]: CPU sets in the sysfs hex bitmap format (`rps_cpus`).
//! * [`steer`]: the three policies — RSS (bucket map), RPS (CPU set per
//!   receive queue, `(hash * n) >> 32`), RFS (desired-CPU table plus the
//!   per-queue current-CPU table with queue-tail counters) — and the drain
//!   rule that keeps a flow in order when its worker changes (after Linux RFS).
//! * [`dispatch`]: FreeBSD netisr dispatch policies (direct, deferred, hybrid).
//! * [`rebalance`]: move buckets from an overloaded worker to a lighter one.
#![forbid(unsafe_code)]

pub mod cpuset;
pub mod dispatch;
pub mod rebalance;
pub mod steer;

use cpuset::CpuSet;

/// Why a policy name or an RPS set was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SteerError {
    /// [`steer::Policy::parse`]: not rss, rps or rfs.
    #[error("unknown steering policy '{0}' (expected rss, rps or rfs)")]
    UnknownPolicy(String),
    /// [`dispatch::Dispatch::parse`]: not direct, deferred or hybrid.
    #[error("unknown dispatch policy '{0}' (expected direct, deferred or hybrid)")]
    UnknownDispatch(String),
    /// [`steer::rps_workers`]: the set names a CPU that runs no worker.
    #[error("RPS mask {set} names CPU {cpu}, which runs no worker (workers on CPUs {workers:?})")]
    RpsCpuNotWorker {
        set: CpuSet,
        cpu: u32,
        /// The CPUs the workers run on.
        workers: Vec<u32>,
    },
}

/// A worker (one per core), numbered 0..workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub u16);

impl WorkerId {
    /// "No worker" in the steering tables.
    pub const NONE: WorkerId = WorkerId(u16::MAX);

    pub fn is_none(self) -> bool {
        self == WorkerId::NONE
    }

    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Most workers an engine may run.
pub const MAX_WORKERS: usize = 1024;
