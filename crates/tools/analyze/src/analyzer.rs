//! [`Analyzer`]: frames in, [`Report`] out.

use crate::flows::{FlowStats, FlowTable, FragTable};
use crate::report::{
    DirectionSplit, Drops, EncapStats, FlowSummary, FragmentSummary, Imbalance, InnerQueueLoad, InnerSpread,
    OuterHashed, QueueLoad, Report, RssSummary, SplitCount, SplitFlows, TopFlow, Unhashed, SCHEMA,
};
use flowsteer_rss::{Fields, KeyKind, Mapping, Placement, QueueId, RssConfig};
use flowsteer_wire::{
    parse_frame, proto, Encap, FlowTuple, InnerMiss, L3Info, LinkType, ParseError, ParseOptions, Parsed,
};
use std::cmp::Ordering;
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

/// Encapsulations reported separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EncapKind {
    Vlan,
    Qinq,
    Vxlan,
    Gre,
    IpInIp,
    Pppoe,
    Geneve,
    VxlanGpe,
    GtpU,
}

impl EncapKind {
    const ALL: [EncapKind; 9] = [
        EncapKind::Vlan,
        EncapKind::Qinq,
        EncapKind::Vxlan,
        EncapKind::Gre,
        EncapKind::IpInIp,
        EncapKind::Pppoe,
        EncapKind::Geneve,
        EncapKind::VxlanGpe,
        EncapKind::GtpU,
    ];

    fn of(encap: Encap) -> EncapKind {
        match encap {
            Encap::Vxlan { .. } => EncapKind::Vxlan,
            Encap::Gre { .. } => EncapKind::Gre,
            Encap::Pppoe { .. } => EncapKind::Pppoe,
            Encap::IpInIp => EncapKind::IpInIp,
            Encap::Geneve { .. } => EncapKind::Geneve,
            Encap::VxlanGpe { .. } => EncapKind::VxlanGpe,
            Encap::GtpU { .. } => EncapKind::GtpU,
        }
    }

    fn name(self) -> &'static str {
        match self {
            EncapKind::Vlan => "vlan",
            EncapKind::Qinq => "qinq",
            EncapKind::Vxlan => "vxlan",
            EncapKind::Gre => "gre",
            EncapKind::IpInIp => "ipip",
            EncapKind::Pppoe => "pppoe",
            EncapKind::Geneve => "geneve",
            EncapKind::VxlanGpe => "vxlan_gpe",
            EncapKind::GtpU => "gtpu",
        }
    }

    fn nic(self) -> &'static str {
        match self {
            EncapKind::Vlan => "hashed on the IP header behind the tag",
            EncapKind::Qinq => {
                "hashed on the IP header behind both tags (a NIC that parses one tag only does not hash it)"
            }
            EncapKind::Vxlan => {
                "hashed on the outer headers: a tunnel between two endpoints lands on one queue unless UDP is hashed on the 4-tuple and source ports vary"
            }
            EncapKind::Gre => "hashed on the outer addresses: a tunnel between two endpoints lands on one queue",
            EncapKind::IpInIp => {
                "hashed on the outer addresses: a tunnel between two endpoints lands on one queue"
            }
            EncapKind::Pppoe => "not hashed (no outer IP header): everything lands on the queue of RETA entry 0",
            EncapKind::Geneve | EncapKind::VxlanGpe => {
                "hashed on the outer headers: a tunnel between two endpoints lands on one queue unless UDP is hashed on the 4-tuple and the encapsulating side varies the source port per inner flow"
            }
            EncapKind::GtpU => {
                "hashed on the outer headers: every user of a tunnel endpoint pair lands on one queue (port 2152 both ways, so the 4-tuple does not help)"
            }
        }
    }
}

/// Per-kind counters; queue vectors are indexed by queue number.
#[derive(Clone, Debug)]
struct EncapCounter {
    load: Load,
    outer_queues: Vec<u64>,
    inner_queues: Vec<u64>,
}

/// Why a packet was hashed on its outer headers under `--inner`, one
/// fixed slot each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OuterReason {
    /// No encapsulation recognised or suspected.
    NotTunnelled,
    /// A recognised tunnel carrying something other than IP.
    TunnelNotIp,
    /// A recognised tunnel whose header or inner packet is cut or malformed.
    TunnelMalformed,
    /// Traffic that looks like a tunnel this parser does not open.
    UnknownTunnel,
    /// A non-first fragment of the outer packet: nothing behind it is visible.
    OuterFragment,
}

impl OuterReason {
    const ALL: [OuterReason; 5] = [
        OuterReason::NotTunnelled,
        OuterReason::TunnelNotIp,
        OuterReason::TunnelMalformed,
        OuterReason::UnknownTunnel,
        OuterReason::OuterFragment,
    ];

