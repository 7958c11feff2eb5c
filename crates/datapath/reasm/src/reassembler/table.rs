//! The queue table: the front and keyed tables, the age lists, queue
//! creation and removal, eviction, expiry and the recycled copy buffers.

use super::{Prepared, Reassembler, FRONT_PER_BUCKET};
use crate::config::{DropReason, Verdict, DATAGRAM_OVERHEAD, MAX_IP_LEN, NIL};
use crate::key::{Family, Key, META_V6};
use crate::queue::{Queue, Ranges, FREE_BUFS, FREE_BUF_BYTES, FREE_BUF_MIN, KEEP_RANGES, REUSE_SLACK};
use crate::sources::SourceTable;

impl<B> Reassembler<B> {
    fn bucket(&self, hash: u64) -> usize {
        (hash as usize) & self.buckets.len().wrapping_sub(1)
    }

    /// The queue with this key, if any, and the key's keyed hash when it
    /// had to be computed: a queue at the key's front entry is found
    /// without hashing, and when no queue with this index is in the keyed
    /// table (`over` 0) there is none.
    #[inline]
    pub(super) fn find(&self, key: &Key) -> (Option<u32>, Option<u64>) {
        let fi = key.front_index(self.front_shift);
        let Some(&slot) = self.front.get(fi) else { return (None, None) };
        if let Some(q) = self.queue(slot) {
            if q.key == *key {
                return (Some(slot), None);
            }
        }
        if self.front_over.get(fi).is_none_or(|&o| o == 0) {
            return (None, None);
        }
        let hash = key.hash(self.sip);
        (self.lookup(key, hash), Some(hash))
    }

    /// The queue with this key and hash in the keyed table, if any.
    #[inline]
    fn lookup(&self, key: &Key, hash: u64) -> Option<u32> {
        let mut s = *self.buckets.get(self.bucket(hash))?;
        // Bounded: chains are acyclic and hold at most `count` queues.
        while let Some(q) = self.queue(s) {
            if q.hash == hash && q.key == *key {
                return Some(s);
            }
            s = q.hnext;
        }
        None
    }

    /// Doubles the bucket array (and the front table) when the queues (with
    /// one more) would outnumber it, placing every queue again: at its
    /// front entry if free, else in the keyed table (hashing the ones that
    /// were in front).
    fn reserve_bucket(&mut self) {
        if self.count < self.buckets.len() {
            return;
        }
        let n = self.buckets.len().saturating_mul(2).max(16);
        self.buckets.clear();
        self.buckets.resize(n, NIL);
        self.front.clear();
        self.front.resize(n.saturating_mul(FRONT_PER_BUCKET), NIL);
        self.front_over.clear();
        self.front_over.resize(n.saturating_mul(FRONT_PER_BUCKET), 0);
        self.front_shift = 64u32.saturating_sub(self.front.len().trailing_zeros());
        let mask = n.wrapping_sub(1);
        for (i, q) in self.slots.iter_mut().enumerate() {
            if !q.live {
                continue;
            }
            let fi = q.key.front_index(self.front_shift);
            let (Some(f), Some(over)) = (self.front.get_mut(fi), self.front_over.get_mut(fi)) else { continue };
            if *f == NIL {
                *f = i as u32;
                q.in_front = true;
                q.hnext = NIL;
                continue;
            }
            *over = over.wrapping_add(1);
            if q.in_front {
                q.hash = q.key.hash(self.sip);
                q.in_front = false;
            }
            if let Some(b) = self.buckets.get_mut((q.hash as usize) & mask) {
                q.hnext = *b;
                *b = i as u32;
            }
        }
    }

    /// Unlinks the queue at `slot` (with this hash and bucket successor)
    /// from its bucket, when it is not the bucket's first.
    #[cold]
    fn unlink_bucket(&mut self, slot: u32, hash: u64, hnext: u32) {
        let b = self.bucket(hash);
        let Some(&first) = self.buckets.get(b) else { return };
        let mut s = first;
        // Bounded: chains are acyclic and hold at most `count` queues.
        while let Some(q) = self.queue_mut(s) {
            if q.hnext == slot {
                q.hnext = hnext;
                return;
            }
            s = q.hnext;
        }
    }

    /// The oldest queue other than `keep`: the older of the two list heads
    /// (skipping `keep`). O(1).
    pub(super) fn oldest(&self, keep: Option<u32>) -> Option<u32> {
        let head = |fam: usize| {
            let mut s = self.ages.get(fam)?.head;
            if Some(s) == keep {
                s = self.queue(s)?.next;
            }
            self.queue(s).map(|q| (q.created, s))
        };
        match (head(0), head(1)) {
            (Some(a), Some(b)) => Some(a.min(b).1),
            (a, b) => a.or(b).map(|(_, s)| s),
        }
    }

    /// Drops the single fragment being pushed.
    pub(super) fn drop_single(&mut self, reason: DropReason) -> Verdict {
        self.stats.drop_frags(reason, 1);
        Verdict::Dropped(reason)
    }

