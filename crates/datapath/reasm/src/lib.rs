//! flowsteer-reasm: sans-IO, per-core IPv4/IPv6 fragment reassembly.
//!
//! Stage "worker / reasm" of the packet's path (source -> parse -> hash -> steer
//! -> hand-off -> **worker: reassembly** -> app -> sink). Fragments are steered
//! on the IP 2-tuple, reassembled on the core where they land (mission M14/M15),
//! and the complete datagram is handed back to the caller to re-hash and
//! re-inject. One [`Reassembler`] per worker core: it is `Send` (when the held
//! buffer type is) but not `Sync`, owns all its memory and takes no locks.
//!
//! # Sans-IO
//!
//! The reassembler never reads a clock, never spawns a thread and never
//! prints. Time is the `now: u64` (nanoseconds, any epoch, monotonic) argument
//! of the push and expire calls; output goes into caller-owned storage (a
//! `Vec<u8>` or a [`Chain`]); what happened is a [`Verdict`] plus counters in
//! [`ReasmStats`]. Nothing panics on any input.
//!
//! # Two ways to deliver
//!
//! * **Copying** ([`Reassembler::push`]): the caller lends the frame; the
//!   fragment's payload is copied once into the queue's buffer and the
//!   complete datagram comes out as one contiguous `Vec<u8>`.
//! * **Zero-copy** ([`Reassembler::push_owned`]): the caller hands the frame
//!   buffer over (any `B: AsRef<[u8]>`: a `Vec<u8>`, a ring frame handle);
//!   the reassembler keeps it, copying nothing, and on completion fills a
//!   [`Chain`]: the rewritten IP header plus the fragments' payload slices
//!   in offset order, ready to use like DPDK's chained mbufs but with the
//!   header already fixed. [`Chain::copy_into`] linearises it (byte for
//!   byte what the copying path delivers); [`Chain::drain_buffers`] gives
//!   the frame buffers back for recycling. Buffers the reassembler lets go
//!   of (a fragment not stored, queues dropped by any rule, expiry or
//!   eviction) are handed back in the `spare` vector of the call that let
//!   them go ([`Reassembler::push_owned`], [`Reassembler::expire_into`],
//!   [`Reassembler::flush_into`]); the calls without one
//!   ([`Reassembler::push`], [`Reassembler::expire`], [`Reassembler::flush`])
//!   drop them (the buffer's `Drop` runs). Nothing leaks either way.
//!
//! Both paths run the same checks, the same table, the same accounting and
//! the same header rewrite; only where the payload bytes live differs, and
//! a queue may even mix copied and held fragments. The IPv4 header checksum
//! is not verified here (the parser does not either); the rewrite updates
//! it for the words it changes (RFC 1624), as a router does, so the result
//! is right when the offset-0 fragment's was, and a header that arrived
//! corrupted is not given a checksum that vouches for it.
//!
//! # Algorithm
//!
//! * **Table.** Two levels over a slab of datagram queues. The front
//!   table (4 entries per bucket, so at most a quarter of them in use) is
//!   indexed by a cheap unkeyed mix of the key (Fibonacci hashing, which
//!   spreads consecutive ids and addresses evenly) and holds at most one
//!   queue per entry; a queue whose entry is taken goes to the keyed table,
//!   a chained hash table (bucket heads plus an index link in each queue, at
//!   most one queue per bucket on average) hashed with keyed SipHash-1-3
//!   (random keys from `getrandom`, or a fixed seed for tests; see
//!   `siphash.rs` for why this hash), and the front entry counts it. A
//!   lookup reads the key's front entry; only when it holds another key and
//!   its count is not zero does it hash and search the keyed table. So the
//!   usual datagram is never hashed, and an attacker who aims collisions at
//!   the unkeyed index gets at most one queue per entry into the front
//!   table and the rest into the keyed table: each lookup costs at most one
//!   key compare plus the keyed lookup every fragment paid before, chains
//!   stay short, and nothing grows worse than with the keyed table alone.
//!   The key is (family, src, dst, id, protocol) for IPv4 (RFC 791 §3.2:
//!   the protocol is part of the key) and (family, src, dst, id) for IPv6
//!   (RFC 8200 §4.5: the Next Header of the Fragment headers may differ
//!   between fragments, only the offset-0 one counts; Linux keys IPv6 the
//!   same way), packed in words (an IPv4 compare is two words). At most
//!   [`ReasmConfig::max_datagrams`] queues; a new queue in a full table
//!   evicts the oldest one. Queues stay in their slab slot for life (a
//!   freed slot keeps a small range vector for the next queue,
//!   [`KEEP_RANGES`] entries at most, and, once it has held a copied
//!   fragment, its 56-byte box of copy buffers, emptied), so nothing is
//!   moved or allocated per datagram. The bucket array and the front table
//!   double when the queues outnumber the buckets, placing every queue
//!   again (at most `2 x max_datagrams` 4-byte heads plus 4 front entries
//!   of 8 bytes each: 1.1 MiB at the default; not accounted, like the slab)
//!   and, with the slab, are freed by [`Reassembler::flush`].
//! * **Fast paths.** [`Reassembler::push_owned`] decides the usual cases
//!   without side effects first and then does exactly what the general
//!   path does for them: a fragment for a queue found at its front entry
//!   that fits between the held ones (in order: at the end, no search), a
//!   fragment that starts a queue at a free front entry, and the delivery
//!   of a queue of held frames. An option-less IPv4 header is read from
//!   the frame itself (the parse result describes the same bytes; its
//!   scattered fields cost more to gather), IPv6 from the parse result, and
//!   the rest is compiled once per family, so its family tests fold away.
//!   Anything else (a check that fails, IPv4 options, a queue in the keyed
//!   table, table growth, expiry due) takes the general path, which decides
//!   it from scratch; a differential test pushes random and malformed
//!   fragments through both and compares every verdict, counter and
//!   delivered byte.
//! * **Age lists.** Every queue sits in an index-linked list per family in
//!   creation order. Timeouts are fixed per family, so the list head is always
//!   the next queue to expire: [`Reassembler::expire`] is O(expired) and
//!   eviction pops the older of the two heads in O(1). The timer starts with
//!   the first fragment and is **not** extended by later ones (Linux
//!   ip_fragment.c; a trickle of fragments cannot keep a queue alive).
//! * **Fragments in a queue.** A copied fragment's payload goes into the
//!   queue's one byte buffer: header room (the first copied fragment's IP
//!   header length) followed by the payloads in arrival order, each copied
//!   once, straight from the frame. When the fragments arrived in order they
//!   are already in place behind the header: completion writes the header
//!   and hands the buffer over (`out` is swapped with it); otherwise it
//!   copies the pieces into `out` in offset order. Buffers (and the caller's
//!   previous `out`) are recycled through a small free list
//!   ([`FREE_BUF_BYTES`]), so steady state does not allocate. A held
//!   fragment stays in its frame: the queue keeps the buffer and where the
//!   payload starts, and the offset-0 fragment's header is read from its
//!   frame only at completion. The (offset, end, where) entries are kept in
//!   a sorted vector (a `BTreeMap` past 64 fragments) keyed by offset: the
//!   overlap check looks only at the one fragment starting just before the
//!   new fragment's end, so insert + overlap check is O(log n) search plus a
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
//!   by a keyed SipHash of the source (so an attacker cannot aim
//!   collisions), the least recently used entry of a bucket replaced by a new
//!   source; it is allocated on the first IPv4 fragment (16 B per entry plus
//!   a 4 KiB memo, see below; not part of [`Reassembler::mem_used`]) and freed
//!   by [`Reassembler::flush`].
//!   A queue remembers which entry it counts on, so only a fragment that
//!   starts a queue looks its source up. Every entry carries a generation
//!   number that its queues remember: when a source's entry was replaced in
//!   the meantime, its old queues are never judged stale (only the timeout
//!   applies to them), so replacement can lose protection but never drops a
//!   live queue. A lookaside memo (1,024 entry indexes at an unkeyed index
//!   of the source, verified against the entry) lets a new queue from a
//!   known source skip the keyed lookup; a miss or an aimed collision costs
//!   only the keyed lookup. IPv6 IDs are 32 bits and do not wrap in
//!   practice: the rule is IPv4 only, as in Linux.
//! * **Memory.** Accounted memory ([`Reassembler::mem_used`]) is each queue's
//!   copy buffer *capacity* (payload, header room and growth slack: buffers
//!   grow by doubling, capped at what the datagram can need, so at most about
//!   twice the payload; a recycled buffer is only handed to a lone middle
//!   fragment if at most twice what it needs), plus the whole length
//!   (`as_ref().len()`) of every held frame buffer, plus a per-fragment
//!   overhead (`max(FRAG_OVERHEAD, 2 x its entry)`, see [`FRAG_OVERHEAD`])
//!   plus [`DATAGRAM_OVERHEAD`] and any copied offset-0 header that did not
//!   fit the header room, per queue. Recycled free buffers are not accounted;
//!   they are bounded by [`FREE_BUF_BYTES`] on top of `high_thresh`. A
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
//! Every fragment handed to [`Reassembler::push`] or
//! [`Reassembler::push_owned`] ends up in exactly one
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

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use flowsteer_wire::{proto, L3Info};

