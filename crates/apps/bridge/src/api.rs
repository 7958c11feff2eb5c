//! What the bridge's runtime, its control socket and its metrics share.
//!
//! The runtime implements [`Control`]; the control socket ([`crate::ctl`])
//! carries [`Request`] and [`Response`] as JSON lines; the metrics endpoint
//! ([`crate::metrics`]) renders [`BridgeStats`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema name of [`BridgeStats`] in JSON (`stats --json`, `bridge --json`).
pub const STATS_SCHEMA: &str = "flowsteer.bridge.v1";

/// How a port reaches its interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortKind {
    /// AF_XDP sockets, one per receive queue, with an XDP program claiming every frame.
    Afxdp,
    /// AF_PACKET rings (a fanout group over the interface).
    Afpacket,
}

/// A member port as given on the command line: `KIND:IFACE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PortSpec {
    /// How the port reaches its interface.
    pub kind: PortKind,
    /// The interface's name.
    pub iface: String,
}

impl PortSpec {
    /// Parses `afxdp:IFACE` or `afpacket:IFACE`.
    pub fn parse(s: &str) -> Result<PortSpec, crate::error::BridgeError> {
        let bad = || crate::error::BridgeError::BadPortSpec(s.to_string());
        let (kind, iface) = s.split_once(':').ok_or_else(bad)?;
        let kind = match kind {
            "afxdp" => PortKind::Afxdp,
            "afpacket" => PortKind::Afpacket,
            _ => return Err(bad()),
        };
        if iface.is_empty() || iface.len() > 15 || iface.contains([':', '/', ' ']) {
            return Err(bad());
        }
        Ok(PortSpec { kind, iface: iface.to_string() })
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            PortKind::Afxdp => "afxdp",
            PortKind::Afpacket => "afpacket",
        };
        write!(f, "{kind}:{}", self.iface)
    }
}

/// A run-time request (`flowsteer bridge-ctl ...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Add a member port while traffic flows.
    PortAdd {
        /// The port.
        port: PortSpec,
    },
    /// Remove a member port: its entries are flushed, its XDP program detached.
    PortDel {
        /// The interface's name.
        iface: String,
    },
    /// Every entry of the MAC table.
    FdbShow,
    /// Add a configured entry (static unless `kind` says otherwise).
    FdbAdd {
        /// `aa:bb:cc:dd:ee:ff`.
        mac: String,
        /// The VLAN (0: untagged).
        vlan: u16,
        /// The member port's interface.
        iface: String,
        /// `static` (never ages, never moves; the default), `sticky`
        /// (ages, never moves) or `extern_learn` (a controller's: ages,
        /// never moves, learning never overwrites it).
        #[serde(default = "static_kind")]
        kind: String,
    },
    /// Remove an entry (learned or static).
    FdbDel {
        /// `aa:bb:cc:dd:ee:ff`.
        mac: String,
        /// The VLAN (0: untagged).
        vlan: u16,
    },
    /// Remove entries: every condition given must hold (`bridge fdb
    /// flush`'s filters); neither `dynamic` nor `statics`: dynamic ones.
    FdbFlush {
        /// The port's interface; `None`: every port.
        iface: Option<String>,
        /// Only this VLAN (0: untagged).
        #[serde(default)]
        vlan: Option<u16>,
        /// Dynamic entries (learned, sticky, extern_learn).
        #[serde(default)]
        dynamic: bool,
        /// Static entries.
        #[serde(default)]
        statics: bool,
    },
    /// Change a member port's flags, state or learned-entry limit
    /// (`bridge link set`): each pair is a setting and its value
    /// (`learning off`, `state blocking`, `max_learned 100`).
    LinkSet {
        /// The member port's interface.
        iface: String,
        /// (setting, value), applied in order, all or none.
        settings: Vec<(String, String)>,
    },
    /// Every member port's flags and state.
    LinkShow,
    /// Add VLANs to a port, or change their flags (`bridge vlan add`).
    VlanAdd {
        /// The member port's interface.
        iface: String,
        /// First VLAN id (1..=4094).
        vid: u16,
        /// Last VLAN id of the range (= `vid` for one).
        vid_end: u16,
        /// Make it the port's PVID (one VLAN only).
        pvid: bool,
        /// Frames of it leave the port untagged.
        untagged: bool,
    },
    /// Remove VLANs from a port (`bridge vlan del`).
    VlanDel {
        /// The member port's interface.
        iface: String,
        /// First VLAN id.
        vid: u16,
        /// Last VLAN id of the range.
        vid_end: u16,
    },
    /// Every member port's VLANs.
    VlanShow,
    /// Switch VLAN filtering on or off (`ip link set BR type bridge
    /// vlan_filtering 1|0`); the learned entries are flushed (their VLANs
    /// change meaning).
    VlanFiltering {
        /// On or off.
        on: bool,
    },
    /// The counters.
    Stats,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    /// Done; `detail` says what changed (for example "flushed 12 entries").
    Ok {
        /// What changed, for people.
        detail: String,
    },
    /// Refused or failed.
    Error {
        /// Why, for people.
        message: String,
    },
    /// The MAC table.
    Fdb {
        /// One row per entry, sorted by port, VLAN, MAC.
        entries: Vec<FdbRow>,
    },
    /// The counters.
    Stats {
        /// The counters.
        stats: Box<BridgeStats>,
    },
    /// Every member port's flags and state.
    Links {
        /// One row per member port, in the order they joined.
        links: Vec<LinkRow>,
    },
    /// Every member port's VLANs.
    Vlans {
        /// VLAN filtering is on.
        filtering: bool,
        /// `802.1q` or `802.1ad`.
        protocol: String,
        /// One row per member port, in the order they joined.
        ports: Vec<VlanRow>,
    },
}