    /// Keeps `buf` for a later queue if the free list has room.
    pub(super) fn recycle(&mut self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap >= FREE_BUF_MIN
            && self.free_bufs.len() < FREE_BUFS
            && self.free_buf_bytes.saturating_add(cap) <= FREE_BUF_BYTES
        {
            buf.clear();
            self.free_buf_bytes = self.free_buf_bytes.saturating_add(cap);
            self.free_bufs.push(buf);
        }
    }

    /// A copy buffer for a queue whose first copied fragment is `p`: `hroom`
    /// bytes of header room, capacity for at least the fragment. Recycled
    /// when one of a fitting size is free (see [`REUSE_SLACK`]).
    pub(super) fn take_buf(&mut self, hroom: usize, p: &Prepared) -> Vec<u8> {
        let needed = hroom.saturating_add(p.len);
        let starts = p.offset == 0 || !p.more;
        let max_cap = if starts { needed.saturating_mul(4).max(REUSE_SLACK) } else { needed.saturating_mul(2) };
        let found = self.free_bufs.iter().rposition(|b| (needed..=max_cap).contains(&b.capacity()));
        let mut buf = match found {
            Some(i) => {
                let b = self.free_bufs.swap_remove(i);
                self.free_buf_bytes = self.free_buf_bytes.saturating_sub(b.capacity());
                b
            }
            None => {
                let want = if p.offset == 0 {
                    needed.saturating_mul(2)
                } else if !p.more {
                    hroom.saturating_add(usize::from(p.end)).min(max_cap)
                } else {
                    needed
                };
                Vec::with_capacity(want.min(hroom.saturating_add(MAX_IP_LEN)).max(needed))
            }
        };
        buf.clear();
        buf.resize(hroom, 0);
        buf
    }

    /// Takes the queue at `slot` out of the table and its age list and
    /// releases its accounting; its contents stay in the slot for
    /// [`Reassembler::vacate`].
    #[inline(always)]
    pub(super) fn unlink(&mut self, slot: u32) -> bool {
        let v6 = self.queue(slot).is_some_and(|q| q.key.meta & META_V6 != 0);
        self.unlink_as(slot, v6)
    }

    /// [`Reassembler::unlink`] of a queue of the family `v6` (known to the
    /// caller).
    #[inline(always)]
    pub(super) fn unlink_as(&mut self, slot: u32, v6: bool) -> bool {
        let Some(q) = self.slots.get_mut(slot as usize) else { return false };
        if !q.live {
            return false;
        }
        q.live = false;
        let (hash, hnext, prev, next, mem, n) = (q.hash, q.hnext, q.prev, q.next, q.mem, q.frags.len());
        let (in_front, fi) = (q.in_front, q.key.front_index_as(self.front_shift, v6));
        if in_front {
            if let Some(f) = self.front.get_mut(fi) {
                *f = NIL;
            }
        } else if let Some(o) = self.front_over.get_mut(fi) {
            *o = o.wrapping_sub(1);
        }
        if !in_front {
            let b = self.bucket(hash);
            match self.buckets.get_mut(b) {
                Some(first) if *first == slot => *first = hnext,
                _ => self.unlink_bucket(slot, hash, hnext),
            }
        }
        // Links point at live queues (or are NIL).
        if let Some(p) = self.slots.get_mut(prev as usize) {
            p.next = next;
        }
        let next_created = match self.slots.get_mut(next as usize) {
            Some(n) => {
                n.prev = prev;
                n.created
            }
            None => u64::MAX,
        };
        let timeout = if v6 { self.cfg.timeout_v6_ns } else { self.cfg.timeout_v4_ns };
        if let Some(l) = self.ages.get_mut(usize::from(v6)) {
            if l.head == slot {
                l.head = next;
                // The new head may time out before the bound when the
                // caller's clock went backwards.
                self.next_expiry = self.next_expiry.min(next_created.saturating_add(timeout));
            }
            if l.tail == slot {
                l.tail = prev;
            }
        }
        self.count = self.count.wrapping_sub(1);
        self.mem = self.mem.wrapping_sub(mem);
        self.stats.pending = self.stats.pending.wrapping_sub(n as u64);
        true
    }

    /// Empties an unlinked slot (held frames to `released`, copy buffer
    /// recycled) and puts it on the free list.
    #[inline(always)]
    pub(super) fn vacate(&mut self, slot: u32) {
        let Some(q) = self.slots.get_mut(slot as usize) else { return };
        match &mut q.frags {
            Ranges::Small(v) if v.is_empty() && v.capacity() <= KEEP_RANGES => {}
            frags => frags.clear_into(&mut self.released),
        }
        if let Some(c) = q.copy.as_mut() {
            if c.saved.capacity() > 0 {
                c.saved = Vec::new();
            }
            if c.buf.capacity() > 0 {
                let buf = std::mem::take(&mut c.buf);
                self.recycle(buf);
            }
        }
        self.free.push(slot);
    }

    /// Drops a whole queue for `reason`; `extra` fragments (the one being
    /// pushed, not stored) are counted with it.
    pub(super) fn kill(&mut self, slot: u32, reason: DropReason, extra: u64) {
        let held = self.queue(slot).map_or(0, |q| q.frags.len() as u64);
        if !self.unlink(slot) {
            return;
        }
        self.vacate(slot);
        self.stats.drop_frags(reason, held.saturating_add(extra));
        self.stats.drop_datagram(reason);
    }

