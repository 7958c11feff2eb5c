//! SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014; Vigna's public-domain `splitmix64.c`): a 64-bit
//! counter advanced by the golden-ratio increment and passed through a
//! finaliser. Not cryptographic; fast, with good statistical quality, and
//! fully determined by its seed, which is what the samples, generators and
//! test key sets built on it need: the same seed always gives the same
//! stream, on every platform.
//!
//! The stream is part of the behaviour of the crates that use it (a traffic
//! generator's flows, a key-quality verdict): the known answers below pin
//! it, so it cannot change unnoticed.

/// The SplitMix64 generator; the field is the current state (the seed).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The golden-ratio increment added to the state per output.
    pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        mix64(self.0)
    }
}

/// The SplitMix64 finaliser (Stafford's "Mix13" variant of murmur3's
/// `fmix64`): a bijection of `u64` in which every output bit depends on
/// every input bit. Also usable alone, to derive well-spread seeds from
/// consecutive numbers.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_seed_0() {
        // First outputs of the reference C implementation seeded with 0.
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.0, SplitMix64::GAMMA.wrapping_mul(2));
    }

    #[test]
    fn next_is_mix_of_the_advanced_state() {
        let mut r = SplitMix64(0x5eed);
        let s = 0x5eed_u64.wrapping_add(SplitMix64::GAMMA);
        assert_eq!(r.next_u64(), mix64(s));
        assert_eq!(r.clone().next_u64(), r.next_u64());
    }

    #[test]
    fn mix64_fixes_zero_and_spreads() {
        assert_eq!(mix64(0), 0);
        // One flipped input bit flips about half of the output bits.
        let flips: u32 = (0..64).map(|b| (mix64(1u64 << b) ^ mix64(0)).count_ones()).sum();
        assert!((64 * 24..64 * 40).contains(&flips), "{flips}");
    }
}