/// Accounted cost of one held fragment besides its payload bytes (which sit
/// in the queue's copy buffer, accounted by capacity, or in a held frame,
/// accounted by length): its range entry with the sorted vector's growth
/// slack, or past 64 fragments its share of a `BTreeMap` node. The charge is
/// `max(FRAG_OVERHEAD, 2 x size_of(entry))`: the entry holds the frame
/// handle, so a large handle type is charged more (a `Vec<u8>` handle: 80 B).
pub const FRAG_OVERHEAD: usize = 64;
/// Accounted cost of one queue besides its buffer's capacity and an
/// out-of-buffer header: the slab slot (160 B), its boxed copy buffers
/// (56 B, once it has copied), its bucket head, the allocator headers of
/// the buffers and the range vector.
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
    /// This fragment completed its datagram, which is now in `out` (the
    /// contiguous `Vec<u8>` of [`Reassembler::push`] or the [`Chain`] of
    /// [`Reassembler::push_owned`]); the datagram was made of `fragments`
    /// fragments.
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
    /// unchanged ([`Reassembler::push_owned`] hands the frame back in
    /// `spare`). Not counted in `fragments_in`.
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
/// (src, dst, id), protocol 0. Packed into the words the hash reads and the
/// compare checks: `addrs` IPv4 `src | dst << 32` in `addrs[0]` (the rest
/// 0), IPv6 src and dst as two words each; `meta` = id | protocol << 32 |
/// family << 40. Addresses are in memory byte order (no swapping: only
/// equality and the hash need them).
#[derive(Clone, Copy, Debug)]
struct Key {
    addrs: [u64; 4],
    meta: u64,
}

const META_V6: u64 = 1 << 40;

impl PartialEq for Key {
    /// IPv4 keys compare two words (their high address words are 0).
    #[inline(always)]
    fn eq(&self, o: &Key) -> bool {
        self.eq_as(o, self.meta & META_V6 != 0)
    }
}

