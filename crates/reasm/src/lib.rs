//! flowsteer-reasm: sans-IO, per-core IPv4/IPv6 fragment reassembly.
//!
//! Stage "worker / reasm" of the packet's path (source -> parse -> hash -> steer
//! -> hand-off -> **worker: reassembly** -> app -> sink). Fragments are steered
//! on the IP 2-tuple, reassembled on the core where they land (mission M14/M15),
//! and the complete datagram is handed back to the caller to re-hash and
//! re-inject. One [`Reassembler`] per worker core: it is `Send` but not `Sync`,
//! owns all its memory and takes no locks.
//!
//! # Sans-IO
//!
//! The reassembler never reads a clock, never spawns a thread and never
//! prints. Time is the `now: u64` (nanoseconds, any epoch, monotonic) argument
//! of [`Reassembler::push`] and [`Reassembler::expire`]; output goes into a
//! caller-owned `Vec<u8>`; what happened is a [`Verdict`] plus counters in
//! [`ReasmStats`]. Nothing panics on any input.
//!
//! # Algorithm
//!
//! * **Table.** A `HashMap<Key, slot>` hashed with keyed SipHash-1-3 (random
//!   keys from `getrandom`, or a fixed seed for tests) points into a slab of
//!   datagram queues. The key is (family, src, dst, id, protocol) for IPv4
//!   (RFC 791 §3.2: the protocol is part of the key) and (family, src, dst, id)
//!   for IPv6 (RFC 8200 §4.5: the Next Header of the Fragment headers may differ
//!   between fragments, only the offset-0 one counts; Linux keys IPv6 the same
//!   way). At most [`ReasmConfig::max_datagrams`] queues; a new queue in a full
//!   table evicts the oldest one.
//! * **Age lists.** Every queue sits in an index-linked list per family in
//!   creation order. Timeouts are fixed per family, so the list head is always
//!   the next queue to expire: [`Reassembler::expire`] is O(expired) and
//!   eviction pops the older of the two heads in O(1). The timer starts with
//!   the first fragment and is **not** extended by later ones (Linux
//!   ip_fragment.c; a trickle of fragments cannot keep a queue alive).
//! * **Fragments in a queue.** Each queue owns one byte buffer: header room
//!   (the first fragment's IP header length) followed by the payloads in
//!   arrival order, each copied once, straight from the frame. When the
//!   fragments arrived in order they are already in place behind the header:
//!   completion writes the header and hands the buffer over (`out` is swapped
//!   with it); otherwise it copies the pieces into `out` in offset order.
//!   Buffers (and the caller's previous `out`) are recycled through a small
//!   free list ([`FREE_BUF_BYTES`]), so steady state does not allocate.
//!   Only the (offset, end, position) ranges are kept for the checks, in a
//!   sorted vector (a `BTreeMap` past 64 fragments) keyed by offset: the
//!   overlap check looks only at the one fragment starting just before the new
//!   fragment's end, so insert + overlap check is O(log n) search plus a
//!   bounded shift, and per-fragment work does not grow with the queue
//!   (FragmentSmack, CVE-2018-5391). The per-datagram cap
//!   [`ReasmConfig::max_frags`] bounds n anyway.
//! * **IPv4 ID wrap (RFC 4963).** A 16-bit IPv4 ID wraps after 65 536
//!   datagrams, which a fast sender reaches well within one timeout, so a
//!   stale incomplete queue can be completed by fragments of a newer datagram
//!   with the same ID: silent corruption. The max-distance rule (Linux
//!   `ipfrag_max_dist`) catches it: the reassembler counts the IPv4 fragments
//!   seen from each source address, each queue remembers that counter from
//!   when it was last extended, and a fragment arriving for a queue more than
//!   [`ReasmConfig::max_dist`] fragments behind its source drops the queue
//!   ([`DropReason::StaleQueue`]) and starts a fresh one. The per-source
//!   table is bounded: [`MAX_DIST_SOURCES`] entries in 2-way buckets indexed
//!   by the same keyed SipHash as the queue table (so an attacker cannot aim
//!   collisions), the least recently used entry of a bucket replaced by a new
//!   source; it is allocated on the first IPv4 fragment (16 B per entry, not
//!   part of [`Reassembler::mem_used`]) and freed by [`Reassembler::flush`].
//!   Every entry carries a generation number that its queues remember: when
//!   a source's entry was replaced in the meantime, its old queues are never
//!   judged stale (only the timeout applies to them), so replacement can lose
//!   protection but never drops a live queue. IPv6 IDs are 32 bits and do not
//!   wrap in practice: the rule is IPv4 only, as in Linux.
//! * **Memory.** Accounted memory ([`Reassembler::mem_used`]) is each queue's
//!   buffer *capacity* (payload, header room and growth slack: buffers grow by
//!   doubling, capped at what the datagram can need, so at most about twice
//!   the payload; a recycled buffer is only handed to a lone middle fragment
//!   if at most twice what it needs) plus [`FRAG_OVERHEAD`] per held fragment
//!   plus [`DATAGRAM_OVERHEAD`] and any offset-0 header that did not fit the
//!   header room, per queue. Recycled free buffers are not accounted; they
//!   are bounded by [`FREE_BUF_BYTES`] on top of `high_thresh`. A
//!   fragment that would lift it above `high_thresh` first evicts the oldest
//!   other queues until it fits under `low_thresh` (Linux `ipfrag_high_thresh` /
//!   `ipfrag_low_thresh`); if it still cannot fit under `high_thresh` it is
//!   dropped ([`DropReason::NoMemory`]). So accounted memory is never above
//!   `high_thresh`, eviction costs O(1) amortised per fragment (a queue is
//!   evicted at most once), and queues that keep completing are young and
//!   survive a flood of never-completing ones.
//!
//! # Policy (what is dropped, and how much)
//!
//! | input | outcome | reason |
//! |---|---|---|
//! | fragment overlapping a held one (any geometry) | whole queue dropped at once, held fragments freed | [`DropReason::Overlap`] |
//! | exact duplicate (same offset, length and MF) | fragment ignored, queue untouched (no metadata update, not counted against the cap) | [`DropReason::Duplicate`] |
//! | the `max_frags + 1`-th distinct fragment | whole queue dropped | [`DropReason::TooManyFrags`] |
//! | last fragment with a different end than a previous last one, last fragment ending before held data, non-last fragment beyond a known end | whole queue dropped (corruption, as Linux `discard_qp`) | [`DropReason::ConflictingEnd`] |
//! | IPv4 fragment for a queue last extended more than `max_dist` fragments ago from that source | stale queue dropped, the fragment starts a fresh queue ([`Verdict::Held`]) | [`DropReason::StaleQueue`] |
//! | Not-ECT mixed with ECT/CE at completion | whole datagram dropped (RFC 3168 §5.3, Linux `ip_frag_ecn_table`) | [`DropReason::EcnMismatch`] |
//! | non-last fragment not a multiple of 8 bytes, empty fragment | fragment dropped, never stored | [`DropReason::BadLength`] |
//! | IPv4 header + offset + length > 65535, IPv6 offset + length > 65535 | fragment dropped | [`DropReason::TooLarge`] |
//! | offset-0 fragment without the whole L4 header (RFC 1858, RFC 7112), IPv4 TCP fragment at offset 8 (RFC 1858 §3.2) | fragment dropped | [`DropReason::TinyFirst`] |
//! | frame shorter than the IP length says | fragment dropped | [`DropReason::Truncated`] |
//!
//! IPv4 overlaps are discarded like IPv6 ones (RFC 5722), as Linux and DPDK
//! do, not trimmed like FreeBSD and VPP: trimming lets an attacker choose
//! which copy of the bytes a middlebox and the end host see.
//!
//! IPv6 atomic fragments (offset 0, M=0; RFC 6946) bypass reassembly
//! ([`Verdict::Atomic`]) and never touch a pending queue with the same id.
//! Extension headers before the Fragment header (Hop-by-Hop, Routing,
//! Destination Options) form the unfragmentable part; it is taken from the
//! offset-0 fragment (RFC 8200 §4.5), the Fragment header is removed and the
//! Next Header chain is patched.
//!
//! # Counters
//!
//! Every fragment handed to [`Reassembler::push`] ends up in exactly one
//! place, so [`ReasmStats::conservation_ok`] holds at every moment:
//! `fragments_in = fragments_completed + Σ dropped_fragments[reason] + pending`.
//! Drops of whole queues count every fragment of the queue under that reason
//! (per fragment, like FreeBSD's frag6 counters) and once in
//! `dropped_datagrams[reason]`.
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::print_stdout,
        clippy::print_stderr,
        clippy::arithmetic_side_effects
    )
)]
#![warn(missing_docs)]

