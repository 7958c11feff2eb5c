//! Configuration, verdicts, drop reasons and counters: what a caller sets
//! and reads, and the limits the other modules share. The bottom layer: it
//! uses no other module of the crate.

use std::fmt;

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
pub(crate) const MAX_IP_LEN: usize = 65535;
pub(crate) const NIL: u32 = u32::MAX;

/// Limits of one [`Reassembler`](crate::Reassembler). Every capacity is
/// bounded; the overflow policy of each is in its field's doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Accounted memory
    /// ([`Reassembler::mem_used`](crate::Reassembler::mem_used)) is never
    /// above this (bytes, default 4 MiB as Linux `ipfrag_high_thresh`). A
    /// fragment that would exceed it evicts the oldest queues first.
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

/// What [`Reassembler::push`](crate::Reassembler::push) did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// This fragment completed its datagram, which is now in `out` (the
    /// contiguous `Vec<u8>` of
    /// [`Reassembler::push`](crate::Reassembler::push) or the
    /// [`Chain`](crate::Chain) of
    /// [`Reassembler::push_owned`](crate::Reassembler::push_owned)); the
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
    /// unchanged ([`Reassembler::push_owned`](crate::Reassembler::push_owned)
    /// hands the frame back in `spare`). Not counted in `fragments_in`.
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
    /// The queue was pending at
    /// [`Reassembler::flush`](crate::Reassembler::flush) (end of capture).
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

    /// This reason's counter slot in [`ReasmStats`], in `0..DropReason::COUNT`
    /// (the order of [`DropReason::ALL`]).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one [`Reassembler`](crate::Reassembler). All monotonic except
/// `pending`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasmStats {
    /// Fragments handed to [`Reassembler::push`](crate::Reassembler::push)
    /// (atomic and unfragmented packets excluded).
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

    pub(crate) fn drop_frags(&mut self, reason: DropReason, n: u64) {
        if let Some(c) = self.dropped_fragments.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }

    pub(crate) fn drop_datagram(&mut self, reason: DropReason) {
        if let Some(c) = self.dropped_datagrams.get_mut(reason.index()) {
            *c = c.saturating_add(1);
        }
    }
}
