//! A member port's run-time configuration, as Linux's bridge has it per
//! port (`bridge link set`, `bridge vlan`): the flags that say what the
//! port learns and floods, its state, and its VLANs. The writer replaces a
//! port's [`PortConf`] as a whole (with the member list, see `shared`), so
//! a worker sees one consistent version per burst.
//!
//! The meanings are Linux's:
//! * `learning`: sources seen on the port are learned (off: known entries
//!   stay and still forward, nothing new is learned there);
//! * `flood`, `mcast_flood`, `bcast_flood`: whether unknown unicast,
//!   multicast and broadcast frames are flooded *out of* the port (they
//!   act at egress, as Linux's `BR_FLOOD`, `BR_MCAST_FLOOD` and
//!   `BR_BCAST_FLOOD`); known unicast to the port is never affected;
//! * `isolated`: an isolated port's frames never go out of another
//!   isolated port (both directions); isolated and non-isolated ports talk
//!   as usual;
//! * `state` (802.1D): `forwarding` learns and forwards; `learning` learns
//!   but forwards nothing in or out; `listening`, `blocking` and
//!   `disabled` neither learn nor forward.

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A port's 802.1D state (`bridge link set dev IFACE state ...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortState {
    /// Neither learns nor forwards (Linux state 0).
    Disabled,
    /// Neither learns nor forwards (Linux state 1).
    Listening,
    /// Learns sources, forwards nothing (Linux state 2).
    Learning,
    /// Learns and forwards (Linux state 3). The default.
    #[default]
    Forwarding,
    /// Neither learns nor forwards (Linux state 4).
    Blocking,
}

impl PortState {
    /// Every state, in Linux's numbering (0..=4).
    pub const ALL: [PortState; 5] =
        [PortState::Disabled, PortState::Listening, PortState::Learning, PortState::Forwarding, PortState::Blocking];

    /// Sources seen on the port are learned.
    pub fn learns(self) -> bool {
        matches!(self, PortState::Learning | PortState::Forwarding)
    }

    /// Frames come in from and go out of the port.
    pub fn forwards(self) -> bool {
        self == PortState::Forwarding
    }

    /// The name `bridge link` prints and takes.
    pub fn name(self) -> &'static str {
        match self {
            PortState::Disabled => "disabled",
            PortState::Listening => "listening",
            PortState::Learning => "learning",
            PortState::Forwarding => "forwarding",
            PortState::Blocking => "blocking",
        }
    }
}

impl std::str::FromStr for PortState {
    type Err = ConfigError;
    /// A name (`blocking`) or Linux's number (`4`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PortState::ALL
            .iter()
            .enumerate()
            .find(|(i, st)| st.name() == s || i.to_string() == s)
            .map(|(_, st)| *st)
            .ok_or_else(|| ConfigError::BadPortState(s.to_string()))
    }
}

/// Which tag an 802.1Q-aware bridge reads and writes (`--vlan-protocol`).
/// A frame whose outer tag has the other TPID is untagged payload to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VlanProtocol {
    /// 802.1Q C-tags (TPID 0x8100). The default.
    #[default]
    #[serde(rename = "802.1q")]
    Dot1Q,
    /// 802.1ad S-tags (TPID 0x88a8), a provider bridge.
    #[serde(rename = "802.1ad")]
    Dot1Ad,
}

impl VlanProtocol {
    /// The tag protocol identifier.
    pub fn tpid(self) -> u16 {
        match self {
            VlanProtocol::Dot1Q => 0x8100,
            VlanProtocol::Dot1Ad => 0x88a8,
        }
    }

    /// `802.1q` or `802.1ad`.
    pub fn name(self) -> &'static str {
        match self {
            VlanProtocol::Dot1Q => "802.1q",
            VlanProtocol::Dot1Ad => "802.1ad",
        }
    }
}

impl std::str::FromStr for VlanProtocol {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "802.1q" => Ok(VlanProtocol::Dot1Q),
            "802.1ad" => Ok(VlanProtocol::Dot1Ad),
            _ => Err(ConfigError::BadVlanProtocol(s.to_string())),
        }
    }
}