    fn name(self) -> &'static str {
        match self {
            OuterReason::NotTunnelled => "not_tunnelled",
            OuterReason::TunnelNotIp => "tunnel_not_ip",
            OuterReason::TunnelMalformed => "tunnel_malformed",
            OuterReason::UnknownTunnel => "unknown_tunnel",
            OuterReason::OuterFragment => "outer_fragment",
        }
    }

    /// Why a packet with no inner header was hashed on its outer one.
    fn of(parsed: &Parsed) -> OuterReason {
        match (parsed.inner_miss, parsed.encap, &parsed.outer) {
            (Some(InnerMiss::NotIp), _, _) => OuterReason::TunnelNotIp,
            (Some(InnerMiss::Malformed), _, _) => OuterReason::TunnelMalformed,
            // PPPoE carrying something else than IP (LCP, ...).
            (None, Some(Encap::Pppoe { .. }), _) => OuterReason::TunnelNotIp,
            (None, Some(_), _) => OuterReason::TunnelMalformed,
            (None, None, Some(l3)) if l3.frag.is_some_and(|f| !f.is_first()) => OuterReason::OuterFragment,
            (None, None, Some(l3)) if is_unknown_tunnel(l3) => OuterReason::UnknownTunnel,
            (None, None, _) => OuterReason::NotTunnelled,
        }
    }
}

