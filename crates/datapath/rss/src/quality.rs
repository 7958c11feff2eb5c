//! Key quality: does a key spread tuples evenly over buckets?
//!
//! [`spread_test`] hashes a fixed pseudo-random sample of IPv4 and IPv6
//! 4-tuples and runs a chi-square goodness-of-fit test against the uniform
//! distribution over [`SPREAD_BUCKETS`] buckets, on the low bits (what a RETA
//! uses) and on the high bits (what Linux RPS' `(hash * n) >> 32` uses). A key
//! fails when either statistic exceeds the critical value at p = 0.001. The
//! sample is deterministic, so a key's verdict is reproducible.

use crate::hashtype::HashInput;
use crate::key::{check_len, KeyError, KeyKind, RssKey};
use crate::toeplitz::Toeplitz;
use flowsteer_prim::SplitMix64;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

impl RssKey {
    /// A key of `len` bytes from OS randomness whose bucket spread passes the
    /// chi-square test of [`spread_test`]; keys that fail are
    /// drawn again (at most 16 times; a failure that often means the RNG is
    /// broken).
    pub fn random(len: usize) -> Result<RssKey, KeyError> {
        check_len(len)?;
        for _ in 0..DRAW_ATTEMPTS {
            let mut bytes = vec![0u8; len];
            getrandom::getrandom(&mut bytes).map_err(|e| KeyError::Randomness(e.to_string()))?;
            let key = RssKey::drawn(bytes, KeyKind::Random);
            if spread_test(&key).passed {
                return Ok(key);
            }
        }
        Err(KeyError::SpreadRejected { attempts: DRAW_ATTEMPTS })
    }

    /// A key of `len` bytes drawn from SplitMix64 seeded with `seed`
    /// (`flowsteer_prim::SplitMix64(seed)`): the bytes are its successive
    /// 64-bit outputs, each written big-endian, the last one cut to fit.
    /// A key that fails the spread test of [`spread_test`] is replaced by the
    /// next `len` bytes of the same stream (at most 16 times). The same seed
    /// and length give the same key on every platform; the key is only as
    /// secret as the seed ([`KeyKind::Seeded`]).
    pub fn from_seed(len: usize, seed: u64) -> Result<RssKey, KeyError> {
        check_len(len)?;
        let mut rng = SplitMix64(seed);
        for _ in 0..DRAW_ATTEMPTS {
            let mut bytes = Vec::with_capacity(len + 8);
            while bytes.len() < len {
                bytes.extend_from_slice(&rng.next_u64().to_be_bytes());
            }
            bytes.truncate(len);
            let key = RssKey::drawn(bytes, KeyKind::Seeded(seed));
            if spread_test(&key).passed {
                return Ok(key);
            }
        }
        Err(KeyError::SpreadRejected { attempts: DRAW_ATTEMPTS })
    }
}

/// Keys drawn before a run of spread-test failures is called a broken
/// generator.
const DRAW_ATTEMPTS: u32 = 16;

/// Buckets in the test (a 128-entry RETA).
pub const SPREAD_BUCKETS: usize = 128;
/// Tuples hashed (half IPv4, half IPv6).
pub const SPREAD_SAMPLES: usize = 16384;
/// Upper-tail probability at which a key is rejected.
pub const SPREAD_ALPHA: f64 = 0.001;

/// The verdict on a key.
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadReport {
    pub buckets: usize,
    pub samples: usize,
    /// Chi-square statistic over the low bits of the hash.
    pub chi2_low: f64,
    /// Chi-square statistic over the high bits of the hash.
    pub chi2_high: f64,
    /// Critical value at [`SPREAD_ALPHA`] with `buckets - 1` degrees of freedom.
    pub critical: f64,
    pub passed: bool,
    /// Distinct hash values in the sample: a symmetric key gives at most 65536.
    pub distinct_hashes: usize,
    /// Human-readable warnings (public key, symmetric key).
    pub warnings: Vec<String>,
}