/// A port's flags and state (`bridge link set dev IFACE ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortFlags {
    /// Learn sources seen on the port (default on).
    pub learning: bool,
    /// Flood unknown unicast out of the port (default on).
    pub flood: bool,
    /// Flood multicast out of the port (default on).
    pub mcast_flood: bool,
    /// Flood broadcast out of the port (default on).
    pub bcast_flood: bool,
    /// Isolated: no frame between it and another isolated port (default off).
    pub isolated: bool,
    /// The 802.1D state (default forwarding).
    pub state: PortState,
    /// Learned entries on the port: `None` the bridge's per-port default,
    /// `Some(0)` no limit of its own.
    pub max_learned: Option<usize>,
}

impl Default for PortFlags {
    fn default() -> Self {
        PortFlags {
            learning: true,
            flood: true,
            mcast_flood: true,
            bcast_flood: true,
            isolated: false,
            state: PortState::Forwarding,
            max_learned: None,
        }
    }
}

impl PortFlags {
    /// Sets the boolean flag `name`: `learning`, `flood`, `mcast_flood`,
    /// `bcast_flood` or `isolated`.
    pub fn set(&mut self, name: &str, on: bool) -> Result<(), ConfigError> {
        match name {
            "learning" => self.learning = on,
            "flood" => self.flood = on,
            "mcast_flood" => self.mcast_flood = on,
            "bcast_flood" => self.bcast_flood = on,
            "isolated" => self.isolated = on,
            _ => return Err(ConfigError::BadPortFlag(name.to_string())),
        }
        Ok(())
    }

    /// Sources seen on the port are learned now.
    pub fn learns(&self) -> bool {
        self.learning && self.state.learns()
    }

    /// Parses `NAME on|off,...,state S,max_learned N` words (the start-up
    /// form of `link set`): `learning=off,isolated=on,state=blocking`.
    pub fn parse(s: &str) -> Result<PortFlags, ConfigError> {
        let mut f = PortFlags::default();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| ConfigError::BadPortFlag(part.to_string()))?;
            f.apply(name, value)?;
        }
        Ok(f)
    }

    /// Sets one setting by name and value as `link set` takes them:
    /// a flag `on|off`, `state NAME`, `max_learned N` (0: no limit).
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        match name {
            "state" => self.state = value.parse()?,
            "max_learned" => {
                let n: usize = value.parse().map_err(|_| ConfigError::BadPortFlag(format!("{name} {value}")))?;
                if n > flowsteer_fdb::MAX_CAPACITY {
                    return Err(ConfigError::BadLimit("max_learned"));
                }
                self.max_learned = Some(n);
            }
            _ => {
                let on = match value {
                    "on" | "1" => true,
                    "off" | "0" => false,
                    _ => return Err(ConfigError::BadPortFlag(format!("{name} {value}: expected on or off"))),
                };
                self.set(name, on)?;
            }
        }
        Ok(())
    }
}

/// One port's VLAN membership (used while VLAN filtering is on; kept,
/// and changeable, while it is off).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortVlans {
    /// Member VLANs (1..=4094), each with whether its frames leave the
    /// port untagged (`true`) or tagged.
    pub members: BTreeMap<u16, bool>,
    /// The VLAN of untagged and priority-tagged frames coming in (a
    /// member); `None`: such frames are dropped (`vlan`).
    pub pvid: Option<u16>,
}

impl PortVlans {
    /// A port in VLAN `pvid` alone, untagged (Linux's default for a new
    /// port with `default_pvid` 1); `None` or 0: no VLAN at all.
    pub fn with_pvid(pvid: Option<u16>) -> PortVlans {
        match pvid.filter(|p| (1..=4094).contains(p)) {
            Some(p) => PortVlans { members: BTreeMap::from([(p, true)]), pvid: Some(p) },
            None => PortVlans::default(),
        }
    }