fn static_kind() -> String {
    "static".to_string()
}

/// One member port's flags and state, as `link show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRow {
    /// The interface.
    pub name: String,
    /// `afxdp` or `afpacket`.
    pub kind: String,
    /// The link works (administratively up, with carrier).
    pub up: bool,
    /// The 802.1D state: disabled, listening, learning, forwarding, blocking.
    pub state: String,
    /// Sources seen on it are learned.
    pub learning: bool,
    /// Unknown unicast is flooded out of it.
    pub flood: bool,
    /// Multicast is flooded out of it.
    pub mcast_flood: bool,
    /// Broadcast is flooded out of it.
    pub bcast_flood: bool,
    /// Isolated from the other isolated ports.
    pub isolated: bool,
    /// Its learned-entry limit (0: none of its own).
    pub max_learned: u64,
    /// Learned entries on it now.
    pub learned_entries: u64,
    /// The kernel fast path's status on it.
    pub fast_path: String,
}

/// One member port's VLANs, as `vlan show` prints them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VlanRow {
    /// The interface.
    pub name: String,
    /// Its PVID, if any.
    pub pvid: Option<u16>,
    /// Member VLANs, ascending.
    pub vlans: Vec<VlanMember>,
}

/// One VLAN of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VlanMember {
    /// The VLAN id.
    pub vid: u16,
    /// Frames of it leave the port untagged.
    pub untagged: bool,
}

/// One entry of the MAC table, as `fdb show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdbRow {
    /// `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// The member port's interface.
    pub port: String,
    /// The VLAN (0: untagged).
    pub vlan: u16,
    /// Added by `fdb add` as static (never ages).
    #[serde(rename = "static")]
    pub is_static: bool,
    /// How it came to be: `learned`, `static`, `sticky` or `extern_learn`.
    #[serde(default)]
    pub kind: String,
    /// Seconds since the source was last seen (0 for static entries).
    pub age_s: u64,
}

/// Every counter of a running bridge (schema [`STATS_SCHEMA`]).
///
/// Per port and per worker, frames received = forwarded + flooded +
/// dropped (the sum of `dropped` by reason); `received` starts at the
/// interface (frames the kernel dropped before our socket are in
/// `dropped`, reason `kernel`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BridgeStats {
    /// [`STATS_SCHEMA`].
    pub schema: String,
    /// Seconds since the bridge started.
    pub uptime_s: f64,
    /// One row per member port (current and removed ones, removed last).
    pub ports: Vec<PortStats>,
    /// One row per worker thread.
    pub workers: Vec<WorkerStats>,
    /// The MAC table and its learning.
    pub fdb: FdbCounters,
    /// True when every row's sum adds up.
    pub conservation_ok: bool,
    /// The sums, for people (`received = forwarded + flooded + dropped`).
    pub conservation: String,
}

/// One member port's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortStats {
    /// The interface.
    pub name: String,
    /// `afxdp` or `afpacket`.
    pub kind: String,
    /// False once removed with `port del`.
    pub member: bool,
    /// Link up: administratively up with carrier (as last seen).
    pub up: bool,
    /// The port's 802.1D state (`forwarding` unless changed).
    #[serde(default)]
    pub state: String,
    /// Learned entries on the port now.
    #[serde(default)]
    pub learned_entries: u64,
    /// Frames in from this port (including the kernel's drops before our
    /// socket and the frames the kernel fast path forwarded).
    pub received: u64,
    /// Of those, forwarded by the kernel fast path (XDP) without reaching
    /// a worker.
    #[serde(default)]
    pub fast_forwarded: u64,
    /// The port's fast path: `xdp`, or `off` with the reason.
    #[serde(default)]
    pub fast_path: String,
    /// Of those, sent out of one other port (known unicast).
    pub forwarded: u64,
    /// Of those, flooded to every other member.
    pub flooded: u64,
    /// Of those, dropped, by reason (`reserved`, `same_port`, `vlan`, `too_big`, `malformed`, `kernel`, `no_port`, `truncated`, `offload`, `bad_src`, `port_state`, `isolated`).
    pub dropped: BTreeMap<String, u64>,
    /// Frames sent out of this port (a flooded frame counts once per port).
    pub transmitted: u64,
    /// Frames that could not be sent out of this port, by reason.
    pub tx_dropped: BTreeMap<String, u64>,
    /// Frames shorter than the Ethernet minimum (60 bytes without the
    /// FCS) that the workers padded with zeros to 60 bytes before sending
    /// them out of this port, beside the sums (one the socket then refused
    /// is in `tx_dropped` too). The kernel fast path never forwards such a
    /// frame: it cannot pad, so they reach the workers.
    #[serde(default)]
    pub tx_padded: u64,
    /// An `afxdp` port: the mode its XDP program attached in, `native` or
    /// `generic`; `None` for `afpacket` ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<String>,
    /// An `afxdp` port in generic mode: why the driver refused native mode
    /// (the bridge asks for native and falls back); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_fallback: Option<String>,
    /// The interface's own `rx_packets` since the port was added (read
    /// from the kernel), beside the sum; `None` when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_rx_packets: Option<u64>,
    /// The interface's own `rx_dropped` since the port was added, beside
    /// the sum (not in `received`): frames the kernel dropped on the port
    /// before our sockets (too long for the MTU, a full backlog). On a veth
    /// it holds every frame of `peer_tx_dropped`. In generic (skb) XDP the
    /// kernel also counts here the frames our socket could not take, which
    /// are in `dropped` (`kernel`) too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_rx_dropped: Option<u64>,
    /// A veth port: its peer's `tx_dropped` since the port was added, the
    /// frames the peer could not hand to the port; a part of
    /// `if_rx_dropped`, never to be added to it. `None` for other
    /// interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_tx_dropped: Option<u64>,
}

