//! Why the engine drops a packet: one fixed counter slot per reason.
//!
//! The receive and worker sides count a drop with an array increment
//! ([`DropCounts::count`]); reason names are produced only when a snapshot
//! is built ([`DropCounts::named`]).

use flowsteer_reasm::DropReason as ReasmDrop;
use flowsteer_wire::{Malformed, ParseError};
use std::borrow::Cow;
use std::fmt;
use std::ops::AddAssign;

/// A reason the engine drops a packet or a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The frame did not parse; named by [`ParseError::reason`].
    Parse(ParseError),
    /// Parsed, but what a receiving host refuses (an IP length past the
    /// frame, a bad IPv4 option, a bad UDP length, an IPv4 header checksum
    /// that does not verify); named by [`Malformed::reason`].
    Malformed(Malformed),
    /// Parsed, but no IP header (`not_ip`).
    NotIp,
    /// A carried fragment's descriptor came without its bytes
    /// (`frag_bytes_missing`).
    FragBytesMissing,
    /// A fragment (or an early fragment released behind its first one) did
    /// not parse again (`frag_unparsable`).
    FragUnparsable,
    /// A fragment reached a core without a reassembler (`no_reassembler`).
    NoReassembler,
    /// A reassembled datagram did not parse (`reasm_unparsable`).
    ReasmUnparsable,
    /// A steering table named a worker that does not exist (`no_such_worker`).
    NoSuchWorker,
    /// Policy `owner`: a waiting fragment whose id was forgotten to make room
    /// (`frag_hold_evicted`).
    FragHoldEvicted,
    /// Policy `owner`: a waiting fragment whose id timed out
    /// (`frag_hold_timeout`).
    FragHoldTimeout,
    /// Policy `owner`: a fragment refused by the holding area's per-id or
    /// byte cap (`frag_hold_full`).
    FragHoldFull,
    /// Policy `owner`: a fragment still waiting for its first fragment when
    /// the run ended (`frag_hold_pending_at_end`).
    FragHoldPendingAtEnd,
    /// A unicast frame to another interface's MAC (`dst_other_host`; see
    /// [`crate::dest::DestFilter`]).
    DstOtherHost,
    /// A frame to the broadcast MAC or to 255.255.255.255, which the
    /// listener does not take (`dst_broadcast`).
    DstBroadcast,
    /// A frame to a multicast MAC or IP address, which the listener does
    /// not take (`dst_multicast`).
    DstMulticast,
    /// The worker's flow table was full (`flow_table_full`).
    FlowTableFull,
    /// No application listener for the packet's protocol and port
    /// (`no_listener`).
    NoListener,
    /// A hand-off queue to the worker was full (`queue_full`). Counted per
    /// destination worker in [`crate::counters::LcoreCounters::qdrops_to`],
    /// not in a [`DropCounts`].
    QueueFull,
    /// Dropped by the core's reassembler; named `reasm_` and the
    /// reassembler's own counter name.
    Reasm(ReasmDrop),
}

/// The reasons that carry no value, in slot order.
const OWN: [DropReason; 16] = [
    DropReason::NotIp,
    DropReason::FragBytesMissing,
    DropReason::FragUnparsable,
    DropReason::NoReassembler,
    DropReason::ReasmUnparsable,
    DropReason::NoSuchWorker,
    DropReason::FragHoldEvicted,
    DropReason::FragHoldTimeout,
    DropReason::FragHoldFull,
    DropReason::FlowTableFull,
    DropReason::NoListener,
    DropReason::QueueFull,
    DropReason::FragHoldPendingAtEnd,
    DropReason::DstOtherHost,
    DropReason::DstBroadcast,
    DropReason::DstMulticast,
];

/// First slot of the length checks, of the value-less reasons, and of the
/// reassembler's.
const MALFORMED_BASE: usize = ParseError::COUNT;
const OWN_BASE: usize = MALFORMED_BASE + Malformed::COUNT;
const REASM_BASE: usize = OWN_BASE + OWN.len();

impl DropReason {
    /// Number of reasons: the length of a [`DropCounts`] array.
    pub const COUNT: usize = REASM_BASE + ReasmDrop::COUNT;

    /// Every reason, in slot order ([`DropReason::index`]): parse errors,
    /// length checks, the engine's own reasons, the reassembler's.
    pub const ALL: [DropReason; DropReason::COUNT] = {
        let mut all = [DropReason::NotIp; DropReason::COUNT];
        let mut i = 0;
        while i < ParseError::COUNT {
            all[i] = DropReason::Parse(ParseError::ALL[i]);
            i += 1;
        }
        let mut m = 0;
        while m < Malformed::COUNT {
            all[MALFORMED_BASE + m] = DropReason::Malformed(Malformed::ALL[m]);
            m += 1;
        }
        let mut j = 0;
        while j < OWN.len() {
            all[OWN_BASE + j] = OWN[j];
            j += 1;
        }
        let mut k = 0;
        while k < ReasmDrop::COUNT {
            all[REASM_BASE + k] = DropReason::Reasm(ReasmDrop::ALL[k]);
            k += 1;
        }
        all
    };

