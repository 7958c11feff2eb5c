//! What the bridge's threads share: the member-port list (replaced by the
//! writer, loaded by the workers once per loop), the counters, the MAC
//! table's counters and the stop flag.

use crate::api::FdbCounters;
use crate::config::{BridgeConfig, PortConf};
use crate::counters::WorkerCounters;
use crate::port::PortShared;
use arc_swap::ArcSwap;
use flowsteer_xsk::FastPathMaps;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One member port and its configuration in one version of the list.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub port: Arc<PortShared>,
    pub conf: Arc<PortConf>,
}

impl std::ops::Deref for Member {
    type Target = PortShared;
    fn deref(&self) -> &PortShared {
        &self.port
    }
}

/// The member ports as the workers see them (one version): a port's
/// flags, state or VLANs change by a new version of the list, so a worker
/// sees one consistent configuration for a whole burst.
#[derive(Debug, Default)]
pub(crate) struct PortList {
    pub version: u64,
    pub ports: Vec<Member>,
    /// VLAN filtering is on (it can be switched at run time).
    pub vlan_filtering: bool,
}

impl PortList {
    /// The member with port id `id`.
    pub fn get(&self, id: flowsteer_fdb::PortId) -> Option<&Member> {
        self.ports.iter().find(|m| m.id == id)
    }
}

/// What the threads of one bridge share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub cfg: BridgeConfig,
    pub start: Instant,
    pub stop: AtomicBool,
    pub ports: ArcSwap<PortList>,
    /// Every port the bridge had (members and removed ones), for counters.
    pub all_ports: Mutex<Vec<Arc<PortShared>>>,
    /// The port-list version each worker has taken.
    pub acks: Box<[AtomicU64]>,
    pub workers: Box<[WorkerCounters]>,
    /// The CPU each worker is pinned to (-1: none).
    pub cpus: Box<[AtomicI64]>,
    /// The MAC table's counters as of the writer's last tick.
    pub fdb: Mutex<FdbCounters>,
    /// The kernel fast path's maps (the MAC table's mirror, the port
    /// table), when any port has the XDP fast path; written by the writer.
    pub fast: Option<Arc<FastPathMaps>>,
    /// Why there is no fast path (for ports added later), when `fast` is None.
    pub fast_off: &'static str,
    /// Reads the ports' interface counters for `stats` (in the bridge's
    /// namespace); `None` when no netlink socket could be had.
    pub links: Mutex<Option<flowsteer_live::link::LinkReader>>,
}
