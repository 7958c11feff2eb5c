//! AVX-512 + GFNI Toeplitz. The only module of this crate with `unsafe`.
//!
//! The algorithm (derived from the Toeplitz definition; DPDK's
//! `rte_thash_gfni` uses the same instruction in a different layout):
//!
//! Output bit `q` (0 = MSB) is `XOR_{i,j} in[i].bit(j) & K[8i + j + q]`, so the
//! contribution of input byte `i` to output byte `o` is an 8x8 bit matrix that
//! depends only on `m = i + o`: `M_m`, whose row `t` is the eight key bits
//! starting at bit `8m + t`. `GF2P8AFFINEQB` applies one 8x8 matrix per
//! 64-bit lane to each of the lane's eight bytes. We give lane `m` the matrix
//! `M_m` and fill its byte `o` with `in[m - o]` (one `VPERMB` of the input),
//! so that lane `m`, byte `o` holds exactly the contribution of `in[m-o]` to
//! output byte `o`. XOR-ing all lanes together leaves the four hash bytes in
//! bytes 0..3. Bytes 4..7 of each lane are free: the batch path puts a second
//! input there (`VPERMI2B` of two inputs), hashing two inputs per pass.
//!
//! Lanes needed: `n + 3` for an `n`-byte input (5 zmm for the 36-byte IPv6
//! 4-tuple, 2 for IPv4).

#![allow(unsafe_code)]

/// Longest input the SIMD path handles.
pub const MAX_INPUT: usize = 36;
const CHUNKS: usize = 5; // ceil((MAX_INPUT + 3) / 8)
const LANES: usize = CHUNKS * 8;

/// True when the CPU has AVX-512 F/BW/VBMI and GFNI.
pub fn gfni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
            && std::arch::is_x86_feature_detected!("gfni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A key expanded into per-lane GF(2) matrices plus the byte shuffles.
/// Only constructed when [`gfni_available`] is true, which is what makes the
/// `unsafe` calls below sound.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct GfniKey {
    matrices: [[u64; 8]; CHUNKS],
    single_idx: [[u8; 64]; CHUNKS],
    pair_idx: [[u8; 64]; CHUNKS],
}

impl GfniKey {
    /// `None` when the CPU lacks the instructions.
    pub fn new(key: &[u8]) -> Option<GfniKey> {
        if !gfni_available() {
            return None;
        }
        let byte = |i: usize| u16::from(key.get(i).copied().unwrap_or(0));
        let mut matrices = [[0u64; 8]; CHUNKS];
        let mut single_idx = [[0u8; 64]; CHUNKS];
        let mut pair_idx = [[0u8; 64]; CHUNKS];
        // Index 63 of the first input is always zero (inputs are at most 36
        // bytes and loaded with a zeroing mask).
        const ZERO: u8 = 63;
        for m in 0..LANES {
            let (c, q) = (m / 8, m % 8);
            let window = (byte(m) << 8) | byte(m + 1);
            let mut mat = 0u64;
            for t in 0..8 {
                mat |= u64::from(((window << t) >> 8) as u8) << (8 * t);
            }
            matrices[c][q] = mat;
            for o in 0..8 {
                let src = m as isize - (o % 4) as isize;
                let in_range = (0..MAX_INPUT as isize).contains(&src);
                single_idx[c][q * 8 + o] = if o < 4 && in_range { src as u8 } else { ZERO };
                pair_idx[c][q * 8 + o] = match (o < 4, in_range) {
                    (true, true) => src as u8,
                    (false, true) => 64 + src as u8,
                    _ => ZERO,
                };
            }
        }
        Some(GfniKey { matrices, single_idx, pair_idx })
    }

