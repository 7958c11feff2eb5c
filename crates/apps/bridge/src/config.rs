//! What a bridge is made of: its member ports, its workers and the CPUs
//! they are pinned to, the MAC table's limits, VLAN filtering, and the
//! transmit-queue choice. [`BridgeConfig::validate`] says what is wrong
//! with a configuration before anything is opened.

use crate::api::PortSpec;
pub use crate::error::ConfigError;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::error::{MAX_BURST, MAX_PORTS, MAX_RX_COPY_THRESHOLD, MAX_WORKERS};

/// Which transmit queue of the egress port a worker uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxQueue {
    /// The worker's own queue on the egress port (the one with the
    /// worker's index): each worker transmits on its own queue, no two
    /// workers share one. The default.
    #[default]
    Cpu,
    /// The egress queue with the index of the receive queue the frame came
    /// in on: RSS chose that receive queue by flow, so one flow keeps one
    /// transmit queue and its order. The worker owns that queue on every
    /// AF_XDP port (worker w owns queues q with q % workers == w), so it
    /// still transmits without a lock; when the egress port has no such
    /// queue, the worker's own queue is used. AF_PACKET ports leave the
    /// choice to the kernel (XPS), whatever this says.
    Flow,
}

impl std::str::FromStr for TxQueue {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(TxQueue::Cpu),
            "flow" => Ok(TxQueue::Flow),
            _ => Err(ConfigError::BadTxQueue(s.to_string())),
        }
    }
}

/// Where learned unicast is forwarded: by a program in the kernel on
/// each member port (user space keeps learning, flooding, every drop and
/// control), or by the workers alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FastPath {
    /// The fastest path that is correct for each port: XDP on AF_XDP
    /// ports (`XDP_REDIRECT` through a device map), none on AF_PACKET ports
    /// and none with VLAN filtering. The default.
    #[default]
    Auto,
    /// XDP on every AF_XDP port; a configuration the XDP fast path cannot
    /// serve (VLAN filtering, no AF_XDP port) is an error.
    Xdp,
    /// The workers forward everything (the reference path).
    Off,
}

impl std::str::FromStr for FastPath {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(FastPath::Auto),
            "xdp" => Ok(FastPath::Xdp),
            "off" => Ok(FastPath::Off),
            _ => Err(ConfigError::BadFastPath(s.to_string())),
        }
    }
}

/// One port's VLAN membership (with VLAN filtering on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortVlans {
    /// VLAN ids (1..=4094) a tagged frame may carry in or out of the port.
    pub allowed: BTreeSet<u16>,
    /// The VLAN of untagged frames coming in (and sent out untagged);
    /// `None`: untagged frames are dropped (`vlan`).
    pub pvid: Option<u16>,
}

impl Default for PortVlans {
    /// VLAN 1 untagged, as Linux's bridge does.
    fn default() -> Self {
        PortVlans { allowed: BTreeSet::new(), pvid: Some(1) }
    }
}

