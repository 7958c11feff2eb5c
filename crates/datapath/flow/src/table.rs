//! The per-core flow table: buckets of one cache line (eight 16-bit tags
//! and eight slab indices), a slab of one-line entries, and expiry by a
//! clock hand that sweeps the slab. See the crate documentation for why it
//! is written by hand.
//!
//! Layout:
//!
//! ```text
//! buckets: [ tags: 8 x u16 (0 = empty) | slab index: 8 x u32 | overflow count ]   64 B each,
//!              |                                                                   >= 2 slots per flow
//!              v
//! slab:    [ key (5 words) | last seen (tick) | generation | value ]                64 B each for a
//!            ^ the clock hand visits the slots in turn, removing idle flows          value of <= 16 B
//! ```
//!
//! A key's SipHash-1-3 (64 bits) picks its home bucket (low bits) and its
//! tag (high 16 bits, independent of the bucket). A lookup reads the home
//! bucket's line, compares the eight tags at once and reads only the entry
//! whose tag matches (a false match, one key compare, has odds 8 in 65,535
//! per bucket), so a hit costs **two cache lines**: bucket and entry, with
//! key, last-seen stamp and value in one line. A full bucket sends new keys
//! on to the next bucket (linear probing over lines), and counts them in
//! its overflow byte; a lookup moves on only while that count is non-zero,
//! so a miss usually ends at the home line too. Nothing is moved on a hit
//! or a removal: no list to relink, no run to shift.
//!
//! The burst interface ([`FlowTable::prepare`], [`FlowTable::prefetch_entry`],
//! [`FlowTable::lookup_or_insert_prepared`], or all three over a slice in
//! [`FlowTable::lookup_or_insert_burst`]) splits a lookup into its three
//! memory steps, so that a caller working on a burst of packets asks for
//! every packet's bucket line, then every entry line, before it needs the
//! first: the misses overlap instead of queueing one behind another (DPDK's
//! `rte_hash_lookup_bulk`, VPP's vector stages). The last step runs the
//! whole lookup-or-insert, in order, so a burst gives exactly what the same
//! calls one at a time give; the first two only compute and hint.

use crate::key::{FlowKey, Packed};
use flowsteer_prim::prefetch;
use flowsteer_prim::siphash::{self as sip, SipKey};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

/// Default most flows per table.
pub const DEFAULT_CAPACITY: usize = 65_536;
/// Hard upper bound on [`FlowTableConfig::capacity`]: 16 Mi flows, i.e.
/// 256 MiB of buckets plus 1 GiB of slab (64-byte entries).
pub const MAX_CAPACITY: usize = 1 << 24;
/// Default idle timeout: 30 s.
pub const DEFAULT_IDLE_TIMEOUT_NS: u64 = 30_000_000_000;
/// Most slab slots a new flow in a full table looks at, from the clock
/// hand on, for an idle flow to evict.
pub const EVICT_SCAN: usize = 32;
/// Most keys [`FlowTable::lookup_or_insert_burst`] has in flight at once
/// (longer slices are taken in chunks of this many).
pub const BURST_MAX: usize = 64;

/// Sizing and ageing of one [`FlowTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTableConfig {
    /// Most flows held at once (default [`DEFAULT_CAPACITY`], at most
    /// [`MAX_CAPACITY`]). Memory for this many is reserved and written at
    /// construction (about 84 bytes per flow: 80 MiB for a million), so no
    /// packet takes a page fault.
    pub capacity: usize,
    /// A flow not seen for longer than this (strictly more nanoseconds) is
    /// idle: [`FlowTable::expire`] removes it, and a full table may evict it.
    /// Default [`DEFAULT_IDLE_TIMEOUT_NS`]. Last-seen times are kept in
    /// ticks of at most 1/64 of this, so a flow counts as idle up to two
    /// ticks (1/32 of the timeout) late, never early; timeouts up to 127 ns
    /// are exact.
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
    /// The table is full and none of the [`EVICT_SCAN`] flows looked at is
    /// idle: the new flow was refused (counted in
    /// [`FlowStats::insert_failed_full`]).
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
    /// Key lookups ([`FlowTable::lookup_or_insert`], its burst forms and
    /// [`FlowTable::get`]).
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
    /// Bucket lines read by all lookups (mean = `probes / lookups`; 1.0 is
    /// the floor: every lookup reads its home bucket).
    pub probes: u64,
    /// Most bucket lines one lookup read (1 = found or placed at home).
    pub max_probe: u64,
    /// Slab slots the clock hand of [`FlowTable::expire`] looked at.
    pub expire_visits: u64,
}

