//! Differential test against etherparse's defragmenter (`IpDefragPool`):
//! both are fed the same random fragment streams (IPv4 and IPv6, several
//! datagrams interleaved in random order, some fragments repeated, some
//! lost) and must deliver the same multiset of reassembled payloads, each
//! equal to what was sent.
//!
//! No overlapping fragments: there the policies differ on purpose
//! (etherparse merges overlaps, the later copy winning; we drop the whole
//! datagram, RFC 5722, see the policy table in the crate docs). Every
//! datagram has its own source address, so the IPv4 max-distance rule
//! (which etherparse lacks) never fires, and fragments carry the whole UDP
//! header at offset 0 (our tiny-first rule, also absent from etherparse).

mod common;

use common::*;
use etherparse::defrag::IpDefragPool;
use etherparse::SlicedPacket;
use flowsteer_reasm::{DropReason, ReasmConfig, Verdict};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Random cut points (multiples of 8) of a `body`-byte fragmentable part
/// into 2..=max pieces: `(offset, len, more)`.
fn random_pieces(body: usize, rng: &mut Rng) -> Vec<(usize, usize, bool)> {
    let slots = (body - 1) / 8; // cut points 8, 16, .. below body
    let want = 1 + rng.below(slots.min(40));
    let mut cuts: Vec<usize> = (0..want).map(|_| 8 * (1 + rng.below(slots))).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for &c in cuts.iter().chain(std::iter::once(&body)) {
        out.push((start, c - start, c < body));
        start = c;
    }
    out
}

#[test]
fn differential_against_etherparse() {
    let mut rng = Rng(seed("differential_against_etherparse"));
    let cfg = ReasmConfig { max_frags: 1024, high_thresh: 64 << 20, low_thresh: 48 << 20, ..ReasmConfig::default() };
    let mut total_delivered = 0usize;
    for case in 0..1000 {
        let mut r = reasm_with(cfg);
        let mut pool: IpDefragPool = IpDefragPool::new();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut sent: Vec<Vec<u8>> = Vec::new();
        for d in 0..1 + rng.below(6) {
            let big = rng.below(4) == 0;
            let size = 1 + rng.below(if big { 9000 } else { 1500 });
            let body = size + 8;
            let pieces = random_pieces(body, &mut rng);
            let v6fam = rng.below(2) == 0;
            let src_n = (case as u32) << 8 | d as u32;
            let id = rng.next() as u32;
            let (whole, hdr, fr): (Vec<u8>, usize, Vec<Vec<u8>>) = if v6fam {
                let w = udp6(Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(src_n)), v6(2), &[], size);
                let f = pieces.iter().map(|&(o, l, m)| v6_frag(&w, 40, 6, id, o, l, m)).collect();
                (w, 40, f)
            } else {
                let w = udp4(Ipv4Addr::from(0x0a00_0000 | src_n), v4(10, 255, 0, 2), id as u16, size);
                let f = pieces.iter().map(|&(o, l, m)| v4_frag(&w, o, l, m)).collect();
                (w, 20, f)
            };
            sent.push(whole[hdr..].to_vec());
            for f in fr {
                match rng.below(20) {
                    0 => {}                                         // lost
                    1 | 2 => frames.extend([f.clone(), f.clone()]), // repeated
                    _ => frames.push(f),
                }
            }
        }
        rng.shuffle(&mut frames);

        let mut ours: Vec<Vec<u8>> = Vec::new();
        let mut theirs: Vec<Vec<u8>> = Vec::new();
        for f in &frames {
            let (v, out) = push(&mut r, f, 0);
            match v {
                Verdict::Complete { .. } | Verdict::Held | Verdict::Dropped(DropReason::Duplicate) => {}
                other => panic!("case {case}: unexpected verdict {other:?}"),
            }
            if let Some(dgram) = out {
                let hdr = if dgram[0] >> 4 == 4 { usize::from(dgram[0] & 0x0f) * 4 } else { 40 };
                ours.push(dgram[hdr..].to_vec());
            }
            let sliced = SlicedPacket::from_ethernet(f).expect("etherparse slices the fragment");
            match pool.process_sliced_packet(&sliced, (), ()) {
                Ok(Some(p)) => {
                    theirs.push(p.payload.clone());
                    pool.return_buf(p);
                }
                Ok(None) => {}
                Err(e) => panic!("case {case}: etherparse error {e:?}"),
            }
        }
        for p in &ours {
            assert!(sent.contains(p), "case {case}: delivered payload was never sent");
        }
        ours.sort();
        theirs.sort();
        assert_eq!(ours.len(), theirs.len(), "case {case}: delivered counts differ");
        assert!(ours == theirs, "case {case}: delivered payloads differ");
        total_delivered += ours.len();
        finish(&mut r);
    }
    println!("delivered {total_delivered} datagrams");
    assert!(total_delivered > 1000, "{total_delivered}");
}
