//! Every fast path equals the bit-by-bit reference: at least 10,000 random
//! key/input pairs for each implementation, each key length (40 and 52) and
//! each input length from 8 to 36 bytes, single and batch.

use flowsteer_prim::SplitMix64;
use flowsteer_rss::{reference, Impl, Toeplitz};
use proptest::prelude::*;

const PAIRS_PER_CASE: usize = 10_000;

fn fill(rng: &mut SplitMix64, buf: &mut [u8]) {
    for b in buf.iter_mut() {
        *b = rng.next_u64() as u8;
    }
}

fn check_len<const N: usize>(key_len: usize, rng: &mut SplitMix64) {
    let mut key = vec![0u8; key_len];
    // A new key every 100 inputs: 100 keys x 100 inputs per (impl, key len, input len).
    let mut inputs = vec![[0u8; N]; 100];
    for _ in 0..PAIRS_PER_CASE / 100 {
        fill(rng, &mut key);
        for i in inputs.iter_mut() {
            fill(rng, i);
        }
        let want: Vec<u32> = inputs.iter().map(|i| reference(&key, i)).collect();
        for imp in Impl::available().into_iter().filter(|i| *i != Impl::Reference) {
            let t = Toeplitz::from_key_bytes(&key, imp);
            for (i, w) in inputs.iter().zip(&want) {
                assert_eq!(t.hash(i), *w, "{imp:?} key {key_len} len {N} key {key:02x?} input {i:02x?}");
            }
            let mut out = vec![0u32; inputs.len()];
            t.hash_batch(&inputs, &mut out);
            assert_eq!(&out, &want, "{imp:?} batch key {key_len} len {N}");
            out.fill(0);
            t.hash_each(&inputs, &mut out);
            assert_eq!(&out, &want, "{imp:?} each key {key_len} len {N}");
        }
    }
}

macro_rules! every_len {
    ($key_len:expr, $rng:expr, $($n:literal)*) => { $( check_len::<$n>($key_len, $rng); )* };
}

#[test]
fn fast_paths_equal_reference_40_byte_keys() {
    let mut rng = SplitMix64(40);
    every_len!(40, &mut rng, 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36);
}

#[test]
fn fast_paths_equal_reference_52_byte_keys() {
    let mut rng = SplitMix64(52);
    every_len!(52, &mut rng, 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn any_key_any_input(key in proptest::collection::vec(any::<u8>(), 40..=64),
                         input in proptest::collection::vec(any::<u8>(), 0..=60)) {
        let want = reference(&key, &input);
        for imp in Impl::available() {
            prop_assert_eq!(Toeplitz::from_key_bytes(&key, imp).hash(&input), want);
        }
    }
}
