//! Unit tests that need the crate's internals: the accounting constants
//! against the real sizes, the IPv4 checksum update against the full
//! computation, and collisions aimed at the front table.

use std::net::IpAddr;

use super::*;
use crate::config::{DATAGRAM_OVERHEAD, NIL};
use crate::header::{fix_header, fix_ipv4_words};
use crate::queue::CopyBufs;

/// [`DATAGRAM_OVERHEAD`] covers the slab slot, its boxed copy buffers
/// and up to two bucket heads (plus 3 x 16 B of allocator headers); the
/// fragment charge covers two entries.
#[test]
fn datagram_overhead_covers_slot_and_entry() {
    let fixed =
        std::mem::size_of::<Queue<Vec<u8>>>() + std::mem::size_of::<CopyBufs>() + 2 * std::mem::size_of::<u32>() + 48;
    assert!(fixed <= DATAGRAM_OVERHEAD, "{fixed}");
    assert!(2 * std::mem::size_of::<Frag<u32>>() <= FRAG_OVERHEAD);
    assert!(Reassembler::<Vec<u8>>::frag_cost() >= 2 * std::mem::size_of::<Frag<Vec<u8>>>());
}

proptest::proptest! {
    /// The incremental checksum update gives exactly the full
    /// computation's checksum for any header whose checksum was right
    /// (options included), with or without CE; and a header whose
    /// checksum was wrong still fails verification afterwards.
    #[test]
    fn ipv4_checksum_update_is_the_full_computation(
        head in proptest::array::uniform20(proptest::num::u8::ANY),
        opts in proptest::collection::vec(proptest::num::u8::ANY, 0..=10),
        ip_len in 20usize..=65535,
        set_ce: bool,
        flip in 1u16..,
    ) {
        use flowsteer_wire::build::ipv4_header_checksum;
        let mut h = head.to_vec();
        h.extend(opts.iter().take(opts.len() / 4 * 4));
        h[0] = 0x40 | (h.len() / 4) as u8;
        let ck = ipv4_header_checksum(&h).to_be_bytes();
        [h[10], h[11]] = ck;
        let mut want = h.clone();
        [want[2], want[3]] = (ip_len as u16).to_be_bytes();
        want[6] &= 0x40;
        want[7] = 0;
        if set_ce {
            want[1] |= 3;
        }
        let full = ipv4_header_checksum(&want).to_be_bytes();
        [want[10], want[11]] = full;
        let mut got = h.clone();
        fix_header(Family::V4, &mut got, ip_len, set_ce, None);
        proptest::prop_assert_eq!(&got, &want);
        if let Some(a) = h.first_chunk_mut::<12>() {
            fix_ipv4_words(a, ip_len, set_ce);
            proptest::prop_assert_eq!(&h, &want);
        }
        // Corrupted on the way in (not merely the other one's complement
        // zero, 0xffff for 0x0000, which verifies): still detectably
        // corrupted, the one's complement sum of all its words not
        // 0xffff.
        let verifies = |h: &[u8]| {
            let sum: u32 = h.chunks_exact(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
            let sum = (sum & 0xffff) + (sum >> 16);
            (sum & 0xffff) + (sum >> 16) == 0xffff
        };
        let mut bad = head.to_vec();
        bad[0] = 0x45;
        [bad[10], bad[11]] = (ipv4_header_checksum(&bad) ^ flip).to_be_bytes();
        proptest::prop_assume!(!verifies(&bad));
        fix_header(Family::V4, &mut bad, ip_len, set_ce, None);
        proptest::prop_assert!(!verifies(&bad));
        proptest::prop_assert!(verifies(&want));
    }
}

/// HashDoS on the unkeyed front index: 2,000 IPv4 datagrams whose keys
/// all mix to the same word (source and id chosen to cancel out), so
/// they share one front entry at every table size. One queue sits in
/// front, the others go to the keyed table, whose SipHash chains stay
/// short; every datagram still completes, byte for byte, by copying and
/// zero-copy alike, and the counters add up.
#[test]
fn front_collisions_go_to_the_keyed_table() {
    use flowsteer_wire::{build, parse_frame, LinkType, ParseOptions};
    use std::net::Ipv4Addr;
    const N: u32 = 2000;
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
    let dst = Ipv4Addr::new(192, 0, 2, 9);
    let key_of = |k: u32| {
        let src = Ipv4Addr::from(0x4000_0000u32.wrapping_sub(k).to_ne_bytes());
        (src, k as u16)
    };
    let datagrams: Vec<Vec<Vec<u8>>> = (0..N)
        .map(|k| {
            let (src, id) = key_of(k);
            build::ipv4_fragments(src, dst, 1, 2, id, &payload, 1480)
        })
        .collect();
    let l3 = |f: &[u8]| parse_frame(f, LinkType::Ethernet, &ParseOptions::new()).unwrap().outer.unwrap();
    let key = |f: &[u8]| {
        let l = l3(f);
        match (l.tuple.src, l.tuple.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Key::v4(s, d, l.frag.unwrap().id, l.tuple.proto),
            _ => unreachable!(),
        }
    };
    // They do collide, whatever the table size.
    for shift in [60, 50, 40] {
        let i = key(&datagrams[0][0]).front_index(shift);
        assert!(datagrams.iter().all(|d| key(&d[0]).front_index(shift) == i));
    }
    let cfg = ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, ..ReasmConfig::default() };
    for owned in [false, true] {
        let mut r = Reassembler::with_seed(cfg, (3, 5)).unwrap();
        let mut out = Vec::new();
        let mut chain = Chain::new();
        let mut spare = Vec::new();
        let mut push = |r: &mut Reassembler, f: &Vec<u8>, out: &mut Vec<u8>| {
            if owned {
                let v = r.push_owned(f.clone(), &l3(f), 0, &mut chain, &mut spare);
                if let Verdict::Complete { .. } = v {
                    chain.copy_into(out);
                    chain.drain_buffers().for_each(drop);
                }
                v
            } else {
                r.push(f, &l3(f), 0, out)
            }
        };
        // First fragments of all, then the rest: all pending at once.
        for d in &datagrams {
            assert_eq!(push(&mut r, &d[0], &mut out), Verdict::Held);
        }
        assert_eq!(r.pending(), N as usize);
        let fi = key(&datagrams[0][0]).front_index(r.front_shift);
        assert_ne!(r.front[fi], NIL);
        assert_eq!(r.front_over[fi], N - 1);
        let longest = (0..r.buckets.len())
            .map(|b| {
                let (mut s, mut n) = (r.buckets[b], 0);
                while let Some(q) = r.queue(s) {
                    n += 1;
                    s = q.hnext;
                }
                n
            })
            .max()
            .unwrap();
        assert!(longest <= 12, "keyed chain of {longest}");
        for (k, d) in datagrams.iter().enumerate() {
            assert_eq!(push(&mut r, &d[1], &mut out), Verdict::Held);
            assert_eq!(push(&mut r, &d[2], &mut out), Verdict::Complete { fragments: 3 });
            let (src, id) = key_of(k as u32);
            let whole =
                build::FrameBuilder { ident: id, ..build::FrameBuilder::udp(src.into(), dst.into(), 1, 2, &payload) }
                    .ip_packet();
            assert_eq!(out, whole);
        }
        assert_eq!((r.pending(), r.mem_used(), r.front_over[fi]), (0, 0, 0));
        assert!(r.stats().conservation_ok());
        assert_eq!(r.stats().datagrams_completed, u64::from(N));
    }
}