/// Slots per bucket: eight tags (16 B) and eight indices (32 B) fill a
/// 64-byte line with the overflow count.
const SLOTS: usize = 8;
/// The overflow count sticks here: too many keys have passed this bucket
/// to keep count, so lookups always go on past it.
const OVF_STUCK: u8 = u8::MAX;
/// Stamps are rebased before the distance to the base reaches this.
const STAMP_LIMIT: u64 = 1 << 31;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    /// 0 = empty slot.
    tags: [u16; SLOTS],
    idx: [u32; SLOTS],
    /// Keys whose probe passed this bucket (homed here or before, placed
    /// after), up to [`OVF_STUCK`].
    ovf: u8,
}

const EMPTY_BUCKET: Bucket = Bucket { tags: [0; SLOTS], idx: [0; SLOTS], ovf: 0 };

#[repr(C, align(64))]
struct Entry<V> {
    key: Packed,
    /// Tick of the last sight, relative to the table's `base`.
    stamp: u32,
    /// Odd while the slot holds a flow; bumped on insert and on removal,
    /// so a [`FlowId`] of an earlier flow in this slot is stale.
    gen: u32,
    value: V,
}

impl<V> Entry<V> {
    fn live(&self) -> bool {
        self.gen & 1 == 1
    }
}

/// Bit `i` set where `tags[i] == tag` (the compiler turns it into one
/// vector compare and a mask move).
#[inline(always)]
fn tag_matches(tags: &[u16; SLOTS], tag: u16) -> u32 {
    let mut m = 0;
    for (i, &t) in tags.iter().enumerate() {
        m |= u32::from(t == tag) << i;
    }
    m
}

/// The tag of a hash: its high 16 bits (the bucket takes the low ones),
/// never 0, which marks an empty slot.
#[inline(always)]
fn tag_of(h: u64) -> u16 {
    let t = (h >> 48) as u16;
    t | u16::from(t == 0)
}

/// A key packed and hashed for one table, with its home bucket's line
/// requested: the first step of a burst lookup ([`FlowTable::prepare`]).
/// Valid for the table that made it (another table hashes under another
/// key) until that table is dropped.
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    key: Packed,
    hash: u64,
}

impl Prepared {
    const NONE: Prepared = Prepared { key: Packed([0; 5]), hash: 0 };
}

/// One core's flow table. Owned by its worker: `Send` (built, then moved to
/// the worker) but not `Sync`; no call blocks, allocates after construction,
/// reads a clock or panics on any key or time value.
///
/// Overflow policy: when [`capacity`](FlowTable::capacity) flows are held, a
/// new flow looks at up to [`EVICT_SCAN`] flows from the clock hand on and
/// evicts the first idle one (not seen for more than the idle timeout;
/// counted in [`FlowStats::evicted`], its value is dropped); if none of them
/// is idle, the new flow is refused with [`FlowError::Full`] and counted in
/// [`FlowStats::insert_failed_full`]. Established flows are never pushed
/// out by new ones, so a flood of new tuples cannot disrupt them; the
/// caller drops the packet and counts it (`flow_table_full`). Idle flows
/// the scan missed are removed by [`expire`](FlowTable::expire).
///
/// Time: `now` must not go backwards between calls. If it does nothing
/// breaks, but expiry of the affected flows may come late (never early).
pub struct FlowTable<V> {
    buckets: Box<[Bucket]>,
    bmask: usize,
    slab: Vec<Entry<V>>,
    /// Free slab slots (popped from the end: the most recently freed, whose
    /// line is the likeliest to be cached).
    free: Vec<u32>,
    /// The clock hand: the next slab slot [`expire`](FlowTable::expire)
    /// and the eviction scan look at.
    hand: usize,
    len: usize,
    capacity: usize,
    idle_timeout: u64,
    /// A tick is `2^shift` ns, at most 1/64 of the idle timeout.
    shift: u32,
    /// The idle timeout in ticks, rounded up.
    timeout_ticks: u64,
    /// The tick that stamp 0 stands for.
    base: u64,
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

impl<V: Default> FlowTable<V> {
    /// A table keyed with a fresh secret SipHash key (from std's
    /// `RandomState`, seeded by the OS), so tuples crafted to collide in the
    /// RSS hash, or in any hash the sender can compute, land on random buckets.
    pub fn new(cfg: FlowTableConfig) -> Result<Self, FlowError> {
        Self::build(cfg, SipKey::random())
    }

