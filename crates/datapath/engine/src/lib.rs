//! flowsteer-engine: the steering runtime.
//!
//! Stages 4-6 of the packet's path (hand-off -> worker -> sink). One
//! [`lcore::Lcore`] per worker core: it polls its receive queues (receive
//! side: parse, hash, steer, hand off in bursts over bounded SPSC queues)
//! and drains the queues addressed to it (worker side: flow table, the
//! built-in application, order check). [`runtime`] runs one pinned thread
//! per lcore; [`sim`] drives the same lcores from one thread with a fake
//! clock and a seeded schedule, so steering, RFS moves and rebalancing are
//! tested exactly.
#![forbid(unsafe_code)]

/// Cache lines per packet on the worker, before and after the flow table
/// and pipeline built for a million flows.
#[doc = include_str!("cache_lines.md")]
pub mod cache_lines {}
pub mod carry;
pub mod counters;
pub mod desc;
pub mod dest;
pub mod drops;
pub mod engine;
mod error;
pub mod fraghold;
mod fragsteer;
pub mod ingress;
pub mod lcore;
mod limits;
pub mod order;
pub mod ringsource;
pub mod runtime;
pub mod sim;
pub mod source;

pub use counters::Snapshot;
pub use dest::DestFilter;
pub use drops::{DropCounts, DropReason};
pub use engine::{Engine, EngineConfig, EngineError};
pub use ingress::{Ingress, InterfaceCounts, SocketDrops};
