//! The mergeable state of an analysis: everything a [`Report`] is derived
//! from, as plain data that serialises beside the report (the `state`
//! member of the `flowsteer.analyze.v2` document) and merges exactly.
//!
//! [`crate::Analyzer::into_state`] makes one; [`Merger`] combines states of
//! inputs given in time order into the state the analyzer would have made
//! of the inputs concatenated; [`State::report`] derives the figures. A
//! single input's report is `into_state().report(top)` too, so a merged
//! report and a single run's report come out of the same code.
//!
//! # What merges, and how
//!
//! * Counters (packets and bytes per queue, per encapsulation and per queue
//!   of each encapsulation, inner-header spread, unhashed packets, drops,
//!   fragments seen): added.
//! * Flows, keyed by tuple: packets and bytes added; the queue of the first
//!   packet is the earliest input's; split when either part was split or the
//!   parts' first queues differ. Each flow carries the position of its first
//!   packet, so which flows the bounded table tracks is decided as the single
//!   run decides it: the first `max_flows` flows in time order.
//! * Later fragments whose offset-0 fragment was not in their own input
//!   ("held" fragments, only those early enough in their input to be matched
//!   by a previous one) are matched against the offset-0 fragments the
//!   previous inputs remembered last (`fragment_memory`), under the same
//!   distance rule as within one input (see `FragTable`); the others join
//!   their port-less tuple when the report is made.
//! * Flows beyond the table: their packets add; their distinct count is a
//!   linear-counting bitmap, merged by union (an estimate, about 1 %).
//!
//! # When a merge is not exact
//!
//! Only when an input other than the first filled its flow table: the
//! flows it could not track may be flows an earlier input tracked, whose
//! packets then stay counted as untracked. [`StateAccuracy`] carries the
//! number of packets concerned (a bound on each tracked flow's
//! undercount), and a similar bound for fragments whose matching could not
//! be decided (an input whose held-fragment list was full, or a group of
//! held fragments straddling the window). Counters are always exact.

use crate::flows::{DistinctCounter, FlowKey, FragKey};
use crate::kinds::{encap_kinds, outer_reasons, tuple_order};
use crate::report::{
    Accuracy, Bounded, DirectionSplit, Drops, EncapStats, FlowSummary, FragmentSummary, Imbalance, InnerQueueLoad,
    InnerSpread, OuterHashed, QueueLoad, Report, RssSummary, SplitCount, SplitFlows, TopFlow, Unhashed, SCHEMA,
};
use flowsteer_wire::{FlowTuple, ParseError};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// The RSS configuration a state was made under, as far as it changes
/// results (two states merge only under the same one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RssIdentity {
    /// `microsoft`, `symmetric`, `random` or `user`.
    pub key: String,
    /// Key length in bytes.
    pub key_len: usize,
    /// 64-bit FNV-1a of the key bytes, hex: tells keys apart without
    /// showing them.
    pub key_fingerprint: String,
    /// Enabled hash types, e.g. `ipv4,tcp4,ipv6,tcp6`.
    pub hash_types: String,
    /// Fragments hashed on the 2-tuple.
    pub fragments_on_2tuple: bool,
    /// The indirection table: the queue of each entry.
    pub reta: Vec<u16>,
    /// Queues of the configuration.
    pub queues: usize,
    /// `reta` or `rps`.
    pub mapping: String,
    /// The CPU of each queue.
    pub cpus: Vec<u32>,
    /// Toeplitz implementation (does not change results; not compared).
    pub hash_impl: String,
    /// Where unhashed packets land (RETA entry 0's queue).
    pub unhashed_queue: u16,
}

/// The analysis options that change results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateOptions {
    /// `--inner`: inner headers hashed too.
    pub inner: bool,
    /// UDP port recognised as VXLAN.
    pub vxlan_port: u16,
    /// Flow table cap.
    pub max_flows: usize,
    /// Fragment table cap (datagrams); half of it is the matching window.
    pub max_fragments: usize,
}

/// Packets and bytes, serialised as `[packets, bytes]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Load(pub u64, pub u64);

/// One encapsulation kind's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncapState {
    /// Packets carrying it.
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Its packets per queue under the NIC's (outer) hash.
    pub queues: Vec<u64>,
    /// Its packets per queue under inner-header hashing (empty without `inner`).
    pub inner_queues: Vec<u64>,
}

/// The inner-header spread's counters (with `inner`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnerState {
    /// Per queue.
    pub queues: Vec<Load>,
    /// Packets hashed on an inner header.
    pub hashed_on_inner: u64,
    /// Packets hashed on their outer headers, by reason (every reason present).
    pub hashed_on_outer: BTreeMap<String, u64>,
}

/// Packets the NIC would not hash, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnhashedState {
    /// Not IP.
    pub non_ip: u64,
    /// PPPoE session traffic.
    pub pppoe: u64,
    /// IP with no enabled hash type.
    pub no_hash_type: u64,
}