mod siphash;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use flowsteer_wire::{proto, L3Info};
use siphash::SipBuildHasher;

/// Accounted cost of one held fragment besides its payload bytes (which sit
/// in the queue's buffer, accounted by capacity): its 32-byte range entry
/// with the sorted vector's growth slack, or past 64 fragments its share
/// of a `BTreeMap` node.
pub const FRAG_OVERHEAD: usize = 64;
/// Accounted cost of one queue besides its buffer's capacity and an
/// out-of-buffer header: the slab slot (~190 B), the hash map entry (key 40 B
/// + index), the allocator headers of the buffer and the range vector.
pub const DATAGRAM_OVERHEAD: usize = 320;

/// Largest IPv4 datagram / IPv6 payload.
const MAX_IP_LEN: usize = 65535;
const NIL: u32 = u32::MAX;

/// Limits of one [`Reassembler`]. Every capacity is bounded; the overflow
/// policy of each is in its field's doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Accounted memory ([`Reassembler::mem_used`]) is never above this
    /// (bytes, default 4 MiB as Linux `ipfrag_high_thresh`). A fragment that
    /// would exceed it evicts the oldest queues first.
    pub high_thresh: usize,
    /// Eviction frees the oldest queues until memory (with the new fragment)
    /// is at most this (default 3 MiB, Linux `ipfrag_low_thresh`). Must not be
    /// above `high_thresh`.
    pub low_thresh: usize,
    /// IPv4 queue lifetime from its first fragment (default 30 s, Linux
    /// `ipfrag_time`).
    pub timeout_v4_ns: u64,
    /// IPv6 queue lifetime from its first fragment (default 60 s, RFC 8200).
    pub timeout_v6_ns: u64,
    /// Distinct fragments per datagram (default 64). The next one drops the
    /// queue ([`DropReason::TooManyFrags`]); 0 disables reassembly.
    pub max_frags: usize,
    /// Queues in the table (default 16384). A new queue in a full table
    /// evicts the oldest one; 0 disables reassembly.
    pub max_datagrams: usize,
    /// IPv4 max-distance rule (default 64, Linux `ipfrag_max_dist`; 0
    /// disables): a fragment for a queue last extended more than this many
    /// IPv4 fragments ago from the same source drops the queue as stale
    /// ([`DropReason::StaleQueue`]) and starts a fresh one. Guards against
    /// IPv4 ID wrap-around mis-assembly (RFC 4963).
    pub max_dist: u32,
}

impl Default for ReasmConfig {
    fn default() -> Self {
        ReasmConfig {
            high_thresh: 4 << 20,
            low_thresh: 3 << 20,
            timeout_v4_ns: 30_000_000_000,
            timeout_v6_ns: 60_000_000_000,
            max_frags: 64,
            max_datagrams: 16384,
            max_dist: 64,
        }
    }
}

/// A [`ReasmConfig`] that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasmConfigError {
    /// `low_thresh > high_thresh`.
    LowAboveHigh,
    /// `max_datagrams` does not fit the table's 32-bit slot index.
    TooManyDatagrams,
}

impl fmt::Display for ReasmConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReasmConfigError::LowAboveHigh => f.write_str("reassembly low_thresh is above high_thresh"),
            ReasmConfigError::TooManyDatagrams => f.write_str("reassembly max_datagrams is above 2^31"),
        }
    }
}

impl std::error::Error for ReasmConfigError {}

/// What [`Reassembler::push`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// This fragment completed its datagram, which is now in `out`; the
    /// datagram was made of `fragments` fragments.
    Complete {
        /// Fragments in the datagram.
        fragments: u32,
    },
    /// The fragment is stored; its datagram is not complete yet.
    Held,
    /// The fragment was dropped (and, for queue-killing reasons, its whole
    /// queue with it). [`DropReason::Duplicate`] is benign.
    Dropped(DropReason),
    /// IPv6 atomic fragment (RFC 6946): not reassembled, pass the packet on
    /// unchanged. Not counted in `fragments_in`.
    Atomic,
    /// Not a fragment at all: pass the packet on unchanged. Not counted in
    /// `fragments_in`.
    NotFragment,
}