impl Key {
    /// `==` for a key of the family `v6` (known to the caller): IPv4 keys
    /// compare two words (their high address words are 0). The families
    /// never compare equal (`meta` holds the family bit).
    #[inline(always)]
    fn eq_as(&self, o: &Key, v6: bool) -> bool {
        let [a0, a1, a2, a3] = self.addrs;
        let [b0, b1, b2, b3] = o.addrs;
        self.meta == o.meta && a0 == b0 && (!v6 || ((a1 ^ b1) | (a2 ^ b2) | (a3 ^ b3)) == 0)
    }

    #[inline(always)]
    fn v4(src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr, id: u32, proto: u8) -> Key {
        let (s, d) = (u32::from_ne_bytes(src.octets()), u32::from_ne_bytes(dst.octets()));
        Key { addrs: [u64::from(s) | (u64::from(d) << 32), 0, 0, 0], meta: u64::from(id) | (u64::from(proto) << 32) }
    }

    #[inline(always)]
    fn v6(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, id: u32) -> Key {
        let (s, d) = (u128::from_ne_bytes(src.octets()), u128::from_ne_bytes(dst.octets()));
        Key { addrs: [s as u64, (s >> 64) as u64, d as u64, (d >> 64) as u64], meta: u64::from(id) | META_V6 }
    }

    #[inline(always)]
    fn family(&self) -> Family {
        if self.meta & META_V6 == 0 {
            Family::V4
        } else {
            Family::V6
        }
    }

    /// Keyed SipHash-1-3 of the packed key: IPv4 (src, dst) in one word and
    /// (id, proto) in the 3-byte tail (11 bytes); IPv6 src and dst in four
    /// words and the id in the 4-byte tail (36 bytes). The lengths differ, so
    /// the families never share a message.
    #[inline]
    fn hash(&self, k: (u64, u64)) -> u64 {
        if self.meta & META_V6 == 0 {
            let tail = (self.meta & 0xffff) | ((self.meta >> 16) & 0xff_0000);
            let [addrs, ..] = self.addrs;
            siphash::sip13(k.0, k.1, &[addrs], tail, 11)
        } else {
            siphash::sip13(k.0, k.1, &self.addrs, self.meta & 0xffff_ffff, 36)
        }
    }

    /// Index into the front table (`2^(64 - shift)` entries): Fibonacci
    /// hashing (the top bits of the key words times 2^64 / golden ratio),
    /// which spreads keys that differ by a progression (consecutive ids,
    /// consecutive addresses) evenly over the table. Unkeyed, so an attacker
    /// can aim collisions at it: a front entry holds one queue, and the
    /// others that map to it go to the keyed table (see the crate docs).
    #[inline(always)]
    fn front_index(&self, shift: u32) -> usize {
        self.front_index_as(shift, self.meta & META_V6 != 0)
    }

    /// [`Key::front_index`] for a key of the family `v6` (known to the
    /// caller).
    #[inline(always)]
    fn front_index_as(&self, shift: u32, v6: bool) -> usize {
        let [a, b, c, d] = self.addrs;
        // IPv4: the id lands on the first two octets of the source, the
        // protocol on the destination's first: the least varying ones.
        // Summed, not XORed: a progression in any field stays one in x.
        let mut x = a.wrapping_add(self.meta);
        if v6 {
            x = x.wrapping_add(b.rotate_left(24)).wrapping_add(c.rotate_left(40)).wrapping_add(d.rotate_left(56));
        }
        // `shift` is 64 only while the table is empty: the shift then wraps
        // to 0 and the index is past the (empty) table, so no entry matches.
        x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_shr(shift) as usize
    }

    /// The IPv4 source address (max-distance rule; memory byte order).
    #[inline(always)]
    fn v4_src(&self) -> u32 {
        let [addrs, ..] = self.addrs;
        addrs as u32
    }
}

/// Where a held fragment's payload is.
#[derive(Debug)]
enum Data<B> {
    /// Copied into the queue's buffer at this position.
    Copied(u32),
    /// In this frame buffer, from this position.
    Held(B, u32),
}

/// One held fragment: `[offset, end)` of the fragmentable part (both fit 16
/// bits: longer fragments are dropped as [`DropReason::TooLarge`] first).
#[derive(Debug)]
struct Frag<B> {
    offset: u16,
    end: u16,
    more: bool,
    data: Data<B>,
}

impl<B> Frag<B> {
    fn offset(&self) -> usize {
        usize::from(self.offset)
    }

    fn end(&self) -> usize {
        usize::from(self.end)
    }

    fn len(&self) -> usize {
        self.end().saturating_sub(self.offset())
    }

    /// The frame buffer, if held.
    fn into_held(self) -> Option<B> {
        match self.data {
            Data::Held(b, _) => Some(b),
            Data::Copied(_) => None,
        }
    }
}

impl<B: AsRef<[u8]>> Frag<B> {
    /// The payload bytes (`copied`: the copy buffer its position refers to).
    fn bytes<'a>(&'a self, copied: &'a [u8]) -> &'a [u8] {
        let (bytes, at) = match &self.data {
            Data::Copied(pos) => (copied, *pos as usize),
            Data::Held(b, at) => (b.as_ref(), *at as usize),
        };
        bytes.get(at..at.saturating_add(self.len())).unwrap_or(&[])
    }
}

/// Ranges held beyond which a queue's sorted vector becomes a `BTreeMap`
/// (only with `max_frags` above it), so per-fragment work stays O(log n).
const SMALL_RANGES: usize = 64;
/// Range vector capacity a free slot keeps for its next queue (more is
/// freed), so a free slot holds at most this many entries' worth.
pub const KEEP_RANGES: usize = 8;

