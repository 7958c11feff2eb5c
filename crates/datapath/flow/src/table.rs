//! The per-core flow table: open addressing with linear probing over a
//! power-of-two array of `u64` buckets, a slab of entries, and an intrusive
//! LRU list threaded through the slab. See the crate documentation for why it
//! is written by hand.
//!
//! Layout:
//!
//! ```text
//! buckets: [ tag:32 | slab index:32 ]  (u64::MAX = empty; 2^k >= 2 x capacity)
//!              |
//!              v
//! slab:    [ key (5 words) | last_seen | hash | gen | lru prev | lru next | Option<V> ]
//!            head (most recently seen) <-> ... <-> tail (least recently seen)
//! ```
//!
//! The tag is the low 32 bits of the key's SipHash-1-3; the home bucket is
//! `tag & mask`, so probing and backward-shift deletion read only the bucket
//! array until a tag matches. Free slab entries are chained through `next`.

use crate::key::{FlowKey, Packed};
use flowsteer_prim::siphash::{self as sip, SipKey};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

/// Default most flows per table.
pub const DEFAULT_CAPACITY: usize = 65_536;
/// Hard upper bound on [`FlowTableConfig::capacity`]: 16 Mi flows, i.e. 256 MiB
/// of buckets plus the slab.
pub const MAX_CAPACITY: usize = 1 << 24;
/// Default idle timeout: 30 s.
pub const DEFAULT_IDLE_TIMEOUT_NS: u64 = 30_000_000_000;

/// Sizing and ageing of one [`FlowTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTableConfig {
    /// Most flows held at once (default [`DEFAULT_CAPACITY`], at most
    /// [`MAX_CAPACITY`]). Memory for this many is reserved at construction.
    pub capacity: usize,
    /// A flow not seen for longer than this (strictly more nanoseconds) is
    /// idle: [`FlowTable::expire`] removes it, and a full table may evict it.
    /// Default [`DEFAULT_IDLE_TIMEOUT_NS`].
    pub idle_timeout_ns: u64,
}

impl Default for FlowTableConfig {
    fn default() -> Self {
        FlowTableConfig { capacity: DEFAULT_CAPACITY, idle_timeout_ns: DEFAULT_IDLE_TIMEOUT_NS }
    }
}

/// A handle to one flow, valid until that flow is removed, expired or
/// evicted; after that every call taking it is a no-op / `None` (a
/// generation counter guards the reused slab slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    index: u32,
    gen: u32,
}

impl FlowId {
    /// The slab slot, `< capacity`: usable to index per-flow side arrays.
    /// Slots are reused, so pair it with the id when it must stay unique.
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The id packed into a `u64` (for a [`TimerWheel`](crate::TimerWheel) token).
    pub fn to_u64(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.index)
    }

    /// Inverse of [`FlowId::to_u64`]. Any value is accepted; one that names no
    /// live flow is simply not found.
    pub fn from_u64(v: u64) -> FlowId {
        FlowId { index: v as u32, gen: (v >> 32) as u32 }
    }
}

/// Why a flow table call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowError {
    /// `capacity` was 0.
    ZeroCapacity,
    /// `capacity` was above [`MAX_CAPACITY`].
    CapacityTooLarge { requested: usize, max: usize },
    /// The table is full and its least recently used flow is not idle: the
    /// new flow was refused (counted in [`FlowStats::insert_failed_full`]).
    Full,
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowError::ZeroCapacity => write!(f, "flow table capacity must be at least 1"),
            FlowError::CapacityTooLarge { requested, max } => {
                write!(f, "flow table capacity {requested} is above the maximum {max}")
            }
            FlowError::Full => write!(f, "flow table full and no idle flow to evict"),
        }
    }
}

impl std::error::Error for FlowError {}

