//! Keyed SipHash-1-3 (Aumasson & Bernstein) for the reassembly table, so it
//! can be seeded deterministically in tests
//! ([`crate::Reassembler::with_seed`]) and randomly in production
//! ([`crate::Reassembler::new`], keys from `getrandom`). A keyed hash keeps an
//! attacker who controls fragment ids and addresses from choosing colliding
//! keys (Crosby & Wallach, hash flooding).
//!
//! SipHash-1-3 (one compression round, three finalisation rounds) is the
//! variant std's `HashMap` and the per-core flow table use for the same
//! hash-flooding argument: the key is secret and random, the output never
//! leaves the process, so the attacker cannot run the offline cryptanalysis
//! that 2-4's margin is for. It stays a PRF even against an attacker who
//! learns bucket collisions through timing, which the faster
//! multiply-based keyed hashes (aHash's fallback, foldhash, NH/UMAC-style
//! universal hashing) do not claim. The cost is kept down instead: an
//! unkeyed front table in front of the keyed one (see the crate docs) holds
//! at most one queue per entry and counts the ones that collide there, so
//! a datagram is hashed only when its front entry holds another key (and
//! then at most once per fragment: [`sip13`] over the packed key, IPv4 11
//! bytes = one word plus the final block, 5 rounds; IPv6 36 bytes, 8
//! rounds), the hash is remembered in the queue so removal never hashes
//! again, and colliding in the front table only costs an attacker's
//! fragments the keyed lookup.

/// SipHash-1-3 of the `len`-byte message whose little-endian 64-bit words
/// are `words` followed by `tail` (the last `len % 8` bytes, zero above).
/// Equal to feeding those bytes to a streaming SipHash-1-3 (tested below),
/// without the streaming bookkeeping.
#[inline]
pub(crate) fn sip13(k0: u64, k1: u64, words: &[u64], tail: u64, len: u64) -> u64 {
    let mut s = SipHasher13::new(k0, k1);
    for &w in words {
        s.compress(w);
    }
    s.compress(((len & 0xff) << 56) | tail);
    s.v[2] ^= 0xff;
    for _ in 0..3 {
        SipHasher13::round(&mut s.v);
    }
    s.v[0] ^ s.v[1] ^ s.v[2] ^ s.v[3]
}

use std::hash::Hasher;

/// Streaming SipHash-c-d with 64-bit output: `C` compression rounds per
/// word, `D` finalisation rounds.
#[derive(Clone, Debug)]
pub(crate) struct SipHasher<const C: usize, const D: usize> {
    v: [u64; 4],
    tail: u64,
    ntail: u32,
    length: u64,
}

/// SipHash-1-3: the table's hasher.
pub(crate) type SipHasher13 = SipHasher<1, 3>;
/// SipHash-2-4 (the paper's recommendation; kept for the known-answer tests).
#[cfg(test)]
pub(crate) type SipHasher24 = SipHasher<2, 4>;

impl<const C: usize, const D: usize> SipHasher<C, D> {
    pub(crate) fn new(k0: u64, k1: u64) -> Self {
        SipHasher {
            v: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13);
        v[1] ^= v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16);
        v[3] ^= v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21);
        v[3] ^= v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17);
        v[1] ^= v[2];
        v[2] = v[2].rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        for _ in 0..C {
            Self::round(&mut self.v);
        }
        self.v[0] ^= m;
    }

    fn write_byte(&mut self, b: u8) {
        self.tail |= u64::from(b) << (self.ntail.wrapping_mul(8) & 63);
        self.ntail = self.ntail.wrapping_add(1);
        if self.ntail == 8 {
            let m = self.tail;
            self.compress(m);
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
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            self.compress(u64::from_le_bytes(a));
        }
        for &b in words.remainder() {
            self.write_byte(b);
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        if self.ntail == 0 {
            self.length = self.length.wrapping_add(8);
            self.compress(n);
        } else {
            self.write(&n.to_le_bytes());
        }
    }

    fn finish(&self) -> u64 {
        let mut s = self.clone();
        let b = ((s.length & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v[2] ^= 0xff;
        for _ in 0..D {
            Self::round(&mut s.v);
        }
        s.v[0] ^ s.v[1] ^ s.v[2] ^ s.v[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answer from the SipHash paper, appendix A: key 00..0f,
    /// message 00..0e (15 bytes) -> a129ca6149be45e5.
    #[test]
    fn siphash24_paper_vector() {
        let key: Vec<u8> = (0u8..16).collect();
        let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
        let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
        let msg: Vec<u8> = (0u8..15).collect();
        let mut h = SipHasher24::new(k0, k1);
        h.write(&msg);
        assert_eq!(h.finish(), 0xa129_ca61_49be_45e5);
        // Split writes give the same answer.
        let mut h = SipHasher24::new(k0, k1);
        h.write(&msg[..3]);
        h.write(&msg[3..11]);
        h.write(&msg[11..]);
        assert_eq!(h.finish(), 0xa129_ca61_49be_45e5);
    }

    /// First entry of the reference `vectors.h` (empty message).
    #[test]
    fn siphash24_empty_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let h = SipHasher24::new(k0, k1);
        assert_eq!(h.finish(), 0x726f_db47_dd0e_0e31);
    }

    /// SipHash-1-3 known answers (reference implementation, all-zero key).
    #[test]
    fn siphash13_vectors() {
        assert_eq!(SipHasher13::new(0, 0).finish(), 0xd1fb_a762_150c_532c);
        let mut h = SipHasher13::new(0, 0);
        h.write(b"siphash");
        assert_eq!(h.finish(), 0x8264_ceec_cb16_bcbe);
        // Word writes equal byte writes.
        let mut a = SipHasher13::new(1, 2);
        a.write_u64(0x0102_0304_0506_0708);
        a.write_u64(9);
        let mut b = SipHasher13::new(1, 2);
        b.write(&0x0102_0304_0506_0708u64.to_le_bytes()[..3]);
        b.write(&0x0102_0304_0506_0708u64.to_le_bytes()[3..]);
        b.write(&9u64.to_le_bytes());
        assert_eq!(a.finish(), b.finish());
    }

    /// The word-wise [`sip13`] equals streaming the same bytes, for every
    /// tail length the table uses (IPv4 key 11 bytes, IPv6 36, source 4).
    #[test]
    fn sip13_words_equal_streaming() {
        let bytes: Vec<u8> = (0u8..40).map(|b| b.wrapping_mul(37).wrapping_add(5)).collect();
        for len in [0usize, 4, 8, 11, 16, 36, 40] {
            let msg = &bytes[..len];
            let words: Vec<u64> = msg.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
            let rest = &msg[words.len() * 8..];
            let mut t = [0u8; 8];
            t[..rest.len()].copy_from_slice(rest);
            let mut h = SipHasher13::new(3, 4);
            h.write(msg);
            assert_eq!(sip13(3, 4, &words, u64::from_le_bytes(t), len as u64), h.finish(), "len {len}");
        }
    }
}
