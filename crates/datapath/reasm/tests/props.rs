//! Property tests: random orders, duplicates, overlaps and garbage never
//! panic, never exceed the memory bound and keep the counters conserved
//! (checks 19, 20); valid fragment sets with duplicates reassemble
//! byte-exact.

mod common;

use common::*;
use flowsteer_reasm::{DropReason, ReasmConfig, Verdict};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any permutation of a valid fragment set, with any fragments repeated,
    /// gives exactly one byte-exact datagram.
    #[test]
    fn shuffled_with_duplicates_reassembles(
        size in 8usize..9000,
        fsize8 in 1usize..185,
        v6fam in any::<bool>(),
        seed in any::<u64>(),
        dups in proptest::collection::vec(any::<u16>(), 0..8),
    ) {
        let body = size + 8;
        let fsize = (fsize8 * 8).min((body - 1) / 8 * 8).max(8);
        let (whole, frames): (Vec<u8>, Vec<Vec<u8>>) = if v6fam {
            let w = udp6(v6(1), v6(2), &[], size);
            let f = pieces(body, fsize).iter().map(|&(o, l, m)| v6_frag(&w, 40, 6, 3, o, l, m)).collect();
            (w, f)
        } else {
            let w = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 3, size);
            let f = pieces(body, fsize).iter().map(|&(o, l, m)| v4_frag(&w, o, l, m)).collect();
            (w, f)
        };
        let mut order: Vec<usize> = (0..frames.len()).collect();
        for d in &dups {
            order.push(usize::from(*d) % frames.len());
        }
        let mut rng = Rng(seed);
        rng.shuffle(&mut order);
        let mut r = reasm_with(ReasmConfig { max_frags: 2048, ..ReasmConfig::default() });
        let mut outs = vec![];
        for &i in &order {
            let (v, out) = push(&mut r, &frames[i], 0);
            let expected = matches!(v, Verdict::Held | Verdict::Complete { .. } | Verdict::Dropped(DropReason::Duplicate));
            prop_assert!(expected, "unexpected verdict {:?}", v);
            outs.extend(out);
        }
        // Duplicates after completion start a fresh queue, which completes
        // again (correctly) only if they happen to form a whole set.
        prop_assert!(!outs.is_empty());
        prop_assert!(outs.iter().all(|o| *o == whole));
        finish(&mut r);
    }

    /// Random fragments of a few keys (random offsets, lengths, MF, ECN,
    /// clock jumps): no panic, memory bound, conservation after every push,
    /// and nothing left after flush.
    #[test]
    fn garbage_fragments_conserve(
        ops in proptest::collection::vec((0u8..4, 0usize..200, 0usize..40, any::<bool>(), 0u8..4, 0u64..5), 1..128),
        v6fam in any::<bool>(),
        small in any::<bool>(),
    ) {
        let cfg = if small {
            ReasmConfig { high_thresh: 4000, low_thresh: 2000, max_frags: 5, max_datagrams: 3, ..ReasmConfig::default() }
        } else {
            ReasmConfig::default()
        };
        let mut r = reasm_with(cfg);
        let w4 = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 0, 2000);
        let w6 = udp6(v6(1), v6(2), &[], 2000);
        let data = payload(400);
        let mut now = 0u64;
        for (key, off8, len, more, ecn, dt) in ops {
            now += dt * 10_000_000_000;
            let offset = off8 * 8;
            let frame = if v6fam {
                v6_frag_data(&w6, 40, 6, u32::from(key), offset, more, &data[..len * 3])
            } else {
                let mut w = w4.clone();
                w[5] = key;
                v4_frag_data(&w, offset, more, &data[..len * 3], ecn)
            };
            let Ok(p) = flowsteer_wire::parse_frame(&frame, flowsteer_wire::LinkType::Ethernet, &Default::default()) else {
                continue;
            };
            let l3 = p.outer.unwrap();
            let mut out = Vec::new();
            let _ = r.push(&frame, &l3, now, &mut out);
            prop_assert!(r.stats().conservation_ok());
            prop_assert!(r.mem_used() <= r.config().high_thresh);
        }
        r.expire(now + 1_000_000_000_000);
        prop_assert_eq!(r.pending(), 0);
        prop_assert_eq!(r.mem_used(), 0);
        finish(&mut r);
    }
}
