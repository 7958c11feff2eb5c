//! The published table (one of `left-right`'s two copies), the operations
//! the writer logs to it, and the forwarding decision readers make with it.

use crate::key::{is_reserved, Entry, FdbKey, Mac, PortId, VlanId};
use std::collections::HashMap;

/// A readable copy of the table. Readers see it through a
/// [`FdbGuard`](crate::FdbGuard); the writer keeps its own authoritative
/// map and logs [`Op`]s that `left-right` applies to both copies.
///
/// The hasher is std's `RandomState` (SipHash-1-3 with a random key per
/// table): source addresses come from the wire, and a keyed hash keeps a
/// MAC flood from choosing colliding keys.
#[derive(Clone, Debug, Default)]
pub struct Table {
    map: HashMap<FdbKey, Entry>,
    /// Removals applied to this copy (both copies absorb the same ops, so
    /// they agree once published): a worker that sees it change knows an
    /// entry it posted may be gone.
    removals: u64,
}

impl Table {
    /// An empty table with room for `capacity` entries.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self { map: HashMap::with_capacity(capacity), removals: 0 }
    }

    /// The entry of `mac` in `vlan`, if any.
    #[inline]
    pub fn lookup(&self, mac: Mac, vlan: VlanId) -> Option<Entry> {
        self.map.get(&FdbKey::new(mac, vlan)).copied()
    }

    /// Removals this copy has absorbed since the table was made.
    #[inline]
    pub fn removals(&self) -> u64 {
        self.removals
    }

    /// Entries in this copy.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when this copy holds no entry.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every entry of this copy, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&FdbKey, &Entry)> {
        self.map.iter()
    }

    /// The forwarding decision for a frame to `dst` in `vlan` that came in
    /// on `ingress`:
    ///
    /// * a reserved 802.1D group address: `Drop(Reserved)`;
    /// * broadcast or multicast: `Flood`;
    /// * a known unicast destination on another port: `Unicast(port)`;
    /// * a known destination on the ingress port: `Drop(SamePort)` (never
    ///   sent back out of the port it came in on);
    /// * an unknown unicast destination: `Flood`.
    ///
    /// A full table changes nothing here: unknown destinations flood, known
    /// ones keep forwarding.
    #[inline]
    pub fn decide(&self, ingress: PortId, dst: Mac, vlan: VlanId) -> Decision {
        if dst.is_multicast() {
            if is_reserved(dst) {
                return Decision::Drop(DropReason::Reserved);
            }
            return Decision::Flood;
        }
        match self.lookup(dst, vlan) {
            Some(e) if e.port == ingress => Decision::Drop(DropReason::SamePort),
            Some(e) => Decision::Unicast(e.port),
            None => Decision::Flood,
        }
    }
}

/// What to do with a frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// Send it out of this one port (never the ingress port).
    Unicast(PortId),
    /// Send it out of every member port but the ingress port (unknown
    /// unicast, broadcast, multicast).
    Flood,
    /// Drop it, for this reason.
    Drop(DropReason),
}

/// Why a frame is dropped by the forwarding decision.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DropReason {
    /// The destination is an 802.1D reserved group address
    /// (01:80:c2:00:00:00-0f), which a bridge does not forward.
    Reserved,
    /// The destination is learned on the port the frame came in on.
    SamePort,
}

/// One change the writer logs; `left-right` applies it to each copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace the entry of a key.
    Set(FdbKey, Entry),
    /// Remove the entry of a key (absent: nothing).
    Remove(FdbKey),
}

impl left_right::Absorb<Op> for Table {
    fn absorb_first(&mut self, op: &mut Op, _other: &Self) {
        match *op {
            Op::Set(k, e) => {
                self.map.insert(k, e);
            }
            Op::Remove(k) => {
                self.map.remove(&k);
                self.removals += 1;
            }
        }
    }

    fn sync_with(&mut self, first: &Self) {
        self.map.clone_from(&first.map);
        self.removals = first.removals;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(last: u8) -> Mac {
        Mac([0x02, 0, 0, 0, 0, last])
    }

    #[test]
    fn decide_covers_every_case() {
        let mut t = Table::default();
        let v = VlanId(0);
        t.map
            .insert(FdbKey::new(mac(1), v), Entry { port: PortId(1), kind: crate::EntryKind::Learned, last_seen_s: 0 });
        assert_eq!(t.decide(PortId(0), mac(1), v), Decision::Unicast(PortId(1)));
        assert_eq!(t.decide(PortId(1), mac(1), v), Decision::Drop(DropReason::SamePort));
        assert_eq!(t.decide(PortId(0), mac(2), v), Decision::Flood, "unknown unicast");
        assert_eq!(t.decide(PortId(0), mac(1), VlanId(7)), Decision::Flood, "other VLAN");
        assert_eq!(t.decide(PortId(0), Mac::BROADCAST, v), Decision::Flood);
        assert_eq!(t.decide(PortId(0), Mac([0x01, 0, 0x5e, 0, 0, 1]), v), Decision::Flood);
        assert_eq!(t.decide(PortId(0), Mac([0x01, 0x80, 0xc2, 0, 0, 0x0e]), v), Decision::Drop(DropReason::Reserved));
        assert_eq!(t.decide(PortId(0), Mac([0x01, 0x80, 0xc2, 0, 0, 0x10]), v), Decision::Flood);
    }
}