    /// A table with a fixed hash key, for deterministic simulations and
    /// tests. Do not use on live traffic: a known key lets a sender fill
    /// chosen buckets.
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
        let nbuckets = Self::buckets_for(cfg.capacity);
        let t = cfg.idle_timeout_ns;
        let shift = if t == 0 { 0 } else { (63 - t.leading_zeros()).saturating_sub(6) };
        let timeout_ticks = (t >> shift) + u64::from(t & ((1u64 << shift) - 1) != 0);
        // Every page of the slab and the free list written once now, so
        // no packet ever takes a page fault on a first touch.
        let mut slab = Vec::with_capacity(cfg.capacity);
        slab.resize_with(cfg.capacity, || Entry { key: Packed([0; 5]), stamp: 0, gen: 0, value: V::default() });
        slab.clear();
        // Written, not `vec![0; n]`: calloc's zero pages would be mapped
        // (and faulted in) only at first use, on the packet path.
        #[allow(clippy::slow_vector_initialization)]
        let free = {
            let mut free = Vec::with_capacity(cfg.capacity);
            free.resize(cfg.capacity, 0u32);
            free.clear();
            free
        };
        Ok(FlowTable {
            buckets: vec![EMPTY_BUCKET; nbuckets].into_boxed_slice(),
            bmask: nbuckets - 1,
            slab,
            free,
            hand: 0,
            len: 0,
            capacity: cfg.capacity,
            idle_timeout: t,
            shift,
            timeout_ticks,
            base: 0,
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

    /// Slots in the bucket array (8 per bucket, at least 2 per flow of
    /// capacity): the size a table of another design needs for the same
    /// load.
    pub fn slots(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// [`slots`](FlowTable::slots) of a table of `capacity` flows.
    pub fn slots_for(capacity: usize) -> usize {
        Self::buckets_for(capacity) * SLOTS
    }

    /// At least two slots per flow (load <= 1/2), so most keys sit in their
    /// home bucket and every insert finds a free slot.
    fn buckets_for(capacity: usize) -> usize {
        capacity.max(1).div_ceil(SLOTS / 2).next_power_of_two()
    }

    /// Bytes of memory the table reserved (buckets, slab and free list).
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket>()
            + self.slab.capacity() * std::mem::size_of::<Entry<V>>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    #[inline]
    fn hash(&self, p: &Packed) -> u64 {
        if p.is_v4() {
            // Both IPv4 addresses in one word, then ports and protocol: the
            // length (16 vs 40) keeps the two shapes apart.
            sip::sip13(self.key.0, self.key.1, &[(p.0[1] << 32) | p.0[3], p.0[4]], 0, 16)
        } else {
            sip::sip13(self.key.0, self.key.1, &p.0, 0, 40)
        }
    }

    #[inline(always)]
    fn home(&self, h: u64) -> usize {
        h as usize & self.bmask
    }

    /// Find `p`: its `(bucket, slot)` if present, plus the bucket lines read.
    #[inline]
    fn find(&self, p: &Packed, h: u64) -> (Option<(usize, usize)>, u64) {
        let tag = tag_of(h);
        let mut b = self.home(h);
        let mut lines = 1;
        loop {
            let bk = &self.buckets[b];
            let mut m = tag_matches(&bk.tags, tag);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                if self.slab.get(bk.idx[s] as usize).is_some_and(|e| e.key == *p) {
                    return (Some((b, s)), lines);
                }
                m &= m - 1;
            }
            // Bounded: at most every bucket once, also if every overflow
            // count has stuck.
            if bk.ovf == 0 || lines as usize >= self.buckets.len() {
                return (None, lines);
            }
            b = (b + 1) & self.bmask;
            lines += 1;
        }
    }

    /// The first free `(bucket, slot)` on `h`'s probe path, and the bucket
    /// lines read. There always is one while `len < capacity`.
    fn free_slot(&self, h: u64) -> Option<((usize, usize), u64)> {
        let mut b = self.home(h);
        for lines in 1..=self.buckets.len() as u64 {
            if let Some(s) = self.buckets[b].tags.iter().position(|&t| t == 0) {
                return Some(((b, s), lines));
            }
            b = (b + 1) & self.bmask;
        }
        None
    }

    #[inline]
    fn note_probes(&mut self, lines: u64) {
        self.stats.probes += lines;
        if lines > self.stats.max_probe {
            self.stats.max_probe = lines;
        }
    }

    /// `now` as a stamp: ticks since `base`, rebasing every stamp when the
    /// distance outgrows a `u32`. A time before the base gives stamp 0,
    /// a later time than the true one: such a flow expires late, never
    /// early.
    #[inline]
    fn stamp(&mut self, now: u64) -> u32 {
        let rel = (now >> self.shift).wrapping_sub(self.base);
        if rel < STAMP_LIMIT {
            return rel as u32;
        }
        self.stamp_slow(now)
    }

    #[cold]
    fn stamp_slow(&mut self, now: u64) -> u32 {
        let tick = now >> self.shift;
        if tick < self.base {
            return 0;
        }
        // Move the base to 2^30 ticks before now. A stamp that would fall
        // before it becomes 0: it is then at least 2^30 ticks old, and any
        // flow that old was idle already (the timeout is at most 128 ticks).
        let new_base = tick - (STAMP_LIMIT >> 1);
        let delta = new_base - self.base;
        for e in self.slab.iter_mut() {
            e.stamp = (u64::from(e.stamp).saturating_sub(delta)) as u32;
        }
        self.base = new_base;
        (tick - new_base) as u32
    }

    /// `now` in ticks since `base`, for idleness checks (0 before the base).
    fn now_rel(&mut self, now: u64) -> u64 {
        u64::from(self.stamp(now))
    }

    #[inline]
    fn is_idle(&self, e: &Entry<V>, now_rel: u64) -> bool {
        now_rel.saturating_sub(u64::from(e.stamp)) > self.timeout_ticks
    }

    /// Hash `key` for this table and ask for its home bucket's line. The
    /// first step of a burst lookup: call it for every key of a burst, then
    /// [`prefetch_entry`](FlowTable::prefetch_entry) for each, then
    /// [`lookup_or_insert_prepared`](FlowTable::lookup_or_insert_prepared).
    #[inline]
    pub fn prepare(&self, key: &FlowKey) -> Prepared {
        let p = Packed::new(key);
        let h = self.hash(&p);
        prefetch(&self.buckets[self.home(h)]);
        Prepared { key: p, hash: h }
    }

    /// Ask for the line of the entry the home bucket's tags point at (the
    /// first match; a miss or a key placed past its home asks for nothing).
    /// Reads the bucket line [`prepare`](FlowTable::prepare) asked for.
    #[inline]
    pub fn prefetch_entry(&self, p: &Prepared) {
        let bk = &self.buckets[self.home(p.hash)];
        let m = tag_matches(&bk.tags, tag_of(p.hash));
        if m != 0 {
            if let Some(e) = self.slab.get(bk.idx[m.trailing_zeros() as usize] as usize) {
                prefetch(e);
            }
        }
    }

    /// Look the flow up, or insert it with `init()` if absent, and mark it
    /// seen at `now`. Returns its id and state. When the table is full see
    /// the overflow policy on [`FlowTable`]: an idle flow is evicted,
    /// otherwise `Err(FlowError::Full)` and `init` is not called. A flow
    /// idle past the timeout is still found until
    /// [`expire`](FlowTable::expire) or an eviction has removed it.
    #[inline]
    pub fn lookup_or_insert(
        &mut self,
        key: &FlowKey,
        now: u64,
        init: impl FnOnce() -> V,
    ) -> Result<(FlowId, &mut V), FlowError> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        self.lookup_or_insert_prepared(&Prepared { key: p, hash: h }, now, init)
    }

    /// [`lookup_or_insert`](FlowTable::lookup_or_insert) of a key
    /// [`prepare`](FlowTable::prepare) has hashed (by this table).
    #[inline]
    pub fn lookup_or_insert_prepared(
        &mut self,
        p: &Prepared,
        now: u64,
        init: impl FnOnce() -> V,
    ) -> Result<(FlowId, &mut V), FlowError> {
        let stamp = self.stamp(now);
        self.stats.lookups += 1;
        let (found, lines) = self.find(&p.key, p.hash);
        let idx = match found {
            Some((b, s)) => {
                self.note_probes(lines);
                self.stats.hits += 1;
                self.buckets[b].idx[s] as usize
            }
            None => {
                if self.len >= self.capacity && !self.evict_idle(u64::from(stamp)) {
                    self.note_probes(lines);
                    self.stats.insert_failed_full += 1;
                    return Err(FlowError::Full);
                }
                let Some(((b, s), place_lines)) = self.free_slot(p.hash) else {
                    // Unreachable: len < capacity <= half the slots.
                    self.note_probes(lines);
                    self.stats.insert_failed_full += 1;
                    return Err(FlowError::Full);
                };
                self.note_probes(lines.max(place_lines));
                let idx = self.alloc(p.key, stamp, init);
                let home = self.home(p.hash);
                let bk = &mut self.buckets[b];
                bk.tags[s] = tag_of(p.hash);
                bk.idx[s] = idx as u32;
                let mut x = home;
                while x != b {
                    let o = &mut self.buckets[x].ovf;
                    *o = o.saturating_add(1);
                    x = (x + 1) & self.bmask;
                }
                self.len += 1;
                self.stats.inserts += 1;
                idx
            }
        };
        let e = &mut self.slab[idx];
        e.stamp = stamp;
        Ok((FlowId { index: idx as u32, gen: e.gen }, &mut e.value))
    }

    /// Look up or insert every key of `keys`, in order, all seen at `now`,
    /// handing each result to `f` with the key's position. The same results
    /// as calling [`lookup_or_insert`](FlowTable::lookup_or_insert) for
    /// each key in turn (duplicates, a key inserted earlier in the burst and
    /// evictions included); faster on large tables, because the bucket and
    /// entry lines of up to [`BURST_MAX`] keys are requested before the
    /// first is needed.
    pub fn lookup_or_insert_burst(
        &mut self,
        keys: &[FlowKey],
        now: u64,
        mut init: impl FnMut() -> V,
        mut f: impl FnMut(usize, Result<(FlowId, &mut V), FlowError>),
    ) {
        let mut prepared = [Prepared::NONE; BURST_MAX];
        for (c, chunk) in keys.chunks(BURST_MAX).enumerate() {
            let prepared = &mut prepared[..chunk.len()];
            for (p, k) in prepared.iter_mut().zip(chunk) {
                *p = self.prepare(k);
            }
            for p in prepared.iter() {
                self.prefetch_entry(p);
            }
            for (i, p) in prepared.iter().enumerate() {
                f(c * BURST_MAX + i, self.lookup_or_insert_prepared(p, now, &mut init));
            }
        }
    }

    /// The flow's state, without marking it seen.
    pub fn get(&mut self, key: &FlowKey) -> Option<&mut V> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        self.stats.lookups += 1;
        let (found, lines) = self.find(&p, h);
        self.note_probes(lines);
        let (b, s) = found?;
        self.stats.hits += 1;
        let idx = self.buckets[b].idx[s] as usize;
        Some(&mut self.slab[idx].value)
    }

