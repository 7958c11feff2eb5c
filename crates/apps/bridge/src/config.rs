//! What a bridge is made of: its member ports, its workers and the CPUs
//! they are pinned to, the MAC table's limits, VLAN filtering, and the
//! transmit-queue choice. [`BridgeConfig::validate`] says what is wrong
//! with a configuration before anything is opened.

use crate::api::PortSpec;
pub use crate::error::ConfigError;
pub use crate::portconf::{PortConf, PortFlags, PortState, PortVlans, VlanProtocol};
use std::collections::BTreeMap;

pub use crate::error::{MAX_BURST, MAX_PORTS, MAX_RX_COPY_THRESHOLD, MAX_WORKERS};

/// The workers' default nice value: a bridge on a shared machine (batch
/// jobs, builds) keeps forwarding as the kernel's softirq forwarding would;
/// measured under two busy loops on 2 CPUs, a worker at 0 was starved long
/// enough for its AF_XDP ring to overflow at test rates.
pub const DEFAULT_WORKER_NICE: i8 = -10;

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
    /// Learned entries in the bridge (default 65,536; 0: no limit of its
    /// own, the table's bound of 2^24 still holds); beyond it nothing new
    /// is learned and unknown destinations flood.
    pub max_learned: usize,
    /// Learned entries per port (default 0: no limit of its own, the
    /// bridge's binds); a port's `max_learned` flag overrides it.
    pub max_learned_per_port: usize,
    /// Frames up to this many bytes are copied out of the receive buffer
    /// at once (default 256, at most [`MAX_RX_COPY_THRESHOLD`]).
    pub rx_copy_threshold: usize,
    /// Transmit-queue choice (default [`TxQueue::Cpu`]).
    pub tx_queue: TxQueue,
    /// VLAN filtering: the VLAN of a frame is its tag, or the ingress
    /// port's PVID when untagged or priority-tagged; it must be admitted
    /// by the ingress and the egress port. Off (the default): tags are
    /// carried through untouched and every frame is in one learning
    /// domain (VLAN 0). Can be switched at run time.
    pub vlan_filtering: bool,
    /// The tag the bridge reads and writes with VLAN filtering (default
    /// 802.1Q); an outer tag of the other protocol is payload.
    pub vlan_protocol: VlanProtocol,
    /// The PVID a port gets when `port_vlans` does not name it (default
    /// 1, member untagged, as Linux's `default_pvid`; `None`: none).
    pub default_pvid: Option<u16>,
    /// Per-interface VLANs; a port not named gets `default_pvid`. Kept
    /// while filtering is off, applied when it is on.
    pub port_vlans: BTreeMap<String, PortVlans>,
    /// Per-interface flags and state; a port not named gets
    /// [`PortFlags::default`].
    pub port_flags: BTreeMap<String, PortFlags>,
    /// Frames taken from one receive queue at once (default 32, at most
    /// [`MAX_BURST`]).
    pub burst: usize,
    /// Nice value (-20..=19) each worker thread sets for itself when it
    /// starts (`setpriority` on the thread), so forwarding keeps its CPU
    /// against other work there as the kernel's own forwarding (softirq)
    /// does (default [`DEFAULT_WORKER_NICE`]; `None`: inherited). A value
    /// the system refuses (raising priority needs CAP_SYS_NICE) leaves the
    /// thread as it was.
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
            max_learned_per_port: 0,
            rx_copy_threshold: 256,
            tx_queue: TxQueue::Cpu,
            vlan_filtering: false,
            vlan_protocol: VlanProtocol::Dot1Q,
            default_pvid: Some(1),
            port_vlans: BTreeMap::new(),
            port_flags: BTreeMap::new(),
            burst: 32,
            worker_nice: Some(DEFAULT_WORKER_NICE),
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
            if v > flowsteer_fdb::MAX_CAPACITY {
                return Err(ConfigError::BadLimit(what));
            }
        }
        if let Some(n) = self.worker_nice.filter(|n| !(-20..=19).contains(n)) {
            return Err(ConfigError::BadNice(n));
        }
        if self.rx_copy_threshold > MAX_RX_COPY_THRESHOLD {
            return Err(ConfigError::BadRxCopyThreshold(self.rx_copy_threshold));
        }
        if let Some(name) = self.port_vlans.keys().find(|n| !self.ports.iter().any(|p| &p.iface == *n)) {
            return Err(ConfigError::VlansForUnknownPort(name.clone()));
        }
        if let Some(name) = self.port_flags.keys().find(|n| !self.ports.iter().any(|p| &p.iface == *n)) {
            return Err(ConfigError::FlagsForUnknownPort(name.clone()));
        }
        if let Some(p) = self.default_pvid.filter(|p| *p == 0 || *p > 4094) {
            return Err(ConfigError::BadDefaultPvid(p));
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

    /// The VLANs of `iface` (its own, or the default PVID's).
    pub fn vlans_of(&self, iface: &str) -> PortVlans {
        self.port_vlans.get(iface).cloned().unwrap_or_else(|| PortVlans::with_pvid(self.default_pvid))
    }

    /// The configuration `iface` starts with.
    pub fn conf_of(&self, iface: &str) -> PortConf {
        PortConf { flags: self.port_flags.get(iface).copied().unwrap_or_default(), vlans: self.vlans_of(iface) }
    }

    /// The MAC table's limit for `n` (0: the table's bound).
    pub fn limit(n: usize) -> usize {
        if n == 0 {
            flowsteer_fdb::MAX_CAPACITY
        } else {
            n
        }
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
        assert_eq!(BridgeConfig { max_learned: 0, ..two() }.validate(), Ok(()), "0: no limit");
        assert_eq!(
            BridgeConfig { max_learned: (1 << 24) + 1, ..two() }.validate(),
            Err(ConfigError::BadLimit("max_learned"))
        );
        assert_eq!(
            BridgeConfig { default_pvid: Some(4095), ..two() }.validate(),
            Err(ConfigError::BadDefaultPvid(4095))
        );
        let mut vl = two();
        vl.port_vlans.insert("a".into(), PortVlans::parse("10").unwrap());
        assert_eq!(vl.validate(), Ok(()), "VLANs are kept without filtering");
        vl.port_flags.insert("zz".into(), PortFlags::default());
        assert_eq!(vl.validate(), Err(ConfigError::FlagsForUnknownPort("zz".into())));
        vl.port_flags.clear();
        vl.vlan_filtering = true;
        assert_eq!(vl.validate(), Ok(()));
        assert_eq!(vl.conf_of("b").vlans, PortVlans::with_pvid(Some(1)));
        assert_eq!(BridgeConfig { default_pvid: None, ..two() }.conf_of("b").vlans.pvid, None);
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
    fn choices_parse() {
        assert_eq!("flow".parse::<TxQueue>(), Ok(TxQueue::Flow));
        assert_eq!("xdp".parse::<FastPath>(), Ok(FastPath::Xdp));
        assert!("tc2".parse::<FastPath>().is_err());
        assert!("queue".parse::<TxQueue>().is_err());
    }
}
