//! One datagram being reassembled ([`Queue`], in its slab slot): the held
//! fragments ([`Frag`]) in their range store ([`Ranges`]), where the
//! offset-0 header is kept ([`Head`]), the copy buffers ([`CopyBufs`]) and
//! the age list links ([`AgeList`]).

use std::collections::BTreeMap;

use crate::config::NIL;
use crate::key::Key;
use crate::sources::Rid;

/// Where a held fragment's payload is.
#[derive(Debug)]
pub(crate) enum Data<B> {
    /// Copied into the queue's buffer at this position.
    Copied(u32),
    /// In this frame buffer, from this position.
    Held(B, u32),
}

/// One held fragment: `[offset, end)` of the fragmentable part (both fit 16
/// bits: longer fragments are dropped as
/// [`DropReason::TooLarge`](crate::DropReason::TooLarge) first).
#[derive(Debug)]
pub(crate) struct Frag<B> {
    pub(crate) offset: u16,
    pub(crate) end: u16,
    pub(crate) more: bool,
    pub(crate) data: Data<B>,
}

impl<B> Frag<B> {
    pub(crate) fn offset(&self) -> usize {
        usize::from(self.offset)
    }

    fn end(&self) -> usize {
        usize::from(self.end)
    }

    fn len(&self) -> usize {
        self.end().saturating_sub(self.offset())
    }

    /// The frame buffer, if held.
    pub(crate) fn into_held(self) -> Option<B> {
        match self.data {
            Data::Held(b, _) => Some(b),
            Data::Copied(_) => None,
        }
    }
}

impl<B: AsRef<[u8]>> Frag<B> {
    /// The payload bytes (`copied`: the copy buffer its position refers to).
    pub(crate) fn bytes<'a>(&'a self, copied: &'a [u8]) -> &'a [u8] {
        let (bytes, at) = match &self.data {
            Data::Copied(pos) => (copied, *pos as usize),
            Data::Held(b, at) => (b.as_ref(), *at as usize),
        };
        bytes.get(at..at.saturating_add(self.len())).unwrap_or(&[])
    }
}

/// Ranges held beyond which a queue's sorted vector becomes a `BTreeMap`
/// (only with `max_frags` above it), so per-fragment work stays O(log n).
pub(crate) const SMALL_RANGES: usize = 64;
/// Range vector capacity a free slot keeps for its next queue (more is
/// freed), so a free slot holds at most this many entries' worth.
pub const KEEP_RANGES: usize = 8;

/// The held fragments of a queue, sorted by offset and disjoint.
#[derive(Debug)]
pub(crate) enum Ranges<B> {
    /// Sorted vector (binary search; inserts shift at most `SMALL_RANGES`).
    Small(Vec<Frag<B>>),
    /// Keyed by offset, for queues past `SMALL_RANGES` fragments (boxed:
    /// the enum is then as small as the vector, in every slot; the extra
    /// allocation is made once per queue past 64 fragments).
    #[allow(clippy::box_collection)]
    Big(Box<BTreeMap<u16, Frag<B>>>),
}

