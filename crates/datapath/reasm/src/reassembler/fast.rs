//! The zero-copy fast paths of [`Reassembler::push_owned`] (crate docs,
//! "Fast paths"): the side-effect-free per-fragment checks, a fragment that
//! extends a queue found at its front entry or starts one at a free entry,
//! and the delivery of a queue of held frames.

use std::net::IpAddr;

use flowsteer_wire::{proto, L3Info};

use super::{Out, Reassembler};
use crate::chain::Chain;
use crate::config::{DropReason, ReasmConfig, Verdict, DATAGRAM_OVERHEAD, MAX_IP_LEN, NIL};
use crate::header::{ecn_bit, ecn_combine, fix_header, fix_ipv4_words, min_l4_len, v6_next_header_field};
use crate::key::{Family, Key};
use crate::queue::{Data, Frag, Head, HeadLoc, Queue, Ranges, KEEP_RANGES};
use crate::sources::{Rid, SourceTable};

/// A fragment that passed the per-fragment checks of the zero-copy fast
/// paths ([`fast_prep_v4`], [`Reassembler::fast_prep_v6`]).
struct FastPrep {
    key: Key,
    offset: u16,
    end: u16,
    more: bool,
    ecn: u8,
    /// Payload position and length in the frame.
    data_at: u32,
    len: u32,
}

/// The per-fragment checks of the zero-copy fast paths for an option-less
/// IPv4 header `h`, at `at` of a frame of `frame_len` bytes, read from the
/// header itself: the same checks as [`Reassembler::prepare`] and the same
/// key as from the parse result (identification as a number, addresses in
/// memory byte order), without any side effect. None when a check fails or
/// the packet is no fragment (the general path decides). IPv6:
/// [`Reassembler::fast_prep_v6`].
#[inline(always)]
fn fast_prep_v4(h: &[u8; 20], at: usize, frame_len: usize) -> Option<FastPrep> {
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let flags_offset = u16::from_be_bytes([h[6], h[7]]);
    let more = flags_offset & 0x2000 != 0;
    // At most 65528.
    let offset = (flags_offset & 0x1fff) << 3;
    // `frame_len - at` is at least 20 (the header is in the frame); `at`
    // below 2^24 keeps the payload position within 32 bits.
    if (!more && offset == 0) || total <= 20 || total > frame_len.wrapping_sub(at) || at >= 1 << 24 {
        return None;
    }
    let len = total.wrapping_sub(20);
    if more && !len.is_multiple_of(8) {
        return None;
    }
    // Below 2^17: no overflow.
    let end = usize::from(offset).wrapping_add(len);
    if end.wrapping_add(20) > MAX_IP_LEN || (offset == 8 && h[9] == proto::TCP) {
        return None;
    }
    let src = u32::from_ne_bytes([h[12], h[13], h[14], h[15]]);
    let dst = u32::from_ne_bytes([h[16], h[17], h[18], h[19]]);
    let id = u16::from_be_bytes([h[4], h[5]]);
    Some(FastPrep {
        key: Key {
            addrs: [u64::from(src) | (u64::from(dst) << 32), 0, 0, 0],
            meta: u64::from(id) | (u64::from(h[9]) << 32),
        },
        offset,
        end: end as u16,
        more,
        ecn: ecn_bit(h[1] & 3),
        data_at: at.wrapping_add(20) as u32,
        len: len as u32,
    })
}

/// The offset-0 header of a fragment that passed the fast path's checks
/// and is kept in its frame: None when the general path must decide (an
/// upper-layer header not whole, an IPv6 extension chain that does not lead
/// to the Fragment header).
#[inline(always)]
fn head_held<const V6: bool>(frame: &[u8], l3: &L3Info, p: &FastPrep) -> Option<Head> {
    let ip_end = usize::try_from(p.data_at.wrapping_add(p.len)).ok()?;
    let l4_end = l3.l4_offset.map(|l4| l4.saturating_add(min_l4_len(l3.tuple.proto)));
    if l4_end.is_none_or(|e| e > ip_end) {
        return None;
    }
    let at = l3.l3_offset;
    let loc = HeadLoc::Held(u32::try_from(at).ok()?);
    if !V6 {
        return Head::new(loc, l3.ip_header_len, None);
    }
    let frag_at = l3.ip_header_len.saturating_sub(8);
    let ip = frame.get(at..ip_end)?;
    match (v6_next_header_field(ip, frag_at), ip.get(frag_at)) {
        (Some(field), Some(&nh)) if frag_at >= 40 => Head::new(loc, frag_at, Some((field, nh))),
        _ => None,
    }
}

