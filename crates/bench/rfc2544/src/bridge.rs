//! The flowsteer bridge as a device under test: `flowsteer-bridge` started
//! in-process on the DUT namespace's two veth ends (`dut0`, `dut1`, or
//! others named with [`BridgeDut::start_on`]), over
//! AF_XDP or AF_PACKET ports, one worker pinned to the DUT's CPU at nice
//! [`WORKER_NICE`].
//!
//! The bridge is started by a thread that entered the DUT namespace (its
//! sockets, XDP programs and the netlink socket of its writer are opened
//! there; the threads it spawns inherit the namespace). [`BridgeDut`] stops
//! it when dropped: the workers are joined and the XDP programs detached
//! before the [`crate::dut::Topology`] removes the namespaces.
//!
//! [`DutCounters`] is the bridge's own count of one trial (a difference of
//! two snapshots), so a lossy trial can be told apart: dropped by the
//! kernel before the bridge's sockets, by the bridge (by reason), or not
//! sent out.

use std::collections::BTreeMap;

use flowsteer_bridge::{Bridge, BridgeConfig, BridgeStats, FastPath, PortKind, PortSpec};
use serde::Serialize;

use crate::Error;

/// The bridge worker's nice value: the kernel's DUTs forward in softirq,
/// ahead of every thread on their CPU; a userspace DUT sharing its CPU
/// with other work (a build) at the default nice 0 would get only its fair
/// share of it, so it is raised above that work.
pub const WORKER_NICE: i8 = -10;

/// A running bridge between `dut0` and `dut1` (or the ports of
/// [`BridgeDut::start_on`]); stopped on drop.
#[derive(Debug)]
pub struct BridgeDut {
    bridge: Option<Bridge>,
}

impl BridgeDut {
    /// Starts a bridge with ports `kind:dut0` and `kind:dut1` in namespace
    /// `ns`, its one worker pinned to `cpus[0]` when given.
    pub fn start(ns: &str, kind: PortKind, fast_path: FastPath, cpus: &[usize]) -> Result<BridgeDut, Error> {
        BridgeDut::start_on(ns, kind, fast_path, &["dut0", "dut1"], cpus)
    }

    /// As [`BridgeDut::start`], with ports `kind:IFACE` on `ifaces` (at
    /// least two interfaces of namespace `ns`).
    pub fn start_on(
        ns: &str,
        kind: PortKind,
        fast_path: FastPath,
        ifaces: &[&str],
        cpus: &[usize],
    ) -> Result<BridgeDut, Error> {
        let cfg = BridgeConfig {
            fast_path,
            ports: ifaces.iter().map(|iface| PortSpec { kind, iface: (*iface).into() }).collect(),
            workers: 1,
            cpus: cpus.iter().take(1).map(|&c| c as u32).collect(),
            worker_nice: Some(WORKER_NICE),
            burst: 64,
            ..BridgeConfig::default()
        };
        let ns = ns.to_string();
        let bridge = std::thread::Builder::new()
            .name("fs-2544-dut".into())
            .spawn(move || -> Result<Bridge, Error> {
                flowsteer_netns::enter(&ns)?;
                Bridge::start(cfg).map_err(|e| Error::Dut(e.to_string()))
            })
            .map_err(|e| Error::Thread(e.to_string()))?
            .join()
            .map_err(|_| Error::Thread("the thread starting the bridge panicked".into()))??;
        Ok(BridgeDut { bridge: Some(bridge) })
    }

    /// The bridge's counters now.
    pub fn stats(&self) -> Option<BridgeStats> {
        self.bridge.as_ref().map(Bridge::stats)
    }

    /// Stops the bridge (workers joined, XDP programs detached); done on
    /// drop too.
    pub fn stop(&mut self) -> Option<BridgeStats> {
        self.bridge.take().map(Bridge::stop)
    }
}

/// CPU time of this process's bridge workers so far, ns (the
/// `fs-bridge-w*` threads' `/proc/self/task/*/schedstat`, ns resolution;
/// the softirq work the kernel runs during their sendto, such as the veth
/// peer's receive, included unless the kernel accounts IRQ time apart).
pub fn worker_cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("fs-bridge-w")))
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

impl Drop for BridgeDut {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The bridge's own counts over one trial, summed over its ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DutCounters {
    /// Frames in (the kernel's drops before the bridge's sockets included).
    pub received: u64,
    /// Sent to one port (known unicast).
    pub forwarded: u64,
    /// Flooded.
    pub flooded: u64,
    /// Dropped on the way in, by reason (`kernel`: before the sockets).
    pub dropped: BTreeMap<String, u64>,
    /// Frames sent out.
    pub transmitted: u64,
    /// Frames that could not be sent out, by reason.
    pub tx_dropped: BTreeMap<String, u64>,
    /// received = forwarded + flooded + dropped held at the trial's end.
    pub conservation_ok: bool,
}

impl DutCounters {
    /// The counts between two snapshots of the same bridge.
    pub fn between(before: &BridgeStats, after: &BridgeStats) -> DutCounters {
        let sum = |s: &BridgeStats| {
            let mut c = DutCounters::default();
            for p in &s.ports {
                c.received += p.received;
                c.forwarded += p.forwarded;
                c.flooded += p.flooded;
                c.transmitted += p.transmitted;
                for (k, v) in &p.dropped {
                    *c.dropped.entry(k.clone()).or_default() += v;
                }
                for (k, v) in &p.tx_dropped {
                    *c.tx_dropped.entry(k.clone()).or_default() += v;
                }
            }
            c
        };
        let (b, a) = (sum(before), sum(after));
        let diff = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| {
            a.iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(b.get(k).copied().unwrap_or(0))))
                .filter(|(_, v)| *v > 0)
                .collect()
        };
        DutCounters {
            received: a.received.saturating_sub(b.received),
            forwarded: a.forwarded.saturating_sub(b.forwarded),
            flooded: a.flooded.saturating_sub(b.flooded),
            dropped: diff(&a.dropped, &b.dropped),
            transmitted: a.transmitted.saturating_sub(b.transmitted),
            tx_dropped: diff(&a.tx_dropped, &b.tx_dropped),
            conservation_ok: after.conservation_ok,
        }
    }
}
