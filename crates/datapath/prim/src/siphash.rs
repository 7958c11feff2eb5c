//! Keyed SipHash (Aumasson & Bernstein, "SipHash: a fast short-input PRF",
//! INDOCRYPT 2012), for the tables that traffic from the network fills.
//!
//! A table indexed by an unkeyed or public hash (the RSS Toeplitz hash is
//! both, and linear) lets a sender choose keys that all land in one bucket
//! (Crosby & Wallach, "Denial of service via algorithmic complexity
//! attacks", 2003). Keyed with a secret random 128-bit [`SipKey`], SipHash
//! is a PRF: without the key, bucket collisions cannot be planned.
//!
//! SipHash-1-3 (one compression round per word, three finalisation rounds)
//! is the variant the tables use, as std's `HashMap` does for the same
//! argument: the key is secret and random and the output never leaves the
//! process, so the attacker cannot run the offline cryptanalysis that
//! SipHash-2-4's margin is for.
//!
//! One shape of input, [`sip13`]: a message whose length is known up front,
//! given as little-endian 64-bit words and a tail. No buffering, no
//! branches on the length: the per-packet paths (flow table, reassembly
//! table) use it. The tests check it against the textbook byte-wise
//! definition, which they also check (with SipHash-2-4's rounds) against the
//! reference vectors and std's deprecated `SipHasher`.

use std::hash::BuildHasher;

/// A 128-bit SipHash key, `(k0, k1)`: the key's bytes 0..8 and 8..16 read
/// as little-endian words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipKey(pub u64, pub u64);

impl SipKey {
    /// A fresh secret key from the operating system's random source
    /// (`getrandom`). If the OS has none, from std's `RandomState` (seeded
    /// from the OS once per thread, then varied per call; its outputs
    /// under that secret key are unpredictable, so hashing two constants
    /// still gives a key an attacker cannot learn).
    pub fn random() -> SipKey {
        let mut buf = [0u8; 16];
        if getrandom::getrandom(&mut buf).is_ok() {
            let (a, b) = buf.split_at(8);
            let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
            SipKey(word(a), word(b))
        } else {
            let s = std::hash::RandomState::new();
            SipKey(s.hash_one(0x5eed_0000_u64), s.hash_one(0x5eed_0001_u64))
        }
    }
}

/// The four state words.
#[derive(Clone, Copy, Debug)]
struct State([u64; 4]);

impl State {
    #[inline(always)]
    fn new(k0: u64, k1: u64) -> State {
        State([
            k0 ^ 0x736f_6d65_7073_6575,
            k1 ^ 0x646f_7261_6e64_6f6d,
            k0 ^ 0x6c79_6765_6e65_7261,
            k1 ^ 0x7465_6462_7974_6573,
        ])
    }

    /// SipRound.
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

    /// Absorbs one message word with `c` rounds.
    #[inline(always)]
    fn compress(&mut self, m: u64, c: usize) {
        self.0[3] ^= m;
        for _ in 0..c {
            self.round();
        }
        self.0[0] ^= m;
    }

    /// Finalisation with `d` rounds.
    #[inline(always)]
    fn finish(mut self, d: usize) -> u64 {
        self.0[2] ^= 0xff;
        for _ in 0..d {
            self.round();
        }
        self.0[0] ^ self.0[1] ^ self.0[2] ^ self.0[3]
    }
}

/// The last block: the length's low byte on top of the tail bytes.
#[inline(always)]
fn last_block(tail: u64, len: u64) -> u64 {
    ((len & 0xff) << 56) | tail
}

