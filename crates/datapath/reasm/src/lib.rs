//! flowsteer-reasm: sans-IO, per-core IPv4/IPv6 fragment reassembly.
//!
//! Stage "worker / reasm" of the packet's path (source -> parse -> hash -> steer
//! -> hand-off -> **worker: reassembly** -> app -> sink). Fragments are steered
//! on the IP 2-tuple, reassembled on the core where they land, and the
//! complete datagram is handed back to the caller to re-hash and re-inject.
//! One [`Reassembler`] per worker core: it is `Send` (when the held buffer
//! type is) but not `Sync`, owns all its memory and takes no locks.
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
//!   (random keys, or a fixed seed for tests; `flowsteer-prim` says why
//!   this hash), and the front entry counts it. A
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
        clippy::print_stdout,
        clippy::print_stderr,
        clippy::arithmetic_side_effects
    )
)]
#![warn(missing_docs)]

// Layers, each using only the ones above it: limits, verdicts and counters;
// the key and the max-distance rule's source table; a datagram's queue and
// its fragments; the header work; the zero-copy delivery; the reassembler.
mod config;

mod key;
mod sources;

mod queue;

mod header;

mod chain;

mod reassembler;

pub use chain::Chain;
pub use config::{DropReason, ReasmConfig, ReasmConfigError, ReasmStats, Verdict, DATAGRAM_OVERHEAD, FRAG_OVERHEAD};
pub use queue::{FREE_BUF_BYTES, KEEP_RANGES};
pub use reassembler::Reassembler;
pub use sources::MAX_DIST_SOURCES;