impl<B> Ranges<B> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Ranges::Small(v) => v.len(),
            Ranges::Big(m) => m.len(),
        }
    }

    /// The fragment starting at `offset`.
    pub(crate) fn get(&self, offset: u16) -> Option<&Frag<B>> {
        match self {
            Ranges::Small(v) => v.binary_search_by_key(&offset, |r| r.offset).ok().and_then(|i| v.get(i)),
            Ranges::Big(m) => m.get(&offset),
        }
    }

    /// The first fragment (the offset-0 one when the datagram is complete).
    fn first(&self) -> Option<&Frag<B>> {
        match self {
            Ranges::Small(v) => v.first(),
            Ranges::Big(m) => m.values().next(),
        }
    }

    /// The fragment starting last before `end`.
    pub(crate) fn last_before(&self, end: u16) -> Option<&Frag<B>> {
        match self {
            Ranges::Small(v) => v.partition_point(|r| r.offset < end).checked_sub(1).and_then(|i| v.get(i)),
            Ranges::Big(m) => m.range(..end).next_back().map(|(_, r)| r),
        }
    }

    /// Inserts a fragment disjoint from the held ones.
    #[inline(always)]
    pub(crate) fn insert(&mut self, r: Frag<B>) {
        // Fragments mostly arrive in order: a push at the end.
        if let Ranges::Small(v) = self {
            if v.len() < SMALL_RANGES && v.last().is_none_or(|l| l.offset < r.offset) {
                v.push(r);
                return;
            }
        }
        self.insert_slow(r);
    }

    #[inline(never)]
    fn insert_slow(&mut self, r: Frag<B>) {
        match self {
            Ranges::Small(v) if v.len() < SMALL_RANGES => {
                let i = v.partition_point(|x| x.offset < r.offset);
                v.insert(i, r);
            }
            Ranges::Small(v) => {
                let mut m: BTreeMap<u16, Frag<B>> = v.drain(..).map(|x| (x.offset, x)).collect();
                m.insert(r.offset, r);
                *self = Ranges::Big(Box::new(m));
            }
            Ranges::Big(m) => {
                m.insert(r.offset, r);
            }
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Frag<B>> {
        let (a, b) = match self {
            Ranges::Small(v) => (Some(v.iter()), None),
            Ranges::Big(m) => (None, Some(m.values())),
        };
        a.into_iter().flatten().chain(b.into_iter().flatten())
    }

    /// Empties the ranges, handing held frames to `released`, and keeps a
    /// small vector (at most [`KEEP_RANGES`] entries of capacity) for reuse.
    pub(crate) fn clear_into(&mut self, released: &mut Vec<B>) {
        match self {
            Ranges::Small(v) => {
                // A plain loop: cheaper than extending through the adapters
                // for the one to few fragments a queue usually holds.
                for f in v.drain(..) {
                    if let Data::Held(b, _) = f.data {
                        released.push(b);
                    }
                }
                if v.capacity() > KEEP_RANGES {
                    *v = Vec::new();
                }
            }
            Ranges::Big(m) => {
                released.extend(std::mem::take(m).into_values().filter_map(Frag::into_held));
                *self = Ranges::Small(Vec::new());
            }
        }
    }
}

/// Where the offset-0 fragment's header (IPv4: the whole header, options
/// included; IPv6: fixed header plus the extension headers before the
/// Fragment header) is kept.
#[derive(Clone, Copy, Debug)]
pub(crate) enum HeadLoc {
    /// `buf[..hroom]` of its queue (copied fragment, header as long as the
    /// header room).
    Inline,
    /// A copy of its own in the queue's `saved` (copied fragment, other
    /// length).
    Saved,
    /// In the held offset-0 frame, from this position (the IP header's).
    Held(u32),
}

/// The header of the offset-0 fragment, in 16 bytes (it lives in the
/// queue's slot): lengths and positions within a header fit 16 bits (an
/// IPv4 header is at most 60 bytes; an IPv6 packet's extension headers are
/// within its 16-bit payload length).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    pub(crate) loc: HeadLoc,
    /// Header length.
    len: u16,
    /// IPv6: where the Next Header field pointing at the Fragment header is
    /// (from the IP header's start), and the Fragment header's Next Header
    /// to write there.
    v6_next: Option<(u16, u8)>,
}

impl Head {
    /// None when a length or position does not fit 16 bits.
    pub(crate) fn new(loc: HeadLoc, len: usize, v6_next: Option<(usize, u8)>) -> Option<Head> {
        let v6_next = match v6_next {
            Some((at, nh)) => Some((u16::try_from(at).ok()?, nh)),
            None => None,
        };
        Some(Head { loc, len: u16::try_from(len).ok()?, v6_next })
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn v6_next(&self) -> Option<(usize, u8)> {
        self.v6_next.map(|(at, nh)| (usize::from(at), nh))
    }
}

/// The offset-0 fragment's header in the frame being pushed.
#[derive(Clone, Copy)]
pub(crate) struct HeadIn {
    /// Position of the IP header in the frame.
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) v6_next: Option<(usize, u8)>,
}

/// Recycled datagram buffers kept at most (not accounted in
/// [`Reassembler::mem_used`](crate::Reassembler::mem_used); bounded by this
/// and [`FREE_BUF_BYTES`]).
pub(crate) const FREE_BUFS: usize = 64;
/// Total capacity of the recycled buffers kept at most (512 KiB).
pub const FREE_BUF_BYTES: usize = 512 << 10;
/// Buffers smaller than this are not worth recycling.
pub(crate) const FREE_BUF_MIN: usize = 256;
/// A recycled buffer is handed to a new queue whose first fragment starts
/// a datagram (offset 0, or the last fragment) if its capacity is at most
/// `max(4 x needed, REUSE_SLACK)`; to a lone middle fragment only if at most
/// twice what it needs, so a flood of middle fragments is not charged for
/// big buffers.
pub(crate) const REUSE_SLACK: usize = 8192;