    /// Parses `VIDS[:pvid=N]`: `10,20-22:pvid=10`, `100`, `:pvid=1`. The
    /// PVID is a member and leaves untagged; the others leave tagged.
    pub fn parse(s: &str) -> Result<PortVlans, ConfigError> {
        let bad = || ConfigError::BadVlans(s.to_string());
        let (vids, pvid) = match s.split_once(":pvid=") {
            Some((v, p)) => (v, Some(p.parse::<u16>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let mut members = BTreeMap::new();
        for part in vids.split(',').filter(|p| !p.is_empty()) {
            let (a, b) = vid_range(part).ok_or_else(bad)?;
            members.extend((a..=b).map(|v| (v, false)));
        }
        if let Some(p) = pvid {
            if p == 0 || p > 4094 {
                return Err(bad());
            }
            members.insert(p, true);
        }
        Ok(PortVlans { members, pvid })
    }

    /// Whether frames of `vid` may pass this port.
    pub fn admits(&self, vid: u16) -> bool {
        self.members.contains_key(&vid)
    }

    /// Whether frames of `vid` leave this port untagged.
    pub fn untagged(&self, vid: u16) -> bool {
        self.members.get(&vid).copied().unwrap_or(false)
    }

    /// Adds (or changes) VLANs `vids` as `bridge vlan add` does: each a
    /// member, untagged or not; `pvid` makes the (single) VLAN the PVID,
    /// and re-adding the PVID without it clears the PVID.
    pub fn add(&mut self, vids: (u16, u16), pvid: bool, untagged: bool) {
        for v in vids.0..=vids.1 {
            self.members.insert(v, untagged);
            if pvid {
                self.pvid = Some(v);
            } else if self.pvid == Some(v) {
                self.pvid = None;
            }
        }
    }

    /// Removes VLANs `vids`; returns how many were members. Removing the
    /// PVID leaves the port without one.
    pub fn del(&mut self, vids: (u16, u16)) -> usize {
        let mut n = 0;
        for v in vids.0..=vids.1 {
            n += usize::from(self.members.remove(&v).is_some());
            if self.pvid == Some(v) {
                self.pvid = None;
            }
        }
        n
    }
}

/// `N` or `N-M` with 1 <= N <= M <= 4094.
pub fn vid_range(s: &str) -> Option<(u16, u16)> {
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (a.parse::<u16>().ok()?, b.parse::<u16>().ok()?),
        None => {
            let v = s.parse::<u16>().ok()?;
            (v, v)
        }
    };
    (a >= 1 && b <= 4094 && a <= b).then_some((a, b))
}

/// Everything about one member port that can change while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortConf {
    /// Flags and state.
    pub flags: PortFlags,
    /// VLAN membership.
    pub vlans: PortVlans,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_by_name_and_number() {
        assert_eq!("blocking".parse::<PortState>(), Ok(PortState::Blocking));
        assert_eq!("3".parse::<PortState>(), Ok(PortState::Forwarding));
        assert!("5".parse::<PortState>().is_err() && "up".parse::<PortState>().is_err());
        assert!(PortState::Learning.learns() && !PortState::Learning.forwards());
        assert!(!PortState::Blocking.learns() && !PortState::Disabled.forwards());
    }

    #[test]
    fn flags_parse_and_refuse() {
        let f = PortFlags::parse("learning=off,isolated=on,state=blocking,max_learned=0").unwrap();
        assert!(!f.learning && f.isolated && f.flood && f.state == PortState::Blocking);
        assert_eq!(f.max_learned, Some(0));
        assert!(!f.learns());
        for bad in ["learning", "learning=maybe", "color=on", "state=up", "max_learned=x"] {
            assert!(PortFlags::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vlan_lists_parse_and_change_as_bridge_vlan_does() {
        let v = PortVlans::parse("10,20-22:pvid=10").unwrap();
        assert_eq!(v.members.keys().copied().collect::<Vec<_>>(), vec![10, 20, 21, 22]);
        assert_eq!(v.pvid, Some(10));
        assert!(v.admits(21) && v.admits(10) && !v.admits(1));
        assert!(v.untagged(10) && !v.untagged(20));
        assert_eq!(PortVlans::parse("100").unwrap().pvid, None);
        assert_eq!(PortVlans::parse(":pvid=5").unwrap().members.len(), 1);
        for bad in ["0", "4095", "x", "5-3", "1:pvid=0", "1:pvid=x"] {
            assert!(PortVlans::parse(bad).is_err(), "{bad}");
        }
        let mut v = PortVlans::with_pvid(Some(1));
        v.add((10, 12), false, false);
        v.add((20, 20), true, true);
        assert_eq!((v.pvid, v.untagged(20), v.untagged(1), v.admits(11)), (Some(20), true, true, true));
        v.add((20, 20), false, false);
        assert_eq!(v.pvid, None, "re-added without pvid: no PVID");
        assert_eq!(v.del((11, 30)), 3);
        assert_eq!(v.members.keys().copied().collect::<Vec<_>>(), vec![1, 10]);
        assert_eq!(PortVlans::with_pvid(Some(0)), PortVlans::default());
        assert_eq!("802.1AD".parse::<VlanProtocol>(), Ok(VlanProtocol::Dot1Ad));
    }
}