/// Why a fragment (or a whole queue) was dropped. Stable snake_case names
/// from [`DropReason::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Overlapping fragments: the whole queue is dropped (RFC 5722).
    Overlap,
    /// Exact duplicate of a held fragment; tolerated, the queue lives on.
    Duplicate,
    /// More than `max_frags` distinct fragments: the queue is dropped.
    TooManyFrags,
    /// Non-last fragment not a multiple of 8 bytes, or an empty fragment.
    BadLength,
    /// Offset + length beyond the largest IP datagram.
    TooLarge,
    /// A last fragment disagreeing with the known end, or data beyond it:
    /// the queue is dropped.
    ConflictingEnd,
    /// Offset-0 fragment without the whole upper-layer header, or an IPv4
    /// TCP fragment at offset 8 (RFC 1858, RFC 7112).
    TinyFirst,
    /// The frame holds fewer bytes than the IP length says.
    Truncated,
    /// Headers inconsistent with the parse result handed in (e.g. an IPv6
    /// extension chain that does not lead to the Fragment header).
    BadHeader,
    /// Not-ECT fragments mixed with ECT/CE ones (RFC 3168 §5.3).
    EcnMismatch,
    /// The fragment does not fit under `high_thresh` even after eviction.
    NoMemory,
    /// Reassembly disabled (`max_frags` or `max_datagrams` is 0).
    Disabled,
    /// The queue was evicted (memory pressure or full table).
    Evicted,
    /// The queue outlived its timeout.
    TimedOut,
    /// The queue was pending at [`Reassembler::flush`] (end of capture).
    Flushed,
    /// IPv4 queue more than [`ReasmConfig::max_dist`] fragments behind its
    /// source (ID wrap-around guard, RFC 4963): the queue is dropped, the
    /// fragment that found it stale starts a fresh queue (it is not counted
    /// here).
    StaleQueue,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 16] = [
        DropReason::Overlap,
        DropReason::Duplicate,
        DropReason::TooManyFrags,
        DropReason::BadLength,
        DropReason::TooLarge,
        DropReason::ConflictingEnd,
        DropReason::TinyFirst,
        DropReason::Truncated,
        DropReason::BadHeader,
        DropReason::EcnMismatch,
        DropReason::NoMemory,
        DropReason::Disabled,
        DropReason::Evicted,
        DropReason::TimedOut,
        DropReason::Flushed,
        DropReason::StaleQueue,
    ];

    /// Number of reasons (length of the counter arrays).
    pub const COUNT: usize = Self::ALL.len();

    /// A fragment that is wrong on its own or against its queue (the
    /// "malformed" term of the fragment conservation law), as opposed to
    /// duplicates, overlaps, limits and time.
    pub fn is_malformed(self) -> bool {
        matches!(
            self,
            DropReason::BadLength
                | DropReason::TooLarge
                | DropReason::ConflictingEnd
                | DropReason::TinyFirst
                | DropReason::Truncated
                | DropReason::BadHeader
                | DropReason::EcnMismatch
        )
    }

    /// Stable counter name.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Overlap => "overlap",
            DropReason::Duplicate => "dup",
            DropReason::TooManyFrags => "too_many_frags",
            DropReason::BadLength => "bad_length",
            DropReason::TooLarge => "too_large",
            DropReason::ConflictingEnd => "conflicting_end",
            DropReason::TinyFirst => "tiny_first",
            DropReason::Truncated => "truncated",
            DropReason::BadHeader => "bad_header",
            DropReason::EcnMismatch => "ecn_mismatch",
            DropReason::NoMemory => "no_memory",
            DropReason::Disabled => "disabled",
            DropReason::Evicted => "evicted",
            DropReason::TimedOut => "timed_out",
            DropReason::Flushed => "pending_at_end",
            DropReason::StaleQueue => "stale",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one [`Reassembler`]. All monotonic except `pending`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasmStats {
    /// Fragments handed to [`Reassembler::push`] (atomic and unfragmented
    /// packets excluded).
    pub fragments_in: u64,
    /// Fragments that ended up in a delivered datagram.
    pub fragments_completed: u64,
    /// Datagrams delivered.
    pub datagrams_completed: u64,
    /// Queues created.
    pub datagrams_created: u64,
    /// Fragments dropped, by [`DropReason`] (index = `reason as usize`,
    /// see [`ReasmStats::dropped`]).
    pub dropped_fragments: [u64; DropReason::COUNT],
    /// Queues dropped, by [`DropReason`] (only the queue-killing reasons).
    pub dropped_datagrams: [u64; DropReason::COUNT],
    /// Fragments held right now.
    pub pending: u64,
    /// IPv6 atomic fragments passed through.
    pub atomic: u64,
    /// Packets pushed that were not fragments.
    pub not_fragment: u64,
    /// Timed-out queues that held the offset-0 fragment: the ones for which
    /// an ICMP Time Exceeded (code 1) may be sent (RFC 792, RFC 8200 §4.5).
    pub time_exceeded: u64,
    /// Highest accounted memory seen.
    pub mem_high_watermark: usize,
}

impl ReasmStats {
    /// Fragments dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped_fragments.get(reason.index()).copied().unwrap_or(0)
    }

    /// Queues dropped for `reason`.
    pub fn datagrams_dropped(&self, reason: DropReason) -> u64 {
        self.dropped_datagrams.get(reason.index()).copied().unwrap_or(0)
    }

    /// All fragments dropped, every reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_fragments.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// The conservation law: every fragment pushed is either in a delivered
    /// datagram, dropped for exactly one reason, or still pending.
    pub fn conservation_ok(&self) -> bool {
        self.fragments_in == self.fragments_completed.saturating_add(self.dropped_total()).saturating_add(self.pending)
    }

    fn drop_frags(&mut self, reason: DropReason, n: u64) {
        if let Some(c) = self.dropped_fragments.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }

    fn drop_datagram(&mut self, reason: DropReason) {
        if let Some(c) = self.dropped_datagrams.get_mut(reason.index()) {
            *c = c.saturating_add(1);
        }
    }
}

/// Address family of a queue; also selects its age list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    V4 = 0,
    V6 = 1,
}

/// Reassembly key. IPv4: RFC 791 (src, dst, protocol, id); IPv6: RFC 8200
/// (src, dst, id), `proto` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    family: Family,
    src: IpAddr,
    dst: IpAddr,
    id: u32,
    proto: u8,
}

impl Hash for Key {
    /// Whole 64-bit words: IPv4 (src, dst) in one, IPv6 two per address,
    /// then (id, proto, family) in one.
    fn hash<H: Hasher>(&self, h: &mut H) {
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let [a, b, c, e] = s.octets();
                let [f, g, i, j] = d.octets();
                h.write_u64(u64::from_le_bytes([a, b, c, e, f, g, i, j]));
            }
            (s, d) => {
                for a in [s, d] {
                    let v = match a {
                        IpAddr::V6(a) => u128::from(a),
                        IpAddr::V4(a) => u128::from(u32::from(a)),
                    };
                    h.write_u64(v as u64);
                    h.write_u64(v.wrapping_shr(64) as u64);
                }
            }
        }
        let [i0, i1, i2, i3] = self.id.to_le_bytes();
        h.write_u64(u64::from_le_bytes([i0, i1, i2, i3, self.proto, self.family as u8, 0, 0]));
    }
}

/// One held fragment: `[offset, end)` of the fragmentable part, whose bytes
/// are at `pos..pos + (end - offset)` of the queue's buffer.
#[derive(Clone, Copy, Debug)]
struct Range {
    offset: usize,
    end: usize,
    pos: usize,
    more: bool,
}

/// Ranges held beyond which a queue's sorted vector becomes a `BTreeMap`
/// (only with `max_frags` above it), so per-fragment work stays O(log n).
const SMALL_RANGES: usize = 64;

/// The held fragments of a queue, sorted by offset and disjoint.
#[derive(Debug)]
enum Ranges {
    /// Sorted vector (binary search; inserts shift at most `SMALL_RANGES`).
    Small(Vec<Range>),
    /// Keyed by offset, for queues past `SMALL_RANGES` fragments.
    Big(BTreeMap<usize, Range>),
}

