//! The bounded tables behind the report: flows, fragment datagrams, and an
//! estimate of the flows that did not fit.
//!
//! * `FlowTable`: one entry per flow tuple, at most `max_flows` entries
//!   (default [`crate::DEFAULT_MAX_FLOWS`]). Overflow policy: no eviction; a
//!   packet of a flow that is not in the full table is counted in
//!   `untracked_packets` (its queue counters are still updated by the caller)
//!   and its tuple goes into a `DistinctCounter` that estimates
//!   `untracked_flows`.
//! * `FragTable`: (src, dst, proto, fragment id) -> the flow tuple learnt
//!   from the datagram's offset-0 fragment, at most `max_fragments` entries
//!   (default [`crate::DEFAULT_MAX_FRAGMENTS`]). Overflow policy: two
//!   generations; when the current one holds half the budget the previous
//!   one is dropped, so the oldest datagrams are forgotten first. A later
//!   fragment matches only an offset-0 fragment followed by at most half the
//!   budget of others (the window), which keeps the answer the same when an
//!   archive is analysed file by file and merged.
//!
//! Memory: a flow takes one 64-byte slot and the table is at most 5/8
//! full, so the default cap of 1,000,000 flows needs 2^21 slots, 128 MB. A
//! fragment entry is about 90 bytes: 6 MB at the default cap.
//!
//! Hashing: rustc's FxHash (`rustc-hash` 2: one multiply per word, the
//! result rotated so that the well-mixed high product bits become the low
//! bits a table indexes with). Unkeyed and deterministic, so the reports
//! are reproducible; not DoS-resistant (whoever writes the capture can pick
//! colliding tuples), which is acceptable for offline analysis of a capture
//! the user chose. A table fed from the network uses a keyed hash instead
//! (`flowsteer-prim`'s SipHash).

use flowsteer_prim::mix64;
use flowsteer_rss::QueueId;
use flowsteer_wire::FlowTuple;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Counters of one tracked flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowStats {
    pub packets: u64,
    pub bytes: u64,
    /// The queue of the flow's first packet.
    pub queue: QueueId,
    /// Some packet of the flow landed on another queue than the first.
    pub split: bool,
    /// Position of the flow's first packet in the input (0 = the first
    /// packet fed), saturating at [`MAX_POSITION`].
    pub first: u64,
}

/// The largest packet position a slot stores (47 bits: 1.4e14 packets).
pub(crate) const MAX_POSITION: u64 = (1 << 47) - 1;

/// [`FlowStats`] as a slot stores it: the queue, the split flag and the
/// first packet's position packed into one word, so that key and counters
/// still fit one cache line.
#[derive(Clone, Copy, Debug)]
struct PackedStats {
    packets: u64,
    bytes: u64,
    /// `first << 17 | split << 16 | queue`.
    tag: u64,
}

impl PackedStats {
    const EMPTY: PackedStats = PackedStats { packets: 0, bytes: 0, tag: 0 };

    fn new(queue: QueueId, first: u64) -> PackedStats {
        PackedStats { packets: 0, bytes: 0, tag: (first.min(MAX_POSITION) << 17) | u64::from(queue.0) }
    }

    #[inline]
    fn queue(&self) -> u16 {
        self.tag as u16
    }

    fn unpack(&self) -> FlowStats {
        FlowStats {
            packets: self.packets,
            bytes: self.bytes,
            queue: QueueId(self.queue()),
            split: self.tag & (1 << 16) != 0,
            first: self.tag >> 17,
        }
    }
}

/// A [`FlowTuple`] packed into five words: source, destination (IPv4 as
/// the low 32 bits), then ports, protocol and flags. Compares and hashes
/// as five `u64`s; word 4 is never zero (the `USED` bit), so an all-zero
/// key marks an empty slot.
#[derive(Clone, Copy, Debug, Eq)]
pub(crate) struct FlowKey([u64; 5]);