impl<B: AsRef<[u8]>> Reassembler<B> {
    /// The per-fragment checks of [`Reassembler::prepare`] for the fast
    /// paths of [`Reassembler::push_owned`] on an IPv6 fragment, from its
    /// parse result, without any side effect: None when a check fails (the
    /// general path then decides the fragment from scratch). IPv4:
    /// [`fast_prep_v4`].
    #[inline(always)]
    fn fast_prep_v6(frame: &[u8], l3: &L3Info) -> Option<FastPrep> {
        if l3.atomic_frag {
            return None;
        }
        let fi = l3.frag?;
        let key = match (l3.tuple.src, l3.tuple.dst) {
            (IpAddr::V6(s), IpAddr::V6(d)) => Key::v6(s, d, fi.id),
            _ => return None,
        };
        let ip_end = l3.l3_offset.checked_add(l3.ip_total_len)?;
        let data_at = l3.l3_offset.checked_add(l3.ip_header_len)?;
        if l3.truncated || ip_end > frame.len() || data_at >= ip_end || ip_end > u32::MAX as usize {
            return None;
        }
        let len = ip_end.wrapping_sub(data_at);
        if fi.more && !len.is_multiple_of(8) {
            return None;
        }
        // Below 2^32 + 2^16: no overflow.
        let end = usize::from(fi.offset).wrapping_add(len);
        if end > MAX_IP_LEN {
            return None;
        }
        Some(FastPrep {
            key,
            offset: fi.offset,
            end: end as u16,
            more: fi.more,
            ecn: ecn_bit(l3.ecn),
            data_at: data_at as u32,
            len: len as u32,
        })
    }

    /// [`Reassembler::push_owned`] without handing `released` over.
    ///
    /// Fast paths, each deciding without side effects first and then doing
    /// exactly what the general path would: a fragment for a queue the
    /// front table finds, in any order, that fits between the held ones (no
    /// duplicate, no overlap), is consistent with the known end, and passes
    /// the fragment cap, the max-distance rule (its source entry still the
    /// queue's), the memory limit and, at offset 0, the header checks (an
    /// in-order one is appended; an out-of-order one placed with one compare
    /// when it goes before everything held, else after a short walk back);
    /// and one that starts a queue ([`Reassembler::fast_new`]). Anything
    /// else (a check that fails, expiry due, a queue in the keyed table)
    /// takes the general path, which decides it from scratch, out of line.
    /// Inlined into the caller's loop with the queue creation and the
    /// delivery: three calls and their prologues per datagram cost ~10 % of
    /// its instructions.
    #[inline(always)]
    pub(super) fn push_owned_inner(&mut self, frame: B, l3: &L3Info, now: u64, out: &mut Chain<B>) -> Verdict {
        if now < self.next_expiry {
            // The usual IPv4 header (no options): read from the frame, as a
            // NIC driver would, which costs fewer instructions than the
            // parse result's scattered fields (`l3` is the parse of these
            // bytes). IPv6: from the parse result. The rest of the fast path
            // is compiled once per family, its family tests folded away.
            let bytes = frame.as_ref();
            let at = l3.l3_offset;
            let (v4, prep) = match bytes.get(at..).and_then(<[u8]>::first_chunk::<20>) {
                Some(h) if h[0] == 0x45 => (true, fast_prep_v4(h, at, bytes.len())),
                Some(h) if h[0] >> 4 == 6 => (false, Self::fast_prep_v6(bytes, l3)),
                _ => (false, None),
            };
            match (v4, prep) {
                (true, Some(p)) => return self.fast_push::<false>(p, frame, l3, now, out),
                (false, Some(p)) => return self.fast_push::<true>(p, frame, l3, now, out),
                _ => {}
            }
        }
        self.push_owned_general(frame, l3, now, out)
    }