    /// Ensures `cost` more bytes fit under `high_thresh`, evicting the oldest
    /// queues (never `keep`) down to `low_thresh` when they do not.
    #[inline]
    pub(super) fn make_room(&mut self, cost: usize, keep: Option<u32>) -> bool {
        self.mem.saturating_add(cost) <= self.cfg.high_thresh || self.evict_for(cost, keep)
    }

    #[cold]
    fn evict_for(&mut self, cost: usize, keep: Option<u32>) -> bool {
        while self.mem.saturating_add(cost) > self.cfg.low_thresh {
            let Some(victim) = self.oldest(keep) else { break };
            self.kill(victim, DropReason::Evicted, 0);
        }
        self.mem.saturating_add(cost) <= self.cfg.high_thresh
    }

    /// Time passes: drops every queue whose timeout has run out by `now`.
    #[inline]
    pub(super) fn expire_inner(&mut self, now: u64) -> usize {
        if now < self.next_expiry {
            return 0;
        }
        self.expire_walk(now)
    }

    fn expire_walk(&mut self, now: u64) -> usize {
        let mut n = 0usize;
        for fam in [Family::V4, Family::V6] {
            let timeout = self.timeout(fam);
            loop {
                let head = self.list(fam).head;
                let Some(q) = self.queue(head) else { break };
                if now.saturating_sub(q.created) < timeout {
                    break;
                }
                if q.head.is_some() {
                    self.stats.time_exceeded = self.stats.time_exceeded.wrapping_add(1);
                }
                self.kill(head, DropReason::TimedOut, 0);
                n = n.saturating_add(1);
            }
        }
        self.next_expiry = self.poll_timeout().unwrap_or(u64::MAX);
        n
    }

    pub(super) fn flush_inner(&mut self) -> usize {
        let mut n = 0usize;
        for fam in [Family::V4, Family::V6] {
            loop {
                let head = self.list(fam).head;
                if self.queue(head).is_none() {
                    break;
                }
                self.kill(head, DropReason::Flushed, 0);
                n = n.saturating_add(1);
            }
        }
        // No queue refers to the max-distance entries, the buckets or the
        // slots any more.
        self.sources = SourceTable::default();
        self.buckets = Vec::new();
        self.front = Vec::new();
        self.front_over = Vec::new();
        self.front_shift = 64;
        self.slots = Vec::new();
        self.free = Vec::new();
        self.next_expiry = u64::MAX;
        n
    }

    /// Creates an empty queue for `key` in a free slot, linked at the tail
    /// of its age list and at its front entry if free, else into the keyed
    /// table (`hash`: the key's keyed hash if already computed), charging
    /// [`DATAGRAM_OVERHEAD`].
    #[inline(always)]
    pub(super) fn create(&mut self, key: Key, hash: Option<u64>, now: u64) -> Option<u32> {
        self.reserve_bucket();
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = u32::try_from(self.slots.len()).ok().filter(|&s| s != NIL)?;
                self.slots.push(Queue::vacant());
                s
            }
        };
        let fam = key.family();
        let tail = self.list(fam).tail;
        let fi = key.front_index(self.front_shift);
        let in_front = self.front.get(fi) == Some(&NIL);
        let (hash, first) = if in_front {
            (0, NIL)
        } else {
            let h = hash.unwrap_or_else(|| key.hash(self.sip));
            (h, self.buckets.get(self.bucket(h)).copied().unwrap_or(NIL))
        };
        let q = self.slots.get_mut(slot as usize)?;
        q.hash = hash;
        q.key = key;
        q.hnext = first;
        q.in_front = in_front;
        q.live = true;
        q.ecn_seen = 0;
        q.has_buf = false;
        q.prev = tail;
        q.next = NIL;
        q.created = now;
        q.known_end = None;
        q.max_end = 0;
        q.received = 0;
        q.mem = DATAGRAM_OVERHEAD;
        q.rid = None;
        q.head = None;
        if in_front {
            if let Some(f) = self.front.get_mut(fi) {
                *f = slot;
            }
        } else if let Some(o) = self.front_over.get_mut(fi) {
            *o = o.wrapping_add(1);
        }
        if !in_front {
            let b = self.bucket(hash);
            if let Some(h) = self.buckets.get_mut(b) {
                *h = slot;
            }
        }
        // Link at the tail of the family's age list.
        if let Some(t) = self.queue_mut(tail) {
            t.next = slot;
        }
        if let Some(l) = self.list_mut(fam) {
            if l.head == NIL {
                l.head = slot;
            }
            l.tail = slot;
        }
        self.next_expiry = self.next_expiry.min(now.saturating_add(self.timeout(fam)));
        self.count = self.count.saturating_add(1);
        self.mem = self.mem.saturating_add(DATAGRAM_OVERHEAD);
        self.stats.datagrams_created = self.stats.datagrams_created.wrapping_add(1);
        Some(slot)
    }
}
