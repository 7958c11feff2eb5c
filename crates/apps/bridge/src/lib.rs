//! flowsteer-bridge: an MP-safe L2 learning bridge over live ports.
//!
//! The frame's path: a member port's receive queue ([`port`]: AF_XDP
//! sockets or AF_PACKET rings) -> the worker that owns the queue
//! ([`worker`]: parse [`frame`], learn and decide with the MAC table
//! `flowsteer-fdb`, VLAN filtering, MTU) -> the worker's own transmit
//! handle on each egress port, one batch per port per burst. The writer
//! thread ([`runtime`]) learns, ages, watches links and applies control
//! requests. Counters ([`counters`]) add up per port and per worker:
//! received = forwarded + flooded + dropped (by reason).
//!
//! Before a port is opened, [`admit`] checks that it is Ethernet and not a
//! loopback, and takes its lock (one bridge per interface, for as long as
//! it is a member).
//!
//! [`api`] holds what the bridge's runtime, its control socket
//! ([`ctl`]) and its metrics endpoint ([`metrics`]) share: the run-time
//! requests and their answers, and the counters (schema
//! [`api::STATS_SCHEMA`]).
//!
//! Capacities: at most [`config::MAX_PORTS`] ports, [`config::MAX_WORKERS`]
//! workers, [`port::MAX_QUEUES`] queues per AF_XDP port, bursts of at most
//! [`config::MAX_BURST`] frames; the MAC table's limits are
//! `flowsteer-fdb`'s (learned entries: default 65,536, full: nothing new is
//! learned, unknown destinations flood).
//!
//! Under Miri (outside CI, nightly): the stress test of the member list and
//! the MAC table under change (`src/worker/stress.rs`: real workers, fake
//! ports) runs with `cargo +nightly miri test -p flowsteer-bridge --lib
//! stress`, 12 writer rounds; it is slow: stopped after 30 minutes of test
//! on a loaded 2-CPU machine (after a 5-minute build) with no error found
//! and not finished (its workers forward without pause). The MAC table's own
//! stress test runs with `cargo +nightly miri test -p flowsteer-fdb --test
//! stress` (passes; 9 minutes of test on a loaded machine).
#![warn(missing_docs)]

pub mod admit;
pub mod api;
pub mod config;
pub mod counters;
pub mod ctl;
pub mod error;
pub mod frame;
pub mod metrics;
pub mod port;
pub mod portconf;
pub mod runtime;
mod shared;
mod worker;

pub use api::{BridgeStats, Control, FdbRow, LinkRow, PortKind, PortSpec, Request, Response, VlanMember, VlanRow};
pub use config::{BridgeConfig, ConfigError, FastPath, TxQueue};
pub use error::BridgeError;
pub use portconf::{PortConf, PortFlags, PortState, PortVlans, VlanProtocol};
pub use runtime::{Bridge, BridgeControl};
