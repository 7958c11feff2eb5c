//! The Toeplitz hash (Microsoft RSS), three ways.
//!
//! * [`reference`]: the bit-by-bit definition from the Microsoft RSS
//!   specification. Slow (about 60 ns per IPv4 4-tuple) and obviously right;
//!   it stays in the tree as the oracle every fast path is tested against.
//! * [`Impl::Table`]: one 256-entry table of 32-bit contributions per input
//!   byte position (the hash is linear over GF(2), so a byte's contribution
//!   does not depend on the other bytes). Portable; 36 KiB of tables for a
//!   40-byte key.
//! * [`Impl::Gfni`]: AVX-512 + GFNI, chosen at run time when the CPU has it
//!   (see [`crate::simd`]). A pair of inputs shares one pass in the batch API.
//!
//! Byte order: inputs are in wire (network) order, exactly as the fields
//! appear in the packet: source address, destination address, source port,
//! destination port. Key bits past the end of the key are zero, so a key
//! shorter than `input + 4` bytes is defined (NICs never do that; we do not
//! reject it here, [`crate::key::RssKey`] enforces the minimum length).

use crate::key::RssKey;
use crate::simd;

/// Longest input the SIMD path takes (IPv6 4-tuple); longer inputs use the
/// table.
pub const MAX_SIMD_INPUT: usize = simd::MAX_INPUT;

/// The bit-by-bit Toeplitz hash, as the Microsoft specification states it:
/// for every set input bit (MSB first), XOR in the 32 key bits that start at
/// that bit position.
pub fn reference(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |pos: usize| -> u32 {
        match key.get(pos / 8) {
            Some(b) => u32::from((b >> (7 - pos % 8)) & 1),
            None => 0,
        }
    };
    let mut window: u32 = (0..32).fold(0, |w, i| (w << 1) | key_bit(i));
    let mut result = 0u32;
    for (i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | key_bit(32 + i * 8 + bit);
        }
    }
    result
}

/// The 32 key bits starting at bit `pos` (bit 0 = MSB of key byte 0), bits
/// past the key being zero: the contribution of a set input bit at `pos`.
/// The hash is linear, so the table path and the planner are built from it.
pub fn key_window(key: &[u8], pos: usize) -> u32 {
    (0..32).fold(0u32, |w, i| {
        let p = pos + i;
        let bit = key.get(p / 8).map_or(0, |b| (b >> (7 - p % 8)) & 1);
        (w << 1) | u32::from(bit)
    })
}

/// Which implementation computes the hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Impl {
    Reference,
    Table,
    Gfni,
}

impl Impl {
    pub fn name(self) -> &'static str {
        match self {
            Impl::Reference => "reference",
            Impl::Table => "table",
            Impl::Gfni => "gfni-avx512",
        }
    }

    /// True when this CPU can run the implementation.
    pub fn is_available(self) -> bool {
        match self {
            Impl::Reference | Impl::Table => true,
            Impl::Gfni => simd::gfni_available(),
        }
    }

    /// Every implementation this CPU can run, reference first.
    pub fn available() -> Vec<Impl> {
        [Impl::Reference, Impl::Table, Impl::Gfni].into_iter().filter(|i| i.is_available()).collect()
    }

    /// The fastest implementation this CPU can run.
    pub fn best() -> Impl {
        if Impl::Gfni.is_available() {
            Impl::Gfni
        } else {
            Impl::Table
        }
    }
}

/// A Toeplitz hasher with a key expanded for one implementation.
///
/// Thread safety: immutable after construction; `Send + Sync`, share it by
/// reference or clone it per core (a clone copies the tables, which keeps
/// them in that core's cache).
#[derive(Clone)]
pub struct Toeplitz {
    key: Vec<u8>,
    imp: Impl,
    /// `table[p][v]`: contribution of byte value `v` at input position `p`.
    table: Vec<[u32; 256]>,
    gfni: Option<simd::GfniKey>,
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toeplitz").field("impl", &self.imp).field("key_len", &self.key.len()).finish()
    }
}

impl Toeplitz {
    /// The fastest implementation this CPU supports.
    pub fn new(key: &RssKey) -> Toeplitz {
        Toeplitz::with_impl(key, Impl::best())
    }

    /// A chosen implementation; falls back to the table when the CPU lacks
    /// it (check [`Toeplitz::implementation`]).
    pub fn with_impl(key: &RssKey, imp: Impl) -> Toeplitz {
        Toeplitz::from_key_bytes(key.as_bytes(), imp)
    }