impl PortVlans {
    /// Parses `VIDS[:pvid=N]`: `10,20-22:pvid=10`, `100`, `:pvid=1`.
    pub fn parse(s: &str) -> Result<PortVlans, ConfigError> {
        let bad = || ConfigError::BadVlans(s.to_string());
        let (vids, pvid) = match s.split_once(":pvid=") {
            Some((v, p)) => (v, Some(p.parse::<u16>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let mut allowed = BTreeSet::new();
        for part in vids.split(',').filter(|p| !p.is_empty()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<u16>().map_err(|_| bad())?, b.parse::<u16>().map_err(|_| bad())?),
                None => {
                    let v = part.parse::<u16>().map_err(|_| bad())?;
                    (v, v)
                }
            };
            if a == 0 || b > 4094 || a > b {
                return Err(bad());
            }
            allowed.extend(a..=b);
        }
        if pvid.is_some_and(|p| p == 0 || p > 4094) {
            return Err(bad());
        }
        Ok(PortVlans { allowed, pvid })
    }

    /// Whether frames of `vid` may pass this port (tagged, or its PVID).
    pub fn admits(&self, vid: u16) -> bool {
        self.pvid == Some(vid) || self.allowed.contains(&vid)
    }
}

/// A bridge's configuration. `Default` gives the documented defaults and
/// no ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    /// Member ports (at least two, each interface once, at most [`MAX_PORTS`]).
    pub ports: Vec<PortSpec>,
    /// Worker threads (default 1, at most [`MAX_WORKERS`]).
    pub workers: usize,
    /// CPUs to pin worker i to (`cpus[i % len]`); empty: not pinned.
    pub cpus: Vec<u32>,
    /// Seconds a learned entry lives without being seen (default 300).
    pub ageing_s: u64,
    /// Learned entries in the bridge (default 65,536); beyond it nothing
    /// new is learned and unknown destinations flood.
    pub max_learned: usize,
    /// Learned entries per port (default 65,536, the bridge's limit).
    pub max_learned_per_port: usize,
    /// Frames up to this many bytes are copied out of the receive buffer
    /// at once (default 256, at most [`MAX_RX_COPY_THRESHOLD`]).
    pub rx_copy_threshold: usize,
    /// Transmit-queue choice (default [`TxQueue::Cpu`]).
    pub tx_queue: TxQueue,
    /// VLAN filtering: the VLAN of a frame is its tag, or the ingress
    /// port's PVID when untagged; it must be admitted by the ingress and
    /// the egress port. Off (the default): tags are carried through
    /// untouched and every frame is in one learning domain (VLAN 0).
    pub vlan_filtering: bool,
    /// Per-interface VLANs (with `vlan_filtering`); a port not named gets
    /// [`PortVlans::default`] (VLAN 1 untagged).
    pub port_vlans: BTreeMap<String, PortVlans>,
    /// Frames taken from one receive queue at once (default 32, at most
    /// [`MAX_BURST`]).
    pub burst: usize,
    /// Nice value (-20..=19) each worker thread sets for itself when it
    /// starts (`setpriority` on the thread), so forwarding keeps its CPU
    /// against other work there as the kernel's own forwarding (softirq)
    /// does; `None` (the default): inherited. A value the system refuses
    /// (raising priority needs CAP_SYS_NICE) leaves the thread as it was.
    pub worker_nice: Option<i8>,
    /// Where learned unicast is forwarded (default [`FastPath::Auto`]).
    pub fast_path: FastPath,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            ports: Vec::new(),
            workers: 1,
            cpus: Vec::new(),
            ageing_s: 300,
            max_learned: 65_536,
            max_learned_per_port: 65_536,
            rx_copy_threshold: 256,
            tx_queue: TxQueue::Cpu,
            vlan_filtering: false,
            port_vlans: BTreeMap::new(),
            burst: 32,
            worker_nice: None,
            fast_path: FastPath::Auto,
        }
    }
}