/// The held fragments of a queue, sorted by offset and disjoint.
#[derive(Debug)]
enum Ranges<B> {
    /// Sorted vector (binary search; inserts shift at most `SMALL_RANGES`).
    Small(Vec<Frag<B>>),
    /// Keyed by offset, for queues past `SMALL_RANGES` fragments (boxed:
    /// the enum is then as small as the vector, in every slot; the extra
    /// allocation is made once per queue past 64 fragments).
    #[allow(clippy::box_collection)]
    Big(Box<BTreeMap<u16, Frag<B>>>),
}

impl<B> Ranges<B> {
    fn len(&self) -> usize {
        match self {
            Ranges::Small(v) => v.len(),
            Ranges::Big(m) => m.len(),
        }
    }

    /// The fragment starting at `offset`.
    fn get(&self, offset: u16) -> Option<&Frag<B>> {
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
    fn last_before(&self, end: u16) -> Option<&Frag<B>> {
        match self {
            Ranges::Small(v) => v.partition_point(|r| r.offset < end).checked_sub(1).and_then(|i| v.get(i)),
            Ranges::Big(m) => m.range(..end).next_back().map(|(_, r)| r),
        }
    }

    /// Inserts a fragment disjoint from the held ones.
    #[inline(always)]
    fn insert(&mut self, r: Frag<B>) {
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

    fn iter(&self) -> impl Iterator<Item = &Frag<B>> {
        let (a, b) = match self {
            Ranges::Small(v) => (Some(v.iter()), None),
            Ranges::Big(m) => (None, Some(m.values())),
        };
        a.into_iter().flatten().chain(b.into_iter().flatten())
    }

    /// Empties the ranges, handing held frames to `released`, and keeps a
    /// small vector (at most [`KEEP_RANGES`] entries of capacity) for reuse.
    fn clear_into(&mut self, released: &mut Vec<B>) {
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
enum HeadLoc {
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
struct Head {
    loc: HeadLoc,
    /// Header length.
    len: u16,
    /// IPv6: where the Next Header field pointing at the Fragment header is
    /// (from the IP header's start), and the Fragment header's Next Header
    /// to write there.
    v6_next: Option<(u16, u8)>,
}

impl Head {
    /// None when a length or position does not fit 16 bits.
    fn new(loc: HeadLoc, len: usize, v6_next: Option<(usize, u8)>) -> Option<Head> {
        let v6_next = match v6_next {
            Some((at, nh)) => Some((u16::try_from(at).ok()?, nh)),
            None => None,
        };
        Some(Head { loc, len: u16::try_from(len).ok()?, v6_next })
    }

    fn len(&self) -> usize {
        usize::from(self.len)
    }

    fn v6_next(&self) -> Option<(usize, u8)> {
        self.v6_next.map(|(at, nh)| (usize::from(at), nh))
    }
}

/// The offset-0 fragment's header in the frame being pushed.
#[derive(Clone, Copy)]
struct HeadIn {
    /// Position of the IP header in the frame.
    at: usize,
    len: usize,
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

/// The max-distance rule's view of a queue's source: which entry, its
/// generation, and the source's counter when the queue was last extended.
#[derive(Clone, Copy, Debug)]
struct Rid {
    idx: u32,
    gen: u32,
    counter: u32,
}

/// One datagram being reassembled, in its slab slot. Slots are reused in
/// place (a free slot keeps its range vector), so a queue is never moved.
/// `repr(C)`, 160 bytes (2.5 cache lines) with 16-byte frame handles:
/// what a lookup and a fragment in order read and write comes first (key,
/// rule mark, range vector and counters in the first two lines), the copy
/// path's buffers are boxed. Small matters with thousands of datagrams in
/// flight: at 248 bytes, 4,096 slots filled this machine's 1 MiB L2 (see
/// BENCHMARKS.md, session 6). Not line-aligned: 64-byte alignment (a
/// 256-byte stride) measured 10 % slower there.
#[derive(Debug)]
#[repr(C)]
struct Queue<B> {
    key: Key,
    /// The slot holds a queue (else it is on the free list).
    live: bool,
    /// OR of the ECN code points seen, as Linux `IPFRAG_ECN_*` bits.
    ecn_seen: u8,
    /// The queue is in the front table at its key's index (else in the
    /// keyed table, counted in that front entry's `over`).
    in_front: bool,
    /// `buf` has been set up (header room in place); some fragment may be
    /// copied.
    has_buf: bool,
    /// Next queue in the same bucket of the keyed table.
    hnext: u32,
    /// IPv4 max-distance rule: the source's entry when the queue was last
    /// extended.
    rid: Option<Rid>,
    frags: Ranges<B>,
    /// End of the datagram, known once the last fragment arrived.
    known_end: Option<u16>,
    /// Largest end of any held fragment.
    max_end: u16,
    /// Payload bytes held (non-overlapping, so the datagram is complete when
    /// this equals `known_end`).
    received: u32,
    /// Accounted memory of this queue.
    mem: usize,
    /// The key's keyed table hash, when the queue is in the keyed table
    /// (kept so removal and rebuilds do not hash again).
    hash: u64,
    prev: u32,
    next: u32,
    created: u64,
    head: Option<Head>,
    /// The copy buffers (set up with the queue's first copied fragment;
    /// see `has_buf`): boxed, so a slot stays small for the zero-copy
    /// path. A free slot keeps its box for its next queue.
    copy: Option<Box<CopyBufs>>,
}

/// The buffers of a queue whose fragments were pushed by copying.
#[derive(Debug, Default)]
struct CopyBufs {
    /// The offset-0 header when [`HeadLoc::Saved`] (else empty, no
    /// allocation).
    saved: Vec<u8>,
    /// The copy buffer: `hroom` bytes for the IP header, then the copied
    /// fragments' payloads in arrival order (so in offset order, and already
    /// in place, when they arrive in order).
    buf: Vec<u8>,
    /// Header room at the front of `buf`: the header length of the first
    /// copied fragment (the offset-0 header when every fragment carries the
    /// same one, as they do in practice).
    hroom: usize,
}

impl<B> Queue<B> {
    fn vacant() -> Self {
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
    fn head_bytes(&self) -> &[u8]
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
struct AgeList {
    head: u32,
    tail: u32,
}

impl AgeList {
    const EMPTY: AgeList = AgeList { head: NIL, tail: NIL };
}

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
    /// Recycled datagram buffers (cleared), at most [`FREE_BUFS`] totalling
    /// at most [`FREE_BUF_BYTES`] of capacity.
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

/// IPv4 sources the max-distance rule tracks at once (2-way buckets, LRU
/// replacement within a bucket; see the module docs).
pub const MAX_DIST_SOURCES: usize = 4096;
const SOURCE_WAYS: usize = 2;
const SOURCE_BUCKETS: usize = MAX_DIST_SOURCES / SOURCE_WAYS;
const SOURCE_MEMO_BITS: u32 = 10;
/// Entries of the max-distance rule's source memo (4 B each).
const SOURCE_MEMO: usize = 1 << SOURCE_MEMO_BITS;

/// The max-distance rule's per-source counters.
#[derive(Debug, Default)]
struct SourceTable {
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
    fn tick_known(&mut self, h: &mut Rid, src: u32, max_dist: u32) -> bool {
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
    fn tick(&mut self, sip: (u64, u64), src: u32, hint: Option<Rid>) -> Option<Rid> {
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
fn is_stale(now: Option<Rid>, then: Option<Rid>, max_dist: u32) -> bool {
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

/// Linux `IPFRAG_ECN_*` bits: Not-ECT 0x01, ECT(1) 0x02, ECT(0) 0x04, CE 0x08,
/// i.e. `1 << codepoint` ([`ecn_bit`]).
const ECN_NOT_ECT: u8 = 0x01;
const ECN_CE: u8 = 0x08;

/// The `IPFRAG_ECN_*` bit of an ECN code point.
#[inline(always)]
fn ecn_bit(ecn: u8) -> u8 {
    1 << (ecn & 3)
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

/// The most a queue's buffer can need once `p` is in: header room plus the
/// datagram's end if known, else the largest payload.
fn buf_limit(hroom: usize, known_end: Option<u16>, p: &Prepared) -> usize {
    let end = if p.more { known_end.map(usize::from) } else { Some(usize::from(p.end)) };
    hroom.saturating_add(end.unwrap_or(MAX_IP_LEN))
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

/// Rewrites the first 12 bytes of an offset-0 IPv4 header for the
/// reassembled datagram of `ip_len` bytes: total length, MF and offset
/// cleared (DF kept), CE if combined. The header checksum is updated for
/// the three 16-bit words that change (RFC 1624, eqn. 3: HC' = ~(~HC + ~m +
/// m')), as a router updates it, not recomputed: for a header whose
/// checksum was right (every header a sender built) the result is the same
/// 16 bits a full computation gives (both are the folded one's complement
/// sum, nonzero, of the same words), and a header that arrived corrupted
/// (this crate does not verify IPv4 header checksums) stays detectably
/// corrupted instead of being given a checksum that vouches for it. It
/// reads only the header's own bytes, never one just rewritten, so the
/// stores and loads do not wait on each other.
#[inline(always)]
fn fix_ipv4_words(h: &mut [u8; 12], ip_len: usize, set_ce: bool) {
    // Words in memory order: the one's complement sum does not depend on
    // the byte order, as long as every word is read and written alike.
    let [t0, t1, l0, l1, _, _, f0, f1, _, _, c0, c1] = *h;
    let word = |a: u8, b: u8| u16::from_ne_bytes([a, b]);
    let (tos, flags, check) = (word(t0, t1), word(f0, f1), word(c0, c1));
    let new_tos = tos | word(0, if set_ce { 3 } else { 0 });
    // The word whose memory bytes are the length in network order.
    let new_len = u16::try_from(ip_len).unwrap_or(u16::MAX).to_be();
    // Keep DF, clear MF and the offset.
    let new_flags = flags & word(0x40, 0);
    // At most 7 x 0xffff: two folds bring it to 16 bits.
    let sum = [!check, !tos, new_tos, !word(l0, l1), new_len, !flags, new_flags]
        .into_iter()
        .fold(0u32, |acc, w| acc.wrapping_add(u32::from(w)));
    let sum = (sum & 0xffff).wrapping_add(sum >> 16);
    let sum = (sum & 0xffff).wrapping_add(sum >> 16);
    [h[0], h[1]] = new_tos.to_ne_bytes();
    [h[2], h[3]] = new_len.to_ne_bytes();
    [h[6], h[7]] = new_flags.to_ne_bytes();
    [h[10], h[11]] = (!(sum as u16)).to_ne_bytes();
}

/// Appends `src` to `dst`; the usual header lengths (20, 40) as fixed-size
/// copies, which compile to a few moves instead of a `memcpy` call.
#[inline]
fn copy_small(dst: &mut Vec<u8>, src: &[u8]) {
    if let Ok(a) = <&[u8; 20]>::try_from(src) {
        dst.extend_from_slice(a);
    } else if let Ok(a) = <&[u8; 40]>::try_from(src) {
        dst.extend_from_slice(a);
    } else {
        dst.extend_from_slice(src);
    }
}

/// Rewrites the offset-0 header `hdr` for the reassembled datagram of
/// `ip_len` bytes: IPv4 total length, MF and offset cleared (DF kept),
/// CE if combined, checksum updated ([`fix_ipv4_words`], which the
/// option-less fast path calls directly); IPv6 payload
/// length, the Next Header that named the Fragment header, CE if combined.
fn fix_header(family: Family, hdr: &mut [u8], ip_len: usize, set_ce: bool, v6_next: Option<(usize, u8)>) {
    match family {
        Family::V4 => {
            if let Some(h) = hdr.first_chunk_mut::<12>() {
                fix_ipv4_words(h, ip_len, set_ce);
            }
        }
        Family::V6 => {
            let plen = u16::try_from(ip_len.saturating_sub(40)).unwrap_or(u16::MAX).to_be_bytes();
            if let Some(b) = hdr.get_mut(4..6) {
                b.copy_from_slice(&plen);
            }
            if let Some((field, nh)) = v6_next {
                if let Some(b) = hdr.get_mut(field) {
                    *b = nh;
                }
            }
            if set_ce {
                if let Some(b) = hdr.get_mut(1) {
                    *b |= 0x30;
                }
            }
        }
    }
}

/// Bytes of the header a [`Chain`] holds without a vector.
const INLINE_HEADER: usize = 64;

/// A reassembled datagram delivered without copying (see
/// [`Reassembler::push_owned`]): the rewritten IP header followed by the
/// fragments' payload slices in offset order, each still in its frame
/// buffer. Ready to use: the header is exactly the one the copying path
/// delivers (IPv4 total length, MF, offset, checksum and ECN fixed; IPv6
/// Fragment header removed, Next Header and payload length fixed, ECN
/// combined), and [`Chain::copy_into`] gives the same bytes as
/// [`Reassembler::push`].
///
/// The caller owns the chain and reuses it across pushes: delivery swaps
/// the queue's fragment list into it (no per-piece work), and its vectors
/// keep their capacity, so steady state does not allocate. Take the frame
/// buffers back with [`Chain::drain_buffers`] once done; buffers still in
/// the chain when the next datagram is delivered into it are handed back
/// through that push's `spare`.
#[derive(Debug)]
pub struct Chain<B> {
    /// The header when it fits (every IPv4 one, IPv6 with up to 24 bytes of
    /// extension headers): `inline[..inline_len]`, no vector to fill.
    inline: [u8; INLINE_HEADER],
    /// 0: the header is in `header`.
    inline_len: usize,
    header: Vec<u8>,
    /// The fragments in offset order.
    frags: Vec<Frag<B>>,
    /// Payload bytes of fragments that were pushed by copying (only when a
    /// queue mixed both ways of pushing).
    copied: Vec<u8>,
    len: usize,
}

impl<B> Default for Chain<B> {
    fn default() -> Self {
        Chain {
            inline: [0; INLINE_HEADER],
            inline_len: 0,
            header: Vec::new(),
            frags: Vec::new(),
            copied: Vec::new(),
            len: 0,
        }
    }
}

impl<B> Chain<B> {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Length of the IP datagram (header plus payload), 0 when empty.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chain holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fragments the datagram was made of.
    pub fn fragments(&self) -> usize {
        self.frags.len()
    }

    /// The rewritten IP header (IPv6: with the extension headers that came
    /// before the Fragment header).
    pub fn header(&self) -> &[u8] {
        if self.inline_len == 0 {
            &self.header
        } else {
            self.inline.get(..self.inline_len).unwrap_or(&[])
        }
    }

    /// Moves the frame buffers out (for recycling) and empties the chain,
    /// keeping its capacity. Dropping the iterator early drops the rest.
    pub fn drain_buffers(&mut self) -> impl Iterator<Item = B> + '_ {
        self.clear_header();
        self.frags.drain(..).filter_map(Frag::into_held)
    }

    /// Empties the chain, dropping its frame buffers (for handles that need
    /// no recycling), and keeps its capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.clear_header();
        self.frags.clear();
    }

    /// Empties everything but the fragment list.
    #[inline]
    fn clear_header(&mut self) {
        self.inline_len = 0;
        self.header.clear();
        self.copied.clear();
        self.len = 0;
    }

    /// The frame buffers, consuming the chain.
    pub fn into_buffers(self) -> impl Iterator<Item = B> {
        self.frags.into_iter().filter_map(Frag::into_held)
    }
}

impl<B: AsRef<[u8]>> Chain<B> {
    /// The payload pieces in offset order (the header not included).
    pub fn payload(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.frags.iter().map(move |f| f.bytes(&self.copied))
    }

    /// Every piece of the datagram in order: the header, then the payload
    /// pieces. Their lengths add up to [`Chain::len`].
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(self.header()).chain(self.payload())
    }

    /// Clears `out` and writes the datagram into it contiguously (byte for
    /// byte what [`Reassembler::push`] delivers).
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.len);
        for piece in self.iter() {
            out.extend_from_slice(piece);
        }
    }
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
        Self::with_seed_owning(cfg, seed)
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

    /// Accounted memory now (bytes; see [`FRAG_OVERHEAD`], [`DATAGRAM_OVERHEAD`]).
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

    fn bucket(&self, hash: u64) -> usize {
        (hash as usize) & self.buckets.len().wrapping_sub(1)
    }

    /// The queue with this key, if any, and the key's keyed hash when it
    /// had to be computed: a queue at the key's front entry is found
    /// without hashing, and when no queue with this index is in the keyed
    /// table (`over` 0) there is none.
    #[inline]
    fn find(&self, key: &Key) -> (Option<u32>, Option<u64>) {
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
    fn oldest(&self, keep: Option<u32>) -> Option<u32> {
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
    fn drop_single(&mut self, reason: DropReason) -> Verdict {
        self.stats.drop_frags(reason, 1);
        Verdict::Dropped(reason)
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

    /// A copy buffer for a queue whose first copied fragment is `p`: `hroom`
    /// bytes of header room, capacity for at least the fragment. Recycled
    /// when one of a fitting size is free (see [`REUSE_SLACK`]).
    fn take_buf(&mut self, hroom: usize, p: &Prepared) -> Vec<u8> {
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
    fn unlink(&mut self, slot: u32) -> bool {
        let v6 = self.queue(slot).is_some_and(|q| q.key.meta & META_V6 != 0);
        self.unlink_as(slot, v6)
    }

    /// [`Reassembler::unlink`] of a queue of the family `v6` (known to the
    /// caller).
    #[inline(always)]
    fn unlink_as(&mut self, slot: u32, v6: bool) -> bool {
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
    fn vacate(&mut self, slot: u32) {
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
    fn kill(&mut self, slot: u32, reason: DropReason, extra: u64) {
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
    fn make_room(&mut self, cost: usize, keep: Option<u32>) -> bool {
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
    fn expire_inner(&mut self, now: u64) -> usize {
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

    fn flush_inner(&mut self) -> usize {
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
    /// [`DropReason::Flushed`], and frees the max-distance rule's source
    /// table, the bucket array and the slab. Returns the number of queues
    /// dropped. Held frames are dropped; use [`Reassembler::flush_into`] to
    /// get them back.
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
            // is the only candidate that can overlap us (see the module docs).
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

    /// Creates an empty queue for `key` in a free slot, linked at the tail
    /// of its age list and at its front entry if free, else into the keyed
    /// table (`hash`: the key's keyed hash if already computed), charging
    /// [`DATAGRAM_OVERHEAD`].
    #[inline(always)]
    fn create(&mut self, key: Key, hash: Option<u64>, now: u64) -> Option<u32> {
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
    /// module docs). `frame.as_ref()` holds the packet at `l3.l3_offset` and
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

    /// [`Reassembler::push_owned`] for everything the fast path does not
    /// take.
    #[cold]
    #[inline(never)]
    fn push_owned_general(&mut self, frame: B, l3: &L3Info, now: u64, out: &mut Chain<B>) -> Verdict {
        match self.prepare(frame.as_ref(), l3, now) {
            Ok(p) => self.insert(p, Payload::Own(frame), now, Out::Chain(out)),
            Err(v) => {
                self.released.push(frame);
                v
            }
        }
    }

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
    fn push_owned_inner(&mut self, frame: B, l3: &L3Info, now: u64, out: &mut Chain<B>) -> Verdict {
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

    /// A fragment was just added to queue `q`: its end, MF flag, payload
    /// length, ECN bit and `cost` bytes of accounted
    /// memory go into the queue and the totals (`mem`, `stats`: the
    /// reassembler's, passed apart so `q` can stay borrowed from the slab).
    /// True when the datagram is now complete. Shared by the general and
    /// the fast paths.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn account_fragment(
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

    /// The per-fragment checks shared by both paths: nothing malformed is
    /// ever stored. Err is the verdict for a packet that goes no further
    /// (the frame is then not kept).
    #[inline(always)]
    fn prepare(&mut self, frame: &[u8], l3: &L3Info, now: u64) -> Result<Prepared, Verdict> {
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
    fn insert(&mut self, p: Prepared, payload: Payload<'_, B>, now: u64, out: Out<'_, B>) -> Verdict {
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
    fn complete(&mut self, slot: u32, pushed: u16, out: Out<'_, B>) -> Verdict {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// [`DATAGRAM_OVERHEAD`] covers the slab slot, its boxed copy buffers
    /// and up to two bucket heads (plus 3 x 16 B of allocator headers); the
    /// fragment charge covers two entries.
    #[test]
    fn datagram_overhead_covers_slot_and_entry() {
        let fixed = std::mem::size_of::<Queue<Vec<u8>>>()
            + std::mem::size_of::<CopyBufs>()
            + 2 * std::mem::size_of::<u32>()
            + 48;
        assert!(fixed <= DATAGRAM_OVERHEAD, "{fixed}");
        assert!(2 * std::mem::size_of::<Frag<u32>>() <= FRAG_OVERHEAD);
        assert!(Reassembler::<Vec<u8>>::frag_cost() >= 2 * std::mem::size_of::<Frag<Vec<u8>>>());
    }

    proptest::proptest! {
        /// The incremental checksum update gives exactly the full
        /// computation's checksum for any header whose checksum was right
        /// (options included), with or without CE; and a header whose
        /// checksum was wrong still fails verification afterwards.
        #[test]
        fn ipv4_checksum_update_is_the_full_computation(
            head in proptest::array::uniform20(proptest::num::u8::ANY),
            opts in proptest::collection::vec(proptest::num::u8::ANY, 0..=10),
            ip_len in 20usize..=65535,
            set_ce: bool,
            flip in 1u16..,
        ) {
            use flowsteer_wire::build::ipv4_header_checksum;
            let mut h = head.to_vec();
            h.extend(opts.iter().take(opts.len() / 4 * 4));
            h[0] = 0x40 | (h.len() / 4) as u8;
            let ck = ipv4_header_checksum(&h).to_be_bytes();
            [h[10], h[11]] = ck;
            let mut want = h.clone();
            [want[2], want[3]] = (ip_len as u16).to_be_bytes();
            want[6] &= 0x40;
            want[7] = 0;
            if set_ce {
                want[1] |= 3;
            }
            let full = ipv4_header_checksum(&want).to_be_bytes();
            [want[10], want[11]] = full;
            let mut got = h.clone();
            fix_header(Family::V4, &mut got, ip_len, set_ce, None);
            proptest::prop_assert_eq!(&got, &want);
            if let Some(a) = h.first_chunk_mut::<12>() {
                fix_ipv4_words(a, ip_len, set_ce);
                proptest::prop_assert_eq!(&h, &want);
            }
            // Corrupted on the way in (not merely the other one's complement
            // zero, 0xffff for 0x0000, which verifies): still detectably
            // corrupted, the one's complement sum of all its words not
            // 0xffff.
            let verifies = |h: &[u8]| {
                let sum: u32 = h.chunks_exact(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
                let sum = (sum & 0xffff) + (sum >> 16);
                (sum & 0xffff) + (sum >> 16) == 0xffff
            };
            let mut bad = head.to_vec();
            bad[0] = 0x45;
            [bad[10], bad[11]] = (ipv4_header_checksum(&bad) ^ flip).to_be_bytes();
            proptest::prop_assume!(!verifies(&bad));
            fix_header(Family::V4, &mut bad, ip_len, set_ce, None);
            proptest::prop_assert!(!verifies(&bad));
            proptest::prop_assert!(verifies(&want));
        }
    }

    /// HashDoS on the unkeyed front index: 2,000 IPv4 datagrams whose keys
    /// all mix to the same word (source and id chosen to cancel out), so
    /// they share one front entry at every table size. One queue sits in
    /// front, the others go to the keyed table, whose SipHash chains stay
    /// short; every datagram still completes, byte for byte, by copying and
    /// zero-copy alike, and the counters add up.
    #[test]
    fn front_collisions_go_to_the_keyed_table() {
        use flowsteer_wire::{build, parse_frame, LinkType, ParseOptions};
        use std::net::Ipv4Addr;
        const N: u32 = 2000;
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
        let dst = Ipv4Addr::new(192, 0, 2, 9);
        let key_of = |k: u32| {
            let src = Ipv4Addr::from(0x4000_0000u32.wrapping_sub(k).to_ne_bytes());
            (src, k as u16)
        };
        let datagrams: Vec<Vec<Vec<u8>>> = (0..N)
            .map(|k| {
                let (src, id) = key_of(k);
                build::ipv4_fragments(src, dst, 1, 2, id, &payload, 1480)
            })
            .collect();
        let l3 = |f: &[u8]| parse_frame(f, LinkType::Ethernet, &ParseOptions::new()).unwrap().outer.unwrap();
        let key = |f: &[u8]| {
            let l = l3(f);
            match (l.tuple.src, l.tuple.dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => Key::v4(s, d, l.frag.unwrap().id, l.tuple.proto),
                _ => unreachable!(),
            }
        };
        // They do collide, whatever the table size.
        for shift in [60, 50, 40] {
            let i = key(&datagrams[0][0]).front_index(shift);
            assert!(datagrams.iter().all(|d| key(&d[0]).front_index(shift) == i));
        }
        let cfg = ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, ..ReasmConfig::default() };
        for owned in [false, true] {
            let mut r = Reassembler::with_seed(cfg, (3, 5)).unwrap();
            let mut out = Vec::new();
            let mut chain = Chain::new();
            let mut spare = Vec::new();
            let mut push = |r: &mut Reassembler, f: &Vec<u8>, out: &mut Vec<u8>| {
                if owned {
                    let v = r.push_owned(f.clone(), &l3(f), 0, &mut chain, &mut spare);
                    if let Verdict::Complete { .. } = v {
                        chain.copy_into(out);
                        chain.drain_buffers().for_each(drop);
                    }
                    v
                } else {
                    r.push(f, &l3(f), 0, out)
                }
            };
            // First fragments of all, then the rest: all pending at once.
            for d in &datagrams {
                assert_eq!(push(&mut r, &d[0], &mut out), Verdict::Held);
            }
            assert_eq!(r.pending(), N as usize);
            let fi = key(&datagrams[0][0]).front_index(r.front_shift);
            assert_ne!(r.front[fi], NIL);
            assert_eq!(r.front_over[fi], N - 1);
            let longest = (0..r.buckets.len())
                .map(|b| {
                    let (mut s, mut n) = (r.buckets[b], 0);
                    while let Some(q) = r.queue(s) {
                        n += 1;
                        s = q.hnext;
                    }
                    n
                })
                .max()
                .unwrap();
            assert!(longest <= 12, "keyed chain of {longest}");
            for (k, d) in datagrams.iter().enumerate() {
                assert_eq!(push(&mut r, &d[1], &mut out), Verdict::Held);
                assert_eq!(push(&mut r, &d[2], &mut out), Verdict::Complete { fragments: 3 });
                let (src, id) = key_of(k as u32);
                let whole = build::FrameBuilder {
                    ident: id,
                    ..build::FrameBuilder::udp(src.into(), dst.into(), 1, 2, &payload)
                }
                .ip_packet();
                assert_eq!(out, whole);
            }
            assert_eq!((r.pending(), r.mem_used(), r.front_over[fi]), (0, 0, 0));
            assert!(r.stats().conservation_ok());
            assert_eq!(r.stats().datagrams_completed, u64::from(N));
        }
    }
}