    /// Like [`Toeplitz::with_impl`] for raw key bytes of any length (used by
    /// the long-input test vectors).
    pub fn from_key_bytes(key: &[u8], imp: Impl) -> Toeplitz {
        let key = key.to_vec();
        let table = if imp == Impl::Reference { Vec::new() } else { build_table(&key) };
        let gfni = if imp == Impl::Gfni { simd::GfniKey::new(&key) } else { None };
        let imp = match (imp, &gfni) {
            (Impl::Gfni, None) => Impl::Table,
            (other, _) => other,
        };
        Toeplitz { key, imp, table, gfni }
    }

    pub fn implementation(&self) -> Impl {
        self.imp
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Hash one input.
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        match self.imp {
            Impl::Reference => reference(&self.key, input),
            Impl::Table => self.hash_table(input),
            Impl::Gfni => match &self.gfni {
                Some(g) if input.len() <= MAX_SIMD_INPUT => g.hash(input),
                _ => self.hash_table(input),
            },
        }
    }

    /// Hash many inputs of the same length `N` (one hash type); `out` gets
    /// `min(inputs.len(), out.len())` results.
    #[inline]
    pub fn hash_batch<const N: usize>(&self, inputs: &[[u8; N]], out: &mut [u32]) {
        match (&self.gfni, self.imp) {
            (Some(g), Impl::Gfni) if N <= MAX_SIMD_INPUT => g.hash_batch(inputs, out),
            (_, Impl::Reference) => {
                for (o, i) in out.iter_mut().zip(inputs) {
                    *o = reference(&self.key, i);
                }
            }
            _ => {
                for (o, i) in out.iter_mut().zip(inputs) {
                    *o = self.hash_table_fixed(i);
                }
            }
        }
    }

    /// Hash many inputs of length `N`, each in its own single pass (no
    /// pairing): the single-hash path without a call per input.
    #[inline]
    pub fn hash_each<const N: usize>(&self, inputs: &[[u8; N]], out: &mut [u32]) {
        match (&self.gfni, self.imp) {
            (Some(g), Impl::Gfni) if N <= MAX_SIMD_INPUT => g.hash_each(inputs, out),
            _ => {
                for (o, i) in out.iter_mut().zip(inputs) {
                    *o = self.hash(i);
                }
            }
        }
    }

    #[inline]
    fn hash_table(&self, input: &[u8]) -> u32 {
        input.iter().zip(&self.table).fold(0, |h, (&b, t)| h ^ t[usize::from(b)])
    }

    #[inline]
    fn hash_table_fixed<const N: usize>(&self, input: &[u8; N]) -> u32 {
        match self.table.get(..N) {
            Some(t) => {
                let mut h = 0;
                for p in 0..N {
                    h ^= t[p][usize::from(input[p])];
                }
                h
            }
            None => self.hash_table(input),
        }
    }
}

fn build_table(key: &[u8]) -> Vec<[u32; 256]> {
    // Positions past the key contribute nothing (zero key bits), so the table
    // covers exactly the key's length.
    (0..key.len())
        .map(|p| {
            let mut row = [0u32; 256];
            // Contribution of each single bit, then linearity for the rest.
            let bit: [u32; 8] = std::array::from_fn(|j| key_window(key, 8 * p + j));
            for (v, entry) in row.iter_mut().enumerate() {
                *entry = (0..8).filter(|j| v & (0x80 >> j) != 0).fold(0, |h, j| h ^ bit[j]);
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::MICROSOFT_KEY;

    #[test]
    fn reference_matches_first_microsoft_vector() {
        // MS "Verifying the RSS Hash Calculation", IPv4 row 1.
        let input = [0x42, 0x09, 0x95, 0xbb, 0xa1, 0x8e, 0x64, 0x50, 0x0a, 0xea, 0x06, 0xe6];
        assert_eq!(reference(&MICROSOFT_KEY, &input), 0x51ccc178);
        assert_eq!(reference(&MICROSOFT_KEY, &input[..8]), 0x323e8fc2);
    }

    #[test]
    fn every_impl_agrees_on_long_inputs() {
        let key: Vec<u8> = MICROSOFT_KEY.iter().cycle().take(240).copied().collect();
        let data: Vec<u8> = (0..236).map(|i| i as u8).collect();
        for imp in Impl::available() {
            let t = Toeplitz::from_key_bytes(&key, imp);
            for len in 0..=data.len() {
                assert_eq!(t.hash(&data[..len]), reference(&key, &data[..len]), "{imp:?} len {len}");
            }
        }
    }
}