    fn live_entry(&mut self, id: FlowId) -> Option<&mut Entry<V>> {
        self.slab.get_mut(id.index as usize).filter(|e| e.gen == id.gen && e.live())
    }

    /// The state of the flow `id` names, if it is still held.
    pub fn by_id(&mut self, id: FlowId) -> Option<&mut V> {
        self.live_entry(id).map(|e| &mut e.value)
    }

    /// The key of the flow `id` names, if it is still held.
    pub fn key_of(&self, id: FlowId) -> Option<FlowKey> {
        self.slab.get(id.index as usize).filter(|e| e.gen == id.gen && e.live()).map(|e| e.key.key())
    }

    /// Mark the flow seen at `now`. A stale id is ignored.
    pub fn touch(&mut self, id: FlowId, now: u64) {
        let stamp = self.stamp(now);
        if let Some(e) = self.live_entry(id) {
            e.stamp = stamp;
        }
    }

    /// Remove the flow and return its state.
    pub fn remove(&mut self, key: &FlowKey) -> Option<V> {
        let p = Packed::new(key);
        let h = self.hash(&p);
        let (b, s) = self.find(&p, h).0?;
        let idx = self.buckets[b].idx[s] as usize;
        self.clear_slot(self.home(h), b, s);
        let (_, v) = self.release(idx);
        self.stats.removed += 1;
        Some(v)
    }