impl Ranges {
    fn len(&self) -> usize {
        match self {
            Ranges::Small(v) => v.len(),
            Ranges::Big(m) => m.len(),
        }
    }

    /// The range starting at `offset`.
    fn get(&self, offset: usize) -> Option<&Range> {
        match self {
            Ranges::Small(v) => v.binary_search_by_key(&offset, |r| r.offset).ok().and_then(|i| v.get(i)),
            Ranges::Big(m) => m.get(&offset),
        }
    }

    /// The range starting last before `end`.
    fn last_before(&self, end: usize) -> Option<&Range> {
        match self {
            Ranges::Small(v) => v.partition_point(|r| r.offset < end).checked_sub(1).and_then(|i| v.get(i)),
            Ranges::Big(m) => m.range(..end).next_back().map(|(_, r)| r),
        }
    }

    fn insert(&mut self, r: Range) {
        match self {
            Ranges::Small(v) if v.len() < SMALL_RANGES => {
                let i = v.partition_point(|x| x.offset < r.offset);
                v.insert(i, r);
            }
            Ranges::Small(v) => {
                let mut m: BTreeMap<usize, Range> = v.drain(..).map(|x| (x.offset, x)).collect();
                m.insert(r.offset, r);
                *self = Ranges::Big(m);
            }
            Ranges::Big(m) => {
                m.insert(r.offset, r);
            }
        }
    }

    fn iter(&self) -> RangesIter<'_> {
        match self {
            Ranges::Small(v) => RangesIter::Small(v.iter()),
            Ranges::Big(m) => RangesIter::Big(m.values()),
        }
    }
}

/// In-order iterator over [`Ranges`].
enum RangesIter<'a> {
    Small(std::slice::Iter<'a, Range>),
    Big(std::collections::btree_map::Values<'a, usize, Range>),
}

impl<'a> Iterator for RangesIter<'a> {
    type Item = &'a Range;

    fn next(&mut self) -> Option<&'a Range> {
        match self {
            RangesIter::Small(i) => i.next(),
            RangesIter::Big(i) => i.next(),
        }
    }
}

/// The header saved from the offset-0 fragment.
#[derive(Debug)]
struct Head {
    /// IPv4: the whole header (options included). IPv6: fixed header plus
    /// the extension headers before the Fragment header. Empty when the
    /// header sits in the buffer's headroom (`inline`).
    bytes: Vec<u8>,
    /// The header is `buf[..hroom]` of its queue.
    inline: bool,
    /// Header length.
    len: usize,
    /// IPv6: where the Next Header field pointing at the Fragment header is,
    /// and the Fragment header's Next Header to write there.
    v6_next: Option<(usize, u8)>,
}

/// The offset-0 fragment's header, borrowed from the frame being pushed.
struct HeadIn<'a> {
    bytes: &'a [u8],
    v6_next: Option<(usize, u8)>,
}

/// Recycled datagram buffers kept at most (not accounted in
/// [`Reassembler::mem_used`]; bounded by this and [`FREE_BUF_BYTES`]).
const FREE_BUFS: usize = 64;
/// Total capacity of the recycled buffers kept at most (512 KiB).
pub const FREE_BUF_BYTES: usize = 512 << 10;
/// Buffers smaller than this are not worth recycling.
const FREE_BUF_MIN: usize = 256;
/// A recycled buffer is handed to a new queue whose first fragment starts
/// a datagram (offset 0, or the last fragment) if its capacity is at most
/// `max(4 x needed, REUSE_SLACK)`; to a lone middle fragment only if at most
/// twice what it needs, so a flood of middle fragments is not charged for
/// big buffers.
const REUSE_SLACK: usize = 8192;

/// One datagram being reassembled.
#[derive(Debug)]
struct Queue {
    key: Key,
    created: u64,
    prev: u32,
    next: u32,
    frags: Ranges,
    /// The datagram buffer: `hroom` bytes for the IP header, then the
    /// fragments' payloads in arrival order (so in offset order, and already
    /// in place, when they arrive in order).
    buf: Vec<u8>,
    /// Header room at the front of `buf`: the header length of the first
    /// fragment seen (the offset-0 header when every fragment carries the
    /// same one, as they do in practice).
    hroom: usize,
    /// End of the datagram, known once the last fragment arrived.
    known_end: Option<usize>,
    /// Largest end of any held fragment.
    max_end: usize,
    /// Payload bytes held (non-overlapping, so the datagram is complete when
    /// this equals `known_end`).
    received: usize,
    head: Option<Head>,
    /// OR of the ECN code points seen, as Linux `IPFRAG_ECN_*` bits.
    ecn_seen: u8,
    /// Accounted memory of this queue.
    mem: usize,
    /// IPv4 max-distance rule: (generation, counter) of the source's entry
    /// when the queue was last extended.
    rid: Option<(u32, u32)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct AgeList {
    head: u32,
    tail: u32,
}

impl AgeList {
    const EMPTY: AgeList = AgeList { head: NIL, tail: NIL };
}

/// A per-core reassembler: one per worker, not shared (`Send`, not `Sync`
/// in spirit: every method takes `&mut self` or `&self` of the owner, no
/// interior mutability, no locks).
#[derive(Debug)]
pub struct Reassembler {
    cfg: ReasmConfig,
    map: HashMap<Key, u32, SipBuildHasher>,
    slots: Vec<Option<Queue>>,
    free: Vec<u32>,
    ages: [AgeList; 2],
    mem: usize,
    stats: ReasmStats,
    /// Recycled datagram buffers (cleared), at most [`FREE_BUFS`] totalling
    /// at most [`FREE_BUF_BYTES`] of capacity.
    free_bufs: Vec<Vec<u8>>,
    free_buf_bytes: usize,
    /// Recycled range vectors (cleared), at most [`FREE_BUFS`].
    free_ranges: Vec<Vec<Range>>,
    /// Per-source fragment counters of the max-distance rule:
    /// [`MAX_DIST_SOURCES`] entries once the first IPv4 fragment came, else
    /// empty.
    sources: Vec<SourceEntry>,
    /// Last generation handed to a source entry (0 = never; 0 marks an
    /// empty entry).
    source_gen: u32,
    /// IPv4 fragments counted by the max-distance rule (wrapping; the
    /// entries' LRU clock).
    source_clock: u32,
}

/// IPv4 sources the max-distance rule tracks at once (2-way buckets, LRU
/// replacement within a bucket; see the module docs).
pub const MAX_DIST_SOURCES: usize = 4096;
const SOURCE_WAYS: usize = 2;
const SOURCE_BUCKETS: usize = MAX_DIST_SOURCES / SOURCE_WAYS;

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

/// The fragment being pushed, after the per-fragment checks.
struct Incoming<'a> {
    offset: usize,
    end: usize,
    more: bool,
    data: &'a [u8],
    ecn: u8,
}