impl BridgeConfig {
    /// Checks every value; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ports.len() < 2 {
            return Err(ConfigError::TooFewPorts(self.ports.len()));
        }
        if self.ports.len() > MAX_PORTS {
            return Err(ConfigError::TooManyPorts(self.ports.len()));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if self.ports[..i].iter().any(|q| q.iface == p.iface) {
                return Err(ConfigError::DuplicateInterface(p.iface.clone()));
            }
        }
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(ConfigError::BadWorkers(self.workers));
        }
        if self.burst == 0 || self.burst > MAX_BURST {
            return Err(ConfigError::BadBurst(self.burst));
        }
        if self.ageing_s == 0 {
            return Err(ConfigError::BadAgeing);
        }
        for (what, v) in [("max_learned", self.max_learned), ("max_learned_per_port", self.max_learned_per_port)] {
            if v == 0 || v > flowsteer_fdb::MAX_CAPACITY {
                return Err(ConfigError::BadLimit(what));
            }
        }
        if let Some(n) = self.worker_nice.filter(|n| !(-20..=19).contains(n)) {
            return Err(ConfigError::BadNice(n));
        }
        if self.rx_copy_threshold > MAX_RX_COPY_THRESHOLD {
            return Err(ConfigError::BadRxCopyThreshold(self.rx_copy_threshold));
        }
        if !self.port_vlans.is_empty() && !self.vlan_filtering {
            return Err(ConfigError::VlansWithoutFiltering);
        }
        if let Some(name) = self.port_vlans.keys().find(|n| !self.ports.iter().any(|p| &p.iface == *n)) {
            return Err(ConfigError::VlansForUnknownPort(name.clone()));
        }
        if self.fast_path == FastPath::Xdp {
            if self.vlan_filtering {
                return Err(ConfigError::FastPath("the XDP fast path keys on VLAN 0: not with VLAN filtering"));
            }
            if !self.ports.iter().any(|p| p.kind == crate::api::PortKind::Afxdp) {
                return Err(ConfigError::FastPath("the XDP fast path needs afxdp: ports"));
            }
        }
        Ok(())
    }

    /// The VLANs of `iface` (its own, or the default).
    pub fn vlans_of(&self, iface: &str) -> PortVlans {
        self.port_vlans.get(iface).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> BridgeConfig {
        BridgeConfig {
            ports: vec![PortSpec::parse("afxdp:a").unwrap(), PortSpec::parse("afpacket:b").unwrap()],
            ..BridgeConfig::default()
        }
    }

    #[test]
    fn validate_names_what_is_wrong() {
        assert_eq!(two().validate(), Ok(()));
        let one = BridgeConfig { ports: two().ports[..1].to_vec(), ..two() };
        assert_eq!(one.validate(), Err(ConfigError::TooFewPorts(1)));
        let mut dup = two();
        dup.ports.push(PortSpec::parse("afpacket:a").unwrap());
        assert_eq!(dup.validate(), Err(ConfigError::DuplicateInterface("a".into())));
        assert_eq!(BridgeConfig { workers: 0, ..two() }.validate(), Err(ConfigError::BadWorkers(0)));
        assert_eq!(BridgeConfig { burst: 0, ..two() }.validate(), Err(ConfigError::BadBurst(0)));
        assert_eq!(BridgeConfig { worker_nice: Some(-21), ..two() }.validate(), Err(ConfigError::BadNice(-21)));
        assert_eq!(BridgeConfig { worker_nice: Some(-20), ..two() }.validate(), Ok(()));
        assert_eq!(BridgeConfig { ageing_s: 0, ..two() }.validate(), Err(ConfigError::BadAgeing));
        assert_eq!(BridgeConfig { max_learned: 0, ..two() }.validate(), Err(ConfigError::BadLimit("max_learned")));
        let mut vl = two();
        vl.port_vlans.insert("a".into(), PortVlans::parse("10").unwrap());
        assert_eq!(vl.validate(), Err(ConfigError::VlansWithoutFiltering));
        vl.vlan_filtering = true;
        assert_eq!(vl.validate(), Ok(()));
        vl.port_vlans.insert("zz".into(), PortVlans::default());
        assert_eq!(vl.validate(), Err(ConfigError::VlansForUnknownPort("zz".into())));
        vl.port_vlans.clear();
        assert!(matches!(BridgeConfig { fast_path: FastPath::Xdp, ..vl }.validate(), Err(ConfigError::FastPath(_))));
        let packet = BridgeConfig {
            ports: vec![PortSpec::parse("afpacket:a").unwrap(), PortSpec::parse("afpacket:b").unwrap()],
            fast_path: FastPath::Xdp,
            ..two()
        };
        assert!(matches!(packet.validate(), Err(ConfigError::FastPath(_))));
        assert_eq!(BridgeConfig { fast_path: FastPath::Xdp, ..two() }.validate(), Ok(()));
    }

    #[test]
    fn vlan_lists_parse() {
        let v = PortVlans::parse("10,20-22:pvid=10").unwrap();
        assert_eq!(v.allowed.iter().copied().collect::<Vec<_>>(), vec![10, 20, 21, 22]);
        assert_eq!(v.pvid, Some(10));
        assert!(v.admits(21) && v.admits(10) && !v.admits(1));
        assert_eq!(PortVlans::parse("100").unwrap().pvid, None);
        assert_eq!(PortVlans::parse(":pvid=5").unwrap().allowed.len(), 0);
        for bad in ["0", "4095", "x", "5-3", "1:pvid=0", "1:pvid=x"] {
            assert!(PortVlans::parse(bad).is_err(), "{bad}");
        }
        assert_eq!("flow".parse::<TxQueue>(), Ok(TxQueue::Flow));
        assert_eq!("xdp".parse::<FastPath>(), Ok(FastPath::Xdp));
        assert!("tc2".parse::<FastPath>().is_err());
        assert!("queue".parse::<TxQueue>().is_err());
    }
}