    /// Hash one input of at most [`MAX_INPUT`] bytes (longer: only the first
    /// `MAX_INPUT` bytes count; callers route longer inputs elsewhere).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        let n = input.len().min(MAX_INPUT);
        // SAFETY: a GfniKey exists only when the CPU has AVX-512F/BW/VBMI and
        // GFNI (checked in `new`); `n <= input.len()`.
        unsafe {
            match n {
                0..=5 => x86::hash_single::<1>(self, input.as_ptr(), n),
                6..=13 => x86::hash_single::<2>(self, input.as_ptr(), n),
                14..=21 => x86::hash_single::<3>(self, input.as_ptr(), n),
                22..=29 => x86::hash_single::<4>(self, input.as_ptr(), n),
                _ => x86::hash_single::<5>(self, input.as_ptr(), n),
            }
        }
    }

    /// Hash each input in its own pass (the single-hash path), looping
    /// inside target-feature code so the matrices stay in registers: the
    /// shape of DPDK's `static inline rte_thash_gfni()` called in a loop.
    #[inline]
    pub fn hash_each<const N: usize>(&self, inputs: &[[u8; N]], out: &mut [u32]) {
        let count = inputs.len().min(out.len());
        let (inputs, out) = (&inputs[..count], &mut out[..count]);
        // SAFETY: CPU features as in `hash`; arrays of N <= MAX_INPUT bytes
        // (larger N reads only the first MAX_INPUT bytes).
        unsafe {
            match (N.min(MAX_INPUT) + 3).div_ceil(8) {
                0..=1 => x86::each_single::<1, N>(self, inputs, out),
                2 => x86::each_single::<2, N>(self, inputs, out),
                3 => x86::each_single::<3, N>(self, inputs, out),
                4 => x86::each_single::<4, N>(self, inputs, out),
                _ => x86::each_single::<5, N>(self, inputs, out),
            }
        }
    }

    /// Hash equal-length inputs two per pass.
    #[inline]
    pub fn hash_batch<const N: usize>(&self, inputs: &[[u8; N]], out: &mut [u32]) {
        let count = inputs.len().min(out.len());
        let chunks = (N.min(MAX_INPUT) + 3).div_ceil(8);
        // SAFETY: CPU features as in `hash`; the pointers come from arrays of
        // N bytes and the loads are masked to N (<= MAX_INPUT) bytes.
        unsafe {
            match chunks {
                0..=1 => x86::hash_batch::<1, N>(self, &inputs[..count], &mut out[..count]),
                2 => x86::hash_batch::<2, N>(self, &inputs[..count], &mut out[..count]),
                3 => x86::hash_batch::<3, N>(self, &inputs[..count], &mut out[..count]),
                4 => x86::hash_batch::<4, N>(self, &inputs[..count], &mut out[..count]),
                _ => x86::hash_batch::<5, N>(self, &inputs[..count], &mut out[..count]),
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::GfniKey;
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    fn load_input(ptr: *const u8, n: usize) -> __m512i {
        let mask: u64 = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        // SAFETY: masked-off bytes are never read (AVX-512 masked loads
        // suppress faults); the caller guarantees `n` readable bytes.
        unsafe { _mm512_maskz_loadu_epi8(mask, ptr as *const i8) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    fn fold(acc: __m512i) -> u64 {
        let r256 = _mm256_xor_si256(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64::<1>(acc));
        let r128 = _mm_xor_si128(_mm256_castsi256_si128(r256), _mm256_extracti128_si256::<1>(r256));
        let r64 = _mm_xor_si128(r128, _mm_unpackhi_epi64(r128, r128));
        _mm_cvtsi128_si64(r64) as u64
    }

    /// # Safety
    /// CPU has AVX-512F/BW/VBMI + GFNI; `ptr` has `n <= 36` readable bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    pub unsafe fn hash_single<const C: usize>(key: &GfniKey, ptr: *const u8, n: usize) -> u32 {
        let data = load_input(ptr, n);
        let mut acc = _mm512_setzero_si512();
        for c in 0..C {
            // SAFETY: the arrays are 64 bytes each and 64-byte aligned.
            let (idx, mat) = unsafe {
                (
                    _mm512_load_si512(key.single_idx[c].as_ptr() as *const __m512i),
                    _mm512_load_si512(key.matrices[c].as_ptr() as *const __m512i),
                )
            };
            let x = _mm512_permutexvar_epi8(idx, data);
            acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8::<0>(x, mat));
        }
        (fold(acc) as u32).swap_bytes()
    }

    /// # Safety
    /// CPU has AVX-512F/BW/VBMI + GFNI; `N <= 36`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    pub unsafe fn each_single<const C: usize, const N: usize>(key: &GfniKey, inputs: &[[u8; N]], out: &mut [u32]) {
        let n = N.min(super::MAX_INPUT);
        for (o, i) in out.iter_mut().zip(inputs) {
            // SAFETY: as the caller's.
            *o = unsafe { hash_single::<C>(key, i.as_ptr(), n) };
        }
    }

    /// # Safety
    /// CPU has AVX-512F/BW/VBMI + GFNI; `N <= 36`; `inputs.len() == out.len()`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    pub unsafe fn hash_batch<const C: usize, const N: usize>(key: &GfniKey, inputs: &[[u8; N]], out: &mut [u32]) {
        let mut pairs = inputs.chunks_exact(2);
        let mut outs = out.chunks_exact_mut(2);
        for (pair, o) in (&mut pairs).zip(&mut outs) {
            let a = load_input(pair[0].as_ptr(), N);
            let b = load_input(pair[1].as_ptr(), N);
            let mut acc = _mm512_setzero_si512();
            for c in 0..C {
                // SAFETY: 64-byte, 64-byte aligned arrays.
                let (idx, mat) = unsafe {
                    (
                        _mm512_load_si512(key.pair_idx[c].as_ptr() as *const __m512i),
                        _mm512_load_si512(key.matrices[c].as_ptr() as *const __m512i),
                    )
                };
                let x = _mm512_permutex2var_epi8(a, idx, b);
                acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8::<0>(x, mat));
            }
            let q = fold(acc);
            o[0] = (q as u32).swap_bytes();
            o[1] = ((q >> 32) as u32).swap_bytes();
        }
        if let (Some(last), Some(o)) = (pairs.remainder().first(), outs.into_remainder().first_mut()) {
            // SAFETY: same preconditions as this function.
            *o = unsafe { hash_single::<C>(key, last.as_ptr(), N) };
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    use super::GfniKey;
    pub unsafe fn hash_single<const C: usize>(_: &GfniKey, _: *const u8, _: usize) -> u32 {
        unreachable!("GfniKey cannot be built off x86-64")
    }
    pub unsafe fn hash_batch<const C: usize, const N: usize>(_: &GfniKey, _: &[[u8; N]], _: &mut [u32]) {
        unreachable!("GfniKey cannot be built off x86-64")
    }
    pub unsafe fn each_single<const C: usize, const N: usize>(_: &GfniKey, _: &[[u8; N]], _: &mut [u32]) {
        unreachable!("GfniKey cannot be built off x86-64")
    }
}