/// Counters of one table. Always on and monotonic, so a reader can take
/// differences between two snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Flows inserted.
    pub inserts: u64,
    /// Key lookups ([`FlowTable::lookup_or_insert`] and [`FlowTable::get`]).
    pub lookups: u64,
    /// Lookups that found the flow.
    pub hits: u64,
    /// Flows removed by [`FlowTable::remove`].
    pub removed: u64,
    /// Flows removed by [`FlowTable::expire`].
    pub expired: u64,
    /// Idle flows evicted to make room for a new one.
    pub evicted: u64,
    /// New flows refused because the table was full of non-idle flows.
    pub insert_failed_full: u64,
    /// Buckets inspected by all lookups (mean probe length = `probes / lookups`).
    pub probes: u64,
    /// Longest probe sequence seen by one lookup (1 = found or placed at home).
    pub max_probe: u64,
    /// Entries examined by [`FlowTable::expire`] (at most expired + 1 per call).
    pub expire_visits: u64,
}

const NIL: u32 = u32::MAX;
const EMPTY: u64 = u64::MAX;

struct Entry<V> {
    key: Packed,
    last_seen: u64,
    hash: u32,
    gen: u32,
    prev: u32,
    next: u32,
    value: Option<V>,
}

/// One core's flow table. Owned by its worker: `Send` (built, then moved to
/// the worker) but not `Sync`; no call blocks, allocates after construction,
/// reads a clock or panics on any key or time value.
///
/// Overflow policy: when [`capacity`](FlowTable::capacity) flows are held, a
/// new flow evicts the least recently seen one if that flow is idle (not seen
/// for more than the idle timeout; counted in [`FlowStats::evicted`], its value
/// is dropped), otherwise the new flow is refused with [`FlowError::Full`] and
/// counted in [`FlowStats::insert_failed_full`]. Established flows are never
/// pushed out by new ones, so a flood of new tuples cannot disrupt them; the
/// caller drops the packet and counts it (`flow_table_full`).
///
/// Time: `now` must not go backwards between calls. If it does nothing
/// breaks, but expiry of the affected flows may come late (never early).
pub struct FlowTable<V> {
    buckets: Box<[u64]>,
    mask: usize,
    slab: Vec<Entry<V>>,
    /// Head of the free-slot chain (through `Entry::next`).
    free: u32,
    /// Most recently seen flow.
    head: u32,
    /// Least recently seen flow: the next to expire.
    tail: u32,
    len: usize,
    capacity: usize,
    idle_timeout: u64,
    key: SipKey,
    stats: FlowStats,
    _not_sync: PhantomData<Cell<()>>,
}

