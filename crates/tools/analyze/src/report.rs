//! The report [`crate::Analyzer::finish`] returns: plain data, `Serialize`d
//! by the CLI as the versioned JSON document [`SCHEMA`] and rendered as text.
//!
//! Field names are part of the schema: add fields freely, rename or remove
//! only with a new schema version.

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// JSON schema name and version of [`Report`]. v2 (from v1): the
/// `accuracy` member; the CLI adds `inputs` (what the report was made
/// from), `flowsteer_version` and `state` (the mergeable state,
/// [`crate::state::State`]).
pub const SCHEMA: &str = "flowsteer.analyze.v2";

/// Everything `flowsteer analyze` predicts for one capture (or for several,
/// merged: [`crate::state`]).
///
/// Conservation: `packets_read = analysed_packets + drops.total`, where
/// `analysed_packets` is the sum of `queues[].packets`; `conservation_ok`
/// records whether it holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// The RSS configuration the prediction is for.
    pub rss: RssSummary,
    /// Packets fed to the analyzer.
    pub packets_read: u64,
    /// Their wire bytes (see [`QueueLoad::bytes`]).
    pub bytes_read: u64,
    /// Packets that parsed and were placed on a queue (sum over `queues`).
    pub analysed_packets: u64,
    pub analysed_bytes: u64,
    /// One entry per queue of the configuration, in queue order, empty
    /// queues included.
    pub queues: Vec<QueueLoad>,
    pub imbalance: Imbalance,
    pub flows: FlowSummary,
    pub fragments: FragmentSummary,
    pub split_flows: SplitFlows,
    pub unhashed: Unhashed,
    /// Per encapsulation, keyed `vlan`, `qinq`, `vxlan`, `gre`, `ipip`,
    /// `pppoe`; every key present. A packet counts under each kind it
    /// carries (a QinQ-tagged VXLAN packet under `qinq` and `vxlan`).
    pub encap: BTreeMap<&'static str, EncapStats>,
    /// The spread on inner headers (only with `AnalyzeOptions::inner`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner: Option<InnerSpread>,
    /// Heaviest tracked flows by packets (ties: bytes, then tuple order).
    pub top_flows: Vec<TopFlow>,
    pub drops: Drops,
    pub conservation_ok: bool,
    /// Which figures are exact and which bounded (a merge of reports can
    /// leave some bounded; see [`crate::state`]).
    pub accuracy: Accuracy,
}

/// Which figures of a [`Report`] are exact and which only bounded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accuracy {
    /// The exact figures, as JSON paths (`queues[].packets`).
    pub exact: Vec<&'static str>,
    /// The others, each with its bound.
    pub bounded: Vec<Bounded>,
}

/// A figure that is not exact, and how far off it may be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bounded {
    /// JSON path of the figure.
    pub field: &'static str,
    /// The bound, in words.
    pub bound: String,
}

/// The configuration in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RssSummary {
    /// `microsoft`, `symmetric`, `random` or `user`.
    pub key: &'static str,
    pub key_len: usize,
    /// Enabled hash types, e.g. `ipv4,tcp4,ipv6,tcp6`.
    pub hash_types: String,
    pub fragments_on_2tuple: bool,
    pub reta_size: usize,
    pub queues: usize,
    /// `reta` or `rps`.
    pub mapping: &'static str,
    /// Toeplitz implementation used (does not change results).
    pub hash_impl: &'static str,
}

/// Load of one receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QueueLoad {
    pub queue: u16,
    pub cpu: u32,
    pub packets: u64,
    /// Wire bytes: the capture's original length, or the captured length
    /// when a (bogus) record claims less.
    pub bytes: u64,
    /// Tracked flows whose first packet landed here (they sum to
    /// `flows.tracked`; untracked flows are not counted per queue).
    pub flows: u64,
}

/// Imbalance across all queues of the configuration (empty ones count).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Imbalance {
    /// Busiest queue's packets / mean packets per queue (1.0 = even; the
    /// number of queues = everything on one queue). 0 with no packets.
    pub max_mean: f64,
    /// Coefficient of variation (population standard deviation / mean) of
    /// packets per queue. 0 = even.
    pub cv: f64,
    pub bytes_max_mean: f64,
    pub bytes_cv: f64,
}

impl Imbalance {
    pub fn of(packets: &[u64], bytes: &[u64]) -> Imbalance {
        let (max_mean, cv) = spread(packets);
        let (bytes_max_mean, bytes_cv) = spread(bytes);
        Imbalance { max_mean, cv, bytes_max_mean, bytes_cv }
    }
}

/// (max / mean, stddev / mean) of `counts`; (0, 0) when all are zero.
fn spread(counts: &[u64]) -> (f64, f64) {
    let n = counts.len() as f64;
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    if counts.is_empty() || total == 0.0 {
        return (0.0, 0.0);
    }
    let mean = total / n;
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    let var = counts.iter().map(|&c| (c as f64 - mean).powi(2)).sum::<f64>() / n;
    (max / mean, var.sqrt() / mean)
}

