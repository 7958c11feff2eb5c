//! A fast, non-cryptographic hasher for the flow and fragment tables.
//!
//! The mixing step is rustc's FxHash (`(h + word) * K`, one multiply per
//! word); `finish` adds a murmur3 `fmix64` finaliser so that the low bits
//! `HashMap` indexes with depend on every input bit (plain FxHash leaves the
//! low bits a function of the low input bits only, which clusters IPv4
//! addresses that differ in their first octets).
//!
//! Not DoS-resistant: whoever writes the input can pick tuples that collide.
//! That is acceptable for offline analysis of a capture the user chose to
//! analyse; a table fed from the network must use a keyed hasher instead.
//! Hashing a flow key is five multiply steps and the finaliser, a few ns;
//! what the flow table costs is its cache misses (see `flows::FlowTable`).

use std::hash::{BuildHasher, Hasher};

/// rustc-hash 2.x multiplier (an odd constant with well spread bits).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// FxHash-style hasher with an fmix64 finaliser. See the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = self.hash.wrapping_add(word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// `BuildHasher` for [`FxHasher`]; unseeded, so table iteration order (and
/// with it every report) is deterministic.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxBuildHasher;

impl BuildHasher for FxBuildHasher {
    type Hasher = FxHasher;

    #[inline]
    fn build_hasher(&self) -> FxHasher {
        FxHasher::default()
    }
}

/// A `HashMap` with [`FxBuildHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn deterministic_and_input_sensitive() {
        let b = FxBuildHasher;
        assert_eq!(b.hash_one(("10.0.0.1", 7u16)), b.hash_one(("10.0.0.1", 7u16)));
        assert_ne!(b.hash_one(1u32), b.hash_one(2u32));
        // Byte strings of different lengths that pad to the same word differ.
        assert_ne!(b.hash_one([0u8; 3].as_slice()), b.hash_one([0u8; 4].as_slice()));
    }

    #[test]
    fn low_bits_spread_for_addresses_differing_in_the_high_octet() {
        let b = FxBuildHasher;
        let low: HashSet<u64> = (0u32..256).map(|i| b.hash_one(i << 24) & 0xff).collect();
        // 256 inputs into 256 buckets: a good hash fills about 162 of them.
        assert!(low.len() > 120, "{}", low.len());
    }
}
