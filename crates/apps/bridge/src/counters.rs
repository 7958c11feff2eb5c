//! The runtime's counters: one block per worker, and one per (port,
//! worker), each on its own cache lines and written by one thread only
//! (relaxed load + store, no read-modify-write); readers sum the blocks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a frame is dropped (received but not forwarded nor flooded), or
/// why a frame could not be sent out of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Destination is an 802.1D reserved group address (01:80:c2:00:00:0x).
    Reserved,
    /// Destination learned on the ingress port.
    SamePort,
    /// VLAN filtering: the ingress or egress port does not admit the VLAN.
    Vlan,
    /// Longer than the egress port's MTU + 18 (Ethernet + one tag).
    TooBig,
    /// Shorter than an Ethernet header.
    Malformed,
    /// Dropped before our socket: the kernel's socket/ring drops, and the
    /// XDP program's (a claimed frame longer than a socket frame).
    Kernel,
    /// The transmit path refused the frame (ring full, send error).
    TxFailed,
    /// The destination's port is not (or no longer) a member.
    NoPort,
    /// The frame was cut short by the receive ring (longer than a ring
    /// block holds): never sent on truncated.
    Truncated,
    /// The frame carries offload state (a partial checksum, a GSO
    /// super-frame) that the egress path cannot complete: an unknown GSO
    /// type, or headers that do not parse as the state says. Never sent
    /// with a checksum that cannot verify.
    Offload,
    /// The source address is a group (multicast, broadcast) or all-zero
    /// address, which no station has: every host and Linux's bridge drop it.
    BadSrc,
    /// The ingress port is not forwarding (its state is disabled,
    /// blocking, listening or learning, or its link is down), or the
    /// known destination's port is not.
    PortState,
    /// An isolated port's frame to another isolated port.
    Isolated,
}

impl Reason {
    /// Every reason, in slot order.
    pub const ALL: [Reason; 13] = [
        Reason::Reserved,
        Reason::SamePort,
        Reason::Vlan,
        Reason::TooBig,
        Reason::Malformed,
        Reason::Kernel,
        Reason::TxFailed,
        Reason::NoPort,
        Reason::Truncated,
        Reason::Offload,
        Reason::BadSrc,
        Reason::PortState,
        Reason::Isolated,
    ];
    /// Number of slots.
    pub const COUNT: usize = Self::ALL.len();

    /// The name in [`crate::api::PortStats::dropped`].
    pub fn name(self) -> &'static str {
        match self {
            Reason::Reserved => "reserved",
            Reason::SamePort => "same_port",
            Reason::Vlan => "vlan",
            Reason::TooBig => "too_big",
            Reason::Malformed => "malformed",
            Reason::Kernel => "kernel",
            Reason::TxFailed => "tx_failed",
            Reason::NoPort => "no_port",
            Reason::Truncated => "truncated",
            Reason::Offload => "offload",
            Reason::BadSrc => "bad_src",
            Reason::PortState => "port_state",
            Reason::Isolated => "isolated",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// A counter with one writing thread: `add` is a relaxed load and store.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (only the owning thread calls this).
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    /// Replaces the value (a total read elsewhere, e.g. the kernel's).
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    /// The value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counts by [`Reason`].
#[derive(Debug, Default)]
pub struct ByReason([Counter; Reason::COUNT]);

impl ByReason {
    /// One more for `r`.
    #[inline]
    pub fn add(&self, r: Reason, n: u64) {
        self.0[r.slot()].add(n);
    }
    /// Replaces the count of `r`.
    pub fn set(&self, r: Reason, v: u64) {
        self.0[r.slot()].set(v);
    }
    /// The count of `r`.
    pub fn get(&self, r: Reason) -> u64 {
        self.0[r.slot()].get()
    }
    /// Every count.
    pub fn values(&self) -> [u64; Reason::COUNT] {
        std::array::from_fn(|i| self.0[i].get())
    }
}

/// Sums by reason into the JSON form (only non-zero reasons appear).
pub fn reason_map(v: &[u64; Reason::COUNT]) -> BTreeMap<String, u64> {
    Reason::ALL.iter().zip(v).filter(|(_, n)| **n > 0).map(|(r, n)| (r.name().to_string(), *n)).collect()
}

/// One worker's counters (on cache lines of its own).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerCounters {
    /// Frames taken in (kernel drops of the worker's sockets included).
    pub received: Counter,
    /// ... sent to one port.
    pub forwarded: Counter,
    /// ... flooded.
    pub flooded: Counter,
    /// ... dropped, by reason.
    pub dropped: ByReason,
    /// Frames at or below the copy threshold.
    pub rx_copied: Counter,
    /// Frames sent through an AF_PACKET socket because the worker has no
    /// AF_XDP queue on the egress port.
    pub tx_fallback: Counter,
    /// Frames whose partial TCP/UDP checksum (left to offload by a local
    /// sender) the worker completed in software.
    pub csum_completed: Counter,
    /// GSO super-frames the worker cut into segments in software (for an
    /// egress that cannot take them whole).
    pub gso_segmented: Counter,
    /// Learning events its full queue to the writer dropped (the FDB
    /// handle's count, copied now and then).
    pub events_dropped: Counter,
    /// Learning events not posted because its per-second filter was full
    /// (the FDB handle's count, copied now and then).
    pub events_suppressed: Counter,
}

/// One port's counters as one worker sees them (on cache lines of its own).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct PortCounters {
    /// Frames in from this port through this worker's queues.
    pub received: Counter,
    /// ... forwarded.
    pub forwarded: Counter,
    /// ... flooded.
    pub flooded: Counter,
    /// ... dropped, by reason (`kernel`: a total replaced, see `kernel`).
    pub dropped: ByReason,
    /// Frames this worker sent out of this port.
    pub transmitted: Counter,
    /// Frames this worker could not send out of this port, by reason.
    pub tx_dropped: ByReason,
    /// Frames shorter than the Ethernet minimum that this worker padded
    /// with zeros to 60 bytes and handed to this port's socket (beside the
    /// sums: one the socket then refused is in `tx_dropped` too).
    pub tx_padded: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_have_slots_and_names() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(r.slot(), i);
        }
        let b = ByReason::default();
        b.add(Reason::Vlan, 2);
        b.add(Reason::Vlan, 1);
        b.set(Reason::Kernel, 7);
        let m = reason_map(&b.values());
        assert_eq!(m.get("vlan"), Some(&3));
        assert_eq!(m.get("kernel"), Some(&7));
        assert_eq!(m.len(), 2);
        assert_eq!(std::mem::align_of::<WorkerCounters>(), 128);
    }
}
