//! [`Analyzer`]: frames in, [`Report`] out.

use crate::flows::{FlowTable, FragKey, FragTable};
use crate::kinds::{EncapKind, OuterReason};
use crate::report::Report;
use crate::state::{
    fingerprint, EncapState, FlowRecord, FragMemory, FragmentState, HeldRecord, InnerState, Load as LoadState,
    RssIdentity, State, StateAccuracy, StateOptions, UnhashedState,
};
use flowsteer_rss::{Fields, KeyKind, Mapping, Placement, QueueId, RssConfig};
use flowsteer_wire::{parse_frame, Encap, FlowTuple, L3Info, LinkType, ParseError, ParseOptions, Parsed};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

/// Default [`AnalyzeOptions::max_flows`].
pub const DEFAULT_MAX_FLOWS: usize = 1_000_000;
/// Default [`AnalyzeOptions::max_fragments`].
pub const DEFAULT_MAX_FRAGMENTS: usize = 65_536;
/// Default [`AnalyzeOptions::top`].
pub const DEFAULT_TOP: usize = 10;

/// What to analyse and how much memory to spend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalyzeOptions {
    /// Also hash the inner headers of tunnelled and PPPoE traffic and
    /// report that spread ([`Report::inner`]).
    pub inner: bool,
    /// UDP destination port that marks VXLAN (0: no VXLAN recognition).
    pub vxlan_port: u16,
    /// Flow table cap; see [`crate::flows`] for the overflow policy.
    pub max_flows: usize,
    /// Fragment table cap (datagrams); oldest forgotten first.
    pub max_fragments: usize,
    /// Heaviest flows to report.
    pub top: usize,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            inner: false,
            vxlan_port: flowsteer_wire::VXLAN_PORT,
            max_flows: DEFAULT_MAX_FLOWS,
            max_fragments: DEFAULT_MAX_FRAGMENTS,
            top: DEFAULT_TOP,
        }
    }
}

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Load {
    packets: u64,
    bytes: u64,
}

impl Load {
    #[inline]
    fn add(&mut self, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
    }
}

/// Per-kind counters; queue vectors are indexed by queue number.
#[derive(Clone, Debug)]
struct EncapCounter {
    load: Load,
    outer_queues: Vec<u64>,
    inner_queues: Vec<u64>,
}

#[derive(Clone, Copy, Debug, Default)]
struct UnhashedCounts {
    non_ip: u64,
    pppoe: u64,
    no_hash_type: u64,
}

/// Later fragments of one datagram seen before any offset-0 fragment of it.
#[derive(Clone, Copy, Debug)]
struct HeldGroup {
    first: u64,
    queue: QueueId,
    packets: u64,
    bytes: u64,
    split: bool,
    before_first: u64,
    before_last: u64,
}

/// Predicts what a NIC with one RSS configuration does with a stream of
/// captured frames.
///
/// Sans-IO: the caller reads the capture and hands each record to
/// [`Analyzer::feed`]; [`Analyzer::finish`] builds the [`Report`]. Never
/// prints, panics or fails on input: a frame that does not parse is counted
/// under its [`flowsteer_wire::ParseError::reason`].
///
/// Per packet: one [`parse_frame`], one Toeplitz hash (two with
/// [`AnalyzeOptions::inner`]), one flow-table update; no allocation once the
/// tables have grown.
///
/// Thread safety: `Send`, not shared; one analyzer per thread.
pub struct Analyzer {
    config: RssConfig,
    opts: AnalyzeOptions,
    parse_opts: ParseOptions,
    /// Where unhashed packets go (hash 0).
    unhashed_placement: Placement,
    packets_read: u64,
    bytes_read: u64,
    queues: Vec<Load>,
    /// Per queue under inner-header hashing; empty without `opts.inner`.
    inner_queues: Vec<Load>,
    /// Under inner-header hashing: packets hashed on an inner header.
    hashed_on_inner: u64,
    /// Under inner-header hashing: packets hashed on their outer headers,
    /// by [`OuterReason`].
    hashed_on_outer: [u64; OuterReason::ALL.len()],
    flows: FlowTable,
    frags: FragTable,
    fragments: FragmentState,
    /// Later fragments that no offset-0 fragment of this input named, early
    /// enough in the input for one of a previous input to name them (kept
    /// apart so a merge can attribute them; see [`crate::state`]).
    held: FxHashMap<FragKey, HeldGroup>,
    encap: Vec<EncapCounter>,
    unhashed: UnhashedCounts,
    /// Parse errors by reason, one fixed slot each (named only in the report).
    parse_errors: [u64; ParseError::COUNT],
    unsupported_linktypes: BTreeMap<u32, u64>,
}