/// SipHash-1-3 of the `len`-byte message whose little-endian 64-bit words
/// are `words` followed by `tail` (the last `len % 8` bytes, zero above;
/// the caller keeps `words.len() == len / 8`). Equal to feeding those bytes
/// to SipHash-1-3 (the tests check it against the textbook definition).
/// The per-packet tables call it with a fixed `len`, so after inlining the
/// word loop is unrolled and the length folds away (hence `always`: left
/// to itself the compiler keeps one out-of-line copy for every caller,
/// measured at 21 more instructions per packet through the flow table).
#[inline(always)]
pub fn sip13(k0: u64, k1: u64, words: &[u64], tail: u64, len: u64) -> u64 {
    let mut s = State::new(k0, k1);
    for &w in words {
        s.compress(w, 1);
    }
    s.compress(last_block(tail, len), 1);
    s.finish(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hash::Hasher;

    /// The reference key 00 01 .. 0f.
    const K: SipKey = SipKey(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);

    /// SipHash-2-4 of the messages 00, 00 01, .. (lengths 0..64) under
    /// [`K`]: the reference implementation's `vectors.h`, as `u64`s.
    const VECTORS_24: [u64; 64] = [
        0x726fdb47dd0e0e31,
        0x74f839c593dc67fd,
        0x0d6c8009d9a94f5a,
        0x85676696d7fb7e2d,
        0xcf2794e0277187b7,
        0x18765564cd99a68d,
        0xcbc9466e58fee3ce,
        0xab0200f58b01d137,
        0x93f5f5799a932462,
        0x9e0082df0ba9e4b0,
        0x7a5dbbc594ddb9f3,
        0xf4b32f46226bada7,
        0x751e8fbc860ee5fb,
        0x14ea5627c0843d90,
        0xf723ca908e7af2ee,
        0xa129ca6149be45e5,
        0x3f2acc7f57c29bdb,
        0x699ae9f52cbe4794,
        0x4bc1b3f0968dd39c,
        0xbb6dc91da77961bd,
        0xbed65cf21aa2ee98,
        0xd0f2cbb02e3b67c7,
        0x93536795e3a33e88,
        0xa80c038ccd5ccec8,
        0xb8ad50c6f649af94,
        0xbce192de8a85b8ea,
        0x17d835b85bbb15f3,
        0x2f2e6163076bcfad,
        0xde4daaaca71dc9a5,
        0xa6a2506687956571,
        0xad87a3535c49ef28,
        0x32d892fad841c342,
        0x7127512f72f27cce,
        0xa7f32346f95978e3,
        0x12e0b01abb051238,
        0x15e034d40fa197ae,
        0x314dffbe0815a3b4,
        0x027990f029623981,
        0xcadcd4e59ef40c4d,
        0x9abfd8766a33735c,
        0x0e3ea96b5304a7d0,
        0xad0c42d6fc585992,
        0x187306c89bc215a9,
        0xd4a60abcf3792b95,
        0xf935451de4f21df2,
        0xa9538f0419755787,
        0xdb9acddff56ca510,
        0xd06c98cd5c0975eb,
        0xe612a3cb9ecba951,
        0xc766e62cfcadaf96,
        0xee64435a9752fe72,
        0xa192d576b245165a,
        0x0a8787bf8ecb74b2,
        0x81b3e73d20b49b6f,
        0x7fa8220ba3b2ecea,
        0x245731c13ca42499,
        0xb78dbfaf3a8d83bd,
        0xea1ad565322a1a0b,
        0x60e61c23a3795013,
        0x6606d7e446282b93,
        0x6ca4ecb15c5f91e1,
        0x9f626da15c9625f3,
        0xe51b38608ef25f57,
        0x958a324ceb064572,
    ];

    /// SipHash-`c`-`d` of arbitrary bytes: the textbook definition, the
    /// reference the word-shaped [`sip13`] is checked against.
    fn hash_bytes(k: SipKey, msg: &[u8], c: usize, d: usize) -> u64 {
        let mut s = State::new(k.0, k.1);
        let mut chunks = msg.chunks_exact(8);
        for ch in &mut chunks {
            s.compress(le_word(ch), c);
        }
        s.compress(last_block(le_word(chunks.remainder()), msg.len() as u64), c);
        s.finish(d)
    }

    /// Up to 8 bytes as a little-endian word, zero above.
    fn le_word(bytes: &[u8]) -> u64 {
        bytes.iter().rev().fold(0, |w, &b| (w << 8) | u64::from(b))
    }

    /// The SipHash paper, appendix A: key 00..0f, message 00..0e (15 bytes).
    #[test]
    fn siphash24_paper_vector() {
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(hash_bytes(K, &msg, 2, 4), 0xa129_ca61_49be_45e5);
        assert_eq!(hash_bytes(K, &[], 2, 4), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn siphash24_reference_vectors() {
        let msg: Vec<u8> = (0u8..64).collect();
        for (len, &want) in VECTORS_24.iter().enumerate() {
            assert_eq!(hash_bytes(K, &msg[..len], 2, 4), want, "len {len}");
        }
    }

    /// SipHash-1-3 known answers (reference implementation, all-zero key).
    #[test]
    fn siphash13_vectors() {
        let zero = SipKey(0, 0);
        assert_eq!(hash_bytes(zero, b"", 1, 3), 0xd1fb_a762_150c_532c);
        assert_eq!(sip13(0, 0, &[], 0, 0), 0xd1fb_a762_150c_532c);
        assert_eq!(hash_bytes(zero, b"siphash", 1, 3), 0x8264_ceec_cb16_bcbe);
        assert_eq!(sip13(0, 0, &[], u64::from_le_bytes(*b"siphash\0"), 7), 0x8264_ceec_cb16_bcbe);
    }

    /// [`sip13`] equals the textbook definition over the same bytes, for
    /// every length the tables use (reassembly: IPv4 key 11 bytes, IPv6 36,
    /// source 4; flow table: 24 and 40) and more.
    #[test]
    fn sip13_words_equal_streaming() {
        let bytes: Vec<u8> = (0u8..40).map(|b| b.wrapping_mul(37).wrapping_add(5)).collect();
        for len in [0usize, 4, 8, 11, 16, 24, 36, 40] {
            let msg = &bytes[..len];
            let words: Vec<u64> = msg.chunks_exact(8).map(le_word).collect();
            let tail = le_word(&msg[words.len() * 8..]);
            assert_eq!(sip13(3, 4, &words, tail, len as u64), hash_bytes(SipKey(3, 4), msg, 1, 3), "len {len}");
        }
    }

    #[test]
    fn random_keys_differ() {
        assert_ne!(SipKey::random(), SipKey::random());
    }

    proptest! {
        /// SipHash-2-4 agrees with std's for any key and message.
        #[test]
        fn siphash24_matches_std(k0: u64, k1: u64, msg in proptest::collection::vec(any::<u8>(), 0..80)) {
            #[allow(deprecated)]
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            h.write(&msg);
            prop_assert_eq!(hash_bytes(SipKey(k0, k1), &msg, 2, 4), h.finish());
        }

        /// The word-shaped hash is SipHash-1-3 of its bytes.
        #[test]
        fn words_match_bytes(k0: u64, k1: u64, w: [u64; 5]) {
            let k = SipKey(k0, k1);
            let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(sip13(k0, k1, &w, 0, 40), hash_bytes(k, &bytes, 1, 3));
            prop_assert_eq!(sip13(k0, k1, &w[..3], 0, 24), hash_bytes(k, &bytes[..24], 1, 3));
        }

    }
}