const ECN_NOT_ECT: u8 = 0x01;
const ECN_ECT_1: u8 = 0x02;
const ECN_ECT_0: u8 = 0x04;
const ECN_CE: u8 = 0x08;

fn ecn_bit(ecn: u8) -> u8 {
    match ecn & 3 {
        0 => ECN_NOT_ECT,
        1 => ECN_ECT_1,
        2 => ECN_ECT_0,
        _ => ECN_CE,
    }
}

/// Linux `ip_frag_ecn_table`: None = invalid mix (drop), Some(true) = set CE
/// on the reassembled datagram, Some(false) = keep the offset-0 header's ECN.
fn ecn_combine(seen: u8) -> Option<bool> {
    if seen & ECN_NOT_ECT != 0 && seen & !ECN_NOT_ECT != 0 {
        None
    } else {
        Some(seen & ECN_CE != 0)
    }
}

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

/// The most a queue's buffer can need once `frag` is in: header room plus
/// the datagram's end if known, else the largest payload.
fn buf_limit(hroom: usize, known_end: Option<usize>, frag: &Incoming<'_>) -> usize {
    let end = if frag.more { known_end } else { Some(frag.end) };
    hroom.saturating_add(end.unwrap_or(MAX_IP_LEN))
}

/// Accounted bytes of an offset-0 header kept outside the buffer (one whose
/// length differs from the header room).
fn head_cost(hroom: usize, head: &Option<HeadIn<'_>>) -> usize {
    match head {
        Some(h) if h.bytes.len() != hroom => h.bytes.len(),
        _ => 0,
    }
}

/// Smallest upper-layer header an offset-0 fragment must carry whole
/// (RFC 1858 for TCP, RFC 7112 for IPv6; Linux `ipv6frag_thdr_truncated`).
fn min_l4_len(protocol: u8) -> usize {
    match protocol {
        proto::TCP => 20,
        proto::UDP | proto::ICMP | proto::ICMPV6 => 8,
        proto::SCTP => 12,
        _ => 0,
    }
}

/// IPv6 extension header types that may precede the Fragment header.
const NH_FRAGMENT: u8 = 44;
const NH_AUTH: u8 = 51;

/// Walks the unfragmentable part `ip[40..frag_at]` of an IPv6 packet and
/// returns the position of the Next Header field that names the Fragment
/// header. None when the chain does not end exactly at `frag_at` with a
/// Fragment header.
fn v6_next_header_field(ip: &[u8], frag_at: usize) -> Option<usize> {
    let mut field = 6usize;
    let mut next = *ip.get(6)?;
    let mut pos = 40usize;
    // Bounded: every step advances at least 8 bytes and pos < frag_at <= 65535.
    while pos < frag_at {
        let hlen = usize::from(*ip.get(pos.checked_add(1)?)?);
        let len =
            if next == NH_AUTH { hlen.checked_add(2)?.checked_mul(4)? } else { hlen.checked_add(1)?.checked_mul(8)? };
        field = pos;
        next = *ip.get(pos)?;
        pos = pos.checked_add(len)?;
    }
    (pos == frag_at && next == NH_FRAGMENT).then_some(field)
}