/// Fragment counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FragmentState {
    /// Fragments seen.
    pub packets: u64,
    /// Offset-0 fragments (each one remembered).
    pub first: u64,
    /// Later fragments settled as unmatched (the held ones are not counted
    /// here until the report is made).
    pub unmatched: u64,
    /// Of those, the ones settled only because the held list was full: a
    /// previous input might have matched them.
    pub unheld: u64,
}

/// One tracked flow: `[src, dst, proto, [sport, dport] | null, first,
/// queue, packets, bytes, split]`, `first` being the position of its first
/// packet in the input (0 = the input's first packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRecord(
    pub IpAddr,
    pub IpAddr,
    pub u8,
    pub Option<[u16; 2]>,
    pub u64,
    pub u16,
    pub u64,
    pub u64,
    pub bool,
);

/// Later fragments of one datagram that came before any offset-0 fragment
/// of it in their input: `[src, dst, proto, id, first, queue, packets,
/// bytes, split, before_first, before_last]`, the last two being how many
/// offset-0 fragments the input had remembered before the first and the
/// last of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldRecord(
    pub IpAddr,
    pub IpAddr,
    pub u8,
    pub u32,
    pub u64,
    pub u16,
    pub u64,
    pub u64,
    pub bool,
    pub u64,
    pub u64,
);

/// An offset-0 fragment a later input's fragments may still match:
/// `[src, dst, proto, id, [sport, dport] | null, seq]`, `seq` counting the
/// input's offset-0 fragments from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FragMemory(pub IpAddr, pub IpAddr, pub u8, pub u32, pub Option<[u16; 2]>, pub u64);

/// What a merge could not decide, in packets (0 and 0 for a single input).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateAccuracy {
    /// Packets an input after the first could not attribute to a flow (its
    /// table was full) although an earlier input may have tracked that flow.
    pub flow_packets: u64,
    /// Later fragments whose matching with an earlier input's offset-0
    /// fragment could not be decided.
    pub fragment_packets: u64,
}

/// Everything a [`Report`] is derived from; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The configuration.
    pub rss: RssIdentity,
    /// The options that change results.
    pub options: StateOptions,
    /// Packets fed.
    pub packets_read: u64,
    /// Their wire bytes.
    pub bytes_read: u64,
    /// Per queue.
    pub queues: Vec<Load>,
    /// With `inner`.
    pub inner: Option<InnerState>,
    /// By encapsulation name (every kind present).
    pub encap: BTreeMap<String, EncapState>,
    /// Unhashed packets.
    pub unhashed: UnhashedState,
    /// Parse errors by reason.
    pub parse_errors: BTreeMap<String, u64>,
    /// Packets of link types not read, by `LINKTYPE_*`.
    pub unsupported_linktypes: BTreeMap<u32, u64>,
    /// Fragment counters.
    pub fragments: FragmentState,
    /// Tracked flows, by position of their first packet.
    pub flows: Vec<FlowRecord>,
    /// Held later fragments, by position of their first packet.
    pub held_fragments: Vec<HeldRecord>,
    /// The offset-0 fragments a later input may still match, oldest first.
    pub fragment_memory: Vec<FragMemory>,
    /// Packets of flows the table did not track.
    pub untracked_packets: u64,
    /// Linear-counting bitmap of those flows: non-zero words as `[index, word]`.
    pub untracked_sketch: Vec<(u32, u64)>,
    /// What merges could not decide.
    pub accuracy: StateAccuracy,
}

/// Why states do not merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeError {
    /// Made under different configurations or options: every difference.
    Mismatch(String),
    /// Not a state an analysis makes: what is wrong.
    Malformed(String),
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::Mismatch(what) => write!(f, "made under different configurations: {what}"),
            MergeError::Malformed(what) => write!(f, "not an analysis state: {what}"),
        }
    }
}

impl std::error::Error for MergeError {}

/// The most packets or bytes a state may count (merges stay below 2^64).
const MAX_TOTAL: u64 = 1 << 62;