/// The flow table's view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlowSummary {
    /// Flows in the table.
    pub tracked: u64,
    /// The table's cap (`AnalyzeOptions::max_flows`).
    pub max_flows: usize,
    /// Flows first seen once the table was full: an estimate (linear
    /// counting, about 1 % error).
    pub untracked_flows: u64,
    /// Packets of those flows (exact; they are in the per-queue counts).
    pub untracked_packets: u64,
}

/// IP fragments among the analysed packets (outer header, or the IP header
/// inside PPPoE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FragmentSummary {
    pub packets: u64,
    /// Offset-0 fragments (these carry the ports and teach the datagram's flow).
    pub first: u64,
    /// Later fragments whose first fragment was not seen before them (out
    /// of order, outside the capture, or forgotten): counted under their
    /// port-less tuple as a flow of their own.
    pub unmatched: u64,
}

/// Flows the configuration splits across queues (reordering hazards).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SplitFlows {
    /// Flows whose packets landed on more than one queue: the fragments
    /// are hashed on the 2-tuple while whole packets use the 4-tuple.
    pub fragments: SplitCount,
    /// Connections whose two directions land on different queues.
    pub directions: DirectionSplit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SplitCount {
    pub flows: u64,
    /// All packets of those flows.
    pub packets: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DirectionSplit {
    /// Tracked flows whose reverse tuple is tracked too (counted once per pair).
    pub connections: u64,
    /// Those whose directions' first packets landed on different queues.
    pub split: u64,
    /// All packets of both directions of the split connections.
    pub packets: u64,
}

/// Packets the NIC would not hash: hash 0, delivered through RETA entry 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Unhashed {
    pub packets: u64,
    /// Where they land.
    pub queue: u16,
    /// Not IP (ARP, LLDP, ...).
    pub non_ip: u64,
    /// PPPoE session traffic: no outer IP header for the NIC to hash.
    pub pppoe: u64,
    /// IP, but no enabled hash type matches.
    pub no_hash_type: u64,
}

/// One encapsulation kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EncapStats {
    pub packets: u64,
    pub bytes: u64,
    /// Queues its packets land on under the NIC's (outer) hash.
    pub queues_hit: usize,
    /// Queues they would land on if hashed on the inner headers (with
    /// `AnalyzeOptions::inner`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_queues_hit: Option<usize>,
    /// What a NIC's RSS does with it.
    pub nic: &'static str,
}

/// The same packets hashed on their innermost IP header (the inner header
/// of VXLAN, Geneve, VXLAN-GPE, GTP-U, GRE, IP-in-IP and PPPoE; the outer
/// one otherwise, counted by reason in `hashed_on_outer`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InnerSpread {
    pub queues: Vec<InnerQueueLoad>,
    pub imbalance: Imbalance,
    /// Packets hashed on an inner header.
    pub hashed_on_inner: u64,
    /// Packets hashed on their outer headers, and why;
    /// `hashed_on_inner + hashed_on_outer.packets` is every packet placed.
    pub hashed_on_outer: OuterHashed,
}

/// Packets `--inner` hashed on their outer headers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OuterHashed {
    pub packets: u64,
    /// Every reason, zeros included: `not_tunnelled` (no encapsulation),
    /// `tunnel_not_ip` (a recognised tunnel carrying something other than
    /// IP), `tunnel_malformed` (its header or inner packet cut or
    /// malformed), `unknown_tunnel` (GRE version 1, ESP, L2TP, MPLS in IP or
    /// UDP, Teredo, IPsec NAT traversal: not opened), `outer_fragment` (a
    /// non-first fragment: nothing behind it is visible).
    pub by_reason: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InnerQueueLoad {
    pub queue: u16,
    pub cpu: u32,
    pub packets: u64,
    pub bytes: u64,
}

/// One of the heaviest flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TopFlow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// Queue of its first packet.
    pub queue: u16,
    pub cpu: u32,
    pub packets: u64,
    pub bytes: u64,
    /// Its packets landed on more than one queue.
    pub split: bool,
}

/// Packets not placed on a queue, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    pub total: u64,
    /// By `ParseError::reason()`.
    pub parse_errors: BTreeMap<&'static str, u64>,
    /// By pcap `LINKTYPE_*` number.
    pub unsupported_linktypes: BTreeMap<u32, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_even_skewed_empty() {
        assert_eq!(spread(&[5, 5, 5, 5]), (1.0, 0.0));
        let (mm, cv) = spread(&[8, 0, 0, 0]);
        assert_eq!(mm, 4.0);
        assert!((cv - 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(spread(&[0, 0]), (0.0, 0.0));
        assert_eq!(spread(&[]), (0.0, 0.0));
    }
}