impl Analyzer {
    pub fn new(config: &RssConfig, opts: AnalyzeOptions) -> Analyzer {
        let queue_count = config.queue_count().max(1);
        let inner_len = if opts.inner { queue_count } else { 0 };
        let counter = EncapCounter {
            load: Load::default(),
            outer_queues: vec![0; queue_count],
            inner_queues: vec![0; inner_len],
        };
        Analyzer {
            config: config.clone(),
            opts,
            parse_opts: ParseOptions { inner: opts.inner, vxlan_port: opts.vxlan_port },
            unhashed_placement: config.place_hash(0, Fields::None),
            packets_read: 0,
            bytes_read: 0,
            queues: vec![Load::default(); queue_count],
            inner_queues: vec![Load::default(); inner_len],
            hashed_on_inner: 0,
            hashed_on_outer: [0; OuterReason::ALL.len()],
            flows: FlowTable::new(opts.max_flows),
            frags: FragTable::new(opts.max_fragments),
            fragments: FragmentState::default(),
            held: FxHashMap::default(),
            encap: vec![counter; EncapKind::ALL.len()],
            unhashed: UnhashedCounts::default(),
            parse_errors: [0; ParseError::COUNT],
            unsupported_linktypes: BTreeMap::new(),
        }
    }

    /// Packets fed so far.
    pub fn packets_read(&self) -> u64 {
        self.packets_read
    }

    /// Their wire bytes.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Accounts one captured frame: its pcap `LINKTYPE_*`, the captured
    /// bytes and the original (wire) length.
    pub fn feed(&mut self, linktype: u32, data: &[u8], orig_len: u32) {
        let position = self.packets_read;
        self.packets_read += 1;
        let bytes = u64::from(orig_len).max(data.len() as u64);
        self.bytes_read += bytes;
        let Some(link) = LinkType::from_pcap(linktype) else {
            *self.unsupported_linktypes.entry(linktype).or_insert(0) += 1;
            return;
        };
        let parsed = match parse_frame(data, link, &self.parse_opts) {
            Ok(p) => p,
            Err(e) => {
                if let Some(slot) = self.parse_errors.get_mut(e.index()) {
                    *slot += 1;
                }
                return;
            }
        };
        let (placement, flow_header) = self.place_outer(&parsed);
        let queue = usize::from(placement.queue.0);
        if let Some(load) = self.queues.get_mut(queue) {
            load.add(bytes);
        }
        if let Some(l3) = flow_header {
            if let Some(tuple) = self.flow_tuple(l3, placement.queue, bytes, position) {
                self.flows.record(tuple, placement.queue, bytes, position);
            }
        }
        let inner_queue = if self.opts.inner {
            let p = match &parsed.inner {
                Some(inner) => {
                    self.hashed_on_inner += 1;
                    self.config.place(&inner.tuple, inner.is_fragment())
                }
                None => {
                    if let Some(n) = self.hashed_on_outer.get_mut(OuterReason::of(&parsed) as usize) {
                        *n += 1;
                    }
                    placement
                }
            };
            let q = usize::from(p.queue.0);
            if let Some(load) = self.inner_queues.get_mut(q) {
                load.add(bytes);
            }
            q
        } else {
            queue
        };
        let tags = match parsed.vlan_count {
            0 => None,
            1 => Some(EncapKind::Vlan),
            _ => Some(EncapKind::Qinq),
        };
        for kind in [tags, parsed.encap.map(EncapKind::of)].into_iter().flatten() {
            if let Some(c) = self.encap.get_mut(kind as usize) {
                c.load.add(bytes);
                if let Some(n) = c.outer_queues.get_mut(queue) {
                    *n += 1;
                }
                if let Some(n) = c.inner_queues.get_mut(inner_queue) {
                    *n += 1;
                }
            }
        }
    }

