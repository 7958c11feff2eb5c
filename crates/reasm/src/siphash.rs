//! Keyed SipHash-2-4 (Aumasson & Bernstein) as a [`BuildHasher`], so the
//! reassembly table can be seeded deterministically in tests
//! ([`crate::Reassembler::with_seed`]) and randomly in production
//! ([`crate::Reassembler::new`], keys from `getrandom`). A keyed hash keeps an
//! attacker who controls fragment ids and addresses from choosing colliding
//! keys (Crosby & Wallach; reliability check 17).

use std::hash::{BuildHasher, Hasher};

/// Builds [`SipHasher24`]s with a fixed 128-bit key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SipBuildHasher {
    pub(crate) k0: u64,
    pub(crate) k1: u64,
}

impl BuildHasher for SipBuildHasher {
    type Hasher = SipHasher24;

    fn build_hasher(&self) -> SipHasher24 {
        SipHasher24::new(self.k0, self.k1)
    }
}

/// Streaming SipHash-2-4 with 64-bit output.
#[derive(Clone, Debug)]
pub(crate) struct SipHasher24 {
    v: [u64; 4],
    tail: u64,
    ntail: u32,
    length: u64,
}

impl SipHasher24 {
    pub(crate) fn new(k0: u64, k1: u64) -> Self {
        SipHasher24 {
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

    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        Self::round(&mut self.v);
        Self::round(&mut self.v);
        self.v[0] ^= m;
    }
}

impl Hasher for SipHasher24 {
    fn write(&mut self, bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        for &b in bytes {
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

    fn finish(&self) -> u64 {
        let mut s = self.clone();
        let b = ((s.length & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v[2] ^= 0xff;
        for _ in 0..4 {
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
}