impl Reassembler {
    /// A reassembler with random table keys (from `getrandom`; if the OS has
    /// no entropy source, from std's per-process `RandomState`).
    pub fn new(cfg: ReasmConfig) -> Result<Self, ReasmConfigError> {
        let mut buf = [0u8; 16];
        let seed = if getrandom::getrandom(&mut buf).is_ok() {
            let (a, b) = buf.split_at(8);
            (u64::from_le_bytes(a.try_into().unwrap_or([0; 8])), u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        } else {
            use std::hash::{BuildHasher, Hasher};
            let s = std::collections::hash_map::RandomState::new();
            let mut h0 = s.build_hasher();
            h0.write_u8(0);
            let mut h1 = s.build_hasher();
            h1.write_u8(1);
            (h0.finish(), h1.finish())
        };
        Self::with_seed(cfg, seed)
    }

    /// A reassembler with fixed table keys (deterministic tests, replays).
    pub fn with_seed(cfg: ReasmConfig, seed: (u64, u64)) -> Result<Self, ReasmConfigError> {
        if cfg.low_thresh > cfg.high_thresh {
            return Err(ReasmConfigError::LowAboveHigh);
        }
        if cfg.max_datagrams > (1usize << 31) {
            return Err(ReasmConfigError::TooManyDatagrams);
        }
        Ok(Reassembler {
            cfg,
            map: HashMap::with_hasher(SipBuildHasher { k0: seed.0, k1: seed.1 }),
            slots: Vec::new(),
            free: Vec::new(),
            ages: [AgeList::EMPTY; 2],
            mem: 0,
            stats: ReasmStats::default(),
            free_bufs: Vec::new(),
            free_buf_bytes: 0,
            free_ranges: Vec::new(),
            sources: Vec::new(),
            source_gen: 0,
            source_clock: 0,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ReasmConfig {
        &self.cfg
    }

    /// Accounted memory now (bytes; see [`FRAG_OVERHEAD`], [`DATAGRAM_OVERHEAD`]).
    pub fn mem_used(&self) -> usize {
        self.mem
    }

    /// Datagrams (queues) pending.
    pub fn pending(&self) -> usize {
        self.map.len()
    }

    /// Counters.
    pub fn stats(&self) -> &ReasmStats {
        &self.stats
    }

    /// When the oldest pending queue times out (for the caller's timer
    /// wheel), or None when nothing is pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        [Family::V4, Family::V6]
            .into_iter()
            .filter_map(|f| {
                let q = self.queue(self.list(f).head)?;
                Some(q.created.saturating_add(self.timeout(f)))
            })
            .min()
    }

    /// Feeds one packet. `frame` holds the packet at `l3.l3_offset` (any
    /// link layer) and `l3` is its parse result
    /// (`flowsteer_wire::parse_frame(..).outer`). When the fragment completes
    /// its datagram, `out` is cleared and receives the complete IP packet
    /// (ready to use: IPv4 header with MF=0, offset 0, new total length and
    /// checksum; IPv6 with the Fragment header removed, the Next Header chain
    /// and payload length fixed), and the verdict is [`Verdict::Complete`].
    /// Otherwise `out` is left alone. Runs [`Reassembler::expire`] first.
    pub fn push(&mut self, frame: &[u8], l3: &L3Info, now: u64, out: &mut Vec<u8>) -> Verdict {
        self.expire(now);
        if l3.atomic_frag {
            self.stats.atomic = self.stats.atomic.saturating_add(1);
            return Verdict::Atomic;
        }
        let Some(fi) = l3.frag else {
            self.stats.not_fragment = self.stats.not_fragment.saturating_add(1);
            return Verdict::NotFragment;
        };
        self.stats.fragments_in = self.stats.fragments_in.saturating_add(1);
        if self.cfg.max_frags == 0 || self.cfg.max_datagrams == 0 {
            return self.drop_single(DropReason::Disabled);
        }
        let (family, key_proto) = match (l3.tuple.src, l3.tuple.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (Family::V4, l3.tuple.proto),
            (IpAddr::V6(_), IpAddr::V6(_)) => (Family::V6, 0),
            _ => return self.drop_single(DropReason::BadHeader),
        };
        let key = Key { family, src: l3.tuple.src, dst: l3.tuple.dst, id: fi.id, proto: key_proto };

        // Per-fragment checks: nothing malformed is ever stored.
        let Some(ip_end) = l3.l3_offset.checked_add(l3.ip_total_len) else {
            return self.drop_single(DropReason::Truncated);
        };
        let Some(data_start) = l3.l3_offset.checked_add(l3.ip_header_len) else {
            return self.drop_single(DropReason::Truncated);
        };
        if l3.truncated || ip_end > frame.len() {
            return self.drop_single(DropReason::Truncated);
        }
        let Some(data) = frame.get(data_start..ip_end) else {
            return self.drop_single(DropReason::BadHeader);
        };
        let Some(ip) = frame.get(l3.l3_offset..ip_end) else {
            return self.drop_single(DropReason::BadHeader);
        };
        let offset = usize::from(fi.offset);
        let len = data.len();
        if len == 0 || (fi.more && !len.is_multiple_of(8)) {
            return self.drop_single(DropReason::BadLength);
        }
        let end = offset.saturating_add(len);
        let limit_end = match family {
            Family::V4 => end.saturating_add(l3.ip_header_len),
            Family::V6 => end,
        };
        if limit_end > MAX_IP_LEN {
            return self.drop_single(DropReason::TooLarge);
        }
        if offset == 0 {
            let l4_end = l3.l4_offset.map(|l4| l4.saturating_add(min_l4_len(l3.tuple.proto)));
            if l4_end.is_none_or(|e| e > ip_end) {
                return self.drop_single(DropReason::TinyFirst);
            }
        } else if family == Family::V4 && offset == 8 && l3.tuple.proto == proto::TCP {
            return self.drop_single(DropReason::TinyFirst);
        }
        let hroom = match family {
            Family::V4 => l3.ip_header_len,
            Family::V6 => l3.ip_header_len.saturating_sub(8),
        };
        let head = if offset == 0 {
            match family {
                Family::V4 => ip.get(..l3.ip_header_len).map(|b| HeadIn { bytes: b, v6_next: None }),
                Family::V6 => {
                    let frag_at = hroom;
                    match (v6_next_header_field(ip, frag_at), ip.get(frag_at), ip.get(..frag_at)) {
                        (Some(field), Some(&nh), Some(b)) if frag_at >= 40 => {
                            Some(HeadIn { bytes: b, v6_next: Some((field, nh)) })
                        }
                        _ => None,
                    }
                }
            }
        } else {
            None
        };
        if offset == 0 && head.is_none() {
            return self.drop_single(DropReason::BadHeader);
        }
        let frag = Incoming { offset, end, more: fi.more, data, ecn: ecn_bit(l3.ecn) };
        self.insert(key, frag, head, hroom, now, out)
    }

    fn insert(
        &mut self,
        key: Key,
        frag: Incoming<'_>,
        head: Option<HeadIn<'_>>,
        hroom: usize,
        now: u64,
        out: &mut Vec<u8>,
    ) -> Verdict {
        let len = frag.data.len();
        let rid = match key.src {
            IpAddr::V4(src) if key.family == Family::V4 => self.source_tick(src),
            _ => None,
        };
        let mut existing = self.map.get(&key).copied();
        if let Some(slot) = existing {
            if self.is_stale(slot, rid) {
                self.kill(slot, DropReason::StaleQueue, 0);
                existing = None;
            }
        }
        let slot = match existing {
            Some(slot) => {
                if let Some(reason) = self.check_existing(slot, &frag) {
                    if reason == DropReason::Duplicate {
                        return self.drop_single(reason);
                    }
                    self.kill(slot, reason, 1);
                    return Verdict::Dropped(reason);
                }
                let Some(q) = self.queue(slot) else {
                    return self.drop_single(DropReason::BadHeader);
                };
                let cap = q.buf.capacity();
                let grown = grow_target(cap, q.buf.len().saturating_add(len), buf_limit(q.hroom, q.known_end, &frag));
                let cost =
                    grown.saturating_sub(cap).saturating_add(FRAG_OVERHEAD).saturating_add(head_cost(q.hroom, &head));
                if !self.make_room(cost, Some(slot)) {
                    return self.drop_single(DropReason::NoMemory);
                }
                slot
            }
            None => {
                if self.map.len() >= self.cfg.max_datagrams {
                    if let Some(old) = self.oldest(None) {
                        self.kill(old, DropReason::Evicted, 0);
                    }
                }
                let buf = self.take_buf(hroom, &frag);
                let cost = DATAGRAM_OVERHEAD
                    .saturating_add(buf.capacity())
                    .saturating_add(FRAG_OVERHEAD)
                    .saturating_add(head_cost(hroom, &head));
                if !self.make_room(cost, None) {
                    self.recycle(buf);
                    return self.drop_single(DropReason::NoMemory);
                }
                match self.create(key, now, buf, hroom) {
                    Some(slot) => slot,
                    None => return self.drop_single(DropReason::NoMemory),
                }
            }
        };
        let Some(q) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return self.drop_single(DropReason::BadHeader);
        };
        // Append the payload (growing the buffer as predicted above).
        let old_cap = q.buf.capacity();
        let needed = q.buf.len().saturating_add(len);
        if needed > old_cap {
            let target = grow_target(old_cap, needed, buf_limit(q.hroom, q.known_end, &frag));
            q.buf.reserve_exact(target.saturating_sub(q.buf.len()));
        }
        let pos = q.buf.len();
        q.buf.extend_from_slice(frag.data);
        let mut cost = q.buf.capacity().saturating_sub(old_cap).saturating_add(FRAG_OVERHEAD);
        if let Some(h) = head {
            let hr = q.hroom;
            let inline = h.bytes.len() == hr;
            let bytes = if inline {
                if let Some(b) = q.buf.get_mut(..hr) {
                    b.copy_from_slice(h.bytes);
                }
                Vec::new()
            } else {
                cost = cost.saturating_add(h.bytes.len());
                h.bytes.to_vec()
            };
            q.head = Some(Head { bytes, inline, len: h.bytes.len(), v6_next: h.v6_next });
        }
        if !frag.more {
            q.known_end = Some(frag.end);
        }
        q.max_end = q.max_end.max(frag.end);
        q.received = q.received.saturating_add(len);
        q.ecn_seen |= frag.ecn;
        q.rid = rid;
        q.frags.insert(Range { offset: frag.offset, end: frag.end, pos, more: frag.more });
        q.mem = q.mem.saturating_add(cost);
        self.mem = self.mem.saturating_add(cost);
        self.stats.mem_high_watermark = self.stats.mem_high_watermark.max(self.mem);
        self.stats.pending = self.stats.pending.saturating_add(1);
        if q.known_end == Some(q.received) {
            return self.complete(slot, out);
        }
        Verdict::Held
    }

    /// Max-distance rule: counts one IPv4 fragment from `src` and returns its
    /// entry's (generation, counter), creating the entry (replacing the least
    /// recently used one of its bucket) if needed. None when the rule is off.
    fn source_tick(&mut self, src: std::net::Ipv4Addr) -> Option<(u32, u32)> {
        use std::hash::BuildHasher;
        if self.cfg.max_dist == 0 {
            return None;
        }
        if self.sources.is_empty() {
            self.sources = vec![SourceEntry::default(); MAX_DIST_SOURCES];
        }
        let src = u32::from(src);
        let bucket = (self.map.hasher().hash_one(src) as usize) & (SOURCE_BUCKETS - 1);
        let base = bucket.checked_mul(SOURCE_WAYS)?;
        self.source_clock = self.source_clock.wrapping_add(1);
        let clock = self.source_clock;
        let ways = self.sources.get_mut(base..base.checked_add(SOURCE_WAYS)?)?;
        let e = match ways.iter().position(|e| e.gen != 0 && e.src == src) {
            Some(i) => ways.get_mut(i)?,
            None => {
                let victim =
                    ways.iter_mut().max_by_key(|e| if e.gen == 0 { u32::MAX } else { clock.wrapping_sub(e.used) })?;
                self.source_gen = self.source_gen.checked_add(1).unwrap_or(1);
                *victim = SourceEntry { src, gen: self.source_gen, counter: 0, used: clock };
                victim
            }
        };
        e.counter = e.counter.wrapping_add(1);
        e.used = clock;
        Some((e.gen, e.counter))
    }

    /// Whether the queue at `slot` was last extended more than `max_dist`
    /// fragments of its source ago (`rid`: the source's entry now). Queues
    /// from an entry since replaced (other generation) are never stale.
    fn is_stale(&self, slot: u32, rid: Option<(u32, u32)>) -> bool {
        match (rid, self.queue(slot).and_then(|q| q.rid)) {
            (Some((gen, now)), Some((qgen, then))) => gen == qgen && now.wrapping_sub(then) > self.cfg.max_dist,
            _ => false,
        }
    }

    /// A buffer for a new queue whose first fragment is `frag`: `hroom`
    /// bytes of header room, capacity for at least the fragment. Recycled
    /// when one of a fitting size is free (see [`REUSE_SLACK`]).
    fn take_buf(&mut self, hroom: usize, frag: &Incoming<'_>) -> Vec<u8> {
        let needed = hroom.saturating_add(frag.data.len());
        let starts = frag.offset == 0 || !frag.more;
        let max_cap = if starts { needed.saturating_mul(4).max(REUSE_SLACK) } else { needed.saturating_mul(2) };
        let found = self.free_bufs.iter().rposition(|b| (needed..=max_cap).contains(&b.capacity()));
        let mut buf = match found {
            Some(i) => {
                let b = self.free_bufs.swap_remove(i);
                self.free_buf_bytes = self.free_buf_bytes.saturating_sub(b.capacity());
                b
            }
            None => {
                let want = if frag.offset == 0 {
                    needed.saturating_mul(2)
                } else if !frag.more {
                    hroom.saturating_add(frag.end).min(max_cap)
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

    /// Keeps `buf` for a later queue if the free list has room.
    fn recycle(&mut self, mut buf: Vec<u8>) {
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

    /// The checks against a queue's state, in Linux `ip_frag_queue` order:
    /// end consistency, then duplicate, then overlap, then the cap.
    fn check_existing(&self, slot: u32, f: &Incoming<'_>) -> Option<DropReason> {
        let q = self.queue(slot)?;
        if !f.more {
            if f.end < q.max_end || q.known_end.is_some_and(|e| e != f.end) {
                return Some(DropReason::ConflictingEnd);
            }
        } else if q.known_end.is_some_and(|e| f.end > e) {
            return Some(DropReason::ConflictingEnd);
        }
        if let Some(h) = q.frags.get(f.offset) {
            if h.end == f.end && h.more == f.more {
                return Some(DropReason::Duplicate);
            }
        }
        // Fragments are disjoint, so the one starting last before our end is
        // the only candidate that can overlap us (see the module docs).
        if let Some(prev) = q.frags.last_before(f.end) {
            if prev.end > f.offset {
                return Some(DropReason::Overlap);
            }
        }
        if q.frags.len() >= self.cfg.max_frags {
            return Some(DropReason::TooManyFrags);
        }
        None
    }

    fn complete(&mut self, slot: u32, out: &mut Vec<u8>) -> Verdict {
        let Some(q) = self.queue(slot) else {
            return Verdict::Held;
        };
        let total = q.known_end.unwrap_or(0);
        let Some(head) = q.head.as_ref() else {
            // Unreachable in practice: full coverage includes offset 0.
            self.kill(slot, DropReason::BadHeader, 0);
            return Verdict::Dropped(DropReason::BadHeader);
        };
        let Some(set_ce) = ecn_combine(q.ecn_seen) else {
            self.kill(slot, DropReason::EcnMismatch, 0);
            return Verdict::Dropped(DropReason::EcnMismatch);
        };
        let hlen = head.len;
        let ip_len = hlen.saturating_add(total);
        let fits = match q.key.family {
            Family::V4 => ip_len <= MAX_IP_LEN,
            Family::V6 => ip_len.saturating_sub(40) <= MAX_IP_LEN,
        };
        if !fits {
            self.kill(slot, DropReason::TooLarge, 0);
            return Verdict::Dropped(DropReason::TooLarge);
        }
        let family = q.key.family;
        let v6_next = head.v6_next;
        let n = q.frags.len();
        let hroom = q.hroom;
        // Fragments that arrived in order are already in place behind the
        // header: hand the buffer over. Otherwise one copy, in offset order.
        let in_place = head.inline
            && q.buf.len() == hroom.saturating_add(total)
            && q.frags.iter().all(|r| r.pos == hroom.saturating_add(r.offset));
        let Some(q) = self.queue_mut(slot) else {
            return Verdict::Held;
        };
        let spare = if in_place {
            std::mem::replace(out, std::mem::take(&mut q.buf))
        } else {
            out.clear();
            out.reserve(ip_len);
            match q.head.as_ref() {
                Some(h) if !h.inline => out.extend_from_slice(&h.bytes),
                _ => out.extend_from_slice(q.buf.get(..hroom).unwrap_or(&[])),
            }
            for r in q.frags.iter() {
                let piece = r.pos.saturating_add(r.end.saturating_sub(r.offset));
                out.extend_from_slice(q.buf.get(r.pos..piece).unwrap_or(&[]));
            }
            Vec::new()
        };
        match (family, v6_next) {
            (Family::V4, _) => {
                let len = u16::try_from(ip_len).unwrap_or(u16::MAX).to_be_bytes();
                if let Some(b) = out.get_mut(2..4) {
                    b.copy_from_slice(&len);
                }
                // Keep DF, clear MF and the offset.
                if let Some([flags, off]) = out.get_mut(6..8) {
                    *flags &= 0x40;
                    *off = 0;
                }
                if set_ce {
                    if let Some(b) = out.get_mut(1) {
                        *b |= 3;
                    }
                }
                let sum = flowsteer_wire::build::ipv4_header_checksum(out.get(..hlen).unwrap_or(&[])).to_be_bytes();
                if let Some(b) = out.get_mut(10..12) {
                    b.copy_from_slice(&sum);
                }
            }
            (Family::V6, next) => {
                let plen = u16::try_from(ip_len.saturating_sub(40)).unwrap_or(u16::MAX).to_be_bytes();
                if let Some(b) = out.get_mut(4..6) {
                    b.copy_from_slice(&plen);
                }
                if let Some((field, nh)) = next {
                    if let Some(b) = out.get_mut(field) {
                        *b = nh;
                    }
                }
                if set_ce {
                    if let Some(b) = out.get_mut(1) {
                        *b |= 0x30;
                    }
                }
            }
        }
        let fragments = u32::try_from(n).unwrap_or(u32::MAX);
        self.remove(slot);
        self.recycle(spare);
        self.stats.fragments_completed = self.stats.fragments_completed.saturating_add(n as u64);
        self.stats.datagrams_completed = self.stats.datagrams_completed.saturating_add(1);
        Verdict::Complete { fragments }
    }

    /// Time passes: drops every queue whose timeout (from its first
    /// fragment) has run out by `now`. O(expired). Returns the number of
    /// queues dropped.
    pub fn expire(&mut self, now: u64) -> usize {
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
                    self.stats.time_exceeded = self.stats.time_exceeded.saturating_add(1);
                }
                self.kill(head, DropReason::TimedOut, 0);
                n = n.saturating_add(1);
            }
        }
        n
    }

    /// Drops every pending queue (end of capture, shutdown), counted as
    /// [`DropReason::Flushed`], and frees the max-distance rule's source
    /// table. Returns the number of queues dropped.
    pub fn flush(&mut self) -> usize {
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
        // No queue refers to the max-distance entries any more.
        self.sources = Vec::new();
        n
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

    fn queue(&self, slot: u32) -> Option<&Queue> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    fn queue_mut(&mut self, slot: u32) -> Option<&mut Queue> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// Drops the single fragment being pushed.
    fn drop_single(&mut self, reason: DropReason) -> Verdict {
        self.stats.drop_frags(reason, 1);
        Verdict::Dropped(reason)
    }

    /// Drops a whole queue for `reason`; `extra` fragments (the one being
    /// pushed, not stored) are counted with it.
    fn kill(&mut self, slot: u32, reason: DropReason, extra: u64) {
        let held = self.queue(slot).map_or(0, |q| q.frags.len() as u64);
        self.remove(slot);
        self.stats.drop_frags(reason, held.saturating_add(extra));
        self.stats.drop_datagram(reason);
    }

    /// The oldest queue other than `keep`: the older of the two list heads
    /// (skipping `keep`). O(1).
    fn oldest(&self, keep: Option<u32>) -> Option<u32> {
        [Family::V4, Family::V6]
            .into_iter()
            .filter_map(|f| {
                let mut s = self.list(f).head;
                if Some(s) == keep {
                    s = self.queue(s)?.next;
                }
                self.queue(s).map(|q| (q.created, s))
            })
            .min()
            .map(|(_, s)| s)
    }

    /// Ensures `cost` more bytes fit under `high_thresh`, evicting the oldest
    /// queues (never `keep`) down to `low_thresh` when they do not.
    fn make_room(&mut self, cost: usize, keep: Option<u32>) -> bool {
        if self.mem.saturating_add(cost) <= self.cfg.high_thresh {
            return true;
        }
        while self.mem.saturating_add(cost) > self.cfg.low_thresh {
            let Some(victim) = self.oldest(keep) else { break };
            self.kill(victim, DropReason::Evicted, 0);
        }
        self.mem.saturating_add(cost) <= self.cfg.high_thresh
    }

    fn create(&mut self, key: Key, now: u64, buf: Vec<u8>, hroom: usize) -> Option<u32> {
        let mem = DATAGRAM_OVERHEAD.saturating_add(buf.capacity());
        let q = Queue {
            key,
            created: now,
            prev: NIL,
            next: NIL,
            frags: Ranges::Small(self.free_ranges.pop().unwrap_or_default()),
            buf,
            hroom,
            known_end: None,
            max_end: 0,
            received: 0,
            head: None,
            ecn_seen: 0,
            mem,
            rid: None,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                *self.slots.get_mut(s as usize)? = Some(q);
                s
            }
            None => {
                let s = u32::try_from(self.slots.len()).ok().filter(|&s| s != NIL)?;
                self.slots.push(Some(q));
                s
            }
        };
        // Link at the tail of the family's age list.
        let tail = self.list(key.family).tail;
        if let Some(t) = self.queue_mut(tail) {
            t.next = slot;
        }
        if let Some(q) = self.queue_mut(slot) {
            q.prev = tail;
        }
        if let Some(l) = self.list_mut(key.family) {
            if l.head == NIL {
                l.head = slot;
            }
            l.tail = slot;
        }
        self.map.insert(key, slot);
        self.mem = self.mem.saturating_add(mem);
        self.stats.mem_high_watermark = self.stats.mem_high_watermark.max(self.mem);
        self.stats.datagrams_created = self.stats.datagrams_created.saturating_add(1);
        Some(slot)
    }

    /// Unlinks and frees a queue (no drop counters).
    fn remove(&mut self, slot: u32) {
        let Some(q) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        if let Some(p) = self.queue_mut(q.prev) {
            p.next = q.next;
        }
        if let Some(n) = self.queue_mut(q.next) {
            n.prev = q.prev;
        }
        if let Some(l) = self.list_mut(q.key.family) {
            if l.head == slot {
                l.head = q.next;
            }
            if l.tail == slot {
                l.tail = q.prev;
            }
        }
        self.map.remove(&q.key);
        self.free.push(slot);
        self.mem = self.mem.saturating_sub(q.mem);
        self.stats.pending = self.stats.pending.saturating_sub(q.frags.len() as u64);
        self.recycle(q.buf);
        if let Ranges::Small(mut v) = q.frags {
            if self.free_ranges.len() < FREE_BUFS && v.capacity() <= SMALL_RANGES {
                v.clear();
                self.free_ranges.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`DATAGRAM_OVERHEAD`] covers the slab slot and the map entry (plus
    /// 2 x 16 B of allocator headers).
    #[test]
    fn datagram_overhead_covers_slot_and_entry() {
        let fixed = std::mem::size_of::<Option<Queue>>() + std::mem::size_of::<(Key, u32)>() + 32;
        assert!(fixed <= DATAGRAM_OVERHEAD, "{fixed}");
        assert!(2 * std::mem::size_of::<Range>() <= FRAG_OVERHEAD);
    }
}