/// 64-bit FNV-1a, hex.
pub(crate) fn fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Every difference between two configurations that changes results, in
/// words; `Ok` when there is none.
pub fn compatible(a: (&RssIdentity, &StateOptions), b: (&RssIdentity, &StateOptions)) -> Result<(), MergeError> {
    let ((ra, oa), (rb, ob)) = (a, b);
    let mut diffs = Vec::new();
    if (&ra.key, ra.key_len, &ra.key_fingerprint) != (&rb.key, rb.key_len, &rb.key_fingerprint) {
        diffs.push(format!(
            "RSS key {} ({} bytes, fingerprint {}) vs {} ({} bytes, fingerprint {})",
            ra.key, ra.key_len, ra.key_fingerprint, rb.key, rb.key_len, rb.key_fingerprint
        ));
    }
    if ra.hash_types != rb.hash_types {
        diffs.push(format!("hash types {} vs {}", ra.hash_types, rb.hash_types));
    }
    if ra.fragments_on_2tuple != rb.fragments_on_2tuple {
        let on = |b: bool| if b { "the 2-tuple" } else { "the 4-tuple (--frag-4tuple)" };
        diffs.push(format!("fragments hashed on {} vs {}", on(ra.fragments_on_2tuple), on(rb.fragments_on_2tuple)));
    }
    if ra.reta.len() != rb.reta.len() || ra.queues != rb.queues {
        diffs.push(format!(
            "RETA of {} entries over {} queues vs {} entries over {} queues",
            ra.reta.len(),
            ra.queues,
            rb.reta.len(),
            rb.queues
        ));
    } else if let Some(i) = ra.reta.iter().zip(&rb.reta).position(|(x, y)| x != y) {
        diffs.push(format!("RETA entry {i}: queue {} vs queue {}", ra.reta[i], rb.reta[i]));
    }
    if ra.mapping != rb.mapping {
        diffs.push(format!("mapping {} vs {}", ra.mapping, rb.mapping));
    }
    if ra.cpus != rb.cpus {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        diffs.push(format!("queue CPUs (--cpus) {} vs {}", list(&ra.cpus), list(&rb.cpus)));
    }
    if oa.inner != ob.inner {
        let on = |b: bool| if b { "on" } else { "off" };
        diffs.push(format!("--inner {} vs {}", on(oa.inner), on(ob.inner)));
    }
    if oa.vxlan_port != ob.vxlan_port {
        diffs.push(format!("--vxlan-port {} vs {}", oa.vxlan_port, ob.vxlan_port));
    }
    if oa.max_flows != ob.max_flows {
        diffs.push(format!("--max-flows {} vs {}", oa.max_flows, ob.max_flows));
    }
    if oa.max_fragments != ob.max_fragments {
        diffs.push(format!("fragment table of {} vs {} datagrams", oa.max_fragments, ob.max_fragments));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(MergeError::Mismatch(diffs.join("; ")))
    }
}

/// A flow's counters while merging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Agg {
    first: u64,
    queue: u16,
    packets: u64,
    bytes: u64,
    split: bool,
}