    /// Move the clock hand over up to `budget` slab slots, removing every
    /// flow it passes that is idle at `now` (not seen for more than the idle
    /// timeout) and handing each to `on_expire`. Returns how many were
    /// removed.
    ///
    /// Cost: O(`budget`), a sequential walk the hardware prefetcher
    /// follows; no packet path pays for expiry. A budget of at least
    /// [`capacity`](FlowTable::capacity) visits every flow: all idle flows
    /// go. Call it periodically with
    /// [`expire_budget`](FlowTable::expire_budget) so that the hand passes
    /// every flow at least 8 times per timeout: a flow is then removed at
    /// most 1/8 of the timeout (plus two ticks) after it became idle.
    pub fn expire(&mut self, now: u64, budget: usize, mut on_expire: impl FnMut(FlowKey, V)) -> usize {
        let now_rel = self.now_rel(now);
        let mut n = 0;
        for _ in 0..budget.min(self.slab.len()) {
            let i = self.advance_hand();
            self.stats.expire_visits += 1;
            let e = &self.slab[i];
            if e.live() && self.is_idle(e, now_rel) {
                let (p, v) = self.remove_index(i);
                n += 1;
                self.stats.expired += 1;
                on_expire(p.key(), v);
            }
        }
        n
    }

    /// The budget for [`expire`](FlowTable::expire) called every
    /// `interval_ns`: enough visits that the hand passes every slab slot 8
    /// times per idle timeout (all of them when that is more than the
    /// slab), and at least 64.
    pub fn expire_budget(&self, interval_ns: u64) -> usize {
        let slots = self.slab.len() as u128;
        let per_sweep = (u128::from(self.idle_timeout) / 8).max(1);
        let need = (slots * u128::from(interval_ns)).div_ceil(per_sweep);
        need.clamp(64.min(slots), slots) as usize
    }