    /// The fast paths of [`Reassembler::push_owned`] for a fragment of the
    /// family `V6` that passed its per-fragment checks (`p`).
    #[inline(always)]
    fn fast_push<const V6: bool>(
        &mut self,
        p: FastPrep,
        frame: B,
        l3: &L3Info,
        now: u64,
        out: &mut Chain<B>,
    ) -> Verdict {
        let fi = p.key.front_index_as(self.front_shift, V6);
        let Some(&slot) = self.front.get(fi) else {
            return self.push_owned_general(frame, l3, now, out);
        };
        let Some(q) = self.slots.get_mut(slot as usize).filter(|q| q.live && q.key.eq_as(&p.key, V6)) else {
            // The front entry must be free and no queue with its index in
            // the keyed table: then there is no queue for the key, and the
            // new one goes in front, without hashing. (A front entry taken
            // by another key: the general path, which hashes.)
            if slot == NIL && self.front_over.get(fi) == Some(&0) {
                return self.fast_new::<V6>(p, fi, frame, l3, now, out);
            }
            return self.push_owned_general(frame, l3, now, out);
        };
        let (offset, end) = (p.offset, p.end);
        let Ranges::Small(frags) = &mut q.frags else {
            return self.push_owned_general(frame, l3, now, out);
        };
        let held = frags.len();
        if held >= self.fast_frags {
            return self.push_owned_general(frame, l3, now, out);
        }
        if offset >= q.max_end {
            // In order (at or past the end of everything held): at the end,
            // where nothing can overlap it. No end known yet: once the last
            // fragment is held, everything held ends at or before its end,
            // so a fragment past it is beyond the end (the general path).
            let cost = frame.as_ref().len().saturating_add(Self::frag_cost());
            if q.known_end.is_some() || self.mem.saturating_add(cost) > self.cfg.high_thresh {
                return self.push_owned_general(frame, l3, now, out);
            }
            // The last check; it also counts the fragment on its source.
            if !Self::fast_rid::<V6>(&mut self.sources, &self.cfg, &p.key, &mut q.rid) {
                return self.push_owned_general(frame, l3, now, out);
            }
            // Decided: what the general path would do.
            self.stats.fragments_in = self.stats.fragments_in.wrapping_add(1);
            frags.push(Frag { offset, end, more: p.more, data: Data::Held(frame, p.data_at) });
            if Self::account_fragment(q, &mut self.mem, &mut self.stats, end, p.more, p.len as usize, p.ecn, cost) {
                return self.complete_chain::<V6>(slot, offset, out);
            }
            return Verdict::Held;
        }
        // Out of order: after the last fragment starting before it (a short
        // walk back: a queue holds a few fragments), ending before the next
        // one starts (an exact duplicate starts with it, so it fails too)
        // and starting after the previous one ends, within the known end,
        // at offset 0 only once.
        let (at, fits) = match frags.first() {
            // Before everything held (fragments arriving last first).
            Some(first) if end <= first.offset => (0, true),
            _ => {
                let mut at = held;
                while let Some(before) = at.checked_sub(1) {
                    if frags.get(before).is_none_or(|r| r.offset < offset) {
                        break;
                    }
                    at = before;
                }
                let fits = at.checked_sub(1).and_then(|i| frags.get(i)).is_none_or(|r| r.end <= offset)
                    && frags.get(at).is_none_or(|r| end <= r.offset);
                (at, fits)
            }
        };
        // A last fragment (MF clear) never fits here: it ends at or past
        // every held end, and the held one that ends last (none is empty)
        // ends after its start. Others end within the known end.
        let end_ok = p.more && q.known_end.is_none_or(|e| end <= e);
        if !fits || !end_ok || (offset == 0 && q.head.is_some()) {
            return self.push_owned_general(frame, l3, now, out);
        }
        let cost = frame.as_ref().len().saturating_add(Self::frag_cost());
        if self.mem.saturating_add(cost) > self.cfg.high_thresh {
            return self.push_owned_general(frame, l3, now, out);
        }
        let head = if offset == 0 {
            match head_held::<V6>(frame.as_ref(), l3, &p) {
                Some(h) => Some(h),
                None => return self.push_owned_general(frame, l3, now, out),
            }
        } else {
            None
        };
        // The last check; it also counts the fragment on its source.
        if !Self::fast_rid::<V6>(&mut self.sources, &self.cfg, &p.key, &mut q.rid) {
            return self.push_owned_general(frame, l3, now, out);
        }
        // Decided: what the general path would do.
        self.stats.fragments_in = self.stats.fragments_in.wrapping_add(1);
        frags.insert(at, Frag { offset, end, more: p.more, data: Data::Held(frame, p.data_at) });
        if head.is_some() {
            q.head = head;
        }
        if Self::account_fragment(q, &mut self.mem, &mut self.stats, end, p.more, p.len as usize, p.ecn, cost) {
            return self.complete_chain::<V6>(slot, offset, out);
        }
        Verdict::Held
    }

