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
//! SipHash-2-4's margin is for. 2-4 (the paper's recommendation) is here
//! for the known-answer tests and for callers that want it.
//!
//! Two shapes of input:
//!
//! * **Words** ([`hash_words`], [`hash_words3`], [`sip13`]): a message whose
//!   length is known up front, given as little-endian 64-bit words and a
//!   tail. No buffering, no branches on the length: the per-packet paths
//!   (flow table, reassembly table) use these.
//! * **Bytes** ([`hash_bytes`], and the streaming [`SipHasher`], a
//!   [`std::hash::Hasher`]): the textbook definition over any byte string.
//!
//! Both give the same answer for the same bytes (tested below), and
//! SipHash-2-4 agrees with the reference vectors and with std's
//! (deprecated) `SipHasher`.

use std::hash::{BuildHasher, Hasher};

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

/// SipHash-1-3 over `words` then the last block: the shared body of the
/// word-shaped hashes.
#[inline(always)]
fn words13(k0: u64, k1: u64, words: &[u64], last: u64) -> u64 {
    let mut s = State::new(k0, k1);
    for &w in words {
        s.compress(w, 1);
    }
    s.compress(last, 1);
    s.finish(3)
}

/// SipHash-1-3 of the `len`-byte message whose little-endian 64-bit words
/// are `words` followed by `tail` (the last `len % 8` bytes, zero above;
/// the caller keeps `words.len() == len / 8`). Equal to feeding those bytes
/// to [`SipHasher13`], without the streaming bookkeeping.
#[inline]
pub fn sip13(k0: u64, k1: u64, words: &[u64], tail: u64, len: u64) -> u64 {
    words13(k0, k1, words, last_block(tail, len))
}

/// SipHash-1-3 of the 24-byte message `w[0] ‖ w[1] ‖ w[2]` (little endian).
/// The flow table hashes an IPv4 key this way: its packed key without the
/// two all-zero address-high words; the length (24 vs 40) keeps the two
/// shapes in separate domains.
#[inline]
pub fn hash_words3(k: SipKey, words: [u64; 3]) -> u64 {
    words13(k.0, k.1, &words, last_block(0, 24))
}

/// SipHash-1-3 of the 40-byte message `words[0].to_le_bytes() ‖ ... ‖
/// words[4].to_le_bytes()`.
#[inline]
pub fn hash_words(k: SipKey, words: &[u64; 5]) -> u64 {
    words13(k.0, k.1, words, last_block(0, 40))
}

/// SipHash-`c`-`d` of arbitrary bytes: the textbook definition (SipHash-2-4
/// is `hash_bytes(k, msg, 2, 4)`, std's hasher `hash_bytes(k, msg, 1, 3)`).
pub fn hash_bytes(k: SipKey, msg: &[u8], c: usize, d: usize) -> u64 {
    let mut s = State::new(k.0, k.1);
    let mut chunks = msg.chunks_exact(8);
    for ch in &mut chunks {
        s.compress(u64::from_le_bytes(ch.try_into().unwrap_or([0; 8])), c);
    }
    s.compress(last_block(le_word(chunks.remainder()), msg.len() as u64), c);
    s.finish(d)
}

/// Up to 8 bytes as a little-endian word, zero above.
#[inline(always)]
fn le_word(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |w, &b| (w << 8) | u64::from(b))
}

/// Streaming SipHash-`C`-`D` with 64-bit output: `C` compression rounds per
/// word, `D` finalisation rounds. Bytes may arrive in any split; the answer
/// is that of [`hash_bytes`] over their concatenation. (Only the raw
/// [`Hasher::write`] bytes count: std's `Hash` impls add their own length
/// prefixes, so `Hash`ing a `&[u8]` differs from `write`-ing it.)
#[derive(Clone, Debug)]
pub struct SipHasher<const C: usize, const D: usize> {
    state: State,
    /// Pending bytes (little endian), `ntail` of them.
    tail: u64,
    ntail: u32,
    /// Bytes written so far (mod 2^64; only the low byte is hashed).
    length: u64,
}

/// SipHash-1-3: the tables' hasher (and std's `DefaultHasher` today).
pub type SipHasher13 = SipHasher<1, 3>;
/// SipHash-2-4: the paper's recommendation.
pub type SipHasher24 = SipHasher<2, 4>;

impl<const C: usize, const D: usize> SipHasher<C, D> {
    /// A hasher keyed with `(k0, k1)`.
    #[inline]
    pub fn new(k0: u64, k1: u64) -> Self {
        SipHasher { state: State::new(k0, k1), tail: 0, ntail: 0, length: 0 }
    }

    /// A hasher keyed with `k`.
    #[inline]
    pub fn with_key(k: SipKey) -> Self {
        Self::new(k.0, k.1)
    }

    fn write_byte(&mut self, b: u8) {
        self.tail |= u64::from(b) << (self.ntail.wrapping_mul(8) & 63);
        self.ntail = self.ntail.wrapping_add(1);
        if self.ntail == 8 {
            self.state.compress(self.tail, C);
            self.tail = 0;
            self.ntail = 0;
        }
    }
}

