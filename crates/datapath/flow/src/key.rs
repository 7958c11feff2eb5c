//! The flow key and its compact internal form.

use flowsteer_wire::FlowTuple;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A flow's identity in a [`FlowTable`](crate::FlowTable): the 5-tuple as
/// seen on the wire, direction included (`reversed()` is a different key).
///
/// Protocols without ports (and non-first fragments) use port 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    /// The same flow seen from the other direction.
    pub fn reversed(&self) -> FlowKey {
        FlowKey { src: self.dst, dst: self.src, proto: self.proto, sport: self.dport, dport: self.sport }
    }

    /// The five 64-bit words the flow table stores, compares and hashes
    /// for this key (source address, destination address, then ports,
    /// protocol and address families): for another table fed the same
    /// keys (the DPDK comparison).
    pub fn packed_words(&self) -> [u64; 5] {
        Packed::new(self).0
    }
}

impl From<FlowTuple> for FlowKey {
    fn from(t: FlowTuple) -> FlowKey {
        let (sport, dport) = t.ports.unwrap_or((0, 0));
        FlowKey { src: t.src, dst: t.dst, proto: t.proto, sport, dport }
    }
}

impl From<&FlowTuple> for FlowKey {
    fn from(t: &FlowTuple) -> FlowKey {
        FlowKey::from(*t)
    }
}

/// The key as five machine words: what the table stores, compares and
/// hashes. Words 0-1: source address, 2-3: destination address (an IPv4
/// address sits in the low 32 bits of word 1 / 3), word 4: ports, protocol
/// and the two address families, so `10.0.0.1` and `::a00:1` stay distinct.
#[derive(Clone, Copy, Debug, Eq)]
pub(crate) struct Packed(pub(crate) [u64; 5]);

impl PartialEq for Packed {
    /// Branch-free compare of the five words (the derived `==` on a 40-byte
    /// array becomes a `bcmp` call on the hot path).
    #[inline]
    fn eq(&self, o: &Packed) -> bool {
        let (a, b) = (&self.0, &o.0);
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0
    }
}

impl Packed {
    /// True when both addresses are IPv4 (words 0 and 2 are then zero and
    /// the key is hashed as three words).
    #[inline]
    pub(crate) fn is_v4(&self) -> bool {
        self.0[4] & (SRC_V6 | DST_V6) == 0
    }
}

const SRC_V6: u64 = 1 << 1;
const DST_V6: u64 = 1;

fn addr_words(a: IpAddr) -> (u64, u64, bool) {
    match a {
        IpAddr::V4(v4) => (0, u64::from(u32::from(v4)), false),
        IpAddr::V6(v6) => {
            let v = u128::from(v6);
            ((v >> 64) as u64, v as u64, true)
        }
    }
}

fn words_addr(hi: u64, lo: u64, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from((u128::from(hi) << 64) | u128::from(lo)))
    } else {
        IpAddr::V4(Ipv4Addr::from(lo as u32))
    }
}

impl Packed {
    pub(crate) fn new(k: &FlowKey) -> Packed {
        let (s0, s1, s6) = addr_words(k.src);
        let (d0, d1, d6) = addr_words(k.dst);
        let meta = (u64::from(k.sport) << 48)
            | (u64::from(k.dport) << 32)
            | (u64::from(k.proto) << 16)
            | if s6 { SRC_V6 } else { 0 }
            | if d6 { DST_V6 } else { 0 };
        Packed([s0, s1, d0, d1, meta])
    }

    pub(crate) fn key(&self) -> FlowKey {
        let [s0, s1, d0, d1, meta] = self.0;
        FlowKey {
            src: words_addr(s0, s1, meta & SRC_V6 != 0),
            dst: words_addr(d0, d1, meta & DST_V6 != 0),
            proto: (meta >> 16) as u8,
            sport: (meta >> 48) as u16,
            dport: (meta >> 32) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from(v))),
        ]
    }

    proptest! {
        #[test]
        fn packed_round_trips(src in addr(), dst in addr(), proto: u8, sport: u16, dport: u16) {
            let k = FlowKey { src, dst, proto, sport, dport };
            prop_assert_eq!(Packed::new(&k).key(), k);
        }

        #[test]
        fn packed_is_injective(a in (addr(), addr(), any::<u8>(), any::<u16>(), any::<u16>()),
                               b in (addr(), addr(), any::<u8>(), any::<u16>(), any::<u16>())) {
            let ka = FlowKey { src: a.0, dst: a.1, proto: a.2, sport: a.3, dport: a.4 };
            let kb = FlowKey { src: b.0, dst: b.1, proto: b.2, sport: b.3, dport: b.4 };
            prop_assert_eq!(Packed::new(&ka) == Packed::new(&kb), ka == kb);
        }
    }

    #[test]
    fn v4_and_v4_mapped_v6_differ() {
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        let v6: IpAddr = "::a00:1".parse().unwrap();
        let a = FlowKey { src: v4, dst: v4, proto: 17, sport: 1, dport: 2 };
        let b = FlowKey { src: v6, dst: v4, ..a };
        assert_ne!(Packed::new(&a), Packed::new(&b));
    }

    #[test]
    fn from_tuple_without_ports_uses_zero() {
        let t = FlowTuple { src: "1.2.3.4".parse().unwrap(), dst: "5.6.7.8".parse().unwrap(), proto: 1, ports: None };
        let k = FlowKey::from(t);
        assert_eq!((k.sport, k.dport, k.proto), (0, 0, 1));
        let t = FlowTuple { ports: Some((10, 20)), ..t };
        let k = FlowKey::from(&t);
        assert_eq!((k.sport, k.dport), (10, 20));
        assert_eq!(k.reversed().reversed(), k);
        assert_eq!(k.reversed().sport, 20);
    }
}
