//! The table's key and value: a MAC address in a VLAN, and where it was seen.

use std::fmt;

/// An Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// True for group addresses (the I/G bit, bit 0 of the first octet):
    /// multicast and broadcast.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(self) -> bool {
        self == Self::BROADCAST
    }

    /// True for 00:00:00:00:00:00.
    pub fn is_zero(self) -> bool {
        self.0 == [0; 6]
    }

    /// True when a frame from this source may be learned: a unicast address
    /// other than all zeros (Linux's `is_valid_ether_addr`).
    pub fn is_learnable_source(self) -> bool {
        !self.is_multicast() && !self.is_zero()
    }
}

/// True for the IEEE 802.1D reserved group addresses 01:80:c2:00:00:00 to
/// 01:80:c2:00:00:0f (STP BPDUs, pause frames, LACP, 802.1X, LLDP, ...): a
/// bridge never forwards them and never holds them as destinations.
pub fn is_reserved(mac: Mac) -> bool {
    let m = mac.0;
    m[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && m[5] <= 0x0f
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A VLAN id (0 for untagged frames on a bridge without VLAN filtering).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Debug)]
pub struct VlanId(pub u16);

/// A member port of the bridge, by index.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Debug)]
pub struct PortId(pub u16);

/// What the table is keyed by: the MAC address in its VLAN (the same MAC in
/// two VLANs is two entries).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Debug)]
pub struct FdbKey {
    /// The station's address.
    pub mac: Mac,
    /// The VLAN it was seen in.
    pub vlan: VlanId,
}

impl FdbKey {
    /// The key of `mac` in `vlan`.
    pub fn new(mac: Mac, vlan: VlanId) -> Self {
        Self { mac, vlan }
    }
}

/// How an entry came to be, and so what may change it (the kinds of
/// Linux's `bridge fdb`: a learned entry, `static`, `sticky`,
/// `extern_learn`).
///
/// | kind | made by | ages | moves with its station | counts against |
/// |---|---|---|---|---|
/// | `Learned` | traffic | yes | yes | the learned limits |
/// | `Static` | the operator | no | no | `max_static` |
/// | `Sticky` | the operator | yes (traffic from its port refreshes it) | no | `max_static` |
/// | `External` | a controller | yes (traffic from its port refreshes it) | no, and learning never overwrites it | `max_static` |
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum EntryKind {
    /// Learned from a frame's source address.
    #[default]
    Learned,
    /// Configured: never ages, never moves.
    Static,
    /// Configured: ages like a learned entry, never moves.
    Sticky,
    /// Added by a controller (`extern_learn`): ages, never moves.
    External,
}

impl EntryKind {
    /// Removed by aging when idle for the ageing time.
    pub fn ages(self) -> bool {
        self != EntryKind::Static
    }

    /// Follows its station to another port when learning sees it there.
    pub fn moves(self) -> bool {
        self == EntryKind::Learned
    }

    /// Added by the operator or a controller (not learned from traffic).
    pub fn is_configured(self) -> bool {
        self != EntryKind::Learned
    }

    /// The word `fdb show` prints for it (`None` for a learned entry), as
    /// iproute2's `bridge fdb show` does.
    pub fn word(self) -> Option<&'static str> {
        match self {
            EntryKind::Learned => None,
            EntryKind::Static => Some("static"),
            EntryKind::Sticky => Some("sticky"),
            EntryKind::External => Some("extern_learn"),
        }
    }
}

/// One entry: where the station is and when it was last heard from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Entry {
    /// The port the station is reached through.
    pub port: PortId,
    /// How it came to be (see [`EntryKind`]).
    pub kind: EntryKind,
    /// The second (on the caller's clock) the station was last seen as a
    /// source; for a configured entry, the second it was added until
    /// traffic refreshes it.
    pub last_seen_s: u64,
}

impl Entry {
    /// A static entry (configured, never aged, never moved).
    pub fn is_static(&self) -> bool {
        self.kind == EntryKind::Static
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_range_is_exactly_00_to_0f() {
        for last in 0..=0x0f {
            assert!(is_reserved(Mac([0x01, 0x80, 0xc2, 0, 0, last])), "{last:#x}");
        }
        assert!(!is_reserved(Mac([0x01, 0x80, 0xc2, 0, 0, 0x10])));
        assert!(!is_reserved(Mac([0x01, 0x80, 0xc2, 0, 1, 0x00])));
        assert!(!is_reserved(Mac([0x03, 0x80, 0xc2, 0, 0, 0x00])));
        assert!(!is_reserved(Mac::BROADCAST));
    }

    #[test]
    fn learnable_sources_are_unicast_and_not_zero() {
        assert!(Mac([0x02, 0, 0, 0, 0, 1]).is_learnable_source());
        assert!(!Mac([0x01, 0, 0x5e, 0, 0, 1]).is_learnable_source());
        assert!(!Mac::BROADCAST.is_learnable_source());
        assert!(!Mac([0; 6]).is_learnable_source());
        assert_eq!(Mac([0x02, 0xab, 0, 0, 0, 0x0f]).to_string(), "02:ab:00:00:00:0f");
    }
}
