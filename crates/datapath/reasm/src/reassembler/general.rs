//! The general path, taken by [`Reassembler::push`] and by whatever the
//! fast paths leave: the per-fragment checks, the checks against a queue,
//! the store and the delivery.

use std::net::IpAddr;

use flowsteer_wire::{proto, L3Info};

use super::{Out, Payload, Prepared, Reassembler};
use crate::chain::Chain;
use crate::config::{DropReason, ReasmStats, Verdict, DATAGRAM_OVERHEAD, MAX_IP_LEN};
use crate::header::{copy_small, ecn_bit, ecn_combine, fix_header, min_l4_len, v6_next_header_field};
use crate::key::{Family, Key, META_V6};
use crate::queue::{Data, Frag, Head, HeadIn, HeadLoc, Queue, Ranges};
use crate::sources::{is_stale, Rid};

/// Capacity to grow a buffer of capacity `cap` to so it holds `needed`
/// bytes: double (amortised O(1) appends), but never past `limit` (what the
/// datagram can need) nor below `needed`.
fn grow_target(cap: usize, needed: usize, limit: usize) -> usize {
    if needed <= cap {
        cap
    } else {
        cap.saturating_mul(2).min(limit).max(needed)
    }
}

/// The most a queue's buffer can need once `p` is in: header room plus the
/// datagram's end if known, else the largest payload.
fn buf_limit(hroom: usize, known_end: Option<u16>, p: &Prepared) -> usize {
    let end = if p.more { known_end.map(usize::from) } else { Some(usize::from(p.end)) };
    hroom.saturating_add(end.unwrap_or(MAX_IP_LEN))
}

impl<B> Reassembler<B> {
    /// The checks against a queue's state, in Linux `ip_frag_queue` order:
    /// end consistency, then duplicate, then overlap, then the cap.
    fn check_existing(q: &Queue<B>, f: &Prepared, max_frags: usize) -> Option<DropReason> {
        let end = usize::from(f.end);
        if !f.more {
            if end < usize::from(q.max_end) || q.known_end.is_some_and(|e| usize::from(e) != end) {
                return Some(DropReason::ConflictingEnd);
            }
        } else if q.known_end.is_some_and(|e| end > usize::from(e)) {
            return Some(DropReason::ConflictingEnd);
        }
        // In-order arrival (at or past the end of the last held fragment)
        // can neither duplicate nor overlap: skip both searches.
        // (`max_end` is the end of the last held fragment: they are disjoint.)
        if f.offset < q.max_end {
            if let Some(h) = q.frags.get(f.offset) {
                if h.end == f.end && h.more == f.more {
                    return Some(DropReason::Duplicate);
                }
            }
            // Fragments are disjoint, so the one starting last before our end
            // is the only candidate that can overlap us (see the crate docs).
            if let Some(prev) = q.frags.last_before(f.end) {
                if prev.end > f.offset {
                    return Some(DropReason::Overlap);
                }
            }
        }
        if q.frags.len() >= max_frags {
            return Some(DropReason::TooManyFrags);
        }
        None
    }
}

impl<B: AsRef<[u8]>> Reassembler<B> {
    /// [`Reassembler::push_owned`] for everything the fast path does not
    /// take.
    #[cold]
    #[inline(never)]
    pub(super) fn push_owned_general(&mut self, frame: B, l3: &L3Info, now: u64, out: &mut Chain<B>) -> Verdict {
        match self.prepare(frame.as_ref(), l3, now) {
            Ok(p) => self.insert(p, Payload::Own(frame), now, Out::Chain(out)),
            Err(v) => {
                self.released.push(frame);
                v
            }
        }
    }

