//! [`Reassembler`]: one core's reassembly state, its constructors and its
//! public calls. The work is split by path: `table` (the queue table and
//! the age lists: lookup, creation, removal, eviction, expiry, buffer
//! recycling), `general` (the per-fragment checks, store and delivery any
//! fragment can take) and `fast` (the zero-copy fast paths of
//! [`Reassembler::push_owned`]).

mod fast;
mod general;
mod table;
#[cfg(test)]
mod tests;

use flowsteer_wire::L3Info;

use crate::chain::Chain;
use crate::config::{ReasmConfig, ReasmConfigError, ReasmStats, Verdict, FRAG_OVERHEAD};
use crate::key::{Family, Key};
use crate::queue::{AgeList, Frag, HeadIn, Queue, SMALL_RANGES};
use crate::sources::SourceTable;

/// A per-core reassembler: one per worker, not shared (every method takes
/// `&mut self` or `&self` of the owner, no interior mutability, no locks).
///
/// `B` is the frame buffer type [`Reassembler::push_owned`] takes over
/// (default `Vec<u8>`); the copying [`Reassembler::push`] works with any
/// `B`. [`Reassembler::new`] builds the default; use
/// [`Reassembler::new_owning`] for another buffer type.
#[derive(Debug)]
pub struct Reassembler<B = Vec<u8>> {
    cfg: ReasmConfig,
    /// SipHash-1-3 key of the table and the source table.
    sip: (u64, u64),
    /// Bucket heads (slot index or `NIL`); a power of two long, or empty.
    buckets: Vec<u32>,
    /// Front table, [`FRONT_PER_BUCKET`] entries per bucket: the slot of
    /// the one queue (or NIL) at each [`Key::front_index`], found without
    /// hashing; the others are in the keyed table.
    front: Vec<u32>,
    /// Per front entry, how many queues with its index are in the keyed
    /// table (read only when the front entry does not hold the key; kept
    /// apart so the front table stays small).
    front_over: Vec<u32>,
    /// `64 - log2(front.len())` ([`Key::front_index`]; 64 while empty).
    front_shift: u32,
    /// Queues in the table.
    count: usize,
    /// The queue slab; never longer than the most queues pending at once.
    slots: Vec<Queue<B>>,
    free: Vec<u32>,
    ages: [AgeList; 2],
    /// No queue times out before this (a lower bound, so most pushes skip
    /// the expiry walk with one compare).
    next_expiry: u64,
    mem: usize,
    stats: ReasmStats,
    /// Recycled datagram buffers (cleared), at most
    /// [`FREE_BUFS`](crate::queue::FREE_BUFS) totalling at most
    /// [`FREE_BUF_BYTES`](crate::FREE_BUF_BYTES) of capacity.
    free_bufs: Vec<Vec<u8>>,
    free_buf_bytes: usize,
    /// Per-source fragment counters of the max-distance rule.
    sources: SourceTable,
    /// Fragments a queue may hold for the fast paths to extend it:
    /// `min(max_frags, SMALL_RANGES)`, one compare instead of two.
    fast_frags: usize,
    /// Frame buffers let go of during the current call; handed to the
    /// caller's `spare` (or dropped) before the call returns, so empty
    /// between calls.
    released: Vec<B>,
}

/// Front table entries per bucket (4 + 4 B each): at most a quarter of
/// them hold a queue, so few queues collide and go to the keyed table.
const FRONT_PER_BUCKET: usize = 4;

/// The fragment being pushed, after the per-fragment checks (positions
/// into its frame, so the frame itself can move into the queue).
#[derive(Clone, Copy)]
struct Prepared {
    key: Key,
    offset: u16,
    end: u16,
    more: bool,
    ecn: u8,
    /// Payload position and length in the frame.
    data_at: usize,
    len: usize,
    /// Header room a copy buffer started by this fragment gets.
    hroom: usize,
    head: Option<HeadIn>,
}

/// The payload of the fragment being pushed.
enum Payload<'a, B> {
    /// Lent frame: copy the payload.
    Copy(&'a [u8]),
    /// Owned frame: keep it.
    Own(B),
}