impl PartialEq for FlowKey {
    /// Branch-free word compare (the derived one calls `memcmp`).
    #[inline]
    fn eq(&self, other: &FlowKey) -> bool {
        self.0.iter().zip(&other.0).fold(0, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

impl FlowKey {
    const EMPTY: FlowKey = FlowKey([0; 5]);
    const USED: u64 = 1 << 63;
    const SRC_V6: u64 = 1 << 43;
    const DST_V6: u64 = 1 << 42;
    const HAS_PORTS: u64 = 1 << 41;

    #[inline]
    pub(crate) fn of(t: &FlowTuple) -> FlowKey {
        let addr = |a: IpAddr| match a {
            IpAddr::V4(a) => (u128::from(u32::from(a)), false),
            IpAddr::V6(a) => (u128::from(a), true),
        };
        let (src, src_v6) = addr(t.src);
        let (dst, dst_v6) = addr(t.dst);
        let family = if src_v6 { Self::SRC_V6 } else { 0 } | if dst_v6 { Self::DST_V6 } else { 0 };
        let (ports, has_ports) = match t.ports {
            Some((s, d)) => ((u64::from(s) << 16) | u64::from(d), Self::HAS_PORTS),
            None => (0, 0),
        };
        let meta = Self::USED | family | has_ports | (u64::from(t.proto) << 32) | ports;
        FlowKey([src as u64, (src >> 64) as u64, dst as u64, (dst >> 64) as u64, meta])
    }

    pub(crate) fn tuple(&self) -> FlowTuple {
        let [s0, s1, d0, d1, meta] = self.0;
        let addr = |lo: u64, hi: u64, v6: bool| {
            let bits = (u128::from(hi) << 64) | u128::from(lo);
            if v6 {
                IpAddr::V6(Ipv6Addr::from(bits))
            } else {
                IpAddr::V4(Ipv4Addr::from(bits as u32))
            }
        };
        FlowTuple {
            src: addr(s0, s1, meta & Self::SRC_V6 != 0),
            dst: addr(d0, d1, meta & Self::DST_V6 != 0),
            proto: (meta >> 32) as u8,
            ports: (meta & Self::HAS_PORTS != 0).then_some(((meta >> 16) as u16, meta as u16)),
        }
    }

    fn is_used(&self) -> bool {
        self.0[4] & Self::USED != 0
    }
}

/// One flow: key and counters in one cache line, so a lookup touches one
/// line (plus the next on a probe collision).
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Slot {
    key: FlowKey,
    stats: PackedStats,
}

impl Slot {
    const EMPTY: Slot = Slot { key: FlowKey::EMPTY, stats: PackedStats::EMPTY };
}

/// The table's hash of a flow (also what the untracked-flow estimate counts).
#[inline]
pub(crate) fn flow_hash(key: &FlowKey) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// A flow-table update waiting for its slot's cache line.
#[derive(Clone, Copy, Debug)]
struct Pending {
    key: FlowKey,
    hash: u64,
    queue: QueueId,
    bytes: u64,
    position: u64,
}

/// Updates applied together; their slots are loaded first, all at once.
const BATCH: usize = 16;

/// Flow tuple -> counters, bounded; see the module docs.
///
/// Open addressing with linear probing over cache-line slots, at most 5/8
/// full (doubles when it gets there, up to what `cap` flows need).
/// Updates are batched: [`FlowTable::record`] queues one, and every
/// [`BATCH`] updates the slots of the whole batch are read first (their
/// cache misses overlap instead of queueing one behind the other), then
/// the updates are applied in order. With flows spread over a table much
/// larger than the caches this is the difference between about 200 ns and
/// about 40 ns per packet (`flowsteer bench analyze`, 100k flows). Call
/// [`FlowTable::flush`] before reading the table.
pub(crate) struct FlowTable {
    slots: Vec<Slot>,
    len: usize,
    cap: usize,
    pending: [Pending; BATCH],
    pending_len: usize,
    pub untracked_packets: u64,
    pub untracked: DistinctCounter,
}

impl FlowTable {
    const MIN_SLOTS: usize = 1024;

    pub fn new(cap: usize) -> FlowTable {
        let idle = Pending { key: FlowKey::EMPTY, hash: 0, queue: QueueId(0), bytes: 0, position: 0 };
        FlowTable {
            slots: vec![Slot::EMPTY; Self::MIN_SLOTS],
            len: 0,
            cap,
            pending: [idle; BATCH],
            pending_len: 0,
            untracked_packets: 0,
            untracked: DistinctCounter::default(),
        }
    }

    /// Counts one packet of `tuple` that landed on `queue`, the packet at
    /// `position` in the input (applied at the next flush).
    #[inline]
    pub fn record(&mut self, tuple: FlowTuple, queue: QueueId, bytes: u64, position: u64) {
        let key = FlowKey::of(&tuple);
        let hash = FxBuildHasher.hash_one(key);
        if let Some(p) = self.pending.get_mut(self.pending_len) {
            *p = Pending { key, hash, queue, bytes, position };
            self.pending_len += 1;
        }
        if self.pending_len == BATCH {
            self.flush();
        }
    }

    /// Applies the queued updates.
    pub fn flush(&mut self) {
        let batch = self.pending_len.min(BATCH);
        self.pending_len = 0;
        let mask = self.slots.len() - 1;
        // Touch every slot first: independent loads, so their misses overlap.
        let mut touched = 0;
        for p in &self.pending[..batch] {
            touched ^= self.slots[p.hash as usize & mask].key.0[4];
        }
        std::hint::black_box(touched);
        for i in 0..batch {
            let p = self.pending[i];
            self.apply(p);
        }
    }

    fn apply(&mut self, p: Pending) {
        let i = match self.find(&p.key, p.hash) {
            Ok(i) => i,
            Err(_) if self.len >= self.cap => {
                self.untracked_packets += 1;
                self.untracked.insert(p.hash);
                return;
            }
            Err(mut i) => {
                if (self.len + 1) * 8 > self.slots.len() * 5 {
                    self.grow();
                    i = self.find(&p.key, p.hash).unwrap_or_else(|empty| empty);
                }
                self.slots[i] = Slot { key: p.key, stats: PackedStats::new(p.queue, p.position) };
                self.len += 1;
                i
            }
        };
        let stats = &mut self.slots[i].stats;
        stats.packets += 1;
        stats.bytes += p.bytes;
        stats.tag |= u64::from(stats.queue() != p.queue.0) << 16;
    }

    /// `Ok(slot)` holding `key`, or `Err(empty slot)` where it would go.
    #[inline]
    fn find(&self, key: &FlowKey, hash: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.key == *key {
                return Ok(i);
            }
            if !slot.key.is_used() {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let bigger = vec![Slot::EMPTY; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.into_iter().filter(|s| s.key.is_used()) {
            let hash = FxBuildHasher.hash_one(slot.key);
            if let Err(i) = self.find(&slot.key, hash) {
                self.slots[i] = slot;
            }
        }
    }

    /// Tracked flows (after [`FlowTable::flush`]).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn get(&self, tuple: &FlowTuple) -> Option<FlowStats> {
        let key = FlowKey::of(tuple);
        self.find(&key, FxBuildHasher.hash_one(key)).ok().map(|i| self.slots[i].stats.unpack())
    }

    /// Every tracked flow, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (FlowTuple, FlowStats)> + '_ {
        self.slots.iter().filter(|s| s.key.is_used()).map(|s| (s.key.tuple(), s.stats.unpack()))
    }
}

/// The identity of one fragmented datagram (RFC 791 / RFC 8200: addresses,
/// protocol and identification).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FragKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub id: u32,
}

impl FragKey {
    pub(crate) fn of(tuple: &FlowTuple, id: u32) -> FragKey {
        FragKey { src: tuple.src, dst: tuple.dst, proto: tuple.proto, id }
    }

    /// The port-less tuple a fragment of this datagram carries.
    pub(crate) fn tuple(&self) -> FlowTuple {
        FlowTuple { src: self.src, dst: self.dst, proto: self.proto, ports: None }
    }
}

/// Fragment datagram -> flow tuple, bounded; see the module docs.
///
/// Matching rule: a later fragment joins the flow of the latest offset-0
/// fragment of its datagram when at most [`FragTable::window`] offset-0
/// fragments (of any datagram) were remembered after it. The two
/// generations guarantee every such entry is still held (forgetting one
/// takes two generation swaps, so more than a generation of remembers), and
/// entries further back are refused even when still held: the rule depends
/// on the distance alone, so it gives the same answer over a whole archive
/// as over its files one by one ([`crate::state`]).
pub(crate) struct FragTable {
    current: FxHashMap<FragKey, (FlowTuple, u64)>,
    previous: FxHashMap<FragKey, (FlowTuple, u64)>,
    /// Entries per generation (half the budget, at least 1); also the window.
    generation_cap: usize,
    /// Offset-0 fragments remembered so far (the next one's sequence number).
    remembered: u64,
}

impl FragTable {
    pub fn new(cap: usize) -> FragTable {
        FragTable {
            current: FxHashMap::default(),
            previous: FxHashMap::default(),
            generation_cap: (cap / 2).max(1),
            remembered: 0,
        }
    }

    /// How many later offset-0 fragments a datagram's own may be followed by
    /// and still name its flow.
    pub fn window(&self) -> u64 {
        self.generation_cap as u64
    }

    /// Offset-0 fragments remembered so far.
    pub fn remembered(&self) -> u64 {
        self.remembered
    }

    /// Remembers the flow of the datagram whose offset-0 fragment is `tuple`.
    pub fn remember(&mut self, tuple: &FlowTuple, id: u32) {
        if self.current.len() >= self.generation_cap {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.clear();
        }
        self.current.insert(FragKey::of(tuple, id), (*tuple, self.remembered));
        self.remembered += 1;
    }

    /// The flow of the datagram a later fragment (`tuple` without ports)
    /// belongs to, if its first fragment was seen within the window.
    pub fn flow_of(&self, tuple: &FlowTuple, id: u32) -> Option<FlowTuple> {
        let key = FragKey::of(tuple, id);
        let (flow, seq) = self.current.get(&key).or_else(|| self.previous.get(&key))?;
        (self.remembered - 1 - seq <= self.window()).then_some(*flow)
    }

    /// The entries a later fragment could still match: (datagram, flow,
    /// sequence number), oldest first.
    pub fn memory(&self) -> Vec<(FragKey, FlowTuple, u64)> {
        let mut v: Vec<(FragKey, FlowTuple, u64)> = self
            .current
            .iter()
            .chain(self.previous.iter().filter(|(k, _)| !self.current.contains_key(k)))
            .filter(|(_, (_, seq))| self.remembered - 1 - seq <= self.window())
            .map(|(k, (t, seq))| (*k, *t, *seq))
            .collect();
        v.sort_unstable_by_key(|e| e.2);
        v
    }
}

/// Linear counting (Whang et al., 1990) over a 2^20-bit bitmap (128 KiB,
/// allocated on first use): estimates how many distinct items were
/// inserted. Standard error about 1 % up to a few million items; the
/// estimate saturates near 14 million. Linear counting assumes the bit an
/// item sets is uniformly random, so [`DistinctCounter::insert`] passes the
/// item's table hash through a full-avalanche finaliser first: FxHash alone
/// spreads consecutive inputs too evenly (it is multiplicative), which
/// would make the estimate high.
#[derive(Clone, Default)]
pub(crate) struct DistinctCounter {
    bits: Vec<u64>,
}

impl DistinctCounter {
    const BITS_LOG2: u32 = 20;
    const BITS: usize = 1 << Self::BITS_LOG2;
    /// Words of the bitmap.
    pub const WORDS: usize = Self::BITS / 64;

    /// Counts an item by its hash.
    pub fn insert(&mut self, hash: u64) {
        if self.bits.is_empty() {
            self.bits = vec![0; Self::BITS / 64];
        }
        let bit = (mix64(hash) >> (64 - Self::BITS_LOG2)) as usize;
        if let Some(word) = self.bits.get_mut(bit / 64) {
            *word |= 1 << (bit % 64);
        }
    }

    /// Counts a flow by its table hash ([`flow_hash`]).
    pub fn insert_flow(&mut self, key: &FlowKey) {
        self.insert(flow_hash(key));
    }

    /// The non-zero words of the bitmap, as (index, word).
    pub fn words(&self) -> Vec<(u32, u64)> {
        self.bits.iter().enumerate().filter(|(_, w)| **w != 0).map(|(i, w)| (i as u32, *w)).collect()
    }

    /// Adds another counter's words (the union of what both counted).
    /// `None` when an index is out of range.
    pub fn or_words(&mut self, words: &[(u32, u64)]) -> Option<()> {
        if words.is_empty() {
            return Some(());
        }
        if self.bits.is_empty() {
            self.bits = vec![0; Self::BITS / 64];
        }
        for &(i, w) in words {
            *self.bits.get_mut(i as usize)? |= w;
        }
        Some(())
    }

    pub fn estimate(&self) -> u64 {
        if self.bits.is_empty() {
            return 0;
        }
        let m = Self::BITS as f64;
        let set: u32 = self.bits.iter().map(|w| w.count_ones()).sum();
        let zero = (Self::BITS as f64 - f64::from(set)).max(1.0);
        (-m * (zero / m).ln()).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::proto;

    fn tuple(i: u32, ports: Option<(u16, u16)>) -> FlowTuple {
        FlowTuple { src: IpAddr::V4(i.into()), dst: "10.0.0.1".parse().unwrap(), proto: proto::UDP, ports }
    }

    #[test]
    fn flow_table_caps_and_counts_overflow() {
        let mut t = FlowTable::new(2);
        for round in 0..3 {
            for i in 0..5 {
                t.record(tuple(i, Some((1, 2))), QueueId(0), 100, 0);
            }
            t.flush();
            assert_eq!(t.len(), 2, "round {round}");
        }
        assert_eq!(t.iter().map(|(_, s)| s.packets).sum::<u64>(), 6);
        assert_eq!(t.untracked_packets, 9);
        assert_eq!(t.untracked.estimate(), 3);
    }

    #[test]
    fn flow_split_is_sticky() {
        let mut t = FlowTable::new(10);
        let f = tuple(1, Some((1, 2)));
        t.record(f, QueueId(1), 10, 7);
        t.record(f, QueueId(2), 10, 8);
        t.record(f, QueueId(1), 10, 9);
        t.flush();
        let s = t.get(&f).unwrap();
        assert_eq!((s.packets, s.bytes, s.queue, s.split, s.first), (3, 30, QueueId(1), true, 7));
    }

    #[test]
    fn keys_round_trip() {
        let v6: IpAddr = "2001:db8::7".parse().unwrap();
        for t in [
            tuple(0, None),
            tuple(u32::MAX, Some((0, 65535))),
            FlowTuple { src: v6, dst: "::".parse().unwrap(), proto: 58, ports: None },
            FlowTuple { src: v6, dst: "10.1.2.3".parse().unwrap(), proto: 255, ports: Some((65535, 0)) },
            // An IPv4-mapped IPv6 address is not the IPv4 address.
            FlowTuple {
                src: "::ffff:10.0.0.1".parse().unwrap(),
                dst: "10.0.0.1".parse().unwrap(),
                proto: 6,
                ports: Some((1, 2)),
            },
        ] {
            let k = FlowKey::of(&t);
            assert!(k.is_used());
            assert_eq!(k.tuple(), t);
        }
        assert_ne!(FlowKey::of(&tuple(1, Some((1, 2)))), FlowKey::of(&tuple(1, None)));
        assert_ne!(
            FlowKey::of(&FlowTuple { src: "::a00:1".parse().unwrap(), ..tuple(0, None) }),
            FlowKey::of(&FlowTuple { src: "10.0.0.1".parse().unwrap(), ..tuple(0, None) })
        );
    }

    #[test]
    fn table_grows_and_finds_everything() {
        let mut t = FlowTable::new(usize::MAX);
        for round in 0..2u64 {
            for i in 0..20_000u32 {
                t.record(tuple(i, Some((i as u16, 9))), QueueId((i % 4) as u16), u64::from(i), u64::from(i));
            }
            t.flush();
            assert_eq!(t.len(), 20_000, "round {round}");
        }
        for i in (0..20_000u32).step_by(97) {
            let s = t.get(&tuple(i, Some((i as u16, 9)))).unwrap();
            assert_eq!(
                (s.packets, s.bytes, s.queue, s.split, s.first),
                (2, 2 * u64::from(i), QueueId((i % 4) as u16), false, u64::from(i))
            );
        }
        assert!(t.get(&tuple(20_001, None)).is_none());
        assert_eq!(t.iter().count(), 20_000);
        assert_eq!(t.untracked_packets, 0);
    }

    #[test]
    fn frag_table_forgets_oldest_generation() {
        let mut t = FragTable::new(4);
        let first = tuple(7, Some((5, 6)));
        t.remember(&first, 1);
        let later = tuple(7, None);
        assert_eq!(t.flow_of(&later, 1), Some(first));
        assert_eq!(t.flow_of(&later, 2), None);
        for id in 2..=5 {
            t.remember(&first, id);
        }
        // Generations of 2: ids 4 and 5 current, 2 and 3 previous, 1 gone.
        assert_eq!(t.flow_of(&later, 1), None);
        assert_eq!(t.flow_of(&later, 3), Some(first));
        assert_eq!(t.flow_of(&later, 5), Some(first));
        assert_eq!(t.memory().iter().map(|e| e.0.id).collect::<Vec<_>>(), [3, 4, 5]);
        // Held but beyond the window: id 1, then 3 more remembered.
        let mut t = FragTable::new(4);
        for id in 1..=3 {
            t.remember(&first, id);
        }
        assert_eq!(t.flow_of(&later, 1), Some(first));
        t.remember(&first, 4);
        assert!(t.previous.contains_key(&FragKey::of(&later, 1)));
        assert_eq!(t.flow_of(&later, 1), None);
    }

    #[test]
    fn position_and_flags_survive_packing() {
        let p = PackedStats::new(QueueId(65535), MAX_POSITION + 5);
        let s = p.unpack();
        assert_eq!((s.queue, s.first, s.split), (QueueId(65535), MAX_POSITION, false));
    }

    #[test]
    fn distinct_counter_words_merge_as_a_union() {
        let mut a = DistinctCounter::default();
        let mut b = DistinctCounter::default();
        for i in 0u64..5000 {
            a.insert(FxBuildHasher.hash_one(i));
            b.insert(FxBuildHasher.hash_one(i + 2500));
        }
        let mut u = a.clone();
        u.or_words(&b.words()).unwrap();
        let e = u.estimate() as f64;
        assert!((e - 7500.0).abs() < 300.0, "{e}");
        assert!(u.or_words(&[(1 << 20, 1)]).is_none());
    }

    #[test]
    fn hash_deterministic_and_index_bits_spread() {
        let b = FxBuildHasher;
        let k = FlowKey::of(&tuple(7, Some((1, 2))));
        assert_eq!(b.hash_one(k), b.hash_one(k));
        // IPv4 sources that differ only in the first octet still spread over
        // the low bits the table indexes with: 256 keys into 256 buckets, a
        // good hash fills about 162 of them.
        let low: std::collections::HashSet<u64> =
            (0u32..256).map(|i| b.hash_one(FlowKey::of(&tuple(i << 24, Some((1, 2))))) & 0xff).collect();
        assert!(low.len() > 120, "{}", low.len());
    }

    #[test]
    fn distinct_counter_is_close() {
        let mut c = DistinctCounter::default();
        assert_eq!(c.estimate(), 0);
        for i in 0u64..200_000 {
            c.insert(FxBuildHasher.hash_one(i % 100_000));
        }
        let e = c.estimate() as f64;
        assert!((e - 100_000.0).abs() < 3_000.0, "{e}");
    }
}