impl<const C: usize, const D: usize> Hasher for SipHasher<C, D> {
    fn write(&mut self, bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        let mut rest = bytes;
        while self.ntail != 0 {
            let Some((&b, r)) = rest.split_first() else { return };
            self.write_byte(b);
            rest = r;
        }
        let mut words = rest.chunks_exact(8);
        for w in words.by_ref() {
            self.state.compress(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])), C);
        }
        for &b in words.remainder() {
            self.write_byte(b);
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        if self.ntail == 0 {
            self.length = self.length.wrapping_add(8);
            self.state.compress(n, C);
        } else {
            self.write(&n.to_le_bytes());
        }
    }

    fn finish(&self) -> u64 {
        let mut s = self.state;
        s.compress(last_block(self.tail, self.length), C);
        s.finish(D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    fn streamed<const C: usize, const D: usize>(k: SipKey, parts: &[&[u8]]) -> u64 {
        let mut h = SipHasher::<C, D>::with_key(k);
        for p in parts {
            h.write(p);
        }
        h.finish()
    }

    /// The SipHash paper, appendix A: key 00..0f, message 00..0e (15 bytes).
    #[test]
    fn siphash24_paper_vector() {
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(hash_bytes(K, &msg, 2, 4), 0xa129_ca61_49be_45e5);
        assert_eq!(streamed::<2, 4>(K, &[&msg]), 0xa129_ca61_49be_45e5);
        // Split writes give the same answer.
        assert_eq!(streamed::<2, 4>(K, &[&msg[..3], &msg[3..11], &msg[11..]]), 0xa129_ca61_49be_45e5);
        assert_eq!(SipHasher24::new(K.0, K.1).finish(), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn siphash24_reference_vectors() {
        let msg: Vec<u8> = (0u8..64).collect();
        for (len, &want) in VECTORS_24.iter().enumerate() {
            assert_eq!(hash_bytes(K, &msg[..len], 2, 4), want, "len {len}");
            assert_eq!(streamed::<2, 4>(K, &[&msg[..len / 3], &msg[len / 3..len]]), want, "len {len}");
        }
    }

    /// SipHash-1-3 known answers (reference implementation, all-zero key).
    #[test]
    fn siphash13_vectors() {
        let zero = SipKey(0, 0);
        assert_eq!(SipHasher13::new(0, 0).finish(), 0xd1fb_a762_150c_532c);
        assert_eq!(hash_bytes(zero, b"", 1, 3), 0xd1fb_a762_150c_532c);
        assert_eq!(streamed::<1, 3>(zero, &[b"siphash"]), 0x8264_ceec_cb16_bcbe);
        assert_eq!(hash_bytes(zero, b"siphash", 1, 3), 0x8264_ceec_cb16_bcbe);
        assert_eq!(sip13(0, 0, &[], u64::from_le_bytes(*b"siphash\0"), 7), 0x8264_ceec_cb16_bcbe);
        // Word writes equal byte writes.
        let mut a = SipHasher13::new(1, 2);
        a.write_u64(0x0102_0304_0506_0708);
        a.write_u64(9);
        let w = 0x0102_0304_0506_0708u64.to_le_bytes();
        assert_eq!(a.finish(), streamed::<1, 3>(SipKey(1, 2), &[&w[..3], &w[3..], &9u64.to_le_bytes()]));
        // A word written after an odd byte count goes through the byte path.
        let mut b = SipHasher13::new(1, 2);
        b.write(&[7]);
        b.write_u64(9);
        let mut msg = vec![7u8];
        msg.extend_from_slice(&9u64.to_le_bytes());
        assert_eq!(b.finish(), hash_bytes(SipKey(1, 2), &msg, 1, 3));
    }

    /// [`sip13`] equals streaming the same bytes, for every tail length the
    /// reassembly table uses (IPv4 key 11 bytes, IPv6 36, source 4) and more.
    #[test]
    fn sip13_words_equal_streaming() {
        let bytes: Vec<u8> = (0u8..40).map(|b| b.wrapping_mul(37).wrapping_add(5)).collect();
        for len in [0usize, 4, 8, 11, 16, 36, 40] {
            let msg = &bytes[..len];
            let words: Vec<u64> = msg.chunks_exact(8).map(le_word).collect();
            let tail = le_word(&msg[words.len() * 8..]);
            let mut h = SipHasher13::new(3, 4);
            h.write(msg);
            assert_eq!(sip13(3, 4, &words, tail, len as u64), h.finish(), "len {len}");
        }
    }

    #[test]
    fn random_keys_differ() {
        assert_ne!(SipKey::random(), SipKey::random());
    }

    proptest! {
        /// SipHash-2-4 agrees with std's for any key and message.
        #[test]
        fn siphash24_matches_std(k0: u64, k1: u64, msg in proptest::collection::vec(any::<u8>(), 0..80), cut: usize) {
            #[allow(deprecated)]
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            h.write(&msg);
            let cut = cut % (msg.len() + 1);
            prop_assert_eq!(hash_bytes(SipKey(k0, k1), &msg, 2, 4), h.finish());
            prop_assert_eq!(streamed::<2, 4>(SipKey(k0, k1), &[&msg[..cut], &msg[cut..]]), h.finish());
        }

        /// The word-shaped hashes are SipHash-1-3 of their bytes.
        #[test]
        fn words_match_bytes(k0: u64, k1: u64, w: [u64; 5]) {
            let k = SipKey(k0, k1);
            let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(hash_words(k, &w), hash_bytes(k, &bytes, 1, 3));
            prop_assert_eq!(hash_words3(k, [w[0], w[1], w[2]]), hash_bytes(k, &bytes[..24], 1, 3));
            prop_assert_eq!(sip13(k0, k1, &w, 0, 40), hash_words(k, &w));
        }

        /// Any split of a message streams to the one-shot answer.
        #[test]
        fn streaming_any_split(k0: u64, k1: u64, msg in proptest::collection::vec(any::<u8>(), 0..64), a: usize, b: usize) {
            let (mut a, mut b) = (a % (msg.len() + 1), b % (msg.len() + 1));
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            let k = SipKey(k0, k1);
            prop_assert_eq!(streamed::<1, 3>(k, &[&msg[..a], &msg[a..b], &msg[b..]]), hash_bytes(k, &msg, 1, 3));
        }
    }
}