    /// A fragment was just added to queue `q`: its end, MF flag, payload
    /// length, ECN bit and `cost` bytes of accounted
    /// memory go into the queue and the totals (`mem`, `stats`: the
    /// reassembler's, passed apart so `q` can stay borrowed from the slab).
    /// True when the datagram is now complete. Shared by the general and
    /// the fast paths.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn account_fragment(
        q: &mut Queue<B>,
        mem: &mut usize,
        stats: &mut ReasmStats,
        end: u16,
        more: bool,
        len: usize,
        ecn: u8,
        cost: usize,
    ) -> bool {
        if !more {
            q.known_end = Some(end);
        }
        q.max_end = q.max_end.max(end);
        // Held fragments are disjoint and end by 65,535: no overflow.
        q.received = q.received.wrapping_add(len as u32);
        q.ecn_seen |= ecn;
        q.mem = q.mem.wrapping_add(cost);
        *mem = mem.wrapping_add(cost);
        if *mem > stats.mem_high_watermark {
            stats.mem_high_watermark = *mem;
        }
        stats.pending = stats.pending.wrapping_add(1);
        q.known_end.map(u32::from) == Some(q.received)
    }

    /// The per-fragment checks shared by both paths: nothing malformed is
    /// ever stored. Err is the verdict for a packet that goes no further
    /// (the frame is then not kept).
    #[inline(always)]
    pub(super) fn prepare(&mut self, frame: &[u8], l3: &L3Info, now: u64) -> Result<Prepared, Verdict> {
        self.expire_inner(now);
        if l3.atomic_frag {
            self.stats.atomic = self.stats.atomic.wrapping_add(1);
            return Err(Verdict::Atomic);
        }
        let Some(fi) = l3.frag else {
            self.stats.not_fragment = self.stats.not_fragment.wrapping_add(1);
            return Err(Verdict::NotFragment);
        };
        self.stats.fragments_in = self.stats.fragments_in.wrapping_add(1);
        if self.cfg.max_frags == 0 || self.cfg.max_datagrams == 0 {
            return Err(self.drop_single(DropReason::Disabled));
        }
        let key = match (l3.tuple.src, l3.tuple.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Key::v4(s, d, fi.id, l3.tuple.proto),
            (IpAddr::V6(s), IpAddr::V6(d)) => Key::v6(s, d, fi.id),
            _ => return Err(self.drop_single(DropReason::BadHeader)),
        };
        let v4 = key.meta & META_V6 == 0;
        let (ip_end, o1) = l3.l3_offset.overflowing_add(l3.ip_total_len);
        let (data_at, o2) = l3.l3_offset.overflowing_add(l3.ip_header_len);
        if o1 | o2 | l3.truncated | (ip_end > frame.len()) {
            return Err(self.drop_single(DropReason::Truncated));
        }
        if data_at > ip_end || ip_end > u32::MAX as usize {
            return Err(self.drop_single(DropReason::BadHeader));
        }
        let len = ip_end.wrapping_sub(data_at);
        if len == 0 || (fi.more && !len.is_multiple_of(8)) {
            return Err(self.drop_single(DropReason::BadLength));
        }
        // Both below 2^32 (ip_end is), so no overflow.
        let end = usize::from(fi.offset).wrapping_add(len);
        // Also makes end (and so offset) fit 16 bits.
        let limit_end = if v4 { end.saturating_add(l3.ip_header_len) } else { end };
        if limit_end > MAX_IP_LEN {
            return Err(self.drop_single(DropReason::TooLarge));
        }
        let hroom = if v4 { l3.ip_header_len } else { l3.ip_header_len.saturating_sub(8) };
        let head = if fi.offset == 0 {
            let l4_end = l3.l4_offset.map(|l4| l4.saturating_add(min_l4_len(l3.tuple.proto)));
            if l4_end.is_none_or(|e| e > ip_end) {
                return Err(self.drop_single(DropReason::TinyFirst));
            }
            let at = l3.l3_offset;
            if v4 {
                Some(HeadIn { at, len: l3.ip_header_len, v6_next: None })
            } else {
                let frag_at = hroom;
                let ip = frame.get(at..ip_end).unwrap_or(&[]);
                match (v6_next_header_field(ip, frag_at), ip.get(frag_at)) {
                    (Some(field), Some(&nh)) if frag_at >= 40 => {
                        Some(HeadIn { at, len: frag_at, v6_next: Some((field, nh)) })
                    }
                    _ => return Err(self.drop_single(DropReason::BadHeader)),
                }
            }
        } else {
            if v4 && fi.offset == 8 && l3.tuple.proto == proto::TCP {
                return Err(self.drop_single(DropReason::TinyFirst));
            }
            None
        };
        // A queue keeps header lengths in 16 bits ([`Head`]); a longer one
        // cannot come from a real packet (the IPv6 payload length bounds
        // the extension headers), only from a parse result that does not
        // match its frame.
        if head.is_some_and(|h| h.len > usize::from(u16::MAX)) {
            return Err(self.drop_single(DropReason::BadHeader));
        }
        Ok(Prepared {
            key,
            offset: fi.offset,
            end: end as u16,
            more: fi.more,
            ecn: ecn_bit(l3.ecn),
            data_at,
            len,
            hroom,
            head,
        })
    }

    /// Drops the fragment being pushed (its frame, if owned, is released;
    /// a copy buffer taken for it is recycled). `counted`: the fragment was
    /// already counted with its killed queue.
    #[cold]
    fn reject(&mut self, reason: DropReason, payload: Payload<'_, B>, buf: Option<Vec<u8>>, counted: bool) -> Verdict {
        if let Some(b) = buf {
            self.recycle(b);
        }
        if let Payload::Own(b) = payload {
            self.released.push(b);
        }
        if counted {
            Verdict::Dropped(reason)
        } else {
            self.drop_single(reason)
        }
    }

    /// A fragment that fails the checks against its queue: a duplicate is
    /// dropped alone, anything else drops the whole queue with it.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, slot: u32, reason: DropReason, payload: Payload<'_, B>) -> Verdict {
        if reason == DropReason::Duplicate {
            return self.reject(reason, payload, None, false);
        }
        self.kill(slot, reason, 1);
        self.reject(reason, payload, None, true)
    }

    /// Accounted bytes a copied offset-0 header adds when it does not fit
    /// the header room `hroom` (it is then kept on its own).
    #[inline(always)]
    fn head_extra(payload: &Payload<'_, B>, p: &Prepared, hroom: usize) -> usize {
        match (payload, p.head) {
            (Payload::Copy(_), Some(h)) if h.len != hroom => h.len,
            _ => 0,
        }
    }

    /// The table, rule and accounting part shared by both paths, then the
    /// store and, if the datagram is whole, the delivery. The common case
    /// (a later fragment of a known datagram, found at its front entry)
    /// stays inline; starting a queue is out of line.
    #[inline(always)]
    pub(super) fn insert(&mut self, p: Prepared, payload: Payload<'_, B>, now: u64, out: Out<'_, B>) -> Verdict {
        let (found, hash) = self.find(&p.key);
        let max_dist = self.cfg.max_dist;
        let rid = if p.key.meta & META_V6 == 0 && max_dist != 0 {
            let hint = found.and_then(|s| self.slots.get(s as usize)).and_then(|q| q.rid);
            self.sources.tick(self.sip, p.key.v4_src(), hint)
        } else {
            None
        };
        let Some(slot) = found else {
            return self.insert_new(p, payload, hash, rid, now, out);
        };
        let Some(q) = self.slots.get(slot as usize) else {
            return self.reject(DropReason::BadHeader, payload, None, false);
        };
        if is_stale(rid, q.rid, max_dist) {
            self.kill(slot, DropReason::StaleQueue, 0);
            return self.insert_new(p, payload, hash, rid, now, out);
        }
        if let Some(reason) = Self::check_existing(q, &p, self.cfg.max_frags) {
            return self.refuse(slot, reason, payload);
        }
        let mut new_buf = None;
        let cost = match &payload {
            Payload::Own(b) => b.as_ref().len(),
            Payload::Copy(_) if q.has_buf => {
                let (cap, len, hroom) = q.copy.as_ref().map_or((0, 0, 0), |c| (c.buf.capacity(), c.buf.len(), c.hroom));
                let needed = len.saturating_add(p.len);
                let grown = grow_target(cap, needed, buf_limit(hroom, q.known_end, &p));
                grown.saturating_sub(cap).saturating_add(Self::head_extra(&payload, &p, hroom))
            }
            // No copy buffer yet: take one.
            Payload::Copy(_) => {
                let b = self.take_buf(p.hroom, &p);
                let c = b.capacity().saturating_add(Self::head_extra(&payload, &p, p.hroom));
                new_buf = Some(b);
                c
            }
        };
        if !self.make_room(cost.saturating_add(Self::frag_cost()), Some(slot)) {
            return self.reject(DropReason::NoMemory, payload, new_buf, false);
        }
        self.store(slot, p, payload, new_buf, rid, out)
    }

    /// A fragment that starts a queue (no queue for its key, or a stale one
    /// just dropped).
    #[inline(never)]
    fn insert_new(
        &mut self,
        p: Prepared,
        payload: Payload<'_, B>,
        hash: Option<u64>,
        rid: Option<Rid>,
        now: u64,
        out: Out<'_, B>,
    ) -> Verdict {
        if self.count >= self.cfg.max_datagrams {
            if let Some(old) = self.oldest(None) {
                self.kill(old, DropReason::Evicted, 0);
            }
        }
        let mut new_buf = None;
        let cost = match &payload {
            Payload::Copy(_) => {
                let b = self.take_buf(p.hroom, &p);
                let c = b.capacity().saturating_add(Self::head_extra(&payload, &p, p.hroom));
                new_buf = Some(b);
                c
            }
            Payload::Own(b) => b.as_ref().len(),
        };
        if !self.make_room(cost.saturating_add(Self::frag_cost()).saturating_add(DATAGRAM_OVERHEAD), None) {
            return self.reject(DropReason::NoMemory, payload, new_buf, false);
        }
        match self.create(p.key, hash, now) {
            Some(slot) => self.store(slot, p, payload, new_buf, rid, out),
            None => self.reject(DropReason::NoMemory, payload, new_buf, false),
        }
    }

    /// Stores the fragment in the queue at `slot` (room was made for it),
    /// and delivers the datagram if it is now whole.
    #[inline(always)]
    fn store(
        &mut self,
        slot: u32,
        p: Prepared,
        payload: Payload<'_, B>,
        new_buf: Option<Vec<u8>>,
        rid: Option<Rid>,
        out: Out<'_, B>,
    ) -> Verdict {
        let Some(q) = self.slots.get_mut(slot as usize) else {
            return self.reject(DropReason::BadHeader, payload, new_buf, false);
        };
        // Store the payload (growing the copy buffer as predicted) and the
        // offset-0 header.
        let mut mem = Self::frag_cost();
        let data = match payload {
            Payload::Copy(frame) => {
                // The queue's first copied fragment comes with its buffer.
                let c = q.copy.get_or_insert_with(Box::default);
                let fresh = new_buf.is_some();
                if let Some(b) = new_buf {
                    c.buf = b;
                    c.hroom = p.hroom;
                    q.has_buf = true;
                }
                let old_cap = c.buf.capacity();
                let needed = c.buf.len().saturating_add(p.len);
                if needed > old_cap {
                    let target = grow_target(old_cap, needed, buf_limit(c.hroom, q.known_end, &p));
                    c.buf.reserve_exact(target.saturating_sub(c.buf.len()));
                }
                let pos = c.buf.len();
                c.buf.extend_from_slice(frame.get(p.data_at..p.data_at.saturating_add(p.len)).unwrap_or(&[]));
                // A new buffer's capacity counts whole; a grown one, the growth.
                let before = if fresh { 0 } else { old_cap };
                mem = mem.saturating_add(c.buf.capacity().saturating_sub(before));
                if let Some(h) = p.head {
                    let bytes = frame.get(h.at..h.at.saturating_add(h.len)).unwrap_or(&[]);
                    let loc = if h.len == c.hroom {
                        if let Some(b) = c.buf.get_mut(..h.len) {
                            b.copy_from_slice(bytes);
                        }
                        HeadLoc::Inline
                    } else {
                        mem = mem.saturating_add(h.len);
                        c.saved.clear();
                        c.saved.extend_from_slice(bytes);
                        HeadLoc::Saved
                    };
                    // (None only for a header that cannot be: the
                    // datagram is then dropped on completion.)
                    q.head = Head::new(loc, h.len, h.v6_next);
                }
                Data::Copied(pos as u32)
            }
            Payload::Own(b) => {
                mem = mem.saturating_add(b.as_ref().len());
                if let Some(h) = p.head {
                    q.head = Head::new(HeadLoc::Held(h.at as u32), h.len, h.v6_next);
                }
                Data::Held(b, p.data_at as u32)
            }
        };
        q.frags.insert(Frag { offset: p.offset, end: p.end, more: p.more, data });
        q.rid = rid;
        if Self::account_fragment(q, &mut self.mem, &mut self.stats, p.end, p.more, p.len, p.ecn, mem) {
            return self.complete(slot, p.offset, out);
        }
        Verdict::Held
    }

    /// Drops the queue at `slot`, just completed by the fragment at offset
    /// `pushed`, for a datagram-level `reason`; that fragment's frame (if
    /// held) is handed back last, as for any dropped fragment.
    #[cold]
    #[inline(never)]
    fn kill_completing(&mut self, slot: u32, reason: DropReason, pushed: u16) -> Verdict {
        let held = |f: &Frag<B>| matches!(f.data, Data::Held(..));
        let pos = self.queue(slot).and_then(|q| {
            let mine = q.frags.get(pushed).is_some_and(held);
            mine.then(|| q.frags.iter().filter(|f| held(f) && f.offset < pushed).count())
        });
        let start = self.released.len();
        self.kill(slot, reason, 0);
        if let Some(i) = pos.and_then(|i| i.checked_add(start)).filter(|&i| i < self.released.len()) {
            let frame = self.released.remove(i);
            self.released.push(frame);
        }
        Verdict::Dropped(reason)
    }

    /// Delivers the whole datagram at `slot`, just completed by the fragment
    /// at offset `pushed`, into `out` (or drops it when the datagram-level
    /// checks fail). Once per datagram: out of line.
    #[inline(never)]
    pub(super) fn complete(&mut self, slot: u32, pushed: u16, out: Out<'_, B>) -> Verdict {
        let Some(q) = self.queue(slot) else {
            return Verdict::Held;
        };
        let total = q.received as usize;
        let Some(head) = q.head else {
            // Unreachable in practice: full coverage includes offset 0.
            return self.kill_completing(slot, DropReason::BadHeader, pushed);
        };
        let Some(set_ce) = ecn_combine(q.ecn_seen) else {
            return self.kill_completing(slot, DropReason::EcnMismatch, pushed);
        };
        let ip_len = head.len().saturating_add(total);
        let family = q.key.family();
        let fits = match family {
            Family::V4 => ip_len <= MAX_IP_LEN,
            Family::V6 => ip_len.saturating_sub(40) <= MAX_IP_LEN,
        };
        if !fits {
            return self.kill_completing(slot, DropReason::TooLarge, pushed);
        }
        let n = q.frags.len();
        if !self.unlink(slot) {
            return Verdict::Held;
        }
        let Some(q) = self.slots.get_mut(slot as usize) else {
            return Verdict::Held;
        };
        match out {
            Out::Flat(out) => {
                let (hroom, copied) = q.copy.as_ref().map_or((0, &[][..]), |c| (c.hroom, &c.buf[..]));
                // Fragments that arrived in order are already in place behind
                // the header: hand the buffer over. Otherwise one copy, in
                // offset order.
                let in_place = matches!(head.loc, HeadLoc::Inline)
                    && copied.len() == hroom.saturating_add(total)
                    && q.frags.iter().all(|r| match r.data {
                        Data::Copied(pos) => pos as usize == hroom.saturating_add(r.offset()),
                        Data::Held(..) => false,
                    });
                if in_place {
                    // (In place implies the copy buffers.)
                    if let Some(c) = q.copy.as_mut() {
                        std::mem::swap(out, &mut c.buf);
                    }
                } else {
                    out.clear();
                    out.reserve(ip_len);
                    out.extend_from_slice(q.head_bytes());
                    for f in q.frags.iter() {
                        out.extend_from_slice(f.bytes(copied));
                    }
                }
                fix_header(family, out.get_mut(..head.len()).unwrap_or(&mut []), ip_len, set_ce, head.v6_next());
            }
            Out::Chain(ch) => {
                if !ch.frags.is_empty() {
                    self.released.extend(ch.frags.drain(..).filter_map(Frag::into_held));
                }
                ch.inline_len = 0;
                ch.header.clear();
                copy_small(&mut ch.header, q.head_bytes());
                fix_header(family, &mut ch.header, ip_len, set_ce, head.v6_next());
                match q.copy.as_mut() {
                    Some(c) if q.has_buf => std::mem::swap(&mut ch.copied, &mut c.buf),
                    _ => ch.copied.clear(),
                }
                // Hand the fragment list over whole; the chain's empty vector
                // stays with the slot for its next queue.
                match &mut q.frags {
                    Ranges::Small(v) => std::mem::swap(v, &mut ch.frags),
                    Ranges::Big(m) => ch.frags.extend(std::mem::take(m).into_values()),
                }
                ch.len = ip_len;
            }
        }
        self.vacate(slot);
        self.stats.fragments_completed = self.stats.fragments_completed.wrapping_add(n as u64);
        self.stats.datagrams_completed = self.stats.datagrams_completed.wrapping_add(1);
        Verdict::Complete { fragments: u32::try_from(n).unwrap_or(u32::MAX) }
    }
}
