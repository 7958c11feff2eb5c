//! Why an engine could not be built.

use crate::limits::MAX_RX_QUEUES;
use flowsteer_flow::{FlowError, TimerError};
use flowsteer_reasm::ReasmConfigError;
use flowsteer_ring::RingError;
use flowsteer_steer::{SteerError, WorkerId, MAX_WORKERS};

/// Why an engine could not be built (or a name in its configuration was
/// not understood).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("at least one worker core is needed")]
    NoWorkers,
    #[error("{0} workers exceed the maximum {MAX_WORKERS}")]
    TooManyWorkers(usize),
    #[error("{0} receive queues: need 1..={MAX_RX_QUEUES}")]
    BadRxQueues(usize),
    /// The receive queue map has `entries` entries for `queues` queues.
    #[error("receive queue map: {entries} entries for {queues} queues")]
    RxqMapLen { entries: usize, queues: usize },
    /// The receive queue map names a worker that does not exist.
    #[error("receive queue map: worker {worker} does not exist ({workers} workers)")]
    RxqMapWorker { worker: WorkerId, workers: usize },
    #[error("RPS: {0}")]
    Rps(SteerError),
    /// One RPS mask per receive queue was expected.
    #[error("RPS: {masks} masks for {queues} receive queues")]
    RpsMasks { masks: usize, queues: u16 },
    #[error("queue: {0}")]
    Ring(RingError),
    #[error("flow table: {0}")]
    FlowTable(FlowError),
    #[error("reassembly: {0}")]
    Reasm(ReasmConfigError),
    /// The per-core timer wheel could not be built.
    #[error("timer wheel: {0:?}")]
    Timers(TimerError),
    #[error("{given} sources for {workers} workers")]
    Sources { given: usize, workers: usize },
    /// [`FragSteer::parse`]: not owner, rehash, local or off.
    #[error("unknown fragment policy '{0}' (expected owner, rehash, local or off)")]
    UnknownFragSteer(String),
}