/// Protocols and UDP ports of encapsulations this parser does not open:
/// GRE it could not read (version 1, PPTP), ESP (50, encrypted), L2TPv3
/// (115), MPLS in IP (137); UDP to L2TP (1701), Teredo (3544), IPsec NAT
/// traversal (4500), GRE in UDP (4754), MPLS in UDP (6635).
fn is_unknown_tunnel(l3: &L3Info) -> bool {
    const ESP: u8 = 50;
    const L2TPV3: u8 = 115;
    const MPLS_IN_IP: u8 = 137;
    match l3.tuple.proto {
        proto::GRE | ESP | L2TPV3 | MPLS_IN_IP => true,
        proto::UDP => l3.tuple.ports.is_some_and(|(_, d)| matches!(d, 1701 | 3544 | 4500 | 4754 | 6635)),
        _ => false,
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct UnhashedCounts {
    non_ip: u64,
    pppoe: u64,
    no_hash_type: u64,
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
    fragments: FragmentSummary,
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
            fragments: FragmentSummary { packets: 0, first: 0, unmatched: 0 },
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

    /// Accounts one captured frame: its pcap `LINKTYPE_*`, the captured
    /// bytes and the original (wire) length.
    pub fn feed(&mut self, linktype: u32, data: &[u8], orig_len: u32) {
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
            let tuple = self.flow_tuple(l3);
            self.flows.record(tuple, placement.queue, bytes);
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
    /// fragment named, when that was seen.
    #[inline]
    fn flow_tuple(&mut self, l3: &L3Info) -> FlowTuple {
        let Some(frag) = l3.frag else {
            return l3.tuple;
        };
        self.fragments.packets += 1;
        if frag.is_first() {
            self.fragments.first += 1;
            self.frags.remember(&l3.tuple, frag.id);
            return l3.tuple;
        }
        match self.frags.flow_of(&l3.tuple, frag.id) {
            Some(flow) => flow,
            None => {
                self.fragments.unmatched += 1;
                l3.tuple
            }
        }
    }

    /// The report.
    pub fn finish(mut self) -> Report {
        self.flows.flush();
        let config = &self.config;
        let cpu = |q: usize| config.cpu_for(QueueId(q as u16)).0;
        let mut flows_per_queue = vec![0u64; self.queues.len()];
        let mut frag_split = SplitCount { flows: 0, packets: 0 };
        let mut directions = DirectionSplit { connections: 0, split: 0, packets: 0 };
        for (tuple, stats) in self.flows.iter() {
            if let Some(n) = flows_per_queue.get_mut(usize::from(stats.queue.0)) {
                *n += 1;
            }
            if stats.split {
                frag_split.flows += 1;
                frag_split.packets += stats.packets;
            }
            let reverse = tuple.reversed();
            if tuple_order(&tuple, &reverse) == Ordering::Less {
                if let Some(back) = self.flows.get(&reverse) {
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
            .map(|(q, (load, &flows))| QueueLoad {
                queue: q as u16,
                cpu: cpu(q),
                packets: load.packets,
                bytes: load.bytes,
                flows,
            })
            .collect();
        let analysed_packets = queues.iter().map(|q| q.packets).sum();
        let analysed_bytes = queues.iter().map(|q| q.bytes).sum();
        let imbalance = imbalance_of(self.queues.iter());

        let inner = self.opts.inner.then(|| InnerSpread {
            queues: self
                .inner_queues
                .iter()
                .enumerate()
                .map(|(q, l)| InnerQueueLoad { queue: q as u16, cpu: cpu(q), packets: l.packets, bytes: l.bytes })
                .collect(),
            imbalance: imbalance_of(self.inner_queues.iter()),
            hashed_on_inner: self.hashed_on_inner,
            hashed_on_outer: OuterHashed {
                packets: self.hashed_on_outer.iter().sum(),
                by_reason: OuterReason::ALL
                    .iter()
                    .map(|&r| (r.name(), self.hashed_on_outer.get(r as usize).copied().unwrap_or(0)))
                    .collect(),
            },
        });

        let encap = EncapKind::ALL
            .iter()
            .zip(&self.encap)
            .map(|(kind, c)| {
                let hit = |v: &[u64]| v.iter().filter(|&&n| n > 0).count();
                let stats = EncapStats {
                    packets: c.load.packets,
                    bytes: c.load.bytes,
                    queues_hit: hit(&c.outer_queues),
                    inner_queues_hit: self.opts.inner.then(|| hit(&c.inner_queues)),
                    nic: kind.nic(),
                };
                (kind.name(), stats)
            })
            .collect();

        let parse_errors = ParseError::ALL
            .iter()
            .filter_map(|e| {
                let n = self.parse_errors.get(e.index()).copied().unwrap_or(0);
                (n > 0).then_some((e.reason(), n))
            })
            .collect();
        let mut drops = Drops { total: 0, parse_errors, unsupported_linktypes: self.unsupported_linktypes };
        drops.total = drops.parse_errors.values().sum::<u64>() + drops.unsupported_linktypes.values().sum::<u64>();
        let u = self.unhashed;

        Report {
            schema: SCHEMA,
            rss: rss_summary(config),
            packets_read: self.packets_read,
            bytes_read: self.bytes_read,
            analysed_packets,
            analysed_bytes,
            conservation_ok: self.packets_read == analysed_packets + drops.total,
            queues,
            imbalance,
            flows: FlowSummary {
                tracked: self.flows.len() as u64,
                max_flows: self.opts.max_flows,
                untracked_flows: self.flows.untracked.estimate(),
                untracked_packets: self.flows.untracked_packets,
            },
            fragments: self.fragments,
            split_flows: SplitFlows { fragments: frag_split, directions },
            unhashed: Unhashed {
                packets: u.non_ip + u.pppoe + u.no_hash_type,
                queue: self.unhashed_placement.queue.0,
                non_ip: u.non_ip,
                pppoe: u.pppoe,
                no_hash_type: u.no_hash_type,
            },
            encap,
            inner,
            top_flows: top_flows(&self.flows, self.opts.top, config),
            drops,
        }
    }
}

fn imbalance_of<'a>(loads: impl Iterator<Item = &'a Load> + Clone) -> Imbalance {
    let packets: Vec<u64> = loads.clone().map(|l| l.packets).collect();
    let bytes: Vec<u64> = loads.map(|l| l.bytes).collect();
    Imbalance::of(&packets, &bytes)
}

/// A total order on tuples (for stable reports and to visit each
/// connection once).
fn tuple_order(a: &FlowTuple, b: &FlowTuple) -> Ordering {
    (a.src, a.dst, a.proto, a.ports).cmp(&(b.src, b.dst, b.proto, b.ports))
}

fn top_flows(flows: &FlowTable, n: usize, config: &RssConfig) -> Vec<TopFlow> {
    if n == 0 {
        return Vec::new();
    }
    let mut all: Vec<(FlowTuple, &FlowStats)> = flows.iter().collect();
    let heavier = |a: &(FlowTuple, &FlowStats), b: &(FlowTuple, &FlowStats)| {
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
            queue: s.queue.0,
            cpu: config.cpu_for(s.queue).0,
            packets: s.packets,
            bytes: s.bytes,
            split: s.split,
        })
        .collect()
}

fn rss_summary(config: &RssConfig) -> RssSummary {
    RssSummary {
        key: match config.key().kind() {
            KeyKind::MicrosoftDefault => "microsoft",
            KeyKind::Symmetric => "symmetric",
            KeyKind::Random | KeyKind::Seeded(_) => "random",
            KeyKind::User => "user",
        },
        key_len: config.key().len(),
        hash_types: config.types.to_string(),
        fragments_on_2tuple: config.types.fragments_on_2tuple,
        reta_size: config.reta.len(),
        queues: config.queue_count(),
        mapping: match config.mapping {
            Mapping::Reta => "reta",
            Mapping::RpsScale => "rps",
        },
        hash_impl: config.hasher().implementation().name(),
    }
}