/// One datagram being reassembled, in its slab slot. Slots are reused in
/// place (a free slot keeps its range vector), so a queue is never moved.
/// `repr(C)`, 160 bytes (2.5 cache lines) with 16-byte frame handles:
/// what a lookup and a fragment in order read and write comes first (key,
/// rule mark, range vector and counters in the first two lines), the copy
/// path's buffers are boxed. Small matters with thousands of datagrams in
/// flight: at 248 bytes, 4,096 slots filled this machine's 1 MiB L2 (see
/// the slot's shrinking from 248 to 160 bytes in BENCHMARKS.md). Not
/// line-aligned: 64-byte alignment (a 256-byte stride) measured 10 % slower
/// there.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Queue<B> {
    pub(crate) key: Key,
    /// The slot holds a queue (else it is on the free list).
    pub(crate) live: bool,
    /// OR of the ECN code points seen, as Linux `IPFRAG_ECN_*` bits.
    pub(crate) ecn_seen: u8,
    /// The queue is in the front table at its key's index (else in the
    /// keyed table, counted in that front entry's `over`).
    pub(crate) in_front: bool,
    /// `buf` has been set up (header room in place); some fragment may be
    /// copied.
    pub(crate) has_buf: bool,
    /// Next queue in the same bucket of the keyed table.
    pub(crate) hnext: u32,
    /// IPv4 max-distance rule: the source's entry when the queue was last
    /// extended.
    pub(crate) rid: Option<Rid>,
    pub(crate) frags: Ranges<B>,
    /// End of the datagram, known once the last fragment arrived.
    pub(crate) known_end: Option<u16>,
    /// Largest end of any held fragment.
    pub(crate) max_end: u16,
    /// Payload bytes held (non-overlapping, so the datagram is complete when
    /// this equals `known_end`).
    pub(crate) received: u32,
    /// Accounted memory of this queue.
    pub(crate) mem: usize,
    /// The key's keyed table hash, when the queue is in the keyed table
    /// (kept so removal and rebuilds do not hash again).
    pub(crate) hash: u64,
    pub(crate) prev: u32,
    pub(crate) next: u32,
    pub(crate) created: u64,
    pub(crate) head: Option<Head>,
    /// The copy buffers (set up with the queue's first copied fragment;
    /// see `has_buf`): boxed, so a slot stays small for the zero-copy
    /// path. A free slot keeps its box for its next queue.
    pub(crate) copy: Option<Box<CopyBufs>>,
}

/// The buffers of a queue whose fragments were pushed by copying.
#[derive(Debug, Default)]
pub(crate) struct CopyBufs {
    /// The offset-0 header when [`HeadLoc::Saved`] (else empty, no
    /// allocation).
    pub(crate) saved: Vec<u8>,
    /// The copy buffer: `hroom` bytes for the IP header, then the copied
    /// fragments' payloads in arrival order (so in offset order, and already
    /// in place, when they arrive in order).
    pub(crate) buf: Vec<u8>,
    /// Header room at the front of `buf`: the header length of the first
    /// copied fragment (the offset-0 header when every fragment carries the
    /// same one, as they do in practice).
    pub(crate) hroom: usize,
}

impl<B> Queue<B> {
    pub(crate) fn vacant() -> Self {
        Queue {
            hash: 0,
            key: Key { addrs: [0; 4], meta: 0 },
            hnext: NIL,
            in_front: false,
            live: false,
            ecn_seen: 0,
            has_buf: false,
            prev: NIL,
            next: NIL,
            created: 0,
            known_end: None,
            max_end: 0,
            received: 0,
            mem: 0,
            rid: None,
            frags: Ranges::Small(Vec::new()),
            head: None,
            copy: None,
        }
    }

    /// The bytes of the offset-0 header, wherever they are kept.
    pub(crate) fn head_bytes(&self) -> &[u8]
    where
        B: AsRef<[u8]>,
    {
        let Some(head) = &self.head else { return &[] };
        let got = match &head.loc {
            HeadLoc::Inline => self.copy.as_ref().and_then(|c| c.buf.get(..c.hroom)),
            HeadLoc::Saved => self.copy.as_ref().map(|c| &c.saved[..]),
            HeadLoc::Held(at) => match self.frags.first() {
                Some(Frag { data: Data::Held(buf, _), .. }) => {
                    let at = *at as usize;
                    buf.as_ref().get(at..at.saturating_add(head.len()))
                }
                _ => None,
            },
        };
        got.unwrap_or(&[])
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AgeList {
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl AgeList {
    pub(crate) const EMPTY: AgeList = AgeList { head: NIL, tail: NIL };
}
