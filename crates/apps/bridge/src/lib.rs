//! flowsteer-bridge: an MP-safe L2 learning bridge over live ports.
//!
//! [`api`] holds what the bridge's runtime, its control socket
//! ([`ctl`]) and its metrics endpoint ([`metrics`]) share: the run-time
//! requests and their answers, and the counters (schema
//! [`api::STATS_SCHEMA`]).
#![warn(missing_docs)]

pub mod api;
pub mod ctl;
pub mod error;
pub mod metrics;

pub use api::{BridgeStats, Control, FdbRow, PortKind, PortSpec, Request, Response};
pub use error::BridgeError;
