//! SipHash-1-3 over the five words of a packed key, with the table's
//! secret 128-bit key.
//!
//! This is the same function as std's `RandomState` hasher (SipHash-1-3),
//! written out because std does not let us choose the key, and the
//! simulation needs a deterministic one ([`FlowTable::with_seed`](crate::FlowTable::with_seed)).
//! The message is always 40 bytes (five little-endian words), so there is
//! no tail handling. Cross-checked against the byte-oriented definition and,
//! for the round function, against std's SipHash-2-4 in the tests below.

use std::hash::{BuildHasher, RandomState};

#[derive(Clone, Copy, Debug)]
pub(crate) struct SipKey(pub(crate) u64, pub(crate) u64);

impl SipKey {
    /// A fresh secret key. `RandomState::new()` is seeded from the operating
    /// system's random source (once per thread, then varied per call), and
    /// its outputs under that secret key are unpredictable, so hashing two
    /// constants gives a 128-bit key an attacker cannot learn.
    pub(crate) fn random() -> SipKey {
        let s = RandomState::new();
        SipKey(s.hash_one(0x5eed_0000_u64), s.hash_one(0x5eed_0001_u64))
    }
}

struct State([u64; 4]);

impl State {
    fn new(k: SipKey) -> State {
        State([
            k.0 ^ 0x736f_6d65_7073_6575,
            k.1 ^ 0x646f_7261_6e64_6f6d,
            k.0 ^ 0x6c79_6765_6e65_7261,
            k.1 ^ 0x7465_6462_7974_6573,
        ])
    }

    #[inline(always)]
    fn round(&mut self) {
        let [v0, v1, v2, v3] = &mut self.0;
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13);
        *v1 ^= *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16);
        *v3 ^= *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21);
        *v3 ^= *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17);
        *v1 ^= *v2;
        *v2 = v2.rotate_left(32);
    }

    #[inline(always)]
    fn block(&mut self, m: u64, c: usize) {
        self.0[3] ^= m;
        for _ in 0..c {
            self.round();
        }
        self.0[0] ^= m;
    }

    #[inline(always)]
    fn finish(mut self, d: usize) -> u64 {
        self.0[2] ^= 0xff;
        for _ in 0..d {
            self.round();
        }
        self.0[0] ^ self.0[1] ^ self.0[2] ^ self.0[3]
    }
}

/// SipHash-1-3 of the 24-byte message `w[0] ‖ w[1] ‖ w[2]` (little endian):
/// an IPv4 key without its two all-zero address-high words. The length
/// byte (24 vs 40) keeps the two shapes in separate domains.
#[inline]
pub(crate) fn hash_words3(k: SipKey, words: [u64; 3]) -> u64 {
    let mut s = State::new(k);
    for w in words {
        s.block(w, 1);
    }
    s.block(24u64 << 56, 1);
    s.finish(3)
}

/// SipHash-1-3 of the 40-byte message `words[0].to_le_bytes() ‖ ... ‖ words[4].to_le_bytes()`.
#[inline]
pub(crate) fn hash_words(k: SipKey, words: &[u64; 5]) -> u64 {
    let mut s = State::new(k);
    for &w in words {
        s.block(w, 1);
    }
    s.block(40u64 << 56, 1);
    s.finish(3)
}

/// SipHash-c-d of arbitrary bytes: the textbook definition, for tests.
#[cfg(test)]
pub(crate) fn hash_bytes(k: SipKey, msg: &[u8], c: usize, d: usize) -> u64 {
    let mut s = State::new(k);
    let mut chunks = msg.chunks_exact(8);
    for ch in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(ch);
        s.block(u64::from_le_bytes(b), c);
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = msg.len() as u8;
    s.block(u64::from_le_bytes(last), c);
    s.finish(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hash::Hasher;

    /// Test vector from the SipHash paper (Aumasson & Bernstein 2012,
    /// appendix A): key 00..0f, message 00..0e, SipHash-2-4 = a129ca6149be45e5.
    #[test]
    fn siphash24_paper_vector() {
        let k = SipKey(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(hash_bytes(k, &msg, 2, 4), 0xa129_ca61_49be_45e5);
    }

    proptest! {
        /// The round function and padding agree with std's SipHash-2-4.
        #[test]
        fn siphash24_matches_std(k0: u64, k1: u64, msg in proptest::collection::vec(any::<u8>(), 0..64)) {
            #[allow(deprecated)]
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            h.write(&msg);
            prop_assert_eq!(hash_bytes(SipKey(k0, k1), &msg, 2, 4), h.finish());
        }

        /// The word-oriented fast path is SipHash-1-3 of the 40 bytes.
        #[test]
        fn words_match_bytes(k0: u64, k1: u64, w: [u64; 5]) {
            let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(hash_words(SipKey(k0, k1), &w), hash_bytes(SipKey(k0, k1), &bytes, 1, 3));
        }
    }

    #[test]
    fn random_keys_differ() {
        let a = SipKey::random();
        let b = SipKey::random();
        assert!((a.0, a.1) != (b.0, b.1));
    }
}