/// Where a completed datagram goes.
enum Out<'a, B> {
    Flat(&'a mut Vec<u8>),
    Chain(&'a mut Chain<B>),
}

impl Reassembler {
    /// A reassembler with random table keys (from `getrandom`; if the OS has
    /// no entropy source, from std's per-process `RandomState`), holding
    /// `Vec<u8>` frames on the zero-copy path.
    pub fn new(cfg: ReasmConfig) -> Result<Self, ReasmConfigError> {
        Self::new_owning(cfg)
    }

    /// A reassembler with fixed table keys (deterministic tests, replays).
    pub fn with_seed(cfg: ReasmConfig, seed: (u64, u64)) -> Result<Self, ReasmConfigError> {
        Self::with_seed_owning(cfg, seed)
    }
}

impl<B> Reassembler<B> {
    /// [`Reassembler::new`] for frame buffers of type `B` (e.g. a ring frame
    /// handle) on the zero-copy path.
    pub fn new_owning(cfg: ReasmConfig) -> Result<Self, ReasmConfigError> {
        let key = flowsteer_prim::SipKey::random();
        Self::with_seed_owning(cfg, (key.0, key.1))
    }

    /// [`Reassembler::with_seed`] for frame buffers of type `B`.
    pub fn with_seed_owning(cfg: ReasmConfig, seed: (u64, u64)) -> Result<Self, ReasmConfigError> {
        if cfg.low_thresh > cfg.high_thresh {
            return Err(ReasmConfigError::LowAboveHigh);
        }
        if cfg.max_datagrams > (1usize << 31) {
            return Err(ReasmConfigError::TooManyDatagrams);
        }
        Ok(Reassembler {
            cfg,
            sip: seed,
            buckets: Vec::new(),
            front: Vec::new(),
            front_over: Vec::new(),
            front_shift: 64,
            count: 0,
            slots: Vec::new(),
            free: Vec::new(),
            ages: [AgeList::EMPTY; 2],
            next_expiry: u64::MAX,
            mem: 0,
            stats: ReasmStats::default(),
            free_bufs: Vec::new(),
            free_buf_bytes: 0,
            sources: SourceTable::default(),
            fast_frags: cfg.max_frags.min(SMALL_RANGES),
            released: Vec::new(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ReasmConfig {
        &self.cfg
    }

    /// Accounted memory now (bytes; see [`FRAG_OVERHEAD`],
    /// [`DATAGRAM_OVERHEAD`](crate::DATAGRAM_OVERHEAD)).
    pub fn mem_used(&self) -> usize {
        self.mem
    }

    /// Datagrams (queues) pending.
    pub fn pending(&self) -> usize {
        self.count
    }

    /// Counters.
    pub fn stats(&self) -> &ReasmStats {
        &self.stats
    }

    /// When the oldest pending queue times out (for the caller's timer
    /// wheel), or None when nothing is pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        [Family::V4, Family::V6].into_iter().filter_map(|f| self.deadline(self.list(f).head)).min()
    }

    /// When the queue at `slot` times out.
    fn deadline(&self, slot: u32) -> Option<u64> {
        let q = self.queue(slot)?;
        Some(q.created.saturating_add(self.timeout(q.key.family())))
    }

    /// Accounted cost of one fragment entry (see [`FRAG_OVERHEAD`]).
    fn frag_cost() -> usize {
        FRAG_OVERHEAD.max(std::mem::size_of::<Frag<B>>().saturating_mul(2))
    }

    fn timeout(&self, fam: Family) -> u64 {
        match fam {
            Family::V4 => self.cfg.timeout_v4_ns,
            Family::V6 => self.cfg.timeout_v6_ns,
        }
    }

    fn list(&self, fam: Family) -> AgeList {
        self.ages.get(fam as usize).copied().unwrap_or(AgeList::EMPTY)
    }

    fn list_mut(&mut self, fam: Family) -> Option<&mut AgeList> {
        self.ages.get_mut(fam as usize)
    }

    #[inline]
    fn queue(&self, slot: u32) -> Option<&Queue<B>> {
        self.slots.get(slot as usize).filter(|q| q.live)
    }

    #[inline]
    fn queue_mut(&mut self, slot: u32) -> Option<&mut Queue<B>> {
        self.slots.get_mut(slot as usize).filter(|q| q.live)
    }

    /// Time passes: drops every queue whose timeout (from its first
    /// fragment) has run out by `now`. O(expired). Returns the number of
    /// queues dropped. Frames held by those queues are dropped (their
    /// `Drop` runs); use [`Reassembler::expire_into`] to get them back.
    pub fn expire(&mut self, now: u64) -> usize {
        let n = self.expire_inner(now);
        self.released.clear();
        n
    }

    /// [`Reassembler::expire`], appending the frames of the dropped queues
    /// to `spare`.
    pub fn expire_into(&mut self, now: u64, spare: &mut Vec<B>) -> usize {
        let n = self.expire_inner(now);
        spare.append(&mut self.released);
        n
    }

    /// Drops every pending queue (end of capture, shutdown), counted as
    /// [`DropReason::Flushed`](crate::DropReason::Flushed), and frees the
    /// max-distance rule's source table, the bucket array and the slab.
    /// Returns the number of queues dropped. Held frames are dropped; use
    /// [`Reassembler::flush_into`] to get them back.
    pub fn flush(&mut self) -> usize {
        let n = self.flush_inner();
        self.released.clear();
        n
    }

    /// [`Reassembler::flush`], appending every held frame to `spare`.
    pub fn flush_into(&mut self, spare: &mut Vec<B>) -> usize {
        let n = self.flush_inner();
        spare.append(&mut self.released);
        n
    }
}

impl<B: AsRef<[u8]>> Reassembler<B> {
    /// Feeds one packet, copying. `frame` holds the packet at
    /// `l3.l3_offset` (any link layer) and `l3` is its parse result
    /// (`flowsteer_wire::parse_frame(..).outer`). When the fragment completes
    /// its datagram, `out` is cleared and receives the complete IP packet
    /// (ready to use: IPv4 header with MF=0, offset 0, new total length and
    /// the checksum updated for them, so right when it was right on the
    /// offset-0 fragment; IPv6 with the Fragment header removed, the Next Header chain
    /// and payload length fixed), and the verdict is [`Verdict::Complete`].
    /// Otherwise `out` is left alone. Runs [`Reassembler::expire`] first.
    /// Held frames of queues dropped meanwhile (only when
    /// [`Reassembler::push_owned`] is used on the same reassembler) are
    /// dropped.
    pub fn push(&mut self, frame: &[u8], l3: &L3Info, now: u64, out: &mut Vec<u8>) -> Verdict {
        let v = match self.prepare(frame, l3, now) {
            Ok(p) => self.insert(p, Payload::Copy(frame), now, Out::Flat(out)),
            Err(v) => v,
        };
        self.released.clear();
        v
    }

    /// Feeds one packet, handing its frame buffer over (zero-copy; see the
    /// crate docs). `frame.as_ref()` holds the packet at `l3.l3_offset` and
    /// `l3` is its parse result. Runs [`Reassembler::expire`] first.
    ///
    /// * [`Verdict::Held`]: the reassembler keeps the frame.
    /// * [`Verdict::Complete`]: `out` holds the datagram, this frame among
    ///   its buffers (frames still in `out` from before are appended to
    ///   `spare` first).
    /// * [`Verdict::Dropped`], [`Verdict::NotFragment`], [`Verdict::Atomic`]:
    ///   the frame is handed back as the **last** element of `spare` (pass a
    ///   not-fragment or atomic one on unchanged).
    ///
    /// Frames of queues dropped during the call (expired, evicted, stale,
    /// or killed by this fragment) are appended to `spare` as well. Each
    /// held frame is charged its whole length against `high_thresh`.
    #[inline]
    pub fn push_owned(&mut self, frame: B, l3: &L3Info, now: u64, out: &mut Chain<B>, spare: &mut Vec<B>) -> Verdict {
        let v = self.push_owned_inner(frame, l3, now, out);
        if !self.released.is_empty() {
            spare.append(&mut self.released);
        }
        v
    }
}