    /// This reason's counter slot, in `0..DropReason::COUNT`.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            DropReason::Parse(e) => e.index(),
            DropReason::Malformed(m) => MALFORMED_BASE + m.index(),
            DropReason::NotIp => OWN_BASE,
            DropReason::FragBytesMissing => OWN_BASE + 1,
            DropReason::FragUnparsable => OWN_BASE + 2,
            DropReason::NoReassembler => OWN_BASE + 3,
            DropReason::ReasmUnparsable => OWN_BASE + 4,
            DropReason::NoSuchWorker => OWN_BASE + 5,
            DropReason::FragHoldEvicted => OWN_BASE + 6,
            DropReason::FragHoldTimeout => OWN_BASE + 7,
            DropReason::FragHoldFull => OWN_BASE + 8,
            DropReason::FlowTableFull => OWN_BASE + 9,
            DropReason::NoListener => OWN_BASE + 10,
            DropReason::QueueFull => OWN_BASE + 11,
            DropReason::FragHoldPendingAtEnd => OWN_BASE + 12,
            DropReason::DstOtherHost => OWN_BASE + 13,
            DropReason::DstBroadcast => OWN_BASE + 14,
            DropReason::DstMulticast => OWN_BASE + 15,
            DropReason::Reasm(r) => REASM_BASE + r.index(),
        }
    }

    /// The stable counter name shown in drop maps (`truncated_ipv4`,
    /// `queue_full`, `reasm_overlap`, ...).
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            DropReason::Parse(e) => e.reason(),
            DropReason::Malformed(m) => m.reason(),
            DropReason::NotIp => "not_ip",
            DropReason::FragBytesMissing => "frag_bytes_missing",
            DropReason::FragUnparsable => "frag_unparsable",
            DropReason::NoReassembler => "no_reassembler",
            DropReason::ReasmUnparsable => "reasm_unparsable",
            DropReason::NoSuchWorker => "no_such_worker",
            DropReason::FragHoldEvicted => "frag_hold_evicted",
            DropReason::FragHoldTimeout => "frag_hold_timeout",
            DropReason::FragHoldFull => "frag_hold_full",
            DropReason::FlowTableFull => "flow_table_full",
            DropReason::NoListener => "no_listener",
            DropReason::QueueFull => "queue_full",
            DropReason::FragHoldPendingAtEnd => "frag_hold_pending_at_end",
            DropReason::DstOtherHost => "dst_other_host",
            DropReason::DstBroadcast => "dst_broadcast",
            DropReason::DstMulticast => "dst_multicast",
            DropReason::Reasm(r) => return Cow::Owned(format!("reasm_{}", r.name())),
        })
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Drops counted by reason, one slot per [`DropReason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::COUNT]);

impl Default for DropCounts {
    fn default() -> Self {
        DropCounts([0; DropReason::COUNT])
    }
}

impl DropCounts {
    /// One more drop for `reason`.
    #[inline]
    pub fn count(&mut self, reason: DropReason) {
        self.add(reason, 1);
    }

    /// `n` more drops for `reason`.
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        if let Some(slot) = self.0.get_mut(reason.index()) {
            *slot += n;
        }
    }

    /// Sets the count of `reason` (for counters kept elsewhere, such as the
    /// reassembler's, copied in at publication).
    pub fn set(&mut self, reason: DropReason, n: u64) {
        if let Some(slot) = self.0.get_mut(reason.index()) {
            *slot = n;
        }
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0.get(reason.index()).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The non-zero counts with their reasons, in slot order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.into_iter().zip(self.0).filter(|&(_, n)| n > 0)
    }
}

impl AddAssign<&DropCounts> for DropCounts {
    fn add_assign(&mut self, o: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::Layer;

    #[test]
    fn slots_are_dense_and_names_unique() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
        let mut names: Vec<String> = DropReason::ALL.iter().map(|r| r.name().into_owned()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }

    #[test]
    fn names_are_the_counter_names() {
        let truncated = DropReason::Parse(ParseError::Truncated { layer: Layer::Ipv4 });
        assert_eq!(truncated.name(), "truncated_ipv4");
        assert_eq!(DropReason::QueueFull.name(), "queue_full");
        assert_eq!(DropReason::Reasm(ReasmDrop::Duplicate).name(), "reasm_dup");
        assert_eq!(DropReason::Reasm(ReasmDrop::Flushed).to_string(), "reasm_pending_at_end");
    }

    #[test]
    fn counts_add_up() {
        let mut a = DropCounts::default();
        a.count(DropReason::NotIp);
        a.add(DropReason::Reasm(ReasmDrop::Overlap), 3);
        let mut b = a;
        b += &a;
        b.set(DropReason::NotIp, 7);
        assert_eq!(b.get(DropReason::Reasm(ReasmDrop::Overlap)), 6);
        assert_eq!(b.total(), 13);
        let v: Vec<_> = b.nonzero().collect();
        assert_eq!(v, vec![(DropReason::NotIp, 7), (DropReason::Reasm(ReasmDrop::Overlap), 6)]);
    }
}