    /// Where the NIC puts the frame, and the IP header that names its flow
    /// (the outer one; for PPPoE the one inside; none for non-IP).
    #[inline]
    fn place_outer<'p>(&mut self, parsed: &'p Parsed) -> (Placement, Option<&'p L3Info>) {
        match (&parsed.outer, parsed.encap) {
            (Some(l3), _) => {
                let p = self.config.place(&l3.tuple, l3.is_fragment());
                if p.fields == Fields::None {
                    self.unhashed.no_hash_type += 1;
                }
                (p, Some(l3))
            }
            (None, Some(Encap::Pppoe { .. })) => {
                self.unhashed.pppoe += 1;
                (self.unhashed_placement, parsed.inner.as_ref())
            }
            (None, _) => {
                self.unhashed.non_ip += 1;
                (self.unhashed_placement, None)
            }
        }
    }

    /// The flow a packet belongs to: its tuple, except that a later
    /// fragment (no ports) belongs to the flow its datagram's offset-0
    /// fragment named, when that was seen within the window. `None`: a
    /// later fragment held apart (its datagram's offset-0 fragment may be in
    /// a previous input).
    #[inline]
    fn flow_tuple(&mut self, l3: &L3Info, queue: QueueId, bytes: u64, position: u64) -> Option<FlowTuple> {
        let Some(frag) = l3.frag else {
            return Some(l3.tuple);
        };
        self.fragments.packets += 1;
        if frag.is_first() {
            self.fragments.first += 1;
            self.frags.remember(&l3.tuple, frag.id);
            return Some(l3.tuple);
        }
        if let Some(flow) = self.frags.flow_of(&l3.tuple, frag.id) {
            return Some(flow);
        }
        let before = self.frags.remembered();
        if before <= self.frags.window() {
            // No offset-0 fragment of this datagram in this input so far.
            let held_len = self.held.len();
            match self.held.entry(FragKey::of(&l3.tuple, frag.id)) {
                Entry::Occupied(mut e) => {
                    let g = e.get_mut();
                    g.packets += 1;
                    g.bytes += bytes;
                    g.split |= g.queue != queue;
                    g.before_last = before;
                    return None;
                }
                Entry::Vacant(e) if held_len < self.opts.max_fragments => {
                    e.insert(HeldGroup {
                        first: position,
                        queue,
                        packets: 1,
                        bytes,
                        split: false,
                        before_first: before,
                        before_last: before,
                    });
                    return None;
                }
                Entry::Vacant(_) => self.fragments.unheld += 1,
            }
        }
        self.fragments.unmatched += 1;
        Some(l3.tuple)
    }

    /// The report.
    pub fn finish(self) -> Report {
        let top = self.opts.top;
        self.into_state().report(top)
    }

    /// The mergeable state the report is derived from ([`State::report`]);
    /// see [`crate::state`] for merging it with other inputs' states.
    pub fn into_state(mut self) -> State {
        self.flows.flush();
        let config = &self.config;
        let queue_count = self.queues.len();
        let mut flows: Vec<FlowRecord> = self
            .flows
            .iter()
            .map(|(t, s)| {
                FlowRecord(
                    t.src,
                    t.dst,
                    t.proto,
                    t.ports.map(|(a, b)| [a, b]),
                    s.first,
                    s.queue.0,
                    s.packets,
                    s.bytes,
                    s.split,
                )
            })
            .collect();
        flows.sort_unstable_by_key(|f| f.4);
        let mut held: Vec<HeldRecord> = self
            .held
            .iter()
            .map(|(k, g)| {
                HeldRecord(
                    k.src,
                    k.dst,
                    k.proto,
                    k.id,
                    g.first,
                    g.queue.0,
                    g.packets,
                    g.bytes,
                    g.split,
                    g.before_first,
                    g.before_last,
                )
            })
            .collect();
        held.sort_unstable_by_key(|h| h.4);
        let fragment_memory = self
            .frags
            .memory()
            .into_iter()
            .map(|(k, t, seq)| FragMemory(k.src, k.dst, k.proto, k.id, t.ports.map(|(a, b)| [a, b]), seq))
            .collect();
        let load = |l: &Load| LoadState(l.packets, l.bytes);
        let inner = self.opts.inner.then(|| InnerState {
            queues: self.inner_queues.iter().map(load).collect(),
            hashed_on_inner: self.hashed_on_inner,
            hashed_on_outer: OuterReason::ALL
                .iter()
                .map(|&r| (r.name().to_string(), self.hashed_on_outer.get(r as usize).copied().unwrap_or(0)))
                .collect(),
        });
        let encap = EncapKind::ALL
            .iter()
            .zip(&self.encap)
            .map(|(kind, c)| {
                let state = EncapState {
                    packets: c.load.packets,
                    bytes: c.load.bytes,
                    queues: c.outer_queues.clone(),
                    inner_queues: c.inner_queues.clone(),
                };
                (kind.name().to_string(), state)
            })
            .collect();
        let parse_errors = ParseError::ALL
            .iter()
            .filter_map(|e| {
                let n = self.parse_errors.get(e.index()).copied().unwrap_or(0);
                (n > 0).then(|| (e.reason().to_string(), n))
            })
            .collect();
        let u = self.unhashed;
        State {
            rss: rss_identity(config, queue_count, self.unhashed_placement.queue.0),
            options: StateOptions {
                inner: self.opts.inner,
                vxlan_port: self.opts.vxlan_port,
                max_flows: self.opts.max_flows,
                max_fragments: self.opts.max_fragments,
            },
            packets_read: self.packets_read,
            bytes_read: self.bytes_read,
            queues: self.queues.iter().map(load).collect(),
            inner,
            encap,
            unhashed: UnhashedState { non_ip: u.non_ip, pppoe: u.pppoe, no_hash_type: u.no_hash_type },
            parse_errors,
            unsupported_linktypes: self.unsupported_linktypes,
            fragments: self.fragments,
            flows,
            held_fragments: held,
            fragment_memory,
            untracked_packets: self.flows.untracked_packets,
            untracked_sketch: self.flows.untracked.words(),
            accuracy: StateAccuracy::default(),
        }
    }
}

fn rss_identity(config: &RssConfig, queues: usize, unhashed_queue: u16) -> RssIdentity {
    RssIdentity {
        key: match config.key().kind() {
            KeyKind::MicrosoftDefault => "microsoft",
            KeyKind::Symmetric => "symmetric",
            KeyKind::Random | KeyKind::Seeded(_) => "random",
            KeyKind::User => "user",
        }
        .to_string(),
        key_len: config.key().len(),
        key_fingerprint: fingerprint(config.key().as_bytes()),
        hash_types: config.types.to_string(),
        fragments_on_2tuple: config.types.fragments_on_2tuple,
        reta: config.reta.entries().iter().map(|q| q.0).collect(),
        queues,
        mapping: match config.mapping {
            Mapping::Reta => "reta",
            Mapping::RpsScale => "rps",
        }
        .to_string(),
        cpus: (0..queues).map(|q| config.cpu_for(QueueId(q as u16)).0).collect(),
        hash_impl: config.hasher().implementation().name().to_string(),
        unhashed_queue,
    }
}
