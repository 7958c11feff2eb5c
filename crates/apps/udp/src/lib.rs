//! RSS-aware UDP: a per-core echo/sink server over kernel sockets whose
//! sockets are tied to CPUs (SO_REUSEPORT + SO_INCOMING_CPU or a classic BPF
//! reuseport program, proved by a loopback self-test), and a load generator
//! whose flows can be planned onto chosen receive queues with the GF(2)
//! planner of `flowsteer-plan`, with byte-exact echo checks, loss, reordering
//! and round-trip percentiles; and the same echo on the AF_XDP dataplane
//! ([`xdp`]: one pinned thread per receive queue, replies rewritten in
//! place). [`afxdp`] sends the generator's flows as pre-built frames from
//! an AF_XDP socket through [`txloop`], the transmit loop the RFC 2544
//! harness's generator also runs.
//!
//! Libraries never print: every failure is a typed error ([`ClientError`],
//! [`ServerError`], [`SpreadError`]) whose message is one line saying what
//! to do. All `unsafe` lives in the private `sys` module.

pub mod afxdp;
pub mod client;
pub mod payload;
pub mod rate;
pub mod server;
pub mod spread;
mod sys;
pub mod track;
pub mod txloop;
pub mod xdp;

pub use client::{route_source, ClientConfig, ClientError, ClientReport, FlowReport, LatencySummary};
pub use flowsteer_plan::plan::PortRange;
pub use server::{
    BindMode, CoreStats, Counters, Reply, SelfTestReport, Server, ServerConfig, ServerError, ServerStats,
};
pub use spread::{plain_flows, spread_flows, FlowSpec, SpreadError};
/// The CPU the calling thread runs on (`sched_getcpu`), and pinning the
/// calling thread to one CPU.
pub use sys::{current_cpu, pin_to_cpu};

/// CPUs this process may run on (its affinity mask), in ascending order.
pub fn allowed_cpus() -> Result<Vec<u32>, ServerError> {
    sys::allowed_cpus().map_err(ServerError::Affinity)
}