    /// The max-distance rule in a fast path, for a fragment of a queue whose
    /// mark is `held`: true (IPv6, or the rule off: nothing to do) or true
    /// after counting the fragment on the queue's source entry and moving
    /// the mark; false, with nothing changed, when the general path must
    /// decide (no mark, entry replaced, other source, stale queue).
    #[inline(always)]
    fn fast_rid<const V6: bool>(
        sources: &mut SourceTable,
        cfg: &ReasmConfig,
        key: &Key,
        held: &mut Option<Rid>,
    ) -> bool {
        if V6 || cfg.max_dist == 0 {
            return true;
        }
        held.as_mut().is_some_and(|h| sources.tick_known(h, key.v4_src(), cfg.max_dist))
    }

    /// The fast path for a fragment that starts a queue: its front entry
    /// free and no queue with that index in the keyed table (so no queue
    /// for its key, found without hashing), no table growth due, the
    /// offset-0 checks passed. It evicts (full table, memory bound) as the
    /// general path does. Otherwise the general path.
    #[inline(always)]
    fn fast_new<const V6: bool>(
        &mut self,
        p: FastPrep,
        fi: usize,
        frame: B,
        l3: &L3Info,
        now: u64,
        out: &mut Chain<B>,
    ) -> Verdict {
        let cost = frame.as_ref().len().saturating_add(Self::frag_cost());
        if self.count >= self.buckets.len() {
            return self.push_owned_general(frame, l3, now, out);
        }
        let head = if p.offset == 0 {
            match head_held::<V6>(frame.as_ref(), l3, &p) {
                Some(h) => Some(h),
                None => return self.push_owned_general(frame, l3, now, out),
            }
        } else {
            None
        };
        // Decided: from here on, what the general path does, in its order:
        // count the fragment on its source, evict for a full table, make
        // room (evicting the oldest queues), create the queue (at its front
        // entry, free: eviction only frees entries), store the fragment.
        self.stats.fragments_in = self.stats.fragments_in.wrapping_add(1);
        let rid = if !V6 && self.cfg.max_dist != 0 { self.sources.tick(self.sip, p.key.v4_src(), None) } else { None };
        if self.count >= self.cfg.max_datagrams {
            if let Some(old) = self.oldest(None) {
                self.kill(old, DropReason::Evicted, 0);
            }
        }
        if !self.make_room(cost.saturating_add(DATAGRAM_OVERHEAD), None) {
            self.released.push(frame);
            return self.drop_single(DropReason::NoMemory);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => match u32::try_from(self.slots.len()).ok().filter(|&s| s != NIL) {
                Some(s) => {
                    self.slots.push(Queue::vacant());
                    s
                }
                None => {
                    self.released.push(frame);
                    return self.drop_single(DropReason::NoMemory);
                }
            },
        };
        let fam = usize::from(V6);
        let Some(list) = self.ages.get_mut(fam) else {
            self.released.push(frame);
            return self.drop_single(DropReason::BadHeader);
        };
        let tail = list.tail;
        if list.head == NIL {
            list.head = slot;
        }
        list.tail = slot;
        if let Some(t) = self.slots.get_mut(tail as usize) {
            t.next = slot;
        }
        if let Some(f) = self.front.get_mut(fi) {
            *f = slot;
        }
        let Some(q) = self.slots.get_mut(slot as usize) else {
            self.released.push(frame);
            return self.drop_single(DropReason::BadHeader);
        };
        q.key = p.key;
        q.live = true;
        q.ecn_seen = p.ecn;
        q.in_front = true;
        q.has_buf = false;
        q.hnext = NIL;
        q.rid = rid;
        q.known_end = if p.more { None } else { Some(p.end) };
        q.max_end = p.end;
        q.received = p.len;
        q.mem = cost.saturating_add(DATAGRAM_OVERHEAD);
        q.prev = tail;
        q.next = NIL;
        q.created = now;
        q.head = head;
        // A fresh queue's list is empty: a freed slot keeps an empty vector
        // (`vacate` empties it, a delivery swaps in the chain's, emptied
        // first), so the fragment is pushed without `Ranges::insert`'s
        // order checks.
        let frag = Frag { offset: p.offset, end: p.end, more: p.more, data: Data::Held(frame, p.data_at) };
        match &mut q.frags {
            Ranges::Small(v) => v.push(frag),
            frags => frags.insert(frag),
        }
        let done = q.known_end.map(u32::from) == Some(q.received);
        let timeout = if V6 { self.cfg.timeout_v6_ns } else { self.cfg.timeout_v4_ns };
        self.next_expiry = self.next_expiry.min(now.saturating_add(timeout));
        self.count = self.count.wrapping_add(1);
        self.mem = self.mem.wrapping_add(cost.saturating_add(DATAGRAM_OVERHEAD));
        if self.mem > self.stats.mem_high_watermark {
            self.stats.mem_high_watermark = self.mem;
        }
        self.stats.datagrams_created = self.stats.datagrams_created.wrapping_add(1);
        self.stats.pending = self.stats.pending.wrapping_add(1);
        if done {
            return self.complete_chain::<V6>(slot, p.offset, out);
        }
        Verdict::Held
    }

