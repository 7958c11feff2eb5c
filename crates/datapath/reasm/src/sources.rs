//! The IPv4 max-distance rule's per-source counters ([`SourceTable`]), the
//! guard against ID wrap-around (crate docs, "IPv4 ID wrap").

use crate::config::NIL;
use flowsteer_prim::siphash;

/// IPv4 sources the max-distance rule tracks at once (2-way buckets, LRU
/// replacement within a bucket; see the crate docs).
pub const MAX_DIST_SOURCES: usize = 4096;
const SOURCE_WAYS: usize = 2;
const SOURCE_BUCKETS: usize = MAX_DIST_SOURCES / SOURCE_WAYS;
const SOURCE_MEMO_BITS: u32 = 10;
/// Entries of the max-distance rule's source memo (4 B each).
const SOURCE_MEMO: usize = 1 << SOURCE_MEMO_BITS;

/// The max-distance rule's view of a queue's source: which entry, its
/// generation, and the source's counter when the queue was last extended.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rid {
    idx: u32,
    gen: u32,
    counter: u32,
}

/// The max-distance rule's per-source counters.
#[derive(Debug, Default)]
pub(crate) struct SourceTable {
    /// [`MAX_DIST_SOURCES`] entries once the first IPv4 fragment came, else
    /// empty.
    entries: Vec<SourceEntry>,
    /// Last generation handed to an entry (0 = never; 0 marks an empty
    /// entry).
    gen: u32,
    /// IPv4 fragments counted (wrapping; the entries' LRU clock).
    clock: u32,
    /// Lookaside memo ([`SOURCE_MEMO`] entry indexes at a cheap unkeyed
    /// index of the source), so a datagram's first fragment from a known
    /// source usually skips the keyed lookup. A hit is verified against the
    /// entry's source; a miss (or an attacker's collisions) costs only the
    /// keyed lookup it would have cost anyway.
    memo: Vec<u32>,
}

impl SourceTable {
    /// The max-distance rule for a fragment of a queue last extended under
    /// entry `h`: counts the fragment on that entry and moves the queue's
    /// mark `h` to it (true), or changes nothing (false) when the entry was
    /// replaced, belongs to another source, or the queue is stale (the
    /// caller takes the general path, which decides what to do). The entry's
    /// LRU time is not touched: it is the time of the source's last new
    /// datagram ([`SourceTable::tick`]), recent enough for the replacement
    /// within a bucket.
    #[inline(always)]
    pub(crate) fn tick_known(&mut self, h: &mut Rid, src: u32, max_dist: u32) -> bool {
        let Some(e) = self.entries.get_mut(h.idx as usize) else { return false };
        let counter = e.counter.wrapping_add(1);
        if (e.src, e.gen) != (src, h.gen) || counter.wrapping_sub(h.counter) > max_dist {
            return false;
        }
        e.counter = counter;
        h.counter = counter;
        true
    }

    /// Counts one IPv4 fragment from `src` and returns its entry, creating
    /// it (replacing the least recently used one of its bucket) if needed.
    /// `hint` is the entry the fragment's queue counts on: when it still
    /// belongs to `src` no lookup is needed.
    #[inline]
    pub(crate) fn tick(&mut self, sip: (u64, u64), src: u32, hint: Option<Rid>) -> Option<Rid> {
        self.clock = self.clock.wrapping_add(1);
        let clock = self.clock;
        let is = |e: Option<&SourceEntry>, gen: Option<u32>| {
            e.is_some_and(|e| e.gen != 0 && gen.is_none_or(|g| g == e.gen) && e.src == src)
        };
        // The queue's entry, else the memo's (a verified hit skips the
        // SipHash), else the keyed lookup.
        let idx = match hint {
            Some(h) if is(self.entries.get(h.idx as usize), Some(h.gen)) => h.idx,
            _ => match self.memo.get(Self::memo_index(src)) {
                Some(&i) if is(self.entries.get(i as usize), None) => i,
                _ => return self.tick_lookup(sip, src, clock),
            },
        };
        let e = self.entries.get_mut(idx as usize)?;
        e.counter = e.counter.wrapping_add(1);
        e.used = clock;
        Some(Rid { idx, gen: e.gen, counter: e.counter })
    }

    /// [`SourceTable::tick`] for a source the memo does not know: the keyed
    /// lookup (allocating the table on first use), then the memo points at
    /// the entry.
    #[cold]
    fn tick_lookup(&mut self, sip: (u64, u64), src: u32, clock: u32) -> Option<Rid> {
        if self.entries.is_empty() {
            self.entries = vec![SourceEntry::default(); MAX_DIST_SOURCES];
            self.memo = vec![NIL; SOURCE_MEMO];
        }
        let idx = self.find_or_replace(sip, src, clock)?;
        let idx32 = u32::try_from(idx).ok()?;
        if let Some(e) = self.memo.get_mut(Self::memo_index(src)) {
            *e = idx32;
        }
        let e = self.entries.get_mut(idx)?;
        e.counter = e.counter.wrapping_add(1);
        e.used = clock;
        Some(Rid { idx: idx32, gen: e.gen, counter: e.counter })
    }

    /// The memo index of `src`: Fibonacci hashing of the address as a
    /// number (its last octet, the most varying one, in the low bits).
    #[inline(always)]
    fn memo_index(src: u32) -> usize {
        (src.swap_bytes().wrapping_mul(0x9e37_79b1) >> (32 - SOURCE_MEMO_BITS)) as usize
    }

    /// `src`'s keyed bucket.
    fn bucket(sip: (u64, u64), src: u32) -> usize {
        (siphash::sip13(sip.0, sip.1, &[], u64::from(src), 4) as usize) & (SOURCE_BUCKETS - 1)
    }

    /// The keyed lookup: `src`'s entry in its bucket, or the bucket's least
    /// recently used one given to `src`.
    #[cold]
    fn find_or_replace(&mut self, sip: (u64, u64), src: u32, clock: u32) -> Option<usize> {
        let base = Self::bucket(sip, src).checked_mul(SOURCE_WAYS)?;
        let ways = self.entries.get_mut(base..base.checked_add(SOURCE_WAYS)?)?;
        let i = match ways.iter().position(|e| e.gen != 0 && e.src == src) {
            Some(i) => i,
            None => {
                let (i, victim) = ways.iter_mut().enumerate().max_by_key(|(_, e)| {
                    if e.gen == 0 {
                        u32::MAX
                    } else {
                        clock.wrapping_sub(e.used)
                    }
                })?;
                self.gen = self.gen.checked_add(1).unwrap_or(1);
                *victim = SourceEntry { src, gen: self.gen, counter: 0, used: clock };
                i
            }
        };
        base.checked_add(i)
    }
}

/// Whether a queue last extended at `then` is more than `max_dist`
/// fragments of its source behind `now`. Queues from an entry since replaced
/// (other generation) are never stale.
pub(crate) fn is_stale(now: Option<Rid>, then: Option<Rid>, max_dist: u32) -> bool {
    match (now, then) {
        (Some(now), Some(then)) => now.gen == then.gen && now.counter.wrapping_sub(then.counter) > max_dist,
        _ => false,
    }
}

/// One source of the max-distance rule.
#[derive(Clone, Copy, Debug, Default)]
struct SourceEntry {
    src: u32,
    /// 0: empty.
    gen: u32,
    /// IPv4 fragments seen from `src` (wrapping).
    counter: u32,
    /// `source_clock` when last used.
    used: u32,
}