/// One worker thread's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStats {
    /// Worker index.
    pub worker: usize,
    /// The CPU it is pinned to.
    pub cpu: Option<u32>,
    /// Frames it took in.
    pub received: u64,
    /// Of those, forwarded (known unicast).
    pub forwarded: u64,
    /// Of those, flooded.
    pub flooded: u64,
    /// Of those, dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Frames at or below the RX copy threshold, copied out so their receive buffer returned at once.
    pub rx_copied: u64,
    /// Frames whose partial TCP/UDP checksum (a local sender's transmit
    /// offload) it completed in software.
    #[serde(default)]
    pub csum_completed: u64,
    /// GSO super-frames it cut into segments in software, for an egress
    /// that cannot take them whole.
    #[serde(default)]
    pub gso_segmented: u64,
}

/// The MAC table's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FdbCounters {
    /// Entries now (learned + static).
    pub entries: u64,
    /// Learned entries now.
    pub learned_entries: u64,
    /// Static entries now.
    pub static_entries: u64,
    /// The learned-entries limit.
    pub max_learned: u64,
    /// New entries learned.
    pub learned: u64,
    /// Entries refreshed.
    pub refreshed: u64,
    /// Sources seen on another port than their entry's.
    pub moved: u64,
    /// Sources not learned because the table (or the port's share) was full.
    pub not_learned_full: u64,
    /// Learning events a full per-worker queue dropped.
    pub events_dropped: u64,
    /// Learning events not posted because a worker's per-second filter
    /// was full (it remembers at most 4,096 sources a second): the source
    /// is learned when it is seen again in a later second.
    pub events_suppressed: u64,
    /// Entries removed by aging.
    pub aged: u64,
    /// Entries removed by a flush (port down, port removed, `fdb flush`).
    pub flushed: u64,
}

/// What the control socket and the metrics endpoint ask of a running bridge.
pub trait Control: Send + Sync {
    /// Answers one request. Never panics on a bad request: answers
    /// [`Response::Error`].
    fn request(&self, req: Request) -> Response;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs_parse_and_print_back() {
        let p = PortSpec::parse("afxdp:veth0").unwrap();
        assert_eq!((p.kind, p.iface.as_str()), (PortKind::Afxdp, "veth0"));
        assert_eq!(p.to_string(), "afxdp:veth0");
        assert_eq!(PortSpec::parse("afpacket:eth1").unwrap().kind, PortKind::Afpacket);
        for bad in ["veth0", "xdp:veth0", "afxdp:", "afxdp:a:b", "afxdp:0123456789abcdef"] {
            assert!(PortSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_and_responses_are_json_lines() {
        let r =
            Request::FdbAdd { mac: "02:00:00:00:00:01".into(), vlan: 0, iface: "veth0".into(), kind: "sticky".into() };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""op":"fdb_add""#), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        let row = FdbRow {
            mac: "02:00:00:00:00:01".into(),
            port: "veth0".into(),
            vlan: 0,
            is_static: true,
            kind: "static".into(),
            age_s: 0,
        };
        let text = serde_json::to_string(&Response::Fdb { entries: vec![row] }).unwrap();
        assert!(text.contains(r#""static":true"#), "{text}");
        // An older client's requests still parse: an add is static, a flush dynamic.
        let old: Request =
            serde_json::from_str(r#"{"op":"fdb_add","mac":"02:00:00:00:00:01","vlan":0,"iface":"a"}"#).unwrap();
        assert!(matches!(old, Request::FdbAdd { kind, .. } if kind == "static"));
        let old: Request = serde_json::from_str(r#"{"op":"fdb_flush","iface":null}"#).unwrap();
        assert_eq!(old, Request::FdbFlush { iface: None, vlan: None, dynamic: false, statics: false });
    }
}