    /// [`Reassembler::complete`] for the zero-copy fast paths, in the usual
    /// case: a queue of held frames only (no copy buffer), in a sorted
    /// vector, with the offset-0 header in the first frame and the
    /// datagram-level checks passed. Anything else goes to `complete`.
    #[inline(always)]
    fn complete_chain<const V6: bool>(&mut self, slot: u32, pushed: u16, ch: &mut Chain<B>) -> Verdict {
        let Some(q) = self.slots.get_mut(slot as usize) else {
            return Verdict::Held;
        };
        let (Some(head @ Head { loc: HeadLoc::Held(at), .. }), Ranges::Small(frags), false) =
            (q.head, &mut q.frags, q.has_buf)
        else {
            return self.complete(slot, pushed, Out::Chain(ch));
        };
        let (hlen, v6_next) = (head.len(), head.v6_next());
        let v6 = V6;
        let ip_len = hlen.saturating_add(q.received as usize);
        let set_ce = ecn_combine(q.ecn_seen);
        let hdr = match frags.first() {
            Some(Frag { data: Data::Held(first, _), .. }) => {
                let at = at as usize;
                first.as_ref().get(at..at.saturating_add(hlen))
            }
            _ => None,
        };
        let (Some(set_ce), Some(hdr)) = (set_ce, hdr) else {
            return self.complete(slot, pushed, Out::Chain(ch));
        };
        if ip_len > if v6 { MAX_IP_LEN + 40 } else { MAX_IP_LEN } {
            return self.complete(slot, pushed, Out::Chain(ch));
        }
        if !ch.frags.is_empty() {
            self.released.extend(ch.frags.drain(..).filter_map(Frag::into_held));
        }
        let family = if v6 { Family::V6 } else { Family::V4 };
        match (<&[u8; 20]>::try_from(hdr), ch.inline.first_chunk_mut::<20>()) {
            // The usual option-less IPv4 header, fixed in place.
            (Ok(h), Some(dst)) if !v6 => {
                *dst = *h;
                if let Some(w) = dst.first_chunk_mut::<12>() {
                    fix_ipv4_words(w, ip_len, set_ce);
                }
                ch.inline_len = 20;
            }
            _ => match ch.inline.get_mut(..hdr.len()) {
                Some(dst) => {
                    dst.copy_from_slice(hdr);
                    fix_header(family, dst, ip_len, set_ce, v6_next);
                    ch.inline_len = hdr.len();
                }
                None => {
                    ch.inline_len = 0;
                    ch.header.clear();
                    ch.header.extend_from_slice(hdr);
                    fix_header(family, &mut ch.header, ip_len, set_ce, v6_next);
                }
            },
        }
        ch.copied.clear();
        ch.len = ip_len;
        let n = frags.len();
        // Out of the table first (it counts the fragments held).
        self.unlink_as(slot, V6);
        if let Some(Queue { frags: Ranges::Small(frags), .. }) = self.slots.get_mut(slot as usize) {
            // Hand the fragment list over whole; the chain's empty vector
            // stays with the slot for its next queue (unless it grew large).
            std::mem::swap(frags, &mut ch.frags);
            if frags.capacity() > KEEP_RANGES {
                *frags = Vec::new();
            }
        }
        self.free.push(slot);
        self.stats.fragments_completed = self.stats.fragments_completed.wrapping_add(n as u64);
        self.stats.datagrams_completed = self.stats.datagrams_completed.wrapping_add(1);
        Verdict::Complete { fragments: u32::try_from(n).unwrap_or(u32::MAX) }
    }
}
