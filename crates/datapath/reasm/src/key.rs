//! The reassembly key ([`Key`]) and its address family: packing,
//! comparison, the keyed SipHash of the keyed table and the unkeyed index of
//! the front table (crate docs, "Table").

use flowsteer_prim::siphash;

/// Address family of a queue; also selects its age list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Family {
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
pub(crate) struct Key {
    pub(crate) addrs: [u64; 4],
    pub(crate) meta: u64,
}

pub(crate) const META_V6: u64 = 1 << 40;

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
    pub(crate) fn eq_as(&self, o: &Key, v6: bool) -> bool {
        let [a0, a1, a2, a3] = self.addrs;
        let [o0, o1, o2, o3] = o.addrs;
        self.meta == o.meta && a0 == o0 && (!v6 || ((a1 ^ o1) | (a2 ^ o2) | (a3 ^ o3)) == 0)
    }

    #[inline(always)]
    pub(crate) fn v4(src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr, id: u32, proto: u8) -> Key {
        let (s, d) = (u32::from_ne_bytes(src.octets()), u32::from_ne_bytes(dst.octets()));
        Key { addrs: [u64::from(s) | (u64::from(d) << 32), 0, 0, 0], meta: u64::from(id) | (u64::from(proto) << 32) }
    }

    #[inline(always)]
    pub(crate) fn v6(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, id: u32) -> Key {
        let (s, d) = (u128::from_ne_bytes(src.octets()), u128::from_ne_bytes(dst.octets()));
        Key { addrs: [s as u64, (s >> 64) as u64, d as u64, (d >> 64) as u64], meta: u64::from(id) | META_V6 }
    }

    #[inline(always)]
    pub(crate) fn family(&self) -> Family {
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
    pub(crate) fn hash(&self, k: (u64, u64)) -> u64 {
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
    pub(crate) fn front_index(&self, shift: u32) -> usize {
        self.front_index_as(shift, self.meta & META_V6 != 0)
    }

    /// [`Key::front_index`] for a key of the family `v6` (known to the
    /// caller).
    #[inline(always)]
    pub(crate) fn front_index_as(&self, shift: u32, v6: bool) -> usize {
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
    pub(crate) fn v4_src(&self) -> u32 {
        let [addrs, ..] = self.addrs;
        addrs as u32
    }
}
