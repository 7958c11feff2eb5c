//! What a live source counted before the engine, so that conservation
//! starts at the interface and not at the socket.
//!
//! A live backend's hook (the XDP program, or the packet sockets of an
//! AF_PACKET fanout group) sees each frame once and places it:
//!
//! ```text
//! seen       = passed + hook_dropped + redirected
//! redirected = delivered + socket drops (by reason) + unread
//! delivered  = the engine's received
//! ```
//!
//! * `passed`: left to the kernel's stack (XDP_PASS); `hook_dropped`:
//!   dropped by the hook (XDP_DROP). AF_PACKET has neither: every frame its
//!   sockets see is `redirected` to them.
//! * socket drops: frames the kernel could not store in a socket
//!   ([`SocketDrops`]), and descriptors the source could not read.
//! * `unread`: in a socket's ring when the run stopped, never read.
//!
//! AF_XDP's `rx_fill_ring_empty_descs` is not in the sum: in copy mode each
//! such frame is already in `rx_dropped` (measured: 552 frames dropped on
//! an empty fill ring raise both by 552).
//!
//! The interface's own counters over the run ([`InterfaceCounts`]) are
//! reported beside the sum: a veth peer's `tx_dropped` counts the frames
//! refused before the hook (too long for the MTU), so that for a veth
//! `frames sent by the peer = seen + peer tx_dropped`; the interface's
//! `rx_dropped` mixes drops before and after the hook.
//!
//! The numbers are plain: the io crate reads them from the kernel; this
//! module only sums and checks them.

use serde::Serialize;
use std::ops::AddAssign;

/// Frames a socket's kernel side could not store, by reason (fixed slots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SocketDrops {
    /// AF_XDP `rx_dropped`: longer than a UMEM frame, or no free frame (the
    /// fill ring was empty; see [`Ingress::fill_ring_empty`]).
    pub rx_dropped: u64,
    /// The socket's ring had no room: AF_XDP `rx_ring_full`, AF_PACKET
    /// `tp_drops` (PACKET_STATISTICS).
    pub ring_full: u64,
    /// Descriptors the source could not read (outside its memory); never
    /// expected from a sane kernel.
    pub bad_descriptor: u64,
}

impl SocketDrops {
    pub fn total(&self) -> u64 {
        self.rx_dropped + self.ring_full + self.bad_descriptor
    }
}

/// The interface's own counters over the run (deltas from the source's
/// open to its close). They count frames the hook never saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InterfaceCounts {
    /// `rx_packets` of the interface.
    pub rx_packets: u64,
    /// `rx_dropped` of the interface: frames the driver or the kernel
    /// dropped before the hook (a frame too long for the MTU, a full
    /// backlog), but also after it: generic (skb) XDP counts here the
    /// frames a socket could not take (already in the socket drops), and
    /// the stack the passed frames no protocol took. Beside the sum only.
    pub rx_dropped: u64,
    /// A veth's peer: frames it could not hand to this interface (too
    /// long for this MTU, this end down, a full backlog), its
    /// `tx_dropped`: dropped before the hook. This interface counts them
    /// again in `rx_dropped`. `None` when the interface is not a veth or
    /// its peer cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_tx_dropped: Option<u64>,
}

/// What a live source counted before the engine. Sources add theirs up:
/// counts a backend keeps per interface (the XDP program's, the
/// interface's) come from one source only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ingress {
    /// Frames the hook saw.
    pub seen: u64,
    /// Left to the kernel's stack (XDP_PASS).
    pub passed: u64,
    /// Dropped by the hook (XDP_DROP).
    pub hook_dropped: u64,
    /// Sent on to the sockets (XDP_REDIRECT; AF_PACKET: everything seen).
    pub redirected: u64,
    /// Handed to the engine.
    pub delivered: u64,
    /// Dropped between the hook and the engine, by reason.
    pub socket_drops: SocketDrops,
    /// In a socket's ring when the run stopped, never read.
    pub unread: u64,
    /// AF_XDP `rx_fill_ring_empty_descs`: times the kernel found no free
    /// frame. In copy mode each is a frame also counted in `rx_dropped`;
    /// reported beside the sum, not in it.
    pub fill_ring_empty: u64,
    /// The interface's own counters, beside the sum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<InterfaceCounts>,
}