impl Agg {
    /// Adds another part of the same flow (either order).
    fn absorb(&mut self, other: &Agg) {
        self.split = self.split || other.split || self.queue != other.queue;
        if other.first < self.first {
            self.first = other.first;
            self.queue = other.queue;
        }
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// Held fragments of one datagram while merging.
#[derive(Clone, Copy, Debug)]
struct Held {
    agg: Agg,
    before_first: u64,
    before_last: u64,
}

fn ports(p: Option<[u16; 2]>) -> Option<(u16, u16)> {
    p.map(|[s, d]| (s, d))
}

fn flow_record(t: &FlowTuple, a: &Agg) -> FlowRecord {
    FlowRecord(t.src, t.dst, t.proto, t.ports.map(|(s, d)| [s, d]), a.first, a.queue, a.packets, a.bytes, a.split)
}

fn add_maps<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

fn add_vec(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

fn add_loads(into: &mut [Load], from: &[Load]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.0 += b.0;
        a.1 += b.1;
    }
}

impl State {
    /// Checks that the state is one an analysis could have made (sizes,
    /// names, queue numbers), so that merging and reporting it cannot go
    /// wrong.
    pub fn validate(&self) -> Result<(), MergeError> {
        let bad = |what: String| Err(MergeError::Malformed(what));
        let q = self.rss.queues;
        if q == 0 || q > usize::from(u16::MAX) + 1 {
            return bad(format!("{q} queues"));
        }
        if self.queues.len() != q {
            return bad(format!("{} queue counters for {q} queues", self.queues.len()));
        }
        if self.rss.cpus.len() != q {
            return bad(format!("{} queue CPUs for {q} queues", self.rss.cpus.len()));
        }
        if self.rss.reta.is_empty() || self.rss.reta.iter().any(|&e| usize::from(e) >= q) {
            return bad("a RETA entry names no queue".into());
        }
        if usize::from(self.rss.unhashed_queue) >= q {
            return bad("the unhashed queue is out of range".into());
        }
        let inner_len = if self.options.inner { q } else { 0 };
        match (&self.inner, self.options.inner) {
            (Some(i), true) => {
                if i.queues.len() != q {
                    return bad("inner queue counters do not match the queues".into());
                }
                let names: Vec<&str> = outer_reasons().to_vec();
                if i.hashed_on_outer.keys().any(|k| !names.contains(&k.as_str())) {
                    return bad("an unknown reason for hashing on the outer headers".into());
                }
            }
            (None, false) => {}
            _ => return bad("inner-header counters do not match the inner option".into()),
        }
        let kinds: Vec<&str> = encap_kinds().map(|(name, _)| name).collect();
        for (name, e) in &self.encap {
            if !kinds.contains(&name.as_str()) {
                return bad(format!("unknown encapsulation {name}"));
            }
            if e.queues.len() != q || e.inner_queues.len() != inner_len {
                return bad(format!("encapsulation {name}: queue counters do not match the queues"));
            }
        }
        if self.parse_errors.keys().any(|k| !ParseError::ALL.iter().any(|e| e.reason() == k)) {
            return bad("an unknown parse error".into());
        }
        if self.flows.len() > self.options.max_flows {
            return bad(format!("{} flows over a cap of {}", self.flows.len(), self.options.max_flows));
        }
        if self.flows.iter().any(|f| usize::from(f.5) >= q) || self.held_fragments.iter().any(|h| usize::from(h.5) >= q)
        {
            return bad("a flow on a queue out of range".into());
        }
        if self.fragment_memory.iter().any(|m| m.5 >= self.fragments.first) {
            return bad("a remembered fragment beyond the fragments counted".into());
        }
        if self.untracked_sketch.iter().any(|&(i, _)| i as usize >= DistinctCounter::WORDS) {
            return bad("the untracked-flow sketch is out of range".into());
        }
        self.validate_counts()
    }

    /// Every count within what `packets_read` and `bytes_read` allow (so
    /// sums cannot overflow), every position within the input.
    fn validate_counts(&self) -> Result<(), MergeError> {
        let (packets, bytes) = (self.packets_read, self.bytes_read);
        if packets > MAX_TOTAL || bytes > MAX_TOTAL {
            return Err(MergeError::Malformed(format!("{packets} packets of {bytes} bytes")));
        }
        let sum = |v: &mut dyn Iterator<Item = u64>| v.fold(0u64, |a, b| a.saturating_add(b));
        let within = |what: &str, p: u64, b: u64| {
            if p > packets || b > bytes {
                Err(MergeError::Malformed(format!("{what} count more than the packets read")))
            } else {
                Ok(())
            }
        };
        within("the queues", sum(&mut self.queues.iter().map(|l| l.0)), sum(&mut self.queues.iter().map(|l| l.1)))?;
        if let Some(i) = &self.inner {
            within("the inner queues", sum(&mut i.queues.iter().map(|l| l.0)), sum(&mut i.queues.iter().map(|l| l.1)))?;
            let outer = sum(&mut i.hashed_on_outer.values().copied());
            within("the inner-header reasons", i.hashed_on_inner.saturating_add(outer), 0)?;
        }
        for (name, e) in &self.encap {
            within(name, e.packets, e.bytes)?;
            within(name, sum(&mut e.queues.iter().copied()), 0)?;
            within(name, sum(&mut e.inner_queues.iter().copied()), 0)?;
        }
        let u = self.unhashed;
        within("the unhashed packets", u.non_ip.saturating_add(u.pppoe).saturating_add(u.no_hash_type), 0)?;
        let dropped = sum(&mut self.parse_errors.values().copied())
            .saturating_add(sum(&mut self.unsupported_linktypes.values().copied()));
        within("the drops", dropped, 0)?;
        let f = self.fragments;
        within("the fragments", f.packets, 0)?;
        if f.first > f.packets || f.unmatched > f.packets || f.unheld > f.unmatched {
            return Err(MergeError::Malformed("fragment counts that do not add up".into()));
        }
        let flow_packets = sum(&mut self.flows.iter().map(|r| r.6))
            .saturating_add(sum(&mut self.held_fragments.iter().map(|h| h.6)))
            .saturating_add(self.untracked_packets);
        let flow_bytes =
            sum(&mut self.flows.iter().map(|r| r.7)).saturating_add(sum(&mut self.held_fragments.iter().map(|h| h.7)));
        within("the flows", flow_packets, flow_bytes)?;
        within("the accuracy bounds", self.accuracy.flow_packets.saturating_add(self.accuracy.fragment_packets), 0)?;
        if self.flows.iter().any(|r| r.4 >= packets)
            || self.held_fragments.iter().any(|h| h.4 >= packets || h.9 > h.10 || h.10 > f.first)
        {
            return Err(MergeError::Malformed("a position beyond the packets read".into()));
        }
        Ok(())
    }

    /// Whether every figure of the report is what one run over the inputs
    /// concatenated gives (the estimate of untracked flows aside).
    pub fn is_exact(&self) -> bool {
        self.accuracy == StateAccuracy::default()
    }

    /// The report, with the `top` heaviest flows.
    pub fn report(&self, top: usize) -> Report {
        let q = self.rss.queues;
        let cpu = |queue: usize| self.rss.cpus.get(queue).copied().unwrap_or(queue as u32);

        // Flows: the tracked ones, then the held fragments joined to their
        // port-less tuple, then the cap.
        let mut flows: Vec<(FlowTuple, Agg)> = self
            .flows
            .iter()
            .map(|f| {
                let t = FlowTuple { src: f.0, dst: f.1, proto: f.2, ports: ports(f.3) };
                (t, Agg { first: f.4, queue: f.5, packets: f.6, bytes: f.7, split: f.8 })
            })
            .collect();
        let mut index: FxHashMap<FlowKey, usize> =
            flows.iter().enumerate().map(|(i, (t, _))| (FlowKey::of(t), i)).collect();
        let mut held_packets = 0;
        for h in &self.held_fragments {
            held_packets += h.6;
            let t = FlowTuple { src: h.0, dst: h.1, proto: h.2, ports: None };
            let agg = Agg { first: h.4, queue: h.5, packets: h.6, bytes: h.7, split: h.8 };
            match index.get(&FlowKey::of(&t)) {
                Some(&i) => flows[i].1.absorb(&agg),
                None => {
                    index.insert(FlowKey::of(&t), flows.len());
                    flows.push((t, agg));
                }
            }
        }
        let mut untracked_packets = self.untracked_packets;
        let mut sketch = DistinctCounter::default();
        // Validated: the words are in range.
        let _ = sketch.or_words(&self.untracked_sketch);
        if flows.len() > self.options.max_flows {
            flows.sort_by_key(|(_, a)| a.first);
            for (t, a) in flows.drain(self.options.max_flows..) {
                untracked_packets += a.packets;
                sketch.insert_flow(&FlowKey::of(&t));
            }
            index = flows.iter().enumerate().map(|(i, (t, _))| (FlowKey::of(t), i)).collect();
        }

        let mut flows_per_queue = vec![0u64; q];
        let mut frag_split = SplitCount { flows: 0, packets: 0 };
        let mut directions = DirectionSplit { connections: 0, split: 0, packets: 0 };
        for (tuple, stats) in &flows {
            if let Some(n) = flows_per_queue.get_mut(usize::from(stats.queue)) {
                *n += 1;
            }
            if stats.split {
                frag_split.flows += 1;
                frag_split.packets += stats.packets;
            }
            let reverse = tuple.reversed();
            if tuple_order(tuple, &reverse) == std::cmp::Ordering::Less {
                if let Some(&i) = index.get(&FlowKey::of(&reverse)) {
                    let back = &flows[i].1;
                    directions.connections += 1;
                    if back.queue != stats.queue {
                        directions.split += 1;
                        directions.packets += stats.packets + back.packets;
                    }
                }
            }
        }

        let queues: Vec<QueueLoad> = self
            .queues
            .iter()
            .zip(&flows_per_queue)
            .enumerate()
            .map(|(i, (load, &flows))| QueueLoad {
                queue: i as u16,
                cpu: cpu(i),
                packets: load.0,
                bytes: load.1,
                flows,
            })
            .collect();
        let analysed_packets = queues.iter().map(|l| l.packets).sum();
        let analysed_bytes = queues.iter().map(|l| l.bytes).sum();
        let imbalance = imbalance_of(&self.queues);

        let inner = self.inner.as_ref().map(|i| {
            let by_reason: BTreeMap<&'static str, u64> =
                outer_reasons().iter().map(|&r| (r, i.hashed_on_outer.get(r).copied().unwrap_or(0))).collect();
            InnerSpread {
                queues: i
                    .queues
                    .iter()
                    .enumerate()
                    .map(|(n, l)| InnerQueueLoad { queue: n as u16, cpu: cpu(n), packets: l.0, bytes: l.1 })
                    .collect(),
                imbalance: imbalance_of(&i.queues),
                hashed_on_inner: i.hashed_on_inner,
                hashed_on_outer: OuterHashed { packets: by_reason.values().sum(), by_reason },
            }
        });

        let empty = EncapState::default();
        let encap = encap_kinds()
            .map(|(name, nic)| {
                let c = self.encap.get(name).unwrap_or(&empty);
                let hit = |v: &[u64]| v.iter().filter(|&&n| n > 0).count();
                let stats = EncapStats {
                    packets: c.packets,
                    bytes: c.bytes,
                    queues_hit: hit(&c.queues),
                    inner_queues_hit: self.options.inner.then(|| hit(&c.inner_queues)),
                    nic,
                };
                (name, stats)
            })
            .collect();

        let parse_errors: BTreeMap<&'static str, u64> = ParseError::ALL
            .iter()
            .filter_map(|e| {
                let n = self.parse_errors.get(e.reason()).copied().unwrap_or(0);
                (n > 0).then_some((e.reason(), n))
            })
            .collect();
        let mut drops = Drops { total: 0, parse_errors, unsupported_linktypes: self.unsupported_linktypes.clone() };
        drops.total = drops.parse_errors.values().sum::<u64>() + drops.unsupported_linktypes.values().sum::<u64>();
        let u = self.unhashed;

        Report {
            schema: SCHEMA,
            rss: rss_summary(&self.rss),
            packets_read: self.packets_read,
            bytes_read: self.bytes_read,
            analysed_packets,
            analysed_bytes,
            conservation_ok: self.packets_read == analysed_packets + drops.total,
            queues,
            imbalance,
            flows: FlowSummary {
                tracked: flows.len() as u64,
                max_flows: self.options.max_flows,
                untracked_flows: sketch.estimate(),
                untracked_packets,
            },
            fragments: FragmentSummary {
                packets: self.fragments.packets,
                first: self.fragments.first,
                unmatched: self.fragments.unmatched + held_packets,
            },
            split_flows: SplitFlows { fragments: frag_split, directions },
            unhashed: Unhashed {
                packets: u.non_ip + u.pppoe + u.no_hash_type,
                queue: self.rss.unhashed_queue,
                non_ip: u.non_ip,
                pppoe: u.pppoe,
                no_hash_type: u.no_hash_type,
            },
            encap,
            inner,
            top_flows: top_flows(&flows, top, &cpu),
            drops,
            accuracy: accuracy(&self.accuracy),
        }
    }
}

/// The figures that only depend on counters.
const ALWAYS_EXACT: &[&str] = &[
    "packets_read",
    "bytes_read",
    "analysed_packets",
    "analysed_bytes",
    "queues[].packets",
    "queues[].bytes",
    "imbalance",
    "unhashed",
    "encap",
    "inner",
    "drops",
    "fragments.packets",
    "fragments.first",
];

/// The figures that depend on which flow each packet is counted in.
const FLOW_FIELDS: &[&str] =
    &["flows.tracked", "flows.untracked_packets", "queues[].flows", "split_flows", "top_flows"];

fn accuracy(a: &StateAccuracy) -> Accuracy {
    let mut exact: Vec<&'static str> = ALWAYS_EXACT.to_vec();
    let mut bounded = Vec::new();
    let flow_bound = a.flow_packets + a.fragment_packets;
    if flow_bound == 0 {
        exact.extend(FLOW_FIELDS);
    } else {
        for &field in FLOW_FIELDS {
            bounded.push(Bounded {
                field,
                bound: format!(
                    "up to {flow_bound} packets may be counted outside the flow they belong to (an input after the first filled its flow table, or fragments matched across inputs undecided)"
                ),
            });
        }
    }
    if a.fragment_packets == 0 {
        exact.push("fragments.unmatched");
    } else {
        bounded.push(Bounded {
            field: "fragments.unmatched",
            bound: format!("within {} of the exact count", a.fragment_packets),
        });
    }
    bounded.push(Bounded {
        field: "flows.untracked_flows",
        bound: "an estimate (linear counting): about 1 % standard error, saturating near 14 million".into(),
    });
    Accuracy { exact, bounded }
}

fn imbalance_of(loads: &[Load]) -> Imbalance {
    let packets: Vec<u64> = loads.iter().map(|l| l.0).collect();
    let bytes: Vec<u64> = loads.iter().map(|l| l.1).collect();
    Imbalance::of(&packets, &bytes)
}

fn top_flows(flows: &[(FlowTuple, Agg)], n: usize, cpu: &dyn Fn(usize) -> u32) -> Vec<TopFlow> {
    if n == 0 {
        return Vec::new();
    }
    let mut all: Vec<&(FlowTuple, Agg)> = flows.iter().collect();
    let heavier = |a: &&(FlowTuple, Agg), b: &&(FlowTuple, Agg)| {
        b.1.packets.cmp(&a.1.packets).then(b.1.bytes.cmp(&a.1.bytes)).then_with(|| tuple_order(&a.0, &b.0))
    };
    if all.len() > n {
        all.select_nth_unstable_by(n - 1, heavier);
        all.truncate(n);
    }
    all.sort_unstable_by(heavier);
    all.into_iter()
        .map(|(t, s)| TopFlow {
            src: t.src,
            dst: t.dst,
            proto: t.proto,
            sport: t.ports.map(|p| p.0),
            dport: t.ports.map(|p| p.1),
            queue: s.queue,
            cpu: cpu(usize::from(s.queue)),
            packets: s.packets,
            bytes: s.bytes,
            split: s.split,
        })
        .collect()
}

fn rss_summary(r: &RssIdentity) -> RssSummary {
    RssSummary {
        key: match r.key.as_str() {
            "microsoft" => "microsoft",
            "symmetric" => "symmetric",
            "random" => "random",
            _ => "user",
        },
        key_len: r.key_len,
        hash_types: r.hash_types.clone(),
        fragments_on_2tuple: r.fragments_on_2tuple,
        reta_size: r.reta.len(),
        queues: r.queues,
        mapping: if r.mapping == "rps" { "rps" } else { "reta" },
        hash_impl: match r.hash_impl.as_str() {
            "table" => "table",
            "gfni-avx512" => "gfni-avx512",
            _ => "reference",
        },
    }
}

/// Combines states given in time order into the state one analysis of the
/// inputs concatenated would have made (see the module docs for what is
/// exact). Memory: the merged flow table (at most `max_flows` flows), the
/// held fragments and the fragment memory (each at most `max_fragments`);
/// the states pushed are consumed one at a time.
pub struct Merger {
    acc: State,
    table: FxHashMap<FlowKey, Agg>,
    /// The first input, kept as it is until a second one comes (a merge of
    /// one input is that input).
    first: Option<State>,
    held: FxHashMap<FragKey, Held>,
    /// Datagram -> (ports of its flow, sequence number in the merged inputs).
    memory: FxHashMap<FragKey, (Option<[u16; 2]>, u64)>,
    sketch: DistinctCounter,
    window: u64,
}

impl Merger {
    /// A merge starting with `first`, the earliest input.
    pub fn new(first: State) -> Result<Merger, MergeError> {
        first.validate()?;
        let q = first.rss.queues;
        let inner_len = if first.options.inner { q } else { 0 };
        let acc = State {
            rss: first.rss.clone(),
            options: first.options,
            packets_read: 0,
            bytes_read: 0,
            queues: vec![Load::default(); q],
            inner: first.inner.as_ref().map(|_| InnerState {
                queues: vec![Load::default(); q],
                hashed_on_inner: 0,
                hashed_on_outer: outer_reasons().iter().map(|r| (r.to_string(), 0)).collect(),
            }),
            encap: encap_kinds()
                .map(|(name, _)| {
                    (
                        name.to_string(),
                        EncapState { packets: 0, bytes: 0, queues: vec![0; q], inner_queues: vec![0; inner_len] },
                    )
                })
                .collect(),
            unhashed: UnhashedState::default(),
            parse_errors: BTreeMap::new(),
            unsupported_linktypes: BTreeMap::new(),
            fragments: FragmentState::default(),
            flows: Vec::new(),
            held_fragments: Vec::new(),
            fragment_memory: Vec::new(),
            untracked_packets: 0,
            untracked_sketch: Vec::new(),
            accuracy: StateAccuracy::default(),
        };
        let window = (first.options.max_fragments / 2).max(1) as u64;
        let mut m = Merger {
            acc,
            table: FxHashMap::default(),
            first: None,
            held: FxHashMap::default(),
            memory: FxHashMap::default(),
            sketch: DistinctCounter::default(),
            window,
        };
        m.first = Some(first);
        Ok(m)
    }

    /// Adds the next input (later in time than every input pushed before).
    pub fn push(&mut self, next: State) -> Result<(), MergeError> {
        if let Some(first) = self.first.take() {
            self.add(first)?;
        }
        self.add(next)
    }

    fn add(&mut self, next: State) -> Result<(), MergeError> {
        compatible((&self.acc.rss, &self.acc.options), (&next.rss, &next.options))?;
        next.validate()?;
        if self.acc.packets_read + next.packets_read > MAX_TOTAL || self.acc.bytes_read + next.bytes_read > MAX_TOTAL {
            return Err(MergeError::Malformed("more than 2^62 packets or bytes in all".into()));
        }
        let p0 = self.acc.packets_read;
        let r0 = self.acc.fragments.first;
        let w = self.window;
        let had_flows = !self.table.is_empty() || self.acc.untracked_packets > 0;
        let max_flows = self.acc.options.max_flows;

        // Held fragments: matched by an earlier input, still held, or settled.
        let mut records: Vec<(FlowTuple, Agg)> = Vec::with_capacity(next.flows.len());
        let mut uncertain = 0;
        let mut settled_unmatched = 0;
        for h in &next.held_fragments {
            let key = FragKey { src: h.0, dst: h.1, proto: h.2, id: h.3 };
            let agg = Agg { first: h.4 + p0, queue: h.5, packets: h.6, bytes: h.7, split: h.8 };
            let (before_first, before_last) = (h.9, h.10);
            let earlier = self.memory.get(&key).map(|&(ports, seq)| {
                let after = r0 - 1 - seq;
                (ports, after + before_first <= w, after + before_last <= w)
            });
            match earlier {
                Some((ports, true, last_ok)) => {
                    if !last_ok {
                        uncertain += agg.packets;
                    }
                    let flow =
                        FlowTuple { src: key.src, dst: key.dst, proto: key.proto, ports: ports.map(|[s, d]| (s, d)) };
                    let fk = FlowKey::of(&flow);
                    match self.table.get_mut(&fk) {
                        Some(a) => a.absorb(&agg),
                        None => {
                            self.acc.untracked_packets += agg.packets;
                            self.sketch.insert_flow(&fk);
                        }
                    }
                }
                _ => {
                    let (first, last) = (r0 + before_first, r0 + before_last);
                    if first > w {
                        settled_unmatched += agg.packets;
                        records.push((key.tuple(), agg));
                    } else {
                        if last > w {
                            uncertain += agg.packets;
                        }
                        let held = Held { agg, before_first: first, before_last: last };
                        self.held
                            .entry(key)
                            .and_modify(|e| {
                                e.agg.absorb(&agg);
                                e.before_last = e.before_last.max(last);
                            })
                            .or_insert(held);
                    }
                }
            }
        }
        if !self.memory.is_empty() {
            uncertain += next.fragments.unheld;
        }

        // Flows, in the order of their first packets.
        records.extend(next.flows.iter().map(|f| {
            let t = FlowTuple { src: f.0, dst: f.1, proto: f.2, ports: ports(f.3) };
            (t, Agg { first: f.4 + p0, queue: f.5, packets: f.6, bytes: f.7, split: f.8 })
        }));
        // (Already in order but for the settled fragments: a stable sort of
        // sorted runs is linear.)
        records.sort_by_key(|(_, a)| a.first);
        self.table.reserve(records.len().min(max_flows.saturating_sub(self.table.len())));
        for (t, a) in records {
            let key = FlowKey::of(&t);
            if let Some(e) = self.table.get_mut(&key) {
                e.absorb(&a);
            } else if self.table.len() < max_flows {
                self.table.insert(key, a);
            } else {
                self.acc.untracked_packets += a.packets;
                self.sketch.insert_flow(&key);
            }
        }
        if had_flows {
            self.acc.accuracy.flow_packets += next.untracked_packets;
        }
        self.acc.accuracy.flow_packets += next.accuracy.flow_packets;
        self.acc.accuracy.fragment_packets += next.accuracy.fragment_packets + uncertain;
        self.acc.untracked_packets += next.untracked_packets;
        self.sketch
            .or_words(&next.untracked_sketch)
            .ok_or_else(|| MergeError::Malformed("the untracked-flow sketch is out of range".into()))?;

        // The offset-0 fragments later inputs may still match.
        for m in &next.fragment_memory {
            self.memory.insert(FragKey { src: m.0, dst: m.1, proto: m.2, id: m.3 }, (m.4, m.5 + r0));
        }
        let remembered = r0 + next.fragments.first;
        self.memory.retain(|_, (_, seq)| remembered - 1 - *seq <= w);

        // Counters.
        let a = &mut self.acc;
        a.packets_read += next.packets_read;
        a.bytes_read += next.bytes_read;
        add_loads(&mut a.queues, &next.queues);
        if let (Some(ai), Some(ni)) = (a.inner.as_mut(), next.inner.as_ref()) {
            add_loads(&mut ai.queues, &ni.queues);
            ai.hashed_on_inner += ni.hashed_on_inner;
            add_maps(&mut ai.hashed_on_outer, &ni.hashed_on_outer);
        }
        for (name, e) in &next.encap {
            if let Some(ae) = a.encap.get_mut(name) {
                ae.packets += e.packets;
                ae.bytes += e.bytes;
                add_vec(&mut ae.queues, &e.queues);
                add_vec(&mut ae.inner_queues, &e.inner_queues);
            }
        }
        a.unhashed.non_ip += next.unhashed.non_ip;
        a.unhashed.pppoe += next.unhashed.pppoe;
        a.unhashed.no_hash_type += next.unhashed.no_hash_type;
        add_maps(&mut a.parse_errors, &next.parse_errors);
        add_maps(&mut a.unsupported_linktypes, &next.unsupported_linktypes);
        a.fragments.packets += next.fragments.packets;
        a.fragments.first += next.fragments.first;
        a.fragments.unmatched += next.fragments.unmatched + settled_unmatched;
        a.fragments.unheld += next.fragments.unheld;
        Ok(())
    }

    /// The merged state.
    pub fn finish(self) -> State {
        let mut acc = self.acc;
        if let Some(first) = self.first {
            return first;
        }
        let mut flows: Vec<FlowRecord> = self.table.iter().map(|(k, a)| flow_record(&k.tuple(), a)).collect();
        flows.sort_unstable_by_key(|f| f.4);
        acc.flows = flows;
        let mut held: Vec<HeldRecord> = self
            .held
            .iter()
            .map(|(k, h)| {
                let a = &h.agg;
                HeldRecord(
                    k.src,
                    k.dst,
                    k.proto,
                    k.id,
                    a.first,
                    a.queue,
                    a.packets,
                    a.bytes,
                    a.split,
                    h.before_first,
                    h.before_last,
                )
            })
            .collect();
        held.sort_unstable_by_key(|h| h.4);
        acc.held_fragments = held;
        let mut memory: Vec<FragMemory> =
            self.memory.iter().map(|(k, &(p, seq))| FragMemory(k.src, k.dst, k.proto, k.id, p, seq)).collect();
        memory.sort_unstable_by_key(|m| m.5);
        acc.fragment_memory = memory;
        acc.untracked_sketch = self.sketch.words();
        acc
    }
}

/// Merges states given in time order (see [`Merger`]).
pub fn merge(states: impl IntoIterator<Item = State>) -> Result<Option<State>, MergeError> {
    let mut it = states.into_iter();
    let Some(first) = it.next() else { return Ok(None) };
    let mut m = Merger::new(first)?;
    for s in it {
        m.push(s)?;
    }
    Ok(Some(m.finish()))
}