    /// The slot under the hand; the hand moves on. Only called with a
    /// non-empty slab.
    #[inline]
    fn advance_hand(&mut self) -> usize {
        let i = if self.hand < self.slab.len() { self.hand } else { 0 };
        self.hand = i + 1;
        i
    }

    /// Full-table policy: evict the first idle flow among the next
    /// [`EVICT_SCAN`] slots under the hand.
    fn evict_idle(&mut self, now_rel: u64) -> bool {
        for _ in 0..EVICT_SCAN.min(self.slab.len()) {
            let i = self.advance_hand();
            let e = &self.slab[i];
            if e.live() && self.is_idle(e, now_rel) {
                self.remove_index(i);
                self.stats.evicted += 1;
                return true;
            }
        }
        false
    }

    /// Remove the live flow in slab slot `idx` (its bucket found by
    /// hashing its key again).
    fn remove_index(&mut self, idx: usize) -> (Packed, V) {
        let h = self.hash(&self.slab[idx].key);
        let tag = tag_of(h);
        let home = self.home(h);
        let mut b = home;
        // Bounded: the flow is on its key's probe path.
        for _ in 0..self.buckets.len() {
            let bk = &self.buckets[b];
            let mut m = tag_matches(&bk.tags, tag);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                if bk.idx[s] as usize == idx {
                    self.clear_slot(home, b, s);
                    return self.release(idx);
                }
                m &= m - 1;
            }
            b = (b + 1) & self.bmask;
        }
        // Not reachable (every live flow is in a bucket); free the slot
        // anyway so the table stays usable.
        self.release(idx)
    }