impl Ingress {
    /// Both identities hold and the engine received exactly what was
    /// delivered to it.
    pub fn adds_up(&self, engine_received: u64) -> bool {
        self.seen == self.passed + self.hook_dropped + self.redirected
            && self.redirected == self.delivered + self.socket_drops.total() + self.unread
            && self.delivered == engine_received
    }

    /// The sum in words, with its numbers.
    pub fn statement(&self) -> String {
        let d = &self.socket_drops;
        format!(
            "seen {} = passed {} + hook dropped {} + redirected {}; redirected {} = delivered {} + socket drops {} \
             (rx_dropped {}, ring_full {}, bad_descriptor {}) + unread {}",
            self.seen,
            self.passed,
            self.hook_dropped,
            self.redirected,
            self.redirected,
            self.delivered,
            d.total(),
            d.rx_dropped,
            d.ring_full,
            d.bad_descriptor,
            self.unread
        )
    }
}

impl AddAssign<&Ingress> for Ingress {
    fn add_assign(&mut self, o: &Ingress) {
        self.seen += o.seen;
        self.passed += o.passed;
        self.hook_dropped += o.hook_dropped;
        self.redirected += o.redirected;
        self.delivered += o.delivered;
        self.socket_drops.rx_dropped += o.socket_drops.rx_dropped;
        self.socket_drops.ring_full += o.socket_drops.ring_full;
        self.socket_drops.bad_descriptor += o.socket_drops.bad_descriptor;
        self.unread += o.unread;
        self.fill_ring_empty += o.fill_ring_empty;
        self.interface = match (self.interface, o.interface) {
            (Some(a), Some(b)) => Some(InterfaceCounts {
                rx_packets: a.rx_packets + b.rx_packets,
                rx_dropped: a.rx_dropped + b.rx_dropped,
                peer_tx_dropped: match (a.peer_tx_dropped, b.peer_tx_dropped) {
                    (Some(x), Some(y)) => Some(x + y),
                    (x, y) => x.or(y),
                },
            }),
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xdp_like() -> Ingress {
        Ingress {
            seen: 100,
            passed: 7,
            hook_dropped: 1,
            redirected: 92,
            delivered: 80,
            socket_drops: SocketDrops { rx_dropped: 5, ring_full: 4, bad_descriptor: 0 },
            unread: 3,
            fill_ring_empty: 5,
            interface: None,
        }
    }

    #[test]
    fn every_frame_placed_adds_up() {
        let i = xdp_like();
        assert!(i.adds_up(80));
        assert!(!i.adds_up(81), "the engine received a frame nobody delivered");
        assert!(i.statement().starts_with("seen 100 = passed 7 + hook dropped 1 + redirected 92"));
    }

    #[test]
    fn a_frame_that_cannot_be_placed_breaks_the_sum() {
        let mut i = xdp_like();
        i.seen += 1;
        assert!(!i.adds_up(80));
        let mut i = xdp_like();
        i.unread -= 1;
        assert!(!i.adds_up(80));
    }

    #[test]
    fn sources_add_up_per_interface_counts_once() {
        let mut a = xdp_like();
        a.interface = Some(InterfaceCounts { rx_packets: 10, rx_dropped: 1, peer_tx_dropped: Some(2) });
        let b = Ingress { redirected: 5, delivered: 5, ..Ingress::default() };
        a += &b;
        assert_eq!((a.seen, a.redirected, a.delivered), (100, 97, 85));
        assert_eq!(a.interface.unwrap().peer_tx_dropped, Some(2));
        assert!(!a.adds_up(85), "b's redirected frames were never seen by a hook");
    }
}
