//! The zero-copy path (`push_owned` / `Chain`): byte-for-byte equal to the
//! copying path over random orders (differential proptest), frames always
//! handed back (held, delivered, or returned in `spare`, never lost), the
//! same drop verdicts, and held frames charged against the memory bound.

mod common;

use common::*;
use flowsteer_reasm::{Chain, DropReason, ReasmConfig, Reassembler, Verdict, DATAGRAM_OVERHEAD, FRAG_OVERHEAD};
use flowsteer_wire::build::Ipv6Ext;
use proptest::prelude::*;

/// A frame handle that remembers which pushed frame it is, so tests can
/// check every frame comes back exactly once.
#[derive(Debug)]
struct Tagged {
    tag: usize,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Tagged {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// An owned-path reassembler plus the bookkeeping of which frames it holds.
struct Owned {
    r: Reassembler<Tagged>,
    out: Chain<Tagged>,
    spare: Vec<Tagged>,
    /// `back[tag]`: the frame came back (delivered and drained, or spare).
    back: Vec<bool>,
}

impl Owned {
    fn new(cfg: ReasmConfig) -> Self {
        Owned {
            r: Reassembler::with_seed_owning(cfg, (7, 11)).unwrap(),
            out: Chain::new(),
            spare: Vec::new(),
            back: Vec::new(),
        }
    }

    fn take_back(&mut self, f: Tagged) {
        assert!(!self.back[f.tag], "frame {} came back twice", f.tag);
        self.back[f.tag] = true;
    }

    /// Pushes `frame`; returns the verdict and, on completion, the
    /// linearised datagram (after checking the chain's shape). The delivered
    /// frames are taken back.
    fn push(&mut self, frame: &[u8], now: u64) -> (Verdict, Option<Vec<u8>>) {
        let tag = self.back.len();
        self.back.push(false);
        let before = self.spare.len();
        let v =
            self.r.push_owned(Tagged { tag, bytes: frame.to_vec() }, &l3(frame), now, &mut self.out, &mut self.spare);
        assert!(self.r.stats().conservation_ok(), "{:?}", self.r.stats());
        assert!(self.r.mem_used() <= self.r.config().high_thresh);
        match v {
            Verdict::Held | Verdict::Complete { .. } => {}
            _ => {
                // The frame itself comes back last.
                assert!(self.spare.len() > before, "{v:?}: frame not handed back");
                assert_eq!(self.spare.last().unwrap().tag, tag, "{v:?}: frame not last in spare");
            }
        }
        let got = if let Verdict::Complete { fragments } = v {
            assert_eq!(self.out.fragments(), fragments as usize);
            assert_eq!(self.out.iter().map(<[u8]>::len).sum::<usize>(), self.out.len());
            let mut flat = Vec::new();
            self.out.copy_into(&mut flat);
            assert_eq!(flat.len(), self.out.len());
            assert_eq!(&flat[..self.out.header().len()], self.out.header());
            let drained: Vec<Tagged> = self.out.drain_buffers().collect();
            // One frame per fragment, less the ones pushed by copying.
            assert!(drained.len() <= fragments as usize);
            assert!(self.out.is_empty());
            for f in drained {
                self.take_back(f);
            }
            Some(flat)
        } else {
            None
        };
        let spare: Vec<Tagged> = self.spare.drain(..).collect();
        for f in spare {
            self.take_back(f);
        }
        (v, got)
    }

    /// Flushes and checks every frame came back and nothing is accounted.
    fn finish(&mut self) {
        self.r.flush_into(&mut self.spare);
        let spare: Vec<Tagged> = self.spare.drain(..).collect();
        for f in spare {
            self.take_back(f);
        }
        assert!(self.back.iter().all(|&b| b), "frames not given back");
        assert_eq!((self.r.pending(), self.r.mem_used(), self.r.stats().pending), (0, 0, 0));
        assert!(self.r.stats().conservation_ok());
    }
}

/// The fragments of one datagram: the whole IP packet and its fragment
/// frames. IPv6 optionally with a Hop-by-Hop and a Routing header in the
/// unfragmentable part.
fn fragments(v6fam: bool, ext: bool, size: usize, fsize8: usize, id: u32, ecn: u8) -> (Vec<u8>, Vec<Vec<u8>>) {
    let body = size + 8;
    if v6fam {
        let exts = [Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::Routing { len: 24 }];
        let (w, unfrag, nh_field) =
            if ext { (udp6(v6(1), v6(2), &exts, size), 72, 48) } else { (udp6(v6(1), v6(2), &[], size), 40, 6) };
        let body = w.len() - unfrag;
        let fsize = (fsize8 * 8).min((body - 1) / 8 * 8).max(8);
        let f = pieces(body, fsize).iter().map(|&(o, l, m)| v6_frag(&w, unfrag, nh_field, id, o, l, m)).collect();
        (w, f)
    } else {
        let mut w = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), id as u16, size);
        w[1] = (w[1] & !3) | (ecn & 3);
        let ck = flowsteer_wire::build::ipv4_header_checksum(&w[..20]);
        w[10..12].copy_from_slice(&ck.to_be_bytes());
        let fsize = (fsize8 * 8).min((body - 1) / 8 * 8).max(8);
        let f = pieces(body, fsize).iter().map(|&(o, l, m)| v4_frag(&w, o, l, m)).collect();
        (w, f)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Same frames, same order, both paths: same verdicts, and every chain
    /// linearises to exactly the copying path's datagram (which is the
    /// original packet).
    #[test]
    fn chain_equals_copy_over_random_orders(
        size in 8usize..9000,
        fsize8 in 1usize..185,
        v6fam in any::<bool>(),
        ext in any::<bool>(),
        ecn in 0u8..4,
        seed in any::<u64>(),
        dups in proptest::collection::vec(any::<u16>(), 0..8),
    ) {
        let (whole, frames) = fragments(v6fam, ext, size, fsize8, 3, ecn);
        let mut order: Vec<usize> = (0..frames.len()).collect();
        for d in &dups {
            order.push(usize::from(*d) % frames.len());
        }
        let mut rng = Rng(seed);
        rng.shuffle(&mut order);
        let cfg = ReasmConfig { max_frags: 2048, ..ReasmConfig::default() };
        let mut copy = reasm_with(cfg);
        let mut own = Owned::new(cfg);
        let mut delivered = 0;
        for &i in &order {
            let (vc, oc) = push(&mut copy, &frames[i], 0);
            let (vo, oo) = own.push(&frames[i], 0);
            prop_assert_eq!(vc, vo);
            prop_assert_eq!(&oc, &oo);
            if let Some(o) = oo {
                prop_assert!(o == whole, "datagram differs from the original");
                delivered += 1;
            }
            prop_assert_eq!(copy.mem_used() == 0, own.r.mem_used() == 0);
        }
        prop_assert!(delivered >= 1);
        prop_assert_eq!(copy.stats().dropped_fragments, own.r.stats().dropped_fragments);
        finish(&mut copy);
        own.finish();
    }

    /// One queue fed partly by copying and partly by handing frames over
    /// delivers the same datagram either way it completes.
    #[test]
    fn mixed_queue_delivers_same_bytes(
        size in 8usize..6000,
        fsize8 in 1usize..100,
        v6fam in any::<bool>(),
        seed in any::<u64>(),
        owned_mask in any::<u64>(),
    ) {
        let (whole, frames) = fragments(v6fam, false, size, fsize8, 9, 0);
        let mut order: Vec<usize> = (0..frames.len()).collect();
        let mut rng = Rng(seed);
        rng.shuffle(&mut order);
        let cfg = ReasmConfig { max_frags: 2048, ..ReasmConfig::default() };
        let mut own = Owned::new(cfg);
        let mut got = None;
        for (k, &i) in order.iter().enumerate() {
            if owned_mask >> (k % 64) & 1 == 1 {
                let (v, o) = own.push(&frames[i], 0);
                let ok = matches!(v, Verdict::Held | Verdict::Complete { .. });
                prop_assert!(ok, "unexpected {:?}", v);
                got = got.or(o);
            } else {
                let mut out = Vec::new();
                let v = own.r.push(&frames[i], &l3(&frames[i]), 0, &mut out);
                let ok = matches!(v, Verdict::Held | Verdict::Complete { .. });
                prop_assert!(ok, "unexpected {:?}", v);
                if matches!(v, Verdict::Complete { .. }) {
                    // Held frames of a queue completed by copying are dropped.
                    for b in own.back.iter_mut() {
                        *b = true;
                    }
                    got = Some(out);
                }
            }
        }
        prop_assert!(got.as_ref() == Some(&whole));
        own.finish();
    }
}

/// The counters both paths must agree on (memory aside: the copying path
/// charges buffer capacity, the zero-copy one frame lengths).
fn counters(r: &flowsteer_reasm::ReasmStats) -> impl PartialEq + std::fmt::Debug {
    let mut s = r.clone();
    s.mem_high_watermark = 0;
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random fragments of a few keys and sources (overlaps, duplicates,
    /// bad lengths, tiny first fragments, ECN mixes, clock jumps past the
    /// timeout, stale queues, a full table, the fragment cap) through both
    /// paths: the same verdict for every push, the same delivered bytes,
    /// the same counters. The zero-copy path's fast paths decide without
    /// side effects and must agree with the general path every time.
    #[test]
    fn owned_and_copy_agree_on_garbage(
        ops in proptest::collection::vec(
            (0u8..6, 0u8..10, 0usize..24, 0usize..48, any::<bool>(), 0u8..4, 0u8..12), 1..200),
        v6fam in any::<bool>(),
        cfg_sel in 0u8..3,
    ) {
        let big = 64 << 20;
        let cfg = match cfg_sel {
            0 => ReasmConfig { high_thresh: big, low_thresh: big, ..ReasmConfig::default() },
            1 => ReasmConfig { high_thresh: big, low_thresh: big, max_datagrams: 3, max_frags: 5, max_dist: 4, ..ReasmConfig::default() },
            _ => ReasmConfig { high_thresh: big, low_thresh: big, max_frags: 3, max_dist: 1, ..ReasmConfig::default() },
        };
        let mut copy = reasm_with(cfg);
        let mut own = Owned::new(cfg);
        let data = payload(600);
        let mut now = 0u64;
        for (key, kind, a, b, more, ecn, dt) in ops {
            now += match dt { 0 => 1_000_000_000, 1 => 40_000_000_000, _ => 0 };
            // Mostly pieces of a fixed split of the key's datagram (so
            // datagrams complete), some with another ECN; else garbage:
            // any offset, any length (bad lengths when not a multiple of
            // 8), any MF.
            let (offset, len, more, ecn) = if kind < 9 {
                let total = 8 * (2 + 2 * usize::from(key));
                let split = pieces(total, 8 * (1 + usize::from(key % 3)));
                let (o, l, m) = split[a % split.len()];
                (o, l, m, if kind == 8 { ecn } else { 0 })
            } else {
                (a * 8, if a % 2 == 0 { b } else { b * 8 }, more, ecn)
            };
            let body = &data[offset..offset + len];
            let frame = if v6fam {
                let w = udp6(v6(1 + u16::from(key % 3)), v6(100), &[], 2000);
                v6_frag_data(&w, 40, 6, u32::from(key), offset, more, body)
            } else {
                let mut w = udp4(v4(10, 0, 0, 1 + key % 3), v4(10, 0, 0, 100), u16::from(key), 2000);
                w[1] = (w[1] & !3) | ecn;
                v4_frag_data(&w, offset, more, body, ecn)
            };
            if flowsteer_wire::parse_frame(&frame, flowsteer_wire::LinkType::Ethernet, &Default::default()).is_err() {
                continue;
            }
            let (vc, oc) = push(&mut copy, &frame, now);
            let (vo, oo) = own.push(&frame, now);
            prop_assert_eq!(vc, vo);
            prop_assert_eq!(oc, oo);
            prop_assert_eq!(counters(copy.stats()), counters(own.r.stats()));
            prop_assert_eq!(copy.pending(), own.r.pending());
        }
        finish(&mut copy);
        own.finish();
        prop_assert_eq!(counters(copy.stats()), counters(own.r.stats()));
    }
}

#[test]
fn held_frames_are_charged_by_length() {
    let (_, frames) = fragments(false, false, 4416, 185, 1, 0);
    let mut own = Owned::new(ReasmConfig::default());
    assert_eq!(own.push(&frames[0], 0).0, Verdict::Held);
    let entry = FRAG_OVERHEAD.max(2 * std::mem::size_of::<(u16, u16, bool, usize, u32)>());
    let used = own.r.mem_used();
    assert!(used >= DATAGRAM_OVERHEAD + frames[0].len() + FRAG_OVERHEAD, "{used}");
    assert!(used <= DATAGRAM_OVERHEAD + frames[0].len() + 2 * entry.max(128), "{used}");
    own.finish();
}

#[test]
fn drops_hand_every_frame_back() {
    let (_, frames) = fragments(false, false, 1800 - 8, 75, 1, 0);
    let mut own = Owned::new(ReasmConfig::default());
    // Duplicate: the frame comes back, the queue lives on.
    assert_eq!(own.push(&frames[0], 0).0, Verdict::Held);
    assert_eq!(own.push(&frames[0], 0).0, Verdict::Dropped(DropReason::Duplicate));
    assert_eq!(own.r.pending(), 1);
    // Overlap: a fragment overlapping the held one kills the queue; both
    // frames come back (checked by `Owned::push`), memory is freed.
    let whole = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 1, 1800 - 8);
    let bad = v4_frag(&whole, 296, 600, true);
    assert_eq!(own.push(&bad, 0).0, Verdict::Dropped(DropReason::Overlap));
    assert_eq!((own.r.pending(), own.r.mem_used()), (0, 0));
    // Not a fragment: handed back unchanged.
    let plain =
        flowsteer_wire::build::FrameBuilder::udp(v4(1, 2, 3, 4).into(), v4(5, 6, 7, 8).into(), 1, 2, b"x").build();
    assert_eq!(own.push(&plain, 0).0, Verdict::NotFragment);
    // Malformed: handed back.
    let mut short = frames[1].clone();
    short.truncate(short.len() - 1);
    assert!(matches!(own.push(&short, 0).0, Verdict::Dropped(_)));
    // Timeout: expire_into hands the held frames back.
    assert_eq!(own.push(&frames[1], 0).0, Verdict::Held);
    let n = own.r.expire_into(31_000_000_000, &mut own.spare);
    assert_eq!(n, 1);
    assert_eq!(own.spare.len(), 1);
    own.finish();
    assert_eq!(own.r.stats().dropped(DropReason::TimedOut), 1);
}

/// A flood of never-completing held frames stays under the memory bound,
/// evicted frames come back, and the legitimate datagrams complete.
#[test]
fn owned_flood_is_bounded() {
    let high = 256 << 10;
    let cfg = ReasmConfig { high_thresh: high, low_thresh: high / 4 * 3, ..ReasmConfig::default() };
    let mut own = Owned::new(cfg);
    let victim = v4(192, 0, 2, 1);
    let mut completed = 0;
    for i in 0..3000u32 {
        let whole = udp4(v4(10, 9, (i >> 8) as u8, i as u8), victim, i as u16, 4416 - 8);
        let mid = v4_frag(&whole, 1480, 1480, true);
        assert_eq!(own.push(&mid, u64::from(i)).0, Verdict::Held);
        if i % 10 == 0 {
            let legit = udp4(v4(10, 1, 0, 1), victim, (i / 10) as u16, 4416 - 8);
            for (o, l, m) in pieces(4416, 1480) {
                if let (Verdict::Complete { .. }, Some(d)) = own.push(&v4_frag(&legit, o, l, m), u64::from(i)) {
                    assert_eq!(d, legit);
                    completed += 1;
                }
            }
        }
        assert!(own.r.mem_used() <= high);
    }
    assert_eq!(completed, 300);
    assert!(own.r.stats().dropped(DropReason::Evicted) > 2000);
    own.finish();
}