/// Chi-square spread test of `key`.
pub fn spread_test(key: &RssKey) -> SpreadReport {
    let hasher = Toeplitz::new(key);
    let mut low = vec![0u64; SPREAD_BUCKETS];
    let mut high = vec![0u64; SPREAD_BUCKETS];
    let mut hashes = Vec::with_capacity(SPREAD_SAMPLES);
    let mut rng = SplitMix64(0x5eed_f10e_57ee_4000);
    for i in 0..SPREAD_SAMPLES {
        let input = if i % 2 == 0 {
            let (s, d) = (rng.next_u64() as u32, rng.next_u64() as u32);
            HashInput::build(
                IpAddr::V4(Ipv4Addr::from(s)),
                IpAddr::V4(Ipv4Addr::from(d)),
                Some((rng.next_u64() as u16, rng.next_u64() as u16)),
            )
        } else {
            let s = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            let d = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            HashInput::build(
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
                Some((rng.next_u64() as u16, rng.next_u64() as u16)),
            )
        };
        let h = hasher.hash(input.as_bytes());
        low[h as usize % SPREAD_BUCKETS] += 1;
        high[((u64::from(h) * SPREAD_BUCKETS as u64) >> 32) as usize] += 1;
        hashes.push(h);
    }
    hashes.sort_unstable();
    hashes.dedup();
    let chi2_low = chi_square_uniform(&low);
    let chi2_high = chi_square_uniform(&high);
    let critical = chi_square_critical(SPREAD_BUCKETS - 1, SPREAD_ALPHA);
    let mut warnings = Vec::new();
    if key.is_public() {
        warnings.push(
            "the Microsoft default key is public: anyone can plan tuples that all land on one queue; use --key random in production".to_string(),
        );
    }
    if key.is_symmetric() {
        warnings.push(
            "symmetric key: both directions of a flow share a queue, but the hash keeps only 16 bits of entropy (upper half == lower half)".to_string(),
        );
    }
    SpreadReport {
        buckets: SPREAD_BUCKETS,
        samples: SPREAD_SAMPLES,
        chi2_low,
        chi2_high,
        critical,
        passed: chi2_low <= critical && chi2_high <= critical,
        distinct_hashes: hashes.len(),
        warnings,
    }
}

/// Chi-square statistic of `counts` against a uniform expectation.
pub fn chi_square_uniform(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if counts.is_empty() || total == 0 {
        return 0.0;
    }
    let expected = total as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
}

/// Upper critical value of the chi-square distribution with `df` degrees of
/// freedom at tail probability `alpha` (Wilson-Hilferty approximation;
/// within 0.1 % of the exact value for df >= 30).
pub fn chi_square_critical(df: usize, alpha: f64) -> f64 {
    let k = df.max(1) as f64;
    let z = normal_upper_quantile(alpha);
    let a = 2.0 / (9.0 * k);
    k * (1.0 - a + z * a.sqrt()).powi(3)
}

#[allow(clippy::excessive_precision)]
/// z such that P(Z > z) = alpha for a standard normal Z (Acklam's rational
/// approximation, relative error < 1.2e-9).
fn normal_upper_quantile(alpha: f64) -> f64 {
    let p = (1.0 - alpha).clamp(1e-300, 1.0 - 1e-16);
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383577518672690e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] =
        [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let plow = 0.02425;
    if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_value_is_close_to_tables() {
        // Tables: chi2(127, 0.001) = 181.99; chi2(100, 0.05) = 124.34.
        assert!((chi_square_critical(127, 0.001) - 181.99).abs() < 0.5);
        assert!((chi_square_critical(100, 0.05) - 124.34).abs() < 0.3);
    }

    #[test]
    fn good_keys_pass_and_degenerate_keys_fail() {
        let ms = spread_test(&RssKey::microsoft());
        assert!(ms.passed, "{ms:?}");
        assert!(!ms.warnings.is_empty());
        let zero = spread_test(&RssKey::from_bytes(&[0u8; 40]).unwrap());
        assert!(!zero.passed);
        // A key whose only set bits sit past bit 40 never touches the
        // address bytes of IPv4 input much: still a terrible key.
        let mut sparse = [0u8; 40];
        sparse[39] = 1;
        assert!(!spread_test(&RssKey::from_bytes(&sparse).unwrap()).passed);
    }

    #[test]
    fn seeded_keys_repeat_and_follow_splitmix64() {
        let a = RssKey::from_seed(52, 7).unwrap();
        let b = RssKey::from_seed(52, 7).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 52);
        assert_eq!(a.kind(), KeyKind::Seeded(7));
        assert_ne!(a.as_bytes(), RssKey::from_seed(52, 8).unwrap().as_bytes());
        // The bytes are SplitMix64(seed)'s outputs, big-endian, in order;
        // a shorter key is a prefix of a longer one from the same seed.
        let mut rng = SplitMix64(7);
        let first: Vec<u8> = (0..2).flat_map(|_| rng.next_u64().to_be_bytes()).collect();
        assert_eq!(&a.as_bytes()[..16], &first[..]);
        assert_eq!(RssKey::from_seed(40, 7).unwrap().as_bytes(), &a.as_bytes()[..40]);
        // Read back as hex it is the same key (kind aside).
        let back = RssKey::parse_hex(&a.to_hex()).unwrap();
        assert_eq!(back.as_bytes(), a.as_bytes());
        assert!(matches!(RssKey::from_seed(20, 7), Err(KeyError::TooShort { len: 20 })));
    }

    #[test]
    fn symmetric_key_warns_and_has_16_bit_entropy() {
        let r = spread_test(&RssKey::symmetric(40).unwrap());
        assert!(r.warnings.iter().any(|w| w.contains("16 bits")));
        assert!(r.distinct_hashes <= 65536);
    }
}