impl<V> fmt::Debug for FlowTable<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowTable")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("buckets", &self.buckets.len())
            .field("idle_timeout_ns", &self.idle_timeout)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<V> FlowTable<V> {
    /// A table keyed with a fresh secret SipHash key (from std's
    /// `RandomState`, seeded by the OS), so tuples crafted to collide in the
    /// RSS hash, or in any hash the sender can compute, land on random buckets.
    pub fn new(cfg: FlowTableConfig) -> Result<Self, FlowError> {
        Self::build(cfg, SipKey::random())
    }

    /// A table with a fixed hash key, for deterministic simulations and
    /// tests. Do not use on live traffic: a known key lets a sender build
    /// long probe chains.
    pub fn with_seed(cfg: FlowTableConfig, seed: (u64, u64)) -> Result<Self, FlowError> {
        Self::build(cfg, SipKey(seed.0, seed.1))
    }

    fn build(cfg: FlowTableConfig, key: SipKey) -> Result<Self, FlowError> {
        if cfg.capacity == 0 {
            return Err(FlowError::ZeroCapacity);
        }
        if cfg.capacity > MAX_CAPACITY {
            return Err(FlowError::CapacityTooLarge { requested: cfg.capacity, max: MAX_CAPACITY });
        }
        // Load factor <= 1/2: at least half the buckets are always empty, so
        // every probe sequence ends, and short.
        let nbuckets = (cfg.capacity * 2).next_power_of_two();
        Ok(FlowTable {
            buckets: vec![EMPTY; nbuckets].into_boxed_slice(),
            mask: nbuckets - 1,
            slab: Vec::with_capacity(cfg.capacity),
            free: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
            capacity: cfg.capacity,
            idle_timeout: cfg.idle_timeout_ns,
            key,
            stats: FlowStats::default(),
            _not_sync: PhantomData,
        })
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no flow is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most flows held at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The configured idle timeout.
    pub fn idle_timeout_ns(&self) -> u64 {
        self.idle_timeout
    }

    /// The counters.
    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// When the least recently seen flow becomes idle (the earliest `now` at
    /// which [`expire`](FlowTable::expire) would remove something), or `None`
    /// if the table is empty. For the worker's poll timeout.
    pub fn next_expiry(&self) -> Option<u64> {
        let t = self.slab.get(self.tail as usize)?;
        Some(t.last_seen.saturating_add(self.idle_timeout).saturating_add(1))
    }

    #[inline]
    fn hash(&self, p: &Packed) -> u32 {
        if p.is_v4() {
            // The packed key without its two all-zero address-high words;
            // the length (24 vs 40) keeps the two shapes apart.
            sip::sip13(self.key.0, self.key.1, &[p.0[1], p.0[3], p.0[4]], 0, 24) as u32
        } else {
            sip::sip13(self.key.0, self.key.1, &p.0, 0, 40) as u32
        }
    }

    /// Probe for `p`: `Ok(bucket)` if present, `Err(first empty bucket)` if
    /// not, plus the number of buckets inspected. Ends because at least half
    /// the buckets are empty.
    #[inline]
    fn find(&self, p: &Packed, h: u32) -> (Result<usize, usize>, u64) {
        let mut pos = h as usize & self.mask;
        let mut probes = 1;
        loop {
            let b = self.buckets[pos];
            if b == EMPTY {
                return (Err(pos), probes);
            }
            if (b >> 32) as u32 == h && self.slab[b as u32 as usize].key == *p {
                return (Ok(pos), probes);
            }
            pos = (pos + 1) & self.mask;
            probes += 1;
        }
    }

    fn first_empty(&self, h: u32) -> usize {
        let mut pos = h as usize & self.mask;
        while self.buckets[pos] != EMPTY {
            pos = (pos + 1) & self.mask;
        }
        pos
    }

    #[inline]
    fn note_probes(&mut self, probes: u64) {
        self.stats.probes += probes;
        if probes > self.stats.max_probe {
            self.stats.max_probe = probes;
        }
    }

    /// Look the flow up, or insert it with `init()` if absent, and mark it
    /// seen at `now` (it becomes the most recently used). Returns its id and
    /// state. When the table is full see the overflow policy on
    /// [`FlowTable`]: an idle LRU flow is evicted, otherwise
    /// `Err(FlowError::Full)` and `init` is not called. A flow idle past the
    /// timeout is still found until [`expire`](FlowTable::expire) or an
    /// eviction has removed it.
    pub fn lookup_or_insert(
        &mut self,
        key: &FlowKey,
        now: u64,
        init: impl FnOnce() -> V,
    ) -> Result<(FlowId, &mut V), FlowError> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        self.stats.lookups += 1;
        let (found, probes) = self.find(&p, h);
        self.note_probes(probes);
        let idx = match found {
            Ok(pos) => {
                self.stats.hits += 1;
                let idx = self.buckets[pos] as u32;
                self.lru_unlink(idx);
                self.lru_push_head(idx);
                self.slab[idx as usize].last_seen = now;
                idx
            }
            Err(mut pos) => {
                if self.len >= self.capacity {
                    if !self.evict_idle_tail(now) {
                        self.stats.insert_failed_full += 1;
                        return Err(FlowError::Full);
                    }
                    // The backward shift may have moved the chain we probed.
                    pos = self.first_empty(h);
                }
                let idx = self.alloc(p, h, now);
                self.buckets[pos] = (u64::from(h) << 32) | u64::from(idx);
                self.lru_push_head(idx);
                self.len += 1;
                self.stats.inserts += 1;
                idx
            }
        };
        let e = &mut self.slab[idx as usize];
        // On a hit `value` is `Some` and `init` is not called.
        Ok((FlowId { index: idx, gen: e.gen }, e.value.get_or_insert_with(init)))
    }

    /// The flow's state, without marking it seen.
    pub fn get(&mut self, key: &FlowKey) -> Option<&mut V> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        self.stats.lookups += 1;
        let (found, probes) = self.find(&p, h);
        self.note_probes(probes);
        let pos = found.ok()?;
        self.stats.hits += 1;
        self.slab[self.buckets[pos] as u32 as usize].value.as_mut()
    }

    /// The state of the flow `id` names, if it is still held.
    pub fn by_id(&mut self, id: FlowId) -> Option<&mut V> {
        let e = self.slab.get_mut(id.index as usize).filter(|e| e.gen == id.gen)?;
        e.value.as_mut()
    }

    /// The key of the flow `id` names, if it is still held.
    pub fn key_of(&self, id: FlowId) -> Option<FlowKey> {
        self.slab.get(id.index as usize).filter(|e| e.gen == id.gen && e.value.is_some()).map(|e| e.key.key())
    }

    /// Mark the flow seen at `now` (most recently used). A stale id is ignored.
    pub fn touch(&mut self, id: FlowId, now: u64) {
        let live = matches!(self.slab.get(id.index as usize), Some(e) if e.gen == id.gen && e.value.is_some());
        if live {
            self.lru_unlink(id.index);
            self.lru_push_head(id.index);
            self.slab[id.index as usize].last_seen = now;
        }
    }

    /// Remove the flow and return its state.
    pub fn remove(&mut self, key: &FlowKey) -> Option<V> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        let pos = self.find(&p, h).0.ok()?;
        let idx = self.buckets[pos] as u32;
        self.backward_shift(pos);
        let (_, v) = self.release(idx)?;
        self.stats.removed += 1;
        Some(v)
    }

    /// Remove flows idle at `now` (not seen for more than the idle timeout),
    /// least recently seen first, at most `budget` of them, handing each to
    /// `on_expire`. Returns how many were removed.
    ///
    /// Cost: O(1) per removed flow plus one look at the first non-idle flow;
    /// the LRU tail is always the oldest, so this never walks the table.
    /// Call it once per poll with a small budget.
    pub fn expire(&mut self, now: u64, budget: usize, mut on_expire: impl FnMut(FlowKey, V)) -> usize {
        let mut n = 0;
        while n < budget && self.tail != NIL {
            self.stats.expire_visits += 1;
            let t = self.tail;
            if !self.is_idle(t, now) {
                break;
            }
            match self.remove_index(t) {
                Some((p, v)) => {
                    n += 1;
                    self.stats.expired += 1;
                    on_expire(p.key(), v);
                }
                None => break,
            }
        }
        n
    }

    fn is_idle(&self, idx: u32, now: u64) -> bool {
        now.saturating_sub(self.slab[idx as usize].last_seen) > self.idle_timeout
    }

    /// Full-table policy: evict the LRU flow if idle.
    fn evict_idle_tail(&mut self, now: u64) -> bool {
        let t = self.tail;
        if t == NIL || !self.is_idle(t, now) {
            return false;
        }
        if self.remove_index(t).is_none() {
            return false;
        }
        self.stats.evicted += 1;
        true
    }

    /// Remove the live entry at slab index `idx` (found through its stored hash).
    fn remove_index(&mut self, idx: u32) -> Option<(Packed, V)> {
        let h = self.slab.get(idx as usize)?.hash;
        let want = (u64::from(h) << 32) | u64::from(idx);
        let mut pos = h as usize & self.mask;
        // Bounded: the entry is in the chain that starts at its home bucket.
        for _ in 0..self.buckets.len() {
            match self.buckets[pos] {
                b if b == want => {
                    self.backward_shift(pos);
                    return self.release(idx);
                }
                EMPTY => return None,
                _ => pos = (pos + 1) & self.mask,
            }
        }
        None
    }

    /// Empty bucket `hole` without leaving a tombstone: pull later members
    /// of the run back whenever the hole lies between their home and their
    /// current position, until an empty bucket ends the run.
    fn backward_shift(&mut self, mut hole: usize) {
        let mask = self.mask;
        let mut j = (hole + 1) & mask;
        loop {
            let b = self.buckets[j];
            if b == EMPTY {
                break;
            }
            let home = (b >> 32) as usize & mask;
            // Displacement of j from its home >= distance from hole to j:
            // the hole is on j's probe path, so j may move into it.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[hole] = EMPTY;
    }

    fn alloc(&mut self, key: Packed, hash: u32, now: u64) -> u32 {
        let fresh = |gen| Entry { key, last_seen: now, hash, gen, prev: NIL, next: NIL, value: None };
        if self.free != NIL {
            let idx = self.free;
            let e = &mut self.slab[idx as usize];
            self.free = e.next;
            *e = fresh(e.gen);
            idx
        } else {
            // len < capacity and no free slot: the slab has fewer than
            // `capacity` entries, within its reserved capacity (no realloc).
            self.slab.push(fresh(0));
            (self.slab.len() - 1) as u32
        }
    }

    /// Unlink from the LRU list, free the slot (bumping its generation so
    /// old ids go stale) and return key and value.
    fn release(&mut self, idx: u32) -> Option<(Packed, V)> {
        self.lru_unlink(idx);
        let e = &mut self.slab[idx as usize];
        let v = e.value.take()?;
        e.gen = e.gen.wrapping_add(1);
        e.next = self.free;
        e.prev = NIL;
        self.free = idx;
        self.len -= 1;
        Some((e.key, v))
    }

    fn lru_unlink(&mut self, idx: u32) {
        let (prev, next) = {
            let e = &self.slab[idx as usize];
            (e.prev, e.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slab[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slab[next as usize].prev = prev;
        }
        let e = &mut self.slab[idx as usize];
        e.prev = NIL;
        e.next = NIL;
    }

    fn lru_push_head(&mut self, idx: u32) {
        let old = self.head;
        {
            let e = &mut self.slab[idx as usize];
            e.prev = NIL;
            e.next = old;
        }
        if old == NIL {
            self.tail = idx;
        } else {
            self.slab[old as usize].prev = idx;
        }
        self.head = idx;
    }

    /// Flows from least to most recently seen, with their last-seen time
    /// (test helper: walks the whole list).
    #[cfg(test)]
    fn lru_order(&self) -> Vec<(FlowKey, u64)> {
        let mut out = Vec::new();
        let mut i = self.tail;
        while i != NIL {
            let e = &self.slab[i as usize];
            out.push((e.key.key(), e.last_seen));
            i = e.prev;
        }
        out
    }

    /// Check every structural invariant; panics with a description if one
    /// fails (test helper).
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut live = 0;
        for (pos, &b) in self.buckets.iter().enumerate() {
            if b == EMPTY {
                continue;
            }
            live += 1;
            let idx = b as u32 as usize;
            let e = &self.slab[idx];
            assert!(e.value.is_some(), "bucket {pos} points at a free slot");
            assert_eq!((b >> 32) as u32, e.hash, "tag mismatch at {pos}");
            assert_eq!(self.hash(&e.key), e.hash, "stored hash stale at {pos}");
            // No empty bucket between home and pos, and the key is found here.
            assert_eq!(self.find(&e.key, e.hash).0, Ok(pos), "key at {pos} not reachable");
        }
        assert_eq!(live, self.len);
        let mut n = 0;
        let mut prev = NIL;
        let mut i = self.head;
        while i != NIL {
            let e = &self.slab[i as usize];
            assert_eq!(e.prev, prev);
            assert!(e.value.is_some());
            prev = i;
            i = e.next;
            n += 1;
            assert!(n <= self.len);
        }
        assert_eq!(prev, self.tail);
        assert_eq!(n, self.len);
        let mut free = 0;
        let mut i = self.free;
        while i != NIL {
            assert!(self.slab[i as usize].value.is_none());
            i = self.slab[i as usize].next;
            free += 1;
            assert!(free <= self.slab.len());
        }
        assert_eq!(free + self.len, self.slab.len());
        assert!(self.slab.len() <= self.capacity);
    }
}

#[cfg(test)]
mod tests;