    /// Empty slot `s` of bucket `b`, whose key is homed at `home`, and take
    /// the key out of the overflow counts it added on its way.
    fn clear_slot(&mut self, home: usize, b: usize, s: usize) {
        self.buckets[b].tags[s] = 0;
        let mut x = home;
        while x != b {
            let o = &mut self.buckets[x].ovf;
            if *o != OVF_STUCK {
                *o -= 1;
            }
            x = (x + 1) & self.bmask;
        }
    }

    fn alloc(&mut self, key: Packed, stamp: u32, init: impl FnOnce() -> V) -> usize {
        let value = init();
        match self.free.pop() {
            Some(idx) => {
                let e = &mut self.slab[idx as usize];
                e.key = key;
                e.stamp = stamp;
                e.gen = e.gen.wrapping_add(1);
                e.value = value;
                idx as usize
            }
            None => {
                // len < capacity and no free slot: the slab has fewer than
                // `capacity` entries, within its reserved capacity (no realloc).
                self.slab.push(Entry { key, stamp, gen: 1, value });
                self.slab.len() - 1
            }
        }
    }

    /// Free slab slot `idx` (bumping its generation so old ids go stale)
    /// and return key and value.
    fn release(&mut self, idx: usize) -> (Packed, V) {
        let e = &mut self.slab[idx];
        let v = std::mem::take(&mut e.value);
        e.gen = e.gen.wrapping_add(1);
        self.free.push(idx as u32);
        self.len -= 1;
        (e.key, v)
    }

    /// Every flow with its last-seen stamp, in slab order (test helper).
    #[cfg(test)]
    fn flows(&self) -> Vec<(FlowKey, u32)> {
        self.slab.iter().filter(|e| e.live()).map(|e| (e.key.key(), e.stamp)).collect()
    }

    /// Check every structural invariant; panics with a description if one
    /// fails (test helper).
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut live = 0;
        let mut ovf = vec![0usize; self.buckets.len()];
        for (b, bk) in self.buckets.iter().enumerate() {
            for s in 0..SLOTS {
                if bk.tags[s] == 0 {
                    continue;
                }
                live += 1;
                let e = &self.slab[bk.idx[s] as usize];
                assert!(e.live(), "bucket {b} slot {s} points at a free slot");
                let h = self.hash(&e.key);
                assert_eq!(bk.tags[s], tag_of(h), "tag mismatch at {b}/{s}");
                assert_eq!(self.find(&e.key, h).0, Some((b, s)), "key at {b}/{s} not reachable");
                let mut x = self.home(h);
                while x != b {
                    ovf[x] += 1;
                    x = (x + 1) & self.bmask;
                }
            }
        }
        for (b, bk) in self.buckets.iter().enumerate() {
            if bk.ovf != OVF_STUCK {
                assert_eq!(usize::from(bk.ovf), ovf[b], "overflow count of bucket {b}");
            }
        }
        assert_eq!(live, self.len);
        assert_eq!(self.slab.iter().filter(|e| e.live()).count(), self.len);
        assert!(self.free.iter().all(|&i| !self.slab[i as usize].live()));
        assert_eq!(self.free.len() + self.len, self.slab.len());
        assert!(self.slab.len() <= self.capacity);
    }
}

#[cfg(test)]
mod tests;
